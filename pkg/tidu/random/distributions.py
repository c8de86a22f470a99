"""jax.random's samplers over tidu primitives, each jax's algorithm step for step, so the same
key and shape give jax's numbers: bits exactly, floats to the last bit where jax's algorithm is a
fixed transform of the bits (uniform's mantissa trick is computed as the exact integer-to-float
conversion it equals, so no bitcast is needed), up to the last-bit differences of the elementwise
functions (log, erf_inv) between tidu's kernels and XLA's.

Default dtypes are jax's under x64 (float64, int64)."""

from __future__ import annotations

import math

import numpy as np

import tidu as td
from tidu import ops as P
from tidu.graph.dtypes import kind_of
from tidu.random.keys import (
    U32,
    UINTS,
    bits32,
    bits_of,
    check_key,
    eager,
    random_bits,
    shape_of,
    split,
)
from tidu.trace.tracer import Tracer, _current, _emit, _lift

__all__ = ["bernoulli", "categorical", "cauchy", "choice", "exponential", "gumbel", "laplace",
           "logistic", "multivariate_normal", "normal", "orthogonal", "permutation", "randint",
           "shuffle", "truncated_normal", "uniform"]

_FLOATS = (np.dtype("float32"), np.dtype("float64"))


def _float(name, dtype) -> np.dtype:
    dt = np.dtype("float64") if dtype is None else np.dtype(dtype)
    if dt not in _FLOATS:
        raise TypeError(f"{name}: dtype {dt} is not float32 or float64")
    return dt


def _as(x, dt):
    t = _current()
    return _lift(t, x, dt)


def _unit(key: Tracer, shape: tuple[int, ...], dt: np.dtype) -> Tracer:
    """jax's [0, 1) floats: the top nmant bits as the mantissa of a float in [1, 2), minus 1:
    exactly m * 2^-nmant for the integer m those bits make."""
    if dt == np.float32:
        return (bits32(key, shape) >> np.uint32(9)).astype(dt) * np.float32(2.0 ** -23)
    b1, b2 = random_bits(key, shape)
    # 64 bits (b1 << 32 | b2) >> 12 = b1 * 2^20 + (b2 >> 12), exact in float64 (< 2^52)
    m = b1.astype(dt) * 2.0 ** 20 + (b2 >> np.uint32(12)).astype(dt)
    return m * 2.0 ** -52


def _split_f64(a):
    """Veltkamp's split of float64 a into 26-bit halves hi + lo == a."""
    t = a * 134217729.0  # 2^27 + 1
    hi = t - (t - a)
    return hi, a - hi


def _fma(a, b, c, dt):
    """a * b + c rounded once, as XLA's CPU backend computes jax's ``floats * (max - min) + min``
    (it contracts the two into a fused multiply-add).  float32: the exact product in float64;
    float64: Dekker's exact product and Knuth's exact sum (double-double), then one rounding."""
    if dt == np.float32:
        return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(dt)
    p = a * b
    ah, al = _split_f64(a)
    bh, bl = _split_f64(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # p + e == a * b exactly
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)  # s + err == p + c exactly
    return s + (err + e)


def _unit_of_pairs(h: Tracer, dt: np.dtype) -> Tracer:
    """_unit's floats from the hash pairs h (..., 2) of the draw's counters."""
    if dt == np.float32:
        return ((h[..., 0] ^ h[..., 1]) >> np.uint32(9)).astype(dt) * np.float32(2.0 ** -23)
    m = h[..., 0].astype(dt) * 2.0 ** 20 + (h[..., 1] >> np.uint32(12)).astype(dt)
    return m * 2.0 ** -52


def _uniform(key, shape, dt, minval=0.0, maxval=1.0, unit=None) -> Tracer:
    lo, hi = _as(minval, dt), _as(maxval, dt)
    span = hi - lo
    unit = _unit(key, shape, dt) if unit is None else unit
    out = unit * span + lo if _exact_product(minval, maxval, dt) else _fma(unit, span, lo, dt)
    return td.broadcast_to(td.maximum(lo, out), shape)


def _exact_product(minval, maxval, dt) -> bool:
    """Constant bounds for which unit * span + lo rounds once anyway (lo 0, or span a power of
    two, so the product is exact): no fused multiply-add to emulate."""
    if isinstance(minval, Tracer) or isinstance(maxval, Tracer):
        return False
    lo, hi = np.asarray(minval, dt), np.asarray(maxval, dt)
    if lo.ndim or hi.ndim:
        return False
    span = float(hi - lo)
    return float(lo) == 0.0 or (span > 0 and np.frexp(span)[0] == 0.5)


