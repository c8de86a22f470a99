// tidu/vm/dtype.hpp - the dtype table (TIDU_DTYPES: code, C++ type, numpy name) and the one visit
// over dtype codes that every kernel dispatch goes through (visit_dtype, visit_dtype_in).
// float16 and bfloat16 (TIDU_HALF_DTYPES, codes appended after the others) are storage dtypes:
// only Convert, Reshape, Constant and control flow touch them; every other instruction on them
// computes in float32 (widen.hpp rewrites it so before validation), as XLA:CPU does.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace tidu {

#define TIDU_DTYPES(X)                 \
  X(F32, float, "float32")             \
  X(F64, double, "float64")            \
  X(C64, std::complex<float>, "complex64")   \
  X(C128, std::complex<double>, "complex128") \
  X(I32, std::int32_t, "int32")        \
  X(I64, std::int64_t, "int64")        \
  X(Bool, bool, "bool")                \
  X(U32, std::uint32_t, "uint32")      \
  X(I8, std::int8_t, "int8")           \
  X(I16, std::int16_t, "int16")        \
  X(U8, std::uint8_t, "uint8")         \
  X(U16, std::uint16_t, "uint16")      \
  X(U64, std::uint64_t, "uint64")

// 16-bit floats, stored as their bits (no kernel is instantiated for them; see above).
#define TIDU_HALF_DTYPES(X)            \
  X(F16, std::uint16_t, "float16")     \
  X(BF16, std::uint16_t, "bfloat16")

enum class DType : std::uint8_t {
#define TIDU_DT_ENUM(name, type, str) name,
  TIDU_DTYPES(TIDU_DT_ENUM)
  TIDU_HALF_DTYPES(TIDU_DT_ENUM)
#undef TIDU_DT_ENUM
      kCount
};

inline bool is_half_dtype(DType d) { return d == DType::F16 || d == DType::BF16; }

inline const char* dtype_name(DType d) {
  static const char* const names[] = {
#define TIDU_DT_NAME(name, type, str) str,
      TIDU_DTYPES(TIDU_DT_NAME)
      TIDU_HALF_DTYPES(TIDU_DT_NAME)
#undef TIDU_DT_NAME
  };
  auto i = static_cast<unsigned>(d);
  return i < static_cast<unsigned>(DType::kCount) ? names[i] : "?";
}

inline std::size_t dtype_size(DType d) {
  switch (d) {
#define TIDU_DT_SIZE(name, type, str) \
  case DType::name:                   \
    return sizeof(type);
    TIDU_DTYPES(TIDU_DT_SIZE)
    TIDU_HALF_DTYPES(TIDU_DT_SIZE)
#undef TIDU_DT_SIZE
    default:
      return 0;
  }
}

// The integer dtypes (bool is not one): what bitwise ops, shifts and integer kernels take.
inline bool is_integer_dtype(DType d) {
  switch (d) {
    case DType::I8: case DType::I16: case DType::I32: case DType::I64:
    case DType::U8: case DType::U16: case DType::U32: case DType::U64:
      return true;
    default:
      return false;
  }
}

// The C++ types of a set of dtypes, for visit_dtype_in.
template <class... Ts>
struct DTypeSet {
  template <class T>
  static constexpr bool contains = (std::is_same_v<T, Ts> || ...);
};
using InexactTypes = DTypeSet<float, double, std::complex<float>, std::complex<double>>;
using IndexTypes = DTypeSet<std::int32_t, std::int64_t>;

// Calls f(T{}) with T the C++ type of dtype d and returns what f returns; throws on a code outside
// TIDU_DTYPES (float16 and bfloat16 included: they have no kernels of their own).  The one switch over dtype codes: callers dispatch once per instruction, outside
// the kernels' loops, so its cost is one jump.
template <class F>
inline decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
#define TIDU_VISIT_DTYPE(name, type, str) \
  case DType::name:                       \
    return f(type{});
    TIDU_DTYPES(TIDU_VISIT_DTYPE)
#undef TIDU_VISIT_DTYPE
    default:
      throw std::runtime_error(std::string("tidu: no kernel for dtype ") + dtype_name(d));
  }
}

// visit_dtype over the dtypes of Set only: f(T{}) for those, otherwise() for every other dtype.
template <class Set, class F, class G>
inline decltype(auto) visit_dtype_in(DType d, F&& f, G&& otherwise) {
  if (is_half_dtype(d)) return otherwise();  // no kernel is instantiated for them
  return visit_dtype(d, [&](auto t) -> decltype(auto) {
    if constexpr (Set::template contains<decltype(t)>)
      return f(t);
    else
      return otherwise();
  });
}

}  // namespace tidu
