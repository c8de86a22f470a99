"""jax.numpy names and jax.Array methods added for issue #32, against jax in x64: values under
jit (traced) and outside it (numpy's own), first and second derivatives where differentiable,
and the logical operators on bool values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(0)
X = RNG.normal(size=(4, 5))
XN = X.copy()
XN[1, 2] = XN[3, 0] = np.nan
XN_ALLNAN = XN.copy()
XN_ALLNAN[2, :] = np.nan
V = np.sort(RNG.normal(size=7))
Q = np.array([0.0, 0.1, 0.5, 0.73, 1.0])


def close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, equal_nan=True)


# name -> (f(lib, x), inputs): f is written once for td and jnp
CASES = {
    "nansum": (lambda L, x: L.nansum(x, axis=0), [XN, X]),
    "nansum_all": (lambda L, x: L.nansum(x), [XN]),
    "nanprod": (lambda L, x: L.nanprod(x, axis=1), [XN]),
    "nanmax": (lambda L, x: L.nanmax(x, axis=1), [XN, XN_ALLNAN]),
    "nanmin": (lambda L, x: L.nanmin(x, axis=0, keepdims=True), [XN]),
    "nanmean": (lambda L, x: L.nanmean(x, axis=1), [XN, XN_ALLNAN]),
    "nanvar": (lambda L, x: L.nanvar(x, axis=0), [XN]),
    "nanvar_ddof": (lambda L, x: L.nanvar(x, axis=1, ddof=1), [XN]),
    "nanstd": (lambda L, x: L.nanstd(x), [XN]),
    "nanargmax": (lambda L, x: L.nanargmax(x, axis=1), [XN]),
    "nanargmin": (lambda L, x: L.nanargmin(x, axis=0), [XN]),
    "isclose": (lambda L, x: L.isclose(x, x + 1e-9), [X, XN]),
    "isclose_nan": (lambda L, x: L.isclose(x, x, equal_nan=True), [XN]),
    "isclose_inf": (lambda L, x: L.isclose(x, L.where(x > 0, np.inf, x)), [X]),
    "allclose": (lambda L, x: L.allclose(x, x * (1 + 1e-7)), [X]),
    "count_nonzero": (lambda L, x: L.count_nonzero(L.where(x > 0, x, 0), axis=0), [X]),
    "count_nonzero_bool": (lambda L, x: L.count_nonzero(x > 0.3, axis=1), [X]),
    "ptp": (lambda L, x: L.ptp(x, axis=1), [X]),
    "average": (lambda L, x: L.average(x, axis=1), [X]),
    "average_w": (lambda L, x: L.average(x, axis=1, weights=np.arange(1.0, 6.0)), [X]),
    "average_w_full": (lambda L, x: L.average(x, weights=x * x + 1), [X]),
    "quantile": (lambda L, x: L.quantile(x, Q, axis=1), [X]),
    "quantile_all": (lambda L, x: L.quantile(x, 0.3), [X]),
    "quantile_keep": (lambda L, x: L.quantile(x, Q[1:3], axis=0, keepdims=True), [X]),
    "quantile_nan": (lambda L, x: L.quantile(x, 0.5, axis=1), [XN]),
    "quantile_lower": (lambda L, x: L.quantile(x, Q, axis=1, method="lower"), [X]),
    "quantile_higher": (lambda L, x: L.quantile(x, Q, axis=1, method="higher"), [X]),
    "quantile_nearest": (lambda L, x: L.quantile(x, Q, axis=1, method="nearest"), [X]),
    "quantile_midpoint": (lambda L, x: L.quantile(x, Q, axis=1, method="midpoint"), [X]),
    "percentile": (lambda L, x: L.percentile(x, np.array([5.0, 50.0, 95.0]), axis=0), [X]),
    "median": (lambda L, x: L.median(x, axis=0), [X]),
    "median_all": (lambda L, x: L.median(x), [X]),
    "nanmedian": (lambda L, x: L.nanmedian(x, axis=1), [XN, XN_ALLNAN]),
    "nanquantile": (lambda L, x: L.nanquantile(x, Q, axis=0), [XN]),
    "nanpercentile": (lambda L, x: L.nanpercentile(x, 25.0, axis=1), [XN]),
    "cov": (lambda L, x: L.cov(x), [X]),
    "cov_cols": (lambda L, x: L.cov(x, rowvar=False, bias=True), [X]),
    "cov_y": (lambda L, x: L.cov(x[0], x[1]), [X]),
    "cov_w": (lambda L, x: L.cov(x, fweights=np.array([1, 2, 1, 3, 1]),
                                 aweights=np.array([0.5, 1.0, 2.0, 1.0, 0.25])), [X]),
    "corrcoef": (lambda L, x: L.corrcoef(x), [X]),
    "corrcoef_cols": (lambda L, x: L.corrcoef(x, rowvar=False), [X]),
    "searchsorted": (lambda L, x: L.searchsorted(V, x), [X, XN]),
    "searchsorted_right": (lambda L, x: L.searchsorted(V, L.round(x), side="right"), [X]),
    "searchsorted_ties": (lambda L, x: L.searchsorted(np.array([0.0, 1, 1, 1, 2]),
                                                      L.round(x)), [X]),
    "digitize": (lambda L, x: L.digitize(x, V), [X]),
    "digitize_right": (lambda L, x: L.digitize(x, V, right=True), [X]),
    "digitize_decreasing": (lambda L, x: L.digitize(x, V[::-1]), [X]),
    "interp": (lambda L, x: L.interp(x, V, np.cos(V)), [X]),
    "interp_lr": (lambda L, x: L.interp(x, V, np.cos(V), left=-5.0, right=5.0), [X]),
    "interp_period": (lambda L, x: L.interp(x, V, np.cos(V), period=2.0), [X]),
    "polyval": (lambda L, x: L.polyval(np.array([1.0, -2.0, 0.5, 3.0]), x), [X]),
    "logical_and": (lambda L, x: L.logical_and(x > 0, x < 1), [X]),
    "logical_or": (lambda L, x: L.logical_or(x > 1, x), [X]),
    "logical_xor": (lambda L, x: L.logical_xor(x > 0, x < 0.5), [X]),
    "logical_not": (lambda L, x: L.logical_not(x > 0), [X]),
    "bitwise_bool": (lambda L, x: L.bitwise_xor(L.bitwise_and(x > 0, x < 1),
                                                L.bitwise_or(x > 1, x < -1)), [X]),
    "invert_bool": (lambda L, x: L.invert(x > 0), [X]),
    "operators": (lambda L, x: ((x > 0) & (x < 1)) | ~(x > -1) ^ (x > 0.5), [X]),
    "bool_add_mul": (lambda L, x: ((x > 0) + (x > 1), (x > 0) * (x < 1)), [X]),
    "bool_max_min": (lambda L, x: (L.maximum(x > 0, x > 1), L.minimum(x > 0, x < 1)), [X]),
}

# jax.Array methods: f(x) written once
METHODS = {
    "min": lambda x: x.min(axis=0), "std": lambda x: x.std(ddof=1), "var": lambda x: x.var(1),
    "prod": lambda x: x.prod(axis=1), "argmax": lambda x: x.argmax(axis=0),
    "argmin": lambda x: x.argmin(), "clip": lambda x: x.clip(-0.5, 0.5),
    "round": lambda x: x.round(2), "ravel": lambda x: x.ravel(), "flatten": lambda x: x.flatten(),
    "squeeze": lambda x: x[:1].squeeze(0), "swapaxes": lambda x: x.swapaxes(0, 1),
    "dot": lambda x: x.dot(x.T), "cumsum": lambda x: x.cumsum(axis=1),
    "cumprod": lambda x: x.cumprod(axis=0), "any": lambda x: (x > 1).any(axis=0),
    "all": lambda x: (x > -3).all(), "sort": lambda x: x.sort(axis=0),
    "argsort": lambda x: x.argsort(axis=1), "copy": lambda x: x.copy(),
    "trace": lambda x: x.trace(), "diagonal": lambda x: x.diagonal(1),
    "take": lambda x: x.take(np.array([0, 3]), axis=1), "repeat": lambda x: x.repeat(2, axis=0),
    "ptp": lambda x: x.ptp(axis=0), "conjugate": lambda x: x.conjugate(),
    "mT": lambda x: x.mT, "searchsorted": lambda x: x[0].sort().searchsorted(0.1),
}


def _rows():
    for name, (f, xs) in CASES.items():
        for i, x in enumerate(xs):
            yield pytest.param(f, x, id=f"{name}-{i}")


def _uses_other_td(f):
    """f calls tidu functions other than the one under test (where, round, maximum, ...), which
    need a trace: its eager form is not numpy's."""
    names = set(f.__code__.co_names) - {"L", "np"}
    return len([n for n in names if n not in ("sum", "T") and hasattr(td, n)]) > 1


