"""Logical functions and the bitwise operators on bool values, as ``jax.numpy`` has them:
``logical_and/or/xor/not``, ``bitwise_and/or/xor``, ``invert`` and the Tracer's ``&``, ``|``,
``^``, ``~`` (and bool ``+``/``*``, which numpy and jax read as or/and).

On bool operands these are selects and comparisons (no primitive of their own: ``a & b`` is
``select(a, b, False)``). Bitwise operations on integers, and shifts, need integer primitives
tidu does not have yet (issue #32): they raise a ``NotImplementedError`` that says so.
"""

from __future__ import annotations

import numpy as np

from tidu.graph.dtypes import BOOL
from tidu.numpy.core import where
from tidu.numpy.shapes import _numpy_outside
from tidu.trace.tracer import Tracer, _compare, _lift, _promote, _trace_of

__all__ = [
    "bitwise_and", "bitwise_invert", "bitwise_left_shift", "bitwise_not", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "invert", "left_shift", "logical_and", "logical_not",
    "logical_or", "logical_xor", "right_shift",
]


def _truth(t, x) -> Tracer:
    """x as bool: x != 0 for numbers (numpy's logical_* read any dtype that way)."""
    x = _lift(t, x)
    return x if x.aval.dtype == BOOL else _compare("NE", x, 0)


def _bools(name, x, y):
    t = _trace_of(x, y)
    return _promote(name, t, _truth(t, x), _truth(t, y))


@_numpy_outside(np.logical_and)
def logical_and(x1, x2) -> Tracer:
    a, b = _bools("logical_and", x1, x2)
    return where(a, b, False)


@_numpy_outside(np.logical_or)
def logical_or(x1, x2) -> Tracer:
    a, b = _bools("logical_or", x1, x2)
    return where(a, True, b)


@_numpy_outside(np.logical_xor)
def logical_xor(x1, x2) -> Tracer:
    a, b = _bools("logical_xor", x1, x2)
    return _compare("NE", a, b)


@_numpy_outside(np.logical_not)
def logical_not(x) -> Tracer:
    t = _trace_of(x)
    return where(_truth(t, x), False, True)


def _no_int(name, dt):
    raise NotImplementedError(
        f"{name} on {dt} values: tidu has no integer bitwise primitives yet (issue #32); "
        f"bool operands work (as logical_and/or/xor/not)")


def _bitwise(name, logical, x, y) -> Tracer:
    t = _trace_of(x, y)
    a, b = _promote(name, t, x, y)
    if a.aval.dtype != BOOL:
        _no_int(name, a.aval.dtype)
    return logical(a, b)


@_numpy_outside(np.bitwise_and)
def bitwise_and(x1, x2) -> Tracer:
    return _bitwise("bitwise_and", logical_and, x1, x2)


@_numpy_outside(np.bitwise_or)
def bitwise_or(x1, x2) -> Tracer:
    return _bitwise("bitwise_or", logical_or, x1, x2)


@_numpy_outside(np.bitwise_xor)
def bitwise_xor(x1, x2) -> Tracer:
    return _bitwise("bitwise_xor", logical_xor, x1, x2)


@_numpy_outside(np.invert)
def invert(x) -> Tracer:
    t = _trace_of(x)
    x = _lift(t, x)
    if x.aval.dtype != BOOL:
        _no_int("invert (~)", x.aval.dtype)
    return logical_not(x)


@_numpy_outside(np.left_shift)
def left_shift(x1, x2) -> Tracer:
    t = _trace_of(x1, x2)
    _no_int("left_shift (<<)", _promote("left_shift", t, x1, x2)[0].aval.dtype)


@_numpy_outside(np.right_shift)
def right_shift(x1, x2) -> Tracer:
    t = _trace_of(x1, x2)
    _no_int("right_shift (>>)", _promote("right_shift", t, x1, x2)[0].aval.dtype)


bitwise_not = bitwise_invert = invert
bitwise_left_shift, bitwise_right_shift = left_shift, right_shift
