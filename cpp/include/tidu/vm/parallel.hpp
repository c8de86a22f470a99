// tidu/vm/parallel.hpp - the threads tidu uses: one persistent pool, started lazily, that helps
// the calling thread through a loop of chunks taken one at a time.
//
// Policy (docs/evaluator.md, "Threads"):
// - tidu::num_threads() threads at most work on one loop, the caller included: TIDU_NUM_THREADS in
//   the environment when the pool is first used, else tidu::set_num_threads(n), else the cores this
//   process may run on (its CPU affinity).  The BLAS runs single-threaded (the Python package sets
//   OpenBLAS to one thread): large products are split by tidu, so the two never oversubscribe.
// - A loop is cut into chunks that participants take from an atomic counter, the calling thread
//   too; a worker that is not scheduled (its core busy with other work) takes fewer chunks, or
//   none, and the caller finishes the rest.  A call never waits for more than the chunk a
//   descheduled worker already holds.
// - Workers are started on the first parallel loop and kept, sleeping on a condition variable (no
//   spinning, so an idle pool costs no CPU); a loop from inside a worker, or while another thread's
//   loop holds the pool, runs on the calling thread alone, so nesting and concurrent evaluations
//   never deadlock.
// - A loop that took longer than the caller alone would have (a worker holding a chunk was not
//   scheduled) makes the pool let callers run alone for a back-off that doubles while such loops
//   repeat (ThreadPool::stalled), so a core kept busy by other work costs an occasional slow
//   loop, not a slow loop every time, and an overloaded machine runs single-threaded.
// - After fork() the child starts a fresh pool on its first loop (the parent's workers do not
//   exist there); at exit the workers finish their current chunk and are joined.
// - A thread that cannot be started (the process is out of threads or memory) leaves the work
//   to the others; the first exception a chunk throws stops the loop and is rethrown to the caller.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif
#if !defined(_WIN32)
#include <pthread.h>
#endif

namespace tidu {
namespace detail {

// The cores this process may run on (its affinity mask where the system has one; at least 1).
inline int available_cores() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  return static_cast<int>(std::max(std::thread::hardware_concurrency(), 1u));
}

inline int thread_cap() { return 256; }

// The configured count (0: not read yet); TIDU_NUM_THREADS is read once, on first use.
inline std::atomic<int>& thread_setting() {
  static std::atomic<int> n{0};
  return n;
}

inline int default_threads() {
  if (const char* env = std::getenv("TIDU_NUM_THREADS")) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 1) return static_cast<int>(std::min<long>(v, thread_cap()));
  }
  return std::min(available_cores(), thread_cap());
}

}  // namespace detail

// How many threads one parallel loop may use, the caller's included (>= 1).
inline int num_threads() {
  int n = detail::thread_setting().load(std::memory_order_relaxed);
  if (n == 0) {
    n = detail::default_threads();
    int expected = 0;
    if (!detail::thread_setting().compare_exchange_strong(expected, n)) n = expected;
  }
  return n;
}

// Sets that count (capped at 256); n <= 0 restores the default (TIDU_NUM_THREADS, else the
// available cores).  1 makes every evaluation single-threaded.  Takes effect at the next loop.
inline void set_num_threads(int n) {
  detail::thread_setting().store(n <= 0 ? detail::default_threads() : std::min(n, detail::thread_cap()),
                                 std::memory_order_relaxed);
}

namespace detail {

// Kept for the kernels' thread counts: the threads a loop may use.
inline int cores() { return num_threads(); }

// At most this many threads per eval_batch (a request for more is capped, never refused).
inline int max_threads() { return std::min(4 * cores(), thread_cap()); }

class ThreadPool {
 public:
  // The process's pool (a fresh one in a child after fork; never destroyed, so a loop still
  // running on a daemon thread at exit has a pool to finish on).
  static ThreadPool& get() {
    ThreadPool* p = current().load(std::memory_order_acquire);
    if (p) return *p;
    auto* made = new ThreadPool();
    if (!current().compare_exchange_strong(p, made, std::memory_order_acq_rel)) {
      delete made;
      return *p;
    }
    static const bool hooks = [] {
#if !defined(_WIN32)
      // The child of a fork has only the forking thread: it forgets the parent's pool (leaked:
      // its mutex may be held and its thread handles are of threads that do not exist there).
      pthread_atfork(nullptr, nullptr, [] { current().store(nullptr, std::memory_order_release); });
#endif
      std::atexit([] {
        if (ThreadPool* q = current().load(std::memory_order_acquire)) q->shutdown();
      });
      return true;
    }();
    (void)hooks;
    return *made;
  }

