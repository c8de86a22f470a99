"""``td.linalg``: linear algebra with derivatives, after ``jax.numpy.linalg`` and
``jax.scipy.linalg``: the factorizations and solves (``core``), the names built on them
(``more``) and jax's named results (``results``).  See docs/linalg.md."""

from __future__ import annotations

from tidu.numpy.linalg.core import (
    cho_factor,
    cho_solve,
    cholesky,
    det,
    diagonal,
    eigh,
    eigvalsh,
    inv,
    lstsq,
    lu_factor,
    lu_solve,
    matrix_power,
    norm,
    pinv,
    qr,
    slogdet,
    solve,
    solve_triangular,
    svd,
    svdvals,
)
from tidu.numpy.linalg.more import cond, matrix_rank, multi_dot, tensorinv, tensorsolve
from tidu.numpy.linalg.results import EighResult, QRResult, SlogdetResult, SVDResult

__all__ = ["cho_factor", "cho_solve", "cholesky", "cond", "det", "diagonal", "eigh",
           "EighResult", "eigvalsh", "inv", "lstsq", "lu_factor", "lu_solve", "matrix_power",
           "matrix_rank", "multi_dot", "norm", "pinv", "qr", "QRResult", "slogdet",
           "SlogdetResult", "solve", "solve_triangular", "svd", "SVDResult", "svdvals",
           "tensorinv", "tensorsolve"]
