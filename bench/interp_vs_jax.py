"""One workload of bench/tensor.py on tidu's interpreter and jax.jit, calls taken in turn:
the interpreter's thread CPU time against jax.jit's process CPU time (its own pool's threads
included), medians and their ratio.  For before/after comparisons on a loaded machine, run it
alternately from two checkouts (docs/performance.md); set TIDU_NUM_THREADS=1 so that the
interpreter's thread time covers all of its work.

    TIDU_NUM_THREADS=1 python bench/interp_vs_jax.py nbody --calls 40
"""
from __future__ import annotations

import argparse
import statistics
import time

import tensor

import tidu as td


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload", choices=sorted(tensor.WORKLOADS))
    ap.add_argument("--calls", type=int, default=40, help="warm calls of each")
    a = ap.parse_args(argv)
    tns, jns, jax = tensor.namespaces()
    make = getattr(tensor, a.workload)
    fn, args = make(tns)
    f = td.jit(fn, backend="cpu")
    f(*args)
    jf = jax.jit(make(jns)[0])
    jax.block_until_ready(jf(*args))
    ts, tj = [], []
    for _ in range(a.calls):
        t0 = time.thread_time()
        f(*args)
        ts.append(time.thread_time() - t0)
        t0 = time.process_time()
        jax.block_until_ready(jf(*args))
        tj.append(time.process_time() - t0)
    mt, mj = statistics.median(ts), statistics.median(tj)
    print(f"{a.workload}: interpreter {mt * 1e3:.2f} ms thread CPU (best {min(ts) * 1e3:.2f}), "
          f"jax.jit {mj * 1e3:.2f} ms process CPU; interpreter / jax.jit {mt / mj:.2f}")


if __name__ == "__main__":
    main()