  // body(chunk, worker) for every chunk in [0, chunks), worker in [0, threads): the caller is
  // worker 0 and takes chunks too; at most threads - 1 pool workers help.
  template <class F>
  void run(std::int64_t chunks, int threads, F& body) {
    Job job;
    job.call = [](void* ctx, std::int64_t c, int w) { (*static_cast<F*>(ctx))(c, w); };
    job.ctx = const_cast<void*>(static_cast<const void*>(&body));
    job.chunks = chunks;
    job.helpers = static_cast<int>(std::min<std::int64_t>(threads - 1, chunks - 1));
    bool posted = false;
    const std::int64_t start = now_ns();
    if (job.helpers > 0 && !in_worker() && !stopping_.load(std::memory_order_relaxed) &&
        start >= quiet_after_.load(std::memory_order_relaxed)) {
      std::unique_lock<std::mutex> lk(m_);
      if (job_ == nullptr) {
        grow(job.helpers);
        if (!workers_.empty()) {
          job_ = &job;
          ++generation_;
          posted = true;
        }
      }
    }
    if (posted) work_cv_.notify_all();
    const std::int64_t mine = work(job, 0);
    if (posted) {
      const std::int64_t own = now_ns();
      {
        std::unique_lock<std::mutex> lk(m_);
        job_ = nullptr;  // no worker joins from now on; wait for those inside
        done_cv_.wait(lk, [&] { return job.active == 0; });
      }
      stalled(start, own, now_ns(), mine, chunks);
    } else if (job.helpers > 0) {
      inline_loops_.fetch_add(1, std::memory_order_relaxed);
    }
    if (job.error) std::rethrow_exception(job.error);
  }

  struct Stats {
    std::int64_t posted, inline_loops, stalls, backoff_ns, loop_ns, wait_ns;
  };
  // Loops posted to the pool, loops run on the caller alone (pool busy, nested or backing off),
  // stalls seen, the current back-off (see stalled()), and the time posted loops took in all and
  // the part of it the caller spent waiting for workers.
  Stats stats() const {
    return {posted_.load(), inline_loops_.load(), stalls_.load(), backoff_.load(), loop_ns_.load(), wait_ns_.load()};
  }

  // Pool workers started so far (for tests and docs: they are started on demand, once).
  int workers() {
    std::lock_guard<std::mutex> lk(m_);
    return static_cast<int>(workers_.size());
  }

 private:
  struct Job {
    void (*call)(void*, std::int64_t, int) = nullptr;
    void* ctx = nullptr;
    std::int64_t chunks = 0;
    std::atomic<std::int64_t> next{0};
    int helpers = 0;  // pool workers that may join
    int joined = 0;   // guarded by m_
    int active = 0;   // workers inside, guarded by m_
    std::atomic<bool> failed{false};
    std::mutex error_m;
    std::exception_ptr error;
  };

  static std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
  }

  // A stall: the loop took longer than the caller alone would have (its own chunks' pace times
  // all chunks) by over 50 us, because a worker holding a chunk was not scheduled (its core busy
  // with other work, or more runnable threads than cores).  Loops then run on the caller alone
  // for a back-off that doubles with each stall in a row (1 ms up to 1 s) and halves with each
  // loop the workers sped up, so a busy core costs one slow loop now and then, not every one.
  void stalled(std::int64_t start, std::int64_t own, std::int64_t end, std::int64_t mine, std::int64_t chunks) {
    posted_.fetch_add(1, std::memory_order_relaxed);
    loop_ns_.fetch_add(end - start, std::memory_order_relaxed);
    wait_ns_.fetch_add(end - own, std::memory_order_relaxed);
    const double alone = mine > 0 ? static_cast<double>(own - start) * static_cast<double>(chunks) / static_cast<double>(mine)
                                  : static_cast<double>(end - start);
    const std::int64_t b = backoff_.load(std::memory_order_relaxed);
    if (static_cast<double>(end - start) > alone && end - own > 50000) {
      stalls_.fetch_add(1, std::memory_order_relaxed);
      const std::int64_t next = std::min<std::int64_t>(b < 1000000 ? 1000000 : 2 * b, 1000000000);
      backoff_.store(next, std::memory_order_relaxed);
      quiet_after_.store(end + next, std::memory_order_relaxed);
    } else {
      backoff_.store(b / 2, std::memory_order_relaxed);
    }
  }

