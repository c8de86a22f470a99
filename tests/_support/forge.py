"""Forged .tidu files: parse a program file into its arrays, edit fields (aimed at integer
extremes and overflow-crafted combinations), re-serialize with the payload size and checksum
recomputed, so that the forgeries reach the validator and the evaluator.

    python tests/_support/forge.py --out DIR --n 5000 --seed 0   # forged files + manifest.txt
    python tests/_support/forge.py --check DIR                    # Python loader+eval over them

Format (cpp/include/tidu/file.hpp): "TIDUPROG" | u32 version | u32 0 | u64 payload bytes |
u64 FNV-1a-64(payload); payload (version 2): a program: 13 arrays (u64 count + elements), two
name lists, then a u64 count of nested programs (loop bodies, branches) laid out the same way.
"""

from __future__ import annotations

import argparse
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes  # noqa: F401 - registers bfloat16 with numpy (DTYPES names it)
import numpy as np

FIELDS = [("slot_dtype", np.uint8), ("slot_ndim", np.uint32), ("shapes", np.int64),
          ("opcode", np.uint8), ("in_off", np.uint32), ("in_slots", np.uint32),
          ("out_off", np.uint32), ("out_slots", np.uint32), ("attr_off", np.uint32),
          ("attrs", np.int64),
          ("consts", np.uint8), ("inputs", np.uint32), ("outputs", np.uint32)]
MAGIC, VERSION = b"TIDUPROG", 2
# Mirrors of the C++ tables (tests/backends/test_forged_files.py checks them against tidu._eval).
OPCODES = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Neg", "Conj", "Exp", "Log", "Sin",
           "Cos", "Tanh", "Sqrt", "Rsqrt", "Expm1", "Log1p", "Sign", "StopGradient", "Real",
           "Imag", "Abs", "Compare", "Select", "Convert", "ReduceSum", "ReduceMax",
           "BroadcastInDim", "Reshape", "Transpose", "DotGeneral", "Slice", "Pad", "Concatenate",
           "Constant", "Iota", "TriangularSolve", "Cholesky", "Gather", "Scatter", "DynamicSlice",
           "DynamicUpdateSlice", "ReduceMin", "ReduceProd", "ReduceAnd", "ReduceOr", "ArgMax",
           "ArgMin", "Cumsum", "Cumprod", "Cummax", "Cummin", "LinearScan", "Sort", "Floor",
           "Ceil", "Round", "Tan", "Atan", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Acosh",
           "Atanh", "Erf", "Erfc", "ErfInv", "Cbrt", "Logistic", "IsFinite", "Rem", "Atan2", "LU",
           "LUPermute", "Eigh", "QR", "SVD", "Rev", "Scan", "While", "Cond", "Checkpoint", "And",
           "Or", "Xor", "Not", "ShiftLeft", "ShiftRightArithmetic", "ShiftRightLogical",
           "Conv", "ReduceWindowSum", "ReduceWindowMax", "ReduceWindowMin", "Threefry2x32",
           "Threefry2x32Iota", "HostCallback", "Tie", "Fft", "Lgamma", "Eig",
           "BitcastConvertType", "Schur", "Hessenberg", "SelectAndGatherAdd",
           "SelectAndScatterAdd", "SearchSorted", "Geqrf"]
DTYPES = ["float32", "float64", "complex64", "complex128", "int32", "int64", "bool", "uint32",
          "int8", "int16", "uint8", "uint16", "uint64", "float16", "bfloat16"]
OP = {n: i for i, n in enumerate(OPCODES)}
DT = {n: i for i, n in enumerate(DTYPES)}
I64_MAX, I64_MIN = 2**63 - 1, -2**63


def fnv1a(data: bytes) -> int:
    """FNV-1a-64, as tidu::io::fnv1a (vectorised over 8 lanes would change it: plain loop)."""
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def seal(payload: bytes) -> bytes:
    """A file around a payload, with a correct size and checksum."""
    return MAGIC + struct.pack("<IIQQ", VERSION, 0, len(payload), fnv1a(payload)) + payload


