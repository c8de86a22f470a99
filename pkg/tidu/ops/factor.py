"""Factorisations with several results: LU, Eigh, QR, SVD, and LUPermute (rows by LU pivots).

An interpreter instruction has one output, so each factorisation writes all its results into one
array, packed as ``cpp/include/tidu/factor.hpp`` documents, and ``td.linalg`` slices them out
(``Slice`` is linear, so the derivative of a result is the slice of the packed tangent):

=========================  ================================================================
``LU()``                   (..., m, m) -> (..., m, m + 2): ``[L\\U | pivots | permutation]``
``Eigh(vectors=True)``     (..., m, m) -> (..., m, m + 1): ``[V | w]``; ``vectors=False``: w
``QR(full_matrices)``      (..., m, n) -> (..., m*kq + kq*n): Q then R, row-major
``SVD(full, compute_uv)``  (..., m, n) -> (..., k + m*ku + kv*n): s, U, Vh; or s alone
=========================  ================================================================

Pivots and permutations are stored as numbers of the matrix dtype (exact below 2^24) and become
int32 through ``Convert``; their tangent is zero and an int32 value has none.  The derivatives
are written in tidu's own primitives (TriangularSolve, DotGeneral, Transpose, Conj, Select with
Iota masks, Slice/Reshape/Concatenate for packing), so transposes, higher orders and the XLA
lowering go through the generic machinery.  XLA lowering splices the StableHLO that jax emits
for the same ``jax.lax.linalg`` operation (``tidu.backends.xla.splice``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.backends.xla.splice import call_jax
from tidu.graph import aval
from tidu.ops.core import (
    COMPLEXES,
    INEXACT,
    A,
    Add,
    BroadcastInDim,
    Conj,
    Convert,
    F,
    Mul,
    Primitive,
    Real,
    ReduceSum,
    Reshape,
    Transpose,
    aval_of,
    check_dtype,
    const,
    fix,
    lin,
    real_dtype,
    same_op_batched,
    scale,
)
from tidu.ops.elementwise import Compare, Div, Sub
from tidu.ops.linalg import TriangularSolve, _conj, _keep, _mask, _matmul, _mT, _square
from tidu.ops.structural import Concatenate, Pad, Select, Slice

__all__ = ["LU", "LUPermute", "Eigh", "Geqrf", "QR", "SVD"]


# ---- helpers over fixed (F) and linear (A) values, last two axes a matrix ----

def _nd(b, x) -> int:
    return aval_of(b, x).ndim


def _fmm(b, x, y):
    return fix(b, _matmul(_nd(b, x)), x, y)


def _lmm(b, x, y, mask):
    return lin(b, _matmul(_nd(b, x)), [x, y], mask)


def _fH(b, x):
    """Adjoint (conjugate transpose) of a fixed matrix."""
    nd = _nd(b, x)
    t = fix(b, Transpose(tuple(range(nd - 2)) + (nd - 1, nd - 2)), x)
    return fix(b, Conj(), t) if aval_of(b, x).dtype in COMPLEXES else t


def _lH(b, t):
    av = aval_of(b, t)
    return _conj(b, _mT(b, t, av.ndim), av)


def _cols(b, x, lo: int, hi: int, active: bool = False):
    """x[..., lo:hi] (fixed or linear)."""
    sh = aval_of(b, x).shape
    op = Slice((0,) * len(sh), sh[:-1] + (hi,), (1,) * len(sh))
    if lo:
        op = Slice((0,) * (len(sh) - 1) + (lo,), sh[:-1] + (hi,), (1,) * len(sh))
    return lin(b, op, [x], [A]) if active else fix(b, op, x)


def _reshape(b, x, shape, active: bool = False):
    op = Reshape(tuple(shape))
    return lin(b, op, [x], [A]) if active else fix(b, op, x)


def _lbin(b, op, x, y):
    return lin(b, op, [x, y], [A, A])


def _fbin(b, op, x, y):
    return fix(b, op, x, y)


def _eye(b, shape, dtype):
    return fix(b, Convert(np.dtype(dtype).name), _mask(b, shape, "EQ"))


def _bcast(b, v, shape, axis: int):
    """v (..., k) broadcast to shape (..., k, k) along `axis` (-1: v[..., None, :], -2:
    v[..., :, None])."""
    nd = len(shape)
    return fix(b, BroadcastInDim(tuple(shape), tuple(range(nd - 2)) + (nd + axis,)), v)


def _to(b, x, dtype, active: bool = False):
    if aval_of(b, x).dtype == np.dtype(dtype):
        return x
    op = Convert(np.dtype(dtype).name)
    return lin(b, op, [x], [A]) if active else fix(b, op, x)


def _real(b, x, active: bool = False):
    if aval_of(b, x).dtype not in COMPLEXES:
        return x
    return lin(b, Real(), [x], [A]) if active else fix(b, Real(), x)


def _hermitian_tangent(b, t, av):
    """The Hermitian matrix that the lower triangle of t stands for (t's diagonal: real part)."""
    below = fix(b, Convert(av.dtype.name), _mask(b, av.shape, "GT"))
    diag = fix(b, Convert(av.dtype.name), _mask(b, av.shape, "EQ"))
    weight = fix(b, Add(), below, fix(b, Mul(), diag, const(b, 0.5, av)))
    half = scale(b, weight, t)
    return lin(b, Add(), [half, _lH(b, half)], [A, A])


def _concat_last(b, parts):
    nd = aval_of(b, parts[0]).ndim
    return lin(b, Concatenate(nd - 1), parts, [A] * len(parts))


def _inexact_matrix(name, x, square=True):
    check_dtype(name, x, INEXACT, "floating or complex")
    if square:
        return _square(name, x)
    if x.ndim < 2:
        raise ValueError(f"{name}: operand of shape {x.shape} is not a matrix (or a batch of "
                         f"them, shape (..., m, n))")
    return x.shape[-2:]


def _splice(lo, out, x, key, fn):
    return call_jax(lo, out, [x], key, fn)


# ---- LU ----

@register
@dataclass(frozen=True)
class LU(Primitive):
    """LU factorisation with partial pivoting of (..., m, m): P a = L U, packed as
    ``[L\\U | pivots | permutation]`` (..., m, m + 2); pivots are LAPACK's (0-based row swaps),
    the permutation maps rows of P a to rows of a."""

    uses_blas = True

    batch = same_op_batched  # leading axes are batch axes

    def abstract_eval(self, x):
        m = _inexact_matrix(self.name, x)
        return aval(x.shape[:-1] + (m + 2,), x.dtype)

    def linearize(self, b, primal_in, primal_out, t):
        # jax's rule: X = L^-1 P da U^-1; dL = L tril(X, -1), dU = triu(X) U
        if t[0] is None:
            return [None]
        av = primal_in[0].aval
        nd, m, dt = av.ndim, av.shape[-1], av.dtype
        packed = primal_out[0]
        lu = _cols(b, packed, 0, m)
        piv = lu_pivots(b, packed, m)
        pda = lin(b, LUPermute(False), [piv, t[0]], [F, A])
        la = lin(b, TriangularSolve(True, True, False, False, True), [lu, pda], [F, A])
        x = lin(b, TriangularSolve(False, False, False, False, False), [lu, la], [F, A])
        zero = const(b, 0, av)
        low = fix(b, Select(), _mask(b, av.shape, "GT"), lu, zero)
        L = fix(b, Add(), low, _eye(b, av.shape, dt))
        U = fix(b, Select(), _mask(b, av.shape, "LE"), lu, zero)
        dL = _lmm(b, L, _keep(b, _mask(b, av.shape, "GT"), x, av), [F, A])
        dU = _lmm(b, _keep(b, _mask(b, av.shape, "LE"), x, av), U, [A, F])
        dlu = _lbin(b, Add(), dL, dU)
        z = (0,) * nd
        return [lin(b, Pad(z, z[:-1] + (2,), z), [dlu], [A])]

    def lower(self, lo, out, x):
        def fn(a):
            import jax  # noqa: PLC0415  (optional dependency)
            import jax.numpy as jnp  # noqa: PLC0415  (optional dependency)

            lu, piv, perm = jax.lax.linalg.lu(a)
            cols = jnp.stack([piv, perm], axis=-1).astype(a.dtype)
            return jnp.concatenate([lu, cols], axis=-1)

        return _splice(lo, out, x, "lu", fn)

    def impl(self, x):
        import scipy.linalg as sl  # noqa: PLC0415  (optional dependency)

        x = np.asarray(x)
        m = x.shape[-1]
        flat = x.reshape((-1, m, m))
        out = np.zeros(flat.shape[:-1] + (m + 2,), x.dtype)
        for i, a in enumerate(flat):
            lu, piv = sl.lu_factor(a, check_finite=False)
            perm = np.arange(m)
            for k, p in enumerate(piv):
                perm[[k, p]] = perm[[p, k]]
            out[i, :, :m], out[i, :, m], out[i, :, m + 1] = lu, piv, perm
        return out.reshape(x.shape[:-1] + (m + 2,))


def lu_pivots(b, packed, m: int):
    """The int32 pivots (..., m) of a packed LU, as a fixed value."""
    av = aval_of(b, packed)
    col = _real(b, _cols(b, packed, m, m + 1))
    return fix(b, Convert("int32"), _reshape(b, col, av.shape[:-1]))


@register
@dataclass(frozen=True)
class LUPermute(Primitive):
    """The rows of x (..., m, n) swapped i <-> pivots[i] for i = 0, 1, ... (P x; backwards, P^T x,
    when `inverse`); pivots (..., k) int32, a pivot outside [0, m) is ignored.  Linear in x."""

    inverse: bool
    linear = True

    batch = same_op_batched  # leading axes are batch axes

    def __post_init__(self):
        object.__setattr__(self, "inverse", bool(self.inverse))

    def abstract_eval(self, piv, x):
        n = self.name
        if piv.dtype != np.dtype("int32"):
            raise TypeError(f"{n}: pivots dtype {piv.dtype} is not int32")
        check_dtype(n, x, INEXACT, "floating or complex")
        if x.ndim < 2 or piv.ndim != x.ndim - 1 or piv.shape[:-1] != x.shape[:-2]:
            raise ValueError(f"{n}: pivots of shape {piv.shape} do not match x of shape {x.shape} "
                             f"(expected {x.shape[:-2]} + (k,))")
        return x

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, [primal_in[0], t[1]], [F, A])] if t[1] is not None else [None]

    def transpose_rule(self, b, ct, inputs, mode):
        if mode.active_mask[0]:
            raise ValueError("LUPermute is linear in x only; the pivots must be fixed")
        return [None, lin(b, LUPermute(not self.inverse), [inputs[0], ct[0]], [F, A])]

    def lower(self, lo, out, piv, x):
        inverse = self.inverse

        def fn(p, a):
            import jax  # noqa: PLC0415  (optional dependency)
            import jax.numpy as jnp  # noqa: PLC0415  (optional dependency)

            m = a.shape[-2]
            perm = jax.lax.linalg.lu_pivots_to_permutation(p, m)
            if inverse:
                perm = jnp.argsort(perm, axis=-1)
            return jnp.take_along_axis(a, perm[..., None], axis=-2)

        return call_jax(lo, out, [piv, x], f"lu_permute_{int(inverse)}", fn)

    def impl(self, piv, x):
        x = np.array(x, copy=True)
        m, k = x.shape[-2], piv.shape[-1]
        flat, pf = x.reshape((-1,) + x.shape[-2:]), np.asarray(piv).reshape((-1, k))
        for bi in range(flat.shape[0]):
            order = range(k - 1, -1, -1) if self.inverse else range(k)
            for i in order:
                j = int(pf[bi, i])
                if i < m and 0 <= j < m and j != i:
                    flat[bi, [i, j]] = flat[bi, [j, i]]
        return flat.reshape(x.shape)


