"""The concrete primitives (the seeds' tenferro): one block per primitive."""

from tidu.ops.elementwise import (Abs, Add, Compare, Conj, Cos, Div, Exp, Expm1, Imag, Log, Log1p,
                                  Max, Min, Mul, Neg, Pow, Real, Rsqrt, Sign, Sin, Sqrt, Sub, Tanh)
from tidu.ops.indexing import DynamicSlice, DynamicUpdateSlice, Gather, Scatter
from tidu.ops.factor import LU, QR, SVD, Eigh, LUPermute
from tidu.ops.linalg import Cholesky, TriangularSolve
from tidu.ops.shapes import Rev
from tidu.ops.sources import Constant, Iota, StopGradient
from tidu.ops.structural import (BroadcastInDim, Concatenate, Convert, DotGeneral, Pad, ReduceMax,
                                 ReduceSum, Reshape, Select, Slice, Transpose)

__all__ = [
    "Abs", "Add", "BroadcastInDim", "Compare", "Concatenate", "Conj", "Constant", "Convert", "Cos",
    "Div", "DotGeneral", "Exp", "Expm1", "Imag", "Iota", "Log", "Log1p", "Max", "Min", "Mul", "Neg",
    "Pad", "Pow", "Real", "ReduceMax", "ReduceSum", "Reshape", "Rsqrt", "Select", "Sign", "Sin",
    "Slice", "Sqrt", "StopGradient", "Sub", "Tanh", "Transpose",
]
TIER1 = tuple(__all__)
LINALG = ("Cholesky", "TriangularSolve", "LU", "LUPermute", "Eigh", "QR", "SVD")  # linear algebra (docs/linalg.md)
__all__ += list(LINALG)
INDEXING = ("DynamicSlice", "DynamicUpdateSlice", "Gather", "Scatter")  # docs/numpy.md
__all__ += list(INDEXING)
from tidu.ops.sorting import (ArgMax, ArgMin, Cummax, Cummin, Cumprod, Cumsum, LinearScan,  # noqa: E402
                              ReduceAnd, ReduceMin, ReduceOr, ReduceProd, Sort)
SORTING = ("ArgMax", "ArgMin", "Cummax", "Cummin", "Cumprod", "Cumsum", "LinearScan", "ReduceAnd",
           "ReduceMin", "ReduceOr", "ReduceProd", "Sort")  # ordering and accumulation (docs/numpy.md)
__all__ += list(SORTING)
from tidu.ops.math import (Acos, Acosh, Asin, Asinh, Atan, Atan2, Atanh, Cbrt, Ceil, Cosh, Erf, Erfc,
                           ErfInv, Floor, IsFinite, Logistic, Rem, Round, Sinh, Tan)

MATH = ("Floor", "Ceil", "Round", "Tan", "Atan", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Acosh",
        "Atanh", "Erf", "Erfc", "ErfInv", "Cbrt", "Logistic", "IsFinite", "Rem", "Atan2")  # ops/math.py
__all__ += list(MATH)
SHAPES = ("Rev",)  # the numpy shape surface (docs/numpy.md)
__all__ += list(SHAPES)
from tidu.ops.control_flow import Checkpoint, Cond, Scan, While  # noqa: E402  (docs/control_flow.md)

CONTROL_FLOW = ("Scan", "Cond", "While", "Checkpoint")  # primitives holding sub-programs
__all__ += list(CONTROL_FLOW)
