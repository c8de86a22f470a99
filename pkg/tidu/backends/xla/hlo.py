"""StableHLO text builders: tensor types, exact hex constants, the Value a lowering returns and
the Lowering (``lo``) each primitive's ``lower`` method writes into."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

__all__ = ["ELEMENT_DTYPE", "Lowering", "Value", "dense_hex", "i64_array", "tensor_type"]


# ---- MLIR text ----

_ELEMENT = {"float32": "f32", "float64": "f64", "complex64": "complex<f32>",
            "complex128": "complex<f64>", "int32": "i32", "int64": "i64", "bool": "i1",
            "uint32": "ui32", "int8": "i8", "int16": "i16", "uint8": "ui8", "uint16": "ui16",
            "uint64": "ui64", "float16": "f16", "bfloat16": "bf16"}
ELEMENT_DTYPE = {el: name for name, el in _ELEMENT.items()}  # "ui8" -> "uint8"


def tensor_type(shape: Sequence[int], dtype) -> str:
    """``tensor<2x3xf64>`` for shape (2, 3) and float64."""
    el = _ELEMENT[np.dtype(dtype).name]
    return f"tensor<{''.join(f'{d}x' for d in shape)}{el}>"


def i64_array(xs: Sequence[int]) -> str:
    """A dense i64 array attribute: ``array<i64: 0, 1>``."""
    xs = list(xs)
    return f"array<i64: {', '.join(map(str, xs))}>" if xs else "array<i64>"


def dense_hex(arr: np.ndarray) -> str:
    """An exact dense literal (little-endian bytes); a single element is a splat."""
    a = np.ascontiguousarray(arr)
    raw = a.reshape(-1).view(np.uint8).reshape(a.size, a.itemsize)
    if a.size > 1 and (raw == raw[:1]).all():
        a = a.reshape(-1)[:1]  # bit-identical elements: a splat
    if a.dtype == np.bool_:  # i1 literals are written out: true/false, nested like the shape

        return "dense<" + json.dumps(a.reshape(-1)[0].item() if a.size == 1 else a.tolist()) + ">"
    le = a.astype(a.dtype.newbyteorder("<"), copy=False)
    return f'dense<"0x{le.tobytes().hex().upper()}">'


class Value:
    """An SSA value of the function being written: its name and tensor type."""

    __slots__ = ("name", "type")

    def __init__(self, name: str, type_: str):
        self.name = name
        self.type = type_

    def __repr__(self) -> str:
        return f"{self.name}: {self.type}"


class Lowering:
    """What a primitive's ``lower(lo, out, *args)`` writes into: generic-form StableHLO operations.

    ``out`` is the result's AbstractValue (unbatched); ``args`` are operand Values.  With a batch
    (``nb == 1``) every tensor has a leading batch axis: rules shift axis numbers with ``ax``
    and batch shapes with ``shape``/``type``.
    """

    def __init__(self, batch: int | None = None, platform: str = "cpu"):
        self.batch = batch
        self.nb = 0 if batch is None else 1
        self.lines: list[str] = []
        self._n = 0
        self.platform = platform  # the target, for rules that splice platform-specific code
        # private func.func definitions by name (backends/xla/splice.py)
        self.funcs: dict[str, str] = {}

    # -- text helpers, so a primitive's lower needs no imports --
    tensor_type = staticmethod(tensor_type)
    i64_array = staticmethod(i64_array)
    dense_hex = staticmethod(dense_hex)

    # -- naming and types --
    def fresh(self) -> str:
        self._n += 1
        return f"%v{self._n}"

    def shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        return ((self.batch,) if self.nb else ()) + tuple(shape)

    def type(self, av) -> str:
        return tensor_type(self.shape(av.shape), av.dtype)

    def ax(self, axes: Sequence[int]) -> tuple[int, ...]:
        """Operand axis numbers shifted past the batch axis."""
        return tuple(int(a) + self.nb for a in axes)

    def lead(self, value) -> tuple:
        """A per-axis attribute with the batch axis's entry (``value``) in front."""
        return (value,) * self.nb

    # -- operations --
    def op(self, name: str, args: Sequence[Value], out, attrs: str = "",
           region: str = "", batched: bool = True) -> Value:
        """``%r = "name"(args) ({region}) {attrs} : (arg types) -> out type``; out is an
        AbstractValue (batched unless ``batched=False``) or a tensor type string."""
        ty = out if isinstance(out, str) else (
            self.type(out) if batched else tensor_type(out.shape, out.dtype))
        r = self.fresh()
        reg = f" ({{\n{region}}})" if region else ""
        att = f" {{{attrs}}}" if attrs else ""
        self.lines.append(f'    {r} = "{name}"({", ".join(a.name for a in args)}){reg}{att} : '
                          f'({", ".join(a.type for a in args)}) -> {ty}')
        return Value(r, ty)

    def scalar(self, value, dtype) -> Value:
        """An unbatched rank-0 constant."""
        arr = np.asarray(value, dtype=dtype)
        ty = tensor_type((), arr.dtype)
        r = self.fresh()
        self.lines.append(f'    {r} = "stablehlo.constant"() {{value = {dense_hex(arr)} : {ty}}} '
                          f': () -> {ty}')
        return Value(r, ty)

    def source(self, name: str, attrs: str, out) -> Value:
        """An operation with no operands (constant, iota) at out's shape, broadcast over the
        batch axis when there is one."""
        ty = tensor_type(out.shape, out.dtype)
        r = self.fresh()
        self.lines.append(f'    {r} = "{name}"() {{{attrs}}} : () -> {ty}')
        v = Value(r, ty)
        if self.nb:
            v = self.op("stablehlo.broadcast_in_dim", [v], out,
                        f"broadcast_dimensions = {i64_array(self.ax(range(len(out.shape))))}")
        return v

    def reduce(self, x: Value, init: Value, body_op: str, axes: Sequence[int], out) -> Value:
        """``stablehlo.reduce`` of x over `axes` (unshifted) with a binary body op."""
        st = init.type
        a, b, s = self.fresh(), self.fresh(), self.fresh()
        region = (f"    ^bb0({a}: {st}, {b}: {st}):\n"
                  f'      {s} = "{body_op}"({a}, {b}) : ({st}, {st}) -> {st}\n'
                  f'      "stablehlo.return"({s}) : ({st}) -> ()\n    ')
        return self.op("stablehlo.reduce", [x, init], out,
                       f"dimensions = {i64_array(self.ax(axes))}", region=region)
