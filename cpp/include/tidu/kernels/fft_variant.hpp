// tidu/kernels/fft_variant.hpp - the FFT kernel's code that depends on the instruction set: the
// vendored pocketfft and the passes tidu builds on it. No include guard on purpose: fft.hpp
// includes this file once per instruction set, each time with `pocketfft` defined to a namespace
// of its own (so the copies never share a symbol) and TIDU_FFT_NS naming the namespace of the
// passes below, inside `#pragma GCC target` for the vector ones. Include fft.hpp, not this file.
//
// The passes:
//   cols_pass      a c2c transform along an axis that is not the last, by blocks of columns: each
//                  block of up to 16 vectors of columns is copied into a buffer (one read of each
//                  row segment, the vectors' lanes across columns, as pocketfft's multi-line path
//                  lays them out), transformed and copied back: no transpose of the array, and a
//                  power-of-two row stride does not evict the block from cache between lines
//   four_step_row  one long 1-D c2c transform as columns, twiddles and rows (fft.hpp)
//   rfft_row       one long rfft as a half-length complex transform plus the untangling twiddle
//   fft_typed      the kernel for one dtype: the passes above, or pocketfft's own
//
// Every line (column, row) is transformed by the same plan whichever thread, block or vector lane
// it lands in, so values do not depend on the thread count; the vector variants leave out FMA
// (pocketfft's vector and scalar lines would round differently with it) and so give the generic
// variant's values to the bit.

#undef POCKETFFT_HDRONLY_H
#include "tidu/third_party/pocketfft/pocketfft_hdronly.h"

namespace tidu {
namespace kern {
namespace TIDU_FFT_NS {

namespace pf = ::pocketfft::detail;

// vl adjacent complex values (interleaved re, im) <-> one cmplx<V> (the vl real parts in one
// vector, the imaginary parts in another): the copies into and out of the vector lines. In the
// AVX2 variant by shuffles (two loads or stores of 256 bits each way; the element-wise loops
// were as slow as the transforms they feed), elsewhere element by element. Copies only: the
// values are the same bits either way.
template <class R, class V>
inline void to_lanes(const R* src, pf::cmplx<V>& dst) {
#if defined(__AVX__) && !defined(POCKETFFT_NO_VECTORS)
  if constexpr (std::is_same<R, double>::value && sizeof(V) == 32) {
    const __m256d a = _mm256_loadu_pd(src), b = _mm256_loadu_pd(src + 4);
    const __m256d re = _mm256_permute4x64_pd(_mm256_unpacklo_pd(a, b), 0xD8);
    const __m256d im = _mm256_permute4x64_pd(_mm256_unpackhi_pd(a, b), 0xD8);
    std::memcpy(&dst.r, &re, 32);
    std::memcpy(&dst.i, &im, 32);
    return;
  } else if constexpr (std::is_same<R, float>::value && sizeof(V) == 32) {
    const __m256 a = _mm256_loadu_ps(src), b = _mm256_loadu_ps(src + 8);
    const __m256 re = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))), 0xD8));
    const __m256 im = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))), 0xD8));
    std::memcpy(&dst.r, &re, 32);
    std::memcpy(&dst.i, &im, 32);
    return;
  }
#endif
  constexpr std::size_t vl = sizeof(V) / sizeof(R);
  for (std::size_t j = 0; j < vl; ++j) {
    dst.r[j] = src[2 * j];
    dst.i[j] = src[2 * j + 1];
  }
}

