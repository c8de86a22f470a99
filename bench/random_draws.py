"""td.random against jax.random under jax.jit, in one process (x64, CPU): 1e7 normals in float32
and float64, 1e6 categorical draws over 1,000 classes, six of jax's transforms of the basic draws
(wald, weibull_min, lognormal, geometric, triangular, rayleigh: 1e6 each), 1e5 binomials over
both of jax's samplers, and an HMC step that draws its momentum inside scan (500 steps, 10-d).  Prints cold (first call: trace, compile, run) and warm (median)
times, the ratios jax / tidu (> 1: tidu faster) and the largest difference of the numbers drawn
(0: identical).  ``--quick`` shrinks the sizes 10x; ``--full`` draws the issue's categorical size,
1e6 draws over 1,000 classes (tidu draws it in blocks, peak memory ~200 MB), with 2 warm calls
instead of 5: by default the case draws 1e5, since at 1e6 each call of either takes 10-20 s of
a core (1e9 float64 Gumbel values), and jax's 1e6 program was killed for memory (13 GB
resident) on a 23 GB machine (docs/random.md, Figures).  ``--clock cpu`` times this process's CPU time (all its
threads) instead of wall time: on a shared machine the work each side does, not its waits.
``--case TEXT`` runs only the cases whose name contains TEXT.  ``--split`` then breaks each
normals case's first call into its parts, in fresh functions: tidu's trace + compile
(``td.jit(f).lower``) and its first and later evaluations, jax's trace + lower and XLA compile
and its first and later calls.

Run: python bench/random_draws.py [--quick] [--full] [--clock cpu] [--case TEXT] [--split]"""

from __future__ import annotations

import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np


import tidu as td

jax.config.update("jax_enable_x64", True)
QUICK = "--quick" in sys.argv
S = 10 if QUICK else 1
# categorical's draws: 1e6 x 1000 float64 Gumbel noise values (tidu draws them block by block,
# never whole), 1e5 draws unless --full
CAT = 10**6 // S if "--full" in sys.argv else 10**5 // S
REPEAT = 5
CPU_CLOCK = "--clock" in sys.argv and sys.argv[sys.argv.index("--clock") + 1] == "cpu"
CASE = sys.argv[sys.argv.index("--case") + 1] if "--case" in sys.argv else ""
clock = time.process_time if CPU_CLOCK else time.perf_counter


def timed(fn, repeat: int):
    """(fn's result, the first call's time, the median of `repeat` more calls), in seconds of
    `clock` (wall, or this process's CPU time with --clock cpu)."""
    t0 = clock()
    out = fn()
    cold = clock() - t0
    samples = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        samples.append(clock() - t0)
    return out, cold, statistics.median(samples)


