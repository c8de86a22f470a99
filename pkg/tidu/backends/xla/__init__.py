"""The StableHLO/XLA backend (the seeds' tenferro boundary): lower, compile through jaxlib, run.

``lower(executable)`` turns a compiled SSA program into StableHLO MLIR text: one function whose
arguments are the program's inputs and whose results are its outputs, one operation per
instruction, written by each primitive's ``lower`` method (its block in ``tidu.ops``).  With
``batch=B`` every value gets a leading axis of size B (the program evaluated independently per
point, as ``eval_batch`` does), which XLA shards over devices through JAX's sharding.

Compilation goes through public jax API: the text is serialised as a StableHLO portable artifact
(``jax.extend.mlir``), wrapped as a ``jax.export.Exported`` and called under ``jax.jit``,
which gives jit's C++ dispatch, device placement, shardings and the persistent compilation
cache.  Every call runs under ``jax.enable_x64(True)`` (a thread-local context), so
float64/complex128 programs compute in double precision whatever the user's global jax
configuration, and the Exported's dtype check refuses any mismatch instead of computing in
float32.

jax is imported lazily: ``import tidu`` never imports it.

Long elementwise programs: XLA's CPU pipeline takes super-linear time in the number of fused
instructions (a 10,000-node elementwise chain did not finish compiling in 17 minutes).  A program
with more than ``MAX_FUSED_INSTRUCTIONS`` instructions is therefore split into consecutive segments
of at most that many instructions, each compiled as its own executable; a value crosses from the
segment that makes it to each that reads it, small ones packed one buffer per dtype
(``tidu.backends.xla.segments``), so compile time and memory are linear in the program's length.
The ``auto`` backend routes such programs to the interpreter anyway (see ``choose_backend``).
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from tidu.backends.xla import segments
from tidu.backends.xla.export import _exported, _exported_fields, _version  # noqa: F401 - tests use them here
from tidu.backends.xla.hlo import Lowering, Value, dense_hex, i64_array, tensor_type
from tidu.backends.xla.segments import (
    MAX_FUSED_INSTRUCTIONS,
    PACK_MAX_ELEMENTS,
    LoweringMissing,
    Segment,
    is_host,
    lower_range,
)
from tidu.graph import prim_of
from tidu.graph.dtypes import _aval_list

__all__ = [
    "lower",
    "Lowering",
    "Value",
    "XlaRunner",
    "Shardings",
    "dense_hex",
    "i64_array",
    "tensor_type",
    "choose_backend",
    "require_jax",
    "has_lowering",
    "check_lowerable",
    "MAX_FUSED_INSTRUCTIONS",
    "PACK_MAX_ELEMENTS",
    "Segment",
    "lower_segments",
    "lower_range",
    "AUTO_MIN_WORK",
    "AUTO_MAX_INSTRUCTIONS",
    "LoweringMissing",
    "use_compilation_cache",
    "GPU_COMPILER_OPTIONS",
]

# The auto backend (choose_backend): XLA when jax's default device is an accelerator and the
# program does at least AUTO_MIN_WORK work (flops of its products plus elements written by its other
# instructions) in at most AUTO_MAX_INSTRUCTIONS instructions; the interpreter otherwise.  On a
# CPU the interpreter was as fast as XLA or faster for every program bench/xla.py measured
# (docs/xla.md), so a CPU-only jax never gets auto's programs.
AUTO_MIN_WORK = 1e7
AUTO_MAX_INSTRUCTIONS = 2000

# XLA options for tidu's executables on a GPU.  XLA's GPU autotuner times candidate kernels for
# every product while it compiles; for tidu's products (HIGHEST precision: full float32, no TF32)
# that took 7-11 s per program on an H200, 80-95% of the first call.  Without it products go to
# cuBLAS's own choice (Triton's untuned GEMMs were 5x slower): as fast on large products, up to
# 1.8x slower on small ones (docs/xla.md, "On a GPU").  A long-running loop of small programs may
# gain by ``GPU_COMPILER_OPTIONS.clear()`` before its program's first XLA call (autotuning again).
GPU_COMPILER_OPTIONS: dict = {"xla_gpu_autotune_level": 0, "xla_gpu_enable_triton_gemm": False}


def has_lowering(op) -> bool:
    """True when op can be written as StableHLO (tidu's primitives; user primitives that
    define ``lower``)."""
    return callable(getattr(op, "lower", None)) and bool(getattr(op, "lowerable", True))


def unlowered(exe) -> list[str]:
    """Names of the program's primitives that have no StableHLO lowering (host callbacks of
    the program itself run between segments; those of loop bodies and branches do not)."""
    return sorted({op.name for op, _, _ in exe.instructions
                   if not has_lowering(op) and not is_host(op)})


def check_lowerable(exe) -> None:
    """Raise LoweringMissing naming the program's primitives that cannot be lowered."""
    missing = unlowered(exe)
    if missing:
        raise LoweringMissing(
            f"primitive {', '.join(missing)} has no StableHLO lowering; "
            f"evaluate this program with backend='cpu'"
        )


