"""Bridge from a compiled SSA program to the C++ interpreter (``tidu._eval``).

Op attributes are encoded from the opcode table's attribute signature
(``_eval.OPCODE_SIGNATURES``, one letter per dataclass field of the primitive, in field order;
cpp/include/tidu/vm/opcodes.hpp): ``t`` a tuple of ints as ``[len, *values]``, ``i`` an int as
``[value]``, ``d`` a dtype name and ``c`` a Compare direction as their codes, ``b`` Constant bytes
as ``[offset, nbytes]`` into the constants blob, ``k`` the primitive's own ``kernel_attrs()``
(control flow). The table is the one home of the layout the C++ kernels read, so no primitive
needs evaluator code of its own, and a primitive whose fields disagree with its row is refused.
Each interned op and abstract value is encoded once; a program's arrays are gathered from those
encodings.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import stat

import numpy as np

from tidu._native import _core, _eval
from tidu.backends.inputs import check_inputs, shared_inputs
from tidu.graph import aval_of, prim_of
from tidu.graph.memory import register_cache

__all__ = [
    "SIGNATURE", "encode", "get_num_threads", "has_kernels", "memory_report", "register_rewrite",
    "set_num_threads",
]


def _blas_path() -> str | None:
    """The shared library of scipy-openblas32, found without importing the package (its
    ``__init__`` reads its version through importlib.metadata and loads the library: 25-30 ms,
    against under 1 ms for loading the library alone); None when it is not installed."""
    try:
        spec = importlib.util.find_spec("scipy_openblas32")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    for where in spec.submodule_search_locations or ():
        lib = os.path.join(where, "lib")
        try:
            names = sorted(n for n in os.listdir(lib) if n.startswith("libscipy_openblas")
                           and (".so" in n or n.endswith(".dylib")))
        except OSError:
            continue
        if names:
            return os.path.join(lib, names[0])
    try:  # another layout: the package's own answer
        import scipy_openblas32 as sob  # noqa: PLC0415 - optional dependency
    except ImportError:
        return None
    return os.path.join(sob.get_lib_dir(), sob.get_library(fullname=True))


def _load_blas() -> bool:
    """Large matrix products go to scipy-openblas32's GEMM (the OpenBLAS numpy and scipy build
    against) when it is installed; the interpreter's own loops otherwise."""
    # OpenBLAS starts its worker threads while it is loaded, nproc - 1 of them unless
    # OPENBLAS_NUM_THREADS says otherwise, and each spins about 0.1 s before it first sleeps:
    # 25-60 ms of CPU time that landed on the first evaluation of the first program with a matrix
    # product (docs/conv.md, "The first call").  tidu runs this copy single-threaded anyway
    # (set_blas calls openblas_set_num_threads(1): tidu's own pool splits the products), so it is
    # loaded with OPENBLAS_NUM_THREADS=1 in the environment and starts no threads.  The variable
    # is put back as it was at once; numpy's and scipy's OpenBLAS are other copies, loaded before
    # (numpy) or reading the environment when they load.
    was = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        path = _blas_path()
        return path is not None and _eval.set_blas(path, "scipy_")
    finally:
        if was is None:
            del os.environ["OPENBLAS_NUM_THREADS"]
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = was


# Loaded with the first program that has a matrix product, not at import: loading it costs a few
# milliseconds, and scalar or elementwise programs never need it.
BLAS: "bool | None" = None


def ensure_blas() -> bool:
    """Load the BLAS hook once; True when large products go to OpenBLAS."""
    global BLAS
    if BLAS is None:
        BLAS = _load_blas()
    return BLAS


# ---- threads (cpp/include/tidu/vm/parallel.hpp; docs/evaluator.md, "Threads") ----


def set_num_threads(n: int | None) -> None:
    """Set how many threads one evaluation may use, the calling thread included.

    Large matrix products, convolutions, long elementwise chains and ``eval_batch`` are cut into
    chunks that a persistent pool of worker threads and the calling thread take one at a time;
    the BLAS itself runs single-threaded.  The setting applies from the next evaluation, in every
    thread of the process.

    Args:
        n: a positive count (capped at 256), 1 for single-threaded evaluation, or None for the
            default: ``TIDU_NUM_THREADS`` from the environment when set, else the cores this
            process may run on.

    Raises:
        TypeError: n is not an int or None.
        ValueError: n is below 1.
    """
    if n is None:
        _eval.set_num_threads(0)
        return
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"set_num_threads takes a positive int or None, got {n!r}")
    if n < 1:
        raise ValueError(f"set_num_threads takes a positive int or None, got {n}")
    _eval.set_num_threads(int(n))


