"""Logical and bitwise functions as ``jax.numpy`` has them: ``logical_and/or/xor/not``,
``bitwise_and/or/xor``, ``invert``, ``left_shift``, ``right_shift`` (and the Tracer's ``&``,
``|``, ``^``, ``~``, ``<<``, ``>>``), on the bitwise primitives of ``tidu.ops.bitwise``.

Operands are promoted as numpy promotes them; ``right_shift`` of signed integers is arithmetic,
as numpy's and jax's. Shifts by a negative amount or by the bit width or more follow jax (0, or
the sign for an arithmetic right shift), where numpy's result is platform-defined.
"""

from __future__ import annotations

import numpy as np

from tidu import ops as P
from tidu.graph.dtypes import BOOL, INTS, kind_of
from tidu.numpy.shapes import _numpy_outside
from tidu.trace.tracer import Tracer, _compare, _emit, _lift, _promote, _trace_of

__all__ = [
    "bitwise_and", "bitwise_invert", "bitwise_left_shift", "bitwise_not", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "invert", "left_shift", "logical_and", "logical_not",
    "logical_or", "logical_xor", "right_shift",
]

_LOGIC = INTS | {BOOL}


def _truth(t, x) -> Tracer:
    """x as bool: x != 0 for numbers (numpy's logical_* read any dtype that way)."""
    x = _lift(t, x)
    return x if x.aval.dtype == BOOL else _compare("NE", x, 0)


def _logical(name, op, x, y) -> Tracer:
    t = _trace_of(x, y)
    a, b = _promote(name, t, _truth(t, x), _truth(t, y))
    return _emit(t, op, a, b)


@_numpy_outside(np.logical_and)
def logical_and(x1, x2) -> Tracer:
    return _logical("logical_and", P.And(), x1, x2)


@_numpy_outside(np.logical_or)
def logical_or(x1, x2) -> Tracer:
    return _logical("logical_or", P.Or(), x1, x2)


@_numpy_outside(np.logical_xor)
def logical_xor(x1, x2) -> Tracer:
    return _logical("logical_xor", P.Xor(), x1, x2)


@_numpy_outside(np.logical_not)
def logical_not(x) -> Tracer:
    t = _trace_of(x)
    return _emit(t, P.Not(), _truth(t, x))


def _operands(name, x, y, shift=False):
    t = _trace_of(x, y)
    a, b = _promote(name, t, x, y)
    dt = a.aval.dtype
    if shift and dt == BOOL:  # numpy shifts bools as int64
        a, b = _lift(t, a, np.int64), _lift(t, b, np.int64)
    elif dt not in _LOGIC:
        raise TypeError(f"{name}: operands must be integers or bools, got {dt} (numpy and jax "
                        f"refuse {kind_of(dt) == 'f' and 'floats' or dt} here too)")
    return t, a, b


@_numpy_outside(np.bitwise_and)
def bitwise_and(x1, x2) -> Tracer:
    t, a, b = _operands("bitwise_and (&)", x1, x2)
    return _emit(t, P.And(), a, b)


@_numpy_outside(np.bitwise_or)
def bitwise_or(x1, x2) -> Tracer:
    t, a, b = _operands("bitwise_or (|)", x1, x2)
    return _emit(t, P.Or(), a, b)


@_numpy_outside(np.bitwise_xor)
def bitwise_xor(x1, x2) -> Tracer:
    t, a, b = _operands("bitwise_xor (^)", x1, x2)
    return _emit(t, P.Xor(), a, b)


@_numpy_outside(np.invert)
def invert(x) -> Tracer:
    t = _trace_of(x)
    x = _lift(t, x)
    if x.aval.dtype not in _LOGIC:
        raise TypeError(f"invert (~): operand must be an integer or bool, got {x.aval.dtype}")
    return _emit(t, P.Not(), x)


@_numpy_outside(np.left_shift)
def left_shift(x1, x2) -> Tracer:
    t, a, b = _operands("left_shift (<<)", x1, x2, shift=True)
    return _emit(t, P.ShiftLeft(), a, b)


@_numpy_outside(np.right_shift)
def right_shift(x1, x2) -> Tracer:
    t, a, b = _operands("right_shift (>>)", x1, x2, shift=True)
    if kind_of(a.aval.dtype) == "u":  # numpy's and jax's >> of unsigned integers is logical
        return _emit(t, P.ShiftRightLogical(), a, b)
    return _emit(t, P.ShiftRightArithmetic(), a, b)


bitwise_not = bitwise_invert = invert
bitwise_left_shift, bitwise_right_shift = left_shift, right_shift
