"""The pytree convention the transforms share (compiled in tidu._core): a function's arguments
flattened to leaves, and its output structure rebuilt over flat values. Tuples, lists, dicts (in
insertion order), NamedTuples and None (no children, as in jax) are nodes; everything else is a
leaf."""

from __future__ import annotations

from tidu._native import _core

__all__ = ["flatten_args", "unflatten"]

flatten_args = _core.flatten_args  # (args) -> leaves, in order
unflatten = _core.unflatten  # a function's output structure over flat values
