"""``td.lax.gather`` and the scatters with jax's ``GatherDimensionNumbers``,
``ScatterDimensionNumbers`` and ``GatherScatterMode``, mapped onto tidu's one-axis Gather and
Scatter primitives.

The common form (one indexed axis, collapsed, full slices elsewhere: what ``x[idx]`` and
``x.at[idx]`` produce) is one Gather/Scatter along that axis.  Every other form (several indexed
axes, windows wider than one element, batching dims) is one Gather/Scatter on the flattened
operand at flat positions computed from the clamped starts and an iota per window axis; its
derivatives are those of Gather/Scatter.  ``GatherScatterMode.ONE_HOT`` raises
NotImplementedError.  docs/lax.md."""

from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

from tidu import ops as _P
from tidu.graph.dtypes import BOOL, INTS, kind_of
from tidu.numpy.core import astype, maximum, minimum, reshape, transpose, where
from tidu.numpy.logical import logical_and
from tidu.numpy.sorting import all as _tall
from tidu.trace.tracer import _emit, _lift, _trace_of

__all__ = ["GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "gather",
           "scatter", "scatter_add", "scatter_apply", "scatter_max", "scatter_min",
           "scatter_mul", "scatter_sub"]


class GatherDimensionNumbers(NamedTuple):
    """``jax.lax.GatherDimensionNumbers``."""

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """``jax.lax.ScatterDimensionNumbers``."""

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


class GatherScatterMode(enum.Enum):
    """``jax.lax.GatherScatterMode``: CLIP clamps a window into bounds; FILL_OR_DROP fills an
    out-of-bounds gathered window (drops a scattered one); PROMISE_IN_BOUNDS is CLIP for a
    gather and FILL_OR_DROP for a scatter here, as XLA treats it; ONE_HOT is not supported."""

    CLIP = 1
    FILL_OR_DROP = 2
    PROMISE_IN_BOUNDS = 3
    ONE_HOT = 4

    @staticmethod
    def from_any(s):
        if isinstance(s, GatherScatterMode):
            return s
        if s is None:
            return GatherScatterMode.FILL_OR_DROP
        name = getattr(s, "name", s)
        if name == "clip":
            return GatherScatterMode.CLIP
        if name in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if name == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        if name == "one_hot":
            return GatherScatterMode.ONE_HOT
        try:
            return GatherScatterMode[str(name)]
        except KeyError:
            raise ValueError(f"unknown gather/scatter mode {s!r}; expected 'clip', 'fill', "
                             f"'drop', 'promise_in_bounds' or a GatherScatterMode") from None


def _mode(name, mode):
    m = GatherScatterMode.from_any(mode)
    if m == GatherScatterMode.ONE_HOT:
        raise NotImplementedError(f"{name}: GatherScatterMode.ONE_HOT is not supported by tidu")
    return m


def _ints(v):
    return tuple(int(a) for a in v)


def _iota(t, shape, dim):
    return _emit(t, _P.Iota(tuple(shape), "int64", dim))


def _index(t, idx, name):
    i = _lift(t, idx)
    if i.dtype not in INTS:
        raise TypeError(f"{name}: indices must be integers, got {i.dtype}")
    if i.ndim == 0:
        raise ValueError(f"{name}: indices need at least one axis (the index vector)")
    return astype(i, np.int64) if i.dtype != np.int64 else i


def _rows(x, sizes, index_map, op_batch):
    """k: operand axes k.. are whole, unindexed window axes, kept as rows of a (prefix, row)
    view, so the flat positions only address the first k axes (k >= 1)."""
    k = x.ndim
    while k > 1 and (k - 1) not in index_map and (k - 1) not in op_batch and \
            sizes[k - 1] == x.shape[k - 1]:
        k -= 1
    return k


