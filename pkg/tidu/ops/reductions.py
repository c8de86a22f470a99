"""Reductions other than ReduceSum (which is in ``core``): ReduceMax, ReduceMin, ReduceProd,
ReduceAnd, ReduceOr, ArgMax, ArgMin.

Order is numpy's (see ``sorting``): NaN propagates through min and max and the first NaN is both
argmax and argmin.  Derivatives are jax's: the tangent of the max/min, ties sharing it equally;
prod's is sum_i (product of the others) dx_i, the products of the others from exclusive prefix
and suffix products (Cumprod) -- no division, so exact at zeros.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.backends.xla.hlo import Value
from tidu.graph import aval
from tidu.graph.dtypes import kind_of
from tidu.ops.core import (
    BOOL,
    INTS,
    NUMERIC,
    REAL,
    A,
    BroadcastInDim,
    Convert,
    Mul,
    Primitive,
    ReduceSum,
    Reshape,
    Transpose,
    check_axes,
    check_dtype,
    fix,
    ints,
    lin,
    scale,
    shifted,
)
from tidu.ops.elementwise import Compare, Div
from tidu.ops.sorting import (
    Cumprod,
    _check_axis,
    _hlo_bin,
    _hlo_cmp,
    _hlo_un,
    _region,
    _shift,
    _type_dtype,
    _type_shape,
)
from tidu.ops.structural import Iota

__all__ = ["ReduceMax", "ReduceMin", "ReduceProd", "ReduceAnd", "ReduceOr", "ArgMax", "ArgMin"]


# ---- helpers ----


def _kept_shape(x, axes):
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def _reduce_axes_rule(name, x, axes):
    check_axes(name, axes, x.ndim, x.shape)
    return aval(_kept_shape(x, axes), x.dtype)


# ---- reductions ----


@register
@dataclass(frozen=True)
class ReduceMax(Primitive):
    """Maximum over `axes` (the reduced axes are removed); a reduced axis must be non-empty."""

    axes: tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "axes", tuple(sorted(ints(self.axes))))

    def abstract_eval(self, x):
        check_dtype(self.name, x, REAL, "real")
        check_axes(self.name, self.axes, x.ndim, x.shape)
        if any(x.shape[a] == 0 for a in self.axes):
            raise ValueError(f"{self.name}: cannot reduce an empty axis of shape {x.shape}")
        return aval(tuple(d for i, d in enumerate(x.shape) if i not in self.axes), x.dtype)

    batch = shifted("axes")

    def linearize(self, b, primal_in, primal_out, t):
        # Ties share the tangent equally (as in JAX): w = (x == max) / count.
        x = primal_in[0]
        kept = tuple(i for i in range(x.ndim) if i not in self.axes)
        ymax = fix(b, BroadcastInDim(x.shape, kept), primal_out[0])
        hit = fix(b, Convert(x.dtype.name), fix(b, Compare("EQ"), x, ymax))
        count = fix(b, BroadcastInDim(x.shape, kept), fix(b, ReduceSum(self.axes), hit))
        return [lin(b, ReduceSum(self.axes), [scale(b, fix(b, Div(), hit, count), t[0])], [A])]

    def lower(self, lo, out, x):
        dt = out.dtype
        low = -np.inf if kind_of(dt) == "f" else np.iinfo(dt).min
        return lo.reduce(x, lo.scalar(low, dt), "stablehlo.maximum", self.axes, out)

    def impl(self, x):
        return np.max(x, axis=self.axes)


@register
@dataclass(frozen=True)
class ReduceMin(Primitive):
    """Minimum over `axes` (removed); NaN propagates; a reduced axis must be non-empty."""

    axes: tuple[int, ...]
    batch = shifted("axes")

    def __post_init__(self):
        object.__setattr__(self, "axes", tuple(sorted(ints(self.axes))))

    def abstract_eval(self, x):
        check_dtype(self.name, x, REAL, "real (float or int)")
        if any(0 <= a < x.ndim and x.shape[a] == 0 for a in self.axes):
            raise ValueError(f"{self.name}: cannot reduce an empty axis of shape {x.shape}")
        return _reduce_axes_rule(self.name, x, self.axes)

    def linearize(self, b, primal_in, primal_out, t):
        # Ties share the tangent equally (as in JAX): w = (x == min) / count.
        x = primal_in[0]
        kept = tuple(i for i in range(x.ndim) if i not in self.axes)
        ymin = fix(b, BroadcastInDim(x.shape, kept), primal_out[0])
        hit = fix(b, Convert(x.dtype.name), fix(b, Compare("EQ"), x, ymin))
        count = fix(b, BroadcastInDim(x.shape, kept), fix(b, ReduceSum(self.axes), hit))
        return [lin(b, ReduceSum(self.axes), [scale(b, fix(b, Div(), hit, count), t[0])], [A])]

    def lower(self, lo, out, x):
        dt = out.dtype
        high = np.inf if kind_of(dt) == "f" else np.iinfo(dt).max
        return lo.reduce(x, lo.scalar(high, dt), "stablehlo.minimum", self.axes, out)

    def impl(self, x):
        return np.min(x, axis=self.axes)


@register
@dataclass(frozen=True)
class ReduceProd(Primitive):
    """Product over `axes` (removed); 1 over an empty axis; integers wrap."""

    axes: tuple[int, ...]
    batch = shifted("axes")

    def __post_init__(self):
        object.__setattr__(self, "axes", tuple(sorted(ints(self.axes))))

    def abstract_eval(self, x):
        check_dtype(self.name, x, NUMERIC, "numeric")
        return _reduce_axes_rule(self.name, x, self.axes)

    def linearize(self, b, primal_in, primal_out, t):
        # d prod = sum_i w_i dx_i, w_i = (product before i) * (product after i) over the reduced
        # elements in row-major order: exclusive Cumprods, no division.
        x = primal_in[0]
        shape, axes = x.shape, self.axes
        kept = tuple(i for i in range(x.ndim) if i not in axes)
        n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
        if n <= 1 or t[0] is None:
            return [lin(b, ReduceSum(axes), t, [A]) if t[0] is not None else None]
        perm = kept + axes
        xt = x if perm == tuple(range(x.ndim)) else fix(b, Transpose(perm), x)
        tshape = tuple(shape[p] for p in perm)
        flat = tuple(shape[k] for k in kept) + (n,)
        xr = fix(b, Reshape(flat), xt)
        last = len(flat) - 1
        before = _shift(b, fix(b, Cumprod(last, False), xr), last, True, 1)
        after = _shift(b, fix(b, Cumprod(last, True), xr), last, False, 1)
        w = fix(b, Reshape(tshape), fix(b, Mul(), before, after))
        if perm != tuple(range(x.ndim)):
            w = fix(b, Transpose(tuple(int(i) for i in np.argsort(perm))), w)
        return [lin(b, ReduceSum(axes), [scale(b, w, t[0])], [A])]

    def lower(self, lo, out, x):
        return lo.reduce(x, lo.scalar(1, out.dtype), "stablehlo.multiply", self.axes, out)

    def impl(self, x):
        return np.prod(x, axis=self.axes, dtype=x.dtype)


@dataclass(frozen=True)
class _BoolReduce(Primitive):
    axes: tuple[int, ...]
    differentiable = False
    _hlo_body = ""
    _init = False

    batch = shifted("axes")

    def __post_init__(self):
        object.__setattr__(self, "axes", tuple(sorted(ints(self.axes))))

    def abstract_eval(self, x):
        check_dtype(self.name, x, frozenset({BOOL}), "bool")
        return _reduce_axes_rule(self.name, x, self.axes)

    def lower(self, lo, out, x):
        return lo.reduce(x, lo.scalar(self._init, "bool"), self._hlo_body, self.axes, out)


@register
@dataclass(frozen=True)
class ReduceAnd(_BoolReduce):
    """Logical and over `axes` (True over an empty axis)."""

    _hlo_body = "stablehlo.and"
    _init = True

    def impl(self, x):
        return np.all(x, axis=self.axes)


@register
@dataclass(frozen=True)
class ReduceOr(_BoolReduce):
    """Logical or over `axes` (False over an empty axis)."""

    _hlo_body = "stablehlo.or"
    _init = False

    def impl(self, x):
        return np.any(x, axis=self.axes)


# ---- argmax / argmin ----


@dataclass(frozen=True)
class _ArgExtreme(Primitive):
    axis: int
    dtype: str = "int64"
    differentiable = False
    _gt = True

    batch = shifted("axis")

    def __post_init__(self):
        object.__setattr__(self, "axis", int(self.axis))
        dt = np.dtype(self.dtype)
        if dt not in INTS:
            raise TypeError(f"{self.name}: index dtype {dt} is not int32 or int64")
        object.__setattr__(self, "dtype", dt.name)

    def abstract_eval(self, x):
        check_dtype(self.name, x, REAL, "real (float or int)")
        _check_axis(self.name, self.axis, x)
        if x.shape[self.axis] == 0:
            raise ValueError(f"{self.name}: cannot take the {self.name[3:].lower()} of an empty "
                             f"axis of shape {x.shape}")
        return aval(_kept_shape(x, (self.axis,)), self.dtype)

    def lower(self, lo, out, x):
        dt_x = np.dtype(_type_dtype(x.type))
        shape = _type_shape(x.type)[lo.nb:]
        idx = Iota(shape, self.dtype, self.axis).lower(lo, aval(shape, self.dtype))
        tx, ti = lo.tensor_type((), dt_x), lo.tensor_type((), self.dtype)
        # init (lowest, 0) / (highest, 0): index 0 is the right answer whenever it ties
        init_x = lo.scalar(-np.inf if self._gt else np.inf, dt_x) if kind_of(dt_x) == "f" else \
            lo.scalar(np.iinfo(dt_x).min if self._gt else np.iinfo(dt_x).max, dt_x)
        init_i = lo.scalar(0, self.dtype)
        a, c, bb, d = lo.fresh(), lo.fresh(), lo.fresh(), lo.fresh()  # (a, ia), (b, ib)
        b1 = "tensor<i1>"

        def body():
            better = _hlo_cmp(lo, a, c, "GT" if self._gt else "LT", tx)
            if kind_of(dt_x) == "f":  # NaN wins; two NaNs / equal values: the lower index
                a_nan, c_nan = _hlo_cmp(lo, a, a, "NE", tx), _hlo_cmp(lo, c, c, "NE", tx)
                not_c_nan = _hlo_un(lo, "not", c_nan, b1, b1)
                better = _hlo_bin(lo, "or", _hlo_bin(lo, "and", better, _hlo_un(
                    lo, "not", a_nan, b1, b1), b1), _hlo_bin(lo, "and", a_nan, not_c_nan, b1),
                    b1)
                same = _hlo_bin(lo, "or", _hlo_cmp(lo, a, c, "EQ", tx),
                                _hlo_bin(lo, "and", a_nan, c_nan, b1), b1)
            else:
                same = _hlo_cmp(lo, a, c, "EQ", tx)
            first = _hlo_cmp(lo, bb, d, "LT", ti)
            take = _hlo_bin(lo, "or", better, _hlo_bin(lo, "and", same, first, b1), b1)
            vx, vi = lo.fresh(), lo.fresh()
            lo.lines.append(f'      {vx} = "stablehlo.select"({take}, {a}, {c}) : '
                            f'({b1}, {tx}, {tx}) -> {tx}')
            lo.lines.append(f'      {vi} = "stablehlo.select"({take}, {bb}, {d}) : '
                            f'({b1}, {ti}, {ti}) -> {ti}')
            return [(vx, tx), (vi, ti)]

        region = _region(lo, [(a, tx), (bb, ti), (c, tx), (d, ti)], body)  # accumulators first
        r = lo.fresh()
        out_x = lo.type(aval(out.shape, dt_x))
        out_i = lo.type(out)
        lo.lines.append(
            f'    {r}:2 = "stablehlo.reduce"({x.name}, {idx.name}, {init_x.name}, {init_i.name}) '
            f'({{\n{region}}}) {{dimensions = {lo.i64_array(lo.ax((self.axis,)))}}} : '
            f'({x.type}, {idx.type}, {init_x.type}, {init_i.type}) -> ({out_x}, {out_i})')
        return Value(f"{r}#1", out_i)


@register
@dataclass(frozen=True)
class ArgMax(_ArgExtreme):
    """Index of the maximum along `axis` (the first one; the first NaN); never differentiable."""

    _gt = True

    def impl(self, x):
        return np.argmax(x, axis=self.axis).astype(self.dtype)


@register
@dataclass(frozen=True)
class ArgMin(_ArgExtreme):
    """Index of the minimum along `axis` (the first one; the first NaN); never differentiable."""

    _gt = False

    def impl(self, x):
        return np.argmin(x, axis=self.axis).astype(self.dtype)
