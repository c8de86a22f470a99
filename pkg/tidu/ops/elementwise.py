"""Elementwise primitives beyond the linear vocabulary of ``core``: division, powers, max/min,
transcendental functions, abs/sign, comparisons.

Operands share shape and dtype (the front end inserts BroadcastInDim and Convert first).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.backends.xla.hlo import tensor_type
from tidu.graph import aval
from tidu.graph.dtypes import kind_of
from tidu.ops.core import (
    ALL,
    BOOL,
    INEXACT,
    NUMERIC,
    REAL,
    A,
    Add,
    Binary,
    Conj,
    Convert,
    F,
    Mul,
    Primitive,
    Real,
    Unary,
    add_all,
    check_dtype,
    check_same,
    conj_fixed,
    const,
    fix,
    lin,
    real_dtype,
    same_op_batched,
    scale,
)
from tidu.ops.structural import Select


def int_div(x, y):
    """Integer division truncating toward zero, defined everywhere as XLA's: x / 0 == -1 and
    INT_MIN / -1 == INT_MIN (the numpy reference of Div on integers)."""
    x, y = np.asarray(x), np.asarray(y)
    safe = np.where((y == 0) | (y == -1), 1, y)
    q = x // safe  # floor; never overflows (safe is not -1), then rounded toward zero
    q = q + ((np.remainder(x, safe) != 0) & ((x < 0) != (safe < 0))).astype(q.dtype)
    with np.errstate(over="ignore"):
        q = np.where(y == -1, -x, q)
    ones = np.array(-1).astype(x.dtype)  # all ones: -1, or an unsigned dtype's largest value
    return np.where(y == 0, ones, q).astype(x.dtype)


# ---- arithmetic ----

@register
@dataclass(frozen=True)
class Neg(Unary):
    hlo = "stablehlo.negate"
    linear = True
    dtypes = NUMERIC
    dtypes_doc = "numeric"

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        return [lin(b, self, ct, [A])]

    def impl(self, x):
        return -x


@register
@dataclass(frozen=True)
class Sub(Binary):
    hlo = "stablehlo.subtract"
    linear = True

    def linearize(self, b, primal_in, primal_out, t):
        if None not in t:
            return [lin(b, self, t, [A, A])]
        return [t[0] if t[0] is not None else lin(b, Neg(), [t[1]], [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        m = mode.active_mask
        return [ct[0] if m[0] else None, lin(b, Neg(), [ct[0]], [A]) if m[1] else None]

    def impl(self, x, y):
        return x - y



@register
@dataclass(frozen=True)
class Div(Binary):
    """x / y; on integers (never differentiable) truncating toward zero as lax.div, with x / 0 == -1
    and INT_MIN / -1 == INT_MIN as XLA's (the front end's // and % build numpy's rules on it)."""

    bilinear_in = (0,)  # linear in the dividend, for a fixed divisor

    hlo = "stablehlo.divide"
    dtypes = NUMERIC
    dtypes_doc = "numeric"

    def linearize(self, b, primal_in, primal_out, t):
        x, y = primal_in
        dx = lin(b, self, [t[0], y], [A, F]) if t[0] is not None else None
        dy = None
        if t[1] is not None:  # -(x/y)/y * dy
            dy = scale(b, fix(b, Neg(), fix(b, self, primal_out[0], y)), t[1])
        return [add_all(b, [dx, dy])]

    def transpose_rule(self, b, ct, inputs, mode):
        if mode.active_mask[1]:
            raise ValueError("Div is linear only in its numerator")
        return [lin(b, self, [ct[0], conj_fixed(b, inputs[1])], [A, F]), None]

    def impl(self, x, y):
        if kind_of(x.dtype) in "iu":
            return int_div(x, y)
        return x / y


