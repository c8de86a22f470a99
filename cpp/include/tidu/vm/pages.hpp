// tidu/vm/pages.hpp - large scratch blocks (an evaluation's arena, a convolution's patch buffer)
// whose pages are mapped in one system call when they are made.
//
// A first evaluation writes memory fresh from the kernel, and each 4 KiB page costs a fault and
// a zeroed page on its first touch: LeNet's training step (bench/conv_first.py) touches a 7 MB
// arena and a 5 MB patch buffer per thread, ~8 ms of its first evaluation's ~25 ms of CPU time.
// A block of kPrefaultBytes or more is populated with madvise(MADV_POPULATE_WRITE) (Linux 5.14;
// elsewhere, or where it is refused, pages fault on first touch as before): the same zeroed
// pages without a trap per page, 2.5 ms instead of 3.9 ms for 8 MB on the machine of
// docs/conv.md's figures.  (Transparent huge pages, MADV_HUGEPAGE, were 4x cheaper when they
// came at once but, on that VM, made 3 first calls in 6 slower by 1.5-2.5x: not used.)  Smaller
// blocks come from malloc untouched.  Contents are not cleared (callers write before they read).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "tidu/vm/parallel.hpp"
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace tidu {

constexpr std::size_t kPrefaultBytes = std::size_t{1} << 20;

namespace detail {

inline std::uintptr_t page_bytes() {
  static const std::uintptr_t page = [] {
#if defined(__linux__)
    const long n = sysconf(_SC_PAGESIZE);
    return static_cast<std::uintptr_t>(n > 0 ? n : 4096);
#else
    return std::uintptr_t{4096};
#endif
  }();
  return page;
}

// Maps the whole pages of [p, p + bytes) (advice only: where refused, pages fault on first
// touch).  From 4 MiB up the range is cut into pieces of 1 MiB or more (at most 4 per thread)
// taken by tidu's threads: the kernel zeroes each thread's pages in parallel (LeNet's 6 MB
// arena: 2.1 ms on one thread), and a worker that starts late takes fewer pieces.
inline void populate(void* p, std::size_t bytes) {
#if defined(__linux__)
  const std::uintptr_t page = page_bytes();
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t lo = (at + page - 1) & ~(page - 1), hi = (at + bytes) & ~(page - 1);
  if (hi <= lo) return;
  constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE (older headers lack the name)
  const std::uintptr_t pages = (hi - lo) / page;
  const int threads = num_threads();
  const std::int64_t pieces =
      std::min<std::int64_t>(static_cast<std::int64_t>((hi - lo) >> 20), std::int64_t{4} * threads);
  if (hi - lo < (std::uintptr_t{4} << 20) || threads <= 1) {
    (void)madvise(reinterpret_cast<void*>(lo), hi - lo, kPopulateWrite);
    return;
  }
  parallel_chunks(pieces, threads, [&](std::int64_t c, int) {
    const std::uintptr_t a = lo + pages * static_cast<std::uintptr_t>(c) / pieces * page;
    const std::uintptr_t b = lo + pages * static_cast<std::uintptr_t>(c + 1) / pieces * page;
    if (b > a) (void)madvise(reinterpret_cast<void*>(a), b - a, kPopulateWrite);
  });
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace detail

inline void* big_alloc(std::size_t bytes) {
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (p == nullptr) throw std::bad_alloc();
  if (bytes >= kPrefaultBytes) detail::populate(p, bytes);
  return p;
}

struct BigFree {
  void operator()(void* p) const noexcept { std::free(p); }
};

// n elements of T (trivially copyable), uninitialised.
template <class T>
using BigBlock = std::unique_ptr<T[], BigFree>;

template <class T>
BigBlock<T> big_block(std::size_t n) {
  if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_alloc();
  return BigBlock<T>(static_cast<T*>(big_alloc(n * sizeof(T))));
}

// A thread's scratch buffer that only grows (to the largest size asked), without copying or
// clearing what it held.  On Linux it is a range of kReserve bytes of address space mapped once
// (no memory until touched) whose pages are populated as the size grows, only the new part each
// time: LeNet's step grew the calling thread's from 1.0 to 1.9 to 2.4 MB on its first call, and
// each new block was mapped whole (5.3 MB for 2.4).  A size beyond the range, or a range that
// cannot be mapped, takes a block of its own as before.
template <class T>
struct GrowBuffer {
  static constexpr std::size_t kReserve = std::size_t{64} << 20;
  BigBlock<T> block;
  std::size_t size = 0;
#if defined(__linux__)
  void* range = nullptr;
  bool tried = false;
  ~GrowBuffer() {
    if (range != nullptr) munmap(range, kReserve);
  }
#endif
  T* get(std::size_t n) {
    if (n <= size) return block ? block.get() : static_cast<T*>(reserved());
#if defined(__linux__)
    if (n <= kReserve / sizeof(T) && !block) {
      if (!tried) {
        tried = true;
        void* r = mmap(nullptr, kReserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        range = r == MAP_FAILED ? nullptr : r;
      }
      if (range != nullptr) {
        if (n * sizeof(T) >= kPrefaultBytes)
          detail::populate(static_cast<char*>(range) + size * sizeof(T), (n - size) * sizeof(T));
        size = n;
        return static_cast<T*>(range);
      }
    }
#endif
    block.reset();  // the old block goes first: no second copy held while the new one is made
    size = 0;
    block = big_block<T>(n);
    size = n;
    return block.get();
  }

 private:
  void* reserved() const {
#if defined(__linux__)
    return range;
#else
    return nullptr;
#endif
  }
};

}  // namespace tidu
