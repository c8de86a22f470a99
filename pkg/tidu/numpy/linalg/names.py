"""The array-API names of ``jax.numpy.linalg`` that are other numpy functions with the linear
algebra conventions (matrix axes last, vector axis ``axis``): ``cross``, ``matmul``,
``matrix_norm``, ``matrix_transpose``, ``outer``, ``tensordot``, ``trace``, ``vecdot``,
``vector_norm``."""

from __future__ import annotations

from tidu.graph.dtypes import kind_of
from tidu.numpy import contractions as _c
from tidu.numpy.core import conj, reshape, transpose
from tidu.numpy.core import matmul as _matmul
from tidu.numpy.core import sum as sum_
from tidu.numpy.linalg.core import norm
from tidu.trace.tracer import _lift, _trace_of

__all__ = ["cross", "matmul", "matrix_norm", "matrix_transpose", "outer", "tensordot", "trace",
           "vecdot", "vector_norm"]


def _traced(*xs):
    t = _trace_of(*xs)
    return [_lift(t, x) for x in xs]


def cross(x1, x2, /, *, axis: int = -1):
    """The cross product of 3-vectors along ``axis`` (jax.numpy.linalg.cross: size 3 only)."""
    a, b = _traced(x1, x2)
    if a.shape[axis] != 3 or b.shape[axis] != 3:
        raise ValueError(f"linalg.cross: both inputs need size 3 along axis {axis}, got shapes "
                         f"{a.shape} and {b.shape}")
    return _c.cross(a, b, axis=axis)


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    """``jnp.matmul`` (``precision`` and ``preferred_element_type`` are accepted and ignored:
    tidu computes in the operands' promoted dtype)."""
    return _matmul(x1, x2)


def matrix_transpose(x, /):
    """Swap the last two axes."""
    (x,) = _traced(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: x must have at least 2 dimensions, got shape "
                         f"{x.shape}")
    return transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def outer(x1, x2, /):
    """The outer product of two vectors (1-D only, as jax.numpy.linalg.outer)."""
    a, b = _traced(x1, x2)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"linalg.outer: inputs must be 1-D, got shapes {a.shape} and {b.shape}")
    return _c.outer(a, b)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
    """``jnp.tensordot`` with ``axes`` keyword-only, as jax.numpy.linalg.tensordot."""
    return _c.tensordot(x1, x2, axes)


def trace(x, /, *, offset: int = 0, dtype=None):
    """The trace over the last two axes."""
    (x,) = _traced(x)
    if x.ndim < 2:
        raise ValueError(f"linalg.trace: x must have at least 2 dimensions, got shape {x.shape}")
    return _c.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    """sum(conj(x1) * x2) along ``axis``, the other axes broadcast."""
    a, b = _traced(x1, x2)
    if a.shape[axis] != b.shape[axis]:
        raise ValueError(f"vecdot: axis {axis} has sizes {a.shape[axis]} and {b.shape[axis]}")
    a = conj(a) if kind_of(a.dtype) == "c" else a
    return sum_(a * b, axis=axis)


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2):  # noqa: A002
    """The vector norm over ``axis`` (None: all axes, as one vector)."""
    (x,) = _traced(x)
    if axis is None:
        r = norm(reshape(x, (-1,)), ord=ord)
        return reshape(r, (1,) * x.ndim) if keepdims else r
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if len(axes) == 1:
        return norm(x, ord=ord, axis=axes[0], keepdims=keepdims)
    axes = tuple(sorted(int(a) % x.ndim for a in axes))  # several axes: one vector of them
    rest = [k for k in range(x.ndim) if k not in axes]
    flat = reshape(transpose(x, tuple(rest + list(axes))),
                   tuple(x.shape[k] for k in rest) + (-1,))
    r = norm(flat, ord=ord, axis=-1)
    if keepdims:
        r = reshape(r, tuple(1 if k in axes else x.shape[k] for k in range(x.ndim)))
    return r


def matrix_norm(x, /, *, keepdims: bool = False, ord="fro"):  # noqa: A002
    """The matrix norm over the last two axes."""
    (x,) = _traced(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_norm: x must have at least 2 dimensions, got shape {x.shape}")
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)