@pytest.mark.parametrize("f,x", list(_rows()))
def test_values_against_jax(f, x):
    want = jax.tree_util.tree_leaves(f(jnp, jnp.asarray(x)))
    got = jax.tree_util.tree_leaves(td.jit(lambda x: f(td, x))(x))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        close(g, w)
        assert np.asarray(g).dtype == np.asarray(w).dtype or np.asarray(w).dtype.kind in "iu", \
            (np.asarray(g).dtype, np.asarray(w).dtype)
    # outside a trace, numpy's own function: the same values (up to numpy's dtypes; numpy
    # warns about all-NaN slices)
    if _uses_other_td(f):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        eager = jax.tree_util.tree_leaves(f(td, x))
    for g, w in zip(eager, want):
        np.testing.assert_allclose(np.asarray(g, dtype=np.asarray(w).dtype), w, rtol=1e-10,
                                   atol=1e-12, equal_nan=True)


DIFFERENTIABLE = [
    "nansum", "nanprod", "nanmax", "nanmean", "nanvar", "nanstd", "ptp", "average",
    "average_w", "average_w_full", "quantile", "quantile_all", "quantile_midpoint",
    "quantile_lower", "percentile", "median", "nanmedian", "nanquantile", "cov", "cov_cols",
    "cov_w", "corrcoef", "interp", "interp_lr", "interp_period", "polyval",
]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_grads_against_jax(name):
    f, xs = CASES[name]
    x = xs[0]
    w = RNG.normal(size=np.shape(f(np, x)))

    def loss(L):
        return lambda x: L.sum(L.where(L.isnan(f(L, x)), 0.0, f(L, x)) * w)

    close(td.grad(loss(td))(x), jax_value(jax.grad(loss(jnp)), jnp.asarray(x)))
    # second order along a direction (the composites are piecewise polynomial or smooth)
    d = RNG.normal(size=np.shape(x))

    def dd(L, g):
        return lambda t: g(lambda s: loss(L)(x + s * d))(t)

    close(td.grad(dd(td, td.grad))(0.0), jax_value(jax.grad(dd(jnp, jax.grad)), 0.0))


