"""The public face for primitive authors (docs/extending.md): the base class, the registry, the
dtype classes and checks, the helpers rules are written with, and the Lowering protocol.

A primitive is one frozen dataclass deriving from :class:`Primitive`, registered with
:func:`register`; its rules live in the class:

- AD rules receive primal values as ValKeys and tangents/cotangents as local ids of the fragment
  being built; the helpers (``lin`` for linear nodes, ``fix`` for fixed coefficients, ``scale``,
  ``const``, ``add_all``, ...) keep each rule to a line or two in tidu's own primitive vocabulary,
  with ``A``/``F`` the active/fixed entries of a linear node's mask.
- A batching rule is ``op.batch(builder, primal_in, primal_out, batched_in)``: ``primal_in`` and
  ``primal_out`` are the op's operand and result ValKeys at their unbatched shapes (an unbatched
  operand is used as it is, a fixed value), ``batched_in`` holds, per operand, its batched value
  (a local id of builder or a ValKey) with the batch axis leading, or None where the operand is
  not batched (at least one is).  The rule returns, per output, the batched result with the
  batch axis leading.  Rules emit tidu primitives only, in Primal mode: a vmapped program is an
  ordinary program over batched arrays, differentiated and lowered like any other.
- ``lower(lo, out, *args)`` writes StableHLO into a :class:`Lowering` and returns a
  :class:`Value`; an elementwise primitive names its op in ``hlo`` instead.
"""

from __future__ import annotations

from tidu.ad.rules import PrimitiveOp, RuleMissing, register, registry
from tidu.backends.xla.hlo import Lowering, Value, dense_hex, i64_array, tensor_type
from tidu.graph.dtypes import (
                               ALL,
                               BOOL,
                               COMPLEXES,
                               FLOATS,
                               INEXACT,
                               INTS,
                               NUMERIC,
                               REAL,
                               is_differentiable,
                               real_dtype,
)
from tidu.ops.core import (
                               A,
                               F,
                               Primitive,
                               add_all,
                               all_batched,
                               aval_of,
                               batch_size,
                               bilinear,
                               broadcast_batch,
                               check_axes,
                               check_dtype,
                               check_same,
                               conj_fixed,
                               const,
                               fix,
                               ints,
                               lin,
                               linear_self,
                               move_to_front,
                               ref,
                               same_op_batched,
                               scale,
                               shifted,
                               with_dtype,
)

__all__ = [
    "A", "ALL", "BOOL", "COMPLEXES", "F", "FLOATS", "INEXACT", "INTS", "Lowering", "NUMERIC",
    "Primitive", "PrimitiveOp", "REAL", "RuleMissing", "Value", "add_all", "all_batched",
    "aval_of", "batch_size", "bilinear", "broadcast_batch", "check_axes", "check_dtype",
    "check_same", "conj_fixed", "const", "dense_hex", "fix", "i64_array", "ints",
    "is_differentiable", "lin", "linear_self", "move_to_front", "real_dtype", "ref", "register",
    "registry", "same_op_batched", "scale", "shifted", "tensor_type", "with_dtype",
]
