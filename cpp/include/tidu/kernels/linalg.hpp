// tidu/kernels/linalg.hpp - linear-algebra kernels: triangular solve and Cholesky factorisation over
// row-major matrices with leading batch axes.
//
// Each kernel calls an optional hook (LapackHooks) when one is set and falls back to its own plain
// loops otherwise, so the headers need no library to link.  The Python package fills the hooks from
// scipy-openblas32 (_eval.set_blas).  A C++ embedder that evaluates programs holding TriangularSolve
// or Cholesky may point them at any CBLAS + LAPACK (OpenBLAS, MKL, reference LAPACK):
//
//   tidu::kern::lapack().dtrsm = (void*)&cblas_dtrsm;   // CBLAS, row-major interface
//   tidu::kern::lapack().dpotrf = (void*)&dpotrf_;      // LAPACK, Fortran interface
//
// (and s/c/z likewise), linking e.g. -lopenblas; without them the loops give the same results at
// textbook speed (O(n^3) with no blocking).
//
// Conventions (as jax.lax.linalg): a triangular solve reads only the triangle of A named by `lower`
// (and not its diagonal when unit_diagonal); Cholesky reads only the lower triangle, writes zeros
// above the diagonal, and a matrix that is not positive definite gives NaN on and below the
// diagonal (NaN in both parts of a complex) and zeros above it, as jax's.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "tidu/kernels/elementwise.hpp"
#include "tidu/vm/program.hpp"

