// tidu/vm/plan.hpp - scheduling and memory planning of a Program (split out of program.hpp, which
// keeps the data and its validation): instruction order, elementwise chains, fused pad-adds, the
// liveness-based arena plan and the scalar fast path's code.  Over 400 lines: one member function
// per planning pass, and they call each other.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <queue>
#include <unordered_map>
#include <vector>

#include "tidu/vm/opcodes.hpp"
#include "tidu/vm/program.hpp"
#include "tidu/vm/scalar.hpp"
#include "tidu/vm/scalarize.hpp"

namespace tidu {

// Reorders the instructions (still a topological order) so that elementwise work over one large
// element count forms long chains instead of being cut by small instructions between them:
// list scheduling that continues the current chain's element count while one of its
// instructions is ready, else runs ready instructions with small outputs (scalars, vectors a
// broadcast will expand), else large instructions that join no chain, else starts the chain
// whose ready instruction comes first in program order.  Ties go to
// program order, so a scheduled order schedules to itself (loading a saved program twice gives
// the same plan); programs without a large chainable instruction are left as they are.
inline void Program::schedule() {
  const std::size_t n = instrs.size();
  std::vector<std::int64_t> cls(n, 0);  // element count of a chainable instruction, else 0
  bool any = false;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t size = slots[instrs[i].out].size;
    if (size >= kMinChainSize && blockable(instrs[i], size) && !pad_add[instrs[i].out]) cls[i] = size, any = true;
  }
  if (!any) return;
  std::vector<std::int64_t> producer(slots.size(), -1);
  for (std::size_t i = 0; i < n; ++i)
    for (std::uint32_t k = 0; k < instrs[i].n_out; ++k)
      producer[outs[instrs[i].out_begin + k]] = static_cast<std::int64_t>(i);
  std::vector<std::uint32_t> waiting(n, 0), first(n + 1, 0), users;
  for (std::size_t i = 0; i < n; ++i)
    for (std::uint32_t k = 0; k < instrs[i].n_in; ++k)
      if (producer[args[instrs[i].in_begin + k]] >= 0) ++first[producer[args[instrs[i].in_begin + k]] + 1];
  for (std::size_t i = 0; i < n; ++i) first[i + 1] += first[i];
  users.resize(first[n]);
  {
    std::vector<std::uint32_t> fill(first.begin(), first.end() - 1);
    for (std::size_t i = 0; i < n; ++i)
      for (std::uint32_t k = 0; k < instrs[i].n_in; ++k) {
        const std::int64_t p = producer[args[instrs[i].in_begin + k]];
        if (p >= 0) users[fill[p]++] = static_cast<std::uint32_t>(i), ++waiting[i];
      }
  }
  using Heap = std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>>;
  std::map<std::int64_t, Heap> chained;  // by element count
  Heap small, rest, tails;  // tails: reductions that may end the current chain (tail_reduce)
  std::int64_t current = 0;
  auto place = [&](std::uint32_t i) {
    if (cls[i]) chained[cls[i]].push(i);
    else if (slots[instrs[i].out].size < kMinChainSize) small.push(i);
    else rest.push(i);
  };
  // Leaves: large broadcasts of small operands (a constant's fill, a row of means) and iotas.
  // They wait, once ready, until an instruction that reads them is taken, and go right before
  // it: in its chain they are block-local, where scheduled as soon as ready they formed a chain
  // of their own and were written out whole (corrcoef's clip bounds: 65,536 elements each).
  // Their readers count them as done from the moment they are ready.
  std::vector<char> deferred(n, 0), emitted(n, 0);
  auto is_leaf = [&](std::uint32_t i) {
    const Instr& in = instrs[i];
    return cls[i] != 0 && (in.op == Op::Iota || (in.op == Op::BroadcastInDim && in.n_in == 1 &&
                                                 slots[args[in.in_begin]].size < kMinChainSize));
  };
  std::function<void(std::uint32_t)> ready = [&](std::uint32_t i) {
    const Instr& in = instrs[i];
    if (is_leaf(i)) {
      deferred[i] = 1;
      for (std::uint32_t u = first[i]; u < first[i + 1]; ++u)
        if (--waiting[users[u]] == 0) ready(users[u]);
      return;
    }
    if (current && in.n_in && slots[args[in.in_begin]].size == current && tail_reduce(in, current)) tails.push(i);
    else place(i);
  };
  auto end_chain = [&] {  // the chain's reductions that did not run at its end run as usual
    for (; !tails.empty(); tails.pop()) place(tails.top());
  };
  {
    // (collected first: a ready leaf makes its readers ready, which the loop must not see again)
    std::vector<std::uint32_t> sources;
    for (std::uint32_t i = 0; i < n; ++i)
      if (!waiting[i]) sources.push_back(i);
    for (std::uint32_t i : sources) ready(i);
  }
  // The order as instruction indices, each with a key; sorted by key at the end.  A small
  // instruction taken while a chain grows, reading nothing the chain wrote, is hoisted: its key
  // puts it before the chain's first instruction, so that the chain is not cut in two where it
  // ran (corrcoef's reshape of a row of standard deviations, between its two divisions).
  std::vector<std::uint32_t> order;
  std::vector<std::pair<std::int64_t, std::int64_t>> key;
  order.reserve(n);
  key.reserve(n);
  std::int64_t seq = 0, chain_seq = 0, hoisted = 0;
  std::uint32_t chain_id = 1;
  std::vector<std::uint32_t> made_in(slots.size(), 0);  // the chain that wrote a slot
  auto put = [&](std::uint32_t i, bool hoist) {
    emitted[i] = 1;
    order.push_back(i);
    if (hoist) {
      key.emplace_back(chain_seq, hoisted++ - (std::int64_t{1} << 40));
      return;
    }
    key.emplace_back(seq++, 0);
    for (std::uint32_t k = 0; k < instrs[i].n_out; ++k) made_in[outs[instrs[i].out_begin + k]] = chain_id;
  };
  auto new_chain = [&] {
    chain_seq = seq;
    ++chain_id;
  };
  // i into the order, after the leaves it reads that are not in it yet (a leaf's own operand is
  // in it already: the leaf was ready).
  auto emit = [&](std::uint32_t i, bool hoist) {
    const Instr& in = instrs[i];
    for (std::uint32_t k = 0; k < in.n_in; ++k) {
      const std::int64_t p = producer[args[in.in_begin + k]];
      if (p >= 0 && deferred[p] && !emitted[p]) put(static_cast<std::uint32_t>(p), false);
    }
    put(i, hoist);
    for (std::uint32_t u = first[i]; u < first[i + 1]; ++u)
      if (--waiting[users[u]] == 0) ready(users[u]);
  };
  auto hoistable = [&](std::uint32_t i) {  // reads nothing the growing chain wrote
    const Instr& in = instrs[i];
    for (std::uint32_t k = 0; k < in.n_in; ++k) {
      const std::uint32_t a = args[in.in_begin + k];
      const std::int64_t p = producer[a];
      if (made_in[a] == chain_id || (p >= 0 && deferred[p] && !emitted[p])) return false;
    }
    return true;
  };
  std::uint32_t next_leaf = 0;  // leaves nothing took (outputs): at the end, in program order
  while (order.size() < n) {
    Heap* from = nullptr;
    auto it = chained.find(current);
    if (current && it != chained.end() && !it->second.empty()) {
      from = &it->second;
    } else if (!tails.empty()) {  // one reduction ends the chain (build_chains)
      const std::uint32_t i = tails.top();
      tails.pop();
      end_chain();
      current = 0;
      new_chain();
      emit(i, false);
      continue;
    } else if (!small.empty()) {
      const std::uint32_t i = small.top();
      small.pop();
      const bool hoist = current && hoistable(i);
      emit(i, hoist);
      if (current && !hoist) new_chain();  // the chain is cut here: what follows starts another
      continue;
    } else {
      end_chain();
      // Large instructions that join no chain (a matrix product, a reduction) run before a
      // new chain starts: the chain's later instructions may be waiting for them, and would
      // otherwise start a second chain of the same size after them.
      from = rest.empty() ? nullptr : &rest;
      current = 0;
      if (!from)
        for (auto& [size, h] : chained)
          if (!h.empty() && (!from || h.top() < from->top())) from = &h, current = size;
      new_chain();
      if (!from) {
        while (next_leaf < n && !(deferred[next_leaf] && !emitted[next_leaf])) ++next_leaf;
        if (next_leaf == n) throw ProgramError("tidu program: instructions depend on each other in a cycle");
        put(next_leaf, false);
        continue;
      }
    }
    const std::uint32_t i = from->top();
    from->pop();
    emit(i, false);
  }
  for (std::uint32_t k = 0; k < n; ++k)
    if (!emitted[k]) throw ProgramError("tidu program: the schedule left out instruction " + std::to_string(k));
  std::vector<std::uint32_t> pos(n);
  for (std::uint32_t k = 0; k < n; ++k) pos[k] = k;
  std::sort(pos.begin(), pos.end(), [&](std::uint32_t a, std::uint32_t b) { return key[a] < key[b]; });
  std::vector<Instr> sorted;
  sorted.reserve(n);
  for (std::uint32_t k : pos) sorted.push_back(instrs[order[k]]);
  instrs = std::move(sorted);
}

