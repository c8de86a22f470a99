"""numpy's elementwise math beyond tier 1, on traced values: rounding, modular arithmetic (``//``,
``%``, ``divmod``), inverse and hyperbolic trigonometry, logarithms and exponentials in other
bases, the error functions, predicates, and the NaN-aware and clipping helpers.

Primitives where a composite would lose accuracy or speed (``tidu.ops.math``); composites of
existing primitives otherwise, written as jax writes them so derivatives agree with jax's.
docs/numpy.md ("Elementwise math and td.nn") lists what differs from numpy and jax on purpose.
"""

from __future__ import annotations

import math

import numpy as np

from tidu import ops as P
from tidu.graph.dtypes import BOOL, COMPLEXES, INTS
from tidu.numpy.core import (
    abs,
    astype,
    exp,
    imag,
    log,
    log1p,
    maximum,
    minimum,
    no_out,
    real,
    sqrt,
    where,
)
from tidu.trace.tracer import (
    Tracer,
    _binary,
    _broadcast,
    _const,
    _emit,
    _lift,
    _promote,
    _promote_weak,
    _trace_of,
    _unary_float,
    _weak,
    as_inexact,
)

__all__ = [
    "floor", "ceil", "round", "around", "rint", "trunc", "fix", "square", "reciprocal", "clip",
    "floor_divide", "remainder", "mod", "fmod", "divmod", "tan", "arcsin", "arccos", "arctan",
    "arctan2", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "hypot", "log2", "log10", "exp2",
    "logaddexp", "logaddexp2", "isnan", "isinf", "isfinite", "nan_to_num", "erf", "erfc", "erfinv",
    "cbrt", "fmax", "fmin", "angle", "deg2rad", "rad2deg", "radians", "degrees",
]

_NONFLOAT = INTS | {BOOL}


def _tr(x) -> Tracer:
    t = _trace_of(x)
    return _lift(t, x)


def _and(p, q):
    """Logical and of two bool traced values."""
    return where(p, q, False)


def _or(p, q):
    return where(p, True, q)


def _complex(re, im, dtype):
    """re + 1j * im as `dtype` (complex64 or complex128)."""
    return astype(re, dtype) + astype(im, dtype) * 1j


def _float_unary(cls, name):
    def f(x):
        return _unary_float(cls, x)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"Elementwise {name} (integer and bool inputs computed in jax's "
                 "to_inexact_dtype: float32 up to 32 bits, float64 for 64).")
    return f


# ---- rounding (zero derivative, as jax's) ----

def _rounding(cls, name):
    def f(x):
        x = _tr(x)
        if x.dtype in _NONFLOAT:
            return x  # integers are their own floor/ceil/round (as jax's; numpy's return floats)
        return _emit(x._t, cls(), x)

    f.__name__ = f.__qualname__ = name
    return f


floor = _rounding(P.Floor, "floor")
floor.__doc__ = "Elementwise floor; integers unchanged."
ceil = _rounding(P.Ceil, "ceil")
ceil.__doc__ = "Elementwise ceiling; integers unchanged."
rint = _rounding(P.Round, "rint")
rint.__doc__ = "Round half to even (numpy's rint); integers unchanged."


