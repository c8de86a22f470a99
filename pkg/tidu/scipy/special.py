"""``tidu.scipy.special``: jax.scipy.special's elementwise functions on traced values."""

from __future__ import annotations

from tidu.nn import logsumexp, sigmoid as expit
from tidu.numpy_math import erf, erfc, erfinv
from tidu.tracing import _lift, _trace_of, log

__all__ = ["erf", "erfc", "erfinv", "expit", "logit", "logsumexp"]


def logit(x):
    """log(x / (1 - x)), the inverse of expit."""
    t = _trace_of(x)
    x = _lift(t, x)
    return log(x / (1 - x))
