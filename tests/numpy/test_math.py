"""The elementwise math names (tidu.numpy_math), tidu.nn and tidu.scipy.special against jax.numpy,
jax.nn and jax.scipy.special in x64: values on both backends, grad/jvp/hessian, edge cases
(round half to even, % and // signs, integer division by zero, logsumexp near 700, softmax of
-inf), the scalar fast path, and clear errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value
from tidu.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.special as jss  # noqa: E402

rng = np.random.default_rng(7)


def normal(n=6, dtype="float64"):
    return rng.standard_normal(n).astype(dtype)


def unit(n=6, dtype="float64"):
    return (np.tanh(rng.standard_normal(n)) * 0.8).astype(dtype)


def above1(n=6, dtype="float64"):
    return (np.abs(rng.standard_normal(n)) + 1.3).astype(dtype)


def positive(n=6, dtype="float64"):
    return (np.abs(rng.standard_normal(n)) + 0.3).astype(dtype)


# name -> (tidu function, jax function, argument factory)
UNARY = {
    "floor": (td.floor, jnp.floor, normal), "ceil": (td.ceil, jnp.ceil, normal),
    "round": (td.round, jnp.round, normal), "rint": (td.rint, jnp.rint, normal),
    "trunc": (td.trunc, jnp.trunc, normal), "square": (td.square, jnp.square, normal),
    "reciprocal": (td.reciprocal, jnp.reciprocal, positive),
    "tan": (td.tan, jnp.tan, unit), "arcsin": (td.arcsin, jnp.arcsin, unit),
    "arccos": (td.arccos, jnp.arccos, unit), "arctan": (td.arctan, jnp.arctan, normal),
    "sinh": (td.sinh, jnp.sinh, normal), "cosh": (td.cosh, jnp.cosh, normal),
    "arcsinh": (td.arcsinh, jnp.arcsinh, normal), "arccosh": (td.arccosh, jnp.arccosh, above1),
    "arctanh": (td.arctanh, jnp.arctanh, unit), "log2": (td.log2, jnp.log2, positive),
    "log10": (td.log10, jnp.log10, positive), "exp2": (td.exp2, jnp.exp2, normal),
    "erf": (td.erf, jss.erf, normal), "erfc": (td.erfc, jss.erfc, normal),
    "erfinv": (td.erfinv, jss.erfinv, unit), "cbrt": (td.cbrt, jnp.cbrt, positive),
    "deg2rad": (td.deg2rad, jnp.deg2rad, normal), "rad2deg": (td.rad2deg, jnp.rad2deg, normal),
    "angle": (td.angle, jnp.angle, normal),
    "clip": (lambda x: td.clip(x, -0.5, 0.7), lambda x: jnp.clip(x, -0.5, 0.7), normal),
    "nan_to_num": (td.nan_to_num, jnp.nan_to_num, normal),
    "sigmoid": (td.nn.sigmoid, jax.nn.sigmoid, normal), "relu": (td.nn.relu, jax.nn.relu, normal),
    "relu6": (td.nn.relu6, jax.nn.relu6, lambda n=6, dtype="float64": normal(n, dtype) * 5),
    "softplus": (td.nn.softplus, jax.nn.softplus, normal),
    "log_sigmoid": (td.nn.log_sigmoid, jax.nn.log_sigmoid, normal),
    "silu": (td.nn.silu, jax.nn.silu, normal), "gelu": (td.nn.gelu, jax.nn.gelu, normal),
    "gelu_exact": (lambda x: td.nn.gelu(x, approximate=False),
                   lambda x: jax.nn.gelu(x, approximate=False), normal),
    "elu": (td.nn.elu, jax.nn.elu, normal), "leaky_relu": (td.nn.leaky_relu, jax.nn.leaky_relu, normal),
    "softmax": (td.nn.softmax, jax.nn.softmax, normal),
    "log_softmax": (td.nn.log_softmax, jax.nn.log_softmax, normal),
    "logsumexp": (td.nn.logsumexp, jax.nn.logsumexp, normal),
    "expit": (td.scipy.special.expit, jss.expit, normal),
    "logit": (td.scipy.special.logit, jss.logit, lambda n=6, dtype="float64": (unit(n, dtype) + 1) / 2),
}
BINARY = {
    "arctan2": (td.arctan2, jnp.arctan2, normal), "hypot": (td.hypot, jnp.hypot, normal),
    "logaddexp": (td.logaddexp, jnp.logaddexp, normal),
    "logaddexp2": (td.logaddexp2, jnp.logaddexp2, normal),
    "fmax": (td.fmax, jnp.fmax, normal), "fmin": (td.fmin, jnp.fmin, normal),
    "remainder": (td.remainder, jnp.remainder, normal), "mod": (td.mod, jnp.mod, normal),
    "fmod": (td.fmod, jnp.fmod, normal), "floor_divide": (td.floor_divide, jnp.floor_divide, normal),
    "operator_mod": (lambda x, y: x % y, lambda x, y: x % y, normal),
    "operator_floordiv": (lambda x, y: x // y, lambda x, y: x // y, normal),
}
# zero derivative almost everywhere, or kinks where finite differences do not apply
PIECEWISE = {"floor", "ceil", "round", "rint", "trunc", "floor_divide", "operator_floordiv", "clip",
             "relu", "relu6", "fmax", "fmin", "nan_to_num"}


def close(got, want, dtype):
    tol = 2e-5 if np.dtype(dtype) == np.float32 else 1e-11
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


@pytest.mark.parametrize("backend", ["cpu", "xla"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values_match_jax(name, dtype, backend):
    f, g, make = UNARY[name]
    x = make(6, dtype)
    got = td.jit(f, backend=backend)(x)
    want = jax_value(g, x)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    close(got, want, dtype)


@pytest.mark.parametrize("backend", ["cpu", "xla"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_values_match_jax(name, dtype, backend):
    f, g, make = BINARY[name]
    x, y = make(8, dtype) * 3, make(8, dtype)
    got = td.jit(f, backend=backend)(x, y)
    want = jax_value(g, x, y)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    close(got, want, dtype)


@pytest.mark.parametrize("name", sorted(set(UNARY) - PIECEWISE))
def test_unary_derivatives_match_jax(name):
    f, g, make = UNARY[name]
    x = make(5)
    s = lambda h: (lambda v: h(v).sum())  # noqa: E731
    t = rng.standard_normal(5)
    jgrad, jtan, jhess = jax_value(lambda v, w: (jax.grad(s(g))(v), jax.jvp(g, (v,), (w,))[1],
                                                 jax.hessian(s(g))(v)), x, t)
    close(td.grad(s(f))(x), jgrad, "float64")
    close(td.jvp(f, (x,), (t,))[1], jtan, "float64")
    close(td.hessian(s(f))(x), jhess, "float64")
    check_grads(f, [x], order=2)


@pytest.mark.parametrize("name", sorted(set(BINARY) - PIECEWISE))
def test_binary_derivatives_match_jax(name):
    f, g, make = BINARY[name]
    x, y = make(5) * 3, make(5)
    s = lambda h: (lambda a, b: h(a, b).sum())  # noqa: E731
    jgrad, jhess = jax_value(lambda a, b: (jax.grad(s(g), argnums=(0, 1))(a, b),
                                           jax.hessian(s(g))(a, b)), x, y)
    for got, want in zip(td.grad(s(f), argnums=(0, 1))(x, y), jgrad):
        close(got, want, "float64")
    close(td.hessian(s(f))(x, y), jhess, "float64")
    check_grads(f, [x, y], order=2)


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "floor_divide"])
def test_piecewise_constant_functions_have_zero_derivative(name):
    f = UNARY[name][0] if name in UNARY else (lambda x: td.floor_divide(x, 0.7))
    x = normal(4)
    np.testing.assert_array_equal(td.grad(lambda v: f(v).sum())(x), np.zeros(4))
    np.testing.assert_array_equal(td.jit(td.grad(lambda v: f(v).sum()), backend="xla")(x), np.zeros(4))


def test_derivatives_on_xla_match_the_interpreter():
    def f(x, y):
        return td.sum(td.arctan2(x, y) * td.sinh(x) + td.erf(x) * td.nn.sigmoid(y) + td.fmod(x, 0.3)
                      + td.nn.logsumexp(x * y) + td.arcsinh(y) * td.cbrt(td.abs(x) + 1))

    x, y = normal(5), normal(5)
    h = td.hessian(f)
    close(td.jit(h, backend="xla")(x, y), h(x, y), "float64")
    g = td.grad(f, argnums=(0, 1))
    for got, want in zip(td.jit(g, backend="xla")(x, y), g(x, y)):
        close(got, want, "float64")


# ---- edge cases ----

def test_round_is_half_to_even_as_numpy():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1.25, 0.49999999999999994])
    for backend in ("cpu", "xla"):
        np.testing.assert_array_equal(td.jit(td.round, backend=backend)(x), np.round(x))
        # (XLA divides by the constant 10 as a product with its reciprocal: within an ulp)
        np.testing.assert_allclose(td.jit(lambda v: td.round(v, 1), backend=backend)(x),
                                   np.round(x, 1), rtol=3e-16)
    np.testing.assert_array_equal(td.jit(td.round)(x.astype(np.float32)), np.round(x.astype(np.float32)))


INT_X = np.array([7, -7, 7, -7, 0, 6, -6, np.iinfo(np.int64).min, 5, -5])
INT_Y = np.array([2, 2, -2, -2, 3, -3, 3, -1, 0, 0])


@pytest.mark.parametrize("backend", ["cpu", "xla"])
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_integer_floor_divide_and_remainder_follow_numpy(dtype, backend):
    x, y = INT_X.astype(dtype), INT_Y.astype(dtype)
    if dtype == "int32":
        x[7] = np.iinfo(np.int32).min
    q, r, qq, rr, fm = td.jit(lambda a, b: (a // b, a % b, *divmod(a, b), td.fmod(a, b)),
                              backend=backend)(x, y)
    with np.errstate(divide="ignore", over="ignore"):
        np.testing.assert_array_equal(q, np.floor_divide(x, y))  # x // 0 == 0, as numpy's
        np.testing.assert_array_equal(r, np.remainder(x, y))
        np.testing.assert_array_equal(fm, np.fmod(x, y))
    np.testing.assert_array_equal(qq, q)
    np.testing.assert_array_equal(rr, r)
    assert q.dtype == np.dtype(dtype) and r.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(q * y + r, np.where(y == 0, 0, x))


def test_operators_with_python_scalars_and_reflected_forms():
    x = np.array([7.5, -7.5, 3.0])
    got = td.jit(lambda v: (v // 2, v % 2, 10 // v, 10 % v, divmod(v, 4), divmod(10.0, v)))(x)
    want = (x // 2, x % 2, 10 // x, 10 % x, divmod(x, 4), divmod(10.0, x))
    for g, w in zip(got, want):
        if isinstance(w, tuple):
            for a, b in zip(g, w):
                np.testing.assert_allclose(a, b, rtol=1e-12)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-12)
    a = np.array([5.0, -5.0, 5.0])  # a numpy array on the left defers to the traced value
    q, r = td.jit(lambda v: (a // v, a % v))(x)
    np.testing.assert_allclose(q, a // x)
    np.testing.assert_allclose(r, a % x)
    i = np.array([7, -7, 9])
    q, r = td.jit(lambda v: (v // -2, -17 % v))(i)
    np.testing.assert_array_equal(q, i // -2)
    np.testing.assert_array_equal(r, -17 % i)


def test_float_floor_divide_and_remainder_signs_and_division_by_zero():
    x = np.array([5.5, -5.5, 5.5, -5.5, 1.0, -1.0, 0.0, 4.0])
    y = np.array([2.0, 2.0, -2.0, -2.0, 0.0, 0.0, 0.0, -2.0])
    for backend in ("cpu", "xla"):
        q, r = td.jit(lambda a, b: (a // b, a % b), backend=backend)(x, y)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.testing.assert_array_equal(q, np.floor_divide(x, y))  # +-inf, nan for x // 0
            np.testing.assert_array_equal(np.isnan(r), np.isnan(np.remainder(x, y)))
            np.testing.assert_allclose(r[:4], np.remainder(x, y)[:4])


def test_remainder_gradient_in_the_divisor_as_jax():
    g = td.grad(lambda y: td.remainder(5.0, y))(2.0)
    assert g == pytest.approx(float(jax.grad(lambda y: jnp.remainder(5.0, y))(2.0)))
    g = td.grad(lambda y: td.fmod(-5.0, y), )(2.0)
    assert g == pytest.approx(float(jax.grad(lambda y: jnp.fmod(-5.0, y))(2.0)))


def test_logsumexp_softmax_are_stable_near_700_and_with_minus_inf():
    x = np.array([700.0, 701.0, 699.5])
    assert td.jit(td.nn.logsumexp)(x) == pytest.approx(float(jax.nn.logsumexp(x)), rel=1e-14)
    assert np.isfinite(td.jit(td.nn.logsumexp)(x))
    close(td.jit(td.nn.softmax)(x), jax.nn.softmax(x), "float64")
    close(td.grad(td.nn.logsumexp)(x), jax.grad(jax.nn.logsumexp)(x), "float64")
    m = np.array([-np.inf, 0.0, 1.0])
    close(td.jit(td.nn.softmax)(m), jax.nn.softmax(m), "float64")
    close(td.grad(td.nn.logsumexp)(m), jax.grad(jax.nn.logsumexp)(m), "float64")
    assert td.jit(td.nn.logsumexp)(np.array([-np.inf, -np.inf])) == -np.inf
    lsm = td.jit(td.nn.log_softmax)(np.array([1000.0, 0.0]))
    np.testing.assert_allclose(lsm, [0.0, -1000.0])


@pytest.mark.parametrize("axis", [0, 1, -1, (0, 1)])
def test_softmax_family_over_axes(axis):
    x = rng.standard_normal((3, 4))
    for f, g in ((td.nn.softmax, jax.nn.softmax), (td.nn.log_softmax, jax.nn.log_softmax)):
        close(td.jit(lambda v: f(v, axis=axis))(x), jax_value(lambda v: g(v, axis=axis), x),
              "float64")
        close(td.grad(lambda v: (f(v, axis=axis) * v).sum())(x),
              jax_value(jax.grad(lambda v: (g(v, axis=axis) * v).sum()), x), "float64")
    for keep in (False, True):
        close(td.jit(lambda v: td.nn.logsumexp(v, axis=axis, keepdims=keep))(x),
              jax_value(lambda v: jax.nn.logsumexp(v, axis=axis, keepdims=keep), x), "float64")
    b = rng.standard_normal((3, 4))
    out, sgn = td.jit(lambda v, w: td.nn.logsumexp(v, axis=axis, b=w, return_sign=True))(x, b)
    want, wsgn = jax_value(lambda v, w: jax.nn.logsumexp(v, axis=axis, b=w, return_sign=True),
                           x, b)
    close(out, want, "float64")
    np.testing.assert_array_equal(sgn, wsgn)


def test_softmax_where_mask():
    x = rng.standard_normal((2, 5))
    mask = np.array([[True, False, True, True, False], [False, True, True, True, True]])
    close(td.jit(lambda v: td.nn.softmax(v, where=mask))(x), jax.nn.softmax(x, where=mask), "float64")


def test_one_hot_as_jax():
    idx = np.array([[0, 2], [5, -1]])
    for kw in ({}, {"axis": 0}, {"dtype": np.float32}, {"axis": 1}):
        got = td.jit(lambda i: td.nn.one_hot(i, 3, **kw))(idx)
        want = jax.nn.one_hot(idx, 3, **kw)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError, match="one_hot: indices must be integers"):
        td.jit(lambda v: td.nn.one_hot(v, 3))(np.array([0.0, 1.0]))


def test_predicates_and_nan_to_num():
    x = np.array([1.0, np.nan, np.inf, -np.inf, -0.0])
    z = np.array([1 + 1j, complex(np.nan, 0), complex(0, np.inf)])
    for backend in ("cpu", "xla"):
        f = td.jit(lambda v, w: (td.isnan(v), td.isinf(v), td.isfinite(v), td.isfinite(w),
                                 td.isnan(w), td.isinf(w), td.nan_to_num(v), td.nan_to_num(w),
                                 td.nan_to_num(v, nan=1.0, posinf=2.0, neginf=-2.0)),
                   backend=backend)
        got = f(x, z)
        want = (np.isnan(x), np.isinf(x), np.isfinite(x), np.isfinite(z), np.isnan(z),
                np.isinf(z), np.nan_to_num(x), np.nan_to_num(z),
                np.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0))
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    i = np.array([1, 2])
    np.testing.assert_array_equal(td.jit(lambda v: (td.isfinite(v), td.isnan(v)))(i)[0], [True, True])


def test_fmax_fmin_ignore_nan_and_logaddexp_of_minus_inf():
    x = np.array([np.nan, 1.0, np.nan, 3.0])
    y = np.array([2.0, np.nan, np.nan, -1.0])
    np.testing.assert_array_equal(td.jit(td.fmax)(x, y), np.fmax(x, y))
    np.testing.assert_array_equal(td.jit(td.fmin)(x, y), np.fmin(x, y))
    assert td.jit(td.logaddexp)(-np.inf, -np.inf) == -np.inf
    assert td.jit(td.logaddexp)(800.0, 800.0) == pytest.approx(800 + math.log(2))


def test_erfinv_is_jaxs_and_accurate():
    # float64: XLA's approximation (Giles' three ranges, XLA's log1p, fused multiply-adds), so
    # bit for bit jax's; accurate to a few ulps in the bulk, ~1e-10 relative as |y| -> 1, where
    # y * y has already rounded (docs/random.md)
    y = np.array([-0.999999, -0.9, -1e-8, 0.0, 0.3, 0.99, 0.9999999999, 1.0, -1.0, 1.5, np.nan])
    from scipy.special import erfinv

    got = td.jit(td.erfinv)(y)
    np.testing.assert_array_equal(got, jss.erfinv(y))
    np.testing.assert_allclose(got, erfinv(y), rtol=2e-12)
    grid = np.concatenate([np.linspace(-0.999, 0.999, 20001), 1 - 10.0 ** -np.arange(3, 17)])
    got = td.jit(td.erfinv)(grid)
    np.testing.assert_array_equal(got, jax.jit(jss.erfinv)(grid))
    bulk = np.abs(grid) < 0.9
    np.testing.assert_allclose(got[bulk], erfinv(grid[bulk]), rtol=5e-15)
    np.testing.assert_allclose(got, erfinv(grid), rtol=2e-10)
    # float32: Giles' single-precision polynomial over XLA's float32 log1p, fused: jax's too
    got32 = td.jit(td.erfinv)(y.astype(np.float32))
    np.testing.assert_array_equal(got32, jax.jit(jss.erfinv)(y.astype(np.float32)))


def test_complex_trigonometry_matches_numpy():
    z = (rng.standard_normal(5) + 1j * rng.standard_normal(5)) * 0.5
    for backend in ("cpu", "xla"):
        f = td.jit(lambda w: (td.tan(w), td.arcsin(w), td.arccos(w), td.arctan(w), td.sinh(w),
                              td.cosh(w), td.arcsinh(w), td.arccosh(w + 2), td.arctanh(w),
                              td.angle(w), td.round(w * 3)), backend=backend)
        want = (np.tan(z), np.arcsin(z), np.arccos(z), np.arctan(z), np.sinh(z), np.cosh(z),
                np.arcsinh(z), np.arccosh(z + 2), np.arctanh(z), np.angle(z), np.round(z * 3))
        for g, w in zip(f(z), want):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    g = td.grad(lambda w: td.real(td.sinh(w) * td.arctan(w)))(z[0])
    j = jax.grad(lambda w: jnp.real(jnp.sinh(w) * jnp.arctan(w)), holomorphic=False)(z[0])
    assert g == pytest.approx(np.conj(j))  # tidu's convention: conj of jax's (DESIGN 5)


def test_integer_inputs_follow_jax_dtypes():
    i = np.array([3, -2, 5])
    got = td.jit(lambda v: (td.floor(v), td.round(v), td.trunc(v), td.square(v), td.cbrt(v),
                            td.reciprocal(v), td.arctan2(v, v), td.sinh(v)))(i)
    want = (jnp.floor(i), jnp.round(i), jnp.trunc(i), jnp.square(i), jnp.cbrt(i),
            jnp.reciprocal(i), jnp.arctan2(i, i), jnp.sinh(i))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_scalar_programs_take_the_fast_path_with_the_same_values():
    def f(x, y):
        return (td.floor(x * 3) + td.ceil(y) + td.round(x * 7) + td.tan(x) + td.arctan(y)
                + td.arcsin(x * 0.1) + td.arccos(y * 0.1) + td.sinh(x) + td.cosh(y) + td.arcsinh(x)
                + td.arccosh(y * y + 1.5) + td.arctanh(x * 0.1) + td.erf(x) + td.erfc(y)
                + td.erfinv(x * 0.1) + td.cbrt(y) + td.nn.sigmoid(x) + td.fmod(x, y)
                + td.arctan2(x, y))

    def g(x, y):
        return (math.floor(x * 3) + math.ceil(y) + round(x * 7) + math.tan(x) + math.atan(y)
                + math.asin(x * 0.1) + math.acos(y * 0.1) + math.sinh(x) + math.cosh(y)
                + math.asinh(x) + math.acosh(y * y + 1.5) + math.atanh(x * 0.1) + math.erf(x)
                + math.erfc(y) + float(jss.erfinv(x * 0.1)) + np.cbrt(y) + 1 / (1 + math.exp(-x))
                + math.fmod(x, y) + math.atan2(x, y))

    F = td.build(f, x=td.spec(()), y=td.spec(()))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    assert prog.executable.native.scalar_runs  # the all-scalar fast path took it
    for x, y in [(0.3, -1.7), (-2.5, 0.4), (1.5, 2.5)]:
        (got,) = prog({"x": x, "y": y})
        assert float(got) == pytest.approx(g(x, y), rel=1e-13)
    xs, ys = rng.standard_normal(64), rng.standard_normal(64) + 3
    (batch,) = prog.eval_batch([xs, ys])
    np.testing.assert_allclose(batch, [g(a, b) for a, b in zip(xs, ys)], rtol=1e-12)
    gx = td.grad(f)(0.3, -1.7)
    assert gx == pytest.approx(float(jax.grad(lambda a: f_jax(a, -1.7))(0.3)), rel=1e-10)


def f_jax(x, y):
    return (jnp.tan(x) + jnp.arcsin(x * 0.1) + jnp.sinh(x) + jnp.arcsinh(x) + jnp.arctanh(x * 0.1)
            + jss.erf(x) + jss.erfinv(x * 0.1) + jax.nn.sigmoid(x) + jnp.fmod(x, y)
            + jnp.arctan2(x, y))


# ---- errors ----

def test_integer_outputs_refuse_differentiation_clearly():
    with pytest.raises(TypeError, match="not differentiable"):
        td.grad(lambda i: td.sum(i // 2))(np.array([3, 4]))
    with pytest.raises(TypeError):
        td.grad(lambda x: td.sum(td.isfinite(x)))(np.array([1.0]))


def test_bad_operands_name_the_problem():
    with pytest.raises(TypeError, match="Erf: operand dtype complex128 is not floating"):
        td.jit(td.erf)(np.array([1j]))
    with pytest.raises(TypeError, match="remainder: not defined for complex"):
        td.jit(lambda z: z % 2)(np.array([1j]))
    with pytest.raises(TypeError, match="floor_divide: not defined for complex"):
        td.jit(lambda z: z // 2)(np.array([1j]))
    with pytest.raises(ValueError, match="arctan2: shapes"):
        td.jit(td.arctan2)(np.ones(2), np.ones(3))
    with pytest.raises(TypeError, match="traced values"):
        td.erf(0.5)


# ---- sigmoid of complex values (issue #28, class 11) ----
# Reproducer: td.nn.sigmoid(z) for complex z raised "operand dtype complex128 is not floating";
# jax's lax.logistic (jax.nn.sigmoid) takes complex64/complex128.

_Z = np.array([0.3 + 0.7j, -2.0 + 1.0j, 5.0 - 3.0j, -0.4 - 2.5j, 1e-3 + 0.0j, 12.0 + 0.2j])


@pytest.mark.parametrize("dtype, tol", [("complex128", 1e-12), ("complex64", 2e-5)])
def test_sigmoid_complex_values_jvp_vjp_as_jax(dtype, tol):
    z = _Z.astype(dtype)
    t = ((1 + 2j) * np.linspace(0.5, 1.5, z.size)).astype(dtype)
    got = td.jit(td.nn.sigmoid)(z)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, jax.nn.sigmoid(z), rtol=tol, atol=tol)
    (p, tan), (jp, jtan) = td.jvp(td.nn.sigmoid, (z,), (t,)), jax.jvp(jax.nn.sigmoid, (z,), (t,))
    np.testing.assert_allclose(p, jp, rtol=tol, atol=tol)
    np.testing.assert_allclose(tan, jtan, rtol=tol, atol=tol)
    # tidu's vjp is the adjoint under the real inner product (docs/frontend.md): ct·conj(f'(z)),
    # i.e. conj of jax's vjp at conj(ct)
    (ct,) = td.vjp(td.nn.sigmoid, z)[1](t)
    (jct,) = jax.vjp(jax.nn.sigmoid, z)[1](np.conj(t))
    np.testing.assert_allclose(ct, np.conj(jct), rtol=tol, atol=tol)


@pytest.mark.parametrize("z", list(_Z))
def test_sigmoid_complex_holomorphic_grad_as_jax(z):
    g = td.grad(td.nn.sigmoid, holomorphic=True)(z)
    np.testing.assert_allclose(g, jax_value(jax.grad(jax.nn.sigmoid, holomorphic=True), z),
                               rtol=1e-12, atol=1e-12)
    # the second derivative too (through the composed Exp/Add/Div)
    g2 = td.grad(td.grad(td.nn.sigmoid, holomorphic=True), holomorphic=True)(z)
    j2 = jax_value(jax.grad(jax.grad(jax.nn.sigmoid, holomorphic=True), holomorphic=True), z)
    np.testing.assert_allclose(g2, j2, rtol=1e-12, atol=1e-12)


def test_sigmoid_real_is_still_the_logistic_primitive():
    x = normal()
    np.testing.assert_allclose(td.jit(td.nn.sigmoid)(x), jax.nn.sigmoid(x), rtol=1e-14)
    np.testing.assert_allclose(td.grad(lambda v: td.sum(td.nn.sigmoid(v)))(x),
                               jax.grad(lambda v: jnp.sum(jax.nn.sigmoid(v)))(x), rtol=1e-12)
    from tidu import ops as P
    from tidu.graph.dtypes import aval
    with pytest.raises(TypeError, match="complex128 is not floating"):  # the primitive: real
        P.Logistic().abstract_eval(aval((3,), np.dtype("complex128")))
