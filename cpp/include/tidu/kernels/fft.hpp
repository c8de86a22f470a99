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

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "tidu/third_party/pocketfft/pocketfft_hdronly.h"
#include "tidu/vm/dtype.hpp"
#include "tidu/vm/parallel.hpp"
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

// Work (elements x log2 of the transformed length) from which a transform is split over the
// thread pool (docs/evaluator.md, "Threads"): about 0.1 ms of one core.
inline constexpr double kFftParallelWork = double(std::size_t{1} << 18);

// One pass of pocketfft over `axis`, cut along the longest other axis into chunks run on the
// pool: run(in_shape, out_shape, in_offset, out_offset) transforms a sub-array (byte offsets).
// Shapes agree off `axis`; with no other axis (or one thread) the pass runs whole.
template <class F>
inline void fft_split_pass(const pocketfft::shape_t& in_shape, const pocketfft::shape_t& out_shape,
                           const pocketfft::stride_t& in_stride,
                           const pocketfft::stride_t& out_stride, std::size_t axis, int threads,
                           F&& run) {
  std::size_t d = in_shape.size();
  for (std::size_t k = 0; k < in_shape.size(); ++k)
    if (k != axis && (d == in_shape.size() || in_shape[k] > in_shape[d])) d = k;
  if (threads <= 1 || d == in_shape.size() || in_shape[d] < 2) {
    run(in_shape, out_shape, std::ptrdiff_t{0}, std::ptrdiff_t{0});
    return;
  }
  const std::int64_t extent = static_cast<std::int64_t>(in_shape[d]);
  const std::int64_t chunks =
      std::min<std::int64_t>(extent, 4 * static_cast<std::int64_t>(threads));
  ::tidu::detail::parallel_chunks(chunks, threads, [&](std::int64_t c, int) {
    const std::int64_t lo = extent * c / chunks, hi = extent * (c + 1) / chunks;
    if (hi <= lo) return;
    pocketfft::shape_t is = in_shape, os = out_shape;
    is[d] = os[d] = static_cast<std::size_t>(hi - lo);
    run(is, os, lo * in_stride[d], lo * out_stride[d]);
  });
}

// A long 1-D complex transform as a four-step FFT (Bailey): length n = n1 * n2 viewed as an
// n1 x n2 matrix x[n2 * j1 + j2]; transform the n2 columns (length n1), multiply by the twiddles
// w^(j2 * k1) with w = exp(-+2 pi i / n), transform the n1 rows (length n2) and write
// X[k1 + n1 * k2]. pocketfft vectorises over the columns and rows it is given together, which
// a single long transform cannot be, and the passes split over threads: about 1.5x faster on one
// core from n = 2^12 on. Twiddles come from a small cache by length; each is computed in long
// double from the exact residue (j2 * k1) mod n, then rounded.
inline constexpr std::size_t kFourStepMin = std::size_t{1} << 12;

// n1 * n2 == n with n1 the divisor of n nearest below sqrt(n); 0 when n has none >= 16.
inline std::size_t four_step_split(std::size_t n) {
  std::size_t n1 = 1;
  for (std::size_t d = 1; d * d <= n; ++d)
    if (n % d == 0) n1 = d;
  return n1 >= 16 ? n1 : 0;
}

template <class R>
struct FourStepTwiddles {
  std::size_t n = 0, n1 = 0, n2 = 0;
  std::vector<std::complex<R>> w;  // w[k1 * n2 + j2] = exp(-2 pi i (j2 * k1 mod n) / n)
};

template <class R>
inline std::shared_ptr<const FourStepTwiddles<R>> four_step_twiddles(std::size_t n,
                                                                     std::size_t n1) {
  static std::mutex mu;
  static std::vector<std::shared_ptr<const FourStepTwiddles<R>>> cache;  // newest last, at most 8
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& t : cache)
      if (t->n == n) return t;
  }
  auto t = std::make_shared<FourStepTwiddles<R>>();
  t->n = n;
  t->n1 = n1;
  t->n2 = n / n1;
  t->w.resize(n);
  const long double two_pi = 6.283185307179586476925286766559L;
  for (std::size_t k1 = 0; k1 < n1; ++k1)
    for (std::size_t j2 = 0; j2 < t->n2; ++j2) {
      const std::size_t r = (j2 * k1) % n;
      const long double ang = -two_pi * static_cast<long double>(r) / static_cast<long double>(n);
      t->w[k1 * t->n2 + j2] =
          std::complex<R>(static_cast<R>(std::cos(ang)), static_cast<R>(std::sin(ang)));
    }
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 8) cache.erase(cache.begin());
  cache.push_back(t);
  return t;
}