def lower(exe, batch: int | None = None) -> str:
    """StableHLO MLIR text of a whole program (an Executable): @main(inputs) -> outputs."""
    return lower_segments(exe, batch, max_instructions=None)[0].text


def lower_segments(
    exe,
    batch: int | None = None,
    max_instructions: int | None = MAX_FUSED_INSTRUCTIONS,
    platform: str = "cpu",
    shared: frozenset[int] = frozenset(),
) -> list[Segment]:
    """The program as separately compiled segments (``tidu.backends.xla.segments``), after
    checking that every primitive has a lowering."""
    check_lowerable(exe)
    return segments.lower_segments(exe, batch, max_instructions, platform, shared)


# ---- compile and run through jax ----


def require_jax(full: bool = True):
    """Import jax for the XLA backend, or raise naming what to install; ``full=False`` imports
    jax alone, without the export and jax.extend modules the backend compiles with (jax.extend
    pulls in pallas: ~20 ms, too much for a question such as the default platform)."""
    try:
        import jax  # noqa: PLC0415 - optional dependency, imported on first use
        if full:
            from jax import export  # noqa: F401, PLC0415 - optional dependency
            from jax.extend import mlir  # noqa: F401, PLC0415 - optional dependency
    except ImportError as e:
        raise ImportError(
            f"the XLA backend needs jax and jaxlib: pip install 'tidu[xla]' (import failed: {e})"
        ) from None
    return jax


_cache_dir: list = []  # the persistent compilation cache directory set, once set


def use_compilation_cache(path: str | None = None) -> None:
    """jax's persistent compilation cache for tidu's XLA executables (and jax's own): ``path``,
    or ``TIDU_XLA_CACHE_DIR`` from the environment; nothing when neither is set.  Every compile
    is cached (jax's minimum compile time and entry size set to 0), so a second process finds
    the executables the first one compiled.  Setting jax's own ``jax_compilation_cache_dir``
    works too, with jax's thresholds (by default only compiles over 1 s are kept)."""
    path = path or os.environ.get("TIDU_XLA_CACHE_DIR")
    if not path or _cache_dir == [path]:
        return
    jax = require_jax()
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    _cache_dir[:] = [path]


class _Shape:
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)


def resolve_device(device):
    """None (jax's default device: this process's first, ``jax.local_devices()[0]``; after
    ``jax.distributed.initialize`` ``jax.devices()[0]`` is process 0's in every process), a
    platform name ("cpu", "gpu", "cuda": this process's first device of it) or a jax Device."""
    jax = require_jax()
    if device is None:
        return jax.local_devices()[0]
    if isinstance(device, str):
        try:
            return jax.local_devices(backend=device)[0]
        except RuntimeError as e:
            raise ValueError(f"no jax device for platform {device!r}: {e}") from None
    return device


def resolve_devices(devices):
    """A Mesh from an int (jax's first n devices, of every process after
    ``jax.distributed.initialize``), a sequence of devices or a Mesh."""
    jax = require_jax()
    from jax.sharding import Mesh  # noqa: PLC0415 - optional dependency, imported on first use

    if isinstance(devices, Mesh):
        return devices
    if isinstance(devices, int):
        avail = jax.devices()
        if not 1 <= devices <= len(avail):
            raise ValueError(f"devices={devices}: jax sees {len(avail)} device(s)")
        devices = avail[:devices]
    devices = list(devices)
    if not devices:
        raise ValueError("devices: need at least one device")
    return Mesh(np.array(devices), ("batch",))


