// tidu/kernels/math.hpp - kernels of the elementwise math primitives beyond tier 1 (pkg/tidu/ops/math.py):
// rounding, inverse and hyperbolic trigonometry, the error function and its inverse, cube root,
// the logistic function, is_finite, C's fmod (Rem, integers too), atan2, and integer division.
//
// Each float dtype is computed in its own precision (float in float, through the C library's
// float overloads, except float erf, erf_inv and lgamma, which are XLA:CPU's own approximations);
// complex operands take std::complex's functions (C99 branch cuts, as numpy's).
// Integer division and remainder are defined everywhere, as XLA defines them: x / 0 == -1,
// x % 0 == x, INT_MIN / -1 == INT_MIN, INT_MIN % -1 == 0 (C++ leaves those undefined).
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tidu/kernels/fastmath.hpp"
#include "tidu/kernels/log_glibc.hpp"
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

// The inverse error function as XLA computes it (stablehlo's chlo.erf_inv decomposition, which
// jax's erf_inv lowers to): M. Giles' approximations ("Approximating the erfinv function", GPU
// Gems 2010), single precision for float, the three-range double precision one for double, with
// w = -log1p(-y * y) by XLA's CPU log1p (Cephes' rational function below |x| < sqrt(2) - 1,
// XLA's log(1 + x) above) and every multiply-add fused, as XLA's CPU backend contracts them: so
// float32 and float64 normals are jax's to the bit.
namespace math_detail {
template <bool Fused>
inline double fmadd(double a, double b, double c) {
  if constexpr (Fused) return std::fma(a, b, c);
  else return a * b + c;
}

// XLA's CPU log1p for double (elemental_ir_emitter's EmitLog1p): its rational function's
// numerator and denominator, shared by xla_log1p and erfinv64_chunks.
constexpr double kLog1pP[7] = {4.5270000862445199635215E-5, 4.9854102823193375972212E-1,
    6.5787325942061044846969E0, 2.9911919328553073277375E1, 6.0949667980987787057556E1,
    5.7112963590585538103336E1, 2.0039553499201281259648E1};
constexpr double kLog1pQ[7] = {1.0, 1.5062909083469192043167E1, 8.3047565967967209469434E1,
    2.2176239823732856465394E2, 3.0909872225312059774938E2, 2.1642788614495947685003E2,
    6.0118660497603843919306E1};

// XLA's CPU log1p for double (elemental_ir_emitter's EmitLog1p).
template <bool Fused = true>
inline double xla_log1p(double x) {
  if (!(std::fabs(x) < 0.41421356237309504880)) return std::log(x + 1.0);
  const double* lp = kLog1pP;
  const double* lq = kLog1pQ;
  double num = 0.0, den = 0.0;
  for (int i = 0; i < 7; ++i) {
    num = fmadd<Fused>(num, x, lp[i]);
    den = fmadd<Fused>(den, x, lq[i]);
  }
  const double x2 = x * x;
  return x + fmadd<Fused>(-0.5, x2, (x * x2) * (num / den));
}

// float64 erf_inv's first range (w < 6.25): the polynomial in w - 3.125, highest power first.
constexpr double kErfInvC1[23] = {-3.6444120640178196996e-21, -1.685059138182016589e-19,
    1.2858480715256400167e-18, 1.115787767802518096e-17, -1.333171662854620906e-16,
    2.0972767875968561637e-17, 6.6376381343583238325e-15, -4.0545662729752068639e-14,
    -8.1519341976054721522e-14, 2.6335093153082322977e-12, -1.2975133253453532498e-11,
    -5.4154120542946279317e-11, 1.051212273321532285e-09, -4.1126339803469836976e-09,
    -2.9070369957882005086e-08, 4.2347877827932403518e-07, -1.3654692000834678645e-06,
    -1.3882523362786468719e-05, 0.0001867342080340571352, -0.00074070253416626697512,
    -0.0060336708714301490533, 0.24015818242558961693, 1.6536545626831027356};

template <bool Fused = true>
inline double erfinv64(double y) {
  const double* c1 = kErfInvC1;
  static constexpr double c2[19] = {2.2137376921775787049e-09, 9.0756561938885390979e-08,
      -2.7517406297064545428e-07, 1.8239629214389227755e-08, 1.5027403968909827627e-06,
      -4.013867526981545969e-06, 2.9234449089955446044e-06, 1.2475304481671778723e-05,
      -4.7318229009055733981e-05, 6.8284851459573175448e-05, 2.4031110387097893999e-05,
      -0.0003550375203628474796, 0.00095328937973738049703, -0.0016882755560235047313,
      0.0024914420961078508066, -0.0037512085075692412107, 0.005370914553590063617,
      1.0052589676941592334, 3.0838856104922207635};
  static constexpr double c3[17] = {-2.7109920616438573243e-11, -2.5556418169965252055e-10,
      1.5076572693500548083e-09, -3.7894654401267369937e-09, 7.6157012080783393804e-09,
      -1.4960026627149240478e-08, 2.9147953450901080826e-08, -6.7711997758452339498e-08,
      2.2900482228026654717e-07, -9.9298272942317002539e-07, 4.5260625972231537039e-06,
      -1.9681778105531670567e-05, 7.5995277030017761139e-05, -0.00021503011930044477347,
      -0.00013871931833623122026, 1.0103004648645343977, 4.8499064014085844221};
  if (std::fabs(y) == 1.0) return y * std::numeric_limits<double>::infinity();
  const double w = -xla_log1p<Fused>(y * -y);
  const double* c;
  int n;
  double t;
  if (w < 6.25) {
    c = c1, n = 23, t = w - 3.125;
  } else if (w < 16.0) {
    c = c2, n = 19, t = std::sqrt(w) - 3.25;
  } else {
    c = c3, n = 17, t = std::sqrt(w) - 5.0;
  }
  double p = c[0];
  for (int i = 1; i < n; ++i) p = fmadd<Fused>(p, t, c[i]);
  return p * y;  // NaN, |y| > 1: NaN (w is NaN)
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
inline bool has_fma_cpu() {
  static const bool yes = __builtin_cpu_supports("fma");
  return yes;
}
#endif

// Giles' single-precision erfinv as XLA's CPU backend evaluates it: w = -log1p(-y * y) by
// XLA's float log1p (fastmath's log1p_fastf), every multiply-add of the polynomials fused; so float32 normals are jax's.
// In three steps, so that an array loop of each vectorises (the square root, needed only where
// w >= 5, |y| > 0.9966, is a C library call): w = -log1p(-y^2); s = sqrt(w) where w >= 5; then
// Giles' polynomial, both ranges' coefficients selected per step as XLA's code does, and
// |y| >= 1 and NaN patched.
template <bool Fused>
TIDU_FM_INLINE float erfinv32_w(float y) {
  const float yc = fm::fsel(std::fabs(y) < 1.0f, y, 0.0f);
  return -fm::log1p_fastf<Fused>(yc * -yc);  // -y^2 in (-1, 0]: in its range
}
template <bool Fused>
TIDU_FM_INLINE float erfinv32_poly(float y, float w, float s) {
  static constexpr float c1[9] = {2.81022636e-08f, 3.43273939e-07f, -3.5233877e-06f,
      -4.39150654e-06f, 0.00021858087f, -0.00125372503f, -0.00417768164f, 0.246640727f,
      1.50140941f};
  static constexpr float c2[9] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
      -0.00367342844f, 0.00573950773f, -0.0076224613f, 0.00943887047f, 1.00167406f, 2.83297682f};
  const bool small = w < 5.0f;
  const float t = fm::fsel(small, w - 2.5f, s - 3.0f);
  float p = fm::fsel(small, c1[0], c2[0]);
  p = fm::fmadd<Fused>(p, t, fm::fsel(small, c1[1], c2[1]));
  p = fm::fmadd<Fused>(p, t, fm::fsel(small, c1[2], c2[2]));
  p = fm::fmadd<Fused>(p, t, fm::fsel(small, c1[3], c2[3]));
  p = fm::fmadd<Fused>(p, t, fm::fsel(small, c1[4], c2[4]));
  p = fm::fmadd<Fused>(p, t, fm::fsel(small, c1[5], c2[5]));
  p = fm::fmadd<Fused>(p, t, fm::fsel(small, c1[6], c2[6]));
  p = fm::fmadd<Fused>(p, t, fm::fsel(small, c1[7], c2[7]));
  p = fm::fmadd<Fused>(p, t, fm::fsel(small, c1[8], c2[8]));
  const float edge = fm::fsel(std::fabs(y) == 1.0f, y * std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN());
  return fm::fsel(std::fabs(y) < 1.0f, p * y, edge);
}
template <bool Fused = true>
inline float erfinv32(float y) {
  const float w = erfinv32_w<Fused>(y);
  return erfinv32_poly<Fused>(y, w, w < 5.0f ? 0.0f : std::sqrt(w));
}
template <bool Fused>
TIDU_FM_INLINE void erfinv32_loop(const float* x, float* y, std::int64_t n) {
  constexpr std::int64_t kChunk = 256;
  float w[kChunk], s[kChunk];
  for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::int64_t m = n - i0 < kChunk ? n - i0 : kChunk;
    const float* xs = x + i0;
    for (std::int64_t j = 0; j < m; ++j) w[j] = erfinv32_w<Fused>(xs[j]);
    for (std::int64_t j = 0; j < m; ++j) s[j] = w[j] < 5.0f ? 0.0f : std::sqrt(w[j]);
    for (std::int64_t j = 0; j < m; ++j) y[i0 + j] = erfinv32_poly<Fused>(xs[j], w[j], s[j]);
  }
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
__attribute__((target("fma"))) inline void erfinv32_fma(const float* x, float* y, std::int64_t n) {
  erfinv32_loop<true>(x, y, n);
}
#endif

inline void erfinv32_array(const float* x, float* y, std::int64_t n) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  if (has_fma_cpu()) return erfinv32_fma(x, y, n);
#endif
  erfinv32_loop<true>(x, y, n);
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
// The array kernel compiled for FMA hardware, chosen at run time: std::fma inlines to one
// instruction there (elsewhere it is a libm call, same result).
__attribute__((target("fma"))) inline void erfinv64_fma(const double* x, double* y,
                                                        std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = erfinv64<true>(x[i]);
}
#endif

// erfinv64 over an array in passes over chunks of 256 that vectorise, the same values: the
// chunk's log1p both ways (Cephes' rational function and glibc's log of 1 + x, log_glibc.hpp,
// its table entries fetched in a scalar pass), then the first range's polynomial (w < 6.25,
// |y| < 0.998); elements in the other two ranges (0.2 % of normals) are redone by erfinv64, as
// are whole chunks holding |y| >= 1 or NaN.
TIDU_FM_INLINE void erfinv64_chunks(const double* x, double* y, std::int64_t n) {
  constexpr std::int64_t kChunk = 256;
  alignas(64) double v[kChunk], z[kChunk], kd[kChunk], invc[kChunk], logc[kChunk], w[kChunk];
  std::uint64_t idx[kChunk];
  const double* lp = kLog1pP;
  const double* lq = kLog1pQ;
  for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::int64_t m = n - i0 < kChunk ? n - i0 : kChunk;
    const double* ys = x + i0;
    double* out = y + i0;
    int bad = 0;
    for (std::int64_t j = 0; j < m; ++j) bad |= !(std::fabs(ys[j]) < 1.0);
    if (bad) {
      for (std::int64_t j = 0; j < m; ++j) out[j] = erfinv64<true>(ys[j]);
      continue;
    }
    for (std::int64_t j = 0; j < m; ++j) {
      // xla_log1p's argument, stored: so the compiler does not fuse it into the + 1 (as XLA
      // does not: its log1p tests the product before adding)
      v[j] = ys[j] * -ys[j];
      double zj, kj;
      idx[j] = glibc::log_split(v[j] + 1.0, zj, kj);
      z[j] = zj, kd[j] = kj;
    }
    for (std::int64_t j = 0; j < m; ++j) {
      invc[j] = glibc::kLogTab[2 * idx[j]];
      logc[j] = glibc::kLogTab[2 * idx[j] + 1];
    }
    int far = 0;
    for (std::int64_t j = 0; j < m; ++j) {
      const double vj = v[j];
      double num = lp[0], den = lq[0];
      num = fmadd<true>(num, vj, lp[1]), den = fmadd<true>(den, vj, lq[1]);
      num = fmadd<true>(num, vj, lp[2]), den = fmadd<true>(den, vj, lq[2]);
      num = fmadd<true>(num, vj, lp[3]), den = fmadd<true>(den, vj, lq[3]);
      num = fmadd<true>(num, vj, lp[4]), den = fmadd<true>(den, vj, lq[4]);
      num = fmadd<true>(num, vj, lp[5]), den = fmadd<true>(den, vj, lq[5]);
      num = fmadd<true>(num, vj, lp[6]), den = fmadd<true>(den, vj, lq[6]);
      const double v2 = vj * vj;
      const double small = vj + fmadd<true>(-0.5, v2, (vj * v2) * (num / den));
      const double large = glibc::log_tail<true>(z[j], kd[j], invc[j], logc[j]);
      const double wj = -fm::sel(std::fabs(vj) < 0.41421356237309504880, small, large);
      const double t = wj - 3.125;
      double p = kErfInvC1[0];
      p = fmadd<true>(p, t, kErfInvC1[1]); p = fmadd<true>(p, t, kErfInvC1[2]);
      p = fmadd<true>(p, t, kErfInvC1[3]); p = fmadd<true>(p, t, kErfInvC1[4]);
      p = fmadd<true>(p, t, kErfInvC1[5]); p = fmadd<true>(p, t, kErfInvC1[6]);
      p = fmadd<true>(p, t, kErfInvC1[7]); p = fmadd<true>(p, t, kErfInvC1[8]);
      p = fmadd<true>(p, t, kErfInvC1[9]); p = fmadd<true>(p, t, kErfInvC1[10]);
      p = fmadd<true>(p, t, kErfInvC1[11]); p = fmadd<true>(p, t, kErfInvC1[12]);
      p = fmadd<true>(p, t, kErfInvC1[13]); p = fmadd<true>(p, t, kErfInvC1[14]);
      p = fmadd<true>(p, t, kErfInvC1[15]); p = fmadd<true>(p, t, kErfInvC1[16]);
      p = fmadd<true>(p, t, kErfInvC1[17]); p = fmadd<true>(p, t, kErfInvC1[18]);
      p = fmadd<true>(p, t, kErfInvC1[19]); p = fmadd<true>(p, t, kErfInvC1[20]);
      p = fmadd<true>(p, t, kErfInvC1[21]); p = fmadd<true>(p, t, kErfInvC1[22]);
      w[j] = wj;
      far |= !(wj < 6.25);
      out[j] = p * ys[j];
    }
    if (far) {
      for (std::int64_t j = 0; j < m; ++j)
        if (!(w[j] < 6.25)) out[j] = erfinv64<true>(ys[j]);
    }
  }
}

