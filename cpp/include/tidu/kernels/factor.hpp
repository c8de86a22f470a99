// tidu/kernels/factor.hpp - matrix factorisations with several results: LU (with pivots), Eigh, QR, SVD,
// and the row permutation by LU pivots.
//
// The interpreter's instructions have one output each, so a factorisation writes all its results
// into one buffer (its packed layout below) and the front end slices them out (tidu/ops/factor.py):
//
//   LU      (..., m, m)  -> (..., m, m + 2): [L\U | pivots | permutation], pivots and permutation
//                           0-based, stored as numbers of the matrix dtype (exact below 2^24)
//   Eigh    (..., m, m)  -> vectors: (..., m, m + 1): [V | w] (w real, ascending); values: (..., m)
//                           of the real dtype.  Reads the lower triangle.
//   QR      (..., m, n)  -> (..., m*kq + kq*n), Q (m x kq) then R (kq x n) row-major; kq = min(m, n)
//                           (reduced) or m (full_matrices)
//   SVD     (..., m, n)  -> compute_uv: (..., k + m*ku + kv*n), s, U (m x ku), Vh (kv x n); ku = kv
//                           = k = min(m, n) (reduced) or ku = m, kv = n (full); else s (..., k) of
//                           the real dtype.  s descending.
//   Eig(left, right, _) (..., m, m) -> left or right: (..., m, m*(left + right) + 1) complex:
//                           [VL | VR | w] (LAPACK ?geev: each vector of unit 2-norm, its largest
//                           component real); neither: w (..., m) complex.  Real input: complex
//                           pairs unpacked as jax's (v_j = re + i im, v_{j+1} = re - i im).  A
//                           matrix with a non-finite entry gives NaN (as jax, without calling geev).
//   Schur   (..., m, m)  -> (..., m, 2m): [T | Z], A = Z T Z^H (LAPACK ?gees, no sorting): T upper
//                           quasi-triangular (real input: 2x2 blocks for complex pairs) or
//                           triangular (complex input), Z orthogonal/unitary.  A matrix with a
//                           non-finite entry (or no convergence) gives NaN, as Eig.
//   Hessenberg (..., m, m) -> (..., m, 2m): [H | Q], A = Q H Q^H (LAPACK ?gehrd + ?orghr/?unghr):
//                           H upper Hessenberg (zero below the subdiagonal), Q orthogonal/unitary.
//   LUPermute(inverse) (pivots int32 (..., k), x (..., m, n)) -> the rows of x swapped i <-> p[i]
//                           for i = 0..k-1 (backwards when inverse); a pivot outside [0, m) is ignored.
//
// Kernels call LAPACK (Fortran interface) through FactorHooks when set: ?getrf_, ?syevd_/?heevd_,
// ?geqrf_ + ?orgqr_/?ungqr_, ?gesdd_, ?geev_, ?gees_, ?gehrd_ + ?orghr_/?unghr_.  The Python package fills them from scipy-openblas32; a C++
// embedder sets them to any LAPACK it links (tidu::kern::factor_hooks().dgetrf = (void*)&dgetrf_;
// ...).  Without hooks LU runs its own loops (partial pivoting as LAPACK's); Eigh, QR, SVD and Eig
// throw a std::runtime_error naming the missing routine.  A factorisation that fails
// (info != 0: no convergence, NaN input) gives NaN results for that matrix, as jax.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tidu/kernels/elementwise.hpp"
#include "tidu/vm/program.hpp"