@eager("shape", "dtype")
def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """``jax.random.uniform``: floats in [minval, maxval)."""
    dt = _float("uniform", dtype)
    return _uniform(check_key("uniform", key), shape_of(shape), dt, minval, maxval)


def _normal(key, shape, dt) -> Tracer:
    lo = np.nextafter(np.array(-1.0, dt), np.array(0.0, dt), dtype=dt)
    u = _uniform(key, shape, dt, lo, 1.0)
    return np.array(np.sqrt(2), dt) * td.scipy.special.erfinv(u)


@eager("shape", "dtype")
def normal(key, shape=(), dtype=None):
    """``jax.random.normal``: sqrt(2) erf_inv(u), u uniform in (-1, 1)."""
    dt = _float("normal", dtype)
    return _normal(check_key("normal", key), shape_of(shape), dt)


@eager("shape", "dtype")
def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """``jax.random.truncated_normal`` on (lower, upper)."""
    dt = _float("truncated_normal", dtype)
    k = check_key("truncated_normal", key)
    lower, upper = _as(lower, dt), _as(upper, dt)
    if shape is None:
        shape = np.broadcast_shapes(lower.shape, upper.shape)
    sqrt2 = np.array(np.sqrt(2), dt)
    # XLA's algebraic simplifier turns jax's x / sqrt2 into x * (1 / sqrt2), 1 / sqrt2 rounded
    inv_sqrt2 = np.array(1, dt) / sqrt2
    a, b = td.scipy.special.erf(lower * inv_sqrt2), td.scipy.special.erf(upper * inv_sqrt2)
    out = sqrt2 * td.scipy.special.erfinv(_uniform(k, shape_of(shape), dt, a, b))
    inf = np.array(np.inf, dt)
    return td.clip(out, td.nextafter(td.stop_gradient(lower), inf),
                   td.nextafter(td.stop_gradient(upper), -inf))


def _check_mode(name, mode, modes=("low", "high")):
    if mode not in modes:
        raise ValueError(f"{name}: mode must be one of {', '.join(map(repr, modes))}, got "
                         f"{mode!r}")


@eager("shape", "mode")
def bernoulli(key, p=0.5, shape=None, mode="low"):
    """``jax.random.bernoulli``: uniform(p's dtype) < p (mode 'low', jax's default); mode 'high'
    compares two uniform draws as one of twice the bits, u2 2^-nmant < p - u1 (right for p
    down to ~1e-14 in float32)."""
    _check_mode("bernoulli", mode)
    k = check_key("bernoulli", key)
    p = _lift(_current(), p)
    if p.dtype not in _FLOATS:
        p = p.astype(np.float64)
    shape = p.shape if shape is None else shape_of(shape)
    if mode == "high":
        u = _uniform(k, (2, *shape), p.dtype)
        return u[1] * np.array(2.0 ** -np.finfo(p.dtype).nmant, p.dtype) < p - u[0]
    return _uniform(k, shape, p.dtype) < p


def _clip_int(v, dt):
    """jax's _convert_and_clip_integer: v clipped to dt's range, then converted."""
    info = np.iinfo(dt)
    if kind_of(v.dtype) in "iu" and np.iinfo(v.dtype).max > info.max:
        v = td.minimum(v, np.array(info.max, v.dtype))
    if kind_of(v.dtype) == "i" and np.iinfo(v.dtype).min < info.min:
        v = td.maximum(v, np.array(info.min, v.dtype))
    return v.astype(dt)


@eager("shape", "dtype")
def randint(key, shape, minval, maxval, dtype=None):
    """``jax.random.randint``: integers in [minval, maxval) from 2 x nbits random bits per value
    reduced modulo the span (jax's algorithm; 8- and 16-bit dtypes drawn as int32 and
    converted, as jax), for every integer dtype (int64 by default)."""
    dt = np.dtype("int64") if dtype is None else np.dtype(dtype)
    if kind_of(dt) not in "iu":
        raise TypeError(f"randint only accepts integer dtypes, got {dt}")
    k = check_key("randint", key)
    shape = shape_of(shape)
    t = _current()
    minval, maxval = _lift(t, minval), _lift(t, maxval)
    info = np.iinfo(dt)
    if info.bits < 32:  # jax draws 8- and 16-bit integers as int32 (less bias), then converts
        i32 = np.dtype("int32")
        lo = td.clip(minval.astype(i32), np.int32(info.min), np.int32(info.max))
        hi = td.clip(maxval.astype(i32), np.int32(info.min), np.int32(info.max + 1))
        return _randint(k, shape, lo, hi, i32).astype(dt)
    return _randint(k, shape, minval, maxval, dt)