// Liveness-based plan: a slot's buffer returns to a free list after its last reader, and a
// later output of the same byte size reuses it (SSA is unchanged: only storage is shared).
// Chains (and the schedule that forms them) come first: a chained broadcast's operand lives
// to its chain's end, and chain-local values get no buffer.
inline void Program::plan() {
  all_scalar = true;
  for (const Slot& s : slots) all_scalar = all_scalar && s.ndim == 0;
  // A program on the scalar path runs on its array of doubles alone (Workspace, eval): it has
  // no arena, so the array interpreter's schedule, chains and memory plan are not made for it
  // (they were a fifth of the build of a 20,000-instruction gradient).
  build_scalar_code();
  if (!scalar_code.empty()) {
    naive_bytes = 0;
    for (std::uint32_t o : outs) naive_bytes += align(nbytes(o));  // slots of at most 16 doubles
    arena_bytes = 0;
    return;
  }
  mark_pad_adds();
  schedule();
  build_chains();
  std::vector<std::int64_t> last(slots.size(), -1);
  for (std::size_t i = 0; i < instrs.size(); ++i)
    for (std::uint32_t k = 0; k < instrs[i].n_in; ++k) last[args[instrs[i].in_begin + k]] = i;
  std::vector<std::int64_t> read = last;  // each slot's last reader, before the extensions below
  // A broadcast inside a chain reads its operand at other positions than the block it writes:
  // the operand's buffer must not be reused by a later instruction of the chain, which writes
  // block by block while the broadcast still reads later blocks.
  for (std::size_t i = 0; i < instrs.size(); ++i) {
    if (!chain_end[i]) continue;
    // A chain ending in a reduction writes the sum from its first block on: nothing the chain
    // reads is freed (for the sum's buffer to take) before its end.
    const bool tail = slots[instrs[chain_end[i] - 1].out].size != slots[instrs[i].out].size;
    for (std::size_t j = i; j < chain_end[i]; ++j)
      for (std::uint32_t k = 0; k < instrs[j].n_in; ++k)
        if (tail || instrs[j].op == Op::BroadcastInDim) {
          const std::uint32_t a = args[instrs[j].in_begin + k];
          last[a] = std::max<std::int64_t>(last[a], chain_end[i] - 1);
        }
    i = chain_end[i] - 1;
  }
  find_locals(last, read);
  for (std::uint32_t s : outputs) last[s] = static_cast<std::int64_t>(instrs.size());
  std::vector<char> is_input(slots.size(), 0), is_output(slots.size(), 0), const_slot(slots.size(), 0);
  for (std::uint32_t s : inputs) is_input[s] = 1;
  for (std::uint32_t s : outputs) is_output[s] = 1;
  for (const Instr& in : instrs)
    if (in.op == Op::Constant) const_slot[in.out] = 1;
  auto is_const = [&](std::uint32_t s) { return const_slot[s] != 0; };
  // virt: slots with no buffer of their own (an absorbed pad's output); keep: operands whose
  // buffer passes to the instruction's output (the accumulator of an in-place add).
  std::vector<char> virt(slots.size(), 0), keep(slots.size(), 0);
  fuse_pad_adds(last, is_input, is_output, const_slot, virt, keep);
  // A reshape (or a broadcast adding unit axes: same_bytes) shares its operand's buffer: the
  // same bytes in the same order, so nothing is copied (run_instr and run_block skip a copy
  // onto itself).  Values are written once, so the
  // two never differ; the buffer belongs to the group's root (the first operand) and is freed
  // after the last read of any member.  Not for program inputs, outputs and constants (their
  // buffers are the caller's, or pinned), chain-local values (block scratch) or an in-place
  // accumulator (keep).
  std::vector<std::uint32_t> root(slots.size());
  for (std::uint32_t s = 0; s < root.size(); ++s) root[s] = s;
  std::vector<char> member(slots.size(), 0);  // a reshape's output that uses its root's buffer
  for (std::size_t i = 0; i < instrs.size(); ++i) {
    const Instr& in = instrs[i];
    if (!same_bytes(in)) continue;
    const std::uint32_t a = args[in.in_begin], o = in.out;
    if (is_input[a] || const_slot[a] || is_output[a] || local[a] >= 0 || virt[a] || keep[a] || is_output[o] ||
        local[o] >= 0 || virt[o] || keep[o] || fused_pad[i] >= 0 || nbytes(a) != nbytes(o))
      continue;
    const std::uint32_t r = root[a];
    root[o] = r;
    member[o] = 1;
    last[r] = std::max(last[r], last[o]);
  }
  FreeList free_by_size;  // bytes -> offsets of free buffers
  std::uint64_t top = 0;
  naive_bytes = 0;
  for (std::size_t i = 0; i < instrs.size(); ++i) {
    const Instr& ins = instrs[i];
    // Constants may be hoisted to the start of an elementwise chain (interpreter.hpp), so
    // their buffers are never shared: fresh storage, never returned to the free list.
    const bool pinned = ins.op == Op::Constant;
    // Every output is placed before any operand is freed, so an instruction never writes over
    // its own operands (nor one of its outputs over another).
    for (std::uint32_t k = 0; k < ins.n_out; ++k) {
      const std::uint32_t o = outs[ins.out_begin + k];
      const std::uint64_t b = align(nbytes(o));
      if (!checked::add(naive_bytes, b, naive_bytes) || naive_bytes > checked::kMaxBytes)
        naive_bytes = checked::kMaxBytes;  // a report only: saturates
      if (fused_pad[i] >= 0) {  // accumulates in place: the accumulator's buffer is its own
        slots[o].offset = slots[fused_acc(i)].offset;
      } else if (member[o]) {  // a reshape: its operand's buffer
        slots[o].offset = slots[root[o]].offset;
      } else if (local[o] >= 0 || virt[o]) {  // lives in the chain's block scratch, or nowhere
        slots[o].offset = 0;
      } else if (pinned || !free_by_size.take(b, slots[o].offset)) {
        slots[o].offset = top;
        if (!checked::add(top, b, top) || top > checked::kMaxBytes)
          throw ProgramError("tidu program: the memory plan needs more than 2^56 bytes (instruction " +
                             std::to_string(i) + ")");
      }
    }
    // Free operands whose last reader is this instruction (the absorbed pad's operand is
    // read here, not at the pad).
    auto free_if_last = [&](std::uint32_t s) {
      const std::uint32_t a = root[s];  // a reshape's buffer is its root's, freed with the group
      if (last[a] == static_cast<std::int64_t>(i) && !is_input[a] && !is_const(a) && local[a] < 0 &&
          !virt[a] && !keep[a]) {
        last[a] = -2;  // freed once even when read twice by this instruction
        free_by_size.give(align(nbytes(a)), slots[a].offset);
      }
    };
    for (std::uint32_t k = 0; k < ins.n_in; ++k) free_if_last(args[ins.in_begin + k]);
    if (fused_pad[i] >= 0) free_if_last(args[instrs[fused_pad[i]].in_begin]);
    for (std::uint32_t k = 0; k < ins.n_out; ++k) {  // outputs nothing reads
      const std::uint32_t o = outs[ins.out_begin + k];
      if (last[o] == -1 && !pinned && local[o] < 0 && !virt[o] && !member[o])
        free_by_size.give(align(nbytes(o)), slots[o].offset);
    }
  }
  arena_bytes = top;
  output_direct.assign(outputs.size(), 0);
  {
    std::vector<char> seen(slots.size(), 0);
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const std::uint32_t o = outputs[i];
      output_direct[i] = !is_input[o] && !seen[o];
      seen[o] = 1;
    }
  }
}

