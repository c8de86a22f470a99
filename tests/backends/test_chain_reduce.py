"""Elementwise chains that end in a float32 or float64 sum (the sum taken block by block, its operand never
stored), reshapes inside chains, batched matrix-vector products below the BLAS threshold, and the
interpreter's per-instruction profile."""
from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.workloads import dpsgd_step
from tidu._native import _eval

SHAPES = [((256, 8192), 1), ((256, 8192), 0), ((64, 128, 30), (1, 2)), ((7, 3000, 40), 1),
          ((100_003,), 0), ((300, 50, 7), (0,)), ((300, 50, 37), 2), ((33, 1000, 40), (0, 1))]


def _f(axes):
    return lambda x, y: (td.sum(td.tanh(x) * y + 1.0, axis=axes), x * 2.0)


def _native(f, *args):
    return f.lower(*args).program.executable.native


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,axes", SHAPES)
def test_a_sum_ending_a_chain_matches_numpy(shape, axes, dtype):
    """The sum at a chain's end (any run of reduced axes, rows straddling blocks) is numpy's float64
    sum (rounded to float32 for float32 values), and its operand takes no arena buffer."""
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    f = td.jit(_f(axes), backend="cpu")
    got = np.asarray(f(x, y)[0])
    want = (np.tanh(x.astype(np.float64)) * y + 1.0).sum(axis=axes)
    tol = 2e-6 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(x.size / max(want.size, 1)))
    native = _native(f, x, y)
    chains = native.array_chains
    assert any(ops[-1] == "ReduceSum" for _, ops in chains), chains
    # x * 2 (the other output) and the sum: the chain's product and tanh live in block scratch
    assert native.arena_bytes <= x.nbytes + want.size * x.itemsize + 4096


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,axes", SHAPES[:3])
def test_a_fused_sum_has_the_same_bits_on_any_thread_count(shape, axes, dtype):
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    f = td.jit(_f(axes), backend="cpu")
    try:
        td.set_num_threads(1)
        one = np.asarray(f(x, y)[0])
        td.set_num_threads(4)
        four = np.asarray(f(x, y)[0])
    finally:
        td.set_num_threads(None)
    np.testing.assert_array_equal(one, four)


@pytest.mark.parametrize("axis", [1, 2])
def test_sums_of_short_runs_are_not_fused(axis):
    """A sum whose runs are short (rows of 3 coordinates, or 3 kept columns) runs as its own
    instruction, whose kernel loops over them with the length known, not as the chain's tail."""
    x = np.random.default_rng(2).standard_normal((64, 64, 3))
    f = td.jit(lambda x: td.sum(td.sin(x) * x, axis=axis), backend="cpu")
    np.testing.assert_allclose(f(x), (np.sin(x) * x).sum(axis=axis), rtol=1e-13, atol=1e-13)
    assert not any(ops[-1] == "ReduceSum" for _, ops in _native(f, x).array_chains)


def test_max_and_integer_reductions_are_not_fused():
    """Only float32 and float64 sums end a chain (their partial sums are double); maxima and
    integer sums run as their own instruction."""
    x = np.linspace(-1, 1, 300 * 100).reshape(300, 100)
    k = np.arange(300 * 100).reshape(300, 100)
    f = td.jit(lambda x, k: (td.max(td.cos(x) + 1.0, axis=0), td.sum(k * 3 + 1, axis=1)), backend="cpu")
    m, s = f(x, k)
    np.testing.assert_allclose(m, (np.cos(x) + 1).max(axis=0), rtol=1e-15)
    np.testing.assert_array_equal(s, (k * 3 + 1).sum(axis=1))
    assert not any(ops[-1].startswith("Reduce") for _, ops in _native(f, x, k).array_chains)


def test_a_reshape_runs_inside_a_chain():
    x = np.linspace(-1, 1, 64 * 32 * 16, dtype=np.float32).reshape(64, 32, 16)
    f = td.jit(lambda x: td.exp(td.reshape(td.sin(x), (64, 512))) * 2.0, backend="cpu")
    np.testing.assert_allclose(f(x), np.exp(np.sin(x).reshape(64, 512)) * 2, rtol=1e-6)
    chains = _native(f, x).array_chains
    assert any("Reshape" in ops for _, ops in chains), chains


