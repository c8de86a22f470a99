"""td.random.poisson, orthogonal, choice/categorical without replacement (Gumbel top-k), and
td.lax.top_k, against jax (x64): poisson's integers identical on several keys, shapes and rates
(both of jax's samplers, inside jit, vmap and scan); orthogonal to rounding; top_k's values,
indices, gradient and batching."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

SEEDS = [0, 42, -3, 2**40 + 7]
# rates on both sides of jax's switch at 10 (Knuth below, transformed rejection above), 0 and
# a mixed array (rates up to 1e7: test_poisson_large_rates_identical)
LAMS = [0.5, 3.0, 9.99, 10.0, 47.5, 300.0,
        np.array([0.0, 0.1, 2.0, 9.0, 11.0, 30.0, 250.0, 100.0])]


@pytest.mark.parametrize("seed", SEEDS)
def test_poisson_identical(seed):
    k, jk = td.random.PRNGKey(seed), jax.random.PRNGKey(seed)
    for lam in LAMS:
        for shape in [None, (3,), (2, 3, 8)] if np.ndim(lam) else [(), (5,), (40, 25)]:
            if shape is not None and np.ndim(lam) and shape[-1:] != np.shape(lam):
                shape = shape[:-1] + np.shape(lam)
            got = td.random.poisson(k, lam, shape)
            want = jax.random.poisson(jk, lam, shape)
            assert got.dtype == want.dtype == np.int64
            np.testing.assert_array_equal(got, want, err_msg=f"lam={lam} shape={shape}")
    np.testing.assert_array_equal(td.random.poisson(k, 4.0, (6,), td.int32),
                                  jax.random.poisson(jk, 4.0, (6,), jnp.int32))
    odd = np.array([-1.0, np.nan, 0.0, 3.0, 50.0])  # jax's -1 for negative and NaN rates
    np.testing.assert_array_equal(td.random.poisson(k, odd), jax.random.poisson(jk, odd))


@pytest.mark.parametrize("seed", [0, 42])
def test_poisson_large_rates_identical(seed):
    # the rejection test compares float32 values of ~lam log(lam) that cancel to O(1): identical
    # because float32 log and lgamma are XLA's kernels and the sampler's multiply-adds are
    # rounded once where XLA fuses them (docs/random.md)
    k, jk = td.random.PRNGKey(seed), jax.random.PRNGKey(seed)
    for lam in (1e3, 1e4, 1e5, 1e6, 1e7):
        got = np.asarray(td.random.poisson(k, lam, (20000,)))
        want = np.asarray(jax.random.poisson(jk, lam, (20000,)))
        np.testing.assert_array_equal(got, want, err_msg=f"lam={lam}")
        assert abs(got.mean() - lam) < 5 * np.sqrt(lam / got.size)
    lam = np.geomspace(10, 1e7, 3000)
    np.testing.assert_array_equal(td.random.poisson(k, lam), jax.random.poisson(jk, lam))


def test_poisson_inside_jit_vmap_scan():
    k, jk = td.random.PRNGKey(9), jax.random.PRNGKey(9)
    lam = np.array([0.3, 5.0, 12.0, 80.0])

    def f(key, lam):
        return td.random.poisson(key, lam, (3, 4))
    want = jax.jit(lambda key, lam: jax.random.poisson(key, lam, (3, 4)))(jk, lam)
    for backend in ("cpu", "xla"):
        np.testing.assert_array_equal(td.jit(f, backend=backend)(k, lam), want)
    keys = td.random.split(k, 6)
    np.testing.assert_array_equal(
        td.vmap(lambda q: td.random.poisson(q, lam))(keys),
        jax.vmap(lambda q: jax.random.poisson(q, lam))(jax.random.split(jk, 6)))

    def walk(key):
        def step(c, i):
            n = td.random.poisson(td.random.fold_in(key, i), 20.0, (5,))
            return c + td.sum(n), n
        return td.scan(step, np.int64(0), td.arange(4))

    def jwalk(key):
        def step(c, i):
            n = jax.random.poisson(jax.random.fold_in(key, i), 20.0, (5,))
            return c + jnp.sum(n), n
        return jax.lax.scan(step, jnp.int64(0), jnp.arange(4))
    got, want = td.jit(walk)(k), jax.jit(jwalk)(jk)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_poisson_statistics_and_errors():
    k = td.random.PRNGKey(1)
    for lam in (2.5, 40.0):
        x = np.asarray(td.random.poisson(k, lam, (100_000,)))
        assert abs(x.mean() - lam) < 5 * np.sqrt(lam / x.size)
        assert abs(x.var() / lam - 1) < 0.03
    with pytest.raises(TypeError, match="integer dtype"):
        td.random.poisson(k, 1.0, (3,), td.float32)
    with pytest.raises(ValueError, match="broadcast"):
        td.random.poisson(k, np.ones(3), (4,))


@pytest.mark.parametrize("n,m,shape", [(4, None, ()), (5, 3, (2,)), (3, 6, ()), (6, 6, (2, 3))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_orthogonal_matches_jax(n, m, shape, dtype):
    k, jk = td.random.PRNGKey(4), jax.random.PRNGKey(4)
    got = np.asarray(td.random.orthogonal(k, n, shape, dtype, m=m))
    want = np.asarray(jax.random.orthogonal(jk, n, shape, dtype, m=m))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, atol=1e-5 if dtype == "float32" else 1e-12)
    mm = n if m is None else m
    g = got @ np.swapaxes(got, -1, -2) if n <= mm else np.swapaxes(got, -1, -2) @ got
    np.testing.assert_allclose(g, np.broadcast_to(np.eye(min(n, mm)), g.shape),
                               atol=1e-5 if dtype == "float32" else 1e-12)


def test_orthogonal_inside_jit_and_vmap():
    keys = td.random.split(td.random.PRNGKey(2), 3)
    got = td.vmap(lambda q: td.random.orthogonal(q, 4))(keys)
    want = jax.vmap(lambda q: jax.random.orthogonal(q, 4))(jax.random.split(
        jax.random.PRNGKey(2), 3))
    np.testing.assert_allclose(got, want, atol=1e-12)
    got = td.jit(lambda q: td.random.orthogonal(q, 5, (2,)), backend="xla")(keys[0])
    np.testing.assert_allclose(got, jax.random.orthogonal(jax.random.split(
        jax.random.PRNGKey(2), 3)[0], 5, (2,)), atol=1e-12)


def _ties(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 6, shape).astype(np.float64)


@pytest.mark.parametrize("backend", ["cpu", "xla"])
def test_top_k_matches_jax(backend):
    for x, k, axis in [(_ties((13,)), 5, -1), (_ties((4, 9)), 9, -1), (_ties((4, 9)), 0, -1),
                       (_ties((5, 7, 3)), 2, 1), (np.random.default_rng(1).standard_normal(
                           (3, 50)), 7, -1),
                       (np.array([1.0, np.nan, 3.0, np.inf, -np.inf, 3.0]), 4, -1),
                       (np.arange(12, dtype=np.int32).reshape(3, 4) % 3, 3, 0),
                       # XLA ranks +0 above -0
                       (np.array([0.0, -0.0, 1.0, -0.0, 0.0, -1.0, np.nan, 1e-300]), 8, -1),
                       (np.array([[-0.0, 0.0, 1e-30, -0.0, -1e-30, 0.0, np.nan]] * 2,
                                 np.float32), 6, -1)]:
        got = td.jit(lambda a, k=k, axis=axis: td.lax.top_k(a, k, axis=axis),
                     backend=backend)(x)
        want = jax.lax.top_k(x, k, axis=axis)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


def test_top_k_gradient_vmap_and_errors():
    x = np.random.default_rng(2).standard_normal((4, 10))
    w = np.random.default_rng(3).standard_normal((4, 3))

    def loss(a):
        return td.sum(td.sin(td.lax.top_k(a, 3)[0]) * w)

    def jloss(a):
        return jnp.sum(jnp.sin(jax.lax.top_k(a, 3)[0]) * w)
    got = td.grad(loss)(x)
    np.testing.assert_allclose(got, jax.grad(jloss)(x), rtol=1e-13)
    assert np.count_nonzero(got) == 12  # the cotangent lands on the chosen entries only
    eps = 1e-6
    d = np.zeros_like(x)
    d[1, int(np.argmax(x[1]))] = eps
    jl = td.jit(loss)
    np.testing.assert_allclose((jl(x + d) - jl(x - d)) / (2 * eps),
                               got[1, int(np.argmax(x[1]))], rtol=1e-6)
    vals, idx = td.vmap(lambda a: td.lax.top_k(a, 2))(x)
    jv, ji = jax.vmap(lambda a: jax.lax.top_k(a, 2))(x)
    np.testing.assert_array_equal(vals, jv)
    np.testing.assert_array_equal(idx, ji)
    vals, idx = td.vmap(lambda a: td.lax.top_k(a, 2), in_axes=1)(x)
    jv, ji = jax.vmap(lambda a: jax.lax.top_k(a, 2), in_axes=1)(x)
    np.testing.assert_array_equal(vals, jv)
    np.testing.assert_array_equal(idx, ji)
    with pytest.raises(ValueError, match="k must be between"):
        td.jit(lambda a: td.lax.top_k(a, 11))(x)
    with pytest.raises(ValueError, match="scalar"):
        td.jit(lambda a: td.lax.top_k(a, 1))(np.float64(1.0))
    assert not hasattr(td, "top_k")


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_choice_and_categorical_without_replacement_identical(seed):
    k, jk = td.random.PRNGKey(seed), jax.random.PRNGKey(seed)
    p = np.arange(1.0, 21.0) / 210
    for shape in [(5,), (4, 5), (20,)]:
        got = td.random.choice(k, 20, shape, replace=False, p=p)
        want = jax.random.choice(jk, 20, shape, replace=False, p=p)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    a = np.arange(60.0).reshape(20, 3)
    np.testing.assert_array_equal(td.random.choice(k, a, (6,), replace=False, p=p),
                                  jax.random.choice(jk, a, (6,), replace=False, p=p))
    np.testing.assert_array_equal(td.random.choice(k, a.T, (2,), replace=False, p=p,
                                                   axis=1),
                                  jax.random.choice(jk, a.T, (2,), replace=False, p=p,
                                                    axis=1))
    logits = np.random.default_rng(5).standard_normal((3, 10))
    for kw in ({"shape": (4, 3)}, {"shape": (2, 10), "axis": 0}, {"shape": (3,)}):
        got = td.random.categorical(k, logits, replace=False, **kw)
        want = jax.random.categorical(jk, logits, replace=False, **kw)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="cannot exceed"):
        td.random.categorical(k, logits, shape=(11, 3), replace=False)
    with pytest.raises(ValueError, match="larger sample"):
        td.random.choice(k, 20, (21,), replace=False, p=p)


def test_categorical_chunked_draws_jaxs_numbers(monkeypatch):
    # a large draw goes block by block (D._BLOCK values at a time); small blocks here exercise it
    import tidu.random.distributions as D
    monkeypatch.setattr(D, "_BLOCK", 64)
    k, jk = td.random.PRNGKey(3), jax.random.PRNGKey(3)
    rng = np.random.default_rng(0)
    for logits, kw in [(rng.standard_normal(10), {"shape": (301,)}),
                       (rng.standard_normal((7, 10)), {"shape": (5, 7)}),
                       (rng.standard_normal((30, 10)), {}),
                       (rng.standard_normal((3, 9, 4)), {"axis": 1, "shape": (6, 3, 4)}),
                       (rng.standard_normal(10).astype(np.float32), {"shape": (301,)})]:
        want = jax.random.categorical(jk, logits, **kw)
        for backend in ("cpu", "xla"):
            got = td.jit(lambda q, lg, kw=kw: td.random.categorical(q, lg, **kw),
                         backend=backend)(k, logits)
            np.testing.assert_array_equal(got, want)
    logits = rng.standard_normal(10)
    got = td.vmap(lambda q: td.random.categorical(q, logits, shape=(50,)))(
        td.random.split(k, 3))
    want = jax.vmap(lambda q: jax.random.categorical(q, logits, shape=(50,)))(
        jax.random.split(jk, 3))
    np.testing.assert_array_equal(got, want)
