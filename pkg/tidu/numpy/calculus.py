"""jax.numpy's differences, integrals and vector products: ``ediff1d``, ``gradient``,
``trapezoid``, ``unwrap``, ``vecdot``, ``matvec``, ``vecmat``, and the whole-array comparisons
``array_equal``, ``array_equiv``.

Composites of Slice, elementwise ops, Cumsum and reductions, written as jax writes them so values
and derivatives agree; outside a trace (no traced argument) each is numpy's own.
"""

from __future__ import annotations

import numpy as np

from tidu.graph.dtypes import kind_of
from tidu.numpy import core, shapes, sorting, ufuncs
from tidu.numpy.reductions import diff
from tidu.numpy.shapes import _axis, _numpy_outside
from tidu.trace.tracer import Tracer, _lift, _trace_of, as_inexact

__all__ = ["array_equal", "array_equiv", "ediff1d", "gradient", "matvec", "trapezoid",
           "unwrap", "vecdot", "vecmat"]


def _tr(x) -> Tracer:
    return _lift(_trace_of(x), x)


def _inexact(x) -> Tracer:
    return as_inexact(x)


@_numpy_outside(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    """The differences of the flattened array, with to_begin before and to_end after."""
    t = _trace_of(ary)
    x = shapes.ravel(_lift(t, ary))
    parts = [diff(x)]
    if to_begin is not None:
        parts.insert(0, shapes.ravel(core.astype(_lift(t, to_begin), x.dtype)))
    if to_end is not None:
        parts.append(shapes.ravel(core.astype(_lift(t, to_end), x.dtype)))
    return parts[0] if len(parts) == 1 else core.concatenate(parts, 0)


def _sl(x, ax, start, stop):
    return shapes._slice(x, ax, start, stop)


def _gradient_1(f, ax, h):
    n = f.shape[ax]
    if n < 2:
        raise ValueError("gradient: shape of the array along each differentiated axis must be "
                         "at least 2")
    if isinstance(h, (int, float, np.integer, np.floating)) or (
            isinstance(h, Tracer) and h.ndim == 0) or np.ndim(h) == 0:
        first = (_sl(f, ax, 1, 2) - _sl(f, ax, 0, 1)) / h
        last = (_sl(f, ax, n - 1, n) - _sl(f, ax, n - 2, n - 1)) / h
        if n == 2:
            return core.concatenate([first, last], ax)
        mid = (_sl(f, ax, 2, n) - _sl(f, ax, 0, n - 2)) / (2 * h)
        return core.concatenate([first, mid, last], ax)
    x = _inexact(h)
    if x.ndim != 1 or x.shape[0] != n:
        raise ValueError("gradient: a coordinate array must be 1-D with the axis's length")
    dx = diff(x)
    shape = [1] * f.ndim

    def along(v):
        shape[ax] = v.shape[0]
        return core.reshape(v, tuple(shape))

    first = (_sl(f, ax, 1, 2) - _sl(f, ax, 0, 1)) / along(dx[:1])
    last = (_sl(f, ax, n - 1, n) - _sl(f, ax, n - 2, n - 1)) / along(dx[-1:])
    if n == 2:
        return core.concatenate([first, last], ax)
    d1, d2 = dx[:-1], dx[1:]
    a = along(-d2 / (d1 * (d1 + d2)))
    b = along((d2 - d1) / (d1 * d2))
    c = along(d1 / (d2 * (d1 + d2)))
    mid = a * _sl(f, ax, 0, n - 2) + b * _sl(f, ax, 1, n - 1) + c * _sl(f, ax, 2, n)
    return core.concatenate([first, mid, last], ax)


def gradient(f, *varargs, axis=None, edge_order=None):
    """Second-order central differences inside, first-order ones at the edges (numpy's
    edge_order=1, jax's only one); spacings a scalar or coordinates per axis."""
    if not shapes._traced() and not shapes._has_tracer([f, *varargs]):
        return np.gradient(f, *varargs, axis=axis, edge_order=1 if edge_order is None
                           else edge_order)
    if edge_order is not None:
        raise NotImplementedError("gradient: edge_order is not supported (as jax)")
    x = _inexact(f)
    axes = list(range(x.ndim)) if axis is None else \
        [_axis(a, x.ndim, "gradient") for a in ((axis,) if isinstance(axis, int) else axis)]
    if len(varargs) == 0:
        hs = [1.0] * len(axes)
    elif len(varargs) == 1:
        hs = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        hs = list(varargs)
    else:
        raise TypeError("gradient: invalid number of spacing arguments")
    out = [_gradient_1(x, ax, h) for ax, h in zip(axes, hs)]
    return out[0] if len(out) == 1 else out


def trapezoid(y, x=None, dx=1.0, axis: int = -1):
    """The integral of y along axis by the trapezoidal rule (x the sample points, or spacing
    dx)."""
    if not shapes._traced() and not shapes._has_tracer([y, x, dx]):
        return np.trapezoid(y, x, dx, axis)
    yt = _inexact(y)
    ax = _axis(axis, yt.ndim, "trapezoid")
    yt = shapes.moveaxis(yt, ax, -1)
    if x is None:
        d = dx
    else:
        xt = _inexact(x)
        d = diff(xt) if xt.ndim == 1 else diff(shapes.moveaxis(xt, ax, -1), axis=-1)
    return core.sum(d * (yt[..., 1:] + yt[..., :-1]), axis=-1) * 0.5


@_numpy_outside(np.unwrap)
def unwrap(p, discont=None, axis: int = -1, period=2 * np.pi):
    """p with jumps above `discont` (default period / 2) along axis replaced by their
    complement modulo period (jax's formula)."""
    x = _inexact(p)
    ax = _axis(axis, x.ndim, "unwrap")
    interval = period / 2
    discont = interval if discont is None else discont
    dd = diff(x, axis=ax)
    ddmod = ufuncs.mod(dd + interval, period) - interval
    ddmod = core.where((ddmod == -interval) & (dd > 0), interval, ddmod)
    correct = core.where(core.abs(dd) < discont, 0, ddmod - dd)
    n = x.shape[ax]
    return core.concatenate([_sl(x, ax, 0, 1), _sl(x, ax, 1, n) + sorting.cumsum(correct, ax)],
                            ax)


def _pair(x1, x2):
    t = _trace_of(x1, x2)
    a, b = _lift(t, x1), _lift(t, x2)
    dt = np.result_type(a.dtype, b.dtype)
    return _lift(t, a, dt), _lift(t, b, dt)


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    """sum(conj(x1) * x2) along axis, the other axes broadcast (the array API's vecdot)."""
    if not shapes._traced() and not shapes._has_tracer([x1, x2]):
        out = np.vecdot(x1, x2, axis=axis)
        return out if preferred_element_type is None else out.astype(preferred_element_type)
    a, b = _pair(x1, x2)
    if a.shape[axis] != b.shape[axis]:
        raise ValueError(f"vecdot: axes of length {a.shape[axis]} and {b.shape[axis]} differ")
    out = core.sum(core.conj(a) * b, axis=axis)
    return out if preferred_element_type is None else core.astype(out, preferred_element_type)


@_numpy_outside(np.matvec)
def matvec(x1, x2, /):
    """The matrix-vector product of (..., m, n) and (..., n), batch axes broadcast."""
    a, b = _pair(x1, x2)
    if a.ndim < 2 or b.ndim < 1 or a.shape[-1] != b.shape[-1]:
        raise ValueError(f"matvec: shapes {a.shape} and {b.shape} do not fit (..., m, n) and "
                         "(..., n)")
    return core.sum(a * shapes.expand_dims(b, -2), axis=-1)


@_numpy_outside(np.vecmat)
def vecmat(x1, x2, /):
    """The vector-matrix product conj(x1) @ x2 of (..., m) and (..., m, n)."""
    a, b = _pair(x1, x2)
    if a.ndim < 1 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"vecmat: shapes {a.shape} and {b.shape} do not fit (..., m) and "
                         "(..., m, n)")
    return core.sum(shapes.expand_dims(core.conj(a), -1) * b, axis=-2)


def _false(t):
    return _lift(t, np.bool_(False))


def array_equal(a1, a2, equal_nan: bool = False):
    """Whether the arrays have the same shape and elements (a bool scalar)."""
    if not shapes._traced() and not shapes._has_tracer([a1, a2]):
        return np.bool_(np.array_equal(a1, a2, equal_nan=equal_nan))
    t = _trace_of(a1, a2)
    a, b = _lift(t, a1), _lift(t, a2)
    if a.shape != b.shape:
        return _false(t)
    eq = a == b
    if equal_nan and kind_of(a.dtype) in "fc":
        eq = eq | (ufuncs.isnan(a) & ufuncs.isnan(b))
    return sorting.all(eq)


def array_equiv(a1, a2):
    """Whether the arrays broadcast together and are equal elementwise."""
    if not shapes._traced() and not shapes._has_tracer([a1, a2]):
        return np.bool_(np.array_equiv(a1, a2))
    t = _trace_of(a1, a2)
    a, b = _lift(t, a1), _lift(t, a2)
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return _false(t)
    return sorting.all(a == b)
