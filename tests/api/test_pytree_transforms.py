"""The AD transforms on pytree inputs and outputs (issue #28, class 9), against jax in x64.

jax's Jacobian of f: pytree_in -> pytree_out is a pytree shaped like the output whose leaves
are pytrees shaped like the (argnums-selected) input, each leaf of shape out.shape + in.shape;
its hessian is that structure nested twice.  Dicts here have sorted keys, so that tidu's
insertion order and jax's sorted order agree."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

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
        want, jaux = jax.hessian(f(jnp), argnums, has_aux=True)(p, q)
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
    if tr == "linearize":
        o, lin = td.linearize(tf, p)
        jo, jlin = jax.linearize(jf, p)
        _same(o, jo)
        _same(lin(tangent), jlin(tangent))
    elif tr == "jvp":
        _same(td.jvp(tf, (p,), (tangent,)), jax.jvp(jf, (p,), (tangent,)))
    elif tr == "vjp":
        o, back = td.vjp(tf, p)
        jo, jback = jax.vjp(jf, p)
        _same(o, jo)
        ct = jax.tree_util.tree_map(lambda x: np.ones(np.shape(x)) * 0.75, jo)
        ct = {k: np.asarray(v) for k, v in ct.items()} if isinstance(ct, dict) else \
            tuple(np.asarray(v) for v in ct) if isinstance(ct, tuple) else np.asarray(ct)
        _same(back(ct), jback(ct))
    elif tr in ("jacfwd", "jacrev"):
        _same(getattr(td, tr)(tf)(p), getattr(jax, tr)(jf)(p))
    else:
        _same(td.hessian(tf)(p), jax.hessian(jf)(p))


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
