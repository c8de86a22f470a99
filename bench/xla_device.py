"""The XLA backend on one device (a GPU where present) against jax.jit on the same device.

    python bench/xla_device.py [--device gpu] [--quick]

(1) MLP gradient: grad of sum(tanh(X @ W1) @ W2) wrt (W1, W2), n x n, float32 and float64;
(2) transformer block (layer norm, 4-head causal attention by einsum, gelu MLP): loss and
    gradient wrt every parameter, float32;
(3) a large eval_batch: a 20-op elementwise scalar program over 1e6 points, prog.eval_batch
    (backend="xla") against jax.jit(jax.vmap(f)).

Every tidu figure is td.jit(..., backend="xla", device=DEVICE); jax runs on jax.devices(DEVICE)[0].
Arguments are host numpy arrays for both (each call moves them to the device and back). "cold"
is the first call (trace, lower, XLA compile, first run), "warm" the median of later calls.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import tidu as td

sys.path.insert(0, str(Path(__file__).parent))
from _timing import timed, timeit  # noqa: E402


def cold_then_warm(fn, args, repeat, sync=lambda r: r):
    return timed(lambda: sync(fn(*args)), repeat)


def row(name, jc, jw, tc, tw):
    print(f"{name:>34} {jc * 1e3:>9.1f} {tc * 1e3:>9.1f} {jw * 1e3:>9.3f} {tw * 1e3:>9.3f} "
          f"{tw / jw:>7.2f}")


def on_device(dw, jw):
    """tidu's warm call with jax Arrays on the device in (its outputs stay there, as jax.jit's
    do): the like-for-like comparison, without the host round trip of numpy in and out."""
    print(f"{'  tidu, device arrays in and out':>34} {'':>9} {'':>9} {'':>9} {dw * 1e3:>9.3f} "
          f"{dw / jw:>7.2f}")


def mlp_loss(ns):
    return lambda w1, w2, x: ns.sum(ns.tanh(x @ w1) @ w2)


def transformer_loss(ns, nn):
    def layer_norm(x, g, b):
        mu = ns.mean(x, axis=-1, keepdims=True)
        var = ns.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) / ns.sqrt(var + 1e-5) * g + b

    def loss(p, x):
        B, T, D = x.shape
        H = 4
        h = layer_norm(x, p["g1"], p["b1"])
        q = (h @ p["wq"]).reshape(B, T, H, D // H)
        k = (h @ p["wk"]).reshape(B, T, H, D // H)
        v = (h @ p["wv"]).reshape(B, T, H, D // H)
        s = ns.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(D // H)
        mask = np.tril(np.ones((T, T), bool))
        s = ns.where(mask, s, -1e9)
        a = nn.softmax(s, axis=-1)
        o = ns.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, T, D)
        x = x + o @ p["wo"]
        h = layer_norm(x, p["g2"], p["b2"])
        x = x + nn.gelu(h @ p["w1"]) @ p["w2"]
        return ns.mean(x ** 2)
    return loss


def transformer_params(D, dt):
    r = np.random.default_rng(0)
    m = lambda a, b: (r.standard_normal((a, b)) / np.sqrt(a)).astype(dt)  # noqa: E731
    return {"g1": np.ones(D, dt), "b1": np.zeros(D, dt), "g2": np.ones(D, dt),
            "b2": np.zeros(D, dt), "wq": m(D, D), "wk": m(D, D), "wv": m(D, D), "wo": m(D, D),
            "w1": m(D, 4 * D), "w2": m(4 * D, D)}


def chain(ns):
    def f(x):
        for i in range(20):
            x = ns.sin(x) * 0.9 if i % 2 else ns.tanh(x) + 0.1
        return x
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    import jax
    import jax.numpy as jnp

    dev = jax.devices(a.device)[0]
    print(f"device: {dev} ({dev.device_kind}); jax {jax.__version__}")
    sync = jax.block_until_ready
    repeat = 5 if a.quick else 20
    print(f"{'program':>34} {'jax cold':>9} {'td cold':>9} {'jax warm':>9} {'td warm':>9} "
          f"{'td/jax':>7}   (ms; warm = median)")

    for n in ([256] if a.quick else [512, 2048]):
        for dt in ("float32", "float64"):
            r = np.random.default_rng(0)
            w1, w2, x = ((r.standard_normal((n, n)) / np.sqrt(n)).astype(dt) for _ in range(3))
            with jax.enable_x64(dt == "float64"), jax.default_device(dev):
                jg = jax.jit(jax.grad(mlp_loss(jnp), argnums=(0, 1)))
                want, jc, jw = cold_then_warm(jg, (w1, w2, x), repeat, sync)
            tg = td.jit(td.grad(mlp_loss(td), argnums=(0, 1)), backend="xla", device=a.device)
            got, tc, tw = cold_then_warm(tg, (w1, w2, x), repeat)
            if dt == "float64":
                for g, w in zip(got, want):
                    np.testing.assert_allclose(g, np.asarray(w), rtol=1e-9, atol=1e-9)
            else:  # a GPU may multiply float32 in TF32: compare both to float64
                with jax.enable_x64(True), jax.default_device(dev):
                    ref = jax.jit(jax.grad(mlp_loss(jnp), argnums=(0, 1)))(
                        *(v.astype("float64") for v in (w1, w2, x)))
                err = lambda gs: max(float(np.max(np.abs(np.asarray(g) - np.asarray(r))))  # noqa: E731
                                     for g, r in zip(gs, ref))
                e_td, e_jax = err(got), err(want)
                print(f"{'':>34} float32 max abs error vs float64: tidu {e_td:.1e}, "
                      f"jax {e_jax:.1e}")
                assert e_td <= 4 * e_jax + 1e-5, (e_td, e_jax)
            row(f"MLP grad n={n} {dt}", jc, jw, tc, tw)
            with jax.enable_x64(dt == "float64"):
                on_dev = [jax.device_put(v, dev) for v in (w1, w2, x)]
            _, _, dw = cold_then_warm(tg, on_dev, repeat, sync)
            on_device(dw, jw)

    for B, T, D in ([(8, 64, 64)] if a.quick else [(8, 64, 64), (16, 256, 256)]):
        p = transformer_params(D, "float32")
        x = np.random.default_rng(1).standard_normal((B, T, D)).astype("float32")
        with jax.default_device(dev):
            jg = jax.jit(jax.value_and_grad(transformer_loss(jnp, jax.nn)))
            (jv, jgr), jc, jw = cold_then_warm(jg, (p, x), repeat, sync)
        tg = td.jit(td.value_and_grad(transformer_loss(td, td.nn)), backend="xla",
                    device=a.device)
        (tv, tgr), tc, tw = cold_then_warm(tg, (p, x), repeat)
        np.testing.assert_allclose(tv, float(jv), rtol=1e-3)
        for k in p:  # float32, possibly TF32 products on a GPU
            np.testing.assert_allclose(tgr[k], np.asarray(jgr[k]), rtol=2e-2, atol=2e-3)
        row(f"transformer B={B} T={T} d={D} f32", jc, jw, tc, tw)
        on_dev = jax.device_put((p, x), dev)
        _, _, dw = cold_then_warm(tg, on_dev, repeat, sync)
        on_device(dw, jw)

    npts = 100_000 if a.quick else 1_000_000
    pts = np.linspace(-1, 1, npts)
    with jax.enable_x64(True), jax.default_device(dev):
        jf = jax.jit(jax.vmap(chain(jnp)))
        want, jc, jw = cold_then_warm(jf, (pts,), repeat, sync)
    F = td.build(chain(td), x=td.spec((), "float64"))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="xla",
                      device=a.device)
    t0 = time.perf_counter()
    (got,) = prog.eval_batch([pts], backend="xla", devices=1)
    tc = time.perf_counter() - t0
    tw = timeit(lambda: prog.eval_batch([pts], backend="xla", devices=1), repeat, warmup=False)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-14)
    row(f"eval_batch 20-op chain, {npts:.0e} pts", jc, jw, tc, tw)
    with jax.enable_x64(True):
        on_dev = jax.device_put(pts, dev)
        dw = timeit(lambda: sync(prog.eval_batch([on_dev], backend="xla", devices=1)), repeat)
    on_device(dw, jw)


if __name__ == "__main__":
    main()