inline void Program::mark_pad_adds() {
  pad_add.assign(slots.size(), 0);
  std::vector<char> padded(slots.size(), 0);
  for (const Instr& in : instrs)
    if (in.op == Op::Pad) padded[in.out] = 1;
  for (const Instr& in : instrs)
    if (in.op == Op::Add && in.n_in == 2 && (padded[args[in.in_begin]] || padded[args[in.in_begin + 1]]))
      pad_add[in.out] = 1;
}

inline void Program::fuse_pad_adds(std::vector<std::int64_t>& last, const std::vector<char>& is_input,
                                   const std::vector<char>& is_output, const std::vector<char>& const_slot,
                                   std::vector<char>& virt, std::vector<char>& keep) {
  const std::size_t n = instrs.size();
  fused_pad.assign(n, -1);
  pad_absorbed.assign(n, 0);
  std::vector<std::int64_t> producer(slots.size(), -1);
  std::vector<std::uint32_t> readers(slots.size(), 0);
  std::vector<char> chained(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    producer[instrs[i].out] = static_cast<std::int64_t>(i);
    for (std::uint32_t k = 0; k < instrs[i].n_in; ++k) ++readers[args[instrs[i].in_begin + k]];
  }
  for (std::size_t i = 0; i < n; ++i)
    if (!chain_end.empty() && chain_end[i])
      for (std::size_t j = i; j < chain_end[i]; ++j) chained[j] = 1;
  for (std::size_t i = 0; i < n; ++i) {
    const Instr& in = instrs[i];
    const DType d = slots[in.out].dtype;
    if (in.op != Op::Add || in.n_in != 2 || chained[i] || slots[in.out].size < 64 ||
        !(d == DType::F32 || d == DType::F64 || d == DType::C64 || d == DType::C128))
      continue;
    for (int side = 0; side < 2; ++side) {
      const std::uint32_t v = args[in.in_begin + side], u = args[in.in_begin + 1 - side];
      const std::int64_t j = producer[v];
      if (j < 0 || instrs[j].op != Op::Pad || pad_absorbed[j] || readers[v] != 1 || is_output[v] ||
          local[v] >= 0 || u == v)
        continue;
      const std::uint32_t a = args[instrs[j].in_begin];
      if (a == u || local[a] >= 0 || is_input[u] || const_slot[u] || local[u] >= 0 || keep[u] || virt[u] ||
          last[u] != static_cast<std::int64_t>(i))
        continue;
      fused_pad[i] = static_cast<std::int32_t>(j);
      pad_absorbed[j] = 1;
      virt[v] = 1;
      keep[u] = 1;
      last[a] = std::max<std::int64_t>(last[a], static_cast<std::int64_t>(i));  // read at i now
      break;
    }
  }
}