// One row: x (n complex) -> y (n complex), forward or backward, scaled by fct; tmp holds n.
template <class R>
inline void four_step_row(const FourStepTwiddles<R>& t, bool forward, R fct,
                          const std::complex<R>* x, std::complex<R>* y, std::complex<R>* tmp,
                          int threads) {
  using C = std::complex<R>;
  const std::size_t n1 = t.n1, n2 = t.n2;
  const auto e = static_cast<std::ptrdiff_t>(sizeof(C));
  const pocketfft::shape_t shape{n1, n2};
  const pocketfft::stride_t rowmajor{static_cast<std::ptrdiff_t>(n2) * e, e};
  const pocketfft::stride_t transposed{e, static_cast<std::ptrdiff_t>(n1) * e};  // y[k1 + n1 * k2]
  const auto* xb = reinterpret_cast<const char*>(x);
  auto* tb = reinterpret_cast<char*>(tmp);
  auto* yb = reinterpret_cast<char*>(y);
  const C* w = t.w.data();
  fft_split_pass(shape, shape, rowmajor, rowmajor, 0, threads,
                 [&](const pocketfft::shape_t& is, const pocketfft::shape_t&, std::ptrdiff_t io,
                     std::ptrdiff_t oo) {
                   pocketfft::c2c<R>(is, rowmajor, rowmajor, {0}, forward,
                                     reinterpret_cast<const C*>(xb + io),
                                     reinterpret_cast<C*>(tb + oo), R(1));
                 });
  // the twiddles, then the rows, by blocks of rows (one pass over tmp while it is in cache)
  fft_split_pass(shape, shape, rowmajor, transposed, 1, threads,
                 [&](const pocketfft::shape_t& is, const pocketfft::shape_t& os, std::ptrdiff_t io,
                     std::ptrdiff_t oo) {
                   C* blk = reinterpret_cast<C*>(tb + io);
                   const C* wb = w + io / e;
                   const std::size_t m = is[0] * n2;
                   if (forward) {
                     for (std::size_t i = 0; i < m; ++i) blk[i] *= wb[i];
                   } else {
                     for (std::size_t i = 0; i < m; ++i) blk[i] *= std::conj(wb[i]);
                   }
                   pocketfft::c2c<R>(is, rowmajor, transposed, {1}, forward, blk,
                                     reinterpret_cast<C*>(yb + oo), fct);
                   (void)os;
                 });
}

