"""Shape and dtype rules of every tier-1 primitive: the good case and each error, by name."""

from __future__ import annotations

import pytest

import tidu as td
from tidu import ops as P
from tidu.ops.callback import TOKEN, HostFunction
from tidu.ops.control_flow import CustomVJPLin


def A(shape, dtype="float64"):
    return td.aval(shape, dtype)


F = "float64"
# (op, operand avals, expected output aval)
GOOD = [
    (P.Add(), [A((2, 3)), A((2, 3))], A((2, 3))),
    (P.Sub(), [A((2,), "int32"), A((2,), "int32")], A((2,), "int32")),
    (P.Mul(), [A((), "complex64"), A((), "complex64")], A((), "complex64")),
    (P.Neg(), [A((4,))], A((4,))),
    (P.Div(), [A((2,)), A((2,))], A((2,))),
    (P.Pow(), [A((2,), "float32"), A((2,), "float32")], A((2,), "float32")),
    (P.Max(), [A((3,), "int64"), A((3,), "int64")], A((3,), "int64")),
    (P.Min(), [A((3,)), A((3,))], A((3,))),
    (P.Conj(), [A((2,), "complex128")], A((2,), "complex128")),
    (P.Real(), [A((2,), "complex128")], A((2,))),
    (P.Imag(), [A((2,), "complex64")], A((2,), "float32")),
    (P.Exp(), [A((2,))], A((2,))),
    (P.Log(), [A((2,), "complex64")], A((2,), "complex64")),
    (P.Sin(), [A(())], A(())),
    (P.Cos(), [A(())], A(())),
    (P.Tanh(), [A(())], A(())),
    (P.Sqrt(), [A(())], A(())),
    (P.Rsqrt(), [A(())], A(())),
    (P.Expm1(), [A(())], A(())),
    (P.Log1p(), [A(())], A(())),
    (P.Abs(), [A((2,), "complex128")], A((2,))),
    (P.Sign(), [A((2,), "int32")], A((2,), "int32")),
    (P.Compare("LT"), [A((2,)), A((2,))], A((2,), "bool")),
    (P.Compare("EQ"), [A((2,), "complex64"), A((2,), "complex64")], A((2,), "bool")),
    (P.ReduceSum((0, 2)), [A((2, 3, 4))], A((3,))),
    (P.ReduceMax((1,)), [A((2, 3))], A((2,))),
    (P.BroadcastInDim((2, 3), (1,)), [A((3,))], A((2, 3))),
    (P.BroadcastInDim((2, 3), (0, 1)), [A((1, 3))], A((2, 3))),
    (P.Reshape((6,)), [A((2, 3))], A((6,))),
    (P.Transpose((1, 0, 2)), [A((2, 3, 4))], A((3, 2, 4))),
    (P.DotGeneral((1,), (0,)), [A((2, 3)), A((3, 5))], A((2, 5))),
    (P.DotGeneral((2,), (1,), (0,), (0,)), [A((7, 2, 3)), A((7, 3, 5))], A((7, 2, 5))),
    (P.Convert("float32"), [A((2,), "int64")], A((2,), "float32")),
    (P.Select(), [A((2,), "bool"), A((2,)), A((2,))], A((2,))),
    (P.Slice((1,), (5,), (2,)), [A((6,))], A((2,))),
    (P.Pad((1,), (2,), (1,)), [A((3,))], A((8,))),
    (P.Concatenate(1), [A((2, 3)), A((2, 1))], A((2, 4))),
    (P.Constant.of([1.0, 2.0]), [], A((2,))),
    (P.Iota((2, 3), "int32", 1), [], A((2, 3), "int32")),
    (P.StopGradient(), [A((2,))], A((2,))),
    (P.Rev((0, 2)), [A((2, 3, 4), "int32")], A((2, 3, 4), "int32")),
    (P.TriangularSolve(True, True, False, False, False), [A((4, 3, 3)), A((4, 3, 2))], A((4, 3, 2))),
    (P.TriangularSolve(False, False, True, True, True), [A((3, 3), "complex64"), A((5, 3), "complex64")],
     A((5, 3), "complex64")),
    (P.Cholesky(), [A((2, 3, 3), "float32")], A((2, 3, 3), "float32")),
    (P.TriangularSolve(False, True, True, False, False), [A((4, 3, 3)), A((4, 2, 3))],
     A((4, 2, 3))),
    (P.Cholesky(), [A((2, 3, 3), "complex64")], A((2, 3, 3), "complex64")),
    (P.Gather(1), [A((2, 5, 3)), A((4, 6), "int32")], A((2, 4, 6, 3))),
    (P.Scatter(0, "max"), [A((5, 3)), A((2,), "int64"), A((2, 3))], A((5, 3))),
    (P.DynamicSlice((2, 1)), [A((4, 3)), A((), "int64"), A((), "int32")], A((2, 1))),
    (P.DynamicUpdateSlice(), [A((4, 3)), A((2, 3)), A((), "int64"), A((), "int64")], A((4, 3))),
    (P.LU(), [A((2, 3, 3), "complex64")], A((2, 3, 5), "complex64")),
    (P.LUPermute(True), [A((2, 3), "int32"), A((2, 4, 5))], A((2, 4, 5))),
    (P.Eigh(True), [A((2, 3, 3))], A((2, 3, 4))),
    (P.Eigh(False), [A((2, 3, 3), "complex128")], A((2, 3))),
    (P.Eig(), [A((2, 3, 3))], A((2, 3, 4), "complex128")),
    (P.Eig(True, True), [A((3, 3), "float32")], A((3, 7), "complex64")),
    (P.Eig(False, False), [A((2, 3, 3), "complex64")], A((2, 3), "complex64")),
    (P.Schur(), [A((2, 3, 3))], A((2, 3, 6))),
    (P.Schur(), [A((4, 4), "complex64")], A((4, 8), "complex64")),
    (P.Hessenberg(), [A((2, 3, 3), "float32")], A((2, 3, 6), "float32")),
    (P.Geqrf(), [A((2, 5, 3), "float32")], A((2, 18), "float32")),
    (P.Geqrf(), [A((3, 5), "complex128")], A((18,), "complex128")),
    (P.QR(False), [A((5, 3))], A((24,))),
    (P.QR(True), [A((2, 5, 3), "float32")], A((2, 40), "float32")),
    (P.SVD(False, True), [A((5, 3))], A((3 + 15 + 9,))),
    (P.SVD(True, True), [A((5, 3))], A((3 + 25 + 9,))),
    (P.SVD(True, False), [A((4, 5, 3), "complex64")], A((4, 3), "float32")),
]



