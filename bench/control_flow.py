"""Loops without unrolling (issue 12): the gradient of a Lorenz RK4 integration with respect to
the initial state and the parameters, written with td.scan, at 1e3 / 1e4 / 1e5 steps:

  (a) cold: trace + transform + compile + first evaluation of td.jit(td.grad(...)) on a function
      never seen before in the process (and the same for jax.jit), which must not grow with the
      step count;
  (b) warm: per-call median (and the slowest call over the median) against jax.jit of the same
      lax.scan, in the same run;
  (c) the unrolled Python loop where it still fits (1e3 steps; 200 with --quick);

and a 100-layer tanh MLP VJP with and without td.checkpoint: saved bytes and time.

    python bench/control_flow.py [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np

import tidu as td
from _timing import calls, timeit, timed


def lorenz_loss(ns, scan, steps, dt=0.001, fori=False):
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
        elif fori:  # fori_loop(lower, upper, body, init) of the same module
            s = scan(0, steps, lambda i, s: step(s, p), s0)
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
    print("Lorenz RK4 gradient wrt (s0, params), float64: tidu td.scan vs jax.jit(lax.scan).")
    print("cold = trace+transform+compile+first call of a new function; warm = median call;")
    print("worst = slowest of the warm calls / median.")
    print(f"{'loop':>6} {'steps':>7} {'td cold s':>10} {'td warm ms':>11} {'worst':>6} "
          f"{'jax cold s':>11} {'jax warm ms':>12} {'worst':>6} {'td/jax warm':>12}")
    for kind in ("scan", "fori"):
        for steps in steps_list:
            fori = kind == "fori"
            loop = td.fori_loop if fori else td.scan
            g = td.jit(td.grad(lorenz_loss(td, loop, steps, fori=fori), argnums=(0, 1)),
                       backend="cpu")
            _, cold, _ = timed(lambda: g(s0, p), 1)
            n = 200 if steps <= 1000 else 30 if steps <= 10000 else 5
            call, worst = calls(lambda: g(s0, p), n)
            row = f"{kind:>6} {steps:>7} {cold:>10.3f} {call * 1e3:>11.3f} {worst:>6.1f}"
            if jax is not None:
                jl = lax.fori_loop if fori else lax.scan
                jg = jax.jit(jax.grad(lorenz_loss(jnp, jl, steps, fori=fori), argnums=(0, 1)))
                _, jcold, _ = timed(lambda: jax.block_until_ready(jg(s0, p)), 1)
                jcall, jworst = calls(lambda: jax.block_until_ready(jg(s0, p)), n)
                row += (f" {jcold:>11.3f} {jcall * 1e3:>12.3f} {jworst:>6.1f}"
                        f" {call / jcall:>12.2f}")
            print(row)
    steps = 1000 if not quick else 200
    g = td.jit(td.grad(lorenz_loss(td, None, steps), argnums=(0, 1)), backend="cpu")
    _, cold, call = timed(lambda: g(s0, p), 5)
    print(f"unrolled Python loop, {steps} steps: cold {cold:.3f} s, warm {call * 1e3:.3f} ms")


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
        call = timeit(lambda: prog(feed), repeat=3, warmup=False)
        print(f"  checkpoint={ckpt!s:5}: saved_values {saved / 1e6:.2f} MB, "
              f"memory_report saved_bytes {prog.memory_report().get('saved_bytes', 0) / 1e6:.2f} MB,"
              f" call {call * 1e3:.1f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    bench_lorenz(a.quick)
    bench_mlp(a.quick)
