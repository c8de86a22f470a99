"""Every built-in primitive has the rules the transforms and backends need: linearize and
transpose (AD), batch (vmap), a lowering (XLA), a good and a bad case in the shape-rule table,
and fields that match its opcode's attribute signature (the interpreter). One table, one row per rule; a primitive added without the rule fails its row by name."""

from __future__ import annotations

import dataclasses

import pytest

# The case tables of tests/ad/test_rules.py and tests/ops/test_shape_rules.py, whose coverage the
# AD and shape-rule rows check (pythonpath puts tests/ on sys.path; the folders are namespace
# packages, imported here under their folder names).
from ad.test_rules import NONDIFF_MATH, TABLE
from ops.test_shape_rules import BAD, GOOD
from tidu import ops as P
from tidu.ad.rules import PrimitiveOp, registry


def linearize_and_transpose():
    """Differentiable primitives linearize; linear ones (and the ops linear rules emit) also
    transpose; the rest are declared non-differentiable."""
    missing = []
    builtin = {n: c for n, c in registry.items() if c.__module__.startswith("tidu.ops")}
    for name, cls in builtin.items():
        if not getattr(cls, "differentiable", True):
            continue
        if cls.linearize is PrimitiveOp.linearize:
            missing.append(f"{name}.linearize")
        if getattr(cls, "linear", False) and cls.transpose_rule is PrimitiveOp.transpose_rule:
            missing.append(f"{name}.transpose_rule")
    # Mul, Div (fixed divisor) and DotGeneral appear in linear fragments with one side fixed
    for name in ("Mul", "Div", "DotGeneral", "Select"):
        if registry[name].transpose_rule is PrimitiveOp.transpose_rule:
            missing.append(f"{name}.transpose_rule")
    assert missing == []
    nondiff = {n for n, c in builtin.items() if not getattr(c, "differentiable", True)}
    nondiff_expected = {"Compare", "Sign", "Constant", "Iota", "StopGradient", "ArgMax", "ArgMin",
                        "ReduceAnd", "ReduceOr", "SearchSorted"} | NONDIFF_MATH | set(P.BITWISE) | set(P.RANDOM)
    assert nondiff == nondiff_expected
    # While, CustomVJP and CustomVJPLin are one-mode only (tests/api/test_control_flow.py,
    # tests/api/test_custom_rules.py); AxisReduce and AxisGather only exist inside the vmap that
    # names their axis, and their rules are checked there (tests/api/test_named_axes.py);
    # ShardingHint needs a jax Mesh: td.shard_map's tests differentiate through it
    # (tests/api/test_shard_map.py); Schur, Hessenberg and Geqrf have no derivative, as jax's:
    # their linearize raises (tests/numpy/test_linalg_schur.py, tests/numpy/test_linalg.py)
    assert set(TABLE) | nondiff_expected | {"While", "CustomVJP", "CustomVJPLin", "AxisReduce",
                                            "AxisGather", "ShardingHint", "Schur",
                                            "Hessenberg", "Geqrf"} >= set(builtin)


def batching():
    """Each registered tidu primitive with operands defines batch (sources have none to batch);
    a primitive without one raises RuleMissing naming it, never a silent fallback."""
    missing = [name for name, cls in registry.items()
               if cls.__module__.startswith("tidu.ops") and cls.batch is PrimitiveOp.batch
               and name not in ("Constant", "Iota")]
    assert not missing, f"primitives without a batching rule: {missing}"


def lowering():
    """Every tier-1 primitive lowers to XLA."""
    from tidu.extend import Primitive

    missing = [name for name in P.TIER1 + P.LINALG + P.INDEXING + P.SHAPES + P.BITWISE + P.CONV + P.RANDOM
               if getattr(P, name).hlo is None and
               getattr(P, name).lower is Primitive.lower]
    assert not missing


def shape_rule_cases():
    """Every registered primitive has a good and a bad case in the shape-rule table."""
    good = {op.name for op, *_ in GOOD}
    bad = {op.name for op, *_ in BAD}
    everything = {n for n, c in registry.items() if c.__module__.startswith("tidu.ops")}
    assert everything - good == set()
    # Constant/StopGradient accept every supported dtype and shape: no bad operand exists.
    assert everything - bad == {"Constant", "StopGradient"}


def opcode_signature():
    """Every primitive with a C++ kernel has its fields laid out by its opcode's attribute
    signature (one letter per dataclass field, in order: cpp/include/tidu/vm/opcodes.hpp), the one
    home of the layout both the encoder and the kernels read; every opcode names a primitive."""
    from tidu._native import _eval

    kinds = {"t": "tuple", "d": "str", "c": "str", "b": "bytes"}  # "i": int, bool or an enum
    sigs = dict(_eval.OPCODE_SIGNATURES)
    assert sorted(sigs) == sorted(_eval.OPCODES)
    builtin = {n: c for n, c in registry.items() if c.__module__.startswith("tidu.ops")}
    assert set(sigs) <= set(builtin), f"opcodes naming no primitive: {set(sigs) - set(builtin)}"
    wrong = []
    for name, sig in sigs.items():
        cls = builtin[name]
        if sig == "k":
            if not callable(getattr(cls, "kernel_attrs", None)):
                wrong.append(f"{name}: signature k but no kernel_attrs()")
            continue
        fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
        letters = "" if sig == "_" else sig
        if len(fields) != len(letters):
            wrong.append(f"{name}: fields {[f.name for f in fields]} vs signature {sig!r}")
            continue
        for f, letter in zip(fields, letters):
            want = kinds.get(letter)
            if want is not None and want not in str(f.type):
                wrong.append(f"{name}.{f.name}: {f.type} under signature letter {letter!r}")
    assert wrong == []


# rule -> the check that every primitive has it
RULES = {
    "linearize_and_transpose": linearize_and_transpose,
    "batching_rule": batching,
    "xla_lowering": lowering,
    "shape_rule_cases": shape_rule_cases,
    "opcode_signature": opcode_signature,
}


@pytest.mark.parametrize("check", RULES.values(), ids=RULES.keys())
def test_every_primitive_has(check):
    check()
