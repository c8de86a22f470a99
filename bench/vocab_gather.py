"""Gather and scatter-add of 1e6 elements, per call, in one run: tidu's interpreter against
jax.jit and numpy.  Prints medians and ratios (tidu / peer; lower is better).

    python bench/vocab_gather.py [--quick] [--n 1000000]

(b) of issue 18's bench/vocab.py: ``x[idx]`` (a traced int64 index of n random positions, negative
indices wrapped as numpy/jax do) and ``x.at[idx].add(v)`` (duplicates accumulate), float64.
numpy's references are ``x[idx]`` and ``np.add.at``.  Target: within 1.2x of jax.jit.
"""

from __future__ import annotations

import argparse

import numpy as np

import tidu as td
from _timing import timeit


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--n", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    repeat, number = (5, 3) if args.quick else (11, 10)
    n = args.n
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n)
    idx = rng.integers(-n, n, n)  # half negative: wrapped
    v = rng.standard_normal(n)
    idx_pos = np.where(idx < 0, idx + n, idx)

    rows = []
    t_get = td.jit(lambda x, i: x[i])
    t_add = td.jit(lambda x, i, v: x.at[i].add(v))
    np.testing.assert_array_equal(t_get(x, idx), x[idx])
    ref = x.copy()
    np.add.at(ref, idx_pos, v)
    np.testing.assert_allclose(t_add(x, idx, v), ref, rtol=1e-12, atol=1e-12)
    tidu = {"gather x[idx]": timeit(lambda: t_get(x, idx), repeat, number),
            "scatter x.at[idx].add(v)": timeit(lambda: t_add(x, idx, v), repeat, number)}

    def np_add():
        y = x.copy()
        np.add.at(y, idx_pos, v)
        return y

    numpy = {"gather x[idx]": timeit(lambda: x[idx], repeat, number),
             "scatter x.at[idx].add(v)": timeit(np_add, repeat, max(1, number // 5))}
    peers = {"numpy": numpy}
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        jx, ji, jv = (jax.device_put(a) for a in (x, idx, v))
        j_get = jax.jit(lambda x, i: x[i])
        j_add = jax.jit(lambda x, i, v: x.at[i].add(v))
        peers["jax.jit"] = {
            "gather x[idx]": timeit(lambda: j_get(jx, ji).block_until_ready(), repeat, number),
            "scatter x.at[idx].add(v)": timeit(lambda: j_add(jx, ji, jv).block_until_ready(),
                                               repeat, number)}
    except ImportError:
        pass
    print(f"n = {n}, float64 values, int64 indices (median per call; the machine may be busy)")
    hdr = f"{'workload':28s} {'tidu':>10s}" + "".join(f" {p:>10s} {'ratio':>7s}" for p in peers)
    print(hdr)
    for k in tidu:
        line = f"{k:28s} {tidu[k] * 1e3:8.3f}ms"
        for p in peers.values():
            line += f" {p[k] * 1e3:8.3f}ms {tidu[k] / p[k]:7.2f}"
        rows.append(line)
        print(line)


if __name__ == "__main__":
    main()
