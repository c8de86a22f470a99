"""Sorting, reductions and cumulative ops, after ``jax.numpy``: ``min, prod, any, all, argmax,
argmin, sort, argsort, cumsum, cumprod`` and ``cummax, cummin`` (as ``jax.lax``'s).

Built on the primitives of ``tidu.ops.sorting`` (C++ kernels, StableHLO lowerings, derivatives to
any order).  See docs/numpy.md, section "Sorting, reductions, cumulative ops, einsum".
"""

from __future__ import annotations

import operator

import numpy as np

from tidu import ops as P
from tidu.graph.dtypes import BOOL, INTS, accumulation_dtype, kind_of
from tidu.numpy.core import _axes, iota, lex_extreme, lex_index, no_out, reshape, transpose, where
from tidu.numpy.take import take_along_axis
from tidu.trace.tracer import _broadcast, _compare, _const, _lift, _trace_of, keeps_weak
from tidu.trace.tracer import _emit as emit

__all__ = ["min", "prod", "any", "all", "argmax", "argmin", "sort", "argsort", "cumsum", "cumprod",
           "cummax", "cummin"]

_INT = np.dtype("int64")  # index dtype of argmax/argmin/argsort (numpy's; jax's under x64)


def _traced(x):
    t = _trace_of(x)
    return t, _lift(t, x)


def _emit(t, op, *xs):
    return emit(t, op, *xs)


def _keep(t, y, x, axes, keepdims):
    if not keepdims:
        return y
    return _emit(t, P.Reshape(tuple(1 if i in axes else d for i, d in enumerate(x.shape))), y)


def _reduce(cls, x, axis, keepdims):
    t, x = _traced(x)
    axes = _axes(x, axis)
    return _keep(t, _emit(t, cls(axes), x), x, axes, keepdims)


def _flat_axis(x, axis):
    """(x, axis) with axis=None meaning the flattened array, a negative axis normalised."""
    if axis is None:
        return reshape(x, (-1,)), 0
    axis = int(axis)
    if not -x.ndim <= axis < builtins_max(x.ndim, 1):
        raise ValueError(f"axis {axis} out of range for shape {x.shape}")
    return x, axis % builtins_max(x.ndim, 1)


def builtins_max(a, b):
    return a if a > b else b


def _as_bool(t, x):
    return x if x.aval.dtype == BOOL else _compare("NE", x, 0)


# ---- reductions ----

def min(a, axis=None, keepdims=False):  # noqa: A001
    """Minimum over ``axis`` (all axes when None), as ``jnp.min``; NaN propagates.

    Raises:
        ValueError: a reduced axis is empty, or an axis is out of range.
    """
    t, x = _traced(a)
    if x.aval.dtype == BOOL:
        return _reduce(P.ReduceAnd, x, axis, keepdims)
    if kind_of(x.aval.dtype) == "c":  # lexicographic, as numpy and jax
        return lex_extreme(x, _axes(x, axis), keepdims, largest=False)
    return _reduce(P.ReduceMin, x, axis, keepdims)


def prod(a, axis=None, dtype=None, keepdims=False):
    """Product over ``axis``, as ``jnp.prod`` (bool and signed integers accumulate in int64,
    unsigned ones in uint64, as jax under x64); its derivative never divides, so it is exact
    where elements are zero."""
    t, x = _traced(a)
    if dtype is not None:
        x = _lift(t, x, np.dtype(dtype))
    elif x.aval.dtype == BOOL or x.aval.dtype in INTS:
        x = _lift(t, x, accumulation_dtype(x.aval.dtype))
    return _reduce(P.ReduceProd, x, axis, keepdims)


def all(a, axis=None, keepdims=False):  # noqa: A001
    """True where every element over ``axis`` is nonzero, as ``jnp.all``."""
    t, x = _traced(a)
    return _reduce(P.ReduceAnd, _as_bool(t, x), axis, keepdims)


def any(a, axis=None, keepdims=False):  # noqa: A001
    """True where some element over ``axis`` is nonzero, as ``jnp.any``."""
    t, x = _traced(a)
    return _reduce(P.ReduceOr, _as_bool(t, x), axis, keepdims)


