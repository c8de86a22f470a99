"""td.lax.reduce_precision (api/lax_math.py: frexp, ldexp and Round instead of bit access)
against jax.lax bit for bit: float32 and float64, the half/bfloat16/fp8-like formats and
degenerate ones, ties, overflow to inf, flush below the smallest normal, NaN/inf/signed zero;
its straight-through derivative; bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
from jax import lax as L  # noqa: E402

jax.config.update("jax_enable_x64", True)

FORMATS = [(5, 10), (8, 7), (8, 3), (5, 0), (4, 3), (5, 2), (2, 1), (1, 4), (11, 20), (8, 23),
           (11, 52), (15, 30), (6, 40)]


def _inputs(dt):
    rng = np.random.default_rng(0)
    fi = np.finfo(dt)
    lo = -45 if dt == np.float32 else -320
    mags = 10.0 ** rng.integers(lo, 38, 300) * rng.standard_normal(300)
    special = [np.nan, -np.inf, np.inf, 0.0, -0.0, fi.tiny, fi.tiny / 3, fi.max, -fi.max, 65504,
               65520, 65519.99, 6e-5, 6.2e-5, 1.5, 2.5, -3.5, 1 + 2**-11, 1 + 3 * 2**-11,
               1 + 2**-8, 1 + 3 * 2**-8, 0.09375, 0.1875]
    return np.concatenate([mags, special, np.linspace(-4, 4, 97)]).astype(dt)


def _same(got, want, where=None):
    ok = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got)
                                                                    & np.isnan(want))
    if where is not None:
        ok |= ~where
    assert ok.all(), (got[~ok][:5], want[~ok][:5])


@pytest.mark.parametrize("backend", ["cpu", "xla"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", FORMATS, ids=[f"e{e}m{m}" for e, m in FORMATS])
def test_matches_jax_bit_for_bit(fmt, dt, backend):
    x = _inputs(dt)
    eb, mb = fmt
    want = np.asarray(L.reduce_precision(x, eb, mb))
    got = np.asarray(td.jit(lambda a: td.lax.reduce_precision(a, eb, mb), backend=backend)(x))
    assert got.dtype == dt
    ebits = 8 if dt == np.float32 else 11
    # XLA's CPU code flushes subnormal operands of arithmetic to zero, so on the XLA backend a
    # source subnormal kept by a format as wide as the source's exponent comes out as zero
    keep = None
    if backend == "xla" and eb >= ebits:
        keep = ~((x != 0) & (np.abs(x) < np.finfo(dt).tiny))
    _same(got, want, keep)


def test_derivative_is_straight_through():
    x = np.array([0.1, 1.0 + 2**-12, -3.3, 7e4])
    g = td.jit(td.grad(lambda a: td.sum(td.lax.reduce_precision(a, 5, 10) * a)))(x)
    np.testing.assert_allclose(g, np.asarray(L.reduce_precision(x, 5, 10)) + x, rtol=0)
    _, t = td.jvp(lambda a: td.lax.reduce_precision(a, 8, 7), (x,), (np.full(4, 0.5),))
    np.testing.assert_array_equal(t, np.full(4, 0.5))


def test_bad_arguments_name_the_problem():
    f = td.jit(lambda a, e, m: td.lax.reduce_precision(a, e, m), static_argnums=(1, 2))
    with pytest.raises(ValueError, match="exponent_bits must be >= 1"):
        f(np.ones(2), 0, 3)
    with pytest.raises(ValueError, match="mantissa_bits >= 0"):
        f(np.ones(2), 5, -1)
    with pytest.raises(TypeError, match="float32 or float64, got int32"):
        f(np.ones(2, np.int32), 5, 3)
