// tidu/vm/dispatch.hpp - one instruction of an array program: run_instr (a switch on the opcode
// into kernels templated on dtype), the handlers resolved ahead of time (handler_for) and
// run_block, an instruction over one block of a chain.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "tidu/kernels/conv.hpp"
#include "tidu/kernels/elementwise.hpp"
#include "tidu/kernels/factor.hpp"
#include "tidu/kernels/fft.hpp"
#include "tidu/kernels/half.hpp"
#include "tidu/kernels/indexing.hpp"
#include "tidu/kernels/linalg.hpp"
#include "tidu/kernels/random.hpp"
#include "tidu/kernels/search.hpp"
#include "tidu/kernels/select_window.hpp"
#include "tidu/kernels/shapes.hpp"
#include "tidu/kernels/sorting.hpp"
#include "tidu/vm/control_flow.hpp"
#include "tidu/vm/dtype.hpp"
#include "tidu/vm/host_callback.hpp"
#include "tidu/vm/opcodes.hpp"
#include "tidu/vm/parallel.hpp"
#include "tidu/vm/program.hpp"
#include "tidu/vm/workspace.hpp"

namespace tidu {

namespace detail {

// Where Pad instruction `pad` puts its operand in its output: returns the offset of the
// operand's first element and sets dst_str (the output stride of each operand axis).
inline std::int64_t pad_window(const Program& p, const Instr& pad, std::int64_t* dst_str) {
  const std::int64_t* at = p.attrs.data() + pad.attr_begin;  // n, low..., n, high..., n, interior...
  const std::int64_t n = at[0];
  const std::int64_t* low = at + 1;
  const std::int64_t* interior = at + 3 + 2 * n;
  const std::int64_t* xshape = p.shape(p.args[pad.in_begin]);
  std::int64_t out_str[16], base = 0;
  kern::row_major_strides(p.shape(pad.out), p.slots[pad.out].ndim, out_str);
  for (std::int64_t k = 0; k < n; ++k) {
    base += low[k] * out_str[k];
    // Interior padding applies only between two operand elements (and may be huge otherwise).
    dst_str[k] = xshape[k] > 1 ? out_str[k] * (interior[k] + 1) : out_str[k];
  }
  return base;
}

// Elements [first, first + n) of an iota whose counting axis has `extent` entries, each repeated
// `inner` times (the product of the axes after it): runs of one value, no division per element
// (one per element made a 4096-element iota 28 us).
template <class T>
inline void iota_fill(T* r, std::int64_t first, std::int64_t n, std::int64_t inner, std::int64_t extent) {
  if (n <= 0) return;
  std::int64_t rem = first % inner, k = (first / inner) % extent;
  for (std::int64_t i = 0; i < n;) {
    const std::int64_t run = std::min(inner - rem, n - i);
    std::fill(r + i, r + i + run, static_cast<T>(k));
    i += run;
    rem = 0;
    if (++k == extent) k = 0;
  }
}

inline void run_instr(const Program& p, Workspace& ws, std::size_t idx) {
  const Instr& in = p.instrs[idx];
  void** ptr = ws.ptrs();
  const std::uint32_t* a = p.args.data() + in.in_begin;
  const std::int64_t* at = p.attrs.data() + in.attr_begin;
  const Slot& out = p.slots[in.out];
  void* y = ptr[in.out];
  const Slot& x0 = in.n_in ? p.slots[a[0]] : out;  // Constant/Iota read no operand
  switch (in.op) {
    case Op::Neg: case Op::Conj: case Op::Exp: case Op::Log: case Op::Sin: case Op::Cos:
    case Op::Tanh: case Op::Sqrt: case Op::Rsqrt: case Op::Expm1: case Op::Log1p: case Op::Sign:
    case Op::StopGradient:
    case Op::Floor: case Op::Ceil: case Op::Round: case Op::Tan: case Op::Atan: case Op::Asin:
    case Op::Acos: case Op::Sinh: case Op::Cosh: case Op::Asinh: case Op::Acosh: case Op::Atanh:
    case Op::Erf: case Op::Erfc: case Op::ErfInv: case Op::Cbrt: case Op::Logistic: case Op::Lgamma:  // math.hpp
    case Op::Not:
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        if (!kern::unary<T>(in.op, static_cast<const T*>(ptr[a[0]]), static_cast<T*>(y), out.size))
          kern::unsupported(in.op, out.dtype);
      });
      return;
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Max: case Op::Min:
    case Op::Rem: case Op::Atan2:  // math.hpp
    case Op::And: case Op::Or: case Op::Xor: case Op::ShiftLeft: case Op::ShiftRightArithmetic:
    case Op::ShiftRightLogical:
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        if (!kern::binary<T>(in.op, static_cast<const T*>(ptr[a[0]]), static_cast<const T*>(ptr[a[1]]),
                             static_cast<T*>(y), out.size))
          kern::unsupported(in.op, out.dtype);
      });
      return;
    case Op::Real: case Op::Imag: case Op::Abs:
      visit_dtype(x0.dtype, [&](auto t) {
        using T = decltype(t);
        const T* x = static_cast<const T*>(ptr[a[0]]);
        if constexpr (kern::is_complex_v<T>) {
          using R = typename T::value_type;
          R* r = static_cast<R*>(y);
          for (std::int64_t i = 0; i < out.size; ++i)
            r[i] = in.op == Op::Real ? x[i].real() : in.op == Op::Imag ? x[i].imag() : std::abs(x[i]);
        } else if constexpr (!std::is_same_v<T, bool>) {
          if (in.op != Op::Abs) kern::unsupported(in.op, x0.dtype);
          T* r = static_cast<T*>(y);
          if constexpr (kern::is_float_v<T>) {  // clears the sign bit: abs(-0.0) is +0.0, as numpy's
            for (std::int64_t i = 0; i < out.size; ++i) r[i] = std::fabs(x[i]);
          } else {  // abs(INT_MIN) wraps to INT_MIN, as numpy's
            for (std::int64_t i = 0; i < out.size; ++i) r[i] = x[i] < T(0) ? kern::wrap_neg(x[i]) : x[i];
          }
        } else {
          kern::unsupported(in.op, x0.dtype);
        }
      });
      return;
    case Op::IsFinite:  // math.hpp
      visit_dtype(x0.dtype, [&](auto t) {
        using T = decltype(t);
        if (!kern::is_finite<T>(static_cast<const T*>(ptr[a[0]]), static_cast<bool*>(y), out.size))
          kern::unsupported(in.op, x0.dtype);
      });
      return;
    case Op::Compare:
      visit_dtype(x0.dtype, [&](auto t) {
        using T = decltype(t);
        kern::compare<T>(static_cast<Cmp>(at[0]), static_cast<const T*>(ptr[a[0]]),
                         static_cast<const T*>(ptr[a[1]]), static_cast<bool*>(y), out.size);
      });
      return;
    case Op::Select:
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        kern::select<T>(static_cast<const bool*>(ptr[a[0]]), static_cast<const T*>(ptr[a[1]]),
                        static_cast<const T*>(ptr[a[2]]), static_cast<T*>(y), out.size);
      });
      return;
    case Op::Convert:
      if (is_half_dtype(x0.dtype) || is_half_dtype(out.dtype)) {  // half.hpp
        kern::convert_half(x0.dtype, ptr[a[0]], out.dtype, y, out.size);
        return;
      }
      visit_dtype(x0.dtype, [&](auto s) {
        using S = decltype(s);
        visit_dtype(out.dtype, [&](auto d) {
          using D = decltype(d);
          kern::convert<S, D>(static_cast<const S*>(ptr[a[0]]), static_cast<D*>(y), out.size);
        });
      });
      return;
    case Op::ReduceSum: case Op::ReduceMax:
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        kern::reduce_simd<T>(static_cast<const T*>(ptr[a[0]]), p.shape(a[0]), x0.ndim, at + 1, at[0],
                             static_cast<T*>(y), out.size, in.op == Op::ReduceMax ? kern::Red::Max : kern::Red::Sum);
      });
      return;
    case Op::Reshape:  // (a caller may pass null for an empty buffer: no mem* call on 0 bytes)
    case Op::BitcastConvertType:  // the same bytes read as another dtype (validate.hpp: equal sizes)
      if (out.size && y != ptr[a[0]]) std::memmove(y, ptr[a[0]], p.nbytes(in.out));  // plan.hpp: alias
      return;
    case Op::BroadcastInDim: {  // attrs: n, shape..., m, dims...
      if (p.same_bytes(in)) {  // unit axes added: the operand's bytes (plan.hpp may share them)
        if (out.size && y != ptr[a[0]]) std::memmove(y, ptr[a[0]], p.nbytes(in.out));
        return;
      }
      if (x0.size == 1) {  // a fill
        visit_dtype(out.dtype, [&](auto t) {
          using T = decltype(t);
          const T v = *static_cast<const T*>(ptr[a[0]]);
          T* r = static_cast<T*>(y);
          for (std::int64_t i = 0; i < out.size; ++i) r[i] = v;
        });
        return;
      }
      std::int64_t n = at[0];
      const std::int64_t* dims = at + 2 + n;
      std::int64_t in_str[16], src_str[16];
      kern::row_major_strides(p.shape(a[0]), x0.ndim, in_str);
      for (std::int64_t k = 0; k < n; ++k) src_str[k] = 0;
      for (std::uint32_t i = 0; i < x0.ndim; ++i)
        src_str[dims[i]] = p.shape(a[0])[i] == 1 ? 0 : in_str[i];
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        kern::gather<T>(static_cast<const T*>(ptr[a[0]]), 0, p.shape(in.out), src_str, out.ndim, static_cast<T*>(y));
      });
      return;
    }
    case Op::Transpose: {  // attrs: n, perm...
      std::int64_t in_str[16], src_str[16];
      kern::row_major_strides(p.shape(a[0]), x0.ndim, in_str);
      for (std::uint32_t k = 0; k < out.ndim; ++k) src_str[k] = in_str[at[1 + k]];
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        kern::gather<T>(static_cast<const T*>(ptr[a[0]]), 0, p.shape(in.out), src_str, out.ndim, static_cast<T*>(y));
      });
      return;
    }
    case Op::Slice: {  // attrs: n, start..., n, limit..., n, stride...
      std::int64_t n = at[0];
      const std::int64_t* start = at + 1;
      const std::int64_t* stride = at + 3 + 2 * n;
      std::int64_t in_str[16], src_str[16], base = 0;
      kern::row_major_strides(p.shape(a[0]), x0.ndim, in_str);
      for (std::int64_t k = 0; k < n; ++k) {
        base += start[k] * in_str[k];
        // One element or none along k: the stride is never applied (and may be huge).
        src_str[k] = p.shape(in.out)[k] > 1 ? in_str[k] * stride[k] : 0;
      }
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        kern::gather<T>(static_cast<const T*>(ptr[a[0]]), base, p.shape(in.out), src_str, out.ndim, static_cast<T*>(y));
      });
      return;
    }
    case Op::Pad: {
      std::int64_t dst_str[16];
      const std::int64_t base = pad_window(p, in, dst_str);
      if (out.size) std::memset(y, 0, p.nbytes(in.out));
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        kern::scatter<T>(static_cast<const T*>(ptr[a[0]]), p.shape(a[0]), static_cast<T*>(y), base, dst_str, out.ndim);
      });
      return;
    }
    case Op::Concatenate: {  // attrs: axis
      std::int64_t axis = at[0], offset = 0;
      std::int64_t out_str[16];
      kern::row_major_strides(p.shape(in.out), out.ndim, out_str);
      for (std::uint32_t i = 0; i < in.n_in; ++i) {
        visit_dtype(out.dtype, [&](auto t) {
          using T = decltype(t);
          kern::scatter<T>(static_cast<const T*>(ptr[a[i]]), p.shape(a[i]), static_cast<T*>(y),
                           offset * out_str[axis], out_str, out.ndim);
        });
        offset += p.shape(a[i])[axis];
      }
      return;
    }
    case Op::DotGeneral: {  // attrs: n, lc..., n, rc..., n, lb..., n, rb...
      kern::DotTables& tb = ws.dot(idx);
      const Slot& x1 = p.slots[a[1]];
      // The axes and strides (small arrays on the stack): the layout at the first evaluation
      // with this workspace, the loop tables when the loop path first runs.
      std::int64_t ls[16], rs[16], lfree[16], rfree[16], nlf = 0, nrf = 0;
      auto axes = [&] {
        const std::int64_t* lc = at + 1;
        const std::int64_t* rc = lc + at[0] + 1;
        const std::int64_t* lb = rc + rc[-1] + 1;
        const std::int64_t* rb = lb + lb[-1] + 1;
        const std::int64_t nc = at[0], nbt = lb[-1];
        kern::row_major_strides(p.shape(a[0]), x0.ndim, ls);
        kern::row_major_strides(p.shape(a[1]), x1.ndim, rs);
        nlf = nrf = 0;
        for (std::int64_t k = 0; k < static_cast<std::int64_t>(x0.ndim); ++k)
          if (std::find(lc, lc + nc, k) == lc + nc && std::find(lb, lb + nbt, k) == lb + nbt) lfree[nlf++] = k;
        for (std::int64_t k = 0; k < static_cast<std::int64_t>(x1.ndim); ++k)
          if (std::find(rc, rc + nc, k) == rc + nc && std::find(rb, rb + nbt, k) == rb + nbt) rfree[nrf++] = k;
        return kern::DotAxes{p.shape(a[0]), p.shape(a[1]), ls, rs, lfree, lc, lb, rfree, rc, rb, nlf, nc, nbt, nrf};
      };
      if (!tb.ready) kern::dot_layout(axes(), tb, false);
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        if constexpr (std::is_same_v<T, bool>) {
          kern::unsupported(in.op, out.dtype);
        } else {
          const T* xp = static_cast<const T*>(ptr[a[0]]);
          const T* wp = static_cast<const T*>(ptr[a[1]]);
          if (kern::dot_blas<T>(xp, wp, static_cast<T*>(y), tb)) return;
          if (!tb.loops) kern::dot_layout(axes(), tb, true);
          kern::dot_loops<T>(xp, wp, static_cast<T*>(y), tb);
        }
      });
      return;
    }
    case Op::Constant:  // attrs: offset, nbytes
      if (at[1]) std::memcpy(y, p.consts.data() + at[0], static_cast<std::size_t>(at[1]));
      return;
    case Op::Iota: {  // attrs: n, shape..., dtype, dimension
      std::int64_t dim = at[at[0] + 2];
      const std::int64_t* shape = p.shape(in.out);
      std::int64_t inner = 1;
      for (std::uint32_t k = dim + 1; k < out.ndim; ++k) inner *= shape[k];
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        T* r = static_cast<T*>(y);
        iota_fill(r, 0, out.size, inner, shape[dim]);
      });
      return;
    }
    case Op::TriangularSolve: case Op::Cholesky:  // linalg.hpp
      kern::run_linalg(in.op, p, a, at, out.dtype, y, ptr);
      return;
    case Op::Gather: case Op::Scatter: case Op::DynamicSlice: case Op::DynamicUpdateSlice:  // gather.hpp
      kern::run_indexing(in.op, p, a, at, out, in.out, y, ptr);
      return;
    case Op::ReduceMin: {  // of real values (validate.hpp): the loops of ReduceSum and ReduceMax
      bool done = false;
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        if constexpr (!kern::is_complex_v<T> && !std::is_same_v<T, bool>) {
          kern::reduce_simd<T>(static_cast<const T*>(ptr[a[0]]), p.shape(a[0]), x0.ndim, at + 1, at[0],
                               static_cast<T*>(y), out.size, kern::Red::Min);
          done = true;
        }
      });
      if (done) return;
      kern::run_sort_scan(in.op, p, a, in.n_in, at, in.out, y, ptr);  // reports the dtype
      return;
    }
    case Op::ReduceProd: case Op::ReduceAnd: case Op::ReduceOr: case Op::ArgMax:
    case Op::ArgMin: case Op::Cumsum: case Op::Cumprod: case Op::Cummax: case Op::Cummin:
    case Op::LinearScan: case Op::Sort:  // sort_scan.hpp
      kern::run_sort_scan(in.op, p, a, in.n_in, at, in.out, y, ptr);
      return;
    case Op::LU: case Op::LUPermute: case Op::Eigh: case Op::QR: case Op::SVD: case Op::Eig:
    case Op::Schur: case Op::Hessenberg: case Op::Geqrf:  // factor.hpp
      kern::run_factor(in.op, p, a, at, y, ptr);
      return;
    case Op::Rev:  // shapes.hpp
      kern::run_shape(in.op, p, a, at, out.dtype, y, ptr);
      return;
    case Op::Conv:  // conv.hpp
      kern::run_conv(p, a, in.out, at, out.dtype, y, ptr);
      return;
    case Op::Threefry2x32: {  // random.hpp; validated: key (..., 2), count (..., C..., 2) uint32
      const std::int64_t groups = x0.size / 2;
      kern::run_threefry(static_cast<const std::uint32_t*>(ptr[a[0]]), static_cast<const std::uint32_t*>(ptr[a[1]]),
                         static_cast<std::uint32_t*>(y), groups, groups ? out.size / 2 / groups : 0);
      return;
    }
    case Op::Threefry2x32Iota: {  // random.hpp; validated: key (K..., 2), output (K..., S..., 2 or none)
      const std::int64_t groups = x0.size / 2;
      const bool fold = at[at[0] + 1] != 0;
      kern::run_threefry_iota(static_cast<const std::uint32_t*>(ptr[a[0]]), static_cast<std::uint32_t*>(y), groups,
                              groups ? out.size / (fold ? 1 : 2) / groups : 0, fold,
                              in.n_in == 2 ? static_cast<const std::uint32_t*>(ptr[a[1]]) : nullptr);
      return;
    }
    case Op::ReduceWindowSum: case Op::ReduceWindowMax: case Op::ReduceWindowMin:  // conv.hpp
      kern::run_reduce_window(in.op, p, a, in.out, at, out.dtype, y, ptr);
      return;
    case Op::SelectAndGatherAdd:
    case Op::SelectAndScatterAdd:  // select_window.hpp
      kern::run_select_window(in.op, p, a, in.out, at, out.dtype, y, ptr);
      return;
    case Op::HostCallback:  // host_callback.hpp
      run_host_callback(p, in, ptr);
      return;
    case Op::Tie:
      run_tie(p, in, ptr);
      return;
    case Op::Fft:  // fft.hpp
      kern::run_fft(p, a, in.out, at, y, ptr);
      return;
    case Op::SearchSorted:  // search.hpp
      kern::run_search_sorted(p, a, at, in.out, y, ptr);
      return;
    default:
      throw std::runtime_error(std::string("tidu: no kernel for opcode ") + op_name(in.op));
  }
}

