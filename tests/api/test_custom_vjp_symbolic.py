"""td.custom_vjp with ``defvjp(fwd, bwd, symbolic_zeros=True)`` against jax in x64: fwd sees
which argument leaves are perturbed (CustomVJPPrimal), bwd sees a SymbolicZero for each zero
output cotangent, in the same calls as jax's; values under grad, jit, vmap, scan and to second
order; jax's errors."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import tidu as td
from _support.compare import tree_close

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)


def _kind(x, zero_type):
    return "zero" if isinstance(x, zero_type) else "array"


def make_pair(api, ns, seen):
    """f(x, y) = (sin(x) * y, x * y ** 2) with a rule that records what it is given and skips
    the terms of zero cotangents."""
    cd = api.custom_derivatives
    zero = cd.SymbolicZero

    @api.custom_vjp
    def f(x, y):
        return ns.sin(x) * y, x * y ** 2

    def fwd(x, y):
        assert type(x) is cd.CustomVJPPrimal and type(y) is cd.CustomVJPPrimal
        seen.append(("fwd", x.perturbed, y.perturbed))
        return f(x.value, y.value), (x.value, y.value)

    def bwd(res, g):
        x, y = res
        g0, g1 = g
        seen.append(("bwd", _kind(g0, zero), _kind(g1, zero)))
        cx = cy = 0.0
        if not isinstance(g0, zero):
            cx, cy = ns.cos(x) * y * g0, ns.sin(x) * g0
        if not isinstance(g1, zero):
            cx, cy = cx + y ** 2 * g1, cy + 2 * x * y * g1
        return cx, cy

    f.defvjp(fwd, bwd, symbolic_zeros=True)
    return f


def _both(case, same_calls=True):
    seen_td, seen_jax = [], []
    got = case(td, td, make_pair(td, td, seen_td))
    want = case(jax, jnp, make_pair(jax, jnp, seen_jax))
    tree_close(got, want)
    if same_calls:
        assert seen_td == seen_jax, (seen_td, seen_jax)
    else:  # the same kinds of call, in another order or number
        assert set(seen_td) == set(seen_jax), (seen_td, seen_jax)
    return seen_td


def _product(f):
    def g(x, y):
        a, b = f(x, y)
        return a * b
    return g


CASES = {
    "first output, d/dx": lambda api, ns, f: api.grad(lambda x, y: f(x, y)[0])(0.3, 2.0),
    "first output, d/dy": lambda api, ns, f: api.grad(lambda x, y: f(x, y)[0], argnums=1)(0.3, 2.0),
    "second output, both": lambda api, ns, f: api.grad(lambda x, y: f(x, y)[1],
                                                       argnums=(0, 1))(0.3, 2.0),
    "sum, both, jit": lambda api, ns, f: api.jit(api.grad(lambda x, y: sum(f(x, y)),
                                                          argnums=(0, 1)))(0.3, 2.0),
    "vjp of both": lambda api, ns, f: api.vjp(f, 0.3, 2.0)[1]((1.0, -2.0)),
    "vmap of grad": lambda api, ns, f: api.vmap(api.grad(lambda x, y: f(x, y)[1]))(
        np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0, 3.0])),
    "grad of vmap, y shared": lambda api, ns, f: api.grad(
        lambda x, y: api.vmap(lambda a: f(a, y)[0])(x).sum(), argnums=(0, 1))(
        np.array([0.1, 0.2, 0.3]), 2.0),
    "second order": lambda api, ns, f: api.grad(api.grad(_product(f)))(0.3, 2.0),
    "jacrev of jacrev": lambda api, ns, f: api.jacrev(api.jacrev(_product(f), (0, 1)),
                                                      (0, 1))(0.3, 2.0),
    "scan": lambda api, ns, f: api.grad(lambda y: ns.sum((api.lax if api is jax else api).scan(
        lambda c, x: (c + f(x, y)[0], None), 0.0, np.array([0.1, 0.2]))[0]))(1.5),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rules_see_what_jax_passes_them(name):
    # jax traces the rules again for the outer derivative; tidu once per pattern
    seen = _both(CASES[name], same_calls=name not in ("second order", "jacrev of jacrev"))
    assert seen  # the rules ran (the cases differentiate through f)


def test_perturbed_and_zero_cotangent_flags():
    seen = _both(CASES["first output, d/dx"])
    assert seen == [("fwd", True, False), ("bwd", "array", "zero")]
    seen = _both(CASES["second output, both"])
    assert seen == [("fwd", True, True), ("bwd", "zero", "array")]


def test_pytree_arguments_flag_each_leaf_and_nondiff_arguments_are_not_wrapped():
    def make(api, ns, seen):
        cd = api.custom_derivatives

        @partial(api.custom_vjp, nondiff_argnums=(0,))
        def f(k, p):
            return k * ns.sum(p["a"] * p["b"])

        def fwd(k, p):
            assert isinstance(k, float)
            seen.append(tuple((name, p[name].perturbed) for name in sorted(p)))
            v = cd.custom_vjp_primal_tree_values(p)
            return f(k, v), v

        def bwd(k, v, g):
            return ({"a": k * g * v["b"], "b": k * g * v["a"]},)

        f.defvjp(fwd, bwd, symbolic_zeros=True)
        return f

    p = {"a": np.array([1.0, 2.0]), "b": np.array([3.0, -1.0])}
    seen_td, seen_jax = [], []
    f_td, f_jax = make(td, td, seen_td), make(jax, jnp, seen_jax)
    tree_close(td.grad(lambda p: f_td(2.0, p))(p), jax.grad(lambda p: f_jax(2.0, p))(p))
    # only "a" differentiated: "b" is not perturbed
    tree_close(td.grad(lambda a, b: f_td(2.0, {"a": a, "b": b}))(p["a"], p["b"]),
               jax.grad(lambda a, b: f_jax(2.0, {"a": a, "b": b}))(p["a"], p["b"]))
    assert seen_td == seen_jax == [(("a", True), ("b", True)), (("a", True), ("b", False))]


def test_integer_output_cotangent_is_a_symbolic_zero():
    def make(api, ns, seen):
        zero = api.custom_derivatives.SymbolicZero

        @api.custom_vjp
        def f(x):
            return x * 2.0, ns.int32(3) if api is jax else td.asarray(3, "int32")

        f.defvjp(lambda x: (f(x.value), None),
                 lambda res, g: (seen.append(_kind(g[1], zero)) or 2.0 * g[0],),
                 symbolic_zeros=True)
        return f

    seen_td, seen_jax = [], []
    f_td, f_jax = make(td, td, seen_td), make(jax, jnp, seen_jax)
    tree_close(td.grad(lambda x: f_td(x)[0])(1.0), jax.grad(lambda x: f_jax(x)[0])(1.0))
    assert seen_td == seen_jax == ["zero"]


def test_bwd_may_return_symbolic_zeros_of_the_right_type_only():
    for api in (td, jax):
        cd = api.custom_derivatives

        @api.custom_vjp
        def f(x, y):
            return x * y

        f.defvjp(lambda x, y: (f(x.value, y.value), y.value),
                 lambda y, g: (y * g, cd.SymbolicZero.from_primal_value(y)),
                 symbolic_zeros=True)
        assert float(api.grad(f, argnums=1)(3.0, 2.0)) == 0.0
        assert float(api.grad(f)(3.0, 2.0)) == 2.0

        @api.custom_vjp
        def g(x):
            return x * 2.0

        g.defvjp(lambda x: (g(x.value), None),
                 lambda _, ct: (cd.SymbolicZero.from_primal_value(np.zeros(3)),),
                 symbolic_zeros=True)
        with pytest.raises(ValueError, match="SymbolicZero with a shape/dtype that does not match"):
            api.grad(g)(1.0)


def test_fwd_returning_the_primal_record_is_refused():
    @td.custom_vjp
    def f(x):
        return x * 2.0

    f.defvjp(lambda x: (f(x.value), x), lambda r, g: (2.0 * g,), symbolic_zeros=True)
    with pytest.raises(TypeError, match=r"CustomVJPPrimal .*return its \.value"):
        td.grad(f)(1.0)


def test_forward_mode_still_refused():
    f = make_pair(td, td, [])
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        td.jvp(lambda x: f(x, 2.0)[0], (0.3,), (1.0,))
