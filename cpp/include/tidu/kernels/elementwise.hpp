// tidu/kernels/elementwise.hpp - kernels templated on element type: elementwise maps, strided gather/scatter
// (broadcast, transpose, slice, pad, concatenate), reductions, dot_general, converts.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "tidu/kernels/fastmath.hpp"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include "tidu/kernels/math.hpp"
#include "tidu/vm/dtype.hpp"
#include "tidu/vm/opcodes.hpp"
#include "tidu/vm/parallel.hpp"

namespace tidu {
namespace kern {

template <class T> struct is_complex : std::false_type {};
template <class T> struct is_complex<std::complex<T>> : std::true_type {};
template <class T> inline constexpr bool is_complex_v = is_complex<T>::value;
template <class T> inline constexpr bool is_float_v = std::is_floating_point_v<T>;
template <class T> inline constexpr bool is_inexact_v = is_float_v<T> || is_complex_v<T>;
template <class T> inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Integer negation, sum, difference and product wrap modulo 2^bits, as numpy's do (signed
// overflow is undefined in C++, so they go through the unsigned type).
template <class T> inline T wrap_neg(T a) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U(0) - static_cast<U>(a));
}
template <class T> inline T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <class T> inline T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <class T> inline T wrap_mul(T a, T b) {
  using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

[[noreturn]] inline void unsupported(Op op, DType d) {
  throw std::runtime_error(std::string("tidu: ") + op_name(op) + " has no kernel for " + dtype_name(d));
}

// f(T{}) for the float and complex dtypes (linalg.hpp, factor.hpp); unsupported(op, d) otherwise.
template <class F>
inline void visit_inexact(Op op, DType d, F&& f) {
  visit_dtype_in<InexactTypes>(d, f, [&] { unsupported(op, d); });
}

// ---- elementwise ----

template <class T>
inline bool unary(Op op, const T* x, T* y, std::int64_t n) {
  if (op == Op::Not) {  // bitwise not of integers, logical not of bools
    if constexpr (is_int_v<T>) { for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(~x[i]); return true; }
    else if constexpr (std::is_same_v<T, bool>) { for (std::int64_t i = 0; i < n; ++i) y[i] = !x[i]; return true; }
    else return false;
  }
  if constexpr (is_float_v<T>) {  // polynomial kernels (fastmath.hpp), the C library out of range
    switch (op) {
      case Op::Exp: fm::map<fm::Fn::Exp>(x, y, n); return true;
      case Op::Log: fm::map<fm::Fn::Log>(x, y, n); return true;
      case Op::Sin: fm::map<fm::Fn::Sin>(x, y, n); return true;
      case Op::Cos: fm::map<fm::Fn::Cos>(x, y, n); return true;
      case Op::Tanh: fm::map<fm::Fn::Tanh>(x, y, n); return true;
      case Op::Expm1: fm::map<fm::Fn::Expm1>(x, y, n); return true;
      case Op::Log1p: fm::map<fm::Fn::Log1p>(x, y, n); return true;
      case Op::Sqrt: fm::sqrt_map<false>(x, y, n); return true;
      case Op::Rsqrt: fm::sqrt_map<true>(x, y, n); return true;
      default: break;
    }
  }
  if constexpr (is_inexact_v<T>) {
    using std::cos, std::exp, std::log, std::sin, std::sqrt, std::tanh;
    switch (op) {
      case Op::Exp: for (std::int64_t i = 0; i < n; ++i) y[i] = exp(x[i]); return true;
      case Op::Log: for (std::int64_t i = 0; i < n; ++i) y[i] = log(x[i]); return true;
      case Op::Sin: for (std::int64_t i = 0; i < n; ++i) y[i] = sin(x[i]); return true;
      case Op::Cos: for (std::int64_t i = 0; i < n; ++i) y[i] = cos(x[i]); return true;
      case Op::Tanh: for (std::int64_t i = 0; i < n; ++i) y[i] = tanh(x[i]); return true;
      case Op::Sqrt: for (std::int64_t i = 0; i < n; ++i) y[i] = sqrt(x[i]); return true;
      case Op::Rsqrt: for (std::int64_t i = 0; i < n; ++i) y[i] = T(1) / sqrt(x[i]); return true;
      case Op::Expm1:
        if constexpr (is_float_v<T>) { for (std::int64_t i = 0; i < n; ++i) y[i] = std::expm1(x[i]); }
        else { for (std::int64_t i = 0; i < n; ++i) y[i] = exp(x[i]) - T(1); }
        return true;
      case Op::Log1p:
        if constexpr (is_float_v<T>) { for (std::int64_t i = 0; i < n; ++i) y[i] = std::log1p(x[i]); }
        else { for (std::int64_t i = 0; i < n; ++i) y[i] = log(T(1) + x[i]); }
        return true;
      case Op::Conj:
        if constexpr (is_complex_v<T>) { for (std::int64_t i = 0; i < n; ++i) y[i] = std::conj(x[i]); }
        else if (n) { std::memcpy(y, x, n * sizeof(T)); }
        return true;
      default: break;
    }
  }
  if constexpr (!std::is_same_v<T, bool>) {
    switch (op) {
      case Op::Neg:
        if constexpr (is_int_v<T>) { for (std::int64_t i = 0; i < n; ++i) y[i] = wrap_neg(x[i]); }
        else { for (std::int64_t i = 0; i < n; ++i) y[i] = -x[i]; }
        return true;
      case Op::Sign:  // NaN stays NaN, as numpy's and jax's
        if constexpr (is_complex_v<T>) {
          for (std::int64_t i = 0; i < n; ++i) { auto m = std::abs(x[i]); y[i] = m == 0 ? T(0) : x[i] / m; }
        } else {
          for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] != x[i] ? x[i] : T((x[i] > T(0)) - (x[i] < T(0)));
        }
        return true;
      default: break;
    }
  }
  if (op == Op::StopGradient) { if (n) std::memcpy(y, x, n * sizeof(T)); return true; }
  return math_unary<T>(op, x, y, n);  // math.hpp
}

// One element of a binary op whose opcode is known at compile time (the interpreter's
// per-instruction handlers, and Max/Min below); Max/Min propagate NaN, as numpy's.
template <Op OP, class T>
inline T binary_op(T x, T y) {
  if constexpr (OP == Op::Add) return x + y;
  else if constexpr (OP == Op::Sub) return x - y;
  else if constexpr (OP == Op::Mul) return x * y;
  else if constexpr (OP == Op::Div) return x / y;
  else if constexpr (OP == Op::Max) return (x != x || x > y) ? x : y;
  else return (x != x || x < y) ? x : y;
}

// The bitwise ops (bitwise_binary below, and Not).
inline bool is_bitwise(Op op) {
  return op == Op::And || op == Op::Or || op == Op::Xor || op == Op::Not || op == Op::ShiftLeft ||
         op == Op::ShiftRightArithmetic || op == Op::ShiftRightLogical;
}

// The three shifts, branch-free so that they vectorise (a shift amount per element: vpsllvq,
// vpsrlvq, vpsravq in the AVX2 and AVX-512 variants, GCC building AVX2's missing 64-bit
// arithmetic shift from logical ones; the baseline's SSE2 has no per-lane shift and stays
// scalar).  An amount outside [0, bits) is a huge unsigned s: the mask gives 0, the clamp the
// sign.
template <class T>
inline void shift_loop(Op op, const T* a, const T* b, T* y, std::int64_t n) {
  using U = std::make_unsigned_t<T>;
  constexpr U bits = static_cast<U>(8 * sizeof(T));
  switch (op) {
    case Op::ShiftLeft:
      for (std::int64_t i = 0; i < n; ++i) {
        const U s = static_cast<U>(b[i]);
        const U keep = static_cast<U>(U(0) - static_cast<U>(s < bits));
        y[i] = static_cast<T>(static_cast<U>(static_cast<U>(a[i]) << (s & (bits - 1))) & keep);
      }
      return;
    case Op::ShiftRightLogical:
      for (std::int64_t i = 0; i < n; ++i) {
        const U s = static_cast<U>(b[i]);
        const U keep = static_cast<U>(U(0) - static_cast<U>(s < bits));
        y[i] = static_cast<T>(static_cast<U>(static_cast<U>(a[i]) >> (s & (bits - 1))) & keep);
      }
      return;
    default: {  // ShiftRightArithmetic (an unsigned T shifts its bits as signed, as XLA's)
      using S = std::make_signed_t<T>;  // >> of a negative signed value is arithmetic (C++20)
      for (std::int64_t i = 0; i < n; ++i) {
        const U s0 = static_cast<U>(b[i]);
        const U s = s0 < bits ? s0 : static_cast<U>(bits - 1);
        y[i] = static_cast<T>(static_cast<S>(a[i]) >> s);
      }
      return;
    }
  }
}
#if TIDU_FM_DISPATCH
template <class T>
TIDU_FM_CLONE_AVX2 inline void shift_avx2(Op op, const T* a, const T* b, T* y, std::int64_t n) {
  shift_loop<T>(op, a, b, y, n);
}
template <class T>
TIDU_FM_CLONE_AVX512 inline void shift_avx512(Op op, const T* a, const T* b, T* y, std::int64_t n) {
  shift_loop<T>(op, a, b, y, n);
}
#endif

template <class T>
inline bool plain_binary(Op op, const T* a, const T* b, T* y, std::int64_t n);

// Bitwise and, or, xor, not of integers and bools (and, or, xor in plain_binary's loops, compiled
// per instruction set: the baseline's were 16 bytes wide); shifts of integers as XLA defines them
// (and jax): a shift by a negative amount or by the bit width or more gives 0 (left, logical
// right) or the sign (arithmetic right), never C++'s undefined behaviour.
template <class T>
inline bool bitwise_binary(Op op, const T* a, const T* b, T* y, std::int64_t n) {
  if constexpr (is_int_v<T> || std::is_same_v<T, bool>) {
    if (op == Op::And || op == Op::Or || op == Op::Xor) return plain_binary<T>(op, a, b, y, n);
  }
  if constexpr (is_int_v<T>) {
    if (op != Op::ShiftLeft && op != Op::ShiftRightLogical && op != Op::ShiftRightArithmetic) return false;
#if TIDU_FM_DISPATCH
    switch (fm::isa()) {
      case fm::Isa::Avx512: shift_avx512<T>(op, a, b, y, n); return true;
      case fm::Isa::Avx2: shift_avx2<T>(op, a, b, y, n); return true;
      default: break;
    }
#endif
    shift_loop<T>(op, a, b, y, n);
    return true;
  }
  return false;
}

