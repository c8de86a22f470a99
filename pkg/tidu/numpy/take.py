"""take, take_along_axis, dynamic_slice and dynamic_update_slice on traced values, as
``jax.numpy`` / ``jax.lax`` spell them, over the Gather/Scatter plans of ``tidu.numpy.indexing``
(the out-of-range rules are in docs/numpy.md)."""

from __future__ import annotations

import numpy as np

from tidu import ops as P
from tidu.graph.dtypes import INTS, kind_of
from tidu.numpy.core import astype, broadcast_to, no_out, reshape, where
from tidu.numpy.indexing import _bcast, _gather, _index_value, _is_static_int, _max, _min, _where
from tidu.trace.tracer import Tracer, _emit, _lift, _trace_of, keeps_weak

__all__ = ["dynamic_slice", "dynamic_update_slice", "take", "take_along_axis"]

# ---- numpy / lax functions ----

def _norm_axis(axis: int, ndim: int, name: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


@keeps_weak(0)
def take(a, indices, axis=None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """numpy/jax ``take``: elements of `a` at `indices` along `axis` (flattened when None).
    Out-of-range indices: mode None or 'fill' gives fill_value (NaN for inexact dtypes, as jax),
    'clip' clamps (negative indices then clamp to 0, as jax's 'clip'), 'wrap' wraps modulo.
    ``unique_indices`` and ``indices_are_sorted`` are jax's hints to XLA; tidu's gather needs
    neither, so they change nothing."""
    no_out(out, "take")
    t = _trace_of(a, indices)
    a = _lift(t, a)
    if axis is None:
        a, axis = reshape(a, (a.size,)), 0
    axis = _norm_axis(axis, a.ndim, "take")
    idx = _index_value(indices, a.shape[axis])
    n = a.shape[axis]
    if mode == "wrap":
        idx = _wrap(idx, n, "take")
        mode = "clip"
    elif mode == "clip":  # jax: no wrapping of negatives, clamp to [0, n-1]
        idx = _min(_max(idx, 0), max(n - 1, 0))
    elif mode not in (None, "fill", "promise_in_bounds"):
        raise ValueError(f"take: unknown mode {mode!r}; expected None, 'fill', 'clip' or 'wrap'")
    full = (slice(None),) * axis + (idx,)
    return _gather(a, full, "clip" if mode in ("clip", "promise_in_bounds") else "fill",
                   fill_value)


def _wrap(idx, n: int, name: str):
    """Indices wrapped modulo the axis length n (numpy's and jax's 'wrap'), in integer
    arithmetic for traced ones too (``%`` is tidu.remainder: Rem, exact for every int64)."""
    if n == 0:
        if idx.size:
            raise IndexError(f"{name}: cannot do a non-empty take from an empty axis")
        return idx
    return idx % n


@keeps_weak(0)
def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None, *,
                    wrap_negative_indices=None):
    """numpy/jax ``take_along_axis``: out[..., j, ...] = arr[..., indices[..., j, ...], ...]
    along `axis`; the other axes of `indices` broadcast against arr's.  Out-of-range: as take.
    Negative indices count from the end unless ``wrap_negative_indices`` is False (by default
    they do, except under mode 'promise_in_bounds', as jax's); then they are out of range."""
    t = _trace_of(arr, indices)
    arr = _lift(t, arr)
    if axis is None:
        arr, axis = reshape(arr, (arr.size,)), 0
    axis = _norm_axis(axis, arr.ndim, "take_along_axis")
    idx = _index_value(indices, arr.shape[axis])
    if idx.ndim != arr.ndim:
        raise ValueError(f"take_along_axis: indices of rank {idx.ndim} do not match the rank "
                         f"{arr.ndim} of arr")
    shape = []
    for k, (di, da) in enumerate(zip(idx.shape, arr.shape)):
        if k == axis:
            shape.append(di)
        elif di == da or di == 1 or da == 1:
            shape.append(max(di, da))
        else:
            raise ValueError(f"take_along_axis: indices shape {idx.shape} does not broadcast "
                             f"against arr shape {arr.shape} off axis {axis}")
    arr_shape = tuple(s if k != axis else arr.shape[axis] for k, s in enumerate(shape))
    arr = broadcast_to(arr, arr_shape) if arr.shape != arr_shape else arr
    idx = _bcast(idx, tuple(shape))
    if wrap_negative_indices is None:
        wrap_negative_indices = mode != "promise_in_bounds"
    if not wrap_negative_indices and mode in (None, "fill"):  # a negative index is out of range
        idx = _where(idx < 0, np.asarray(arr.shape[axis]), idx)
    if mode == "wrap":  # an extension: jax's take_along_axis has no 'wrap'
        idx = _wrap(idx, arr.shape[axis], "take_along_axis")
        mode = "clip"
    elif mode == "clip":  # jax's: a negative index counts from the end first, then clamps
        if wrap_negative_indices:
            idx = _where(idx < 0, idx + arr.shape[axis], idx)
        idx = _min(_max(idx, 0), max(arr.shape[axis] - 1, 0))
    elif mode not in (None, "fill", "promise_in_bounds"):
        raise ValueError(f"take_along_axis: unknown mode {mode!r}; expected None, 'fill', "
                         "'clip' or 'wrap'")
    # every other axis indexed by an iota: one gather over the merged axes
    full = []
    for k in range(arr.ndim):
        if k == axis:
            full.append(idx)
        else:
            io = np.arange(shape[k]).reshape([-1 if j == k else 1 for j in range(arr.ndim)])
            full.append(np.broadcast_to(io, shape))
    return _gather(arr, tuple(full), "clip" if mode in ("clip", "promise_in_bounds") else "fill",
                   fill_value)


def _starts_of(t, x, start_indices, name, allow_negative=True):
    if len(start_indices) != x.ndim:
        raise ValueError(f"{name}: {len(start_indices)} start indices for operand shape "
                         f"{x.shape} (one per axis)")
    wrap = [bool(allow_negative)] * x.ndim if isinstance(allow_negative, (bool, np.bool_)) \
        else [bool(a) for a in allow_negative]
    if len(wrap) != x.ndim:
        raise ValueError(f"{name}: allow_negative_indices has {len(wrap)} entries for operand "
                         f"shape {x.shape} (one per axis, or one bool)")
    out = []
    for k, s in enumerate(start_indices):
        if isinstance(s, Tracer):
            if s.ndim or s.dtype not in INTS:
                raise TypeError(f"{name}: start index {k} must be a scalar integer, got {s.aval}")
            d = x.shape[k]
            out.append(where(s < 0, s + d, s) if wrap[k] else s)  # jax wraps a negative once
        else:
            if not _is_static_int(s):
                a = np.asarray(s)
                if a.ndim or kind_of(a.dtype) not in "iu":
                    raise TypeError(f"{name}: start index {k} must be a scalar integer, got {s!r}")
                s = int(a)
            s = int(s)
            if s < 0 and not wrap[k]:
                raise ValueError(f"{name}: index {s} is out of bounds for dimension {x.shape[k]} "
                                 "with allow_negative_indices=False (jax's rule)")
            s = s + x.shape[k] if s < 0 else s
            out.append(_lift(t, np.asarray(s, np.int64)))
    if len({s.dtype for s in out}) > 1:  # one index type for all starts (StableHLO's rule)
        out = [astype(s, "int64") for s in out]
    return out


def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
    """jax.lax.dynamic_slice: operand[s0:s0+n0, ...] with (traced) scalar starts; a negative
    start wraps once (unless ``allow_negative_indices`` is False for its axis: one bool, or one
    per axis), then each start is clamped to [0, dim - size]."""
    t = _trace_of(operand, *start_indices)
    x = _lift(t, operand)
    sizes = tuple(int(s) for s in slice_sizes)
    return _emit(t, P.DynamicSlice(sizes), x, *_starts_of(t, x, start_indices, "dynamic_slice",
                                                           allow_negative_indices))


def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices=True):
    """jax.lax.dynamic_update_slice: operand with update written at the (traced) starts; a
    negative start wraps once (unless ``allow_negative_indices`` is False, as dynamic_slice's),
    then each start is clamped so the update fits."""
    t = _trace_of(operand, update, *start_indices)
    x = _lift(t, operand)
    u = _lift(t, update)
    if u.dtype != x.dtype:
        u = astype(u, x.dtype)
    return _emit(t, P.DynamicUpdateSlice(), x, u,
                 *_starts_of(t, x, start_indices, "dynamic_update_slice",
                             allow_negative_indices))

