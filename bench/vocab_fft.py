"""Issue 32, bench (d): the FFT family per call, tidu (``td.jit`` of ``td.fft``, the C++
interpreter over pocketfft) against ``jax.jit`` of ``jnp.fft`` (XLA's CPU FFT, DUCC) in the same
process: a 1-D FFT of 2^16 complex values, an rfft of 1e6 reals and an fft2 of 512 x 512.

    python bench/vocab_fft.py [--quick] [--float64] [--clock cpu] [--stat min]

With ``--clock cpu`` the figures are the process's CPU time per call (all threads: tidu splits a
large transform over its pool, so this charges tidu for both cores where wall time would not);
on a loaded machine wall time mostly measures the scheduler. ``--stat min`` reports the fastest
of the repeats instead of their median (on a shared machine the median moves by 10-30% between
runs; the minimum, what a call costs when nothing else is contending for the caches, moves less).

Target: >= 1x jax.jit's speed (ratio tidu / jax.jit <= 1).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tidu as td
from _timing import timeit


def cases(dtype, rng):
    cdt = np.result_type(dtype, np.complex64)
    z = (rng.standard_normal(1 << 16) + 1j * rng.standard_normal(1 << 16)).astype(cdt)
    r = rng.standard_normal(1_000_000).astype(dtype)
    m = (rng.standard_normal((512, 512)) + 1j * rng.standard_normal((512, 512))).astype(cdt)
    return [("fft 2^16 complex", "fft", z), ("rfft 1e6 real", "rfft", r),
            ("fft2 512x512 complex", "fft2", m)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    ap.add_argument("--float64", action="store_true", help="float64/complex128 instead of 32-bit")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall time (default) or the process's CPU time, all threads")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="the median of the repeats (default) or the fastest")
    args = ap.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    dtype = np.float64 if args.float64 else np.float32
    repeat, number = (3, 3) if args.quick else (9, 10)
    stat = min if args.stat == "min" else statistics.median
    if args.stat == "min" and not args.quick:
        repeat, number = 30, 3
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    if jax is not None and args.float64:
        jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(0)
    tol = 1e-3 if dtype == np.float32 else 1e-9
    print(f"FFT family per call ({np.dtype(dtype).name} precision, {args.clock} clock, {args.stat}, "
          f"tidu threads: {td.get_num_threads()})")
    for title, name, x in cases(dtype, rng):
        f_td = td.jit(getattr(td.fft, name))
        want = np.asarray(getattr(np.fft, name)(x.astype(np.result_type(x.dtype, np.float64))))
        got = f_td(x)
        scale = np.abs(want).max()
        assert np.abs(got - want).max() <= tol * scale, title
        t_td = timeit(lambda: f_td(x), repeat, number, clock=clock, stat=stat)
        line = f"  {title:22s} tidu {t_td * 1e3:8.3f} ms"
        if jax is not None:
            f_jx = jax.jit(getattr(jnp.fft, name))
            xj = jax.device_put(x)
            f_jx(xj).block_until_ready()
            t_jx = timeit(lambda: f_jx(xj).block_until_ready(), repeat, number, clock=clock,
                          stat=stat)
            line += f"   jax.jit {t_jx * 1e3:8.3f} ms   tidu / jax.jit {t_td / t_jx:5.2f}x"
        print(line)
    if jax is None:
        print("  jax not installed: no comparison")
    print("  target: tidu / jax.jit <= 1.0x")


if __name__ == "__main__":
    main()
