"""jax.scipy.special's confluent and Gauss hypergeometric functions ``hyp1f1`` and ``hyp2f1``,
as jax writes them (Pearson, Olver & Porter 2014: the Taylor series, 1F1's asymptotic series
for |x| >= 100, 2F1's terminating sums, its digamma transformation (AMS55 15.3.10-12) near
x = 1 and its c - a - b transformation; jax's special cases and stopping rules), so values
agree with jax's to rounding, jax's wrong ones included (jax's 2F1 series is summed as is
for x < -1).

jax runs a per-element ``while_loop`` (``jnp.vectorize``); here each loop is one
``td.while_loop`` over the array that updates an element only while its own test holds
(``special_expint._masked_loop``), so each element stops where jax's does.  Every branch jax
selects among is computed, on inputs moved to a harmless point where it is not the one chosen.

Derivatives are jax's rules, as one op each (``call_with_jvp``): in x, ``a/b 1F1(a+1, b+1, x)``
and ``ab/c 2F1(a+1, b+1, c+1, x)`` (so to any order); in a, b, c, jax's digamma-weighted
series, valid where the Taylor series converges (|x| < 1 for 2F1) as jax's are."""

from __future__ import annotations

import numpy as np

from tidu.api.special_expint import _masked_loop
from tidu.graph.dtypes import kind_of
from tidu.numpy import core as _core
from tidu.numpy import ufuncs as _ufuncs
from tidu.numpy.custom_op import call_with_jvp
from tidu.numpy.scipy import special as _special
from tidu.numpy.scipy.special import _inexact, digamma, gamma

__all__ = ["hyp1f1", "hyp2f1"]

exp, log, where, abs_ = _core.exp, _core.log, _core.where, _core.abs
round_, floor = _ufuncs.round, _ufuncs.floor


def _ones(x):
    return _core.broadcast_to(_core.astype(1.0, x.dtype), x.shape)


def _eps(x) -> float:
    return float(np.finfo(x.dtype).eps)


def _real_args(name, *xs):
    out = _inexact(*xs)
    if kind_of(out[0].dtype) == "c":
        raise ValueError(f"{name} does not support complex-valued inputs (jax's {name} takes "
                         f"real float32/float64), got {out[0].dtype}")
    return out


def _ratio_test(eps):
    """jax's stop rule: k < 250 and |term| / |serie| > eps (0/0 stops)."""
    return lambda s: (s[1] < 250) & (abs_(s[2]) / abs_(s[0]) > eps)


# ---- 1F1 ----

def _hyp1f1_serie(a, b, x):
    one = _ones(x)

    def body(s):
        serie, k, term = s
        return serie + term, k + 1.0, term * ((a + k) / (b + k) * x / (k + 1.0))

    return _masked_loop(_ratio_test(_eps(x)), body, (one, one, a / b * x))[0]


def _hyp1f1_asymptotic(a, b, x):
    one = _ones(x)

    def body(s):
        serie, k, term = s
        return serie + term, k + 1.0, term * ((b - a + k) * (1.0 - a + k) / (k + 1.0) / x)

    serie = _masked_loop(_ratio_test(_eps(x)), body, (one, one, (b - a) * (1.0 - a) / x))[0]
    return gamma(b) / gamma(a) * exp(x) * x ** (a - b) * serie


def _hyp1f1(a, b, x):
    small = abs_(x) < 100
    result = where(small, _hyp1f1_serie(a, b, where(small, x, 0.0)),
                   _hyp1f1_asymptotic(a, b, where(small, 100.0, x)))
    out = where(a == 0, 1.0, result)
    out = where((a == b) & (a != 0), exp(x), out)
    return [where((b == 0) & (a != 0), np.inf, out)]


def _param_series(weight, ratio, init_term, x):
    """jax's derivative series in a parameter: sum_k term_k * weight(k), term_{k+1} =
    term_k * ratio(k), from k = 1, serie 0."""
    one = _ones(x)

    def body(s):
        serie, k, term = s
        return serie + term * weight(k), k + 1.0, term * ratio(k)

    return _masked_loop(_ratio_test(_eps(x)), body, (one * 0.0, one, init_term))[0]


