"""The one-primitive numpy names on traced values (reshape, transpose, broadcast_to, astype,
where, concatenate, conj/real/imag, sum/max/mean, matmul/dot, the compiled exp/log/...) and the
trace helpers the other numpy modules share (re-exported here so ``core`` is their one import)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence

import numpy as np

from tidu import ops as P
from tidu._native import _core
from tidu.graph import AbstractValue, _aval_list, prim_id, prim_of, shape_rule
from tidu.graph.dtypes import BOOL, COMPLEXES, accumulation_dtype, kind_of
from tidu.trace.tracer import (
    Tracer,
    _broadcast,
    _compare,
    _const,
    _current,
    _dtype_of,  # noqa: F401  (other numpy modules import it here)
    _emit,
    _lift,
    _op,
    _promote,  # noqa: F401  (other numpy modules import it here)
    _promote_weak,
    _trace_of,
    _typed,
    _weak,
    as_inexact,
    keeps_weak,
    result_type,
    weak_result_type,
)

__all__ = [
    "abs", "astype", "broadcast_to", "concatenate", "conj", "cos", "dot", "exp", "expm1", "imag",
    "iota", "log", "log1p", "matmul", "max", "maximum", "mean", "minimum", "power",
    "real", "reshape", "rsqrt", "sign", "sin", "sqrt", "stop_gradient", "sum", "tanh",
    "transpose", "where",
]

# ---- numpy-like functions ----

# This module defines sum/max/abs with numpy's meaning; Python's own are reached through builtins.
builtins_sum, builtins_max = builtins.sum, builtins.max

# exp, log, sin, cos, tanh, sqrt, rsqrt, expm1, log1p: compiled (pyx/trace/tracer.pxi).
exp, log, sin, cos, tanh = _core.exp, _core.log, _core.sin, _core.cos, _core.tanh
sqrt, rsqrt, expm1, log1p = _core.sqrt, _core.rsqrt, _core.expm1, _core.log1p


def abs(x):  # noqa: A001 - numpy's name
    t = _trace_of(x)
    x = _lift_weak(t, x)
    if x.aval.dtype == BOOL:  # jax's: bool is its own absolute value
        return x
    return _weak(_emit(t, P.Abs(), x), x.weak_type)


def sign(x):
    t = _trace_of(x)
    x = _lift_weak(t, x)
    return _weak(_emit(t, P.Sign(), x), x.weak_type)


def _lift_weak(t, x):
    """x traced, weakly typed where it is (a Python int/float/complex, or a weak Tracer)."""
    weak = _typed(x)[1]
    return _weak(_lift(t, x), weak) if weak and not isinstance(x, Tracer) else _lift(t, x)


def power(x, y):
    """x ** y. A Python int exponent is jax's ``integer_pow``: multiplications by repeated
    squaring (the same products in the same order as XLA's, so the same bits, and a derivative
    of a few multiplications instead of the general power rule), a reciprocal for a negative one
    (of a float x); a float literal 2 is traced as x * x. Exponent 0 takes the general path."""
    if isinstance(x, Tracer) and not isinstance(y, bool) and kind_of(x.aval.dtype) != "b":
        if (type(y) is int or isinstance(y, np.integer)) and y != 0 \
                and (y > 0 or kind_of(x.aval.dtype) in "fc"):
            return _integer_pow(x, int(y))
        if isinstance(y, float) and y == 2:
            return x * x
    if _int_operands(x, y):
        return _pow_int_int(x, y)
    return _core.binary(_core.B_POW, x, y)


def _int_operands(x, y) -> bool:
    """x and y promote to an integer or bool dtype (and one of them is traced)."""
    if not (isinstance(x, Tracer) or isinstance(y, Tracer)):
        return False
    try:
        return kind_of(weak_result_type(x, y)[0]) in "iub"
    except TypeError:
        return False


def _pow_int_int(x, y):
    """Integer x ** y, as jax's ``_pow_int_int``: binary exponentiation over the exponent's low 6
    bits (anything more overflows for |x| > 1); bool operands as int32 (jax's
    promote_args_numeric); pow(0, y) is 0 for y != 0."""
    t = _trace_of(x, y)
    (a, b), weak = _promote_weak("power", t, x, y)
    if a.aval.dtype == BOOL:
        a, b = astype(a, np.int32), astype(b, np.int32)
    acc = where((a == 0) & (b != 0), 0, 1)
    one = _broadcast(t, _const(t, 1, b.aval.dtype), b.aval.shape)
    for _ in range(6):
        acc = where((b & 1) != 0, acc * a, acc)
        a = a * a
        b = _emit(t, P.ShiftRightLogical(), b, one)
    return _weak(acc, weak)


def _integer_pow(x, n: int):
    k, acc = (-n if n < 0 else n), None
    while k > 0:
        if k & 1:
            acc = x if acc is None else acc * x
        k >>= 1
        if k:
            x = x * x
    return 1 / acc if n < 0 else acc


def maximum(x, y):
    try:
        return _core.binary(_core.B_MAX, x, y)
    except TypeError:  # Max is real-only: complex operands are ordered here
        return _lex_pick(x, y, "maximum")


def minimum(x, y):
    try:
        return _core.binary(_core.B_MIN, x, y)
    except TypeError:
        return _lex_pick(x, y, "minimum")


def _lex_pick(x, y, name: str):
    """jax's maximum/minimum of complex operands: x where it is lexicographically greater
    (smaller) than y, by real part then imaginary part, else y (so y where either holds a NaN,
    as jax's); any other operands re-raise the TypeError being handled."""
    t = _trace_of(x, y)
    (a, b), weak = _promote_weak(name, t, x, y)
    if a.aval.dtype not in COMPLEXES:
        raise
    ra, rb, ia, ib = real(a), real(b), imag(a), imag(b)
    op = "GT" if name == "maximum" else "LT"
    wins = _compare(op, ra, rb) | (_compare("EQ", ra, rb) & _compare(op, ia, ib))
    return _weak(_emit(t, P.Select(), wins, a, b), weak)


def _axes(x: Tracer, axis) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -x.ndim <= a < x.ndim:
            raise ValueError(f"axis {a} out of range for shape {x.shape}")
        out.append(int(a) % x.ndim if x.ndim else 0)
    return tuple(out)


def _reduce(cls, x, axis, keepdims, name):
    t = _trace_of(x)
    x = _lift(t, x)
    axes = _axes(x, axis)
    if cls is P.ReduceSum and x.aval.dtype != accumulation_dtype(x.aval.dtype):
        x = _lift(t, x, accumulation_dtype(x.aval.dtype))  # bool, int8..int32: int64; uints: uint64
    elif cls is P.ReduceMax and x.aval.dtype == BOOL:
        cls = P.ReduceOr  # max of bools is any (as min is all)
    elif cls is P.ReduceMax and x.aval.dtype in COMPLEXES:
        return lex_extreme(x, axes, keepdims, largest=True)
    y = _emit(t, _op(cls, axes), x)
    if keepdims:
        y = _emit(t, _op(P.Reshape, tuple(1 if i in axes else d for i, d in enumerate(x.shape))), y)
    return y


def lex_index(x, largest: bool):
    """Index along the last axis of complex x of its first lexicographic extreme (real part,
    then imaginary part: numpy's and jax's order), int64; a NaN in either part wins, as
    ArgMin/ArgMax's first NaN."""
    t = _trace_of(x)
    last = x.ndim - 1
    re, im = real(x), imag(x)
    ext = _emit(t, _op(P.ReduceMax if largest else P.ReduceMin, (last,)), re)
    ext = _emit(t, P.BroadcastInDim(x.shape, tuple(range(last))), ext)
    key = where(re == ext, im, -np.inf if largest else np.inf)
    key = where(re != re, np.nan, where(im != im, np.nan, key))
    return _emit(t, (P.ArgMax if largest else P.ArgMin)(last, "int64"), key)


def lex_extreme(x, axes, keepdims, largest: bool):
    """min/max of complex x over axes in lexicographic order: the extreme element itself, picked
    by a one-hot sum (exact: the other terms are -0-0j)."""
    t = _trace_of(x)
    axes = tuple(sorted(axes))
    keep = [a for a in range(x.ndim) if a not in axes]
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if n == 0:
        raise ValueError(f"{'max' if largest else 'min'}: zero-size array to reduction operation "
                         f"(shape {x.shape}, axes {axes})")
    kshape = tuple(x.shape[a] for a in keep)
    xf = transpose(x, tuple(keep) + axes) if keep + list(axes) != list(range(x.ndim)) else x
    xf = reshape(xf, kshape + (n,))
    idx = lex_index(xf, largest)
    hit = _compare("EQ", iota(xf.shape, "int64", xf.ndim - 1),
                   _emit(t, P.BroadcastInDim(xf.shape, tuple(range(len(kshape)))), idx))
    y = _emit(t, _op(P.ReduceSum, (xf.ndim - 1,)),
              where(hit, xf, np.asarray(complex(-0.0, -0.0), x.aval.dtype)))
    if keepdims:
        y = reshape(y, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return y


def sum(x, axis=None, keepdims=False):  # noqa: A001
    return _reduce(P.ReduceSum, x, axis, keepdims, "sum")


def max(x, axis=None, keepdims=False):  # noqa: A001
    return _reduce(P.ReduceMax, x, axis, keepdims, "max")


def mean(x, axis=None, keepdims=False):
    t = _trace_of(x)
    x = _lift(t, x)
    n = int(np.prod([x.shape[a] for a in _axes(x, axis)], dtype=np.int64))
    x = as_inexact(x, t)  # integers summed in jax's to_inexact_dtype (an int sum would wrap)
    return sum(x, axis, keepdims) / n


def _reshape_target(av: AbstractValue, shape) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ValueError(f"reshape: at most one -1 in {shape}")
    if -1 in shape:
        rest = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        if rest == 0 or av.size % rest:
            raise ValueError(f"reshape: cannot reshape {av.shape} to {shape}")
        shape = tuple(av.size // rest if s == -1 else s for s in shape)
    return shape


def reshape_general(x, shape):
    """reshape (tidu.reshape is the compiled tracer's, pyx/trace/tracer.pxi, which comes here for
    what it does not take and for the errors)."""
    t = _trace_of(x)
    x = _lift(t, x)
    shape = _reshape_target(x.aval, shape)
    if shape == x.shape:
        return x
    return _emit(t, _op(P.Reshape, shape), x)


def reshape_rule(av: AbstractValue, shape):
    """What reshape_general emits at av for a shape it accepted: (prim id, output aval id),
    or () for nothing (the same shape)."""
    shape = _reshape_target(av, shape)
    if shape == av.shape:
        return ()
    pid, (out,) = shape_rule(_op(P.Reshape, shape), (av.id,))
    return pid, out



def _on_host(out_sharding, device, name: str) -> None:
    """jax's placement arguments: None, or a CPU device (tidu computes on the host)."""
    if out_sharding is not None:
        raise ValueError(f"{name}: out_sharding is not supported (tidu computes on the host)")
    if device is not None and getattr(device, "platform", device) != "cpu":
        raise ValueError(f"{name}: device={device!r}; tidu computes on the host, so only None "
                         "or a CPU device is accepted")


def no_out(out, name: str) -> None:
    """jax's ``out`` parameter: accepted so positions match jax's, refused when given."""
    if out is not None:
        raise NotImplementedError(f"{name}: the out argument is not supported (jax's is not "
                                  f"either): use the return value")


def reshape_ordered(x, shape, order, out_sharding):
    """reshape in Fortran order (``order='F'``): jax's ``x.T.reshape(shape[::-1]).T``."""
    _on_host(out_sharding, None, "reshape")
    if order == "C":
        return _core.reshape(x, shape)
    if order != "F":
        raise NotImplementedError(f"reshape: order={order!r}; only 'C' and 'F' are supported "
                                  "(jax's rule)")
    t = _trace_of(x)
    x = _lift(t, x)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return transpose(_core.reshape(transpose(x), shape[::-1]))

reshape = _core.reshape


@keeps_weak(0)
def transpose(a, axes=None):
    t = _trace_of(a)
    x = _lift(t, a)
    perm = (
        tuple(reversed(range(x.ndim)))
        if axes is None
        else tuple(int(a) % builtins_max(x.ndim, 1) for a in axes)
    )
    if perm == tuple(range(x.ndim)):
        return x
    op = _op(P.Transpose, perm)
    _core.mark_transpose(prim_id(op))  # a product of it folds it (_dot_general)
    return _emit(t, op, x)


@keeps_weak(0)
def broadcast_to(array, shape, *, out_sharding=None):
    _on_host(out_sharding, None, "broadcast_to")
    t = _trace_of(array)
    x = _lift(t, array)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    lead = len(shape) - x.ndim  # numpy's rule, without numpy's own size limit on the result
    if lead < 0 or any(d not in (1, s) for d, s in zip(x.shape, shape[lead:])):
        raise ValueError(f"broadcast_to: cannot broadcast {x.shape} to {shape}")
    return _broadcast(t, x, shape)


def astype(x, dtype, /, *, copy=False, device=None):
    """x as dtype (strongly typed), jax's ``astype``; ``copy`` changes nothing (a traced
    value is never a view)."""
    _on_host(None, device, "astype")
    t = _trace_of(x)
    r = _lift(t, x, np.dtype(dtype))
    if r.weak_type:  # as jax's: an explicit dtype makes a value strongly typed
        r = Tracer(r._t, r._v, r.aval)
    return r


def where(cond, x, y):
    t = _trace_of(cond, x, y)
    c = _lift(t, cond)
    if c.aval.dtype != BOOL:
        c = _compare("NE", c, 0)
    (a, b), weak = _promote_weak("where", t, x, y)
    shape = np.broadcast_shapes(c.shape, a.shape)
    return _weak(_emit(
        t, P.Select(), _broadcast(t, c, shape), _broadcast(t, a, shape), _broadcast(t, b, shape)
    ), weak)


@keeps_weak(0)
def conj(x):
    t = _trace_of(x)
    x = _lift(t, x)
    return _emit(t, P.Conj(), x) if x.aval.dtype in COMPLEXES else x


@keeps_weak(0)
def real(x):
    t = _trace_of(x)
    x = _lift(t, x)
    return _emit(t, P.Real(), x) if x.aval.dtype in COMPLEXES else x


@keeps_weak(0)
def imag(x):
    t = _trace_of(x)
    x = _lift(t, x)
    if x.aval.dtype in COMPLEXES:
        return _emit(t, P.Imag(), x)
    return _broadcast(t, _const(t, 0, x.aval.dtype), x.shape)


def concatenate_rule(avals: Sequence[AbstractValue], axis: int):
    """What concatenate_general emits for operands of these avals that it accepted, when they
    share one dtype: (prim id, output aval id); None otherwise (the general path's promotion)."""
    if len({a.dtype for a in avals}) != 1:
        return None
    pid, (out,) = shape_rule(
        _op(P.Concatenate, int(axis) % avals[0].ndim), tuple(a.id for a in avals)
    )
    return pid, out


@keeps_weak(0, seq=True, dtype_pos=2)
def concatenate_general(xs: Sequence, axis: int | None = 0, dtype=None):
    """concatenate (tidu.concatenate is the compiled tracer's, pyx/trace/tracer.pxi, which comes
    here for what it does not take and for the errors): ``axis=None`` joins the flattened
    arrays, ``dtype`` casts every operand to it first (a strongly typed result), as
    ``jax.numpy.concatenate``."""
    xs = list(xs)
    if not xs:
        raise ValueError("concatenate: need at least one array")
    t = _trace_of(*xs)
    if axis is None:
        xs, axis = [_core.reshape(_lift(t, x), (-1,)) for x in xs], 0
    dts = {x.aval.dtype if type(x) is Tracer else None for x in xs}
    dt = (
        np.dtype(dtype) if dtype is not None
        else next(iter(dts))
        if len(dts) == 1 and None not in dts
        else result_type(*xs)
    )
    lifted = [_lift(t, x, dt) for x in xs]
    nd = lifted[0].ndim
    if nd == 0:
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    out = _emit(t, _op(P.Concatenate, int(axis) % nd), *lifted)
    return astype(out, dt) if dtype is not None else out


concatenate = _core.concatenate


def _untransposed(t, x: Tracer, contract, batch):
    """(source, contracting axes, batch axes) on the source when x is a transpose (of a
    transpose ...) made in this trace that keeps its free axes in order: a product then reads the
    source in the transposed layout (the BLAS's transpose flags) instead of a copy, which is left
    unused.  Else as given."""
    while t.store.local_of(x._v) >= 0:
        op = _core.val_info(x._v)[0]
        if op == _core.NONE:
            break
        prim, _, ins, _, _ = _core.op_info(op)
        tr = prim_of(prim)
        if type(tr) is not P.Transpose:
            break
        perm = tr.perm
        free = [perm[ax] for ax in range(x.ndim) if ax not in contract and ax not in batch]
        if free != sorted(free):
            break
        x = _core.tracer_at(t, ins[0])
        contract = tuple(perm[ax] for ax in contract)
        batch = tuple(perm[ax] for ax in batch)
    return x, contract, batch


def _dot_general(t, a: Tracer, b: Tracer, lc, rc, lb=(), rb=()):
    a, lc, lb = _untransposed(t, a, lc, lb)
    b, rc, rb = _untransposed(t, b, rc, rb)
    op = _op(P.DotGeneral, lc, rc, lb, rb)
    if a.aval.dtype is b.aval.dtype:
        return _emit(t, op, a, b)
    dt = result_type(a, b)
    return _emit(t, op, _lift(t, a, dt), _lift(t, b, dt))


def matmul_rule(a: AbstractValue, b: AbstractValue):
    """(prim id, output aval) of a @ b where that is one DotGeneral of operands of rank 1 or 2
    and one dtype (the compiled tracer's fast path, pyx/trace/tracer.pxi), else None: matmul takes
    every other case, and raises the errors."""
    if a.dtype is not b.dtype or not (1 <= a.ndim <= 2 and 1 <= b.ndim <= 2):
        return None
    try:
        pid, (out,) = shape_rule(_op(P.DotGeneral, (a.ndim - 1,), (0,), (), ()), (a.id, b.id))
    except (TypeError, ValueError):  # mismatched shapes: matmul raises them, naming them
        return None
    return pid, _aval_list[out]


def _check_precision(precision, name: str) -> None:
    """jax's ``precision``: None, a string or ``lax.Precision``/``DotAlgorithmPreset`` value, or a
    pair of them. tidu's products are always at its dtype's full precision, so it changes
    nothing; anything else is an error."""
    items = precision if isinstance(precision, tuple) and len(precision) == 2 else (precision,)
    for p in items:
        if p is not None and not isinstance(p, str) and not hasattr(p, "name"):
            raise TypeError(f"{name}: precision={precision!r} is not a precision (None, a string, "
                            "a jax.lax.Precision, or a pair of them)")


def preferred(f, a, b, precision, preferred_element_type, name: str):
    """f(a, b) (a product) under jax's ``precision`` and ``preferred_element_type``: with a
    wider or more inexact preferred type the operands are cast to it (the products and their sum
    are then exact in it, as accumulating in it is); with a narrower one the result is cast."""
    _check_precision(precision, name)
    if preferred_element_type is None:
        return f(a, b)
    pe = np.dtype(preferred_element_type)
    t = _trace_of(a, b)
    a, b = _lift(t, a), _lift(t, b)
    dt = result_type(a, b)
    kinds = "biufc"
    wider = (kinds.index(kind_of(pe)) > kinds.index(kind_of(dt))
             or kind_of(pe) == kind_of(dt) and pe.itemsize >= dt.itemsize)
    if wider:
        return f(astype(a, pe), astype(b, pe))
    return astype(f(a, b), pe)


@keeps_weak(0, 1)
def _matmul(a, b):
    t = _trace_of(a, b)
    a, b = _lift(t, a), _lift(t, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: operands must not be scalars (use *)")
    if a.ndim <= 2 and b.ndim <= 2:
        return _dot_general(t, a, b, (a.ndim - 1,), (0,))
    if a.ndim == 1:
        a = reshape(a, (1,) + a.shape)
        return reshape(_matmul(a, b), b.shape[:-2] + (b.shape[-1],))
    if b.ndim == 1:
        b = reshape(b, b.shape + (1,))
        return reshape(_matmul(a, b), a.shape[:-1])
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = _broadcast(t, a, batch + a.shape[-2:])
    b = _broadcast(t, b, batch + b.shape[-2:])
    nb = len(batch)
    return _dot_general(t, a, b, (nb + 1,), (nb,), tuple(range(nb)), tuple(range(nb)))


def matmul(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """``jnp.matmul`` (``a @ b``): ``precision`` changes nothing (products are at full
    precision); ``preferred_element_type`` is the result's dtype."""
    _on_host(out_sharding, None, "matmul")
    return preferred(_matmul, a, b, precision, preferred_element_type, "matmul")


def dot(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """``jnp.dot``: ``precision`` and ``preferred_element_type`` as matmul's."""
    _on_host(out_sharding, None, "dot")
    return preferred(_dot, a, b, precision, preferred_element_type, "dot")


@keeps_weak(0, 1)
def _dot(a, b):
    t = _trace_of(a, b)
    a, b = _lift(t, a), _lift(t, b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return _dot_general(t, a, b, (a.ndim - 1,), (builtins_max(b.ndim - 2, 0),))


@keeps_weak(0)
def stop_gradient(x):
    t = _trace_of(x)
    return _emit(t, P.StopGradient(), _lift(t, x))


def iota(shape, dtype="int64", dimension=0):
    t = _current()
    op = P.Iota(tuple(shape), dtype, dimension)
    out = op.abstract_eval()
    return Tracer(t, t.store.emit0(prim_id(op), out.id), out)