// Integer add, subtract, multiply (wrapping), bitwise and, or, xor (with bools) and the max/min of
// real values: plain loops, each
// compiled per instruction set below (the baseline's SSE2 has no 64-bit compare or multiply, and
// 16-byte vectors).  Exact operations: every variant gives the same bits.
template <class T>
inline bool plain_binary_loop(Op op, const T* a, const T* b, T* y, std::int64_t n) {
  if constexpr (is_int_v<T> || std::is_same_v<T, bool>) {
    switch (op) {
      case Op::And: for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] & b[i]; return true;
      case Op::Or: for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] | b[i]; return true;
      case Op::Xor: for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] ^ b[i]; return true;
      default: break;
    }
  }
  if constexpr (is_int_v<T>) {
    switch (op) {
      case Op::Add: for (std::int64_t i = 0; i < n; ++i) y[i] = wrap_add(a[i], b[i]); return true;
      case Op::Sub: for (std::int64_t i = 0; i < n; ++i) y[i] = wrap_sub(a[i], b[i]); return true;
      case Op::Mul: for (std::int64_t i = 0; i < n; ++i) y[i] = wrap_mul(a[i], b[i]); return true;
      default: break;
    }
  }
  if constexpr (!is_complex_v<T> && !std::is_same_v<T, bool>) {
    switch (op) {  // numpy's maximum/minimum propagate NaN
      case Op::Max: for (std::int64_t i = 0; i < n; ++i) y[i] = binary_op<Op::Max>(a[i], b[i]); return true;
      case Op::Min: for (std::int64_t i = 0; i < n; ++i) y[i] = binary_op<Op::Min>(a[i], b[i]); return true;
      default: break;
    }
  }
  return false;
}

// a < b and the other comparisons, into bytes.
template <class T>
inline bool compare_loop(Cmp c, const T* a, const T* b, bool* y, std::int64_t n) {
  switch (c) {
    case Cmp::EQ: for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] == b[i]; return true;
    case Cmp::NE: for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] != b[i]; return true;
    default: break;
  }
  if constexpr (!is_complex_v<T>) {
    switch (c) {
      case Cmp::LT: for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] < b[i]; return true;
      case Cmp::LE: for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] <= b[i]; return true;
      case Cmp::GT: for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] > b[i]; return true;
      case Cmp::GE: for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] >= b[i]; return true;
      default: break;
    }
  }
  return false;
}

#if TIDU_FM_DISPATCH
inline bool has_avx512bw() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bw") != 0;
  }();
  return yes;
}
#define TIDU_CLONE_AVX512BW __attribute__((flatten, target("avx512f,avx512dq,avx512vl,avx512bw,avx2")))
template <class T>
TIDU_FM_CLONE_AVX2 inline bool plain_binary_avx2(Op op, const T* a, const T* b, T* y, std::int64_t n) {
  return plain_binary_loop<T>(op, a, b, y, n);
}
template <class T>
TIDU_CLONE_AVX512BW inline bool plain_binary_avx512(Op op, const T* a, const T* b, T* y, std::int64_t n) {
  return plain_binary_loop<T>(op, a, b, y, n);
}
template <class T>
TIDU_FM_CLONE_AVX2 inline bool compare_avx2(Cmp c, const T* a, const T* b, bool* y, std::int64_t n) {
  return compare_loop<T>(c, a, b, y, n);
}
template <class T>
TIDU_CLONE_AVX512BW inline bool compare_avx512(Cmp c, const T* a, const T* b, bool* y, std::int64_t n) {
  return compare_loop<T>(c, a, b, y, n);
}
#endif

// The variant of a loop for the CPU's widest vectors (fastmath.hpp's isa(); AVX-512 with byte
// masks only where the CPU has AVX512BW, else AVX2).
enum class Width : int { Base, Avx2, Avx512 };
inline Width loop_width() {
#if TIDU_FM_DISPATCH
  switch (fm::isa()) {
    case fm::Isa::Avx512: return has_avx512bw() ? Width::Avx512 : Width::Avx2;
    case fm::Isa::Avx2: return Width::Avx2;
    default: break;
  }
#endif
  return Width::Base;
}

template <class T>
inline bool plain_binary(Op op, const T* a, const T* b, T* y, std::int64_t n) {
#if TIDU_FM_DISPATCH
  if constexpr (std::is_arithmetic_v<T>) {
    switch (loop_width()) {
      case Width::Avx512: return plain_binary_avx512<T>(op, a, b, y, n);
      case Width::Avx2: return plain_binary_avx2<T>(op, a, b, y, n);
      default: break;
    }
  }
#endif
  return plain_binary_loop<T>(op, a, b, y, n);
}

template <class T>
inline bool binary(Op op, const T* a, const T* b, T* y, std::int64_t n) {
  if (is_bitwise(op)) return bitwise_binary<T>(op, a, b, y, n);
  if (plain_binary<T>(op, a, b, y, n)) return true;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    switch (op) {  // fastmath.hpp: the CPU's widest vectors
      case Op::Add: fm::arith<fm::Arith::Add>(a, b, y, n); return true;
      case Op::Sub: fm::arith<fm::Arith::Sub>(a, b, y, n); return true;
      case Op::Mul: fm::arith<fm::Arith::Mul>(a, b, y, n); return true;
      case Op::Div: fm::arith<fm::Arith::Div>(a, b, y, n); return true;
      default: break;
    }
  }
  if constexpr (!std::is_same_v<T, bool>) {
    switch (op) {
      case Op::Add: for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i]; return true;
      case Op::Sub: for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] - b[i]; return true;
      case Op::Mul: for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i]; return true;
      default: break;
    }
  }
  if constexpr (is_inexact_v<T>) {
    switch (op) {
      case Op::Div: for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] / b[i]; return true;
      case Op::Pow: for (std::int64_t i = 0; i < n; ++i) y[i] = std::pow(a[i], b[i]); return true;
      default: break;
    }
  }
  return math_binary<T>(op, a, b, y, n);  // math.hpp: Rem, Atan2, integer Div
}

template <class T>
inline void compare(Cmp c, const T* a, const T* b, bool* y, std::int64_t n) {
  bool done = false;
#if TIDU_FM_DISPATCH
  if constexpr (std::is_arithmetic_v<T>) {
    switch (loop_width()) {
      case Width::Avx512: done = compare_avx512<T>(c, a, b, y, n); break;
      case Width::Avx2: done = compare_avx2<T>(c, a, b, y, n); break;
      default: done = compare_loop<T>(c, a, b, y, n); break;
    }
  } else {
    done = compare_loop<T>(c, a, b, y, n);
  }
#else
  done = compare_loop<T>(c, a, b, y, n);
#endif
  if (!done) throw std::runtime_error("tidu: bad compare direction for this dtype");
}

// r = c ? u : v elementwise. Both operands are loaded unconditionally and the mask read as bytes,
// so the loop if-converts to a vector blend (`c[i] ? u[i] : v[i]` may read only one operand, which
// the vectoriser must not speculate: the scalar loop ran at ~2 ns an element).
// 64-bit integers and complex values are blended with a mask (b ^ ((a ^ b) & -c)) instead:
// without AVX2 GCC does not vectorise their select, and it turns the scalar ternary -- and the mask formula, when it can see
// that c is 0 or 1 -- into a branch, which a random mask mispredicts half the time (5 ns an
// element for int64, e.g. the wrap of negative gather indices; 1 ns with the mask, whose 0/1 the
// empty asm hides from the optimiser).
// (Wide = true: the AVX2 and AVX-512 variants, whose 64-bit blends GCC vectorises from the plain
// form; the mask's barrier would keep them scalar too.)
template <class T, bool Wide = false>
inline void select_loop(const bool* c, const T* u, const T* v, T* r, std::int64_t n) {
  const auto* m = reinterpret_cast<const unsigned char*>(c);
  if constexpr (((std::is_integral_v<T> && sizeof(T) == 8) && !Wide) || is_complex_v<T>) {
    using U = std::uint64_t;  // complex values are blended as the 64-bit words of their bits
    constexpr std::size_t kWords = sizeof(T) / sizeof(U);
    static_assert(kWords * sizeof(U) == sizeof(T), "select: element size is not a multiple of 8");
    for (std::int64_t i = 0; i < n; ++i) {
      U k = m[i] != 0;
#if defined(__GNUC__)
      asm("" : "+r"(k));
#endif
      const U mask = U{0} - k;
      U a[kWords], b[kWords];
      std::memcpy(a, u + i, sizeof(T));
      std::memcpy(b, v + i, sizeof(T));
      for (std::size_t w = 0; w < kWords; ++w) a[w] = b[w] ^ ((a[w] ^ b[w]) & mask);
      std::memcpy(r + i, a, sizeof(T));
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      const T a = u[i], b = v[i];
      r[i] = m[i] != 0 ? a : b;
    }
  }
}

template <class T>
inline void fill_loop(T* r, T v, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) r[i] = v;
}

// The same loops compiled for wider vectors and picked at run time (fm::isa(): TIDU_SIMD
// overrides), as fastmath's: tidu's module is built for the baseline, whose 16-byte stores made a
// scalar broadcast's fill of a chain block and a select's blend 3x slower than AVX-512's (a
// block of 2,048 float32: 350 -> 100 ns, 356 -> 115 ns).  Moves and blends only: every variant
// gives the same bits.  The AVX-512 select needs AVX512BW (byte masks; without it GCC's blend
// was slower than the baseline's).
#if TIDU_FM_DISPATCH
template <class T>
TIDU_FM_TARGET_AVX2 inline void select_avx2(const bool* c, const T* u, const T* v, T* r, std::int64_t n) {
  select_loop<T, true>(c, u, v, r, n);
}
template <class T>
__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2"))) inline void select_avx512(
    const bool* c, const T* u, const T* v, T* r, std::int64_t n) {
  select_loop<T, true>(c, u, v, r, n);
}
template <class T>
TIDU_FM_TARGET_AVX2 inline void fill_avx2(T* r, T v, std::int64_t n) { fill_loop(r, v, n); }
template <class T>
TIDU_FM_TARGET_AVX512 inline void fill_avx512(T* r, T v, std::int64_t n) { fill_loop(r, v, n); }
#endif

