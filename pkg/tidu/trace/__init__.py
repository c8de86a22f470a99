"""Python -> fragment (DESIGN's build): the Tracer, the trace stack, emitting primitives with
numpy's promotion and broadcasting made explicit, and ``build``."""

from __future__ import annotations

from tidu.trace.build import apply, as_aval, build, flatten_outputs, spec, tracing
from tidu.trace.tracer import Tracer

__all__ = ["Tracer", "apply", "as_aval", "build", "flatten_outputs", "spec", "tracing"]
