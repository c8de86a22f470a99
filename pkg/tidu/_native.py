"""The compiled modules, as the Python layers import them: ``_core`` (Cython: interning, fragment
storage, traversal, materialize, compile, the tracer) and ``_eval`` (pybind11: the interpreter).

They sit below every layer. Static import analysis (import-linter, the cycle count) reads .py
files only and would record ``from tidu import _core`` as an import of the package face, which
imports every layer; loading them here through importlib lets each layer import this leaf module
instead, and the layer graph the tools see is the real one."""

from __future__ import annotations

import importlib

__all__ = ["_core", "_eval"]

_core = importlib.import_module("tidu._core")
_eval = importlib.import_module("tidu._eval")
