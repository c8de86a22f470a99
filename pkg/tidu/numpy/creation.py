"""Array construction on traced values, as ``jax.numpy`` spells it: the constant constructors
(zeros, ones, full, eye, arange, linspace: numpy arrays, which the trace turns into Constant nodes
where they meet traced values), the ``*_like`` functions, ``asarray``/``array`` of nested lists of
traced values, and the static queries ndim, shape and size."""

from __future__ import annotations

import builtins

import numpy as np

from tidu import ops as P
from tidu.graph.dtypes import COMPLEXES
from tidu.numpy import core as T
from tidu.numpy.shapes import (
    _axis,
    _has_tracer,
    _lift,
    _numpy_outside,
    _slice,
    _static_int,
    _traced,
    _zeros,
    ravel,
)
from tidu.trace.tracer import (
    Tracer,
    _as_weak,
    _broadcast,
    _const,
    _current,
    _emit,
    _op,
    _promote,
    _stack,
    _trace_of,
    keeps_weak,
    result_type,
)
from tidu.trace.tracer import _lift as _lift_in

__all__ = [
    "diag", "diagonal", "meshgrid", "tri", "tril", "triu", "arange", "array", "asarray",
    "empty", "empty_like", "eye", "full", "full_like", "identity", "linspace", "ndim", "ones",
    "ones_like", "shape", "size", "zeros", "zeros_like",
]

_range, _max, _min = builtins.range, builtins.max, builtins.min


def _static_shape(name, shape) -> tuple[int, ...]:
    if isinstance(shape, Tracer):
        raise TypeError(f"{name}: shape must be static (ints), not a traced value")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return tuple(_static_int(name, "shape", d) for d in shape)


def zeros(shape, dtype=None, *, device=None, out_sharding=None) -> np.ndarray:
    """An array of zeros (a constant: float64 unless dtype is given)."""
    T._on_host(out_sharding, device, "zeros")
    return np.zeros(_static_shape("zeros", shape), np.float64 if dtype is None else dtype)


def ones(shape, dtype=None, *, device=None, out_sharding=None) -> np.ndarray:
    """An array of ones (a constant: float64 unless dtype is given)."""
    T._on_host(out_sharding, device, "ones")
    return np.ones(_static_shape("ones", shape), np.float64 if dtype is None else dtype)


def empty(shape, dtype=None, *, device=None, out_sharding=None) -> np.ndarray:
    """As zeros (jax's arrays are never uninitialised)."""
    T._on_host(out_sharding, device, "empty")
    return zeros(shape, dtype)


@keeps_weak(1, dtype_pos=2)
def full(shape, fill_value, dtype=None, *, device=None, out_sharding=None):
    """shape filled with fill_value (traced or not); weakly typed where fill_value is (a
    Python int/float/complex in a trace, or a weak traced value) and dtype is None."""
    T._on_host(out_sharding, device, "full")
    shape = _static_shape("full", shape)
    if not isinstance(fill_value, Tracer):
        if dtype is None and type(fill_value) in (int, float, complex) and _stack():
            # in a trace, a Python scalar fill is weakly typed, as jax's: f32 * full(s, 0.5)
            # stays float32
            t = _current()
            return _as_weak(_broadcast(t, _lift_in(t, fill_value), shape))
        return np.full(shape, fill_value, dtype)
    x = T.astype(fill_value, dtype) if dtype is not None else fill_value
    return T.broadcast_to(x, shape)


def _like(name, a, value, dtype, shape):
    dt = np.dtype(dtype) if dtype is not None else (
        a.dtype if isinstance(a, Tracer) else np.asarray(a).dtype)
    sh = (a.shape if isinstance(a, Tracer) else np.shape(a)) if shape is None \
        else _static_shape(name, shape)
    if isinstance(value, Tracer):
        return T.broadcast_to(T.astype(value, dt), sh)
    if isinstance(a, Tracer):
        return _broadcast(a._t, _const(a._t, value, dt), sh)
    return np.full(sh, value, dt)