def _cf_op(fn, *specs):
    """The control-flow op (docs/control_flow.md) of a traced one-op function."""
    F = td.build(fn, inputs={i: s for i, s in enumerate(specs)})
    return [op for op, *_ in F.ops() if type(op).__module__ == "tidu.ops.control_flow"][0]


_SCAN = _cf_op(lambda x: td.scan(lambda c, _: (c * 2.0, None), x, length=3)[0], A((2,)))
_COND = _cf_op(lambda i, x: td.switch(i, [lambda x: x, lambda x: x * 2.0], x), A((), "int32"),
               A((2,)))
_WHILE = _cf_op(lambda x: td.while_loop(lambda c: c < 3.0, lambda c: c + 1.0, x), A(()))
_CKPT = _cf_op(lambda x: td.checkpoint(lambda y: td.sin(y) * y)(x), A((2,)))
_CJVP = td.custom_jvp(lambda x: td.sin(x))
_CJVP.defjvp(lambda p, t: (td.sin(p[0]), td.cos(p[0]) * t[0]))
_CJVP = _cf_op(_CJVP, A((2,)))
_CVJP = td.custom_vjp(lambda x: td.sin(x))
_CVJP.defvjp(lambda x: (td.sin(x), x), lambda x, g: (td.cos(x) * g,))
_CVJP = _cf_op(_CVJP, A((2,)))
_CLIN = _cf_op(lambda a, x: td.lax.linear_call(lambda r, v: r * v, lambda r, c: r * c, a, x),
               A((2,)), A((2,)))
_CLIN_T = CustomVJPLin(None, (A((2,)),), (0,), (A(()),), (A((2,)),))
_RWG = _cf_op(lambda x: td.lax.reduce_window(x, 1.0, lambda p, q: p * q, (2,), (1,), "VALID"),
              A((4,)))
GOOD += [
    (_CJVP, [A((2,))], A((2,))),
    (_CVJP, [A((2,))], A((2,))),
    (_CLIN, [A((2,)), A((2,))], A((2,))),
    (_CLIN_T, [A(()), A((2,))], A((2,))),
    (_SCAN, [A((2,))], A((2,))),
    (_COND, [A((), "int32"), A((2,))], A((2,))),
    (_WHILE, [A(())], A(())),
    (_CKPT, [A((2,))], A((2,))),
    (_RWG, [A((4,)), A(())], A((3,))),
    (P.BitcastConvertType("int32"), [A((2, 3))], A((2, 3, 2), "int32")),
    (P.BitcastConvertType("float64"), [A((2, 4), "uint16")], A((2,))),
    (P.BitcastConvertType("uint32"), [A((2,), "float32")], A((2,), "uint32")),
    # ordering and accumulation (tidu.ops.sorting)
    (P.ReduceMin((0, 2)), [A((2, 3, 4), "int32")], A((3,), "int32")),
    (P.ReduceProd((1,)), [A((2, 3), "complex64")], A((2,), "complex64")),
    (P.ReduceAnd((0,)), [A((2, 3), "bool")], A((3,), "bool")),
    (P.ReduceOr(()), [A((2,), "bool")], A((2,), "bool")),
    (P.ArgMax(1), [A((2, 3))], A((2,), "int64")),
    (P.ArgMin(0, "int32"), [A((2, 3), "int64")], A((3,), "int32")),
    (P.Cumsum(1, True), [A((2, 3), "complex128")], A((2, 3), "complex128")),
    (P.Cumprod(0), [A((4,), "int32")], A((4,), "int32")),
    (P.Cummax(1), [A((2, 3), "float32")], A((2, 3), "float32")),
    (P.Cummin(0, True), [A((3,))], A((3,))),
    (P.LinearScan(0), [A((3, 2)), A((3, 2))], A((3, 2))),
    (P.Sort(1, True), [A((2, 3)), A((2, 3), "int64")], A((2, 3), "int64")),
]

