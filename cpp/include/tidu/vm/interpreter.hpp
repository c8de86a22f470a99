// tidu/vm/interpreter.hpp - evaluation of a Program: one loop over fixed-width instructions, a switch
// on the opcode into kernels templated on dtype.  A Workspace (one per thread) owns the arena;
// after it exists an evaluation allocates nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tidu/kernels/indexing.hpp"
#include "tidu/kernels/elementwise.hpp"
#include "tidu/kernels/factor.hpp"
#include "tidu/kernels/linalg.hpp"
#include "tidu/vm/opcodes.hpp"
#include "tidu/vm/parallel.hpp"
#include "tidu/vm/program.hpp"
#include "tidu/kernels/sorting.hpp"
#include "tidu/kernels/shapes.hpp"

namespace tidu {

// Calls f(T{}) with T the C++ type of dtype d.
template <class F>
inline void visit(DType d, F&& f) {
  switch (d) {
#define TIDU_VISIT(name, type, str) \
  case DType::name:                 \
    f(type{});                      \
    return;
    TIDU_DTYPES(TIDU_VISIT)
#undef TIDU_VISIT
    default:
      throw std::runtime_error("tidu: unknown dtype");
  }
}

class Workspace;
using Handler = void (*)(const Program&, Workspace&, std::size_t);
namespace detail {
inline Handler handler_for(const Program& p, std::size_t i);  // below, with the handlers
inline void run_control(const Program& p, Workspace& ws, std::size_t i);  // control_flow.hpp
}

// Arena memory handed from workspaces that end, or are idle (Workspace::lend), to workspaces
// that start.  Memory fresh from the kernel costs its first touch (a fault and a zeroed page:
// about 2 us per 4 KiB on the machines bench/transforms.py ran on, 0.5 ms for a 50-layer MLP
// gradient's 1 MB arena, as much as its evaluation), so the first evaluation of a new program
// reuses such an arena when there is one of a fitting size (at least the need, at most twice it).  Blocks of 64 KiB
// and more are kept, up to 64 MiB in all (the largest go first); smaller ones come from malloc,
// which reuses them anyway.  Arena contents are never read before they are written, so a
// recycled block needs no clearing.
class ArenaPool {
 public:
  static constexpr std::size_t kMinBytes = std::size_t{64} << 10, kMaxHeld = std::size_t{64} << 20;

  static ArenaPool& get() {  // never destroyed: workspaces may outlive static destructors
    static ArenaPool* pool = new ArenaPool;
    return *pool;
  }
  // Whether blocks of this many words are kept (others go back to malloc).
  static bool kept(std::size_t words) { return words * 8 >= kMinBytes && words * 8 <= kMaxHeld; }
  // A block of at least `words` 8-byte words (its size in `got`): `prefer` (a block of
  // `prefer_words` given back earlier) when it is still here, else the best fit, else new memory.
  std::unique_ptr<std::uint64_t[]> take(std::size_t words, std::size_t& got,
                                        const std::uint64_t* prefer = nullptr, std::size_t prefer_words = 0) {
    if (words * 8 >= kMinBytes) {
      std::lock_guard<std::mutex> lock(mu_);
      auto pop = [&](decltype(free_)::iterator it) {
        got = it->first;
        auto b = std::move(it->second);
        held_ -= got * 8;
        free_.erase(it);
        return b;
      };
      if (prefer != nullptr) {
        auto range = free_.equal_range(prefer_words);
        for (auto it = range.first; it != range.second; ++it)
          if (it->second.get() == prefer && it->first >= words) return pop(it);
      }
      auto it = free_.lower_bound(words);
      if (it != free_.end() && it->first <= 2 * words) return pop(it);
    }
    got = words;
    return std::unique_ptr<std::uint64_t[]>(new std::uint64_t[words]);  // not cleared
  }
  void give(std::unique_ptr<std::uint64_t[]> b, std::size_t words) {
    if (!b || !kept(words)) return;
    std::lock_guard<std::mutex> lock(mu_);
    while (held_ + words * 8 > kMaxHeld && !free_.empty()) {
      auto last = std::prev(free_.end());
      held_ -= last->first * 8;
      free_.erase(last);
    }
    held_ += words * 8;
    free_.emplace(words, std::move(b));
  }
  void clear() {  // frees every kept block
    std::lock_guard<std::mutex> lock(mu_);
    free_.clear();
    held_ = 0;
  }
  std::size_t held_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_;
  }

