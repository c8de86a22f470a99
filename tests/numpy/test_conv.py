"""Convolution (ops/conv.py, numpy/conv.py) against jax.lax in x64: values on the interpreter and
XLA, first- and second-order derivatives, vmap, over a table of configurations drawn from jax's
lax_test conv cases (strides, SAME/VALID/explicit padding, lhs/rhs dilation, feature and batch
groups, NCHW/NHWC dimension numbers, 1-D/2-D/3-D); numpy's convolve/correlate against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value
from _support.threads import threads
from tidu.numpy.conv import (
    conv,
    conv_dimension_numbers,
    conv_general_dilated,
    conv_transpose,
    conv_with_general_padding,
)

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)

BACKENDS = ("cpu", "xla")
CANON = ("NCHW", "OIHW", "NCHW")


def _spec(nsp, spec):
    """The 2-D spec strings widened to nsp spatial axes (H, W, D)."""
    sp = "HWD"[:nsp]
    return tuple(s if len(s) == nsp + 2 else s.replace("HW", sp) for s in spec)


def _layout(shape, spec, canon):
    """A canonical-order shape (N/O, C/I, spatial...) laid out in `spec`'s order."""
    pos = {c: shape[i] for i, c in enumerate(canon)}
    return tuple(pos[c] for c in spec)


# (id, lhs (N, C, *S), rhs (O, I, *K), strides, padding, lhs_dil, rhs_dil, dn, fg, bg)
CASES = [
    ("2d-valid", (2, 3, 9, 6), (4, 3, 4, 5), (1, 1), "VALID", None, None, CANON, 1, 1),
    ("2d-strided-explicit", (1, 2, 9, 7), (2, 2, 4, 5), (2, 1), [(1, 2), (2, 0)], None, None,
     CANON, 1, 1),
    ("2d-lhs-dil", (2, 1, 9, 5), (2, 1, 4, 5), (1, 2), [(0, 0), (0, 0)], (2, 1), None, CANON,
     1, 1),
    ("2d-rhs-dil-same", (1, 2, 9, 6), (3, 2, 3, 2), (1, 1), "SAME", None, (2, 2), CANON, 1, 1),
    ("2d-all", (2, 2, 9, 6), (2, 2, 4, 3), (2, 1), [(1, 2), (2, 0)], (2, 1), (2, 2), CANON, 1, 1),
    ("2d-nhwc", (2, 3, 8, 6), (4, 3, 3, 3), (1, 2), "SAME", None, None,
     ("NHWC", "HWIO", "NHWC"), 1, 1),
    ("2d-mixed-dn", (1, 2, 7, 6), (3, 2, 3, 2), (2, 2), "SAME_LOWER", None, (1, 2),
     ("NCHW", "HWIO", "NHWC"), 1, 1),
    ("2d-feature-groups", (2, 4, 7, 6), (6, 2, 3, 3), (1, 1), [(1, 1), (0, 2)], None, None,
     CANON, 2, 1),
    ("2d-depthwise-nhwc", (1, 3, 6, 5), (3, 1, 3, 3), (2, 1), "SAME", None, None,
     ("NHWC", "HWIO", "NHWC"), 3, 1),
    ("2d-batch-groups", (4, 2, 6, 5), (6, 2, 3, 2), (1, 1), "VALID", None, None, CANON, 1, 2),
    ("2d-negative-pad", (1, 2, 8, 7), (2, 2, 3, 3), (1, 1), [(-1, 2), (1, -2)], None, None,
     CANON, 1, 1),
    ("1d", (3, 2, 11), (4, 2, 3), (2,), "SAME", None, (2,), ("NCH", "OIH", "NCH"), 1, 1),
    ("1d-nwc-transposed", (2, 2, 7), (3, 2, 4), (1,), [(2, 2)], (3,), None,
     ("NHC", "HIO", "NHC"), 1, 1),
    ("3d", (1, 2, 5, 4, 5), (2, 2, 2, 3, 2), (1, 2, 1), "SAME", None, None,
     ("NCHWD", "OIHWD", "NCHWD"), 1, 1),
]
IDS = [c[0] for c in CASES]