@dataclass
class Prog:
    """The arrays of a program file (numpy, the file's element types) and its name lists."""
    a: dict[str, np.ndarray]
    input_names: list[bytes] = field(default_factory=list)
    output_names: list[bytes] = field(default_factory=list)
    subs: list["Prog"] = field(default_factory=list)  # nested programs

    def copy(self) -> Prog:
        return Prog({k: v.copy() for k, v in self.a.items()}, list(self.input_names),
                    list(self.output_names), [q.copy() for q in self.subs])

    def payload(self) -> bytes:
        out = bytearray()
        for name, dt in FIELDS:
            v = np.ascontiguousarray(self.a[name], dtype=dt)
            out += struct.pack("<Q", v.size) + v.tobytes()
        for names in (self.input_names, self.output_names):
            out += struct.pack("<Q", len(names))
            for s in names:
                out += struct.pack("<I", len(s)) + s
        out += struct.pack("<Q", len(self.subs))
        for q in self.subs:
            out += q.payload()
        return bytes(out)

    def to_bytes(self) -> bytes:
        return seal(self.payload())

    # ---- views used by the mutators and the checker ----
    def shape_of(self, s: int) -> list[int]:
        begin = int(np.sum(self.a["slot_ndim"][:s], dtype=np.uint64))
        return [int(d) for d in self.a["shapes"][begin:begin + int(self.a["slot_ndim"][s])]]

    def nbytes(self, s: int) -> int:
        """Bytes of slot s as Python ints (no wrap), per the declared dtype and shape."""
        dt = int(self.a["slot_dtype"][s])
        item = np.dtype(DTYPES[dt]).itemsize if dt < len(DTYPES) else 0
        return int(np.prod(self.shape_of(s), dtype=object)) * item

    def instr_attrs(self, i: int) -> tuple[int, int]:
        return int(self.a["attr_off"][i]), int(self.a["attr_off"][i + 1])

    def out_slot(self, i: int) -> int:
        return int(self.a["out_slots"][self.a["out_off"][i]])


def parse(data: bytes) -> Prog:
    """The arrays of a well-formed file (raises ValueError otherwise; checksum not checked)."""
    if data[:8] != MAGIC or len(data) < 32:
        raise ValueError("not a tidu program")
    prog, pos = _parse_at(data, 32)
    return prog


def _parse_at(data: bytes, pos: int) -> tuple[Prog, int]:
    a = {}
    for name, dt in FIELDS:
        (n,) = struct.unpack_from("<Q", data, pos)
        size = np.dtype(dt).itemsize * n
        if pos + 8 + size > len(data):
            raise ValueError(f"array {name} larger than the file")
        a[name] = np.frombuffer(data, dt, n, pos + 8).copy()
        pos += 8 + size
    lists = []
    for _ in range(2):
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        names = []
        for _ in range(n):
            (k,) = struct.unpack_from("<I", data, pos)
            names.append(data[pos + 4:pos + 4 + k])
            pos += 4 + k
        lists.append(names)
    (n,) = struct.unpack_from("<Q", data, pos)
    pos += 8
    subs = []
    for _ in range(n):
        q, pos = _parse_at(data, pos)
        subs.append(q)
    return Prog(a, *lists, subs), pos


class Asm:
    """A tiny assembler for hand-made programs (crafted shapes/attributes the tracer never
    emits); attributes are given exactly as the file stores them."""

    def __init__(self):
        self.dtype, self.ndim, self.shapes = [], [], []
        self.op, self.in_off, self.in_slots, self.out, self.attr_off = [], [0], [], [], [0]
        self.attrs, self.consts, self.inputs, self.outputs = [], bytearray(), [], []

    def slot(self, dtype: str, shape) -> int:
        self.dtype.append(DT[dtype]), self.ndim.append(len(shape)), self.shapes.extend(shape)
        return len(self.dtype) - 1

    def input(self, dtype: str, shape) -> int:
        s = self.slot(dtype, shape)
        self.inputs.append(s)
        return s

    def instr(self, op: str, ins, out: int, attrs=()) -> int:
        self.op.append(OP[op]), self.in_slots.extend(ins), self.out.append(out)
        self.in_off.append(len(self.in_slots))
        self.attrs.extend(int(x) for x in attrs)
        self.attr_off.append(len(self.attrs))
        return out

    def prog(self) -> Prog:
        def arr(v, dt):
            if dt == np.int64:  # any Python int, wrapped to int64 as the file stores it
                return np.array([(int(x) + 2**63) % 2**64 - 2**63 for x in v], np.int64)
            return np.array([int(x) for x in v], dt)

        a = {"slot_dtype": arr(self.dtype, np.uint8), "slot_ndim": arr(self.ndim, np.uint32),
             "shapes": arr(self.shapes, np.int64), "opcode": arr(self.op, np.uint8),
             "in_off": arr(self.in_off, np.uint32), "in_slots": arr(self.in_slots, np.uint32),
             "out_off": arr(range(len(self.out) + 1), np.uint32),
             "out_slots": arr(self.out, np.uint32), "attr_off": arr(self.attr_off, np.uint32),
             "attrs": arr(self.attrs, np.int64),
             "consts": np.frombuffer(bytes(self.consts), np.uint8).copy(),
             "inputs": arr(self.inputs, np.uint32), "outputs": arr(self.outputs, np.uint32)}
        return Prog(a, [f"in{k}".encode() for k in range(len(self.inputs))],
                    [f"out{k}".encode() for k in range(len(self.outputs))])


