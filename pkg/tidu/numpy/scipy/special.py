"""``tidu.scipy.special``: jax.scipy.special's elementwise functions on traced values."""

from __future__ import annotations

from tidu.numpy.core import log
from tidu.numpy.nn import logsumexp
from tidu.numpy.nn import sigmoid as expit
from tidu.numpy.ufuncs import erf, erfc, erfinv
from tidu.trace.tracer import _lift, _trace_of

__all__ = ["erf", "erfc", "erfinv", "expit", "logit", "logsumexp"]


def logit(x):
    """log(x / (1 - x)), the inverse of expit."""
    t = _trace_of(x)
    x = _lift(t, x)
    return log(x / (1 - x))
