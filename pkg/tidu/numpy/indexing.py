"""Integer-array and traced indexing: ``x[idx]`` with arrays or traced ints, ``x.at[idx]``,
``take``, ``take_along_axis``, ``dynamic_slice``, ``dynamic_update_slice``.

Every advanced index becomes one ``Gather`` or ``Scatter`` along one axis (tidu.ops.gather):
the indexed axes are moved next to each other, merged into one, and the index arrays (broadcast
together, negative values wrapped once) combined into one linear index.  Static slices are applied
first (a Slice); a scatter through slices is pasted back with Pad and Select.  Index arithmetic on
numpy indices happens at trace time in numpy (the program only sees the final index constant).

Out-of-range indices (after wrapping negatives once), as jax's defaults:
- reads (``x[idx]``, ``.at[].get()``) clamp each index to its axis;
- writes (``.at[].set/add/mul/min/max``) drop an update with any out-of-range index;
  ``mode="clip"`` clamps instead;
- ``take`` and ``take_along_axis`` fill (NaN for inexact dtypes) unless ``mode="clip"``;
- ``dynamic_slice`` / ``dynamic_update_slice`` clamp the start so the window fits.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from tidu import ops as P
from tidu.graph import _aval_list, shape_rule
from tidu.graph.dtypes import INTS, kind_of
from tidu.graph.memory import register_cache
from tidu.numpy.core import (
    astype,
    broadcast_to,
    maximum,
    minimum,
    power,
    reshape,
    transpose,
    where,
)
from tidu.trace.tracer import Tracer, _emit, _home, _lift, _trace_of, keeps_weak

__all__ = ["IndexUpdateRef", "advanced_getitem"]


# ---- indexing ----

# Static indexing plans by (abstract value id, index): the nodes x[idx] emits, as (prim id,
# output aval id) pairs, so repeated indexing (s[0] in every step of an integrator) skips
# normalising the index and building Slice/Reshape ops.
_index_plans: dict[tuple, tuple[tuple[int, int], ...]] = {}
register_cache("index_plans", _index_plans, holds_ids=True)


def _index_key(idx):
    """A hashable, exact key for a static index (slices are unhashable before Python 3.12; bool
    and int must differ), or None for anything else (the general path decides)."""
    key = []
    for i in idx if isinstance(idx, tuple) else (idx,):
        t = type(i)
        if t is int or t is bool:
            key.append((t, i))
        elif t is slice:
            key.append((slice, i.start, i.stop, i.step))
        elif i is None or i is Ellipsis:
            key.append(i)
        else:
            return None
    try:
        hash(tuple(key))
    except TypeError:  # a slice bound that is not hashable
        return None
    return tuple(key)


def _getitem(x: Tracer, idx) -> Tracer:
    key = _index_key(idx)
    if key is not None and any(type(i) is bool for i in (idx if isinstance(idx, tuple)
                                                         else (idx,))):
        return _bool_scalar_getitem(x, idx if isinstance(idx, tuple) else (idx,))
    if key is None and is_advanced(idx):  # integer arrays, traced ints: a Gather
        return advanced_getitem(x, idx)
    plan = _index_plans.get((x.aval.id, key)) if key is not None else None
    if plan is None:
        plan = _index_plan(x, idx)
        if key is not None:
            _index_plans[(x.aval.id, key)] = plan
    t = _home(x._t)
    if t is not x._t:  # inside a control-flow body: the body's own value
        x = _lift(t, x)
    v = x._v
    for pid, out in plan:
        v = t.store.emit(pid, 0, [v], out)
    return Tracer(t, v, _aval_list[plan[-1][1]]) if plan else x


def _bool_scalar_getitem(x: Tracer, items: tuple) -> Tracer:
    """jax's scalar boolean index among static items: True adds an axis of length 1 where it
    stands (as None does), False one of length 0.  (numpy treats it as a 0-d mask, an advanced
    index that moves to the front beside a separated int: ``x[1:, True, None, 2]`` is (1, 3, 1)
    in numpy, (3, 1, 1) in jax and tidu.)"""
    y = _getitem(x, tuple(None if type(i) is bool else i for i in items))
    n_real = sum(1 for i in items if i is not None and i is not Ellipsis and type(i) is not bool)
    axis = 0
    for i in items:
        if type(i) is bool and not i:
            y = y[(slice(None),) * axis + (slice(0, 0),)]
        if i is Ellipsis:
            axis += x.ndim - n_real
        elif type(i) is not int:  # an int index takes its axis away; the rest give one
            axis += 1
    return y


def _at(x: Tracer):
    """x.at: jax's indexed updates (tidu.indexing)."""
    return IndexUpdateRef(x)


