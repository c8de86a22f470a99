"""td.tree_util against jax.tree_util: every node kind round-trips, with jax's leaf order,
structure (its PyTreeDef repr), key paths and errors."""

from __future__ import annotations

import collections
import dataclasses

import pytest

import tidu as td

jax = pytest.importorskip("jax")
jtu = jax.tree_util
tu = td.tree_util

Point = collections.namedtuple("Point", "x y")


@dataclasses.dataclass
class Params:
    w: object
    b: object
    name: str = dataclasses.field(default="p", metadata={"static": True})


tu.register_dataclass(Params)
jtu.register_dataclass(Params)


class Box:
    """A class registered with register_pytree_node_class (children a, b; aux: tag)."""

    def __init__(self, a, b, tag):
        self.a, self.b, self.tag = a, b, tag

    def tree_flatten(self):
        return (self.a, self.b), self.tag

    @classmethod
    def tree_unflatten(cls, tag, children):
        return cls(*children, tag)

    def __eq__(self, other):
        return type(other) is Box and (self.a, self.b, self.tag) == (other.a, other.b, other.tag)


tu.register_pytree_node_class(Box)
jtu.register_pytree_node_class(Box)

TREES = [
    1.0,
    None,
    (),
    [1, (2,)],
    {"b": 1, "a": [2, None], "c": {}},
    Point(1, None),
    collections.OrderedDict([("b", 1), ("a", 2)]),
    collections.defaultdict(list, {"b": 1, "a": 2}),
    Params(w=3, b=[4, 5], name="layer"),
    Box(6, {"z": 7, "y": None}, "tag"),
    {"p": Params(w=Point(1, 2), b=None), "box": [Box(3, (4,), 0)], "e": ()},
]


@pytest.mark.parametrize("tree", TREES, ids=lambda t: type(t).__name__)
def test_round_trip_matches_jax(tree):
    leaves, treedef = tu.tree_flatten(tree)
    j_leaves, j_treedef = jtu.tree_flatten(tree)
    assert leaves == j_leaves and [id(x) for x in leaves] == [id(x) for x in j_leaves]
    assert repr(treedef) == repr(j_treedef)
    assert (treedef.num_leaves, treedef.num_nodes) == (j_treedef.num_leaves, j_treedef.num_nodes)
    back = tu.tree_unflatten(treedef, leaves)
    assert type(back) is type(tree) and back == tree
    assert jtu.tree_structure(back) == j_treedef  # rebuilt as itself, in jax's order
    if isinstance(tree, dict):
        assert list(back) == list(jtu.tree_unflatten(j_treedef, j_leaves))
    paths = [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(tree)]
    assert paths == [jtu.keystr(p) for p, _ in jtu.tree_leaves_with_path(tree)]
    assert tu.tree_leaves(tree) == jtu.tree_leaves(tree)
    assert tu.tree_structure(tree) == treedef and hash(tu.tree_structure(tree)) == hash(treedef)


def test_dict_keys_are_sorted_and_unsortable_keys_raise_as_jax():
    assert tu.tree_leaves({"b": 1, "a": 2}) == [2, 1]
    assert tu.tree_leaves({2: "x", 1.5: "y", True: "z"}) == jtu.tree_leaves({2: "x", 1.5: "y",
                                                                              True: "z"})
    with pytest.raises(ValueError, match="Comparator raised exception while sorting pytree "
                                         "dictionary keys.*int.*str"):
        tu.tree_flatten({1: 1, "a": 2})
    with pytest.raises(ValueError):
        jtu.tree_flatten({1: 1, "a": 2})
    od = collections.OrderedDict([(1, "a"), ("b", "c")])  # keeps its order: no sort
    assert tu.tree_leaves(od) == ["a", "c"]


def test_node_types_are_exact_types_as_in_jax():
    class MyDict(dict):
        pass

    class MyTuple(tuple):
        pass

    for x in (MyDict(a=1), MyTuple((1, 2))):
        assert tu.tree_leaves(x) == jtu.tree_leaves(x) == [x]


def test_structures_compare_and_unflatten_checks_the_count():
    a, b = tu.tree_structure({"a": 1, "b": (2, 3)}), tu.tree_structure({"b": (0, 0), "a": 5})
    assert a == b and hash(a) == hash(b) and a != tu.tree_structure({"a": 1, "b": [2, 3]})
    assert tu.tree_structure(Box(1, 2, "s")) != tu.tree_structure(Box(1, 2, "t"))  # aux counts
    with pytest.raises(ValueError, match="Too few leaves for PyTreeDef; expected 3, got 2"):
        a.unflatten([1, 2])
    with pytest.raises(ValueError, match="Too many leaves"):
        a.unflatten([1, 2, 3, 4])
    assert tu.treedef_is_leaf(tu.tree_structure(1.0))
    assert not tu.treedef_is_leaf(tu.tree_structure(None))


