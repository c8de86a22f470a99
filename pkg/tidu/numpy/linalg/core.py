"""``td.linalg``: linear algebra with derivatives, after ``jax.numpy.linalg`` and
``jax.scipy.linalg``.

Built on the primitives ``Cholesky`` and ``TriangularSolve`` (``tidu.ops.linalg``) and ``LU``,
``LUPermute``, ``Eigh``, ``QR``, ``SVD`` (``tidu.ops.factor``, packed results sliced here).  Every
function takes leading batch axes (broadcast between operands as numpy's) and float32, float64,
complex64 and complex128 (integer input is promoted to jax's to_inexact_dtype).  See docs/linalg.md.
"""

from __future__ import annotations

import numpy as np

from tidu import ops as P
from tidu.graph.dtypes import INEXACT, kind_of, to_inexact_dtype
from tidu.numpy.core import abs as abs_
from tidu.numpy.core import (
    astype,
    broadcast_to,
    conj,
    cos,
    exp,
    imag,
    iota,
    log,
    matmul,
    real,
    reshape,
    sign,
    sqrt,
    transpose,
    where,
)
from tidu.numpy.core import max as max_
from tidu.numpy.core import sum as sum_
from tidu.numpy.creation import diagonal as _diagonal_offset
from tidu.numpy.custom_op import call_with_jvp
from tidu.numpy.linalg.results import EighResult, QRResult, SlogdetResult, SVDResult
from tidu.trace.build import apply
from tidu.trace.tracer import _lift, _trace_of, result_type

__all__ = ["cholesky", "solve_triangular", "cho_factor", "cho_solve", "diagonal", "lu_factor",
           "lu_solve", "solve", "inv", "det", "slogdet", "eigh", "eigvalsh", "qr", "svd",
           "svdvals", "norm", "pinv"]


# ---- helpers ----

def _arrays(name: str, *xs):
    """The operands traced, promoted to one inexact dtype."""
    t = _trace_of(*xs)
    dt = result_type(*xs)
    dt = to_inexact_dtype(dt)  # jax's: int32 in float32, int64 in float64
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
    return transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def _conj(x):
    return conj(x) if kind_of(x.dtype) == "c" else x


def _apply(op, *xs):
    return apply(op, *xs)


