"""Shared by the evaluator and XLA tests: dtype groups, random inputs of every dtype, the
table of elementwise primitives with the dtypes each takes, and a function through every
control-flow construct (loops)."""

from __future__ import annotations

import numpy as np

import tidu as td
from tidu import ops as P

FLOATS = ("float32", "float64")
COMPLEX = ("complex64", "complex128")
INEXACT = FLOATS + COMPLEX
INTS = ("int32", "int64")
NUMERIC = INEXACT + INTS
ALL = NUMERIC + ("bool",)

# (primitive, dtypes, needs positive inputs)
UNARY = [(P.Neg, NUMERIC, False), (P.Conj, INEXACT, False), (P.Exp, INEXACT, False),
         (P.Log, INEXACT, True), (P.Sin, INEXACT, False), (P.Cos, INEXACT, False),
         (P.Tanh, INEXACT, False), (P.Sqrt, INEXACT, True), (P.Rsqrt, INEXACT, True),
         (P.Expm1, FLOATS, False), (P.Log1p, FLOATS, True), (P.Abs, NUMERIC, False),
         (P.Sign, NUMERIC, False), (P.StopGradient, ALL, False), (P.Real, COMPLEX, False),
         (P.Imag, COMPLEX, False)]
# elementwise math (ops/math.py); "unit": |x| < 1, "ge1": x > 1 (the functions' domains)
UNARY += [(P.Floor, FLOATS, False), (P.Ceil, FLOATS, False), (P.Round, FLOATS, False),
          (P.Tan, INEXACT, "unit"), (P.Atan, INEXACT, "unit"), (P.Asin, INEXACT, "unit"),
          (P.Acos, INEXACT, "unit"), (P.Sinh, INEXACT, False), (P.Cosh, INEXACT, False),
          (P.Asinh, INEXACT, False), (P.Acosh, INEXACT, "ge1"), (P.Atanh, INEXACT, "unit"),
          (P.Erf, FLOATS, False), (P.Erfc, FLOATS, False), (P.ErfInv, FLOATS, "unit"),
          (P.Cbrt, FLOATS, False), (P.Logistic, FLOATS, False), (P.IsFinite, FLOATS, False)]
BINARY = [(P.Add, NUMERIC, False), (P.Sub, NUMERIC, False), (P.Mul, NUMERIC, False),
          (P.Div, INEXACT, True), (P.Pow, FLOATS, True), (P.Max, FLOATS + INTS, False),
          (P.Min, FLOATS + INTS, False)]
# integer Div truncates (x / 0 == -1, as XLA's); Rem is C's fmod (x % 0 == x for integers)
BINARY += [(P.Div, INTS, False), (P.Rem, FLOATS + INTS, True), (P.Atan2, FLOATS, False)]
# bitwise (ops/bitwise.py): small ints of both signs, so shifts by negative amounts are covered
BINARY += [(P.And, INTS + ("bool",), False), (P.Or, INTS + ("bool",), False),
           (P.Xor, INTS + ("bool",), False), (P.ShiftLeft, INTS, False),
           (P.ShiftRightArithmetic, INTS, False), (P.ShiftRightLogical, INTS, False)]
UNARY += [(P.Not, INTS + ("bool",), False)]

# Ordering and accumulation primitives (tidu.ops.sorting): (op, dtypes, positive); run by
# tests/numpy/test_sorting.py on both backends against each op's numpy reference.
SORT_SCAN = [(P.ReduceMin((0, 2)), FLOATS + INTS, False), (P.ReduceProd((1,)), NUMERIC, False),
             (P.ReduceAnd((0,)), ("bool",), False), (P.ReduceOr((1, 2)), ("bool",), False),
             (P.ArgMax(1), FLOATS + INTS, False), (P.ArgMin(2, "int32"), FLOATS + INTS, False),
             (P.Cumsum(1), NUMERIC, False), (P.Cumsum(0, True), NUMERIC, False),
             (P.Cumprod(2), NUMERIC, False), (P.Cummax(1), FLOATS + INTS, False),
             (P.Cummin(2, True), FLOATS + INTS, False), (P.LinearScan(1), INEXACT, False),
             (P.LinearScan(0, True), INEXACT, False), (P.Sort(1), ALL, False),
             (P.Sort(2, True), ALL, False)]

# Shape primitives (docs/numpy.md): (op, operand shape, dtypes); tests/numpy/test_shapes.py runs
# each on the interpreter (against impl), on XLA (against the interpreter, batched too) and
# through AD.
SHAPE_OPS = [(P.Rev((0,)), (4, 3), ALL), (P.Rev((0, 2)), (2, 3, 5), ALL), (P.Rev(()), (3,), ALL),
             (P.Rev((1,)), (3, 0), ALL), (P.Rev((0,)), (1,), ALL)]


def cases(table):
    """(primitive, dtype, positive) for every dtype of every row, for pytest.parametrize."""
    return [(c, d, p) for c, ds, p in table for d in ds]


def value(rng: np.random.Generator, shape, dtype, positive: bool = False) -> np.ndarray:
    """Random values of `dtype`: small ints, random bools, normal floats/complexes (shifted away
    from zero when `positive`, for log/sqrt/div; "unit" inside |x| < 1, "ge1" above 1)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind == "i":
        return rng.integers(-5, 6, shape).astype(dt)
    x = rng.standard_normal(shape)
    if dt.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    if positive == "unit":  # inside the unit disk (and away from its edge)
        x = np.tanh(x) * 0.7 if dt.kind == "f" else x * 0.3
    elif positive == "ge1":
        x = np.abs(x) + 1.2 if dt.kind == "f" else x + 3.0
    elif positive:
        x = np.abs(x) + 0.5 if dt.kind == "f" else x + 3.0
    return x.astype(dt)


def one_op_graph(op, avals):
    """The materialized graph of op applied to fresh inputs ("in", i) of the given avals."""
    b = td.FragmentBuilder()
    ins = [b.add_input(("in", i), a) for i, a in enumerate(avals)]
    (out,) = b.add_op(op, [td.Local(i) for i in ins])
    frag = b.build([td.Local(out)])
    return td.materialize_merge(td.resolve([frag]), frag.outputs)


def loops(x, w):
    """A scan over a cond (one branch a nested scan), a while loop and a checkpoint: every
    control-flow op, nested programs two deep; differentiable in x and w (the while loop's input
    is a stop_gradient, as reverse mode through while_loop is refused)."""
    def step(c, v):
        inner = lambda c: td.scan(lambda d, _: (td.sin(d) * w, None), c, length=2)[0]  # noqa: E731
        c = td.cond(td.sum(c) > 0, inner, lambda c: c * v, c)
        return c, td.sum(c * c)
    c, ys = td.scan(step, x, td.reshape(td.iota((12,), "float64"), (4, 3)) * 0.1)
    k = td.while_loop(lambda k: td.sum(k) < 10.0, lambda k: k * 2.0 + 0.1,
                      td.stop_gradient(td.abs(c)) + 0.5)
    return td.sum(td.checkpoint(lambda c: td.tanh(c) * w)(c)) + td.sum(ys) + td.sum(k)
