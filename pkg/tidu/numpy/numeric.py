"""Elementwise number functions as ``jax.numpy`` spells them: ``heaviside``, ``sinc``,
``copysign``, ``frexp``, ``ldexp``, ``gcd``, ``lcm``.

Composites of existing primitives; outside a trace (no traced argument) each is numpy's own.
``sinc``'s value, first and second derivatives at 0 are jax's (its Maclaurin branch);
``gcd``/``lcm`` run Euclid's algorithm unrolled to its worst case for the dtype (46 steps for
int32, 92 for int64), so they need no loop primitive.
"""

from __future__ import annotations

import math

import numpy as np

from tidu.graph.dtypes import kind_of
from tidu.numpy.core import abs as _abs
from tidu.numpy.core import astype, power, sin, where
from tidu.numpy.shapes import _numpy_outside
from tidu.numpy.ufuncs import floor, isfinite, log2
from tidu.trace.tracer import _lift, _promote, _trace_of

__all__ = ["copysign", "frexp", "gcd", "heaviside", "lcm", "ldexp", "nextafter", "signbit",
           "sinc"]


def _inexact(name, *xs):
    t = _trace_of(*xs)
    return _promote(name, t, *xs, min_dtype=True)


@_numpy_outside(np.heaviside)
def heaviside(x1, x2):
    """0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0."""
    x1, x2 = _inexact("heaviside", x1, x2)
    return where(x1 < 0, 0.0, where(x1 > 0, 1.0, x2))


@_numpy_outside(np.sinc)
def sinc(x):
    """sin(pi x) / (pi x), 1 at 0 (its value and first two derivatives there exact)."""
    (x,) = _inexact("sinc", x)
    zero = x == 0
    safe = where(zero, 1.0, x)
    pix = math.pi * safe
    near = 1 - (math.pi * x) * (math.pi * x) / 6  # the Maclaurin series to second order
    return where(zero, near, sin(pix) / pix)


@_numpy_outside(np.signbit)
def signbit(x):
    """Whether the sign bit is set (True for -0.0 and negative values)."""
    t = _trace_of(x)
    x = _lift(t, x)
    if kind_of(x.dtype) in "iu":
        return x < 0
    if kind_of(x.dtype) == "b":
        return x & False
    return (x < 0) | ((x == 0) & (1 / where(x == 0, x, 1.0) < 0))


@_numpy_outside(np.copysign)
def copysign(x1, x2):
    """|x1| with the sign of x2 (-0.0 counts as negative)."""
    x1, x2 = _inexact("copysign", x1, x2)
    if kind_of(x1.dtype) == "c":
        raise TypeError("copysign: complex input is not supported")
    a = where(x1 >= 0, x1, -x1)  # |x1| with jax's derivative at 0 (+1, as jax's abs)
    return where(signbit(x2), -a, a)


def _pow2(e):
    """2**e for integer-valued float e, exact (Pow; exp2 is exp(e log 2), not exact)."""
    return power(2.0, e)


def _scale(x, e):
    """x * 2**e in two halves, so that 2**e itself need not be representable."""
    h = floor(e / 2)
    return x * _pow2(h) * _pow2(e - h)


@_numpy_outside(np.frexp)
def frexp(x):
    """(mantissa, exponent) with x = mantissa * 2**exponent, 0.5 <= |mantissa| < 1 (0, inf
    and NaN keep their value with exponent 0); exponent int32 as jax's."""
    (x,) = _inexact("frexp", x)
    if kind_of(x.dtype) == "c":
        raise TypeError("frexp: complex input is not supported")
    ok = isfinite(x) & (x != 0)
    ax = where(ok, _abs(x), 1.0)
    e = floor(log2(ax)) + 1
    m = _scale(ax, -e)
    # log2's rounding can put m just outside [0.5, 1): one correction step either way
    e = where(m >= 1, e + 1, where(m < 0.5, e - 1, e))
    m = _scale(ax, -e)
    m = where(x < 0, -m, m)
    return where(ok, m, x), astype(where(ok, e, 0.0), np.int32)


@_numpy_outside(np.ldexp)
def ldexp(x1, x2):
    """x1 * 2**x2 (x2 integer), in two halves so that a large exponent does not overflow
    before a small x1 brings it back."""
    t = _trace_of(x1, x2)
    x2 = _lift(t, x2)
    if kind_of(x2.dtype) not in "iub":
        raise TypeError(f"ldexp: the exponent must be an integer, got {x2.dtype}")
    (x1,) = _inexact("ldexp", x1)
    return _scale(x1, astype(x2, x1.dtype))


def _ints(name, x1, x2):
    t = _trace_of(x1, x2)
    a, b = _promote(name, t, x1, x2)
    if kind_of(a.dtype) not in "iu":
        raise TypeError(f"{name}: integer arguments required, got {a.dtype}")
    return a, b


def _gcd(a, b):
    steps = 46 if a.dtype.itemsize <= 4 else 92  # Euclid's worst case: consecutive Fibonacci
    a, b = _abs(a), _abs(b)
    for _ in range(steps):
        nz = b != 0
        r = a % where(nz, b, 1)
        a, b = where(nz, b, a), where(nz, r, b)
    return a


@_numpy_outside(np.gcd)
def gcd(x1, x2):
    """The greatest common divisor of |x1| and |x2| (integers; gcd(0, 0) = 0)."""
    return _gcd(*_ints("gcd", x1, x2))


@_numpy_outside(np.lcm)
def lcm(x1, x2):
    """The least common multiple of |x1| and |x2| (0 if either is 0)."""
    a, b = _ints("lcm", x1, x2)
    g = _gcd(a, b)
    return where(g == 0, 0, _abs(a * (b // where(g == 0, 1, g))))


@_numpy_outside(np.nextafter)
def nextafter(x1, x2):
    """The next representable value after x1 towards x2 (float32/float64), from frexp's exact
    exponent: the spacing is 2**(e - p) (p the mantissa bits), half that below a power of two,
    never below the smallest subnormal."""
    x1, x2 = _inexact("nextafter", x1, x2)
    if kind_of(x1.dtype) == "c":
        raise TypeError("nextafter: complex input is not supported")
    fi = np.finfo(x1.dtype)
    p = fi.nmant + 1
    tiny = float(fi.smallest_subnormal)
    m, e = frexp(x1)
    e = astype(e, x1.dtype)
    up = _scale(x1 * 0 + 1.0, e - p)
    down = where(_abs(m) == 0.5, up / 2, up)
    up, down = where(up > tiny, up, tiny), where(down > tiny, down, tiny)
    away = (x2 > x1) == (x1 > 0)
    step = where(away, up, down)
    out = where(x2 > x1, x1 + step, x1 - step)
    out = where(x1 == 0, where(x2 > 0, tiny, -tiny * (x1 * 0 + 1)), out)
    big = float(fi.max)
    out = where(x1 == np.inf, big, where(x1 == -np.inf, -big, out))
    return where(x1 == x2, x2, where((x1 != x1) | (x2 != x2), np.nan, out))
