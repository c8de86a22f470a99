"""Statistics and differences on traced values, as ``jax.numpy`` spells them: var, std, diff
(composites over the tier-1 primitives; see ``tidu.numpy.sorting`` for the reductions that
order values)."""

from __future__ import annotations

import builtins

import numpy as np

from tidu.graph.dtypes import BOOL, COMPLEXES
from tidu.numpy import core as T
from tidu.numpy.shapes import (
    _axes,
    _axis,
    _has_tracer,
    _lift,
    _numpy_outside,
    _slice,
    _static_int,
    _traced,
)
from tidu.trace.tracer import Tracer, _broadcast, _compare, as_inexact
from tidu.trace.tracer import _lift as _lift_in

__all__ = ["diff", "std", "var"]

_range = builtins.range


# ---- statistics and differences ----

def _moment_axes(x, axis):
    return tuple(_range(x.ndim)) if axis is None else _axes(axis, x.ndim, "var")


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None):
    """Variance, mean(abs(x - mean(x))**2) * N / (N - ddof), real for complex input,
    to_inexact_dtype for integer input (as ``jax.numpy.var``)."""
    if out is not None or where is not None:
        raise NotImplementedError("var: the out and where arguments are not supported")
    if not _traced() and not _has_tracer((a,)):
        return _no_dof_nan(np.var, a, axis, dtype, ddof if correction is None else correction,
                           keepdims)
    if correction is not None:
        if ddof != 0:
            raise ValueError("var: ddof and correction are both given")
        ddof = correction
    x = _lift(a)
    if dtype is not None:
        x = T.astype(x, dtype)
    else:
        x = as_inexact(x)
    axes = _moment_axes(x, axis)
    n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    centered = x - T.mean(x, axes, keepdims=True)
    sq = T.real(centered * T.conj(centered)) if x.dtype in COMPLEXES else centered * centered
    # N - ddof <= 0: NaN, as jax (numpy divides by max(N - ddof, 0): inf, with a warning)
    return T.sum(sq, axes, keepdims) / (float(n - ddof) if n - ddof > 0 else np.nan)


def _no_dof_nan(f, a, axis, dtype, ddof, keepdims):
    """numpy's var/std outside a trace, NaN where N - ddof <= 0 (jax's value and the traced
    one; numpy gives inf there, or NaN for constant data, with a warning)."""
    a = np.asarray(a)
    n = a.size if axis is None else int(np.prod([a.shape[i] for i in _moment_axes(a, axis)]))
    if n - ddof > 0:
        return f(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = f(a, axis=axis, dtype=dtype, ddof=0, keepdims=keepdims)
    return np.full_like(y, np.nan)[()]


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None):
    """Standard deviation, sqrt(var(...)) with var's arguments."""
    if not _traced() and not _has_tracer((a,)):
        return _no_dof_nan(np.std, a, axis, dtype, ddof if correction is None else correction,
                           keepdims)
    return T.sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction))


@_numpy_outside(np.diff)
def diff(a, n: int = 1, axis: int = -1, prepend=None, append=None) -> Tracer:
    """n-th discrete difference along axis (not_equal for bool), with optional values prepended
    or appended first (broadcast to the axis like numpy's)."""
    x = _lift(a)
    n = _static_int("diff", "n", n)
    if n < 0:
        raise ValueError(f"diff: order must be non-negative, got {n}")
    if x.ndim == 0:
        raise ValueError("diff: requires input that is at least one dimensional")
    ax = _axis(axis, x.ndim, "diff")
    def extra(v):
        e = _lift_in(x._t, v)
        if e.ndim == 0:
            e = _broadcast(x._t, e, tuple(1 if i == ax else d for i, d in enumerate(x.shape)))
        return e

    parts = ([extra(prepend)] if prepend is not None else []) + [x] + \
        ([extra(append)] if append is not None else [])
    if len(parts) > 1:
        x = T.concatenate(parts, axis=ax)
    for _ in _range(n):
        m = x.shape[ax]
        if m == 0:
            break
        hi, lo = _slice(x, ax, 1, m), _slice(x, ax, 0, m - 1)
        x = _compare("NE", hi, lo) if x.dtype == BOOL else hi - lo
    return x