def _hyp1f1_jvp(primals, tangents):
    a, b, x = primals
    da, db, dx = tangents
    (out,) = _hyp1f1_op(a, b, x)

    def ratio(k):
        return (a + k) / (b + k) * x / (k + 1.0)

    d_a = _param_series(lambda k: digamma(a + k) - digamma(a), ratio, a / b * x, x)
    d_b = _param_series(lambda k: digamma(b) - digamma(b + k), ratio, a / b * x, x)
    d_x = a / b * _hyp1f1_op(a + 1.0, b + 1.0, x)[0]
    return [out], [d_a * da + d_b * db + d_x * dx]


def _hyp1f1_op(a, b, x):
    return call_with_jvp("hyp1f1", _hyp1f1, _hyp1f1_jvp, (), a, b, x)


def hyp1f1(a, b, x):
    """The confluent hypergeometric function 1F1(a; b; x), as ``jax.scipy.special.hyp1f1``
    (real input; the Taylor series for |x| < 100, the asymptotic series above; 1 where
    a == 0, exp(x) where a == b, inf where b == 0)."""
    a, b, x = _real_args("hyp1f1", a, b, x)
    return _hyp1f1_op(a, b, x)[0]


# ---- 2F1 ----

def _hyp2f1_terminal(a, b, c, x, on):
    eps = _eps(x) * 50
    ib = round_(b)
    mask = (b < a) & (abs_(b - ib) < eps) & ~((_ufuncs.remainder(c, 1.0) == 0) & (c <= 0)
                                              & (c > b))
    a, b = where(mask, b, a), where(mask, a, b)
    a = where(on, abs_(a), 0.0)  # the loop runs i = 1 .. |a|
    one = _ones(x)

    def body(s):
        i, serie, term = s
        term = term * (-(a - i + 1.0) / (c + i - 1.0) * (b + i - 1.0) / i * x)
        return i + 1.0, serie + term, term

    return _masked_loop(lambda s: s[0] < a + 1.0, body, (one, one, one))[1]


def _hyp2f1_serie(a, b, c, x):
    one = _ones(x)
    rtol = _eps(x)

    def body(s):
        serie, k, term = s
        return serie + term, k + 1.0, term * ((a + k - 1.0) * (b + k - 1.0) / (c + k - 1.0)
                                               / k * x)

    return _masked_loop(lambda s: (s[1] < 250) & (abs_(s[2]) > rtol * abs_(s[0])), body,
                        (one * 0.0, one, one))[0]


def _hyp2f1_digamma_transform(a, b, c, x):
    rtol = _eps(x)
    one = _ones(x)
    d = c - a - b
    s = 1.0 - x
    rd = round_(d)
    pos = rd >= 0
    e = where(pos, d, -d)
    d1 = where(pos, d, 0.0)
    d2 = where(pos, 0.0, d)
    ard = where(pos, rd, -rd)
    ax = log(s)
    y = digamma(one) + digamma(1.0 + e) - digamma(a + d1) - digamma(b + d1) - ax
    y = y / gamma(e + 1.0)
    p = (a + d1) * (b + d1) * s / gamma(e + 2.0)

    def body(st):
        p, q, t, y = st
        r = (digamma(1.0 + t) + digamma(1.0 + t + e) - digamma(a + t + d1)
             - digamma(b + t + d1) - ax)
        q = p * r
        y = y + q
        p = p * (s * (a + t + d1) / (t + 1.0))
        p = p * ((b + t + d1) / (t + 1.0 + e))
        return p, q, t + 1.0, y

    _, _, _, y = _masked_loop(lambda st: (st[2] < 250) & (abs_(st[1]) >= rtol * abs_(st[3])),
                              body, (p, y, one, y))

    def for_body(st):
        i, p, t, y1 = st
        r = 1.0 - e + t
        p = p * (s * (a + t + d2) * (b + t + d2) / r)
        t = t + 1.0
        p = p / t
        return i + 1.0, p, t, y1 + p

    y1 = _masked_loop(lambda st: st[0] < ard, for_body, (one, one, one * 0.0, one))[3]
    g = gamma(c)
    y1 = y1 * (gamma(e) * g / (gamma(a + d1) * gamma(b + d1)))
    y2 = y * (g / (gamma(a + d2) * gamma(b + d2)))
    y2 = where(ard - 2.0 * floor(ard / 2.0) != 0, -y2, y2)
    q = s ** rd
    summed = where(rd > 0, y2 * q + y1, y2 + y1 * q)
    return where(rd == 0, y * gamma(c) / (gamma(a) * gamma(b)), summed)


