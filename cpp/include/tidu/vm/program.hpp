// tidu/vm/program.hpp - an immutable compiled program: fixed-width instructions over SSA slots, each
// slot a byte offset in one arena chosen by a liveness-based memory plan.
//
// A Program is plain data (vectors of integers and a constants blob), validated when built, so a
// program handed in from outside (Python arrays, a file) is checked before anything trusts it.
// This file holds the data and its structural validation; scheduling and the memory plan are
// plan.hpp's (validate.hpp includes it and runs Program::plan).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <stdexcept>
#include <string>
#include <vector>

#include "tidu/vm/checked.hpp"
#include "tidu/vm/opcodes.hpp"
#include "tidu/vm/scalar.hpp"
#include "tidu/vm/scalarize.hpp"

namespace tidu {

class ProgramError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Slot {
  DType dtype;
  std::uint32_t ndim;
  std::uint32_t shape_begin;  // into Program::shapes
  std::int64_t size;          // elements
  std::uint64_t offset;       // bytes into the arena (for non-input slots)
};

struct Instr {
  Op op;
  std::uint32_t in_begin;    // into Program::args
  std::uint32_t n_in;
  std::uint32_t out;         // (first) output slot
  std::uint32_t attr_begin;  // into Program::attrs
  std::uint32_t n_attr;
  std::uint32_t out_begin;   // into Program::outs: every output slot (control flow has several)
  std::uint32_t n_out;
};

// The ops that hold nested programs (Program::subs): their attributes name them by index.
inline bool is_control(Op op) {
  return op == Op::Scan || op == Op::While || op == Op::Cond || op == Op::Checkpoint;
}

class Workspace;

// Caps a loader applies to the program it reads (file.hpp): a file over either is refused with a
// ProgramError before any workspace exists.  The defaults cap nothing.
struct LoadLimits {
  std::uint64_t max_bytes = UINT64_MAX;         // Program::workspace_bytes, nested programs included
  std::uint64_t max_instructions = UINT64_MAX;  // Program::total_instructions, nested included
};

struct Program {
  // ---- embedding API (defined in file.hpp / interpreter.hpp; include <tidu/tidu.hpp>) ----
  static Program load(const std::string& path, const LoadLimits& limits = {});  // throws ProgramError
  static Program load_from_memory(const void* data, std::size_t n,
                                  const LoadLimits& limits = {});  // throws ProgramError
  void eval(Workspace& ws, const void* const* inputs, void* const* outputs) const;
  std::size_t n_inputs() const { return inputs.size(); }
  std::size_t n_outputs() const { return outputs.size(); }
  DType input_dtype(std::size_t i) const { return slots[inputs.at(i)].dtype; }
  DType output_dtype(std::size_t i) const { return slots[outputs.at(i)].dtype; }
  std::vector<std::int64_t> input_shape(std::size_t i) const { return shape_of(inputs.at(i)); }
  std::vector<std::int64_t> output_shape(std::size_t i) const { return shape_of(outputs.at(i)); }
  std::uint64_t input_bytes(std::size_t i) const { return nbytes(inputs.at(i)); }
  std::uint64_t output_bytes(std::size_t i) const { return nbytes(outputs.at(i)); }
  std::vector<std::string> input_names, output_names;  // InputKeys / outputs as Python printed them