def _operands(case, dtype="float64", seed=0):
    _, ls, rs, _, _, _, _, dn, _, _ = case
    nsp = len(ls) - 2
    dn = _spec(nsp, dn) if isinstance(dn[0], str) else dn
    r = np.random.default_rng(seed)
    x = r.standard_normal(_layout(ls, dn[0], "NC" + "HWD"[:nsp]))
    w = r.standard_normal(_layout(rs, dn[1], "OI" + "HWD"[:nsp]))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * r.standard_normal(x.shape)
        w = w + 1j * r.standard_normal(w.shape)
    return x.astype(dtype), w.astype(dtype), dn


def _fn(case, lib):
    _, _, _, strides, padding, ld, rd, _, fg, bg = case
    f = lax.conv_general_dilated if lib == "jax" else conv_general_dilated

    def call(x, w, dn):
        return f(x, w, strides, padding, lhs_dilation=ld, rhs_dilation=rd,
                 dimension_numbers=dn, feature_group_count=fg, batch_group_count=bg)
    return call


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_match_jax(case, backend):
    x, w, dn = _operands(case)
    want = np.asarray(_fn(case, "jax")(x, w, dn))
    got = td.jit(lambda a, b: _fn(case, "td")(a, b, dn), backend=backend)(x, w)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_numpy_path_matches_jax(case):
    """Outside a trace the front end computes with Conv's numpy reference."""
    x, w, dn = _operands(case)
    want = np.asarray(_fn(case, "jax")(x, w, dn))
    np.testing.assert_allclose(_fn(case, "td")(x, w, dn), want, rtol=1e-12, atol=1e-12)


def _loss(case, lib):
    f = _fn(case, lib)
    m = jnp if lib == "jax" else td
    return lambda x, w, dn: m.sum(m.sin(f(x, w, dn)) * f(x * x, w, dn))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_match_jax(case, backend):
    x, w, dn = _operands(case, seed=1)
    want = jax_value(jax.grad(lambda a, b: _loss(case, "jax")(a, b, dn), argnums=(0, 1)), x, w)
    got = td.jit(td.grad(lambda a, b: _loss(case, "td")(a, b, dn), argnums=(0, 1)),
                 backend=backend)(x, w)
    for g, j in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(j), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_second_order_matches_jax(case):
    x, w, dn = _operands(case, seed=2)
    r = np.random.default_rng(3)
    vx, vw = r.standard_normal(x.shape), r.standard_normal(w.shape)

    def hvp(lib):
        m = jnp if lib == "jax" else td
        grad = jax.grad if lib == "jax" else td.grad
        g = grad(lambda a, b: _loss(case, lib)(a, b, dn), argnums=(0, 1))
        return grad(lambda a, b: m.sum(g(a, b)[0] * vx) + m.sum(g(a, b)[1] * vw),
                    argnums=(0, 1))

    want = hvp("jax")(x, w)
    got = td.jit(hvp("td"))(x, w)
    for g, j in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(j), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("axes", [(0, 0), (0, None), (None, 0)])
@pytest.mark.parametrize("case", [c for c in CASES if c[0] in ("2d-all", "2d-feature-groups",
                                                               "2d-batch-groups", "1d",
                                                               "2d-nhwc")],
                         ids=lambda c: c[0])
