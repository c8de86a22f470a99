"""Per-call time of a jitted function from Python: the no-static-argument fast path (which
static arguments must not slow down), a static argument, and keyword arguments, each beside
``prog.eval`` of the same compiled program (``f.lower(...).program``) in the same run.

    python bench/jit_call.py [--quick]

Prints the median over repeats of the per-call time in microseconds, and the jitted call's
overhead over ``prog.eval`` (issue 19's target: at most 0.3 us)."""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tidu as td


def per_call(f, args, kwargs, n: int, repeats: int) -> float:
    """Median per-call seconds of f(*args, **kwargs) over repeats of n calls."""
    f(*args, **kwargs)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            f(*args, **kwargs)
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    opts = ap.parse_args()
    n, repeats = (2_000, 5) if opts.quick else (20_000, 15)
    x = np.linspace(0.0, 1.0, 8)
    cases = [
        ("jit(f)(scalar)", td.jit(lambda x: x * 2.0 + 1.0), (0.5,), {}),
        ("jit(f)(ndarray[8])", td.jit(lambda x: x * 2.0 + 1.0), (x,), {}),
        ("jit(grad(f))(scalar)", td.jit(td.grad(lambda x: td.sin(x) * x)), (0.5,), {}),
    ]
    try:
        cases += [
            ("jit(f, static_argnums=1)(ndarray[8], 3)",
             td.jit(lambda x, n: x * n, static_argnums=1), (x, 3), {}),
            ("jit(f)(ndarray[8], scale=2.0)", td.jit(lambda x, scale: x * scale), (x,),
             {"scale": 2.0}),
        ]
        cases[-2][1](x, 3)
        cases[-1][1](x, scale=2.0)
    except TypeError:  # a tidu without static or keyword arguments
        cases = cases[:3]
    print(f"{'call':45s} {'jitted':>9s} {'prog.eval':>10s} {'overhead':>9s}")
    for name, f, args, kwargs in cases:
        low = f.lower(*args, **kwargs)
        flat = list(args[:1] if kwargs or "static" in name else args) + list(kwargs.values())
        inputs = [np.asarray(flat[i]) if not isinstance(flat[i], float) else flat[i]
                  for i in low._leaf]
        # interleaved repeats, so both see the same load on the (shared) machine
        pairs = [(per_call(f, args, kwargs, n, 1), per_call(low.program.eval, (inputs,), {}, n, 1))
                 for _ in range(repeats)]
        t_jit = statistics.median(a for a, _ in pairs)
        t_eval = statistics.median(b for _, b in pairs)
        print(f"{name:45s} {t_jit * 1e6:7.3f} us {t_eval * 1e6:7.3f} us {(t_jit - t_eval) * 1e6:+7.3f} us")


if __name__ == "__main__":
    main()