  std::vector<Slot> slots;
  std::vector<std::int64_t> shapes;
  std::vector<Instr> instrs;
  std::vector<std::uint32_t> args;
  std::vector<std::uint32_t> outs;  // output slots, Instr::out_begin..+n_out (out == the first)
  std::vector<Program> subs;        // nested programs of control flow (control_flow.hpp)
  std::vector<std::int64_t> attrs;
  std::vector<std::uint8_t> consts;
  std::vector<std::uint32_t> inputs;
  std::vector<std::uint32_t> outputs;
  std::uint64_t arena_bytes = 0;   // this program's memory plan (nested programs not included)
  std::uint64_t naive_bytes = 0;
  // What a Workspace for this program allocates, nested programs' workspaces (loop bodies,
  // branches, recursively), loop carry buffers and pointer tables included (saturating at
  // UINT64_MAX); and the instruction count, nested programs included.  Set by measure().
  std::uint64_t workspace_bytes = 0;
  std::uint64_t total_instructions = 0;
  bool all_scalar = false;
  // Per output: computed into the caller's buffer (a slot an instruction writes, first listed).
  std::vector<char> output_direct;
  // The scalar fast path (scalarize.hpp): non-empty when every slot is a float64 scalar, or a
  // small float64 array of a program the scalarizer takes.  Its code reads and writes
  // scalar_values doubles; input i's elements are values scalar_in_ids[scalar_in_off[i]..], output
  // i's scalar_out_ids[scalar_out_off[i]..].
  std::vector<ScalarInstr> scalar_code;
  std::uint32_t scalar_values = 0;
  std::vector<std::uint32_t> scalar_in_off, scalar_in_ids, scalar_out_off, scalar_out_ids;
  std::shared_ptr<const ScalarJit> scalar_jit;  // scalar_code as machine code, where available
  // chain_end[i] > 0 when instruction i starts a chain of blockable instructions [i, chain_end[i])
  // over one element count, evaluated block by block (kBlock elements at a time).
  std::vector<std::uint32_t> chain_end;
  // Per slot: -1, or k when the slot is chain-local (written and read only inside one chain, not
  // an output): it has no arena buffer, each block of it lives in scratch buffer k of the thread
  // running the block (kLocalBytes each).  Values whose last read has passed give their buffer to
  // later ones (find_locals), so a chain's blocks stay in L1.  max_locals: most in one chain.
  std::vector<std::int32_t> local;
  // Per instruction: 1 for a chain-local broadcast of one value (a constant's fill, a scalar
  // spread over the block): every block of it is the same, so each thread fills its buffer at
  // the first block it runs of the chain and skips it after (a local's buffer is its own for
  // the whole chain, find_locals).
  std::vector<char> fill_once;
  std::uint32_t max_locals = 0;
  static constexpr std::size_t kMaxElemBytes = 16;
  static constexpr std::int64_t kBlock = 2048;  // the longest block (its scratch buffers' size)
  static constexpr std::int64_t kMinChainSize = kBlock;
  // One chain-local buffer in a thread's block scratch: a block of the chain (kBlock elements of up
  // to 4 bytes, or kBlock / 4 of up to kMaxElemBytes: build_chains), and 256 bytes more, so buffer
  // k starts k * 256 bytes past a 4 KB multiple: a load from one buffer and a store to the next
  // do not alias in the L1's address check, and the same element of each is in a different set.
  static constexpr std::size_t kLocalBytes = kBlock * 4 + 256;
  static_assert(kBlock * 4 >= kBlock / 4 * kMaxElemBytes, "a chain block must fit a local buffer");
  // Per instruction starting a chain: its block length, kBlock when every value it reads or
  // writes has 4-byte elements or narrower (8 KB a buffer), else kBlock / 4 (4 KB of float64, 8 KB
  // of complex128): a binary step's two operands and result then stay in a 48 KB L1, where 16 KB
  // buffers of float64 streamed through L2. Interpreter CPU time, 2048 vs 512 for every chain:
  // transformer 4.39 -> 3.97 ms, nbody 23.5 -> 21.7 ms, a float64 sum(x * x + 1) over 10^6 0.77 ->
  // 0.63 ms, xorshift over 131k int64 0.17-0.23 -> 0.14 ms; but float32 exp(x) * x + 1 over 10^6
  // 0.59 -> 0.65 ms (its buffers fit already; shorter blocks only cost dispatch), hence by width.
  std::vector<std::int32_t> chain_block;
  // A chain may end with a float32 or float64 ReduceSum of a value it writes (tail_reduce): the
  // sum is taken block by block as the chain runs, so the reduced operand needs no arena buffer
  // (nor the memory traffic of writing it out).  Each run of kReduceRun blocks adds into its own
  // row of max_reduce_acc doubles (the most any chain needs: its runs times its output size),
  // and the rows are added in run order at the chain's end: the same bits for any thread count.
  // Runs of 16 blocks of kBlock (32,768 elements, whatever the chain's block length): a chain
  // over 131k elements has four, for two threads to share.
  static constexpr std::int64_t kReduceRun = 16;
  static constexpr std::int64_t kMaxReduceAcc = std::int64_t{1} << 20;
  std::uint64_t max_reduce_acc = 0;
  bool tail_reduce(const Instr& in, std::int64_t size) const;  // plan.hpp
  // [A, R, C]: the reduction's operand as A outer, R reduced and C inner elements.
  void reduce_split(const Instr& in, std::int64_t& A, std::int64_t& R, std::int64_t& C) const;  // plan.hpp

