// tidu/kernels/half.hpp - float16 and bfloat16 conversions: the one kernel of the 16-bit floats.
// Every other instruction on them computes in float32 (vm/widen.hpp): operands widened exactly,
// the float32 kernel, the result rounded to nearest even once, as XLA:CPU computes them.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tidu/kernels/elementwise.hpp"
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

// float16 -> float32, exact (subnormals, infinities and NaN payloads kept).
inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0) {  // zero or subnormal: m * 2^-24, exact in float32
    const float v = static_cast<float>(m) * 5.9604644775390625e-08f;
    return bits_f32(f32_bits(v) | sign);
  }
  if (e == 31) return bits_f32(sign | 0x7F800000u | (m << 13));
  return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

// float32 -> float16, rounded to nearest even (F. Giesen's float_to_half_fast3_rtne); NaN stays
// a quiet NaN with its leading payload bits.
inline std::uint16_t f32_to_f16(float f) {
  std::uint32_t u = f32_bits(f);
  const std::uint32_t sign = u & 0x80000000u;
  u ^= sign;
  std::uint32_t o;
  if (u >= (127u + 16u) << 23) {  // 2^16 and up: infinity, or NaN
    o = u > 0x7F800000u ? 0x7E00u | ((u >> 13) & 0x3FFu) : 0x7C00u;
  } else if (u < (113u << 23)) {  // below 2^-14: a subnormal or zero; the FPU rounds the sum
    const std::uint32_t magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;  // 0.5f
    o = f32_bits(bits_f32(u) + bits_f32(magic)) - magic;
  } else {
    const std::uint32_t odd = (u >> 13) & 1u;
    u += ((15u - 127u) << 23) + 0xFFFu + odd;
    o = u >> 13;
  }
  return static_cast<std::uint16_t>(o | (sign >> 16));
}

inline float bf16_to_f32(std::uint16_t h) { return bits_f32(static_cast<std::uint32_t>(h) << 16); }

// float32 -> bfloat16, rounded to nearest even; NaN stays a quiet NaN.
inline std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
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
    for (std::int64_t lo = 0; lo < n; lo += kChunk) {
      const std::int64_t m = n - lo < kChunk ? n - lo : kChunk;
      for (std::int64_t i = 0; i < m; ++i) buf[i] = bf ? bf16_to_f32(h[lo + i]) : f16_to_f32(h[lo + i]);
      if (is_half_dtype(dst)) {
        auto* r = static_cast<std::uint16_t*>(y) + lo;
        for (std::int64_t i = 0; i < m; ++i) r[i] = dst == DType::BF16 ? f32_to_bf16(buf[i]) : f32_to_f16(buf[i]);
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
      for (std::int64_t i = 0; i < n; ++i) r[i] = bf ? f32_to_bf16(s[i]) : f32_to_f16(s[i]);
    } else {  // through float32, as XLA:CPU (a float64 between two 16-bit neighbours rounds twice)
      for (std::int64_t lo = 0; lo < n; lo += kChunk) {
        const std::int64_t m = n - lo < kChunk ? n - lo : kChunk;
        convert<S, float>(s + lo, buf, m);
        for (std::int64_t i = 0; i < m; ++i) r[lo + i] = bf ? f32_to_bf16(buf[i]) : f32_to_f16(buf[i]);
      }
    }
  });
}

}  // namespace tidu::kern
