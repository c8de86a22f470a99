"""``tidu.scipy.signal``: jax.scipy.signal's convolutions and ``detrend`` on traced values.

Composites of tidu primitives written as jax writes them, with jax's signatures:

- ``convolve``, ``correlate`` (N-D), ``convolve2d``, ``correlate2d``: one Conv primitive
  (``tidu.numpy.conv.conv_general_dilated``) on the arrays as a single-batch, single-feature
  image, the smaller array the kernel (jax's ``_convolve_nd``); modes full/same/valid;
  ``method='fft'`` goes to ``fftconvolve``, ``'auto'``/``'direct'`` to the Conv.
- ``fftconvolve``: ``td.fft.rfftn``/``irfftn`` (``fftn``/``ifftn`` for complex inputs) over
  the full size, then the centred slice; ``axes`` convolves along those axes only, the others
  matched elementwise (jax vmaps over them; the product broadcasts the same way here).
- ``detrend``: ``'constant'`` subtracts the mean; ``'linear'`` subtracts, per segment between
  breakpoints ``bp``, the least-squares line (jax solves it with ``lstsq``; here the projection
  onto (1, t) is written out, equal to rounding, differentiable the same way).
- ``istft``: the inverse transform of the frames, windowed and overlapped-and-added by jax's
  pad/reshape/sum scheme (no scatter); the window-square normalisation is a constant.
- ``stft``, ``csd``, ``welch``: jax's ``_spectral_helper``: the segments are one gather of the
  (boundary-extended, padded) signal, detrended, windowed and transformed with ``td.fft``; the
  window ``'hann'`` is built here, others come from ``scipy.signal.get_window`` (scipy needed,
  as in jax) or are given as an array.

As jax: integer and bool inputs are computed in floating point (tidu: float64), ``boundary``
other than ``'fill'`` or a nonzero ``fillvalue`` raise ``NotImplementedError``, ``precision``
is accepted (tidu computes at full precision).
"""

from __future__ import annotations

import builtins
import warnings

import numpy as np

from tidu.graph.dtypes import kind_of
from tidu.numpy import fft as _fft
from tidu.numpy.conv import conv_general_dilated
from tidu.numpy.core import concatenate, conj, mean, real, reshape, transpose
from tidu.numpy.core import sum as _sum
from tidu.numpy.shapes import flip, moveaxis, pad
from tidu.numpy.statistics import median
from tidu.trace.tracer import Tracer, _lift, _trace_of

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "csd", "detrend", "fftconvolve",
           "istft", "stft", "welch"]

_range = builtins.range
_MODES = ("full", "same", "valid")


def _inexact(*xs):
    """The operands traced in one inexact dtype (integers and bool: float64)."""
    t = _trace_of(*xs)
    dts = [x.aval.dtype if isinstance(x, Tracer) else np.asarray(x).dtype for x in xs]
    dt = np.result_type(*dts)
    if kind_of(dt) not in "fc":
        dt = np.dtype("float64")
    return [_lift(t, x, dt) for x in xs]


def _check_mode(mode, name):
    if mode not in _MODES:
        raise ValueError(f"{name}: mode {mode!r} must be one of 'full', 'same', 'valid'")


