"""Dynamic slices: DynamicSlice and DynamicUpdateSlice, windows at start indices known only at
run time (int32/int64 scalars, never carrying a tangent).

Starts are clamped so that the whole window fits (the StableHLO rule, also jax's default).
Transpose pair: DynamicSlice <-> DynamicUpdateSlice into zeros.  Batched starts become a Gather
or Scatter (``gather``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.graph import aval
from tidu.ops.core import (
    ALL,
    INTS,
    A,
    Add,
    BroadcastInDim,
    Convert,
    F,
    Mul,
    Primitive,
    Reshape,
    aval_of,
    batch_size,
    broadcast_batch,
    check_dtype,
    const,
    fix,
    ints,
    lin,
)
from tidu.ops.gather import Gather, Scatter, _clamp, _el, _gather_batch, _scatter_batch, _unbatched
from tidu.ops.structural import Iota

__all__ = ["DynamicSlice", "DynamicUpdateSlice"]


# ---- helpers ----


def _csv(xs) -> str:
    return ", ".join(map(str, xs))


def _same_type(lo, starts):
    """Unbatched scalar starts with one element type (StableHLO's rule): int64 when mixed."""
    if len({s.type for s in starts}) <= 1:
        return list(starts)
    return [s if _unbatched(s, lo).dtype == np.dtype("int64") else
            lo.op("stablehlo.convert", [s], aval((), "int64")) for s in starts]


def _start_vector(lo, starts):
    """Batched scalar starts (each of shape (B,)) as one (B, r) int64 index tensor."""
    cols = []
    for s in starts:
        if _unbatched(s, lo).dtype != np.dtype("int64"):
            s = lo.op("stablehlo.convert", [s], aval((), "int64"))
        cols.append(lo.op("stablehlo.reshape", [s], aval((1,), "int64")))
    if len(cols) == 1:
        return cols[0]
    return lo.op("stablehlo.concatenate", cols, aval((len(cols),), "int64"), "dimension = 1 : i64")


def _starts(name, x, starts):
    if len(starts) != x.ndim:
        raise ValueError(f"{name}: {len(starts)} start indices for operand shape {x.shape} "
                         f"(one per axis)")
    for k, s in enumerate(starts):
        if s.dtype not in INTS or s.ndim:
            raise TypeError(f"{name}: start index {k} must be a scalar int32/int64, got {s}")


def _window_index(b, s, size: int, dim: int):
    """clamp(s, 0, dim - size) + iota(size): the positions a window of `size` starting at s
    covers, shape s.shape + (size,)."""
    av = aval_of(b, s)
    shape = av.shape + (size,)
    sc = fix(b, BroadcastInDim(shape, tuple(range(av.ndim))), _clamp(b, s, dim - size + 1))
    return fix(b, Add(), sc, fix(b, Iota(shape, av.dtype.name, av.ndim)))


# ---- dynamic slices ----


@register
@dataclass(frozen=True)
class DynamicSlice(Primitive):
    """x[s0:s0+sizes[0], s1:s1+sizes[1], ...] with traced scalar starts, each clamped to
    [0, dim - size] (as StableHLO/jax)."""

    sizes: tuple[int, ...]
    linear = True  # in x

    def __post_init__(self):
        object.__setattr__(self, "sizes", ints(self.sizes))

    def abstract_eval(self, x, *starts):
        check_dtype(self.name, x, ALL, "supported")
        _starts(self.name, x, starts)
        if len(self.sizes) != x.ndim or any(not 0 <= s <= d for s, d in zip(self.sizes, x.shape)):
            raise ValueError(f"{self.name}: slice sizes {self.sizes} do not fit operand shape "
                             f"{x.shape}")
        return aval(self.sizes, x.dtype)

    def batch(self, b, primal_in, primal_out, bt):
        # Starts shared by the batch: one DynamicSlice with a leading full window.  Starts per
        # element: one Gather per axis with the positions each window covers.
        x, starts, bx, bs = primal_in[0], primal_in[1:], bt[0], bt[1:]
        n_b = batch_size(b, bt)
        if all(s is None for s in bs):
            z = const(b, 0, starts[0].aval if starts else aval((), "int64"))
            return [fix(b, DynamicSlice((n_b,) + self.sizes), bx, z, *starts)]
        cur, bcur = x, bx
        for d, (size, dim) in enumerate(zip(self.sizes, x.aval.shape)):
            if bs[d] is None:
                idx = _window_index(b, starts[d], size, dim)
                if bcur is None:
                    cur = fix(b, Gather(d), cur, idx)
                else:
                    bcur = _gather_batch(d, b, None, idx, bcur, None)
            else:
                bcur = _gather_batch(d, b, cur, None, bcur, _window_index(b, bs[d], size, dim))
        return [bcur]

    def linearize(self, b, primal_in, primal_out, t):
        if t[0] is None:
            return [None]
        return [lin(b, self, [t[0], *primal_in[1:]], [A] + [F] * (len(primal_in) - 1))]

    def transpose_rule(self, b, ct, inputs, mode):
        if any(mode.active_mask[1:]):
            raise ValueError("DynamicSlice: start indices are never active")
        x = inputs[0]
        z = const(b, 0, x.aval)
        return [lin(b, DynamicUpdateSlice(), [z, ct[0], *inputs[1:]],
                    [F, A] + [F] * (len(inputs) - 1))] + [None] * (len(inputs) - 1)

    def lower(self, lo, out, x, *starts):
        if lo.nb and starts:  # per-point starts: a gather (which clamps the same way)
            r = len(starts)
            dims = (f"offset_dims = [{_csv(range(1, r + 1))}], operand_batching_dims = [0], "
                    f"start_indices_batching_dims = [0], start_index_map = "
                    f"[{_csv(range(1, r + 1))}], index_vector_dim = 1")
            return lo.op("stablehlo.gather", [x, _start_vector(lo, starts)], out,
                         f"dimension_numbers = #stablehlo.gather<{dims}>, indices_are_sorted = "
                         f"false, slice_sizes = {lo.i64_array((1,) + self.sizes)}")
        return lo.op("stablehlo.dynamic_slice", [x, *_same_type(lo, starts)], out,
                     f"slice_sizes = {lo.i64_array(lo.lead(lo.batch) + self.sizes)}")

    def impl(self, x, *starts):
        s = [int(np.clip(v, 0, d - n)) for v, d, n in zip(starts, x.shape, self.sizes)]
        return x[tuple(slice(a, a + n) for a, n in zip(s, self.sizes))]


@register
@dataclass(frozen=True)
class DynamicUpdateSlice(Primitive):
    """x with the window starting at (s0, s1, ...) replaced by `update`; starts clamped to
    [0, dim - update dim] (as StableHLO/jax)."""

    linear = True  # in (x, update) jointly

    def abstract_eval(self, x, upd, *starts):
        check_dtype(self.name, x, ALL, "supported")
        if upd.dtype != x.dtype:
            raise TypeError(f"{self.name}: update dtype {upd.dtype} does not match operand dtype "
                            f"{x.dtype}")
        _starts(self.name, x, starts)
        if upd.ndim != x.ndim or any(u > d for u, d in zip(upd.shape, x.shape)):
            raise ValueError(f"{self.name}: update shape {upd.shape} does not fit operand shape "
                             f"{x.shape}")
        return x

    def batch(self, b, primal_in, primal_out, bt):
        # Starts shared by the batch: one DynamicUpdateSlice with a leading full window.  Starts
        # per element: a Scatter(set) of the flattened update at the flat positions it covers.
        (x, u), starts = primal_in[:2], primal_in[2:]
        n_b = batch_size(b, bt)
        bx = bt[0] if bt[0] is not None else broadcast_batch(b, x, n_b)
        bu = bt[1] if bt[1] is not None else broadcast_batch(b, u, n_b)
        bs = bt[2:]
        if all(s is None for s in bs):
            z = const(b, 0, starts[0].aval if starts else aval((), "int64"))
            return [fix(b, DynamicUpdateSlice(), bx, bu, z, *starts)]
        shape, ushape = x.aval.shape, u.aval.shape
        full = (n_b,) + ushape
        flat = None
        stride = 1
        for d in reversed(range(len(shape))):
            s = bs[d] if bs[d] is not None else starts[d]
            s = fix(b, Convert("int64"), s) if aval_of(b, s).dtype != np.dtype("int64") else s
            sc = _clamp(b, s, shape[d] - ushape[d] + 1)
            sc = fix(b, BroadcastInDim(full, (0,) if bs[d] is not None else ()), sc)
            pos = fix(b, Add(), sc, fix(b, Iota(full, "int64", d + 1)))
            term = fix(b, Mul(), pos, const(b, stride, aval(full, "int64"))) if stride != 1 else pos
            flat = term if flat is None else fix(b, Add(), flat, term)
            stride *= shape[d]
        m = int(np.prod(ushape, dtype=np.int64))
        xf = fix(b, Reshape((n_b, stride)), bx)
        out = _scatter_batch(Scatter(0, "set"), b, None, None, None, xf,
                             fix(b, Reshape((n_b, m)), flat), fix(b, Reshape((n_b, m)), bu))
        return [fix(b, Reshape((n_b,) + shape), out)]

    def linearize(self, b, primal_in, primal_out, t):
        x, u = primal_in[:2]
        if t[0] is None and t[1] is None:
            return [None]
        args = [t[0] if t[0] is not None else const(b, 0, x.aval),
                t[1] if t[1] is not None else const(b, 0, u.aval), *primal_in[2:]]
        return [lin(b, self, args, [t[0] is not None, t[1] is not None] +
                    [F] * (len(primal_in) - 2))]

    def transpose_rule(self, b, ct, inputs, mode):
        if any(mode.active_mask[2:]):
            raise ValueError("DynamicUpdateSlice: start indices are never active")
        u, starts = inputs[1], list(inputs[2:])
        fixed = [F] * len(starts)
        ct_x = ct_u = None
        if mode.active_mask[0]:
            ct_x = lin(b, self, [ct[0], const(b, 0, u.aval), *starts], [A, F] + fixed)
        if mode.active_mask[1]:
            ct_u = lin(b, DynamicSlice(u.shape), [ct[0], *starts], [A] + fixed)
        return [ct_x, ct_u] + [None] * len(starts)

    def lower(self, lo, out, x, upd, *starts):
        if lo.nb and starts:  # per-point starts: starts clamped, then a scatter that sets
            u_av, r = _unbatched(upd, lo), len(starts)
            clamped = []
            for s, d, n in zip(starts, out.shape, u_av.shape):
                el = _unbatched(s, lo).dtype
                clamped.append(lo.op("stablehlo.clamp", [lo.scalar(0, el), s,
                                                         lo.scalar(d - n, el)], aval((), el)))
            dims = (f"update_window_dims = [{_csv(range(1, r + 1))}], input_batching_dims = [0], "
                    f"scatter_indices_batching_dims = [0], scatter_dims_to_operand_dims = "
                    f"[{_csv(range(1, r + 1))}], index_vector_dim = 1")
            st = f"tensor<{_el(out.dtype)}>"
            a, c = lo.fresh(), lo.fresh()
            region = (f'    ^bb0({a}: {st}, {c}: {st}):\n'
                      f'      "stablehlo.return"({c}) : ({st}) -> ()\n    ')
            return lo.op("stablehlo.scatter", [x, _start_vector(lo, clamped), upd], out,
                         f"scatter_dimension_numbers = #stablehlo.scatter<{dims}>, "
                         f"indices_are_sorted = false, unique_indices = false", region=region)
        return lo.op("stablehlo.dynamic_update_slice", [x, upd, *_same_type(lo, starts)], out)

    def impl(self, x, upd, *starts):
        out = np.array(x, copy=True)
        s = [int(np.clip(v, 0, d - n)) for v, d, n in zip(starts, x.shape, upd.shape)]
        out[tuple(slice(a, a + n) for a, n in zip(s, upd.shape))] = upd
        return out
