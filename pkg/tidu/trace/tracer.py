"""Python -> fragment: the trace stack, emitting primitives, lifting constants, numpy's type
promotion and broadcasting made explicit (``BroadcastInDim``, ``Convert``).

One tracing session (the builder of the fragment being traced) and its values are extension
types in ``_core`` (pyx/trace/tracer.pxi): the common arithmetic on traced values runs there, in C,
and comes back here only for the general paths (registered by ``tidu.numpy.array_methods``).
The numpy names on traced values are the layer above (``tidu.numpy``)."""

from __future__ import annotations

import builtins
import functools
import threading
from typing import Any

import numpy as np

from tidu import ops as P
from tidu._native import _core
from tidu.graph import _aval_list, prim_id, shape_rule
from tidu.graph.dtypes import BOOL, INTS, kind_of, lattice_result_type, to_inexact_dtype
from tidu.graph.memory import register_cache

__all__ = ["Tracer", "as_inexact", "keeps_weak", "result_type", "weak_result_type"]

_PY_SCALARS = (bool, int, float, complex)


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

def _home(t: _Trace) -> _Trace:
    """The trace an op on values of t goes into: t, or the control-flow body being traced
    inside t (directly or through bodies only).  An op in a branch or loop body belongs to that
    body even when it reads only closed-over values of the traces around it (as in jax): a
    branch's ``sqrt(v)`` then runs, and is differentiated, only where the branch is taken."""
    s = _stack()
    if not s or s[-1] is t:
        return t
    top = u = s[-1]
    while True:
        outer = getattr(u.builder, "outer", None)  # only a body's builder has one
        if outer is None or getattr(u.builder, "capture", None) is None:
            return t
        if outer is t:
            return top
        u = outer


def _emit(t: _Trace, op, *args: "Tracer") -> "Tracer":
    home = _home(t)
    if home is not t:
        t, args = home, tuple(_lift(home, a) for a in args)
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
register_cache("tracer_ops", _OPS)
register_cache("tracer_singletons", _SINGLETONS, holds_ids=True)


def _singleton(cls) -> tuple:
    hit = _SINGLETONS.get(cls)
    if hit is None:
        op = cls()
        hit = _SINGLETONS[cls] = (op, prim_id(op))
    return hit


def _const(t: _Trace, value, dtype) -> "Tracer":
    t = _home(t)
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
            return _home(t)
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
    y = cap(x)
    if x.weak_type and not y.weak_type:  # a closed-over weak value is weak in the body too
        y = Tracer(y._t, y._v, y.aval, True)
    return y


def _dtype_of(x) -> Any:
    if isinstance(x, Tracer):
        return x.aval.dtype
    if isinstance(x, _PY_SCALARS):
        return x  # weak: numpy 2's result_type lets the other operand decide
    return np.asarray(x).dtype


_STRONG = {}  # np.dtype -> (dtype, False)
_PY_WEAK = {bool: (BOOL, False), int: (np.dtype("int64"), True),
            float: (np.dtype("float64"), True), complex: (np.dtype("complex128"), True)}


def _typed(x) -> tuple:
    """(dtype, weakly typed) of an operand: a Tracer's, a Python scalar's (bool strong; int,
    float, complex weak, as jax's), a dtype's or an array's (strong)."""
    if isinstance(x, Tracer):
        return (x.aval.dtype, True) if x.weak_type else _strong(x.aval.dtype)
    w = _PY_WEAK.get(type(x))
    if w is not None:
        return w
    if isinstance(x, _PY_SCALARS):  # subclasses: numpy's float64 and bool_ types are strong
        if isinstance(x, (np.generic,)):
            return _strong(x.dtype)
        return _PY_WEAK[bool if isinstance(x, bool) else int if isinstance(x, int)
                        else float if isinstance(x, float) else complex]
    if isinstance(x, np.dtype):
        return _strong(x)
    if isinstance(x, type) and issubclass(x, np.generic):
        return _strong(np.dtype(x))
    if isinstance(x, str):
        return _strong(np.dtype(x))
    dt = getattr(x, "dtype", None)
    return _strong(np.dtype(dt) if dt is not None else np.asarray(x).dtype)


def _strong(dt) -> tuple:
    hit = _STRONG.get(dt)
    if hit is None:
        hit = _STRONG[dt] = (np.dtype(dt), False)
    return hit


def weak_result_type(*xs) -> tuple[np.dtype, bool]:
    """(dtype, weakly typed) of combining xs: values (Tracers, Python scalars, arrays) or dtypes,
    by jax's promotion lattice (tidu.graph.dtypes.lattice_result_type)."""
    return lattice_result_type(*[_typed(x) for x in xs])


def result_type(*xs) -> np.dtype:
    """jnp.result_type under x64: the dtype of combining xs (values or dtypes); Python int,
    float and complex are weakly typed (the other operands' dtype wins where it can hold them),
    as are Tracers computed from them."""
    return lattice_result_type(*[_typed(x) for x in xs])[0]


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
    """Lift, type-promote (jax's lattice, weak types included) and broadcast operands.
    min_dtype: not None for a float function: bool and integer results of the promotion are
    computed in to_inexact_dtype's float (jax's _promote_dtypes_inexact: float32 for up to 32
    bits, float64 for 64-bit integers and weak Python ints)."""
    return _promote_weak(name, t, *xs, min_dtype=min_dtype)[0]


