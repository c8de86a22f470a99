"""Helpers for the batching rules of the primitives (``vmap``).

A batching rule is ``op.batch(builder, primal_in, primal_out, batched_in)``: ``primal_in`` and
``primal_out`` are the op's operand and result ValKeys at their unbatched shapes (an unbatched
operand is used as it is, a fixed value), ``batched_in`` holds, per operand, its batched value
(a local id of builder or a ValKey) with the batch axis leading, or None where the operand is
not batched (at least one is).  The rule returns, per output, the batched result with the batch
axis leading.  Rules emit tidu primitives only, in Primal mode: a vmapped program is an ordinary
program over batched arrays, differentiated and lowered like any other.
"""

from __future__ import annotations

import dataclasses

from tidu.ops._rules import aval_of, fix


def batch_size(b, batched) -> int:
    """The batch size: the leading axis of the first batched operand."""
    for x in batched:
        if x is not None:
            return aval_of(b, x).shape[0]
    raise ValueError("a batching rule was called with no batched operand")


def broadcast_batch(b, x, size: int):
    """The unbatched value x repeated along a new leading batch axis of `size`."""
    from tidu.ops.structural import BroadcastInDim

    av = aval_of(b, x)
    return fix(b, BroadcastInDim((size,) + av.shape, tuple(range(1, av.ndim + 1))), x)


def all_batched(b, primal_in, batched) -> list:
    """Every operand with a leading batch axis (unbatched ones broadcast)."""
    size = batch_size(b, batched)
    return [x if x is not None else broadcast_batch(b, p, size) for p, x in zip(primal_in, batched)]


def move_to_front(b, x, axis: int):
    """x with its axis `axis` moved to position 0."""
    from tidu.ops.structural import Transpose

    if axis == 0:
        return x
    nd = aval_of(b, x).ndim
    perm = (axis,) + tuple(i for i in range(nd) if i != axis)
    return fix(b, Transpose(perm), x)


def same_op_batched(op, b, primal_in, primal_out, batched) -> list:
    """The rule of an op that maps over leading axes (elementwise ops, and ops such as Cholesky
    that take leading batch axes): the same op over all operands batched."""
    args = all_batched(b, primal_in, batched)
    if len(primal_out) == 1:
        return [fix(b, op, *args)]
    first = b.add_op(op, [_ref(a) for a in args])
    return list(first)


def shifted(*fields: str):
    """The rule of an op whose attributes `fields` (an axis, or a tuple of axes) name operand
    axes: the same op with those axes one further, over all operands batched."""
    def rule(op, b, primal_in, primal_out, batched):
        changes = {}
        for f in fields:
            v = getattr(op, f)
            changes[f] = tuple(a + 1 for a in v) if isinstance(v, tuple) else v + 1
        new = dataclasses.replace(op, **changes)
        args = all_batched(b, primal_in, batched)
        if len(primal_out) == 1:
            return [fix(b, new, *args)]
        return list(b.add_op(new, [_ref(a) for a in args]))
    return rule


def _ref(x):
    from tidu.graph import External, Local, ValKey

    return External(x) if isinstance(x, ValKey) else Local(x)
