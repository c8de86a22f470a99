"""Splitting a long program into separately compiled segments, values crossing them packed.

XLA's CPU pipeline compiles long graphs in super-linear time, so ``lower_segments`` cuts a program
into consecutive runs of at most ``MAX_FUSED_INSTRUCTIONS`` instructions, each its own executable.
What crosses a boundary must stay linear in the program's size too: a segment takes only the values
it reads (never everything live), and returns only the values it defines that a later segment reads.
Small values (at most ``PACK_MAX_ELEMENTS`` elements per point) leave a segment packed, one flat
buffer per dtype, and a later segment slices out what it reads; larger ones cross as they are (a
copy into a pack would cost more than a parameter). So a segment has a handful of parameters and
results however many values cross it: the gradient of a long scalar chain, whose backward half reads
every forward value, passed thousands of separate parameters per segment before (quadratic compile
time and memory: 43 s and 1.7 GB for 4,000 ops; 10,000 ops were killed past 8 GB).

A segment's parameters and results are named by keys: a slot number (a program input, or a large
value) or ``("pack", segment, dtype)``; ``Segment.in_avals``/``out_avals`` give their unbatched
shapes and dtypes.  The last segment returns the program's outputs, in order.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from tidu.backends.xla.hlo import Lowering, Value, tensor_type

__all__ = ["MAX_FUSED_INSTRUCTIONS", "PACK_MAX_ELEMENTS", "Segment", "lower_segments",
           "segment_bounds"]

# Segments of at most this many instructions are compiled separately.  bench/xla_compile.py: with
# packed boundaries, compile time per instruction is flat from 1e3 to 1e5 instructions at this size.
MAX_FUSED_INSTRUCTIONS = 250
# Values of at most this many elements (per point, without the batch axis) cross segments packed.
PACK_MAX_ELEMENTS = 4096


class LoweringMissing(NotImplementedError):
    """A primitive has no StableHLO lowering."""


def is_host(op) -> bool:
    """True for a host callback (an op with a ``callback_name``: td.debug.print and the like),
    which the runner calls between compiled segments instead of lowering it."""
    return getattr(op, "callback_name", None) is not None


class _Aval:
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)


class Segment:
    """One compiled unit: its StableHLO text, the keys of its parameters and of its results (slot
    numbers or ("pack", segment, dtype)), and their unbatched avals; ``in_shared`` marks the
    parameters that have no batch axis even in a batched program (shared inputs).  A segment
    with ``host`` (text None) is one host callback that the runner calls in Python: its keys are
    the slots the callback reads and writes, never packed."""

    def __init__(self, text: str | None, in_keys: list, out_keys: list, in_avals: list,
                 out_avals: list, in_shared: list[bool] | None = None, host=None):
        self.host = host
        self.text = text
        self.in_keys = in_keys
        self.out_keys = out_keys
        self.in_avals = in_avals
        self.out_avals = out_avals
        # parameters without the batch axis (inputs eval_batch shares between points)
        self.in_shared = in_shared or [False] * len(in_keys)


def segment_bounds(n: int, max_instructions: int | None) -> list[tuple[int, int]]:
    """[start, stop) of the balanced consecutive segments of a program of n instructions."""
    k = 1 if not max_instructions else max(1, -(-n // max_instructions))
    step = max(1, -(-n // k))
    return [(s, min(s + step, n)) for s in range(0, max(n, 1), step)]


def _function(lo: Lowering, name: str, args: list[tuple[str, str]], results: list[Value]) -> str:
    sig = ", ".join(f"{n}: {t}" for n, t in args)
    rts = ", ".join(v.type for v in results)
    ret = f'    "func.return"({", ".join(v.name for v in results)}) : ({rts}) -> ()'
    return (
        f"  func.func public @{name}({sig}) -> ({rts}) {{\n"
        + "\n".join(lo.lines)
        + ("\n" if lo.lines else "")
        + ret
        + "\n  }"
    )


def _module(func: str) -> str:
    return (
        "module @tidu attributes {mhlo.num_partitions = 1 : i32, "
        "mhlo.num_replicas = 1 : i32} {\n" + func + "\n}\n"
    )


def lower_range(exe, lo: Lowering, env: dict[int, Value], start: int, stop: int) -> None:
    """Write instructions [start, stop) of an Executable into lo; env maps slots to Values."""
    avals = exe.slot_avals
    for op, ins, outs in exe.instructions[start:stop]:
        res = op.lower(lo, avals[outs[0]], *[env[s] for s in ins])
        if len(outs) == 1:
            env[outs[0]] = res
        else:  # several results (control flow): one Value each
            env.update(zip(outs, res))


def lower_segments(
    exe,
    batch: int | None = None,
    max_instructions: int | None = MAX_FUSED_INSTRUCTIONS,
    platform: str = "cpu",
    shared: frozenset[int] = frozenset(),
) -> list[Segment]:
    """The program as consecutive segments of at most max_instructions instructions (one when
    None); see the module docstring for what crosses a boundary.  With a batch, the input slots
    in ``shared`` are parameters without the batch axis, broadcast over it where read."""
    instrs = exe.instructions
    n = len(instrs)
    bounds = segment_bounds(n, max_instructions)
    hosts = [i for i, (op, _, _) in enumerate(instrs) if is_host(op)]
    host_reads: set[int] = set()
    if hosts:  # each host callback is a segment of its own, run in Python between the others
        if batch is not None:
            raise LoweringMissing("a program holding a host callback (td.debug.print, "
                                  "td.debug.callback, td.pure_callback) runs batches on the "
                                  "interpreter (backend='cpu')")
        cuts = sorted({0, n} | set(hosts) | {i + 1 for i in hosts} | {a for a, _ in bounds})
        bounds = [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
        if is_host(instrs[bounds[-1][0]][0]):
            bounds.append((n, n))  # a compiled segment last, to return the outputs
        host_reads = {int(s) for i in hosts for s in instrs[i][1]}
    avals = exe.slot_avals
    outputs = [int(s) for s in exe.output_slots]
    seg_of = np.searchsorted(np.array([b[0] for b in bounds]), np.arange(n), side="right") - 1
    defined_in: dict[int, int] = {int(s): -1 for s in exe.input_slots}  # -1: a program input
    last_read: dict[int, int] = {}  # the last segment reading each slot
    for i, (_, ins, outs) in enumerate(instrs):
        k = int(seg_of[i])
        for s in ins:
            last_read[s] = k
        for s in outs:
            defined_in[s] = k
    for s in outputs:
        last_read[s] = len(bounds)  # the final segment returns them
    where: dict[int, tuple] = {}  # an exported slot -> its key and, when packed, offset
    segments = []
    for k, (start, stop) in enumerate(bounds):
        final = k == len(bounds) - 1
        op, h_ins, h_outs = instrs[start] if start < n else (None, (), ())
        if op is not None and is_host(op):
            ins_, outs_ = [int(s) for s in h_ins], [int(s) for s in h_outs]
            segments.append(Segment(None, ins_, outs_,
                                    [_Aval(avals[s].shape, avals[s].dtype) for s in ins_],
                                    [_Aval(avals[s].shape, avals[s].dtype) for s in outs_],
                                    host=op))
            for s in outs_:
                where[s] = (s, None)
            continue
        lo = Lowering(batch, platform)
        env: dict[int, Value] = {}
        args: list[tuple[str, str]] = []
        in_keys: list[Hashable] = []
        in_avals: list[_Aval] = []
        in_shared: list[bool] = []
        packs: dict[Hashable, Value] = {}

        def param(key, av, one=False, lo=lo, args=args, in_keys=in_keys, in_avals=in_avals,
                  in_shared=in_shared):
            name = f"%arg{len(args)}"
            ty = tensor_type(av.shape, av.dtype) if one else lo.type(av)
            args.append((name, ty))
            in_keys.append(key)
            in_avals.append(av)
            in_shared.append(one)
            return Value(name, ty)

        def fetch(s, lo=lo, env=env, packs=packs, param=param):
            if s in env:
                return
            key, off = where.get(s, (s, None))
            av = avals[s]
            if off is None and s in shared and lo.nb:  # one copy, broadcast over the points
                dims = lo.i64_array(lo.ax(range(len(av.shape))))
                env[s] = lo.op("stablehlo.broadcast_in_dim", [param(key, av, True)], av,
                               f"broadcast_dimensions = {dims}")
                return
            if off is None:
                env[s] = param(key, av)
                return
            if key not in packs:
                packs[key] = param(key, _Aval((where[key],), key[2]))
            flat = lo.op("stablehlo.slice", [packs[key]], _Aval((av.size,), av.dtype),
                         f"start_indices = {lo.i64_array(lo.lead(0) + (off,))}, "
                         f"limit_indices = {lo.i64_array(lo.lead(lo.batch) + (off + av.size,))}, "
                         f"strides = {lo.i64_array(lo.lead(1) + (1,))}")
            env[s] = lo.op("stablehlo.reshape", [flat], av)

        for _, ins, _ in instrs[start:stop]:
            for s in ins:
                if defined_in[s] < k:
                    fetch(s)
        local = set(env)
        lower_range(exe, lo, env, start, stop)
        if final:
            for s in outputs:
                fetch(s)
            out_keys, results = list(outputs), [env[s] for s in outputs]
            out_avals = [_Aval(avals[s].shape, avals[s].dtype) for s in outputs]
        else:
            out_keys, results, out_avals = [], [], []
            packed: dict[str, list[int]] = {}
            for s in env:
                if s in local or last_read.get(s, -1) <= k:
                    continue
                av = avals[s]
                if av.size <= PACK_MAX_ELEMENTS and s not in host_reads:
                    packed.setdefault(np.dtype(av.dtype).name, []).append(s)
                else:
                    where[s] = (s, None)
                    out_keys.append(s)
                    results.append(env[s])
                    out_avals.append(_Aval(av.shape, av.dtype))
            for dt, slots in packed.items():
                key, off, flats = ("pack", k, dt), 0, []
                for s in slots:
                    where[s] = (key, off)
                    size = avals[s].size
                    flats.append(lo.op("stablehlo.reshape", [env[s]], _Aval((size,), dt)))
                    off += size
                where[key] = off
                pav = _Aval((off,), dt)
                buf = flats[0] if len(flats) == 1 else lo.op(
                    "stablehlo.concatenate", flats, pav, f"dimension = {lo.nb} : i64")
                out_keys.append(key)
                results.append(buf)
                out_avals.append(pav)
        text = _module("\n".join([_function(lo, "main", args, results), *lo.funcs.values()]))
        segments.append(Segment(text, in_keys, out_keys, in_avals, out_avals, in_shared))
    return segments

