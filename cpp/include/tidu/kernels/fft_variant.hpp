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

// ---- fft2 in two passes over memory: the rows fused with the columns' first step ----
//
// The column DFT of length L = 8 M split by decimation in frequency: with n = n1 + M n2 and
// k = 8 k1 + k2 (n1, k1 < M; n2, k2 < 8),
//   X[8 k1 + k2] = sum_n1 W_M^(n1 k1) [ W_L^(n1 k2) sum_n2 x[n1 + M n2] W_8^(n2 k2) ].
// Pass 1 (rows_dft8), for each n1: the 8 rows n1 + M n2 transformed along the last axis
// (pocketfft, rows as vector lanes), the 8-point DFT across them, times W_L^(n1 k2), written to
// rows 8 n1 + k2 of the output. Pass 2 (cols_pass, length M, 8 N wide): the M-point DFTs over the
// rows 8 k1 + k2 for each k2, in place, which leaves X in natural order. So the array is read and
// written twice, as by the rows-then-columns passes, but the 512-point column transform on vector
// lanes (64 KB of complex128 with pocketfft's scratch, more than L1) becomes an 8-point step on rows already in
// cache plus short columns, and the second pass's blocks (M rows of 1 KB) stay in L2 between its
// reads and writes, where 512 rows at a power-of-two stride did not.
//
// Every output goes through the same operations whichever thread or SIMD level computes it: the
// 8-point step is written twice, with AVX intrinsics on interleaved complex values (two complex128
// or four complex64 per vector) and in scalar code, the same IEEE operations in the same order (no
// FMA), so the bits agree.

#ifndef POCKETFFT_NO_VECTORS
typedef double fft_v2d __attribute__((vector_size(16)));

template <class R>
struct fft_z {
  R r, i;
};

// times -i (forward) or +i (backward)
template <bool fwd, class R>
inline fft_z<R> fft_rot(fft_z<R> a) {
  return fwd ? fft_z<R>{a.i, -a.r} : fft_z<R>{-a.i, a.r};
}

// One column of the 8-point DFT across rows: a[0..7] in, out[k] = A_k * w[k] (k >= 1).
template <bool fwd, class R>
inline void dft8_one(const fft_z<R>* a, fft_z<R>* out, const R* wr, const R* wi, R h) {
  using Z = fft_z<R>;
  auto add = [](Z p, Z q) { return Z{p.r + q.r, p.i + q.i}; };
  auto sub = [](Z p, Z q) { return Z{p.r - q.r, p.i - q.i}; };
  const Z b0 = add(a[0], a[4]), b1 = sub(a[0], a[4]), b2 = add(a[2], a[6]);
  const Z b3 = fft_rot<fwd>(sub(a[2], a[6]));
  const Z b4 = add(a[1], a[5]), b5 = sub(a[1], a[5]), b6 = add(a[3], a[7]);
  const Z b7 = fft_rot<fwd>(sub(a[3], a[7]));
  const Z e0 = add(b0, b2), e2 = sub(b0, b2), e1 = add(b1, b3), e3 = sub(b1, b3);
  const Z o0 = add(b4, b6), o2 = sub(b4, b6), o1 = add(b5, b7), o3 = sub(b5, b7);
  // W_8 o1 and W_8^3 o3: (x + y, y - x) / sqrt 2 forward, (x - y, x + y) / sqrt 2 backward
  const Z q1 = fwd ? Z{o1.r + o1.i, o1.i - o1.r} : Z{o1.r - o1.i, o1.i + o1.r};
  const Z q3 = fwd ? Z{o3.r + o3.i, o3.i - o3.r} : Z{o3.r - o3.i, o3.i + o3.r};
  const Z p1{h * q1.r, h * q1.i};
  const Z r3 = fft_rot<fwd>(q3);
  const Z p3{h * r3.r, h * r3.i};
  const Z p2 = fft_rot<fwd>(o2);
  Z A[8] = {add(e0, o0), add(e1, p1), add(e2, p2), add(e3, p3),
            sub(e0, o0), sub(e1, p1), sub(e2, p2), sub(e3, p3)};
  out[0] = A[0];
  for (int k = 1; k < 8; ++k)
    out[k] = Z{A[k].r * wr[k] - A[k].i * wi[k], A[k].i * wr[k] + A[k].r * wi[k]};
}

