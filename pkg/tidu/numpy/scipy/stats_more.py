"""More of jax.scipy.stats, written as jax writes them: the discrete ``binom``, ``betabinom``,
``nbinom``, ``geom``, ``multinomial``; ``dirichlet``; ``pareto``, ``gumbel_l``, ``gumbel_r``,
``gennorm``, ``truncnorm``, ``vonmises``, ``wrapcauchy``; and ``sem``, ``rankdata``, ``mode``.

``rankdata`` and ``mode`` compare every pair of elements along the axis (no sort, no unique):
O(n^2) work, exact, and differentiable nowhere (as jax's)."""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np

from tidu.graph.dtypes import kind_of
from tidu.numpy.core import abs as _abs
from tidu.numpy.core import astype, concatenate, cos, exp, expm1, log, log1p, reshape, sign, where
from tidu.numpy.core import max as _max
from tidu.numpy.core import sum as _sum
from tidu.numpy.nn import log1mexp, logsumexp
from tidu.numpy.reductions import std
from tidu.numpy.scipy.special import (
    _inexact,
    betaln,
    gammainc,
    gammaln,
    i0e,
    log_ndtr,
    ndtr,
    xlog1py,
    xlogy,
)
from tidu.numpy.shapes import moveaxis
from tidu.numpy.sorting import all as _all
from tidu.numpy.sorting import any as _any
from tidu.numpy.sorting import min as _min
from tidu.numpy.statistics import nanstd
from tidu.numpy.ufuncs import floor, isnan
from tidu.trace.tracer import _lift, _trace_of

__all__ = ["betabinom", "binom", "dirichlet", "gennorm", "geom", "gumbel_l", "gumbel_r", "mode",
           "ModeResult", "multinomial", "nbinom", "pareto", "rankdata", "sem", "truncnorm",
           "vonmises", "wrapcauchy"]


def _ns(name, **fns):
    for fname, f in fns.items():
        f.__name__ = fname
        f.__qualname__ = f"{name}.{fname}"
    return SimpleNamespace(__name__=f"tidu.scipy.stats.{name}", **fns)


def _exp_of(logf):
    """exp of logf, with logf's signature (so pdf takes logpdf's parameters by name)."""
    @functools.wraps(logf)
    def f(*args, **kwargs):
        return exp(logf(*args, **kwargs))
    return f


# ---- discrete ----

def _binom_logpmf(k, n, p, loc=0):
    k, n, p, loc = _inexact(k, n, p, loc)
    y = k - loc
    comb = gammaln(n + 1) - (gammaln(y + 1) + gammaln(n - y + 1))
    lin = xlogy(y, p) + xlog1py(n - y, -p)
    lp = where(((y == 0) & (n == 0)) | (lin == 0), 0.0, comb + lin)
    return where((k >= loc) & (k < loc + n + 1), lp, -np.inf)


def _betabinom_logpmf(k, n, a, b, loc=0):
    k, n, a, b, loc = _inexact(k, n, a, b, loc)
    y = floor(k) - loc
    combiln = -(log1p(n) + betaln(n - y + 1, y + 1))
    lp = combiln + (betaln(y + a, n - y + b) - betaln(a, b))
    lp = where((y == 0) & (n == 0), 0.0, lp)
    lp = where((y < -loc) | (y > n) | (y + a <= 0), -np.inf, lp)
    return where((n < 0) | (a <= 0) | (b <= 0), np.nan, lp)


def _nbinom_logpmf(k, n, p, loc=0):
    k, n, p, loc = _inexact(k, n, p, loc)
    y = k - loc
    comb = gammaln(y + n) - gammaln(n) - gammaln(y + 1)
    return where(k < loc, -np.inf, comb + (xlogy(n, p) + xlogy(y, 1 - p)))


def _geom_logpmf(k, p, loc=0):
    k, p, loc = _inexact(k, p, loc)
    x = k - loc
    return where(x <= 0, -np.inf, xlog1py(x - 1, -p) + log(p))


def _multinomial_logpmf(x, n, p):
    t = _trace_of(x, n, p)
    x, n, p = _lift(t, x), _lift(t, n), _lift(t, p)
    if kind_of(x.dtype) not in "iu" or kind_of(n.dtype) not in "iu":
        raise ValueError(f"multinomial.logpmf: x and n must be of integer type; got "
                         f"x.dtype={x.dtype}, n.dtype={n.dtype}")
    (p,) = _inexact(p)
    x, n = astype(x, p.dtype), astype(n, p.dtype)
    lp = gammaln(n + 1) + _sum(xlogy(x, p) - gammaln(x + 1), axis=-1)
    return where(_sum(x) == n, lp, -np.inf)