def test_vmap_matches_jax(case, axes):
    x, w, dn = _operands(case, seed=4)
    r = np.random.default_rng(5)
    xs = np.stack([x, r.standard_normal(x.shape)]) if axes[0] == 0 else x
    ws = np.stack([w, r.standard_normal(w.shape)]) if axes[1] == 0 else w
    want = jax_value(jax.vmap(lambda a, b: _fn(case, "jax")(a, b, dn), in_axes=axes), xs, ws)
    got = td.jit(td.vmap(lambda a, b: _fn(case, "td")(a, b, dn), in_axes=axes))(xs, ws)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-12)
    # and the gradient of the vmapped function
    gwant = jax_value(jax.grad(lambda a, b: jnp.sum(jnp.sin(jax.vmap(
        lambda p, q: _fn(case, "jax")(p, q, dn), in_axes=axes)(a, b))), argnums=(0, 1)), xs, ws)
    ggot = td.jit(td.grad(lambda a, b: td.sum(td.sin(td.vmap(
        lambda p, q: _fn(case, "td")(p, q, dn), in_axes=axes)(a, b))), argnums=(0, 1)))(xs, ws)
    for g, j in zip(ggot, gwant):
        np.testing.assert_allclose(g, np.asarray(j), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "complex128", "complex64"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_other_dtypes(dtype, backend):
    case = CASES[4]
    x, w, dn = _operands(case, dtype)
    want = np.asarray(_fn(case, "jax")(x, w, dn))
    got = td.jit(lambda a, b: _fn(case, "td")(a, b, dn), backend=backend)(x, w)
    assert got.dtype == np.dtype(dtype)
    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_complex_gradient_follows_the_conj_convention():
    """tidu's gradient of a real loss in a complex z is conj(jax.grad) (DESIGN.md section 5)."""
    case = CASES[7]
    x, w, dn = _operands(case, "complex128", seed=6)
    want = jax.grad(lambda a, b: jnp.sum(jnp.abs(_fn(case, "jax")(a, b, dn)) ** 2),
                    argnums=(0, 1))(x, w)
    got = td.jit(td.grad(lambda a, b: td.sum(td.abs(_fn(case, "td")(a, b, dn)) ** 2),
                         argnums=(0, 1)))(x, w)
    for g, j in zip(got, want):
        np.testing.assert_allclose(g, np.conj(np.asarray(j)), rtol=1e-10, atol=1e-10)


# ---- the other jax names ----


def test_conv_and_general_padding_and_transpose_match_jax():
    r = np.random.default_rng(7)
    x, w = r.standard_normal((2, 3, 8, 7)), r.standard_normal((4, 3, 3, 2))
    f = td.jit(lambda a, b: conv(a, b, (2, 1), "SAME"))
    np.testing.assert_allclose(f(x, w), lax.conv(x, w, (2, 1), "SAME"), rtol=1e-12, atol=1e-12)
    f = td.jit(lambda a, b: conv_with_general_padding(a, b, (1, 2), [(1, 0), (2, 1)], (2, 1),
                                                      (1, 2)))
    np.testing.assert_allclose(
        f(x, w), lax.conv_with_general_padding(x, w, (1, 2), [(1, 0), (2, 1)], (2, 1), (1, 2)),
        rtol=1e-12, atol=1e-12)
    xt, wt = r.standard_normal((2, 5, 6, 3)), r.standard_normal((3, 2, 3, 4))
    for pad in ("SAME", "VALID", [(1, 2), (0, 1)]):
        for tk in (False, True):
            wk = wt if not tk else r.standard_normal((3, 2, 4, 3))
            want = lax.conv_transpose(xt, wk, (2, 2), pad, transpose_kernel=tk)
            got = td.jit(lambda a, b: conv_transpose(a, b, (2, 2), pad, transpose_kernel=tk))(
                xt, wk)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_conv_dimension_numbers_match_jax():
    for dn in [None, ("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"),
               ("NCHW", "HWIO", "NHWC"), ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))]:
        jdn = lax.ConvDimensionNumbers(*dn) if dn and not isinstance(dn[0], str) else dn
        want = lax.conv_dimension_numbers((1, 2, 3, 4), (1, 2, 3, 4), jdn)
        got = conv_dimension_numbers((1, 2, 3, 4), (1, 2, 3, 4), dn)
        assert tuple(map(tuple, got)) == tuple(map(tuple, want))


@pytest.mark.parametrize("bad,err,match", [
    (dict(padding="FULL"), ValueError, "unknown padding 'FULL'"),
    (dict(padding=[(1, 1)]), ValueError, r"padding \[\(1, 1\)\] must be 2 \(low, high\) pairs"),
    (dict(window_strides=(1,)), ValueError, "window_strides .* must have 2 entries"),
    (dict(dimension_numbers=("NCHW", "OIHW")), TypeError, "dimension_numbers"),
    (dict(dimension_numbers=("NCHW", "OIXW", "NCHW")), ValueError, "spatial axes"),
    (dict(feature_group_count=2), ValueError, "lhs feature size 3 is not rhs input features 3"),
])
def test_bad_arguments_name_the_problem(bad, err, match):
    x, w = np.zeros((1, 3, 5, 5)), np.zeros((2, 3, 2, 2))
    kw = dict(window_strides=(1, 1), padding="VALID") | bad
    with pytest.raises(err, match=match):
        td.jit(lambda a, b: conv_general_dilated(a, b, **kw))(x, w)


INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"]


def _int_operands(case, dtype, seed=0):
    """Integers over the dtype's whole range (products and sums wrap), or random bools."""
    x, w, dn = _operands(case, "float64", seed)
    r = np.random.default_rng(seed + 100)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return r.integers(0, 2, x.shape).astype(dt), r.integers(0, 2, w.shape).astype(dt), dn
    info = np.iinfo(dt)
    draw = lambda s: r.integers(info.min, info.max, s, dtype=dt, endpoint=True)  # noqa: E731
    return draw(x.shape), draw(w.shape), dn


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("case", [CASES[4], CASES[7], CASES[9], CASES[13]],
                         ids=lambda c: c[0])
def test_integer_convolutions_equal_jax(case, dtype, backend):
    """Integer and bool convolutions are exact and wrap as jax's (XLA's fixed-width sums); bool
    is the OR of ANDs."""
    x, w, dn = _int_operands(case, dtype)
    want = np.asarray(_fn(case, "jax")(x, w, dn))
    got = td.jit(lambda a, b: _fn(case, "td")(a, b, dn), backend=backend)(x, w)
    assert got.dtype == want.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(_fn(case, "td")(x, w, dn), want)  # the numpy reference


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,pet", [("int8", "int32"), ("int8", "int16"), ("uint8", "int8"),
                                       ("uint16", "uint64"), ("int16", "float64"),
                                       ("bool", "int32"), ("bool", "float32"),
                                       ("float32", "float64"), ("complex64", "complex128")])
def test_preferred_element_type_matches_jax(dtype, pet, backend):
    """int8 inputs accumulating in int32 (etc.): the result has the preferred dtype and jax's
    values."""
    case = CASES[4]
    if np.dtype(dtype).kind in "biu":
        x, w, dn = _int_operands(case, dtype, seed=3)
    else:
        x, w, dn = _operands(case, dtype, seed=3)
    _, _, _, strides, padding, ld, rd, _, fg, bg = case

    def f(lib):
        fn = lax.conv_general_dilated if lib == "jax" else conv_general_dilated
        return lambda a, b: fn(a, b, strides, padding, ld, rd, dn, fg, bg,
                               preferred_element_type=pet)

    want = np.asarray(f("jax")(x, w))
    got = td.jit(f("td"), backend=backend)(x, w)
    assert got.dtype == want.dtype == np.dtype(pet)
    if np.dtype(pet).kind in "iu":
        np.testing.assert_array_equal(got, want)
    else:
        tol = 1e-5 if np.dtype(dtype).itemsize <= 4 and np.dtype(pet).itemsize <= 4 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype,pet,match", [
    ("int32", "int16", "must not be narrower"),
    ("float64", "float32", "must not be narrower"),
    ("int8", "uint16", "signedness"),
    ("float32", "complex64", "cannot accumulate"),
    ("int8", "bool", "cannot accumulate"),
])
def test_bad_preferred_element_type_is_refused_as_jax(dtype, pet, match):
    x, w = np.zeros((1, 1, 3), dtype), np.zeros((1, 1, 2), dtype)
    with pytest.raises(TypeError, match=match):
        td.jit(lambda a, b: conv_general_dilated(a, b, (1,), "VALID",
                                                 preferred_element_type=pet))(x, w)
    with pytest.raises(TypeError):
        lax.conv_general_dilated(x, w, (1,), "VALID", preferred_element_type=pet)


