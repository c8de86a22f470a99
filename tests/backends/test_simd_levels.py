"""Kernels compiled once per instruction set (fastmath.hpp's isa(): the baseline, AVX2, AVX-512)
give the same values on each: every variant the CPU has is run in a subprocess with TIDU_SIMD
set, against numpy's values.  Covered here: the shifts (a shift amount per element, negative and
past the bit width included) and the sum / max / min reductions over every axis pattern their
loops tell apart (a contiguous row, short rows, kept columns, short kept rows, a middle axis),
with NaN where numpy propagates it; and the comparisons, selects, integer arithmetic, max/min,
conversions and bitwise and/or/xor (of integers and bools) that chains run block by block (and
whole, for a small array)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

# The inputs, one source for the subprocess (tidu's values) and this process (numpy's): each
# item is (kind, arrays, extra), kind "shift", "reduce" (extra: the axis) or "elementwise".
_INPUTS = r"""
import numpy as np


def inputs():
    rng = np.random.default_rng(3)
    for dt in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, 300, dtype=dt, endpoint=True)
        a[:4] = [info.min, info.max, 0, 1 if info.min == 0 else -1]
        # amounts -3 .. bits + 2 (signed), 0 .. bits + 2 (unsigned), cycled over 300 values
        lo = -3 if info.min else 0
        s = (np.arange(300) % (info.bits + 3 - lo) + lo).astype(dt)
        yield "shift", (a, s), None
    cases = [((37, 40), 0), ((37, 40), 1), ((37, 5), 1), ((8, 20, 5), 1), ((4, 6, 7), (0, 2)),
             ((3, 1000), 1), ((1000,), 0), ((5, 3, 300), 1)]
    for shape, axis in cases:
        for dt in ("float32", "float64", "int32", "int64", "uint8", "int8"):
            if dt.startswith("float"):
                x = rng.standard_normal(shape).astype(dt)
                x.flat[rng.integers(0, x.size, max(1, x.size // 50))] = np.nan
            else:
                info = np.iinfo(dt)
                x = rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
            yield "reduce", (x,), axis
    for dt in ("float64", "float32", "int64", "int32", "int8", "uint32", "uint64"):
        # 20,000 elements: chains run these block by block (run_block), as 100 run whole (run_instr)
        for n in (20000, 100):
            if dt.startswith("float"):
                a, b = rng.standard_normal((2, n)).astype(dt) * 50
                a[::97] = np.nan
            else:
                info = np.iinfo(dt)
                a, b = rng.integers(info.min, info.max, (2, n), dtype=dt, endpoint=True)
                b[::5] = a[::5]
            yield "elementwise", (a, b), None
"""

_SCRIPT = _INPUTS + r"""
import sys
import tidu as td

outs = []
for kind, arrays, axis in inputs():
    if kind == "shift":
        f = lambda a, s: [td.lax.shift_left(a, s), td.lax.shift_right_logical(a, s),
                          td.lax.shift_right_arithmetic(a, s)]
    elif kind == "reduce":
        f = lambda x: [td.sum(x, axis=axis, dtype=x.dtype), td.max(x, axis=axis), td.min(x, axis=axis)]
    else:
        dt = arrays[0].dtype
        f = lambda a, b: [a < b, a >= b, a == b, a != b, td.where(a < b, a, b), td.maximum(a, b),
                          td.minimum(a, b), a + b, a - b, a * b, (a < b).astype(dt), a.astype("float64"),
                          a.astype("int32"), a.astype("uint8"), a.astype("bool"), td.sum(a * b, dtype=dt)]
        if dt.kind in "iu":
            g = f
            f = lambda a, b: g(a, b) + [a & b, a | b, a ^ b, (a < b) ^ (a > 0)]
    outs += td.jit(f, backend="cpu")(*arrays)
np.savez(sys.argv[1], *[np.asarray(o) for o in outs])
"""


class Inexact:
    """A float sum: tidu adds in interleaved lanes, numpy pairwise, so close, not equal."""

    def __init__(self, value):
        self.value = np.asarray(value)


def _conv(v, to):
    """XLA's conversion: NaN -> 0, floats saturate into an integer dtype."""
    if v.dtype.kind == "f" and np.dtype(to).kind in "iu":
        info = np.iinfo(to)
        v = np.clip(np.nan_to_num(v, nan=0.0), info.min, info.max)
    return v.astype(to)


def _reference():
    """The same values by numpy (shifts as XLA defines them past the bit width)."""
    ns = {}
    exec(_INPUTS, ns)  # noqa: S102 - this module's own source, shared with the subprocess
    outs = []
    for kind, arrays, axis in ns["inputs"]():
        if kind == "shift":
            a, s = arrays
            bits = np.iinfo(a.dtype).bits
            u = a.view(f"uint{bits}")
            sv = s.astype(np.int64)
            inside = (sv >= 0) & (sv < bits)
            sc = np.where(inside, sv, 0).astype(u.dtype)
            signed = a.view(f"int{bits}")
            outs += [np.where(inside, u << sc, 0).astype(u.dtype).view(a.dtype),
                     np.where(inside, u >> sc, 0).astype(u.dtype).view(a.dtype),
                     (signed >> np.where(inside, sv, bits - 1).astype(signed.dtype)).view(a.dtype)]
        elif kind == "reduce":
            (x,) = arrays
            total = np.sum(x, axis=axis, dtype=x.dtype)
            outs += [Inexact(total) if x.dtype.kind == "f" else total, np.max(x, axis=axis),
                     np.min(x, axis=axis)]
        else:
            a, b = arrays
            dt = a.dtype
            with np.errstate(all="ignore"):
                total = np.sum(a * b, dtype=dt)
                outs += [a < b, a >= b, a == b, a != b, np.where(a < b, a, b), np.maximum(a, b),
                         np.minimum(a, b), a + b, a - b, a * b, (a < b).astype(dt), _conv(a, "float64"),
                         _conv(a, "int32"), _conv(a, "uint8"), a.astype(bool),
                         Inexact(total) if dt.kind == "f" else total]
                if dt.kind in "iu":
                    outs += [a & b, a | b, a ^ b, (a < b) ^ (a > 0)]
    return outs


@pytest.mark.parametrize("level", ["generic", "avx2", "avx512"])
def test_shifts_and_reductions_per_simd_level(tmp_path, level):
    out = tmp_path / f"{level}.npz"
    res = subprocess.run([sys.executable, "-c", _SCRIPT, str(out)], capture_output=True, timeout=300,
                         text=True, env=dict(os.environ, TIDU_SIMD=level))
    assert res.returncode == 0, res.stderr[-2000:]
    with np.load(out) as f:
        got = [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]
    want = _reference()
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        exact = not isinstance(w, Inexact)
        w = w if exact else w.value
        assert g.dtype == w.dtype, (i, g.dtype, w.dtype)
        if exact:  # integers, max/min, compares, selects, conversions: the same bits
            np.testing.assert_array_equal(g, w, err_msg=f"output {i} at TIDU_SIMD={level}")
        else:
            np.testing.assert_allclose(g, w, rtol=2e-6 if g.dtype == np.float32 else 1e-13,
                                       atol=1e-3 if g.dtype == np.float32 else 1e-10, err_msg=str(i))