#if defined(__AVX__)
// The 8-point step on one vector of interleaved complex values per row (2 complex128 or 4
// complex64): dft8_one's operations lane by lane. Ops<R> holds the intrinsics for each width.
template <class R>
struct AvxOps;

template <>
struct AvxOps<double> {
  using V = __m256d;
  static constexpr std::size_t per = 2;  // complex values per vector
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V a) { _mm256_storeu_pd(p, a); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static V sub(V a, V b) { return _mm256_sub_pd(a, b); }
  static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static V addsub(V a, V b) { return _mm256_addsub_pd(a, b); }
  static V set1(double a) { return _mm256_set1_pd(a); }
  static V swap(V a) { return _mm256_permute_pd(a, 0x5); }  // (re, im) -> (im, re)
  static V neg_odd() { return _mm256_setr_pd(0.0, -0.0, 0.0, -0.0); }
  static V neg_even() { return _mm256_setr_pd(-0.0, 0.0, -0.0, 0.0); }
  static V xor_(V a, V b) { return _mm256_xor_pd(a, b); }
};

template <>
struct AvxOps<float> {
  using V = __m256;
  static constexpr std::size_t per = 4;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V a) { _mm256_storeu_ps(p, a); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V addsub(V a, V b) { return _mm256_addsub_ps(a, b); }
  static V set1(float a) { return _mm256_set1_ps(a); }
  static V swap(V a) { return _mm256_permute_ps(a, 0xB1); }
  static V neg_odd() { return _mm256_setr_ps(0.f, -0.f, 0.f, -0.f, 0.f, -0.f, 0.f, -0.f); }
  static V neg_even() { return _mm256_setr_ps(-0.f, 0.f, -0.f, 0.f, -0.f, 0.f, -0.f, 0.f); }
  static V xor_(V a, V b) { return _mm256_xor_ps(a, b); }
};

template <bool fwd, class O>
inline typename O::V fft_rot4(typename O::V a) {  // each complex value times -i / +i
  return O::xor_(O::swap(a), fwd ? O::neg_odd() : O::neg_even());
}

// (x + y, y - x) forward, (x - y, x + y) backward, for each complex value (x, y): the same
// roundings as dft8_one's (x - (-y) is x + y, y + (-x) is y - x, exactly)
template <bool fwd, class O>
inline typename O::V fft_q4(typename O::V a) {
  const typename O::V s = O::swap(a);
  return fwd ? O::addsub(a, O::xor_(s, O::set1(-0.0f))) : O::addsub(a, s);
}

template <bool fwd, class R>
inline void dft8_vec(const R* const* t, R* const* o, std::size_t c, const R* wr, const R* wi,
                     R h) {
  using O = AvxOps<R>;
  using V = typename O::V;
  V a[8];
  for (int j = 0; j < 8; ++j) a[j] = O::load(t[j] + 2 * c);
  const V b0 = O::add(a[0], a[4]), b1 = O::sub(a[0], a[4]);
  const V b2 = O::add(a[2], a[6]), b3 = fft_rot4<fwd, O>(O::sub(a[2], a[6]));
  const V b4 = O::add(a[1], a[5]), b5 = O::sub(a[1], a[5]);
  const V b6 = O::add(a[3], a[7]), b7 = fft_rot4<fwd, O>(O::sub(a[3], a[7]));
  const V e0 = O::add(b0, b2), e2 = O::sub(b0, b2);
  const V e1 = O::add(b1, b3), e3 = O::sub(b1, b3);
  const V o0 = O::add(b4, b6), o2 = O::sub(b4, b6);
  const V o1 = O::add(b5, b7), o3 = O::sub(b5, b7);
  const V hh = O::set1(h);
  const V p1 = O::mul(hh, fft_q4<fwd, O>(o1));
  const V p3 = O::mul(hh, fft_rot4<fwd, O>(fft_q4<fwd, O>(o3)));
  const V p2 = fft_rot4<fwd, O>(o2);
  O::store(o[0] + 2 * c, O::add(e0, o0));
  const V A[8] = {e0, O::add(e1, p1), O::add(e2, p2), O::add(e3, p3),
                  O::sub(e0, o0), O::sub(e1, p1), O::sub(e2, p2), O::sub(e3, p3)};
  for (int k = 1; k < 8; ++k) {
    const V m1 = O::mul(A[k], O::set1(wr[k]));
    const V m2 = O::mul(O::swap(A[k]), O::set1(wi[k]));
    O::store(o[k] + 2 * c, O::addsub(m1, m2));  // (ar wr - ai wi, ai wr + ar wi)
  }
}
#endif

