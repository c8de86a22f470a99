// tidu/vm/opcodes.hpp - the one opcode table: enum, names and (in dispatch.hpp) the dispatch are
// all generated from TIDU_OPCODES, so adding an opcode is one line here plus its kernel.
#pragma once

#include <complex>
#include <cstdint>
#include <cstring>
#include <string>

#include "tidu/vm/dtype.hpp"

namespace tidu {

// X(name, arity class): E1 unary elementwise, E2 binary elementwise, S structural.
#define TIDU_OPCODES(X) \
  X(Add, E2)                \
  X(Sub, E2)                \
  X(Mul, E2)                \
  X(Div, E2)                \
  X(Pow, E2)                \
  X(Max, E2)                \
  X(Min, E2)                \
  X(Neg, E1)                \
  X(Conj, E1)               \
  X(Exp, E1)                \
  X(Log, E1)                \
  X(Sin, E1)                \
  X(Cos, E1)                \
  X(Tanh, E1)               \
  X(Sqrt, E1)               \
  X(Rsqrt, E1)              \
  X(Expm1, E1)              \
  X(Log1p, E1)              \
  X(Sign, E1)               \
  X(StopGradient, E1)       \
  X(Real, S)                \
  X(Imag, S)                \
  X(Abs, S)                 \
  X(Compare, S)             \
  X(Select, S)              \
  X(Convert, S)             \
  X(ReduceSum, S)           \
  X(ReduceMax, S)           \
  X(BroadcastInDim, S)      \
  X(Reshape, S)             \
  X(Transpose, S)           \
  X(DotGeneral, S)          \
  X(Slice, S)               \
  X(Pad, S)                 \
  X(Concatenate, S)         \
  X(Constant, S)            \
  X(Iota, S)                \
  X(TriangularSolve, S)     \
  X(Cholesky, S)            \
  X(Gather, S)              \
  X(Scatter, S)             \
  X(DynamicSlice, S)        \
  X(DynamicUpdateSlice, S)  \
  X(ReduceMin, S)           \
  X(ReduceProd, S)          \
  X(ReduceAnd, S)           \
  X(ReduceOr, S)            \
  X(ArgMax, S)              \
  X(ArgMin, S)              \
  X(Cumsum, S)              \
  X(Cumprod, S)             \
  X(Cummax, S)              \
  X(Cummin, S)              \
  X(LinearScan, S)          \
  X(Sort, S)                \
  X(Floor, E1)              \
  X(Ceil, E1)               \
  X(Round, E1)              \
  X(Tan, E1)                \
  X(Atan, E1)               \
  X(Asin, E1)               \
  X(Acos, E1)               \
  X(Sinh, E1)               \
  X(Cosh, E1)               \
  X(Asinh, E1)              \
  X(Acosh, E1)              \
  X(Atanh, E1)              \
  X(Erf, E1)                \
  X(Erfc, E1)               \
  X(ErfInv, E1)             \
  X(Cbrt, E1)               \
  X(Logistic, E1)           \
  X(IsFinite, S)            \
  X(Rem, E2)                \
  X(Atan2, E2)              \
  X(LU, S)                  \
  X(LUPermute, S)           \
  X(Eigh, S)                \
  X(QR, S)                  \
  X(SVD, S)                 \
  X(Rev, S)                 \
  X(Scan, S)                \
  X(While, S)               \
  X(Cond, S)                \
  X(Checkpoint, S)

enum class Op : std::uint8_t {
#define TIDU_ENUM(name, kind) name,
  TIDU_OPCODES(TIDU_ENUM)
#undef TIDU_ENUM
      kCount
};

inline const char* op_name(Op op) {
  static const char* const names[] = {
#define TIDU_NAME(name, kind) #name,
      TIDU_OPCODES(TIDU_NAME)
#undef TIDU_NAME
  };
  auto i = static_cast<unsigned>(op);
  return i < static_cast<unsigned>(Op::kCount) ? names[i] : "?";
}

// Compare directions, in the order of the Python names table.
enum class Cmp : std::uint8_t { EQ, NE, LT, LE, GT, GE, kCount };

}  // namespace tidu
