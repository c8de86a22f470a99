"""Named axes: ``td.vmap(f, axis_name=name)`` binds `name` while f is traced, and
``td.lax.psum``/``pmean``/``pmax``/``pmin``/``all_gather``/``axis_index``/``axis_size`` inside
f work across the members of that axis, with jax's semantics (docs/vmap.md, "Named axes").
``ppermute``, ``pshuffle``, ``pbroadcast``, ``psum_scatter``, ``all_to_all`` and ``pswapaxes``
are built from ``all_gather`` and ``axis_index``: jax's values, at the cost of a whole gather.

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

from tidu.api.lax_shapes import dynamic_index_in_dim, dynamic_slice_in_dim
from tidu.api.tree_util import tree_map
from tidu.numpy.core import maximum, where
from tidu.numpy.creation import zeros_like
from tidu.numpy.shapes import moveaxis
from tidu.ops.collective import AxisGather, AxisReduce
from tidu.trace.tracer import Tracer, _emit, _lift, _trace_of

__all__ = ["all_gather", "all_to_all", "axis_index", "axis_size", "pbroadcast", "pmax", "pmean",
           "pmin", "ppermute", "pshuffle", "psum", "psum_scatter", "pswapaxes"]

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


def psum(x: Any, axis_name, *, axis_index_groups=None) -> Any:
    """The sum of x over the members of the named axis (a name, or a tuple of names), the same on
    every member; x may be a pytree. ``psum(1, name)`` is the axis size, as in jax."""
    _no_groups(axis_index_groups, "psum")
    names = _names(axis_name)
    return tree_map(lambda v: _reduce_leaf("sum", v, names), x)


def pmean(x: Any, axis_name, *, axis_index_groups=None) -> Any:
    """The mean of x over the members of the named axis (or axes)."""
    _no_groups(axis_index_groups, "pmean")
    names = _names(axis_name)
    n = axis_size(names)
    return tree_map(lambda v: _reduce_leaf("sum", v, names) / n, x)


def pmax(x: Any, axis_name, *, axis_index_groups=None) -> Any:
    """The maximum of x over the members of the named axis (or axes)."""
    _no_groups(axis_index_groups, "pmax")
    names = _names(axis_name)
    return tree_map(lambda v: _reduce_leaf("max", v, names), x)


def pmin(x: Any, axis_name, *, axis_index_groups=None) -> Any:
    """The minimum of x over the members of the named axis (or axes)."""
    _no_groups(axis_index_groups, "pmin")
    names = _names(axis_name)
    return tree_map(lambda v: _reduce_leaf("min", v, names), x)


def all_gather(x: Any, axis_name: Hashable, *, axis_index_groups=None, axis: int = 0,
               tiled: bool = False, to: str = "varying") -> Any:
    """Every member's x, stacked along a new axis `axis` (``tiled=True``: concatenated along
    the existing axis `axis`), as jax.lax.all_gather; x may be a pytree. ``to`` is jax's
    varying/reduced typing of manual axes, which tidu does not track: accepted and ignored."""
    _no_groups(axis_index_groups, "all_gather")
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


# ---- jax.lax's other collectives, from all_gather and axis_index (values, not bandwidth) ----


def _one_name(axis_name, what: str):
    if isinstance(axis_name, (tuple, list)):
        if len(axis_name) != 1:
            raise NotImplementedError(f"{what} over several axes at once: one axis at a time")
        axis_name = axis_name[0]
    return axis_name


def _no_groups(groups, what: str) -> None:
    if groups is not None:
        raise NotImplementedError(f"{what}: axis_index_groups is not supported")


def pbroadcast(x: Any, axis_name, source: int) -> Any:
    """Member ``source``'s x on every member, as jax.lax.pbroadcast: ``all_gather`` indexed by
    the static source."""
    name = _one_name(axis_name, "pbroadcast")
    n = axis_size(name)
    if not 0 <= int(source) < n:
        raise ValueError(f"pbroadcast: source {source} is not a member of axis {name!r} "
                         f"(size {n})")
    return tree_map(lambda v: all_gather(v, name)[int(source)], x)


def ppermute(x: Any, axis_name, perm) -> Any:
    """jax.lax.ppermute: member ``dst`` gets member ``src``'s x for each ``(src, dst)`` pair,
    and zeros where no pair sends to it: ``all_gather``, then a row chosen by a constant table
    indexed by ``axis_index``."""
    name = _one_name(axis_name, "ppermute")
    n = axis_size(name)
    pairs = [(int(s), int(d)) for s, d in perm]
    srcs, dsts = [s for s, _ in pairs], [d for _, d in pairs]
    if any(not (0 <= v < n) for v in srcs + dsts) or len(set(srcs)) != len(srcs) or \
            len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute: perm {perm} must pair distinct sources with distinct "
                         f"destinations in [0, {n}) (axis {name!r})")
    table = np.full(n, -1, np.int32)
    for s, d in pairs:
        table[d] = s

    def leaf(v):
        g = all_gather(v, name)
        j = dynamic_index_in_dim(table, axis_index(name), 0, keepdims=False)
        row = dynamic_index_in_dim(g, maximum(j, 0), 0, keepdims=False)
        return row if (table >= 0).all() else where(j >= 0, row, zeros_like(row))

    return tree_map(leaf, x)


def pshuffle(x: Any, axis_name, perm) -> Any:
    """jax.lax.pshuffle: member i gets member ``perm[i]``'s x (``perm`` a permutation)."""
    if set(perm) != set(range(len(perm))):
        raise ValueError(f"pshuffle: perm {perm} is not a permutation")
    return ppermute(x, axis_name, list(zip(perm, range(len(perm)))))


