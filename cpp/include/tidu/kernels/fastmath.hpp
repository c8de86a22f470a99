// tidu/kernels/fastmath.hpp - branch-free transcendental kernels (exp, expm1, log, log1p, sin, cos, tanh)
// for float and double, written so that the compiler vectorises loops over contiguous arrays.
// They are tuned for throughput: the all-scalar fast path (interpreter.hpp) keeps the C library,
// whose table-driven kernels have the lower latency that a chain of dependent scalars needs.
//
// Each function is a range reduction (Cody-Waite) and a polynomial (Taylor to below half an ulp,
// or fdlibm's minimax kernels).  Float arrays of exp, expm1, log, log1p and tanh run float
// kernels in float arithmetic (within 2 ulp); float log and log1p are XLA:CPU's own (Cephes'
// polynomials, fused as XLA fuses them: jax's values to the bit); float sin and cos are
// evaluated in double and rounded once.  An input
// outside a function's fast range (NaN, infinities, overflow, results that would be denormal,
// |x| >= 2^19 for sin/cos, ...) goes to the C library instead, so the fast path never answers
// wrongly: arrays are checked a chunk at a time and a chunk holding such an input is evaluated
// element by element.
//
// Plain C++17, header-only, no special flags.  With GCC or Clang on x86 the array loops are also
// compiled for AVX2+FMA and AVX-512 (function `target` attributes) and one variant is chosen at
// first use from the CPU (override: environment variable TIDU_SIMD=avx512|avx2|generic; define
// TIDU_NO_SIMD_DISPATCH to compile only the portable loop).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__GNUC__) || defined(__clang__)
#define TIDU_FM_INLINE inline __attribute__((always_inline))
#else
#define TIDU_FM_INLINE inline
#endif

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__)) && \
    !defined(TIDU_NO_SIMD_DISPATCH)
#define TIDU_FM_DISPATCH 1
#include <immintrin.h>
#define TIDU_FM_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TIDU_FM_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))
// Whole kernels recompiled for wider vectors (every call inside inlined), without FMA: the
// compiler may not contract a * b + c there, so each variant gives the baseline's values.
#define TIDU_FM_CLONE_AVX2 __attribute__((flatten, target("avx2")))
#define TIDU_FM_CLONE_AVX512 __attribute__((flatten, target("avx512f,avx512dq,avx512vl,avx2")))
#else
#define TIDU_FM_DISPATCH 0
#endif

