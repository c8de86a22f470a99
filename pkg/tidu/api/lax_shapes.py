"""``td.lax``'s structural names (jax.lax's spelling and semantics): broadcasting, reshaping,
transposing, reversing, padding with lax's ``(low, high, interior)`` config, static and dynamic
slices by dimension, concatenation, iota and ``full``, ``split``/``tile``/``collapse``, the
contractions ``dot_general``/``dot``/``batch_matmul`` and the pure shape helpers.  Each is one
tidu primitive or a short composite (docs/lax.md)."""

from __future__ import annotations

import builtins
import operator
from typing import NamedTuple

import numpy as np

from tidu import ops as _P
from tidu.graph.dtypes import INTS, kind_of
from tidu.numpy.conv import _pads
from tidu.numpy.core import astype, concatenate, reshape, transpose, where
from tidu.numpy.creation import full as _full
from tidu.numpy.creation import full_like as _full_like
from tidu.numpy.shapes import tile as _tile
from tidu.numpy.take import dynamic_slice, dynamic_update_slice
from tidu.trace.tracer import _current, _emit, _lift, _trace_of

__all__ = [
    "DotDimensionNumbers", "Precision", "batch_matmul", "broadcast", "broadcast_in_dim",
    "broadcast_shapes", "broadcast_to_rank", "broadcasted_iota", "collapse", "concatenate", "dot",
    "dot_general", "dynamic_index_in_dim", "dynamic_slice_in_dim", "dynamic_update_index_in_dim",
    "dynamic_update_slice_in_dim", "expand_dims", "full", "full_like", "index_in_dim", "iota",
    "pad", "padtype_to_pads", "rev", "slice_in_dim", "split", "squeeze", "tile",
]  # and _reshape, _transpose, _slice, _concatenate, which td.lax names without the underscore


def full(shape, fill_value, dtype=None, *, sharding=None):
    """``jax.lax.full``: shape filled with fill_value (``sharding`` must be None: tidu computes
    on the host)."""
    return _full(shape, fill_value, dtype, out_sharding=sharding)


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """``jax.lax.full_like``: fill_value in x's shape and dtype (or those given)."""
    return _full_like(x, fill_value, dtype, shape, out_sharding=sharding)


def tile(operand, reps):
    """``jax.lax.tile``: operand repeated reps times along each axis."""
    return _tile(operand, reps)


def _tr(x):
    return _lift(_trace_of(x), x)


def _axis(name, a, ndim):
    a = operator.index(a)
    if not -ndim <= a < builtins.max(ndim, 1):
        raise ValueError(f"{name}: axis {a} is out of range for rank {ndim}")
    return a % builtins.max(ndim, 1)


# ---- broadcasting ----

def broadcast_in_dim(operand, shape, broadcast_dimensions, *, out_sharding=None):
    """``jax.lax.broadcast_in_dim``: operand axis i becomes output axis broadcast_dimensions[i]
    (its size equal, or 1 and broadcast)."""
    x = _tr(operand)
    shape, dims = tuple(int(d) for d in shape), tuple(int(d) for d in broadcast_dimensions)
    if x.shape == shape and dims == tuple(range(len(shape))):
        return x
    return _emit(x._t, _P.BroadcastInDim(shape, dims), x)


def broadcast(operand, sizes, *, out_sharding=None):
    """``jax.lax.broadcast``: new leading axes of the given sizes."""
    x = _tr(operand)
    sizes = tuple(int(d) for d in sizes)
    return broadcast_in_dim(x, sizes + x.shape, tuple(range(len(sizes), len(sizes) + x.ndim)))


def broadcast_to_rank(x, rank: int):
    """``jax.lax.broadcast_to_rank``: leading unit axes up to ``rank``."""
    x = _tr(x)
    if x.ndim >= rank:
        return x
    return reshape(x, (1,) * (rank - x.ndim) + x.shape)


def broadcast_shapes(*shapes):
    """``jax.lax.broadcast_shapes``: numpy's broadcast of the shapes, as a tuple."""
    return tuple(int(d) for d in np.broadcast_shapes(*(tuple(s) for s in shapes)))


# ---- reshaping ----

def _reshape(operand, new_sizes, dimensions=None, *, out_sharding=None):
    """``jax.lax.reshape``: operand (first transposed by ``dimensions``) reshaped, row-major."""
    x = _tr(operand)
    if dimensions is not None:
        x = transpose(x, tuple(int(d) for d in dimensions))
    return reshape(x, tuple(int(d) for d in new_sizes))


