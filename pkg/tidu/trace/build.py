"""build: trace a Python function into a primal fragment; input specs and the tracing context
the transforms use."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from tidu._native import _core
from tidu.graph import AbstractValue, Fragment, FragmentBuilder, aval, input_key_ids
from tidu.graph.memory import at_safe_point
from tidu.trace.effects import has_effects, tie
from tidu.trace.tracer import _PY_SCALARS, Tracer, _emit, _lift, _Trace, _trace_of

__all__ = ["apply", "as_aval", "build", "flatten_outputs", "mark_weak", "spec", "tracing"]


def spec(shape: Sequence[int] | int = (), dtype: Any = "float64") -> AbstractValue:
    """The abstract value (shape, dtype) of an input."""
    return aval(shape, dtype)


def as_aval(s) -> AbstractValue:
    """An input spec: an AbstractValue, or anything with .shape and .dtype (arrays too)."""
    if isinstance(s, AbstractValue):
        return s
    if isinstance(s, _PY_SCALARS):
        return aval((), np.result_type(s))
    if hasattr(s, "shape") and hasattr(s, "dtype"):
        return aval(tuple(s.shape), s.dtype)
    raise TypeError(f"input spec must be tidu.spec(shape, dtype) or an array, got {s!r}")


_WEAK_TYPES = (int, float, complex)


def mark_weak(tracers: Sequence[Tracer], leaves: Sequence) -> None:
    """Each tracer standing for a Python int, float or complex leaf (a bool and numpy's scalar
    types are strong) becomes weakly typed, as jax's arguments: promotion lets the other
    operand's dtype win. The program depends on it only through what tracing emitted, and
    jit's signature keys a Python scalar by its type, apart from an array of its dtype."""
    for tr, x in zip(tracers, leaves):
        if type(x) in _WEAK_TYPES:
            tr.weak_type = True


class tracing(_core.TraceScope):
    """Context manager: a trace over `builder` is current inside the block (entering and leaving
    are _core.TraceScope's: the trace stack, the count of open traces and the paused GC change
    together, even under Ctrl-C)."""

    def __init__(self, builder: FragmentBuilder, concrete=None):
        self.trace = _Trace(builder, concrete)

    def input(self, key: Hashable, av: AbstractValue) -> Tracer:
        local = self.trace.builder.add_input(key, av)
        return Tracer(self.trace, self.trace.store.global_of(local), av)

    def inputs(self, keys: Sequence[Hashable], avals: Sequence[AbstractValue]) -> list[Tracer]:
        """input() of each (key, aval) pair, declared in one pass."""
        return _core.input_tracers(self.trace, input_key_ids(keys), [av.id for av in avals])

    def lift(self, x) -> Tracer:
        return _lift(self.trace, x)


def flatten_outputs(t: tracing, out) -> tuple[list[Tracer], Any]:
    """Tracers of fn's result (a value or a nested tuple/list/dict of them) and its structure
    (compiled: _core.flatten_outputs); t is a tracing context (its trace and lift)."""
    flat, tree = _core.flatten_outputs(t.trace, out, t.lift)
    if has_effects(t.trace):  # a debug callback ran: every output waits for it (trace.effects)
        flat = tie(t.trace, flat)
    return flat, tree


def build(fn: Callable, inputs: dict | None = None, **specs) -> Fragment:
    """Trace fn into a primal fragment.

    Args:
        fn: a Python function of traced values.  With keyword specs (string keys), fn is called
            with those keywords; with ``inputs={key: spec}`` (any hashable keys) positionally in
            dict order.
        inputs: {InputKey: spec} for keys that are not Python identifiers.
        **specs: name=tidu.spec(shape, dtype) per input.

    Returns:
        A Fragment whose ``outputs`` are the keys of fn's results (flattened).

    Raises:
        TypeError, ValueError: a shape or dtype rule failed (the message names the primitive).
    """
    if inputs is not None and specs:
        raise TypeError("build: give inputs either as inputs={...} or as keywords, not both")
    items = list((inputs or specs).items())
    at_safe_point()  # a top-level trace: memory of dropped graphs may go back first
    builder = FragmentBuilder(prefix="p")
    with tracing(builder) as t:
        tracers = [t.input(k, as_aval(s)) for k, s in items]
        if inputs is None:
            out = fn(**{k: x for (k, _), x in zip(items, tracers)})
        else:
            out = fn(*tracers)
        flat, _ = flatten_outputs(t, out)
    return builder.build([x.key for x in flat])


def apply(op, *args) -> Tracer:
    """Apply a primitive instance (e.g. a user-defined one) to traced values or constants."""
    t = _trace_of(*args)
    return _emit(t, op, *[_lift(t, a) for a in args])
