"""The tracing front end: numpy broadcasting, type promotion, indexing and functions, checked
against numpy through the compiled program."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from tidu import ops as P

rng = np.random.default_rng(0)
X = rng.standard_normal((3, 4))
V = rng.standard_normal(4)
M = rng.standard_normal((4, 2))
POS = np.abs(rng.standard_normal((3, 4))) + 0.5
C = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
I = rng.integers(-5, 5, (3, 4)).astype(np.int32)

CASES = [
    ("broadcast add", lambda x, v: x + v, (X, V)),
    ("scalar weak float32", lambda x: x * 2.5 + 1, (X.astype(np.float32),)),
    ("rsub rtruediv", lambda x: 1.0 - 2.0 / x, (POS,)),
    ("int + float promotes", lambda i, x: i + x, (I, X)),
    ("int true divide", lambda i: i / 2, (I,)),
    ("complex times real", lambda c, x: c * x, (C, X)),
    ("matmul 2x2", lambda x, m: x @ m, (X, M)),
    ("matmul 2x1", lambda x, v: x @ v, (X, V)),
    ("matmul 1x2", lambda v, m: v @ m, (V, M)),
    ("matmul 1x1", lambda v: v @ v, (V,)),
    ("batched matmul", lambda a, b: a @ b, (rng.standard_normal((2, 3, 4)),
                                              rng.standard_normal((4, 5)))),
    ("dot", lambda x, m: td.dot(x, m), (X, M)),
    ("transcendental", lambda p: td.exp(p) + td.log(p) + td.sin(p) * td.cos(p) + td.tanh(p)
     + td.sqrt(p) + td.expm1(p) + td.log1p(p) + td.rsqrt(p), (POS,)),
    ("int exp goes float32", lambda i: td.exp(i), (I,)),
    ("abs sign", lambda x: td.abs(x) * td.sign(x), (X,)),
    ("complex abs", lambda c: abs(c), (C,)),
    ("power", lambda p: p ** 1.5 + p ** 2 + 2.0 ** p, (POS,)),
    ("sum all", lambda x: td.sum(x), (X,)),
    ("sum axis keepdims", lambda x: td.sum(x, axis=1, keepdims=True), (X,)),
    ("sum negative axis", lambda x: x.sum(axis=-2), (X,)),
    ("max axis", lambda x: td.max(x, axis=0), (X,)),
    ("mean", lambda x: td.mean(x, axis=1), (X,)),
    ("reshape -1", lambda x: td.reshape(x, (2, -1)), (X,)),
    ("method reshape", lambda x: x.reshape(4, 3), (X,)),
    ("transpose .T", lambda x: x.T, (X,)),
    ("transpose axes", lambda a: td.transpose(a, (2, 0, 1)), (rng.standard_normal((2, 3, 4)),)),
    ("broadcast_to", lambda v: td.broadcast_to(v, (3, 4)), (V,)),
    ("where", lambda x: td.where(x > 0, x, 0.0), (X,)),
    ("where nonbool cond", lambda i, x: td.where(i, x, -x), (I, X)),
    ("maximum minimum", lambda x, v: td.maximum(x, v) - td.minimum(x, 0.1), (X, V)),
    ("conj real imag", lambda c: td.conj(c) * td.real(c) + td.imag(c), (C,)),
    ("real of real", lambda x: td.real(x) + td.imag(x) + td.conj(x), (X,)),
    ("concatenate", lambda x, v: td.concatenate([x, v[None, :]], axis=0), (X, V)),
    ("comparisons", lambda x, v: ((x < v) == (v > x)) != (x >= 0.5), (X, V)),
    ("index int", lambda x: x[1], (X,)),
    ("index negative", lambda x: x[-1, -2], (X,)),
    ("slices", lambda x: x[1:3, ::2], (X,)),
    ("ellipsis newaxis", lambda x: x[..., None, 1:], (X,)),
    ("empty slice", lambda x: x[2:1], (X,)),
    ("astype", lambda x: x.astype("float32"), (X,)),
    ("stop_gradient value", lambda x: td.stop_gradient(x) * 2, (X,)),
    ("iterate rows", lambda x: [row.sum() for row in x], (X,)),
    ("bool sum counts", lambda x: td.sum(x > 0), (X,)),
    ("pytree out", lambda x: {"a": x, "b": (x[0], [x[1]])}, (X,)),
]

NP = {
    "dot": np.dot, "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "sqrt": np.sqrt, "expm1": np.expm1, "log1p": np.log1p, "sum": np.sum, "max": np.max,
    "mean": np.mean, "reshape": np.reshape, "transpose": np.transpose,
    "broadcast_to": np.broadcast_to, "where": np.where, "maximum": np.maximum,
    "minimum": np.minimum, "conj": np.conj, "real": np.real, "imag": np.imag,
    "concatenate": np.concatenate, "abs": np.abs, "sign": np.sign,
    "stop_gradient": lambda x: x, "rsqrt": lambda x: 1 / np.sqrt(x),
}


class _NumpyNamespace:
    def __getattr__(self, name):
        return NP[name]


def _as_numpy(fn, args):
    """Run fn with tidu's namespace swapped for numpy's."""
    import types

    glb = dict(fn.__globals__)
    glb["td"] = _NumpyNamespace()
    clone = types.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__, fn.__closure__)
    return clone(*args)


def _leaves(tree):
    if isinstance(tree, dict):
        return [x for k in tree for x in _leaves(tree[k])]
    if isinstance(tree, (list, tuple)):
        return [x for t in tree for x in _leaves(t)]
    return [tree]


# where tidu follows jax rather than numpy: float functions of int32 are float32
# (jax's to_inexact_dtype; numpy gives float64)
JAX_DTYPE = {"int true divide": np.float32, "int exp goes float32": np.float32}


@pytest.mark.parametrize("name,fn,args", CASES, ids=[c[0] for c in CASES])
def test_front_end_matches_numpy(name, fn, args):
    got = td.jit(fn)(*args)
    want = _as_numpy(fn, args)
    got_l, want_l = _leaves(got), _leaves(want)
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l):
        w = np.asarray(w, JAX_DTYPE.get(name))
        assert g.shape == w.shape
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-6 if w.dtype.itemsize <= 4 else 1e-12,
                                   atol=1e-6 if w.dtype.itemsize <= 4 else 1e-12)


def test_power_two_traces_as_multiplication():
    frag = td.build(lambda x: x ** 2, x=td.spec(()))
    assert [op.name for op, *_ in frag.ops()] == ["Mul"]


def test_broadcasting_is_explicit():
    frag = td.build(lambda x, v: x + v, x=td.spec((3, 4)), v=td.spec((4,)))
    ops = frag.ops()
    assert [op for op, *_ in ops] == [P.BroadcastInDim((3, 4), (1,)), P.Add()]


def test_promotion_is_explicit():
    frag = td.build(lambda x, y: x + y, x=td.spec((), "float32"), y=td.spec((), "float64"))
    assert [op for op, *_ in frag.ops()] == [P.Convert("float64"), P.Add()]


@pytest.mark.parametrize("fn,exc,msg", [
    (lambda x: x + td.spec((5,)) if False else x + np.ones(5), ValueError,
     r"Add: shapes \(3, 4\) vs \(5,\) do not broadcast"),
    (lambda x: x @ np.ones((5, 2)), ValueError, "DotGeneral: lhs shape"),
    (lambda x: x[5], IndexError, "out of bounds"),
    (lambda x: x[0, 0, 0], IndexError, "too many indices"),
    (lambda x: x[::0], ValueError, "slice step cannot be zero"),
    (lambda x: x[x > 0], IndexError, "boolean mask indexing"),
    (lambda x: x if x > 0 else -x, TypeError, "truth value"),
    (lambda x: td.reshape(x, (5, -1)), ValueError, "cannot reshape"),
    (lambda x: td.sum(x, axis=2), ValueError, "axis 2 out of range"),
    (lambda x: td.broadcast_to(x, (4, 3)), ValueError, "cannot broadcast"),
    (lambda x: td.concatenate([x, np.ones((3, 5))], axis=0), ValueError, "Concatenate: shape"),
    (lambda x: "not an array", TypeError, "must return arrays"),
    (lambda x: x.astype("datetime64[s]"), TypeError, r"unsupported dtype datetime64\[s\]"),
])
def test_front_end_errors(fn, exc, msg):
    with pytest.raises(exc, match=msg):
        td.build(fn, x=td.spec((3, 4)))


def test_functions_outside_a_trace_are_an_error():
    with pytest.raises(TypeError, match="inside a function"):
        td.exp(1.0)


def test_values_cannot_leak_between_traces():
    leaked = []
    td.build(lambda x: leaked.append(x) or x, x=td.spec(()))
    with pytest.raises(ValueError, match="different traces"):
        td.build(lambda y: y + leaked[0], y=td.spec(()))


def test_build_argument_forms():
    with pytest.raises(TypeError, match="not both"):
        td.build(lambda x: x, inputs={"x": td.spec(())}, y=td.spec(()))
    with pytest.raises(TypeError, match="input spec"):
        td.build(lambda x: x, x="float64")
    frag = td.build(lambda x: x * 1.0, x=np.zeros((2, 2), np.float32))
    assert frag.outputs[0].aval == td.aval((2, 2), "float32")


def test_jit_caches_per_shape_and_dtype():
    f = td.jit(lambda x: td.sum(x * x))
    f(np.ones(3)), f(np.ones(3) * 2), f(np.ones(4)), f(np.ones(3, np.float32))
    assert len(f.cache) == 3


def test_jit_signature_distinguishes_every_kind_of_argument():
    """The per-call key (compiled in pyx/api/jit.pxi): Python bool/int/float, numpy scalars,
    0-d arrays of two dtypes, shapes and argument structure each get their own program, and each
    program's answer has the dtype numpy would give."""
    f = td.jit(lambda x, y: x * 2 + y)
    cases = [(True, 1.0), (3, 1.0), (1.5, 1.0), (np.float64(1.5), 1.0), (np.array(1.5), 1.0),
             (np.array(1.5, np.float32), np.float32(1.0)), (np.ones(2), 1.0), (np.ones(3), 1.0)]
    for x, y in cases:
        got = f(x, y)
        want = np.asarray(x) * 2 + np.asarray(y)
        np.testing.assert_allclose(got, want)
        assert np.asarray(got).shape == want.shape
    assert len(f.cache) == len(cases)
    g = td.jit(lambda t: t["a"] * t["b"][0] + t["b"][1])
    assert float(g({"a": 2.0, "b": [3.0, 4.0]})) == 10.0
    assert float(g({"a": 2.0, "b": (3.0, 4.0)})) == 10.0  # a tuple is another structure
    assert len(g.cache) == 2


