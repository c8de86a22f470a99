"""The FFT kernel's paths for large transforms (kernels/fft.hpp): the four-step form of long 1-D
complex transforms (lengths >= 2^12 with a divisor >= 16) and transforms split over the thread
pool, against numpy's pocketfft in float64, in both precisions, with one and two threads (the
same values to the bit: each thread runs whole lines of the same plans)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import tidu as td
from _support.values import value  # normal floats, complexes with normal real and imaginary parts

rng = np.random.default_rng(7)


# (function, input shape, input is complex); lengths: powers of two, 3 * 2^12, 16 * 4099 (the
# four-step split 16 x 4099), a prime (no split: pocketfft's Bluestein), 2 rows and 1
CASES = [
    ("fft", (4096,), True), ("fft", (2, 65536), True), ("ifft", (1 << 18,), True),
    ("ifft", (3, 12288), True), ("fft", (16 * 4099,), True), ("fft", (65537,), True),
    ("fft2", (256, 256), True), ("ifft2", (3, 96, 160), True), ("fftn", (32, 48, 64), True),
    ("rfft", (4, 1 << 16), False), ("rfft2", (256, 300), False), ("irfft", (5, 8193), True),
    ("irfft2", (200, 129), True), ("irfftn", (16, 40, 65), True), ("rfftn", (24, 32, 80), False),
    # one long rfft as a half-length four-step transform plus the untangling twiddle: 2^17, 1e6,
    # 2 * 16 * 4099, 2 rows of 3 * 2^13; an odd length and 2 * a prime keep pocketfft's r2c
    ("rfft", (1 << 17,), False), ("rfft", (1_000_000,), False), ("rfft", (2 * 16 * 4099,), False),
    ("rfft", (2, 24576), False), ("rfft", (100_001,), False), ("rfft", (2 * 65537,), False),
    # column passes by blocks: widths that leave columns over after the vector groups and blocks
    ("fft2", (96, 203), True), ("ifftn", (5, 40, 37), True), ("fftn", (7, 3, 130), True),
    ("fft", (64, 3), True),
]


@pytest.mark.parametrize("single", [True, False], ids=["complex64", "complex128"])
@pytest.mark.parametrize("name,shape,cplx", CASES, ids=[f"{c[0]}-{'x'.join(map(str, c[1]))}" for c in CASES])
def test_large_transforms_match_numpy(name, shape, cplx, single):
    dt = (np.complex64 if single else np.complex128) if cplx else (np.float32 if single else np.float64)
    x = value(rng, shape, dt)
    got = td.jit(getattr(td.fft, name))(x)
    want = getattr(np.fft, name)(x.astype(np.complex128 if cplx else np.float64))
    assert got.dtype == (np.result_type(dt, np.complex64) if name not in ("irfft", "irfft2", "irfftn")
                         else np.dtype(np.float32 if single else np.float64))
    assert got.shape == want.shape
    # pocketfft's and the four-step's rounding: a few ulp of the largest coefficient, times log n
    tol = (2e-6 if single else 4e-15) * np.log2(x.size)
    assert np.abs(got - want).max() <= tol * np.abs(want).max()


# The column pass's copies into and out of the vector lanes (fft_variant.hpp, to_lanes/from_lanes:
# shuffles in the AVX2 build): widths that are whole lane groups, whole 64-column blocks, groups
# with columns left over and fewer columns than a group; odd, prime and non-power-of-two
# transformed lengths; batch axes in front.
COLUMN_CASES = [
    ("fft2", (8, 4)), ("fft2", (12, 8)), ("fft2", (17, 64)), ("fft2", (31, 67)), ("fft2", (2, 3, 130)),
    ("ifft2", (97, 12)), ("fftn", (5, 11, 9)), ("ifftn", (3, 2, 13, 200)), ("fft2", (4, 509, 6)),
    ("fftn", (6, 7, 8, 9)),
]


@pytest.mark.parametrize("name,shape", COLUMN_CASES, ids=[f"{c[0]}-{'x'.join(map(str, c[1]))}" for c in COLUMN_CASES])
def test_column_pass_lanes_match_numpy(name, shape):
    x = value(rng, shape, np.complex128)
    got = td.jit(getattr(td.fft, name))(x)
    want = getattr(np.fft, name)(x)
    assert got.dtype == np.complex128 and got.shape == want.shape
    # numpy's pocketfft and tidu's transform each line by the same algorithm: a few ulp apart
    assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max()
    got32 = td.jit(getattr(td.fft, name))(x.astype(np.complex64))
    assert got32.dtype == np.complex64
    assert np.abs(got32 - want).max() <= 2e-6 * np.log2(x.size) * np.abs(want).max()


# The fused fft2 pass of complex128 (fft_variant.hpp, fft2_fused and rfft2_fused: the rows with the
# columns' first radix-8 step, then short columns), taken for the last two axes L x N when L is a
# multiple of 8, L >= 256 and L * N > 2^16 (N the complex output's length): powers of two, odd and prime row lengths (a Bluestein row),
# M = L / 8 odd or prime, batch axes in front, more than two axes (the others after it), a
# single column; and shapes next to it that keep the plain passes (L not a multiple of 8, L < 256,
# a slab of 2^16 values).
FUSED_CASES = [
    ("fft2", (512, 512)), ("ifft2", (512, 512)), ("fft2", (264, 251)), ("fft2", (256, 257)),
    ("ifft2", (2, 520, 129)), ("fftn", (3, 256, 300)), ("ifftn", (2, 3, 512, 65)),
    ("fft2", (1, 1024, 67)), ("fft2", (8192, 9)), ("ifft2", (65536 + 8, 1)), ("fft2", (2, 1032, 1021)),
    ("fft2", (260, 300)), ("fft2", (248, 300)), ("fft2", (256, 256)),
    # rfft2/rfftn: pocketfft's r2c rows in the fused pass (even, odd, prime row lengths)
    ("rfft2", (512, 512)), ("rfft2", (264, 503)), ("rfft2", (2, 256, 514)), ("rfftn", (3, 520, 255)),
    ("rfft2", (8192, 17)), ("rfftn", (2, 2, 512, 300)), ("rfft2", (256, 510)),
]


@pytest.mark.parametrize("name,shape", FUSED_CASES, ids=[f"{c[0]}-{'x'.join(map(str, c[1]))}" for c in FUSED_CASES])
def test_fused_fft2_pass_matches_numpy(name, shape):
    x = value(rng, shape, np.float64 if name.startswith("r") else np.complex128)
    got = td.jit(getattr(td.fft, name))(x)
    want = getattr(np.fft, name)(x)
    assert got.dtype == np.complex128 and got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max()
    # every slab, not only the one with the largest coefficient (the transform is linear per slab)
    err = np.abs(got - want) / np.abs(want).max(axis=(-2, -1), keepdims=True)
    assert err.max() <= 1e-12


def test_one_and_two_threads_give_the_same_bits():
    """Threads split a transform into whole lines (and the four-step's columns and rows), each
    computed as on one thread: the values do not depend on the thread count."""
    code = (
        "import sys, numpy as np, tidu as td\n"
        "rng = np.random.default_rng(3)\n"
        "z = rng.standard_normal((2, 1 << 16)) + 1j * rng.standard_normal((2, 1 << 16))\n"
        "m = rng.standard_normal((256, 384))\n"
        "outs = [td.jit(td.fft.fft)(z[:1]), td.jit(td.fft.ifft)(z), td.jit(td.fft.rfft2)(m),\n"
        "        td.jit(td.fft.irfft2)(td.jit(td.fft.rfft2)(m)), td.jit(td.fft.fft2)(z.reshape(256, 512)),\n"
        "        td.jit(td.fft.rfft)(z.real.reshape(-1)), td.jit(td.fft.fft2)(z.reshape(-1)[:97 * 1001].reshape(97, 1001)),\n"
        "        td.jit(td.fft.fftn)(z.reshape(-1)[:6 * 50 * 203].reshape(6, 50, 203).astype(np.complex64))]\n"
        "w = rng.standard_normal((3, 520, 129)) + 1j * rng.standard_normal((3, 520, 129))\n"
        "outs += [td.jit(td.fft.fft2)(w), td.jit(td.fft.ifft2)(w.reshape(-1)[:264 * 251].reshape(264, 251)),\n"
        "         td.jit(td.fft.fftn)(w.reshape(-1)[:2 * 256 * 300].reshape(2, 256, 300)),\n"
        "         td.jit(td.fft.rfft2)(w.real.reshape(-1)[:256 * 514].reshape(256, 514)),\n"
    "         td.jit(td.fft.fft2)(w.astype(np.complex64)), td.jit(td.fft.ifft2)(w.reshape(-1)[:512 * 129].reshape(512, 129).astype(np.complex64))]\n"
        "sys.stdout.buffer.write(b''.join(np.ascontiguousarray(o).tobytes() for o in outs))\n")
    runs = []
    for threads in ("1", "2"):
        env = dict(os.environ, TIDU_NUM_THREADS=threads)
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr.decode()[-2000:]
        runs.append(res.stdout)
    assert len(runs[0]) > 0 and runs[0] == runs[1]


_LEVELS_SCRIPT = (
    "import sys, numpy as np, tidu as td\n"
    "rng = np.random.default_rng(5)\n"
    "z = rng.standard_normal((2, 1 << 15)) + 1j * rng.standard_normal((2, 1 << 15))\n"
    "outs = [td.jit(td.fft.fft)(z), td.jit(td.fft.rfft)(z.real.reshape(-1)),\n"
    "        td.jit(td.fft.fft2)(z.reshape(128, 512)), td.jit(td.fft.ifftn)(z.reshape(-1)[:40 * 30 * 37].reshape(40, 30, 37)),\n"
    "        td.jit(td.fft.irfft2)(z.reshape(256, 256)), td.jit(td.fft.fft2)(z.reshape(256, 256).astype(np.complex64)),\n"
    "        td.jit(td.fft.rfft)(z.real.reshape(-1).astype(np.float32))]\n"
    "w = rng.standard_normal((2, 264, 251)) + 1j * rng.standard_normal((2, 264, 251))\n"
    "outs += [td.jit(td.fft.ifft2)(w), td.jit(td.fft.fftn)(w.reshape(-1)[:2 * 512 * 129].reshape(2, 512, 129)),\n"
    "         td.jit(td.fft.rfft2)(w.real.reshape(-1)[:256 * 514].reshape(256, 514)),\n"
    "         td.jit(td.fft.fft2)(w.astype(np.complex64)), td.jit(td.fft.ifft2)(w.reshape(-1)[:512 * 129].reshape(512, 129).astype(np.complex64))]\n"
    "print(td._eval.fft_variant())\n"
    "np.savez(sys.argv[1], *outs)\n")


def test_each_simd_level_gives_numpys_values_and_the_same_bits(tmp_path):
    """TIDU_SIMD=generic, avx2 and avx512 (each capped by the CPU): the FFT kernel's build of
    pocketfft for that level gives numpy's values, and the vector builds give the generic build's
    bits (they leave out FMA, fft_variant.hpp; the fused fft2 pass's 8-point step does the same
    IEEE operations in its AVX2 and scalar forms)."""
    rng5 = np.random.default_rng(5)
    z = rng5.standard_normal((2, 1 << 15)) + 1j * rng5.standard_normal((2, 1 << 15))
    # fused fft2 pass shapes (264 x 251, 512 x 129 and an rfft2's 256 x 258 slabs, over 2^16 values;
    # complex64 too: its 8-point step has AVX and scalar forms, its rows 8 or 4 lanes)
    w = rng5.standard_normal((2, 264, 251)) + 1j * rng5.standard_normal((2, 264, 251))
    want = [np.fft.fft(z), np.fft.rfft(z.real.reshape(-1)), np.fft.fft2(z.reshape(128, 512)),
            np.fft.ifftn(z.reshape(-1)[:40 * 30 * 37].reshape(40, 30, 37)),
            np.fft.irfft2(z.reshape(256, 256)), np.fft.fft2(z.reshape(256, 256).astype(np.complex64)),
            np.fft.rfft(z.real.reshape(-1).astype(np.float32)),
            np.fft.ifft2(w), np.fft.fftn(w.reshape(-1)[:2 * 512 * 129].reshape(2, 512, 129)),
            np.fft.rfft2(w.real.reshape(-1)[:256 * 514].reshape(256, 514)),
            np.fft.fft2(w.astype(np.complex64)),
            np.fft.ifft2(w.reshape(-1)[:512 * 129].reshape(512, 129).astype(np.complex64))]
    runs = {}
    for level in ("generic", "avx2", "avx512"):
        out = tmp_path / f"{level}.npz"
        env = dict(os.environ, TIDU_SIMD=level)
        res = subprocess.run([sys.executable, "-c", _LEVELS_SCRIPT, str(out)], capture_output=True,
                             env=env, timeout=300, text=True)
        assert res.returncode == 0, res.stderr[-2000:]
        variant = res.stdout.split()[-1]
        assert variant in ("generic", "avx2")
        if level == "generic":
            assert variant == "generic"
        with np.load(out) as f:
            runs[level] = (variant, [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))])
    for level, (variant, outs) in runs.items():
        assert len(outs) == len(want)
        for got, w in zip(outs, want):
            tol = (2e-6 if got.dtype in (np.complex64, np.float32) else 4e-15) * np.log2(w.size)
            assert np.abs(got - w).max() <= tol * np.abs(w).max(), (level, variant)
        for got, base in zip(outs, runs["generic"][1]):
            assert got.tobytes() == base.tobytes(), (level, variant)
    if td._eval.simd_variant() != "generic":  # a CPU with AVX2: the vector build was exercised
        assert runs["avx2"][0] == "avx2"
