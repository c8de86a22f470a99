"""``tidu.scipy.stats``: jax.scipy.stats' distributions, with jax's argument names.

Each distribution is a namespace of functions (``td.scipy.stats.norm.logpdf(x, loc, scale)``),
written as jax writes them from ``tidu.scipy.special``.  CDFs that need the incomplete gamma or
beta functions (``gamma.cdf``, ``beta.cdf``, ``t.cdf``, ``poisson.cdf``) are absent: see
docs/numpy.md.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from tidu.numpy.core import abs as _abs
from tidu.numpy.core import exp, expm1, log, log1p, where
from tidu.numpy.core import sum as _sum
from tidu.numpy.linalg import cholesky, diagonal, solve_triangular
from tidu.numpy.nn import sigmoid as expit
from tidu.numpy.scipy.special import (
    _inexact,
    betainc,
    betaln,
    gammainc,
    gammaincc,
    gammaln,
    log_ndtr,
    logit,
    ndtr,
    ndtri,
    xlog1py,
    xlogy,
)
from tidu.numpy.scipy.stats_more import (
    ModeResult,
    betabinom,
    binom,
    dirichlet,
    gennorm,
    geom,
    gumbel_l,
    gumbel_r,
    mode,
    multinomial,
    nbinom,
    pareto,
    rankdata,
    sem,
    truncnorm,
    vonmises,
    wrapcauchy,
)
from tidu.numpy.ufuncs import arctan, clip, floor, isnan, logaddexp, tan
from tidu.numpy.ufuncs import round as _round

__all__ = ["bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon",
           "gamma", "gennorm", "geom", "gumbel_l", "gumbel_r", "laplace", "logistic", "mode",
           "ModeResult", "multinomial", "multivariate_normal", "nbinom", "norm", "pareto",
           "poisson", "rankdata", "sem", "t", "truncnorm", "uniform", "vonmises", "wrapcauchy"]


def _ns(name, **fns):
    for fname, f in fns.items():
        f.__name__ = fname
        f.__qualname__ = f"{name}.{fname}"
    return SimpleNamespace(__name__=f"tidu.scipy.stats.{name}", **fns)


# ---- norm ----

def _norm_logpdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    s2 = scale * scale
    return (log((2 * math.pi) * s2) + (x - loc) * (x - loc) / s2) / -2


def _norm_cdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    return ndtr((x - loc) / scale)


def _norm_logcdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    return log_ndtr((x - loc) / scale)


def _norm_ppf(q, loc=0, scale=1):
    q, loc, scale = _inexact(q, loc, scale)
    return ndtri(q) * scale + loc


norm = _ns(
    "norm",
    logpdf=_norm_logpdf,
    pdf=lambda x, loc=0, scale=1: exp(_norm_logpdf(x, loc, scale)),
    cdf=_norm_cdf,
    logcdf=_norm_logcdf,
    ppf=_norm_ppf,
    sf=lambda x, loc=0, scale=1: _norm_cdf(-_inexact(x)[0], -_inexact(loc)[0], scale),
    logsf=lambda x, loc=0, scale=1: _norm_logcdf(-_inexact(x)[0], -_inexact(loc)[0], scale),
    isf=lambda q, loc=0, scale=1: _norm_ppf(1 - _inexact(q)[0], loc, scale),
)


# ---- multivariate_normal ----

def _mvn_logpdf(x, mean, cov, allow_singular=None):
    if allow_singular is not None:
        raise NotImplementedError("multivariate_normal.logpdf: allow_singular is not "
                                  "supported (jax's neither)")
    x, mean, cov = _inexact(x, mean, cov)[0], _inexact(mean)[0], _inexact(cov)[0]
    if not mean.shape:
        return -0.5 * (x - mean) * (x - mean) / cov - 0.5 * (math.log(2 * math.pi) + log(cov))
    n = mean.shape[-1]
    y = x - mean
    if not cov.shape:
        return (-0.5 * _sum(y * y, -1) / cov) - (n / 2) * (math.log(2 * math.pi) + log(cov))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal.logpdf: cov of shape {cov.shape} does not "
                         f"match a mean of length {n}")
    L = cholesky(cov)
    z = solve_triangular(L, y[..., None], lower=True)[..., 0]
    return (-0.5 * _sum(z * z, -1) - (n / 2) * math.log(2 * math.pi)
            - _sum(log(diagonal(L)), -1))


multivariate_normal = _ns(
    "multivariate_normal",
    logpdf=_mvn_logpdf,
    pdf=lambda x, mean, cov: exp(_mvn_logpdf(x, mean, cov)),
)


# ---- t, gamma, beta ----

def _t_logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = _inexact(x, df, loc, scale)
    sx = (x - loc) / scale
    h = df / 2
    h1 = h + 0.5
    norm_term = gammaln(h) + log(scale * scale * math.pi * df) / 2 - gammaln(h1)
    return -(norm_term + h1 * log1p(sx * sx / df))


t = _ns("t", logpdf=_t_logpdf,
        pdf=lambda x, df, loc=0, scale=1: exp(_t_logpdf(x, df, loc, scale)))


def _gamma_logpdf(x, a, loc=0, scale=1):
    x, a, loc, scale = _inexact(x, a, loc, scale)
    ok = x >= loc
    y = where(ok, (x - loc) / scale, 1.0)
    lp = xlogy(a - 1, y) - y - (gammaln(a) + log(scale))
    return where(ok, lp, -np.inf)


def _gamma_cdf(x, a, loc=0, scale=1):
    x, a, loc, scale = _inexact(x, a, loc, scale)
    y = (x - loc) / scale
    # 0 below the support, its derivatives too (P's derivatives at 0 would be 0 * inf)
    return where(y > 0, gammainc(a, where(y > 0, y, 1.0)), 0.0)


def _gamma_sf(x, a, loc=0, scale=1):
    x, a, loc, scale = _inexact(x, a, loc, scale)
    y = (x - loc) / scale
    return where(y < 0, 1.0, gammaincc(a, y))


gamma = _ns("gamma", logpdf=_gamma_logpdf,
            pdf=lambda x, a, loc=0, scale=1: exp(_gamma_logpdf(x, a, loc, scale)),
            cdf=_gamma_cdf, sf=_gamma_sf,
            logcdf=lambda x, a, loc=0, scale=1: log(_gamma_cdf(x, a, loc, scale)),
            logsf=lambda x, a, loc=0, scale=1: log(_gamma_sf(x, a, loc, scale)))


# chi2(df) is gamma(df / 2) with its scale doubled (as jax's)
def _chi2_logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = _inexact(x, df, loc, scale)
    return _gamma_logpdf(x, df / 2, loc, scale * 2)


def _chi2_cdf(x, df, loc=0, scale=1):
    x, df, loc, scale = _inexact(x, df, loc, scale)
    y = (x - loc) / (scale * 2)
    return where(y > 0, gammainc(df / 2, where(y > 0, y, 1.0)), 0.0)


def _chi2_sf(x, df, loc=0, scale=1):
    x, df, loc, scale = _inexact(x, df, loc, scale)
    return gammaincc(df / 2, clip((x - loc) / (scale * 2), 0, np.inf))


chi2 = _ns("chi2", logpdf=_chi2_logpdf,
           pdf=lambda x, df, loc=0, scale=1: exp(_chi2_logpdf(x, df, loc, scale)),
           cdf=_chi2_cdf, sf=_chi2_sf,
           logcdf=lambda x, df, loc=0, scale=1: log(_chi2_cdf(x, df, loc, scale)),
           logsf=lambda x, df, loc=0, scale=1: log(_chi2_sf(x, df, loc, scale)))


def _beta_logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _inexact(x, a, b, loc, scale)
    y = (x - loc) / scale
    lp = -betaln(a, b) + xlogy(a - 1, y) + xlog1py(b - 1, -y) - log(scale)
    out = where((x > loc + scale) | (x < loc), -np.inf, lp)
    return where((a <= 0) | (b <= 0) | (scale <= 0), np.nan, out)


def _beta_cdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _inexact(x, a, b, loc, scale)
    return betainc(a, b, clip((x - loc) / scale, 0, 1))


def _beta_sf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _inexact(x, a, b, loc, scale)
    return betainc(b, a, 1 - clip((x - loc) / scale, 0, 1))


beta = _ns("beta", logpdf=_beta_logpdf,
           pdf=lambda x, a, b, loc=0, scale=1: exp(_beta_logpdf(x, a, b, loc, scale)),
           cdf=_beta_cdf, sf=_beta_sf,
           logcdf=lambda x, a, b, loc=0, scale=1: log(_beta_cdf(x, a, b, loc, scale)),
           logsf=lambda x, a, b, loc=0, scale=1: log(_beta_sf(x, a, b, loc, scale)))


# ---- discrete: poisson, bernoulli ----

def _poisson_logpmf(k, mu, loc=0):
    k, mu, loc = _inexact(k, mu, loc)
    x = k - loc
    lp = xlogy(x, mu) - gammaln(x + 1) - mu
    return where((x < 0) | (_round(k) != k), -np.inf, lp)


def _poisson_cdf(k, mu, loc=0):
    k, mu, loc = _inexact(k, mu, loc)
    x = k - loc
    return where(x < 0, 0.0, gammaincc(floor(1 + x), mu))


poisson = _ns("poisson", logpmf=_poisson_logpmf,
              pmf=lambda k, mu, loc=0: exp(_poisson_logpmf(k, mu, loc)), cdf=_poisson_cdf)


def _bernoulli_logpmf(k, p, loc=0):
    k, p, loc = _inexact(k, p, loc)
    x = k - loc
    lp = xlogy(x, p) + xlog1py(1 - x, -p)
    return where((x < 0) | (x > 1), -np.inf, lp)


def _bernoulli_cdf(k, p):
    k, p = _inexact(k, p)
    bad = isnan(k) | isnan(p) | (p < 0) | (p > 1)
    return where(bad, np.nan, where(k < 0, 0.0, where(k < 1, 1 - p, 1.0)))


def _bernoulli_ppf(q, p):
    q, p = _inexact(q, p)
    bad = isnan(q) | isnan(p) | (p < 0) | (p > 1) | (q < 0) | (q > 1)
    return where(bad, np.nan, where(q <= 1 - p, 0.0, 1.0))


bernoulli = _ns("bernoulli", logpmf=_bernoulli_logpmf,
                pmf=lambda k, p, loc=0: exp(_bernoulli_logpmf(k, p, loc)),
                cdf=_bernoulli_cdf, ppf=_bernoulli_ppf)


# ---- uniform, expon, laplace, cauchy, logistic ----

def _uniform_logpdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    return where((x > loc + scale) | (x < loc), -np.inf, -log(scale))


def _uniform_cdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    return where(x < loc, 0.0, where(x > loc + scale, 1.0, (x - loc) / scale))


def _uniform_ppf(q, loc=0, scale=1):
    q, loc, scale = _inexact(q, loc, scale)
    return where(isnan(q) | (q < 0) | (q > 1), np.nan, loc + scale * q)


uniform = _ns("uniform", logpdf=_uniform_logpdf,
              pdf=lambda x, loc=0, scale=1: exp(_uniform_logpdf(x, loc, scale)),
              cdf=_uniform_cdf, ppf=_uniform_ppf)


def _expon_logpdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    return where(x < loc, -np.inf, -((x - loc) / scale + log(scale)))


def _expon_logsf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    n = (loc - x) / scale
    return where(x < loc, 0.0, n)


def _expon_cdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    n = (loc - x) / scale
    return where(x < loc, 0.0, -expm1(n))


def _expon_ppf(q, loc=0, scale=1):
    q, loc, scale = _inexact(q, loc, scale)
    return where(isnan(q) | (q < 0) | (q > 1), np.nan, loc - scale * log1p(-q))


expon = _ns("expon", logpdf=_expon_logpdf,
            pdf=lambda x, loc=0, scale=1: exp(_expon_logpdf(x, loc, scale)),
            cdf=_expon_cdf,
            logcdf=lambda x, loc=0, scale=1: log1p(-exp(_expon_logsf(x, loc, scale))),
            sf=lambda x, loc=0, scale=1: exp(_expon_logsf(x, loc, scale)),
            logsf=_expon_logsf, ppf=_expon_ppf)


def _laplace_logpdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    return -(_abs(x - loc) / scale + log(2 * scale))


def _laplace_cdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    d = (x - loc) / scale
    return where(d <= 0, 0.5 * exp(where(d <= 0, d, 0.0)),
                 1 - 0.5 * exp(-where(d <= 0, 0.0, d)))


laplace = _ns("laplace", logpdf=_laplace_logpdf,
              pdf=lambda x, loc=0, scale=1: exp(_laplace_logpdf(x, loc, scale)),
              cdf=_laplace_cdf)


def _cauchy_logpdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    s = (x - loc) / scale
    return -(log(math.pi * scale) + log1p(s * s))


def _cauchy_cdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    return 0.5 + arctan((x - loc) / scale) / math.pi


def _cauchy_ppf(q, loc=0, scale=1):
    q, loc, scale = _inexact(q, loc, scale)
    return tan(math.pi * q - math.pi / 2) * scale + loc


def _neg(x):
    return -_inexact(x)[0]


cauchy = _ns("cauchy", logpdf=_cauchy_logpdf,
             pdf=lambda x, loc=0, scale=1: exp(_cauchy_logpdf(x, loc, scale)),
             cdf=_cauchy_cdf,
             logcdf=lambda x, loc=0, scale=1: log(_cauchy_cdf(x, loc, scale)),
             sf=lambda x, loc=0, scale=1: _cauchy_cdf(_neg(x), _neg(loc), scale),
             logsf=lambda x, loc=0, scale=1: log(_cauchy_cdf(_neg(x), _neg(loc), scale)),
             ppf=_cauchy_ppf,
             isf=lambda q, loc=0, scale=1: (tan(math.pi / 2 - math.pi * _inexact(q)[0])
                                            * scale + loc))


def _logistic_logpdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    z = (x - loc) / scale
    return -2 * logaddexp(z / 2, -z / 2) - log(scale)


def _logistic_cdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    return expit((x - loc) / scale)


logistic = _ns("logistic", logpdf=_logistic_logpdf,
               pdf=lambda x, loc=0, scale=1: exp(_logistic_logpdf(x, loc, scale)),
               cdf=_logistic_cdf,
               sf=lambda x, loc=0, scale=1: _logistic_cdf(_neg(x), _neg(loc), scale),
               ppf=lambda x, loc=0, scale=1: logit(x) * scale + loc,
               isf=lambda x, loc=0, scale=1: -logit(x) * scale + loc)
