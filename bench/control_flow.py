"""Loops without unrolling (issue 12): the gradient of a Lorenz RK4 integration with respect to
the initial state and the parameters, written with td.scan, at 1e3 / 1e4 / 1e5 steps:

  (a) trace + transform + compile time (first td.jit(td.grad(...)) call minus its evaluation),
      which must not grow with the step count;
  (b) per-call time against jax.jit of the same lax.scan;
  (c) the unrolled Python loop where it still fits (1e3 steps);

and a 100-layer tanh MLP VJP with and without td.checkpoint: saved bytes and time.

    python bench/control_flow.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tidu as td


def median_time(fn, repeat=5):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def lorenz_loss(ns, scan, steps, dt=0.001):
    def f(s, p):
        x, y, z = s[0], s[1], s[2]
        return ns.concatenate([ns.reshape(p[0] * (y - x), (1,)),
                               ns.reshape(x * (p[1] - z) - y, (1,)),
                               ns.reshape(x * y - p[2] * z, (1,))])

    def step(s, p):
        k1 = f(s, p)
        k2 = f(s + 0.5 * dt * k1, p)
        k3 = f(s + 0.5 * dt * k2, p)
        k4 = f(s + dt * k3, p)
        return s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

    def loss(s0, p):
        if scan is None:  # unrolled Python loop
            s = s0
            for _ in range(steps):
                s = step(s, p)
        else:
            s, _ = scan(lambda s, _: (step(s, p), None), s0, None, length=steps)
        return ns.sum(s * s)
    return loss


def bench_lorenz(quick: bool):
    s0, p = np.array([1.0, 0.5, -0.3]), np.array([10.0, 28.0, 8.0 / 3.0])
    steps_list = (1000, 10000) if quick else (1000, 10000, 100000)
    try:
        import jax
        import jax.numpy as jnp
        from jax import lax

        jax.config.update("jax_enable_x64", True)
    except ImportError:
        jax = None
    print("Lorenz RK4 gradient wrt (s0, params): tidu td.scan vs jax.jit(lax.scan)")
    print(f"{'steps':>8} {'td build+compile s':>18} {'td call ms':>11} {'jax compile s':>14} "
          f"{'jax call ms':>12} {'td/jax':>7}")
    for steps in steps_list:
        td.program_cache.clear()
        g = td.jit(td.grad(lorenz_loss(td, td.scan, steps), argnums=(0, 1)), backend="cpu")
        t0 = time.perf_counter()
        g(s0, p)
        first = time.perf_counter() - t0
        call = median_time(lambda: g(s0, p), 3 if quick else 5)
        build = max(first - call, 0.0)
        row = f"{steps:>8} {build:>18.3f} {call * 1e3:>11.2f}"
        if jax is not None:
            jg = jax.jit(jax.grad(lorenz_loss(jnp, lax.scan, steps), argnums=(0, 1)))
            t0 = time.perf_counter()
            jax.block_until_ready(jg(s0, p))
            jfirst = time.perf_counter() - t0
            jcall = median_time(lambda: jax.block_until_ready(jg(s0, p)), 3 if quick else 5)
            row += f" {max(jfirst - jcall, 0):>14.3f} {jcall * 1e3:>12.2f} {call / jcall:>7.2f}"
        print(row)
    steps = 1000 if not quick else 200
    g = td.jit(td.grad(lorenz_loss(td, None, steps), argnums=(0, 1)), backend="cpu")
    t0 = time.perf_counter()
    g(s0, p)
    first = time.perf_counter() - t0
    call = median_time(lambda: g(s0, p), 3)
    print(f"unrolled Python loop, {steps} steps: build+compile {first - call:.3f} s, "
          f"call {call * 1e3:.2f} ms")


def bench_mlp(quick: bool):
    layers, width = (30, 64) if quick else (100, 128)
    rng = np.random.default_rng(0)
    ws = rng.standard_normal((layers, width, width)) / np.sqrt(width)
    x = rng.standard_normal((16, width))

    def layer(h, w):
        return td.tanh(h @ w)

    def make(ckpt):
        f = td.checkpoint(layer) if ckpt else layer

        def loss(ws, x):
            h = x
            for i in range(layers):
                h = f(h, ws[i])
            return td.sum(h * h)
        return loss

    print(f"{layers}-layer tanh MLP (width {width}, batch 16) VJP:")
    for ckpt in (False, True):
        F = td.build(make(ckpt), ws=td.spec(ws.shape), x=td.spec(x.shape))
        (y,) = F.outputs
        T = td.transpose(td.differentiate(td.resolve([F]), [y], ["ws"]))
        (ct,) = [k for _, k in T.tangent_inputs]
        prog = td.compile(td.materialize_merge(td.resolve([F, T]), [y] + T.tangent_outputs),
                          backend="cpu")
        feed = {"ws": ws, "x": x, ct: 1.0}
        saved = sum(v.nbytes for v in td.saved_values(T))
        call = median_time(lambda: prog(feed), 3)
        print(f"  checkpoint={ckpt!s:5}: saved_values {saved / 1e6:.2f} MB, "
              f"memory_report saved_bytes {prog.memory_report().get('saved_bytes', 0) / 1e6:.2f} MB,"
              f" call {call * 1e3:.1f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    bench_lorenz(a.quick)
    bench_mlp(a.quick)
