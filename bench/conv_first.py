"""Where the first call of bench/conv.py's two training steps goes, per phase and per backend, each
in a fresh process (so no backend inherits another's warmed buffers, as the columns of one
bench/conv.py process would).

    python bench/conv_first.py [--threads 1] [--cases lenet resnet cnn] [--backends default cpu]

(`cnn` is bench/tensor.py's cnn workload, issue #30's cold row: its value_and_grad as written there.)

Each child process does what bench/conv.py does before its cold figure (imports jax, runs one tiny
jit of each library), then times the first call of ``td.jit(td.value_and_grad(loss))`` in CPU
time of the process (`time.process_time`: all threads; a loaded machine stretches it far less
than wall time) and wall time, split into phases by timing the pipeline's steps:

- trace + AD: tracing the loss and its gradient (the AD rules run inside the trace);
- materialize: `materialize_merge` (flatten, de-duplicate, order);
- compile: `compile` (SSA arrays, the backend's program: the interpreter's encoding);
- first eval: the first evaluation (including tiered execution's wrapper for the default);
- later eval: the median of 5 later calls, for comparison.

jax's first call (trace, lower, XLA compile, first run) is timed the same way in its own fresh
process, and the ratio jax / tidu of the whole first call is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(case: str, backend: str) -> dict:
    sys.path.insert(0, HERE)
    import numpy as np

    import jax
    import jax.numpy as jnp
    from jax import lax

    import tidu as td
    from conv import lenet, lenet_data, resblock, resblock_data
    from tidu.api import jit as jit_mod
    from tidu.numpy.conv import conv_general_dilated as td_conv
    from tidu.numpy.conv import reduce_window as td_rw

    small = np.ones((4, 4), np.float32)
    jax.block_until_ready(jax.jit(lambda a: a @ a)(small))
    td.jit(lambda a: a @ a)(small)
    rng = np.random.default_rng(0)
    if case == "cnn":
        import tensor
        tns, jns, _ = tensor.namespaces()
        model = None
    else:
        model, data = (lenet, lenet_data(rng)) if case == "lenet" else (resblock, resblock_data(rng))
    clock = time.process_time
    if backend == "jax" and model is None:
        f, data = tensor.cnn(jns)
        f = jax.jit(f)
        call = lambda: jax.block_until_ready(f(*data))
        phases = {}
    elif backend == "jax":
        jops = {"max": (lax.max, -np.inf), "add": (lax.add, 0.0)}
        jrw = lambda x, init, c, wd, st, p: lax.reduce_window(x, jops[c][1], jops[c][0], wd, st, p)
        jconv = lambda x, k, s, p: lax.conv_general_dilated(x, k, s, p)
        f = jax.jit(jax.value_and_grad(model(jnp, jconv, jrw)))
        call = lambda: jax.block_until_ready(f(*data))
        phases = {}
    else:
        spent = {"materialize": 0.0, "compile": 0.0}

        def timed(name, fn):
            def wrapped(*a, **k):
                t0 = clock()
                try:
                    return fn(*a, **k)
                finally:
                    spent[name] += clock() - t0
            return wrapped

        jit_mod.materialize_merge = timed("materialize", jit_mod.materialize_merge)
        jit_mod.compile = timed("compile", jit_mod.compile)
        trace = {"s": 0.0}
        orig = jit_mod.trace_program

        def traced(*a, **k):
            t0 = clock()
            try:
                return orig(*a, **k)
            finally:
                trace["s"] += clock() - t0
        jit_mod.trace_program = traced
        kw = {} if backend == "default" else {"backend": backend}
        tconv = lambda x, k, s, p: td_conv(x, k, s, p)
        if model is None:
            body, data = tensor.cnn(tns)
            f = td.jit(body, **kw)
        else:
            f = td.jit(td.value_and_grad(model(td, tconv, td_rw)), **kw)
        call = lambda: f(*data)
        phases = None
    w0, c0 = time.perf_counter(), clock()
    call()
    first_cpu, first_wall = clock() - c0, time.perf_counter() - w0
    if phases is None:
        lower = trace["s"]
        phases = {"trace + AD": lower - spent["materialize"] - spent["compile"],
                  "materialize": spent["materialize"], "compile": spent["compile"],
                  "first eval": first_cpu - lower}
    later = []
    for _ in range(5):
        c0 = clock()
        call()
        later.append(clock() - c0)
    return {"first_cpu": first_cpu, "first_wall": first_wall, "phases": phases,
            "later": statistics.median(later)}


def first_call(case: str, backend: str, env=None) -> dict:
    """child(case, backend) run in a fresh process."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", case, backend],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None,
                    help="TIDU_NUM_THREADS and XLA's intra-op threads for the children")
    ap.add_argument("--cases", nargs="+", default=["lenet", "resnet"], choices=["lenet", "resnet", "cnn"])
    ap.add_argument("--backends", nargs="+", default=["default", "cpu"])
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    env = dict(os.environ)
    if args.threads:
        env["TIDU_NUM_THREADS"] = str(args.threads)
        env["XLA_FLAGS"] = ("--xla_cpu_multi_thread_eigen=false "
                            f"intra_op_parallelism_threads={args.threads}")
    print(f"load average {os.getloadavg()[0]:.1f}; CPU time of the process (wall time), ms")
    for case in args.cases:
        rows = {}
        for backend in ["jax"] + args.backends:
            rows[backend] = first_call(case, backend, env)
        j = rows["jax"]
        print(f"{case}: jax.jit first call {j['first_cpu'] * 1e3:.0f} "
              f"({j['first_wall'] * 1e3:.0f}), later {j['later'] * 1e3:.1f}")
        for backend in args.backends:
            r = rows[backend]
            ph = ", ".join(f"{k} {v * 1e3:.1f}" for k, v in r["phases"].items())
            print(f"  tidu {backend:8}: first call {r['first_cpu'] * 1e3:.1f} "
                  f"({r['first_wall'] * 1e3:.1f}) = {ph}; later {r['later'] * 1e3:.1f}; "
                  f"jax / tidu first call {j['first_cpu'] / r['first_cpu']:.0f}x "
                  f"({j['first_wall'] / r['first_wall']:.0f}x wall)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
