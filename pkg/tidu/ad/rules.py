"""The AD contract every primitive satisfies (the seeds' chainrules): PrimitiveOp, ADKey, registry.

``differentiate`` and ``transpose`` (in ``tidu.ad``) are generic over this contract and never name a
concrete primitive; concrete primitives live in ``tidu.ops``.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from tidu._native import _core
from tidu.graph import FragmentBuilder, GraphOp, OpMode, ValKey, ValRef

__all__ = ["PrimitiveOp", "Tangent", "Cotangent", "tangent_of", "next_pass_id", "registry",
           "register", "RuleMissing"]


class RuleMissing(NotImplementedError):
    """A primitive lacks the AD rule a transform asked for."""


class PrimitiveOp(GraphOp):
    """A GraphOp with AD rules.

    - ``add()``: the op used to accumulate cotangents (class method).
    - ``linearize(builder, primal_in, primal_out, tangent_in)``: emit linear ops (mode Linear) into
      builder for the tangent of this op's outputs; ``primal_in``/``primal_out`` are ValKeys
      (reference them as fixed operands), ``tangent_in`` holds local ids or None (zero).
      Returns one local id or None per output.
    - ``transpose_rule(builder, cotangent_out, inputs, mode)``: for a linear op, emit the
      cotangents of its active inputs; returns one local id or None per input.
    - ``differentiable``: False declares the op non-differentiable (its outputs carry no tangent).
    - ``rule_cache``: the transforms record what a rule emits for one call shape (this op
      instance, operand avals, which tangents/cotangents are present, which operands are the same
      value) and replay it for later calls of that shape, so a rule must depend on nothing else
      (it gets everything through its arguments).  False always calls the rules instead.
    - ``batch(builder, primal_in, primal_out, batched_in)``: for ``vmap``, emit the op over
      operands with a leading batch axis (``batched_in``: batched values, None where an operand
      is not batched); returns the batched outputs, batch axis leading (tidu/ops/core.py).
    """

    differentiable: bool = True
    rule_cache: bool = True
    linear: bool = False  # linear in all inputs: the op is its own linearization

    @classmethod
    def add(cls) -> "PrimitiveOp":
        raise RuleMissing(f"{cls.__name__} defines no add()")

    def linearize(self, builder: FragmentBuilder, primal_in: Sequence[ValKey],
                  primal_out: Sequence[ValKey], tangent_in: Sequence[int | None]):
        raise RuleMissing(f"primitive {self.name} has no linearize rule")

    def transpose_rule(self, builder: FragmentBuilder, cotangent_out: Sequence[int | None],
                       inputs: Sequence[ValRef], mode: OpMode):
        raise RuleMissing(f"primitive {self.name} has no transpose rule")

    def batch(self, builder: FragmentBuilder, primal_in: Sequence[ValKey],
              primal_out: Sequence[ValKey], batched_in: Sequence[int | ValKey | None]):
        raise RuleMissing(f"primitive {self.name} has no batching rule (vmap): define "
                          f"{type(self).__name__}.batch (see tidu/ops/core.py)")


# ---- keys ----

# Tangent(key, pass_id): the tangent input key of primal input `key` in differentiate pass
# `pass_id` (compiled: differentiate makes one per input).
Tangent = _core.Tangent


@dataclass(frozen=True)
class Cotangent:
    """The cotangent input key seeded for linear output number `index` in transpose pass
    `pass_id`."""

    index: int
    pass_id: int

    def __repr__(self) -> str:
        return f"ct{self.index}@{self.pass_id}"

    def input_name(self, name_of) -> str:
        """Its name in a saved program: ct[i], the seed of linear output i."""
        return f"ct[{self.index}]"


def tangent_of(key: Hashable, pass_id: int) -> Hashable:
    """ADKey.tangent_of: a fresh key derived from key for one differentiate pass."""
    if type(key) is ValKey:  # the transforms' own keys (no hook): skip the attribute miss
        return Tangent(key, pass_id)
    hook = getattr(key, "tangent_of", None)
    if callable(hook):
        return hook(pass_id)
    return Tangent(key, pass_id)


_pass_ids = itertools.count(1)


def next_pass_id() -> int:
    """A fresh, increasing pass id (one per differentiate / transpose call)."""
    return next(_pass_ids)


# ---- registry ----

registry: dict[str, type[PrimitiveOp]] = {}


def register(cls: type[PrimitiveOp]) -> type[PrimitiveOp]:
    """Class decorator: record a primitive by name (one registry; user primitives too)."""
    if cls.__name__ in registry and registry[cls.__name__] is not cls:
        raise ValueError(f"a primitive named {cls.__name__} is already registered")
    registry[cls.__name__] = cls
    return cls
