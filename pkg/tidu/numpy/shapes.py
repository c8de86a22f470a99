"""The numpy shape and array-construction functions (docs/numpy.md, "Shapes and array
construction"), as ``jax.numpy`` spells them.

Every function here is a composite over tier-1 primitives (Slice, Pad, Concatenate, Reshape,
BroadcastInDim, Transpose, Select) and ``Rev`` (``tidu.ops.shapes``), so each differentiates to any
order and lowers to StableHLO through the generic machinery.  Indices and sizes (shifts, repeats,
pad widths, split points) are static, as jax requires them to be under ``jit``.

Called with no traced value and no trace running, a function gives numpy's answer (a numpy
array); inside a traced function it emits nodes.  The constructors with static arguments
(``eye``, ``arange``, ``zeros``, ...) always give numpy arrays: they are constants, which the
trace turns into Constant nodes where they meet traced values.
"""

from __future__ import annotations

import builtins
import functools
import operator
from collections.abc import Sequence

import numpy as np

from tidu import ops as P
from tidu.graph.dtypes import kind_of
from tidu.numpy import core as T
from tidu.trace.tracer import (
    Tracer,
    _broadcast,
    _const,
    _emit,
    _op,
    _stack,
    _trace_of,
    keeps_weak,
)
from tidu.trace.tracer import _lift as _lift_in

__all__ = [
    "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "column_stack", "dstack",
    "expand_dims", "flip", "fliplr", "flipud", "hstack", "moveaxis", "pad", "ravel", "repeat",
    "roll", "split", "squeeze", "stack", "swapaxes", "tile", "vstack",
]

_range, _max, _min = builtins.range, builtins.max, builtins.min


# ---- helpers ----

def _has_tracer(xs) -> bool:
    for x in xs:
        if isinstance(x, Tracer):
            return True
        if isinstance(x, (list, tuple)) and _has_tracer(x):
            return True
    return False


def _traced() -> bool:
    return bool(_stack())


def _numpy_outside(np_fn):
    """Outside a trace and with no traced argument, the function is numpy's own."""

    def deco(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            if not _traced() and not _has_tracer(args) and not _has_tracer(kwargs.values()):
                return np_fn(*args, **kwargs)
            return fn(*args, **kwargs)

        return wrapped

    return deco


def _lift(x) -> Tracer:
    t = _trace_of(x)
    return _lift_in(t, x)


def _axis(axis, ndim: int, name: str) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"{name}: axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an array of dimension {ndim}")
    return int(axis) % ndim


