"""Effects of a trace: the tokens of its debug callbacks (``td.debug.print``,
``td.debug.callback``) and of the control-flow ops whose bodies hold one.

A callback takes the trace's current tokens as operands and its own token becomes the trace's
only one, so a trace's callbacks run in program order (the interpreter's scheduler and the memory
plan see the data dependence).  Whoever closes a trace ties its outputs to the tokens
(:func:`tie`, ``tidu.ops.callback.Tie``), so a callback runs whenever an output is asked for:
nothing a transform derives from the outputs (a gradient, a batched function) can drop it.
"""

from __future__ import annotations

from tidu.ops.callback import Tie
from tidu.trace.tracer import Tracer, _emit

__all__ = ["add_token", "body_effect", "has_effects", "mark_op", "tie", "tokens"]

_TIE = Tie()


def tokens(t) -> list[Tracer]:
    """The current effect tokens of trace t (empty when it has run no callback)."""
    return getattr(t.builder, "effect_tokens", None) or []


def has_effects(t) -> bool:
    return bool(getattr(t.builder, "effect_tokens", None))


def add_token(t, token: Tracer, *, replace: bool = False) -> None:
    """Record token in trace t: ``replace`` when it was computed after all the others."""
    t.builder.effect_tokens = [token] if replace else tokens(t) + [token]


def tie(t, flat: list[Tracer]) -> list[Tracer]:
    """flat (Tracers of t) tied to t's tokens: each output is computed after t's callbacks."""
    toks = tokens(t)
    if not toks:
        return flat
    return [_emit(t, _TIE, x, *toks) for x in flat]


def body_effect(outer, inner) -> None:
    """A body traced in ``inner`` had effects: the next multi-output op emitted into ``outer``
    (the control-flow op holding the body) becomes one of outer's tokens (``mark_op``)."""
    if has_effects(inner):
        outer.builder.pending_body_effect = True


def mark_op(t, outs: list[Tracer]) -> None:
    """After emitting a control-flow op into t: its first output is a token when a body of it
    had effects."""
    if outs and getattr(t.builder, "pending_body_effect", False):
        t.builder.pending_body_effect = False
        add_token(t, outs[0])
