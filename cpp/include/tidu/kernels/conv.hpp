// tidu/kernels/conv.hpp - Conv (XLA's ConvGeneralDilated) in the canonical layout the Python
// primitive uses: lhs (N, C, *S), rhs (O, I, *K), output (N / BG, O, *S').
//
// im2col + GEMM: for a chunk of output batch indices and one group, the patches of the input are
// laid out as a [I * prod(K)] x [chunk * prod(S')] matrix (zeros where a window reaches padding
// or a hole of lhs dilation; negative padding crops), and the group's kernel rows, a contiguous
// [O / groups] x [I * prod(K)] matrix, multiply it through the BLAS hook (elementwise.hpp's
// BlasHooks) or, without one, a plain i-k-j loop.  Chunks run on tidu's threads, each with its
// own patch buffer (conv_scratch: thread_local, shared with the scatter form below; the calling
// thread's is grown once and kept, its pages mapped as it grows (vm/pages.hpp), about 2^18
// elements, 2^20 at most (conv_chunk_entries); so are the pool workers', which live as long as
// the process: vm/parallel.hpp).  Tasks are taken dynamically, so a busy core holds up at most
// one.  Where the output is larger than the input or has far fewer features, the scatter form
// (conv_scatter_pays, conv_scatter) runs instead.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <complex>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tidu/kernels/elementwise.hpp"
#include "tidu/vm/pages.hpp"
#include "tidu/vm/parallel.hpp"
#include "tidu/vm/program.hpp"

