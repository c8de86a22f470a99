"""The concrete primitives (the seeds' tenferro): one block per primitive."""

from __future__ import annotations

from tidu.ops.bitwise import (
    And,
    BitcastConvertType,
    Not,
    Or,
    ShiftLeft,
    ShiftRightArithmetic,
    ShiftRightLogical,
    Xor,
)
from tidu.ops.callback import HostCallback, Tie
from tidu.ops.collective import AxisGather, AxisReduce
from tidu.ops.control_flow import Checkpoint, Cond, ReduceWindowGeneral, Scan, While
from tidu.ops.conv import Conv
from tidu.ops.core import (
                                  Add,
                                  BroadcastInDim,
                                  Conj,
                                  Constant,
                                  Convert,
                                  Imag,
                                  Mul,
                                  Real,
                                  ReduceSum,
                                  Reshape,
                                  Transpose,
)
from tidu.ops.dynamic_slice import DynamicSlice, DynamicUpdateSlice
from tidu.ops.eig import Eig
from tidu.ops.elementwise import (
                                  Abs,
                                  Compare,
                                  Cos,
                                  Div,
                                  Exp,
                                  Expm1,
                                  Log,
                                  Log1p,
                                  Max,
                                  Min,
                                  Neg,
                                  Pow,
                                  Rsqrt,
                                  Sign,
                                  Sin,
                                  Sqrt,
                                  Sub,
                                  Tanh,
)
from tidu.ops.factor import LU, QR, SVD, Eigh, Geqrf, LUPermute
from tidu.ops.fft import Fft, FftType
from tidu.ops.gather import Gather, Scatter
from tidu.ops.linalg import Cholesky, TriangularSolve
from tidu.ops.math import (
                                  Acos,
                                  Acosh,
                                  Asin,
                                  Asinh,
                                  Atan,
                                  Atan2,
                                  Atanh,
                                  Cbrt,
                                  Ceil,
                                  Cosh,
                                  Erf,
                                  Erfc,
                                  ErfInv,
                                  Floor,
                                  IsFinite,
                                  Lgamma,
                                  Logistic,
                                  Rem,
                                  Round,
                                  Sinh,
                                  Tan,
)
from tidu.ops.random import Threefry2x32, Threefry2x32Iota
from tidu.ops.reductions import (
                                  ArgMax,
                                  ArgMin,
                                  ReduceAnd,
                                  ReduceMax,
                                  ReduceMin,
                                  ReduceOr,
                                  ReduceProd,
)
from tidu.ops.rewrites import batched_outer_sums  # noqa: F401 - registers the interpreter's rewrite
from tidu.ops.schur import Hessenberg, Schur
from tidu.ops.search import SearchSorted
from tidu.ops.select_window import SelectAndGatherAdd, SelectAndScatterAdd
from tidu.ops.shapes import Rev
from tidu.ops.sharding import ShardingHint
from tidu.ops.sorting import Cummax, Cummin, Cumprod, Cumsum, LinearScan, Sort
from tidu.ops.structural import Concatenate, DotGeneral, Iota, Pad, Select, Slice, StopGradient
from tidu.ops.window import ReduceWindowMax, ReduceWindowMin, ReduceWindowSum

# The groups of primitives, by the docs that describe them.
TIER1 = ("Abs", "Add", "BroadcastInDim", "Compare", "Concatenate", "Conj", "Constant", "Convert",
         "Cos", "Div", "DotGeneral", "Exp", "Expm1", "Imag", "Iota", "Log", "Log1p", "Max", "Min",
         "Mul", "Neg", "Pad", "Pow", "Real", "ReduceMax", "ReduceSum", "Reshape", "Rsqrt", "Select",
         "Sign", "Sin", "Slice", "Sqrt", "StopGradient", "Sub", "Tanh", "Transpose")
# linear algebra (docs/linalg.md)
LINALG = ("Cholesky", "TriangularSolve", "LU", "LUPermute", "Eigh", "QR", "SVD", "Eig", "Schur",
          "Hessenberg", "Geqrf")