class Shardings:
    """What ``td.jit(..., in_shardings=, out_shardings=)`` asks for: a jax Sharding (or None,
    replicated) per leaf of the jitted function's arguments, and one per output (or one for
    all, or None: XLA's choice).  Passed as a program's ``device``; hashable."""

    def __init__(self, leaves: Sequence, out=None):
        self.leaves = tuple(leaves)
        self.out = tuple(out) if isinstance(out, (list, tuple)) else out

    def _key(self):
        return (self.leaves, self.out)

    def __eq__(self, other):
        return isinstance(other, Shardings) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def for_program(self, inputs, n_out: int) -> tuple[tuple, tuple]:
        """(a sharding per program input, keyed ("arg", leaf); one per output)."""
        ins = tuple(self.leaves[k[1]] if isinstance(k, tuple) and k[:1] == ("arg",) else None
                    for k in inputs)
        if isinstance(self.out, tuple):
            if len(self.out) != n_out:
                raise ValueError(f"out_shardings: {len(self.out)} entries for {n_out} outputs")
            return ins, self.out
        return ins, (self.out,) * n_out


def _mesh_of(shardings) -> Any:
    """The Mesh of the first NamedSharding among shardings (None when there is none)."""
    for sh in shardings:
        mesh = getattr(sh, "mesh", None)
        if mesh is not None:
            return mesh
    return None


def _spans_processes(mesh) -> bool:
    """Whether the Mesh holds devices of other processes (jax.distributed)."""
    me = require_jax().process_index()
    return any(d.process_index != me for d in mesh.devices.flat)


def _hint_mesh(exe) -> Any:
    """The Mesh that the program's sharding hints (td.shard_map's blocks) name, None when it
    has none; a program naming two Meshes is refused."""
    meshes = {op.mesh_hint for op in {op for op, _, _ in exe.instructions}
              if getattr(op, "mesh_hint", None) is not None}
    if len(meshes) > 1:
        raise ValueError(f"one program holds td.shard_map blocks over {len(meshes)} different "
                         f"Meshes; XLA runs a program on one Mesh's devices")
    return next(iter(meshes), None)