def squeeze(array, dimensions):
    """``jax.lax.squeeze``: remove the named unit axes."""
    x = _tr(array)
    dims = sorted({_axis("squeeze", d, x.ndim) for d in dimensions})
    for d in dims:
        if x.shape[d] != 1:
            raise ValueError(f"squeeze: axis {d} of shape {x.shape} is not of size 1")
    return reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in dims))


def expand_dims(array, dimensions):
    """``jax.lax.expand_dims``: unit axes inserted at the named positions of the result."""
    x = _tr(array)
    nd = x.ndim + len(dimensions)
    dims = {_axis("expand_dims", d, nd) for d in dimensions}
    if len(dims) != len(dimensions):
        raise ValueError(f"expand_dims: repeated dimensions {tuple(dimensions)}")
    it = iter(x.shape)
    return reshape(x, tuple(1 if i in dims else next(it) for i in range(nd)))


def _transpose(operand, permutation):
    """``jax.lax.transpose``: axes permuted (output axis i is operand axis permutation[i])."""
    x = _tr(operand)
    perm = tuple(int(p) for p in permutation)
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"transpose: permutation {perm} is not a permutation of the {x.ndim} "
                         f"axes of shape {x.shape}")
    return x if perm == tuple(range(x.ndim)) else transpose(x, perm)


def rev(operand, dimensions):
    """``jax.lax.rev``: the named axes reversed (one Rev primitive)."""
    x = _tr(operand)
    dims = tuple(sorted({_axis("rev", d, x.ndim) for d in dimensions}))
    return x if not dims else _emit(x._t, _P.Rev(dims), x)


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """``jax.lax.collapse``: axes [start, stop) merged into one."""
    x = _tr(operand)
    lo = start_dimension % builtins.max(x.ndim, 1) if start_dimension < 0 else start_dimension
    hi = x.ndim if stop_dimension is None else stop_dimension
    hi = hi + x.ndim if hi < 0 else hi
    if not 0 <= lo <= hi <= x.ndim:
        raise ValueError(f"collapse: dimensions [{start_dimension}, {stop_dimension}) out of "
                         f"range for shape {x.shape}")
    return reshape(x, x.shape[:lo] + (int(np.prod(x.shape[lo:hi])),) + x.shape[hi:])


# ---- padding and slicing ----

def pad(operand, padding_value, padding_config):
    """``jax.lax.pad``: ``(low, high, interior)`` per axis, padded with padding_value; negative
    low/high crop (one Pad primitive, a Slice for the crop, a Select for a nonzero value)."""
    x = _tr(operand)
    cfg = [tuple(int(v) for v in c) for c in padding_config]
    if len(cfg) != x.ndim or any(len(c) != 3 for c in cfg):
        raise ValueError(f"pad: padding_config {padding_config} needs one (low, high, interior) "
                         f"triple per axis of shape {x.shape}")
    if any(c[2] < 0 for c in cfg):
        raise ValueError(f"pad: negative interior padding in {padding_config}")
    lo = tuple(builtins.max(c[0], 0) for c in cfg)
    hi = tuple(builtins.max(c[1], 0) for c in cfg)
    it = tuple(c[2] for c in cfg)
    t = x._t
    v = _lift(t, padding_value)
    if v.ndim:
        raise ValueError(f"pad: padding_value must be a scalar, got shape {v.shape}")
    if v.dtype != x.dtype:
        v = astype(v, x.dtype)
    out = _emit(t, _P.Pad(lo, hi, it), x)
    if _nonzero(padding_value):
        ones = _emit(t, _P.BroadcastInDim(x.shape, ()), _lift(t, np.array(True)))
        out = where(_emit(t, _P.Pad(lo, hi, it), ones), out, v)
    if any(c[0] < 0 or c[1] < 0 for c in cfg):
        start = tuple(-builtins.min(c[0], 0) for c in cfg)
        limit = tuple(n + builtins.min(c[1], 0) for n, c in zip(out.shape, cfg))
        if any(b < a for a, b in zip(start, limit)):
            raise ValueError(f"pad: padding_config {padding_config} crops shape {x.shape} "
                             f"below zero")
        out = _emit(t, _P.Slice(start, limit, (1,) * x.ndim), out)
    return out


def _nonzero(v) -> bool:
    """Whether a padding value may be nonzero (a traced one may)."""
    if hasattr(v, "_t"):
        return True
    return bool(np.any(np.asarray(v) != 0))