template <class R>
inline void fft_typed(FftType type, const pocketfft::shape_t& xshape, const pocketfft::shape_t& yshape,
                      const pocketfft::shape_t& axes, double scale, const void* x, void* y) {
  using C = std::complex<R>;
  const R fct = static_cast<R>(scale);
  std::size_t total = 1;
  for (std::size_t s : (type == FftType::IRFFT ? yshape : xshape)) total *= s;
  if (total == 0) return;
  double logn = 0;
  for (std::size_t a : axes)
    logn += std::log2(static_cast<double>(std::max<std::size_t>(yshape[a], 2)));
  const int threads =
      static_cast<double>(total) * logn >= kFftParallelWork ? ::tidu::num_threads() : 1;
  const auto* xb = static_cast<const char*>(x);
  auto* yb = static_cast<char*>(y);
  const auto xs = fft_strides(xshape, type == FftType::RFFT ? sizeof(R) : sizeof(C));
  const auto ys = fft_strides(yshape, type == FftType::IRFFT ? sizeof(R) : sizeof(C));
  const std::size_t last = axes.back();
  // c2c over axes[from, to) one at a time, in place on `base` (complex, of `shape`), the last one
  // scaled by f
  auto c2c_in_place = [&](const pocketfft::shape_t& shape, const pocketfft::stride_t& st,
                          char* base, std::size_t from, std::size_t to, bool forward, R f) {
    for (std::size_t k = from; k < to; ++k)
      fft_split_pass(shape, shape, st, st, axes[k], threads,
                     [&](const pocketfft::shape_t& is, const pocketfft::shape_t&, std::ptrdiff_t io,
                         std::ptrdiff_t) {
                       C* p = reinterpret_cast<C*>(base + io);
                       pocketfft::c2c<R>(is, st, st, {axes[k]}, forward, p, p,
                                         k + 1 == to ? f : R(1));
                     });
  };
  switch (type) {
    case FftType::FFT:
    case FftType::IFFT: {
      const bool fwd = type == FftType::FFT;
      const std::size_t len = xshape[last];
      if (axes.size() == 1 && len >= kFourStepMin) {
        if (const std::size_t n1 = four_step_split(len)) {
          const auto tw = four_step_twiddles<R>(len, n1);
          const std::size_t rows = total / len;
          const int inner = rows >= 2 * static_cast<std::size_t>(threads) ? 1 : threads;
          const int outer = inner == 1 ? threads : 1;
          std::vector<std::vector<C>> tmp(static_cast<std::size_t>(outer), std::vector<C>(len));
          ::tidu::detail::parallel_chunks(
              static_cast<std::int64_t>(rows), outer, [&](std::int64_t r, int wkr) {
                four_step_row<R>(*tw, fwd, fct, static_cast<const C*>(x) + r * len,
                                 static_cast<C*>(y) + r * len,
                                 tmp[static_cast<std::size_t>(wkr)].data(), inner);
              });
          return;
        }
      }
      // the last axis x -> y, the others in place on y
      fft_split_pass(xshape, yshape, xs, ys, last, threads,
                     [&](const pocketfft::shape_t& is, const pocketfft::shape_t&, std::ptrdiff_t io,
                         std::ptrdiff_t oo) {
                       pocketfft::c2c<R>(
                           is, xs, ys, {last}, fwd, reinterpret_cast<const C*>(xb + io),
                           reinterpret_cast<C*>(yb + oo), axes.size() == 1 ? fct : R(1));
                     });
      c2c_in_place(yshape, ys, yb, 0, axes.size() - 1, fwd, fct);
      return;
    }
    case FftType::RFFT:  // r2c over the last axis, then the others in place (as pocketfft's r2c)
      fft_split_pass(xshape, yshape, xs, ys, last, threads,
                     [&](const pocketfft::shape_t& is, const pocketfft::shape_t& os,
                         std::ptrdiff_t io, std::ptrdiff_t oo) {
                       (void)os;
                       pocketfft::r2c<R>(
                           is, xs, ys, {last}, true, reinterpret_cast<const R*>(xb + io),
                           reinterpret_cast<C*>(yb + oo), axes.size() == 1 ? fct : R(1));
                     });
      c2c_in_place(yshape, ys, yb, 0, axes.size() - 1, true, fct);
      return;
    case FftType::IRFFT: {  // the leading axes on a copy of x, then c2r over the last axis (as c2r)
      const char* src = xb;
      std::vector<C> tmp;
      if (axes.size() > 1) {
        std::size_t xn = 1;
        for (std::size_t s : xshape) xn *= s;
        tmp.assign(static_cast<const C*>(x), static_cast<const C*>(x) + xn);
        c2c_in_place(xshape, xs, reinterpret_cast<char*>(tmp.data()), 0, axes.size() - 1, false,
                     R(1));
        src = reinterpret_cast<const char*>(tmp.data());
      }
      fft_split_pass(xshape, yshape, xs, ys, last, threads,
                     [&](const pocketfft::shape_t&, const pocketfft::shape_t& os, std::ptrdiff_t io,
                         std::ptrdiff_t oo) {
                       pocketfft::c2r<R>(os, xs, ys, {last}, false,
                                         reinterpret_cast<const C*>(src + io),
                                         reinterpret_cast<R*>(yb + oo), fct);
                     });
      return;
    }
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
