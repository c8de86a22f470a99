"""Cond (``td.cond``, ``td.switch``) and Checkpoint (``td.checkpoint``).

Cond: operand 0 an int32 index, then the branch operands; each branch a Body with the same output
avals.  JVP is a cond of JVPs (partially evaluated as Scan's), the transpose a cond of
transposes; XLA lowers it to ``stablehlo.case``.  Checkpoint holds one body whose residuals are
recomputed rather than saved.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tidu.ad import LinearFragment, transpose
from tidu.ad.rules import register
from tidu.graph import PRIMAL, Linear, ValKey, aval
from tidu.ops.control_flow.body import (
    Body,
    BodyArg,
    _add_multi,
    _check_differentiable,
    _child,
    _ct_inputs,
    _is_linear_value,
    _lin_body,
    _multi,
    _operands,
    _outs,
    _partial_eval,
    _zero_like,
    batch_body,
    close_body,
    lower_body,
    tensor_type_of,
)
from tidu.ops.core import (
    A,
    BroadcastInDim,
    F,
    Primitive,
    aval_of,
    batch_size,
    broadcast_batch,
    const,
    fix,
    is_differentiable,
)
from tidu.ops.elementwise import Compare, Max, Min
from tidu.ops.structural import Select, StopGradient

# ---- Cond ----


@register
@dataclass(frozen=True)
class Cond(Primitive):
    """``branches[clamp(index)](*operands)``: operand 0 the int32 index, the rest the operands
    every branch takes (all branches share inputs and output avals)."""

    branches: tuple
    linear_in: tuple = ()
    rule_cache = False

    @property
    def n_outputs(self) -> int:
        return len(self.branches[0].out_avals)

    def attrs(self) -> list[str]:
        return [f"branches={len(self.branches)}" +
                (f", linear_in={self.linear_in}" if self.linear_in else "")]

    def sub_listing(self) -> str:
        return "\n".join(f"  branch {j}:\n" + br.listing() for j, br in enumerate(self.branches))

    def abstract_eval(self, index, *xs):
        if index is not aval((), "int32"):
            raise TypeError(f"Cond: index must be an int32 scalar, got {index}")
        first = self.branches[0]
        for j, br in enumerate(self.branches):
            if br.in_avals != tuple(xs):
                raise TypeError(f"Cond: branch {j} takes ({', '.join(map(str, br.in_avals))}), "
                                f"given ({', '.join(map(str, xs))})")
            if br.out_avals != first.out_avals:
                raise TypeError(f"Cond: branch {j} returns {br.out_avals}, branch 0 "
                                f"{first.out_avals}")
        return first.out_avals if len(first.out_avals) != 1 else first.out_avals[0]

    def kernel_attrs(self) -> list:
        out: list = [len(self.branches)]
        for br in self.branches:
            t = br.take()
            out += [br, len(t), *t]
        return out

    def impl(self, index, *xs):
        j = min(max(int(index), 0), len(self.branches) - 1)
        res = self.branches[j].run(list(xs))
        return tuple(res) if self.n_outputs != 1 else res[0]

    def batch(self, b, primal_in, primal_out, bt):
        # A shared index: one Cond of batched branches.  An index per element: every branch
        # evaluated (each a one-branch Cond) and the results selected, as jax does.
        n = batch_size(b, bt)
        ops, mask = _operands(b, primal_in[1:], bt[1:], n)
        branches = tuple(batch_body(br, mask, n) for br in self.branches)
        if bt[0] is None:
            return _add_multi(b, replace(self, branches=branches), [primal_in[0]] + ops)
        idx = bt[0]
        av = aval_of(b, idx)
        idx = fix(b, Min(), fix(b, Max(), idx, const(b, 0, av)), const(b, len(branches) - 1, av))
        zero = const(b, 0, aval((), "int32"))
        # Each branch runs on every element, so a branch's derivative at the elements that do
        # not take it must not reach the result: a branch singular there (sqrt, log, 1/x at 0)
        # gives inf, and 0 * inf is NaN.  As jax does (jax#1052), each branch reads its
        # differentiable operands through select(taken, x, stop_gradient(x)): the same values,
        # but the tangent a branch sees is zero where it is not taken and the cotangent it
        # returns is selected away there (a select's transpose writes zeros, not 0 * inf).
        # Unbatched differentiable operands are broadcast so they can be masked per element.
        diff = [is_differentiable(aval_of(b, x).dtype) for x in primal_in[1:]]
        ops = [broadcast_batch(b, x, n) if d and not m else x
               for x, d, m in zip(ops, diff, mask)]
        full = [m or d for m, d in zip(mask, diff)]
        if full != mask:
            branches = tuple(batch_body(br, full, n) for br in self.branches)
        hits = [fix(b, Compare("EQ"), idx, const(b, j, av)) for j in range(len(branches))]
        per = []
        for j, br in enumerate(branches):
            ops_j = [_masked(b, hits[j], x) if d else x for x, d in zip(ops, diff)]
            per.append(_add_multi(b, replace(self, branches=(br,)), [zero] + ops_j))
        outs = list(per[0])
        for j in range(1, len(branches)):
            for k, o in enumerate(per[j]):
                outs[k] = fix(b, Select(), _per_element(b, hits[j], o), o, outs[k])
        return outs

    def linearize(self, b, primal_in, primal_out, t):
        _check_differentiable("cond", primal_in[1:], t[1:])
        ops, tops = primal_in[1:], t[1:]
        active = [ti is not None for ti in tops]
        if not any(active):
            return [None] * len(primal_out)
        lins = [_lin_body(br, active) for br in self.branches]
        n_out = self.n_outputs
        t_out = [k for k in range(n_out) if any(lf.tangent_outputs[k] is not None
                                                for lf, _ in lins)]
        if not t_out:
            return [None] * n_out
        # residual slots: each branch's non-input residuals (zeros in the other branches)
        slots: list[tuple[int, ValKey]] = []
        for j, (br, (lf, tin)) in enumerate(zip(self.branches, lins)):
            ins = {k.id for k in br.inputs}
            res, _ = _partial_eval(br, lf, tin)
            slots += [(j, r) for r in res if r.id not in ins]
        slot_avals = [r.aval for _, r in slots]
        known = tuple(close_body(list(br.outputs) + [r if jj == j else None for jj, r in slots],
                                 br.inputs, list(br.out_avals) + slot_avals)
                      for j, br in enumerate(self.branches))
        first = b.emit(Cond(known), list(primal_in), PRIMAL)
        res_vals = _outs(b, first, n_out + len(slots))[n_out:]
        act = [i for i, a in enumerate(active) if a]
        lin_bodies = []
        for j, (br, (lf, tin)) in enumerate(zip(self.branches, lins)):
            inputs = list(br.inputs) + [r if jj == j else r.aval for jj, r in slots] + \
                [tin[i] for i in act]
            lin_bodies.append(close_body([lf.tangent_outputs[k] for k in t_out], inputs,
                                         [br.out_avals[k] for k in t_out]))
        linear_in = tuple([False] * (len(ops) + len(slots)) + [True] * len(act))
        lop = Cond(tuple(lin_bodies), linear_in)
        args = [primal_in[0]] + list(ops) + res_vals + [tops[i] for i in act]
        mask = [F] * (1 + len(ops) + len(slots)) + [A] * len(act)
        lfirst = b.emit(lop, args, Linear(mask))
        louts = _outs(b, lfirst, len(t_out))
        result: list = [None] * n_out
        for j, k in enumerate(t_out):
            result[k] = louts[j]
        return result

    def transpose_rule(self, b, ct, inputs, mode):
        lin_in = self.linear_in or tuple(mode.active_mask[1:])
        n_in = len(lin_in)
        lin_idx = [i for i in range(n_in) if lin_in[i]]
        fixed = [i for i in range(n_in) if not lin_in[i]]
        first = self.branches[0]
        bodies = []
        for br in self.branches:
            b_in = br.inputs
            outs = list(br.outputs)
            t_outs = [o if _is_linear_value(o, b_in, lin_idx) else None for o in outs]
            lf = LinearFragment(br.fragment, [(BodyArg(i), BodyArg(i)) for i in lin_idx], t_outs)
            tr = transpose(lf)
            ct_key = _ct_inputs(tr)
            ct_inputs = [ct_key.get(k, o.aval) for k, o in enumerate(outs)]
            bodies.append(close_body(list(tr.tangent_outputs), [b_in[i] for i in fixed] +
                                     ct_inputs, [br.in_avals[i] for i in lin_idx]))
        args, rmask = [inputs[0]] + [inputs[1 + i] for i in fixed], [F] * (1 + len(fixed))
        for k, c in enumerate(ct):
            if c is None:
                args.append(_zero_like(b, first.out_avals[k]))
                rmask.append(F)
            else:
                args.append(c)
                rmask.append(A)
        r_lin = tuple([False] * len(fixed) + [True] * len(ct))
        rfirst = b.emit(Cond(tuple(bodies), r_lin), args, Linear(rmask))
        routs = _outs(b, rfirst, len(lin_idx))
        result: list = [None] * (1 + n_in)
        for j, i in enumerate(lin_idx):
            if mode.active_mask[1 + i]:
                result[1 + i] = routs[j]
        return result

    def lower(self, lo, out, index, *args):
        return lower_cond(self, lo, index, args)


def _per_element(b, hit, x):
    """hit (one bool per batch element) broadcast to x's shape."""
    return fix(b, BroadcastInDim(aval_of(b, x).shape, (0,)), hit)


