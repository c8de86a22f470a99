"""tidu's XLA executables against jax.jit's on the same workloads (bench/tensor.py), with the
call path taken out: each side's StableHLO text compiled straight through the XLA client
(``compile_and_load`` with jax's default compile options) and called on device buffers.

    python bench/xla_exec.py [NAME ...]

Prints CPU time per call (median, all threads: ``time.process_time``) of jax's text, tidu's text,
and tidu's text through tidu's own path (``jax.export`` + ``jax.jit``), and tidu / jax.  A ratio
far from 1 is the executable (XLA compiled the two texts differently), not tidu's runner.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import tidu as td
from tidu.api.tree import flatten_args

sys.path.insert(0, str(Path(__file__).parent))
import tensor  # noqa: E402


def timed(f, calls=15, budget=4.0):
    f()
    ts, t_end = [], time.perf_counter() + budget
    while len(ts) < calls and (len(ts) < 5 or time.perf_counter() < t_end):
        t0 = time.process_time()
        f()
        ts.append(time.process_time() - t0)
    return statistics.median(ts)


def main(names):
    tns, jns, jax = tensor.namespaces()
    from jax._src import compiler, xla_bridge  # private: this bench pins the compile path
    from jax._src.lib import xla_client

    backend = xla_bridge.get_backend()
    dev = backend.local_devices()[0]

    def direct(text, ins):
        exe = backend.compile_and_load(text, xla_client.DeviceList((dev,)),
                                       compiler.get_compile_options(1, 1))
        bufs = [jax.device_put(x, dev) for x in ins]
        return timed(lambda: [o.block_until_ready() for o in exe.execute(bufs)])

    print(f"{'':12} {'jax text':>10} {'tidu text':>10} {'tidu path':>10}   tidu/jax (ms, CPU time)")
    for name in names:
        make = tensor.WORKLOADS[name]
        body, data = make(tns)
        prog = td.jit(body, backend="xla").lower(*data).program
        runner = prog.executable.xla()
        if len(runner.segments) != 1:
            print(f"{name:12} {len(runner.segments)} segments: not compared")
            continue
        seg = runner.segments[0]
        leaves, _ = flatten_args(tuple(data))
        by_slot = dict(zip((int(s) for s in prog.executable.input_slots),
                           (np.asarray(leaves[k[1]]) for k in prog.inputs)))
        ins = [by_slot[k] for k in seg.in_keys]
        jbody, jdata = make(jns)
        jtext = jax.jit(jbody).lower(*jdata).as_text()
        jin = [np.asarray(x) for x in jax.tree_util.tree_leaves(jdata)]
        tj, tt = direct(jtext, jin), direct(seg.text, ins)
        with jax.enable_x64(True):
            bufs = [jax.device_put(x, dev) for x in ins]
            tp = timed(lambda: jax.block_until_ready(runner.calls[0](*bufs)))
        print(f"{name:12} {tj * 1e3:10.3f} {tt * 1e3:10.3f} {tp * 1e3:10.3f}   {tt / tj:.2f}",
              flush=True)
    print(f"jax {jax.__version__}; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(tensor.WORKLOADS))
