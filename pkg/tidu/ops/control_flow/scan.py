"""The Scan primitive (``td.scan``, ``td.fori_loop`` with static bounds): operands
``consts..., carries..., xs...``; the body maps ``consts, carries, x slices`` to
``new carries, y slices``; results ``final carries..., ys...`` (stacked on a new axis 0).

JVP is a scan over the body's JVP, partially evaluated into a primal scan that also stacks the
residuals the tangent part needs, and a linear scan over them; the transpose of a linear scan is
a reverse scan.  XLA lowers it to ``stablehlo.while``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tidu.ad import LinearFragment, transpose
from tidu.ad.rules import RuleMissing, register
from tidu.backends.xla.hlo import Value
from tidu.graph import PRIMAL, FragmentBuilder, Linear, ValKey, aval
from tidu.ops.control_flow.body import (
    Body,
    BodyArg,
    _add_multi,
    _check_differentiable,
    _child,
    _ct_inputs,
    _i64,
    _is_linear_value,
    _lin_body,
    _multi,
    _operands,
    _outs,
    _partial_eval,
    _region,
    _swap01,
    _zero_like,
    batch_body,
    close_body,
    fresh_key,
    lower_body,
    tensor_type_of,
)
from tidu.ops.core import A, Add, F, Primitive, batch_size


@register
@dataclass(frozen=True)
class Scan(Primitive):
    """A loop of ``length`` steps over ``body``: operands consts (n_consts), carries (n_carry),
    xs (stacked on axis 0); results final carries, ys (stacked on axis 0).  ``reverse`` walks the
    xs/ys from the last step to the first.  ``linear_in`` (linear scans from AD) marks the body
    inputs the body is linear in."""

    body: Body
    length: int
    reverse: bool
    n_consts: int
    n_carry: int
    linear_in: tuple = ()
    rule_cache = False

    @property
    def n_outputs(self) -> int:
        return len(self.body.out_avals) + 0

    def attrs(self) -> list[str]:
        lin = f", linear_in={self.linear_in}" if self.linear_in else ""
        return [f"length={self.length}, reverse={self.reverse}, consts={self.n_consts}, "
                f"carries={self.n_carry}{lin}"]

    def sub_listing(self) -> str:
        return "  body:\n" + self.body.listing()

    @property
    def n_xs(self) -> int:
        return len(self.body.in_avals) - self.n_consts - self.n_carry

    def abstract_eval(self, *xs):
        b, nc, nk = self.body, self.n_consts, self.n_carry
        if len(xs) != len(b.in_avals):
            raise ValueError(f"Scan: {len(xs)} operands for a body of {len(b.in_avals)} inputs")
        if len(b.out_avals) < nk:
            raise ValueError(f"Scan: body has {len(b.out_avals)} outputs, fewer than its "
                             f"{nk} carries")
        for i in range(nc + nk):
            if xs[i] is not b.in_avals[i]:
                what = "const" if i < nc else "carry"
                raise TypeError(f"Scan: {what} operand {i} is {xs[i]}, the body takes "
                                f"{b.in_avals[i]}")
        for k in range(nk):
            if b.out_avals[k] is not b.in_avals[nc + k]:
                raise TypeError(f"scan: the body returns carry {k} as {b.out_avals[k]}, but it "
                                f"enters as {b.in_avals[nc + k]} (carry shape and dtype must be "
                                f"fixed)")
        for i in range(nc + nk, len(xs)):
            want = aval((self.length,) + b.in_avals[i].shape, b.in_avals[i].dtype)
            if xs[i] is not want:
                raise ValueError(f"Scan: xs operand {i - nc - nk} is {xs[i]}, expected {want} "
                                 f"(length {self.length} on axis 0)")
        ys = tuple(aval((self.length,) + a.shape, a.dtype) for a in b.out_avals[nk:])
        outs = tuple(b.out_avals[:nk]) + ys
        return outs if len(outs) != 1 else outs[0]

    def kernel_attrs(self) -> list:
        """The interpreter's attributes (cpp/include/tidu/control_flow.hpp)."""
        t = self.body.take()
        return [self.body, self.length, int(self.reverse), self.n_consts, self.n_carry, len(t), *t]

    # -- evaluation (reference: each step runs the body's compiled program; the interpreter runs
    # the whole loop as one instruction, control_flow.hpp) --
    def impl(self, *xs):
        nc, nk, n = self.n_consts, self.n_carry, self.length
        consts = list(xs[:nc])
        carry = list(xs[nc:nc + nk])
        seqs = xs[nc + nk:]
        outs = self.body.out_avals[nk:]
        ys = [np.empty((n,) + a.shape, a.dtype) for a in outs]
        order = range(n - 1, -1, -1) if self.reverse else range(n)
        for i in order:
            res = self.body.run(consts + carry + [np.asarray(s[i]) for s in seqs])
            carry = res[:nk]
            for y, r in zip(ys, res[nk:]):
                y[i] = r
        return tuple(carry) + tuple(ys) if self.n_outputs != 1 else (carry + ys)[0]

    # -- AD --
    def batch(self, b, primal_in, primal_out, bt):
        # carries all batched (no fixpoint needed); batched xs scanned over their axis 1
        n = batch_size(b, bt)
        nc, nk = self.n_consts, self.n_carry
        ops, mask = _operands(b, primal_in, bt, n, always=range(nc, nc + nk))
        ops = [_swap01(b, x) if i >= nc + nk and m else x
               for i, (x, m) in enumerate(zip(ops, mask))]
        new = replace(self, body=batch_body(self.body, mask, n))
        outs = _add_multi(b, new, ops)
        return [o if k < nk else _swap01(b, o) for k, o in enumerate(outs)]

    def linearize(self, b, primal_in, primal_out, t):
        _check_differentiable("scan", primal_in, t)
        nc, nk, body = self.n_consts, self.n_carry, self.body
        n_in = len(body.in_avals)
        active = [ti is not None for ti in t]
        # a carry is active when its init is or when the body makes it depend on an active input
        while True:
            lf, tin = _lin_body(body, active)
            grow = [
                k for k in range(nk) if not active[nc + k] and lf.tangent_outputs[k] is not None
            ]
            if not grow:
                break
            for k in grow:
                active[nc + k] = True
        residuals, _ = _partial_eval(body, lf, tin)
        body_in = {k.id: i for i, k in enumerate(body.inputs)}
        res_const, res_x, res_stack = [], [], []  # residual ValKeys by where they come from
        for r in residuals:
            i = body_in.get(r.id)
            if i is not None and i < nc:
                res_const.append((r, primal_in[i]))
            elif i is not None and i >= nc + nk:
                res_x.append((r, primal_in[i]))
            else:
                res_stack.append(r)
        # the known scan: the body plus the residuals it must stack
        known = close_body(list(body.outputs) + res_stack, body.inputs)
        kop = Scan(known, self.length, self.reverse, nc, nk)
        first = b.emit(kop, list(primal_in), PRIMAL)
        stacks = _outs(b, first, len(known.out_avals))[len(body.out_avals) :]
        # the linear scan: consts [residual consts, tangent consts], carries tangent carries,
        # xs [residual xs, residual stacks, tangent xs]
        t_consts = [i for i in range(nc) if active[i]]
        t_carry = [nc + k for k in range(nk) if active[nc + k]]
        t_xs = [i for i in range(nc + nk, n_in) if active[i]]
        ny = len(body.out_avals) - nk
        t_ys = [j for j in range(ny) if lf.tangent_outputs[nk + j] is not None]
        lin_inputs = (
            [r for r, _ in res_const]
            + [tin[i] for i in t_consts]
            + [tin[i] for i in t_carry]
            + [r for r, _ in res_x]
            + res_stack
            + [tin[i] for i in t_xs]
        )
        lin_outputs = [lf.tangent_outputs[k - nc] for k in t_carry] + [
            lf.tangent_outputs[nk + j] for j in t_ys
        ]
        out_avals = [body.out_avals[k - nc] for k in t_carry] + [
            body.out_avals[nk + j] for j in t_ys
        ]
        lbody = close_body(lin_outputs, lin_inputs, out_avals)
        args, mask = [], []
        for _, p in res_const:
            args.append(p)
            mask.append(F)
        for i in t_consts:
            args.append(t[i])
            mask.append(A)
        for i in t_carry:
            if t[i] is None:
                args.append(_zero_like(b, primal_in[i].aval))
                mask.append(F)
            else:
                args.append(t[i])
                mask.append(A)
        for _, p in res_x:
            args.append(p)
            mask.append(F)
        for s in stacks:
            args.append(s)
            mask.append(F)
        for i in t_xs:
            args.append(t[i])
            mask.append(A)
        n_lc = len(res_const) + len(t_consts)
        linear_in = tuple(
            [False] * len(res_const)
            + [True] * len(t_consts)
            + [True] * len(t_carry)
            + [False] * (len(res_x) + len(stacks))
            + [True] * len(t_xs)
        )
        lop = Scan(lbody, self.length, self.reverse, n_lc, len(t_carry), linear_in)
        if not any(mask):  # nothing active reaches the outputs
            return [None] * len(primal_out)
        lfirst = b.emit(lop, args, Linear(mask))
        louts = _outs(b, lfirst, len(lbody.out_avals))
        result: list = [None] * len(primal_out)
        for j, i in enumerate(t_carry):
            result[i - nc] = louts[j]
        for j, y in enumerate(t_ys):
            result[nk + y] = louts[len(t_carry) + j]
        return result

    def transpose_rule(self, b, ct, inputs, mode):
        nc, nk, body = self.n_consts, self.n_carry, self.body
        n_in = len(body.in_avals)
        lin_in = self.linear_in or tuple(mode.active_mask)
        mask = mode.active_mask
        ny = len(body.out_avals) - nk
        # the body's transpose: cotangents of its outputs in, of its linear inputs out
        b_inputs = body.inputs
        lin_idx = [i for i in range(n_in) if lin_in[i]]
        outs = list(body.outputs)
        t_outs = [o if _is_linear_value(o, b_inputs, lin_idx) else None for o in outs]
        lf = LinearFragment(body.fragment, [(BodyArg(i), BodyArg(i)) for i in lin_idx], t_outs)
        tr = transpose(lf)
        ct_in_key = _ct_inputs(tr)  # output index -> its cotangent input
        ct_of = dict(zip(lin_idx, tr.tangent_outputs))  # body input -> its cotangent (or None)
        # reverse-scan body: consts = fixed consts; carries = [ct carries, const accumulators];
        # xs = [fixed xs, ct ys]; outputs = [new ct carries, accumulators], [ct xs]
        fixed_c = [i for i in range(nc) if not lin_in[i]]
        lin_c = [i for i in range(nc) if lin_in[i]]
        lin_k = [nc + k for k in range(nk) if lin_in[nc + k]]
        fixed_x = [i for i in range(nc + nk, n_in) if not lin_in[i]]
        lin_x = [i for i in range(nc + nk, n_in) if lin_in[i]]
        # carries that are not linear in a linear scan would make it non-linear
        if len(lin_k) != nk:
            raise RuleMissing("Scan: transpose of a scan with a non-linear carry")
        acc_b = FragmentBuilder(parents=[tr.fragment], prefix="a")
        acc_in, acc_out = [], []
        for i in lin_c:
            av = body.in_avals[i]
            a_local = acc_b.add_input(fresh_key(), av)
            a_key = ValKey(acc_b.store.global_of(a_local))
            acc_in.append(a_key)
            c = ct_of[i]
            acc_out.append(
                a_key
                if c is None
                else ValKey(acc_b.store.global_of(acc_b.emit(Add(), [a_key, c], Linear([A, A]))))
            )
        acc_b.build(acc_out)
        ct_carry_in = [ct_in_key.get(k) for k in range(nk)]
        ct_y_in = [ct_in_key.get(nk + j) for j in range(ny)]
        r_inputs = (
            [b_inputs[i] for i in fixed_c]
            + [k if k is not None else body.out_avals[j] for j, k in enumerate(ct_carry_in)]
            + acc_in
            + [b_inputs[i] for i in fixed_x]
            + [k if k is not None else body.out_avals[nk + j] for j, k in enumerate(ct_y_in)]
        )
        r_outputs = [ct_of[i] for i in lin_k] + acc_out + [ct_of[i] for i in lin_x]
        r_avals = (
            [body.in_avals[i] for i in lin_k]
            + [body.in_avals[i] for i in lin_c]
            + [body.in_avals[i] for i in lin_x]
        )
        rbody = close_body(r_outputs, r_inputs, r_avals)
        args, rmask = [], []
        for i in fixed_c:
            args.append(inputs[i])
            rmask.append(F)
        for k in range(nk):
            if ct[k] is None:
                args.append(_zero_like(b, body.out_avals[k]))
                rmask.append(F)
            else:
                args.append(ct[k])
                rmask.append(A)
        for i in lin_c:
            args.append(_zero_like(b, body.in_avals[i]))
            rmask.append(F)
        for i in fixed_x:
            args.append(inputs[i])
            rmask.append(F)
        for j in range(ny):
            if ct[nk + j] is None:
                av = body.out_avals[nk + j]
                args.append(_zero_like(b, aval((self.length,) + av.shape, av.dtype)))
                rmask.append(F)
            else:
                args.append(ct[nk + j])
                rmask.append(A)
        if not any(rmask):
            return [None] * n_in
        r_lin = tuple(
            [False] * len(fixed_c)
            + [True] * (nk + len(lin_c))
            + [False] * len(fixed_x)
            + [True] * ny
        )
        rop = Scan(rbody, self.length, not self.reverse, len(fixed_c), nk + len(lin_c), r_lin)
        first = b.emit(rop, args, Linear(rmask))
        routs = _outs(b, first, len(rbody.out_avals))
        result: list = [None] * n_in
        for j, i in enumerate(lin_k):
            result[i] = routs[j]
        for j, i in enumerate(lin_c):
            result[i] = routs[nk + j]
        for j, i in enumerate(lin_x):
            result[i] = routs[nk + len(lin_c) + j]
        return [r if mask[i] else None for i, r in enumerate(result)]

    # -- XLA --
    def lower(self, lo, out, *args):
        return lower_scan(self, lo, args)