#if TIDU_FM_DISPATCH
TIDU_FM_TARGET_AVX2 inline void erfinv64_avx2(const double* x, double* y, std::int64_t n) {
  erfinv64_chunks(x, y, n);
}
TIDU_FM_TARGET_AVX512 inline void erfinv64_avx512(const double* x, double* y, std::int64_t n) {
  erfinv64_chunks(x, y, n);
}
#endif

inline void erfinv64_array(const double* x, double* y, std::int64_t n) {
#if TIDU_FM_DISPATCH
  if (has_fma_cpu() && glibc::log_glibc_ok()) {
    switch (fm::isa()) {
      case fm::Isa::Avx512: return erfinv64_avx512(x, y, n);
      case fm::Isa::Avx2: return erfinv64_avx2(x, y, n);
      default: break;
    }
  }
#endif
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  if (has_fma_cpu()) return erfinv64_fma(x, y, n);
#endif
  for (std::int64_t i = 0; i < n; ++i) y[i] = erfinv64<true>(x[i]);
}

// Float erf as XLA:CPU computes it (its erf intrinsic, Eigen's rational interpolant): x P(x^2) /
// Q(x^2), P of degree 4 and Q of degree 6 in x^2 by explicit fused multiply-adds (llvm.fma: fused
// on every CPU), +-1 from |x| >= 3.8325; denormal inputs count as zero (XLA:CPU flushes them).
// Equal to jax.jit(jax.lax.erf)'s float32 values on every 7th bit pattern of all 2^32
// (tests/numpy/test_lgamma_xla.py samples them), so truncated_normal's bounds are jax's.
TIDU_FM_INLINE float fma_exact(float a, float b, float c) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_fmaf(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}
TIDU_FM_INLINE float erf32(float x) {
  x = fm::fsel(std::fabs(x) < std::numeric_limits<float>::min(), std::copysign(0.0f, x), x);
  const float x2 = x * x;
  float p = fma_exact(x2, 0.00022905065861350646f, 0.0034082910107109506f);
  p = fma_exact(x2, p, 0.050955695062380861f);
  p = fma_exact(x2, p, 0.18520832239976145f);
  p = fma_exact(x2, p, 1.128379143519084f);
  p = x * p;
  float q = fma_exact(x2, -1.1791602954361697e-7f, 0.000023547966471313185f);
  q = fma_exact(x2, q, 0.0010179625278914885f);
  q = fma_exact(x2, q, 0.014070470171167667f);
  q = fma_exact(x2, q, 0.11098505178285362f);
  q = fma_exact(x2, q, 0.49746925110067538f);
  q = fma_exact(x2, q, 1.0f);
  return fm::fsel(3.832506856900711f <= std::fabs(x), std::copysign(1.0f, x), p / q);
}
inline void erf32_loop(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = erf32(x[i]);
}
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
__attribute__((target("avx2,fma"))) inline void erf32_fma(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = erf32(x[i]);
}
#endif
inline void erf32_array(const float* x, float* y, std::int64_t n) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  if (has_fma_cpu()) return erf32_fma(x, y, n);
#endif
  erf32_loop(x, y, n);  // the same values through the C library's fmaf
}

