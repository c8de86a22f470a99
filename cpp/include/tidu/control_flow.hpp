// tidu/control_flow.hpp - the loop of a scan (docs/control_flow.md): a body program evaluated
// `length` times on one Workspace, its carries ping-ponging between two buffer sets, each step's
// slice of the xs read in place and each step's ys written in place: no allocation and no Python
// per iteration.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "tidu/interpreter.hpp"
#include "tidu/program.hpp"

namespace tidu {

// The body's operands in body order: consts [0, n_consts), carries [n_consts, n_consts + n_carry),
// xs after them (each a stack of `length` slices of `x_bytes[j]` bytes).  Program input i reads
// operand take[i] (a body need not read every operand); its outputs are the new carries, then one
// slice of each ys stack (`y_bytes[j]` bytes).  `carry` holds the initial carries and receives the
// final ones; `scratch` is a second set of carry buffers of the same sizes.
struct ScanLoop {
  const Program* body;
  std::vector<std::uint32_t> take;
  std::uint32_t n_consts = 0, n_carry = 0;
  std::int64_t length = 0;
  bool reverse = false;
  std::vector<const void*> consts, xs;
  std::vector<std::uint64_t> x_bytes, y_bytes, carry_bytes;
  std::vector<void*> carry, scratch, ys;

  // Checks what the caller cannot get wrong without a bug (sizes against the body program).
  void check() const {
    const Program& p = *body;
    if (take.size() != p.inputs.size()) throw ProgramError("scan: take does not match the body's inputs");
    if (p.outputs.size() != n_carry + ys.size()) throw ProgramError("scan: body outputs do not match");
    const std::size_t n_ops = n_consts + n_carry + xs.size();
    for (std::size_t i = 0; i < take.size(); ++i) {
      const std::uint32_t t = take[i];
      if (t >= n_ops) throw ProgramError("scan: operand index out of range");
      const std::uint64_t want = p.nbytes(p.inputs[i]);
      const std::uint64_t have = t < n_consts ? ~std::uint64_t{0}
                                 : t < n_consts + n_carry ? carry_bytes[t - n_consts]
                                                          : x_bytes[t - n_consts - n_carry];
      if (t >= n_consts && have != want) throw ProgramError("scan: operand size mismatch");
    }
    for (std::uint32_t k = 0; k < n_carry; ++k)
      if (p.nbytes(p.outputs[k]) != carry_bytes[k]) throw ProgramError("scan: carry size mismatch");
    for (std::size_t j = 0; j < ys.size(); ++j)
      if (p.nbytes(p.outputs[n_carry + j]) != y_bytes[j]) throw ProgramError("scan: ys size mismatch");
  }

  void run(Workspace& ws) {
    const Program& p = *body;
    std::vector<const void*> in(p.inputs.size());
    std::vector<void*> out(p.outputs.size());
    std::vector<void*> cur = carry, nxt = scratch;
    for (std::int64_t s = 0; s < length; ++s) {
      const std::int64_t i = reverse ? length - 1 - s : s;
      for (std::size_t k = 0; k < in.size(); ++k) {
        const std::uint32_t t = take[k];
        if (t < n_consts) {
          in[k] = consts[t];
        } else if (t < n_consts + n_carry) {
          in[k] = cur[t - n_consts];
        } else {
          const std::size_t j = t - n_consts - n_carry;
          in[k] = static_cast<const char*>(xs[j]) + static_cast<std::uint64_t>(i) * x_bytes[j];
        }
      }
      for (std::uint32_t k = 0; k < n_carry; ++k) out[k] = nxt[k];
      for (std::size_t j = 0; j < ys.size(); ++j)
        out[n_carry + j] = static_cast<char*>(ys[j]) + static_cast<std::uint64_t>(i) * y_bytes[j];
      eval(p, ws, in.data(), out.data());
      std::swap(cur, nxt);
    }
    for (std::uint32_t k = 0; k < n_carry; ++k)
      if (cur[k] != carry[k] && carry_bytes[k]) std::memcpy(carry[k], cur[k], carry_bytes[k]);
  }
};

}  // namespace tidu
