"""General (non-Hermitian) eigen-decomposition: ``td.linalg.eig``/``eigvals`` as
``jax.numpy.linalg``'s, and ``eig_lax``, ``jax.lax.linalg.eig``'s signature (``td.lax.linalg.eig``),
all on the ``Eig`` primitive (``tidu.ops.eig``; LAPACK ``?geev``).  Results are complex (complex64
for float32/complex64 input, complex128 otherwise); eigenvectors are the columns, each of unit
2-norm with its largest-magnitude component real, in LAPACK's order, as jax's.  See
docs/linalg.md for the derivatives and jax's restrictions on them."""

from __future__ import annotations

from tidu import ops as P
from tidu.numpy.linalg.core import _arrays, _square
from tidu.numpy.linalg.results import EigResult
from tidu.trace.build import apply

__all__ = ["eig", "eigvals", "eig_lax"]


def eig_lax(x, *, compute_left_eigenvectors: bool = True,
            compute_right_eigenvectors: bool = True, enable_eigvec_derivs: bool = False,
            implementation=None, use_magma=None):
    """``jax.lax.linalg.eig``: ``[w, vl, vr]`` (vl/vr where asked for) of a (..., n, n).  vl's
    columns satisfy ``vl^H a = w vl^H``.  Derivatives of the eigenvectors only with
    ``enable_eigvec_derivs=True`` (jax's opt-in); `implementation` and `use_magma` (GPU choices
    in jax) may only be None or LAPACK's."""
    del use_magma
    if implementation is not None and str(getattr(implementation, "name", implementation)
                                          ).lower() not in ("lapack", "eigimplementation.lapack"):
        raise ValueError(f"eig: implementation {implementation!r} is not supported; tidu runs "
                         f"LAPACK's geev (implementation=None)")
    (x,) = _arrays("eig", x)
    n = _square("eig", x)
    left, right = bool(compute_left_eigenvectors), bool(compute_right_eigenvectors)
    out = apply(P.Eig(left, right, bool(enable_eigvec_derivs)), x)
    if not (left or right):
        return [out]
    nv = int(left) + int(right)
    w = out[..., nv * n]
    vecs = [out[..., k * n:(k + 1) * n] for k in range(nv)]
    return [w, *vecs]


def eig(a) -> EigResult:
    """``(eigenvalues, eigenvectors)`` of a general square a (..., M, M), as
    ``jax.numpy.linalg.eig``: complex results, v[..., :, i] the eigenvector of w[..., i].  Like
    jax's, it has no derivative (NotImplementedError; jax.lax.linalg.eig's opt-in is
    ``td.lax.linalg.eig(..., enable_eigvec_derivs=True)``); ``eigvals`` has one."""
    w, v = eig_lax(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a):
    """The eigenvalues (complex, LAPACK's order) of a general square a, as
    ``jax.numpy.linalg.eigvals``; differentiable (jax's rule: diag(V^-1 da V))."""
    return eig_lax(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0]