INDEXING = ("DynamicSlice", "DynamicUpdateSlice", "Gather", "Scatter")  # docs/numpy.md
# ordering and accumulation (docs/numpy.md)
SORTING = ("ArgMax", "ArgMin", "Cummax", "Cummin", "Cumprod", "Cumsum", "LinearScan", "ReduceAnd",
           "ReduceMin", "ReduceOr", "ReduceProd", "SearchSorted", "Sort")
# elementwise math (ops/math.py)
MATH = ("Floor", "Ceil", "Round", "Tan", "Atan", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Acosh",
        "Atanh", "Erf", "Erfc", "ErfInv", "Cbrt", "Logistic", "IsFinite", "Rem", "Atan2", "Lgamma")
SHAPES = ("Rev",)  # the numpy shape surface (docs/numpy.md)
# bitwise and logical (ops/bitwise.py, docs/numpy.md)
BITWISE = ("And", "Or", "Xor", "Not", "ShiftLeft", "ShiftRightArithmetic", "ShiftRightLogical",
           "BitcastConvertType")
# primitives holding sub-programs (docs/control_flow.md)
CONTROL_FLOW = ("Scan", "Cond", "While", "Checkpoint", "ReduceWindowGeneral")
# convolution (ops/conv.py, docs/conv.md)
CONV = ("Conv", "ReduceWindowSum", "ReduceWindowMax", "ReduceWindowMin", "SelectAndGatherAdd",
        "SelectAndScatterAdd")
# collectives over a named vmap axis, resolved by that vmap's batching walk (ops/collective.py)
COLLECTIVE = ("AxisReduce", "AxisGather")
# layout over a Mesh's devices, for XLA (ops/sharding.py, docs/scale.md)
SHARDING = ("ShardingHint",)
# random numbers (ops/random.py, docs/random.md)
RANDOM = ("Threefry2x32", "Threefry2x32Iota")
# calls into Python at evaluation time (ops/callback.py, docs/frontend.md)
CALLBACKS = ("HostCallback", "Tie")
# the Fourier transform (ops/fft.py, docs/numpy.md)
FFT = ("Fft",)

__all__ = [
    "Abs", "Acos", "Acosh", "Add", "And", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atan2",
    "Atanh", "AxisGather", "AxisReduce", "BitcastConvertType", "BroadcastInDim", "Cbrt", "Ceil",
    "Checkpoint",
    "Cholesky", "Compare", "Concatenate", "Cond", "Conj", "Constant", "Conv", "Convert", "Cos",
    "Cosh", "Cummax", "Cummin", "Cumprod", "Cumsum", "Div", "DotGeneral", "DynamicSlice",
    "DynamicUpdateSlice", "Eig", "Eigh", "Erf", "ErfInv", "Erfc", "Exp", "Expm1", "Fft", "FftType",
    "Floor", "Gather", "Geqrf", "Hessenberg",
    "HostCallback", "Imag", "Iota", "IsFinite", "LU", "LUPermute", "Lgamma", "LinearScan", "Log",
    "Log1p",
    "Logistic", "Max", "Min", "Mul", "Neg", "Not", "Or", "Pad", "Pow", "QR", "Real", "ReduceAnd",
    "ReduceMax", "ReduceMin", "ReduceOr", "ReduceProd", "ReduceSum", "ReduceWindowGeneral",
    "ReduceWindowMax", "ReduceWindowMin", "ReduceWindowSum", "Rem", "Reshape", "Rev", "Round",
    "Rsqrt", "SVD", "Scan", "SearchSorted",
    "Schur", "Scatter", "Select", "SelectAndGatherAdd", "SelectAndScatterAdd", "ShardingHint",
    "ShiftLeft", "ShiftRightArithmetic",
    "ShiftRightLogical", "Sign", "Sin",
    "Sinh", "Slice", "Sort", "Sqrt", "StopGradient", "Sub", "Tan", "Tanh", "Threefry2x32",
    "Threefry2x32Iota", "Tie", "Transpose", "TriangularSolve", "While", "Xor",
]
