// tidu/kernels/select_window.hpp - SelectAndGatherAdd and SelectAndScatterAdd: the derivative of
// max / min pooling (ReduceWindowMax / Min) as one loop each, where it was a patch convolution, an
// ArgMax, a one-hot mask and a second patch convolution.
//
// Of each window of the operand x (strides, low / high padding; no dilation) one element is
// selected: the first in window order (row-major over the window's axes) that no later element
// replaces, where a later v replaces the current c unless c >= v (max) or c <= v (min): XLA's
// select-and-scatter with a `ge` / `le` select, which is what jax's max-pool gradient runs (so
// ties go to the first element).  Padding takes part as -inf (max) / +inf (min), as jax pads
// the operand with them before XLA's select-and-scatter: any later element but -inf (+inf)
// replaces it, it replaces a NaN, and selected it selects nothing.  Gather: y[o] = t[sel(o)]
// (0 where nothing is selected), the tangent of the pooling.  Scatter: r = 0, r[sel(o)] += s[o],
// its transpose (the gradient).
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "tidu/kernels/elementwise.hpp"
#include "tidu/vm/opcodes.hpp"
#include "tidu/vm/program.hpp"

namespace tidu {
namespace kern {

// One window element over n outputs side by side: v = x[j * s] replaces output j's best unless
// that holds (code != -1) and is >= v (max) or <= v (min), as in the scalar walk; branch-free.
template <class T, bool MAX>
inline void select_pass(const T* __restrict x, std::int64_t s, std::int64_t n, T* __restrict bv,
                        std::int32_t* __restrict code, std::int32_t c) {
  for (std::int64_t j = 0; j < n; ++j) {
    const T v = x[j * s];
    const bool keep = (code[j] != -1) & (MAX ? bv[j] >= v : bv[j] <= v);
    code[j] = keep ? code[j] : c;
    bv[j] = keep ? bv[j] : v;
  }
}

// Padding's value in the walk: -inf for max, +inf for min (jax pads the operand with them before
// XLA's select-and-scatter, so a padding element takes part like any other and selects nothing).
template <class T, bool MAX>
constexpr T select_padding_value() {
  return MAX ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
}

// One padding element over n outputs: it replaces the best so far unless that holds and is >= it
// (max; a NaN is replaced) or <= it (min).
template <class T, bool MAX>
inline void select_pad(std::int64_t n, T* __restrict bv, std::int32_t* __restrict code) {
  const T p = select_padding_value<T, MAX>();
  for (std::int64_t j = 0; j < n; ++j) {
    const bool keep = (code[j] != -1) & (MAX ? bv[j] >= p : bv[j] <= p);
    code[j] = keep ? code[j] : -2;
    bv[j] = keep ? bv[j] : p;
  }
}

// f(o, i) for every output o (row-major over ys) in the output rows [r0, r1) (a row: the outputs
// along the last axis) with the flat index i into x of its selected element, or -1.  attrs: n,
// window..., n, strides..., n, low..., n, high..., select max.  nd >= 1 and no output axis of
// size 0 (select_window handles those).
template <class T, bool MAX, class F>
inline void window_select(const T* x, const std::int64_t* xs, std::uint32_t nd,
                          const std::int64_t* at, const std::int64_t* ys, std::int64_t r0,
                          std::int64_t r1, F&& f) {
  const std::int64_t n = at[0];
  const std::int64_t *wd = at + 1, *st = wd + n + 1, *lo = st + n + 1;
  std::int64_t xstr[16];
  row_major_strides(xs, nd, xstr);
  // per axis: (window index k, output index p) -> offset into x of that axis's coordinate, or -1
  std::vector<std::int64_t> tabs;
  std::int64_t toff[16];
  for (std::uint32_t d = 0; d < nd; ++d) {
    toff[d] = static_cast<std::int64_t>(tabs.size());
    for (std::int64_t k = 0; k < wd[d]; ++k)
      for (std::int64_t p = 0; p < ys[d]; ++p) {
        const std::int64_t q = p * st[d] + k - lo[d];
        tabs.push_back(q < 0 || q >= xs[d] ? -1 : q * xstr[d]);
      }
  }
  const std::uint32_t last = nd - 1;
  const std::int64_t pl = ys[last], kl = wd[last];
  const std::int64_t* tl = tabs.data() + toff[last];
  std::int64_t win_outer = 1;
  for (std::uint32_t d = 0; d < last; ++d) win_outer *= wd[d];
  if (win_outer * kl > INT32_MAX) throw std::runtime_error("tidu: select-and-scatter window of over 2^31 elements");
  std::vector<std::int64_t> bases(static_cast<std::size_t>(win_outer));
  std::vector<StepRun> runs;
  for (std::int64_t k = 0; k < kl; ++k) runs.push_back(step_run(tl + k * pl, pl));
  std::vector<std::int32_t> code(static_cast<std::size_t>(pl));
  // a window element's number c = w * kl + k -> its table row (the same for every output row) and
  // its window row's base (per output row, below): no division per output
  std::vector<std::int64_t> code_base(static_cast<std::size_t>(win_outer * kl)),
      code_row(static_cast<std::size_t>(win_outer * kl));
  for (std::int64_t c = 0; c < win_outer * kl; ++c) code_row[c] = (c % kl) * pl;
  std::vector<T> bv(static_cast<std::size_t>(pl));
  std::int64_t pidx[16] = {0};
  detail::unravel(r0, ys, last, pidx);
  for (std::int64_t o = r0; o < r1; ++o) {
    // the offsets of this output row's window rows (outer window axes), -1 where in padding
    std::int64_t kidx[16] = {0};
    for (std::int64_t w = 0; w < win_outer; ++w) {
      std::int64_t base = 0;
      for (std::uint32_t d = 0; d < last; ++d) {
        const std::int64_t v = tabs[toff[d] + kidx[d] * ys[d] + pidx[d]];
        if (v < 0) {
          base = -1;
          break;
        }
        base += v;
      }
      bases[w] = base;
      for (std::uint32_t d = last; d-- > 0;) {
        if (++kidx[d] < wd[d]) break;
        kidx[d] = 0;
      }
    }
    // the row's outputs side by side: window element by window element (the scalar order), each
    // a branch-free pass over the outputs that read x elements a fixed stride apart (pooling);
    // per output the best value so far and its window element's number (w * kl + k; -1: none
    // yet, -2: padding, which selects nothing)
    std::fill(code.begin(), code.end(), std::int32_t{-1});
    T* bvp = bv.data();
    std::int32_t* cp = code.data();
    for (std::int64_t w = 0; w < win_outer; ++w) {
      const std::int64_t base = bases[w];
      for (std::int64_t k = 0; k < kl; ++k) {
        if (base < 0) {  // a window row in padding, for every output of the row
          select_pad<T, MAX>(pl, bvp, cp);
          continue;
        }
        const std::int64_t* tk = tl + k * pl;
        const StepRun r = runs[k];
        const std::int32_t c = static_cast<std::int32_t>(w * kl + k);
        if (r.ok) {
          select_pad<T, MAX>(r.lo, bvp, cp);
          if (r.hi > r.lo)
            select_pass<T, MAX>(x + base + tk[r.lo], r.s, r.hi - r.lo, bvp + r.lo, cp + r.lo, c);
          select_pad<T, MAX>(pl - r.hi, bvp + r.hi, cp + r.hi);
        } else {
          for (std::int64_t j = 0; j < pl; ++j) {
            const std::int64_t t = tk[j];
            const T v = t < 0 ? select_padding_value<T, MAX>() : x[base + t];
            if (cp[j] == -1 || !(MAX ? bvp[j] >= v : bvp[j] <= v)) {
              cp[j] = t < 0 ? -2 : c;
              bvp[j] = v;
            }
          }
        }
      }
    }
    for (std::int64_t w = 0, c = 0; w < win_outer; ++w)
      for (std::int64_t k = 0; k < kl; ++k, ++c) code_base[c] = bases[w];
    for (std::int64_t j = 0; j < pl; ++j) {
      const std::int32_t c = code[j];
      f(o * pl + j, c < 0 ? -1 : code_base[c] + tl[code_row[c] + j]);
    }
    for (std::uint32_t d = last; d-- > 0;) {
      if (++pidx[d] < ys[d]) break;
      pidx[d] = 0;
    }
  }
}

// Gather: operands (t, x), y of the window output's shape.  Scatter: operands (s, x), y of x's
// shape.  The two share the selection; `scatter` picks the direction of the data.  Chunks of
// output rows run on tidu's threads: any rows for the gather (each output is written once); for
// the scatter whole planes, the leading axes that no window crosses (window 1, stride 1, no
// padding: batch and features in pooling), so two chunks never add into one element of y.
template <class T, bool MAX>
inline void select_window(bool scatter, const T* src, const T* x, const std::int64_t* xs,
                          std::uint32_t nd, const std::int64_t* at, const std::int64_t* ys, T* y) {
  const std::int64_t n = at[0];
  const std::int64_t *wd = at + 1, *st = wd + n + 1, *lo = st + n + 1, *hi = lo + n + 1;
  std::int64_t xsize = 1, out_size = 1, win = 1;
  for (std::uint32_t d = 0; d < nd; ++d) {
    xsize *= xs[d];
    out_size *= ys[d];
    win *= wd[d];
  }
  if (scatter && (nd == 0 || out_size == 0)) std::fill(y, y + xsize, T(0));
  if (out_size == 0) return;
  if (nd == 0) {
    y[0] = src[0];
    return;
  }
  const std::int64_t pl = ys[nd - 1], rows = out_size / pl;
  const double row_steps = static_cast<double>(pl * win);
  if (scatter) {
    std::uint32_t np = 0;
    while (np + 1 < nd && wd[np] == 1 && st[np] == 1 && lo[np] == 0 && hi[np] == 0 && ys[np] == xs[np]) ++np;
    std::int64_t planes = 1;
    for (std::uint32_t d = 0; d < np; ++d) planes *= ys[d];
    const std::int64_t rpp = rows / planes, xpp = xsize / planes;
    const std::int64_t chunks = window_chunks(planes, row_steps * static_cast<double>(rpp));
    detail::parallel_chunks(chunks, num_threads(), [&](std::int64_t c, int) {
      const std::int64_t p0 = planes * c / chunks, p1 = planes * (c + 1) / chunks;
      std::fill(y + p0 * xpp, y + p1 * xpp, T(0));
      window_select<T, MAX>(x, xs, nd, at, ys, p0 * rpp, p1 * rpp, [&](std::int64_t o, std::int64_t i) {
        if (i >= 0) y[i] += src[o];
      });
    });
  } else {
    const std::int64_t chunks = window_chunks(rows, row_steps);
    detail::parallel_chunks(chunks, num_threads(), [&](std::int64_t c, int) {
      window_select<T, MAX>(x, xs, nd, at, ys, rows * c / chunks, rows * (c + 1) / chunks,
                            [&](std::int64_t o, std::int64_t i) { y[o] = i >= 0 ? src[i] : T(0); });
    });
  }
}

inline void run_select_window(Op op, const Program& p, const std::uint32_t* a, std::uint32_t out,
                              const std::int64_t* at, DType dt, void* y, void** ptr) {
  const bool scatter = op == Op::SelectAndScatterAdd;
  const std::int64_t* xs = p.shape(a[1]);
  const std::int64_t* ys = scatter ? p.shape(a[0]) : p.shape(out);  // the window output's shape
  const std::uint32_t nd = p.slots[a[1]].ndim;
  const bool mx = at[4 * (at[0] + 1)] != 0;
  switch (dt) {
#define TIDU_SW(code, type)                                                             \
  case DType::code: {                                                                   \
    const type* s = static_cast<const type*>(ptr[a[0]]);                                \
    const type* x = static_cast<const type*>(ptr[a[1]]);                                \
    if (mx)                                                                             \
      select_window<type, true>(scatter, s, x, xs, nd, at, ys, static_cast<type*>(y));  \
    else                                                                                \
      select_window<type, false>(scatter, s, x, xs, nd, at, ys, static_cast<type*>(y)); \
    return;                                                                             \
  }
    TIDU_SW(F32, float)
    TIDU_SW(F64, double)
#undef TIDU_SW
    default:
      throw std::runtime_error("tidu: select-and-scatter of an unsupported dtype");
  }
}

}  // namespace kern
}  // namespace tidu
