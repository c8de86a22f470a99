"""The whole gradient pipeline per primal op: trace, differentiate, transpose, materialize_merge,
compile — for random scalar DAGs of sin/exp/log/mul/add blocks — and an HVP, against
``jax.make_jaxpr(jax.grad(f))`` and CasADi's ``gradient`` (when installed).

    python bench/transforms.py [--sizes 10000 100000] [--repeat 3]
    python bench/transforms.py --cold [--repeat 3]   # first td.jit(td.grad) calls, end to end

Target (issue 4): <= 3 us per primal op end to end.  Prints medians and ratios.

--cold (issue 19): array workloads (an unrolled RK4 on 3-vectors, a 50-layer MLP of width 16) and
scalar DAGs of about their sizes, each a program never seen before in the process, timed from
the trace through the first evaluation, beside jax.jit(jax.grad) (trace, XLA compile, first run;
up to 1,000 primal ops) and jax.make_jaxpr(jax.grad) (tracing alone; up to 10,000) in the same
run; then each array workload's cost per op over its scalar DAG's.
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


def make(recipe, ns, scale=None):
    """f(x, y) following the recipe; a scale (x * scale first: one op) makes a structure of the
    same size that shares no op with another scale's."""
    def f(x, y):
        vals = [x if scale is None else x * scale, y]
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


# ---- cold, end to end: the first td.jit(td.grad(f)) call of programs never seen before ----

def rk4(ns, steps, h):
    """An unrolled Lorenz RK4 integration on a 3-vector (indexing, arithmetic, concatenate)."""
    def lorenz(s, p):
        x, y, z = s[0], s[1], s[2]
        return ns.concatenate([ns.reshape(p[0] * (y - x), (1,)),
                               ns.reshape(x * (p[1] - z) - y, (1,)),
                               ns.reshape(x * y - p[2] * z, (1,))])

    def f(s, p):
        for _ in range(steps):
            k1 = lorenz(s, p)
            k2 = lorenz(s + h / 2 * k1, p)
            k3 = lorenz(s + h / 2 * k2, p)
            k4 = lorenz(s + h * k3, p)
            s = s + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return ns.sum(s * s)
    return f


def mlp(ns, layers, scale):
    """A deep tanh MLP of width 16 on 64 examples (DotGeneral, tanh, broadcasting adds)."""
    def f(ws, x):
        h = x
        for w in ws:
            h = ns.tanh(h @ (w * scale) + 0.1)
        return ns.sum(h * h)
    return f


def workloads(rng):
    """(name, maker(ns, salt) -> function, args, argnums, paired scalar DAG): salt makes a new
    structure per call; each array workload names the scalar DAG of about its size."""
    import numpy as np

    s0, p0 = np.array([1.0, 1.0, 1.0]), np.array([10.0, 28.0, 8 / 3])
    ws = [rng.standard_normal((16, 16)) * 0.3 for _ in range(50)]
    x = rng.standard_normal((64, 16))

    def dag(n):  # salted like the others: the same size at every salt
        recipe = blocks(n)
        return lambda ns, k: make(recipe, ns, 1.0 + k * 1e-9)

    return [
        ("mlp 50x16", lambda ns, k: mlp(ns, 50, 1.0 + k * 1e-9), (ws, x), (0,), "scalar dag 200"),
        ("scalar dag 200", dag(275), (0.3, 0.7), (0, 1), None),
        ("rk4 10 steps", lambda ns, k: rk4(ns, 10, 0.01 + k * 1e-9), (s0, p0), (0, 1),
         "scalar dag 1k"),
        ("scalar dag 1k", dag(1_000), (0.3, 0.7), (0, 1), None),
        ("rk4 100 steps", lambda ns, k: rk4(ns, 100, 0.01 + k * 1e-9), (s0, p0), (0, 1),
         "scalar dag 10k"),
        ("scalar dag 10k", dag(10_000), (0.3, 0.7), (0, 1), None),
        ("rk4 1000 steps", lambda ns, k: rk4(ns, 1000, 0.001 + k * 1e-9), (s0, p0), (0, 1),
         "scalar dag 100k"),
        ("scalar dag 100k", dag(100_000), (0.3, 0.7), (0, 1), None),
    ]


