"""Memory a long-running process gets back: the registry of every cache tidu keeps, their limits,
``clear_caches``, ``memory_stats``, and emptying the interner when nothing holds its ids.

The interner (C++, ``tidu._core``) hash-conses every value and op ever built into dense ids. Its
ids are held by fragment stores and walks (``_core.FragmentStore``, ``_core.Materialized``),
which count themselves as live holders, and by memos of primitive and value ids (the tables
registered here with ``holds_ids=True``). When no holder is alive, the interner, the tables of
primitives and input keys and every id memo are emptied in one step (``_core.reset_interner``,
which runs no Python code, so no other thread sees half of it). A ValKey does not count as a
holder: one that outlives its graph raises ``FreedGraphError`` when used. docs/memory.md has the
design and what is not reclaimed.
"""

from __future__ import annotations

import functools
import gc
import sys
import weakref
from collections import OrderedDict
from collections.abc import Callable

from tidu._native import _core
from tidu.graph import keys as _keys
from tidu.graph.dtypes import _lock

__all__ = [
    "FreedGraphError",
    "FunctionCache",
    "cache_limits",
    "at_safe_point",
    "busy",
    "clear_caches",
    "cut",
    "disown",
    "maybe_reclaim",
    "memory_stats",
    "reclaim",
    "register_cache",
    "set_cache_limits",
]

FreedGraphError = _core.FreedGraphError
disown = _core.disown


# ---- limits ----

_LIMITS = {
    # compiled entries (one per argument shapes/dtypes) of one jitted or transformed function
    "jit_per_function": 128,
    # the same over every live function together (least recently used function's oldest first)
    "jit_total": 4096,
    # td.program_cache: executables by normalised structure
    "program_cache": 1024,
    # the automatic reclaim runs when nothing holds interned ids and the interner with its
    # tables of primitives and input keys and the program cache hold about this many bytes
    # (0: never automatically)
    "reclaim_bytes": 8 << 20,
}


def cache_limits() -> dict[str, int]:
    """The current limits (see ``set_cache_limits``)."""
    return dict(_LIMITS)


def set_cache_limits(**limits: int) -> dict[str, int]:
    """Set cache bounds; returns the previous limits (pass them back to restore).

    Args:
        jit_per_function: compiled entries one jitted (or grad, vmap, ...) function keeps, least
            recently used evicted first (default 128).
        jit_total: the same over all live functions together (default 4096).
        program_cache: executables ``td.program_cache`` keeps by structure (default 1024).
        reclaim_bytes: the interner is emptied automatically, when no fragment or program holds
            its ids, once it (with its tables of primitives and input keys) holds about this many
            bytes (default 8 MiB, an estimate that counts the program cache too); 0 turns the
            automatic reclaim off (``td.clear_caches()`` still empties it).

    Raises:
        TypeError: an unknown limit name.  ValueError: a negative limit, or a zero cache bound.
    """
    prev = dict(_LIMITS)
    for name, value in limits.items():
        if name not in _LIMITS:
            raise TypeError(f"set_cache_limits: unknown limit {name!r}; "
                            f"known: {', '.join(sorted(_LIMITS))}")
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"set_cache_limits: {name} must be an int, got {value!r}")
        if value < 0 or (value == 0 and name != "reclaim_bytes"):
            raise ValueError(f"set_cache_limits: {name} must be positive, got {value}")
    _LIMITS.update(limits)
    _enforce_total()
    for cache in _live_caches():
        cache.trim()
    for name, (_, _, _, trim) in _CACHES.items():
        if trim is not None:
            trim()
    return prev


# ---- the registry ----

# name -> (clear or id table, stats() -> dict, holds_ids, trim or None)
_CACHES: dict[str, tuple] = {}


def register_cache(name: str, cache, stats: Callable[[], dict] | None = None, *,
                   holds_ids: bool = False, trim: Callable[[], None] | None = None) -> None:
    """Register one of tidu's caches for ``clear_caches`` and ``memory_stats``.

    holds_ids: its entries hold interned primitive or value ids; ``cache`` is then the dict,
    OrderedDict or list itself, emptied together with the interner.  Otherwise ``cache`` is a
    dict or list, or a function that empties it.  stats() gives at least ``entries`` (and
    ``bytes`` where known); by default, the length of the dict or list.
    """
    if holds_ids and type(cache) not in (dict, OrderedDict, list):
        raise TypeError(f"{name}: a cache holding interned ids must be a dict, OrderedDict or "
                        f"list")
    if stats is None:
        def stats(c=cache):
            return {"entries": len(c)}
    _CACHES[name] = (cache, stats, holds_ids, trim)