binom = _ns("binom", logpmf=_binom_logpmf, pmf=_exp_of(_binom_logpmf))
betabinom = _ns("betabinom", logpmf=_betabinom_logpmf, pmf=_exp_of(_betabinom_logpmf))
nbinom = _ns("nbinom", logpmf=_nbinom_logpmf, pmf=_exp_of(_nbinom_logpmf))
geom = _ns("geom", logpmf=_geom_logpmf, pmf=_exp_of(_geom_logpmf))
multinomial = _ns("multinomial", logpmf=_multinomial_logpmf, pmf=_exp_of(_multinomial_logpmf))


# ---- dirichlet ----

def _dirichlet_logpdf(x, alpha):
    t = _trace_of(x, alpha)
    x, alpha = _lift(t, x), _lift(t, alpha)
    dt = np.result_type(x.dtype, alpha.dtype)
    dt = dt if kind_of(dt) in "fc" else np.dtype(np.float64)
    x, alpha = _lift(t, x, dt), _lift(t, alpha, dt)
    if alpha.ndim != 1:
        raise ValueError(f"dirichlet.logpdf: alpha must be one-dimensional; got alpha.shape="
                         f"{tuple(alpha.shape)}")
    k = alpha.shape[0]
    if x.ndim == 0 or x.shape[0] not in (k, k - 1):
        raise ValueError(f"dirichlet.logpdf: x must have either the same number of entries as "
                         f"alpha or one entry fewer; got x.shape={tuple(x.shape)}, "
                         f"alpha.shape={tuple(alpha.shape)}")
    if x.shape[0] != k:
        x = concatenate([x, 1 - _sum(x, axis=0, keepdims=True)], axis=0)
    norm = _sum(gammaln(alpha)) - gammaln(_sum(alpha))
    if x.ndim > 1:
        alpha = reshape(alpha, (k,) + (1,) * (x.ndim - 1))
    lp = _sum(xlogy(alpha - 1, x), axis=0) - norm
    simplex = _all(x > 0, axis=0) & (_abs(_sum(x, axis=0) - 1) < 1e-6)
    return where(simplex, lp, -np.inf)


dirichlet = _ns("dirichlet", logpdf=_dirichlet_logpdf, pdf=_exp_of(_dirichlet_logpdf))


# ---- pareto ----

def _pareto_logpdf(x, b, loc=0, scale=1):
    x, b, loc, scale = _inexact(x, b, loc, scale)
    sx = (x - loc) / scale
    lp = -(log(scale / b) + (b + 1) * log(sx))
    return where(x < loc + scale, -np.inf, lp)


def _pareto_cdf(x, b, loc=0, scale=1):
    x, b, loc, scale = _inexact(x, b, loc, scale)
    sx = (x - loc) / scale
    return where(x < loc + scale, 0.0, 1 - sx ** -b)


def _pareto_logcdf(x, b, loc=0, scale=1):
    x, b, loc, scale = _inexact(x, b, loc, scale)
    sx = (x - loc) / scale
    return where(x < loc + scale, -np.inf, log1p(-(sx ** -b)))


def _pareto_logsf(x, b, loc=0, scale=1):
    x, b, loc, scale = _inexact(x, b, loc, scale)
    sx = (x - loc) / scale
    return where(x < loc + scale, 0.0, -(b * log(sx)))


def _pareto_ppf(q, b, loc=0, scale=1):
    q, b, loc, scale = _inexact(q, b, loc, scale)
    v = loc + scale * (1 - q) ** -(1 / b)
    return where(isnan(q) | (q < 0) | (q > 1), np.nan, v)


pareto = _ns("pareto", logpdf=_pareto_logpdf, pdf=_exp_of(_pareto_logpdf), cdf=_pareto_cdf,
             logcdf=_pareto_logcdf, logsf=_pareto_logsf, sf=_exp_of(_pareto_logsf),
             ppf=_pareto_ppf)


# ---- gumbel_l, gumbel_r ----

def _gumbel(x, loc, scale):
    x, loc, scale = _inexact(x, loc, scale)
    return (x - loc) / scale, scale > 0, scale


def _gl_logpdf(x, loc=0, scale=1):
    z, ok, scale = _gumbel(x, loc, scale)
    return where(ok, xlogy(-1.0, scale) + (z - exp(z)), np.nan)


def _gl_logcdf(x, loc=0, scale=1):
    z, ok, _ = _gumbel(x, loc, scale)
    return where(ok, log(-expm1(-exp(z))), np.nan)


def _gl_logsf(x, loc=0, scale=1):
    z, ok, _ = _gumbel(x, loc, scale)
    return where(ok, -exp(z), np.nan)


