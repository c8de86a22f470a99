"""Tracing Python functions into primal fragments: ``build``, traced values, numpy-like functions.

numpy's broadcasting and type promotion are made explicit here (BroadcastInDim, Convert): the
primitives themselves never broadcast or promote.  Python scalars are weakly typed, as in numpy 2
and JAX (``x * 2.0`` keeps float32 x float32).
"""

from __future__ import annotations

import builtins
import gc
import sys
import threading
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from tidu import _core
from tidu.graph import (AbstractValue, Fragment, FragmentBuilder, ValKey, _aval_list, aval,
                        input_key_ids, prim_id, prim_of, shape_rule)
from tidu import ops as P
from tidu.graph.dtypes import BOOL, COMPLEXES, INTS

__all__ = [
    "Tracer", "build", "spec", "exp", "log", "sin", "cos", "tanh", "sqrt", "rsqrt", "expm1",
    "log1p", "abs", "sign", "power", "sum", "max", "mean", "dot", "matmul", "reshape", "transpose",
    "broadcast_to", "where", "maximum", "minimum", "conj", "real", "imag", "concatenate",
    "stop_gradient", "astype", "iota", "zeros_like", "ones_like", "apply",
]

_PY_SCALARS = (bool, int, float, complex)


# One tracing session (the builder of the fragment being traced) and its values are extension types
# in _core (pyx/_tracer.pxi): the common arithmetic on traced values runs there, in C, and comes
# back here only for the general paths below (registered at the end of this module).
_Trace = _core.Trace
Tracer = _core.Tracer

_state = threading.local()


def _stack() -> list[_Trace]:
    s = getattr(_state, "stack", None)
    if s is None:
        s = _state.stack = []
    return s


def _current() -> _Trace:
    s = _stack()
    if not s:
        raise TypeError("tidu functions operate on traced values: call them inside a function "
                        "passed to tidu.build / tidu.jit / tidu.grad")
    return s[-1]


# ---- emitting ----

def _emit(t: _Trace, op, *args: "Tracer") -> "Tracer":
    pid, (out,) = shape_rule(op, tuple([a.aval.id for a in args]))
    return Tracer(t, t.store.emit(pid, 0, [a._v for a in args], out), _aval_list[out])


# Ops by their attributes: a frozen dataclass's __post_init__ normalises its fields on every
# construction, which the front end would otherwise pay per traced reshape or concatenate.
_OPS: dict[tuple, Any] = {}


def _op(cls, *attrs):
    key = (cls, *attrs)
    op = _OPS.get(key)
    if op is None:
        op = _OPS[key] = cls(*attrs)
    return op


# Field-less primitives are singletons: cache (instance, id) for the hot binary/unary paths.
_SINGLETONS: dict[type, tuple] = {}


def _singleton(cls) -> tuple:
    hit = _SINGLETONS.get(cls)
    if hit is None:
        op = cls()
        hit = _SINGLETONS[cls] = (op, prim_id(op))
    return hit


def _const(t: _Trace, value, dtype) -> "Tracer":
    c = P.Constant.of(value, dtype)
    out = c.abstract_eval()
    return Tracer(t, t.store.emit0(prim_id(c), out.id), out)


def _trace_of(*xs) -> _Trace:
    for x in xs:
        if isinstance(x, Tracer):
            t = x._t
            for y in xs:
                if isinstance(y, Tracer) and y._t is not t:
                    return _innermost([z._t for z in xs if isinstance(z, Tracer)])
            return t
    return _current()


def _innermost(traces) -> _Trace:
    """Of several traces, the one opened last: a control-flow body (tidu.control_flow) combining
    its own values with values of the traces around it, which it then captures."""
    stack = _stack()
    depth = {id(t): i for i, t in enumerate(stack)}
    if any(id(t) not in depth for t in traces):
        raise ValueError("values from two different traces were combined; a traced "
                         "value cannot leave the function that traced it")
    return builtins.max(traces, key=lambda t: depth[id(t)])


