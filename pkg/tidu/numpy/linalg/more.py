"""``td.linalg`` names built on the factorizations of ``core``: ``matrix_rank``, ``cond``,
``multi_dot``, ``tensorsolve``, ``tensorinv``, ``matrix_power``, ``lstsq``, written as
``jax.numpy.linalg`` writes them."""

from __future__ import annotations

import math

import numpy as np

from tidu.numpy.core import astype, matmul, reshape, where
from tidu.numpy.core import max as max_
from tidu.numpy.core import sum as sum_
from tidu.numpy.creation import zeros
from tidu.numpy.linalg.core import (
    _abs2,
    _arrays,
    _conj,
    _cutoff,
    _eye_like,
    _mT,
    _pinv_op,
    _square,
    _svd_parts,
    inv,
    matmul_,
    norm,
    solve,
    svd,
)
from tidu.numpy.shapes import moveaxis
from tidu.numpy.sorting import any as any_
from tidu.numpy.ufuncs import isnan
from tidu.trace.tracer import _lift, _trace_of

__all__ = ["cond", "lstsq", "matrix_power", "matrix_rank", "multi_dot", "tensorinv", "tensorsolve"]


def matrix_rank(M, rtol=None, *, hermitian: bool = False, tol=None):
    """The number of singular values above ``rtol`` (default max(S) * max(M, N) * eps), as
    ``jax.numpy.linalg.matrix_rank`` (int32 for a vector: whether any entry is nonzero)."""
    del hermitian
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be given")
        rtol = tol
    (M,) = _arrays("matrix_rank", M)
    if M.ndim < 2:
        return astype(any_(M != 0), np.int32)
    S = svd(M, full_matrices=False, compute_uv=False)
    if rtol is None:
        rtol = max_(S, axis=-1) * (float(max(M.shape[-2:])) * float(np.finfo(S.dtype).eps))
    rtol = _lift(_trace_of(rtol), rtol)
    rtol = reshape(rtol, rtol.shape + (1,))
    return sum_(S > rtol, axis=-1)


def cond(x, p=None):
    """The condition number of x in norm ``p`` (None/2, -2: from the singular values; else
    norm(x) * norm(inv(x)), square x only), as ``jax.numpy.linalg.cond``: inf where x is
    singular."""
    (x,) = _arrays("cond", x)
    if x.ndim < 2:
        raise ValueError(f"cond: x must be at least 2-D, got shape {x.shape}")
    if 0 in x.shape[-2:]:
        raise ValueError(f"cond: x must not be empty, got shape {x.shape}")
    if p is None or p == 2:
        s = svd(x, compute_uv=False)
        return s[..., 0] / s[..., -1]
    if p == -2:
        s = svd(x, compute_uv=False)
        r = s[..., -1] / s[..., 0]
    else:
        if x.shape[-2] != x.shape[-1]:
            raise ValueError(f"cond: for p={p!r} x must be square, got shape {x.shape}")
        r = norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))
    nan_in = any_(isnan(x), axis=(-2, -1))
    return where(isnan(r) & ~nan_in, np.inf, r)


def tensorinv(a, ind: int = 2):
    """The inverse of a as a map from its first ``ind`` axes to the rest, as
    ``jax.numpy.linalg.tensorinv``."""
    ind = int(ind)
    if ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive integer, got {ind}")
    (a,) = _arrays("tensorinv", a)
    left, right = a.shape[:ind], a.shape[ind:]
    rows, cols = math.prod(left), math.prod(right)
    if rows != cols:
        raise ValueError(f"tensorinv: the product of the first {ind} axes of a {a.shape} "
                         f"({rows}) must equal that of the rest ({cols})")
    return reshape(inv(reshape(a, (rows, cols))), right + left)


def tensorsolve(a, b, axes=None):
    """x with tensordot(a, x, x.ndim) = b, as ``jax.numpy.linalg.tensorsolve``."""
    a, b = _arrays("tensorsolve", a, b)
    if axes is not None:
        axes = tuple(axes)
        a = moveaxis(a, axes, len(axes) * (a.ndim - 1,))
    out_shape = a.shape[b.ndim:]
    if a.shape[:b.ndim] != b.shape:
        raise ValueError(f"tensorsolve: the leading axes of a {a.shape} must match b's "
                         f"shape {b.shape}")
    n = math.prod(b.shape)
    if n != math.prod(out_shape):
        raise ValueError(f"tensorsolve: prod(a.shape[:b.ndim]) = {n} must equal "
                         f"prod(a.shape[b.ndim:]) = {math.prod(out_shape)} (a {a.shape})")
    x = solve(reshape(a, (n, n)), reshape(b, (n,)))
    return reshape(x, out_shape)