class XlaRunner:
    """An Executable compiled for XLA on one device (or a batch split over a Mesh).

    One jitted callable per segment; ``run`` feeds numpy inputs and returns numpy outputs."""

    def __init__(
        self,
        exe,
        batch: int | None = None,
        device=None,
        mesh=None,
        max_instructions: int | None = MAX_FUSED_INSTRUCTIONS,
        shared: Sequence[bool] | None = None,
        shardings: tuple[tuple, tuple] | None = None,
    ):
        jax = require_jax()
        use_compilation_cache()
        from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding  # noqa: PLC0415 - optional dependency, imported on first use

        self.exe = exe
        self.batch = batch
        in_sh = out_sh = None
        by_slot: dict[int, Any] = {}
        hinted = _hint_mesh(exe) if batch is None and device is None else None
        if shardings is None and mesh is None and hinted is not None:
            # td.shard_map's blocks: the program runs on its Mesh, arguments replicated
            shardings = ((None,) * len(exe.input_slots), (None,) * len(exe.output_slots))
        if shardings is not None:  # td.jit(in_shardings=...): XLA partitions the program (SPMD)
            in_sh, out_sh = shardings
            mesh = _mesh_of((*in_sh, *out_sh)) or hinted
            if mesh is None:
                raise ValueError("in_shardings/out_shardings: need a jax.sharding.NamedSharding "
                                 "(over a Mesh) among them")
            rep = NamedSharding(mesh, PartitionSpec())
            by_slot = {int(s): sh or rep for s, sh in zip(exe.input_slots, in_sh)}
            dev = mesh.devices.flat[0]
            sharding = replicated = None
        elif mesh is not None:
            dev = mesh.devices.flat[0]
            sharding = NamedSharding(mesh, PartitionSpec(tuple(mesh.axis_names)))
            replicated = NamedSharding(mesh, PartitionSpec())  # shared inputs: on every device
            flags = shared or (False,) * len(exe.input_slots)
            by_slot = {int(s): replicated if sh else sharding
                       for s, sh in zip(exe.input_slots, flags)}
        else:
            dev = resolve_device(device)
            sharding = replicated = SingleDeviceSharding(dev)
            by_slot = {int(s): sharding for s in exe.input_slots}
        # inputs placed over devices of other processes too (a Mesh spanning the processes of
        # jax.distributed): a numpy input there is the global value, the same in every process
        self.spread = {s: sh for s, sh in by_slot.items() if not sh.is_fully_addressable}
        self.placed = by_slot  # a jax Array input laid out otherwise is moved device to device
        self.platform = dev.platform
        lead = (batch,) if batch is not None else ()
        one = frozenset(int(s) for s, sh in zip(exe.input_slots, shared or ()) if sh)
        self.segments = lower_segments(exe, batch, max_instructions, self.platform,
                                       one if batch is not None else frozenset())
        hosts = sorted({getattr(seg.host, "callback_name", seg.host.name)
                        for seg in self.segments if seg.host is not None})
        if hosts and mesh is not None and _spans_processes(mesh):
            raise NotImplementedError(
                f"this program calls back into Python ({', '.join(hosts)}: td.debug.print, "
                f"td.debug.callback, td.pure_callback) and runs over a Mesh that spans "
                f"{len({d.process_index for d in mesh.devices.flat})} processes: tidu runs a "
                f"callback between compiled segments on its operands read as numpy, which jax "
                f"refuses for values on other processes' devices. Call the callback outside the "
                f"sharded program (on what it returns), or run it over this process's devices "
                f"(docs/scale.md, \"Several processes\")")
        self.calls = []
        with jax.enable_x64(True):
            for seg in self.segments:
                if seg.host is not None:  # a host callback, called in Python
                    self.calls.append(functools.partial(_host_call, seg.host))
                    continue
                ins = [_Shape(a.shape if sh else lead + a.shape, a.dtype)
                       for a, sh in zip(seg.in_avals, seg.in_shared)]
                outs = [_Shape(lead + a.shape, a.dtype) for a in seg.out_avals]
                ex = _exported(seg.text, ins, outs, export_platform(dev))
                if in_sh is not None:  # program inputs as asked, the rest as XLA propagates
                    in_s = tuple(by_slot.get(k) if isinstance(k, int) else None
                                 for k in seg.in_keys)
                    out_s = out_sh if seg is self.segments[-1] else (None,) * len(outs)
                else:
                    in_s = tuple(replicated if sh else sharding for sh in seg.in_shared)
                    out_s = (sharding,) * len(outs)
                self.calls.append(jax.jit(ex.call, in_shardings=in_s, out_shardings=out_s,
                                          **_compiler_options(dev)))
        # one compiled segment on this process's devices (the common case): run calls it with
        # the inputs in its parameter order, nothing else per call
        self._jax = jax
        one = self.segments[0]
        pos = {int(s): i for i, s in enumerate(exe.input_slots)}
        self._order = ([pos[k] for k in one.in_keys]
                       if len(self.segments) == 1 and one.host is None and not self.spread
                       else None)
        self._where = [by_slot[k] for k in one.in_keys] if self._order is not None else None
        self._fine = [None] * len(one.in_keys)  # per parameter: a sharding found equivalent
        self._local = in_sh is None and mesh is None  # outputs on one device of this process
        # off a CPU every output's copy to the host is started before the first is waited for
        # (jax.device_get's way: 2 x 16 MB from an H200 in 21 ms instead of 24); on a CPU the
        # outputs are host memory already and the extra call would only add to each call
        self._overlap = self.platform != "cpu"
        # the keys no later segment reads, dropped after each segment (device memory stays what
        # is live, not everything computed)
        last: dict = {}
        for k, seg in enumerate(self.segments):
            for key in seg.in_keys:
                last[key] = k
        self.drop: list[list] = [[] for _ in self.segments]
        for key, k in last.items():
            if not isinstance(key, int) or key not in self._inputs:
                self.drop[k].append(key)

    @functools.cached_property
    def _inputs(self) -> frozenset:
        return frozenset(int(s) for s in self.exe.input_slots)

    def run(self, inputs: Sequence[Any], as_jax: bool = False) -> list[Any]:
        """Inputs in the program's input order; values cross segments on the device.  Returns
        numpy arrays, or the jax Arrays on their devices with ``as_jax``."""
        jax = self._jax
        if self._order is not None:
            args = [inputs[i] for i in self._order]
            with jax.enable_x64(True):  # (a device_put outside it would make float64 float32)
                for j, x in enumerate(args):  # a jax Array laid out otherwise: moved
                    if type(x) is not np.ndarray and isinstance(x, jax.Array):
                        sh = x.sharding
                        if sh is self._fine[j]:  # the sharding seen last time, found in place
                            continue
                        if sh.is_equivalent_to(self._where[j], x.ndim):
                            self._fine[j] = sh
                        else:
                            args[j] = jax.device_put(x, self._where[j])
                vals = self.calls[0](*args)
            if as_jax:
                return list(vals)
            if not self._local:
                return [to_numpy(v) for v in vals]
            if self._overlap:
                for v in vals:
                    v.copy_to_host_async()
            return [np.asarray(v) for v in vals]
        with jax.enable_x64(True):
            env: dict[Any, Any] = {int(s): x for s, x in zip(self.exe.input_slots, inputs)}
            for s, sh in self.spread.items():  # numpy: the global value, each process its part
                if not isinstance(env[s], jax.Array):
                    env[s] = jax.make_array_from_process_local_data(sh, env[s], env[s].shape)
            for s, sh in self.placed.items():
                x = env[s]
                if isinstance(x, jax.Array) and not x.sharding.is_equivalent_to(sh, x.ndim):
                    env[s] = jax.device_put(x, sh)
            for seg, call, drop in zip(self.segments, self.calls, self.drop):
                vals = call(*[env[key] for key in seg.in_keys])
                for key in drop:
                    del env[key]
                env.update(zip(seg.out_keys, vals))
            return list(vals) if as_jax else [to_numpy(v) for v in vals]


