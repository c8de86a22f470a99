"""jax.numpy's set functions and partial sorts: ``isin``, ``union1d``, ``intersect1d``,
``setdiff1d``, ``setxor1d``, ``unique_values``, ``unique_counts``, ``unique_inverse``,
``unique_all``, ``partition``, ``argpartition``, ``sort_complex``.

The results whose length depends on the values take ``size=`` under a trace (ValueError without
it, as jax's under jit) and pad with ``fill_value`` (default: the smallest value of the result,
as jax's). Sort, a mask of run starts and the binary-search compaction of ``unique``; outside a
trace (no traced argument, no size) each is numpy's own.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tidu.graph.dtypes import kind_of
from tidu.numpy import core, shapes, sorting, take
from tidu.numpy.selection import _positions, _static_size, unique
from tidu.numpy.shapes import _axis, _has_tracer, _traced
from tidu.numpy.statistics import searchsorted
from tidu.trace.tracer import _lift, _trace_of

__all__ = [
    "argpartition", "intersect1d", "isin", "partition", "setdiff1d", "setxor1d", "sort_complex",
    "union1d", "unique_all", "unique_counts", "unique_inverse", "unique_values",
]


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def _eager(*xs) -> bool:
    return not _traced() and not _has_tracer(xs)


def isin(element, test_elements, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto"):
    """Elementwise: whether the element occurs in test_elements. 'compare_all' compares with
    each of them (O(n m)); 'sort' (and 'auto' for more than 16 real test elements) sorts them
    and binary-searches each element (O(n log m)), as jax's methods."""
    if _eager(element, test_elements):
        return np.isin(element, test_elements, assume_unique=assume_unique, invert=invert)
    if method not in ("auto", "compare_all", "sort", "binary_search"):
        raise ValueError(f"isin: method must be 'auto', 'compare_all', 'sort' or "
                         f"'binary_search', got {method!r}")
    t = _trace_of(element, test_elements)
    e, s = _lift(t, element), shapes.ravel(_lift(t, test_elements))
    if s.size == 0:
        out = (e != e) & (e == e)
    elif method == "compare_all" or (method == "auto" and s.size <= 16) or \
            kind_of(e.dtype) == "c" or kind_of(s.dtype) == "c":
        out = sorting.any(core.reshape(e, e.shape + (1,)) == s, axis=-1)
    else:
        dt = np.result_type(e.dtype, s.dtype)
        e, s = _lift(t, e, dt), sorting.sort(_lift(t, s, dt))
        flat = shapes.ravel(e)
        i = searchsorted(s, flat, side="left")
        hit = take.take(s, i, mode="clip") == flat
        out = core.reshape(hit, e.shape)
    return ~out if invert else out


def _run_starts(s):
    """Where each run of equal values of sorted s starts (NaNs one run, as jax's equal_nan)."""
    first = core.concatenate([s[:1] == s[:1], s[1:] != s[:-1]], axis=0)
    if kind_of(s.dtype) in "fc":
        both_nan = (s[1:] != s[1:]) & (s[:-1] != s[:-1])
        first = first & ~core.concatenate([s[:1] != s[:1], both_nan], axis=0)
    return first


def _compact(name, s, mask, size, fill_value):
    """The entries of s where mask holds, the first `size`, padded with fill_value (default
    the first of them)."""
    pos, valid = _positions(mask, size)
    vals = take.take(s, core.where(valid, pos, 0), mode="clip")
    fill = vals[:1] if fill_value is None else fill_value
    return core.where(valid, vals, fill)


