// tidu/vm/interpreter.hpp - evaluation of a Program: one loop over fixed-width instructions, a switch
// on the opcode into kernels templated on dtype.  A Workspace (one per thread) owns the arena;
// after it exists an evaluation allocates nothing.
//
// The pieces: workspace.hpp (Workspace), dispatch.hpp (one instruction), scalar_eval.hpp (the
// all-scalar fast path), control_flow.hpp (Scan, While, Cond, Checkpoint).  eval is defined here
// and declared in control_flow.hpp, whose nested programs it runs: the recursion is a function
// declaration, not an include loop.
#pragma once

#include <algorithm>
#include <atomic>
#include <ctime>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tidu/vm/cancel.hpp"
#include "tidu/vm/control_flow.hpp"
#include "tidu/vm/dispatch.hpp"
#include "tidu/vm/parallel.hpp"
#include "tidu/vm/program.hpp"
#include "tidu/vm/scalar_eval.hpp"
#include "tidu/vm/workspace.hpp"

namespace tidu {

// Per-instruction profile (off by default; one relaxed load per evaluation when off).
// set_profiling(true) makes every evaluation add each instruction's wall time (a chain's time
// goes to its last instruction) into a table per Program; profile(p) reads p's, one entry per
// instruction: total seconds and runs.  For finding where a program's time goes, not for timing
// it: a profiled evaluation pays two clock reads and a lock per instruction.
class Profiler {
 public:
  static Profiler& get() {
    static Profiler p;
    return p;
  }
  bool on() const { return on_.load(std::memory_order_relaxed); }
  void set(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    on_.store(on, std::memory_order_relaxed);
    if (on) table_.clear();
  }
  void add(const Program& p, std::size_t i, double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& v = table_[&p];
    if (v.size() < p.instrs.size()) v.resize(p.instrs.size());
    v[i].first += seconds;
    v[i].second += 1;
  }
  std::vector<std::pair<double, std::int64_t>> take(const Program& p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = table_.find(&p);
    if (it == table_.end()) return {};
    return it->second;
  }