# ---- Eigh ----

@register
@dataclass(frozen=True)
class Eigh(Primitive):
    """Eigen-decomposition of a Hermitian (..., m, m), reading its lower triangle (the real part
    of its diagonal): ``[V | w]`` (..., m, m + 1), eigenvalues ascending, when `vectors`; the
    eigenvalues alone, of the real dtype, otherwise."""

    uses_blas = True

    vectors: bool = True

    batch = same_op_batched  # leading axes are batch axes

    def __post_init__(self):
        object.__setattr__(self, "vectors", bool(self.vectors))

    def abstract_eval(self, x):
        m = _inexact_matrix(self.name, x)
        if self.vectors:
            return aval(x.shape[:-1] + (m + 1,), x.dtype)
        return aval(x.shape[:-1], real_dtype(x.dtype))

    def linearize(self, b, primal_in, primal_out, t):
        # dS the Hermitian tangent; dw = Re diag(V^H dS V); dV = V (Fm * (V^H dS V)),
        # Fm[i, j] = 1 / (w_j - w_i) where w_j != w_i, 0 where they are equal (the diagonal and
        # equal eigenvalues; docs/linalg.md says what that gives at degenerate spectra).  jax's rule
        # leaves inf there and relies on symbolic zeros: grad of a function of w alone never
        # transposes the dV branch.  Here dV and dw share one packed tangent, so the cotangent
        # of V reaching Fm is a dense zero, and an inf in Fm would turn it into 0 * inf = NaN
        # in the eigenvalue gradient (issue #28: grad of sum(eigh(eye(3))[0]) was all NaN).
        # dw never reads Fm.
        if t[0] is None:
            return [None]
        av = primal_in[0].aval
        nd, m, dt = av.ndim, av.shape[-1], av.dtype
        rdt = real_dtype(dt)
        packed = primal_out[0] if self.vectors else fix(b, Eigh(True), primal_in[0])
        V = _cols(b, packed, 0, m)
        ds = _hermitian_tangent(b, t[0], av)
        dsv = _lmm(b, ds, V, [A, F])
        if not self.vectors:  # dw_j = Re sum_i conj(V_ij) (dS V)_ij
            d = lin(b, ReduceSum((nd - 2,)), [scale(b, _conj_fixed(b, V), dsv)], [A])
            return [_real(b, d, active=True)]
        inner = _lmm(b, _fH(b, V), dsv, [F, A])
        w = _real(b, _reshape(b, _cols(b, packed, m, m + 1), av.shape[:-1]))
        rav = aval(av.shape, rdt)
        wj, wi = _bcast(b, w, av.shape, -1), _bcast(b, w, av.shape, -2)
        gaps = _fbin(b, Sub(), wj, wi)
        is0 = fix(b, Convert(rdt.name), fix(b, Compare("EQ"), gaps, const(b, 0, rav)))
        fm = _fbin(b, Sub(), _fbin(b, Div(), const(b, 1, rav), _fbin(b, Add(), gaps, is0)), is0)
        dV = _lmm(b, V, scale(b, _to(b, fm, dt), inner), [F, A])
        dw = lin(b, ReduceSum((nd - 1,)), [_keep(b, _mask(b, av.shape, "EQ"), inner, av)], [A])
        dw = _to(b, _real(b, dw, active=True), dt, active=True)
        return [_concat_last(b, [dV, _reshape(b, dw, av.shape[:-1] + (1,), active=True)])]

    def lower(self, lo, out, x):
        vectors = self.vectors

        def fn(a):
            import jax  # noqa: PLC0415  (optional dependency)
            import jax.numpy as jnp  # noqa: PLC0415  (optional dependency)

            v, w = jax.lax.linalg.eigh(a, lower=True, symmetrize_input=False)
            if not vectors:
                return w
            return jnp.concatenate([v, w[..., None].astype(a.dtype)], axis=-1)

        return _splice(lo, out, x, f"eigh_{int(vectors)}", fn)

    def impl(self, x):
        x = np.asarray(x)
        low = np.tril(x, -1)
        herm = low + np.conj(np.swapaxes(low, -1, -2)) + np.real(
            np.diagonal(x, 0, -2, -1))[..., None] * np.eye(x.shape[-1])
        w, v = np.linalg.eigh(herm.astype(x.dtype))
        if not self.vectors:
            return w.astype(real_dtype(x.dtype))
        return np.concatenate([v, w[..., None].astype(x.dtype)], axis=-1)


