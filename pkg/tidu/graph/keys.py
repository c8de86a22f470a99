"""Identity: ops and modes, the interning of InputKeys, ops and modes to dense ids, and ValKey
(a value's global key, compiled in tidu._core) with Local/External references."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from tidu._native import _core
from tidu.graph.dtypes import AbstractValue, _aval_list, _lock

__all__ = [
    "GraphError",
    "GraphOp",
    "OpMode",
    "PRIMAL",
    "Linear",
    "ValKey",
    "Local",
    "External",
    "ValRef",
    "input_key_id",
    "input_key_ids",
    "is_input_key",
    "prim_id",
    "mode_id",
    "prim_of",
    "mode_of",
]


class GraphError(ValueError):
    """A structural problem with a graph: dangling reference, unknown key, bad output."""


# ---- ops and modes ----


class GraphOp:
    """An immutable, hashable primitive instance: its kind plus static attributes.

    Subclasses (usually frozen dataclasses) define ``name``, ``n_outputs`` and
    ``abstract_eval(*avals)``, which returns the output AbstractValue (a tuple of them when
    ``n_outputs > 1``) or raises TypeError/ValueError naming the problem.
    """

    n_outputs: int = 1

    @property
    def name(self) -> str:
        return type(self).__name__

    def abstract_eval(self, *avals: AbstractValue):
        raise NotImplementedError(f"{self.name} has no shape/dtype rule")

    def attrs(self) -> list[str]:
        """Static attributes as printed in listings, e.g. ``["axes=(0,)"]``."""
        fields = getattr(self, "__dataclass_fields__", {})
        return [f"{k}={getattr(self, k)!r}" for k in fields if k != "data"]

    def describe(self, args: Sequence[str] = ()) -> str:
        """The op applied to printed args, e.g. ``ReduceSum(Local(t0), axes=(0,))``."""
        return f"{self.name}({', '.join([*args, *self.attrs()])})"


class OpMode:
    """Primal (active_mask None) or Linear(active_mask); part of an op's identity.

    Interned: ``Linear(mask)`` returns one shared instance per mask, with its hash precomputed
    (modes are looked up once per emitted op)."""

    __slots__ = ("active_mask", "_hash")

    def __init__(self, active_mask: tuple[bool, ...] | None = None):
        self.active_mask = active_mask
        self._hash = hash(("OpMode", active_mask))

    def __eq__(self, other):
        return isinstance(other, OpMode) and other.active_mask == self.active_mask

    def __hash__(self):
        return self._hash

    def __reduce__(self):
        return (OpMode, (self.active_mask,))

    @property
    def is_linear(self) -> bool:
        return self.active_mask is not None

    def __repr__(self) -> str:
        return f"OpMode({self.active_mask!r})"

    def __str__(self) -> str:
        if self.active_mask is None:
            return "Primal"
        return "Linear[" + ", ".join("active" if a else "fixed" for a in self.active_mask) + "]"


PRIMAL = OpMode()
_linear_modes: dict[tuple, OpMode] = {}


def Linear(active_mask: Iterable[bool]) -> OpMode:  # noqa: N802 - reads like the seeds' enum
    mask = tuple(active_mask)
    mode = _linear_modes.get(mask)
    if mode is None:
        mode = OpMode(tuple(bool(a) for a in mask))
        _linear_modes[mask] = mode
    return mode


class _Interned:
    """Hashable objects -> dense ids (the C++ core sees only the ids)."""

    __slots__ = ("ids", "objs")

    def __init__(self, first: Iterable = ()):
        self.ids: dict = {}
        self.objs: list = []
        for x in first:
            self.id(x)

    def id(self, obj) -> int:
        try:
            i = self.ids.get(obj)
        except TypeError:
            i = None  # ids_of names the unhashable object
        return i if i is not None else self.ids_of((obj,))[0]

    def ids_of(self, objs: Iterable) -> list[int]:
        """id() of each of objs, under one lock (a new object is hashed once, not twice), which
        _core takes itself (_core.call_locked says why)."""
        return _core.intern_ids(self.ids, self.objs, objs, _lock)


_input_keys = _Interned()
_prims = _Interned()
_modes = _Interned([PRIMAL])


def input_key_id(key: Hashable) -> int:
    return _input_keys.id(key)


def is_input_key(key: Hashable) -> bool:
    """Whether any fragment has declared ``key`` as an input (a key never declared is most
    likely a typo)."""
    try:
        return key in _input_keys.ids
    except TypeError:
        return False


def input_key_ids(keys: Iterable[Hashable]) -> list[int]:
    """input_key_id of each key, under one lock."""
    return _input_keys.ids_of(keys)


def prim_id(op: GraphOp) -> int:
    return _prims.id(op)


def mode_id(mode: OpMode) -> int:
    return _modes.id(mode)


def prim_of(pid: int) -> GraphOp:
    return _prims.objs[pid]


def mode_of(mid: int) -> OpMode:
    return _modes.objs[mid]


# ---- keys and references ----

# ValKey(id): the global identity of a value, Input(key) or Derived(OpKey, output_slot), as an
# interned id; compiled (_core.ValKey: made hundreds of times per transform).  Its Python parts:
ValKey = _core.ValKey


def _not_an_input(k: ValKey):
    raise GraphError(f"{k!r} is not an input")


def _op_key_of(k: ValKey) -> tuple[GraphOp, tuple[ValKey, ...], OpMode] | None:
    op, _, _ = _core.val_info(k.id)
    if op == _core.NONE:
        return None
    prim, mode, ins, _, _ = _core.op_info(op)
    return prim_of(prim), tuple(ValKey(i) for i in ins), mode_of(mode)


def _key_repr(k: ValKey) -> str:
    op, index, _ = _core.val_info(k.id)
    if op == _core.NONE:
        return f"Input({_input_keys.objs[index]!r})"
    prim, _, _, _, n_out = _core.op_info(op)
    slot = f"[{index}]" if n_out > 1 else ""
    return f"Derived({prim_of(prim).name}#{op}{slot})"


_core.bind_keys(_aval_list, _input_keys.objs, (_not_an_input, _op_key_of, _key_repr))


@dataclass(frozen=True)
class Local:
    """Reference to a value defined in the fragment being built (by local id)."""

    id: int


@dataclass(frozen=True)
class External:
    """Reference to a value defined elsewhere, by global key."""

    key: ValKey


ValRef = Local | External