namespace tidu {
namespace kern {

struct ConvGeom {
  std::int64_t ns = 0;                       // spatial axes
  std::int64_t N = 0, C = 0, O = 0, I = 0;   // lhs batch and features, rhs out / in features
  std::int64_t N1 = 0;                       // output batch (N / BG)
  std::int64_t G = 1, BG = 1;                // feature / batch groups
  std::int64_t S[8], K[8], P[8];             // input, window, output spatial sizes
  std::int64_t st[8], lo[8], ld[8], rd[8];   // strides, low padding, lhs and rhs dilation
  std::int64_t Sp = 1, Kp = 1, Pp = 1;       // their products
};

// Integer and bool C = A . B: products summed in unsigned integers of 32 bits for types up to 32
// bits, 64 otherwise, which wrap as XLA's fixed-width integer arithmetic does (the result mod
// 2^bits is the same; no signed-overflow UB; 32-bit lanes vectorise where 64-bit multiplies do
// not); bool is the OR of ANDs (a nonzero sum, which cannot wrap to zero below 2^32 terms).
// Blocked: 4 rows of C share each load of a row tile of B, the 4 accumulator tiles stay in L1.
template <class T>
inline void conv_int_gemm(const T* A, const T* B, T* Cm, std::int64_t m, std::int64_t n, std::int64_t k) {
  using U = std::conditional_t<(sizeof(T) <= 4), std::uint32_t, std::uint64_t>;
  constexpr std::int64_t MR = 4, NB = 512;
  thread_local std::vector<U> buf;
  if (buf.size() < static_cast<std::size_t>(MR * NB)) buf.resize(MR * NB);
  U* acc = buf.data();
  auto u = [](T v) { return static_cast<U>(static_cast<std::int64_t>(v)); };
  for (std::int64_t i0 = 0; i0 < m; i0 += MR) {
    const std::int64_t mr = std::min(MR, m - i0);
    for (std::int64_t j0 = 0; j0 < n; j0 += NB) {
      const std::int64_t nb = std::min(NB, n - j0);
      std::fill(acc, acc + MR * NB, U{0});
      for (std::int64_t q = 0; q < k; ++q) {
        U a[MR] = {0, 0, 0, 0};
        for (std::int64_t r = 0; r < mr; ++r) a[r] = u(A[(i0 + r) * k + q]);
        if ((a[0] | a[1] | a[2] | a[3]) == 0) continue;  // exact for integers (no NaN to keep)
        const T* bq = B + q * n + j0;
        U* __restrict c0 = acc;
        U* __restrict c1 = acc + NB;
        U* __restrict c2 = acc + 2 * NB;
        U* __restrict c3 = acc + 3 * NB;
        const U a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
        for (std::int64_t j = 0; j < nb; ++j) {
          const U b = u(bq[j]);
          c0[j] += a0 * b;
          c1[j] += a1 * b;
          c2[j] += a2 * b;
          c3[j] += a3 * b;
        }
      }
      for (std::int64_t r = 0; r < mr; ++r) {
        T* c = Cm + (i0 + r) * n + j0;
        const U* s = acc + r * NB;
        if constexpr (std::is_same_v<T, bool>) {
          for (std::int64_t j = 0; j < nb; ++j) c[j] = s[j] != 0;
        } else {
          for (std::int64_t j = 0; j < nb; ++j) c[j] = static_cast<T>(s[j]);
        }
      }
    }
  }
}

// Of one table row t[0..n) (input indices, -1 where padding or a hole): the valid entries as
// one run [lo, hi) of consecutive input indices, when they are (ok; no lhs dilation or stride
// along the row), so the row is zeros, a copy, zeros; else ok is false (gather element-wise).
struct ConvRun {
  std::int64_t lo = 0, hi = 0;
  bool ok = false;
};

inline ConvRun conv_run(const std::int64_t* t, std::int64_t n, std::int64_t step) {
  ConvRun r;
  std::int64_t j = 0;
  while (j < n && t[j * step] < 0) ++j;
  r.lo = r.hi = j;
  while (j < n && t[j * step] >= 0 && t[j * step] == t[r.lo * step] + (j - r.lo)) ++j;
  r.hi = j;
  while (j < n && t[j * step] < 0) ++j;
  r.ok = j == n;
  return r;
}

// C[m x n] = A[m x k] . B[k x n], row-major, through the BLAS hook when set.
template <class T>
inline void conv_gemm(const T* A, const T* B, T* Cm, std::int64_t m, std::int64_t n, std::int64_t k) {
  void* fn = nullptr;
  if constexpr (std::is_same_v<T, float>) fn = blas().sgemm;
  else if constexpr (std::is_same_v<T, double>) fn = blas().dgemm;
  else if constexpr (std::is_same_v<T, std::complex<float>>) fn = blas().cgemm;
  else if constexpr (std::is_same_v<T, std::complex<double>>) fn = blas().zgemm;
  if (fn && m > 0 && n > 0 && k > 0 && m < (1LL << 31) && n < (1LL << 31) && k < (1LL << 31)) {
    const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
    if constexpr (is_complex_v<T>) {
      const T one(1), zero(0);
      reinterpret_cast<complex_gemm_t>(fn)(kRowMajor, kNoTrans, kNoTrans, mi, ni, ki, &one, A, ki, B, ni, &zero,
                                           Cm, ni);
    } else {
      reinterpret_cast<real_gemm_t<T>>(fn)(kRowMajor, kNoTrans, kNoTrans, mi, ni, ki, T(1), A, ki, B, ni, T(0), Cm,
                                           ni);
    }
    return;
  }
  if constexpr (std::is_integral_v<T>) {
    conv_int_gemm(A, B, Cm, m, n, k);
    return;
  }
  for (std::int64_t i = 0; i < m * n; ++i) Cm[i] = T(0);
  for (std::int64_t i = 0; i < m; ++i) {
    T* c = Cm + i * n;
    for (std::int64_t q = 0; q < k; ++q) {
      const T a = A[i * k + q];  // no skip of zeros: 0 * inf must stay NaN, as in the BLAS
      const T* bq = B + q * n;
      for (std::int64_t j = 0; j < n; ++j) c[j] += a * bq[j];
    }
  }
}

// C[m x n] = A[m x k] . B[n x k]^T, row-major, through the BLAS hook (the caller checks
// conv_gemm_nt_ok first).
template <class T>
inline bool conv_gemm_nt_ok(std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m <= 0 || n <= 0 || k <= 0 || m >= (1LL << 31) || n >= (1LL << 31) || k >= (1LL << 31)) return false;
  if constexpr (std::is_same_v<T, float>) return blas().sgemm != nullptr;
  else if constexpr (std::is_same_v<T, double>) return blas().dgemm != nullptr;
  else if constexpr (std::is_same_v<T, std::complex<float>>) return blas().cgemm != nullptr;
  else if constexpr (std::is_same_v<T, std::complex<double>>) return blas().zgemm != nullptr;
  else return false;
}

template <class T>
inline void conv_gemm_nt(const T* A, const T* B, T* Cm, std::int64_t m, std::int64_t n, std::int64_t k) {
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  if constexpr (std::is_same_v<T, float>) {
    reinterpret_cast<real_gemm_t<T>>(blas().sgemm)(kRowMajor, kNoTrans, kTrans, mi, ni, ki, T(1), A, ki, B, ki,
                                                   T(0), Cm, ni);
  } else if constexpr (std::is_same_v<T, double>) {
    reinterpret_cast<real_gemm_t<T>>(blas().dgemm)(kRowMajor, kNoTrans, kTrans, mi, ni, ki, T(1), A, ki, B, ki,
                                                   T(0), Cm, ni);
  } else if constexpr (is_complex_v<T>) {
    const T one(1), zero(0);
    void* fn = std::is_same_v<T, std::complex<float>> ? blas().cgemm : blas().zgemm;
    reinterpret_cast<complex_gemm_t>(fn)(kRowMajor, kNoTrans, kTrans, mi, ni, ki, &one, A, ki, B, ki, &zero, Cm,
                                         ni);
  }
}

// One row of the transposed patch matrix: for output position `q` (per axis), the input plane
// `x` read at every window offset (Kp, the last window axis fastest), written to `row`.  Used
// where the windows are long and the output rows short (the kernel gradient, a convolution of
// the input with the output's cotangent as its window: a 3x3 output, 32x32 windows), where the
// patch rows of `conv_row` would be 3 elements long.
template <class T>
inline void conv_row_t(const T* x, const ConvGeom& g, const std::int64_t* const* tab, const std::int64_t* q,
                       const std::int64_t* in_str, const ConvRun* runs, T* row) {
  const std::int64_t ns = g.ns, last = ns - 1, kl = g.K[last], pl = g.P[last];
  const std::int64_t* tl = tab[last] + q[last];
  const ConvRun ru = runs[q[last]];
  const std::int64_t outer = g.Kp / kl;
  std::int64_t kidx[8] = {0};
  for (std::int64_t o = 0; o < outer; ++o) {
    std::int64_t base = 0;
    bool valid = true;
    for (std::int64_t d = 0; d < last; ++d) {
      const std::int64_t v = tab[d][kidx[d] * g.P[d] + q[d]];
      if (v < 0) {
        valid = false;
        break;
      }
      base += v * in_str[d];
    }
    T* r = row + o * kl;
    if (!valid) {
      for (std::int64_t j = 0; j < kl; ++j) r[j] = T(0);
    } else {
      const T* xb = x + base;
      if (ru.ok) {
        for (std::int64_t j = 0; j < ru.lo; ++j) r[j] = T(0);
        if (ru.hi > ru.lo) std::copy(xb + tl[ru.lo * pl], xb + tl[ru.lo * pl] + (ru.hi - ru.lo), r + ru.lo);
        for (std::int64_t j = ru.hi; j < kl; ++j) r[j] = T(0);
      } else {
        for (std::int64_t j = 0; j < kl; ++j) {
          const std::int64_t v = tl[j * pl];
          r[j] = v >= 0 ? xb[v] : T(0);
        }
      }
    }
    for (std::int64_t d = last; d-- > 0;) {
      if (++kidx[d] < g.K[d]) break;
      kidx[d] = 0;
    }
  }
}

// One row of the patch matrix: for window offset `off` (per axis), the input plane `x` (one
// batch index and feature, S row-major) read at every output position, written to `row` (Pp).
// tab[d] holds, per (window index, output index) of axis d, the input index or -1.
template <class T>
inline void conv_row(const T* x, const ConvGeom& g, const std::int64_t* const* tab, const std::int64_t* off,
                     const std::int64_t* in_str, const ConvRun* runs, T* row) {
  const std::int64_t ns = g.ns;
  if (ns == 0) {
    row[0] = x[0];
    return;
  }
  // odometer over the output positions of axes 0..ns-2, the last axis a tight loop
  std::int64_t idx[8] = {0};
  const std::int64_t last = ns - 1, pl = g.P[last];
  const std::int64_t* tl = tab[last] + off[last] * pl;
  std::int64_t outer = g.Pp / std::max<std::int64_t>(pl, 1);
  if (pl == 0) return;
  const ConvRun ru = runs[off[last]];
  for (std::int64_t o = 0; o < outer; ++o) {
    std::int64_t base = 0;
    bool valid = true;
    for (std::int64_t d = 0; d < last; ++d) {
      const std::int64_t v = tab[d][off[d] * g.P[d] + idx[d]];
      if (v < 0) {
        valid = false;
        break;
      }
      base += v * in_str[d];
    }
    T* r = row + o * pl;
    if (!valid) {
      for (std::int64_t j = 0; j < pl; ++j) r[j] = T(0);
    } else {
      const T* xb = x + base;
      if (ru.ok) {
        for (std::int64_t j = 0; j < ru.lo; ++j) r[j] = T(0);
        if (ru.hi > ru.lo) std::copy(xb + tl[ru.lo], xb + tl[ru.lo] + (ru.hi - ru.lo), r + ru.lo);
        for (std::int64_t j = ru.hi; j < pl; ++j) r[j] = T(0);
      } else {
        for (std::int64_t j = 0; j < pl; ++j) r[j] = tl[j] >= 0 ? xb[tl[j]] : T(0);
      }
    }
    for (std::int64_t d = last; d-- > 0;) {
      if (++idx[d] < g.P[d]) break;
      idx[d] = 0;
    }
  }
}

// The calling thread's scratch for a convolution's patch matrix or products, of at least n
// elements of T: one buffer per thread shared by both forms and every dtype (a first call that
// used one per form and type touched, and so mapped, each of them: LeNet's step had two of
// ~4 MB per thread).  Grown, never cleared; pages populated when made (vm/pages.hpp).
template <class T>
inline T* conv_scratch(std::size_t n) {
  thread_local GrowBuffer<std::uint64_t> buf;
  const std::size_t words = (n * sizeof(T) + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t);
  return reinterpret_cast<T*>(buf.get(words));
}

// The batch entries per chunk of a convolution whose scratch (patch matrix or products) holds
// `per_entry` elements per entry and whose product has `cols_per_entry` columns per entry: a
// scratch of about 2^18 elements (1 MB of float32, which stays in L2 between im2col and the
// GEMM, and a first call maps less fresh memory), unless that leaves the product fewer than 64
// columns (a kernel gradient's 3 x 3 output: 9 columns an entry), then up to 2^20 elements.
// LeNet's step on two threads, 2^20 before: 5.9 -> 5.5 ms (its first patch matrix 2.5 -> 0.9 MB
// per thread); 2^18 alone took the ResNet block's kernel gradients from 12 to 21 ms (products of
// 9 columns).
inline std::int64_t conv_chunk_entries(std::int64_t per_entry, std::int64_t cols_per_entry) {
  const std::int64_t e = std::max<std::int64_t>(per_entry, 1);
  const std::int64_t cols = std::max<std::int64_t>(cols_per_entry, 1);
  const std::int64_t want = std::max((std::int64_t{1} << 18) / e, (64 + cols - 1) / cols);
  return std::max<std::int64_t>(1, std::min(want, (std::int64_t{1} << 20) / e));
}

// How a convolution's output batch is cut into tasks for `groups` groups: chunks of at most
// `per` batch entries (the scratch budget), at least as many as the threads the work warrants and
// a multiple of them where the batch allows, all of one size. (Chunks of the budget alone cut
// LeNet's 64 entries into 53 + 11 and 63 + 1: the second thread idled, and its steps ran at one
// thread's speed.)
struct ConvChunks {
  std::int64_t chunk = 1, n_chunks = 1, threads = 1;
  std::int64_t want = 1;  // the threads the work warrants
};

inline ConvChunks conv_chunks(std::int64_t n1, std::int64_t per, std::int64_t groups, double work) {
  ConvChunks c;
  const std::int64_t want = c.want = std::min<std::int64_t>(
      detail::cores(), static_cast<std::int64_t>(std::min(work / (1 << 22), 1e6)) + 1);
  std::int64_t n = (n1 + per - 1) / per;
  if (groups == 1 && want > 1) n = std::min(n1, (n + want - 1) / want * want);
  else if (n * groups < want) n = std::min(n1, (want + groups - 1) / groups);
  n = std::max<std::int64_t>(n, 1);
  c.chunk = (n1 + n - 1) / n;
  c.n_chunks = (n1 + c.chunk - 1) / c.chunk;
  c.threads = std::max<std::int64_t>(1, std::min(want, c.n_chunks * groups));
  return c;
}

// ---- the scatter form (col2im) ----
// A convolution whose output is larger than its input (a transposed convolution: an input
// gradient, padded by the window less one, or read through lhs dilation), or with far fewer
// output features than input features, spends most of the gather form above on zeros or on
// its patch matrix: LeNet's second input gradient has 5M patch elements for 0.96M
// products that are not of padding. The scatter form multiplies each input element once by each
// window element, G = W' . X with W' the kernel as [(o, k) x i] rows and X the input as [i x
// (batch, s)], then adds each product G[(o, k), (b, s)] into the output position that reads input
// s through window offset k: per axis p = (s * ld + lo - k * rd) / st, where it divides and is in
// range. The same sums as the gather form less its products of padding and of holes. Those are
// zeros unless the kernel holds an infinity or NaN: then the gather form's 0 * inf makes NaNs
// where XLA's convolution (which never multiplies padding) gives finite values or infinities, so
// a non-finite kernel takes this form whatever the sizes.

template <class T>
inline bool conv_scatter_pays(const T* w, const ConvGeom& g) {
  // (floating and complex only: integers keep the gather form, whose sums wrap in unsigned
  // arithmetic, conv_int_gemm)
  if (g.ns == 0) return false;
  // fewer products (a larger output), or less memory traffic: the scatter form writes and adds
  // og * Kp values per input position, the gather form's patch matrix holds I * Kp per output
  // position (LeNet's first input gradient: one output feature from six, 3.6 -> 1.0 ms)
  const std::int64_t og = g.O / std::max(g.G, g.BG);
  if (g.Sp < g.Pp || og * g.Sp * 2 <= g.I * g.Pp) return true;
  const std::int64_t nw = g.O * g.I * g.Kp;
  for (std::int64_t i = 0; i < nw; ++i)
    if (!std::isfinite(std::abs(w[i]))) return true;
  return false;
}

template <class T>
inline void conv_scatter(const T* x, const T* w, T* y, const ConvGeom& g) {
  const std::int64_t ns = g.ns, G = std::max(g.G, g.BG), og = g.O / G, OK = og * g.Kp, last = ns - 1;
  const std::int64_t Sl = g.S[last], outer = g.Sp / std::max<std::int64_t>(Sl, 1);  // input rows
  // per axis: the output index that input index s reaches through window index k, or -1
  std::vector<std::int64_t> tabs;
  std::int64_t toff[8];
  for (std::int64_t d = 0; d < ns; ++d) {
    toff[d] = static_cast<std::int64_t>(tabs.size());
    for (std::int64_t kk = 0; kk < g.K[d]; ++kk)
      for (std::int64_t s = 0; s < g.S[d]; ++s) {
        const std::int64_t q = s * g.ld[d] + g.lo[d] - kk * g.rd[d];
        const std::int64_t p = q >= 0 && q % g.st[d] == 0 ? q / g.st[d] : -1;
        tabs.push_back(p >= 0 && p < g.P[d] ? p : -1);
      }
  }
  std::vector<StepRun> runs;
  for (std::int64_t kk = 0; kk < g.K[last]; ++kk) runs.push_back(step_run(tabs.data() + toff[last] + kk * Sl, Sl));
  std::int64_t out_str[8];
  out_str[last] = 1;
  for (std::int64_t d = last; d-- > 0;) out_str[d] = out_str[d + 1] * g.P[d + 1];
  // the kernel as [(o, k) x i] per group
  std::vector<T> wt(static_cast<std::size_t>(G * OK * g.I));
  for (std::int64_t grp = 0; grp < G; ++grp)
    for (std::int64_t o = 0; o < og; ++o)
      for (std::int64_t i = 0; i < g.I; ++i) {
        const T* src = w + ((grp * og + o) * g.I + i) * g.Kp;
        T* dst = wt.data() + (grp * OK + o * g.Kp) * g.I + i;
        for (std::int64_t kk = 0; kk < g.Kp; ++kk) dst[kk * g.I] = src[kk];
      }
  const std::int64_t per = conv_chunk_entries((OK + g.I) * g.Sp, g.Sp);
  const double work = static_cast<double>(g.N1 * g.Sp) * static_cast<double>(g.O * g.Kp * g.I);
  const ConvChunks cc = conv_chunks(g.N1, per, G, work);
  const std::int64_t chunk = cc.chunk, tasks = cc.n_chunks * G, threads = cc.threads;
  auto run = [&](std::int64_t task) {
    const std::int64_t grp = task % G, c0 = task / G * chunk, nc = std::min(chunk, g.N1 - c0);
    const std::int64_t cols = nc * g.Sp;
    T* xb = conv_scratch<T>(static_cast<std::size_t>(g.I * cols + OK * cols));
    T* gm = xb + g.I * cols;
    for (std::int64_t i = 0; i < g.I; ++i)
      for (std::int64_t b = 0; b < nc; ++b) {
        const std::int64_t n = (g.BG > 1 ? grp * g.N1 : 0) + c0 + b;
        const T* src = x + (n * g.C + (g.G > 1 ? grp * g.I : 0) + i) * g.Sp;
        std::copy(src, src + g.Sp, xb + i * cols + b * g.Sp);
      }
    conv_gemm<T>(wt.data() + grp * OK * g.I, xb, gm, OK, cols, g.I);
    std::int64_t kidx[8], sidx[8];
    for (std::int64_t b = 0; b < nc; ++b)
      for (std::int64_t o = 0; o < og; ++o) {
        T* yp = y + ((c0 + b) * g.O + grp * og + o) * g.Pp;
        std::fill(yp, yp + g.Pp, T(0));
        for (std::int64_t d = 0; d < ns; ++d) kidx[d] = 0;
        for (std::int64_t kf = 0; kf < g.Kp; ++kf) {
          const T* gr = gm + (o * g.Kp + kf) * cols + b * g.Sp;
          const std::int64_t* tl = tabs.data() + toff[last] + kidx[last] * Sl;
          const StepRun& ru = runs[kidx[last]];
          for (std::int64_t d = 0; d < last; ++d) sidx[d] = 0;
          for (std::int64_t so = 0; so < outer; ++so) {
            std::int64_t base = 0;
            bool ok = true;
            for (std::int64_t d = 0; d < last; ++d) {
              const std::int64_t p = tabs[toff[d] + kidx[d] * g.S[d] + sidx[d]];
              if (p < 0) {
                ok = false;
                break;
              }
              base += p * out_str[d];
            }
            if (ok) {
              const T* gs = gr + so * Sl;
              T* yb = yp + base;
              if (ru.ok) {
                if (ru.hi > ru.lo) {
                  T* yo = yb + tl[ru.lo];
                  const T* go = gs + ru.lo;
                  const std::int64_t len = ru.hi - ru.lo, ps = ru.s;
                  if (ps == 1) {
                    for (std::int64_t j = 0; j < len; ++j) yo[j] += go[j];
                  } else {
                    for (std::int64_t j = 0; j < len; ++j) yo[j * ps] += go[j];
                  }
                }
              } else {
                for (std::int64_t s = 0; s < Sl; ++s)
                  if (tl[s] >= 0) yb[tl[s]] += gs[s];
              }
            }
            for (std::int64_t d = last; d-- > 0;) {
              if (++sidx[d] < g.S[d]) break;
              sidx[d] = 0;
            }
          }
          for (std::int64_t d = ns; d-- > 0;) {
            if (++kidx[d] < g.K[d]) break;
            kidx[d] = 0;
          }
        }
      }
  };
  if (threads <= 1) {
    for (std::int64_t t = 0; t < tasks; ++t) run(t);
  } else {
    detail::parallel_chunks(tasks, static_cast<int>(threads), [&](std::int64_t t, int) { run(t); });
  }
}

template <class T>
inline void conv(const T* x, const T* w, T* y, const ConvGeom& g) {
  const std::int64_t ns = g.ns, k = std::max(g.G, g.BG), og = g.O / k, IK = g.I * g.Kp;
  const std::int64_t out_size = g.N1 * g.O * g.Pp;
  if (out_size == 0) return;
  if (IK == 0 || g.Pp == 0) {
    for (std::int64_t i = 0; i < out_size; ++i) y[i] = T(0);
    return;
  }
  if constexpr (!std::is_integral_v<T>) {
    if (conv_scatter_pays(w, g)) {
      conv_scatter(x, w, y, g);
      return;
    }
  }
  // per spatial axis: the input index read by window index kk at output index p, or -1
  std::vector<std::int64_t> tabs;
  std::int64_t tab_off[8], in_str[8];
  for (std::int64_t d = 0; d < ns; ++d) {
    tab_off[d] = static_cast<std::int64_t>(tabs.size());
    const std::int64_t dil_len = g.S[d] == 0 ? 0 : (g.S[d] - 1) * g.ld[d] + 1;
    for (std::int64_t kk = 0; kk < g.K[d]; ++kk)
      for (std::int64_t p = 0; p < g.P[d]; ++p) {
        const std::int64_t q = p * g.st[d] + kk * g.rd[d] - g.lo[d];
        tabs.push_back(q < 0 || q >= dil_len || q % g.ld[d] ? -1 : q / g.ld[d]);
      }
  }
  const std::int64_t* tab[8];
  for (std::int64_t d = 0; d < ns; ++d) tab[d] = tabs.data() + tab_off[d];
  // of the last axis: per window index its run over the output positions (conv_row), and per
  // output position its run over the window indices (conv_row_t)
  std::vector<ConvRun> runs, runs_t;
  if (ns > 0) {
    const std::int64_t kl = g.K[ns - 1], pl = g.P[ns - 1];
    for (std::int64_t kk = 0; kk < kl; ++kk) runs.push_back(conv_run(tab[ns - 1] + kk * pl, pl, 1));
    for (std::int64_t q = 0; q < pl; ++q) runs_t.push_back(conv_run(tab[ns - 1] + q, kl, pl));
  }
  in_str[ns > 0 ? ns - 1 : 0] = 1;
  for (std::int64_t d = ns - 1; d-- > 0;) in_str[d] = in_str[d + 1] * g.S[d + 1];
  // chunks of output batch indices: a patch matrix of about 2^18 elements each, 2^20 at most
  // (conv_chunk_entries; 2^22 was 25% slower on LeNet's step, first call 1.5x, one thread)
  const std::int64_t per = conv_chunk_entries(IK * g.Pp, g.Pp);
  const double work = static_cast<double>(out_size) * static_cast<double>(IK);
  const ConvChunks cc = conv_chunks(g.N1, per, k, work);
  const std::int64_t chunk = cc.chunk;
  // long windows over short output rows (a kernel gradient): the patch matrix transposed, its
  // rows whole windows, and the product against it as a transposed operand
  const bool transposed = ns > 0 && g.P[ns - 1] < g.K[ns - 1] && g.Pp < g.Kp &&
                          conv_gemm_nt_ok<T>(og, chunk * g.Pp, IK);
  // A kernel gradient's output batch is the input's features (LeNet's first: 1), too few tasks
  // for the threads its work warrants: the transposed form's rows are cut by output position too
  // (each part its own patch rows and product columns; nothing is summed across parts).
  const std::int64_t groups = cc.n_chunks * k;
  const std::int64_t parts =
      transposed && groups < cc.want ? std::min(g.Pp, (cc.want + groups - 1) / groups) : 1;
  const std::int64_t tasks = cc.n_chunks * k * parts, threads = std::min(cc.want, tasks);
  auto run = [&](std::int64_t task) {
    // bool's patches live in bytes (std::vector<bool> packs bits and has no data())
    using Cell = std::conditional_t<std::is_same_v<T, bool>, std::uint8_t, T>;
    static_assert(sizeof(Cell) == sizeof(T));
    const std::int64_t part = task % parts, gt = task / parts;
    const std::int64_t grp = gt % k, c0 = gt / k * chunk, nc = std::min(chunk, g.N1 - c0);
    // this task's output positions [q0, q1) of each batch entry (all of them unless parts > 1)
    const std::int64_t q0 = g.Pp * part / parts, q1 = g.Pp * (part + 1) / parts, np = q1 - q0;
    const std::int64_t cols = nc * np;
    T* col = reinterpret_cast<T*>(conv_scratch<Cell>(static_cast<std::size_t>(IK * cols + og * cols)));
    T* res = col + IK * cols;
    const std::int64_t cin0 = g.G > 1 ? grp * g.I : 0;
    if (transposed) {  // col as [cols x IK]: rows (batch, output position), windows contiguous
      std::int64_t q[8];
      for (std::int64_t b = 0; b < nc; ++b) {
        const std::int64_t n = (g.BG > 1 ? grp * g.N1 : 0) + c0 + b;
        for (std::int64_t pq = q0; pq < q1; ++pq) {
          std::int64_t rem = pq;
          for (std::int64_t d = ns; d-- > 0;) {
            q[d] = rem % g.P[d];
            rem /= g.P[d];
          }
          T* row = col + (b * np + pq - q0) * IK;
          for (std::int64_t i = 0; i < g.I; ++i)
            conv_row_t<T>(x + (n * g.C + cin0 + i) * g.Sp, g, tab, q, in_str, runs_t.data(), row + i * g.Kp);
        }
      }
      conv_gemm_nt<T>(w + grp * og * IK, col, res, og, cols, IK);
    } else {
    std::int64_t off[8];
    for (std::int64_t i = 0; i < g.I; ++i) {
      for (std::int64_t kf = 0; kf < g.Kp; ++kf) {
        std::int64_t rem = kf;
        for (std::int64_t d = ns; d-- > 0;) {
          off[d] = rem % g.K[d];
          rem /= g.K[d];
        }
        T* row = col + (i * g.Kp + kf) * cols;
        for (std::int64_t b = 0; b < nc; ++b) {
          const std::int64_t n = (g.BG > 1 ? grp * g.N1 : 0) + c0 + b;
          const T* plane = x + (n * g.C + cin0 + i) * g.Sp;
          conv_row<T>(plane, g, tab, off, in_str, runs.data(), row + b * g.Pp);
        }
      }
    }
    conv_gemm<T>(w + grp * og * IK, col, res, og, cols, IK);
    }
    for (std::int64_t b = 0; b < nc; ++b)
      for (std::int64_t o = 0; o < og; ++o) {
        const T* src = res + o * cols + b * np;
        T* dst = y + ((c0 + b) * g.O + grp * og + o) * g.Pp + q0;
        std::copy(src, src + np, dst);
      }
  };
  if (threads <= 1) {
    for (std::int64_t t = 0; t < tasks; ++t) run(t);
  } else {
    detail::parallel_chunks(tasks, static_cast<int>(threads), [&](std::int64_t t, int) { run(t); });
  }
}

// The geometry from the instruction (attrs: n, strides..., n, low..., n, high..., n, lhs
// dilation..., n, rhs dilation..., feature groups, batch groups; validated by validate.hpp).
inline ConvGeom conv_geom(const Program& p, const std::uint32_t* a, std::uint32_t out, const std::int64_t* at) {
  ConvGeom g;
  g.ns = at[0];
  const std::int64_t n = g.ns;
  const std::int64_t *st = at + 1, *lo = st + n + 1, *ld = lo + 2 * (n + 1), *rd = ld + n + 1;
  const std::int64_t* xs = p.shape(a[0]);
  const std::int64_t* ws = p.shape(a[1]);
  const std::int64_t* ys = p.shape(out);
  g.N = xs[0], g.C = xs[1], g.O = ws[0], g.I = ws[1], g.N1 = ys[0];
  g.G = rd[n], g.BG = rd[n + 1];
  for (std::int64_t d = 0; d < n; ++d) {
    g.S[d] = xs[2 + d], g.K[d] = ws[2 + d], g.P[d] = ys[2 + d];
    g.st[d] = st[d], g.lo[d] = lo[d], g.ld[d] = ld[d], g.rd[d] = rd[d];
    g.Sp *= g.S[d], g.Kp *= g.K[d], g.Pp *= g.P[d];
  }
  return g;
}

inline void run_conv(const Program& p, const std::uint32_t* a, std::uint32_t out, const std::int64_t* at, DType dt,
                     void* y, void** ptr) {
  const ConvGeom g = conv_geom(p, a, out, at);
  switch (dt) {
    case DType::F32: conv<float>(static_cast<const float*>(ptr[a[0]]), static_cast<const float*>(ptr[a[1]]), static_cast<float*>(y), g); return;
    case DType::F64: conv<double>(static_cast<const double*>(ptr[a[0]]), static_cast<const double*>(ptr[a[1]]), static_cast<double*>(y), g); return;
    case DType::C64:
      conv<std::complex<float>>(static_cast<const std::complex<float>*>(ptr[a[0]]),
                                static_cast<const std::complex<float>*>(ptr[a[1]]), static_cast<std::complex<float>*>(y), g);
      return;
    case DType::C128:
      conv<std::complex<double>>(static_cast<const std::complex<double>*>(ptr[a[0]]),
                                 static_cast<const std::complex<double>*>(ptr[a[1]]), static_cast<std::complex<double>*>(y), g);
      return;
#define TIDU_CONV_INT(code, type)                                                                          \
  case DType::code:                                                                                        \
    conv<type>(static_cast<const type*>(ptr[a[0]]), static_cast<const type*>(ptr[a[1]]), static_cast<type*>(y), g); \
    return;
    TIDU_CONV_INT(I8, std::int8_t)
    TIDU_CONV_INT(I16, std::int16_t)
    TIDU_CONV_INT(I32, std::int32_t)
    TIDU_CONV_INT(I64, std::int64_t)
    TIDU_CONV_INT(U8, std::uint8_t)
    TIDU_CONV_INT(U16, std::uint16_t)
    TIDU_CONV_INT(U32, std::uint32_t)
    TIDU_CONV_INT(U64, std::uint64_t)
    TIDU_CONV_INT(Bool, bool)
#undef TIDU_CONV_INT
    default: throw std::runtime_error("tidu: Conv of an unsupported dtype");
  }
}


// ---- ReduceWindowSum / Max / Min ----
// y[p] = reduce over window offsets k of x at dilated coordinate p * stride + k * window
// dilation - low padding, read only where it falls on an element (not padding, not a hole of
// base dilation); elsewhere the identity.  Max and min propagate NaN (XLA's maximum/minimum).
template <class T>
inline T window_identity(Op op) {
  if (op == Op::ReduceWindowSum) return T(0);
  if constexpr (std::is_floating_point_v<T>)
    return op == Op::ReduceWindowMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  else if constexpr (std::is_integral_v<T>)
    return op == Op::ReduceWindowMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  else
    return T(0);
}

template <class T>
inline void window_step(Op op, T& acc, T v) {
  if (op == Op::ReduceWindowSum) {
    acc += v;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v) || std::isnan(acc)) acc = std::numeric_limits<T>::quiet_NaN();
    else if (op == Op::ReduceWindowMax ? v > acc : v < acc) acc = v;
  } else if constexpr (std::is_integral_v<T>) {
    if (op == Op::ReduceWindowMax ? v > acc : v < acc) acc = v;
  }
}