# (op, operand avals, exception type, message fragment)
BAD = [
    (P.Add(), [A((2, 3)), A((3, 2))], ValueError, r"Add: shape mismatch \(2, 3\) vs \(3, 2\)"),
    (P.Add(), [A((2,)), A((2,), "float32")], TypeError, "Add: dtype mismatch float64 vs float32"),
    (P.Add(), [A((2,), "bool"), A((2,), "bool")], TypeError, "Add: operand dtype bool"),
    (P.Sub(), [A(()), A((1,))], ValueError, "Sub: shape mismatch"),
    (P.Mul(), [A(()), A((), "int32")], TypeError, "Mul: dtype mismatch"),
    (P.Neg(), [A((), "bool")], TypeError, "Neg: operand dtype bool"),
    (P.Div(), [A((), "bool"), A((), "bool")], TypeError, "Div: operand dtype bool"),
    (P.Pow(), [A((2,)), A((3,))], ValueError, "Pow: shape mismatch"),
    (P.Max(), [A((), "complex64"), A((), "complex64")], TypeError, "Max: operand dtype complex64"),
    (P.Min(), [A((), "complex64"), A((), "complex64")], TypeError, "Min: .* not real"),
    (P.Conj(), [A((), "int32")], TypeError, "Conj: operand dtype int32"),
    (P.Real(), [A(())], TypeError, "Real: operand dtype float64 is not complex"),
    (P.Imag(), [A(())], TypeError, "Imag: operand dtype float64 is not complex"),
    (P.Exp(), [A((), "int32")], TypeError, "Exp: operand dtype int32 is not floating or complex"),
    (P.Log(), [A((), "bool")], TypeError, "Log: operand dtype bool"),
    (P.Sin(), [A((), "int64")], TypeError, "Sin:"),
    (P.Cos(), [A((), "int64")], TypeError, "Cos:"),
    (P.Tanh(), [A((), "int64")], TypeError, "Tanh:"),
    (P.Sqrt(), [A((), "int64")], TypeError, "Sqrt:"),
    (P.Rsqrt(), [A((), "int64")], TypeError, "Rsqrt:"),
    (P.Expm1(), [A((), "int64")], TypeError, "Expm1:"),
    (P.Log1p(), [A((), "int64")], TypeError, "Log1p:"),
    (P.Abs(), [A((), "bool")], TypeError, "Abs: operand dtype bool"),
    (P.Sign(), [A((), "bool")], TypeError, "Sign: operand dtype bool"),
    (P.Compare("LT"), [A((), "complex64"), A((), "complex64")], TypeError, "Compare: .*ordered"),
    (P.Compare("GT"), [A((2,)), A((3,))], ValueError, "Compare: shape mismatch"),
    (P.ReduceSum((2,)), [A((2, 3))], ValueError, r"ReduceSum: axes \(2,\) out of range for shape"),
    (P.ReduceSum((0, 0)), [A((2, 3))], ValueError, "ReduceSum: repeated axis"),
    (P.ReduceMax((0,)), [A((0, 3))], ValueError, "ReduceMax: cannot reduce an empty axis"),
    (P.ReduceMax((0,)), [A((2,), "complex64")], TypeError, "ReduceMax: operand dtype complex64"),
    (P.BroadcastInDim((2, 3), (0,)), [A((3,))], ValueError,
     r"BroadcastInDim: operand shape \(3,\) cannot broadcast to \(2, 3\)"),
    (P.BroadcastInDim((2, 3), (0, 1)), [A((3,))], ValueError, "BroadcastInDim: dims"),
    (P.BroadcastInDim((2, 3), (1, 0)), [A((3, 2))], ValueError, "must be increasing"),
    (P.Reshape((4,)), [A((2, 3))], ValueError, r"Reshape: cannot reshape \(2, 3\)"),
    (P.Transpose((0, 0)), [A((2, 3))], ValueError, "Transpose: perm"),
    (P.DotGeneral((1,), (1,)), [A((2, 3)), A((3, 5))], ValueError,
     r"DotGeneral: lhs shape \(2, 3\) axis 1 does not match rhs shape \(3, 5\) axis 1"),
    (P.DotGeneral((1,), (0,)), [A((2, 3)), A((3, 5), "float32")], TypeError,
     "DotGeneral: dtype mismatch"),
    (P.DotGeneral((1,), ()), [A((2, 3)), A((3, 5))], ValueError, "differ in length"),
    (P.Convert("float32"), [A((2,), "complex64")], TypeError, "Convert: cannot convert complex64"),
    (P.Select(), [A((2,)), A((2,)), A((2,))], TypeError, "Select: predicate dtype float64"),
    (P.Select(), [A((3,), "bool"), A((2,)), A((2,))], ValueError, "Select: predicate shape"),
    (P.Select(), [A((2,), "bool"), A((2,)), A((2,), "float32")], TypeError, "Select: dtype mismatch"),
    (P.Slice((0,), (7,), (1,)), [A((6,))], ValueError, "Slice: bounds"),
    (P.Slice((0,), (2,), (0,)), [A((6,))], ValueError, "Slice: bounds"),
    (P.Slice((0, 0), (1, 1), (1, 1)), [A((6,))], ValueError, "Slice: start/limit/stride lengths"),
    (P.Pad((-1,), (0,), (0,)), [A((3,))], ValueError, "Pad: negative padding"),
    (P.Pad((0,), (0,), (0, 0)), [A((3,))], ValueError, "Pad: low/high/interior lengths"),
    (P.Concatenate(0), [A((2, 3)), A((2, 4))], ValueError, "Concatenate: shape mismatch"),
    (P.Concatenate(2), [A((2, 3))], ValueError, "Concatenate: axis 2 out of range"),
    (P.Concatenate(0), [A((2,)), A((2,), "int32")], TypeError, "Concatenate: dtype mismatch"),
    (P.Iota((2,), "int32", 1), [], ValueError, "Iota: dimension 1 out of range"),
    (P.Iota((2,), "bool", 0), [], TypeError, "Iota: operand dtype bool"),
    (P.TriangularSolve(True, True, False, False, False), [A((3, 2)), A((3, 2))], ValueError,
     r"TriangularSolve: operand of shape \(3, 2\) is not a square matrix"),
    (P.TriangularSolve(True, True, False, False, False), [A((3, 3)), A((2, 2))], ValueError,
     r"TriangularSolve: b of shape \(2, 2\) has 2 rows, a of shape \(3, 3\) needs 3"),
    (P.TriangularSolve(True, True, False, False, False), [A((2, 3, 3)), A((3, 3, 1))], ValueError,
     "TriangularSolve: b of shape .* does not have the batch axes of a"),
    (P.Gather(0), [A((3,)), A((2,), "float64")], TypeError, "Gather: index dtype float64"),
    (P.Gather(2), [A((3, 2)), A((2,), "int64")], ValueError, "Gather: axis 2 out of range"),
    (P.Scatter(0, "add"), [A((3, 2)), A((4,), "int64"), A((4, 3))], ValueError,
     r"Scatter: update shape \(4, 3\) does not match \(4, 2\)"),
    (P.Scatter(0, "min"), [A((3,), "complex128"), A((1,), "int64"), A((1,), "complex128")],
     TypeError, r"Scatter\(min\): operand dtype complex128 is not real"),
    (P.DynamicSlice((4,)), [A((3,)), A((), "int64")], ValueError,
     r"DynamicSlice: slice sizes \(4,\) do not fit"),
    (P.DynamicUpdateSlice(), [A((3,)), A((2,)), A((2,), "int64")], TypeError,
     "DynamicUpdateSlice: start index 0 must be a scalar"),
    (P.TriangularSolve(True, True, False, False, False), [A((3, 3), "int32"), A((3, 1), "int32")],
     TypeError, "TriangularSolve: operand dtype int32"),
    (P.TriangularSolve(True, True, False, False, False), [A((3, 3)), A((3, 1), "float32")],
     TypeError, "TriangularSolve: dtype mismatch"),
    (P.Cholesky(), [A((3,))], ValueError, r"Cholesky: operand of shape \(3,\) is not a square matrix"),
    (P.Cholesky(), [A((3, 3), "int64")], TypeError, "Cholesky: operand dtype int64"),
    (P.TriangularSolve(True, True, False, False, False), [A((3, 3)), A((2, 3))], ValueError,
     "TriangularSolve: b of shape \\(2, 3\\) has 2 rows"),
    (P.Cholesky(), [A((3, 2))], ValueError, "Cholesky: operand of shape \\(3, 2\\) is not a square"),
    (P.LU(), [A((3, 2))], ValueError, r"LU: operand of shape \(3, 2\) is not a square"),
    (P.Eigh(), [A((3, 3), "int32")], TypeError, "Eigh: operand dtype int32 is not floating"),
    (P.Eig(), [A((3, 3), "int32")], TypeError, "Eig: operand dtype int32 is not floating"),
    (P.Eig(), [A((3, 4))], ValueError, r"Eig: operand of shape \(3, 4\) is not a square"),
    (P.Schur(), [A((3, 3), "int32")], TypeError, "Schur: operand dtype int32 is not floating"),
    (P.Schur(), [A((3, 4))], ValueError, r"Schur: operand of shape \(3, 4\) is not a square"),
    (P.Hessenberg(), [A((3,))], ValueError, r"Hessenberg: operand of shape \(3,\) is not a square"),
    (P.Geqrf(), [A((3,))], ValueError, r"Geqrf: operand of shape \(3,\) is not a matrix"),
    (P.Geqrf(), [A((3, 3), "int32")], TypeError, "Geqrf: operand dtype int32 is not floating"),
    (P.QR(), [A((3,))], ValueError, r"QR: operand of shape \(3,\) is not a matrix"),
    (P.SVD(), [A((3,), "complex64")], ValueError, r"SVD: operand of shape \(3,\) is not a matrix"),
    (P.LUPermute(False), [A((3,), "int64"), A((3, 2))], TypeError, "pivots dtype int64"),
    (P.LUPermute(False), [A((2, 3), "int32"), A((3, 2))], ValueError,
     r"pivots of shape \(2, 3\) do not match x of shape \(3, 2\)"),
    (P.Rev((2,)), [A((2, 3))], ValueError, r"Rev: axes \(2,\) out of range for shape \(2, 3\)"),
    (P.Rev((0, 0)), [A((2, 3))], ValueError, r"Rev: repeated axis"),
    (P.ReduceMin((1,)), [A((2, 0))], ValueError, "ReduceMin: cannot reduce an empty axis"),
    (P.ReduceProd((2,)), [A((2, 3))], ValueError, r"ReduceProd: axes \(2,\) out of range"),
    (P.ReduceAnd((0,)), [A((2,))], TypeError, "ReduceAnd: operand dtype float64"),
    (P.ReduceOr((0,)), [A((2,), "int32")], TypeError, "ReduceOr: operand dtype int32"),
    (P.ArgMax(2), [A((2, 3))], ValueError, "ArgMax: axis 2 out of range"),
    (P.ArgMin(0), [A((2,), "complex128")], TypeError, "ArgMin: operand dtype complex128"),
    (P.Cumsum(0), [A((2,), "bool")], TypeError, "Cumsum: operand dtype bool"),
    (P.Cumprod(3), [A((2, 3))], ValueError, "Cumprod: axis 3 out of range"),
    (P.Cummax(0), [A((2,), "complex64")], TypeError, "Cummax: operand dtype complex64"),
    (P.Cummin(1), [A((2,))], ValueError, "Cummin: axis 1 out of range"),
    (P.LinearScan(0), [A((3,)), A((4,))], ValueError, "LinearScan: operands"),
    (P.Sort(0), [A((2, 3)), A((3, 2))], ValueError, r"Sort: values of shape \(3, 2\)"),
]
BAD += [
    (_SCAN, [A((3,))], TypeError, r"Scan: carry operand 0 is float64\[3\]"),
    (_COND, [A(()), A((2,))], TypeError, "Cond: index must be an int32 scalar"),
    (_WHILE, [A((2,))], TypeError, "While: the cond takes"),
    (_CKPT, [A((2,), "float32")], TypeError, "Checkpoint: the body takes"),
    (_CJVP, [A((3,))], TypeError, "CustomJVP: the body takes"),
    (_CVJP, [A((2,), "float32")], TypeError, "CustomVJP: the body takes"),
    (_CLIN, [A((2,)), A((3,))], TypeError, "CustomLinear: the body takes"),
    (_CLIN_T, [A((2,)), A((2,))], TypeError, "CustomVJPLin: takes"),
    (_RWG, [A((5,)), A(())], TypeError, "ReduceWindowGeneral: the body takes"),
    (P.BitcastConvertType("float64"), [A((3,), "int32")], ValueError, "needs a last axis of 2"),
    (P.BitcastConvertType("int32"), [A((3,), "complex64")], TypeError, "BitcastConvertType"),
]