  const std::int64_t* shape(std::uint32_t s) const { return shapes.data() + slots[s].shape_begin; }
  std::vector<std::int64_t> shape_of(std::uint32_t s) const {
    return std::vector<std::int64_t>(shape(s), shape(s) + slots[s].ndim);
  }
  std::uint64_t nbytes(std::uint32_t s) const {
    return static_cast<std::uint64_t>(slots[s].size) * dtype_size(slots[s].dtype);
  }

  // Checks every index and size; throws ProgramError naming the problem.
  void validate() const {
    auto fail = [](const std::string& m) { throw ProgramError("tidu program: " + m); };
    std::vector<char> written(slots.size(), 0);
    for (std::size_t s = 0; s < slots.size(); ++s) {
      const Slot& sl = slots[s];
      if (static_cast<unsigned>(sl.dtype) >= static_cast<unsigned>(DType::kCount))
        fail("slot " + std::to_string(s) + " has an unknown dtype");
      if (sl.shape_begin + static_cast<std::uint64_t>(sl.ndim) > shapes.size())
        fail("slot " + std::to_string(s) + " shape out of range");
      const std::int64_t n = checked::elements(shapes.data() + sl.shape_begin, sl.ndim);
      if (n < 0)
        fail("slot " + std::to_string(s) + " has a negative dimension or more than 2^48 elements");
      if (n != sl.size) fail("slot " + std::to_string(s) + " size does not match its shape");
    }
    for (std::uint32_t s : inputs) {
      if (s >= slots.size()) fail("input slot out of range");
      written[s] = 1;
    }
    for (std::size_t i = 0; i < instrs.size(); ++i) {
      const Instr& in = instrs[i];
      const auto at = [i] { return "instruction " + std::to_string(i); };  // built on failure only
      if (static_cast<unsigned>(in.op) >= static_cast<unsigned>(Op::kCount)) fail(at() + ": bad opcode");
      if (in.in_begin + static_cast<std::uint64_t>(in.n_in) > args.size()) fail(at() + ": args out of range");
      if (in.attr_begin + static_cast<std::uint64_t>(in.n_attr) > attrs.size())
        fail(at() + ": attributes out of range");
      for (std::uint32_t k = 0; k < in.n_in; ++k) {
        std::uint32_t a = args[in.in_begin + k];
        if (a >= slots.size() || !written[a]) fail(at() + ": reads a slot not yet written");
      }
      if (in.n_out == 0 || in.out_begin + static_cast<std::uint64_t>(in.n_out) > outs.size() ||
          outs[in.out_begin] != in.out)
        fail(at() + ": outputs out of range");
      if (in.n_out != 1 && !is_control(in.op) && in.op != Op::HostCallback)
        fail(at() + ": only control flow and host callbacks write several outputs");
      for (std::uint32_t k = 0; k < in.n_out; ++k) {
        const std::uint32_t o = outs[in.out_begin + k];
        if (o >= slots.size() || written[o]) fail(at() + ": output slot invalid or rewritten");
        written[o] = 1;
      }
    }
    for (std::uint32_t s : outputs)
      if (s >= slots.size() || !written[s]) fail("output slot never written");
    if (consts.size() > (std::uint64_t{1} << 40)) fail("constants too large");
    if (!input_names.empty() && input_names.size() != inputs.size())
      fail(std::to_string(input_names.size()) + " input names for " + std::to_string(inputs.size()) + " inputs");
    if (!output_names.empty() && output_names.size() != outputs.size())
      fail(std::to_string(output_names.size()) + " output names for " + std::to_string(outputs.size()) +
           " outputs");
  }