// r = c ? u : v elementwise.
template <class T>
inline void select(const bool* c, const T* u, const T* v, T* r, std::int64_t n) {
#if TIDU_FM_DISPATCH
  if constexpr (std::is_arithmetic_v<T>) {
    switch (loop_width()) {
      case Width::Avx512: return select_avx512(c, u, v, r, n);
      case Width::Avx2: return select_avx2(c, u, v, r, n);
      default: break;
    }
  }
#endif
  select_loop(c, u, v, r, n);
}

// r[i] = v for i < n.
template <class T>
inline void fill(T* r, T v, std::int64_t n) {
#if TIDU_FM_DISPATCH
  if constexpr (std::is_arithmetic_v<T>) {
    switch (fm::isa()) {
      case fm::Isa::Avx512: return fill_avx512(r, v, n);
      case fm::Isa::Avx2: return fill_avx2(r, v, n);
      default: break;
    }
  }
#endif
  fill_loop(r, v, n);
}

// A float as integer type D: out of range is undefined in C++, so saturate, and NaN -> 0 (as
// XLA's conversion does). -min (a power of two) is exact in every float type; max may not be.
// An unsigned D saturates at 0 and 2^bits - 1 (its upper bound 2^bits, a power of two, is exact).
template <class D, class S>
inline D saturating_int(S v) {
  constexpr S lo = static_cast<S>(std::numeric_limits<D>::min());
  constexpr S hi = std::is_signed_v<D> ? -lo : S(2) * static_cast<S>(D(1) << (8 * sizeof(D) - 1));
  return v != v ? D(0)
         : v <= lo ? std::numeric_limits<D>::min()
         : v >= hi ? std::numeric_limits<D>::max()
                   : static_cast<D>(v);
}

template <class S, class D>
inline void convert_loop(const S* x, D* y, std::int64_t n) {
  if constexpr (std::is_same_v<S, bool> && !std::is_same_v<D, bool> && !is_complex_v<D>) {
    // A mask read as bytes (0 or 1): GCC loads a bool through a compare and branch, which kept
    // this loop scalar (1.3 ns an element for bool -> float32; a max gradient's tie count).
    const auto* b = reinterpret_cast<const unsigned char*>(x);
    for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<D>(b[i]);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if constexpr (is_complex_v<S> && is_complex_v<D>) {
      y[i] = D(x[i]);
    } else if constexpr (is_complex_v<S> && std::is_same_v<D, bool>) {
      y[i] = x[i] != S(0);
    } else if constexpr (is_complex_v<S> && is_int_v<D>) {
      // the real part, as jax's astype (the front end refuses it; a loaded file may hold it)
      y[i] = saturating_int<D>(x[i].real());
    } else if constexpr (is_complex_v<S>) {
      y[i] = static_cast<D>(x[i].real());  // unreachable from the front end (refused there)
    } else if constexpr (is_complex_v<D>) {
      y[i] = D(static_cast<typename D::value_type>(x[i]), 0);
    } else if constexpr (std::is_same_v<D, bool>) {
      y[i] = x[i] != S(0);
    } else if constexpr (is_float_v<S> && is_int_v<D>) {
      y[i] = saturating_int<D>(x[i]);
    } else {
      y[i] = static_cast<D>(x[i]);
    }
  }
}

#if TIDU_FM_DISPATCH
template <class S, class D>
TIDU_FM_CLONE_AVX2 inline void convert_avx2(const S* x, D* y, std::int64_t n) { convert_loop<S, D>(x, y, n); }
template <class S, class D>
TIDU_CLONE_AVX512BW inline void convert_avx512(const S* x, D* y, std::int64_t n) { convert_loop<S, D>(x, y, n); }
#endif

// Elementwise dtype conversion (XLA's: floats to integers saturate, NaN to 0), each real pair in
// the CPU's widest vectors (exact or correctly rounded conversions: the same bits on each).
template <class S, class D>
inline void convert(const S* x, D* y, std::int64_t n) {
#if TIDU_FM_DISPATCH
  if constexpr (std::is_arithmetic_v<S> && std::is_arithmetic_v<D>) {
    switch (loop_width()) {
      case Width::Avx512: return convert_avx512<S, D>(x, y, n);
      case Width::Avx2: return convert_avx2<S, D>(x, y, n);
      default: break;
    }
  }
#endif
  convert_loop<S, D>(x, y, n);
}

// ---- strided copies (all shapes row-major) ----

inline void row_major_strides(const std::int64_t* shape, std::uint32_t ndim, std::int64_t* strides) {
  std::int64_t s = 1;
  for (std::uint32_t k = ndim; k-- > 0;) {
    strides[k] = s;
    s *= shape[k];
  }
}

// Of one row t[0..n) of a window table (indices or offsets, increasing; -1 where padding or a
// hole): the valid entries as one run [lo, hi) of entries s >= 1 apart (ok), else ok is false.
// The windowed kernels (conv.hpp's reduce_window and scatter form, select_window.hpp) run a
// table row as one strided loop when it is ok.
struct StepRun {
  std::int64_t lo = 0, hi = 0, s = 1;
  bool ok = false;
};

inline StepRun step_run(const std::int64_t* t, std::int64_t n) {
  StepRun r;
  std::int64_t j = 0;
  while (j < n && t[j] < 0) ++j;
  r.lo = j;
  if (j + 1 < n && t[j + 1] > t[j]) r.s = t[j + 1] - t[j];
  while (j < n && t[j] >= 0 && t[j] == t[r.lo] + (j - r.lo) * r.s) ++j;
  r.hi = j;
  while (j < n && t[j] < 0) ++j;
  r.ok = j == n;
  return r;
}

// How many chunks a windowed kernel cuts its `rows` output rows into, each row `row_steps`
// window steps (outputs times window elements): one on one thread or below 2^17 steps in all (a
// loop on the pool costs more than it saves there), else chunks of about 2^15 steps, at most 8
// per thread.
inline std::int64_t window_chunks(std::int64_t rows, double row_steps) {
  const int threads = num_threads();
  if (threads <= 1 || static_cast<double>(rows) * row_steps < double(1 << 17)) return 1;
  return detail::chunk_count(rows, row_steps, double(1 << 15), 1, threads);
}

// A transpose's tile edge (elements): one cache line of the element per tile row for 8- and
// 16-byte elements (8 x 8 doubles, 4 x 4 complex128), so that a tile's rows, read and written
// at a power-of-two stride, all fit in one L1 set's ways; 4-byte elements take 32 x 32 tiles
// unless a stride is a multiple of 1 KB (a 512 or 1024 wide float32 matrix: 32 rows at that
// stride land on 8 or more lines of one set, which 12 ways cannot hold with the other side's),
// 8 x 8 then. One core, ms, old 32 x 32 vs this: float64 512 x 512 1.04 vs 0.28, 1024 x 1024
// 4.1 vs 1.3, 1000 x 1000 1.02 vs 0.85; complex128 512 x 512 0.97 vs 0.48; float32 512 x 512
// 0.21 vs 0.09, 1024 x 1024 1.03 vs 0.74, 1000 x 1000 0.48 (unchanged).
template <class T>
inline std::int64_t transpose_tile(std::int64_t sld, std::int64_t dld) {
  if constexpr (sizeof(T) >= 8) {
    return std::max<std::int64_t>(4, 64 / static_cast<std::int64_t>(sizeof(T)));
  } else if constexpr (sizeof(T) == 4) {
    const auto aliased = [](std::int64_t ld) { return (ld * 4) % 1024 == 0; };
    return aliased(sld) || aliased(dld) ? 8 : 32;
  } else {
    return 32;
  }
}

// A transpose's core: dst[i * dld + j] = src[i + j * sld] for i < rows, j < cols, in tiles of
// transpose_tile's edge B so that both the strided reads and the strided writes stay in cache.
template <class T>
inline void transpose_tiles(const T* src, std::int64_t sld, T* dst, std::int64_t dld, std::int64_t rows,
                            std::int64_t cols) {
  const std::int64_t B = transpose_tile<T>(sld, dld);
  for (std::int64_t i0 = 0; i0 < rows; i0 += B) {
    const std::int64_t i1 = std::min(rows, i0 + B);
    for (std::int64_t j0 = 0; j0 < cols; j0 += B) {
      const std::int64_t j1 = std::min(cols, j0 + B);
      std::int64_t jr = j0;  // the first column the scalar loop below does
#if defined(__SSE2__)
      // 4 x 4 blocks of 4-byte elements, 2 x 2 of 8-byte ones, through SSE registers (the bits
      // moved as they are): loads and stores of 16 bytes instead of scalar moves (a (4, 128,
      // 128) float32 transpose of the last two axes: 29 -> 13 us, one thread). The tile's last
      // rows and columns below a block go on below.
      if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
        constexpr std::int64_t K = sizeof(T) == 4 ? 4 : 2;
        const std::int64_t iK = i0 + (i1 - i0) / K * K, jK = j0 + (j1 - j0) / K * K;
        if (iK > i0) {
          for (std::int64_t j = j0; j < jK; j += K)
            for (std::int64_t i = i0; i < iK; i += K) {
              if constexpr (K == 4) {
                const float* s = reinterpret_cast<const float*>(src + i + j * sld);
                __m128 r0 = _mm_loadu_ps(s), r1 = _mm_loadu_ps(s + sld), r2 = _mm_loadu_ps(s + 2 * sld),
                       r3 = _mm_loadu_ps(s + 3 * sld);
                _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
                float* d = reinterpret_cast<float*>(dst + i * dld + j);
                _mm_storeu_ps(d, r0);
                _mm_storeu_ps(d + dld, r1);
                _mm_storeu_ps(d + 2 * dld, r2);
                _mm_storeu_ps(d + 3 * dld, r3);
              } else {
                const double* s = reinterpret_cast<const double*>(src + i + j * sld);
                const __m128d r0 = _mm_loadu_pd(s), r1 = _mm_loadu_pd(s + sld);
                double* d = reinterpret_cast<double*>(dst + i * dld + j);
                _mm_storeu_pd(d, _mm_unpacklo_pd(r0, r1));
                _mm_storeu_pd(d + dld, _mm_unpackhi_pd(r0, r1));
              }
            }
          for (std::int64_t j = j0; j < jK; ++j) {  // rows iK.. of the columns done above
            const T* s = src + j * sld;
            for (std::int64_t i = iK; i < i1; ++i) dst[i * dld + j] = s[i];
          }
          jr = jK;  // the columns left over: all rows, below
        }
      }
#endif
      for (std::int64_t j = jr; j < j1; ++j) {
        const T* s = src + j * sld;
        for (std::int64_t i = i0; i < i1; ++i) dst[i * dld + j] = s[i];
      }
    }
  }
}