# host callbacks (ops/callback.py): a debug callback's token, a pure one's declared results
_FN = HostFunction("f", print, lambda a: a)
GOOD += [
    (P.HostCallback(_FN, (TOKEN,), 1), [A((2,))], TOKEN),
    (P.HostCallback(_FN, (A((3,), "int32"),), 2, False), [A((2,)), A(())], A((3,), "int32")),
    (P.Tie(), [A((2,)), TOKEN], A((2,))),
]
BAD += [
    (P.HostCallback(_FN, (TOKEN,), 2), [A((2,))], TypeError, "HostCallback: 2 operands"),
    (P.Tie(), [], TypeError, "Tie: needs the value operand"),
]

# elementwise math (ops/math.py): floating-only and inexact unary maps, IsFinite, Rem, Atan2
_FLOAT_ONLY = [P.Floor, P.Ceil, P.Round, P.Erf, P.Erfc, P.ErfInv, P.Cbrt, P.Logistic, P.Lgamma]
_INEXACT = [P.Tan, P.Atan, P.Asin, P.Acos, P.Sinh, P.Cosh, P.Asinh, P.Acosh, P.Atanh]
GOOD += [(c(), [A((2,), "float32")], A((2,), "float32")) for c in _FLOAT_ONLY + _INEXACT]
GOOD += [(c(), [A((2,), "complex64")], A((2,), "complex64")) for c in _INEXACT]
GOOD += [(P.IsFinite(), [A((2, 3))], A((2, 3), "bool")),
         (P.Rem(), [A((3,), "int32"), A((3,), "int32")], A((3,), "int32")),
         (P.Atan2(), [A((3,)), A((3,))], A((3,))),
         (P.Div(), [A((2,), "int64"), A((2,), "int64")], A((2,), "int64"))]