def get_num_threads() -> int:
    """How many threads one evaluation may use, the calling thread included (see
    ``set_num_threads``)."""
    return _eval.get_num_threads()


OPCODE = {name: i for i, name in enumerate(_eval.OPCODES)}
DTYPE = {name: i for i, name in enumerate(_eval.DTYPES)}
COMPARE = {name: i for i, name in enumerate(_eval.COMPARE)}
SIGNATURE: dict[str, str] = dict(_eval.OPCODE_SIGNATURES)  # opcode name -> attribute letters


def has_kernels(prims) -> bool:
    """True when every op (interned prim id) has a C++ opcode (user primitives with Python
    kernels do not), and so does every op of every nested program (a loop body, a branch)."""
    for p in set(prims.tolist()):
        code, _, _, bodies = _prim_code(int(p))
        if code < 0 or any(b.native() is None for _, b in bodies):
            return False
    return True


# ---- encoding, once per interned op and abstract value ----
#
# A program's arrays repeat a few ops and abstract values many times: each op's opcode and
# attributes, and each abstract value's dtype code and shape, are encoded once (cached by interned
# id) and the program's arrays are copied out of those tables in one compiled pass
# (_core.encode_gather), so encoding costs no Python work per instruction.

_prim_codes: dict[int, tuple[int, np.ndarray, tuple, tuple]] = {}
register_cache("interpreter_prims", _prim_codes, holds_ids=True)
# prim id -> (opcode, attrs, constant blobs, nested bodies)


def _encode_attrs(op) -> tuple[list[int], list[tuple[int, bytes]], list[tuple[int, object]]]:
    """op's attributes as ints, laid out by its opcode's signature; Constant bytes as a
    placeholder pair [offset, nbytes] (the offset is the program's) listed with their position;
    the nested programs of control flow as a placeholder (the program's index of the nested
    program) listed with their position.

    Signature ``k`` (control flow): the primitive's ``kernel_attrs()`` gives the list itself, ints
    and Body objects where a nested program goes (cpp/include/tidu/vm/control_flow.hpp)."""
    sig = SIGNATURE[_opcode_name(op)]
    out: list[int] = []
    blobs: list[tuple[int, bytes]] = []
    if sig == "k":
        bodies = []
        for v in op.kernel_attrs():
            if isinstance(v, (int, np.integer)):
                out.append(int(v))
            else:
                bodies.append((len(out), v))
                out.append(0)
        return out, blobs, bodies
    fields = dataclasses.fields(op) if dataclasses.is_dataclass(op) else ()
    letters = "" if sig == "_" else sig
    if sig == "_" and getattr(op, "opcode", None):  # borrows a kernel that takes no attributes
        return out, blobs, []
    if len(fields) != len(letters):
        raise ValueError(f"{op.name}: fields {[f.name for f in fields]} do not match the opcode's "
                         f"attribute signature {sig!r} (cpp/include/tidu/vm/opcodes.hpp)")
    for f, letter in zip(fields, letters):
        v = getattr(op, f.name)
        if letter == "b":
            blobs.append((len(out), v))
            out += [0, len(v)]
        elif letter == "t":
            out.append(len(v))
            out += [int(x) for x in v]
        elif letter == "d":
            out.append(DTYPE[np.dtype(v).name])
        elif letter == "c":
            out.append(COMPARE[v])
        else:  # "i": an int, a bool or an enum's code
            out.append(int(v))
    return out, blobs, []


def _opcode_name(op) -> str:
    """The opcode running op: its name, or the one it borrows (``opcode``: a custom-rule op is a
    Checkpoint-like call of its body, so saved files hold no new opcode)."""
    return getattr(op, "opcode", None) or op.name


def _prim_code(pid: int) -> tuple[int, np.ndarray, tuple, tuple]:
    hit = _prim_codes.get(pid)
    if hit is None:
        op = prim_of(pid)
        code = OPCODE.get(_opcode_name(op), -1)
        attrs, blobs, bodies = _encode_attrs(op) if code >= 0 else ([], [], [])
        hit = _prim_codes[pid] = (code, np.array(attrs, np.int64), tuple(blobs), tuple(bodies))
    return hit