def test_jit_takes_arrays_the_cpp_entry_point_refuses():
    """A non-contiguous view or a list of the right shape goes through CompiledProgram.eval's
    conversion instead of failing in the C++ entry point."""
    f = td.jit(lambda x: td.sum(x * x), backend="cpu")
    base = np.arange(8.0)
    assert float(f(base[::2])) == float(np.sum(base[::2] ** 2))
    assert float(f(base[:4])) == float(np.sum(base[:4] ** 2))
    assert float(td.jit(td.grad(lambda x: td.sum(x * x)))(base[::2])[1]) == 2 * base[2]


def test_jit_inside_a_trace_inlines():
    """A jitted function called while tracing (a jit in a jit, inside grad) is inlined into the
    outer trace instead of being evaluated on tracers."""
    inner = td.jit(lambda x: td.sin(x) * 2.0)
    x = np.linspace(0, 1, 3)
    np.testing.assert_allclose(td.jit(lambda x: inner(x) + 1.0)(x), np.sin(x) * 2 + 1, rtol=1e-15)
    np.testing.assert_allclose(td.grad(lambda x: td.sum(inner(x)))(x), 2 * np.cos(x), rtol=1e-15)
    assert len(inner.cache) == 0  # never compiled on its own


# ---- the jitted call's direct path ----

