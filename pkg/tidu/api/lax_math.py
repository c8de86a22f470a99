"""``td.lax``'s elementwise names (jax.lax's spelling and semantics) over tidu's primitives:
arithmetic, transcendental and special functions, rounding with ``RoundingMethod``, comparisons,
``select``/``select_n``/``clamp`` and ``convert_element_type``.  Each is one primitive or a short
composite of them (docs/lax.md lists where a value or derivative differs from jax on purpose).
"""

from __future__ import annotations

import builtins
import dataclasses
from enum import Enum, IntEnum

import numpy as np

from tidu import ops as _P
from tidu.api.custom import custom_jvp
from tidu.graph.dtypes import BOOL, INTS, kind_of
from tidu.numpy.core import abs as _abs
from tidu.numpy.core import (
    astype,
    cos,
    exp,
    expm1,
    imag,
    log,
    log1p,
    maximum,
    minimum,
    real,
    rsqrt,
    sign,
    sin,
    sqrt,
    stop_gradient,
    tanh,
    where,
)
from tidu.numpy.core import conj as _conj
from tidu.numpy.core import power as _power
from tidu.numpy.logical import logical_and, logical_or
from tidu.numpy.nn import sigmoid
from tidu.numpy.numeric import frexp, ldexp, nextafter
from tidu.numpy.scipy.special import digamma, erfinv
from tidu.numpy.scipy.special import gammaln as lgamma
from tidu.numpy.ufuncs import arccos as acos
from tidu.numpy.ufuncs import arccosh as acosh
from tidu.numpy.ufuncs import arcsin as asin
from tidu.numpy.ufuncs import arcsinh as asinh
from tidu.numpy.ufuncs import arctan as atan
from tidu.numpy.ufuncs import arctan2 as _arctan2
from tidu.numpy.ufuncs import arctanh as atanh
from tidu.numpy.ufuncs import cbrt, ceil, cosh, erf, erfc, exp2, floor, isfinite, sinh, tan, trunc
from tidu.numpy.ufuncs import round as _round_even
from tidu.trace.tracer import _compare, _emit, _lift, _promote, _trace_of

__all__ = [
    "AccuracyMode", "RoundingMethod", "Tolerance", "abs", "acos", "acosh", "add", "asin", "asinh",
    "atan", "atan2", "atanh",
    "cbrt", "ceil", "clamp", "complex", "conj", "convert_element_type", "cos", "cosh", "digamma",
    "div", "rem",
    "eq", "erf", "erf_inv", "erfc", "exp", "exp2", "expm1", "floor", "ge", "gt", "imag",
    "integer_pow", "is_finite", "le", "lgamma", "log", "log1p", "logistic", "lt", "max", "min",
    "mul", "ne", "neg", "nextafter", "pow", "real", "reciprocal", "reduce_precision", "round",
    "rsqrt", "select",
    "select_n", "sign", "sin", "sinh", "sqrt", "square", "sub", "tan", "tanh",
]

_NONFLOAT = INTS | {BOOL}


def _tr(x):
    return _lift(_trace_of(x), x)


def _named(f, name, doc):
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


# ---- arithmetic ----

def atan2(x, y):
    """``jax.lax.atan2``: arctan(x / y) elementwise, the quadrant from both signs (numpy's
    ``arctan2(x, y)``, with jax's parameter names)."""
    return _arctan2(x, y)


def _arith(cls, name, what):
    def f(x, y):
        t = _trace_of(x, y)
        a, b = _promote(name, t, x, y)
        return _emit(t, cls(), a, b)
    return _named(f, name, f"``jax.lax.{name}``: {what} elementwise.")


add = _arith(_P.Add, "add", "x + y")
sub = _arith(_P.Sub, "sub", "x - y")
_mul = _arith(_P.Mul, "mul", "x * y")


def mul(x, y, *, out_dtype=None):
    """``jax.lax.mul``: x * y elementwise (same dtypes, as jax's); with ``out_dtype`` both
    operands are converted to it first, as jax does."""
    if out_dtype is not None:
        x, y = convert_element_type(x, out_dtype), convert_element_type(y, out_dtype)
    return _mul(x, y)
div = _arith(_P.Div, "div", "x / y; integers truncate toward zero, and as XLA x / 0 is -1 (all "
             "ones unsigned) and INT_MIN / -1 is INT_MIN (``//`` is numpy's floor division)")
