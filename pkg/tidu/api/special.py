"""Special functions that iterate to convergence: jax.lax's ``igamma``, ``igammac``,
``igamma_grad_a``, ``random_gamma_grad``, ``betainc``, ``bessel_i0e``, ``bessel_i1e``, ``zeta``
and ``polygamma`` (td.lax), behind td.scipy.special's ``gammainc``, ``gammaincc``, ``betainc``,
``i0e``, ``i1e``, ``i0``, ``i1``, ``zeta``, ``polygamma`` and the CDFs of td.scipy.stats.

They live in the api layer because they need ``td.while_loop`` and ``td.custom_jvp``. The
incomplete gamma and beta functions follow jax's algorithms (XLA's math library: a power series
and a continued fraction iterated under a mask until every element converges; Lentz's
algorithm for the beta function), so values agree with jax's to a few ulps; their derivatives
are jax's rules, as custom JVPs; where jax has none (betainc in a and b, the second derivative
of igamma in a, zeta in x), tidu differentiates by central differences. ``bessel_i0e`` is
Cephes' Chebyshev expansion (as jax's); ``bessel_i1e`` (a power series below 20, the asymptotic
series above) and ``zeta`` (the Euler-Maclaurin formula, 10 terms and 12 Bernoulli corrections)
are tidu's own, equal to jax's to rounding. docs/numpy.md lists where they differ from jax.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from tidu.api.control_flow import while_loop
from tidu.api.custom import custom_jvp
from tidu.api.grad import jvp as _jvp
from tidu.numpy import core as _core
from tidu.numpy import creation as _creation
from tidu.numpy import sorting as _sorting
from tidu.numpy import ufuncs as _ufuncs
from tidu.numpy.scipy import special as _special
from tidu.numpy.scipy.special import _real, digamma, gammaln

__all__ = ["bessel_i0e", "bessel_i1e", "betainc", "igamma", "igamma_grad_a", "igammac",
           "polygamma", "random_gamma_grad", "zeta"]

T = SimpleNamespace(  # the numpy names used here
    abs=_core.abs, exp=_core.exp, log=_core.log, log1p=_core.log1p, sqrt=_core.sqrt,
    where=_core.where, sign=_core.sign, astype=_core.astype, zeros=_creation.zeros,
    ones=_creation.ones, zeros_like=_creation.zeros_like, ones_like=_creation.ones_like,
    any=_sorting.any, isnan=_ufuncs.isnan, floor=_ufuncs.floor)

_VALUE, _DERIVATIVE, _SAMPLE = 0, 1, 2


def _eps(x) -> float:
    return float(np.finfo(x.dtype).eps)


# ---- the incomplete gamma function (XLA's series and continued fraction) ----

def _igamma_series(ax, x, a, enabled, mode):
    eps = _eps(a)

    def body(v):
        on, r, c, ans, xx, dc_da, dans_da = v
        r1 = r + 1.0
        dc1 = dc_da * (xx / r1) - (c * xx) / (r1 * r1)
        dans1 = dans_da + dc1
        c1 = c * (xx / r1)
        ans1 = ans + c1
        if mode == _VALUE:
            go = on & (c1 / ans1 > eps)
        else:
            go = on & (T.abs(dc1 / dans1) > eps)
        return (go, T.where(on, r1, r), T.where(on, c1, c), T.where(on, ans1, ans), xx,
                T.where(on, dc1, dc_da), T.where(on, dans1, dans_da))

    one, zero = T.ones_like(a), T.zeros_like(a)
    v = while_loop(lambda v: T.any(v[0]), body, (enabled, a, one, one, x, zero, zero))
    ans, dans_da = v[3], v[6]
    if mode == _VALUE:
        return (ans * ax) / a
    dlogax_da = T.log(x) - digamma(a + 1.0)
    if mode == _DERIVATIVE:
        return ax * (ans * dlogax_da + dans_da) / a
    return -(dans_da + ans * dlogax_da) * x / a


def _igammac_fraction(ax, x, a, enabled, mode):
    eps = _eps(x)

    def cond(v):
        return (v[5] < 2000.0) & T.any(v[0])

    def body(v):
        (on, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2,
         dpkm2, dqkm2, dpkm1, dqkm1, dans) = v
        c = c + 1.0
        y1 = y + 1.0
        z1 = z + 2.0
        yc = y1 * c
        pk = pkm1 * z1 - pkm2 * yc
        qk = qkm1 * z1 - qkm2 * yc
        nz = qk != 0
        r = pk / qk
        t1 = T.where(nz, T.abs((ans - r) / r), T.ones_like(r))
        ans1 = T.where(nz, r, ans)
        dpk = dpkm1 * z1 - pkm1 - dpkm2 * yc + pkm2 * c
        dqk = dqkm1 * z1 - qkm1 - dqkm2 * yc + qkm2 * c
        dans1 = T.where(nz, (dpk - ans1 * dqk) / qk, dans)
        grad_cond = T.where(nz, T.abs(dans1 - dans), T.ones_like(dans))
        n_pkm2, n_pkm1, n_qkm2, n_qkm1 = pkm1, pk, qkm1, qk
        n_dpkm2, n_dqkm2, n_dpkm1, n_dqkm1 = dpkm1, dqkm1, dpk, dqk
        rescale = T.abs(pk) > 1.0 / eps
        n_pkm2, n_pkm1, n_qkm2, n_qkm1, n_dpkm2, n_dqkm2, n_dpkm1, n_dqkm1 = (
            T.where(rescale, w * eps, w) for w in
            (n_pkm2, n_pkm1, n_qkm2, n_qkm1, n_dpkm2, n_dqkm2, n_dpkm1, n_dqkm1))
        go = on & (t1 > eps) if mode == _VALUE else on & (grad_cond > eps)
        return (go, T.where(on, ans1, ans), T.where(on, t1, t), T.where(on, y1, y),
                T.where(on, z1, z), c, T.where(on, n_pkm1, pkm1), T.where(on, n_qkm1, qkm1),
                T.where(on, n_pkm2, pkm2), T.where(on, n_qkm2, qkm2),
                T.where(on, n_dpkm2, dpkm2), T.where(on, n_dqkm2, dqkm2),
                T.where(on, n_dpkm1, dpkm1), T.where(on, n_dqkm1, dqkm1),
                T.where(on, dans1, dans))

    y = 1.0 - a
    z = x + y + 1.0
    c = T.zeros((), x.dtype)
    pkm2, qkm2 = T.ones_like(x), x
    pkm1 = x + 1.0
    qkm1 = z * x
    ans = pkm1 / qkm1
    zero = T.zeros_like(x)
    dqkm1 = -x
    dans = (zero - ans * dqkm1) / qkm1
    v = while_loop(cond, body, (enabled, ans, T.ones_like(x), y, z, c, pkm1, qkm1, pkm2, qkm2,
                                zero, zero, zero, dqkm1, dans))
    ans = v[1]
    if mode == _VALUE:
        return ans * ax
    dlogax_da = T.log(x) - digamma(a)
    if mode == _DERIVATIVE:
        return ax * (ans * dlogax_da + v[14])
    return -(v[14] + ans * dlogax_da) * x


def _ax(a, x):
    ax = a * T.log(x) - x - gammaln(a)
    underflow = ax < -math.log(float(np.finfo(a.dtype).max))
    return T.exp(ax), underflow


def _igamma(a, x):
    is_nan = T.isnan(a) | T.isnan(x)
    x_inf = x == np.inf
    x0 = x == 0
    domain = (x < 0) | (a < 0) | ((a == 0) & x0) | is_nan
    use_c = (x >= 1) & (x > a)
    ax, underflow = _ax(a, x)
    on = ~(x0 | domain | underflow | x_inf)
    out = T.where(use_c, 1.0 - _igammac_fraction(ax, x, a, on & use_c, _VALUE),
                  _igamma_series(ax, x, a, on & ~use_c, _VALUE))
    out = T.where(x0, 0.0, out)
    out = T.where(x_inf, 1.0, out)
    return T.where(domain, np.nan, out)


def _igammac(a, x):
    is_nan = T.isnan(a) | T.isnan(x)
    a0 = a == 0
    x_inf = x == np.inf
    domain = (x < 0) | (a < 0) | (a0 & (x == 0)) | is_nan
    use_series = (x < 1) | (x < a)
    ax, underflow = _ax(a, x)
    on = ~(domain | underflow | x_inf | a0)
    out = T.where(use_series, 1.0 - _igamma_series(ax, x, a, on & use_series, _VALUE),
                  _igammac_fraction(ax, x, a, on & ~use_series, _VALUE))
    out = T.where(x_inf | a0, 0.0, out)
    return T.where(domain, np.nan, out)


def _igamma_deriv(a, x, mode):
    is_nan = T.isnan(a) | T.isnan(x)
    x0 = x == 0
    domain = (x < 0) | (a <= 0)
    use_c = (x > 1) & (x > a)
    ax, underflow = _ax(a, x)
    on = ~(x0 | domain | underflow | is_nan)
    out = T.where(use_c, -_igammac_fraction(ax, x, a, on & use_c, mode),
                  _igamma_series(ax, x, a, on & ~use_c, mode))
    out = T.where(x0, 0.0, out)
    return T.where(domain | is_nan, np.nan, out)


def _by_differences(fn, index: int):
    """A JVP rule for argument `index` of fn by central differences (step cbrt(eps) relative):
    where jax has no derivative (betainc in a and b; igamma_grad_a, random_gamma_grad and zeta
    in their other argument) tidu gives this one, good to about eps^(2/3) (4e-11 in float64)."""
    def rule(t, out, *primals):
        p = primals[index]
        h = float(np.finfo(p.dtype).eps) ** (1 / 3) * T.where(T.abs(p) > 1, T.abs(p), 1.0)
        up = list(primals)
        down = list(primals)
        up[index], down[index] = p + h, p - h
        return t * ((fn(*up) - fn(*down)) / (2.0 * h))
    return rule


def _differenced(impl, n_args: int):
    """impl as a custom_jvp whose rules are central differences in every argument."""
    f = custom_jvp(impl)
    f.defjvps(*[_by_differences(f, i) for i in range(n_args)])
    return f


_igamma_grad_a_cj = _differenced(lambda a, x: _igamma_deriv(a, x, _DERIVATIVE), 2)
_random_gamma_grad_cj = _differenced(lambda a, x: _igamma_deriv(a, x, _SAMPLE), 2)


def igamma_grad_a(a, x):
    """d/da of the regularized lower incomplete gamma function (jax.lax.igamma_grad_a)."""
    return _igamma_grad_a_cj(*_real("igamma_grad_a", a, x))


def random_gamma_grad(a, x):
    """d/da of a Gamma(a, 1) sample x at fixed uniform noise (jax.lax.random_gamma_grad): the
    implicit reparameterisation gradient -(dP/da) / (dP/dx), P the gamma CDF."""
    return _random_gamma_grad_cj(*_real("random_gamma_grad", a, x))


def _igamma_dx(a, x):
    return T.exp(-x + (a - 1.0) * T.log(x) - gammaln(a))


@custom_jvp
def _igamma_cj(a, x):
    return _igamma(a, x)


_igamma_cj.defjvps(lambda ta, out, a, x: ta * igamma_grad_a(a, x),
                   lambda tx, out, a, x: tx * _igamma_dx(a, x))


@custom_jvp
def _igammac_cj(a, x):
    return _igammac(a, x)


_igammac_cj.defjvps(lambda ta, out, a, x: -(ta * igamma_grad_a(a, x)),
                    lambda tx, out, a, x: -(tx * _igamma_dx(a, x)))


def igamma(a, x):
    """The regularized lower incomplete gamma function P(a, x) (jax.lax.igamma)."""
    return _igamma_cj(*_real("igamma", a, x))


def igammac(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return _igammac_cj(*_real("igammac", a, x))


# ---- the regularized incomplete beta function (Lentz's continued fraction) ----

def _lentz(n_iter, small, threshold, numerator, denominator, a, b, x):
    d0 = denominator(0, x)
    h = T.where(T.abs(d0) < small, small, d0)

    def cond(v):
        return (v[0] < n_iter) & v[1]

    def body(v):
        it, _, c_prev, d_prev, h_prev = v
        num = numerator(it, a, b, x)
        den = denominator(it, x)
        c = den + num / c_prev
        c = T.where(T.abs(c) < small, small, c)
        d = den + num * d_prev
        d = T.where(T.abs(d) < small, small, d)
        d = 1.0 / d
        delta = c * d
        return (it + 1, T.any(T.abs(delta - 1.0) >= threshold), c, d, h_prev * delta)

    v = while_loop(cond, body, (T.ones((), np.int32), T.ones((), bool), h, T.zeros_like(h), h))
    return v[4]


def _betainc_numerator(it, a, b, x):
    even = (it % 2) == 0
    m_int = (it - 1) // 2
    m = T.astype(m_int, x.dtype)
    zero_num = -(a + b) * x / (a + 1.0)
    even_num = T.where(m_int == 0, zero_num,
                       -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)))
    odd_num = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m))
    return T.where(it == 1, T.ones_like(x), T.where(even, even_num, odd_num))


def _betainc_denominator(it, x):
    return T.where(it == 0, T.zeros_like(x), T.ones_like(x))


def _betainc(a, b, x):
    fi = np.finfo(a.dtype)
    a_zero = (a == 0) | (b == np.inf)
    b_zero = (b == 0) | (a == np.inf)
    x0, x1 = x == 0, x == 1
    is_nan = T.isnan(a) | T.isnan(b) | T.isnan(x)
    res_zero = (b_zero & ~x1) | (a_zero & x0)
    res_one = (a_zero & ~x0) | (b_zero & x1)
    res_nan = (a < 0) | (b < 0) | (x < 0) | (x > 1) | (a_zero & b_zero) | is_nan
    fast = x < (a + 1.0) / (a + b + 2.0)
    a, b, x = T.where(fast, a, b), T.where(fast, b, a), T.where(fast, x, 1.0 - x)
    half_eps = float(fi.eps) / 2
    frac = _lentz(200 if a.dtype == np.float32 else 600, half_eps, half_eps,
                  _betainc_numerator, _betainc_denominator, a, b, x)
    very_small = float(fi.tiny) * 2
    lbeta_small_a = gammaln(b) - gammaln(a + b)
    lbeta = gammaln(a) + lbeta_small_a
    factor = T.where(a < very_small, T.exp(T.log1p(-x) * b - lbeta_small_a),
                     T.exp(T.log(x) * a + T.log1p(-x) * b - lbeta) / a)
    out = frac * factor
    out = T.where(fast, out, 1.0 - out)
    out = T.where(res_zero, 0.0, out)
    out = T.where(res_one, 1.0, out)
    return T.where(res_nan, np.nan, out)


@custom_jvp
def _betainc_cj(a, b, x):
    return _betainc(a, b, x)


def _betainc_dx(tx, out, a, b, x):
    lbeta = gammaln(a) + gammaln(b) - gammaln(a + b)
    return tx * T.exp((b - 1.0) * T.log1p(-x) + (a - 1.0) * T.log(x) - lbeta)


_betainc_cj.defjvps(_by_differences(_betainc_cj, 0), _by_differences(_betainc_cj, 1),
                    _betainc_dx)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (jax.lax.betainc). Its derivative in
    x is exact; in a and b (which jax refuses) it is a central difference, good to ~4e-11."""
    return _betainc_cj(*_real("betainc", a, b, x))


