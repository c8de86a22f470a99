"""jax.scipy.linalg's Schur family: ``schur`` (the ``Schur`` primitive, LAPACK ``?gees``),
``rsf2csf`` (jax's Givens sweep from the bottom, the 2x2 blocks' eigenvalues by ``Eig``),
``sqrtm`` (jax's complex Schur method, Bjorck & Hammarling 1983), ``funm`` (jax's Schur-Parlett
recurrence, Golub & Van Loan 11.1.1), ``solve_sylvester`` (Bartels-Stewart on the complex
Schur forms, or jax's eigen method) and ``hessenberg`` (the ``Hessenberg`` primitive, LAPACK
``?gehrd`` + ``?orghr``).

jax runs rsf2csf's sweep as a ``fori_loop`` of ``cond``s over the static size; here each step is
traced once per position (the size is static) and the ``cond`` is a select.  jax fills sqrtm's
triangular root one entry at a time (two nested ``fori_loop``s); here one superdiagonal at a
time, each entry's sum over k in (i, j) being row i of U times column j (the entries not yet
filled are zero), so values agree with jax's to rounding (the sums are added in another
order); funm's Parlett recurrence likewise (its sum over k in (i, j) plus the T_ij (F_jj - F_ii)
term is entry (i, j) of T F - F T).  solve_sylvester's triangular solve, one entry at a
time in jax's scan, is one triangular solve per column here (R + s_jj I upper triangular), from
the last column.  None is differentiable, as in jax (the Schur decomposition has no derivative
rule); solve_sylvester's eigen method is (through Eig)."""

from __future__ import annotations

import numpy as np

from tidu import ops as P_
from tidu.graph.dtypes import kind_of
from tidu.numpy.core import abs as _abs
from tidu.numpy.core import astype, broadcast_to, concatenate, conj, matmul, real, sqrt, where
from tidu.numpy.core import max as _max
from tidu.numpy.core import sum as _sum
from tidu.numpy.creation import diagonal
from tidu.numpy.linalg.core import _arrays, _mT, _square, inv, solve, solve_triangular
from tidu.numpy.linalg.eig import eig, eigvals
from tidu.numpy.shapes import stack, swapaxes
from tidu.numpy.sorting import any as _any
from tidu.numpy.sorting import min as _min
from tidu.numpy.ufuncs import isinf
from tidu.trace.build import apply

__all__ = ["funm", "hessenberg", "rsf2csf", "schur", "solve_sylvester", "sqrtm"]


def _complex_of(dt) -> np.dtype:
    dt = np.dtype(dt)
    return dt if kind_of(dt) == "c" else np.dtype(np.complex64 if dt == np.float32
                                                  else np.complex128)


def schur(a, output: str = "real"):
    """``(T, Z)`` with ``a = Z T Z^H``, as ``jax.scipy.linalg.schur``: T quasi-upper-triangular
    (``output='real'``, real input: a 2x2 block per complex-conjugate pair) or upper triangular
    (``output='complex'``, the input made complex first, as jax's), Z orthogonal/unitary;
    LAPACK's ``?gees`` without sorting.  Batched over leading axes.  Not differentiable."""
    if output not in ("real", "complex"):
        raise ValueError(f"schur: output must be 'real' or 'complex', got {output!r}")
    (a,) = _arrays("schur", a)
    n = _square("schur", a)
    if output == "complex":
        a = astype(a, _complex_of(a.dtype))
    out = apply(P_.Schur(), a)
    return out[..., :n], out[..., n:]


def hessenberg(a, *, calc_q: bool = False, overwrite_a: bool = False,
               check_finite: bool = True):
    """H (and Q with ``calc_q``), ``a = Q H Q^H`` with H upper Hessenberg, as
    ``jax.scipy.linalg.hessenberg`` (LAPACK ``?gehrd``; Q from the same reflectors).  Batched
    over leading axes.  Not differentiable, as jax's."""
    del overwrite_a, check_finite
    (a,) = _arrays("hessenberg", a)
    n = _square("hessenberg", a)
    if n == 0:  # as jax's: no reduction to run
        return (a, a) if calc_q else a
    out = apply(P_.Hessenberg(), a)
    h, q = out[..., :n], out[..., n:]
    return (h, q) if calc_q else h


def _set_rows(x, lo: int, rows):
    return concatenate([x[..., :lo, :], rows, x[..., lo + rows.shape[-2]:, :]], axis=-2)


def _set_cols(x, lo: int, cols):
    return concatenate([x[..., :, :lo], cols, x[..., :, lo + cols.shape[-1]:]], axis=-1)


