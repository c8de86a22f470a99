"""numpy functions on traced values: ``Tracer.__array_ufunc__`` and ``__array_function__``.

Table-driven by name: ``np.sin(x)`` on a traced x calls ``tidu.sin``, ``np.linalg.cholesky``
``tidu.linalg.cholesky``, whatever the name is in tidu at the time of the call (so a function
added to tidu is dispatched to with no change here).  A numpy function tidu does not have, a
ufunc method it has no counterpart for, or an argument it cannot honour (``out=``, ``where=``,
a ``dtype=`` the tidu function does not take) raises one ``NotImplementedError`` naming the numpy
function.
"""

from __future__ import annotations

import inspect
import operator
from types import SimpleNamespace

import numpy as np

from tidu.numpy import (
    contractions,
    conv,
    core,
    creation,
    einsum,
    linalg,
    reductions,
    shapes,
    sorting,
    take,
    ufuncs,
)
from tidu.trace.tracer import Tracer

__all__ = ["array_ufunc", "array_function", "register"]

# numpy's canonical ufunc names that differ from the name tidu (like jax.numpy) exports.
_UFUNC_ALIASES = {
    "absolute": "abs", "true_divide": "divide", "conjugate": "conj"
}

# Ufuncs that are Python operators on traced values: used where tidu has no function of the name.
_OPERATORS = {
    "add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
    "divide": operator.truediv, "true_divide": operator.truediv, "power": operator.pow,
    "negative": operator.neg, "positive": operator.pos, "matmul": operator.matmul,
    "floor_divide": operator.floordiv, "remainder": operator.mod, "mod": operator.mod,
    "less": operator.lt, "less_equal": operator.le, "greater": operator.gt,
    "greater_equal": operator.ge, "equal": operator.eq, "not_equal": operator.ne,
}

# ufunc.reduce / ufunc.accumulate as tidu reductions (jax.numpy's names).
_REDUCE = {"add": "sum", "maximum": "max", "minimum": "min", "multiply": "prod",
           "logical_and": "all", "logical_or": "any"}
_ACCUMULATE = {"add": "cumsum", "multiply": "cumprod", "maximum": "cummax",
               "minimum": "cummin"}

# numpy modules whose functions dispatch, and the tidu namespace searched for each.
_NAMESPACES = {"numpy": "", "numpy.linalg": "linalg", "numpy.fft": "fft"}

# The numpy names of tidu's face, by module in the order the face takes them (a name defined
# twice is the first module's): numpy's functions dispatch to these, never to the transforms.
_TOP = SimpleNamespace(**{n: getattr(m, n) for m in reversed(
    (creation, core, reductions, ufuncs, sorting, einsum, contractions, shapes, take, conv))
    for n in m.__all__})
_SUBS = {"linalg": linalg}

# The rest of the numpy layer's names, after _TOP (imported at the first dispatch: several of these
# modules sit above the tracer's method table that imports this one). Before stop 51 only _TOP's
# modules were searched, so np.median, np.logical_and, np.unique, ... on a traced value raised
# "tidu has no function of that name" though tidu had it.
_MORE_MODULES = ("aliases", "reducers", "statistics", "selection", "sets", "logical", "numeric",
                 "construct", "arrays", "calculus", "polynomials", "windows", "io", "constants",
                 "segment")
_more: dict | None = None
# Names served by layers above this one (tidu.api's apply_along_axis, piecewise, ...): register().
_REGISTERED: dict = {}


def register(name: str, fn) -> None:
    """Have numpy's function `name` on traced values call fn (for numpy names tidu defines above
    the numpy layer)."""
    _REGISTERED[name] = fn


def _more_names() -> dict:
    global _more
    if _more is None:
        import importlib  # noqa: PLC0415  (the modules import at the first dispatch, see above)

        found: dict = {}
        for m in _MORE_MODULES:
            mod = importlib.import_module(f"tidu.numpy.{m}")
            for n in getattr(mod, "__all__", ()):
                fn = getattr(mod, n, None)
                # numpy's own functions re-exported (io's save): calling them would dispatch here
                # again
                if str(getattr(fn, "__module__", "")).startswith("tidu."):
                    found.setdefault(n, fn)
        _more = found
    return _more


def _tidu_namespace(sub: str):
    return _SUBS.get(sub) if sub else _TOP


def _find(sub: str, name: str):
    ns = _tidu_namespace(sub)
    fn = getattr(ns, name, None) if ns is not None else None
    if fn is None and not sub:
        fn = _more_names().get(name) or _REGISTERED.get(name)
    return fn if callable(fn) and not isinstance(fn, type) else None


