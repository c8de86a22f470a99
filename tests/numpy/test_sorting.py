"""Sorting, reductions and cumulative ops (td.min/prod/any/all/argmax/argmin/sort/argsort/cumsum/
cumprod/cummax/cummin and their primitives) against jax.numpy in x64: values on both backends,
ties and NaN, derivatives (grad/jvp/hessian against jax, check_grads to order 2, transposes to
third order), integer outputs refusing differentiation, bad input and forged instructions."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value
from tidu import _eval
from tidu import ops as P
from tidu.testing import check_grads
from _support.values import SORT_SCAN, one_op_graph, value

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)
BACKENDS = ("cpu", "xla")
TOL = {"float32": 2e-5, "complex64": 2e-5, "float64": 1e-12, "complex128": 1e-12, "int32": 0,
       "int64": 0, "bool": 0}


def close(got, want, dtype="float64"):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=TOL[str(dtype)], atol=TOL[str(dtype)])


def rng_(seed=0):
    return np.random.default_rng(seed)


# ---- the primitive table (values.SORT_SCAN): every op x dtype, both backends, vs numpy ----

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,dtype,pos", [(o, d, p) for o, ds, p in SORT_SCAN for d in ds],
                         ids=lambda v: str(v))
def test_primitive_table(backend, op, dtype, pos):
    rng = rng_(11)
    args = [value(rng, (3, 4, 5), dtype, pos) for _ in range(2 if isinstance(op, P.LinearScan)
                                                            else 1)]
    if isinstance(op, P.Sort):  # also sorting a second operand by these keys
        args2 = args + [value(rng, (3, 4, 5), "complex128")]
        prog2 = td.compile(one_op_graph(op, [td.aval(a.shape, a.dtype) for a in args2]),
                           backend=backend)
        close(prog2({("in", i): a for i, a in enumerate(args2)})[0], op.impl(*args2),
              "complex128")
    prog = td.compile(one_op_graph(op, [td.aval(a.shape, a.dtype) for a in args]),
                      backend=backend)
    got = prog({("in", i): a for i, a in enumerate(args)})[0]
    want = op.impl(*args)
    tol = {"float32": 2e-5, "complex64": 2e-5}.get(dtype, 1e-12)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# ---- values against jax, both backends ----

# (name, function of the module m (jnp or td) and x, dtypes)
FLOATS, INTS = ("float32", "float64"), ("int32", "int64")
VALUE_CASES = [
    ("min_axes", lambda m, x: m.min(x, axis=(0, 2)), FLOATS + INTS),
    ("min_all", lambda m, x: m.min(x), FLOATS + INTS + ("bool",)),
    ("min_keep", lambda m, x: m.min(x, axis=1, keepdims=True), FLOATS + INTS),
    ("prod", lambda m, x: m.prod(x, axis=1), FLOATS + INTS + ("complex128", "complex64")),
    ("prod_all", lambda m, x: m.prod(x), FLOATS + INTS + ("bool",)),
    ("any", lambda m, x: m.any(x, axis=1), FLOATS + INTS + ("bool",)),
    ("all", lambda m, x: m.all(x, axis=(0, 1)), FLOATS + INTS + ("bool",)),
    ("all_keep", lambda m, x: m.all(x > 0, keepdims=True), FLOATS),
    ("argmax", lambda m, x: m.argmax(x, axis=1), FLOATS + INTS + ("bool",)),
    ("argmax_flat", lambda m, x: m.argmax(x), FLOATS + INTS),
    ("argmin", lambda m, x: m.argmin(x, axis=-1, keepdims=True), FLOATS + INTS),
    ("sort", lambda m, x: m.sort(x, axis=1), FLOATS + INTS + ("bool", "complex128")),
    ("sort_last", lambda m, x: m.sort(x), FLOATS + INTS),
    ("sort_flat", lambda m, x: m.sort(x, axis=None), FLOATS),
    ("sort_desc", lambda m, x: m.sort(x, axis=0, descending=True), FLOATS + INTS),
    ("argsort", lambda m, x: m.argsort(x, axis=1), FLOATS + INTS),
    ("argsort_desc", lambda m, x: m.argsort(x, descending=True), FLOATS + INTS),
    ("cumsum", lambda m, x: m.cumsum(x, axis=1), FLOATS + INTS + ("complex128",)),
    ("cumsum_flat", lambda m, x: m.cumsum(x), FLOATS + INTS + ("bool",)),
    ("cumprod", lambda m, x: m.cumprod(x, axis=2), FLOATS + INTS + ("complex64",)),
    ("cummax", lambda m, x: (jax.lax if m is jnp else m).cummax(x, axis=1), FLOATS + INTS),
    ("cummin_rev", lambda m, x: (jax.lax if m is jnp else m).cummin(x, axis=2, reverse=True),
     FLOATS + INTS),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,f,dtypes", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_values_match_jax(backend, name, f, dtypes):
    for dtype in dtypes:
        x = value(rng_(), (3, 4, 5), dtype)
        got = td.jit(lambda x: f(td, x), backend=backend)(x)
        want = f(jnp, jnp.asarray(x))
        close(got, want, want.dtype)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_ties_and_nan_as_numpy(backend):
    x = np.array([[3.0, np.nan, 1.0, 1.0, -0.0, 0.0, np.nan, 2.0, -np.inf, np.inf]])
    j = td.jit(lambda x: (td.sort(x), td.argsort(x), td.sort(x, descending=True),
                          td.argsort(x, descending=True), td.argmax(x), td.argmin(x),
                          td.min(x), td.cummax(x, axis=1), td.cummin(x, axis=1)), backend=backend)
    s, a, sd, ad, amax, amin, mn, cmax, cmin = j(x)
    np.testing.assert_array_equal(s, np.sort(x))
    np.testing.assert_array_equal(a, np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(sd, jnp.sort(x, descending=True))
    np.testing.assert_array_equal(ad, jnp.argsort(x, descending=True))
    assert amax == np.argmax(x) == 1 and amin == np.argmin(x) == 1
    assert np.isnan(mn)
    np.testing.assert_array_equal(cmax, np.maximum.accumulate(x, axis=1))
    np.testing.assert_array_equal(cmin, np.minimum.accumulate(x, axis=1))
    z = np.array([2 + 1j, 1 + 5j, 2 + 0j, np.nan + 0j, 1 + 5j, 1 + np.nan * 1j])
    np.testing.assert_array_equal(td.jit(td.sort, backend=backend)(z), np.sort(z))
    ties = np.array([2, 1, 2, 1, 2], np.int32)  # stable: equal keys keep their order
    np.testing.assert_array_equal(td.jit(td.argsort, backend=backend)(ties), [1, 3, 0, 2, 4])


def test_integer_extremes_and_wrapping():
    x = np.array([np.iinfo(np.int64).min, 5, np.iinfo(np.int64).max], np.int64)
    mn, mx, p, c = td.jit(lambda x: (td.min(x), td.argmax(x), td.prod(x), td.cumsum(x)))(x)
    assert mn == np.iinfo(np.int64).min and mx == 2
    with np.errstate(over="ignore"):
        assert p == np.prod(x) and (c == np.cumsum(x)).all()


# ---- derivatives ----

def _grad_cases():
    rng = rng_(3)
    x = rng.standard_normal((3, 4))
    return [
        ("min", lambda m, x: m.min(x, axis=1) @ np.arange(3.0), x),
        ("prod", lambda m, x: m.sum(m.prod(x, axis=0) * np.arange(4.0)), x),
        ("prod_all", lambda m, x: m.prod(x), x),
        ("sort", lambda m, x: m.sum(m.sort(x, axis=1) * np.arange(12.0).reshape(3, 4)), x),
        ("sort_desc", lambda m, x: m.sum(m.sort(x, axis=0, descending=True) ** 3), x),
        ("cumsum", lambda m, x: m.sum(m.cumsum(x, axis=1) ** 2), x),
        ("cumprod", lambda m, x: m.sum(m.cumprod(x, axis=1) * np.arange(12.0).reshape(3, 4)), x),
        ("cummax", lambda m, x: m.sum((jax.lax if m is jnp else m).cummax(x, axis=1) ** 2), x),
        ("cummin", lambda m, x: m.sum((jax.lax if m is jnp else m).cummin(x, axis=0,
                                                                          reverse=True) ** 3), x),
    ]


@pytest.mark.parametrize("case", _grad_cases(), ids=lambda c: c[0])
def test_grad_jvp_hessian_match_jax(case):
    _, f, x = case
    close(td.grad(lambda x: f(td, x))(x), jax_value(jax.grad(lambda x: f(jnp, x)), x))
    t = np.ones_like(x) * 0.5
    _, tan = td.jvp(lambda x: f(td, x), (x,), (t,))
    close(tan, jax_value(lambda x, t: jax.jvp(lambda x: f(jnp, x), (x,), (t,))[1], x, t))
    np.testing.assert_allclose(td.hessian(lambda x: f(td, x))(x),
                               jax_value(jax.hessian(lambda x: f(jnp, x)), x), rtol=1e-9, atol=1e-9)


def test_prod_and_cumprod_derivatives_exact_at_zeros():
    x = np.array([[2.0, 0.0, 3.0, 0.5], [0.0, 0.0, 1.5, -2.0]])
    for axis in (0, 1, None):
        close(td.grad(lambda x: td.prod(x, axis=axis).sum())(x),
              jax.grad(lambda x: jnp.prod(x, axis=axis).sum())(x))
        close(td.hessian(lambda x: td.prod(x, axis=axis).sum())(x),
              jax.hessian(lambda x: jnp.prod(x, axis=axis).sum())(x))
    w = np.arange(8.0).reshape(2, 4)
    close(td.grad(lambda x: td.sum(td.cumprod(x, axis=1) * w))(x),
          jax.grad(lambda x: jnp.sum(jnp.cumprod(x, axis=1) * w))(x))
    assert np.isfinite(td.hessian(lambda x: td.sum(td.cumprod(x, axis=1) * w))(x)).all()


@pytest.mark.parametrize("dtype", ("float64", "complex128"))
def test_check_grads_order_two(dtype):
    rng = rng_(5)
    x = value(rng, (3, 4), dtype)
    a = value(rng, (3, 4), dtype)
    fs = [lambda x: td.prod(x, axis=1), lambda x: td.cumsum(x, axis=0),
          lambda x: td.cumprod(x, axis=1), lambda x: td.sort(td.real(x) if dtype != "float64"
                                                             else x, axis=1) * 1.0,
          lambda x: td.apply(P.LinearScan(1), x, a), lambda x: td.apply(P.LinearScan(0, True), a, x)]
    if dtype == "float64":
        fs += [lambda x: td.min(x, axis=0), lambda x: td.cummax(x, axis=1),
               lambda x: td.cummin(x, axis=0, reverse=True)]
    for f in fs:
        check_grads(f, (x,), order=2)


def test_third_order_through_transpose():
    # the seven-step pipeline to third order: grad of a function that is itself a grad
    x = rng_(7).standard_normal(5)

    def f(m, x):
        return m.sum(m.sort(m.cumprod(x) * x) ** 2) + m.prod(x)

    g3 = td.grad(lambda x: td.sum(td.hessian(lambda y: f(td, y))(x) * np.arange(25.0).reshape(5, 5)))
    j3 = jax.grad(lambda x: jnp.sum(jax.hessian(lambda y: f(jnp, y))(x) *
                                    np.arange(25.0).reshape(5, 5)))
    np.testing.assert_allclose(g3(x), j3(x), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_on_both_backends(backend):
    x = rng_(8).standard_normal((4, 6))
    f = lambda m, x: m.sum(m.sort(x, axis=0)[0] * m.cumprod(x, axis=0)[-1]) + m.min(x)  # noqa
    g = td.jit(td.grad(lambda x: f(td, x)), backend=backend)(x)
    close(g, jax.grad(lambda x: f(jnp, x))(x))


def test_integer_outputs_refuse_differentiation():
    x = rng_(9).standard_normal(5)
    for f in (td.argmax, lambda x: td.argsort(x)[0], lambda x: td.any(x > 0)):
        with pytest.raises(TypeError, match="real.*(int64|bool)"):
            td.grad(lambda x: f(x))(x)
    # an index used downstream carries no tangent: the gradient flows through the values only
    g = td.grad(lambda x: td.sum(td.sort(x) * td.astype(td.argsort(x), "float64")))(x)
    close(g, jax.grad(lambda x: jnp.sum(jnp.sort(x) * jnp.argsort(x)))(x))


# ---- bad input ----

def test_bad_input_gives_clear_errors():
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match="axis 5 out of range"):
        td.jit(lambda x: td.sort(x, axis=5))(x)
    with pytest.raises(ValueError, match="empty"):
        td.jit(lambda x: td.argmax(x, axis=1))(np.ones((2, 0)))
    with pytest.raises(ValueError, match="empty"):
        td.jit(lambda x: td.min(x, axis=1))(np.ones((2, 0)))
    # complex is ordered lexicographically (issue #28; tests/numpy/test_reduction_dtypes.py)
    with pytest.raises(ValueError, match="zero-size"):
        td.jit(lambda x: td.min(x, axis=1))(np.ones((2, 0), complex))
    with pytest.raises(ValueError, match="empty"):
        td.jit(td.argmax)(np.ones(0, complex))
    with pytest.raises(TypeError, match="not supported"):
        td.jit(lambda x: td.sort(x, order="a"))(x)
    with pytest.raises(ValueError, match="differ"):
        P.LinearScan(0).abstract_eval(td.aval((3,), "float64"), td.aval((4,), "float64"))
    with pytest.raises(TypeError, match="int32 or int64"):
        P.ArgMax(0, "float64")


def test_empty_arrays():
    e = np.ones((0, 3))
    s, c, p, a = td.jit(lambda x: (td.sort(x, axis=0), td.cumsum(x, axis=0), td.prod(x, axis=0),
                                   td.any(x, axis=0)))(e)
    assert s.shape == (0, 3) and c.shape == (0, 3)
    np.testing.assert_array_equal(p, np.ones(3))
    np.testing.assert_array_equal(a, np.zeros(3, bool))


# ---- forged instructions are refused by validate.hpp ----

def _raw(slot_dtype, shapes, code, attrs):
    in_off, in_slots = [0], []
    for _, ins, _ in code:
        in_slots += ins
        in_off.append(len(in_slots))
    u8, u32, i64 = np.uint8, np.uint32, np.int64
    n_in = len(slot_dtype) - len(code)
    return _eval.Program(
        np.array([_eval.DTYPES.index(d) for d in slot_dtype], u8),
        np.array([len(s) for s in shapes], u32), np.array([d for s in shapes for d in s], i64),
        np.array([_eval.OPCODES.index(op) for op, _, _ in code], u8),
        np.array(in_off, u32), np.array(in_slots, u32), np.arange(len(code) + 1, dtype=u32),
        np.array([o for _, _, o in code], u32), np.array([0, len(attrs)], u32), np.array(attrs, i64), np.array([], u8),
        np.arange(n_in, dtype=u32), np.array([o for _, _, o in code], u32))


F64, I64 = "float64", "int64"
FORGED = [
    ("ReduceMin", (F64, F64), [(2, 3), (2,)], [1, 5], "bad reduction axis"),
    ("ReduceMin", (F64, F64), [(2, 3), (2,)], [7, 1], "attribute list"),
    ("ReduceMin", (F64, F64), [(2, 0), (2,)], [1, 1], "empty axis"),
    ("ReduceMin", (F64, F64), [(2, 3), (3,)], [1, 1], "output shape"),
    ("ReduceProd", ("bool", "bool"), [(2, 3), (2,)], [1, 1], "not numeric"),
    ("ReduceAnd", (F64, F64), [(2, 3), (2,)], [1, 1], "not bool"),
    ("ArgMax", (F64, I64), [(2, 3), (2,)], [1, 1], "index dtype"),
    ("ArgMax", (F64, I64), [(2, 3), (2,)], [-1, 5], "bad axis"),
    ("ArgMin", (F64, I64), [(2, 0), (2,)], [1, 5], "empty axis"),
    ("ArgMin", (F64, I64), [(2, 3), (3,)], [1, 5], "output shape"),
    ("Cumsum", (F64, F64), [(2, 3), (2, 3)], [2, 0], "bad axis"),
    ("Cumsum", (F64, F64), [(2, 3), (2, 3)], [1, 7], "flag"),
    ("Cumsum", (F64, F64), [(2, 3), (3, 2)], [1, 0], "shape or dtype"),
    ("Cummax", ("complex128", "complex128"), [(3,), (3,)], [0, 0], "not real"),
    ("Sort", (F64, F64), [(2, 3), (2, 4)], [1, 0], "shape mismatch"),
    ("Sort", (F64, F64), [(2, 3), (2, 3)], [1 << 40, 0], "bad axis"),
]


@pytest.mark.parametrize("op,dtypes,shapes,attrs,msg", FORGED, ids=[f[0] for f in FORGED])
def test_forged_instructions_are_refused(op, dtypes, shapes, attrs, msg):
    with pytest.raises(ValueError, match=msg):
        _raw(dtypes, shapes, [(op, [0], 1)], attrs)


def test_forged_two_operand_instructions_are_refused():
    with pytest.raises(ValueError, match="shape or dtype"):
        _raw((F64, "float32", F64), [(3,), (3,), (3,)], [("LinearScan", [0, 1], 2)], [0, 0])
    with pytest.raises(ValueError, match="dtype mismatch"):
        _raw((F64, I64, F64), [(3,), (3,), (3,)], [("Sort", [0, 1], 2)], [0, 0])
    with pytest.raises(ValueError, match="operands"):
        _raw((F64, F64, F64, F64), [(3,)] * 4, [("Sort", [0, 1, 2], 3)], [0, 0])


@pytest.mark.parametrize("backend", ("cpu", "xla"))
@pytest.mark.parametrize("dtype", ("float32", "float64"))
@pytest.mark.parametrize("shape,axis,descending", [((1000,), 0, False), ((7, 6, 5), 1, True),
                                                   ((7, 6, 5), 2, False), ((7, 6, 5), 0, True)])
def test_sort_gradient_sorts_once_and_scatters_back(dtype, shape, axis, descending, backend):
    """The gradient program of a sort sorts once (the keys with an iota: the permutation; the
    forward values are the keys gathered by it, as jax's sort JVP) and scatters the cotangent
    back; values with ties match jax's in the input's own dtype, on both backends."""
    rng = rng_(9)
    # many ties in the ascending cases (stable order matters); distinct keys when descending,
    # where tidu keeps ties in their original order and jax (a reversed ascending sort) does not
    x = (rng.permutation(np.prod(shape)).reshape(shape) if descending
         else rng.integers(0, 20, shape)).astype(dtype)
    w = rng.standard_normal(shape).astype(dtype)

    def f(m, x):
        s = m.sort(x, axis=axis, descending=descending)
        return m.sum(s * s * w)

    g = td.jit(td.value_and_grad(lambda x: f(td, x)), backend=backend)
    prog = g.lower(x).program
    ops = [ln.split(" = ")[1].split("(")[0] for ln in str(prog.graph).splitlines()
           if " = " in ln]
    assert ops.count("Sort") == 1 and ops.count("Scatter") == 1 and ops.count("Gather") == 1
    if backend == "xla":
        assert prog.as_stablehlo().count("stablehlo.sort") == 1
    v, gr = g(x)
    jv, jg = jax.value_and_grad(lambda x: f(jnp, x))(x)
    assert gr.dtype == np.dtype(dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(v, jv, rtol=tol)
    np.testing.assert_allclose(gr, jg, rtol=tol, atol=tol)


@pytest.mark.parametrize("backend", ("cpu", "xla"))
def test_sort_and_argsort_of_the_same_keys_sort_once(backend):
    """A program that sorts x and also argsorts it (the same axis and order) sorts once: the
    values are x gathered by the permutation, equal to numpy's stable sort element for
    element (ties, -0.0 and 0.0, NaN last); a sort of other keys is left alone."""
    rng = rng_(3)
    x = rng.integers(0, 9, (40, 30)).astype(np.float64)
    x[0, :3] = [0.0, -0.0, np.nan]
    y = rng.standard_normal((40, 30))
    f = td.jit(lambda x, y: (td.sort(x, axis=0), td.argsort(x, axis=0), td.sort(y, axis=0)),
               backend=backend)
    ops = [ln.split(" = ")[1].split("(")[0]
           for ln in str(f.lower(x, y).program.graph).splitlines() if " = " in ln]
    assert ops.count("Sort") == 2  # (x, iota) and y
    s, a, sy = f(x, y)
    np.testing.assert_array_equal(s, np.sort(x, axis=0, kind="stable"))
    np.testing.assert_array_equal(np.signbit(s), np.signbit(np.take_along_axis(
        x, np.argsort(x, axis=0, kind="stable"), axis=0)))
    np.testing.assert_array_equal(a, np.argsort(x, axis=0, kind="stable"))
    np.testing.assert_array_equal(sy, np.sort(y, axis=0))
