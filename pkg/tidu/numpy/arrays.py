"""jax.numpy's remaining array-manipulation names: ``append``, ``insert``, ``delete``, ``resize``,
``diagflat``, ``fill_diagonal``, ``broadcast_arrays``, ``broadcast_shapes``, ``unstack``,
``hsplit``/``vsplit``/``dsplit``, ``rollaxis``, ``choose``, ``compress``, ``extract``, ``place``,
``put``, ``trim_zeros``, ``ravel_multi_index``, ``unravel_index``, ``indices``, ``mask_indices``
and the index helpers ``mgrid``, ``ogrid``, ``r_``, ``c_``, ``s_``, ``index_exp``.

Composites of Slice/Concatenate/Gather/Scatter and elementwise primitives, with jax's semantics:
positions (``insert``/``delete``'s `obj`, ``trim_zeros``' input) are static, value-dependent
result sizes take ``size=`` and ``fill_value=`` (``compress``, ``extract``), out-of-range modes
are jax's (``choose``/``ravel_multi_index``: 'clip' or 'wrap' under a trace). Outside a trace
(no traced argument) each is numpy's own.
"""

from __future__ import annotations

import math

import numpy as np

from tidu.graph.dtypes import BOOL, kind_of
from tidu.numpy import core, creation, shapes, sorting, take
from tidu.numpy.selection import nonzero
from tidu.numpy.shapes import _axis, _numpy_outside, _traced
from tidu.trace.tracer import Tracer, _lift, _trace_of

__all__ = [
    "append", "broadcast_arrays", "broadcast_shapes", "c_", "choose", "compress", "delete",
    "diagflat", "dsplit", "extract", "fill_diagonal", "hsplit", "index_exp", "indices", "insert",
    "mask_indices", "mgrid", "ogrid", "place", "put", "r_", "ravel_multi_index", "resize",
    "rollaxis", "s_", "trim_zeros", "unravel_index", "unstack", "vsplit",
]


def _tr(x) -> Tracer:
    return _lift(_trace_of(x), x)


def _take(x, idx, axis):
    return take.take(x, np.asarray(idx, np.int64), axis=axis, mode="clip")


@_numpy_outside(np.append)
def append(arr, values, axis=None):
    """arr and values concatenated along axis (both flattened when None)."""
    t = _trace_of(arr, values)
    x, v = _lift(t, arr), _lift(t, values)
    if axis is None:
        return core.concatenate([shapes.ravel(x), shapes.ravel(v)], 0)
    return core.concatenate([x, v], axis)


def _static_positions(name, obj, n):
    if isinstance(obj, Tracer):
        raise TypeError(f"{name}: the positions must be static (numpy ints, slices or lists), "
                        "not a traced value")
    if isinstance(obj, slice):
        return np.arange(*obj.indices(n))
    idx = np.asarray(obj)
    if idx.dtype == BOOL:
        if idx.shape != (n,):
            raise ValueError(f"{name}: a boolean obj must have length {n}")
        return np.flatnonzero(idx)
    if kind_of(idx.dtype) not in "iu":
        raise TypeError(f"{name}: obj must hold integers, got {idx.dtype}")
    return idx


@_numpy_outside(np.insert)
def insert(arr, obj, values, axis=None):
    """values inserted before the static positions `obj` along axis (numpy's placement)."""
    t = _trace_of(arr, values)
    x = _lift(t, arr)
    if axis is None:
        x, axis = shapes.ravel(x), 0
    ax = _axis(axis, x.ndim, "insert")
    n = x.shape[ax]
    idx = _static_positions("insert", obj, n + 1)
    if np.any((idx < -n) | (idx > n)):
        raise IndexError(f"insert: index out of bounds for axis {ax} with size {n}")
    idx = np.where(idx < 0, idx + n, idx)
    v = core.astype(_lift(t, values), x.dtype)
    if idx.ndim == 0:
        v = core.reshape(v, (1,) * (x.ndim - v.ndim) + v.shape) if v.ndim < x.ndim else v
        v = shapes.moveaxis(v, 0, ax) if v.ndim else v
        k = v.shape[ax]
    else:
        k = idx.size
    shape = list(x.shape)
    shape[ax] = k
    v = core.broadcast_to(v, tuple(shape))
    order = np.insert(np.arange(n), idx.ravel() if idx.ndim else int(idx), n + np.arange(k))
    return _take(core.concatenate([x, v], ax), order, ax)