// log|Gamma(x)| as XLA:CPU computes jax's lgamma (stablehlo's chlo.lgamma decomposition):
// Lanczos' approximation (g = 7, nine coefficients), for x >= 1/2 with z = x - 1
//   lgamma = (z + 1/2 - t / log t) log t + log(2 pi)/2 + log(1 + sum_k c_k / (z + k)),
//   t = z + 7.5, log t = log(7.5) + log1p(z / 7.5),
// and Euler's reflection log(pi) - log|sin(pi frac)| - lgamma(1 - x) below 1/2 (z = -x), +inf at
// the poles and at +-inf.  Float32 runs in float with XLA's float log and log1p (fastmath) and
// the one multiply-add XLA's x86 backend contracts, (...) * log t + log(2 pi)/2, fused where the
// CPU has FMA (as XLA's code there); denormal inputs count as zero (XLA:CPU flushes them).  So
// td.lax.lgamma (and poisson's acceptance test) gives jax's float32 values to the bit
// (tests/numpy/test_lgamma_xla.py).  Float64: the same in double, with the C library's log and sin.
constexpr double kLgammaC[8] = {676.520368121885098567009190444019, -1259.13921672240287047156078755283,
    771.3234287776530788486528258894, -176.61502916214059906584551354, 12.507343278686904814458936853,
    -0.13857109526572011689554706, 9.984369578019570859563e-6, 1.50563273514931155834e-7};
