"""Contractions on traced values, as ``jax.numpy`` spells them: tensordot, inner, vdot, outer,
kron, trace, cross (each one DotGeneral, or einsum's lowering, over the tier-1 primitives)."""

from __future__ import annotations

import numpy as np

from tidu import ops as P
from tidu.graph.dtypes import accumulation_dtype
from tidu.numpy.core import (
    _on_host,
    broadcast_to,
    concatenate,
    conj,
    no_out,
    preferred,
    reshape,
    transpose,
)
from tidu.numpy.core import sum as tsum
from tidu.numpy.einsum import _diagonals, _emit, _Term
from tidu.trace.tracer import _lift, _trace_of, keeps_weak, result_type

__all__ = ["cross", "inner", "kron", "outer", "tensordot", "trace", "vdot"]


# ---- contractions ----

def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None,
              out_sharding=None):
    """``jnp.tensordot``: sum over the last ``axes`` axes of a and the first of b, or over the
    axis lists ``axes = (a_axes, b_axes)`` (``precision``, ``preferred_element_type`` as
    matmul's)."""
    _on_host(out_sharding, None, "tensordot")
    return preferred(lambda x, y: _tensordot(x, y, axes), a, b, precision,
                     preferred_element_type, "tensordot")


@keeps_weak(0, 1)
def _tensordot(a, b, axes=2):
    t = _trace_of(a, b)
    x, y = _lift_both(t, a, b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > min(x.ndim, y.ndim):
            raise ValueError(f"tensordot: axes={n} out of range for shapes {x.shape} and "
                             f"{y.shape}")
        la, lb = tuple(range(x.ndim - n, x.ndim)), tuple(range(n))
    else:
        la, lb = axes
        la = (la,) if isinstance(la, (int, np.integer)) else tuple(la)
        lb = (lb,) if isinstance(lb, (int, np.integer)) else tuple(lb)
        if len(la) != len(lb):
            raise ValueError(f"tensordot: axes {la} and {lb} differ in length")
        la = tuple(int(k) % max(x.ndim, 1) for k in la)
        lb = tuple(int(k) % max(y.ndim, 1) for k in lb)
    for p, q in zip(la, lb):
        if x.shape[p] != y.shape[q]:
            raise ValueError(f"tensordot: shape {x.shape} axis {p} does not match shape "
                             f"{y.shape} axis {q}")
    return _emit(P.DotGeneral(la, lb), x, y)


def _lift_both(t, a, b):
    dt = result_type(a, b)
    return _lift(t, a, dt), _lift(t, b, dt)


def inner(a, b, *, precision=None, preferred_element_type=None):
    """``jnp.inner``: sum over the last axes of a and b (a product when one is a scalar)."""
    return preferred(_inner, a, b, precision, preferred_element_type, "inner")


@keeps_weak(0, 1)
def _inner(a, b):
    t = _trace_of(a, b)
    x, y = _lift_both(t, a, b)
    if x.ndim == 0 or y.ndim == 0:
        return x * y
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"inner: last axes of shapes {x.shape} and {y.shape} differ")
    return _emit(P.DotGeneral((x.ndim - 1,), (y.ndim - 1,)), x, y)


def vdot(a, b, *, precision=None, preferred_element_type=None):
    """``jnp.vdot``: sum(conj(a) * b) over the flattened arrays."""
    return preferred(_vdot, a, b, precision, preferred_element_type, "vdot")


@keeps_weak(0, 1)
def _vdot(a, b):
    t = _trace_of(a, b)
    x, y = _lift_both(t, a, b)
    if x.size != y.size:
        raise ValueError(f"vdot: sizes {x.size} and {y.size} differ")
    return _emit(P.DotGeneral((0,), (0,)), conj(reshape(x, (-1,))), reshape(y, (-1,)))


@keeps_weak(0, 1)
def outer(a, b, out=None):
    """``jnp.outer``: the outer product of the flattened arrays."""
    no_out(out, "outer")
    t = _trace_of(a, b)
    x, y = _lift_both(t, a, b)
    return _emit(P.DotGeneral((), ()), reshape(x, (-1,)), reshape(y, (-1,)))


