"""Primitives with no differentiable operand: Constant, Iota, StopGradient."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu.graph import aval
from tidu.ops._batching import same_op_batched
from tidu.ops._base import Primitive, ALL, NUMERIC, check_dtype, ints
from tidu.ad.rules import register


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
        from tidu.backends.xla import dense_hex, tensor_type

        return lo.source("stablehlo.constant",
                         f"value = {dense_hex(self.value)} : {tensor_type(self.shape, self.dtype)}",
                         out)

    def impl(self):
        return self.value


@register
@dataclass(frozen=True)
class Iota(Primitive):
    """0, 1, 2, ... along `dimension`, broadcast over the other axes of `shape`."""

    shape: tuple[int, ...]
    dtype: str
    dimension: int
    differentiable = False

    def __post_init__(self):
        object.__setattr__(self, "shape", ints(self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype).name)

    def abstract_eval(self):
        a = aval(self.shape, self.dtype)
        check_dtype(self.name, a, NUMERIC, "numeric")
        if not 0 <= self.dimension < len(self.shape):
            raise ValueError(f"{self.name}: dimension {self.dimension} out of range for "
                             f"shape {self.shape}")
        return a

    def lower(self, lo, out):
        return lo.source("stablehlo.iota", f"iota_dimension = {self.dimension} : i64", out)

    def impl(self):
        idx = np.arange(self.shape[self.dimension], dtype=self.dtype)
        expanded = [1] * len(self.shape)
        expanded[self.dimension] = self.shape[self.dimension]
        return np.broadcast_to(idx.reshape(expanded), self.shape)


@register
@dataclass(frozen=True)
class StopGradient(Primitive):
    """The identity on values; no tangent flows through it."""

    batch = same_op_batched

    differentiable = False

    def abstract_eval(self, x):
        check_dtype(self.name, x, ALL, "supported")
        return x

    def lower(self, lo, out, x):
        return x

    def impl(self, x):
        return x
