"""jax.Array's ``view`` and ``byteswap`` on traced values, as jax writes them: the bytes read as
another dtype through the ``BitcastConvertType`` primitive, with jax's reshapes of the last axis
for narrower and wider dtypes, bool through uint8, complex as interleaved (real, imag) pairs;
``byteswap`` reverses each element's bytes (viewed as uint8)."""

from __future__ import annotations

import numpy as np

from tidu import ops as P
from tidu.graph.dtypes import kind_of
from tidu.numpy import core, shapes
from tidu.trace.tracer import _emit, _lift, _trace_of

__all__ = ["byteswap", "view"]


def _bitcast(x, dt):
    return _emit(x._t, P.BitcastConvertType(np.dtype(dt).name), x)


def view(x, dtype=None, type=None):  # noqa: A002 - numpy's and jax's name
    """x's bytes read as ``dtype``, as ``jax.Array.view``: a narrower dtype multiplies the last
    axis, a wider one divides it (its byte length must be a multiple)."""
    if type is not None:
        raise NotImplementedError("`type` argument of array.view() is not supported.")
    x = _lift(_trace_of(x), x)
    if dtype is None:
        return x
    dt = np.dtype(dtype)
    nin, nout = np.dtype(x.dtype).itemsize * 8, dt.itemsize * 8
    if x.ndim == 0:
        if nin != nout:
            raise ValueError("view() of a 0d array is only supported if the itemsize is "
                             "unchanged.")
        return core.reshape(view(core.reshape(x, (1,)), dt), ())
    if (x.shape[-1] * nin) % nout != 0:
        raise ValueError("When changing to a larger dtype, its size must be a divisor of the "
                         "total size in bytes of the last axis of the array.")
    if np.dtype(x.dtype) == dt:
        return x
    if np.dtype(x.dtype) == np.bool_:
        return view(core.astype(x, np.uint8), dt)
    if kind_of(x.dtype) == "c":
        pairs = shapes.stack([core.real(x), core.imag(x)], axis=-1)
        return view(core.reshape(pairs, x.shape[:-1] + (2 * x.shape[-1],)), dt)
    if dt == np.bool_:
        return core.astype(view(x, np.uint8), np.bool_)
    if dt.kind == "c":
        part = np.dtype(np.float32 if dt == np.complex64 else np.float64)
        out = core.astype(view(x, part), dt)
        return out[..., 0::2] + 1j * out[..., 1::2]
    if nin < nout:
        k = nout // nin
        return _bitcast(core.reshape(x, x.shape[:-1] + (x.shape[-1] // k, k)), dt)
    if nin > nout:
        out = _bitcast(x, dt)
        return core.reshape(out, out.shape[:-2] + (out.shape[-2] * out.shape[-1],))
    return _bitcast(x, dt)


def byteswap(x, inplace: bool = False):
    """Each element's bytes in reverse order, as ``jax.Array.byteswap`` (complex: the real and
    imaginary parts each)."""
    if inplace:
        raise ValueError("byteswap: inplace=True is not supported (traced values are "
                         "immutable), as in jax")
    x = _lift(_trace_of(x), x)
    if kind_of(x.dtype) == "c":
        re, im = byteswap(core.real(x)), byteswap(core.imag(x))
        return core.astype(re, x.dtype) + 1j * core.astype(im, x.dtype)
    if np.dtype(x.dtype).itemsize == 1:
        return x
    b = _bitcast(x, np.uint8)
    return _bitcast(shapes.flip(b, axis=-1), x.dtype)
