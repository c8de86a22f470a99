"""vmap against jax in one run: (a) per-example gradients of a 2-layer tanh MLP (batch 256, width
128, float32) against jax.jit(jax.vmap(jax.grad)); (b) the Jacobian of an n-vector function by
jacrev and jacfwd (built on vmap) for n = 100, 1000, 3000: cold (a function never seen before in
the process: trace, transform, compile and first call) and warm per call, against
jax.jit(jax.jacrev) / jacfwd.  Medians and tidu/jax ratios.

    python bench/vmap.py [--quick] [--backend cpu|xla|auto]

Targets (issue 13): cold build roughly flat in n (the program no longer grows with n); per call
within 1.2x of jax.jit.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tidu as td
from _timing import timeit


def median_time(fn, repeat):
    return timeit(fn, repeat=repeat, warmup=False)


def per_example(jax, jnp, backend, repeat):
    rng = np.random.default_rng(0)
    d, w, n = 32, 128, 256
    params = [(rng.standard_normal((d, w)) * 0.2).astype("float32"), np.zeros(w, "float32"),
              (rng.standard_normal((w, 1)) * 0.2).astype("float32"), np.zeros(1, "float32")]
    xs = rng.standard_normal((n, d)).astype("float32")
    ys = rng.standard_normal((n, 1)).astype("float32")

    def loss(ns):
        def f(p, x, y):
            w1, b1, w2, b2 = p
            return ns.sum((ns.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)
        return f

    t0 = time.perf_counter()
    f_td = td.jit(td.vmap(td.grad(loss(td)), in_axes=(None, 0, 0)), backend=backend)
    got = f_td(params, xs, ys)
    cold_td = time.perf_counter() - t0
    t0 = time.perf_counter()
    f_jx = jax.jit(jax.vmap(jax.grad(loss(jnp)), in_axes=(None, 0, 0)))
    want = jax.block_until_ready(f_jx(params, xs, ys))
    cold_jx = time.perf_counter() - t0
    for g, h in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(h), rtol=2e-3, atol=2e-4)
    t_td = median_time(lambda: f_td(params, xs, ys), repeat)
    t_jx = median_time(lambda: jax.block_until_ready(f_jx(params, xs, ys)), repeat)
    print(f"(a) per-example grads, MLP {d}-{w}-1, batch {n}, float32: cold tidu {cold_td * 1e3:.0f} "
          f"ms, jax {cold_jx * 1e3:.0f} ms; warm per call tidu {t_td * 1e6:.0f} us, jax.jit "
          f"{t_jx * 1e6:.0f} us (tidu/jax {t_td / t_jx:.2f}x)  [target <= 1.2x]")


def jacobians(jax, jnp, backend, sizes, repeat):
    for n in sizes:
        x = np.random.default_rng(n).standard_normal(n)
        for name, tf, jf in (("jacrev", td.jacrev, jax.jacrev), ("jacfwd", td.jacfwd, jax.jacfwd)):
            # a new function object per run: nothing cached from an earlier size or mode
            f_td = eval("lambda x: td.tanh(x) * td.sum(x ** 2) + x[::1] * 0.5", {"td": td})
            f_jx = eval("lambda x: jnp.tanh(x) * jnp.sum(x ** 2) + x * 0.5", {"jnp": jnp})
            t0 = time.perf_counter()
            j_td = td.jit(tf(f_td), backend=backend)
            got = j_td(x)
            cold_td = time.perf_counter() - t0
            t0 = time.perf_counter()
            j_jx = jax.jit(jf(f_jx))
            want = jax.block_until_ready(j_jx(x))
            cold_jx = time.perf_counter() - t0
            np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-10)
            (prog, *_), = j_td.cache.values()
            t_td = median_time(lambda: j_td(x), repeat)
            t_jx = median_time(lambda: jax.block_until_ready(j_jx(x)), repeat)
            print(f"(b) {name} n={n:5d}: {prog.n_instructions} instructions ({prog.backend}); "
                  f"cold tidu {cold_td * 1e3:7.1f} ms, jax {cold_jx * 1e3:7.1f} ms; warm tidu "
                  f"{t_td * 1e3:8.3f} ms, jax.jit {t_jx * 1e3:8.3f} ms (tidu/jax {t_td / t_jx:.2f}x)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--backend", default="auto", choices=["cpu", "xla", "auto"])
    a = ap.parse_args()
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    repeat = 5 if a.quick else 21
    per_example(jax, jnp, a.backend, repeat)
    jacobians(jax, jnp, a.backend, [100, 1000] if a.quick else [100, 1000, 3000], repeat)


if __name__ == "__main__":
    main()
