"""Eig: the eigen-decomposition of a general square matrix (jax's ``eig_p``, LAPACK ``?geev``).

An interpreter instruction has one output, so ``Eig`` packs its results as ``Eigh`` does
(``tidu/kernels/factor.hpp``), always of the complex dtype of the operand:

===============================  ==============================================================
``Eig(left, right, _)``, either  (..., m, m) -> (..., m, m*(left + right) + 1): ``[VL | VR | w]``
``Eig(False, False, _)``         (..., m, m) -> w (..., m)
===============================  ==============================================================

Each eigenvector has unit 2-norm and its largest-magnitude component real (LAPACK's ``geev``
normalisation, which jax keeps); the order is LAPACK's.  The derivative is jax's
``eig_jvp_rule``: the eigenvalues' tangent is ``diag(V^-1 dA V)``; the eigenvectors' (jax's
``_eig_vec_jvp``, nondegenerate perturbation theory under the ``geev`` normalisation) only when
``enable_eigvec_derivs`` (jax's opt-in: it holds only for distinct eigenvalues and no tie for the
largest component), and otherwise ``NotImplementedError`` with jax's message.  The XLA lowering
splices jax's own ``jax.lax.linalg.eig`` (a LAPACK custom call on CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.backends.xla.splice import call_jax
from tidu.graph import aval
from tidu.ops.core import (
    A,
    Add,
    BroadcastInDim,
    Conj,
    Convert,
    F,
    Imag,
    Mul,
    Primitive,
    Real,
    ReduceSum,
    Transpose,
    aval_of,
    const,
    fix,
    lin,
    real_dtype,
    same_op_batched,
    scale,
)
from tidu.ops.elementwise import Abs, Compare, Div, Neg, Sub
from tidu.ops.factor import (
    LU,
    LUPermute,
    _bcast,
    _cols,
    _concat_last,
    _eye,
    _fbin,
    _inexact_matrix,
    _lH,
    _lmm,
    _reshape,
    _to,
    lu_pivots,
)
from tidu.ops.fft import complex_dtype
from tidu.ops.linalg import TriangularSolve, _keep, _mask
from tidu.ops.reductions import ArgMax
from tidu.ops.structural import Iota

__all__ = ["Eig"]

EIGVEC_DERIVS_MESSAGE = (
    "Derivatives of non-symmetric eigenvectors are only valid under assumptions on the input "
    "that tidu (as JAX) cannot check: pass enable_eigvec_derivs=True to td.lax.linalg.eig to opt "
    "in (each eigenvalue distinct, no eigenvector with two components tied for largest "
    "magnitude). td.linalg.eigvals is differentiable. See "
    "https://github.com/jax-ml/jax/issues/2748 for discussion.")


@register
@dataclass(frozen=True)
class Eig(Primitive):
    """Eigenvalues w and left/right eigenvectors of a general (..., m, m), complex results:
    ``[VL | VR | w]`` when either vector set is asked for, w alone otherwise (module doc)."""

    compute_left_eigenvectors: bool = False
    compute_right_eigenvectors: bool = True
    enable_eigvec_derivs: bool = False

    uses_blas = True

    batch = same_op_batched  # leading axes are batch axes

    def __post_init__(self):
        for f in ("compute_left_eigenvectors", "compute_right_eigenvectors",
                  "enable_eigvec_derivs"):
            object.__setattr__(self, f, bool(getattr(self, f)))

    @property
    def _nv(self) -> int:
        return int(self.compute_left_eigenvectors) + int(self.compute_right_eigenvectors)

    def abstract_eval(self, x):
        m = _inexact_matrix(self.name, x)
        cdt = complex_dtype(x.dtype)
        if self._nv:
            return aval(x.shape[:-1] + (m * self._nv + 1,), cdt)
        return aval(x.shape[:-1], cdt)

    def linearize(self, b, primal_in, primal_out, t):
        if t[0] is None:
            return [None]
        if self._nv and not self.enable_eigvec_derivs:
            raise NotImplementedError(EIGVEC_DERIVS_MESSAGE)
        av = primal_in[0].aval
        m, cdt = av.shape[-1], complex_dtype(av.dtype)
        left, right = self.compute_left_eigenvectors, self.compute_right_eigenvectors
        full = primal_out[0] if right else fix(b, Eig(left, True, self.enable_eigvec_derivs),
                                               primal_in[0])
        off = m if left else 0
        vr = _cols(b, full, off, off + m)
        da = _to(b, t[0], cdt, active=True)
        if not self._nv:  # jax: (solve(vr, da) * vr^T).sum(-1)
            x = _solve(b, vr, da)
            nd = av.ndim
            return [lin(b, ReduceSum((nd - 1,)), [scale(b, _fT(b, vr), x)], [A])]
        w = _reshape(b, _cols(b, full, 2 * m if left else m, (2 * m if left else m) + 1),
                     av.shape[:-1])
        dw, dvr = _eig_vec_jvp(b, w, vr, da)
        parts = []
        if left:
            _, dvl = _eig_vec_jvp(b, fix(b, Conj(), w), _cols(b, full, 0, m), _lH(b, da))
            parts.append(dvl)
        if right:
            parts.append(dvr)
        parts.append(_reshape(b, dw, av.shape[:-1] + (1,), active=True))
        return [_concat_last(b, parts)]

    def lower(self, lo, out, x):
        left, right = self.compute_left_eigenvectors, self.compute_right_eigenvectors

        def fn(a):
            import jax  # noqa: PLC0415  (optional dependency)
            import jax.numpy as jnp  # noqa: PLC0415  (optional dependency)

            outs = jax.lax.linalg.eig(a, compute_left_eigenvectors=left,
                                      compute_right_eigenvectors=right)
            if not (left or right):
                return outs[0]
            return jnp.concatenate([*outs[1:], outs[0][..., None]], axis=-1)

        return call_jax(lo, out, [x], f"eig_{int(left)}{int(right)}", fn)

    def impl(self, x):
        import scipy.linalg as sl  # noqa: PLC0415  (optional dependency)

        x = np.asarray(x)
        m, cdt = x.shape[-1], complex_dtype(x.dtype)
        left, right = self.compute_left_eigenvectors, self.compute_right_eigenvectors
        flat = x.reshape((-1, m, m))
        outs = []
        for a in flat:
            w, vl, vr = sl.eig(a, left=True, right=True)
            parts = ([vl] if left else []) + ([vr] if right else [])
            outs.append(np.concatenate(parts + [w[:, None]], axis=-1) if parts else w)
        out = np.asarray(outs, cdt)
        return out.reshape(x.shape[:-2] + out.shape[1:])


def _fT(b, x):
    """The transpose (no conjugate) of a fixed matrix."""
    nd = aval_of(b, x).ndim
    return fix(b, Transpose(tuple(range(nd - 2)) + (nd - 1, nd - 2)), x)


def _solve(b, v, rhs):
    """v^-1 rhs for a fixed square v (LU with partial pivoting) and a linear rhs."""
    m = aval_of(b, v).shape[-1]
    packed = fix(b, LU(), v)
    lu = _cols(b, packed, 0, m)
    prhs = lin(b, LUPermute(False), [lu_pivots(b, packed, m), rhs], [F, A])
    y = lin(b, TriangularSolve(True, True, False, False, True), [lu, prhs], [F, A])
    return lin(b, TriangularSolve(True, False, False, False, False), [lu, y], [F, A])


def _eig_vec_jvp(b, w, v, da):
    """jax's ``_eig_vec_jvp``: (dw, dv) for A v_j = w_j v_j under geev's normalisation (unit
    2-norm, the largest-magnitude component of each v_j real)."""
    av = aval_of(b, v)
    shape, nd, cdt = av.shape, av.ndim, av.dtype
    rdt = real_dtype(cdt)
    eye = _eye(b, shape, cdt)
    # Fmat = 1 / (eye + w[..., None, :] - w[..., :, None]) - eye
    gaps = _fbin(b, Add(), eye, _fbin(b, Sub(), _bcast(b, w, shape, -1), _bcast(b, w, shape, -2)))
    fmat = _fbin(b, Sub(), _fbin(b, Div(), const(b, 1, av), gaps), eye)
    p = _lmm(b, _solve(b, v, da), v, [A, F])
    dw = lin(b, ReduceSum((nd - 1,)), [_keep(b, _mask(b, shape, "EQ"), p, av)], [A])
    u = _lmm(b, v, scale(b, fmat, p), [F, A])
    # c_j = -Re(v_j^H u_j) - i Im(u_kj) / v_kj, k = argmax_i |v_ij|
    k = fix(b, ArgMax(nd - 2, "int32"), fix(b, Abs(), v))
    rows = fix(b, Iota(tuple(shape), "int32", nd - 2))
    kb = fix(b, BroadcastInDim(tuple(shape), tuple(i for i in range(nd) if i != nd - 2)), k)
    mask = fix(b, Convert(cdt.name), fix(b, Compare("EQ"), rows, kb))
    red = ReduceSum((nd - 2,))
    s1 = lin(b, red, [scale(b, fix(b, Conj(), v), u)], [A])
    s2 = lin(b, red, [scale(b, mask, u)], [A])
    vk = fix(b, Real(), fix(b, red, fix(b, Mul(), mask, v)))
    cav = aval(shape[:-2] + (shape[-1],), cdt)
    coef = fix(b, Mul(), const(b, -1j, cav),
               fix(b, Convert(cdt.name), _fbin(b, Div(), const(b, 1, aval(cav.shape, rdt)), vk)))
    re = _to(b, lin(b, Real(), [s1], [A]), cdt, active=True)
    im = _to(b, lin(b, Imag(), [s2], [A]), cdt, active=True)
    c = lin(b, Add(), [lin(b, Neg(), [re], [A]), scale(b, coef, im)], [A, A])
    cb = lin(b, BroadcastInDim(tuple(shape), tuple(i for i in range(nd) if i != nd - 2)), [c],
             [A])
    return dw, lin(b, Add(), [u, scale(b, v, cb)], [A, A])