// dst[odometer over shape, contiguous] = src[base + sum idx[k] * src_stride[k]] (elements)
template <class T>
inline void gather(const T* src, std::int64_t base, const std::int64_t* shape_in, const std::int64_t* stride_in,
                   std::uint32_t ndim_in, T* dst) {
  std::int64_t n = 1;
  for (std::uint32_t k = 0; k < ndim_in; ++k) n *= shape_in[k];
  if (n == 0) return;
  if (ndim_in == 0) { dst[0] = src[base]; return; }
  // Size-1 axes dropped and neighbours that step through the source as one axis merged: a
  // transpose that moves whole rows becomes a few long contiguous runs.
  std::int64_t shape[16], src_stride[16];
  std::uint32_t ndim = 0;
  for (std::uint32_t k = 0; k < ndim_in; ++k) {
    if (shape_in[k] == 1) continue;
    if (ndim > 0 && src_stride[ndim - 1] == stride_in[k] * shape_in[k]) {
      shape[ndim - 1] *= shape_in[k];
      src_stride[ndim - 1] = stride_in[k];
    } else {
      shape[ndim] = shape_in[k];
      src_stride[ndim++] = stride_in[k];
    }
  }
  if (ndim == 0) { dst[0] = src[base]; return; }
  // A real transpose (the last axis strided, another one contiguous in the source): tiles over
  // those two axes, the others walked outside.
  std::int64_t p = -1;
  if (src_stride[ndim - 1] > 1)
    for (std::uint32_t k = 0; k + 1 < ndim; ++k)
      if (src_stride[k] == 1) p = k;
  if (p >= 0 && shape[p] * shape[ndim - 1] >= 256) {
    std::int64_t dst_stride[16];
    row_major_strides(shape, ndim, dst_stride);
    std::int64_t oshape[16], osrc[16], odst[16];
    std::uint32_t no = 0;
    for (std::uint32_t k = 0; k + 1 < ndim; ++k)
      if (static_cast<std::int64_t>(k) != p) oshape[no] = shape[k], osrc[no] = src_stride[k], odst[no++] = dst_stride[k];
    // Units of work: (outer index, band of 64 rows of the transposed pair); a transpose of 2 MB
    // or more split over the pool (a 512 x 512 float64 one, 2 MB: 0.29 -> 0.25 ms on two
    // threads; the 1 MB float32 one was slower on two, 0.10 -> 0.14), each unit written by one
    // thread whatever the count.
    const std::int64_t rows = shape[p], cols = shape[ndim - 1], sld = src_stride[ndim - 1];
    constexpr std::int64_t kBand = 64;
    const std::int64_t bands = (rows + kBand - 1) / kBand, outer = n / (rows * cols);
    const std::int64_t units = outer * bands;
    const int threads = n * static_cast<std::int64_t>(sizeof(T)) >= (std::int64_t{1} << 21) ? num_threads() : 1;
    auto run = [&](std::int64_t u0, std::int64_t u1) {
      for (std::int64_t u = u0; u < u1; ++u) {
        std::int64_t o = u / bands, so = base, d = 0;
        for (std::int64_t k = static_cast<std::int64_t>(no) - 1; k >= 0; --k) {  // o's offsets
          const std::int64_t q = o % oshape[k];
          o /= oshape[k];
          so += q * osrc[k];
          d += q * odst[k];
        }
        const std::int64_t r0 = (u % bands) * kBand, r1 = std::min(rows, r0 + kBand);
        transpose_tiles(src + so + r0, sld, dst + d + r0 * dst_stride[p], dst_stride[p], r1 - r0, cols);
      }
    };
    if (threads <= 1 || units < 2) {
      run(0, units);
      return;
    }
    const std::int64_t chunks = std::min<std::int64_t>(units, 4 * static_cast<std::int64_t>(threads));
    detail::parallel_chunks(chunks, threads, [&](std::int64_t c, int) {
      run(units * c / chunks, units * (c + 1) / chunks);
    });
    return;
  }
  std::int64_t idx[16] = {0};
  std::int64_t off = base;
  std::int64_t inner = shape[ndim - 1], inner_stride = src_stride[ndim - 1];
  if (ndim >= 2 && inner < 16) {
    // Short rows (a (64, 1, 3) array broadcast to (64, 64, 3)): whole runs of the second-last
    // axis in one tight loop, the odometer stepped once per run, not once per row of 3.
    const std::int64_t rows = shape[ndim - 2], rs = src_stride[ndim - 2], run = rows * inner;
    for (std::int64_t i = 0; i < n; i += run) {
      const T* s = src + off;
      T* d = dst + i;
      auto rows_of = [&](auto len) {  // rows of 2-4: the length known to the compiler
        constexpr std::int64_t L = decltype(len)::value;
        for (std::int64_t q = 0; q < rows; ++q, s += rs, d += L)
          for (std::int64_t j = 0; j < L; ++j) d[j] = s[j];
      };
      if (inner_stride == 1 && inner == 3) {
        rows_of(std::integral_constant<std::int64_t, 3>{});
      } else if (inner_stride == 1 && inner == 2) {
        rows_of(std::integral_constant<std::int64_t, 2>{});
      } else if (inner_stride == 1 && inner == 4) {
        rows_of(std::integral_constant<std::int64_t, 4>{});
      } else if (inner_stride == 1) {
        for (std::int64_t q = 0; q < rows; ++q, s += rs, d += inner)
          for (std::int64_t j = 0; j < inner; ++j) d[j] = s[j];
      } else {
        for (std::int64_t q = 0; q < rows; ++q, s += rs, d += inner)
          for (std::int64_t j = 0; j < inner; ++j) d[j] = s[j * inner_stride];
      }
      for (std::int64_t k = static_cast<std::int64_t>(ndim) - 3; k >= 0; --k) {
        off += src_stride[k];
        if (++idx[k] < shape[k]) break;
        off -= src_stride[k] * shape[k];
        idx[k] = 0;
      }
    }
    return;
  }
  for (std::int64_t i = 0; i < n; i += inner) {
    const T* s = src + off;
    if (inner_stride == 1) {  // a contiguous run, or one value repeated (a broadcast axis)
      for (std::int64_t j = 0; j < inner; ++j) dst[i + j] = s[j];
    } else if (inner_stride == 0) {
      const T v = s[0];
      for (std::int64_t j = 0; j < inner; ++j) dst[i + j] = v;
    } else {
      for (std::int64_t j = 0; j < inner; ++j) dst[i + j] = s[j * inner_stride];
    }
    for (std::int64_t k = static_cast<std::int64_t>(ndim) - 2; k >= 0; --k) {
      off += src_stride[k];
      if (++idx[k] < shape[k]) break;
      off -= src_stride[k] * shape[k];
      idx[k] = 0;
    }
  }
}

// dst[base + sum idx[k] * dst_stride[k]] = (or += with Add) src[odometer over shape, contiguous]
template <class T, bool Add = false>
inline void scatter(const T* src, const std::int64_t* shape, T* dst, std::int64_t base,
                    const std::int64_t* dst_stride, std::uint32_t ndim) {
  std::int64_t n = 1;
  for (std::uint32_t k = 0; k < ndim; ++k) n *= shape[k];
  if (n == 0) return;
  if (ndim == 0) {
    if constexpr (Add) dst[base] += src[0];
    else dst[base] = src[0];
    return;
  }
  std::int64_t idx[16] = {0};
  std::int64_t off = base;
  std::int64_t inner = shape[ndim - 1], inner_stride = dst_stride[ndim - 1];
  for (std::int64_t i = 0; i < n; i += inner) {
    T* d = dst + off;
    if constexpr (Add) {
      for (std::int64_t j = 0; j < inner; ++j) d[j * inner_stride] += src[i + j];
    } else {
      for (std::int64_t j = 0; j < inner; ++j) d[j * inner_stride] = src[i + j];
    }
    for (std::int64_t k = static_cast<std::int64_t>(ndim) - 2; k >= 0; --k) {
      off += dst_stride[k];
      if (++idx[k] < shape[k]) break;
      off -= dst_stride[k] * shape[k];
      idx[k] = 0;
    }
  }
}

// ---- reductions ----

// What a reduction computes: a sum, a max or a min (ReduceSum, ReduceMax, ReduceMin).
enum class Red : std::uint8_t { Sum, Max, Min };

// Calls f with the kind as a compile-time constant (std::integral_constant<Red, ...>), so each
// loop below is compiled once per kind with accumulate's choice folded away.
template <class F>
inline void with_red(Red kind, F&& f) {
  switch (kind) {
    case Red::Max: f(std::integral_constant<Red, Red::Max>{}); return;
    case Red::Min: f(std::integral_constant<Red, Red::Min>{}); return;
    default: f(std::integral_constant<Red, Red::Sum>{}); return;
  }
}

// y (+)= x, y = max(y, x) or y = min(y, x), NaN-propagating as numpy's.
template <class T>
inline void accumulate(T& y, T x, Red kind) {
  if constexpr (!is_complex_v<T>) {
    if (kind == Red::Max) {
      y = (x > y) | (x != x) ? x : y;  // branch-free: vectorizes over the inner kept axis
      return;
    }
    if (kind == Red::Min) {
      y = (x < y) | (x != x) ? x : y;
      return;
    }
  }
  if constexpr (is_int_v<T>) y = wrap_add(y, x);
  else y += x;
}

// One contiguous row of a float reduction, in 16 interleaved lanes (independent accumulators the
// compiler keeps in vector registers) combined pairwise at the end of each 4,096-element chunk:
// a sum is no longer one chain of dependent adds, and its rounding error stays near a pairwise
// sum's.  Max is branch-free (so it vectorizes) and NaN-propagating as numpy's.
template <class T>
inline T row_sum(const T* x, std::int64_t n, T init) {
  constexpr int L = 16;
  constexpr std::int64_t kChunk = 4096;  // lanes restart per chunk: 256 sequential adds at most
  // chunk sums add up in double for float32 (exact enough that the chunks' own rounding dominates)
  std::conditional_t<std::is_same_v<T, float>, double, T> total = 0;
  for (std::int64_t start = 0; start < n; start += kChunk) {
    const T* c = x + start;
    const std::int64_t len = std::min(kChunk, n - start);
    T acc[L] = {};
    std::int64_t i = 0;
    for (; i + L <= len; i += L)
      for (int k = 0; k < L; ++k) acc[k] += c[i + k];
    for (int w = L / 2; w > 0; w /= 2)
      for (int k = 0; k < w; ++k) acc[k] += acc[k + w];
    for (; i < len; ++i) acc[0] += c[i];
    total += acc[0];
  }
  return init + static_cast<T>(total);
}

