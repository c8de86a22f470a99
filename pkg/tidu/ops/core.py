"""The closed vocabulary every rule is written in: the Primitive base class, the dtype checks,
the helpers that emit linear and fixed nodes (AD) and batched nodes (vmap; the rule contracts
are described in ``tidu.extend``), and the primitives those helpers emit.  Its members reference
each other (Mul's rule adds, BroadcastInDim and ReduceSum transpose to each other, Convert's
transpose takes Real), which is why they share one file; every other module of ``tidu.ops``
imports this one downward.

Size: about 600 lines, over the package's usual limit on purpose: splitting the vocabulary would
put a cycle between the halves (docs/architecture.md). It shrinks when the unary primitives
become table rows."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import PrimitiveOp, register
from tidu.backends.xla.hlo import i64_array
from tidu.graph import PRIMAL, AbstractValue, External, FragmentBuilder, Linear, Local, ValKey, aval
from tidu.graph.dtypes import (
    ALL,
    BOOL,
    COMPLEXES,
    FLOATS,
    INEXACT,
    INTS,
    NUMERIC,
    REAL,
    is_differentiable,
    real_dtype,
    saturating_int,
)

__all__ = ["A", "ALL", "Add", "BOOL", "Binary", "BroadcastInDim", "COMPLEXES", "Conj", "Constant",
           "Convert", "F", "FLOATS", "INEXACT", "INTS", "Imag", "Mul", "NUMERIC", "Primitive",
           "REAL", "Real", "ReduceSum", "Reshape", "Transpose", "Unary", "add_all", "all_batched",
           "aval_of", "batch_size", "bilinear", "broadcast_batch", "check_axes", "check_dtype",
           "check_same", "conj_fixed", "const", "fix", "i64_array", "ints", "is_differentiable",
           "lin", "linear_self", "move_to_front", "real_dtype", "ref", "same_op_batched", "scale",
           "shifted", "with_dtype"]


# ---- dtype and shape checks ----


def check_dtype(name: str, a: AbstractValue, allowed: frozenset, what: str) -> None:
    if a.dtype not in allowed:
        raise TypeError(f"{name}: operand dtype {a.dtype} is not {what}")


def check_same(name: str, avals: Sequence[AbstractValue]) -> AbstractValue:
    """All operands share shape and dtype (no implicit broadcasting inside primitives)."""
    first = avals[0]
    for other in avals[1:]:
        if other is first:
            continue
        if other.dtype != first.dtype:
            raise TypeError(f"{name}: dtype mismatch {first.dtype} vs {other.dtype}")
        if other.shape != first.shape:
            raise ValueError(f"{name}: shape mismatch {first.shape} vs {other.shape}")
    return first


def check_axes(name: str, axes: Sequence[int], ndim: int, shape) -> None:
    if any(not 0 <= a < ndim for a in axes):
        raise ValueError(f"{name}: axes {tuple(axes)} out of range for shape {shape}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"{name}: repeated axis in {tuple(axes)}")


def ints(xs) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def with_dtype(a: AbstractValue, dtype) -> AbstractValue:
    return aval(a.shape, dtype)


class Primitive(PrimitiveOp):
    """Base of tidu's primitives: cotangents accumulate with Add; an elementwise primitive names
    its StableHLO op in ``hlo``, any other overrides ``lower``."""

    # Properties the backends and transforms read instead of names: ``uses_blas``, a product
    # or factorisation the interpreter hands to the BLAS/LAPACK hook; ``bilinear_in``, the operands
    # in which the op is linear while the others are fixed (linear_transpose's check).
    uses_blas = False
    bilinear_in = ()
    hlo: str | None = None

    def lower(self, lo, out, *args):
        """Write this op into a ``tidu.xla.Lowering``; returns the result Value."""
        if self.hlo is None:
            raise NotImplementedError(f"primitive {self.name} has no StableHLO lowering")
        return lo.op(self.hlo, args, out)

    @property
    def lowerable(self) -> bool:
        return self.hlo is not None or type(self).lower is not Primitive.lower

    @classmethod
    def add(cls):
        return Add()


# ---- AD rule helpers: linear (active) and fixed (primal) nodes ----


A, F = True, False  # active, fixed (mask entries)


def ref(x):
    """A ValKey becomes External (a fixed primal value); a local id becomes Local."""
    return External(x) if isinstance(x, ValKey) else Local(x)


def lin(b: FragmentBuilder, op, args, mask) -> int:
    """A linear node: op over args (ValKeys / local ids) with its active mask."""
    return b.emit(op, args, Linear(mask))


def fix(b: FragmentBuilder, op, *args) -> int:
    """A fixed (Primal-mode) node computing a coefficient from primal values."""
    return b.emit(op, args, PRIMAL)


def aval_of(b: FragmentBuilder, x) -> AbstractValue:
    return b.key(ref(x)).aval


def const(b: FragmentBuilder, value, av: AbstractValue) -> int:
    """A fixed constant of av's shape and dtype."""
    c = fix(b, Constant.of(np.asarray(value, dtype=av.dtype)))
    return c if av.shape == () else fix(b, BroadcastInDim(av.shape, ()), c)