constexpr double kLgammaBase = 0.99999999999980993227684700473478;
constexpr double kLgammaLogPi = 1.1447298858494001741434273513530587;
constexpr double kLgammaHalfLog2Pi = 0.91893853320467274178032973640562;
constexpr double kLgammaLog75 = 2.0149030205422647492;  // log(7.5)

// The Lanczos part at z (z >= -1/2), Safe: logs of arguments out of the fast kernels' range go
// to the C library (the vectorised path runs only on chunks where no argument is).
template <bool FMA, bool Safe>
TIDU_FM_INLINE float lgamma32_z(float z) {
  const float zs = z * static_cast<float>(1 / 7.5);
  const float lp = Safe && !fm::log1p_okf(zs) ? std::log1p(zs) : fm::log1p_fastf<FMA>(zs);
  const float log_t = lp + static_cast<float>(kLgammaLog75);
  const float d = (z + 0.5f) - (z + 7.5f) / log_t;
  const float r = fm::fmadd<FMA>(d, log_t, static_cast<float>(kLgammaHalfLog2Pi));
  float acc = static_cast<float>(kLgammaC[0]) / (z + 1.0f) + static_cast<float>(kLgammaBase);  // 1.0f
  acc = acc + static_cast<float>(kLgammaC[1]) / (z + 2.0f);
  acc = acc + static_cast<float>(kLgammaC[2]) / (z + 3.0f);
  acc = acc + static_cast<float>(kLgammaC[3]) / (z + 4.0f);
  acc = acc + static_cast<float>(kLgammaC[4]) / (z + 5.0f);
  acc = acc + static_cast<float>(kLgammaC[5]) / (z + 6.0f);
  acc = acc + static_cast<float>(kLgammaC[6]) / (z + 7.0f);
  acc = acc + static_cast<float>(kLgammaC[7]) / (z + 8.0f);
  if constexpr (Safe) {
    if (!fm::log_okf(acc)) return r + std::log(acc);
  }
  return r + fm::log_fastf<FMA>(acc);
}
// Any x, element by element.
template <bool FMA>
inline float lgamma32_any(float x) {
  if (std::fabs(x) < std::numeric_limits<float>::min()) x = std::copysign(0.0f, x);  // DAZ
  const float ax = std::fabs(x);
  if (ax == std::numeric_limits<float>::infinity()) return ax;
  if (!(x < 0.5f)) return lgamma32_z<FMA, true>(x - 1.0f);  // NaN too
  float frac = ax - std::floor(ax);
  frac = 0.5f < frac ? 1.0f - frac : frac;
  const float s = std::sin(frac * static_cast<float>(M_PI));
  const float log_sin = fm::log_okf(s) ? fm::log_fastf<FMA>(s) : std::log(s);
  if (!std::isfinite(log_sin)) return -log_sin;  // a pole: +inf
  return (static_cast<float>(kLgammaLogPi) - log_sin) - lgamma32_z<FMA, true>(-x);
}
template <bool FMA>
TIDU_FM_INLINE void lgamma32_loop(const float* x, float* y, std::int64_t n) {
  constexpr std::int64_t kChunk = 256;
  for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::int64_t m = n - i0 < kChunk ? n - i0 : kChunk;
    const float* xs = x + i0;
    float* ys = y + i0;
    int bad = 0;  // reflection, infinities, NaN: the element-wise path
    for (std::int64_t j = 0; j < m; ++j)
      bad |= !((xs[j] >= 0.5f) & (xs[j] <= std::numeric_limits<float>::max()));
    if (!bad) {
      for (std::int64_t j = 0; j < m; ++j) ys[j] = lgamma32_z<FMA, false>(xs[j] - 1.0f);
    } else {
      for (std::int64_t j = 0; j < m; ++j) ys[j] = lgamma32_any<FMA>(xs[j]);
    }
  }
}

