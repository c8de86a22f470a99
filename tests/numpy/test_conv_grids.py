"""jax's own convolution parameter grids against jax in x64.

The grids are rebuilt here with the generators of jax's ``tests/lax_test.py`` (testConv,
testConvWithGeneralPadding, testConvGeneralDilated, testConvGeneralDilated0D,
testConvPreferredElement, testConvTranspose2DT / 2D / 1D / 0D) and ``tests/lax_autodiff_test.py``
(testConvGeneralDilatedGrad), leaving out the dtypes tidu does not have (float16, bfloat16) and
the device-specific skips.  Values are compared on both backends (exactly for integer and bool
dtypes), gradients (the vjp of both operands with a random cotangent) on both backends, second
derivatives on a smaller sample.

The full grids hold about 47,000 cases, too many to run (each is a compile in tidu and in jax).
Each grid is sampled deterministically: ``_sample`` takes ``n`` cases at indices drawn without
replacement by ``numpy.random.default_rng(seed)`` from the grid in jax's generator order, and
sorts them, so a run checks the same cases every time (the seed and ``n`` are per grid, below).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tidu as td
from tidu.numpy.conv import (
    conv,
    conv_general_dilated,
    conv_transpose,
    conv_with_general_padding,
)

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)

BACKENDS = ("cpu", "xla")


def _sample(grid, n, seed):
    idx = sorted(np.random.default_rng(seed).choice(len(grid), size=min(n, len(grid)),
                                                    replace=False))
    return [grid[i] for i in idx]


def _rand(shape, dtype, rng):
    """jax's rand_small in spirit: small values; integers small enough that no sum overflows
    int8 badly (overflow wraps alike in both anyway), bools random."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(dt)
    if dt.kind == "i":
        return rng.integers(-3, 4, shape).astype(dt)
    if dt.kind == "u":
        return rng.integers(0, 4, shape).astype(dt)
    x = rng.standard_normal(shape)
    if dt.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dt)


def _close(got, want, tol=None):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype,
                                                                 want.shape, want.dtype)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        if tol is None:
            tol = 1e-4 if got.dtype in (np.float32, np.complex64) else 1e-11
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


ALL_DTYPES = ["float32", "float64", "complex64", "complex128", "int8", "int16", "int32",
              "int64", "uint8", "uint16", "uint32", "uint64", "bool"]

# ---- lax_test.py: testConv ----

CONV = [((b, i, 9, 10), (j, i, 4, 5), strides, padding)
        for b, i, j in itertools.product([2, 3], repeat=3)
        for strides in [(1, 1), (1, 2), (2, 1)]
        for padding in ["VALID", "SAME", "SAME_LOWER"]]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", _sample(CONV, 8, 0), ids=str)
def test_conv_grid(case, backend):
    ls, rs, strides, padding = case
    rng = np.random.default_rng(1)
    x, w = _rand(ls, "float64", rng), _rand(rs, "float64", rng)
    got = td.jit(lambda a, b: conv(a, b, strides, padding), backend=backend)(x, w)
    _close(got, lax.conv(x, w, strides, padding))


# ---- testConvWithGeneralPadding ----

GENERAL_PADDING = [((b, i, 9, 10), (j, i, 4, 5), strides, padding, ld, rd)
                   for b, i, j in itertools.product([1, 2, 3], repeat=3)
                   for strides in [(1, 1), (1, 2), (2, 1)]
                   for padding in [((0, 0), (0, 0)), ((1, 2), (2, 0))]
                   for ld in [(1, 1), (1, 2), (2, 2)]
                   for rd in [(1, 1), (1, 2), (2, 2)]]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", _sample(GENERAL_PADDING, 10, 1), ids=str)
def test_conv_with_general_padding_grid(case, backend):
    ls, rs, strides, padding, ld, rd = case
    rng = np.random.default_rng(2)
    x, w = _rand(ls, "float64", rng), _rand(rs, "float64", rng)
    got = td.jit(lambda a, b: conv_with_general_padding(a, b, strides, padding, ld, rd),
                 backend=backend)(x, w)
    _close(got, lax.conv_with_general_padding(x, w, strides, padding, ld, rd))