def scale(b: FragmentBuilder, coef, t) -> int:
    """coef * t with coef fixed (a ValKey or local id) and t active."""
    return lin(b, Mul(), [coef, t], [F, A])


def conj_fixed(b: FragmentBuilder, x):
    """Conj(x) as a fixed value when x is complex; x itself otherwise."""
    return fix(b, Conj(), x) if aval_of(b, x).dtype.kind == "c" else x


def add_all(b: FragmentBuilder, terms) -> int | None:
    """Sum of the non-None linear terms (None when all are zero)."""
    terms = [t for t in terms if t is not None]
    if not terms:
        return None
    out = terms[0]
    for t in terms[1:]:
        out = lin(b, Add(), [out, t], [A, A])
    return out


def linear_self(op, b: FragmentBuilder, primal_in, tangent_in) -> int:
    """Linearize an op that is linear in all its inputs: the op itself over the tangents, with
    zeros standing in (as fixed operands) for inactive inputs."""
    args, mask = [], []
    for x, t in zip(primal_in, tangent_in):
        if t is None:
            args.append(const(b, 0, x.aval))
            mask.append(F)
        else:
            args.append(t)
            mask.append(A)
    return lin(b, op, args, mask)


def bilinear(op, b: FragmentBuilder, primal_in, t) -> int | None:
    """Tangent of an op linear in each operand separately (Mul, DotGeneral):
    op(dx, y) + op(x, dy), each product with one side fixed, so no linear node is bilinear."""
    x, y = primal_in
    return add_all(b, [lin(b, op, [t[0], y], [A, F]) if t[0] is not None else None,
                       lin(b, op, [x, t[1]], [F, A]) if t[1] is not None else None])


# ---- batching rule helpers (vmap) ----


def batch_size(b, batched) -> int:
    """The batch size: the leading axis of the first batched operand."""
    for x in batched:
        if x is not None:
            return aval_of(b, x).shape[0]
    raise ValueError("a batching rule was called with no batched operand")


def broadcast_batch(b, x, size: int):
    """The unbatched value x repeated along a new leading batch axis of `size`."""
    av = aval_of(b, x)
    return fix(b, BroadcastInDim((size,) + av.shape, tuple(range(1, av.ndim + 1))), x)


def all_batched(b, primal_in, batched) -> list:
    """Every operand with a leading batch axis (unbatched ones broadcast)."""
    size = batch_size(b, batched)
    return [x if x is not None else broadcast_batch(b, p, size) for p, x in zip(primal_in, batched)]


def move_to_front(b, x, axis: int):
    """x with its axis `axis` moved to position 0."""
    if axis == 0:
        return x
    nd = aval_of(b, x).ndim
    perm = (axis,) + tuple(i for i in range(nd) if i != axis)
    return fix(b, Transpose(perm), x)


def same_op_batched(op, b, primal_in, primal_out, batched) -> list:
    """The rule of an op that maps over leading axes (elementwise ops, and ops such as Cholesky
    that take leading batch axes): the same op over all operands batched."""
    args = all_batched(b, primal_in, batched)
    if len(primal_out) == 1:
        return [fix(b, op, *args)]
    first = b.add_op(op, [ref(a) for a in args])
    return list(first)


