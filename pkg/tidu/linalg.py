"""``td.linalg``: linear algebra with derivatives, after ``jax.numpy.linalg`` and
``jax.scipy.linalg``.

Built on two primitives (``tidu.ops.linalg``): ``Cholesky`` and ``TriangularSolve``.  Every
function takes leading batch axes (broadcast between operands as numpy's) and float32, float64,
complex64 and complex128 (integer input is promoted to float64).  See docs/linalg.md.
"""

from __future__ import annotations

import numpy as np

from tidu import ops as P
from tidu.ops._base import INEXACT

__all__ = ["cholesky", "solve_triangular", "cho_factor", "cho_solve", "diagonal"]


# ---- helpers ----

def _arrays(name: str, *xs):
    """The operands traced, promoted to one inexact dtype."""
    from tidu.tracing import _dtype_of, _lift, _trace_of

    t = _trace_of(*xs)
    dt = np.result_type(*[_dtype_of(x) for x in xs])
    if dt not in INEXACT:
        dt = np.result_type(dt, np.float64)
    if dt not in INEXACT:
        raise TypeError(f"{name}: dtype {dt} is not supported (float32, float64, complex64, "
                        f"complex128)")
    return [_lift(t, x, dt) for x in xs]


def _square(name: str, a) -> int:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: a of shape {a.shape} is not a square matrix (or a batch of "
                         f"them, shape (..., N, N))")
    return a.shape[-1]


def _mT(x):
    from tidu.tracing import transpose

    return transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def _conj(x):
    from tidu.tracing import conj

    return conj(x) if x.dtype.kind == "c" else x


def _apply(op, *xs):
    from tidu.tracing import apply

    return apply(op, *xs)


def _batched(name: str, a, b):
    """a (..., N, N) and b (N,) or (..., N, M) with their batch axes broadcast; whether b was a
    vector."""
    from tidu.tracing import broadcast_to, reshape

    n = _square(name, a)
    vector = b.ndim == 1
    if vector:
        b = reshape(b, (b.shape[0], 1))
    if b.ndim < 2 or b.shape[-2] != n:
        raise ValueError(f"{name}: b of shape {b.shape} does not match a of shape {a.shape} "
                         f"(expected ({n},) or (..., {n}, M))")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"{name}: batch axes of a {a.shape} and b {b.shape} do not "
                         f"broadcast") from None
    a = broadcast_to(a, batch + a.shape[-2:]) if a.shape[:-2] != batch else a
    b = broadcast_to(b, batch + b.shape[-2:]) if b.shape[:-2] != batch else b
    return a, b, vector


def _unvector(x, vector: bool):
    from tidu.tracing import reshape

    return reshape(x, x.shape[:-1]) if vector else x


def diagonal(x):
    """The main diagonals (..., N) of x (..., N, N), as ``jax.numpy.linalg.diagonal``."""
    from tidu.tracing import _lift, _trace_of, iota, sum as sum_, where

    x = _lift(_trace_of(x), x)
    n = _square("diagonal", x)
    eye = iota((n, n), "int32", 0) == iota((n, n), "int32", 1)
    return sum_(where(eye, x, 0), axis=-1)


# ---- Cholesky ----

def cholesky(a, *, upper: bool = False, symmetrize_input: bool = True):
    """Cholesky factor of a Hermitian positive-definite matrix, as ``jax.numpy.linalg.cholesky``.

    Args:
        a: array (..., N, N).
        upper: return U = L^H (a = U^H U) instead of L (a = L L^H).
        symmetrize_input: factor (a + a^H) / 2 (so the derivative is symmetric, as jax);
            when False only the lower triangle of ``a`` is read.

    Returns:
        The factor, zero on the other side of the diagonal; all NaN for a matrix (of a batch)
        that is not positive definite.

    Raises:
        ValueError: ``a`` is not square.  TypeError: unsupported dtype.
    """
    (a,) = _arrays("cholesky", a)
    _square("cholesky", a)
    if symmetrize_input:
        a = (a + _conj(_mT(a))) * 0.5
    fac = _apply(P.Cholesky(), a)
    return _conj(_mT(fac)) if upper else fac


# ---- triangular solves ----

_TRANS = {0: (False, False), "N": (False, False), 1: (True, False), "T": (True, False),
          2: (True, True), "C": (True, True)}


def solve_triangular(a, b, trans=0, lower: bool = False, unit_diagonal: bool = False):
    """x with op(a) x = b for triangular a, as ``jax.scipy.linalg.solve_triangular``.

    Args:
        a: array (..., N, N); only its lower (``lower``) or upper triangle is read, and not its
            diagonal when ``unit_diagonal`` (taken as ones).
        b: array (N,) or (..., N, M); batch axes broadcast with a's.
        trans: 0 / 'N': a x = b, 1 / 'T': a^T x = b, 2 / 'C': a^H x = b.

    Returns:
        x, of b's shape (with the broadcast batch axes).

    Raises:
        ValueError: bad shapes or ``trans``.  TypeError: unsupported dtype.
    """
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: invalid trans {trans!r} (0/'N', 1/'T' or 2/'C')")
    a, b = _arrays("solve_triangular", a, b)
    a, b, vector = _batched("solve_triangular", a, b)
    ta, ca = _TRANS[trans]
    op = P.TriangularSolve(True, bool(lower), ta, ca and a.dtype.kind == "c", bool(unit_diagonal))
    return _unvector(_apply(op, a, b), vector)


def cho_factor(a, lower: bool = False):
    """``(c, lower)`` for ``cho_solve``: c the lower or upper Cholesky factor of a, reading only
    that triangle of a, as ``jax.scipy.linalg.cho_factor`` (NaN where not positive definite)."""
    (a,) = _arrays("cho_factor", a)
    _square("cho_factor", a)
    if lower:
        return _apply(P.Cholesky(), a), True
    return _conj(_mT(_apply(P.Cholesky(), _conj(_mT(a))))), False


def cho_solve(c_and_lower, b):
    """x with a x = b from ``(c, lower) = cho_factor(a)``, as ``jax.scipy.linalg.cho_solve``;
    b is (N,) or (..., N, M)."""
    c, lower = c_and_lower
    c, b = _arrays("cho_solve", c, b)
    c, b, vector = _batched("cho_solve", c, b)
    cplx = c.dtype.kind == "c"
    lower = bool(lower)
    # a = L L^H (lower) or U^H U: solve with the factor, then with its adjoint
    y = _apply(P.TriangularSolve(True, lower, not lower, cplx and not lower, False), c, b)
    x = _apply(P.TriangularSolve(True, lower, lower, cplx and lower, False), c, y)
    return _unvector(x, vector)
