"""Edges of the control-flow constructs against jax in x64 (issue #28).

* (1) A branch or loop body that is singular (sqrt, log, 1/x at 0) where it is not taken must not
  put NaN into values or derivatives: under vmap a cond becomes a select over every branch, and
  an op in a branch on closed-over values must run inside the branch, not before the cond.
* (7) Empty pytrees ((), [], {}, nested, None) as carries, operands and outputs."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)


def same(got, want):
    """Same pytree structure and values (NaN where jax has NaN, nowhere else)."""
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want), (got, want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-12,
                                   equal_nan=True)


# ---- (1) NaN from the branch not taken ----

def test_issue28_cond_vmap_grad_untaken_sqrt():
    # td.grad(lambda x: td.vmap(lambda v: td.cond(v < eps, lambda _: eps, lambda _: td.sqrt(v),
    # ()))(x).sum())(np.zeros(3)) gave [nan nan nan]; jax gives [0 0 0].
    eps = 1e-3

    def f(ns, L):
        return lambda x: ns.vmap(lambda v: L.cond(v < eps, lambda _: eps, lambda _: ns.sqrt(v),
                                                  ()))(x).sum()

    for x in (np.zeros(3), np.array([0.0, 4.0, 9.0])):
        got = td.grad(f(td, td))(x)
        same(got, jax_value(jax.grad(f(jnp_ns, lax)), x))
        assert np.isfinite(got).all()


class _JaxNs:
    """jax.numpy plus vmap: the `ns` the functions below are written against."""

    def __getattr__(self, name):
        return jax.vmap if name == "vmap" else getattr(jnp, name)


jnp_ns = _JaxNs()

SINGULAR = {
    "sqrt": lambda ns, u: ns.sqrt(u),
    "log": lambda ns, u: ns.log(u),
    "recip": lambda ns, u: 1.0 / u,
}


def _cond_op(ns, L, s):  # the singular branch an operand
    return lambda v: L.cond(v > 1, lambda u: s(ns, u), lambda u: 3.0 * u, v)


def _cond_closure(ns, L, s):  # the singular branch reads v by closure
    return lambda v: L.cond(v > 1, lambda: s(ns, v), lambda: 3.0 * v)


def _switch(ns, L, s):
    def f(v):
        i = (v > 1).astype(np.int32) + (v > 5).astype(np.int32)
        return L.switch(i, [lambda u: u * u, lambda u: s(ns, u), lambda u: ns.sin(u)], v)
    return f


def _fori_cond(ns, L, s):  # a static-bounds fori_loop whose body branches
    return lambda v: L.fori_loop(0, 2, lambda i, a: a + L.cond(v > 1, lambda: s(ns, v),
                                                                lambda: 2.0 * v), v)


def _scan_cond(ns, L, s):
    def f(v):
        def step(c, x):
            return c * 0.5 + L.cond(x > 1, lambda u: s(ns, u), lambda u: u * u, x), c
        c, ys = L.scan(step, 1.0, ns.stack([v, 2.0 * v]))
        return c + ys.sum()
    return f


def _while(ns, L, s):  # zero trips where v <= 1
    def f(v):
        n = (v > 1).astype(np.int32)
        return L.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] + s(ns, v)),
                            (0, v))[1]
    return f


def _fori_traced(ns, L, s):  # traced bounds: a while loop, zero trips where v <= 1
    return lambda v: L.fori_loop(0, (v > 1).astype(np.int32), lambda i, a: a + s(ns, a), v)


CONSTRUCTS = {
    "cond": (_cond_op, True), "cond_closure": (_cond_closure, True), "switch": (_switch, True),
    "fori_loop": (_fori_cond, True), "scan": (_scan_cond, True), "while_loop": (_while, False),
    "fori_loop_traced": (_fori_traced, False),
}


def _transforms(f, ns, reverse):
    """name -> function of the batch x, for f: scalar -> scalar."""
    vm = ns.vmap
    g = td.grad if ns is td else jax.grad
    jf = td.jacfwd if ns is td else jax.jacfwd
    out = {
        "vmap": vm(f),
        "jacfwd(vmap)": jf(lambda x: vm(f)(x)),
        "vmap(jacfwd)": vm(jf(f)),
    }
    if reverse:  # while loops are forward mode only, in both
        out["grad"] = lambda x: [g(f)(v) for v in x]
        out["vmap(grad)"] = vm(g(f))
        out["grad(vmap)"] = g(lambda x: vm(f)(x).sum())
        out["vmap(grad(grad))"] = vm(g(g(f)))
    return out


XS = np.array([0.0, 0.0, 2.0, 7.0])
EDGE_CASES = [(c, s, t) for c, (_, rev) in CONSTRUCTS.items() for s in SINGULAR
              for t in _transforms(lambda v: v, td, rev)]


@pytest.mark.parametrize("construct,singular,transform", EDGE_CASES)
def test_untaken_branch_no_nan(construct, singular, transform):
    make, rev = CONSTRUCTS[construct]
    s = SINGULAR[singular]
    got = _transforms(make(td, td, s), td, rev)[transform](XS)
    want = jax_value(_transforms(make(jnp_ns, lax, s), jnp_ns, rev)[transform], XS)
    same(np.asarray(got), np.asarray(want))


def test_unbatched_cond_closure_grad_at_untaken_singularity():
    f = _cond_closure(td, td, SINGULAR["sqrt"])
    assert td.grad(f)(0.0) == 3.0  # the sqrt runs (and is differentiated) only in its branch
    assert td.jacfwd(f)(0.0) == 3.0


# ---- (7) empty pytrees ----

def test_issue28_while_loop_empty_carry():
    # td.while_loop(lambda _: False, lambda _: (), ()) raised "op arity out of range".
    assert td.while_loop(lambda _: False, lambda _: (), ()) == ()
    assert lax.while_loop(lambda _: False, lambda _: (), ()) == ()


EMPTIES = {"tuple": (), "list": [], "dict": {}, "nested": ((), {"a": [], "b": ((),)}),
           "none": None}

_XS = np.arange(3.0)


def _empty_cases(e):
    """name -> function (L, ns) -> result, each with the empty pytree e somewhere."""
    return {
        "while_loop": lambda L, ns: L.while_loop(lambda c: False, lambda c: c, e),
        "while_loop_in_jit": lambda L, ns: ns.jit(
            lambda x: (L.while_loop(lambda c: False, lambda c: c, e), x * 2))(1.0),
        "fori_loop": lambda L, ns: L.fori_loop(0, 3, lambda i, c: c, e),
        "fori_loop_traced": lambda L, ns: ns.jit(
            lambda n: L.fori_loop(0, n, lambda i, c: c, e))(3),
        "scan_carry": lambda L, ns: L.scan(lambda c, x: (c, x * 2), e, _XS),
        "scan_ys": lambda L, ns: L.scan(lambda c, x: (c + x, e), 0.0, _XS),
        "scan_all": lambda L, ns: L.scan(lambda c, x: (c, e), e, _XS),
        "scan_length": lambda L, ns: L.scan(lambda c, x: (c, e), e, None, length=3),
        "scan_length_ys": lambda L, ns: L.scan(lambda c, x: (c, 1.0), e, None, length=3),
        "cond_out": lambda L, ns: L.cond(True, lambda: e, lambda: e),
        "cond_operand": lambda L, ns: L.cond(False, lambda o: 1.0, lambda o: 2.0, e),
        "cond_both": lambda L, ns: L.cond(True, lambda o: o, lambda o: o, e),
        "switch": lambda L, ns: L.switch(1, [lambda o: o, lambda o: o], e),
        "switch_operand": lambda L, ns: L.switch(0, [lambda o: 1.0, lambda o: 2.0], e),
        "vmap_cond": lambda L, ns: ns.vmap(
            lambda x: (L.cond(x > 1, lambda o: o, lambda o: o, e), x))(_XS),
        "grad_scan": lambda L, ns: ns.grad(
            lambda x: L.scan(lambda c, y: (c, y * y), e, x * _XS)[1].sum())(2.0),
        "grad_cond": lambda L, ns: ns.grad(
            lambda x: L.cond(x > 1, lambda o: x * x, lambda o: x, e))(2.0),
    }


class _TdNs:
    jit, vmap, grad = staticmethod(td.jit), staticmethod(td.vmap), staticmethod(td.grad)


class _JaxT:
    jit, vmap, grad = staticmethod(jax.jit), staticmethod(jax.vmap), staticmethod(jax.grad)


EMPTY_CASES = [(k, c) for k in EMPTIES for c in _empty_cases(())]


@pytest.mark.parametrize("empty,case", EMPTY_CASES)
def test_empty_pytrees(empty, case):
    e = EMPTIES[empty]
    got = _empty_cases(e)[case](td, _TdNs)
    want = _empty_cases(e)[case](lax, _JaxT)
    same(got, want)


# ---- (8) vmap out_axes=None for values a construct passes through unchanged ----

def _passthrough_cases():
    """Constructs returning an unbatched operand unchanged, written against (lax, vmap)."""
    return {
        # the reproducer: td.vmap(lambda x, y: td.cond(x < 3, lambda x, y: (x * 2, y),
        # lambda x, y: (x * 3, y), x, y), in_axes=(0, None), out_axes=(0, None)) raised
        # "vmap has mapped output but out_axes is None"
        "cond": lambda L, x, y: L.cond(x < 3, lambda x, y: (x * 2, y), lambda x, y: (x * 3, y),
                                       x, y),
        "switch3": lambda L, x, y: L.switch(
            (x % 3).astype("int32"), [lambda x, y: (x, y), lambda x, y: (x + 1, y),
                                      lambda x, y: (x * x, y)], x, y),
        "cond_swapped_args": lambda L, x, y: L.cond(x < 3, lambda y, x: (x * 2, y),
                                                    lambda y, x: (x - 1, y), y, x),
        "while": lambda L, x, y: L.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1]),
                                              (x, y)),
        "fori_traced": lambda L, x, y: L.fori_loop(
            x.astype("int32"), 4, lambda i, c: (c[0] * 2, c[1]), (x, y)),
        "scan": lambda L, x, y: L.scan(lambda c, t: ((c[0] + t, c[1]), t), (x, y),
                                       np.arange(3.0))[0],
        "fori_static": lambda L, x, y: L.fori_loop(0, 3, lambda i, c: (c[0] + c[1], c[1]),
                                                   (x, y)),
        "nested": lambda L, x, y: L.cond(
            x < 2, lambda x, y: L.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1]),
                                             (x, y)),
            lambda x, y: (x, y), x, y),
    }


@pytest.mark.parametrize("case", sorted(_passthrough_cases()))
def test_issue28_vmap_out_axes_none_passthrough(case):
    f = _passthrough_cases()[case]
    x, y = np.arange(5.0), np.array(3.0)
    got = td.vmap(lambda x, y: f(td, x, y), in_axes=(0, None), out_axes=(0, None))(x, y)
    want = jax_value(jax.vmap(lambda x, y: f(lax, x, y), in_axes=(0, None), out_axes=(0, None)),
                     x, y)
    same(got, want)
    # the pass-through is the operand itself: forward- and reverse-mode derivatives see it
    dt = td.jvp(lambda y: td.vmap(lambda x, y: f(td, x, y), in_axes=(0, None),
                                  out_axes=(0, None))(x, y)[1], (y,), (np.array(1.0),))
    same(dt, (y, np.array(1.0)))


def test_passthrough_only_when_every_branch_passes_the_same_value():
    # one branch returns y, the other x: the output depends on the branch, so it is batched
    def f(L, ns):
        return ns.vmap(lambda x, y: L.cond(x < 3, lambda x, y: y, lambda x, y: x, x, y),
                       in_axes=(0, None))

    x, y = np.arange(5.0), np.array(3.0)
    same(f(td, td)(x, y), f(lax, jax)(x, y))
    with pytest.raises(ValueError, match="out_axes is None"):
        td.vmap(lambda x, y: td.cond(x < 3, lambda x, y: y, lambda x, y: x, x, y),
                in_axes=(0, None), out_axes=None)(x, y)