BAD += [(c(), [A((2,), "complex64")], TypeError, f"{c.__name__}: operand dtype complex64 is not floating")
        for c in _FLOAT_ONLY]
BAD += [(c(), [A((2,), "int32")], TypeError, f"{c.__name__}: operand dtype int32") for c in _INEXACT]
BAD += [(P.IsFinite(), [A((2,), "int64")], TypeError, "IsFinite: operand dtype int64 is not floating"),
        (P.Rem(), [A((2,), "complex128"), A((2,), "complex128")], TypeError,
         "Rem: operand dtype complex128 is not real"),
        (P.Rem(), [A((2,)), A((3,))], ValueError, r"Rem: shape mismatch \(2,\) vs \(3,\)"),
        (P.Atan2(), [A((2,), "int32"), A((2,), "int32")], TypeError, "Atan2: operand dtype int32")]


# bitwise (ops/bitwise.py)
_BITWISE2 = [P.And, P.Or, P.Xor]
_SHIFTS = [P.ShiftLeft, P.ShiftRightArithmetic, P.ShiftRightLogical]
GOOD += [(c(), [A((2,), "bool"), A((2,), "bool")], A((2,), "bool")) for c in _BITWISE2]
GOOD += [(c(), [A((2,), "int32"), A((2,), "int32")], A((2,), "int32")) for c in _SHIFTS]
GOOD += [(P.Not(), [A((3,), "int64")], A((3,), "int64"))]
BAD += [(c(), [A((2,)), A((2,))], TypeError, f"{c.__name__}: operand dtype float64")
        for c in _BITWISE2 + _SHIFTS]