def _rsf2csf_step(m: int, T, Z, eps: float):
    n = T.shape[-1]
    tmm1, tmm = T[..., m, m - 1], T[..., m, m]
    mu = eigvals(T[..., m - 1:m + 1, m - 1:m + 1])[..., 0] - tmm
    r = astype(sqrt(_abs(mu) ** 2 + _abs(tmm1) ** 2), T.dtype)
    c, s = mu / r, tmm1 / r
    G = stack([stack([conj(c), s], axis=-1), stack([-s, c], axis=-1)], axis=-2)
    GH = conj(_mT(G))
    rows = T[..., m - 1:m + 1, :]
    col_mask = np.arange(n) >= m - 1
    rows_new = where(col_mask, matmul(G, where(col_mask, rows, 0)), rows)
    T2 = _set_rows(T, m - 1, rows_new)
    cols = T2[..., :, m - 1:m + 1]
    row_mask = np.arange(n)[:, None] < m + 1
    cols_new = where(row_mask, matmul(where(row_mask, cols, 0), GH), cols)
    T2 = _set_cols(T2, m - 1, cols_new)
    Z2 = _set_cols(Z, m - 1, matmul(Z[..., :, m - 1:m + 1], GH))
    go = (_abs(tmm1) > eps * (_abs(T[..., m - 1, m - 1]) + _abs(tmm)))[..., None, None]
    T, Z = where(go, T2, T), where(go, Z2, Z)
    zero = np.zeros((n, n), bool)
    zero[m, m - 1] = True
    return where(zero, 0, T), Z


def rsf2csf(T, Z, check_finite: bool = True):
    """The complex Schur form ``(T, Z)`` of a real one, as ``jax.scipy.linalg.rsf2csf``: each
    2x2 block below the diagonal is turned triangular by a Givens rotation (jax's sweep, from
    the bottom); batch axes broadcast.  ``check_finite`` is unused, as in jax."""
    del check_finite
    T, Z = _arrays("rsf2csf", T, Z)
    if T.ndim < 2 or T.shape[-1] != T.shape[-2]:
        raise ValueError("rsf2csf: input 'T' must be square.")
    if Z.ndim < 2 or Z.shape[-1] != Z.shape[-2]:
        raise ValueError("rsf2csf: input 'Z' must be square.")
    if T.shape[-1] != Z.shape[-1]:
        raise ValueError(f"rsf2csf: input array shapes must match: Z: {Z.shape} vs. T: "
                         f"{T.shape}")
    cdt = _complex_of(T.dtype)
    batch = np.broadcast_shapes(T.shape[:-2], Z.shape[:-2])
    n = T.shape[-1]
    T = broadcast_to(astype(T, cdt), batch + (n, n))
    Z = broadcast_to(astype(Z, cdt), batch + (n, n))
    eps = float(np.finfo(cdt).eps)
    for i in range(1, n):
        T, Z = _rsf2csf_step(n - i, T, Z, eps)
    return T, Z


def _sqrtm_triu(T):
    """jax's ``_sqrtm_triu``: the upper triangular U with U @ U = T (principal roots on the
    diagonal), one superdiagonal at a time: entry (i, i+s) needs sum_k U[i, k] U[k, i+s], the
    product of row i and column i+s of U (the entries not yet filled are zero), so each step
    is O(n^2): rows 0..n-s-1 times columns s..n-1, summed."""
    n = T.shape[-1]
    d = sqrt(diagonal(T, axis1=-2, axis2=-1))
    eye = np.eye(n, dtype=bool)
    U = where(eye, d[..., None, :], 0)
    j_minus_i = np.arange(n)[None, :] - np.arange(n)[:, None]
    batch = T.shape[:-2]
    for s in range(1, n):
        on = j_minus_i == s
        rows = U[..., :n - s, :]
        cols = swapaxes(U[..., :, s:], -1, -2)
        inner = _sum(rows * cols, axis=-1)  # (..., n - s)
        t_s = _sum(where(on, T, 0), axis=-1)[..., :n - s]
        val = where(t_s == inner, 0, (t_s - inner) / (d[..., :n - s] + d[..., s:]))
        full = concatenate([val, broadcast_to(astype(0, val.dtype), batch + (s,))], axis=-1)
        U = where(on, full[..., :, None], U)
    return U


def sqrtm(A, blocksize: int = 1):
    """The principal matrix square root, as ``jax.scipy.linalg.sqrtm`` (the complex Schur
    method; a complex result).  ``blocksize`` > 1 is not implemented, as in jax."""
    if blocksize > 1:
        raise NotImplementedError("sqrtm: the blocked version (blocksize > 1) is not "
                                  "implemented (as in jax).")
    T, Z = schur(A, output="complex")
    return matmul(matmul(Z, _sqrtm_triu(T)), conj(_mT(Z)))


