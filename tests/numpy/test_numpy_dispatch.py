"""numpy functions called on traced values run tidu's functions of the same name (values on
both backends and gradients against jax); what tidu lacks, and numpy arguments it cannot honour,
raise one clear error naming the numpy function; concrete conversions say what to do."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tidu as td

jax.config.update("jax_enable_x64", True)

X = np.linspace(0.3, 1.4, 6).reshape(2, 3)
SPD = np.array([[2.0, 0.3], [0.3, 1.5]])

# (name, function written with numpy, the same with jax.numpy, argument)
CASES = [
    ("sin", lambda x: np.sin(x), lambda x: jnp.sin(x), X),
    ("exp log", lambda x: np.exp(x) + np.log(x), lambda x: jnp.exp(x) + jnp.log(x), X),
    ("absolute", lambda x: np.abs(x - 1), lambda x: jnp.abs(x - 1), X),
    ("sum axis", lambda x: np.sum(x, axis=0), lambda x: jnp.sum(x, axis=0), X),
    ("sum keepdims", lambda x: np.sum(x, 1, keepdims=True), lambda x: jnp.sum(x, 1, keepdims=True), X),
    ("mean max", lambda x: np.mean(x) + np.max(x, axis=1), lambda x: jnp.mean(x) + jnp.max(x, axis=1), X),
    ("where", lambda x: np.where(x > 1, x, 0.0), lambda x: jnp.where(x > 1, x, 0.0), X),
    ("array op traced", lambda x: np.ones(3) * x - np.full(3, 2.0) / x,
     lambda x: jnp.ones(3) * x - jnp.full(3, 2.0) / x, X),
    ("ufunc add", lambda x: np.add(np.ones(3), x), lambda x: jnp.add(jnp.ones(3), x), X),
    ("add.reduce", lambda x: np.add.reduce(x), lambda x: jnp.sum(x, axis=0), X),
    ("maximum", lambda x: np.maximum(x, 1.0), lambda x: jnp.maximum(x, 1.0), X),
    ("transpose reshape", lambda x: np.reshape(np.transpose(x), (6,)),
     lambda x: jnp.reshape(jnp.transpose(x), (6,)), X),
    ("concatenate", lambda x: np.concatenate([x, np.ones((1, 3))]),
     lambda x: jnp.concatenate([x, jnp.ones((1, 3))]), X),
    ("matmul", lambda x: np.matmul(x, np.ones((3, 2))) @ np.ones(2),
     lambda x: jnp.matmul(x, jnp.ones((3, 2))) @ jnp.ones(2), X),
    ("numpy scalar", lambda x: np.float64(2.0) * x, lambda x: 2.0 * x, X),
    ("linalg.cholesky", lambda a: np.linalg.cholesky(a @ a.T + np.eye(2)),
     lambda a: jnp.linalg.cholesky(a @ a.T + jnp.eye(2)), SPD),
]


@pytest.mark.parametrize("backend", ["cpu", "xla"])
@pytest.mark.parametrize("name,f,fj,x", CASES, ids=[c[0] for c in CASES])
def test_numpy_function_on_traced_value_matches_jax(name, f, fj, x, backend):
    np.testing.assert_allclose(td.jit(f, backend=backend)(x), fj(x), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("name,f,fj,x", CASES, ids=[c[0] for c in CASES])
def test_numpy_function_gradients_match_jax(name, f, fj, x):
    def loss(f, s):
        return lambda y: s.sum(s.sin(f(y)))

    g = td.grad(loss(f, np))(x)
    np.testing.assert_allclose(g, jax.grad(loss(fj, jnp))(x), rtol=1e-12, atol=1e-13)


def test_numpy_dtype_argument_is_applied():
    out = td.jit(lambda x: np.exp(x, dtype=np.float32))(X)
    assert out.dtype == np.float32


@pytest.mark.parametrize("call,error,match", [  # data-dependent shapes: tidu's (jax's) rule
    (lambda x: np.unique(x), ValueError, "unique: the output size depends on the values.*size="),
    (lambda x: np.nonzero(x), ValueError, "nonzero: the output size depends on the values"),
    (lambda x: np.trim_zeros(x[0]), TypeError, "trim_zeros: the result's shape depends"),
])
def test_numpy_functions_with_data_dependent_shapes_say_so(call, error, match):
    with pytest.raises(error, match=match):
        td.jit(call)(X)


# numpy functions that reach tidu's of the same name since stop 51 (before, only some modules
# of the numpy layer were searched): np.f(traced) is td.f(traced)
MORE = [
    ("median", lambda m, x: m.median(x, axis=1)),
    ("logical", lambda m, x: m.logical_and(x > 0.5, m.logical_not(x > 1.2))),
    ("logical_xor", lambda m, x: m.logical_xor(x > 0.5, x < 1.0)),
    ("bitwise", lambda m, x: m.bitwise_and(m.left_shift((x * 10).astype(np.int64), 2), 12)),
    ("nan reductions", lambda m, x: m.nanmean(x) + m.nansum(x, axis=0) + m.nanmax(x)),
    ("quantile", lambda m, x: m.quantile(x, 0.3) + m.percentile(x, 70)),
    ("isclose", lambda m, x: m.isclose(x, x + 1e-12)),
    ("cov corrcoef", lambda m, x: m.cov(x) + m.corrcoef(x)),
    ("polyval", lambda m, x: m.polyval(x[0], x)),
    ("interp", lambda m, x: m.interp(x, np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0, 2.0]))),
    ("searchsorted", lambda m, x: m.searchsorted(np.array([0.5, 1.0]), x)),
    ("numeric", lambda m, x: m.copysign(x, -1.0) + m.sinc(x) + m.heaviside(x - 1, 0.5)),
    ("construct", lambda m, x: m.rot90(m.vander(x[0], 3))),
    ("arrays", lambda m, x: m.append(m.delete(x, 1, axis=1), x, axis=1)),
    ("calculus", lambda m, x: m.gradient(x[0]) + m.trapezoid(x, axis=1)[0]),
    ("apply_along_axis", lambda m, x: m.apply_along_axis(lambda r: r * r[0], 1, x)),
    ("piecewise", lambda m, x: m.piecewise(x, [x > 1], [lambda v: v * 2, lambda v: v])),
    ("amax ptp average", lambda m, x: m.amax(x, axis=0) + m.ptp(x) + m.average(x, weights=x)),
    ("arccos alias", lambda m, x: m.acos(x / 2) + m.atan2(x, 2.0)),
]


@pytest.mark.parametrize("name,f", MORE, ids=[c[0] for c in MORE])
def test_more_numpy_functions_reach_tidus(name, f):
    got = td.jit(lambda x: f(np, x))(X)
    want = td.jit(lambda x: f(td, x))(X)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want)


def test_every_numpy_function_tidu_has_dispatches():
    """numpy's functions whose name tidu's numpy layer (or tidu.api's numpy names) defines reach
    it; the exceptions take no array tidu could trace, or are not numpy-layer functions."""
    from tidu.numpy import dispatch

    not_dispatched = {
        "save", "savez", "frombuffer", "fromstring", "from_dlpack", "printoptions",
        "get_printoptions", "set_printoptions",  # numpy's own functions, re-exported
        "get_include",  # tidu's C++ headers, not numpy's
        "load",  # td.load reads a saved tidu program, not an .npy file (docs/numpy.md)
        "fromfunction",  # its arguments are a function and a shape: nothing traced to dispatch on
    }
    missed = []
    for n in dir(np):
        fn = getattr(np, n)
        if n.startswith("_") or not callable(fn) or isinstance(fn, type):
            continue
        name = dispatch._UFUNC_ALIASES.get(n, n)
        if hasattr(td, name) and n not in dispatch._OPERATORS and n not in not_dispatched \
                and dispatch._find("", name) is None:
            missed.append(n)
    assert not missed, missed


@pytest.mark.parametrize("call,name", [
    (lambda x: np.sum(x, out=np.zeros(())), r"numpy.sum\(..., out=...\)"),
    (lambda x: np.sin(x, out=np.zeros((2, 3))), r"numpy.sin\(..., out=...\)"),
    (lambda x: np.sin(x, where=x > 0), r"numpy.sin\(..., where=...\)"),
    (lambda x: np.add.outer(x, x), "numpy.add.outer"),
])
def test_numpy_function_tidu_lacks_is_one_clear_error(call, name):
    with pytest.raises(NotImplementedError, match=name + ".* not supported on traced values"):
        td.jit(call)(X)


@pytest.mark.parametrize("call", [
    lambda x: float(x[0, 0]), lambda x: int(x[0, 0]), lambda x: math.sin(x[0, 0]),
    lambda x: x[0, 0].item(), lambda x: complex(x[0, 0]),
])
def test_concrete_value_of_traced_value_says_what_to_do(call):
    with pytest.raises(TypeError, match="traced value has no concrete value.*static_argnums"):
        td.jit(call)(X)


def test_asarray_and_len_of_scalar_are_clear():
    with pytest.raises(TypeError, match="no concrete value to convert to a numpy array"):
        td.jit(lambda x: np.asarray(x))(X)
    with pytest.raises(TypeError, match=r"len\(\) of a traced scalar"):
        td.jit(lambda x: len(x[0, 0]))(X)
    with pytest.raises(ValueError, match=r"item\(\) of a traced value of shape \(2, 3\)"):
        td.jit(lambda x: x.item())(X)


def test_concrete_values_work_in_transforms_outside_jit():
    g = td.grad(lambda x: np.sin(x) * 2 if x.item() > 0 else x)
    assert g(1.0) == pytest.approx(2 * math.cos(1.0))
    assert g(-1.0) == 1.0
    assert td.grad(lambda x: x * float(x))(3.0) == 3.0  # float() is a constant: no derivative