// y[j] (op)= x[j * s] for j < n: one window offset of the last axis over a run of outputs that
// read input elements s apart (2x2 pooling: s = 2), branch-free (vectorisable); NaN propagates
// as in window_step.  K: 0 sum, 1 max, 2 min.
template <class T, int K>
inline void window_op(T& y, T v) {
  if constexpr (K == 0) {
    y += v;
  } else if constexpr (std::is_floating_point_v<T>) {
    y = ((K == 1 ? v > y : v < y) | (v != v)) ? v : y;
  } else if constexpr (std::is_integral_v<T>) {
    y = (K == 1 ? v > y : v < y) ? v : y;
  }
}

template <class T, int K>
inline void window_run(T* y, const T* x, std::int64_t n, std::int64_t s) {
  for (std::int64_t j = 0; j < n; ++j) window_op<T, K>(y[j], x[j * s]);
}

// The same over lanes: y[j * L + c] (op)= x[j * s + c] for c < L (the unwindowed, contiguous last
// axis of an NHWC pool: the channels), the inner loop vectorised along them.
template <class T, int K>
inline void window_run_lanes(T* y, const T* x, std::int64_t n, std::int64_t s, std::int64_t L) {
  for (std::int64_t j = 0; j < n; ++j) {
    T* yj = y + j * L;
    const T* xj = x + j * s;
    for (std::int64_t c = 0; c < L; ++c) window_op<T, K>(yj[c], xj[c]);
  }
}

