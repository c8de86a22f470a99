// tidu/vm/cancel.hpp - stopping an evaluation from outside.  A Workspace carries a CancelState:
// a flag that any thread may set (Workspace::cancel_flag) and, optionally, one more flag it
// watches (the Python binding's, set by its SIGINT handler).  eval() polls them when it starts
// (so at every iteration of a loop, whose body is an eval of its own) and between instructions
// and blocks of the array path: a relaxed atomic load or two, no system call.  When one is set,
// eval throws Cancelled; the Workspace stays usable (clear the flag before the next eval).
#pragma once

#include <atomic>
#include <stdexcept>

namespace tidu {

// Thrown by eval / eval_batch when a cancellation flag is set.  The outputs are then partly
// written; the Workspace and the Program stay usable.
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("tidu: evaluation cancelled") {}
};

struct CancelState {
  std::atomic<bool> flag{false};              // set by the embedder, from any thread
  const std::atomic<bool>* also = nullptr;    // a second flag to watch (e.g. a signal handler's)

  bool requested() const noexcept {
    if (flag.load(std::memory_order_relaxed)) return true;
    const std::atomic<bool>* a = also;
    return a != nullptr && a->load(std::memory_order_relaxed);
  }
  void check() const {
    if (requested()) throw Cancelled();
  }
};

}  // namespace tidu
