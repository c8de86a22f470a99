// tidu/vm/scalarize.hpp - small float64 array programs as scalar code (docs/evaluator.md).
//
// A program whose every slot is a float64 array of at most kMaxScalarElems elements, and whose
// every instruction is elementwise arithmetic or moves elements around (reshape, slice, pad,
// concatenate, broadcast, transpose, rev, reduce_sum, constants, iota) or is a small matrix
// product (a sum of products per output element), is rewritten into the
// all-scalar fast path's code: one scalar value per array element, elementwise ops one scalar
// instruction per element, and the structural ops no code at all (each output element *is* some
// input element, or a constant).  A 3-vector integrator step then runs as straight-line machine
// code (the scalar JIT) instead of one dispatched kernel call per tiny array.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tidu/vm/opcodes.hpp"
#include "tidu/vm/scalar.hpp"

namespace tidu {

struct Program;

// The scalar form of a program: code over `n_values` doubles; input i's elements (C order) are
// values in_ids[in_off[i] .. in_off[i + 1]), output i's likewise.
struct ScalarForm {
  std::vector<ScalarInstr> code;
  std::uint32_t n_values = 0;
  std::vector<std::uint32_t> in_off{0}, in_ids, out_off{0}, out_ids;
};

inline constexpr std::int64_t kMaxScalarElems = 16;

// TIDU_SCALARIZE=0 in the environment (read when a program is built) keeps small array programs
// on the array interpreter (for comparisons; all-scalar programs take the scalar path either way).
inline bool scalarize_enabled() {
  const char* e = std::getenv("TIDU_SCALARIZE");
  return !(e && e[0] == '0' && e[1] == '\0');
}

// Elementwise opcodes the scalar path computes (TIDU_SCALAR_OPS), float64 in and out.
inline bool scalar_elementwise(Op op) {
  switch (op) {
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Max: case Op::Min:
    case Op::Neg: case Op::Exp: case Op::Log: case Op::Sin: case Op::Cos: case Op::Tanh: case Op::Sqrt:
    case Op::Rsqrt: case Op::Expm1: case Op::Log1p: case Op::Abs: case Op::Sign:
    case Op::Floor: case Op::Ceil: case Op::Round: case Op::Tan: case Op::Atan: case Op::Asin:
    case Op::Acos: case Op::Sinh: case Op::Cosh: case Op::Asinh: case Op::Acosh: case Op::Atanh:
    case Op::Erf: case Op::Erfc: case Op::ErfInv: case Op::Cbrt: case Op::Logistic: case Op::Rem:
    case Op::Atan2:
      return true;
    default:
      return false;
  }
}

namespace detail {

// Row-major multi-index of linear index e in shape[0..nd).
inline void unravel(std::int64_t e, const std::int64_t* shape, std::uint32_t nd, std::int64_t* idx) {
  for (std::uint32_t k = nd; k-- > 0;) {
    idx[k] = shape[k] ? e % shape[k] : 0;
    e = shape[k] ? e / shape[k] : 0;
  }
}

inline std::int64_t ravel(const std::int64_t* idx, const std::int64_t* shape, std::uint32_t nd) {
  std::int64_t e = 0;
  for (std::uint32_t k = 0; k < nd; ++k) e = e * shape[k] + idx[k];
  return e;
}

}  // namespace detail

// Fills f and returns true when p qualifies (see the file comment); false leaves p to the array
// interpreter.  p must be validated (validate.hpp): shapes and attributes are trusted here.
template <class P>
inline bool scalarize(const P& p, ScalarForm& f) {
  for (const auto& s : p.slots)
    if (s.dtype != DType::F64 || s.size > kMaxScalarElems) return false;
  for (const auto& in : p.instrs)
    if (in.n_out != 1) return false;
  f = ScalarForm{};
  std::vector<std::uint32_t> first(p.slots.size(), 0), ids;  // slot s's element values: ids[first[s] + e]
  std::uint32_t zero = 0;
  bool have_zero = false;
  auto constant = [&](double v) {
    f.code.push_back(ScalarInstr{Op::Constant, 1, f.n_values, 0, 0, v});
    return f.n_values++;
  };
  auto zero_value = [&] {
    if (!have_zero) zero = constant(0.0), have_zero = true;
    return zero;
  };
  for (std::uint32_t s : p.inputs) {
    first[s] = static_cast<std::uint32_t>(ids.size());
    for (std::int64_t e = 0; e < p.slots[s].size; ++e) ids.push_back(f.n_values++);
  }
  std::int64_t idx[16], src[16];
  for (const auto& in : p.instrs) {
    const std::uint32_t* a = p.args.data() + in.in_begin;
    const std::int64_t* at = p.attrs.data() + in.attr_begin;
    const auto& o = p.slots[in.out];
    const std::int64_t* oshape = p.shape(in.out);
    const std::int64_t n = o.size;
    const std::uint32_t base = static_cast<std::uint32_t>(ids.size());
    auto x = [&](std::uint32_t k, std::int64_t e) { return ids[first[a[k]] + e]; };
    if (scalar_elementwise(in.op)) {
      const bool binary = in.n_in == 2;
      for (std::int64_t e = 0; e < n; ++e) {
        const std::uint32_t xa = x(0, e), xb = binary ? x(1, e) : xa;
        f.code.push_back(ScalarInstr{in.op, 1, f.n_values, xa, xb, 0.0});
        ids.push_back(f.n_values++);
      }
    } else {
      switch (in.op) {
        case Op::Reshape: case Op::StopGradient: case Op::Conj:
          for (std::int64_t e = 0; e < n; ++e) ids.push_back(x(0, e));
          break;
        case Op::Constant:
          for (std::int64_t e = 0; e < n; ++e) {
            double v;
            std::memcpy(&v, p.consts.data() + at[0] + e * 8, 8);
            ids.push_back(constant(v));
          }
          break;
        case Op::Iota: {  // attrs: n, shape..., dtype, dimension
          const std::int64_t dim = at[at[0] + 2];
          for (std::int64_t e = 0; e < n; ++e) {
            detail::unravel(e, oshape, o.ndim, idx);
            ids.push_back(constant(static_cast<double>(idx[dim])));
          }
          break;
        }
        case Op::BroadcastInDim: {  // attrs: n, shape..., m, dims...
          const auto& xs = p.slots[a[0]];
          const std::int64_t* xshape = p.shape(a[0]);
          const std::int64_t* dims = at + 2 + at[0];
          for (std::int64_t e = 0; e < n; ++e) {
            detail::unravel(e, oshape, o.ndim, idx);
            for (std::uint32_t k = 0; k < xs.ndim; ++k) src[k] = xshape[k] == 1 ? 0 : idx[dims[k]];
            ids.push_back(x(0, detail::ravel(src, xshape, xs.ndim)));
          }
          break;
        }
        case Op::Transpose: {  // attrs: n, perm...
          const std::int64_t* xshape = p.shape(a[0]);
          for (std::int64_t e = 0; e < n; ++e) {
            detail::unravel(e, oshape, o.ndim, idx);
            for (std::uint32_t k = 0; k < o.ndim; ++k) src[at[1 + k]] = idx[k];
            ids.push_back(x(0, detail::ravel(src, xshape, o.ndim)));
          }
          break;
        }
        case Op::Slice: case Op::Pad: {  // attrs: n, lo..., n, hi/limit..., n, interior/stride...
          const std::int64_t nd = o.ndim;
          const std::int64_t* xshape = p.shape(a[0]);
          for (std::int64_t e = 0; e < n; ++e) {
            detail::unravel(e, oshape, o.ndim, idx);
            bool inside = true;
            for (std::int64_t k = 0; k < nd; ++k) {
              const std::int64_t lo = at[1 + k], step = at[3 + 2 * nd + k];
              if (in.op == Op::Slice) {
                src[k] = lo + idx[k] * step;
              } else {
                const std::int64_t j = idx[k] - lo;
                inside = inside && j >= 0 && j % (step + 1) == 0 && j / (step + 1) < xshape[k];
                src[k] = inside ? j / (step + 1) : 0;
              }
            }
            ids.push_back(inside ? x(0, detail::ravel(src, xshape, o.ndim)) : zero_value());
          }
          break;
        }
        case Op::Concatenate: {  // attrs: axis
          const std::int64_t ax = at[0];
          for (std::int64_t e = 0; e < n; ++e) {
            detail::unravel(e, oshape, o.ndim, idx);
            std::uint32_t k = 0;
            std::int64_t pos = idx[ax];
            while (pos >= p.shape(a[k])[ax]) pos -= p.shape(a[k++])[ax];
            idx[ax] = pos;
            ids.push_back(x(k, detail::ravel(idx, p.shape(a[k]), o.ndim)));
          }
          break;
        }
        case Op::Rev: {  // attrs: n, dims...
          std::vector<char> flip(o.ndim, 0);
          for (std::int64_t k = 0; k < at[0]; ++k) flip[at[1 + k]] = 1;
          for (std::int64_t e = 0; e < n; ++e) {
            detail::unravel(e, oshape, o.ndim, idx);
            for (std::uint32_t k = 0; k < o.ndim; ++k) src[k] = flip[k] ? oshape[k] - 1 - idx[k] : idx[k];
            ids.push_back(x(0, detail::ravel(src, oshape, o.ndim)));
          }
          break;
        }
        case Op::ReduceSum: {  // attrs: n, axes...; each output a left-to-right sum of its elements
          const auto& xs = p.slots[a[0]];
          const std::int64_t* xshape = p.shape(a[0]);
          std::vector<char> red(xs.ndim, 0);
          for (std::int64_t k = 0; k < at[0]; ++k) red[at[1 + k]] = 1;
          std::vector<std::int64_t> acc(n, -1);
          std::int64_t kept[16];
          for (std::int64_t e = 0; e < xs.size; ++e) {
            detail::unravel(e, xshape, xs.ndim, idx);
            std::uint32_t j = 0;
            for (std::uint32_t k = 0; k < xs.ndim; ++k)
              if (!red[k]) kept[j++] = idx[k];
            const std::int64_t r = detail::ravel(kept, oshape, o.ndim);
            if (acc[r] < 0) {
              acc[r] = x(0, e);
            } else {
              f.code.push_back(ScalarInstr{Op::Add, 1, f.n_values, static_cast<std::uint32_t>(acc[r]), x(0, e), 0.0});
              acc[r] = f.n_values++;
            }
          }
          for (std::int64_t r = 0; r < n; ++r) ids.push_back(acc[r] < 0 ? zero_value() : static_cast<std::uint32_t>(acc[r]));
          break;
        }
        case Op::DotGeneral: {  // attrs: nc, lc..., nc, rc..., nb, lb..., nb, rb...
          // Output: batch dims, lhs free dims, rhs free dims; each element a left-to-right sum
          // over the contracting index of products.
          const std::int64_t nc = at[0];
          const std::int64_t *lc = at + 1, *rc = at + 2 + nc;
          const std::int64_t nb = at[2 + 2 * nc];
          const std::int64_t *lb = at + 3 + 2 * nc, *rb = at + 4 + 2 * nc + nb;
          const auto &ls = p.slots[a[0]], &rs = p.slots[a[1]];
          const std::int64_t *lshape = p.shape(a[0]), *rshape = p.shape(a[1]);
          std::vector<char> lused(ls.ndim, 0), rused(rs.ndim, 0);
          for (std::int64_t k = 0; k < nc; ++k) lused[lc[k]] = rused[rc[k]] = 1;
          for (std::int64_t k = 0; k < nb; ++k) lused[lb[k]] = rused[rb[k]] = 1;
          std::vector<std::int64_t> lfree, rfree, csize;
          for (std::uint32_t k = 0; k < ls.ndim; ++k) if (!lused[k]) lfree.push_back(k);
          for (std::uint32_t k = 0; k < rs.ndim; ++k) if (!rused[k]) rfree.push_back(k);
          std::int64_t nk = 1;
          for (std::int64_t k = 0; k < nc; ++k) csize.push_back(lshape[lc[k]]), nk *= lshape[lc[k]];
          std::int64_t li[16], ri[16], ci[16];
          for (std::int64_t e = 0; e < n; ++e) {
            detail::unravel(e, oshape, o.ndim, idx);
            std::int64_t d = 0;
            for (std::int64_t k = 0; k < nb; ++k, ++d) li[lb[k]] = ri[rb[k]] = idx[d];
            for (std::int64_t k : lfree) li[k] = idx[d++];
            for (std::int64_t k : rfree) ri[k] = idx[d++];
            std::int64_t acc = -1;
            for (std::int64_t c = 0; c < nk; ++c) {
              detail::unravel(c, csize.data(), static_cast<std::uint32_t>(nc), ci);
              for (std::int64_t k = 0; k < nc; ++k) li[lc[k]] = ri[rc[k]] = ci[k];
              f.code.push_back(ScalarInstr{Op::Mul, 1, f.n_values, x(0, detail::ravel(li, lshape, ls.ndim)),
                                           x(1, detail::ravel(ri, rshape, rs.ndim)), 0.0});
              const std::uint32_t prod = f.n_values++;
              if (acc < 0) {
                acc = prod;
              } else {
                f.code.push_back(ScalarInstr{Op::Add, 1, f.n_values, static_cast<std::uint32_t>(acc), prod, 0.0});
                acc = f.n_values++;
              }
            }
            ids.push_back(acc < 0 ? zero_value() : static_cast<std::uint32_t>(acc));
          }
          break;
        }
        default:
          return false;  // not expressible as scalar code
      }
    }
    first[in.out] = base;
    if (f.n_values >= (std::uint32_t{1} << 26)) return false;
  }
  for (std::uint32_t s : p.inputs) {
    for (std::int64_t e = 0; e < p.slots[s].size; ++e) f.in_ids.push_back(ids[first[s] + e]);
    f.in_off.push_back(static_cast<std::uint32_t>(f.in_ids.size()));
  }
  for (std::uint32_t s : p.outputs) {
    for (std::int64_t e = 0; e < p.slots[s].size; ++e) f.out_ids.push_back(ids[first[s] + e]);
    f.out_off.push_back(static_cast<std::uint32_t>(f.out_ids.size()));
  }
  return true;
}

}  // namespace tidu
