"""The C++ interpreter against each primitive's numpy reference (``impl``), the memory plan, the
batch entry point, concurrency and input validation."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tidu as td
from _support import values
from _support.threads import threads as _threads
from _support.values import BINARY, FLOATS, INEXACT, NUMERIC, UNARY, cases
from tidu import ops as P

rng = np.random.default_rng(0)


def value(shape, dtype, positive=False):
    return values.value(rng, shape, dtype, positive)


def program(op, avals):
    """A one-instruction program applying op to fresh inputs."""
    prog = td.compile(values.one_op_graph(op, avals), backend="cpu")
    assert prog.executable.native is not None
    return prog


def check(op, args, rtol=None):
    args = [np.asarray(a) for a in args]
    prog = program(op, [td.aval(a.shape, a.dtype) for a in args])
    feed = {("in", i): a for i, a in enumerate(args)}
    (got,) = prog(feed)
    want = np.asarray(op.impl(*args))
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    single = got.dtype in (np.float32, np.complex64)
    tol = rtol if rtol is not None else (2e-5 if single else 1e-12)
    if got.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("cls,dtype,pos", cases(UNARY),
                         ids=lambda x: getattr(x, "__name__", str(x)))
def test_unary_kernels(cls, dtype, pos):
    check(cls(), [value((2, 5), dtype, pos)])


@pytest.mark.parametrize("cls,dtype,pos", cases(BINARY),
                         ids=lambda x: getattr(x, "__name__", str(x)))
def test_binary_kernels(cls, dtype, pos):
    check(cls(), [value((3, 4), dtype, pos), value((3, 4), dtype, pos)])


def test_expm1_log1p_complex():
    z = value((4,), "complex128") * 0.5
    check(P.Expm1(), [z], rtol=1e-12)
    check(P.Log1p(), [z], rtol=1e-12)


@pytest.mark.parametrize("direction", ["EQ", "NE", "LT", "LE", "GT", "GE"])
@pytest.mark.parametrize("dtype", FLOATS + ("int32", "int64", "bool"))
def test_compare(direction, dtype):
    a = value((10,), dtype)
    b = a.copy()
    b[::2] = value((5,), dtype)
    check(P.Compare(direction), [a, b])


def test_compare_complex_equality():
    a = value((6,), "complex64")
    check(P.Compare("EQ"), [a, a])
    check(P.Compare("NE"), [a, a[::-1].copy()])


# complex -> real is refused by the shape rule (tested in test_shape_rules), so not generated
CONVERTS = [(s, d) for s in NUMERIC + ("bool",) for d in NUMERIC + ("bool",)
            if not (np.dtype(s).kind == "c" and np.dtype(d).kind != "c")]


@pytest.mark.parametrize("src,dst", CONVERTS)
def test_convert(src, dst):
    check(P.Convert(dst), [value((7,), src)])


@pytest.mark.parametrize("shape", [(3, 3), (3, 4099)])
@pytest.mark.parametrize("dtype", NUMERIC + ("bool",))
def test_select(dtype, shape):
    check(P.Select(), [value(shape, "bool"), value(shape, dtype), value(shape, dtype)])


@pytest.mark.parametrize("dtype", NUMERIC + ("bool",))
def test_select_in_a_chain_copies_every_value(dtype):
    """Select inside an elementwise chain (blocks of a long array; the kernel loads both operands
    and blends): every element, NaN and infinities included, is the chosen operand's."""
    n = 3 * 4096 + 5
    rng = np.random.default_rng(11)
    c = rng.random(n) < 0.5
    u, v = value((n,), dtype), value((n,), dtype)
    if np.dtype(dtype).kind == "f":
        u[::7], v[::11], u[::13] = np.nan, np.inf, -np.inf

    def f(c, u, v):
        return td.where(c & (u == u) | ~c, u, v), td.where(c, v, u)

    got = td.jit(f, backend="cpu")(c, u, v)
    want = (np.where(c & (u == u) | ~c, u, v), np.where(c, v, u))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("shape, axes", [((1000, 16), (0,)), ((16, 1000), (1,)), ((7, 1, 9, 5), (1, 2)),
                                         ((3, 0, 4), (0,)), ((3, 0, 4), (1,)), ((4, 5, 6), (0, 2)),
                                         ((1, 8, 1), (0, 1, 2)), ((2, 3), ()),
                                         ((64, 64, 3), (2,)), ((50, 40, 3), (1,)), ((9, 5, 3), (0, 1)),
                                         ((40, 600), (0,)), ((3, 20, 300), (1,)),
                                         ((64, 64, 3), (1,)), ((5, 7, 15), (1,)), ((130, 2, 2), (1,))])
def test_reductions_of_every_layout_match_numpy_with_nan_and_int_wrap(shape, axes):
    """Leading, trailing, middle and split reduced axes (the contiguous fast paths and the
    general loop), NaN propagating through max, integer sums wrapping as numpy's."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    if x.size:
        x.flat[rng.integers(0, x.size, 3)] = np.nan
    F = td.build(lambda v: (td.sum(v, axis=axes), td.max(v, axis=axes)) if x.size else
                 td.sum(v, axis=axes), v=td.spec(shape))
    out = td.compile(td.materialize_merge(td.resolve([F]), F.outputs)).eval([x])
    np.testing.assert_allclose(out[0], np.sum(x, axis=axes), rtol=1e-12)
    if x.size:
        np.testing.assert_array_equal(out[1], np.max(x, axis=axes))
    big = np.full(shape, np.iinfo(np.int64).max, np.int64)
    F = td.build(lambda v: td.sum(v, axis=axes), v=td.spec(shape, "int64"))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(
            td.compile(td.materialize_merge(td.resolve([F]), F.outputs)).eval([big])[0],
            np.sum(big, axis=axes))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_reductions_any_axes(shape, data):
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
    dtype = data.draw(st.sampled_from(NUMERIC))
    x = value(tuple(shape), dtype)
    check(P.ReduceSum(tuple(axes)), [x], rtol=1e-4 if dtype in ("float32", "complex64") else None)
    if np.dtype(dtype).kind != "c":
        check(P.ReduceMax(tuple(axes)), [x])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=0, max_size=4), st.data())
def test_transpose_reshape_broadcast(shape, data):
    shape = tuple(shape)
    dtype = data.draw(st.sampled_from(NUMERIC + ("bool",)))
    x = value(shape, dtype)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    check(P.Transpose(perm), [x])
    check(P.Reshape((int(np.prod(shape)),)), [x])
    # broadcast into a bigger rank with some size-1 axes expanded
    out_shape = (2,) + tuple(d if d != 1 else 3 for d in shape)
    x1 = value(tuple(1 if d == 1 else d for d in shape), dtype)
    check(P.BroadcastInDim(out_shape, tuple(range(1, len(shape) + 1))), [x1])


@pytest.mark.parametrize("src, out, dims", [((64, 1, 3), (64, 64, 3), (0, 1, 2)),
                                             ((1, 64, 3), (64, 64, 3), (0, 1, 2)),
                                             ((2, 5, 1, 3), (2, 5, 7, 3), (0, 1, 2, 3)),
                                             ((5, 15), (4, 5, 6, 15), (1, 3)),
                                             ((64, 64), (64, 64, 3), (0, 1))])
def test_broadcast_with_short_rows_matches_numpy(src, out, dims):
    """Broadcasts whose last axis is short (the pair arrays of an n-body force): the
    short-row loop of the strided copy, with repeated and contiguous rows, over 2-4 axes."""
    x = value(src, "float64")
    check(P.BroadcastInDim(out, dims), [x])
    check(P.Transpose((1, 0)), [value((3, 64), "float64")])  # a strided short row


@pytest.mark.parametrize("n, k", [(64, 3), (64, 2), (48, 4), (50, 3), (64, 5)])
def test_pair_arrays_in_a_chain_match_numpy_exactly(n, k):
    """Chains over (n, n, k) pair arrays (over 8,192 elements, so the broadcasts run block by
    block inside the chain): rows of k copied (x[:, None] - x[None]) or one value repeated
    (w[:, :, None]), including blocks that cut a row; each element is one IEEE operation per
    step, so the values are numpy's bit for bit."""
    rng = np.random.default_rng(k)
    x, w = rng.standard_normal((n, k)), rng.standard_normal((n, n))

    def f(x, w):
        d = x[:, None, :] - x[None, :, :]
        b = w[:, :, None] * d
        return -(b * d + d * b)

    got = td.jit(f, backend="cpu")(x, w)
    np.testing.assert_array_equal(got, f(x, w))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=3), st.data())