inline bool Program::same_bytes(const Instr& in) const {
  if (in.n_in != 1 || in.n_out != 1) return false;
  const Slot& x = slots[args[in.in_begin]];
  const Slot& y = slots[in.out];
  if (x.dtype != y.dtype || x.size != y.size) return false;
  if (in.op == Op::Reshape) return true;
  if (in.op != Op::BroadcastInDim) return false;
  // equal sizes: every operand axis keeps its extent, the new axes are 1; increasing dims keep
  // the row-major order (decreasing ones would transpose)
  const std::int64_t* at = attrs.data() + in.attr_begin;  // n, shape..., m, dims...
  const std::int64_t m = at[1 + at[0]];
  const std::int64_t* dims = at + 2 + at[0];
  for (std::int64_t k = 1; k < m; ++k)
    if (dims[k] <= dims[k - 1]) return false;
  return true;
}

// Elementwise over `size` elements: every operand has `size` elements, so block k of the output
// reads only block k of the operands; or a broadcast (block k reads the operand elements it
// maps to) or an iota (no operand).
inline bool Program::blockable(const Instr& in, std::int64_t size) const {
  if (slots[in.out].size != size) return false;
  const std::uint32_t* a = args.data() + in.in_begin;
  switch (in.op) {
    case Op::BroadcastInDim:  // any: run_block reads the operand row by row with its strides
    case Op::Iota:
      return true;
    case Op::Reshape:  // row-major order is kept: element k of the output is element k of the operand
      return slots[a[0]].size == size;
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Max: case Op::Min:
    case Op::Neg: case Op::Conj: case Op::Exp: case Op::Log: case Op::Sin: case Op::Cos: case Op::Tanh:
    case Op::Sqrt: case Op::Rsqrt: case Op::Expm1: case Op::Log1p: case Op::Sign: case Op::StopGradient:
    case Op::Compare: case Op::Select: case Op::Convert:
    case Op::Floor: case Op::Ceil: case Op::Round: case Op::Tan: case Op::Atan: case Op::Asin:
    case Op::Acos: case Op::Sinh: case Op::Cosh: case Op::Asinh: case Op::Acosh: case Op::Atanh:
    case Op::Erf: case Op::Erfc: case Op::ErfInv: case Op::Cbrt: case Op::Logistic: case Op::Rem:
    case Op::Atan2: case Op::Lgamma:  // math.hpp
    case Op::And: case Op::Or: case Op::Xor: case Op::Not: case Op::ShiftLeft:
    case Op::ShiftRightArithmetic: case Op::ShiftRightLogical:  // elementwise.hpp: bitwise
      for (std::uint32_t k = 0; k < in.n_in; ++k)
        if (slots[a[k]].size != size) return false;
      return true;
    default:
      return false;
  }
}

