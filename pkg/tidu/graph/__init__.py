"""The graph engine (the seeds' computegraph): identity, fragments, resolve, materialize_merge and
compile's SSA arrays.

Everything structural lives in the C++ core (``tidu._core``): values and ops are hash-consed to
dense 32-bit ids there, fragments store ids, and traversal, materialize and compile run there.
This layer gives those ids a Python face and owns the hashable objects the core only sees as
integers: InputKeys, op instances, modes and abstract values. It is generic: it names no
primitive, knows nothing of differentiation and imports no other tidu layer.
"""

from __future__ import annotations

from tidu.graph.compile import Executable, ProgramCache, compile_arrays, program_cache
from tidu.graph.dtypes import AbstractValue, aval, aval_of
from tidu.graph.dtypes import _aval_list as _aval_list  # the tracer and the transforms index it
from tidu.graph.fragment import Fragment, FragmentBuilder, shape_rule
from tidu.graph.keys import (
                             PRIMAL,
                             External,
                             GraphError,
                             GraphOp,
                             Linear,
                             Local,
                             OpMode,
                             ValKey,
                             ValRef,
                             input_key_id,
                             input_key_ids,
                             mode_id,
                             mode_of,
                             prim_id,
                             prim_of,
)
from tidu.graph.view import MaterializedGraph, ResolvedView, ValDef, materialize_merge, resolve

__all__ = [
    "PRIMAL", "AbstractValue", "Executable", "External", "Fragment", "FragmentBuilder",
    "GraphError", "GraphOp", "Linear", "Local", "MaterializedGraph", "OpMode", "ProgramCache",
    "ResolvedView", "ValDef", "ValKey", "ValRef", "aval", "aval_of", "compile_arrays",
    "input_key_id", "input_key_ids", "materialize_merge", "mode_id", "mode_of", "prim_id",
    "prim_of", "program_cache", "resolve", "shape_rule",
]