def psum_scatter(x: Any, axis_name, *, scatter_dimension: int = 0, axis_index_groups=None,
                 tiled: bool = False) -> Any:
    """jax.lax.psum_scatter: ``psum(x)``, of which member i keeps index i (``tiled``: block i)
    along ``scatter_dimension``."""
    _no_groups(axis_index_groups, "psum_scatter")
    name = _one_name(axis_name, "psum_scatter")
    n = axis_size(name)

    def leaf(v):
        s = psum(v, name)
        d = scatter_dimension % s.ndim if s.ndim else 0
        size = s.shape[d] if s.ndim else 0
        if (size % n) if tiled else (size != n):
            raise ValueError(f"psum_scatter: dimension {scatter_dimension} of shape {s.shape} "
                             f"must {'divide by' if tiled else 'equal'} the size {n} of axis "
                             f"{name!r}")
        i = axis_index(name)
        if not tiled:
            return dynamic_index_in_dim(s, i, d, keepdims=False)
        return dynamic_slice_in_dim(s, i * (size // n), size // n, d)

    return tree_map(leaf, x)


def all_to_all(x: Any, axis_name, split_axis: int, concat_axis: int, *, axis_index_groups=None,
               tiled: bool = False) -> Any:
    """jax.lax.all_to_all: member i's result holds, at ``concat_axis``, every member's index
    (``tiled``: block) i along ``split_axis``: ``all_gather``, then that index of each member's
    part, moved to ``concat_axis``."""
    _no_groups(axis_index_groups, "all_to_all")
    name = _one_name(axis_name, "all_to_all")
    n = axis_size(name)

    def leaf(v):
        v = _lift(_trace_of(v), v)
        nd = v.ndim
        sa = split_axis % nd
        size = v.shape[sa]
        if (size % n) if tiled else (size != n):
            raise ValueError(f"all_to_all: split_axis {split_axis} of shape {v.shape} must "
                             f"{'divide by' if tiled else 'equal'} the size {n} of axis "
                             f"{name!r}")
        g = all_gather(v, name)  # (n,) + shape: member j's x at [j]
        i = axis_index(name)
        if not tiled:
            ca = concat_axis % nd
            return moveaxis(dynamic_index_in_dim(g, i, sa + 1, keepdims=False), 0, ca)
        ca = concat_axis % nd
        blk = size // n
        h = moveaxis(dynamic_slice_in_dim(g, i * blk, blk, sa + 1), 0, ca)
        shape = h.shape
        return h.reshape(shape[:ca] + (n * shape[ca + 1],) + shape[ca + 2:])

    return tree_map(leaf, x)


def pswapaxes(x: Any, axis_name, axis: int, *, axis_index_groups=None) -> Any:
    """jax.lax.pswapaxes: ``all_to_all(x, axis_name, axis, axis)``."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)