// Per axis d a table of (window index, output index) -> input index or -1 (padding, a hole of
// base dilation); the outer axes walk an odometer, the last axis is a tight loop over the table.
template <class T>
inline void reduce_window(Op op, const T* x, const std::int64_t* xs, std::uint32_t nd, const std::int64_t* at,
                          const std::int64_t* ys, T* y) {
  const std::int64_t n = at[0];
  const std::int64_t *wd = at + 1, *st = wd + n + 1, *lo = st + n + 1, *bd = lo + 2 * (n + 1),
                     *wdil = bd + n + 1;
  std::int64_t xstr[16], out_size = 1;
  row_major_strides(xs, nd, xstr);
  for (std::uint32_t d = 0; d < nd; ++d) out_size *= ys[d];
  const T ident = window_identity<T>(op);
  if (out_size == 0) return;
  if (nd == 0) {
    y[0] = ident;
    window_step(op, y[0], x[0]);
    return;
  }
  // Channels last (an NHWC pool): a trailing axis with a window of 1, stride 1, no padding and
  // no dilation is taken as L lanes of every element, so the loops below run over the axes
  // before it and each step moves L contiguous values (a few channels per window step would
  // otherwise pay the table walk for each).
  const std::int64_t* hi = lo + n + 1;
  std::int64_t L = 1;
  std::uint32_t ndw = nd;  // the axes the loops walk
  if (nd >= 2 && wd[nd - 1] == 1 && st[nd - 1] == 1 && lo[nd - 1] == 0 && hi[nd - 1] == 0 &&
      bd[nd - 1] == 1 && wdil[nd - 1] == 1) {
    L = xs[nd - 1];
    ndw = nd - 1;
  }
  std::vector<std::int64_t> tabs;
  std::int64_t toff[16];
  for (std::uint32_t d = 0; d < ndw; ++d) {
    toff[d] = static_cast<std::int64_t>(tabs.size());
    for (std::int64_t k = 0; k < wd[d]; ++k)
      for (std::int64_t p = 0; p < ys[d]; ++p) {
        const std::int64_t q = p * st[d] + k * wdil[d] - lo[d];
        tabs.push_back(q < 0 || q % bd[d] || q / bd[d] >= xs[d] ? -1 : (q / bd[d]) * xstr[d]);
      }
  }
  const std::uint32_t last = ndw - 1;
  const std::int64_t pl = ys[last], kl = wd[last];
  const std::int64_t* tl = tabs.data() + toff[last];
  const std::int64_t outer = out_size / (pl * L);
  std::int64_t win_outer = 1;
  for (std::uint32_t d = 0; d < last; ++d) win_outer *= wd[d];
  std::vector<StepRun> runs;
  for (std::int64_t k = 0; k < kl; ++k) runs.push_back(step_run(tl + k * pl, pl));
  const int kind = op == Op::ReduceWindowSum ? 0 : op == Op::ReduceWindowMax ? 1 : 2;
  // output rows [r0, r1): each reads x only and writes its own row, so chunks of rows run on
  // tidu's threads; pidx (the row's index along the axes before the last) starts at r0's
  auto rows = [&](std::int64_t r0, std::int64_t r1) {
    std::int64_t pidx[16] = {0};
    detail::unravel(r0, ys, last, pidx);
    for (std::int64_t o = r0; o < r1; ++o) {
      T* yr = y + o * pl * L;
      for (std::int64_t j = 0; j < pl * L; ++j) yr[j] = ident;
      std::int64_t kidx[16] = {0};
      for (std::int64_t w = 0; w < win_outer; ++w) {
        std::int64_t base = 0;
        bool ok = true;
        for (std::uint32_t d = 0; d < last; ++d) {
          const std::int64_t v = tabs[toff[d] + kidx[d] * ys[d] + pidx[d]];
          if (v < 0) {
            ok = false;
            break;
          }
          base += v;
        }
        if (ok) {
          const T* xb = x + base;
          for (std::int64_t k = 0; k < kl; ++k) {
            const std::int64_t* tk = tl + k * pl;
            const StepRun& r = runs[k];
            if (r.ok) {
              if (r.hi > r.lo) {
                T* yo = yr + r.lo * L;
                const T* xo = xb + tk[r.lo];
                const std::int64_t len = r.hi - r.lo;
                if (L > 1) {
                  if (kind == 0)
                    window_run_lanes<T, 0>(yo, xo, len, r.s, L);
                  else if (kind == 1)
                    window_run_lanes<T, 1>(yo, xo, len, r.s, L);
                  else
                    window_run_lanes<T, 2>(yo, xo, len, r.s, L);
                } else if (kind == 0) {
                  window_run<T, 0>(yo, xo, len, r.s);
                } else if (kind == 1) {
                  window_run<T, 1>(yo, xo, len, r.s);
                } else {
                  window_run<T, 2>(yo, xo, len, r.s);
                }
              }
            } else {
              for (std::int64_t j = 0; j < pl; ++j)
                if (tk[j] >= 0)
                  for (std::int64_t c = 0; c < L; ++c) window_step(op, yr[j * L + c], xb[tk[j] + c]);
            }
          }
        }
        for (std::uint32_t d = last; d-- > 0;) {
          if (++kidx[d] < wd[d]) break;
          kidx[d] = 0;
        }
      }
      for (std::uint32_t d = last; d-- > 0;) {
        if (++pidx[d] < ys[d]) break;
        pidx[d] = 0;
      }
    }
  };
  const std::int64_t chunks = window_chunks(outer, static_cast<double>(pl * L * win_outer * kl));
  detail::parallel_chunks(chunks, num_threads(), [&](std::int64_t c, int) {
    rows(outer * c / chunks, outer * (c + 1) / chunks);
  });
}

