"""Linear-algebra derivatives at degenerate and special input (issue #28) against jax in x64.

Each row of TABLE is a scalar function of a matrix that is invariant to the degeneracy (sum of
eigenvalues, trace of pinv, a norm, ...), written once for both libraries (``lib`` is ``td`` or
``jnp``), the input, and what is expected of ``grad``:

- ``MATCH``: both finite and equal;
- ``NONFINITE``: jax's derivative is NaN/inf there (undefined); tidu's is not finite either;
- ``FD``: jax's derivative is NaN there though the function is differentiable (or, where the
  CPU's LAPACK rounds the repeated singular values apart, finite and wrong); tidu's equals
  central finite differences;
- a string: the row is not compared, for the reason written there.
"""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

MATCH, NONFINITE, FD = "match", "nonfinite-both", "finite-differences"

I3 = np.eye(3)
REP = np.diag([2.0, 2.0, 5.0])                        # a repeated eigenvalue / singular value
Q = np.linalg.qr(np.arange(9.0).reshape(3, 3) + np.eye(3) * 3)[0]
REP_ROT = Q @ REP @ Q.T                               # the same, not diagonal
ZERO = np.zeros((3, 3))
RANKDEF = np.outer([1.0, 2.0, 3.0], [1.0, -1.0, 2.0])  # rank 1
RANK2 = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])  # rank 2
TALL = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])  # equal singular values, 3 x 2
SPD_REP = 2.0 * np.eye(3)
B = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.25]])


def _gauge(lib, v, w):
    """A gauge-invariant function of eigenvectors: sum of v diag(w) v^H (= the input)."""
    return lib.sum((v * w[None, :]) @ v.T)


def _proj(lib, v):
    return v @ v.T


