"""``td.random.poisson``: jax's sampler step for step (jax 0.10.2's ``_poisson``), so the same key
gives jax's integers.  The rate is taken as float32 (as jax does, whatever the x64 setting);
rates below 10 (and NaN) take Knuth's product of uniforms, the others Hormann's transformed
rejection (PTRS); both loops run over the whole draw from the same key, as jax's, and the
rejection loop keeps the last accepted proposal of every element while any element is still
unaccepted (so an element's value depends on how long the whole draw ran, exactly as in jax).

The uniforms are jax's bits; the comparisons read float32 ``log`` and ``lgamma``, both XLA:CPU's
own kernels in tidu too, and the four multiply-adds XLA's CPU backend contracts (``b``, ``a``, the
proposal ``k`` and ``-lam + k log(lam)``) are rounded once (``_fma``): so draws are jax's up to
rates of 1e7 (tests/random/test_poisson_orthogonal_topk.py); above 2^24 a few percent differ."""

from __future__ import annotations

import numpy as np

import tidu as td
from tidu.graph.dtypes import kind_of
from tidu.random.distributions import _fma, _uniform
from tidu.random.keys import check_key, eager, shape_of, split
from tidu.trace.tracer import _current, _lift

__all__ = ["poisson"]

F32 = np.dtype("float32")


def _c(v):
    return np.float32(v)


def _knuth(key, lam, shape, dt):
    """Knuth's algorithm: count uniforms until their product falls below exp(-lam)."""
    def cond(s):
        return td.any(s[3] > -lam)

    def body(s):
        i, k, rng, log_prod = s
        ks = split(rng)
        k = td.where(log_prod > -lam, k + np.array(1, dt), k)
        u = _uniform(ks[1], shape, F32)
        return i + 1, k, ks[0], log_prod + td.log(u)

    init = (np.int64(0), td.zeros(shape, dt), key, td.zeros(shape, F32))
    k = td.while_loop(cond, body, init)[1]
    return k - np.array(1, dt)


def _rejection(key, lam, shape, dt):
    """Hormann's transformed rejection with squeeze (PTRS), as jax's _poisson_rejection."""
    log_lam = td.log(lam)
    b = _fma(td.sqrt(lam), _c(2.53), _c(0.931), F32)
    a = _fma(b, _c(0.02483), _c(-0.059), F32)
    inv_alpha = _c(1.1239) + _c(1.1328) / (b - _c(3.4))
    v_r = _c(0.9277) - _c(3.6224) / (b - _c(2))

    def cond(s):
        return td.any(~s[2])

    def body(s):
        i, k_out, accepted, rng = s
        ks = split(rng, 3)
        u = _uniform(ks[1], shape, F32) - _c(0.5)
        v = _uniform(ks[2], shape, F32)
        u_shifted = _c(0.5) - td.abs(u)
        k = td.floor(_fma(_c(2) * a / u_shifted + b, u, lam, F32) + _c(0.43))
        s_ = td.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = _fma(k, log_lam, -lam, F32) - td.lax.lgamma(k + _c(1))
        accept1 = (u_shifted >= _c(0.07)) & (v <= v_r)
        reject = (k < _c(0)) | ((u_shifted < _c(0.013)) & (v > u_shifted))
        accept = accept1 | (~reject & (s_ <= t))
        return i + 1, td.where(accept, k, k_out), accepted | accept, ks[0]

    init = (np.int64(0), td.full(shape, -1.0, F32), td.zeros(shape, bool), key)
    return td.while_loop(cond, body, init)[1].astype(dt)


@eager("shape", "dtype")
def poisson(key, lam, shape=None, dtype=None):
    """``jax.random.poisson``: Poisson(lam) counts of an integer dtype (int64 by default, jax's
    under x64), lam taken as float32."""
    dt = np.dtype("int64") if dtype is None else np.dtype(dtype)
    if kind_of(dt) not in "iu":
        raise TypeError(f"poisson: dtype {dt} is not an integer dtype")
    k = check_key("poisson", key)
    lam = _lift(_current(), lam)
    if kind_of(lam.dtype) not in "iuf":
        raise TypeError(f"poisson: lam must be real, got dtype {lam.dtype}")
    shape = tuple(lam.shape) if shape is None else shape_of(shape)
    if np.broadcast_shapes(lam.shape, shape) != shape:
        raise ValueError(f"poisson: shape {shape} is not broadcast-compatible with lam's shape "
                         f"{lam.shape}")
    lam = td.broadcast_to(lam.astype(F32), shape)
    use_knuth = td.isnan(lam) | (lam < _c(10))
    lam_knuth = td.where(use_knuth, lam, _c(0))
    lam_rejection = td.where(use_knuth, _c(1e5), lam)
    out = td.where(use_knuth, _knuth(k, lam_knuth, shape, dt),
                   _rejection(k, lam_rejection, shape, dt))
    return td.where(lam == _c(0), np.array(0, dt), out)
