"""Bridge from a compiled SSA program to the C++ interpreter (``tidu._eval``).

Op attributes are encoded generically from each primitive's dataclass fields, in field order:
a tuple of ints as ``[len, *values]``, an int as ``[value]``, a dtype name or a Compare direction
as its code, Constant bytes as ``[offset, nbytes]`` into the constants blob.  The C++ kernels read
them in that order, so no primitive needs evaluator code of its own.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tidu import _eval

__all__ = ["encode", "has_kernels"]

def _load_blas() -> bool:
    """Large matrix products go to scipy-openblas32's GEMM (the OpenBLAS numpy and scipy build
    against) when it is installed; the interpreter's own loops otherwise."""
    try:
        import scipy_openblas32 as sob
    except ImportError:
        return False
    import os

    path = os.path.join(sob.get_lib_dir(), sob.get_library(fullname=True))
    return _eval.set_blas(path, "scipy_")


# Loaded with the first program that has a matrix product, not at import: OpenBLAS starts its
# worker threads when loaded, and scalar or elementwise programs never need them.
BLAS: "bool | None" = None


def ensure_blas() -> bool:
    """Load the BLAS hook once; True when large products go to OpenBLAS."""
    global BLAS
    if BLAS is None:
        BLAS = _load_blas()
    return BLAS

OPCODE = {name: i for i, name in enumerate(_eval.OPCODES)}
DTYPE = {name: i for i, name in enumerate(_eval.DTYPES)}
COMPARE = {name: i for i, name in enumerate(_eval.COMPARE)}


def has_kernels(ops) -> bool:
    """True when every op has a C++ opcode (user primitives with Python kernels do not)."""
    return all(op.name in OPCODE for op in ops)


def _encode_attrs(op, out: list, consts: bytearray) -> None:
    for f in dataclasses.fields(op):
        v = getattr(op, f.name)
        if isinstance(v, bytes):
            pad = (-len(consts)) % 16
            consts.extend(b"\0" * pad)
            out += [len(consts), len(v)]
            consts.extend(v)
        elif isinstance(v, tuple):
            out.append(len(v))
            out += [int(x) for x in v]
        elif isinstance(v, str):
            out.append(DTYPE[v] if f.name == "dtype" else COMPARE[v])
        else:
            out.append(int(v))


def encode(arrays: dict, slot_avals, ops, input_names=(), output_names=()) -> "_eval.Program":
    """An _eval.Program from compile's SSA arrays, the slots' abstract values and the ops
    (names are metadata carried into saved files)."""
    slot_dtype = np.array([DTYPE[a.dtype.name] for a in slot_avals], np.uint8)
    slot_ndim = np.array([a.ndim for a in slot_avals], np.uint32)
    shapes = np.array([d for a in slot_avals for d in a.shape], np.int64)
    opcode = np.array([OPCODE[op.name] for op in ops], np.uint8)
    if BLAS is None and any(op.name == "DotGeneral" for op in ops):
        ensure_blas()
    out_off, out_slots = arrays["out_off"], arrays["out_slots"]
    if np.any(np.diff(out_off) != 1):
        raise NotImplementedError("the interpreter runs single-output ops only")
    attrs: list[int] = []
    attr_off = [0]
    consts = bytearray()
    for op in ops:
        _encode_attrs(op, attrs, consts)
        attr_off.append(len(attrs))
    return _eval.Program(slot_dtype, slot_ndim, shapes, opcode, arrays["in_off"],
                         arrays["in_slots"], out_slots, np.array(attr_off, np.uint32),
                         np.array(attrs, np.int64), np.frombuffer(bytes(consts), np.uint8),
                         arrays["input_slots"], arrays["output_slots"], list(input_names),
                         list(output_names))


class LoadedProgram:
    """A program read from a .tidu file: ``eval(list)``, ``prog({name: value})``, ``eval_batch``.

    Its inputs are named by the repr of the InputKeys it was saved with."""

    def __init__(self, native: "_eval.Program"):
        self.native = native
        self.inputs = list(native.input_names)
        self._shapes = [tuple(s) for s in native.input_shapes]
        self._dtypes = [np.dtype(d) for d in native.input_dtypes]

    def _arrays(self, inputs, batch=False):
        if len(inputs) != len(self.inputs):
            raise ValueError(f"program takes {len(self.inputs)} inputs {self.inputs}, "
                             f"got {len(inputs)}")
        out = []
        for name, shape, dt, x in zip(self.inputs, self._shapes, self._dtypes, inputs):
            a = np.require(np.asarray(x, dtype=dt), requirements="C")
            if (a.shape[1:] if batch else a.shape) != shape:
                raise ValueError(f"input {name}: expected shape {shape}, got {a.shape}")
            out.append(a)
        return out

    def eval(self, inputs, out=None):
        return self.native.run(self._arrays(inputs), out)

    def __call__(self, mapping: dict):
        missing = [k for k in self.inputs if k not in mapping]
        if missing:
            raise KeyError(f"missing input(s) {missing}; the program takes {self.inputs}")
        return self.eval([mapping[k] for k in self.inputs])

    def eval_batch(self, inputs, threads=None, exact=True):
        """As ``CompiledProgram.eval_batch`` (interpreter only)."""
        import os

        arrs = self._arrays(inputs, batch=True)
        return self.native.run_batch(arrs, arrs[0].shape[0] if arrs else 0,
                                     threads or os.cpu_count() or 1, exact)


def load(path) -> LoadedProgram:
    """Read a program saved by ``CompiledProgram.save``; raises ValueError on a bad file."""
    ensure_blas()  # the file may hold a matrix product
    with open(path, "rb") as f:
        return LoadedProgram(_eval.Program(f.read()))
