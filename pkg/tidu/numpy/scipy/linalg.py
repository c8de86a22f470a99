"""``tidu.scipy.linalg``: jax.scipy.linalg's names with scipy's signatures, built on
``td.linalg`` (``tidu.numpy.linalg``): the triangular, Cholesky and LU solves, ``lu`` as
(p, l, u), ``block_diag``, ``expm`` (jax's Pade scaling and squaring), and ``eigh``, ``svd``,
``qr``, ``det``, ``inv``, ``solve``, ``cholesky`` with scipy's argument names."""

from __future__ import annotations

import numpy as np

from tidu import ops as P_
from tidu.graph.dtypes import kind_of
from tidu.numpy import linalg as _la
from tidu.numpy.core import abs as _abs
from tidu.numpy.core import astype, broadcast_to, concatenate, log, matmul, reshape, where
from tidu.numpy.core import max as _max
from tidu.numpy.core import sum as _sum
from tidu.numpy.creation import tril, triu
from tidu.numpy.linalg.core import _apply, _arrays, _conj, _eye_like, _mT, _square
from tidu.numpy.linalg.core import cho_factor as _cho_factor
from tidu.numpy.linalg.core import cho_solve as _cho_solve
from tidu.numpy.linalg.core import lu_factor as _lu_factor
from tidu.numpy.linalg.core import lu_solve as _lu_solve
from tidu.numpy.linalg.core import solve_triangular as _solve_triangular
from tidu.numpy.scipy.matrices import (
    circulant,
    companion,
    convolution_matrix,
    dft,
    fiedler,
    fiedler_companion,
    hadamard,
    hankel,
    helmert,
    hilbert,
    invhilbert,
    invpascal,
    leslie,
    pascal,
    toeplitz,
)
from tidu.numpy.scipy.schur import funm, hessenberg, rsf2csf, schur, solve_sylvester, sqrtm
from tidu.numpy.scipy.special.core import _loop
from tidu.numpy.shapes import pad
from tidu.numpy.ufuncs import floor
from tidu.trace.tracer import _lift, _trace_of

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion",
           "convolution_matrix", "det", "dft", "eigh", "eigh_tridiagonal", "expm", "expm_frechet",
           "fiedler", "fiedler_companion", "funm", "hadamard", "hankel", "helmert", "hessenberg",
           "hilbert", "inv", "invhilbert", "invpascal", "leslie", "lu", "lu_factor", "lu_solve",
           "pascal", "polar", "qr", "qr_multiply", "rsf2csf", "schur", "solve", "solve_sylvester",
           "solve_triangular", "sqrtm", "svd", "toeplitz"]


