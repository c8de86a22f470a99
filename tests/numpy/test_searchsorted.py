"""td.searchsorted (numpy/statistics.py: a branchless binary search over the sorted array padded to
a power of two) against numpy on both backends: every side, lengths around powers of two, ties,
NaN in the array and in the values, infinities, the integer dtypes' extremes (the padding's
value), bool, unsigned, complex (lexicographic), sorter, traced and constant arrays."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

rng = np.random.default_rng(5)


def _sorted(n, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        a = np.sort(rng.standard_normal(n).astype(dt))
        if n > 3:
            a[1] = a[2]  # a tie
        return a
    if dt.kind == "b":
        return np.sort(rng.random(n) < 0.5)
    if dt.kind == "c":
        a = (rng.integers(-3, 3, n) + 1j * rng.integers(-3, 3, n)).astype(dt)
        return np.sort(a)
    info = np.iinfo(dt)
    a = np.sort(rng.integers(max(info.min, -50), min(info.max, 50), n, endpoint=True).astype(dt))
    a[-1:] = info.max  # the padding's value is in the array too
    a[:1] = info.min
    return a


def _values(a, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        extra = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dt)
        return np.concatenate([a, extra, rng.standard_normal(40).astype(dt) * 2]).astype(dt)
    if dt.kind == "b":
        return np.array([False, True, True, False])
    if dt.kind == "c":
        return np.concatenate([a, (rng.integers(-4, 4, 30) + 1j * rng.integers(-4, 4, 30))]).astype(dt)
    info = np.iinfo(dt)
    v = rng.integers(max(info.min, -60), min(info.max, 60), 40, endpoint=True).astype(dt)
    return np.concatenate([a, v, np.array([info.min, info.max], dt)])


LENGTHS = [1, 2, 3, 7, 8, 9, 255, 256, 257]
DTYPES = ["float64", "float32", "int32", "int64", "uint8", "uint32", "int8", "bool", "complex128"]


@pytest.mark.parametrize("backend", ["cpu", "xla"])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_numpy(dtype, side, backend):
    for n in LENGTHS:
        a = _sorted(n, dtype)
        v = _values(a, dtype)
        want = np.searchsorted(a, v, side=side)
        traced = td.jit(lambda a, v: td.searchsorted(a, v, side=side), backend=backend)(a, v)
        const = td.jit(lambda v: td.searchsorted(a, v, side=side), backend=backend)(v)
        for got in (traced, const):
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, want, err_msg=f"n={n}")


def test_nan_in_the_array_sorts_last():
    a = np.array([-1.0, 0.5, 2.0, np.nan, np.nan])
    v = np.array([np.nan, 3.0, -np.inf, np.inf, 0.5])
    for side in ("left", "right"):
        got = td.jit(lambda a, v: td.searchsorted(a, v, side=side), backend="cpu")(a, v)
        np.testing.assert_array_equal(got, np.searchsorted(a, v, side=side))


def test_sorter_and_value_shapes():
    a = rng.standard_normal(37)
    order = np.argsort(a)
    v = rng.standard_normal((4, 5, 3))
    got = td.jit(lambda a, v: td.searchsorted(a, v, sorter=order), backend="cpu")(a, v)
    np.testing.assert_array_equal(got, np.searchsorted(a, v, sorter=order))
    assert got.shape == v.shape


def test_empty_array_and_bad_arguments():
    got = td.jit(lambda v: td.searchsorted(np.zeros(0), v), backend="cpu")(np.ones(3))
    np.testing.assert_array_equal(got, np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="side must be"):
        td.jit(lambda v: td.searchsorted(np.ones(3), v, side="middle"))(np.ones(2))
    with pytest.raises(ValueError, match="method must be"):
        td.jit(lambda v: td.searchsorted(np.ones(3), v, method="bisect"))(np.ones(2))
    with pytest.raises(ValueError, match="must be 1-D"):
        td.jit(lambda v: td.searchsorted(np.ones((2, 2)), v))(np.ones(2))
