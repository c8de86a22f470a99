"""Bitwise primitives (jax.lax's and_, or_, xor, not_, shift_left, shift_right_arithmetic,
shift_right_logical): integers, and bools for and/or/xor/not. No derivative (integer and bool
values carry none); elementwise, so batched as themselves.

Shifts follow XLA (and so jax): a shift by a negative amount or by the bit width or more gives 0
(left, logical right) or the sign fill (arithmetic right), where C and numpy leave it undefined.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.graph.dtypes import BOOL, INTS
from tidu.ops.core import Binary, Unary

__all__ = ["And", "Not", "Or", "ShiftLeft", "ShiftRightArithmetic", "ShiftRightLogical", "Xor"]

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