def _masked(b, hit, x):
    """x where hit, else x with no derivative: x's value, x's tangent only where hit."""
    return fix(b, Select(), _per_element(b, hit, x), x, fix(b, StopGradient(), x))


def lower_cond(op: Cond, lo, index, args):
    n_out = op.n_outputs
    if lo.nb:  # batched index: every branch, then a select per output
        results = [lower_body(lo, br, list(args)) for br in op.branches]
        out = list(results[-1])
        for j in range(len(op.branches) - 2, -1, -1):
            jv = lo.scalar(j, np.int32)
            jb = lo.op("stablehlo.broadcast_in_dim", [jv], index.type,
                       f"broadcast_dimensions = {lo.i64_array(())}")
            hit = lo.op("stablehlo.compare", [index, jb], index.type.replace("i32", "i1"),
                        "comparison_direction = #stablehlo<comparison_direction LE>")
            for k in range(n_out):
                av = op.branches[0].out_avals[k]
                h = lo.op("stablehlo.broadcast_in_dim", [hit], tensor_type_of(
                    lo.shape(av.shape), "bool"), f"broadcast_dimensions = {lo.i64_array((0,))}")
                out[k] = lo.op("stablehlo.select", [h, results[j][k], out[k]], av)
        return out if n_out != 1 else out[0]
    regions = []
    for br in op.branches:
        c = _child(lo)
        outs = lower_body(c, br, list(args))
        lo._n = c._n
        rts = ", ".join(v.type for v in outs)
        body = "\n".join("  " + line for line in c.lines)
        names = ", ".join(v.name for v in outs)
        regions.append((body + "\n" if body else "") +
                       f'      "stablehlo.return"({names}) : ({rts}) -> ()\n    ')
    types = [lo.type(a) for a in op.branches[0].out_avals]
    res = _multi(lo, "stablehlo.case", [index], types, regions)
    return res if n_out != 1 else res[0]


