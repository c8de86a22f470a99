"""The interpreter's blocked integer convolution kernel (cpp/include/tidu/kernels/conv.hpp,
conv_int_gemm) against jax.lax exactly: every integer width and bool, output feature counts not a
multiple of the 4-row block, rows longer than the 512-column tile, and sums that wrap."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from tidu.numpy.conv import conv_general_dilated

jax = pytest.importorskip("jax")
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.bool_]


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("out_features", [1, 5, 8])
def test_matches_jax_exactly(dt, out_features):
    rng = np.random.default_rng(out_features)
    if dt == np.bool_:
        x = rng.random((2, 3, 30, 25)) < 0.3
        k = rng.random((out_features, 3, 3, 2)) < 0.3
    else:
        info = np.iinfo(dt)
        # the full range, so products and sums wrap in the dtype's width
        x = rng.integers(info.min, info.max, (2, 3, 30, 25), dtype=dt, endpoint=True)
        k = rng.integers(info.min, info.max, (out_features, 3, 3, 2), dtype=dt, endpoint=True)
    want = np.asarray(lax.conv_general_dilated(x, k, (1, 1), "SAME"))
    got = td.jit(lambda a, b: conv_general_dilated(a, b, (1, 1), "SAME"), backend="cpu")(x, k)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_int8_summed_in_int32_and_strided():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (3, 4, 17, 40), dtype=np.int8)
    k = rng.integers(-128, 128, (6, 4, 3, 5), dtype=np.int8)
    want = np.asarray(lax.conv_general_dilated(x, k, (2, 1), "VALID", rhs_dilation=(1, 2),
                                               preferred_element_type=np.int32))
    got = td.jit(lambda a, b: conv_general_dilated(a, b, (2, 1), "VALID", rhs_dilation=(1, 2),
                                                   preferred_element_type=np.int32))(x, k)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
