"""``tidu.nn``: jax.nn's activation functions and friends, on traced values.

Numerically stable as jax's: ``logsumexp``, ``softmax`` and ``log_softmax`` subtract the
(stop-gradient) maximum first, so values near 700 do not overflow; ``sigmoid`` is the Logistic
primitive (no overflow for either sign) on real inputs and 1 / (1 + exp(-x)) on complex ones;
``relu``'s derivative at 0 is 0 (jax's choice).
"""

from __future__ import annotations

import math

import numpy as np

from tidu import ops as P
from tidu.numpy.core import abs as _abs
from tidu.numpy.core import astype, exp, expm1, iota, log, reshape, sign, stop_gradient, tanh, where
from tidu.numpy.core import max as _max
from tidu.numpy.core import sum as _sum
from tidu.numpy.ufuncs import erfc, isfinite, logaddexp
from tidu.trace.tracer import _compare, _lift, _trace_of, _unary_float

_where = where  # the functions below take jax's `where=` mask argument

__all__ = ["relu", "relu6", "sigmoid", "log_sigmoid", "softplus", "silu", "swish", "gelu", "elu",
           "leaky_relu", "softmax", "log_softmax", "logsumexp", "one_hot", "standardize"]


def _tr(x):
    t = _trace_of(x)
    return _lift(t, x)


def relu(x):
    """max(x, 0); derivative 0 at 0 (jax's); NaN stays NaN."""
    x = _tr(x)
    return where(x <= 0, 0, x)


def relu6(x):
    """min(max(x, 0), 6); derivative 0 at both kinks."""
    x = _tr(x)
    return where(x <= 0, 0, where(x >= 6, 6, x))


def sigmoid(x):
    """1 / (1 + exp(-x)): the Logistic primitive on real dtypes.

    Complex inputs (jax's ``lax.logistic`` takes them) are the formula itself, written with
    Exp, Add and Div, which are holomorphic on complex dtypes; the Logistic primitive and its
    kernels stay real-only.  Values are infinite/NaN at the poles x = i(2k+1)pi, as jax's.
    """
    x = _tr(x)
    if np.issubdtype(x.aval.dtype, np.complexfloating):
        return 1 / (1 + exp(-x))
    return _unary_float(P.Logistic, x)


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    return -softplus(-_tr(x))


def softplus(x):
    """log(1 + exp(x)) (logaddexp(x, 0), as jax's)."""
    return logaddexp(x, 0)


def silu(x):
    """x * sigmoid(x)."""
    x = _tr(x)
    return x * sigmoid(x)


swish = silu


def gelu(x, approximate: bool = True):
    """Gaussian error linear unit; the tanh approximation by default (as jax's), else
    x * erfc(-x / sqrt 2) / 2."""
    x = _tr(x)
    if approximate:
        c = math.sqrt(2 / math.pi)
        return x * (0.5 * (1 + tanh(c * (x + 0.044715 * (x * x * x)))))
    return x * (erfc(x * (-1 / math.sqrt(2))) * 0.5)


def elu(x, alpha: float = 1.0):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    x = _tr(x)
    return where(x > 0, x, alpha * expm1(where(x > 0, 0, x)))


def leaky_relu(x, negative_slope: float = 0.01):
    """x for x >= 0, negative_slope * x otherwise."""
    x = _tr(x)
    return where(x >= 0, x, negative_slope * x)


def _axis_tuple(x, axis):
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(int(a) % builtins_max(x.ndim, 1) for a in axes)


def builtins_max(a, b):
    return a if a > b else b


def _masked(x, where_):
    return x if where_ is None else where(where_, x, -np.inf)


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False, where=None):
    """log(sum(b * exp(a))) over `axis`, shifted by the (stop-gradient) maximum so that large
    values do not overflow; an all -inf slice gives -inf.  With ``return_sign`` also the sign of
    the sum (then log of its absolute value), as jax.nn.logsumexp."""
    a = _tr(a)
    if a.dtype not in (np.dtype("float32"), np.dtype("float64")):
        a = astype(a, np.float64) if a.dtype.kind in "iub" else a
    axes = _axis_tuple(a, axis)
    am = _masked(a, where)
    amax = stop_gradient(_max(am, axes, keepdims=True))
    amax = _where(isfinite(amax), amax, 0)
    e = exp(am - amax)
    if b is not None:
        e = e * b
    s = _sum(e, axes, keepdims=True)
    sgn = None
    if return_sign:
        sgn = sign(s)
        s = _abs(s)
    out = log(s) + amax
    if not keepdims:
        shape = tuple(d for i, d in enumerate(a.shape) if i not in axes)
        out = reshape(out, shape)
        if sgn is not None:
            sgn = reshape(sgn, shape)
    return (out, sgn) if return_sign else out


def softmax(x, axis=-1, where=None):
    """exp(x) / sum(exp(x)) over `axis` (int or tuple), shifted by the stop-gradient maximum;
    entries of -inf get 0.  ``where`` masks entries out (they get 0)."""
    x = _tr(x)
    axes = _axis_tuple(x, axis)
    xm = _masked(x, where)
    m = stop_gradient(_max(xm, axes, keepdims=True))
    e = exp(xm - m)
    if where is not None:
        e = _where(where, e, 0)
    return e / _sum(e, axes, keepdims=True)


def log_softmax(x, axis=-1, where=None):
    """x - logsumexp(x) over `axis`, shifted by the stop-gradient maximum."""
    x = _tr(x)
    axes = _axis_tuple(x, axis)
    xm = _masked(x, where)
    shifted = xm - stop_gradient(_max(xm, axes, keepdims=True))
    e = exp(shifted)
    if where is not None:
        e = _where(where, e, 0)
    out = shifted - log(_sum(e, axes, keepdims=True))
    return out if where is None else _where(where, out, -np.inf)


def standardize(x, axis=-1, mean=None, variance=None, epsilon: float = 1e-5):
    """(x - mean) / sqrt(variance + epsilon) over `axis` (jax.nn.standardize)."""
    x = _tr(x)
    axes = _axis_tuple(x, axis)
    n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    if mean is None:
        mean = _sum(x, axes, keepdims=True) / n
    if variance is None:
        d = x - mean
        variance = _sum(d * d, axes, keepdims=True) / n
    return (x - mean) / (variance + epsilon) ** 0.5


def one_hot(x, num_classes: int, dtype=np.float64, axis=-1):
    """x[..., None] == arange(num_classes) as `dtype` (new axis at `axis`); out-of-range and
    negative indices give all-zero rows, as jax's."""
    x = _tr(x)
    if x.dtype.kind not in "iu":
        raise TypeError(f"one_hot: indices must be integers, got {x.dtype}")
    num_classes = int(num_classes)
    nd = x.ndim + 1
    ax = int(axis) % nd
    shape = x.shape[:ax] + (1,) + x.shape[ax:]
    lhs = reshape(x, shape)
    cls_shape = tuple(num_classes if i == ax else 1 for i in range(nd))
    classes = reshape(iota((num_classes,), x.dtype.name), cls_shape)
    return astype(_compare("EQ", lhs, classes), dtype)