# ---- Checkpoint ----


class BodyCall(Primitive):
    """An op that runs ``body(*operands)`` as one nested program: its shape rule, listing,
    interpreter attributes and reference evaluation (Checkpoint, and the custom-rule ops of
    custom.py, which the interpreter runs through Checkpoint's opcode)."""

    rule_cache = False

    @property
    def n_outputs(self) -> int:
        return len(self.body.out_avals)

    def sub_listing(self) -> str:
        return "  body:\n" + self.body.listing()

    def abstract_eval(self, *xs):
        if self.body.in_avals != tuple(xs):
            raise TypeError(
                f"{self.name}: the body takes ({', '.join(map(str, self.body.in_avals))})"
                f", given ({', '.join(map(str, xs))})"
            )
        outs = self.body.out_avals
        return outs if len(outs) != 1 else outs[0]

    def kernel_attrs(self) -> list:
        t = self.body.take()
        return [self.body, len(t), *t]

    def impl(self, *xs):
        res = self.body.run(list(xs))
        return tuple(res) if self.n_outputs != 1 else res[0]


@register
@dataclass(frozen=True)
class Checkpoint(BodyCall):
    """``body(*operands)`` whose derivatives recompute the body's intermediates from its operands
    instead of saving them (``td.checkpoint`` / ``td.remat``)."""

    body: Body
    linear_in: tuple = ()

    def attrs(self) -> list[str]:
        return [f"linear_in={self.linear_in}"] if self.linear_in else []

    def batch(self, b, primal_in, primal_out, bt):
        n = batch_size(b, bt)
        ops, mask = _operands(b, primal_in, bt, n)
        return _add_multi(b, replace(self, body=batch_body(self.body, mask, n)), ops)

    def linearize(self, b, primal_in, primal_out, t):
        _check_differentiable("checkpoint", primal_in, t)
        active = [ti is not None for ti in t]
        lf, tin = _lin_body(self.body, active)
        t_out = [k for k, o in enumerate(lf.tangent_outputs) if o is not None]
        if not t_out:
            return [None] * self.n_outputs
        act = [i for i, a in enumerate(active) if a]
        # the tangent body reads only the operands: what it needs of the primal is recomputed
        lbody = close_body(
            [lf.tangent_outputs[k] for k in t_out], list(self.body.inputs) + [tin[i] for i in act]
        )
        lop = Checkpoint(lbody, tuple([False] * len(primal_in) + [True] * len(act)))
        first = b.emit(
            lop,
            list(primal_in) + [t[i] for i in act],
            Linear([F] * len(primal_in) + [A] * len(act)),
        )
        outs = _outs(b, first, len(t_out))
        result: list = [None] * self.n_outputs
        for j, k in enumerate(t_out):
            result[k] = outs[j]
        return result

    def transpose_rule(self, b, ct, inputs, mode):
        body = self.body
        lin_in = self.linear_in or tuple(mode.active_mask)
        n_in = len(lin_in)
        lin_idx = [i for i in range(n_in) if lin_in[i]]
        fixed = [i for i in range(n_in) if not lin_in[i]]
        b_in, outs = body.inputs, list(body.outputs)
        keep = [
            k
            for k, o in enumerate(outs)
            if ct[k] is not None and _is_linear_value(o, b_in, lin_idx)
        ]
        t_outs = [outs[k] if k in keep else None for k in range(len(outs))]
        lf = LinearFragment(body.fragment, [(BodyArg(i), BodyArg(i)) for i in lin_idx], t_outs)
        tr = transpose(lf)
        ct_key = _ct_inputs(tr)
        want = [
            j
            for j, i in enumerate(lin_idx)
            if mode.active_mask[i] and tr.tangent_outputs[j] is not None
        ]
        if not keep or not want:
            return [None] * n_in
        rbody = close_body(
            [tr.tangent_outputs[j] for j in want],
            [b_in[i] for i in fixed] + [ct_key[k] for k in keep],
        )
        rop = Checkpoint(rbody, tuple([False] * len(fixed) + [True] * len(keep)))
        first = b.emit(
            rop,
            [inputs[i] for i in fixed] + [ct[k] for k in keep],
            Linear([F] * len(fixed) + [A] * len(keep)),
        )
        routs = _outs(b, first, len(want))
        result: list = [None] * n_in
        for j, jj in enumerate(want):
            result[lin_idx[jj]] = routs[j]
        return result

    def lower(self, lo, out, *args):
        res = lower_body(lo, self.body, list(args))
        return res if len(res) != 1 else res[0]
