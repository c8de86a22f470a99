"""Array construction and rearrangement as ``jax.numpy`` spells them: ``rot90``, ``logspace``,
``geomspace``, ``vander``, ``diag_indices`` / ``tril_indices`` / ``triu_indices`` (and their
``_from`` forms), ``ix_``, ``block``, ``lexsort``, ``put_along_axis``, ``polyfit``.

Composites of existing primitives; outside a trace (no traced argument) each is numpy's own.
The index helpers take static sizes and return numpy arrays (jax returns device arrays).
"""

from __future__ import annotations

import numpy as np

from tidu.numpy.contractions import outer
from tidu.numpy.core import (
    astype,
    broadcast_to,
    concatenate,
    iota,
    matmul,
    reshape,
    sqrt,
    transpose,
)
from tidu.numpy.core import power as _power
from tidu.numpy.core import sum as _sum
from tidu.numpy.creation import linspace
from tidu.numpy.linalg.core import inv
from tidu.numpy.linalg.more import lstsq
from tidu.numpy.shapes import (
    _has_tracer,
    _numpy_outside,
    _traced,
    atleast_1d,
    flip,
    moveaxis,
    swapaxes,
)
from tidu.numpy.sorting import argsort
from tidu.numpy.take import take_along_axis
from tidu.numpy.ufuncs import log10
from tidu.trace.tracer import (
    Tracer,
    _lift,
    _promote,
    _trace_of,
    as_inexact,
    keeps_weak,
    result_type,
)

__all__ = ["block", "diag_indices", "diag_indices_from", "geomspace", "ix_", "lexsort",
           "logspace", "polyfit", "put_along_axis", "rot90", "tril_indices", "tril_indices_from",
           "triu_indices", "triu_indices_from", "vander"]


def _tr(x) -> Tracer:
    return _lift(_trace_of(x), x)


