"""Memory soak: does a long-running process get its memory back (issue 29, item 1)?

Phases, each measured as resident memory (RSS, /proc/self/statm) after the phase's objects are
dropped and ``gc.collect()`` ran, relative to the RSS at the start (after a warm-up):

1. closures: N distinct jitted scan closures, each capturing its own constant, called once and
   dropped (the per-closure figure is taken while they are alive, and after they go);
2. builds: M distinct ``td.build`` calls, dropped;
3. shapes: one jitted function called at S shapes (its cache is bounded: jit_per_function);
4. gradient: the gradient of a K-op chain, compiled, called and dropped;
5. constant: a traced closure capturing an 8 MB array: is the array freed with the function?
6. steady: one jitted function called C times: growth between the first tenth and the end.

One jitted function (and its gradient) made before the start stays alive and is called after
every phase, as in a real process: the interner is then never emptied as a whole, so what comes
back comes from cutting it back to the ids live holders reach (docs/memory.md, "Generations");
``--no-live`` drops it first, so the whole-interner emptying is measured instead.

Then the totals: RSS now minus RSS at the start (target: within 20 MB), once as the process has
it and once after ``td.clear_caches()``; ``--jax [N]`` runs phase 1 under jax in a child process
for the per-closure comparison (issue 29 quotes jax at 0.7 KB per closure, freed when the
function goes; this measures it here, after ``jax.clear_caches()`` and ``malloc_trim``).

RSS counts what the C allocator holds, not what tidu holds: glibc keeps freed memory unless
``malloc_trim`` returns it, so each figure is printed before and after ``malloc_trim(0)``.

    python bench/memory_soak.py            # the full run: 10,000 closures, 1e5 builds, 3,000
                                           # shapes, a 1e6-op gradient, 1e6 steady calls
    python bench/memory_soak.py --quick    # about ten times fewer of each
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import subprocess
import sys
import time
import weakref

import numpy as np

import tidu as td

_PAGE = 4096


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


def trim() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def settle() -> tuple[float, float]:
    """(RSS, RSS after malloc_trim) in MB, after a full collection."""
    gc.collect()
    before = rss_mb()
    trim()
    return before, rss_mb()


# ---- phases ----

def closures(n: int) -> float:
    """Peak MB per closure while alive: N jitted scan closures, each called once, then dropped."""
    xs = np.linspace(0.0, 1.0, 8)
    r0 = rss_mb()
    fs = []
    for i in range(n):
        f = _closure(float(i) + 0.5, xs)
        f(1.0)
        fs.append(f)
    per = (rss_mb() - r0) * 1024 / n
    del fs, f
    return per


def _closure(c: float, xs: np.ndarray):
    """A jitted scan closure of its own (its body captures the constant c)."""
    def body(carry, x):
        return carry * 0.5 + c * x, carry

    return td.jit(lambda s: td.scan(body, s, xs)[0])


def builds(m: int) -> None:
    f64 = td.spec((), "float64")
    for i in range(m):
        frag = td.build(lambda x, k=float(i): td.sin(x) * k + x, x=f64)
        del frag


def shapes(s: int) -> None:
    f = td.jit(lambda x: td.sum(td.exp(x) * x))
    for k in range(1, s + 1):
        f(np.ones(k))
    del f


def gradient(k: int) -> None:
    def chain(x):
        y = x
        for _ in range(k // 3):
            y = td.sin(y) * x + 0.5
        return y

    g = td.jit(td.grad(chain))
    g(0.3)
    del g


def constant() -> bool:
    """Whether an 8 MB array captured by a traced closure is freed with the function."""
    f, ref = _capturing(np.random.default_rng(0).standard_normal(1 << 20))
    f(np.ones(1 << 20))
    del f
    gc.collect()
    return ref() is None


def _capturing(big: np.ndarray):
    """A jitted closure capturing big, and a weak reference to big."""
    return td.jit(lambda x: td.sum(x * big)), weakref.ref(big)


def steady(c: int) -> tuple[float, float]:
    """(MB growth from the first tenth of the calls to the end, bytes per call)."""
    f = td.jit(lambda x, y: x * y + 1.0)
    x, y = np.ones(4), np.ones(4)
    tenth = max(c // 10, 1)
    for _ in range(tenth):
        f(x, y)
    gc.collect()
    r1 = rss_mb()
    for _ in range(c - tenth):
        f(x, y)
    gc.collect()
    grow = rss_mb() - r1
    return grow, grow * 2**20 / max(c - tenth, 1)


# ---- jax ----

_JAX_CHILD = """
import gc, sys, numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
n = int(sys.argv[1]); xs = np.linspace(0.0, 1.0, 8)
f = jax.jit(lambda s: jax.lax.scan(lambda c, x: (c * 0.5 + x, c), s, xs)[0]); f(1.0)
gc.collect(); r0 = rss(); fs = []
for i in range(n):
    c = float(i) + 0.5
    def body(carry, x, c=c):
        return carry * 0.5 + c * x, carry
    g = jax.jit(lambda s, body=body: jax.lax.scan(body, s, xs)[0]); g(1.0); fs.append(g)
per = (rss() - r0) * 1024 / n
del fs, g, body; gc.collect(); jax.clear_caches(); gc.collect()
try:
    import ctypes; ctypes.CDLL("libc.so.6").malloc_trim(0)
except (OSError, AttributeError):
    pass
