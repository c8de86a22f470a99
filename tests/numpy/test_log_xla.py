"""float32 log, log1p and erfinv are XLA:CPU's own (kernels/fastmath.hpp, kernels/math.hpp): the
Cephes polynomials XLA substitutes for logf / emits for log1p, fused where XLA's x86 backend fuses
them, so their values equal jax.jit's bit for bit on every float32 input XLA does not flush
(denormals: XLA flushes them to zero, tidu keeps them) -- checked here on a sample, and on all
2^32 bit patterns when this file was written (docs/numpy.md). Also: accuracy against float64."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

# XLA fuses the multiply-adds only on FMA hardware; TIDU_SIMD=generic runs tidu's unfused loop
pytestmark = pytest.mark.skipif(td._eval.simd_variant() == "generic",
                                reason="tidu's generic (no FMA) variant: XLA fuses on this CPU")

TINY = np.finfo(np.float32).tiny
EDGE = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, TINY, np.float32(3.4028235e38),
                 np.nextafter(np.float32(1), np.float32(2)), np.nextafter(np.float32(1), np.float32(0)),
                 0.70710677, 0.7071068, 1.4142135, 1.4142137, 0.41421354, 0.41421357, -0.41421354,
                 -0.41421357, -0.99999994, 1e-30, -1e-30, 1e38, 2.0, 0.5], np.float32)


def _sample(n, seed):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    one = np.arange(0x3f000000, 0x40000000, 37, dtype=np.uint32)  # [0.5, 2): every 37th float
    return np.concatenate([bits.view(np.float32), one.view(np.float32),
                           rng.uniform(-1, 1, n // 4).astype(np.float32), EDGE])


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


@pytest.mark.parametrize("name", ["log", "log1p"])
def test_float32_log_and_log1p_are_xlas_bit_for_bit(name):
    x = _sample(2_000_000, 5)
    got = np.asarray(td.jit(getattr(td, name))(x))
    want = np.asarray(jax.jit(getattr(jnp, name))(x))
    assert got.dtype == want.dtype == np.float32
    denormal = (x != 0) & (np.abs(x) < TINY)
    bad = ~_same_bits(got, want) & ~denormal
    assert not bad.any(), (x[bad][:5], got[bad][:5], want[bad][:5])
    # denormal inputs: XLA flushes them (log: -inf), tidu's answer is the C library's
    d = x[denormal & (x > 0)]
    np.testing.assert_allclose(got[denormal & (x > 0)],
                               getattr(np, name)(d.astype(np.float64)).astype(np.float32),
                               rtol=1e-6)
    # small arrays and 0-d values take the same kernels
    for v in EDGE[:12]:
        assert _same_bits(td.jit(getattr(td, name))(v), jax.jit(getattr(jnp, name))(v)), v


@pytest.mark.parametrize("name,bound", [("log", 1.25), ("log1p", 2.5)])
def test_float32_log_accuracy(name, bound):
    # XLA's approximations, measured on the sample against float64 (ulps of the exact value)
    x = _sample(1_000_000, 6)
    lo = 0.0 if name == "log" else -1.0
    x = x[np.isfinite(x) & (x > lo) & ((x == 0) | (np.abs(x) >= TINY))]
    got = np.asarray(td.jit(getattr(td, name))(x)).astype(np.float64)
    ref = getattr(np, name)(x.astype(np.float64))
    nz = ref != 0
    assert np.all(got[~nz] == 0)
    err = np.abs(got[nz] - ref[nz]) / np.spacing(np.abs(ref[nz]).astype(np.float32)).astype(np.float64)
    assert err.max() <= bound, err.max()


def test_float32_erfinv_and_normals_are_jaxs():
    rng = np.random.default_rng(7)
    y = np.concatenate([rng.uniform(-1, 1, 500_000).astype(np.float32),
                        1 - rng.random(50_000).astype(np.float32) * 1e-3,
                        np.array([0, -0.0, 1, -1, 1.5, -2, np.nan, 1e-30, 0.999999], np.float32)])
    got = np.asarray(td.jit(td.erfinv)(y))
    want = np.asarray(jax.jit(jax.lax.erf_inv)(y))
    assert _same_bits(got, want).all()
    for seed, shape in [(0, (100_003,)), (3, (7, 13))]:
        a = np.asarray(td.random.normal(td.random.PRNGKey(seed), shape, td.float32))
        b = np.asarray(jax.random.normal(jax.random.PRNGKey(seed), shape, jnp.float32))
        np.testing.assert_array_equal(a, b)


def test_float32_erf_is_xlas_bit_for_bit():
    # XLA's erf intrinsic (Eigen's rational interpolant, explicit FMAs): every 211th bit pattern
    x = np.concatenate([np.arange(0, 2**32, 211, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        EDGE, np.array([3.8325067, 3.8325069, -3.8325067, 1e-40, -1e-40], np.float32)])
    got = np.asarray(td.jit(td.erf)(x))
    want = np.asarray(jax.jit(jax.lax.erf)(x))
    bad = ~_same_bits(got, want)
    assert not bad.any(), (x[bad][:5], got[bad][:5], want[bad][:5])
    for v in EDGE[:12]:  # 0-d values
        assert _same_bits(td.jit(td.erf)(v), jax.jit(jax.lax.erf)(v)), v
    # its accuracy (XLA's, a few float32 ulps), against the float64 C library
    from scipy.special import erf  # noqa: PLC0415

    y = np.linspace(-4, 4, 100_001, dtype=np.float32)
    err = np.abs(np.asarray(td.jit(td.erf)(y)) - erf(y.astype(np.float64)))
    assert err.max() < 4e-7, err.max()
