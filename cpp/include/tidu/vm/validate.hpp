// tidu/vm/validate.hpp - semantic checks of every instruction against the shapes and dtypes of its
// slots, so that no kernel can index outside a buffer, whatever a program file says.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tidu/vm/checked.hpp"
#include "tidu/kernels/indexing.hpp"
#include "tidu/vm/plan.hpp"
#include "tidu/vm/program.hpp"
#include "tidu/vm/widen.hpp"
#include "tidu/kernels/sorting.hpp"

namespace tidu {

// Slot s of program p and slot t of program q hold the same dtype and shape (q's with `lead`
// prepended when lead >= 0: a stacked loop operand).
inline bool same_value(const Program& p, std::uint32_t s, const Program& q, std::uint32_t t,
                       std::int64_t lead = -1) {
  const Slot& x = p.slots[s];
  const Slot& y = q.slots[t];
  const std::int64_t* xs = p.shape(s);
  if (x.dtype != y.dtype) return false;
  if (lead < 0) return x.ndim == y.ndim && std::equal(xs, xs + x.ndim, q.shape(t));
  return x.ndim == y.ndim + 1 && xs[0] == lead && std::equal(xs + 1, xs + x.ndim, q.shape(t));
}

// Control flow (control_flow.hpp): every nested program named exists and every operand it reads
// and output it writes has the size its kernel will move.  The nested programs themselves were
// validated when built.
template <class Fail>
inline void validate_control(const Program& p, const Instr& in, Fail&& fail) {
  const std::uint32_t* a = p.args.data() + in.in_begin;
  const std::uint32_t* o = p.outs.data() + in.out_begin;
  const std::int64_t* at = p.attrs.data() + in.attr_begin;
  const std::int64_t na = in.n_attr;
  auto need = [&](bool ok, const char* what) {
    if (!ok) fail(what);
  };
  auto sub = [&](std::int64_t pos) -> const Program& {
    need(pos < na && at[pos] >= 0 && static_cast<std::uint64_t>(at[pos]) < p.subs.size(), "nested program out of range");
    return p.subs[at[pos]];
  };
  // A take list at attrs[pos] for q: q's input k reads operand first + take[k] (of `n` operands),
  // whose value is q's input k, stacked by `length` when the operand index is >= stacked_from.
  auto takes = [&](std::int64_t pos, const Program& q, std::uint32_t first, std::uint32_t n,
                   std::uint32_t stacked_from, std::int64_t length) -> std::int64_t {
    need(pos < na && at[pos] >= 0 && at[pos] <= na - pos - 1, "attribute list out of range");
    need(static_cast<std::uint64_t>(at[pos]) == q.inputs.size(), "take list does not match the nested inputs");
    for (std::int64_t k = 0; k < at[pos]; ++k) {
      const std::int64_t t = at[pos + 1 + k];
      need(t >= 0 && t < n, "take index out of range");
      need(same_value(p, a[first + t], q, q.inputs[k], t >= stacked_from ? length : -1),
           "operand does not match the nested program's input");
    }
    return pos + 1 + at[pos];
  };
  auto outputs_match = [&](const Program& q, std::uint32_t from, std::int64_t length) {
    for (std::uint32_t k = from; k < in.n_out; ++k)
      need(same_value(p, o[k], q, q.outputs[k], length), "output does not match the nested program's");
  };
  switch (in.op) {
    case Op::Scan: {
      need(na >= 6, "attribute lengths");
      const Program& body = sub(0);
      const std::int64_t length = at[1], nc = at[3], nk = at[4];
      need(length >= 0 && (at[2] == 0 || at[2] == 1), "bad length or reverse flag");
      need(nc >= 0 && nk >= 0 && nc <= in.n_in && nk <= in.n_in - nc, "consts and carries out of range");
      need(body.outputs.size() == in.n_out && nk <= in.n_out, "outputs do not match the body's");
      for (std::uint32_t t = static_cast<std::uint32_t>(nc + nk); t < in.n_in; ++t)
        need(p.slots[a[t]].ndim >= 1 && p.shape(a[t])[0] == length, "xs not stacked by the length");
      need(takes(5, body, 0, in.n_in, static_cast<std::uint32_t>(nc + nk), length) == na, "attribute lengths");
      for (std::int64_t k = 0; k < nk; ++k) {
        need(same_value(p, a[nc + k], body, body.outputs[k]), "carry does not match the body's output");
        need(same_value(p, o[k], body, body.outputs[k]), "carry output does not match the body's");
      }
      for (std::uint32_t k = static_cast<std::uint32_t>(nk); k < in.n_out; ++k)
        need(same_value(p, o[k], body, body.outputs[k], length), "ys do not match the body's outputs");
      break;
    }
    case Op::While: {
      need(na >= 5, "attribute lengths");
      const Program& cond = sub(0);
      const Program& body = sub(1);
      const std::int64_t nc = at[2];
      need(nc >= 0 && nc <= in.n_in && in.n_in - nc == in.n_out, "consts and carries out of range");
      need(cond.outputs.size() == 1 && cond.slots[cond.outputs[0]].dtype == DType::Bool &&
               cond.slots[cond.outputs[0]].size == 1, "the condition must return one bool");
      need(body.outputs.size() == in.n_out, "outputs do not match the body's");
      const std::int64_t next = takes(3, cond, 0, in.n_in, in.n_in, 0);
      need(takes(next, body, 0, in.n_in, in.n_in, 0) == na, "attribute lengths");
      for (std::uint32_t k = 0; k < in.n_out; ++k)
        need(same_value(p, a[nc + k], body, body.outputs[k]), "carry does not match the body's output");
      outputs_match(body, 0, -1);
      break;
    }
    case Op::Cond: {
      need(na >= 1 && at[0] >= 1 && in.n_in >= 1, "no branches");
      need(p.slots[a[0]].dtype == DType::I32 && p.slots[a[0]].size == 1, "index must be an int32 scalar");
      std::int64_t pos = 1;
      for (std::int64_t j = 0; j < at[0]; ++j) {
        const Program& br = sub(pos);
        need(br.outputs.size() == in.n_out, "outputs do not match a branch's");
        outputs_match(br, 0, -1);
        pos = takes(pos + 1, br, 1, in.n_in - 1, in.n_in, 0);
      }
      need(pos == na, "attribute lengths");
      break;
    }
    default: {  // Checkpoint
      need(na >= 2, "attribute lengths");
      const Program& body = sub(0);
      need(body.outputs.size() == in.n_out, "outputs do not match the body's");
      outputs_match(body, 0, -1);
      need(takes(1, body, 0, in.n_in, in.n_in, 0) == na, "attribute lengths");
      break;
    }
  }
}

inline void validate_instructions(const Program& p) {
  for (std::size_t s = 0; s < p.slots.size(); ++s)
    if (p.slots[s].ndim > 16) throw ProgramError("tidu program: slot " + std::to_string(s) + " has rank > 16");
  for (std::size_t i = 0; i < p.instrs.size(); ++i) {
    const Instr& in = p.instrs[i];
    const std::uint32_t* a = p.args.data() + in.in_begin;
    const std::int64_t* at = p.attrs.data() + in.attr_begin;
    const std::int64_t na = in.n_attr;
    const Slot& o = p.slots[in.out];
    const std::int64_t* oshape = p.shape(in.out);
    auto fail = [&](const char* what) {
      throw ProgramError(std::string("tidu program: instruction ") + std::to_string(i) + " (" +
                         op_name(in.op) + "): " + what);
    };
    auto need = [&](bool ok, const char* what) {
      if (!ok) fail(what);
    };
    auto arity = [&](std::uint32_t n) { need(in.n_in == n, "wrong number of operands"); };
    auto slot = [&](std::uint32_t k) -> const Slot& { return p.slots[a[k]]; };
    if (!takes_half(in.op)) {  // widen.hpp rewrote the others to compute in float32
      for (std::uint32_t k = 0; k < in.n_in; ++k)
        need(!is_half_dtype(slot(k).dtype), "no float16/bfloat16 kernel (float32 computes it)");
      need(!is_half_dtype(o.dtype), "no float16/bfloat16 kernel (float32 computes it)");
    }
    auto same_shape = [&](std::uint32_t k) {
      const Slot& x = slot(k);
      need(x.ndim == o.ndim && std::equal(oshape, oshape + o.ndim, p.shape(a[k])), "operand shape mismatch");
    };
    auto count = [&](std::int64_t pos) -> std::int64_t {  // a length-prefixed list at attrs[pos]
      need(pos >= 0 && pos < na && at[pos] >= 0 && at[pos] <= na - pos - 1, "attribute list out of range");
      return at[pos];
    };
    switch (in.op) {
      case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Max: case Op::Min:
      case Op::Rem: case Op::Atan2:
      case Op::And: case Op::Or: case Op::Xor: case Op::ShiftLeft: case Op::ShiftRightArithmetic:
      case Op::ShiftRightLogical:  // elementwise.hpp: bitwise
        arity(2);
        for (std::uint32_t k = 0; k < 2; ++k) {
          same_shape(k);
          need(slot(k).dtype == o.dtype, "operand dtype mismatch");
        }
        if (in.op == Op::And || in.op == Op::Or || in.op == Op::Xor)
          need(is_integer_dtype(o.dtype) || o.dtype == DType::Bool, "bitwise operands must be integers or bools");
        else if (in.op >= Op::ShiftLeft)
          need(is_integer_dtype(o.dtype), "shift operands must be integers");
        break;
      case Op::Neg: case Op::Conj: case Op::Exp: case Op::Log: case Op::Sin: case Op::Cos: case Op::Tanh:
      case Op::Sqrt: case Op::Rsqrt: case Op::Expm1: case Op::Log1p: case Op::Sign: case Op::StopGradient:
      case Op::Reshape:
      case Op::Floor: case Op::Ceil: case Op::Round: case Op::Tan: case Op::Atan: case Op::Asin:
      case Op::Acos: case Op::Sinh: case Op::Cosh: case Op::Asinh: case Op::Acosh: case Op::Atanh:
      case Op::Erf: case Op::Erfc: case Op::ErfInv: case Op::Cbrt: case Op::Logistic: case Op::Lgamma:  // math.hpp
      case Op::Not:
        arity(1);
        if (in.op == Op::Not)
          need(is_integer_dtype(o.dtype) || o.dtype == DType::Bool, "bitwise operands must be integers or bools");
        if (in.op == Op::Reshape) need(slot(0).size == o.size, "reshape changes the size");
        else same_shape(0);
        need(slot(0).dtype == o.dtype, "operand dtype mismatch");
        break;
      case Op::Real: case Op::Imag: case Op::Abs: case Op::Convert: {
        arity(1);
        same_shape(0);
        DType x = slot(0).dtype;
        bool cplx = x == DType::C64 || x == DType::C128;
        DType part = x == DType::C64 ? DType::F32 : DType::F64;
        if (in.op == Op::Real || in.op == Op::Imag) need(cplx && o.dtype == part, "needs complex -> real");
        if (in.op == Op::Abs) need(cplx ? o.dtype == part : o.dtype == x, "abs dtype");
        break;
      }
      case Op::IsFinite:  // math.hpp
        arity(1);
        same_shape(0);
        need(o.dtype == DType::Bool && (slot(0).dtype == DType::F32 || slot(0).dtype == DType::F64),
             "is_finite needs float -> bool");
        break;
      case Op::Compare:
        arity(2);
        same_shape(0);
        same_shape(1);
        need(slot(0).dtype == slot(1).dtype && o.dtype == DType::Bool, "compare dtypes");
        need(na >= 1 && at[0] >= 0 && at[0] < static_cast<std::int64_t>(Cmp::kCount), "bad direction");
        break;
      case Op::Select:
        arity(3);
        for (std::uint32_t k = 0; k < 3; ++k) same_shape(k);
        need(slot(0).dtype == DType::Bool && slot(1).dtype == o.dtype && slot(2).dtype == o.dtype,
             "select dtypes");
        break;
      case Op::ReduceSum: case Op::ReduceMax: {
        arity(1);
        need(slot(0).dtype == o.dtype, "operand dtype mismatch");
        std::int64_t n = count(0);
        std::vector<char> red(slot(0).ndim, 0);
        for (std::int64_t k = 0; k < n; ++k) {
          need(at[1 + k] >= 0 && at[1 + k] < slot(0).ndim && !red[at[1 + k]], "bad reduction axis");
          red[at[1 + k]] = 1;
        }
        std::uint32_t j = 0;
        for (std::uint32_t k = 0; k < slot(0).ndim; ++k)
          if (!red[k]) need(j < o.ndim && p.shape(a[0])[k] == oshape[j++], "reduction output shape");
        need(j == o.ndim, "reduction output rank");
        break;
      }
      case Op::BroadcastInDim: {
        arity(1);
        need(slot(0).dtype == o.dtype, "operand dtype mismatch");
        std::int64_t n = count(0);
        need(n == o.ndim && std::equal(oshape, oshape + n, at + 1), "broadcast shape");
        std::int64_t m = count(1 + n);
        need(m == slot(0).ndim, "broadcast dims");
        std::vector<char> used(n, 0);
        for (std::int64_t k = 0; k < m; ++k) {
          std::int64_t d = at[2 + n + k];
          need(d >= 0 && d < n && !used[d], "broadcast dim out of range or repeated");
          used[d] = 1;
          std::int64_t s = p.shape(a[0])[k];
          need(s == 1 || s == oshape[d], "broadcast operand shape");
        }
        break;
      }
      case Op::Transpose: {
        arity(1);
        need(slot(0).dtype == o.dtype, "operand dtype mismatch");
        std::int64_t n = count(0);
        need(n == o.ndim && n == slot(0).ndim, "perm length");
        std::vector<char> seen(n, 0);
        for (std::int64_t k = 0; k < n; ++k) {
          std::int64_t q = at[1 + k];
          need(q >= 0 && q < n && !seen[q], "perm is not a permutation");
          seen[q] = 1;
          need(oshape[k] == p.shape(a[0])[q], "transpose output shape");
        }
        break;
      }
      case Op::Slice: case Op::Pad: {
        arity(1);
        need(slot(0).dtype == o.dtype, "operand dtype mismatch");
        std::int64_t n = slot(0).ndim;
        need(o.ndim == n && count(0) == n && count(1 + n) == n && count(2 + 2 * n) == n, "attribute lengths");
        for (std::int64_t k = 0; k < n; ++k) {
          std::int64_t x = at[1 + k], y = at[2 + n + k], z = at[3 + 2 * n + k], d = p.shape(a[0])[k];
          if (in.op == Op::Slice) {  // ceil((y - x) / z), written so that no term can overflow
            need(0 <= x && x <= y && y <= d && z >= 1, "slice bounds");
            need(oshape[k] == (y == x ? 0 : (y - x - 1) / z + 1), "slice output shape");
          } else {  // x + y + d + (d - 1) * z, checked
            need(x >= 0 && y >= 0 && z >= 0, "negative padding");
            std::int64_t size = 0;
            need(checked::mul(std::max<std::int64_t>(d - 1, 0), z, size) && checked::add(size, d, size) &&
                     checked::add(size, x, size) && checked::add(size, y, size) && oshape[k] == size,
                 "pad output shape");
          }
        }
        break;
      }
      case Op::Concatenate: {
        need(in.n_in >= 1 && na >= 1 && at[0] >= 0 && at[0] < o.ndim, "concatenate axis");
        std::int64_t ax = at[0], total = 0;
        for (std::uint32_t k = 0; k < in.n_in; ++k) {
          need(slot(k).dtype == o.dtype && slot(k).ndim == o.ndim, "operand dtype/rank");
          for (std::uint32_t d = 0; d < o.ndim; ++d)
            if (d != ax) need(p.shape(a[k])[d] == oshape[d], "operand shape");
          need(checked::add(total, p.shape(a[k])[ax], total), "concatenate output shape");
        }
        need(total == oshape[ax], "concatenate output shape");
        break;
      }
      case Op::DotGeneral: {
        arity(2);
        need(slot(0).dtype == o.dtype && slot(1).dtype == o.dtype, "operand dtype mismatch");
        std::int64_t nc = count(0);
        std::int64_t p1 = 1 + nc;
        need(count(p1) == nc, "contracting dims differ in length");
        std::int64_t p2 = p1 + 1 + nc, nb = count(p2), p3 = p2 + 1 + nb;
        need(count(p3) == nb, "batch dims differ in length");
        const std::int64_t *lc = at + 1, *rc = at + p1 + 1, *lb = at + p2 + 1, *rb = at + p3 + 1;
        std::vector<char> lu(slot(0).ndim, 0), ru(slot(1).ndim, 0);
        auto mark = [&](const std::int64_t* ax, std::int64_t n, std::vector<char>& used, std::uint32_t nd) {
          for (std::int64_t k = 0; k < n; ++k) {
            need(ax[k] >= 0 && ax[k] < nd && !used[ax[k]], "dot axis out of range or repeated");
            used[ax[k]] = 1;
          }
        };
        mark(lc, nc, lu, slot(0).ndim);
        mark(lb, nb, lu, slot(0).ndim);
        mark(rc, nc, ru, slot(1).ndim);
        mark(rb, nb, ru, slot(1).ndim);
        std::vector<std::int64_t> want;
        for (std::int64_t k = 0; k < nb; ++k) {
          need(p.shape(a[0])[lb[k]] == p.shape(a[1])[rb[k]], "batch sizes differ");
          want.push_back(p.shape(a[0])[lb[k]]);
        }
        for (std::int64_t k = 0; k < nc; ++k)
          need(p.shape(a[0])[lc[k]] == p.shape(a[1])[rc[k]], "contracting sizes differ");
        for (std::uint32_t k = 0; k < slot(0).ndim; ++k) if (!lu[k]) want.push_back(p.shape(a[0])[k]);
        for (std::uint32_t k = 0; k < slot(1).ndim; ++k) if (!ru[k]) want.push_back(p.shape(a[1])[k]);
        need(want.size() == o.ndim && std::equal(want.begin(), want.end(), oshape), "dot output shape");
        break;
      }
      case Op::Constant:
        arity(0);
        need(na >= 2 && at[0] >= 0 && at[1] >= 0 && static_cast<std::uint64_t>(at[1]) == p.nbytes(in.out) &&
                 static_cast<std::uint64_t>(at[0]) + static_cast<std::uint64_t>(at[1]) <= p.consts.size(),
             "constant data out of range");
        break;
      case Op::BitcastConvertType:  // jax's bitcast_convert_type: a copy of the bytes
        arity(1);
        need(na == 1 && at[0] == static_cast<std::int64_t>(o.dtype), "bitcast dtype attribute");
        need(p.nbytes(a[0]) == p.nbytes(in.out), "bitcast changes the number of bytes");
        need(slot(0).dtype != DType::Bool && o.dtype != DType::Bool, "bitcast of bool");
        break;
      case Op::Iota: {
        arity(0);
        std::int64_t n = count(0);
        need(na == n + 3 && at[n + 2] >= 0 && at[n + 2] < o.ndim, "iota dimension");
        need(o.dtype != DType::Bool, "iota dtype");
        break;
      }
      case Op::TriangularSolve: case Op::Cholesky: {  // linalg.hpp
        const bool trsm = in.op == Op::TriangularSolve;
        arity(trsm ? 2 : 1);
        DType d = o.dtype;
        need(d == DType::F32 || d == DType::F64 || d == DType::C64 || d == DType::C128, "dtype is not inexact");
        for (std::uint32_t k = 0; k < in.n_in; ++k) need(slot(k).dtype == d, "operand dtype mismatch");
        const std::uint32_t nd = slot(0).ndim;
        const std::int64_t* as = p.shape(a[0]);
        need(nd >= 2 && as[nd - 1] == as[nd - 2], "operand a is not a (batch of) square matrices");
        if (!trsm) {
          same_shape(0);
          break;
        }
        need(na == 5, "needs 5 attributes");
        for (std::int64_t k = 0; k < 5; ++k) need(at[k] == 0 || at[k] == 1, "flag attribute is not 0 or 1");
        const std::int64_t* bs = p.shape(a[1]);
        need(slot(1).ndim == nd && std::equal(as, as + nd - 2, bs), "batch axes of a and b differ");
        need(bs[at[0] ? nd - 2 : nd - 1] == as[nd - 1], "b does not match the size of a");
        same_shape(1);
        break;
      }
      case Op::Gather: case Op::Scatter: {  // gather.hpp: attrs axis (, mode)
        const bool sc = in.op == Op::Scatter;
        arity(sc ? 3 : 2);
        need(na == (sc ? 2 : 1), sc ? "needs 2 attributes (axis, mode)" : "needs 1 attribute (axis)");
        const Slot& x = slot(0);
        const Slot& ix = slot(1);
        need(ix.dtype == DType::I32 || ix.dtype == DType::I64, "index dtype is not int32/int64");
        need(at[0] >= 0 && at[0] < static_cast<std::int64_t>(x.ndim), "axis out of range");
        const std::int64_t ax = at[0];
        const std::int64_t* xs = p.shape(a[0]);
        const std::int64_t* is = p.shape(a[1]);
        std::vector<std::int64_t> want(xs, xs + ax);
        want.insert(want.end(), is, is + ix.ndim);
        want.insert(want.end(), xs + ax + 1, xs + x.ndim);
        const Slot& g = sc ? slot(2) : o;  // the gathered shape: Gather's output, Scatter's update
        const std::int64_t* gs = sc ? p.shape(a[2]) : oshape;
        need(x.dtype == o.dtype && g.dtype == o.dtype, "operand dtype mismatch");
        need(want.size() == g.ndim && std::equal(want.begin(), want.end(), gs), "gathered shape mismatch");
        if (sc) {
          same_shape(0);
          need(at[1] >= 0 && at[1] < static_cast<std::int64_t>(kern::ScatterMode::kCount), "scatter mode out of range");
          const auto m = static_cast<kern::ScatterMode>(at[1]);
          const bool cplx = o.dtype == DType::C64 || o.dtype == DType::C128;
          need(o.dtype != DType::Bool || m == kern::ScatterMode::Set, "bool scatter other than set");
          need(!cplx || m == kern::ScatterMode::Set || m == kern::ScatterMode::Add || m == kern::ScatterMode::Mul,
               "complex scatter min/max");
        } else {
          need(xs[ax] > 0 || ix.size == 0, "gather from an empty axis");
        }
        break;
      }
      case Op::DynamicSlice: case Op::DynamicUpdateSlice: {  // gather.hpp
        const bool dus = in.op == Op::DynamicUpdateSlice;
        const Slot& x = slot(0);
        const std::uint32_t first = dus ? 2 : 1;
        arity(first + x.ndim);
        for (std::uint32_t k = first; k < in.n_in; ++k)
          need(slot(k).ndim == 0 && (slot(k).dtype == DType::I32 || slot(k).dtype == DType::I64),
               "start index is not a scalar int32/int64");
        need(o.dtype == x.dtype, "operand dtype mismatch");
        const std::int64_t* xs = p.shape(a[0]);
        if (dus) {
          same_shape(0);
          need(slot(1).dtype == x.dtype && slot(1).ndim == x.ndim, "update dtype/rank");
          for (std::uint32_t k = 0; k < x.ndim; ++k) need(p.shape(a[1])[k] <= xs[k], "update larger than operand");
        } else {
          need(count(0) == static_cast<std::int64_t>(x.ndim) && na == 1 + static_cast<std::int64_t>(x.ndim),
               "slice sizes length");
          need(o.ndim == x.ndim, "output rank");
          for (std::uint32_t k = 0; k < x.ndim; ++k)
            need(at[1 + k] >= 0 && at[1 + k] <= xs[k] && oshape[k] == at[1 + k], "slice sizes");
        }
        break;
      }
      case Op::ReduceMin: case Op::ReduceProd: case Op::ReduceAnd: case Op::ReduceOr: case Op::ArgMax:
      case Op::ArgMin: case Op::Cumsum: case Op::Cumprod: case Op::Cummax: case Op::Cummin:
      case Op::LinearScan: case Op::Sort:  // sort_scan.hpp
        if (const char* problem = check_sort_scan(p, in)) fail(problem);
        break;
      case Op::LU: case Op::LUPermute: case Op::Eigh: case Op::QR: case Op::SVD: case Op::Eig:
      case Op::Schur: case Op::Hessenberg: case Op::Geqrf: {  // factor.hpp
        const bool perm = in.op == Op::LUPermute;
        arity(perm ? 2 : 1);
        const bool no_attrs = in.op == Op::LU || in.op == Op::Schur || in.op == Op::Hessenberg ||
                              in.op == Op::Geqrf;
        need(na == (no_attrs ? 0 : in.op == Op::SVD ? 2 : in.op == Op::Eig ? 3 : 1),
             "wrong number of attributes");
        for (std::int64_t k = 0; k < na; ++k) need(at[k] == 0 || at[k] == 1, "flag attribute is not 0 or 1");
        const Slot& x = slot(perm ? 1 : 0);
        const DType d = x.dtype;
        need(d == DType::F32 || d == DType::F64 || d == DType::C64 || d == DType::C128, "dtype is not inexact");
        const DType real = d == DType::C64 ? DType::F32 : d == DType::C128 ? DType::F64 : d;
        const std::uint32_t nd = x.ndim;
        need(nd >= 2, "operand is not a (batch of) matrices");
        const std::int64_t* xs = p.shape(a[perm ? 1 : 0]);
        const std::int64_t m = xs[nd - 2], n = xs[nd - 1], k = std::min(m, n);
        need(std::equal(xs, xs + nd - 2, oshape) && o.ndim >= nd - 2, "batch axes of the result differ");
        auto last = [&](std::int64_t want, std::uint32_t rank, DType dt) {
          need(o.ndim == rank && o.dtype == dt, "result rank or dtype");
          need(want >= 0 && oshape[rank - 1] == want, "result size");
        };
        auto prod = [&](std::int64_t u, std::int64_t v) {  // -1 on overflow
          std::int64_t r = 0;
          return checked::mul(u, v, r) && r <= checked::kMaxElements ? r : std::int64_t{-1};
        };
        auto sum = [&](std::int64_t u, std::int64_t v) {
          std::int64_t r = 0;
          return u >= 0 && v >= 0 && checked::add(u, v, r) ? r : std::int64_t{-1};
        };
        switch (in.op) {
          case Op::LU:
            need(m == n, "operand is not a (batch of) square matrices");
            last(n + 2, nd, d);
            need(oshape[nd - 2] == m, "result size");
            break;
          case Op::LUPermute: {
            const Slot& pv = slot(0);
            need(pv.dtype == DType::I32 && pv.ndim + 1 == nd, "pivots are not int32 of rank one less than x");
            need(std::equal(xs, xs + nd - 2, p.shape(a[0])), "batch axes of pivots and x differ");
            need(o.dtype == d, "operand dtype mismatch");
            same_shape(1);
            break;
          }
          case Op::Eigh:
            need(m == n, "operand is not a (batch of) square matrices");
            if (at[0]) {
              last(n + 1, nd, d);
              need(oshape[nd - 2] == m, "result size");
            } else {
              last(n, nd - 1, real);
            }
            break;
          case Op::Schur: case Op::Hessenberg:
            need(m == n, "operand is not a (batch of) square matrices");
            last(prod(n, 2), nd, d);
            need(oshape[nd - 2] == m, "result size");
            break;
          case Op::Geqrf:  // [A' | tau], flat
            last(sum(prod(m, n), k), nd - 1, d);
            break;
          case Op::Eig: {
            need(m == n, "operand is not a (batch of) square matrices");
            const DType cplx = d == DType::F32 || d == DType::C64 ? DType::C64 : DType::C128;
            const std::int64_t nv = at[0] + at[1];
            if (nv) {
              last(sum(prod(n, nv), 1), nd, cplx);
              need(oshape[nd - 2] == m, "result size");
            } else {
              last(n, nd - 1, cplx);
            }
            break;
          }
          case Op::QR: {
            const std::int64_t kq = at[0] ? m : k;
            last(sum(prod(m, kq), prod(kq, n)), nd - 1, d);
            break;
          }
          default: {
            const std::int64_t ku = at[0] ? m : k, kv = at[0] ? n : k;
            if (at[1]) last(sum(k, sum(prod(m, ku), prod(kv, n))), nd - 1, d);
            else last(k, nd - 1, real);
            break;
          }
        }
        break;
      }
      case Op::Rev: {  // shapes.hpp; attrs: n, dims...
        arity(1);
        same_shape(0);
        need(slot(0).dtype == o.dtype, "operand dtype mismatch");
        std::int64_t n = count(0);
        need(na == n + 1, "attribute lengths");
        std::vector<char> seen(o.ndim, 0);
        for (std::int64_t k = 0; k < n; ++k) {
          std::int64_t d = at[1 + k];
          need(d >= 0 && d < o.ndim && !seen[d], "rev dim out of range or repeated");
          seen[d] = 1;
        }
        break;
      }
      case Op::Conv: {  // conv.hpp; attrs: n, strides..., n, low..., n, high..., n, ld..., n, rd..., G, BG
        arity(2);
        need(slot(0).dtype == o.dtype && slot(1).dtype == o.dtype, "operand dtype mismatch");
        need(o.dtype == DType::F32 || o.dtype == DType::F64 || o.dtype == DType::C64 || o.dtype == DType::C128 ||
                 is_integer_dtype(o.dtype) || o.dtype == DType::Bool,
             "conv needs numeric or bool operands");
        const std::int64_t n = count(0);
        need(n <= 8 && na == 5 * (n + 1) + 2, "attribute lengths");
        for (std::int64_t f = 1; f < 5; ++f) need(count(f * (n + 1)) == n, "attribute lengths");
        need(slot(0).ndim == n + 2 && slot(1).ndim == n + 2 && o.ndim == n + 2, "operand ranks");
        const std::int64_t *st = at + 1, *lo = st + n + 1, *hi = lo + n + 1, *ld = hi + n + 1, *rd = ld + n + 1;
        const std::int64_t G = rd[n], BG = rd[n + 1];
        const std::int64_t *xs = p.shape(a[0]), *ws = p.shape(a[1]);
        need(G >= 1 && BG >= 1 && (G == 1 || BG == 1), "group counts");
        need(ws[1] >= 0 && xs[1] == ws[1] * G && ws[0] % G == 0 && ws[0] % BG == 0 && xs[0] % BG == 0,
             "feature or batch sizes do not match the group counts");
        need(oshape[0] == xs[0] / BG && oshape[1] == ws[0], "conv output shape");
        for (std::int64_t d = 0; d < n; ++d) {
          need(st[d] >= 1 && ld[d] >= 1 && rd[d] >= 1 && st[d] < (1LL << 32) && ld[d] < (1LL << 32) &&
                   rd[d] < (1LL << 32),
               "strides and dilations must be positive");
          need(lo[d] > -(1LL << 40) && lo[d] < (1LL << 40) && hi[d] > -(1LL << 40) && hi[d] < (1LL << 40),
               "padding out of range");
          const std::int64_t s = xs[2 + d], k = ws[2 + d];
          need(s < (1LL << 31) && k < (1LL << 31), "conv spatial size out of range");
          const std::int64_t sd = s == 0 ? 0 : (s - 1) * ld[d] + 1, kd = k == 0 ? 0 : (k - 1) * rd[d] + 1;
          const std::int64_t len = sd + lo[d] + hi[d];
          need(oshape[2 + d] == (len < kd ? 0 : (len - kd) / st[d] + 1), "conv output shape");
        }
        break;
      }
      case Op::ReduceWindowSum: case Op::ReduceWindowMax: case Op::ReduceWindowMin: {
        // conv.hpp; attrs: n, window..., n, strides..., n, low..., n, high..., n, base dil..., n, window dil...
        arity(1);
        need(slot(0).dtype == o.dtype, "operand dtype mismatch");
        const DType dt = o.dtype;
        const bool real = dt == DType::F32 || dt == DType::F64 || is_integer_dtype(dt);
        need(real || (in.op == Op::ReduceWindowSum && (dt == DType::C64 || dt == DType::C128)),
             "reduce_window dtype");
        const std::int64_t n = slot(0).ndim;
        need(o.ndim == n && na == 6 * (n + 1), "attribute lengths");
        for (std::int64_t f = 0; f < 6; ++f) need(count(f * (n + 1)) == n, "attribute lengths");
        const std::int64_t *wd = at + 1, *st = wd + n + 1, *lo = st + n + 1, *hi = lo + n + 1, *bd = hi + n + 1,
                           *wdl = bd + n + 1;
        const std::int64_t* xs = p.shape(a[0]);
        for (std::int64_t d = 0; d < n; ++d) {
          need(wd[d] >= 1 && st[d] >= 1 && bd[d] >= 1 && wdl[d] >= 1 && wd[d] < (1LL << 31) &&
                   st[d] < (1LL << 31) && bd[d] < (1LL << 31) && wdl[d] < (1LL << 31),
               "window sizes, strides and dilations must be positive");
          need(lo[d] >= 0 && hi[d] >= 0 && lo[d] < (1LL << 40) && hi[d] < (1LL << 40), "reduce_window padding");
          need(xs[d] < (1LL << 31), "reduce_window operand size out of range");
          const std::int64_t sd = xs[d] == 0 ? 0 : (xs[d] - 1) * bd[d] + 1, kd = (wd[d] - 1) * wdl[d] + 1;
          const std::int64_t len = sd + lo[d] + hi[d];
          need(oshape[d] == (len < kd ? 0 : (len - kd) / st[d] + 1), "reduce_window output shape");
        }
        break;
      }
      case Op::SelectAndGatherAdd:
      case Op::SelectAndScatterAdd: {
        // select_window.hpp; operands (source, x); attrs: n, window..., n, strides..., n, low...,
        // n, high..., select max.  Gather: source of x's shape, output the window output's;
        // scatter: source the window output's shape, output x's.
        arity(2);
        const DType dt = o.dtype;
        need(dt == DType::F32 || dt == DType::F64, "select-and-scatter dtype");
        need(slot(0).dtype == dt && slot(1).dtype == dt, "operand dtype mismatch");
        const bool scatter = in.op == Op::SelectAndScatterAdd;
        const std::int64_t n = slot(1).ndim;
        const std::uint32_t win = scatter ? a[0] : in.out;  // the slot of the window output's shape
        const Slot& ws = p.slots[win];
        const std::uint32_t full = scatter ? in.out : a[0];  // the slot of x's shape
        need(ws.ndim == n && p.slots[full].ndim == n && na == 4 * (n + 1) + 1, "attribute lengths");
        for (std::int64_t f = 0; f < 4; ++f) need(count(f * (n + 1)) == n, "attribute lengths");
        const std::int64_t *wd = at + 1, *st = wd + n + 1, *lo = st + n + 1, *hi = lo + n + 1;
        const std::int64_t *xs = p.shape(a[1]), *ys = p.shape(win);
        need(std::equal(xs, xs + n, p.shape(full)), "operand shape mismatch");
        for (std::int64_t d = 0; d < n; ++d) {
          need(wd[d] >= 1 && st[d] >= 1 && wd[d] < (1LL << 31) && st[d] < (1LL << 31),
               "window sizes and strides must be positive");
          need(lo[d] >= 0 && hi[d] >= 0 && lo[d] < (1LL << 40) && hi[d] < (1LL << 40),
               "select-and-scatter padding");
          need(xs[d] < (1LL << 31), "select-and-scatter operand size out of range");
          const std::int64_t len = xs[d] + lo[d] + hi[d];
          need(ys[d] == (len < wd[d] ? 0 : (len - wd[d]) / st[d] + 1),
               "select-and-scatter window output shape");
        }
        break;
      }
      case Op::Threefry2x32: {  // random.hpp: key (K..., 2), count and output (K..., C..., 2)
        arity(2);
        same_shape(1);
        const Slot& k = slot(0);
        need(k.dtype == DType::U32 && slot(1).dtype == DType::U32 && o.dtype == DType::U32,
             "threefry operands must be uint32");
        need(k.ndim >= 1 && k.ndim <= o.ndim && p.shape(a[0])[k.ndim - 1] == 2 && oshape[o.ndim - 1] == 2,
             "threefry key and count must end in an axis of 2");
        need(std::equal(p.shape(a[0]), p.shape(a[0]) + k.ndim - 1, oshape), "threefry key and count batch axes");
        break;
      }
      case Op::Threefry2x32Iota: {  // random.hpp; attrs: n, S...: key (K..., 2) [, start (K...)] -> (K..., S..., 2)
        need(in.n_in == 1 || in.n_in == 2, "wrong number of operands");
        const Slot& k = slot(0);
        if (in.n_in == 2) {
          const Slot& s = slot(1);
          need(s.dtype == DType::U32 && k.ndim >= 1 && s.ndim == k.ndim - 1 &&
                   std::equal(p.shape(a[1]), p.shape(a[1]) + s.ndim, p.shape(a[0])),
               "threefry start must be uint32, one per key");
        }
        const std::int64_t n = count(0);
        need(na == n + 2 && (at[n + 1] == 0 || at[n + 1] == 1), "attribute lengths or fold flag");
        const bool fold = at[n + 1] != 0;
        need(k.dtype == DType::U32 && o.dtype == DType::U32, "threefry operands must be uint32");
        need(k.ndim >= 1 && p.shape(a[0])[k.ndim - 1] == 2 && o.ndim == k.ndim - 1 + n + (fold ? 0 : 1) &&
                 (fold || oshape[o.ndim - 1] == 2),
             "threefry key must end in an axis of 2, the output add the counter shape");
        need(std::equal(p.shape(a[0]), p.shape(a[0]) + k.ndim - 1, oshape), "threefry key and output batch axes");
        for (std::int64_t d = 0; d < n; ++d) need(at[1 + d] == oshape[k.ndim - 1 + d], "threefry counter shape");
        break;
      }
      case Op::Scan: case Op::While: case Op::Cond: case Op::Checkpoint:
        validate_control(p, in, fail);
        break;
      case Op::HostCallback:  // host_callback.hpp: the host checks what it is handed and writes
        need(na == 1, "attribute lengths");
        break;
      case Op::Tie:  // operand 0's value, after the others
        need(in.n_in >= 1, "a tie needs its value operand");
        need(slot(0).dtype == o.dtype, "operand dtype mismatch");
        same_shape(0);
        break;
      case Op::Fft: {  // fft.hpp; attrs: fft_type, n, fft_lengths...: the trailing n axes
        arity(1);
        need(na >= 2, "attribute lengths");
        const std::int64_t type = at[0];
        const std::int64_t n = count(1);
        need(type >= 0 && type <= 3, "fft_type is not FFT, IFFT, RFFT or IRFFT");
        need(na == n + 2 && n >= 1 && n <= 3, "fft_lengths must have 1 to 3 entries");
        const Slot& x = slot(0);
        need(x.ndim == o.ndim && x.ndim >= n, "fft operand and output ranks");
        const DType xd = x.dtype, od = o.dtype;
        const bool ok_dt = type <= 1   ? (xd == DType::C64 || xd == DType::C128) && od == xd
                           : type == 2 ? (xd == DType::F32 && od == DType::C64) || (xd == DType::F64 && od == DType::C128)
                                       : (xd == DType::C64 && od == DType::F32) || (xd == DType::C128 && od == DType::F64);
        need(ok_dt, "fft operand and output dtypes do not fit the fft_type");
        const std::int64_t* xs = p.shape(a[0]);
        const std::int64_t lead = x.ndim - n;
        need(std::equal(xs, xs + lead, oshape), "fft batch axes differ");
        for (std::int64_t k = 0; k < n; ++k) {
          const std::int64_t len = at[2 + k], xd_k = xs[lead + k], od_k = oshape[lead + k];
          need(len >= 1, "fft length is not positive");
          const bool last = k == n - 1;
          const std::int64_t half = len / 2 + 1;
          const std::int64_t want_x = type == 3 && last ? half : len;
          const std::int64_t want_o = type == 2 && last ? half : len;
          need(xd_k == want_x && od_k == want_o, "fft operand or output axis does not match fft_lengths");
        }
        break;
      }
      case Op::SearchSorted: {  // search.hpp; attrs: right (0/1)
        arity(2);
        need(na == 1 && (at[0] == 0 || at[0] == 1), "side flag is not 0 or 1");
        const Slot& r = slot(0);
        const DType d = r.dtype;
        need(d != DType::C64 && d != DType::C128, "dtype is not real");
        need(slot(1).dtype == d, "values dtype differs from the rows'");
        need(r.ndim >= 1, "rows have no axis");
        const std::int64_t* rs = p.shape(a[0]);
        need(rs[r.ndim - 1] < (std::int64_t{1} << 31) - 1, "row longer than int32 positions");
        need(slot(1).ndim >= r.ndim - 1 && std::equal(rs, rs + r.ndim - 1, p.shape(a[1])),
             "values do not start with the rows' batch axes");
        need(o.dtype == DType::I32, "result dtype is not int32");
        same_shape(1);
        break;
      }
      default:
        fail("unknown opcode");
    }
  }
}

// Structural checks, per-instruction checks, then the memory plan: what every Program built from
// outside data goes through before it may run.
inline void finalize(Program& p) {
  p.validate();
  validate_instructions(p);
  p.plan();
  p.measure();
}

}  // namespace tidu