def _conj_fixed(b, x):
    return fix(b, Conj(), x) if aval_of(b, x).dtype in COMPLEXES else x


# ---- QR ----

def _qr_sizes(full: bool, m: int, n: int):
    kq = m if full else min(m, n)
    return kq, m * kq + kq * n


@register
@dataclass(frozen=True)
class QR(Primitive):
    """a = Q R for (..., m, n): Q (m x kq) with orthonormal columns, R (kq x n) upper
    triangular, kq = min(m, n) (or m when `full_matrices`), packed flat: Q then R (..., m*kq +
    kq*n).  Householder (LAPACK ?geqrf), so R's diagonal may be negative, as jax/numpy."""

    uses_blas = True

    full_matrices: bool = False

    batch = same_op_batched  # leading axes are batch axes

    def __post_init__(self):
        object.__setattr__(self, "full_matrices", bool(self.full_matrices))

    def abstract_eval(self, x):
        m, n = _inexact_matrix(self.name, x, square=False)
        return aval(x.shape[:-2] + (_qr_sizes(self.full_matrices, m, n)[1],), x.dtype)

    def linearize(self, b, primal_in, primal_out, t):
        # jax's rule (m >= n): dX = da R^-1, Qt = Q^H dX, dO = tril(Qt,-1) - tril(Qt,-1)^H
        # (+ i Im diag(Qt) for complex); dQ = Q (dO - Qt) + dX, dR = (Qt - dO) R
        if t[0] is None:
            return [None]
        av = primal_in[0].aval
        (m, n), dt = av.shape[-2:], av.dtype
        if m < n or (self.full_matrices and m != n):
            raise NotImplementedError(f"{self.name}: derivative of the QR factorisation of a "
                                      f"{m}x{n} matrix with full_matrices={self.full_matrices} "
                                      f"(defined for m >= n, reduced), as in jax")
        batch = av.shape[:-2]
        packed = primal_out[0]
        Q = _reshape(b, _cols(b, packed, 0, m * n), batch + (m, n))
        R = _reshape(b, _cols(b, packed, m * n, m * n + n * n), batch + (n, n))
        sq = aval(batch + (n, n), dt)
        dx = lin(b, TriangularSolve(False, False, False, False, False), [R, t[0]], [F, A])
        qt = _lmm(b, _fH(b, Q), dx, [F, A])
        low = _keep(b, _mask(b, sq.shape, "GT"), qt, sq)
        do = _lbin(b, Sub(), low, _lH(b, low))
        if dt in COMPLEXES:
            im = _lbin(b, Sub(), qt, _to(b, _real(b, qt, active=True), dt, active=True))
            do = _lbin(b, Add(), do, _keep(b, _mask(b, sq.shape, "EQ"), im, sq))
        dq = _lbin(b, Add(), _lmm(b, Q, _lbin(b, Sub(), do, qt), [F, A]), dx)
        dr = _lmm(b, _lbin(b, Sub(), qt, do), R, [A, F])
        return [_concat_last(b, [_reshape(b, dq, batch + (m * n,), active=True),
                                 _reshape(b, dr, batch + (n * n,), active=True)])]

    def lower(self, lo, out, x):
        full = self.full_matrices

        def fn(a):
            import jax  # noqa: PLC0415  (optional dependency)
            import jax.numpy as jnp  # noqa: PLC0415  (optional dependency)

            q, r = jax.lax.linalg.qr(a, full_matrices=full)
            bs = a.shape[:-2]
            return jnp.concatenate([q.reshape(bs + (-1,)), r.reshape(bs + (-1,))], axis=-1)

        return _splice(lo, out, x, f"qr_{int(full)}", fn)

    def impl(self, x):
        x = np.asarray(x)
        q, r = np.linalg.qr(x, mode="complete" if self.full_matrices else "reduced")
        bs = x.shape[:-2]
        return np.concatenate([q.reshape(bs + (-1,)), r.reshape(bs + (-1,))], axis=-1)