def _randint(k, shape, minval, maxval, dt):
    """jax's _randint: 2 x nbits bits per value (nbits = 32 or 64), reduced modulo the span."""
    t = _current()
    if kind_of(minval.dtype) not in "iu":
        minval = minval.astype(np.int64)
    if kind_of(maxval.dtype) not in "iu":
        maxval = maxval.astype(np.int64)
    big = _clip_int(_lift(t, np.array(np.iinfo(dt).max, dt)), maxval.dtype)
    out_of_range = maxval > big
    lo, hi = _clip_int(minval, dt), _clip_int(maxval, dt)
    nbits = 8 * dt.itemsize
    ut = UINTS[nbits]
    keys = split(k, 2)
    higher, lower = bits_of(keys[0], shape, ut), bits_of(keys[1], shape, ut)
    one = np.array(1, ut)
    span = (hi - lo).astype(ut)
    span = td.where(hi <= lo, one, span)
    span = td.where(out_of_range & (hi > lo), span + one, span)  # wraps to 0: no remainder
    rem = td.lax.rem  # XLA's: x rem 0 is x (the span wraps to 0 for a dtype's whole range)
    mult = rem(_lift(t, np.array(2 ** (nbits // 2), ut)), span)
    mult = rem(mult * mult, span)
    off = rem(rem(higher, span) * mult + rem(lower, span), span)
    return td.broadcast_to(lo + off.astype(dt), shape)


def _gumbel(key, shape, dt, unit=None, mode="low") -> Tracer:
    """jax's Gumbel noise: -log(-log(u)) (mode 'low'); mode 'high' (and 'highest' in float64) a
    uniform of twice the bits below 1/2, -log(-log1p(-x)), for tails down to ~1e-14 in float32."""
    if mode == "low":
        return -td.log(-td.log(_uniform(key, shape, dt, np.finfo(dt).tiny, 1.0, unit)))
    if mode == "highest" and dt == np.float32:
        return _gumbel_highest32(key, shape)
    info = np.finfo(dt)
    u = _uniform(key, (2, *shape), dt, 0.0, 1.0)
    high, low = u[0], u[1]
    x = td.where(high >= 0.5, high,
                 high + np.array(2.0 ** -info.nmant, dt) * low + np.array(info.tiny, dt))
    return -td.log(-td.log1p(-x))


_BLOCK = 1 << 20  # Gumbel values a chunked categorical draws at once


def _argmax_gumbel_chunked(key, logits, gshape, axis):
    """argmax over `axis` (> 0) of logits (broadcast to gshape) plus the Gumbel noise of a draw
    of gshape, one block of leading-axis rows at a time (a td.scan over blocks, the remainder
    after it): each block hashes its own counters (row-major index offset by the block's first
    row), so the noise equals the whole draw's and never exists whole."""
    rows, inner = gshape[0], math.prod(gshape[1:])
    if rows * inner >= 2 ** 32:
        raise NotImplementedError(f"random draws of {rows * inner} >= 2**32 values at once")
    b = max(1, _BLOCK // max(inner, 1))
    nfull, rest = divmod(rows, b)
    lrows = logits.shape[0]  # 1 (broadcast) or rows

    def block(start, nrows):
        """argmax of rows [start, start + nrows); start a uint32 scalar (traced or not)."""
        bshape = (nrows,) + gshape[1:]
        t = _current()  # the scan body's trace, or the function's for the remainder
        off = _lift(t, start * np.uint32(inner), U32)
        h = _emit(t, P.Threefry2x32Iota(bshape), _lift(t, key), off)  # counters off, off + 1, ...
        g = _gumbel(None, bshape, logits.dtype, _unit_of_pairs(h, logits.dtype))
        lg = logits
        if lrows != 1:
            st = [start.astype(np.int64) if isinstance(start, Tracer) else int(start)]
            lg = td.lax.dynamic_slice(logits, st + [0] * (logits.ndim - 1),
                                      (nrows,) + logits.shape[1:])
        return td.argmax(g + lg, axis=axis)

    parts = []
    if nfull:
        def step(c, i):
            return c, block(i.astype(U32) * np.uint32(b), b)
        _, ys = td.scan(step, np.int64(0), td.arange(nfull))
        parts.append(td.reshape(ys, (nfull * b,) + ys.shape[2:]))
    if rest:
        parts.append(block(np.uint32(nfull * b), rest))
    return parts[0] if len(parts) == 1 else td.concatenate(parts, axis=0)


def _bits_to_unit32(hi, lo):
    """jax's _safe_int_to_float: the 64-bit fixed-point fraction (hi, lo) (uint32 words) as the
    float32 in (0, 1) it rounds down to, built from its leading-zero count and bits."""
    u32 = np.uint32
    hiclz, loclz = td.lax.clz(hi), td.lax.clz(lo)
    mantissa = (hi << hiclz) | td.where(hiclz == 32, lo << loclz,
                                        td.lax.shift_right_logical(lo, u32(32) - hiclz))
    mantissa = td.lax.shift_right_logical(mantissa, u32(32 - 23 - 1)) & u32((1 << 23) - 1)
    exp = (u32(126) - td.where(hiclz == 32, u32(32) + loclz, hiclz)) << u32(23)
    exp = exp & u32((1 << 30) - (1 << 22))
    return td.lax.bitcast_convert_type(exp | mantissa, np.float32)


def _gumbel_highest32(key, shape) -> Tracer:
    """jax's float32 mode 'highest': 64 random bits as a fixed-point u, 1 - u where u >= 1/2,
    each side's log1p or log (tails down to ~1e-19)."""
    u32 = np.uint32
    bits = bits32(key, (2, *shape))
    hi, lo = bits[0], bits[1]
    # 1 - u in 64-bit fixed point: the complement plus one, carried into the high word
    nlo = ~lo
    nhi = ~hi + (nlo == u32(0xFFFFFFFF)).astype(u32)
    nlo = nlo + u32(1)
    flip = hi < u32(1 << 31)  # u < 1/2: u itself and log1p; else 1 - u and log
    x = _bits_to_unit32(td.where(flip, hi, nhi), td.where(flip, lo, nlo))
    return td.where(flip, -td.log(-td.log1p(-x)), -td.log(-td.log(x)))


_GUMBEL_MODES = ("low", "high", "highest")


@eager("shape", "dtype", "mode")
def gumbel(key, shape=(), dtype=None, mode=None):
    """``jax.random.gumbel``: -log(-log(u)) (mode 'low', jax's default: None); 'high' and
    'highest' as ``_gumbel``."""
    mode = "low" if mode is None else mode
    _check_mode("gumbel", mode, _GUMBEL_MODES)
    return _gumbel(check_key("gumbel", key), shape_of(shape), _float("gumbel", dtype),
                   mode=mode)


@eager("axis", "shape", "replace", "mode")
def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None):
    """``jax.random.categorical``: argmax of logits plus Gumbel noise with replacement, the
    Gumbel top-k of the categories without (one noise draw of logits' shape, as jax)."""
    mode = "low" if mode is None else mode
    _check_mode("categorical", mode, _GUMBEL_MODES)
    k = check_key("categorical", key)
    logits = _lift(_current(), logits)
    if logits.dtype not in _FLOATS:
        logits = logits.astype(np.float64)
    nd = logits.ndim
    axis = axis % nd
    batch = tuple(d for i, d in enumerate(logits.shape) if i != axis)
    shape = batch if shape is None else shape_of(shape)
    if np.broadcast_shapes(shape, batch) != shape:
        raise ValueError(f"categorical: shape {shape} does not broadcast with the logits' batch "
                         f"shape {batch}")
    prefix = shape[:len(shape) - len(batch)]
    if not replace:  # Gumbel top-k over the categories, as jax
        g = logits + _gumbel(k, logits.shape, logits.dtype, mode=mode)
        draws = math.prod(prefix)
        if draws > logits.shape[axis]:
            raise ValueError(f"Number of samples without replacement ({draws}) cannot exceed "
                             f"number of categories ({logits.shape[axis]}).")
        ind = td.lax.top_k(td.moveaxis(g, axis, -1), draws)[1]
        return td.reshape(td.moveaxis(ind, -1, 0), shape)  # int32, as jax's top_k indices
    lshape = list(shape[len(shape) - len(batch):])
    lshape.insert(axis, logits.shape[axis])
    gshape = prefix + tuple(lshape)
    expanded = td.reshape(logits, (1,) * len(prefix) + logits.shape)
    if mode == "low" and math.prod(gshape) > 2 * _BLOCK and axis + len(prefix) > 0 \
            and gshape[0] > 1:
        return _argmax_gumbel_chunked(k, expanded, gshape, axis + len(prefix))
    g = _gumbel(k, gshape, logits.dtype, mode=mode)
    return td.argmax(g + expanded, axis=axis + len(prefix))


@eager("shape", "dtype")
def exponential(key, shape=(), dtype=None):
    """``jax.random.exponential``: -log1p(-u)."""
    u = _uniform(check_key("exponential", key), shape_of(shape), _float("exponential", dtype))
    return -td.log1p(-u)


@eager("shape", "dtype")
def laplace(key, shape=(), dtype=None):
    """``jax.random.laplace``: sign(u) log1p(-|u|), u uniform in (-1, 1)."""
    dt = _float("laplace", dtype)
    u = _uniform(check_key("laplace", key), shape_of(shape), dt, -1.0 + np.finfo(dt).epsneg, 1.0)
    return td.sign(u) * td.log1p(-td.abs(u))


@eager("shape", "dtype")
def logistic(key, shape=(), dtype=None):
    """``jax.random.logistic``: log(x) - log1p(-x)."""
    dt = _float("logistic", dtype)
    x = _uniform(check_key("logistic", key), shape_of(shape), dt, np.finfo(dt).tiny, 1.0)
    return td.log(x) - td.log1p(-x)


@eager("shape", "dtype")
def cauchy(key, shape=(), dtype=None):
    """``jax.random.cauchy``: tan(pi (u - 1/2))."""
    dt = _float("cauchy", dtype)
    u = _uniform(check_key("cauchy", key), shape_of(shape), dt, np.finfo(dt).eps, 1.0)
    return td.tan(np.array(np.pi, dt) * (u - np.array(0.5, dt)))


@eager("shape", "dtype", "method")
def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """``jax.random.multivariate_normal`` (method 'cholesky', jax's default)."""
    if method != "cholesky":
        raise NotImplementedError(f"multivariate_normal: method={method!r}; tidu has "
                                  "'cholesky'")
    dt = _float("multivariate_normal", dtype)
    k = check_key("multivariate_normal", key)
    mean, cov = _as(mean, dt), _as(cov, dt)
    if mean.ndim < 1 or cov.ndim < 2 or cov.shape[-2:] != (mean.shape[-1],) * 2:
        raise ValueError(f"multivariate_normal: mean shape {mean.shape} and cov shape "
                         f"{cov.shape} are not (..., n) and (..., n, n)")
    if shape is None:
        shape = np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
    z = _normal(k, shape_of(shape) + mean.shape[-1:], dt)
    return mean + td.einsum("...ij,...j->...i", td.linalg.cholesky(cov), z)


@eager("n", "shape", "dtype", "m")
def orthogonal(key, n, shape=(), dtype=None, m=None):
    """``jax.random.orthogonal``: a uniform (Haar) draw from O(n), or a semi-orthogonal n x m
    matrix: the Q of the QR factorisation of a normal (max(n, m), min(n, m)) matrix, its columns
    signed by R's diagonal (Mezzadri 2007), transposed when n < m.  Shape (*shape, n, m)."""
    dt = _float("orthogonal", dtype)
    n = int(n)
    m = n if m is None else int(m)
    if n < 0 or m < 0:
        raise ValueError(f"orthogonal: n and m must be non-negative, got n={n}, m={m}")
    z = _normal(check_key("orthogonal", key), shape_of(shape) + (max(n, m), min(n, m)), dt)
    q, r = td.linalg.qr(z)
    d = td.diagonal(r, axis1=-2, axis2=-1)
    x = q * td.expand_dims(td.sign(d), -2)
    return td.swapaxes(x, -1, -2) if n < m else x


def _shuffle(key, x, axis):
    """jax's _shuffle: ceil(3 ln n / ln(2^32 - 1)) stable sorts by fresh 32-bit keys."""
    rounds = int(np.ceil(3 * np.log(max(1, math.prod(x.shape))) / np.log(2 ** 32 - 1)))
    for _ in range(rounds):
        keys = split(key, 2)
        key, sub = keys[0], keys[1]
        order = td.argsort(bits32(sub, x.shape), axis=axis, stable=True)
        x = td.take_along_axis(x, order, axis=axis)
    return x


def _permutation(key, x, axis=0, independent=False):
    k = check_key("permutation", key)
    if isinstance(x, (int, np.integer)):
        return _shuffle(k, td.arange(int(x)), 0)
    x = _lift(_current(), x)
    if x.ndim == 0:
        raise TypeError("permutation: x must be an int or an array of rank >= 1")
    axis = axis % x.ndim
    if independent or x.ndim == 1:
        return _shuffle(k, x, axis)
    ind = _shuffle(k, td.arange(x.shape[axis]), 0)
    return td.take(x, ind, axis=axis)


_permutation_int = eager("x", "axis", "independent")(_permutation)
_permutation_arr = eager("axis", "independent")(_permutation)


def permutation(key, x, axis=0, independent=False):
    """``jax.random.permutation``: of range(x) for an int x, else of x along axis."""
    if isinstance(x, (int, np.integer)):
        return _permutation_int(key, int(x), axis, independent)
    return _permutation_arr(key, x, axis, independent)


@eager("axis")
def shuffle(key, x, axis=0):
    """``jax.random.shuffle`` (deprecated in jax): permutation(..., independent=True)."""
    x = _lift(_current(), x)
    return _shuffle(check_key("shuffle", key), x, axis % max(x.ndim, 1))


def _choice_impl(key, a, shape=(), replace=True, p=None, axis=0, mode="low"):
    k = check_key("choice", key)
    shape = shape_of(shape)
    scalar = isinstance(a, (int, np.integer))
    arr = None if scalar else _lift(_current(), a)
    n = int(a) if scalar else arr.shape[axis]
    draws = math.prod(shape)
    if draws and n == 0:
        raise ValueError("choice: a must be non-empty")
    if not replace and draws > n:
        raise ValueError(f"Cannot take a larger sample (size {draws}) than population (size "
                         f"{n}) when 'replace=False'")
    if p is None:
        if replace:
            ind = randint(k, shape, 0, n)  # int64, as jax's (x64)
            result = ind if scalar else td.take(arr, ind, axis=axis)
        else:
            perm = _shuffle(k, td.arange(n) if scalar else arr, 0 if scalar else axis)
            idx = (slice(None),) * (0 if scalar else axis) + (slice(draws),)
            result = perm[idx]
    else:
        p = _lift(_current(), p)
        if p.dtype not in _FLOATS:
            p = p.astype(np.float64)
        if p.shape != (n,):
            raise ValueError(f"p must be None or a 1D vector with the same size as a.shape[axis]."
                             f" p has shape {p.shape} and a.shape[axis] is {n}.")
        if replace:
            cum = td.cumsum(p)
            r = cum[-1] * (1 - _uniform(k, shape, p.dtype))
            ind = td.searchsorted(cum, r).astype(np.int64)
        else:  # the Gumbel top-k trick, as jax
            g = _gumbel(k, (n,), p.dtype, mode=mode) + td.log(p)
            ind = td.lax.top_k(g, draws)[1].astype(np.int64)
        result = ind if scalar else td.take(arr, ind, axis=axis)
    return td.reshape(result, shape if scalar else
                      arr.shape[:axis] + shape + arr.shape[axis + 1:])


_choice_int = eager("a", "shape", "replace", "axis", "mode")(_choice_impl)
_choice_arr = eager("shape", "replace", "axis", "mode")(_choice_impl)


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    """``jax.random.choice``: draws from range(a) (an int) or a's entries along axis, with or
    without replacement, uniformly or by probabilities p (without replacement: jax's Gumbel
    top-k)."""
    mode = "low" if mode is None else mode
    _check_mode("choice", mode, _GUMBEL_MODES)
    if isinstance(a, (int, np.integer)):
        return _choice_int(key, int(a), shape_of(shape), replace, p, axis, mode)
    return _choice_arr(key, a, shape_of(shape), replace, p, axis, mode)