def _hyp2f1_terminal_or_serie(a, b, c, x, on):
    """jax's choice among the series, the digamma transformation and the terminating sum, for
    the elements where ``on`` holds (the others get a harmless point)."""
    eps = _eps(x) * 50
    d = c - a - b
    neg_int = (((a <= 0) & (abs_(a - round_(a)) < eps))
               | ((b <= 0) & (abs_(b - round_(b)) < eps)))
    near_one = (x > 0.9) & ~neg_int
    transform = near_one & (abs_(d - round_(d)) < eps)
    terminal = ~near_one & neg_int
    series = ~transform & ~terminal

    def at(m, v, safe):
        return where(on & m, v, safe)

    v_serie = _hyp2f1_serie(at(series, a, 0.0), at(series, b, 0.0), at(series, c, 1.0),
                            at(series, x, 0.0))
    v_transform = _hyp2f1_digamma_transform(at(transform, a, 1.0), at(transform, b, 1.0),
                                            at(transform, c, 3.0), at(transform, x, 0.95))
    v_terminal = _hyp2f1_terminal(a, b, c, x, on & terminal)
    return where(transform, v_transform, where(terminal, v_terminal, v_serie))


def _hyp2f1(a, b, c, x):
    eps = _eps(x) * 50
    d = c - a - b
    s = 1.0 - x
    ca, cb = c - a, c - b
    idd = round_(d)
    c_pole = (c == 0) | ((c < 0) & (_ufuncs.remainder(c, 1.0) == 0))
    conds = [  # jax's nested where, outermost first: the first that holds wins
        (x == 0) | (((a == 0) | (b == 0)) & (c != 0)),
        c_pole,
        (d <= -1) & ~((abs_(d - idd) >= eps) & (s < 0)),
        (d <= 0) & (x == 1),
        (x < 1) & (b == c),
        (x < 1) & (a == c),
        x > 1,
        x == 1,
    ]
    index = _ones(x) * 6.0
    for k, cnd in reversed(list(zip([0, 1, 2, 1, 3, 4, 1, 5], conds))):
        index = where(cnd, float(k), index)
    on2, on6 = index == 2, index == 6
    vals = [
        _ones(x),
        _ones(x) * np.inf,
        s ** d * _hyp2f1_terminal_or_serie(ca, cb, c, x, on2),
        s ** (-a),
        s ** (-b),
        gamma(c) * gamma(d) / (gamma(ca) * gamma(cb)),
        _hyp2f1_terminal_or_serie(a, b, c, x, on6),
    ]
    out = vals[6]
    for k in range(6):
        out = where(index == k, vals[k], out)
    return [out]


def _hyp2f1_jvp(primals, tangents):
    a, b, c, x = primals
    da, db, dc, dx = tangents
    (out,) = _hyp2f1_op(a, b, c, x)

    def ratio(k):
        return (a + k) * (b + k) / (c + k) / (k + 1.0) * x

    t0 = a * b / c * x
    d_a = _param_series(lambda k: digamma(a + k) - digamma(a), ratio, t0, x)
    d_b = _param_series(lambda k: digamma(b + k) - digamma(b), ratio, t0, x)
    d_c = _param_series(lambda k: digamma(c) - digamma(c + k), ratio, t0, x)
    d_x = a * b / c * _hyp2f1_op(a + 1.0, b + 1.0, c + 1.0, x)[0]
    return [out], [d_a * da + d_b * db + d_c * dc + d_x * dx]


def _hyp2f1_op(a, b, c, x):
    return call_with_jvp("hyp2f1", _hyp2f1, _hyp2f1_jvp, (), a, b, c, x)


def hyp2f1(a, b, c, x):
    """The Gauss hypergeometric function 2F1(a, b; c; x), as ``jax.scipy.special.hyp2f1``
    (real input, x <= 1; inf for x > 1 and at c's poles)."""
    a, b, c, x = _real_args("hyp2f1", a, b, c, x)
    return _hyp2f1_op(a, b, c, x)[0]


_special._register_loops(hyp1f1=hyp1f1, hyp2f1=hyp2f1)