inline void Program::reduce_split(const Instr& in, std::int64_t& A, std::int64_t& R, std::int64_t& C) const {
  const std::int64_t* at = attrs.data() + in.attr_begin;  // n, axes...
  const std::uint32_t x = args[in.in_begin];
  const std::int64_t* sh = shape(x);
  const std::int64_t nax = at[0], lo = nax ? at[1] : 0, hi = nax ? at[nax] + 1 : 0;
  A = R = C = 1;
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(slots[x].ndim); ++k)
    (k < lo ? A : k < hi ? R : C) *= sh[k];
}

// A float32 or float64 sum over `size` elements whose axes are one run [lo, hi) of the operand's axes,
// with partial sums small enough to keep per run of blocks: it may end a chain that writes its
// operand, and take its sum block by block (interpreter.hpp).
inline bool Program::tail_reduce(const Instr& in, std::int64_t size) const {
  if (in.op != Op::ReduceSum || in.n_in != 1 ||
      (slots[in.out].dtype != DType::F32 && slots[in.out].dtype != DType::F64))
    return false;
  const std::uint32_t x = args[in.in_begin];
  if (slots[x].size != size || size < kMinChainSize || slots[x].dtype != slots[in.out].dtype ||
      slots[in.out].size >= size)
    return false;
  const std::int64_t* at = attrs.data() + in.attr_begin;
  if (at[0] == 0) return false;
  for (std::int64_t k = 1; k < at[0]; ++k)
    if (at[k + 1] != at[k] + 1) return false;
  // Runs of at least 32 elements (a reduced row, or a row of kept columns): the block's sums go
  // run by run through a dispatched kernel, which rows of 3 (the coordinates of a (64, 64, 3)
  // pair array) would call once per 3 elements, where the reduction's own kernel loops over
  // them with the length known (N-body's step: 19 -> 37 ms when they were fused).
  std::int64_t A, R, C;
  reduce_split(in, A, R, C);
  if ((C == 1 ? R : C) < 32) return false;
  const std::int64_t runs = (size / kBlock + kReduceRun) / kReduceRun;
  return slots[in.out].size <= kMaxReduceAcc / runs;
}

