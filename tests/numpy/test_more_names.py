"""The jax.numpy names added for the name-coverage target (issue #32), against jax in x64:
values under jit on both backends (interpreter and XLA), dtypes, first and second derivatives
where differentiable, numpy's answer outside a trace, and the errors jax raises."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(1)
X = RNG.normal(size=(4, 5))
V = RNG.normal(size=6)
W = RNG.normal(size=6)
P3 = np.array([2.0, -3.0, 0.5, 1.5])
P2 = np.array([1.0, 0.25, -2.0])
IX = np.array([[0, 2, 1, 3], [1, 1, 0, 2]])
INTS = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5], np.int64)
INTS2 = np.array([5, 7, 9, 1, 1, 8], np.int64)
INF = np.array([1.0, np.inf, -np.inf, np.nan, -2.0, 0.0])
CPX = np.array([1 + 2j, 3 + 0j, -1 - 1j, 0.5 + 0j])
U8 = np.array([0, 1, 255, 128, 77], np.uint8)
I32 = np.array([-1, 0, 7, -(2**31), 2**31 - 1], np.int32)
PHASE = np.cumsum(RNG.uniform(0.5, 2.5, size=9))
XS = np.cumsum(RNG.uniform(0.2, 1.0, size=5))


def close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, equal_nan=True)


# name -> (f(L, x), input): f is written once for td and jnp (L)
CASES = {
    # aliases
    "add": (lambda L, x: L.add(x, 2 * x), X),
    "subtract": (lambda L, x: L.subtract(x, x[0]), X),
    "multiply": (lambda L, x: L.multiply(x, x), X),
    "divide": (lambda L, x: L.divide(x, 3.0), X),
    "true_divide_int": (lambda L, x: L.true_divide(x, 2), INTS),
    "negative": (lambda L, x: L.negative(x), X),
    "negative_int": (lambda L, x: L.negative(x), I32),
    "positive": (lambda L, x: L.positive(x), X),
    "absolute": (lambda L, x: L.absolute(x), X),
    "fabs": (lambda L, x: L.fabs(x), X),
    "fabs_int": (lambda L, x: L.fabs(x), INTS),
    "equal": (lambda L, x: L.equal(x, L.round(x)), X),
    "not_equal": (lambda L, x: L.not_equal(x, 0.5), X),
    "less": (lambda L, x: L.less(x, 0.1), X),
    "less_equal": (lambda L, x: L.less_equal(x, x[:, :1]), X),
    "greater": (lambda L, x: L.greater(x, -0.2), X),
    "greater_equal": (lambda L, x: L.greater_equal(x, 3), INTS),
    "pow": (lambda L, x: L.pow(L.abs(x) + 0.5, 1.5), X),
    "acos": (lambda L, x: L.acos(L.tanh(x)), X),
    "asin": (lambda L, x: L.asin(L.tanh(x)), X),
    "atan": (lambda L, x: L.atan(x), X),
    "atan2": (lambda L, x: L.atan2(x, x[::-1]), X),
    "acosh": (lambda L, x: L.acosh(L.abs(x) + 1.5), X),
    "asinh": (lambda L, x: L.asinh(x), X),
    "atanh": (lambda L, x: L.atanh(L.tanh(x) * 0.9), X),
    "amax": (lambda L, x: L.amax(x, axis=1), X),
    "amin": (lambda L, x: L.amin(x, axis=0), X),
    "concat": (lambda L, x: L.concat([x, 2 * x], axis=1), X),
    "concat_none": (lambda L, x: L.concat([x, x[0]], axis=None), X),
    "conjugate": (lambda L, x: L.conjugate(x), CPX),
    "permute_dims": (lambda L, x: L.permute_dims(x[None], (2, 0, 1)), X),
    "matrix_transpose": (lambda L, x: L.matrix_transpose(L.stack([x, x])), X),
    "float_power": (lambda L, x: L.float_power(L.abs(x), 2.5), X),
    "float_power_int": (lambda L, x: L.float_power(x, 2), INTS),
    "isposinf": (lambda L, x: L.isposinf(x), INF),
    "isneginf": (lambda L, x: L.isneginf(x), INF),
    "isreal": (lambda L, x: L.isreal(x), CPX),
    "isreal_real": (lambda L, x: L.isreal(x), X),
    "iscomplex": (lambda L, x: L.iscomplex(x), CPX),
    "modf": (lambda L, x: L.modf(3 * x), X),
    "modf_inf": (lambda L, x: L.modf(x), INF),
    "spacing": (lambda L, x: L.spacing(x), INF),
    "spacing_32": (lambda L, x: L.spacing(x.astype(np.float32)), X),
    "cumulative_sum": (lambda L, x: L.cumulative_sum(x, axis=1), X),
    "cumulative_sum_init": (lambda L, x: L.cumulative_sum(x, axis=0, include_initial=True), X),
    "cumulative_prod": (lambda L, x: L.cumulative_prod(x, axis=1, include_initial=True), X),
    "cumulative_sum_1d": (lambda L, x: L.cumulative_sum(x), V),
    "nancumsum": (lambda L, x: L.nancumsum(x), INF),
    "nancumprod": (lambda L, x: L.nancumprod(L.where(L.isinf(x), 2.0, x)), INF),
    "copy": (lambda L, x: L.copy(x) * 2, X),
    # arrays
    "append": (lambda L, x: L.append(x, x[:1], axis=0), X),
    "append_flat": (lambda L, x: L.append(x, 1.0), X),
    "insert": (lambda L, x: L.insert(x, 2, 7.0, axis=1), X),
    "insert_many": (lambda L, x: L.insert(x, np.array([1, 1, 3]), x[:3]), V),
    "insert_row": (lambda L, x: L.insert(x, 1, x[0], axis=0), X),
    "insert_slice": (lambda L, x: L.insert(x, slice(0, 4, 2), -1.0, axis=1), X),
    "delete": (lambda L, x: L.delete(x, np.array([0, 2]), axis=1), X),
    "delete_flat": (lambda L, x: L.delete(x, -1), X),
    "delete_slice": (lambda L, x: L.delete(x, slice(1, None, 2), axis=0), X),
    "resize": (lambda L, x: L.resize(x, (3, 9)), X),
    "diagflat": (lambda L, x: L.diagflat(x[:2, :2], k=1), X),
    "fill_diagonal": (lambda L, x: L.fill_diagonal(x, 9.0, inplace=False), X),
    "fill_diagonal_v": (lambda L, x: L.fill_diagonal(L.concatenate([x, x]), x[0, :3],
                                                     inplace=False), X),
    "broadcast_arrays": (lambda L, x: L.broadcast_arrays(x, x[0], 1.0), X),
    "unstack": (lambda L, x: L.unstack(x, axis=1), X),
    "hsplit": (lambda L, x: L.hsplit(x[:, :4], 2), X),
    "vsplit": (lambda L, x: L.vsplit(x, [1, 3]), X),
    "dsplit": (lambda L, x: L.dsplit(x.reshape(2, 2, 5), [2]), X),
    "rollaxis": (lambda L, x: L.rollaxis(x.reshape(2, 2, 5), 2, 0), X),
    "rollaxis_end": (lambda L, x: L.rollaxis(x.reshape(2, 2, 5), 0, 3), X),
    "choose_clip": (lambda L, x: L.choose(np.array([0, 3, 1, -1, 2, 1]), [x, -x, x * x],
                                          mode="clip"), V),
    "choose_wrap": (lambda L, x: L.choose(np.array([0, 3, 1, -1, 2, 1]), [x, -x, 2.0],
                                          mode="wrap"), V),
    "compress_size": (lambda L, x: L.compress(x[0] > 0, x, axis=1, size=4, fill_value=-9), X),
    "compress_static": (lambda L, x: L.compress(np.array([True, False, True]), x, axis=0), X),
    "extract": (lambda L, x: L.extract(x > 0, x, size=12), X),
    "place": (lambda L, x: L.place(x, x > 0, np.array([7.0, 8.0]), inplace=False), X),
    "put": (lambda L, x: L.put(x, np.array([0, 7, 25, -2]), x[0, :4], inplace=False), X),
    "put_clip": (lambda L, x: L.put(x, np.array([0, 7, 25, -2]), 5.0, mode="clip",
                                    inplace=False), X),
    "put_wrap": (lambda L, x: L.put(x, np.array([0, 7, 25, -2]), 5.0, mode="wrap",
                                    inplace=False), X),
    "put_far": (lambda L, x: L.put(x, np.array([-1, -7, -25, -40, 99]), x[0], inplace=False), X),
    "ravel_multi_index": (lambda L, x: L.ravel_multi_index((x[0], x[1]), (3, 4), mode="clip"),
                          IX),
    "ravel_multi_index_f": (lambda L, x: L.ravel_multi_index((x[0], x[1]), (2, 3), mode="wrap",
                                                             order="F"), IX),
    "unravel_index": (lambda L, x: L.unravel_index(x, (3, 4)),
                      np.array([0, 5, 11, 12, 40, -1, -3, 7])),
    "r_": (lambda L, x: L.r_[x, 0.0, x[:2]], V),
    "c_": (lambda L, x: L.c_[x, 2 * x], V),
    "indices_mul": (lambda L, x: x * L.indices((4, 5))[1], X),
    "mgrid_mul": (lambda L, x: x * L.mgrid[0:4, 0:5][0], X),
    # calculus
    "ediff1d": (lambda L, x: L.ediff1d(x, to_begin=np.array([-1.0]), to_end=2.0), X),
    "gradient": (lambda L, x: L.gradient(x), X),
    "gradient_axis": (lambda L, x: L.gradient(x, 0.5, axis=1), X),
    "gradient_coords": (lambda L, x: L.gradient(x[0], np.cumsum(np.arange(1.0, 6.0))), X),
    "trapezoid": (lambda L, x: L.trapezoid(x, axis=0), X),
    "trapezoid_x": (lambda L, x: L.trapezoid(x, np.cumsum(np.arange(1.0, 6.0)), axis=1), X),
    "unwrap": (lambda L, x: L.unwrap(x), PHASE),
    "unwrap_period": (lambda L, x: L.unwrap(x, period=4.0), PHASE),
    "vecdot": (lambda L, x: L.vecdot(x, x[::-1]), X),
    "vecdot_c": (lambda L, x: L.vecdot(x, x * 2j + 1), CPX),
    "matvec": (lambda L, x: L.matvec(L.stack([x, 2 * x]), x[0]), X),
    "vecmat": (lambda L, x: L.vecmat(x[:, 0], x), X),
    "array_equal": (lambda L, x: L.array_equal(x, x * 1), X),
    "array_equal_not": (lambda L, x: L.array_equal(x, x + 1), X),
    "array_equal_shape": (lambda L, x: L.array_equal(x, x[0]), X),
    "array_equal_nan": (lambda L, x: L.array_equal(x, x, equal_nan=True), INF),
    "array_equiv": (lambda L, x: L.array_equiv(x, x[0]), np.ones((3, 4))),
    # polynomials
    "polyadd": (lambda L, x: L.polyadd(x, P2), P3),
    "polysub": (lambda L, x: L.polysub(P2, x), P3),
    "polymul": (lambda L, x: L.polymul(x, P2), P3),
    "polyder": (lambda L, x: L.polyder(x), P3),
    "polyder2": (lambda L, x: L.polyder(x, 2), P3),
    "polyint": (lambda L, x: L.polyint(x), P3),
    "polyint_k": (lambda L, x: L.polyint(x, 2, k=np.array([1.0, -2.0])), P3),
    "polydiv": (lambda L, x: L.polydiv(x, P2), P3),
    "poly": (lambda L, x: L.poly(x), P3),
    # sets and partial sorts
    "isin": (lambda L, x: L.isin(x, INTS2), INTS),
    "isin_invert": (lambda L, x: L.isin(x, INTS2, invert=True), INTS),
    "isin_sort": (lambda L, x: L.isin(x, np.concatenate([INTS2, INTS2 + 20, INTS2 * 3, [-3]]),
                                      method="sort"), INTS),
    "isin_auto_float": (lambda L, x: L.isin(x, np.concatenate([x[1], x[2, :3], [np.nan] * 20])),
                        np.where(X > 1, np.nan, X)),
    "isin_2d": (lambda L, x: L.isin(x.reshape(2, -1)[:, :5], x.reshape(-1)[::3]), X),
    "union1d": (lambda L, x: L.union1d(x, INTS2, size=10), INTS),
    "intersect1d": (lambda L, x: L.intersect1d(x, INTS2, size=4), INTS),
    "intersect1d_fill": (lambda L, x: L.intersect1d(x, INTS2, size=6, fill_value=-1), INTS),
    "setdiff1d": (lambda L, x: L.setdiff1d(x, INTS2, size=6), INTS),
    "setxor1d": (lambda L, x: L.setxor1d(x, INTS2, size=8), INTS),
    "unique_values": (lambda L, x: L.unique_values(x, size=7), INTS),
    "unique_counts": (lambda L, x: tuple(L.unique_counts(x, size=7)), INTS),
    "unique_inverse": (lambda L, x: tuple(L.unique_inverse(x.reshape(1, -1), size=7)), INTS),
    "unique_all": (lambda L, x: tuple(L.unique_all(x, size=9)), INTS),
    "partition": (lambda L, x: L.partition(x, 2, axis=1), X),
    "partition_int": (lambda L, x: L.partition(x, 4), INTS),
    "argpartition": (lambda L, x: L.argpartition(x, 1, axis=0), X),
    "sort_complex": (lambda L, x: L.sort_complex(x), X),
    "sort_complex_c": (lambda L, x: L.sort_complex(x), CPX),
    # windows and bits
    "i0": (lambda L, x: L.i0(x), X),
    "kaiser": (lambda L, x: L.kaiser(7, x[0, 0] ** 2 + 1) * L.hamming(7), X),
    "windows": (lambda L, x: x[0, 0] * L.stack([L.hanning(6), L.blackman(6), L.bartlett(6)]),
                X),
    "bitwise_count": (lambda L, x: L.bitwise_count(x), I32),
    "bitwise_count_u8": (lambda L, x: L.bitwise_count(x), U8),
    "bitwise_count_64": (lambda L, x: L.bitwise_count(x), np.array(
        [-1, 0, 2**63 - 1, -(2**63), 0x5A5A5A5A5A5A5A5A, -12345678901], np.int64)),
    "bitwise_count_u64": (lambda L, x: L.bitwise_count(x), np.array(
        [2**64 - 1, 0, 2**63, 0xF0F0F0F0F0F0F0F0, 12345678901], np.uint64)),
    "bitwise_count_16": (lambda L, x: L.bitwise_count(x), np.array(
        [-1, 0, 2**15 - 1, -(2**15), 0x5A5A, -1234], np.int16)),
    "bitwise_count_bool": (lambda L, x: L.bitwise_count(x > 0), X),
    "packbits": (lambda L, x: L.packbits(x > 0, axis=1), X),
    "packbits_little": (lambda L, x: L.packbits(x > 0, bitorder="little"), X),
    "unpackbits": (lambda L, x: L.unpackbits(x), U8),
    "unpackbits_count": (lambda L, x: L.unpackbits(x.reshape(1, 5), axis=1, count=-3,
                                                   bitorder="little"), U8),
    # histograms and mapping
    "histogram_bin_edges": (lambda L, x: L.histogram_bin_edges(x, bins=4), X),
    "histogramdd": (lambda L, x: L.histogramdd(x[:, :2], bins=3)[0], X.T),
    "histogram2d": (lambda L, x: L.histogram2d(x[0], x[1], bins=(3, 2))[0], X),
    "histogram2d_density": (lambda L, x: L.histogram2d(x[0], x[1], bins=2, density=True)[0], X),
    "apply_along_axis": (lambda L, x: L.apply_along_axis(lambda r: r * L.sum(r), 1, x), X),
    "apply_over_axes": (lambda L, x: L.apply_over_axes(L.sum, x.reshape(2, 2, 5), [0, 2]), X),
    "vectorize": (lambda L, x: L.vectorize(lambda a, b: a * b + 1)(x, x[0]), X),
    "vectorize_sig": (lambda L, x: L.vectorize(lambda a, b: L.sum(a * b), signature="(n),(n)->()")(
        x, x[::-1]), X),
    "piecewise": (lambda L, x: L.piecewise(x, [x < -0.5, x > 0.5], [lambda v: v * v, 1.0,
                                                                     lambda v: -v]), X),
    "fromfunction": (lambda L, x: x * L.fromfunction(lambda i, j: i + 2 * j, (4, 5)), X),
    "result_type": (lambda L, x: L.zeros(2, L.result_type(x, np.float32)) + x[0, :2], X),
}

DIFFERENTIABLE = [
    "add", "subtract", "divide", "negative", "absolute", "pow", "acos", "asin", "atan", "atan2",
    "acosh", "asinh", "atanh", "amax", "amin", "concat", "permute_dims", "matrix_transpose",
    "float_power", "modf", "cumulative_sum_init", "cumulative_prod", "append", "insert",
    "insert_many", "delete", "resize", "diagflat", "fill_diagonal", "unstack", "choose_clip",
    "compress_size", "place", "put", "ediff1d", "gradient", "gradient_coords", "trapezoid",
    "trapezoid_x", "unwrap", "vecdot", "matvec", "vecmat", "polyadd", "polymul", "polyder",
    "polyint_k", "polydiv", "poly", "partition", "i0", "kaiser", "apply_along_axis",
    "vectorize_sig", "piecewise", "r_", "c_",
]


def _leaves(y):
    return jax.tree_util.tree_leaves(y)


@pytest.mark.parametrize("backend", ["cpu", "xla"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_against_jax(name, backend):
    f, x = CASES[name]
    want = _leaves(jax_value(lambda x: f(jnp, x), jnp.asarray(x)))
    got = _leaves(td.jit(lambda x: f(td, x), backend=backend)(x))
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        close(g, w)
        assert np.asarray(g).dtype == np.asarray(w).dtype, (np.asarray(g).dtype,
                                                             np.asarray(w).dtype)


def _loss(L, f):
    def loss(x):
        out = 0.0
        for k, y in enumerate(_leaves(f(L, x))):
            if np.dtype(y.dtype).kind in "fc":
                y = L.real(y) if np.dtype(y.dtype).kind == "c" else y
                out = out + L.sum(L.sin(y * (1.0 + 0.1 * k)))
        return out

    return loss


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_derivatives_against_jax(name):
    f, x = CASES[name]
    close(td.grad(_loss(td, f))(x), jax_value(jax.grad(_loss(jnp, f)), jnp.asarray(x)))
    d = RNG.normal(size=np.shape(x))

    def dd(L, g):
        return lambda s: g(lambda s: _loss(L, f)(x + s * d))(s)

    close(td.grad(dd(td, td.grad))(0.0), jax_value(jax.grad(dd(jnp, jax.grad)), 0.0))


OUTSIDE = ["add", "fabs", "modf", "append", "insert", "delete", "resize", "diagflat",
           "hsplit", "rollaxis", "ediff1d", "unwrap", "polyadd", "polysub", "polyder", "i0",
           "histogram_bin_edges", "isposinf", "spacing", "concat", "concat_none", "permute_dims",
           "matrix_transpose", "cumulative_sum", "cumulative_sum_init", "cumulative_prod",
           "vecdot", "vecdot_c", "matvec", "vecmat", "partition", "argpartition", "isin",
           "gradient", "trapezoid_x", "unstack", "broadcast_arrays"]


@pytest.mark.parametrize("name", OUTSIDE)
def test_outside_a_trace_numpy_answers(name):
    f, x = CASES[name]
    got = _leaves(f(td, x))
    assert all(isinstance(g, (np.ndarray, np.generic)) for g in got)
    for g, w in zip(got, _leaves(f(np, x))):
        close(g, w)


def test_dtype_functions():
    assert td.promote_types(td.int32, td.float32) == jnp.promote_types(jnp.int32, jnp.float32)
    assert td.result_type(np.ones(2, np.float32), 1.0) == np.float32
    assert td.issubdtype(td.float32, td.floating) and not td.issubdtype(td.int8, td.floating)
    assert td.isdtype(td.int8, "signed integer") and td.isdtype(np.uint8, ("bool", "integral"))
    assert not td.isdtype(td.float32, "complex floating")
    with pytest.raises(ValueError, match="unknown kind"):
        td.isdtype(td.float32, "floaty")
    assert td.can_cast(td.int8, td.int16) and not td.can_cast(td.float64, td.int8)
    assert td.dtype(td.double) == np.float64 and td.dtype(td.csingle) == np.complex64
    assert td.dtype(td.int_) == np.int64 and td.dtype(td.uint) == np.uint64
    assert td.zeros(2, td.bool).dtype == np.bool_
    assert isinstance(np.ones(2), td.ndarray) and not isinstance([1.0], td.ndarray)
    td.jit(lambda x: (isinstance(x, td.ndarray) and td.isscalar(x[0]) and td.iterable(x)
                      and not td.isscalar(x) and td.iscomplexobj(x * 1j)
                      and td.isrealobj(x)) or 1 / 0)(np.ones(2))
    assert td.broadcast_shapes((3, 1), (4,)) == (3, 4)
    with td.printoptions(precision=2):
        assert td.get_printoptions()["precision"] == 2
    assert td.s_[1:2] == np.s_[1:2] and td.index_exp[3] == (3,)
    r, c = td.mask_indices(3, td.triu)
    np.testing.assert_array_equal(r, np.mask_indices(3, np.triu)[0])
    np.testing.assert_array_equal(td.trim_zeros(np.array([0, 0, 1, 2, 0])), [1, 2])
    np.testing.assert_array_equal(td.ogrid[0:3], np.arange(3))


def test_errors_name_the_problem():
    x = np.ones((3, 3))
    with pytest.raises(NotImplementedError, match="wrap=True"):
        td.jit(lambda x: td.fill_diagonal(x, 0.0, wrap=True, inplace=False))(x)
    with pytest.raises(ValueError, match="inplace=False"):
        td.jit(lambda x: td.fill_diagonal(x, 0.0))(x)
    with pytest.raises(ValueError, match="mode='wrap' or mode='clip'"):
        td.jit(lambda i: td.choose(i, [x, x]))(np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="size="):
        td.jit(lambda x: td.compress(x[0] > 0, x))(x)
    with pytest.raises(ValueError, match="size"):
        td.jit(lambda x: td.union1d(x, x))(x)
    with pytest.raises(TypeError, match="concrete"):
        td.jit(lambda x: td.trim_zeros(x))(x[0])
    with pytest.raises(ValueError, match="strip_zeros=False"):
        td.jit(lambda p: td.roots(p))(P3)
    with pytest.raises(NotImplementedError, match="not pure"):
        td.fromiter(iter([1, 2]), float)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        td.jit(lambda v: td.matrix_transpose(v))(V)
    with pytest.raises(TypeError, match="bool"):
        td.jit(lambda v: td.negative(v > 0))(V)
    with pytest.raises(TypeError, match="static"):
        td.jit(lambda v: td.delete(v, td.argmax(v)))(V)


def test_roots_of_a_concrete_polynomial_are_numpys():
    np.testing.assert_allclose(np.sort_complex(td.roots(P3)),
                               np.sort_complex(np.asarray(jnp.roots(P3))), rtol=1e-10)


def test_new_array_methods_on_traced_values():
    got = td.jit(lambda x: (x.argpartition(2), x.compress(x > 0, size=3), x.clone() * 2,
                            x.nonzero(size=6)[0]))(V)
    want = (jnp.asarray(V).argpartition(2), jnp.asarray(V).compress(V > 0, size=3),
            jnp.asarray(V) * 2, jnp.asarray(V).nonzero(size=6)[0])
    for g, w in zip(got, want):
        close(g, w)
    i = np.array([0, 1, 0, 1, 1, 0])
    close(td.jit(lambda i, v: i.choose([v, -v], mode="clip"))(i, V),
          jnp.asarray(i).choose([V, -V], mode="clip"))
