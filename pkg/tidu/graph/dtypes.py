"""Abstract values (shape, dtype), interned to dense ids, and the dtype classes every layer
above names (graph layer: no primitive, no AD, no backend)."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import ml_dtypes  # noqa: F401 - registers bfloat16 with numpy (np.dtype("bfloat16")), as jax does
import numpy as np

from tidu._native import _core

__all__ = ["AbstractValue", "aval", "aval_of", "MAX_ELEMENTS", "FLOATS", "HALF_FLOATS", "COMPLEXES",
           "INTS",
           "BOOL", "INEXACT", "NUMERIC", "REAL", "ALL", "SIGNED_INTS", "UNSIGNED_INTS",
           "real_dtype", "accumulation_dtype", "kind_of", "is_differentiable", "saturating_int",
           "lattice_result_type", "promote_types", "to_inexact_dtype", "WEAK_KINDS"]


_DTYPES = {np.dtype(n) for n in
           ("float32", "float64", "complex64", "complex128", "int32", "int64", "bool",
            "uint32", "int8", "int16", "uint8", "uint16", "uint64", "float16", "bfloat16")}


# The most elements an array may have (product of its non-zero dimensions): 2^48, so that byte
# sizes, strides and offsets fit in 64 bits with room to spare (cpp/include/tidu/checked.hpp).
MAX_ELEMENTS = 1 << 48


class AbstractValue:
    """Shape and dtype of a value; interned, so `is` and `==` agree and `.id` is dense."""

    __slots__ = ("shape", "dtype", "id", "size", "__weakref__")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, id_: int):
        self.shape = shape
        self.dtype = dtype
        self.id = id_
        self.size = math.prod(shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"

    def __reduce__(self):
        return (aval, (self.shape, self.dtype.name))


_avals: dict[tuple, AbstractValue] = {}
_aval_list: list[AbstractValue] = []
_lock = threading.Lock()


def aval(shape: Sequence[int] | int, dtype: Any) -> AbstractValue:
    """The interned abstract value for (shape, dtype); raises on an unsupported dtype or shape."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    key = (tuple(shape), dtype)
    hit = _avals.get(key)
    if hit is not None:
        return hit
    dt = np.dtype(dtype)
    if not dt.isnative:  # a big-endian array's values, converted where the program reads them
        dt = dt.newbyteorder("=")
    if dt not in _DTYPES:
        raise TypeError(f"unsupported dtype {dt}; tidu supports "
                        f"{', '.join(sorted(d.name for d in _DTYPES))}")
    shp = tuple(int(d) for d in shape)
    if any(d < 0 for d in shp):
        raise ValueError(f"negative dimension in shape {shp}")
    if math.prod(d for d in shp if d) > MAX_ELEMENTS:  # as the C++ validator (checked.hpp)
        raise ValueError(f"shape {shp} has more than 2**48 elements (the product of its non-zero "
                         "dimensions), the most an array may hold")
    return _core.call_locked(_lock, _intern_aval, shp, dt, key)


def _intern_aval(shp: tuple, dt: np.dtype, key) -> AbstractValue:
    """The canonical AbstractValue of (shp, dt), made if new, also found under key (aval's
    argument form); called holding _lock (_core.call_locked says why not `with _lock:`)."""
    canon = _avals.get((shp, dt.name))
    if canon is None:
        canon = AbstractValue(shp, dt, len(_aval_list))
        _aval_list.append(canon)
        _avals[(shp, dt.name)] = canon
    _avals[key] = canon
    return canon


def aval_of(aval_id: int) -> AbstractValue:
    return _aval_list[aval_id]



# ---- dtype classes ----

HALF_FLOATS = frozenset(np.dtype(d) for d in ("float16", "bfloat16"))  # computed in float32
FLOATS = frozenset(np.dtype(d) for d in ("float32", "float64")) | HALF_FLOATS
COMPLEXES = frozenset(np.dtype(d) for d in ("complex64", "complex128"))
SIGNED_INTS = frozenset(np.dtype(d) for d in ("int8", "int16", "int32", "int64"))
UNSIGNED_INTS = frozenset(np.dtype(d) for d in ("uint8", "uint16", "uint32", "uint64"))
INTS = SIGNED_INTS | UNSIGNED_INTS
BOOL = np.dtype("bool")
INEXACT = FLOATS | COMPLEXES
NUMERIC = INEXACT | INTS
REAL = FLOATS | INTS
ALL = NUMERIC | {BOOL}

_REAL_OF = {np.dtype("complex64"): np.dtype("float32"), np.dtype("complex128"): np.dtype("float64")}


def real_dtype(dt: np.dtype) -> np.dtype:
    """float32 for complex64, float64 for complex128, dt itself otherwise."""
    return _REAL_OF.get(dt, dt)


_I64, _U64 = np.dtype("int64"), np.dtype("uint64")


def accumulation_dtype(dt: np.dtype) -> np.dtype:
    """The dtype sum and prod accumulate dt in (numpy's and jax's under x64): bool and signed
    integers int64, unsigned integers uint64, anything else dt itself."""
    return _I64 if dt in SIGNED_INTS or dt == BOOL else _U64 if dt in UNSIGNED_INTS else dt


def is_differentiable(dt: np.dtype) -> bool:
    return dt in INEXACT


