"""``td.tree_util``: jax.tree_util's functions over tidu's one pytree convention.

The convention is jax's, and every transform (jit, grad, vjp, jvp, vmap's in_axes and out_axes,
scan/cond/while carries, jacfwd/jacrev/hessian, linearize) uses it: tuples, lists, dicts (keys
sorted), ``None`` (a node with no children), NamedTuples, OrderedDicts (keys in their order),
defaultdicts and classes registered here are nodes; every other object is a leaf.  Node types are
exact types: a subclass of dict that is not registered is a leaf.  The walk itself is compiled
(``pyx/api/tree.pxi``); this module adds the PyTreeDef object, key paths and registration."""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict as _OrderedDict
from collections import defaultdict as _defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from tidu._native import _core
from tidu.graph.dtypes import _DTYPES
from tidu.trace.tracer import Tracer

__all__ = [
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "PyTreeDef",
    "SequenceKey",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "tree_all",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_structure",
    "tree_unflatten",
    "treedef_is_leaf",
]

# node kinds, as _core.node_kind gives them
_LEAF, _TUPLE, _LIST, _DICT, _NONE, _NAMEDTUPLE, _ODICT, _DDICT, _CUSTOM = range(9)


# ---- key paths ----

@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """The i-th child of a tuple or list."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    """The child of a dict (OrderedDict, defaultdict) at key."""

    key: Any

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """The attribute name of a NamedTuple or registered dataclass."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """The key-th child of a registered node without keys of its own."""

    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


def keystr(keys, *, simple: bool = False, separator: str = "") -> str:
    """A key path as text: ``['a'][0].x`` (simple: ``a/0/x`` with separator "/")."""
    if not simple:
        return separator.join(str(k) for k in keys)
    parts = []
    for k in keys:
        v = next(iter(dataclasses.asdict(k).values())) if dataclasses.is_dataclass(k) else k
        parts.append(str(v))
    return separator.join(parts)


def _keyed_children(x, kind: int):
    """(list of (key, child), aux) of a node x of this kind, aux as the compiled walk makes it."""
    if kind in (_TUPLE, _LIST):
        return [(SequenceKey(i), c) for i, c in enumerate(x)], None
    if kind == _NAMEDTUPLE:
        return [(GetAttrKey(f), c) for f, c in zip(x._fields, x)], None
    if kind == _NONE:
        return [], None
    if kind in (_DICT, _DDICT, _ODICT):
        keys = tuple(x) if kind == _ODICT else _core.sorted_keys(x)
        aux = (x.default_factory, keys) if kind == _DDICT else keys
        return [(DictKey(k), x[k]) for k in keys], aux
    flatten, _, with_keys = _core.custom_node(type(x))
    if with_keys is not None:
        pairs, aux = with_keys(x)
        return [(k, c) for k, c in pairs], aux
    children, aux = flatten(x)
    return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], aux


def _walk_with_path(x, path: tuple, out: list, is_leaf) -> None:
    kind = _core.node_kind(type(x))
    if kind == _LEAF or (is_leaf is not None and is_leaf(x)):
        out.append((path, x))
        return
    for k, c in _keyed_children(x, kind)[0]:
        _walk_with_path(c, path + (k,), out, is_leaf)


def tree_leaves_with_path(tree, is_leaf: Callable[[Any], bool] | None = None) -> list:
    """[(key path, leaf)] in leaf order."""
    out: list = []
    _walk_with_path(tree, (), out, is_leaf)
    return out


def tree_flatten_with_path(tree, is_leaf: Callable[[Any], bool] | None = None):
    """([(key path, leaf)], PyTreeDef)."""
    return tree_leaves_with_path(tree, is_leaf), tree_structure(tree, is_leaf)


# ---- PyTreeDef ----

def _node_repr(t) -> str:
    if t is None:
        return "*"
    kind, children = t[0], t[1]
    inner = ", ".join(_node_repr(c) for c in children)
    if kind is tuple:
        return f"({inner}{',' if len(children) == 1 else ''})"
    if kind is list:
        return f"[{inner}]"
    if kind is dict:
        return "{" + ", ".join(f"{k!r}: {_node_repr(c)}" for k, c in zip(t[2], children)) + "}"
    if kind is type(None):
        return "None"
    if _core.node_kind(kind) == _NAMEDTUPLE:
        return f"CustomNode(namedtuple[{kind.__name__}], [{inner}])"
    return f"CustomNode({kind.__name__}[{t[2]}], [{inner}])"


class PyTreeDef:
    """A pytree's structure (jax.tree_util.PyTreeDef): equal, hashable, with ``num_leaves``,
    ``num_nodes`` and ``unflatten``."""

    __slots__ = ("_n", "_tree")

    def __init__(self, tree, num_leaves: int | None = None):
        self._tree = tree
        self._n = _core.tree_size(tree)[0] if num_leaves is None else num_leaves

    @property
    def num_leaves(self) -> int:
        return self._n

    @property
    def num_nodes(self) -> int:
        return _core.tree_size(self._tree)[1]

    def unflatten(self, leaves: Iterable) -> Any:
        """The tree of this structure over leaves (as many as num_leaves)."""
        if type(leaves) is not list:
            leaves = list(leaves)
        if len(leaves) != self._n:
            many = "many" if len(leaves) > self._n else "few"
            raise ValueError(f"Too {many} leaves for PyTreeDef; expected {self._n}, "
                             f"got {len(leaves)}")
        return _core.unflatten(self._tree, leaves)

    def flatten_up_to(self, tree) -> list:
        """The subtrees of tree at this structure's leaves (this is a prefix of tree's); a
        ValueError names the first place where they differ."""
        out: list = []
        _up_to(self._tree, tree, (), out, "tree")
        return out

    def __eq__(self, other) -> bool:
        return isinstance(other, PyTreeDef) and self._tree == other._tree

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._tree)

    def __repr__(self) -> str:
        return f"PyTreeDef({_node_repr(self._tree)})"


def _type_name(kind) -> str:
    return "None" if kind is type(None) else kind.__name__


def _up_to(t, x, path: tuple, out: list, what: str) -> None:
    if t is None:
        out.append(x)
        return
    kind = t[0]
    where = keystr(path) or "the root"
    if type(x) is not kind:
        raise ValueError(f"pytree structure error: {what} has a {_type_name(type(x))} at "
                         f"{where} (expected a {_type_name(kind)})")
    pairs, aux = _keyed_children(x, _core.node_kind(kind))
    if len(pairs) != len(t[1]) or (len(t) == 3 and aux != t[2]):
        raise ValueError(f"pytree structure error: {what}'s {_type_name(kind)} at {where} has "
                         f"{_node_data(kind, aux, len(pairs))} (expected "
                         f"{_node_data(kind, t[2] if len(t) == 3 else None, len(t[1]))})")
    for (k, c), sub in zip(pairs, t[1]):
        _up_to(sub, c, path + (k,), out, what)


def _node_data(kind, aux, n: int) -> str:
    if kind in (dict, _OrderedDict):
        return f"keys {list(aux)}"
    if kind is _defaultdict:
        return f"keys {list(aux[1])}"
    if aux is None:
        return f"{n} children"
    return f"{n} children and metadata {aux!r}"


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    return treedef._tree is None


# ---- flatten, unflatten, map ----

def tree_flatten(tree, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, PyTreeDef]:
    """(leaves in order, PyTreeDef); is_leaf(x) True makes x a leaf."""
    leaves, t = _core.tree_flatten(tree, is_leaf)
    return leaves, PyTreeDef(t, len(leaves))


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable) -> Any:
    """The tree of structure treedef over leaves."""
    return treedef.unflatten(leaves)


def tree_leaves(tree, is_leaf: Callable[[Any], bool] | None = None) -> list:
    """The leaves of tree, in order."""
    return _core.tree_leaves(tree, is_leaf)


def tree_structure(tree, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    """The PyTreeDef of tree."""
    return PyTreeDef(_core.tree_flatten(tree, is_leaf)[1])


def tree_map(f: Callable, tree, *rest, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """f applied leaf by leaf: ``f(x, *ys)`` for each leaf x of tree and the subtrees ys of rest
    at the same place (each of rest has tree's structure, or tree's as a prefix)."""
    leaves, t = _core.tree_flatten(tree, is_leaf)
    if not rest:
        return _core.unflatten(t, [f(x) for x in leaves])
    treedef = PyTreeDef(t, len(leaves))
    others = [treedef.flatten_up_to(r) for r in rest]
    return _core.unflatten(t, [f(*xs) for xs in zip(leaves, *others)])


def tree_map_with_path(f: Callable, tree, *rest,
                       is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """f(key path, x, *ys) for each leaf x of tree (tree_map with each leaf's path)."""
    pairs = tree_leaves_with_path(tree, is_leaf)
    treedef = tree_structure(tree, is_leaf)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten([f(p, x, *ys) for (p, x), *ys in zip(pairs, *others)])


_NO_INITIAL = object()


def tree_reduce(function: Callable, tree, initializer: Any = _NO_INITIAL,
                is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """functools.reduce over the leaves of tree."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIAL:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every leaf of tree is true."""
    return all(tree_leaves(tree, is_leaf))


# ---- registration ----

def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable,
                         flatten_with_keys_func: Callable | None = None) -> None:
    """Make nodetype a pytree node, as jax's: ``flatten_func(x) -> (children, aux_data)`` and
    ``unflatten_func(aux_data, children) -> x``.  aux_data is part of the transforms' cache keys:
    it must be hashable and compare equal for equal structures.

    Raises:
        ValueError: nodetype is already a node (a built-in or a registered one).
    """
    _core.register_node(nodetype, flatten_func, unflatten_func, flatten_with_keys_func)


def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable,
                              unflatten_func: Callable,
                              flatten_func: Callable | None = None) -> None:
    """register_pytree_node with ``flatten_with_keys(x) -> ([(key, child)], aux_data)``, whose
    keys name the children in key paths (and errors)."""
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: cls's ``tree_flatten()`` and classmethod ``tree_unflatten(aux, children)``
    make it a pytree node."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_dataclass(nodetype: type, data_fields=None, meta_fields=None,
                       drop_fields=()) -> type:
    """Make a class (a @dataclass, or any class with these fields as attributes and a keyword
    constructor) a pytree node whose children are data_fields and whose meta_fields are static
    (part of the structure: hashable).  For a dataclass both default to its fields: those with
    ``field(metadata={"static": True})`` are meta, the others data (jax's rule).  Usable as a
    decorator.  Rebuilt as nodetype(**fields)."""
    if data_fields is None and meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(f"register_dataclass: {nodetype.__name__} is not a dataclass; pass "
                            f"data_fields and meta_fields")
        fields = [f for f in dataclasses.fields(nodetype) if f.init and f.name not in drop_fields]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    elif data_fields is None or meta_fields is None:
        raise TypeError("register_dataclass: pass both data_fields and meta_fields, or neither")
    data, meta = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init}
        missing = init - set(data) - set(meta) - set(drop_fields)
        if missing:
            raise ValueError(f"register_dataclass: {nodetype.__name__}'s init fields "
                             f"{sorted(missing)} are neither data_fields nor meta_fields")

    def flatten(x):
        return [getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta)

    def flatten_with_keys(x):
        return [(GetAttrKey(n), getattr(x, n)) for n in data], \
            tuple(getattr(x, n) for n in meta)

    def unflatten(aux, children):
        return nodetype(**dict(zip(data, children)), **dict(zip(meta, aux)))

    register_pytree_node(nodetype, flatten, unflatten, flatten_with_keys)
    return nodetype