def attr_roles(op: int, at: list[int]) -> list[tuple[int, str]]:
    """(index into the instruction's attributes, role) for each attribute, walking the
    length-prefixed lists the way the validator does; 'len' marks a list length."""
    name = OPCODES[op] if op < len(OPCODES) else "?"
    lists = {"ReduceSum": ["axis"], "ReduceMax": ["axis"], "Transpose": ["perm"],
             "BroadcastInDim": ["shape", "bdim"], "Slice": ["start", "limit", "stride"],
             "Pad": ["lo", "hi", "interior"], "DotGeneral": ["lc", "rc", "lb", "rb"],
             "Iota": ["shape"], "Threefry2x32Iota": ["shape"], "DynamicSlice": ["shape"], "Rev": ["dim"], "ReduceMin": ["axis"],
             "ReduceProd": ["axis"], "ReduceAnd": ["axis"], "ReduceOr": ["axis"],
             "Conv": ["stride", "lo", "hi", "ldil", "rdil"],
             **{n: ["window", "stride", "lo", "hi", "bdil", "wdil"]
                for n in ("ReduceWindowSum", "ReduceWindowMax", "ReduceWindowMin")},
             **{n: ["window", "stride", "lo", "hi"]
                for n in ("SelectAndGatherAdd", "SelectAndScatterAdd")}}
    fixed = {"Compare": ["dir"], "Concatenate": ["axis"], "Constant": ["offset", "nbytes"],
             "TriangularSolve": ["flag"] * 5, "Gather": ["axis"], "Scatter": ["axis", "mode"],
             "LUPermute": ["flag"], "Eigh": ["flag"], "QR": ["flag"], "SVD": ["flag"] * 2,
             "Eig": ["flag"] * 3, "SelectAndGatherAdd": ["flag"], "SelectAndScatterAdd": ["flag"],
             "SearchSorted": ["flag"], "ArgMax": ["dim", "dtype"], "ArgMin": ["dim", "dtype"],
             **{n: ["dim", "flag"] for n in ("Cumsum", "Cumprod", "Cummax", "Cummin", "LinearScan",
                                             "Sort")}}
    roles, pos = [], 0
    for role in lists.get(name, []):
        if pos >= len(at):
            return roles
        roles.append((pos, "len"))
        n = at[pos] if 0 <= at[pos] <= len(at) else 0
        roles += [(pos + 1 + k, role) for k in range(min(n, len(at) - pos - 1))]
        pos += 1 + n
    if name in ("Scan", "While", "Cond", "Checkpoint"):  # control_flow.hpp's layouts
        return _control_roles(name, at)
    tail = fixed.get(name, ["dtype", "dim"] if name == "Iota" else [])
    roles += [(pos + k, r) for k, r in enumerate(tail) if pos + k < len(at)]
    return roles


def _control_roles(name: str, at: list[int]) -> list[tuple[int, str]]:
    roles: list[tuple[int, str]] = []

    def take(pos: int) -> int:  # a length-prefixed take list at pos; returns the position after
        if pos >= len(at):
            return len(at)
        roles.append((pos, "len"))
        n = at[pos] if 0 <= at[pos] <= len(at) else 0
        roles.extend((pos + 1 + k, "take") for k in range(min(n, len(at) - pos - 1)))
        return pos + 1 + n

    if name == "Scan":
        roles += [(k, r) for k, r in enumerate(["sub", "length", "flag", "count", "count"])
                  if k < len(at)]
        take(5)
    elif name == "While":
        roles += [(k, r) for k, r in enumerate(["sub", "sub", "count"]) if k < len(at)]
        take(take(3))
    elif name == "Cond":
        if at:
            roles.append((0, "count"))
        pos = 1
        for _ in range(max(0, min(at[0] if at else 0, len(at)))):
            if pos >= len(at):
                break
            roles.append((pos, "sub"))
            pos = take(pos + 1)
    else:
        if at:
            roles.append((0, "sub"))
        take(1)
    return roles


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/, the root of _support
    from _support import forge_check, forge_gen

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write N forged files and manifest.txt here")
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", type=Path, help="run the Python loader+eval over a forged dir")
    ap.add_argument("--cap", type=int, default=150, help="stop after this many crashes")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--todo", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--progress", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        sys.exit(forge_check.worker(args.worker, args.todo, args.progress))
    if args.out:
        forge_gen.write_dir(args.out, args.n, args.seed)
        print(f"wrote {args.n} forged files and {args.out / 'manifest.txt'}")
    if args.check:
        failures, notes = forge_check.run_python(args.check, cap=args.cap)
        rows = {i: (seed, desc) for i, seed, desc in forge_check.manifest(args.check)}
        for i, what in failures:
            print(f"{i}: {what}  [{' '.join(rows.get(i, ('', '')))}]")
        print(forge_check.report(args.check, failures, notes, examples=1))
        print(f"{len(failures)} failure(s)")
        sys.exit(1 if failures else 0)
