"""numpy names on traced values (jax.numpy's own split): ``core`` (one-primitive functions and the
helpers the others share), ``ufuncs``, ``sorting`` (reductions and orderings), ``shapes``,
``creation``, ``einsum`` (with the contractions), ``indexing``, ``linalg``, ``fft``, ``nn``,
``scipy`` and ``dispatch`` (numpy's own functions on traced values). Importing it hands the tracer
its methods (``array_methods``)."""

from __future__ import annotations

from tidu.numpy import array_methods as array_methods
