"""``td.fft``: ``jax.numpy.fft``'s functions, with its names, arguments and semantics
(docs/numpy.md, "Fourier transforms").

Every transform is one ``Fft`` primitive (``tidu.ops.fft``, at most 3 axes each) over the
trailing axes, with the requested axes moved there and back by Transpose, ``n``/``s`` applied by
Slice (truncation) and Pad (zero padding) before it, and ``norm`` as one multiplication after it:
jax's ``_fft_core`` step for step, so values, dtypes and errors match jax's.  More than 3 axes
chain transforms as jax does.  ``fftfreq``/``rfftfreq`` with a static spacing are constants
(numpy arrays), like the other constructors; ``fftshift``/``ifftshift`` are ``roll``.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Sequence

import numpy as np

from tidu import ops as P
from tidu.graph.dtypes import kind_of, to_inexact_dtype
from tidu.numpy import core as T
from tidu.numpy import shapes as S
from tidu.ops.fft import FftType, complex_dtype
from tidu.trace.tracer import Tracer, _const, _dtype_of, _emit, _op, _trace_of
from tidu.trace.tracer import _lift as _lift_in

__all__ = [
    "fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifft2", "ifftn", "ifftshift",
    "ihfft", "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq", "rfftn",
]

_range = builtins.range
_NORMS = ("backward", "ortho", "forward")


def _lift(a, typ: FftType, name: str) -> Tracer:
    """a traced, in the dtype the transform takes (jax's ``lax.fft``): real for RFFT (complex
    input refused), complex otherwise; integers and bools become jax's
    to_inexact_dtype (float32 up to 32 bits, float64 for 64) or its complex."""
    dt = np.dtype(_dtype_of(a))
    if typ == FftType.RFFT:
        if kind_of(dt) == "c":
            raise ValueError(f"jax.numpy.fft.{name}: only real valued inputs supported for rfft "
                             f"(got {dt})")
        if dt.itemsize == 2 and kind_of(dt) == "f":  # as jax's lax.fft
            raise ValueError(f"jax.numpy.fft.{name}: RFFT input must be float32 or float64, got "
                             f"{dt}")
        want = to_inexact_dtype(dt)
    else:
        want = complex_dtype(to_inexact_dtype(dt))
    return _lift_in(_trace_of(a), a, want)


def _fft_norm(s: Sequence[int], name: str, norm: str) -> float:
    total = float(math.prod(s))
    inverse = name.startswith("i")
    if norm == "ortho":
        return math.sqrt(total) if inverse else 1.0 / math.sqrt(total)
    return total if inverse else 1.0 / total  # forward


def _fft_nd(x: Tracer, typ: FftType, s: tuple[int, ...]) -> Tracer:
    """jax's _fft_core_nd: one primitive for up to 3 trailing axes, chained beyond."""
    if len(s) <= 3:
        return _emit(x._t, _op(P.Fft, typ, s), x)
    n = 2 if len(s) == 4 else 3
    src = tuple(_range(x.ndim - len(s), x.ndim - n))
    dst = tuple(_range(x.ndim - len(s) + n, x.ndim))
    if typ in (FftType.RFFT, FftType.FFT):
        x = _emit(x._t, _op(P.Fft, typ, s[-n:]), x)
        x = S.moveaxis(x, src, dst)
        x = _fft_nd(x, FftType.FFT, s[:-n])
        return S.moveaxis(x, dst, src)
    x = S.moveaxis(x, src, dst)
    x = _fft_nd(x, FftType.IFFT, s[:-n])
    x = S.moveaxis(x, dst, src)
    return _emit(x._t, _op(P.Fft, typ, s[-n:]), x)


