"""td.lax's composite forms against jax.lax, per call, in one run (float64, x64): the general
gather (point and window forms, the flat-index mapping), scatter_add of windows, ``reduce`` with
a traced (associative, logaddexp) body: the log-depth tree, ``reduce_window`` with such a
body (the ReduceWindowGeneral op) and with a non-identity init, ``cumlogsumexp``
(associative_scan of logaddexp), a two-operand ``sort`` and ``clamp``.  Prints medians and
ratios (tidu / jax.jit; lower is better) for tidu's interpreter (backend="cpu"), XLA and its
default backend.  ``--only WORD`` runs the cases whose name holds WORD.

    python bench/vocab_lax.py [--quick] [--n 200000] [--only reduce_window]
"""

from __future__ import annotations

import argparse

import numpy as np

import tidu as td
from _timing import timeit


def cases(L, n):
    """name -> (f(M, *args), args) where M is jax.lax or td.lax."""
    rng = np.random.default_rng(0)
    m = int(np.sqrt(n))
    img = rng.standard_normal((m, m, 4))
    pts = rng.integers(0, m - 2, (n // 4, 2))
    x = rng.standard_normal((n // 1000, 1000))
    y = rng.standard_normal(n)
    return {
        "gather points (n/4 x 4)": (lambda M, a, i: M.gather(
            a, i, M.GatherDimensionNumbers((1,), (0, 1), (0, 1)), (1, 1, 4)), (img, pts)),
        "gather 2x2 windows": (lambda M, a, i: M.gather(
            a, i, M.GatherDimensionNumbers((1, 2, 3), (), (0, 1)), (2, 2, 4)), (img, pts)),
        "scatter_add 2x2 windows": (lambda M, a, i, u: M.scatter_add(
            a, i, u, M.ScatterDimensionNumbers((1, 2, 3), (), (0, 1))),
            (img, pts, rng.standard_normal((len(pts), 2, 2, 4)))),
        "reduce traced logaddexp": (lambda M, a: M.reduce(
            a, -np.inf, lambda p, q: M.max(p, q) + M.log1p(M.exp(-M.abs(p - q))), (1,)),
            (x,)),
        "cumlogsumexp": (lambda M, a: M.cumlogsumexp(a, 1), (x,)),
        "reduce_window logaddexp 3x3": (lambda M, a: M.reduce_window(
            a, -np.inf, lambda p, q: M.max(p, q) + M.log1p(M.exp(-M.abs(p - q))), (3, 3, 1),
            (1, 1, 1), "SAME"), (img,)),
        "reduce_window add init 1": (lambda M, a: M.reduce_window(
            a, 1.0, M.add, (3, 3, 1), (2, 2, 1), "SAME"), (img,)),
        "sort (keys, values)": (lambda M, a, b: M.sort((a, b), 1), (x, x * 2)),
        "clamp": (lambda M, a: M.clamp(-0.5, a, 0.5), (y,)),
    }


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--only", default="", help="run the cases whose name holds this")
    args = ap.parse_args(argv)
    repeat, number = (5, 2) if args.quick else (9, 5)
    import jax

    jax.config.update("jax_enable_x64", True)
    from jax import lax as L

    backends = ("cpu", "xla", "auto")
    print(f"{'case':28s} {'jax.jit ms':>10s}" +
          "".join(f" {b + ' ms':>9s} {b + '/jax':>8s}" for b in backends))
    for name, (f, a) in cases(L, args.n).items():
        if args.only not in name:
            continue
        jf = jax.jit(lambda *z, f=f: f(L, *z))
        ja = [jax.device_put(v) for v in a]
        want = [np.asarray(w) for w in jax.tree_util.tree_leaves(jf(*ja))]
        tj = timeit(lambda: jax.block_until_ready(jf(*ja)), repeat, number)
        row = [tj]
        for backend in backends:
            tf = td.jit(lambda *z, f=f: f(td.lax, *z), backend=backend)
            for g, w in zip(jax.tree_util.tree_leaves(tf(*a)), want):
                np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9)
            row.append(timeit(lambda: tf(*a), repeat, number))
        print(f"{name:28s} {row[0] * 1e3:10.3f}" +
              "".join(f" {t * 1e3:9.3f} {t / row[0]:8.2f}" for t in row[1:]))


if __name__ == "__main__":
    main()
