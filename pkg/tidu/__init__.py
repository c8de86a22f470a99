"""tidu: graph-based automatic differentiation with a compiled core.

The pipeline: build -> resolve -> differentiate -> transpose -> materialize_merge -> compile -> eval.
"""

from __future__ import annotations

from pathlib import Path

from tidu.graph import (PRIMAL, AbstractValue, CompiledProgram, External, Fragment,
                        FragmentBuilder, GraphError, Linear, Local, MaterializedGraph, OpMode,
                        ResolvedView, ValKey, aval, compile, materialize_merge, program_cache,
                        resolve)
from tidu.tracing import (Tracer, abs, astype, broadcast_to, build, concatenate, conj, cos, dot,
                          exp, expm1, imag, iota, log, log1p, matmul, max, maximum, mean, minimum,
                          ones_like, power, real, reshape, rsqrt, sign, sin, spec, sqrt,
                          stop_gradient, sum, tanh, transpose, where, zeros_like)
from tidu import ops
from tidu.api import jit

__version__ = "0.1.0"

__all__ = [
    "AbstractValue", "CompiledProgram", "External", "Fragment", "FragmentBuilder", "GraphError",
    "Linear", "Local", "MaterializedGraph", "OpMode", "PRIMAL", "ResolvedView", "Tracer", "ValKey",
    "abs", "astype", "aval", "jit", "broadcast_to", "build", "compile", "concatenate", "conj", "cos", "dot",
    "exp", "expm1", "get_cmake_dir", "get_include", "imag", "iota", "log", "log1p",
    "materialize_merge", "matmul", "max", "maximum", "mean", "minimum", "ones_like", "ops", "power",
    "program_cache", "real", "reshape", "resolve", "rsqrt", "sign", "sin", "spec", "sqrt",
    "stop_gradient", "sum", "tanh", "transpose", "where", "zeros_like",
]


def get_include() -> str:
    """Directory of the C++ headers (<tidu/tidu.hpp>), installed inside the package."""
    installed = Path(__file__).parent / "include"
    if installed.is_dir():
        return str(installed)
    return str(Path(__file__).resolve().parents[2] / "cpp" / "include")


def get_cmake_dir() -> str:
    """Directory holding tiduConfig.cmake, for ``-Dtidu_DIR=...`` / ``find_package(tidu)``."""
    return str(Path(__file__).parent / "cmake")
