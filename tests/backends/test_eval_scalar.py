"""The all-scalar float64 fast path: the interpreter runs its code reordered into runs of one
opcode (Program::schedule_scalar) and, on x86-64 Linux, a template JIT compiles it to machine code
(scalar.hpp).  Both are checked against a plain Python evaluation in program order, and against
each other bit for bit.  The fast path calls the C library, as Python's math module does, so values
match exactly; a schedule that read a slot before writing it would read the previous call's value,
which the second evaluation with other inputs would expose."""

from __future__ import annotations

import math
import os
import platform
import random
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tidu as td
from tidu import _eval

JIT_PLATFORM = platform.machine() in ("x86_64", "AMD64") and sys.platform.startswith("linux")

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


def interpreted(native):
    """The same program loaded again with the JIT off (TIDU_JIT is read when a program is built)."""
    old = os.environ.get("TIDU_JIT")
    os.environ["TIDU_JIT"] = "0"
    try:
        p = _eval.Program(native.to_bytes())
    finally:
        if old is None:
            del os.environ["TIDU_JIT"]
        else:
            os.environ["TIDU_JIT"] = old
    assert p.scalar_jit_bytes == 0 and p.scalar_runs
    return p


def bits(values):
    return [np.asarray(v, dtype=np.float64).view(np.uint64).tolist() for v in values]


step = st.tuples(st.sampled_from(sorted(UNARY)), st.floats(0, 0.999),
                 st.sampled_from(sorted(BINARY)), st.floats(0, 0.999))


@settings(max_examples=60, deadline=None)
@given(st.lists(step, min_size=1, max_size=40),
       st.lists(st.tuples(st.floats(-3, 3), st.floats(-3, 3)), min_size=2, max_size=3))
def test_scheduled_scalar_code_matches_program_order(recipe, points):
    f, ref = build(recipe)
    prog = compile_scalar(f)
    native = prog.executable.native
    assert native.scalar_runs, "expected the all-scalar fast path"
    assert (native.scalar_jit_bytes > 0) == JIT_PLATFORM
    interp = interpreted(native)
    for x, y in points:
        feed = {"x": np.float64(x), "y": np.float64(y)}
        args = [np.array(feed[k]) for k in prog.inputs]
        got = [float(v) for v in prog.eval(args)]
        assert got == list(ref(x, y)), (x, y)
        assert [float(v) for v in interp.run(args)] == got, (x, y)


def test_runs_group_independent_work_and_cover_every_instruction(monkeypatch):
    # A gradient of a long chain: its cosines depend only on forward values, so they can run
    # back to back in one run; the runs together hold every instruction exactly once.  (The
    # interpreter's schedule: where JIT code runs single points, the code keeps the JIT's order.)
    monkeypatch.setenv("TIDU_JIT", "0")
    td.program_cache.clear()
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


def _native(fn, spec):
    F = td.build(fn, x=spec)
    return td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")


def test_small_float64_array_programs_take_the_scalar_path():
    """A float64 program over arrays of at most 16 elements runs as scalar code (one value per
    element, structural ops free): each element is what the C library gives, as for scalars."""
    prog = _native(lambda x: td.sin(x[::-1]) * 2.0 + td.sum(x), td.spec((3,)))
    native = prog.executable.native
    assert native.scalar_runs and native.scalar_jit_bytes > 0
    x = np.array([0.3, -1.2, 2.5])
    (got,) = prog.eval([x])
    want = [math.sin(v) * 2.0 + ((x[0] + x[1]) + x[2]) for v in x[::-1]]
    assert got.tolist() == want


