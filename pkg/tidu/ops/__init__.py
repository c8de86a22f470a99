"""The concrete primitives (the seeds' tenferro): one block per primitive."""

from tidu.ops.elementwise import (Abs, Add, Compare, Conj, Cos, Div, Exp, Expm1, Imag, Log, Log1p,
                                  Max, Min, Mul, Neg, Pow, Real, Rsqrt, Sign, Sin, Sqrt, Sub, Tanh)
from tidu.ops.linalg import Cholesky, TriangularSolve
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
LINALG = ("Cholesky", "TriangularSolve")  # linear algebra (docs/linalg.md)
__all__ += list(LINALG)
from tidu.ops.control_flow import Checkpoint, Cond, Scan, While  # noqa: E402  (docs/control_flow.md)

CONTROL_FLOW = ("Scan", "Cond", "While", "Checkpoint")  # primitives holding sub-programs
__all__ += list(CONTROL_FLOW)