def test_jitted_calls_of_changing_kinds_take_the_right_program_each_time():
    """A jitted function remembers the kinds of its last flat arguments for a direct call; calls
    of other kinds (another dtype, shape, Python type, byte order, a pytree) take the general
    path and give the right values, and a trace open around the call still inlines it."""
    f = td.jit(lambda x, y: x * y + 1.0)
    calls = [(2.0, 3.0), (np.array(2.0), 3.0), (np.arange(3.0), 2.0),
             (np.arange(4.0), 2.0), (np.arange(3, dtype=np.float32), np.float32(2.0)),
             (np.arange(3.0).astype(">f8"), 2.0), (2, 3), (True, 2.5), (2.0, 3.0)]
    for _ in range(2):
        for x, y in calls:
            want = np.asarray(x, dtype=np.result_type(np.asarray(x).dtype, y).newbyteorder("=")) * y + 1.0
            got = f(x, y)
            np.testing.assert_allclose(got, want)
            assert np.asarray(got).dtype == np.asarray(want).dtype, (x, y)
    g = td.jit(lambda y: y * 3.0)
    assert g(2.0) == 6.0 and g(2.0) == 6.0  # remembered: the direct path
    assert td.grad(lambda x: x * g(2.0))(1.0) == 6.0  # inside a trace it inlines
    assert td.grad(lambda x: g(x))(1.0) == 3.0
    h = td.jit(lambda t: t[0] * t[1])
    assert h((2.0, 4.0)) == 8.0 and h((2.0, 5.0)) == 10.0  # a pytree: the general path
    assert f(2.0, y=3.0) == 7.0  # keyword arguments are traced like positional ones