def normals(mod, dt):
    return lambda k: mod.random.normal(k, (10**7 // S,), dt)


def categorical(mod):
    logits = np.log(np.linspace(1.0, 2.0, 1000))
    return lambda k: mod.random.categorical(k, logits, shape=(CAT,))


def transforms(mod):
    """stop 51's distributions (tidu/random/more.py), 1e6 draws each, in one program."""
    n = 10**6 // S
    r = mod.random

    def f(k):
        ks = r.split(k, 6)
        return (r.wald(ks[0], 1.5, (n,)), r.weibull_min(ks[1], 2.0, 1.5, (n,)),
                r.lognormal(ks[2], 0.5, (n,)), r.geometric(ks[3], 0.2, (n,)),
                r.triangular(ks[4], 0.0, 0.3, 1.0, (n,)), r.rayleigh(ks[5], 2.0, (n,)))
    return f


def binomial(mod):
    """1e5 binomial draws over both of jax's samplers (n p <= 10: inversion; above: BTRS)."""
    n = np.array([5.0, 40.0, 400.0, 4000.0])
    return lambda k: mod.random.binomial(k, n, 0.3, (10**5 // S // 4, 4))


def hmc(mod, lax_scan):
    """500 leapfrog-free HMC-like steps on a 10-d Gaussian: momentum drawn inside the loop."""
    def step(carry, i):
        x, key = carry
        key, sub = mod.random.split(key)
        p = mod.random.normal(sub, (10,))
        x = x + 0.1 * p - 0.01 * x
        return (x, key), mod.sum(x * x) if mod is td else jnp.sum(x * x)

    def run(k):
        (x, _), ys = lax_scan(step, (jnp.zeros(10) if mod is jax else td.zeros(10), k),
                              mod.arange(500 // S) if mod is td else jnp.arange(500 // S))
        return x, ys
    return run


def block(x):
    return jax.block_until_ready(x)


def _t(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def split_first_call():
    """The first call of the normals cases in parts (ms), each in a function never called."""
    k, jk = td.random.PRNGKey(1), jax.random.PRNGKey(1)
    print(f"\n{'first call, in parts':24s} {'trace+compile':>14s} {'1st run':>9s} {'2nd run':>9s}")
    for dt in ("float32", "float64"):
        n = 10**7 // S

        def tf(key, dt=dt):
            return td.random.normal(key, (n,), dt)

        def jf(key, dt=dt):
            return jax.random.normal(key, (n,), dt)

        low, tl = _t(lambda: td.jit(tf).lower(k))
        _, t1 = _t(lambda: low(k))
        _, t2 = _t(lambda: low(k))
        print(f"{'tidu normal ' + dt:24s} {tl * 1e3:13.1f}ms {t1 * 1e3:8.1f}ms {t2 * 1e3:8.1f}ms")
        jl, tjl = _t(lambda: jax.jit(jf).lower(jk))
        jc, tjc = _t(lambda: jl.compile())
        _, j1 = _t(lambda: block(jc(jk)))
        _, j2 = _t(lambda: block(jc(jk)))
        print(f"{'jax normal ' + dt:24s} {(tjl + tjc) * 1e3:13.1f}ms {j1 * 1e3:8.1f}ms "
              f"{j2 * 1e3:8.1f}ms  (trace+lower {tjl * 1e3:.1f}ms, XLA compile {tjc * 1e3:.1f}ms)")


def main():
    cases = [("normal f32 1e7", normals(td, "float32"), normals(jax, "float32")),
             ("normal f64 1e7", normals(td, "float64"), normals(jax, "float64")),
             (f"categorical {CAT:.0e}x1000", categorical(td), categorical(jax)),
             ("wald..rayleigh 6x1e6", transforms(td), transforms(jax)),
             ("binomial 1e5", binomial(td), binomial(jax)),
             ("hmc scan 500x10", hmc(td, td.scan), hmc(jax, jax.lax.scan))]
    k, jk = td.random.PRNGKey(0), jax.random.PRNGKey(0)
    print(f"{'case':24s} {'tidu cold':>10s} {'jax cold':>10s} {'ratio':>7s} "
          f"{'tidu warm':>10s} {'jax warm':>10s} {'ratio':>7s}"
          f"   ({'process CPU' if CPU_CLOCK else 'wall'} time, {td.get_num_threads()} tidu threads)")
    for name, tf, jf in cases:
        if CASE not in name:
            continue
        repeat = 2 if CAT >= 10**6 and name.startswith("categorical") else REPEAT
        tj, jj = td.jit(tf), jax.jit(jf)
        tout, tc, tw = timed(lambda: tj(k), repeat)
        jout, jc, jw = timed(lambda: block(jj(jk)), repeat)
        diff = max(float(np.max(np.abs(np.asarray(a, float) - np.asarray(b, float)), initial=0))
                   for a, b in zip(jax.tree_util.tree_leaves(tout),
                                   jax.tree_util.tree_leaves(jout)))
        print(f"{name:24s} {tc * 1e3:9.1f}ms {jc * 1e3:9.1f}ms {jc / tc:7.2f} "
              f"{tw * 1e3:9.2f}ms {jw * 1e3:9.2f}ms {jw / tw:7.2f}  max|tidu-jax|={diff:.1e}")
    if "--split" in sys.argv:
        split_first_call()


if __name__ == "__main__":
    main()