def test_scalar_path_programs_get_no_array_plan():
    """A program on the scalar path runs on its array of doubles, so it is given no arena, chains
    or memory plan; one just too large for it (17 elements) keeps the array plan."""
    f = lambda x: td.tanh(td.sin(x) * 2.0 + x) * x
    small = _native(f, td.spec((16,)))
    large = _native(f, td.spec((17,)))
    assert small.executable.native.scalar_runs and not large.executable.native.scalar_runs
    rep_small, rep_large = small.memory_report(), large.memory_report()
    assert rep_small["arena_bytes"] == 0 and rep_small["naive_bytes"] >= 4 * 16 * 8
    assert 0 < rep_large["arena_bytes"] <= rep_large["naive_bytes"]
    for n, prog in ((16, small), (17, large)):
        x = np.linspace(-2.0, 2.0, n)
        for _ in range(2):  # the second call reuses the workspace
            np.testing.assert_allclose(prog.eval([x])[0], np.tanh(np.sin(x) * 2.0 + x) * x,
                                       rtol=1e-15, atol=0)


@pytest.mark.parametrize("fn, spec", [
    (lambda x: td.sin(x) * 2.0, td.spec((17,))),               # more than 16 elements
    (lambda x: td.sin(x) * 2.0, td.spec((3,), "float32")),     # not float64
    (lambda x: td.where(x > 0, x, -x), td.spec((3,))),         # a bool slot
    (lambda x: td.cumsum(x), td.spec((3,))),                   # an op with no scalar form
])
def test_other_programs_have_no_scalar_schedule(fn, spec):
    assert _native(fn, spec).executable.native.scalar_runs == []


SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-310, -1e300, 1e300, math.inf, -math.inf,
           math.nan, 700.0, -745.0]

ALL_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: a ** b,
    "max": td.maximum, "min": td.minimum,
    "neg": lambda a, b: -a, "abs": lambda a, b: td.abs(a), "sign": lambda a, b: td.sign(a),
    "exp": lambda a, b: td.exp(a), "log": lambda a, b: td.log(a), "sin": lambda a, b: td.sin(a),
    "cos": lambda a, b: td.cos(a), "tanh": lambda a, b: td.tanh(a),
    "sqrt": lambda a, b: td.sqrt(a), "rsqrt": lambda a, b: td.rsqrt(a),
    "expm1": lambda a, b: td.expm1(a), "log1p": lambda a, b: td.log1p(a),
    "const": lambda a, b: a * 0.75 + 2.0, "copy": lambda a, b: td.stop_gradient(a),
}


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(ALL_OPS)), st.integers(0, 10**6),
                          st.integers(0, 10**6)), min_size=1, max_size=80),
       st.lists(st.tuples(st.sampled_from(SPECIAL), st.sampled_from(SPECIAL)), min_size=1,
                max_size=3))
def test_jit_equals_interpreter_bit_for_bit(steps, points):
    """Every scalar opcode, special values (NaN, infinities, -0.0, denormals, overflow) and up to 80
    values live at once, so the JIT's register cache (16 registers, cleared at every call) holds,
    evicts and reloads them; every value is an output, so every store is checked."""
    def f(x, y):
        vals = [x, y]
        for op, i, j in steps:
            vals.append(ALL_OPS[op](vals[i % len(vals)], vals[j % len(vals)]))
        return tuple(vals[2:])
    prog = compile_scalar(f)
    native = prog.executable.native
    if not native.scalar_runs:  # every step folded away: nothing to compare
        return
    interp = interpreted(native)
    for x, y in points:
        feed = {"x": x, "y": y}
        args = [np.array(feed[k]) for k in prog.inputs]
        assert bits(native.run(args)) == bits(interp.run(args)), (x, y)


def test_jit_is_used_where_available_and_can_be_turned_off():
    f, _ = build([("sin", 0.5, "mul", 0.2)] * 5)
    native = compile_scalar(f).executable.native
    assert (native.scalar_jit_bytes > 0) == JIT_PLATFORM
    assert interpreted(native).scalar_jit_bytes == 0


