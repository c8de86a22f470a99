"""compile's graph half: SSA slots and dense instruction arrays (computed in C++), the
Executable holding them, and the program cache keyed by normalised structure. Where a program
runs (the interpreter, XLA) is tidu.backends."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tidu._native import _core
from tidu.graph.dtypes import AbstractValue, _aval_list
from tidu.graph.keys import GraphOp, prim_of
from tidu.graph.memory import _LIMITS, register_cache
from tidu.graph.view import MaterializedGraph

__all__ = ["Executable", "ProgramCache", "program_cache", "compile_arrays"]


# ---- compile ----

class Executable:
    """A compiled instruction stream shared by all programs of one normalised structure (arrays
    only; ``tidu.backends.program.Executable`` adds the ways to run it)."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        self.arrays = arrays
        self.n_slots = len(arrays["slot_aval"])
        self._slot_avals = None
        self.input_slots = arrays["input_slots"]
        self.output_slots = arrays["output_slots"]
        self._instructions = None
        # its primitive ids are void once the interner is emptied, or cut below them
        self._epoch, self._gen = _core.epoch(), _core.generation()
        prims = arrays["instr_prim"]
        self._n_prims = int(prims.max()) + 1 if len(prims) else 0

    def check_live(self) -> None:
        """FreedGraphError when the primitives this program names were freed (an executable
        kept past ``td.clear_caches()`` without its CompiledProgram, which would have kept them)."""
        if _core.prims_freed(self._epoch, self._gen, self._n_prims):
            raise _core.FreedGraphError(
                "this executable names primitives that td.clear_caches (or the automatic "
                "reclaim) has freed: compile the program again")

    @property
    def slot_avals(self) -> list[AbstractValue]:
        """Each slot's abstract value, made on first use (the interpreter needs none of them)."""
        if self._slot_avals is None:
            self._slot_avals = [_aval_list[a] for a in self.arrays["slot_aval"].tolist()]
        return self._slot_avals

    @property
    def instructions(self) -> list[tuple[GraphOp, list[int], list[int]]]:
        """(op, input slots, output slots) per instruction, built on first use."""
        if self._instructions is None:
            self.check_live()
            a = self.arrays
            ops = [prim_of(p) for p in a["instr_prim"].tolist()]
            in_off, in_slots = a["in_off"].tolist(), a["in_slots"].tolist()
            out_off, out_slots = a["out_off"].tolist(), a["out_slots"].tolist()
            self._instructions = [
                (op, in_slots[in_off[i]:in_off[i + 1]], out_slots[out_off[i]:out_off[i + 1]])
                for i, op in enumerate(ops)]
        return self._instructions

    def run_python(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Reference evaluation through each op's ``impl`` (numpy)."""
        slots: list[Any] = [None] * self.n_slots
        for s, x in zip(self.input_slots, inputs):
            slots[s] = x
        for op, ins, outs in self.instructions:
            res = op.impl(*[slots[i] for i in ins])
            if len(outs) == 1:
                slots[outs[0]] = res
            else:
                for s, r in zip(outs, res):
                    slots[s] = r
        return [np.array(slots[s], dtype=self.slot_avals[s].dtype, copy=True).reshape(
            self.slot_avals[s].shape) for s in self.output_slots]


class ProgramCache:
    """Executables keyed by normalised structure (input keys and pass ids never enter the key),
    least recently used first, at most ``cache_limits()["program_cache"]`` of them.  The keys
    hold primitive ids: the cache is emptied with the interner (tidu.graph.memory)."""

    def __init__(self):
        self._table: OrderedDict[bytes, Executable] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get_or_build(self, canon: bytes, arrays: dict[str, np.ndarray],
                     make: Callable[[dict], Executable] = Executable) -> Executable:
        """The executable of structure ``canon``, made from ``arrays`` by ``make`` on a miss."""
        table = self._table
        exe = table.get(canon)
        if exe is None:
            self.misses += 1
            exe = table.setdefault(canon, make(arrays))
        else:
            self.hits += 1
        try:
            table.move_to_end(canon)  # most recently used last
        except KeyError:  # evicted by another thread meanwhile
            pass
        self.trim()
        return exe

    def trim(self) -> None:
        """Evict the least recently used executables beyond the limit."""
        limit = _LIMITS["program_cache"]
        table = self._table
        while len(table) > limit:
            try:
                table.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                break

    def stats(self) -> dict:
        return {"entries": len(self._table), "hits": self.hits, "misses": self.misses,
                "bytes": sum(sum(a.nbytes for a in e.arrays.values())
                             for e in list(self._table.values()))}

    def clear(self) -> None:
        self._table.clear()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._table)


program_cache = ProgramCache()
register_cache("program_cache", program_cache._table, program_cache.stats, holds_ids=True,
               trim=program_cache.trim)


def compile_arrays(graph: MaterializedGraph) -> tuple[dict[str, np.ndarray], bytes]:
    """SSA slot assignment and dense instruction arrays (C++), with the normalised structural
    key the program cache files them under."""
    if not isinstance(graph, MaterializedGraph):
        raise TypeError(f"compile expects a MaterializedGraph (from materialize_merge), "
                        f"got {type(graph).__name__}")
    return graph._mat.compile()
