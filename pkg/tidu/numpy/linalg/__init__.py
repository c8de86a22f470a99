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
    lu_factor,
    lu_solve,
    norm,
    pinv,
    qr,
    slogdet,
    solve,
    solve_triangular,
    svd,
    svdvals,
)
from tidu.numpy.linalg.eig import eig, eigvals
from tidu.numpy.linalg.more import (
    cond,
    lstsq,
    matrix_power,
    matrix_rank,
    multi_dot,
    tensorinv,
    tensorsolve,
)
from tidu.numpy.linalg.names import (
    cross,
    matmul,
    matrix_norm,
    matrix_transpose,
    outer,
    tensordot,
    trace,
    vecdot,
    vector_norm,
)
from tidu.numpy.linalg.results import EighResult, EigResult, QRResult, SlogdetResult, SVDResult

__all__ = ["cho_factor", "cho_solve", "cholesky", "cond", "cross", "det", "diagonal", "eig",
           "EigResult", "eigh", "EighResult", "eigvals", "eigvalsh", "inv", "lstsq", "lu_factor",
           "lu_solve", "matmul",
           "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose",
           "multi_dot", "norm", "outer", "pinv", "qr", "QRResult", "slogdet",
           "SlogdetResult", "solve", "solve_triangular", "svd", "SVDResult", "svdvals",
           "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot", "vector_norm"]