def _fft_core(name: str, typ: FftType, a, s, axes, norm) -> Tracer:
    full = f"jax.numpy.fft.{name}"
    if norm is not None and norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or '
                         f'"forward".')
    x = _lift(a, typ, name)
    if s is not None:
        s = tuple(operator.index(v) for v in s)
        if any(v <= 0 for v in s):
            raise ValueError(f"{full}: Shape should be positive, got s={s}.")
    if s is not None and axes is not None and len(s) != len(axes):
        raise ValueError(f"{full}: Shape and axes have different lengths (s={s}, axes={axes}).")
    orig_axes = axes
    if axes is None:
        axes = tuple(_range(x.ndim)) if s is None else tuple(_range(x.ndim - len(s), x.ndim))
    else:
        axes = tuple(operator.index(v) for v in axes)
        for v in axes:
            if not -x.ndim <= v < x.ndim:
                raise ValueError(f"{full}: axis {v} is out of bounds for an array of rank "
                                 f"{x.ndim} (shape {x.shape})")
        norm_axes = tuple(v % x.ndim for v in axes)
        if len(set(norm_axes)) != len(norm_axes):
            raise ValueError(f"{full} does not support repeated axes. Got axes {axes}.")
        axes = norm_axes
    if len(axes) != len(set(axes)):
        raise ValueError(f"{full} does not support repeated axes. Got axes {axes}.")
    if orig_axes is not None:
        moved = tuple(_range(x.ndim - len(axes), x.ndim))
        x = S.moveaxis(x, axes, moved)
        axes = moved
    if s is not None:
        in_s = list(x.shape)
        for ax, v in zip(axes, s):
            in_s[ax] = v
        if typ == FftType.IRFFT:
            in_s[-1] = in_s[-1] // 2 + 1
        if any(v < d for v, d in zip(in_s, x.shape)):  # cropping
            x = x[tuple(slice(v) for v in in_s)]
        if any(v > d for v, d in zip(in_s, x.shape)):  # zero padding
            x = S.pad(x, [(0, v - d) for v, d in zip(in_s, x.shape)])
    else:
        if typ == FftType.IRFFT:
            s = tuple(x.shape[ax] for ax in axes[:-1])
            if axes:
                s += (builtins.max(0, 2 * (x.shape[axes[-1]] - 1)),)
            if axes and s[-1] == 0:
                raise ValueError(f"{full}: the output length 2 * (m - 1) is 0 for an input axis "
                                 f"of length {x.shape[axes[-1]]}; pass n (or s)")
        else:
            s = tuple(x.shape[ax] for ax in axes)
    if not s:
        out = x
    else:
        out = _fft_nd(x, typ, tuple(s))
        if norm is not None and norm != "backward":
            out = out * _const(out._t, _fft_norm(s, name, norm), out.dtype)
    if orig_axes is not None:
        out = S.moveaxis(out, axes, orig_axes)
    return out


def _axis_check_1d(name: str, axis) -> None:
    if isinstance(axis, (list, tuple)):
        raise ValueError(f"jax.numpy.fft.{name} does not support multiple axes. Please use "
                         f"jax.numpy.fft.{name}n. Got axis = {axis!r}.")


def _fft_core_1d(name, typ, a, n, axis, norm):
    _axis_check_1d(name, axis)
    return _fft_core(name, typ, a, None if n is None else [n], None if axis is None else [axis],
                     norm)


def _fft_core_2d(name, typ, a, s, axes, norm):
    if len(axes) != 2:
        raise ValueError(f"jax.numpy.fft.{name} only supports 2 axes. Got axes = {axes!r}.")
    return _fft_core(name, typ, a, s, axes, norm)


# ---- one axis ----

def fft(a, n=None, axis=-1, norm=None):
    """The 1-D discrete Fourier transform (``jnp.fft.fft``)."""
    return _fft_core_1d("fft", FftType.FFT, a, n, axis, norm)


def ifft(a, n=None, axis=-1, norm=None):
    """The 1-D inverse discrete Fourier transform (``jnp.fft.ifft``)."""
    return _fft_core_1d("ifft", FftType.IFFT, a, n, axis, norm)


def rfft(a, n=None, axis=-1, norm=None):
    """The 1-D DFT of real input, the n // 2 + 1 non-negative frequencies (``jnp.fft.rfft``)."""
    return _fft_core_1d("rfft", FftType.RFFT, a, n, axis, norm)


def irfft(a, n=None, axis=-1, norm=None):
    """The inverse of rfft: a real signal of length n (2 * (m - 1) by default)."""
    return _fft_core_1d("irfft", FftType.IRFFT, a, n, axis, norm)