template <class R, class V>
inline void from_lanes(const pf::cmplx<V>& src, R* dst) {
#if defined(__AVX__) && !defined(POCKETFFT_NO_VECTORS)
  if constexpr (std::is_same<R, double>::value && sizeof(V) == 32) {
    __m256d re, im;
    std::memcpy(&re, &src.r, 32);
    std::memcpy(&im, &src.i, 32);
    re = _mm256_permute4x64_pd(re, 0xD8);
    im = _mm256_permute4x64_pd(im, 0xD8);
    _mm256_storeu_pd(dst, _mm256_unpacklo_pd(re, im));
    _mm256_storeu_pd(dst + 4, _mm256_unpackhi_pd(re, im));
    return;
  } else if constexpr (std::is_same<R, float>::value && sizeof(V) == 32) {
    __m256 re, im;
    std::memcpy(&re, &src.r, 32);
    std::memcpy(&im, &src.i, 32);
    re = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(re), 0xD8));
    im = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(im), 0xD8));
    _mm256_storeu_ps(dst, _mm256_unpacklo_ps(re, im));
    _mm256_storeu_ps(dst + 8, _mm256_unpackhi_ps(re, im));
    return;
  }
#endif
  constexpr std::size_t vl = sizeof(V) / sizeof(R);
  for (std::size_t j = 0; j < vl; ++j) {
    dst[2 * j] = src.r[j];
    dst[2 * j + 1] = src.i[j];
  }
}

// Columns [c_lo, c_hi) of `outer` slabs of len x inner complex values (contiguous, in -> out,
// which may alias), transformed along len and scaled by fct.
template <class R>
inline void cols_block(const std::complex<R>* in, std::complex<R>* out, std::size_t len,
                       std::size_t inner, std::size_t c_lo, std::size_t c_hi, bool fwd, R fct,
                       const pf::pocketfft_c<R>& plan) {
  std::size_t c0 = c_lo;
#ifndef POCKETFFT_NO_VECTORS
  using V = pf::vtype_t<R>;
  constexpr std::size_t vl = pf::VLEN<R>::val;
  if (c_hi - c0 >= vl) {
    // groups of vl columns; a group's buffer is len + 1 long, so that the groups' rows do not
    // fall on the same cache sets when len is a power of two
    const std::size_t ls = len + 1;
    const std::size_t budget = (std::size_t{1} << 19) / (ls * sizeof(pf::cmplx<V>));
    const std::size_t gmax = std::max<std::size_t>(1, std::min<std::size_t>(16, budget));
    auto* b = static_cast<pf::cmplx<V>*>(fft_scratch(gmax * ls * sizeof(pf::cmplx<V>), 1));
    while (c_hi - c0 >= vl) {
      const std::size_t g = std::min(gmax, (c_hi - c0) / vl);
      for (std::size_t i = 0; i < len; ++i) {
        const R* row = reinterpret_cast<const R*>(in + i * inner + c0);
        for (std::size_t gg = 0; gg < g; ++gg) to_lanes<R, V>(row + 2 * gg * vl, b[gg * ls + i]);
      }
      for (std::size_t gg = 0; gg < g; ++gg) plan.exec(b + gg * ls, fct, fwd);
      for (std::size_t i = 0; i < len; ++i) {
        R* row = reinterpret_cast<R*>(out + i * inner + c0);
        for (std::size_t gg = 0; gg < g; ++gg) from_lanes<R, V>(b[gg * ls + i], row + 2 * gg * vl);
      }
      c0 += g * vl;
    }
  }
#endif
  if (c0 < c_hi) {  // the columns left over, one at a time
    auto* b = static_cast<pf::cmplx<R>*>(fft_scratch(len * sizeof(pf::cmplx<R>), 2));
    for (; c0 < c_hi; ++c0) {
      for (std::size_t i = 0; i < len; ++i) b[i].Set(in[i * inner + c0].real(), in[i * inner + c0].imag());
      plan.exec(b, fct, fwd);
      for (std::size_t i = 0; i < len; ++i) out[i * inner + c0] = std::complex<R>(b[i].r, b[i].i);
    }
  }
}

// The vector width of this variant's columns (1 without vectors).
template <class R>
inline constexpr std::size_t col_lanes() {
#ifndef POCKETFFT_NO_VECTORS
  return pf::VLEN<R>::val;
#else
  return 1;
#endif
}

