"""Bitwise primitives (jax.lax's and_, or_, xor, not_, shift_left, shift_right_arithmetic,
shift_right_logical): integers, and bools for and/or/xor/not. No derivative (integer and bool
values carry none); elementwise, so batched as themselves. And bitcast_convert_type's
BitcastConvertType (a copy of the bytes, its own opcode).

Shifts follow XLA (and so jax): a shift by a negative amount or by the bit width or more gives 0
(left, logical right) or the sign fill (arithmetic right), where C and numpy leave it undefined.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.graph import aval
from tidu.graph.dtypes import BOOL, INTS, REAL
from tidu.ops.core import Binary, Unary, check_dtype

__all__ = ["And", "BitcastConvertType", "Not", "Or", "ShiftLeft", "ShiftRightArithmetic",
           "ShiftRightLogical", "Xor"]

_LOGIC = INTS | {BOOL}


class _Bitwise(Binary):
    dtypes = _LOGIC
    dtypes_doc = "an integer or bool"
    differentiable = False


@register
@dataclass(frozen=True)
class And(_Bitwise):
    hlo = "stablehlo.and"

    def impl(self, x, y):
        return np.bitwise_and(x, y)


@register
@dataclass(frozen=True)
class Or(_Bitwise):
    hlo = "stablehlo.or"

    def impl(self, x, y):
        return np.bitwise_or(x, y)


@register
@dataclass(frozen=True)
class Xor(_Bitwise):
    hlo = "stablehlo.xor"

    def impl(self, x, y):
        return np.bitwise_xor(x, y)


@register
@dataclass(frozen=True)
class Not(Unary):
    hlo = "stablehlo.not"
    dtypes = _LOGIC
    dtypes_doc = "an integer or bool"
    differentiable = False

    def impl(self, x):
        return np.invert(x)


def _bits(x):
    return np.iinfo(x.dtype).bits


def _out_of_range(x, y):
    return (y < 0) | (y >= _bits(x))


class _Shift(Binary):
    dtypes = INTS
    dtypes_doc = "an integer"
    differentiable = False


@register
@dataclass(frozen=True)
class ShiftLeft(_Shift):
    hlo = "stablehlo.shift_left"

    def impl(self, x, y):
        x, y = np.asarray(x), np.asarray(y)
        u = x.view(np.dtype(f"uint{_bits(x)}"))
        s = np.where(_out_of_range(x, y), 0, y).astype(u.dtype)
        return np.where(_out_of_range(x, y), 0, (u << s).view(x.dtype)).astype(x.dtype)


@register
@dataclass(frozen=True)
class ShiftRightLogical(_Shift):
    hlo = "stablehlo.shift_right_logical"

    def impl(self, x, y):
        x, y = np.asarray(x), np.asarray(y)
        u = x.view(np.dtype(f"uint{_bits(x)}"))
        s = np.where(_out_of_range(x, y), 0, y).astype(u.dtype)
        return np.where(_out_of_range(x, y), 0, (u >> s).view(x.dtype)).astype(x.dtype)


@register
@dataclass(frozen=True)
class ShiftRightArithmetic(_Shift):
    hlo = "stablehlo.shift_right_arithmetic"

    def impl(self, x, y):
        x, y = np.asarray(x), np.asarray(y)
        s = x.view(np.dtype(f"int{_bits(x)}"))  # an unsigned x shifts its bits as signed (XLA)
        amount = np.where(_out_of_range(x, y), _bits(x) - 1, y).astype(s.dtype)
        return np.right_shift(s, amount).view(x.dtype).astype(x.dtype)


@register
@dataclass(frozen=True)
class BitcastConvertType(Unary):
    """jax.lax's bitcast_convert_type: the operand's bytes read as ``new_dtype``. Equal widths
    keep the shape; a narrower dtype adds a trailing axis of the width ratio; a wider one takes
    that many elements of the last axis. Integers and real floats (bool and complex only to
    themselves, which the front end does without this op). No derivative, as jax's (zero)."""

    new_dtype: str
    hlo = "stablehlo.bitcast_convert"
    dtypes = REAL
    dtypes_doc = "an integer or real floating"
    differentiable = False

    def __post_init__(self):
        dt = np.dtype(self.new_dtype)
        if dt not in REAL:
            raise TypeError(f"BitcastConvertType: new_dtype must be an integer or real floating "
                            f"dtype, got {dt}")
        object.__setattr__(self, "new_dtype", dt.name)

    def abstract_eval(self, x):
        check_dtype(self.name, x, self.dtypes, self.dtypes_doc)
        old, new = x.dtype.itemsize, np.dtype(self.new_dtype).itemsize
        if old == new:
            shape = x.shape
        elif old > new:
            shape = x.shape + (old // new,)
        else:
            last = x.shape[-1] if x.shape else 1
            if last * old != new:
                raise ValueError(f"BitcastConvertType: {x.dtype}{list(x.shape)} to "
                                 f"{self.new_dtype} needs a last axis of {new // old} "
                                 f"(the width ratio), got {last}")
            shape = x.shape[:-1]
        return aval(shape, self.new_dtype)

    def impl(self, x):
        x = np.ascontiguousarray(x)
        old, new = x.dtype.itemsize, np.dtype(self.new_dtype).itemsize
        shape = x.shape if old == new else x.shape + (old // new,) if old > new else x.shape[:-1]
        return x.view(self.new_dtype).reshape(shape)