// ---- handlers: instructions with their opcode and dtype resolved ahead of time ----
// Programs over small arrays (a 3-vector integrator, a gradient's scalar bookkeeping) run tens of
// thousands of instructions of a few elements each, where the two dispatches of run_instr
// (opcode, then dtype) cost as much as the arithmetic.  The common ones get a function each
// (a Reshape, a copy with no dtype dispatch, stays with run_instr).

template <Op OP, class T>
inline void run_binary(const Program& p, Workspace& ws, std::size_t i) {
  const Instr& in = p.instrs[i];
  void** ptr = ws.ptrs();
  const std::uint32_t* a = p.args.data() + in.in_begin;
  const T* x = static_cast<const T*>(ptr[a[0]]);
  const T* y = static_cast<const T*>(ptr[a[1]]);
  T* r = static_cast<T*>(ptr[in.out]);
  const std::int64_t n = p.slots[in.out].size;
  for (std::int64_t k = 0; k < n; ++k) r[k] = kern::binary_op<OP, T>(x[k], y[k]);
}

template <class T>
inline void run_neg(const Program& p, Workspace& ws, std::size_t i) {
  const Instr& in = p.instrs[i];
  void** ptr = ws.ptrs();
  const T* x = static_cast<const T*>(ptr[p.args[in.in_begin]]);
  T* r = static_cast<T*>(ptr[in.out]);
  const std::int64_t n = p.slots[in.out].size;
  for (std::int64_t k = 0; k < n; ++k) r[k] = -x[k];
}