# ---- numpy's convolve / correlate ----


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n,m", [(7, 3), (6, 4), (3, 7), (4, 6), (5, 5), (1, 4), (4, 1)])
@pytest.mark.parametrize("fn", ["convolve", "correlate"])
def test_convolve_correlate_match_numpy(fn, n, m, mode):
    r = np.random.default_rng(n * 10 + m)
    a = r.standard_normal(n) + 1j * r.standard_normal(n)
    v = r.standard_normal(m) + 1j * r.standard_normal(m)
    want = getattr(np, fn)(a, v, mode)
    got = td.jit(lambda p, q: getattr(td, fn)(p, q, mode))(a, v)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # numpy's function on traced values dispatches to tidu's
    got = td.jit(lambda p, q: getattr(np, fn)(p, q, mode))(a.real, v.real)
    np.testing.assert_allclose(got, getattr(np, fn)(a.real, v.real, mode), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", ["convolve", "correlate"])
def test_convolve_of_integers_matches_jax(fn, backend):
    """As jnp's: integer inputs give floating values (jax's to_inexact_dtype: float32 for int8), or with
    preferred_element_type an exact integer convolution (int8 summed in int32 here)."""
    a = np.array([100, -120, 3, 127, -128, 5], np.int8)
    v = np.array([127, 100, -3], np.int8)
    for mode in ("full", "same", "valid"):
        want = np.asarray(getattr(jnp, fn)(a, v, mode))
        got = td.jit(lambda p, q: getattr(td, fn)(p, q, mode), backend=backend)(a, v)
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_array_equal(got, want)
        want = np.asarray(getattr(jnp, fn)(a, v, mode, preferred_element_type=np.int32))
        got = td.jit(lambda p, q: getattr(td, fn)(p, q, mode, preferred_element_type="int32"),
                     backend=backend)(a, v)
        assert got.dtype == want.dtype == np.int32
        np.testing.assert_array_equal(got, want)
        got = getattr(td, fn)(a, v, mode, preferred_element_type="int32")  # outside a trace
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
    b = np.array([True, False, True])
    want = np.asarray(getattr(jnp, fn)(b, b[:2], preferred_element_type=np.int32))
    got = td.jit(lambda p, q: getattr(td, fn)(p, q, preferred_element_type="int32"),
                 backend=backend)(b, b[:2])
    np.testing.assert_array_equal(got, want)


def test_convolve_gradient_matches_jax():
    r = np.random.default_rng(8)
    a, v = r.standard_normal(6), r.standard_normal(3)
    want = jax.grad(lambda p, q: jnp.sum(jnp.convolve(p, q, "same") ** 2), argnums=(0, 1))(a, v)
    got = td.jit(td.grad(lambda p, q: td.sum(td.convolve(p, q, "same") ** 2),
                         argnums=(0, 1)))(a, v)
    for g, j in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(j), rtol=1e-12, atol=1e-12)


def test_one_conv_instruction_per_convolution():
    """The convolution is one Conv node (no Python per window): the jaxpr-like listing of a
    traced 2-D convolution names Conv once."""
    F = td.build(lambda x, w: conv(x, w, (1, 1), "SAME"), x=td.spec((2, 3, 8, 8), "float32"),
                 w=td.spec((4, 3, 3, 3), "float32"))
    assert str(F).count("Conv(") == 1


@pytest.mark.parametrize("threads", [1, 2])
def test_patch_buffers_and_arenas_made_uncleared_keep_first_and_later_values(threads):
    """Each thread's im2col patch buffer grows to the largest chunk asked for without being
    cleared or copied, and arenas of 1 MiB and more are populated when made (vm/pages.hpp):
    convolutions of growing, then shrinking patch matrices (several MB of float64: the
    populated path), and the gradient of the largest, equal jax's on their first and every later
    evaluation, and each evaluation equals the first exactly."""
    old = td.get_num_threads()
    td.set_num_threads(threads)
    rng = np.random.default_rng(3)
    shapes = [((2, 1, 8, 8), (2, 1, 3, 3)), ((4, 2, 16, 16), (4, 2, 3, 3)),
              ((16, 3, 32, 32), (8, 3, 5, 5)), ((3, 2, 12, 10), (5, 2, 3, 3))]
    try:
        for xs, ws in shapes:
            x, w = rng.standard_normal(xs), rng.standard_normal(ws)

            def loss(m, a, b):
                return m.sum(m.tanh(lax.conv_general_dilated(a, b, (1, 1), "SAME") if m is jnp
                                    else conv_general_dilated(a, b, (1, 1), "SAME")) ** 2)

            want_y = np.asarray(lax.conv_general_dilated(x, w, (1, 1), "SAME"))
            want_g = jax.grad(lambda a, b: loss(jnp, a, b), argnums=(0, 1))(x, w)
            f = td.jit(lambda a, b: conv_general_dilated(a, b, (1, 1), "SAME") * 1.0,
                       backend="cpu")
            g = td.jit(td.grad(lambda a, b: loss(td, a, b), argnums=(0, 1)), backend="cpu")
            first_y, first_g = f(x, w), g(x, w)
            np.testing.assert_allclose(first_y, want_y, rtol=1e-12, atol=1e-12)
            for got, want in zip(first_g, want_g):
                np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-10)
            for _ in range(2):
                np.testing.assert_array_equal(f(x, w), first_y)
                for got, first in zip(g(x, w), first_g):
                    np.testing.assert_array_equal(got, first)
    finally:
        td.set_num_threads(old)