def _capture(t: _Trace, x: "Tracer") -> "Tracer":
    """x (a value of an enclosing trace) as a value of t: t's builder must be a control-flow
    body's, which turns captured values into explicit operands."""
    cap = getattr(t.builder, "capture", None)
    if cap is None:
        raise ValueError("values from two different traces were combined; a traced "
                         "value cannot leave the function that traced it")
    return cap(x)


def _dtype_of(x) -> Any:
    if isinstance(x, Tracer):
        return x.aval.dtype
    if isinstance(x, _PY_SCALARS):
        return x  # weak: numpy 2's result_type lets the other operand decide
    return np.asarray(x).dtype


def _lift(t: _Trace, x, dtype=None) -> "Tracer":
    """x as a traced value (constants become Constant nodes), converted to dtype if given."""
    if isinstance(x, Tracer):
        if x._t is not t:
            x = _capture(t, x)
        if dtype is not None and x.aval.dtype != dtype:
            return _emit(t, _op(P.Convert, np.dtype(dtype).name), x)
        return x
    if dtype is None and isinstance(x, _PY_SCALARS):
        dtype = np.result_type(x)
        if dtype == np.dtype("int64") and isinstance(x, bool):
            dtype = BOOL
    arr = np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype)
    if arr.dtype == object:
        raise TypeError(f"cannot use {type(x).__name__} as a tidu value")
    return _const(t, arr, arr.dtype)


def _broadcast(t: _Trace, x: "Tracer", shape: tuple[int, ...]) -> "Tracer":
    if x.aval.shape == shape:
        return x
    nd = len(shape)
    return _emit(t, _op(P.BroadcastInDim, shape, tuple(range(nd - x.aval.ndim, nd))), x)


def _promote(name: str, t: _Trace, *xs, min_dtype=None) -> list["Tracer"]:
    """Lift, type-promote and broadcast operands numpy-style."""
    dts = [_dtype_of(x) for x in xs]
    try:
        dt = np.result_type(*dts) if min_dtype is None else np.result_type(*dts, min_dtype)
    except TypeError as e:
        raise TypeError(f"{name}: cannot promote {dts}: {e}") from None
    lifted = [_lift(t, x, dt) for x in xs]
    shapes = [x.aval.shape for x in lifted]
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"{name}: shapes {' vs '.join(map(str, shapes))} do not broadcast") \
            from None
    return [_broadcast(t, x, shape) for x in lifted]


def _binary(cls, name: str, x, y, float_only=False) -> "Tracer":
    """x op y by the general path: numpy promotion and broadcasting made explicit."""
    t = _trace_of(x, y)
    a, b = _promote(name, t, x, y, min_dtype=np.float32 if float_only else None)
    if float_only and a.aval.dtype in _NONFLOAT:
        a, b = _lift(t, a, np.float64), _lift(t, b, np.float64)
    return _emit(t, cls(), a, b)


_NONFLOAT = INTS | {BOOL}


def _unary_float(cls, x) -> "Tracer":
    """Transcendental functions: integer and bool inputs are computed in float64 (numpy's rule)."""
    t = _trace_of(x)
    x = _lift(t, x)
    if x.aval.dtype in _NONFLOAT:
        x = _lift(t, x, np.float64)
    return _emit(t, cls(), x)


# The compiled fast path (pyx/_tracer.pxi) takes Tracer op Tracer (one trace, one abstract value),
# Tracer op Python float/int (a float/complex Tracer of any shape) and unary ops of a Tracer.  It emits the
# nodes the general paths above would emit for those operands, with shape/dtype rules it asks for
# here once per (op, abstract value) or (op, abstract value, scalar) and memoises by id:
#   rule(av) -> (prim id, output aval) or None (the general path for this aval),
#   scalar_rule(av, s) -> (Constant prim id, Constant aval id, BroadcastInDim prim id, its aval id
#   (None, None at rank 0), prim id, output aval): numpy 2's weak scalar promotion keeps the
#   tracer's dtype, so the general path emits Constant(s as that dtype), broadcasts it to the
#   tracer's shape, and the op.