def _slice(operand, start_indices, limit_indices, strides=None):
    """``jax.lax.slice``: operand[start:limit:stride] per axis (static, in range)."""
    x = _tr(operand)
    st = tuple(int(s) for s in start_indices)
    li = tuple(int(s) for s in limit_indices)
    sd = (1,) * x.ndim if strides is None else tuple(int(s) for s in strides)
    if not len(st) == len(li) == len(sd) == x.ndim:
        raise ValueError(f"slice: start {st}, limit {li} and strides {sd} must each have one "
                         f"entry per axis of shape {x.shape}")
    for a, b, s, n in zip(st, li, sd, x.shape):
        if not (0 <= a <= b <= n and s >= 1):
            raise ValueError(f"slice: start {st}, limit {li}, strides {sd} out of range for "
                             f"shape {x.shape}")
    if st == (0,) * x.ndim and li == x.shape and sd == (1,) * x.ndim:
        return x
    return _emit(x._t, _P.Slice(st, li, sd), x)


def slice_in_dim(operand, start_index, limit_index, stride: int = 1, axis: int = 0):
    """``jax.lax.slice_in_dim``: a static slice along one axis (None and negative indices as
    Python's)."""
    x = _tr(operand)
    ax = _axis("slice_in_dim", axis, x.ndim)
    n = x.shape[ax]
    a = 0 if start_index is None else int(start_index)
    b = n if limit_index is None else int(limit_index)
    a, b = (a + n if a < 0 else a), (b + n if b < 0 else b)
    st, li, sd = [0] * x.ndim, list(x.shape), [1] * x.ndim
    st[ax], li[ax], sd[ax] = a, b, int(stride)
    return _slice(x, st, li, sd)


def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True):
    """``jax.lax.index_in_dim``: one static index along an axis (kept as a unit axis or not)."""
    x = _tr(operand)
    ax = _axis("index_in_dim", axis, x.ndim)
    n = x.shape[ax]
    i = int(index)
    i = i + n if i < 0 else i
    if not 0 <= i < n:
        raise IndexError(f"index_in_dim: index {index} out of bounds for axis {ax} of size {n}")
    out = slice_in_dim(x, i, i + 1, 1, ax)
    return out if keepdims else reshape(out, x.shape[:ax] + x.shape[ax + 1:])


def _starts(x, ax, start):
    t = x._t
    z = _lift(t, np.int32(0))
    return [start if k == ax else z for k in range(x.ndim)]


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True):
    """``jax.lax.dynamic_slice_in_dim``: a dynamic_slice along one axis (a traced start)."""
    x = _tr(operand)
    ax = _axis("dynamic_slice_in_dim", axis, x.ndim)
    sizes = list(x.shape)
    sizes[ax] = int(slice_size)
    return dynamic_slice(x, _starts(x, ax, start_index), sizes)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True):
    """``jax.lax.dynamic_index_in_dim``: one traced index along an axis."""
    x = _tr(operand)
    ax = _axis("dynamic_index_in_dim", axis, x.ndim)
    out = dynamic_slice_in_dim(x, index, 1, ax)
    return out if keepdims else reshape(out, x.shape[:ax] + x.shape[ax + 1:])


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int, *,
                                allow_negative_indices: bool = True):
    """``jax.lax.dynamic_update_slice_in_dim``: update written at a traced start on one axis."""
    x = _tr(operand)
    ax = _axis("dynamic_update_slice_in_dim", axis, x.ndim)
    return dynamic_update_slice(x, update, _starts(x, ax, start_index))


def dynamic_update_index_in_dim(operand, update, index, axis: int, *,
                                allow_negative_indices: bool = True):
    """``jax.lax.dynamic_update_index_in_dim``: update (with or without the unit axis) written
    at a traced index on one axis."""
    x = _tr(operand)
    ax = _axis("dynamic_update_index_in_dim", axis, x.ndim)
    u = _lift(x._t, update)
    if u.ndim == x.ndim - 1:
        u = reshape(u, u.shape[:ax] + (1,) + u.shape[ax:])
    return dynamic_update_slice_in_dim(x, u, index, ax)


def _concatenate(operands, dimension: int):
    """``jax.lax.concatenate``: operands joined along ``dimension``."""
    ops = list(operands)
    if not ops:
        raise ValueError("concatenate: needs at least one operand")
    return concatenate(ops, axis=int(dimension))


