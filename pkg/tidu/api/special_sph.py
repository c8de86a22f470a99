"""``jax.scipy.special.sph_harm_y``: spherical harmonics Y_n^m(theta, phi) from jax's normalized
associated Legendre functions (``_gen_associated_legendre``: the diagonal by a cumulative
product, the first off-diagonal, then the three-term recurrence in the degree, one step per
diagonal l - m = 2 .. n_max, run here as a ``td.scan`` over the steps' coefficient planes as
jax's ``fori_loop`` does).  The coefficient planes are jax's, computed in the input's dtype with
numpy (the same correctly rounded operations).  Differentiable in theta and phi through the
primitives, as jax's is."""

from __future__ import annotations

import operator

import numpy as np

from tidu.api.control_flow import scan
from tidu.api.lax_math import complex as _complex
from tidu.graph.dtypes import kind_of
from tidu.numpy import core as _core
from tidu.numpy import shapes as _shapes
from tidu.numpy import sorting as _sorting
from tidu.numpy import ufuncs as _ufuncs
from tidu.numpy.scipy import special as _special
from tidu.numpy.take import take
from tidu.trace.tracer import Tracer, _lift, _trace_of

__all__ = ["sph_harm_y"]


def _recurrence_planes(l_max: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """jax's normalized recurrence coefficients, per step i = 2 .. l_max: planes (m, l) that are
    nonzero on the diagonal l - m = i only."""
    dt = np.dtype(dtype)
    m_mat, l_mat = np.meshgrid(np.arange(l_max + 1, dtype=dt), np.arange(l_max + 1, dtype=dt),
                               indexing="ij")
    with np.errstate(divide="ignore", invalid="ignore"):
        c0, c1 = l_mat * l_mat, m_mat * m_mat
        c2, c3 = dt.type(2.0) * l_mat, (l_mat - dt.type(1.0)) * (l_mat - dt.type(1.0))
        d0 = np.sqrt((dt.type(4.0) * c0 - dt.type(1.0)) / (c0 - c1))
        d1 = np.sqrt(((c2 + dt.type(1.0)) * (c3 - c1)) / ((c2 - dt.type(3.0)) * (c0 - c1)))
    diff = np.arange(l_max + 1)[None, :] - np.arange(l_max + 1)[:, None]  # l - m
    steps = np.arange(2, l_max + 1)[:, None, None]
    p0 = np.where((diff >= 1) & (diff == steps), d0, 0).astype(dt)
    p1 = np.where((diff >= 2) & (diff == steps), d1, 0).astype(dt)
    return p0, p1


def _normalized_legendre(l_max: int, x):
    """jax's ``_gen_associated_legendre(l_max, x, True)``: shape (l_max + 1, l_max + 1, len(x)),
    (order, degree, point)."""
    dt = np.dtype(x.dtype)
    n = x.shape[0]
    init = dt.type(0.5 / np.sqrt(np.pi))
    a_idx = np.arange(1, l_max + 1, dtype=dt)
    f_a = np.cumprod(dt.type(-1) * np.sqrt(dt.type(1.0) + dt.type(0.5) / a_idx)).astype(dt)
    f_b = np.sqrt(dt.type(2.0) * np.arange(l_max, dtype=dt) + dt.type(3.0))
    y = _sorting.cumprod(_core.broadcast_to(_core.sqrt(1.0 - x * x), (l_max, n)), axis=0)
    p_diag = init * (f_a[:, None] * y)  # p(l, l), l >= 1
    rows = [_core.broadcast_to(_core.astype(init, dt), (1, n))]
    rows.append(p_diag)
    diag = _core.concatenate(rows, axis=0) if l_max > 0 else rows[0]  # p(m, m), (L+1, n)
    off = (f_b[:, None] * x[None, :]) * diag[:l_max]  # p(m, m + 1), m < l_max
    # p as (m, l, point): the diagonal and the first off-diagonal, zero elsewhere
    eye = np.eye(l_max + 1, dtype=dt)
    sup = np.eye(l_max + 1, k=1, dtype=dt)
    p = eye[:, :, None] * diag[:, None, :]
    if l_max > 0:
        off_full = _core.concatenate([off, diag[:1] * 0], axis=0)
        p = p + sup[:, :, None] * off_full[:, None, :]
    if l_max > 1:
        c0, c1 = _recurrence_planes(l_max, dt)

        def step(pv, coeffs):
            k0, k1 = coeffs
            h = (k0[:, :, None] * (_shapes.roll(pv, 1, axis=1) * x)
                 - k1[:, :, None] * _shapes.roll(pv, 2, axis=1))
            return pv + h, None

        p, _ = scan(step, p, (c0, c1))
    return p


def sph_harm_y(n, m, theta, phi, diff_n: int | None = None, n_max: int | None = None):
    """Y_n^m(theta, phi), as ``jax.scipy.special.sph_harm_y``: n the degree, m the order
    (integer arrays, |m| <= n), theta the colatitude in [0, pi], phi the longitude; 1-D
    arguments of one length (a scalar theta is one point, used for every n, as jax's).
    ``n_max`` (static) is max(n); without it n must be concrete.  Degrees above n_max are
    clipped to it, as jax's."""
    if diff_n is not None:
        raise NotImplementedError("The 'diff_n' argument to sph_harm_y is not supported "
                                  "(as in jax).")
    if n_max is None:
        if isinstance(n, Tracer):
            raise ValueError("sph_harm_y: n is traced, so n_max (the largest degree) must be "
                             "given statically, as jax requires")
        n_max = int(np.max(np.asarray(n)))
    n_max = operator.index(n_max)
    (theta_f,) = _special._inexact(theta)
    if kind_of(theta_f.dtype) == "c":
        raise TypeError(f"sph_harm_y: theta must be real, got {theta_f.dtype}")
    if theta_f.ndim == 0:
        theta_f = _core.reshape(theta_f, (1,))
    if theta_f.ndim != 1:
        raise ValueError(f"sph_harm_y: theta must be a scalar or 1-D, got shape {theta_f.shape}")
    t = _trace_of(n, m, theta, phi)
    n, m = _lift(t, n), _lift(t, m)
    if kind_of(n.dtype) not in "iu" or kind_of(m.dtype) not in "iu":
        raise TypeError(f"sph_harm_y: n and m must be integer arrays, got {n.dtype} and "
                        f"{m.dtype}")
    legendre = _normalized_legendre(n_max, _core.cos(theta_f))
    am = _core.abs(m)
    length = n.shape[0] if n.ndim else 1
    pts = np.arange(length)
    flat = legendre.shape[1] * legendre.shape[2]
    last = legendre.shape[0] * flat - 1
    size = legendre.shape[2]
    idx = (_ufuncs.clip(am, 0, n_max) * flat + _ufuncs.clip(n, 0, n_max) * size
           + np.minimum(pts, size - 1))
    val = take(_core.reshape(legendre, (-1,)), _ufuncs.clip(idx, 0, last))
    angle = am * phi
    dt = val.dtype
    ang = angle if kind_of(angle.dtype) == "f" else _core.astype(angle, dt)
    cre, cim = _core.cos(ang), _core.sin(ang)
    re, im = val * cre, val * cim
    h = _complex(re, im)
    sign = _core.astype(_core.where(am % 2 == 1, -1.0, 1.0), re.dtype)
    return _core.where(m < 0, sign * _core.conj(h), h)


_special._register_loops(sph_harm_y=sph_harm_y)