def _batched(name: str, a, b):
    """a (..., N, N) and b (N,) or (..., N, M) with their batch axes broadcast; whether b was a
    vector."""
    n = _square(name, a)
    vector, shape = b.ndim == 1, b.shape
    if vector:
        b = reshape(b, (b.shape[0], 1))
    if b.ndim < 2 or b.shape[-2] != n:
        raise ValueError(f"{name}: b of shape {shape} does not match a of shape {a.shape} "
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
    return reshape(x, x.shape[:-1]) if vector else x


def diagonal(x, /, *, offset=0):
    """The diagonals (..., K) of x (..., M, N) over its last two axes, ``offset`` above (or
    below) the main one, as ``jax.numpy.linalg.diagonal``."""
    x = _lift(_trace_of(x), x)
    if offset or x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        return _diagonal_offset(x, offset=offset, axis1=-2, axis2=-1)
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
    cplx = ca and kind_of(a.dtype) == "c"
    op = P.TriangularSolve(True, bool(lower), ta, cplx, bool(unit_diagonal))
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
    cplx = kind_of(c.dtype) == "c"
    lower = bool(lower)
    # a = L L^H (lower) or U^H U: solve with the factor, then with its adjoint
    y = _apply(P.TriangularSolve(True, lower, not lower, cplx and not lower, False), c, b)
    x = _apply(P.TriangularSolve(True, lower, lower, cplx and lower, False), c, y)
    return _unvector(x, vector)


# ---- LU: lu_factor, lu_solve, solve, inv, det, slogdet ----

def _cols(x, lo, hi):
    return x[..., lo:hi]


def _lu(name: str, a):
    """(lu (..., N, N), pivots int32 (..., N)) of a square a."""
    n = _square(name, a)
    packed = _apply(P.LU(), a)
    piv = _cols(packed, n, n + 1)
    piv = real(piv) if kind_of(piv.dtype) == "c" else piv
    return _cols(packed, 0, n), astype(reshape(piv, piv.shape[:-1]), "int32")


def lu_factor(a):
    """``(lu, piv)`` as ``jax.scipy.linalg.lu_factor``: P a = L U with L unit lower (below the
    diagonal of lu) and U upper; piv (..., N) int32, row i swapped with row piv[i]."""
    (a,) = _arrays("lu_factor", a)
    return _lu("lu_factor", a)


def _lu_solve(lu, piv, b, trans: int):
    cplx = kind_of(lu.dtype) == "c"
    if trans == 0:  # a = P^T L U: x = U^-1 L^-1 P b
        y = _apply(P.LUPermute(False), piv, b)
        y = _apply(P.TriangularSolve(True, True, False, False, True), lu, y)
        return _apply(P.TriangularSolve(True, False, False, False, False), lu, y)
    conj = cplx and trans == 2  # op(a) = U^T L^T P (or ^H): x = P^T L^-T U^-T b
    y = _apply(P.TriangularSolve(True, False, True, conj, False), lu, b)
    y = _apply(P.TriangularSolve(True, True, True, conj, True), lu, y)
    return _apply(P.LUPermute(True), piv, y)


def lu_solve(lu_and_piv, b, trans=0):
    """x with op(a) x = b from ``(lu, piv) = lu_factor(a)``, as ``jax.scipy.linalg.lu_solve``;
    b is (N,) or (..., N, M); trans 0: a, 1: a^T, 2: a^H."""
    if trans not in (0, 1, 2):
        raise ValueError(f"lu_solve: invalid trans {trans!r} (0, 1 or 2)")
    lu, piv = lu_and_piv
    lu, b = _arrays("lu_solve", lu, b)
    piv = _lift(_trace_of(piv), piv)
    if piv.dtype != np.dtype("int32"):
        raise TypeError(f"lu_solve: pivots dtype {piv.dtype} is not int32")
    lu, b, vector = _batched("lu_solve", lu, b)
    if piv.shape != lu.shape[:-1]:
        if piv.shape[-1:] != lu.shape[-1:]:
            raise ValueError(f"lu_solve: pivots of shape {piv.shape} do not match lu of shape "
                             f"{lu.shape}")
        piv = broadcast_to(piv, lu.shape[:-1])
    return _unvector(_lu_solve(lu, piv, b, trans), vector)


def solve(a, b):
    """x with a x = b, as ``jax.numpy.linalg.solve`` (LU with partial pivoting): b is (N,) or
    (..., N, M); inf/NaN where a is singular."""
    a, b = _arrays("solve", a, b)
    _square("solve", a)
    a, b, vector = _batched("solve", a, b)
    lu, piv = _lu("solve", a)
    return _unvector(_lu_solve(lu, piv, b, 0), vector)


def _eye_like(a):
    n = a.shape[-1]
    eye = astype(iota((n, n), "int32", 0) == iota((n, n), "int32", 1), a.dtype)
    return broadcast_to(eye, a.shape) if a.ndim > 2 else eye


def inv(a):
    """The inverse of a (..., N, N), as ``jax.numpy.linalg.inv`` (inf/NaN where singular)."""
    (a,) = _arrays("inv", a)
    _square("inv", a)
    lu, piv = _lu("inv", a)
    return _lu_solve(lu, piv, _eye_like(a), 0)


def slogdet(a, *, method=None):
    """``(sign, logabsdet)`` of a (..., N, N), as ``jax.numpy.linalg.slogdet`` (from LU):
    sign 0 and logabsdet -inf where a is singular. ``method`` is jax's (None or 'lu', 'qr');
    tidu computes both from LU (the values agree to rounding)."""
    if method not in (None, "lu", "qr"):
        raise ValueError(f"slogdet: unknown method {method!r}; supported are 'lu' (None) and "
                         "'qr'")
    (a,) = _arrays("slogdet", a)
    n = _square("slogdet", a)
    lu, piv = _lu("slogdet", a)
    d = diagonal(lu)
    ad = abs_(d)
    logabs = sum_(log(ad), axis=-1)
    rdt = ad.dtype
    swaps = sum_(astype(piv != iota(piv.shape, "int32", piv.ndim - 1), rdt), axis=-1)
    zero = sum_(astype(ad == 0, rdt), axis=-1) > 0
    if kind_of(d.dtype) == "c":
        unit = d / astype(where(ad == 0, 1, ad), d.dtype)
        phase = exp(sum_(log(where(ad == 0, astype(1, d.dtype), unit)), axis=-1))
        sgn = phase * astype(sign(cos(np.pi * swaps)), d.dtype)
        sgn = where(zero, astype(0, d.dtype), sgn)
    else:
        neg = sum_(astype(d < 0, rdt), axis=-1)
        sgn = where(zero, astype(0, rdt), sign(cos(np.pi * (neg + swaps))))
    del n
    return SlogdetResult(sgn, logabs)


def det(a):
    """The determinant of a (..., N, N), as ``jax.numpy.linalg.det``: sign * exp(logabsdet)
    from LU (0 where singular; its derivative there is NaN, where jax's is the cofactor)."""
    sgn, logabs = slogdet(a)
    return sgn * astype(exp(logabs), sgn.dtype)


# ---- Eigh ----

def _herm(name, a, UPLO, symmetrize_input):
    (a,) = _arrays(name, a)
    _square(name, a)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"{name}: UPLO must be 'L' or 'U', got {UPLO!r}")
    if symmetrize_input:
        a = (a + _conj(_mT(a))) * 0.5
    elif UPLO == "U":
        a = _conj(_mT(a))
    return a


