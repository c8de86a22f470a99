"""The While primitive (``td.while_loop``): forward evaluation and JVP; no transpose (reverse mode
raises naming ``fori_loop`` with static bounds / ``scan``).  XLA lowers it to
``stablehlo.while``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tidu.ad.rules import RuleMissing, register
from tidu.backends.xla.hlo import Value
from tidu.graph import FragmentBuilder, Linear, ValKey, aval
from tidu.ops.control_flow.body import (
    Body,
    _add_multi,
    _check_differentiable,
    _child,
    _lin_body,
    _multi,
    _operands,
    _outs,
    _region,
    _replay,
    _zero_like,
    batch_body,
    close_body,
    fresh_key,
    lower_body,
)
from tidu.ops.core import A, BroadcastInDim, F, Primitive, batch_size
from tidu.ops.reductions import ReduceOr
from tidu.ops.structural import Select


class ReverseModeUnsupported(RuleMissing):
    """Reverse mode through a while_loop (its trip count is unknown until it runs)."""


@register
@dataclass(frozen=True)
class While(Primitive):
    """``while cond(ops): carries = body(ops)``: operands cond captures (n_cc), body captures
    (n_bc), carries; both bodies take every operand, body returns the new carries."""

    cond: Body
    body: Body
    n_cc: int
    n_bc: int
    rule_cache = False

    @property
    def n_outputs(self) -> int:
        return len(self.body.out_avals)

    def attrs(self) -> list[str]:
        return [f"consts={self.n_cc + self.n_bc}"]

    def sub_listing(self) -> str:
        return "  cond:\n" + self.cond.listing() + "\n  body:\n" + self.body.listing()

    def abstract_eval(self, *xs):
        nc = self.n_cc + self.n_bc
        for name, bd in (("cond", self.cond), ("body", self.body)):
            if bd.in_avals != tuple(xs):
                raise TypeError(f"While: the {name} takes ({', '.join(map(str, bd.in_avals))}), "
                                f"given ({', '.join(map(str, xs))})")
        if self.cond.out_avals != (aval((), "bool"),):
            raise TypeError(f"While: cond returns {self.cond.out_avals}, not one bool scalar")
        if self.body.out_avals != tuple(xs[nc:]):
            raise TypeError(f"While: body returns {self.body.out_avals}, carries are {xs[nc:]}")
        outs = tuple(xs[nc:])
        return outs if len(outs) != 1 else outs[0]

    def kernel_attrs(self) -> list:
        ct, bt = self.cond.take(), self.body.take()
        return [self.cond, self.body, self.n_cc + self.n_bc, len(ct), *ct, len(bt), *bt]

    def impl(self, *xs):
        nc = self.n_cc + self.n_bc
        consts, carry = list(xs[:nc]), list(xs[nc:])
        while bool(self.cond.run(consts + carry)[0]):
            carry = self.body.run(consts + carry)
        return tuple(carry) if self.n_outputs != 1 else carry[0]

    def batch(self, b, primal_in, primal_out, bt):
        # Carries all batched.  A predicate that stays shared: one While of batched bodies.  A
        # predicate per element: loop while any element's holds, each element's carries updated
        # only while its own does (as jax does).
        n = batch_size(b, bt)
        nc = self.n_cc + self.n_bc
        ops, mask = _operands(b, primal_in, bt, n, always=range(nc, len(primal_in)))
        cond, body = batch_body(self.cond, mask, n), batch_body(self.body, mask, n)
        fb = FragmentBuilder(prefix="vw")
        ins = [ValKey(fb.store.global_of(fb.add_input(fresh_key(), a))) for a in cond.in_avals]
        env = {k.id: v for k, v in zip(cond.inputs, ins)}
        pred = _replay(fb, dict(env), cond.outputs[0])  # (n,) bool
        any_ = ValKey(fb.store.global_of(fb.emit(ReduceOr((0,)), [pred])))
        env = {k.id: v for k, v in zip(body.inputs, ins)}
        new = [_replay(fb, dict(env), o) for o in body.outputs]
        kept = []
        for o, old in zip(new, ins[nc:]):
            p = fb.emit(BroadcastInDim(o.aval.shape, (0,)), [pred])
            kept.append(ValKey(fb.store.global_of(fb.emit(Select(), [p, o, old]))))
        op = replace(self, cond=close_body([any_], ins), body=close_body(kept, ins))
        return _add_multi(b, op, ops)

    def linearize(self, b, primal_in, primal_out, t):
        _check_differentiable("while_loop", primal_in, t)
        nc = self.n_cc + self.n_bc
        nk = len(primal_in) - nc
        active = [ti is not None for ti in t]
        if not any(active):
            return [None] * nk
        while True:
            lf, tin = _lin_body(self.body, active)
            grow = [k for k in range(nk) if not active[nc + k] and
                    lf.tangent_outputs[k] is not None]
            if not grow:
                break
            for k in grow:
                active[nc + k] = True
        t_c = [i for i in range(nc) if active[i]]
        t_k = [nc + k for k in range(nk) if active[nc + k]]
        b_in, c_in = self.body.inputs, self.cond.inputs
        new_in = list(b_in[:nc]) + [tin[i] for i in t_c] + list(b_in[nc:]) + [tin[i] for i in t_k]
        body = close_body(list(self.body.outputs) + [lf.tangent_outputs[i - nc] for i in t_k],
                          new_in, list(self.body.out_avals) + [x.aval for x in
                                                               (primal_in[i] for i in t_k)])
        cond = close_body(self.cond.outputs, list(c_in[:nc]) + [primal_in[i].aval for i in t_c] +
                          list(c_in[nc:]) + [primal_in[i].aval for i in t_k])
        op = While(cond, body, self.n_cc, self.n_bc + len(t_c))
        args = list(primal_in[:nc]) + [t[i] for i in t_c] + list(primal_in[nc:])
        mask = [F] * nc + [A] * len(t_c) + [F] * nk
        for i in t_k:
            if t[i] is None:
                args.append(_zero_like(b, primal_in[i].aval))
                mask.append(F)
            else:
                args.append(t[i])
                mask.append(A)
        first = b.emit(op, args, Linear(mask))
        outs = _outs(b, first, nk + len(t_k))
        result: list = [None] * nk
        for j, i in enumerate(t_k):
            result[i - nc] = outs[nk + j]
        return result

    def transpose_rule(self, b, ct, inputs, mode):
        raise ReverseModeUnsupported(
            "reverse-mode differentiation (grad, vjp, jacrev, hessian) of a while_loop is not "
            "supported: its trip count is only known when it runs.  Use fori_loop with static "
            "(Python int) bounds, or scan, which are differentiable in both modes; jvp/jacfwd "
            "work through while_loop")

    def lower(self, lo, out, *args):
        return lower_while(self, lo, args)


def lower_while(op: While, lo, args):
    nc = op.n_cc + op.n_bc
    types = [a.type for a in args]
    cc = _child(lo)
    cp = [Value(cc.fresh(), t) for t in types]
    (pred,) = lower_body(cc, op.cond, cp)
    if lo.nb:  # a batch of loops: run while any point's condition holds, freeze the others
        raise NotImplementedError("while_loop under eval_batch on XLA is not supported; "
                                  "use the interpreter (backend='cpu')")
    cond = _region(lo, cc, cp, [pred])
    bc = _child(lo)
    bp = [Value(bc.fresh(), t) for t in types]
    outs = lower_body(bc, op.body, bp)
    loop = _region(lo, bc, bp, list(bp[:nc]) + outs)
    res = _multi(lo, "stablehlo.while", list(args), types, [cond, loop])
    return res[nc:] if len(res) - nc != 1 else res[nc]
