"""Fragments: local values and ops plus references to other fragments; FragmentBuilder, the
shape-rule memo and the listings in the seeds' notation."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from tidu._native import _core
from tidu.graph.dtypes import AbstractValue, _aval_list
from tidu.graph.keys import (
    PRIMAL,
    External,
    GraphError,
    GraphOp,
    Local,
    OpMode,
    ValKey,
    ValRef,
    _input_keys,
    input_key_id,
    mode_id,
    mode_of,
    prim_id,
    prim_of,
)
from tidu.graph.memory import maybe_reclaim, register_cache

__all__ = ["Fragment", "FragmentBuilder", "shape_rule"]


# ---- fragments ----

class Fragment:
    """Local values and ops plus references to others; produced by build, differentiate,
    transpose."""

    __slots__ = ("store", "parents", "prefix", "_inputs", "outputs", "__weakref__")

    def __init__(self, store: _core.FragmentStore, parents: Sequence[Fragment], prefix: str,
                 outputs: Sequence[ValKey]):
        self.store = store
        self.parents = tuple(parents)
        self.prefix = prefix
        self._inputs = None
        self.outputs = list(outputs)

    @property
    def inputs(self) -> list[ValKey]:
        """The fragment's inputs (made on first use: the transforms' own fragments seldom need
        them)."""
        if self._inputs is None:
            store = self.store
            self._inputs = [ValKey(store.global_of(int(i))) for i in store.inputs()]
        return self._inputs

    @property
    def n_vals(self) -> int:
        return self.store.n_vals

    @property
    def n_ops(self) -> int:
        return self.store.n_ops

    def local_of(self, key: ValKey) -> int | None:
        local = self.store.local_of(key.id)
        return None if local < 0 else local

    def key_of(self, local: int) -> ValKey:
        return ValKey(self.store.global_of(local))

    def defines(self, key: ValKey) -> bool:
        return self.store.local_of(key.id) >= 0

    def ops(self) -> list[tuple[GraphOp, list[ValRef], list[int], OpMode]]:
        """(op, input refs, output local ids, mode) per local op, in construction order."""
        out = []
        store = self.store
        for o in store.ops():
            prim, mode, ins, first, n_out = _core.op_info(int(o))
            refs = []
            for v in ins:
                local = store.local_of(v)
                refs.append(Local(local) if local >= 0 else External(ValKey(v)))
            first_local = store.local_of(first)
            out.append((prim_of(prim), refs, list(range(first_local, first_local + n_out)),
                        mode_of(mode)))
        return out

    def __str__(self) -> str:
        return _listing(self)


    def __repr__(self) -> str:
        return f"<Fragment {self.prefix}: {self.n_vals} values, {self.n_ops} ops>"


def _name_in(frags: Sequence[Fragment], key: ValKey, seen: set) -> str | None:
    """Local name of key in the nearest ancestor fragment that defines it."""
    for f in frags:
        if id(f) in seen:
            continue
        seen.add(id(f))
        local = f.store.local_of(key.id)
        if local >= 0:
            return f"{f.prefix}{local}"
        name = _name_in(f.parents, key, seen)
        if name is not None:
            return name
    return None


def _listing(frag: Fragment) -> str:
    """The seeds' notation: ``t1 = Mul(External(p1), Local(t0)) mode=Linear[fixed, active]``."""
    p = frag.prefix
    lines = []
    input_locals = {int(i) for i in frag.store.inputs()}
    for i in sorted(input_locals):
        k = frag.key_of(i)
        lines.append(f"{p}{i} = Input({k.input_key!r}: {k.aval})")
    for op, refs, outs, mode in frag.ops():
        args = []
        for r in refs:
            if isinstance(r, Local):
                args.append(f"Local({p}{r.id})")
            else:
                name = _name_in(frag.parents, r.key, set())
                if name is None and r.key.is_input:
                    name = repr(r.key.input_key)
                args.append(f"External({name or repr(r.key)})")
        lhs = ", ".join(f"{p}{o}" for o in outs)
        desc = op.describe(args)
        out_aval = frag.key_of(outs[0]).aval
        lines.append(f"{lhs} = {desc} mode={mode} :{out_aval}")
        sub = getattr(op, "sub_listing", None)  # control flow: its bodies, indented
        if sub is not None:
            lines.append(sub())
    outs = ", ".join(
        f"{p}{frag.local_of(k)}" if frag.defines(k) else f"External({k!r})" for k in frag.outputs)
    lines.append(f"outputs: [{outs}]")
    return "\n".join(lines)