def _convolve_nd(in1, in2, mode, name, precision=None):
    """jax's _convolve_nd: the full/same/valid N-D convolution as one Conv."""
    _check_mode(mode, name)
    if in1.ndim != in2.ndim:
        raise ValueError(f"{name}: in1 and in2 must have the same number of dimensions "
                         f"(shapes {in1.shape} and {in2.shape})")
    if in1.size == 0 or in2.size == 0:
        raise ValueError(f"{name}: zero-size arrays not supported in convolutions, got shapes "
                         f"{in1.shape} and {in2.shape}")
    no_swap = all(s1 >= s2 for s1, s2 in zip(in1.shape, in2.shape))
    swap = all(s1 <= s2 for s1, s2 in zip(in1.shape, in2.shape))
    if not (no_swap or swap):
        raise ValueError(f"{name}: one input must be smaller than the other in every dimension "
                         f"(shapes {in1.shape} and {in2.shape})")
    shape_o = in2.shape
    if swap:
        in1, in2 = in2, in1
    shape = in2.shape
    in2 = flip(in2)
    if mode == "valid":
        padding = [(0, 0) for _ in shape]
    elif mode == "same":
        padding = [(s - 1 - (so - 1) // 2, s - so + (so - 1) // 2)
                   for s, so in zip(shape, shape_o)]
    else:
        padding = [(s - 1, s - 1) for s in shape]
    nd = in1.ndim
    y = conv_general_dilated(reshape(in1, (1, 1) + in1.shape), reshape(in2, (1, 1) + in2.shape),
                             (1,) * nd, padding, precision=precision)
    return reshape(y, y.shape[2:])


def convolve(in1, in2, mode="full", method="auto", precision=None):
    """jax.scipy.signal.convolve: the N-D convolution of two arrays of one rank.

    Args:
        in1, in2: the arrays (one at least as large as the other along every axis).
        mode: 'full' (default), 'same' (the size of in1, centred) or 'valid'.
        method: 'auto' or 'direct' (one Conv) or 'fft' (``fftconvolve``).
        precision: accepted for jax compatibility.
    """
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    if method not in ("auto", "direct"):
        raise ValueError(f"convolve: got method={method!r}; expected 'auto', 'fft', or 'direct'")
    in1, in2 = _inexact(in1, in2)
    return _convolve_nd(in1, in2, mode, "convolve", precision)


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """jax.scipy.signal.correlate: ``convolve(in1, flip(conj(in2)))``."""
    in1, in2 = _inexact(in1, in2)
    return convolve(in1, flip(conj(in2)), mode, method=method, precision=precision)


def _check_2d(in1, in2, boundary, fillvalue, name):
    if boundary != "fill" or not _is_zero(fillvalue):
        raise NotImplementedError(f"{name}() only supports boundary='fill', fillvalue=0 "
                                  f"(as jax); got boundary={boundary!r}, fillvalue={fillvalue!r}")
    if in1.ndim != 2 or in2.ndim != 2:
        raise ValueError(f"{name}() only supports 2-dimensional inputs (shapes {in1.shape} and "
                         f"{in2.shape})")


def _is_zero(v) -> bool:
    if isinstance(v, Tracer):
        raise NotImplementedError("a traced fillvalue is not supported (only fillvalue=0)")
    return bool(np.all(np.asarray(v) == 0))


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """jax.scipy.signal.convolve2d: the 2-D convolution (boundary 'fill' with 0 only, as jax)."""
    in1, in2 = _inexact(in1, in2)
    _check_2d(in1, in2, boundary, fillvalue, "convolve2d")
    return _convolve_nd(in1, in2, mode, "convolve2d", precision)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """jax.scipy.signal.correlate2d: the 2-D cross-correlation, jax's case analysis (which
    array is flipped and conjugated depends on the mode and which is larger)."""
    in1, in2 = _inexact(in1, in2)
    _check_2d(in1, in2, boundary, fillvalue, "correlate2d")
    _check_mode(mode, "correlate2d")
    swap = all(s1 <= s2 for s1, s2 in zip(in1.shape, in2.shape))
    same_shape = tuple(in1.shape) == tuple(in2.shape)
    name = "correlate2d"
    if mode == "same":
        return flip(_convolve_nd(flip(in1), conj(in2), mode, name, precision))
    if mode == "valid":
        if swap and not same_shape:
            return _convolve_nd(flip(in2), conj(in1), mode, name, precision)
        return flip(_convolve_nd(flip(in1), conj(in2), mode, name, precision))
    if swap:
        return conj(_convolve_nd(flip(in2), conj(in1), mode, name, precision))
    return flip(_convolve_nd(flip(in1), conj(in2), mode, name, precision))


def fftconvolve(in1, in2, mode="full", axes=None):
    """jax.scipy.signal.fftconvolve: the convolution through FFTs of the full size.

    Args:
        in1, in2: arrays of one rank.
        mode: 'full', 'same' or 'valid'.
        axes: the axes to convolve along (default all); the others must match in size and are
            taken elementwise.
    """
    in1, in2 = _inexact(in1, in2)
    if in1.ndim != in2.ndim:
        raise ValueError(f"fftconvolve: in1 and in2 should have the same dimensionality "
                         f"(shapes {in1.shape} and {in2.shape})")
    _check_mode(mode, "fftconvolve")
    nd = in1.ndim
    if axes is None:
        axes = tuple(_range(nd))
    else:
        axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
        for a in axes:
            if not -nd <= a < nd:
                raise ValueError(f"fftconvolve: axis {a} is out of bounds for rank {nd}")
        axes = tuple(sorted({a % nd for a in axes}))
    mapped = [i for i in _range(nd) if i not in axes]
    if any(in1.shape[i] != in2.shape[i] for i in mapped):
        raise ValueError(f"fftconvolve: mapped axes must have same shape; got in1.shape="
                         f"{in1.shape} in2.shape={in2.shape} axes={axes}")
    s1 = [in1.shape[a] for a in axes]
    s2 = [in2.shape[a] for a in axes]
    if mode == "valid":
        no_swap = all(a >= b for a, b in zip(s1, s2))
        swap = all(a <= b for a, b in zip(s1, s2))
        if not (no_swap or swap):
            raise ValueError("fftconvolve: for 'valid' mode, one input must be at least as large "
                             "as the other in every dimension")
        if swap:
            in1, in2, s1, s2 = in2, in1, s2, s1
    full = [a + b - 1 for a, b in zip(s1, s2)]
    if all(a == 1 or b == 1 for a, b in zip(s1, s2)):
        out = in1 * in2
    elif kind_of(in1.aval.dtype) == "c":
        out = _fft.ifftn(_fft.fftn(in1, full, axes) * _fft.fftn(in2, full, axes), full, axes)
    else:
        out = _fft.irfftn(_fft.rfftn(in1, full, axes) * _fft.rfftn(in2, full, axes), full, axes)
    if mode == "full":
        want = full
    elif mode == "same":
        want = s1
    else:
        want = [a - b + 1 for a, b in zip(s1, s2)]
    idx = [slice(None)] * nd
    for a, f, w in zip(axes, full, want):
        start = (f - w) // 2
        idx[a] = slice(start, start + w)
    return out[tuple(idx)]


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=None):  # noqa: A002
    """jax.scipy.signal.detrend: the data less its mean ('constant') or less its least-squares
    line on each segment between the breakpoints `bp` ('linear')."""
    if overwrite_data is not None:
        raise NotImplementedError("detrend: overwrite_data argument not implemented")
    if type not in ("constant", "linear"):
        raise ValueError(f"detrend: trend type {type!r} must be 'linear' or 'constant'")
    (x,) = _inexact(data)
    if not -x.ndim <= axis < builtins.max(x.ndim, 1):
        raise ValueError(f"detrend: axis {axis} is out of bounds for shape {x.shape}")
    if type == "constant":
        return x - mean(x, axis, keepdims=True)
    n = x.shape[axis]
    bps = np.sort(np.unique(np.r_[0, bp, n]))
    if bps[0] < 0 or bps[-1] > n:
        raise ValueError("detrend: breakpoints must be non-negative and less than length of data "
                         "along given axis")
    x = moveaxis(x, axis, 0)
    pieces = []
    for lo, hi in zip(bps[:-1], bps[1:]):
        lo, hi = int(lo), int(hi)
        seg = x[lo:hi]
        npts = hi - lo
        if npts == 1:  # one point: the line through it leaves nothing
            pieces.append(seg - seg)
            continue
        rdt = np.finfo(x.aval.dtype).dtype  # the real dtype of x's
        tc = (np.arange(npts, dtype=np.float64) - (npts - 1) / 2.0).astype(rdt)
        tc = tc.reshape((npts,) + (1,) * (x.ndim - 1))
        slope = _sum(seg * tc, 0, keepdims=True) / float(np.sum(tc * tc))
        pieces.append(seg - mean(seg, 0, keepdims=True) - slope * tc)
    y = pieces[0] if len(pieces) == 1 else concatenate(pieces, 0)
    return moveaxis(y, 0, axis)