def _plan(name, x, idx, sizes, index_map, op_batch, idx_batch, clip, k, drop=False):
    """(flat positions of shape B + sizes[:k] into the first k axes of x, in-bounds mask of
    shape B or None) for windows of ``sizes`` starting at idx[..., j] on operand axis
    index_map[j] (B = idx.shape[:-1]); ``drop``: an out-of-bounds window's positions are all
    past the end."""
    t = x._t
    bshape = idx.shape[:-1]
    nb = len(bshape)
    if idx.shape[-1] != len(index_map):
        raise ValueError(f"{name}: the index vector has {idx.shape[-1]} entries but the index "
                         f"map names {len(index_map)} operand axes")
    if len(sizes) != x.ndim:
        raise ValueError(f"{name}: {len(sizes)} window sizes for an operand of rank {x.ndim}")
    for d, n in enumerate(sizes):
        if not 0 <= n <= x.shape[d]:
            raise ValueError(f"{name}: window size {n} out of range for axis {d} of shape "
                             f"{x.shape}")
    sizes_k = tuple(sizes[:k])
    full = bshape + sizes_k
    strides = [int(np.prod(x.shape[d + 1:k])) for d in range(k)]
    # the window's own offsets are a constant of shape sizes[:k] (numpy, at trace time); the
    # starts give one flat base per index (shape B); flat = base + offsets, broadcast once
    offs = np.zeros(sizes_k, np.int64)
    for d, n in enumerate(sizes_k):
        shape = [1] * k
        shape[d] = n
        offs = offs + (np.arange(n, dtype=np.int64) * strides[d]).reshape(shape)
    base, ok = None, None
    for d in range(k):
        if d in index_map:
            start = reshape(_slice_last(idx, index_map.index(d)), bshape)
            hi = x.shape[d] - sizes[d]
            if not clip:
                good = logical_and(start >= 0, start <= hi)
                ok = good if ok is None else logical_and(ok, good)
            else:
                start = minimum(maximum(start, 0), hi)
        elif d in op_batch:
            if sizes[d] != 1:
                raise ValueError(f"{name}: batching axis {d} needs window size 1")
            start = _iota(t, bshape, idx_batch[op_batch.index(d)])
        else:
            continue
        term = start * strides[d] if strides[d] != 1 else start
        base = term if base is None else base + term
    if base is None:
        base = _emit(t, _P.BroadcastInDim(bshape, ()), _lift(t, np.int64(0)))
    if drop and ok is not None:
        base = where(ok, base, _lift(t, np.int64(int(np.prod(x.shape[:k])))))
    flat = _emit(t, _P.BroadcastInDim(full, tuple(range(nb))), base) if sizes_k else base
    if offs.size > 1:
        flat = flat + _emit(t, _P.BroadcastInDim(full, tuple(range(nb, len(full)))),
                            _lift(t, offs))
    return flat, ok


def _slice_last(idx, k):
    st = [0] * idx.ndim
    li = list(idx.shape)
    st[-1], li[-1] = k, k + 1
    return _emit(idx._t, _P.Slice(tuple(st), tuple(li), (1,) * idx.ndim), idx)


def _fill_default(dt):
    dt = np.dtype(dt)
    if kind_of(dt) in "fc":
        return np.nan
    if dt == BOOL:
        return True
    return np.iinfo(dt).min if kind_of(dt) == "i" else np.iinfo(dt).max