#if defined(__AVX__)
typedef double fft_v4d __attribute__((vector_size(32)));

// Rows r[0..3] -> t[0..3] (N complex each) transformed, as 4 lanes: two columns of four rows at
// a time moved by a 4 x 4 transpose of re and im each way (unpacks and 128-bit permutes).
inline void rows4_exec(const double* const* r, double* const* t, std::size_t N, bool fwd,
                       const pf::pocketfft_c<double>& plan, pf::cmplx<fft_v4d>* b) {
  std::size_t c = 0;
  for (; c + 2 <= N; c += 2) {
    const __m256d u0 = _mm256_loadu_pd(r[0] + 2 * c), u1 = _mm256_loadu_pd(r[1] + 2 * c);
    const __m256d u2 = _mm256_loadu_pd(r[2] + 2 * c), u3 = _mm256_loadu_pd(r[3] + 2 * c);
    const __m256d t0 = _mm256_unpacklo_pd(u0, u1), t1 = _mm256_unpackhi_pd(u0, u1);
    const __m256d t2 = _mm256_unpacklo_pd(u2, u3), t3 = _mm256_unpackhi_pd(u2, u3);
    const __m256d re0 = _mm256_permute2f128_pd(t0, t2, 0x20), re1 = _mm256_permute2f128_pd(t0, t2, 0x31);
    const __m256d im0 = _mm256_permute2f128_pd(t1, t3, 0x20), im1 = _mm256_permute2f128_pd(t1, t3, 0x31);
    std::memcpy(&b[c].r, &re0, 32);
    std::memcpy(&b[c].i, &im0, 32);
    std::memcpy(&b[c + 1].r, &re1, 32);
    std::memcpy(&b[c + 1].i, &im1, 32);
  }
  for (; c < N; ++c)
    for (int j = 0; j < 4; ++j) {
      b[c].r[j] = r[j][2 * c];
      b[c].i[j] = r[j][2 * c + 1];
    }
  plan.exec(b, 1.0, fwd);
  c = 0;
  for (; c + 2 <= N; c += 2) {
    __m256d re0, im0, re1, im1;
    std::memcpy(&re0, &b[c].r, 32);
    std::memcpy(&im0, &b[c].i, 32);
    std::memcpy(&re1, &b[c + 1].r, 32);
    std::memcpy(&im1, &b[c + 1].i, 32);
    const __m256d t0 = _mm256_permute2f128_pd(re0, re1, 0x20), t2 = _mm256_permute2f128_pd(re0, re1, 0x31);
    const __m256d t1 = _mm256_permute2f128_pd(im0, im1, 0x20), t3 = _mm256_permute2f128_pd(im0, im1, 0x31);
    _mm256_storeu_pd(t[0] + 2 * c, _mm256_unpacklo_pd(t0, t1));
    _mm256_storeu_pd(t[1] + 2 * c, _mm256_unpackhi_pd(t0, t1));
    _mm256_storeu_pd(t[2] + 2 * c, _mm256_unpacklo_pd(t2, t3));
    _mm256_storeu_pd(t[3] + 2 * c, _mm256_unpackhi_pd(t2, t3));
  }
  for (; c < N; ++c)
    for (int j = 0; j < 4; ++j) {
      t[j][2 * c] = b[c].r[j];
      t[j][2 * c + 1] = b[c].i[j];
    }
}