@keeps_weak(0, dtype_pos=1)
def zeros_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    """Zeros of a's shape and dtype (or those given)."""
    T._on_host(out_sharding, device, "zeros_like")
    return _like("zeros_like", a, 0, dtype, shape)


@keeps_weak(0, dtype_pos=1)
def ones_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    """Ones of a's shape and dtype (or those given)."""
    T._on_host(out_sharding, device, "ones_like")
    return _like("ones_like", a, 1, dtype, shape)


@keeps_weak(0, dtype_pos=1)
def empty_like(prototype, dtype=None, shape=None, *, device=None):
    """As zeros_like."""
    T._on_host(None, device, "empty_like")
    return _like("empty_like", prototype, 0, dtype, shape)


@keeps_weak(0, dtype_pos=2)
def full_like(a, fill_value, dtype=None, shape=None, *, device=None, out_sharding=None):
    """fill_value (traced or not) in a's shape and dtype (or those given)."""
    T._on_host(out_sharding, device, "full_like")
    return _like("full_like", a, fill_value, dtype, shape)


def eye(N: int, M: int | None = None, k: int = 0, dtype=None, *, device=None) -> np.ndarray:
    """The identity-like constant with ones on the k-th diagonal."""
    T._on_host(None, device, "eye")
    return np.eye(_static_int("eye", "N", N), None if M is None else _static_int("eye", "M", M),
                  _static_int("eye", "k", k), np.float64 if dtype is None else dtype)


def identity(n: int, dtype=None) -> np.ndarray:
    """The n x n identity (a constant)."""
    return eye(n, dtype=dtype)


def arange(start, stop=None, step=None, dtype=None, *, device=None,
           out_sharding=None) -> np.ndarray:
    """Evenly spaced values in [start, stop) (a constant: arguments must be static)."""
    T._on_host(out_sharding, device, "arange")
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            raise TypeError("arange: start, stop and step must be static, not traced values "
                            "(use iota or linspace for traced bounds)")
    return np.arange(start, stop, step, dtype=dtype)


def linspace(start, stop, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype=None, axis: int = 0, *, device=None):
    """num evenly spaced values from start to stop; start and stop may be traced (arrays
    broadcast against each other, the new axis at `axis`)."""
    T._on_host(None, device, "linspace")
    num = _static_int("linspace", "num", num)
    if num < 0:
        raise ValueError(f"linspace: number of samples, {num}, must be non-negative")
    if not _traced() and not _has_tracer((start, stop)):
        return np.linspace(start, stop, num, endpoint, retstep, dtype, axis)
    t = _trace_of(start, stop)
    s, e = _promote("linspace", t, start, stop, min_dtype=np.float64)
    div = (num - 1) if endpoint else num
    step = (e - s) / float(div) if div > 0 else None
    shape = s.shape
    nd = len(shape) + 1
    ax = _axis(axis, nd, "linspace")
    out_shape = shape[:ax] + (num,) + shape[ax:]
    dims = tuple(i for i in _range(nd) if i != ax)
    iota = _lift_in(t, np.arange(num, dtype=np.float64).reshape(
        tuple(num if i == ax else 1 for i in _range(nd))), s.dtype)
    sb = _emit(t, _op(P.BroadcastInDim, out_shape, dims), s)
    if step is None:  # num <= 1 (or 0 with endpoint=False): start alone, or nothing
        res = sb
    else:
        stb = _emit(t, _op(P.BroadcastInDim, out_shape, dims), step)
        res = sb + _broadcast(t, iota, out_shape) * stb
        if endpoint and num > 1:  # the last sample is stop exactly, as numpy's
            eb = _emit(t, _op(P.BroadcastInDim, out_shape, dims), e)
            last = np.zeros(out_shape, bool)
            last[tuple(num - 1 if i == ax else slice(None) for i in _range(nd))] = True
            res = _emit(t, P.Select(), _lift_in(t, last), eb, res)
    if dtype is not None:
        res = T.astype(res, dtype)
    if retstep:
        return res, (step if step is not None else float("nan"))
    return res


