"""Elementwise primitives: arithmetic, transcendental functions, comparisons.

Operands share shape and dtype (the front end inserts BroadcastInDim and Convert first).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu.graph import aval
from tidu.ops._base import (ALL, BOOL, COMPLEXES, INEXACT, NUMERIC, REAL, check_dtype, check_same,
                            real_dtype)
from tidu.rules import PrimitiveOp, register


class Unary(PrimitiveOp):
    """Elementwise f(x) with the output dtype of x; `dtypes` lists what x may be."""

    dtypes = INEXACT
    dtypes_doc = "floating or complex"

    def abstract_eval(self, x):
        check_dtype(self.name, x, self.dtypes, self.dtypes_doc)
        return x


class Binary(PrimitiveOp):
    """Elementwise f(x, y) over operands of equal shape and dtype."""

    dtypes = NUMERIC
    dtypes_doc = "numeric"

    def abstract_eval(self, x, y):
        a = check_same(self.name, (x, y))
        check_dtype(self.name, a, self.dtypes, self.dtypes_doc)
        return a


# ---- arithmetic (linear in each operand, or bilinear) ----

@register
@dataclass(frozen=True)
class Add(Binary):
    linear = True

    def impl(self, x, y):
        return x + y


@register
@dataclass(frozen=True)
class Sub(Binary):
    linear = True

    def impl(self, x, y):
        return x - y


@register
@dataclass(frozen=True)
class Mul(Binary):
    def impl(self, x, y):
        return x * y


@register
@dataclass(frozen=True)
class Neg(Unary):
    linear = True
    dtypes = NUMERIC
    dtypes_doc = "numeric"

    def impl(self, x):
        return -x


@register
@dataclass(frozen=True)
class Div(Binary):
    dtypes = INEXACT
    dtypes_doc = "floating or complex"

    def impl(self, x, y):
        return x / y


@register
@dataclass(frozen=True)
class Pow(Binary):
    dtypes = INEXACT
    dtypes_doc = "floating or complex"

    def impl(self, x, y):
        return np.power(x, y)


@register
@dataclass(frozen=True)
class Max(Binary):
    dtypes = REAL
    dtypes_doc = "real"

    def impl(self, x, y):
        return np.maximum(x, y)


@register
@dataclass(frozen=True)
class Min(Binary):
    dtypes = REAL
    dtypes_doc = "real"

    def impl(self, x, y):
        return np.minimum(x, y)


# ---- complex parts ----

@register
@dataclass(frozen=True)
class Conj(Unary):
    """Complex conjugate; the identity on real operands."""

    linear = True

    def impl(self, x):
        return np.conj(x)


@register
@dataclass(frozen=True)
class Real(PrimitiveOp):
    linear = True

    def abstract_eval(self, x):
        check_dtype(self.name, x, COMPLEXES, "complex")
        return aval(x.shape, real_dtype(x.dtype))

    def impl(self, x):
        return np.real(x)


@register
@dataclass(frozen=True)
class Imag(PrimitiveOp):
    linear = True

    def abstract_eval(self, x):
        check_dtype(self.name, x, COMPLEXES, "complex")
        return aval(x.shape, real_dtype(x.dtype))

    def impl(self, x):
        return np.imag(x)


# ---- transcendental ----

@register
@dataclass(frozen=True)
class Exp(Unary):
    def impl(self, x):
        return np.exp(x)


@register
@dataclass(frozen=True)
class Log(Unary):
    def impl(self, x):
        return np.log(x)


@register
@dataclass(frozen=True)
class Sin(Unary):
    def impl(self, x):
        return np.sin(x)


@register
@dataclass(frozen=True)
class Cos(Unary):
    def impl(self, x):
        return np.cos(x)


@register
@dataclass(frozen=True)
class Tanh(Unary):
    def impl(self, x):
        return np.tanh(x)


@register
@dataclass(frozen=True)
class Sqrt(Unary):
    def impl(self, x):
        return np.sqrt(x)


@register
@dataclass(frozen=True)
class Rsqrt(Unary):
    def impl(self, x):
        return 1 / np.sqrt(x)


@register
@dataclass(frozen=True)
class Expm1(Unary):
    def impl(self, x):
        return np.expm1(x)


@register
@dataclass(frozen=True)
class Log1p(Unary):
    def impl(self, x):
        return np.log1p(x)


@register
@dataclass(frozen=True)
class Abs(PrimitiveOp):
    """|x|; real dtype output for complex x."""

    def abstract_eval(self, x):
        check_dtype(self.name, x, NUMERIC, "numeric")
        return aval(x.shape, real_dtype(x.dtype))

    def impl(self, x):
        return np.abs(x)


@register
@dataclass(frozen=True)
class Sign(Unary):
    """sign(x); x/|x| for complex x (0 at 0). Piecewise constant: no tangent flows through it."""

    dtypes = NUMERIC
    dtypes_doc = "numeric"
    differentiable = False

    def impl(self, x):
        if np.iscomplexobj(x):
            mag = np.abs(x)
            return np.where(mag == 0, 0, x / np.where(mag == 0, 1, mag)).astype(x.dtype)
        return np.sign(x)


# ---- comparison ----

_DIRECTIONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
               "GT": np.greater, "GE": np.greater_equal}


@register
@dataclass(frozen=True)
class Compare(PrimitiveOp):
    """x <direction> y elementwise, a bool result; direction in EQ NE LT LE GT GE."""

    direction: str
    differentiable = False

    def __post_init__(self):
        if self.direction not in _DIRECTIONS:
            raise ValueError(f"Compare: unknown direction {self.direction!r}; "
                             f"expected one of {sorted(_DIRECTIONS)}")

    def abstract_eval(self, x, y):
        a = check_same(self.name, (x, y))
        if self.direction in ("EQ", "NE"):
            check_dtype(self.name, a, ALL, "a supported dtype")
        else:
            check_dtype(self.name, a, REAL | {BOOL}, "ordered (real or bool)")
        return aval(a.shape, BOOL)

    def impl(self, x, y):
        return _DIRECTIONS[self.direction](x, y)
