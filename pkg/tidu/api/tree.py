"""The pytree convention the transforms share (compiled in tidu._core, pyx/api/tree.pxi): a
function's arguments flattened to leaves, and its output structure rebuilt over flat values.  It is
jax's: tuples, lists, dicts (keys sorted), None (no children), NamedTuples, OrderedDicts,
defaultdicts and classes registered with ``td.tree_util`` are nodes; everything else is a leaf.
``td.tree_util`` (tidu.api.tree_util) is the public face of the same walk."""

from __future__ import annotations

from tidu._native import _core
from tidu.api.tree_util import check_leaves

__all__ = ["check_leaves", "flatten_args", "unflatten"]

flatten_args = _core.flatten_args  # (args) -> (leaves in order, tree)
unflatten = _core.unflatten  # (tree, flat values) -> the tree over them