def _compiler_options(dev) -> dict:
    """jax.jit's keyword for XLA options on this device: GPU_COMPILER_OPTIONS on a GPU (jax
    0.4.36 and later take them), none elsewhere."""
    if dev.platform not in ("gpu", "cuda", "rocm") or not GPU_COMPILER_OPTIONS:
        return {}
    return {"compiler_options": dict(GPU_COMPILER_OPTIONS)} if _jit_takes_options() else {}


@functools.cache
def _jit_takes_options() -> bool:
    import inspect  # noqa: PLC0415 - once, on a GPU only

    return "compiler_options" in inspect.signature(require_jax().jit).parameters


def to_numpy(v) -> np.ndarray:
    """A jax Array as numpy: its global value, in every process.  One that spans devices of
    other processes (``jax.distributed``) is read from a local copy where it is replicated,
    and otherwise gathered from every process (``multihost_utils.process_allgather``: a
    collective, which every process reaches, running the same program)."""
    if v.is_fully_addressable:
        return np.asarray(v)
    if v.is_fully_replicated:
        return np.asarray(v.addressable_data(0))
    from jax.experimental import multihost_utils  # noqa: PLC0415 - optional dependency

    return np.asarray(multihost_utils.process_allgather(v, tiled=True))


def _host_call(op, *vals):
    """A host callback between compiled segments: its operands fetched from the device."""
    return op.run([np.asarray(v) for v in vals])


# ---- choosing a backend ----

_aval_sizes = np.zeros(0, np.float64)  # element count by interned aval id, grown on demand


def _sizes_of(aval_ids: np.ndarray) -> np.ndarray:
    global _aval_sizes

    if len(aval_ids) and int(aval_ids.max()) >= len(_aval_sizes):
        n = len(_aval_sizes)
        _aval_sizes = np.concatenate(
            [_aval_sizes, np.array([a.size for a in _aval_list[n:]], np.float64)]
        )
    return _aval_sizes[aval_ids]