BAD += [(P.ShiftLeft(), [A((2,), "bool"), A((2,), "bool")], TypeError,
         "ShiftLeft: operand dtype bool"),
        (P.Not(), [A((2,), "complex64")], TypeError, "Not: operand dtype complex64")]
GOOD += [(c(), [A((2,), "uint32"), A((2,), "uint32")], A((2,), "uint32"))
         for c in _BITWISE2 + _SHIFTS]

# the Fourier transform (ops/fft.py): the trailing axes, RFFT halves the last, IRFFT restores it
GOOD += [(P.Fft("FFT", (4, 5)), [A((2, 4, 5), "complex64")], A((2, 4, 5), "complex64")),
         (P.Fft("IFFT", (7,)), [A((7,), "complex128")], A((7,), "complex128")),
         (P.Fft("RFFT", (3, 8)), [A((2, 3, 8), "float32")], A((2, 3, 5), "complex64")),
         (P.Fft("IRFFT", (9,)), [A((5,), "complex128")], A((9,), "float64"))]
BAD += [(P.Fft("FFT", (4,)), [A((4,), "float64")], TypeError,
         "Fft FFT: operand dtype float64 is not complex"),
        (P.Fft("RFFT", (4,)), [A((4,), "complex64")], TypeError,
         "Fft RFFT: operand dtype complex64 is not floating"),
        (P.Fft("IRFFT", (8,)), [A((8,), "complex64")], ValueError,
         r"trailing axes \(8,\) .* do not match \(5,\)"),
        (P.Fft("FFT", (2, 2, 2, 2)), [A((2, 2, 2, 2), "complex64")], ValueError,
         "1 to 3 entries"),
        (P.Fft("FFT", (3,)), [A((), "complex64")], ValueError, "fewer than 1 axes")]

# search in sorted rows (ops/search.py): rows (B..., n), values (B..., m...) -> int32 of v's shape
GOOD += [(P.SearchSorted(False), [A((7,)), A((3, 4))], A((3, 4), "int32")),
         (P.SearchSorted(True), [A((2, 5), "int8"), A((2, 3, 4), "int8")], A((2, 3, 4), "int32")),
         (P.SearchSorted(True), [A((0,), "bool"), A((), "bool")], A((), "int32"))]
BAD += [(P.SearchSorted(False), [A((3,), "complex128"), A((2,), "complex128")], TypeError,
         "SearchSorted: operand dtype complex128 is not real"),
        (P.SearchSorted(False), [A((3,)), A((2,), "float32")], TypeError,
         "values dtype float32 differs from the rows' float64"),
        (P.SearchSorted(False), [A(()), A((2,))], ValueError, "at least one axis"),
        (P.SearchSorted(True), [A((2, 5)), A((3, 4))], ValueError,
         r"do not start with the rows' batch axes \(2,\)")]

