"""uint32 end to end: promotion as numpy's (and jax's under x64), arithmetic, bitwise, shifts,
comparisons, conversions and reductions in the interpreter and through StableHLO, and a saved
program that takes and returns uint32 (jax's PRNG key data is uint32)."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

U = np.uint32
A = np.array([0, 1, 7, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 123456789, 0xDEADBEEF], U)
B = np.array([3, 0, 5, 2, 0xFFFFFFFF, 31, 32, 0x80000001], U)


def _ops(a, b):
    return (a + b, a - b, a * b, a // (b | 1), a % (b | 1), a & b, a | b, a ^ b, ~a,
            a << (b & 31), a >> (b & 31), np.maximum(a, b), np.minimum(a, b), a < b, a >= b,
            a == b, -a)


@pytest.mark.parametrize("backend", ["cpu", "xla"])
def test_arithmetic_bitwise_compare_match_numpy(backend):
    if backend == "xla":
        pytest.importorskip("jax")
    got = td.jit(_ops, backend=backend)(A, B)
    with np.errstate(over="ignore"):
        want = _ops(A, B)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_shifts_past_the_width_follow_xla():
    big = np.full_like(A, 40)
    sh = td.jit(lambda a, b: (td.lax.shift_left(a, b), td.lax.shift_right_logical(a, b),
                              td.lax.shift_right_arithmetic(a, b)))(A, big)
    np.testing.assert_array_equal(sh[0], 0)
    np.testing.assert_array_equal(sh[1], 0)
    np.testing.assert_array_equal(sh[2], np.where(A >= 0x80000000, 0xFFFFFFFF, 0).astype(U))


def test_promotion_follows_numpy_and_jax_x64():
    assert td.jit(lambda a: a + 1)(A).dtype == U  # weak Python scalar
    assert td.jit(lambda a, b: a + b)(A, np.int32(1)).dtype == np.int64
    assert td.jit(lambda a, b: a + b)(A, np.float32(1)).dtype == np.float32  # jax's lattice
    assert td.jit(lambda a: a * 0.5)(A).dtype == np.float64
    assert td.jit(lambda a: td.sqrt(a))(A).dtype == np.float32  # jax's to_inexact_dtype
    assert td.jit(lambda a: td.sqrt(a))(A.astype(np.uint64)).dtype == np.float64


def test_conversions_saturate_like_xla():
    x = np.array([-1.0, 0.0, 3.7, 4294967295.0, 5e9, np.nan, -np.inf, np.inf])
    want = np.array([0, 0, 3, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0, 0xFFFFFFFF], U)
    np.testing.assert_array_equal(td.jit(lambda v: v.astype(U))(x), want)
    np.testing.assert_array_equal(td.jit(lambda v: v.astype(U))(x.astype(np.float32)), want)
    got = td.jit(lambda a: (a.astype(np.float32), a.astype(np.float64), a.astype(np.int64),
                            a.astype(np.int32), a.astype(bool)))(A)
    for g, dt in zip(got, (np.float32, np.float64, np.int64, np.int32, bool)):
        np.testing.assert_array_equal(g, A.astype(dt))


def test_reductions_and_structural_ops():
    m = A.reshape(2, 4)
    got = td.jit(lambda a: (td.sum(a, axis=1), td.max(a, axis=0), td.min(a), a.T, a[:, 1:3],
                            td.concatenate([a, a], axis=0), td.where(a > 5, a, U(9))))(m)
    with np.errstate(over="ignore"):
        want = (m.sum(axis=1), m.max(axis=0), m.min(), m.T, m[:, 1:3],  # sum: uint64, as jax
                np.concatenate([m, m]), np.where(m > 5, m, U(9)))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype


def test_no_gradient_through_uint32():
    with pytest.raises(TypeError):
        td.grad(lambda a: td.sum(a))(A)


def test_saved_program_round_trips_uint32(tmp_path):
    F = td.build(lambda a, b: (a ^ b) >> 3, a=td.spec((8,), "uint32"), b=td.spec((8,), "uint32"))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs))
    prog.save(tmp_path / "u32.tidu")
    loaded = td.load(tmp_path / "u32.tidu")
    (out,) = loaded.eval([A, B])
    np.testing.assert_array_equal(out, (A ^ B) >> 3)
    with pytest.raises(OverflowError, match="uint32"):  # -1 as int32 does not fit
        loaded.eval([A.astype(np.int32), B])
