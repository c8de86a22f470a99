"""jax.random's transforms of the basic draws: ``rademacher``, ``maxwell``,
``double_sided_maxwell``, ``weibull_min``, ``rayleigh``, ``pareto``, ``wald``, ``lognormal``,
``geometric``, ``triangular``, ``f``, ``generalized_normal``, ``ball``, ``binomial``,
``multinomial`` and ``clone``.  Each is
jax's algorithm step for step (the same key splits, the same draws, the same arithmetic), so the
same key gives jax's numbers, up to the last-bit differences of the elementwise functions that
``tidu.random.distributions`` describes.  Default dtypes are jax's under x64."""

from __future__ import annotations

import numpy as np

import tidu as td
from tidu.graph.dtypes import kind_of, to_inexact_dtype
from tidu.random.distributions import _float, _normal, _uniform, bernoulli, exponential
from tidu.random.gamma import chisquare, gamma
from tidu.random.keys import check_key, eager, shape_of, split
from tidu.trace.tracer import _current, _lift, as_inexact, result_type

__all__ = ["ball", "binomial", "clone", "double_sided_maxwell", "f", "generalized_normal",
           "geometric", "lognormal", "maxwell", "multinomial", "pareto", "rademacher", "rayleigh",
           "triangular", "wald", "weibull_min"]


def _param(x, dt=None):
    """A parameter traced, in dt when given (jax's convert_element_type); without dt a Python
    scalar stays one, so it is weakly typed in the arithmetic (as a jax argument is)."""
    if dt is None and isinstance(x, (int, float, complex)):
        return x
    x = _lift(_current(), x)
    return x if dt is None else x.astype(dt)


def _shape(name, shape, *params):
    """jax's _check_broadcast_shapes: `shape` when given (the parameters must broadcast to it),
    else the parameters' broadcast shape."""
    shapes = [tuple(np.shape(p)) for p in params]
    if shape is None:
        return tuple(np.broadcast_shapes(*shapes))
    shape = shape_of(shape)
    try:
        ok = np.broadcast_shapes(shape, *shapes) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{name}: shape {shape} is not broadcast-compatible with the "
                         f"parameters' shapes {shapes}")
    return shape


def clone(key):
    """``jax.random.clone``: the key itself (jax's is an identity outside key-reuse checking)."""
    return key


@eager("shape", "dtype")
def rademacher(key, shape=(), dtype=None):
    """``jax.random.rademacher``: -1 or 1 with equal probability, 2 bernoulli(0.5) - 1 in
    dtype (int64 by default)."""
    dt = np.dtype("int64") if dtype is None else np.dtype(dtype)
    b = bernoulli(check_key("rademacher", key), 0.5, shape_of(shape)).astype(dt)
    return (2 * b - 1).astype(dt)


@eager("shape", "dtype")
def maxwell(key, shape=(), dtype=None):
    """``jax.random.maxwell``: the norm of three standard normal draws."""
    dt = _float("maxwell", dtype)
    z = _normal(check_key("maxwell", key), shape_of(shape) + (3,), dt)
    return td.linalg.norm(z, axis=-1)


@eager("shape", "dtype")
def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """``jax.random.double_sided_maxwell``: a random sign times a Maxwell draw, scaled and
    shifted; the result's shape is ``shape + broadcast(loc, scale)`` (jax's), or that broadcast
    shape when ``shape`` is empty."""
    dt = _float("double_sided_maxwell", dtype)
    k = check_key("double_sided_maxwell", key)
    loc, scale = _param(loc), _param(scale)
    params = tuple(np.broadcast_shapes(np.shape(loc), np.shape(scale)))
    shape = shape_of(shape) or params
    shape = shape + params
    km, kr = split(k)
    m = maxwell(km, shape, dt)
    sign = rademacher(kr, shape, dt)
    return sign * m * scale + loc


@eager("shape", "dtype")
def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """``jax.random.weibull_min``: the inverse CDF, (-log1p(-u)) ** (1 / concentration) *
    scale."""
    dt = _float("weibull_min", dtype)
    u = _uniform(check_key("weibull_min", key), shape_of(shape), dt, 0.0, 1.0)
    return td.power(-td.log1p(-u), 1.0 / _param(concentration)) * _param(scale)


@eager("shape", "dtype")
def rayleigh(key, scale, shape=None, dtype=None):
    """``jax.random.rayleigh``: scale * sqrt(-2 log u)."""
    dt = _float("rayleigh", dtype)
    k = check_key("rayleigh", key)
    shape = _shape("rayleigh", shape, scale)
    u = _uniform(k, shape, dt)
    scale = td.broadcast_to(_param(scale, dt), shape)
    return scale * td.sqrt(td.log(u) * np.array(-2, dt))


@eager("shape", "dtype")
def pareto(key, b, shape=None, dtype=None):
    """``jax.random.pareto``: exp(e / b), e an exponential draw."""
    dt = _float("pareto", dtype)
    k = check_key("pareto", key)
    shape = _shape("pareto", shape, b)
    return td.exp(exponential(k, shape, dt) / _param(b, dt))


