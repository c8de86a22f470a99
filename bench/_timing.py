"""The timing helper the bench scripts share (run as ``python bench/<name>.py``, so this folder is
on sys.path)."""

from __future__ import annotations

import statistics
import time


def timeit(fn, repeat: int = 7, number: int = 1, warmup: bool = True, clock=time.perf_counter,
           stat=statistics.median) -> float:
    """Median (or `stat`, e.g. min) over `repeat` runs of the time per call of `number` calls
    (after one warm-up call unless warmup is False), in seconds of `clock`: wall time, or
    `time.process_time` for the process's CPU time (every thread's), which a loaded machine
    stretches far less."""
    if warmup:
        fn()
    ts = []
    for _ in range(repeat):
        t0 = clock()
        for _ in range(number):
            fn()
        ts.append((clock() - t0) / number)
    return stat(ts)


def timed(fn, repeat: int, clock=time.perf_counter):
    """(fn's result, the first call's time, the median of `repeat` more calls), in seconds of
    `clock` (wall time, or time.process_time): the cold figure of a function never called before,
    and its warm one."""
    t0 = clock()
    out = fn()
    cold = clock() - t0
    samples = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        samples.append(clock() - t0)
    return out, cold, statistics.median(samples)


def calls(fn, n: int):
    """(median, slowest / median) of n calls of fn, in seconds: the warm figure and how far the
    worst call strays from it."""
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    med = statistics.median(ts)
    return med, max(ts) / med


def settle(f, call, budget):
    """Call f until tiered execution has decided every program's tier for good (or `budget`
    seconds pass): the default backend's warm figures are taken after that.  Returns a line
    saying what it decided, after how many calls and seconds."""
    t0, n = time.perf_counter(), 0
    tiers = getattr(f, "tiers", lambda: [])
    while tiers() and not all(s["final"] for s in tiers()) and time.perf_counter() - t0 < budget:
        call()
        n += 1
    states = tiers()
    if not states:
        return "no tiering (ruled out at compile time, or off)"
    s = states[0]
    comp = f", compile {s['compile_s']:.2f} s (estimate {s['budget_s']:.2f} s)" \
        if s["compile_s"] is not None else ""
    return (f"{s['tier']}{'' if s['final'] else ' (undecided)'} after {n} more calls, "
            f"{time.perf_counter() - t0:.1f} s{comp}: {s['why']}")