TABLE = [
    # name, f(lib, x), input, expectation
    ("eigh w sum, identity (#28)", lambda lib, x: lib.sum(lib.linalg.eigh(x)[0]), I3, MATCH),
    ("eigh w sum, repeated", lambda lib, x: lib.sum(lib.linalg.eigh(x)[0]), REP_ROT, MATCH),
    ("eigh w sum of squares, repeated",
     lambda lib, x: lib.sum(lib.linalg.eigh(x)[0] ** 2), REP_ROT, MATCH),
    ("eigh w sum, zero", lambda lib, x: lib.sum(lib.linalg.eigh(x)[0]), ZERO, MATCH),
    ("eigh w max, distinct part of repeated",
     lambda lib, x: lib.linalg.eigh(x)[0][2], REP_ROT, MATCH),
    ("eigh v diag(w) v^H, repeated",
     lambda lib, x: _gauge(lib, lib.linalg.eigh(x)[1], lib.linalg.eigh(x)[0]), REP_ROT,
     "jax NaN (eigenvector derivative undefined at equal eigenvalues); tidu finite: the gap "
     "term is masked (0), as jax's SVD rule does"),
    # functions of an (exactly) degenerate eigenspace as a whole (its projector) are
    # differentiable; jax gives NaN
    ("eigh projector of the repeated pair",
     lambda lib, x: lib.sum(_proj(lib, lib.linalg.eigh((x + x.T) / 2)[1][:, :2]) * RANK2),
     REP, FD),
    ("svd projector of the repeated pair",
     lambda lib, x: lib.sum(_proj(lib, lib.linalg.svd(x)[0][:, 1:]) * RANK2), REP, FD),
    ("eigh v diag(w) v^H, distinct",
     lambda lib, x: _gauge(lib, lib.linalg.eigh(x)[1], lib.linalg.eigh(x)[0]),
     np.diag([1.0, 2.0, 5.0]) + 0.1, MATCH),
    ("eigvalsh sum, identity", lambda lib, x: lib.sum(lib.linalg.eigvalsh(x)), I3, MATCH),
    ("eigvalsh sum of squares, repeated",
     lambda lib, x: lib.sum(lib.linalg.eigvalsh(x) ** 2), REP_ROT, MATCH),
    ("svd s sum, identity", lambda lib, x: lib.sum(lib.linalg.svd(x)[1]), I3, MATCH),
    ("svd s sum, repeated", lambda lib, x: lib.sum(lib.linalg.svd(x)[1]), REP_ROT, MATCH),
    ("svd s sum of squares, rank 1",
     lambda lib, x: lib.sum(lib.linalg.svd(x)[1] ** 2), RANKDEF, MATCH),
    ("svd u s vh, repeated",
     lambda lib, x: lib.sum(lib.linalg.svd(x)[0] * lib.linalg.svd(x)[1][None, :]
                            @ lib.linalg.svd(x)[2]), REP_ROT,
     "jax NaN/inf (U, V derivatives undefined at equal singular values); tidu finite but "
     "not the derivative (gap term masked to 0; the function is the identity, grad all ones)"),
    ("svd u s vh, tall equal s",
     lambda lib, x: lib.sum((lib.linalg.svd(x, full_matrices=False)[0]
                             * lib.linalg.svd(x, full_matrices=False)[1][None, :])
                            @ lib.linalg.svd(x, full_matrices=False)[2]), TALL,
     "jax NaN/inf (U, V derivatives undefined at equal singular values); tidu finite but "
     "not the derivative (gap term masked to 0; the function is the identity, grad all ones)"),
    ("svdvals sum of squares, identity",
     lambda lib, x: lib.sum(lib.linalg.svdvals(x) ** 2), I3, MATCH),
    ("svdvals sum of squares, zero",
     lambda lib, x: lib.sum(lib.linalg.svdvals(x) ** 2), ZERO, MATCH),
    ("svdvals sum, zero", lambda lib, x: lib.sum(lib.linalg.svdvals(x)), ZERO,
     "|s| is not differentiable at s = 0: jax gives U V^H of its arbitrary SVD, tidu another"),
    ("pinv trace, identity (#28)", lambda lib, x: lib.trace(lib.linalg.pinv(x)), I3, MATCH),
    ("pinv weighted, identity", lambda lib, x: lib.sum(lib.linalg.pinv(x) * RANK2), I3, MATCH),
    ("pinv trace, repeated", lambda lib, x: lib.trace(lib.linalg.pinv(x)), REP_ROT, MATCH),
    ("pinv trace, rank 1", lambda lib, x: lib.trace(lib.linalg.pinv(x)), RANKDEF, MATCH),
    ("pinv weighted, rank 2", lambda lib, x: lib.sum(lib.linalg.pinv(x) * B[:, :1]), RANK2,
     MATCH),
    ("pinv trace, tall equal s", lambda lib, x: lib.trace(lib.linalg.pinv(x)[:, :2]), TALL,
     MATCH),
    ("pinv trace, zero", lambda lib, x: lib.trace(lib.linalg.pinv(x)), ZERO, MATCH),
    ("inv trace, identity", lambda lib, x: lib.trace(lib.linalg.inv(x)), I3, MATCH),
    ("inv trace, repeated", lambda lib, x: lib.trace(lib.linalg.inv(x)), REP_ROT, MATCH),
    ("inv trace, rank 2", lambda lib, x: lib.trace(lib.linalg.inv(x)), RANK2, NONFINITE),
    ("det, identity", lambda lib, x: lib.linalg.det(x), I3, MATCH),
    ("det, repeated", lambda lib, x: lib.linalg.det(x), REP_ROT, MATCH),
    ("det, rank 2", lambda lib, x: lib.linalg.det(x), RANK2,
     "jax: the cofactor matrix (finite); tidu: NaN, det is sign * exp(logabsdet) "
     "(documented in docs/linalg.md; needs a product reduction)"),
    ("slogdet, identity", lambda lib, x: lib.linalg.slogdet(x)[1], I3, MATCH),
    ("slogdet, repeated", lambda lib, x: lib.linalg.slogdet(x)[1], REP_ROT, MATCH),
    ("slogdet, rank 2", lambda lib, x: lib.linalg.slogdet(x)[1], RANK2, NONFINITE),
    ("solve, identity", lambda lib, x: lib.sum(lib.linalg.solve(x, B)), I3, MATCH),
    ("solve, repeated", lambda lib, x: lib.sum(lib.linalg.solve(x, B)), REP_ROT, MATCH),
    ("solve, rank 2", lambda lib, x: lib.sum(lib.linalg.solve(x, B)), RANK2, NONFINITE),
    ("cholesky trace, identity", lambda lib, x: lib.trace(lib.linalg.cholesky(x)), I3, MATCH),
    ("cholesky sum, 2 I", lambda lib, x: lib.sum(lib.linalg.cholesky(x)), SPD_REP, MATCH),
    ("cholesky sum, zero", lambda lib, x: lib.sum(lib.linalg.cholesky(x)), ZERO, NONFINITE),
    ("qr r diagonal, identity",
     lambda lib, x: lib.sum(lib.abs(lib.diagonal(lib.linalg.qr(x)[1]))), I3, MATCH),
    ("qr q r, identity", lambda lib, x: lib.sum(lib.linalg.qr(x)[0] @ lib.linalg.qr(x)[1]), I3,
     MATCH),
    ("qr q r, tall equal s",
     lambda lib, x: lib.sum(lib.linalg.qr(x)[0] @ lib.linalg.qr(x)[1]), TALL, MATCH),
    ("qr q r, rank 2", lambda lib, x: lib.sum(lib.linalg.qr(x)[0] @ lib.linalg.qr(x)[1]), RANK2,
     MATCH),
    ("lstsq x, distinct", lambda lib, x: lib.sum(lib.linalg.lstsq(x, B)[0]),
     np.diag([1.0, 2.0, 4.0]) + 0.1, MATCH),
    # lstsq differentiates as pinv(a) b (pinv's derivative): jax goes through its SVD
    ("lstsq x, identity (#28)", lambda lib, x: lib.sum(lib.linalg.lstsq(x, B)[0]), I3, FD),
    ("lstsq x, repeated", lambda lib, x: lib.sum(lib.linalg.lstsq(x, B)[0]), REP_ROT, FD),
    ("lstsq x, tall equal s", lambda lib, x: lib.sum(lib.linalg.lstsq(x, B)[0]), TALL, FD),
    ("lstsq resid, tall equal s", lambda lib, x: lib.linalg.lstsq(x, B)[1].sum(), TALL, FD),
    ("lstsq x, rank 1", lambda lib, x: lib.sum(lib.linalg.lstsq(x, B)[0]), RANKDEF,
     "jax's lstsq differentiates through its SVD (no pinv JVP) and gives a different finite "
     "value; rank-deficient least squares derivatives are basis dependent"),
    ("norm 2, identity", lambda lib, x: lib.linalg.norm(x, 2), I3,
     "top singular value repeated: not differentiable; jax and tidu pick different "
     "subgradients"),
    ("norm 2, repeated (distinct top)", lambda lib, x: lib.linalg.norm(x, 2), REP_ROT, MATCH),
    ("norm 2, rank 1", lambda lib, x: lib.linalg.norm(x, 2), RANKDEF, MATCH),
    ("norm nuc, identity", lambda lib, x: lib.linalg.norm(x, "nuc"), I3, MATCH),
    ("norm nuc, repeated", lambda lib, x: lib.linalg.norm(x, "nuc"), REP_ROT, MATCH),
    ("norm nuc, rank 2", lambda lib, x: lib.linalg.norm(x, "nuc"), RANK2,
     "|s| is not differentiable at s = 0: jax and tidu pick different subgradients"),
    ("matrix_power 3, identity", lambda lib, x: lib.sum(lib.linalg.matrix_power(x, 3)), I3,
     MATCH),
    ("matrix_power 3, zero", lambda lib, x: lib.sum(lib.linalg.matrix_power(x, 3)), ZERO, MATCH),
    ("matrix_power -2, identity", lambda lib, x: lib.sum(lib.linalg.matrix_power(x, -2)), I3,
     MATCH),
    ("matrix_power -1, rank 2", lambda lib, x: lib.sum(lib.linalg.matrix_power(x, -1)), RANK2,
     NONFINITE),
]