template <class T, bool MIN = false>
inline T row_extreme(const T* x, std::int64_t n, T init) {
  constexpr int L = 16;
  T m[L];
  for (int k = 0; k < L; ++k) m[k] = init;
  using U = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
  U nan = init != init;
  std::int64_t i = 0;
#if defined(__SSE2__)
  // The 16 lanes as SSE registers, NaN looked for in the same pass (GCC 12 does not vectorise
  // the loop below: 16 scalar maxss a step, then a second pass for NaN; 0.33 ns an element).
  // _mm_max_ps(a, b) is a > b ? a : b (_mm_min_ps: a < b), the loop's own expression, so the lanes
  // hold the same values.
  if constexpr (std::is_same_v<T, float>) {
    __m128 v[4], bad = _mm_setzero_ps();
    for (int q = 0; q < 4; ++q) v[q] = _mm_set1_ps(init);
    for (; i + L <= n; i += L)
      for (int q = 0; q < 4; ++q) {
        const __m128 a = _mm_loadu_ps(x + i + 4 * q);
        v[q] = MIN ? _mm_min_ps(a, v[q]) : _mm_max_ps(a, v[q]);
        bad = _mm_or_ps(bad, _mm_cmpunord_ps(a, a));
      }
    for (int q = 0; q < 4; ++q) _mm_storeu_ps(m + 4 * q, v[q]);
    nan |= _mm_movemask_ps(bad) != 0;
  } else if constexpr (std::is_same_v<T, double>) {
    __m128d v[8], bad = _mm_setzero_pd();
    for (int q = 0; q < 8; ++q) v[q] = _mm_set1_pd(init);
    for (; i + L <= n; i += L)
      for (int q = 0; q < 8; ++q) {
        const __m128d a = _mm_loadu_pd(x + i + 2 * q);
        v[q] = MIN ? _mm_min_pd(a, v[q]) : _mm_max_pd(a, v[q]);
        bad = _mm_or_pd(bad, _mm_cmpunord_pd(a, a));
      }
    for (int q = 0; q < 8; ++q) _mm_storeu_pd(m + 2 * q, v[q]);
    nan |= _mm_movemask_pd(bad) != 0;
  }
#endif
  const std::int64_t checked = i;  // [0, checked) looked at for NaN already
  // better(a, b): a replaces b (maxps / minps: a NaN a is skipped, found by the pass below)
  auto better = [](T a, T b) { return MIN ? a < b : a > b; };
  for (; i + L <= n; i += L)
    for (int k = 0; k < L; ++k) m[k] = better(x[i + k], m[k]) ? x[i + k] : m[k];
  for (; i < n; ++i) m[0] = better(x[i], m[0]) ? x[i] : m[0];
  T best = m[0];
  for (int k = 1; k < L; ++k) best = better(m[k], best) ? m[k] : best;
  // then a pass over the rest of the row (in cache) for NaN, in an integer as wide as T (vectorizes)
  for (i = checked; i < n; ++i) nan |= static_cast<U>(x[i] != x[i]);
  return nan ? std::numeric_limits<T>::quiet_NaN() : best;
}

// One contiguous row's sum, max or min, started from init.
template <class T>
inline T row_reduce(const T* x, std::int64_t n, T init, Red kind) {
  if (kind == Red::Max) return row_extreme<T, false>(x, n, init);
  if (kind == Red::Min) return row_extreme<T, true>(x, n, init);
  return row_sum(x, n, init);
}

// y[o, j] += sum_i x[o, i, j] over (outer, r, C) for rows of C = 2-4: groups of G outers keep
// their G * C sums in registers; each sum adds its rows in order.
template <class T, int C>
inline void short_kept_sum(const T* x, T* y, std::int64_t outer, std::int64_t r) {
  constexpr int G = 4;
  const std::int64_t step = r * C;
  std::int64_t o = 0;
  for (; o + G <= outer; o += G) {
    T acc[G][C];
    for (int q = 0; q < G; ++q)
      for (int j = 0; j < C; ++j) acc[q][j] = y[(o + q) * C + j];
    const T* xo = x + o * step;
    for (std::int64_t i = 0; i < r; ++i)
      for (int q = 0; q < G; ++q)
        for (int j = 0; j < C; ++j) acc[q][j] += xo[q * step + i * C + j];
    for (int q = 0; q < G; ++q)
      for (int j = 0; j < C; ++j) y[(o + q) * C + j] = acc[q][j];
  }
  for (; o < outer; ++o) {
    T acc[C];
    for (int j = 0; j < C; ++j) acc[j] = y[o * C + j];
    const T* xo = x + o * step;
    for (std::int64_t i = 0; i < r; ++i)
      for (int j = 0; j < C; ++j) acc[j] += xo[i * C + j];
    for (int j = 0; j < C; ++j) y[o * C + j] = acc[j];
  }
}

// The reduction as [outer kept] x [reduced] x [inner kept] over contiguous memory, when merging
// adjacent axes of one kind leaves at most that (the common cases: all axes, leading axes,
// trailing axes, one middle run): loops whose inner index is contiguous, no odometer per element.
// y holds the initial values.  False when the shape is not of that form.
template <class T>
inline bool reduce_blocked(const T* x, const std::int64_t* shape, std::uint32_t ndim, const bool* reduced,
                           T* y, Red kind) {
  std::int64_t size[3] = {1, 1, 1};  // outer kept, reduced, inner kept
  int part = 0;
  for (std::uint32_t k = 0; k < ndim; ++k) {
    if (shape[k] == 1) continue;  // a unit axis belongs to either side
    const int want = reduced[k] ? 1 : (part == 0 ? 0 : 2);
    if (want < part) return false;  // kept, reduced, kept, reduced...: the general loop
    part = want;
    size[part] *= shape[k];
  }
  const std::int64_t outer = size[0], r = size[1], inner = size[2];
  if (inner == 1 && r < 16) {  // short rows (e.g. the 3 coordinates of a (64, 64, 3) array): no
    // per-row call, one plain loop per output, its sum in a register; rows of 2-4 with the
    // length known to the compiler, which then vectorises across outputs.  Each output still
    // adds its row in order.
    auto rows = [&](auto len, auto K) {
      constexpr Red M = decltype(K)::value;
      const std::int64_t rl = len;
      for (std::int64_t o = 0; o < outer; ++o) {
        T acc = y[o];
        for (std::int64_t i = 0; i < rl; ++i) accumulate(acc, x[o * rl + i], M);
        y[o] = acc;
      }
    };
    with_red(kind, [&](auto K) {
      switch (r) {
        case 2: rows(std::integral_constant<std::int64_t, 2>{}, K); return;
        case 3: rows(std::integral_constant<std::int64_t, 3>{}, K); return;
        case 4: rows(std::integral_constant<std::int64_t, 4>{}, K); return;
        default: rows(r, K); return;
      }
    });
    return true;
  }
  if constexpr (is_float_v<T>) {
    if (inner > 1 && inner <= 4 && outer > 1 && kind == Red::Sum) {
      // Sums with kept rows of 2-4 (a force's sum over the middle axis of a (64, 64, 3) pair
      // array): the length known to the compiler and G outers' accumulators in registers, so
      // the G * inner independent sums run side by side without a store and reload per
      // element.  Each column still adds its rows in order.
      switch (inner) {
        case 2: short_kept_sum<T, 2>(x, y, outer, r); return true;
        case 3: short_kept_sum<T, 3>(x, y, outer, r); return true;
        default: short_kept_sum<T, 4>(x, y, outer, r); return true;
      }
    }
  }
  if (inner > 1 && inner < 16 && outer > 1) {
    // Short kept rows (a max, or rows of 5-15; sums of 2-4 run above): groups of outers walk the reduced rows together, so that an accumulator's
    // dependent adds sit g * inner operations apart instead of back to back (3.5x faster on
    // (64, 64, 3) along axis 1).  Each column still adds its rows in order.
    const std::int64_t G = std::max<std::int64_t>(1, 64 / inner);
    for (std::int64_t o0 = 0; o0 < outer; o0 += G) {
      const std::int64_t g = std::min(G, outer - o0);
      T* yo = y + o0 * inner;
      const T* xo = x + o0 * r * inner;
      const std::int64_t step = r * inner;
      with_red(kind, [&](auto K) {
        for (std::int64_t i = 0; i < r; ++i)
          for (std::int64_t q = 0; q < g; ++q)
            for (std::int64_t j = 0; j < inner; ++j) accumulate(yo[q * inner + j], xo[q * step + i * inner + j], K());
      });
    }
    return true;
  }
  if (inner > 1) {
    // Kept columns (e.g. a sum over the batch axis of per-example gradients): the rows streamed
    // in order into a block of up to 256 accumulators that stays in L1 and vectorises, not 16
    // columns at a time walking down rows a whole row apart (8x slower for max over (256, 32, 64)
    // along axis 1).  Each column still adds its rows in order.
    constexpr std::int64_t W = 256;
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t j0 = 0; j0 < inner; j0 += W) {
        const std::int64_t w = std::min(W, inner - j0);
        T* yo = y + o * inner + j0;
        const T* xo = x + o * r * inner + j0;
        with_red(kind, [&](auto K) {
          for (std::int64_t i = 0; i < r; ++i)
            for (std::int64_t j = 0; j < w; ++j) accumulate(yo[j], xo[i * inner + j], K());
        });
      }
    return true;
  }
  for (std::int64_t o = 0; o < outer; ++o) {  // one kept column: contiguous rows
    const T* xo = x + o * r;
    if constexpr (is_float_v<T>) {
      y[o] = row_reduce(xo, r, y[o], kind);
    } else {
      T acc = y[o];
      for (std::int64_t i = 0; i < r; ++i) accumulate(acc, xo[i], kind);
      y[o] = acc;
    }
  }
  return true;
}

