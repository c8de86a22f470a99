"""Derivative checks: forward mode, reverse mode and finite differences compared, to any order
(after autograd's ``check_grads``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import tidu as td
from tidu.graph.dtypes import kind_of

__all__ = ["check_grads", "numerical_jvp", "gp_nll"]


def _tols(dtype, atol, rtol):
    single = np.dtype(dtype) in (np.dtype("float32"), np.dtype("complex64"))
    return (atol if atol is not None else (1e-2 if single else 1e-6),
            rtol if rtol is not None else (1e-2 if single else 1e-6))


def _inner(u, v) -> float:
    """The real inner product <u, v> = Re(sum(conj(u) * v)) of DESIGN §5."""
    return float(np.real(np.sum(np.conj(np.asarray(u)) * np.asarray(v))))


def numerical_jvp(f: Callable, args: Sequence, tangents: Sequence, eps: float) -> np.ndarray:
    """Central difference (f(x + eps t) - f(x - eps t)) / (2 eps), f returning one array."""
    plus = [np.asarray(a) + eps * np.asarray(t) for a, t in zip(args, tangents)]
    minus = [np.asarray(a) - eps * np.asarray(t) for a, t in zip(args, tangents)]
    return (np.asarray(f(*plus)) - np.asarray(f(*minus))) / (2 * eps)


def _random_like(rng, x):
    x = np.asarray(x)
    t = rng.standard_normal(x.shape)
    if kind_of(x.dtype) == "c":
        t = t + 1j * rng.standard_normal(x.shape)
    return t.astype(x.dtype)


def check_grads(f: Callable, args: Sequence, order: int = 2, modes=("fwd", "rev"),
                atol: float | None = None, rtol: float | None = None, eps: float | None = None,
                seed: int = 0) -> None:
    """Check f's derivatives at args up to `order`.

    Args:
        f: a function of arrays built from tidu operations, returning one array.
        args: the point (float or complex arrays).
        order: highest derivative order checked; order k checks the directional derivative of
            order k-1 recursively, as autograd does.
        modes: "fwd" compares ``tidu.jvp`` with central differences; "rev" checks ``tidu.vjp``
            against the JVP through the adjoint identity <ct, J t> = <J^T ct, t>.
        atol, rtol, eps: tolerances and step (defaults by dtype).

    Raises:
        AssertionError: a derivative disagrees, with the mode and order in the message.
    """
    args = [np.asarray(a) for a in args]
    dtype = args[0].dtype
    atol, rtol = _tols(dtype, atol, rtol)
    eps = eps if eps is not None else (1e-3 if dtype.itemsize <= 8 and kind_of(dtype) == "f"
                                       and dtype.itemsize == 4 else 1e-6)
    rng = np.random.default_rng(seed)
    run = td.jit(f)
    tangents = [_random_like(rng, a) for a in args]
    if "fwd" in modes:
        _, jvp_out = td.jvp(f, args, tangents)
        numeric = numerical_jvp(run, args, tangents, eps)
        np.testing.assert_allclose(jvp_out, numeric, atol=atol, rtol=rtol,
                                   err_msg=f"forward mode vs finite differences (order {order})")
    if "rev" in modes:
        out, back = td.vjp(f, *args)
        _, jvp_out = td.jvp(f, args, tangents)
        ct = _random_like(rng, out)
        cts = back(ct)
        lhs = _inner(ct, jvp_out)
        rhs = sum(_inner(c, t) for c, t in zip(cts, tangents))
        np.testing.assert_allclose(
            lhs,
            rhs,
            atol=atol * max(1.0, abs(lhs)),
            rtol=rtol,
            err_msg=f"reverse mode: <ct, J t> != <J^T ct, t> (order {order})",
        )
    if order > 1:
        v = [_random_like(rng, a) for a in args]

        def directional(*xs):
            return td.jvp(f, xs, v)[1]

        check_grads(directional, args, order - 1, modes, atol, rtol, eps, seed + 1)


def gp_nll(ns, sl, diag, x, y):
    """The negative log marginal likelihood of an RBF Gaussian process in log hyperparameters
    (theta = log lengthscale, log variance, log noise), written once for any numpy-like
    namespace: ``gp_nll(td, td.linalg, td.linalg.diagonal, x, y)`` or ``gp_nll(jnp, jsl,
    jnp.diagonal, x, y)`` (the tests and bench/linalg.py compare the two)."""
    n = x.shape[0]

    def nll(theta):
        ell, var, noise = ns.exp(theta[0]), ns.exp(theta[1]), ns.exp(theta[2])
        d = x[:, None] - x[None, :]
        k = var * ns.exp(-0.5 * d * d / (ell * ell)) + noise * np.eye(n)
        low = ns.linalg.cholesky(k)
        alpha = sl.solve_triangular(low, y, lower=True)
        return 0.5 * ns.sum(alpha * alpha) + ns.sum(ns.log(diag(low))) + 0.5 * n * np.log(2 * np.pi)

    return nll
