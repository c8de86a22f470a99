// tidu/kernels/random.hpp - the Threefry-2x32 block cipher (20 rounds, Salmon et al. 2011), as
// jax.random's default generator uses it: a counter-based hash of (key, count) pairs, so random
// numbers are pure integer arithmetic over counters and a program can draw them anywhere.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tidu/kernels/fastmath.hpp"
#include "tidu/vm/parallel.hpp"

namespace tidu {
namespace kern {

namespace threefry_detail {

TIDU_FM_INLINE constexpr std::uint32_t rotl(std::uint32_t v, int r) { return (v << r) | (v >> (32 - r)); }

// Four rounds with rotations R0..R3, then the key injection number `inj`.
template <int R0, int R1, int R2, int R3>
TIDU_FM_INLINE void rounds(std::uint32_t& x0, std::uint32_t& x1) {
  x0 += x1; x1 = rotl(x1, R0); x1 ^= x0;
  x0 += x1; x1 = rotl(x1, R1); x1 ^= x0;
  x0 += x1; x1 = rotl(x1, R2); x1 ^= x0;
  x0 += x1; x1 = rotl(x1, R3); x1 ^= x0;
}

}  // namespace threefry_detail

// Threefry-2x32 of n counts (pairs x[2i], x[2i+1]) under one key (k0, k1) into y (pairs); y may
// be x.  Works in blocks of 64 pairs held in separate lanes so the compiler vectorises the rounds.
TIDU_FM_INLINE void threefry2x32_body(std::uint32_t k0, std::uint32_t k1, const std::uint32_t* x,
                                      std::uint32_t* y, std::int64_t n) {
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

inline void threefry2x32(std::uint32_t k0, std::uint32_t k1, const std::uint32_t* x, std::uint32_t* y,
                         std::int64_t n) {
  threefry2x32_body(k0, k1, x, y, n);
}

// Threefry-2x32 of the counters i = start .. start + n - 1 as pairs (i >> 32, i & 0xffffffff),
// with no count array: jax's counters for a draw of n values (its iota_2x32_shape).
// With `fold`, y gets y0 ^ y1, one word a value (jax's 32-bit random bits).
TIDU_FM_INLINE void threefry2x32_iota_loop(std::uint32_t k0, std::uint32_t k1, std::uint64_t start, std::uint32_t* y,
                              std::int64_t n, bool fold = false) {
  constexpr std::int64_t B = 64;
  std::uint32_t c[2 * B];
  for (std::int64_t lo = 0; lo < n; lo += B) {
    const std::int64_t m = n - lo < B ? n - lo : B;
    for (std::int64_t j = 0; j < m; ++j) {
      const std::uint64_t i = start + static_cast<std::uint64_t>(lo + j);
      c[2 * j] = static_cast<std::uint32_t>(i >> 32);
      c[2 * j + 1] = static_cast<std::uint32_t>(i);
    }
    if (fold) {
      threefry2x32_body(k0, k1, c, c, m);
      for (std::int64_t j = 0; j < m; ++j) y[lo + j] = c[2 * j] ^ c[2 * j + 1];
    } else {
      threefry2x32_body(k0, k1, c, y + 2 * lo, m);
    }
  }
}

#if TIDU_FM_DISPATCH
// The same loop compiled for AVX2 (8 lanes) and AVX-512 (16 lanes, native rotates): the module's
// baseline build has 4 (integer arithmetic: every variant gives the same bits).
TIDU_FM_TARGET_AVX2 inline void threefry2x32_iota_avx2(std::uint32_t k0, std::uint32_t k1, std::uint64_t start,
                                                        std::uint32_t* y, std::int64_t n, bool fold) {
  threefry2x32_iota_loop(k0, k1, start, y, n, fold);
}
TIDU_FM_TARGET_AVX512 inline void threefry2x32_iota_avx512(std::uint32_t k0, std::uint32_t k1, std::uint64_t start,
                                                            std::uint32_t* y, std::int64_t n, bool fold) {
  threefry2x32_iota_loop(k0, k1, start, y, n, fold);
}
#endif

inline void threefry2x32_iota(std::uint32_t k0, std::uint32_t k1, std::uint64_t start, std::uint32_t* y,
                              std::int64_t n, bool fold = false) {
#if TIDU_FM_DISPATCH
  switch (fm::isa()) {
    case fm::Isa::Avx512: return threefry2x32_iota_avx512(k0, k1, start, y, n, fold);
    case fm::Isa::Avx2: return threefry2x32_iota_avx2(k0, k1, start, y, n, fold);
    default: break;
  }
#endif
  threefry2x32_iota_loop(k0, k1, start, y, n, fold);
}

// The Threefry2x32 instruction: key (..., 2) and count (..., C..., 2) with the key's leading axes
// first; each of the `groups` keys hashes its `per` count pairs.
inline void run_threefry(const std::uint32_t* key, const std::uint32_t* count, std::uint32_t* y,
                         std::int64_t groups, std::int64_t per) {
  for (std::int64_t g = 0; g < groups; ++g)
    threefry2x32(key[2 * g], key[2 * g + 1], count + 2 * g * per, y + 2 * g * per, per);
}

// The Threefry2x32Iota instruction: key (..., 2) -> (..., S..., 2), `per` = prod(S) values a key.
// With `fold`, the output is (K..., S...), y0 ^ y1.  With `start` (one per key), key g's counters
// run from start[g] (as 64-bit counts) instead of 0.
inline void run_threefry_iota(const std::uint32_t* key, std::uint32_t* y, std::int64_t groups, std::int64_t per,
                              bool fold, const std::uint32_t* start = nullptr) {
  auto base = [start](std::int64_t g) { return start ? static_cast<std::uint64_t>(start[g]) : std::uint64_t{0}; };
  const std::int64_t w = fold ? 1 : 2;
  // a large draw is cut into ranges of counters hashed on the pool's threads (same bits)
  constexpr std::int64_t kPiece = std::int64_t{1} << 16;
  const int threads = ::tidu::num_threads();
  if (threads > 1 && groups * per >= 4 * kPiece) {
    const std::int64_t pieces = (per + kPiece - 1) / kPiece;
    ::tidu::detail::parallel_chunks(groups * pieces, threads, [&](std::int64_t c, int) {
      const std::int64_t g = c / pieces, lo = c % pieces * kPiece, m = std::min(kPiece, per - lo);
      threefry2x32_iota(key[2 * g], key[2 * g + 1], base(g) + static_cast<std::uint64_t>(lo),
                        y + w * (g * per + lo), m, fold);
    });
    return;
  }
  for (std::int64_t g = 0; g < groups; ++g)
    threefry2x32_iota(key[2 * g], key[2 * g + 1], base(g), y + w * g * per, per, fold);
}

}  // namespace kern
}  // namespace tidu
