"""Collectives over a named vmap axis (jax.lax.psum/pmax/pmin/all_gather under ``vmap(...,
axis_name=)``): AxisReduce and AxisGather.

Each takes, besides its operand, the axis's *index value*: the scalar input that
``td.vmap(..., axis_name=name)`` seeds with ``arange(axis_size)`` (``td.lax.axis_index(name)``).
That operand is what resolves the op at the right level of nested vmaps, with no context to
consult: in the batching walk of the vmap that named the axis, the index operand is batched (it
is that walk's seed), and the rule computes the collective over the batch axis; in the walk of
any other vmap it is not, and the rule emits the same op over the batched operand, for the
named level to resolve. So the ops never reach a program (a collective outside its vmap is
refused when it is traced: ``td.lax.psum`` names the unbound axis), and have no kernel or
lowering: the batching rule is their implementation.

Derivatives are jax's: psum is linear (its transpose is psum); pmax/pmin take the tangent of
the members that attain the extreme, ties sharing it equally; all_gather is linear, its
transpose sums the gathered cotangents over the members and takes each member's own row.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from tidu.ad.rules import register
from tidu.graph import aval
from tidu.graph.dtypes import kind_of
from tidu.ops.core import (
    NUMERIC,
    A,
    BroadcastInDim,
    Convert,
    F,
    Mul,
    Primitive,
    ReduceSum,
    Transpose,
    aval_of,
    broadcast_batch,
    check_dtype,
    fix,
    lin,
    scale,
)
from tidu.ops.elementwise import Compare, Div
from tidu.ops.reductions import ReduceMax, ReduceMin
from tidu.ops.structural import Iota

__all__ = ["AxisGather", "AxisReduce"]

_KINDS = ("sum", "max", "min")


def _check_index(name: str, idx) -> None:
    if idx.shape != () or kind_of(idx.dtype) not in "iu":
        raise TypeError(f"{name}: the axis index operand must be an integer scalar, got {idx}")


def _batched_operand(b, x, bx, idx_b):
    """x with the named axis leading (broadcast when x does not vary over it)."""
    return bx if bx is not None else broadcast_batch(b, x, aval_of(b, idx_b).shape[0])


@register
@dataclass(frozen=True)
class AxisReduce(Primitive):
    """The sum (max, min) of x over the members of the vmap axis `axis_name`, the same value on
    every member. Operands: x, and the axis's index value (an integer scalar)."""

    kind: str
    axis_name: Hashable

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"AxisReduce: kind must be one of {_KINDS}, got {self.kind!r}")

    def abstract_eval(self, x, idx):
        check_dtype(self.name, x, NUMERIC, "numeric")
        _check_index(self.name, idx)
        return aval(x.shape, x.dtype)

    def batch(self, b, primal_in, primal_out, bt):
        x, idx = primal_in
        if bt[1] is None:  # another vmap's walk: the same collective, over its batch too
            return [fix(b, self, bt[0], idx)]
        xb = _batched_operand(b, x, bt[0], bt[1])
        av = aval_of(b, xb)
        red = {"sum": ReduceSum, "max": ReduceMax, "min": ReduceMin}[self.kind]((0,))
        return [fix(b, BroadcastInDim(av.shape, tuple(range(1, av.ndim))), fix(b, red, xb))]

    def linearize(self, b, primal_in, primal_out, t):
        if t[0] is None:
            return [None]
        x, idx = primal_in
        if self.kind == "sum":
            return [lin(b, self, [t[0], idx], [A, F])]
        # the members attaining the extreme share its tangent equally (jax's reductions)
        hit = fix(b, Convert(x.aval.dtype.name), fix(b, Compare("EQ"), x, primal_out[0]))
        count = fix(b, AxisReduce("sum", self.axis_name), hit, idx)
        share = scale(b, fix(b, Div(), hit, count), t[0])
        return [lin(b, AxisReduce("sum", self.axis_name), [share, idx], [A, F])]

    def transpose_rule(self, b, ct, inputs, mode):
        if self.kind != "sum" or mode.active_mask[1]:
            raise ValueError(f"AxisReduce({self.kind}) is linear only as a sum, in its operand")
        return [lin(b, self, [ct[0], inputs[1]], [A, F]), None]

    def impl(self, x, idx):
        raise NotImplementedError(f"AxisReduce over {self.axis_name!r} is resolved by the vmap "
                                  f"that names the axis; it has no evaluation of its own")


@register
@dataclass(frozen=True)
class AxisGather(Primitive):
    """The values of x on every member of the vmap axis `axis_name` (of `size` members),
    stacked along a new axis at `pos` of the output. Operands: x, the axis's index value."""

    axis_name: Hashable
    size: int
    pos: int = 0

    def abstract_eval(self, x, idx):
        _check_index(self.name, idx)
        if not 0 <= self.pos <= x.ndim:
            raise ValueError(f"AxisGather: pos {self.pos} out of range for an operand of rank "
                             f"{x.ndim}")
        return aval(x.shape[:self.pos] + (self.size,) + x.shape[self.pos:], x.dtype)

    def batch(self, b, primal_in, primal_out, bt):
        x, idx = primal_in
        if bt[1] is None:  # another vmap's walk: its batch axis leads, ours moves one on
            return [fix(b, AxisGather(self.axis_name, self.size, self.pos + 1), bt[0], idx)]
        xb = _batched_operand(b, x, bt[0], bt[1])
        nd = aval_of(b, xb).ndim
        # every member gets the whole stack: the members' axis (xb's 0) moves to pos of the
        # member's shape, x's own axes around it, all behind a new leading batch axis
        rest = list(range(1, nd))
        perm = tuple(rest[:self.pos] + [0] + rest[self.pos:])
        if perm != tuple(range(nd)):
            xb = fix(b, Transpose(perm), xb)
        out_shape = (self.size,) + aval_of(b, primal_out[0]).shape
        return [fix(b, BroadcastInDim(out_shape, tuple(range(1, nd + 1))), xb)]

    def linearize(self, b, primal_in, primal_out, t):
        if t[0] is None:
            return [None]
        return [lin(b, self, [t[0], primal_in[1]], [A, F])]

    def transpose_rule(self, b, ct, inputs, mode):
        if mode.active_mask[1]:
            raise ValueError("AxisGather: the axis index is never active")
        x, idx = inputs
        total = lin(b, AxisReduce("sum", self.axis_name), [ct[0], idx], [A, F])
        # this member's own row along pos: a one-hot weighting over the gathered axis
        shape = aval_of(b, ct[0]).shape
        iota = fix(b, Iota(shape, idx.aval.dtype.name, self.pos))
        own = fix(b, BroadcastInDim(shape, ()), idx)
        onehot = fix(b, Convert(x.aval.dtype.name), fix(b, Compare("EQ"), iota, own))
        picked = lin(b, Mul(), [onehot, total], [F, A])
        return [lin(b, ReduceSum((self.pos,)), [picked], [A]), None]

    def impl(self, x, idx):
        raise NotImplementedError(f"AxisGather over {self.axis_name!r} is resolved by the vmap "
                                  f"that names the axis; it has no evaluation of its own")
