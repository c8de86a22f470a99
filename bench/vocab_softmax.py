"""Issue 18, bench (c): the gradient of softmax cross-entropy over a (1024, 1000) float32 logits
matrix, tidu (``td.grad`` of ``td.nn.log_softmax``, the C++ interpreter) against ``jax.jit(jax.grad)``
per call, and the ratio.  The integrator folds this into ``bench/vocab.py``.

    python bench/vocab_softmax.py [--quick] [--float64]

Target: within 1.2x of jax.jit.
"""

from __future__ import annotations

import argparse

import numpy as np

import tidu as td
from _timing import timeit


def loss(nn, ns, logits, labels):
    """Mean softmax cross-entropy of one-hot labels."""
    return -ns.mean(ns.sum(labels * nn.log_softmax(logits, axis=-1), axis=-1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    ap.add_argument("--float64", action="store_true", help="float64 instead of float32")
    args = ap.parse_args(argv)
    dtype = np.float64 if args.float64 else np.float32
    repeat, number = (3, 3) if args.quick else (9, 10)

    rng = np.random.default_rng(0)
    n, k = 1024, 1000
    logits = (rng.standard_normal((n, k)) * 3).astype(dtype)
    labels = np.eye(k, dtype=dtype)[rng.integers(0, k, n)]

    g_td = td.grad(lambda x, y: loss(td.nn, td, x, y))
    t_td = timeit(lambda: g_td(logits, labels), repeat, number)
    print(f"softmax cross-entropy gradient, ({n}, {k}) {np.dtype(dtype).name}")
    print(f"  tidu (interpreter)  {t_td * 1e3:8.3f} ms per call")

    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("  jax not installed: no comparison")
        return
    if args.float64:
        jax.config.update("jax_enable_x64", True)
    g_jx = jax.jit(jax.grad(lambda x, y: loss(jax.nn, jnp, x, y)))
    xj, yj = jax.device_put(logits), jax.device_put(labels)
    t_jx = timeit(lambda: g_jx(xj, yj).block_until_ready(), repeat, number)
    np.testing.assert_allclose(g_td(logits, labels), np.asarray(g_jx(xj, yj)),
                               rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-7)
    print(f"  jax.jit             {t_jx * 1e3:8.3f} ms per call")
    print(f"  tidu / jax.jit      {t_td / t_jx:8.2f}x   (target <= 1.2x)")


if __name__ == "__main__":
    main()