def _gl_ppf(p, loc=0, scale=1):
    p, loc, scale = _inexact(p, loc, scale)
    q = loc + scale * log(xlog1py(-1.0, -p))
    return where((p > 0) & (p < 1), q, np.nan)


def _gr_logpdf(x, loc=0, scale=1):
    z, ok, scale = _gumbel(x, loc, scale)
    return where(ok, xlogy(-1.0, scale) - (z + exp(-z)), np.nan)


def _gr_logcdf(x, loc=0, scale=1):
    z, ok, _ = _gumbel(x, loc, scale)
    return where(ok, -exp(-z), np.nan)


def _gr_sf(x, loc=0, scale=1):
    z, ok, _ = _gumbel(x, loc, scale)
    return where(ok, 1 - exp(-exp(-z)), np.nan)


def _gr_logsf(x, loc=0, scale=1):
    z, ok, _ = _gumbel(x, loc, scale)
    return where(ok, log1mexp(exp(-z)), np.nan)


def _gr_ppf(p, loc=0, scale=1):
    p, loc, scale = _inexact(p, loc, scale)
    q = loc - scale * log(xlogy(-1.0, p))
    return where((p > 0) & (p < 1), q, np.nan)


gumbel_l = _ns("gumbel_l", logpdf=_gl_logpdf, pdf=_exp_of(_gl_logpdf), logcdf=_gl_logcdf,
               cdf=_exp_of(_gl_logcdf), ppf=_gl_ppf, sf=_exp_of(_gl_logsf), logsf=_gl_logsf)
gumbel_r = _ns("gumbel_r", logpdf=_gr_logpdf, pdf=_exp_of(_gr_logpdf), logcdf=_gr_logcdf,
               cdf=_exp_of(_gr_logcdf), ppf=_gr_ppf, sf=_gr_sf, logsf=_gr_logsf)


# ---- gennorm, vonmises, wrapcauchy ----

def _gennorm_logpdf(x, beta):
    x, beta = _inexact(x, beta)
    return log(0.5 * beta) - gammaln(1 / beta) - _abs(x) ** beta


def _gennorm_cdf(x, beta):
    x, beta = _inexact(x, beta)
    return 0.5 * (1 + sign(x) * gammainc(1 / beta, _abs(x) ** beta))


gennorm = _ns("gennorm", logpdf=_gennorm_logpdf, pdf=_exp_of(_gennorm_logpdf), cdf=_gennorm_cdf)


def _vonmises_logpdf(x, kappa):
    x, kappa = _inexact(x, kappa)
    return where(kappa > 0, kappa * (cos(x) - 1) - log(2 * np.pi * i0e(kappa)), np.nan)


vonmises = _ns("vonmises", logpdf=_vonmises_logpdf, pdf=_exp_of(_vonmises_logpdf))


def _wrapcauchy_logpdf(x, c):
    x, c = _inexact(x, c)
    inside = (x >= 0) & (x <= np.pi * 2)
    v = log(1 - c * c) - math.log(2 * np.pi) - log(1 + c * c - 2 * c * cos(x))
    return where((c > 0) & (c < 1), where(inside, v, -np.inf), np.nan)


wrapcauchy = _ns("wrapcauchy", logpdf=_wrapcauchy_logpdf, pdf=_exp_of(_wrapcauchy_logpdf))


# ---- truncnorm ----

def _log_diff(x, y):
    """log(exp(x) - exp(y)), as jax's logsumexp with weights (1, -1): NaN where negative, by a
    select, so no derivative flows through that branch."""
    out, sgn = logsumexp(concatenate([x[None], y[None]], axis=0), axis=0,
                         b=concatenate([x[None] * 0 + 1, y[None] * 0 - 1], axis=0),
                         return_sign=True)
    return where(sgn < 0, np.nan, out)


def _log_gauss_mass(a, b):
    left, right = b <= 0, a > 0
    central = ~(left | right)
    at, bt = where(right, -b, a), where(right, -a, b)
    tail = _log_diff(log_ndtr(bt), log_ndtr(at))
    return where(central, log1p(-ndtr(a) - ndtr(-b)), tail)


def _truncnorm_logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _inexact(x, a, b, loc, scale)
    s2 = scale * scale
    normal = (log((2 * math.pi) * s2) + (x - loc) * (x - loc) / s2) / -2
    v = normal - _log_gauss_mass(a, b)
    xs = (x - loc) / scale
    v = where((xs < a) | (xs > b), -np.inf, v)
    return where(a >= b, np.nan, v)


