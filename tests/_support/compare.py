"""Comparisons shared by the tests against jax and numpy."""

from __future__ import annotations

import numpy as np

import tidu as td


def close(got, want, rtol=1e-10, atol=1e-12):
    """got equals want: same shape; exactly for integers and booleans, to rtol/atol otherwise
    (NaN equal to NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def tree_close(got, want, tol=1e-10):
    """Two pytrees (tidu's result, jax's) with as many leaves, each close to tol."""
    gl, wl = td.tree_util.tree_leaves(got), td.tree_util.tree_leaves(want)
    assert len(gl) == len(wl), (got, want)
    for g, w in zip(gl, wl):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)