@_numpy_outside(np.delete)
def delete(arr, obj, axis=None, *, assume_unique_indices: bool = False):
    """arr without the static positions `obj` along axis (flattened when None)."""
    x = _tr(arr)
    if axis is None:
        x, axis = shapes.ravel(x), 0
    ax = _axis(axis, x.ndim, "delete")
    n = x.shape[ax]
    idx = _static_positions("delete", obj, n)
    if np.any((idx < -n) | (idx >= n)):
        raise IndexError(f"delete: index out of bounds for axis {ax} with size {n}")
    keep = np.delete(np.arange(n), idx)
    return _take(x, keep, ax)


@_numpy_outside(np.resize)
def resize(a, new_shape):
    """The flattened array repeated (or cut) to new_shape's size, in that shape."""
    x = shapes.ravel(_tr(a))
    shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(new_shape)
    if any(s < 0 for s in shape):
        raise ValueError("resize: all elements of new_shape must be non-negative")
    size = math.prod(shape)
    if x.size == 0 or size == 0:
        return core.broadcast_to(core.astype(_lift(x._t, 0), x.dtype), shape)
    reps = -(-size // x.size)
    return core.reshape(shapes.tile(x, reps)[:size], shape)


@_numpy_outside(np.diagflat)
def diagflat(v, k: int = 0):
    """A 2-D array with the flattened v on its k-th diagonal."""
    return creation.diag(shapes.ravel(_tr(v)), k)


def fill_diagonal(a, val, wrap: bool = False, *, inplace: bool = True):
    """a with its main diagonal set to val (repeated as needed), as jax's: ``inplace=False``
    is required (traced values are immutable)."""
    if inplace:
        raise ValueError("fill_diagonal: tidu's arrays are immutable; pass inplace=False to "
                         "get the updated array")
    x = _tr(a)
    if x.ndim < 2:
        raise ValueError("fill_diagonal: array must be at least 2-d")
    if x.ndim > 2 and len(set(x.shape)) != 1:
        raise ValueError("fill_diagonal: all dimensions of an array of more than 2 must be "
                         "equal")
    if wrap:
        raise NotImplementedError("fill_diagonal: wrap=True is not implemented (as jax's)")
    if x.ndim == 2:
        n, m = x.shape
        flat = np.arange(0, min(n, m) * m, m + 1)
    else:
        n = x.shape[0]
        flat = np.arange(n) * sum(n ** i for i in range(x.ndim))
    v = shapes.ravel(core.astype(_lift(x._t, val), x.dtype))
    if v.size == 0:
        return x
    v = _take(v, np.arange(flat.size) % v.size, 0)
    return core.reshape(shapes.ravel(x).at[flat].set(v), x.shape)


def broadcast_shapes(*shapes_) -> tuple[int, ...]:
    """The shape the given shapes broadcast to (numpy's rule; a ValueError otherwise)."""
    return tuple(np.broadcast_shapes(*[(s,) if isinstance(s, (int, np.integer)) else tuple(s)
                                       for s in shapes_]))


def broadcast_arrays(*args):
    """The arguments broadcast to one shape (a list, as jax's)."""
    if not _traced() and not shapes._has_tracer(args):
        return list(np.broadcast_arrays(*args))
    t = _trace_of(*args)
    xs = [_lift(t, a) for a in args]
    shape = broadcast_shapes(*[x.shape for x in xs])
    return [x if x.shape == shape else core.broadcast_to(x, shape) for x in xs]


def unstack(x, /, *, axis: int = 0):
    """The slices of x along axis, as a tuple."""
    if not _traced() and not isinstance(x, Tracer):
        return tuple(np.moveaxis(np.asarray(x), axis, 0))
    x = _tr(x)
    if x.ndim == 0:
        raise ValueError("unstack: input must be at least 1-d")
    ax = _axis(axis, x.ndim, "unstack")
    return tuple(shapes.squeeze(shapes._slice(x, ax, i, i + 1), ax) for i in range(x.shape[ax]))


@_numpy_outside(np.hsplit)
def hsplit(ary, indices_or_sections):
    """split along axis 1 (axis 0 for 1-D arrays)."""
    x = _tr(ary)
    return shapes.split(x, indices_or_sections, 1 if x.ndim > 1 else 0)


@_numpy_outside(np.vsplit)
def vsplit(ary, indices_or_sections):
    """split along axis 0 (2-D and above)."""
    x = _tr(ary)
    if x.ndim < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return shapes.split(x, indices_or_sections, 0)


@_numpy_outside(np.dsplit)
def dsplit(ary, indices_or_sections):
    """split along axis 2 (3-D and above)."""
    x = _tr(ary)
    if x.ndim < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return shapes.split(x, indices_or_sections, 2)


@_numpy_outside(np.rollaxis)
def rollaxis(a, axis: int, start: int = 0):
    """numpy's rollaxis: axis moved to stand before `start`."""
    x = _tr(a)
    n = x.ndim
    axis = _axis(axis, n, "rollaxis")
    if not -n <= start <= n:
        raise ValueError(f"rollaxis: start {start} out of range for {n} dimensions")
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    if axis == start:
        return x
    axes = [i for i in range(n) if i != axis]
    axes.insert(start, axis)
    return core.transpose(x, tuple(axes))


def choose(a, choices, out=None, mode: str = "raise"):
    """choices[a[i]][i] with a and the choices broadcast together. Under a trace mode must be
    'clip' or 'wrap' (jax's rule: 'raise' needs concrete values)."""
    if out is not None:
        raise NotImplementedError("choose: the 'out' argument is not supported")
    if not _traced() and not shapes._has_tracer([a, choices]):
        return np.choose(a, choices, mode=mode)
    t = _trace_of(a, *choices)
    idx = _lift(t, a)
    if kind_of(idx.dtype) not in "iu":
        raise ValueError("choose: `a` array must be integer typed")
    n = len(choices)
    if mode == "raise":
        raise ValueError("choose: mode='raise' needs concrete indices; under a trace use "
                         "mode='wrap' or mode='clip'")
    if mode == "wrap":
        idx = idx % n
    elif mode == "clip":
        idx = core.minimum(core.maximum(idx, 0), n - 1)
    else:
        raise ValueError(f"choose: mode={mode!r} not understood; must be 'raise', 'wrap' or "
                         "'clip'")
    idx, *cs = broadcast_arrays(idx, *choices)
    stacked = shapes.stack(cs, 0)
    return shapes.squeeze(take.take_along_axis(stacked, shapes.expand_dims(idx, 0), 0,
                                               mode="clip"), 0)


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of a along axis where condition is true. A traced condition needs ``size``
    (the result's length along axis, padded with ``fill_value``), as jax's under jit."""
    if out is not None:
        raise NotImplementedError("compress: the 'out' argument is not supported")
    if not _traced() and not shapes._has_tracer([condition, a]):
        r = np.compress(condition, a, axis)
        return r if size is None else _pad_numpy(r, axis, size, fill_value)
    x = _tr(a)
    if axis is None:
        x, axis = shapes.ravel(x), 0
    ax = _axis(axis, x.ndim, "compress")
    n = x.shape[ax]
    if not isinstance(condition, Tracer):
        c = np.asarray(condition).astype(bool)
        if c.ndim != 1:
            raise ValueError("compress: condition must be a 1D array")
        if c[n:].any():
            raise ValueError("compress: condition contains entries that are out of bounds")
        keep = np.flatnonzero(c[:n])
        if size is None:
            return _take(x, keep, ax)
        if not 0 <= size <= n:
            raise ValueError(f"compress: size must be in [0, {n}], got {size}")
        c = _lift(x._t, c)
    else:
        if size is None:
            raise ValueError("compress: a traced condition needs size= (the result's length "
                             "is value-dependent)")
        if not 0 <= size <= n:
            raise ValueError(f"compress: size must be in [0, {n}], got {size}")
        c = condition if condition.dtype == BOOL else condition != 0
        if c.ndim != 1:
            raise ValueError("compress: condition must be a 1D array")
    c = c[:n]
    x = shapes._slice(x, ax, 0, c.shape[0])
    mask = core.reshape(c, tuple(c.shape[0] if i == ax else 1 for i in range(x.ndim)))
    x = core.where(mask, x, core.astype(_lift(x._t, fill_value), x.dtype))
    order = sorting.argsort(c, stable=True, descending=True)
    order = shapes._slice(order, 0, 0, size)
    return take.take(x, order, axis=ax, mode="clip")


def _pad_numpy(r, axis, size, fill_value):
    ax = 0 if axis is None else axis
    n = r.shape[ax]
    if n >= size:
        return np.take(r, np.arange(size), axis=ax)
    pad = [(0, 0)] * r.ndim
    pad[ax] = (0, size - n)
    return np.pad(r, pad, constant_values=fill_value)


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of arr where condition is true, flattened (``size=`` under a trace)."""
    if not _traced() and not shapes._has_tracer([condition, arr]):
        r = np.extract(condition, arr)
        return r if size is None else _pad_numpy(r, None, size, fill_value)
    c = condition if isinstance(condition, Tracer) else np.asarray(condition)
    c = shapes.ravel(c) if isinstance(c, Tracer) else c.ravel()
    return compress(c, shapes.ravel(_tr(arr)), size=size, fill_value=fill_value)


def place(arr, mask, vals, *, inplace: bool = True):
    """arr with the positions where mask is true set to vals in order (repeated as needed),
    as jax's: ``inplace=False`` is required."""
    if inplace:
        raise ValueError("place: tidu's arrays are immutable; pass inplace=False to get the "
                         "updated array")
    t = _trace_of(arr, mask, vals)
    x, m = _lift(t, arr), _lift(t, mask)
    v = shapes.ravel(core.astype(_lift(t, vals), x.dtype))
    if x.size != m.size:
        raise ValueError("place: arr and mask must be the same size")
    if v.size == 0:
        raise ValueError("place: cannot place values from an empty array")
    if x.size == 0:
        return x
    idx = nonzero(shapes.ravel(m), size=m.size, fill_value=m.size)[0]
    v = _take(v, np.arange(m.size) % v.size, 0)
    return core.reshape(shapes.ravel(x).at[idx].set(v, mode="drop"), x.shape)


def put(a, ind, v, mode=None, *, inplace: bool = True):
    """a with the flat positions ind set to v (repeated as needed), as jax's: ``inplace=False``
    is required; mode None places an out-of-range index as ``unravel_index`` does (clamped per
    axis, negative ones wrapped once), 'clip' clamps, 'wrap' wraps."""
    if inplace:
        raise ValueError("put: tidu's arrays are immutable; pass inplace=False to get the "
                         "updated array")
    t = _trace_of(a, ind, v)
    x = _lift(t, a)
    i = shapes.ravel(_lift(t, ind))
    vals = shapes.ravel(core.astype(_lift(t, v), x.dtype))
    if x.size == 0 or i.size == 0 or vals.size == 0:
        return x
    vals = _take(vals, np.arange(i.size) % vals.size, 0)
    if mode is None:  # jax's: unravel_index clamps, as below
        i = ravel_multi_index(unravel_index(i, x.shape), x.shape, mode="clip") \
            if x.ndim else i * 0
    elif mode == "clip":
        i = core.minimum(core.maximum(i, 0), x.size - 1)
    elif mode == "wrap":
        i = i % x.size
    elif mode == "raise":
        raise NotImplementedError("put: the 'raise' mode is not supported")
    else:
        raise ValueError(f"put: mode should be one of 'wrap' or 'clip'; got {mode!r}")
    return core.reshape(shapes.ravel(x).at[i].set(vals, mode="clip"), x.shape)


def trim_zeros(filt, trim: str = "fb", axis=None):
    """filt without its leading ('f') and trailing ('b') zeros. The result's shape depends on
    the values, so filt must be concrete (a numpy array), as jax's."""
    if isinstance(filt, Tracer):
        raise TypeError("trim_zeros: the result's shape depends on the values, so filt must be "
                        "concrete (not a traced value), as jax requires")
    f = np.asarray(filt)
    axes = range(f.ndim) if axis is None else \
        [a % f.ndim for a in ((axis,) if isinstance(axis, int) else axis)]
    sl = []
    for ax in range(f.ndim):
        if ax not in axes:
            sl.append(slice(None))
            continue
        m = f.any(axis=tuple(i for i in range(f.ndim) if i != ax))
        if not m.any():
            sl.append(slice(0, 0))
            continue
        start = int(m.argmax()) if "f" in trim.lower() else None
        stop = f.shape[ax] - int(m[::-1].argmax()) if "b" in trim.lower() else None
        sl.append(slice(start, stop))
    return f[tuple(sl)]


def ravel_multi_index(multi_index, dims, mode: str = "raise", order: str = "C", *, dtype=None):
    """The flat indices of the index tuple `multi_index` into shape `dims` (as ``dtype`` when
    given). Under a trace mode must be 'clip' or 'wrap' (jax's rule)."""
    if not _traced() and not shapes._has_tracer(multi_index):
        out = np.ravel_multi_index(multi_index, dims, mode=mode, order=order)
        return out if dtype is None else np.asarray(out).astype(dtype)
    dims = tuple(int(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} indices for {len(dims)} dims")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    if mode == "raise":
        raise ValueError("ravel_multi_index: mode='raise' needs concrete indices; under a "
                         "trace use mode='clip' or mode='wrap'")
    if mode not in ("clip", "wrap"):
        raise ValueError(f"ravel_multi_index: invalid mode={mode!r}")
    t = _trace_of(*multi_index)
    idx = [_lift(t, i) for i in multi_index]
    if any(kind_of(i.dtype) not in "iu" for i in idx):
        raise TypeError("ravel_multi_index: only int indices permitted")
    idx = [core.minimum(core.maximum(i, 0), d - 1) if mode == "clip" else i % d
           for i, d in zip(idx, dims)]
    strides = np.cumprod((1,) + (dims[::-1] if order == "C" else dims)[:-1])
    strides = strides[::-1] if order == "C" else strides
    out = None
    for i, s in zip(idx, strides):
        term = core.astype(i, np.int64) * int(s)
        out = term if out is None else out + term
    return out if dtype is None else core.astype(out, dtype)


def unravel_index(indices, shape):
    """The index tuple of flat `indices` into `shape`; out-of-range indices clamp to the first
    or last element, as jax's (numpy raises)."""
    if not _traced() and not isinstance(indices, Tracer):
        return np.unravel_index(indices, shape)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    i = _tr(indices)
    out = [None] * len(shape)
    for k in reversed(range(len(shape))):
        s = shape[k]
        q, r = i // s, i % s
        i, out[k] = q, r
    oob_pos = i > 0
    oob_neg = (i < -1) if kind_of(i.dtype) == "i" else None
    res = []
    for s, o in zip(shape, out):
        o = core.where(oob_pos, s - 1, o)
        res.append(o if oob_neg is None else core.where(oob_neg, 0, o))
    return tuple(res)


def indices(dimensions, dtype=None, sparse: bool = False):
    """numpy's indices (static: numpy arrays, int64 by default)."""
    return np.indices(tuple(dimensions), dtype=np.int64 if dtype is None else np.dtype(dtype),
                      sparse=sparse)


def mask_indices(n: int, mask_func, k: int = 0, *, size=None):
    """numpy's mask_indices (static); td.triu/td.tril stand for numpy's."""
    fn = {creation.triu: np.triu, creation.tril: np.tril}.get(mask_func, mask_func)
    return np.mask_indices(n, fn, k)


class _Concatenator:
    """``r_`` / ``c_``: numpy's on static items; with traced items, arrays and slices are
    concatenated along the first (r_) or last (c_, 1-D items as columns) axis."""

    def __init__(self, np_obj, axis: int, ndmin: int):
        self._np, self._axis, self._ndmin = np_obj, axis, ndmin

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        if not shapes._has_tracer(items):
            return self._np[key]
        parts = []
        for it in items:
            if isinstance(it, str):
                raise ValueError("r_/c_: string directives are not supported with traced items")
            if isinstance(it, slice):
                it = np.r_[it]
            x = _tr(it)
            if x.ndim == 0:
                x = core.reshape(x, (1,))
            if self._ndmin == 2 and x.ndim == 1:
                x = core.reshape(x, (x.shape[0], 1))
            parts.append(x)
        t = _trace_of(*parts)
        dt = np.result_type(*[p.dtype for p in parts])
        return core.concatenate([_lift(t, p, dt) for p in parts], self._axis)


r_ = _Concatenator(np.r_, 0, 1)
c_ = _Concatenator(np.c_, -1, 2)
mgrid, ogrid = np.mgrid, np.ogrid  # static grids (numpy arrays)
s_, index_exp = np.s_, np.index_exp