def _binary_slot(cls, name: str, float_only=False):
    def slow(x, y):
        return _binary(cls, name, x, y, float_only)

    def rule(av):
        if float_only and av.dtype in _NONFLOAT:
            return None
        op, pid = _singleton(cls)
        return pid, op.abstract_eval(av, av)

    def scalar_rule(av, s):
        arr = np.asarray(s, dtype=av.dtype)
        c = P.Constant.of(arr, arr.dtype)
        op, pid = _singleton(cls)
        out = op.abstract_eval(av, av)
        bpid = baid = None
        if av.shape:  # as _broadcast: the rank-0 Constant broadcast to the array's shape
            b = P.BroadcastInDim(av.shape, ())
            bpid, baid = prim_id(b), b.abstract_eval(c.abstract_eval()).id
        return prim_id(c), c.abstract_eval().id, bpid, baid, pid, out

    return slow, rule, scalar_rule


def _unary_slot(cls, float_only=True):
    def slow(x):
        if float_only:
            return _unary_float(cls, x)
        return _emit(x._t, cls(), x)

    def rule(av):
        if float_only and av.dtype in _NONFLOAT:
            return None
        op, pid = _singleton(cls)
        return pid, op.abstract_eval(av)

    return slow, rule


def _compare(direction: str, x, y) -> "Tracer":
    t = _trace_of(x, y)
    a, b = _promote(f"Compare({direction})", t, x, y)
    return _emit(t, _op(P.Compare, direction), a, b)


# ---- indexing ----

# Static indexing plans by (abstract value id, index): the nodes x[idx] emits, as (prim id,
# output aval id) pairs, so repeated indexing (s[0] in every step of an integrator) skips
# normalising the index and building Slice/Reshape ops.
_index_plans: dict[tuple, tuple[tuple[int, int], ...]] = {}


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
    if key is None and _indexing.is_advanced(idx):  # integer arrays, traced ints: a Gather
        return _indexing.advanced_getitem(x, idx)
    plan = _index_plans.get((x.aval.id, key)) if key is not None else None
    if plan is None:
        plan = _index_plan(x, idx)
        if key is not None:
            _index_plans[(x.aval.id, key)] = plan
    t, v = x._t, x._v
    for pid, out in plan:
        v = t.store.emit(pid, 0, [v], out)
    return Tracer(t, v, _aval_list[plan[-1][1]]) if plan else x


def _at(x: Tracer):
    """x.at: jax's indexed updates (tidu.indexing)."""
    return _indexing.IndexUpdateRef(x)


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


# ---- numpy-like functions ----

# exp, log, sin, cos, tanh, sqrt, rsqrt, expm1, log1p: compiled (pyx/_tracer.pxi).
exp, log, sin, cos, tanh = _core.exp, _core.log, _core.sin, _core.cos, _core.tanh
sqrt, rsqrt, expm1, log1p = _core.sqrt, _core.rsqrt, _core.expm1, _core.log1p


def abs(x):  # noqa: A001 - numpy's name
    t = _trace_of(x)
    return _emit(t, P.Abs(), _lift(t, x))


def sign(x):
    t = _trace_of(x)
    return _emit(t, P.Sign(), _lift(t, x))


def power(x, y):
    """x ** y; a literal exponent 2 is traced as x * x (exact, and cheaper to differentiate)."""
    if isinstance(y, (int, float)) and not isinstance(y, bool) and y == 2 and isinstance(x, Tracer):
        return x * x
    return _core.binary(_core.B_POW, x, y)