def program_work(exe) -> float:
    """Flops of the program's products plus elements written by its other instructions (array
    operations over the instructions, and Python once per distinct product and operand shape)."""
    a = exe.arrays
    slot_aval = a["slot_aval"]
    sizes = _sizes_of(slot_aval)
    out_slots, out_off = a["out_slots"], a["out_off"]
    work = float(sizes[out_slots].sum()) if len(out_slots) else 0.0
    prims, p_inv = np.unique(a["instr_prim"], return_inverse=True)
    dots = [
        j for j, pid in enumerate(prims.tolist()) if type(prim_of(pid)).__name__ == "DotGeneral"
    ]
    if not dots:
        return work
    is_dot = np.zeros(len(prims), bool)
    is_dot[dots] = True
    idx = np.flatnonzero(is_dot[p_inv])  # the products: 2 * output size * contraction
    lhs_aval = slot_aval[a["in_slots"][a["in_off"][idx]]]
    span = int(lhs_aval.max()) + 1
    pairs, pair_inv = np.unique(p_inv[idx].astype(np.int64) * span + lhs_aval, return_inverse=True)
    k = np.array(
        [
            math.prod(
                _aval_list[u % span].shape[d]
                for d in prim_of(int(prims[u // span])).lhs_contracting
            )
            for u in pairs.tolist()
        ],
        np.float64,
    )
    return work + 2.0 * float((sizes[out_slots[out_off[idx]]] * k[pair_inv.ravel()]).sum())


def export_platform(dev) -> str:
    """The platform name jax.export lowers for on `dev`: a jax GPU device says "gpu", and
    exporting must name its runtime ("cuda" or "rocm"), or the call is refused."""
    if dev.platform != "gpu":
        return dev.platform
    client = getattr(dev, "client", None)
    name = str(getattr(client, "platform", "")).lower()
    if name in ("cuda", "rocm"):
        return name
    return "rocm" if "rocm" in str(getattr(client, "platform_version", "")).lower() else "cuda"


def default_platform() -> str:
    """The platform of jax's default device ("cpu", "gpu", "tpu"), importing jax alone."""
    return require_jax(full=False).default_backend()


@functools.cache
def _accelerator_possible() -> bool:
    """Whether jax could find a GPU or TPU here, decided without importing jax (about 1 s and
    150 MB): a device node of a driver, and an installed jax plugin or TPU runtime for it.
    Decided once per process (a device attached later is not seen)."""

    def installed(*names):
        for n in names:
            try:
                if importlib.util.find_spec(n) is not None:
                    return True
            except (ImportError, ValueError):
                pass
        return False

    gpu = glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd")
    tpu = glob.glob("/dev/accel[0-9]*") or glob.glob("/dev/vfio/[0-9]*")
    if gpu and installed(
        "jax_plugins", "jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin"
    ):
        return True
    return bool(tpu) and installed("libtpu")


def auto_platform() -> str:
    """The platform ``auto`` plans for: jax's default device's when jax's backends are started
    already; "cpu" without importing jax, or starting its backends, when no accelerator could be
    there (``_accelerator_possible``); otherwise jax's answer (importing it)."""
    return _platform_known() or default_platform()


def jax_imported() -> bool:
    """Whether jax is imported, all of it: a jax another thread is still importing (tidu's compile
    thread does, at its first compile) is in ``sys.modules`` already, and importing one of its
    submodules from this thread then hands one of the two threads a partially initialised module
    (Python's import locks break the cycle that way), which breaks that import for the process."""
    mod = sys.modules.get("jax")
    return mod is not None and not getattr(getattr(mod, "__spec__", None), "_initializing", False)


def _platform_known() -> str | None:
    """auto_platform's answer where it costs next to nothing (no import of jax, no start of its
    backends: starting them took ~12 ms of a first call), None otherwise.  Started backends answer
    for themselves; before that, as before jax is imported, no accelerator means "cpu"."""
    guess = None if _accelerator_possible() else "cpu"
    if not jax_imported():
        return guess
    try:
        from jax._src import xla_bridge  # (private: where it moves, the answer is the guess)  # noqa: PLC0415 - optional dependency, imported on first use

        started = xla_bridge.backends_are_initialized()
    except (ImportError, AttributeError):
        return guess
    return default_platform() if started else guess


def choose_backend(exe) -> str:
    """The ``auto`` rule: "xla" for large tensor work on an accelerator (at least AUTO_MIN_WORK,
    at most AUTO_MAX_INSTRUCTIONS instructions, every op lowered, jax installed and its default
    device not a CPU), "cpu" (the interpreter) otherwise."""
    n = len(exe.arrays["instr_prim"])
    if n > AUTO_MAX_INSTRUCTIONS or n == 0:
        return "cpu"
    if _platform_known() == "cpu":
        return "cpu"  # what auto_platform would answer, before counting the work
    if program_work(exe) < AUTO_MIN_WORK:
        return "cpu"
    if unlowered(exe) or any(is_host(op) for op, _, _ in exe.instructions):
        return "cpu"
    try:
        platform = auto_platform()
    except ImportError:
        return "cpu"
    return "cpu" if platform == "cpu" else "xla"