// Any other pattern (e.g. a batch norm's per-channel sums over axes (0, 2, 3) of NCHW:
// reduced, kept, reduced): adjacent axes of one kind merged, an odometer over the rows of the last
// merged axis and a contiguous kernel per row (a reduced row into one output, a kept row added
// into a run of outputs), not an odometer step per element (30x slower on (16, 64, 1024)).
template <class T>
inline void reduce_rows(const T* x, const std::int64_t* shape, std::uint32_t ndim, const bool* reduced, T* y,
                        std::int64_t n, Red kind) {
  std::int64_t sz[16], ost[16], idx[16] = {0};
  bool red[16];
  int m = 0;
  for (std::uint32_t k = 0; k < ndim; ++k) {
    if (shape[k] == 1) continue;
    if (m > 0 && red[m - 1] == reduced[k]) {
      sz[m - 1] *= shape[k];
    } else {
      sz[m] = shape[k], red[m] = reduced[k];
      ++m;
    }
  }
  if (m == 0) {
    accumulate(y[0], x[0], kind);
    return;
  }
  for (std::int64_t k = m, s = 1; k-- > 0;) {
    ost[k] = red[k] ? 0 : s;
    if (!red[k]) s *= sz[k];
  }
  const std::int64_t len = sz[m - 1], rows = n / len;
  const bool last_reduced = red[m - 1];
  std::int64_t o = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * len;
    if (last_reduced) {
      if constexpr (is_float_v<T>) {
        if (len < 16) {  // short rows (a 2x2 pooling window's): row_reduce's values
          if (kind != Red::Sum) {  // without their 16 lanes
            T v = y[o];
            bool nan = v != v;
            for (std::int64_t j = 0; j < len; ++j) {
              nan |= xr[j] != xr[j];
              v = (kind == Red::Max ? xr[j] > v : xr[j] < v) ? xr[j] : v;
            }
            y[o] = nan ? std::numeric_limits<T>::quiet_NaN() : v;
          } else {
            T t = T(0);
            for (std::int64_t j = 0; j < len; ++j) t += xr[j];
            y[o] = y[o] + t;
          }
        } else {
          y[o] = row_reduce(xr, len, y[o], kind);
        }
      } else {
        T acc = y[o];
        for (std::int64_t j = 0; j < len; ++j) accumulate(acc, xr[j], kind);
        y[o] = acc;
      }
    } else {
      T* yr = y + o;
      with_red(kind, [&](auto K) {
        for (std::int64_t j = 0; j < len; ++j) accumulate(yr[j], xr[j], K());
      });
    }
    for (int k = m - 1; k-- > 0;) {
      o += ost[k];
      if (++idx[k] < sz[k]) break;
      o -= ost[k] * sz[k];
      idx[k] = 0;
    }
  }
}

// y[kept index] = the sum, max or min of x over `axes` (kind; Max and Min of real values only).
template <class T>
inline void reduce(const T* x, const std::int64_t* shape, std::uint32_t ndim, const std::int64_t* axes,
                   std::int64_t n_axes, T* y, std::int64_t n_out, Red kind) {
  bool reduced[16] = {false};
  for (std::int64_t a = 0; a < n_axes; ++a) reduced[axes[a]] = true;
  // Output stride of each input axis (0 along reduced axes).
  std::int64_t ostride[16], s = 1;
  for (std::uint32_t k = ndim; k-- > 0;) {
    ostride[k] = reduced[k] ? 0 : s;
    if (!reduced[k]) s *= shape[k];
  }
  std::int64_t n = 1;
  for (std::uint32_t k = 0; k < ndim; ++k) n *= shape[k];
  T init = T(0);
  if constexpr (!is_complex_v<T> && !std::is_same_v<T, bool>) {
    if constexpr (is_float_v<T>) {
      if (kind != Red::Sum) init = kind == Red::Max ? -std::numeric_limits<T>::infinity()
                                                    : std::numeric_limits<T>::infinity();
    } else {
      if (kind != Red::Sum) init = kind == Red::Max ? std::numeric_limits<T>::lowest()
                                                    : std::numeric_limits<T>::max();
    }
  }
  for (std::int64_t i = 0; i < n_out; ++i) y[i] = init;
  if (n == 0) return;
  if constexpr (!std::is_same_v<T, bool>) {
    if (reduce_blocked(x, shape, ndim, reduced, y, kind)) return;
    reduce_rows(x, shape, ndim, reduced, y, n, kind);
    return;
  }
  std::int64_t idx[16] = {0};
  std::int64_t o = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if constexpr (!std::is_same_v<T, bool>) accumulate(y[o], x[i], kind);
    for (std::int64_t k = static_cast<std::int64_t>(ndim) - 1; k >= 0; --k) {
      o += ostride[k];
      if (++idx[k] < shape[k]) break;
      o -= ostride[k] * shape[k];
      idx[k] = 0;
    }
  }
}

#if TIDU_FM_DISPATCH
template <class T>
TIDU_FM_CLONE_AVX2 inline void reduce_avx2(const T* x, const std::int64_t* shape, std::uint32_t ndim,
                                           const std::int64_t* axes, std::int64_t n_axes, T* y,
                                           std::int64_t n_out, Red kind) {
  reduce<T>(x, shape, ndim, axes, n_axes, y, n_out, kind);
}
template <class T>
TIDU_FM_CLONE_AVX512 inline void reduce_avx512(const T* x, const std::int64_t* shape, std::uint32_t ndim,
                                               const std::int64_t* axes, std::int64_t n_axes, T* y,
                                               std::int64_t n_out, Red kind) {
  reduce<T>(x, shape, ndim, axes, n_axes, y, n_out, kind);
}
#endif

// reduce, in the widest vectors the CPU has (fastmath.hpp's isa()): the same additions in the
// same order on every variant (no FMA, no reassociation), so the same values.
template <class T>
inline void reduce_simd(const T* x, const std::int64_t* shape, std::uint32_t ndim, const std::int64_t* axes,
                        std::int64_t n_axes, T* y, std::int64_t n_out, Red kind) {
#if TIDU_FM_DISPATCH
  if constexpr (is_float_v<T> || is_int_v<T>) {
    switch (fm::isa()) {
      case fm::Isa::Avx512: reduce_avx512<T>(x, shape, ndim, axes, n_axes, y, n_out, kind); return;
      case fm::Isa::Avx2: reduce_avx2<T>(x, shape, ndim, axes, n_axes, y, n_out, kind); return;
      default: break;
    }
  }
#endif
  reduce<T>(x, shape, ndim, axes, n_axes, y, n_out, kind);
}

// The sums of a chain's tail reduction (interpreter.hpp) in float64, of float32 or float64
// values: d[k] += v[k], and a row's sum in 8 interleaved lanes combined pairwise.  Compiled once
// per instruction set (the baseline's vectors hold two doubles); the same operations in the same
// order on each.
template <class T>
inline void widen_add_loop(double* d, const T* v, std::int64_t n) {
  for (std::int64_t k = 0; k < n; ++k) d[k] += static_cast<double>(v[k]);
}
template <class T>
inline double widen_sum_loop(const T* v, std::int64_t len) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t k = 0;
  for (; k + 8 <= len; k += 8)
    for (int q = 0; q < 8; ++q) lane[q] += static_cast<double>(v[k + q]);
  double t = 0;
  for (; k < len; ++k) t += static_cast<double>(v[k]);
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7])) + t;
}
#if TIDU_FM_DISPATCH
template <class T>
TIDU_FM_CLONE_AVX2 inline void widen_add_avx2(double* d, const T* v, std::int64_t n) { widen_add_loop(d, v, n); }
template <class T>
TIDU_FM_CLONE_AVX512 inline void widen_add_avx512(double* d, const T* v, std::int64_t n) {
  widen_add_loop(d, v, n);
}
template <class T>
TIDU_FM_CLONE_AVX2 inline double widen_sum_avx2(const T* v, std::int64_t n) { return widen_sum_loop(v, n); }
template <class T>
TIDU_FM_CLONE_AVX512 inline double widen_sum_avx512(const T* v, std::int64_t n) { return widen_sum_loop(v, n); }
#endif
template <class T>
inline void widen_add(double* d, const T* v, std::int64_t n) {
#if TIDU_FM_DISPATCH
  switch (fm::isa()) {
    case fm::Isa::Avx512: widen_add_avx512(d, v, n); return;
    case fm::Isa::Avx2: widen_add_avx2(d, v, n); return;
    default: break;
  }
#endif
  widen_add_loop(d, v, n);
}
template <class T>
inline double widen_sum(const T* v, std::int64_t n) {
#if TIDU_FM_DISPATCH
  switch (fm::isa()) {
    case fm::Isa::Avx512: return widen_sum_avx512(v, n);
    case fm::Isa::Avx2: return widen_sum_avx2(v, n);
    default: break;
  }
#endif
  return widen_sum_loop(v, n);
}

// ---- dot_general ----

// Offsets (in elements) of every combination of the given axes, row-major over those axes.
inline void axis_offsets(const std::int64_t* shape, const std::int64_t* strides, const std::int64_t* axes,
                         std::int64_t n_axes, std::vector<std::int64_t>& out) {
  out.assign(1, 0);
  for (std::int64_t a = 0; a < n_axes; ++a) {
    std::vector<std::int64_t> next;
    next.reserve(out.size() * shape[axes[a]]);
    for (std::int64_t base : out)
      for (std::int64_t i = 0; i < shape[axes[a]]; ++i) next.push_back(base + i * strides[axes[a]]);
    out.swap(next);
  }
}

// Optional BLAS: cblas_?gemm function pointers (row-major CBLAS signatures, 32-bit ints).  Unset,
// dot_general uses its own loops; the Python package fills them from scipy-openblas32, and a C++
// embedder may point them at any CBLAS (e.g. blas().dgemm = (void*)&cblas_dgemm).  cblas_?gemv,
// where set, takes the real products with one output row or column (a GEMM there is several
// times slower: 16x1000x1 took 20 us through OpenBLAS's dgemm, 3.5 us through its dgemv).
struct BlasHooks {
  void* sgemm = nullptr;
  void* dgemm = nullptr;
  void* cgemm = nullptr;
  void* zgemm = nullptr;
  void* sgemv = nullptr;
  void* dgemv = nullptr;
  void* ssyrk = nullptr;  // cblas_?syrk, where set, takes a product of a matrix with itself
  void* dsyrk = nullptr;  // transposed (x x^T, x^T x: a covariance) in half the multiply-adds
};
inline BlasHooks& blas() {
  static BlasHooks hooks;
  return hooks;
}
enum : int { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };
template <class T>
using real_gemm_t = void (*)(int, int, int, int, int, int, T, const T*, int, const T*, int, T, T*, int);
using complex_gemm_t = void (*)(int, int, int, int, int, int, const void*, const void*, int, const void*,
                                int, const void*, void*, int);