def _arg(cls, a, axis, keepdims):
    t, x = _traced(a)
    if x.aval.dtype == BOOL:
        x = _lift(t, x, np.int32)
    nd = x.ndim
    flat, ax = _flat_axis(x, axis)
    if flat.shape[ax] == 0:
        raise ValueError(f"{cls.__name__.lower()}: attempt to get the {cls.__name__[3:].lower()} "
                         f"of an empty sequence (shape {x.shape})")
    if kind_of(x.aval.dtype) == "c":  # lexicographic, as numpy (jax refuses complex here)
        last = flat.ndim - 1
        perm = tuple(i for i in range(flat.ndim) if i != ax) + (ax,)
        y = lex_index(transpose(flat, perm) if ax != last else flat, cls is P.ArgMax)
    else:
        y = _emit(t, cls(ax, _INT.name), flat)
    if keepdims:
        shape = (1,) * nd if axis is None else tuple(1 if i == ax else d
                                                     for i, d in enumerate(x.shape))
        y = _emit(t, P.Reshape(shape), y)
    return y


def argmax(a, axis=None, out=None, keepdims=None):
    """Index of the maximum along ``axis`` (of the flattened array when None), int64, as
    ``jnp.argmax`` under x64: the first maximum, the first NaN if there is one.  Not
    differentiable (an integer output)."""
    no_out(out, "argmax")
    return _arg(P.ArgMax, a, axis, bool(keepdims))


def argmin(a, axis=None, out=None, keepdims=None):
    """Index of the minimum along ``axis``, int64, as ``jnp.argmin`` (the first NaN wins)."""
    no_out(out, "argmin")
    return _arg(P.ArgMin, a, axis, bool(keepdims))


# ---- sorting ----

@keeps_weak(0)
def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """Sorted copy along ``axis`` (flattened when None), as ``jnp.sort``: stable, NaN last
    (first when ``descending``), complex by real then imaginary part.  Its derivative moves each
    tangent with its element (ties keep their original order)."""
    if order is not None:
        raise TypeError("sort: 'order' (structured arrays) is not supported")
    t, x = _traced(a)
    x, ax = _flat_axis(x, axis)
    if x.ndim == 0:
        return x
    return _emit(t, P.Sort(ax, bool(descending)), x)


def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False, dtype=None):
    """Indices that sort ``a`` along ``axis`` (int64, or the integer ``dtype`` given), as
    ``jnp.argsort``: stable, NaN last; with ``descending`` the reverse order with ties kept in
    their original order."""
    if order is not None:
        raise TypeError("argsort: 'order' (structured arrays) is not supported")
    idx = _INT if dtype is None else np.dtype(dtype)
    if kind_of(idx) not in "iu":
        raise ValueError(f"argsort: dtype must be an integer dtype; got {idx}")
    t, x = _traced(a)
    x, ax = _flat_axis(x, axis)
    if x.ndim == 0:
        return _const(t, np.zeros((), idx), idx)
    return _emit(t, P.Sort(ax, bool(descending)), x, iota(x.shape, idx.name, ax))


def _zero_index(t):
    return _const(t, np.zeros((), _INT), _INT)


# ---- cumulative ----

def _cumulative(cls, a, axis, dtype, reverse=False, promote=False):
    t, x = _traced(a)
    if dtype is not None:
        x = _lift(t, x, np.dtype(dtype))
    elif x.aval.dtype == BOOL or (promote and x.aval.dtype in INTS):
        x = _lift(t, x, _INT)
    x, ax = _flat_axis(x, axis)
    if x.ndim == 0:
        x, ax = _emit(t, P.Reshape((1,)), x), 0
    return _emit(t, cls(ax, bool(reverse)), x)


def cumsum(a, axis=None, dtype=None, out=None):
    """Running sum along ``axis`` (of the flattened array when None), as ``jnp.cumsum`` (bool
    accumulates in int64, integers in their own dtype, wrapping).  Linear; its transpose is a
    cumsum from the other end."""
    no_out(out, "cumsum")
    return _cumulative(P.Cumsum, a, axis, dtype)


