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
HESSENBERG_DERIVATIVE_MESSAGE = (
    "Hessenberg: the Hessenberg reduction has no derivative rule (jax defines none either). "
    "Wrap the computation in td.custom_jvp with your own rule.")


class _TwoFactors(Primitive):
    """A square matrix's two factors side by side, (..., m, m) -> (..., m, 2m) of the operand's
    dtype, without a derivative (module doc).  A subclass names the message its derivative
    raises, jax's function for the XLA lowering and scipy's for one matrix."""

    uses_blas = True
    derivative_message = ""
    splice_name = ""

    batch = same_op_batched  # leading axes are batch axes

    def abstract_eval(self, x):
        m = _inexact_matrix(self.name, x)
        return aval(x.shape[:-1] + (2 * m,), x.dtype)

    def linearize(self, b, primal_in, primal_out, t):
        if t[0] is None:
            return [None]
        raise NotImplementedError(self.derivative_message)

    def lower(self, lo, out, x):
        def fn(a):
            import jax.numpy as jnp  # noqa: PLC0415  (optional dependency)

            return jnp.concatenate(self.jax_factors(a), axis=-1)

        return _splice(lo, out, x, self.splice_name, fn)

    def impl(self, x):
        x = np.asarray(x)
        m = x.shape[-1]
        outs = [np.concatenate(self.scipy_factors(a), axis=-1) for a in x.reshape((-1, m, m))]
        return np.asarray(outs, x.dtype).reshape(x.shape[:-1] + (2 * m,))


@register
@dataclass(frozen=True)
class Schur(_TwoFactors):
    """``[T | Z]`` with A = Z T Z^H, of the operand's dtype (module doc)."""

    derivative_message = SCHUR_DERIVATIVE_MESSAGE
    splice_name = "schur"

    @staticmethod
    def jax_factors(a):
        import jax  # noqa: PLC0415  (optional dependency)

        return jax.lax.linalg.schur(a)

    @staticmethod
    def scipy_factors(a):
        import scipy.linalg as sl  # noqa: PLC0415  (optional dependency)

        if not np.all(np.isfinite(a)):
            return np.full(a.shape, np.nan, a.dtype), np.full(a.shape, np.nan, a.dtype)
        return sl.schur(a, output="complex" if np.iscomplexobj(a) else "real")


@register
@dataclass(frozen=True)
class Hessenberg(_TwoFactors):
    """``[H | Q]`` with A = Q H Q^H, H upper Hessenberg, of the operand's dtype."""

    derivative_message = HESSENBERG_DERIVATIVE_MESSAGE
    splice_name = "hessenberg"

    @staticmethod
    def jax_factors(a):
        import jax.scipy.linalg as jsl  # noqa: PLC0415  (optional dependency)

        return jsl.hessenberg(a, calc_q=True)

    @staticmethod
    def scipy_factors(a):
        import scipy.linalg as sl  # noqa: PLC0415  (optional dependency)

        return sl.hessenberg(a, calc_q=True)