def _id_tables() -> list:
    return [_keys._prims.ids, _keys._prims.objs, _keys._input_keys.ids, _keys._input_keys.objs] \
        + [c for c, _, holds, _ in _CACHES.values() if holds]


_held = [0, 0]  # primitives looked at, and the bytes they hold (estimated)

# Rough sizes behind one entry (measured by bench/memory_soak.py: a primitive with its Python
# object, a control-flow op's body and its compiled program; an input key; an executable with its
# arrays and C++ program): what the automatic reclaim weighs against reclaim_bytes.
_PRIM_BYTES, _KEY_BYTES, _PROGRAM_BYTES = 1024, 512, 8192


def _prim_bytes(op) -> int:
    data = getattr(op, "data", None)
    return _PRIM_BYTES + (len(data) if isinstance(data, (bytes, bytearray)) else
                          int(getattr(data, "nbytes", 0) or 0))


def _prims_bytes() -> int:
    """About what the tables of primitives and input keys hold, the data of constants included
    (counted once per primitive, as they come)."""
    objs = _keys._prims.objs
    n = len(objs)
    if _held[0] != n:
        if _held[0] > n:  # emptied or cut since
            _held[0] = _held[1] = 0
        _held[1] += sum([_prim_bytes(objs[i]) for i in range(_held[0], n)])
        _held[0] = n
    return _held[1] + _KEY_BYTES * len(_keys._input_keys.objs)


def _held_bytes() -> int:
    """What an emptying would give back, about: the interner, its tables, the program cache."""
    programs = _CACHES.get("program_cache")
    n_prog = len(programs[0]) if programs is not None else 0
    return _core.interner_bytes() + _prims_bytes() + _PROGRAM_BYTES * n_prog


def reclaim() -> bool:
    """Empty the interner, the tables of primitives and input keys and every memo of their ids,
    if no fragment, walk or program holds interned ids; returns whether it did."""
    if not (_core.n_vals() or _core.n_ops() or _keys._prims.objs or _keys._input_keys.objs):
        return _core.live_holders() == 0  # empty already: no new epoch
    done = _core.call_locked(_lock, lambda: _core.reset_interner(_id_tables()))
    if done:
        _held[0] = _held[1] = 0
        _auto.reset(0, 0, 0)
    return done


def cut(min_bytes: int = 0) -> int:
    """Cut the interner back to the ids that live fragments, walks and programs reach (and
    everything interned before the newest of them: ids go as a stack), with the primitives of
    the ops kept; every memo of ids is emptied, as by an emptying. Returns the number of ops
    freed; 0, with nothing touched, when the estimated bytes given back are under min_bytes.

    Only safe where no trace or transform is in progress (their ids in hand are not yet in a
    holder): ``at_safe_point`` checks that before calling it."""
    freed = _core.call_locked(_lock, _cut_locked, min_bytes)  # (_core.call_locked: why)
    if freed is None:
        return 0
    _held[0] = _held[1] = 0
    _auto.holders = min(_auto.holders, _core.live_holders())
    return freed


def _cut_locked(min_bytes: int) -> int | None:
    """cut's work, holding _lock: the ops freed, or None where nothing was cut."""
    n_vals, n_ops, n_prims, n_keys = _core.kept_marks()
    prims, keys = _keys._prims, _keys._input_keys
    if n_ops == _core.n_ops() and n_prims == len(prims.objs) and n_keys == len(keys.objs):
        return None
    if min_bytes:
        total = max(_core.n_ops(), 1)
        est = _core.interner_bytes() * (total - n_ops) // total
        est += sum(_prim_bytes(op) for op in prims.objs[n_prims:])
        est += _KEY_BYTES * (len(keys.objs) - n_keys)
        programs = _CACHES.get("program_cache")  # emptied with the memos
        est += _PROGRAM_BYTES * (len(programs[0]) if programs is not None else 0)
        if est < min_bytes:
            return None
    tables = [c for c, _, holds, _ in _CACHES.values() if holds]
    # No other Python thread may run in the middle of the cut (it could intern an op with a
    # primitive id being freed): the cut runs Python code (hashing the primitives it drops),
    # so the interpreter is asked not to switch threads until it is done.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e6)
    try:
        freed = _core.truncate_interner(n_vals, n_ops, n_prims, n_keys,
                                        (prims.ids, prims.objs), (keys.ids, keys.objs),
                                        tables)
    finally:
        sys.setswitchinterval(interval)
    return freed


