"""td.random's gamma family (gamma, loggamma, beta, dirichlet, t, chisquare) against jax.random
in x64: jax's Marsaglia-Tsang sampler, one key per element as jax splits them, so the draws equal
jax's to rounding; the implicit reparameterisation gradients (random_gamma_grad) equal jax's;
inside jit and vmap; float32; a statistical check; errors."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

ALPHA = np.array([0.05, 0.3, 1.0, 2.5, 7.0, 40.0])


@pytest.mark.parametrize("seed", [0, 7, 2**33 + 1])
def test_draws_match_jax(seed):
    k, jk = td.random.PRNGKey(seed), jax.random.PRNGKey(seed)
    rows = [
        (td.random.gamma(k, ALPHA), jax.random.gamma(jk, ALPHA)),
        (td.random.gamma(k, 2.0, (2, 3)), jax.random.gamma(jk, 2.0, (2, 3))),
        (td.random.loggamma(k, ALPHA), jax.random.loggamma(jk, ALPHA)),
        (td.random.beta(k, ALPHA, 1.5), jax.random.beta(jk, ALPHA, 1.5)),
        (td.random.dirichlet(k, np.array([0.5, 2.0, 3.0]), (4,)),
         jax.random.dirichlet(jk, jnp.array([0.5, 2.0, 3.0]), (4,))),
        (td.random.t(k, 4.0, (5,)), jax.random.t(jk, 4.0, (5,))),
        (td.random.chisquare(k, ALPHA), jax.random.chisquare(jk, ALPHA)),
    ]
    for got, want in rows:
        assert np.shape(got) == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-11)


def test_reparameterisation_gradients_match_jax():
    k, jk = td.random.PRNGKey(3), jax.random.PRNGKey(3)
    a = np.array([0.2, 0.5, 1.5, 4.0])
    for tf, jf in [(lambda a: td.random.gamma(k, a), lambda a: jax.random.gamma(jk, a)),
                   (lambda a: td.random.loggamma(k, a), lambda a: jax.random.loggamma(jk, a)),
                   (lambda a: td.random.beta(k, a, 2.0), lambda a: jax.random.beta(jk, a, 2.0)),
                   (lambda a: td.random.dirichlet(k, a)[1:],
                    lambda a: jax.random.dirichlet(jk, a)[1:])]:
        w = np.linspace(0.5, 2.0, np.shape(jf(a))[0])
        g = td.jit(td.grad(lambda a: td.sum(tf(a) * w)))(a)
        np.testing.assert_allclose(g, jax.grad(lambda a: jnp.sum(jf(a) * w))(a), rtol=1e-9)


def test_inside_vmap_and_float32_and_statistics():
    keys = td.random.split(td.random.PRNGKey(1), 3)
    got = td.jit(td.vmap(lambda k: td.random.gamma(k, 3.0, (2,))))(keys)
    want = jax.vmap(lambda k: jax.random.gamma(k, 3.0, (2,)))(jnp.asarray(keys))
    np.testing.assert_allclose(got, want, rtol=1e-11)
    g32 = td.random.gamma(td.random.PRNGKey(2), np.float32(2.5), (6,), dtype=np.float32)
    assert np.asarray(g32).dtype == np.float32
    np.testing.assert_allclose(g32, jax.random.gamma(jax.random.PRNGKey(2), 2.5, (6,),
                                                     dtype=jnp.float32), rtol=2e-6)
    x = np.asarray(td.random.gamma(td.random.PRNGKey(5), 3.0, (20000,)))
    assert abs(x.mean() - 3.0) < 0.06 and abs(x.var() - 3.0) < 0.2  # Gamma(3): mean = var = 3
    b = np.asarray(td.random.beta(td.random.PRNGKey(6), 2.0, 6.0, (20000,)))
    assert abs(b.mean() - 0.25) < 0.01


def test_bad_arguments_are_refused():
    k = td.random.PRNGKey(0)
    with pytest.raises(ValueError, match="broadcast"):
        td.random.gamma(k, np.ones(3), (2,))
    with pytest.raises(ValueError, match="alpha.ndim >= 1"):
        td.random.dirichlet(k, 1.0)
    with pytest.raises(TypeError, match="float32 or float64"):
        td.random.gamma(k, 1.0, dtype=np.int32)


def test_float32_gamma_identical_where_xlas_rsqrt_agrees():
    # jax's c = (1/3) / sqrt(d) is c = (1/3) * rsqrt(d) after XLA's simplifier, and XLA's CPU
    # rsqrt (a hardware estimate and Newton steps) is 1 / sqrt(d) rounded in ~3/4 of float32
    # inputs only; everything else in the sampler is jax's to the bit (log, normals, uniforms,
    # and the two multiply-adds XLA fuses), so where c agrees the draws are identical
    third = np.float32(1 / 3)
    for a in (0.3, 0.7, 2.5, 5.0, 40.0, 123.0):
        d = np.float32(a if a >= 1 else a + 1) - third
        c_jax = jax.jit(lambda d: third / jnp.sqrt(d))(d)
        k, jk = td.random.PRNGKey(11), jax.random.PRNGKey(11)
        got = np.asarray(td.random.gamma(k, a, (3000,), td.float32))
        want = np.asarray(jax.random.gamma(jk, a, (3000,), jnp.float32))
        if c_jax == third / np.sqrt(d):
            np.testing.assert_array_equal(got, want, err_msg=f"alpha={a}")
        else:
            np.testing.assert_allclose(got, want, rtol=2e-6, err_msg=f"alpha={a}")
