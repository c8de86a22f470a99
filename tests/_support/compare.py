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


def jax_value(fn, *args):
    """fn(*args) computed by jax under one jax.jit: op by op, jax compiles an XLA program per
    primitive and shape, and those compiles were most of the suite's time (test_signal.py: 2,057
    compiles, 61 of its 100 s). Eagerly where fn cannot be traced (a shape that depends on
    values, Python control flow on a value, an output that is not an array): the same values."""
    import jax

    untraceable = (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError,
                   jax.errors.TracerIntegerConversionError, jax.errors.TracerArrayConversionError,
                   jax.errors.NonConcreteBooleanIndexError, TypeError)
    try:
        return jax.jit(fn)(*args)
    except untraceable:
        return fn(*args)


def tree_close(got, want, tol=1e-10):
    """Two pytrees (tidu's result, jax's) with as many leaves, each close to tol."""
    gl, wl = td.tree_util.tree_leaves(got), td.tree_util.tree_leaves(want)
    assert len(gl) == len(wl), (got, want)
    for g, w in zip(gl, wl):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


# ---- the linear-algebra tests' helpers (test_linalg_eig, test_linalg_schur) ----

INEXACT_TOL = {"float32": 5e-4, "complex64": 5e-4, "float64": 1e-10, "complex128": 1e-10}


def rand_inexact(rng, shape, dtype):
    """Standard normal values of a real or complex dtype (both parts random for complex)."""
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def close_for(got, want, dtype, scale=1.0):
    """got equals want to INEXACT_TOL[dtype] * scale, relative and absolute."""
    tol = INEXACT_TOL[str(np.dtype(dtype))] * scale
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


def mH(x):
    """The conjugate transpose of the last two axes."""
    return np.conj(np.swapaxes(x, -1, -2))