inline void run_reduce_window(Op op, const Program& p, const std::uint32_t* a, std::uint32_t out, const std::int64_t* at,
                              DType dt, void* y, void** ptr) {
  const std::int64_t* xs = p.shape(a[0]);
  const std::int64_t* ys = p.shape(out);
  const std::uint32_t nd = p.slots[a[0]].ndim;
  switch (dt) {
#define TIDU_RW(code, type)                                                                                   \
  case DType::code:                                                                                           \
    reduce_window<type>(op, static_cast<const type*>(ptr[a[0]]), xs, nd, at, ys, static_cast<type*>(y)); \
    return;
    TIDU_RW(F32, float)
    TIDU_RW(F64, double)
    TIDU_RW(C64, std::complex<float>)
    TIDU_RW(C128, std::complex<double>)
    TIDU_RW(I32, std::int32_t)
    TIDU_RW(I64, std::int64_t)
    TIDU_RW(I8, std::int8_t)
    TIDU_RW(I16, std::int16_t)
    TIDU_RW(U8, std::uint8_t)
    TIDU_RW(U16, std::uint16_t)
    TIDU_RW(U32, std::uint32_t)
    TIDU_RW(U64, std::uint64_t)
#undef TIDU_RW
    default: throw std::runtime_error("tidu: reduce_window of an unsupported dtype");
  }
}

}  // namespace kern
}  // namespace tidu
