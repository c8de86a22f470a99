"""``td.random``: jax.random's API and jax's bits (threefry2x32, ``jax_threefry_partitionable``
True), on the Threefry2x32 primitive, so random numbers are drawn inside jit, scan, fori_loop,
while_loop and vmap.  Keys are raw uint32 key data of shape (2,) (``key`` and ``PRNGKey`` alike);
docs/random.md lists what matches jax and what is missing."""

from __future__ import annotations

from tidu.random.distributions import (
    bernoulli,
    categorical,
    cauchy,
    choice,
    exponential,
    gumbel,
    laplace,
    logistic,
    multivariate_normal,
    normal,
    orthogonal,
    permutation,
    randint,
    shuffle,
    truncated_normal,
    uniform,
)
from tidu.random.gamma import beta, chisquare, dirichlet, gamma, loggamma, t
from tidu.random.keys import PRNGKey, bits, fold_in, key, key_data, split, wrap_key_data
from tidu.random.more import (
    ball,
    binomial,
    clone,
    double_sided_maxwell,
    f,
    generalized_normal,
    geometric,
    lognormal,
    maxwell,
    multinomial,
    pareto,
    rademacher,
    rayleigh,
    triangular,
    wald,
    weibull_min,
)
from tidu.random.poisson import poisson

from tidu.numpy import nn as _nn  # isort: skip
from tidu.random import initializers  # isort: skip
from tidu.random import kde as _kde  # noqa: F401  # isort: skip  (gaussian_kde on td.scipy.stats)

_nn.initializers = initializers  # td.nn.initializers needs td.random, which sits above td.nn

__all__ = ["PRNGKey", "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy",
           "chisquare", "choice", "clone", "dirichlet", "double_sided_maxwell", "exponential",
           "f", "fold_in", "gamma", "generalized_normal", "geometric", "gumbel", "key",
           "key_data", "laplace", "loggamma", "logistic", "lognormal", "maxwell", "multinomial",
           "multivariate_normal", "normal", "orthogonal", "pareto", "permutation", "poisson",
           "rademacher", "randint", "rayleigh", "shuffle", "split", "t", "triangular",
           "truncated_normal", "uniform", "wald", "weibull_min", "wrap_key_data"]
