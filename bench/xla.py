"""The XLA backend against jax.jit and the interpreter, in one run.

    python bench/xla.py [--quick] [--sizes 512 2048]

(1) the gradient of sum(tanh(X @ W1) @ W2) with respect to W1 and W2 (square n x n float32 and
    float64 matrices): tidu through XLA vs jax.jit(jax.grad) of the same function (target:
    within 1.1x), the interpreter, and what the auto backend picks;
(2) the crossover behind the auto rule: interpreter vs XLA time per call against the program's
    work (tidu.xla.program_work) for elementwise chains and matrix products of growing size;
(3) compile time (lowering + XLA) of 1e3- and 1e4-instruction elementwise graphs, which XLA
    compiles in segments of tidu.xla.MAX_FUSED_INSTRUCTIONS.

Prints medians and ratios.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import tidu as td
from tidu import xla

sys.path.insert(0, str(Path(__file__).parent))
import eval as eval_bench  # noqa: E402


timeit = functools.partial(eval_bench.timeit, warmup=True)  # every call passes repeat


def loss(ns):
    return lambda w1, w2, x: ns.sum(ns.tanh(x @ w1) @ w2)


def grad_bench(sizes, repeat):
    import jax
    import jax.numpy as jnp

    print("(1) gradient of sum(tanh(X @ W1) @ W2) wrt (W1, W2), n x n matrices")
    print(f"{'n':>6} {'dtype':>8} {'jax.jit':>10} {'tidu xla':>10} {'tidu cpu':>10} "
          f"{'xla/jax':>8} {'cpu/jax':>8}  auto")
    for n in sizes:
        for dt in ("float32", "float64"):
            r = np.random.default_rng(0)
            w1, w2, x = ((r.standard_normal((n, n)) / np.sqrt(n)).astype(dt) for _ in range(3))
            with jax.enable_x64(dt == "float64"):
                jg = jax.jit(jax.grad(loss(jnp), argnums=(0, 1)))
                t_jax = timeit(lambda: jax.block_until_ready(jg(w1, w2, x)), repeat)
                want = jg(w1, w2, x)
            g_xla = td.jit(td.grad(loss(td), argnums=(0, 1)), backend="xla")
            g_cpu = td.jit(td.grad(loss(td), argnums=(0, 1)), backend="cpu")
            g_auto = td.jit(td.grad(loss(td), argnums=(0, 1)))
            got = g_xla(w1, w2, x)
            tol = 1e-3 if dt == "float32" else 1e-9
            for a, b in zip(got, want):
                np.testing.assert_allclose(a, np.asarray(b), rtol=tol, atol=tol)
            t_xla = timeit(lambda: g_xla(w1, w2, x), repeat)
            t_cpu = timeit(lambda: g_cpu(w1, w2, x), max(1, repeat // 2))
            g_auto(w1, w2, x)
            ((prog, *_),) = g_auto.cache.values()
            print(f"{n:>6} {dt:>8} {t_jax * 1e3:>8.2f}ms {t_xla * 1e3:>8.2f}ms "
                  f"{t_cpu * 1e3:>8.2f}ms {t_xla / t_jax:>8.2f} {t_cpu / t_jax:>8.2f}  "
                  f"{prog.backend}")


def small_calls(calls):
    """Per-call cost around a tiny executable: tidu's XLA backend vs jax.jit, both given numpy
    and both read back as numpy (the medians of `calls` calls, wall time), and with jax Arrays
    in and out (outputs left on the device)."""
    import jax
    import jax.numpy as jnp

    def median_us(f):
        for _ in range(50):
            f()
        ts = []
        for _ in range(calls):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts) * 1e6

    x, w = np.ones((4, 3)), np.ones((3, 2))
    with jax.enable_x64(True):
        jg = jax.jit(jax.grad(lambda x, w: jnp.sum(jnp.tanh(x @ w)), argnums=1))
        xj, wj = jnp.asarray(x), jnp.asarray(w)
        t_jax = median_us(lambda: np.asarray(jg(x, w)))
        t_jax_dev = median_us(lambda: jg(xj, wj).block_until_ready())
    tg = td.jit(td.grad(lambda x, w: td.sum(td.tanh(x @ w)), argnums=1), backend="xla")
    t_td = median_us(lambda: tg(x, w))
    with jax.enable_x64(True):
        t_td_dev = median_us(lambda: tg(xj, wj).block_until_ready())
    print("(0) per call around a tiny executable: grad of sum(tanh(x @ w)), x 4x3, w 3x2, float64")
    print(f"    numpy in and out: tidu xla {t_td:.1f} us, jax.jit {t_jax:.1f} us "
          f"({t_td / t_jax:.2f}x); jax Arrays in and out: tidu {t_td_dev:.1f} us, "
          f"jax.jit {t_jax_dev:.1f} us ({t_td_dev / t_jax_dev:.2f}x)\n")


def crossover(quick):
    print("\n(2) interpreter vs XLA per call, by work (flops of products + elements written)")
    print(f"{'program':>26} {'work':>10} {'cpu':>10} {'xla':>10} {'cpu/xla':>8}  auto")

    def chain(x):
        for i in range(20):
            x = td.sin(x) * 0.9 if i % 2 else td.tanh(x) + 0.1
        return x

    cases = [(f"20-op chain, {n:.0e} pts", chain, [np.linspace(0, 1, n)])
             for n in ([1_000, 30_000, 300_000] if quick else
                       [1_000, 10_000, 100_000, 300_000, 1_000_000, 3_000_000])]
    mm = lambda a, b: td.tanh(a @ b)  # noqa: E731
    cases += [(f"tanh(A @ B), {n}x{n}", mm, [np.random.default_rng(n).standard_normal((n, n))] * 2)
              for n in ([32, 128, 384] if quick else [32, 64, 128, 256, 384, 512, 1024])]
    for name, fn, args in cases:
        specs = {f"a{i}": td.spec(a.shape, a.dtype) for i, a in enumerate(args)}
        F = td.build(lambda **kw: fn(*[kw[f"a{i}"] for i in range(len(args))]), **specs)
        g = td.materialize_merge(td.resolve([F]), F.outputs)
        p_cpu, p_xla = td.compile(g, backend="cpu"), td.compile(g, backend="xla")
        ordered = [args[int(k[1:])] for k in p_cpu.inputs]
        number = 20 if args[0].size <= 100_000 else 1
        t_cpu = timeit(lambda: p_cpu.eval(ordered), 5, number)
        t_xla = timeit(lambda: p_xla.eval(ordered), 5, number)
        work = xla.program_work(p_cpu.executable)
        print(f"{name:>26} {work:>10.2e} {t_cpu * 1e3:>8.3f}ms {t_xla * 1e3:>8.3f}ms "
              f"{t_cpu / t_xla:>8.2f}  {td.compile(g).backend}")


def compile_times(quick):
    print("\n(3) compile time of long elementwise graphs (lowering + XLA, segments of "
          f"{xla.MAX_FUSED_INSTRUCTIONS})")
    for n in ([1000] if quick else [1000, 10_000]):
        def chain(x, y):
            v = x
            for i in range(n // 3):
                v = td.sin(v) * y + x if i % 2 else td.exp(td.tanh(v))
            return v

        F = td.build(chain, x=td.spec((1000,)), y=td.spec((1000,)))
        prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="xla")
        x = np.linspace(0, 1, 1000)
        t0 = time.perf_counter()
        prog.eval([x, x])
        t_first = time.perf_counter() - t0
        t_call = timeit(lambda: prog.eval([x, x]), 5)
        runner = prog.executable.xla()
        print(f"  {prog.n_instructions:>6} instructions, {len(runner.segments)} segment(s): "
              f"compile {t_first:.2f} s ({t_first / prog.n_instructions * 1e3:.2f} ms/instr), "
              f"then {t_call * 1e3:.2f} ms/call; auto picks "
              f"{td.compile(td.materialize_merge(td.resolve([F]), F.outputs)).backend}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", type=int, nargs="*", default=None)
    a = ap.parse_args()
    sizes = a.sizes or ([256] if a.quick else [512, 2048])
    small_calls(1000 if a.quick else 5000)
    grad_bench(sizes, 3 if a.quick else 5)
    crossover(a.quick)
    compile_times(a.quick)


if __name__ == "__main__":
    main()
