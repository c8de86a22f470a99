"""XLA compile time and memory against program size: gradients of 1e3 to 1e5 instructions.

    python bench/xla_compile.py [--quick] [--sizes 1000 10000 100000] [--jax-max 1000]

Two programs, each the gradient (tidu.grad) of a scalar function of two scalars:
- chain: a long dependent chain, v = sin(v) * a + v / tanh(v) + 0.1 alternating, whose backward
  half reads every saved forward value;
- wide: 16 lanes updated together, each layer reading its neighbour lane (a wide DAG; the
  halving keeps it well conditioned: without it the 10,000-instruction gradient is ~5e7 and
  jax.jit's own result differs from the interpreter's by 5e-6 relative).

Each size runs in its own process (so the peak RSS is that program's): compile time of the first
XLA call (lowering, segments, XLA; wall and process CPU time, the latter steadier on a shared
machine) and CPU time per instruction, peak RSS, then per-call medians of the XLA
program and of the interpreter, and what backend="auto" picks.  jax.jit(jax.grad(f)) of the same
function is timed in the same process up to --jax-max instructions (its compile time is super-linear
in the program's length). Target: compile time per instruction within 2x from 1e3 to 1e5
instructions, peak memory linear, no crash.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import timeit  # noqa: E402


def chain(ns, steps):
    def f(x, a):
        v = x
        for i in range(steps):
            v = ns.sin(v) * a + v if i % 2 else ns.tanh(v) + 0.1
        return v
    return f


def wide(ns, steps):
    def f(x, a):
        vs = [x * (1.0 + 0.01 * k) for k in range(16)]
        for _ in range(steps):
            vs = [ns.sin(vs[k]) * a * 0.5 + vs[(k + 1) % 16] * 0.5 for k in range(16)]
        out = vs[0]
        for v in vs[1:]:
            out = out + v
        return out
    return f


# steps per target instruction count (the gradient's instructions, measured: about 2 per op)
PER_STEP = {"chain": 6.0, "wide": 160.0}


def child(kind: str, target: int, jax_max: int) -> dict:
    import resource  # noqa: PLC0415 - posix only, the child's own peak

    import numpy as np  # noqa: PLC0415

    import tidu as td  # noqa: PLC0415

    steps = max(1, round(target / PER_STEP[kind]))
    make = chain if kind == "chain" else wide
    x, a = np.float64(0.3), np.float64(0.7)
    g_cpu = td.jit(td.grad(make(td, steps)), backend="cpu")
    t0 = time.perf_counter()
    want = g_cpu(x, a)
    t_build = time.perf_counter() - t0
    ((prog, *_),) = g_cpu.cache.values()
    exe = prog.executable
    c0, t0 = time.process_time(), time.perf_counter()
    got = exe.xla().run([x, a])[0]  # lowering, segments, XLA compile, first run
    t_compile, c_compile = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    n = prog.n_instructions
    g_xla = td.jit(td.grad(make(td, steps)), backend="xla")  # the same Executable: compiled
    t_xla = timeit(lambda: g_xla(x, a), 5)
    t_cpu = timeit(lambda: g_cpu(x, a), 5, 10)
    g_auto = td.jit(td.grad(make(td, steps)))
    g_auto(x, a)
    ((p_auto, *_),) = g_auto.cache.values()
    row = dict(kind=kind, n=n, segments=len(exe.xla().segments), build=t_build,
               compile=t_compile, compile_cpu=c_compile, rss=rss, xla=t_xla, cpu=t_cpu, auto=p_auto.backend, jax=None)
    if n <= jax_max:
        import jax  # noqa: PLC0415
        import jax.numpy as jnp  # noqa: PLC0415

        with jax.enable_x64(True):
            jg = jax.jit(jax.grad(make(jnp, steps)))
            t0 = time.perf_counter()
            jax.block_until_ready(jg(x, a))
            row["jax"] = time.perf_counter() - t0
            row["jax_call"] = timeit(lambda: jax.block_until_ready(jg(x, a)), 5)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", type=int, nargs="*", default=None)
    ap.add_argument("--kinds", nargs="*", default=["chain", "wide"])
    ap.add_argument("--jax-max", type=int, default=3000)
    ap.add_argument("--child", nargs=2, metavar=("KIND", "N"))
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child[0], int(a.child[1]), a.jax_max)))
        return
    sizes = a.sizes or ([1000, 10_000] if a.quick else [1000, 10_000, 100_000])
    print("gradient of a scalar function on XLA: compile (lowering + XLA, first call), peak RSS, "
          "per call (medians); jax.jit compile of the same gradient where run")
    print(f"{'program':>7} {'instr':>7} {'segs':>5} {'compile':>9} {'cpu':>9} {'ms/instr':>9} "
          f"{'RSS':>8} "
          f"{'xla call':>9} {'interp':>9} {'xla/int':>8} {'auto':>5} {'jax.jit compile':>16}")
    for kind in a.kinds:
        for target in sizes:
            cmd = [sys.executable, __file__, "--child", kind, str(target), "--jax-max",
                   str(a.jax_max)]
            r = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if r.returncode:
                print(f"{kind:>7} {target:>7}  failed (rc {r.returncode}): {r.stderr[-500:]}")
                continue
            row = json.loads(r.stdout.strip().splitlines()[-1])
            jx = "-" if row["jax"] is None else f"{row['jax']:.2f} s"
            print(f"{kind:>7} {row['n']:>7} {row['segments']:>5} {row['compile']:>7.2f} s "
                  f"{row['compile_cpu']:>7.2f} s {row['compile_cpu'] / row['n'] * 1e3:>9.2f} "
                  f"{row['rss']:>6.0f}MB "
                  f"{row['xla'] * 1e3:>7.2f}ms {row['cpu'] * 1e6:>7.1f}us "
                  f"{row['xla'] / row['cpu']:>8.0f} {row['auto']:>5} {jx:>16}", flush=True)


if __name__ == "__main__":
    main()
