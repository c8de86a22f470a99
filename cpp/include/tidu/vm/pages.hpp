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

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace tidu {

constexpr std::size_t kPrefaultBytes = std::size_t{1} << 20;

inline void* big_alloc(std::size_t bytes) {
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__)
  if (bytes >= kPrefaultBytes) {
    static const std::uintptr_t page = [] {
      const long n = sysconf(_SC_PAGESIZE);
      return static_cast<std::uintptr_t>(n > 0 ? n : 4096);
    }();
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t lo = (at + page - 1) & ~(page - 1), hi = (at + bytes) & ~(page - 1);
    constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE (older headers lack the name)
    if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, kPopulateWrite);  // advice only
  }
#endif
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
// clearing what it held.
template <class T>
struct GrowBuffer {
  BigBlock<T> block;
  std::size_t size = 0;
  T* get(std::size_t n) {
    if (n > size) {
      block.reset();  // the old block goes first: no second copy held while the new one is made
      size = 0;
      block = big_block<T>(n);
      size = n;
    }
    return block.get();
  }
};

}  // namespace tidu