_rule_memo: dict[tuple, tuple[int, list[int]]] = {}
register_cache("shape_rules", _rule_memo, holds_ids=True)


def shape_rule(op: GraphOp, in_avals: tuple[int, ...]) -> tuple[int, list[int]]:
    """(op's prim id, its output aval ids) at operand aval ids in_avals; raises as the op's shape
    rule does.  Shape rules are pure in (op, operand avals): memoised (tracing and the AD rules
    emit the same few over and over)."""
    key = (op, in_avals)
    hit = _rule_memo.get(key)
    if hit is None:
        out = op.abstract_eval(*[_aval_list[a] for a in in_avals])
        out_avals = out if isinstance(out, tuple) else (out,)
        if len(out_avals) != op.n_outputs:
            raise GraphError(f"{op.name}: shape rule gave {len(out_avals)} outputs, "
                             f"expected {op.n_outputs}")
        hit = _rule_memo[key] = (prim_id(op), [a.id for a in out_avals])
    return hit


class FragmentBuilder:
    """Builds one fragment: inputs, ops (shape-checked, hash-consed), outputs."""

    def __init__(self, parents: Sequence[Fragment] = (), prefix: str = "p"):
        if not parents:
            maybe_reclaim()  # nothing may hold interned ids: their memory may go back first
        self.store = _core.FragmentStore()
        self.parents = list(parents)
        self.prefix = prefix

    def add_input(self, key: Hashable, av: AbstractValue) -> int:
        """Declare Input(key) at abstract value av; returns its local id."""
        return self.store.add_input(_core.intern_input(input_key_id(key), av.id))

    def add_inputs(self, keys: Sequence[Hashable], avals: Sequence[AbstractValue]) -> list[int]:
        """add_input of each (key, aval) pair, in one pass; returns their local ids."""
        return self.store.add_inputs(_input_keys.ids_of(keys), [av.id for av in avals])

    def key(self, ref: ValRef | ValKey) -> ValKey:
        """Global key of a reference."""
        if isinstance(ref, ValKey):
            return ref
        if isinstance(ref, Local):
            return ValKey(self.store.global_of(ref.id))
        if isinstance(ref, External):
            return ref.key
        raise TypeError(f"expected Local, External or ValKey, got {type(ref).__name__}")

    def aval(self, ref: ValRef | ValKey) -> AbstractValue:
        return self.key(ref).aval

    def add_op(
        self, op: GraphOp, inputs: Sequence[ValRef | ValKey], mode: OpMode = PRIMAL
    ) -> list[int]:
        """Add op over inputs in mode; returns the local ids of its outputs (existing ones if the
        same op is already local: hash-consing)."""
        store = self.store
        ids = []
        for r in inputs:
            t = type(r)
            if t is Local:
                ids.append(store.global_of(r.id))
            elif t is External or t is ValKey:
                ids.append(r.key.id if t is External else r.id)
            else:
                raise TypeError(f"expected Local, External or ValKey, got {type(r).__name__}")
        mask = mode.active_mask
        if mask is not None and len(mask) != len(ids):
            raise GraphError(
                f"{op.name}: active mask {mode} has {len(mask)} entries for {len(ids)} inputs"
            )
        hit = shape_rule(op, tuple([_core.val_aval(v) for v in ids]))
        first = store.add_op(hit[0], mode_id(mode), ids, hit[1])
        return list(range(first, first + len(hit[1])))

    def emit(self, op: GraphOp, args: Sequence, mode: OpMode = PRIMAL) -> int:
        """Fast path for AD rules: args are local ids (int) or ValKeys; returns the local id
        of output 0.  Same checks and hash-consing as add_op."""
        store = self.store
        ids = [store.global_of(a) if type(a) is int else a.id for a in args]
        mask = mode.active_mask
        if mask is not None and len(mask) != len(ids):
            raise GraphError(
                f"{op.name}: active mask {mode} has {len(mask)} entries for {len(ids)} inputs"
            )
        hit = shape_rule(op, tuple([_core.val_aval(v) for v in ids]))
        return store.add_op(hit[0], mode_id(mode), ids, hit[1])

    def local_of(self, key: ValKey) -> int | None:
        local = self.store.local_of(key.id)
        return None if local < 0 else local

    def build(self, outputs: Sequence[ValRef | ValKey]) -> Fragment:
        keys = [self.key(r) for r in outputs]
        return Fragment(self.store, self.parents, self.prefix, keys)
