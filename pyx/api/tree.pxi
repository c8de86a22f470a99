# Included by _core.pyx: the pytree convention every transform shares (jax's), compiled because it
# runs on every call of a transformed function with nested arguments, and in td.tree_util.
#
# A tree is None for a leaf, or a tuple for a node:
#   (kind, children)       tuple, list, a NamedTuple class, NoneType (no children)
#   (kind, children, aux)  dict (aux: its keys, sorted), OrderedDict (keys in order),
#                          defaultdict ((default_factory, sorted keys)), a registered class
#                          (aux: what its flatten function returned beside the children)
# with children a tuple of trees.  Trees are hashable when every aux is: they are part of the
# transforms' cache keys.  Node types are exact types, as in jax: a subclass of dict that is not
# registered is a leaf.

from collections import OrderedDict as _OrderedDict
from collections import defaultdict as _defaultdict

cdef object _NoneType = type(None)
# None is a pytree node with no children, as in jax (unflatten rebuilds it: NoneType() is None)
cdef tuple _NONE_TREE = (_NoneType, ())

# node kinds (tidu.api.tree_util reads them through node_kind)
cdef enum:
    K_LEAF = 0
    K_TUPLE = 1
    K_LIST = 2
    K_DICT = 3
    K_NONE = 4
    K_NAMEDTUPLE = 5
    K_ODICT = 6
    K_DDICT = 7
    K_CUSTOM = 8

# exact type -> kind, memoised for leaf types and NamedTuple classes as they are met
cdef dict _kinds = {tuple: K_TUPLE, list: K_LIST, dict: K_DICT, _NoneType: K_NONE,
                    _OrderedDict: K_ODICT, _defaultdict: K_DDICT}
# registered type -> (flatten, unflatten, flatten_with_keys or None)
cdef dict _custom = {}


cdef inline int _kind_of(object t):
    cdef object k = _kinds.get(t)
    if k is not None:
        return <int>k
    if issubclass(t, tuple) and hasattr(t, "_fields"):
        kind = K_NAMEDTUPLE
    else:
        kind = K_LEAF
    _kinds[t] = kind
    return kind


def node_kind(t):
    """The pytree kind of type t: 0 leaf, 1 tuple, 2 list, 3 dict, 4 None, 5 NamedTuple,
    6 OrderedDict, 7 defaultdict, 8 registered."""
    return _kind_of(t)


def register_node(t, flatten, unflatten, flatten_with_keys):
    """Make type t a pytree node (tidu.tree_util.register_pytree_node)."""
    if not isinstance(t, type):
        raise TypeError(f"register_pytree_node takes a type, got {t!r}")
    if _kind_of(t) != K_LEAF:
        raise ValueError(f"Duplicate custom PyTreeDef type registration for {t}: "
                         f"{t.__name__} is already a pytree node")
    _custom[t] = (flatten, unflatten, flatten_with_keys)
    _kinds[t] = K_CUSTOM


def custom_node(t):
    """(flatten, unflatten, flatten_with_keys) of a registered type t."""
    return _custom[t]


cdef tuple _sorted_keys(object d):
    try:
        return tuple(sorted(d))
    except TypeError:
        raise ValueError(
            f"Comparator raised exception while sorting pytree dictionary keys: tidu sorts a "
            f"dict's keys, as jax does, and keys of types "
            f"{sorted({type(k).__name__ for k in d})} do not compare; use keys of one type "
            f"(or an OrderedDict, which keeps its order)") from None


def sorted_keys(d):
    """A dict's keys in pytree order (sorted, as jax's)."""
    return _sorted_keys(d)


cdef object _flatten_into(object x, list leaves, object is_leaf):
    """Appends x's leaves; returns x's tree (None for a leaf)."""
    cdef list trees
    cdef tuple keys
    cdef int kind
    t = type(x)
    if t is cnp.ndarray or t is float or t is Tracer:
        leaves.append(x)
        return None
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return None
    kind = _kind_of(t)
    if kind == K_LEAF:
        leaves.append(x)
        return None
    if kind == K_NONE:
        return _NONE_TREE
    trees = []
    if kind == K_TUPLE or kind == K_LIST or kind == K_NAMEDTUPLE:
        for a in x:
            ta = type(a)
            if (ta is cnp.ndarray or ta is float or ta is Tracer) and is_leaf is None:
                leaves.append(a)
                trees.append(None)
            else:
                trees.append(_flatten_into(a, leaves, is_leaf))
        return (t, tuple(trees))
    if kind == K_DICT or kind == K_DDICT:
        keys = _sorted_keys(x)
        for k in keys:
            trees.append(_flatten_into(x[k], leaves, is_leaf))
        return (t, tuple(trees), keys if kind == K_DICT else (x.default_factory, keys))
    if kind == K_ODICT:
        keys = tuple(x)
        for k in keys:
            trees.append(_flatten_into(x[k], leaves, is_leaf))
        return (t, tuple(trees), keys)
    children, aux = _custom[t][0](x)
    for a in children:
        trees.append(_flatten_into(a, leaves, is_leaf))
    return (t, tuple(trees), aux)


def flatten_args(args):
    """Leaves (arrays/scalars) of positional args that may be pytrees, and their tree
    (hashable: it is part of the transforms' cache keys)."""
    cdef list leaves = []
    tree = _flatten_into(args, leaves, None)
    return leaves, tree


def tree_flatten(x, is_leaf=None):
    """(leaves, tree) of any pytree; is_leaf(x) True stops the walk at x."""
    cdef list leaves = []
    tree = _flatten_into(x, leaves, is_leaf)
    return leaves, tree


def tree_leaves(x, is_leaf=None):
    cdef list leaves = []
    _flatten_into(x, leaves, is_leaf)
    return leaves


cdef object _unflatten_at(object tree, list flat, Py_ssize_t* pos):
    if tree is None:
        x = flat[pos[0]]
        pos[0] += 1
        return x
    kind = tree[0]
    cdef list vals = [_unflatten_at(c, flat, pos) for c in <tuple>tree[1]]
    if kind is tuple:
        return tuple(vals)
    if kind is list:
        return vals
    if kind is dict:
        return dict(zip(tree[2], vals))
    if kind is _NoneType:
        return None
    k = _kind_of(kind)
    if k == K_NAMEDTUPLE:
        return kind(*vals)
    if k == K_ODICT:
        return _OrderedDict(zip(tree[2], vals))
    if k == K_DDICT:
        return _defaultdict(tree[2][0], zip(tree[2][1], vals))
    return _custom[kind][1](tree[2], vals)


def unflatten(tree, flat):
    """A tree rebuilt over flat values (as many as it has leaves): per call of every transform
    with nested outputs, so compiled."""
    cdef Py_ssize_t pos = 0
    cdef list values = flat if type(flat) is list else list(flat)
    return _unflatten_at(tree, values, &pos)


cdef Py_ssize_t _count(object tree, Py_ssize_t* nodes):
    if tree is None:
        nodes[0] += 1
        return 1
    cdef Py_ssize_t n = 0
    nodes[0] += 1
    for c in <tuple>tree[1]:
        n += _count(c, nodes)
    return n


def tree_size(tree):
    """(number of leaves, number of nodes, leaves included) of a tree."""
    cdef Py_ssize_t nodes = 0
    n = _count(tree, &nodes)
    return n, nodes