namespace tidu {
namespace kern {

// ---- hooks ----

struct FactorHooks {
  void* getrf[4] = {};  // s, d, c, z
  void* syevd[4] = {};  // ssyevd, dsyevd, cheevd, zheevd
  void* geqrf[4] = {};
  void* orgqr[4] = {};  // sorgqr, dorgqr, cungqr, zungqr
  void* gesdd[4] = {};
  void* geev[4] = {};   // sgeev, dgeev, cgeev, zgeev
  void* gees[4] = {};   // sgees, dgees, cgees, zgees
  void* gehrd[4] = {};  // sgehrd, dgehrd, cgehrd, zgehrd
  void* orghr[4] = {};  // sorghr, dorghr, cunghr, zunghr
};
inline FactorHooks& factor_hooks() {
  static FactorHooks hooks;
  return hooks;
}

template <class T>
constexpr int type_index() {
  if constexpr (std::is_same_v<T, float>) return 0;
  else if constexpr (std::is_same_v<T, double>) return 1;
  else if constexpr (std::is_same_v<T, std::complex<float>>) return 2;
  else return 3;
}
template <class T>
using real_of_t = decltype(std::real(T{}));

inline void need_hook(void* fn, const char* what) {
  if (!fn)
    throw std::runtime_error(std::string("tidu: ") + what +
                             " needs LAPACK: none is set (install scipy-openblas32, or set "
                             "tidu::kern::factor_hooks() in C++)");
}

inline bool lapack_size_ok(std::int64_t a, std::int64_t b = 0) {
  constexpr std::int64_t kInt = std::numeric_limits<int>::max() / 4;
  return a <= kInt && b <= kInt && a * std::max<std::int64_t>(b, 1) <= kInt;
}

template <class T>
inline T nan_of() {
  return T(std::numeric_limits<real_of_t<T>>::quiet_NaN());
}

template <class T>
inline std::vector<T>& scratch(int which) {
  thread_local std::vector<T> buf[4];
  return buf[which];
}

// row-major r x c <-> column-major r x c
template <class T>
inline void to_colmajor(const T* a, T* col, std::int64_t r, std::int64_t c) {
  for (std::int64_t i = 0; i < r; ++i)
    for (std::int64_t j = 0; j < c; ++j) col[i + j * r] = a[i * c + j];
}
template <class T>
inline void from_colmajor(const T* col, std::int64_t ld, T* a, std::int64_t r, std::int64_t c, std::int64_t a_stride) {
  for (std::int64_t i = 0; i < r; ++i)
    for (std::int64_t j = 0; j < c; ++j) a[i * a_stride + j] = col[i + j * ld];
}

// ---- LU ----

template <class T>
inline real_of_t<T> cabs1(T x) {
  if constexpr (is_complex_v<T>) return std::abs(x.real()) + std::abs(x.imag());
  else return std::abs(x);
}

// Column-major m x m in place, piv 1-based (as ?getrf).
template <class T>
inline void getrf_loop(T* a, std::int64_t m, int* piv) {
  for (std::int64_t k = 0; k < m; ++k) {
    std::int64_t p = k;
    real_of_t<T> best = cabs1(a[k + k * m]);
    for (std::int64_t i = k + 1; i < m; ++i)
      if (cabs1(a[i + k * m]) > best) best = cabs1(a[i + k * m]), p = i;
    piv[k] = static_cast<int>(p + 1);
    if (p != k)
      for (std::int64_t j = 0; j < m; ++j) std::swap(a[k + j * m], a[p + j * m]);
    const T d = a[k + k * m];
    if (d == T(0)) continue;  // singular: leave the column (as LAPACK, info > 0)
    for (std::int64_t i = k + 1; i < m; ++i) a[i + k * m] /= d;
    for (std::int64_t j = k + 1; j < m; ++j) {
      const T f = a[k + j * m];
      if (f == T(0)) continue;
      for (std::int64_t i = k + 1; i < m; ++i) a[i + j * m] -= a[i + k * m] * f;
    }
  }
}

using getrf_t = void (*)(const int*, const int*, void*, const int*, int*, int*);

template <class T>
inline void lu(const T* X, T* Y, std::int64_t batch, std::int64_t m) {
  const std::int64_t w = m + 2;
  auto& col = scratch<T>(0);
  col.resize(static_cast<std::size_t>(m * m));
  std::vector<int> piv(static_cast<std::size_t>(m));
  std::vector<std::int64_t> perm(static_cast<std::size_t>(m));
  void* fn = factor_hooks().getrf[type_index<T>()];
  for (std::int64_t b = 0; b < batch; ++b) {
    to_colmajor(X + b * m * m, col.data(), m, m);
    if (fn && m > 0 && lapack_size_ok(m, m)) {
      const int M = static_cast<int>(m);
      int info = 0;
      reinterpret_cast<getrf_t>(fn)(&M, &M, col.data(), &M, piv.data(), &info);
    } else {
      getrf_loop(col.data(), m, piv.data());
    }
    T* out = Y + b * m * w;
    from_colmajor(col.data(), m, out, m, m, w);
    for (std::int64_t i = 0; i < m; ++i) perm[i] = i;
    for (std::int64_t i = 0; i < m; ++i) {
      std::int64_t p = piv[i] - 1;
      if (p < 0 || p >= m) p = i;
      std::swap(perm[i], perm[p]);
      out[i * w + m] = T(static_cast<real_of_t<T>>(p));
    }
    for (std::int64_t i = 0; i < m; ++i) out[i * w + m + 1] = T(static_cast<real_of_t<T>>(perm[i]));
  }
}

// Rows of X (batch x m x n) swapped by pivots (batch x k, int32).
template <class T>
inline void lu_permute(bool inverse, const std::int32_t* piv, std::int64_t k, const T* X, T* Y, std::int64_t batch,
                       std::int64_t m, std::int64_t n) {
  if (Y != X && batch * m * n) std::memcpy(Y, X, static_cast<std::size_t>(batch * m * n) * sizeof(T));
  for (std::int64_t b = 0; b < batch; ++b) {
    T* y = Y + b * m * n;
    const std::int32_t* p = piv + b * k;
    for (std::int64_t s = 0; s < k; ++s) {
      const std::int64_t i = inverse ? k - 1 - s : s, j = p[i];
      if (j == i || j < 0 || j >= m || i >= m) continue;
      std::swap_ranges(y + i * n, y + i * n + n, y + j * n);
    }
  }
}

// ---- Eigh ----

using syevd_t = void (*)(const char*, const char*, const int*, void*, const int*, void*, void*, const int*,
                         int*, const int*, int*, std::size_t, std::size_t);
using heevd_t = void (*)(const char*, const char*, const int*, void*, const int*, void*, void*, const int*,
                         void*, const int*, int*, const int*, int*, std::size_t, std::size_t);

// One Hermitian m x m matrix (column-major, lower triangle read): eigenvalues into w, vectors over
// a when `vectors`; the LAPACK info.
template <class T>
inline int syevd(T* a, std::int64_t m, real_of_t<T>* w, bool vectors) {
  using R = real_of_t<T>;
  void* fn = factor_hooks().syevd[type_index<T>()];
  need_hook(fn, "Eigh (?syevd/?heevd)");
  const int M = static_cast<int>(m);
  const char* jobz = vectors ? "V" : "N";
  int info = 0, lwork = -1, liwork = -1, lrwork = -1, iq = 0;
  T wq{};
  R rq{};
  auto& work = scratch<T>(1);
  auto& rwork = scratch<R>(2);
  thread_local std::vector<int> iwork;
  if constexpr (is_complex_v<T>) {
    reinterpret_cast<heevd_t>(fn)(jobz, "L", &M, a, &M, w, &wq, &lwork, &rq, &lrwork, &iq, &liwork, &info, 1, 1);
    lwork = std::max(1, static_cast<int>(std::real(wq)));
    lrwork = std::max(1, static_cast<int>(rq));
    liwork = std::max(1, iq);
    work.resize(lwork), rwork.resize(lrwork), iwork.resize(liwork);
    reinterpret_cast<heevd_t>(fn)(jobz, "L", &M, a, &M, w, work.data(), &lwork, rwork.data(), &lrwork, iwork.data(),
                                  &liwork, &info, 1, 1);
  } else {
    reinterpret_cast<syevd_t>(fn)(jobz, "L", &M, a, &M, w, &wq, &lwork, &iq, &liwork, &info, 1, 1);
    lwork = std::max(1, static_cast<int>(wq));
    liwork = std::max(1, iq);
    work.resize(lwork), iwork.resize(liwork);
    reinterpret_cast<syevd_t>(fn)(jobz, "L", &M, a, &M, w, work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1);
  }
  return info;
}

template <class T>
inline void eigh(bool vectors, const T* X, void* Yv, std::int64_t batch, std::int64_t m) {
  using R = real_of_t<T>;
  if (!lapack_size_ok(m, m)) throw std::runtime_error("tidu: Eigh: matrix too large for LAPACK");
  auto& col = scratch<T>(0);
  col.resize(static_cast<std::size_t>(m * m));
  std::vector<R> w(static_cast<std::size_t>(m));
  for (std::int64_t b = 0; b < batch; ++b) {
    to_colmajor(X + b * m * m, col.data(), m, m);
    const bool ok = m == 0 || syevd(col.data(), m, w.data(), vectors) == 0;
    if (!vectors) {
      R* y = static_cast<R*>(Yv) + b * m;
      for (std::int64_t i = 0; i < m; ++i) y[i] = ok ? w[i] : nan_of<R>();
      continue;
    }
    T* y = static_cast<T*>(Yv) + b * m * (m + 1);
    from_colmajor(col.data(), m, y, m, m, m + 1);
    for (std::int64_t i = 0; i < m; ++i) y[i * (m + 1) + m] = T(w[i]);
    if (!ok)
      for (std::int64_t i = 0; i < m * (m + 1); ++i) y[i] = nan_of<T>();
  }
}

// ---- QR ----

using geqrf_t = void (*)(const int*, const int*, void*, const int*, void*, void*, const int*, int*);
using orgqr_t = void (*)(const int*, const int*, const int*, void*, const int*, const void*, void*, const int*, int*);

template <class T>
inline void qr(bool full, const T* X, T* Y, std::int64_t batch, std::int64_t m, std::int64_t n) {
  void* fq = factor_hooks().geqrf[type_index<T>()];
  void* fo = factor_hooks().orgqr[type_index<T>()];
  need_hook(fq, "QR (?geqrf)");
  need_hook(fo, "QR (?orgqr/?ungqr)");
  if (!lapack_size_ok(m, std::max(m, n))) throw std::runtime_error("tidu: QR: matrix too large for LAPACK");
  const std::int64_t k = std::min(m, n), kq = full ? m : k, ld = m, wcols = std::max(n, kq);
  const std::int64_t per = m * kq + kq * n;
  auto& a = scratch<T>(0);
  auto& work = scratch<T>(1);
  a.assign(static_cast<std::size_t>(ld * std::max<std::int64_t>(wcols, 1)), T(0));
  std::vector<T> tau(static_cast<std::size_t>(std::max<std::int64_t>(k, 1)));
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k), KQ = static_cast<int>(kq);
  const int LD = static_cast<int>(std::max<std::int64_t>(ld, 1));
  for (std::int64_t b = 0; b < batch; ++b) {
    T* y = Y + b * per;
    std::fill(a.begin(), a.end(), T(0));
    to_colmajor(X + b * m * n, a.data(), m, n);
    int info = 0, lwork = -1;
    T wq{};
    bool ok = true;
    if (k > 0) {
      reinterpret_cast<geqrf_t>(fq)(&M, &N, a.data(), &LD, tau.data(), &wq, &lwork, &info);
      lwork = std::max(1, static_cast<int>(std::real(wq)));
      work.resize(lwork);
      reinterpret_cast<geqrf_t>(fq)(&M, &N, a.data(), &LD, tau.data(), work.data(), &lwork, &info);
      ok = info == 0;
    }
    // R: the upper triangle of the first kq rows
    T* r = y + m * kq;
    for (std::int64_t i = 0; i < kq; ++i)
      for (std::int64_t j = 0; j < n; ++j) r[i * n + j] = (j >= i && i < m) ? a[i + j * ld] : T(0);
    if (kq > 0 && m > 0) {
      lwork = -1;
      reinterpret_cast<orgqr_t>(fo)(&M, &KQ, &K, a.data(), &LD, tau.data(), &wq, &lwork, &info);
      lwork = std::max(1, static_cast<int>(std::real(wq)));
      work.resize(lwork);
      reinterpret_cast<orgqr_t>(fo)(&M, &KQ, &K, a.data(), &LD, tau.data(), work.data(), &lwork, &info);
      ok = ok && info == 0;
    }
    from_colmajor(a.data(), ld, y, m, kq, kq);
    if (!ok)
      for (std::int64_t i = 0; i < per; ++i) y[i] = nan_of<T>();
  }
}

// ---- Householder QR as LAPACK leaves it (jnp.linalg.qr(mode="raw")) ----
// [A' | tau]: A' is ?geqrf's result (R on and above the diagonal, each reflector's vector below
// it, its 1 on the diagonal implied) in the operand's row-major layout, then the k = min(m, n)
// reflectors' scalar factors: (m, n) -> m * n + k values.  NaN where ?geqrf fails.
template <class T>
inline void geqrf(const T* X, T* Y, std::int64_t batch, std::int64_t m, std::int64_t n) {
  void* fq = factor_hooks().geqrf[type_index<T>()];
  need_hook(fq, "Geqrf (?geqrf)");
  if (!lapack_size_ok(m, std::max(m, n))) throw std::runtime_error("tidu: Geqrf: matrix too large for LAPACK");
  const std::int64_t k = std::min(m, n), per = m * n + k;
  if (k == 0) return;  // nothing to write
  auto& a = scratch<T>(0);
  auto& work = scratch<T>(1);
  a.resize(static_cast<std::size_t>(m * n));
  const int M = static_cast<int>(m), N = static_cast<int>(n), LD = static_cast<int>(m);
  for (std::int64_t b = 0; b < batch; ++b) {
    T* y = Y + b * per;
    to_colmajor(X + b * m * n, a.data(), m, n);
    int info = 0, lwork = -1;
    T wq{};
    reinterpret_cast<geqrf_t>(fq)(&M, &N, a.data(), &LD, y + m * n, &wq, &lwork, &info);
    lwork = std::max(1, static_cast<int>(std::real(wq)));
    work.resize(static_cast<std::size_t>(lwork));
    reinterpret_cast<geqrf_t>(fq)(&M, &N, a.data(), &LD, y + m * n, work.data(), &lwork, &info);
    if (info != 0) {
      for (std::int64_t i = 0; i < per; ++i) y[i] = nan_of<T>();
      continue;
    }
    from_colmajor(a.data(), m, y, m, n, n);
  }
}

// ---- SVD ----

using gesdd_t = void (*)(const char*, const int*, const int*, void*, const int*, void*, void*, const int*, void*,
                         const int*, void*, const int*, int*, int*, std::size_t);
using cgesdd_t = void (*)(const char*, const int*, const int*, void*, const int*, void*, void*, const int*, void*,
                          const int*, void*, const int*, void*, int*, int*, std::size_t);

template <class T>
inline void svd(bool full, bool uv, const T* X, void* Yv, std::int64_t batch, std::int64_t m, std::int64_t n) {
  using R = real_of_t<T>;
  void* fn = factor_hooks().gesdd[type_index<T>()];
  need_hook(fn, "SVD (?gesdd)");
  if (!lapack_size_ok(std::max(m, n), std::max(m, n))) throw std::runtime_error("tidu: SVD: matrix too large");
  const std::int64_t k = std::min(m, n), ku = full ? m : k, kv = full ? n : k;
  const std::int64_t per = uv ? k + m * ku + kv * n : k;
  auto& a = scratch<T>(0);
  auto& work = scratch<T>(1);
  auto& rwork = scratch<R>(2);
  auto& uvbuf = scratch<T>(3);
  thread_local std::vector<int> iwork;
  a.resize(static_cast<std::size_t>(std::max<std::int64_t>(m * n, 1)));
  uvbuf.resize(static_cast<std::size_t>(std::max<std::int64_t>(m * ku + kv * n, 1)));
  std::vector<R> s(static_cast<std::size_t>(std::max<std::int64_t>(k, 1)));
  iwork.resize(static_cast<std::size_t>(std::max<std::int64_t>(8 * k, 1)));
  const int M = static_cast<int>(m), N = static_cast<int>(n);
  const int LDA = static_cast<int>(std::max<std::int64_t>(m, 1)), LDU = LDA;
  const int LDVT = static_cast<int>(std::max<std::int64_t>(kv, 1));
  const char* jobz = !uv ? "N" : full ? "A" : "S";
  T* U = uvbuf.data();
  T* VT = uvbuf.data() + m * ku;
  if constexpr (is_complex_v<T>) {
    const std::int64_t mn = k, mx = std::max(m, n);
    rwork.resize(static_cast<std::size_t>(std::max<std::int64_t>(
        uv ? std::max(5 * mn * mn + 5 * mn, 2 * mx * mn + 2 * mn * mn + mn) : 7 * mn, 1)));
  }
  for (std::int64_t b = 0; b < batch; ++b) {
    int info = 0;
    if (k > 0) {
      to_colmajor(X + b * m * n, a.data(), m, n);
      int lwork = -1;
      T wq{};
      auto call = [&](T* wk) {
        if constexpr (is_complex_v<T>)
          reinterpret_cast<cgesdd_t>(fn)(jobz, &M, &N, a.data(), &LDA, s.data(), U, &LDU, VT, &LDVT, wk, &lwork,
                                         rwork.data(), iwork.data(), &info, 1);
        else
          reinterpret_cast<gesdd_t>(fn)(jobz, &M, &N, a.data(), &LDA, s.data(), U, &LDU, VT, &LDVT, wk, &lwork,
                                        iwork.data(), &info, 1);
      };
      call(&wq);
      lwork = std::max(1, static_cast<int>(std::real(wq)));
      work.resize(lwork);
      call(work.data());
    } else if (uv) {  // empty: U and Vh are identities (full) or empty
      std::fill(uvbuf.begin(), uvbuf.end(), T(0));
      for (std::int64_t i = 0; i < std::min(m, ku); ++i) U[i + i * m] = T(1);
      for (std::int64_t i = 0; i < std::min(n, kv); ++i) VT[i + i * kv] = T(1);
    }
    if (!uv) {
      R* y = static_cast<R*>(Yv) + b * k;
      for (std::int64_t i = 0; i < k; ++i) y[i] = info == 0 ? s[i] : nan_of<R>();
      continue;
    }
    T* y = static_cast<T*>(Yv) + b * per;
    for (std::int64_t i = 0; i < k; ++i) y[i] = T(s[i]);
    from_colmajor(U, m, y + k, m, ku, ku);
    from_colmajor(VT, kv, y + k + m * ku, kv, n, n);
    if (info != 0)
      for (std::int64_t i = 0; i < per; ++i) y[i] = nan_of<T>();
  }
}

// ---- Eig ----

using geev_t = void (*)(const char*, const char*, const int*, void*, const int*, void*, void*, void*, const int*,
                        void*, const int*, void*, const int*, int*, std::size_t, std::size_t);
using cgeev_t = void (*)(const char*, const char*, const int*, void*, const int*, void*, void*, const int*, void*,
                         const int*, void*, const int*, void*, int*, std::size_t, std::size_t);

template <class T>
inline bool all_finite(const T* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    if constexpr (is_complex_v<T>) {
      if (!std::isfinite(x[i].real()) || !std::isfinite(x[i].imag())) return false;
    } else if (!std::isfinite(x[i])) {
      return false;
    }
  }
  return true;
}