# ---- testConvGeneralDilated (all dtypes) and testConvGeneralDilated0D ----

DNS = [(("NCHW", "OIHW", "NCHW"), ([0, 1, 2, 3], [0, 1, 2, 3])),
       (("NHWC", "HWIO", "NHWC"), ([0, 2, 3, 1], [2, 3, 1, 0])),
       (("NCHW", "HWIO", "NHWC"), ([0, 1, 2, 3], [2, 3, 1, 0]))]

GENERAL_DILATED = [((b * bg, i * fg, 9, w), (j * fg * bg, i, 4, 5), fg, bg, dn, perms, dtype,
                    strides, padding, ld, rd)
                   for bg, fg in [(1, 1), (2, 1), (1, 2)]
                   for w in [0, 10]
                   for b, i, j in itertools.product([2, 3], repeat=3)
                   for dn, perms in DNS
                   for dtype in ALL_DTYPES
                   for strides in [(1, 1), (2, 1)]
                   for padding in [((1, 2), (2, 0)), ((10, 8), (7, 13))]
                   for ld in [(1, 1), (1, 2), (1, 4)]
                   for rd in [(1, 1), (1, 2), (1, 4)]]

GENERAL_DILATED_0D = [((b * bg, i * fg), (j * fg * bg, i), fg, bg, dtype)
                      for bg, fg in [(1, 1), (2, 1), (1, 2)]
                      for b, i, j in itertools.product([2, 3], repeat=3)
                      for dtype in ALL_DTYPES]


def _gd_case_id(c):
    ls, rs, fg, bg, dn, _, dtype, strides, padding, ld, rd = c
    return f"{ls}-{rs}-g{fg},{bg}-{dn[0]}{dn[1]}{dn[2]}-{dtype}-s{strides}-p{padding}-{ld}-{rd}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", _sample(GENERAL_DILATED, 26, 2), ids=_gd_case_id)
def test_conv_general_dilated_grid(case, backend):
    ls, rs, fg, bg, dn, (lp, rp), dtype, strides, padding, ld, rd = case
    rng = np.random.default_rng(3)
    x = np.transpose(_rand(ls, dtype, rng), lp)
    w = np.transpose(_rand(rs, dtype, rng), rp)

    def f(lib):
        fn = lax.conv_general_dilated if lib == "jax" else conv_general_dilated
        return lambda a, b: fn(a, b, strides, padding, ld, rd, dn, feature_group_count=fg,
                               batch_group_count=bg)

    _close(td.jit(f("td"), backend=backend)(x, w), f("jax")(x, w))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", _sample(GENERAL_DILATED_0D, 12, 3), ids=str)
def test_conv_general_dilated_0d_grid(case, backend):
    ls, rs, fg, bg, dtype = case
    rng = np.random.default_rng(4)
    x, w = _rand(ls, dtype, rng), _rand(rs, dtype, rng)

    def f(lib):
        fn = lax.conv_general_dilated if lib == "jax" else conv_general_dilated
        return lambda a, b: fn(a, b, window_strides=(), padding=(),
                               dimension_numbers=("NC", "OI", "NC"), feature_group_count=fg,
                               batch_group_count=bg)

    _close(td.jit(f("td"), backend=backend)(x, w), f("jax")(x, w))


# ---- testConvPreferredElement (the pairs of jax's preferred_type_combinations tidu has) ----

