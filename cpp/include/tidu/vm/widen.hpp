// tidu/vm/widen.hpp - float16 and bfloat16 computed in float32: before a program is validated,
// every instruction that reads or writes a 16-bit float slot, other than the few that only move
// or hold its bits (takes_half), is rewritten to read float32 copies of its 16-bit operands
// (Convert, exact) and write float32 results that a Convert rounds to the 16-bit slot (to nearest
// even, once per instruction).  So every kernel serves the 16-bit floats through its float32
// instantiation, reductions and matrix products accumulate in float32, and elementwise results
// equal XLA:CPU's (which computes these dtypes the same way) bit for bit.  A saved file keeps the
// program as traced: the rewrite happens when it is built or loaded.
#pragma once

#include <cstdint>
#include <vector>

#include "tidu/vm/dtype.hpp"
#include "tidu/vm/opcodes.hpp"

namespace tidu {

// Instructions that take 16-bit float slots as they are: conversions, copies, constants, control
// flow (its nested programs are widened themselves), host callbacks and ties.
inline bool takes_half(Op op) {
  switch (op) {
    case Op::Convert: case Op::Reshape: case Op::Constant: case Op::Scan: case Op::While: case Op::Cond:
    case Op::Checkpoint: case Op::HostCallback: case Op::Tie: case Op::BitcastConvertType:
      return true;
    default:
      return false;
  }
}

// Instructions whose outputs are some of their operands' elements (or zeros), unchanged.
inline bool moves_data(Op op) {
  switch (op) {
    case Op::BroadcastInDim: case Op::Transpose: case Op::Slice: case Op::Pad: case Op::Concatenate:
    case Op::Rev: case Op::Gather: case Op::DynamicSlice: case Op::DynamicUpdateSlice: case Op::Select:
      return true;
    default:
      return false;
  }
}

// Whether program arrays r hold a 16-bit float slot (at its top level).
template <class Arrays>
inline bool has_half(const Arrays& r) {
  for (std::uint8_t d : r.slot_dtype)
    if (is_half_dtype(static_cast<DType>(d))) return true;
  return false;
}

// r with its 16-bit float instructions computing in float32 (see above); r itself when its
// arrays are inconsistent (validation then says how).
template <class Arrays>
inline Arrays widen_half(const Arrays& r) {
  const std::size_t ns = r.slot_dtype.size(), ni = r.opcode.size();
  if (r.slot_ndim.size() != ns || r.in_off.size() != ni + 1 || r.out_off.size() != ni + 1 ||
      r.attr_off.size() != ni + 1 || r.in_off[ni] > r.in_slots.size() || r.out_off[ni] > r.out_slots.size() ||
      r.attr_off[ni] > r.attrs.size())
    return r;
  std::vector<std::uint64_t> shape_at(ns + 1, 0);
  for (std::size_t s = 0; s < ns; ++s) shape_at[s + 1] = shape_at[s] + r.slot_ndim[s];
  if (shape_at[ns] > r.shapes.size()) return r;
  for (std::size_t i = 0; i < ni; ++i) {
    if (r.in_off[i + 1] < r.in_off[i] || r.out_off[i + 1] < r.out_off[i] || r.attr_off[i + 1] < r.attr_off[i] ||
        r.opcode[i] >= static_cast<std::uint8_t>(Op::kCount))
      return r;
  }
  for (std::uint32_t s : r.in_slots) if (s >= ns) return r;
  for (std::uint32_t s : r.out_slots) if (s >= ns) return r;

  Arrays w = r;
  w.opcode.clear(), w.in_off.assign(1, 0), w.in_slots.clear(), w.out_off.assign(1, 0), w.out_slots.clear();
  w.attr_off.assign(1, 0), w.attrs.clear();
  const auto f32 = static_cast<std::uint8_t>(DType::F32);
  auto new_slot = [&](std::uint32_t like) {  // a float32 slot of like's shape
    w.slot_dtype.push_back(f32);
    w.slot_ndim.push_back(r.slot_ndim[like]);
    w.shapes.insert(w.shapes.end(), r.shapes.begin() + shape_at[like], r.shapes.begin() + shape_at[like + 1]);
    return static_cast<std::uint32_t>(w.slot_dtype.size() - 1);
  };
  auto emit = [&](std::uint8_t op, const std::uint32_t* in, std::size_t n_in, const std::uint32_t* out,
                  std::size_t n_out, const std::int64_t* at, std::size_t n_at) {
    w.opcode.push_back(op);
    w.in_slots.insert(w.in_slots.end(), in, in + n_in);
    w.in_off.push_back(static_cast<std::uint32_t>(w.in_slots.size()));
    w.out_slots.insert(w.out_slots.end(), out, out + n_out);
    w.out_off.push_back(static_cast<std::uint32_t>(w.out_slots.size()));
    w.attrs.insert(w.attrs.end(), at, at + n_at);
    w.attr_off.push_back(static_cast<std::uint32_t>(w.attrs.size()));
  };
  auto convert = [&](std::uint32_t from, std::uint32_t to) {
    const std::int64_t code = w.slot_dtype[to];
    emit(static_cast<std::uint8_t>(Op::Convert), &from, 1, &to, 1, &code, 1);
  };
  auto half = [&](std::uint32_t s) { return is_half_dtype(static_cast<DType>(r.slot_dtype[s])); };
  std::vector<std::uint32_t> wide(ns, UINT32_MAX);  // slot -> its float32 copy, once made
  std::vector<std::uint32_t> in, out, rounds;
  for (std::size_t i = 0; i < ni; ++i) {
    const Op op = static_cast<Op>(r.opcode[i]);
    const std::uint32_t *a = r.in_slots.data() + r.in_off[i], *o = r.out_slots.data() + r.out_off[i];
    const std::size_t n_in = r.in_off[i + 1] - r.in_off[i], n_out = r.out_off[i + 1] - r.out_off[i];
    std::vector<std::int64_t> at(r.attrs.begin() + r.attr_off[i], r.attrs.begin() + r.attr_off[i + 1]);
    bool touches = false;
    for (std::size_t k = 0; k < n_in; ++k) touches = touches || half(a[k]);
    for (std::size_t k = 0; k < n_out; ++k) touches = touches || half(o[k]);
    if (!touches || takes_half(op)) {
      emit(r.opcode[i], a, n_in, o, n_out, at.data(), at.size());
      continue;
    }
    in.assign(a, a + n_in);
    for (std::uint32_t& s : in) {
      if (!half(s)) continue;
      if (wide[s] == UINT32_MAX) {
        wide[s] = new_slot(s);
        convert(s, wide[s]);
      }
      s = wide[s];
    }
    out.assign(o, o + n_out);
    rounds.clear();
    for (std::uint32_t& s : out) {
      if (!half(s)) continue;
      rounds.push_back(s);
      s = new_slot(s);
      rounds.push_back(s);
    }
    // Iota names its dtype in its attributes (n, shape..., dtype, dimension)
    if (op == Op::Iota && !at.empty() && at[0] >= 0 && static_cast<std::size_t>(at[0]) + 1 < at.size())
      at[at[0] + 1] = f32;
    emit(r.opcode[i], in.data(), in.size(), out.data(), out.size(), at.data(), at.size());
    for (std::size_t k = 0; k < rounds.size(); k += 2) {
      convert(rounds[k + 1], rounds[k]);
      // Data movement computes nothing: its float32 result is already 16-bit values, so later
      // readers take it as the widened copy instead of converting the 16-bit slot back.
      if (moves_data(op)) wide[rounds[k]] = rounds[k + 1];
    }
  }
  return w;
}

}  // namespace tidu
