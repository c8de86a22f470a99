"""transpose: a LinearFragment -> its transpose (VJP), one ``transpose_rule`` call per op,
cotangents accumulated by global key; and saved_values, what a VJP's backward part reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tidu._native import _core
from tidu.ad.differentiate import _ACTIVE2, LinearFragment, _mode_mask, _prim_flags, _ref
from tidu.ad.rules import Cotangent, RuleMissing, next_pass_id, registry
from tidu.graph import Fragment, FragmentBuilder, GraphError, Local, ValKey, mode_of, prim_of
from tidu.graph.memory import busy

__all__ = ["SavedValue", "saved_values", "transpose"]


# ---- transpose ----

def _adder(frag: Fragment) -> type:
    """A primitive class whose add() accumulates cotangents: the fragment's first op's, or for a
    fragment with no ops (outputs that pass inputs through) the first registered primitive's
    that defines one."""
    ops = frag.store.ops()
    if len(ops):
        return type(prim_of(_core.op_info(int(ops[0]))[0]))
    for cls in registry.values():
        try:
            cls.add()
        except RuleMissing:
            continue
        return cls
    raise RuleMissing("no registered primitive defines add(): cannot accumulate cotangents")


@busy
def transpose(linear: LinearFragment, cotangents: Sequence[ValKey | None] | None = None
              ) -> LinearFragment:
    """Reverse the linear flow of `linear`: cotangents of its outputs in, of its inputs out.

    Walks the linear fragment's ops in reverse, calls each op's ``transpose_rule``, and
    accumulates cotangents that reach one value from several uses by global key with
    ``op.add()`` nodes (mode Linear[active, active]).  Primal-mode (fixed) nodes of the linear
    fragment are referenced, never transposed.  `cotangents` (ValKeys aligned with the linear
    outputs) seeds existing values instead of fresh cotangent inputs (nested transforms).
    """
    if not isinstance(linear, LinearFragment):
        raise TypeError(f"transpose expects a LinearFragment, got {type(linear).__name__}")
    pass_id = next_pass_id()
    frag = linear.fragment
    builder = FragmentBuilder(parents=[frag], prefix="c")
    ct_env: dict[int, int | ValKey] = {}

    def accumulate(op_cls, key_id: int, ct) -> None:
        prev = ct_env.get(key_id)
        if prev is None:
            ct_env[key_id] = ct
        else:
            ct_env[key_id] = builder.emit(op_cls.add(), [prev, ct], _ACTIVE2)

    tangent_inputs, input_ids = [], []
    seeds = []
    if cotangents is not None and len(cotangents) != len(linear.tangent_outputs):
        raise ValueError(f"transpose: {len(cotangents)} cotangents for "
                         f"{len(linear.tangent_outputs)} outputs")
    for i, out in enumerate(linear.tangent_outputs):
        if out is None:
            continue
        if cotangents is not None:
            if cotangents[i] is not None:
                seeds.append((out, cotangents[i]))
            continue
        ct_key = Cotangent(i, pass_id)
        local = builder.add_input(ct_key, out.aval)
        seeds.append((out, local))
        tangent_inputs.append((out, ct_key))
        input_ids.append(local)
    for out, local in seeds:  # an output listed twice: its cotangents add up
        if out.id in ct_env:
            accumulate(_adder(frag), out.id, local)
        else:
            ct_env[out.id] = local


    def rule(prim, mode_i, inputs, ct_out):
        op = prim_of(prim)
        ct_in = op.transpose_rule(builder, ct_out, inputs, mode_of(mode_i))
        if len(ct_in) != len(inputs):
            raise GraphError(f"{op.name}.transpose_rule returned {len(ct_in)} cotangents for "
                             f"{len(inputs)} inputs")
        return ct_in

    def add(prim, prev, ct):
        return [builder.emit(type(prim_of(prim)).add(), [prev, ct], _ACTIVE2)]

    if len(linear.input_ids) == len(linear.tangent_inputs):
        queries = list(linear.input_ids)
    else:  # made elsewhere (a control-flow body's): find the inputs by key
        by_key = {k.input_key: k.id for k in frag.inputs}
        queries = [by_key[t_key] for _, t_key in linear.tangent_inputs]
    found = _core.transpose_ops(builder.store, frag.store,
                                [(v, builder.key(_ref(c)).id) for v, c in ct_env.items()],
                                queries, rule, add, _prim_flags, _mode_mask, ValKey)
    tangent_outputs = [None if c == _core.NONE else ValKey(c) for c in found]
    out_frag = builder.build([k for k in tangent_outputs if k is not None])
    glob = builder.store.global_of
    return LinearFragment(out_frag, tangent_inputs, tangent_outputs, pass_id, source=linear,
                          input_ids=[glob(x) for x in input_ids])


# ---- saved values ----

@dataclass(frozen=True)
class SavedValue:
    """A primal value the backward (transposed) part reads: what a VJP program must keep."""

    key: ValKey
    shape: tuple[int, ...]
    dtype: np.dtype
    nbytes: int


def saved_values(transposed: LinearFragment) -> list[SavedValue]:
    """The primal values (defined outside the linear fragments) that `transposed` and the
    linear fragment it came from read as External references: 004's saved tensors."""
    frags = [transposed.fragment]
    if transposed.source is not None:
        frags.append(transposed.source.fragment)
    own = {f.store for f in frags}
    seen: dict[int, SavedValue] = {}
    for f in frags:
        for _, refs, _, _ in f.ops():
            for r in refs:
                if isinstance(r, Local):
                    continue
                k = r.key
                if any(o.local_of(k.id) >= 0 for o in own) or k.id in seen:
                    continue
                a = k.aval
                seen[k.id] = SavedValue(k, a.shape, a.dtype, a.size * a.dtype.itemsize)
    return list(seen.values())
