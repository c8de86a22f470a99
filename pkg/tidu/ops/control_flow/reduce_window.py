"""The ReduceWindowGeneral primitive (``td.lax.reduce_window`` with a body that is not add, max
or min, several operands, or negative padding).

It holds two bodies:

- ``region``: the user's computation on scalars, ``(acc..., x...) -> acc...``.  XLA lowers the
  op to ``stablehlo.reduce_window`` with this region, as jax does, so XLA streams the windows.
- ``body``: the same reduction as a closed program of tidu primitives over whole arrays
  (operands, init values -> results), traced by the front end (``tidu.api.lax_window``): per
  windowed axis, strided slices of the padded operand combined by the computation, in window
  doubling steps, so it holds no window-size copies of the operand.  The interpreter runs it as
  one nested program (the Checkpoint opcode: saved files need no new opcode), and every
  derivative and vmap comes from it.

Where the region cannot serve (the computation closes over traced values, a batch of programs
under ``eval_batch``, or a region that is ``None``), XLA lowers ``body`` inline instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tidu.ad.rules import register
from tidu.backends.xla.hlo import Value, tensor_type
from tidu.ops.control_flow.body import (
    Body,
    _add_multi,
    _child,
    _multi,
    _operands,
    _region,
    batch_body,
    lower_body,
)
from tidu.ops.control_flow.cond import BodyCall, Checkpoint
from tidu.ops.core import batch_size


@register
@dataclass(frozen=True)
class ReduceWindowGeneral(BodyCall):
    """``reduce_window(operands, inits, region, ...)``: operands ``caps + xs + inits`` (``n``
    arrays of one shape, ``n`` scalars); results the ``n`` reduced arrays.  Window attributes
    as ``stablehlo.reduce_window``'s (padding as (low, high) pairs; a negative one crops, as
    XLA takes it)."""

    body: Body
    region: Body | None
    n_caps: int
    window_dimensions: tuple[int, ...]
    window_strides: tuple[int, ...]
    padding: tuple[tuple[int, int], ...]
    base_dilation: tuple[int, ...]
    window_dilation: tuple[int, ...]

    opcode = "Checkpoint"  # the interpreter runs ``body`` as a nested program

    def attrs(self) -> list[str]:
        return [f"window={self.window_dimensions}", f"strides={self.window_strides}",
                f"padding={self.padding}", f"base_dilation={self.base_dilation}",
                f"window_dilation={self.window_dilation}",
                "region" if self.region is not None else "no region"]

    def sub_listing(self) -> str:
        text = "  body:\n" + self.body.listing()
        if self.region is not None:
            text += "\n  region:\n" + self.region.listing()
        return text

    def batch(self, b, primal_in, primal_out, bt):
        n = batch_size(b, bt)
        k = len(self.body.out_avals)
        xs = range(self.n_caps, self.n_caps + k)
        scalars_batched = any(bt[i] is not None for i in range(len(bt)) if i not in xs)
        if self.region is None or scalars_batched:
            # a batch of init values (or captures) has no scalar region: the array program alone
            ops, mask = _operands(b, primal_in, bt, n)
            return _add_multi(b, Checkpoint(batch_body(self.body, mask, n)), ops)
        # every operand array gets the batch axis (broadcast where unbatched), and the window
        # walks it with size 1
        ops, mask = _operands(b, primal_in, bt, n, always=xs)
        new = replace(self, body=batch_body(self.body, mask, n),
                      window_dimensions=(1,) + self.window_dimensions,
                      window_strides=(1,) + self.window_strides,
                      padding=((0, 0),) + self.padding,
                      base_dilation=(1,) + self.base_dilation,
                      window_dilation=(1,) + self.window_dilation)
        return _add_multi(b, new, ops)

    def linearize(self, b, primal_in, primal_out, t):
        # jax defines a general reduce_window's JVP only; tidu's comes from the array program,
        # so it also transposes (reverse mode)
        return Checkpoint(self.body).linearize(b, primal_in, primal_out, t)

    def lower(self, lo, out, *args):
        if self.region is None or lo.nb:
            res = lower_body(lo, self.body, list(args))
            return res if len(res) != 1 else res[0]
        k = len(self.region.out_avals)
        xs = list(args[self.n_caps:self.n_caps + k])
        inits = list(args[self.n_caps + k:])
        child = _child(lo)
        params = [Value(child.fresh(), tensor_type((), av.dtype)) for av in self.region.in_avals]
        outs = lower_body(child, self.region, params)
        region = _region(lo, child, params, outs)
        pad = "[" + ", ".join(f"[{p}, {q}]" for p, q in self.padding) + "]"
        nd = len(self.window_dimensions)
        types = [tensor_type(av.shape, av.dtype) for av in self.body.out_avals]
        attrs = (f"window_dimensions = {lo.i64_array(self.window_dimensions)}, "
                 f"window_strides = {lo.i64_array(self.window_strides)}, "
                 f"base_dilations = {lo.i64_array(self.base_dilation)}, "
                 f"window_dilations = {lo.i64_array(self.window_dilation)}, "
                 f"padding = dense<{pad}> : tensor<{nd}x2xi64>")
        res = _multi(lo, "stablehlo.reduce_window", xs + inits, types, [region], attrs)
        return res if len(res) != 1 else res[0]