// Chain-local slots (see `local`): written by a non-constant instruction of a chain, read only
// by later instructions of it that are not broadcasts (a broadcast reads other positions than
// its block), and not a program output.  last: each slot's last reader.
inline void Program::find_locals(const std::vector<std::int64_t>& last, std::vector<std::int64_t>& read) {
  local.assign(slots.size(), -1);
  max_locals = 0;
  std::vector<char> pinned(slots.size(), 0);
  for (std::uint32_t s : outputs) pinned[s] = 1;
  for (std::uint32_t s : inputs) pinned[s] = 1;
  for (const Instr& in : instrs)
    if (in.op == Op::BroadcastInDim) pinned[args[in.in_begin]] = 1;
  // A broadcast of one value (a constant's fill, a scalar spread over the block): fill_once.
  auto is_fill = [&](const Instr& in) {
    return in.op == Op::BroadcastInDim && in.n_in == 1 && slots[args[in.in_begin]].size == 1;
  };
  std::vector<std::int32_t> free_ids;  // buffers of values read for the last time
  for (std::size_t i = 0; i < instrs.size(); ++i) {
    if (!chain_end[i]) continue;
    std::int32_t k = 0;
    free_ids.clear();
    for (std::size_t j = i; j < chain_end[i]; ++j) {
      const Instr& in = instrs[j];
      const std::uint32_t o = in.out;
      if (slots[o].size == slots[instrs[i].out].size &&  // (not a tail reduction's sum)
          in.op != Op::Constant && !pinned[o] && last[o] >= static_cast<std::int64_t>(j) &&
          last[o] < static_cast<std::int64_t>(chain_end[i]) && dtype_size(slots[o].dtype) <= kMaxElemBytes) {
        // The lowest free buffer, taken before the operands' are given back: an instruction never
        // writes over its own operand.  A broadcast of one value takes a buffer of its own for the
        // whole chain (fill_once: each thread fills it at its first block only, so no value
        // before or after it in the chain may write there).
        const bool fill = is_fill(in);
        auto lowest = fill ? free_ids.end() : std::min_element(free_ids.begin(), free_ids.end());
        if (fill) read[o] = -2;  // never given back
        if (lowest == free_ids.end()) {
          local[o] = k++;
        } else {
          local[o] = *lowest;
          free_ids.erase(lowest);
        }
      }
      for (std::uint32_t m = 0; m < in.n_in; ++m) {
        const std::uint32_t a = args[in.in_begin + m];
        if (local[a] < 0 || read[a] != static_cast<std::int64_t>(j)) continue;
        read[a] = -2;  // given back once, if the instruction reads it twice
        free_ids.push_back(local[a]);
      }
    }
    max_locals = std::max<std::uint32_t>(max_locals, static_cast<std::uint32_t>(k));
    i = chain_end[i] - 1;
  }
  fill_once.assign(instrs.size(), 0);
  for (std::size_t i = 0; i < instrs.size(); ++i) fill_once[i] = is_fill(instrs[i]) && local[instrs[i].out] >= 0;
}

inline void Program::build_chains() {
  chain_end.assign(instrs.size(), 0);
  chain_block.assign(instrs.size(), 0);
  max_reduce_acc = 0;
  std::vector<char> in_chain(slots.size(), 0);  // written by the chain being grown
  for (std::size_t i = 0; i < instrs.size();) {
    std::int64_t size = slots[instrs[i].out].size;
    std::size_t j = i;
    // Constants depend on nothing: inside a chain they run once, before its blocks.  A
    // broadcast of more than one element reads other blocks of its operand, so that operand
    // must be complete before the chain starts.
    auto fits = [&](const Instr& in) {
      if (in.op == Op::Constant) return true;
      if (!blockable(in, size) || pad_add[in.out]) return false;
      if (in.op != Op::BroadcastInDim) return true;
      const std::uint32_t a = args[in.in_begin];
      return slots[a].size == 1 || !in_chain[a];
    };
    if (size >= kMinChainSize) {
      while (j < instrs.size() && fits(instrs[j])) in_chain[instrs[j++].out] = 1;
      while (j > i && instrs[j - 1].op == Op::Constant) --j;
      if (j > i && j < instrs.size() && tail_reduce(instrs[j], size) && in_chain[args[instrs[j].in_begin]]) {
        const std::int64_t runs = (size / kBlock + kReduceRun) / kReduceRun;
        max_reduce_acc = std::max<std::uint64_t>(max_reduce_acc, runs * slots[instrs[j].out].size);
        ++j;
      }
    }
    for (std::size_t k = i; k < j; ++k) in_chain[instrs[k].out] = 0;
    while (j > i && instrs[j - 1].op == Op::Constant) --j;
    if (j - i >= 2) {
      chain_end[i] = static_cast<std::uint32_t>(j);
      std::size_t widest = 1;  // the widest element the chain reads or writes
      for (std::size_t k = i; k < j; ++k) {
        widest = std::max(widest, dtype_size(slots[instrs[k].out].dtype));
        for (std::uint32_t m = 0; m < instrs[k].n_in; ++m)
          widest = std::max(widest, dtype_size(slots[args[instrs[k].in_begin + m]].dtype));
      }
      chain_block[i] = static_cast<std::int32_t>(widest <= 4 ? kBlock : kBlock / 4);
      i = j;
    } else {
      ++i;
    }
  }
}