def _central_fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


@pytest.mark.parametrize("name,f,x,expect", TABLE, ids=[r[0] for r in TABLE])
def test_degenerate_grad_against_jax(name, f, x, expect):
    want = np.asarray(jax.grad(lambda a: f(jnp, a))(jnp.asarray(x)))
    got = np.asarray(td.grad(lambda a: f(td, a))(x))
    if expect == MATCH:
        assert np.all(np.isfinite(want)), f"{name}: jax is not finite; the row is wrong"
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, err_msg=name)
    elif expect == FD:
        fd = _central_fd(lambda a: f(np, a), x)
        # jax fails here: NaN where LAPACK returns the repeated values equal, a wrong finite
        # value where it rounds them apart (which happens depends on the CPU's kernels)
        assert not np.allclose(want, fd, rtol=1e-3, atol=1e-3), f"{name}: jax is right; the row is wrong"
        np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6, err_msg=name)
    elif expect == NONFINITE:
        assert not np.all(np.isfinite(want)), f"{name}: jax is finite; the row is wrong"
        assert not np.all(np.isfinite(got)), name
    else:  # a reason not to compare: still no crash and the right shape
        assert got.shape == want.shape, name


# ---- the reproducers of issue #28, and pinv's higher derivatives ----

def test_issue28_eigh_degenerate_eigenvalue_grad():
    # td.grad(lambda x: td.sum(td.linalg.eigh(x)[0]))(np.eye(3)) was all NaN [identity]
    got = td.grad(lambda x: td.sum(td.linalg.eigh(x)[0]))(np.eye(3))
    want = jax.grad(lambda x: jnp.sum(jnp.linalg.eigh(x)[0]))(jnp.eye(3))
    np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(got, np.eye(3), atol=1e-12)
    # the transposed program (jacrev) and the JVP: no 0 * inf from the unused eigenvectors
    jr = td.jacrev(lambda x: td.linalg.eigh(x)[0])(np.eye(3))
    np.testing.assert_allclose(jr, jax.jacrev(lambda x: jnp.linalg.eigh(x)[0])(jnp.eye(3)),
                               atol=1e-12)
    t = np.arange(9.0).reshape(3, 3)
    _, dw = td.jvp(lambda x: td.linalg.eigh(x)[0], (np.eye(3),), (t,))
    _, jdw = jax.jvp(lambda x: jnp.linalg.eigh(x)[0], (jnp.eye(3),), (jnp.asarray(t),))
    np.testing.assert_allclose(dw, jdw, atol=1e-12)
    _, (_, dv) = td.jvp(td.linalg.eigh, (np.eye(3),), (t,))
    assert np.all(np.isfinite(dv))