template <bool FMA>
inline double lgamma64(double x) {
  if (std::fabs(x) < std::numeric_limits<double>::min()) x = std::copysign(0.0, x);  // DAZ
  const double ax = std::fabs(x);
  if (ax == std::numeric_limits<double>::infinity()) return ax;
  const bool reflect = x < 0.5;
  const double z = reflect ? -x : x - 1.0;
  const double log_t = xla_log1p<FMA>(z * (1 / 7.5)) + kLgammaLog75;
  const double d = (z + 0.5) - (z + 7.5) / log_t;
  const double r = fmadd<FMA>(d, log_t, kLgammaHalfLog2Pi);
  double acc = kLgammaC[0] / (z + 1.0) + kLgammaBase;
  for (int k = 1; k < 8; ++k) acc = acc + kLgammaC[k] / (z + (k + 1));
  const double lg = r + std::log(acc);
  if (!reflect) return lg;
  double frac = ax - std::floor(ax);
  frac = 0.5 < frac ? 1.0 - frac : frac;
  const double log_sin = std::log(std::sin(frac * M_PI));
  if (!std::isfinite(log_sin)) return -log_sin;
  return (kLgammaLogPi - log_sin) - lg;
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
__attribute__((target("avx2,fma"))) inline void lgamma32_fma(const float* x, float* y, std::int64_t n) {
  lgamma32_loop<true>(x, y, n);
}
__attribute__((target("fma"))) inline void lgamma64_fma(const double* x, double* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = lgamma64<true>(x[i]);
}
#endif

// FMA where the CPU has it (fastmath's choice, as td.log's: TIDU_SIMD=generic computes
// unfused), as XLA's code for that CPU; plain multiply and add elsewhere.
inline void lgamma_array(const float* x, float* y, std::int64_t n) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  if (fm::isa() != fm::Isa::Generic && has_fma_cpu()) return lgamma32_fma(x, y, n);
#endif
  lgamma32_loop<false>(x, y, n);
}
inline void lgamma_array(const double* x, double* y, std::int64_t n) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  if (fm::isa() != fm::Isa::Generic && has_fma_cpu()) return lgamma64_fma(x, y, n);
#endif
  for (std::int64_t i = 0; i < n; ++i) y[i] = lgamma64<false>(x[i]);
}
}  // namespace math_detail

template <class T>
inline T erfinv(T y) {
  if constexpr (std::is_same_v<T, float>) {
    return math_detail::erfinv32<true>(y);
  } else {
    return math_detail::erfinv64<true>(static_cast<double>(y));
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
      case Op::Erf:
        if constexpr (std::is_same_v<T, float>) math_detail::erf32_array(x, y, n);
        else for (std::int64_t i = 0; i < n; ++i) y[i] = std::erf(x[i]);
        return true;
      case Op::Erfc: for (std::int64_t i = 0; i < n; ++i) y[i] = std::erfc(x[i]); return true;
      case Op::ErfInv:
        if constexpr (std::is_same_v<T, double>) math_detail::erfinv64_array(x, y, n);
        else math_detail::erfinv32_array(x, y, n);
        return true;
      case Op::Lgamma:
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          math_detail::lgamma_array(x, y, n);
          return true;
        }
        break;
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
