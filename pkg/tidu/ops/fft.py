"""The fast Fourier transform: the Fft primitive (jax's ``fft_p``, XLA's and StableHLO's ``fft``).

One primitive in four kinds (``fft_type``), each over the trailing ``len(fft_lengths)`` axes
(1 to 3, as XLA allows; ``tidu.numpy.fft`` chains transforms for more axes, as jax does):

- ``FFT``   complex -> complex, the forward DFT, unscaled;
- ``IFFT``  complex -> complex, the inverse DFT scaled by ``1 / prod(fft_lengths)``;
- ``RFFT``  float (..., n) -> complex (..., n // 2 + 1), the forward DFT of real input;
- ``IRFFT`` complex (..., n // 2 + 1) -> float (..., n), the inverse of RFFT (a spectrum's
  imaginary parts that a real signal cannot have are ignored).

The transform is linear. tidu's transpose is the adjoint under the real inner product
(docs/architecture.md), where jax's is the plain transpose, so the rules differ from jax's by a
conjugation: FFT's adjoint is ``prod(n) * IFFT``, IFFT's is ``FFT / prod(n)``; IRFFT's is RFFT
times jax's mask (1 at the zero and Nyquist bins, 2 at the bins Hermitian symmetry counts
twice) over ``prod(n)``, and RFFT's is IRFFT of the cotangent times ``prod(n) / mask``: no
naive DFT and no zero padding to the full spectrum.  The kernel (cpp/include/tidu/kernels/fft.hpp)
is pocketfft's, vendored in cpp/include/tidu/third_party/pocketfft.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from tidu.ad.rules import register
from tidu.graph import aval
from tidu.ops.core import (
    COMPLEXES,
    FLOATS,
    A,
    BroadcastInDim,
    Constant,
    F,
    Mul,
    Primitive,
    aval_of,
    check_dtype,
    const,
    fix,
    i64_array,
    ints,
    lin,
    real_dtype,
    same_op_batched,
)

__all__ = ["Fft", "FftType", "complex_dtype"]


class FftType(IntEnum):
    """jax's ``lax.FftType`` (the same codes)."""

    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


_COMPLEX_OF = {np.dtype("float32"): np.dtype("complex64"),
               np.dtype("float64"): np.dtype("complex128"),
               np.dtype("float16"): np.dtype("complex64"),  # jax's: complex64 for 16-bit floats
               np.dtype("bfloat16"): np.dtype("complex64")}


def complex_dtype(dt) -> np.dtype:
    """The complex dtype of a float dtype (complex dtypes are their own)."""
    dt = np.dtype(dt)
    return _COMPLEX_OF.get(dt, dt)


def rfft_mask(n: int) -> np.ndarray:
    """jax's mask over the n // 2 + 1 bins of a real transform of length n: 1 at the zero
    frequency and (n even) at the Nyquist frequency, 2 at the bins that stand for two."""
    half = n // 2 + 1
    m = np.full(half, 2.0)
    m[0] = 1.0
    if n % 2 == 0:
        m[-1] = 1.0
    return m


