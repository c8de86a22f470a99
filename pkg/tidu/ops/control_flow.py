"""Structured control flow: primitives that hold a sub-program (a *body*) as a static attribute.

A :class:`Body` is a closed Fragment: its inputs are the canonical keys ``BodyArg(0..n-1)``, it
references nothing outside itself (values a traced body closes over become explicit operands of
the op), and its identity is the pair (interned input ids, interned output ids).  Values are
hash-consed, so two bodies traced from equal functions at equal abstract values are the same
Body, and the ops holding them are one interned op: CSE and the program cache see through them.

Primitives here:

- :class:`Scan` (``td.scan``, ``td.fori_loop`` with static bounds): operands
  ``consts..., carries..., xs...``; the body maps ``consts, carries, x slices`` to
  ``new carries, y slices``; results ``final carries..., ys...`` (stacked on a new axis 0).
  JVP is a scan over the body's JVP, partially evaluated into a primal scan that also stacks the
  residuals the tangent part needs, and a linear scan over them; the transpose of a linear scan is
  a reverse scan.
- :class:`Cond` (``td.cond``, ``td.switch``): operand 0 an int32 index, then the branch operands;
  each branch a Body with the same output avals.  JVP is a cond of JVPs (partially evaluated the
  same way), the transpose a cond of transposes.
- :class:`While` (``td.while_loop``): forward evaluation and JVP; no transpose (reverse mode raises
  naming ``fori_loop`` with static bounds / ``scan``).

Evaluation: the interpreter runs each body as its own compiled program (docs/control_flow.md);
XLA lowers to ``stablehlo.while`` / ``stablehlo.case``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from tidu import _core
from tidu.graph import (PRIMAL, AbstractValue, Fragment, FragmentBuilder, GraphError, Linear,
                        ValKey, aval, mode_of, prim_of, resolve)
from tidu.ops._base import Primitive, INTS, is_differentiable
from tidu.ops._rules import A, F
from tidu.ad.rules import RuleMissing, register

__all__ = ["BodyArg", "Body", "close_body", "Scan", "Cond", "While", "Checkpoint"]


@dataclass(frozen=True)
class BodyArg:
    """The canonical InputKey of a body's input number ``index``."""

    index: int

    def __repr__(self) -> str:
        return f"arg{self.index}"


_fresh = itertools.count()


@dataclass(frozen=True)
class _Tmp:
    """A throw-away InputKey (tracing a body, accumulators); replaced by BodyArg on closing."""

    uid: int
    index: int


def fresh_key() -> _Tmp:
    return _Tmp(next(_fresh), 0)


