"""Functions of the numpy layer with their own JVP rule: ``call_with_jvp`` runs a function as
one ``CustomJVP`` op (tidu.ops.control_flow) whose JVP is a given rule, what ``td.custom_jvp``
does for users (the front end sits above this layer).  ``linalg.pinv`` and ``lstsq`` use it for
pinv's Golub-Pereyra derivative."""

from __future__ import annotations

from collections.abc import Callable

from tidu.graph import FragmentBuilder, ValKey
from tidu.graph.memory import register_cache
from tidu.ops.control_flow import CustomJVP, close_body, fresh_key
from tidu.trace.build import tracing
from tidu.trace.tracer import Tracer, _home, _lift, _trace_of

__all__ = ["call_with_jvp"]


def _trace(fn: Callable, avals) -> object:
    """fn (a list of inputs -> a list of outputs) traced into a closed Body."""
    b = FragmentBuilder(prefix="r")
    with tracing(b) as t:
        ins = [t.input(fresh_key(), av) for av in avals]
        outs = [t.lift(o) for o in fn(ins)]
    return close_body([o.key for o in outs], [x.key for x in ins])


class _Rule:
    """The rule object a CustomJVP op holds (tidu.ops.control_flow.custom): ``jvp(primals,
    tangents, *static)`` returns the outputs and their tangents (lists)."""

    kind = "custom_jvp"

    def __init__(self, name: str, jvp: Callable, static: tuple):
        self.name, self.jvp, self.static = name, jvp, static
        self._key = (name, jvp, static)
        self._cache: dict = {}

    def __eq__(self, other):
        return isinstance(other, _Rule) and other._key == self._key

    def __hash__(self):
        return hash(("numpy rule", self._key))

    def jvp_body(self, avals, active=None):
        hit = self._cache.get(avals)
        if hit is None:
            n = len(avals)

            def run(ins):
                outs, tans = self.jvp(ins[:n], ins[n:], *self.static)
                return list(outs) + list(tans)

            hit = self._cache[avals] = (_trace(run, list(avals) * 2), ())
        return hit


_rules: dict = {}  # rules hold bodies: emptied with the interner
register_cache("numpy_custom_rules", _rules, holds_ids=True)


def call_with_jvp(name: str, fn: Callable, jvp: Callable, static: tuple, *args) -> list[Tracer]:
    """``fn(*args, *static)`` (a list of arrays) as one op whose JVP is ``jvp(primals,
    tangents, *static) -> (outputs, tangents)``; the rule may call this function again (its
    derivatives to any order are the rule's).  ``static`` is hashable."""
    t = _trace_of(*args)
    xs = [_lift(t, a) for a in args]
    avals = tuple(x.aval for x in xs)
    key = (name, fn, jvp, static)
    rule = _rules.get(key)
    if rule is None:
        rule = _rules[key] = _Rule(name, jvp, static)
    body = rule._cache.get(("body", avals))
    if body is None:
        body = rule._cache[("body", avals)] = _trace(lambda ins: fn(*ins, *static), avals)
    home = _home(t)
    if home is not t:
        t, xs = home, [_lift(home, x) for x in xs]
    locals_ = t.builder.add_op(CustomJVP(body, rule, 0), [ValKey(x._v) for x in xs])
    outs = [ValKey(t.store.global_of(local)) for local in locals_]
    return [Tracer(t, v.id, v.aval) for v in outs]
