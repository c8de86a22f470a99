// tidu/vm/checked.hpp - integer arithmetic that cannot overflow silently.
//
// Every size, offset and count that comes from outside (a program file, Python arrays) is
// combined through these helpers, never with plain + and *: a wrapped sum is how a forged file
// would pass validation with an output size that the kernel then writes past.
#pragma once

#include <cstdint>
#include <limits>

namespace tidu {
namespace checked {

// Largest element count of one array (2^48: its bytes, at 16 per element, fit in 2^52).
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 48;
// Largest arena (and largest total of any sizes summed for a plan): 2^56 bytes.
inline constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 56;

// r = a + b; false (r unspecified) when the sum overflows T.
template <class T>
inline bool add(T a, T b, T& r) {
#if defined(__GNUC__) || defined(__clang__)
  return !__builtin_add_overflow(a, b, &r);
#else
  if constexpr (std::numeric_limits<T>::is_signed) {
    if ((b > 0 && a > std::numeric_limits<T>::max() - b) || (b < 0 && a < std::numeric_limits<T>::min() - b))
      return false;
  } else if (a > std::numeric_limits<T>::max() - b) {
    return false;
  }
  r = a + b;
  return true;
#endif
}

// r = a * b; false (r unspecified) when the product overflows T.
template <class T>
inline bool mul(T a, T b, T& r) {
#if defined(__GNUC__) || defined(__clang__)
  return !__builtin_mul_overflow(a, b, &r);
#else
  static_assert(std::numeric_limits<T>::is_integer, "integers only");
  if (a == 0 || b == 0) {
    r = 0;
    return true;
  }
  if constexpr (std::numeric_limits<T>::is_signed) {
    if (a == -1) { if (b == std::numeric_limits<T>::min()) return false; r = -b; return true; }
    if (b == -1) { if (a == std::numeric_limits<T>::min()) return false; r = -a; return true; }
    T q = std::numeric_limits<T>::max() / b;
    if ((a > 0 && b > 0 && a > q) || (a < 0 && b < 0 && a < q)) return false;
    T m = std::numeric_limits<T>::min() / b;
    if ((a > 0 && b < 0 && a > m) || (a < 0 && b > 0 && a < m)) return false;
  } else if (a > std::numeric_limits<T>::max() / b) {
    return false;
  }
  r = a * b;
  return true;
#endif
}

// The element count of a shape, or -1 when a dimension is negative or the product of its
// non-zero dimensions exceeds kMaxElements (so that no stride, a product of trailing
// dimensions, can overflow even in an empty array).
inline std::int64_t elements(const std::int64_t* shape, std::uint32_t ndim) {
  std::int64_t nonzero = 1;
  bool empty = false;
  for (std::uint32_t k = 0; k < ndim; ++k) {
    if (shape[k] < 0) return -1;
    if (shape[k] == 0) {
      empty = true;
      continue;
    }
    if (!mul(nonzero, shape[k], nonzero) || nonzero > kMaxElements) return -1;
  }
  return empty ? 0 : nonzero;
}

}  // namespace checked
}  // namespace tidu