def _index_plan(x: Tracer, idx) -> tuple[tuple[int, int], ...]:
    """The nodes x[idx] emits (a Slice, a Reshape, both or neither) as (prim id, output aval id)
    pairs; raises IndexError/TypeError for an index tidu does not take, as numpy would."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    if any(isinstance(i, (Tracer, np.ndarray, list)) for i in idx):
        raise TypeError("only static indexing is supported (ints, slices, None, ...); "
                        "gather with traced or array indices is not a tidu primitive")
    n_ell = builtins_sum(1 for i in idx if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis")
    n_real = builtins_sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > x.ndim:
        raise IndexError(f"too many indices ({n_real}) for shape {x.shape}")
    if n_ell:
        pos = idx.index(Ellipsis)
        idx = idx[:pos] + (slice(None),) * (x.ndim - n_real) + idx[pos + 1:]
    else:
        idx = idx + (slice(None),) * (x.ndim - n_real)
    start, limit, stride, out_shape, rev = [], [], [], [], []
    axis = 0
    for i in idx:
        if i is None:
            out_shape.append(1)
            continue
        d = x.shape[axis]
        if isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            j = int(i) + d if i < 0 else int(i)
            if not 0 <= j < d:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {d}")
            start.append(j), limit.append(j + 1), stride.append(1)
        elif isinstance(i, slice):
            s, e, st = i.indices(d)
            n = len(range(s, e, st))
            if st < 0:  # numpy's elements s, s+st, ... : a Rev of the axis, then a slice
                rev.append(axis)
                s, st = (d - 1 - s, -st) if n else (0, -st)
                e = s + (n - 1) * st + 1 if n else 0
            e = builtins_max(e, s)
            start.append(s), limit.append(e), stride.append(st)
            out_shape.append(n)
        else:
            raise TypeError(f"unsupported index {i!r} of type {type(i).__name__}")
        axis += 1
    plan, av = [], x.aval
    if rev:
        pid, (out,) = shape_rule(P.Rev(tuple(rev)), (av.id,))
        plan.append((pid, out))
        av = _aval_list[out]
    if tuple(start) != (0,) * x.ndim or tuple(limit) != x.shape or any(s != 1 for s in stride):
        pid, (out,) = shape_rule(P.Slice(tuple(start), tuple(limit), tuple(stride)), (av.id,))
        plan.append((pid, out))
        av = _aval_list[out]
    if tuple(out_shape) != av.shape:
        pid, (out,) = shape_rule(P.Reshape(tuple(out_shape)), (av.id,))
        plan.append((pid, out))
    return tuple(plan)


# This module defines sum/max/abs with numpy's meaning; Python's own are reached through builtins.
builtins_sum, builtins_max = builtins.sum, builtins.max


# ---- classifying an index ----

def _is_static_int(i) -> bool:
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _is_array_index(i) -> bool:
    return isinstance(i, (Tracer, np.ndarray, list, tuple)) or _is_static_int(i)


def is_advanced(idx) -> bool:
    """True when the index holds an integer array or a traced integer (the gather path)."""
    items = idx if isinstance(idx, tuple) else (idx,)
    return any(isinstance(i, (Tracer, np.ndarray, list)) for i in items)


def _index_value(i, axis_size: int):
    """An advanced index item as a numpy int array or an int Tracer; errors name the problem."""
    if isinstance(i, Tracer):
        if kind_of(i.dtype) == "b":
            raise IndexError("boolean mask indexing needs a data-dependent shape, which a traced "
                             "program cannot have; use td.where(mask, x, other) instead")
        if i.dtype not in INTS:
            raise IndexError(f"indices must be integers, got a traced value of dtype {i.dtype}")
        return i
    a = np.asarray(i)
    if a.dtype == np.bool_:
        raise IndexError("boolean mask indexing is not supported (the output shape would depend on "
                         "the mask's values); use td.where(mask, x, other) instead")
    if kind_of(a.dtype) not in "iu":
        if a.size == 0:
            return a.astype(np.int64)
        raise IndexError(f"indices must be integers, got an array of dtype {a.dtype}")
    return a.astype(np.int64) if kind_of(a.dtype) == "u" or a.dtype.itemsize < 4 else a


def _xp(*vals):
    return np if all(isinstance(v, np.ndarray) for v in vals) else None


def _where(c, a, b):
    return np.where(c, a, b) if _xp(c, a, b) is np else where(c, a, b)


def _max(a, b):
    return np.maximum(a, b) if _xp(a, b) is np else maximum(a, b)


def _min(a, b):
    return np.minimum(a, b) if _xp(a, b) is np else minimum(a, b)


def _cast(a, dt):
    return a.astype(dt) if isinstance(a, np.ndarray) else astype(a, dt)


def _bcast(a, shape):
    return np.broadcast_to(a, shape) if isinstance(a, np.ndarray) else broadcast_to(a, shape)


def _wrap(c, d: int):
    return _where(c < 0, c + d, c)


def _and(a, b):
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a & b
    return where(a, b, False)


def _linear_index(comps, dims, mode: str):
    """One index into the merged axes from per-axis indices (wrapped, broadcast, one dtype).
    mode "clip" clamps each; "gather" clamps each when there are several (a lone index is clamped
    by Gather itself); "drop" and "fill" mark an index with a component out of range as -1 when
    there are several (a lone one is dropped by Scatter, masked by the caller for fill)."""
    if len(comps) == 1:
        c = comps[0]
        return _min(_max(c, 0), max(dims[0] - 1, 0)) if mode == "clip" else c
    lin, valid = None, None
    for c, d in zip(comps, dims):
        if mode in ("clip", "gather"):
            c = _min(_max(c, 0), max(d - 1, 0))
        else:
            ok = _and(c >= 0, c < d)
            valid = ok if valid is None else _and(valid, ok)
        lin = c if lin is None else lin * d + c
    if valid is not None:
        lin = _where(valid, lin, -1)
    return lin


class _Plan:
    """How x[idx] maps onto one Gather/Scatter: x expanded (None axes), sliced (static slices),
    permuted and merged so the advanced axes are one axis, and the linear index."""

    def __init__(self, x: Tracer, idx, mode: str, wrap: bool = True):
        t = _trace_of(x)
        items = list(idx) if isinstance(idx, tuple) else [idx]
        if sum(1 for i in items if i is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        n_real = sum(1 for i in items if i is not None and i is not Ellipsis)
        if n_real > x.ndim:
            raise IndexError(f"too many indices ({n_real}) for shape {x.shape}")
        # numpy's rule for where the broadcast index axes go: in place of the advanced indices
        # when these are adjacent in the index as written, else first.  A slice, None or an
        # ellipsis between two of them separates them, even an ellipsis that covers no axis, so
        # adjacency is decided here, before the ellipsis is expanded.
        written = [k for k, i in enumerate(items)
                   if i is not None and i is not Ellipsis and not isinstance(i, slice)]
        self.adjacent = written == list(range(written[0], written[0] + len(written))) \
            if written else True
        ell = [k for k, i in enumerate(items) if i is Ellipsis]
        if ell:
            pos = ell[0]
            items = items[:pos] + [slice(None)] * (x.ndim - n_real) + items[pos + 1:]
        else:
            items = items + [slice(None)] * (x.ndim - n_real)
        # None: a new axis of size 1, indexed by ':' (numpy's meaning, contiguity included)
        self.orig_shape = x.shape
        exp_shape, it = [], iter(x.shape)
        for i in items:
            exp_shape.append(1 if i is None else next(it))
        items = [slice(None) if i is None else i for i in items]
        self.exp_shape = tuple(exp_shape)
        xe = x if self.exp_shape == x.shape else reshape(x, self.exp_shape)
        # static slices first; a negative step is a Rev of its axis, then a positive step
        start, limit, stride, adv, rev = [], [], [], [], []
        for ax, (i, d) in enumerate(zip(items, self.exp_shape)):
            if isinstance(i, slice):
                s, e, st = i.indices(d)
                if st < 0:  # numpy's elements s, s+st, ...: from d-1-s on in the reversed axis
                    n = len(range(s, e, st))
                    rev.append(ax)
                    s, st = (d - 1 - s, -st) if n else (0, -st)
                    e = s + (n - 1) * st + 1 if n else 0
                e = max(e, s)
                start.append(s), limit.append(e), stride.append(st)
            elif _is_array_index(i):
                start.append(0), limit.append(d), stride.append(1)
                adv.append(ax)
            else:
                raise IndexError(f"unsupported index {i!r} of type {type(i).__name__} (ints, "
                                 f"slices, None, ..., integer arrays and traced integers are)")
        self.rev = tuple(rev)
        if rev:
            xe = _emit(t, P.Rev(self.rev), xe)
        self.x_exp = xe  # x with its None axes, reversed where a slice steps backwards
        self.slicing = (tuple(start), tuple(limit), tuple(stride))
        self.sliced = self.slicing != ((0,) * len(start), self.exp_shape, (1,) * len(start))
        xs = _emit(t, P.Slice(*self.slicing), xe) if self.sliced else xe
        self.x_sl = xs
        self.adv = adv
        if not adv:
            self.x2, self.axis, self.index, self.gshape = xs, None, None, xs.shape
            return
        sl_shape = xs.shape
        dims = [sl_shape[a] for a in adv]
        comps = [_index_value(items[a], d) for a, d in zip(adv, dims)]
        bshape = np.broadcast_shapes(*[c.shape for c in comps])
        if any(d == 0 for d in dims) and math.prod(bshape) and mode != "drop":
            raise IndexError(f"index out of bounds: cannot index an axis of size 0 of shape "
                             f"{x.shape}")
        big = math.prod(dims) >= 2 ** 31
        dts = {np.dtype(c.dtype) for c in comps}
        dt = np.dtype("int32") if dts == {np.dtype("int32")} and not big else np.dtype("int64")
        comps = [_cast(_bcast(c, bshape), dt) for c in comps]
        if wrap:  # jax's wrap_negative_indices (default): -1 is the last element
            comps = [_wrap(c, d) for c, d in zip(comps, dims)]
        lin = _linear_index(comps, dims, mode)
        self.valid = None
        if mode == "fill":
            merged = math.prod(dims)
            self.valid = _and(lin >= 0, lin < merged)
        k = len(adv)
        # advanced axes that are already first need no transpose either way
        contiguous = self.adjacent or adv == list(range(k))
        rest = [a for a in range(len(sl_shape)) if a not in adv]
        if contiguous:
            self.perm = None
            self.axis = adv[0]
            pshape = sl_shape
        else:
            self.perm = tuple(adv + rest)
            self.axis = 0
            xs = transpose(xs, self.perm)
            pshape = xs.shape
        self.pshape = pshape
        merged_shape = pshape[:self.axis] + (math.prod(dims),) + pshape[self.axis + k:]
        self.x2 = xs if merged_shape == xs.shape else reshape(xs, merged_shape)
        self.index = lin if isinstance(lin, Tracer) else _lift(t, np.ascontiguousarray(lin))
        self.gshape = merged_shape[:self.axis] + tuple(bshape) + merged_shape[self.axis + 1:]

    def restore(self, y2: Tracer) -> Tracer:
        """A value of x2's shape back to x's: un-merge, un-permute, paste into the slices."""
        t = _trace_of(y2)
        y = y2
        if self.axis is not None:
            if y.shape != self.pshape:
                y = reshape(y, self.pshape)
            if self.perm is not None:
                inv = tuple(sorted(range(len(self.perm)), key=self.perm.__getitem__))
                y = transpose(y, inv)
        if self.sliced:
            start, _, stride = self.slicing
            low, high, interior = [], [], []
            for s, st, d, n in zip(start, stride, self.exp_shape, y.shape):
                if n == 0:
                    low.append(d), high.append(0), interior.append(0)
                    continue
                last = s + (n - 1) * st
                low.append(s), high.append(d - last - 1), interior.append(st - 1)
            pad = P.Pad(tuple(low), tuple(high), tuple(interior))
            hit = _emit(t, pad, _lift(t, np.ones(y.shape, bool)))
            y = where(hit, _emit(t, pad, y), self.x_exp)
        if self.rev:
            y = _emit(t, P.Rev(self.rev), y)
        if y.shape != self.orig_shape:
            y = reshape(y, self.orig_shape)
        return y


def _fill_value(dtype, fill_value):
    if fill_value is not None:
        return fill_value
    dt = np.dtype(dtype)
    if kind_of(dt) in "fc":
        return np.nan
    if kind_of(dt) == "b":
        return True
    return np.iinfo(dt).min


def _gather(x, idx, mode: str = "clip", fill_value=None, wrap: bool = True):
    """x[idx] through one Gather; mode 'clip' (clamp) or 'fill' (out-of-range -> fill_value);
    ``wrap``: a negative index counts from the end (False: it is out of range)."""
    x = _lift(_trace_of(x), x)
    plan = _Plan(x, idx, "fill" if mode == "fill" else "gather", wrap)
    if plan.axis is None:
        return plan.x_sl if plan.x_sl.shape == plan.gshape else reshape(plan.x_sl, plan.gshape)
    t = _trace_of(x)
    out = _emit(t, P.Gather(plan.axis), plan.x2, plan.index)
    if plan.valid is not None:
        valid = plan.valid if isinstance(plan.valid, Tracer) else _lift(t, plan.valid)
        valid = _emit(t, P.BroadcastInDim(out.shape, tuple(range(plan.axis, plan.axis +
                                                                 valid.ndim))), valid) \
            if valid.shape != out.shape else valid
        out = where(valid, out, _lift(t, np.asarray(_fill_value(x.dtype, fill_value),
                                                    dtype=x.dtype)))
    return out


def advanced_getitem(x: Tracer, idx) -> Tracer:
    """x[idx] for an index holding integer arrays or traced integers (clamped, as jax)."""
    return _gather(x, idx, "clip")


# ---- .at[] ----

_MODES = ("set", "add", "mul", "min", "max")


@keeps_weak(0)  # x.at[...].set(v) is as weakly typed as x (jax's)
def _scatter(x, idx, v, how: str, mode=None, wrap: bool = True):
    if mode not in (None, "drop", "clip", "promise_in_bounds", "fill"):
        raise ValueError(f"unknown index mode {mode!r}; expected 'drop', 'clip', "
                         f"'promise_in_bounds' or 'fill'")
    t = _trace_of(x, v)
    x = _lift(t, x)
    plan = _Plan(x, idx, "clip" if mode == "clip" else "drop", wrap)
    v = _lift(t, v)
    if v.dtype != x.dtype:
        v = astype(v, x.dtype)
    if how == "sub":  # jax's scatter_sub: adding the negated updates (modular for unsigned)
        if kind_of(v.dtype) == "b":
            raise TypeError("at[].subtract: bool arrays have no subtraction")
        v, how = -v, "add"
    try:
        np.broadcast_shapes(v.shape, plan.gshape)
    except ValueError:
        raise ValueError(f"cannot scatter updates of shape {v.shape} into x{_show(idx)} of shape "
                         f"{plan.gshape}") from None
    if len(v.shape) > len(plan.gshape) or np.broadcast_shapes(v.shape, plan.gshape) != plan.gshape:
        raise ValueError(f"cannot scatter updates of shape {v.shape} into x{_show(idx)} of shape "
                         f"{plan.gshape}")
    v = broadcast_to(v, plan.gshape) if v.shape != plan.gshape else v
    if plan.axis is None:  # only slices: elementwise on the sliced part
        xs = plan.x_sl
        v = reshape(v, xs.shape) if v.shape != xs.shape else v
        y = {"set": lambda: v, "add": lambda: xs + v, "mul": lambda: xs * v,
             "min": lambda: minimum(xs, v), "max": lambda: maximum(xs, v)}[how]()
        return plan.restore(y)
    y2 = _emit(t, P.Scatter(plan.axis, how), plan.x2, plan.index, v)
    return plan.restore(y2)


def _show(idx) -> str:
    items = idx if isinstance(idx, tuple) else (idx,)
    return "[" + ", ".join("<array>" if isinstance(i, (np.ndarray, Tracer, list)) else
                           ("..." if i is Ellipsis else repr(i)) for i in items) + "]"


class _IndexUpdateRef:
    """``x.at[idx]``: ``get``, ``set``, ``add``, ``subtract``, ``mul``/``multiply``, ``divide``,
    ``power``, ``min``, ``max``, ``apply`` as jax's (``indices_are_sorted`` and
    ``unique_indices`` are accepted and ignored; ``wrap_negative_indices=False`` leaves a
    negative index out of range instead of counting it from the end)."""

    __slots__ = ("x", "idx")

    def __init__(self, x, idx):
        self.x, self.idx = x, idx

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None,
            wrap_negative_indices=True, out_sharding=None):
        if mode not in (None, "clip", "promise_in_bounds", "fill", "drop"):
            raise ValueError(f"unknown index mode {mode!r} for get")
        fill = mode in ("fill", "drop")  # jax's FILL_OR_DROP: a read fills
        return _gather(self.x, self.idx, "fill" if fill else "clip", fill_value,
                       wrap_negative_indices)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        return _scatter(self.x, self.idx, values, "set", mode, wrap_negative_indices)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        return _scatter(self.x, self.idx, values, "add", mode, wrap_negative_indices)

    def subtract(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 wrap_negative_indices=True):
        return _scatter(self.x, self.idx, values, "sub", mode, wrap_negative_indices)

    def mul(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        return _scatter(self.x, self.idx, values, "mul", mode, wrap_negative_indices)

    multiply = mul

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
               wrap_negative_indices=True):
        """x divided, at idx, by the product of the values landing there (jax's: the values
        are multiplied into ones first, so repeated indices divide by each)."""
        return _ones_then(self.x, self.idx, values, mode, wrap_negative_indices, _truediv)

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """x raised, at idx, to the product of the values landing there (jax's rule)."""
        return _ones_then(self.x, self.idx, values, mode, wrap_negative_indices, power)

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        return _scatter(self.x, self.idx, values, "min", mode, wrap_negative_indices)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        return _scatter(self.x, self.idx, values, "max", mode, wrap_negative_indices)

    def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """func applied to the elements at idx (a unary function of arrays, as jax's).  An
        element indexed more than once gets func once here; jax's scatter applies it once per
        occurrence."""
        if not callable(func):
            raise TypeError(f"at[].apply: func must be callable, got {func!r}")
        picked = _gather(self.x, self.idx, "clip", None, wrap_negative_indices)
        return _scatter(self.x, self.idx, func(picked), "set", mode, wrap_negative_indices)


def _truediv(a, b):
    return a / b


def _ones_then(x, idx, values, mode, wrap, op):
    """jax's at[].divide/power: op(x, ones.at[idx].multiply(values))."""
    t = _trace_of(x, values)
    x = _lift(t, x)
    factor = _scatter(_lift(t, np.ones(x.shape, x.dtype)), idx, values, "mul", mode, wrap)
    return op(x, factor)


class IndexUpdateRef:
    """What ``x.at`` returns: ``x.at[idx]`` is an object with jax's update methods."""

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, idx):
        return _IndexUpdateRef(self.x, idx)
