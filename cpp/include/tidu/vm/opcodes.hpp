// tidu/vm/opcodes.hpp - the one opcode table: enum, names and (in dispatch.hpp) the dispatch are
// all generated from TIDU_OPCODES, so adding an opcode is one line here plus its kernel.
#pragma once

#include <complex>
#include <cstdint>
#include <cstring>
#include <string>

#include "tidu/vm/dtype.hpp"

namespace tidu {

// X(name, arity class, attribute signature).
// Arity class: E1 unary elementwise, E2 binary elementwise, S structural.
// Attribute signature: how the instruction's int64 attributes are laid out, one letter per field
// of the primitive (its dataclass fields, in order), exported to Python as
// tidu._eval.OPCODE_SIGNATURES ({name: signature}) for the encoder (backends/interpreter.py):
//   _  no attributes
//   i  one int (an int, a bool, or an enum's code such as ScatterMode)
//   t  a tuple of ints, as its length n then its n elements
//   d  a dtype code (DType)
//   c  a comparison direction code (Cmp)
//   b  a constant blob, as [offset into Program::consts, byte count]
//   k  the primitive's kernel_attrs() list (not read field by field): control flow's ints and
//      nested-program indices laid out per control_flow.hpp; HostCallback's function id
//      (host_callback.hpp)
#define TIDU_OPCODES(X)           \
  X(Add, E2, _)                   \
  X(Sub, E2, _)                   \
  X(Mul, E2, _)                   \
  X(Div, E2, _)                   \
  X(Pow, E2, _)                   \
  X(Max, E2, _)                   \
  X(Min, E2, _)                   \
  X(Neg, E1, _)                   \
  X(Conj, E1, _)                  \
  X(Exp, E1, _)                   \
  X(Log, E1, _)                   \
  X(Sin, E1, _)                   \
  X(Cos, E1, _)                   \
  X(Tanh, E1, _)                  \
  X(Sqrt, E1, _)                  \
  X(Rsqrt, E1, _)                 \
  X(Expm1, E1, _)                 \
  X(Log1p, E1, _)                 \
  X(Sign, E1, _)                  \
  X(StopGradient, E1, _)          \
  X(Real, S, _)                   \
  X(Imag, S, _)                   \
  X(Abs, S, _)                    \
  X(Compare, S, c)                \
  X(Select, S, _)                 \
  X(Convert, S, d)                \
  X(ReduceSum, S, t)              \
  X(ReduceMax, S, t)              \
  X(BroadcastInDim, S, tt)        \
  X(Reshape, S, t)                \
  X(Transpose, S, t)              \
  X(DotGeneral, S, tttt)          \
  X(Slice, S, ttt)                \
  X(Pad, S, ttt)                  \
  X(Concatenate, S, i)            \
  X(Constant, S, btd)             \
  X(Iota, S, tdi)                 \
  X(TriangularSolve, S, iiiii)    \
  X(Cholesky, S, _)               \
  X(Gather, S, i)                 \
  X(Scatter, S, ii)               \
  X(DynamicSlice, S, t)           \
  X(DynamicUpdateSlice, S, _)     \
  X(ReduceMin, S, t)              \
  X(ReduceProd, S, t)             \
  X(ReduceAnd, S, t)              \
  X(ReduceOr, S, t)               \
  X(ArgMax, S, id)                \
  X(ArgMin, S, id)                \
  X(Cumsum, S, ii)                \
  X(Cumprod, S, ii)               \
  X(Cummax, S, ii)                \
  X(Cummin, S, ii)                \
  X(LinearScan, S, ii)            \
  X(Sort, S, ii)                  \
  X(Floor, E1, _)                 \
  X(Ceil, E1, _)                  \
  X(Round, E1, _)                 \
  X(Tan, E1, _)                   \
  X(Atan, E1, _)                  \
  X(Asin, E1, _)                  \
  X(Acos, E1, _)                  \
  X(Sinh, E1, _)                  \
  X(Cosh, E1, _)                  \
  X(Asinh, E1, _)                 \
  X(Acosh, E1, _)                 \
  X(Atanh, E1, _)                 \
  X(Erf, E1, _)                   \
  X(Erfc, E1, _)                  \
  X(ErfInv, E1, _)                \
  X(Cbrt, E1, _)                  \
  X(Logistic, E1, _)              \
  X(IsFinite, S, _)               \
  X(Rem, E2, _)                   \
  X(Atan2, E2, _)                 \
  X(LU, S, _)                     \
  X(LUPermute, S, i)              \
  X(Eigh, S, i)                   \
  X(QR, S, i)                     \
  X(SVD, S, ii)                   \
  X(Rev, S, t)                    \
  X(Scan, S, k)                   \
  X(While, S, k)                  \
  X(Cond, S, k)                   \
  X(Checkpoint, S, k)             \
  X(And, E2, _)                   \
  X(Or, E2, _)                    \
  X(Xor, E2, _)                   \
  X(Not, E1, _)                   \
  X(ShiftLeft, E2, _)             \
  X(ShiftRightArithmetic, E2, _)  \
  X(ShiftRightLogical, E2, _)     \
  X(Conv, S, tttttii)             \
  X(ReduceWindowSum, S, tttttt)   \
  X(ReduceWindowMax, S, tttttt)   \
  X(ReduceWindowMin, S, tttttt)  \
  X(Threefry2x32, S, _)          \
  X(Threefry2x32Iota, S, ti)     \
  X(HostCallback, S, k)           \
  X(Tie, S, _)                    \
  X(Fft, S, it)                   \
  X(Lgamma, E1, _)                \
  X(Eig, S, iii)                  \
  X(BitcastConvertType, S, d)     \
  X(Schur, S, _)                  \
  X(Hessenberg, S, _)             \
  X(SelectAndGatherAdd, S, tttti) \
  X(SelectAndScatterAdd, S, tttti) \
  X(SearchSorted, S, i)             \
  X(Geqrf, S, _)

enum class Op : std::uint8_t {
#define TIDU_ENUM(name, kind, sig) name,
  TIDU_OPCODES(TIDU_ENUM)
#undef TIDU_ENUM
      kCount
};

inline const char* op_name(Op op) {
  static const char* const names[] = {
#define TIDU_NAME(name, kind, sig) #name,
      TIDU_OPCODES(TIDU_NAME)
#undef TIDU_NAME
  };
  auto i = static_cast<unsigned>(op);
  return i < static_cast<unsigned>(Op::kCount) ? names[i] : "?";
}

// The attribute signature of op (see TIDU_OPCODES), "" when out of range.
inline const char* op_signature(Op op) {
  static const char* const sigs[] = {
#define TIDU_SIG(name, kind, sig) #sig,
      TIDU_OPCODES(TIDU_SIG)
#undef TIDU_SIG
  };
  auto i = static_cast<unsigned>(op);
  return i < static_cast<unsigned>(Op::kCount) ? sigs[i] : "";
}

// Compare directions, in the order of the Python names table.
enum class Cmp : std::uint8_t { EQ, NE, LT, LE, GT, GE, kCount };

}  // namespace tidu