print(per, rss() - r0)
"""


def jax_closures(n: int):
    """(KB per jitted scan closure while alive, MB left after they are dropped) under jax."""
    try:
        out = subprocess.run([sys.executable, "-c", _JAX_CHILD, str(n)], capture_output=True,
                             text=True, timeout=1800, check=True).stdout.split()
    except (subprocess.SubprocessError, OSError):
        return None
    return float(out[0]), float(out[1])


# ---- main ----

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="about ten times fewer of each")
    p.add_argument("--jax", type=int, nargs="?", const=2000, default=0, metavar="N",
                   help="phase 1 under jax too, with N closures (default 2000; a child process)")
    p.add_argument("--json", help="write the figures to this file")
    p.add_argument("--no-live", action="store_true",
                   help="no long-lived function: the interner can be emptied as a whole")
    a = p.parse_args()
    n, m, s, k, c = (1000, 10_000, 300, 30_000, 100_000) if a.quick else \
        (10_000, 100_000, 3000, 1_000_000, 1_000_000)

    f = td.jit(lambda s_: td.scan(lambda q, x: (q + x, q), s_, np.ones(3))[0])
    f(1.0)  # warm-up: the modules and tables a first call loads
    np.random.default_rng(0).standard_normal(8)
    del f
    live = None if a.no_live else (td.jit(lambda x: td.sum(td.tanh(x) * x)),
                                   td.jit(td.grad(lambda x: td.sum(td.tanh(x) * x))))
    xl = np.linspace(-1.0, 1.0, 16)
    want = None if live is None else (live[0](xl), live[1](xl))
    start, start_t = settle()
    print(f"start: RSS {start:.1f} MB ({start_t:.1f} MB after malloc_trim)")
    fig = {"start_mb": start}

    def report(name, t0, extra=""):
        # the process goes on: a collection (a jitted function sits in a reference cycle, so it
        # goes at the collector's next pass), then its next trace, where the automatic reclaim
        # looks
        gc.collect()
        td.build(lambda x: x + 1.0, x=td.spec((), "float64"))
        if live is not None:  # still alive, still right
            assert live[0](xl) == want[0] and np.array_equal(live[1](xl), want[1])
        r, rt = settle()
        st = td.memory_stats()["interner"]
        print(f"{name:>9}: {time.perf_counter() - t0:7.1f} s  RSS {r - start:+8.1f} MB "
              f"(trimmed {rt - start_t:+8.1f} MB)  interner {st['bytes'] / 2**20:7.2f} MB "
              f"{st['n_ops']:>9,d} ops, epoch {st['epoch']}, generation "
              f"{td.memory_stats()['interner']['generation']}{extra}")
        fig[name] = {"rss_mb": r - start, "trimmed_mb": rt - start_t}

    t0 = time.perf_counter()
    per = closures(n)
    report("closures", t0, f"  [{n:,d} closures: {per:.1f} KB each while alive]")
    fig["closure_kb"] = per
    t0 = time.perf_counter()
    builds(m)
    report("builds", t0, f"  [{m:,d} builds]")
    t0 = time.perf_counter()
    shapes(s)
    report("shapes", t0, f"  [{s:,d} shapes]")
    t0 = time.perf_counter()
    gradient(k)
    report("gradient", t0, f"  [{k:,d}-op chain]")
    freed = constant()
    print(f" constant: an 8 MB array captured by a dropped jitted closure "
          f"{'is freed' if freed else 'STAYS ALIVE'}")
    fig["constant_freed"] = freed
    t0 = time.perf_counter()
    grow, per_call = steady(c)
    print(f"   steady: {c:,d} calls of one function: {grow:+.2f} MB over the last 90% "
          f"({per_call:.3f} bytes/call; target 0)")
    fig["steady_mb"], fig["steady_bytes_per_call"] = grow, per_call
    end, end_t = settle()
    fig["arena_pool_mb"] = td.memory_stats()["arena_pool"]["bytes"] / 2**20
    print(f"    arena: the interpreter's arena pool holds {fig['arena_pool_mb']:.1f} MB")
    print(f"      end: RSS {end - start:+.1f} MB vs start ({end_t - start_t:+.1f} MB trimmed, "
          f"{end_t - start_t - fig['arena_pool_mb']:+.1f} MB without the arena pool); "
          f"target within 20 MB")
    td.clear_caches()
    cl, cl_t = settle()
    print(f"    clear: after td.clear_caches(): {cl - start:+.1f} MB ({cl_t - start_t:+.1f} MB "
          f"trimmed)")
    fig["end_mb"], fig["end_trimmed_mb"] = end - start, end_t - start_t
    fig["cleared_mb"], fig["cleared_trimmed_mb"] = cl - start, cl_t - start_t
    print("memory_stats:", {k_: v for k_, v in td.memory_stats().items() if v.get("entries", 1)})
    print("(the interpreter keeps up to 64 MiB of evaluation arenas for reuse: memory_stats()"
          "['arena_pool'], emptied by td.clear_caches)")
    if a.jax:
        nj = min(n, a.jax)
        res = jax_closures(nj)
        if res is None:
            print("jax: not available")
        else:
            print(f"      jax: {nj:,d} jitted scan closures: {res[0]:.1f} KB each while alive, "
                  f"{res[1]:+.1f} MB left after dropping them, jax.clear_caches() and "
                  f"malloc_trim; "
                  f"tidu/jax per closure {per / res[0]:.3f}x")
            fig["jax_closure_kb"], fig["jax_left_mb"] = res
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(fig, fh, indent=1)


if __name__ == "__main__":
    main()
