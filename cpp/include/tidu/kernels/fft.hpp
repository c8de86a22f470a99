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
//
// The code that depends on the instruction set is in fft_variant.hpp, included here once for the
// build's own target and, with GCC on x86, once more for AVX2 (`#pragma GCC target`, each copy of
// pocketfft in a namespace of its own): doubles 4 wide and floats 8 wide across the lines that
// pocketfft transforms together. The variant is chosen at run time as fastmath.hpp's are
// (TIDU_SIMD=generic|avx2|avx512, capped by the CPU; avx512 runs the AVX2 variant: pocketfft's
// AVX-512 build was slower for float and needs FMA, see fft_variant.hpp). Both give the same bits.
#pragma once

#ifndef POCKETFFT_NO_MULTITHREADING
#define POCKETFFT_NO_MULTITHREADING  // tidu threads over batches itself
#endif
#ifndef POCKETFFT_CACHE_SIZE
#define POCKETFFT_CACHE_SIZE 16  // plans by length, behind pocketfft's own mutex
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "tidu/kernels/fastmath.hpp"
#include "tidu/vm/dtype.hpp"
#include "tidu/vm/parallel.hpp"
#include "tidu/vm/program.hpp"

namespace tidu {
namespace kern {

namespace fftshape {
using shape_t = std::vector<std::size_t>;      // pocketfft's shape_t, in every variant
using stride_t = std::vector<std::ptrdiff_t>;  // pocketfft's stride_t
}  // namespace fftshape

// The fft_type codes, in jax's FftType order.
enum class FftType : std::int64_t { FFT = 0, IFFT = 1, RFFT = 2, IRFFT = 3 };

// Byte strides of a C-contiguous array of `shape` with elements of `elem` bytes.
inline fftshape::stride_t fft_strides(const fftshape::shape_t& shape, std::size_t elem) {
  fftshape::stride_t s(shape.size());
  std::ptrdiff_t acc = static_cast<std::ptrdiff_t>(elem);
  for (std::size_t k = shape.size(); k-- > 0;) {
    s[k] = acc;
    acc *= static_cast<std::ptrdiff_t>(shape[k]);
  }
  return s;
}

// Per-thread scratch memory for the FFT passes, kept between calls (a long transform's buffers
// are megabytes: allocating and clearing them on every call cost as much as a pass). `slot`
// keeps apart the buffers that one thread holds at once; 64-byte aligned, contents undefined.
inline void* fft_scratch(std::size_t bytes, int slot) {
  struct Buf {
    void* p = nullptr;
    std::size_t n = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf bufs[3];
  Buf& b = bufs[slot];
  if (b.n < bytes) {
    std::free(b.p);
    b.p = nullptr;
    b.n = 0;
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) throw std::bad_alloc();
    b.p = p;
    b.n = bytes;
  }
  return b.p;
}

// Work (elements x log2 of the transformed length) from which a transform is split over the
// thread pool (docs/evaluator.md, "Threads"): about 0.1 ms of one core.
inline constexpr double kFftParallelWork = double(std::size_t{1} << 18);

// One pass of pocketfft over `axis`, cut along the longest other axis into chunks run on the
// pool: run(in_shape, out_shape, in_offset, out_offset) transforms a sub-array (byte offsets).
// Shapes agree off `axis`; with no other axis (or one thread) the pass runs whole.
template <class F>
inline void fft_split_pass(const fftshape::shape_t& in_shape, const fftshape::shape_t& out_shape,
                           const fftshape::stride_t& in_stride,
                           const fftshape::stride_t& out_stride, std::size_t axis, int threads,
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
    fftshape::shape_t is = in_shape, os = out_shape;
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

// (also the fused fft2 pass's, fft_variant.hpp rows_dft8: n1 = 8, cached by (n, n1))
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
      if (t->n == n && t->n1 == n1) return t;
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

// W^k = exp(-2 pi i k / n) for 0 <= k <= n / 4 + 1: the rfft's untangling twiddles
// (fft_variant.hpp, rfft_row), each computed in long double from k, then rounded; cached by n.
template <class R>
struct RfftTwiddles {
  std::size_t n = 0;
  std::vector<std::complex<R>> w;
};

template <class R>
inline std::shared_ptr<const RfftTwiddles<R>> rfft_twiddles(std::size_t n) {
  static std::mutex mu;
  static std::vector<std::shared_ptr<const RfftTwiddles<R>>> cache;  // newest last, at most 8
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& t : cache)
      if (t->n == n) return t;
  }
  auto t = std::make_shared<RfftTwiddles<R>>();
  t->n = n;
  t->w.resize(n / 4 + 2);
  const long double two_pi = 6.283185307179586476925286766559L;
  for (std::size_t k = 0; k < t->w.size(); ++k) {
    const long double ang = -two_pi * static_cast<long double>(k) / static_cast<long double>(n);
    t->w[k] = std::complex<R>(static_cast<R>(std::cos(ang)), static_cast<R>(std::sin(ang)));
  }
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 8) cache.erase(cache.begin());
  cache.push_back(t);
  return t;
}

}  // namespace kern
}  // namespace tidu

// ---- the variants (fft_variant.hpp): the build's own target, then AVX2 where GCC can add it ----
#define pocketfft tidu_pocketfft_base
#define TIDU_FFT_NS fft_base
#include "tidu/kernels/fft_variant.hpp"
#undef TIDU_FFT_NS
#undef pocketfft

#if TIDU_FM_DISPATCH && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX__)
#define TIDU_FFT_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2")
// GCC's C++ front end does not define the ISA macros that a target pragma enables, and pocketfft
// picks its vector width from them: __AVX__ says 4 doubles / 8 floats for this copy only.
#define __AVX__ 1
#define pocketfft tidu_pocketfft_avx2
#define TIDU_FFT_NS fft_avx2
#include "tidu/kernels/fft_variant.hpp"
#undef TIDU_FFT_NS
#undef pocketfft
#undef __AVX__
#pragma GCC pop_options
#else
#define TIDU_FFT_AVX2 0
#endif

namespace tidu {
namespace kern {

// The variant the FFT kernel runs: "avx2" or "generic" (TIDU_SIMD, capped by the CPU).
inline const char* fft_variant() {
#if TIDU_FFT_AVX2
  if (fm::isa() != fm::Isa::Generic) return "avx2";
#endif
  return "generic";
}

template <class R>
inline void fft_typed(FftType type, const fftshape::shape_t& xshape,
                      const fftshape::shape_t& yshape, const fftshape::shape_t& axes,
                      double scale, const void* x, void* y) {
#if TIDU_FFT_AVX2
  if (fm::isa() != fm::Isa::Generic) {
    fft_avx2::fft_typed<R>(type, xshape, yshape, axes, scale, x, y);
    return;
  }
#endif
  fft_base::fft_typed<R>(type, xshape, yshape, axes, scale, x, y);
}

// attrs: fft_type, n, fft_lengths... (validated: 1 <= n <= 3, the trailing axes match)
inline void run_fft(const Program& p, const std::uint32_t* a, std::uint32_t out, const std::int64_t* at, void* y,
                    void** ptr) {
  const Slot& xs = p.slots[a[0]];
  const Slot& ys = p.slots[out];
  const auto type = static_cast<FftType>(at[0]);
  const std::int64_t n = at[1];
  fftshape::shape_t xshape(xs.ndim), yshape(ys.ndim), axes(static_cast<std::size_t>(n));
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
