// tidu/vm/workspace.hpp - the memory one thread evaluates a Program in: Workspace (arena, slot
// pointers, per-instruction handlers, nested workspaces of control flow) and the ArenaPool that
// hands arenas from workspaces that end to workspaces that start.  Its handlers come from
// dispatch.hpp (detail::handler_for): include interpreter.hpp to evaluate.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "tidu/kernels/elementwise.hpp"
#include "tidu/vm/cancel.hpp"
#include "tidu/vm/pages.hpp"
#include "tidu/vm/parallel.hpp"
#include "tidu/vm/program.hpp"

namespace tidu {

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
  BigBlock<std::uint64_t> take(std::size_t words, std::size_t& got,
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
    return big_block<std::uint64_t>(words);  // not cleared; populated when large (pages.hpp)
  }
  void give(BigBlock<std::uint64_t> b, std::size_t words) {
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
  std::multimap<std::size_t, BigBlock<std::uint64_t>> free_;  // by size in words
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
    // Nested workspaces poll this one's cancellation state (cancel_flag): one flag stops all.
    for (const Program& sub : p.subs) {
      subs_.push_back(std::make_unique<Workspace>(sub));
      subs_.back()->follow(cs_);
    }
    carry_.resize(p.carry_bytes() / 8 + 8);
    sub_ptrs_.resize(p.sub_ptr_count());
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
  // Cancellation (cancel.hpp): set this flag from any thread and the running eval (and every
  // later one, until it is cleared) throws tidu::Cancelled at its next poll: the start of each
  // loop iteration, each instruction and each block of the array path.  One kernel call (a
  // large matrix product, a sort) is not cut short.
  std::atomic<bool>& cancel_flag() { return cs_->flag; }
  // A second flag to watch besides cancel_flag (nullptr: none); the Python binding points it at
  // the flag its SIGINT handler sets.  Not synchronised: set it between evaluations.
  void watch(const std::atomic<bool>* also) { cs_->also = also; }
  void check_cancel() const { cs_->check(); }
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
  double* reduce_scratch(std::size_t n) {  // a chain's fused reduction: partial sums per run
    if (reduce_.size() < n) reduce_.resize(n);
    return reduce_.data();
  }
  std::uint8_t* chain_scratch(std::size_t bytes) {
    if (scratch_.size() * sizeof(double) < bytes) scratch_.resize((bytes + sizeof(double) - 1) / sizeof(double));
    return reinterpret_cast<std::uint8_t*>(scratch_.data());
  }

 private:
  BigBlock<std::uint64_t> arena_;  // 8-byte aligned storage for every non-input slot
  std::size_t arena_words_ = 0, need_words_ = 0;
  const std::uint64_t* lent_ = nullptr;  // the arena given to the pool by lend(), if any
  std::vector<void*> ptr_;
  std::vector<kern::DotTables> dots_;
  std::vector<std::uint32_t> dot_of_;  // instruction -> its entry in dots_
  std::vector<double> scalars_;  // slot values on the all-scalar fast path
  std::vector<double> scratch_;  // chain_scratch
  std::vector<double> reduce_;   // reduce_scratch
  std::vector<Handler> handlers_;
  std::vector<std::unique_ptr<Workspace>> subs_;
  CancelState cancel_;
  CancelState* cs_ = &cancel_;  // the outermost workspace's
  void follow(CancelState* cs) {
    cs_ = cs;
    for (auto& s : subs_) s->follow(cs);
  }
  std::vector<std::uint64_t> carry_;
  std::vector<void*> sub_ptrs_;
};

}  // namespace tidu
