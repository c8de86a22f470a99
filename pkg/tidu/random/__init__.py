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
    permutation,
    randint,
    shuffle,
    truncated_normal,
    uniform,
)
from tidu.random.keys import PRNGKey, bits, fold_in, key, key_data, split, wrap_key_data

__all__ = ["PRNGKey", "bernoulli", "bits", "categorical", "cauchy", "choice", "exponential",
           "fold_in", "gumbel", "key", "key_data", "laplace", "logistic", "multivariate_normal",
           "normal", "permutation", "randint", "shuffle", "split", "truncated_normal", "uniform",
           "wrap_key_data"]