rem = _arith(_P.Rem, "rem", "C's remainder x rem y (the dividend's sign); integers as XLA: "
             "x rem 0 is x and INT_MIN rem -1 is 0 (``%`` is numpy's floor remainder)")


def neg(x):
    """``jax.lax.neg``: -x."""
    return -_tr(x)


def square(x):
    """``jax.lax.square``: x * x."""
    x = _tr(x)
    return x * x


def reciprocal(x):
    """``jax.lax.reciprocal``: 1 / x (integers stay integers, truncating, as jax's)."""
    x = _tr(x)
    return div(x * 0 + 1, x) if x.dtype in _NONFLOAT else 1 / x


def pow(x, y):
    """``jax.lax.pow``: x ** y (an integer or floating exponent; complex bases too)."""
    return _power(x, y)


def integer_pow(x, y: int):
    """``jax.lax.integer_pow``: x ** y for a static Python integer y, by repeated squaring (as
    jax lowers it), so the value and derivative at x = 0 are exact; y < 0 is 1 / x ** -y."""
    if isinstance(y, bool) or not isinstance(y, (int, np.integer)):
        raise TypeError(f"integer_pow: the exponent must be a Python int, got {y!r}")
    x = _tr(x)
    y = int(y)
    if y == 0:
        return x * 0 + 1
    n, acc, base = builtins.abs(y), None, x
    while n:
        if n & 1:
            acc = base if acc is None else acc * base
        n >>= 1
        if n:
            base = base * base
    return reciprocal(acc) if y < 0 else acc


def logistic(x):
    """``jax.lax.logistic``: 1 / (1 + exp(-x))."""
    return sigmoid(x)


def erf_inv(x):
    """``jax.lax.erf_inv``: the inverse error function."""
    return erfinv(x)


def is_finite(x):
    """``jax.lax.is_finite``: neither infinite nor NaN (floating point operands)."""
    return isfinite(x)


def complex(x, y):
    """``jax.lax.complex``: x + 1j * y from real operands of one dtype (float32 -> complex64,
    float64 -> complex128)."""
    t = _trace_of(x, y)
    a, b = _lift(t, x), _lift(t, y)
    dt = np.result_type(a.dtype, b.dtype)
    if kind_of(dt) != "f":
        raise TypeError(f"complex: operands must be floating point, got {a.dtype} and {b.dtype}")
    cdt = np.complex64 if dt == np.float32 else np.complex128
    return astype(a, cdt) + astype(b, cdt) * 1j


# ---- max / min: jax's derivative halves at ties ----

def _minmax(pick, name):
    def f(x, y):
        return pick(x, y)
    return _named(f, name, f"``jax.lax.{name}``: elementwise {name}imum, NaN propagating.")


max = _minmax(maximum, "max")  # noqa: A001 - jax.lax's names
min = _minmax(minimum, "min")  # noqa: A001


# ---- comparisons ----

def _cmp(direction, name):
    def f(x, y):
        return _compare(direction, x, y)
    return _named(f, name, f"``jax.lax.{name}``: x {direction} y elementwise (bool).")


eq, ne, lt, le, gt, ge = (_cmp(d, n) for d, n in [("EQ", "eq"), ("NE", "ne"), ("LT", "lt"),
                                                   ("LE", "le"), ("GT", "gt"), ("GE", "ge")])


# ---- rounding ----

