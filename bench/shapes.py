"""The shape functions (docs/numpy.md) against jax.jit and numpy: per call medians and ratios.

    python bench/shapes.py [--quick]

(a) x[::-1, ::-1] of a (1000, 1000) float64 matrix (one Rev); (b) the gradient of a periodic
stencil energy sum((roll(x, 1) - 2x + roll(x, -1))**2) over 1e6 points; (c) the gradient of a
reflect-padded 5-point smoother of a (500, 500) image (pad + slices + tril mask).
No target of its own: the shape functions are composites, so these measure the tier-1 kernels
they lower to, next to jax.jit's fused code.
"""

from __future__ import annotations

import argparse

import numpy as np

import tidu as td
from _timing import timeit


def stencil(m):
    return lambda x: m.sum((m.roll(x, 1) - 2 * x + m.roll(x, -1)) ** 2)


def smoother(m):
    def f(x):
        p = m.pad(x, 1, mode="reflect")
        s = (p[1:-1, 1:-1] * 4 + p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]) / 8
        return m.sum(m.tril(s) ** 2)
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    a = ap.parse_args()
    rep = 3 if a.quick else 7
    n1, n2, n3 = (300, 100_000, 200) if a.quick else (1000, 1_000_000, 500)
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        jnp = jax.numpy
    except ImportError:
        jax = None
    rng = np.random.default_rng(0)
    rows = []

    x = rng.standard_normal((n1, n1))
    f_td = td.jit(lambda x: x[::-1, ::-1])
    t_td = timeit(lambda: f_td(x), rep)
    t_np = timeit(lambda: np.ascontiguousarray(x[::-1, ::-1]), rep)
    t_jx = float("nan")
    if jax:
        f_jx = jax.jit(lambda x: x[::-1, ::-1])
        t_jx = timeit(lambda: f_jx(x).block_until_ready(), rep)
    rows.append((f"(a) x[::-1, ::-1] ({n1}, {n1})", t_td, t_jx, t_np))

    v = rng.standard_normal(n2)
    g_td = td.jit(td.grad(stencil(td)))
    t_td = timeit(lambda: g_td(v), rep)
    t_jx = float("nan")
    if jax:
        g_jx = jax.jit(jax.grad(stencil(jnp)))
        t_jx = timeit(lambda: g_jx(v).block_until_ready(), rep)
    rows.append((f"(b) grad roll stencil {n2}", t_td, t_jx, float("nan")))

    im = rng.standard_normal((n3, n3))
    g_td = td.jit(td.grad(smoother(td)))
    t_td = timeit(lambda: g_td(im), rep)
    t_jx = float("nan")
    if jax:
        g_jx = jax.jit(jax.grad(smoother(jnp)))
        t_jx = timeit(lambda: g_jx(im).block_until_ready(), rep)
        np.testing.assert_allclose(g_td(im), g_jx(im), rtol=1e-10, atol=1e-12)
    rows.append((f"(c) grad pad-reflect smoother ({n3}, {n3})", t_td, t_jx, float("nan")))

    print(f"{'case':44s} {'tidu ms':>9s} {'jax.jit ms':>11s} {'numpy ms':>9s} {'tidu/jax':>9s}")
    for name, t, j, n in rows:
        print(f"{name:44s} {t * 1e3:9.3f} {j * 1e3:11.3f} {n * 1e3:9.3f} {t / j:9.2f}")


if __name__ == "__main__":
    main()