def _truncnorm_logcdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _inexact(x, a, b, loc, scale)
    x = (x - loc) / scale
    lab = _log_gauss_mass(a, b)
    lcdf = _log_gauss_mass(a, x) - lab
    lsf = _log_gauss_mass(x, b) - lab
    out = where(x >= b, 0.0, where(x <= a, -np.inf,
                where(lcdf > -0.1, log1p(-exp(lsf)), where(x > a, lcdf, 0.0))))
    return where(a >= b, np.nan, out)


def _truncnorm_logsf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _inexact(x, a, b, loc, scale)
    return _truncnorm_logcdf(-x, -b, -a, -loc, scale)


truncnorm = _ns("truncnorm", logpdf=_truncnorm_logpdf, pdf=_exp_of(_truncnorm_logpdf),
                logcdf=_truncnorm_logcdf, cdf=_exp_of(_truncnorm_logcdf),
                logsf=_truncnorm_logsf, sf=_exp_of(_truncnorm_logsf))


# ---- sem, rankdata, mode ----

def sem(a, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *,
        keepdims: bool = False):
    """The standard error of the mean: std(ddof) / sqrt(n)."""
    (b,) = _inexact(a)
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return std(b, axis, ddof=ddof, keepdims=keepdims) / math.sqrt(size)
    if nan_policy == "omit":
        count = _sum(astype(~isnan(b), b.dtype), axis, keepdims=keepdims)
        return nanstd(b, axis, ddof=ddof, keepdims=keepdims) / count ** 0.5
    raise ValueError(f"sem: {nan_policy} is not supported")


def _nan_policy(name, nan_policy):
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ValueError(f"{name}: illegal nan_policy value {nan_policy!r}; expected one of "
                         f"{{'propagate', 'omit', 'raise'}}")
    if nan_policy != "propagate":
        raise NotImplementedError(f"{name}: nan_policy={nan_policy!r} is not implemented "
                                  f"(jax's neither)")


def rankdata(a, method: str = "average", *, axis: int | None = None,
             nan_policy: str = "propagate"):
    """Ranks (from 1) of the elements along ``axis`` (None: the flattened array); ties by
    ``method`` ('average', 'min', 'max', 'dense', 'ordinal'); all NaN if any NaN."""
    _nan_policy("rankdata", nan_policy)
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ValueError(f"rankdata: unknown method '{method}'")
    x = _lift(_trace_of(a), a)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    x = moveaxis(x, axis, -1)
    n = x.shape[-1]
    xi, xj = x[..., :, None], x[..., None, :]
    f = np.float64
    less = _sum(astype(xj < xi, f), axis=-1)
    eq = astype(xj == xi, f)
    equal = _sum(eq, axis=-1)
    if method == "ordinal":
        before = np.tril(np.ones((n, n)), -1)  # j < i
        r = less + _sum(eq * before, axis=-1) + 1
    elif method == "min":
        r = less + 1
    elif method == "max":
        r = less + equal
    elif method == "average":
        r = less + (equal + 1) / 2
    else:  # dense: the distinct values below, each counted once
        cnt_j = _sum(eq, axis=-2)[..., None, :]
        r = _sum(astype(xj < xi, f) / cnt_j, axis=-1) + 1
    r = where(_any(isnan(x), axis=-1, keepdims=True), np.nan, r)
    return moveaxis(r, -1, axis)


class ModeResult(NamedTuple):
    """``mode``'s result: the most common value and its count."""
    mode: Any
    count: Any


def mode(a, axis: int | None = 0, nan_policy: str = "propagate", keepdims: bool = False):
    """The most common value along ``axis`` (the smallest among ties) and its count."""
    _nan_policy("mode", nan_policy)
    x = _lift(_trace_of(a), a)
    if x.ndim == 0:
        x = reshape(x, (1,))
    shape = tuple(x.shape)
    if axis is None:
        out_shape = (1,) * len(shape) if keepdims else ()
        x, ax = reshape(x, (-1,)), 0
    else:
        ax = int(axis) % len(shape)
        out_shape = tuple(1 if i == ax else s for i, s in enumerate(shape)) if keepdims \
            else tuple(s for i, s in enumerate(shape) if i != ax)
    x = moveaxis(x, ax, -1)
    if x.shape[-1] == 0:
        return ModeResult(np.full(out_shape, np.nan), np.zeros(out_shape, np.int64))
    counts = _sum(astype(x[..., :, None] == x[..., None, :], np.int64), axis=-1)
    top = _max(counts, axis=-1, keepdims=True)
    big = np.inf if kind_of(x.dtype) in "fc" else np.iinfo(x.dtype).max
    val = _min(where(counts == top, x, big), axis=-1)
    return ModeResult(reshape(val, out_shape), reshape(top, out_shape))