@keeps_weak(0)
@_numpy_outside(np.rot90)
def rot90(m, k: int = 1, axes=(0, 1)):
    """m rotated by 90 degrees k times in the plane of ``axes`` (first towards second)."""
    m = _tr(m)
    axes = tuple(int(a) for a in axes)
    if len(axes) != 2:
        raise ValueError(f"rot90: axes must name two axes, got {axes}")
    if m.ndim < 2:
        raise ValueError(f"rot90: m must be at least 2-D, got shape {m.shape}")
    a0, a1 = (a % m.ndim for a in axes)
    if a0 == a1:
        raise ValueError(f"rot90: the two axes must differ, got {axes}")
    k = int(k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    if k == 1:
        return swapaxes(flip(m, a1), a0, a1)
    return flip(swapaxes(m, a0, a1), a1)


@_numpy_outside(np.logspace)
def logspace(start, stop, num: int = 50, endpoint: bool = True, base=10.0, dtype=None,
             axis: int = 0):
    """base ** linspace(start, stop, num)."""
    lin = linspace(start, stop, num, endpoint=endpoint, axis=axis)
    out = _power(base, lin) if isinstance(lin, Tracer) else np.power(base, lin)
    return out if dtype is None else astype(out, dtype)


@_numpy_outside(np.geomspace)
def geomspace(start, stop, num: int = 50, endpoint: bool = True, dtype=None, axis: int = 0):
    """num numbers spaced evenly on a log scale from start to stop (same sign, nonzero), the
    end points exact as jax's."""
    t = _trace_of(start, stop)
    s, e = _promote("geomspace", t, start, stop, min_dtype=True)
    sgn = (s > 0) * 2.0 - 1.0
    out = sgn * logspace(log10(s * sgn), log10(e * sgn), num, endpoint=endpoint, axis=0)
    num = int(num)
    if num > 0:
        parts = [reshape(s, (1,) + s.shape)]
        if num > 1:
            parts.append(out[1:num - 1] if endpoint else out[1:])
            if endpoint:
                parts.append(reshape(e, (1,) + e.shape))
        out = concatenate(parts[:num], axis=0)
    out = moveaxis(out, 0, axis) if axis != 0 else out
    return out if dtype is None else astype(out, dtype)


@_numpy_outside(np.vander)
def vander(x, N=None, increasing: bool = False):
    """Columns x**(N-1), ..., x, 1 (or ascending), built by repeated multiplication."""
    x = _tr(x)
    if x.ndim != 1:
        raise ValueError(f"vander: x must be 1-D, got shape {x.shape}")
    n = x.shape[0] if N is None else int(N)
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {n}")
    cols = []
    p = x * 0 + 1
    for _ in range(n):
        cols.append(reshape(p, (x.shape[0], 1)))
        p = p * x
    if not cols:
        return reshape(x * 0, (x.shape[0], 1))[:, :0]
    if not increasing:
        cols = cols[::-1]
    return concatenate(cols, axis=1)


# ---- index helpers (static) ----

def diag_indices(n: int, ndim: int = 2):
    """The indices of the main diagonal of an (n,) * ndim array."""
    return np.diag_indices(int(n), int(ndim))


def diag_indices_from(arr):
    """diag_indices for arr's shape (all axes equal)."""
    shape = np.shape(arr) if not isinstance(arr, Tracer) else arr.shape
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ValueError(f"diag_indices_from: arr must be at least 2-D with equal axes, got "
                         f"shape {shape}")
    return np.diag_indices(shape[0], len(shape))


def tril_indices(n: int, k: int = 0, m=None):
    """The indices of the lower triangle of an (n, m) array."""
    return np.tril_indices(int(n), int(k), None if m is None else int(m))


def triu_indices(n: int, k: int = 0, m=None):
    """The indices of the upper triangle of an (n, m) array."""
    return np.triu_indices(int(n), int(k), None if m is None else int(m))


def _shape2(name, arr):
    shape = arr.shape if isinstance(arr, Tracer) else np.shape(arr)
    if len(shape) != 2:
        raise ValueError(f"{name}: arr must be 2-D, got shape {shape}")
    return shape


def tril_indices_from(arr, k: int = 0):
    """tril_indices for a 2-D arr's shape."""
    n, m = _shape2("tril_indices_from", arr)
    return np.tril_indices(n, int(k), m)


def triu_indices_from(arr, k: int = 0):
    """triu_indices for a 2-D arr's shape."""
    n, m = _shape2("triu_indices_from", arr)
    return np.triu_indices(n, int(k), m)


def ix_(*args):
    """An open mesh from 1-D sequences: the i-th reshaped to (1, ..., n, ..., 1)."""
    if not _traced() and not _has_tracer(args):
        return np.ix_(*args)
    n = len(args)
    out = []
    for i, a in enumerate(args):
        a = _tr(a)
        if a.ndim != 1:
            raise ValueError(f"ix_: arguments must be 1-D, got shape {a.shape} for argument {i}")
        out.append(reshape(a, tuple(a.shape[0] if j == i else 1 for j in range(n))))
    return tuple(out)


# ---- block ----

def _depth(x):
    if isinstance(x, list):
        if not x:
            raise ValueError("block: lists cannot be empty")
        ds = {_depth(y) for y in x}
        if len(ds) != 1:
            raise ValueError("block: list depths are mismatched")
        return ds.pop() + 1
    if isinstance(x, tuple):
        raise TypeError("block: arrays must be nested in lists, not tuples")
    return 0


def _max_ndim(x):
    if isinstance(x, list):
        return max(_max_ndim(y) for y in x)
    return np.ndim(x) if not isinstance(x, Tracer) else x.ndim


def _block(x, depth, nd, t):
    if not isinstance(x, list):
        a = _lift(t, x)
        return reshape(a, (1,) * (nd - a.ndim) + a.shape)
    parts = [_block(y, depth - 1, nd, t) for y in x]
    return concatenate(parts, axis=-depth)


@_numpy_outside(np.block)
def block(arrays):
    """An array assembled from nested lists of blocks (innermost lists along the last axis)."""
    depth = _depth(arrays)
    if depth == 0:
        return _tr(arrays)
    nd = max(_max_ndim(arrays), depth)
    flat = []

    def collect(x):
        if isinstance(x, list):
            for y in x:
                collect(y)
        else:
            flat.append(x)

    collect(arrays)
    t = _trace_of(*flat)
    dt = result_type(*[f if isinstance(f, Tracer) else np.asarray(f).dtype for f in flat])

    def conv(x):
        if isinstance(x, list):
            return [conv(y) for y in x]
        return _lift(t, x, dt)

    return _block(conv(arrays), depth, nd, t)


# ---- sorting-based ----

@_numpy_outside(np.lexsort)
def lexsort(keys, axis: int = -1):
    """Indices that sort by the last key, then the one before it, ... (stable), int64."""
    keys = [_tr(k) for k in (keys if not isinstance(keys, Tracer) else
                             [keys[i] for i in range(keys.shape[0])])]
    if not keys:
        raise TypeError("lexsort: need at least one key")
    shape = keys[0].shape
    if any(k.shape != shape for k in keys):
        raise ValueError(f"lexsort: all keys must have one shape, got "
                         f"{[k.shape for k in keys]}")
    if not shape:
        raise ValueError("lexsort: keys must be at least 1-D")
    ax = int(axis) % len(shape)
    perm = None
    for k in keys:  # least significant first; each pass a stable sort of the permuted key
        kp = k if perm is None else take_along_axis(k, perm, axis=ax)
        order = argsort(kp, axis=ax)
        perm = order if perm is None else take_along_axis(perm, order, axis=ax)
    return astype(perm, np.int64)


def put_along_axis(arr, indices, values, axis, inplace: bool = True, *, mode=None):
    """arr with values put at ``indices`` along ``axis`` (indices and arr broadcast as in
    take_along_axis).  jax arrays are immutable: pass ``inplace=False`` (as jax requires)."""
    if inplace:
        raise ValueError("put_along_axis: tidu arrays are immutable; pass inplace=False and "
                         "use the returned array (as jax requires)")
    arr, idx = _tr(arr), _tr(indices)
    if axis is None:
        raise ValueError("put_along_axis: axis=None is not supported; pass an axis")
    if idx.ndim != arr.ndim:
        raise ValueError(f"put_along_axis: indices {idx.shape} must have arr's number of "
                         f"axes ({arr.ndim})")
    ax = int(axis) % arr.ndim
    shape = tuple(idx.shape[i] if i == ax else max(arr.shape[i], idx.shape[i])
                  for i in range(arr.ndim))
    full = []
    for i in range(arr.ndim):
        if i == ax:
            full.append(broadcast_to(idx, shape))
        else:
            full.append(iota(shape, "int64", i))
    return arr.at[tuple(full)].set(values, mode=mode)


@_numpy_outside(np.polyfit)
def polyfit(x, y, deg: int, rcond=None, full: bool = False, w=None, cov: bool = False):
    """Least-squares polynomial coefficients (highest power first), as jax's (scaled Vandermonde
    columns, lstsq); ``full``, ``w`` and ``cov`` (True or ``"unscaled"``) as jax's: with cov,
    also the coefficients' covariance, (deg+1, deg+1), or (deg+1, deg+1, k) for k columns of y
    (k = 1 when unscaled)."""
    deg = int(deg)
    if deg < 0:
        raise ValueError(f"polyfit: deg must be non-negative, got {deg}")
    t = _trace_of(x, y)
    x, y = as_inexact(x, t), as_inexact(y, t)
    if x.ndim != 1 or y.ndim not in (1, 2) or x.shape[0] != y.shape[0]:
        raise ValueError(f"polyfit: x must be 1-D and y 1-D or 2-D with x's length, got "
                         f"{x.shape} and {y.shape}")
    order = deg + 1
    if rcond is None:
        rcond = x.shape[0] * float(np.finfo(x.dtype).eps)
    lhs = vander(x, order)
    rhs = y
    if w is not None:
        w = _lift(t, w, x.dtype)
        lhs = lhs * reshape(w, (w.shape[0], 1))
        rhs = rhs * (w if rhs.ndim == 1 else reshape(w, (w.shape[0], 1)))
    scale = sqrt(_sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, s = lstsq(lhs, rhs, rcond)
    c = transpose(transpose(c) / scale)
    if full:
        return c, resids, rank, s, rcond
    if not cov:
        return c
    # (lhs^T lhs)^-1 of the scaled columns, unscaled; times the residual variance unless
    # cov="unscaled" (jax's, and numpy's, shapes: a trailing axis per column of y)
    vbase = inv(matmul(transpose(lhs), lhs)) / outer(scale, scale)
    if isinstance(cov, str) and cov == "unscaled":
        fac = _lift(t, np.ones(1, x.dtype))
    else:
        if x.shape[0] <= order:
            raise ValueError("polyfit: the number of data points must exceed order to scale "
                             "the covariance matrix")
        fac = atleast_1d(resids / (x.shape[0] - order))
    if y.ndim == 1:
        return c, vbase * reshape(fac, (1, fac.shape[0]))
    return c, reshape(vbase, (order, order, 1)) * reshape(fac, (1, 1, fac.shape[0]))
