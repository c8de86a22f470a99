"""differentiate: a primal view -> a LinearFragment (JVP), one ``linearize`` call per active
primitive, primal values referenced as External (never copied). Generic: names no primitive."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tidu._native import _core
from tidu.ad.rules import next_pass_id, tangent_of
from tidu.graph import (
    External,
    Fragment,
    FragmentBuilder,
    GraphError,
    Linear,
    Local,
    ResolvedView,
    ValKey,
    _aval_list,
    input_key_ids,
    mode_of,
    prim_of,
    resolve,
)
from tidu.graph.dtypes import kind_of
from tidu.graph.memory import busy

__all__ = ["LinearFragment", "differentiate", "rule_cache_info", "set_rule_cache"]


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
        more = np.fromiter((kind_of(a.dtype) not in "fc" for a in _aval_list[len(table):n]),
                           np.uint8, count=n - len(table))
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

@busy
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