PREFERRED_PAIRS = [("float32", "float32"), ("float32", "float64"), ("float64", "float64"),
                   ("int8", "int16"), ("int8", "int32"), ("int8", "int64"), ("int16", "int32"),
                   ("int16", "int64"), ("int32", "int32"), ("int32", "int64"),
                   ("int64", "int64"), ("complex64", "complex64"),
                   ("complex64", "complex128"), ("complex128", "complex128"),
                   ("int8", "float32"), ("int8", "float64"), ("int16", "float32"),
                   ("int16", "float64"), ("int32", "float32"), ("int32", "float64"),
                   ("int64", "float64"), ("uint8", "uint16"), ("uint8", "int16"),
                   ("bool", "int32")]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("pair", PREFERRED_PAIRS, ids="-".join)
def test_conv_preferred_element_grid(pair, backend):
    """Inputs (2, 3, 9, 10) x (2, 3, 4, 5), VALID: the result in the preferred dtype equals
    jax's (int8 values near the top of the range, so a sum in int8 would wrap)."""
    dtype, pet = pair
    rng = np.random.default_rng(5)
    if np.dtype(dtype).kind == "i":
        lim = np.iinfo(dtype).max
        x = rng.integers(-lim, lim, (2, 3, 9, 10)).astype(dtype)
        w = rng.integers(-lim, lim, (2, 3, 4, 5)).astype(dtype)
        if np.dtype(pet).kind == "f" and np.dtype(dtype).itemsize >= 4:
            x, w = (x // (1 << 20)).astype(dtype), (w // (1 << 20)).astype(dtype)
    else:
        x, w = _rand((2, 3, 9, 10), dtype, rng), _rand((2, 3, 4, 5), dtype, rng)
        if np.dtype(dtype).kind == "u":
            x, w = (x * 60).astype(dtype), (w * 60).astype(dtype)
    got = td.jit(lambda a, b: conv(a, b, (1, 1), "VALID", preferred_element_type=pet),
                 backend=backend)(x, w)
    # jax's complex64 -> complex128 is accurate to complex64 only (its test says so: tol 1e-5)
    tol = 1e-5 if pair == ("complex64", "complex128") else None
    _close(got, lax.conv(x, w, (1, 1), "VALID", preferred_element_type=pet), tol)


# ---- testConvTranspose2DT / 2D / 1D / 0D ----

PADS_2D = list(itertools.product(itertools.product([0, 1, 2], [0, 1, 2]),
                                 itertools.product([0, 1, 2], [0, 1, 2]))) + ["VALID", "SAME"]
TRANSPOSE = (
    [((b, 9, 10, i), (k, k, j, i), strides, padding, ("NHWC", "HWIO", "NHWC"), rd, True, True)
     for b, i, j, k in itertools.product([2, 3], [2, 3], [2, 3], [3, 4, 5])
     for strides in [(1, 1), (1, 2), (2, 1), (2, 2), (3, 3)] for padding in PADS_2D
     for rd in [None, (2, 2)]]
    + [((b, 9, 10, i), (k, k, i, j), strides, padding, ("NHWC", "HWIO", "NHWC"), rd, False, True)
       for b, i, j, k in itertools.product([2, 3], [2, 3], [2, 3], [3, 4, 5])
       for strides in [(1, 1), (1, 2), (2, 1), (2, 2), (3, 3)] for padding in PADS_2D
       for rd in [None, (2, 2)]]
    + [((b, 10, i), (k, i, j), strides, padding, ("NHC", "HIO", "NHC"), rd, False, False)
       for b, i, j, k in itertools.product([2, 3], [2, 3], [2, 3], [3, 4, 5])
       for strides in [(1,), (2,), (3,)] for padding in ["VALID", "SAME"]
       for rd in [None, (2,)]]
    + [((b, i), (i, j), (), padding, ("NC", "IO", "NC"), rd, False, False)
       for b, i, j in itertools.product([2, 3], [2, 3], [2, 3])
       for padding in ["VALID", "SAME"] for rd in [None, ()]])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", _sample(TRANSPOSE, 14, 4), ids=str)
def test_conv_transpose_grid(case, backend):
    ls, rs, strides, padding, dn, rd, tk, consistent = case
    rng = np.random.default_rng(6)
    x, w = _rand(ls, "float64", rng), _rand(rs, "float64", rng)

    def f(lib):
        fn = lax.conv_transpose if lib == "jax" else conv_transpose
        return lambda a, b: fn(a, b, strides, padding, rhs_dilation=rd, dimension_numbers=dn,
                               transpose_kernel=tk, use_consistent_padding=consistent)

    _close(td.jit(f("td"), backend=backend)(x, w), f("jax")(x, w))


# ---- lax_autodiff_test.py: testConvGeneralDilatedGrad ----

GRAD_DNS = [(("NCHW", "OIHW", "NCHW"), ([0, 1, 2, 3], [0, 1, 2, 3])),
            (("NHWC", "HWIO", "NHWC"), ([0, 2, 3, 1], [2, 3, 1, 0])),
            (("NHWC", "OIHW", "NCHW"), ([0, 2, 3, 1], [0, 1, 2, 3]))]
GRAD = [(ls, (j * bg * fg, i, 1, 2), fg, bg, strides, padding, ld, rd, dn, perms)
        for fg, bg in [(1, 1), (2, 1), (1, 2)]
        for b, i, j in itertools.product([1, 2], repeat=3)
        for ls in [(b * bg, i * fg, 6, 7), (b * bg, i * fg, 0, 4)]
        for strides in [(1, 1), (1, 2), (2, 1)]
        for rd in [(1, 1), (2, 2)]
        for ld in [(1, 1), (2, 1)]
        for padding in ([((0, 0), (0, 0)), ((1, 0), (0, 1))]
                        + ([((0, -1), (0, 0))] if ls[2] != 0 else []))
        for dn, perms in GRAD_DNS]


def _grad_operands(case, seed):
    ls, rs, _, _, _, _, _, _, _, (lp, rp) = case
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(tuple(np.take(ls, lp))),
            rng.standard_normal(tuple(np.take(rs, rp))))


