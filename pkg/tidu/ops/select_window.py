"""SelectAndGatherAdd and SelectAndScatterAdd: the derivative of max / min pooling
(ReduceWindowMax / Min) as one instruction each (jax's ``_select_and_gather_add`` and
``_select_and_scatter_add``); C++ kernel in ``cpp/include/tidu/kernels/select_window.hpp``.

Of each window of the operand ``x`` (strides, low and high padding; no dilation: dilated windows
keep ReduceWindowMax's composite rule) one element is selected: the first in window order that
no later element replaces, a later ``v`` replacing the current ``c`` unless ``c >= v`` (max) or
``c <= v`` (min), as XLA's select-and-scatter with a ``ge`` / ``le`` select (so on ties the first
maximum gets the cotangent, as in jax).  Padding takes part as -inf (max) / +inf (min), as jax
pads the operand before XLA's select-and-scatter: any later element but -inf (+inf) replaces it,
it replaces a NaN, and selected it selects nothing.

- ``SelectAndGatherAdd(t, x)``: the window output's shape, ``t`` at each window's selected
  element (0 where padding is selected): the tangent of the pooling.  Linear in ``t``.
- ``SelectAndScatterAdd(s, x)``: ``x``'s shape, zero but for each ``s[o]`` added at its window's
  selected element: the gradient.  Linear in ``s``; each is the other's transpose.

``x`` is a fixed operand: the selection is piecewise constant in it, so its derivative is zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.backends.xla.hlo import Value
from tidu.graph import aval
from tidu.ops.core import A, F, Primitive, all_batched, fix, ints, lin
from tidu.ops.sorting import _hlo_bin, _hlo_cmp, _region, _type_shape

__all__ = ["SelectAndGatherAdd", "SelectAndScatterAdd", "pool_output_shape"]

_FIELDS = ("window_dimensions", "window_strides", "padding_low", "padding_high")
DTYPES = frozenset(np.dtype(d) for d in ("float32", "float64"))  # others: the composite rule


def pool_output_shape(shape, window, strides, low, high) -> tuple[int, ...]:
    out = []
    for d, w, s, lo, hi in zip(shape, window, strides, low, high):
        n = d + lo + hi
        out.append(0 if n < w else (n - w) // s + 1)
    return tuple(out)


@dataclass(frozen=True)
class _SelectWindow(Primitive):
    window_dimensions: tuple[int, ...]
    window_strides: tuple[int, ...]
    padding_low: tuple[int, ...]
    padding_high: tuple[int, ...]
    select_max: bool = True
    linear = True
    _scatter = False

    def __post_init__(self):
        for f in _FIELDS:
            object.__setattr__(self, f, ints(getattr(self, f)))
        object.__setattr__(self, "select_max", bool(self.select_max))

    def _window_shape(self, x):
        return pool_output_shape(x.shape, self.window_dimensions, self.window_strides,
                                 self.padding_low, self.padding_high)

    def abstract_eval(self, src, x):
        n = self.name
        if x.dtype not in DTYPES or src.dtype != x.dtype:
            raise TypeError(f"{n}: operands must both be float32 or float64, got {src.dtype} "
                            f"and {x.dtype}")
        for f in _FIELDS:
            if len(getattr(self, f)) != x.ndim:
                raise ValueError(f"{n}: {f} {getattr(self, f)} does not have one entry per axis "
                                 f"of operand shape {x.shape}")
        if any(v < 1 for v in self.window_dimensions + self.window_strides):
            raise ValueError(f"{n}: window dimensions {self.window_dimensions} and strides "
                             f"{self.window_strides} must be positive")
        if any(p < 0 for p in self.padding_low + self.padding_high):
            raise ValueError(f"{n}: negative padding low={self.padding_low} "
                             f"high={self.padding_high}")
        win = self._window_shape(x)
        want = win if self._scatter else x.shape
        if src.shape != want:
            raise ValueError(f"{n}: source shape {src.shape} should be {want} for operand shape "
                             f"{x.shape}")
        return aval(x.shape if self._scatter else win, x.dtype)

    def _fields(self):
        return (self.window_dimensions, self.window_strides, self.padding_low,
                self.padding_high, self.select_max)

    def linearize(self, b, primal_in, primal_out, t):
        if t[0] is None:
            return [None]
        return [lin(b, self, [t[0], primal_in[1]], [A, F])]

    def transpose_rule(self, b, ct, inputs, mode):
        other = SelectAndGatherAdd if self._scatter else SelectAndScatterAdd
        return [lin(b, other(*self._fields()), [ct[0], inputs[1]], [A, F]), None]

    def batch(self, b, primal_in, primal_out, bt):
        args = all_batched(b, primal_in, bt)
        new = type(self)((1,) + self.window_dimensions, (1,) + self.window_strides,
                         (0,) + self.padding_low, (0,) + self.padding_high, self.select_max)
        return [fix(b, new, *args)]

    def _selected(self, x):
        """numpy reference: per output (row-major) the flat index of its selected element, or
        -1."""
        x = np.asarray(x)
        win = self._window_shape(x)
        sel = np.full(win, -1, np.int64)
        for o in np.ndindex(*win):
            best, bv = -1, None
            for k in np.ndindex(*self.window_dimensions):
                q = tuple(p * s + kk - lo for p, s, kk, lo in
                          zip(o, self.window_strides, k, self.padding_low))
                pad = any(c < 0 or c >= d for c, d in zip(q, x.shape))
                v = (-np.inf if self.select_max else np.inf) if pad else x[q]
                keep = bv is not None and (bv >= v if self.select_max else bv <= v)
                if not keep:
                    best = -1 if pad else int(np.ravel_multi_index(q, x.shape))
                    bv = v
            sel[o] = best
        return sel

    def _pad(self, lo, v, value, dt):
        """v (of the operand's shape, batched as lowered) with the window padding made explicit,
        filled with value."""
        shape = _type_shape(v.type)[lo.nb:]
        padded = tuple(d + p + q for d, p, q in zip(shape, self.padding_low, self.padding_high))
        z = lo.lead(0)
        return lo.op("stablehlo.pad", [v, lo.scalar(value, dt)], aval(padded, dt),
                     f"edge_padding_low = {lo.i64_array(z + self.padding_low)}, "
                     f"edge_padding_high = {lo.i64_array(z + self.padding_high)}, "
                     f"interior_padding = {lo.i64_array(z + (0,) * len(shape))}")

    def _no_padding(self, lo):
        """A window op's padding attribute of zeros: both lowerings pad explicitly."""
        n = lo.nb + len(self.window_dimensions)
        return "dense<[" + ", ".join(["[0, 0]"] * n) + f"]> : tensor<{n}x2xi64>"

    def _window_attrs(self, lo):
        one = lo.lead(1)
        return (f"window_dimensions = {lo.i64_array(one + self.window_dimensions)}, "
                f"window_strides = {lo.i64_array(one + self.window_strides)}")


@register
@dataclass(frozen=True)
class SelectAndGatherAdd(_SelectWindow):
    """t at each window's selected element of x (the tangent of max / min pooling)."""

    def lower(self, lo, out, t, x):
        # a variadic reduce_window over (x, t, flat index of x): the larger x, on ties the lower
        # index, so the result does not depend on the order XLA combines a window in (jax's
        # own variadic form keeps whichever pair a `ge` on x prefers, which on XLA's CPU is not
        # always the first on ties: jax's tangent and its gradient then pick different elements)
        dt = np.dtype(out.dtype)
        st, it = lo.tensor_type((), dt), lo.tensor_type((), np.int64)
        shape = _type_shape(x.type)[lo.nb:]
        worst = -np.inf if self.select_max else np.inf
        if any(self.padding_low) or any(self.padding_high):
            # the padding made explicit, with indices of its own in window order: reduce_window's
            # own padding (the init values) would lose every tie to an element, where the
            # interpreter's walk (jax's select) keeps a padding element ahead of a later -inf
            x, t = self._pad(lo, x, worst, dt), self._pad(lo, t, 0, dt)
            shape = _type_shape(x.type)[lo.nb:]
        flat = lo.source("stablehlo.iota", "iota_dimension = 0",
                         aval((int(np.prod(shape, dtype=np.int64)),), "int64"))
        idx = lo.op("stablehlo.reshape", [flat], aval(shape, "int64"))
        inits = [lo.scalar(worst, dt), lo.scalar(0, dt),
                 lo.scalar(np.iinfo(np.int64).max, np.int64)]
        a, c, ia, bx, bt, ib = (lo.fresh() for _ in range(6))  # acc (a, c, ia), new (bx, bt, ib)

        def body():
            better = _hlo_cmp(lo, a, bx, "GT" if self.select_max else "LT", st)
            tie = _hlo_bin(lo, "and", _hlo_cmp(lo, a, bx, "EQ", st),
                           _hlo_cmp(lo, ia, ib, "LT", it), "tensor<i1>")
            keep = _hlo_bin(lo, "or", better, tie, "tensor<i1>")
            rets = []
            for p, q, ty in ((a, bx, st), (c, bt, st), (ia, ib, it)):
                r = lo.fresh()
                lo.lines.append(f'      {r} = "stablehlo.select"({keep}, {p}, {q}) : '
                                f'(tensor<i1>, {ty}, {ty}) -> {ty}')
                rets.append((r, ty))
            return rets

        region = _region(lo, [(a, st), (c, st), (ia, it), (bx, st), (bt, st), (ib, it)], body)
        r = lo.fresh()
        ty, ity = lo.type(out), lo.type(aval(out.shape, "int64"))
        one, nd = lo.lead(1), len(out.shape)
        attrs = (f"{self._window_attrs(lo)}, "
                 f"base_dilations = {lo.i64_array(one + (1,) * nd)}, "
                 f"window_dilations = {lo.i64_array(one + (1,) * nd)}, "
                 f"padding = {self._no_padding(lo)}")
        ops = [x, t, idx] + inits
        lo.lines.append(
            f'    {r}:3 = "stablehlo.reduce_window"({", ".join(v.name for v in ops)}) '
            f'({{\n{region}}}) {{{attrs}}} : ({", ".join(v.type for v in ops)}) -> '
            f'({ty}, {ty}, {ity})')
        return Value(f"{r}#1", ty)

    def impl(self, t, x):
        t = np.asarray(t)
        sel = self._selected(x)
        flat = t.reshape(-1)
        return np.where(sel >= 0, flat[np.maximum(sel, 0)], 0).astype(t.dtype)


@register
@dataclass(frozen=True)
class SelectAndScatterAdd(_SelectWindow):
    """Each s[o] added at its window's selected element of x, zero elsewhere (the gradient of
    max / min pooling: XLA's select_and_scatter)."""

    _scatter = True

    def lower(self, lo, out, s, x):
        dt = np.dtype(out.dtype)
        st = lo.tensor_type((), dt)
        init = lo.scalar(0, dt)
        a, c = lo.fresh(), lo.fresh()
        select = _region(lo, [(a, st), (c, st)], lambda: [
            (_hlo_cmp(lo, a, c, "GE" if self.select_max else "LE", st), "tensor<i1>")])
        u, v = lo.fresh(), lo.fresh()

        def add():
            r = lo.fresh()
            lo.lines.append(f'      {r} = "stablehlo.add"({u}, {v}) : ({st}, {st}) -> {st}')
            return [(r, st)]

        scatter = _region(lo, [(u, st), (v, st)], add)
        # the padding made explicit with the select's identity, as jax lowers it for CPU and
        # GPU (XLA's select_and_scatter with padding picks other elements there)
        xs = tuple(out.shape)
        xp, pty = x, out
        if any(self.padding_low) or any(self.padding_high):
            xp = self._pad(lo, x, -np.inf if self.select_max else np.inf, dt)
            pty = aval(_type_shape(xp.type)[lo.nb:], dt)
        # lo.op wraps one region as ({ ... }); the two regions are joined inside it
        r = lo.op("stablehlo.select_and_scatter", [xp, s, init], pty,
                  f"{self._window_attrs(lo)}, padding = {self._no_padding(lo)}",
                  region=f"{select}}}, {{\n{scatter}")
        if pty is out:
            return r
        limit = lo.lead(lo.batch) + tuple(p + d for p, d in zip(self.padding_low, xs))
        return lo.op("stablehlo.slice", [r], out,
                     f"start_indices = {lo.i64_array(lo.lead(0) + self.padding_low)}, "
                     f"limit_indices = {lo.i64_array(limit)}, "
                     f"strides = {lo.i64_array(lo.lead(1) + (1,) * len(xs))}")

    def impl(self, s, x):
        x = np.asarray(x)
        s = np.asarray(s)
        sel = self._selected(x).reshape(-1)
        out = np.zeros(x.size, s.dtype)
        ok = sel >= 0
        np.add.at(out, sel[ok], s.reshape(-1)[ok])
        return out.reshape(x.shape)
