// tidu/kernels/sorting.hpp - kernels of the ordering and accumulation primitives: the reductions
// ReduceMin, ReduceProd, ReduceAnd, ReduceOr; ArgMax/ArgMin along one axis; the scans Cumsum,
// Cumprod, Cummax, Cummin and LinearScan (s_k = a_k s_{k-1} + b_k) along one axis; Sort along one
// axis (of one operand, or of a values operand by a keys operand).
//
// Ordering is numpy's: NaN is greater than every number (sorted last, propagated by min/max and
// cumulative min/max, the first NaN is the argmax and the argmin), complex numbers compare by
// real part then imaginary part.  Integer sums and products wrap, as numpy's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tidu/kernels/elementwise.hpp"
#include "tidu/vm/dtype.hpp"
#include "tidu/vm/program.hpp"

namespace tidu {
namespace kern {

// ---- order ----

template <class T>
inline bool is_nan(T v) {
  if constexpr (is_float_v<T>) return v != v;
  else return false;
}

// a < b in numpy's sort order (NaN last; complex lexicographic).  Real values are compared with
// & and | rather than && and ||: no branch depends on the data, which a binary search's
// unpredictable compares need (SearchSorted, search.hpp: 7.7 -> 2.4 ms for 131k values).
template <class T>
inline bool sort_less(T a, T b) {
  if constexpr (is_float_v<T>) {
    return (a < b) | ((b != b) & (a == a));
  } else if constexpr (is_complex_v<T>) {
    if (sort_less(a.real(), b.real())) return true;
    if (sort_less(b.real(), a.real())) return false;
    return sort_less(a.imag(), b.imag());
  } else {
    return a < b;
  }
}

// The [outer, n, inner] split of a row-major shape around `axis`.
struct Lanes {
  std::int64_t outer = 1, n = 1, inner = 1;
  Lanes(const std::int64_t* shape, std::uint32_t ndim, std::int64_t axis) {
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(ndim); ++k)
      (k < axis ? outer : k == axis ? n : inner) *= shape[k];
  }
};

// ---- reductions: y[kept] = f(...f(init, x0), x1 ...) over `axes` ----

template <class T, class F>
inline void reduce_with(const T* x, const std::int64_t* shape, std::uint32_t ndim, const std::int64_t* axes,
                        std::int64_t n_axes, T* y, std::int64_t n_out, T init, F f) {
  bool reduced[16] = {false};
  for (std::int64_t a = 0; a < n_axes; ++a) reduced[axes[a]] = true;
  for (std::int64_t i = 0; i < n_out; ++i) y[i] = init;
  std::int64_t n = 1;
  for (std::uint32_t k = 0; k < ndim; ++k) n *= shape[k];
  if (n == 0) return;
  // [outer kept, reduced, inner kept]: contiguous loops
  std::int64_t size[3] = {1, 1, 1};
  int part = 0;
  bool blocked = true;
  for (std::uint32_t k = 0; k < ndim && blocked; ++k) {
    if (shape[k] == 1) continue;
    const int want = reduced[k] ? 1 : (part == 0 ? 0 : 2);
    if (want < part) blocked = false;
    part = want;
    size[part] *= shape[k];
  }
  if (blocked) {
    const std::int64_t outer = size[0], r = size[1], inner = size[2];
    for (std::int64_t o = 0; o < outer; ++o) {
      T* yo = y + o * inner;
      const T* xo = x + o * r * inner;
      if (inner == 1) {
        T acc = yo[0];
        for (std::int64_t i = 0; i < r; ++i) acc = f(acc, xo[i]);
        yo[0] = acc;
      } else {
        for (std::int64_t i = 0; i < r; ++i)
          for (std::int64_t j = 0; j < inner; ++j) yo[j] = f(yo[j], xo[i * inner + j]);
      }
    }
    return;
  }
  std::int64_t ostride[16], s = 1;
  for (std::uint32_t k = ndim; k-- > 0;) {
    ostride[k] = reduced[k] ? 0 : s;
    if (!reduced[k]) s *= shape[k];
  }
  std::int64_t idx[16] = {0};
  std::int64_t o = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    y[o] = f(y[o], x[i]);
    for (std::int64_t k = static_cast<std::int64_t>(ndim) - 1; k >= 0; --k) {
      o += ostride[k];
      if (++idx[k] < shape[k]) break;
      o -= ostride[k] * shape[k];
      idx[k] = 0;
    }
  }
}

template <class T>
inline T min_of(T acc, T v) {  // NaN propagates
  return (v < acc || is_nan(v)) ? v : acc;
}
template <class T>
inline T max_of(T acc, T v) {
  return (v > acc || is_nan(v)) ? v : acc;
}
template <class T>
inline T mul_of(T acc, T v) {
  if constexpr (is_int_v<T>) return wrap_mul(acc, v);
  else return acc * v;
}
template <class T>
inline T add_of(T acc, T v) {
  if constexpr (is_int_v<T>) return wrap_add(acc, v);
  else return acc + v;
}

