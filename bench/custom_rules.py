"""Implicit differentiation of a Newton root (issue 31): the gradient of a loss of the root x(theta)
of ``x**3 + theta * x - 2 = 0`` (30 Newton steps, elementwise over theta), inside jit, with

  custom_root  td.lax.custom_root vs jax.lax.custom_root,
  custom_vjp   a td.custom_vjp whose bwd is the implicit derivative vs the same in jax,
  unrolled     (td only) differentiating through the 30 Newton steps (what tidu needed before);

cold (trace + transform + compile + first call of a function never called before) and warm
(per-call median, and the slowest call over the median), tidu over jax.jit in the same run.

    python bench/custom_rules.py [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np

import tidu as td
from _timing import calls, timed

STEPS = 30


def root_fns(ns, lax, jvp, custom_vjp):
    def newton(f, x0):
        def step(i, x):
            fx, dfx = jvp(f, (x,), (ns.ones_like(x),))
            return x - fx / dfx

        return lax.fori_loop(0, STEPS, step, x0)

    def by_root(theta):
        x = lax.custom_root(lambda x: x ** 3 + theta * x - 2.0, ns.ones_like(theta), newton,
                            lambda g, y: y / g(ns.ones_like(y)))
        return ns.sum(x * x)

    @custom_vjp
    def root(theta):
        return lax.fori_loop(0, STEPS, lambda i, x: x - (x ** 3 + theta * x - 2.0) /
                             (3 * x ** 2 + theta), ns.ones_like(theta))

    def fwd(theta):
        x = root(theta)
        return x, (x, theta)

    def bwd(res, g):
        x, theta = res
        return (-g * x / (3 * x ** 2 + theta),)

    root.defvjp(fwd, bwd)

    def by_vjp(theta):
        x = root(theta)
        return ns.sum(x * x)

    def unrolled(theta):
        x = lax.fori_loop(0, STEPS, lambda i, x: x - (x ** 3 + theta * x - 2.0) /
                          (3 * x ** 2 + theta), ns.ones_like(theta))
        return ns.sum(x * x)

    return {"custom_root": by_root, "custom_vjp": by_vjp, "unrolled": unrolled}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    opts = ap.parse_args()
    n_calls = 300 if opts.quick else 3000
    import jax
    import jax.numpy as jnp
    from jax import lax

    jax.config.update("jax_enable_x64", True)
    tdf = root_fns(td, td.lax, td.jvp, td.custom_vjp)
    jxf = root_fns(jnp, lax, jax.jvp, jax.custom_vjp)
    print(f"gradient of sum(x(theta)**2), x the root by {STEPS} Newton steps; times per call")
    print(f"{'case':28s} {'tidu cold':>10s} {'jax cold':>10s} {'tidu warm':>10s} "
          f"{'jax warm':>10s} {'tidu/jax':>9s} {'tidu max/med':>12s}")
    for n in (1, 64):
        theta = np.linspace(0.5, 3.0, n) if n > 1 else np.array(1.5)
        for name in ("custom_root", "custom_vjp", "unrolled"):
            g_td = td.jit(td.grad(tdf[name]))
            g_jx = jax.jit(jax.grad(jxf[name]))
            want, cold_j, _ = timed(lambda: g_jx(theta).block_until_ready(), 1)
            got, cold_t, _ = timed(lambda: g_td(theta), 1)
            np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10)
            # interleaved, so both see the same load on a shared machine
            tw, jw, spread = [], [], []
            for _ in range(5):
                med, worst = calls(lambda: g_td(theta), n_calls // 5)
                tw.append(med)
                spread.append(worst)
                jw.append(calls(lambda: g_jx(theta).block_until_ready(), n_calls // 5)[0])
            t_warm, j_warm = float(np.median(tw)), float(np.median(jw))
            label = f"{name} (theta[{n}])" if n > 1 else f"{name} (scalar)"
            print(f"{label:28s} {cold_t * 1e3:8.1f}ms {cold_j * 1e3:8.1f}ms "
                  f"{t_warm * 1e6:8.2f}us {j_warm * 1e6:8.2f}us {t_warm / j_warm:8.2f}x "
                  f"{float(np.median(spread)):11.1f}x")


if __name__ == "__main__":
    main()
