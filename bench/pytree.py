"""Pytree flatten/unflatten per call: tidu's compiled walk beside jax.tree_util and optree (the
library issue #31 asked about) in one run, on the argument shapes transforms see.

    python bench/pytree.py [--quick]

Prints microseconds per call and the ratio of each peer to tidu (> 1: tidu is faster)."""

from __future__ import annotations

import argparse
import collections
import timeit

import numpy as np

import tidu as td


def best(fn, n: int, repeats: int) -> float:
    return min(timeit.repeat(fn, number=n, repeat=repeats)) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    opts = ap.parse_args()
    n, repeats = (20_000, 3) if opts.quick else (200_000, 5)
    x = np.ones(3)
    P = collections.namedtuple("P", "w b")
    cases = {
        "flat (x, 0.5)": (x, 0.5),
        "dict of 4 + x": ({"w1": x, "b1": x, "w2": x, "b2": x}, x),
        "10 layers of {w, b}": ({"layers": [{"w": x, "b": x} for _ in range(10)]},),
        "namedtuples + None": ([P(x, None), P(x, x)], None),
    }
    from tidu.api import tree as walk  # the walk the transforms call: raw trees, no PyTreeDef object
    peers = {"tidu": (td.tree_util.tree_flatten, td.tree_util.tree_unflatten),
             "transforms": (walk.flatten_args, walk.unflatten)}
    try:
        import jax
        peers["jax"] = (jax.tree_util.tree_flatten, jax.tree_util.tree_unflatten)
    except ImportError:
        pass
    try:
        import optree
        peers["optree"] = (lambda t: optree.tree_flatten(t, none_is_leaf=False),
                           optree.tree_unflatten)
    except ImportError:
        print("(optree not installed: pip install optree to compare)")
    print(f"{'tree':24s} " + " ".join(f"{p + ' fl':>10s} {p + ' un':>10s}" for p in peers))
    for name, tree in cases.items():
        row, base = [], None
        for flat, unflat in peers.values():
            leaves, treedef = flat(tree)
            tf = best(lambda: flat(tree), n, repeats) * 1e6
            tu = best(lambda: unflat(treedef, leaves), n, repeats) * 1e6
            base = base or (tf, tu)
            row.append(f"{tf:7.3f} us {tu:7.3f} us" if base == (tf, tu) else
                       f"{tf / base[0]:8.2f}x {tu / base[1]:9.2f}x")
        print(f"{name:24s} " + " ".join(row))
    print("(tidu columns in us per call; peers as their time over tidu's)")


if __name__ == "__main__":
    main()
