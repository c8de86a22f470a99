// tidu/kernels/fft.hpp - the Fft primitive's kernel (ops/fft.py): XLA's fft over the trailing
// len(fft_lengths) axes, in its four kinds, through pocketfft (third_party/pocketfft, the FFT of
// numpy and scipy: mixed radix plus Bluestein, O(n log n) for every length).
//
//   FFT   complex -> complex, forward, unscaled
//   IFFT  complex -> complex, backward, scaled by 1 / prod(fft_lengths)
//   RFFT  real (..., n) -> complex (..., n // 2 + 1), forward, unscaled
//   IRFFT complex (..., n // 2 + 1) -> real (..., n), backward, scaled by 1 / prod(fft_lengths);
//         the imaginary parts that a Hermitian spectrum cannot have are ignored (as XLA does)
//
// Shapes and dtypes are validated before a program runs (validate.hpp); the kernel trusts them.
#pragma once

#ifndef POCKETFFT_NO_MULTITHREADING
#define POCKETFFT_NO_MULTITHREADING  // tidu threads over batches itself
#endif
#ifndef POCKETFFT_CACHE_SIZE
#define POCKETFFT_CACHE_SIZE 16  // plans by length, behind pocketfft's own mutex
#endif

#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "tidu/third_party/pocketfft/pocketfft_hdronly.h"
#include "tidu/vm/dtype.hpp"
#include "tidu/vm/program.hpp"

namespace tidu {
namespace kern {

// The fft_type codes, in jax's FftType order.
enum class FftType : std::int64_t { FFT = 0, IFFT = 1, RFFT = 2, IRFFT = 3 };

// Byte strides of a C-contiguous array of `shape` with elements of `elem` bytes.
inline pocketfft::stride_t fft_strides(const pocketfft::shape_t& shape, std::size_t elem) {
  pocketfft::stride_t s(shape.size());
  std::ptrdiff_t acc = static_cast<std::ptrdiff_t>(elem);
  for (std::size_t k = shape.size(); k-- > 0;) {
    s[k] = acc;
    acc *= static_cast<std::ptrdiff_t>(shape[k]);
  }
  return s;
}

template <class R>
inline void fft_typed(FftType type, const pocketfft::shape_t& xshape, const pocketfft::shape_t& yshape,
                      const pocketfft::shape_t& axes, double scale, const void* x, void* y) {
  using C = std::complex<R>;
  const R fct = static_cast<R>(scale);
  switch (type) {
    case FftType::FFT: case FftType::IFFT:
      if (axes.size() == 1) {  // rows of one contiguous axis: copy once, transform in place
        const std::size_t len = xshape.back();
        std::size_t rows = 1;
        for (std::size_t k = 0; k + 1 < xshape.size(); ++k) rows *= xshape[k];
        if (rows == 0 || len == 0) return;
        std::memcpy(y, x, rows * len * sizeof(C));
        auto plan = pocketfft::detail::get_plan<pocketfft::detail::pocketfft_c<R>>(len);
        auto* c = reinterpret_cast<pocketfft::detail::cmplx<R>*>(y);
        for (std::size_t r = 0; r < rows; ++r) plan->exec(c + r * len, fct, type == FftType::FFT);
        return;
      }
      pocketfft::c2c<R>(xshape, fft_strides(xshape, sizeof(C)), fft_strides(yshape, sizeof(C)), axes,
                        type == FftType::FFT, static_cast<const C*>(x), static_cast<C*>(y), fct);
      return;
    case FftType::RFFT:
      pocketfft::r2c<R>(xshape, fft_strides(xshape, sizeof(R)), fft_strides(yshape, sizeof(C)), axes, true,
                        static_cast<const R*>(x), static_cast<C*>(y), fct);
      return;
    case FftType::IRFFT:
      pocketfft::c2r<R>(yshape, fft_strides(xshape, sizeof(C)), fft_strides(yshape, sizeof(R)), axes, false,
                        static_cast<const C*>(x), static_cast<R*>(y), fct);
      return;
  }
}

// attrs: fft_type, n, fft_lengths... (validated: 1 <= n <= 3, the trailing axes match)
inline void run_fft(const Program& p, const std::uint32_t* a, std::uint32_t out, const std::int64_t* at, void* y,
                    void** ptr) {
  const Slot& xs = p.slots[a[0]];
  const Slot& ys = p.slots[out];
  const auto type = static_cast<FftType>(at[0]);
  const std::int64_t n = at[1];
  pocketfft::shape_t xshape(xs.ndim), yshape(ys.ndim), axes(static_cast<std::size_t>(n));
  for (std::uint32_t k = 0; k < xs.ndim; ++k) xshape[k] = static_cast<std::size_t>(p.shape(a[0])[k]);
  for (std::uint32_t k = 0; k < ys.ndim; ++k) yshape[k] = static_cast<std::size_t>(p.shape(out)[k]);
  double total = 1.0;
  for (std::int64_t k = 0; k < n; ++k) {
    axes[static_cast<std::size_t>(k)] = static_cast<std::size_t>(xs.ndim - n + k);
    total *= static_cast<double>(at[2 + k]);
  }
  if (xs.size == 0 || ys.size == 0) return;
  const double scale = (type == FftType::IFFT || type == FftType::IRFFT) ? 1.0 / total : 1.0;
  if (xs.dtype == DType::F32 || xs.dtype == DType::C64)  // single precision in, single out
    fft_typed<float>(type, xshape, yshape, axes, scale, ptr[a[0]], y);
  else
    fft_typed<double>(type, xshape, yshape, axes, scale, ptr[a[0]], y);
}

}  // namespace kern
}  // namespace tidu
