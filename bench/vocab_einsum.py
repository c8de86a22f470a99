"""A random 20-operand tensor-network contraction, float64: td.einsum (interpreter and XLA)
against jax.jit(jnp.einsum) and np.einsum(optimize=True) -- per-call time and the flop count of
each one's contraction path.

    python bench/vocab_einsum.py [--operands 20] [--dim 4] [--repeat 21] [--quick]

Every index joins two operands (a random connected network, a few open indices); bond sizes
are drawn from [2, dim].  cold: the first call (trace, path search, compile, run); warm: the
median of `repeat` later calls.  Ratios are tidu / jax (lower is better).
"""

from __future__ import annotations

import argparse
import re

import numpy as np

import tidu as td
from _timing import timed


def random_network(rng, n_ops, n_idx, dim, per_op=4, open_idx=2):
    """(equation, arrays): a connected random network (a chain plus random extra bonds)."""
    from opt_einsum import get_symbol

    sizes = {k: int(rng.integers(2, dim, endpoint=True)) for k in range(n_idx)}
    ops = [[] for _ in range(n_ops)]
    for k in range(n_ops - 1):
        ops[k].append(k)
        ops[k + 1].append(k)
    for k in range(n_ops - 1, n_idx):
        p, q = rng.choice(n_ops, 2, replace=False)
        if len(ops[p]) < per_op and len(ops[q]) < per_op:
            ops[p].append(k)
            ops[q].append(k)
    used = sorted({k for o in ops for k in o})
    out = []
    for k in range(open_idx):
        sizes[1000 + k] = dim
        ops[int(rng.integers(n_ops))].append(1000 + k)
        out.append(1000 + k)
    sym = {k: get_symbol(i) for i, k in enumerate(used + out)}
    eq = ",".join("".join(sym[k] for k in o) for o in ops) + "->" + "".join(sym[k] for k in out)
    return eq, [rng.standard_normal([sizes[k] for k in o]) for o in ops]



def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--operands", type=int, default=20)
    ap.add_argument("--dim", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="5 repeats, no XLA run of tidu")
    args = ap.parse_args(argv)
    repeat = 5 if args.quick else args.repeat

    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(args.seed)
    eq, arrays = random_network(rng, args.operands, int(1.5 * args.operands), args.dim)
    print(f"{args.operands}-operand network, {sum(a.size for a in arrays)} elements in, "
          f"equation {eq}")

    # path costs (flops as opt_einsum counts them)
    _, td_info = td.einsum_path(eq, *arrays, optimize="auto")
    _, jx_info = jnp.einsum_path(eq, *arrays, optimize="auto")
    np_text = np.einsum_path(eq, *arrays, optimize="greedy")[1]
    np_flops = float(re.search(r"Optimized FLOP count:\s*([0-9.e+]+)", np_text).group(1))
    print(f"path flops: tidu {float(td_info.opt_cost):.4g}  jax {float(jx_info.opt_cost):.4g}  "
          f"numpy {np_flops:.4g}  (naive {float(td_info.naive_cost):.4g})")

    want, np_cold, np_warm = timed(lambda: np.einsum(eq, *arrays, optimize=True), repeat)
    jf = jax.jit(lambda *xs: jnp.einsum(eq, *xs))
    jx, jx_cold, jx_warm = timed(lambda: jf(*arrays).block_until_ready(), repeat)
    rows = [("numpy optimize=True", np_cold, np_warm), ("jax.jit", jx_cold, jx_warm)]
    for backend in (("cpu",) if args.quick else ("cpu", "xla")):
        f = td.jit(lambda *xs: td.einsum(eq, *xs), backend=backend)
        got, cold, warm = timed(lambda: f(*arrays), repeat)
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-8)
        rows.append((f"tidu {backend}", cold, warm))
    print(f"{'':>22} {'cold s':>9} {'warm us':>10} {'warm/jax':>9}")
    for name, cold, warm in rows:
        print(f"{name:>22} {cold:9.3f} {warm * 1e6:10.1f} {warm / jx_warm:9.2f}")


if __name__ == "__main__":
    main()