def cholesky(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """The upper (default, scipy's) or lower Cholesky factor of a, reading only that triangle
    of a (as jax's)."""
    del overwrite_a, check_finite
    (a,) = _arrays("cholesky", a)
    _square("cholesky", a)
    if lower:
        return _la.cholesky(a, symmetrize_input=False)
    return _conj(_mT(_la.cholesky(_conj(_mT(a)), symmetrize_input=False)))


def cho_factor(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """``(c, lower)``: the factor for ``cho_solve``."""
    del overwrite_a, check_finite
    return _cho_factor(a, lower=lower)


def cho_solve(c_and_lower, b, overwrite_b: bool = False, check_finite: bool = True):
    """x with a x = b from ``cho_factor(a)``."""
    del overwrite_b, check_finite
    return _cho_solve(c_and_lower, b)


def solve_triangular(a, b, trans=0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, debug=None, check_finite: bool = True):
    """x with op(a) x = b for triangular a (trans 0/'N', 1/'T', 2/'C')."""
    del overwrite_b, debug, check_finite
    return _solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)


def lu_factor(a, overwrite_a: bool = False, check_finite: bool = True):
    """``(lu, piv)``: P a = L U packed, pivots as row swaps (int32)."""
    del overwrite_a, check_finite
    return _lu_factor(a)


def lu_solve(lu_and_piv, b, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True):
    """x with op(a) x = b from ``lu_factor(a)``."""
    del overwrite_b, check_finite
    return _lu_solve(lu_and_piv, b, trans=trans)


def lu(a, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """``(p, l, u)`` with a = p @ l @ u (p a permutation matrix in a's dtype, l unit lower,
    u upper), or ``(p @ l, u)`` with ``permute_l``.  Square a (and batches of them) only:
    tidu's LU primitive factors square matrices."""
    del overwrite_a, check_finite
    (a,) = _arrays("lu", a)
    _square("lu", a)
    packed, piv = _lu_factor(a)
    eye_ = _eye_like(a)
    # rows of P^T: applying the pivots' swaps to the identity gives P (P a = L U)
    perm = _apply(P_.LUPermute(False), piv, eye_)
    p = _mT(perm)
    lo = tril(packed, -1) + eye_
    up = triu(packed)
    if permute_l:
        return matmul(p, lo), up
    return p, lo, up


def block_diag(*arrs):
    """The block-diagonal matrix of the arguments (scalars and vectors as 1 x n blocks)."""
    if not arrs:
        return np.zeros((1, 0))
    t = _trace_of(*arrs)
    ms = [_lift(t, a) for a in arrs]
    dt = np.result_type(*[m.dtype for m in ms])
    ms = [_lift(t, m, dt) for m in ms]
    for m in ms:
        if m.ndim > 2:
            raise ValueError(f"block_diag: arguments must be at most 2-D, got shape {m.shape}")
    ms = [reshape(m, (1,) * (2 - m.ndim) + m.shape) for m in ms]
    total = sum(m.shape[1] for m in ms)
    rows, before = [], 0
    for m in ms:
        after = total - before - m.shape[1]
        rows.append(pad(m, ((0, 0), (before, after))))
        before += m.shape[1]
    return concatenate(rows, axis=0)


def det(a, overwrite_a: bool = False, check_finite: bool = True):
    """The determinant of a (..., N, N)."""
    del overwrite_a, check_finite
    return _la.det(a)


def inv(a, overwrite_a: bool = False, check_finite: bool = True):
    """The inverse of a (..., N, N)."""
    del overwrite_a, check_finite
    return _la.inv(a)


def solve(a, b, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen"):
    """x with a x = b: LU for ``assume_a='gen'``, Cholesky for 'sym'/'her'/'pos' (reading the
    ``lower`` triangle, as jax's)."""
    del overwrite_a, overwrite_b, debug, check_finite
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"solve: assume_a must be 'gen', 'sym', 'her' or 'pos', "
                         f"got {assume_a!r}")
    if assume_a != "pos":
        return _la.solve(a, b)
    return _cho_solve(_cho_factor(a, lower=lower), b)


def eigh(a, b=None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals=None, type: int = 1,  # noqa: A002
         check_finite: bool = True):
    """``(w, v)`` or w of a Hermitian a, as jax's: it factors (a + a^H) / 2 (``lower`` is
    accepted and, as in jax, has no effect); the generalized problem (b) is not supported."""
    del overwrite_a, overwrite_b, turbo, check_finite, type
    if b is not None:
        raise NotImplementedError("eigh: only the standard eigenvalue problem (b=None) is "
                                  "supported, as jax's")
    if eigvals is not None:
        raise NotImplementedError("eigh: eigvals (a subset) is not supported, as jax's")
    del lower  # jax's factors (a + a^H) / 2 whichever triangle is named; so does tidu's
    w, v = _la.eigh(a, symmetrize_input=True)
    return w if eigvals_only else (w, v)


def svd(a, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd"):
    """``(u, s, vh)`` or s."""
    del overwrite_a, check_finite, lapack_driver
    return _la.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def qr(a, overwrite_a: bool = False, lwork=None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True):
    """scipy's modes: 'full' (q m x m), 'economic' (q m x k), 'r' (r alone, as a 1-tuple as
    scipy and jax return it); pivoting is not supported."""
    del overwrite_a, lwork, check_finite
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not supported")
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"qr: mode must be 'full', 'economic' or 'r', got {mode!r}")
    if mode == "r":
        return (_la.qr(a, mode="complete")[1],)
    return tuple(_la.qr(a, mode="complete" if mode == "full" else "reduced"))


# ---- expm: jax's Pade approximants with scaling and squaring ----

_PADE = {
    3: (120., 60., 12., 1.),
    5: (30240., 15120., 3360., 420., 30., 1.),
    7: (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.),
    9: (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880.,
        3960., 90., 1.),
    13: (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
         129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
         40840800., 960960., 16380., 182., 1.),
}


def _pade(m, A, ident):
    b = _PADE[m]
    A2 = matmul(A, A)
    if m == 13:
        A4 = matmul(A2, A2)
        A6 = matmul(A4, A2)
        U = matmul(A, matmul(A6, b[13] * A6 + b[11] * A4 + b[9] * A2)
                   + b[7] * A6 + b[5] * A4 + b[3] * A2 + b[1] * ident)
        V = (matmul(A6, b[12] * A6 + b[10] * A4 + b[8] * A2) + b[6] * A6 + b[4] * A4
             + b[2] * A2 + b[0] * ident)
        return U, V
    powers = [ident, A2]
    while len(powers) < (m + 1) // 2:
        powers.append(matmul(powers[-1], A2))
    U = matmul(A, sum((b[2 * i + 1] * p for i, p in enumerate(powers)), A * 0))
    V = sum((b[2 * i] * p for i, p in enumerate(powers)), A * 0)
    return U, V


def expm(A, *, upper_triangular: bool = False, max_squarings: int = 16):
    """The matrix exponential of A (..., N, N), as ``jax.scipy.linalg.expm``: the Pade
    approximant of order 3 to 13 chosen from the 1-norm, after scaling A by 2^-s, then s
    squarings (unrolled ``max_squarings`` times, each kept where i < s); NaN where s would
    exceed ``max_squarings``.  Every order is computed and the one jax would pick is selected,
    so values and derivatives are jax's."""
    (A,) = _arrays("expm", A)
    _square("expm", A)
    max_squarings = int(max_squarings)
    l1 = _max(_sum(_abs(A), axis=-2), axis=-1)
    l1 = reshape(l1, l1.shape + (1, 1))
    if A.dtype in (np.dtype("float64"), np.dtype("complex128")):
        maxnorm, conds, orders = 5.371920351148152, (1.495585217958292e-002,
                                                     2.539398330063230e-001,
                                                     9.504178996162932e-001,
                                                     2.097847961257068e+000), (3, 5, 7, 9, 13)
    else:
        maxnorm, conds, orders = 3.925724783138660, (4.258730016922831e-001,
                                                     1.880152677804762e+000), (3, 5, 7)
    n_sq = floor(log(l1 / maxnorm) / np.log(2.0))
    n_sq = where(n_sq > 0, n_sq, 0.0)
    As = A / astype(2.0 ** n_sq, A.dtype)
    ident = _eye_like(A)
    U, V = _pade(orders[-1], As, ident)
    for k in range(len(conds) - 1, -1, -1):  # jnp.digitize(l1, conds): lowest bin wins last
        Uk, Vk = _pade(orders[k], As, ident)
        pick = l1 < conds[k]
        U, V = where(pick, Uk, U), where(pick, Vk, V)
    P, Q = U + V, -U + V
    R = (_solve_triangular(Q, P) if upper_triangular else _la.solve(Q, P))
    for i in range(max_squarings):
        R = where(i < n_sq, matmul(R, R), R)
    return where(n_sq > max_squarings, np.nan, R)



# ---- polar, expm_frechet, eigh_tridiagonal ----

def polar(a, side: str = "right", *, method: str = "qdwh", eps=None, max_iterations=None):
    """The polar decomposition a = u p (side 'right') or p u ('left'): u with orthonormal
    columns (rows when n > m), p Hermitian positive semidefinite.  Both methods are computed
    from the SVD (jax's 'svd' method; jax's 'qdwh' iteration agrees to rounding)."""
    del eps, max_iterations
    if side not in ("right", "left"):
        raise ValueError(f"polar: side must be 'right' or 'left', got {side!r}")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"polar: unknown polar decomposition method {method}")
    (a,) = _arrays("polar", a)
    if a.ndim != 2:
        raise ValueError(f"polar: a must be a 2-D matrix, got shape {tuple(a.shape)}")
    m, n = a.shape
    if method == "qdwh" and not ((m >= n and side == "right") or (m < n and side == "left")):
        raise NotImplementedError(f"polar: method='qdwh' only supports m x n matrices with "
                                  f"m >= n for side='right' and m < n for side='left', got "
                                  f"{tuple(a.shape)} with side={side!r} (jax's neither; "
                                  f"method='svd' does)")
    u, s, vh = _la.svd(a, full_matrices=False)
    s = astype(s, u.dtype)
    unitary = matmul(u, vh)
    if side == "right":
        posdef = matmul(_conj(_mT(vh)) * s[None, :], vh)
    else:
        posdef = matmul(u * s[None, :], _conj(_mT(u)))
    return unitary, posdef


def expm_frechet(A, E, *, method=None, compute_expm: bool = True):
    """The Frechet derivative of expm at A along E (jax's: the JVP of ``expm``), with expm(A)
    first when ``compute_expm``."""
    del method
    A, E = _arrays("expm_frechet", A, E)
    if A.ndim < 2 or A.shape[-2] != A.shape[-1]:
        raise ValueError(f"expm_frechet: expected A to be a (batched) square matrix, got "
                         f"A.shape={tuple(A.shape)}")
    if tuple(A.shape) != tuple(E.shape):
        raise ValueError(f"expm_frechet: expected A and E to be the same shape, got "
                         f"A.shape={tuple(A.shape)} E.shape={tuple(E.shape)}")
    ea, frechet = _loop("jvp")(expm, (A,), (E,))
    return (ea, frechet) if compute_expm else frechet


def eigh_tridiagonal(d, e, *, eigvals_only: bool = False, select: str = "a",
                     select_range=None, tol=None, key=None):
    """Eigenvalues (ascending) of the real symmetric tridiagonal matrix with diagonal d and
    off-diagonal e, from the dense matrix's ``eigh`` (jax bisects; the values agree to
    rounding); ``select='i'`` keeps indices select_range[0]..select_range[1].  Eigenvectors
    (``eigvals_only=False``) are not supported."""
    del tol, key
    if not eigvals_only:
        raise NotImplementedError("eigh_tridiagonal: only eigvals_only=True is supported")
    d, e = _arrays("eigh_tridiagonal", d, e)
    if kind_of(d.dtype) == "c":
        raise TypeError("eigh_tridiagonal: d and e must be real")
    if d.ndim != 1 or e.ndim != 1 or e.shape[0] != max(d.shape[0] - 1, 0):
        raise ValueError(f"eigh_tridiagonal: d must be (N,) and e (N - 1,), got "
                         f"{tuple(d.shape)} and {tuple(e.shape)}")
    n = d.shape[0]
    eye = np.eye(n, dtype=bool)
    sub, sup = np.eye(n, k=-1, dtype=bool), np.eye(n, k=1, dtype=bool)
    ep = pad(e, [(0, 1)])
    mat = where(eye, d[None, :], 0.0)
    mat = where(sub, ep[None, :], mat)  # row i + 1, column i: e[i]
    mat = where(sup, ep[:, None], mat)  # row i, column i + 1: e[i]
    w = _la.eigvalsh(mat)
    if select == "a":
        return w
    if select == "i":
        if select_range is None:
            raise ValueError("eigh_tridiagonal: for select='i', select_range must be specified")
        lo, hi = int(select_range[0]), int(select_range[1])
        if lo > hi:
            raise ValueError("eigh_tridiagonal: got empty index range in select_range")
        return w[lo:hi + 1]
    if select == "v":
        raise NotImplementedError("eigh_tridiagonal(..., select='v') is not implemented "
                                  "(jax's neither)")
    raise ValueError("eigh_tridiagonal: select must have a value in {'a', 'i', 'v'}")


def qr_multiply(a, c, mode: str = "right", pivoting: bool = False, conjugate: bool = False,
                overwrite_a: bool = False, overwrite_c: bool = False):
    """``(c Q, R)`` (mode 'right') or ``(Q c, R)`` (mode 'left'), as
    ``jax.scipy.linalg.qr_multiply``: Q and R of a's reduced QR (LAPACK's Householder signs, as
    jax's geqrf/ormqr), conj(Q) when `conjugate`; a 1-d c gives a 1-d product.  tidu forms Q
    (``td.linalg.qr``) and multiplies where jax applies the reflectors (ormqr): the same values
    to rounding.  ``pivoting=True`` needs LAPACK's geqp3, which tidu has not."""
    del overwrite_a, overwrite_c
    if mode not in ("right", "left"):
        raise ValueError(f"mode must be 'right' or 'left', got {mode!r}")
    if pivoting:
        raise NotImplementedError("qr_multiply: pivoting=True needs a pivoted QR (LAPACK "
                                  "geqp3), which tidu does not have")
    a, c = _arrays("qr_multiply", a, c)
    if a.ndim < 2:
        raise ValueError(f"qr_multiply: a of shape {a.shape} is not a matrix")
    onedim = c.ndim == 1
    if onedim:
        c = reshape(c, (-1, 1)) if mode == "left" else reshape(c, (1, -1))
    m, n = a.shape[-2:]
    k = min(m, n)
    if mode == "left" and c.shape[-2] != k:
        raise ValueError(f"Array shapes are not compatible for Q @ c operation: a has shape "
                         f"{tuple(a.shape)} so Q has {k} columns, but c has {c.shape[-2]} rows "
                         f"(expected {k}).")
    if mode == "right" and c.shape[-1] != m:
        raise ValueError(f"Array shapes are not compatible for c @ Q operation: a has shape "
                         f"{tuple(a.shape)} so Q has {m} rows, but c has {c.shape[-1]} columns "
                         f"(expected {m}).")
    batch = np.broadcast_shapes(a.shape[:-2], c.shape[:-2])
    a = _broadcast(a, batch + a.shape[-2:])
    q, r = _la.qr(a)
    if conjugate:
        q = _conj(q)
    cq = matmul(q, c) if mode == "left" else matmul(c, q)
    if onedim:
        cq = reshape(cq, (-1,))
    return cq, r


def _broadcast(x, shape):
    return x if x.shape == tuple(shape) else broadcast_to(x, tuple(shape))