inline void Program::build_scalar_code() {
  scalar_code.clear();
  scalar_jit.reset();
  if (!all_scalar && !scalarize_enabled()) return;
  ScalarForm f;
  if (!scalarize(*this, f)) return;  // not expressible on the fast path
  scalar_values = f.n_values;
  scalar_in_off = std::move(f.in_off), scalar_in_ids = std::move(f.in_ids);
  scalar_out_off = std::move(f.out_off), scalar_out_ids = std::move(f.out_ids);
  const std::vector<ScalarInstr>& code = f.code;
  // The JIT has no dispatch to save: it takes the instructions in order of earliest start, so
  // independent calls sit next to the dependent chain whose latency hides them (measured ~10%
  // faster than program order on a gradient, and than the interpreter's runs).
  std::vector<ScalarInstr> asap = asap_order(code);
  scalar_jit = scalar_jit_enabled() ? ScalarJit::build(asap, scalar_values + 1) : nullptr;
  // The interpreter's list schedule (2 ms for a 20,000-instruction gradient) only where the
  // interpreter runs single points: with JIT code, scalar_code serves eval_batch's blocks,
  // which take any topological order, and keeps the JIT's.
  if (code.empty())
    scalar_code = {ScalarInstr{Op::Constant, 1, scalar_values, 0, 0, 0.0}};
  else if (scalar_jit)
    scalar_code = with_runs(std::move(asap));
  else
    scalar_code = schedule_scalar(code);
}

// Code with ScalarInstr::run marking its runs of one opcode as they stand (a run's first
// instruction holds its length, the others 0).
inline std::vector<ScalarInstr> Program::with_runs(std::vector<ScalarInstr> code) {
  std::size_t head = 0;
  for (std::size_t i = 0; i < code.size(); ++i) {
    code[i].run = 0;
    if (i > 0 && code[i].op == code[head].op) {
      ++code[head].run;
    } else {
      head = i;
      code[i].run = 1;
    }
  }
  return code;
}

// Rough latencies in cycles, for ordering scalar code only.
inline std::int64_t Program::scalar_latency(Op op) {
  switch (op) {
    case Op::Exp: case Op::Log: case Op::Sin: case Op::Cos: case Op::Tanh: case Op::Pow:
    case Op::Expm1: case Op::Log1p: case Op::Tan: case Op::Atan: case Op::Asin: case Op::Acos:
    case Op::Sinh: case Op::Cosh: case Op::Asinh: case Op::Acosh: case Op::Atanh: case Op::Erf:
    case Op::Erfc: case Op::ErfInv: case Op::Cbrt: case Op::Logistic: case Op::Rem: case Op::Atan2:
      return 40;
    case Op::Div: case Op::Sqrt: case Op::Rsqrt: return 15;
    default: return 4;
  }
}

// How many of a, b a scalar instruction reads.
inline int Program::scalar_arity(Op op) {
  switch (op) {
    case Op::Constant: return 0;
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Max:
    case Op::Min: case Op::Rem: case Op::Atan2: return 2;
    default: return 1;
  }
}

// Scalar code stably sorted by each instruction's earliest start (once its operands are ready,
// at scalar_latency): still a topological order, as an instruction starts strictly after its
// operands' producers do.
inline std::vector<ScalarInstr> Program::asap_order(const std::vector<ScalarInstr>& code) const {
  const std::size_t n = code.size();
  std::vector<std::int64_t> ready(scalar_values + 1, 0), start(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const ScalarInstr& c = code[i];
    const int k = scalar_arity(c.op);
    const std::int64_t t = k == 0 ? 0 : k == 1 ? ready[c.a] : std::max(ready[c.a], ready[c.b]);
    start[i] = t;
    ready[c.out] = t + scalar_latency(c.op);
  }
  std::vector<ScalarInstr> out;
  out.reserve(n);
  std::int64_t latest = 0;
  for (std::int64_t t : start) latest = std::max(latest, t);
  if (latest < (std::int64_t{1} << 32) && n < (std::size_t{1} << 32)) {
    // (start, index) packed in one word: a plain sort of integers keeps program order among
    // equal starts, as a stable sort would, without its indirect comparisons.
    std::vector<std::uint64_t> key(n);
    for (std::size_t i = 0; i < n; ++i) key[i] = static_cast<std::uint64_t>(start[i]) << 32 | i;
    std::sort(key.begin(), key.end());
    for (std::uint64_t k : key) out.push_back(code[k & 0xFFFFFFFFu]);
    return out;
  }
  std::vector<std::uint32_t> idx(n);
  for (std::size_t i = 0; i < n; ++i) idx[i] = static_cast<std::uint32_t>(i);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](std::uint32_t x, std::uint32_t y) { return start[x] < start[y]; });
  for (std::uint32_t i : idx) out.push_back(code[i]);
  return out;
}

