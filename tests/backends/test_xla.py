"""The XLA backend against the C++ interpreter: every primitive x dtype (single and batched),
hypothesis-drawn graphs, gradients and Hessians, the StableHLO text, backends and errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import tidu as td
from _support import values
from _support.values import ALL, BINARY, FLOATS, INTS, NUMERIC, UNARY, cases
from tidu import ops as P
from tidu import xla

jax = pytest.importorskip("jax")  # the test extra installs it; the backend needs it

rng = np.random.default_rng(1)


def value(shape, dtype, positive=False):
    return values.value(rng, shape, dtype, positive)


graph = values.one_op_graph


def close(got, want, dtype):
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype,
                                                                  want.shape, want.dtype)
    if np.dtype(dtype).kind in "fc":
        tol = 2e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


def check(op, args, batch=3):
    """op on XLA equals the interpreter, for one point and for a batch of points."""
    args = [np.asarray(a) for a in args]
    g = graph(op, [td.aval(a.shape, a.dtype) for a in args])
    cpu, acc = td.compile(g, backend="cpu"), td.compile(g, backend="xla")
    assert (cpu.backend, acc.backend) == ("cpu", "xla")
    (want,) = cpu.eval(args)
    (got,) = acc.eval(args)
    close(got, want, want.dtype)
    if batch:
        pts = [[np.asarray(a) if i == 0 else _perturb(a) for a in args] for i in range(batch)]
        stacked = [np.stack([p[j] for p in pts]) for j in range(len(args))]
        (wb,) = cpu.eval_batch(stacked)
        (gb,) = acc.eval_batch(stacked)
        close(gb, wb, wb.dtype)


def _perturb(a):
    a = np.asarray(a)
    if a.dtype.kind == "b":
        return ~a
    if a.dtype.kind == "i":
        return (a + 1).astype(a.dtype)
    return (a * 1.25).astype(a.dtype)


@pytest.mark.parametrize("cls,dtype,pos", cases(UNARY),
                         ids=lambda x: getattr(x, "__name__", str(x)))
def test_unary(cls, dtype, pos):
    check(cls(), [value((2, 5), dtype, pos)])


@pytest.mark.parametrize("cls,dtype,pos", cases(BINARY),
                         ids=lambda x: getattr(x, "__name__", str(x)))
def test_binary(cls, dtype, pos):
    check(cls(), [value((3, 4), dtype, pos), value((3, 4), dtype, pos)])


@pytest.mark.parametrize("direction", ["EQ", "NE", "LT", "LE", "GT", "GE"])
@pytest.mark.parametrize("dtype", FLOATS + INTS + ("bool",))
def test_compare(direction, dtype):
    a = value((10,), dtype)
    b = a.copy()
    b[::2] = value((5,), dtype)
    check(P.Compare(direction), [a, b])


@pytest.mark.parametrize("direction", ["EQ", "NE"])
def test_compare_complex(direction):
    a = value((6,), "complex128")
    b = a.copy()
    b[::2] += 1
    check(P.Compare(direction), [a, b])


CONVERTS = [(s, d) for s in ALL for d in ALL
            if not (np.dtype(s).kind == "c" and np.dtype(d).kind != "c")]


@pytest.mark.parametrize("src,dst", CONVERTS)
def test_convert(src, dst):
    x = value((7,), src)
    if np.dtype(src).kind in "fc" and np.dtype(dst).kind == "i":
        x = (x * 3).astype(src)  # fractional values: truncation toward zero on both
    check(P.Convert(dst), [x])


@pytest.mark.parametrize("dtype", ALL)
def test_select(dtype):
    check(P.Select(), [value((3, 3), "bool"), value((3, 3), dtype), value((3, 3), dtype)])


@pytest.mark.parametrize("dtype", NUMERIC)
def test_reductions(dtype):
    x = value((2, 3, 4), dtype)
    for axes in [(), (0,), (1, 2), (0, 1, 2)]:
        check(P.ReduceSum(axes), [x])
        if np.dtype(dtype).kind != "c":
            check(P.ReduceMax(axes), [x])


@pytest.mark.parametrize("dtype", ALL)
def test_layout(dtype):
    x = value((2, 3, 1), dtype)
    check(P.Transpose((2, 0, 1)), [x])
    check(P.Reshape((3, 2)), [x])
    check(P.BroadcastInDim((4, 2, 3, 5), (1, 2, 3)), [x])
    check(P.BroadcastInDim((2, 3), ()), [value((), dtype)])


@pytest.mark.parametrize("dtype", ALL)
def test_slice_pad_concatenate(dtype):
    x = value((5, 4), dtype)
    check(P.Slice((1, 0), (5, 3), (2, 2)), [x])
    check(P.Slice((0, 2), (0, 2), (1, 1)), [x])
    check(P.Pad((1, 0), (2, 1), (1, 0)), [x])
    check(P.Concatenate(1), [x, value((5, 2), dtype), x])


@pytest.mark.parametrize("dtype", NUMERIC)
def test_dot_general(dtype):
    check(P.DotGeneral((1,), (0,)), [value((3, 4), dtype), value((4, 5), dtype)])
    check(P.DotGeneral((2,), (1,), (0,), (0,)), [value((2, 3, 4), dtype), value((2, 4, 5), dtype)])
    check(P.DotGeneral((0, 2), (2, 1), (1,), (0,)),
          [value((3, 2, 4), dtype), value((2, 4, 3, 5), dtype)])
    check(P.DotGeneral((), ()), [value((2,), dtype), value((3,), dtype)])  # outer product
    # batched outer products (written rhs first, then transposed): a batch axis that is not
    # leading, two lhs free axes
    check(P.DotGeneral((), (), (1,), (0,)), [value((3, 2, 4), dtype), value((2, 5), dtype)])
    check(P.DotGeneral((), (), (0,), (1,)), [value((2, 3), dtype), value((5, 2), dtype)])


@pytest.mark.parametrize("dtype", ALL)
def test_constant_and_iota(dtype):
    data = value((2, 3), dtype)
    b = td.FragmentBuilder()
    (c,) = b.add_op(P.Constant.of(data), [])
    outs = [td.Local(c)]
    if dtype in NUMERIC:
        (i,) = b.add_op(P.Iota((2, 3), dtype, 1), [])
        outs.append(td.Local(i))
    frag = b.build(outs)
    g = td.materialize_merge(td.resolve([frag]), frag.outputs)
    for got, want in zip(td.compile(g, backend="xla").eval([]),
                         td.compile(g, backend="cpu").eval([])):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(td.compile(g, backend="xla").eval([])[0], data)


def test_constants_are_exact_and_special_values_survive():
    """Hex literals carry every bit (-0, inf, nan, denormals, the largest finite value)."""
    for dt in ("float64", "float32", "complex128", "complex64"):
        fi = np.finfo(np.dtype(dt))
        x = np.array([np.pi, -0.0, np.inf, -np.inf, np.nan, fi.smallest_subnormal, fi.max],
                     dtype=fi.dtype)
        c = x.astype(dt)
        if dt.startswith("complex"):
            c.imag = x[::-1]
        b = td.FragmentBuilder()
        (k,) = b.add_op(P.Constant.of(c), [])
        frag = b.build([td.Local(k)])
        (got,) = td.compile(td.materialize_merge(td.resolve([frag]), frag.outputs),
                            backend="xla").eval([])
        assert got.tobytes() == c.tobytes(), (got, c)
        # and through arithmetic: XLA's CPU runtime flushes denormal results to zero, a GPU
        # keeps them; each part must be the exact sum or its flushed form
        got = td.jit(lambda v, c=c: v * 1 + c, backend="xla")(np.ones(7, dt))
        with np.errstate(invalid="ignore", over="ignore"):
            exact = (np.ones(7, dt) + c).view(fi.dtype)  # real (and imaginary) parts
        flushed = np.where(np.abs(exact) < fi.tiny, 0, exact).astype(fi.dtype)
        parts = got.view(fi.dtype)
        same = lambda a, b: (a == b) | (np.isnan(a) & np.isnan(b))  # noqa: E731
        assert np.all(same(parts, exact) | same(parts, flushed)), (got, exact, flushed)


# ---- graphs, gradients, Hessians ----

def mlp(w1, w2, x):
    return td.sum(td.tanh(x @ w1) @ w2)


def test_jit_gradient_matches_interpreter():
    x, w1, w2 = value((5, 4), "float64"), value((4, 3), "float64"), value((3, 2), "float64")
    g_cpu = td.jit(td.grad(mlp, argnums=(0, 1)), backend="cpu")(w1, w2, x)
    g_xla = td.jit(td.grad(mlp, argnums=(0, 1)), backend="xla")(w1, w2, x)
    for a, b in zip(g_xla, g_cpu):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_hessian_vector_program_through_the_pipeline():
    """Forward over reverse (resolve([F0, T1]) -> differentiate), compiled for both backends."""
    x, w2 = value((5, 4), "float64"), value((3, 2), "float64")
    F0 = td.build(lambda w: mlp(w, w2, x), w=td.spec((4, 3), "float64"))
    (y,) = F0.outputs
    T1 = td.transpose(td.differentiate(td.resolve([F0]), outputs=[y], wrt=["w"]))
    (ct_key,) = [k for _, k in T1.tangent_inputs]
    L2 = td.differentiate(td.resolve([F0, T1]), outputs=[T1.tangent_outputs[0]], wrt=["w"])
    ((_, t_key),) = L2.tangent_inputs
    g = td.materialize_merge(td.resolve([F0, T1, L2]), [y, T1.tangent_outputs[0],
                                                         L2.tangent_outputs[0]])
    feed = {"w": value((4, 3), "float64"), ct_key: 1.0, t_key: value((4, 3), "float64")}
    got = td.compile(g, backend="xla")(feed)
    want = td.compile(g, backend="cpu")(feed)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_gradient_through_xla_matches_jax():
    import jax.numpy as jnp

    x, w1, w2 = value((6, 5), "float64"), value((5, 4), "float64"), value((4, 3), "float64")
    got = td.jit(td.grad(mlp, argnums=(0, 1)), backend="xla")(w1, w2, x)
    with jax.enable_x64(True):
        want = jax.grad(lambda a, b: jnp.sum(jnp.tanh(x @ a) @ b), argnums=(0, 1))(w1, w2)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12, atol=1e-13)


def test_complex_vjp_program_through_xla():
    z = value((4,), "complex128")
    loss = lambda z: td.sum(td.real(z * td.conj(td.sin(z))))  # noqa: E731
    np.testing.assert_allclose(td.jit(td.grad(loss), backend="xla")(z),
                               td.jit(td.grad(loss), backend="cpu")(z), rtol=1e-12)


OPS = ["sin", "exp_tanh", "square", "add_row", "mul_row", "slice", "matmul", "sum_back",
       "max_back", "pad_pow", "where"]


def compose(steps):
    def f(x, y):
        v = x
        for s in steps:
            if s == "sin":
                v = td.sin(v)
            elif s == "exp_tanh":
                v = td.exp(td.tanh(v))
            elif s == "square":
                v = v * v
            elif s == "add_row":
                v = v + y
            elif s == "mul_row":
                v = v * y
            elif s == "slice":
                v = td.concatenate([v[:, 1:], v[:, :1]], axis=1)
            elif s == "matmul":
                v = td.tanh(v @ (y[:, None] * y[None, :]) * 0.1)
            elif s == "sum_back":
                v = v - td.sum(v, axis=0) / 3.0
            elif s == "max_back":
                # the max of the input: XLA's CPU fusions may recompute a computed value with and
                # without FMA contraction (openxla/xla#41579), so the tie mask of a max over
                # a*b - c can differ between two consumers (docs/xla.md, known differences)
                v = v - td.max(x, axis=1)[:, None]
            elif s == "pad_pow":
                v = td.power(td.abs(v) + 1.0, 1.5)
            elif s == "where":
                v = td.where(v > 0, v, -0.5 * v)
        return td.sum(v * v), v[1:, ::2]

    return f


@settings(max_examples=20, deadline=None)
@given(st.lists(st.sampled_from(OPS), min_size=1, max_size=7), st.integers(0, 2**31 - 1))
@example(["square", "max_back", "max_back"], 0)  # ReduceMax gradients after exact cancellation
def test_random_graphs_and_gradients_match_interpreter(steps, seed):
    r = np.random.default_rng(seed)
    x, y = r.standard_normal((3, 4)) * 0.7, r.standard_normal(4) * 0.7
    f = compose(steps)
    for fn in (f, td.grad(lambda x, y: f(x, y)[0], argnums=(0, 1))):
        got = td.jit(fn, backend="xla")(x, y)
        want = td.jit(fn, backend="cpu")(x, y)
        for a, b in zip(got, want):
            # absolute error to the array's scale: an element left small by cancellation
            # between large terms (pad_pow's powers) carries their rounding
            scale = max(1.0, float(np.max(np.abs(b))))
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12 * scale)


# ---- the text ----

def test_stablehlo_text_parses_and_runs_through_jaxlib():
    from jax.extend import mlir

    g = graph(P.DotGeneral((1,), (0,)), [td.aval((2, 3), "float64"), td.aval((3, 4), "float64")])
    prog = td.compile(g, backend="cpu")
    text = prog.as_stablehlo()
    assert text.startswith("module @tidu") and "stablehlo.dot_general" in text
    assert "tensor<2x3xf64>" in text and "tensor<2x4xf64>" in text
    assert mlir.serialize_portable_artifact(text, xla._version())  # parses
    batched = prog.as_stablehlo(batch=5)
    assert "tensor<5x2x3xf64>" in batched and "lhs_batching_dimensions = [0]" in batched
    with pytest.raises(Exception, match="rejects|parse|error"):
        xla._exported(text.replace("dot_general", "dot_generl"), [], [], "cpu")


def test_batched_outer_product_is_written_as_jax_writes_it():
    """A batched outer product lowers as jax's dot_general gradients lower it (rhs first, then a
    transpose), which XLA:CPU compiles to a fast per-example gradient sum; the values are the
    interpreter's and jax's."""
    def step(w, x):  # per-example gradients of a linear layer, clipped, then summed
        g = td.vmap(td.grad(lambda w, x: td.sum(td.tanh(x @ w))), in_axes=(None, 0))(w, x)
        scale = td.minimum(1.0, 1.0 / td.sqrt(td.sum(g * g, axis=(1, 2))))
        return td.mean(g * scale[:, None, None], axis=0)

    w, x = value((6, 5), "float32"), value((40, 6), "float32")
    text = td.jit(step).lower(w, x).as_text()
    outer = [ln for ln in text.splitlines() if "dot_general" in ln and
             "lhs_contracting_dimensions = []" in ln]
    assert outer and all("(tensor<40x5xf32>, tensor<40x6xf32>) -> tensor<40x5x6xf32>" in ln
                         for ln in outer), outer
    assert "permutation = array<i64: 0, 2, 1>} : (tensor<40x5x6xf32>) -> tensor<40x6x5xf32>" \
        in text
    got = td.jit(step, backend="xla")(w, x)
    np.testing.assert_allclose(got, td.jit(step, backend="cpu")(w, x), rtol=2e-5, atol=1e-6)
    jnp = pytest.importorskip("jax.numpy")
    with jax.default_matmul_precision("highest"):  # tidu's products; a GPU's default is TF32
        gj = jax.vmap(jax.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w))), in_axes=(None, 0))(w, x)
        sj = jnp.minimum(1.0, 1.0 / jnp.sqrt(jnp.sum(gj * gj, axis=(1, 2))))
        want = jnp.mean(gj * sj[:, None, None], axis=0)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


def test_exported_fields_follow_the_installed_jax():
    """jax 0.11 dropped Exported's `_has_named_shardings`: tidu passes only the fields the
    installed jax declares, and a new required field raises naming it."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Newer:  # an Exported without one of today's private fields
        fun_name: str
        nr_devices: int
        _get_vjp: object = None

    assert xla._exported_fields(Newer, {"fun_name": "f", "nr_devices": 1,
                                        "_has_named_shardings": False}) == \
        {"fun_name": "f", "nr_devices": 1}

    @dataclasses.dataclass(frozen=True)
    class Stricter:
        fun_name: str
        brand_new: int

    with pytest.raises(RuntimeError, match=r"does not support jax .*\['brand_new'\]"):
        xla._exported_fields(Stricter, {"fun_name": "f"})


