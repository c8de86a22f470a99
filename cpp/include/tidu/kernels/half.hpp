// tidu/kernels/half.hpp - float16 and bfloat16 conversions: the one kernel of the 16-bit floats.
// Every other instruction on them computes in float32 (vm/widen.hpp): operands widened exactly,
// the float32 kernel, the result rounded to nearest even once, as XLA:CPU computes them.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tidu/kernels/elementwise.hpp"
#include "tidu/kernels/fastmath.hpp"
#include "tidu/vm/dtype.hpp"

namespace tidu::kern {

inline std::uint32_t f32_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// float64 -> float32 rounded to odd: the nearest float32 when exact, else the neighbour of the
// two around d whose last mantissa bit is 1.  With 24 bits, 13 more than float16's and 16 more
// than bfloat16's, a rounding to nearest even from it gives d's own correctly rounded 16-bit
// value (round to odd loses no tie): float64 -> float16 with one rounding, as numpy's.
inline float f64_to_f32_odd(double d) {
  const float f = static_cast<float>(d);
  if (!std::isfinite(f) || static_cast<double>(f) == d) return f;  // exact, NaN or overflow
  std::uint32_t u = f32_bits(f);
  if ((u & 1u) == 0) u = std::fabs(static_cast<double>(f)) > std::fabs(d) ? u - 1u : u + 1u;
  return bits_f32(u);
}

// float16 -> float32, exact (subnormals, infinities and NaN payloads kept).  Branch-free (F.
// Giesen's half_to_float with selects), so the conversion loops vectorise.
inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t o = (static_cast<std::uint32_t>(h) & 0x7FFFu) << 13;  // exponent, mantissa
  const std::uint32_t e = o & 0x0F800000u;
  const std::uint32_t normal = o + 0x38000000u;          // exponent + (127 - 15)
  const std::uint32_t special = normal + 0x38000000u;    // infinity, NaN: exponent 255
  const std::uint32_t sub = f32_bits(bits_f32(normal + 0x00800000u) - bits_f32(0x38800000u));
  const std::uint32_t is_special = 0u - static_cast<std::uint32_t>(e == 0x0F800000u);  // masks: the
  const std::uint32_t is_sub = 0u - static_cast<std::uint32_t>(e == 0);  // selects stay branch-free
  const std::uint32_t r = (special & is_special) | (sub & is_sub) | (normal & ~(is_special | is_sub));
  return bits_f32(r | (static_cast<std::uint32_t>(h) & 0x8000u) << 16);
}

// float32 -> float16, rounded to nearest even (F. Giesen's float_to_half_fast3_rtne, its three
// cases computed and selected, so the loops vectorise); NaN stays a quiet NaN with its leading
// payload bits.
inline std::uint16_t f32_to_f16(float f) {
  const std::uint32_t x = f32_bits(f);
  const std::uint32_t u = x & 0x7FFFFFFFu;
  const std::uint32_t special = 0x7C00u | ((0u - static_cast<std::uint32_t>(u > 0x7F800000u)) &
                                            (0x200u | ((u >> 13) & 0x3FFu)));  // NaN: quiet, payload
  // below 2^-14: a subnormal or zero, rounded by the FPU adding 0.5f (whose ulp is 2^-24)
  const std::uint32_t sub = f32_bits(bits_f32(u) + 0.5f) - 0x3F000000u;
  const std::uint32_t normal = (u + 0xC8000FFFu + ((u >> 13) & 1u)) >> 13;  // exponent - 112, RNE
  const std::uint32_t is_special = 0u - static_cast<std::uint32_t>(u >= 0x47800000u);
  const std::uint32_t is_sub = 0u - static_cast<std::uint32_t>(u < 0x38800000u);
  const std::uint32_t o = (special & is_special) | (sub & is_sub) | (normal & ~(is_special | is_sub));
  return static_cast<std::uint16_t>(o | ((x >> 16) & 0x8000u));
}

inline float bf16_to_f32(std::uint16_t h) { return bits_f32(static_cast<std::uint32_t>(h) << 16); }