@keeps_weak(0, 1)
def kron(a, b):
    """``jnp.kron``: the Kronecker product (operands of different ranks padded with leading unit
    axes)."""
    t = _trace_of(a, b)
    x, y = _lift_both(t, a, b)
    nd = max(x.ndim, y.ndim)
    x = reshape(x, (1,) * (nd - x.ndim) + tuple(x.shape))
    y = reshape(y, (1,) * (nd - y.ndim) + tuple(y.shape))
    prod = _emit(P.DotGeneral((), ()), x, y)  # axes: x's, then y's
    perm = tuple(k for j in range(nd) for k in (j, nd + j))
    prod = _emit(P.Transpose(perm), prod) if nd > 1 else prod
    return reshape(prod, tuple(p * q for p, q in zip(x.shape, y.shape)))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """``jnp.trace``: the sum of the diagonal (``offset`` above or below it) over axis1, axis2."""
    no_out(out, "trace")
    t = _trace_of(a)
    x = _lift(t, a, None if dtype is None else np.dtype(dtype))
    if x.ndim < 2:
        raise ValueError(f"trace: needs at least 2 axes, got shape {x.shape}")
    axis1, axis2 = int(axis1) % x.ndim, int(axis2) % x.ndim
    if axis1 == axis2:
        raise ValueError("trace: axis1 and axis2 are the same axis")
    rest = [k for k in range(x.ndim) if k not in (axis1, axis2)]
    x = _emit(P.Transpose(tuple(rest + [axis1, axis2])), x)
    n, m = x.shape[-2], x.shape[-1]
    offset = int(offset)
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    k = max(0, min(n - r0, m - c0))
    lead = tuple(x.shape[:-2])
    if k == 0:
        zero = tsum(x, axis=(x.ndim - 2, x.ndim - 1)) * 0
        return zero if dtype is None else _lift(t, zero, np.dtype(dtype))
    nd = x.ndim
    x = _emit(P.Slice((0,) * (nd - 2) + (r0, c0), lead + (r0 + k, c0 + k), (1,) * nd), x)
    d = _diagonals(_Term(x, list(range(nd - 2)) + ["_d", "_d"]))
    if dtype is None and x.dtype != accumulation_dtype(x.dtype):
        d = _Term(_lift(t, d.x, accumulation_dtype(x.dtype)), d.idx)  # as sum (jax x64)
    return _emit(P.ReduceSum((nd - 2,)), d.x)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """``jnp.cross`` of 3-vectors (or 2-vectors, as numpy: the z component) along ``axisa`` /
    ``axisb``, broadcast over the other axes; the result's vector axis at ``axisc``."""
    if axis is not None:
        axisa = axisb = axisc = axis
    t = _trace_of(a, b)
    x, y = _lift_both(t, a, b)
    x, y = _moveaxis(x, axisa, -1), _moveaxis(y, axisb, -1)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise ValueError(f"cross: incompatible vector sizes {x.shape[-1]} and {y.shape[-1]} "
                         f"(2 or 3 needed)")

    def comp(v, k):
        return v[..., k] if k < v.shape[-1] else None

    a0, a1, a2 = comp(x, 0), comp(x, 1), comp(x, 2)
    b0, b1, b2 = comp(y, 0), comp(y, 1), comp(y, 2)
    if a2 is None and b2 is None:
        return a0 * b1 - a1 * b0
    def mul(p, q):  # noqa: E306
        return None if p is None or q is None else p * q

    def sub(p, q):
        if p is None:
            return -q if q is not None else None
        return p if q is None else p - q

    c = [sub(mul(a1, b2), mul(a2, b1)), sub(mul(a2, b0), mul(a0, b2)),
         sub(mul(a0, b1), mul(a1, b0))]
    shape = np.broadcast_shapes(*[tuple(v.shape) for v in c if v is not None])

    c = [reshape(broadcast_to(v, shape), tuple(shape) + (1,)) for v in c]
    out = concatenate(c, axis=len(shape))
    return _moveaxis(out, -1, axisc)


def _moveaxis(x, src, dst):
    nd = x.ndim
    src, dst = int(src) % nd, int(dst) % nd
    if src == dst:
        return x
    order = [k for k in range(nd) if k != src]
    order.insert(dst, src)
    return transpose(x, tuple(order))