def _promote_weak(name: str, t: _Trace, *xs, min_dtype=None) -> tuple[list["Tracer"], bool]:
    """_promote, and whether the result is weakly typed (every operand was)."""
    try:
        dt, weak = weak_result_type(*xs)
        if min_dtype is not None and kind_of(dt) not in "fc":
            dt = to_inexact_dtype(dt)  # jax's _promote_dtypes_inexact
    except TypeError as e:
        dts = [_dtype_of(x) for x in xs]
        raise TypeError(f"{name}: cannot promote {dts}: {e}") from None
    lifted = [_lift(t, x, dt) for x in xs]
    shapes = [x.aval.shape for x in lifted]
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"{name}: shapes {' vs '.join(map(str, shapes))} do not broadcast") \
            from None
    return [_broadcast(t, x, shape) for x in lifted], weak


def _weak(x: "Tracer", weak: bool) -> "Tracer":
    if weak:
        x.weak_type = True
    return x


def _binary(cls, name: str, x, y, float_only=False) -> "Tracer":
    """x op y by the general path: promotion and broadcasting made explicit."""
    t = _trace_of(x, y)
    (a, b), weak = _promote_weak(name, t, x, y, min_dtype=True if float_only else None)
    if a.aval.dtype == BOOL and cls in _BOOL_AS:  # numpy's and jax's bool + (or) and * (and)
        return _emit(t, _BOOL_AS[cls](), a, b)
    return _weak(_emit(t, cls(), a, b), weak)


_NONFLOAT = INTS | {BOOL}
# bool operands: x + y and max(x, y) are x or y, x * y and min(x, y) x and y
_BOOL_AS = {P.Add: P.Or, P.Max: P.Or, P.Mul: P.And, P.Min: P.And}


def as_inexact(x, t: _Trace | None = None) -> "Tracer":
    """x traced, in jax's ``to_inexact_dtype`` of its dtype: bool and integers of up to 32 bits
    as float32, 64-bit integers (and Python ints) as float64, floats and complexes unchanged;
    weakly typed where x is.  The one place the numpy layer promotes a value to inexact."""
    if t is None:
        t = _trace_of(x)
    weak = _typed(x)[1]
    x = _lift(t, x)
    dt = x.aval.dtype
    want = to_inexact_dtype(dt)
    if want is not dt and want != dt:
        x = _weak(_emit(t, _op(P.Convert, want.name), x), weak)
    return x


def _is_weak(x) -> bool:
    """x is weakly typed: a weak Tracer, or a Python int, float or complex (not bool)."""
    if isinstance(x, Tracer):
        return x.weak_type
    return type(x) in (int, float, complex)


def _as_weak(out):
    """out (a Tracer, or a tuple/list of them) weakly typed: fresh Tracers of the same values
    (a Tracer is never mutated: the function may have returned one of its operands)."""
    if isinstance(out, Tracer):
        return out if out.weak_type or out.aval.dtype == BOOL else \
            Tracer(out._t, out._v, out.aval, True)
    if isinstance(out, (tuple, list)):
        return type(out)(_as_weak(o) for o in out)
    return out


def keeps_weak(*argnums: int, seq: bool = False, dtype_arg: str | None = "dtype",
               dtype_pos: int | None = None):
    """Decorator for structural functions and contractions: the result is weakly typed where
    every operand at positions argnums is (jax's standard weak-type rule: ``stack`` of Python
    scalars, ``transpose``/``broadcast_to``/``matmul`` of weak values stay weak).  seq: the
    operand at argnums[0] is a sequence of operands (stack, concatenate).  A ``dtype`` argument
    other than None (keyword dtype_arg, or positional at dtype_pos) makes the result strong,
    as in jax."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            out = fn(*args, **kwargs)
            if dtype_arg is not None and kwargs.get(dtype_arg) is not None or \
                    dtype_pos is not None and len(args) > dtype_pos and args[dtype_pos] is not None:
                return out
            ops = []
            for i in argnums:
                if i < len(args):
                    a = args[i]
                    if seq and isinstance(a, (tuple, list)):
                        ops.extend(a)
                    else:
                        ops.append(a)
            if ops and builtins.all(_is_weak(a) for a in ops):
                return _as_weak(out)
            return out

        return wrapped

    return deco


def _unary_float(cls, x) -> "Tracer":
    """Transcendental functions: integer and bool inputs are computed in to_inexact_dtype's
    float (jax's rule: float32 up to 32 bits, float64 for 64-bit integers)."""
    t = _trace_of(x)
    weak = _typed(x)[1]
    x = as_inexact(x, t)
    return _weak(_emit(t, cls(), x), weak)


# The compiled fast path (pyx/trace/tracer.pxi) takes Tracer op Tracer (one trace, one abstract
# value), Tracer op Python float/int (a float/complex Tracer of any shape) and unary ops of a
# Tracer.  It emits the nodes the general paths above would emit for those operands, with
# shape/dtype rules it asks for here once per (op, abstract value) or (op, abstract value,
# scalar) and memoises by id:
#   rule(av) -> (prim id, output aval) or None (the general path for this aval),
#   scalar_rule(av, s) -> (Constant prim id, Constant aval id, BroadcastInDim prim id, its aval id
#   (None, None at rank 0), prim id, output aval): numpy 2's weak scalar promotion keeps the
#   tracer's dtype, so the general path emits Constant(s as that dtype), broadcasts it to the
#   tracer's shape, and the op.

def _binary_slot(cls, name: str, float_only=False):
    def slow(x, y):
        return _binary(cls, name, x, y, float_only)

    def rule(av):
        if float_only and av.dtype in _NONFLOAT or av.dtype == BOOL and cls in _BOOL_AS:
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
        return _weak(_emit(x._t, cls(), x), x.weak_type)

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