def eigh(a, UPLO=None, symmetrize_input: bool = True):
    """``(w, v)`` of a Hermitian a (..., N, N), as ``jax.numpy.linalg.eigh``: w ascending (real
    dtype), v's columns the eigenvectors.  Factors (a + a^H) / 2 by default; with
    ``symmetrize_input=False`` only the triangle named by UPLO ('L' default) is read.  The
    derivative of v is inf/NaN where eigenvalues are equal (as jax)."""
    a = _herm("eigh", a, UPLO, symmetrize_input)
    n = a.shape[-1]
    packed = _apply(P.Eigh(True), a)
    w = _cols(packed, n, n + 1)
    w = reshape(real(w) if kind_of(w.dtype) == "c" else w, w.shape[:-1])
    return EighResult(w, _cols(packed, 0, n))


def eigvalsh(a, UPLO="L", symmetrize_input: bool = True):
    """The eigenvalues (ascending, real dtype) of a Hermitian a, as
    ``jax.numpy.linalg.eigvalsh``."""
    return _apply(P.Eigh(False), _herm("eigvalsh", a, UPLO, symmetrize_input))


# ---- QR ----

def qr(a, mode: str = "reduced"):
    """``(q, r)`` (modes 'reduced', its alias 'full', and 'complete'), r (mode 'r') or
    ``(h, tau)`` (mode 'raw': LAPACK's Householder reflectors, h of shape (..., n, m) as
    numpy's and jax's; a ``QRResult`` as jax's), as ``jax.numpy.linalg.qr``.  The derivative is
    defined for m >= n (mode 'reduced', or square), as jax's; mode 'raw' has none (as jax's)."""
    if mode not in ("reduced", "full", "complete", "r", "raw"):
        raise ValueError(f"qr: unsupported mode {mode!r} ('reduced', 'full', 'complete', 'r' or "
                         f"'raw')")
    (a,) = _arrays("qr", a)
    if a.ndim < 2:
        raise ValueError(f"qr: a of shape {a.shape} is not a matrix (or a batch of them)")
    m, n = a.shape[-2:]
    if mode == "raw":
        packed = _apply(P.Geqrf(), a)
        h = reshape(_cols(packed, 0, m * n), a.shape[:-2] + (m, n))
        return QRResult(_mT(h), _cols(packed, m * n, m * n + min(m, n)))
    full = mode == "complete"
    kq = m if full else min(m, n)
    packed = _apply(P.QR(full), a)
    bs = a.shape[:-2]
    r = reshape(_cols(packed, m * kq, m * kq + kq * n), bs + (kq, n))
    if mode == "r":
        return r
    return QRResult(reshape(_cols(packed, 0, m * kq), bs + (m, kq)), r)


# ---- SVD and what is built on it ----

def _svd_parts(a, full_matrices: bool, compute_uv: bool):
    m, n = a.shape[-2:]
    k = min(m, n)
    packed = _apply(P.SVD(bool(full_matrices), bool(compute_uv)), a)
    if not compute_uv:
        return packed
    ku, kv = (m, n) if full_matrices else (k, k)
    bs = a.shape[:-2]
    s = _cols(packed, 0, k)
    s = real(s) if kind_of(s.dtype) == "c" else s
    u = reshape(_cols(packed, k, k + m * ku), bs + (m, ku))
    vh = reshape(_cols(packed, k + m * ku, k + m * ku + kv * n), bs + (kv, n))
    return SVDResult(u, s, vh)


