"""numpy's constants and scalar types under ``jax.numpy``'s names: ``td.float32``,
``td.int64``, ``td.bool_``, ``td.pi``, ``td.inf``, ``td.nan``, ``td.newaxis``, ``td.finfo`` ...

A scalar type is numpy's dtype wherever a dtype is expected (``x.astype(td.float32)``,
``td.zeros(3, td.int32)``, ``np.dtype(td.float32)``) and, called, converts its argument as jax's
does: ``td.float32(x)`` of a traced value is ``x.astype(float32)``; of a Python number or numpy
array it is a numpy array of that dtype (jax returns a jax Array).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tidu.graph.dtypes import promote_types as _lattice_promote
from tidu.numpy.creation import asarray
from tidu.trace.tracer import Tracer
from tidu.trace.tracer import result_type as _result_type

__all__ = [
    "bfloat16", "bool_", "complex64", "complex128", "dtype", "e", "euler_gamma", "finfo", "float16",
    "float32",
    "float64", "iinfo", "inf", "int8", "int16", "int32", "int64", "nan", "newaxis", "pi", "uint8",
    "uint16", "uint32", "uint64",
    # other spellings of those dtypes, numpy's abstract categories and the dtype functions
    "bool", "cdouble", "complex_", "csingle", "double", "float_", "int_", "single", "uint",
    "character", "complexfloating", "flexible", "floating", "generic", "inexact", "integer",
    "number", "object_", "signedinteger", "unsignedinteger",
    "can_cast", "ComplexWarning", "get_printoptions", "isdtype", "issubdtype", "ndarray",
    "printoptions", "promote_types", "result_type", "set_printoptions",
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


float16, bfloat16 = _ScalarType("float16"), _ScalarType("bfloat16")  # computed in float32
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
finfo, iinfo = ml_dtypes.finfo, np.iinfo  # ml_dtypes' finfo knows bfloat16, as jax's


def dtype(obj) -> np.dtype:
    """numpy's dtype of obj (a tidu scalar type, a dtype name, a numpy type or a traced value)."""
    if isinstance(obj, _ScalarType):
        return obj.dtype
    d = getattr(obj, "dtype", None)
    return np.dtype(d if d is not None and not isinstance(obj, type) else obj)


# jax.numpy's other names of the same dtypes (jax under x64: int_ is int64, float_ float64)
bool = bool_  # noqa: A001 - jax.numpy's name
single, double = float32, float64
csingle, cdouble = complex64, complex128
int_, uint = int64, uint64
float_, complex_ = float64, complex128

# numpy's abstract scalar categories, for issubdtype (jax.numpy re-exports numpy's own)
generic, number, inexact, floating = np.generic, np.number, np.inexact, np.floating
complexfloating, integer = np.complexfloating, np.integer
signedinteger, unsignedinteger = np.signedinteger, np.unsignedinteger
character, flexible, object_ = np.character, np.flexible, np.object_
ComplexWarning = np.exceptions.ComplexWarning
printoptions, get_printoptions, set_printoptions = (
    np.printoptions, np.get_printoptions, np.set_printoptions)  # results are numpy arrays


def _dt(x):
    """x's dtype for the dtype functions: a dtype-like, a traced value or an array; Python
    scalars stay as they are (numpy's weak scalars)."""
    if isinstance(x, _ScalarType):
        return x.dtype
    if isinstance(x, (int, float, complex)):
        return x
    d = getattr(x, "dtype", None)
    if d is not None and not isinstance(x, type):
        return np.dtype(d)
    return np.dtype(x)


def issubdtype(arg1, arg2) -> bool:
    """numpy's issubdtype, taking tidu's scalar types (``issubdtype(td.float32, td.floating)``)."""
    a = arg1.dtype if isinstance(arg1, _ScalarType) else arg1
    b = arg2.dtype if isinstance(arg2, _ScalarType) else arg2
    return bool(np.issubdtype(a, b))


_KINDS = {
    "bool": lambda d: d.kind == "b",
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": lambda d: d.kind == "f",
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iufc",
}


def isdtype(dtype, kind) -> bool:
    """The array API's ``isdtype``: `kind` a dtype, one of the kind names ('bool', 'signed
    integer', 'unsigned integer', 'integral', 'real floating', 'complex floating', 'numeric') or a
    tuple of these."""
    d = np.dtype(_dt(dtype))
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(f"isdtype: unknown kind {k!r}; expected one of {sorted(_KINDS)}")
            if _KINDS[k](d):
                return True
        elif d == np.dtype(_dt(k)):
            return True
    return False


def promote_types(a, b) -> np.dtype:
    """The dtype two dtypes promote to: jax's lattice (``jnp.promote_types`` under x64,
    tidu.graph.dtypes; docs/frontend.md "Types: weak types and promotion")."""
    return _lattice_promote(_dt(a), _dt(b))


def result_type(*args) -> np.dtype:
    """The dtype of an operation on `args` (dtypes, arrays, traced values, Python scalars as
    weak): ``jnp.result_type`` under x64 (tidu.trace.tracer.result_type)."""
    return _result_type(*args)


def can_cast(from_, to, casting: str = "safe") -> bool:
    """numpy's can_cast of dtypes (a traced value or array stands for its dtype)."""
    return bool(np.can_cast(np.dtype(_dt(from_)), np.dtype(_dt(to)), casting))


class _ArrayMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, (np.ndarray, Tracer))


class ndarray(metaclass=_ArrayMeta):  # noqa: N801 - jax.numpy's name
    """For ``isinstance(x, td.ndarray)``: true of traced values and of numpy arrays (what tidu's
    functions return outside a trace and what td.jit returns). Not constructible."""

    def __new__(cls, *args, **kwargs):
        raise TypeError("td.ndarray is for isinstance checks; create arrays with td.asarray")