def test_slice_pad_concatenate(shape, data):
    shape = tuple(shape)
    dtype = data.draw(st.sampled_from(("float64", "complex64", "int32")))
    x = value(shape, dtype)
    start = tuple(data.draw(st.integers(0, d)) for d in shape)
    limit = tuple(data.draw(st.integers(s, d)) for s, d in zip(start, shape))
    stride = tuple(data.draw(st.integers(1, 3)) for _ in shape)
    check(P.Slice(start, limit, stride), [x])
    lo = tuple(data.draw(st.integers(0, 2)) for _ in shape)
    hi = tuple(data.draw(st.integers(0, 2)) for _ in shape)
    it = tuple(data.draw(st.integers(0, 2)) for _ in shape)
    check(P.Pad(lo, hi, it), [x])
    axis = data.draw(st.integers(0, len(shape) - 1))
    other = list(shape)
    other[axis] = data.draw(st.integers(0, 3))
    check(P.Concatenate(axis), [x, value(tuple(other), dtype), x])


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_dot_general_dimension_numbers(data):
    nb = data.draw(st.integers(0, 2))
    nc = data.draw(st.integers(0, 2))
    nlf = data.draw(st.integers(0, 2))
    nrf = data.draw(st.integers(0, 2))
    dim = st.integers(1, 3)
    bdims = [data.draw(dim) for _ in range(nb)]
    cdims = [data.draw(dim) for _ in range(nc)]
    lf = [data.draw(dim) for _ in range(nlf)]
    rf = [data.draw(dim) for _ in range(nrf)]
    # random axis placement on each side
    lperm = data.draw(st.permutations(range(nb + nc + nlf)))
    rperm = data.draw(st.permutations(range(nb + nc + nrf)))
    lshape_logical = bdims + cdims + lf
    rshape_logical = bdims + cdims + rf
    lshape = [0] * len(lperm)
    rshape = [0] * len(rperm)
    for logical, pos in enumerate(lperm):
        lshape[pos] = lshape_logical[logical]
    for logical, pos in enumerate(rperm):
        rshape[pos] = rshape_logical[logical]
    lb = tuple(lperm[i] for i in range(nb))
    lc = tuple(lperm[nb + i] for i in range(nc))
    rb = tuple(rperm[i] for i in range(nb))
    rc = tuple(rperm[nb + i] for i in range(nc))
    dtype = data.draw(st.sampled_from(NUMERIC))
    check(P.DotGeneral(lc, rc, lb, rb), [value(tuple(lshape), dtype), value(tuple(rshape), dtype)],
          rtol=1e-4 if dtype in ("float32", "complex64") else None)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_constant_and_iota(dtype):
    c = P.Constant.of(value((2, 3), dtype))
    (got,) = program(c, []).eval([])
    np.testing.assert_array_equal(got, c.value)
    for shape, dim in [((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), 2), ((5000,), 0), ((0, 4), 1),
                       ((3, 0), 0)]:  # the counting axis first, inner, last; long; empty
        io = P.Iota(shape, dtype, dim)
        (got,) = program(io, []).eval([])
        np.testing.assert_array_equal(got, io.impl())


def test_matmul_large_matches_numpy():
    a, b = value((64, 96), "float64"), value((96, 33), "float64")
    check(P.DotGeneral((1,), (0,)), [a, b], rtol=1e-11)


# ---- memory plan ----

def _live_intervals(arrays, n_instr):
    first, last = {}, {}
    for s in arrays["input_slots"]:
        first[int(s)] = -1
    for i in range(n_instr):
        for s in arrays["in_slots"][arrays["in_off"][i]:arrays["in_off"][i + 1]]:
            last[int(s)] = i
        first[int(arrays["out_slots"][i])] = i
    for s in arrays["output_slots"]:
        last[int(s)] = n_instr
    return first, last


def test_memory_plan_never_overlaps_live_slots():
    def fn(x, w):
        h = x
        for _ in range(6):
            h = td.tanh(h @ w) + h * 0.5
        return td.sum(h * h), h[0]

    prog = td.compile(td.materialize_merge(*(lambda f: (td.resolve([f]), f.outputs))(
        td.build(fn, x=td.spec((8, 8)), w=td.spec((8, 8))))), backend="cpu")
    nat = prog.executable.native
    rep = prog.memory_report()
    assert rep["arena_bytes"] < rep["naive_bytes"]  # buffers are reused
    arrays = prog.executable.arrays
    first, last = _live_intervals(arrays, prog.n_instructions)
    offsets = nat.offsets
    avals = prog.executable.slot_avals
    inputs = {int(s) for s in arrays["input_slots"]}
    slots = [s for s in first if s not in inputs]
    for i, s in enumerate(slots):
        for t in slots[i + 1:]:
            live_s = (first[s], last.get(s, first[s]))
            live_t = (first[t], last.get(t, first[t]))
            if live_s[1] < live_t[0] or live_t[1] < live_s[0]:
                continue  # never live together
            a0, a1 = offsets[s], offsets[s] + avals[s].size * avals[s].dtype.itemsize
            b0, b1 = offsets[t], offsets[t] + avals[t].size * avals[t].dtype.itemsize
            assert a1 <= b0 or b1 <= a0, f"slots {s} and {t} overlap while both live"
    # and the reused-buffer program computes what numpy computes
    x, w = value((8, 8), "float64"), value((8, 8), "float64") * 0.3
    got = prog({"x": x, "w": w})
    h = x
    for _ in range(6):
        h = np.tanh(h @ w) + h * 0.5
    np.testing.assert_allclose(got[0], np.sum(h * h), rtol=1e-12)
    np.testing.assert_allclose(got[1], h[0], rtol=1e-12)