# ---- spectral estimates: stft, csd, welch (jax's _spectral_helper) ----


def _window(window, nperseg, length, dtype):
    """jax's _triage_segments: the window as a numpy array of `dtype`, and nperseg."""
    if isinstance(window, (str, tuple)):
        n = length if nperseg is None else int(nperseg)
        if n > length:
            warnings.warn(f"nperseg={n} is greater than input_length={length}, using "
                          f"nperseg={length}", stacklevel=3)
            n = length
        if isinstance(window, str) and window == "hann":
            win = np.array([1.0]) if n == 1 else np.sin(
                np.linspace(0, np.pi, n, endpoint=False)) ** 2
        else:
            try:
                from scipy.signal import get_window  # noqa: PLC0415  (optional dependency)
            except ImportError as err:
                raise ImportError(f"scipy must be available to use window={window!r}") from err
            win = get_window(window, n)
        return np.asarray(win, dtype), n
    if isinstance(window, Tracer):
        raise NotImplementedError("a traced window is not supported (give a numpy array)")
    win = np.asarray(window, dtype)
    if win.ndim != 1:
        raise ValueError("window must be 1-D")
    n = win.size if nperseg is None else int(nperseg)
    if length < win.size:
        raise ValueError("window is longer than input signal")
    if n != win.size:
        raise ValueError("value specified for nperseg is different from length of window")
    return win, n


