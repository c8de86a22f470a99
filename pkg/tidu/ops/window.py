"""Windowed reductions: ReduceWindowSum, ReduceWindowMax, ReduceWindowMin (XLA's reduce_window
with an add/max/min body, as jax's reduce_window_sum_p/max_p/min_p); C++ kernel in
``cpp/include/tidu/kernels/conv.hpp``.

Padding and the holes of base dilation hold the reduction's identity (0, -inf, +inf; an
integer's extreme values), as XLA's init value.  Derivatives are jax's:

- the sum is linear; its transpose pads the cotangent (strides become interior padding) and
  sums windows again with base dilation as the stride (jax ``_reduce_window_sum_transpose_rule``);
- max/min: the tangent at each window's selected element (select-and-gather-add; the first
  maximum in window order on ties, as XLA's ``ge`` select on CPU), so the transpose scatters
  each cotangent to that element and adds (select-and-scatter-add).  For float32/float64 without
  dilation that is one SelectAndGatherAdd, whose transpose is one SelectAndScatterAdd
  (ops/select_window.py).  Otherwise it is written with Conv:
  the windows of x as patches (a Conv with an identity kernel; a reshape and a transpose where
  the windows tile x exactly, as 2x2 pooling with stride 2 does), ArgMax over the patch axis, a
  one-hot mask and the patches of the tangent, so every derivative of it differentiates again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.graph import aval
from tidu.graph.dtypes import INTS
from tidu.ops.conv import Conv, dilate_shape
from tidu.ops.core import (
    NUMERIC,
    REAL,
    A,
    BroadcastInDim,
    Constant,
    Convert,
    F,
    Mul,
    Primitive,
    ReduceSum,
    Reshape,
    Transpose,
    aval_of,
    check_dtype,
    const,
    fix,
    ints,
    lin,
)
from tidu.ops.elementwise import Compare
from tidu.ops.reductions import ArgMax, ArgMin
from tidu.ops.select_window import DTYPES as _SELECT_DTYPES
from tidu.ops.select_window import SelectAndGatherAdd
from tidu.ops.structural import Iota, Pad, Select, Slice

__all__ = ["ReduceWindowMax", "ReduceWindowMin", "ReduceWindowSum"]

_FIELDS = ("window_dimensions", "window_strides", "padding_low", "padding_high", "base_dilation",
           "window_dilation")


def window_output_shape(shape, op) -> tuple[int, ...]:
    ins = dilate_shape(shape, op.base_dilation)
    wins = dilate_shape(op.window_dimensions, op.window_dilation)
    out = []
    for d, w, s, lo, hi in zip(ins, wins, op.window_strides, op.padding_low, op.padding_high):
        n = d + lo + hi
        out.append(0 if n < w else (n - w) // s + 1)
    return tuple(out)


@dataclass(frozen=True)
class _ReduceWindow(Primitive):
    window_dimensions: tuple[int, ...]
    window_strides: tuple[int, ...]
    padding_low: tuple[int, ...]
    padding_high: tuple[int, ...]
    base_dilation: tuple[int, ...]
    window_dilation: tuple[int, ...]
    _dtypes = NUMERIC
    _what = "numeric"
    _body = ""

    def __post_init__(self):
        for f in _FIELDS:
            object.__setattr__(self, f, ints(getattr(self, f)))

    def _side_by_side(self) -> bool:
        """Whether the windows sit side by side: strides equal to the window, no padding, no
        dilation (pooling), so each element is in one window or, past the last whole window,
        none."""
        one = (1,) * len(self.window_dimensions)
        return (self.window_strides == self.window_dimensions and self.base_dilation == one
                and self.window_dilation == one and not any(self.padding_low)
                and not any(self.padding_high))

    def abstract_eval(self, x):
        n = self.name
        check_dtype(n, x, self._dtypes, self._what)
        for f in _FIELDS:
            if len(getattr(self, f)) != x.ndim:
                raise ValueError(f"{n}: {f} {getattr(self, f)} does not have one entry per axis "
                                 f"of operand shape {x.shape}")
        for f in ("window_dimensions", "window_strides", "base_dilation", "window_dilation"):
            if any(v < 1 for v in getattr(self, f)):
                raise ValueError(f"{n}: {f} {getattr(self, f)} must be positive")
        if any(p < 0 for p in self.padding_low + self.padding_high):
            raise ValueError(f"{n}: negative padding low={self.padding_low} "
                             f"high={self.padding_high}")
        return aval(window_output_shape(x.shape, self), x.dtype)

    def batch(self, b, primal_in, primal_out, bt):
        new = type(self)(*((v,) + getattr(self, f) for f, v in
                           zip(_FIELDS, (1, 1, 0, 0, 1, 1))))
        return [fix(b, new, bt[0])]

    def init(self, dtype):
        dt = np.dtype(dtype)
        if self._body == "stablehlo.add":
            return dt.type(0)
        big = np.iinfo(dt) if dt in INTS else None
        if self._body == "stablehlo.maximum":
            return big.min if big else -np.inf
        return big.max if big else np.inf

    def lower(self, lo, out, x):
        nd = len(out.shape)
        pad = [(0, 0)] * lo.nb + list(zip(self.padding_low, self.padding_high))
        pad_txt = "[" + ", ".join(f"[{p}, {q}]" for p, q in pad) + "]"
        init = lo.scalar(self.init(out.dtype), out.dtype)
        st = lo.tensor_type((), out.dtype)
        u, v, s = lo.fresh(), lo.fresh(), lo.fresh()
        region = (f"    ^bb0({u}: {st}, {v}: {st}):\n"
                  f'      {s} = "{self._body}"({u}, {v}) : ({st}, {st}) -> {st}\n'
                  f'      "stablehlo.return"({s}) : ({st}) -> ()\n    ')
        one = lo.lead(1)
        return lo.op("stablehlo.reduce_window", [x, init], out,
                     f"window_dimensions = {lo.i64_array(one + self.window_dimensions)}, "
                     f"window_strides = {lo.i64_array(one + self.window_strides)}, "
                     f"base_dilations = {lo.i64_array(one + self.base_dilation)}, "
                     f"window_dilations = {lo.i64_array(one + self.window_dilation)}, "
                     f"padding = dense<{pad_txt}> : tensor<{nd + lo.nb}x2xi64>", region=region)

    def impl(self, x):
        """numpy reference: the input dilated and padded with the identity, one reduction per
        window offset."""
        x = np.asarray(x)
        out_shape = self.abstract_eval(aval(x.shape, x.dtype)).shape
        ident = self.init(x.dtype)
        dil = np.full(dilate_shape(x.shape, self.base_dilation), ident, x.dtype)
        dil[tuple(slice(None, None, r) for r in self.base_dilation)] = x
        xp = np.pad(dil, list(zip(self.padding_low, self.padding_high)), constant_values=ident)
        y = np.full(out_shape, ident, x.dtype)
        if 0 in out_shape:
            return y
        fn = {"stablehlo.add": np.add, "stablehlo.maximum": np.maximum,
              "stablehlo.minimum": np.minimum}[self._body]
        for off in np.ndindex(*self.window_dimensions):
            sl = tuple(slice(o * r, o * r + (d - 1) * s + 1, s) for o, r, d, s in
                       zip(off, self.window_dilation, out_shape, self.window_strides))
            y = fn(y, xp[sl])
        return y


# ---- sum ----


@register
@dataclass(frozen=True)
class ReduceWindowSum(_ReduceWindow):
    """Sum over each window (lax.reduce_window with add)."""

    linear = True
    _body = "stablehlo.add"

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        x = inputs[0]
        g = ct[0]
        gs = aval_of(b, g).shape
        nd = x.ndim
        if self._side_by_side():
            # Windows side by side (average pooling): each element of x is in one window or
            # none, so the transpose repeats each cotangent over its window, (o0, w0, o1, w1,
            # ...) -> (o0 w0, o1 w1, ...), and zeros after the last whole window; one broadcast
            # where the general rule pads with interior zeros and sums windows of them again
            wd = self.window_dimensions
            mid = tuple(v for o, w in zip(gs, wd) for v in (o, w))
            y = lin(b, BroadcastInDim(mid, tuple(range(0, 2 * nd, 2))), [g], [A])
            y = lin(b, Reshape(tuple(o * w for o, w in zip(gs, wd))), [y], [A])
            rest = tuple(i - o * w for i, o, w in zip(x.shape, gs, wd))
            if any(rest):
                y = lin(b, Pad((0,) * nd, rest, (0,) * nd), [y], [A])
            return [y]
        in_d = dilate_shape(x.shape, self.base_dilation)
        win_d = dilate_shape(self.window_dimensions, self.window_dilation)
        out_d = dilate_shape(gs, self.window_strides)
        before = [w - lo - 1 for w, lo in zip(win_d, self.padding_low)]
        after = [i + w - 1 - o - bf for i, w, o, bf in zip(in_d, win_d, out_d, before)]
        g = lin(b, Pad(tuple(max(v, 0) for v in before), tuple(max(v, 0) for v in after),
                       tuple(s - 1 for s in self.window_strides)), [g], [A])
        if any(v < 0 for v in before + after):  # negative padding crops
            shp = aval_of(b, g).shape
            g = lin(b, Slice(tuple(max(-v, 0) for v in before),
                             tuple(d - max(-v, 0) for d, v in zip(shp, after)),
                             (1,) * len(shp)), [g], [A])
        op = ReduceWindowSum(self.window_dimensions, self.base_dilation, (0,) * nd, (0,) * nd,
                             (1,) * nd, self.window_dilation)
        return [lin(b, op, [g], [A])]


# ---- max / min ----


@dataclass(frozen=True)
class _Chooser(_ReduceWindow):
    _dtypes = REAL | INTS
    _what = "real"
    _arg = ArgMax

    def _tiles(self, shape) -> bool:
        """Whether the windows tile x exactly (strides equal to the window, no padding, no
        dilation, each size a multiple of the window: 2x2 pooling of an even image), so that the
        patches are a reshape and a transpose of x and no window reaches padding."""
        return self._side_by_side() and all(d % w == 0 for d, w in
                                            zip(shape, self.window_dimensions))

    def _patches(self, b, x, active: bool):
        """(1, prod(window), *out): each window of x (of any rank) on a new axis, zero where
        a window reaches padding or a hole of base dilation."""
        av = aval_of(b, x)
        kp = math.prod(self.window_dimensions)
        if self._tiles(av.shape):  # (o0, w0, o1, w1, ...) -> (w0, w1, ..., o0, o1, ...)
            nd, wd = av.ndim, self.window_dimensions
            split = tuple(v for d, w in zip(av.shape, wd) for v in (d // w, w))
            perm = tuple(range(1, 2 * nd, 2)) + tuple(range(0, 2 * nd, 2))
            flat = (1, kp) + tuple(d // w for d, w in zip(av.shape, wd))
            if active:
                y = lin(b, Transpose(perm), [lin(b, Reshape(split), [x], [A])], [A])
                return lin(b, Reshape(flat), [y], [A])
            return fix(b, Reshape(flat), fix(b, Transpose(perm), fix(b, Reshape(split), x)))
        eye = np.eye(kp, dtype=av.dtype).reshape((kp, 1) + self.window_dimensions)
        k = fix(b, Constant.of(eye))
        op = Conv(self.window_strides, self.padding_low, self.padding_high, self.base_dilation,
                  self.window_dilation)
        if active:
            x1 = lin(b, Reshape((1, 1) + av.shape), [x], [A])
            return lin(b, op, [x1, k], [A, F])
        return fix(b, op, fix(b, Reshape((1, 1) + av.shape), x), k)

    def _one_kernel(self, av) -> bool:
        """Whether the tangent is one SelectAndGatherAdd (float32/float64, no dilation)."""
        one = (1,) * av.ndim
        return (av.dtype in _SELECT_DTYPES and self.base_dilation == one
                and self.window_dilation == one)

    def linearize(self, b, primal_in, primal_out, t):
        if t[0] is None:
            return [None]
        x = primal_in[0]
        av = x.aval
        if self._one_kernel(av):
            op = SelectAndGatherAdd(self.window_dimensions, self.window_strides, self.padding_low,
                                    self.padding_high, self._arg is ArgMax)
            return [lin(b, op, [t[0], x], [A, F])]
        px = self._patches(b, x, False)
        pav = aval_of(b, px)
        if not self._tiles(av.shape):  # windows reaching padding: those places never chosen
            valid = self._patches(b, const(b, 1, av), False)
            inside = fix(b, Compare("GT"), valid, const(b, 0.5, pav))
            worst = const(b, -np.inf if self._arg is ArgMax else np.inf, pav)
            px = fix(b, Select(), inside, px, worst)
        idx = fix(b, self._arg(1, "int64"), px)
        out_rank = pav.ndim
        keep = (0,) + tuple(range(2, out_rank))
        idx = fix(b, BroadcastInDim(pav.shape, keep), idx)
        pos = fix(b, Iota(pav.shape, "int64", 1))
        mask = fix(b, Convert(av.dtype.name), fix(b, Compare("EQ"), pos, idx))
        pt = self._patches(b, t[0], True)
        out = lin(b, ReduceSum((1,)), [lin(b, Mul(), [mask, pt], [F, A])], [A])
        return [lin(b, Reshape(aval_of(b, out).shape[1:]), [out], [A])]


@register
@dataclass(frozen=True)
class ReduceWindowMax(_Chooser):
    """Maximum over each window (lax.reduce_window with max)."""

    _body = "stablehlo.maximum"
    _arg = ArgMax


@register
@dataclass(frozen=True)
class ReduceWindowMin(_Chooser):
    """Minimum over each window (lax.reduce_window with min)."""

    _body = "stablehlo.minimum"
    _arg = ArgMin