// float32 -> bfloat16, rounded to nearest even; NaN stays a quiet NaN.  Both cases computed and
// selected (a branch on NaN kept the loop scalar).
inline std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t u = f32_bits(f);
  const std::uint32_t nan = 0u - static_cast<std::uint32_t>((u & 0x7FFFFFFFu) > 0x7F800000u);
  const std::uint32_t quiet = (u >> 16) | 0x40u;
  const std::uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return static_cast<std::uint16_t>((quiet & nan) | (rounded & ~nan));
}

// The conversion loops, compiled for the baseline and (flattened) for AVX2, picked at run time as
// fastmath's loops are (TIDU_SIMD): integer and single IEEE operations only, so every variant
// gives the same bits, with vectors of eight floats instead of four.  With every other
// instruction on a 16-bit float widened to float32 and rounded back (vm/widen.hpp), these loops
// are most of a float16 program's time: x * 2 over 2^20 float16 took 3.5 ms, float32 0.4.
inline void to_half_loop(const float* x, std::uint16_t* r, std::int64_t n, bool bf) {
  if (bf)
    for (std::int64_t i = 0; i < n; ++i) r[i] = f32_to_bf16(x[i]);
  else
    for (std::int64_t i = 0; i < n; ++i) r[i] = f32_to_f16(x[i]);
}
inline void from_half_loop(const std::uint16_t* h, float* r, std::int64_t n, bool bf) {
  if (bf)
    for (std::int64_t i = 0; i < n; ++i) r[i] = bf16_to_f32(h[i]);
  else
    for (std::int64_t i = 0; i < n; ++i) r[i] = f16_to_f32(h[i]);
}
#if TIDU_FM_DISPATCH
TIDU_FM_CLONE_AVX2 inline void to_half_avx2(const float* x, std::uint16_t* r, std::int64_t n, bool bf) {
  to_half_loop(x, r, n, bf);
}
TIDU_FM_CLONE_AVX2 inline void from_half_avx2(const std::uint16_t* h, float* r, std::int64_t n, bool bf) {
  from_half_loop(h, r, n, bf);
}

// float16 by the CPU's own conversions (F16C, on every CPU with AVX2 so far, checked apart):
// eight values per instruction, to nearest even by the immediate whatever MXCSR says. They give
// the loops' bits (test_half_dtypes.py compares every float16 and random float32 pattern across
// TIDU_SIMD levels): the same rounding, subnormals and infinities; a float32 NaN becomes a quiet
// float16 NaN with the sign and the leading payload bits in both; a float16 signalling NaN, which
// the instruction quiets, has its quiet bit cleared again below. tanh(a * b + a) over 2^18
// float16, one chain with six conversions: 0.60 -> 0.24 ms.
inline bool has_f16c() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c") != 0;
  }();
  return yes;
}
__attribute__((target("avx2,f16c"))) inline void to_f16_f16c(const float* x, std::uint16_t* r, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(r + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) r[i] = f32_to_f16(x[i]);
}
__attribute__((target("avx2,f16c"))) inline void from_f16_f16c(const std::uint16_t* h, float* r, std::int64_t n) {
  std::int64_t i = 0;
  const __m256i exp_quiet = _mm256_set1_epi32(0x7E00), exp = _mm256_set1_epi32(0x7C00);
  const __m256i payload = _mm256_set1_epi32(0x1FF), quiet32 = _mm256_set1_epi32(0x00400000);
  for (; i + 8 <= n; i += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i));
    // a signalling NaN comes back quiet from the instruction: its quiet bit cleared again, as
    // f16_to_f32 (and numpy) keep the payload as it is
    const __m256i w = _mm256_cvtepu16_epi32(v);
    const __m256i snan = _mm256_andnot_si256(
        _mm256_cmpeq_epi32(_mm256_and_si256(w, payload), _mm256_setzero_si256()),
        _mm256_cmpeq_epi32(_mm256_and_si256(w, exp_quiet), exp));
    const __m256i f = _mm256_castps_si256(_mm256_cvtph_ps(v));
    _mm256_storeu_ps(r + i, _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_and_si256(snan, quiet32), f)));
  }
  for (; i < n; ++i) r[i] = f16_to_f32(h[i]);
}
// bfloat16 by AVX2 integer ops, eight values at a time: f32_to_bf16's and bf16_to_f32's operations
// lane by lane (the compiler left their loops scalar): x * 2 over 512 x 512 bfloat16, one chain
// with three conversions, 0.150 -> 0.130 ms on two threads.
__attribute__((target("avx2"))) inline void to_bf16_avx2(const float* x, std::uint16_t* r, std::int64_t n) {
  std::int64_t i = 0;
  const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
  const __m256i bias = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), q = _mm256_set1_epi32(0x40);
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(hi, one)), 16);
    const __m256i v = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, q), nan);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(r + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) r[i] = f32_to_bf16(x[i]);
}
__attribute__((target("avx2"))) inline void from_bf16_avx2(const std::uint16_t* h, float* r, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
    _mm256_storeu_ps(r + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) r[i] = bf16_to_f32(h[i]);
}
#endif

