"""td.searchsorted (the SearchSorted primitive, ops/search.py and kernels/search.hpp; complex values
by a composite in numpy/statistics.py) against numpy on both backends: every side, lengths around
powers of two, ties, NaN in the array and in the values, infinities, the integer dtypes' extremes,
bool, unsigned, 16-bit floats, complex (lexicographic), sorter, traced and constant arrays; vmap
over rows and values; long searches split over threads; no derivative."""

from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
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


def _rows_search(rows, vals, side):
    return np.stack([np.searchsorted(r, v, side=side) for r, v in zip(rows, vals)])


@pytest.mark.parametrize("backend", ["cpu", "xla"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_vmap_over_rows_values_or_both(side, backend):
    rows = np.sort(rng.standard_normal((4, 33)), axis=1)
    rows[1, -3:] = np.nan  # a row ending in NaNs
    vals = rng.standard_normal((4, 6, 5)) * 2
    vals[2, 1, 1] = np.nan
    search = lambda r, v: td.searchsorted(r, v, side=side)  # noqa: E731
    both = td.jit(td.vmap(search), backend=backend)(rows, vals)
    np.testing.assert_array_equal(both, _rows_search(rows, vals, side))
    one_row = td.jit(td.vmap(search, in_axes=(None, 0)), backend=backend)(rows[1], vals)
    np.testing.assert_array_equal(one_row, _rows_search([rows[1]] * 4, vals, side))
    one_val = td.jit(td.vmap(search, in_axes=(0, None)), backend=backend)(rows, vals[0])
    np.testing.assert_array_equal(one_val, _rows_search(rows, [vals[0]] * 4, side))
    nested = td.jit(td.vmap(td.vmap(search, in_axes=(None, 0)), in_axes=(0, 0)),
                    backend=backend)(rows, vals)
    np.testing.assert_array_equal(nested, _rows_search(rows, vals, side))


@pytest.mark.parametrize("side", ["left", "right"])
def test_nan_values_anywhere_in_a_long_search(side):
    """Values are searched in groups, with a faster compare for a group without NaN: NaN values at
    every position of a group, and rows with NaN entries, give numpy's answer."""
    a = np.sort(np.concatenate([rng.standard_normal(100), [np.inf, -np.inf, np.nan, np.nan]]))
    v = rng.standard_normal(1000) * 2
    v[rng.random(1000) < 0.1] = np.nan
    v[::37] = np.inf
    v[5::41] = a[rng.integers(0, 100, len(v[5::41]))]  # ties
    got = td.jit(lambda a, v: td.searchsorted(a, v, side=side), backend="cpu")(a, v)
    np.testing.assert_array_equal(got, np.searchsorted(a, v, side=side))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sixteen_bit_floats(dtype):
    dt = np.dtype(getattr(ml_dtypes, dtype, dtype))
    a = np.sort(rng.standard_normal(50).astype(np.float32)).astype(dt)
    v = np.concatenate([a, (rng.standard_normal(30) * 2).astype(dt), np.array([np.nan], dt)])
    for side in ("left", "right"):
        want = np.searchsorted(a.astype(np.float32), v.astype(np.float32), side=side)
        for backend in ("cpu", "xla"):
            got = td.jit(lambda a, v: td.searchsorted(a, v, side=side), backend=backend)(a, v)
            np.testing.assert_array_equal(got, want, err_msg=backend)


_THREADS = """
import sys
import numpy as np, tidu as td
rng = np.random.default_rng(1)
rows = np.sort(rng.standard_normal((3, 1001)), axis=1)
vals = rng.standard_normal((3, 70001))
f = td.jit(td.vmap(lambda r, v: td.searchsorted(r, v, side="right")), backend="cpu")
np.save(sys.argv[1], f(rows, vals))
"""


def test_long_searches_split_over_threads_agree(tmp_path):
    """A search long enough to be cut into chunks (which may start and end inside a row) gives
    numpy's indices on one thread and on two."""
    rng1 = np.random.default_rng(1)
    rows = np.sort(rng1.standard_normal((3, 1001)), axis=1)
    vals = rng1.standard_normal((3, 70001))
    want = _rows_search(rows, vals, "right")
    for n in ("1", "2"):
        out = tmp_path / f"t{n}.npy"
        subprocess.run([sys.executable, "-c", _THREADS, str(out)], check=True,
                       env={**os.environ, "TIDU_NUM_THREADS": n})
        np.testing.assert_array_equal(np.load(out), want, err_msg=f"{n} threads")


def test_no_derivative_flows_through_the_indices():
    xp = np.linspace(-2.0, 2.0, 9)
    x = rng.standard_normal(7)
    g = td.grad(lambda x: td.sum(x * td.searchsorted(xp, x)))(x)
    np.testing.assert_array_equal(g, np.searchsorted(xp, x).astype(np.float64))


@pytest.mark.parametrize("backend", ["cpu", "xla"])
def test_interp_with_one_sample_point_and_with_none(backend):
    """interp gathers with its clipped indices unchecked: one sample point (no interval) gives
    numpy's values, left and right of it too; no sample point is numpy's ValueError."""
    xp, fp = np.array([0.25]), np.array([3.0])
    x = np.array([[-1.0, 0.25], [0.3, np.nan]])
    for kw in ({}, {"left": -1.0, "right": 7.0}):
        got = td.jit(lambda x: td.interp(x, xp, fp, **kw), backend=backend)(x)
        np.testing.assert_array_equal(got, np.interp(x, xp, fp, **kw))
    with pytest.raises(ValueError, match="empty"):
        td.jit(lambda x: td.interp(x, np.zeros(0), np.zeros(0)), backend=backend)(x)
