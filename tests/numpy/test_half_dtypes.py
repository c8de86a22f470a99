"""float16 and bfloat16 (ml_dtypes, as jax) end to end, against jax.jit on CPU in x64, on both
backends (the C++ interpreter, which stores them in 16 bits and computes in float32, and
StableHLO through XLA): promotion on jax's lattice (weak Python scalars included), elementwise ops
bit for bit where XLA's result is float32's rounded once, reductions, matrix products, data
movement, sort and conversions in every direction, first-order gradients, a saved program
holding them, and the C++ loader refusing an unknown dtype code."""

from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

HALVES = ("float16", "bfloat16")
OTHERS = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64", "complex64", "complex128")
BACKENDS = ("cpu", "xla")
N = 64
rng = np.random.default_rng(32)


def _dt(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _values(name, n=N, positive=False):
    """Edge values (zeros, ones, the largest and smallest normal, a float16 subnormal), then
    random ones over several magnitudes.  No bfloat16 subnormal: those are float32 subnormals,
    which XLA:CPU flushes to zero (tidu keeps them, in float32 as in bfloat16)."""
    fi = ml_dtypes.finfo(_dt(name))
    half = name == "float16"  # bfloat16: no quotient or product of two edges is subnormal
    big = float(fi.max) if half else 1e30
    small = (float(fi.tiny), float(fi.smallest_subnormal)) if half else (1e-30, 2.5)
    edges = [0.0, 1.0, 0.5, 2.0, big, *small, 3.0]
    if not positive:
        edges += [-0.0, -1.0, -big, -2.5]
    k = max(n - len(edges), 0)
    r = rng.standard_normal(k) * np.exp2(rng.integers(-6, 6, k))
    r = np.abs(r) if positive else r
    return np.array(edges + list(r))[:n].astype(_dt(name))


def _bits(a):
    return np.asarray(a).view(np.uint16)


def _check_bits(got, want, what=""):
    """got equals want bit for bit, dtype included (any NaN equals any NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    if got.dtype.itemsize != 2 or got.dtype == np.uint16 or got.dtype == np.int16:
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    gn, wn = np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(gn, wn, err_msg=what)
    np.testing.assert_array_equal(_bits(got)[~gn], _bits(want)[~wn], err_msg=what)


def _ulps(got, want):
    """The largest distance in units in the last place of the 16-bit type (NaN only where
    want's)."""
    g, w = np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32)
    assert np.array_equal(np.isnan(g), np.isnan(w))
    ok = ~np.isnan(w)
    if not ok.any():
        return 0
    gi = _bits(np.asarray(got)[ok]).astype(np.int32)
    wi = _bits(np.asarray(want)[ok]).astype(np.int32)
    # sign-magnitude to a monotone integer line
    gi = np.where(gi & 0x8000, -(gi & 0x7FFF), gi)
    wi = np.where(wi & 0x8000, -(wi & 0x7FFF), wi)
    return int(np.max(np.abs(gi - wi)))


def _close(got, want, what="", rtol=None, scale=1.0):
    """Within rtol (default 4 eps) and 4 eps * scale absolute: scale is the magnitude a result was
    computed through (a running sum's largest partial sum: after cancellation its error is
    relative to that, not to the small result)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    eps = float(ml_dtypes.finfo(got.dtype).eps)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=rtol or 4 * eps, atol=4 * eps * max(scale, 1.0), err_msg=what)


# ---- promotion, names, finfo ----

@pytest.mark.parametrize("a", HALVES)
def test_promotion_matches_jax_lattice(a):
    for b in HALVES + OTHERS:
        assert td.promote_types(a, b) == jnp.promote_types(_dt(a), _dt(b)), (a, b)
        assert td.promote_types(b, a) == jnp.promote_types(_dt(b), _dt(a)), (b, a)


@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_weak_scalars_keep_the_half_dtype(name, backend):
    x = _values(name, 8)
    f = lambda v: (v + 1.5, v * 2, 3 - v, v + np.int8(1), v + np.float32(1), v + jnp.int8(1))
    got = td.jit(f, backend=backend)(x)
    want = jax.jit(f)(x)
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == w.dtype, (g.dtype, w.dtype)
        _check_bits(g, np.asarray(w))


def test_names_and_finfo():
    assert np.dtype(td.float16) == np.float16 and np.dtype(td.bfloat16) == ml_dtypes.bfloat16
    for name in HALVES:
        fi, fj = td.finfo(_dt(name)), jnp.finfo(_dt(name))
        assert (fi.eps, fi.max, fi.tiny, fi.bits) == (fj.eps, fj.max, fj.tiny, fj.bits)
    assert td.asarray(np.ones(2), td.bfloat16).dtype == ml_dtypes.bfloat16


# ---- elementwise: bit for bit where XLA rounds float32's result once ----

# (not sign: tidu's sign(-0.0) is +0.0 in every float dtype, XLA's -0.0)
EXACT_UNARY = ("negative", "abs", "sqrt", "floor", "ceil", "round", "square")
MATH_UNARY = ("exp", "log", "sin", "cos", "tanh", "expm1", "log1p", "arctan", "sinh", "arcsinh",
              "tan", "cbrt")
EXACT_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum")
COMPARE = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")


@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_exact_elementwise_bitwise(name, backend):
    x, y = _values(name), _values(name)[::-1].copy()

    def f(m):
        return lambda a, b: ([getattr(m, n)(a) for n in EXACT_UNARY]
                             + [getattr(m, n)(a, b) for n in EXACT_BINARY + COMPARE]
                             + [m.where(a > b, a, b), m.clip(a, -1, 1)])

    got = td.jit(f(td), backend=backend)(x, y)
    want = jax.jit(f(jnp))(x, y)
    names = list(EXACT_UNARY + EXACT_BINARY + COMPARE) + ["where", "clip"]
    for n, g, w in zip(names, got, want):
        _check_bits(g, np.asarray(w), f"{name} {n} on {backend}")


@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_math_elementwise_within_one_ulp(name, backend):
    """Transcendental functions: float32's value rounded once; the float32 implementations of
    tidu and XLA may differ in their last float32 bit, which moves the 16-bit result by at most one
    unit where it lies on a rounding boundary."""
    x = _values(name, positive=True) * _dt(name).type(0.25)  # in every function's domain
    fs = [getattr(jnp, n) for n in MATH_UNARY]
    got = td.jit(lambda a: [getattr(td, n)(a) for n in MATH_UNARY], backend=backend)(x)
    want = jax.jit(lambda a: [f(a) for f in fs])(x)
    for n, g, w in zip(MATH_UNARY, got, want):
        assert np.asarray(g).dtype == w.dtype, n
        assert _ulps(g, np.asarray(w)) <= 1, (name, n, backend)


@pytest.mark.parametrize("name", HALVES)
def test_interpreter_rounds_float32_once(name):
    """The interpreter's result is exactly float32's result rounded to nearest even."""
    x = _values(name, positive=True)
    got = td.jit(lambda a: (td.exp(a * 0.25), a / 3, td.sqrt(a)))(x)
    x32 = x.astype(np.float32)
    with np.errstate(over="ignore"):
            want = (np.exp(x32 * np.float32(0.25)).astype(_dt(name)), (x32 / 3).astype(_dt(name)),
                np.sqrt(x32).astype(_dt(name)))
    for n, g, w in zip(("exp", "div", "sqrt"), got, want):
        if n == "exp":  # float32 exp of two libraries: one unit of the 16-bit type at most
            assert _ulps(g, w) <= 1
        else:
            _check_bits(g, w, n)


# ---- conversions in every direction ----

@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_astype_every_direction(name, backend):
    x = _values(name)
    small = np.clip(x.astype(np.float32), -100, 100).astype(_dt(name))
    got = td.jit(lambda a, s: [a.astype(d) for d in OTHERS if d not in ("bool",) and "int" not in d]
                 + [s.astype(d) for d in OTHERS if "int" in d or d == "bool"]
                 + [a.astype(h) for h in HALVES], backend=backend)(x, small)
    want = jax.jit(lambda a, s: [a.astype(d) for d in OTHERS if d not in ("bool",) and "int" not in d]
                   + [s.astype(d) for d in OTHERS if "int" in d or d == "bool"]
                   + [a.astype(_dt(h)) for h in HALVES])(x, small)
    for g, w in zip(got, want):
        _check_bits(g, np.asarray(w), f"{name} -> {np.asarray(w).dtype} on {backend}")


@pytest.mark.parametrize("src", OTHERS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_astype_into_halves(src, backend):
    """From every dtype. float64 -> float16 rounds once on the interpreter, as numpy (1 + 2^-11 +
    2^-40 is float16's 1 + 2^-10; XLA:CPU gives 1 through float32 unless the CPU converts in one
    step, AVX512-FP16, so the XLA backend is held to jax on the same machine); float64 ->
    bfloat16 rounds through float32 on both, as ml_dtypes and XLA:CPU (1 + 2^-8 + 2^-40 is 1)."""
    if src == "bool":
        x = np.array([True, False] * 8)
    elif "int" in src:
        info = np.iinfo(src)
        vals = [0, 1, int(info.max), int(info.min), 2049, 2051, 255, 257, 70000, 16777217] * 2
        x = np.array([min(max(v, int(info.min)), int(info.max)) for v in vals], dtype=src)
    else:
        base = rng.standard_normal(16) * 100
        x = (base + 1j * base if "complex" in src else base).astype(src)
        if src == "float64":
            x[:4] = [1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-8 + 2.0**-40, 1e5, -1e-9]
    f = lambda a: [a.astype(_dt(h)) for h in HALVES]
    if "complex" in src:  # jax warns that the imaginary part is dropped; tidu refuses complex
        f = lambda a: [a.real.astype(_dt(h)) for h in HALVES]
    got = td.jit(f, backend=backend)(x)
    want = jax.jit(f)(x)
    if src == "float64" and backend == "cpu":  # numpy's float16, ml_dtypes' bfloat16
        with np.errstate(over="ignore"):  # 1e5 is float16's inf
            want = [x.astype(_dt(h)) for h in HALVES]
        assert want[0][0].view(np.uint16) == np.float16(1 + 2.0**-10).view(np.uint16)
    for g, w in zip(got, want):
        _check_bits(g, np.asarray(w), f"{src} -> {np.asarray(w).dtype} on {backend}")


# ---- reductions, matrix products, data movement, sort, conv ----

@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_reductions_and_products(name, backend):
    x = _values(name, 48).reshape(6, 8) / _dt(name).type(4)
    x[0, :2] = [1, 2]  # no overflow: drop the extremes
    x = np.clip(x.astype(np.float32), -50, 50).astype(_dt(name))
    w = _values(name, 24).reshape(8, 3)
    w = np.clip(w.astype(np.float32), -4, 4).astype(_dt(name))

    def f(m):
        return lambda a, b: (m.sum(a, 0), m.max(a, 1), m.min(a), m.mean(a, 1),
                             m.prod(a[:2, :4], 1), m.cumsum(a, 1), m.argmax(a, 1), a @ b,
                             m.dot(a[0], a[1]))

    got = td.jit(f(td), backend=backend)(x, w)
    want = jax.jit(f(jnp))(x, w)
    names = ("sum", "max", "min", "mean", "prod", "cumsum", "argmax", "matmul", "dot")
    for n, g, wv in zip(names, got, want):
        wv = np.asarray(wv)
        if n in ("max", "min", "argmax"):
            _check_bits(g, wv, n)
        else:  # float32 accumulation in another order than XLA's (which, for cumsum, rounds
            # each partial sum to the 16-bit type: tidu rounds the float32 sums once)
            scale = float(np.max(np.cumsum(np.abs(x.astype(np.float64)), 1))) \
                if n == "cumsum" else 1.0
            _close(g, wv, f"{name} {n} on {backend}", rtol=0.02 if name == "bfloat16" else 4e-3,
                   scale=scale)


@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_data_movement_and_sort_bitwise(name, backend):
    x = _values(name, 48).reshape(6, 8)
    idx = np.array([5, 0, 3, 3])

    def f(m):
        return lambda a, i: (a.T, a[1:5:2, ::-1], m.concatenate([a, a[:2]]), a[i], a.reshape(8, 6),
                             m.broadcast_to(a[0], (3, 8)), m.sort(a, 1), m.argsort(a[0]),
                             a.at[i].set(a[0]), m.pad(a, 1), m.flip(a, 0), m.stack([a[0], a[1]]))

    got = td.jit(f(td), backend=backend)(x, idx)
    want = jax.jit(f(jnp))(x, idx)
    for k, (g, w) in enumerate(zip(got, want)):
        _check_bits(g, np.asarray(w), f"{name} output {k} on {backend}")


@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_and_scatter_add(name, backend):
    x = np.clip(_values(name, 32).astype(np.float32), -3, 3).astype(_dt(name)).reshape(1, 2, 16)
    k = np.clip(_values(name, 12).astype(np.float32), -3, 3).astype(_dt(name)).reshape(3, 2, 2)

    def f(m, lax):
        return lambda a, b: (lax.conv_general_dilated(a, b, (1,), "SAME"),
                             (a[0, 0, :4] * 0).at[np.array([0, 1, 1, 3])].add(a[0, 0, 4:8]))

    got = td.jit(f(td, td.lax), backend=backend)(x, k)
    want = jax.jit(f(jnp, jax.lax))(x, k)
    for g, w in zip(got, want):
        _close(g, np.asarray(w), f"{name} on {backend}", rtol=0.02 if name == "bfloat16" else 4e-3)


# ---- gradients ----

@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_first_order_gradients(name, backend):
    """Cotangents in the input's dtype, as jax; values within the 16-bit type's precision of
    jax's (the two programs round their intermediates at different places)."""
    x = (_values(name, 16, positive=True) % _dt(name).type(3)) + _dt(name).type(0.5)
    w = np.linspace(-1, 1, 16).astype(_dt(name))
    fns = {
        "sin_exp": lambda m: lambda a, b: m.sum(m.sin(a) * m.exp(b)),
        "tanh_dot": lambda m: lambda a, b: m.dot(m.tanh(a), b),
        "log_div": lambda m: lambda a, b: m.sum(m.log(a) / (a + 1) * b),
        "max_sqrt": lambda m: lambda a, b: m.max(m.sqrt(a) * b),
    }
    for k, fn in fns.items():
        got = td.jit(td.grad(fn(td), argnums=(0, 1)), backend=backend)(x, w)
        want = jax.grad(fn(jnp), argnums=(0, 1))(x, w)
        for g, wv in zip(got, want):
            assert np.asarray(g).dtype == _dt(name), (k, np.asarray(g).dtype)
            _close(g, np.asarray(wv), f"{name} {k} on {backend}", rtol=0.05)


# ---- saved programs ----

def test_saved_program_round_trips_halves(tmp_path):
    def f(h, b, s):
        return (td.exp(h) * 2 + h, td.sum(b), b.astype(td.float16), s.astype(td.bfloat16),
                td.sort(h), h[::2] > 1)

    args = [_values("float16", 16, positive=True) / np.float16(8), _values("bfloat16", 16),
            np.linspace(-2, 2, 16)]
    prog = td.jit(f).lower(*args)
    prog.save(tmp_path / "half.tidu")
    loaded = td.load(tmp_path / "half.tidu")
    assert loaded.native.input_dtypes == ["float16", "bfloat16", "float64"]
    want = td.jit(f)(*args)
    for g, w in zip(loaded.eval(args), want):
        _check_bits(g, w)
    with pytest.raises((TypeError, ValueError), match="float16|bfloat16"):
        loaded.eval([args[1], args[0], args[2]])  # bfloat16 where float16 goes, and back


def test_loader_refuses_an_unknown_dtype_code(tmp_path):
    from tidu._native import _eval

    prog = td.jit(lambda h: h * 2).lower(np.ones(3, np.float16))
    prog.save(tmp_path / "ok.tidu")
    data = (tmp_path / "ok.tidu").read_bytes()
    loaded = _eval.Program(data)
    assert loaded.input_dtypes == ["float16"]
    payload = bytearray(data[32:])
    # the first array is slot_dtype: u64 count, then one byte per slot
    n = int.from_bytes(payload[:8], "little")
    codes = bytes(payload[8:8 + n])
    assert _eval.DTYPES.index("float16") in codes
    payload[8 + codes.index(_eval.DTYPES.index("float16"))] = len(_eval.DTYPES)  # past the table
    import struct

    header = bytearray(data[:32])
    h = 0xcbf29ce484222325
    for byte in payload:
        h = ((h ^ byte) * 0x100000001b3) & (2**64 - 1)
    header[24:32] = struct.pack("<Q", h)
    with pytest.raises(_eval.ProgramError, match="unknown dtype"):
        _eval.Program(bytes(header + payload))


def test_conversions_bit_exact_on_every_float16_and_random_float32_patterns():
    """The interpreter's 16-bit conversions against numpy's and ml_dtypes' on all 65536 float16
    bit patterns and 2^16 random float32 ones (subnormals, infinities, NaNs included)."""
    h = np.arange(65536, dtype=np.uint16).view(np.float16)
    b = np.arange(65536, dtype=np.uint16).view(ml_dtypes.bfloat16)
    x = rng.integers(0, 2**32, 65536, dtype=np.uint64).astype(np.uint32).view(np.float32)
    got = td.jit(lambda h, b, x: (h.astype(np.float32), b.astype(np.float32), x.astype(np.float16),
                                  x.astype(ml_dtypes.bfloat16)))(h, b, x)
    with np.errstate(all="ignore"):
        want = (h.astype(np.float32), b.astype(np.float32), x.astype(np.float16),
                x.astype(ml_dtypes.bfloat16))
    for g, w in zip(got, want):
        g32, w32 = g.astype(np.float32), w.astype(np.float32)
        nan = np.isnan(w32)
        np.testing.assert_array_equal(np.isnan(g32), nan)
        np.testing.assert_array_equal(g[~nan].view(f"u{g.itemsize}"), w[~nan].view(f"u{w.itemsize}"))


def test_float64_to_float16_rounds_once_as_numpy():
    """Every float16 halfway point nudged by a float64 ulp either way, subnormals, overflow and
    random values: the interpreter's float64 -> float16 equals numpy's one rounding bit for bit."""
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    mid = (h[:-1] + h[1:]) / 2  # exact in float64
    x = np.concatenate([mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf), h, [65520.0,
                        65519.99, 1e300, 5e-324, 2.0**-25, 2.0**-25 + 2.0**-60],
                        rng.standard_normal(4096) * 10.0 ** rng.integers(-8, 5, 4096)])
    x = np.concatenate([x, -x, [np.inf, -np.inf, np.nan]])
    got = td.jit(lambda a: a.astype(jnp.float16), backend="cpu")(x)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(np.float16)
    _check_bits(got, want, "float64 -> float16")