def _odd_ext(x, n):
    if n < 1:
        return x
    if n > x.shape[-1] - 1:
        raise ValueError(f"The extension length n ({n}) is too big. It must not exceed "
                         f"x.shape[axis]-1, which is {x.shape[-1] - 1}.")
    left = 2 * x[..., :1] - flip(x[..., 1:n + 1], -1)
    right = 2 * x[..., -1:] - flip(x[..., -(n + 1):-1], -1)
    return concatenate([left, x, right], -1)


def _extend(x, n, boundary):
    widths = [(0, 0)] * (x.ndim - 1) + [(n, n)]
    if boundary == "even":
        return pad(x, widths, "reflect")
    if boundary == "odd":
        return _odd_ext(x, n)
    if boundary == "constant":
        return pad(x, widths, "edge")
    return pad(x, widths, "constant", constant_values=0.0)  # zeros


def _segments_fft(x, win, detrend_func, nperseg, noverlap, nfft, sides):
    """jax's _fft_helper: the windowed, detrended segments (..., frames, nperseg), one gather,
    transformed along the last axis."""
    length = x.shape[-1]
    if nperseg == 1 and noverlap == 0:
        seg = reshape(x, x.shape + (1,))
    else:
        starts = np.arange(0, length - nperseg + 1, nperseg - noverlap)
        seg = x[..., starts[:, None] + np.arange(nperseg)[None, :]]
    seg = detrend_func(seg)
    seg = seg * win
    if sides == "twosided":
        return _fft.fft(seg, n=nfft)
    return _fft.rfft(real(seg), n=nfft)