 private:
  std::atomic<bool> on_{false};
  std::mutex mu_;
  std::unordered_map<const Program*, std::vector<std::pair<double, std::int64_t>>> table_;
};
inline void set_profiling(bool on) { Profiler::get().set(on); }

namespace detail {

inline double now_s() {  // the calling thread's CPU time: a loaded machine's waits are not counted
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

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
// Polls the workspace's cancellation state (cancel.hpp) when it starts, which is every iteration
// of a loop (each runs its body through eval), and before each instruction and each block of a
// chain; throws Cancelled when it is set.
inline void eval(const Program& p, Workspace& ws, const void* const* inputs, void* const* outputs) {
  ws.check_cancel();
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
  const bool profiling = Profiler::get().on();
  double t0 = profiling ? detail::now_s() : 0;
  for (std::size_t i = 0; i < p.instrs.size(); ++i) {
    if (profiling && i != 0) {
      double t1 = detail::now_s();
      Profiler::get().add(p, i - 1, t1 - t0);  // a chain's time: at its last instruction
      t0 = t1;
    }
    std::uint32_t end = p.chain_end.empty() ? 0 : p.chain_end[i];
    if (end == 0) {
      if (i != 0) ws.check_cancel();
      ws.handler(i)(p, ws, i);
      continue;
    }
    // A chain of elementwise instructions over one size: all of them for block 1, then block 2,
    // ... so intermediates stay in cache instead of streaming through memory per instruction.
    std::int64_t size = p.slots[p.instrs[i].out].size;
    std::int64_t ops = 0;  // the chain's instructions run per block (constants run once, here)
    for (std::size_t j = i; j < end; ++j) {
      if (p.instrs[j].op == Op::Constant) detail::run_instr(p, ws, j);
      else ++ops;
    }
    const std::int64_t blk = p.chain_block[i];  // set with chain_end (build_chains)
    const std::int64_t nblocks = (size + blk - 1) / blk;
    const std::int64_t per_run = Program::kReduceRun * Program::kBlock / blk;  // blocks in a sum's run
    // Blocks are independent: large chains split them over the machine's cores, a thread per
    // 131,072 elements or per 524,288 element-instructions, whatever the block length (a
    // 2,048-element block-instruction is 0.3-2 us, a pool loop's start about 10 us): a chain of
    // 8 instructions over 131k elements takes 2 threads, one instruction needs 262k elements.
    int threads = static_cast<int>(std::min<std::int64_t>(
        detail::cores(), std::max<std::int64_t>(size >> 17, size * ops >> 19)));
    const std::size_t per_thread = std::size_t{p.max_locals} * Program::kLocalBytes;
    std::uint8_t* scratch = ws.chain_scratch(per_thread * static_cast<std::size_t>(std::max(threads, 1)));
    // A chain ending in a reduction (Program::tail_reduce): run r of kReduceRun blocks adds its
    // part of the sum into row r of acc; the rows are added in order once all have run.
    const Slot& last_out = p.slots[p.instrs[end - 1].out];
    const bool tail = last_out.size != size;
    const std::size_t stop = tail ? end - 1 : end;
    const std::int64_t nruns = (nblocks + per_run - 1) / per_run;
    double* acc = nullptr;
    if (tail) {
      acc = ws.reduce_scratch(static_cast<std::size_t>(nruns * last_out.size));
      std::fill(acc, acc + nruns * last_out.size, 0.0);
    }
    auto blocks = [&](std::int64_t first, std::int64_t last, int t) {  // block indices [first, last)
      std::uint8_t* mine = scratch + per_thread * static_cast<std::size_t>(t);
      for (std::int64_t b = first; b < last; ++b) {
        ws.check_cancel();
        std::int64_t lo = b * blk, n = std::min<std::int64_t>(blk, size - lo);
        // (a fill's first block is the longest this thread runs: only the array's last block is short)
        for (std::size_t j = i; j < stop; ++j)
          if (p.instrs[j].op != Op::Constant && (b == first || !p.fill_once[j]))  // (find_locals)
            detail::run_block(p, ws, j, lo, n, mine);
        if (tail)
          detail::run_reduce_block(p, ws, end - 1, lo, n, mine, acc + b / per_run * last_out.size);
      }
    };
    if (tail) {
      // Whole runs per chunk, so a run's sum never depends on the thread count.
      if (threads <= 1) {
        blocks(0, nblocks, 0);
      } else {
        detail::parallel_chunks(nruns, threads, [&](std::int64_t r, int worker) {
          blocks(r * per_run, std::min(nblocks, (r + 1) * per_run), worker);
        });
      }
      void* y = ptr[p.instrs[end - 1].out];
      for (std::int64_t k = 0; k < last_out.size; ++k) {
        double t = 0;
        for (std::int64_t r = 0; r < nruns; ++r) t += acc[r * last_out.size + k];
        if (last_out.dtype == DType::F64) static_cast<double*>(y)[k] = t;
        else static_cast<float*>(y)[k] = static_cast<float>(t);
      }
    } else if (threads <= 1) {
      blocks(0, nblocks, 0);
    } else {
      // Runs of blocks taken dynamically (parallel.hpp), several per thread, so a thread whose
      // core is busy elsewhere holds up at most one run; `worker` picks the scratch.
      // At least one run per thread (a long chain over a short array, e.g. 300 instructions over
      // 3,780 elements, takes two threads with fewer than 32,768 elements: size >> 15 was 0 runs,
      // a division by zero), at most one per block.
      const std::int64_t runs = std::min<std::int64_t>(
          nblocks, std::clamp<std::int64_t>(size >> 15, threads, std::int64_t{8} * threads));
      const std::int64_t per = (nblocks + runs - 1) / runs;
      detail::parallel_chunks(runs, threads, [&](std::int64_t r, int worker) {
        blocks(r * per, std::min(nblocks, (r + 1) * per), worker);
      });
    }
    i = end - 1;
  }
  if (profiling && !p.instrs.empty()) Profiler::get().add(p, p.instrs.size() - 1, detail::now_s() - t0);
  for (std::size_t i = 0; i < p.outputs.size(); ++i)
    if (ptr[p.outputs[i]] != outputs[i] && p.nbytes(p.outputs[i]))
      std::memcpy(outputs[i], ptr[p.outputs[i]], p.nbytes(p.outputs[i]));
}

inline void Program::eval(Workspace& ws, const void* const* in, void* const* out) const {
  tidu::eval(*this, ws, in, out);
}

// Evaluates `batch` independent points (inputs and outputs with a leading batch axis) on
// `threads` threads.  exact=false lets all-scalar programs use the SIMD kernels across points (see
// eval_scalar_block); other programs are evaluated point by point either way.  When `cancel` is
// given, setting it (from any thread) makes every thread stop at its next poll (each point, each
// block of points, and inside each point as eval polls) and eval_batch throw Cancelled.
// `shared`, when given, marks inputs with no batch axis (shared[i] != 0): one copy that every
// point reads, as jax.vmap's in_axes=None.
inline void eval_batch(const Program& p, std::int64_t batch, const void* const* inputs,
                       void* const* outputs, int threads, bool exact = true,
                       const std::atomic<bool>* cancel = nullptr,
                       const std::uint8_t* shared = nullptr) {
  auto cancelled = [cancel] { return cancel != nullptr && cancel->load(std::memory_order_relaxed); };
  threads = static_cast<int>(std::max<std::int64_t>(
      1, std::min<std::int64_t>({threads, detail::max_threads(), std::max<std::int64_t>(batch, 1)})));
  constexpr std::int64_t K = detail::kScalarBlock;
  // Per thread (parallel.hpp's worker index): a workspace, or the scalar path's value block.
  std::vector<std::unique_ptr<Workspace>> spaces(static_cast<std::size_t>(threads));
  std::vector<std::vector<double>> values(static_cast<std::size_t>(threads));
  // One path for the whole batch (not per chunk), so a point's bits never depend on how the
  // batch was cut between threads: blocks of points on the scalar path from K/2 points on.
  const bool blocks = !p.scalar_code.empty() && batch >= K / 2;
  auto run_range = [&](std::int64_t lo, std::int64_t hi, int worker) {
    if (blocks) {  // blocks of points
      std::vector<double>& V = values[worker];
      if (V.empty()) V.resize((std::size_t{p.scalar_values} + 1) * K);
      for (std::int64_t b = lo; b < hi; b += K) {
        if (cancelled()) throw Cancelled();
        detail::eval_scalar_block(p, V.data(), std::min(K, hi - b), inputs, outputs, b, exact, shared);
      }
      return;
    }
    if (!spaces[worker]) {
      spaces[worker] = std::make_unique<Workspace>(p);
      spaces[worker]->watch(cancel);
    }
    Workspace& ws = *spaces[worker];
    std::vector<const void*> in(p.inputs.size());
    std::vector<void*> out(p.outputs.size());
    for (std::int64_t b = lo; b < hi; ++b) {
      if (cancelled()) throw Cancelled();
      for (std::size_t i = 0; i < in.size(); ++i)
        in[i] = static_cast<const std::uint8_t*>(inputs[i]) +
                (shared != nullptr && shared[i] ? 0 : b * p.nbytes(p.inputs[i]));
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<std::uint8_t*>(outputs[i]) + b * p.nbytes(p.outputs[i]);
      eval(p, ws, in.data(), out.data());
    }
  };
  if (threads == 1) {
    run_range(0, batch, 0);
    return;
  }
  // Chunks taken dynamically, several per thread (a block of K points each on the scalar path):
  // a thread whose core is busy elsewhere holds up at most the chunk it took.
  const std::int64_t chunk = !p.scalar_code.empty()
                                 ? std::max<std::int64_t>(K, (batch + 8 * threads - 1) / (8 * threads) / K * K)
                                 : std::max<std::int64_t>(1, (batch + 8 * threads - 1) / (8 * threads));
  const std::int64_t chunks = (batch + chunk - 1) / chunk;
  detail::parallel_chunks(chunks, threads, [&](std::int64_t c, int worker) {
    run_range(c * chunk, std::min(batch, (c + 1) * chunk), worker);
  });
}

}  // namespace tidu