_aval_codes: dict[int, tuple[int, tuple[int, ...]]] = {}  # aval id -> (dtype code, shape)
register_cache("interpreter_avals", _aval_codes)
# Evaluation arenas idle programs lend back for reuse (at most 64 MiB, tidu/vm/workspace.hpp):
# entries is 1 while it keeps any
register_cache("arena_pool", _eval.release_arena_pool,
               lambda: {"entries": int(_eval.arena_pool_bytes() > 0),
                        "bytes": _eval.arena_pool_bytes()})


def _aval_code(aid: int) -> tuple[int, tuple[int, ...]]:
    hit = _aval_codes.get(aid)
    if hit is None:
        av = aval_of(aid)
        hit = _aval_codes[aid] = (DTYPE[av.dtype.name], av.shape)
    return hit


# Rewrites of the SSA arrays for the interpreter only (XLA lowers the arrays as compiled): each
# takes the arrays and returns new ones, or None to leave them.  The layers above register them
# (tidu.ops.rewrites names primitives, which this module may not).
_REWRITES: list = []


def register_rewrite(fn) -> None:
    """Have ``encode`` apply fn (SSA arrays -> new arrays or None) before it encodes a program."""
    if fn not in _REWRITES:
        _REWRITES.append(fn)


def encode(arrays: dict, input_names=(), output_names=()) -> "_eval.Program":
    """An _eval.Program from compile's SSA arrays (names are metadata carried into saved
    files), after the registered rewrites.  NotImplementedError: an op, or an op of a nested
    program, has no C++ kernel."""
    for fn in _REWRITES:
        arrays = fn(arrays) or arrays
    out_off, out_slots = arrays["out_off"], arrays["out_slots"]
    # Slots' dtype codes and shapes, instructions' opcodes and attributes: from each distinct
    # abstract value and op's codes (asked once, then cached), copied out in one compiled pass.
    slot_dtype, ndim, shapes, opcode, attr_off, attrs, prims, p_inv = _core.encode_gather(
        arrays["slot_aval"], arrays["instr_prim"], _aval_code, _prim_code)
    p_codes = [_prim_code(p) for p in prims]
    if BLAS is None and any(getattr(prim_of(int(p)), "uses_blas", False) for p in prims):
        ensure_blas()
    consts = bytearray()
    has_blob = np.array([bool(b) for _, _, b, _ in p_codes], bool)
    for i in np.flatnonzero(has_blob[p_inv]).tolist():  # instructions carrying constant data
        for pos, data in p_codes[p_inv[i]][2]:
            consts.extend(b"\0" * ((-len(consts)) % 16))
            attrs[attr_off[i] + pos] = len(consts)
            consts.extend(data)
    # Nested programs (loop bodies, branches): each distinct Body once, by index.
    subs: list = []
    sub_index: dict = {}
    has_body = np.array([bool(b) for _, _, _, b in p_codes], bool)
    for i in np.flatnonzero(has_body[p_inv]).tolist():
        for pos, body in p_codes[p_inv[i]][3]:
            k = sub_index.get(body)
            if k is None:
                native = body.native()
                if native is None:
                    raise NotImplementedError("a nested program holds an op with no C++ kernel")
                k = sub_index[body] = len(subs)
                subs.append(native)
            attrs[attr_off[i] + pos] = k
    return _eval.Program(slot_dtype, ndim, shapes, opcode,
                         arrays["in_off"], arrays["in_slots"], out_off, out_slots, attr_off, attrs,
                         np.frombuffer(bytes(consts), np.uint8), arrays["input_slots"],
                         arrays["output_slots"], list(input_names), list(output_names), subs)


def memory_report(native: "_eval.Program") -> dict:
    """The interpreter's sizes of a program (``CompiledProgram.memory_report`` adds its own)."""
    return {"arena_bytes": native.arena_bytes, "naive_bytes": native.naive_bytes,
            "workspace_bytes": native.workspace_bytes, "instructions": native.instructions}