// c2c along the middle axis of outer x len x inner (contiguous) complex values, in -> out (may
// alias), by blocks of columns split over the pool: blocks start at multiples of 64 columns, so
// each column takes the same path (vector group or leftover) whatever the thread count.
template <class R>
inline void cols_pass(const std::complex<R>* in, std::complex<R>* out, std::size_t outer,
                      std::size_t len, std::size_t inner, bool fwd, R fct, int threads) {
  const auto plan = pf::get_plan<pf::pocketfft_c<R>>(len);
  constexpr std::size_t kBlock = 64;
  const std::size_t nblk = (inner + kBlock - 1) / kBlock;
  const std::int64_t units = static_cast<std::int64_t>(outer * nblk);
  const std::int64_t chunks =
      threads <= 1 ? 1 : std::min<std::int64_t>(units, 4 * static_cast<std::int64_t>(threads));
  const std::size_t slab = len * inner;
  ::tidu::detail::parallel_chunks(chunks, threads, [&](std::int64_t c, int) {
    const std::int64_t lo = units * c / chunks, hi = units * (c + 1) / chunks;
    std::int64_t u = lo;
    while (u < hi) {  // runs of blocks within one slab
      const std::size_t o = static_cast<std::size_t>(u) / nblk;
      const std::size_t b0 = static_cast<std::size_t>(u) % nblk;
      const std::size_t b1 = std::min(nblk, b0 + static_cast<std::size_t>(hi - u));
      cols_block<R>(in + o * slab, out + o * slab, len, inner, b0 * kBlock,
                    std::min(inner, b1 * kBlock), fwd, fct, *plan);
      u += static_cast<std::int64_t>(b1 - b0);
    }
  });
}

