"""Structured control flow: primitives that hold a sub-program (a *body*) as a static attribute.

A :class:`Body` is a closed Fragment: its inputs are the canonical keys ``BodyArg(0..n-1)``, it
references nothing outside itself (values a traced body closes over become explicit operands of
the op), and its identity is the pair (interned input ids, interned output ids).  Values are
hash-consed, so two bodies traced from equal functions at equal abstract values are the same
Body, and the ops holding them are one interned op: CSE and the program cache see through them.

Primitives: :class:`Scan` (``scan.py``), :class:`Cond` and :class:`Checkpoint` (``cond.py``),
:class:`While` (``while_loop.py``), :class:`CustomJVP`, :class:`CustomVJP` and
:class:`CustomLinear` (``custom.py``), :class:`ReduceWindowGeneral` (``reduce_window.py``);
the bodies and their shared rules are in ``body.py``.

Evaluation: the interpreter runs each body as its own compiled program (docs/control_flow.md);
XLA lowers to ``stablehlo.while`` / ``stablehlo.case`` / ``stablehlo.reduce_window``.
"""

from __future__ import annotations

from tidu.ops.control_flow.body import Body, BodyArg, batch_body, close_body, fresh_key, lower_body
from tidu.ops.control_flow.cond import Checkpoint, Cond
from tidu.ops.control_flow.custom import (
    CustomJVP,
    CustomLinear,
    CustomVJP,
    CustomVJPLin,
    inline_body,
)
from tidu.ops.control_flow.reduce_window import ReduceWindowGeneral
from tidu.ops.control_flow.scan import Scan
from tidu.ops.control_flow.while_loop import ReverseModeUnsupported, While

__all__ = ["Body", "BodyArg", "Checkpoint", "Cond", "CustomJVP", "CustomLinear", "CustomVJP",
           "CustomVJPLin", "ReduceWindowGeneral", "ReverseModeUnsupported", "Scan", "While",
           "batch_body", "close_body", "fresh_key", "inline_body", "lower_body"]

# their public home, as before the split (reprs, pickles)
for _cls in (Checkpoint, Cond, CustomJVP, CustomLinear, CustomVJP, CustomVJPLin,
             ReduceWindowGeneral, Scan, While):
    _cls.__module__ = __name__