template <class T>
inline void eig(bool left, bool right, const T* X, std::complex<real_of_t<T>>* Y, std::int64_t batch,
                std::int64_t m) {
  using R = real_of_t<T>;
  using C = std::complex<R>;
  void* fn = factor_hooks().geev[type_index<T>()];
  need_hook(fn, "Eig (?geev)");
  if (!lapack_size_ok(2 * m, m)) throw std::runtime_error("tidu: Eig: matrix too large for LAPACK");
  const std::int64_t nv = (left ? 1 : 0) + (right ? 1 : 0), width = nv ? m * nv + 1 : 1;
  auto& a = scratch<T>(0);
  auto& work = scratch<T>(1);
  auto& rwork = scratch<R>(2);
  auto& vecs = scratch<T>(3);
  a.resize(static_cast<std::size_t>(std::max<std::int64_t>(m * m, 1)));
  vecs.resize(static_cast<std::size_t>(std::max<std::int64_t>(2 * m * m, 1)));
  if constexpr (is_complex_v<T>) rwork.resize(static_cast<std::size_t>(std::max<std::int64_t>(2 * m, 1)));
  std::vector<R> wr(static_cast<std::size_t>(std::max<std::int64_t>(m, 1))), wi(wr.size());
  std::vector<C> wc(wr.size());
  const int M = static_cast<int>(m), LD = static_cast<int>(std::max<std::int64_t>(m, 1));
  const int LDVL = left ? LD : 1, LDVR = right ? LD : 1;
  T* VL = vecs.data();
  T* VR = vecs.data() + m * m;
  const char* jl = left ? "V" : "N";
  const char* jr = right ? "V" : "N";
  for (std::int64_t b = 0; b < batch; ++b) {
    const T* x = X + b * m * m;
    bool ok = all_finite(x, m * m);
    if (ok && m > 0) {
      to_colmajor(x, a.data(), m, m);
      int info = 0, lwork = -1;
      T wq{};
      auto call = [&](T* wk) {
        if constexpr (is_complex_v<T>)
          reinterpret_cast<cgeev_t>(fn)(jl, jr, &M, a.data(), &LD, wc.data(), VL, &LDVL, VR, &LDVR, wk, &lwork,
                                        rwork.data(), &info, 1, 1);
        else
          reinterpret_cast<geev_t>(fn)(jl, jr, &M, a.data(), &LD, wr.data(), wi.data(), VL, &LDVL, VR, &LDVR, wk,
                                       &lwork, &info, 1, 1);
      };
      call(&wq);
      lwork = std::max(1, static_cast<int>(std::real(wq)));
      work.resize(static_cast<std::size_t>(lwork));
      call(work.data());
      ok = info == 0;
      if constexpr (!is_complex_v<T>)
        for (std::int64_t i = 0; i < m; ++i) wc[i] = C(wr[i], wi[i]);
    }
    C* y = Y + b * m * width;
    if (!ok) {
      for (std::int64_t i = 0; i < m * width; ++i) y[i] = nan_of<C>();
      continue;
    }
    if (!nv) {
      for (std::int64_t i = 0; i < m; ++i) y[i] = wc[i];
      continue;
    }
    // column j of V (column-major, leading dimension m) -> y[i * width + off + j]
    auto put = [&](const T* V, std::int64_t off) {
      for (std::int64_t j = 0; j < m;) {
        if constexpr (is_complex_v<T>) {
          for (std::int64_t i = 0; i < m; ++i) y[i * width + off + j] = V[i + j * m];
          ++j;
        } else if (wi[j] == R(0) || std::isnan(wi[j]) || j + 1 >= m) {
          for (std::int64_t i = 0; i < m; ++i) y[i * width + off + j] = C(V[i + j * m], R(0));
          ++j;
        } else {  // a complex-conjugate pair: re in column j, im in column j + 1
          for (std::int64_t i = 0; i < m; ++i) {
            const R re = V[i + j * m], im = V[i + (j + 1) * m];
            y[i * width + off + j] = C(re, im);
            y[i * width + off + j + 1] = C(re, -im);
          }
          j += 2;
        }
      }
    };
    if (left) put(VL, 0);
    if (right) put(VR, left ? m : 0);
    for (std::int64_t i = 0; i < m; ++i) y[i * width + width - 1] = wc[i];
  }
}

