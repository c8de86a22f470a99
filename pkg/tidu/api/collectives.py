"""Named axes: ``td.vmap(f, axis_name=name)`` binds `name` while f is traced, and
``td.lax.psum``/``pmean``/``pmax``/``pmin``/``all_gather``/``axis_index``/``axis_size`` inside
f work across the members of that axis, with jax's semantics (docs/vmap.md, "Named axes").

A bound axis is an entry of a per-thread stack: its name, its size and its *index value*, a
scalar input of the vmapped function that the vmap's batching walk seeds with
``arange(size)``. ``axis_index(name)`` is that value; the collectives are the primitives of
``tidu.ops.collective``, which take it as an operand, so the batching walk of the vmap that
bound the name resolves them (and any other vmap's walk passes them on).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from contextlib import contextmanager
from typing import Any

import numpy as np

from tidu.api.tree_util import tree_map
from tidu.ops.collective import AxisGather, AxisReduce
from tidu.trace.tracer import Tracer, _emit, _lift, _trace_of

__all__ = ["all_gather", "axis_index", "axis_size", "pmax", "pmean", "pmin", "psum"]

_env = threading.local()


def _stack() -> list:
    s = getattr(_env, "axes", None)
    if s is None:
        s = _env.axes = []
    return s


@contextmanager
def bound_axis(name: Hashable, size: int, index: Tracer):
    """Bind `name` (of `size` members, index value `index`) while the body runs (td.vmap)."""
    try:
        hash(name)
    except TypeError:
        raise TypeError(f"vmap axis_name must be hashable, got {name!r}") from None
    s = _stack()
    s.append((name, size, index))
    try:
        yield
    finally:
        s.pop()


def _lookup(name: Hashable, what: str):
    for entry in reversed(_stack()):
        if entry[0] == name:
            return entry
    bound = [e[0] for e in _stack()]
    raise NameError(f"unbound axis name: {name!r} ({what}). A collective names an axis of an "
                    f"enclosing td.vmap(..., axis_name=...); the axis names bound here are "
                    f"{bound}")


def _names(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def axis_index(axis_name: Hashable) -> Tracer:
    """This member's position along the named axis (int32), as jax.lax.axis_index."""
    return _lookup(axis_name, "axis_index")[2]


def axis_size(axis_name) -> int:
    """The number of members of the named axis (of several: their product)."""
    n = 1
    for name in _names(axis_name):
        n *= _lookup(name, "axis_size")[1]
    return n


def _reduce_leaf(kind: str, x, names: tuple):
    for name in names:
        _, _, idx = _lookup(name, f"p{kind}")
        t = _trace_of(x, idx)
        x = _lift(t, x)
        if x.aval.dtype == np.bool_:  # jax sums bools as int32
            x = _lift(t, x, np.dtype(np.int32))
        x = _emit(t, AxisReduce(kind, name), x, _lift(t, idx))
    return x


def psum(x: Any, axis_name) -> Any:
    """The sum of x over the members of the named axis (a name, or a tuple of names), the same on
    every member; x may be a pytree. ``psum(1, name)`` is the axis size, as in jax."""
    names = _names(axis_name)
    return tree_map(lambda v: _reduce_leaf("sum", v, names), x)


def pmean(x: Any, axis_name) -> Any:
    """The mean of x over the members of the named axis (or axes)."""
    names = _names(axis_name)
    n = axis_size(names)
    return tree_map(lambda v: _reduce_leaf("sum", v, names) / n, x)


def pmax(x: Any, axis_name) -> Any:
    """The maximum of x over the members of the named axis (or axes)."""
    names = _names(axis_name)
    return tree_map(lambda v: _reduce_leaf("max", v, names), x)


def pmin(x: Any, axis_name) -> Any:
    """The minimum of x over the members of the named axis (or axes)."""
    names = _names(axis_name)
    return tree_map(lambda v: _reduce_leaf("min", v, names), x)


def all_gather(x: Any, axis_name: Hashable, *, axis: int = 0, tiled: bool = False) -> Any:
    """Every member's x, stacked along a new axis `axis` (``tiled=True``: concatenated along
    the existing axis `axis`), as jax.lax.all_gather; x may be a pytree."""
    if isinstance(axis_name, (tuple, list)):
        raise NotImplementedError("all_gather over several axes at once: gather one at a time")
    _, size, idx = _lookup(axis_name, "all_gather")

    def leaf(v):
        t = _trace_of(v, idx)
        v = _lift(t, v)
        nd = v.aval.ndim
        top = nd if tiled else nd + 1  # tiled: an existing axis; else a new one
        if not -top <= axis < top:
            raise ValueError(f"all_gather: axis {axis} out of range for an operand of rank {nd}"
                             f"{' (tiled)' if tiled else ''}")
        pos = axis % top
        out = _emit(t, AxisGather(axis_name, int(size), pos), v, _lift(t, idx))
        if tiled:
            shape = v.aval.shape
            out = out.reshape(shape[:pos] + (size * shape[pos],) + shape[pos + 1:])
        return out

    return tree_map(leaf, x)