class LoadedProgram:
    """A program read from a .tidu file: ``eval(list)``, ``prog({name: value})``, ``eval_batch``.

    Its inputs are named by the repr of the InputKeys it was saved with."""

    def __init__(self, native: "_eval.Program"):
        self.native = native
        self.inputs = list(native.input_names)
        self._shapes = [tuple(s) for s in native.input_shapes]
        self._dtypes = [np.dtype(d) for d in native.input_dtypes]

    def _arrays(self, inputs, batch=False, shared=None):
        """Inputs checked as CompiledProgram checks them (tidu.backends.inputs)."""
        return check_inputs(self.inputs, self._shapes, self._dtypes, inputs, batch, shared)

    def eval(self, inputs, out=None):
        if out is None and all(type(x) is np.ndarray for x in inputs):
            try:  # C++ checks count, dtype, shape and contiguity itself (no copy)
                return self.native.run(inputs, None)
            except (TypeError, ValueError):
                pass  # convert below, or raise an error naming the input
        return self.native.run(self._arrays(inputs)[0], out)

    def memory_report(self) -> dict:
        """``arena_bytes``: this program's own memory plan; ``workspace_bytes``: what an
        evaluation allocates, nested programs and loop buffers included (what ``load``'s
        ``max_bytes`` caps); ``instructions``: nested programs' included."""
        return memory_report(self.native)

    def __call__(self, mapping: dict):
        missing = [k for k in self.inputs if k not in mapping]
        if missing:
            raise KeyError(f"missing input(s) {missing}; the program takes {self.inputs}")
        return self.eval([mapping[k] for k in self.inputs])

    def eval_batch(self, inputs, threads=None, exact=True, in_axes=0):
        """As ``CompiledProgram.eval_batch`` (interpreter only); ``in_axes`` 0 or None per input
        (None: one value shared by every point)."""
        shared = shared_inputs(in_axes, len(self.inputs))
        arrs, batch = self._arrays(inputs, batch=True, shared=shared)
        return self.native.run_batch(arrs, batch, threads or _eval.get_num_threads(), exact,
                                     shared)


_HEADER = 32  # magic (8) | version (4) | reserved (4) | payload bytes (8) | checksum (8)


def load(path, *, max_bytes: int | None = None,
         max_instructions: int | None = None) -> LoadedProgram:
    """Read a program saved by ``CompiledProgram.save``.

    Args:
        path: a path (str, bytes or os.PathLike) to a regular file; open files and file
            descriptors are refused.
        max_bytes: refuse (ValueError) a program whose evaluation needs more workspace than this
            many bytes, nested programs (loop bodies, branches) included: its
            ``memory_report()["workspace_bytes"]``. ``eval_batch`` takes that much per thread.
        max_instructions: refuse a program of more instructions than this, nested programs
            included (``memory_report()["instructions"]``).

    Raises:
        TypeError: ``path`` is not a path.  FileNotFoundError / PermissionError: as ``open``.
        ValueError (``tidu._eval.ProgramError``): not a regular file, or a bad file: the header
        gives the payload's size, which must match the file's before anything more is read.
    """
    for name, v in (("max_bytes", max_bytes), ("max_instructions", max_instructions)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ValueError(f"{name} must be a non-negative int or None, got {v!r}")
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"load: expected a path (str, bytes or os.PathLike), got "
                        f"{type(path).__name__}")
    shown = os.fsdecode(os.fspath(path))
    if not stat.S_ISREG(os.stat(path).st_mode):  # before open: a FIFO would block there
        raise _eval.ProgramError(f"tidu program file: {shown} is not a regular file")
    ensure_blas()  # the file may hold a matrix product
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(_HEADER)
        if len(head) == _HEADER and head[:8] == b"TIDUPROG":
            payload = int.from_bytes(head[16:24], "little")
            if payload != size - _HEADER:
                raise _eval.ProgramError(
                    f"tidu program file: {shown}: payload size {payload} in the header does not "
                    f"match the file's {max(size - _HEADER, 0)} bytes after it")
            data = head + f.read(payload + 1)  # one more: a file grown since is refused below
        else:
            data = head  # too short or bad magic: the C++ loader says which
    big = 2**64 - 1  # larger caps cap nothing
    return LoadedProgram(_eval.Program(
        data, None if max_bytes is None else min(max_bytes, big),
        None if max_instructions is None else min(max_instructions, big)))