template <class T>
inline T highest() {
  if constexpr (is_float_v<T>) return std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::max();
}

// ---- argmax / argmin along one axis: the first extreme (the first NaN), as numpy's ----

template <class T, class I>
inline void arg_extreme(const T* x, const Lanes& l, I* y, bool is_max) {
  for (std::int64_t o = 0; o < l.outer; ++o)
    for (std::int64_t j = 0; j < l.inner; ++j) {
      const T* xl = x + o * l.n * l.inner + j;
      T best = xl[0];
      std::int64_t at = 0;
      if (!is_nan(best))
        for (std::int64_t k = 1; k < l.n; ++k) {
          const T v = xl[k * l.inner];
          if (is_nan(v)) {
            at = k;
            break;
          }
          if (is_max ? v > best : v < best) {
            best = v;
            at = k;
          }
        }
      y[o * l.inner + j] = static_cast<I>(at);
    }
}

// ---- scans along one axis: y_k = f(y_{k-1}, x_k), y_first = x_first ----

template <class T, class F>
inline void scan(const T* x, const Lanes& l, T* y, bool reverse, F f) {
  if (l.n == 0) return;
  for (std::int64_t o = 0; o < l.outer; ++o) {
    const T* xo = x + o * l.n * l.inner;
    T* yo = y + o * l.n * l.inner;
    const std::int64_t first = reverse ? l.n - 1 : 0, step = reverse ? -1 : 1;
    for (std::int64_t j = 0; j < l.inner; ++j) yo[first * l.inner + j] = xo[first * l.inner + j];
    for (std::int64_t c = 1, k = first + step; c < l.n; ++c, k += step) {
      const T* prev = yo + (k - step) * l.inner;
      for (std::int64_t j = 0; j < l.inner; ++j) yo[k * l.inner + j] = f(prev[j], xo[k * l.inner + j]);
    }
  }
}

// s_k = a_k s_{k-1} + b_k (s before the first element is 0).
template <class T>
inline void linear_scan(const T* a, const T* b, const Lanes& l, T* y, bool reverse) {
  if (l.n == 0) return;
  for (std::int64_t o = 0; o < l.outer; ++o) {
    const std::int64_t base = o * l.n * l.inner;
    const std::int64_t first = reverse ? l.n - 1 : 0, step = reverse ? -1 : 1;
    for (std::int64_t j = 0; j < l.inner; ++j) y[base + first * l.inner + j] = b[base + first * l.inner + j];
    for (std::int64_t c = 1, k = first + step; c < l.n; ++c, k += step) {
      const std::int64_t at = base + k * l.inner, pv = base + (k - step) * l.inner;
      for (std::int64_t j = 0; j < l.inner; ++j) y[at + j] = a[at + j] * y[pv + j] + b[at + j];
    }
  }
}

// ---- sort along one axis ----

// perm of each lane: the stable order of the lane's keys (descending: greater first, NaN first,
// ties in their original order).  perm has l.n entries, reused per lane.
template <class K>
inline void lane_order(const K* keys, std::int64_t stride, std::int64_t n, bool descending,
                       std::vector<std::int64_t>& perm) {
  perm.resize(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), std::int64_t{0});
  if (descending)
    std::stable_sort(perm.begin(), perm.end(), [&](std::int64_t i, std::int64_t j) {
      return sort_less(keys[j * stride], keys[i * stride]);
    });
  else
    std::stable_sort(perm.begin(), perm.end(), [&](std::int64_t i, std::int64_t j) {
      return sort_less(keys[i * stride], keys[j * stride]);
    });
}

// values (elements of `width` bytes) permuted by the order of keys, lane by lane.
template <class K>
inline void sort_by(const K* keys, const std::uint8_t* vals, std::size_t width, const Lanes& l, bool descending,
                    std::uint8_t* y) {
  if (l.n == 0) return;
  thread_local std::vector<std::int64_t> perm;
  const bool in_place = vals == y;
  thread_local std::vector<std::uint8_t> copy;
  for (std::int64_t o = 0; o < l.outer; ++o)
    for (std::int64_t j = 0; j < l.inner; ++j) {
      const std::int64_t base = o * l.n * l.inner + j;
      lane_order(keys + base, l.inner, l.n, descending, perm);
      const std::uint8_t* src = vals;
      if (in_place) {  // (one operand sorted in place: keys are vals)
        copy.resize(static_cast<std::size_t>(l.n) * width);
        for (std::int64_t k = 0; k < l.n; ++k)
          std::memcpy(copy.data() + k * width, vals + (base + k * l.inner) * width, width);
        for (std::int64_t k = 0; k < l.n; ++k)
          std::memcpy(y + (base + k * l.inner) * width, copy.data() + perm[k] * width, width);
        continue;
      }
      for (std::int64_t k = 0; k < l.n; ++k)
        std::memcpy(y + (base + k * l.inner) * width, src + (base + perm[k] * l.inner) * width, width);
    }
}

