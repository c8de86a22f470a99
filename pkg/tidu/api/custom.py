"""Custom derivative rules with jax's API: ``td.custom_jvp`` here, ``td.custom_vjp`` (its rule
object and decorator) in ``tidu.api.custom_vjp`` on the machinery shared here.

Calling a decorated function inside a trace traces it once into a Body and emits one op
(``tidu.ops.control_flow.CustomJVP`` / ``CustomVJP``) that runs the body.  The op holds a *rule*
object of this module, which traces the user's rules lazily (when a transform asks for them,
at the operands' abstract values, once per abstract values) into closed Bodies: a rule may call
the decorated function itself.  Values of enclosing traces a rule reads become fixed operands.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable, Sequence

import numpy as np

from tidu._native import _core
from tidu.api.control_flow import (
    _eager,
    _emit_multi,
    _flatten,
    _outer_trace,
    _trace_body,
    _tree_str,
    _unflatten,
)
from tidu.api.custom_derivatives import SymbolicZero
from tidu.graph import AbstractValue, FragmentBuilder, ValKey
from tidu.graph.memory import register_cache
from tidu.ops.control_flow import CustomJVP, CustomVJP, close_body, fresh_key, inline_body
from tidu.trace.build import tracing
from tidu.trace.tracer import Tracer, _lift, _stack

__all__ = ["apply_body", "closure_convert", "custom_jvp"]


# ---- tracing a rule ----


class _RuleBuilder(FragmentBuilder):
    """The builder of a rule being traced: any value of another trace it reads becomes an input
    (the op's builder reads it as a fixed operand, by its key)."""

    def __init__(self):
        super().__init__(prefix="r")
        self.trace = None
        self.captured: dict[int, Tracer] = {}
        self.capture_inputs: list[ValKey] = []
        self.capture_keys: list[ValKey] = []

    def capture(self, x: Tracer) -> Tracer:
        hit = self.captured.get(x._v)
        if hit is None:
            local = self.add_input(fresh_key(), x.aval)
            hit = Tracer(self.trace, self.store.global_of(local), x.aval)
            self.captured[x._v] = hit
            self.capture_inputs.append(hit.key)
            self.capture_keys.append(ValKey(x._v))
        return hit


def _trace_rule(fn: Callable, avals: Sequence[AbstractValue], what: str, check: Callable):
    """fn traced on fresh inputs of avals: fn(inputs) returns a list of output leaves (check
    turns fn's result into it, given the lift); returns (Body over caps + inputs, cap keys)."""
    builder = _RuleBuilder()
    try:
        with tracing(builder) as t:
            builder.trace = t.trace
            ins = [t.input(fresh_key(), av) for av in avals]
            prev = _core.body_enter(t.trace)
            try:
                out = fn(ins)
            finally:
                _core.body_exit(prev)
            flat = check(out, lambda x, av: _leaf(t.trace, x, av, what))
    finally:
        builder.trace = None  # trace -> builder -> trace: a cycle only the GC would free
    body = close_body([x.key for x in flat], builder.capture_inputs + [x.key for x in ins])
    return body, builder.capture_keys


def _leaf(trace, x, av: AbstractValue | None, what: str) -> Tracer:
    """A rule's output leaf as a traced value; a Python number (or None: zero) takes av's dtype
    and shape."""
    if av is not None and (x is None or isinstance(x, (bool, int, float, complex, SymbolicZero))):
        x = 0 if x is None or isinstance(x, SymbolicZero) else x
        return _lift(trace, np.broadcast_to(np.asarray(x, av.dtype), av.shape))
    try:
        return _lift(trace, x)
    except TypeError:
        raise TypeError(f"{what} must return arrays or tuples/lists/dicts of them, got "
                        f"{type(x).__name__}") from None


def _tree(x) -> str:
    return _tree_str(_flatten(x)[1])


# ---- the rules the ops hold ----

# One rule object per (decorated function, rule functions, static arguments, trees), by ids:
# equal calls in one trace give equal ops (CSE).  Emptied with the interner (its rules hold
# bodies); a rule whose functions are gone is replaced.
_rules: dict = {}
register_cache("custom_rules", _rules, holds_ids=True)


class _Live:
    """What a rule calls: the decorated function (its rules) and the static arguments.  Held
    strongly only by the outermost trace's builder while it is alive, so a rule (held by its
    op, which the interner's tables hold) keeps no user closure, and no traced value it closes
    over, alive after the trace: the interner can then be emptied (tidu.graph.memory)."""

    __slots__ = ("fn", "nondiff", "__weakref__")

    def __init__(self, fn, nondiff: dict):
        self.fn, self.nondiff = fn, nondiff


def _keep(live: _Live) -> None:
    s = _stack()
    if s:
        s[0].builder.__dict__.setdefault("_custom_rules_keep", []).append(live)


def _rule(cls, key, fn, nondiff, *args):
    """The rule for key (ids), or a new one if none is alive for these very objects."""
    hit = _rules.get(key)
    live = hit._live() if hit is not None else None
    if live is None or live.fn is not fn or any(live.nondiff[i] is not v
                                                for i, v in nondiff.items()):
        live = _Live(fn, nondiff)
        hit = _rules[key] = cls(live, *args)
    _keep(live)
    return hit


class _Rule:
    kind = ""

    def __init__(self, live: _Live, in_spec, out_spec, out_avals):
        self._live = weakref.ref(live)
        self.in_spec, self.out_spec, self.out_avals = in_spec, out_spec, tuple(out_avals)
        self.name = getattr(live.fn.fun, "__name__", "<function>")
        # fixed at creation (part of the rule's key): a cached body is used without the function
        self.symbolic_zeros = bool(getattr(live.fn, "symbolic_zeros", False))
        self._cache: dict = {}

    def _get(self) -> _Live:
        live = self._live()
        if live is None:
            raise RuntimeError(
                f"the rules of {self.kind} function {self.name} are no longer held: a fragment "
                f"holding it was differentiated after the trace that built it ended and the "
                f"function was freed; keep the decorated function alive, or trace again")
        return live

    @property
    def fn(self):
        return self._get().fn

    @property
    def nondiff(self) -> dict:
        return self._get().nondiff

    def args(self, leaves) -> list:
        """The diff arguments rebuilt from leaves (a list in argument order)."""
        return _unflatten(self.in_spec, leaves)

    def full_args(self, diff: list) -> list:
        """All arguments: the static (nondiff_argnums) ones at their positions."""
        out, it = [], iter(diff)
        for i in range(len(diff) + len(self.nondiff)):
            out.append(self.nondiff[i] if i in self.nondiff else next(it))
        return out

    def static(self) -> list:
        return [self.nondiff[i] for i in sorted(self.nondiff)]

    def check_outs(self, out, what: str) -> None:
        if _tree(out) != _tree_str(self.out_spec):
            raise TypeError(f"{what} must produce outputs with the same container (pytree) "
                            f"structure as the function {self.name}: expected "
                            f"{_tree_str(self.out_spec)}, got {_tree(out)}")


class _JVPRule(_Rule):
    kind = "custom_jvp"

    def jvp_body(self, avals, active=None):  # active: the nonzero tangents (symbolic_zeros)
        key = (avals, active) if self.symbolic_zeros and active is not None else avals
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._trace_jvp(avals, key[1] if key is not avals else None)
        return hit

    def _trace_jvp(self, avals, active):
        n = len(avals)
        rule = self.fn.jvp
        rname = getattr(rule, "__name__", "<rule>")

        def run(ins):
            tans = ins[n:] if active is None else \
                [t if a else SymbolicZero(av) for t, a, av in zip(ins[n:], active, avals)]
            primals, tangents = self.args(ins[:n]), self.args(tans)
            return rule(*self.static(), tuple(primals), tuple(tangents))

        def check(out, leaf):
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(f"Custom JVP rule must produce a pair (list or tuple of length "
                                f"two) representing primal and tangent outputs, but got {out}.")
            p, t = out
            if _tree(p) != _tree(t):
                raise TypeError(
                    f"Custom JVP rule {rname} for function {self.name} must produce primal and "
                    f"tangent outputs with equal container (pytree) structures, but got "
                    f"{_tree(p)} and {_tree(t)} respectively.")
            self.check_outs(p, f"Custom JVP rule {rname} for function {self.name}")
            ps = [leaf(x, av) for x, av in zip(_flatten(p)[0], self.out_avals)]
            ts = [leaf(x, av) for x, av in zip(_flatten(t)[0], self.out_avals)]
            for x, want in zip(ps, self.out_avals):
                if x.aval is not want:
                    raise TypeError(
                        f"Custom JVP rule must produce primal outputs with the same shapes and "
                        f"dtypes as the function {self.name}: expected {want}, got {x.aval}.")
            for x, want in zip(ts, self.out_avals):
                if x.aval is not want:
                    raise TypeError(
                        f"Custom JVP rule must produce primal and tangent outputs with "
                        f"corresponding shapes and dtypes. Expected {want} (tangent type of "
                        f"{want}) but got {x.aval}.")
            return ps + ts

        return _trace_rule(run, list(avals) * 2, f"the JVP rule of {self.name}", check)


# ---- the decorators ----


class _Custom:
    """What custom_jvp and custom_vjp share: the argument handling and the primal op."""

    op = None
    rule_cls = None
    caps_fixed = False  # values the function closes over get no tangent (lax.custom_root)

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(sorted(int(i) for i in nondiff_argnums))

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def _bind(self, args, kwargs) -> tuple:
        if kwargs:
            try:
                bound = inspect.signature(self.fun).bind(*args, **kwargs)
            except (TypeError, ValueError) as e:
                raise TypeError(f"{self.__name__}: {e}") from None
            if bound.kwargs:
                raise TypeError(f"{self.__name__}: keyword-only arguments are not supported by "
                                f"{type(self).__name__}")
            args = bound.args
        return tuple(args)

    def __call__(self, *args, **kwargs):
        self._check_defined()
        args = self._bind(args, kwargs)
        for i in self.nondiff_argnums:
            if i >= len(args):
                raise TypeError(f"{self.__name__}: nondiff_argnums={self.nondiff_argnums} but "
                                f"called with {len(args)} positional arguments")
        nondiff = {i: args[i] for i in self.nondiff_argnums}
        diff = [a for i, a in enumerate(args) if i not in nondiff]
        leaves, in_spec = _flatten(diff)
        outer = _outer_trace()
        if outer is None:  # called eagerly: run it under jit
            return _eager(lambda a: self(*_merge(nondiff, _unflatten(in_spec, a))), leaves)
        t = outer
        ins = [_lift(t, x) for x in leaves]

        def fn(*d):
            return self.fun(*_merge(nondiff, list(d)))

        bld, keys, flat, out_spec = _trace_body(t, fn, [x.aval for x in ins],
                                                lambda i: _unflatten(in_spec, i),
                                                f"the {type(self).__name__} function")
        if not flat:
            return _unflatten(out_spec, [])
        caps = list(bld.capture_list)
        cap_ids = [_origins(t, x._v) for x in caps]
        # values of enclosing traces the rules close over become operands too (unread by the
        # body): a rule traced later inside a loop body reads them through the op
        extra = []
        live = {id(tr) for tr in _stack()}
        for x in _closure_tracers(self._rule_fns(), nondiff):
            if id(x._t) not in live or x._t.store.local_of(x._v) < 0 or \
                    any(x._v in ids for ids in cap_ids):
                continue  # a value of a finished trace, or one the function captured
            try:
                xt = _lift(t, x)
            except (TypeError, ValueError):  # not a value of a trace around this one
                continue
            extra.append(xt)
            caps.append(xt)
            cap_ids.append(_origins(t, xt._v) | {x._v})
        body = close_body([x.key for x in flat],
                          bld.capture_inputs + [x.aval for x in extra] + keys)
        key = (type(self), id(self), tuple(map(id, self._rule_fns())), self.symbolic_zeros,
               tuple((i, id(v)) for i, v in sorted(nondiff.items())), _tree_str(in_spec),
               _tree_str(out_spec), body.out_avals)
        rule = _rule(self.rule_cls, key, self, nondiff, in_spec, out_spec,
                     [x.aval for x in flat])
        if self.op is CustomJVP:
            op = CustomJVP(body, rule, len(caps), self.caps_fixed, tuple(cap_ids))
        else:
            op = CustomVJP(body, rule, len(caps), tuple(cap_ids))
        outs = _emit_multi(t, op, caps + ins)
        return _unflatten(out_spec, outs)


def _origins(t, v: int) -> frozenset:
    """The ids of the values v (a value of trace t) stands for: itself and, where t is a
    control-flow body, the values of the traces around it it captures."""
    ids = {v}
    b = t.builder
    captured, outer = getattr(b, "captured", None), getattr(b, "outer", None)
    if captured and outer is not None:
        for orig, hit in captured.items():
            if hit._v == v:
                ids |= _origins(outer, orig)
    return frozenset(ids)


def _closure_tracers(fns, nondiff: dict) -> list[Tracer]:
    """Traced values the rule functions close over directly (a closure cell holding one, or a
    partial's argument) and the static arguments hold (in tuples, lists, dicts).  Containers in
    closure cells are not searched: one may hold values of finished traces (a list a rule
    appends its tangents to), whose ids are reused."""
    found: dict[int, Tracer] = {}

    def visit(v, depth):
        if isinstance(v, Tracer):
            found.setdefault(v._v, v)
        elif depth and isinstance(v, (tuple, list)):
            for y in v:
                visit(y, depth - 1)
        elif depth and isinstance(v, dict):
            for y in v.values():
                visit(y, depth - 1)

    for fn in fns:
        if isinstance(fn, functools.partial):
            visit(fn.args, 1)
            fn = fn.func
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                visit(cell.cell_contents, 0)
            except ValueError:  # an empty cell
                pass
    for v in nondiff.values():
        visit(v, 3)
    return list(found.values())


def _merge(nondiff: dict, diff: list) -> list:
    out, it = [], iter(diff)
    for i in range(len(diff) + len(nondiff)):
        out.append(nondiff[i] if i in nondiff else next(it))
    return out


class custom_jvp(_Custom):
    """``jax.custom_jvp``: a function with a custom JVP rule.

    Decorate ``f`` and give the rule with ``f.defjvp(f_jvp)``; ``f_jvp(primals, tangents)``
    (``f_jvp(*nondiff, primals, tangents)`` with ``nondiff_argnums``) returns
    ``(primal_out, tangent_out)``, the tangent linear in ``tangents``.  Reverse mode transposes
    the rule; tangents of arguments not differentiated are zeros.  The rule is traced once per
    argument shapes, the first time a transform asks for it, and may call ``f`` itself.

    Args:
        fun: the primal function (pytrees of arrays in and out).
        nondiff_argnums: positions of static arguments (functions, Python values) passed to the
            rule first and never differentiated.
    """

    op = CustomJVP
    rule_cls = _JVPRule

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        super().__init__(fun, nondiff_argnums)
        self.jvp, self.symbolic_zeros = None, False

    def _rule_fns(self):
        return (self.jvp,)

    def _check_defined(self):
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {self.__name__} using "
                                 f"defjvp.")

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        """Set the JVP rule ``jvp(primals, tangents) -> (primal_out, tangent_out)``; with
        ``symbolic_zeros`` an argument not differentiated has a ``SymbolicZero`` tangent."""
        self.jvp, self.symbolic_zeros = jvp, bool(symbolic_zeros)
        return jvp

    def defjvps(self, *jvps: Callable | None) -> None:
        """One rule per argument: ``jvp_i(tangent_i, primal_out, *primals)`` gives argument i's
        contribution to the output tangent (None: the output does not depend on argument i)."""
        if self.nondiff_argnums:
            raise TypeError("Can't use ``defjvps`` with ``nondiff_argnums``.")

        def jvp(primals, tangents):
            out = self(*primals)
            parts = [rule(t, out, *primals) for rule, t in zip(jvps, tangents)
                     if rule is not None]
            leaves, spec = _flatten(out)
            if not parts:
                return out, _unflatten(spec, [x * 0 for x in leaves])
            total = _flatten(parts[0])[0]
            for p in parts[1:]:
                total = [a + b for a, b in zip(total, _flatten(p)[0])]
            return out, _unflatten(spec, total)

        self.defjvp(jvp)


