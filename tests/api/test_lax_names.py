"""td.lax's names against jax.lax in x64: the bitwise and shift functions, the convolution and
window names (their full tables are tests/numpy/test_conv.py and test_window.py), and the error
for a jax.lax name tidu does not have."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

X = np.array([-8, -1, 0, 3, 2**31 - 1, -(2**31)], np.int32)
S = np.array([1, 31, 32, -1, 4, 33], np.int32)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "shift_left",
                                  "shift_right_arithmetic", "shift_right_logical"])
def test_binary_against_jax(name):
    got = td.jit(getattr(td.lax, name))(X, S)
    want = getattr(jax.lax, name)(X, S)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype


def test_bitwise_not_against_jax():
    np.testing.assert_array_equal(td.jit(td.lax.bitwise_not)(X), jax.lax.bitwise_not(X))
    np.testing.assert_array_equal(td.jit(td.lax.bitwise_not)(X > 0), jax.lax.bitwise_not(X > 0))


def test_conv_and_reduce_window_names_are_jax_signatures():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 9, 9)), rng.standard_normal((4, 3, 3, 3))
    got = td.jit(lambda x, w: td.lax.conv_general_dilated(x, w, (2, 1), "SAME"))(x, w)
    np.testing.assert_allclose(got, jax.lax.conv_general_dilated(x, w, (2, 1), "SAME"),
                               rtol=1e-12, atol=1e-12)
    got = td.jit(lambda x: td.lax.reduce_window(x, -np.inf, td.lax.max if hasattr(td.lax, "max")
                                                else "max", (1, 1, 2, 2), (1, 1, 2, 2),
                                                "VALID"))(x)
    want = jax.lax.reduce_window(x, -np.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    np.testing.assert_allclose(got, want)


def test_missing_name_says_so():
    with pytest.raises(AttributeError, match="td.lax has no 'ragged_all_to_all': a ragged.*serves"):
        td.lax.ragged_all_to_all  # noqa: B018
    with pytest.raises(AttributeError, match="td.lax has no 'no_such_name'.*docs/lax.md"):
        td.lax.no_such_name  # noqa: B018
