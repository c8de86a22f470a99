"""eval_batch's in_axes: inputs shared by every point (None) beside batched ones (0), as jax.vmap,
on the interpreter (array and scalar programs), a loaded program and XLA; clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

rng = np.random.default_rng(7)


def _mlp():
    F = td.build(lambda x, w, b: td.sum(td.tanh(x @ w + b) ** 2), x=td.spec((3,)),
                 w=td.spec((3, 4)), b=td.spec((4,)))
    (y,) = F.outputs
    T = td.transpose(td.differentiate(td.resolve([F]), [y], ["w"]))
    (ct,) = [k for _, k in T.tangent_inputs]
    g = td.materialize_merge(td.resolve([F, T]), [y, *T.tangent_outputs])
    return g, ct


def _feeds(prog, ct, n):
    batched = {"x": rng.standard_normal((n, 3)), ct: np.ones(n)}
    shared = {"w": rng.standard_normal((3, 4)), "b": rng.standard_normal(4)}
    ins = [batched[k] if k in batched else shared[k] for k in prog.inputs]
    axes = [0 if k in batched else None for k in prog.inputs]
    tiled = [a if ax == 0 else np.broadcast_to(a, (n, *a.shape)).copy() for a, ax in
             zip(ins, axes)]
    return ins, axes, tiled


@pytest.mark.parametrize("threads", [1, 3])
def test_shared_inputs_equal_tiled_inputs_on_the_interpreter(threads):
    g, ct = _mlp()
    prog = td.compile(g, backend="cpu")
    ins, axes, tiled = _feeds(prog, ct, 37)
    got = prog.eval_batch(ins, threads=threads, in_axes=axes)
    want = prog.eval_batch(tiled, threads=threads)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    # a tuple works too, and in_axes=0 is the default
    for a, b in zip(prog.eval_batch(tiled, in_axes=(0,) * len(ins)), want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("exact", [True, False])
def test_shared_inputs_on_the_scalar_block_path(exact):
    """All-scalar float64 programs run blocks of 32 points: a shared input fills every lane."""
    F = td.build(lambda x, a: td.sin(x) * a + td.exp(a * x), x=td.spec(()), a=td.spec(()))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    xs, a = np.linspace(-1, 1, 101), 0.7
    feeds = {"x": xs, "a": np.float64(a)}
    axes = [None if k == "a" else 0 for k in prog.inputs]
    (got,) = prog.eval_batch([feeds[k] for k in prog.inputs], in_axes=axes, exact=exact)
    (want,) = prog.eval_batch([xs if k == "x" else np.full(101, a) for k in prog.inputs],
                              exact=exact)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, np.sin(xs) * a + np.exp(a * xs), rtol=1e-14)


def test_loaded_program_takes_in_axes(tmp_path):
    g, ct = _mlp()
    prog = td.compile(g, backend="cpu")
    prog.save(tmp_path / "p.tidu")
    loaded = td.load(tmp_path / "p.tidu")
    ins, axes, tiled = _feeds(prog, ct, 9)
    for a, b in zip(loaded.eval_batch(ins, in_axes=axes), prog.eval_batch(tiled)):
        np.testing.assert_array_equal(a, b)


def test_shared_inputs_on_xla_are_parameters_without_the_batch_axis():
    pytest.importorskip("jax")
    g, ct = _mlp()
    prog = td.compile(g, backend="xla")
    ins, axes, tiled = _feeds(prog, ct, 6)
    want = td.compile(g, backend="cpu").eval_batch(tiled)
    for devices in (None, 1):
        got = prog.eval_batch(ins, in_axes=axes, devices=devices)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    shared = tuple(ax is None for ax in axes)
    (seg,) = prog.executable.xla(batch=6, shared=shared).segments
    params = dict(zip(seg.in_keys, seg.in_shared))
    assert sorted(params.values()) == sorted(shared)  # w and b unbatched, x and the seed batched
    signature = seg.text.split("\n")[1].split("->")[0]
    assert ": tensor<3x4xf64>" in signature and ": tensor<4xf64>" in signature  # one copy each
    assert ": tensor<6x3xf64>" in signature and "6x3x4" not in signature


@pytest.mark.parametrize(
    "in_axes, match",
    [
        (1, r"in_axes\[0\] = 1: eval_batch takes 0 .* or None"),
        ([0, 0], r"in_axes: 2 entries for a program of 4 inputs"),
        (None, r"at least one input must be batched"),
        ([True, 0, 0, 0], r"in_axes\[0\] = True"),
        ("0", r"in_axes\[0\] = '0'"),
    ],
)
def test_wrong_in_axes_are_refused_clearly(in_axes, match):
    g, ct = _mlp()
    prog = td.compile(g, backend="cpu")
    ins, _, tiled = _feeds(prog, ct, 4)
    with pytest.raises(ValueError, match=match):
        prog.eval_batch(tiled, in_axes=in_axes)


def test_a_shared_input_given_a_batch_axis_names_the_input():
    g, ct = _mlp()
    prog = td.compile(g, backend="cpu")
    _, axes, tiled = _feeds(prog, ct, 4)
    i = prog.inputs.index("w")
    with pytest.raises(ValueError, match=rf"input {i} \('w'\): expected shape \(3, 4\), "
                                         r"got \(4, 3, 4\)"):
        prog.eval_batch(tiled, in_axes=axes)


def test_shared_input_read_in_every_segment_of_a_long_program():
    pytest.importorskip("jax")
    from tidu import xla

    def f(x, a):
        for i in range(200):
            x = td.sin(x) * a + 0.1 if i % 2 else td.cos(x) - a
        return x

    F = td.build(f, x=td.spec((2,)), a=td.spec((2,)))
    g = td.materialize_merge(td.resolve([F]), F.outputs)
    p_xla, p_cpu = td.compile(g, backend="xla"), td.compile(g, backend="cpu")
    xs, a = rng.standard_normal((5, 2)), rng.standard_normal(2)
    ins = [xs if k == "x" else a for k in p_cpu.inputs]
    axes = [0 if k == "x" else None for k in p_cpu.inputs]
    (want,) = p_cpu.eval_batch([xs if k == "x" else np.tile(a, (5, 1)) for k in p_cpu.inputs])
    (got,) = p_xla.eval_batch(ins, in_axes=axes)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    segs = p_xla.executable.xla(batch=5, shared=[k == "a" for k in p_cpu.inputs]).segments
    assert len(segs) >= 2 and all(True in s.in_shared for s in segs)
    assert p_cpu.n_instructions > xla.MAX_FUSED_INSTRUCTIONS