def cold_end_to_end(repeat, jax_max, jaxpr_max=10_000):
    """Per primal op: tidu's first td.jit(td.grad(f)) call (trace, transforms, compile, encode,
    first evaluation) and jax's first jax.jit(jax.grad(f)) call (trace, lower, XLA compile, first
    run, for programs of at most jax_max primal ops) and jax.make_jaxpr(jax.grad(f)) (tracing
    alone, at most jaxpr_max primal ops), each on a structure never seen before in the process;
    medians of `repeat`.  Then each array workload against the scalar DAG of its size."""
    import numpy as np

    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
    except ImportError:
        jax = None
    med = statistics.median
    print("cold, end to end (a new program per repeat, trace through the first evaluation):")
    loads = workloads(np.random.default_rng(0))
    rows = {}
    for name, maker, args, argnums, pair in loads:  # tidu first, all of it: XLA's compile
        n_ops = _primal_ops(maker(td, 0), args)     # threads keep a core busy for a while
        # The process, not the program, is warmed: three calls of other structures of this
        # workload (imports, the BLAS, rule templates), as in a process that has run others.
        for w in range(3):
            td.jit(td.grad(maker(td, 10 ** 6 + w), argnums=argnums))(*args)
        t_tidu = []
        for k in range(1, repeat + 1):
            g = td.jit(td.grad(maker(td, k), argnums=argnums))
            t0 = time.perf_counter()
            g(*args)
            t_tidu.append(time.perf_counter() - t0)
        per = [statistics.median(c) / n_ops * 1e6 for c in
               zip(*[stages(maker(td, repeat + 1 + k), args, argnums) for k in range(repeat)])]
        rows[name] = (n_ops, med(t_tidu), per)
    per_op = {name: t / n for name, (n, t, _) in rows.items()}
    for name, maker, args, argnums, pair in loads:
        n_ops, t, per = rows[name]
        t_jax, t_jaxpr = [], []
        for k in range(1, repeat + 1):
            if jax is not None and n_ops <= jax_max:
                gj = jax.jit(jax.grad(maker(jnp, k), argnums=argnums))
                t0 = time.perf_counter()
                jax.block_until_ready(gj(*args))
                t_jax.append(time.perf_counter() - t0)
            if jax is not None and n_ops <= jaxpr_max:
                fj = maker(jnp, k)
                t0 = time.perf_counter()
                jax.make_jaxpr(jax.grad(fj, argnums=argnums))(*args)
                t_jaxpr.append(time.perf_counter() - t0)
        line = f"  {name:15s} {n_ops:>7,d} primal ops  tidu {t / n_ops * 1e6:7.2f} us/op ({t * 1e3:8.1f} ms)"
        if t_jax:
            line += (f"   jax.jit(jax.grad) {med(t_jax) / n_ops * 1e6:8.2f} us/op"
                     f" ({med(t_jax) / t:6.1f}x tidu)")
        if t_jaxpr:
            line += (f"   make_jaxpr(grad) alone {med(t_jaxpr) / n_ops * 1e6:7.2f} us/op"
                     f" ({med(t_jaxpr) / t:5.1f}x tidu)")
        print(line, flush=True)
        print("      by step (us/op):  " + "  ".join(f"{k} {v:.2f}" for k, v in zip(STAGES, per)),
              flush=True)
    print("array workloads against the scalar DAG of about their size (per primal op, "
          "target <= 2x):")
    for name, _, _, _, pair in loads:
        if pair is not None:
            a, b = per_op[name] * 1e6, per_op[pair] * 1e6
            print(f"  {name:15s} {a:7.2f} us/op  vs  {pair:15s} {b:7.2f} us/op:  {a / b:4.2f}x")


def stages(f, args, argnums):
    """Seconds per step of the gradient pipeline, step by step, for f at args (lists of arrays
    allowed): trace, differentiate, transpose, materialize, compile, first evaluation (the
    encoding for the interpreter and the run)."""
    import numpy as np

    leaves, owner = [], []
    for i, a in enumerate(args):
        for x in (a if isinstance(a, list) else [a]):
            leaves.append(np.asarray(x))
            owner.append(i)

    def flat(*xs):
        it = iter(xs)
        return f(*[[next(it) for _ in a] if isinstance(a, list) else next(it) for a in args])

    wrt = [k for k, i in enumerate(owner) if i in argnums]
    t = [time.perf_counter()]
    F0 = td.build(flat, inputs={k: td.spec(x.shape, x.dtype) for k, x in enumerate(leaves)})
    t.append(time.perf_counter())
    L1 = td.differentiate(td.resolve([F0]), F0.outputs, wrt)
    t.append(time.perf_counter())
    T1 = td.transpose(L1)
    t.append(time.perf_counter())
    g = td.materialize_merge(td.resolve([F0, T1]),
                             F0.outputs + [k for k in T1.tangent_outputs if k])
    t.append(time.perf_counter())
    prog = td.compile(g, backend="cpu")
    t.append(time.perf_counter())
    feed = {k: x for k, x in enumerate(leaves)}
    feed.update({key: np.ones(()) for _, key in T1.tangent_inputs})
    prog(feed)
    t.append(time.perf_counter())
    return [b - a for a, b in zip(t, t[1:])]


STAGES = ["trace", "differentiate", "transpose", "materialize", "compile", "first eval"]


def _primal_ops(f, args):
    """Primal ops of f traced at args (its program's non-constant instructions): the unit of the
    per-op figures."""
    from tidu.api.jit import trace_program

    prog, _ = trace_program(f, args, backend="cpu")
    return sum(1 for op, _, _ in prog.executable.instructions if op.name != "Constant") or 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--jax-max", type=int, default=10_000,
                   help="largest size timed with jax (--cold: at most 1,000 primal ops)")
    p.add_argument("--cold", action="store_true",
                   help="only the cold end-to-end first calls of the array and scalar workloads")
    a = p.parse_args()
    if a.cold:  # XLA's compile of unrolled code grows fast: 17 s at 850 ops, 165 s at 2,500
        cold_end_to_end(a.repeat, min(a.jax_max, 1_000))
        return
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