def test_tree_map_and_friends_match_jax():
    t = {"b": [1, 2], "a": Point(3, None), "c": Params(4, 5)}
    got = tu.tree_map(lambda x: x * 10, t)
    assert got == jtu.tree_map(lambda x: x * 10, t) and list(got) == ["a", "b", "c"]
    # rest may be deeper than tree at its leaves (tree is a prefix), as in jax
    assert tu.tree_map(lambda x, y: (x, y), [1, 2], [(3, 4), 5]) == [(1, (3, 4)), (2, 5)]
    assert tu.tree_map(lambda x, y: x + y, t, t) == jtu.tree_map(lambda x, y: x + y, t, t)
    got = tu.tree_map_with_path(lambda p, x: tu.keystr(p), t)
    assert got == jtu.tree_map_with_path(lambda p, x: jtu.keystr(p), t)
    assert tu.tree_reduce(lambda a, b: a + b, t) == jtu.tree_reduce(lambda a, b: a + b, t) == 15
    assert tu.tree_reduce(lambda a, b: a + b, t, 100) == 115
    assert tu.tree_all([True, {"a": 1}]) and not tu.tree_all([True, {"a": 0}])
    leaves = tu.tree_leaves([1, (2, 3)], is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == jtu.tree_leaves([1, (2, 3)], is_leaf=lambda x: isinstance(x, tuple))
    assert tu.keystr((tu.DictKey("a"), tu.SequenceKey(0), tu.GetAttrKey("x"),
                      tu.FlattenedIndexKey(2))) == "['a'][0].x[<flat index 2>]"
    assert tu.keystr((tu.DictKey("a"), tu.SequenceKey(0)), simple=True, separator="/") == "a/0"


def test_tree_map_names_where_the_structures_differ():
    with pytest.raises(ValueError, match=r"dict at the root has keys \['b'\] \(expected keys \['a'\]\)"):
        tu.tree_map(lambda x, y: x + y, {"a": 1}, {"b": 2})
    with pytest.raises(ValueError, match=r"a list at \['k'\] \(expected a tuple\)"):
        tu.tree_map(lambda x, y: x + y, {"k": (1, 2)}, {"k": [1, 2]})
    with pytest.raises(ValueError, match=r"Box at \[1\] has 2 children and metadata 'b'"):
        tu.tree_map(lambda x, y: x, [0, Box(1, 2, "a")], [0, Box(1, 2, "b")])


def test_registration():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    tu.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))
    leaves, treedef = tu.tree_flatten(Pair(1, [2, 3]))
    assert leaves == [1, 2, 3]
    back = treedef.unflatten([4, 5, 6])
    assert type(back) is Pair and back.a == 4 and back.b == [5, 6]
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Pair(1, 2))] == \
        ["[<flat index 0>]", "[<flat index 1>]"]
    with pytest.raises(ValueError, match="Duplicate custom PyTreeDef type registration"):
        tu.register_pytree_node(Pair, lambda p: ((), None), lambda _, c: Pair(0, 0))
    with pytest.raises(ValueError, match="already a pytree node"):
        tu.register_pytree_node(dict, lambda p: ((), None), lambda _, c: {})

    class Keyed:
        def __init__(self, u):
            self.u = u

    tu.register_pytree_with_keys(Keyed, lambda k: ([(tu.GetAttrKey("u"), k.u)], None),
                                 lambda _, c: Keyed(*c))
    assert tu.keystr(tu.tree_leaves_with_path(Keyed(1))[0][0]) == ".u"
    assert tu.tree_map(lambda x: x + 1, Keyed(1)).u == 2

    @dataclasses.dataclass
    class Explicit:
        x: object
        n: int

    tu.register_dataclass(Explicit, data_fields=["x"], meta_fields=["n"])
    e = tu.tree_map(lambda v: v * 2, Explicit(3, 4))
    assert (e.x, e.n) == (6, 4)
    with pytest.raises(ValueError, match=r"init fields \['n'\] are neither"):
        tu.register_dataclass(dataclasses.make_dataclass("Bad", ["x", "n"]), ["x"], [])
    with pytest.raises(TypeError, match="not a dataclass"):
        tu.register_dataclass(Pair)


def test_static_fields_are_structure():
    p, q = Params(1.0, 2.0, name="a"), Params(1.0, 2.0, name="b")
    assert tu.tree_leaves(p) == [1.0, 2.0]
    assert tu.tree_structure(p) != tu.tree_structure(q)
    assert tu.tree_map(lambda x: x, q).name == "b"