// ---- Schur ----

// ?gees(jobvs, sort, select, n, a, lda, sdim, wr, wi | w, vs, ldvs, work, lwork, [rwork,] bwork, info)
using gees_t = void (*)(const char*, const char*, void*, const int*, void*, const int*, int*, void*, void*, void*,
                        const int*, void*, const int*, int*, int*, std::size_t, std::size_t);
using cgees_t = void (*)(const char*, const char*, void*, const int*, void*, const int*, int*, void*, void*,
                         const int*, void*, const int*, void*, int*, int*, std::size_t, std::size_t);

template <class T>
inline void schur(const T* X, T* Y, std::int64_t batch, std::int64_t m) {
  using R = real_of_t<T>;
  void* fn = factor_hooks().gees[type_index<T>()];
  need_hook(fn, "Schur (?gees)");
  if (!lapack_size_ok(m, m)) throw std::runtime_error("tidu: Schur: matrix too large for LAPACK");
  const std::size_t mm = static_cast<std::size_t>(std::max<std::int64_t>(m * m, 1));
  auto& a = scratch<T>(0);
  auto& work = scratch<T>(1);
  auto& rwork = scratch<R>(2);
  auto& vs = scratch<T>(3);
  a.resize(mm);
  vs.resize(mm);
  const std::size_t m1 = static_cast<std::size_t>(std::max<std::int64_t>(m, 1));
  if constexpr (is_complex_v<T>) rwork.resize(m1);
  std::vector<R> wr(m1), wi(m1);
  std::vector<T> w(m1);
  std::vector<int> bwork(m1);  // not referenced without sorting
  const int M = static_cast<int>(m), LD = static_cast<int>(std::max<std::int64_t>(m, 1));
  for (std::int64_t b = 0; b < batch; ++b) {
    const T* x = X + b * m * m;
    T* y = Y + b * m * 2 * m;
    bool ok = all_finite(x, m * m);
    if (ok && m > 0) {
      to_colmajor(x, a.data(), m, m);
      int info = 0, lwork = -1, sdim = 0;
      T wq{};
      auto call = [&](T* wk) {
        if constexpr (is_complex_v<T>)
          reinterpret_cast<cgees_t>(fn)("V", "N", nullptr, &M, a.data(), &LD, &sdim, w.data(), vs.data(), &LD, wk,
                                        &lwork, rwork.data(), bwork.data(), &info, 1, 1);
        else
          reinterpret_cast<gees_t>(fn)("V", "N", nullptr, &M, a.data(), &LD, &sdim, wr.data(), wi.data(), vs.data(),
                                       &LD, wk, &lwork, bwork.data(), &info, 1, 1);
      };
      call(&wq);
      lwork = std::max(1, static_cast<int>(std::real(wq)));
      work.resize(static_cast<std::size_t>(lwork));
      call(work.data());
      ok = info == 0;
    }
    if (!ok) {
      for (std::int64_t i = 0; i < 2 * m * m; ++i) y[i] = nan_of<T>();
      continue;
    }
    from_colmajor(a.data(), m, y, m, m, 2 * m);
    from_colmajor(vs.data(), m, y + m, m, m, 2 * m);
  }
}