def maximum(x, y): return _core.binary(_core.B_MAX, x, y)
def minimum(x, y): return _core.binary(_core.B_MIN, x, y)


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
    if cls is P.ReduceSum and x.aval.dtype == BOOL:
        x = _lift(t, x, np.int64)
    y = _emit(t, _op(cls, axes), x)
    if keepdims:
        y = _emit(t, _op(P.Reshape, tuple(1 if i in axes else d for i, d in enumerate(x.shape))), y)
    return y


def sum(x, axis=None, keepdims=False):  # noqa: A001
    return _reduce(P.ReduceSum, x, axis, keepdims, "sum")


def max(x, axis=None, keepdims=False):  # noqa: A001
    return _reduce(P.ReduceMax, x, axis, keepdims, "max")


def mean(x, axis=None, keepdims=False):
    t = _trace_of(x)
    x = _lift(t, x)
    n = int(np.prod([x.shape[a] for a in _axes(x, axis)], dtype=np.int64))
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
    """reshape (tidu.reshape is the compiled tracer's, pyx/_tracer.pxi, which comes here for
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


reshape = _core.reshape


def transpose(x, axes=None):
    t = _trace_of(x)
    x = _lift(t, x)
    perm = tuple(reversed(range(x.ndim))) if axes is None else tuple(int(a) % builtins_max(x.ndim, 1)
                                                                      for a in axes)
    if perm == tuple(range(x.ndim)):
        return x
    op = _op(P.Transpose, perm)
    _core.mark_transpose(prim_id(op))  # a product of it folds it (_dot_general)
    return _emit(t, op, x)


def broadcast_to(x, shape):
    t = _trace_of(x)
    x = _lift(t, x)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    lead = len(shape) - x.ndim  # numpy's rule, without numpy's own size limit on the result
    if lead < 0 or any(d not in (1, s) for d, s in zip(x.shape, shape[lead:])):
        raise ValueError(f"broadcast_to: cannot broadcast {x.shape} to {shape}")
    return _broadcast(t, x, shape)


def astype(x, dtype):
    t = _trace_of(x)
    return _lift(t, x, np.dtype(dtype))


def where(cond, x, y):
    t = _trace_of(cond, x, y)
    c = _lift(t, cond)
    if c.aval.dtype != BOOL:
        c = _compare("NE", c, 0)
    a, b = _promote("where", t, x, y)
    shape = np.broadcast_shapes(c.shape, a.shape)
    return _emit(t, P.Select(), _broadcast(t, c, shape), _broadcast(t, a, shape),
                 _broadcast(t, b, shape))


def conj(x):
    t = _trace_of(x)
    x = _lift(t, x)
    return _emit(t, P.Conj(), x) if x.aval.dtype in COMPLEXES else x


def real(x):
    t = _trace_of(x)
    x = _lift(t, x)
    return _emit(t, P.Real(), x) if x.aval.dtype in COMPLEXES else x


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
    pid, (out,) = shape_rule(_op(P.Concatenate, int(axis) % avals[0].ndim),
                             tuple(a.id for a in avals))
    return pid, out


def concatenate_general(xs: Sequence, axis: int = 0):
    """concatenate (tidu.concatenate is the compiled tracer's, pyx/_tracer.pxi, which comes
    here for what it does not take and for the errors)."""
    xs = list(xs)
    if not xs:
        raise ValueError("concatenate: need at least one array")
    t = _trace_of(*xs)
    dts = {x.aval.dtype if type(x) is Tracer else None for x in xs}
    dt = next(iter(dts)) if len(dts) == 1 and None not in dts else \
        np.result_type(*[_dtype_of(x) for x in xs])
    lifted = [_lift(t, x, dt) for x in xs]
    nd = lifted[0].ndim
    if nd == 0:
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    return _emit(t, _op(P.Concatenate, int(axis) % nd), *lifted)


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
    dt = np.result_type(a.dtype, b.dtype)
    return _emit(t, op, _lift(t, a, dt), _lift(t, b, dt))


def matmul_rule(a: AbstractValue, b: AbstractValue):
    """(prim id, output aval) of a @ b where that is one DotGeneral of operands of rank 1 or 2
    and one dtype (the compiled tracer's fast path, pyx/_tracer.pxi), else None: matmul takes
    every other case, and raises the errors."""
    if a.dtype is not b.dtype or not (1 <= a.ndim <= 2 and 1 <= b.ndim <= 2):
        return None
    try:
        pid, (out,) = shape_rule(_op(P.DotGeneral, (a.ndim - 1,), (0,), (), ()), (a.id, b.id))
    except (TypeError, ValueError):  # mismatched shapes: matmul raises them, naming them
        return None
    return pid, _aval_list[out]


def matmul(a, b):
    t = _trace_of(a, b)
    a, b = _lift(t, a), _lift(t, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: operands must not be scalars (use *)")
    if a.ndim <= 2 and b.ndim <= 2:
        return _dot_general(t, a, b, (a.ndim - 1,), (0,))
    if a.ndim == 1:
        a = reshape(a, (1,) + a.shape)
        return reshape(matmul(a, b), b.shape[:-2] + (b.shape[-1],))
    if b.ndim == 1:
        b = reshape(b, b.shape + (1,))
        return reshape(matmul(a, b), a.shape[:-1])
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = _broadcast(t, a, batch + a.shape[-2:])
    b = _broadcast(t, b, batch + b.shape[-2:])
    nb = len(batch)
    return _dot_general(t, a, b, (nb + 1,), (nb,), tuple(range(nb)), tuple(range(nb)))


def dot(a, b):
    t = _trace_of(a, b)
    a, b = _lift(t, a), _lift(t, b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return _dot_general(t, a, b, (a.ndim - 1,), (builtins_max(b.ndim - 2, 0),))


def stop_gradient(x):
    t = _trace_of(x)
    return _emit(t, P.StopGradient(), _lift(t, x))


def iota(shape, dtype="int64", dimension=0):
    t = _current()
    op = P.Iota(tuple(shape), dtype, dimension)
    out = op.abstract_eval()
    return Tracer(t, t.store.emit0(prim_id(op), out.id), out)


def zeros_like(x):
    t = _trace_of(x)
    return _broadcast(t, _const(t, 0, x.dtype), x.shape)


def ones_like(x):
    t = _trace_of(x)
    return _broadcast(t, _const(t, 1, x.dtype), x.shape)


# ---- build ----

def spec(shape: Sequence[int] | int = (), dtype: Any = "float64") -> AbstractValue:
    """The abstract value (shape, dtype) of an input."""
    return aval(shape, dtype)


def as_aval(s) -> AbstractValue:
    """An input spec: an AbstractValue, or anything with .shape and .dtype (arrays too)."""
    if isinstance(s, AbstractValue):
        return s
    if isinstance(s, _PY_SCALARS):
        return aval((), np.result_type(s))
    if hasattr(s, "shape") and hasattr(s, "dtype"):
        return aval(tuple(s.shape), s.dtype)
    raise TypeError(f"input spec must be tidu.spec(shape, dtype) or an array, got {s!r}")


class tracing:
    """Context manager: a trace over `builder` is current inside the block."""

    def __init__(self, builder: FragmentBuilder, concrete=None):
        self.trace = _Trace(builder, concrete)
        self._gc_was_enabled = False

    def input(self, key: Hashable, av: AbstractValue) -> Tracer:
        local = self.trace.builder.add_input(key, av)
        return Tracer(self.trace, self.trace.store.global_of(local), av)

    def inputs(self, keys: Sequence[Hashable], avals: Sequence[AbstractValue]) -> list[Tracer]:
        """input() of each (key, aval) pair, declared in one pass."""
        return _core.input_tracers(self.trace, input_key_ids(keys), [av.id for av in avals])

    def lift(self, x) -> Tracer:
        return _lift(self.trace, x)

    def __enter__(self):
        # Tracing allocates millions of short acyclic objects (Tracers); the cyclic collector
        # would rescan them all repeatedly (quadratic in graph size), so it pauses while tracing.
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        _stack().append(self.trace)
        _core.tracing_enter()
        return self

    def __exit__(self, *exc):
        _core.tracing_exit()
        _stack().pop()
        if self._gc_was_enabled:
            gc.enable()
        return False


def flatten_outputs(t: tracing, out) -> tuple[list[Tracer], Any]:
    """Tracers of fn's result (a value or a nested tuple/list/dict of them) and its structure
    (compiled: _core.flatten_outputs); t is a tracing context (its trace and lift)."""
    return _core.flatten_outputs(t.trace, out, t.lift)


def build(fn: Callable, inputs: dict | None = None, **specs) -> Fragment:
    """Trace fn into a primal fragment.

    Args:
        fn: a Python function of traced values.  With keyword specs (string keys), fn is called
            with those keywords; with ``inputs={key: spec}`` (any hashable keys) positionally in
            dict order.
        inputs: {InputKey: spec} for keys that are not Python identifiers.
        **specs: name=tidu.spec(shape, dtype) per input.

    Returns:
        A Fragment whose ``outputs`` are the keys of fn's results (flattened).

    Raises:
        TypeError, ValueError: a shape or dtype rule failed (the message names the primitive).
    """
    if inputs is not None and specs:
        raise TypeError("build: give inputs either as inputs={...} or as keywords, not both")
    items = list((inputs or specs).items())
    builder = FragmentBuilder(prefix="p")
    with tracing(builder) as t:
        tracers = [t.input(k, as_aval(s)) for k, s in items]
        if inputs is None:
            out = fn(**{k: x for (k, _), x in zip(items, tracers)})
        else:
            out = fn(*tracers)
        flat, _ = flatten_outputs(t, out)
    return builder.build([x.key for x in flat])


def apply(op, *args) -> Tracer:
    """Apply a primitive instance (e.g. a user-defined one) to traced values or constants."""
    t = _trace_of(*args)
    return _emit(t, op, *[_lift(t, a) for a in args])


from tidu import indexing as _indexing  # noqa: E402 - it builds on the functions above

_core.tracer_setup(
    sys.modules[__name__], _aval_list,
    binary={_core.B_ADD: _binary_slot(P.Add, "Add"), _core.B_SUB: _binary_slot(P.Sub, "Sub"),
            _core.B_MUL: _binary_slot(P.Mul, "Mul"),
            _core.B_DIV: _binary_slot(P.Div, "Div", float_only=True),
            _core.B_POW: _binary_slot(P.Pow, "Pow", float_only=True),
            _core.B_MAX: _binary_slot(P.Max, "Max"), _core.B_MIN: _binary_slot(P.Min, "Min")},
    unary={_core.U_EXP: _unary_slot(P.Exp), _core.U_LOG: _unary_slot(P.Log),
           _core.U_SIN: _unary_slot(P.Sin), _core.U_COS: _unary_slot(P.Cos),
           _core.U_TANH: _unary_slot(P.Tanh), _core.U_SQRT: _unary_slot(P.Sqrt),
           _core.U_RSQRT: _unary_slot(P.Rsqrt), _core.U_EXPM1: _unary_slot(P.Expm1),
           _core.U_LOG1P: _unary_slot(P.Log1p), _core.U_NEG: _unary_slot(P.Neg, float_only=False)})

# The //, % and divmod of traced values (pyx/_tracer.pxi look them up here): numpy's sign rules
# on Rem, integers exact (tidu.numpy_math, which imports this module's helpers above).
from tidu.numpy_math import divmod as _divmod, floor_divide, remainder  # noqa: E402