template <class T>
inline Handler float_handler(Op op) {
  switch (op) {
    case Op::Add: return &run_binary<Op::Add, T>;
    case Op::Sub: return &run_binary<Op::Sub, T>;
    case Op::Mul: return &run_binary<Op::Mul, T>;
    case Op::Div: return &run_binary<Op::Div, T>;
    case Op::Max: return &run_binary<Op::Max, T>;
    case Op::Min: return &run_binary<Op::Min, T>;
    case Op::Neg: return &run_neg<T>;
    default: return &run_instr;
  }
}

// Add i absorbing the zero Pad j (Program::fuse_pad_adds): y holds the accumulator already
// (its buffer is the accumulator's, unless y is a caller's output buffer: then one copy), and the
// pad's operand is added into its window.
inline void run_add_pad(const Program& p, Workspace& ws, std::size_t i) {
  const Instr& in = p.instrs[i];
  const Instr& pad = p.instrs[p.fused_pad[i]];
  void** ptr = ws.ptrs();
  const std::uint32_t acc = p.fused_acc(i), x = p.args[pad.in_begin];
  void* y = ptr[in.out];
  if (y != ptr[acc] && p.nbytes(in.out)) std::memcpy(y, ptr[acc], p.nbytes(in.out));
  const Slot& out = p.slots[in.out];
  std::int64_t dst_str[16];
  const std::int64_t base = pad_window(p, pad, dst_str);
  visit_dtype(out.dtype, [&](auto t) {
    using T = decltype(t);
    kern::scatter<T, true>(static_cast<const T*>(ptr[x]), p.shape(x), static_cast<T*>(y), base, dst_str, out.ndim);
  });
}

