"""td.lax.bitcast_convert_type (the BitcastConvertType primitive, a copy of the bytes) against
jax.lax in x64: every pair of integer and real floating dtypes of equal, smaller and larger
width, bit for bit on the interpreter and XLA (NaN payloads, -0.0, inf, subnormals), vmap, a
saved program, float16 through the interpreter's widening, jax's zero derivative, and the
errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
from jax import lax as L  # noqa: E402

jax.config.update("jax_enable_x64", True)

T = td.lax
BACKENDS = ("cpu", "xla")
DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
          "float32", "float64"]
R = np.random.default_rng(3)


def _bytes(n):
    """n random bytes, plus special float patterns where they fit."""
    b = R.integers(0, 256, n, dtype=np.uint8)
    special = np.array([np.nan, -0.0, np.inf, -np.inf, 5e-324, 1.5], np.float64).view(np.uint8)
    b[:min(n, special.size)] = special[:min(n, special.size)]
    return b


def _operand(src, dst):
    a, c = np.dtype(src).itemsize, np.dtype(dst).itemsize
    shape = (3, 4) if a >= c else (3, c // a)
    return _bytes(int(np.prod(shape)) * a).view(src).reshape(shape)


PAIRS = [(s, d) for s in DTYPES for d in DTYPES if s != d]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{s}-{d}" for s, d in PAIRS])
def test_bits_match_jax(src, dst, backend):
    x = _operand(src, dst)
    want = np.asarray(L.bitcast_convert_type(x, dst))
    got = td.jit(lambda a: T.bitcast_convert_type(a, dst), backend=backend)(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_vmap_and_composition():
    x = _operand("float64", "int32")
    want = jax.vmap(lambda r: L.bitcast_convert_type(L.bitcast_convert_type(r, "int32") ^ 1,
                                                     "float64"))(x)
    got = td.jit(td.vmap(lambda r: T.bitcast_convert_type(
        T.bitcast_convert_type(r, "int32") ^ 1, "float64")))(x)
    np.testing.assert_array_equal(got.view(np.uint8), np.asarray(want).view(np.uint8))


def test_saved_program_round_trips(tmp_path):
    x = _operand("float32", "uint8")
    F = td.build(lambda a: T.bitcast_convert_type(a, "uint8"), a=td.spec(x.shape, "float32"))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    prog.save(tmp_path / "bits.tidu")
    got = td.load(tmp_path / "bits.tidu").eval([x])[0]
    np.testing.assert_array_equal(got, x.view(np.uint8).reshape(3, 4, 4))


def test_derivative_is_zero_as_jax():
    x = np.array([1.5, -2.0, 3.25])

    def f(M, S):
        return lambda a: S.sum(M.bitcast_convert_type(
            M.bitcast_convert_type(a, "float32"), "float64") * a)

    want = jax.grad(f(L, jax.numpy))(x)
    got = td.jit(td.grad(f(T, td)))(x)
    np.testing.assert_array_equal(got, want)


def test_same_dtype_is_the_operand_and_bad_input_names_the_problem():
    z = np.array([1 + 2j])
    np.testing.assert_array_equal(td.jit(lambda a: T.bitcast_convert_type(a, "complex128"))(z),
                                  z)
    with pytest.raises(TypeError, match="does not support bool or complex"):
        td.jit(lambda a: T.bitcast_convert_type(a, "float64"))(z)
    with pytest.raises(TypeError, match="does not support bool or complex"):
        td.jit(lambda a: T.bitcast_convert_type(a, "uint8"))(np.array([True]))
    with pytest.raises(ValueError, match=r"needs a last axis of 2 \(the width ratio\), got 3"):
        td.jit(lambda a: T.bitcast_convert_type(a, "float64"))(np.zeros(3, np.int32))