# random numbers (ops/random.py): key (K..., 2), count (K..., C..., 2)
GOOD += [(P.Threefry2x32(), [A((2,), "uint32"), A((5, 3, 2), "uint32")], A((5, 3, 2), "uint32")),
         (P.Threefry2x32(), [A((4, 2), "uint32"), A((4, 3, 2), "uint32")], A((4, 3, 2), "uint32"))]
GOOD += [(P.Threefry2x32Iota((3, 4)), [A((2,), "uint32")], A((3, 4, 2), "uint32")),
         (P.Threefry2x32Iota(()), [A((5, 2), "uint32")], A((5, 2), "uint32")),
         (P.Threefry2x32Iota((3,), True), [A((5, 2), "uint32")], A((5, 3), "uint32"))]
BAD += [(P.Threefry2x32Iota((3,)), [A((2,), "int64")], TypeError,
         "Threefry2x32Iota: key dtype int64 is not uint32"),
        (P.Threefry2x32Iota((3,)), [A((3,), "uint32")], ValueError,
         "does not end in an axis of 2")]
BAD += [(P.Threefry2x32(), [A((2,), "int32"), A((3, 2), "uint32")], TypeError,
         "Threefry2x32: key dtype int32 is not uint32"),
        (P.Threefry2x32(), [A((2,), "uint32"), A((3, 4), "uint32")], ValueError,
         r"Threefry2x32: count shape \(3, 4\) does not end in an axis of 2"),
        (P.Threefry2x32(), [A((4, 2), "uint32"), A((5, 3, 2), "uint32")], ValueError,
         "the key's leading axes must lead the count's")]


# convolution (ops/conv.py): canonical layout lhs (N, C, *S), rhs (O, I, *K)
_CONV = P.Conv((2, 1), (1, 0), (1, 0), (1, 1), (1, 2))
GOOD += [(_CONV, [A((2, 3, 7, 6)), A((4, 3, 3, 2))], A((2, 4, 4, 4))),
         (P.Conv((1,), (0,), (0,), (2,), (1,), 2, 1), [A((1, 4, 3), "float32"),
                                                       A((6, 2, 2), "float32")],
          A((1, 6, 4), "float32")),
         (P.Conv((1,), (-1,), (0,), (1,), (1,), 1, 2), [A((4, 2, 5)), A((6, 2, 2))],
          A((2, 6, 3))),
         (P.Conv((), (), (), (), ()), [A((3, 2), "complex128"), A((5, 2), "complex128")],
          A((3, 5), "complex128")),
         (_CONV, [A((2, 3, 7, 6), "int8"), A((4, 3, 3, 2), "int8")], A((2, 4, 4, 4), "int8")),
         (_CONV, [A((2, 3, 7, 6), "bool"), A((4, 3, 3, 2), "bool")], A((2, 4, 4, 4), "bool"))]
BAD += [(_CONV, [A((2, 3, 7, 6)), A((4, 2, 3, 2))], ValueError,
         r"Conv: lhs feature size 3 is not rhs input features 2 times feature_group_count 1"),
        (_CONV, [A((2, 3, 7)), A((4, 3, 3))], ValueError, r"Conv: lhs shape \(2, 3, 7\) and rhs "
         r"shape \(4, 3, 3\) must both have rank 4"),
        (_CONV, [A((2, 3, 7, 6)), A((4, 3, 3, 2), "float32")], TypeError,
         "Conv: dtype mismatch float64 vs float32"),
        (P.Conv((0,), (0,), (0,), (1,), (1,)), [A((1, 1, 3)), A((1, 1, 2))], ValueError,
         r"Conv: window_strides \(0,\) must be positive"),
        (P.Conv((1,), (0,), (0,), (1,), (1,), 2, 2), [A((2, 2, 3)), A((2, 1, 2))], ValueError,
         "Conv: feature_group_count 2 and batch_group_count 2 cannot both exceed 1"),
        (P.Conv((1,), (0,), (0,), (1,), (1,), 1, 2), [A((3, 2, 3)), A((2, 2, 2))], ValueError,
         "Conv: lhs batch size 3 is not divisible by batch_group_count 2")]


# windowed reductions (ops/window.py)
_RW = ((2, 1, 3), (2, 1, 1), (0, 1, 1), (1, 0, 1), (1, 2, 1), (1, 1, 2))
GOOD += [(P.ReduceWindowSum(*_RW), [A((5, 3, 7))], A((3, 6, 5))),
         (P.ReduceWindowMax(*_RW), [A((5, 3, 7), "int32")], A((3, 6, 5), "int32")),
         (P.ReduceWindowMin(*_RW), [A((5, 3, 7), "float32")], A((3, 6, 5), "float32"))]