# ---- arrays from (nested) lists ----

def _leaves(obj, out):
    if isinstance(obj, (list, tuple)):
        for o in obj:
            _leaves(o, out)
    else:
        out.append(obj)
    return out


def _build(t, obj, dtype) -> Tracer:
    if isinstance(obj, (list, tuple)):
        if not obj:
            return _lift_in(t, np.zeros((0,), dtype))
        parts = [_build(t, o, dtype) for o in obj]
        shapes = {p.shape for p in parts}
        if len(shapes) != 1:
            raise ValueError(f"array: setting an array element with a sequence: the nested "
                             f"sequence is inhomogeneous (shapes {sorted(shapes)})")
        return T.concatenate([T.reshape(p, (1,) + p.shape) for p in parts], axis=0)
    return _lift_in(t, obj, dtype)


def asarray(a, dtype=None, order=None, *, copy=None, device=None, out_sharding=None):
    """An array from a traced value, an array, or (nested) lists/tuples of them, with
    ``jax.numpy`` promotion (Python scalars weakly typed)."""
    T._on_host(out_sharding, device, "asarray")
    if order not in (None, "C", "K", "A"):
        raise NotImplementedError(f"asarray: order={order!r} is not supported")
    if isinstance(a, Tracer):
        return T.astype(a, dtype) if dtype is not None and np.dtype(dtype) != a.dtype else a
    leaves = _leaves(a, []) if isinstance(a, (list, tuple)) else [a]
    if not _has_tracer(leaves):
        return np.array(a, dtype=dtype)  # a constant; the trace lifts it where it meets a value
    t = _trace_of(*leaves)
    if dtype is None:
        try:
            dtype = result_type(*leaves)
        except TypeError as e:
            raise TypeError(f"array: cannot promote the elements' dtypes: {e}") from None
    dtype = np.dtype(dtype)
    if any(isinstance(x, Tracer) and x.dtype in COMPLEXES for x in leaves) and \
            dtype not in COMPLEXES:
        raise TypeError(f"array: cannot convert complex traced values to {dtype}")
    return _build(t, a, dtype)


# ---- static queries (jnp.ndim, jnp.shape, jnp.size: Python ints, never traced) ----

def shape(a) -> tuple[int, ...]:
    """The shape of a traced value, array or nested list, as numpy.shape."""
    return tuple(a.shape) if isinstance(a, Tracer) else np.shape(a)


def ndim(a) -> int:
    """The number of axes, as numpy.ndim."""
    return len(shape(a))


def size(a, axis: int | None = None) -> int:
    """The number of elements (along `axis` if given), as numpy.size."""
    sh = shape(a)
    if axis is None:
        return int(np.prod(sh, dtype=np.int64))
    return sh[_axis(axis, len(sh), "size")]


def array(object, dtype=None, copy: bool = True, order=None, ndmin: int = 0, *, device=None,
          out_sharding=None):
    """asarray(object, dtype) with at least ndmin axes (leading ones added)."""
    T._on_host(out_sharding, device, "array")
    x = asarray(object, dtype, order)
    if ndmin and ndim(x) < ndmin:
        if isinstance(x, Tracer):
            return T.reshape(x, (1,) * (ndmin - x.ndim) + x.shape)
        return np.array(x, ndmin=ndmin)
    return x


# ---- diagonals and triangles ----

