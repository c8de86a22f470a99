// tidu/graph/flat_map.hpp - open-addressing hash map from uint32 keys to uint32 values.
//
// The graph core keys almost everything by dense 32-bit ids; this map keeps such look-ups at one
// or two cache lines with no per-entry allocation (std::unordered_map costs ~40 bytes per entry).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace tidu {

using Id = std::uint32_t;
inline constexpr Id kNone = 0xFFFFFFFFu;

// An allocator that backs blocks of 2 MiB or more with transparent huge pages where Linux offers
// them (madvise mode): the global interner's tables grow with everything a process ever traced,
// and each look-up lands at a random place in them, so with 4 KiB pages most look-ups also miss
// the TLB.  Smaller blocks come from operator new.
template <class T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr std::size_t kHuge = std::size_t{2} << 20;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T) / 2) throw std::bad_alloc();  // room to round
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHuge) return static_cast<T*>(::operator new(bytes));
    void* p = nullptr;
    const std::size_t whole = (bytes + kHuge - 1) / kHuge * kHuge;
    if (posix_memalign(&p, kHuge, whole) != 0) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, whole, MADV_HUGEPAGE);  // a hint: refused, the block keeps small pages
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) {
    if (n * sizeof(T) < kHuge)
      ::operator delete(p);
    else
      std::free(p);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const HugePageAllocator<U>&) const { return false; }
};

template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

// Finaliser of murmur3: spreads consecutive ids over the table.
inline std::uint64_t mix64(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

// uint32 -> uint32 map; kNone is reserved as the empty key.
class FlatMap32 {
 public:
  explicit FlatMap32(std::size_t expected = 8) { rehash(capacity_for(expected)); }

  std::size_t size() const { return size_; }

  Id get(Id key, Id fallback = kNone) const {
    std::size_t mask = keys_.size() - 1;
    for (std::size_t i = mix64(key) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == key) return vals_[i];
      if (keys_[i] == kNone) return fallback;
    }
  }

  bool contains(Id key) const { return find_slot(key) != kNone; }

  // Inserts key -> val if key is absent; returns the value now stored for key.
  Id insert(Id key, Id val) {
    if ((size_ + 1) * 2 > keys_.size()) rehash(keys_.size() * 2);
    std::size_t mask = keys_.size() - 1;
    for (std::size_t i = mix64(key) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == key) return vals_[i];
      if (keys_[i] == kNone) {
        keys_[i] = key;
        vals_[i] = val;
        ++size_;
        return val;
      }
    }
  }

  // Sets key -> val, overwriting any previous value.
  void set(Id key, Id val) {
    if ((size_ + 1) * 2 > keys_.size()) rehash(keys_.size() * 2);
    std::size_t mask = keys_.size() - 1;
    for (std::size_t i = mix64(key) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == key) {
        vals_[i] = val;
        return;
      }
      if (keys_[i] == kNone) {
        keys_[i] = key;
        vals_[i] = val;
        ++size_;
        return;
      }
    }
  }

  std::size_t memory_bytes() const { return keys_.capacity() * 8; }

 private:
  static std::size_t capacity_for(std::size_t n) {
    std::size_t c = 16;
    while (c < n * 2) c <<= 1;
    return c;
  }

  Id find_slot(Id key) const {
    std::size_t mask = keys_.size() - 1;
    for (std::size_t i = mix64(key) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == key) return static_cast<Id>(i);
      if (keys_[i] == kNone) return kNone;
    }
  }

  void rehash(std::size_t cap) {
    std::vector<Id> old_keys(cap, kNone), old_vals(cap, 0);
    old_keys.swap(keys_);
    old_vals.swap(vals_);
    size_ = 0;
    for (std::size_t i = 0; i < old_keys.size(); ++i)
      if (old_keys[i] != kNone) insert(old_keys[i], old_vals[i]);
  }

  std::vector<Id> keys_;
  std::vector<Id> vals_;
  std::size_t size_ = 0;
};

// uint32 -> uint32 map tuned for ids that arrive in (mostly) increasing runs, as values of one
// fragment or one graph do: a dense window [base, base + n) holds most keys at 4 bytes each with
// no hashing and sequential access; keys outside the window go to a FlatMap32.
class IdMap {
 public:
  explicit IdMap(std::size_t expected = 8) : sparse_(8) { dense_.reserve(expected); }

  Id get(Id key, Id fallback = kNone) const {
    std::size_t off = static_cast<std::size_t>(key) - base_;
    if (key >= base_ && off < dense_.size() && dense_[off] != kNone) return dense_[off];
    // The window may have grown over keys stored in sparse_ before it reached them.
    return sparse_.size() ? sparse_.get(key, fallback) : fallback;
  }

  bool contains(Id key) const { return get(key) != kNone; }

