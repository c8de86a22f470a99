"""Shape primitives of the numpy surface (docs/numpy.md, "Shapes and array construction"): Rev.

Everything else of that section (stack, tile, tril, pad modes, ...) is a composite over the
tier-1 primitives in ``tidu.shapes``; only reversal needs a primitive of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.graph import aval
from tidu.ops.core import ALL, A, Primitive, check_axes, check_dtype, ints, lin, shifted

# ---- Rev ----

@register
@dataclass(frozen=True)
class Rev(Primitive):
    """x reversed along each axis in `dims` (StableHLO ``reverse``); its own transpose."""

    dims: tuple[int, ...]
    linear = True

    batch = shifted("dims")

    def __post_init__(self):
        object.__setattr__(self, "dims", tuple(sorted(ints(self.dims))))

    def abstract_eval(self, x):
        check_dtype(self.name, x, ALL, "supported")
        check_axes(self.name, self.dims, x.ndim, x.shape)
        return aval(x.shape, x.dtype)

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        return [lin(b, self, ct, [A])]

    def lower(self, lo, out, x):
        dims = lo.i64_array(lo.ax(self.dims))
        return lo.op("stablehlo.reverse", [x], out, f"dimensions = {dims}")

    def impl(self, x):
        return np.flip(x, axis=self.dims) if self.dims else np.asarray(x)