class RoundingMethod(IntEnum):
    """``jax.lax.RoundingMethod``: how ``round`` settles a tie."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):  # noqa: A001
    """``jax.lax.round``: to the nearest integer, ties away from zero (jax's default) or to even;
    zero derivative."""
    try:
        m = RoundingMethod(int(rounding_method))
    except (TypeError, ValueError):
        raise ValueError(f"round: unknown rounding_method {rounding_method!r}; expected "
                         f"RoundingMethod.AWAY_FROM_ZERO or TO_NEAREST_EVEN") from None
    x = _tr(x)
    if m == RoundingMethod.TO_NEAREST_EVEN or x.dtype in _NONFLOAT:
        return _round_even(x)
    t = trunc(x)
    d = x - t  # exact
    return stop_gradient(where(_abs(d) >= 0.5, t + sign(x), t))


# ---- selection ----

def select(pred, on_true, on_false):
    """``jax.lax.select``: on_true where pred, else on_false (a bool pred)."""
    p = _tr(pred)
    if p.dtype != BOOL:
        raise TypeError(f"select: pred must be bool, got {p.dtype}")
    return where(p, on_true, on_false)


def select_n(which, *cases):
    """``jax.lax.select_n``: cases[which] elementwise; which is bool (two cases) or an integer
    array with values in [0, len(cases)); out-of-range picks are unspecified, as jax's."""
    if not cases:
        raise ValueError("select_n: at least one case is required")
    w = _tr(which)
    if w.dtype == BOOL:
        if len(cases) > 2:
            raise TypeError(f"select_n: a bool `which` selects between at most two cases, got "
                            f"{len(cases)}")
        return _tr(cases[0]) if len(cases) == 1 else where(w, cases[1], cases[0])
    if w.dtype not in INTS:
        raise TypeError(f"select_n: `which` must be bool or integer, got {w.dtype}")
    out = cases[-1]
    for i in range(len(cases) - 2, -1, -1):
        out = where(w == i, cases[i], out)
    return out


def _clamp_value(lo, v, hi):
    return minimum(maximum(v, lo), hi)


_clamp_rule = custom_jvp(_clamp_value)


@_clamp_rule.defjvp
def _clamp_jvp(primals, tangents):
    # jax's clamp_p rule: x's tangent where min < x < max, min's where x < min < max, max's
    # where max < x (zero on the bounds themselves)
    lo, v, hi = primals
    dlo, dv, dhi = tangents
    out = _clamp_rule(lo, v, hi)
    z = out * 0
    t = where(logical_and(v > lo, v < hi), dv, z)
    t = t + where(logical_and(lo > v, lo < hi), dlo, z)
    return out, t + where(hi < v, dhi, z)


def clamp(min, x, max):  # noqa: A002 - jax.lax's argument names
    """``jax.lax.clamp``: x clipped to [min, max] (min and max scalars or x's shape), with jax's
    derivative: x's where min < x < max, min's where x < min < max, max's where max < x.  The
    value is one Max and one Min; the selects live in the derivative only (a custom JVP)."""
    t = _trace_of(min, x, max)
    lo, v, hi = _lift(t, min), _lift(t, x), _lift(t, max)
    if kind_of(v.dtype) not in "fc":
        return _clamp_value(lo, v, hi)
    dt = v.dtype
    lo = astype(lo, dt) if lo.dtype != dt else lo
    hi = astype(hi, dt) if hi.dtype != dt else hi
    return _clamp_rule(lo, v, hi)


def conj(x):
    """``jax.lax.conj``: the complex conjugate; a real operand becomes complex (as jax's)."""
    x = _tr(x)
    if kind_of(x.dtype) != "c":
        x = astype(x, np.complex64 if x.dtype == np.float32 else np.complex128)
    return _conj(x)


def convert_element_type(operand, new_dtype):
    """``jax.lax.convert_element_type``: the operand cast to new_dtype (float to integer
    truncates toward zero; complex to real keeps the real part)."""
    x = _tr(operand)
    dt = np.dtype(new_dtype)
    if kind_of(x.dtype) == "c" and kind_of(dt) != "c":
        x = real(x)
    return astype(x, dt)


# names re-exported as they are
__reexports__ = (acos, acosh, asin, asinh, atan, atan2, atanh, cbrt, ceil, cos, cosh,
                 digamma, erf, erfc, exp, exp2, expm1, floor, imag, lgamma, log, log1p,
                 nextafter, real, rsqrt, sign, sin, sinh, sqrt, tan, tanh, logical_or)
abs = _abs  # noqa: A001


# ---- the accuracy= option of jax's transcendental functions: accepted and ignored ----


class AccuracyMode(Enum):
    """``jax.lax.AccuracyMode``: an accelerator's choice of approximation for ``accuracy=``;
    tidu accepts it and computes as always (docs/lax.md)."""

    HIGHEST = 1
    DEFAULT = 2


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """``jax.lax.Tolerance(atol, rtol, ulps)``: the tolerances of ``accuracy=``, at most two
    of them ((atol, rtol) or (atol, ulps)), as jax checks; accepted and ignored."""

    atol: float = 0.0
    rtol: float = 0.0
    ulps: int = 0

    def __post_init__(self):
        if self.rtol and self.ulps:
            raise ValueError("Tolerance: give (atol, rtol) or (atol, ulps), not rtol and ulps")


def _accuracy_ok(accuracy) -> bool:
    kind = type(accuracy).__name__
    return accuracy is None or kind in ("AccuracyMode", "Tolerance")  # tidu's or jax's


def _with_accuracy(f, name: str):
    def fn(x, *, accuracy=None):
        if not _accuracy_ok(accuracy):
            raise TypeError(f"{name}: accuracy must be a td.lax.Tolerance or AccuracyMode (or "
                            f"jax's), got {accuracy!r}")
        return f(x)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``jax.lax.{name}``; ``accuracy`` (a Tolerance or AccuracyMode) is accepted "
                  f"and ignored: tidu computes to the operand dtype's accuracy.")
    return fn


