"""Statistics, NaN-aware reductions, closeness tests and sorted-array search, as ``jax.numpy``
spells them: ``nansum`` ... ``nanargmin``, ``isclose``/``allclose``, ``average``, ``ptp``,
``count_nonzero``, ``quantile``/``percentile``/``median`` (and their ``nan`` forms),
``cov``/``corrcoef``, ``searchsorted``, ``digitize``, ``interp``, ``polyval``.

Composites of existing primitives, written as jax writes them so values and derivatives agree;
outside a trace (no traced argument) each is numpy's own function.
"""

from __future__ import annotations

import math

import numpy as np

from tidu import ops as P
from tidu.graph.dtypes import BOOL, COMPLEXES, INTS, kind_of
from tidu.numpy import core as T
from tidu.numpy import reducers as RD
from tidu.numpy import sorting as S
from tidu.numpy.core import no_out, reshape
from tidu.numpy.creation import asarray, zeros_like
from tidu.numpy.shapes import _numpy_outside, moveaxis, squeeze
from tidu.numpy.take import take, take_along_axis
from tidu.numpy.ufuncs import _tr, ceil, clip, floor, isinf, isnan
from tidu.numpy.ufuncs import round as _round_half_even
from tidu.trace.tracer import Tracer, _compare, _emit, _lift, _trace_of, as_inexact

__all__ = [
    "allclose", "average", "corrcoef", "count_nonzero", "cov", "digitize", "interp", "isclose",
    "median", "nanargmax", "nanargmin", "nanmax", "nanmean", "nanmedian", "nanmin",
    "nanpercentile", "nanprod", "nanquantile", "nanstd", "nansum", "nanvar", "percentile",
    "polyval", "ptp", "quantile", "searchsorted",
]


def _inexact(x) -> Tracer:
    return as_inexact(x)


def _nan_mask(x):
    return isnan(x) if x.dtype not in INTS and x.dtype != BOOL else None


# ---- NaN-aware reductions ----

def _nan_as(x, fill):
    """x with its NaN entries read as fill (x itself for integers and bools)."""
    m = _nan_mask(x)
    return x if m is None else T.where(m, fill, x)


