"""Issue 18's vocabulary bench in one run: (a) a 20-operand tensor-network contraction with
td.einsum against jnp.einsum under jax.jit and np.einsum(optimize=True), per call and path cost;
(b) ``x[idx]`` gather and ``.at[idx].add`` scatter of 1e6 elements against jax.jit and numpy;
(c) the softmax cross-entropy gradient of (1024, 1000) logits against jax.jit; (d) issue 32's FFT
family (fft of 2^16 complex, rfft of 1e6 reals, fft2 of 512 x 512, in 32 and 64 bits) against
jax.jit; (e) issue 32's new reductions and searches (quantile, median, the NaN-aware reductions,
cov, corrcoef, histogram, bincount, searchsorted, interp, ...) against jax.jit in x64.  Each part
prints medians and ratios
(tidu / peer; lower is better); targets: within 1.2x of jax.jit on (b) and (c), the same
contraction cost (flops) as jax's path on (a), at least jax.jit's speed on (d) and (e).

    python bench/vocab.py [--quick] [--only a|b|c|d|e] [--clock wall|cpu]

Each part is also a script of its own with more options: bench/vocab_einsum.py (a),
bench/vocab_gather.py (b), bench/vocab_softmax.py (c), bench/vocab_fft.py (d),
bench/numpy_stats.py (e).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy_stats  # noqa: E402
import vocab_einsum  # noqa: E402
import vocab_fft  # noqa: E402
import vocab_gather  # noqa: E402
import vocab_softmax  # noqa: E402

def fft_both(argv):
    """Part (d) in float32/complex64, then float64/complex128 (issue 32's target covers both)."""
    vocab_fft.main(argv)
    vocab_fft.main([*argv, "--float64"])


PARTS = {"a": ("tensor-network einsum", vocab_einsum.main),
         "b": ("gather and scatter-add", vocab_gather.main),
         "c": ("softmax cross-entropy gradient", vocab_softmax.main),
         "d": ("FFT family", fft_both),
         "e": ("issue 32's reductions and searches", numpy_stats.main)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats in every part")
    ap.add_argument("--only", choices=sorted(PARTS), action="append",
                    help="run only this part (repeatable)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="parts (d) and (e): wall time, or the process's CPU time (all threads; a "
                         "loaded machine stretches it far less)")
    args = ap.parse_args(argv)
    for key in args.only or sorted(PARTS):
        title, run = PARTS[key]
        print(f"\n== ({key}) {title}")
        run((["--quick"] if args.quick else []) + (["--clock", args.clock] if key in "de" else []))


if __name__ == "__main__":
    main()