cbrt = _with_accuracy(cbrt, "cbrt")
cos = _with_accuracy(cos, "cos")
exp = _with_accuracy(exp, "exp")
exp2 = _with_accuracy(exp2, "exp2")
expm1 = _with_accuracy(expm1, "expm1")
log = _with_accuracy(log, "log")
log1p = _with_accuracy(log1p, "log1p")
logistic = _with_accuracy(logistic, "logistic")
rsqrt = _with_accuracy(rsqrt, "rsqrt")
sin = _with_accuracy(sin, "sin")
sqrt = _with_accuracy(sqrt, "sqrt")
tan = _with_accuracy(tan, "tan")
tanh = _with_accuracy(tanh, "tanh")


# ---- reduce_precision ----

_FLOAT_BITS = {np.dtype(np.float32): (8, 23, -126), np.dtype(np.float64): (11, 52, -1022)}


def _reduce_precision_value(x, exponent_bits, mantissa_bits):
    ebits, mbits, emin = _FLOAT_BITS[x.dtype]
    y = x
    if mantissa_bits < mbits:
        # round half to even at the mantissa_bits-th bit below the leading one, on the quantum
        # of x's binade (a subnormal's is the smallest normal's, as XLA's bit arithmetic)
        _, e = frexp(x)
        q = maximum(astype(e, np.int32) - 1, emin) - mantissa_bits
        r = ldexp(x, -q)
        rr = _round_even(r)
        if mantissa_bits == 0:
            # no mantissa bit left: XLA's "even" is the exponent's lowest bit, so 1.5 * 2**q
            # rounds down where the biased exponent is even (the bias is odd: q odd)
            rr = where(logical_and(_abs(r) == 1.5, q % 2 != 0), r / 1.5, rr)
        y = ldexp(rr, q)
    if exponent_bits < ebits:
        bias = (1 << (exponent_bits - 1)) - 1
        big = np.ldexp(x.dtype.type(1), bias + 1)  # the reduced format's overflow threshold
        tiny = np.ldexp(x.dtype.type(1), 1 - bias)  # its smallest normal
        ay = _abs(y)
        y = where(ay >= big, y * x.dtype.type(np.inf), where(ay < tiny, y * 0, y))
    return where(isfinite(x), y, x) if mantissa_bits < mbits or exponent_bits < ebits else y


_reduce_precision_rule = custom_jvp(_reduce_precision_value, nondiff_argnums=(1, 2))


@_reduce_precision_rule.defjvp
def _reduce_precision_jvp(exponent_bits, mantissa_bits, primals, tangents):
    # straight through: the tangent unchanged (jax treats the op as linear and rounds the
    # tangent too; tidu's linear rules must be exactly linear)
    (x,), (t,) = primals, tangents
    return _reduce_precision_rule(x, exponent_bits, mantissa_bits), t


def reduce_precision(operand, exponent_bits: int, mantissa_bits: int):
    """``jax.lax.reduce_precision``: each value rounded (to nearest, ties to even) to
    ``mantissa_bits`` and its exponent range cut to ``exponent_bits`` as XLA does: overflow to
    +-inf, values below the reduced format's smallest normal to +-0 (no subnormals), NaN and inf
    kept.  Exact arithmetic (frexp, ldexp, Round) instead of bit access.  Its derivative passes
    the tangent through unchanged (jax also rounds the tangent)."""
    x = _tr(operand)
    eb, mb = int(exponent_bits), int(mantissa_bits)
    if eb < 1 or mb < 0:
        raise ValueError(f"reduce_precision: exponent_bits must be >= 1 and mantissa_bits >= 0, "
                         f"got {exponent_bits}, {mantissa_bits}")
    if x.dtype not in _FLOAT_BITS:
        raise TypeError(f"reduce_precision: operand must be float32 or float64, got {x.dtype}")
    return _reduce_precision_rule(x, eb, mb)