GEQRF_DERIVATIVE_MESSAGE = (
    "Geqrf: the Householder reflectors of qr(mode='raw') have no derivative rule (jax defines "
    "none either: 'Differentiation rule for 'geqrf' not implemented'). Differentiate through "
    "td.linalg.qr's modes 'reduced' or 'r'.")


@register
@dataclass(frozen=True)
class Geqrf(Primitive):
    """The Householder QR as LAPACK ``?geqrf`` leaves it (jax's ``geqrf_p``; what
    ``jnp.linalg.qr(mode="raw")`` returns, transposed): (..., m, n) -> (..., m*n + k),
    k = min(m, n), packed ``[A' | tau]``, A' (m x n, row-major) holding R on and above the
    diagonal and each reflector's vector below it (its leading 1 implied), tau the reflectors'
    scalar factors.  No derivative, as jax's."""

    uses_blas = True

    batch = same_op_batched  # leading axes are batch axes

    def abstract_eval(self, x):
        m, n = _inexact_matrix(self.name, x, square=False)
        return aval(x.shape[:-2] + (m * n + min(m, n),), x.dtype)

    def linearize(self, b, primal_in, primal_out, t):
        if t[0] is None:
            return [None]
        raise NotImplementedError(GEQRF_DERIVATIVE_MESSAGE)

    def lower(self, lo, out, x):
        def fn(a):
            import jax.numpy as jnp  # noqa: PLC0415  (optional dependency)

            h, tau = jnp.linalg.qr(a, mode="raw")
            bs = a.shape[:-2]
            return jnp.concatenate([jnp.swapaxes(h, -1, -2).reshape(bs + (-1,)), tau], axis=-1)

        return _splice(lo, out, x, "geqrf", fn)

    def impl(self, x):
        x = np.asarray(x)
        m, n = x.shape[-2:]
        outs = []
        for a in x.reshape((-1, m, n)):
            h, tau = np.linalg.qr(a, mode="raw")
            outs.append(np.concatenate([h.T.reshape(-1), tau]))
        return np.asarray(outs, x.dtype).reshape(x.shape[:-2] + (m * n + min(m, n),))


