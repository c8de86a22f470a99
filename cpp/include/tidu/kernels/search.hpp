// tidu/kernels/search.hpp - SearchSorted: the insertion point of each value in its sorted row
// (numpy's searchsorted; ops/search.py).  Rows a (B..., n), values v (B..., m...), int32 result
// of v's shape: for each value the count of its row's entries that sort before it (side left:
// a[i] < v; side right: a[i] <= v; numpy's order, NaN after every number).
//
// Each value is a branchless binary search (the lower_bound of "a[i] sorts before v": the range
// halves ceil(log2 n) times whatever the data, so the step sizes depend on n alone).  Values are
// taken in groups of kGroup that step together: their searches are independent, so the loads of
// one overlap the compares of the others instead of each search waiting on its own chain of
// loads.  Large searches split their values over the pool in chunks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "tidu/kernels/sorting.hpp"
#include "tidu/vm/dtype.hpp"
#include "tidu/vm/parallel.hpp"
#include "tidu/vm/program.hpp"

namespace tidu {
namespace kern {

// e sorts before v: left, e < v; right, e <= v (that is, not v < e), in numpy's order (sort_less,
// whose real compares have no branch: a search's compares are unpredictable, and the kernel's
// speed is that they never mispredict).
template <class T, bool Right>
inline bool sorts_before(T e, T v) {
  if constexpr (Right) return !sort_less<T>(v, e);
  else return sort_less<T>(e, v);
}

// half if `yes`, else 0, without a branch
inline std::int64_t step_if(bool yes, std::int64_t half) {
  return half & -static_cast<std::int64_t>(yes);
}

// kGroup searches stepping together (see above); Before is the comparison.
template <class T, std::int64_t G, class Before>
inline void search_group(const T* row, std::int64_t n, const T* v, std::int32_t* out, Before before) {
  std::int64_t base[G] = {};
  for (std::int64_t len = n; len > 1;) {
    const std::int64_t half = len >> 1;
    for (std::int64_t j = 0; j < G; ++j) base[j] += step_if(before(row[base[j] + half - 1], v[j]), half);
    len -= half;
  }
  for (std::int64_t j = 0; j < G; ++j) out[j] = static_cast<std::int32_t>(base[j] + (before(row[base[j]], v[j]) ? 1 : 0));
}

// The insertion points of m values in one sorted row of n >= 1 entries.
template <class T, bool Right>
inline void search_row(const T* row, std::int64_t n, const T* v, std::int64_t m, std::int32_t* out) {
  constexpr std::int64_t kGroup = 8;
  auto general = [](T e, T x) { return sorts_before<T, Right>(e, x); };
  std::int64_t i = 0;
  for (; i + kGroup <= m; i += kGroup) {
    if constexpr (is_float_v<T>) {
      bool nan = false;  // no NaN value in the group: one compare a step (a NaN entry of the row
      for (std::int64_t j = 0; j < kGroup; ++j) nan |= v[i + j] != v[i + j];  // is never < v)
      if (!nan) {
        if constexpr (Right) search_group<T, kGroup>(row, n, v + i, out + i, [](T e, T x) { return e <= x; });
        else search_group<T, kGroup>(row, n, v + i, out + i, [](T e, T x) { return e < x; });
        continue;
      }
    }
    search_group<T, kGroup>(row, n, v + i, out + i, general);
  }
  for (; i < m; ++i) search_group<T, 1>(row, n, v + i, out + i, general);
}

// Values per chunk of the pool's work: about 2^15 compare steps, so a search of a few thousand
// values into a short row stays on the calling thread.
inline constexpr double kSearchChunkSteps = double(1 << 15);

// SearchSorted attrs: right (0/1).  Operands: rows a, values v (validated: same dtype, v's
// leading axes are a's batch axes).
inline void run_search_sorted(const Program& p, const std::uint32_t* a, const std::int64_t* at, std::uint32_t out_slot,
                              void* y, void** ptr) {
  const Slot& rows = p.slots[a[0]];
  const std::int64_t n = p.shape(a[0])[rows.ndim - 1];
  const std::int64_t batch = n ? rows.size / n : 0;
  const std::int64_t total = p.slots[out_slot].size;
  const std::int64_t m = batch ? total / batch : 0;
  if (total == 0) return;
  std::int32_t* out = static_cast<std::int32_t*>(y);
  if (batch == 0) {  // rows of zero entries: every value goes first
    std::fill(out, out + total, std::int32_t{0});
    return;
  }
  std::int64_t steps = 1;
  while ((std::int64_t{1} << steps) <= n) ++steps;
  visit_dtype(rows.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (is_complex_v<T>) {
      throw std::runtime_error("tidu: SearchSorted has no kernel for complex values");
    } else {
      const T* r = static_cast<const T*>(ptr[a[0]]);
      const T* v = static_cast<const T*>(ptr[a[1]]);
      const bool right = at[0] != 0;
      // the values of all rows as one list of `total`, cut into chunks that may span rows
      const int threads = ::tidu::num_threads();
      const std::int64_t chunks =
          detail::chunk_count(total, static_cast<double>(steps), kSearchChunkSteps, 256, threads);
      detail::parallel_chunks(chunks, threads, [&](std::int64_t c, int) {
        std::int64_t lo = total * c / chunks;
        const std::int64_t hi = total * (c + 1) / chunks;
        while (lo < hi) {
          const std::int64_t b = lo / m, end = std::min(hi, (b + 1) * m);
          if (right) search_row<T, true>(r + b * n, n, v + lo, end - lo, out + lo);
          else search_row<T, false>(r + b * n, n, v + lo, end - lo, out + lo);
          lo = end;
        }
      });
    }
  });
}

}  // namespace kern
}  // namespace tidu
