"""Convolutional training steps, float32, in one run: tidu's default backend, its interpreter and
XLA against jax.jit (and torch, if installed).

    python bench/conv.py [--repeat 7] [--quick]

- LeNet-5-like: batch 64, 1x28x28 input, conv 5x5 (6, SAME) - relu - 2x2 max pool - conv 5x5
  (16, VALID) - relu - 2x2 average pool - dense 120 - 84 - 10, softmax cross-entropy; the
  gradient wrt every parameter (value and grad).  Pools are reduce_window (one instruction each).
- ResNet-style block: batch 16, 64 channels, 32x32, conv 3x3 - batch norm - relu - conv 3x3 -
  batch norm + skip - relu, a squared loss; the gradient wrt both kernels.

cold: the first call of a fresh jit (trace, differentiate, compile, first evaluation), each in a
fresh process (bench/conv_first.py's child: it imports jax and runs one tiny jit of each library
first, so that one-time process costs, jax's CPU client and tidu's BLAS load, count in neither).
In one process the column run first paid for buffers (im2col patches, OpenBLAS's) that the later
columns then reused, which made the default column's first call look 2x the interpreter's; warm: the median of `repeat` later calls.  The default backend (tiered
execution, docs/xla.md) is called until its tier is decided for good (at most `--settle`
seconds, as bench/tensor.py does) before its warm figure: without that its warm calls are the
interpreter's first ones, counting towards the XLA compile.  Ratios are tidu / jax (lower is
better).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import tidu as td
from tidu.numpy.conv import conv_general_dilated as td_conv
from tidu.numpy.conv import reduce_window as td_rw

from _timing import settle, timed
from conv_first import first_call


def lenet(m, conv, rw):
    w2x2 = (1, 1, 2, 2)

    def loss(params, x, y):
        k1, k2, w1, w2, w3 = params
        h = rw(m.maximum(conv(x, k1, (1, 1), "SAME"), 0.0), -np.inf, "max", w2x2, w2x2, "VALID")
        h = rw(m.maximum(conv(h, k2, (1, 1), "VALID"), 0.0), 0.0, "add", w2x2, w2x2, "VALID")
        h = h * 0.25
        h = m.reshape(h, (h.shape[0], -1))
        h = m.maximum(h @ w1, 0.0)
        h = m.maximum(h @ w2, 0.0)
        z = h @ w3
        z = z - m.max(z, axis=1, keepdims=True)
        logp = z - m.log(m.sum(m.exp(z), axis=1, keepdims=True))
        return -m.mean(m.sum(logp * y, axis=1))
    return loss


def lenet_data(rng):
    f = np.float32
    params = [rng.standard_normal((6, 1, 5, 5)).astype(f) * f(0.2),
              rng.standard_normal((16, 6, 5, 5)).astype(f) * f(0.08),
              rng.standard_normal((16 * 5 * 5, 120)).astype(f) * f(0.05),
              rng.standard_normal((120, 84)).astype(f) * f(0.09),
              rng.standard_normal((84, 10)).astype(f) * f(0.1)]
    x = rng.standard_normal((64, 1, 28, 28)).astype(f)
    y = np.eye(10, dtype=f)[rng.integers(0, 10, 64)]
    return params, x, y


def resblock(m, conv, rw):
    def bn(h):
        mu = m.mean(h, axis=(0, 2, 3), keepdims=True)
        var = m.mean((h - mu) ** 2, axis=(0, 2, 3), keepdims=True)
        return (h - mu) / m.sqrt(var + 1e-5)

    def loss(params, x):
        k1, k2 = params
        h = m.maximum(bn(conv(x, k1, (1, 1), "SAME")), 0.0)
        h = m.maximum(bn(conv(h, k2, (1, 1), "SAME")) + x, 0.0)
        return m.mean(h * h)
    return loss


def resblock_data(rng):
    f = np.float32
    params = [rng.standard_normal((64, 64, 3, 3)).astype(f) * f(0.04),
              rng.standard_normal((64, 64, 3, 3)).astype(f) * f(0.04)]
    return params, rng.standard_normal((16, 64, 32, 32)).astype(f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--settle", type=float, default=60.0,
                    help="seconds the default backend may take to settle its tier before its "
                         "warm figure")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeat = 3

    import jax
    import jax.numpy as jnp
    from jax import lax

    # one tiny jit of each first: one-time process costs (jax's CPU client, tidu's BLAS load)
    # count in neither library's cold figure
    small = np.ones((4, 4), np.float32)
    jax.block_until_ready(jax.jit(lambda a: a @ a)(small))
    td.jit(lambda a: a @ a)(small)
    rng = np.random.default_rng(0)
    jconv = lambda x, k, s, p: lax.conv_general_dilated(x, k, s, p)
    tconv = lambda x, k, s, p: td_conv(x, k, s, p)
    jops = {"max": (lax.max, -np.inf), "add": (lax.add, 0.0)}
    jrw = lambda x, init, c, wd, st, p: lax.reduce_window(x, jops[c][1], jops[c][0], wd, st, p)
    cases = [("LeNet-5 step, batch 64", lenet, lenet_data(rng)),
             ("ResNet block, 16x64x32x32", resblock, resblock_data(rng))]
    print(f"load average {os.getloadavg()[0]:.1f} (other work on the machine skews every figure)")
    print(f"{'':28} {'':5} {'jax.jit':>10} {'tidu':>10} {'tidu cpu':>10} {'tidu xla':>10}"
          f" {'torch':>10}   ratios tidu/jax (default, cpu, xla)")
    for name, model, data in cases:
        rows, settled = {}, ""
        jf = jax.jit(jax.value_and_grad(model(jnp, jconv, jrw)))
        _, _, jwarm = timed(lambda: jax.block_until_ready(jf(*data)), args.repeat)
        key = "lenet" if name.startswith("LeNet") else "resnet"
        rows["jax"] = (first_call(key, "jax")["first_wall"], jwarm)
        want = jf(*data)
        for label, backend in (("tidu", None), ("cpu", "cpu"), ("xla", "xla")):
            kw = {} if backend is None else {"backend": backend}
            td.clear_caches()  # cold means never seen in this process, for each backend
            tf = td.jit(td.value_and_grad(model(td, tconv, td_rw)), **kw)
            if backend is None:  # the first call, then the tier settled, then the warm calls
                got = tf(*data)
                settled = settle(tf, lambda: tf(*data), args.settle)
                warm = timed(lambda: tf(*data), args.repeat)[2]
            else:
                got, _, warm = timed(lambda: tf(*data), args.repeat)
            cold = first_call(key, backend or "default")["first_wall"]  # in a fresh process
            np.testing.assert_allclose(got[0], want[0], rtol=2e-3)
            rows[label] = (cold, warm)
        torch_row = ("-", "-")
        try:
            import torch  # noqa: F401
            torch_row = _torch(name, data, args.repeat)
        except ImportError:
            pass
        for i, what in enumerate(("cold", "warm")):
            vals = [rows[k][i] * 1e3 for k in ("jax", "tidu", "cpu", "xla")]
            tv = torch_row[i] if isinstance(torch_row[i], str) else f"{torch_row[i] * 1e3:.2f}"
            ratios = ", ".join(f"{v / vals[0]:.2f}" for v in vals[1:])
            print(f"{name if i == 0 else '':28} {what:5} " +
                  " ".join(f"{v:10.2f}" for v in vals) + f" {tv:>10}   {ratios}  (ms)")
        print(f"{'':28} default: {settled}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


def _torch(name, data, repeat):
    import torch
    import torch.nn.functional as F
    tensors = lambda xs: [torch.tensor(np.asarray(x), requires_grad=True) for x in xs]

    def step():
        if name.startswith("LeNet"):
            params, x, y = data
            k1, k2, w1, w2, w3 = tensors(params)
            h = F.max_pool2d(F.relu(F.conv2d(torch.tensor(x), k1, padding=2)), 2)
            h = F.avg_pool2d(F.relu(F.conv2d(h, k2)), 2).reshape(64, -1)
            z = F.relu(F.relu(h @ w1) @ w2) @ w3
            loss = -(F.log_softmax(z, 1) * torch.tensor(y)).sum(1).mean()
            loss.backward()
        else:
            params, x = data
            k1, k2 = tensors(params)
            xt = torch.tensor(x)

            def bn(h):
                mu = h.mean((0, 2, 3), keepdim=True)
                return (h - mu) / torch.sqrt(((h - mu) ** 2).mean((0, 2, 3), keepdim=True) + 1e-5)
            h = F.relu(bn(F.conv2d(xt, k1, padding=1)))
            h = F.relu(bn(F.conv2d(h, k2, padding=1)) + xt)
            (h * h).mean().backward()
    _, cold, warm = timed(step, repeat)
    return cold, warm


if __name__ == "__main__":
    main()
