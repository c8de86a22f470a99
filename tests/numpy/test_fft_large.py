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

rng = np.random.default_rng(7)


def arr(shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


# (function, input shape, input is complex); lengths: powers of two, 3 * 2^12, 16 * 4099 (the
# four-step split 16 x 4099), a prime (no split: pocketfft's Bluestein), 2 rows and 1
CASES = [
    ("fft", (4096,), True), ("fft", (2, 65536), True), ("ifft", (1 << 18,), True),
    ("ifft", (3, 12288), True), ("fft", (16 * 4099,), True), ("fft", (65537,), True),
    ("fft2", (256, 256), True), ("ifft2", (3, 96, 160), True), ("fftn", (32, 48, 64), True),
    ("rfft", (4, 1 << 16), False), ("rfft2", (256, 300), False), ("irfft", (5, 8193), True),
    ("irfft2", (200, 129), True), ("irfftn", (16, 40, 65), True), ("rfftn", (24, 32, 80), False),
]


@pytest.mark.parametrize("single", [True, False], ids=["complex64", "complex128"])
@pytest.mark.parametrize("name,shape,cplx", CASES, ids=[f"{c[0]}-{'x'.join(map(str, c[1]))}" for c in CASES])
def test_large_transforms_match_numpy(name, shape, cplx, single):
    dt = (np.complex64 if single else np.complex128) if cplx else (np.float32 if single else np.float64)
    x = arr(shape, dt)
    got = td.jit(getattr(td.fft, name))(x)
    want = getattr(np.fft, name)(x.astype(np.complex128 if cplx else np.float64))
    assert got.dtype == (np.result_type(dt, np.complex64) if name not in ("irfft", "irfft2", "irfftn")
                         else np.dtype(np.float32 if single else np.float64))
    assert got.shape == want.shape
    # pocketfft's and the four-step's rounding: a few ulp of the largest coefficient, times log n
    tol = (2e-6 if single else 4e-15) * np.log2(x.size)
    assert np.abs(got - want).max() <= tol * np.abs(want).max()


def test_one_and_two_threads_give_the_same_bits():
    """Threads split a transform into whole lines (and the four-step's columns and rows), each
    computed as on one thread: the values do not depend on the thread count."""
    code = (
        "import sys, numpy as np, tidu as td\n"
        "rng = np.random.default_rng(3)\n"
        "z = rng.standard_normal((2, 1 << 16)) + 1j * rng.standard_normal((2, 1 << 16))\n"
        "m = rng.standard_normal((256, 384))\n"
        "outs = [td.jit(td.fft.fft)(z[:1]), td.jit(td.fft.ifft)(z), td.jit(td.fft.rfft2)(m),\n"
        "        td.jit(td.fft.irfft2)(td.jit(td.fft.rfft2)(m)), td.jit(td.fft.fft2)(z.reshape(256, 512))]\n"
        "sys.stdout.buffer.write(b''.join(np.ascontiguousarray(o).tobytes() for o in outs))\n")
    runs = []
    for threads in ("1", "2"):
        env = dict(os.environ, TIDU_NUM_THREADS=threads)
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr.decode()[-2000:]
        runs.append(res.stdout)
    assert len(runs[0]) > 0 and runs[0] == runs[1]