namespace tidu {
namespace kern {

// ---- hooks ----

struct LapackHooks {
  void* strsm = nullptr;  // cblas_?trsm
  void* dtrsm = nullptr;
  void* ctrsm = nullptr;
  void* ztrsm = nullptr;
  void* spotrf = nullptr;  // ?potrf_ (Fortran LAPACK)
  void* dpotrf = nullptr;
  void* cpotrf = nullptr;
  void* zpotrf = nullptr;
};
inline LapackHooks& lapack() {
  static LapackHooks hooks;
  return hooks;
}

enum : int { kLeft = 141, kRight = 142, kUpper = 121, kLower = 122, kConjTrans = 113, kNonUnit = 131,
             kUnit = 132 };
template <class T>
using real_trsm_t = void (*)(int, int, int, int, int, int, int, T, const T*, int, T*, int);
using complex_trsm_t = void (*)(int, int, int, int, int, int, int, const void*, const void*, int, void*, int);
using potrf_t = void (*)(const char*, const int*, void*, const int*, int*, std::size_t);

template <class T>
inline void* trsm_hook() {
  if constexpr (std::is_same_v<T, float>) return lapack().strsm;
  else if constexpr (std::is_same_v<T, double>) return lapack().dtrsm;
  else if constexpr (std::is_same_v<T, std::complex<float>>) return lapack().ctrsm;
  else return lapack().ztrsm;
}
template <class T>
inline void* potrf_hook() {
  if constexpr (std::is_same_v<T, float>) return lapack().spotrf;
  else if constexpr (std::is_same_v<T, double>) return lapack().dpotrf;
  else if constexpr (std::is_same_v<T, std::complex<float>>) return lapack().cpotrf;
  else return lapack().zpotrf;
}

template <class T> inline T conj_of(T x) {
  if constexpr (is_complex_v<T>) return std::conj(x);
  else return x;
}

// ---- triangular solve ----

struct TrsmAttrs {
  bool left, lower, trans, conj, unit;
};

// op(A) X = B (left) or X op(A) = B (right) for one matrix: A is m x m, X and B are r x c
// (m = r on the left, m = c on the right); X overwrites B.  op(A) = A, A^T, conj(A) or A^H.
template <class T>
inline void trsm_loop(const TrsmAttrs& at, const T* A, std::int64_t m, T* X, std::int64_t r, std::int64_t c) {
  auto op = [&](std::int64_t i, std::int64_t j) {  // op(A)[i][j], reading only A's named triangle
    std::int64_t p = at.trans ? j : i, q = at.trans ? i : j;
    if (p == q && at.unit) return T(1);
    if (at.lower ? q > p : q < p) return T(0);
    T v = A[p * m + q];
    return at.conj ? conj_of(v) : v;
  };
  const bool op_lower = at.lower != at.trans;  // op(A) is lower triangular
  if (at.left) {  // rows of X in dependency order
    for (std::int64_t s = 0; s < m; ++s) {
      std::int64_t i = op_lower ? s : m - 1 - s;
      T* xi = X + i * c;
      for (std::int64_t t = 0; t < s; ++t) {
        std::int64_t k = op_lower ? t : m - 1 - t;
        const T f = op(i, k);
        const T* xk = X + k * c;
        for (std::int64_t j = 0; j < c; ++j) xi[j] -= f * xk[j];
      }
      const T d = op(i, i);
      for (std::int64_t j = 0; j < c; ++j) xi[j] /= d;
    }
  } else {  // columns of X: X[:, j] = (B[:, j] - sum_k X[:, k] op(k, j)) / op(j, j)
    for (std::int64_t s = 0; s < m; ++s) {
      std::int64_t j = op_lower ? m - 1 - s : s;
      for (std::int64_t t = 0; t < s; ++t) {
        std::int64_t k = op_lower ? m - 1 - t : t;
        const T f = op(k, j);
        for (std::int64_t i = 0; i < r; ++i) X[i * c + j] -= X[i * c + k] * f;
      }
      const T d = op(j, j);
      for (std::int64_t i = 0; i < r; ++i) X[i * c + j] /= d;
    }
  }
}

// The CBLAS call for one matrix; false when no hook applies.
template <class T>
inline bool trsm_blas(const TrsmAttrs& at, const T* A, std::int64_t m, T* X, std::int64_t r, std::int64_t c) {
  void* fn = trsm_hook<T>();
  constexpr std::int64_t kInt = std::numeric_limits<int>::max();
  if (!fn || m > kInt || r > kInt || c > kInt || m == 0 || r == 0 || c == 0) return false;
  // conj(A) without a transpose has no CBLAS code: conj(A) X = B  <=>  A conj(X) = conj(B).
  const bool conj_only = is_complex_v<T> && at.conj && !at.trans;
  const std::int64_t n = r * c;
  if (conj_only)
    for (std::int64_t i = 0; i < n; ++i) X[i] = conj_of(X[i]);
  const int trans = !at.trans ? int{kNoTrans} : (is_complex_v<T> && at.conj) ? int{kConjTrans} : int{kTrans};
  const int side = at.left ? kLeft : kRight, uplo = at.lower ? kLower : kUpper;
  const int diag = at.unit ? kUnit : kNonUnit, M = static_cast<int>(r), N = static_cast<int>(c);
  const int lda = static_cast<int>(std::max<std::int64_t>(m, 1)), ldb = static_cast<int>(c);
  if constexpr (is_complex_v<T>) {
    const T one(1);
    reinterpret_cast<complex_trsm_t>(fn)(kRowMajor, side, uplo, trans, diag, M, N, &one, A, lda, X, ldb);
  } else {
    reinterpret_cast<real_trsm_t<T>>(fn)(kRowMajor, side, uplo, trans, diag, M, N, T(1), A, lda, X, ldb);
  }
  if (conj_only)
    for (std::int64_t i = 0; i < n; ++i) X[i] = conj_of(X[i]);
  return true;
}

// Y = solve over `batch` matrices: A is batch x m x m, B and Y batch x r x c.
template <class T>
inline void triangular_solve(const TrsmAttrs& at, const T* A, const T* B, T* Y, std::int64_t batch, std::int64_t m,
                             std::int64_t r, std::int64_t c) {
  const std::int64_t n = r * c;
  if (Y != B && batch * n) std::memcpy(Y, B, static_cast<std::size_t>(batch * n) * sizeof(T));
  for (std::int64_t b = 0; b < batch; ++b)
    if (!trsm_blas(at, A + b * m * m, m, Y + b * n, r, c)) trsm_loop(at, A + b * m * m, m, Y + b * n, r, c);
}

// ---- Cholesky ----

// The lower factor of one m x m matrix in place (reading its lower triangle); false when the
// matrix is not positive definite.
template <class T>
inline bool potrf_loop(T* L, std::int64_t m) {
  using R = decltype(std::real(T{}));
  for (std::int64_t j = 0; j < m; ++j) {
    R d = std::real(L[j * m + j]);
    for (std::int64_t k = 0; k < j; ++k) d -= std::norm(L[j * m + k]);
    if (!(d > R(0))) return false;  // also NaN
    const R ljj = std::sqrt(d);
    L[j * m + j] = T(ljj);
    for (std::int64_t i = j + 1; i < m; ++i) {
      T s = L[i * m + j];
      for (std::int64_t k = 0; k < j; ++k) s -= L[i * m + k] * conj_of(L[j * m + k]);
      L[i * m + j] = s / ljj;
    }
  }
  return true;
}

// Y = cholesky of `batch` m x m matrices X (row-major).
template <class T>
inline void cholesky(const T* X, T* Y, std::int64_t batch, std::int64_t m) {
  const std::int64_t n = m * m;
  if (Y != X && batch * n) std::memcpy(Y, X, static_cast<std::size_t>(batch * n) * sizeof(T));
  void* fn = potrf_hook<T>();
  const bool hook = fn && m > 0 && m <= std::numeric_limits<int>::max();
  for (std::int64_t b = 0; b < batch; ++b) {
    T* L = Y + b * n;
    bool ok;
    if (hook) {
      // The row-major buffer read column-major is A^T: its upper triangle is A's lower one, and
      // the factor U (A^T = U^H U, conjugated) read back row-major is L = U^T.
      const int M = static_cast<int>(m);
      int info = 0;
      reinterpret_cast<potrf_t>(fn)("U", &M, L, &M, &info, 1);
      ok = info == 0;
    } else {
      ok = potrf_loop(L, m);
    }
    if (!ok) {  // as jax's: NaN on and below the diagonal (both parts of a complex), 0 above
      using R = decltype(std::real(T{}));
      const R q = std::numeric_limits<R>::quiet_NaN();
      T nan;
      if constexpr (std::is_floating_point_v<T>) nan = q;
      else nan = T(q, q);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < m; ++j) L[i * m + j] = j <= i ? nan : T(0);
      continue;
    }
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = i + 1; j < m; ++j) L[i * m + j] = T(0);
  }
}