@eager("shape", "dtype")
def wald(key, mean, shape=None, dtype=None):
    """``jax.random.wald``: the inverse Gaussian with unit scale, by Michael, Schucany and Haas'
    transformation of a normal draw, chosen between its two roots by a uniform draw (jax's)."""
    dt = _float("wald", dtype)
    k = check_key("wald", key)
    shape = _shape("wald", shape, mean)
    k1, k2 = split(k)
    mean = td.broadcast_to(_param(mean, dt), shape)
    v = _normal(k1, shape, dt)
    z = _uniform(k2, shape, dt)
    y = v * v
    y_sq = y * y
    mean_sq = mean * mean
    sqrt_term = td.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return td.where(z <= mean / (mean + x), x, mean_sq / x)


@eager("shape", "dtype")
def lognormal(key, sigma=np.float32(1.0), shape=None, dtype=None):
    """``jax.random.lognormal``: exp(sigma * a standard normal draw)."""
    dt = _float("lognormal", dtype)
    k = check_key("lognormal", key)
    shape = _shape("lognormal", shape, sigma)
    return td.exp(_normal(k, shape, dt) * _param(sigma, dt))


@eager("shape", "dtype")
def geometric(key, p, shape=None, dtype=None):
    """``jax.random.geometric``: floor(log u / log1p(-p)) + 1 in dtype (int64 by default), the
    uniform draw in p's inexact dtype with u = 0 taken as 1 (jax's)."""
    dt = np.dtype("int64") if dtype is None else np.dtype(dtype)
    if kind_of(dt) not in "iu":
        raise ValueError(f"dtype argument to `geometric` must be an int dtype, got {dt}")
    k = check_key("geometric", key)
    shape = _shape("geometric", shape, p)
    p = as_inexact(p)  # jax's promote_dtypes_inexact
    u = _uniform(k, shape, p.dtype)
    u = td.where(u == 0, np.array(1, p.dtype), u)
    g = td.floor(td.log(u) / td.broadcast_to(td.log1p(-p), shape)) + 1
    return g.astype(dt)


@eager("shape", "dtype")
def triangular(key, left, mode, right, shape=None, dtype=None):
    """``jax.random.triangular``: the inverse CDF on either side of the mode."""
    dt = _float("triangular", dtype)
    k = check_key("triangular", key)
    shape = _shape("triangular", shape, left, mode, right)
    left, right, mode = (td.broadcast_to(_param(v, dt), shape) for v in (left, right, mode))
    fc = (mode - left) / (right - left)
    u = _uniform(k, shape, dt)
    out1 = left + td.sqrt(u * (right - left) * (mode - left))
    out2 = right - td.sqrt((1 - u) * (right - left) * (right - mode))
    return td.where(u < fc, out1, out2)


@eager("shape", "dtype")
def f(key, dfnum, dfden, shape=None, dtype=None):
    """``jax.random.f``: the ratio of two chi-square draws, each over its degrees of freedom."""
    dt = _float("f", dtype)
    k = check_key("f", key)
    shape = _shape("f", shape, dfnum, dfden)
    dfden, dfnum = _param(dfden, dt), _param(dfnum, dt)
    key_dfd, key_dfn = split(k)
    num = chisquare(key_dfn, dfnum, shape, dt) / dfnum
    den = chisquare(key_dfd, dfden, shape, dt) / dfden
    return num / den


@eager("shape", "dtype")
def generalized_normal(key, p, shape=(), dtype=None):
    """``jax.random.generalized_normal``: density proportional to exp(-|x|^p), a random sign
    times a Gamma(1 / p) draw to the power 1 / p."""
    dt = _float("generalized_normal", dtype)
    k = check_key("generalized_normal", key)
    shape = shape_of(shape)
    keys = split(k)
    g = gamma(keys[0], 1 / _param(p), shape, dt)
    r = rademacher(keys[1], shape, dt)
    return r * g ** (1 / _param(p))


@eager("d", "shape", "dtype")
def ball(key, d, p=2, shape=(), dtype=None):
    """``jax.random.ball``: uniform in the unit p-norm ball of dimension d, shape ``shape +
    (d,)`` (Barthe, Guedon, Mendelson and Naor's construction, as jax's)."""
    dt = _float("ball", dtype)
    k = check_key("ball", key)
    d = int(d)
    if d < 1:
        raise ValueError(f"ball: d must be a positive int, got {d}")
    shape = shape_of(shape)
    k1, k2 = split(k)
    g = generalized_normal(k1, p, (*shape, d), dt)
    e = exponential(k2, shape, dt)
    r = (td.sum(td.abs(g) ** p, axis=-1) + e) ** (1 / _param(p))
    return g / r[..., None]


# ---- binomial and multinomial (jax's: inversion for small means, BTRS rejection otherwise) ----

_STIRLING_TAIL = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                           0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                           0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                           0.00833056343336287])