// Reorders scalar code (any topological order is valid: every slot has its own double) into
// runs of one opcode.  A list scheduler: of the ready instructions it takes the one with the
// longest weighted path to the end of the program (the critical path goes first, so its latency
// overlaps the rest), then every other ready instruction with that opcode, including those the
// run itself makes ready.  Independent work of one kind (the cosines a gradient needs, the
// accumulating adds) thus runs back to back: one well-predicted handler loop instead of an
// indirect jump per instruction, which a random opcode sequence mispredicts.  Deterministic:
// ties go to the later instruction.
inline std::vector<ScalarInstr> Program::schedule_scalar(const std::vector<ScalarInstr>& code) const {
  const std::size_t n = code.size();
  if (n < 2) return code;
  constexpr std::uint32_t kNone = 0xffffffffu;
  std::vector<std::uint32_t> producer(scalar_values + 1, kNone);
  for (std::size_t i = 0; i < n; ++i) producer[code[i].out] = static_cast<std::uint32_t>(i);
  // Successor lists in CSR form, and each instruction's count of unscheduled producers.
  std::vector<std::uint32_t> n_pred(n, 0), succ_begin(n + 1, 0), succ;
  auto for_each_pred = [&](std::size_t i, auto&& f) {
    const ScalarInstr& c = code[i];
    const int k = scalar_arity(c.op);
    if (k >= 1 && producer[c.a] != kNone) f(producer[c.a]);
    if (k == 2 && c.b != c.a && producer[c.b] != kNone) f(producer[c.b]);
  };
  for (std::size_t i = 0; i < n; ++i)
    for_each_pred(i, [&](std::uint32_t q) { ++succ_begin[q + 1]; ++n_pred[i]; });
  for (std::size_t i = 0; i < n; ++i) succ_begin[i + 1] += succ_begin[i];
  succ.resize(succ_begin[n]);
  {
    std::vector<std::uint32_t> fill(succ_begin.begin(), succ_begin.end() - 1);
    for (std::size_t i = 0; i < n; ++i)
      for_each_pred(i, [&](std::uint32_t q) { succ[fill[q]++] = static_cast<std::uint32_t>(i); });
  }
  std::vector<std::int64_t> height(n, 0);
  for (std::size_t i = n; i-- > 0;) {
    std::int64_t h = 0;
    for (std::uint32_t k = succ_begin[i]; k < succ_begin[i + 1]; ++k) h = std::max(h, height[succ[k]]);
    height[i] = h + scalar_latency(code[i].op);
  }
  // Ready instructions: one heap by priority, and one stack per opcode for draining a run.
  std::vector<std::pair<std::int64_t, std::uint32_t>> heap;  // (height, index)
  std::vector<std::vector<std::uint32_t>> ready(static_cast<std::size_t>(Op::kCount));
  std::vector<char> done(n, 0);
  auto make_ready = [&](std::uint32_t i) {
    ready[static_cast<std::size_t>(code[i].op)].push_back(i);
    heap.emplace_back(height[i], i);
    std::push_heap(heap.begin(), heap.end());
  };
  for (std::size_t i = 0; i < n; ++i)
    if (n_pred[i] == 0) make_ready(static_cast<std::uint32_t>(i));
  std::vector<ScalarInstr> out;
  out.reserve(n);
  auto emit = [&](std::uint32_t i) {
    done[i] = 1;
    out.push_back(code[i]);
    for (std::uint32_t k = succ_begin[i]; k < succ_begin[i + 1]; ++k)
      if (--n_pred[succ[k]] == 0) make_ready(succ[k]);
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const std::uint32_t first = heap.back().second;
    heap.pop_back();
    if (done[first]) continue;
    // The chosen instruction, then the rest of its opcode's ready stack (which grows while
    // the run makes more instructions of that opcode ready).  The chosen one stays in the
    // stack, skipped as done: removing it would search the stack, quadratic when thousands
    // of one opcode are ready at once.
    std::vector<std::uint32_t>& stack = ready[static_cast<std::size_t>(code[first].op)];
    emit(first);
    while (!stack.empty()) {
      const std::uint32_t i = stack.back();
      stack.pop_back();
      if (!done[i]) emit(i);
    }
  }
  return with_runs(std::move(out));
}

}  // namespace tidu
