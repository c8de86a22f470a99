"""``td.debug.print``, ``td.debug.callback`` and ``td.pure_callback``: Python functions called at
evaluation time with the runtime values, inside jit, loop bodies, branches, vmap and under grad
(jax's ``jax.debug`` and ``jax.pure_callback``).

Each call site traces to one ``HostCallback`` op (tidu/ops/callback.py), which the interpreter
runs as one instruction calling back into Python.  Debug callbacks are effects: they are kept
whatever the outputs are (tidu/trace/effects.py), run in program order within a function, pass
no tangent, and under vmap are called once per batch element (jax unrolls them the same way).
A pure callback is a value: dropped when unused, not differentiable (wrap it in
``td.custom_jvp`` / ``td.custom_vjp``), batched by its ``vmap_method``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import numpy as np

from tidu.api.tree_util import tree_flatten, tree_unflatten
from tidu.graph import ValKey, _aval_list
from tidu.ops.callback import TOKEN, VMAP_METHODS, HostCallback, HostFunction
from tidu.trace.build import as_aval
from tidu.trace.effects import add_token, tokens
from tidu.trace.tracer import Tracer, _home, _lift, _stack, _trace_of

__all__ = ["callback", "print", "pure_callback"]


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _trace_for(leaves):
    """The trace the callback goes into: that of its traced arguments (the innermost body
    around them), or the current one; None outside any trace (the call runs at once)."""
    if any(isinstance(x, Tracer) for x in leaves):
        return _trace_of(*[x for x in leaves if isinstance(x, Tracer)])
    s = _stack()
    return _home(s[-1]) if s else None


def callback(callback: Callable[..., Any], *args, ordered: bool = False, **kwargs) -> None:
    """Call ``callback(*args, **kwargs)`` with the runtime values of the arrays in args and
    kwargs (pytrees of them), at evaluation time; returns None.

    Args:
        callback: a Python function; its result is ignored.
        *args: pytrees of arrays (traced or not) passed to the callback as numpy arrays.
        **kwargs: the same, passed by keyword.
        ordered: accepted for jax's signature: the callbacks of one function always run in
            program order here.

    Inside ``td.vmap`` the callback is called once per batch element; under ``td.grad`` it
    sees the primal values and contributes no derivative; a program holding one cannot be
    saved to a ``.tidu`` file.
    """
    if not callable(callback):
        raise TypeError(f"td.debug.callback: expected a callable, got {type(callback).__name__}")
    leaves, tree = tree_flatten((args, kwargs))
    t = _trace_for(leaves)
    if t is None:  # nothing traced: call now, as jax does outside jit
        a, k = tree_unflatten(tree, [np.asarray(x) for x in leaves])
        callback(*a, **k)
        return None
    xs = [_lift(t, x) for x in leaves]
    t = _home(_trace_of(*xs)) if xs else t
    xs = [_lift(t, x) for x in xs]

    def unflatten(arrays):
        a, k = tree_unflatten(tree, arrays)
        return (_Call(a, k),)

    fn = HostFunction(_name(callback), lambda c: callback(*c.args, **c.kwargs), unflatten)
    op = HostCallback(fn, (TOKEN,), len(xs), True)
    toks = tokens(t)
    locals_ = t.builder.add_op(op, [ValKey(x._v) for x in xs + toks])
    (token,) = _tracers(t, locals_)
    add_token(t, token, replace=True)
    return None


class _Call:
    __slots__ = ("args", "kwargs")

    def __init__(self, args, kwargs):
        self.args, self.kwargs = args, kwargs


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:  # noqa: A001 - jax's name
    """Print ``fmt.format(*args, **kwargs)`` with the runtime values of the arrays in args and
    kwargs, at evaluation time (``jax.debug.print``): inside jit, loop bodies, branches, vmap
    (one line per batch element) and under grad (the primal values).

    Args:
        fmt: a ``str.format`` string.
        *args: pytrees of arrays, formatted as numpy arrays.
        **kwargs: the same, for named fields.
        ordered: accepted for jax's signature (a function's prints always keep their order).
    """
    if not isinstance(fmt, str):
        raise TypeError(f"td.debug.print: fmt must be a str, got {type(fmt).__name__}")

    def show(*a, **k):
        builtins.print(fmt.format(*a, **k))

    show.__qualname__ = f"debug.print({fmt!r})"
    callback(show, *args, ordered=ordered, **kwargs)


def _is_spec(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args,
                  vmap_method: str | None = None, **kwargs) -> Any:
    """``callback(*args, **kwargs)`` computed by Python at evaluation time, as a value of the
    program (``jax.pure_callback``).

    Args:
        callback: a Python function of numpy arrays returning arrays of the declared shapes and
            dtypes (a pytree of them).
        result_shape_dtypes: a pytree of objects with ``.shape`` and ``.dtype``
            (``td.spec(shape, dtype)``, ``jax.ShapeDtypeStruct``, arrays).
        *args: pytrees of arrays passed to the callback.
        **kwargs: the same, passed by keyword.
        vmap_method: how ``td.vmap`` calls it: ``"sequential"`` (once per batch element),
            ``"expand_dims"`` (once, unbatched arguments given a leading axis of size 1),
            ``"broadcast_all"`` (once, every argument broadcast to the batch); None refuses
            vmap.

    Returns:
        The pytree of result_shape_dtypes' structure, of the callback's values.

    Raises:
        RuntimeError (at evaluation): the callback returned other shapes or dtypes than
        declared.  ValueError (at tracing): differentiated (wrap it in ``td.custom_jvp`` or
        ``td.custom_vjp``).  NotImplementedError: vmapped without ``vmap_method``.
    """
    if not callable(callback):
        raise TypeError(f"td.pure_callback: expected a callable, got {type(callback).__name__}")
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        raise ValueError(f"td.pure_callback: vmap_method must be one of "
                         f"{', '.join(map(repr, VMAP_METHODS))} or None, got {vmap_method!r}")
    specs, out_tree = tree_flatten(result_shape_dtypes, is_leaf=_is_spec)
    try:
        out_avals = [as_aval(s) for s in specs]
    except TypeError:
        raise TypeError(f"td.pure_callback: result_shape_dtypes must be a pytree of objects with "
                        f".shape and .dtype (td.spec, jax.ShapeDtypeStruct), got "
                        f"{result_shape_dtypes!r}") from None
    leaves, tree = tree_flatten((args, kwargs))

    def unflatten(arrays):
        return (_Call(*tree_unflatten(tree, arrays)),)

    fn = HostFunction(_name(callback), lambda c: callback(*c.args, **c.kwargs), unflatten,
                      lambda res: tree_flatten(res)[0], out_avals)
    t = _trace_for(leaves)
    if t is None:  # nothing traced: call now
        return tree_unflatten(out_tree, fn.call([np.asarray(x) for x in leaves]))
    xs = [_lift(t, x) for x in leaves]
    if xs:
        t = _home(_trace_of(*xs))
        xs = [_lift(t, x) for x in xs]
    op = HostCallback(fn, tuple(out_avals), len(xs), False, vmap_method)
    if not out_avals:
        return tree_unflatten(out_tree, [])
    outs = _tracers(t, t.builder.add_op(op, [ValKey(x._v) for x in xs]))
    return tree_unflatten(out_tree, outs)


def _tracers(t, locals_) -> list[Tracer]:
    return [Tracer(t, t.store.global_of(v), _aval_list[ValKey(t.store.global_of(v)).aval.id])
            for v in locals_]
