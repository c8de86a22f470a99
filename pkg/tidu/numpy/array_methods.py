"""Hands the Tracer its methods (jax's ``register_jax_array_methods``): the compiled tracer
(pyx/trace/tracer.pxi) runs the common arithmetic itself and calls the Python functions of this
table for the general paths (promotion, indexing, ``//`` and ``%``, reductions as methods), so the
trace layer never imports the numpy layer."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np

from tidu import ops as P
from tidu._native import _core
from tidu.graph import _aval_list
from tidu.numpy import (
    arrays,
    contractions,
    core,
    creation,
    dispatch,
    indexing,
    logical,
    reducers,
    selection,
    sets,
    shapes,
    sorting,
    statistics,
    take,
    ufuncs,
)
from tidu.trace.tracer import _binary_slot, _compare, _stack, _unary_slot

__all__ = ["HOOKS", "METHODS", "PROPERTIES", "register"]


def _flatten(x, order="C"):
    return shapes.ravel(x, order)


def _copy(x, order=None):
    return x  # traced values are immutable: a copy is the value itself


def _choose(x, choices, out=None, mode="raise"):
    return arrays.choose(x, choices, out, mode)


def _compress(x, condition, axis=None, *, size=None, fill_value=0, out=None):
    return arrays.compress(condition, x, axis, size=size, fill_value=fill_value, out=out)


# jax.Array's methods beyond the ones the compiled Tracer defines itself (sum, max, mean,
# reshape, transpose, astype, conj, item, real, imag, at): x.name(...) is fn(x, ...).
METHODS = {
    "all": reducers.all,
    "any": reducers.any,
    "argmax": sorting.argmax,
    "argmin": sorting.argmin,
    "argpartition": sets.argpartition,
    "choose": _choose,
    "clone": _copy,
    "compress": _compress,
    "argsort": sorting.argsort,
    "clip": ufuncs.clip,
    "conjugate": core.conj,
    "copy": _copy,
    "cumprod": sorting.cumprod,
    "cumsum": sorting.cumsum,
    "diagonal": creation.diagonal,
    "dot": core.dot,
    "flatten": _flatten,
    "min": reducers.min,
    "nonzero": selection.nonzero,
    "prod": reducers.prod,
    "ptp": statistics.ptp,
    "ravel": shapes.ravel,
    "repeat": shapes.repeat,
    "round": ufuncs.round,
    "searchsorted": statistics.searchsorted,
    "sort": sorting.sort,
    "squeeze": shapes.squeeze,
    "std": reducers.std,
    "swapaxes": shapes.swapaxes,
    "take": take.take,
    "trace": contractions.trace,
    "var": reducers.var,
}

# jax.Array's properties beyond shape, dtype, ndim, size, T, real, imag, at
PROPERTIES = {
    "mT": lambda x: shapes.swapaxes(x, -1, -2),
    "nbytes": lambda x: x.size * np.dtype(x.dtype).itemsize,
    "itemsize": lambda x: np.dtype(x.dtype).itemsize,
}


def method(x, name: str):
    """x.name for the Tracer's attributes defined here (the Tracer's __getattr__)."""
    fn = METHODS.get(name)
    if fn is not None:
        return functools.partial(fn, x)
    prop = PROPERTIES.get(name)
    if prop is not None:
        return prop(x)
    raise AttributeError(
        f"a traced value ({x.aval}) has no attribute {name!r}"
        + ("" if name.startswith("_") else
           f"; the jax.Array methods tidu has: {', '.join(sorted(_ALL_METHODS))}"))


_ALL_METHODS = set(METHODS) | set(PROPERTIES) | {
    "sum", "max", "mean", "reshape", "transpose", "astype", "conj", "item", "real", "imag",
    "at", "shape", "dtype", "ndim", "size", "T"}

# The functions the compiled Tracer looks up by name (``_py.<name>`` in pyx/trace/tracer.pxi).
HOOKS = SimpleNamespace(
    _at=indexing._at,
    _compare=_compare,
    _divmod=ufuncs.divmod,
    _getitem=indexing._getitem,
    _index_plans=indexing._index_plans,
    _stack=_stack,
    abs=core.abs,
    astype=core.astype,
    bitwise_and=logical.bitwise_and,
    bitwise_or=logical.bitwise_or,
    bitwise_xor=logical.bitwise_xor,
    concatenate_general=core.concatenate_general,
    concatenate_rule=core.concatenate_rule,
    conj=core.conj,
    dispatch=dispatch,
    floor_divide=ufuncs.floor_divide,
    imag=core.imag,
    invert=logical.invert,
    left_shift=logical.left_shift,
    matmul=core.matmul,
    matmul_rule=core.matmul_rule,
    max=reducers.max,
    mean=reducers.mean,
    method=method,
    power=core.power,
    real=core.real,
    remainder=ufuncs.remainder,
    reshape_general=core.reshape_general,
    reshape_ordered=core.reshape_ordered,
    reshape_rule=core.reshape_rule,
    right_shift=logical.right_shift,
    sum=reducers.sum,
    transpose=core.transpose,
)


def register() -> None:
    """Register the hooks and the compiled binary/unary slots' general paths with the tracer."""
    _core.tracer_setup(
        HOOKS,
        _aval_list,
        binary={
            _core.B_ADD: _binary_slot(P.Add, "Add"),
            _core.B_SUB: _binary_slot(P.Sub, "Sub"),
            _core.B_MUL: _binary_slot(P.Mul, "Mul"),
            _core.B_DIV: _binary_slot(P.Div, "Div", float_only=True),
            _core.B_POW: _binary_slot(P.Pow, "Pow", float_only=True),
            _core.B_MAX: _binary_slot(P.Max, "Max"),
            _core.B_MIN: _binary_slot(P.Min, "Min"),
        },
        unary={
            _core.U_EXP: _unary_slot(P.Exp),
            _core.U_LOG: _unary_slot(P.Log),
            _core.U_SIN: _unary_slot(P.Sin),
            _core.U_COS: _unary_slot(P.Cos),
            _core.U_TANH: _unary_slot(P.Tanh),
            _core.U_SQRT: _unary_slot(P.Sqrt),
            _core.U_RSQRT: _unary_slot(P.Rsqrt),
            _core.U_EXPM1: _unary_slot(P.Expm1),
            _core.U_LOG1P: _unary_slot(P.Log1p),
            _core.U_NEG: _unary_slot(P.Neg, float_only=False),
        },
    )


register()
