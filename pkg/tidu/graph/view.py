"""resolve (a logical view over fragments and their parents, no copying) and materialize_merge
(the one flattening: reachable set, de-duplicated by key, one topological order)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from tidu._native import _core
from tidu.graph.fragment import Fragment
from tidu.graph.keys import PRIMAL, GraphError, GraphOp, OpMode, ValKey, mode_of, prim_of

__all__ = ["ValDef", "ResolvedView", "resolve", "MaterializedGraph", "materialize_merge"]


# ---- resolve ----

@dataclass(frozen=True)
class ValDef:
    """How a value is defined: an input (op is None) or output `output_slot` of op over inputs."""

    key: ValKey
    input_key: Hashable | None = None
    op: GraphOp | None = None
    inputs: tuple[ValKey, ...] = ()
    mode: OpMode = PRIMAL
    output_slot: int = 0


class ResolvedView:
    """A logical view over fragments and their parents: which fragment defines each key."""

    def __init__(self, fragments: Sequence[Fragment]):
        roots = []
        for f in fragments:
            # Derived-fragment records (e.g. ad.LinearFragment) resolve as their fragment.
            f = getattr(f, "fragment", f)
            if not isinstance(f, Fragment):
                raise TypeError(f"resolve expects Fragments, got {type(f).__name__}")
            roots.append(f)
        order: list[Fragment] = []
        seen: set[int] = set()
        stack = list(reversed(roots))
        while stack:
            f = stack.pop()
            if id(f) in seen:
                continue
            seen.add(id(f))
            order.append(f)
            stack.extend(reversed(f.parents))
        self.roots = roots
        self.fragments = order
        self.store = _core.ViewStore([f.store for f in order])

    def defines(self, key: ValKey) -> bool:
        return self.store.defines(key.id)

    def resolve_val(self, key: ValKey) -> ValDef | None:
        """The definition of key, or None when no fragment of the view defines it."""
        if not self.store.defines(key.id):
            return None
        spec = key.op_key()
        if spec is None:
            return ValDef(key, input_key=key.input_key)
        op, ins, mode = spec
        return ValDef(key, op=op, inputs=ins, mode=mode, output_slot=key.output_slot)

    def walk(self, outputs: Sequence[ValKey]):
        """Reachable values/ops from outputs in topological order (C++), or a GraphError."""
        ids = []
        for k in outputs:
            if not isinstance(k, ValKey):
                raise TypeError(f"outputs must be ValKeys, got {type(k).__name__}")
            ids.append(k.id)
        try:
            return self.store.walk(ids)
        except _core.DanglingReference as e:
            key = ValKey(e.val)
            raise GraphError(f"dangling reference: {key!r} ({key.aval}) is reachable from the "
                             f"requested outputs but no fragment in the view defines it") from None


def resolve(fragments: Sequence[Fragment]) -> ResolvedView:
    """Make external references traceable: a cheap logical view (no copying, no CSE)."""
    return ResolvedView(fragments)


# ---- materialize_merge ----

class MaterializedGraph:
    """The flattened, de-duplicated reachable graph in one topological order."""

    def __init__(self, mat: _core.Materialized):
        self._mat = mat

    @property
    def vals(self) -> list[ValKey]:
        return [ValKey(v) for v in self._mat.vals]

    @property
    def inputs(self) -> list[ValKey]:
        return self._mat.input_keys()

    @property
    def outputs(self) -> list[ValKey]:
        return self._mat.output_keys()

    @property
    def n_ops(self) -> int:
        return self._mat.n_ops

    def ops(self) -> list[tuple[GraphOp, list[ValKey], list[ValKey], OpMode]]:
        """(op, input keys, output keys, mode) in topological order."""
        out = []
        for o in self._mat.ops:
            prim, mode, ins, first, n_out = _core.op_info(int(o))
            out.append((prim_of(prim), [ValKey(i) for i in ins],
                        [ValKey(first + k) for k in range(n_out)], mode_of(mode)))
        return out


    def __str__(self) -> str:
        names = {v.id: f"v{i}" for i, v in enumerate(self.vals)}
        lines = [f"{names[k.id]} = Input({k.input_key!r}: {k.aval})" for k in self.inputs]
        for op, ins, outs, mode in self.ops():
            lines.append(f"{', '.join(names[o.id] for o in outs)} = "
                         f"{op.describe([names[i.id] for i in ins])} mode={mode}")
        lines.append(f"outputs: [{', '.join(names[o.id] for o in self.outputs)}]")
        return "\n".join(lines)


def materialize_merge(view: ResolvedView, outputs: Sequence[ValKey]) -> MaterializedGraph:
    """Flatten the view's reachable part from outputs: de-duplicated by key, one topological
    order."""
    if isinstance(view, Fragment):
        view = resolve([view])
    return MaterializedGraph(view.walk(list(outputs)))
