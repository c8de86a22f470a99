"""td.scipy.stats.gaussian_kde against jax.scipy.stats.gaussian_kde in x64: evaluate/pdf/logpdf,
integrate_gaussian, integrate_box_1d, integrate_kde for Scott's, Silverman's, scalar and callable
bandwidths and weights; resample on the same key; gradients through the estimator; the estimator
as a pytree through td.jit; jax's errors."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.scipy.stats import gaussian_kde as JKDE  # noqa: E402

jax.config.update("jax_enable_x64", True)
KDE = td.scipy.stats.gaussian_kde
rng = np.random.default_rng(0)
DATA = rng.normal(size=(2, 30))
W = rng.uniform(size=30)
PTS = rng.normal(size=(2, 7))
BWS = [{}, {"bw_method": "silverman"}, {"bw_method": 0.4, "weights": W},
       {"bw_method": lambda k: 0.3 * k.neff ** (-1.0 / 6)}, {"weights": W}]


def close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


@pytest.mark.parametrize("kw", BWS)
def test_methods_match_jax(kw):
    k, j = KDE(DATA, **kw), JKDE(DATA, **kw)
    close(k.covariance, j.covariance)
    close(k.neff, j.neff)
    close(k.evaluate(PTS), j.evaluate(PTS))
    close(k(PTS), j(PTS))
    close(k.pdf(PTS), j.pdf(PTS))
    close(k.logpdf(PTS), j.logpdf(PTS))
    close(k.integrate_gaussian(np.zeros(2), np.eye(2)),
          j.integrate_gaussian(jnp.zeros(2), jnp.eye(2)))
    other = DATA[:, :10] + 0.5
    close(k.integrate_kde(KDE(other)), j.integrate_kde(JKDE(other)))
    close(KDE(other).integrate_kde(k), JKDE(other).integrate_kde(j))
    close(k.evaluate(PTS[:, 0]), j.evaluate(PTS[:, 0]))  # one point of d values


def test_one_dimensional_and_box_integral():
    x = DATA[0]
    k, j = KDE(x), JKDE(x)
    grid = np.linspace(-3, 3, 11)
    close(k.pdf(grid), j.pdf(grid))
    close(k.logpdf(0.3), j.logpdf(0.3))
    close(k.integrate_box_1d(-0.5, 1.0), j.integrate_box_1d(-0.5, 1.0))
    close(k.integrate_gaussian(0.2, 0.5), j.integrate_gaussian(0.2, 0.5))
    assert KDE(x.astype(np.float32)).pdf(grid.astype(np.float32)).dtype == np.float32


def test_resample_matches_jax_on_the_same_key():
    for kw in BWS[:3]:
        k, j = KDE(DATA, **kw), JKDE(DATA, **kw)
        for shape in [(), (5,)]:  # jax's fails to add for a shape of two axes or more
            got = k.resample(td.random.PRNGKey(3), shape)
            want = j.resample(jax.random.PRNGKey(3), shape)
            assert got.shape == (2,) + shape
            close(got, want, 1e-12)


def test_gradients_through_the_estimator_match_jax():
    def f(ns, kde):
        return lambda d, x: ns.sum(kde(d, weights=W).logpdf(x)) + ns.sum(kde(d).pdf(x))

    got = td.grad(f(td, KDE), argnums=(0, 1))(DATA, PTS)
    want = jax.grad(f(jnp, JKDE), argnums=(0, 1))(DATA, PTS)
    for g, w in zip(got, want):
        close(g, w, 1e-10)


def test_the_estimator_is_a_pytree():
    k, j = KDE(DATA), JKDE(DATA)
    close(td.jit(lambda kde, x: kde.logpdf(x))(k, PTS), j.logpdf(PTS))
    leaves = td.tree_util.tree_leaves(k)
    assert len(leaves) == 5
    k2 = td.tree_util.tree_map(lambda a: a, k)
    close(k2.evaluate(PTS), j.evaluate(PTS))


def test_errors_as_jax():
    with pytest.raises(ValueError, match="multiple elements"):
        KDE(np.ones(1))
    with pytest.raises(NotImplementedError, match="complex data"):
        KDE(np.ones(3, np.complex128))
    with pytest.raises(ValueError, match="length n"):
        KDE(DATA, weights=np.ones(3))
    with pytest.raises(ValueError, match="bw_method"):
        KDE(DATA, bw_method="nope")
    k = KDE(DATA)
    with pytest.raises(ValueError, match="points have dimension 3"):
        k.evaluate(np.ones((3, 2)))
    with pytest.raises(ValueError, match="only handles 1D"):
        k.integrate_box_1d(0.0, 1.0)
    with pytest.raises(ValueError, match="mean does not have dimension 2"):
        k.integrate_gaussian(np.zeros(3), np.eye(2))
    with pytest.raises(NotImplementedError, match="integrate_box_1d"):
        k.integrate_box(0, 1)
    with pytest.raises(NotImplementedError, match="bandwidth"):
        k.set_bandwidth()