// ---- Hessenberg ----

// ?gehrd(n, ilo, ihi, a, lda, tau, work, lwork, info); ?orghr/?unghr: the same arguments
using gehrd_t = void (*)(const int*, const int*, const int*, void*, const int*, void*, void*, const int*, int*);

template <class T>
inline void hessenberg(const T* X, T* Y, std::int64_t batch, std::int64_t m) {
  void* fh = factor_hooks().gehrd[type_index<T>()];
  void* fq = factor_hooks().orghr[type_index<T>()];
  need_hook(fh, "Hessenberg (?gehrd)");
  need_hook(fq, "Hessenberg (?orghr/?unghr)");
  if (!lapack_size_ok(m, m)) throw std::runtime_error("tidu: Hessenberg: matrix too large for LAPACK");
  const std::size_t mm = static_cast<std::size_t>(std::max<std::int64_t>(m * m, 1));
  auto& a = scratch<T>(0);
  auto& work = scratch<T>(1);
  auto& q = scratch<T>(3);
  a.resize(mm);
  q.resize(mm);
  std::vector<T> tau(static_cast<std::size_t>(std::max<std::int64_t>(m, 1)));
  const int M = static_cast<int>(m), LD = static_cast<int>(std::max<std::int64_t>(m, 1)), ILO = 1, IHI = M;
  for (std::int64_t b = 0; b < batch; ++b) {
    const T* x = X + b * m * m;
    T* y = Y + b * m * 2 * m;
    if (m == 0) continue;
    to_colmajor(x, a.data(), m, m);
    int info = 0, lwork = -1;
    T wq{};
    auto call = [&](void* fn, T* mat, T* wk) {
      reinterpret_cast<gehrd_t>(fn)(&M, &ILO, &IHI, mat, &LD, tau.data(), wk, &lwork, &info);
    };
    call(fh, a.data(), &wq);
    lwork = std::max(1, static_cast<int>(std::real(wq)));
    work.resize(static_cast<std::size_t>(lwork));
    call(fh, a.data(), work.data());
    bool ok = info == 0;
    if (ok) {
      std::copy(a.begin(), a.begin() + m * m, q.begin());
      lwork = -1;
      call(fq, q.data(), &wq);
      lwork = std::max(1, static_cast<int>(std::real(wq)));
      work.resize(static_cast<std::size_t>(lwork));
      call(fq, q.data(), work.data());
      ok = info == 0;
    }
    if (!ok) {
      for (std::int64_t i = 0; i < 2 * m * m; ++i) y[i] = nan_of<T>();
      continue;
    }
    for (std::int64_t j = 0; j < m; ++j)  // H: the reflectors below the subdiagonal are zeros
      for (std::int64_t i = j + 2; i < m; ++i) a[i + j * m] = T(0);
    from_colmajor(a.data(), m, y, m, m, 2 * m);
    from_colmajor(q.data(), m, y + m, m, m, 2 * m);
  }
}

