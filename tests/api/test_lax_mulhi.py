"""td.lax.mulhi (64-bit products, or 32-bit halves with carries for 64-bit dtypes, plus the signed
correction) against jax.lax exactly for every integer dtype, extremes included, on both
backends; td.lax.composite as its decomposition, differentiable."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
from jax import lax as L  # noqa: E402

jax.config.update("jax_enable_x64", True)

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("backend", ["cpu", "xla"])
@pytest.mark.parametrize("dt", INTS, ids=lambda d: np.dtype(d).name)
def test_mulhi_matches_jax(dt, backend):
    rng = np.random.default_rng(0)
    i = np.iinfo(dt)
    edge = np.array([i.min, i.max, 0, 1, i.min, i.max, i.max, i.max // 2 + 1], dt)
    edge2 = np.array([i.min, i.max, i.max, i.min, i.max, i.min, 1, i.max // 2 + 1], dt)
    x = np.concatenate([rng.integers(i.min, i.max, 400, dtype=dt, endpoint=True), edge])
    y = np.concatenate([rng.integers(i.min, i.max, 400, dtype=dt, endpoint=True), edge2])
    want = np.asarray(L.mulhi(x, y))
    got = np.asarray(td.jit(td.lax.mulhi, backend=backend)(x, y))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_mulhi_bad_operands():
    with pytest.raises(TypeError, match="integers of one dtype, got int32 and int64"):
        td.jit(td.lax.mulhi)(np.ones(2, np.int32), np.ones(2, np.int64))
    with pytest.raises(TypeError, match="integers of one dtype, got float64"):
        td.jit(td.lax.mulhi)(np.ones(2), np.ones(2))


def test_composite_is_its_decomposition():
    def scale(x, *, factor):
        return x * factor

    f = td.lax.composite(scale, "my.scale", version=1)
    jf = L.composite(scale, "my.scale", version=1)
    x = np.array([1.0, -2.0, 3.5])
    np.testing.assert_array_equal(td.jit(lambda a: f(a, factor=3.0))(x), jf(x, factor=3.0))
    # jax has no JVP rule for composite (it raises); tidu differentiates the decomposition
    g = td.jit(td.grad(lambda a: td.sum(f(a, factor=3.0) ** 2)))(x)
    np.testing.assert_allclose(g, 18.0 * x, rtol=1e-15)
    with pytest.raises(ValueError, match="JVP rule for composite not implemented"):
        jax.grad(lambda a: (jf(a, factor=3.0) ** 2).sum())(x)
    assert f.__name__ == "scale"
    with pytest.raises(TypeError, match="must be a function"):
        td.lax.composite(3, "x")