def test_arenas_are_lent_between_calls_reused_dirty_and_moved_and_values_hold():
    """An idle program lends its arena to the pool (ArenaPool); the next program's first
    evaluation takes that dirty block, and a program whose block was taken (or freed) meanwhile
    gets another and points its slots at it.  Every evaluation still computes the right values."""
    from tidu import _eval, evaluator

    def fn(x, w):
        h = x
        for _ in range(4):
            h = td.tanh(h @ w) + 0.5 * h
        return td.sum(h * h), h

    prog = td.compile(td.materialize_merge(*(lambda f: (td.resolve([f]), f.outputs))(
        td.build(fn, x=td.spec((64, 64)), w=td.spec((64, 64))))), backend="cpu")
    arena = prog.memory_report()["arena_bytes"]
    assert arena >= 64 << 10  # kept blocks start at 64 KiB

    def check(native, x, w):
        got = native.run([{"x": x, "w": w}[k] for k in prog.inputs])
        h = x
        for _ in range(4):
            h = np.tanh(h @ w) + 0.5 * h
        np.testing.assert_allclose(got[0], np.sum(h * h), rtol=1e-12)
        np.testing.assert_allclose(got[1], h, rtol=1e-12, atol=1e-14)

    feeds = [(value((64, 64), "float64"), value((64, 64), "float64") * 0.2) for _ in range(4)]
    _eval.release_arena_pool()
    a = evaluator.encode(prog.executable.arrays)
    check(a, *feeds[0])
    assert _eval.arena_pool_bytes() >= arena  # lent while idle
    _eval.release_arena_pool()  # a's block is freed: its next call gets new memory
    check(a, *feeds[1])
    b = evaluator.encode(prog.executable.arrays)
    check(b, *feeds[2])  # b's first call takes the block a lent
    check(a, *feeds[3])
    check(b, *feeds[0])
    del a, b
    assert _eval.arena_pool_bytes() >= arena
    _eval.release_arena_pool()
    assert _eval.arena_pool_bytes() == 0


# ---- batch and threads ----

def _grad_prog():
    F0 = td.build(lambda x, a: td.sum(td.exp(a * x) * td.sin(x)), x=td.spec((3,)), a=td.spec(()))
    T1 = td.transpose(td.differentiate(td.resolve([F0]), F0.outputs, ["x"]))
    (ct,) = [k for _, k in T1.tangent_inputs]
    g = td.materialize_merge(td.resolve([F0, T1]), F0.outputs + T1.tangent_outputs)
    return td.compile(g, backend="cpu"), ct


@pytest.mark.parametrize("threads", [1, 3])
def test_batch_equals_loop_of_singles(threads):
    prog, ct = _grad_prog()
    n = 37
    feeds = {"x": value((n, 3), "float64"), "a": value((n,), "float64"), ct: np.ones(n)}
    batched = prog.eval_batch([feeds[k] for k in prog.inputs], threads=threads)
    for b in range(n):
        single = prog.eval([feeds[k][b] for k in prog.inputs])
        for got, want in zip(batched, single):
            np.testing.assert_array_equal(got[b], want)


def test_concurrent_evaluation_from_eight_threads():
    prog, ct = _grad_prog()
    feeds = [{"x": value((3,), "float64"), "a": value((), "float64"), ct: 1.0} for _ in range(8)]
    want = [prog(f) for f in feeds]
    results = [None] * 8
    barrier = threading.Barrier(8)

    def work(i):
        barrier.wait()
        for _ in range(200):
            out = prog(feeds[i])
        results[i] = out

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r, w in zip(results, want):
        for a, b in zip(r, w):
            np.testing.assert_array_equal(a, b)


# ---- inputs ----

def test_zero_copy_out_and_input_errors():
    F0 = td.build(lambda x, n: x * td.astype(n, "float64"), x=td.spec((2,)), n=td.spec((), "int32"))
    prog = td.compile(td.materialize_merge(td.resolve([F0]), F0.outputs), backend="cpu")
    order = prog.inputs
    feed = {"x": np.array([1.0, 2.0]), "n": np.int32(3)}
    out = [np.empty(2)]
    res = prog.eval([feed[k] for k in order], out=out)
    assert res[0] is out[0] and list(out[0]) == [3.0, 6.0]
    np.testing.assert_array_equal(prog({"x": np.arange(4.0)[::2], "n": 2})[0], [0.0, 4.0])
    with pytest.raises(ValueError, match=r"input 0 \('x'\): expected shape \(2,\), got \(3,\)"):
        prog({"x": np.ones(3), "n": 1})
    with pytest.raises(TypeError, match=r"input 1 \('n'\): expected dtype int32, got float64"):
        prog({"x": np.ones(2), "n": 1.5})
    with pytest.raises(KeyError, match="missing input"):
        prog({"x": np.ones(2)})
    with pytest.raises(ValueError, match="takes 2 inputs"):
        prog.eval([np.ones(2)])
    with pytest.raises(ValueError, match="out\\[0\\]"):
        prog.eval([feed[k] for k in order], out=[np.empty(3)])
    with pytest.raises(ValueError, match="batch"):
        prog.eval_batch([np.ones((4, 2)) if k == "x" else np.ones(3, np.int32) for k in order])


def test_corrupt_programs_are_rejected_by_the_cpp_validator():
    from tidu import _eval

    u8, u32, i64 = np.uint8, np.uint32, np.int64
    ok = dict(slot_dtype=np.array([1, 1], u8), slot_ndim=np.array([0, 0], u32),
              shapes=np.array([], i64), opcode=np.array([_eval.OPCODES.index("Exp")], u8),
              in_off=np.array([0, 1], u32), in_slots=np.array([0], u32),
              out_off=np.array([0, 1], u32), out_slots=np.array([1], u32),
              attr_off=np.array([0, 0], u32),
              attrs=np.array([], i64), consts=np.array([], u8), inputs=np.array([0], u32),
              outputs=np.array([1], u32))
    prog = _eval.Program(*ok.values())
    assert float(prog.run([np.array(0.0)])[0]) == 1.0
    for key, bad, msg in [("opcode", np.array([250], u8), "bad opcode"),
                          ("in_slots", np.array([7], u32), "reads a slot"),
                          ("out_slots", np.array([0], u32), "output slot"),
                          ("out_off", np.array([0, 0], u32), "no output"),
                          ("outputs", np.array([9], u32), "output slot"),
                          ("slot_dtype", np.array([1, 99], u8), "unknown dtype"),
                          ("in_off", np.array([0], u32), "lengths disagree")]:
        args = dict(ok, **{key: bad})
        with pytest.raises(ValueError, match=msg):
            _eval.Program(*args.values())


@pytest.mark.parametrize("n", [10_000, 300_001])
def test_blocked_elementwise_chains_match_numpy(n):
    """Long elementwise chains run block by block (and over threads when large); the result is
    the instruction-by-instruction one, buffers reused by the memory plan included."""
    def chain(ns, x, y):
        v = x
        for i in range(30):
            v = ns.sin(v) * 0.9 + y if i % 2 else ns.tanh(v) - 0.1 * y
        return ns.where(v > 0, v, -v).astype("float32"), v * 2

    x, y = np.linspace(-2, 2, n), np.cos(np.linspace(0, 9, n))
    F = td.build(lambda x, y: chain(td, x, y), x=td.spec((n,)), y=td.spec((n,)))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    got = prog({"x": x, "y": y})

    class NS:
        sin, tanh, where = np.sin, np.tanh, np.where

    want = chain(NS, x, y)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)