def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index=None):
    """``(u, s, vh)`` or s (descending, real dtype), as ``jax.numpy.linalg.svd``.  The
    derivative of u and vh needs ``full_matrices=False`` (or a square a) and is inf/NaN where
    singular values are equal (as jax); ``hermitian`` is accepted and ignored (the general
    algorithm gives the same values). ``subset_by_index`` is refused as jax refuses it on CPU."""
    del hermitian
    if subset_by_index is not None:
        raise NotImplementedError("svd: subset_by_index is not implemented (jax's is not on "
                                  "CPU either): slice the full result")
    (a,) = _arrays("svd", a)
    if a.ndim < 2:
        raise ValueError(f"svd: a of shape {a.shape} is not a matrix (or a batch of them)")
    return _svd_parts(a, full_matrices, compute_uv)


def svdvals(x):
    """The singular values of x (..., M, N), descending, as ``jax.numpy.linalg.svdvals``."""
    return svd(x, compute_uv=False)


def _smax(x, axis):
    return max_(x, axis=axis)


def _smin(x, axis):
    return -max_(-x, axis=axis)


def norm(x, ord=None, axis=None, keepdims: bool = False):  # noqa: A002 - numpy's name
    """Vector or matrix norm, as ``jax.numpy.linalg.norm``: vector orders None/2, 1, inf, -inf,
    0, any p; matrix orders None/'fro', 'nuc', 1, -1, 2, -2, inf, -inf over two axes."""
    (x,) = _arrays("norm", x)
    nd = x.ndim
    if axis is None:
        if ord is None:
            return _keep_dims(sqrt(sum_(_abs2(x))), x, tuple(range(nd)), keepdims)
        axis = tuple(range(nd))
        if nd not in (1, 2):
            raise ValueError(f"norm: improper number of dimensions {nd} for ord={ord!r}")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(int(a) % nd if -nd <= int(a) < nd else _bad_axis(a, nd) for a in axes)
    if len(axes) == 1:
        (ax,) = axes
        ab = abs_(x)
        if ord is None or ord == 2:
            r = sqrt(sum_(_abs2(x), axis=ax))
        elif ord == np.inf:
            r = _smax(ab, ax)
        elif ord == -np.inf:
            r = _smin(ab, ax)
        elif ord == 0:
            r = sum_(astype(ab != 0, ab.dtype), axis=ax)
        elif ord == 1:
            r = sum_(ab, axis=ax)
        elif isinstance(ord, str):
            raise ValueError(f"norm: invalid order {ord!r} for vectors")
        else:
            r = sum_(ab ** float(ord), axis=ax) ** (1.0 / float(ord))
        return _keep_dims(r, x, axes, keepdims)
    if len(axes) != 2 or axes[0] == axes[1]:
        raise ValueError(f"norm: axis {axis!r} must name one or two distinct axes")
    r0, c0 = axes
    ab = abs_(x)
    if ord is None or ord == "fro":
        r = sqrt(sum_(_abs2(x), axis=axes))
    elif ord in (1, -1):
        red = _smax if ord == 1 else _smin
        cs = sum_(ab, axis=r0)
        r = red(cs, c0 - (1 if c0 > r0 else 0))
    elif ord in (np.inf, -np.inf):
        red = _smax if ord == np.inf else _smin
        rs = sum_(ab, axis=c0)
        r = red(rs, r0 - (1 if r0 > c0 else 0))
    elif ord in (2, -2, "nuc"):
        rest = tuple(i for i in range(nd) if i not in axes)
        y = transpose(x, rest + (r0, c0))
        s = svd(y, compute_uv=False)
        r = sum_(s, axis=-1) if ord == "nuc" else s[..., 0] if ord == 2 else s[..., -1]
    else:
        raise ValueError(f"norm: invalid order {ord!r} for matrices")
    return _keep_dims(r, x, axes, keepdims)


def _bad_axis(a, nd):
    raise ValueError(f"norm: axis {a} out of range for {nd} dimensions")


def _abs2(x):
    if kind_of(x.dtype) == "c":
        return real(x) * real(x) + imag(x) * imag(x)
    return x * x