def _axes(axis, ndim: int, name: str) -> tuple[int, ...]:
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(_axis(a, ndim, name) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: repeated axis in {tuple(axes)}")
    return out


def _slice(x: Tracer, axis: int, start: int, stop: int, step: int = 1) -> Tracer:
    """x[..., start:stop:step, ...] along axis (0 <= start <= stop, step >= 1)."""
    if start == 0 and stop == x.shape[axis] and step == 1:
        return x
    nd = x.ndim
    st = tuple(start if i == axis else 0 for i in _range(nd))
    lim = tuple(stop if i == axis else d for i, d in enumerate(x.shape))
    stride = tuple(step if i == axis else 1 for i in _range(nd))
    return _emit(x._t, _op(P.Slice, st, lim, stride), x)


def _rev(x: Tracer, axes: tuple[int, ...]) -> Tracer:
    axes = tuple(a for a in axes if x.shape[a] > 1)
    return _emit(x._t, _op(P.Rev, axes), x) if axes else x


def _concat(xs: list[Tracer], axis: int) -> Tracer:
    return xs[0] if len(xs) == 1 else _emit(xs[0]._t, _op(P.Concatenate, axis), *xs)


def _bcast_axis(x: Tracer, axis: int, n: int) -> Tracer:
    """x (size 1 along axis) broadcast to size n along axis."""
    shape = tuple(n if i == axis else d for i, d in enumerate(x.shape))
    return _emit(x._t, _op(P.BroadcastInDim, shape, tuple(_range(x.ndim))), x)


def _take_static(x: Tracer, idx: np.ndarray, axis: int) -> Tracer:
    """x taken at the static indices idx (in range) along axis, as a concatenation of strided
    slices (reversed where the run descends) and broadcasts of single elements: no gather."""
    idx = [int(i) for i in idx]
    n = len(idx)
    if n == 0:
        return _slice(x, axis, 0, 0)
    pieces, i = [], 0
    while i < n:
        j = i + 1
        step = idx[j] - idx[i] if j < n else 0
        while j < n and idx[j] - idx[j - 1] == step:
            j += 1
        count = j - i
        if count == 1 or step == 0:  # one element, or a run of copies of one element
            pieces.append(_bcast_axis(_slice(x, axis, idx[i], idx[i] + 1), axis, count)
                          if count > 1 else _slice(x, axis, idx[i], idx[i] + 1))
        elif step > 0:
            pieces.append(_slice(x, axis, idx[i], idx[j - 1] + 1, step))
        else:
            part = _slice(x, axis, idx[j - 1], idx[i] + 1, -step)
            pieces.append(_rev(part, (axis,)))
        i = j
    return _concat(pieces, axis)


def _zeros(t, shape, dtype) -> Tracer:
    return _broadcast(t, _const(t, 0, dtype), tuple(shape))


# ---- stacking and splitting ----

def _expand(x: Tracer, axis: int) -> Tracer:
    return T.reshape(x, x.shape[:axis] + (1,) + x.shape[axis:])


@_numpy_outside(np.stack)
def stack(arrays: Sequence, axis: int = 0, out=None, dtype=None) -> Tracer:
    """Join arrays of one shape along a new axis, as ``jax.numpy.stack``."""
    if out is not None:
        raise TypeError("stack: the out argument is not supported")
    arrays = list(arrays)
    if not arrays:
        raise ValueError("stack: need at least one array to stack")
    t = _trace_of(*arrays)
    xs = [_lift_in(t, a) for a in arrays]
    shapes = {x.shape for x in xs}
    if len(shapes) != 1:
        raise ValueError(f"stack: all input arrays must have the same shape, got "
                         f"{' vs '.join(map(str, sorted(shapes)))}")
    ax = _axis(axis, xs[0].ndim + 1, "stack")
    out_ = T.concatenate([_expand(x, ax) for x in xs], axis=ax)
    return T.astype(out_, dtype) if dtype is not None else out_


def _seq(name, arrays):
    arrays = list(arrays)
    if not arrays:
        raise ValueError(f"{name}: need at least one array to concatenate")
    return arrays


@_numpy_outside(np.vstack)
def vstack(tup: Sequence, dtype=None) -> Tracer:
    """Stack along axis 0 after atleast_2d, as ``jax.numpy.vstack``."""
    xs = [atleast_2d(_lift(a)) for a in _seq("vstack", tup)]
    return _cast(T.concatenate(xs, axis=0), dtype)


@_numpy_outside(np.hstack)
def hstack(tup: Sequence, dtype=None) -> Tracer:
    """Stack along axis 1 (axis 0 for 1-D arrays) after atleast_1d, as ``jax.numpy.hstack``."""
    xs = [atleast_1d(_lift(a)) for a in _seq("hstack", tup)]
    return _cast(T.concatenate(xs, axis=0 if xs[0].ndim == 1 else 1), dtype)


@_numpy_outside(np.dstack)
def dstack(tup: Sequence, dtype=None) -> Tracer:
    """Stack along axis 2 after atleast_3d, as ``jax.numpy.dstack``."""
    xs = [atleast_3d(_lift(a)) for a in _seq("dstack", tup)]
    return _cast(T.concatenate(xs, axis=2), dtype)


@_numpy_outside(np.column_stack)
def column_stack(tup: Sequence) -> Tracer:
    """1-D arrays as columns, 2-D arrays as they are, joined along axis 1."""
    xs = []
    for a in _seq("column_stack", tup):
        x = _lift(a)
        xs.append(T.reshape(x, (x.size, 1)) if x.ndim < 2 else x)
    return T.concatenate(xs, axis=1)


def _cast(x, dtype):
    return T.astype(x, dtype) if dtype is not None else x


def _split_points(name, n: int, indices_or_sections, even: bool) -> list[int]:
    if isinstance(indices_or_sections, (int, np.integer)) and not isinstance(indices_or_sections,
                                                                             bool):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError(f"{name}: number of sections must be larger than 0, got {k}")
        if even and n % k:
            raise ValueError(f"{name}: array split does not result in an equal division "
                             f"({n} elements into {k} sections)")
        size, extra = divmod(n, k)
        pts, acc = [], 0
        for i in _range(k - 1):
            acc += size + (1 if i < extra else 0)
            pts.append(acc)
        return pts
    if isinstance(indices_or_sections, Tracer):
        raise TypeError(f"{name}: split points must be static (ints), not traced values")
    return [int(i) for i in np.asarray(indices_or_sections).reshape(-1)]


def _split(name, ary, indices_or_sections, axis, even):
    x = _lift(ary)
    if x.ndim == 0:
        raise ValueError(f"{name}: cannot split a zero-dimensional array")
    ax = _axis(axis, x.ndim, name)
    n = x.shape[ax]
    pts = _split_points(name, n, indices_or_sections, even)
    out, prev = [], 0
    for p in pts + [n]:
        p = p + n if p < 0 else p
        s, e = _min(_max(prev, 0), n), _min(_max(p, 0), n)
        out.append(_slice(x, ax, s, _max(e, s)))
        prev = p
    return out


@_numpy_outside(np.split)
def split(ary, indices_or_sections, axis: int = 0) -> list[Tracer]:
    """Split into equal sections (an int that must divide the axis) or at the given indices."""
    return _split("split", ary, indices_or_sections, axis, even=True)


@_numpy_outside(np.array_split)
def array_split(ary, indices_or_sections, axis: int = 0) -> list[Tracer]:
    """As split, with sections that may differ by one element (the first ones are longer)."""
    return _split("array_split", ary, indices_or_sections, axis, even=False)


# ---- axes ----

@_numpy_outside(np.squeeze)
def squeeze(a, axis=None) -> Tracer:
    """Remove size-1 axes (all of them, or those named; naming a longer axis is an error)."""
    x = _lift(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = _axes(axis, x.ndim, "squeeze")
        for i in axes:
            if x.shape[i] != 1:
                raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size "
                                 f"not equal to one (axis {i} of shape {x.shape})")
    return T.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


@_numpy_outside(np.expand_dims)
def expand_dims(a, axis) -> Tracer:
    """Insert size-1 axes at the positions `axis` of the result."""
    x = _lift(a)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    nd = x.ndim + len(axes)
    axes = _axes(axes, nd, "expand_dims")
    it = iter(x.shape)
    return T.reshape(x, tuple(1 if i in axes else next(it) for i in _range(nd)))


@_numpy_outside(np.moveaxis)
def moveaxis(a, source, destination) -> Tracer:
    """Move axes to new positions; the others keep their order."""
    x = _lift(a)
    src = _axes(source, x.ndim, "moveaxis")
    dst = _axes(destination, x.ndim, "moveaxis")
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} must have "
                         f"the same number of elements")
    order = [i for i in _range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return T.transpose(x, tuple(order))


@_numpy_outside(np.swapaxes)
def swapaxes(a, axis1: int, axis2: int) -> Tracer:
    """Exchange two axes."""
    x = _lift(a)
    i, j = _axis(axis1, x.ndim, "swapaxes"), _axis(axis2, x.ndim, "swapaxes")
    perm = list(_range(x.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return T.transpose(x, tuple(perm))


@_numpy_outside(np.ravel)
def ravel(a, order: str = "C") -> Tracer:
    """The flattened array (C order only)."""
    if order != "C":
        raise NotImplementedError(f"ravel: only order='C' is supported, got {order!r}")
    x = _lift(a)
    return T.reshape(x, (x.size,))


def _atleast(n: int, x) -> Tracer:
    x = _lift(x)
    if x.ndim >= n:
        return x
    if n == 3 and x.ndim == 2:
        return T.reshape(x, x.shape + (1,))
    if n == 3 and x.ndim == 1:
        return T.reshape(x, (1,) + x.shape + (1,))
    return T.reshape(x, (1,) * (n - x.ndim) + x.shape)


@_numpy_outside(np.atleast_1d)
def atleast_1d(*arys):
    """Each argument with at least one axis (a list for several arguments)."""
    out = [_atleast(1, a) for a in arys]
    return out[0] if len(out) == 1 else out


@_numpy_outside(np.atleast_2d)
def atleast_2d(*arys):
    """Each argument with at least two axes: (N,) becomes (1, N)."""
    out = [_atleast(2, a) for a in arys]
    return out[0] if len(out) == 1 else out


@_numpy_outside(np.atleast_3d)
def atleast_3d(*arys):
    """Each argument with at least three axes: (N,) becomes (1, N, 1), (M, N) (M, N, 1)."""
    out = [_atleast(3, a) for a in arys]
    return out[0] if len(out) == 1 else out


# ---- reordering: flip, roll, tile, repeat ----

@_numpy_outside(np.flip)
def flip(m, axis=None) -> Tracer:
    """Reverse the order of elements along the given axes (all when None): one Rev."""
    x = _lift(m)
    axes = tuple(_range(x.ndim)) if axis is None else _axes(axis, x.ndim, "flip")
    return _rev(x, axes)


@_numpy_outside(np.fliplr)
def fliplr(m) -> Tracer:
    """flip(m, 1) of an array with at least two axes."""
    x = _lift(m)
    if x.ndim < 2:
        raise ValueError(f"fliplr: input must have at least 2 dimensions, got shape {x.shape}")
    return _rev(x, (1,))


@_numpy_outside(np.flipud)
def flipud(m) -> Tracer:
    """flip(m, 0) of an array with at least one axis."""
    x = _lift(m)
    if x.ndim < 1:
        raise ValueError("flipud: input must have at least 1 dimension")
    return _rev(x, (0,))


def _static_int(name, what, v) -> int:
    if isinstance(v, Tracer):
        raise TypeError(f"{name}: {what} must be static (a Python or numpy int), not a traced "
                        f"value")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{name}: {what} must be an int, got {v!r}") from None


@_numpy_outside(np.roll)
def roll(a, shift, axis=None) -> Tracer:
    """Shift elements cyclically along axes (of the flattened array when axis is None)."""
    x = _lift(a)
    if axis is None:
        return T.reshape(roll(ravel(x), shift, 0), x.shape)
    shifts = (shift,) if not isinstance(shift, (tuple, list, np.ndarray)) else tuple(shift)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: shift {shift} and axis {axis} must have matching lengths")
    total: dict[int, int] = {}
    for s, ax in zip(shifts, axes):
        ax = _axis(ax, x.ndim, "roll")
        total[ax] = total.get(ax, 0) + _static_int("roll", "shift", s)
    for ax, s in total.items():
        n = x.shape[ax]
        s = s % n if n else 0
        if s:
            x = _concat([_slice(x, ax, n - s, n), _slice(x, ax, 0, n - s)], ax)
    return x


@_numpy_outside(np.tile)
def tile(A, reps) -> Tracer:
    """A repeated reps times along each axis (one broadcast and one reshape)."""
    x = _lift(A)
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    reps = tuple(_static_int("tile", "reps", r) for r in reps)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: negative repetitions {reps}")
    nd = _max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    x = T.reshape(x, (1,) * (nd - x.ndim) + x.shape)
    if all(r == 1 for r in reps):
        return x
    inter = tuple(v for r, d in zip(reps, x.shape) for v in (r, d))
    b = _emit(x._t, _op(P.BroadcastInDim, inter, tuple(_range(1, 2 * nd, 2))), x)
    return T.reshape(b, tuple(r * d for r, d in zip(reps, x.shape)))


@_numpy_outside(np.repeat)
def repeat(a, repeats, axis=None, *, total_repeat_length=None) -> Tracer:
    """Repeat each element `repeats` times (an int, or one static count per element) along axis
    (of the flattened array when None)."""
    x = _lift(a)
    if axis is None:
        x, ax = ravel(x), 0
    else:
        ax = _axis(axis, x.ndim, "repeat")
    if isinstance(repeats, Tracer):
        raise TypeError("repeat: repeats must be static (ints), not a traced value")
    r = np.asarray(repeats)
    if kind_of(r.dtype) not in "iub":
        raise TypeError(f"repeat: repeats must be integers, got dtype {r.dtype}")
    if (r < 0).any():
        raise ValueError("repeat: negative repeats")
    n = x.shape[ax]
    if r.ndim == 0 or r.size == 1:
        k = int(r.reshape(-1)[0])
        shape = x.shape[:ax + 1] + (k,) + x.shape[ax + 1:]
        dims = tuple(i for i in _range(x.ndim + 1) if i != ax + 1)
        b = _emit(x._t, _op(P.BroadcastInDim, shape, dims), x)
        out = T.reshape(b, x.shape[:ax] + (n * k,) + x.shape[ax + 1:])
    else:
        if r.shape != (n,):
            raise ValueError(f"repeat: repeats of shape {r.shape} do not match axis {ax} of "
                             f"length {n}")
        out = _take_static(x, np.repeat(np.arange(n), r), ax)
    if total_repeat_length is not None and out.shape[ax] != total_repeat_length:
        raise ValueError(f"repeat: total_repeat_length={total_repeat_length} differs from the "
                         f"sum of repeats {out.shape[ax]}")
    return out


# ---- padding ----

def _pad_widths(name, pad_width, ndim) -> list[tuple[int, int]]:
    if isinstance(pad_width, Tracer):
        raise TypeError(f"{name}: pad_width must be static (ints), not a traced value")
    pw = np.asarray(pad_width)
    if kind_of(pw.dtype) not in "iu":
        raise TypeError(f"{name}: pad_width must be integers, got {pad_width!r}")
    try:
        pw = np.broadcast_to(pw, (ndim, 2))
    except ValueError:
        raise ValueError(f"{name}: pad_width {pad_width!r} does not fit an array of "
                         f"{ndim} dimensions") from None
    if (pw < 0).any():
        raise ValueError(f"{name}: negative pad_width {pad_width!r}")
    return [(int(b), int(e)) for b, e in pw]


_INDEX_MODES = ("edge", "reflect", "symmetric", "wrap")


def pad(array, pad_width, mode: str = "constant", **kwargs) -> Tracer:
    """Pad each axis, as ``jax.numpy.pad``: modes constant (constant_values), edge, reflect and
    symmetric (reflect_type 'even'), wrap."""
    if not _traced() and not _has_tracer((array,)) and not _has_tracer(kwargs.values()):
        return np.pad(array, pad_width, mode, **kwargs)
    x = _lift(array)
    widths = _pad_widths("pad", pad_width, x.ndim)
    if callable(mode):
        raise NotImplementedError("pad: a callable mode is not supported")
    if mode == "constant":
        unknown = set(kwargs) - {"constant_values"}
        if unknown:
            raise TypeError(f"pad: unexpected keyword arguments {sorted(unknown)} for mode "
                            f"'constant'")
        return _pad_constant(x, widths, kwargs.get("constant_values", 0))
    if mode in _INDEX_MODES:
        unknown = set(kwargs) - {"reflect_type"}
        if unknown:
            raise TypeError(f"pad: unexpected keyword arguments {sorted(unknown)} "
                            f"for mode {mode!r}")
        if kwargs.get("reflect_type", "even") != "even":
            raise NotImplementedError("pad: only reflect_type='even' is supported")
        for ax, (b, e) in enumerate(widths):
            if b or e:
                n = x.shape[ax]
                if n == 0:
                    raise ValueError(f"pad: can't extend empty axis {ax} using mode {mode!r}")
                idx = np.pad(np.arange(n), (b, e), mode=mode)
                x = _take_static(x, idx, ax)
        return x
    raise NotImplementedError(
        f"pad: mode {mode!r} is not supported (constant, edge, reflect, symmetric, wrap are)"
    )


def _pad_constant(x: Tracer, widths, constant_values) -> Tracer:
    t = x._t
    if not isinstance(constant_values, Tracer):
        cv = np.asarray(constant_values)
        if cv.ndim == 0 and cv == 0:
            if not any(b or e for b, e in widths):
                return x
            lo, hi = tuple(b for b, _ in widths), tuple(e for _, e in widths)
            return _emit(t, _op(P.Pad, lo, hi, (0,) * x.ndim), x)
        try:
            cv = np.broadcast_to(cv, (x.ndim, 2))
        except ValueError:
            raise ValueError(
                f"pad: constant_values of shape {cv.shape} do not fit an array of "
                f"{x.ndim} dimensions"
            ) from None
        values = [[_lift_in(t, cv[i, j], x.dtype) for j in (0, 1)] for i in _range(x.ndim)]
    else:
        c = (
            T.astype(constant_values, x.dtype)
            if constant_values.dtype != x.dtype
            else constant_values
        )
        if c.ndim != 0:
            raise NotImplementedError("pad: traced constant_values must be a scalar")
        values = [[c, c] for _ in _range(x.ndim)]
    for ax, (b, e) in enumerate(widths):
        parts = []
        for w, v in ((b, values[ax][0]), (None, None), (e, values[ax][1])):
            if w is None:
                parts.append(x)
            elif w:
                shape = tuple(w if i == ax else d for i, d in enumerate(x.shape))
                parts.append(_broadcast(t, v, shape))
        x = _concat(parts, ax)
    return x


# Weakly typed results where the operands are (jax's rule; tidu.trace.tracer.keeps_weak)
# a dtype argument, by keyword or by position, makes the result strong (jax's)
for _n, _pos in (("stack", 3), ("vstack", 1), ("hstack", 1), ("dstack", 1), ("column_stack", None)):
    globals()[_n] = keeps_weak(0, seq=True, dtype_pos=_pos)(globals()[_n])
for _n in ("split", "array_split", "squeeze", "expand_dims", "moveaxis", "swapaxes", "ravel",
           "flip", "fliplr", "flipud", "roll", "tile", "repeat", "pad"):
    globals()[_n] = keeps_weak(0)(globals()[_n])
del _n, _pos
