"""jax.numpy's polynomial names beyond ``polyval``/``polyfit``: ``poly``, ``polyadd``,
``polysub``, ``polymul``, ``polyder``, ``polyint``, ``polydiv``, ``roots``.

Coefficients run from the highest power down (numpy's order) and have a static length; each is
a few slices, products and a convolution, as jax writes it, so derivatives agree with jax's.
``roots`` of a traced polynomial needs ``strip_zeros=False`` (jax's rule) and a general
eigensolver (``td.linalg.eigvals``); of a concrete one it is numpy's. Outside a trace each is
numpy's own.
"""

from __future__ import annotations

import numpy as np

from tidu.graph.dtypes import kind_of
from tidu.numpy import core, linalg, shapes
from tidu.numpy.conv import convolve
from tidu.numpy.shapes import _numpy_outside
from tidu.trace.tracer import Tracer, _lift, _trace_of, as_inexact

__all__ = ["poly", "polyadd", "polyder", "polydiv", "polyint", "polymul", "polysub", "roots"]


def _vec(t, x, name):
    x = _lift(t, x)
    if x.ndim != 1:
        raise ValueError(f"{name}: coefficients must be a 1-D array, got shape {x.shape}")
    return x


def _inexact(t, x):
    return as_inexact(x, t)


def _pad_front(x, n):
    return x if x.shape[0] == n else shapes.pad(x, [(n - x.shape[0], 0)])


def _promote2(a1, a2, name):
    t = _trace_of(a1, a2)
    a, b = _vec(t, a1, name), _vec(t, a2, name)
    dt = np.result_type(a.dtype, b.dtype)
    return t, _lift(t, a, dt), _lift(t, b, dt)


@_numpy_outside(np.polyadd)
def polyadd(a1, a2):
    """The sum of two polynomials (the shorter padded in front)."""
    _, a, b = _promote2(a1, a2, "polyadd")
    n = max(a.shape[0], b.shape[0])
    return _pad_front(a, n) + _pad_front(b, n)


@_numpy_outside(np.polysub)
def polysub(a1, a2):
    """The difference of two polynomials."""
    _, a, b = _promote2(a1, a2, "polysub")
    n = max(a.shape[0], b.shape[0])
    return _pad_front(a, n) - _pad_front(b, n)


def polymul(a1, a2, *, trim_leading_zeros: bool = False):
    """The product of two polynomials (their convolution)."""
    if not shapes._traced() and not shapes._has_tracer([a1, a2]):
        return np.polymul(a1, a2)
    _, a, b = _promote2(a1, a2, "polymul")
    return convolve(a, b, mode="full")


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots (1-D)."""
    if not shapes._traced() and not isinstance(seq_of_zeros, Tracer):
        return np.poly(seq_of_zeros)
    t = _trace_of(seq_of_zeros)
    r = _lift(t, seq_of_zeros)
    if r.ndim != 1:
        raise ValueError("poly: traced input must be 1-D roots (the characteristic polynomial "
                         "of a matrix needs a general eigensolver)")
    r = _inexact(t, r)
    a = core.astype(_lift(t, np.ones(1)), r.dtype)
    for k in range(r.shape[0]):
        zero = core.astype(_lift(t, np.zeros(1)), r.dtype)
        a = core.concatenate([a, zero], 0) - r[k] * core.concatenate([zero, a], 0)
    return a


def polyder(p, m: int = 1):
    """The m-th derivative's coefficients."""
    if not shapes._traced() and not isinstance(p, Tracer):
        return np.polyder(p, m)
    if m < 0:
        raise ValueError("polyder: order of derivative must be positive")
    t = _trace_of(p)
    x = _vec(t, p, "polyder")
    if m == 0:
        return x
    n = x.shape[0]
    coeff = (np.arange(m, n)[np.newaxis] - np.arange(m)[:, np.newaxis]).prod(0)[::-1]
    if kind_of(x.dtype) == "b":
        x = core.astype(x, np.int64)
    return x[:n - m] * coeff.astype(x.dtype) if n > m else x[:0]


def polyint(p, m: int = 1, k=None):
    """The m-th antiderivative's coefficients, the integration constants k (0 by default)."""
    if not shapes._traced() and not shapes._has_tracer([p, k]):
        return np.polyint(p, m, k)
    if m < 0:
        raise ValueError("polyint: order of integral must be positive")
    t = _trace_of(p, k)
    x = _inexact(t, _vec(t, p, "polyint"))
    if m == 0:
        return x
    ks = _lift(t, np.zeros(m) if k is None else k)
    ks = core.reshape(ks, (1,)) if ks.ndim == 0 else ks
    if ks.shape[0] == 1 and m > 1:
        ks = core.broadcast_to(ks, (m,))
    if ks.shape[0] != m:
        raise ValueError("polyint: k must be a scalar or have length m")
    dt = np.result_type(x.dtype, ks.dtype)
    x, ks = _lift(t, x, dt), _lift(t, ks, dt)
    for i in range(m):
        n = x.shape[0]
        x = core.concatenate([x / np.arange(n, 0, -1, dtype=np.float64), ks[i:i + 1]], 0)
    return x


def polydiv(u, v, *, trim_leading_zeros: bool = False):
    """(quotient, remainder) of the polynomial division u / v (jax's long division; the
    remainder keeps u's length unless trim_leading_zeros)."""
    if not shapes._traced() and not shapes._has_tracer([u, v]):
        return np.polydiv(u, v)
    t, a, b = _promote2(u, v, "polydiv")
    a, b = _inexact(t, a), _inexact(t, b)
    m, n = a.shape[0] - 1, b.shape[0] - 1
    scale = 1.0 / b[0]
    qs = []
    r = a
    for k in range(max(m - n + 1, 0)):
        d = scale * r[k]
        qs.append(core.reshape(d, (1,)))
        r = r.at[k:k + n + 1].add(-d * b)
    q = core.concatenate(qs, 0) if qs else core.astype(_lift(t, np.zeros(1)), a.dtype)
    if trim_leading_zeros:
        raise NotImplementedError("polydiv: trim_leading_zeros needs concrete values")
    return q, r


def roots(p, *, strip_zeros: bool = True):
    """The roots of the polynomial (complex). A traced p needs ``strip_zeros=False`` (jax's
    rule); its roots are the companion matrix's eigenvalues."""
    if not isinstance(p, Tracer) and not shapes._traced():
        return np.roots(p).astype(np.complex128)
    if strip_zeros:
        raise ValueError("roots: strip_zeros=True needs concrete coefficients; pass "
                         "strip_zeros=False under a trace")
    t = _trace_of(p)
    x = _inexact(t, _vec(t, p, "roots"))
    n = x.shape[0] - 1
    if n < 1:
        return core.astype(x[:0], np.complex128)
    top = core.reshape(-x[1:] / x[0], (1, n))
    sub = np.eye(n - 1, n, dtype=np.float64) if n > 1 else np.zeros((0, 1))
    return linalg.eigvals(core.concatenate([top, core.astype(_lift(t, sub), top.dtype)], 0))