def _flat(t, x):
    return shapes.ravel(_lift(t, x))


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted distinct values of both arrays."""
    if size is None and _eager(ar1, ar2):
        return np.union1d(ar1, ar2)
    t = _trace_of(ar1, ar2)
    return unique(_cat(t, ar1, ar2), size=_static_size("union1d", size), fill_value=fill_value)


def _cat(t, ar1, ar2):
    a, b = _flat(t, ar1), _flat(t, ar2)
    dt = np.result_type(a.dtype, b.dtype)
    return core.concatenate([_lift(t, a, dt), _lift(t, b, dt)], 0)


def intersect1d(ar1, ar2, assume_unique: bool = False, return_indices: bool = False, *,
                size=None, fill_value=None):
    """The sorted values in both arrays (``return_indices`` not supported traced)."""
    if size is None and _eager(ar1, ar2):
        return np.intersect1d(ar1, ar2, assume_unique, return_indices)
    if return_indices:
        raise NotImplementedError("intersect1d: return_indices is not supported on traced "
                                  "values")
    size = _static_size("intersect1d", size)
    t = _trace_of(ar1, ar2)
    s = sorting.sort(_flat(t, ar1))
    mask = _run_starts(s) & isin(s, _flat(t, ar2))
    return _compact("intersect1d", s, mask, size, fill_value)


def setdiff1d(ar1, ar2, assume_unique: bool = False, *, size=None, fill_value=None):
    """The sorted distinct values of ar1 not in ar2 (padding: 0 by default, as jax's)."""
    if size is None and _eager(ar1, ar2):
        return np.setdiff1d(ar1, ar2, assume_unique)
    size = _static_size("setdiff1d", size)
    t = _trace_of(ar1, ar2)
    s = sorting.sort(_flat(t, ar1))
    mask = _run_starts(s) & ~isin(s, _flat(t, ar2))
    return _compact("setdiff1d", s, mask, size, 0 if fill_value is None else fill_value)


def setxor1d(ar1, ar2, assume_unique: bool = False, *, size=None, fill_value=None):
    """The sorted values in exactly one of the arrays."""
    if size is None and _eager(ar1, ar2):
        return np.setxor1d(ar1, ar2, assume_unique)
    size = _static_size("setxor1d", size)
    t = _trace_of(ar1, ar2)
    a, b = _flat(t, ar1), _flat(t, ar2)
    s = sorting.sort(_cat(t, ar1, ar2))
    mask = _run_starts(s) & (isin(s, a) != isin(s, b))
    return _compact("setxor1d", s, mask, size, fill_value)


def unique_values(x, /, *, size=None, fill_value=None):
    """The sorted distinct values (the array API's)."""
    if size is None and _eager(x):
        return np.unique_values(x)
    return unique(x, size=size, fill_value=fill_value)


def unique_counts(x, /, *, size=None, fill_value=None):
    """(values, counts) of the distinct values."""
    if size is None and _eager(x):
        return UniqueCountsResult(*np.unique_counts(x))
    return UniqueCountsResult(*unique(x, return_counts=True, size=size, fill_value=fill_value))


def _inverse_and_first(x, size):
    """For flat traced x: the sorted values, run starts, each element's run number (the
    inverse) and the original index of each run's first element."""
    order = sorting.argsort(x, stable=True)
    s = take.take(x, order, mode="clip")
    first = _run_starts(s)
    rank = sorting.cumsum(core.astype(first, np.int64)) - 1
    inverse = (rank * 0).at[order].set(rank)
    pos, valid = _positions(first, size)
    idx = take.take(order, core.where(valid, pos, 0), mode="clip")
    return inverse, core.where(valid, idx, idx[:1]), valid


def unique_inverse(x, /, *, size=None, fill_value=None):
    """(values, inverse_indices): inverse_indices has x's shape and indexes values."""
    if size is None and _eager(x):
        return UniqueInverseResult(*np.unique_inverse(x))
    size = _static_size("unique_inverse", size)
    xt = _lift(_trace_of(x), x)
    inverse, _, _ = _inverse_and_first(shapes.ravel(xt), size)
    return UniqueInverseResult(unique(xt, size=size, fill_value=fill_value),
                               core.reshape(inverse, xt.shape))


def unique_all(x, /, *, size=None, fill_value=None):
    """(values, indices, inverse_indices, counts); a padded slot's index is the first one and
    its count 0 (jax's)."""
    if size is None and _eager(x):
        return UniqueAllResult(*np.unique_all(x))
    size = _static_size("unique_all", size)
    xt = _lift(_trace_of(x), x)
    flat = shapes.ravel(xt)
    inverse, first_idx, _ = _inverse_and_first(flat, size)
    vals, counts = unique(xt, return_counts=True, size=size, fill_value=fill_value)
    return UniqueAllResult(vals, first_idx, core.reshape(inverse, xt.shape), counts)


def _swap_last(x, ax):
    return shapes.swapaxes(x, ax, -1) if ax != x.ndim - 1 else x


def partition(a, kth: int, axis: int = -1):
    """The kth+1 smallest values along axis, ascending, then the rest, descending (jax's
    layout: ``-top_k(-a, kth + 1)`` then ``top_k(a, n - kth - 1)``)."""
    if _eager(a):
        return np.partition(a, kth, axis)
    x = _lift(_trace_of(a), a)
    if kind_of(x.dtype) == "c":
        raise NotImplementedError("partition: complex dtypes are not supported (as jax)")
    ax = _axis(axis, x.ndim, "partition")
    n = x.shape[ax]
    k = _axis(kth, n, "partition")
    s = _swap_last(sorting.sort(x, axis=ax), ax)
    out = core.concatenate([s[..., :k + 1], shapes.flip(s[..., k + 1:], -1)], -1)
    return _swap_last(out, ax)


def argpartition(a, kth: int, axis: int = -1):
    """The indices of partition's layout (jax's): the kth+1 smallest in ascending order, then
    the others in index order; int32, as jax's."""
    if _eager(a):
        return np.argpartition(a, kth, axis)
    x = _lift(_trace_of(a), a)
    if kind_of(x.dtype) == "c":
        raise NotImplementedError("argpartition: complex dtypes are not supported (as jax)")
    ax = _axis(axis, x.ndim, "argpartition")
    n = x.shape[ax]
    k = _axis(kth, n, "argpartition")
    p = _swap_last(sorting.argsort(x, axis=ax, stable=True), ax)
    out = core.concatenate([p[..., :k + 1], sorting.sort(p[..., k + 1:], axis=-1)], -1)
    return core.astype(_swap_last(out, ax), np.int32)  # top_k's indices, as jax's


def sort_complex(a):
    """a sorted along its last axis, as complex (complex128 for real inputs, jax's x64)."""
    if _eager(a):
        return np.sort_complex(a)
    x = sorting.sort(_lift(_trace_of(a), a), axis=-1)
    if kind_of(x.dtype) != "c":
        x = core.astype(x, np.complex64 if x.dtype == np.float32 else np.complex128)
    return x