def round(a, decimals: int = 0, out=None):  # noqa: A001 - numpy's name
    """Round half to even to `decimals` places (numpy's and jax's rule); integers unchanged for
    decimals >= 0; complex numbers round their real and imaginary parts."""
    no_out(out, "round")
    x = _tr(a)
    if x.dtype in COMPLEXES:
        return _complex(round(real(x), decimals), round(imag(x), decimals), x.dtype)
    if x.dtype in _NONFLOAT:
        if decimals >= 0:
            return x
        f = 10 ** (-decimals)
        return floor_divide(x + f // 2, f) * f  # half up; numpy rounds ints half to even here
    if decimals == 0:
        return _emit(x._t, P.Round(), x)
    f = 10.0 ** decimals
    return _emit(x._t, P.Round(), x * f) / f


around = round


def trunc(x):
    """Round toward zero; integers unchanged."""
    x = _tr(x)
    if x.dtype in _NONFLOAT:
        return x
    return where(x < 0, ceil(x), floor(x))


fix = trunc


# ---- arithmetic ----

def square(x):
    """x * x (any numeric dtype); bool input as int32, as jax's (promote_dtypes_numeric)."""
    x = _tr(x)
    if x.aval.dtype == np.bool_:
        x = x.astype(np.int32)
    return x * x


def reciprocal(x):
    """1 / x; integer inputs computed in jax's to_inexact_dtype (numpy's
    stays integer)."""
    return 1 / as_inexact(x)


def clip(x, min=None, max=None, *, a_min=None, a_max=None):  # noqa: A002 - jax's names
    """max(min(x, max), min), as jax's (``maximum`` then ``minimum``: at a bound the derivative
    is split as jax's). ``a_min``/``a_max`` are numpy's older names."""
    lo = min if min is not None else a_min
    hi = max if max is not None else a_max
    x = _tr(x)
    if lo is not None:
        x = maximum(lo, x)
    if hi is not None:
        x = minimum(hi, x)
    return x


# ---- modular arithmetic: numpy's sign rules on lax.rem (C's fmod) ----

def _operands(name, x, y):
    t = _trace_of(x, y)
    a, b = _promote(name, t, x, y)
    if a.dtype == BOOL:
        a, b = astype(a, np.int32), astype(b, np.int32)  # numpy gives int8; jax int32
    if a.dtype in COMPLEXES:
        raise TypeError(f"{name}: not defined for complex operands ({a.dtype})")
    return t, a, b


def _int_zero_guard(t, b, r):
    """numpy's x // 0 == x % 0 == 0 for integers (XLA's Div and Rem give -1 and x)."""
    return where(b == 0, 0, r)


def _rem(t, a, b):
    return _emit(t, P.Rem(), a, b)


def fmod(x, y):
    """C's fmod: the remainder with the sign of the dividend (integers: x fmod 0 == 0)."""
    t, a, b = _operands("fmod", x, y)
    r = _rem(t, a, b)
    return _int_zero_guard(t, b, r) if a.dtype in INTS else r


def _needs_adjust(r, b):
    """The truncated remainder r has the other sign than the divisor b (and is not zero)."""
    return _and(r != 0, (r < 0) != (b < 0))


def remainder(x, y):
    """x - floor(x / y) * y: the remainder with the sign of the divisor, as Python's ``%``
    (integers: x % 0 == 0, as numpy's)."""
    t, a, b = _operands("remainder", x, y)
    r = _rem(t, a, b)
    r = where(_needs_adjust(r, b), r + b, r)
    return _int_zero_guard(t, b, r) if a.dtype in INTS else r


mod = remainder


def floor_divide(x, y):
    """floor(x / y), as Python's ``//`` (integers: exact, x // 0 == 0 as numpy's; floats: as jax's
    and numpy's, x // 0 == x / 0). Zero derivative."""
    t, a, b = _operands("floor_divide", x, y)
    r = _rem(t, a, b)
    adjust = _needs_adjust(r, b)
    if a.dtype in INTS:
        q = _emit(t, P.Div(), a, b)  # truncating
        return _int_zero_guard(t, b, where(adjust, q - 1, q))
    q = (a - r) / b  # an integer up to rounding (jax's _float_divmod)
    q = _emit(t, P.Round(), where(adjust, q - 1, q))
    return where(b == 0, a / b, q)


def divmod(x, y):  # noqa: A001 - Python's and numpy's name
    """(x // y, x % y)."""
    return floor_divide(x, y), remainder(x, y)


# ---- trigonometric, hyperbolic ----

tan = _float_unary(P.Tan, "tan")
arctan = _float_unary(P.Atan, "arctan")
arcsin = _float_unary(P.Asin, "arcsin")
arccos = _float_unary(P.Acos, "arccos")
sinh = _float_unary(P.Sinh, "sinh")
cosh = _float_unary(P.Cosh, "cosh")
arcsinh = _float_unary(P.Asinh, "arcsinh")
arccosh = _float_unary(P.Acosh, "arccosh")
arctanh = _float_unary(P.Atanh, "arctanh")


def arctan2(x1, x2):
    """The angle of the point (x2, x1) in [-pi, pi] (floating; integers as jax's
    to_inexact_dtype)."""
    return _binary(P.Atan2, "arctan2", x1, x2, float_only=True)


def hypot(x1, x2):
    """sqrt(x1**2 + x2**2) without overflow or underflow (jax's formulation)."""
    t = _trace_of(x1, x2)
    a, b = _promote("hypot", t, x1, x2, min_dtype=True)
    if a.dtype in COMPLEXES:
        raise TypeError(f"hypot: not defined for complex operands ({a.dtype})")
    a, b = abs(a), abs(b)
    inf = _or(isinf(a), isinf(b))
    # one select picks hi, lo (not maximum/minimum): at a tie maximum's 0.5 split would make the
    # second derivative 0 (jax's is); the chosen branch is the analytic function itself
    first = a >= b
    hi, lo = where(first, a, b), where(first, b, a)
    safe = where(hi == 0, 1, hi)
    r = where(hi == 0, hi, hi * sqrt(1 + square(lo / safe)))
    return where(inf, np.inf, r)


def deg2rad(x):
    """Degrees to radians."""
    return _float_x(x) * (math.pi / 180)


def rad2deg(x):
    """Radians to degrees."""
    return _float_x(x) * (180 / math.pi)


radians, degrees = deg2rad, rad2deg


def _float_x(x):
    return as_inexact(x)


def angle(z, deg: bool = False):
    """The argument of z (atan2(imag, real)); real inputs give 0 or pi."""
    z = _tr(z)
    if z.dtype in COMPLEXES:
        a = arctan2(imag(z), real(z))
    else:  # jax's angle: a non-float in the default float dtype (float64), not to_inexact
        z = _tr(z)
        z = astype(z, np.float64) if z.dtype in _NONFLOAT else z
        a = arctan2(_broadcast(z._t, _const(z._t, 0, z.dtype), z.shape), z)
    return a * (180 / math.pi) if deg else a


# ---- logarithms and exponentials ----

def log2(x):
    """Base-2 logarithm (log(x) / log(2), as jax's)."""
    return log(x) / math.log(2)


def log10(x):
    """Base-10 logarithm (log(x) / log(10), as jax's)."""
    return log(x) / math.log(10)


def exp2(x):
    """2 ** x (exp(x log 2))."""
    return exp(_float_x(x) * math.log(2))


def logaddexp(x1, x2):
    """log(exp(x1) + exp(x2)) without overflow; -inf, -inf gives -inf (jax's formulation)."""
    t = _trace_of(x1, x2)
    (a, b), weak = _promote_weak("logaddexp", t, x1, x2, min_dtype=True)
    # hi + log1p(exp(lo - hi)) with hi, lo picked by one select, not maximum(a, b) and abs(a - b):
    # each branch is the analytic function itself, so the select's derivative (the chosen
    # branch's) is right to every order at a tie, where maximum's 0.5 split and abs'(0) = 0
    # would cut the curvature (issue #28: the second derivative at a == b was 0, not 0.25).
    # lo - hi <= 0, so neither branch overflows.
    first = a >= b
    hi, lo = where(first, a, b), where(first, b, a)
    # weak where jax's is (a bool array with a Python int promotes to a weak int, so a weak float)
    return _weak(where(isnan(a - b), a + b, hi + log1p(exp(lo - hi))), weak)


def logaddexp2(x1, x2):
    """log2(2**x1 + 2**x2) without overflow."""
    ln2 = math.log(2)
    return logaddexp(_float_x(x1) * ln2, _float_x(x2) * ln2) / ln2


# ---- predicates (bool results, never differentiable) ----

def isnan(x):
    """x != x; False for integers."""
    x = _tr(x)
    return x != x


def isfinite(x):
    """Neither infinite nor NaN; complex: both parts finite; True for integers."""
    x = _tr(x)
    if x.dtype in _NONFLOAT:
        return _broadcast(x._t, _const(x._t, True, BOOL), x.shape)
    if x.dtype in COMPLEXES:
        return _and(isfinite(real(x)), isfinite(imag(x)))
    return _emit(x._t, P.IsFinite(), x)


def isinf(x):
    """+-inf; complex: either part infinite; False for integers."""
    x = _tr(x)
    if x.dtype in _NONFLOAT:
        return _broadcast(x._t, _const(x._t, False, BOOL), x.shape)
    if x.dtype in COMPLEXES:
        return _or(isinf(real(x)), isinf(imag(x)))
    return abs(x) == np.inf


def nan_to_num(x, copy: bool = True, nan: float = 0.0, posinf=None, neginf=None):
    """NaN -> nan, +inf -> posinf (default: the dtype's largest), -inf -> neginf (its most
    negative); complex parts separately; integers unchanged."""
    del copy
    x = _tr(x)
    if x.dtype in _NONFLOAT:
        return x
    if x.dtype in COMPLEXES:
        f = lambda p: nan_to_num(p, nan=nan, posinf=posinf, neginf=neginf)  # noqa: E731
        return _complex(f(real(x)), f(imag(x)), x.dtype)
    info = np.finfo(x.dtype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    out = where(x == np.inf, hi, where(x == -np.inf, lo, x))
    return where(isnan(x), nan, out)


# ---- special functions ----

erf = _float_unary(P.Erf, "erf")
erfc = _float_unary(P.Erfc, "erfc")
erfinv = _float_unary(P.ErfInv, "erfinv")
cbrt = _float_unary(P.Cbrt, "cbrt")


# ---- NaN-aware max/min ----

def fmax(x1, x2):
    """Elementwise maximum ignoring NaN (NaN only where both are)."""
    t = _trace_of(x1, x2)
    a, b = _promote("fmax", t, x1, x2)
    return where(isnan(a), b, where(isnan(b), a, maximum(a, b)))


def fmin(x1, x2):
    """Elementwise minimum ignoring NaN (NaN only where both are)."""
    t = _trace_of(x1, x2)
    a, b = _promote("fmin", t, x1, x2)
    return where(isnan(a), b, where(isnan(b), a, minimum(a, b)))