def hfft(a, n=None, axis=-1, norm=None):
    """The DFT of a Hermitian-symmetric signal given by its first half (``jnp.fft.hfft``)."""
    x = _lift(a, FftType.IRFFT, "hfft")
    _axis_check_1d("hfft", axis)
    nn = (x.shape[axis] - 1) * 2 if n is None else n
    out = _fft_core_1d("hfft", FftType.IRFFT, T.conj(x), n, axis, norm)
    return out * _const(out._t, float(nn), out.dtype)


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of hfft (``jnp.fft.ihfft``)."""
    _axis_check_1d("ihfft", axis)
    x = _lift(a, FftType.RFFT, "ihfft")
    nn = x.shape[axis] if n is None else n
    out = _fft_core_1d("ihfft", FftType.RFFT, x, n, axis, norm)
    return T.conj(out) * _const(out._t, 1.0 / nn, out.dtype)


# ---- two axes ----

def fft2(a, s=None, axes=(-2, -1), norm=None):
    """The 2-D DFT over `axes` (``jnp.fft.fft2``)."""
    return _fft_core_2d("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """The 2-D inverse DFT over `axes` (``jnp.fft.ifft2``)."""
    return _fft_core_2d("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """The 2-D DFT of real input, halved along the last of `axes` (``jnp.fft.rfft2``)."""
    return _fft_core_2d("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """The inverse of rfft2 (``jnp.fft.irfft2``)."""
    return _fft_core_2d("irfft2", FftType.IRFFT, a, s, axes, norm)


# ---- any number of axes ----

def fftn(a, s=None, axes=None, norm=None):
    """The N-D DFT over `axes` (all by default; ``jnp.fft.fftn``)."""
    return _fft_core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
    """The N-D inverse DFT over `axes` (``jnp.fft.ifftn``)."""
    return _fft_core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    """The N-D DFT of real input, halved along the last of `axes` (``jnp.fft.rfftn``)."""
    return _fft_core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    """The inverse of rfftn (``jnp.fft.irfftn``)."""
    return _fft_core("irfftn", FftType.IRFFT, a, s, axes, norm)


# ---- frequencies and shifts ----

def _freq_args(name: str, n, d):
    if isinstance(n, (list, tuple)):
        raise ValueError(f"The n argument of jax.numpy.fft.{name} only takes an int. "
                         f"Got n = {list(n)}.")
    if isinstance(d, (list, tuple)):
        raise ValueError(f"The d argument of jax.numpy.fft.{name} only takes a single value. "
                         f"Got d = {list(d)}.")
    return operator.index(n)


def _scaled(k: np.ndarray, d, n: int, dtype):
    if isinstance(d, Tracer):
        return _lift_in(d._t, k, dtype) / (d * n)
    return (k / np.asarray(d * n, dtype=dtype)).astype(dtype)


def fftfreq(n, d=1.0, *, dtype=None):
    """The sample frequencies of fft: [0, 1, ..., n//2 - 1 (or n//2), -n//2, ..., -1] / (d n)."""
    n = _freq_args("fftfreq", n, d)
    dtype = np.dtype(dtype or "float64")
    i = np.arange(n, dtype=dtype)
    k = (i + n // 2) % n - n // 2
    return _scaled(k.astype(dtype), d, n, dtype)


def rfftfreq(n, d=1.0, *, dtype=None):
    """The sample frequencies of rfft: [0, 1, ..., n // 2] / (d n)."""
    n = _freq_args("rfftfreq", n, d)
    dtype = np.dtype(dtype or "float64")
    k = np.arange(0, n // 2 + 1, dtype=dtype)
    return _scaled(k, d, n, dtype)


def _shifts(x, axes, sign: int):
    if axes is None:
        axes = tuple(_range(x.ndim))
        return [sign * (dim // 2) for dim in x.shape], axes
    if isinstance(axes, (int, np.integer)):
        return sign * (x.shape[axes] // 2), axes
    axes = tuple(axes)
    return [sign * (x.shape[ax] // 2) for ax in axes], axes


def fftshift(x, axes=None):
    """The zero frequency moved to the centre: roll by n // 2 along `axes` (all by default)."""
    x = S._lift(x)
    shift, axes = _shifts(x, axes, 1)
    return S.roll(x, shift, axes)


def ifftshift(x, axes=None):
    """The inverse of fftshift: roll by -(n // 2)."""
    x = S._lift(x)
    shift, axes = _shifts(x, axes, -1)
    return S.roll(x, shift, axes)
