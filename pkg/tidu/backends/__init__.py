"""Where a program runs: the C++ interpreter (``interpreter``), XLA (``xla``), the
CompiledProgram that chooses between them (``program``) and pictures of programs
(``pictures``). This layer names no primitive: it reads the ones it is handed."""