  // Bytes of a loop's second set of carries (the largest over the loops: a while loop's
  // outputs, a scan's first n_carry; its ys are written in place into the stacked outputs).
  std::uint64_t carry_bytes() const {
    std::uint64_t carry = 0;
    for (const Instr& in : instrs)
      if (in.op == Op::Scan || in.op == Op::While) {
        const std::uint32_t nk = in.op == Op::Scan ? static_cast<std::uint32_t>(attrs[in.attr_begin + 4]) : in.n_out;
        std::uint64_t b = 0;
        for (std::uint32_t k = 0; k < nk; ++k) b += (nbytes(outs[in.out_begin + k]) + 63) & ~std::uint64_t{63};
        carry = std::max(carry, b);
      }
    return carry;
  }
  // Room for any nested call's pointer lists (inputs, outputs and two sets of carries).
  std::size_t sub_ptr_count() const {
    std::size_t n = 0;
    for (const Program& sub : subs) n += sub.inputs.size() + 3 * sub.outputs.size();
    return n;
  }
  // Sets workspace_bytes and total_instructions (after plan(), and after the nested programs'
  // own measure()): mirrors what the Workspace constructor allocates.
  void measure() {
    auto sat_add = [](std::uint64_t a, std::uint64_t b) {
      std::uint64_t r;
      return checked::add(a, b, r) ? r : UINT64_MAX;
    };
    std::uint64_t b = 0, n = instrs.size();
    if (!scalar_code.empty()) {
      b = (std::uint64_t{scalar_values} + 1) * sizeof(double);
    } else {
      b = sat_add(arena_bytes, 72);  // the arena: (arena_bytes + 64) / 8 + 1 words
      b = sat_add(b, carry_bytes() + 64);
      b = sat_add(b, (slots.size() + sub_ptr_count()) * sizeof(void*) + instrs.size() * 16);
      // One thread's block scratch of a chain's local slots (Program::local): more threads
      // each take as much for a large chain.
      b = sat_add(b, std::uint64_t{max_locals} * kLocalBytes);
      b = sat_add(b, max_reduce_acc * sizeof(double));  // fused reductions' partial sums
    }
    for (const Program& sub : subs) {
      b = sat_add(b, sub.workspace_bytes);
      n = sat_add(n, sub.total_instructions);
    }
    workspace_bytes = b;
    total_instructions = n;
  }

  // ---- scheduling and memory planning (defined in plan.hpp) ----
  void schedule();  // plan.hpp
  void plan();  // plan.hpp

  // fused_pad[i] = j when Add instruction i absorbs the zero Pad j of one of its operands: its
  // other operand (the accumulator, fused_acc(i)) dies at i, so i's output takes over its buffer
  // and i adds the pad's operand into its window only; j runs nothing and has no buffer.  This
  // is what a gradient's cotangent accumulation is made of (each x[i] of a loop contributes a
  // padded slice): O(window) per contribution instead of O(array).
  std::vector<std::int32_t> fused_pad;
  std::vector<char> pad_absorbed;  // per instruction: a Pad some Add absorbed
  std::uint32_t fused_acc(std::size_t i) const {
    const std::uint32_t* a = args.data() + instrs[i].in_begin;
    return a[0] == instrs[fused_pad[i]].out ? a[1] : a[0];
  }

  // Per slot: written by an Add reading a Pad, which may accumulate in place (fuse_pad_adds):
  // such adds join no chain (a chain runs block by block, the in-place add by window).
  std::vector<char> pad_add;
  void mark_pad_adds();  // plan.hpp
  void fuse_pad_adds(std::vector<std::int64_t>& last, const std::vector<char>& is_input,
                     const std::vector<char>& is_output, const std::vector<char>& const_slot,
                     std::vector<char>& virt, std::vector<char>& keep);  // plan.hpp
  bool blockable(const Instr& in, std::int64_t size) const;  // plan.hpp
  // A reshape, or a broadcast that only adds unit axes (as many elements, in the same order):
  // the output's bytes are the operand's (plan.hpp shares the buffer; the kernels copy at most).
  bool same_bytes(const Instr& in) const;  // plan.hpp
  // last: each slot's last reader, kept alive to its chain's end where a chain needs it; read:
  // its actual last reader (a chain-local value's buffer is given back there; consumed)
  void find_locals(const std::vector<std::int64_t>& last, std::vector<std::int64_t>& read);  // plan.hpp
  void build_chains();  // plan.hpp
  void build_scalar_code();  // plan.hpp
  static std::vector<ScalarInstr> with_runs(std::vector<ScalarInstr> code);  // plan.hpp
  static std::int64_t scalar_latency(Op op);  // plan.hpp
  static int scalar_arity(Op op);  // plan.hpp
  std::vector<ScalarInstr> asap_order(const std::vector<ScalarInstr>& code) const;  // plan.hpp
  std::vector<ScalarInstr> schedule_scalar(const std::vector<ScalarInstr>& code) const;  // plan.hpp

 private:
  static std::uint64_t align(std::uint64_t b) { return (b + 63) & ~std::uint64_t{63}; }

  // Free buffers by byte size, most recently freed first (a stack per size: O(1), and a program
  // has few distinct sizes).
  class FreeList {
   public:
    bool take(std::uint64_t bytes, std::uint64_t& offset) {
      auto it = by_size_.find(bytes);
      if (it == by_size_.end() || it->second.empty()) return false;
      offset = it->second.back();
      it->second.pop_back();
      return true;
    }
    void give(std::uint64_t bytes, std::uint64_t offset) { by_size_[bytes].push_back(offset); }

   private:
    std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> by_size_;
  };
};

}  // namespace tidu
