"""The AD transforms on pytree inputs and outputs (issue #28, class 9), against jax in x64.

jax's Jacobian of f: pytree_in -> pytree_out is a pytree shaped like the output whose leaves
are pytrees shaped like the (argnums-selected) input, each leaf of shape out.shape + in.shape;
its hessian is that structure nested twice.  Dicts here have sorted keys, so that tidu's
insertion order and jax's sorted order agree."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy
jnp = jax.numpy


def _same(got, want):
    """Same pytree structure (tuple/list/dict nodes, dict keys in order) and close leaves."""
    if isinstance(want, dict):
        assert isinstance(got, dict), (type(got), type(want))
        assert list(got) == list(want)
        for k in want:
            _same(got[k], want[k])
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want), (type(got), type(want))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    else:
        g, w = np.asarray(got), np.asarray(want)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


# ---- the reproducers of the issue ----

def test_linearize_tuple_primal():
    # raised "setting an array element with a sequence" [jax: 144.0]
    W1, W2 = np.ones((2, 6)), np.ones((1, 6))
    out, f_jvp = td.linearize(lambda p: td.sum(p[0]) * td.sum(p[1]), (W1, W2))
    _, j_jvp = jax.linearize(lambda p: jnp.sum(p[0]) * jnp.sum(p[1]), (W1, W2))
    assert float(out) == 72.0
    _same(f_jvp((W1, W2)), j_jvp((W1, W2)))
    assert float(f_jvp((W1, W2))) == 144.0


def test_linearize_pytree_inside_jit():
    W1, W2 = np.ones((2, 6)), np.ones((1, 6))
    f = td.jit(lambda a, b: td.linearize(lambda p: td.sum(p[0]) * td.sum(p[1]), (a, b))[1](
        (a, b)))
    assert float(f(W1, W2)) == 144.0


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
def test_jacobian_on_pytrees(jac):
    # jax's test_jacobian_on_pytrees; raised "a traced value has no concrete value to
    # convert to a numpy array"
    tj, jj = getattr(td, jac), getattr(jax, jac)
    x, y = np.array([0.3, -1.2]), np.array([0.7, 2.0])
    cases = [
        (lambda x, y: (x, y), 0, (0., 1.)),
        (lambda x, y: (x, y), 1, (0., 1.)),
        (lambda x, y: (x, y), (0, 1), (0., 1.)),
        (lambda x: x[:2], 0, ((1., 2., 3.),)),
        (lambda x, y: {"x": x, "x+y": x + y}, 0, (x, y)),
        (lambda x, y: {"x": x, "x+y": x + y}, 1, (x, y)),
    ]
    for f, argnums, args in cases:
        _same(tj(f, argnums)(*args), jj(f, argnums)(*args))


def test_hessian_on_pytrees():
    # jax's test_hessian_on_pytrees
    got = td.hessian(lambda x: td.asarray(x) ** 2)((1., 2.))
    want = ((np.array([2., 0.]), np.array([0., 0.])),
            (np.array([0., 0.]), np.array([0., 2.])))
    _same(got, want)
    _same(got, jax.hessian(lambda x: jnp.array(x) ** 2)((1., 2.)))


def test_hessian_pytree_has_aux_and_argnums():
    def f(np_):
        def g(p, q):
            return np_.sum(np_.sin(p["a"]) * q[0]) + np_.sum(p["b"] ** 3), p["a"]
        return g
    p = {"a": np.array([0.1, 0.2]), "b": np.array([[1.0, 2.0]])}
    q = (np.array([3.0, -1.0]),)
    for argnums in (0, (0, 1)):
        got, aux = td.hessian(f(td), argnums, has_aux=True)(p, q)
        want, jaux = jax_value(jax.hessian(f(jnp), argnums, has_aux=True), p, q)
        _same(got, want)
        _same(aux, jaux)


# ---- the table: transform x input pytree x output pytree ----

_A = np.array([0.3, -0.7, 1.1])
_B = np.array([[0.5, 2.0], [-1.5, 0.25]])
_C = np.array([0.9, -0.4])

INPUTS = {
    "tuple": (_A, _B),
    "list": [_A, _B],
    "dict": {"a": _A, "b": _B},
    "nested": ({"a": _A, "b": _B}, _C),
}


def _leaves(p):
    if isinstance(p, dict):
        return [x for k in p for x in _leaves(p[k])]
    if isinstance(p, (tuple, list)):
        return [x for v in p for x in _leaves(v)]
    return [p]


def _make(np_, out):
    def f(p):
        xs = _leaves(p)
        s = sum(np_.sum(np_.sin(x) * x) for x in xs)
        v = np_.tanh(xs[0]) * np_.sum(xs[1] ** 2)
        if out == "array":
            return s * v  # shape (3,)
        if out == "tuple":
            return (v, s)
        return {"u": s, "v": v}
    return f


TRANSFORMS = ["linearize", "jvp", "vjp", "jacfwd", "jacrev", "hessian"]


@pytest.mark.parametrize("out", ["array", "tuple", "dict"])
@pytest.mark.parametrize("inp", list(INPUTS))
@pytest.mark.parametrize("tr", TRANSFORMS)
def test_table(tr, inp, out):
    p = INPUTS[inp]
    tf, jf = _make(td, out), _make(jnp, out)
    tangent = jax.tree_util.tree_map(lambda x: np.cos(x) + 0.5, p)
    # the jax side of each transform under one jit (tests/_support/compare.py: jax_value)
    if tr == "linearize":
        o, lin = td.linearize(tf, p)
        jo, jlin_t = jax_value(lambda p, t: (lambda ol: (ol[0], ol[1](t)))(jax.linearize(jf, p)),
                               p, tangent)
        _same(o, jo)
        _same(lin(tangent), jlin_t)
    elif tr == "jvp":
        _same(td.jvp(tf, (p,), (tangent,)), jax_value(lambda p, t: jax.jvp(jf, (p,), (t,)),
                                                      p, tangent))
    elif tr == "vjp":
        o, back = td.vjp(tf, p)
        jo = jax_value(jf, p)
        _same(o, jo)
        ct = jax.tree_util.tree_map(lambda x: np.ones(np.shape(x)) * 0.75, jo)
        ct = {k: np.asarray(v) for k, v in ct.items()} if isinstance(ct, dict) else \
            tuple(np.asarray(v) for v in ct) if isinstance(ct, tuple) else np.asarray(ct)
        _same(back(ct), jax_value(lambda p, c: jax.vjp(jf, p)[1](c), p, ct))
    elif tr in ("jacfwd", "jacrev"):
        _same(getattr(td, tr)(tf)(p), jax_value(getattr(jax, tr)(jf), p))
    else:
        _same(td.hessian(tf)(p), jax_value(jax.hessian(jf), p))


# ---- None is an empty pytree node, as in jax (arguments and outputs of every transform) ----

_NONE_CASES = {
    "jit_out": lambda ns, x: ns.jit(lambda x: (x * 2, None, {"a": None}))(x),
    "jit_only_none": lambda ns, x: ns.jit(lambda x: None)(x),
    "jit_arg": lambda ns, x: ns.jit(lambda x, n: x + 1)(x, None),
    "jit_dict_arg": lambda ns, x: ns.jit(lambda d: d["a"] * 2)({"a": x, "b": None}),
    "vmap_out": lambda ns, x: ns.vmap(lambda x: (x, None))(ns.stack([x, x])),
    "vmap_arg": lambda ns, x: ns.vmap(lambda x, n: x * 2, in_axes=(0, None))(ns.stack([x, x]),
                                                                             None),
    "grad_dict": lambda ns, x: ns.grad(lambda d: d["a"] * 2)({"a": x, "b": None}),
    "grad_arg": lambda ns, x: ns.grad(lambda x, n: x * x)(x, None),
    "jacfwd_out": lambda ns, x: ns.jacfwd(lambda x: (x * 3, None))(x),
    "jacrev_out": lambda ns, x: ns.jacrev(lambda x: (x * 3, None))(x),
    "jvp_out": lambda ns, x: ns.jvp(lambda x: (x * 2, None), (x,), (1.5,)),
    "vjp_out": lambda ns, x: ns.vjp(lambda x: (x * 2, None), x)[1]((1.5, None)),
    "hessian_arg": lambda ns, x: ns.hessian(lambda x, n: x ** 3)(x, None),
}


class _JaxNone:
    def __getattr__(self, name):
        return getattr(jax, name) if hasattr(jax, name) else getattr(jnp, name)


@pytest.mark.parametrize("case", sorted(_NONE_CASES))
def test_none_is_an_empty_pytree(case):
    x = np.float64(2.0)
    got = _NONE_CASES[case](td, x)
    want = _NONE_CASES[case](_JaxNone(), x)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want), (got, want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)


# ---- one convention for every transform (td.tree_util): sorted dicts, registered nodes ----

import collections  # noqa: E402
import dataclasses  # noqa: E402

jtu = jax.tree_util


@dataclasses.dataclass
class _Layer:
    w: object
    b: object
    act: str = dataclasses.field(default="tanh", metadata={"static": True})


td.tree_util.register_dataclass(_Layer)
jtu.register_dataclass(_Layer)


@td.tree_util.register_pytree_node_class
@jtu.register_pytree_node_class
class _Scaled:
    def __init__(self, v, k):
        self.v, self.k = v, k

    def tree_flatten(self):
        return (self.v,), self.k

    @classmethod
    def tree_unflatten(cls, k, children):
        return cls(children[0], k)


_Pair = collections.namedtuple("_Pair", "u v")


def _same_tree(got, want):
    """jax's structure (types rebuilt as themselves, dict keys in jax's order) and close leaves."""
    assert jtu.tree_structure(got) == jtu.tree_structure(want), (jtu.tree_structure(got),
                                                                 jtu.tree_structure(want))
    for path, g in jtu.tree_leaves_with_path(got):
        assert isinstance(g, np.ndarray | float | np.generic), (jtu.keystr(path), type(g))
    jtu.tree_map(lambda g, w: np.testing.assert_allclose(np.asarray(g), np.asarray(w),
                                                         rtol=1e-12, atol=1e-12), got, want)
    dicts_g = [x for x in jtu.tree_leaves(got, is_leaf=lambda x: isinstance(x, dict))
               if isinstance(x, dict)]
    dicts_w = [x for x in jtu.tree_leaves(want, is_leaf=lambda x: isinstance(x, dict))
               if isinstance(x, dict)]
    assert [list(d) for d in dicts_g] == [list(d) for d in dicts_w]


def _loss(np_):
    def loss(p, x):
        lay, sc, pair = p["z_layer"], p["a_scaled"], p["m_pair"]
        h = np_.tanh(lay.w @ x + lay.b) * sc.k
        return np_.sum(h * h) * np_.sum(sc.v ** 2) + np_.sum(pair.u * pair.v) + \
            (0.0 if p["none"] is None else 1.0)
    return loss


def _params(x):
    rng = np.random.default_rng(0)
    return {"z_layer": _Layer(rng.normal(size=(2, 3)), rng.normal(size=2)),
            "a_scaled": _Scaled(rng.normal(size=2), 0.5),
            "m_pair": _Pair(rng.normal(size=3), x), "none": None}


def test_grad_family_on_every_node_kind_matches_jax():
    x = np.linspace(0.1, 0.3, 3)
    p = _params(x)
    f, jf = _loss(td), _loss(jnp)
    jgrad = jax_value(jax.grad(jf), p, x)
    _same_tree(td.grad(f)(p, x), jgrad)
    _same_tree(td.value_and_grad(f)(p, x), jax_value(jax.value_and_grad(jf), p, x))
    _same_tree(td.jit(td.grad(f))(p, x), jgrad)
    out, back = td.vjp(f, p, x)
    _same_tree(back(1.0), jax_value(lambda p, x: jax.vjp(jf, p, x)[1](1.0), p, x))
    _same_tree(td.jvp(f, (p, x), (p, x)), jax_value(lambda p, x: jax.jvp(jf, (p, x), (p, x)), p, x))
    _same_tree(td.linearize(f, p, x)[1](p, x), jax.linearize(jf, p, x)[1](p, x))
    for tr, jtr in [(td.jacfwd, jax.jacfwd), (td.jacrev, jax.jacrev), (td.hessian, jax.hessian)]:
        _same_tree(tr(f)(p, x), jax_value(jtr(jf), p, x))


def test_jit_returns_registered_nodes_and_sorted_dicts():
    x = np.arange(3.0)
    f = lambda p: {"z": _Layer(p["w"] * 2, None, "relu"), "a": _Pair(p["w"], _Scaled(x, 3)),
                   "m": None}
    got = td.jit(f)({"w": x})
    assert list(got) == ["a", "m", "z"] and got["m"] is None
    assert type(got["z"]) is _Layer and got["z"].act == "relu" and got["z"].b is None
    assert type(got["a"]) is _Pair and type(got["a"].v) is _Scaled and got["a"].v.k == 3
    np.testing.assert_allclose(got["z"].w, 2 * x)


def test_hessian_of_a_dict_argument_is_a_dict_of_dicts_as_jax():
    f = lambda p: jnp.sum(p["b"] ** 2 * p["a"][0]) + jnp.sum(jnp.sin(p["a"]))
    tf = lambda p: td.sum(p["b"] ** 2 * p["a"][0]) + td.sum(td.sin(p["a"]))
    p = {"b": np.array([1.0, 2.0]), "a": np.array([0.5, 0.25, 3.0])}
    got, want = td.hessian(tf)(p), jax_value(jax.hessian(f), p)
    assert list(got) == ["a", "b"] and all(list(got[k]) == ["a", "b"] for k in got)
    _same_tree(got, want)


def test_vmap_axes_are_tree_prefixes_of_registered_nodes():
    w, b = np.arange(12.0).reshape(4, 3), np.ones(3)
    lay = _Layer(w, b)
    f = lambda lay, s: lay.w * s + lay.b
    jf = f
    for in_axes in [(_Layer(0, None), None), ({"w": 0}, None)][:1]:
        got = td.vmap(f, in_axes=in_axes)(lay, 2.0)
        np.testing.assert_allclose(got, jax.vmap(jf, in_axes=in_axes)(lay, 2.0))
    got = td.vmap(lambda d: {"z": d["b"], "a": _Pair(d["a"], None)}, in_axes=({"a": 0, "b": 1},),
                  out_axes={"z": 1, "a": _Pair(0, None)})({"b": w.T, "a": w})
    want = jax.vmap(lambda d: {"z": d["b"], "a": _Pair(d["a"], None)}, in_axes=({"a": 0, "b": 1},),
                    out_axes={"z": 1, "a": _Pair(0, None)})({"b": w.T, "a": w})
    _same_tree(got, want)
    with pytest.raises(ValueError, match=r"in_axes specification must be a tree prefix.*"
                                         r"has keys \['a', 'b'\] \(expected keys \['a', 'c'\]\)"):
        td.vmap(lambda d: d["a"], in_axes=({"a": 0, "c": 1},))({"a": w, "b": w})


def test_scan_cond_while_carry_registered_nodes():
    def step(c, x):
        return _Layer(c.w + x, c.b * 2.0, c.act), {"s": c.w.sum(), "n": None}

    init = _Layer(np.zeros(2), np.ones(2), "id")
    xs = np.arange(6.0).reshape(3, 2)
    c, ys = td.scan(step, init, xs)
    jc, jys = jax.lax.scan(step, init, xs)
    _same_tree((c, ys), (jc, jys))
    assert c.act == "id"
    got = td.cond(True, lambda p: _Pair(p.v, p.u), lambda p: p, _Pair(np.ones(2), np.zeros(2)))
    assert type(got) is _Pair and np.all(got.u == 0)
    got = td.while_loop(lambda s: s.v < 5.0, lambda s: _Scaled(s.v + 1.0, s.k), _Scaled(0.0, 7))
    assert type(got) is _Scaled and float(got.v) == 5.0 and got.k == 7
    with pytest.raises(TypeError, match=r"scan: the function returns a carry of structure "
                                        r"PyTreeDef\(\(\*, \*\)\), but init has "
                                        r"PyTreeDef\(CustomNode\(namedtuple\[_Pair\]"):
        td.scan(lambda c, x: ((c.u, c.v), x), _Pair(0.0, 1.0), xs)


# ---- errors that name the leaf, its path and the argument ----

def test_a_leaf_that_is_not_an_array_names_its_path_and_argument():
    def f(params, x):
        return td.sum(params["w1"] * x)

    params = {"w1": np.ones(2), "w2": "relu"}
    x = np.ones(2)
    hint = "register_pytree_node"
    for what, call in [
        ("td.jit(f)", lambda: td.jit(f)(params, x)),
        ("td.grad(f)", lambda: td.grad(f)(params, x)),
        ("td.value_and_grad(f)", lambda: td.value_and_grad(f)(params, x)),
        ("td.jacrev(f)", lambda: td.jacrev(f)(params, x)),
        ("td.hessian(f)", lambda: td.hessian(f)(params, x)),
        ("td.vmap(f)", lambda: td.vmap(f, in_axes=(None, 0))(params, np.ones((3, 2)))),
    ]:
        with pytest.raises(TypeError, match=rf"{re_escape(what)}: argument params\['w2'\] is a "
                                            rf"str; .*{hint}"):
            call()

    @dataclasses.dataclass
    class Unregistered:
        w: object

    with pytest.raises(TypeError, match=r"td.grad\(g\): argument p\[0\] is an Unregistered; .*"
                                        r"register_dataclass"):
        def g(p):
            return td.sum(p[0].w)
        td.grad(g)((Unregistered(np.ones(2)),))
    with pytest.raises(TypeError, match=r"td.scan: argument init\['tag'\] is a str"):
        td.scan(lambda c, x: (c, x), {"a": 0.0, "tag": "t"}, np.ones(3))
    with pytest.raises(TypeError, match=r"td.jit\(f\): argument params\['w1'\] is an array of "
                                        r"dtype datetime64\[s\]; tidu supports"):
        td.jit(f)({"w1": np.array(["2020-01-01", "2020-01-02"], "datetime64[s]")}, x)
    with pytest.raises(TypeError, match=r"jvp: primal and tangent arguments must have the same "
                                        r"tree structure"):
        td.jvp(lambda p: p["a"], ({"a": 1.0},), ({"b": 1.0},))


def re_escape(s):
    import re
    return re.escape(s)