# Convolutions whose output is larger than their input (input gradients, transposed
# convolutions) or with few output features: kernels/conv.hpp computes them in the scatter form
# (kernel times input, each product added into the output it reaches) instead of the gather
# form's patch matrix.
# (id, lhs (N, C, *S), rhs (O, I, *K), strides, padding, lhs_dil, rhs_dil, groups)
SCATTER_CASES = [
    ("full-pad", (3, 4, 6, 5), (5, 4, 3, 3), (1, 1), [(2, 2), (2, 2)], None, None, 1),
    ("lenet-input-gradient", (64, 16, 10, 10), (6, 16, 5, 5), (1, 1), [(4, 4), (4, 4)], None,
     None, 1),
    ("lhs-dil", (2, 3, 5, 4), (2, 3, 3, 2), (1, 1), [(2, 2), (1, 1)], (2, 3), None, 1),
    ("lhs-dil-strided", (2, 2, 6, 5), (3, 2, 3, 3), (2, 1), [(2, 1), (2, 2)], (3, 2), None, 1),
    ("rhs-dil-uneven-pad", (1, 2, 4, 5), (2, 2, 2, 3), (1, 1), [(3, 0), (1, 4)], None, (2, 2), 1),
    ("negative-pad", (2, 2, 5, 5), (2, 2, 3, 3), (1, 1), [(-1, 4), (3, 2)], None, None, 1),
    ("groups", (2, 6, 4, 4), (4, 3, 3, 2), (1, 1), [(2, 2), (1, 1)], (2, 1), None, 2),
    ("1d", (3, 2, 7), (4, 2, 4), (1,), [(3, 3)], (2,), None, 1),
    ("3d", (1, 2, 3, 4, 3), (2, 2, 2, 3, 2), (1, 1, 1), [(1, 1), (2, 2), (1, 2)], None, None, 1),
    # the same size out as in, one output feature from six (LeNet's first input gradient)
    ("few-outputs-same", (3, 6, 7, 6), (1, 6, 3, 3), (1, 1), "SAME", None, None, 1),
    ("few-outputs-groups", (2, 8, 5, 5), (2, 4, 3, 3), (1, 1), [(1, 1), (1, 1)], None, None, 2),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
@pytest.mark.parametrize("case", SCATTER_CASES, ids=[c[0] for c in SCATTER_CASES])
def test_convolutions_larger_than_their_input_match_jax(case, dtype, threads):
    """Values and both gradients equal jax's (the gradients are convolutions of the other
    forms), on one thread and two; a later evaluation equals the first bit for bit."""
    _, ls, rs, strides, padding, ld, rd, fg = case
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(ls), rng.standard_normal(rs)
    if dtype.startswith("complex"):
        x, w = x + 1j * rng.standard_normal(ls), w + 1j * rng.standard_normal(rs)
    x, w = x.astype(dtype), w.astype(dtype)

    def f(lib, a, b):
        fn = lax.conv_general_dilated if lib is jnp else conv_general_dilated
        return fn(a, b, strides, padding, lhs_dilation=ld, rhs_dilation=rd,
                  feature_group_count=fg)

    tol = 2e-4 if dtype == "float32" else 1e-11
    want = np.asarray(jax_value(lambda a, b: f(jnp, a, b), x, w))
    sp, pp = np.prod(ls[2:]), np.prod(want.shape[2:])
    assert sp < pp or rs[0] // fg * sp * 2 <= rs[1] * pp  # the scatter form's case
    want_g = jax_value(jax.grad(lambda a, b: jnp.sum(jnp.abs(f(jnp, a, b)) ** 2),
                                argnums=(0, 1)), x, w)
    old = td.get_num_threads()
    td.set_num_threads(threads)
    try:
        y = td.jit(lambda a, b: f(td, a, b), backend="cpu")
        g = td.jit(td.grad(lambda a, b: td.sum(td.abs(f(td, a, b)) ** 2), argnums=(0, 1)),
                   backend="cpu")
        first = y(x, w)
        np.testing.assert_allclose(first, want, rtol=tol, atol=tol * np.abs(want).max())
        np.testing.assert_array_equal(y(x, w), first)
        for got, jw in zip(g(x, w), want_g):
            jw = np.conj(np.asarray(jw))  # tidu's complex convention (DESIGN.md section 5)
            np.testing.assert_allclose(got, jw, rtol=tol, atol=tol * np.abs(jw).max())
    finally:
        td.set_num_threads(old)


# (padding, lhs dilation, rhs dilation, strides, feature groups, batch groups)
NON_FINITE_CASES = [([(2, 2), (2, 2)], None, None, (1, 1), 1, 1),
                    ("SAME", None, None, (1, 1), 1, 1),
                    ("SAME", None, (2, 1), (2, 1), 1, 1),
                    ([(0, 0), (0, 0)], (2, 2), None, (1, 1), 1, 1),
                    ([(1, 1), (1, 1)], (2, 1), (1, 2), (1, 1), 1, 1),
                    ([(-1, 2), (2, -1)], None, None, (1, 1), 1, 1),
                    ("VALID", None, None, (1, 1), 1, 1),
                    ([(1, 1), (0, 1)], None, None, (1, 1), 3, 1),
                    ([(1, 1), (0, 1)], None, None, (1, 1), 1, 2)]


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("case", NON_FINITE_CASES)
def test_a_non_finite_kernel_never_meets_padding_as_in_jax(case, bad, dtype):
    """XLA's convolution never multiplies padding or lhs dilation's holes, so an infinity in the
    kernel makes infinities (or NaN where it meets opposite signs), not 0 * inf = NaN in every
    output whose window reaches padding: the interpreter takes its scatter form (which never
    multiplies them either) for a non-finite kernel, and gives jax's NaNs and infinities; so
    does the numpy reference outside a trace."""
    pad, ld, rd, st, fg, bg = case
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((2, 6, 5, 4)), rng.standard_normal((6, 6 // fg, 3, 3))
    w[1, 0, 0, 1] = bad
    x, w = x.astype(dtype), w.astype(dtype)

    def f(fn, a, b):
        return fn(a, b, st, pad, lhs_dilation=ld, rhs_dilation=rd, feature_group_count=fg,
                  batch_group_count=bg)

    want = np.asarray(jax.jit(lambda a, b: f(lax.conv_general_dilated, a, b))(x, w))
    eager = f(conv_general_dilated, x, w)  # the numpy reference, outside a trace
    np.testing.assert_allclose(eager, want, rtol=1e-12, atol=1e-12, equal_nan=True)
    for backend in BACKENDS:
        got = td.jit(lambda a, b: f(conv_general_dilated, a, b), backend=backend)(x, w)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ls,rs,padding,fg", [
    ((64, 1, 28, 28), (6, 1, 5, 5), "SAME", 1),   # LeNet's first: one input feature
    ((32, 1, 64, 64), (4, 1, 4, 4), "VALID", 1),  # a 61 x 61 window over a 4 x 4 output
    ((3, 4, 32, 32), (4, 1, 3, 3), [(1, 1), (1, 1)], 4),  # depthwise: one feature per group
])
def test_kernel_gradients_of_few_features_split_over_threads(ls, rs, padding, fg, dtype):
    """A kernel gradient is a convolution whose output batch is the input's features: one for
    LeNet's first layer, so its tasks are cut by output position as well. One thread and two
    agree, and both equal jax."""
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal(ls).astype(dtype), rng.standard_normal(rs).astype(dtype)

    def loss(lib, fn):
        return lambda a, b: lib.sum(lib.tanh(fn(a, b, (1, 1), padding,
                                                feature_group_count=fg)) ** 2)

    want = np.asarray(jax_value(jax.grad(loss(jnp, lax.conv_general_dilated), argnums=1), x, w))
    g = td.jit(td.grad(loss(td, conv_general_dilated), argnums=1), backend="cpu")
    with threads(2):
        two = g(x, w)
    with threads(1):
        one = g(x, w)
    tol = 2e-4 if dtype == "float32" else 1e-11
    for got in (two, one):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
    np.testing.assert_allclose(two, one, rtol=tol / 100, atol=tol / 100 * np.abs(want).max())