def _parlett(F, T):
    """jax's ``_algorithm_11_1_1`` (Golub & Van Loan 11.1.1): F's strict upper triangle from
    its diagonal, one superdiagonal at a time; and min |T_jj - T_ii| (with |T_00|)."""
    n = T.shape[-1]
    d = diagonal(T, axis1=-2, axis2=-1)
    den = d[..., None, :] - d[..., :, None]  # T_jj - T_ii at (i, j)
    j_minus_i = np.arange(n)[None, :] - np.arange(n)[:, None]
    batch = T.shape[:-2]
    for p in range(1, n):  # superdiagonal p of T F - F T, O(n^2) per step
        on = j_minus_i == p
        tf = _sum(T[..., :n - p, :] * swapaxes(F[..., :, p:], -1, -2), axis=-1)
        ft = _sum(F[..., :n - p, :] * swapaxes(T[..., :, p:], -1, -2), axis=-1)
        s = tf - ft
        den_p = d[..., p:] - d[..., :n - p]
        val = where(den_p != 0, s / den_p, s)
        full = concatenate([val, broadcast_to(astype(0, val.dtype), batch + (p,))], axis=-1)
        F = where(on, full[..., :, None], F)
    minden = _abs(T[..., 0, 0])
    if n > 1:
        minden = _min(where(j_minus_i > 0, _abs(den), np.inf), axis=(-2, -1))
        minden = where(minden < _abs(T[..., 0, 0]), minden, _abs(T[..., 0, 0]))
    return F, minden


def funm(A, func, disp: bool = True):
    """func(A) for a function of a scalar, as ``jax.scipy.linalg.funm``: the Schur form made
    complex (rsf2csf), func on its diagonal, the Parlett recurrence above it.  A complex result;
    with ``disp=False`` also jax's error estimate."""
    (A,) = _arrays("funm", A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"funm: expected a square matrix, got shape {A.shape}")
    T, Z = rsf2csf(*schur(A))
    n = T.shape[-1]
    dT = diagonal(T)
    F = where(np.eye(n, dtype=bool), astype(func(dT), T.dtype)[None, :], 0)
    F = astype(F, T.dtype)
    F, minden = _parlett(F, T)
    F = matmul(matmul(Z, F), conj(_mT(Z)))
    if disp:
        return F
    tol = float(np.finfo(np.float32 if np.dtype(F.dtype) == np.complex64 else np.float64).eps)
    minden = where(minden == 0.0, tol, minden)
    upper = where(np.arange(n)[None, :] > np.arange(n)[:, None], _abs(T), 0)
    norm1 = _max(_sum(upper, axis=0))
    est = (tol / minden) * norm1
    err = where(_any(isinf(F)), np.inf, where(est > 1, 1.0, where(est > tol, est, tol)))
    return F, err


def _sylvester_triangular(R, S, F):
    """Y with R Y + Y S = F, R upper and S lower triangular: column j from the last,
    (R + S_jj I) y_j = f_j - Y[:, j+1:] S[j+1:, j]."""
    m, n = F.shape
    cols = [None] * n
    eye = np.eye(m, dtype=bool)
    for j in range(n - 1, -1, -1):
        rhs = F[:, j]
        if j + 1 < n:
            done = stack(cols[j + 1:], axis=-1)
            rhs = rhs - matmul(done, S[j + 1:, j])
        cols[j] = solve_triangular(where(eye, R + S[j, j], R), rhs, lower=False)
    return stack(cols, axis=-1)


def solve_sylvester(A, B, C, *, method: str = "schur", tol: float = 1e-8):
    """X with A X + X B = C, as ``jax.scipy.linalg.solve_sylvester``: Bartels-Stewart on the
    complex Schur forms (``method='schur'``) or through the eigen-decompositions
    (``'eigen'``); NaN where some eigenvalue sum of A and B has modulus below ``tol``; a real
    result for real C."""
    A, B, C = _arrays("solve_sylvester", A, B, C)
    if A.ndim != 2 or B.ndim != 2 or C.ndim != 2:
        raise ValueError(f"solve_sylvester: A, B and C must be matrices, got shapes {A.shape}, "
                         f"{B.shape}, {C.shape}")
    m, n = C.shape
    if A.shape != (m, m) or B.shape != (n, n):
        raise ValueError(f"solve_sylvester: A {A.shape} must be ({m}, {m}) and B {B.shape} "
                         f"({n}, {n}) for C of shape {C.shape}")
    if method == "schur":
        R, U = schur(A, output="complex")
        S, V = schur(conj(_mT(B)), output="complex")
        F = matmul(matmul(conj(_mT(U)), astype(C, R.dtype)), V)
        Y = _sylvester_triangular(R, conj(_mT(S)), F)
        X = matmul(matmul(U, Y), conj(_mT(V)))
    elif method == "eigen":
        RA, UA = eig(A)
        RB, UB = eig(B)
        F = solve(UA, matmul(astype(C, RA.dtype), UB))
        Y = F / (RA[:, None] + RB[None, :])
        X = matmul(matmul(UA, Y), inv(UB))
    else:
        raise ValueError(f'Unrecognized method {method}. The two valid methods are either '
                         f'"schur" or "eigen".')
    if kind_of(C.dtype) != "c":
        X = real(X)
    near = _any(_abs(eigvals(A)[:, None] + eigvals(B)[None, :]) < tol)
    return where(near, np.nan, X)
