"""``td.custom_derivatives``: jax.custom_derivatives' :class:`SymbolicZero`, the tangent a
``td.custom_jvp`` rule defined with ``defjvp(rule, symbolic_zeros=True)`` receives for an
argument that is not differentiated (instead of an array of zeros), and may return for an output
whose tangent is zero (and a ``td.custom_vjp`` bwd rule, with ``defvjp(..., symbolic_zeros=True)``,
for an output cotangent that is zero); and :class:`CustomVJPPrimal`, what such a custom_vjp's fwd
rule receives in place of each argument leaf."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidu.api.tree_util import tree_map
from tidu.graph import AbstractValue, aval
from tidu.numpy.creation import zeros_like

__all__ = ["CustomVJPPrimal", "SymbolicZero", "custom_vjp_primal_tree_values",
           "zero_from_primal"]


class SymbolicZero:
    """A tangent known to be zero, of abstract value ``aval`` (``.shape``, ``.dtype``)."""

    __slots__ = ("aval",)

    def __init__(self, aval: AbstractValue):
        self.aval = aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)

    def __repr__(self) -> str:
        return f"SymbolicZero({self.aval})"

    def __bool__(self):
        raise TypeError("a SymbolicZero has no truth value: test `isinstance(t, SymbolicZero)`")

    @staticmethod
    def from_primal_value(x) -> SymbolicZero:
        """The symbolic zero tangent of primal x (jax's ``SymbolicZero.from_primal_value``)."""
        return SymbolicZero(aval(x.shape, x.dtype))


def zero_from_primal(x, symbolic_zeros: bool = False):
    """A zero tangent for primal x: a SymbolicZero when ``symbolic_zeros``, else zeros."""
    return SymbolicZero.from_primal_value(x) if symbolic_zeros else zeros_like(x)


@dataclass
class CustomVJPPrimal:
    """An argument leaf of a ``td.custom_vjp`` fwd rule defined with ``symbolic_zeros=True``:
    ``value`` the primal and ``perturbed`` whether it is differentiated (False: its column of
    the Jacobian is not asked for), as jax's."""

    __slots__ = ("value", "perturbed")
    value: Any
    perturbed: bool


def custom_vjp_primal_tree_values(tree):
    """The tree of a fwd rule's argument with each CustomVJPPrimal leaf replaced by its value
    (jax's ``custom_vjp_primal_tree_values``)."""
    def value(leaf):
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(f"unexpected leaf type {type(leaf)}")
        return leaf.value
    return tree_map(value, tree)