@pytest.mark.parametrize("name", sorted(METHODS))
def test_array_methods_against_jax(name):
    f = METHODS[name]
    close(td.jit(f)(X), f(jnp.asarray(X)))


def test_unknown_attribute_names_the_methods_there_are():
    with pytest.raises(AttributeError, match="no attribute 'frobnicate'.*clip"):
        td.jit(lambda x: x.frobnicate())(X)


INTS_A = np.array([-8, -1, 0, 3, 2**31 - 1, -(2**31)], np.int32)
SHIFTS = np.array([1, 31, 32, -1, 4, 33], np.int32)

BITWISE = {
    "and": lambda L, x, s: x & 5, "or": lambda L, x, s: x | s, "xor": lambda L, x, s: x ^ -1,
    "not": lambda L, x, s: ~x, "lshift": lambda L, x, s: x << s, "rshift": lambda L, x, s: x >> s,
    "int64": lambda L, x, s: (x.astype("int64") << 40) >> (s.astype("int64") + 30),
    "bool_and_int": lambda L, x, s: (x > 0) & 3,
    "functions": lambda L, x, s: (L.bitwise_and(x, s), L.bitwise_or(x, 1), L.invert(s),
                                  L.left_shift(x, 2), L.right_shift(s, 1)),
}


@pytest.mark.parametrize("name", sorted(BITWISE))
def test_integer_bitwise_against_jax(name):
    f = BITWISE[name]
    want = f(jnp, jnp.asarray(INTS_A), jnp.asarray(SHIFTS))
    got = td.jit(lambda x, s: f(td, x, s))(INTS_A, SHIFTS)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        close(g, w)
        assert np.asarray(g).dtype == np.asarray(w).dtype


def test_shift_right_logical_against_lax():
    from tidu.trace.tracer import _emit  # noqa: PLC0415 - the primitive, as jax.lax's

    got = td.jit(lambda x, s: _emit(x._t, td.ops.ShiftRightLogical(), x, s))(INTS_A, SHIFTS)
    close(got, jax.lax.shift_right_logical(jnp.asarray(INTS_A), jnp.asarray(SHIFTS)))


def test_bitwise_on_floats_is_a_type_error():
    with pytest.raises(TypeError, match="integers or bools"):
        td.jit(lambda x: x & 1)(np.ones(3))
    np.testing.assert_array_equal(td.bitwise_and(np.arange(4), 1), [0, 1, 0, 1])  # numpy's


def test_while_loop_condition_with_and():
    # the reproducer: (err > tol) & (i < maxit) in a while_loop condition
    def f(L, x):
        def cond(c):
            return (c[0] > 1e-3) & (c[1] < 100)

        return L.while_loop(cond, lambda c: (c[0] * 0.5, c[1] + 1), (x, 0))

    close(td.jit(lambda x: f(td, x))(1.0)[1], jax.jit(lambda x: f(jax.lax, x))(1.0)[1])


def test_scalar_types_and_constants():
    assert np.dtype(td.float32) == np.float32 and td.dtype(td.int32) == np.int32
    assert td.zeros(2, td.int32).dtype == np.int32
    assert td.jit(lambda x: td.float32(x))(np.ones(2)).dtype == np.float32
    assert td.jit(lambda x: x.astype(td.bool_))(np.arange(2.0)).dtype == np.bool_
    assert td.float32(2.5).dtype == np.float32
    assert (td.pi, td.e, td.inf, td.newaxis) == (np.pi, np.e, np.inf, None)
    assert np.isnan(td.nan) and td.finfo(td.float32).eps == np.finfo(np.float32).eps
    assert td.iinfo(np.int32).max == 2**31 - 1
    assert td.jit(lambda x: x[:, td.newaxis])(np.ones(3)).shape == (3, 1)
