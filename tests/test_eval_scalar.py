"""The all-scalar float64 fast path: its code is reordered into runs of one opcode
(Program::schedule_scalar), so it is checked here against a plain Python evaluation in program
order.  The fast path calls the C library, as Python's math module does, so values match bit for
bit; a schedule that read a slot before writing it would read the previous call's value, which the
second evaluation with other inputs would expose."""

from __future__ import annotations

import math
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tidu as td

UNARY = {
    "sin": (td.sin, math.sin), "cos": (td.cos, math.cos), "tanh": (td.tanh, math.tanh),
    "exp_sin": (lambda u: td.exp(td.sin(u)), lambda u: math.exp(math.sin(u))),
    "log1p_sq": (lambda u: td.log(1.0 + u * u), lambda u: math.log(1.0 + u * u)),
    "neg": (lambda u: -u, lambda u: -u),
    "sqrt_abs": (lambda u: td.sqrt(td.abs(u)), lambda u: math.sqrt(abs(u))),
}
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (1.5 + b * b),
    "max": (lambda a, b: td.maximum(a, b), lambda a, b: max(a, b)),
}


def build(recipe):
    """Both the traced function and its plain-float reference from one recipe of
    (unary name, operand pick, binary name, other pick) steps over a growing list of values."""
    def run(x, y, traced):
        vals = [x, y]
        for un, p, bn, q in recipe:
            u = vals[int(p * len(vals))]
            w = UNARY[un][0 if traced else 1](u)
            v = vals[int(q * len(vals))]
            b = BINARY[bn]
            vals.append(b[0 if traced else 1](w, v) if isinstance(b, tuple) else b(w, v))
        return vals[-1], vals[len(vals) // 2]
    return (lambda x, y: run(x, y, True)), (lambda x, y: run(x, y, False))


def compile_scalar(f):
    F = td.build(f, x=td.spec(()), y=td.spec(()))
    return td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")


step = st.tuples(st.sampled_from(sorted(UNARY)), st.floats(0, 0.999),
                 st.sampled_from(sorted(BINARY)), st.floats(0, 0.999))


@settings(max_examples=60, deadline=None)
@given(st.lists(step, min_size=1, max_size=40),
       st.lists(st.tuples(st.floats(-3, 3), st.floats(-3, 3)), min_size=2, max_size=3))
def test_scheduled_scalar_code_matches_program_order(recipe, points):
    f, ref = build(recipe)
    prog = compile_scalar(f)
    assert prog.executable.native.scalar_runs, "expected the all-scalar fast path"
    for x, y in points:
        feed = {"x": np.float64(x), "y": np.float64(y)}
        got = [float(v) for v in prog.eval([feed[k] for k in prog.inputs])]
        assert got == list(ref(x, y)), (x, y)


def test_runs_group_independent_work_and_cover_every_instruction():
    # A gradient of a long chain: its cosines depend only on forward values, so they can run
    # back to back in one run; the runs together hold every instruction exactly once.
    rng = random.Random(3)
    recipe = [(rng.choice(["sin", "exp_sin", "log1p_sq"]), 0.999,  # u = the latest value
               rng.choice(["add", "mul"]), rng.random()) for _ in range(300)]
    f, ref = build(recipe)
    F = td.build(lambda x, y: f(x, y)[0], x=td.spec(()), y=td.spec(()))
    T = td.transpose(td.differentiate(td.resolve([F]), F.outputs, ["x", "y"]))
    g = td.compile(td.materialize_merge(td.resolve([F, T]), F.outputs + T.tangent_outputs),
                   backend="cpu")
    runs = g.executable.native.scalar_runs
    assert sum(n for _, n in runs) == g.n_instructions
    assert all(a != b for (a, _), (b, _) in zip(runs, runs[1:])), "adjacent runs share an opcode"
    n_cos = sum(n for op, n in runs if op == "Cos")
    assert n_cos > 100 and max(n for op, n in runs if op == "Cos") == n_cos
    assert len(runs) < 0.7 * g.n_instructions
    # The gradient itself, against central differences of the plain reference.
    (ct,) = [k for _, k in T.tangent_inputs]
    x0, y0 = 0.3, 0.4
    feed = {"x": x0, "y": y0, ct: 1.0}
    out = [float(v) for v in g.eval([feed[k] for k in g.inputs])]
    assert out[0] == ref(x0, y0)[0]
    h = 1e-6
    fd = [(ref(x0 + h, y0)[0] - ref(x0 - h, y0)[0]) / (2 * h),
          (ref(x0, y0 + h)[0] - ref(x0, y0 - h)[0]) / (2 * h)]
    np.testing.assert_allclose(out[1:], fd, rtol=1e-5, atol=1e-6)


def test_non_scalar_programs_have_no_scalar_schedule():
    F = td.build(lambda x: td.sin(x) * 2.0, x=td.spec((3,)))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    assert prog.executable.native.scalar_runs == []