# ---- SVD ----

def _svd_sizes(full: bool, m: int, n: int):
    k = min(m, n)
    ku, kv = (m, n) if full else (k, k)
    return k, ku, kv, k + m * ku + kv * n


@register
@dataclass(frozen=True)
class SVD(Primitive):
    """a = U diag(s) Vh for (..., m, n), s descending (LAPACK ?gesdd): packed flat s, U (m x ku),
    Vh (kv x n) (..., k + m*ku + kv*n) when `compute_uv`, ku = kv = k = min(m, n) or (m, n) when
    `full_matrices`; s alone, of the real dtype, otherwise."""

    uses_blas = True

    full_matrices: bool = False
    compute_uv: bool = True

    batch = same_op_batched  # leading axes are batch axes

    def __post_init__(self):
        object.__setattr__(self, "full_matrices", bool(self.full_matrices))
        object.__setattr__(self, "compute_uv", bool(self.compute_uv))

    def abstract_eval(self, x):
        m, n = _inexact_matrix(self.name, x, square=False)
        k, _, _, size = _svd_sizes(self.full_matrices, m, n)
        if not self.compute_uv:
            return aval(x.shape[:-2] + (k,), real_dtype(x.dtype))
        return aval(x.shape[:-2] + (size,), x.dtype)

    def linearize(self, b, primal_in, primal_out, t):
        # jax's rule: dS = U^H da V, ds = Re diag(dS); F[i,j] = 1/(s_j^2 - s_i^2) (0 where
        # equal); dU = U (F*(dS S + S dS^H) + (dS - dS^H)/2 * diag(1/s)) (+ (I - U U^H) da V / s
        # when m > n); dV = V (F*(S dS + dS^H S)) (+ (I - V V^H) da^H U / s when n > m)
        if t[0] is None:
            return [None]
        av = primal_in[0].aval
        nd, (m, n), dt = av.ndim, av.shape[-2:], av.dtype
        rdt = real_dtype(dt)
        if self.compute_uv and self.full_matrices and m != n:
            raise NotImplementedError(f"{self.name}: derivative of U and Vh with "
                                      f"full_matrices=True for a {m}x{n} matrix (as jax)")
        batch = av.shape[:-2]
        k = min(m, n)
        red = SVD(False, True)
        packed = primal_out[0] if self.compute_uv and not (self.full_matrices and m != n) \
            else fix(b, red, primal_in[0])
        s = _real(b, _cols(b, packed, 0, k))
        U = _reshape(b, _cols(b, packed, k, k + m * k), batch + (m, k))
        Vh = _reshape(b, _cols(b, packed, k + m * k, k + m * k + k * n), batch + (k, n))
        V = _fH(b, Vh)
        Uh = _fH(b, U)
        sq = batch + (k, k)
        sqav, rsq = aval(sq, dt), aval(sq, rdt)
        dS = _lmm(b, Uh, _lmm(b, t[0], V, [A, F]), [F, A])
        ds = lin(b, ReduceSum((nd - 1,)), [_keep(b, _mask(b, sq, "EQ"), dS, sqav)], [A])
        ds = _real(b, ds, active=True)
        if not self.compute_uv:
            return [ds]
        sj, si = _bcast(b, s, sq, -1), _bcast(b, s, sq, -2)
        diffs = _fbin(b, Mul(), _fbin(b, Add(), sj, si), _fbin(b, Sub(), sj, si))
        zero_r, one_r = const(b, 0, rsq), const(b, 1, rsq)
        is0 = fix(b, Convert(rdt.name), fix(b, Compare("EQ"), diffs, zero_r))
        fm = _fbin(b, Sub(), _fbin(b, Div(), one_r, _fbin(b, Add(), diffs, is0)), is0)
        fm = _to(b, fm, dt)
        kav = aval(batch + (k,), rdt)
        s0 = fix(b, Convert(rdt.name), fix(b, Compare("EQ"), s, const(b, 0, kav)))
        sinv = _fbin(b, Sub(), _fbin(b, Div(), const(b, 1, kav), _fbin(b, Add(), s, s0)), s0)
        sinv_mat = fix(b, Select(), _mask(b, sq, "EQ"), _bcast(b, sinv, sq, -1), zero_r)
        sjc, sic = _to(b, sj, dt), _to(b, si, dt)
        dSS, SdS = scale(b, sjc, dS), scale(b, sic, dS)
        half = const(b, 0.5, sqav)
        udiag = scale(b, fix(b, Mul(), half, _to(b, sinv_mat, dt)),
                      _lbin(b, Sub(), dS, _lH(b, dS)))
        dU = _lmm(b, U, _lbin(b, Add(), scale(b, fm, _lbin(b, Add(), dSS, _lH(b, dSS))), udiag),
                  [F, A])
        dV = _lmm(b, V, scale(b, fm, _lbin(b, Add(), SdS, _lH(b, SdS))), [F, A])
        if m > n:
            dav = _lmm(b, t[0], V, [A, F])
            proj = _lbin(b, Sub(), dav, _lmm(b, U, _lmm(b, Uh, dav, [F, A]), [F, A]))
            dU = _lbin(b, Add(), dU, scale(b, _to(b, _bcast(b, s_inv_row(b, s, batch, k), batch
                                                              + (m, k), -1), dt), proj))
        if n > m:
            dahu = _lmm(b, _lH(b, t[0]), U, [A, F])
            proj = _lbin(b, Sub(), dahu, _lmm(b, V, _lmm(b, Vh, dahu, [F, A]), [F, A]))
            dV = _lbin(b, Add(), dV, scale(b, _to(b, _bcast(b, s_inv_row(b, s, batch, k), batch
                                                              + (n, k), -1), dt), proj))
        return [_concat_last(b, [_to(b, ds, dt, active=True),
                                 _reshape(b, dU, batch + (m * k,), active=True),
                                 _reshape(b, _lH(b, dV), batch + (k * n,), active=True)])]

    def lower(self, lo, out, x):
        full, uv = self.full_matrices, self.compute_uv

        def fn(a):
            import jax  # noqa: PLC0415  (optional dependency)
            import jax.numpy as jnp  # noqa: PLC0415  (optional dependency)

            if not uv:
                return jax.lax.linalg.svd(a, full_matrices=full, compute_uv=False)
            u, s, vh = jax.lax.linalg.svd(a, full_matrices=full, compute_uv=True)
            bs = a.shape[:-2]
            return jnp.concatenate([s.astype(a.dtype), u.reshape(bs + (-1,)),
                                    vh.reshape(bs + (-1,))], axis=-1)

        return _splice(lo, out, x, f"svd_{int(full)}{int(uv)}", fn)

    def impl(self, x):
        x = np.asarray(x)
        if not self.compute_uv:
            return np.linalg.svd(x, compute_uv=False).astype(real_dtype(x.dtype))
        u, s, vh = np.linalg.svd(x, full_matrices=self.full_matrices)
        bs = x.shape[:-2]
        return np.concatenate([s.astype(x.dtype), u.reshape(bs + (-1,)), vh.reshape(bs + (-1,))],
                              axis=-1)


def s_inv_row(b, s, batch, k):
    """1/s (inf where s = 0: the m != n correction divides by s, as jax's)."""
    return fix(b, Div(), const(b, 1, aval(batch + (k,), aval_of(b, s).dtype)), s)