# ---- closure conversion ----


def closure_convert(fun: Callable, *example_args):
    """``jax.closure_convert``: ``(converted, consts)`` with ``converted(*args, *consts)`` equal
    to ``fun(*args)`` and ``consts`` the traced values fun closes over, made explicit (so a
    custom rule can differentiate with respect to them).  Outside a trace consts is empty."""
    outer = _outer_trace()
    if outer is None:
        return (lambda *a: fun(*a[:len(example_args)])), []
    t = outer
    leaves, spec = _flatten(list(example_args))
    ins = [_lift(t, x) for x in leaves]
    bld, keys, flat, out_spec = _trace_body(t, fun, [x.aval for x in ins],
                                            lambda i: _unflatten(spec, i), "the converted function")
    body = close_body([x.key for x in flat], bld.capture_inputs + keys)
    n = len(example_args)

    def converted(*args_and_consts):
        args, consts = args_and_consts[:n], args_and_consts[n:]
        a_leaves = _flatten(list(args))[0]
        return _unflatten(out_spec, apply_body(body, list(consts) + a_leaves))

    return converted, list(bld.capture_list)


def apply_body(body, values) -> list[Tracer]:
    """body's outputs on values (traced or not), inlined into the current trace."""
    t = _outer_trace()
    if t is None:
        return _eager(lambda v: apply_body(body, v), list(values))
    vals = [_lift(t, v) for v in values]
    for v, av in zip(vals, body.in_avals):
        if v.aval is not av:
            raise TypeError(f"closure_convert: the converted function was traced for {av}, "
                            f"called with {v.aval}")
    outs = inline_body(t.builder, body, [ValKey(v._v) for v in vals])
    return [Tracer(t, o.id, o.aval) for o in outs]
