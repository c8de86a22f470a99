"""Schur: the Schur decomposition A = Z T Z^H of a square matrix (jax's ``schur_p``, LAPACK
``?gees`` without eigenvalue sorting); Hessenberg: A = Q H Q^H with H upper Hessenberg (jax's
``hessenberg_p`` and ``householder_product``, LAPACK ``?gehrd`` + ``?orghr``/``?unghr``), packed
the same way, ``[H | Q]``.

An interpreter instruction has one output, so ``Schur`` packs its results as ``Eig`` does
(``tidu/kernels/factor.hpp``), in the operand's dtype: (..., m, m) -> (..., m, 2m), ``[T | Z]``.
For real input T is quasi-upper-triangular (a 2x2 block per complex-conjugate eigenvalue pair),
for complex input upper triangular; Z is orthogonal (unitary).  A matrix with a non-finite
entry, or one where ``?gees`` does not converge, gives NaN.

jax defines no derivative for ``schur`` or ``hessenberg``; neither does tidu: differentiating raises
``NotImplementedError`` naming the primitive.  The XLA lowering splices jax's own
``jax.lax.linalg.schur`` (a LAPACK custom call on CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.graph import aval
from tidu.ops.core import Primitive, same_op_batched
from tidu.ops.factor import _inexact_matrix, _splice

__all__ = ["Hessenberg", "Schur"]

SCHUR_DERIVATIVE_MESSAGE = (
    "Schur: the Schur decomposition has no derivative rule (jax defines none either: "
    "'Differentiation rule for schur not implemented'). Differentiate through td.linalg.eig or "
    "td.linalg.eigh, or wrap the computation in td.custom_jvp with your own rule.")


@register
@dataclass(frozen=True)
class Schur(Primitive):
    """``[T | Z]`` with A = Z T Z^H, of the operand's dtype (module doc)."""

    uses_blas = True

    batch = same_op_batched  # leading axes are batch axes

    def abstract_eval(self, x):
        m = _inexact_matrix(self.name, x)
        return aval(x.shape[:-1] + (2 * m,), x.dtype)

    def linearize(self, b, primal_in, primal_out, t):
        if t[0] is None:
            return [None]
        raise NotImplementedError(SCHUR_DERIVATIVE_MESSAGE)

    def lower(self, lo, out, x):
        def fn(a):
            import jax  # noqa: PLC0415  (optional dependency)
            import jax.numpy as jnp  # noqa: PLC0415  (optional dependency)

            t, z = jax.lax.linalg.schur(a)
            return jnp.concatenate([t, z], axis=-1)

        return _splice(lo, out, x, "schur", fn)

    def impl(self, x):
        import scipy.linalg as sl  # noqa: PLC0415  (optional dependency)

        x = np.asarray(x)
        m = x.shape[-1]
        flat = x.reshape((-1, m, m))
        outs = []
        for a in flat:
            if not np.all(np.isfinite(a)):
                outs.append(np.full((m, 2 * m), np.nan, x.dtype))
                continue
            t, z = sl.schur(a, output="complex" if np.iscomplexobj(a) else "real")
            outs.append(np.concatenate([t, z], axis=-1))
        out = np.asarray(outs, x.dtype).reshape(x.shape[:-1] + (2 * m,))
        return out


HESSENBERG_DERIVATIVE_MESSAGE = (
    "Hessenberg: the Hessenberg reduction has no derivative rule (jax defines none either). "
    "Wrap the computation in td.custom_jvp with your own rule.")


@register
@dataclass(frozen=True)
class Hessenberg(Primitive):
    """``[H | Q]`` with A = Q H Q^H, H upper Hessenberg, of the operand's dtype."""

    uses_blas = True

    batch = same_op_batched

    def abstract_eval(self, x):
        m = _inexact_matrix(self.name, x)
        return aval(x.shape[:-1] + (2 * m,), x.dtype)

    def linearize(self, b, primal_in, primal_out, t):
        if t[0] is None:
            return [None]
        raise NotImplementedError(HESSENBERG_DERIVATIVE_MESSAGE)

    def lower(self, lo, out, x):
        def fn(a):
            import jax.numpy as jnp  # noqa: PLC0415  (optional dependency)
            import jax.scipy.linalg as jsl  # noqa: PLC0415  (optional dependency)

            h, q = jsl.hessenberg(a, calc_q=True)
            return jnp.concatenate([h, q], axis=-1)

        return _splice(lo, out, x, "hessenberg", fn)

    def impl(self, x):
        import scipy.linalg as sl  # noqa: PLC0415  (optional dependency)

        x = np.asarray(x)
        m = x.shape[-1]
        outs = [np.concatenate(sl.hessenberg(a, calc_q=True), axis=-1)
                for a in x.reshape((-1, m, m))]
        return np.asarray(outs, x.dtype).reshape(x.shape[:-1] + (2 * m,))
