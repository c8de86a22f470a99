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
from tidu.graph.dtypes import kind_of
from tidu.numpy.core import abs as _abs
from tidu.numpy.core import (
    astype,
    broadcast_to,
    exp,
    expm1,
    iota,
    log,
    log1p,
    maximum,
    minimum,
    reshape,
    rsqrt,
    sign,
    stop_gradient,
    tanh,
    transpose,
    where,
)
from tidu.numpy.core import max as _max
from tidu.numpy.core import sqrt as _core_sqrt
from tidu.numpy.core import sum as _sum
from tidu.numpy.einsum import einsum
from tidu.numpy.reducers import mean as _rd_mean
from tidu.numpy.ufuncs import erfc, isfinite, logaddexp
from tidu.trace.tracer import _compare, _lift, _trace_of, _unary_float, as_inexact

_where = where  # the functions below take jax's `where=` mask argument

__all__ = ["relu", "relu6", "sigmoid", "log_sigmoid", "softplus", "silu", "swish", "gelu", "elu",
           "leaky_relu", "softmax", "log_softmax", "logsumexp", "one_hot", "standardize", "glu",
           "selu", "celu", "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish", "mish",
           "squareplus", "sparse_plus", "identity", "dot_product_attention", "log1mexp",
           "logmeanexp", "soft_sign", "sparse_sigmoid"]


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
    x * erfc(-x / sqrt 2) / 2.  Integer input in jax's to_inexact_dtype."""
    x = as_inexact(x)
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
    a = as_inexact(a)
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


