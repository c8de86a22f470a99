"""Gaussian-process negative log likelihood, value and gradient wrt (lengthscale, variance, noise),
float64, in one run: tidu's interpreter and tidu through XLA against jax.jit; then cholesky, solve,
eigh and svd of an n x n matrix (default 512), forward and gradient, against jax.jit and numpy/scipy.

    python bench/linalg.py [--sizes 100 500 2000] [--repeat 7] [--matrix 512] [--quick]

--quick: sizes 100 500, matrix 256, 3 repeats.

cold: the first call of a fresh jit (trace, differentiate, compile, first evaluation), one sample
per backend; warm: the median of `repeat` later calls.  Ratios are tidu / jax (lower is better).
"""

from __future__ import annotations

import argparse

import numpy as np

import tidu as td
from tidu.testing import gp_nll  # the same function the tests check

from _timing import timed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 2000])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--matrix", type=int, default=512)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.repeat, args.matrix = [100, 500], 3, 256

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
    factorisations(args.matrix, args.repeat)


def factorisations(n: int, repeat: int) -> None:
    """Forward and gradient of cholesky / solve / eigh / svd of one n x n float64 matrix."""
    import jax
    import jax.numpy as jnp
    import scipy.linalg as sl

    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n)) / np.sqrt(n) + 2 * np.eye(n)
    spd = a @ a.T + np.eye(n)
    b = rng.standard_normal((n, 4))
    cases = {  # name: (tidu/jax function of a namespace, input, numpy/scipy forward)
        "cholesky": (lambda ns: ns.linalg.cholesky, spd, lambda m: sl.cholesky(m, lower=True)),
        "solve": (lambda ns: lambda m: ns.linalg.solve(m, b), a, lambda m: sl.solve(m, b)),
        "eigh": (lambda ns: lambda m: ns.linalg.eigh(m)[0], spd, lambda m: sl.eigh(m)[0]),
        "svd": (lambda ns: lambda m: ns.linalg.svd(m, compute_uv=False), a,
                lambda m: np.linalg.svd(m, compute_uv=False)),
    }
    print(f"\n{n}x{n} float64, warm medians of {repeat}; ratios tidu / jax.jit (lower is better)")
    print(f"{'op':>9} {'':>5} {'numpy':>9} {'jax.jit':>9} {'tidu cpu':>9} {'tidu xla':>9} "
          f"{'cpu/jax':>8} {'xla/jax':>8}")
    for name, (fn, x, ref) in cases.items():
        loss = lambda ns: (lambda m: ns.sum(ns.tanh(fn(ns)(m))))  # noqa: E731
        for label in ("fwd", "grad"):
            with jax.enable_x64(True):
                jf = jax.jit(fn(jnp) if label == "fwd" else jax.grad(loss(jnp)))
                want, _, tj = timed(lambda: jax.block_until_ready(jf(x)), repeat)
            tn = timed(lambda: ref(x), repeat)[2] if label == "fwd" else float("nan")
            row = []
            for backend in ("cpu", "xla"):
                tf = td.jit(fn(td) if label == "fwd" else td.grad(loss(td)), backend=backend)
                got, _, t = timed(lambda: tf(x), repeat)
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
                row.append(t)
            print(f"{name:>9} {label:>5} {tn * 1e3:>7.2f}ms {tj * 1e3:>7.2f}ms "
                  f"{row[0] * 1e3:>7.2f}ms {row[1] * 1e3:>7.2f}ms {row[0] / tj:>8.2f} "
                  f"{row[1] / tj:>8.2f}")


if __name__ == "__main__":
    main()
