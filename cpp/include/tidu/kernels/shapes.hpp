// tidu/kernels/shapes.hpp - kernels of the numpy shape surface (docs/numpy.md): Rev, the reversal of
// chosen axes (StableHLO reverse), as a strided copy with negative strides.
//
// A reversal moves elements without reading them, so it dispatches on the element width only
// (1, 4, 8 or 16 bytes), not on the dtype: one instantiation serves float64 and int64 alike.
#pragma once

#include <complex>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "tidu/kernels/elementwise.hpp"
#include "tidu/vm/program.hpp"

namespace tidu {
namespace kern {

// y = x reversed along the `n` axes listed in dims (validated: distinct, in range).
template <class T>
inline void rev(const T* x, const std::int64_t* shape, std::uint32_t ndim, const std::int64_t* dims, std::int64_t n,
                T* y) {
  std::int64_t str[16], base = 0;
  row_major_strides(shape, ndim, str);
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t d = dims[k];
    if (shape[d] > 0) base += (shape[d] - 1) * str[d];  // start at the last element of axis d ...
    str[d] = -str[d];                                  // ... and walk it backwards
  }
  gather<T>(x, base, shape, str, ndim, y);
}

inline void run_shape(Op op, const Program& p, const std::uint32_t* a, const std::int64_t* at, DType dt, void* y,
                      void** ptr) {
  if (op != Op::Rev) throw std::runtime_error(std::string("tidu: no shape kernel for opcode ") + op_name(op));
  const Slot& x0 = p.slots[a[0]];  // attrs: n, dims...
  const std::int64_t* shape = p.shape(a[0]);
  switch (dtype_size(dt)) {
    case 1: rev(static_cast<const std::uint8_t*>(ptr[a[0]]), shape, x0.ndim, at + 1, at[0], static_cast<std::uint8_t*>(y)); return;
    case 4: rev(static_cast<const std::uint32_t*>(ptr[a[0]]), shape, x0.ndim, at + 1, at[0], static_cast<std::uint32_t*>(y)); return;
    case 8: rev(static_cast<const std::uint64_t*>(ptr[a[0]]), shape, x0.ndim, at + 1, at[0], static_cast<std::uint64_t*>(y)); return;
    case 16:
      rev(static_cast<const std::complex<double>*>(ptr[a[0]]), shape, x0.ndim, at + 1, at[0],
          static_cast<std::complex<double>*>(y));
      return;
    default: throw std::runtime_error("tidu: Rev of an unknown dtype");
  }
}

}  // namespace kern
}  // namespace tidu