namespace tidu {
namespace fm {

TIDU_FM_INLINE std::uint64_t bits(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
TIDU_FM_INLINE double from_bits(std::uint64_t u) {
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// c ? a : b by bit masks: a ternary the optimiser may turn into a branch (sinking the work of
// one side into it), which the vectoriser then refuses on targets without masked operations.
TIDU_FM_INLINE double sel(bool c, double a, double b) {
  const std::uint64_t m = std::uint64_t{0} - static_cast<std::uint64_t>(c);
  return from_bits((bits(a) & m) | (bits(b) & ~m));
}

// a * b + c, fused where the instantiation is for an FMA target (no libm call otherwise).
template <bool FMA>
TIDU_FM_INLINE double madd(double a, double b, double c) {
#if defined(__GNUC__) || defined(__clang__)
  if constexpr (FMA) return __builtin_fma(a, b, c);
#endif
  return a * b + c;
}

// Rounds to nearest integer (|x| < 2^51) by the 1.5 * 2^52 trick; the integer is also in the
// low bits of the intermediate sum, returned through `ibits`.
constexpr double kShift = 6755399441055744.0;  // 0x1.8p52

// ---- exp / expm1 ----
// x = n ln2 + r, |r| <= ln2/2; expm1(r) by Taylor to r^13 (truncation < 2^-60 relative).
constexpr double kInvLn2 = 1.44269504088896338700e+00;
constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 32 leading bits: n * kLn2Hi is exact
constexpr double kLn2Lo = 1.90821492927058770002e-10;

template <bool FMA>
TIDU_FM_INLINE double expm1_poly(double r) {  // expm1(r) for |r| <= 0.35, Estrin's scheme
  const double r2 = r * r, r4 = r2 * r2;
  const double a = madd<FMA>(r, 1.0 / 6, 0.5);
  const double b = madd<FMA>(r2, madd<FMA>(r, 1.0 / 5040, 1.0 / 720), madd<FMA>(r, 1.0 / 120, 1.0 / 24));
  const double c = madd<FMA>(r4, madd<FMA>(r, 1.0 / 6227020800.0, 1.0 / 479001600.0),
                             madd<FMA>(r2, madd<FMA>(r, 1.0 / 39916800.0, 1.0 / 3628800.0),
                                       madd<FMA>(r, 1.0 / 362880.0, 1.0 / 40320.0)));
  return madd<FMA>(r2, madd<FMA>(r2, madd<FMA>(r4, c, b), a), r);
}

// exp(x) for |x| <= 708 (the result is a normal double), and +0 below -746, which is the
// correctly rounded value there (e^-746 is under half the smallest subnormal, 2^-1075): a
// softmax's masked scores (-1e9) stay on the vector path instead of a C library call each.
constexpr double kExpZero = -746.0;
template <bool FMA>
TIDU_FM_INLINE double exp_fast(double x0) {
  const bool zero = x0 < kExpZero;
  const double x = sel(zero, 0.0, x0);
  const double kd = madd<FMA>(x, kInvLn2, kShift);
  const std::uint64_t ki = bits(kd);
  const double n = kd - kShift;
  const double r = madd<FMA>(-n, kLn2Lo, madd<FMA>(-n, kLn2Hi, x));
  const double scale = from_bits((ki + 1023) << 52);  // 2^n, |n| <= 1022
  return sel(zero, 0.0, scale + scale * expm1_poly<FMA>(r));
}
TIDU_FM_INLINE bool exp_ok(double x) { return (std::fabs(x) <= 708.0) | (x < kExpZero); }

// expm1(x) for x <= 708; x below -45 gives -1 (exactly the rounded value).
template <bool FMA>
TIDU_FM_INLINE double expm1_fast(double x) {
  const double xc = sel(x > -45.0, x, -45.0);
  const double kd = madd<FMA>(xc, kInvLn2, kShift);
  const std::uint64_t ki = bits(kd);
  const double n = kd - kShift;
  const double r = madd<FMA>(-n, kLn2Lo, madd<FMA>(-n, kLn2Hi, xc));  // exact when n == 0
  const double scale = from_bits((ki + 1023) << 52);
  const double y = madd<FMA>(scale, expm1_poly<FMA>(r), scale - 1.0);
  return sel(x == 0.0, x, y);  // keeps -0
}
TIDU_FM_INLINE bool expm1_ok(double x) { return x <= 708.0; }  // false for NaN

// tanh(x) = t / (t + 2), t = expm1(2|x|), |x| clamped to 20 (tanh rounds to 1 from 19.1).
template <bool FMA>
TIDU_FM_INLINE double tanh_fast(double x) {
  double ax = std::fabs(x);
  ax = sel(ax < 20.0, ax, 20.0);
  const double t = expm1_fast<FMA>(2.0 * ax);
  const double y = t / (t + 2.0);
  return std::copysign(y, x);
}
TIDU_FM_INLINE bool tanh_ok(double x) { return x == x; }

// ---- log / log1p (fdlibm's e_log.c: x = 2^k z, z in [sqrt(2)/2, sqrt(2))) ----
constexpr double kLg1 = 6.666666666666735130e-01, kLg2 = 3.999999999940941908e-01,
                 kLg3 = 2.857142874366239149e-01, kLg4 = 2.222219843214978396e-01,
                 kLg5 = 1.818357216161805012e-01, kLg6 = 1.531383769920937332e-01,
                 kLg7 = 1.479819860511658591e-01;

// log(x) + c for normal positive finite x, with c a small correction (|c| <= ulp(log x)).
template <bool FMA>
TIDU_FM_INLINE double log_core(double x, double c) {
  const std::uint64_t ix = bits(x);
  // u >> 52 is k + 1023 where k is the exponent after moving z into [sqrt(2)/2, sqrt(2)).
  const std::uint64_t u = ix - 0x3fe6a09e667f3bcdULL + 0x3ff0000000000000ULL;
  const std::uint64_t kb = u >> 52;
  const double z = from_bits(ix - ((kb << 52) - 0x3ff0000000000000ULL));
  const double k = from_bits(kb | 0x4330000000000000ULL) - (4503599627370496.0 + 1023.0);
  const double f = z - 1.0;
  const double hfsq = 0.5 * f * f;
  const double s = f / (2.0 + f);
  const double z2 = s * s, w = z2 * z2;
  const double t1 = w * madd<FMA>(w, madd<FMA>(w, kLg6, kLg4), kLg2);
  const double t2 = z2 * madd<FMA>(w, madd<FMA>(w, madd<FMA>(w, kLg7, kLg5), kLg3), kLg1);
  const double R = t2 + t1;
  return madd<FMA>(k, kLn2Hi, -((hfsq - (madd<FMA>(s, hfsq + R, madd<FMA>(k, kLn2Lo, c)))) - f));
}
template <bool FMA>
TIDU_FM_INLINE double log_fast(double x) { return log_core<FMA>(x, 0.0); }
TIDU_FM_INLINE bool log_ok(double x) {
  return (x >= std::numeric_limits<double>::min()) & (x <= std::numeric_limits<double>::max());
}

// log1p(x) = log(u) + err/u with u = fl(1 + x) and err its rounding error (TwoSum).
template <bool FMA>
TIDU_FM_INLINE double log1p_fast(double x) {
  const double u = 1.0 + x;
  const double bp = u - x;
  const double err = (1.0 - bp) + (x - (u - bp));
  const double y = log_core<FMA>(u, err / u);
  return sel(x == 0.0, x, y);  // keeps -0
}
TIDU_FM_INLINE bool log1p_ok(double x) { return (x > -1.0) & (x <= std::numeric_limits<double>::max()); }

// ---- sin / cos (fdlibm: three-part Cody-Waite reduction by pi/2, k_sin.c and k_cos.c) ----
constexpr double kInvPio2 = 6.36619772367581382433e-01;
constexpr double kPio2_1 = 1.57079632673412561417e+00, kPio2_1t = 6.07710050650619224932e-11;
constexpr double kPio2_2 = 6.07710050630396597660e-11, kPio2_2t = 2.02226624879595063154e-21;
constexpr double kPio2_3 = 2.02226624871116645580e-21, kPio2_3t = 8.47842766036889956997e-32;
constexpr double kS1 = -1.66666666666666324348e-01, kS2 = 8.33333333332248946124e-03,
                 kS3 = -1.98412698298579493134e-04, kS4 = 2.75573137070700676789e-06,
                 kS5 = -2.50507602534068634195e-08, kS6 = 1.58969099521155010221e-10;
constexpr double kC1 = 4.16666666666666019037e-02, kC2 = -1.38888888888741095749e-03,
                 kC3 = 2.48015872894767294178e-05, kC4 = -2.75573143513906633035e-07,
                 kC5 = 2.08757232129817482790e-09, kC6 = -1.13596475577881948265e-11;

// x = q pi/2 + (y0 + y1), |y0| <= pi/4 (about), for |x| < 2^19: n * kPio2_{1,2,3} are exact.
template <bool FMA>
TIDU_FM_INLINE std::uint64_t reduce_pio2(double x, double& y0, double& y1) {
  const double kd = madd<FMA>(x, kInvPio2, kShift);
  const std::uint64_t q = bits(kd);
  const double n = kd - kShift;
  double r = x - n * kPio2_1;
  double t = r, w = n * kPio2_2;
  r = t - w;
  w = n * kPio2_2t - ((t - r) - w);
  t = r;
  const double w3 = n * kPio2_3;
  r = t - w3;
  w = n * kPio2_3t - ((t - r) - w3);
  y0 = r - w;
  y1 = (r - y0) - w;
  return q;
}
template <bool FMA>
TIDU_FM_INLINE double ksin(double x, double y) {
  const double z = x * x, v = z * x;
  const double r = madd<FMA>(z, madd<FMA>(z, madd<FMA>(z, madd<FMA>(z, kS6, kS5), kS4), kS3), kS2);
  return x - ((z * (0.5 * y - v * r) - y) - v * kS1);
}
template <bool FMA>
TIDU_FM_INLINE double kcos(double x, double y) {
  const double z = x * x, w = z * z;
  const double r = z * madd<FMA>(z, madd<FMA>(z, kC3, kC2), kC1) +
                   w * w * madd<FMA>(z, madd<FMA>(z, kC6, kC5), kC4);
  const double hz = 0.5 * z, one_hz = 1.0 - hz;
  return one_hz + (((1.0 - one_hz) - hz) + (z * r - x * y));
}
// sin (cos_shift = 0) or cos (cos_shift = 1): quadrant q + cos_shift picks +-sin or +-cos.
template <bool FMA, unsigned CosShift>
TIDU_FM_INLINE double sincos_fast(double x) {
  double y0, y1;
  const std::uint64_t q = reduce_pio2<FMA>(x, y0, y1) + CosShift;
  const double s = ksin<FMA>(y0, y1), c = kcos<FMA>(y0, y1);
  const double v = sel(q & 1, c, s);
  const double y = from_bits(bits(v) ^ ((q & 2) << 62));
  if constexpr (CosShift == 0) return sel(x == 0.0, x, y);  // keeps -0
  return y;
}
template <bool FMA>
TIDU_FM_INLINE double sin_fast(double x) { return sincos_fast<FMA, 0>(x); }
template <bool FMA>
TIDU_FM_INLINE double cos_fast(double x) { return sincos_fast<FMA, 1>(x); }
TIDU_FM_INLINE bool sincos_ok(double x) { return std::fabs(x) < 524288.0; }

// ---- float kernels, evaluated in float ----
// exp, expm1, tanh, log and log1p for float arrays run in float arithmetic (twice the vector
// lanes of double, and shorter polynomials): the same reductions as the double kernels with
// float constants, each within 2 ulp of the correctly rounded result (tests/test_eval_math.py).
// sin and cos of floats stay in double (their reduction by pi/2 needs the extra bits).

TIDU_FM_INLINE std::uint32_t fbits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
TIDU_FM_INLINE float ffrom_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
TIDU_FM_INLINE float fsel(bool c, float a, float b) {
  const std::uint32_t m = std::uint32_t{0} - static_cast<std::uint32_t>(c);
  return ffrom_bits((fbits(a) & m) | (fbits(b) & ~m));
}
template <bool FMA>
TIDU_FM_INLINE float fmadd(float a, float b, float c) {
#if defined(__GNUC__) || defined(__clang__)
  if constexpr (FMA) return __builtin_fmaf(a, b, c);
#endif
  return a * b + c;
}

constexpr float kShiftF = 12582912.0f;                 // 0x1.8p23: rounds |x| < 2^22 to an integer
constexpr float kInvLn2F = 1.44269502163e+00f;
constexpr float kLn2HiF = 6.93145751953e-01f;          // 0x3f317200: n * kLn2HiF exact for |n| < 2^9
constexpr float kLn2LoF = 1.42860676533e-06f;

// expm1(r) for |r| <= 0.35 by Taylor to r^7 (truncation below 2^-27 relative), Estrin's scheme.
template <bool FMA>
TIDU_FM_INLINE float expm1_polyf(float r) {
  const float r2 = r * r, r4 = r2 * r2;
  const float a = fmadd<FMA>(r, 1.0f / 6, 0.5f);
  const float b = fmadd<FMA>(r2, fmadd<FMA>(r, 1.0f / 5040, 1.0f / 720), fmadd<FMA>(r, 1.0f / 120, 1.0f / 24));
  return fmadd<FMA>(r2, fmadd<FMA>(r2, b, a), r);
}
// x = n ln2 + r: 2^n as a float (its bits from the rounding trick) and r.
template <bool FMA>
TIDU_FM_INLINE float reduce_ln2f(float x, float& r) {
  const float kd = fmadd<FMA>(x, kInvLn2F, kShiftF);
  const std::uint32_t ki = fbits(kd);
  const float n = kd - kShiftF;
  r = fmadd<FMA>(-n, kLn2LoF, fmadd<FMA>(-n, kLn2HiF, x));
  return ffrom_bits((ki + 127u) << 23);  // |n| <= 127
}
// exp(x) for |x| <= 87 (the result is a normal float), and +0 below -104, the correctly
// rounded value there (e^-104 < 2^-150, half the smallest subnormal; see exp_fast).
constexpr float kExpZeroF = -104.0f;
template <bool FMA>
TIDU_FM_INLINE float exp_fastf(float x0) {
  const bool zero = x0 < kExpZeroF;
  const float x = fsel(zero, 0.0f, x0);
  float r;
  const float scale = reduce_ln2f<FMA>(x, r);
  return fsel(zero, 0.0f, fmadd<FMA>(scale, expm1_polyf<FMA>(r), scale));
}
TIDU_FM_INLINE bool exp_okf(float x) { return (std::fabs(x) <= 87.0f) | (x < kExpZeroF); }
// expm1(x) for x <= 88; below -18 it is -1 (the rounded value).
template <bool FMA>
TIDU_FM_INLINE float expm1_fastf(float x) {
  const float xc = fsel(x > -18.0f, x, -18.0f);
  float r;
  const float scale = reduce_ln2f<FMA>(xc, r);
  const float y = fmadd<FMA>(scale, expm1_polyf<FMA>(r), scale - 1.0f);
  return fsel(x == 0.0f, x, y);  // keeps -0
}
TIDU_FM_INLINE bool expm1_okf(float x) { return x <= 88.0f; }
// tanh(x) = t / (t + 2), t = expm1(2|x|), |x| clamped to 9.1 (tanh rounds to 1 from 9.01).
template <bool FMA>
TIDU_FM_INLINE float tanh_fastf(float x) {
  float ax = std::fabs(x);
  ax = fsel(ax < 9.1f, ax, 9.1f);
  const float t = expm1_fastf<FMA>(2.0f * ax);
  return std::copysign(t / (t + 2.0f), x);
}
TIDU_FM_INLINE bool tanh_okf(float x) { return x == x; }

// Float log is XLA's CPU float32 log (the Cephes polynomial its LLVM-IR rewrite, polynomial_
// approximations' GenerateVF32Log, substitutes for logf), so that td.log and what is built on it
// (erf_inv, normals, poisson) give jax's float32 values to the bit: x = 2^e m, m in [sqrt(1/2),
// sqrt(2)), f = m - 1, log x = f - f^2/2 + f^3 P(f) + e (ln2_hi + ln2_lo), P Cephes' degree 8
// evaluated in three Estrin-like strands; the multiply-adds are fused exactly where XLA's
// x86 backend fuses them (checked against jax on every normal float, tests/numpy/test_log_xla.py).
// Within 2 ulp of log (float64 reference).  Normal positive finite x only (log_okf).
constexpr float kLogP0F = 7.0376836292e-2f, kLogP1F = -1.1514610310e-1f, kLogP2F = 1.1676998740e-1f,
                kLogP3F = -1.2420140846e-1f, kLogP4F = 1.4249322787e-1f, kLogP5F = -1.6668057665e-1f,
                kLogP6F = 2.0000714765e-1f, kLogP7F = -2.4999993993e-1f, kLogP8F = 3.3333331174e-1f;
constexpr float kLogLn2LoF = -2.12194440e-4f, kLogLn2HiF = 0.693359375f;
template <bool FMA>
TIDU_FM_INLINE float log_fastf(float x) {
  const std::uint32_t ix = fbits(x);
  const float m = ffrom_bits((ix & 0x807fffffu) | 0x3f000000u);  // in [1/2, 1)
  const float e0 = static_cast<float>(static_cast<std::int32_t>(ix >> 23) - 127) + 1.0f;
  const bool lo = m < 0.707106781186547524f;  // then m -> 2m, e -> e - 1
  const float f = (m - 1.0f) + fsel(lo, m, 0.0f);
  const float e = e0 - fsel(lo, 1.0f, 0.0f);
  const float f2 = f * f, f3 = f2 * f;
  float a = fmadd<FMA>(f, kLogP0F, kLogP1F), b = fmadd<FMA>(f, kLogP3F, kLogP4F),
        c = fmadd<FMA>(f, kLogP6F, kLogP7F);
  a = fmadd<FMA>(a, f, kLogP2F);
  b = fmadd<FMA>(b, f, kLogP5F);
  c = fmadd<FMA>(c, f, kLogP8F);
  a = fmadd<FMA>(fmadd<FMA>(a, f3, b), f3, c);
  const float y = fmadd<FMA>(a, f3, kLogLn2LoF * e);  // XLA: the e * ln2_lo product unfused
  return fmadd<FMA>(kLogLn2HiF, e, fmadd<FMA>(-0.5f, f2, f) + y);
}
TIDU_FM_INLINE bool log_okf(float x) {
  return (x >= std::numeric_limits<float>::min()) & (x <= std::numeric_limits<float>::max());
}
// Float log1p is XLA's too (its xla.log1p.f32 intrinsic): below |x| < sqrt(2) - 1 Cephes'
// rational function R(x) = P(x)/Q(x) of degree 6, log1p(x) = x - x^2/2 + x^3 R(x); above it
// log_fastf(1 + x).  Both sides are computed and one selected (so the loop vectorises).
constexpr float kL1pP[7] = {4.5270000862445199635215E-5f, 4.9854102823193375972212E-1f,
    6.5787325942061044846969E0f, 2.9911919328553073277375E1f, 6.0949667980987787057556E1f,
    5.7112963590585538103336E1f, 2.0039553499201281259648E1f};
constexpr float kL1pQ[7] = {1.0f, 1.5062909083469192043167E1f, 8.3047565967967209469434E1f,
    2.2176239823732856465394E2f, 3.0909872225312059774938E2f, 2.1642788614495947685003E2f,
    6.0118660497603843919306E1f};
template <bool FMA>
TIDU_FM_INLINE float log1p_fastf(float x) {
  // Horner, written out (a loop here keeps GCC from vectorising the caller's loop)
  float num = fmadd<FMA>(kL1pP[0], x, kL1pP[1]), den = fmadd<FMA>(kL1pQ[0], x, kL1pQ[1]);
  num = fmadd<FMA>(num, x, kL1pP[2]), den = fmadd<FMA>(den, x, kL1pQ[2]);
  num = fmadd<FMA>(num, x, kL1pP[3]), den = fmadd<FMA>(den, x, kL1pQ[3]);
  num = fmadd<FMA>(num, x, kL1pP[4]), den = fmadd<FMA>(den, x, kL1pQ[4]);
  num = fmadd<FMA>(num, x, kL1pP[5]), den = fmadd<FMA>(den, x, kL1pQ[5]);
  num = fmadd<FMA>(num, x, kL1pP[6]), den = fmadd<FMA>(den, x, kL1pQ[6]);
  const float x2 = x * x;
  const float small = x + fmadd<FMA>(-0.5f, x2, (x * x2) * (num / den));
  const bool is_small = std::fabs(x) < 0.41421356237309504880f;
  return fsel(is_small, small, log_fastf<FMA>(fsel(is_small, 1.0f, x + 1.0f)));
}
TIDU_FM_INLINE bool log1p_okf(float x) { return (x > -1.0f) & (x <= std::numeric_limits<float>::max()); }

// ---- the function table: fast kernel, its range, and the C library for the rest ----
// X(name, function, range check, float kernel in float: 1, or in double: 0)
#define TIDU_FASTMATH(X)    \
  X(Exp, exp, exp, 1)       \
  X(Expm1, expm1, expm1, 1) \
  X(Log, log, log, 1)       \
  X(Log1p, log1p, log1p, 1) \
  X(Sin, sin, sincos, 0)    \
  X(Cos, cos, sincos, 0)    \
  X(Tanh, tanh, tanh, 1)

enum class Fn : std::uint8_t {
#define TIDU_FM_ENUM(name, fn, ok, f32) name,
  TIDU_FASTMATH(TIDU_FM_ENUM)
#undef TIDU_FM_ENUM
};

template <Fn F>
struct Func;
#define TIDU_FM_FUNC(name, fn, ok, f32)                                                   \
  template <>                                                                             \
  struct Func<Fn::name> {                                                                 \
    static constexpr bool kFloat = f32;                                                   \
    template <bool FMA>                                                                   \
    static TIDU_FM_INLINE double fast(double x) { return fn##_fast<FMA>(x); }             \
    static TIDU_FM_INLINE bool in_range(double x) { return ok##_ok(x); }                  \
    TIDU_FM_FLOAT_##f32(fn, ok)                                                           \
    static inline double libm(double x) { return std::fn(x); }                            \
    static inline float libm(float x) { return std::fn(x); }                              \
  };
#define TIDU_FM_FLOAT_1(fn, ok)                                                  \
  template <bool FMA>                                                            \
  static TIDU_FM_INLINE float fastf(float x) { return fn##_fastf<FMA>(x); }      \
  static TIDU_FM_INLINE bool in_rangef(float x) { return ok##_okf(x); }
#define TIDU_FM_FLOAT_0(fn, ok)
TIDU_FASTMATH(TIDU_FM_FUNC)
#undef TIDU_FM_FUNC
#undef TIDU_FM_FLOAT_1
#undef TIDU_FM_FLOAT_0

// y[i] = f(x[i]), a chunk at a time: a vectorisable range check, then the vectorisable
// polynomial loop, or an element-wise loop when the chunk holds an input out of range.
// The same over float arrays in float arithmetic, for the functions that have a float kernel.
template <Fn F, bool FMA>
TIDU_FM_INLINE void map_loopf(const float* x, float* y, std::int64_t n) {
  using K = Func<F>;
  constexpr std::int64_t kChunk = 256;
  for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::int64_t m = n - i0 < kChunk ? n - i0 : kChunk;
    const float* xs = x + i0;
    float* ys = y + i0;
    int bad = 0;
    for (std::int64_t j = 0; j < m; ++j) bad |= !K::in_rangef(xs[j]);
    if (!bad) {
      for (std::int64_t j = 0; j < m; ++j) ys[j] = K::template fastf<FMA>(xs[j]);
    } else {
      for (std::int64_t j = 0; j < m; ++j) {
        const float v = xs[j];
        ys[j] = K::in_rangef(v) ? K::template fastf<FMA>(v) : K::libm(v);
      }
    }
  }
}

template <Fn F, bool FMA, class T>
TIDU_FM_INLINE void map_loop(const T* x, T* y, std::int64_t n) {
  using K = Func<F>;
  if constexpr (std::is_same_v<T, float> && K::kFloat) {
    map_loopf<F, FMA>(x, y, n);
    return;
  }
  constexpr std::int64_t kChunk = 256;
  for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::int64_t m = n - i0 < kChunk ? n - i0 : kChunk;
    const T* xs = x + i0;
    T* ys = y + i0;
    int bad = 0;
    for (std::int64_t j = 0; j < m; ++j) bad |= !K::in_range(static_cast<double>(xs[j]));
    if (!bad) {
      for (std::int64_t j = 0; j < m; ++j) ys[j] = static_cast<T>(K::template fast<FMA>(static_cast<double>(xs[j])));
    } else {
      for (std::int64_t j = 0; j < m; ++j) {
        const T v = xs[j];
        ys[j] = K::in_range(static_cast<double>(v)) ? static_cast<T>(K::template fast<FMA>(static_cast<double>(v)))
                                                    : K::libm(v);
      }
    }
  }
}

template <Fn F, class T>
inline void map_generic(const T* x, T* y, std::int64_t n) { map_loop<F, false>(x, y, n); }

#if TIDU_FM_DISPATCH
template <Fn F, class T>
TIDU_FM_TARGET_AVX2 inline void map_avx2(const T* x, T* y, std::int64_t n) { map_loop<F, true>(x, y, n); }
template <Fn F, class T>
TIDU_FM_TARGET_AVX512 inline void map_avx512(const T* x, T* y, std::int64_t n) { map_loop<F, true>(x, y, n); }
#endif

enum class Isa : int { Generic = 0, Avx2 = 1, Avx512 = 2 };

// The instruction set the array loops use: the best the CPU has, or TIDU_SIMD's choice (never
// above what the CPU has).  Decided once.
inline Isa isa() {
  static const Isa chosen = [] {
    Isa best = Isa::Generic;
#if TIDU_FM_DISPATCH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = Isa::Avx2;
    if (best == Isa::Avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
      best = Isa::Avx512;
#endif
    const char* env = std::getenv("TIDU_SIMD");
    Isa want = best;
    if (env && std::strcmp(env, "generic") == 0) want = Isa::Generic;
    else if (env && std::strcmp(env, "avx2") == 0) want = Isa::Avx2;
    else if (env && std::strcmp(env, "avx512") == 0) want = Isa::Avx512;
    return static_cast<int>(want) < static_cast<int>(best) ? want : best;
  }();
  return chosen;
}

inline const char* isa_name() {
  switch (isa()) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    default: return "generic";
  }
}

// y[i] = f(x[i]) for float or double arrays (y may not overlap x partially; y == x is fine).
template <Fn F, class T>
inline void map(const T* x, T* y, std::int64_t n) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "fastmath: float or double");
#if TIDU_FM_DISPATCH
  switch (isa()) {
    case Isa::Avx512: map_avx512<F>(x, y, n); return;
    case Isa::Avx2: map_avx2<F>(x, y, n); return;
    default: break;
  }
#endif
  map_generic<F>(x, y, n);
}

// ---- + - * / over float or double arrays: IEEE, so every variant gives the same values ----
// (tidu's module is compiled for the baseline instruction set, whose vectors hold two doubles:
// the AVX2 and AVX-512 variants do these loops, run in every elementwise chain, in a half or a
// quarter of the instructions.)
enum class Arith : int { Add, Sub, Mul, Div };

template <Arith A, class T>
inline void arith_loop(const T* a, const T* b, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    if constexpr (A == Arith::Add) y[i] = a[i] + b[i];
    else if constexpr (A == Arith::Sub) y[i] = a[i] - b[i];
    else if constexpr (A == Arith::Mul) y[i] = a[i] * b[i];
    else y[i] = a[i] / b[i];
  }
}

#if TIDU_FM_DISPATCH
template <Arith A, class T>
TIDU_FM_TARGET_AVX2 inline void arith_avx2(const T* a, const T* b, T* y, std::int64_t n) { arith_loop<A>(a, b, y, n); }
template <Arith A, class T>
TIDU_FM_TARGET_AVX512 inline void arith_avx512(const T* a, const T* b, T* y, std::int64_t n) { arith_loop<A>(a, b, y, n); }
#endif

// y[i] = a[i] op b[i] for float or double arrays (y may be a or b, or apart from both).
template <Arith A, class T>
inline void arith(const T* a, const T* b, T* y, std::int64_t n) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "fastmath: float or double");
#if TIDU_FM_DISPATCH
  switch (isa()) {
    case Isa::Avx512: arith_avx512<A>(a, b, y, n); return;
    case Isa::Avx2: arith_avx2<A>(a, b, y, n); return;
    default: break;
  }
#endif
  arith_loop<A>(a, b, y, n);
}

// ---- sqrt and 1/sqrt: IEEE (correctly rounded), so every variant gives the C library's values ----
// The portable loops vectorise only where the compiler may drop errno (-fno-math-errno, as tidu's
// own module is built); the AVX2/AVX-512 variants use the instructions directly.
template <bool Recip, class T>
inline void sqrt_generic(const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = Recip ? T(1) / std::sqrt(x[i]) : std::sqrt(x[i]);
}

#if TIDU_FM_DISPATCH
template <bool Recip>
TIDU_FM_TARGET_AVX512 inline void sqrt_avx512(const double* x, double* y, std::int64_t n) {
  std::int64_t i = 0;
  const __m512d one = _mm512_set1_pd(1.0);
  for (; i + 8 <= n; i += 8) {
    __m512d r = _mm512_sqrt_pd(_mm512_loadu_pd(x + i));
    _mm512_storeu_pd(y + i, Recip ? _mm512_div_pd(one, r) : r);
  }
  sqrt_generic<Recip>(x + i, y + i, n - i);
}
template <bool Recip>
TIDU_FM_TARGET_AVX512 inline void sqrt_avx512(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  const __m512 one = _mm512_set1_ps(1.0f);
  for (; i + 16 <= n; i += 16) {
    __m512 r = _mm512_sqrt_ps(_mm512_loadu_ps(x + i));
    _mm512_storeu_ps(y + i, Recip ? _mm512_div_ps(one, r) : r);
  }
  sqrt_generic<Recip>(x + i, y + i, n - i);
}
template <bool Recip>
TIDU_FM_TARGET_AVX2 inline void sqrt_avx2(const double* x, double* y, std::int64_t n) {
  std::int64_t i = 0;
  const __m256d one = _mm256_set1_pd(1.0);
  for (; i + 4 <= n; i += 4) {
    __m256d r = _mm256_sqrt_pd(_mm256_loadu_pd(x + i));
    _mm256_storeu_pd(y + i, Recip ? _mm256_div_pd(one, r) : r);
  }
  sqrt_generic<Recip>(x + i, y + i, n - i);
}
template <bool Recip>
TIDU_FM_TARGET_AVX2 inline void sqrt_avx2(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    __m256 r = _mm256_sqrt_ps(_mm256_loadu_ps(x + i));
    _mm256_storeu_ps(y + i, Recip ? _mm256_div_ps(one, r) : r);
  }
  sqrt_generic<Recip>(x + i, y + i, n - i);
}
#endif

// y[i] = sqrt(x[i]) (Recip: 1 / sqrt(x[i])) for float or double arrays.
template <bool Recip, class T>
inline void sqrt_map(const T* x, T* y, std::int64_t n) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "fastmath: float or double");
#if TIDU_FM_DISPATCH
  switch (isa()) {
    case Isa::Avx512: sqrt_avx512<Recip>(x, y, n); return;
    case Isa::Avx2: sqrt_avx2<Recip>(x, y, n); return;
    default: break;
  }
#endif
  sqrt_generic<Recip>(x, y, n);
}

}  // namespace fm
}  // namespace tidu
