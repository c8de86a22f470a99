"""``jax.ops``' segment reductions: ``segment_sum``, ``segment_prod``, ``segment_max``,
``segment_min``.  tidu spells them ``td.segment_sum`` and so on: ``tidu.ops`` is the set of
primitives (docs/numpy.md).  Each is one Scatter into an array of the reduction's identity."""

from __future__ import annotations

import numpy as np

from tidu.graph.dtypes import kind_of
from tidu.numpy import core as T
from tidu.numpy.reducers import extreme_identity
from tidu.numpy.shapes import _lift
from tidu.trace.tracer import Tracer

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]


def _segments(name, data, segment_ids, num_segments, mode, fill):
    x = _lift(data)
    if x.ndim == 0:
        raise ValueError(f"{name}: data must have at least one axis (the segmented one)")
    if num_segments is None:
        if isinstance(segment_ids, Tracer):
            raise ValueError(f"{name}: num_segments is needed when segment_ids is traced (the "
                             f"output's shape cannot depend on its values), as in jax")
        ids = np.asarray(segment_ids)
        num_segments = int(ids.max()) + 1 if ids.size else 0
    if not isinstance(num_segments, (int, np.integer)) or num_segments < 0:
        raise ValueError(f"{name}: num_segments must be a non-negative int, got {num_segments!r}")
    ids = _lift(segment_ids)
    if kind_of(ids.dtype) not in "iu":
        raise TypeError(f"{name}: segment_ids must be integers, got dtype {ids.dtype}")
    if ids.shape != x.shape[:ids.ndim]:
        raise ValueError(f"{name}: segment_ids of shape {ids.shape} do not match the leading "
                         f"axes of data {x.shape}")
    if mode not in (None, "drop", "fill", "clip", "promise_in_bounds"):
        raise ValueError(f"{name}: unknown mode {mode!r}")
    out = T.broadcast_to(np.asarray(fill, x.dtype), (int(num_segments),) + x.shape[ids.ndim:])
    return out.at[ids], ("drop" if mode in (None, "fill") else mode)


def segment_sum(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None):
    """``jax.ops.segment_sum``: ``out[s] = sum of data[i]`` over the i with
    ``segment_ids[i] == s``; ids outside [0, num_segments), negative ones too, are dropped (jax's
    ``num_segments`` is needed when the ids are traced.  ``bucket_size`` is accepted and ignored
    (one Scatter does it all)."""
    ref, mode = _segments("segment_sum", data, segment_ids, num_segments, mode, 0)
    return ref.add(data, mode=mode, wrap_negative_indices=False)


def segment_prod(data, segment_ids, num_segments=None, indices_are_sorted=False,
                 unique_indices=False, bucket_size=None, mode=None):
    """``jax.ops.segment_prod``: as segment_sum with products (1 for an empty segment)."""
    ref, mode = _segments("segment_prod", data, segment_ids, num_segments, mode, 1)
    return ref.multiply(data, mode=mode, wrap_negative_indices=False)


def segment_max(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None):
    """``jax.ops.segment_max``: the largest element of each segment; an empty segment gives the
    dtype's lowest value (-inf for floats), as jax."""
    dt = np.dtype(_lift(data).dtype)
    ref, mode = _segments("segment_max", data, segment_ids, num_segments, mode,
                          extreme_identity(dt, True))
    return ref.max(data, mode=mode, wrap_negative_indices=False)


def segment_min(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None):
    """``jax.ops.segment_min``: the smallest element of each segment (the dtype's highest value,
    +inf for floats, for an empty one)."""
    dt = np.dtype(_lift(data).dtype)
    ref, mode = _segments("segment_min", data, segment_ids, num_segments, mode,
                          extreme_identity(dt, False))
    return ref.min(data, mode=mode, wrap_negative_indices=False)