  // Inserts key -> val if absent (val must not be kNone); returns the value now stored.
  Id insert(Id key, Id val) {
    if (sparse_.size()) {
      Id existing = sparse_.get(key, kNone);
      if (existing != kNone) return existing;
    } else if (dense_.empty()) {
      base_ = key;
    }
    if (key >= base_) {
      std::size_t off = static_cast<std::size_t>(key) - base_;
      if (off < dense_.size()) {
        if (dense_[off] == kNone) {
          dense_[off] = val;
          ++n_dense_;
        }
        return dense_[off];
      }
      // Grow the window only while it stays at least half full.
      if (off + 1 <= 2 * (n_dense_ + 1) + 64) {
        dense_.resize(off + 1, kNone);
        dense_[off] = val;
        ++n_dense_;
        return val;
      }
    }
    return sparse_.insert(key, val);
  }

  std::size_t memory_bytes() const { return dense_.capacity() * sizeof(Id) + sparse_.memory_bytes(); }

 private:
  Id base_ = 0;
  std::vector<Id> dense_;
  std::size_t n_dense_ = 0;
  FlatMap32 sparse_;
};

// The dense window of a set of n ids: [lo, hi] with hi the largest id and lo the smallest id
// not more than slack * n + 4096 below it (lo > hi when n == 0).  A walk's values are mostly the
// ids of its recent ops, but a constant interned by an earlier program keeps its old id: such
// outliers fall below the window (and go to a hash map) instead of stretching an array over
// every id in between.
template <class It>
inline std::pair<Id, Id> dense_window(It first, It last, std::size_t slack = 8) {
  Id hi = 0, lo = kNone;
  std::size_t n = 0;
  for (It it = first; it != last; ++it, ++n)
    if (*it > hi) hi = *it;
  if (n == 0) return {kNone, 0};
  const std::uint64_t reach = static_cast<std::uint64_t>(slack) * n + 4096;
  const Id floor = hi > reach ? static_cast<Id>(hi - reach) : 0;
  for (It it = first; it != last; ++it)
    if (*it >= floor && *it < lo) lo = *it;
  return {lo, hi};
}

inline std::pair<Id, Id> dense_window_of(const std::vector<Id>& ids, std::size_t slack = 8) {
  return dense_window(ids.begin(), ids.end(), slack);
}

// A set of ids, one bit per id of a window [lo, hi] fixed up front (dense_window) and a hash set
// for the few outside it: the seen-sets of walks over a view.  Look-ups in the window are one bit
// test with no hashing, and a million ids take 128 KiB, so a walk stays in cache where a hash set
// would not.
class IdBitset {
 public:
  IdBitset() = default;
  IdBitset(Id lo, Id hi) : lo_(lo) {
    if (hi != kNone && hi >= lo) bits_.assign((static_cast<std::size_t>(hi - lo) >> 6) + 1, 0);
  }

  bool contains(Id key) const {
    std::size_t off = static_cast<std::size_t>(key) - lo_;
    if (key >= lo_ && (off >> 6) < bits_.size()) return (bits_[off >> 6] >> (off & 63)) & 1;
    return outside_.size() && outside_.contains(key);
  }

  void insert(Id key) {
    std::size_t off = static_cast<std::size_t>(key) - lo_;
    if (key >= lo_ && (off >> 6) < bits_.size())
      bits_[off >> 6] |= std::uint64_t{1} << (off & 63);
    else
      outside_.insert(key, 1);
  }

  std::size_t memory_bytes() const { return bits_.capacity() * sizeof(std::uint64_t) + outside_.memory_bytes(); }

 private:
  Id lo_ = 0;
  std::vector<std::uint64_t> bits_;
  FlatMap32 outside_;
};

// uint32 -> uint32 map with a fixed dense window [lo, hi] (an array, no hashing) and a hash map
// for keys outside it: for environments keyed by the values of one walk, whose id range is known
// before the walk starts.  The window is used only when it is at most `slack` times the expected
// number of keys (plus a constant), so a sparse range costs no more memory than hashing.
class RangeMap {
 public:
  RangeMap(Id lo, Id hi, std::size_t expected, std::size_t slack = 16)
      : sparse_(expected < 64 ? expected : 64) {
    if (hi != kNone && hi >= lo &&
        static_cast<std::size_t>(hi - lo) < slack * expected + 4096) {
      lo_ = lo;
      dense_.assign(static_cast<std::size_t>(hi - lo) + 1, kNone);
    } else {
      sparse_ = FlatMap32(expected);
    }
  }

  Id get(Id key, Id fallback = kNone) const {
    std::size_t off = static_cast<std::size_t>(key) - lo_;
    if (key >= lo_ && off < dense_.size()) return dense_[off] == kNone ? fallback : dense_[off];
    return sparse_.size() ? sparse_.get(key, fallback) : fallback;
  }

  bool contains(Id key) const { return get(key) != kNone; }

  // Sets key -> val (val != kNone), overwriting any previous value.
  void set(Id key, Id val) {
    std::size_t off = static_cast<std::size_t>(key) - lo_;
    if (key >= lo_ && off < dense_.size())
      dense_[off] = val;
    else
      sparse_.set(key, val);
  }

 private:
  Id lo_ = 0;
  std::vector<Id> dense_;
  FlatMap32 sparse_;
};

}  // namespace tidu
