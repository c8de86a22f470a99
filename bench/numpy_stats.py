"""Issue 32's names in one run, tidu against jax.jit (x64) on the same inputs: quantiles along an
axis, the NaN-aware mean/var, a sorted search and linear interpolation, cov, integer bitwise
hashing (xorshift), the gradient of a quantile loss, and the other reductions issue 32 added
(median, nanmedian, percentile, nansum/nanmax/nanmin, nanstd, weighted average, ptp,
count_nonzero, corrcoef, histogram, bincount). Part (e) of bench/vocab.py.  Per program: the cold figure (a program
never seen before in the process, through its first evaluation) and the warm median, each
tidu / jax (lower is better).

    python bench/numpy_stats.py [--quick] [--clock cpu] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _timing import timed  # noqa: E402

import tidu as td  # noqa: E402


def programs(L, lib):
    """name -> (function of x, y, k) written once for td and jnp (L: the namespace, lib: its
    transforms)."""
    q = np.array([0.05, 0.5, 0.95])
    xp = np.linspace(-3.0, 3.0, 257)
    return {
        "quantile (256, 512) axis 1": lambda x, y, k: L.quantile(x, q, axis=1),
        "nanmean + nanvar": lambda x, y, k: L.nanmean(L.where(x > 2.0, np.nan, x), axis=0)
        + L.nanvar(L.where(x > 2.0, np.nan, x), axis=0),
        "searchsorted 131k in 257": lambda x, y, k: L.searchsorted(xp, x),
        "interp 131k": lambda x, y, k: L.interp(x, xp, np.sin(xp)),
        "cov (256, 512)": lambda x, y, k: L.cov(x),
        "xorshift 131k int64": lambda x, y, k: ((k ^ (k << 13)) ^ ((k ^ (k << 13)) >> 7)) & 0xFFFF,
        "grad of a quantile loss": lambda x, y, k: lib.grad(
            lambda z: L.sum(L.quantile(z, q, axis=1) ** 2))(x),
        # the other reductions issue 32 added
        "median axis 0": lambda x, y, k: L.median(x, axis=0),
        "nanmedian axis 1": lambda x, y, k: L.nanmedian(L.where(x > 2.0, np.nan, x), axis=1),
        "percentile 90 flat": lambda x, y, k: L.percentile(x, 90.0),
        "nansum+nanmax+nanmin": lambda x, y, k: L.nansum(L.where(x > 2.0, np.nan, x), axis=0)
        + L.nanmax(L.where(x > 2.0, np.nan, x), axis=0)
        + L.nanmin(L.where(x > 2.0, np.nan, x), axis=0),
        "nanstd axis 1": lambda x, y, k: L.nanstd(L.where(x > 2.0, np.nan, x), axis=1),
        "average(weights) axis 1": lambda x, y, k: L.average(x, axis=1, weights=y),
        "ptp + count_nonzero": lambda x, y, k: L.ptp(x, axis=0) + L.count_nonzero(x > 1.0, axis=0),
        "corrcoef (256, 512)": lambda x, y, k: L.corrcoef(x),
        "histogram 64 bins": lambda x, y, k: L.histogram(x, bins=64, range=(-4.0, 4.0))[0],
        "bincount length 4096": lambda x, y, k: L.bincount(k.ravel() & 4095, length=4096),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall time, or the process's CPU time (all threads; a loaded machine "
                         "stretches it far less)")
    ap.add_argument("--only", nargs="*", help="run the programs whose name starts with these")
    args = ap.parse_args(argv)
    repeat = 5 if args.quick else 21
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    import jax  # noqa: PLC0415 - the peer, optional

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp  # noqa: PLC0415

    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 512))
    k = rng.integers(0, 2**40, size=(256, 512))
    y = rng.standard_normal(512)
    tdp, jp = programs(td, td), programs(jnp, jax)
    print(f"{'program':28s} {'cold td':>9s} {'cold jax':>9s} {'ratio':>7s} "
          f"{'warm td':>9s} {'warm jax':>9s} {'ratio':>7s}")
    for name in tdp:
        if args.only and not any(name.startswith(o) for o in args.only):
            continue
        ft = td.jit(tdp[name])
        fj = jax.jit(jp[name])
        out_t, cold_t, warm_t = timed(lambda: ft(x, y, k), repeat, clock)
        out_j, cold_j, warm_j = timed(lambda: np.asarray(fj(x, y, k)), repeat, clock)
        np.testing.assert_allclose(np.asarray(out_t), np.asarray(out_j), rtol=1e-9, atol=1e-9)
        print(f"{name:28s} {cold_t * 1e3:8.2f}ms {cold_j * 1e3:8.2f}ms {cold_t / cold_j:7.2f} "
              f"{warm_t * 1e3:8.3f}ms {warm_j * 1e3:8.3f}ms {warm_t / warm_j:7.2f}")


if __name__ == "__main__":
    main()