def test_export_platform_names_the_gpu_runtime():
    """A jax GPU device says platform "gpu"; jax.export must be told "cuda" or "rocm"."""
    from types import SimpleNamespace as NS

    assert xla.export_platform(jax.devices("cpu")[0]) == "cpu"
    cuda = NS(platform="gpu", client=NS(platform="cuda", platform_version="cuda 13.0"))
    assert xla.export_platform(cuda) == "cuda"
    rocm = NS(platform="gpu", client=NS(platform="gpu", platform_version="rocm 6.0"))
    assert xla.export_platform(rocm) == "rocm"
    assert xla.export_platform(NS(platform="gpu", client=None)) == "cuda"


def test_long_programs_compile_in_segments():
    """Programs longer than MAX_FUSED_INSTRUCTIONS are split; values cross segments."""
    def chain(x, y):
        v = x
        for i in range(300):
            v = td.sin(v) * 0.5 + y if i % 2 else td.cos(v) + x
        return v, td.sum(v)

    x, y = value((16,), "float64"), value((16,), "float64")
    F = td.build(chain, x=td.spec((16,), "float64"), y=td.spec((16,), "float64"))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="xla")
    runner = prog.executable.xla()
    assert len(runner.segments) == -(-prog.n_instructions // xla.MAX_FUSED_INSTRUCTIONS) >= 3
    got = prog({"x": x, "y": y})
    want = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")(
        {"x": x, "y": y})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _scalar_chain(steps):
    def f(x, a):
        v = x
        for i in range(steps):
            v = td.sin(v) * a + v if i % 2 else td.tanh(v) + 0.1
        return v
    return f