BAD += [(P.ReduceWindowSum((2,), (1,), (0,), (0,), (1,), (1,)), [A((2, 3))], ValueError,
         r"ReduceWindowSum: window_dimensions \(2,\) does not have one entry per axis"),
        (P.ReduceWindowMax((2,), (0,), (0,), (0,), (1,), (1,)), [A((3,))], ValueError,
         r"ReduceWindowMax: window_strides \(0,\) must be positive"),
        (P.ReduceWindowMin((2,), (1,), (-1,), (0,), (1,), (1,)), [A((3,))], ValueError,
         "ReduceWindowMin: negative padding"),
        (P.ReduceWindowMax((2,), (1,), (0,), (0,), (1,), (1,)), [A((3,), "complex128")],
         TypeError, "ReduceWindowMax: operand dtype complex128 is not real")]

# max / min pooling's derivative (ops/select_window.py): operands (source, x)
_SW = ((2, 3), (2, 1), (0, 1), (1, 1))
GOOD += [(P.SelectAndGatherAdd(*_SW), [A((5, 4)), A((5, 4))], A((3, 4))),
         (P.SelectAndScatterAdd(*_SW, False), [A((3, 4), "float32"), A((5, 4), "float32")],
          A((5, 4), "float32"))]
BAD += [(P.SelectAndGatherAdd(*_SW), [A((5, 4), "int32"), A((5, 4), "int32")], TypeError,
         "SelectAndGatherAdd: operands must both be float32 or float64"),
        (P.SelectAndScatterAdd(*_SW), [A((5, 4)), A((5, 4))], ValueError,
         r"SelectAndScatterAdd: source shape \(5, 4\) should be \(3, 4\)"),
        (P.SelectAndGatherAdd((2,), (1,), (0,), (0,)), [A((5, 4)), A((5, 4))], ValueError,
         r"SelectAndGatherAdd: window_dimensions \(2,\) does not have one entry per axis"),
        (P.SelectAndScatterAdd((2,), (0,), (0,), (0,)), [A((1,)), A((3,))], ValueError,
         "SelectAndScatterAdd: window dimensions")]

# collectives over a named vmap axis (ops/collective.py)
GOOD += [(P.AxisReduce("sum", "i"), [A((2, 3)), A((), "int32")], A((2, 3))),
         (P.AxisReduce("max", "i"), [A((), "int32"), A((), "int32")], A((), "int32")),
         (P.AxisGather("i", 4, 1), [A((2, 3), "float32"), A((), "int32")], A((2, 4, 3), "float32"))]
BAD += [(P.AxisReduce("sum", "i"), [A((2,)), A((2,), "int32")], TypeError,
         "AxisReduce: the axis index operand must be an integer scalar"),
        (P.AxisReduce("sum", "i"), [A((2,), "bool"), A((), "int32")], TypeError,
         "AxisReduce: .* is not numeric"),
        (P.AxisGather("i", 4, 3), [A((2, 3)), A((), "int32")], ValueError,
         "AxisGather: pos 3 out of range for an operand of rank 2")]


@pytest.mark.parametrize("op,avals,expected", GOOD, ids=lambda x: getattr(x, "name", None))
def test_shape_rule(op, avals, expected):
    assert op.abstract_eval(*avals) is expected



class _Mesh:
    """What ShardingHint reads of a jax Mesh (axis names, the devices' shape), without jax."""

    axis_names = ("i", "j")

    class devices:  # noqa: N801 - the attribute of jax's Mesh
        shape = (2, 3)


_MESH = _Mesh()
GOOD += [(P.ShardingHint(_MESH, (1, -1, 0)), [A((3, 5, 4))], A((3, 5, 4)))]
BAD += [(P.ShardingHint(_MESH, (0, -1)), [A((3, 3))], ValueError,
         "ShardingHint: an axis of size 3 cannot be split over Mesh axis 'i' of size 2"),
        (P.ShardingHint(_MESH, (0,)), [A((2, 3))], ValueError,
         r"ShardingHint: dims \(0,\) for an operand of rank 2")]

@pytest.mark.parametrize("op,avals,exc,msg", BAD, ids=lambda x: getattr(x, "name", None))
def test_shape_rule_error_names_primitive_and_operands(op, avals, exc, msg):
    with pytest.raises(exc, match=msg):
        op.abstract_eval(*avals)


def test_bad_attributes_are_rejected_at_construction():
    with pytest.raises(ValueError, match="unknown direction"):
        P.Compare("LESS")
    with pytest.raises(TypeError, match=r"unsupported dtype datetime64\[s\]"):
        P.Convert("datetime64[s]")
    with pytest.raises(TypeError, match="unsupported dtype"):
        P.Constant.of(["a"])


def test_builder_reports_shape_errors_with_the_primitive_name():
    b = td.FragmentBuilder()
    x = b.add_input("x", A((2, 3)))
    y = b.add_input("y", A((3, 2)))
    with pytest.raises(ValueError, match=r"Add: shape mismatch \(2, 3\) vs \(3, 2\)"):
        b.add_op(P.Add(), [td.Local(x), td.Local(y)])


def test_unsupported_dtypes_and_shapes():
    with pytest.raises(TypeError, match=r"unsupported dtype datetime64\[s\]"):
        td.spec((2,), "datetime64[s]")
    with pytest.raises(ValueError, match="negative dimension"):
        td.spec((-1,), "float64")