def _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend_type, return_onesided,
              scaling, axis, mode, boundary=None, padded=False):
    name = "stft" if mode == "stft" else "csd"
    if boundary not in ("even", "odd", "constant", "zeros", None):
        raise ValueError(f"{name}: unknown boundary option {boundary!r}, must be one of: "
                         f"['even', 'odd', 'constant', 'zeros', None]")
    xs = _inexact(x) if y is None else _inexact(x, y)
    x = xs[0]
    y = None if y is None else xs[1]
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for shape {x.shape}")
    axis = axis % x.ndim
    if y is not None and x.ndim != y.ndim:
        raise ValueError(f"{name}: two arguments must have the same rank ({x.ndim} vs {y.ndim})")
    rdt = np.finfo(x.aval.dtype).dtype
    cdt = np.result_type(rdt, np.complex64)
    win, nperseg = _window(window, nperseg, x.shape[axis], x.aval.dtype)
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    nfft = nperseg if nfft is None else int(nfft)
    if nperseg < 1:
        raise ValueError(f"{name}: nperseg must be a positive integer")
    if nfft < nperseg:
        raise ValueError(f"{name}: nfft must be greater than or equal to nperseg")
    if noverlap >= nperseg:
        raise ValueError(f"{name}: noverlap must be less than nperseg")
    x = moveaxis(x, axis, -1)
    if y is not None:
        y = moveaxis(y, axis, -1)
        if x.shape[-1] != y.shape[-1]:  # the shorter one padded with zeros
            n = builtins.max(x.shape[-1], y.shape[-1])
            x, y = (pad(v, [(0, 0)] * (v.ndim - 1) + [(0, n - v.shape[-1])]) for v in (x, y))
    nstep = nperseg - noverlap
    if boundary is not None:
        x = _extend(x, nperseg // 2, boundary)
        if y is not None:
            y = _extend(y, nperseg // 2, boundary)
    if padded:
        nadd = (-(x.shape[-1] - nperseg) % nstep) % nperseg
        x = pad(x, [(0, 0)] * (x.ndim - 1) + [(0, nadd)])
        if y is not None:
            y = pad(y, [(0, 0)] * (y.ndim - 1) + [(0, nadd)])
    if isinstance(detrend_type, str):
        detrend_func = lambda d: detrend(d, axis=-1, type=detrend_type)  # noqa: E731
    elif callable(detrend_type):
        detrend_func = detrend_type
    elif not detrend_type:
        detrend_func = lambda d: d  # noqa: E731
    else:
        raise ValueError(f"{name}: unsupported detrend type {detrend_type!r}")
    if scaling == "density":
        scale = 1.0 / (fs * float(np.sum(win * win).real))
    elif scaling == "spectrum":
        scale = 1.0 / float(np.sum(win).real) ** 2
    else:
        raise ValueError(f"{name}: unknown scaling {scaling!r}")
    if mode == "stft":
        scale = scale ** 0.5
    cplx = kind_of(x.aval.dtype) == "c" or (y is not None and kind_of(y.aval.dtype) == "c")
    sides = "onesided" if return_onesided and not cplx else "twosided"
    if return_onesided and cplx:
        warnings.warn("Input data is complex, switching to return_onesided=False", stacklevel=3)
    freqs = (np.fft.fftfreq(nfft, 1 / fs) if sides == "twosided"
             else np.fft.rfftfreq(nfft, 1 / fs)).astype(rdt)
    result = _segments_fft(x, win, detrend_func, nperseg, noverlap, nfft, sides)
    if y is not None:
        result = conj(result) * _segments_fft(y, win, detrend_func, nperseg, noverlap, nfft,
                                              sides)
    elif mode == "psd":
        result = conj(result) * result
    result = result * scale
    if sides == "onesided" and mode == "psd":
        double = np.ones(result.shape[-1], rdt)
        double[1:None if nfft % 2 else -1] = 2
        result = result * double
    time = np.arange(nperseg / 2, x.shape[-1] - nperseg / 2 + 1, nperseg - noverlap,
                     dtype=rdt) / fs
    if boundary is not None:
        time = time - (nperseg / 2) / fs
    result = _lift(result._t, result, cdt)
    if y is None and mode != "stft":
        result = real(result)
    return freqs.astype(rdt), np.asarray(time, rdt), moveaxis(result, -1, axis)


def stft(x, fs=1.0, window="hann", nperseg=256, noverlap=None, nfft=None, detrend=False,
         return_onesided=True, boundary="zeros", padded=True, axis=-1):
    """jax.scipy.signal.stft: (frequencies, segment times, the STFT (..., freqs, segments))."""
    f, t, z = _spectral(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                        "spectrum", axis, "stft", boundary, padded)
    return _lift(z._t, f), _lift(z._t, t), z


def csd(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
        detrend="constant", return_onesided=True, scaling="density", axis=-1, average="mean"):
    """jax.scipy.signal.csd: (frequencies, the cross spectral density of x and y) by Welch's
    method (segments averaged by mean or median)."""
    f, _, p = _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                        scaling, axis, "psd")
    if y is not None:
        p = _lift(p._t, p, np.result_type(p.aval.dtype, np.complex64))
    if p.ndim >= 2 and p.size > 0:
        if p.shape[-1] > 1:
            if average == "median":
                k = p.shape[-1]
                bias = 1 + float(np.sum(1.0 / (np.arange(2.0, k, 2) + 1)
                                        - 1.0 / np.arange(2.0, k, 2)))
                if kind_of(p.aval.dtype) == "c":
                    p = (_lift(p._t, median(real(p), axis=-1), p.aval.dtype)
                         + 1j * median(p.imag, axis=-1))
                else:
                    p = median(p, axis=-1)
                p = p / bias
            elif average == "mean":
                p = mean(p, axis=-1)
            else:
                raise ValueError(f'csd: average must be "median" or "mean", got {average}')
        else:
            p = reshape(p, p.shape[:-1])
    return _lift(p._t, f), p


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1,
          average="mean"):
    """jax.scipy.signal.welch: (frequencies, the power spectral density of x)."""
    f, p = csd(x, None, fs=fs, window=window, nperseg=nperseg, noverlap=noverlap, nfft=nfft,
               detrend=detrend, return_onesided=return_onesided, scaling=scaling, axis=axis,
               average=average)
    return f, real(p)