def test_chain_locals_reuse_buffers_whose_last_read_passed():
    """A chain's block buffers are given back after their value's last read (Program::find_locals):
    a chain of 40 steps takes about the scratch of one of 10, so its blocks stay in L1; without
    the reuse, each step's two intermediates took a buffer of 8 KB per thread."""
    def steps(k):
        def f(x, y):
            for i in range(k):
                x = td.sin(x) * 0.9 + y if i % 2 else td.tanh(x) - 0.1 * y
            return x
        return f

    n = 10_000
    spec = {"x": td.spec((n,)), "y": td.spec((n,))}
    progs = [td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
             for F in (td.build(steps(k), **spec) for k in (10, 40))]
    short, long = (p.memory_report() for p in progs)
    assert long["workspace_bytes"] - short["workspace_bytes"] < 16 * 1024, (short, long)
    x, y = np.linspace(-2, 2, n), np.cos(np.linspace(0, 9, n))
    want = x  # the values, numpy step by step
    for i in range(40):
        want = np.sin(want) * 0.9 + y if i % 2 else np.tanh(want) - 0.1 * y
    np.testing.assert_allclose(progs[1]({"x": x, "y": y})[0], want, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128", "int32"])
def test_broadcasts_and_iotas_inside_blocked_chains(dtype):
    """Broadcasts of any operand (rows, columns, size-1 axes, new leading axes) and iotas run block
    by block inside elementwise chains with the values of the instruction-by-instruction run."""
    from tidu.trace.tracer import _emit

    big = (97, 131)  # not a multiple of the block size: rows straddle block edges

    def bc(x, shape, dims):
        return _emit(x._t, P.BroadcastInDim(shape, dims), x)

    def iota(x, shape, dim):
        return _emit(x._t, P.Iota(shape, dtype, dim))

    def f(a, r, c, m):  # a: (97, 131), r: (131,), c: (97,), m: (131, 97)
        t = a + bc(r, big, (1,))                                   # rows
        t = t * bc(c, big, (0,))                                   # columns
        t = t + td.transpose(m)
        t = t - bc(td.reshape(c, (97, 1)), big, (0, 1))            # a size-1 axis
        t = t + iota(a, big, 0) * iota(a, big, 1)
        return t, bc(t, (3,) + big, (1, 2)) + iota(a, (3,) + big, 0)

    def ref(a, r, c, m):
        t = (a + r[None, :]) * c[:, None] + m.T - c[:, None]
        t = t + np.arange(97)[:, None].astype(dtype) * np.arange(131)[None, :].astype(dtype)
        return t, t[None] + np.arange(3).astype(dtype)[:, None, None]

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s) for s in [big, (131,), (97,), (131, 97)]]
    args = [(x * 5).astype(dtype) if dtype == "int32" else
            (x + 1j * x[::-1] if dtype.startswith("complex") else x).astype(dtype) for x in args]
    F = td.build(f, **{k: td.spec(x.shape, dtype) for k, x in zip("arcm", args)})
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    got, want = prog(dict(zip("arcm", args))), ref(*args)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def test_a_chained_broadcast_keeps_its_operand_buffer():
    """A broadcast in a chain reads its operand at other positions than the block it writes; a
    later instruction of the chain whose output has the operand's byte size must not be given
    the operand's buffer (the float32 convert below has the bytes of the float64 vector)."""
    from tidu.trace.tracer import _emit

    n = 97 * 131
    x = np.linspace(-3, 3, n)

    def f(x):
        v = td.sin(x) * 2.0 + x                       # its own chain, n float64 (8n bytes)
        b = _emit(v._t, P.BroadcastInDim((2, n), (1,)), v)   # chain over 2n elements
        c = td.tanh(b).astype("float32")              # 2n float32: 8n bytes, as v
        return c * np.float32(3.0) + np.float32(1.0)

    F = td.build(f, x=td.spec((n,)))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    want = np.tanh(np.sin(x) * 2 + x).astype(np.float32) * 3 + 1
    np.testing.assert_allclose(prog({"x": x})[0], np.broadcast_to(want, (2, n)), rtol=1e-6)


def test_small_work_is_scheduled_out_of_chains_and_intermediates_take_no_arena():
    """The vectors broadcasts expand are computed before the chain over the matrix (one chain, not
    one per vector), and the chain's intermediates live in block scratch, not in the arena."""
    def f(ns, x, y):
        t = x * ns.tanh(y)[None, :]
        t = ns.exp(t * 0.5) + (ns.sin(y) * 2.0)[None, :]
        for _ in range(10):
            t = ns.tanh(t) * 1.5 - (y * y)[None, :] * 0.1
        return ns.where(t > 0, t, 0.5 * t)

    x, y = np.linspace(-2, 2, 300 * 400).reshape(300, 400), np.cos(np.arange(400.0))
    F = td.build(lambda x, y: f(td, x, y), x=td.spec((300, 400)), y=td.spec((400,)))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    native = prog.executable.native
    chains = native.array_chains
    assert len(chains) == 1 and chains[0][0] == 300 * 400 and len(chains[0][1]) >= 30, chains
    assert native.arena_bytes < 300 * 400 * 8 * 2  # the output and one value, not 30

    class NS:
        sin, tanh, exp, where = np.sin, np.tanh, np.exp, np.where

    for _ in range(2):  # the block scratch is reused by the second evaluation
        np.testing.assert_allclose(prog({"x": x, "y": y})[0], f(NS, x, y), rtol=1e-11, atol=1e-12)


def test_leaf_broadcasts_join_their_readers_chain_and_small_work_does_not_cut_it():
    """A large broadcast of a scalar or a vector waits for the instruction that reads it (not a
    chain of broadcasts written out whole, ready long before their readers), and small work a
    chain waits for (a reshape of a row of standard deviations) runs before the chain instead of
    cutting it in two: corrcoef's scaling and clipping are one chain."""
    x = np.random.default_rng(1).standard_normal((128, 96))
    F = td.build(lambda x: td.corrcoef(x), x=td.spec(x.shape))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    chains = prog.executable.native.array_chains
    last = [ops for size, ops in chains if size == 128 * 128]
    # the two divisions by the standard deviations and the clip, with their broadcasts
    assert any(ops.count("Div") >= 2 and "Max" in ops and "Min" in ops for ops in last), chains
    assert not any(set(ops) == {"BroadcastInDim"} for ops in last), chains
    for _ in range(2):
        np.testing.assert_allclose(prog({"x": x})[0], np.corrcoef(x), rtol=1e-12, atol=1e-12)


def test_a_reshape_shares_its_operands_buffer():
    """A reshape of an intermediate takes no buffer and copies nothing: the operand's buffer
    serves both, and is freed only after the last reader of either (here the operand is read
    again after the reshape, and the reshape is reshaped again)."""
    def f(ns, x):
        y = ns.sin(x) * 2.0                      # (300, 400), an intermediate
        r = ns.reshape(y, (400, 300))
        rr = ns.reshape(r, (120000,))
        s = ns.sum(r, axis=0) + ns.sum(rr[::7])  # readers of both reshapes
        z = ns.cos(y) + y * 3.0                  # the operand read after them
        t = ns.exp(z) * 0.5                      # new values that must not take y's buffer early
        return t + ns.reshape(rr, (300, 400)), s

    x = np.linspace(-2, 2, 300 * 400).reshape(300, 400)
    F = td.build(lambda x: f(td, x), x=td.spec((300, 400)))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")

    class NS:
        sin, cos, exp, sum, reshape = np.sin, np.cos, np.exp, np.sum, np.reshape

    want = f(NS, x)
    for _ in range(2):
        got = prog({"x": x})
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-11, atol=1e-9)
    rep = prog.memory_report()
    assert rep["arena_bytes"] <= 3 * 300 * 400 * 8, rep  # y, z's chain output and one more


