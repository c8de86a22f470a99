"""Medium tensor programs, each written once the jax way, in one process: tidu's interpreter
(``backend="cpu"``), tidu's default backend and jax.jit.

    python bench/tensor.py [--quick] [--calls N] [--only NAME ...] [--no-busy] [--xla]

Workloads (issue #30's table):

- nbody: 64 bodies, 200 leapfrog steps in ``fori_loop``, forces = -grad U (float64).
- transformer: a block (layer norm, 4-head causal attention by einsum, gelu MLP), B=8 T=64 d=64,
  loss and the gradient wrt every parameter (float32).
- skipgram: skip-gram with 5 negative samples, batch 512, vocabulary 5000, d=64: gathers by index
  arrays, a scatter-add gradient (float32).
- dpsgd: ``vmap(grad)`` over 256 examples of a 64-128-10 MLP, per-example clipping (float32).
- cnn: 64x1x28x28, two 3x3 convolutions (``lax.conv_general_dilated``), 2x2 max pooling by
  reshape + max, a dense layer, softmax cross-entropy, value and grad (float32).
- attention: one causal self-attention block, T=128 d=64, 4 heads, value and grad (float32).
- gp: Gaussian-process negative log likelihood and its gradient wrt three hyperparameters,
  n=500 (Cholesky, triangular solves; float64).
- trimmed: the mean of the middle 80% of 1e5 values via sort, value and grad (float64).
- mlp: an MLP 784-256-10 training step, batch 128 (float32).

For each: cold = the first call of a program never seen before in the process (tidu's caches
are cleared first; trace, differentiate, compile, first evaluation), warm = median and p99 of
later calls, quiet and then with a second process spinning on one core ("busy").  Ratios:
tidu / jax (lower is better) for warm figures, jax / tidu for cold ones (higher is better), and
busy p99 / quiet median per column (the thread pool's target is <= 3).  The figures depend on
the machine and on what else runs on it: docs/performance.md records a run and how it was made.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time
import types

import numpy as np

import tidu as td

from _timing import settle


# ---- the workloads, written once over a namespace (tidu's or jax's) ----


def nbody(ns):
    m = ns.np
    n, steps, dt, eps = 64, 200, 1e-3, 1e-2
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((n, 3)), rng.standard_normal((n, 3)) * 0.1, rng.uniform(0.5, 1.5, n))

    def run(x, v, mass):
        mm = mass[:, None] * mass[None, :]

        def energy(x):
            d = x[:, None, :] - x[None, :, :]
            return -0.5 * m.sum(mm / m.sqrt(m.sum(d * d, axis=-1) + eps))

        force = ns.grad(energy)

        def step(i, xv):
            x, v = xv
            v = v - 0.5 * dt * force(x) / mass[:, None]
            x = x + dt * v
            v = v - 0.5 * dt * force(x) / mass[:, None]
            return x, v
        return ns.fori_loop(0, steps, step, (x, v))
    return run, args


def transformer(ns):
    m = ns.np
    B, T, d, H = 8, 64, 64, 4
    f = np.float32
    rng = np.random.default_rng(1)
    params = [np.ones(d, f), np.zeros(d, f), rng.standard_normal((d, 3 * d)).astype(f) * f(0.1),
              rng.standard_normal((d, d)).astype(f) * f(0.1), np.ones(d, f), np.zeros(d, f),
              rng.standard_normal((d, 4 * d)).astype(f) * f(0.1),
              rng.standard_normal((4 * d, d)).astype(f) * f(0.05)]
    x = rng.standard_normal((B, T, d)).astype(f)
    mask = np.tril(np.ones((T, T), bool))

    def layer_norm(h, g, b):
        mu = m.mean(h, axis=-1, keepdims=True)
        var = m.mean((h - mu) ** 2, axis=-1, keepdims=True)
        return (h - mu) / m.sqrt(var + 1e-5) * g + b

    def gelu(h):
        return 0.5 * h * (1.0 + m.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))

    def loss(p, x):
        g1, b1, wqkv, wo, g2, b2, w1, w2 = p
        h = layer_norm(x, g1, b1)
        q, k, v = m.split((h @ wqkv).reshape(B, T, 3, H, d // H), 3, axis=2)
        q, k, v = q[:, :, 0], k[:, :, 0], v[:, :, 0]
        s = m.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // H).astype(f)
        s = m.where(mask, s, -1e9)
        s = s - m.max(s, axis=-1, keepdims=True)
        a = m.exp(s)
        a = a / m.sum(a, axis=-1, keepdims=True)
        o = m.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, T, d) @ wo
        x = x + o
        x = x + gelu(layer_norm(x, g2, b2) @ w1) @ w2
        return m.mean(x * x)
    return ns.value_and_grad(loss), (params, x)


def skipgram(ns):
    m = ns.np
    V, d, B, K = 5000, 64, 512, 5
    f = np.float32
    rng = np.random.default_rng(2)
    params = [rng.standard_normal((V, d)).astype(f) * f(0.1), rng.standard_normal((V, d)).astype(f) * f(0.1)]
    idx = (rng.integers(0, V, B).astype(np.int32), rng.integers(0, V, B).astype(np.int32),
           rng.integers(0, V, (B, K)).astype(np.int32))

    def log_sigmoid(z):
        return -m.log1p(m.exp(-z))

    def loss(p, center, context, negative):
        e_in, e_out = p
        c = e_in[center]
        pos = m.sum(c * e_out[context], axis=-1)
        neg = m.einsum("bd,bkd->bk", c, e_out[negative])
        return -m.mean(log_sigmoid(pos) + m.sum(log_sigmoid(-neg), axis=-1))
    return ns.value_and_grad(loss), (params, *idx)


def dpsgd(ns):
    m = ns.np
    f = np.float32
    rng = np.random.default_rng(3)
    params = [rng.standard_normal((64, 128)).astype(f) * f(0.1), np.zeros(128, f),
              rng.standard_normal((128, 10)).astype(f) * f(0.1), np.zeros(10, f)]
    x = rng.standard_normal((256, 64)).astype(f)
    y = np.eye(10, dtype=f)[rng.integers(0, 10, 256)]

    def loss(p, x, y):
        w1, b1, w2, b2 = p
        z = m.tanh(x @ w1 + b1) @ w2 + b2
        z = z - m.max(z)
        return -m.sum(y * (z - m.log(m.sum(m.exp(z)))))

    def step(p, x, y):
        g = ns.vmap(ns.grad(loss), in_axes=(None, 0, 0))(p, x, y)
        norm = m.sqrt(sum(m.sum(gi.reshape(gi.shape[0], -1) ** 2, axis=1) for gi in g))
        scale = m.minimum(1.0, 1.0 / (norm + 1e-6))
        return [m.mean(gi * scale.reshape((-1,) + (1,) * (gi.ndim - 1)), axis=0) for gi in g]
    return step, (params, x, y)


def cnn(ns):
    m = ns.np
    f = np.float32
    rng = np.random.default_rng(4)
    params = [rng.standard_normal((8, 1, 3, 3)).astype(f) * f(0.3), rng.standard_normal((16, 8, 3, 3)).astype(f) * f(0.1),
              rng.standard_normal((16 * 7 * 7, 10)).astype(f) * f(0.03)]
    x = rng.standard_normal((64, 1, 28, 28)).astype(f)
    y = np.eye(10, dtype=f)[rng.integers(0, 10, 64)]

    def pool(h):
        n, c, hh, ww = h.shape
        return m.max(h.reshape(n, c, hh // 2, 2, ww // 2, 2), axis=(3, 5))

    def loss(p, x, y):
        k1, k2, w = p
        h = pool(m.maximum(ns.lax.conv_general_dilated(x, k1, (1, 1), "SAME"), 0.0))
        h = pool(m.maximum(ns.lax.conv_general_dilated(h, k2, (1, 1), "SAME"), 0.0))
        z = h.reshape(h.shape[0], -1) @ w
        z = z - m.max(z, axis=1, keepdims=True)
        return -m.mean(m.sum(y * (z - m.log(m.sum(m.exp(z), axis=1, keepdims=True))), axis=1))
    return ns.value_and_grad(loss), (params, x, y)


def attention(ns):
    m = ns.np
    T, d, H = 128, 64, 4
    f = np.float32
    rng = np.random.default_rng(5)
    params = [rng.standard_normal((d, d)).astype(f) * f(0.1) for _ in range(4)]
    x = rng.standard_normal((T, d)).astype(f)
    mask = np.tril(np.ones((T, T), bool))

    def loss(p, x):
        wq, wk, wv, wo = p
        q, k, v = ((x @ w).reshape(T, H, d // H) for w in (wq, wk, wv))
        s = m.einsum("qhd,khd->hqk", q, k) / np.sqrt(d // H).astype(f)
        s = m.where(mask, s, -1e9)
        s = s - m.max(s, axis=-1, keepdims=True)
        a = m.exp(s)
        a = a / m.sum(a, axis=-1, keepdims=True)
        o = m.einsum("hqk,khd->qhd", a, v).reshape(T, d) @ wo
        return m.mean(o * o)
    return ns.value_and_grad(loss), (params, x)


def gp(ns):
    m, sla = ns.np, ns.sla
    n = 500
    rng = np.random.default_rng(6)
    X = rng.uniform(-3, 3, (n, 3))
    y = np.sin(X).sum(1) + 0.1 * rng.standard_normal(n)
    theta = np.array([0.0, 0.0, np.log(0.1)])
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)

    def nll(theta, y):
        ell, sf, sn = m.exp(theta[0]), m.exp(theta[1]), m.exp(theta[2])
        K = sf * sf * m.exp(-0.5 * sq / (ell * ell)) + (sn * sn + 1e-6) * np.eye(n)
        L = sla.cholesky(K, lower=True)
        z = sla.solve_triangular(L, y, lower=True)
        return 0.5 * m.sum(z * z) + m.sum(m.log(m.diagonal(L))) + 0.5 * n * np.log(2 * np.pi)
    return ns.value_and_grad(nll), (theta, y)


def trimmed(ns):
    m = ns.np
    x = np.random.default_rng(7).standard_normal(100_000)

    def tmean(x):
        s = m.sort(x)
        return m.mean(s[10_000:90_000])
    return ns.value_and_grad(tmean), (x,)


def mlp(ns):
    m = ns.np
    f = np.float32
    rng = np.random.default_rng(8)
    params = [rng.standard_normal((784, 256)).astype(f) * f(0.05), np.zeros(256, f),
              rng.standard_normal((256, 10)).astype(f) * f(0.1), np.zeros(10, f)]
    x = rng.standard_normal((128, 784)).astype(f)
    y = np.eye(10, dtype=f)[rng.integers(0, 10, 128)]

    def loss(p, x, y):
        w1, b1, w2, b2 = p
        z = m.tanh(x @ w1 + b1) @ w2 + b2
        z = z - m.max(z, axis=1, keepdims=True)
        return -m.mean(m.sum(y * (z - m.log(m.sum(m.exp(z), axis=1, keepdims=True))), axis=1))
    vg = ns.value_and_grad(loss)

    def step(p, x, y):
        value, g = vg(p, x, y)
        return value, [a - 0.1 * b for a, b in zip(p, g)]
    return step, (params, x, y)


WORKLOADS = {f.__name__: f for f in (nbody, transformer, skipgram, dpsgd, cnn, attention, gp, trimmed, mlp)}


# ---- running and timing ----


def namespaces():
    import jax
    import jax.numpy as jnp
    import jax.scipy.linalg as jsla

    jax.config.update("jax_enable_x64", True)
    tns = types.SimpleNamespace(np=td, lax=td.lax, sla=td.scipy.linalg, grad=td.grad,
                                value_and_grad=td.value_and_grad, vmap=td.vmap, fori_loop=td.fori_loop)
    jns = types.SimpleNamespace(np=jnp, lax=jax.lax, sla=jsla, grad=jax.grad,
                                value_and_grad=jax.value_and_grad, vmap=jax.vmap,
                                fori_loop=jax.lax.fori_loop)
    return tns, jns, jax


def spin():
    while True:
        pass


CLOCK = time.perf_counter  # --clock cpu: time.process_time


def samples(fn, calls, budget):
    """Times of up to `calls` calls of fn (fewer when they pass `budget` seconds; at least 5),
    on CLOCK: wall time, or with --clock cpu the process's CPU time (every thread's, jax's pool
    and tidu's included), which a loaded machine's time slices given to other processes do not
    stretch."""
    ts = []
    t_end = time.perf_counter() + budget
    while len(ts) < calls and (len(ts) < 5 or time.perf_counter() < t_end):
        t0 = CLOCK()
        fn()
        ts.append(CLOCK() - t0)
    return ts


def summary(ts):
    ts = sorted(ts)
    return statistics.median(ts), ts[min(len(ts) - 1, int(round(0.99 * (len(ts) - 1))))]


def first_leaf(out):
    while isinstance(out, (list, tuple)):
        out = out[0]
    return np.asarray(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer calls per figure (noisier p99)")
    ap.add_argument("--calls", type=int, default=200, help="warm calls per figure (at most)")
    ap.add_argument("--only", nargs="*", choices=sorted(WORKLOADS), help="run these workloads only")
    ap.add_argument("--no-busy", action="store_true", help="skip the busy-core figures")
    ap.add_argument("--xla", action="store_true",
                    help="a fourth column: tidu's XLA backend (backend='xla'), compiled at the "
                         "cold call")
    ap.add_argument("--settle", type=float, default=60.0,
                    help="seconds the default backend may take to settle its tier before its "
                         "warm figures (tiered execution: docs/xla.md)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="warm figures in wall time (default) or in the process's CPU time, all "
                         "threads (for a loaded machine, where wall medians of calls over ~1 ms "
                         "include other processes' time slices)")
    args = ap.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    calls, budget = (30, 0.5) if args.quick else (args.calls, 3.0)
    tns, jns, jax = namespaces()
    names = args.only or list(WORKLOADS)
    columns = (("jax", None), ("cpu", "cpu"), ("tidu", None)) + ((("xla", "xla"),) if args.xla else ())
    print(f"tidu threads: {getattr(td, 'get_num_threads', lambda: '?')()}; calls per warm figure: up to {calls}; times in ms ({args.clock} clock);"
          f" load average {os.getloadavg()[0]:.1f} (other work on the machine skews every figure)")
    head = "".join(f"{c:>9}" for c, _ in columns)
    print(f"{'':12} {'':13}{head}   tidu/jax ({', '.join(c for c, _ in columns[1:])})")
    rows = {}
    for name in names:
        make = WORKLOADS[name]
        fns, res = {}, {}
        for label, backend in columns:
            if label == "jax":
                body, data = make(jns)
                f = jax.jit(body)
                call = (lambda f=f, data=data: jax.block_until_ready(f(*data)))
            else:
                td.clear_caches()  # cold means never seen in this process, for each backend
                body, data = make(tns)
                f = td.jit(body) if backend is None else td.jit(body, backend=backend)
                call = (lambda f=f, data=data: f(*data))
            t0 = time.perf_counter()
            out = call()
            res[label] = {"cold": time.perf_counter() - t0, "out": first_leaf(out)}
            fns[label] = call
            if label == "tidu":
                res[label]["settle"] = settle(f, call, args.settle)
        for label in [c for c, _ in columns[1:]]:
            np.testing.assert_allclose(res[label]["out"], res["jax"]["out"], rtol=2e-3, atol=1e-5,
                                       err_msg=f"{name}: tidu {label} disagrees with jax")
        for label, call in fns.items():
            res[label]["quiet"] = summary(samples(call, calls, budget))
        rows[name] = (fns, res)
        _print(name, res, columns, ("cold", "quiet"))
        print(f"{'':12} {'default':13}{res['tidu']['settle']}")
    if not args.no_busy:
        child = mp.get_context("spawn").Process(target=spin, daemon=True)
        child.start()
        time.sleep(0.5)
        try:
            print("with a second process spinning on one core:")
            for name in names:
                fns, res = rows[name]
                for label, call in fns.items():
                    res[label]["busy"] = summary(samples(call, calls, budget))
                _print(name, res, columns, ("busy",))
        finally:
            child.terminate()
            child.join()
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


def _print(name, res, columns, what):
    labels = [c for c, _ in columns]
    fmt = lambda vals: "".join(f"{v * 1e3:9.2f}" for v in vals)
    first = True
    for kind in what:
        lines = []
        if kind == "cold":
            vals = [res[k]["cold"] for k in labels]
            ratio = ", ".join(f"{vals[0] / v:.0f}x faster" for v in vals[1:])
            lines.append(("cold", vals, f"jax/tidu: {ratio}"))
        else:
            med = [res[k][kind][0] for k in labels]
            p99 = [res[k][kind][1] for k in labels]
            ratio = ", ".join(f"{v / med[0]:.2f}" for v in med[1:])
            lines.append((f"{kind} median", med, ratio))
            if kind == "busy":
                spread = ", ".join(f"{res[k]['busy'][1] / res[k]['quiet'][0]:.1f}" for k in labels)
                lines.append((f"{kind} p99", p99, f"p99/quiet median ({', '.join(labels)}): {spread}"))
            else:
                lines.append((f"{kind} p99", p99, ", ".join(f"{v / p99[0]:.2f}" for v in p99[1:])))
        for label, vals, tail in lines:
            print(f"{name if first else '':12} {label:13}{fmt(vals)}   {tail}")
            first = False


if __name__ == "__main__":
    main()