def shifted(*fields: str):
    """The rule of an op whose attributes `fields` (an axis, or a tuple of axes) name operand
    axes: the same op with those axes one further, over all operands batched."""
    def rule(op, b, primal_in, primal_out, batched):
        changes = {}
        for f in fields:
            v = getattr(op, f)
            changes[f] = tuple(a + 1 for a in v) if isinstance(v, tuple) else v + 1
        new = dataclasses.replace(op, **changes)
        args = all_batched(b, primal_in, batched)
        if len(primal_out) == 1:
            return [fix(b, new, *args)]
        return list(b.add_op(new, [ref(a) for a in args]))
    return rule


# ---- elementwise arithmetic and complex parts ----


class Unary(Primitive):
    """Elementwise f(x) with the output dtype of x; `dtypes` lists what x may be."""

    dtypes = INEXACT
    dtypes_doc = "floating or complex"
    batch = same_op_batched

    def abstract_eval(self, x):
        check_dtype(self.name, x, self.dtypes, self.dtypes_doc)
        return x


class Binary(Primitive):
    """Elementwise f(x, y) over operands of equal shape and dtype."""

    dtypes = NUMERIC
    dtypes_doc = "numeric"
    batch = same_op_batched

    def abstract_eval(self, x, y):
        a = check_same(self.name, (x, y))
        check_dtype(self.name, a, self.dtypes, self.dtypes_doc)
        return a


@register
@dataclass(frozen=True)
class Add(Binary):
    hlo = "stablehlo.add"
    linear = True

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A, A]) if None not in t else (t[0] if t[0] is not None else t[1])]

    def transpose_rule(self, b, ct, inputs, mode):
        return [ct[0] if m else None for m in mode.active_mask]

    def impl(self, x, y):
        return x + y


@register
@dataclass(frozen=True)
class Mul(Binary):
    bilinear_in = (0, 1)
    hlo = "stablehlo.multiply"
    def linearize(self, b, primal_in, primal_out, t):
        return [bilinear(self, b, primal_in, t)]

    def transpose_rule(self, b, ct, inputs, mode):
        m = mode.active_mask
        if m[0] and m[1]:
            raise ValueError("Mul with both operands active is not linear")
        if m[0]:
            return [lin(b, self, [ct[0], conj_fixed(b, inputs[1])], [A, F]), None]
        return [None, lin(b, self, [conj_fixed(b, inputs[0]), ct[0]], [F, A])]

    def impl(self, x, y):
        return x * y


@register
@dataclass(frozen=True)
class Conj(Unary):
    """Complex conjugate; the identity on real operands."""

    linear = True

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        return [lin(b, self, ct, [A])]

    def lower(self, lo, out, x):
        if out.dtype.kind != "c":
            return x
        part = aval(out.shape, real_dtype(out.dtype))
        re, im = lo.op("stablehlo.real", [x], part), lo.op("stablehlo.imag", [x], part)
        return lo.op("stablehlo.complex", [re, lo.op("stablehlo.negate", [im], part)], out)

    def impl(self, x):
        return np.conj(x)


@register
@dataclass(frozen=True)
class Real(Primitive):
    hlo = "stablehlo.real"
    linear = True
    batch = same_op_batched

    def abstract_eval(self, x):
        check_dtype(self.name, x, COMPLEXES, "complex")
        return aval(x.shape, real_dtype(x.dtype))

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        return [lin(b, Convert(inputs[0].dtype.name), ct, [A])]

    def impl(self, x):
        return np.real(x)


@register
@dataclass(frozen=True)
class Imag(Primitive):
    hlo = "stablehlo.imag"
    linear = True
    batch = same_op_batched

    def abstract_eval(self, x):
        check_dtype(self.name, x, COMPLEXES, "complex")
        return aval(x.shape, real_dtype(x.dtype))

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        z = lin(b, Convert(inputs[0].dtype.name), ct, [A])
        return [lin(b, Mul(), [z, const(b, 1j, inputs[0].aval)], [A, F])]

    def impl(self, x):
        return np.imag(x)


# ---- layout, reduction, conversion, literals ----


