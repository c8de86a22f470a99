"""Graph engine throughput: build (tracing), materialize_merge and compile per node, and memory.

Chains (x -> sin -> exp -> ... ) and DAGs (each node combines two random earlier nodes) of 1e4, 1e5
and 1e6 nodes, traced through the public front end (``tidu.build``), then materialised and compiled.
Prints median microseconds per node over repeats and the interner's bytes per node.

    python bench/graph_build.py [--sizes 10000 100000 1000000] [--repeat 3]

Targets (issue 2): build <= 1 us/node, materialize_merge + compile <= 0.2 us/node,
<= 100 bytes of interner memory per node.  For scale, CasADi takes ~46 us/node to build an SX
expression from Python on this machine (measured below when casadi is installed).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time

import tidu as td
from tidu import _core


def chain(n):
    def fn(x):
        y = x
        for i in range(n // 2):
            y = td.sin(y)
            y = y * x
        return y
    return fn


def dag(n, seed=0):
    rng = random.Random(seed)
    picks = [(rng.random(), rng.random(), rng.random()) for _ in range(n)]

    def fn(x, y):
        # Each node combines the previous node with a random earlier one: every node is
        # reachable from the last, with long-range fan-out edges across the whole graph.
        vals = [x, y]
        for a, _, c in picks:
            u = vals[-1]
            v = vals[int(a * len(vals))]
            vals.append(u * v if c < 0.5 else u + v)
        return vals[-1]
    return fn


def measure(name, make_fn, n, specs, repeat):
    builds, resolves, mats, comps, frag_mem = [], [], [], [], []
    for r in range(repeat):
        fn = make_fn(n)
        gc.collect()
        t0 = time.perf_counter()
        # A fresh input name per repeat, so every repeat builds new nodes (no hash-consing hits).
        frag = td.build(fn, inputs={(k, r, time.time_ns()): s for k, s in specs.items()})
        t1 = time.perf_counter()
        view = td.resolve([frag])
        t15 = time.perf_counter()
        g = td.materialize_merge(view, frag.outputs)
        t2 = time.perf_counter()
        g._mat.compile()
        t3 = time.perf_counter()
        builds.append((t1 - t0) / frag.n_ops * 1e6)
        resolves.append((t15 - t1) / frag.n_ops * 1e6)
        mats.append((t2 - t15) / g.n_ops * 1e6)  # per node of the reachable graph
        comps.append((t3 - t2) / g.n_ops * 1e6)
        frag_mem.append(frag.store.memory_bytes() / frag.n_vals)
    med = statistics.median
    mc = med(mats) + med(comps)
    print(f"{name:6s} n={n:>8,d}  build {med(builds):6.3f} us/node  resolve {med(resolves):6.3f}"
          f"  materialize {med(mats):6.3f}"
          f"  compile {med(comps):6.3f}  (mat+compile {mc:6.3f}, target 0.2: {mc / 0.2:4.2f}x)"
          f"  fragment {med(frag_mem):5.1f} B/node")
    return med(builds)


class _Plain:
    """The cheapest possible traced object: what the user's own Python loop costs without tidu."""

    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __mul__(self, o):
        return _Plain(self, o)

    __add__ = __mul__


def python_floor(make_fn, n, n_args):
    fn = make_fn(n)
    gc.collect()
    gc.disable()
    t0 = time.perf_counter()
    fn(*[_Plain(None, None)] * n_args)
    t1 = time.perf_counter()
    gc.enable()
    return (t1 - t0) / n * 1e6


def casadi_build(n):
    try:
        import casadi as ca
    except ImportError:
        return None
    x = ca.SX.sym("x")
    t0 = time.perf_counter()
    y = x
    for _ in range(n // 2):
        y = ca.sin(y)
        y = y * x
    return (time.perf_counter() - t0) / n * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    f64 = td.spec((), "float64")
    for n in a.sizes:
        b = measure("chain", chain, n, {"x": f64}, a.repeat)
        d = measure("dag", dag, n, {"x": f64, "y": f64}, a.repeat)
        print(f"       the dag's own Python loop alone (plain objects, no tidu): "
              f"{python_floor(dag, n, 2):6.3f} us/node  (dag build / target 1 us: {d:4.2f}x)")
        c = casadi_build(min(n, 100_000))
        if c is not None:
            print(f"       casadi SX chain build {c:6.3f} us/node  (tidu/casadi {b / c:5.3f}x)")
    # Capacity doubling makes per-build deltas noisy; the whole interner over all nodes is stable.
    print(f"interner: {_core.interner_bytes() / _core.n_vals():.1f} bytes per value over "
          f"{_core.n_vals():,d} values ({_core.n_ops():,d} ops); target <= 100")


if __name__ == "__main__":
    main()