@register
@dataclass(frozen=True)
class Fft(Primitive):
    """The DFT of x over its trailing ``len(fft_lengths)`` axes (``lax.fft``)."""

    fft_type: FftType
    fft_lengths: tuple[int, ...]
    linear = True

    batch = same_op_batched  # the transform takes leading batch axes

    def __post_init__(self):
        t = self.fft_type
        if isinstance(t, str):
            try:
                t = FftType[t.upper()]
            except KeyError:
                raise ValueError(f"Fft: unknown fft_type {self.fft_type!r}; expected one of "
                                 f"FFT, IFFT, RFFT, IRFFT") from None
        object.__setattr__(self, "fft_type", FftType(t))
        object.__setattr__(self, "fft_lengths", ints(self.fft_lengths))

    # ---- shape and dtype rule ----

    def abstract_eval(self, x):
        n, t, ls = self.name, self.fft_type, self.fft_lengths
        if not 1 <= len(ls) <= 3:
            raise ValueError(f"{n}: fft_lengths {ls} must have 1 to 3 entries (XLA transforms "
                             f"at most 3 axes)")
        if any(v < 1 for v in ls):
            raise ValueError(f"{n}: fft_lengths {ls} must be positive")
        if x.ndim < len(ls):
            raise ValueError(f"{n}: operand of shape {x.shape} has fewer than {len(ls)} axes "
                             f"for fft_lengths {ls}")
        lead, trail = x.shape[:x.ndim - len(ls)], x.shape[x.ndim - len(ls):]
        half = ls[-1] // 2 + 1
        if t == FftType.RFFT:
            check_dtype(f"{n} {t.name}", x, FLOATS, "floating")
            want, out, dt = ls, ls[:-1] + (half,), complex_dtype(x.dtype)
        elif t == FftType.IRFFT:
            check_dtype(f"{n} {t.name}", x, COMPLEXES, "complex")
            want, out, dt = ls[:-1] + (half,), ls, real_dtype(x.dtype)
        else:
            check_dtype(f"{n} {t.name}", x, COMPLEXES, "complex")
            want, out, dt = ls, ls, x.dtype
        if trail != want:
            raise ValueError(f"{n} {t.name}: operand's trailing axes {trail} (shape {x.shape}) "
                             f"do not match {want} for fft_lengths {ls}")
        return aval(lead + out, dt)

    # ---- AD: linear; the adjoint is the transform the other way, scaled ----

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        g = ct[0]
        total = float(math.prod(self.fft_lengths))
        t = self.fft_type
        if t in (FftType.FFT, FftType.IFFT):
            other = Fft(FftType.IFFT if t == FftType.FFT else FftType.FFT, self.fft_lengths)
            out = lin(b, other, [g], [A])
            coef = total if t == FftType.FFT else 1.0 / total
            av = aval_of(b, out)
            return [lin(b, Mul(), [const(b, coef, av), out], [F, A])]
        n = self.fft_lengths[-1]
        if t == FftType.IRFFT:  # RFFT(ct) * mask / N
            out = lin(b, Fft(FftType.RFFT, self.fft_lengths), [g], [A])
            return [lin(b, Mul(), [_last_axis_weights(b, rfft_mask(n) / total, out), out],
                        [F, A])]
        # RFFT: IRFFT(ct * N / mask)
        w = _last_axis_weights(b, total / rfft_mask(n), g)
        scaled = lin(b, Mul(), [w, g], [F, A])
        return [lin(b, Fft(FftType.IRFFT, self.fft_lengths), [scaled], [A])]

    # ---- StableHLO ----

    def lower(self, lo, out, x):
        return lo.op("stablehlo.fft", [x], out,
                     f"fft_length = {i64_array(self.fft_lengths)}, "
                     f"fft_type = #stablehlo<fft_type {self.fft_type.name}>")

    # ---- reference ----

    def impl(self, x):
        x = np.asarray(x)
        ls = self.fft_lengths
        axes = tuple(range(x.ndim - len(ls), x.ndim))
        out = self.abstract_eval(aval(x.shape, x.dtype))
        f = {FftType.FFT: np.fft.fftn, FftType.IFFT: np.fft.ifftn, FftType.RFFT: np.fft.rfftn,
             FftType.IRFFT: np.fft.irfftn}[self.fft_type]
        return f(x, s=ls, axes=axes).astype(out.dtype)


def _last_axis_weights(b, w: np.ndarray, like):
    """A fixed array of `like`'s shape and dtype holding w along the last axis."""
    av = aval_of(b, like)
    c = fix(b, Constant.of(np.asarray(w, dtype=av.dtype)))
    return fix(b, BroadcastInDim(av.shape, (av.ndim - 1,)), c)