@pytest.mark.parametrize("dtype", INEXACT)
@pytest.mark.parametrize("lc,rc,lb,rb,ls,rs", [
    ((1,), (0,), (), (), (40, 50), (50, 30)),          # A B
    ((0,), (0,), (), (), (50, 40), (50, 30)),          # A^T B
    ((1,), (1,), (), (), (40, 50), (30, 50)),          # A B^T
    ((2,), (1,), (0,), (0,), (3, 40, 50), (3, 50, 30)),  # batched
    ((1,), (0,), (), (), (5, 4), (4, 3)),              # below the BLAS threshold
    ((1,), (0,), (), (), (600, 300), (300, 200)),      # split over threads by rows
    ((0,), (0,), (), (), (300, 600), (300, 200)),      # A^T B split by rows (columns of A)
    ((2,), (1,), (0,), (0,), (4, 200, 300), (4, 300, 150)),  # split by batch
    # One output column or row: real products take the BLAS gemv, in each stored layout.
    ((1,), (0,), (), (), (300, 50), (50, 1)),          # A b
    ((0,), (0,), (), (), (50, 300), (50, 1)),          # A^T b
    ((1,), (1,), (), (), (300, 50), (1, 50)),          # A b^T
    ((0,), (1,), (), (), (50, 300), (1, 50)),          # A^T b^T
    ((1,), (0,), (), (), (300, 50), (50,)),            # A v
    ((1,), (0,), (), (), (1, 50), (50, 300)),          # a B
    ((0,), (0,), (), (), (50, 1), (50, 300)),          # a^T B
    ((1,), (1,), (), (), (1, 50), (300, 50)),          # a B^T
    ((0,), (1,), (), (), (50, 1), (300, 50)),          # a^T B^T
    ((0,), (0,), (), (), (50,), (50, 300)),            # v B
    ((1,), (0,), (), (), (1, 500), (500, 1)),          # a dot product
    ((2,), (1,), (0,), (0,), (3, 40, 50), (3, 50, 1)),  # batched columns
    ((1,), (2,), (0,), (0,), (3, 50, 1), (3, 40, 50)),  # batched rows (a^T B^T)
    # A batch axis between the free and contracting ones: each operand is still one strided
    # matrix per batch (leading dimension past the batch axis), read in place.
    ((2,), (2,), (1,), (1,), (40, 3, 50), (30, 3, 50)),  # "qhd,khd->hqk"
    ((2,), (0,), (0,), (1,), (3, 40, 50), (50, 3, 30)),  # "hqk,khd->hqd"
    ((0,), (0,), (1,), (1,), (50, 3, 40), (50, 3, 30)),  # A^T B, strided
    ((0,), (2,), (1,), (1,), (50, 3, 40), (30, 3, 50)),  # A^T B^T, strided
    ((2,), (1,), (1,), (0,), (300, 3, 50), (3, 50)),     # one output column per batch
    ((2,), (2,), (1,), (1,), (1, 3, 50), (300, 3, 50)),  # one output row per batch
    ((3,), (3,), (1,), (1,), (4, 3, 10, 50), (30, 3, 1, 50)),  # free axes split by the batch axis
    ((1,), (1,), (2,), (2,), (40, 50, 3), (30, 50, 3)),  # batch axis last: the loops
])
def test_dot_general_with_and_without_blas(dtype, lc, rc, lb, rb, ls, rs):
    """Large products go to the BLAS hook (when installed) for every layout it can express; the
    built-in loops give the same numbers."""
    from tidu import _eval, evaluator

    x, w = value(ls, dtype), value(rs, dtype)
    op = P.DotGeneral(lc, rc, lb, rb)
    prog = program(op, [td.aval(x.shape, dtype), td.aval(w.shape, dtype)])
    rtol = 1e-4 if dtype in ("float32", "complex64") else 1e-12
    want = op.impl(x, w)
    try:
        _eval.clear_blas()
        (loops,) = program(op, [td.aval(x.shape, dtype), td.aval(w.shape, dtype)]).eval([x, w])
    finally:
        evaluator._load_blas()
    (blas,) = prog.eval([x, w])
    np.testing.assert_allclose(loops, want, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(blas, want, rtol=rtol, atol=rtol)
    assert evaluator.BLAS  # scipy-openblas32 is a runtime dependency


@pytest.mark.parametrize("dtype", INEXACT)
@pytest.mark.parametrize("form", ["x x^T", "x^T x", "batched x x^T", "a slice with itself"])
def test_products_of_an_operand_with_itself(dtype, form):
    """x x^T and x^T x of one operand take the BLAS's SYRK (real dtypes): the upper triangle, then
    mirrored, so the result is exactly symmetric; the same numbers as numpy's product and as
    tidu's loops without the BLAS, and as a GEMM of two different buffers of the same values."""
    from tidu import _eval, evaluator

    f = {"x x^T": lambda x: x @ x.T, "x^T x": lambda x: x.T @ x,
         "batched x x^T": lambda x: td.einsum("bij,bkj->bik", x, x),
         "a slice with itself": lambda x: x[:, 3:40] @ x[:, 3:40].T}[form]
    ref = {"x x^T": lambda x: x @ x.T, "x^T x": lambda x: x.T @ x,
           "batched x x^T": lambda x: np.einsum("bij,bkj->bik", x, x),
           "a slice with itself": lambda x: x[:, 3:40] @ x[:, 3:40].T}[form]
    x = value((3, 70, 90) if form.startswith("batched") else (70, 90), dtype)
    rtol = 1e-4 if dtype in ("float32", "complex64") else 1e-12
    got = td.jit(f, backend="cpu")(x)
    np.testing.assert_allclose(got, ref(x), rtol=rtol, atol=rtol * 10)
    if dtype.startswith("float"):  # complex products are GEMMs: symmetric to rounding only
        np.testing.assert_array_equal(got, np.swapaxes(got, -1, -2))
    other = td.jit(lambda a, b: {"x x^T": lambda: a @ b.T, "x^T x": lambda: a.T @ b,
                                 "batched x x^T": lambda: td.einsum("bij,bkj->bik", a, b),
                                 "a slice with itself": lambda: a[:, 3:40] @ b[:, 3:40].T}[form](),
                   backend="cpu")(x, x.copy())
    np.testing.assert_allclose(got, other, rtol=rtol, atol=rtol * 10)
    try:
        _eval.clear_blas()
        loops = td.jit(lambda x: f(x) + 0, backend="cpu")(x)
    finally:
        evaluator._load_blas()
    np.testing.assert_allclose(got, loops, rtol=rtol, atol=rtol * 10)


def test_eval_batch_applies_the_same_dtype_rules():
    prog, ct = _grad_prog()
    order = prog.inputs
    good = {"x": np.ones((2, 3)), "a": np.ones(2), ct: np.ones(2)}
    bad = dict(good, x=np.ones((2, 3), np.complex128))
    with pytest.raises(TypeError, match=r"input \d \('x'\): expected dtype float64, got complex128"):
        prog.eval_batch([bad[k] for k in order])
    ints = dict(good, a=np.ones(2, np.int64))  # a safe cast is still taken
    np.testing.assert_array_equal(prog.eval_batch([ints[k] for k in order])[0],
                                  prog.eval_batch([good[k] for k in order])[0])


def test_outputs_written_in_place_and_aliasing_calls():
    """Outputs are computed straight into the caller's buffers; an output that later instructions
    read, one listed twice, an input returned as is, and calls whose out= buffers overlap an input
    or each other (which go through the arena) all give the same values."""
    n = 5000  # large enough for the blocked elementwise chains
    F = td.build(lambda x: (td.sin(x), td.sin(x) * 2.0 + x, x, td.sin(x)), x=td.spec((n,)))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    x = np.linspace(-2, 2, n)
    want = [np.sin(x), np.sin(x) * 2.0 + x, x, np.sin(x)]
    for got, w in zip(prog.eval([x]), want):
        np.testing.assert_allclose(got, w, rtol=1e-15, atol=1e-15)
    outs = [np.empty(n) for _ in range(4)]
    prog.eval([x], out=outs)
    for got, w in zip(outs, want):
        np.testing.assert_allclose(got, w, rtol=1e-15, atol=1e-15)
    # out= overlapping the input: an in-place update
    G = td.build(lambda x: td.tanh(x) * 0.5 + x * x, x=td.spec((n,)))
    g = td.compile(td.materialize_merge(td.resolve([G]), G.outputs), backend="cpu")
    y = x.copy()
    g.eval([y], out=[y])
    np.testing.assert_allclose(y, np.tanh(x) * 0.5 + x * x, rtol=1e-15, atol=1e-15)
    # two outputs into one buffer: the later one wins, as with copies after the evaluation
    H = td.build(lambda x: (x * 2.0, x * 3.0), x=td.spec((n,)))
    h = td.compile(td.materialize_merge(td.resolve([H]), H.outputs), backend="cpu")
    buf = np.empty(n)
    h.eval([x], out=[buf, buf])
    np.testing.assert_array_equal(buf, x * 3.0)
    # and the next ordinary call still computes into fresh buffers
    a, b = h.eval([x])
    np.testing.assert_array_equal(a, x * 2.0)
    np.testing.assert_array_equal(b, x * 3.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_row_and_column_reductions_match_numpy_with_nan_and_inf(dtype):
    """ReduceSum/ReduceMax over contiguous rows run in 16 interleaved lanes (and a NaN check for
    max): NaN anywhere in a row, in the lanes or the tail, gives NaN; infinities and -0.0 as numpy;
    a float32 sum of 10^6 elements stays as accurate as numpy's pairwise sum."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 37)).astype(dtype)
    x[1, 5] = np.nan      # inside the lanes
    x[2, 36] = np.nan     # in the tail
    x[3] = -np.inf
    x[4, 0] = np.inf
    x[5] = -0.0
    for axis in (0, 1):
        for tdf, npf in ((td.max, np.max), (td.sum, np.sum)):
            got = td.jit(lambda v: tdf(v, axis=axis))(x)
            with np.errstate(invalid="ignore"):  # inf + -inf in numpy's sum over axis 0
                want = npf(x, axis=axis)
            np.testing.assert_allclose(got, want, rtol=1e-6)
    big = rng.uniform(0, 1, 10**6).astype(dtype)
    exact = np.sum(big.astype(np.float64))
    assert abs(float(td.jit(td.sum)(big)) - exact) <= 2 * abs(float(np.sum(big)) - exact) + 1e-3


# ---- small float64 array programs as scalar code (scalarize.hpp) ----

def _small(x, y):
    return (td.concatenate([x[:, ::2], td.transpose(x)[:2, :1] * y[0]], axis=1),
            td.sum(x, axis=0) + td.pad(y, (1, 0))[:3] + td.flip(y),
            td.broadcast_to(y, (2, 3)) * td.iota((2, 3), "float64", 1),
            td.exp(td.reshape(x, (3, 2))) - td.tanh(x).T, td.sum(x * x),
            x @ y + td.einsum("ij,kj->ik", x, x)[0], td.einsum("bi,bj->bij", x[:, :2], x[:, 1:]))


def _small_grad(x, y):
    def loss(x, y):
        outs = _small(x, y)
        return sum(td.sum(td.sin(o)) for o in outs)
    return td.grad(loss, argnums=(0, 1))(x, y)


@pytest.mark.parametrize("fn", [_small, _small_grad])
def test_scalarized_programs_match_the_array_interpreter(fn, monkeypatch):
    """The same program file built twice: as scalar code (the default for small float64 arrays)
    and on the array interpreter (TIDU_SCALARIZE=0): slices, pads, concatenations, broadcasts,
    transposes, flips, reductions and iotas move the same elements; values agree to rounding
    (the array kernels' exp/sin/tanh are within 3 ulp of the C library)."""
    from tidu import _eval

    F = td.build(fn, x=td.spec((2, 3)), y=td.spec((3,)))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    data = prog.executable.native.to_bytes()
    scalar = _eval.Program(data)
    monkeypatch.setenv("TIDU_SCALARIZE", "0")
    array = _eval.Program(data)
    assert scalar.scalar_runs and not array.scalar_runs
    rng = np.random.default_rng(3)
    for _ in range(5):
        ins = [rng.standard_normal(tuple(s)) for s in scalar.input_shapes]
        for a, b in zip(scalar.run(ins), array.run(ins)):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)
    # and a batch of points, blocked across points on the scalar path
    ins = [rng.standard_normal((40,) + tuple(s)) for s in scalar.input_shapes]
    for a, b in zip(scalar.run_batch(ins, 40, 2, True), array.run_batch(ins, 40, 2, True)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)


# ---- cotangent accumulation in place (Program::fuse_pad_adds) ----

def test_slice_cotangents_accumulate_in_place():
    """A gradient through many x[i]: each contribution is a padded slice; the adds that
    accumulate them take over the accumulator's buffer and add into the window only. Values are
    jax's; the accumulation is linear in the array size (it was quadratic)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)

    def loss(ns):
        return lambda x, w: (sum(ns.sin(x[i]) * w[i % 3] * x[i + 1] for i in range(x.shape[0] - 1))
                             + ns.sum(ns.cos(x[::3])))  # a strided slice: interior padding

    x, w = np.linspace(0.1, 1.0, 200), np.array([0.5, -1.0, 2.0])
    g = td.jit(td.grad(loss(td), argnums=(0, 1)))
    native = g.lower(x, w).program.executable.native
    assert native.fused_pad_adds > 100
    for a, b in zip(g(x, w), jax.grad(loss(jnp), argnums=(0, 1))(x, w)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
def test_in_place_pad_add_cases(dtype):
    """The fused add against numpy: the pad on either side of the add, the result a program
    output (written to the caller's buffer), and an accumulator that is a program input (not
    fused: the caller's buffer is never written)."""
    def f(a, b):
        acc = a * 2.0                                   # dies at the first add: fused
        acc = acc + td.pad(b[:3], (42, 35))             # pad on the right
        acc = td.pad(b[1:4], (1, 76)) + acc             # pad on the left; a program output
        return acc, a + td.pad(b[:2], (0, 78))          # the accumulator is an input: not fused
    a = (np.arange(80.0) + 1).astype(dtype)
    b = (np.arange(4.0) * 0.5 - 1).astype(dtype)
    F = td.build(f, a=td.spec((80,), dtype), b=td.spec((4,), dtype))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    assert prog.executable.native.fused_pad_adds == 2
    a0 = a.copy()
    got = prog({"a": a, "b": b})
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_allclose(got[0], np.pad(b[1:4], (1, 76)) + (a * 2 + np.pad(b[:3], (42, 35))),
                               rtol=1e-6)
    np.testing.assert_allclose(got[1], a + np.pad(b[:2], (0, 78)), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 7, 37, 1029])
def test_arithmetic_kernels_at_every_length(dtype, n):
    """+ - * / take the CPU's widest vectors (fastmath.hpp arith): every length, its tail
    included, gives numpy's IEEE results exactly."""
    a, b = value((n,), dtype), value((n,), dtype, positive=True)
    for op, f in [(P.Add(), np.add), (P.Sub(), np.subtract), (P.Mul(), np.multiply),
                  (P.Div(), np.divide)]:
        (got,) = program(op, [td.aval((n,), dtype)] * 2).eval([a, b])
        np.testing.assert_array_equal(got, f(a, b))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "complex128"])
