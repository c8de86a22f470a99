"""Structural primitives: dot_general, select, slice, pad, concatenate, and the sources with no
differentiable operand (Iota, StopGradient)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.graph import aval
from tidu.ops.core import (
    ALL,
    BOOL,
    NUMERIC,
    A,
    F,
    Primitive,
    Transpose,
    _frozen_ints,
    all_batched,
    aval_of,
    batch_size,
    bilinear,
    check_axes,
    check_dtype,
    check_same,
    conj_fixed,
    const,
    fix,
    ints,
    lin,
    linear_self,
    move_to_front,
    same_op_batched,
    shifted,
)


@register
@dataclass(frozen=True)
class DotGeneral(Primitive):
    """Contraction with batch dims; output axes: batch, then lhs free, then rhs free."""

    uses_blas = True
    bilinear_in = (0, 1)

    lhs_contracting: tuple[int, ...]
    rhs_contracting: tuple[int, ...]
    lhs_batch: tuple[int, ...] = ()
    rhs_batch: tuple[int, ...] = ()

    def __post_init__(self):
        _frozen_ints(self, "lhs_contracting", "rhs_contracting", "lhs_batch", "rhs_batch")

    def abstract_eval(self, x, y):
        n = self.name
        if x.dtype != y.dtype:
            raise TypeError(f"{n}: dtype mismatch {x.dtype} vs {y.dtype}")
        check_dtype(n, x, NUMERIC, "numeric")
        lc, rc, lb, rb = self.lhs_contracting, self.rhs_contracting, self.lhs_batch, self.rhs_batch
        if len(lc) != len(rc) or len(lb) != len(rb):
            raise ValueError(f"{n}: contracting dims {lc} vs {rc} / batch dims {lb} vs {rb} "
                             f"differ in length")
        check_axes(n, lc + lb, x.ndim, x.shape)
        check_axes(n, rc + rb, y.ndim, y.shape)
        for a, b in zip(lc + lb, rc + rb):
            if x.shape[a] != y.shape[b]:
                raise ValueError(f"{n}: lhs shape {x.shape} axis {a} does not match rhs shape "
                                 f"{y.shape} axis {b}")
        lfree = [d for i, d in enumerate(x.shape) if i not in lc + lb]
        rfree = [d for i, d in enumerate(y.shape) if i not in rc + rb]
        return aval(tuple(x.shape[a] for a in lb) + tuple(lfree) + tuple(rfree), x.dtype)

    def batch(self, b, primal_in, primal_out, bt):
        # Both batched: a new leading batch dimension (output batch dims come first).  One
        # batched: its batch axis is a free axis, moved to the front of the result.
        lc, rc, lb, rb = self.lhs_contracting, self.rhs_contracting, self.lhs_batch, self.rhs_batch
        up = lambda axes: tuple(a + 1 for a in axes)
        (x, y), (bx, by) = primal_in, bt
        if bx is not None and by is not None:
            return [fix(b, DotGeneral(up(lc), up(rc), (0,) + up(lb), (0,) + up(rb)), bx, by)]
        if bx is not None:
            out = fix(b, DotGeneral(up(lc), rc, up(lb), rb), bx, y)
            return [move_to_front(b, out, len(lb))]
        out = fix(b, DotGeneral(lc, up(rc), lb, up(rb)), x, by)
        return [move_to_front(b, out, x.aval.ndim - len(lc))]

    def linearize(self, b, primal_in, primal_out, t):
        return [bilinear(self, b, primal_in, t)]

    def transpose_rule(self, b, ct, inputs, mode):
        m = mode.active_mask
        if m[0] and m[1]:
            raise ValueError("DotGeneral with both operands active is not linear")
        x, y = inputs
        lc, rc, lb, rb = self.lhs_contracting, self.rhs_contracting, self.lhs_batch, self.rhs_batch
        nb = len(lb)
        lfree = [i for i in range(x.ndim) if i not in lc + lb]
        rfree = [i for i in range(y.ndim) if i not in rc + rb]
        if m[0]:  # ct . conj(y) over y's free axes -> axes (batch, lfree, lc in rc order)
            op = DotGeneral(tuple(range(nb + len(lfree), nb + len(lfree) + len(rfree))),
                            tuple(rfree), tuple(range(nb)), rb)
            res = lin(b, op, [ct[0], conj_fixed(b, y)], [A, F])
            x_axes = list(lb) + lfree + [lc[rc.index(a)] for a in sorted(rc)]
            return [_to_order(b, res, x_axes), None]
        op = DotGeneral(tuple(lfree), tuple(range(nb, nb + len(lfree))), lb, tuple(range(nb)))
        res = lin(b, op, [conj_fixed(b, x), ct[0]], [F, A])
        y_axes = list(rb) + [rc[lc.index(a)] for a in sorted(lc)] + rfree
        return [None, _to_order(b, res, y_axes)]

    def lower(self, lo, out, x, y):
        batch = tuple(range(lo.nb))
        lb, rb = batch + lo.ax(self.lhs_batch), batch + lo.ax(self.rhs_batch)
        nl = _rank(x.type) - len(lb) - len(self.lhs_contracting)  # lhs free axes
        nr = _rank(y.type) - len(rb) - len(self.rhs_contracting)
        if not self.lhs_contracting and lb and nl and nr:
            # A batched outer product is written as jax's dot_general gradients write it: rhs
            # first, then a transpose into (batch, lhs free, rhs free).  Same values (each
            # element is one product); XLA:CPU gives the transposed result a layout under
            # which a later sum over the batch axis is split into a reduce-window tree,
            # where the plain order lets YNNPACK's reduce fusion take it on a slow path (a
            # per-example clipped gradient: 13 ms against 1.5 ms; docs/performance.md).
            nb = len(lb)
            shape = lo.shape(out.shape)
            swapped = shape[:nb] + shape[nb + nl:] + shape[nb:nb + nl]
            r = _dot(lo, y, x, rb, lb, (), (), lo.tensor_type(swapped, out.dtype))
            perm = (*range(nb), *range(nb + nr, nb + nr + nl), *range(nb, nb + nr))
            return lo.op("stablehlo.transpose", [r], out, f"permutation = {lo.i64_array(perm)}")
        return _dot(lo, x, y, lb, rb, lo.ax(self.lhs_contracting),
                    lo.ax(self.rhs_contracting), out)

    def impl(self, x, y):
        lc, rc, lb, rb = self.lhs_contracting, self.rhs_contracting, self.lhs_batch, self.rhs_batch
        lfree = [i for i in range(x.ndim) if i not in lc + lb]
        rfree = [i for i in range(y.ndim) if i not in rc + rb]
        xt = np.transpose(x, lb + tuple(lfree) + lc)
        yt = np.transpose(y, rb + tuple(rc) + tuple(rfree))
        bshape = xt.shape[:len(lb)]
        m = int(np.prod(xt.shape[len(lb):len(lb) + len(lfree)], dtype=np.int64))
        k = int(np.prod([x.shape[a] for a in lc], dtype=np.int64))
        nn = int(np.prod(yt.shape[len(rb) + len(rc):], dtype=np.int64))
        out = np.matmul(xt.reshape(bshape + (m, k)), yt.reshape(bshape + (k, nn)))
        return out.reshape(bshape + tuple(x.shape[i] for i in lfree) +
                           tuple(y.shape[i] for i in rfree))


@register
@dataclass(frozen=True)
class Select(Primitive):
    """pred ? on_true : on_false elementwise; pred is bool of the same shape."""

    def abstract_eval(self, pred, on_true, on_false):
        if pred.dtype != BOOL:
            raise TypeError(f"{self.name}: predicate dtype {pred.dtype} is not bool")
        a = check_same(self.name, (on_true, on_false))
        if pred.shape != a.shape:
            raise ValueError(f"{self.name}: predicate shape {pred.shape} vs operand shape "
                             f"{a.shape}")
        return a

    batch = same_op_batched

    def linearize(self, b, primal_in, primal_out, t):
        if t[1] is None and t[2] is None:
            return [None]
        args = [primal_in[0]] + [
            ti if ti is not None else const(b, 0, x.aval) for x, ti in zip(primal_in[1:], t[1:])
        ]
        return [lin(b, self, args, [F, t[1] is not None, t[2] is not None])]

    def transpose_rule(self, b, ct, inputs, mode):
        pred, zero = inputs[0], None
        out = [None]
        for i in (1, 2):
            if not mode.active_mask[i]:
                out.append(None)
                continue
            zero = zero if zero is not None else const(b, 0, inputs[i].aval)
            args = [pred, ct[0], zero] if i == 1 else [pred, zero, ct[0]]
            out.append(lin(b, self, args, [F, i == 1, i == 2]))
        return out

    def lower(self, lo, out, pred, on_true, on_false):
        return lo.op("stablehlo.select", [pred, on_true, on_false], out)

    def impl(self, pred, on_true, on_false):
        return np.where(pred, on_true, on_false)


# ---- indexing ----


@register
@dataclass(frozen=True)
class Slice(Primitive):
    """x[start:limit:stride] per axis (start <= limit, stride >= 1)."""

    start: tuple[int, ...]
    limit: tuple[int, ...]
    stride: tuple[int, ...]
    linear = True

    def __post_init__(self):
        _frozen_ints(self, "start", "limit", "stride")

    def abstract_eval(self, x):
        check_dtype(self.name, x, ALL, "supported")
        if not len(self.start) == len(self.limit) == len(self.stride) == x.ndim:
            raise ValueError(
                f"{self.name}: start/limit/stride lengths "
                f"{len(self.start)}/{len(self.limit)}/{len(self.stride)} do not match "
                f"operand shape {x.shape}"
            )
        for s, l, st, d in zip(self.start, self.limit, self.stride, x.shape):
            if not (0 <= s <= l <= d and st >= 1):
                raise ValueError(
                    f"{self.name}: bounds start={self.start} limit={self.limit} "
                    f"stride={self.stride} invalid for shape {x.shape}"
                )
        return aval(
            tuple(-(-(l - s) // st) for s, l, st in zip(self.start, self.limit, self.stride)),
            x.dtype,
        )

    def batch(self, b, primal_in, primal_out, bt):
        n = batch_size(b, bt)
        op = Slice((0,) + self.start, (n,) + self.limit, (1,) + self.stride)
        return [fix(b, op, bt[0])]

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        low, high, interior = [], [], []
        for s, st, d, n in zip(self.start, self.stride, inputs[0].shape, primal_shape(b, ct[0])):
            if n == 0:
                low.append(d), high.append(0), interior.append(0)
                continue
            last = s + (n - 1) * st
            low.append(s), high.append(d - last - 1), interior.append(st - 1)
        return [lin(b, Pad(tuple(low), tuple(high), tuple(interior)), ct, [A])]

    def lower(self, lo, out, x):
        b = lo.batch
        return lo.op(
            "stablehlo.slice",
            [x],
            out,
            f"start_indices = {lo.i64_array(lo.lead(0) + self.start)}, "
            f"limit_indices = {lo.i64_array(lo.lead(b) + self.limit)}, "
            f"strides = {lo.i64_array(lo.lead(1) + self.stride)}",
        )

    def impl(self, x):
        return x[tuple(slice(s, l, st) for s, l, st in zip(self.start, self.limit, self.stride))]


@register
@dataclass(frozen=True)
class Pad(Primitive):
    """Zero padding: `low`/`high` zeros at each end, `interior` zeros between elements."""

    low: tuple[int, ...]
    high: tuple[int, ...]
    interior: tuple[int, ...]
    linear = True

    def __post_init__(self):
        _frozen_ints(self, "low", "high", "interior")

    def abstract_eval(self, x):
        check_dtype(self.name, x, ALL, "supported")
        if not len(self.low) == len(self.high) == len(self.interior) == x.ndim:
            raise ValueError(
                f"{self.name}: low/high/interior lengths do not match operand shape {x.shape}"
            )
        if any(v < 0 for v in self.low + self.high + self.interior):
            raise ValueError(
                f"{self.name}: negative padding low={self.low} high={self.high} "
                f"interior={self.interior}"
            )
        return aval(
            tuple(
                lo + hi + d + max(d - 1, 0) * it
                for lo, hi, it, d in zip(self.low, self.high, self.interior, x.shape)
            ),
            x.dtype,
        )

    def batch(self, b, primal_in, primal_out, bt):
        args = all_batched(b, primal_in, bt)
        return [fix(b, Pad((0,) + self.low, (0,) + self.high, (0,) + self.interior), *args)]

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        start = tuple(self.low)
        limit = tuple(
            lo + ((d - 1) * (it + 1) + 1 if d else 0)
            for lo, it, d in zip(self.low, self.interior, inputs[0].shape)
        )
        stride = tuple(it + 1 for it in self.interior)
        return [lin(b, Slice(start, limit, stride), ct, [A])]

    def lower(self, lo, out, x):
        z = lo.lead(0)
        return lo.op(
            "stablehlo.pad",
            [x, lo.scalar(0, out.dtype)],
            out,
            f"edge_padding_low = {lo.i64_array(z + self.low)}, "
            f"edge_padding_high = {lo.i64_array(z + self.high)}, "
            f"interior_padding = {lo.i64_array(z + self.interior)}",
        )

    def impl(self, x):
        out_shape = self.abstract_eval(aval(x.shape, x.dtype)).shape
        out = np.zeros(out_shape, dtype=x.dtype)
        idx = tuple(
            slice(lo, lo + (d - 1) * (it + 1) + 1 if d else lo, it + 1)
            for lo, it, d in zip(self.low, self.interior, x.shape)
        )
        out[idx] = x
        return out


@register
@dataclass(frozen=True)
class Concatenate(Primitive):
    """Join operands along `axis`; other axes and dtypes must agree."""

    axis: int
    linear = True

    def abstract_eval(self, *xs):
        if not xs:
            raise ValueError(f"{self.name}: needs at least one operand")
        first = xs[0]
        check_dtype(self.name, first, ALL, "supported")
        if not 0 <= self.axis < first.ndim:
            raise ValueError(f"{self.name}: axis {self.axis} out of range for shape {first.shape}")
        for x in xs[1:]:
            if x.dtype != first.dtype:
                raise TypeError(f"{self.name}: dtype mismatch {first.dtype} vs {x.dtype}")
            if x.ndim != first.ndim or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != self.axis
            ):
                raise ValueError(
                    f"{self.name}: shape mismatch {first.shape} vs {x.shape} off axis {self.axis}"
                )
        shape = list(first.shape)
        shape[self.axis] = sum(x.shape[self.axis] for x in xs)
        return aval(tuple(shape), first.dtype)

    batch = shifted("axis")

    def linearize(self, b, primal_in, primal_out, t):
        return [linear_self(self, b, primal_in, t)]

    def transpose_rule(self, b, ct, inputs, mode):
        out, offset = [], 0
        for x, m in zip(inputs, mode.active_mask):
            n = x.shape[self.axis]
            if m:
                start = tuple(offset if i == self.axis else 0 for i in range(x.ndim))
                limit = tuple(offset + n if i == self.axis else d for i, d in enumerate(x.shape))
                out.append(lin(b, Slice(start, limit, (1,) * x.ndim), ct, [A]))
            else:
                out.append(None)
            offset += n
        return out

    def lower(self, lo, out, *xs):
        return lo.op("stablehlo.concatenate", xs, out, f"dimension = {self.axis + lo.nb} : i64")

    def impl(self, *xs):
        return np.concatenate(xs, axis=self.axis)


# ---- no differentiable operand ----


@register
@dataclass(frozen=True)
class Iota(Primitive):
    """0, 1, 2, ... along `dimension`, broadcast over the other axes of `shape`."""

    shape: tuple[int, ...]
    dtype: str
    dimension: int
    differentiable = False

    def __post_init__(self):
        object.__setattr__(self, "shape", ints(self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype).name)

    def abstract_eval(self):
        a = aval(self.shape, self.dtype)
        check_dtype(self.name, a, NUMERIC, "numeric")
        if not 0 <= self.dimension < len(self.shape):
            raise ValueError(
                f"{self.name}: dimension {self.dimension} out of range for shape {self.shape}"
            )
        return a

    def lower(self, lo, out):
        return lo.source("stablehlo.iota", f"iota_dimension = {self.dimension} : i64", out)

    def impl(self):
        idx = np.arange(self.shape[self.dimension], dtype=self.dtype)
        expanded = [1] * len(self.shape)
        expanded[self.dimension] = self.shape[self.dimension]
        return np.broadcast_to(idx.reshape(expanded), self.shape)


@register
@dataclass(frozen=True)
class StopGradient(Primitive):
    """The identity on values; no tangent flows through it."""

    batch = same_op_batched

    differentiable = False

    def abstract_eval(self, x):
        check_dtype(self.name, x, ALL, "supported")
        return x

    def lower(self, lo, out, x):
        return x

    def impl(self, x):
        return x


# ---- helpers ----


def _csv(xs) -> str:
    return ", ".join(map(str, xs))


def _rank(ty: str) -> int:
    """The rank of a tensor type: 2 for ``tensor<2x3xcomplex<f32>>``."""
    return re.match(r"tensor<((?:\d+x)*)", ty).group(1).count("x")


def _dot(lo, x, y, lb, rb, lc, rc, out):
    """``stablehlo.dot_general`` of x and y over the given (already shifted) axes."""
    dims = (f"lhs_batching_dimensions = [{_csv(lb)}], rhs_batching_dimensions = [{_csv(rb)}], "
            f"lhs_contracting_dimensions = [{_csv(lc)}], rhs_contracting_dimensions = [{_csv(rc)}]")
    # HIGHEST: full-precision products on every device (no TF32/bf16 passes on GPUs)
    return lo.op("stablehlo.dot_general", [x, y], out,
                 f"dot_dimension_numbers = #stablehlo.dot<{dims}>, precision_config = "
                 f"[#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]")


def primal_shape(b, local):
    return aval_of(b, local).shape


def _to_order(b, res, axes):
    """Transpose res (whose axis i is operand axis axes[i]) back into operand axis order."""
    perm = tuple(sorted(range(len(axes)), key=axes.__getitem__))
    if perm == tuple(range(len(axes))):
        return res
    return lin(b, Transpose(perm), [res], [A])
