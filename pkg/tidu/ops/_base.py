"""Shared helpers for primitive definitions: dtype classes and shape/dtype checks."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from tidu.graph import AbstractValue, aval
from tidu.ad.rules import PrimitiveOp

FLOATS = frozenset(np.dtype(d) for d in ("float32", "float64"))
COMPLEXES = frozenset(np.dtype(d) for d in ("complex64", "complex128"))
INTS = frozenset(np.dtype(d) for d in ("int32", "int64"))
BOOL = np.dtype("bool")
INEXACT = FLOATS | COMPLEXES
NUMERIC = INEXACT | INTS
REAL = FLOATS | INTS
ALL = NUMERIC | {BOOL}

_REAL_OF = {np.dtype("complex64"): np.dtype("float32"), np.dtype("complex128"): np.dtype("float64")}


def real_dtype(dt: np.dtype) -> np.dtype:
    """float32 for complex64, float64 for complex128, dt itself otherwise."""
    return _REAL_OF.get(dt, dt)


def is_differentiable(dt: np.dtype) -> bool:
    return dt in INEXACT


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
        from tidu.ops.elementwise import Add

        return Add()