@pytest.mark.parametrize("shape,axes", [((300, 40), (0,)), ((3, 200, 17), (1,)),
                                        ((50, 16), (0,)), ((2, 9, 33), (0, 1))])
def test_reductions_over_leading_axes(dtype, shape, axes):
    """Reductions that keep trailing columns accumulate 16 columns at a time in registers, each
    column adding its rows in order: numpy's sums exactly (floats), and NaN propagates."""
    x = value(shape, dtype)
    (got,) = program(P.ReduceSum(axes), [td.aval(shape, dtype)]).eval([x])
    np.testing.assert_allclose(got, np.sum(x, axis=axes),
                               rtol=1e-5 if dtype == "float32" else 1e-13)
    if dtype != "complex128":
        (top,) = program(P.ReduceMax(axes), [td.aval(shape, dtype)]).eval([x])
        np.testing.assert_array_equal(top, np.max(x, axis=axes))
    if dtype.startswith("float"):
        x = x.copy()
        x[(1,) * len(shape)] = np.nan
        (top,) = program(P.ReduceMax(axes), [td.aval(shape, dtype)]).eval([x])
        np.testing.assert_array_equal(np.isnan(top), np.isnan(np.max(x, axis=axes)))


@pytest.mark.parametrize("dtype", INEXACT)
@pytest.mark.parametrize("lc,rc,lb,rb,ls,rs", [
    ((1,), (0,), (), (), (64, 1), (1, 40)),            # a b^T, as stored
    ((0,), (0,), (), (), (1, 64), (1, 40)),            # stored transposed
    ((1,), (1,), (), (), (64, 1), (40, 1)),
    ((2,), (1,), (0,), (0,), (3, 64, 1), (3, 1, 40)),  # batched
    ((2,), (2,), (1,), (1,), (64, 3, 1), (40, 3, 1)),  # batch axis in the middle: strided
    ((0,), (0,), (2,), (2,), (1, 64, 3), (1, 40, 3)),
])
def test_outer_products(dtype, lc, rc, lb, rb, ls, rs):
    """Products over one contracted element (outer products) are computed directly: exactly
    the products numpy gives."""
    x, w = value(ls, dtype), value(rs, dtype)
    op = P.DotGeneral(lc, rc, lb, rb)
    (got,) = program(op, [td.aval(x.shape, dtype), td.aval(w.shape, dtype)]).eval([x, w])
    np.testing.assert_array_equal(got, op.impl(x, w))