// ---- dispatch (from interpreter.hpp's run_instr; operands checked by validate.hpp) ----
// LU, Schur, Hessenberg, Geqrf: no attrs.  LUPermute: inverse.  Eigh: vectors.  QR: full_matrices.  SVD: full_matrices,
// compute_uv.  Eig: left, right, (derivative flag, unused here).  The dtype visited is the matrix operand's (Eigh values and SVD s are real).
inline void run_factor(Op op, const Program& p, const std::uint32_t* a, const std::int64_t* at, void* y,
                       void** ptr) {
  const bool perm = op == Op::LUPermute;
  const Slot& x = p.slots[a[perm ? 1 : 0]];
  const std::int64_t* s = p.shape(a[perm ? 1 : 0]);
  const std::int64_t m = s[x.ndim - 2], n = s[x.ndim - 1];
  std::int64_t batch = 1;
  for (std::uint32_t k = 0; k + 2 < x.ndim; ++k) batch *= s[k];
  visit_inexact(op, x.dtype, [&](auto t) {
    using T = decltype(t);
    const T* X = static_cast<const T*>(ptr[a[perm ? 1 : 0]]);
    switch (op) {
      case Op::LU: lu<T>(X, static_cast<T*>(y), batch, m); return;
      case Op::LUPermute: {
        const Slot& ps = p.slots[a[0]];
        const std::int64_t k = p.shape(a[0])[ps.ndim - 1];
        lu_permute<T>(at[0] != 0, static_cast<const std::int32_t*>(ptr[a[0]]), k, X, static_cast<T*>(y), batch, m, n);
        return;
      }
      case Op::Eigh: eigh<T>(at[0] != 0, X, y, batch, m); return;
      case Op::Eig:
        eig<T>(at[0] != 0, at[1] != 0, X, static_cast<std::complex<real_of_t<T>>*>(y), batch, m);
        return;
      case Op::QR: qr<T>(at[0] != 0, X, static_cast<T*>(y), batch, m, n); return;
      case Op::Schur: schur<T>(X, static_cast<T*>(y), batch, m); return;
      case Op::Hessenberg: hessenberg<T>(X, static_cast<T*>(y), batch, m); return;
      case Op::Geqrf: geqrf<T>(X, static_cast<T*>(y), batch, m, n); return;
      default: svd<T>(at[0] != 0, at[1] != 0, X, y, batch, m, n); return;
    }
  });
}

}  // namespace kern
}  // namespace tidu