 private:
  std::mutex mu_;
  std::multimap<std::size_t, std::unique_ptr<std::uint64_t[]>> free_;  // by size in words
  std::size_t held_ = 0;
};

class Workspace {
 public:
  // An all-scalar program needs only its array of doubles; others the arena, slot pointers,
  // instruction handlers and, per matrix product, its offset tables.
  explicit Workspace(const Program& p) : scalars_(p.scalar_code.empty() ? 0 : p.scalar_values + 1) {
    if (!p.scalar_code.empty()) return;
    // A nested program (a loop body, a branch) runs on a workspace of its own, made here with
    // its parent's, and a loop's second set of carry buffers is sized here too: evaluating a
    // program with loops allocates nothing either, however many iterations run.
    for (const Program& sub : p.subs) subs_.push_back(std::make_unique<Workspace>(sub));
    std::uint64_t carry = 0;
    for (const Instr& in : p.instrs)
      if (in.op == Op::Scan || in.op == Op::While) {
        // The carries: a while loop's outputs, a scan's first n_carry (its ys are written in
        // place into the stacked outputs and need no second copy).
        const std::uint32_t nk = in.op == Op::Scan ? static_cast<std::uint32_t>(p.attrs[in.attr_begin + 4]) : in.n_out;
        std::uint64_t b = 0;
        for (std::uint32_t k = 0; k < nk; ++k) b += (p.nbytes(p.outs[in.out_begin + k]) + 63) & ~std::uint64_t{63};
        carry = std::max(carry, b);
      }
    carry_.resize(carry / 8 + 8);
    std::size_t n_ptrs = 0;
    for (const Program& sub : p.subs) n_ptrs += sub.inputs.size() + 3 * sub.outputs.size();  // bounds any call's
    sub_ptrs_.resize(n_ptrs);
    need_words_ = (p.arena_bytes + 64) / 8 + 1;
    arena_ = ArenaPool::get().take(need_words_, arena_words_);
    ptr_.resize(p.slots.size());
    for (std::uint32_t s = 0; s < p.slots.size(); ++s) reset(p, s);
    handlers_.resize(p.instrs.size());
    dot_of_.assign(p.instrs.size(), 0);
    std::uint32_t n_dots = 0;
    for (std::size_t i = 0; i < p.instrs.size(); ++i) {
      handlers_[i] = detail::handler_for(p, i);
      if (p.instrs[i].op == Op::DotGeneral) dot_of_[i] = n_dots++;
    }
    dots_.resize(n_dots);
  }
  ~Workspace() { ArenaPool::get().give(std::move(arena_), arena_words_); }
  // An idle workspace may lend its arena to the ArenaPool, so that programs that are not running
  // hold no arena memory and a new program's first evaluation reuses theirs; reclaim() before
  // the next evaluation takes the same block back when no one took it meanwhile, another
  // otherwise (and points the slots at it).  The Python binding does this around each call of a
  // program whose arena the pool keeps (64 KiB to 64 MiB); a C++ caller may, or keep the arena.
  void lend() {
    if (!arena_ || !ArenaPool::kept(arena_words_)) return;
    lent_ = arena_.get();
    ArenaPool::get().give(std::move(arena_), arena_words_);
  }
  void reclaim(const Program& p) {
    if (arena_ || lent_ == nullptr) return;
    const std::uint64_t* was = lent_;
    const std::size_t was_words = arena_words_;
    lent_ = nullptr;
    arena_ = ArenaPool::get().take(need_words_, arena_words_, was, was_words);
    if (arena_.get() == was) return;
    for (std::uint32_t s = 0; s < p.slots.size(); ++s) reset(p, s);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  // The function that runs instruction i (resolved once per workspace: no dispatch on opcode
  // and dtype per evaluation).
  Handler handler(std::size_t i) const { return handlers_[i]; }
  void** ptrs() { return ptr_.data(); }
  // Points slot s back at its arena buffer (after an evaluation wrote it to a caller's buffer).
  void reset(const Program& p, std::uint32_t s) {
    ptr_[s] = reinterpret_cast<std::uint8_t*>(arena_.get()) + p.slots[s].offset;
  }
  kern::DotTables& dot(std::size_t i) { return dots_[dot_of_[i]]; }  // of DotGeneral instruction i
  std::uint64_t bytes() const { return arena_words_ * 8; }
  Workspace& sub(std::size_t k) { return *subs_[k]; }  // of nested program k (Program::subs)
  // 64-byte aligned scratch for a loop's second set of carries (sized by the constructor).
  std::uint8_t* carry_scratch() {
    auto addr = reinterpret_cast<std::uintptr_t>(carry_.data());
    return reinterpret_cast<std::uint8_t*>((addr + 63) & ~std::uintptr_t{63});
  }
  void** sub_ptrs() { return sub_ptrs_.data(); }  // room for a nested call's pointer lists
  double* scalars() { return scalars_.data(); }
  // Block scratch of the chains' local slots (Program::local), at least `bytes`: grown by the
  // first evaluation that needs it, reused after.
  std::uint8_t* chain_scratch(std::size_t bytes) {
    if (scratch_.size() * sizeof(double) < bytes) scratch_.resize((bytes + sizeof(double) - 1) / sizeof(double));
    return reinterpret_cast<std::uint8_t*>(scratch_.data());
  }

 private:
  std::unique_ptr<std::uint64_t[]> arena_;  // 8-byte aligned storage for every non-input slot
  std::size_t arena_words_ = 0, need_words_ = 0;
  const std::uint64_t* lent_ = nullptr;  // the arena given to the pool by lend(), if any
  std::vector<void*> ptr_;
  std::vector<kern::DotTables> dots_;
  std::vector<std::uint32_t> dot_of_;  // instruction -> its entry in dots_
  std::vector<double> scalars_;  // slot values on the all-scalar fast path
  std::vector<double> scratch_;  // chain_scratch
  std::vector<Handler> handlers_;
  std::vector<std::unique_ptr<Workspace>> subs_;
  std::vector<std::uint64_t> carry_;
  std::vector<void*> sub_ptrs_;
};

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
    case Op::Erf: case Op::Erfc: case Op::ErfInv: case Op::Cbrt: case Op::Logistic:  // math.hpp
      visit(out.dtype, [&](auto t) {
        using T = decltype(t);
        if (!kern::unary<T>(in.op, static_cast<const T*>(ptr[a[0]]), static_cast<T*>(y), out.size))
          kern::unsupported(in.op, out.dtype);
      });
      return;
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Max: case Op::Min:
    case Op::Rem: case Op::Atan2:  // math.hpp
      visit(out.dtype, [&](auto t) {
        using T = decltype(t);
        if (!kern::binary<T>(in.op, static_cast<const T*>(ptr[a[0]]), static_cast<const T*>(ptr[a[1]]),
                             static_cast<T*>(y), out.size))
          kern::unsupported(in.op, out.dtype);
      });
      return;
    case Op::Real: case Op::Imag: case Op::Abs:
      visit(x0.dtype, [&](auto t) {
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
      visit(x0.dtype, [&](auto t) {
        using T = decltype(t);
        if (!kern::is_finite<T>(static_cast<const T*>(ptr[a[0]]), static_cast<bool*>(y), out.size))
          kern::unsupported(in.op, x0.dtype);
      });
      return;
    case Op::Compare:
      visit(x0.dtype, [&](auto t) {
        using T = decltype(t);
        kern::compare<T>(static_cast<Cmp>(at[0]), static_cast<const T*>(ptr[a[0]]),
                         static_cast<const T*>(ptr[a[1]]), static_cast<bool*>(y), out.size);
      });
      return;
    case Op::Select:
      visit(out.dtype, [&](auto t) {
        using T = decltype(t);
        const bool* c = static_cast<const bool*>(ptr[a[0]]);
        const T* u = static_cast<const T*>(ptr[a[1]]);
        const T* v = static_cast<const T*>(ptr[a[2]]);
        T* r = static_cast<T*>(y);
        for (std::int64_t i = 0; i < out.size; ++i) r[i] = c[i] ? u[i] : v[i];
      });
      return;
    case Op::Convert:
      visit(x0.dtype, [&](auto s) {
        using S = decltype(s);
        visit(out.dtype, [&](auto d) {
          using D = decltype(d);
          kern::convert<S, D>(static_cast<const S*>(ptr[a[0]]), static_cast<D*>(y), out.size);
        });
      });
      return;
    case Op::ReduceSum: case Op::ReduceMax:
      visit(out.dtype, [&](auto t) {
        using T = decltype(t);
        kern::reduce<T>(static_cast<const T*>(ptr[a[0]]), p.shape(a[0]), x0.ndim, at + 1, at[0],
                        static_cast<T*>(y), out.size, in.op == Op::ReduceMax);
      });
      return;
    case Op::Reshape:  // (a caller may pass null for an empty buffer: no mem* call on 0 bytes)
      if (out.size) std::memmove(y, ptr[a[0]], p.nbytes(in.out));
      return;
    case Op::BroadcastInDim: {  // attrs: n, shape..., m, dims...
      if (x0.size == 1) {  // a fill
        visit(out.dtype, [&](auto t) {
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
      visit(out.dtype, [&](auto t) {
        using T = decltype(t);
        kern::gather<T>(static_cast<const T*>(ptr[a[0]]), 0, p.shape(in.out), src_str, out.ndim, static_cast<T*>(y));
      });
      return;
    }
    case Op::Transpose: {  // attrs: n, perm...
      std::int64_t in_str[16], src_str[16];
      kern::row_major_strides(p.shape(a[0]), x0.ndim, in_str);
      for (std::uint32_t k = 0; k < out.ndim; ++k) src_str[k] = in_str[at[1 + k]];
      visit(out.dtype, [&](auto t) {
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
      visit(out.dtype, [&](auto t) {
        using T = decltype(t);
        kern::gather<T>(static_cast<const T*>(ptr[a[0]]), base, p.shape(in.out), src_str, out.ndim, static_cast<T*>(y));
      });
      return;
    }
    case Op::Pad: {
      std::int64_t dst_str[16];
      const std::int64_t base = pad_window(p, in, dst_str);
      if (out.size) std::memset(y, 0, p.nbytes(in.out));
      visit(out.dtype, [&](auto t) {
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
        visit(out.dtype, [&](auto t) {
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
      visit(out.dtype, [&](auto t) {
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
      visit(out.dtype, [&](auto t) {
        using T = decltype(t);
        T* r = static_cast<T*>(y);
        for (std::int64_t i = 0; i < out.size; ++i) r[i] = static_cast<T>((i / inner) % shape[dim]);
      });
      return;
    }
    case Op::TriangularSolve: case Op::Cholesky:  // linalg.hpp
      kern::run_linalg(in.op, p, a, at, out.dtype, y, ptr);
      return;
    case Op::Gather: case Op::Scatter: case Op::DynamicSlice: case Op::DynamicUpdateSlice:  // gather.hpp
      kern::run_indexing(in.op, p, a, at, out, in.out, y, ptr);
      return;
    case Op::ReduceMin: case Op::ReduceProd: case Op::ReduceAnd: case Op::ReduceOr: case Op::ArgMax:
    case Op::ArgMin: case Op::Cumsum: case Op::Cumprod: case Op::Cummax: case Op::Cummin:
    case Op::LinearScan: case Op::Sort:  // sort_scan.hpp
      kern::run_sort_scan(in.op, p, a, in.n_in, at, in.out, y, ptr);
      return;
    case Op::LU: case Op::LUPermute: case Op::Eigh: case Op::QR: case Op::SVD:  // factor.hpp
      kern::run_factor(in.op, p, a, at, y, ptr);
      return;
    case Op::Rev:  // shapes.hpp
      kern::run_shape(in.op, p, a, at, out.dtype, y, ptr);
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
  visit(out.dtype, [&](auto t) {
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
  switch (p.slots[in.out].dtype) {
    case DType::F64: return float_handler<double>(in.op);
    case DType::F32: return float_handler<float>(in.op);
    default: return &run_instr;
  }
}

}  // namespace detail

namespace detail {

// The scalar fast path's values from the inputs' elements, and back into the outputs'.
inline void scalar_inputs(const Program& p, double* v, const void* const* inputs) {
  const std::uint32_t* off = p.scalar_in_off.data();
  const std::uint32_t* ids = p.scalar_in_ids.data();
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    const double* x = static_cast<const double*>(inputs[i]);
    for (std::uint32_t k = off[i]; k < off[i + 1]; ++k) v[ids[k]] = x[k - off[i]];
  }
}
inline void scalar_outputs(const Program& p, const double* v, void* const* outputs) {
  const std::uint32_t* off = p.scalar_out_off.data();
  const std::uint32_t* ids = p.scalar_out_ids.data();
  for (std::size_t i = 0; i < p.outputs.size(); ++i) {
    double* y = static_cast<double*>(outputs[i]);
    for (std::uint32_t k = off[i]; k < off[i + 1]; ++k) y[k - off[i]] = v[ids[k]];
  }
}

// The all-scalar float64 fast path: a flat loop over 24-byte instructions (scheduled into runs of
// one opcode, Program::schedule_scalar) and an array of doubles.
// What each opcode computes: TIDU_SCALAR_OPS (scalar.hpp), shared with the JIT's helpers.

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"  // labels as values, in a consumer built with -pedantic
#endif
inline void eval_scalar(const Program& p, double* v, const void* const* inputs, void* const* outputs) {
  scalar_inputs(p, v, inputs);
  const ScalarInstr* c = p.scalar_code.data();
  const ScalarInstr* const end = c + p.scalar_code.size();
#if defined(__GNUC__) || defined(__clang__)
  // Threaded dispatch (labels as values): every handler ends in its own indirect jump, so the
  // branch predictor learns which opcode tends to follow which, where a switch has one jump.
  static const void* const handler[] = {
#define TIDU_SCALAR_LABEL(name, kind) &&op_##name,
      TIDU_OPCODES(TIDU_SCALAR_LABEL)
#undef TIDU_SCALAR_LABEL
  };
  // A handler runs its whole run (ScalarInstr::run) before the next dispatch.
#define TIDU_SCALAR_NEXT(expr)                              \
  {                                                         \
    const ScalarInstr* const stop = c + c->run;             \
    do {                                                    \
      const double x = v[c->a], y = v[c->b], imm = c->imm;  \
      (void)x, (void)y, (void)imm;                          \
      v[c->out] = (expr);                                   \
    } while (++c != stop);                                  \
    if (c == end) goto done;                                \
    goto *handler[static_cast<unsigned>(c->op)];            \
  }
  if (c == end) goto done;
  goto *handler[static_cast<unsigned>(c->op)];
#define TIDU_SCALAR_CASE(name, expr) \
  op_##name:                         \
  TIDU_SCALAR_NEXT(expr)
  TIDU_SCALAR_OPS(TIDU_SCALAR_CASE)
#undef TIDU_SCALAR_CASE
  // Every other opcode (build_scalar_code admits only copies among them): r = x.
op_Conj: op_StopGradient: op_Reshape: op_BroadcastInDim: op_Real: op_Imag: op_Compare: op_Select:
op_Convert: op_ReduceSum: op_ReduceMax: op_Transpose: op_DotGeneral: op_Slice: op_Pad:
op_Concatenate: op_Iota: op_TriangularSolve: op_Cholesky: op_IsFinite: op_Gather: op_Scatter:
op_DynamicSlice: op_DynamicUpdateSlice: op_ReduceMin: op_ReduceProd: op_ReduceAnd: op_ReduceOr:
op_ArgMax: op_ArgMin: op_Cumsum: op_Cumprod: op_Cummax: op_Cummin: op_LinearScan: op_Sort: op_LU:
op_LUPermute: op_Eigh: op_QR: op_SVD: op_Rev: op_Scan: op_While: op_Cond: op_Checkpoint:
  TIDU_SCALAR_NEXT(x)
#undef TIDU_SCALAR_NEXT
done:
#else
  for (; c != end; ++c) {
    const double x = v[c->a], y = v[c->b], imm = c->imm;
    double r;
    switch (c->op) {
#define TIDU_SCALAR_CASE(name, expr) \
  case Op::name:                     \
    r = (expr);                      \
    break;
      TIDU_SCALAR_OPS(TIDU_SCALAR_CASE)
#undef TIDU_SCALAR_CASE
      default: r = x; break;
    }
    v[c->out] = r;
  }
#endif
  scalar_outputs(p, v, outputs);
}
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif

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
    if (l >= 0) return scratch + static_cast<std::size_t>(l) * Program::kBlock * Program::kMaxElemBytes;
    return static_cast<std::uint8_t*>(ptr[s]) + lo * static_cast<std::int64_t>(dtype_size(p.slots[s].dtype));
  };
  auto at = [&](std::uint32_t k, auto t) {
    using T = decltype(t);
    return static_cast<const T*>(addr(a[k]));
  };
  switch (in.op) {
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Max: case Op::Min:
    case Op::Rem: case Op::Atan2:
      visit(out.dtype, [&](auto t) {
        using T = decltype(t);
        if (!kern::binary<T>(in.op, at(0, t), at(1, t), static_cast<T*>(addr(in.out)), n))
          kern::unsupported(in.op, out.dtype);
      });
      return;
    case Op::Compare:
      visit(xd, [&](auto t) {
        kern::compare(static_cast<Cmp>(p.attrs[in.attr_begin]), at(0, t), at(1, t),
                      static_cast<bool*>(addr(in.out)), n);
      });
      return;
    case Op::Select:
      visit(out.dtype, [&](auto t) {
        using T = decltype(t);
        const bool* c = static_cast<const bool*>(addr(a[0]));
        const T *u = at(1, t), *v = at(2, t);
        T* r = static_cast<T*>(addr(in.out));
        for (std::int64_t i = 0; i < n; ++i) r[i] = c[i] ? u[i] : v[i];
      });
      return;
    case Op::Convert:
      visit(xd, [&](auto s) {
        using S = decltype(s);
        visit(out.dtype, [&](auto d) {
          using D = decltype(d);
          kern::convert<S, D>(at(0, s), static_cast<D*>(addr(in.out)), n);
        });
      });
      return;
    case Op::BroadcastInDim: {  // attrs: n, shape..., m, dims...
      if (p.slots[a[0]].size == 1) {  // a fill
        visit(out.dtype, [&](auto t) {
          using T = decltype(t);
          const T v = *static_cast<const T*>(ptr[a[0]]);
          T* r = static_cast<T*>(addr(in.out));
          for (std::int64_t i = 0; i < n; ++i) r[i] = v;
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
      visit(out.dtype, [&](auto t) {
        using T = decltype(t);
        const T* src = static_cast<const T*>(ptr[a[0]]);
        T* r = static_cast<T*>(addr(in.out));
        const std::int64_t last = shape[nd - 1], s = str[nd - 1];
        for (std::int64_t i = 0; i < n;) {
          const std::int64_t len = std::min(last - coord[nd - 1], n - i);
          if (s == 0) {
            const T v = src[off];
            for (std::int64_t j = 0; j < len; ++j) r[i + j] = v;
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
      visit(out.dtype, [&](auto t) {
        using T = decltype(t);
        T* r = static_cast<T*>(addr(in.out));
        for (std::int64_t i = 0; i < n; ++i) r[i] = static_cast<T>(((lo + i) / inner) % shape[dim]);
      });
      return;
    }
    default:  // unary maps
      visit(out.dtype, [&](auto t) {
        using T = decltype(t);
        if (!kern::unary<T>(in.op, at(0, t), static_cast<T*>(addr(in.out)), n))
          kern::unsupported(in.op, out.dtype);
      });
      return;
  }
}

}  // namespace detail

namespace detail {

// While an evaluation runs, the program's direct outputs point at the caller's buffers; this
// points them back at the arena when it ends, normally or by an exception, so that a pooled
// Workspace never keeps a pointer into a buffer its caller may free.
class DirectOutputs {
 public:
  DirectOutputs(const Program& p, Workspace& ws, void* const* outputs, bool on) : p_(p), ws_(ws), on_(on) {
    if (on_)
      for (std::size_t i = 0; i < p_.outputs.size(); ++i)
        if (p_.output_direct[i]) ws_.ptrs()[p_.outputs[i]] = outputs[i];
  }
  ~DirectOutputs() {
    if (on_)
      for (std::size_t i = 0; i < p_.outputs.size(); ++i)
        if (p_.output_direct[i]) ws_.reset(p_, p_.outputs[i]);
  }
  DirectOutputs(const DirectOutputs&) = delete;
  DirectOutputs& operator=(const DirectOutputs&) = delete;

 private:
  const Program& p_;
  Workspace& ws_;
  bool on_;
};

// No output buffer overlaps an input buffer or another output buffer.
inline bool outputs_apart(const Program& p, const void* const* inputs, void* const* outputs) {
  auto overlap = [](const void* a, std::uint64_t na, const void* b, std::uint64_t nb) {
    auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
    return na && nb && x < y + nb && y < x + na;
  };
  for (std::size_t i = 0; i < p.outputs.size(); ++i) {
    const std::uint64_t n = p.nbytes(p.outputs[i]);
    for (std::size_t j = 0; j < p.inputs.size(); ++j)
      if (overlap(outputs[i], n, inputs[j], p.nbytes(p.inputs[j]))) return false;
    for (std::size_t j = 0; j < i; ++j)
      if (overlap(outputs[i], n, outputs[j], p.nbytes(p.outputs[j]))) return false;
  }
  return true;
}
}  // namespace detail

// Evaluates p with caller-owned buffers, in p.inputs / p.outputs order.
inline void eval(const Program& p, Workspace& ws, const void* const* inputs, void* const* outputs) {
  if (p.scalar_jit) {
    double* v = ws.scalars();
    detail::scalar_inputs(p, v, inputs);
    p.scalar_jit->run(v);
    detail::scalar_outputs(p, v, outputs);
    return;
  }
  if (!p.scalar_code.empty()) {
    detail::eval_scalar(p, ws.scalars(), inputs, outputs);
    return;
  }
  void** ptr = ws.ptrs();
  for (std::size_t i = 0; i < p.inputs.size(); ++i) ptr[p.inputs[i]] = const_cast<void*>(inputs[i]);
  // Outputs are computed straight into the caller's buffers, saving a copy, unless a buffer
  // overlaps an input or another output (an in-place call): those go through the arena.
  const detail::DirectOutputs direct(p, ws, outputs, detail::outputs_apart(p, inputs, outputs));
  for (std::size_t i = 0; i < p.instrs.size(); ++i) {
    std::uint32_t end = p.chain_end.empty() ? 0 : p.chain_end[i];
    if (end == 0) {
      ws.handler(i)(p, ws, i);
      continue;
    }
    // A chain of elementwise instructions over one size: all of them for block 1, then block 2,
    // ... so intermediates stay in cache instead of streaming through memory per instruction.
    std::int64_t size = p.slots[p.instrs[i].out].size;
    for (std::size_t j = i; j < end; ++j)
      if (p.instrs[j].op == Op::Constant) detail::run_instr(p, ws, j);
    std::int64_t nblocks = (size + Program::kBlock - 1) / Program::kBlock;
    // Blocks are independent: large chains split them over the machine's cores.
    int threads = static_cast<int>(std::min<std::int64_t>(detail::cores(),
                                                          nblocks / 64));
    const std::size_t per_thread = std::size_t{p.max_locals} * Program::kBlock * Program::kMaxElemBytes;
    std::uint8_t* scratch = ws.chain_scratch(per_thread * static_cast<std::size_t>(std::max(threads, 1)));
    auto blocks = [&](std::int64_t first, std::int64_t last, int t) {  // block indices [first, last)
      std::uint8_t* mine = scratch + per_thread * static_cast<std::size_t>(t);
      for (std::int64_t b = first; b < last; ++b) {
        std::int64_t lo = b * Program::kBlock, n = std::min<std::int64_t>(Program::kBlock, size - lo);
        for (std::size_t j = i; j < end; ++j)
          if (p.instrs[j].op != Op::Constant) detail::run_block(p, ws, j, lo, n, mine);
      }
    };
    if (threads <= 1) {
      blocks(0, nblocks, 0);
    } else {
      std::int64_t per = (nblocks + threads - 1) / threads;
      detail::parallel_for(threads, [&](int t) { blocks(t * per, std::min(nblocks, (t + 1) * per), t); });
    }
    i = end - 1;
  }
  for (std::size_t i = 0; i < p.outputs.size(); ++i)
    if (ptr[p.outputs[i]] != outputs[i] && p.nbytes(p.outputs[i]))
      std::memcpy(outputs[i], ptr[p.outputs[i]], p.nbytes(p.outputs[i]));
}

inline void Program::eval(Workspace& ws, const void* const* in, void* const* out) const {
  tidu::eval(*this, ws, in, out);
}

// Evaluates p independently at each of `batch` points: input i of point b starts at
// inputs[i] + b * (bytes of input i); likewise outputs.  Split over `threads` threads.
namespace detail {

// kScalarBlock points of an all-scalar program at once: slot s of point j lives at V[s * K + j],
// and each instruction runs over the block's points before the next one, so its calls are
// independent of each other (throughput, not one chain's latency, bounds them) and its operands
// come from contiguous memory.  exact: the expressions are TIDU_SCALAR_OPS, the single-point
// path's own, so every point's values are bit-identical to a single evaluation; otherwise the
// transcendental functions take the SIMD array kernels (fastmath.hpp, within 3 ulp of the C
// library, as in array programs), several times faster.
constexpr std::int64_t kScalarBlock = 32;

inline void eval_scalar_block(const Program& p, double* V, std::int64_t n_points,
                              const void* const* inputs, void* const* outputs, std::int64_t first,
                              bool exact) {
  constexpr std::int64_t K = kScalarBlock;
  // Element e of input i at point j (of n_i elements per point) is value ids[off[i] + e].
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    const std::uint32_t lo = p.scalar_in_off[i], n_i = p.scalar_in_off[i + 1] - lo;
    for (std::uint32_t e = 0; e < n_i; ++e) {
      const double* src = static_cast<const double*>(inputs[i]) + first * n_i + e;
      double* dst = V + std::int64_t{p.scalar_in_ids[lo + e]} * K;
      for (std::int64_t j = 0; j < K; ++j) dst[j] = src[(j < n_points ? j : n_points - 1) * n_i];
    }
  }
  for (const ScalarInstr& c : p.scalar_code) {
    double* r = V + std::int64_t{c.out} * K;
    const double* xs = V + std::int64_t{c.a} * K;
    const double* ys = V + std::int64_t{c.b} * K;
    const double imm = c.imm;
    if (!exact) switch (c.op) {
      case Op::Exp: fm::map<fm::Fn::Exp>(xs, r, K); continue;
      case Op::Log: fm::map<fm::Fn::Log>(xs, r, K); continue;
      case Op::Sin: fm::map<fm::Fn::Sin>(xs, r, K); continue;
      case Op::Cos: fm::map<fm::Fn::Cos>(xs, r, K); continue;
      case Op::Tanh: fm::map<fm::Fn::Tanh>(xs, r, K); continue;
      case Op::Expm1: fm::map<fm::Fn::Expm1>(xs, r, K); continue;
      case Op::Log1p: fm::map<fm::Fn::Log1p>(xs, r, K); continue;
      default: break;
    }
    switch (c.op) {
#define TIDU_SCALAR_BLOCK(name, expr)              \
  case Op::name:                                   \
    for (std::int64_t j = 0; j < K; ++j) {         \
      const double x = xs[j], y = ys[j];           \
      (void)x, (void)y, (void)imm;                 \
      r[j] = (expr);                               \
    }                                              \
    break;
      TIDU_SCALAR_OPS(TIDU_SCALAR_BLOCK)
#undef TIDU_SCALAR_BLOCK
      default:  // the copies
        for (std::int64_t j = 0; j < K; ++j) r[j] = xs[j];
        break;
    }
  }
  for (std::size_t i = 0; i < p.outputs.size(); ++i) {
    const std::uint32_t lo = p.scalar_out_off[i], n_i = p.scalar_out_off[i + 1] - lo;
    for (std::uint32_t e = 0; e < n_i; ++e) {
      const double* src = V + std::int64_t{p.scalar_out_ids[lo + e]} * K;
      double* dst = static_cast<double*>(outputs[i]) + first * n_i + e;
      for (std::int64_t j = 0; j < n_points; ++j) dst[j * n_i] = src[j];
    }
  }
}

}  // namespace detail

// Evaluates `batch` independent points (inputs and outputs with a leading batch axis) on
// `threads` threads.  exact=false lets all-scalar programs use the SIMD kernels across points (see
// eval_scalar_block); other programs are evaluated point by point either way.
inline void eval_batch(const Program& p, std::int64_t batch, const void* const* inputs,
                       void* const* outputs, int threads, bool exact = true) {
  threads = static_cast<int>(std::max<std::int64_t>(
      1, std::min<std::int64_t>({threads, detail::max_threads(), std::max<std::int64_t>(batch, 1)})));
  constexpr std::int64_t K = detail::kScalarBlock;
  auto run_range = [&](std::int64_t lo, std::int64_t hi) {
    if (!p.scalar_code.empty() && hi - lo >= K / 2) {  // blocks of points
      std::vector<double> V((std::size_t{p.scalar_values} + 1) * K);
      for (std::int64_t b = lo; b < hi; b += K)
        detail::eval_scalar_block(p, V.data(), std::min(K, hi - b), inputs, outputs, b, exact);
      return;
    }
    Workspace ws(p);
    std::vector<const void*> in(p.inputs.size());
    std::vector<void*> out(p.outputs.size());
    for (std::int64_t b = lo; b < hi; ++b) {
      for (std::size_t i = 0; i < in.size(); ++i)
        in[i] = static_cast<const std::uint8_t*>(inputs[i]) + b * p.nbytes(p.inputs[i]);
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<std::uint8_t*>(outputs[i]) + b * p.nbytes(p.outputs[i]);
      eval(p, ws, in.data(), out.data());
    }
  };
  if (threads == 1) {
    run_range(0, batch);
    return;
  }
  const std::int64_t chunk = (batch + threads - 1) / threads;
  detail::parallel_for(threads, [&](int t) {
    const std::int64_t lo = t * chunk, hi = std::min(batch, lo + chunk);
    if (lo < hi) run_range(lo, hi);
  });
}

}  // namespace tidu

#include "tidu/vm/control_flow.hpp"  // the control-flow handlers (run_control)
