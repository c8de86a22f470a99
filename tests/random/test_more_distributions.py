"""td.random's transforms of the basic draws (tidu/random/more.py) against jax.random in x64:
the same key gives jax's numbers (identical where the arithmetic is exact or the float32
kernels are XLA's; within a few ulps of the output dtype where float64 log/exp/sqrt or the gamma
family's float32 rejection loop round differently, as the other distributions:
tests/random/test_random.py), the same shapes and dtypes; inside jit, vmap and scan the draws
equal the eager ones; a statistical check per distribution; clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

F32 = np.float32

# name -> (draw(random module, key), ulps allowed in the output dtype: 0 means identical)
CASES = {
    "rademacher": (lambda R, k: R.rademacher(k, (50,)), 0),
    "rademacher_f32": (lambda R, k: R.rademacher(k, (3, 4), F32), 0),
    "maxwell": (lambda R, k: R.maxwell(k, (40,)), 4),
    "maxwell_f32": (lambda R, k: R.maxwell(k, (2, 20), F32), 2),
    "double_sided_maxwell": (lambda R, k: R.double_sided_maxwell(k, 1.0, 2.0, (30,)), 4),
    "double_sided_maxwell_params": (lambda R, k: R.double_sided_maxwell(
        k, np.array([0.0, 1.0]), np.array([[1.0], [3.0]]), (5,)), 4),
    "weibull_min": (lambda R, k: R.weibull_min(k, 2.0, 1.5, (40,)), 16),
    "weibull_min_f32": (lambda R, k: R.weibull_min(k, 2.0, 1.5, (40,), F32), 0),
    "rayleigh": (lambda R, k: R.rayleigh(k, np.array([1.0, 2.0, 3.0]), (4, 3)), 4),
    "rayleigh_f32": (lambda R, k: R.rayleigh(k, 2.0, (40,), F32), 0),
    "pareto": (lambda R, k: R.pareto(k, np.array([1.0, 2.5]), (10, 2)), 8),
    "wald": (lambda R, k: R.wald(k, np.array([0.5, 2.0, 7.0]), (5, 3)), 256),
    "wald_f32": (lambda R, k: R.wald(k, 1.0, (40,), F32), 0),
    "lognormal": (lambda R, k: R.lognormal(k, 0.5, (40,)), 4),
    "lognormal_default": (lambda R, k: R.lognormal(k, shape=(10,)), 4),
    "geometric": (lambda R, k: R.geometric(k, np.array([0.1, 0.5, 0.9]), (6, 3)), 0),
    "geometric_int32": (lambda R, k: R.geometric(k, F32(0.3), (40,), np.int32), 0),
    "triangular": (lambda R, k: R.triangular(k, 0.0, np.array([0.2, 0.5]), 1.0, (7, 2)), 0),
    "f": (lambda R, k: R.f(k, 3.0, 2.5, (6, 2)), 8),
    "f_f32": (lambda R, k: R.f(k, 3.0, 5.0, (40,), F32), 16),
    "generalized_normal": (lambda R, k: R.generalized_normal(k, 1.5, (40,)), 0),
    "generalized_normal_f32": (lambda R, k: R.generalized_normal(k, 3.0, (40,), F32), 0),
    "ball": (lambda R, k: R.ball(k, 3, 2, (10,)), 8),
    "ball_p1_f32": (lambda R, k: R.ball(k, 4, 1.0, (5,), F32), 4),
    "clone": (lambda R, k: R.uniform(R.clone(k), (3,)), 0),
    "binomial": (lambda R, k: R.binomial(k, 10.0, 0.3, (50,)), 0),
    "binomial_btrs": (lambda R, k: R.binomial(k, np.array([5.0, 50.0, 500.0, 1e4]),
                                              np.array([0.1, 0.5, 0.7, 0.99]), (6, 4)), 0),
    "binomial_f32": (lambda R, k: R.binomial(k, 30, 0.4, (20,), F32), 0),
    "multinomial": (lambda R, k: R.multinomial(k, 100.0, np.array([0.2, 0.5, 0.3])), 0),
    "multinomial_batch": (lambda R, k: R.multinomial(
        k, np.array([10.0, 1000.0]), np.array([[0.1, 0.0, 0.9], [0.25, 0.25, 0.5]])), 0),
    "multinomial_f32": (lambda R, k: R.multinomial(k, 50.0, np.array([0.5, 0.5]), shape=(3, 2),
                                                   dtype=F32), 0),
    # a weak (Python) count with float32 probabilities: the binomials run in float32, as jax's
    "multinomial_p_f32": (lambda R, k: R.multinomial(k, 50.0, np.array([0.2, 0.5, 0.3], F32)),
                          0),
}


def _ulps(got, want):
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind in "iu":
        return int(np.max(np.abs(got.astype(np.int64) - want.astype(np.int64)), initial=0))
    tiny = np.finfo(got.dtype).tiny
    return float(np.max(np.abs(got - want) / np.spacing(np.maximum(np.abs(want), tiny)),
                        initial=0))


@pytest.mark.parametrize("name", sorted(CASES))
def test_draws_match_jax(name):
    draw, ulps = CASES[name]
    k, jk = td.random.PRNGKey(7), jax.random.PRNGKey(7)
    want = np.asarray(draw(jax.random, jk))
    got = draw(td.random, k)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype)
    assert _ulps(got, want) <= ulps, _ulps(got, want)
    # traced: the same numbers as the eager call (which runs its own cached jit)
    np.testing.assert_array_equal(td.jit(lambda k: draw(td.random, k))(k), got)


def test_binomial_edge_values_are_jaxs():
    """NaN for a negative or NaN count or a NaN p, inf for an infinite count; p = 0 and 1."""
    n = np.array([-1.0, np.nan, np.inf, 20.0, 7.0, 7.0])
    p = np.array([0.5, 0.5, 0.2, np.nan, 0.0, 1.0])
    got = td.random.binomial(td.random.PRNGKey(2), n, p)
    want = np.asarray(jax.random.binomial(jax.random.PRNGKey(2), n, p))
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[:2]).all() and got[2] == np.inf and got[4] == 0 and got[5] == 7


def test_under_vmap_and_scan_each_key_draws_its_own():
    keys = td.random.split(td.random.PRNGKey(3), 4)
    for draw in (lambda k: td.random.wald(k, 1.5, (6,)),
                 lambda k: td.random.geometric(k, 0.25, (6,)),
                 lambda k: td.random.binomial(k, 30.0, 0.5, (6,)),
                 lambda k: td.random.ball(k, 3, 1.5)):
        mapped = td.vmap(draw)(keys)
        for i in range(4):
            np.testing.assert_array_equal(mapped[i], draw(keys[i]))

        def body(c, k, draw=draw):
            return c, draw(k)

        _, scanned = td.jit(lambda ks: td.scan(body, 0.0, ks))(keys)
        np.testing.assert_array_equal(scanned, mapped)


def test_statistics():
    """Moments of 2e5 draws against the distributions' (4 standard errors or a few percent)."""
    k = td.random.PRNGKey(11)
    n = 200_000
    r = td.random.rademacher(k, (n,))
    assert set(np.unique(r).tolist()) == {-1, 1} and abs(r.mean()) < 0.02
    m = td.random.maxwell(k, (n,))
    assert abs(m.mean() - 2 * np.sqrt(2 / np.pi)) < 0.01
    w = td.random.weibull_min(k, 2.0, 1.5, (n,))
    assert abs(w.mean() - 2.0 * 0.9027452929509336) < 0.01  # scale * Gamma(1 + 1/1.5)
    ray = td.random.rayleigh(k, 2.0, (n,))
    assert abs(ray.mean() - 2.0 * np.sqrt(np.pi / 2)) < 0.01
    par = td.random.pareto(k, 4.0, (n,))
    assert abs(par.mean() - 4.0 / 3.0) < 0.01 and par.min() >= 1.0
    wl = td.random.wald(k, 1.5, (n,))
    assert abs(wl.mean() - 1.5) < 0.02 and abs(wl.var() - 1.5 ** 3) < 0.15
    ln = td.random.lognormal(k, 0.5, (n,))
    assert abs(ln.mean() - np.exp(0.125)) < 0.01
    g = td.random.geometric(k, 0.25, (n,))
    assert g.min() >= 1 and abs(g.mean() - 4.0) < 0.05
    tri = td.random.triangular(k, 0.0, 0.25, 1.0, (n,))
    assert 0.0 <= tri.min() and tri.max() <= 1.0 and abs(tri.mean() - 1.25 / 3) < 0.005
    fd = td.random.f(k, 5.0, 10.0, (n,))
    assert abs(fd.mean() - 10.0 / 8.0) < 0.02
    gn = td.random.generalized_normal(k, 2.0, (n,))  # p = 2: a normal of variance 1/2
    assert abs(gn.var() - 0.5) < 0.01
    bn = td.random.binomial(k, 40.0, 0.3, (n,))
    assert abs(bn.mean() - 12.0) < 0.05 and abs(bn.var() - 8.4) < 0.15
    mn = td.random.multinomial(k, 20.0, np.array([0.1, 0.6, 0.3]), shape=(n // 10, 3))
    assert np.all(mn.sum(-1) == 20) and np.allclose(mn.mean(0), [2.0, 12.0, 6.0], atol=0.1)
    b = td.random.ball(k, 3, 2.0, (n,))
    radius = np.linalg.norm(b, axis=-1)
    assert radius.max() <= 1.0 and abs(np.mean(radius ** 3) - 0.5) < 0.01  # uniform in volume


def test_bad_arguments_are_named():
    k = td.random.PRNGKey(0)
    with pytest.raises(ValueError, match="geometric` must be an int dtype"):
        td.random.geometric(k, 0.5, (3,), np.float32)
    with pytest.raises(TypeError, match="maxwell: dtype int32 is not float32 or float64"):
        td.random.maxwell(k, (3,), np.int32)
    with pytest.raises(ValueError, match=r"rayleigh: shape \(3,\) is not broadcast-compatible"):
        td.random.rayleigh(k, np.ones(4), (3,))
    with pytest.raises(ValueError, match="ball: d must be a positive int"):
        td.random.ball(k, 0)
    with pytest.raises(TypeError, match="pareto: expected a PRNG key"):
        td.random.pareto(np.zeros(3), 1.0)


@pytest.mark.parametrize("name", ["lognormal", "weibull_min", "wald", "f", "generalized_normal",
                                  "triangular", "pareto", "rayleigh"])
def test_reparameterisation_gradients_match_jax(name):
    """Gradients of a sum of draws in the distribution's parameter, through the transforms (and
    the gamma family's implicit reparameterisation for f and generalized_normal)."""
    draw = {
        "lognormal": lambda R, s, k: R.lognormal(k, s, (5,)),
        "weibull_min": lambda R, s, k: R.weibull_min(k, s, s + 1.0, (5,)),
        "wald": lambda R, s, k: R.wald(k, s, (5,)),
        "f": lambda R, s, k: R.f(k, s, 3.0, (5,)),
        "generalized_normal": lambda R, s, k: R.generalized_normal(k, s + 1.0, (5,)),
        "triangular": lambda R, s, k: R.triangular(k, 0.0, s, 1.0, (5,)),
        "pareto": lambda R, s, k: R.pareto(k, s + 1.0, (5,)),
        "rayleigh": lambda R, s, k: R.rayleigh(k, s, (5,)),
    }[name]
    k, jk = td.random.PRNGKey(1), jax.random.PRNGKey(1)
    got = td.grad(lambda s: td.sum(draw(td.random, s, k)))(0.5)
    want = jax.grad(lambda s: jax.numpy.sum(draw(jax.random, s, jk)))(0.5)
    np.testing.assert_allclose(got, float(want), rtol=1e-9)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("seed", [9, 12345])
def test_high_dynamic_range_modes_match_jax(seed, dtype):
    """mode='high' (bernoulli, gumbel, categorical, choice) and gumbel's 'highest' (float32: jax's
    64-bit fixed-point draw through clz and a bitcast): jax's numbers; float64 Gumbel noise within
    the float64 log's and log1p's ulps, whatever picks from it identical."""
    k, jk = td.random.PRNGKey(seed), jax.random.PRNGKey(seed)
    for mode in ("high", "highest"):
        got = td.random.gumbel(k, (300,), dtype, mode=mode)
        want = np.asarray(jax.random.gumbel(jk, (300,), dtype, mode=mode))
        # (float64: XLA's CPU log1p is up to ~100 ulps off, tests/random/test_random.py)
        assert got.dtype == want.dtype and _ulps(got, want) <= (0 if dtype == "float32" else 256)
        logits = np.random.default_rng(seed).standard_normal((4, 10)).astype(dtype)
        np.testing.assert_array_equal(td.random.categorical(k, logits, mode=mode),
                                      jax.random.categorical(jk, logits, mode=mode))
        np.testing.assert_array_equal(
            td.random.categorical(k, logits[0], shape=(3,), replace=False, mode=mode),
            jax.random.categorical(jk, logits[0], shape=(3,), replace=False, mode=mode))
        pr = (np.arange(1.0, 11.0) / 55).astype(dtype)
        np.testing.assert_array_equal(
            td.random.choice(k, 10, (4,), replace=False, p=pr, mode=mode),
            jax.random.choice(jk, 10, (4,), replace=False, p=pr, mode=mode))
    p = np.geomspace(1e-12, 0.9, 60).astype(dtype)
    np.testing.assert_array_equal(td.random.bernoulli(k, p, (3, 60), mode="high"),
                                  jax.random.bernoulli(jk, p, (3, 60), mode="high"))
    with pytest.raises(ValueError, match="bernoulli: mode must be one of 'low', 'high'"):
        td.random.bernoulli(k, 0.5, mode="highest")


def test_high_modes_sample_the_same_distributions():
    """Over 2^20 draws: bernoulli's rate at p = 1e-3 in both modes, and the three Gumbel modes'
    means against the Euler-Mascheroni constant (every draw finite)."""
    k = td.random.PRNGKey(4)
    n = 1 << 20
    low = td.random.bernoulli(k, np.float32(1e-3), (n,))
    high = td.random.bernoulli(k, np.float32(1e-3), (n,), mode="high")
    assert abs(low.mean() - 1e-3) < 2e-4 and abs(high.mean() - 1e-3) < 2e-4
    for mode in ("low", "high", "highest"):
        g = td.random.gumbel(k, (n,), np.float32, mode=mode)
        assert np.isfinite(g).all() and abs(g.astype(np.float64).mean() - np.euler_gamma) < 0.01


@pytest.mark.parametrize("name", ["wald_f32", "binomial_btrs", "multinomial_batch", "ball",
                                  "geometric", "rayleigh_f32"])
def test_xla_backend_draws_jaxs_numbers(name):
    """The same draws compiled by tidu's XLA backend: jax's numbers (within the case's ulps)."""
    draw, ulps = CASES[name]
    k, jk = td.random.PRNGKey(7), jax.random.PRNGKey(7)
    got = td.jit(lambda k: draw(td.random, k), backend="xla")(k)
    want = np.asarray(draw(jax.random, jk))
    assert got.shape == want.shape and got.dtype == want.dtype
    assert _ulps(got, want) <= ulps, _ulps(got, want)
