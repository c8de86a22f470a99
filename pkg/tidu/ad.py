"""differentiate and transpose (the seeds' tidu layer): generic over the PrimitiveOp contract.

Neither names a concrete primitive: ordering and activity come from the C++ walk of the resolved
view, each active op's own ``linearize`` / ``transpose_rule`` emits the new nodes, and fan-out
cotangents are accumulated by global key with ``op.add()`` nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Sequence

import numpy as np

from tidu import _core
from tidu.graph import (External, Fragment, FragmentBuilder, GraphError, Linear, Local,
                        ResolvedView,
                        ValKey, _aval_list, input_key_ids, mode_of, prim_of, resolve)
from tidu.rules import Cotangent, RuleMissing, next_pass_id, registry, tangent_of

__all__ = ["LinearFragment", "differentiate", "transpose", "saved_values", "SavedValue",
           "set_rule_cache", "rule_cache_info"]


@dataclass
class LinearFragment:
    """A fragment of linear ops plus how it connects to the graph it was derived from.

    Attributes:
        fragment: the new fragment.
        tangent_inputs: (what it is the tangent/cotangent of, its own InputKey) pairs: a primal
            InputKey for `differentiate`, a linear output ValKey for `transpose`.
        tangent_outputs: ValKeys aligned with the requested outputs (`differentiate`) or with
            the linear fragment's tangent_inputs (`transpose`); None where the result is zero.
        input_ids: the global value ids of the tangent inputs, aligned with tangent_inputs
            (empty where the maker did not record them: transpose then finds them by key).
    """

    fragment: Fragment
    tangent_inputs: list[tuple[Hashable, Hashable]]
    tangent_outputs: list[ValKey | None]
    pass_id: int = 0
    source: "LinearFragment | None" = field(default=None, repr=False)
    input_ids: list[int] = field(default_factory=list, repr=False)


_nondiff = np.zeros(0, np.uint8)


def _nondiff_table() -> np.ndarray:
    """uint8 per abstract value id: 1 where the dtype carries no tangent (ints, bool).  Avals
    are only ever appended, so the table is extended, not rebuilt, per transform."""
    global _nondiff
    table, n = _nondiff, len(_aval_list)
    if len(table) < n:  # this call's table covers every aval so far, whatever another thread does
        more = np.fromiter((a.dtype.kind not in "fc" for a in _aval_list[len(table):n]), np.uint8,
                           count=n - len(table))
        table = np.concatenate([table, more])
        if len(table) > len(_nondiff):
            _nondiff = table
    return table


def _inputs_by_key(view: ResolvedView) -> dict:
    """Each InputKey of the view's fragments -> the distinct input ValKeys declaring it (one
    pass: differentiate looks every wrt key up here)."""
    found: dict = {}
    for f in view.fragments:
        for k in f.inputs:
            vals = found.setdefault(k.input_key, [])
            if k not in vals:
                vals.append(k)
    return found


# ---- differentiate ----

def differentiate(view: ResolvedView, outputs: Sequence[ValKey], wrt: Sequence[Hashable],
                  tangents: Sequence[ValKey] | None = None) -> LinearFragment:
    """The JVP of `outputs` with respect to the inputs `wrt`, as a new linear fragment.

    Args:
        view: a ResolvedView (or a Fragment, resolved on the spot) defining the outputs.
        outputs: ValKeys to differentiate.
        wrt: primal InputKeys; each gets a fresh tangent input key ``tangent_of(key, pass_id)``.
            A ValKey in wrt differentiates with respect to that value (used when transforms
            nest inside a trace).
        tangents: optional ValKeys aligned with wrt, used as the tangent values themselves
            (External references) instead of fresh tangent inputs.

    Returns:
        LinearFragment whose tangent_outputs align with outputs (None: zero tangent).

    Raises:
        GraphError: a wrt key is no input of the view; a dangling reference.
        TypeError: a wrt input has an integer or bool dtype (not differentiable).
        RuleMissing: an active primitive has no linearize rule.
    """
    if isinstance(view, Fragment):
        view = resolve([view])
    outputs = list(outputs)
    pass_id = next_pass_id()
    mat = view.walk(outputs)
    builder = FragmentBuilder(parents=view.roots, prefix="t")
    if tangents is not None and len(tangents) != len(wrt):
        raise ValueError(f"differentiate: {len(tangents)} tangents for {len(wrt)} wrt keys")
    # The value each wrt key names: a ValKey itself, an InputKey its input in the view.
    by_key = _inputs_by_key(view) if any(type(k) is not ValKey for k in wrt) else {}
    vals = []
    for key in wrt:
        if type(key) is ValKey:
            vals.append(key)
            continue
        try:
            found = by_key.get(key, [])
        except TypeError:  # an unhashable key names no input
            found = []
        if not found:
            raise GraphError(f"cannot differentiate with respect to {key!r}: no fragment in the "
                             f"view has an input with that key")
        if len(found) > 1:
            raise GraphError(f"input key {key!r} is declared at several shapes/dtypes in the "
                             f"view ({', '.join(str(v.aval) for v in found)}); differentiate "
                             f"one view")
        vals.append(found[0])
    ids = [v.id for v in vals]
    aids = _core.val_avals(ids)
    bad = np.flatnonzero(_nondiff_table()[aids])
    if len(bad):
        i = int(bad[0])
        raise TypeError(f"cannot differentiate with respect to {wrt[i]!r}: dtype "
                        f"{_aval_list[aids[i]].dtype} is not differentiable (only float and "
                        f"complex inputs are)")
    tangent_inputs: list = []
    if tangents is not None:  # existing values seed the walk
        env: dict[int, ValKey] = {}
        for key, v, a, t in zip(wrt, ids, aids, tangents):
            if t.aval is not _aval_list[a]:
                raise ValueError(f"tangent for {key!r} has {t.aval}, expected {_aval_list[a]}")
            env[v] = t
        seeds = [(v, t.id) for v, t in env.items()]
        in_glob = []
    else:  # fresh tangent inputs, declared in one pass
        tangent_inputs = [(key, tangent_of(key, pass_id)) for key in wrt]
        input_ids = builder.store.add_inputs(input_key_ids([t for _, t in tangent_inputs]), aids)
        in_glob = builder.store.globals_of(input_ids)
        seeds = list(dict(zip(ids, in_glob)).items())

    def rule(prim, primal_in, primal_out, t_in):
        op = prim_of(prim)
        t_out = op.linearize(builder, primal_in, primal_out, t_in)
        if len(t_out) != len(primal_out):
            raise GraphError(f"{op.name}.linearize returned {len(t_out)} tangents for "
                             f"{len(primal_out)} outputs")
        return t_out

    found = _core.linearize_ops(builder.store, mat, seeds, _nondiff_table(),
                                [k.id for k in outputs], rule, _prim_flags, ValKey)
    tangent_outputs = [None if t == _core.NONE else ValKey(t) for t in found]
    frag = builder.build([k for k in tangent_outputs if k is not None])
    return LinearFragment(frag, tangent_inputs, tangent_outputs, pass_id,
                          input_ids=in_glob)


_ACTIVE2 = Linear([True, True])


def _ref(x):
    """A local id as Local, an existing value as External."""
    return External(x) if isinstance(x, ValKey) else Local(x)


def _prim_flags(prim: int) -> int:
    """What the C++ walks need to know of a primitive: 2 differentiable, 4 its rules may be
    replayed from templates (``rule_cache = False`` opts a primitive out)."""
    op = prim_of(prim)
    return (2 if getattr(op, "differentiable", True) else 0) | \
        (4 if getattr(op, "rule_cache", True) else 0)


def _mode_mask(mode_i: int) -> bytes:
    return bytes(mode_of(mode_i).active_mask)


# ---- rule templates ----

def set_rule_cache(enabled: bool) -> bool:
    """Replay AD rules from recorded templates (the default) or call every rule; returns the
    previous setting.  Both give id-identical fragments; off is the reference path for tests."""
    return _core.set_rule_cache(bool(enabled))


def rule_cache_info() -> dict:
    """Templates held and hit/miss/unrecordable counts of the rule template cache."""
    return _core.rule_cache_info()


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