def split(operand, sizes, axis: int = 0):
    """``jax.lax.split``: consecutive pieces of the given sizes along an axis (static slices)."""
    x = _tr(operand)
    ax = _axis("split", axis, x.ndim)
    sizes = [int(s) for s in sizes]
    if builtins.sum(sizes) != x.shape[ax] or any(s < 0 for s in sizes):
        raise ValueError(f"split: sizes {sizes} do not add up to axis {ax} of shape {x.shape}")
    out, at = [], 0
    for s in sizes:
        out.append(slice_in_dim(x, at, at + s, 1, ax))
        at += s
    return out


# ---- creation ----

def iota(dtype, size: int):
    """``jax.lax.iota``: 0, 1, ..., size - 1 of ``dtype``."""
    return broadcasted_iota(dtype, (int(size),), 0)


def broadcasted_iota(dtype, shape, dimension: int, *, out_sharding=None):
    """``jax.lax.broadcasted_iota``: the index along ``dimension``, broadcast over ``shape``."""
    shape = tuple(int(d) for d in shape)
    dt = np.dtype(dtype)
    ax = _axis("broadcasted_iota", dimension, len(shape))
    t = _current()
    if dt in INTS or kind_of(dt) in "fc":
        base = "int32" if dt == np.int32 else "int64"
        out = _emit(t, _P.Iota(shape, base, ax))
        return out if np.dtype(base) == dt else astype(out, dt)
    raise TypeError(f"broadcasted_iota: unsupported dtype {dt}")


# ---- contractions ----

class Precision:
    """``jax.lax.Precision``: accepted and ignored (tidu's kernels run in the operand dtype)."""

    DEFAULT, HIGH, HIGHEST = "DEFAULT", "HIGH", "HIGHEST"


class DotDimensionNumbers(NamedTuple):
    """``(lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)``: jax's dot_general
    dimension numbers (a plain nested tuple works as well)."""

    contracting: tuple
    batch: tuple


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, *,
                out_sharding=None):
    """``jax.lax.dot_general``: one DotGeneral; output axes batch, lhs free, rhs free.
    ``precision`` is accepted and ignored; ``preferred_element_type`` converts the result (and
    promotes mixed operand dtypes first)."""
    (lc, rc), (lb, rb) = dimension_numbers
    t = _trace_of(lhs, rhs)
    x, y = _lift(t, lhs), _lift(t, rhs)
    if x.dtype != y.dtype:
        dt = np.result_type(x.dtype, y.dtype)
        x, y = astype(x, dt), astype(y, dt)
    norm = [tuple(_axis("dot_general", a, v.ndim) for a in d)
            for d, v in ((lc, x), (rc, y), (lb, x), (rb, y))]
    if preferred_element_type is not None:
        pt = np.dtype(preferred_element_type)
        if kind_of(x.dtype) in "fc" and kind_of(pt) in "fc" and pt.itemsize > x.dtype.itemsize:
            x, y = astype(x, pt), astype(y, pt)
    out = _emit(t, _P.DotGeneral(*norm), x, y)
    if preferred_element_type is not None and out.dtype != np.dtype(preferred_element_type):
        out = astype(out, np.dtype(preferred_element_type))
    return out


def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None,
        out_sharding=None):
    """``jax.lax.dot``: vector/matrix products (lhs's last axis with rhs's first), or
    dot_general when dimension_numbers is given."""
    if dimension_numbers is not None:
        return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type)
    t = _trace_of(lhs, rhs)
    x, y = _lift(t, lhs), _lift(t, rhs)
    if not (1 <= x.ndim <= 2 and 1 <= y.ndim <= 2) or x.shape[-1] != y.shape[0]:
        raise TypeError(f"dot: incompatible shapes for dot: got {x.shape} and {y.shape}")
    return dot_general(x, y, (((x.ndim - 1,), (0,)), ((), ())), precision,
                       preferred_element_type)


def batch_matmul(lhs, rhs, precision=None):
    """``jax.lax.batch_matmul``: matmul over equal leading batch axes."""
    t = _trace_of(lhs, rhs)
    x, y = _lift(t, lhs), _lift(t, rhs)
    if x.ndim < 2 or x.ndim != y.ndim or x.shape[:-2] != y.shape[:-2]:
        raise ValueError(f"batch_matmul: operands need equal rank >= 2 and equal batch axes, "
                         f"got {x.shape} and {y.shape}")
    b = tuple(range(x.ndim - 2))
    return dot_general(x, y, (((x.ndim - 1,), (y.ndim - 2,)), (b, b)), precision)


# ---- shape helpers (plain Python) ----

def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """``jax.lax.padtype_to_pads``: 'SAME', 'SAME_LOWER' or 'VALID' as (low, high) pairs."""
    return _pads(padding, tuple(in_shape), tuple(window_shape), tuple(window_strides))