def test_issue28_pinv_repeated_singular_values():
    # td.jacrev(td.linalg.pinv)(np.eye(2))[0, 1] was [[0, 0], [0, 0]] [[[0, -1], [0, 0]]]
    got = td.jacrev(td.linalg.pinv)(np.eye(2))
    want = jax.jacrev(jnp.linalg.pinv)(jnp.eye(2))
    np.testing.assert_allclose(got[0, 1], [[0.0, -1.0], [0.0, 0.0]], atol=1e-12)
    np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(td.jacfwd(td.linalg.pinv)(np.eye(2)),
                               jax.jacfwd(jnp.linalg.pinv)(jnp.eye(2)), atol=1e-12)


PINV_POINTS = [("identity", I3), ("repeated", REP_ROT), ("rank 1", RANKDEF), ("rank 2", RANK2),
               ("tall", np.arange(12.0).reshape(4, 3) ** 0.5),
               ("wide", np.arange(12.0).reshape(3, 4) ** 0.5), ("tall equal s", TALL)]


@pytest.mark.parametrize("x", [p[1] for p in PINV_POINTS], ids=[p[0] for p in PINV_POINTS])
def test_pinv_higher_derivatives_against_jax(x):
    rng = np.random.default_rng(7)
    w = rng.standard_normal(x.shape[::-1])
    d = rng.standard_normal(x.shape)

    def f(lib, a):
        return lib.sum(lib.linalg.pinv(a) * w)

    np.testing.assert_allclose(td.jit(td.linalg.pinv)(x), np.linalg.pinv(x), atol=1e-12)
    # directional derivatives of orders 1-3 along d: jax's (pinv's custom JVP, differentiated
    # again at every order)
    g, jg = td.grad, jax.grad
    for k in range(1, 4):
        tf = (lambda t: f(td, x + t * d))
        jf = (lambda t: f(jnp, x + t * d))
        for _ in range(k):
            tf, jf = g(tf), jg(jf)
        np.testing.assert_allclose(tf(0.0), jax_value(jf, 0.0), rtol=1e-8, atol=1e-8,
                                   err_msg=f"order {k}")
    # the Hessian is jax's, also where a is rank-deficient and jax's is not symmetric (the
    # Golub-Pereyra JVP is not the derivative of a function there; both differentiate it)
    n = x.size
    jh = np.asarray(jax_value(jax.hessian(lambda a: f(jnp, a)), jnp.asarray(x))).reshape(n, n)
    th = np.asarray(td.hessian(lambda a: f(td, a))(x)).reshape(n, n)
    np.testing.assert_allclose(th, jh, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("x", [np.arange(12.0).reshape(4, 3) ** 0.5, np.diag([1.0, 2.0, 4.0]) + 0.1],
                         ids=["tall", "square"])
def test_lstsq_higher_derivatives_against_jax(x):
    # lstsq is pinv(a) b with pinv's derivative: orders 1-3 in a and b equal jax's where
    # jax's (through the SVD) is defined
    rng = np.random.default_rng(3)
    b = rng.standard_normal((x.shape[0], 2))
    d, db = rng.standard_normal(x.shape), rng.standard_normal(b.shape)

    def f(lib, t):
        return lib.sum(lib.linalg.lstsq(x + t * d, b + t * db)[0] ** 2)

    tf, jf = (lambda t: f(td, t)), (lambda t: f(jnp, t))
    for k in range(1, 4):
        tf, jf = td.grad(tf), jax.grad(jf)
        np.testing.assert_allclose(tf(0.0), jax_value(jf, 0.0), rtol=1e-8, atol=1e-8,
                                   err_msg=f"order {k}")