def _unsupported(what: str, why: str = ""):
    return NotImplementedError(
        f"{what} is not supported on traced values (inside tidu.jit, grad, ...){why}; use a "
        f"tidu function instead (tidu mirrors jax.numpy names), or compute it outside the "
        f"traced function")


def _accepts(fn) -> set[str] | None:
    """fn's keyword parameter names, or None when it takes **kwargs or has no signature."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _is_default(name: str, v) -> bool:
    """numpy's value meaning 'not given' for an argument tidu does not take."""
    if v is None or v is np._NoValue:
        return True
    if name == "where" and v is True:
        return True
    if name in ("casting",) and v == "same_kind":
        return True
    if name == "order" and v in ("K", "C"):
        return True
    if name == "subok" and v is True:
        return True
    return False


def _call(fn, what: str, args, kwargs):
    """fn(*args, **kwargs) with numpy's 'not given' keywords that fn lacks dropped, and any other
    keyword fn lacks an error naming the numpy function and the argument."""
    accepts = _accepts(fn)
    if accepts is not None:
        kept = {}
        for k, v in kwargs.items():
            if k in accepts:
                kept[k] = v
            elif not _is_default(k, v):
                raise _unsupported(f"{what}(..., {k}=...)",
                                   f": the tidu function has no '{k}' argument")
        kwargs = kept
    return fn(*args, **kwargs)


# ---- __array_ufunc__ ----

def array_ufunc(ufunc, method: str, inputs, kwargs):
    """Tracer.__array_ufunc__: a numpy ufunc called on traced values."""
    name = ufunc.__name__
    what = f"numpy.{name}" if method == "__call__" else f"numpy.{name}.{method}"
    out = kwargs.pop("out", None)
    if out is not None and out != ():
        raise _unsupported(f"{what}(..., out=...)",
                           ": traced values are immutable (return the result instead)")
    if method == "__call__":
        fn = _find("", _UFUNC_ALIASES.get(name, name))
        if fn is None and name in _OPERATORS and not kwargs:
            return _operator(_OPERATORS[name], inputs)
        if fn is None:
            raise _unsupported(what, ": tidu has no function of that name")
        dtype = kwargs.pop("dtype", None)
        res = _call(fn, what, inputs, kwargs)
        if dtype is not None:
            res = core.astype(res, dtype)
        return res
    table = {"reduce": _REDUCE, "accumulate": _ACCUMULATE}.get(method)
    target = table.get(name) if table is not None else None
    fn = _find("", target) if target is not None else None
    if fn is None:
        raise _unsupported(what)
    if method == "reduce" and "axis" not in kwargs:  # numpy's default axis of a reduce is 0
        kwargs["axis"] = 0 if len(inputs) < 2 else inputs[1]
        inputs = inputs[:1]
    return _call(fn, what, inputs, kwargs)


def _operator(op, inputs):
    """A ufunc that is a Python operator: the traced operand's own method, so numpy arrays on
    the other side are not sent back through numpy (which would call us again)."""
    if len(inputs) == 1:
        return op(inputs[0])
    a, b = inputs
    if isinstance(a, Tracer) or not isinstance(b, Tracer):
        return op(a, b)
    # a is a numpy array or scalar: the reflected method of b
    names = {operator.add: "__radd__", operator.sub: "__rsub__", operator.mul: "__rmul__",
             operator.truediv: "__rtruediv__", operator.pow: "__rpow__",
             operator.matmul: "__rmatmul__", operator.floordiv: "__rfloordiv__",
             operator.mod: "__rmod__", operator.lt: "__gt__", operator.le: "__ge__",
             operator.gt: "__lt__", operator.ge: "__le__", operator.eq: "__eq__",
             operator.ne: "__ne__"}
    meth = getattr(b, names[op], None)
    res = meth(a) if meth is not None else NotImplemented
    if res is NotImplemented:
        raise _unsupported(f"numpy.{getattr(op, '__name__', op)}")
    return res


# ---- __array_function__ ----

def array_function(func, types, args, kwargs):
    """Tracer.__array_function__: a numpy function called with traced values among its
    arguments."""
    module = getattr(func, "__module__", "") or ""
    name = getattr(func, "__name__", repr(func))
    what = f"{module}.{name}" if module else name
    sub = _NAMESPACES.get(module)
    fn = _find(sub, name) if sub is not None else None
    if fn is None:
        raise _unsupported(what, ": tidu has no function of that name")
    return _call(fn, what, args, dict(kwargs))