def test_per_example_gradient_norms_match_jax():
    """vmap(grad) of an MLP with per-example clipping (bench/tensor.py's dpsgd): the squared norms
    and the scaled mean run as chains ending in sums."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(3)
    f32 = np.float32
    p = [rng.standard_normal((16, 128)).astype(f32) * f32(0.1), np.zeros(128, f32),
         rng.standard_normal((128, 10)).astype(f32) * f32(0.1), np.zeros(10, f32)]
    x = rng.standard_normal((64, 16)).astype(f32)
    y = np.eye(10, dtype=f32)[rng.integers(0, 10, 64)]

    make = dpsgd_step

    got = td.jit(make(td, td.vmap, td.grad), backend="cpu")(p, x, y)
    want = jax.jit(make(jnp, jax.vmap, jax.grad))(p, x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=2e-5, atol=1e-6)


def test_the_per_instruction_profile_counts_each_instruction():
    x = np.linspace(-1, 1, 200 * 100, dtype=np.float32).reshape(200, 100)
    f = td.jit(lambda x: td.sum(td.tanh(x) * 3.0, axis=1) + 1.0, backend="cpu")
    lowered = f.lower(x)
    native = lowered.program.executable.native
    lowered(x)
    assert native.profile() == []  # not profiled
    _eval.set_profiling(True)
    try:
        for _ in range(3):
            lowered(x)
    finally:
        _eval.set_profiling(False)
    rows = native.profile()
    assert len(rows) == lowered.program.n_instructions
    assert all(isinstance(op, str) and seconds >= 0 for op, _, seconds, _, _ in rows)
    assert sum(runs for *_, runs, _ in rows) >= 3  # each evaluation adds its chains and instructions
    lowered(x)
    assert native.profile() == rows  # off again: nothing added


def test_the_profile_of_a_loop_body_counts_every_iteration():
    x = np.linspace(-1, 1, 64 * 3).reshape(64, 3)
    f = td.jit(lambda x: td.fori_loop(0, 7, lambda i, c: td.tanh(c) * 2.0 - c, x), backend="cpu")
    lowered = f.lower(x)
    native = lowered.program.executable.native
    assert native.n_subs() == 1 and native.n_subs([0]) == 0
    _eval.set_profiling(True)
    try:
        lowered(x)
    finally:
        _eval.set_profiling(False)
    outer, body = native.profile(), native.profile([0])
    assert [op for op, *_ in outer].count("Scan") == 1
    assert body and max(runs for *_, runs, _ in body) == 7  # each iteration of the body
    # the body's time is inside the loop instruction's
    scan = next(r for r in outer if r[0] == "Scan")
    assert sum(r[2] for r in body) <= scan[2] * 1.01 + 1e-4
    with pytest.raises(IndexError, match="no nested program 1"):
        native.profile([1])


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
@pytest.mark.parametrize("spec", ["bnk,bk->bn", "bkn,bk->bn", "bnk,k->bn", "bkn,bkm->bnm"])
def test_small_batched_matrix_vector_products_match_numpy(spec, dtype):
    """Per-example products with one output column (skip-gram's negatives . centre vector), too
    small for the BLAS: a dot per row over contiguous k, else k outermost over contiguous rows,
    each output still summed in k order."""
    rng = np.random.default_rng(5)
    dims = {"b": 64, "n": 5, "k": 7, "m": 1}
    ins = spec.split("->")[0].split(",")
    args = [rng.standard_normal([dims[c] for c in s]) for s in ins]
    if dtype.startswith("complex"):
        args = [a + 1j * rng.standard_normal(a.shape) for a in args]
    args = [a.astype(dtype) for a in args]
    got = td.jit(lambda x, y: td.einsum(spec, x, y), backend="cpu")(*args)
    want = np.einsum(spec, *[a.astype("complex128" if dtype.startswith("complex") else "float64")
                             for a in args])
    tol = 1e-5 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64, 64, 3), (7, 33, 2), (9, 5, 4), (3, 1000, 3), (2, 4, 3)])
def test_sum_over_a_middle_axis_with_short_kept_rows_adds_in_order(shape, dtype):
    """Kept rows of 2-4 (a force's sum over the pair axis): each output adds its rows in order,
    G outers at a time and a remainder, equal to the sequential sum bit for bit."""
    x = np.random.default_rng(5).standard_normal(shape).astype(dtype)
    got = td.jit(lambda x: td.sum(x, axis=1), backend="cpu")(x)
    want = np.zeros((shape[0], shape[2]), dtype)
    for i in range(shape[1]):
        want += x[:, i, :]
    np.testing.assert_array_equal(got, want)