@_numpy_outside(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``jnp.nansum``: ``sum`` with NaN entries read as 0 (``initial`` and ``where`` as sum's)."""
    no_out(out, "nansum")
    return RD.sum(_nan_as(_tr(a), 0), axis, dtype, None, keepdims, initial, where)


@_numpy_outside(np.nanprod)
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``jnp.nanprod``: ``prod`` with NaN entries read as 1."""
    no_out(out, "nanprod")
    return RD.prod(_nan_as(_tr(a), 1), axis, dtype, None, keepdims, initial, where)


def _nan_extreme(red, fill, a, axis, out, keepdims, initial, where, name):
    """jax's nanmax/nanmin: red over the entries with NaN read as fill, NaN where a slice is
    all NaN (jax's test ignores ``where`` and ``initial``)."""
    no_out(out, name)
    x = _tr(a)
    m = _nan_mask(x)
    r = red(x if m is None else T.where(m, fill, x), axis, None, keepdims, initial, where)
    return r if m is None else T.where(S.all(m, axis, keepdims), np.nan, r)


@_numpy_outside(np.nanmax)
def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _nan_extreme(RD.max, -np.inf, a, axis, out, keepdims, initial, where, "nanmax")


@_numpy_outside(np.nanmin)
def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _nan_extreme(RD.min, np.inf, a, axis, out, keepdims, initial, where, "nanmin")


def _nan_arg(red, fill, a, axis, out, keepdims, name):
    """red (argmax/argmin) with NaN entries read as fill; -1 where a slice is all NaN (jax's)."""
    no_out(out, name)
    x = _tr(a)
    m = _nan_mask(x)
    keepdims = bool(keepdims)
    if m is None:
        return red(x, axis, keepdims=keepdims)
    r = red(T.where(m, fill, x), axis, keepdims=keepdims)
    return T.where(S.all(m, axis, keepdims), -1, r)


@_numpy_outside(np.nanargmax)
def nanargmax(a, axis=None, out=None, keepdims=None):
    return _nan_arg(S.argmax, -np.inf, a, axis, out, keepdims, "nanargmax")


@_numpy_outside(np.nanargmin)
def nanargmin(a, axis=None, out=None, keepdims=None):
    return _nan_arg(S.argmin, np.inf, a, axis, out, keepdims, "nanargmin")


def _count(m, axis, keepdims, dtype, where=None):
    return RD.sum(m, axis, dtype, None, keepdims, where=where)


@_numpy_outside(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """``jnp.nanmean``: the mean of the entries that are not NaN (and where ``where`` holds)."""
    no_out(out, "nanmean")
    x = _inexact(a)
    if dtype is not None:
        x = T.astype(x, dtype)
    m = isnan(x)
    n = _count(~m, axis, keepdims, _real_dt(x), where)
    return nansum(x, axis, None, None, keepdims, where=where) / n


def _real_dt(x):
    return np.float32 if x.dtype in (np.dtype("float32"), np.dtype("complex64")) else np.float64


@_numpy_outside(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    """``jnp.nanvar``: the variance of the entries that are not NaN (and where ``where``
    holds), about ``mean`` when given (with keepdims shape, as jax's)."""
    no_out(out, "nanvar")
    x = _inexact(a)
    if dtype is not None:
        x = T.astype(x, dtype)
    m = isnan(x)
    mu = nanmean(x, axis, None, None, True, where=where) if mean is None \
        else T.astype(_tr(mean), x.dtype)
    c = T.where(m, 0, x - mu)
    sq = T.real(c * T.conj(c)) if x.dtype in COMPLEXES else c * c
    n = _count(~m, axis, keepdims, _real_dt(x), where)
    # N - ddof <= 0: NaN, as jax
    return RD.sum(sq, axis, None, None, keepdims, where=where) / T.where(n > ddof, n - ddof,
                                                                          np.nan)


@_numpy_outside(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    return T.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where, mean))


# ---- closeness, counts, ranges ----

@_numpy_outside(np.isclose)
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol |b| elementwise; infinities close only to themselves, NaN to
    nothing (to NaN with equal_nan), as numpy and jax."""
    t = _trace_of(a, b)
    x, y = _lift(t, a), _lift(t, b)
    x, y = as_inexact(x, t), as_inexact(y, t)
    close = T.abs(x - y) <= atol + rtol * T.abs(y)
    inf = isinf(x) | isinf(y)
    out = T.where(inf, _compare("EQ", x, y), close)
    if equal_nan:
        out = out | (isnan(x) & isnan(y))
    return out


@_numpy_outside(np.allclose)
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return S.all(isclose(a, b, rtol, atol, equal_nan))


@_numpy_outside(np.count_nonzero)
def count_nonzero(a, axis=None, keepdims=False):
    x = _tr(a)
    nonzero = x if x.dtype == BOOL else _compare("NE", x, 0)  # a bool array is its own mask
    return T.sum(T.astype(nonzero, np.int64), axis, keepdims)


@_numpy_outside(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    no_out(out, "ptp")
    x = _tr(a)
    return T.max(x, axis, keepdims) - S.min(x, axis, keepdims)


@_numpy_outside(np.average)
def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """The (weighted) mean along axis; with returned, also the sum of the weights."""
    x = _inexact(a)
    if weights is None:
        avg = T.mean(x, axis, keepdims)
        n = x.size if axis is None else math.prod(
            x.shape[i] for i in np.atleast_1d(np.asarray(axis)) % max(x.ndim, 1))
        return (avg, np.full(avg.shape, n, dtype=avg.dtype)) if returned else avg
    w = _inexact(weights)
    if w.shape != x.shape:
        if axis is None:
            raise ValueError("average: axis must be given when weights and a differ in shape")
        if w.ndim != 1 or not isinstance(axis, (int, np.integer)):
            raise ValueError("average: 1-D weights need one integer axis")
        ax = int(axis) % x.ndim
        if w.shape[0] != x.shape[ax]:
            raise ValueError(f"average: weights of length {w.shape[0]} do not match axis {ax} "
                             f"of length {x.shape[ax]}")
        w = reshape(w, tuple(w.shape[0] if i == ax else 1 for i in range(x.ndim)))
        w = T.broadcast_to(w, x.shape)
    wsum = T.sum(w, axis, keepdims)
    avg = T.sum(x * w, axis, keepdims) / wsum
    return (avg, T.broadcast_to(wsum, avg.shape)) if returned else avg


# ---- order statistics ----

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def _quantile_weights(name, x, weights, axis, method):
    """weights as x's shape (jax's rule: x's shape, or the shape of the reduced axes)."""
    if method != "inverted_cdf":
        raise NotImplementedError(f"{name}: method {method!r} takes no weights; only "
                                  "'inverted_cdf' does (jax's rule)")
    w = _inexact(weights)
    if w.dtype in COMPLEXES:
        raise ValueError(f"{name}: weights cannot be complex")
    w = T.astype(w, x.dtype) if w.dtype != x.dtype else w
    if w.shape == x.shape:
        return w
    if axis is None:
        raise ValueError(f"{name}: weights of shape {w.shape} must match a's shape {x.shape} "
                         "when axis is None")
    axes = [int(i) % x.ndim for i in np.atleast_1d(np.asarray(axis))]
    want = tuple(x.shape[i] for i in axes)
    if w.shape != want:
        raise ValueError(f"{name}: weights of shape {w.shape} must match the reduced axes "
                         f"{want}")
    order = np.argsort(axes)  # weights' axes in a's order, then broadcast along the others
    w = T.transpose(w, tuple(int(k) for k in order)) if len(axes) > 1 else w
    kept = sorted(axes)
    return T.broadcast_to(reshape(w, tuple(x.shape[i] if i in kept else 1
                                           for i in range(x.ndim))), x.shape)


def _inverted_cdf(s, ws, qf, n, ignore_nan, nan_in):
    """jax's 'inverted_cdf' over the last axis of sorted s with weights ws (sorted with it): the
    first element whose cumulative weight reaches q * total; NaN where a weight is negative or
    NaN, and where the data are NaN (all of them, for nanquantile)."""
    bad = (ws < 0) | isnan(ws)
    clean = T.where(bad | isnan(s), 0, ws)
    cw = S.cumsum(clean, axis=-1)
    total = cw[..., -1:]
    target = total * reshape(T.astype(qf, s.dtype), (1,) * (s.ndim - 1) + (qf.shape[0],))
    below = T.astype(cw[..., None, :] < target[..., :, None], np.int64)
    idx = T.sum(below, -1)
    idx = T.minimum(T.maximum(idx, 0), T.astype(T.maximum(n - 1, 0), np.int64))
    out = take_along_axis(s, idx, axis=-1)
    nan = S.any(bad, axis=-1, keepdims=True) | ((n == 0) if ignore_nan else nan_in)
    return T.where(nan, np.nan, out)


def _interpolated(s, qf, n, method, ignore_nan, nan_in):
    """The quantiles qf of sorted s along its last axis (n values each) by numpy's
    interpolation methods, NaN where the data are (all NaN, for the nan form)."""
    lead = s.shape[:-1]
    nq = qf.shape[0]
    pos = (n - 1) * reshape(T.astype(qf, s.dtype), (1,) * len(lead) + (nq,))
    pos = T.broadcast_to(pos, lead + (nq,))
    last = T.maximum(n - 1, 0)
    lo = T.minimum(T.maximum(floor(pos), 0), last)
    hi = T.minimum(lo + 1, last)
    if method == "lower":
        hi = lo
    elif method == "higher":
        lo = hi = T.minimum(T.maximum(ceil(pos), 0), last)
    elif method == "midpoint":
        hi = T.minimum(T.maximum(ceil(pos), 0), last)
    elif method == "nearest":
        lo = hi = T.minimum(T.maximum(_round_half_even(pos), 0), last)
    v_lo = take_along_axis(s, T.astype(lo, np.int64), axis=-1)
    v_hi = take_along_axis(s, T.astype(hi, np.int64), axis=-1)
    if method == "linear":
        frac = pos - lo
        out = v_lo + (v_hi - v_lo) * frac
    elif method == "midpoint":
        out = (v_lo + v_hi) * 0.5
    else:
        out = v_lo
    if ignore_nan:
        out = T.where(n == 0, np.nan, out)
    else:
        out = T.where(nan_in, np.nan, out)
    return out


def _quantile(name, a, q, axis, method, keepdims, ignore_nan, weights=None):
    if method not in _METHODS:
        raise ValueError(f"{name}: method must be one of {_METHODS}, got {method!r}")
    x = _inexact(a)
    if x.dtype in COMPLEXES:
        raise TypeError(f"{name}: complex values have no order")
    w = None if weights is None else _quantile_weights(name, x, weights, axis, method)
    qv = _inexact(q)
    if axis is None:
        x, ax_list = reshape(x, (-1,)), [0]
        w = None if w is None else reshape(w, (-1,))
        out_keep = (1,) * _tr(a).ndim
    else:
        ax_list = sorted({int(i) % x.ndim for i in np.atleast_1d(np.asarray(axis))})
        out_keep = tuple(1 if i in ax_list else d for i, d in enumerate(x.shape))
        rest = [i for i in range(x.ndim) if i not in ax_list]
        x = T.transpose(x, tuple(rest + ax_list))
        x = reshape(x, x.shape[:len(rest)] + (-1,))
        if w is not None:
            w = T.transpose(w, tuple(rest + ax_list))
            w = reshape(w, w.shape[:len(rest)] + (-1,))
    n_total = x.shape[-1]
    if method == "inverted_cdf":  # the weights move with the values (ones when not given)
        perm = S.argsort(x, axis=-1)
        s = take_along_axis(x, perm, axis=-1)
        ws = zeros_like(s) + 1 if w is None else take_along_axis(w, perm, axis=-1)
    else:
        s = S.sort(x, axis=-1)  # NaN last
    qf = reshape(qv, (-1,))
    nan_in = S.any(isnan(x), axis=-1, keepdims=True)
    if ignore_nan:
        n = T.sum(T.astype(~isnan(x), s.dtype), -1, keepdims=True)
    else:
        n = T.astype(asarray(float(n_total)), s.dtype)
    if method == "inverted_cdf":
        out = _inverted_cdf(s, ws, qf, n, ignore_nan, nan_in)
    else:
        out = _interpolated(s, qf, n, method, ignore_nan, nan_in)
    out = moveaxis(out, -1, 0)  # q first, as numpy
    shape = qv.shape + (out_keep if keepdims else tuple(
        d for i, d in enumerate(out_keep) if axis is not None and i not in ax_list))
    return reshape(out, shape)


@_numpy_outside(np.quantile)
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    if out is not None:
        raise NotImplementedError("quantile: out is not supported")
    return _quantile("quantile", a, q, axis, method, keepdims, False, weights)


@_numpy_outside(np.nanquantile)
def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    if out is not None:
        raise NotImplementedError("nanquantile: out is not supported")
    return _quantile("nanquantile", a, q, axis, method, keepdims, True, weights)


def _percent(q):
    return _inexact(q) / 100.0 if isinstance(q, Tracer) else np.asarray(q, np.float64) / 100.0


@_numpy_outside(np.percentile)
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    return quantile(a, _percent(q), axis, out, overwrite_input, method, keepdims, weights=weights)


@_numpy_outside(np.nanpercentile)
def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
    return nanquantile(a, _percent(q), axis, out, overwrite_input, method, keepdims,
                       weights=weights)


@_numpy_outside(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return quantile(a, 0.5, axis, out, overwrite_input, "midpoint", keepdims)


@_numpy_outside(np.nanmedian)
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return nanquantile(a, 0.5, axis, out, overwrite_input, "midpoint", keepdims)


# ---- covariance ----

@_numpy_outside(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        dtype=None):
    """Covariance matrix of the rows (variables) of m, numpy's and jax's formula with
    frequency and analytic weights, computed in ``dtype`` when given (inexact, as jax's)."""
    if dtype is not None and kind_of(np.dtype(dtype)) not in "fc":
        raise ValueError(f"cov: dtype must be a float or complex dtype; got {dtype}")
    x = _inexact(m)
    if x.ndim > 2:
        raise ValueError(f"cov: m has more than 2 dimensions ({x.shape})")
    x = reshape(x, (1, -1)) if x.ndim < 2 else x
    if not rowvar and x.shape[0] != 1:
        x = T.transpose(x)
    if y is not None:
        yy = _inexact(y)
        yy = reshape(yy, (1, -1)) if yy.ndim < 2 else yy
        if not rowvar and yy.shape[0] != 1:
            yy = T.transpose(yy)
        x = T.concatenate([x, yy], axis=0)
    if dtype is not None:
        x = T.astype(x, dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    w = None
    if fweights is not None:
        w = _inexact(fweights)
    if aweights is not None:
        aw = _inexact(aweights)
        w = aw if w is None else w * aw
    if dtype is not None and w is not None:
        w = T.astype(w, dtype)
    n_obs = x.shape[1]
    if w is None:
        avg = T.mean(x, 1)
        fact = float(n_obs - ddof)
    else:
        wsum = T.sum(w)
        avg = T.sum(x * w, 1) / wsum
        if ddof == 0:
            fact = wsum
        elif aweights is None:
            fact = wsum - ddof
        else:
            fact = wsum - ddof * T.sum(w * _inexact(aweights)) / wsum
    xc = x - reshape(avg, (-1, 1))
    xt = T.transpose(xc if w is None else xc * w)
    c = T.matmul(xc, T.conj(xt)) / fact
    return squeeze(c)


@_numpy_outside(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, dtype=None):
    if dtype is not None and kind_of(np.dtype(dtype)) not in "fc":
        raise ValueError(f"corrcoef: dtype must be a float or complex dtype; got {dtype}")
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = T.real(take(T.reshape(c, (-1,)), np.arange(0, c.size, c.shape[0] + 1)))
    sd = T.sqrt(d)
    c = c / reshape(sd, (-1, 1)) / reshape(sd, (1, -1))
    if c.dtype in COMPLEXES:  # real and imaginary parts clipped to [-1, 1], as jax
        return T.astype(clip(T.real(c), -1, 1), c.dtype) + T.astype(clip(T.imag(c), -1, 1),
                                                                    c.dtype) * 1j
    return clip(c, -1.0, 1.0)


# ---- search in sorted arrays ----

@_numpy_outside(np.searchsorted)
def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Indices where v would be inserted into the sorted 1-D a to keep it sorted, int32 as jax;
    NaN sorts last, as numpy. Every `method` of jax's gives the same indices; tidu runs one: the
    SearchSorted primitive (a branchless binary search per value, ops/search.py); complex values
    by a composite binary search in numpy's lexicographic order."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
        raise ValueError(f"searchsorted: method must be one of 'scan', 'scan_unrolled', 'sort', "
                         f"'compare_all', got {method!r}")
    t = _trace_of(a, v)
    arr, val = _lift(t, a), _lift(t, v)
    if arr.ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-D, got shape {arr.shape}")
    if sorter is not None:
        arr = take(arr, sorter)
    dt = np.result_type(arr.dtype, val.dtype)
    arr, val = T.astype(arr, dt), T.astype(val, dt)
    if arr.shape[0] == 0:
        return _lift(t, zeros_like(val, dtype=np.int32))
    if dt in COMPLEXES:
        return _searchsorted_lexicographic(arr, val, side, t)
    return _emit(t, P.SearchSorted(side == "right"), arr, val)


def _searchsorted_lexicographic(arr, val, side, t):
    """searchsorted over complex values (real part, then imaginary, NaN last as numpy): the
    binary search on lo and hi with the full comparison."""
    n = arr.shape[0]
    lo = _lift(t, zeros_like(val, dtype=np.int32))
    hi = lo + n
    last = n - 1
    rv, iv = T.real(val), T.imag(val)
    nan_v = isnan(val)
    for _ in range(n.bit_length()):
        go = lo < hi
        mid = (lo + hi) >> 1
        am = take(arr, T.minimum(mid, last), mode="promise_in_bounds")
        ra, ia = T.real(am), T.imag(am)
        right = (ra < rv) | ((ra == rv) & ((ia < iv) if side == "left" else (ia <= iv)))
        right = right | (~isnan(am) & nan_v) if side == "left" else right | nan_v
        lo = T.where(go & right, mid + 1, lo)
        hi = T.where(go & ~right, mid, hi)
    return lo


@_numpy_outside(np.digitize)
def digitize(x, bins, right=False, *, method=None):
    """The index of the bin each x falls in (bins increasing or decreasing), as numpy."""
    traced_bins = isinstance(bins, Tracer)
    b = _tr(bins)
    if b.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-D, got shape {b.shape}")
    side = "left" if right else "right"
    inc = searchsorted(b, x, side=side)
    if b.shape[0] < 2:
        return inc
    dec = b.shape[0] - searchsorted(b[::-1], x, side=side)  # decreasing bins, as numpy
    if traced_bins:
        return T.where(b[-1] >= b[0], inc, dec)
    edges = np.asarray(bins)
    return inc if edges[-1] >= edges[0] else dec


@_numpy_outside(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """One-dimensional piecewise-linear interpolation, numpy's and jax's definition."""
    t = _trace_of(x, xp, fp)
    xv, xpv, fpv = _inexact(_lift(t, x)), _inexact(_lift(t, xp)), _lift(t, fp)
    if xpv.ndim != 1 or fpv.ndim != 1 or xpv.shape != fpv.shape:
        raise ValueError(f"interp: xp and fp must be 1-D of one length, got {xpv.shape} and "
                         f"{fpv.shape}")
    fpv = as_inexact(fpv, t)
    if period is not None:
        if left is not None or right is not None:
            raise ValueError("interp: left and right have no meaning with period")
        xv = xv % period
        xpm = xpv % period
        order = S.argsort(xpm)
        xpv, fpv = take(xpm, order), take(fpv, order)
        xpv = T.concatenate([xpv[-1:] - period, xpv, xpv[:1] + period])
        fpv = T.concatenate([fpv[-1:], fpv, fpv[:1]])
    n = xpv.shape[0]
    if n == 0:
        raise ValueError("interp: xp and fp are empty (no sample points)")
    if n == 1:  # the one point: f is fp[0] there, left and right of it below
        i1 = T.broadcast_to(_lift(t, np.int32(0)), xv.shape)
        i0 = i1
    else:
        i1 = T.minimum(T.maximum(searchsorted(xpv, xv, side="right"), 1), n - 1)
        i0 = i1 - np.int32(1)
    # i0 and i1 are in [0, n): no out-of-range rule is needed
    inside = {"mode": "promise_in_bounds"}
    x0, x1 = take(xpv, i0, **inside), take(xpv, i1, **inside)
    f0, f1 = take(fpv, i0, **inside), take(fpv, i1, **inside)
    dx = x1 - x0
    safe = T.where(dx == 0, 1, dx)
    f = T.where(dx == 0, f1, f0 + (xv - x0) * ((f1 - f0) / safe))
    if period is None:
        f = T.where(xv < xpv[0], fpv[0] if left is None else left, f)
        f = T.where(xv > xpv[-1], fpv[-1] if right is None else right, f)
    return f


@_numpy_outside(np.polyval)
def polyval(p, x, *, unroll=16):
    """p[0] x^(n-1) + ... + p[n-1], by Horner's rule (p's length is static)."""
    t = _trace_of(p, x)
    pv, xv = _lift(t, p), _lift(t, x)
    if pv.ndim != 1:
        raise ValueError(f"polyval: p must be 1-D, got shape {pv.shape}")
    y = T.astype(xv * 0, np.result_type(pv.dtype, xv.dtype))
    for k in range(pv.shape[0]):
        y = y * xv + pv[k]
    return y