def _overlap_and_add(x, step: int):
    """jax's _overlap_and_add: frames (..., N, T) summed at offsets of `step`, by padding,
    reshaping and one sum (no scatter)."""
    *batch, nframes, seglen = x.shape
    nb = int(np.prod(batch, dtype=np.int64))
    x = reshape(x, (nb, nframes, seglen))
    out_size = step * (nframes - 1) + seglen
    nsteps = 1 + (seglen - 1) // step
    x = pad(x, ((0, 0), (0, 0), (0, nsteps * step - seglen)))
    x = reshape(x, (nb, nframes, nsteps, step))
    x = transpose(x, (0, 2, 1, 3))
    x = pad(x, ((0, 0), (0, 0), (0, nframes), (0, 0)))
    shrunken = x.shape[2] - 1
    x = reshape(x, (nb, -1))[:, :nsteps * shrunken * step]
    x = reshape(x, (nb, nsteps, shrunken * step))
    x = _sum(x, axis=1)[:, :out_size]
    return reshape(x, tuple(batch) + (out_size,))


def istft(Zxx, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          input_onesided=True, boundary=True, time_axis=-1, freq_axis=-2):
    """jax.scipy.signal.istft: (times, the signal) from an STFT (..., freqs, segments)."""
    (z,) = _inexact(Zxx)
    if z.ndim < 2:
        raise ValueError("istft: input stft must be at least 2d")
    if not (-z.ndim <= freq_axis < z.ndim and -z.ndim <= time_axis < z.ndim):
        raise ValueError(f"istft: axes {time_axis}, {freq_axis} out of bounds for {z.shape}")
    freq_axis, time_axis = freq_axis % z.ndim, time_axis % z.ndim
    if freq_axis == time_axis:
        raise ValueError("istft: must specify differing time and frequency axes")
    rdt = np.finfo(z.aval.dtype).dtype
    z = _lift(z._t, z, np.result_type(rdt, np.complex64))
    n_default = 2 * (z.shape[freq_axis] - 1) if input_onesided else z.shape[freq_axis]
    nperseg = int(nperseg or n_default)
    if nperseg < 1:
        raise ValueError("istft: nperseg must be a positive integer")
    if nfft is None:
        nfft = n_default + (1 if input_onesided and nperseg == n_default + 1 else 0)
    nfft = int(nfft)
    if nfft < nperseg:
        raise ValueError(f"istft: FFT length ({nfft}) must be longer than nperseg ({nperseg})")
    noverlap = int(noverlap or nperseg // 2)
    if noverlap >= nperseg:
        raise ValueError("istft: noverlap must be less than nperseg")
    nstep = nperseg - noverlap
    if time_axis != z.ndim - 1 or freq_axis != z.ndim - 2:
        outer = tuple(i for i in _range(z.ndim) if i not in (time_axis, freq_axis))
        z = transpose(z, outer + (freq_axis, time_axis))
    inv = _fft.irfft if input_onesided else _fft.ifft
    xsubs = inv(z, n=nfft, axis=-2)[..., :nperseg, :]  # (..., T, N)
    if isinstance(window, (str, tuple)):
        win, _ = _window(window, nperseg, nperseg, rdt if input_onesided else xsubs.aval.dtype)
    else:
        if isinstance(window, Tracer):
            raise NotImplementedError("a traced window is not supported (give a numpy array)")
        win = np.asarray(window)
        if win.ndim != 1:
            raise ValueError("window must be 1-D")
        if win.shape[0] != nperseg:
            raise ValueError(f"window must have length of {nperseg}")
    xsubs = xsubs * win.sum()  # the 'spectrum' scaling
    wcol = win.reshape((nperseg, 1))
    nframes = xsubs.shape[-1]
    frames = xsubs * wcol
    x = _overlap_and_add(moveaxis(frames, -1, -2), nstep)
    sq = (np.abs(win) ** 2 if np.iscomplexobj(win) else win * win)
    norm = np.zeros(nstep * (nframes - 1) + nperseg, sq.dtype)
    for f in _range(nframes):  # a constant: the window squares overlapped
        norm[f * nstep:f * nstep + nperseg] += sq
    if boundary:
        h = nperseg // 2
        x = x[..., h:-h] if h else x[..., 0:0]
        norm = norm[h:-h] if h else norm[0:0]
    x = x / np.where(norm > 1e-10, norm, 1.0).astype(np.finfo(norm.dtype).dtype)
    if x.ndim > 1 and time_axis != z.ndim - 1:
        if freq_axis < time_axis:
            time_axis -= 1
        x = moveaxis(x, -1, time_axis)
    time = np.arange(x.shape[0], dtype=np.finfo(x.aval.dtype).dtype) / fs
    return _lift(x._t, time), x