def lower_scan(op: Scan, lo, args):
    """``stablehlo.while`` over (step, consts, carries, xs, ys accumulators)."""
    body, nc, nk, n = op.body, op.n_consts, op.n_carry, op.length
    nb = lo.nb
    ys_avals = [aval((n,) + a.shape, a.dtype) for a in body.out_avals[nk:]]
    ys0 = []
    for av in ys_avals:
        z = lo.scalar(0, av.dtype)
        ys0.append(
            lo.op("stablehlo.broadcast_in_dim", [z], av,
                  f"broadcast_dimensions = {lo.i64_array(())}")
        )
    if n == 0:  # no step: the carries as given, empty ys (a slice of an empty xs is invalid)
        outs = list(args[nc : nc + nk]) + ys0
        return outs if len(outs) != 1 else outs[0]
    state = [_i64(lo, 0)] + list(args) + ys0
    types = [v.type for v in state]
    # condition: step < length
    cc = _child(lo)
    cp = [Value(cc.fresh(), t) for t in types]
    lim = cc.scalar(n, np.int64)
    pred = cc.op(
        "stablehlo.compare",
        [cp[0], lim],
        "tensor<i1>",
        "comparison_direction = #stablehlo<comparison_direction LT>",
    )
    cond = _region(lo, cc, cp, [pred])
    # body: index = step (or length-1-step), slice xs, run the body, update ys
    bc = _child(lo)
    bp = [Value(bc.fresh(), t) for t in types]
    step = bp[0]
    idx = step
    if op.reverse:
        idx = bc.op("stablehlo.subtract", [bc.scalar(n - 1, np.int64), step], "tensor<i64>")
    zero = bc.scalar(0, np.int64)
    consts = bp[1 : 1 + nc]
    carry = bp[1 + nc : 1 + nc + nk]
    xs = bp[1 + nc + nk : 1 + len(args)]
    ys = bp[1 + len(args) :]
    x_avals = body.in_avals[nc + nk :]
    slices = []
    for x, av in zip(xs, x_avals):
        sizes = lo.lead(lo.batch) + (1,) + tuple(av.shape)
        starts = [zero] * nb + [idx] + [zero] * av.ndim
        s1 = bc.op(
            "stablehlo.dynamic_slice",
            [x] + starts,
            tensor_type_of(sizes, av.dtype),
            f"slice_sizes = {lo.i64_array(sizes)}",
        )
        slices.append(bc.op("stablehlo.reshape", [s1], av))
    outs = lower_body(bc, body, list(consts) + list(carry) + slices)
    new_ys = []
    for acc, y, av in zip(ys, outs[nk:], body.out_avals[nk:]):
        shp = lo.lead(lo.batch) + (1,) + tuple(av.shape)
        y1 = bc.op("stablehlo.reshape", [y], tensor_type_of(shp, av.dtype))
        starts = [zero] * nb + [idx] + [zero] * av.ndim
        new_ys.append(bc.op("stablehlo.dynamic_update_slice", [acc, y1] + starts, acc.type))
    one = bc.scalar(1, np.int64)
    nxt = bc.op("stablehlo.add", [step, one], "tensor<i64>")
    loop = _region(lo, bc, bp, [nxt] + list(consts) + outs[:nk] + list(xs) + new_ys)
    res = _multi(lo, "stablehlo.while", state, types, [cond, loop])
    outs = res[1 + nc : 1 + nc + nk] + res[1 + len(args) :]
    return outs if len(outs) != 1 else outs[0]