@register
@dataclass(frozen=True)
class Pow(Binary):
    hlo = "stablehlo.power"
    dtypes = INEXACT
    dtypes_doc = "floating or complex"

    def linearize(self, b, primal_in, primal_out, t):
        x, y = primal_in
        dx = dy = None
        if t[0] is not None:
            # y * x ** (y - 1), jax's float rule, built from primitives so that its own
            # derivatives (in x and in y) are right to every order. The one special case is
            # x == y == 0, where it would be 0 * inf: there d/dx x**0 is 0 (x**0 == 1 for every
            # x), and x is replaced by 1 inside so no inf reaches a transposed Mul. The guard
            # must not be y == 0 alone: a select there cuts the y-dependence, and d2/dydx of
            # x**y at y = 0 came out 0 instead of 1/x (issue #28).
            x0 = fix(b, Compare("EQ"), x, const(b, 0, x.aval))
            y0 = fix(b, Compare("EQ"), y, const(b, 0, y.aval))
            both0 = fix(b, Select(), x0, y0, const(b, False, aval(y.aval.shape, BOOL)))
            xs = fix(b, Select(), both0, const(b, 1, x.aval), x)
            ym1 = fix(b, Sub(), y, const(b, 1, y.aval))
            d = fix(b, Mul(), y, fix(b, self, xs, ym1))
            dx = scale(b, fix(b, Select(), both0, const(b, 0, y.aval), d), t[0])
        # log(x) * x ** y, with log(1) at x == 0 (as jax: d/dy 0**y = 0, y > 0)
        if t[1] is not None:
            x0 = fix(b, Compare("EQ"), x, const(b, 0, x.aval))
            safe = fix(b, Select(), x0, const(b, 1, x.aval), x)
            dy = scale(b, fix(b, Mul(), fix(b, Log(), safe), primal_out[0]), t[1])
        return [add_all(b, [dx, dy])]

    def impl(self, x, y):
        return np.power(x, y)


@register
@dataclass(frozen=True)
class Max(Binary):
    hlo = "stablehlo.maximum"
    dtypes = REAL
    dtypes_doc = "real"

    def linearize(self, b, primal_in, primal_out, t):
        return [_pick(b, "GT", primal_in, t)]

    def impl(self, x, y):
        return np.maximum(x, y)


@register
@dataclass(frozen=True)
class Min(Binary):
    hlo = "stablehlo.minimum"
    dtypes = REAL
    dtypes_doc = "real"

    def linearize(self, b, primal_in, primal_out, t):
        return [_pick(b, "LT", primal_in, t)]

    def impl(self, x, y):
        return np.minimum(x, y)


# ---- transcendental ----


@register
@dataclass(frozen=True)
class Exp(Unary):
    hlo = "stablehlo.exponential"
    def linearize(self, b, primal_in, primal_out, t):
        return [scale(b, primal_out[0], t[0])]

    def impl(self, x):
        return np.exp(x)


@register
@dataclass(frozen=True)
class Log(Unary):
    hlo = "stablehlo.log"
    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, Div(), [t[0], primal_in[0]], [A, F])]

    def impl(self, x):
        return np.log(x)


@register
@dataclass(frozen=True)
class Sin(Unary):
    hlo = "stablehlo.sine"
    def linearize(self, b, primal_in, primal_out, t):
        return [scale(b, fix(b, Cos(), primal_in[0]), t[0])]

    def impl(self, x):
        return np.sin(x)


@register
@dataclass(frozen=True)
class Cos(Unary):
    hlo = "stablehlo.cosine"
    def linearize(self, b, primal_in, primal_out, t):
        return [scale(b, fix(b, Neg(), fix(b, Sin(), primal_in[0])), t[0])]

    def impl(self, x):
        return np.cos(x)


@register
@dataclass(frozen=True)
class Tanh(Unary):
    hlo = "stablehlo.tanh"
    def linearize(self, b, primal_in, primal_out, t):
        y = primal_out[0]
        return [scale(b, fix(b, Sub(), const(b, 1, y.aval), fix(b, Mul(), y, y)), t[0])]

    def impl(self, x):
        return np.tanh(x)


@register
@dataclass(frozen=True)
class Sqrt(Unary):
    hlo = "stablehlo.sqrt"
    def linearize(self, b, primal_in, primal_out, t):
        y = primal_out[0]
        return [lin(b, Div(), [t[0], fix(b, Add(), y, y)], [A, F])]

    def impl(self, x):
        return np.sqrt(x)


@register
@dataclass(frozen=True)
class Rsqrt(Unary):
    hlo = "stablehlo.rsqrt"
    def linearize(self, b, primal_in, primal_out, t):
        x, y = primal_in[0], primal_out[0]  # d x^-1/2 = -y / (2 x)
        coef = fix(b, Div(), fix(b, Mul(), y, const(b, -0.5, y.aval)), x)
        return [scale(b, coef, t[0])]

    def impl(self, x):
        return 1 / np.sqrt(x)


@register
@dataclass(frozen=True)
class Expm1(Unary):
    hlo = "stablehlo.exponential_minus_one"
    def linearize(self, b, primal_in, primal_out, t):
        y = primal_out[0]
        return [scale(b, fix(b, Add(), y, const(b, 1, y.aval)), t[0])]

    def impl(self, x):
        return np.expm1(x)