// c2c over axis `axis` of a contiguous complex array of `shape`, in place, scaled by f.
template <class R>
inline void c2c_axis_in_place(const pocketfft::shape_t& shape, const pocketfft::stride_t& st,
                              std::complex<R>* base, std::size_t axis, bool fwd, R f,
                              int threads) {
  std::size_t outer = 1, inner = 1;
  for (std::size_t k = 0; k < axis; ++k) outer *= shape[k];
  for (std::size_t k = axis + 1; k < shape.size(); ++k) inner *= shape[k];
  if (inner >= col_lanes<R>()) {
    cols_pass<R>(base, base, outer, shape[axis], inner, fwd, f, threads);
    return;
  }
  auto* b = reinterpret_cast<char*>(base);
  fft_split_pass(shape, shape, st, st, axis, threads,
                 [&](const pocketfft::shape_t& is, const pocketfft::shape_t&, std::ptrdiff_t io,
                     std::ptrdiff_t) {
                   auto* p = reinterpret_cast<std::complex<R>*>(b + io);
                   pocketfft::c2c<R>(is, st, st, {axis}, fwd, p, p, f);
                 });
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
  auto* tb = reinterpret_cast<char*>(tmp);
  auto* yb = reinterpret_cast<char*>(y);
  const C* w = t.w.data();
  cols_pass<R>(x, tmp, 1, n1, n2, forward, R(1), threads);  // the n2 columns, x -> tmp
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

// One long rfft: x (n reals, n even) -> y (n / 2 + 1 complex), scaled by fct. The n reals are
// m = n / 2 complex values z[k] = x[2k] + i x[2k+1] (the same bytes); Z = FFT_m(z) by the
// four-step, then X[k] = E + W^k O and X[m-k] = conj(E - W^k O) with E = (Z[k] + conj(Z[m-k])) / 2,
// O = -i (Z[k] - conj(Z[m-k])) / 2, W = exp(-2 pi i / n); X[0] and X[m] are Re Z[0] +- Im Z[0].
// tmp holds m complex values.
template <class R>
inline void rfft_row(const FourStepTwiddles<R>& t, const RfftTwiddles<R>& u, R fct, const R* x,
                     std::complex<R>* y, std::complex<R>* tmp, int threads) {
  using C = std::complex<R>;
  const std::size_t m = t.n;
  four_step_row<R>(t, true, R(1), reinterpret_cast<const C*>(x), y, tmp, threads);
  const C* w = u.w.data();
  const std::size_t half = m / 2;  // pairs (k, m - k) for 1 <= k <= (m - 1) / 2; k = m / 2 alone
  const R h = R(0.5) * fct;
  auto untangle = [&](std::size_t k0, std::size_t k1) {
    for (std::size_t k = k0; k < k1; ++k) {
      const C a = y[k], b = std::conj(y[m - k]);
      const C ev = a + b, d = a - b;
      const C od(d.imag(), -d.real());  // -i (a - b)
      const C wo = w[k] * od;
      y[k] = h * (ev + wo);
      y[m - k] = h * std::conj(ev - wo);
    }
  };
  const std::size_t pairs_end = (m + 1) / 2;  // k < pairs_end pairs with m - k > k
  const std::int64_t npairs = static_cast<std::int64_t>(pairs_end > 1 ? pairs_end - 1 : 0);
  const std::int64_t chunks =
      threads <= 1 ? 1 : std::min<std::int64_t>(npairs, 4 * static_cast<std::int64_t>(threads));
  ::tidu::detail::parallel_chunks(chunks, threads, [&](std::int64_t c, int) {
    untangle(1 + static_cast<std::size_t>(npairs * c / chunks),
             1 + static_cast<std::size_t>(npairs * (c + 1) / chunks));
  });
  if (m % 2 == 0 && half > 0) y[half] = fct * std::conj(y[half]);
  const C z0 = y[0];
  y[0] = C(fct * (z0.real() + z0.imag()), R(0));
  y[m] = C(fct * (z0.real() - z0.imag()), R(0));
}

template <class R>
inline void fft_typed(FftType type, const pocketfft::shape_t& xshape,
                      const pocketfft::shape_t& yshape, const pocketfft::shape_t& axes,
                      double scale, const void* x, void* y) {
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
      c2c_axis_in_place<R>(shape, st, reinterpret_cast<C*>(base), axes[k], forward,
                           k + 1 == to ? f : R(1), threads);
  };
  // rows of a long 1-D transform one after another on all threads, or side by side on one each
  auto by_rows = [&](std::size_t rows, std::size_t tmp_len, auto&& row) {
    const int inner = rows >= 2 * static_cast<std::size_t>(threads) ? 1 : threads;
    const int outer = inner == 1 ? threads : 1;
    ::tidu::detail::parallel_chunks(
        static_cast<std::int64_t>(rows), outer, [&](std::int64_t r, int) {
          row(static_cast<std::size_t>(r), static_cast<C*>(fft_scratch(tmp_len * sizeof(C), 0)),
              inner);
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
          by_rows(total / len, len, [&](std::size_t r, C* tmp, int inner) {
            four_step_row<R>(*tw, fwd, fct, static_cast<const C*>(x) + r * len,
                             static_cast<C*>(y) + r * len, tmp, inner);
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
    case FftType::RFFT: {  // r2c over the last axis, then the others in place (as pocketfft's r2c)
      const std::size_t len = xshape[last];
      if (axes.size() == 1 && len % 2 == 0 && len / 2 >= kFourStepMin) {
        if (const std::size_t n1 = four_step_split(len / 2)) {
          const auto tw = four_step_twiddles<R>(len / 2, n1);
          const auto ut = rfft_twiddles<R>(len);
          const std::size_t ylen = yshape[last];
          by_rows(total / len, len / 2, [&](std::size_t r, C* tmp, int inner) {
            rfft_row<R>(*tw, *ut, fct, static_cast<const R*>(x) + r * len,
                        static_cast<C*>(y) + r * ylen, tmp, inner);
          });
          return;
        }
      }
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
    }
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

}  // namespace TIDU_FFT_NS
}  // namespace kern
}  // namespace tidu
