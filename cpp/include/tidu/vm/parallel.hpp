// tidu/vm/parallel.hpp - the threads tidu starts: a bounded count, and work that still gets done
// (on the caller's thread) when the process cannot start one.
#pragma once

#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

namespace tidu {
namespace detail {

// The machine's hardware threads (at least 1), read once: std::thread::hardware_concurrency
// parses a sysfs file on every call (glibc), microseconds that a small matrix product cannot pay.
inline int cores() {
  static const int n = static_cast<int>(std::max(std::thread::hardware_concurrency(), 1u));
  return n;
}

// At most this many threads per parallel loop (a request for more is capped, never refused).
inline int max_threads() { return std::min(4 * cores(), 256); }

// Runs body(t) for every t in [0, n): t = 1.. on threads of their own, t = 0 on the caller's.  A
// thread that cannot be started (std::system_error: the process is out of threads or memory)
// leaves its share to the caller, so the work is done all the same; the first exception a body
// throws is rethrown after every thread has joined.
template <class F>
inline void parallel_for(int n, F&& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(std::max(n, 1)));
  auto guarded = [&](int t) {
    try {
      body(t);
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(std::max(n - 1, 0)));
  int started = 0;  // bodies 1..started run on pool threads
  for (int t = 1; t < n; ++t) {
    try {
      pool.emplace_back(guarded, t);
    } catch (...) {
      break;
    }
    started = t;
  }
  guarded(0);
  for (int t = started + 1; t < n; ++t) guarded(t);
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace detail
}  // namespace tidu
