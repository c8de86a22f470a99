"""The interpreter without its BLAS and LAPACK hooks, for a block: the factorisations then raise
"... needs LAPACK", and products run tidu's own loops."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tidu import _eval, evaluator


@contextmanager
def without_lapack() -> Iterator[None]:
    """The hooks cleared inside the block (loaded first, so clearing is what the block sees),
    loaded again after it, whatever happens in it."""
    evaluator.ensure_blas()
    try:
        _eval.clear_blas()
        yield
    finally:
        evaluator.BLAS = None
        evaluator.ensure_blas()
