# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: language = c++
"""Cython bindings over the C++ graph core: the global key interner, fragment storage, views,
traversal, materialize and SSA compile, and the tracer's hot path (trace/tracer.pxi).  Many small
calls come through here, so each is thin."""

# One extension module, tidu._core, as a spine of textual includes (as pyarrow's lib.pyx): each
# .pxi is a layer of pkg/tidu (LAYOUT.md) and is compiled in this one unit, in this order.  The
# C++ declarations are in graph/graph.pxd and ad/rule_cache.pxd (cimported as `graph` and
# `rule_cache`: CMakeLists.txt puts pyx/graph and pyx/ad on Cython's include path).

include "graph/keys.pxi"
include "graph/fragment.pxi"
include "backends/encode.pxi"
include "ad/rules.pxi"

# ---- tracing (tidu.trace's Tracer and its hot path) ----

include "trace/tracer.pxi"

# ---- the transforms' per-call work (tidu.api) ----

include "api/tree.pxi"
include "api/jit.pxi"

# ---- giving memory back (tidu.graph.memory) ----

include "graph/memory.pxi"