def cumprod(a, axis=None, dtype=None, out=None):
    """Running product along ``axis``, as ``jnp.cumprod``; its derivative never divides."""
    no_out(out, "cumprod")
    return _cumulative(P.Cumprod, a, axis, dtype)


def cummax(a, axis=0, reverse=False):
    """Running maximum along ``axis`` (from the end when ``reverse``), as ``jax.lax.cummax``;
    NaN propagates.  The tangent is that of the element where the running maximum was last
    attained."""
    return _cum_extreme(P.Cummax, a, axis, reverse)


def cummin(a, axis=0, reverse=False):
    """Running minimum along ``axis``, as ``jax.lax.cummin``."""
    return _cum_extreme(P.Cummin, a, axis, reverse)


def _cum_extreme(cls, a, axis, reverse):
    t, x = _traced(a)
    if kind_of(x.aval.dtype) == "c":
        raise TypeError(f"{cls.__name__.lower()}: complex numbers have no order")
    if x.aval.dtype == BOOL:  # through int32, back to bool

        y = _cumulative(cls, _lift(t, x, np.int32), axis, None, reverse, False)
        return _emit(t, P.Compare("NE"), y, _zeros_i32(t, y.shape))
    return _cumulative(cls, x, axis, None, reverse)


def _zeros_i32(t, shape):
    return _broadcast(t, _const(t, np.zeros((), np.int32), np.int32), tuple(shape))


# ---- top_k (jax.lax's; no jax.numpy name) ----

def top_k(operand, k, *, axis=-1):
    """``jax.lax.top_k``: the k largest entries along ``axis`` (the last by default), largest
    first, and their int32 indices; equal entries in index order, NaN above every number and +0
    above -0 (as XLA's TopK; a NaN with its sign bit set still ranks first, where XLA's is last).
    One stable descending Sort of an iota by the operand, then a gather of the values, so its
    derivative scatters the values' cotangent back to the chosen indices."""
    t, x = _traced(operand)
    if x.ndim == 0:
        raise ValueError("top_k: operand must have at least one dimension, got a scalar")
    if kind_of(x.aval.dtype) == "c":
        raise TypeError(f"top_k: operand must be real, got {x.aval.dtype}")
    ax = int(axis)
    if not -x.ndim <= ax < x.ndim:
        raise ValueError(f"top_k: axis {axis} out of range for shape {x.shape}")
    ax %= x.ndim
    k = operator.index(k)
    n = x.shape[ax]
    if not 0 <= k <= n:
        raise ValueError(f"top_k: k must be between 0 and the size of axis {ax} ({n}), got {k}")
    xs = x if x.aval.dtype != BOOL else _lift(t, x, np.int32)
    idx = iota(x.shape, "int32", ax)
    if kind_of(xs.aval.dtype) == "f":
        # XLA's TopK ranks +0 above -0 (Sort ties them): float32 sorts float64 keys with the
        # zeros moved to +-1e-300 (below every nonzero float32); float64 sorts twice, stably,
        # +0s first then by value, so the zeros' tie keeps +0 ahead
        zero = xs == 0
        neg0 = zero & (1 / where(zero, xs, np.ones((), xs.aval.dtype)) < 0)
        if xs.aval.dtype == np.float32:
            xs = where(zero, where(neg0, np.float64(-1e-300), np.float64(1e-300)),
                       _lift(t, xs, np.float64))
        else:
            first = where(zero & ~neg0, np.int32(1), np.int32(0))
            idx = _emit(t, P.Sort(ax, True), first, idx)
            xs = take_along_axis(xs, idx, ax)
    order = _emit(t, P.Sort(ax, True), xs, idx)
    if k < n:
        limit = tuple(k if i == ax else d for i, d in enumerate(x.shape))
        order = _emit(t, P.Slice((0,) * x.ndim, limit, (1,) * x.ndim), order)
    return take_along_axis(x, order, ax), order
