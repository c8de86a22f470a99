// tidu/vm/control_flow.hpp - the control-flow instructions (docs/control_flow.md): Scan, While, Cond
// and Checkpoint run nested programs (Program::subs) on their own workspaces (Workspace::sub),
// with no allocation and no Python per iteration.  Included by dispatch.hpp (handler_for).
//
// Every iteration runs its body (and a while loop's condition) through eval, which polls the
// workspace's cancellation state first (cancel.hpp): a loop that never ends stops there.
//
// Attributes (validated by validate.hpp; "take" lists map a nested program's inputs to the
// instruction's operands, since a body need not read every operand):
//   Scan:       sub, length, reverse, n_consts, n_carry, n_take, take...
//               operands consts, carries, xs (each stacked on axis 0); outputs carries, ys
//   While:      cond_sub, body_sub, n_consts, n_ctake, ctake..., n_btake, btake...
//               operands consts, carries; outputs carries
//   Cond:       n_branches, (sub, n_take, take...) per branch; operand 0 an int32 index (clamped)
//   Checkpoint: sub, n_take, take...
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "tidu/vm/program.hpp"
#include "tidu/vm/workspace.hpp"

namespace tidu {

// Evaluates a nested program (defined in interpreter.hpp, which includes this file).
inline void eval(const Program& p, Workspace& ws, const void* const* inputs, void* const* outputs);

namespace detail {

inline std::uint64_t align64(std::uint64_t b) { return (b + 63) & ~std::uint64_t{63}; }

// A loop's carries: the initial ones (operands nc..nc+nk) copied into the carry outputs (the
// plan never places an output over an operand); cur points at those, nxt at the workspace's
// second buffer set.  The step swaps cur[k] and nxt[k]; finish_carries leaves the final ones in
// the outputs.
inline void start_carries(const Program& p, Workspace& ws, const std::uint32_t* a, const std::uint32_t* o,
                          std::uint32_t nc, std::uint32_t nk, void** cur, void** nxt) {
  void** ptr = ws.ptrs();
  std::uint8_t* scratch = ws.carry_scratch();
  for (std::uint32_t k = 0; k < nk; ++k) {
    if (p.nbytes(o[k])) std::memcpy(ptr[o[k]], ptr[a[nc + k]], p.nbytes(o[k]));
    cur[k] = ptr[o[k]];
    nxt[k] = scratch;
    scratch += align64(p.nbytes(o[k]));
  }
}

inline void finish_carries(const Program& p, Workspace& ws, const std::uint32_t* o, std::uint32_t nk,
                           void* const* cur) {
  void** ptr = ws.ptrs();
  for (std::uint32_t k = 0; k < nk; ++k)
    if (cur[k] != ptr[o[k]] && p.nbytes(o[k])) std::memcpy(ptr[o[k]], cur[k], p.nbytes(o[k]));
}

// Scan: the body evaluated `length` times, its carries ping-ponging between the instruction's
// carry outputs and the workspace's carry scratch, each step's slice of the xs read in place and
// each step's ys written in place into the stacked outputs.
inline void run_scan(const Program& p, Workspace& ws, const Instr& in, const std::int64_t* at) {
  void** ptr = ws.ptrs();
  const std::uint32_t* a = p.args.data() + in.in_begin;
  const std::uint32_t* o = p.outs.data() + in.out_begin;
  const Program& body = p.subs[at[0]];
  Workspace& bw = ws.sub(at[0]);
  const std::int64_t length = at[1];
  const bool reverse = at[2] != 0;
  const std::uint32_t nc = static_cast<std::uint32_t>(at[3]), nk = static_cast<std::uint32_t>(at[4]);
  const std::int64_t* take = at + 6;
  const std::size_t n_take = static_cast<std::size_t>(at[5]), n_out = body.outputs.size();
  void** inp = ws.sub_ptrs();
  void** out = inp + n_take;
  void** cur = out + n_out;
  void** nxt = cur + nk;
  start_carries(p, ws, a, o, nc, nk, cur, nxt);
  for (std::int64_t s = 0; s < length; ++s) {
    const std::int64_t i = reverse ? length - 1 - s : s;
    for (std::size_t k = 0; k < n_take; ++k) {
      const std::uint32_t t = static_cast<std::uint32_t>(take[k]);
      if (t < nc) {
        inp[k] = ptr[a[t]];
      } else if (t < nc + nk) {
        inp[k] = cur[t - nc];
      } else {  // row i of an xs stack: a slice of the body input's size
        inp[k] = static_cast<std::uint8_t*>(ptr[a[t]]) + static_cast<std::uint64_t>(i) * body.nbytes(body.inputs[k]);
      }
    }
    for (std::uint32_t k = 0; k < nk; ++k) out[k] = nxt[k];
    for (std::size_t j = nk; j < n_out; ++j)
      out[j] = static_cast<std::uint8_t*>(ptr[o[j]]) + static_cast<std::uint64_t>(i) * body.nbytes(body.outputs[j]);
    eval(body, bw, inp, out);
    for (std::uint32_t k = 0; k < nk; ++k) std::swap(cur[k], nxt[k]);  // the new carries
  }
  finish_carries(p, ws, o, nk, cur);
}

// While: cond(consts, carries) -> bool, then body(consts, carries) -> carries, until false.
inline void run_while(const Program& p, Workspace& ws, const Instr& in, const std::int64_t* at) {
  void** ptr = ws.ptrs();
  const std::uint32_t* a = p.args.data() + in.in_begin;
  const std::uint32_t* o = p.outs.data() + in.out_begin;
  const Program& cond = p.subs[at[0]];
  const Program& body = p.subs[at[1]];
  Workspace& cw = ws.sub(at[0]);
  Workspace& bw = ws.sub(at[1]);
  const std::uint32_t nc = static_cast<std::uint32_t>(at[2]), nk = in.n_out;
  const std::int64_t* ctake = at + 4;
  const std::size_t n_ctake = static_cast<std::size_t>(at[3]);
  const std::int64_t* btake = ctake + n_ctake + 1;
  const std::size_t n_btake = static_cast<std::size_t>(ctake[n_ctake]);
  void** inp = ws.sub_ptrs();
  void** out = inp + std::max(n_ctake, n_btake);
  void** cur = out + nk;
  void** nxt = cur + nk;
  start_carries(p, ws, a, o, nc, nk, cur, nxt);
  auto gather = [&](const std::int64_t* take, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) {
      const std::uint32_t t = static_cast<std::uint32_t>(take[k]);
      inp[k] = t < nc ? ptr[a[t]] : cur[t - nc];
    }
  };
  for (;;) {
    bool go = false;
    void* res = &go;
    gather(ctake, n_ctake);
    eval(cond, cw, inp, &res);
    if (!go) break;
    gather(btake, n_btake);
    for (std::uint32_t k = 0; k < nk; ++k) out[k] = nxt[k];
    eval(body, bw, inp, out);
    for (std::uint32_t k = 0; k < nk; ++k) std::swap(cur[k], nxt[k]);
  }
  finish_carries(p, ws, o, nk, cur);
}

// A nested program called once on operands [first, n_in), writing the instruction's outputs.
inline void call_sub(const Program& p, Workspace& ws, const Instr& in, std::int64_t sub,
                     const std::int64_t* take, std::size_t n_take, std::uint32_t first) {
  void** ptr = ws.ptrs();
  const std::uint32_t* a = p.args.data() + in.in_begin + first;
  const std::uint32_t* o = p.outs.data() + in.out_begin;
  void** inp = ws.sub_ptrs();
  void** out = inp + n_take;
  for (std::size_t k = 0; k < n_take; ++k) inp[k] = ptr[a[take[k]]];
  for (std::uint32_t k = 0; k < in.n_out; ++k) out[k] = ptr[o[k]];
  eval(p.subs[sub], ws.sub(sub), inp, out);
}

inline void run_control(const Program& p, Workspace& ws, std::size_t i) {
  const Instr& in = p.instrs[i];
  const std::int64_t* at = p.attrs.data() + in.attr_begin;
  switch (in.op) {
    case Op::Scan:
      run_scan(p, ws, in, at);
      return;
    case Op::While:
      run_while(p, ws, in, at);
      return;
    case Op::Cond: {
      std::int64_t j = *static_cast<const std::int32_t*>(ws.ptrs()[p.args[in.in_begin]]);
      j = std::min<std::int64_t>(std::max<std::int64_t>(j, 0), at[0] - 1);
      const std::int64_t* br = at + 1;  // skip to branch j's (sub, n_take, take...)
      for (std::int64_t k = 0; k < j; ++k) br += 2 + br[1];
      call_sub(p, ws, in, br[0], br + 2, static_cast<std::size_t>(br[1]), 1);
      return;
    }
    case Op::Checkpoint:
      call_sub(p, ws, in, at[0], at + 2, static_cast<std::size_t>(at[1]), 0);
      return;
    default:
      throw std::runtime_error("tidu: not a control-flow instruction");
  }
}

}  // namespace detail
}  // namespace tidu