@pytest.mark.parametrize("shape,dims,out", [((), (), (1000, 1)), ((1,), (1,), (7, 300)),
                                            ((16,), (1,), (100, 16)), ((5, 1), (0, 1), (5, 64))])
def test_broadcasts_fill_and_copy_runs(shape, dims, out):
    """Broadcasts of one value fill; rows that are contiguous runs copy."""
    x = value(shape, "float64")
    op = P.BroadcastInDim(out, dims)
    (got,) = program(op, [td.aval(shape, "float64")]).eval([x])
    np.testing.assert_array_equal(got, op.impl(x))


# ---- Convert to integers: saturating, NaN -> 0, as XLA's (and jax's astype) ----

SATURATE = np.array([1e300 + 1j, -1e300 - 5j, np.nan + 0j, 1j * np.nan, -1e300j, 3.7 + 2j,
                     -3.7 - 2j, 2.0**31 + 0j, -(2.0**31) - 1j, 2.0**63, -(2.0**63), np.inf,
                     -np.inf, 0.5 - 0j])


@pytest.mark.parametrize("src", ["complex128", "complex64", "float64", "float32"])
@pytest.mark.parametrize("dst", ["int32", "int64"])
def test_convert_to_int_saturates_in_kernel_and_impl(src, dst):
    """Was: Convert complex -> int cast the real part unchecked (undefined behaviour; UBSan: "1e+300
    is outside the range of representable values of type 'int'"). The front end refuses
    complex -> int, a loaded file does not: the kernel (and the Python impl) saturate the real
    part as float -> int does, NaN -> 0, as jax's astype of the real part."""
    from _support.forge import Asm
    from tidu import _eval

    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    with np.errstate(all="ignore"):
        x = SATURATE.astype(src) if src.startswith("complex") else SATURATE.real.astype(src)
    want = np.asarray(jax.numpy.real(x).astype(dst))  # jax deprecates astype of complex
    m = Asm()
    y = m.instr("Convert", [m.input(src, [x.size])], m.slot(dst, [x.size]),
                [list(_eval.DTYPES).index(dst)])
    m.outputs.append(y)
    prog = _eval.Program(m.prog().to_bytes())
    (got,) = prog.run([x], None)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(P.Convert(dst).impl(x), want)
    if src.startswith("float"):  # the traced path agrees (complex -> int is refused there)
        np.testing.assert_array_equal(td.jit(lambda v: td.astype(v, dst))(x), want)


