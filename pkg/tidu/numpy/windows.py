"""jax.numpy's window functions (``hamming``, ``hanning``, ``blackman``, ``bartlett``,
``kaiser``), ``i0`` and the bit functions ``bitwise_count``, ``packbits``, ``unpackbits``.

The windows of a static length are constants (numpy arrays, float64 as jax's under x64);
``kaiser`` with a traced ``beta`` is computed with ``i0``. ``i0`` is
``td.scipy.special.i0`` (``exp(|x|) i0e(x)``). The bit functions are shifts, ands and sums of
the integer primitives (``bitwise_count`` a SWAR popcount of a dozen of them).
"""

from __future__ import annotations

import numpy as np

from tidu.graph.dtypes import kind_of
from tidu.numpy import core, logical, shapes
from tidu.numpy.scipy.special import i0 as _i0
from tidu.numpy.shapes import _axis, _numpy_outside
from tidu.trace.tracer import Tracer, _lift, _trace_of

__all__ = ["bartlett", "bitwise_count", "blackman", "hamming", "hanning", "i0", "kaiser",
           "packbits", "unpackbits"]


def _window(np_fn, name):
    def f(M):
        if isinstance(M, Tracer):
            raise TypeError(f"{name}: M must be a static int (the window's length)")
        return np_fn(int(M)).astype(np.float64)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"numpy's {name} window of length M (a constant, float64)."
    return f


hamming = _window(np.hamming, "hamming")
hanning = _window(np.hanning, "hanning")
blackman = _window(np.blackman, "blackman")
bartlett = _window(np.bartlett, "bartlett")


@_numpy_outside(np.i0)
def i0(x):
    """The modified Bessel function of the first kind, order 0 (real inputs)."""
    x = _lift(_trace_of(x), x)
    if kind_of(x.dtype) == "c":
        raise ValueError("i0: complex input is not supported")
    return _i0(x)


def kaiser(M: int, beta):
    """The Kaiser window of length M; beta may be traced."""
    if not isinstance(beta, Tracer) and not shapes._traced():
        return np.kaiser(int(M), beta).astype(np.float64)
    M = int(M)
    if M <= 1:
        return np.ones(max(M, 0))
    n = np.arange(M, dtype=np.float64)
    alpha = (M - 1) / 2.0
    r = np.sqrt(1 - ((n - alpha) / alpha) ** 2)
    b = core.astype(_lift(_trace_of(beta), beta), np.float64)
    return i0(b * r) / i0(b)


def _as_unsigned(x):
    bits = x.dtype.itemsize * 8
    return core.astype(x, np.dtype(f"uint{bits}")), bits


def bitwise_count(x, /):
    """The number of set bits of each element's absolute value (numpy's and jax's), as
    uint8."""
    if not shapes._traced() and not isinstance(x, Tracer):
        a = np.asarray(x)
        return np.bitwise_count(a).astype(np.uint8)
    x = _lift(_trace_of(x), x)
    if kind_of(x.dtype) == "b":
        return core.astype(x, np.uint8)
    if kind_of(x.dtype) not in "iu":
        raise TypeError(f"bitwise_count: integer or bool input expected, got {x.dtype}")
    u, bits = _as_unsigned(x)
    if kind_of(x.dtype) == "i":
        u = core.where(x < 0, 0 - u, u)  # |x| as unsigned: exact for the minimum too
    # SWAR popcount (unsigned arithmetic wraps): pairs, nibbles, bytes, then a multiply sums
    # the bytes into the top one
    ud = u.dtype

    def c(v):
        return np.array(v & ((1 << bits) - 1), ud)

    def band(a, m):
        return logical.bitwise_and(a, c(m))

    def shr(a, k):
        return logical.right_shift(a, np.array(k, ud))

    u = u - band(shr(u, 1), 0x5555555555555555)
    u = band(u, 0x3333333333333333) + band(shr(u, 2), 0x3333333333333333)
    u = band(u + shr(u, 4), 0x0F0F0F0F0F0F0F0F)
    if bits > 8:
        u = shr(u * c(0x0101010101010101), bits - 8)
    return core.astype(u, np.uint8)


def packbits(a, axis=None, bitorder: str = "big"):
    """The elements (nonzero as 1) packed 8 to a uint8 along axis (flattened when None),
    the last byte padded with zeros."""
    if not shapes._traced() and not isinstance(a, Tracer):
        return np.packbits(a, axis=axis, bitorder=bitorder)
    if bitorder not in ("big", "little"):
        raise ValueError("packbits: bitorder must be 'big' or 'little'")
    x = _lift(_trace_of(a), a)
    if kind_of(x.dtype) not in "biu":
        raise TypeError("packbits: expected an integer or bool array")
    if axis is None:
        x, axis = shapes.ravel(x), 0
    ax = _axis(axis, x.ndim, "packbits")
    bit = core.astype(x != 0, np.uint8)
    bit = shapes.moveaxis(bit, ax, -1)
    n = bit.shape[-1]
    pad = -n % 8
    if pad:
        bit = shapes.pad(bit, [(0, 0)] * (bit.ndim - 1) + [(0, pad)])
    bit = core.reshape(bit, bit.shape[:-1] + ((n + pad) // 8, 8))
    w = np.array([128, 64, 32, 16, 8, 4, 2, 1] if bitorder == "big"
                 else [1, 2, 4, 8, 16, 32, 64, 128], np.uint8)
    out = core.astype(core.sum(bit * w, axis=-1), np.uint8)
    return shapes.moveaxis(out, -1, ax)


def unpackbits(a, axis=None, count=None, bitorder: str = "big"):
    """The bits of uint8 elements as a uint8 array of 0s and 1s, 8 per element along axis
    (flattened when None); `count` keeps the first count bits (negative: drops from the end)."""
    if not shapes._traced() and not isinstance(a, Tracer):
        return np.unpackbits(a, axis=axis, count=count, bitorder=bitorder)
    if bitorder not in ("big", "little"):
        raise ValueError("unpackbits: bitorder must be 'big' or 'little'")
    x = _lift(_trace_of(a), a)
    if x.dtype != np.uint8:
        raise TypeError("unpackbits: expected an input array of unsigned byte data type")
    if axis is None:
        x, axis = shapes.ravel(x), 0
    ax = _axis(axis, x.ndim, "unpackbits")
    x = shapes.moveaxis(x, ax, -1)
    sh = np.arange(7, -1, -1, dtype=np.uint8) if bitorder == "big" else \
        np.arange(8, dtype=np.uint8)
    bits = logical.bitwise_and(logical.right_shift(shapes.expand_dims(x, -1), sh), 1)
    bits = core.reshape(bits, x.shape[:-1] + (x.shape[-1] * 8,))
    if count is not None:
        n = bits.shape[-1]
        c = count if count >= 0 else max(n + count, 0)
        bits = shapes.pad(bits[..., :c], [(0, 0)] * (bits.ndim - 1) + [(0, max(c - n, 0))]) \
            if c > n else bits[..., :c]
    return shapes.moveaxis(core.astype(bits, np.uint8), -1, ax)
