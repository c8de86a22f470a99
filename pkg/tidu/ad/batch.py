"""The batching pass (vmap's walk over a graph): each op with a batched operand is replaced by
its primitive's ``batch`` rule. Generic: names no primitive."""

from __future__ import annotations

import numpy as np

from tidu._native import _core
from tidu.ad.rules import RuleMissing
from tidu.graph import GraphError, ValKey, _aval_list, prim_of
from tidu.graph.memory import busy

__all__ = ["batch_walk"]


def _batch_rule(b):
    def rule(prim, primal_in, primal_out, batched_in):
        op = prim_of(prim)
        try:
            out = op.batch(b, primal_in, primal_out, batched_in)
        except RuleMissing:
            raise
        if len(out) != len(primal_out) or any(o is None for o in out):
            raise GraphError(f"{op.name}.batch returned {len(out)} values for "
                             f"{len(primal_out)} outputs (one batched value per output)")
        return out
    return rule


@busy
def batch_walk(view, keys, seeds, builder) -> list[int]:
    """The batching pass: the ops of `view` reachable from `keys`, in topological order, from
    `seeds` ((value id, its batched value id) pairs); each op with a batched operand is replaced
    by its primitive's batch rule, emitted into `builder`.  Returns the batched value id of each
    key (_core.NONE: the key does not depend on the seeds)."""
    everything = np.zeros(len(_aval_list), dtype=np.uint8)  # ints and bools are batched too
    return _core.linearize_ops(builder.store, view.walk(keys), seeds, everything,
                               [k.id for k in keys], _batch_rule(builder), None, ValKey)