def saturating_int(v: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Floats as integer dtype dt: out of range saturates, NaN is 0 (XLA's and the interpreter's
    Convert; numpy's astype leaves those undefined)."""
    info = np.iinfo(dt)
    lo = v.dtype.type(info.min)  # the bounds, powers of two (or 0), are exact in every float type
    hi = v.dtype.type(-info.min if info.min else 2.0 ** info.bits)
    out = np.where((v > lo) & (v < hi), v, 0).astype(dt)
    out[v <= lo] = info.min
    out[v >= hi] = info.max
    return out


# ---- type promotion: jax's lattice (https://docs.jax.dev/en/latest/type_promotion.html) ----
#
# The nodes are the dtypes plus three weak kinds: "i*", "f*", "c*" (a Python int, float, complex,
# or a value computed from weakly typed values only).  The result of promoting some operands is
# their least upper bound; where it is a weak kind, it is that kind's default dtype (int64,
# float64, complex128: jax's under x64) and weakly typed.

_LATTICE_EDGES = {
    "bool": ("i*",),
    "i*": ("uint8", "int8"),
    "uint8": ("int16", "uint16"), "uint16": ("int32", "uint32"), "uint32": ("int64", "uint64"),
    "uint64": ("f*",),
    "int8": ("int16",), "int16": ("int32",), "int32": ("int64",), "int64": ("f*",),
    "f*": ("bfloat16", "float16", "c*"),
    "bfloat16": ("float32",), "float16": ("float32",), "float32": ("float64", "complex64"),
    "float64": ("complex128",),
    "c*": ("complex64",), "complex64": ("complex128",), "complex128": (),
}
WEAK_KINDS = {"i*": "int64", "f*": "float64", "c*": "complex128"}


def _upper_sets() -> dict[str, frozenset]:
    up: dict[str, frozenset] = {}

    def visit(n: str) -> frozenset:
        if n not in up:
            s = {n}
            for m in _LATTICE_EDGES[n]:
                s |= visit(m)
            up[n] = frozenset(s)
        return up[n]

    for n in _LATTICE_EDGES:
        visit(n)
    return up


_UP = _upper_sets()
_NODE_OF_KIND = {"b": "bool", "i": "i*", "u": "i*", "f": "f*", "c": "c*"}
_lub_memo: dict[frozenset, str] = {}


def _lub(nodes: frozenset) -> str:
    hit = _lub_memo.get(nodes)
    if hit is None:
        common = frozenset.intersection(*[_UP[n] for n in nodes])
        # the least upper bound: the one common bound below all the others
        (hit,) = [n for n in common if _UP[n] >= common]
        _lub_memo[nodes] = hit
    return hit


def _node(dt: np.dtype, weak: bool) -> str:
    """The lattice node of a value of dtype dt (weakly typed or not); jax's _jax_type."""
    if weak and dt != BOOL:
        return "f*" if dt in HALF_FLOATS else _NODE_OF_KIND[dt.kind]  # bfloat16's kind is "V"
    name = dt.name
    if name not in _UP:
        raise TypeError(f"no type promotion rule for dtype {dt}")
    return name


_rt_memo: dict[tuple, tuple[np.dtype, bool]] = {}


def lattice_result_type(*operands: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """(dtype, weak) of the result of combining operands given as (dtype, weakly typed) pairs:
    jax's ``dtypes.lattice_result_type`` under x64.  A Python bool is a strong bool; a Python
    int, float, complex is (int64 / float64 / complex128, True)."""
    key = tuple(operands)
    hit = _rt_memo.get(key)
    if hit is not None:
        return hit
    if not operands:
        raise TypeError("no operands to promote")
    dts = [np.dtype(d) for d, _ in operands]
    weaks = [bool(w) for _, w in operands]
    if len(dts) == 1:
        out, weak = dts[0], weaks[0]
    elif len(set(dts)) == 1 and not all(weaks):
        out, weak = dts[0], False
    elif all(weaks):  # the bound of the strong counterparts, weakly typed (no weak int16)
        n = _lub(frozenset(_node(d, False) for d in dts))
        out, weak = np.dtype(WEAK_KINDS.get(n, n)), True
    else:
        n = _lub(frozenset(_node(d, w) for d, w in zip(dts, weaks)))
        weak = n in WEAK_KINDS
        out = np.dtype(WEAK_KINDS.get(n, n))
    weak = weak and out != BOOL
    if len(_rt_memo) < 4096:
        _rt_memo[key] = (out, weak)
    return out, weak


def promote_types(a: Any, b: Any) -> np.dtype:
    """The dtype two strongly typed dtypes promote to: ``jnp.promote_types`` under x64."""
    da, db = np.dtype(a), np.dtype(b)
    n = _lub(frozenset((_node(da, False), _node(db, False))))
    return np.dtype(WEAK_KINDS.get(n, n))


# jax's to_inexact_dtype: the float dtype a non-float computes a float function in
_TO_INEXACT = {np.dtype(k): np.dtype(v) for k, v in (
    ("bool", "float32"), ("int8", "float32"), ("uint8", "float32"), ("int16", "float32"),
    ("uint16", "float32"), ("int32", "float32"), ("uint32", "float32"), ("int64", "float64"),
    ("uint64", "float64"))}


def to_inexact_dtype(dt: Any) -> np.dtype:
    """jax's to_inexact_dtype: float32 for bool and integers up to 32 bits, float64 for 64-bit
    integers, dt itself for floats and complexes."""
    d = np.dtype(dt)
    return _TO_INEXACT.get(d, d)


_BF16 = np.dtype("bfloat16")


def kind_of(dt: Any) -> str:
    """numpy's kind character of dt, with bfloat16 a float ("f"): numpy sees ml_dtypes' bfloat16
    as kind "V" (void), so the code that asks ``dt.kind == "f"`` asks this instead."""
    d = np.dtype(dt)
    return "f" if d == _BF16 else d.kind