def _simple(dn_window, dn_collapsed, index_map, op_batch, sizes, shape, idx):
    """The axis a of the one-axis form (one index, collapsed, full slices elsewhere), or None."""
    if op_batch or len(index_map) != 1 or tuple(dn_collapsed) != tuple(index_map):
        return None
    a = index_map[0]
    if tuple(sizes) != tuple(1 if d == a else n for d, n in enumerate(shape)):
        return None
    return a


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """``jax.lax.gather``: windows of ``slice_sizes`` at the starts in ``start_indices`` (its
    last axis the index vector), laid out by ``dimension_numbers`` (a GatherDimensionNumbers,
    tidu's or jax's).  ``mode`` None or 'fill' fills an out-of-bounds window with fill_value
    (NaN, the dtype's minimum, or True by default); None (jax's PROMISE_IN_BOUNDS) and 'clip'
    clamp it into bounds."""
    dn = dimension_numbers
    offset, collapsed, index_map = (_ints(dn.offset_dims), _ints(dn.collapsed_slice_dims),
                                    _ints(dn.start_index_map))
    op_batch = _ints(getattr(dn, "operand_batching_dims", ()))
    idx_batch = _ints(getattr(dn, "start_indices_batching_dims", ()))
    m = _mode("gather", GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else mode)
    t = _trace_of(operand, start_indices)
    x = _lift(t, operand)
    idx = _index(t, start_indices, "gather")
    sizes = _ints(slice_sizes)
    bshape = idx.shape[:-1]
    nb = len(bshape)
    window = tuple(s for d, s in enumerate(sizes) if d not in collapsed and d not in op_batch)
    rank = nb + len(window)
    if len(offset) != len(window) or any(not 0 <= o < rank for o in offset):
        raise ValueError(f"gather: offset_dims {offset} do not match the {len(window)} window "
                         f"axes of slice_sizes {sizes} (collapsed {collapsed})")
    for d in collapsed:
        if sizes[d] != 1:
            raise ValueError(f"gather: collapsed axis {d} has slice size {sizes[d]}, not 1")
    clip = m != GatherScatterMode.FILL_OR_DROP
    a = _simple(offset, collapsed, index_map, op_batch, sizes, x.shape, idx)
    if a is not None and x.shape[a] > 0:
        i = reshape(idx, bshape)
        g = _emit(t, _P.Gather(a), x, i)  # x.shape[:a] + B + x.shape[a+1:], clamped
        perm = list(range(a, a + nb))
        rest = [d for d in range(g.ndim) if d not in perm]
        ok = None if clip else logical_and(i >= 0, i < x.shape[a])
    else:
        k = _rows(x, sizes, index_map, op_batch)
        flat, ok = _plan("gather", x, idx, sizes, index_map, op_batch, idx_batch, clip, k)
        rows = reshape(x, (int(np.prod(x.shape[:k])), int(np.prod(x.shape[k:]))))
        g = reshape(_emit(t, _P.Gather(0), rows, flat), bshape + window)
        perm = list(range(nb))
        rest = list(range(nb, nb + len(window)))
    # output: window axes at `offset`, batch axes elsewhere in order
    order, bi, wi = [], iter(perm), iter(rest)
    for p in range(rank):
        order.append(next(wi) if p in offset else next(bi))
    out = g if order == list(range(rank)) else transpose(g, tuple(order))
    if ok is not None:
        fv = _fill_default(x.dtype) if fill_value is None else fill_value
        okb = ok if not nb else _emit(t, _P.BroadcastInDim(out.shape, _batch_pos(offset, rank)),
                                      ok)
        out = where(okb, out, _lift(t, np.asarray(fv).astype(x.dtype)))
    return out


def _batch_pos(offset, rank):
    return tuple(p for p in range(rank) if p not in offset)


# ---- scatter ----

