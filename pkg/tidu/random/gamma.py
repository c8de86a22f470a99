"""jax.random's gamma family: ``gamma``, ``loggamma``, ``beta``, ``dirichlet``, ``t`` and
``chisquare``, with jax's algorithm (Marsaglia and Tsang's rejection sampler, one key per element
split from the key as jax splits it, alpha < 1 boosted by a uniform power) and jax's implicit
reparameterisation gradients (``td.lax.random_gamma_grad``).

The draws equal jax's to rounding, float32 ones to the bit where XLA's ``rsqrt`` of the sampler's
constant d is the rounded 1 / sqrt(d): ``log`` and ``normal`` are XLA's kernels and the two
multiply-adds XLA fuses (``1 + x c``, ``1 - 0.0331 x^4``) are rounded once; jax's ``c = (1/3) /
sqrt(d)`` is XLA's ``(1/3) * rsqrt(d)``, a hardware estimate refined by Newton steps, 1 ulp off
for some d (docs/random.md)."""

from __future__ import annotations

import numpy as np

import tidu as td
from tidu.random.distributions import _float, _fma, _normal, _uniform
from tidu.random.keys import check_key, eager, shape_of, split

__all__ = ["beta", "chisquare", "dirichlet", "gamma", "loggamma", "t"]


def _gamma_one(key, alpha, log_space: bool):
    """One Gamma(alpha) sample (its log with log_space) from one key: jax's _gamma_one."""
    dt = alpha.dtype
    zero, one = np.array(0, dt), np.array(1, dt)
    boost = alpha >= one
    a = td.where(boost, alpha, alpha + one)
    d = a - np.array(1 / 3, dt)
    c = np.array(1 / 3, dt) / td.sqrt(d)

    def accept_not_yet(s):
        _, x2, v3, u = s
        return (u >= _fma(np.array(-0.0331, dt), x2 * x2, one, dt)) \
            & (td.log(u) >= x2 * np.array(0.5, dt) + d * ((one - v3) + td.log(v3)))

    def propose(s):
        k = s[0]
        ks = split(k, 3)
        k, xk, uk = ks[0], ks[1], ks[2]

        def positive_v(kxv):
            kk = split(kxv[0])
            x = _normal(kk[1], (), dt)
            return kk[0], x, _fma(x, c, one, dt)

        _, x, v = td.while_loop(lambda kxv: kxv[2] <= zero, positive_v,
                                (xk, zero, np.array(-1, dt)))
        return k, x * x, (v * v) * v, _uniform(uk, (), dt)

    ks = split(key)
    _, _, v3, _ = td.while_loop(accept_not_yet, propose,
                                (ks[0], zero, one, np.array(2, dt)))
    if log_space:
        log_samples = td.log1p(-_uniform(ks[1], (), dt))  # -exponential(subkey)
        log_boost = td.where(boost | (log_samples == zero), zero, log_samples * (one / alpha))
        return (td.log(d) + td.log(v3)) + log_boost
    samples = one - _uniform(ks[1], (), dt)
    return (d * v3) * td.where(boost, one, samples ** (one / alpha))


def _draws(key, a, log_space: bool):
    """Gamma samples of every element of a (any shape), one key each from split(key, a.size)."""
    flat = td.reshape(a, (-1,))
    keys = split(key, int(flat.shape[0])) if flat.shape[0] else None
    if keys is None:
        return a * 0
    out = td.vmap(lambda k, al: _gamma_one(k, al, log_space))(keys, flat)
    return td.reshape(out, a.shape)


def _gamma_grad(a, sample, log_space: bool):
    if not log_space:
        return td.lax.random_gamma_grad(a, sample)
    s = td.exp(sample)
    s = td.where(s == 0, np.finfo(s.dtype).tiny, s)
    return td.lax.random_gamma_grad(a, s) / s