# ---- Bessel functions I0, I1, exponentially scaled ----

def _chebyshev(x, coefficients):
    b0 = T.zeros_like(x)
    b1 = b0
    b2 = b0
    for c in coefficients:
        b2 = b1
        b1 = b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


# Cephes' i0e: Chebyshev coefficients of exp(-x) I0(x) on [0, 8] and of
# exp(-x) sqrt(x) I0(x) on (8, inf) (float64; float32 uses the last 18 and 7)
_I0E_A = (
    -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
    1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
    9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
    1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
    -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
    1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
    -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
    1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1)
_I0E_B = (
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
    3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
    -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
    7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
    -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
    3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
    2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
    8.04490411014108831608E-1)


def _i0e(x):
    single = x.dtype == np.float32
    ca, cb = (_I0E_A[-18:], _I0E_B[-7:]) if single else (_I0E_A, _I0E_B)
    ax = T.abs(x)
    small = _chebyshev(0.5 * ax - 2.0, ca)
    safe = T.where(ax > 8.0, ax, 8.0)
    large = _chebyshev(32.0 / safe - 2.0, cb) / T.sqrt(safe)
    return T.where(ax <= 8.0, small, large)


_I1E_SWITCH = 20.0


def _i1e(x):
    """exp(-|x|) I1(x): the power series sum (x/2)^(2k+1) / (k! (k+1)!) below 20 (70 terms:
    all positive, so it sums to rounding), the asymptotic series above (its smallest term there
    is about exp(-40))."""
    ax = T.abs(x)
    s = T.where(ax <= _I1E_SWITCH, ax, 0.0)
    q = 0.25 * s * s
    term = 0.5 * s
    acc = term
    for k in range(1, 70):
        term = term * q / (k * (k + 1.0))
        acc = acc + term
    series = acc * T.exp(-s)
    big = T.where(ax > _I1E_SWITCH, ax, _I1E_SWITCH + 1.0)
    term = T.ones_like(big)
    acc = term
    for k in range(1, 30):
        term = term * ((2 * k - 1) ** 2 - 4.0) / (8.0 * k * big)
        acc = acc + term
    asym = acc / T.sqrt(2 * math.pi * big)
    return T.sign(x) * T.where(ax <= _I1E_SWITCH, series, asym)