template <class T>
using real_gemv_t = void (*)(int, int, int, int, T, const T*, int, const T*, int, T, T*, int);
template <class T>
using real_syrk_t = void (*)(int, int, int, int, int, T, const T*, int, T, T*, int);
enum : int { kUpperTriangle = 121 };  // CblasUpper

// A product's layout, found at its first evaluation with a workspace: sizes, per-batch operand
// offsets and, when both operands are plain matrices per batch, their GEMM layout (ta > 0).  The
// per-index offset tables of the loop path are made only when the loop path runs (a product the
// BLAS takes never needs them: they were most of a 50-layer MLP's first-evaluation memory).
struct DotTables {
  std::vector<std::int64_t> lb, rb;          // offsets per batch index
  std::vector<std::int64_t> lf, lc, rf, rc;  // per free / contracting index: the loop path's
  std::int64_t M = 0, N = 0, K = 0;          // free sizes of each operand, contracted size
  bool ready = false, loops = false;         // layout found; loop tables made
  int ta = 0, tb = 0, lda = 0, ldb = 0;      // a GEMM layout of both operands, when one exists (ta > 0)
};

// Whether the offsets of `axes` (row-major over them, the last fastest) are 0, step, 2 step, ...:
// size-1 axes aside, the last axis has stride `step` and each other the stride of the next times
// its size.
inline bool axes_ramp(const std::int64_t* shape, const std::int64_t* strides, const std::int64_t* axes,
                      std::int64_t n, std::int64_t step) {
  for (std::int64_t a = n; a-- > 0;) {
    const std::int64_t d = shape[axes[a]];
    if (d == 1) continue;
    if (strides[axes[a]] != step) return false;
    step *= d;
  }
  return true;
}

// The row stride of `axes` taken as one strided dimension: their offsets (row-major over them,
// size-1 axes aside) are 0, s, 2s, ... for one s >= min_step, which is returned; -1 when they are
// not.  Axes that are all of size 1 give min_step.  This lets a GEMM read an operand whose free
// (or contracting) axes are strided by a batch axis lying between them (e.g. q of "qhd,khd->hqk"
// with h the batch axis: rows of q are H*D apart), instead of copying it into a canonical layout.
inline std::int64_t axes_step(const std::int64_t* shape, const std::int64_t* strides, const std::int64_t* axes,
                              std::int64_t n, std::int64_t min_step) {
  std::int64_t a = n;
  while (a > 0 && shape[axes[a - 1]] == 1) --a;
  if (a == 0) return min_step;
  const std::int64_t step = strides[axes[a - 1]];
  if (step < min_step) return -1;
  return axes_ramp(shape, strides, axes, a, step) ? step : -1;
}

inline std::int64_t axes_size(const std::int64_t* shape, const std::int64_t* axes, std::int64_t n) {
  std::int64_t size = 1;
  for (std::int64_t a = 0; a < n; ++a) size *= shape[axes[a]];
  return size;
}

// The layout of x[lshape] . w[rshape] over lhs free / contracting / batch axes (lf, lc, lb) and
// rhs ones (rf, rc, rb), with their row-major strides ls, rs; `loops` also makes the loop tables.
struct DotAxes {
  const std::int64_t *lshape, *rshape, *ls, *rs, *lf, *lc, *lb, *rf, *rc, *rb;
  std::int64_t nlf, nc, nb, nrf;
};

inline void dot_layout(const DotAxes& d, DotTables& t, bool loops) {
  if (!t.ready) {
    axis_offsets(d.lshape, d.ls, d.lb, d.nb, t.lb);
    axis_offsets(d.rshape, d.rs, d.rb, d.nb, t.rb);
    t.M = axes_size(d.lshape, d.lf, d.nlf);
    t.N = axes_size(d.rshape, d.rf, d.nrf);
    t.K = axes_size(d.lshape, d.lc, d.nc);
    t.ta = t.tb = 0;
    const std::int64_t M = t.M, N = t.N, K = t.K;
    // Each operand is a matrix per batch when one group of its axes is contiguous and the other
    // is one strided dimension (its leading dimension, any batch axes lying in between).
    constexpr std::int64_t kInt = 1LL << 31;
    if (M < kInt && N < kInt && K < kInt && K > 0) {
      std::int64_t s;
      if (axes_ramp(d.lshape, d.ls, d.lc, d.nc, 1) && (s = axes_step(d.lshape, d.ls, d.lf, d.nlf, K)) > 0 && s < kInt)
        t.ta = kNoTrans, t.lda = static_cast<int>(s);
      else if (axes_ramp(d.lshape, d.ls, d.lf, d.nlf, 1) &&
               (s = axes_step(d.lshape, d.ls, d.lc, d.nc, std::max<std::int64_t>(M, 1))) > 0 && s < kInt)
        t.ta = kTrans, t.lda = static_cast<int>(s);
      if (axes_ramp(d.rshape, d.rs, d.rf, d.nrf, 1) &&
          (s = axes_step(d.rshape, d.rs, d.rc, d.nc, std::max<std::int64_t>(N, 1))) > 0 && s < kInt)
        t.tb = kNoTrans, t.ldb = static_cast<int>(s);
      else if (axes_ramp(d.rshape, d.rs, d.rc, d.nc, 1) && (s = axes_step(d.rshape, d.rs, d.rf, d.nrf, K)) > 0 &&
               s < kInt)
        t.tb = kTrans, t.ldb = static_cast<int>(s);
      if (!t.ta || !t.tb) t.ta = t.tb = 0;
    }
    t.ready = true;
  }
  if (loops && !t.loops) {
    axis_offsets(d.lshape, d.ls, d.lf, d.nlf, t.lf);
    axis_offsets(d.lshape, d.ls, d.lc, d.nc, t.lc);
    axis_offsets(d.rshape, d.rs, d.rf, d.nrf, t.rf);
    axis_offsets(d.rshape, d.rs, d.rc, d.nc, t.rc);
    t.loops = true;
  }
}

