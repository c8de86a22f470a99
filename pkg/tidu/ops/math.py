"""Elementwise math primitives beyond tier 1: rounding, inverse and hyperbolic trigonometry, the
error function, cube root, the logistic function, is_finite, Rem (C's fmod) and Atan2.

One block per primitive, as in ``elementwise.py``: dtype rule (through ``Unary``/``Binary``),
``linearize`` in tidu's own primitives (derivatives as jax defines them), StableHLO op (``hlo``:
what ``jax.jit(f).lower`` emits), numpy reference (``impl``).  C++ kernels: ``cpp/include/tidu/
math.hpp``.  Floor, Ceil and Round are piecewise constant (no tangent flows, as jax's zero
derivative); IsFinite has a bool output.  The numpy-level names built on these live in
``tidu.numpy_math``, the jax.nn ones in ``tidu.nn``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.graph import aval
from tidu.graph.dtypes import kind_of
from tidu.ops.core import (
    FLOATS,
    REAL,
    A,
    Add,
    Binary,
    F,
    Mul,
    Primitive,
    Unary,
    add_all,
    check_dtype,
    const,
    fix,
    lin,
    same_op_batched,
    scale,
)
from tidu.ops.elementwise import (
    Abs,
    Compare,
    Cos,
    Div,
    Exp,
    Log1p,
    Neg,
    Rsqrt,
    Sign,
    Sin,
    Sub,
    int_div,
)
from tidu.ops.structural import Select

__all__ = ["Floor", "Ceil", "Round", "Tan", "Atan", "Asin", "Acos", "Sinh", "Cosh", "Asinh",
           "Acosh", "Atanh", "Erf", "Erfc", "ErfInv", "Cbrt", "Logistic", "IsFinite", "Rem",
           "Atan2", "Lgamma", "int_div", "int_rem"]


def _c(b, v, x):
    """A fixed constant shaped like primal value x."""
    return const(b, v, x.aval)


def _sq(b, x):
    return fix(b, Mul(), x, x)


class _FloatUnary(Unary):
    dtypes = FLOATS
    dtypes_doc = "floating"


# ---- rounding (piecewise constant: zero derivative, no tangent flows) ----

@register
@dataclass(frozen=True)
class Floor(_FloatUnary):
    hlo = "stablehlo.floor"
    differentiable = False

    def impl(self, x):
        return np.floor(x)


@register
@dataclass(frozen=True)
class Ceil(_FloatUnary):
    hlo = "stablehlo.ceil"
    differentiable = False

    def impl(self, x):
        return np.ceil(x)


@register
@dataclass(frozen=True)
class Round(_FloatUnary):
    """Round half to even (numpy's round, XLA's round_nearest_even)."""

    hlo = "stablehlo.round_nearest_even"
    differentiable = False

    def impl(self, x):
        return np.round(x)


# ---- trigonometric and hyperbolic (complex too) ----

@register
@dataclass(frozen=True)
class Tan(Unary):
    hlo = "stablehlo.tan"

    def linearize(self, b, primal_in, primal_out, t):  # 1 + tan^2
        y = primal_out[0]
        return [scale(b, fix(b, Add(), _c(b, 1, y), _sq(b, y)), t[0])]

    def impl(self, x):
        return np.tan(x)


@register
@dataclass(frozen=True)
class Atan(Unary):
    hlo = "chlo.atan"

    def linearize(self, b, primal_in, primal_out, t):  # 1 / (1 + x^2)
        x = primal_in[0]
        return [lin(b, Div(), [t[0], fix(b, Add(), _c(b, 1, x), _sq(b, x))], [A, F])]

    def impl(self, x):
        return np.arctan(x)


@register
@dataclass(frozen=True)
class Asin(Unary):
    hlo = "chlo.asin"

    def linearize(self, b, primal_in, primal_out, t):  # 1 / sqrt(1 - x^2)
        x = primal_in[0]
        return [scale(b, fix(b, Rsqrt(), fix(b, Sub(), _c(b, 1, x), _sq(b, x))), t[0])]

    def impl(self, x):
        return np.arcsin(x)


@register
@dataclass(frozen=True)
class Acos(Unary):
    hlo = "chlo.acos"

    def linearize(self, b, primal_in, primal_out, t):  # -1 / sqrt(1 - x^2)
        x = primal_in[0]
        r = fix(b, Rsqrt(), fix(b, Sub(), _c(b, 1, x), _sq(b, x)))
        return [scale(b, fix(b, Neg(), r), t[0])]

    def impl(self, x):
        return np.arccos(x)


@register
@dataclass(frozen=True)
class Sinh(Unary):
    hlo = "chlo.sinh"

    def linearize(self, b, primal_in, primal_out, t):
        return [scale(b, fix(b, Cosh(), primal_in[0]), t[0])]

    def impl(self, x):
        return np.sinh(x)


@register
@dataclass(frozen=True)
class Cosh(Unary):
    hlo = "chlo.cosh"

    def linearize(self, b, primal_in, primal_out, t):
        return [scale(b, fix(b, Sinh(), primal_in[0]), t[0])]

    def impl(self, x):
        return np.cosh(x)


@register
@dataclass(frozen=True)
class Asinh(Unary):
    hlo = "chlo.asinh"

    def linearize(self, b, primal_in, primal_out, t):  # 1 / sqrt(x^2 + 1)
        x = primal_in[0]
        return [scale(b, fix(b, Rsqrt(), fix(b, Add(), _sq(b, x), _c(b, 1, x))), t[0])]

    def impl(self, x):
        return np.arcsinh(x)


@register
@dataclass(frozen=True)
class Acosh(Unary):
    hlo = "chlo.acosh"

    def linearize(self, b, primal_in, primal_out, t):  # 1 / (sqrt(x - 1) sqrt(x + 1)), as jax
        x = primal_in[0]
        one = _c(b, 1, x)
        r = fix(b, Mul(), fix(b, Rsqrt(), fix(b, Sub(), x, one)),
                fix(b, Rsqrt(), fix(b, Add(), x, one)))
        return [scale(b, r, t[0])]

    def impl(self, x):
        return np.arccosh(x)


@register
@dataclass(frozen=True)
class Atanh(Unary):
    hlo = "chlo.atanh"

    def linearize(self, b, primal_in, primal_out, t):  # 1 / ((1 - x)(1 + x))
        x = primal_in[0]
        one = _c(b, 1, x)
        d = fix(b, Mul(), fix(b, Sub(), one, x), fix(b, Add(), one, x))
        return [lin(b, Div(), [t[0], d], [A, F])]

    def impl(self, x):
        return np.arctanh(x)


# ---- error function, cube root, logistic (floating) ----

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


@register
@dataclass(frozen=True)
class Erf(_FloatUnary):
    hlo = "chlo.erf"

    def linearize(self, b, primal_in, primal_out, t):  # 2/sqrt(pi) exp(-x^2)
        x = primal_in[0]
        d = fix(b, Mul(), _c(b, _TWO_OVER_SQRT_PI, x), fix(b, Exp(), fix(b, Neg(), _sq(b, x))))
        return [scale(b, d, t[0])]

    def impl(self, x):
        from scipy.special import erf  # noqa: PLC0415  (optional dependency)

        return erf(x).astype(x.dtype)


@register
@dataclass(frozen=True)
class Erfc(_FloatUnary):
    hlo = "chlo.erfc"

    def linearize(self, b, primal_in, primal_out, t):  # -2/sqrt(pi) exp(-x^2)
        x = primal_in[0]
        d = fix(b, Mul(), _c(b, -_TWO_OVER_SQRT_PI, x), fix(b, Exp(), fix(b, Neg(), _sq(b, x))))
        return [scale(b, d, t[0])]

    def impl(self, x):
        from scipy.special import erfc  # noqa: PLC0415  (optional dependency)

        return erfc(x).astype(x.dtype)


@register
@dataclass(frozen=True)
class ErfInv(_FloatUnary):
    hlo = "chlo.erf_inv"

    def linearize(self, b, primal_in, primal_out, t):  # sqrt(pi)/2 exp(y^2)
        y = primal_out[0]
        d = fix(b, Mul(), _c(b, 1 / _TWO_OVER_SQRT_PI, y), fix(b, Exp(), _sq(b, y)))
        return [scale(b, d, t[0])]

    def impl(self, x):
        from scipy.special import erfinv  # noqa: PLC0415  (optional dependency)

        return erfinv(x).astype(x.dtype)


@register
@dataclass(frozen=True)
class Cbrt(_FloatUnary):
    hlo = "stablehlo.cbrt"

    def linearize(self, b, primal_in, primal_out, t):
        # (1/3) (1/y)^2, as jax's: its own derivative at 0 is -inf (as jax's), where
        # t / (3 y^2) differentiated to 0 * inf / 0 = nan
        y = primal_out[0]
        r = fix(b, Div(), _c(b, 1, y), y)
        return [scale(b, fix(b, Mul(), _c(b, 1 / 3, y), _sq(b, r)), t[0])]

    def impl(self, x):
        return np.cbrt(x)


@register
@dataclass(frozen=True)
class Logistic(_FloatUnary):
    """1 / (1 + exp(-x)) (jax.nn.sigmoid), without overflow for either sign of x."""

    hlo = "stablehlo.logistic"

    def linearize(self, b, primal_in, primal_out, t):  # y (1 - y)
        y = primal_out[0]
        return [scale(b, fix(b, Mul(), y, fix(b, Sub(), _c(b, 1, y), y)), t[0])]

    def impl(self, x):
        e = np.exp(-np.abs(x))
        return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


# ---- log-gamma (XLA's Lanczos approximation) ----

_LANCZOS_BASE = 0.99999999999980993227684700473478
_LANCZOS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
            771.3234287776530788486528258894, -176.61502916214059906584551354,
            12.507343278686904814458936853, -0.13857109526572011689554706,
            9.984369578019570859563e-6, 1.50563273514931155834e-7)


def _digamma(b, x):
    """d/dx lgamma, emitted as primitives: XLA's Lanczos digamma (g = 7) with the reflection
    below 1/2 and NaN at 0 and the negative integers (jax.scipy.special.digamma's values)."""
    def c(v):
        return _c(b, v, x)

    def op(p, *a):
        return fix(b, p, *a)

    reflect = op(Compare("LT"), x, c(0.5))
    z = op(Select(), reflect, op(Neg(), x), op(Sub(), x, c(1)))
    num, den = c(0.0), c(_LANCZOS_BASE)
    for i, k in enumerate(_LANCZOS):
        zi = op(Add(), z, c(i + 1))
        num = op(Sub(), num, op(Div(), c(k), op(Mul(), zi, zi)))
        den = op(Add(), den, op(Div(), c(k), zi))
    t = op(Add(), z, c(7.5))
    log_t = op(Add(), c(math.log(7.5)), op(Log1p(), op(Div(), z, c(7.5))))
    y = op(Sub(), op(Add(), log_t, op(Div(), num, den)), op(Div(), c(7.0), t))
    xr = op(Select(), reflect, x, c(0.25))
    reduced = op(Add(), xr, op(Abs(), op(Floor(), op(Add(), xr, c(0.5)))))
    pr = op(Mul(), c(math.pi), reduced)
    cot = op(Div(), op(Mul(), c(math.pi), op(Cos(), pr)), op(Sin(), pr))
    out = op(Select(), reflect, op(Sub(), y, cot), y)
    pole = op(Select(), op(Compare("LE"), x, c(0)), op(Compare("EQ"), x, op(Floor(), x)),
              op(Compare("NE"), x, x))
    return op(Select(), pole, c(np.nan), out)


@register
@dataclass(frozen=True)
class Lgamma(_FloatUnary):
    """log|Gamma(x)| (jax.lax.lgamma): +inf at the poles 0, -1, -2, ... and at +-inf.  The
    kernel is XLA:CPU's (Lanczos, its float log/log1p and fused multiply-add: math.hpp), so
    float32 values are jax's to the bit; the derivative is digamma (XLA's Lanczos digamma)."""

    hlo = "chlo.lgamma"

    def linearize(self, b, primal_in, primal_out, t):
        return [scale(b, _digamma(b, primal_in[0]), t[0])]

    def impl(self, x):
        from scipy.special import gammaln  # noqa: PLC0415  (optional dependency)

        return gammaln(x).astype(x.dtype)


# ---- predicates ----


@register
@dataclass(frozen=True)
class IsFinite(Primitive):
    """Neither infinite nor NaN: a bool result (never differentiable)."""

    hlo = "stablehlo.is_finite"
    differentiable = False

    batch = same_op_batched

    def abstract_eval(self, x):
        check_dtype(self.name, x, FLOATS, "floating")
        return aval(x.shape, np.dtype("bool"))

    def impl(self, x):
        return np.isfinite(x)


# ---- binary ----


def int_rem(x, y):
    """C's % on integers, defined everywhere as XLA's: x % 0 == x, INT_MIN % -1 == 0."""
    x, y = np.asarray(x), np.asarray(y)
    safe = np.where((y == 0) | (y == -1), 1, y)
    r = np.fmod(x, safe)
    return np.where(y == 0, x, np.where(y == -1, 0, r)).astype(x.dtype)


@register
@dataclass(frozen=True)
class Rem(Binary):
    """C's fmod (lax.rem): the sign of the dividend; integers too (x % 0 == x, as XLA's)."""

    hlo = "stablehlo.remainder"
    dtypes = REAL
    dtypes_doc = "real"

    def linearize(self, b, primal_in, primal_out, t):  # dx - trunc(x / y) dy, as jax
        x, y = primal_in
        dy = None
        if t[1] is not None:
            q = fix(b, Div(), x, y)
            trunc = fix(b, Mul(), fix(b, Sign(), q), fix(b, Floor(), fix(b, Abs(), q)))
            dy = scale(b, fix(b, Neg(), trunc), t[1])
        return [add_all(b, [t[0], dy])]

    def impl(self, x, y):
        if kind_of(x.dtype) in "iu":
            return int_rem(x, y)
        return np.fmod(x, y)


@register
@dataclass(frozen=True)
class Atan2(Binary):
    """atan2(x, y): the angle of the point (y, x), in [-pi, pi]."""

    hlo = "stablehlo.atan2"
    dtypes = FLOATS
    dtypes_doc = "floating"

    def linearize(self, b, primal_in, primal_out, t):  # (y dx - x dy) / (x^2 + y^2)
        x, y = primal_in
        r2 = fix(b, Add(), _sq(b, x), _sq(b, y))
        dx = scale(b, fix(b, Div(), y, r2), t[0]) if t[0] is not None else None
        dy = scale(b, fix(b, Neg(), fix(b, Div(), x, r2)), t[1]) if t[1] is not None else None
        return [add_all(b, [dx, dy])]

    def impl(self, x, y):
        return np.arctan2(x, y)
