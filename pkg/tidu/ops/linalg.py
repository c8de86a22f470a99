"""Linear-algebra primitives: TriangularSolve and Cholesky, over (batches of) square matrices.

Both read only one triangle of their matrix operand (as ``jax.lax.linalg``): TriangularSolve the
triangle named by ``lower`` (not the diagonal when ``unit_diagonal``), Cholesky the lower one.
Their derivatives are written in tidu's own primitives (TriangularSolve in Linear mode, DotGeneral,
Transpose, Conj, Select with Iota masks), so transposes, higher orders and the XLA lowering go
through the generic machinery.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tidu.ad.rules import register
from tidu.backends.xla.splice import call_jax
from tidu.graph import aval
from tidu.graph.dtypes import kind_of
from tidu.ops.core import (
    COMPLEXES,
    INEXACT,
    A,
    Add,
    BroadcastInDim,
    Conj,
    Convert,
    F,
    Mul,
    Primitive,
    Transpose,
    aval_of,
    check_dtype,
    const,
    fix,
    lin,
    real_dtype,
    same_op_batched,
    scale,
)
from tidu.ops.elementwise import Compare, Neg, Sub
from tidu.ops.structural import DotGeneral, Iota, Select

# ---- helpers: masks and matrix layout in linear fragments ----

def _square(name: str, x) -> int:
    """The size m of a (..., m, m) operand; a clear error otherwise."""
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name}: operand of shape {x.shape} is not a square matrix (or a batch "
                         f"of them, shape (..., m, m))")
    return x.shape[-1]


def _mask(b, shape, direction: str) -> int:
    """A fixed bool array of `shape` (..., m, m): row <direction> column (GE: lower triangle)."""
    m2 = tuple(shape[-2:])
    rows, cols = fix(b, Iota(m2, "int32", 0)), fix(b, Iota(m2, "int32", 1))
    m = fix(b, Compare(direction), rows, cols)
    nd = len(shape)
    return m if nd == 2 else fix(b, BroadcastInDim(tuple(shape), (nd - 2, nd - 1)), m)


def _keep(b, mask, t, av) -> int:
    """The linear value t where mask holds, zero elsewhere."""
    return lin(b, Select(), [mask, t, const(b, 0, av)], [F, A, F])


def _mT(b, t, nd: int) -> int:
    """Swap the last two axes of a linear value."""
    return lin(b, Transpose(tuple(range(nd - 2)) + (nd - 1, nd - 2)), [t], [A])


def _conj(b, t, av) -> int:
    return lin(b, Conj(), [t], [A]) if av.dtype in COMPLEXES else t


def _matmul(nd: int):
    """DotGeneral of (..., i, k) by (..., k, j) with nd axes each."""
    batch = tuple(range(nd - 2))
    return DotGeneral((nd - 1,), (nd - 2,), batch, batch)


# ---- the XLA lowering: jax's own ----

# dtypes jax lowers to LAPACK on a CPU (potrf / trsm custom calls; cuSOLVER / cuBLAS on a GPU):
# these splice jax's lowering (backends/xla/splice.py).  XLA:CPU expands the bare
# stablehlo.cholesky / triangular_solve into loops of small dots, 2-4x slower at n=500; the
# StableHLO ops stay for the other dtypes.
_LAPACK = frozenset(np.dtype(t) for t in ("float32", "float64", "complex64", "complex128"))


def _jax_linalg():
    import jax  # noqa: PLC0415 - optional dependency, imported when lowering to XLA

    return jax.lax.linalg


# ---- triangular solve ----

@register
@dataclass(frozen=True)
class TriangularSolve(Primitive):
    """X with op(a) X = b (left_side) or X op(a) = b, a lower (lower_a) or upper triangular;
    op(a) is a, a^T, conj(a) or a^H by transpose_a / conjugate_a.  a: (..., m, m); b: (..., m, n)
    or (..., n, m)."""

    uses_blas = True

    batch = same_op_batched  # leading axes are batch axes

    left_side: bool
    lower_a: bool  # (`lower` in jax; here that name is the XLA lowering method)
    transpose_a: bool
    conjugate_a: bool
    unit_diagonal: bool

    def __post_init__(self):
        for f in ("left_side", "lower_a", "transpose_a", "conjugate_a", "unit_diagonal"):
            object.__setattr__(self, f, bool(getattr(self, f)))

    def abstract_eval(self, a, b):
        n = self.name
        if a.dtype != b.dtype:
            raise TypeError(f"{n}: dtype mismatch {a.dtype} vs {b.dtype}")
        check_dtype(n, a, INEXACT, "floating or complex")
        m = _square(n, a)
        if b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2]:
            raise ValueError(f"{n}: b of shape {b.shape} does not have the batch axes of a "
                             f"{a.shape} (expected shape {a.shape[:-2]} + (rows, columns))")
        k = b.shape[-2] if self.left_side else b.shape[-1]
        if k != m:
            side = "rows" if self.left_side else "columns"
            raise ValueError(f"{n}: b of shape {b.shape} has {k} {side}, a of shape {a.shape} "
                             f"needs {m}")
        return b

    def linearize(self, b, primal_in, primal_out, t):
        # dX = op(a)^-1 (db - op(da) X), da restricted to the triangle that is read
        a, x = primal_in[0], primal_out[0]
        av, nd = a.aval, a.aval.ndim
        rhs = t[1]
        if t[0] is not None:
            read = ("GT" if self.lower_a else "LT") if self.unit_diagonal else \
                ("GE" if self.lower_a else "LE")
            da = _keep(b, _mask(b, av.shape, read), t[0], av)
            if self.transpose_a:
                da = _mT(b, da, nd)
            if self.conjugate_a:
                da = _conj(b, da, av)
            prod = lin(b, _matmul(nd), [da, x] if self.left_side else [x, da],
                       [A, F] if self.left_side else [F, A])
            rhs = lin(b, Sub(), [rhs, prod], [A, A]) if rhs is not None else \
                lin(b, Neg(), [prod], [A])
        return [lin(b, self, [a, rhs], [F, A])]

    def transpose_rule(self, b, ct, inputs, mode):
        # X = op(a)^-1 b is linear in b; its adjoint is op(a)^-H, op(a)^H = flip both flags
        if mode.active_mask[0]:
            raise ValueError("TriangularSolve is linear in b only; a must be fixed")
        cplx = aval_of(b, ct[0]).dtype in COMPLEXES
        adj = replace(self, transpose_a=not self.transpose_a,
                      conjugate_a=self.conjugate_a != cplx)
        return [None, lin(b, adj, [inputs[0], ct[0]], [F, A])]

    def lower(self, lo, out, a, x):
        if np.dtype(out.dtype) in _LAPACK:
            kw = {"left_side": self.left_side, "lower": self.lower_a,
                  "transpose_a": self.transpose_a, "conjugate_a": self.conjugate_a,
                  "unit_diagonal": self.unit_diagonal}
            key = "trsm_" + "".join(str(int(v)) for v in kw.values())
            return call_jax(lo, out, [a, x], key, lambda a, b: _jax_linalg().triangular_solve(
                a, b, **kw))
        cplx = out.dtype in COMPLEXES
        if self.conjugate_a and cplx and not self.transpose_a:
            m = out.shape[-2] if self.left_side else out.shape[-1]
            a = Conj().lower(lo, aval(out.shape[:-2] + (m, m), out.dtype), a)
        ta = "NO_TRANSPOSE" if not self.transpose_a else \
            "ADJOINT" if self.conjugate_a and cplx else "TRANSPOSE"
        flag = lambda v: "true" if v else "false"  # noqa: E731
        return lo.op("stablehlo.triangular_solve", [a, x], out,
                     f"left_side = {flag(self.left_side)}, lower = {flag(self.lower_a)}, "
                     f"unit_diagonal = {flag(self.unit_diagonal)}, "
                     f"transpose_a = #stablehlo<transpose {ta}>")

    def impl(self, a, b):
        a, b = np.asarray(a), np.asarray(b)
        m = a.shape[-1]
        keep = np.tril(np.ones((m, m), bool)) if self.lower_a else np.triu(np.ones((m, m), bool))
        op = np.where(keep, a, 0).astype(a.dtype)
        if self.unit_diagonal:
            op[..., np.arange(m), np.arange(m)] = 1
        if self.transpose_a:
            op = np.swapaxes(op, -1, -2)
        if self.conjugate_a:
            op = np.conj(op)
        op_lower = self.lower_a != self.transpose_a
        if not self.left_side:  # X op = B  <=>  op^T X^T = B^T
            op, b, op_lower = np.swapaxes(op, -1, -2), np.swapaxes(b, -1, -2), not op_lower
        x = np.array(b, dtype=b.dtype, copy=True)
        order = range(m) if op_lower else range(m - 1, -1, -1)
        done: list[int] = []
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for i in order:
                row = x[..., i, :]
                if done:
                    row = row - np.matmul(op[..., i:i + 1, done], x[..., done, :])[..., 0, :]
                x[..., i, :] = row / op[..., i, i][..., None]
                done.append(i)
        return x if self.left_side else np.swapaxes(x, -1, -2)


# ---- Cholesky ----

def _nan_of(dt):
    """NaN of dtype dt; complex: NaN in both parts (jax's Cholesky of a matrix that is not
    positive definite)."""
    return complex(np.nan, np.nan) if kind_of(np.dtype(dt)) == "c" else np.nan


@register
@dataclass(frozen=True)
class Cholesky(Primitive):
    """The lower factor L (zeros above the diagonal) with a = L L^H, reading only the lower
    triangle of a (..., m, m); where a is not positive definite, NaN on and below the diagonal
    (complex: nan+nanj) and zeros above it, as jax's."""

    uses_blas = True

    batch = same_op_batched  # leading axes are batch axes

    def abstract_eval(self, x):
        check_dtype(self.name, x, INEXACT, "floating or complex")
        _square(self.name, x)
        return x

    def linearize(self, b, primal_in, primal_out, t):
        # Murray (2016): dL = L Phi(L^-1 dS L^-H), Phi = lower triangle with halved diagonal,
        # dS the Hermitian matrix that da's lower triangle stands for: W*da + (W*da)^H, with W
        # the weight of Phi (1 below the diagonal, 1/2 on it, 0 above; the real part of da's
        # diagonal is what is read).
        if t[0] is None:
            return [None]
        L = primal_out[0]
        av = L.aval
        nd, shape, cplx = av.ndim, av.shape, av.dtype in COMPLEXES
        below = fix(b, Convert(av.dtype.name), _mask(b, shape, "GT"))
        diag = fix(b, Convert(av.dtype.name), _mask(b, shape, "EQ"))
        weight = fix(b, Add(), below, fix(b, Mul(), diag, const(b, 0.5, av)))
        half = scale(b, weight, t[0])
        ds = lin(b, Add(), [half, _conj(b, _mT(b, half, nd), av)], [A, A])
        tmp = lin(b, TriangularSolve(False, True, True, cplx, False), [L, ds], [F, A])  # dS L^-H
        inner = lin(b, TriangularSolve(True, True, False, False, False), [L, tmp], [F, A])
        return [lin(b, _matmul(nd), [L, scale(b, weight, inner)], [F, A])]

    def lower(self, lo, out, x):
        if np.dtype(out.dtype) in _LAPACK:
            return call_jax(lo, out, [x], "cholesky", lambda a: _jax_linalg().cholesky(
                a, symmetrize_input=False))
        nd, dt = len(out.shape), out.dtype
        mask = lambda d: self._iota_mask(lo, out, d)  # noqa: E731
        fac = lo.op("stablehlo.cholesky", [x], out, "lower = true")
        zero = lo.op("stablehlo.broadcast_in_dim", [lo.scalar(0, dt)], out,
                     "broadcast_dimensions = array<i64>")
        fac = lo.op("stablehlo.select", [mask("GE"), fac, zero], out)
        # not positive definite: a diagonal entry of the factor is not real and > 0 -> all NaN
        re_av = aval(out.shape, real_dtype(np.dtype(dt)))
        re = lo.op("stablehlo.real", [fac], re_av) if dt in COMPLEXES else fac
        b_av = aval(out.shape, "bool")
        pos = lo.op("stablehlo.compare", [re, lo.op("stablehlo.broadcast_in_dim", [
            lo.scalar(0, re_av.dtype)], re_av, "broadcast_dimensions = array<i64>")], b_av,
            "comparison_direction = #stablehlo<comparison_direction GT>")
        true = lo.op("stablehlo.broadcast_in_dim", [lo.scalar(True, "bool")], b_av,
                     "broadcast_dimensions = array<i64>")
        ok = lo.op("stablehlo.select", [mask("EQ"), pos, true], b_av)
        batch = aval(out.shape[:-2], "bool")
        ok = lo.reduce(ok, lo.scalar(True, "bool"), "stablehlo.and", (nd - 2, nd - 1), batch)
        dims = tuple(range(lo.nb)) + lo.ax(range(nd - 2))
        ok = lo.op("stablehlo.broadcast_in_dim", [ok], b_av,
                   f"broadcast_dimensions = {lo.i64_array(dims)}")
        nan = lo.op("stablehlo.broadcast_in_dim", [lo.scalar(_nan_of(dt), dt)], out,
                    "broadcast_dimensions = array<i64>")
        nan = lo.op("stablehlo.select", [mask("GE"), nan, zero], out)  # jax's: 0 above
        return lo.op("stablehlo.select", [ok, fac, nan], out)

    @staticmethod
    def _iota_mask(lo, out, direction):
        """row <direction> column over out's shape, as a bool tensor."""
        nd = len(out.shape)
        i_av = aval(out.shape, "int32")
        rows = lo.source("stablehlo.iota", f"iota_dimension = {nd - 2} : i64", i_av)
        cols = lo.source("stablehlo.iota", f"iota_dimension = {nd - 1} : i64", i_av)
        return lo.op("stablehlo.compare", [rows, cols], aval(out.shape, "bool"),
                     f"comparison_direction = #stablehlo<comparison_direction {direction}>")

    def impl(self, x):
        x = np.asarray(x)
        m = x.shape[-1]
        low = np.tril(x)
        herm = low + np.conj(np.swapaxes(np.tril(x, -1), -1, -2))
        flat = herm.reshape((-1, m, m))
        out = np.empty_like(flat)
        for i, h in enumerate(flat):
            try:
                out[i] = np.linalg.cholesky(h)
            except np.linalg.LinAlgError:
                out[i] = np.tril(np.full((m, m), _nan_of(out.dtype), out.dtype))
        return out.reshape(x.shape)