def _frozen_ints(obj, *names):
    for n in names:
        object.__setattr__(obj, n, ints(getattr(obj, n)))


@register
@dataclass(frozen=True)
class ReduceSum(Primitive):
    """Sum over `axes` (the reduced axes are removed)."""

    axes: tuple[int, ...]
    linear = True

    def __post_init__(self):
        object.__setattr__(self, "axes", tuple(sorted(ints(self.axes))))

    def abstract_eval(self, x):
        check_dtype(self.name, x, NUMERIC, "numeric")
        check_axes(self.name, self.axes, x.ndim, x.shape)
        return aval(tuple(d for i, d in enumerate(x.shape) if i not in self.axes), x.dtype)

    batch = shifted("axes")

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        shape = inputs[0].shape
        kept = tuple(i for i in range(len(shape)) if i not in self.axes)
        return [lin(b, BroadcastInDim(shape, kept), ct, [A])]

    def lower(self, lo, out, x):
        return lo.reduce(x, lo.scalar(0, out.dtype), "stablehlo.add", self.axes, out)

    def impl(self, x):
        return np.sum(x, axis=self.axes, dtype=x.dtype)


@register
@dataclass(frozen=True)
class BroadcastInDim(Primitive):
    """Operand axis i becomes output axis dims[i] (size equal or 1); other axes are broadcast."""

    shape: tuple[int, ...]
    dims: tuple[int, ...]
    linear = True

    def __post_init__(self):
        _frozen_ints(self, "shape", "dims")

    def abstract_eval(self, x):
        check_dtype(self.name, x, ALL, "supported")
        if len(self.dims) != x.ndim:
            raise ValueError(f"{self.name}: dims {self.dims} do not match operand shape {x.shape}")
        if any(not 0 <= d < len(self.shape) for d in self.dims) or \
                any(b <= a for a, b in zip(self.dims, self.dims[1:])):
            raise ValueError(f"{self.name}: dims {self.dims} must be increasing axes of "
                             f"output shape {self.shape}")
        for i, d in enumerate(self.dims):
            if x.shape[i] not in (1, self.shape[d]):
                raise ValueError(f"{self.name}: operand shape {x.shape} cannot broadcast to "
                                 f"{self.shape} with dims {self.dims}")
        return aval(self.shape, x.dtype)

    def batch(self, b, primal_in, primal_out, bt):
        n = batch_size(b, bt)
        return [fix(b, BroadcastInDim((n,) + self.shape, (0,) + tuple(d + 1 for d in self.dims)),
                    bt[0])]

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        in_shape = inputs[0].shape
        summed = [i for i in range(len(self.shape)) if i not in self.dims]
        summed += [d for i, d in enumerate(self.dims) if in_shape[i] == 1 and self.shape[d] != 1]
        out = lin(b, ReduceSum(tuple(summed)), ct, [A]) if summed else ct[0]
        if aval_of(b, out).shape != in_shape:
            out = lin(b, Reshape(in_shape), [out], [A])
        return [out]

    def lower(self, lo, out, x):
        dims = tuple(range(lo.nb)) + lo.ax(self.dims)
        return lo.op("stablehlo.broadcast_in_dim", [x], out,
                     f"broadcast_dimensions = {lo.i64_array(dims)}")

    def impl(self, x):
        expanded = [1] * len(self.shape)
        for i, d in enumerate(self.dims):
            expanded[d] = x.shape[i]
        return np.broadcast_to(np.reshape(x, expanded), self.shape)


@register
@dataclass(frozen=True)
class Reshape(Primitive):
    shape: tuple[int, ...]
    linear = True

    def __post_init__(self):
        _frozen_ints(self, "shape")

    def abstract_eval(self, x):
        check_dtype(self.name, x, ALL, "supported")
        if math.prod(self.shape) != x.size:
            raise ValueError(f"{self.name}: cannot reshape {x.shape} ({x.size} elements) "
                             f"to {self.shape}")
        return aval(self.shape, x.dtype)

    def batch(self, b, primal_in, primal_out, bt):
        return [fix(b, Reshape((batch_size(b, bt),) + self.shape), bt[0])]

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        return [lin(b, Reshape(inputs[0].shape), ct, [A])]

    def lower(self, lo, out, x):
        return lo.op("stablehlo.reshape", [x], out)

    def impl(self, x):
        return np.reshape(x, self.shape)


