// tidu/kernels/random.hpp - the Threefry-2x32 block cipher (20 rounds, Salmon et al. 2011), as
// jax.random's default generator uses it: a counter-based hash of (key, count) pairs, so random
// numbers are pure integer arithmetic over counters and a program can draw them anywhere.
#pragma once

#include <cstdint>

namespace tidu {
namespace kern {

namespace threefry_detail {

inline constexpr std::uint32_t rotl(std::uint32_t v, int r) { return (v << r) | (v >> (32 - r)); }

// Four rounds with rotations R0..R3, then the key injection number `inj`.
template <int R0, int R1, int R2, int R3>
inline void rounds(std::uint32_t& x0, std::uint32_t& x1) {
  x0 += x1; x1 = rotl(x1, R0); x1 ^= x0;
  x0 += x1; x1 = rotl(x1, R1); x1 ^= x0;
  x0 += x1; x1 = rotl(x1, R2); x1 ^= x0;
  x0 += x1; x1 = rotl(x1, R3); x1 ^= x0;
}

}  // namespace threefry_detail

// Threefry-2x32 of n counts (pairs x[2i], x[2i+1]) under one key (k0, k1) into y (pairs); y may
// be x.  Works in blocks of 64 pairs held in separate lanes so the compiler vectorises the rounds.
inline void threefry2x32(std::uint32_t k0, std::uint32_t k1, const std::uint32_t* x, std::uint32_t* y,
                         std::int64_t n) {
  using namespace threefry_detail;
  const std::uint32_t k2 = k0 ^ k1 ^ 0x1BD11BDAu;
  constexpr std::int64_t B = 64;
  std::uint32_t a[B], b[B];
  for (std::int64_t lo = 0; lo < n; lo += B) {
    const std::int64_t m = n - lo < B ? n - lo : B;
    for (std::int64_t j = 0; j < m; ++j) {
      a[j] = x[2 * (lo + j)] + k0;
      b[j] = x[2 * (lo + j) + 1] + k1;
    }
    for (std::int64_t j = 0; j < m; ++j) {
      std::uint32_t x0 = a[j], x1 = b[j];
      rounds<13, 15, 26, 6>(x0, x1); x0 += k1; x1 += k2 + 1u;
      rounds<17, 29, 16, 24>(x0, x1); x0 += k2; x1 += k0 + 2u;
      rounds<13, 15, 26, 6>(x0, x1); x0 += k0; x1 += k1 + 3u;
      rounds<17, 29, 16, 24>(x0, x1); x0 += k1; x1 += k2 + 4u;
      rounds<13, 15, 26, 6>(x0, x1); x0 += k2; x1 += k0 + 5u;
      a[j] = x0, b[j] = x1;
    }
    for (std::int64_t j = 0; j < m; ++j) {
      y[2 * (lo + j)] = a[j];
      y[2 * (lo + j) + 1] = b[j];
    }
  }
}

// The Threefry2x32 instruction: key (..., 2) and count (..., C..., 2) with the key's leading axes
// first; each of the `groups` keys hashes its `per` count pairs.
inline void run_threefry(const std::uint32_t* key, const std::uint32_t* count, std::uint32_t* y,
                         std::int64_t groups, std::int64_t per) {
  for (std::int64_t g = 0; g < groups; ++g)
    threefry2x32(key[2 * g], key[2 * g + 1], count + 2 * g * per, y + 2 * g * per, per);
}

}  // namespace kern
}  // namespace tidu