// The 8 x 8 transpose of floats: v[k] becomes column k of the rows v[0..7] (its own inverse).
inline void transpose8_ps(__m256* v) {
  const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
  const __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
  const __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  v[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  v[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  v[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  v[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  v[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  v[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  v[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  v[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}
#endif

// Rows r[0..vl) -> t[0..vl) (N complex each) of single precision transformed as the vl lanes of
// pocketfft's vector lines (vl = 8 with AVX, 4 with SSE): four (AVX) or two (SSE) columns at a
// time moved by a transpose of the rows' interleaved (re, im) floats, whose columns are then the
// re and im vectors of one line element each.
template <class V>
inline void rows_c64_exec(const float* const* r, float* const* t, std::size_t N, bool fwd,
                          const pf::pocketfft_c<float>& plan, pf::cmplx<V>* b) {
  constexpr std::size_t vl = sizeof(V) / sizeof(float);
  std::size_t c = 0;
#if defined(__AVX__)
  if constexpr (vl == 8) {
    for (; c + 4 <= N; c += 4) {
      __m256 u[8];
      for (int j = 0; j < 8; ++j) u[j] = _mm256_loadu_ps(r[j] + 2 * c);
      transpose8_ps(u);
      for (int m = 0; m < 4; ++m) {
        std::memcpy(&b[c + m].r, &u[2 * m], 32);
        std::memcpy(&b[c + m].i, &u[2 * m + 1], 32);
      }
    }
  }
#endif
#if defined(__SSE2__)
  if constexpr (vl == 4) {
    for (; c + 2 <= N; c += 2) {
      __m128 u0 = _mm_loadu_ps(r[0] + 2 * c), u1 = _mm_loadu_ps(r[1] + 2 * c);
      __m128 u2 = _mm_loadu_ps(r[2] + 2 * c), u3 = _mm_loadu_ps(r[3] + 2 * c);
      _MM_TRANSPOSE4_PS(u0, u1, u2, u3);
      std::memcpy(&b[c].r, &u0, 16);
      std::memcpy(&b[c].i, &u1, 16);
      std::memcpy(&b[c + 1].r, &u2, 16);
      std::memcpy(&b[c + 1].i, &u3, 16);
    }
  }
#endif
  for (; c < N; ++c)
    for (std::size_t j = 0; j < vl; ++j) {
      b[c].r[j] = r[j][2 * c];
      b[c].i[j] = r[j][2 * c + 1];
    }
  plan.exec(b, 1.0f, fwd);
  c = 0;
#if defined(__AVX__)
  if constexpr (vl == 8) {
    for (; c + 4 <= N; c += 4) {
      __m256 u[8];
      for (int m = 0; m < 4; ++m) {
        std::memcpy(&u[2 * m], &b[c + m].r, 32);
        std::memcpy(&u[2 * m + 1], &b[c + m].i, 32);
      }
      transpose8_ps(u);
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(t[j] + 2 * c, u[j]);
    }
  }
#endif
#if defined(__SSE2__)
  if constexpr (vl == 4) {
    for (; c + 2 <= N; c += 2) {
      __m128 u0, u1, u2, u3;
      std::memcpy(&u0, &b[c].r, 16);
      std::memcpy(&u1, &b[c].i, 16);
      std::memcpy(&u2, &b[c + 1].r, 16);
      std::memcpy(&u3, &b[c + 1].i, 16);
      _MM_TRANSPOSE4_PS(u0, u1, u2, u3);
      _mm_storeu_ps(t[0] + 2 * c, u0);
      _mm_storeu_ps(t[1] + 2 * c, u1);
      _mm_storeu_ps(t[2] + 2 * c, u2);
      _mm_storeu_ps(t[3] + 2 * c, u3);
    }
  }
#endif
  for (; c < N; ++c)
    for (std::size_t j = 0; j < vl; ++j) {
      t[j][2 * c] = b[c].r[j];
      t[j][2 * c + 1] = b[c].i[j];
    }
}

// Rows r[0], r[1] -> t[0], t[1] (N complex each) transformed, as 2 lanes.
inline void rows2_exec(const double* const* r, double* const* t, std::size_t N, bool fwd,
                       const pf::pocketfft_c<double>& plan, pf::cmplx<fft_v2d>* b) {
  const double *r0 = r[0], *r1 = r[1];
  double *t0 = t[0], *t1 = t[1];
#if defined(__SSE2__)
  for (std::size_t c = 0; c < N; ++c) {  // (re, im) of two rows -> (re, re), (im, im)
    const __m128d u = _mm_loadu_pd(r0 + 2 * c), v = _mm_loadu_pd(r1 + 2 * c);
    const __m128d re = _mm_unpacklo_pd(u, v), im = _mm_unpackhi_pd(u, v);
    std::memcpy(&b[c].r, &re, 16);
    std::memcpy(&b[c].i, &im, 16);
  }
  plan.exec(b, 1.0, fwd);
  for (std::size_t c = 0; c < N; ++c) {
    __m128d re, im;
    std::memcpy(&re, &b[c].r, 16);
    std::memcpy(&im, &b[c].i, 16);
    _mm_storeu_pd(t0 + 2 * c, _mm_unpacklo_pd(re, im));
    _mm_storeu_pd(t1 + 2 * c, _mm_unpackhi_pd(re, im));
  }
#else
  for (std::size_t c = 0; c < N; ++c) {
    b[c].r = fft_v2d{r0[2 * c], r1[2 * c]};
    b[c].i = fft_v2d{r0[2 * c + 1], r1[2 * c + 1]};
  }
  plan.exec(b, 1.0, fwd);
  for (std::size_t c = 0; c < N; ++c) {
    t0[2 * c] = b[c].r[0];
    t0[2 * c + 1] = b[c].i[0];
    t1[2 * c] = b[c].r[1];
    t1[2 * c + 1] = b[c].i[1];
  }
#endif
}

// Real rows r[0..VL) (N reals each) -> t[0..VL) (N / 2 + 1 complex each), pocketfft's r2c on VL
// rows as vector lanes (the same bits for every VL): its halfcomplex r0, r1, i1, r2, i2, ...
// spread out to complex values as pocketfft's r2c writes them.
template <class V>
inline void rows_r2c_exec(const double* const* r, double* const* t, std::size_t N,
                          const pf::pocketfft_r<double>& plan, V* b) {
  constexpr std::size_t vl = sizeof(V) / sizeof(double);
  std::size_t i = 0;
#if defined(__AVX__)
  if constexpr (vl == 4) {
    for (; i + 4 <= N; i += 4) {  // a 4 x 4 transpose
      const __m256d u0 = _mm256_loadu_pd(r[0] + i), u1 = _mm256_loadu_pd(r[1] + i);
      const __m256d u2 = _mm256_loadu_pd(r[2] + i), u3 = _mm256_loadu_pd(r[3] + i);
      const __m256d t0 = _mm256_unpacklo_pd(u0, u1), t1 = _mm256_unpackhi_pd(u0, u1);
      const __m256d t2 = _mm256_unpacklo_pd(u2, u3), t3 = _mm256_unpackhi_pd(u2, u3);
      const __m256d v0 = _mm256_permute2f128_pd(t0, t2, 0x20), v1 = _mm256_permute2f128_pd(t1, t3, 0x20);
      const __m256d v2 = _mm256_permute2f128_pd(t0, t2, 0x31), v3 = _mm256_permute2f128_pd(t1, t3, 0x31);
      std::memcpy(&b[i], &v0, 32);
      std::memcpy(&b[i + 1], &v1, 32);
      std::memcpy(&b[i + 2], &v2, 32);
      std::memcpy(&b[i + 3], &v3, 32);
    }
  }
#endif
  for (; i < N; ++i)
    for (std::size_t j = 0; j < vl; ++j) b[i][j] = r[j][i];
  plan.exec(b, 1.0, true);
  for (std::size_t j = 0; j < vl; ++j) {
    double* o = t[j];
    o[0] = b[0][j];
    o[1] = 0.0;
    std::size_t k = 1;
    for (; 2 * k < N; ++k) {
      o[2 * k] = b[2 * k - 1][j];
      o[2 * k + 1] = b[2 * k][j];
    }
    if (2 * k == N) {
      o[2 * k] = b[N - 1][j];
      o[2 * k + 1] = 0.0;
    }
  }
}

// Pass 1 for one n1 of one slab: the 8 rows n1 + M n2 transformed by rows(tr) into tr[0..7]
// (Nc complex each), then the 8-point step to rows 8 n1 + k2 of y (Nc complex each).
template <bool fwd, class R, class Rows>
inline void rows_dft8(std::complex<R>* y, std::size_t M, std::size_t Nc, std::size_t n1,
                      const std::complex<R>* tw, Rows&& rows) {
  auto* t = static_cast<R*>(fft_scratch(8 * Nc * 2 * sizeof(R), 0));
  R* tr[8];
  for (std::size_t j = 0; j < 8; ++j) tr[j] = t + j * 2 * Nc;
  rows(tr);
  R wr[8], wi[8];
  for (std::size_t k = 1; k < 8; ++k) {
    wr[k] = tw[k * M + n1].real();
    wi[k] = fwd ? tw[k * M + n1].imag() : -tw[k * M + n1].imag();
  }
  const R h = static_cast<R>(0.70710678118654752440);
  R* orow[8];
  for (std::size_t j = 0; j < 8; ++j) orow[j] = reinterpret_cast<R*>(y + (8 * n1 + j) * Nc);
  std::size_t c = 0;
#if defined(__AVX__)
  constexpr std::size_t per = AvxOps<R>::per;
  for (; c + per <= Nc; c += per) dft8_vec<fwd, R>(tr, orow, c, wr, wi, h);
#endif
  for (; c < Nc; ++c) {
    fft_z<R> a[8], out[8];
    for (int j = 0; j < 8; ++j) a[j] = fft_z<R>{tr[j][2 * c], tr[j][2 * c + 1]};
    dft8_one<fwd, R>(a, out, wr, wi, h);
    for (int k = 0; k < 8; ++k) {
      orow[k][2 * c] = out[k].r;
      orow[k][2 * c + 1] = out[k].i;
    }
  }
}

// The fused pass applies to the last two axes (L x Nc complex out) of a slab when L is a multiple
// of 8 and at least 256, the output slab is over 2^16 complex values, and x, y are distinct
// buffers (pass 1 writes rows it has not read yet). Elsewhere the plain passes were as fast or
// faster (complex128, one core, ms, plain vs fused): a slab that stays in L2 between the passes,
// 256 x 256 0.35 vs 0.38; short columns, 64 x 2048 0.85 vs 0.91, 128 x 1024 0.90 vs 0.91. Where
// it applies: 512 x 512 2.30 vs 1.89, 256 x 2048 3.92 vs 3.76, 512 x 203 1.01 vs 0.86, 1024 x
// 1024 10.6 vs 8.6. complex64, one core / two: 512 x 512 1.26 vs 1.06 / 0.88 vs 0.67, 512 x 256
// 0.53 vs 0.43 / 0.51 vs 0.36, 1024 x 1024 5.4 vs 4.6 / 3.0 vs 2.4, 264 x 251 0.53 vs 0.55 /
// 0.46 vs 0.42 (the same rule for both precisions).
inline bool fft2_fused_fits(std::size_t L, std::size_t Nc) {
  return L % 8 == 0 && L >= 256 && L * Nc > (std::size_t{1} << 16);
}

// The two passes over `outer` slabs of L x Nc complex output: unit(o, n1) runs pass 1 for n1 of
// slab o; pass 2 scaled by fct.
template <class R, class Unit>
inline void fft2_fused_passes(std::complex<R>* y, std::size_t outer, std::size_t L,
                              std::size_t Nc, bool fwd, R fct, int threads, Unit&& unit) {
  const std::size_t M = L / 8;
  const std::int64_t units = static_cast<std::int64_t>(outer * M);
  const std::int64_t chunks =
      threads <= 1 ? 1 : std::min<std::int64_t>(units, 4 * static_cast<std::int64_t>(threads));
  ::tidu::detail::parallel_chunks(chunks, threads, [&](std::int64_t ch, int) {
    for (std::int64_t u = units * ch / chunks; u < units * (ch + 1) / chunks; ++u)
      unit(static_cast<std::size_t>(u) / M, static_cast<std::size_t>(u) % M);
  });
  cols_pass<R>(y, y, outer, M, 8 * Nc, fwd, fct, threads);
}

// c2c over the last two axes (L x N), x -> y (distinct), scaled by fct.
template <class R>
inline void fft2_fused(const std::complex<R>* x, std::complex<R>* y, std::size_t outer,
                       std::size_t L, std::size_t N, bool fwd, R fct, int threads) {
  const std::size_t M = L / 8;
  const auto plan = pf::get_plan<pf::pocketfft_c<R>>(N);
  const auto tw = four_step_twiddles<R>(L, 8);  // w[k2 * M + n1] = W_L^(n1 k2)
  const std::size_t slab = L * N;
  fft2_fused_passes<R>(y, outer, L, N, fwd, fct, threads, [&](std::size_t o, std::size_t n1) {
    // the rows n1 + M n2 transformed as vector lanes (the same bits for every width)
    auto rows = [&](R* const* tr) {
      const R* rin[8];
      for (std::size_t j = 0; j < 8; ++j)
        rin[j] = reinterpret_cast<const R*>(x + o * slab + (n1 + M * j) * N);
      if constexpr (std::is_same<R, double>::value) {
#if defined(__AVX__)
        auto* b = static_cast<pf::cmplx<fft_v4d>*>(fft_scratch(N * sizeof(pf::cmplx<fft_v4d>), 1));
        for (std::size_t p = 0; p < 8; p += 4) rows4_exec(rin + p, tr + p, N, fwd, *plan, b);
#else
        auto* b = static_cast<pf::cmplx<fft_v2d>*>(fft_scratch(N * sizeof(pf::cmplx<fft_v2d>), 1));
        for (std::size_t p = 0; p < 8; p += 2) rows2_exec(rin + p, tr + p, N, fwd, *plan, b);
#endif
      } else {
        using V = pf::vtype_t<float>;
        constexpr std::size_t vl = sizeof(V) / sizeof(float);
        auto* b = static_cast<pf::cmplx<V>*>(fft_scratch(N * sizeof(pf::cmplx<V>), 1));
        for (std::size_t p = 0; p < 8; p += vl) rows_c64_exec<V>(rin + p, tr + p, N, fwd, *plan, b);
      }
    };
    if (fwd)
      rows_dft8<true, R>(y + o * slab, M, N, n1, tw->w.data(), rows);
    else
      rows_dft8<false, R>(y + o * slab, M, N, n1, tw->w.data(), rows);
  });
}

// r2c over the last two axes (L x N reals -> L x (N / 2 + 1) complex), x -> y, scaled by fct.
inline void rfft2_fused(const double* x, std::complex<double>* y, std::size_t outer,
                        std::size_t L, std::size_t N, double fct, int threads) {
  const std::size_t M = L / 8, Nc = N / 2 + 1;
  const auto plan = pf::get_plan<pf::pocketfft_r<double>>(N);
  const auto tw = four_step_twiddles<double>(L, 8);
  fft2_fused_passes<double>(y, outer, L, Nc, true, fct, threads, [&](std::size_t o, std::size_t n1) {
    auto rows = [&](double* const* tr) {
      const double* rin[8];
      for (std::size_t j = 0; j < 8; ++j) rin[j] = x + o * L * N + (n1 + M * j) * N;
#if defined(__AVX__)
      auto* b = static_cast<fft_v4d*>(fft_scratch(N * sizeof(fft_v4d), 1));
      for (std::size_t p = 0; p < 8; p += 4) rows_r2c_exec(rin + p, tr + p, N, *plan, b);
#else
      auto* b = static_cast<fft_v2d*>(fft_scratch(N * sizeof(fft_v2d), 1));
      for (std::size_t p = 0; p < 8; p += 2) rows_r2c_exec(rin + p, tr + p, N, *plan, b);
#endif
    };
    rows_dft8<true, double>(y + o * L * Nc, M, Nc, n1, tw->w.data(), rows);
  });
}
#endif  // POCKETFFT_NO_VECTORS

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
#ifndef POCKETFFT_NO_VECTORS
      {
        const std::size_t L = axes.size() >= 2 ? xshape[axes[axes.size() - 2]] : 0;
        if (axes.size() >= 2 && fft2_fused_fits(L, len) && x != static_cast<const void*>(y)) {
          fft2_fused<R>(static_cast<const C*>(x), static_cast<C*>(y), total / (L * len), L, len,
                        fwd, axes.size() == 2 ? fct : R(1), threads);
          c2c_in_place(yshape, ys, yb, 0, axes.size() - 2, fwd, fct);
          return;
        }
      }
#endif
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
#ifndef POCKETFFT_NO_VECTORS
      if constexpr (std::is_same<R, double>::value) {
        const std::size_t L = axes.size() >= 2 ? xshape[axes[axes.size() - 2]] : 0;
        if (axes.size() >= 2 && fft2_fused_fits(L, len / 2 + 1) && x != static_cast<const void*>(y)) {
          rfft2_fused(static_cast<const R*>(x), static_cast<C*>(y), total / (L * len), L, len,
                      axes.size() == 2 ? fct : R(1), threads);
          c2c_in_place(yshape, ys, yb, 0, axes.size() - 2, true, fct);
          return;
        }
      }
#endif
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
