// tidu/kernels/math.hpp - kernels of the elementwise math primitives beyond tier 1 (pkg/tidu/ops/math.py):
// rounding, inverse and hyperbolic trigonometry, the error function and its inverse, cube root,
// the logistic function, is_finite, C's fmod (Rem, integers too), atan2, and integer division.
//
// Each float dtype is computed in its own precision (float in float, through the C library's
// float overloads); complex operands take std::complex's functions (C99 branch cuts, as numpy's).
// Integer division and remainder are defined everywhere, as XLA defines them: x / 0 == -1,
// x % 0 == x, INT_MIN / -1 == INT_MIN, INT_MIN % -1 == 0 (C++ leaves those undefined).
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tidu/vm/opcodes.hpp"

namespace tidu {
namespace kern {

namespace math_detail {
template <class T> struct cplx : std::false_type {};
template <class T> struct cplx<std::complex<T>> : std::true_type {};
template <class T> inline constexpr bool is_cplx = cplx<T>::value;
template <class T> inline constexpr bool is_flt = std::is_floating_point_v<T>;
template <class T> inline constexpr bool is_integer = std::is_integral_v<T> && !std::is_same_v<T, bool>;
}  // namespace math_detail

// ---- scalar functions (also the all-scalar fast path's, scalar.hpp) ----

// The inverse error function: M. Giles' single-precision approximation ("Approximating the erfinv
// function", GPU Gems 2010; the one XLA uses for float); for double, refined by Newton's
// steps on erf (on log erfc where |y| > 0.5, whose 1 - |y| is exact) to full precision.
template <class T>
inline T erfinv(T y) {
  if (!(y > T(-1) && y < T(1))) {  // NaN, |y| >= 1
    if (y == T(1)) return std::numeric_limits<T>::infinity();
    if (y == T(-1)) return -std::numeric_limits<T>::infinity();
    return std::numeric_limits<T>::quiet_NaN();
  }
  // The polynomials in T: for double, w reaches ~37 (1 - |y| near 1e-16), past float's range,
  // and the tail polynomial's extrapolation is a good enough start for Newton's steps.
  T w = -std::log((T(1) - y) * (T(1) + y)), p;
  if (w < T(5)) {
    w -= T(2.5);
    p = T(2.81022636e-08f);
    p = T(3.43273939e-07f) + p * w;
    p = T(-3.5233877e-06f) + p * w;
    p = T(-4.39150654e-06f) + p * w;
    p = T(0.00021858087f) + p * w;
    p = T(-0.00125372503f) + p * w;
    p = T(-0.00417768164f) + p * w;
    p = T(0.246640727f) + p * w;
    p = T(1.50140941f) + p * w;
  } else {
    w = std::sqrt(w) - T(3);
    p = T(-0.000200214257f);
    p = T(0.000100950558f) + p * w;
    p = T(0.00134934322f) + p * w;
    p = T(-0.00367342844f) + p * w;
    p = T(0.00573950773f) + p * w;
    p = T(-0.0076224613f) + p * w;
    p = T(0.00943887047f) + p * w;
    p = T(1.00167406f) + p * w;
    p = T(2.83297682f) + p * w;
  }
  if constexpr (std::is_same_v<T, float>) {
    return p * y;
  } else {
    double x = p * y;
    if (!std::isfinite(x)) return x;
    const double k = 1.1283791670955126;  // 2 / sqrt(pi)
    const double a = std::fabs(y);
    if (a <= 0.5) {  // Newton on erf(x) = y
      for (int it = 0; it < 4; ++it) {
        const double step = (std::erf(x) - y) / (k * std::exp(-x * x));
        x -= step;
        if (std::fabs(step) <= 1e-17 * std::fabs(x)) break;
      }
      return x;
    }
    // Newton on log erfc(x) = log(1 - |y|) (1 - |y| exact): nearly linear in the tail, where
    // erf's own Newton step overshoots.
    const double lq = std::log(1.0 - a);
    x = std::fabs(x);
    for (int it = 0; it < 6; ++it) {
      const double e = std::erfc(x);
      const double step = (std::log(e) - lq) * e / (-k * std::exp(-x * x));
      x -= step;
      if (std::fabs(step) <= 1e-16 * x) break;
    }
    return y < 0 ? -x : x;
  }
}

// 1 / (1 + exp(-x)), without overflow for either sign of x.
template <class T>
inline T logistic(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

// ---- array kernels ----

// Unary maps of the math primitives; false when op/T is not one of them.
template <class T>
inline bool math_unary(Op op, const T* x, T* y, std::int64_t n) {
  using namespace math_detail;
  if constexpr (is_flt<T>) {
    switch (op) {
      case Op::Floor: for (std::int64_t i = 0; i < n; ++i) y[i] = std::floor(x[i]); return true;
      case Op::Ceil: for (std::int64_t i = 0; i < n; ++i) y[i] = std::ceil(x[i]); return true;
      // half to even, as numpy's round and XLA's round_nearest_even (the default rounding mode)
      case Op::Round: for (std::int64_t i = 0; i < n; ++i) y[i] = std::nearbyint(x[i]); return true;
      case Op::Erf: for (std::int64_t i = 0; i < n; ++i) y[i] = std::erf(x[i]); return true;
      case Op::Erfc: for (std::int64_t i = 0; i < n; ++i) y[i] = std::erfc(x[i]); return true;
      case Op::ErfInv: for (std::int64_t i = 0; i < n; ++i) y[i] = erfinv(x[i]); return true;
      case Op::Cbrt: for (std::int64_t i = 0; i < n; ++i) y[i] = std::cbrt(x[i]); return true;
      case Op::Logistic: for (std::int64_t i = 0; i < n; ++i) y[i] = logistic(x[i]); return true;
      default: break;
    }
  }
  if constexpr (is_flt<T> || is_cplx<T>) {
    using std::tan, std::atan, std::asin, std::acos, std::sinh, std::cosh, std::asinh, std::acosh,
        std::atanh;
    switch (op) {
      case Op::Tan: for (std::int64_t i = 0; i < n; ++i) y[i] = tan(x[i]); return true;
      case Op::Atan: for (std::int64_t i = 0; i < n; ++i) y[i] = atan(x[i]); return true;
      case Op::Asin: for (std::int64_t i = 0; i < n; ++i) y[i] = asin(x[i]); return true;
      case Op::Acos: for (std::int64_t i = 0; i < n; ++i) y[i] = acos(x[i]); return true;
      case Op::Sinh: for (std::int64_t i = 0; i < n; ++i) y[i] = sinh(x[i]); return true;
      case Op::Cosh: for (std::int64_t i = 0; i < n; ++i) y[i] = cosh(x[i]); return true;
      case Op::Asinh: for (std::int64_t i = 0; i < n; ++i) y[i] = asinh(x[i]); return true;
      case Op::Acosh: for (std::int64_t i = 0; i < n; ++i) y[i] = acosh(x[i]); return true;
      case Op::Atanh: for (std::int64_t i = 0; i < n; ++i) y[i] = atanh(x[i]); return true;
      default: break;
    }
  }
  return false;
}

// One element of integer division / remainder, defined for every operand pair (see the top).
template <class T>
inline T int_div(T a, T b) {
  if (b == T(0)) return T(-1);  // all ones, as XLA (the largest value of an unsigned T)
  if (std::is_signed_v<T> && b == T(-1)) return static_cast<T>(static_cast<std::make_unsigned_t<T>>(0) -
                                        static_cast<std::make_unsigned_t<T>>(a));  // wraps INT_MIN
  return a / b;
}
template <class T>
inline T int_rem(T a, T b) {
  if (b == T(0)) return a;
  if (std::is_signed_v<T> && b == T(-1)) return T(0);
  return a % b;
}

// Binary maps of the math primitives (and integer Div); false when op/T is not one of them.
template <class T>
inline bool math_binary(Op op, const T* a, const T* b, T* y, std::int64_t n) {
  using namespace math_detail;
  if constexpr (is_integer<T>) {
    switch (op) {
      case Op::Div: for (std::int64_t i = 0; i < n; ++i) y[i] = int_div(a[i], b[i]); return true;
      case Op::Rem: for (std::int64_t i = 0; i < n; ++i) y[i] = int_rem(a[i], b[i]); return true;
      default: break;
    }
  }
  if constexpr (is_flt<T>) {
    switch (op) {
      case Op::Rem: for (std::int64_t i = 0; i < n; ++i) y[i] = std::fmod(a[i], b[i]); return true;
      case Op::Atan2: for (std::int64_t i = 0; i < n; ++i) y[i] = std::atan2(a[i], b[i]); return true;
      default: break;
    }
  }
  return false;
}

// isfinite(x) into a bool array; false when T is not a float.
template <class T>
inline bool is_finite(const T* x, bool* y, std::int64_t n) {
  if constexpr (math_detail::is_flt<T>) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = std::isfinite(x[i]);
    return true;
  } else {
    (void)x, (void)y, (void)n;
    return false;
  }
}

}  // namespace kern
}  // namespace tidu