@pytest.mark.parametrize("n", [2048, 3780, 9000])
def test_long_chains_over_short_arrays_split_over_threads(n):
    """A chain of hundreds of instructions over a few thousand elements takes two threads (its
    element-instructions, not its elements, decide): it was split into size >> 15 runs, 0 below
    32,768 elements, a division by zero that killed the process (scipy.special.hyp2f1 over a
    3,780-point grid). The values are those of one thread and of numpy."""
    def chain(ns, x):
        for i in range(150):
            x = ns.sin(x) * 0.9 + 0.1 if i % 2 else ns.cos(x) - 0.2 * x
        return x

    x = np.linspace(-2.0, 2.0, n)
    f = td.jit(lambda x: chain(td, x), backend="cpu")
    want = chain(np, x)
    with _threads(2):
        two = f(x)
    with _threads(1):
        one = f(x)
    np.testing.assert_allclose(two, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(two, one)


@pytest.mark.parametrize("dtype", ("float32", "complex128", "int64", "bool", "complex64", "float16"))
@pytest.mark.parametrize("shape,perm", [
    ((256, 64, 32), (0, 2, 1)),     # the last two axes swapped per batch: tiles
    ((70, 45), (1, 0)),             # a plain matrix, ragged against the tiles (32, 8 and 4 wide)
    ((512, 256), (1, 0)),           # strides that are multiples of 1 KB: the small tiles
    ((3, 1024, 37), (0, 2, 1)),     # the same, ragged
    ((1027, 515), (1, 0)),          # 2 MB and more of the wider types: bands over the pool
    ((5, 40, 33, 3), (3, 1, 0, 2)),  # the contiguous axis first, strided last
    ((8, 64, 4, 16), (0, 2, 1, 3)),  # whole rows move ("bthd->bhtd"): merged runs, no tiles
    ((6, 1, 50, 1, 40), (4, 1, 0, 3, 2)),  # size-1 axes dropped before the tiles
    ((3, 4, 5), (2, 1, 0)),          # below the tiled size
])
def test_transposes_of_every_layout_match_numpy(dtype, shape, perm):
    """Transposes merge the axes that stay in order and tile the ones that swap; every layout
    gives numpy's exact values."""
    x = value(shape, dtype)
    prog = program(P.Transpose(perm), [td.aval(shape, dtype)])
    (got,) = prog.eval([x])
    np.testing.assert_array_equal(got, np.transpose(x, perm))
    with _threads(1):  # the bands a thread takes do not change what it writes
        (one,) = prog.eval([x])
    assert one.tobytes() == got.tobytes()


@pytest.mark.parametrize("shape", [(64, 64, 3), (7, 33, 5), (3, 50, 50, 2), (41, 13, 1), (2, 3, 1000, 7),
                                   (5, 2049, 3), (9, 15)])
def test_chained_broadcasts_with_short_rows_match_numpy(shape):
    """Broadcasts inside an elementwise chain with a short last axis copy whole rows of the
    second-last axis at a time; rows cut by a block's edge (blocks of 2,048 elements) go element
    by element.  Every layout of broadcast operand gives numpy's values."""
    rng = np.random.default_rng(0)
    nd = len(shape)
    a = rng.standard_normal(shape[:-2] + (1, shape[-1]))
    b = rng.standard_normal(shape[:-2] + (shape[-2], 1))
    c = rng.standard_normal((1,) * (nd - 2) + shape[-2:])
    got = td.jit(lambda a, b, c: td.sin(a - b) * c + 1.0, backend="cpu")(a, b, c)
    np.testing.assert_allclose(got, np.sin(a - b) * c + 1.0, rtol=1e-12, atol=1e-12)


# ---- kernels the vectoriser missed (issue #30: attention's softmax and its gradient) ----

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [15, 16, 17, 128, 131])
def test_row_max_in_sse_lanes_finds_nan_and_the_max_anywhere(dtype, n):
    """ReduceMax along contiguous rows runs its 16 lanes in SSE registers and looks for NaN in the
    same pass: a NaN at any position (each lane, the tail), the largest element at any position,
    -inf rows and -0.0 give numpy's values (a row mixing -0.0 and +0.0 gives either zero: the
    lanes' order decides, as before)."""
    rng = np.random.default_rng(n)
    rows = []
    for pos in range(n):
        r = rng.standard_normal(n)
        r[pos] = np.nan
        rows.append(r)
        r = rng.standard_normal(n)
        r[pos] = 10.0
        rows.append(r)
    rows += [np.full(n, -np.inf), np.full(n, -0.0), np.where(np.arange(n) % 2, 0.0, -0.0)]
    x = np.array(rows, dtype)
    (got,) = program(P.ReduceMax((1,)), [td.aval(x.shape, dtype)]).eval([x])
    want = np.max(x, axis=1)
    np.testing.assert_array_equal(got, want)  # NaN where numpy's is; -0.0 == 0.0 here
    assert np.signbit(got[-2]) and got[-3] == -np.inf


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32", "float64"])
@pytest.mark.parametrize("shape", [(4, 128, 128), (3, 37, 70), (2, 5, 3), (1, 33, 9)])
def test_transpose_of_4_byte_elements_in_sse_blocks(dtype, shape):
    """4-byte elements are transposed in 4 x 4 blocks through SSE registers, the tile's ragged
    rows and columns element by element: every element moves unchanged (NaN payloads included)."""
    x = value(shape, dtype)
    if dtype == "float32":
        x.view(np.uint32).ravel()[::7] = 0x7FC01234  # a NaN with a payload: the bits must move as they are
    (got,) = program(P.Transpose((0, 2, 1)), [td.aval(shape, dtype)]).eval([x])
    want = np.transpose(x, (0, 2, 1))
    assert np.array_equal(got.view(f"u{x.itemsize}"), want.view(f"u{x.itemsize}"))


@pytest.mark.parametrize("dst", ["float32", "float64", "int32", "int8", "uint8", "complex64"])
def test_convert_of_a_long_bool_mask(dst):
    """bool -> number reads the mask as bytes (vectorised): 0 and 1 over a long array, alone and
    inside an elementwise chain."""
    rng = np.random.default_rng(2)
    m = rng.random(3 * 4096 + 7) < 0.5
    check(P.Convert(dst), [m])
    y = rng.standard_normal(m.shape).astype(dst if dst != "int8" and dst != "uint8" else "float32")
    got = td.jit(lambda m, y: m.astype(y.dtype) * y + y, backend="cpu")(m, y)
    np.testing.assert_array_equal(got, m.astype(y.dtype) * y + y)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [20000, 8192 + 5, 65536 * 3 + 1])
def test_chains_fill_a_broadcast_value_once_per_thread(threads, n):
    """A chain-local broadcast of one value (a constant, or a scalar computed before the chain)
    is filled at the first block a thread runs and kept for its later blocks (Program::fill_once):
    block counts that leave a short last block, one and two threads, numpy's exact values."""
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n), rng.standard_normal(7)
    k = rng.integers(0, 2**62, n)
    with _threads(threads):
        got = td.jit(lambda x, y: (x * 2.0 + 1.0) * td.sum(y) - 3.0, backend="cpu")(x, y)
        gk = td.jit(lambda k: ((k ^ (k << 13)) ^ ((k ^ (k << 13)) >> 7)) & 0xFFFF, backend="cpu")(k)
    np.testing.assert_array_equal(got, (x * 2.0 + 1.0) * np.sum(y) - 3.0)
    np.testing.assert_array_equal(gk, ((k ^ (k << 13)) ^ ((k ^ (k << 13)) >> 7)) & 0xFFFF)


@pytest.mark.parametrize("n", [8192 + 1, 131072 + 7, 300001])
def test_chains_of_wide_elements_run_shorter_blocks(n):
    """A chain whose values include 8- or 16-byte elements runs blocks of 512 elements, one of
    narrower ones blocks of 2,048 (Program::chain_block): mixed chains, lengths that cut a last
    block short, one and two threads; exact operations give numpy's values, and a fused float64
    sum the same bits on every thread count (its runs are 32,768 elements either way)."""
    rng = np.random.default_rng(n)
    x32 = rng.standard_normal(n).astype(np.float32)
    x64 = rng.standard_normal(n)
    k = rng.integers(-(2**40), 2**40, n)
    f = td.jit(lambda a, b, k: (a * 2.0 - 1.0, (a.astype(np.float64) * b + 3.0),
                                (k ^ (k >> 3)) + 5, td.where(a > 0, b, -b), td.sum(b * b + 1.0)),
               backend="cpu")
    runs = []
    for threads in (1, 2, 4):
        with _threads(threads):
            runs.append(f(x32, x64, k))
    want = (x32 * np.float32(2.0) - np.float32(1.0), x32.astype(np.float64) * x64 + 3.0,
            (k ^ (k >> 3)) + 5, np.where(x32 > 0, x64, -x64))
    for got, w in zip(runs[0][:4], want):
        np.testing.assert_array_equal(got, w)
    np.testing.assert_allclose(runs[0][4], np.sum(x64 * x64 + 1.0), rtol=1e-13)
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
