"""td.lax.lgamma (the primitive ops.Lgamma) is XLA:CPU's kernel (kernels/math.hpp): Lanczos with
XLA's float32 log and log1p and the one multiply-add XLA's x86 backend contracts, denormal inputs
flushed to zero as XLA:CPU does -- so float32 values equal jax.jit(jax.lax.lgamma)'s bit for bit
(poisson's acceptance test reads them: tests/random/test_poisson_orthogonal_topk.py).  float64:
the same formula in double, equal to jax's to rounding.  Derivative: digamma, as jax's."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

pytestmark = pytest.mark.skipif(td._eval.simd_variant() == "generic",
                                reason="tidu's generic (no FMA) variant: XLA fuses on this CPU")

TINY32 = np.finfo(np.float32).tiny
EDGE = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, 1.0, 2.0, 3.0, -1.0, -2.0, -1e6, -0.5,
                 0.49999997, 1e-30, -1e-30, TINY32, -TINY32, 1e-45, -1e-45, 1e-40, 3.4028235e38,
                 -3.4028235e38, 2.0**24, 2.0**24 + 2, 1e7, 33554432.0, 1e20, -2.5, -1e-7],
                np.float32)


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    u = np.uint32 if a.dtype == np.float32 else np.uint64
    return (a.view(u) == b.view(u)) | (np.isnan(a) & np.isnan(b))


def _sample(n, seed):
    rng = np.random.default_rng(seed)
    return np.concatenate([
        np.arange(1, 2_000_001, dtype=np.float32),                      # poisson's k + 1
        rng.integers(1, 2**24, n, dtype=np.int64).astype(np.float32),  # integers up to 2^24
        rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32),  # any
        rng.uniform(0.5, 40, n).astype(np.float32), rng.uniform(-40, 0.5, n).astype(np.float32),
        EDGE])


def test_float32_lgamma_is_xlas_bit_for_bit():
    x = _sample(1_000_000, 0)
    got = np.asarray(td.jit(td.lax.lgamma)(x))
    want = np.asarray(jax.jit(jax.lax.lgamma)(x))
    assert got.dtype == want.dtype == np.float32
    bad = ~_same_bits(got, want)
    assert not bad.any(), (bad.sum(), x[bad][:5], got[bad][:5], want[bad][:5])
    # the element-wise path (reflection, infinities, NaN, denormals) and the vectorised one
    # give the same values: a chunk of positives with one negative in it, and alone
    pos = np.linspace(0.5, 1e4, 1000, dtype=np.float32)
    mixed = pos.copy()
    mixed[500] = -3.5
    lg = td.jit(td.lax.lgamma)
    a, b = np.asarray(lg(pos)), np.asarray(lg(mixed))
    np.testing.assert_array_equal(np.delete(a, 500), np.delete(b, 500))
    assert _same_bits(b[500], jax.lax.lgamma(np.float32(-3.5)))
    for v in EDGE:  # 0-d values
        assert _same_bits(lg(v), jax.jit(jax.lax.lgamma)(v)), v


def test_float32_lgamma_accuracy():
    x = np.geomspace(0.5, 1e30, 100_000).astype(np.float32)
    from scipy.special import gammaln  # noqa: PLC0415

    want = gammaln(x.astype(np.float64))
    got = np.asarray(td.jit(td.lax.lgamma)(x)).astype(np.float64)
    # Lanczos in float32: a few ulps of the terms it sums (XLA's own accuracy, not tidu's)
    assert np.all(np.abs(got - want) <= 4e-6 * np.maximum(np.abs(want), 1.0))


def test_float64_lgamma_to_rounding():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(0.5, 50, 200_000), rng.uniform(-50, 0.5, 200_000),
                        np.geomspace(1, 1e300, 1000), EDGE.astype(np.float64)])
    got = np.asarray(td.jit(td.lax.lgamma)(x))
    want = np.asarray(jax.jit(jax.lax.lgamma)(x))
    assert got.dtype == np.float64
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin], want[~fin])
    # absolute error of a few ulps of the O(1)..O(x log x) terms the formula sums
    assert np.all(np.abs(got[fin] - want[fin]) <= 1e-14 * np.maximum(np.abs(want[fin]), 4.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lgamma_derivative_vmap_and_xla(dtype):
    x = np.array([0.3, 1.0, 2.5, 7.0, 150.0, -0.5, -3.7], dtype)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    g = td.jit(td.vmap(td.grad(td.lax.lgamma)))(x)
    np.testing.assert_allclose(g, jax.vmap(jax.grad(jax.lax.lgamma))(x), rtol=rtol)
    gg = td.jit(td.vmap(td.grad(td.grad(td.lax.lgamma))))(x)
    np.testing.assert_allclose(gg, jax.vmap(jax.grad(jax.grad(jax.lax.lgamma)))(x), rtol=100 * rtol)
    assert np.isnan(td.jit(td.grad(td.lax.lgamma))(dtype(-2.0)))  # digamma's pole
    np.testing.assert_array_equal(td.jit(td.lax.lgamma, backend="xla")(x),
                                  jax.jit(jax.lax.lgamma)(x))
    got = td.jit(lambda m: td.lax.lgamma(m))(np.stack([x, x + 1]))
    want = jax.jit(jax.lax.lgamma)(np.stack([x, x + 1]))
    if dtype == np.float32:
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)


def test_lgamma_rejects_non_floats():
    with pytest.raises(TypeError, match="gammaln"):
        td.jit(td.lax.lgamma)(np.array([1 + 2j]))
    # integers are lifted to float64, as jax.scipy.special.gammaln
    np.testing.assert_allclose(td.jit(td.scipy.special.gammaln)(np.array([1, 5])), [0.0, np.log(24.0)],
                               atol=1e-13)
    assert jnp.asarray(0).dtype  # jax imported for the module's x64 setting