inline void run_nothing(const Program&, Workspace&, std::size_t) {}

inline Handler handler_for(const Program& p, std::size_t i) {
  const Instr& in = p.instrs[i];
  if (!p.fused_pad.empty() && p.fused_pad[i] >= 0) return &run_add_pad;
  if (!p.pad_absorbed.empty() && p.pad_absorbed[i]) return &run_nothing;
  if (is_control(in.op)) return &run_control;
  return visit_dtype_in<DTypeSet<double, float>>(
      p.slots[in.out].dtype, [&](auto t) { return float_handler<decltype(t)>(in.op); },
      []() -> Handler { return &run_instr; });
}


// Elements [lo, lo + n) of a chain's tail reduction (Program::tail_reduce) added into acc, its
// run's partial sums (double, one per output element): the operand as [A, R, C], a run along R
// (C == 1) summed in 8 lanes and added to its output, a run along C added element by element.
inline void run_reduce_block(const Program& p, Workspace& ws, std::size_t idx, std::int64_t lo, std::int64_t n,
                             std::uint8_t* scratch, double* acc) {
  const Instr& in = p.instrs[idx];
  const std::uint32_t a = p.args[in.in_begin];
  const std::int32_t l = p.local.empty() ? -1 : p.local[a];
  const void* base = l >= 0 ? static_cast<const void*>(scratch + static_cast<std::size_t>(l) * Program::kLocalBytes)
                            : nullptr;
  std::int64_t A, R, C;
  p.reduce_split(in, A, R, C);
  (void)A;
  const std::int64_t RC = R * C;
  auto run = [&](auto t) {  // float32 or float64 values (Program::tail_reduce)
    using T = decltype(t);
    const T* x = base ? static_cast<const T*>(base) : static_cast<const T*>(ws.ptrs()[a]) + lo;
    for (std::int64_t e = lo, end = lo + n; e < end;) {
      const std::int64_t outer = e / RC, rem = e % RC;
      if (C == 1) {
        const std::int64_t len = std::min(R - rem, end - e);
        acc[outer] += kern::widen_sum(x + (e - lo), len);  // 8 lanes, combined pairwise
        e += len;
      } else {
        const std::int64_t c = rem % C, len = std::min(C - c, end - e);
        kern::widen_add(acc + outer * C + c, x + (e - lo), len);
        e += len;
      }
    }
  };
  if (p.slots[a].dtype == DType::F64) run(double{});
  else run(float{});
}