def _stirling_approx_tail(k):
    """log(k!) minus its Stirling approximation: a table for k <= 9, the series above."""
    table = _lift(_current(), _STIRLING_TAIL.astype(k.dtype))
    use_table = k <= 9
    k = td.clip(k, 0.0, 9.0)
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    return td.where(use_table, table[td.floor(k).astype(np.int32)], approx)


def _binomial_inversion(key, count, prob, shape):
    """Counts of geometric waiting times until they pass `count` (jax's, for count * p <= 10)."""
    log1minusprob = td.log1p(-prob)

    def body(carry):
        num_geom, geom_sum, k = carry
        subkey, k = split(k)
        num_geom = td.where(geom_sum <= count, num_geom + 1, num_geom)
        u = _uniform(subkey, shape, prob.dtype)
        geom_sum = geom_sum + td.ceil(td.log(u) / log1minusprob)
        return num_geom, geom_sum, k

    zeros = td.zeros(shape, prob.dtype)
    num_geom, _, _ = td.while_loop(lambda c: td.any(c[1] <= count), body, (zeros, zeros, key))
    return num_geom - 1


def _btrs(key, count, prob, shape):
    """Hormann's transformed rejection with squeeze (BTRS), as jax's."""
    stddev = td.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = td.floor((count + 1) * prob)

    def body(carry):
        k_out, accepted, k = carry
        ks = split(k, 3)
        k, k0, k1 = ks[0], ks[1], ks[2]
        u = _uniform(k0, shape, prob.dtype)
        v = _uniform(k1, shape, prob.dtype)
        u = u - 0.5
        us = 0.5 - td.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        kk = td.floor((2 * a / us + b) * u + c)
        reject = (kk < 0) | (kk > count)
        v = td.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * td.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * td.log((count - m + 1) / (count - kk + 1))
              + (kk + 0.5) * td.log(r * (count - kk + 1) / (kk + 1))
              + _stirling_approx_tail(m) + _stirling_approx_tail(count - m)
              - _stirling_approx_tail(kk) - _stirling_approx_tail(count - kk))
        accept = accept1 | (~reject & (v <= ub))
        return td.where(accept, kk, k_out), accepted | accept, k

    init = (td.full(shape, -1, prob.dtype), td.zeros(shape, bool), key)
    return td.while_loop(lambda c: td.any(~c[1]), body, init)[0]


@eager("shape", "dtype")
def binomial(key, n, p, shape=None, dtype=None):
    """``jax.random.binomial``: inversion of geometric waiting times where n * min(p, 1 - p) <=
    10, BTRS rejection elsewhere (both drawn from the same key, as jax's, then selected); NaN
    for n < 0 or NaN, p < 0 or NaN; inf for n = inf; floats of dtype (float64 by default)."""
    dt = _float("binomial", dtype)
    k = check_key("binomial", key)
    shape = _shape("binomial", shape, n, p)
    prob = as_inexact(p)  # jax's promote_dtypes_inexact
    count = td.broadcast_to(_lift(_current(), n).astype(prob.dtype), shape)
    prob = td.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = td.where(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = td.isnan(count) | (count < 0.0)
    count_inf = td.isinf(count)
    q_is_nan = td.isnan(q)
    q_l_0 = q < 0.0
    q = td.where(q_is_nan | q_l_0, td.full_like(q, 0.01), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = td.floor(count)
    count_inv = td.where(use_inversion, count, td.zeros_like(count))
    count_btrs = td.where(use_inversion, td.full_like(count, 1e4), count)
    q_btrs = td.where(use_inversion, td.full_like(q, 0.5), q)
    samples = td.where(use_inversion, _binomial_inversion(k, count_inv, q, shape).astype(dt),
                       _btrs(k, count_btrs, q_btrs, shape).astype(dt))
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = td.where(invalid, np.array(np.nan, dt), samples)
    samples = td.where(count_inf & ~invalid, np.array(np.inf, dt), samples)
    return td.where(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                    count.astype(dt) - samples)


@eager("shape", "dtype", "unroll")
def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """``jax.random.multinomial``: n draws over the categories of p's last axis, a binomial per
    category (of what is left, with the category's share of the remaining probability) in a
    scan, as jax's."""
    dt = _float("multinomial", dtype)
    k = check_key("multinomial", key)
    inexact = to_inexact_dtype(result_type(n, p))  # jax's promote_dtypes_inexact (weak n)
    n, p = _lift(_current(), n, inexact), _lift(_current(), p, inexact)
    shape = p.shape if shape is None else shape_of(shape)
    n = td.broadcast_to(n, shape[:-1])
    p = td.moveaxis(td.broadcast_to(p, shape), -1, 0)
    remaining = td.lax.cumsum(p, 0, reverse=True)
    ratios = p / td.where(remaining == 0, 1, remaining)
    keys = split(k, ratios.shape[0])

    def body(remainder, ratio_key):
        ratio, kk = ratio_key
        count = binomial(kk, remainder, td.clip(ratio, 0, 1), dtype=remainder.dtype)
        return remainder - count, count

    _, counts = td.scan(body, n, (ratios, keys), unroll=unroll)
    return td.moveaxis(counts, 0, -1).astype(dt)
