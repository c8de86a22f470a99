"""Helpers for the AD rules of the primitives: emitting linear and fixed (primal) nodes.

Rules receive primal values as ValKeys and tangents/cotangents as local ids of the fragment being
built; these helpers keep each rule to a line or two in tidu's own primitive vocabulary.
"""

from __future__ import annotations

import numpy as np

from tidu.graph import PRIMAL, AbstractValue, External, FragmentBuilder, Linear, Local, ValKey

A, F = True, False  # active, fixed (mask entries)


def ref(x):
    """A ValKey becomes External (a fixed primal value); a local id becomes Local."""
    return External(x) if isinstance(x, ValKey) else Local(x)


def lin(b: FragmentBuilder, op, args, mask) -> int:
    """A linear node: op over args (ValKeys / local ids) with its active mask."""
    return b.emit(op, args, Linear(mask))


def fix(b: FragmentBuilder, op, *args) -> int:
    """A fixed (Primal-mode) node computing a coefficient from primal values."""
    return b.emit(op, args, PRIMAL)


def aval_of(b: FragmentBuilder, x) -> AbstractValue:
    return b.key(ref(x)).aval


def const(b: FragmentBuilder, value, av: AbstractValue) -> int:
    """A fixed constant of av's shape and dtype."""
    from tidu.ops.sources import Constant
    from tidu.ops.structural import BroadcastInDim

    c = fix(b, Constant.of(np.asarray(value, dtype=av.dtype)))
    return c if av.shape == () else fix(b, BroadcastInDim(av.shape, ()), c)


def scale(b: FragmentBuilder, coef, t) -> int:
    """coef * t with coef fixed (a ValKey or local id) and t active."""
    from tidu.ops.elementwise import Mul

    return lin(b, Mul(), [coef, t], [F, A])


def conj_fixed(b: FragmentBuilder, x):
    """Conj(x) as a fixed value when x is complex; x itself otherwise."""
    from tidu.ops.elementwise import Conj

    return fix(b, Conj(), x) if aval_of(b, x).dtype.kind == "c" else x


def add_all(b: FragmentBuilder, terms) -> int | None:
    """Sum of the non-None linear terms (None when all are zero)."""
    from tidu.ops.elementwise import Add

    terms = [t for t in terms if t is not None]
    if not terms:
        return None
    out = terms[0]
    for t in terms[1:]:
        out = lin(b, Add(), [out, t], [A, A])
    return out


def linear_self(op, b: FragmentBuilder, primal_in, tangent_in) -> int:
    """Linearize an op that is linear in all its inputs: the op itself over the tangents, with
    zeros standing in (as fixed operands) for inactive inputs."""
    args, mask = [], []
    for x, t in zip(primal_in, tangent_in):
        if t is None:
            args.append(const(b, 0, x.aval))
            mask.append(F)
        else:
            args.append(t)
            mask.append(A)
    return lin(b, op, args, mask)


def bilinear(op, b: FragmentBuilder, primal_in, t) -> int | None:
    """Tangent of an op linear in each operand separately (Mul, DotGeneral):
    op(dx, y) + op(x, dy), each product with one side fixed, so no linear node is bilinear."""
    x, y = primal_in
    return add_all(b, [lin(b, op, [t[0], y], [A, F]) if t[0] is not None else None,
                       lin(b, op, [x, t[1]], [F, A]) if t[1] is not None else None])
