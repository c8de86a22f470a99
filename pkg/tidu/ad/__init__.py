"""Automatic differentiation over graphs (the seeds' chainrules + tidu): the AD contract every
primitive satisfies (``rules``), and the passes generic over primitives: ``differentiate``
(JVP), ``transpose`` (VJP) and ``batch_walk`` (vmap's pass). Names no concrete primitive."""

from __future__ import annotations

from tidu.ad.batch import batch_walk
from tidu.ad.differentiate import LinearFragment, differentiate, rule_cache_info, set_rule_cache
from tidu.ad.rules import (
                           Cotangent,
                           PrimitiveOp,
                           RuleMissing,
                           Tangent,
                           next_pass_id,
                           register,
                           registry,
                           tangent_of,
)
from tidu.ad.transpose import SavedValue, saved_values, transpose

__all__ = [
    "Cotangent", "LinearFragment", "PrimitiveOp", "RuleMissing", "SavedValue", "Tangent",
    "batch_walk", "differentiate", "next_pass_id", "register", "registry", "rule_cache_info",
    "saved_values", "set_rule_cache", "tangent_of", "transpose",
]
