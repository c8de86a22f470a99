"""SearchSorted: where values would go into sorted rows, numpy's ``searchsorted`` as one primitive.

jax composes ``jnp.searchsorted`` from a loop of gathers, compares and selects, which XLA fuses
into one pass. On tidu's interpreter that composite is four instructions per halving step, each a
pass over every value (``td.searchsorted`` of 131k values in 257 took 3.9 ms against jax.jit's
3.0). As a primitive it is one kernel (``cpp/include/tidu/kernels/search.hpp``): a branchless
binary search of each value in its row, the values taken in groups so the searches overlap.

Order is numpy's sort order: NaN after every number, so a row's NaNs sit at its end, a NaN value
goes after every number (on the left of the row's NaNs with ``right=False``, after them with
``right=True``). The result is int32, as jax's, and has no derivative (it is piecewise constant).
Complex values are searched by the composite in ``tidu.numpy.statistics`` (lexicographic order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.backends.xla.splice import call_jax
from tidu.graph import aval
from tidu.ops.core import BOOL, REAL, Primitive, check_dtype, same_op_batched

__all__ = ["SearchSorted"]


@register
@dataclass(frozen=True)
class SearchSorted(Primitive):
    """For rows `a` (..., n) sorted in numpy's order and values `v` (..., *m) whose leading axes
    are a's batch axes ``a.shape[:-1]``, the int32 insertion point of each value in its row: how
    many of the row's entries sort before it (``right=False``: a[i] < v; ``right=True``:
    a[i] <= v; NaN after every number). Never differentiable."""

    right: bool
    differentiable = False

    batch = same_op_batched  # leading axes are batch axes, of both operands

    def __post_init__(self):
        object.__setattr__(self, "right", bool(self.right))

    def abstract_eval(self, a, v):
        n = self.name
        check_dtype(n, a, REAL | {BOOL}, "real (bool, int or float)")
        if v.dtype != a.dtype:
            raise TypeError(f"{n}: values dtype {v.dtype} differs from the rows' {a.dtype}")
        if a.ndim < 1:
            raise ValueError(f"{n}: the sorted rows must have at least one axis, got a scalar")
        if a.shape[-1] >= 2**31 - 1:
            raise ValueError(f"{n}: a row of {a.shape[-1]} entries has positions past int32")
        if v.shape[:a.ndim - 1] != a.shape[:-1]:
            raise ValueError(f"{n}: values of shape {v.shape} do not start with the rows' batch "
                             f"axes {a.shape[:-1]} (rows of shape {a.shape})")
        return aval(v.shape, "int32")

    def lower(self, lo, out, a, v):
        side = "right" if self.right else "left"

        def fn(rows, vals):
            import jax  # noqa: PLC0415  (optional dependency)
            import jax.numpy as jnp  # noqa: PLC0415  (optional dependency)

            r2 = rows.reshape((-1, rows.shape[-1]))
            v2 = vals.reshape((r2.shape[0], -1))
            found = jax.vmap(lambda r, x: jnp.searchsorted(r, x, side=side))(r2, v2)
            return found.astype(jnp.int32).reshape(vals.shape)

        return call_jax(lo, out, [a, v], f"searchsorted_{side}", fn)

    def impl(self, a, v):
        a, v = np.asarray(a), np.asarray(v)
        rows = a.reshape((-1, a.shape[-1]))
        vals = v.reshape((rows.shape[0], -1))
        side = "right" if self.right else "left"
        found = [np.searchsorted(r, x, side=side) for r, x in zip(rows, vals)]
        return np.asarray(found, dtype=np.int32).reshape(v.shape)