def test_segments_pass_values_packed_not_one_parameter_each():
    """The backward half of a chain's gradient reads every saved forward value: they cross
    segments packed (one buffer per dtype), each once, so no segment takes or returns many."""
    g = td.jit(td.grad(_scalar_chain(150)), backend="xla")
    got = g(0.3, 0.7)
    ((prog, *_),) = g.cache.values()
    want = td.jit(td.grad(_scalar_chain(150)), backend="cpu")(0.3, 0.7)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    segs = prog.executable.xla().segments
    assert len(segs) >= 3 and prog.n_instructions > 2 * xla.MAX_FUSED_INSTRUCTIONS
    crossing = sum(a.shape[0] for s in segs[:-1] for a in s.out_avals)
    assert crossing > 100  # hundreds of values cross ...
    for s in segs:  # ... in a handful of parameters and results
        assert len(s.in_keys) <= 6 and len(s.out_keys) <= 2, (s.in_keys, s.out_keys)
        assert all(k[0] == "pack" for k in s.out_keys if isinstance(k, tuple))
    packs = [k for s in segs for k in s.out_keys if isinstance(k, tuple)]
    assert len(packs) == len(set(packs)) == len(segs) - 1  # nothing passed through twice


def test_segments_with_batch_mixed_dtypes_and_large_values():
    """Packs per dtype, sliced per point under a batch axis; a value larger than
    PACK_MAX_ELEMENTS crosses as its own parameter; outputs defined early come back in order."""
    big = xla.PACK_MAX_ELEMENTS + 4

    def f(x, m):
        v, first = x, None
        for i in range(140):
            v = td.sin(v) * 0.5 + x if i % 2 else td.cos(v) - x
            if i == 3:
                first = v
        w, u, j = m * 2.0, m[:8], td.astype(m[:8] > 0.5, "int32")  # large, small, int32
        for _ in range(100):
            w = td.tanh(w) + 0.25
            u = td.tanh(u) * w[:8]
            j = j + td.astype(u > 0.5, "int32")
        return v + td.sum(w) * 1e-3 + td.sum(u), td.sum(j), first

    F = td.build(f, x=td.spec((3,), "float64"), m=td.spec((big,), "float32"))
    g = td.materialize_merge(td.resolve([F]), F.outputs)
    p_xla, p_cpu = td.compile(g, backend="xla"), td.compile(g, backend="cpu")
    r = np.random.default_rng(3)
    ins = {"x": r.standard_normal((4, 3)), "m": r.random((4, big)).astype(np.float32)}
    ordered = [ins[k] for k in p_cpu.inputs]
    segs = xla.lower_segments(p_xla.executable, batch=4)
    assert len(segs) >= 2
    keys = [k for s in segs for k in s.out_keys]
    assert {k[2] for k in keys if isinstance(k, tuple)} >= {"float64", "float32", "int32"}
    assert any(isinstance(k, int) for s in segs[:-1] for k in s.out_keys)  # the large value
    for got, want in zip(p_xla.eval_batch(ordered, backend="xla"), p_cpu.eval_batch(ordered)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


# ---- backends, the auto rule, errors ----

def test_auto_backend_picks_by_work_and_device(monkeypatch):
    a = value((400, 400), "float64")
    small, big = (lambda x: td.sin(x) * 2.0), (lambda a, b: td.tanh(a @ b))
    for platform, want_big in (("cpu", "cpu"), ("gpu", "xla")):
        monkeypatch.setattr(xla, "default_platform", lambda p=platform: p)
        td.program_cache.clear()  # the choice is cached per Executable
        f_small, f_big = td.jit(small), td.jit(big)
        f_small(np.ones(3))
        out = f_big(a, a)
        ((p_small, *_),), ((p_big, *_),) = f_small.cache.values(), f_big.cache.values()
        assert xla.program_work(p_big.executable) >= xla.AUTO_MIN_WORK
        assert (p_small.backend, p_big.backend) == ("cpu", want_big)
        np.testing.assert_allclose(out, np.tanh(a @ a), rtol=1e-12, atol=1e-12)
    td.program_cache.clear()


def test_program_work_counts_products_and_elements_written():
    """auto's measure: 2 * output size * contraction per product, plus every instruction's
    output elements (the product's too)."""
    f = td.jit(lambda a, b, x, y: (td.tanh(a @ b), td.sum(td.matmul(x, y))), backend="cpu")
    a, b = np.ones((40, 30)), np.ones((30, 20))
    x, y = np.ones((3, 4, 5)), np.ones((3, 5, 6))
    f(a, b, x, y)
    ((p, *_),) = f.cache.values()
    written = sum(int(np.prod(p.executable.slot_avals[int(s)].shape))
                  for s in p.executable.arrays["out_slots"])
    assert xla.program_work(p.executable) == written + 2 * 40 * 20 * 30 + 2 * 3 * 4 * 6 * 5


def test_auto_decides_cpu_without_importing_jax_where_no_accelerator_can_be(monkeypatch):
    """Large work under ``auto`` asks jax for its platform only when jax is imported already or
    an accelerator could be present: on a machine without one, jax is never imported."""
    def run(head: str, probe: str) -> str:
        """A fresh process with no accelerator: `head`, then a large program under auto, which
        must run on the interpreter; what `probe` prints."""
        code = (f"{head}\n"
                "import numpy as np, tidu as td, tidu.xla as x\n"
                "x._accelerator_possible = lambda: False\n"
                "a = np.ones((400, 400))\n"
                "f = td.jit(lambda a, b: td.tanh(a @ b))\n"
                "np.testing.assert_allclose(f(a, a), np.tanh(a @ a))\n"
                "((p, *_),) = f.cache.values()\n"
                "assert x.program_work(p.executable) >= x.AUTO_MIN_WORK and p.backend == 'cpu'\n"
                f"print({probe})\n")
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr[-2000:]
        return res.stdout.strip()

    assert run("import sys", "'jax' in sys.modules") == "False"
    # jax imported but its backends not started: the same guess, and they stay unstarted (starting
    # them, and importing jax.extend for the question, cost ~35 ms of a first call under auto)
    assert run("import sys, jax\nfrom jax._src import xla_bridge",
               "xla_bridge.backends_are_initialized(), 'jax.extend' in sys.modules") \
        == "False False"
    jax.devices()  # started backends answer for themselves
    monkeypatch.setattr(xla, "_accelerator_possible", lambda: False)
    monkeypatch.setattr(xla, "default_platform", lambda: "gpu")
    assert xla.auto_platform() == "gpu"


def test_auto_keeps_long_programs_and_user_primitives_on_the_interpreter(monkeypatch):
    monkeypatch.setattr(xla, "default_platform", lambda: "gpu")
    td.program_cache.clear()

    def chain(x):
        for _ in range(xla.AUTO_MAX_INSTRUCTIONS + 10):
            x = x * 1.0001
        return x

    f = td.jit(chain)
    f(np.ones((1000, 1000)))
    ((prog, *_),) = f.cache.values()
    assert prog.backend == "cpu"
    td.program_cache.clear()


def test_errors_name_the_problem():
    g = graph(P.Exp(), [td.aval((3,), "float64")])
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        td.compile(g, backend="gpu")
    with pytest.raises(ValueError, match="unknown backend"):
        td.jit(lambda x: x, backend="tpu")
    prog = td.compile(g, backend="xla")
    with pytest.raises(ValueError, match="expected shape"):
        prog.eval([np.ones(4)])
    with pytest.raises(TypeError, match="expected dtype"):
        prog.eval([np.ones(3, np.complex128)])
    with pytest.raises(ValueError, match="devices= needs backend='xla'"):
        td.compile(g, backend="cpu").eval_batch([np.ones((2, 3))], devices=1)
    with pytest.raises(ValueError, match="jax sees"):
        prog.eval_batch([np.ones((2, 3))], devices=10_000)


def test_primitive_without_lowering_is_refused_by_name(monkeypatch):
    from dataclasses import dataclass

    from tidu.ad.rules import PrimitiveOp

    @dataclass(frozen=True)
    class Twice(PrimitiveOp):
        def abstract_eval(self, x):
            return x

        def impl(self, x):
            return 2 * x

    g = graph(Twice(), [td.aval((3,), "float64")])
    with pytest.raises(NotImplementedError, match="Twice has no StableHLO lowering"):
        td.compile(g, backend="xla")
    monkeypatch.setattr(xla, "default_platform", lambda: "gpu")
    big = graph(Twice(), [td.aval((4000, 4000), "float64")])  # work over the threshold
    assert td.compile(big).backend == "cpu"  # auto keeps it on the interpreter


def test_out_buffers_and_mapping_call():
    g = graph(P.Sin(), [td.aval((4,), "float64")])
    prog = td.compile(g, backend="xla")
    x = value((4,), "float64")
    out = [np.empty(4)]
    res = prog.eval([x], out=out)
    assert res[0] is out[0]
    np.testing.assert_allclose(out[0], np.sin(x), rtol=1e-14)
    np.testing.assert_allclose(prog({("in", 0): x})[0], np.sin(x), rtol=1e-14)


def run_python(code: str, env_extra: dict | None = None) -> str:
    env = dict(os.environ, **(env_extra or {}))
    env.pop("JAX_ENABLE_X64", None)
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    return res.stdout


def test_xla_entry_takes_exact_inputs_and_leaves_the_rest_to_eval():
    """td.jit's per-call entry of an XLA program: exact numpy inputs in, numpy out; jax Arrays
    in, jax Arrays out; anything else refused with TypeError, so that eval converts it or
    names the problem."""
    prog = td.jit(lambda x: td.sin(x) * 2, backend="xla").lower(np.ones(3)).program
    entry = prog.runner()
    x = np.arange(3.0)
    (got,) = entry([x])
    assert type(got) is np.ndarray
    np.testing.assert_allclose(got, np.sin(x) * 2, rtol=1e-15)
    for other in (x.astype("float32"), np.repeat(x, 2)[::2], [0.0, 1.0, 2.0]):
        with pytest.raises(TypeError):
            entry([other])
        np.testing.assert_allclose(prog.eval([other])[0], np.sin(x) * 2, rtol=1e-7)
    with jax.enable_x64(True):
        (on,) = entry([jax.numpy.asarray(x)])
    assert isinstance(on, jax.Array) and on.dtype == np.float64
    np.testing.assert_allclose(np.asarray(on), np.sin(x) * 2, rtol=1e-15)
    with pytest.raises(TypeError):
        entry([np.ones(4)])
    with pytest.raises(ValueError, match="shape"):
        prog.eval([np.ones(4)])


def test_float64_without_touching_the_global_jax_config():
    out = run_python("""
        import numpy as np, jax, tidu as td
        assert not jax.config.jax_enable_x64
        x = np.linspace(0.1, 1, 5)
        f = td.jit(lambda x: td.exp(x) * (1 + 1e-12), backend="xla")
        y = f(x)
        assert y.dtype == np.float64, y.dtype
        np.testing.assert_allclose(y, np.exp(x) * (1 + 1e-12), rtol=1e-15)
        z = td.jit(lambda z: z * z, backend="xla")(np.array([1 + 2j]))
        assert z.dtype == np.complex128
        assert not jax.config.jax_enable_x64  # left as the user set it
        print("ok")
    """)
    assert "ok" in out


def test_import_tidu_does_not_import_jax():
    out = run_python("""
        import sys, numpy as np, tidu as td
        td.jit(lambda x: td.sin(x))(np.ones(3))
        print("jax" in sys.modules)
    """)
    assert out.strip() == "False"


def test_sharded_batch_equals_single_device():
    out = run_python("""
        import numpy as np, jax, tidu as td
        from jax.sharding import Mesh
        assert len(jax.devices()) == 4
        f = lambda w, x: td.sum(td.tanh(x @ w) ** 2)
        g = td.grad(f)
        F = td.build(lambda w, x: td.tanh(x @ w), w=td.spec((3, 2), "float64"),
                     x=td.spec((5, 3), "float64"))
        prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="xla")
        r = np.random.default_rng(0)
        for batch in (8, 7, 1):
            w, x = r.standard_normal((batch, 3, 2)), r.standard_normal((batch, 5, 3))
            ins = [w, x] if prog.inputs == ["w", "x"] else [x, w]
            (one,) = prog.eval_batch(ins)
            (cpu,) = prog.eval_batch(ins, backend="cpu")
            for devices in (4, jax.devices()[:2], Mesh(np.array(jax.devices()), ("d",))):
                (sh,) = prog.eval_batch(ins, devices=devices)
                np.testing.assert_allclose(sh, one, rtol=1e-13, atol=1e-14)
            np.testing.assert_allclose(one, cpu, rtol=1e-13, atol=1e-14)
        # w shared by every point (in_axes None): one copy, replicated on the devices
        w, x = r.standard_normal((7, 3, 2)), r.standard_normal((7, 5, 3))
        axes = [None if k == "w" else 0 for k in prog.inputs]
        shared = [w[0] if k == "w" else x for k in prog.inputs]
        tiled = [np.broadcast_to(w[0], w.shape) if k == "w" else x for k in prog.inputs]
        (want,) = prog.eval_batch(tiled, backend="cpu")
        (sh,) = prog.eval_batch(shared, devices=4, in_axes=axes)  # batch 7: padded to 8
        np.testing.assert_allclose(sh, want, rtol=1e-13, atol=1e-14)
        n_compiled = len(prog.executable._xla)
        prog.eval_batch(ins, devices=4)  # a new, equal Mesh: no recompilation
        assert len(prog.executable._xla) == n_compiled
        # the work really is split: each output shard lives on its own device
        runner = prog.executable.xla(batch=8, mesh=td.xla.resolve_devices(4))
        with jax.enable_x64(True):
            (arr,) = runner.calls[0](*ins[:0], *[np.zeros((8,) + a.shape[1:]) for a in ins])
        print("ok", len(arr.sharding.device_set), len(arr.addressable_shards))
    """, {"XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"})
    assert out.split() == ["ok", "4", "4"]


@pytest.mark.skipif(not any(d.platform == "gpu" for d in jax.devices()) if jax else True,
                    reason="no GPU visible to jax")
def test_gpu_matches_interpreter():  # pragma: no cover - runs where a CUDA device exists
    x, w1, w2 = value((64, 32), "float64"), value((32, 16), "float64"), value((16, 4), "float64")
    g_gpu = td.jit(td.grad(mlp, argnums=(0, 1)), backend="xla", device="gpu")(w1, w2, x)
    g_cpu = td.jit(td.grad(mlp, argnums=(0, 1)), backend="cpu")(w1, w2, x)
    for a, b in zip(g_gpu, g_cpu):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_gpu_compiler_options_are_options_this_xla_takes():
    """On a GPU tidu's executables compile with GPU_COMPILER_OPTIONS (XLA's autotuner and Triton
    GEMMs off: 7-11 s less per first call on an H200, docs/xla.md); XLA refuses an option name it
    does not know, on a CPU too, so a name a new jax dropped fails here, not on a user's GPU."""
    class Device:
        platform = "gpu"

    opts = xla._compiler_options(Device())
    assert opts == {"compiler_options": dict(xla.GPU_COMPILER_OPTIONS)}
    assert opts["compiler_options"]["xla_gpu_autotune_level"] == 0
    Device.platform = "cpu"
    assert xla._compiler_options(Device()) == {}  # a CPU compiles as jax's defaults have it
    a = value((5, 5), "float64")
    with jax.enable_x64(True):  # float64 kept: the product is exact to rounding
        np.testing.assert_allclose(jax.jit(lambda m: m @ m, **opts)(a), a @ a, rtol=1e-12)
        with pytest.raises(Exception, match="xla_gpu_no_such_option"):
            jax.jit(lambda m: m @ m, compiler_options={"xla_gpu_no_such_option": 0})(a)