def _grad_conv(case, lib):
    _, _, fg, bg, strides, padding, ld, rd, dn, _ = case
    fn = lax.conv_general_dilated if lib == "jax" else conv_general_dilated
    return lambda a, b: fn(a, b, strides, padding, ld, rd, dn, feature_group_count=fg,
                           batch_group_count=bg)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", _sample(GRAD, 12, 5), ids=str)
def test_conv_grad_grid(case, backend):
    """Both operands' cotangents (the vjp with a random cotangent), as jax's check_grads
    order 1 in reverse mode; jax's own test checks them against finite differences."""
    x, w = _grad_operands(case, 7)
    y = _grad_conv(case, "jax")(x, w)
    ct = np.random.default_rng(8).standard_normal(y.shape)
    want = jax.vjp(_grad_conv(case, "jax"), x, w)[1](ct)
    f = _grad_conv(case, "td")
    got = td.jit(td.grad(lambda a, b: td.sum(f(a, b) * ct), argnums=(0, 1)),
                 backend=backend)(x, w)
    for g, j in zip(got, want):
        _close(g, j)


@pytest.mark.parametrize("case", _sample(GRAD, 6, 6), ids=str)
def test_conv_second_order_grid(case):
    """check_grads order 2: the gradient of <grad of a nonlinear loss, v> in both operands."""
    x, w = _grad_operands(case, 9)
    r = np.random.default_rng(10)
    vx, vw = r.standard_normal(x.shape), r.standard_normal(w.shape)

    def hvp(lib):
        m, grad = (jnp, jax.grad) if lib == "jax" else (td, td.grad)
        f = _grad_conv(case, lib)
        g = grad(lambda a, b: m.sum(m.sin(f(a, b))), argnums=(0, 1))
        return grad(lambda a, b: m.sum(g(a, b)[0] * vx) + m.sum(g(a, b)[1] * vw),
                    argnums=(0, 1))

    want = hvp("jax")(x, w)
    got = td.jit(hvp("td"))(x, w)
    for g, j in zip(got, want):
        _close(g, j)