def _keep_dims(r, x, axes, keepdims):
    if not keepdims:
        return r
    return reshape(r, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))


def _pinv_and_s(a, cutoff, inclusive: bool) -> list:
    """[pinv(a), s] from one SVD: singular values below ``cutoff * max(s)`` are dropped (kept
    when equal to it if inclusive, as lstsq's rcond)."""
    u, s, vh = _svd_parts(a, False, True)
    bound = s[..., 0:1] * cutoff
    keep = s >= bound if inclusive else s > bound
    sinv = where(keep, 1 / where(keep, s, 1), 0)
    return [matmul_(_conj(_mT(vh)) * astype(sinv[..., None, :], a.dtype), _conj(_mT(u))), s]


def _pinv_and_s_jvp(primals, tangents, inclusive: bool):
    """jax's pinv JVP (Golub-Pereyra, _pinv_tangent) and the SVD's for s, diag(u^H da v); the
    cutoff gets no derivative."""
    (a, cutoff), (da, _) = primals, tangents
    p, s = _pinv_op(a, cutoff, inclusive)
    u, _, vh = _svd_parts(a, False, True)  # only in derivative programs, and only for ds
    ds = sum_(_conj(u) * matmul_(da, _conj(_mT(vh))), axis=-2)
    return [p, s], [_pinv_tangent(p, a, da), real(ds) if kind_of(ds.dtype) == "c" else ds]


def _pinv_op(a, cutoff, inclusive: bool) -> list:
    """[pinv(a), s] as one op whose derivatives (any order) are _pinv_and_s_jvp's."""
    return call_with_jvp("pinv", _pinv_and_s, _pinv_and_s_jvp, (bool(inclusive),), a, cutoff)


def _pinv_tangent(p, a, d):
    """The derivative of pinv at a along d, with p = pinv(a) (Golub and Pereyra 1973, jax's
    ``_pinv_jvp``, products associated as there): -p d p + p p^H d^H (I - a p)
    + (I - p a) d^H p^H p."""
    ph, dh = _conj(_mT(p)), _conj(_mT(d))
    m, n = a.shape[-2:]
    if m >= n:
        s = matmul_(matmul_(p, ph), dh)
        t = matmul_(matmul_(dh, ph), p)
        return (-matmul_(matmul_(p, d), p) + s - matmul_(matmul_(s, a), p) + t
                - matmul_(matmul_(p, a), t))
    s = matmul_(p, matmul_(ph, dh))
    t = matmul_(dh, matmul_(ph, p))
    return (-matmul_(p, matmul_(d, p)) + s - matmul_(s, matmul_(a, p)) + t
            - matmul_(p, matmul_(a, t)))


def pinv(a, rtol=None, hermitian: bool = False, *, rcond=None):
    """Moore-Penrose pseudo-inverse from the SVD, as ``jax.numpy.linalg.pinv``: singular
    values at most ``rtol * max(s)`` (default ``10 * max(M, N) * eps``) are dropped.

    The derivative is pinv's own (jax's custom JVP, Golub-Pereyra), not the SVD's: the SVD
    rule cannot give it where singular values repeat (at the identity it gave 0 for
    d pinv / d a_01, issue #28).  Derivatives of every order equal jax's. ``rcond`` is
    numpy's older name for ``rtol`` (one of them may be given)."""
    del hermitian
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: only one of rtol and rcond may be specified")
        rtol = rcond
    (a,) = _arrays("pinv", a)
    if a.ndim < 2:
        raise ValueError(f"pinv: a of shape {a.shape} is not a matrix (or a batch of them)")
    m, n = a.shape[-2:]
    if rtol is None:
        rtol = 10 * max(m, n) * np.finfo(a.dtype).eps
    if min(m, n) == 0:
        return _mT(_conj(a))
    # The value is the SVD formula's and the derivative jax's custom JVP (Golub-Pereyra), as
    # one op with its own rule (numpy/custom_op.py): the rule calls pinv again, so every order
    # is jax's.
    return _pinv_op(a, _cutoff(a, rtol), False)[0]


def _cutoff(a, c):
    """The relative cutoff as a real scalar of a's precision (a traced value may be given)."""
    dt = np.finfo(a.dtype).dtype
    return _lift(_trace_of(a), c, dt) if not isinstance(c, (int, float)) else np.asarray(c, dt)


def matmul_(x, y):
    return matmul(x, y)