// ---- dispatch ----

// ReduceMin/Prod/And/Or attrs: n, axes...; ArgMax/ArgMin: axis, index dtype; Cum*: axis, reverse;
// LinearScan: axis, reverse (operands a, b); Sort: axis, descending (operands keys[, values]).
inline void run_sort_scan(Op op, const Program& p, const std::uint32_t* a, std::uint32_t n_in,
                          const std::int64_t* at, std::uint32_t out_slot, void* y, void** ptr) {
  const Slot& x0 = p.slots[a[0]];
  const Slot& out = p.slots[out_slot];
  const std::int64_t* s0 = p.shape(a[0]);
  switch (op) {
    case Op::ReduceMin: case Op::ReduceProd: case Op::ReduceAnd: case Op::ReduceOr:
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        const T* x = static_cast<const T*>(ptr[a[0]]);
        T* r = static_cast<T*>(y);
        if constexpr (std::is_same_v<T, bool>) {
          if (op == Op::ReduceAnd)
            reduce_with<T>(x, s0, x0.ndim, at + 1, at[0], r, out.size, true, [](bool u, bool v) { return u && v; });
          else if (op == Op::ReduceOr)
            reduce_with<T>(x, s0, x0.ndim, at + 1, at[0], r, out.size, false, [](bool u, bool v) { return u || v; });
          else
            unsupported(op, out.dtype);
        } else if constexpr (is_complex_v<T>) {
          if (op != Op::ReduceProd) unsupported(op, out.dtype);
          reduce_with<T>(x, s0, x0.ndim, at + 1, at[0], r, out.size, T(1), mul_of<T>);
        } else {
          if (op == Op::ReduceMin)
            reduce_with<T>(x, s0, x0.ndim, at + 1, at[0], r, out.size, highest<T>(), min_of<T>);
          else if (op == Op::ReduceProd)
            reduce_with<T>(x, s0, x0.ndim, at + 1, at[0], r, out.size, T(1), mul_of<T>);
          else
            unsupported(op, out.dtype);
        }
      });
      return;
    case Op::ArgMax: case Op::ArgMin: {
      const Lanes l(s0, x0.ndim, at[0]);
      visit_dtype(x0.dtype, [&](auto t) {
        using T = decltype(t);
        if constexpr (is_complex_v<T>) {
          unsupported(op, x0.dtype);
        } else {
          const T* x = static_cast<const T*>(ptr[a[0]]);
          if (out.dtype == DType::I32) arg_extreme<T>(x, l, static_cast<std::int32_t*>(y), op == Op::ArgMax);
          else arg_extreme<T>(x, l, static_cast<std::int64_t*>(y), op == Op::ArgMax);
        }
      });
      return;
    }
    case Op::Cumsum: case Op::Cumprod: case Op::Cummax: case Op::Cummin: case Op::LinearScan: {
      const Lanes l(s0, x0.ndim, at[0]);
      const bool rev = at[1] != 0;
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        T* r = static_cast<T*>(y);
        const T* x = static_cast<const T*>(ptr[a[0]]);
        if constexpr (std::is_same_v<T, bool>) {
          unsupported(op, out.dtype);
        } else {
          if (op == Op::Cumsum) {
            scan<T>(x, l, r, rev, add_of<T>);
          } else if (op == Op::Cumprod) {
            scan<T>(x, l, r, rev, mul_of<T>);
          } else if (op == Op::LinearScan) {
            if constexpr (is_int_v<T>) unsupported(op, out.dtype);
            else linear_scan<T>(x, static_cast<const T*>(ptr[a[1]]), l, r, rev);
          } else if constexpr (is_complex_v<T>) {
            unsupported(op, out.dtype);
          } else {
            scan<T>(x, l, r, rev, op == Op::Cummax ? max_of<T> : min_of<T>);
          }
        }
      });
      return;
    }
    case Op::Sort: {
      const Lanes l(s0, x0.ndim, at[0]);
      const std::uint32_t v = n_in > 1 ? a[1] : a[0];
      const std::size_t width = dtype_size(out.dtype);
      visit_dtype(x0.dtype, [&](auto t) {
        using K = decltype(t);
        sort_by<K>(static_cast<const K*>(ptr[a[0]]), static_cast<const std::uint8_t*>(ptr[v]), width, l, at[1] != 0,
                   static_cast<std::uint8_t*>(y));
      });
      return;
    }
    default:
      throw std::runtime_error(std::string("tidu: no kernel for opcode ") + op_name(op));
  }
}

}  // namespace kern
}  // namespace tidu