class Body:
    """A closed sub-program: inputs BodyArg(0..n-1), outputs, held by a control-flow op."""

    __slots__ = ("fragment", "in_avals", "out_avals", "_key", "_hash", "_prog", "__weakref__")

    def __init__(self, fragment: Fragment, in_avals: Sequence[AbstractValue]):
        self.fragment = fragment
        self.in_avals = tuple(in_avals)
        self.out_avals = tuple(k.aval for k in fragment.outputs)
        self._key = (tuple(a.id for a in self.in_avals), tuple(k.id for k in fragment.outputs))
        self._hash = hash(("Body", self._key))
        self._prog = None

    @property
    def inputs(self) -> list[ValKey]:
        """The input ValKeys in BodyArg order (declared even when unused)."""
        return [ValKey(_core.intern_input(_input_key_id(BodyArg(i)), a.id))
                for i, a in enumerate(self.in_avals)]

    @property
    def outputs(self) -> list[ValKey]:
        return self.fragment.outputs

    def __eq__(self, other):
        return isinstance(other, Body) and other._key == self._key

    def __hash__(self):
        return self._hash

    def __repr__(self) -> str:
        return (f"Body(({', '.join(map(str, self.in_avals))}) -> "
                f"({', '.join(map(str, self.out_avals))}), {self.fragment.n_ops} ops)")

    def listing(self, indent: str = "    ") -> str:
        return "\n".join(indent + line for line in str(self.fragment).splitlines())

    def program(self):
        """The body compiled once for the interpreter (a CompiledProgram on the cpu backend)."""
        if self._prog is None:
            from tidu.backends.program import compile as compile_
            from tidu.graph import materialize_merge

            mat = materialize_merge(resolve([self.fragment]), self.outputs)
            prog = compile_(mat, backend="cpu")
            # inputs the body never reads are not program inputs: map positions
            keys = [k.id for k in prog.input_vals]
            pos = {k.id: i for i, k in enumerate(self.inputs)}
            self._prog = (prog, [pos[k] for k in keys])
        return self._prog

    def run(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        prog, take = self.program()
        return prog.eval([args[i] for i in take])

    def native(self):
        """The body's C++ program (tidu._eval.Program) for a control-flow instruction, or None
        when an op of the body has no C++ kernel."""
        return self.program()[0].executable.native

    def take(self) -> list[int]:
        """The body's program input k reads body input take()[k] (unread inputs are dropped)."""
        return self.program()[1]


def _input_key_id(key):
    from tidu.graph import input_key_id

    return input_key_id(key)


def close_body(outputs: Sequence[ValKey | None], inputs: Sequence[ValKey | AbstractValue],
               out_avals: Sequence[AbstractValue] | None = None) -> Body:
    """A canonical Body computing ``outputs`` from ``inputs``.

    ``inputs[i]`` is a ValKey (becomes ``BodyArg(i)``: its definition is cut there) or an
    AbstractValue (an input nothing reads).  Every value reachable from the outputs must be a
    listed input or derived from them; an output None is zero (``out_avals`` gives its aval).
    The ops are replayed into a fresh fragment, so the result is the same Body whatever keys the
    inputs had."""
    b = FragmentBuilder(prefix="b")
    env: dict[int, ValKey] = {}
    in_avals = []
    for i, k in enumerate(inputs):
        av = k if isinstance(k, AbstractValue) else k.aval
        in_avals.append(av)
        local = b.add_input(BodyArg(i), av)
        if isinstance(k, ValKey) and k.id not in env:
            env[k.id] = b.key_of_local(local) if hasattr(b, "key_of_local") else \
                ValKey(b.store.global_of(local))
    outs = []
    for j, o in enumerate(outputs):
        if o is None:
            from tidu.ops._rules import const

            av = out_avals[j]
            outs.append(ValKey(b.store.global_of(const(b, 0, av))))
            continue
        outs.append(_replay(b, env, o))
    return Body(b.build(outs), in_avals)


def _replay(b: FragmentBuilder, env: dict[int, ValKey], root: ValKey) -> ValKey:
    """root's definition copied into b, with env's values standing in (iterative DFS)."""
    if root.id in env:
        return env[root.id]
    stack = [root.id]
    while stack:
        v = stack[-1]
        if v in env:
            stack.pop()
            continue
        op_id, _, _ = _core.val_info(v)
        if op_id == _core.NONE:
            key = ValKey(v)
            raise GraphError(f"control flow: the body reads {key!r} ({key.aval}), which is not one "
                             f"of its inputs")
        prim, mode, ins, first, n_out = _core.op_info(op_id)
        pending = [int(i) for i in ins if int(i) not in env]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        new = b.add_op(prim_of(prim), [env[int(i)] for i in ins], mode_of(mode))
        for s, local in enumerate(new):
            env[int(first) + s] = ValKey(b.store.global_of(local))
    return env[root.id]


def _zero_like(b: FragmentBuilder, av: AbstractValue) -> int:
    from tidu.ops._rules import const

    return const(b, 0, av)


def _outs(b: FragmentBuilder, first: int, n: int) -> list[int]:
    return list(range(first, first + n))


def _lin_body(body: Body, active: Sequence[bool]):
    """differentiate the body w.r.t. its active inputs; returns (LinearFragment, tangent input
    ValKeys aligned with body inputs (None inactive))."""
    from tidu.ad import differentiate

    keys = [BodyArg(i) for i, a in enumerate(active) if a]
    view = resolve([body.fragment])
    lf = differentiate(view, body.outputs, keys)
    tin: list[ValKey | None] = [None] * len(active)
    frag = lf.fragment
    by_key = {k.input_key: k for k in frag.inputs}
    for (what, tkey) in lf.tangent_inputs:
        tin[what.index] = by_key[tkey]
    return lf, tin


def _partial_eval(body: Body, lf, tin: Sequence[ValKey | None]):
    """Split the body's JVP into the known part (the body plus residual outputs) and the tangent
    part.  Returns (residuals: ValKeys the tangent part reads that are not tangents)."""
    frag = lf.fragment
    tangent: set[int] = {k.id for k in tin if k is not None}
    residuals: dict[int, ValKey] = {}
    for op, refs, outs, mode in frag.ops():
        keys = [frag.key_of(r.id) if hasattr(r, "id") and not hasattr(r, "key") else r.key
                for r in refs]
        if any(k.id in tangent for k in keys):
            for k in keys:
                if k.id not in tangent:
                    residuals.setdefault(k.id, k)
            for o in outs:
                tangent.add(frag.key_of(o).id)
    for o in lf.tangent_outputs:
        if o is not None and o.id not in tangent:
            residuals.setdefault(o.id, o)
    return list(residuals.values()), tangent



# ---- batching (vmap) ----

def batch_body(body: Body, mask: Sequence[bool], n: int) -> Body:
    """`body` with inputs i where mask[i] given a leading batch axis of size n, every output
    batched (outputs independent of the batched inputs are broadcast): the batching pass
    (tidu.ad.batch) over the body's own fragment."""
    from tidu.ad.batch import batch_walk
    from tidu.ops._batching import broadcast_batch

    fb = FragmentBuilder(parents=[body.fragment], prefix="vb")
    inputs, seeds = [], []
    for k, m in zip(body.inputs, mask):
        if not m:
            inputs.append(k)
            continue
        local = fb.add_input(fresh_key(), aval((n,) + k.aval.shape, k.aval.dtype))
        v = ValKey(fb.store.global_of(local))
        inputs.append(v)
        seeds.append((k.id, v.id))
    found = batch_walk(resolve([body.fragment]), body.outputs, seeds, fb)
    outs = [ValKey(v) if v != _core.NONE else
            ValKey(fb.store.global_of(broadcast_batch(fb, o, n)))
            for o, v in zip(body.outputs, found)]
    return close_body(outs, inputs)


def _swap01(b, x):
    """x with its first two axes swapped (a batch axis and a scan axis)."""
    from tidu.ops._rules import aval_of, fix
    from tidu.ops.structural import Transpose

    nd = aval_of(b, x).ndim
    return fix(b, Transpose((1, 0) + tuple(range(2, nd))), x)


def _add_multi(b, op, args) -> list:
    from tidu.graph import External, Local

    return b.add_op(op, [External(a) if isinstance(a, ValKey) else Local(a) for a in args])


def _operands(b, primal_in, bt, n, always=()):
    """Operands batched where given (and at the positions in `always`, broadcast), and the mask."""
    from tidu.ops._batching import broadcast_batch

    ops, mask = [], []
    for i, (x, bx) in enumerate(zip(primal_in, bt)):
        if bx is None and i in always:
            bx = broadcast_batch(b, x, n)
        ops.append(x if bx is None else bx)
        mask.append(bx is not None)
    return ops, mask


def _check_differentiable(name, primal_in, tangent_in):
    for x, t in zip(primal_in, tangent_in):
        if t is not None and not is_differentiable(x.dtype):
            raise TypeError(f"{name}: operand of dtype {x.dtype} is not differentiable")


# ---- Scan ----

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
        from dataclasses import replace
        from tidu.ops._batching import batch_size

        n = batch_size(b, bt)
        nc, nk = self.n_consts, self.n_carry
        ops, mask = _operands(b, primal_in, bt, n, always=range(nc, nc + nk))
        ops = [_swap01(b, x) if i >= nc + nk and m else x for i, (x, m) in enumerate(zip(ops, mask))]
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
            grow = [k for k in range(nk) if not active[nc + k] and
                    lf.tangent_outputs[k] is not None]
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
        view = [body.fragment, lf.fragment]
        known = close_body(list(body.outputs) + res_stack, body.inputs)
        kop = Scan(known, self.length, self.reverse, nc, nk)
        first = b.emit(kop, list(primal_in), PRIMAL)
        stacks = _outs(b, first, len(known.out_avals))[len(body.out_avals):]
        # the linear scan: consts [residual consts, tangent consts], carries tangent carries,
        # xs [residual xs, residual stacks, tangent xs]
        t_consts = [i for i in range(nc) if active[i]]
        t_carry = [nc + k for k in range(nk) if active[nc + k]]
        t_xs = [i for i in range(nc + nk, n_in) if active[i]]
        ny = len(body.out_avals) - nk
        t_ys = [j for j in range(ny) if lf.tangent_outputs[nk + j] is not None]
        lin_inputs = ([r for r, _ in res_const] + [tin[i] for i in t_consts] +
                      [tin[i] for i in t_carry] + [r for r, _ in res_x] + res_stack +
                      [tin[i] for i in t_xs])
        lin_outputs = ([lf.tangent_outputs[k - nc] for k in t_carry] +
                       [lf.tangent_outputs[nk + j] for j in t_ys])
        out_avals = [body.out_avals[k - nc] for k in t_carry] + \
            [body.out_avals[nk + j] for j in t_ys]
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
        linear_in = tuple([False] * len(res_const) + [True] * len(t_consts) +
                          [True] * len(t_carry) + [False] * (len(res_x) + len(stacks)) +
                          [True] * len(t_xs))
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
        from tidu.ad import LinearFragment, transpose

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
        from tidu.ops.elementwise import Add

        for i in lin_c:
            av = body.in_avals[i]
            a_local = acc_b.add_input(fresh_key(), av)
            a_key = ValKey(acc_b.store.global_of(a_local))
            acc_in.append(a_key)
            c = ct_of[i]
            acc_out.append(a_key if c is None else
                           ValKey(acc_b.store.global_of(acc_b.emit(Add(), [a_key, c],
                                                                   Linear([A, A])))))
        acc_b.build(acc_out)
        ct_carry_in = [ct_in_key.get(k) for k in range(nk)]
        ct_y_in = [ct_in_key.get(nk + j) for j in range(ny)]
        r_inputs = ([b_inputs[i] for i in fixed_c] +
                    [k if k is not None else body.out_avals[j] for j, k in enumerate(ct_carry_in)] +
                    acc_in + [b_inputs[i] for i in fixed_x] +
                    [k if k is not None else body.out_avals[nk + j] for j, k in enumerate(ct_y_in)])
        r_outputs = [ct_of[i] for i in lin_k] + acc_out + [ct_of[i] for i in lin_x]
        r_avals = [body.in_avals[i] for i in lin_k] + [body.in_avals[i] for i in lin_c] + \
            [body.in_avals[i] for i in lin_x]
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
        r_lin = tuple([False] * len(fixed_c) + [True] * (nk + len(lin_c)) +
                      [False] * len(fixed_x) + [True] * ny)
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
        from dataclasses import replace
        from tidu.ops._batching import batch_size
        from tidu.ops._rules import aval_of, const, fix
        from tidu.ops.elementwise import Compare, Max, Min
        from tidu.ops.structural import BroadcastInDim, Select

        n = batch_size(b, bt)
        ops, mask = _operands(b, primal_in[1:], bt[1:], n)
        branches = tuple(batch_body(br, mask, n) for br in self.branches)
        if bt[0] is None:
            return _add_multi(b, replace(self, branches=branches), [primal_in[0]] + ops)
        idx = bt[0]
        av = aval_of(b, idx)
        idx = fix(b, Min(), fix(b, Max(), idx, const(b, 0, av)), const(b, len(branches) - 1, av))
        zero = const(b, 0, aval((), "int32"))
        per = [_add_multi(b, replace(self, branches=(br,)), [zero] + ops) for br in branches]
        outs = list(per[0])
        for j in range(1, len(branches)):
            hit = fix(b, Compare("EQ"), idx, const(b, j, av))
            for k, o in enumerate(per[j]):
                shape = aval_of(b, o).shape
                pred = fix(b, BroadcastInDim(shape, (0,)), hit)
                outs[k] = fix(b, Select(), pred, o, outs[k])
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
        from tidu.ad import LinearFragment, transpose

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


# ---- While ----

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
        from dataclasses import replace
        from tidu.ops._batching import batch_size
        from tidu.ops.elementwise import Compare
        from tidu.ops.sorting import ReduceOr
        from tidu.ops.structural import BroadcastInDim, Select

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



# ---- Checkpoint ----

@register
@dataclass(frozen=True)
class Checkpoint(Primitive):
    """``body(*operands)`` whose derivatives recompute the body's intermediates from its operands
    instead of saving them (``td.checkpoint`` / ``td.remat``)."""

    body: Body
    linear_in: tuple = ()
    rule_cache = False

    @property
    def n_outputs(self) -> int:
        return len(self.body.out_avals)

    def attrs(self) -> list[str]:
        return [f"linear_in={self.linear_in}"] if self.linear_in else []

    def sub_listing(self) -> str:
        return "  body:\n" + self.body.listing()

    def abstract_eval(self, *xs):
        if self.body.in_avals != tuple(xs):
            raise TypeError(f"Checkpoint: the body takes ({', '.join(map(str, self.body.in_avals))})"
                            f", given ({', '.join(map(str, xs))})")
        outs = self.body.out_avals
        return outs if len(outs) != 1 else outs[0]

    def kernel_attrs(self) -> list:
        t = self.body.take()
        return [self.body, len(t), *t]

    def impl(self, *xs):
        res = self.body.run(list(xs))
        return tuple(res) if self.n_outputs != 1 else res[0]

    def batch(self, b, primal_in, primal_out, bt):
        from dataclasses import replace
        from tidu.ops._batching import batch_size

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
        lbody = close_body([lf.tangent_outputs[k] for k in t_out],
                           list(self.body.inputs) + [tin[i] for i in act])
        lop = Checkpoint(lbody, tuple([False] * len(primal_in) + [True] * len(act)))
        first = b.emit(lop, list(primal_in) + [t[i] for i in act],
                       Linear([F] * len(primal_in) + [A] * len(act)))
        outs = _outs(b, first, len(t_out))
        result: list = [None] * self.n_outputs
        for j, k in enumerate(t_out):
            result[k] = outs[j]
        return result

    def transpose_rule(self, b, ct, inputs, mode):
        from tidu.ad import LinearFragment, transpose

        body = self.body
        lin_in = self.linear_in or tuple(mode.active_mask)
        n_in = len(lin_in)
        lin_idx = [i for i in range(n_in) if lin_in[i]]
        fixed = [i for i in range(n_in) if not lin_in[i]]
        b_in, outs = body.inputs, list(body.outputs)
        keep = [k for k, o in enumerate(outs)
                if ct[k] is not None and _is_linear_value(o, b_in, lin_idx)]
        t_outs = [outs[k] if k in keep else None for k in range(len(outs))]
        lf = LinearFragment(body.fragment, [(BodyArg(i), BodyArg(i)) for i in lin_idx], t_outs)
        tr = transpose(lf)
        ct_key = _ct_inputs(tr)
        want = [j for j, i in enumerate(lin_idx) if mode.active_mask[i] and
                tr.tangent_outputs[j] is not None]
        if not keep or not want:
            return [None] * n_in
        rbody = close_body([tr.tangent_outputs[j] for j in want],
                           [b_in[i] for i in fixed] + [ct_key[k] for k in keep])
        rop = Checkpoint(rbody, tuple([False] * len(fixed) + [True] * len(keep)))
        first = b.emit(rop, [inputs[i] for i in fixed] + [ct[k] for k in keep],
                       Linear([F] * len(fixed) + [A] * len(keep)))
        routs = _outs(b, first, len(want))
        result: list = [None] * n_in
        for j, jj in enumerate(want):
            result[lin_idx[jj]] = routs[j]
        return result

    def lower(self, lo, out, *args):
        res = lower_body(lo, self.body, list(args))
        return res if len(res) != 1 else res[0]


def _ct_inputs(tr) -> dict[int, ValKey]:
    """The cotangent input ValKey of each output index of a transposed body (an output listed
    twice gets one per index)."""
    return {key.index: ValKey(_core.intern_input(_input_key_id(key), what.aval.id))
            for what, key in tr.tangent_inputs}


def _is_linear_value(o: ValKey, inputs: Sequence[ValKey], lin_idx: Sequence[int]) -> bool:
    """o is a linear input of the body or produced by a Linear-mode op."""
    if any(o.id == inputs[i].id for i in lin_idx):
        return True
    op_id, _, _ = _core.val_info(o.id)
    if op_id == _core.NONE:
        return False
    return mode_of(_core.op_info(op_id)[1]).is_linear


# ---- StableHLO lowering ----

def _child(lo):
    """A Lowering writing into a region of lo's function (fresh names continue lo's)."""
    from tidu.backends.xla import Lowering

    c = Lowering(lo.batch)
    c._n = lo._n
    return c


def _region(lo, child, params, results) -> str:
    """``^bb0(params): child's lines; stablehlo.return(results)`` as region text."""
    lo._n = child._n
    sig = ", ".join(f"{v.name}: {v.type}" for v in params)
    rts = ", ".join(v.type for v in results)
    body = "\n".join("  " + line for line in child.lines)
    return (f"    ^bb0({sig}):\n" + (body + "\n" if body else "") +
            f'      "stablehlo.return"({", ".join(v.name for v in results)}) : ({rts}) -> ()\n    ')


def lower_body(lo, body: Body, args):
    """body's instructions written into lo with args (Values, body input order) as inputs;
    returns the output Values."""
    from tidu.backends.xla import lower_range

    prog, take = body.program()
    exe = prog.executable
    env = {int(s): args[i] for s, i in zip(exe.input_slots, take)}
    lower_range(exe, lo, env, 0, len(exe.instructions))
    return [env[int(s)] for s in exe.output_slots]


def _multi(lo, name: str, args, types, regions: Sequence[str], attrs: str = ""):
    """An operation with several results (and regions); returns one Value per result."""
    from tidu.backends.xla import Value

    r = lo.fresh()
    n = len(types)
    regs = " (" + ", ".join("{\n" + reg + "}" for reg in regions) + ")" if regions else ""
    att = f" {{{attrs}}}" if attrs else ""
    lhs = f"{r}:{n}" if n > 1 else r
    lo.lines.append(f'    {lhs} = "{name}"({", ".join(a.name for a in args)}){regs}{att} : '
                    f'({", ".join(a.type for a in args)}) -> ({", ".join(types)})')
    return [Value(f"{r}#{k}" if n > 1 else r, t) for k, t in enumerate(types)]


def _i64(lo, value: int):
    return lo.scalar(value, np.int64)


def lower_scan(op: Scan, lo, args):
    """``stablehlo.while`` over (step, consts, carries, xs, ys accumulators)."""
    from tidu.backends.xla import Value, i64_array

    body, nc, nk, n = op.body, op.n_consts, op.n_carry, op.length
    nb = lo.nb
    ys_avals = [aval((n,) + a.shape, a.dtype) for a in body.out_avals[nk:]]
    ys0 = []
    for av in ys_avals:
        z = lo.scalar(0, av.dtype)
        ys0.append(lo.op("stablehlo.broadcast_in_dim", [z], av, f"broadcast_dimensions = {i64_array(())}"))
    if n == 0:  # no step: the carries as given, empty ys (a slice of an empty xs is invalid)
        outs = list(args[nc:nc + nk]) + ys0
        return outs if len(outs) != 1 else outs[0]
    state = [_i64(lo, 0)] + list(args) + ys0
    types = [v.type for v in state]
    # condition: step < length
    cc = _child(lo)
    cp = [Value(cc.fresh(), t) for t in types]
    lim = cc.scalar(n, np.int64)
    pred = cc.op("stablehlo.compare", [cp[0], lim], "tensor<i1>",
                 "comparison_direction = #stablehlo<comparison_direction LT>")
    cond = _region(lo, cc, cp, [pred])
    # body: index = step (or length-1-step), slice xs, run the body, update ys
    bc = _child(lo)
    bp = [Value(bc.fresh(), t) for t in types]
    step = bp[0]
    idx = step
    if op.reverse:
        idx = bc.op("stablehlo.subtract", [bc.scalar(n - 1, np.int64), step], "tensor<i64>")
    zero = bc.scalar(0, np.int64)
    consts = bp[1:1 + nc]
    carry = bp[1 + nc:1 + nc + nk]
    xs = bp[1 + nc + nk:1 + len(args)]
    ys = bp[1 + len(args):]
    x_avals = body.in_avals[nc + nk:]
    slices = []
    for x, av in zip(xs, x_avals):
        sizes = lo.lead(lo.batch) + (1,) + tuple(av.shape)
        starts = [zero] * nb + [idx] + [zero] * av.ndim
        s1 = bc.op("stablehlo.dynamic_slice", [x] + starts,
                   tensor_type_of(sizes, av.dtype), f"slice_sizes = {i64_array(sizes)}")
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
    outs = res[1 + nc:1 + nc + nk] + res[1 + len(args):]
    return outs if len(outs) != 1 else outs[0]


def tensor_type_of(shape, dtype) -> str:
    from tidu.backends.xla import tensor_type

    return tensor_type(shape, dtype)



def lower_while(op: While, lo, args):
    from tidu.backends.xla import Value

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


def lower_cond(op: Cond, lo, index, args):
    from tidu.backends.xla import Value, i64_array

    n_out = op.n_outputs
    if lo.nb:  # batched index: every branch, then a select per output
        results = [lower_body(lo, br, list(args)) for br in op.branches]
        out = list(results[-1])
        for j in range(len(op.branches) - 2, -1, -1):
            jv = lo.scalar(j, np.int32)
            jb = lo.op("stablehlo.broadcast_in_dim", [jv], index.type,
                       f"broadcast_dimensions = {i64_array(())}")
            hit = lo.op("stablehlo.compare", [index, jb], index.type.replace("i32", "i1"),
                        "comparison_direction = #stablehlo<comparison_direction LE>")
            for k in range(n_out):
                av = op.branches[0].out_avals[k]
                h = lo.op("stablehlo.broadcast_in_dim", [hit], tensor_type_of(
                    lo.shape(av.shape), "bool"), f"broadcast_dimensions = {i64_array((0,))}")
                out[k] = lo.op("stablehlo.select", [h, results[j][k], out[k]], av)
        return out if n_out != 1 else out[0]
    regions = []
    for br in op.branches:
        c = _child(lo)
        outs = lower_body(c, br, list(args))
        lo._n = c._n
        rts = ", ".join(v.type for v in outs)
        body = "\n".join("  " + line for line in c.lines)
        regions.append((body + "\n" if body else "") +
                       f'      "stablehlo.return"({", ".join(v.name for v in outs)}) : ({rts}) -> ()\n    ')
    types = [lo.type(a) for a in op.branches[0].out_avals]
    res = _multi(lo, "stablehlo.case", [index], types, regions)
    return res if n_out != 1 else res[0]