# ---- leaves the transforms take ----

def _leaf_problem(x) -> str | None:
    """Why x cannot be a transform's argument leaf (an array or a Python/numpy scalar of a
    dtype tidu supports); None when it can."""
    if isinstance(x, (Tracer, bool, int, float, complex, np.generic)):
        dt = getattr(x, "dtype", None)
        if dt is None or np.dtype(dt) in _DTYPES or isinstance(x, Tracer):
            return None
        return f"has dtype {np.dtype(dt)}"
    if isinstance(x, (str, bytes)):
        return f"is a {type(x).__name__}"
    dt = getattr(x, "dtype", None)
    if dt is None or not hasattr(x, "shape"):
        name = type(x).__name__
        return f"is {'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"
    try:
        dt = np.dtype(dt)
    except TypeError:
        return f"is a {type(x).__name__} of dtype {dt}"
    if dt.newbyteorder("=") not in _DTYPES:
        return f"is an array of dtype {dt}"
    return None


def arg_path(path: tuple, names=None) -> str:
    """A leaf's path through a function's positional arguments as the user wrote them:
    ``params['w2']`` (names: the parameters' names), ``args[1]['w2']`` without them."""
    if not path or not isinstance(path[0], SequenceKey):
        return "argument " + (keystr(path) or "")
    i = path[0].idx
    head = names[i] if names is not None and i < len(names) else f"args[{i}]"
    return f"argument {head}{keystr(path[1:])}"


def check_leaves(what: str, args: tuple, names=None) -> None:
    """Raise a TypeError naming the first leaf of args (a function's positional arguments) that
    a transform cannot trace, with its path; return when every leaf is an array or scalar."""
    for path, x in tree_leaves_with_path(tuple(args)):
        why = _leaf_problem(x)
        if why is None:
            continue
        if why.startswith(("has dtype", "is an array of dtype")):
            raise TypeError(f"{what}: {arg_path(path, names)} {why}; tidu supports "
                            f"{', '.join(sorted(d.name for d in _DTYPES))}")
        static = "pass it as a static argument (static_argnums/static_argnames), " \
            if what.startswith("td.jit") else ""
        raise TypeError(f"{what}: {arg_path(path, names)} {why}; the leaves of a transformed "
                        f"function's arguments must be arrays or scalars: {static}close over it, "
                        f"or make its class a pytree node with td.tree_util.register_pytree_node "
                        f"(td.tree_util.register_dataclass for a dataclass)")
