"""jax.scipy.linalg's special matrices: ``toeplitz``, ``hankel``, ``circulant``, ``leslie``,
``companion``, ``fiedler``, ``fiedler_companion``, ``convolution_matrix`` (functions of traced
vectors, batched over leading axes as jax's ``vectorize`` does, built from static gathers and
selects so they differentiate) and ``hilbert``, ``invhilbert``, ``pascal``, ``invpascal``,
``helmert``, ``hadamard``, ``dft`` (functions of a static size: numpy constants).

Where tidu differs: the constants are exact (``pascal`` and ``invhilbert`` are integer
binomials, not jax's ``exp(lgamma(.))``, so jax's values are off by rounding; ``pascal`` keeps
jax's float32 dtype)."""

from __future__ import annotations

import math
import operator

import numpy as np

from tidu.graph.dtypes import kind_of
from tidu.numpy.core import abs as _abs
from tidu.numpy.core import broadcast_to, concatenate, conj, reshape, where
from tidu.numpy.shapes import flip, pad
from tidu.numpy.take import take
from tidu.trace.tracer import _lift, _trace_of

__all__ = ["circulant", "companion", "convolution_matrix", "dft", "fiedler", "fiedler_companion",
           "hadamard", "hankel", "helmert", "hilbert", "invhilbert", "invpascal", "leslie",
           "pascal", "toeplitz"]


def _vec(name, *xs, inexact=False):
    """The operands traced, promoted to one dtype, at least 1-D."""
    t = _trace_of(*xs)
    lifted = [_lift(t, x) for x in xs]
    dt = np.result_type(*[x.dtype for x in lifted])
    if inexact and kind_of(dt) not in "fc":
        dt = np.dtype(np.float64)
    out = []
    for x in lifted:
        x = _lift(t, x, dt)
        out.append(reshape(x, (1,)) if x.ndim == 0 else x)
    return out


def _batch(name, *xs):
    """Broadcast the leading (batch) axes of 1-D-or-more operands, keeping each last axis."""
    try:
        batch = np.broadcast_shapes(*[tuple(x.shape[:-1]) for x in xs])
    except ValueError:
        raise ValueError(f"{name}: batch axes of shapes {[tuple(x.shape) for x in xs]} do not "
                         f"broadcast") from None
    return [broadcast_to(x, batch + (x.shape[-1],)) if x.shape[:-1] != batch else x for x in xs]