inline void to_half(const float* x, std::uint16_t* r, std::int64_t n, bool bf) {
#if TIDU_FM_DISPATCH
  if (fm::isa() != fm::Isa::Generic) {
    if (bf) return to_bf16_avx2(x, r, n);
    if (has_f16c()) return to_f16_f16c(x, r, n);
    return to_half_avx2(x, r, n, bf);
  }
#endif
  to_half_loop(x, r, n, bf);
}
inline void from_half(const std::uint16_t* h, float* r, std::int64_t n, bool bf) {
#if TIDU_FM_DISPATCH
  if (fm::isa() != fm::Isa::Generic) {
    if (bf) return from_bf16_avx2(h, r, n);
    if (has_f16c()) return from_f16_f16c(h, r, n);
    return from_half_avx2(h, r, n, bf);
  }
#endif
  from_half_loop(h, r, n, bf);
}

// n elements of dtype `src` at x as dtype `dst` at y, where either is float16 or bfloat16.
inline void convert_half(DType src, const void* x, DType dst, void* y, std::int64_t n) {
  constexpr std::int64_t kChunk = 256;
  float buf[kChunk];
  if (is_half_dtype(src)) {
    const auto* h = static_cast<const std::uint16_t*>(x);
    const bool bf = src == DType::BF16;
    if (dst == src) {
      if (n) std::memmove(y, x, static_cast<std::size_t>(n) * 2);
      return;
    }
    if (dst == DType::F32) {  // straight into the output (the widened programs' every operand)
      from_half(h, static_cast<float*>(y), n, bf);
      return;
    }
    for (std::int64_t lo = 0; lo < n; lo += kChunk) {
      const std::int64_t m = n - lo < kChunk ? n - lo : kChunk;
      from_half(h + lo, buf, m, bf);
      if (is_half_dtype(dst)) {
        to_half(buf, static_cast<std::uint16_t*>(y) + lo, m, dst == DType::BF16);
      } else {
        visit_dtype(dst, [&](auto t) {
          using D = decltype(t);
          convert<float, D>(buf, static_cast<D*>(y) + lo, m);
        });
      }
    }
    return;
  }
  auto* r = static_cast<std::uint16_t*>(y);
  const bool bf = dst == DType::BF16;
  visit_dtype(src, [&](auto t) {
    using S = decltype(t);
    const S* s = static_cast<const S*>(x);
    if constexpr (std::is_same_v<S, float>) {
      to_half(s, r, n, bf);
    } else {  // through float32: float64 -> float16 rounded to odd first (one rounding in all,
      // as numpy's), anything else -> float32 to nearest (float64 -> bfloat16 rounds twice, as
      // ml_dtypes' and XLA:CPU's; the integers are exact below 2^24)
      for (std::int64_t lo = 0; lo < n; lo += kChunk) {
        const std::int64_t m = n - lo < kChunk ? n - lo : kChunk;
        if constexpr (std::is_same_v<S, double>) {
          if (bf)
            convert<S, float>(s + lo, buf, m);
          else
            for (std::int64_t i = 0; i < m; ++i) buf[i] = f64_to_f32_odd(s[lo + i]);
        } else {
          convert<S, float>(s + lo, buf, m);
        }
        to_half(buf, r + lo, m, bf);
      }
    }
  });
}

}  // namespace tidu::kern
