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
from tidu.random.poisson import poisson

from tidu.numpy import nn as _nn  # isort: skip
from tidu.random import initializers  # isort: skip
from tidu.random import kde as _kde  # noqa: F401  # isort: skip  (gaussian_kde on td.scipy.stats)

_nn.initializers = initializers  # td.nn.initializers needs td.random, which sits above td.nn

__all__ = ["PRNGKey", "bernoulli", "beta", "bits", "categorical", "cauchy", "chisquare", "choice",
           "dirichlet", "exponential", "fold_in", "gamma", "gumbel", "key", "key_data", "laplace",
           "loggamma", "logistic", "multivariate_normal", "normal", "orthogonal", "permutation",
           "poisson", "randint", "shuffle", "split", "t", "truncated_normal", "uniform",
           "wrap_key_data"]