def _gathered(v, idx):
    """v[..., idx] with a static 2-D index array (the batch axes kept in front)."""
    return take(v, np.asarray(idx, np.int64), axis=-1, mode="promise_in_bounds")


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column c and first row r (r[0] ignored; default conj(c))."""
    if r is None:
        (c,) = _vec("toeplitz", c)
        r = conj(c) if kind_of(c.dtype) == "c" else c
    else:
        c, r = _vec("toeplitz", c, r)
    c, r = _batch("toeplitz", c, r)
    m, n = c.shape[-1], r.shape[-1]
    if m == 0 or n == 0:
        return np.zeros(tuple(c.shape[:-1]) + (m, n), c.dtype)
    elems = concatenate([flip(c, axis=-1), r[..., 1:]], axis=-1)
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    return _gathered(elems, m - 1 - i + j)


def hankel(c, r=None):
    """The Hankel matrix with first column c and last row r (r[0] ignored; default zeros)."""
    if r is None:
        (c,) = _vec("hankel", c)
        r = c * 0
    else:
        c, r = _vec("hankel", c, r)
    if c.ndim == 0 or r.ndim == 0:
        raise ValueError("hankel: c and r must be at least 1-dimensional")
    c, r = _batch("hankel", c, r)
    m, n = c.shape[-1], r.shape[-1]
    v = concatenate([c, r[..., 1:]], axis=-1)
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    return _gathered(v, i + j)


def circulant(c):
    """The circulant matrix with first column c: out[i, j] = c[(i - j) % n]."""
    (c,) = _vec("circulant", c)
    n = c.shape[-1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return _gathered(c, (i - j) % n)


def leslie(f, s):
    """The Leslie matrix: fecundities f in the first row, survival rates s below the
    diagonal."""
    f, s = _vec("leslie", f, s)
    if f.shape[-1] < 2:
        raise ValueError(f"leslie: the length of f along the last axis must be at least 2; got "
                         f"shape {tuple(f.shape)}")
    if s.shape[-1] != f.shape[-1] - 1:
        raise ValueError(f"leslie: the length of s along the last axis must be one less than "
                         f"f's; got f shape {tuple(f.shape)} and s shape {tuple(s.shape)}")
    f, s = _batch("leslie", f, pad(s, [(0, 0)] * (s.ndim - 1) + [(0, 1)]))
    n = f.shape[-1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    sub = where(i == j + 1, _gathered(s, np.broadcast_to(j, (n, n))), 0)
    return where(i == 0, _gathered(f, np.broadcast_to(j, (n, n))), sub)


def companion(a):
    """The companion matrix of the polynomial with coefficients a (highest degree first)."""
    (a,) = _vec("companion", a, inexact=True)
    if a.shape[-1] < 2:
        raise ValueError(f"companion: the length of a along the last axis must be at least 2; "
                         f"got shape {tuple(a.shape)}")
    m = a.shape[-1] - 1
    first = -a[..., 1:] / a[..., :1]
    i, j = np.arange(m)[:, None], np.arange(m)[None, :]
    return where(i == 0, _gathered(first, np.broadcast_to(j, (m, m))),
                 np.eye(m, m, -1, dtype=a.dtype))


def fiedler(a):
    """The symmetric Fiedler matrix |a[i] - a[j]|."""
    (a,) = _vec("fiedler", a)
    return _abs(a[..., :, None] - a[..., None, :])


def fiedler_companion(a):
    """The pentadiagonal Fiedler companion matrix of the polynomial with coefficients a."""
    (a,) = _vec("fiedler_companion", a, inexact=True)
    if a.shape[-1] == 0:
        raise ValueError(f"fiedler_companion requires the last axis of a to have nonzero "
                         f"length, got shape {tuple(a.shape)}")
    n = a.shape[-1] - 1
    if n == 0:
        return reshape(a[..., :0], a.shape[:-1] + (0, 0))
    a = a / a[..., :1]
    if n == 1:
        return reshape(-a[..., 1:], a.shape[:-1] + (1, 1))
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    full = (n, n)
    sup = -_gathered(a, np.broadcast_to(np.minimum(i + 2, n), full))
    sub = -_gathered(a, np.broadcast_to(np.minimum(i + 1, n), full))
    a1 = -_gathered(a, np.ones(full, np.int64))
    even, odd = i % 2 == 0, i % 2 == 1
    out = where((j == i - 2) & odd & (i >= 3), 1.0, 0.0)
    out = where((j == i - 1) & even & (i >= 2), sub, out)
    out = where((j == i + 2) & even, 1.0, out)
    out = where((j == i + 1) & even, sup, out)
    out = where((i == 1) & (j == 0), 1.0, out)
    return where((i == 0) & (j == 0), a1, out)


def convolution_matrix(a, n: int, mode: str = "full"):
    """The Toeplitz matrix A with A @ v == convolve(a, v, mode) for v of length n."""
    n = operator.index(n)
    if n <= 0:
        raise ValueError(f"convolution_matrix: n must be a positive integer; got {n}")
    (a,) = _vec("convolution_matrix", a)
    m = a.shape[-1]
    if m < 1:
        raise ValueError(f"convolution_matrix: len(a) must be at least 1; got shape "
                         f"{tuple(a.shape)}")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"convolution_matrix: mode must be one of 'full', 'valid', 'same'; got "
                         f"{mode!r}")
    widths = [(0, 0)] * (a.ndim - 1) + [(0, n - 1)]
    az, raz = pad(a, widths), pad(flip(a, axis=-1), widths)
    L = m + n - 1
    if mode == "same":
        trim = min(n, m) - 1
        tb, te = trim // 2, trim - trim // 2
    elif mode == "valid":
        tb = te = min(n, m) - 1
    else:
        tb = te = 0
    return toeplitz(az[..., tb:L - te], raz[..., L - n - tb:L - tb])


# ---- constants of a static size ----

def _size(name, n) -> int:
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"{name}: n must be non-negative; got {n}")
    return n


def _comb(n: int, k: int) -> int:
    return math.comb(n, k) if 0 <= k <= n else 0


def hilbert(n: int) -> np.ndarray:
    """The Hilbert matrix 1 / (i + j + 1)."""
    a = np.arange(_size("hilbert", n), dtype=np.float64)[:, None]
    return 1 / (a + a.T + 1)


def invhilbert(n: int) -> np.ndarray:
    """The exact inverse of the Hilbert matrix (as floats)."""
    n = _size("invhilbert", n)
    return np.array([[(-1) ** (i + j) * (i + j + 1) * _comb(n + i, n - j - 1)
                      * _comb(n + j, n - i - 1) * _comb(i + j, i) ** 2 for j in range(n)]
                     for i in range(n)], np.float64).reshape(n, n)


def _kind(name, kind):
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"{name}: expected kind to be one of ['symmetric', 'lower', 'upper']; "
                         f"got {kind}")
    return kind


def pascal(n: int, kind: str | None = None) -> np.ndarray:
    """The Pascal matrix (float32, as jax's)."""
    kind, n = _kind("pascal", kind), _size("pascal", n)
    low = np.array([[_comb(i, j) for j in range(n)] for i in range(n)], np.float64)
    low = low.reshape(n, n)
    out = low if kind == "lower" else low.T if kind == "upper" else low @ low.T
    return out.astype(np.float32)


def invpascal(n: int, kind: str | None = None) -> np.ndarray:
    """The inverse of the Pascal matrix."""
    kind, n = _kind("invpascal", kind), _size("invpascal", n)
    low = np.array([[(-1) ** (i - j) * _comb(i, j) for j in range(n)] for i in range(n)],
                   np.float64).reshape(n, n)
    return low if kind == "lower" else low.T if kind == "upper" else low.T @ low


def helmert(n: int, full: bool = False) -> np.ndarray:
    """The Helmert matrix (the first row 1/sqrt(n) only when ``full``)."""
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"helmert: n must be a positive integer; got {n}")
    i, j = np.arange(n - 1)[:, None], np.arange(n)[None, :]
    k = (i + 1).astype(np.float64)
    den = np.sqrt(k * (k + 1))
    h = np.where(j <= i, 1.0 / den, np.where(j == i + 1, -k / den, 0.0))
    if full:
        h = np.concatenate([np.full((1, n), 1.0 / np.sqrt(n)), h], axis=0)
    return h


