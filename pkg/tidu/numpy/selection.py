"""Data-dependent selections with a static output size, as ``jax.numpy`` spells them under
``jit``: ``nonzero``, ``argwhere``, ``flatnonzero``, ``unique`` (``size=``, ``fill_value=``),
``bincount`` (``length=``) and ``histogram`` (a static number of bins).

Traced, the output size must be static: ``size=`` (or ``length=``) is required, as jax
requires it under jit; the k-th selected position is found by a binary search of the running
count (``searchsorted``), so no scatter is needed.  Outside a trace each is numpy's own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tidu.graph.dtypes import BOOL, kind_of
from tidu.numpy.construct import lexsort
from tidu.numpy.core import astype, broadcast_to, concatenate, iota, reshape
from tidu.numpy.core import sum as _sum
from tidu.numpy.core import where as _select
from tidu.numpy.creation import linspace
from tidu.numpy.reducers import any as _any
from tidu.numpy.shapes import _axis, _has_tracer, _numpy_outside, _traced, moveaxis, ravel, stack
from tidu.numpy.shapes import _lift as _lift1
from tidu.numpy.sorting import argsort, cumsum, sort
from tidu.numpy.statistics import searchsorted
from tidu.numpy.take import take
from tidu.trace.tracer import Tracer, _lift, _trace_of, as_inexact, keeps_weak, result_type

__all__ = ["argwhere", "bincount", "flatnonzero", "histogram", "nonzero", "select", "unique",
           "where"]


def _tr(x) -> Tracer:
    return _lift(_trace_of(x), x)


def _static_size(name, size):
    if size is None:
        raise ValueError(f"{name}: the output size depends on the values; under a trace pass a "
                         f"static size= (as jax requires under jit)")
    size = int(size)
    if size < 0:
        raise ValueError(f"{name}: size must be non-negative, got {size}")
    return size


def _positions(mask, size):
    """The flat positions of the first `size` True entries of a 1-D bool mask (int64), and
    whether each slot holds one."""
    n = mask.shape[0]
    counts = cumsum(astype(mask, np.int64))
    want = iota((size,), "int64") + 1
    pos = astype(searchsorted(counts, want, side="left"), np.int64) if n else want * 0
    return pos, want <= (counts[-1] if n else 0)


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """``jnp.where``: with x and y, condition ? x : y elementwise (broadcast; x and y promoted,
    weak types kept); with neither, the indices of condition's nonzero entries, as ``nonzero``
    with its ``size`` and ``fill_value``."""
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if size is not None or fill_value is not None:
        raise ValueError("where: size and fill_value go with the one-argument form only "
                         "(jax's rule)")
    if x is None or y is None:
        raise ValueError("where: give both x and y, or neither (the indices of condition's "
                         "nonzero entries)")
    return _select(condition, x, y)


def _nonzero(name, a, size, fill_value):
    a = _tr(a)
    size = _static_size(name, size)
    flat = ravel(a) != 0
    pos, valid = _positions(flat, size)
    shape = a.shape or (1,)
    fills = (fill_value,) * len(shape) if fill_value is None or np.ndim(fill_value) == 0 \
        else tuple(fill_value)
    if len(fills) != len(shape):
        raise ValueError(f"{name}: fill_value must be a scalar or have {len(shape)} entries")
    out, rest = [], pos
    strides = [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]
    for st, f in zip(strides, fills):
        idx = rest // st
        rest = rest % st
        out.append(_select(valid, idx, 0 if f is None else f))
    return tuple(out)


def nonzero(a, *, size=None, fill_value=None):
    """The indices of a's nonzero entries, one int64 array per axis (the first ``size``;
    missing slots get ``fill_value``, 0 by default)."""
    if not isinstance(a, Tracer) and size is None:
        return np.nonzero(a)
    out = _nonzero("nonzero", a, size, fill_value)
    return out if np.ndim(a) or isinstance(a, Tracer) and a.ndim else out[:0]


def flatnonzero(a, *, size=None, fill_value=None):
    """The flat indices of a's nonzero entries (``size``, ``fill_value`` as nonzero's)."""
    if not isinstance(a, Tracer) and size is None:
        return np.flatnonzero(a)
    return _nonzero("flatnonzero", ravel(_tr(a)), size, fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """(k, a.ndim) indices of a's nonzero entries (``size``, ``fill_value`` as nonzero's)."""
    if not isinstance(a, Tracer) and size is None:
        return np.argwhere(a)
    a = _tr(a)
    if a.ndim == 0:
        return stack(_nonzero("argwhere", reshape(a, (1,)), size, fill_value), axis=1)[:, :0]
    return stack(_nonzero("argwhere", a, size, fill_value), axis=1)


def unique(ar, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis=None, *, equal_nan: bool = True, size=None,
           fill_value=None, sorted: bool = True):  # noqa: A002 - jax's name
    """The sorted distinct values of ar (flattened, or the distinct slices along ``axis``), the
    first ``size`` of them; missing slots get ``fill_value`` (default: the smallest value, as
    jax's).  As jax's under jit: ``return_index`` gives each value's first position (missing
    slots: the smallest value's), ``return_inverse`` each element's value number (ar's shape
    with ``axis=None``, else the length of ``axis``), ``return_counts`` the counts (missing
    slots: 0).  Slices compare lexicographically; with ``equal_nan`` NaNs are one value."""
    if not isinstance(ar, Tracer) and size is None:
        return np.unique(ar, return_index, return_inverse, return_counts, axis,
                         equal_nan=equal_nan)
    x = _tr(ar)
    size = _static_size("unique", size)
    if axis is None:
        ax, rows, rest = 0, ravel(x), ()
    else:
        if x.ndim == 0:
            raise ValueError("unique: axis given for a 0-d array")
        ax = _axis(axis, x.ndim, "unique")
        moved = moveaxis(x, ax, 0)
        rest = moved.shape[1:]
        rows = reshape(moved, (moved.shape[0], int(np.prod(rest, dtype=np.int64))))
    n = rows.shape[0]
    if n == 0 or rows.size == 0:
        raise ValueError("unique: an empty array has no values to fill with")
    wide = rows.ndim == 2
    perm = None
    if return_index or return_inverse or wide:
        # stable, so the first of equal values (slices) comes first: its position is perm's
        perm = lexsort([rows[:, j] for j in reversed(range(rows.shape[1]))]) if wide \
            else argsort(rows)
        s = take(rows, perm, axis=0)
    else:
        s = sort(rows)
    neq = s[1:] != s[:-1]
    if equal_nan and kind_of(s.dtype) in "fc":
        neq = neq & ~((s[1:] != s[1:]) & (s[:-1] != s[:-1]))
    if wide:
        neq = _any(neq, axis=1)
    first = concatenate([broadcast_to(_lift(_trace_of(neq), np.True_), (1,)), neq], axis=0)
    # the first size + 1 run starts: the (k+1)-th ends the k-th run (counts)
    starts, found = _positions(first, size + 1)
    pos, valid = starts[:size], found[:size]
    ind = _select(valid, pos, 0)
    vals = reshape(take(s, ind, axis=0), (size, *rest))
    if fill_value is not None:
        vals = _select(reshape(valid, (size,) + (1,) * len(rest)), vals,
                       _lift(_trace_of(vals), fill_value, vals.dtype))
    out = [moveaxis(vals, 0, ax) if ax else vals]
    if return_index:
        out.append(take(perm, ind))
    if return_inverse:
        number = cumsum(astype(first, np.int64)) - 1
        zeros = broadcast_to(_lift(_trace_of(number), np.int64(0)), (n,))
        inv = zeros.at[perm].set(number, unique_indices=True)
        out.append(reshape(inv, x.shape) if axis is None else inv)
    if return_counts:  # a run ends where the next starts, or at n after the last
        out.append(_select(valid, _select(found[1:], starts[1:], n) - pos, 0))
    return out[0] if len(out) == 1 else tuple(out)


def bincount(x, weights=None, minlength: int = 0, *, length=None):
    """Counts (or summed weights) of each value 0 .. length-1 in the non-negative ints x;
    traced, ``length`` is required and values outside [0, length) are dropped (negative ones
    clipped to 0 as jax's)."""
    if not isinstance(x, Tracer) and not isinstance(weights, Tracer) and length is None:
        return np.bincount(x, weights, minlength)
    x = _tr(x)
    if kind_of(x.dtype) not in "iub" or x.ndim != 1:
        raise TypeError(f"bincount: x must be a 1-D integer array, got {x.dtype}{list(x.shape)}")
    length = _static_size("bincount", length)
    length = max(length, int(minlength))
    if weights is None:
        w = broadcast_to(_lift(_trace_of(x), np.int64(1)), x.shape)
    else:
        w = _lift(_trace_of(x, weights), weights)
    xi = _select(x < 0, 0, x)
    zeros = broadcast_to(_lift(_trace_of(x), np.zeros((), w.dtype)), (length,))
    # xi >= 0: jax's wrap of negative indices has nothing to do; indices past length are dropped
    return zeros.at[xi].add(w, mode="drop", wrap_negative_indices=False)


@_numpy_outside(np.histogram)
def histogram(a, bins=10, range=None, weights=None, density=None):  # noqa: A002 - numpy's
    """(counts, bin_edges) of a's values in ``bins`` bins (a static int, or the edges); the
    last bin includes its right edge, as numpy's and jax's."""
    a = ravel(_tr(a))
    a = as_inexact(a)
    if isinstance(bins, (int, np.integer)):
        if bins < 1:
            raise ValueError(f"histogram: bins must be positive, got {bins}")
        if range is None:
            lo, hi = a.min(), a.max()
        else:
            lo, hi = range
        lo = _lift(_trace_of(a, lo), lo, a.dtype)
        hi = _lift(_trace_of(a, hi), hi, a.dtype)
        same = hi == lo
        lo, hi = _select(same, lo - 0.5, lo), _select(same, hi + 0.5, hi)
        edges = linspace(lo, hi, int(bins) + 1)
    else:
        edges = _lift(_trace_of(a, bins), bins, a.dtype)
    nb = edges.shape[0]
    idx = astype(searchsorted(edges, a, side="right"), np.int64)
    idx = _select(a == edges[-1], nb - 1, idx)
    if weights is None:  # ones (values outside the range land in the dropped end bins)
        w = broadcast_to(_lift(_trace_of(a), np.ones((), a.dtype)), a.shape)
    else:
        w = ravel(_lift(_trace_of(a, weights), weights))
    zeros = broadcast_to(_lift(_trace_of(a), np.zeros((), w.dtype)), (nb + 1,))
    counts = zeros.at[idx].add(w)[1:nb]
    if density:
        widths = edges[1:] - edges[:-1]
        counts = counts / widths / _sum(counts)
    return counts, edges


@keeps_weak(1, 2, seq=True)
def select(condlist: Sequence, choicelist: Sequence, default=0) -> Tracer:
    """choicelist[i] where condlist[i] is the first true condition, default where none is."""
    condlist, choicelist = list(condlist), list(choicelist)
    if len(condlist) != len(choicelist):
        raise ValueError(
            f"select: condlist and choicelist must have the same length, got "
            f"{len(condlist)} and {len(choicelist)}"
        )
    if not condlist:
        raise ValueError("select: condlist must not be empty")
    if not _traced() and not _has_tracer(condlist + choicelist + [default]):
        return np.select(condlist, choicelist, default)
    for c in condlist:
        dt = c.dtype if isinstance(c, Tracer) else np.asarray(c).dtype
        if dt != BOOL:
            raise TypeError(f"select: condlist entries must be bool, got {dt}")
    out = default
    dt = result_type(*choicelist, default)
    for c, v in zip(reversed(condlist), reversed(choicelist)):
        out = _select(c, astype(_lift1(v), dt) if isinstance(v, Tracer) else v, out)
    return astype(out, dt) if isinstance(out, Tracer) and out.dtype != dt else out