@register
@dataclass(frozen=True)
class Log1p(Unary):
    hlo = "stablehlo.log_plus_one"
    def linearize(self, b, primal_in, primal_out, t):
        x = primal_in[0]
        return [lin(b, Div(), [t[0], fix(b, Add(), x, const(b, 1, x.aval))], [A, F])]

    def impl(self, x):
        return np.log1p(x)


@register
@dataclass(frozen=True)
class Abs(Primitive):
    """|x|; real dtype output for complex x."""
    hlo = "stablehlo.abs"
    batch = same_op_batched

    def abstract_eval(self, x):
        check_dtype(self.name, x, NUMERIC, "numeric")
        return aval(x.shape, real_dtype(x.dtype))

    def linearize(self, b, primal_in, primal_out, t):
        x = primal_in[0]
        if kind_of(x.dtype) != "c":
            return [scale(b, fix(b, Sign(), x), t[0])]
        # d|z| = Re(conj(z)/|z| * dz), in differentiable ops (Sign is piecewise constant on reals),
        # dividing by 1 where |z| == 0 so that the derivative there is 0 (as jax's), not NaN.
        r = primal_out[0]
        is_zero = fix(b, Compare("EQ"), r, const(b, 0, r.aval))
        safe = fix(b, Select(), is_zero, const(b, 1, r.aval), r)
        coef = fix(b, Div(), fix(b, Conj(), x), fix(b, Convert(x.dtype.name), safe))
        return [lin(b, Real(), [scale(b, coef, t[0])], [A])]

    def lower(self, lo, out, x):
        if kind_of(out.dtype) == "u":  # stablehlo.abs takes signless integers only; |x| is x
            return x
        return lo.op(self.hlo, [x], out)

    def impl(self, x):
        return np.abs(x)


@register
@dataclass(frozen=True)
class Sign(Unary):
    """sign(x); x/|x| for complex x (0 at 0). Piecewise constant: no tangent flows through it."""

    hlo = "stablehlo.sign"

    dtypes = NUMERIC
    dtypes_doc = "numeric"
    differentiable = False

    def lower(self, lo, out, x):
        if kind_of(out.dtype) == "u":  # stablehlo.sign takes signless integers only: min(x, 1)
            ty = tensor_type(out.shape, out.dtype)
            one = lo.source("stablehlo.constant", f"value = dense<1> : {ty}", out)
            return lo.op("stablehlo.minimum", [x, one], out)
        return lo.op(self.hlo, [x], out)

    def impl(self, x):
        if np.iscomplexobj(x):
            mag = np.abs(x)
            return np.where(mag == 0, 0, x / np.where(mag == 0, 1, mag)).astype(x.dtype)
        return np.sign(x)


# ---- comparison ----


_DIRECTIONS = {
    "EQ": np.equal,
    "NE": np.not_equal,
    "LT": np.less,
    "LE": np.less_equal,
    "GT": np.greater,
    "GE": np.greater_equal,
}


@register
@dataclass(frozen=True)
class Compare(Primitive):
    """x <direction> y elementwise, a bool result; direction in EQ NE LT LE GT GE."""

    batch = same_op_batched

    direction: str
    differentiable = False

    def __post_init__(self):
        if self.direction not in _DIRECTIONS:
            raise ValueError(
                f"Compare: unknown direction {self.direction!r}; "
                f"expected one of {sorted(_DIRECTIONS)}"
            )

    def abstract_eval(self, x, y):
        a = check_same(self.name, (x, y))
        if self.direction in ("EQ", "NE"):
            check_dtype(self.name, a, ALL, "a supported dtype")
        else:
            check_dtype(self.name, a, REAL | {BOOL}, "ordered (real or bool)")
        return aval(a.shape, BOOL)

    def lower(self, lo, out, x, y):
        return lo.op(
            "stablehlo.compare",
            [x, y],
            out,
            f"comparison_direction = #stablehlo<comparison_direction {self.direction}>",
        )

    def impl(self, x, y):
        return _DIRECTIONS[self.direction](x, y)


def _pick(b, direction, primal_in, t):
    """Tangent of max/min: the winner's tangent; ties share it equally (as in JAX)."""
    x, y = primal_in
    one, half, zero = (const(b, v, x.aval) for v in (1, 0.5, 0))
    w = fix(
        b,
        Select(),
        fix(b, Compare(direction), x, y),
        one,
        fix(b, Select(), fix(b, Compare("EQ"), x, y), half, zero),
    )
    terms = []
    if t[0] is not None:
        terms.append(scale(b, w, t[0]))
    if t[1] is not None:
        terms.append(scale(b, fix(b, Sub(), one, w), t[1]))
    return add_all(b, terms)
