"""Custom derivative rules: :class:`CustomJVP` (``td.custom_jvp``), :class:`CustomVJP`
(``td.custom_vjp``) and the linear op :class:`CustomVJPLin` their forward rule emits.

The primal function is traced once into a Body held by the op, which runs as one instruction (the
interpreter's Checkpoint opcode: a nested program; ``stablehlo`` inline on XLA), so a saved
program needs no rule.  The rules are the user's Python functions, traced lazily by a *rule*
object of the front end (``tidu.api.custom``) when a transform first asks for them, at the
abstract values of the op's operands:

- ``rule.jvp_body(avals, active) -> (Body, caps)`` (active: which tangents are nonzero):
  inputs ``caps + primals + tangents``, outputs ``primal outs + tangent outs`` (custom_jvp);
- ``rule.fwd_body(avals, act) -> (Body, caps, n_out)`` (act: the indices of the perturbed
  operands): inputs ``caps + primals``, outputs ``outs + residuals`` (custom_vjp);
- ``rule.bwd_body(avals, ct_avals, act, zeros) -> (Body, caps)``: inputs ``caps + residuals (of
  fwd at avals, act) + cotangents``, one output per primal operand (custom_vjp); where
  ``rule.symbolic_zeros``, ``zeros`` marks the output cotangents that are zero and the body takes
  only the others.

``caps`` are values of enclosing traces a rule reads (ValKeys, fixed operands); where the op
has an operand standing for the same value (``cap_ids``: the function captured it, or the front
end found it in the rule's closure), the rule reads that operand, which inside a loop body is
the body's own input.  A traced rule is
inlined into the builder of the transform that asked for it: the JVP rule as its linearization in
the tangents (so the tangent part is Linear-mode ops, transposable), the fwd rule as fixed nodes,
the bwd rule as it is (it need not be linear: clip_gradient).  vmap batches the body and wraps
the rule in :class:`BatchedRule`, which batches the traced rule bodies the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tidu.ad.rules import register
from tidu.graph import FragmentBuilder, Linear, ValKey, aval
from tidu.ops.control_flow.body import (
    Body,
    _add_multi,
    _lin_body,
    _operands,
    _replay,
    batch_body,
    close_body,
    lower_body,
)
from tidu.ops.control_flow.cond import BodyCall, Checkpoint
from tidu.ops.core import (
    A,
    F,
    Primitive,
    ReduceSum,
    Reshape,
    add_all,
    batch_size,
    const,
    fix,
    is_differentiable,
)

__all__ = ["BatchedRule", "CustomJVP", "CustomLinear", "CustomVJP", "CustomVJPLin", "inline_body"]

_FORWARD_MODE = "can't apply forward-mode autodiff (jvp) to a custom_vjp function."


# ---- inlining a body into a transform's builder ----


def inline_body(b, body: Body, args) -> list[ValKey]:
    """body's ops replayed into b with ``args`` (ValKeys, or local ids of b) standing for its
    inputs; returns its outputs as ValKeys."""
    env: dict[int, ValKey] = {}
    for k, a in zip(body.inputs, args):
        env.setdefault(k.id, a if isinstance(a, ValKey) else ValKey(b.store.global_of(a)))
    return [_replay(b, env, o) for o in body.outputs]


def _local(b, v: ValKey) -> int:
    """v as a local id of b (a value b does not define is copied by an identity reshape)."""
    local = b.store.local_of(v.id)
    return local if local >= 0 else fix(b, Reshape(v.aval.shape), v)


def _map_caps(caps, cap_ids, operands) -> list:
    """A rule's captured values (keys of enclosing traces) as the op's own operands where the op
    captured the same value: inside a loop body the outer value is not readable, the body's
    input standing for it is.  cap_ids[i]: the ids operand i stands for."""
    out = []
    for c in caps:
        for ids, x in zip(cap_ids, operands):
            if c.id in ids:
                out.append(x)
                break
        else:
            out.append(c)
    return out


def _check_caps(rule, caps, t) -> None:
    for x, ti in zip(caps, t):
        if ti is not None:
            raise TypeError(
                f"{rule.kind} function {rule.name} closes over a value being differentiated "
                f"({x.aval}); pass it as an argument of the function instead")


def _active(args, targs) -> tuple[bool, ...]:
    return tuple(ti is not None and is_differentiable(a.aval.dtype) for a, ti in zip(args, targs))


# ---- the primal op, shared: a Checkpoint-like body call ----


class _BodyCall(BodyCall):
    """Evaluation, lowering and batching of an op that runs ``body(*operands)``."""

    opcode = "Checkpoint"  # the interpreter runs it as a nested program (saved files too)

    def attrs(self) -> list[str]:
        return [f"rule={self.rule.name}"]

    def batch(self, b, primal_in, primal_out, bt):
        n = batch_size(b, bt)
        ops, mask = _operands(b, primal_in, bt, n)
        nc = self.n_caps
        args = [aval(x.shape[1:], x.dtype) if m else x
                for x, m in zip(self.body.in_avals[nc:], mask[nc:])]
        batched_caps = frozenset().union(*[ids for ids, m in zip(self.cap_ids, mask[:nc]) if m])
        rule = BatchedRule(self.rule, tuple(args), tuple(mask[nc:]), n, batched_caps)
        return _add_multi(b, replace(self, body=batch_body(self.body, mask, n), rule=rule), ops)

    def lower(self, lo, out, *args):
        res = lower_body(lo, self.body, list(args))
        return res if len(res) != 1 else res[0]


# ---- CustomJVP ----


@register
@dataclass(frozen=True)
class CustomJVP(_BodyCall):
    """``body(*caps, *args)`` whose JVP is the user's rule (``td.custom_jvp``): the first
    ``n_caps`` operands are values the function closes over (never differentiated)."""

    body: Body
    rule: object
    n_caps: int = 0
    caps_fixed: bool = False  # the captured values are constants to the rule (custom_root)
    cap_ids: tuple = ()  # per captured operand, the ids of the values it stands for

    def linearize(self, b, primal_in, primal_out, t):
        nc = self.n_caps
        if not self.caps_fixed:
            _check_caps(self.rule, primal_in[:nc], t[:nc])
        args, targs = primal_in[nc:], t[nc:]
        active = _active(args, targs)
        if not any(active):
            return [None] * self.n_outputs
        avals = tuple(a.aval for a in args)
        lbody, caps, t_out = _jvp_linearized(self.rule, avals, active)
        caps = _map_caps(caps, self.cap_ids, primal_in[:nc])
        zeros = [const(b, 0, av) for av in avals]
        tans = [targs[i] for i in range(len(args)) if active[i]]
        outs = inline_body(b, lbody, list(caps) + list(args) + zeros + tans)
        result: list = [None] * self.n_outputs
        for j, k in enumerate(t_out):
            result[k] = _local(b, outs[j])
        return result


def _jvp_linearized(rule, avals, active):
    """The rule's tangent outputs linearized in the active tangents: (Body over caps + primals
    + tangent points + active tangents, caps, indices of the outputs with a tangent); cached
    on the rule (``rule._cache``), which lives as long as the ops holding it."""
    key = ("lin", avals, active)
    hit = rule._cache.get(key)
    if hit is not None:
        return hit
    body, caps = rule.jvp_body(avals, active)
    n, nc = len(avals), len(caps)
    n_out = len(body.out_avals) // 2
    pos = [nc + n + i for i in range(n) if active[i]]
    mask = [False] * len(body.in_avals)
    for p in pos:
        mask[p] = True
    lf, tin = _lin_body(body, mask)
    t_out = [k for k in range(n_out) if lf.tangent_outputs[n_out + k] is not None]
    lbody = close_body([lf.tangent_outputs[n_out + k] for k in t_out],
                       list(body.inputs) + [tin[p] for p in pos])
    hit = rule._cache[key] = (lbody, tuple(caps), t_out)
    return hit


# ---- CustomVJP ----


@register
@dataclass(frozen=True)
class CustomVJP(_BodyCall):
    """``body(*caps, *args)`` whose VJP is the user's fwd/bwd pair (``td.custom_vjp``).  Its
    linearization runs fwd (fixed nodes) and a :class:`CustomVJPLin` over fwd's residuals,
    which transposes to bwd."""

    body: Body
    rule: object
    n_caps: int = 0
    cap_ids: tuple = ()  # per captured operand, the ids of the values it stands for

    def linearize(self, b, primal_in, primal_out, t):
        nc = self.n_caps
        _check_caps(self.rule, primal_in[:nc], t[:nc])
        args, targs = primal_in[nc:], t[nc:]
        active = _active(args, targs)
        if not any(active):
            return [None] * self.n_outputs
        avals = tuple(a.aval for a in args)
        act = tuple(i for i in range(len(args)) if active[i])
        fbody, caps, n_out = self.rule.fwd_body(avals, act)
        caps = _map_caps(caps, self.cap_ids, primal_in[:nc])
        vals = inline_body(b, fbody, list(caps) + list(args))
        res = vals[n_out:]
        t_out = tuple(k for k, o in enumerate(self.body.out_avals) if is_differentiable(o.dtype))
        if not t_out:
            return [None] * self.n_outputs
        lop = CustomVJPLin(self.rule, avals, act, tuple(r.aval for r in res),
                           tuple(self.body.out_avals[k] for k in t_out),
                           tuple(x.aval for x in primal_in[:nc]), self.cap_ids)
        fixed = list(primal_in[:nc]) + list(res)
        first = b.emit(lop, fixed + [targs[i] for i in act],
                       Linear([F] * len(fixed) + [A] * len(act)))
        result: list = [None] * self.n_outputs
        for j, k in enumerate(t_out):
            result[k] = first + j
        return result


@register
@dataclass(frozen=True)
class CustomVJPLin(Primitive):
    """The tangent of a custom_vjp function's outputs: linear in its last ``len(act)``
    operands (the tangents of primal operands ``act``), fixed in the captured values and the
    residuals before them.  It cannot be evaluated (jax's forward-mode error); its transpose is
    the bwd rule."""

    rule: object
    avals: tuple  # the primal operands' abstract values (after the captured ones)
    act: tuple
    res_avals: tuple
    out_avals: tuple
    cap_avals: tuple = ()
    cap_ids: tuple = ()
    rule_cache = False

    @property
    def n_outputs(self) -> int:
        return len(self.out_avals)

    def attrs(self) -> list[str]:
        return [f"rule={self.rule.name}"]

    def abstract_eval(self, *xs):
        want = self.cap_avals + self.res_avals + tuple(self.avals[i] for i in self.act)
        if tuple(xs) != want:
            raise TypeError(f"CustomVJPLin: takes ({', '.join(map(str, want))}), given "
                            f"({', '.join(map(str, xs))})")
        return self.out_avals if len(self.out_avals) != 1 else self.out_avals[0]

    def impl(self, *xs):
        raise TypeError(_FORWARD_MODE)

    def linearize(self, b, primal_in, primal_out, t):
        raise TypeError(_FORWARD_MODE)

    def lower(self, lo, out, *args):
        raise TypeError(_FORWARD_MODE)

    def batch(self, b, primal_in, primal_out, bt):
        raise TypeError(_FORWARD_MODE)

    def transpose_rule(self, b, ct, inputs, mode):
        nc = len(self.cap_avals)
        n_fixed = nc + len(self.res_avals)
        if self.rule.symbolic_zeros:  # bwd sees a SymbolicZero for each zero cotangent
            zeros = tuple(c is None for c in ct)
            cts = [c for c in ct if c is not None]
        else:
            zeros = None
            cts = [c if c is not None else const(b, 0, av) for c, av in zip(ct, self.out_avals)]
        bbody, caps = self.rule.bwd_body(self.avals, self.out_avals, self.act, zeros)
        fixed = [b.key(r) for r in inputs[:n_fixed]]
        caps = _map_caps(caps, self.cap_ids, fixed[:nc])
        outs = inline_body(b, bbody, list(caps) + fixed[nc:] + cts)
        result: list = [None] * len(inputs)
        for j, i in enumerate(self.act):
            if mode.active_mask[n_fixed + j]:
                result[n_fixed + j] = _local(b, outs[i])
        return result


# ---- CustomLinear: a linear function with its own transpose ----


@register
@dataclass(frozen=True)
class CustomLinear(_BodyCall):
    """``body(*fixed, *x)``, linear in x, whose transpose is ``tbody(*fixed, *ct)`` (jax's
    ``linear_call``; ``td.lax.custom_linear_solve`` is built on it).  ``tbody`` None: no
    transpose (reverse mode raises)."""

    body: Body
    tbody: Body | None
    n_fixed: int
    message: str = ""  # the error when tbody is None

    def attrs(self) -> list[str]:
        return [f"n_fixed={self.n_fixed}"]

    def batch(self, b, primal_in, primal_out, bt):
        n = batch_size(b, bt)
        ops, mask = _operands(b, primal_in, bt, n, always=range(len(primal_in)))
        body = batch_body(self.body, mask, n)
        tb = None if self.tbody is None else batch_body(self.tbody, [True] * len(mask), n)
        return _add_multi(b, replace(self, body=body, tbody=tb), ops)

    def linearize(self, b, primal_in, primal_out, t):
        nf = self.n_fixed
        terms = [[] for _ in range(self.n_outputs)]
        if any(ti is not None for ti in t[nf:]):  # linear in x: the op itself
            xs = [ti if ti is not None else const(b, 0, x.aval)
                  for x, ti in zip(primal_in[nf:], t[nf:])]
            first = b.emit(self, list(primal_in[:nf]) + xs,
                           Linear([F] * nf + [A] * len(xs)))
            for k in range(self.n_outputs):
                terms[k].append(first + k)
        active = [ti is not None for ti in t[:nf]] + [False] * (len(t) - nf)
        if any(active):  # through the fixed operands: the body differentiated (as Checkpoint)
            lf, tin = _lin_body(self.body, active)
            t_out = [k for k, o in enumerate(lf.tangent_outputs) if o is not None]
            act = [i for i, a in enumerate(active) if a]
            if t_out:
                lbody = close_body([lf.tangent_outputs[k] for k in t_out],
                                   list(self.body.inputs) + [tin[i] for i in act])
                lop = Checkpoint(lbody, tuple([False] * len(primal_in) + [True] * len(act)))
                first = b.emit(lop, list(primal_in) + [t[i] for i in act],
                               Linear([F] * len(primal_in) + [A] * len(act)))
                for j, k in enumerate(t_out):
                    terms[k].append(first + j)
        return [add_all(b, ts) for ts in terms]

    def transpose_rule(self, b, ct, inputs, mode):
        if self.tbody is None:
            raise TypeError(self.message or "this linear function has no transpose")
        nf = self.n_fixed
        cts = [c if c is not None else const(b, 0, av) for c, av in zip(ct, self.body.out_avals)]
        op = CustomLinear(self.tbody, self.body, nf)
        first = b.emit(op, [b.key(r) for r in inputs[:nf]] + cts,
                       Linear([F] * nf + [A] * len(cts)))
        result: list = [None] * len(inputs)
        for j in range(len(inputs) - nf):
            if mode.active_mask[nf + j]:
                result[nf + j] = first + j
        return result


# ---- vmap: a rule batched as its op ----


class BatchedRule:
    """``inner`` traced at the unbatched abstract values ``avals`` and batched: operand i has a
    leading batch axis of size n where mask[i] (every output is batched)."""

    def __init__(self, inner, avals: tuple, mask: tuple, n: int, batched_caps=frozenset()):
        self.inner, self.avals, self.mask, self.n = inner, avals, mask, n
        self.batched_caps = batched_caps  # ids of captured values batched in the op
        self.kind, self.name = inner.kind, inner.name
        self.symbolic_zeros = getattr(inner, "symbolic_zeros", False)
        self._key = (inner, avals, mask, n, batched_caps)
        self._cache: dict = {}

    def __eq__(self, other):
        return isinstance(other, BatchedRule) and other._key == self._key

    def __hash__(self):
        return hash(("BatchedRule", self._key))

    def _cap_mask(self, caps) -> list[bool]:
        """A captured value is batched where the op's operand standing for it is."""
        return [c.id in self.batched_caps for c in caps]

    def jvp_body(self, avals, active=None):
        hit = self._cache.get(("jvp", active))
        if hit is None:
            body, caps = self.inner.jvp_body(self.avals, active)
            m = self._cap_mask(caps) + list(self.mask) * 2
            hit = self._cache[("jvp", active)] = (batch_body(body, m, self.n), caps)
        return hit

    def fwd_body(self, avals, act=None):
        hit = self._cache.get(("fwd", act))
        if hit is None:
            body, caps, n_out = self.inner.fwd_body(self.avals, act)
            m = self._cap_mask(caps) + list(self.mask)
            hit = self._cache[("fwd", act)] = (batch_body(body, m, self.n), caps, n_out)
        return hit

    def bwd_body(self, avals, ct_avals, act=None, zeros=None):
        hit = self._cache.get(("bwd", act, zeros))
        if hit is None:
            inner_ct = tuple(aval(c.shape[1:], c.dtype) for c in ct_avals)
            body, caps = self.inner.bwd_body(self.avals, inner_ct, act, zeros)
            m = self._cap_mask(caps) + [True] * (len(body.in_avals) - len(caps))
            bb = batch_body(body, m, self.n)
            # an operand shared by the batch gets the sum of its per-element cotangents
            fb = FragmentBuilder(parents=[bb.fragment], prefix="vb")
            outs = [o if keep else ValKey(fb.store.global_of(fix(fb, ReduceSum((0,)), o)))
                    for o, keep in zip(bb.outputs, self.mask)]
            hit = self._cache[("bwd", act, zeros)] = (close_body(outs, bb.inputs), caps)
        return hit