// ---- dispatch (from interpreter.hpp's run_instr; operands checked by validate.hpp) ----
// TriangularSolve attrs: left_side, lower, transpose_a, conjugate_a, unit_diagonal; operands
// a (..., m, m), b (..., r, c).  Cholesky: no attrs; operand (..., m, m).
inline void run_linalg(Op op, const Program& p, const std::uint32_t* a, const std::int64_t* at, DType dt, void* y,
                       void** ptr) {
  const Slot& x0 = p.slots[a[0]];
  const std::int64_t* s0 = p.shape(a[0]);
  const std::int64_t m = s0[x0.ndim - 1];
  const std::int64_t batch = m ? x0.size / (m * m) : 0;
  if (op == Op::Cholesky) {
    visit_inexact(op, dt, [&](auto t) {
      using T = decltype(t);
      cholesky<T>(static_cast<const T*>(ptr[a[0]]), static_cast<T*>(y), batch, m);
    });
    return;
  }
  const Slot& x1 = p.slots[a[1]];
  const std::int64_t* s1 = p.shape(a[1]);
  const std::int64_t r = s1[x1.ndim - 2], c = s1[x1.ndim - 1];
  const TrsmAttrs ta{at[0] != 0, at[1] != 0, at[2] != 0, at[3] != 0, at[4] != 0};
  std::int64_t nb = 1;  // batch count from b's leading axes (a's may be empty when m == 0)
  for (std::uint32_t k = 0; k + 2 < x1.ndim; ++k) nb *= s1[k];
  visit_inexact(op, dt, [&](auto t) {
    using T = decltype(t);
    triangular_solve<T>(ta, static_cast<const T*>(ptr[a[0]]), static_cast<const T*>(ptr[a[1]]), static_cast<T*>(y),
                        nb, m, r, c);
  });
}

}  // namespace kern
}  // namespace tidu
