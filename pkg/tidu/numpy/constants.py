"""numpy's constants and scalar types under ``jax.numpy``'s names: ``td.float32``,
``td.int64``, ``td.bool_``, ``td.pi``, ``td.inf``, ``td.nan``, ``td.newaxis``, ``td.finfo`` ...

A scalar type is numpy's dtype wherever a dtype is expected (``x.astype(td.float32)``,
``td.zeros(3, td.int32)``, ``np.dtype(td.float32)``) and, called, converts its argument as jax's
does: ``td.float32(x)`` of a traced value is ``x.astype(float32)``; of a Python number or numpy
array it is a numpy array of that dtype (jax returns a jax Array).
"""

from __future__ import annotations

import numpy as np

from tidu.numpy.creation import asarray

__all__ = [
    "bool_", "complex64", "complex128", "dtype", "e", "euler_gamma", "finfo", "float32",
    "float64", "iinfo", "inf", "int8", "int16", "int32", "int64", "nan", "newaxis", "pi", "uint8",
    "uint16", "uint32", "uint64",
]


class _ScalarType:
    """A jax.numpy scalar type: numpy's dtype to numpy (``.dtype``), a conversion when called."""

    __slots__ = ("dtype",)

    def __init__(self, name: str):
        self.dtype = np.dtype(name)

    def __call__(self, x):
        return asarray(x, dtype=self.dtype)

    def __eq__(self, other):
        if isinstance(other, _ScalarType):
            return self.dtype == other.dtype
        try:
            return self.dtype == np.dtype(other)
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash(self.dtype)

    def __repr__(self):
        return f"td.{self.dtype.name if self.dtype != np.bool_ else 'bool_'}"


float32, float64 = _ScalarType("float32"), _ScalarType("float64")
int8, int16 = _ScalarType("int8"), _ScalarType("int16")
int32, int64 = _ScalarType("int32"), _ScalarType("int64")
uint8, uint16 = _ScalarType("uint8"), _ScalarType("uint16")
uint32, uint64 = _ScalarType("uint32"), _ScalarType("uint64")
complex64, complex128 = _ScalarType("complex64"), _ScalarType("complex128")
bool_ = _ScalarType("bool")

pi, e, euler_gamma = np.pi, np.e, np.euler_gamma
inf, nan = np.inf, np.nan
newaxis = None
finfo, iinfo = np.finfo, np.iinfo


def dtype(obj) -> np.dtype:
    """numpy's dtype of obj (a tidu scalar type, a dtype name, a numpy type or a traced value)."""
    if isinstance(obj, _ScalarType):
        return obj.dtype
    d = getattr(obj, "dtype", None)
    return np.dtype(d if d is not None and not isinstance(obj, type) else obj)