// Elements [lo, lo + n) of a blockable instruction (see Program::chain_end): elementwise maps,
// compare/select/convert, broadcasts and iotas.
// A chain-local slot (Program::local) is the thread's scratch buffer for the block instead.
inline void run_block(const Program& p, Workspace& ws, std::size_t idx, std::int64_t lo, std::int64_t n,
                      std::uint8_t* scratch) {
  const Instr& in = p.instrs[idx];
  void** ptr = ws.ptrs();
  const std::uint32_t* a = p.args.data() + in.in_begin;
  const Slot& out = p.slots[in.out];
  const DType xd = in.n_in ? p.slots[a[0]].dtype : out.dtype;
  auto addr = [&](std::uint32_t s) -> void* {
    const std::int32_t l = p.local.empty() ? -1 : p.local[s];
    if (l >= 0) return scratch + static_cast<std::size_t>(l) * Program::kLocalBytes;
    return static_cast<std::uint8_t*>(ptr[s]) + lo * static_cast<std::int64_t>(dtype_size(p.slots[s].dtype));
  };
  auto at = [&](std::uint32_t k, auto t) {
    using T = decltype(t);
    return static_cast<const T*>(addr(a[k]));
  };
  switch (in.op) {
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Max: case Op::Min:
    case Op::Rem: case Op::Atan2:
    case Op::And: case Op::Or: case Op::Xor: case Op::ShiftLeft: case Op::ShiftRightArithmetic:
    case Op::ShiftRightLogical:
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        if (!kern::binary<T>(in.op, at(0, t), at(1, t), static_cast<T*>(addr(in.out)), n))
          kern::unsupported(in.op, out.dtype);
      });
      return;
    case Op::Compare:
      visit_dtype(xd, [&](auto t) {
        kern::compare(static_cast<Cmp>(p.attrs[in.attr_begin]), at(0, t), at(1, t),
                      static_cast<bool*>(addr(in.out)), n);
      });
      return;
    case Op::Select:
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        kern::select<T>(static_cast<const bool*>(addr(a[0])), at(1, t), at(2, t),
                        static_cast<T*>(addr(in.out)), n);
      });
      return;
    case Op::Reshape: {  // the same elements in the same order: a copy of the block
      void* r = addr(in.out);
      const void* x = addr(a[0]);
      if (n && r != x) std::memcpy(r, x, static_cast<std::size_t>(n) * dtype_size(out.dtype));
      return;
    }
    case Op::Convert:
      if (is_half_dtype(xd) || is_half_dtype(out.dtype)) {  // half.hpp
        kern::convert_half(xd, addr(a[0]), out.dtype, addr(in.out), n);
        return;
      }
      visit_dtype(xd, [&](auto s) {
        using S = decltype(s);
        visit_dtype(out.dtype, [&](auto d) {
          using D = decltype(d);
          kern::convert<S, D>(at(0, s), static_cast<D*>(addr(in.out)), n);
        });
      });
      return;
    case Op::BroadcastInDim: {  // attrs: n, shape..., m, dims...
      if (p.same_bytes(in)) {  // unit axes added: the block of the operand (plan.hpp may share it)
        void* r = addr(in.out);
        const void* x = addr(a[0]);
        if (n && r != x) std::memcpy(r, x, static_cast<std::size_t>(n) * dtype_size(out.dtype));
        return;
      }
      if (p.slots[a[0]].size == 1) {  // a fill
        visit_dtype(out.dtype, [&](auto t) {
          using T = decltype(t);
          const T v = *static_cast<const T*>(ptr[a[0]]);
          kern::fill(static_cast<T*>(addr(in.out)), v, n);
        });
        return;
      }
      // Output elements [lo, lo + n) in row-major order, one run along the last axis at a time:
      // the operand offset of the first element from its coordinates, then stride steps (0 along
      // a broadcast axis), carrying into the outer coordinates at the end of each row.
      const std::int64_t* attr = p.attrs.data() + in.attr_begin;
      const std::int64_t* dims = attr + 2 + attr[0];
      const std::int64_t* shape = p.shape(in.out);
      const Slot& x0 = p.slots[a[0]];
      const int nd = static_cast<int>(out.ndim);
      std::int64_t in_str[16], str[16], coord[16];
      kern::row_major_strides(p.shape(a[0]), x0.ndim, in_str);
      for (int k = 0; k < nd; ++k) str[k] = 0;
      for (std::uint32_t i = 0; i < x0.ndim; ++i) str[dims[i]] = p.shape(a[0])[i] == 1 ? 0 : in_str[i];
      std::int64_t off = 0, rem = lo;
      for (int k = nd - 1; k >= 0; --k) {
        coord[k] = rem % shape[k];
        rem /= shape[k];
        off += coord[k] * str[k];
      }
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        const T* src = static_cast<const T*>(ptr[a[0]]);
        T* r = static_cast<T*>(addr(in.out));
        const std::int64_t last = shape[nd - 1], s = str[nd - 1];
        if (nd >= 2 && last < 16) {
          // Short rows (the 3 coordinates of a (64, 64, 3) pair array): whole rows of the
          // second-last axis in one tight loop, a carry only at its end, not per row; a row cut
          // by the block's edge goes element by element.
          const std::int64_t rows = shape[nd - 2], s2 = str[nd - 2];
          auto carry_outer = [&] {  // coord[nd - 2] reached rows: on into the outer axes
            off -= rows * s2;
            coord[nd - 2] = 0;
            for (int k = nd - 3; k >= 0; --k) {
              off += str[k];
              if (++coord[k] < shape[k]) break;
              off -= str[k] * shape[k];
              coord[k] = 0;
            }
          };
          for (std::int64_t i = 0; i < n;) {
            if (coord[nd - 1] == 0 && n - i >= last) {
              const std::int64_t k = std::min(rows - coord[nd - 2], (n - i) / last);
              const T* b = src + off;
              T* d = r + i;
              // Rows of 2-4 with the row length and step known to the compiler (a pair array's
              // 3 coordinates, each a copy or one value repeated): no inner loop per row.
              auto rows_of = [&](auto len, auto step) {
                constexpr std::int64_t L = decltype(len)::value, S = decltype(step)::value;
                for (std::int64_t q = 0; q < k; ++q, b += s2, d += L)
                  for (std::int64_t j = 0; j < L; ++j) d[j] = b[j * S];
              };
              using Z = std::integral_constant<std::int64_t, 0>;
              using O = std::integral_constant<std::int64_t, 1>;
              if (last == 3 && s == 0) rows_of(std::integral_constant<std::int64_t, 3>{}, Z{});
              else if (last == 3 && s == 1) rows_of(std::integral_constant<std::int64_t, 3>{}, O{});
              else if (last == 2 && s == 0) rows_of(std::integral_constant<std::int64_t, 2>{}, Z{});
              else if (last == 2 && s == 1) rows_of(std::integral_constant<std::int64_t, 2>{}, O{});
              else if (last == 4 && s == 0) rows_of(std::integral_constant<std::int64_t, 4>{}, Z{});
              else if (last == 4 && s == 1) rows_of(std::integral_constant<std::int64_t, 4>{}, O{});
              else
                for (std::int64_t q = 0; q < k; ++q, b += s2, d += last)
                  for (std::int64_t j = 0; j < last; ++j) d[j] = b[j * s];
              i += k * last;
              off += k * s2;
              coord[nd - 2] += k;
            } else {  // one element
              r[i++] = src[off];
              off += s;
              if (++coord[nd - 1] < last) continue;
              off -= last * s;
              coord[nd - 1] = 0;
              off += s2;
              ++coord[nd - 2];
            }
            if (coord[nd - 2] == rows) carry_outer();
          }
          return;
        }
        for (std::int64_t i = 0; i < n;) {
          const std::int64_t len = std::min(last - coord[nd - 1], n - i);
          if (s == 0) {
            kern::fill(r + i, src[off], len);
          } else if (s == 1) {  // a contiguous run (a bias row): a copy the compiler vectorises
            const T* from = src + off;
            for (std::int64_t j = 0; j < len; ++j) r[i + j] = from[j];
          } else {
            for (std::int64_t j = 0; j < len; ++j) r[i + j] = src[off + j * s];
          }
          i += len;
          off += len * s;
          coord[nd - 1] += len;
          for (int k = nd - 1; k > 0 && coord[k] == shape[k]; --k) {  // carry
            off -= shape[k] * str[k];
            coord[k] = 0;
            ++coord[k - 1];
            off += str[k - 1];
          }
        }
      });
      return;
    }
    case Op::Iota: {  // attrs: n, shape..., dtype, dimension
      const std::int64_t* attr = p.attrs.data() + in.attr_begin;
      const std::int64_t dim = attr[attr[0] + 2];
      const std::int64_t* shape = p.shape(in.out);
      std::int64_t inner = 1;
      for (std::uint32_t k = dim + 1; k < out.ndim; ++k) inner *= shape[k];
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        T* r = static_cast<T*>(addr(in.out));
        iota_fill(r, lo, n, inner, shape[dim]);
      });
      return;
    }
    default:  // unary maps
      visit_dtype(out.dtype, [&](auto t) {
        using T = decltype(t);
        if (!kern::unary<T>(in.op, at(0, t), static_cast<T*>(addr(in.out)), n))
          kern::unsupported(in.op, out.dtype);
      });
      return;
  }
}

}  // namespace detail
}  // namespace tidu
