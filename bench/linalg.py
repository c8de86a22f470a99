"""Gaussian-process negative log likelihood, value and gradient wrt (lengthscale, variance, noise),
float64, in one run: tidu's interpreter and tidu through XLA against jax.jit.

    python bench/linalg.py [--sizes 100 500 2000] [--repeat 7]

cold: the first call of a fresh jit (trace, differentiate, compile, first evaluation), one sample
per backend; warm: the median of `repeat` later calls.  Ratios are tidu / jax (lower is better).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tidu as td


def gp_nll(ns, sl, diag, x, y):
    """0.5 y^T K^-1 y + sum(log diag L) + n/2 log 2 pi, K an RBF kernel plus noise."""
    n = x.shape[0]

    def nll(theta):
        ell, var, noise = ns.exp(theta[0]), ns.exp(theta[1]), ns.exp(theta[2])
        d = x[:, None] - x[None, :]
        k = var * ns.exp(-0.5 * d * d / (ell * ell)) + noise * np.eye(n)
        low = ns.linalg.cholesky(k)
        alpha = sl.solve_triangular(low, y, lower=True)
        return 0.5 * ns.sum(alpha * alpha) + ns.sum(ns.log(diag(low))) + 0.5 * n * np.log(2 * np.pi)

    return nll


def timed(fn, repeat):
    t0 = time.perf_counter()
    out = fn()
    cold = time.perf_counter() - t0
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return out, cold, statistics.median(samples)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 2000])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)

    import jax
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    print("GP negative log likelihood: value and gradient wrt 3 log hyperparameters, float64")
    print(f"{'n':>5} {'':>5} {'jax.jit':>10} {'tidu cpu':>10} {'tidu xla':>10} "
          f"{'cpu/jax':>8} {'xla/jax':>8}")
    for n in args.sizes:
        rng = np.random.default_rng(0)
        x = np.sort(rng.uniform(0, 10, n))
        y = np.sin(x) + 0.1 * rng.standard_normal(n)
        theta = np.array([0.0, 0.0, -2.0])
        with jax.enable_x64(True):
            jf = jax.jit(jax.value_and_grad(gp_nll(jnp, jsl, jnp.diagonal, x, y)))
            want, j_cold, j_warm = timed(lambda: jax.block_until_ready(jf(theta)), args.repeat)
        tf = gp_nll(td, td.linalg, td.linalg.diagonal, x, y)
        res = {}
        for backend in ("cpu", "xla"):
            f = td.jit(td.value_and_grad(tf), backend=backend)
            got, cold, warm = timed(lambda: f(theta), args.repeat)
            np.testing.assert_allclose(got[0], want[0], rtol=1e-8)
            np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-8)
            res[backend] = (cold, warm)
        for label, k in (("warm", 1), ("cold", 0)):
            tj, tc, tx = (j_warm, j_cold)[1 - k], res["cpu"][k], res["xla"][k]
            print(f"{n:>5} {label:>5} {tj * 1e3:>8.2f}ms {tc * 1e3:>8.2f}ms {tx * 1e3:>8.2f}ms "
                  f"{tc / tj:>8.2f} {tx / tj:>8.2f}")


if __name__ == "__main__":
    main()
