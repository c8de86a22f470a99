"""Hands the Tracer its methods (jax's ``register_jax_array_methods``): the compiled tracer
(pyx/trace/tracer.pxi) runs the common arithmetic itself and calls the Python functions of this
table for the general paths (promotion, indexing, ``//`` and ``%``, reductions as methods), so the
trace layer never imports the numpy layer."""

from __future__ import annotations

from types import SimpleNamespace

from tidu import ops as P
from tidu._native import _core
from tidu.graph import _aval_list
from tidu.numpy import core, dispatch, indexing, ufuncs
from tidu.trace.tracer import _binary_slot, _compare, _stack, _unary_slot

__all__ = ["HOOKS", "register"]

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
    concatenate_general=core.concatenate_general,
    concatenate_rule=core.concatenate_rule,
    conj=core.conj,
    dispatch=dispatch,
    floor_divide=ufuncs.floor_divide,
    imag=core.imag,
    matmul=core.matmul,
    matmul_rule=core.matmul_rule,
    max=core.max,
    mean=core.mean,
    power=core.power,
    real=core.real,
    remainder=ufuncs.remainder,
    reshape_general=core.reshape_general,
    reshape_rule=core.reshape_rule,
    sum=core.sum,
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