def test_jit_program_shared_by_threads():
    import threading
    rng = random.Random(5)
    recipe = [(rng.choice(sorted(UNARY)), rng.random(), rng.choice(sorted(BINARY)), rng.random())
              for _ in range(200)]
    f, ref = build(recipe)
    prog = compile_scalar(f)
    errors = []

    def work(seed):
        r = random.Random(seed)
        for _ in range(200):
            x, y = r.uniform(-2, 2), r.uniform(-2, 2)
            feed = {"x": x, "y": y}
            got = [float(v) for v in prog.eval([np.array(feed[k]) for k in prog.inputs])]
            if got != list(ref(x, y)):
                errors.append((x, y))
    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def _batch_program():
    rng = random.Random(11)
    recipe = [(rng.choice(sorted(UNARY)), rng.random(), rng.choice(sorted(BINARY)), rng.random())
              for _ in range(60)]
    f, ref = build(recipe)
    return compile_scalar(f), ref


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("n", [1, 15, 16, 33, 100])
def test_blocked_batch_is_bit_identical_to_single_evaluations(n, threads):
    """eval_batch runs all-scalar programs over blocks of 32 points (partial blocks at the ends
    of each thread's range); exact=True keeps every point's values those of ``eval``."""
    prog, ref = _batch_program()
    rng = np.random.default_rng(n)
    feed = {"x": rng.uniform(-2, 2, n), "y": rng.uniform(-2, 2, n)}
    batched = prog.eval_batch([feed[k] for k in prog.inputs], threads=threads)
    for b in range(n):
        single = prog.eval([np.array(feed[k][b]) for k in prog.inputs])
        assert bits([o[b] for o in batched]) == bits(single), b
        assert [float(o[b]) for o in batched] == list(ref(feed["x"][b], feed["y"][b]))


@pytest.mark.parametrize("threads", [1, 2])
def test_blocked_batch_simd_kernels_match_the_array_program(threads):
    """exact=False: the transcendental functions take the SIMD array kernels, so each point equals
    the same function traced over arrays of points (whose kernels those are), bit for bit, and
    the C library's values to within a few ulp."""
    rng = random.Random(4)
    recipe = [(rng.choice(sorted(UNARY)), rng.random(), rng.choice(sorted(BINARY)), rng.random())
              for _ in range(40)]
    f, _ = build(recipe)
    prog = compile_scalar(f)
    n = 77
    r = np.random.default_rng(0)
    X, Y = r.uniform(-2, 2, n), r.uniform(-2, 2, n)
    F = td.build(f, x=td.spec((n,)), y=td.spec((n,)))
    arr = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    want = arr.eval([{"x": X, "y": Y}[k] for k in arr.inputs])
    got = prog.eval_batch([{"x": X, "y": Y}[k] for k in prog.inputs], threads=threads,
                          exact=False)
    exact = prog.eval_batch([{"x": X, "y": Y}[k] for k in prog.inputs], threads=threads)
    for g, w, e in zip(got, want, exact):
        assert bits(g) == bits(w)
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    assert any(bits(g) != bits(e) for g, e in zip(got, exact)), "expected the SIMD kernels"


def test_jit_edge_programs():
    """No instructions, constants only, an input passed straight through, and a program of
    100,000 instructions (about 2 MB of code): the JIT agrees with the interpreter."""
    progs = [
        compile_scalar(lambda x, y: (x, y)),
        compile_scalar(lambda x, y: 2.5),
        compile_scalar(lambda x, y: (x, td.sin(y), x)),
    ]
    rng = random.Random(8)
    recipe = [(rng.choice(sorted(UNARY)), 0.999, rng.choice(sorted(BINARY)), rng.random())
              for _ in range(45_000)]  # u is the latest value: every step stays live
    f, _ = build(recipe)
    progs.append(compile_scalar(f))
    assert progs[-1].n_instructions > 100_000
    assert progs[-1].executable.native.scalar_jit_bytes > 0 or not JIT_PLATFORM
    for prog in progs:
        native = prog.executable.native
        args = [np.array(v) for v in (0.7, -1.3)[:len(prog.inputs)]]
        got = native.run(args)
        if native.scalar_runs:
            assert bits(got) == bits(interpreted(native).run(args))
        else:  # nothing to run: the inputs (or constants) come straight back
            assert bits(got) == bits(prog.eval(args))