  static std::atomic<ThreadPool*>& current() {
    static std::atomic<ThreadPool*> p{nullptr};
    return p;
  }
  static bool& in_worker() {
    static thread_local bool w = false;
    return w;
  }

  // Takes chunks until none is left, the loop failed or (for a pool worker) the pool stops;
  // returns how many it took.
  std::int64_t work(Job& j, int worker) {
    const bool helper = worker != 0;
    for (std::int64_t done = 0;; ++done) {
      if (j.failed.load(std::memory_order_relaxed)) return done;
      if (helper && stopping_.load(std::memory_order_relaxed)) return done;
      const std::int64_t c = j.next.fetch_add(1, std::memory_order_relaxed);
      if (c >= j.chunks) return done;
      try {
        j.call(j.ctx, c, worker);
      } catch (...) {
        std::lock_guard<std::mutex> lk(j.error_m);
        if (!j.error) j.error = std::current_exception();
        j.failed.store(true, std::memory_order_relaxed);
      }
    }
  }

  // Starts workers up to `want` (under m_); a thread that cannot be started is done without.
  void grow(int want) {
    while (static_cast<int>(workers_.size()) < want) {
      try {
        workers_.emplace_back([this] { loop(); });
      } catch (...) {
        return;
      }
    }
  }

  void loop() {
    in_worker() = true;
    std::unique_lock<std::mutex> lk(m_);
    std::uint64_t seen = generation_;
    for (;;) {
      work_cv_.wait(lk, [&] {
        return stopping_.load(std::memory_order_relaxed) ||
               (job_ != nullptr && generation_ != seen && job_->joined < job_->helpers);
      });
      if (stopping_.load(std::memory_order_relaxed)) return;
      seen = generation_;
      Job& j = *job_;
      const int id = ++j.joined;
      ++j.active;
      lk.unlock();
      work(j, id);
      lk.lock();
      if (--j.active == 0) done_cv_.notify_all();
    }
  }

  // At exit: workers finish the chunk they hold (the callers do the rest) and are joined.
  void shutdown() {
    std::vector<std::thread> ts;
    {
      std::lock_guard<std::mutex> lk(m_);
      stopping_.store(true, std::memory_order_relaxed);
      ts.swap(workers_);
    }
    work_cv_.notify_all();
    for (auto& t : ts)
      if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
  }

  std::mutex m_;
  std::condition_variable work_cv_, done_cv_;
  Job* job_ = nullptr;
  std::uint64_t generation_ = 0;
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::int64_t> quiet_after_{0}, backoff_{0};  // see stalled()
  std::atomic<std::int64_t> posted_{0}, inline_loops_{0}, stalls_{0}, loop_ns_{0}, wait_ns_{0};
};

// Runs body(chunk, worker) for every chunk in [0, chunks) on up to `threads` threads, the
// caller's included; `worker` (in [0, threads)) names the thread, for per-thread scratch.  Chunks
// are taken dynamically: cut a loop into several chunks per thread so a thread that is not
// scheduled costs at most one chunk.
template <class F>
inline void parallel_chunks(std::int64_t chunks, int threads, F&& body) {
  if (chunks <= 0) return;
  threads = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(threads, chunks)));
  if (threads == 1) {
    for (std::int64_t c = 0; c < chunks; ++c) body(c, 0);
    return;
  }
  ThreadPool::get().run(chunks, threads, body);
}

// The chunk count for `units` independent units of `unit_work` each: chunks of about
// `chunk_work` (and at least `min_units` units), at most `per_thread` per thread.
inline std::int64_t chunk_count(std::int64_t units, double unit_work, double chunk_work, std::int64_t min_units,
                                int threads, std::int64_t per_thread = 8) {
  if (units <= 1) return std::max<std::int64_t>(units, 0);
  const double by_work = unit_work * static_cast<double>(units) / chunk_work;
  std::int64_t n = static_cast<std::int64_t>(std::min(by_work, 1e9));
  n = std::min<std::int64_t>({n, units / std::max<std::int64_t>(min_units, 1), per_thread * threads});
  return std::max<std::int64_t>(n, 1);
}

// Runs body(t) for every t in [0, n), each once, on up to n threads (the caller's included).
template <class F>
inline void parallel_for(int n, F&& body) {
  auto each = [&](std::int64_t c, int) { body(static_cast<int>(c)); };
  parallel_chunks(n, n, each);
}

}  // namespace detail
}  // namespace tidu