def _scatter(name, how, operand, scatter_indices, updates, dn, mode):
    window_dims = _ints(dn.update_window_dims)
    inserted = _ints(dn.inserted_window_dims)
    index_map = _ints(dn.scatter_dims_to_operand_dims)
    op_batch = _ints(getattr(dn, "operand_batching_dims", ()))
    idx_batch = _ints(getattr(dn, "scatter_indices_batching_dims", ()))
    m = _mode(name, mode)
    t = _trace_of(operand, scatter_indices, updates)
    x = _lift(t, operand)
    idx = _index(t, scatter_indices, name)
    u = _lift(t, updates)
    if u.dtype != x.dtype:
        u = astype(u, x.dtype)
    bshape = idx.shape[:-1]
    nb = len(bshape)
    scatter_dims = [d for d in range(u.ndim) if d not in window_dims]
    if len(scatter_dims) != nb or any(u.shape[d] != n for d, n in zip(scatter_dims, bshape)):
        raise ValueError(f"{name}: updates of shape {u.shape} with update_window_dims "
                         f"{window_dims} do not match the index batch shape {bshape}")
    win_axes = [d for d in range(x.ndim) if d not in inserted and d not in op_batch]
    if len(win_axes) != len(window_dims):
        raise ValueError(f"{name}: {len(window_dims)} update window dims for the "
                         f"{len(win_axes)} operand axes not inserted ({inserted})")
    sizes = [1] * x.ndim
    for d, w in zip(win_axes, window_dims):
        sizes[d] = u.shape[w]
    # updates in B + W' order
    u = transpose(u, tuple(scatter_dims) + window_dims) if \
        tuple(scatter_dims) + window_dims != tuple(range(u.ndim)) else u
    clip = m == GatherScatterMode.CLIP
    a = _simple(window_dims, inserted, index_map, op_batch, sizes, x.shape, idx)
    if a is not None:
        i = reshape(idx, bshape)
        if clip:
            i = minimum(maximum(i, 0), x.shape[a] - 1)
        # Scatter wants x.shape[:a] + B + x.shape[a+1:]
        perm = tuple(range(nb, nb + a)) + tuple(range(nb)) + tuple(range(nb + a, u.ndim))
        uu = u if perm == tuple(range(u.ndim)) else transpose(u, perm)
        return _emit(t, _P.Scatter(a, how), x, i, uu)
    k = _rows(x, sizes, index_map, op_batch)
    flat, _ = _plan(name, x, idx, tuple(sizes), index_map, op_batch, idx_batch, clip, k,
                    drop=not clip)
    nrow, row = int(np.prod(x.shape[:k])), int(np.prod(x.shape[k:]))
    y = _emit(t, _P.Scatter(0, how), reshape(x, (nrow, row)), reshape(flat, (flat.size,)),
              reshape(u, (flat.size, row)))
    return reshape(y, x.shape)


def _doc(how):
    return (f"``jax.lax.scatter{'' if how == 'set' else '_' + how}``: ``updates`` combined "
            f"({how}) into operand at the windows that ``scatter_indices`` (last axis the index "
            f"vector) and ``dimension_numbers`` name; ``mode`` None/'drop' drops an "
            f"out-of-bounds window, 'clip' clamps it.")


def _make(how, name):
    def f(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
          unique_indices=False, mode=None):
        return _scatter(name, how, operand, scatter_indices, updates, dimension_numbers, mode)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = _doc(how)
    return f


scatter = _make("set", "scatter")
scatter_add = _make("add", "scatter_add")
scatter_mul = _make("mul", "scatter_mul")
scatter_min = _make("min", "scatter_min")
scatter_max = _make("max", "scatter_max")


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """``jax.lax.scatter_sub``: scatter_add of -updates."""
    return _scatter("scatter_sub", "add", operand, scatter_indices, -_lift(
        _trace_of(updates), updates), dimension_numbers, mode)


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """``jax.lax.scatter_apply``: func applied to the operand's elements at the scattered
    windows.  tidu gathers them, applies func once, and scatters the results back, so a position
    named by several indices gets func once (XLA applies it once per index)."""
    dn = dimension_numbers
    t = _trace_of(operand, scatter_indices)
    x = _lift(t, operand)
    ones = _emit(t, _P.BroadcastInDim(tuple(update_shape), ()), _lift(t, np.array(True)))
    hit = _scatter("scatter_apply", "set", _emit(t, _P.BroadcastInDim(x.shape, ()),
                                                 _lift(t, np.array(False))),
                   scatter_indices, ones, dn, mode)
    return where(hit, func(x), x)


_ = (BOOL, _tall)