namespace tidu {

// Semantic checks of one instruction of the primitives above (validate.hpp): the problem, or
// nullptr when the instruction is sound.
inline const char* check_sort_scan(const Program& p, const Instr& in) {
  const std::uint32_t* a = p.args.data() + in.in_begin;
  const std::int64_t* at = p.attrs.data() + in.attr_begin;
  const std::int64_t na = in.n_attr;
  const Slot& o = p.slots[in.out];
  const std::int64_t* oshape = p.shape(in.out);
  if (in.n_in < 1) return "wrong number of operands";
  const Slot& x = p.slots[a[0]];
  const std::int64_t* xs = p.shape(a[0]);
  const DType d = x.dtype;
  const bool cplx = d == DType::C64 || d == DType::C128, flt = d == DType::F32 || d == DType::F64;
  const bool integer = is_integer_dtype(d);
  auto same_shape = [&](std::uint32_t s) {
    return p.slots[s].ndim == o.ndim && std::equal(oshape, oshape + o.ndim, p.shape(s));
  };
  switch (in.op) {
    case Op::ReduceMin: case Op::ReduceProd: case Op::ReduceAnd: case Op::ReduceOr: {
      if (in.n_in != 1) return "wrong number of operands";
      if (d != o.dtype) return "operand dtype mismatch";
      if (in.op == Op::ReduceMin && !(flt || integer)) return "dtype is not real";
      if (in.op == Op::ReduceProd && d == DType::Bool) return "dtype is not numeric";
      if ((in.op == Op::ReduceAnd || in.op == Op::ReduceOr) && d != DType::Bool) return "dtype is not bool";
      if (na < 1 || at[0] < 0 || at[0] > na - 1) return "attribute list out of range";
      bool red[16] = {false};
      for (std::int64_t k = 0; k < at[0]; ++k) {
        if (at[1 + k] < 0 || at[1 + k] >= x.ndim || red[at[1 + k]]) return "bad reduction axis";
        red[at[1 + k]] = true;
      }
      std::uint32_t j = 0;
      for (std::uint32_t k = 0; k < x.ndim; ++k) {
        if (red[k]) {
          if (in.op == Op::ReduceMin && xs[k] == 0) return "min over an empty axis";
          continue;
        }
        if (j >= o.ndim || xs[k] != oshape[j++]) return "reduction output shape";
      }
      if (j != o.ndim) return "reduction output rank";
      return nullptr;
    }
    case Op::ArgMax: case Op::ArgMin: {
      if (in.n_in != 1) return "wrong number of operands";
      if (na != 2 || at[0] < 0 || at[0] >= x.ndim) return "bad axis";
      if (cplx) return "dtype is not real";
      if (!(o.dtype == DType::I32 || o.dtype == DType::I64) || at[1] != static_cast<std::int64_t>(o.dtype))
        return "index dtype";
      if (xs[at[0]] == 0) return "empty axis";
      if (o.ndim + 1 != x.ndim) return "output rank";
      for (std::uint32_t k = 0, j = 0; k < x.ndim; ++k)
        if (k != at[0] && xs[k] != oshape[j++]) return "output shape";
      return nullptr;
    }
    case Op::Cumsum: case Op::Cumprod: case Op::Cummax: case Op::Cummin: case Op::LinearScan: {
      const std::uint32_t n = in.op == Op::LinearScan ? 2 : 1;
      if (in.n_in != n) return "wrong number of operands";
      if (na != 2 || at[0] < 0 || at[0] >= x.ndim || (at[1] != 0 && at[1] != 1)) return "bad axis or flag";
      for (std::uint32_t k = 0; k < n; ++k)
        if (!same_shape(a[k]) || p.slots[a[k]].dtype != o.dtype) return "operand shape or dtype mismatch";
      if (d == DType::Bool) return "dtype is not numeric";
      if ((in.op == Op::Cummax || in.op == Op::Cummin) && cplx) return "dtype is not real";
      if (in.op == Op::LinearScan && !(flt || cplx)) return "dtype is not inexact";
      return nullptr;
    }
    case Op::Sort: {
      if (in.n_in != 1 && in.n_in != 2) return "wrong number of operands";
      if (na != 2 || at[0] < 0 || at[0] >= x.ndim || (at[1] != 0 && at[1] != 1)) return "bad axis or flag";
      if (!same_shape(a[0]) || !same_shape(a[in.n_in - 1])) return "operand shape mismatch";
      if (p.slots[a[in.n_in - 1]].dtype != o.dtype) return "operand dtype mismatch";
      return nullptr;
    }
    default:
      return "unknown opcode";
  }
}

}  // namespace tidu