def _make(log_space: bool):
    @td.custom_jvp
    def draw(key, a):
        return _draws(key, a, log_space)

    @draw.defjvp
    def draw_jvp(primals, tangents):
        key, a = primals
        out = draw(key, a)
        return out, _gamma_grad(a, td.stop_gradient(out), log_space) * tangents[1]

    return draw


_GAMMA, _LOGGAMMA = _make(False), _make(True)


def _param(x, dt):
    """A distribution parameter as a value of dtype dt (traced or not)."""
    return x.astype(dt) if isinstance(x, td.Tracer) else td.asarray(x).astype(dt)


def _prepare(name, key, a, shape, dtype):
    dt = _float(name, dtype)
    k = check_key(name, key)
    a = _param(a, dt)
    shape = a.shape if shape is None else shape_of(shape)
    if np.broadcast_shapes(a.shape, shape) != shape:
        raise ValueError(f"{name}: shape {shape} is not broadcast-compatible with the "
                         f"parameter's shape {a.shape}")
    return k, td.broadcast_to(a, shape), dt


@eager("shape", "dtype")
def gamma(key, a, shape=None, dtype=None):
    """``jax.random.gamma``: Gamma(a, 1) samples, differentiable in a (implicit
    reparameterisation, jax's ``random_gamma_grad``)."""
    k, a, _ = _prepare("gamma", key, a, shape, dtype)
    return _GAMMA(k, a)


@eager("shape", "dtype")
def loggamma(key, a, shape=None, dtype=None):
    """``jax.random.loggamma``: log of Gamma(a, 1) samples, computed in log space (accurate for
    small a)."""
    k, a, _ = _prepare("loggamma", key, a, shape, dtype)
    return _LOGGAMMA(k, a)


@eager("shape", "dtype")
def beta(key, a, b, shape=None, dtype=None):
    """``jax.random.beta``: Beta(a, b) from two log-space gamma draws, as jax's."""
    dt = _float("beta", dtype)
    k = check_key("beta", key)
    a = _param(a, dt)
    b = _param(b, dt)
    shape = np.broadcast_shapes(a.shape, b.shape) if shape is None else shape_of(shape)
    ks = split(k)
    la = _LOGGAMMA(ks[0], td.broadcast_to(a, shape))
    lb = _LOGGAMMA(ks[1], td.broadcast_to(b, shape))
    m = td.maximum(la, lb)
    ga, gb = td.exp(la - m), td.exp(lb - m)
    return ga / (ga + gb)


@eager("shape", "dtype")
def dirichlet(key, alpha, shape=None, dtype=None):
    """``jax.random.dirichlet``: the softmax of log-space gamma draws over the last axis."""
    dt = _float("dirichlet", dtype)
    k = check_key("dirichlet", key)
    alpha = _param(alpha, dt)
    if alpha.ndim < 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == {alpha.ndim}")
    shape = alpha.shape[:-1] if shape is None else shape_of(shape)
    full = tuple(shape) + alpha.shape[-1:]
    return td.nn.softmax(_LOGGAMMA(k, td.broadcast_to(alpha, full)), axis=-1)


@eager("shape", "dtype")
def t(key, df, shape=None, dtype=None):
    """``jax.random.t``: Student's t, a normal over the root of a scaled gamma draw."""
    dt = _float("t", dtype)
    k = check_key("t", key)
    df = _param(df, dt)
    shape = df.shape if shape is None else shape_of(shape)
    ks = split(k)
    n = _normal(ks[0], tuple(shape), dt)
    half = td.broadcast_to(df / 2, shape)
    g = _GAMMA(ks[1], half)
    return n * td.sqrt(half / g)


@eager("shape", "dtype")
def chisquare(key, df, shape=None, dtype=None):
    """``jax.random.chisquare``: twice a Gamma(df / 2) draw (made in log space, as jax's)."""
    dt = _float("chisquare", dtype)
    k = check_key("chisquare", key)
    df = _param(df, dt)
    shape = df.shape if shape is None else shape_of(shape)
    return td.exp(_LOGGAMMA(k, td.broadcast_to(df / 2, shape))) * 2
