"""The whole gradient pipeline per primal op: trace, differentiate, transpose, materialize_merge,
compile — for random scalar DAGs of sin/exp/log/mul/add blocks — and an HVP, against
``jax.make_jaxpr(jax.grad(f))`` and CasADi's ``gradient`` (when installed).

    python bench/transforms.py [--sizes 10000 100000] [--repeat 3]

Target (issue 4): <= 3 us per primal op end to end.  Prints medians and ratios.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import tidu as td


def blocks(n_ops, seed=0):
    """A recipe of ~n_ops primal ops: each block applies sin/exp/log to a live value and combines
    it with another by mul or add (log of 1 + v*v keeps the domain valid, exp of sin bounded)."""
    rng = random.Random(seed)
    recipe = []
    for _ in range(n_ops // 4):
        recipe.append((rng.choice("sel"), rng.random(), rng.choice("ma")))
    return recipe


def make(recipe, ns):
    def f(x, y):
        vals = [x, y]
        for fn, pick, comb in recipe:
            u = vals[-1]
            v = vals[int(pick * len(vals))]
            if fn == "s":
                w = ns.sin(u)
            elif fn == "e":
                w = ns.exp(ns.sin(u))
            else:
                w = ns.log(1.0 + u * u)
            vals.append(w * v if comb == "m" else w + v)
        return vals[-1]
    return f


def tidu_gradient_pipeline(f):
    t0 = time.perf_counter()
    F0 = td.build(f, x=td.spec(()), y=td.spec(()))
    t1 = time.perf_counter()
    L1 = td.differentiate(td.resolve([F0]), F0.outputs, ["x", "y"])
    t2 = time.perf_counter()
    T1 = td.transpose(L1)
    t3 = time.perf_counter()
    g = td.materialize_merge(td.resolve([F0, T1]), F0.outputs + [k for k in T1.tangent_outputs if k])
    t4 = time.perf_counter()
    prog = td.compile(g)
    t5 = time.perf_counter()
    return F0.n_ops, [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4], (F0, T1, prog)


def tidu_hvp_pipeline(F0, T1):
    t0 = time.perf_counter()
    grads = [k for k in T1.tangent_outputs if k]
    L2 = td.differentiate(td.resolve([F0, T1]), grads, ["x"])
    td.compile(td.materialize_merge(td.resolve([F0, T1, L2]),
                                    [k for k in L2.tangent_outputs if k]))
    return time.perf_counter() - t0


def jax_make_jaxpr(recipe):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    f = make(recipe, jnp)
    t0 = time.perf_counter()
    jax.make_jaxpr(jax.grad(f, argnums=(0, 1)))(0.3, 0.4)
    return time.perf_counter() - t0


def casadi_gradient(recipe):
    try:
        import casadi as ca
    except ImportError:
        return None
    x, y = ca.SX.sym("x"), ca.SX.sym("y")

    class NS:
        sin, exp, log = ca.sin, ca.exp, ca.log

    t0 = time.perf_counter()
    out = make(recipe, NS)(x, y)
    t1 = time.perf_counter()
    ca.Function("g", [x, y], [ca.gradient(out, ca.vertcat(x, y))])
    return t1 - t0, time.perf_counter() - t1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--jax-max", type=int, default=10_000, help="largest size timed with jax")
    a = p.parse_args()
    med = statistics.median
    for n in a.sizes:
        recipe = blocks(n)
        steps, totals, hvps, ops = [], [], [], 0
        for r in range(a.repeat):
            f = make(recipe + [("s", 0.0, "a")] * r, td)  # a fresh structure per repeat
            ops, parts, (F0, T1, prog) = tidu_gradient_pipeline(f)
            steps.append(parts)
            totals.append(sum(parts) / ops * 1e6)
            hvps.append(tidu_hvp_pipeline(F0, T1) / ops * 1e6)
        names = ["trace", "differentiate", "transpose", "materialize", "compile"]
        per = {k: med([s[i] for s in steps]) / ops * 1e6 for i, k in enumerate(names)}
        tot = med(totals)
        print(f"n={ops:>7,d} primal ops  gradient pipeline {tot:6.2f} us/op (target 3: "
              f"{tot / 3:4.2f}x)  [" + "  ".join(f"{k} {v:.2f}" for k, v in per.items()) + "]"
              f"  HVP (differentiate again + compile) {med(hvps):6.2f} us/op")
        if n <= a.jax_max:
            j = jax_make_jaxpr(recipe)
            if j is not None:
                j_us = j / ops * 1e6
                print(f"          jax.make_jaxpr(jax.grad(f)) {j_us:8.2f} us/op   "
                      f"(tidu / jax {tot / j_us:6.3f}x)")
        c = casadi_gradient(recipe)
        if c is not None:
            b, g = (v / ops * 1e6 for v in c)
            print(f"          casadi: build SX {b:6.2f} us/op + gradient {g:6.2f} us/op  "
                  f"(tidu / casadi total {tot / (b + g):6.3f}x, vs gradient alone "
                  f"{tot / g:6.3f}x)")


if __name__ == "__main__":
    main()