def standardize(x, axis=-1, mean=None, variance=None, epsilon: float = 1e-5, where=None, *,
                algorithm="fast"):
    """(x - mean) * rsqrt(variance + epsilon) over `axis` (jax.nn.standardize), the mean and
    variance over the elements where ``where`` holds; ``algorithm`` is jax's: 'fast' (default)
    takes the variance as mean(x^2) - mean^2 clipped at 0, 'stable' as mean((x - mean)^2).
    Integer x in jax's to_inexact_dtype."""
    if algorithm not in ("fast", "stable"):
        raise ValueError(f"standardize: unknown algorithm {algorithm!r}; expected 'fast' or "
                         "'stable'")
    x = as_inexact(x)
    axes = _axis_tuple(x, axis)
    if mean is None:
        mean = _rd_mean(x, axes, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            d = x - mean
            variance = _rd_mean(d * d, axes, keepdims=True, where=where)
        else:
            variance = maximum(_rd_mean(x * x, axes, keepdims=True, where=where) - mean * mean,
                                0)
    return (x - mean) * rsqrt(variance + epsilon)


def one_hot(x, num_classes: int, dtype=np.float64, axis=-1):
    """x[..., None] == arange(num_classes) as `dtype` (new axis at `axis`); out-of-range and
    negative indices give all-zero rows, as jax's."""
    x = _tr(x)
    if kind_of(x.dtype) not in "iu":
        raise TypeError(f"one_hot: indices must be integers, got {x.dtype}")
    num_classes = int(num_classes)
    nd = x.ndim + 1
    ax = int(axis) % nd
    shape = x.shape[:ax] + (1,) + x.shape[ax:]
    lhs = reshape(x, shape)
    cls_shape = tuple(num_classes if i == ax else 1 for i in range(nd))
    classes = reshape(iota((num_classes,), x.dtype.name), cls_shape)
    return astype(_compare("EQ", lhs, classes), dtype)



# ---- more activations (jax.nn's formulas) ----

def identity(x):
    """x itself (jax.nn.identity)."""
    return _tr(x)


def glu(x, axis: int = -1):
    """Gated linear unit: a * sigmoid(b), a and b the two halves of x along ``axis``."""
    x = _tr(x)
    ax = int(axis) % max(x.ndim, 1)
    n = x.shape[ax]
    if n % 2:
        raise ValueError(f"glu: axis {axis} of x {x.shape} must have even length, got {n}")
    first = tuple(slice(0, n // 2) if i == ax else slice(None) for i in range(x.ndim))
    second = tuple(slice(n // 2, n) if i == ax else slice(None) for i in range(x.ndim))
    return x[first] * sigmoid(x[second])


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x):
    """scale * elu(x, alpha) with the self-normalizing constants."""
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


def celu(x, alpha=1.0):
    """max(x, 0) + alpha * expm1(min(x, 0) / alpha)."""
    x = _tr(x)
    return maximum(x, 0.0) + alpha * expm1(minimum(x, 0.0) / alpha)


def hard_tanh(x):
    """x clipped to [-1, 1] (derivative 0 outside, as jax's)."""
    x = _tr(x)
    return where(x > 1, 1, where(x < -1, -1, x))


def hard_sigmoid(x):
    """relu6(x + 3) / 6."""
    return relu6(_tr(x) + 3.0) / 6.0


def hard_silu(x):
    """x * hard_sigmoid(x)."""
    x = _tr(x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def mish(x):
    """x * tanh(softplus(x))."""
    x = _tr(x)
    return x * tanh(softplus(x))


def squareplus(x, b=4):
    """(x + sqrt(x^2 + b)) / 2 (jax's formulation: integer x in to_inexact_dtype)."""
    x = _tr(x)
    return (x + _core_sqrt(x * x + b)) / 2


def sparse_plus(x):
    """0 for x <= -1, (x + 1)^2 / 4 on (-1, 1), x for x >= 1."""
    x = _tr(x)
    return where(x <= -1, 0.0, where(x >= 1, x, (x + 1) * (x + 1) / 4))


# ---- attention ----

def _large_negative(dtype):
    return -0.7 * float(min(np.finfo(dtype).max, np.finfo(np.float32).max))


def _grouped(t, B, K, G, T, S, name):
    """A mask or bias broadcastable to (B, N, T, S) as (B, K, G, T, S)."""
    if t is None:
        return None
    t = _tr(t)
    if t.ndim != 4:
        raise ValueError(f"dot_product_attention: {name} must be 4-D (broadcastable to "
                         f"(B, N, T, S) = {(B, K * G, T, S)}), got shape {t.shape}")
    try:
        t = broadcast_to(t, (B, K * G, T, S))
    except ValueError:
        raise ValueError(f"dot_product_attention: {name} of shape {t.shape} does not broadcast "
                         f"to (B, N, T, S) = {(B, K * G, T, S)}") from None
    return reshape(t, (B, K, G, T, S))


def _ensure_4d(t):
    if t is None:
        return None
    t = _tr(t)
    return reshape(t, (1,) + t.shape) if t.ndim == 3 else t


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal: bool = False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual: bool = False):
    """softmax(query key^T * scale + bias, masked) value per head, as
    ``jax.nn.dot_product_attention`` (its 'xla' implementation).

    Args:
        query: (B, T, N, H) or (T, N, H).
        key, value: (B, S, K, H) or (S, K, H); N must be a multiple of K (grouped-query
            attention; K == 1 is multi-query).
        bias: added to the logits, 4-D, broadcastable to (B, N, T, S).
        mask: bool, 4-D, broadcastable to (B, N, T, S): False entries are left out.
        scale: the logits' factor, 1 / sqrt(H) by default.
        is_causal: keep only key positions s <= t.
        query_seq_lengths, key_value_seq_lengths: int (B,) valid lengths (padding masks).
        local_window_size: int or (left, right): keep t - left <= s <= t + right.
        implementation: None or 'xla' ('cudnn' is not available in tidu).
        return_residual: also return logsumexp of the masked logits, (B, T, N).

    Returns:
        An array of query's shape (and the residual).  The softmax is computed in the
        logits' own dtype (jax computes it in float32 even for float64 inputs).

    Raises:
        ValueError: shapes that do not match, an unknown implementation.
    """
    if implementation not in (None, "xla"):
        raise ValueError(f"dot_product_attention: implementation {implementation!r} is not "
                         f"available (None or 'xla')")
    q, k, v = _tr(query), _tr(key), _tr(value)
    if not (q.ndim == k.ndim == v.ndim and q.ndim in (3, 4)):
        raise ValueError(f"dot_product_attention: query, key and value must all be 3-D or "
                         f"4-D, got {q.shape}, {k.shape}, {v.shape}")
    unbatched = q.ndim == 3
    if unbatched:
        q, k, v = (reshape(a, (1,) + a.shape) for a in (q, k, v))
        bias, mask = _ensure_4d(bias), _ensure_4d(mask)
    B, T, N, H = q.shape
    _, S, K, _ = k.shape
    if k.shape != v.shape or k.shape[0] != B or k.shape[3] != H or K == 0 or N % K:
        raise ValueError(f"dot_product_attention: key {k.shape} and value {v.shape} must "
                         f"match and fit query {q.shape} (B and H equal, N a multiple of K)")
    G = N // K
    if scale is None:
        scale = 1.0 / math.sqrt(H)
    qg = reshape(q, (B, T, K, G, H))
    logits = einsum("BTKGH,BSKH->BKGTS", qg, k) * scale
    bias_g = _grouped(bias, B, K, G, T, S, "bias")
    if bias_g is not None:
        logits = logits + bias_g
    keep = None

    def both(a, b):
        return b if a is None else a & b

    mask_g = _grouped(mask, B, K, G, T, S, "mask")
    if mask_g is not None:
        if mask_g.dtype != np.dtype(bool):
            raise TypeError(f"dot_product_attention: mask must be bool, got {mask_g.dtype}; "
                            f"an additive mask goes in bias")
        keep = mask_g
    tpos = iota((T, S), "int32", 0)
    spos = iota((T, S), "int32", 1)
    if is_causal:
        keep = both(keep, reshape(spos <= tpos, (1, 1, 1, T, S)))
    if local_window_size is not None:
        lw = local_window_size
        left, right = (lw, lw) if isinstance(lw, (int, np.integer)) else tuple(lw)
        win = (tpos <= spos + int(left)) & (tpos >= spos - int(right))
        keep = both(keep, reshape(win, (1, 1, 1, T, S)))
    if query_seq_lengths is not None:
        ql = reshape(_tr(query_seq_lengths), (B, 1, 1, 1, 1))
        keep = both(keep, reshape(tpos, (1, 1, 1, T, S)) < ql)
    if key_value_seq_lengths is not None:
        kl = reshape(_tr(key_value_seq_lengths), (B, 1, 1, 1, 1))
        keep = both(keep, reshape(spos, (1, 1, 1, T, S)) < kl)
    if keep is not None:
        keep = broadcast_to(keep, logits.shape)
        logits = where(keep, logits, _large_negative(logits.dtype))
    probs = softmax(logits, axis=-1)
    out = einsum("BKGTS,BSKH->BTKGH", probs, v)
    if query_seq_lengths is not None:
        ql = reshape(_tr(query_seq_lengths), (B, 1, 1, 1, 1))
        out = out * astype(reshape(iota((T,), "int32"), (1, T, 1, 1, 1)) < ql, out.dtype)
    out = reshape(out, (B, T, N, H))
    if unbatched:
        out = reshape(out, (T, N, H))
    if not return_residual:
        return out
    lse = stop_gradient(logsumexp(logits, axis=-1))  # (B, K, G, T)
    lse = transpose(reshape(lse, (B, N, T)), (0, 2, 1))
    return out, (reshape(lse, (T, N)) if unbatched else lse)


# ---- jax.nn's newer small names ----

def log1mexp(x):
    """log(1 - exp(-x)) for x >= 0, by expm1 below log 2 and log1p above (jax's; its
    derivative 1 / expm1(x) is the derivative of these branches)."""
    x = as_inexact(x)
    return where(x < math.log(2.0), log(-expm1(-x)), log1p(-exp(-x)))


def logmeanexp(x, axis=None, where=None, keepdims: bool = False):
    """log(mean(exp(x))) over ``axis`` (only the ``where`` entries): logsumexp - log(count)."""
    x = _tr(x)
    lse = logsumexp(x, axis=axis, keepdims=keepdims, where=where)
    axes = _axis_tuple(x, axis)
    if where is None:
        return lse - math.log(math.prod(x.shape[a] for a in axes))
    count = _sum(astype(broadcast_to(_tr(where), x.shape), lse.dtype), axes, keepdims=keepdims)
    return lse - log(count)


def soft_sign(x):
    """x / (|x| + 1)."""
    x = _tr(x)
    return x / (_abs(x) + 1)


def sparse_sigmoid(x):
    """0.5 * clip(x + 1, 0, 2), the derivative of sparse_plus."""
    x = _tr(x)
    return 0.5 * minimum(maximum(x + 1.0, 0.0), 2.0)
