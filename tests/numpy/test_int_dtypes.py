"""The integer dtypes int8, int16, int32, int64, uint8, uint16, uint32, uint64 end to end, against
jax.numpy in x64 on both backends (the C++ interpreter and StableHLO through XLA): the promotion
table over every tidu dtype (jnp.promote_types), elementwise arithmetic, bitwise ops, shifts and
comparisons with wrap-around edge values, reductions, sort/gather/scatter, conversions between every pair of
dtypes with XLA's float -> integer saturation, and a saved program holding the new dtypes."""

from __future__ import annotations

import functools
import operator

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTS = SIGNED + UNSIGNED
FLOATS = ("float32", "float64")
ALL = ("bool",) + INTS + FLOATS + ("complex64", "complex128")
BACKENDS = ("cpu", "xla")
N = 64
rng = np.random.default_rng(11)


def _values(dtype, n=N):
    """Edge values (0, 1, the extremes, -1 and its neighbours) first, then random bit patterns."""
    info = np.iinfo(dtype)
    edges = [0, 1, 2, 3, info.max, info.max - 1, info.max // 2, info.max // 2 + 1]
    if info.min:
        edges += [-1, -2, info.min, info.min + 1]
    raw = rng.integers(0, 256, (n, info.bits // 8), dtype=np.uint8)
    rand = np.frombuffer(raw.tobytes(), dtype=np.dtype(dtype))
    return np.concatenate([np.array(edges, dtype), rand[:n - len(edges)]])


DATA = {dt: _values(dt) for dt in INTS}


def _pair(dtype):
    a = DATA[dtype]
    b = np.concatenate([a[::-1][:N // 2], rng.permutation(a)[N // 2:]])
    return a, b


def _check(got, want, what: str = ""):
    """got equals want bit for bit, dtype included; what names the case in a failure."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want, err_msg=what)


# ---- promotion ----

def test_promotion_table_is_jax_lattice():
    """Every pair of tidu's dtypes promotes as jnp.promote_types in x64 (integers with float32
    are float32, as jax's lattice; numpy says float64)."""
    mismatches = []
    for a in ALL:
        for b in ALL:
            F = td.build(lambda x, y: x + y, x=td.spec((2,), a), y=td.spec((2,), b))
            got = F.outputs[0].dtype
            want = jnp.promote_types(a, b)
            if got != want:
                mismatches.append((a, b, str(got), str(want)))
    assert not mismatches, mismatches


@pytest.mark.parametrize("dtype", INTS)
def test_promotion_values_and_weak_scalars(dtype):
    x = DATA[dtype][:8]
    f = td.jit(lambda x: (x + 1, x * 2, x - True, x * 0.5, x // 3))
    want = jax_value(lambda jx: (jx + 1, jx * 2, jx - True, jx * 0.5, jx // 3), jnp.asarray(x))
    for g, w in zip(f(x), want):
        _check(g, w)
    for other in INTS:  # mixed integer pairs: values as jax (uint64 with a signed int: float64)
        y = DATA[other][:8]
        _check(td.jit(lambda a, b: a * b)(x, y), jax_value(operator.mul, jnp.asarray(x),
                                                            jnp.asarray(y)))


# ---- elementwise ----

BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "==": operator.eq,
          "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
          ">=": operator.ge, "&": operator.and_, "|": operator.or_, "^": operator.xor}
NAMED = ("maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor")
UNARY = ("invert", "abs", "sign", "square")


def _elementwise(np_):
    return lambda a, b: ([op(a, b) for op in BINARY.values()] +
                         [getattr(np_, n)(a, b) for n in NAMED] +
                         [getattr(np_, n)(a) for n in UNARY] + [-a, ~b])


# The jax references of the tests parametrized by backend are module-level functions: jax.jit
# compiles one once per shape and dtype, and the second backend's test reuses it.
_JNP_ELEMENTWISE = _elementwise(jnp)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INTS)
def test_elementwise_match_jax(dtype, backend):
    a, b = _pair(dtype)
    got = td.jit(_elementwise(td), backend=backend)(a, b)
    want = jax_value(_JNP_ELEMENTWISE, jnp.asarray(a), jnp.asarray(b))
    for name, g, w in zip(list(BINARY) + list(NAMED) + list(UNARY) + ["neg", "~"], got, want):
        _check(g, w, f"{name} {dtype} {backend}")


DIVISION = ("floor_divide", "remainder", "fmod")


def _jnp_division(a, b):
    return [getattr(jnp, n)(a, b) for n in DIVISION]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INTS)
def test_division_match_jax(dtype, backend):
    a, b = _pair(dtype)
    b = np.where(b == 0, np.array(7, dtype), b)  # jnp's // and % by zero differ from lax's
    names = DIVISION
    got = td.jit(lambda a, b: [getattr(td, n)(a, b) for n in names], backend=backend)(a, b)
    want = jax_value(_jnp_division, a, b)
    for name, g, w in zip(names, got, want):
        _check(g, w, f"{name} {dtype} {backend}")


@pytest.mark.parametrize("dtype", INTS)
def test_lax_div_rem_by_zero_and_minus_one_as_xla(dtype):
    """lax.div/rem where C++ is undefined (x / 0, INT_MIN / -1): XLA's values, the same in the
    interpreter, through XLA, in jax and in the primitives' numpy reference (impl)."""
    from tidu.ops.elementwise import int_div
    from tidu.ops.math import int_rem
    a, b = _pair(dtype)
    b = b.copy()
    b[::4] = 0
    if np.iinfo(dtype).min:
        b[1::4] = -1
    want = tuple(np.asarray(w) for w in
                 jax_value(lambda a, b: (jax.lax.div(a, b), jax.lax.rem(a, b)), a, b))
    for backend in BACKENDS:
        got = td.jit(lambda a, b: (td.lax.div(a, b), td.lax.rem(a, b)), backend=backend)(a, b)
        for g, w in zip(got, want):
            _check(g, w)
    with np.errstate(all="ignore"):
        _check(int_div(a, b), want[0])
        _check(int_rem(a, b), want[1])


SHIFTS = ("left_shift", "right_shift")
LAX_SHIFTS = ("shift_left", "shift_right_logical", "shift_right_arithmetic")


def _jax_shifts(a, s):
    return [getattr(jnp, n)(a, s) for n in SHIFTS] + [getattr(jax.lax, n)(a, s) for n in LAX_SHIFTS]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INTS)
def test_shifts_match_jax(dtype, backend):
    a = DATA[dtype]
    bits = np.iinfo(dtype).bits
    s = (np.arange(N) % (bits + 3)).astype(dtype)  # 0 .. bits + 2: past the width too
    names, lax = SHIFTS, LAX_SHIFTS
    got = td.jit(lambda a, s: [getattr(td, n)(a, s) for n in names] +
                 [getattr(td.lax, n)(a, s) for n in lax], backend=backend)(a, s)
    want = jax_value(_jax_shifts, a, s)
    for name, g, w in zip(names + lax, got, want):
        _check(g, w, f"{name} {dtype} {backend}")


# ---- reductions, sorting, indexing ----

REDUCTIONS = ("sum", "prod", "max", "min", "argmax", "argmin", "cumsum", "cumprod")


def _jnp_reductions(x):
    return [getattr(jnp, n)(x, axis=axis) for n in REDUCTIONS
            for axis in ((None, 0, 1) if not n.startswith("cum") else (0, 1))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INTS)
def test_reductions_match_jax(dtype, backend):
    x = DATA[dtype].reshape(8, 8)
    names = REDUCTIONS

    def f(x):
        out = []
        for n in names:
            for axis in ((None, 0, 1) if not n.startswith("cum") else (0, 1)):
                out.append(getattr(td, n)(x, axis=axis))
        return out
    got = td.jit(f, backend=backend)(x)
    want = jax_value(_jnp_reductions, x)
    k = 0
    for n in names:
        for axis in ((None, 0, 1) if not n.startswith("cum") else (0, 1)):
            _check(got[k], want[k], f"{n} axis={axis} {dtype} {backend}")
            k += 1


@pytest.mark.parametrize("dtype", INTS)
def test_statistics_have_jax_dtype(dtype):
    """mean, var, std, median of integers: jax x64's dtype (float32 up to 32 bits, float64 for
    64-bit integers: to_inexact_dtype, docs/numpy.md) and jax's values."""
    x = DATA[dtype][:12].reshape(3, 4)
    names = ("mean", "var", "std", "median")
    got = td.jit(lambda x: [getattr(td, n)(x, axis=1) for n in names])(x)
    want = jax_value(lambda x: [getattr(jnp, n)(x, axis=1) for n in names], x)
    for n, g, w in zip(names, got, want):
        assert g.dtype == w.dtype == (np.float64 if np.iinfo(dtype).bits == 64 else np.float32)
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-12 if g.dtype == np.float64 else
                                   2e-6, err_msg=n)


def _jnp_sort_gather_scatter(jx, idx, upd):
    return (jnp.sort(jx), jnp.argsort(jx, stable=True), jx[idx], jnp.take(jx, idx),
            jx.at[idx].set(upd), jx.at[idx].add(upd), jx.at[idx].max(upd), jx.at[idx].min(upd),
            jnp.where(jx > upd[0], jx, upd[1]), jnp.concatenate([jx, upd]),
            jnp.unique(jx, size=N, fill_value=0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INTS)
def test_sort_gather_scatter_match_jax(dtype, backend):
    x = DATA[dtype]
    idx = rng.integers(0, N, 20)
    upd = DATA[dtype][:20][::-1].copy()

    def f(x, i, u):
        return (td.sort(x), td.argsort(x, stable=True), x[i], td.take(x, i), x.at[i].set(u),
                x.at[i].add(u), x.at[i].max(u), x.at[i].min(u), td.where(x > u[0], x, u[1]),
                td.concatenate([x, u]), td.unique(x, size=N, fill_value=0))
    got = td.jit(f, backend=backend)(x, idx, upd)
    # idx (in range) and upd as arguments: one compile per dtype, for both backends
    want = jax_value(_jnp_sort_gather_scatter, jnp.asarray(x), idx, upd)
    for k, (g, w) in enumerate(zip(got, want)):
        _check(g, w, f"output {k} {dtype} {backend}")


# ---- conversions ----

def _edge_floats(dtype):
    vals = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 127.0, 127.5, 128.0, -128.0, -129.0, 255.0, 255.9,
            256.0, 32767.0, 32768.0, -32769.0, 65535.0, 65536.0, 2.0 ** 31, -2.0 ** 31,
            2.0 ** 31 + 2.0, 2.0 ** 32, 2.0 ** 32 - 1, 5e9, 2.0 ** 53, 2.0 ** 63, -2.0 ** 63,
            2.0 ** 64, -2.0 ** 64, 1e30, -1e30, np.inf, -np.inf, np.nan]
    return np.array(vals, dtype)


@functools.cache
def _astype_all(targets):
    return lambda v: [v.astype(d) for d in targets]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src", FLOATS)
def test_float_to_int_saturates_as_xla(src, backend):
    x = _edge_floats(src)
    got = td.jit(lambda x: [x.astype(d) for d in INTS], backend=backend)(x)
    want = jax.jit(_astype_all(INTS))(x)  # one program, not one per dtype
    for d, g, w in zip(INTS, got, want):
        _check(g, np.asarray(w), f"{src} -> {d} {backend}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src", INTS + ("bool",))
def test_int_conversions_match_jax(src, backend):
    x = DATA[src] if src != "bool" else np.arange(N) % 3 == 0
    targets = ("bool",) + INTS + FLOATS + ("complex64", "complex128")
    got = td.jit(lambda x: [x.astype(d) for d in targets], backend=backend)(x)
    want = jax.jit(_astype_all(targets))(x)  # one program, not one per dtype
    for d, g, w in zip(targets, got, want):
        _check(g, np.asarray(w), f"{src} -> {d} {backend}")


def test_no_gradient_through_integers():
    for dt in ("int8", "uint8", "uint64"):
        with pytest.raises(TypeError):
            td.grad(lambda a: td.sum(a))(DATA[dt])


# ---- saved programs ----

def test_saved_program_round_trips_new_dtypes(tmp_path):
    specs = {d: td.spec((N,), d) for d in ("int8", "int16", "uint8", "uint16", "uint64")}

    def f(int8, int16, uint8, uint16, uint64):
        return (int8 * int8 + 3, int16 >> 2, uint8 ^ (uint8 << 1), uint16 - 5,
                uint64 // (uint64 | 1), td.sum(uint8), td.sort(int8), int16.astype(td.uint64))
    F = td.build(f, **specs)
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs))
    prog.save(tmp_path / "ints.tidu")
    loaded = td.load(tmp_path / "ints.tidu")
    args = [DATA[d] for d in specs]
    want = td.jit(f, backend="xla")(*args)
    for g, w in zip(loaded.eval(args), want):
        _check(g, w)
    with pytest.raises(OverflowError, match="uint8"):  # a value out of the dtype's range
        loaded.eval([args[0], args[1], args[2].astype(np.int8), args[3], args[4]])