@keeps_weak(0)
@_numpy_outside(np.diagonal)
def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tracer:
    """The offset diagonal of the (axis1, axis2) planes, as a new last axis: a reshape and one
    strided slice, no gather."""
    x = _lift(a)
    if x.ndim < 2:
        raise ValueError(f"diagonal: array must have at least two dimensions, got shape {x.shape}")
    i, j = _axis(axis1, x.ndim, "diagonal"), _axis(axis2, x.ndim, "diagonal")
    if i == j:
        raise ValueError("diagonal: axis1 and axis2 cannot be the same")
    k = _static_int("diagonal", "offset", offset)
    rest = [d for d in _range(x.ndim) if d not in (i, j)]
    x = T.transpose(x, tuple(rest + [i, j]))
    nd = x.ndim
    rows, cols = x.shape[-2:]
    r0, c0 = (0, k) if k >= 0 else (-k, 0)
    L = _max(0, _min(rows - r0, cols - c0))
    lead = x.shape[:-2]
    if L == 0:
        return _zeros(x._t, lead + (0,), x.dtype)
    x = _slice(_slice(x, nd - 2, r0, r0 + L), nd - 1, c0, c0 + L)
    flat = T.reshape(x, lead + (L * L,))
    return _slice(flat, nd - 2, 0, L * L, L + 1)


@keeps_weak(0)
@_numpy_outside(np.diag)
def diag(v, k: int = 0) -> Tracer:
    """The k-th diagonal of a 2-D array, or a 2-D array with the 1-D v on its k-th diagonal."""
    x = _lift(v)
    k = _static_int("diag", "k", k)
    if x.ndim == 2:
        return diagonal(x, k)
    if x.ndim != 1:
        raise ValueError(f"diag: input must be 1-D or 2-D, got shape {x.shape}")
    n = x.shape[0]
    N = n + abs(k)
    padded = _emit(x._t, _op(P.Pad, (0,), (abs(k),), (0,)), x) if k else x
    # row i holds v[i] (k >= 0), column j holds v[j] (k < 0): broadcast, then keep the diagonal
    full_ = _emit(x._t, _op(P.BroadcastInDim, (N, N), (0,) if k >= 0 else (1,)), padded)
    mask = _lift_in(x._t, np.eye(N, k=k, dtype=bool))
    return _emit(x._t, P.Select(), mask, full_, _zeros(x._t, (N, N), x.dtype))


def tri(N: int, M: int | None = None, k: int = 0, dtype=None) -> np.ndarray:
    """Ones at and below the k-th diagonal (a constant)."""
    return np.tri(N, M, k, dtype=np.float64 if dtype is None else dtype)


def _triangle(name, m, k, lower: bool) -> Tracer:
    x = _lift(m)
    k = _static_int(name, "k", k)
    if x.ndim < 2:  # (numpy broadcasts a 1-D input to a square matrix; jax refuses it)
        raise ValueError(f"{name}: argument must be at least 2-D, got shape {x.shape}")
    n, mm = x.shape[-2:]
    keep = np.tri(n, mm, k, dtype=bool) if lower else ~np.tri(n, mm, k - 1, dtype=bool)
    if keep.all():
        return x
    mask = _broadcast(x._t, _lift_in(x._t, keep), x.shape)
    return _emit(x._t, P.Select(), mask, x, _zeros(x._t, x.shape, x.dtype))


@keeps_weak(0)
@_numpy_outside(np.tril)
def tril(m, k: int = 0) -> Tracer:
    """m with the elements above the k-th diagonal zeroed (over the last two axes)."""
    return _triangle("tril", m, k, True)


@keeps_weak(0)
@_numpy_outside(np.triu)
def triu(m, k: int = 0) -> Tracer:
    """m with the elements below the k-th diagonal zeroed (over the last two axes)."""
    return _triangle("triu", m, k, False)


# ---- grids and constructors ----

@_numpy_outside(np.meshgrid)
def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list:
    """Coordinate arrays from 1-D coordinate vectors ('xy' or 'ij' indexing)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    xs = [ravel(_lift(x)) for x in xi]
    n = len(xs)
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and n > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        pos = i
        if indexing == "xy" and n > 1 and i < 2:
            pos = 1 - i
        if sparse:
            out.append(T.reshape(x, tuple(d if k == pos else 1 for k, d in enumerate(shape))))
        else:
            out.append(_emit(x._t, _op(P.BroadcastInDim, tuple(shape), (pos,)), x))
    return out
