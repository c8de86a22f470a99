"""Integer convolutions on tidu's interpreter against jax.jit, in one run (issue #34: the integer
path has no BLAS; this measures its loop kernel), with float32 on the same shapes for scale.

    python bench/conv_int.py [--repeat 7]

A 3x3 SAME convolution, NCHW, batch 8, 32x32, 32 -> 32 channels: int8 operands summed in int32
(preferred_element_type), int32, int64, and float32.  Warm: the median of `repeat` calls of a
jitted function.  Ratio: tidu / jax (lower is better).
"""

from __future__ import annotations

import argparse

import numpy as np

import tidu as td
from tidu.numpy.conv import conv_general_dilated as td_conv

from _timing import timeit


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    import jax
    jax.config.update("jax_enable_x64", True)
    from jax import lax

    rng = np.random.default_rng(0)
    print(f"{'case':<22}{'jax.jit':>10}{'tidu cpu':>11}{'ratio':>8}")
    for name, dt, pet in [("int8 -> int32", np.int8, np.int32), ("int32", np.int32, None),
                          ("int64", np.int64, None), ("float32", np.float32, None)]:
        x = rng.integers(-8, 8, (8, 32, 32, 32)).astype(dt)
        k = rng.integers(-8, 8, (32, 32, 3, 3)).astype(dt)
        jf = jax.jit(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME",
                                                           preferred_element_type=pet))
        tf = td.jit(lambda a, b: td_conv(a, b, (1, 1), "SAME", preferred_element_type=pet),
                    backend="cpu")
        want = np.asarray(jf(x, k))
        got = np.asarray(tf(x, k))
        assert got.dtype == want.dtype and np.array_equal(got, want), name
        tj = timeit(lambda: jf(x, k).block_until_ready(), repeat=args.repeat)
        tt = timeit(lambda: tf(x, k), repeat=args.repeat)
        print(f"{name:<22}{tj * 1e3:>8.2f}ms{tt * 1e3:>9.2f}ms{tt / tj:>8.2f}")


if __name__ == "__main__":
    main()