@custom_jvp
def _i0e_cj(x):
    return _i0e(x)


@custom_jvp
def _i1e_cj(x):
    return _i1e(x)


_i0e_cj.defjvps(lambda t, y, x: t * (_i1e_cj(x) - T.sign(x) * y))


def _i1e_dx(t, y, x):
    eps = _eps(x)
    not_tiny = T.abs(x) > eps
    safe = T.where(not_tiny, x, eps)
    dy = _i0e_cj(safe) - y * (T.sign(safe) + 1.0 / safe)
    return t * T.where(not_tiny, dy, 0.5)


_i1e_cj.defjvps(_i1e_dx)


def bessel_i0e(x):
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0."""
    return _i0e_cj(*_real("bessel_i0e", x))


def bessel_i1e(x):
    """exp(-|x|) I1(x), the exponentially scaled modified Bessel function of order 1."""
    return _i1e_cj(*_real("bessel_i1e", x))


# ---- Hurwitz zeta and polygamma ----

# B_2j / (2j)!, j = 1..12: the Euler-Maclaurin corrections
_EM = tuple(float(b) / math.factorial(2 * j) for j, b in enumerate(
    (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798,
     -174611 / 330, 854513 / 138, -236364091 / 2730), start=1))
_ZETA_N = 10


def _zeta(s, q):
    bad_q = q <= 0
    qs = T.where(bad_q, 1.0, q)
    ss = T.where(s > 1, s, 2.0)
    acc = T.zeros_like(qs)
    for k in range(_ZETA_N):
        acc = acc + (qs + k) ** -ss
    w = qs + _ZETA_N
    w_s = w ** -ss
    acc = acc + w * w_s / (ss - 1.0) + 0.5 * w_s
    rise = ss  # s (s+1) ... (s+2j-2)
    wp = w_s / w  # w^(-s-1)
    for j, c in enumerate(_EM, start=1):
        acc = acc + c * rise * wp
        rise = rise * (ss + 2 * j - 1) * (ss + 2 * j)
        wp = wp / (w * w)
    out = T.where(s == 1, np.inf, T.where(s < 1, np.nan, acc))
    pole = bad_q & (q == T.floor(q))
    return T.where(pole, np.inf, T.where(bad_q, np.nan, out))


@custom_jvp
def _zeta_cj(s, q):
    return _zeta(s, q)


_zeta_cj.defjvps(_by_differences(_zeta_cj, 0),
                 lambda tq, out, s, q: tq * (-s * _zeta_cj(s + 1.0, q)))


def zeta(x, q):
    """The Hurwitz zeta function sum_k (q + k)^-x for x > 1 (jax.lax.zeta): inf at x == 1,
    NaN for x < 1; inf at q = 0, -1, -2, ..., NaN for other q < 0 (scipy computes some of
    those). d/dq = -x zeta(x + 1, q); d/dx (which jax refuses) by central differences."""
    return _zeta_cj(*_real("zeta", x, q))


def polygamma(m, x):
    """The m-th derivative of digamma, for integer m >= 0 (jax.lax.polygamma):
    (-1)^(m+1) m! zeta(m + 1, x); NaN for a non-integer or negative m."""
    m, x = _real("polygamma", m, x)
    mm = T.where((m >= 1) & (m == T.floor(m)), m, 1.0)
    sign = T.where(T.floor(mm) % 2 == 0, -1.0, 1.0)
    fact = T.exp(gammaln(mm + 1.0))
    out = sign * fact * zeta(mm + 1.0, x)
    out = T.where(m == 0, digamma(x), out)
    return T.where((m < 0) | (m != T.floor(m)), np.nan, out)


# td.scipy.special's names that need loops (the numpy layer cannot make them itself)
_special._register_loops(igamma=igamma, igammac=igammac, betainc=betainc, i0e=bessel_i0e,
                         i1e=bessel_i1e, zeta=zeta, polygamma=polygamma)
# td.scipy.linalg.expm_frechet is jax's jvp of expm: the numpy layer has no jvp of its own
_special._register_loops(jvp=_jvp)
