"""Reductions over every input dtype against jax.numpy in x64 (and numpy): result dtypes, shapes
and values of sum, mean, var, std, min, max, prod, argmin, argmax, any, all over bool, int32,
int64, float32, float64, complex64 and complex128 inputs, every axis form, keepdims, and var/std's
ddof at and beyond the number of elements.

Where tidu differs from jax x64 on purpose (docs/numpy.md), the table says so and checks numpy
(mean/var/std of bool and int32 are float32, jax's, no longer numpy's float64):
- argmin/argmax of complex inputs order lexicographically (numpy's; jax refuses complex);
- any/all of complex inputs: a purely imaginary element is true (numpy's; jax 0.10 reduces such
  elements as false: jnp.any(np.array([1j])) is False)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)
rng = np.random.default_rng(5)

DTYPES = ("bool", "int32", "int64", "float32", "float64", "complex64", "complex128")
NAMES = ("sum", "mean", "var", "std", "min", "max", "prod", "argmin", "argmax", "any", "all")
AXES = (None, 0, 1, -1, (0, 2), (0, 1, 2))
SHAPE = (3, 4, 2)


def _data(dtype):
    """Small values with ties (first-occurrence rules), zeros (any/all), and for complex equal
    real parts with different imaginary parts (the lexicographic order)."""
    if dtype == "bool":
        return rng.random(SHAPE) > 0.4
    if dtype.startswith("int"):
        return rng.integers(-3, 4, SHAPE).astype(dtype)
    if dtype.startswith("float"):
        return np.round(rng.standard_normal(SHAPE), 1).astype(dtype)
    re = rng.integers(-2, 2, SHAPE)
    im = rng.integers(-2, 2, SHAPE)
    return (re + 1j * im).astype(dtype)


DATA = {dt: _data(dt) for dt in DTYPES}
# documented differences from jax x64: (name, dtype) -> numpy is the reference
NUMPY_ONLY = {(n, dt) for n in ("argmin", "argmax") for dt in ("complex64", "complex128")}
JAX_WRONG = {(n, dt) for n in ("any", "all") for dt in ("complex64", "complex128")}


def _tol(dtype):
    return 2e-5 if dtype in ("float32", "complex64") else 1e-12


def _cases():
    out = []
    for name in NAMES:
        for dt in DTYPES:
            for axis in AXES:
                if name.startswith("arg") and isinstance(axis, tuple):
                    continue
                for keepdims in (False, True):
                    out.append((name, dt, axis, keepdims))
    return out


CASES = _cases()


@pytest.mark.parametrize("name,dtype,axis,keepdims", CASES,
                         ids=[f"{n}-{d}-{a}-{k}" for n, d, a, k in CASES])
def test_reduction_table(name, dtype, axis, keepdims):
    x = DATA[dtype]
    got = np.asarray(td.jit(lambda x: getattr(td, name)(x, axis=axis, keepdims=keepdims))(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want_np = np.asarray(getattr(np, name)(x, axis=axis, keepdims=keepdims))
    if (name, dtype) in NUMPY_ONLY:
        with pytest.raises(TypeError):
            getattr(jnp, name)(jnp.asarray(x), axis=axis, keepdims=keepdims)
        want = want_np
    elif (name, dtype) in JAX_WRONG:
        want = want_np
    else:
        want = np.asarray(getattr(jnp, name)(jnp.asarray(x), axis=axis, keepdims=keepdims))
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape == want_np.shape
    tol = _tol(str(got.dtype))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    if name not in ("sum", "prod", "mean") or dtype != "bool":  # numpy: different int dtypes
        np.testing.assert_allclose(got, want_np, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_ddof_edges(name, dtype, axis):
    """ddof from 0 to N + 1: N - ddof <= 0 gives NaN, as jax (numpy gives inf with a warning)."""
    x = DATA[dtype]
    n = x.size if axis is None else int(np.prod([SHAPE[a] for a in np.atleast_1d(axis)]))
    for ddof in (0, 1, n - 1, n, n + 1):
        got = np.asarray(td.jit(lambda x: getattr(td, name)(x, axis=axis, ddof=ddof))(x))
        want = np.asarray(getattr(jnp, name)(jnp.asarray(x), axis=axis, ddof=ddof))
        assert got.dtype == want.dtype, (ddof, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=2e-6 if want.dtype == np.float32 else 1e-12,
                                   err_msg=f"ddof={ddof}")
        assert np.isnan(got).all() == (n - ddof <= 0)
        # outside a trace: the same values (numpy's, NaN where N - ddof <= 0)
        eager = np.asarray(getattr(td, name)(x, axis=axis, ddof=ddof))
        np.testing.assert_allclose(eager, got, rtol=2e-6 if got.dtype == np.float32 else 1e-12,
                                   atol=1e-6 if got.dtype == np.float32 else 0)


def test_issue_28_reproducers():
    """Issue #28 (10): var/std with N - ddof <= 0 is NaN (was inf); complex min/max/sort order
    lexicographically (min/max raised "complex numbers have no order"); var of bool is float32
    (jax's to_inexact_dtype; it was float64, numpy's)."""
    for f in (td.var, td.std):
        assert np.isnan(f(np.arange(2.), ddof=2)) and np.isnan(jnp.var(np.arange(2.), ddof=2))
        assert np.isnan(td.jit(lambda x, f=f: f(x, ddof=2))(np.arange(2.)))
    z = np.array([1 + 2j, 1 - 1j, -1 + 5j, -1 + 3j, 2 - 7j])
    for name in ("min", "max", "sort", "argmin", "argmax"):
        got = td.jit(getattr(td, name))(z)
        np.testing.assert_array_equal(got, getattr(np, name)(z))
        if not name.startswith("arg"):
            np.testing.assert_array_equal(got, getattr(jnp, name)(z))
    assert td.jit(td.var)(np.array([True, False])).dtype == np.float32  # jax's to_inexact_dtype


def test_complex_extremes_keep_the_element():
    """min/max of complex return the element itself (signed zeros, infinities), NaN wins."""
    z = np.array([complex(0.0, -0.0), complex(0.0, np.inf), complex(-0.0, -np.inf)])
    for name in ("min", "max"):
        got = complex(td.jit(getattr(td, name))(z))
        want = complex(getattr(np, name)(z))
        assert got == want and np.signbit(got.imag) == np.signbit(want.imag), (name, got, want)
    zn = np.array([1 + 1j, complex(np.nan, 0), 0j, complex(0, np.nan)])
    assert np.isnan(complex(td.jit(td.min)(zn)).real)
    assert int(td.jit(td.argmax)(zn)) == int(np.argmax(zn)) == 1


# ---- accumulation dtypes of small integers, at values that overflow int32 ----

BIG = np.array([[2**31 - 1, 1, 5], [7, 2**31 - 2, 2**30]], np.int32)
ACCUMULATE = {  # name -> (tidu function, jax function); each checked against jax (x64)
    "sum": (lambda a: td.sum(a), lambda a: jnp.sum(a)),
    "sum_axis0": (lambda a: td.sum(a, axis=0), lambda a: jnp.sum(a, axis=0)),
    "method_sum": (lambda a: a.sum(axis=1), lambda a: a.sum(axis=1)),
    "mean": (lambda a: td.mean(a), lambda a: jnp.mean(a)),  # float32, as jax
    "trace": (lambda a: td.trace(a[:, :2]), lambda a: jnp.trace(a[:, :2])),
    "trace_offset": (lambda a: td.trace(a, offset=1), lambda a: jnp.trace(a, offset=1)),
    "trace_dtype": (lambda a: td.trace(a[:, :2], dtype="int32"),
                    lambda a: jnp.trace(a[:, :2], dtype="int32")),
    "prod": (lambda a: td.prod(a[:, :2]), lambda a: jnp.prod(a[:, :2])),
    # jax (x64) keeps these in int32 and wraps: so does tidu (docs/numpy.md)
    "cumsum": (lambda a: td.cumsum(a), lambda a: jnp.cumsum(a)),
    "cumprod": (lambda a: td.cumprod(a), lambda a: jnp.cumprod(a)),
    "dot": (lambda a: td.dot(a[0], a[1]), lambda a: jnp.dot(a[0], a[1])),
    "matmul": (lambda a: a @ a.T, lambda a: a @ a.T),
    "einsum": (lambda a: td.einsum("ij,ij->", a, a), lambda a: jnp.einsum("ij,ij->", a, a)),
}


@pytest.mark.parametrize("backend", ["cpu", "xla"])
@pytest.mark.parametrize("name", sorted(ACCUMULATE))
def test_int32_accumulation_follows_jax_x64(name, backend):
    """Was: td.trace of int32 summed in int32 and wrapped (jax: int64, as sum); sum and mean
    of int32 (td.sum gave -2147483648 for [2**31-1, 1]) are checked on the same data."""
    f, g = ACCUMULATE[name]
    got = np.asarray(td.jit(f, backend=backend)(BIG))
    want = np.asarray(jax.jit(g)(jnp.asarray(BIG)))
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind == "f":  # mean: float32 (jax's), summed in another order: within an ulp
        np.testing.assert_allclose(got, want, rtol=2e-7)
    else:
        np.testing.assert_array_equal(got, want)


def test_int32_sum_and_mean_of_the_issue():
    x = np.array([2**31 - 1, 1], np.int32)
    assert int(td.jit(td.sum)(x)) == 2**31 == int(np.sum(x))
    assert float(td.jit(td.mean)(x)) == 2**30 == float(np.mean(x))


@pytest.mark.parametrize("axis", [(0, 2, 3), (1, 3), (0, 2)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_reduced_kept_reduced_axes(axis, dtype):
    """Axes that alternate reduced / kept (a batch norm's (0, 2, 3) over NCHW) take the row
    kernel (elementwise.hpp reduce_rows): sums, max and min against numpy, NaN propagated."""
    x = rng.standard_normal((5, 6, 7, 33)) * 10
    if dtype == "int32":
        x = x.astype(np.int32)
    else:
        x = x.astype(dtype)
        x[2, 3, 4, 5] = np.nan
    for name in ("sum", "max", "min"):
        got = td.jit(lambda a, n=name: getattr(td, n)(a, axis=axis), backend="cpu")(x)
        want = getattr(np, name)(x, axis=axis)
        rtol = 1e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, equal_nan=True,
                                   err_msg=f"{name} over {axis}")