_LEVEL_SCRIPT = r"""
import sys, numpy as np, ml_dtypes, tidu as td
rng = np.random.default_rng(11)
h = np.arange(65536, dtype=np.uint16)
x = rng.integers(0, 2**32, 65533, dtype=np.uint64).astype(np.uint32)  # 8k + 5: the loops' tails
x[:8] = [0x7F800001, 0xFF800001, 0x7FC00000, 0x7FBFFFFF, 0x00000001, 0x80000001, 0x477FEFFF, 0x477FF000]
x = x.view(np.float32)
f = td.jit(lambda h16, hb, x: (h16.astype(np.float32), hb.astype(np.float32), x.astype(np.float16),
                               x.astype(ml_dtypes.bfloat16), (x * 2).astype(np.float16) * 3))
outs = f(h.view(np.float16), h.view(ml_dtypes.bfloat16), x)
np.savez(sys.argv[1], *[o.view(f"u{o.itemsize}") for o in outs])
"""


def test_conversion_bits_agree_across_simd_levels(tmp_path):
    """The 16-bit conversions run as F16C instructions (float16) and AVX2 integer code (bfloat16)
    where the CPU has them, as portable loops at TIDU_SIMD=generic: every float16 and bfloat16
    pattern and 2^16 random float32 ones (NaN payloads, subnormals, the overflow edge) give the
    same bits, NaNs included, on each level."""
    runs = {}
    for level in ("generic", "avx2", "avx512"):
        out = tmp_path / f"{level}.npz"
        res = subprocess.run([sys.executable, "-c", _LEVEL_SCRIPT, str(out)], capture_output=True,
                             text=True, timeout=300, env=dict(os.environ, TIDU_SIMD=level))
        assert res.returncode == 0, res.stderr[-2000:]
        with np.load(out) as f:
            runs[level] = [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]
    for level, outs in runs.items():
        for i, (got, base) in enumerate(zip(outs, runs["generic"])):
            np.testing.assert_array_equal(got, base, err_msg=f"output {i} at TIDU_SIMD={level}")
