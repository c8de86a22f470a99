"""What ``tidu.jit(f).lower(*args)`` returns (``Lowered``): the compiled program for given argument
shapes and dtypes, to call, save, print or hand to C++ (``tidu.api.runtime.make_jaxpr`` gives it
under jax's name)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from tidu.api.tree import flatten_args as _flatten_args
from tidu.api.tree import unflatten

__all__ = ["Lowered", "output_builder"]


def output_builder(tree) -> Callable[[list], Any]:
    """A function from a program's flat outputs to fn's output structure (the common shapes,
    one array or a flat tuple of them, without walking the tree per call)."""
    if tree is None:
        return lambda res: res[0]
    if tree[0] is tuple and all(c is None for c in tree[1]):
        return tuple
    return functools.partial(unflatten, tree)


class Lowered:
    """The compiled program behind a jitted function for given argument shapes and dtypes:
    ``tidu.jit(f).lower(*args)`` (and ``tidu.jit(tidu.grad(f)).lower(*args)``).

    Attributes:
        program: the tidu.CompiledProgram (its ``inputs`` are tidu's own keys).
        inputs: the name of each program input, in the order the program (and a C++ caller of
            the saved file) takes them: the parameter name of fn (``x``), with the path into a
            tuple/list/dict argument (``params['w']``, ``xs[0]``).  An argument fn never reads
            is not an input.
        in_avals: each input's shape and dtype, in that order.
        outputs: how many outputs the program has (fn's output leaves in flattening order).
    """

    def __init__(self, program, out_tree, flat_names: list[str]):
        self.program = program
        self._leaf = [key[1] for key in program.inputs]  # each input's leaf index
        self.inputs = [flat_names[i] for i in self._leaf]
        self.in_avals = [k.aval for k in program.input_vals]
        self.outputs = len(program.outputs)
        self._build = output_builder(out_tree)

    def input_names(self) -> list[str]:
        """The inputs' names in program order (as ``tidu::Program::input_names()`` reads them
        from the saved file)."""
        return list(self.inputs)

    def save(self, path) -> None:
        """Write the program as a .tidu file for ``tidu.load`` or C++ ``tidu::Program::load``;
        the file carries the input names of ``self.inputs``."""
        self.program.save(path, input_names=self.inputs)

    def as_stablehlo(self, batch: int | None = None) -> str:
        """The program as StableHLO MLIR text, ``@main`` taking ``self.inputs`` in order."""
        return self.program.as_stablehlo(batch)

    def to_dot(self) -> str:
        """The program as Graphviz DOT text."""
        return self.program.to_dot()

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        """jax's ``Lowered.as_text``: ``dialect`` None or "stablehlo" (jax's default) gives the
        StableHLO text of ``as_stablehlo()``; "tidu" gives tidu's own instruction listing (what
        ``str(lowered)`` prints: one line per instruction, ``v3 = Mul(v1, v2) mode=Primal``).
        jax's "hlo" and "mhlo" dialects are XLA's own forms, which tidu does not produce.
        ``debug_info`` is accepted for jax's signature (tidu's text carries no source
        locations)."""
        del debug_info
        if dialect in (None, "stablehlo"):
            return self.as_stablehlo()
        if dialect == "tidu":
            return str(self)
        raise ValueError(f"as_text: unknown dialect {dialect!r}; tidu gives 'stablehlo' (the "
                         f"default) or 'tidu' (its instruction listing)")

    def compile(self, compiler_options: dict | None = None) -> "Lowered":
        """jax's ``Lowered.compile()``.  A tidu Lowered is compiled already (its ``program``
        runs as it is), so this returns self: ``jit(f).lower(x).compile()(x)`` works as in
        jax.  ``compiler_options`` (XLA flags in jax) are not taken."""
        if compiler_options:
            raise NotImplementedError("Lowered.compile: compiler_options are XLA's; tidu's "
                                      "program is compiled already and takes none")
        return self

    def __str__(self) -> str:
        names = "\n".join(f"# input {v} {n}: {a}" for v, (n, a) in
                          enumerate(zip(self.inputs, self.in_avals)))
        return f"{names}\n{self.program.graph}" if names else str(self.program.graph)

    def __call__(self, *args) -> Any:
        """Evaluate at these arguments (same structure, shapes and dtypes as lowered)."""
        leaves, _ = _flatten_args(args)
        return self._build(self.program.eval([leaves[i] for i in self._leaf]))

    def __repr__(self) -> str:
        ins = ", ".join(f"{n}: {a}" for n, a in zip(self.inputs, self.in_avals))
        n = self.program.n_instructions
        return f"Lowered({ins}) -> {self.outputs} outputs, {n} instructions"