def hadamard(n: int, dtype=int) -> np.ndarray:
    """The Sylvester Hadamard matrix of order n (a power of 2)."""
    n = operator.index(n)
    if n < 1 or not math.log2(n).is_integer():
        raise ValueError(f"hadamard: n must be a positive power of 2; got {n}")
    h = np.ones((1, 1), dtype=np.dtype(dtype))
    for _ in range(int(math.log2(n))):
        h = np.block([[h, h], [h, -h]])
    return h


def dft(n: int, scale: str | None = None, *, dtype=None) -> np.ndarray:
    """The discrete Fourier transform matrix exp(-2 pi i jk / n) (scaled by 1/sqrt(n) or 1/n)."""
    if scale not in (None, "sqrtn", "n"):
        raise ValueError(f"dft: scale must be None, 'sqrtn', or 'n'; got {scale!r}")
    dt = np.dtype(np.complex128 if dtype is None else dtype)
    if kind_of(dt) != "c":
        raise ValueError(f"dft: dtype must be a complex floating-point type; got {dt}")
    n = _size("dft", n)
    a = np.arange(n, dtype=dt)
    w = np.exp(-2j * np.pi * a[:, None] * a[None, :] / n)
    w = w / np.sqrt(n) if scale == "sqrtn" else w / n if scale == "n" else w
    return w.astype(dt)