@register
@dataclass(frozen=True)
class Transpose(Primitive):
    """Output axis i is operand axis perm[i]."""

    perm: tuple[int, ...]
    linear = True

    def __post_init__(self):
        _frozen_ints(self, "perm")

    def abstract_eval(self, x):
        check_dtype(self.name, x, ALL, "supported")
        if sorted(self.perm) != list(range(x.ndim)):
            raise ValueError(f"{self.name}: perm {self.perm} is not a permutation of the axes "
                             f"of shape {x.shape}")
        return aval(tuple(x.shape[p] for p in self.perm), x.dtype)

    def batch(self, b, primal_in, primal_out, bt):
        return [fix(b, Transpose((0,) + tuple(p + 1 for p in self.perm)), bt[0])]

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        inverse = tuple(sorted(range(len(self.perm)), key=self.perm.__getitem__))
        return [lin(b, Transpose(inverse), ct, [A])]

    def lower(self, lo, out, x):
        perm = tuple(range(lo.nb)) + lo.ax(self.perm)
        return lo.op("stablehlo.transpose", [x], out, f"permutation = {lo.i64_array(perm)}")

    def impl(self, x):
        return np.transpose(x, self.perm)


@register
@dataclass(frozen=True)
class Convert(Primitive):
    """Cast to `dtype`; complex to real is refused (take Real first)."""

    dtype: str

    def __post_init__(self):
        dt = np.dtype(self.dtype)
        check_dtype(self.name, aval((), dt), ALL, "supported")
        object.__setattr__(self, "dtype", dt.name)

    linear = True

    def abstract_eval(self, x):
        check_dtype(self.name, x, ALL, "supported")
        if x.dtype in COMPLEXES and np.dtype(self.dtype) not in COMPLEXES:
            raise TypeError(f"{self.name}: cannot convert {x.dtype} to {self.dtype} "
                            f"(take real() first)")
        return aval(x.shape, self.dtype)

    batch = same_op_batched

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        src = inputs[0].dtype
        out = ct[0]
        if src.kind != "c" and np.dtype(self.dtype).kind == "c":  # adjoint of embedding: Re
            out = lin(b, Real(), [out], [A])
        if aval_of(b, out).dtype != src:
            out = lin(b, Convert(src.name), [out], [A])
        return [out]

    def lower(self, lo, out, x):
        return lo.op("stablehlo.convert", [x], out)

    def impl(self, x):
        x, dt = np.asarray(x), np.dtype(self.dtype)
        if dt.kind in "iu" and x.dtype.kind in "fc":  # as the C++ kernel: saturate, NaN -> 0
            return saturating_int(x.real, dt)
        return (x != 0) if dt.kind == "b" and x.dtype.kind == "c" else x.astype(dt)


@register
@dataclass(frozen=True)
class Constant(Primitive):
    """A literal array; identity (and hash-consing) is by shape, dtype and exact bytes."""

    data: bytes
    shape: tuple[int, ...]
    dtype: str
    differentiable = False

    @staticmethod
    def of(value, dtype=None) -> "Constant":
        arr = np.array(value, dtype=dtype, order="C", copy=True)
        check_dtype("Constant", aval((), arr.dtype), ALL, "supported")
        return Constant(arr.tobytes(), ints(arr.shape), arr.dtype.name)

    @property
    def value(self) -> np.ndarray:
        return np.frombuffer(self.data, dtype=self.dtype).reshape(self.shape)

    def attrs(self):
        v = self.value
        shown = np.array2string(v, threshold=6, separator=",").replace("\n", "") if v.ndim \
            else repr(v.item())
        return [shown, self.dtype] if v.ndim == 0 else [shown, f"{self.dtype}{list(self.shape)}"]

    def abstract_eval(self):
        return aval(self.shape, self.dtype)

    def lower(self, lo, out):
        ty = lo.tensor_type(self.shape, self.dtype)
        return lo.source("stablehlo.constant", f"value = {lo.dense_hex(self.value)} : {ty}", out)

    def impl(self):
        return self.value