def _chain_order(dims):
    """The cheapest parenthesisation of a matrix chain (dims[i] x dims[i+1] each): split[i][j]."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(arrays, *, precision=None):
    """The product of a chain of matrices in the cheapest order, as
    ``jax.numpy.linalg.multi_dot``: the first and last may be vectors."""
    del precision
    arrs = list(_arrays("multi_dot", *arrays)) if len(arrays) else []
    if len(arrs) < 2:
        raise ValueError(f"multi_dot: needs at least two arrays, got {len(arrs)}")
    shapes = [a.shape for a in arrs]
    if not (arrs[0].ndim in (1, 2) and arrs[-1].ndim in (1, 2)
            and all(a.ndim == 2 for a in arrs[1:-1])):
        raise ValueError(f"multi_dot: arrays must be 2-D, except the first and last, which "
                         f"may be 1-D; got shapes {shapes}")
    if any(a.shape[-1] != b.shape[0] for a, b in zip(arrs[:-1], arrs[1:])):
        raise ValueError(f"multi_dot: the last axis of each array must match the first of "
                         f"the next; got shapes {shapes}")
    first_vec, last_vec = arrs[0].ndim == 1, arrs[-1].ndim == 1
    if first_vec:
        arrs[0] = reshape(arrs[0], (1,) + arrs[0].shape)
    if last_vec:
        arrs[-1] = reshape(arrs[-1], arrs[-1].shape + (1,))
    dims = [arrs[0].shape[0]] + [a.shape[1] for a in arrs]
    split = _chain_order(dims)

    def prod(i, j):
        if i == j:
            return arrs[i]
        k = split[i][j]
        return matmul(prod(i, k), prod(k + 1, j))

    out = prod(0, len(arrs) - 1)
    shape = out.shape
    if first_vec:
        shape = shape[1:]
    if last_vec:
        shape = shape[:-1]
    return reshape(out, shape)


def matrix_power(a, n: int):
    """a raised to the integer power n (repeated squaring; n < 0 inverts first), as
    ``jax.numpy.linalg.matrix_power``."""
    if not isinstance(n, (int, np.integer)):
        raise TypeError(f"matrix_power: exponent must be an integer, got {n!r}")
    (a,) = _arrays("matrix_power", a)
    _square("matrix_power", a)
    n = int(n)
    if n == 0:
        return _eye_like(a)
    if n < 0:
        a, n = inv(a), -n
    result, z = None, a
    while True:
        if n & 1:
            result = z if result is None else matmul_(result, z)
        n >>= 1
        if not n:
            return result
        z = matmul_(z, z)


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """``(x, resid, rank, s)`` minimising |a x - b|, as ``jax.numpy.linalg.lstsq`` (from the
    SVD): a (M, N), b (M,) or (M, K); singular values at most ``rcond * max(s)`` (default
    ``eps * max(M, N)``) are dropped; resid is sum |b - a x|^2 per column when rank == N and
    M > N, else an empty-as-zero array as jax returns. With ``numpy_resid`` resid is numpy's
    empty array where numpy gives one: for M <= N; for M > N numpy's shape depends on the rank,
    which a traced program cannot have, so it is refused (jax's raises under jit too)."""
    a, b = _arrays("lstsq", a, b)
    if a.ndim != 2:
        raise ValueError(f"lstsq: a of shape {a.shape} must be 2-dimensional")
    if numpy_resid and a.shape[0] > a.shape[1]:
        raise ValueError("lstsq: numpy_resid=True with M > N: numpy's residual is empty or not "
                         "depending on the rank, a shape a traced program cannot have; use "
                         "numpy_resid=False (resid is 0 where numpy's is empty)")
    vector = b.ndim == 1
    if vector:
        b = reshape(b, (b.shape[0], 1))
    if b.ndim != 2 or b.shape[0] != a.shape[0]:
        raise ValueError(f"lstsq: b of shape {b.shape} does not match a of shape {a.shape}")
    m, n = a.shape
    if rcond is None:
        rcond = np.finfo(a.dtype).eps * max(m, n)
    if min(m, n):
        # x = pinv(a) b with pinv's derivative, not the SVD's (which cannot give it where
        # singular values repeat: at a = I it gave a diagonal gradient, jax NaN, issue #28).
        # pinv and s come from one SVD (one op: _pinv_op).
        p, s = _pinv_op(a, _cutoff(a, rcond), True)
        keep = s >= s[0:1] * rcond
        x = matmul_(p, b)
    else:
        u, s, vh = _svd_parts(a, False, True)
        keep = s > 0
        sinv = where(keep, 1 / where(keep, s, 1), 0)
        x = matmul_(_conj(_mT(vh)), astype(sinv[:, None], a.dtype) * matmul_(_conj(_mT(u)), b))
    rank = sum_(astype(keep, "int32"))
    r = b - matmul_(a, x)
    resid = sum_(_abs2(r), axis=0)
    full = astype(rank == n, resid.dtype) if m > n else astype(rank < 0, resid.dtype)
    resid = resid * full
    if vector:
        x, resid = reshape(x, (n,)), reshape(resid, ())
    if numpy_resid:  # M <= N here: numpy's residual is empty
        resid = zeros((0,), resid.dtype)
    return x, resid, rank, s