class _AutoCut:
    """The automatic cut's state, from its last attempt."""
    __slots__ = ("held", "holders", "retries")

    def __init__(self) -> None:
        self.reset(0, 0, 0)

    def reset(self, held: int, holders: int, retries: int) -> None:
        self.held = held          # _held_bytes() after the attempt: the baseline growth counts from
        self.holders = holders    # live holders after it
        self.retries = retries    # how many of the next safe points try again (it gave nothing)

    def __repr__(self) -> str:
        return f"_AutoCut(held={self.held}, holders={self.holders}, retries={self.retries})"


_auto = _AutoCut()
_RETRIES = 2  # the safe points that look again after an attempt that gave nothing back

# Graph transforms in progress over all threads (differentiate, transpose, the batching walk)
# hold ids outside any holder for a while (a control-flow rule's Body before its op is
# interned), so the automatic cut waits for them (_core.n_busy()), as it waits for open traces.
_BUSY = _core.BusyScope()


def busy(fn: Callable) -> Callable:
    """Mark fn, a graph transform, as in progress while it runs (the automatic cut waits)."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with _BUSY:
            return fn(*args, **kwargs)
    return wrapped


def at_safe_point() -> None:
    """The automatic cut: called where a top-level trace starts (jit's trace, ``td.build``),
    so no ids are in hand outside holders; it acts only when no trace is open and no graph
    transform (``busy``) runs in any thread, and once the interner and its tables have grown by
    ``reclaim_bytes`` since the last attempt, or hold that much and the live holders the last
    attempt found have halved since. An attempt that gives nothing back (the newest graph may be
    in use at that point of the user's loop) is made again at the next two safe points. Cheap
    when it does nothing (a count, a size).

    Building fragments by hand (``FragmentBuilder``) in another thread is outside what this
    sees: wrap such code in ``busy`` (or turn the automatic reclaim off, ``reclaim_bytes=0``)."""
    limit = _LIMITS["reclaim_bytes"]
    if not limit or _core.n_tracing() or _core.n_busy():
        return
    if _auto.retries:
        # The last attempt gave nothing back, often because the newest graph was still in use
        # at that point of the user's loop (the function just called, while the next one is
        # traced): were the next attempt due only after reclaim_bytes more, it could meet the
        # loop at that same point every time. Look again at the next few safe points.
        _auto.retries -= 1
        gc.collect()
        if _give_back(limit):
            _auto.reset(_held_bytes(), _core.live_holders(), 0)
        return
    held = _held_bytes()
    if held < _auto.held:  # given back since by other means (clear_caches): grow from here
        _auto.held = held
    if held - _auto.held < limit:
        # or the holders an attempt found have mostly gone since (many functions dropped)
        if held < limit or 2 * _core.live_holders() > _auto.holders:
            return
    done = _give_back(limit)
    if not done:
        gc.collect()  # a user's function may sit in a reference cycle
        done = _give_back(limit)
    _auto.reset(_held_bytes(), _core.live_holders(), 0 if done else _RETRIES)


def _give_back(limit: int) -> bool:
    """One attempt: empty everything if nothing holds ids, else cut back to what the holders
    reach if that gives back at least half of limit. Returns whether anything went."""
    return bool((_core.live_holders() == 0 and reclaim()) or cut(min_bytes=limit // 2))


def maybe_reclaim() -> None:
    """The automatic reclaim (FragmentBuilder calls it before making a store): cheap when it does
    nothing (one count and one size)."""
    if _core.live_holders() == 0:
        limit = _LIMITS["reclaim_bytes"]
        if limit and _held_bytes() >= limit:
            reclaim()


def clear_caches() -> bool:
    """Empty every cache tidu keeps (as ``jax.clear_caches``): the compiled entries of every
    jitted and transformed function, ``td.program_cache``, the AD rule templates, the tracer's
    memos, the interpreter's encodings, XLA's splice cache, the queued background XLA compiles of
    tiered execution (one running finishes); then, if no fragment or program is
    still alive, the interner and its tables (``memory_stats()["interner"]``).

    Functions keep working: their next call traces and compiles again. Returns whether the
    interner was emptied too (False: something alive still holds its ids)."""
    for cache in _live_caches():
        cache.clear()
    for cache, _, holds_ids, _ in _CACHES.values():
        if holds_ids:
            continue
        if callable(cache):
            cache()
        else:
            cache.clear()
    gc.collect()
    if reclaim():
        return True
    if not (_core.n_tracing() or _core.n_busy()):  # something alive: give back what nothing reaches
        cut()
    return False


def memory_stats() -> dict[str, dict]:
    """What each cache and the interner hold, e.g. ``memory_stats()["interner"]["bytes"]``.

    Keys: ``interner`` (``bytes``, ``n_vals``, ``n_ops``, ``primitives``, ``input_keys``,
    ``tables_bytes``: about what those two tables hold, constants' data included,
    ``reclaimable_bytes``: about what emptying would give back, weighed against reclaim_bytes,
    ``live_holders``: fragments and walks alive that keep it from being emptied, ``epoch``: how
    many times it was emptied, ``generation``: how many times it was cut back since), ``jit``
    (``functions``, ``entries``), ``rule_templates``, ``tracer_rules``, ``leaf_avals`` and each
    registered cache (``entries``, ``bytes`` where known)."""
    caches = _live_caches()
    out = {
        "interner": {
            "bytes": _core.interner_bytes(), "n_vals": _core.n_vals(), "n_ops": _core.n_ops(),
            "primitives": len(_keys._prims.objs), "input_keys": len(_keys._input_keys.objs),
            "tables_bytes": _prims_bytes(), "reclaimable_bytes": _held_bytes(),
            "live_holders": _core.live_holders(), "epoch": _core.epoch(),
            "generation": _core.generation(),
        },
        "jit": {"functions": len(caches), "entries": sum(len(c) for c in caches)},
    }
    for name, n in _core.memo_sizes().items():
        out[name] = {"entries": n}
    for name, (_, stats, _, _) in _CACHES.items():
        out[name] = dict(stats())
    return out


# ---- per-function caches ----

_all: dict[int, weakref.ref] = {}  # id -> weakref of each live FunctionCache, least recent first
_total = [0]  # entries over all of them (an upper bound: a dead cache's entries stay counted
              # until the next recount)


def _live_caches() -> list[FunctionCache]:
    return [c for c in (r() for r in list(_all.values())) if c is not None]


def _forget(key: int, ref) -> None:
    if _all.get(key) is ref:
        del _all[key]


class FunctionCache(OrderedDict):
    """The compiled entries of one jitted or transformed function by call signature: least
    recently used first, at most ``jit_per_function`` of them, and at most ``jit_total`` over
    every live FunctionCache together.  It dies with its function (the jitted object owns it).
    (An OrderedDict: marking an entry used is one C call, so a thread looking it up meanwhile
    still finds it.)"""

    __slots__ = ("forget",)

    def __init__(self, forget: Callable[[], None] | None = None):
        super().__init__()
        self.forget = forget  # drops the function's remembered fast path (Jitted.forget)
        key = id(self)
        _all[key] = weakref.ref(self, lambda r, k=key: _forget(k, r))

    def lookup(self, sig):
        """The entry for sig (marked most recently used), or None."""
        entry = self.get(sig)
        if entry is not None:
            try:
                self.move_to_end(sig)
            except KeyError:  # evicted by another thread meanwhile: the entry is still good
                pass
            self._touch()
        return entry

    def _touch(self) -> None:
        key = id(self)
        ref = _all.pop(key, None)
        if ref is not None:
            _all[key] = ref

    def __setitem__(self, sig, entry) -> None:
        fresh = sig not in self
        OrderedDict.__setitem__(self, sig, entry)
        self.move_to_end(sig)
        self._touch()
        if fresh:
            self.trim()
            _total[0] += 1
            if _total[0] > _LIMITS["jit_total"]:
                _enforce_total()

    def trim(self) -> None:
        """Evict the least recently used entries beyond jit_per_function."""
        limit = _LIMITS["jit_per_function"]
        while len(self) > limit:
            self.popitem(last=False)
            if self.forget is not None:
                self.forget()

    def clear(self) -> None:
        OrderedDict.clear(self)
        if self.forget is not None:
            self.forget()


def _enforce_total() -> None:
    """Recount the entries of the live caches; evict the oldest entries of the least recently
    used ones until at most jit_total remain."""
    caches = _live_caches()
    total = sum(len(c) for c in caches)
    limit = _LIMITS["jit_total"]
    for c in caches:
        if total <= limit:
            break
        while len(c) and total > limit:
            try:
                c.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                break
            total -= 1
        if c.forget is not None:
            c.forget()
    _total[0] = total