// Calls the BLAS hook for T over every batch; false when none applies.
template <class T>
inline bool dot_blas(const T* x, const T* w, T* y, const DotTables& t) {
  const std::int64_t nb = t.lb.size(), M = t.M, N = t.N, K = t.K;
  if (!t.ta || M == 0 || N == 0 || static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) < 1024)
    return false;
  void* fn = nullptr;
  if constexpr (std::is_same_v<T, float>) fn = blas().sgemm;
  else if constexpr (std::is_same_v<T, double>) fn = blas().dgemm;
  else if constexpr (std::is_same_v<T, std::complex<float>>) fn = blas().cgemm;
  else if constexpr (std::is_same_v<T, std::complex<double>>) fn = blas().zgemm;
  if (!fn) return false;
  // Rows [r0, r1) of batch b: A's rows start r0 * lda in (r0 columns in, transposed), C's r0 * N.
  auto gemm = [&](std::int64_t b, std::int64_t r0, std::int64_t r1) {
    const T* A = x + t.lb[b] + r0 * (t.ta == kNoTrans ? t.lda : 1);
    const T* B = w + t.rb[b];
    T* C = y + b * M * N + r0 * N;
    const int m = static_cast<int>(r1 - r0);
    if constexpr (is_complex_v<T>) {
      const T one(1), zero(0);
      reinterpret_cast<complex_gemm_t>(fn)(kRowMajor, t.ta, t.tb, m, static_cast<int>(N), static_cast<int>(K),
                                           &one, A, t.lda, B, t.ldb, &zero, C, static_cast<int>(N));
    } else {
      reinterpret_cast<real_gemm_t<T>>(fn)(kRowMajor, t.ta, t.tb, m, static_cast<int>(N), static_cast<int>(K),
                                           T(1), A, t.lda, B, t.ldb, T(0), C, static_cast<int>(N));
    }
  };
  // Rows [r0, r1) and columns [c0, c1) of batch b's product (B's columns start c0 in, or c0 rows
  // in when transposed).
  auto gemm_tile = [&](std::int64_t b, std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
    if (c0 == 0 && c1 == N) return gemm(b, r0, r1);
    const T* A = x + t.lb[b] + r0 * (t.ta == kNoTrans ? t.lda : 1);
    const T* B = w + t.rb[b] + c0 * (t.tb == kNoTrans ? 1 : t.ldb);
    T* C = y + b * M * N + r0 * N + c0;
    const int m = static_cast<int>(r1 - r0), n = static_cast<int>(c1 - c0);
    if constexpr (is_complex_v<T>) {
      const T one(1), zero(0);
      reinterpret_cast<complex_gemm_t>(fn)(kRowMajor, t.ta, t.tb, m, n, static_cast<int>(K), &one, A, t.lda, B,
                                           t.ldb, &zero, C, static_cast<int>(N));
    } else {
      reinterpret_cast<real_gemm_t<T>>(fn)(kRowMajor, t.ta, t.tb, m, n, static_cast<int>(K), T(1), A, t.lda, B,
                                           t.ldb, T(0), C, static_cast<int>(N));
    }
  };
  // Thread policy (vm/parallel.hpp): the BLAS itself runs single-threaded (the Python package
  // sets OpenBLAS to one thread), and products of at least kParallelGemm multiply-adds are cut into
  // chunks (whole batches, or tiles of rows and columns, one BLAS call each) that tidu's threads take
  // dynamically: small products never pay for waking threads, large ones use the cores, a thread
  // whose core is busy elsewhere holds up at most one chunk, and nothing oversubscribes the cores.
  constexpr double kParallelGemm = 1 << 23;
  const double work = static_cast<double>(nb) * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const std::int64_t hw = detail::cores();
  const std::int64_t threads = std::min<std::int64_t>(
      {hw, static_cast<std::int64_t>(std::min(work / kParallelGemm, 1e6)), std::max<std::int64_t>(nb, (M / 64) * (N / 128))});
  void* sy = nullptr;
  if constexpr (std::is_same_v<T, float>) sy = blas().ssyrk;
  else if constexpr (std::is_same_v<T, double>) sy = blas().dsyrk;
  if (sy && x == w && M == N && K > 1 && t.lb == t.rb && t.lda == t.ldb &&
      ((t.ta == kNoTrans && t.tb == kTrans) || (t.ta == kTrans && t.tb == kNoTrans))) {
    // op(A) op(A)^T of one operand read twice (x x^T, or x^T x): SYRK computes the upper
    // triangle, half a GEMM's multiply-adds; the lower triangle is mirrored, so the result is
    // exactly symmetric, as numpy's x @ x.T (which does the same).  Half a GEMM's work decides
    // the threads: with two or more, the rows and columns are cut into P = 2 x threads ranges,
    // and the upper triangle's blocks are the chunks: an off-diagonal block a GEMM, a diagonal
    // block a SYRK (half the work: taken last), each mirrored by its own chunk.
    const auto f = reinterpret_cast<real_syrk_t<T>>(sy);
    const auto g = reinterpret_cast<real_gemm_t<T>>(fn);
    const std::int64_t sthreads = std::min<std::int64_t>(
        {hw, static_cast<std::int64_t>(std::min(work / 2 / kParallelGemm, 1e6)), std::max<std::int64_t>(nb, N / 64)});
    const std::int64_t P = sthreads > 1 && nb == 1 ? sthreads : 1;
    const std::int64_t offdiag = P * (P - 1) / 2;
    auto edge = [&](std::int64_t q) { return q * N / P; };
    auto block = [&](std::int64_t b, std::int64_t c) {  // chunk c of batch b: off-diagonal first
      std::int64_t bi = 0, bj = 0;
      if (c < offdiag) {
        std::int64_t r = c;
        while (r >= P - 1 - bi) r -= P - 1 - bi++;
        bj = bi + 1 + r;
      } else {
        bi = bj = c - offdiag;
      }
      const std::int64_t i0 = edge(bi), i1 = edge(bi + 1), j0 = edge(bj), j1 = edge(bj + 1);
      const T* A = x + t.lb[b];
      T* C = y + b * N * N;
      const std::int64_t step = t.ta == kNoTrans ? t.lda : 1;  // one row of op(A)
      if (bi == bj) {
        f(kRowMajor, kUpperTriangle, t.ta, static_cast<int>(i1 - i0), static_cast<int>(K), T(1), A + i0 * step,
          t.lda, T(0), C + i0 * N + i0, static_cast<int>(N));
        for (std::int64_t i = i0 + 1; i < i1; ++i)
          for (std::int64_t j = i0; j < i; ++j) C[i * N + j] = C[j * N + i];
      } else {
        g(kRowMajor, t.ta, t.ta == kNoTrans ? kTrans : kNoTrans, static_cast<int>(i1 - i0),
          static_cast<int>(j1 - j0), static_cast<int>(K), T(1), A + i0 * step, t.lda, A + j0 * step, t.lda, T(0),
          C + i0 * N + j0, static_cast<int>(N));
        for (std::int64_t j = j0; j < j1; ++j)
          for (std::int64_t i = i0; i < i1; ++i) C[j * N + i] = C[i * N + j];
      }
    };
    const std::int64_t per = offdiag + P;
    if (P == 1) {
      for (std::int64_t b = 0; b < nb; ++b) block(b, 0);
    } else {
      detail::parallel_chunks(per, static_cast<int>(sthreads), [&](std::int64_t c, int) { block(0, c); });
    }
    return true;
  }
  if (K == 1 && threads <= 1) {  // outer products: a column of A's times a row of B's
    const std::int64_t sa = t.ta == kNoTrans ? t.lda : 1, sb = t.tb == kNoTrans ? 1 : t.ldb;
    for (std::int64_t b = 0; b < nb; ++b) {
      const T *A = x + t.lb[b], *B = w + t.rb[b];
      T* C = y + b * M * N;
      for (std::int64_t i = 0; i < M; ++i) {
        const T a = A[i * sa];
        if (sb == 1)
          for (std::int64_t j = 0; j < N; ++j) C[i * N + j] = a * B[j];
        else
          for (std::int64_t j = 0; j < N; ++j) C[i * N + j] = a * B[j * sb];
      }
    }
    return true;
  }
  void* gv = nullptr;
  if constexpr (std::is_same_v<T, float>) gv = blas().sgemv;
  else if constexpr (std::is_same_v<T, double>) gv = blas().dgemv;
  if (threads <= 1 && gv && (N == 1 || M == 1)) {
    // One output column: C = op(A) b.  One output row: C^T = op(B)^T a.  (Row-major gemv over
    // the stored matrix; the vector's stride is its leading dimension where it is a column.)
    const auto f = reinterpret_cast<real_gemv_t<T>>(gv);
    const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
    for (std::int64_t b = 0; b < nb; ++b) {
      const T *A = x + t.lb[b], *B = w + t.rb[b];
      T* C = y + b * M * N;
      if (N == 1) {
        const int inc = t.tb == kNoTrans ? t.ldb : 1;
        if (t.ta == kNoTrans) f(kRowMajor, kNoTrans, m, k, T(1), A, t.lda, B, inc, T(0), C, 1);
        else f(kRowMajor, kTrans, k, m, T(1), A, t.lda, B, inc, T(0), C, 1);
      } else {
        const int inc = t.ta == kNoTrans ? 1 : t.lda;
        if (t.tb == kNoTrans) f(kRowMajor, kTrans, k, n, T(1), B, t.ldb, A, inc, T(0), C, 1);
        else f(kRowMajor, kNoTrans, n, k, T(1), B, t.ldb, A, inc, T(0), C, 1);
      }
    }
  } else if (threads <= 1) {
    for (std::int64_t b = 0; b < nb; ++b) gemm(b, 0, M);
  } else {
    // Tasks are tiles of (batch, block of rows, block of columns): where there are fewer batches
    // than about four per thread, the columns are cut in blocks of at least 128, then the rows in
    // blocks of at least 64 (one BLAS call each: smaller tiles cost it more in packing than they
    // gain), up to about four tiles per thread; consecutive tiles are grouped into chunks.
    const std::int64_t want = 4 * threads;
    const std::int64_t per_b = (want + nb - 1) / nb;
    const std::int64_t cb = std::max<std::int64_t>(1, std::min<std::int64_t>(per_b, N / 128));
    const std::int64_t rb = std::max<std::int64_t>(1, std::min<std::int64_t>((per_b + cb - 1) / cb, M / 64));
    const std::int64_t rows = (M + rb - 1) / rb, cols = (N + cb - 1) / cb;
    const std::int64_t nr = (M + rows - 1) / rows, nc = (N + cols - 1) / cols, tiles = nb * nr * nc;
    const std::int64_t per = (tiles + want - 1) / want;
    detail::parallel_chunks((tiles + per - 1) / per, static_cast<int>(threads), [&](std::int64_t c, int) {
      for (std::int64_t tile = c * per; tile < std::min(tiles, (c + 1) * per); ++tile) {
        const std::int64_t b = tile / (nr * nc), r0 = tile / nc % nr * rows, c0 = tile % nc * cols;
        gemm_tile(b, r0, std::min(M, r0 + rows), c0, std::min(N, c0 + cols));
      }
    });
  }
  return true;
}

// The loop path: t's loop tables must be made (dot_layout with loops).
template <class T>
inline void dot_loops(const T* x, const T* w, T* y, const DotTables& t) {
  const std::int64_t nb = t.lb.size(), ni = t.lf.size(), nj = t.rf.size(), nk = t.lc.size();
  bool rf_contig = true;
  for (std::int64_t j = 0; j < nj; ++j) rf_contig = rf_contig && t.rf[j] == t.rf[0] + j;
  auto ramp = [](const std::vector<std::int64_t>& v) {
    for (std::size_t k = 0; k < v.size(); ++k)
      if (v[k] != v[0] + static_cast<std::int64_t>(k)) return false;
    return true;
  };
  if constexpr (!is_int_v<T>) {
    // One output column per batch (a batch of matrix-vector products too small for the BLAS:
    // skip-gram's 5 negatives . 64-vector per example): the loop below would run its j loop of
    // one element nk times per row.  Each y[i] is still sum over k in order, so the values
    // are the same: over contiguous contracting axes as one dot per row, else, with contiguous
    // rows, k outermost and the rows as one vector.
    if (nj == 1 && nk > 0 && ni > 0) {
      const bool lc_ramp = ramp(t.lc), rc_ramp = ramp(t.rc), lf_ramp = ramp(t.lf);
      if ((lc_ramp && rc_ramp) || lf_ramp) {
        for (std::int64_t b = 0; b < nb; ++b) {
          T* yb = y + b * ni;
          const T* wb = w + t.rb[b] + t.rf[0];
          const T* xb = x + t.lb[b];
          if (lc_ramp && rc_ramp) {
            const T* wk = wb + t.rc[0];
            for (std::int64_t i = 0; i < ni; ++i) {
              const T* xi = xb + t.lf[i] + t.lc[0];
              T acc = T(0);
              for (std::int64_t k = 0; k < nk; ++k) acc += xi[k] * wk[k];
              yb[i] = acc;
            }
          } else {
            for (std::int64_t i = 0; i < ni; ++i) yb[i] = T(0);
            const T* x0 = xb + t.lf[0];
            for (std::int64_t k = 0; k < nk; ++k) {
              const T a = wb[t.rc[k]];
              const T* xk = x0 + t.lc[k];
              for (std::int64_t i = 0; i < ni; ++i) yb[i] += xk[i] * a;
            }
          }
        }
        return;
      }
    }
  }
  for (std::int64_t b = 0; b < nb; ++b) {
    T* yb = y + b * ni * nj;
    for (std::int64_t i = 0; i < ni * nj; ++i) yb[i] = T(0);
    for (std::int64_t i = 0; i < ni; ++i) {
      T* row = yb + i * nj;
      const T* xi = x + t.lb[b] + t.lf[i];
      for (std::int64_t k = 0; k < nk; ++k) {
        const T a = xi[t.lc[k]];
        const T* wk = w + t.rb[b] + t.rc[k];
        if constexpr (is_int_v<T>) {  // wrapping, as numpy's
          for (std::int64_t j = 0; j < nj; ++j) row[j] = wrap_add(row[j], wrap_mul(a, wk[t.rf[j]]));
        } else if (rf_contig) {
          const T* wr = wk + t.rf[0];
          for (std::int64_t j = 0; j < nj; ++j) row[j] += a * wr[j];
        } else {
          for (std::int64_t j = 0; j < nj; ++j) row[j] += a * wk[t.rf[j]];
        }
      }
    }
  }
}

}  // namespace kern
}  // namespace tidu
