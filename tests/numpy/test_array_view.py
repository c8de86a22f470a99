"""jax.Array's view and byteswap on traced values (tidu.numpy.bitview, on the
BitcastConvertType primitive) against jax in x64 on both backends: same-width, narrower and
wider dtypes along the last axis, bool, complex to and from floats, 0-d arrays, and the errors
jax raises."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

BACKENDS = ("cpu", "xla")
RNG = np.random.default_rng(0)
X = {
    "float32": RNG.standard_normal((3, 4)).astype(np.float32),
    "float64": RNG.standard_normal((2, 4)),
    "int32": RNG.integers(-2**31, 2**31 - 1, (3, 4)).astype(np.int32),
    "uint8": RNG.integers(0, 256, (2, 8)).astype(np.uint8),
    "int16": RNG.integers(-2**15, 2**15 - 1, (2, 4)).astype(np.int16),
    "bool": RNG.integers(0, 2, (2, 8)).astype(bool),
    "complex64": (RNG.standard_normal((2, 2)) + 1j * RNG.standard_normal((2, 2))).astype(
        np.complex64),
}
PAIRS = [("float32", "int32"), ("float32", "uint32"), ("int32", "float32"), ("float64", "int64"),
         ("float64", "float32"), ("float64", "uint16"), ("int32", "uint8"), ("uint8", "int32"),
         ("uint8", "float64"), ("int16", "float16"), ("int16", "uint64"), ("bool", "uint8"),
         ("bool", "int16"), ("uint8", "bool"), ("complex64", "float32"), ("complex64", "int64"),
         ("float64", "complex64"), ("float32", "float32")]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src, dst", PAIRS)
def test_view_matches_jax(backend, src, dst):
    x = X[src]
    got = td.jit(lambda x: x.view(dst), backend=backend)(x)
    want = np.asarray(jnp.asarray(x).view(dst))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))  # bit for bit


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src", ["float32", "float64", "int32", "uint8", "int16"])
def test_byteswap_matches_jax(backend, src):
    x = X[src]
    got = td.jit(lambda x: x.byteswap(), backend=backend)(x)
    want = np.asarray(jnp.asarray(x).byteswap())
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(got.view(np.uint8), x.byteswap().view(np.uint8))  # numpy's


def test_zero_d_none_and_errors():
    s = np.float32(1.5)
    assert td.jit(lambda s: s.view(np.int32))(s) == np.float32(1.5).view(np.int32)
    np.testing.assert_array_equal(td.jit(lambda x: x.view())(X["float32"]), X["float32"])
    with pytest.raises(ValueError, match="0d array"):
        td.jit(lambda s: s.view(np.int16))(s)
    with pytest.raises(ValueError, match="divisor"):
        td.jit(lambda x: x.view(np.float64))(np.ones((2, 3), np.float32))
    with pytest.raises(NotImplementedError, match="type"):
        td.jit(lambda x: x.view(np.int32, type=np.ndarray))(X["float32"])
