"""Custom derivative rules (td.custom_jvp, td.custom_vjp) and implicit differentiation
(td.lax.custom_root, td.lax.custom_linear_solve) against jax in x64: every example of jax's
"Custom derivative rules" tutorial written with td. names, first and second order, under jit,
vmap, scan, cond and checkpoint, on both backends; saved programs; jax's errors."""

from __future__ import annotations

from collections import namedtuple
from functools import partial

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)


def close(got, want, tol=1e-10):
    gl, wl = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(gl) == len(wl), (got, want)
    for g, w in zip(gl, wl):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


# ---- the tutorial's functions, written once for (numpy-like, jax-like) modules ----


def make_log1pexp(ns, api):
    @api.custom_jvp
    def log1pexp(x):
        return ns.log(1.0 + ns.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        (x,), (x_dot,) = primals, tangents
        ans = log1pexp(x)
        return ans, x_dot * (1 - 1 / (1 + ns.exp(x)))

    return log1pexp


def make_sin_times(ns, api, defjvps):
    @api.custom_jvp
    def f(x, y):
        return ns.sin(x) * y

    if defjvps:
        f.defjvps(lambda x_dot, out, x, y: ns.cos(x) * x_dot * y,
                  lambda y_dot, out, x, y: ns.sin(x) * y_dot)
    else:
        @f.defjvp
        def f_jvp(primals, tangents):
            x, y = primals
            x_dot, y_dot = tangents
            return f(x, y), ns.cos(x) * x_dot * y + ns.sin(x) * y_dot

    return f


def make_convention(ns, api):
    @api.custom_jvp
    def f(x):
        return x / (1 + ns.sqrt(x))

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (x_dot,) = primals, tangents
        ans = f(x)
        return ans, ((ns.sqrt(x) + 2) / (2 * (ns.sqrt(x) + 1) ** 2)) * x_dot

    return f


def make_sin_vjp(ns, api):
    @api.custom_vjp
    def f(x, y):
        return ns.sin(x) * y

    def f_fwd(x, y):
        return f(x, y), (ns.cos(x), ns.sin(x), y)

    def f_bwd(res, g):
        cos_x, sin_x, y = res
        return (cos_x * g * y, sin_x * g)

    f.defvjp(f_fwd, f_bwd)
    return f


def make_clip_gradient(ns, api):
    @api.custom_vjp
    def clip_gradient(lo, hi, x):
        return x

    def fwd(lo, hi, x):
        return x, (lo, hi)

    def bwd(res, g):
        lo, hi = res
        return (None, None, ns.clip(g, lo, hi))

    clip_gradient.defvjp(fwd, bwd)
    return clip_gradient


def make_fixed_point(ns, api, while_loop, vjp):
    @partial(api.custom_vjp, nondiff_argnums=(0,))
    def fixed_point(f, a, x_guess):
        def cond_fun(carry):
            x_prev, x = carry
            return ns.abs(x_prev - x) > 1e-12

        def body_fun(carry):
            _, x = carry
            return x, f(a, x)

        _, x_star = while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
        return x_star

    def fixed_point_fwd(f, a, x_init):
        x_star = fixed_point(f, a, x_init)
        return x_star, (a, x_star)

    def rev_iter(f, packed, u):
        a, x_star, x_star_bar = packed
        _, vjp_x = vjp(lambda x: f(a, x), x_star)
        return x_star_bar + vjp_x(u)[0]

    def fixed_point_rev(f, res, x_star_bar):
        a, x_star = res
        _, vjp_a = vjp(lambda a: f(a, x_star), a)
        (a_bar,) = vjp_a(fixed_point(partial(rev_iter, f), (a, x_star, x_star_bar), x_star_bar))
        return a_bar, ns.zeros_like(x_star)

    fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)

    def newton_sqrt(a):
        return fixed_point(lambda a, x: 0.5 * (x + a / x), a, a)

    return newton_sqrt


Point = namedtuple("Point", ["x", "y"])


def make_point_jvp(ns, api):
    @api.custom_jvp
    def f(pt):
        return {"a": pt.x ** 2, "b": (ns.sin(pt.x), ns.cos(pt.y))}

    @f.defjvp
    def f_jvp(primals, tangents):
        (pt,), (pt_dot,) = primals, tangents
        return f(pt), {"a": 2 * pt.x * pt_dot.x,
                       "b": (ns.cos(pt.x) * pt_dot.x, -ns.sin(pt.y) * pt_dot.y)}

    return lambda pt: f(pt)["a"] + f(pt)["b"][0]


def make_point_vjp(ns, api):
    @api.custom_vjp
    def f(pt):
        return {"a": pt.x ** 2, "b": (ns.sin(pt.x), ns.cos(pt.y))}

    def f_fwd(pt):
        return f(pt), pt

    def f_bwd(pt, g):
        a_bar, (b0_bar, b1_bar) = g["a"], g["b"]
        return (Point(2 * pt.x * a_bar + ns.cos(pt.x) * b0_bar, -ns.sin(pt.y) * b1_bar),)

    f.defvjp(f_fwd, f_bwd)
    return lambda pt: f(pt)["a"] + f(pt)["b"][0] + f(pt)["b"][1]


def make_app_jvp(api):
    @partial(api.custom_jvp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    @app.defjvp
    def app_jvp(f, primals, tangents):
        (x,), (x_dot,) = primals, tangents
        return f(x), 2.0 * x_dot

    return lambda x: app(lambda x: x ** 3, x)


def make_app_vjp(api):
    @partial(api.custom_vjp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    app.defvjp(lambda f, x: (f(x), x), lambda f, x, g: (5 * g,))
    return lambda x: app(lambda x: x ** 3, x)


TD = (td, td)
JX = (jnp, jax)


# ---- custom_jvp ----


def test_log1pexp_is_stable_and_matches_jax():
    ft, fj = make_log1pexp(*TD), make_log1pexp(*JX)
    for x in (3.0, 1000.0, -20.0):
        close(ft(x), fj(x))
        close(td.grad(ft)(x), jax.grad(fj)(x))
        close(td.jit(td.grad(ft))(x), jax.grad(fj)(x))
        close(td.jvp(ft, (x,), (0.5,)), jax.jvp(fj, (x,), (0.5,)))
        close(td.grad(td.grad(ft))(x), jax.grad(jax.grad(fj))(x))
    assert td.grad(ft)(1000.0) == 1.0  # autodiff of log(1 + exp(x)) gives nan here
    assert np.isnan(td.grad(lambda x: td.log(1.0 + td.exp(x)))(1000.0))


def test_log1pexp_under_vmap_scan_cond_checkpoint():
    ft, fj = make_log1pexp(*TD), make_log1pexp(*JX)
    xs = np.linspace(-3.0, 3.0, 7)
    close(td.vmap(ft)(xs), jax_value(jax.vmap(fj), xs))
    close(td.vmap(td.grad(ft))(xs), jax_value(jax.vmap(jax.grad(fj)), xs))
    close(td.grad(lambda x: td.sum(td.vmap(ft)(x)))(xs),
          jax_value(jax.grad(lambda x: jnp.sum(jax.vmap(fj)(x))), xs))
    close(td.hessian(lambda x: td.sum(ft(x)))(xs),
          jax_value(jax.hessian(lambda x: jnp.sum(fj(x))), xs))

    def scanned(ns, L, f):
        return lambda x: L.scan(lambda c, v: (c + f(v * c), f(c)), x, xs)[0]

    st, sj = scanned(td, td.lax, ft), scanned(jnp, lax, fj)
    close(td.grad(st)(0.3), jax_value(jax.grad(sj), 0.3))
    close(td.jvp(st, (0.3,), (1.0,)), jax_value(lambda x, t: jax.jvp(sj, (x,), (t,)), 0.3, 1.0))
    ct = lambda x: td.cond(x > 0, ft, lambda x: x * x, x)  # noqa: E731
    cj = lambda x: lax.cond(x > 0, fj, lambda x: x * x, x)  # noqa: E731
    for x in (-1.5, 2.0):
        close(td.grad(ct)(x), jax_value(jax.grad(cj), x))
    close(td.grad(td.checkpoint(ft))(1.5), jax_value(jax.grad(jax.checkpoint(fj)), 1.5))


@pytest.mark.parametrize("defjvps", [False, True])
def test_two_argument_rule_and_defjvps(defjvps):
    ft, fj = make_sin_times(td, td, defjvps), make_sin_times(jnp, jax, defjvps)
    close(ft(2.0, 3.0), jax_value(fj, 2.0, 3.0))
    close(td.grad(ft, argnums=(0, 1))(2.0, 3.0), jax_value(jax.grad(fj, argnums=(0, 1)), 2.0, 3.0))
    close(td.jvp(ft, (2.0, 3.0), (1.0, -1.0)),
          jax_value(lambda x, y: jax.jvp(fj, (x, y), (1.0, -1.0)), 2.0, 3.0))
    close(td.hessian(ft, argnums=(0, 1))(2.0, 3.0),
          jax_value(jax.hessian(fj, argnums=(0, 1)), 2.0, 3.0))
    x, y = np.linspace(0, 1, 4), np.linspace(1, 2, 4)
    close(td.vmap(td.grad(ft))(x, y), jax_value(jax.vmap(jax.grad(fj)), x, y))
    close(td.vmap(td.grad(ft), in_axes=(0, None))(x, 2.0),
          jax_value(jax.vmap(jax.grad(fj), in_axes=(0, None)), x, 2.0))
    # vmap first: the rule is batched with the op (an unbatched argument's tangent too)
    lt = lambda x, y: td.sum(td.vmap(ft, in_axes=(0, None))(x, y))  # noqa: E731
    lj = lambda x, y: jnp.sum(jax.vmap(fj, in_axes=(0, None))(x, y))  # noqa: E731
    close(td.grad(lt, argnums=(0, 1))(x, 2.0), jax_value(jax.grad(lj, argnums=(0, 1)), x, 2.0))
    close(td.jvp(lambda y: td.vmap(ft, in_axes=(0, None))(x, y), (2.0,), (1.0,)),
          jax_value(lambda x, y: jax.jvp(lambda y: jax.vmap(fj, in_axes=(0, None))(x, y), (y,),
                                         (1.0,)), x, 2.0))
    a = np.linspace(0, 1, 6).reshape(2, 3)
    close(td.grad(lambda a: td.sum(td.vmap(td.vmap(ft))(a, a)))(a),
          jax_value(jax.grad(lambda a: jnp.sum(jax.vmap(jax.vmap(fj))(a, a))), a))


def test_rule_that_is_not_autodiff_of_the_function_is_used():
    """The tutorial's convention at 0: the rule's value, where autodiff of f is nan."""
    ft, fj = make_convention(*TD), make_convention(*JX)
    close(td.grad(ft)(0.0), jax.grad(fj)(0.0))
    assert td.grad(ft)(0.0) == 1.0
    close(td.jit(td.grad(td.grad(ft)))(1.0), jax.grad(jax.grad(fj))(1.0))


def test_pytree_arguments_and_outputs():
    pt = Point(1.0, 2.0)
    close(td.grad(make_point_jvp(*TD))(pt), jax.grad(make_point_jvp(*JX))(pt))
    g = td.grad(make_point_vjp(*TD))(pt)
    assert isinstance(g, Point)
    close(g, jax.grad(make_point_vjp(*JX))(pt))


def test_nondiff_argnums_pass_functions_to_the_rules():
    close(make_app_jvp(td)(3.0), 27.0)
    assert td.grad(make_app_jvp(td))(3.0) == 2.0
    close(td.grad(make_app_jvp(td))(3.0), jax.grad(make_app_jvp(jax))(3.0))
    assert td.grad(make_app_vjp(td))(3.0) == 5.0
    close(td.jit(td.grad(make_app_vjp(td)))(3.0), jax.grad(make_app_vjp(jax))(3.0))


def test_inactive_argument_gets_a_zero_tangent():
    seen = []

    @td.custom_jvp
    def f(x, y):
        return x * y

    @f.defjvp
    def f_jvp(primals, tangents):
        seen.append(tangents)
        (x, y), (dx, dy) = primals, tangents
        return f(x, y), dx * y + x * dy

    assert td.grad(f)(2.0, 5.0) == 5.0  # dy is a zero, not missing
    assert td.grad(f, argnums=1)(2.0, 5.0) == 2.0


# ---- custom_vjp ----


def test_custom_vjp_values_grad_vmap():
    ft, fj = make_sin_vjp(*TD), make_sin_vjp(*JX)
    close(ft(2.0, 3.0), fj(2.0, 3.0))
    close(td.grad(ft, argnums=(0, 1))(2.0, 3.0), jax.grad(fj, argnums=(0, 1))(2.0, 3.0))
    close(td.jit(td.grad(ft))(2.0, 3.0), jax.grad(fj)(2.0, 3.0))
    close(td.vjp(ft, 2.0, 3.0)[1](1.5), jax.vjp(fj, 2.0, 3.0)[1](1.5))
    x = np.linspace(0.0, 1.0, 5)
    close(td.vmap(td.grad(ft))(x, x + 1), jax.vmap(jax.grad(fj))(x, x + 1))
    # vmap first: the rule is batched; an unbatched argument's cotangent sums over the batch
    lt = lambda x, y: td.sum(td.vmap(ft, in_axes=(0, None))(x, y))  # noqa: E731
    lj = lambda x, y: jnp.sum(jax.vmap(fj, in_axes=(0, None))(x, y))  # noqa: E731
    close(td.grad(lt, argnums=(0, 1))(x, 2.0), jax.grad(lj, argnums=(0, 1))(x, 2.0))
    close(td.jacrev(lambda x: ft(x, x))(x), jax.jacrev(lambda x: fj(x, x))(x))
    # second order: bwd (and fwd's residuals) are differentiated as ordinary code; jax's
    # hessian (forward over reverse) refuses a custom_vjp, tidu's gives jacrev(jacrev)'s values
    close(td.grad(td.grad(ft))(2.0, 3.0), jax.grad(jax.grad(fj))(2.0, 3.0))
    close(td.hessian(ft, argnums=(0, 1))(2.0, 3.0),
          jax.jacrev(jax.jacrev(fj, argnums=(0, 1)), argnums=(0, 1))(2.0, 3.0))


def test_clip_gradient():
    ct, cj = make_clip_gradient(*TD), make_clip_gradient(*JX)
    t = np.linspace(0, 10, 100)
    got = td.vmap(td.grad(lambda x: ct(-0.75, 0.75, td.sin(x))))(t)
    close(got, jax.vmap(jax.grad(lambda x: cj(-0.75, 0.75, jnp.sin(x))))(t))
    assert np.abs(got).max() == 0.75


def test_fixed_point_implicit_derivative_through_while_loop():
    """The tutorial's fixed_point: the while loop is never differentiated (reverse mode of a
    while_loop is refused), first and second order."""
    nt = make_fixed_point(td, td, td.while_loop, td.vjp)
    nj = make_fixed_point(jnp, jax, lax.while_loop, jax.vjp)
    close(nt(2.0), nj(2.0))
    close(td.grad(nt)(2.0), jax.grad(nj)(2.0))
    close(td.jit(td.grad(nt))(2.0), 0.5 / np.sqrt(2.0))
    close(td.grad(td.grad(nt))(2.0), jax.grad(jax.grad(nj))(2.0), tol=1e-8)


def test_scan_and_checkpoint_over_custom_vjp():
    ft, fj = make_sin_vjp(*TD), make_sin_vjp(*JX)
    xs = np.linspace(0.1, 0.9, 5)
    st = lambda y: td.sum(td.scan(lambda c, x: (ft(x, c), c), y, xs)[1])  # noqa: E731
    sj = lambda y: jnp.sum(lax.scan(lambda c, x: (fj(x, c), c), y, xs)[1])  # noqa: E731
    close(td.grad(st)(1.3), jax.grad(sj)(1.3))
    close(td.grad(td.checkpoint(lambda x: ft(x, 2.0)))(0.4), jax.grad(lambda x: fj(x, 2.0))(0.4))


@pytest.mark.parametrize("backend", ["cpu", "xla"])
def test_backends_agree(backend):
    ft, fj = make_log1pexp(*TD), make_log1pexp(*JX)
    vt, vj = make_sin_vjp(*TD), make_sin_vjp(*JX)
    xs = np.linspace(-2.0, 2.0, 5)
    g = td.jit(td.grad(lambda x: td.sum(ft(x)) + td.sum(vt(x, x))), backend=backend)
    close(g(xs), jax.grad(lambda x: jnp.sum(fj(x)) + jnp.sum(vj(x, x)))(xs))


def test_equal_calls_are_one_op():
    ft = make_log1pexp(*TD)
    frag = td.build(lambda x: ft(x) + ft(x), x=td.spec((3,)))
    assert sum(type(op).__name__ == "CustomJVP" for op, *_ in frag.ops()) == 1


# ---- implicit differentiation: custom_root, custom_linear_solve ----


def newton_root(ns, L, jvp, fori_loop):
    def solve(f, x0):
        return fori_loop(0, 30, lambda i, x: x - f(x) / jvp(f, (x,), (ns.ones_like(x),))[1], x0)

    def root(theta):
        return L.custom_root(lambda x: x ** 3 + theta * x - 2.0, 1.0, solve,
                             lambda g, y: y / g(1.0))

    return root


def newton_vjp(ns, api, fori_loop):
    """The same root with custom_vjp: dx/dtheta = -(df/dtheta) / (df/dx)."""
    @api.custom_vjp
    def root(theta):
        return fori_loop(0, 30, lambda i, x: x - (x ** 3 + theta * x - 2.0) /
                         (3 * x ** 2 + theta), 1.0 + 0 * theta)

    def fwd(theta):
        x = root(theta)
        return x, (x, theta)

    def bwd(res, g):
        x, theta = res
        return (-g * x / (3 * x ** 2 + theta),)

    root.defvjp(fwd, bwd)
    return root


def test_custom_root_newton_inside_jit():
    rt = newton_root(td, td.lax, td.jvp, td.fori_loop)
    rj = newton_root(jnp, lax, jax.jvp, lax.fori_loop)
    for theta in (0.5, 2.0):
        close(rt(theta), rj(theta))
        close(td.jit(td.grad(rt))(theta), jax.jit(jax.grad(rj))(theta))
        close(td.jvp(rt, (theta,), (1.0,)), jax.jvp(rj, (theta,), (1.0,)))
        close(td.grad(td.grad(rt))(theta), jax.grad(jax.grad(rj))(theta))
    thetas = np.array([0.5, 1.0, 3.0])
    close(td.jit(td.vmap(td.grad(rt)))(thetas), jax.vmap(jax.grad(rj))(thetas))
    close(td.jit(td.grad(newton_vjp(td, td, td.fori_loop)))(0.5), jax.grad(rj)(0.5))


def test_custom_root_pytree_and_aux():
    def solve(f, x0):
        x = td.fori_loop(0, 40, lambda i, x: {"u": x["u"] - 0.5 * f(x)["u"]}, x0)
        return x, td.sum(x["u"])

    def root(a):
        return td.lax.custom_root(lambda x: {"u": x["u"] - a}, {"u": td.zeros(3)}, solve,
                                  lambda g, y: y, has_aux=True)

    a = np.array([1.0, 2.0, 3.0])
    sol, aux = td.jit(root)(a)
    close(sol["u"], a, tol=1e-9)
    close(td.grad(lambda a: td.sum(root(a)[0]["u"] ** 2))(a), 2 * a, tol=1e-8)


def linear_solve(ns, L, symmetric):
    def f(a, b):
        m = a @ a.T + 3 * ns.eye(3) if symmetric else a + 3 * ns.eye(3)
        return L.custom_linear_solve(lambda x: m @ x, b, lambda mv, b: ns.linalg.solve(m, b),
                                     None if symmetric else
                                     (lambda vm, b: ns.linalg.solve(m.T, b)),
                                     symmetric=symmetric)

    return f


@pytest.mark.parametrize("symmetric", [False, True])
def test_custom_linear_solve(symmetric):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 3)), rng.standard_normal(3)
    ft, fj = linear_solve(td, td.lax, symmetric), linear_solve(jnp, lax, symmetric)
    close(ft(a, b), fj(a, b))
    lt = lambda a, b: td.sum(ft(a, b) ** 2)  # noqa: E731
    lj = lambda a, b: jnp.sum(fj(a, b) ** 2)  # noqa: E731
    close(td.jit(td.grad(lt, argnums=(0, 1)))(a, b), jax.grad(lj, argnums=(0, 1))(a, b))
    da, db = rng.standard_normal((3, 3)), rng.standard_normal(3)
    close(td.jvp(ft, (a, b), (da, db)), jax.jvp(fj, (a, b), (da, db)))
    bs = rng.standard_normal((4, 3))
    close(td.vmap(td.grad(lt, argnums=1), in_axes=(None, 0))(a, bs),
          jax.vmap(jax.grad(lj, argnums=1), in_axes=(None, 0))(a, bs))


def test_implicit_derivatives_on_xla():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 3)), rng.standard_normal(3)
    ft, fj = linear_solve(td, td.lax, False), linear_solve(jnp, lax, False)
    lt = lambda a, b: td.sum(ft(a, b) ** 2)  # noqa: E731
    lj = lambda a, b: jnp.sum(fj(a, b) ** 2)  # noqa: E731
    close(td.jit(td.grad(lt, argnums=(0, 1)), backend="xla")(a, b),
          jax.grad(lj, argnums=(0, 1))(a, b))
    close(td.jit(lambda a, b: td.jvp(ft, (a, b), (b[:, None] * a, b)), backend="xla")(a, b),
          jax.jvp(fj, (a, b), (b[:, None] * a, b)))
    rt = newton_root(td, td.lax, td.jvp, td.fori_loop)
    close(td.jit(td.grad(rt), backend="xla")(0.7),
          jax.grad(newton_root(jnp, lax, jax.jvp, lax.fori_loop))(0.7))


def test_custom_linear_solve_without_transpose_refuses_reverse_mode():
    def f(b):
        return td.lax.custom_linear_solve(lambda x: 2.0 * x, b, lambda mv, b: b / 2.0)

    close(td.jvp(f, (np.ones(2),), (np.ones(2),))[1], 0.5 * np.ones(2))
    with pytest.raises(TypeError, match="transpose_solve required"):
        td.grad(lambda b: td.sum(f(b)))(np.ones(2))


# ---- saved programs ----


def test_saved_program_with_custom_rules_loads_and_runs(tmp_path):
    ft, vt = make_log1pexp(*TD), make_sin_vjp(*TD)
    rt = newton_root(td, td.lax, td.jvp, td.fori_loop)

    def loss(x):
        return td.sum(ft(x)) + td.sum(vt(x, x)) + rt(td.sum(x) ** 2)

    x = np.array([0.3, -0.2, 0.5])
    low = td.jit(td.value_and_grad(loss)).lower(x)
    low.save(tmp_path / "custom.tidu")
    loaded = td.load(tmp_path / "custom.tidu")
    got = loaded.eval([x])
    want = jax.value_and_grad(lambda x: jnp.sum(make_log1pexp(*JX)(x)) +
                              jnp.sum(make_sin_vjp(*JX)(x, x)) +
                              newton_root(jnp, lax, jax.jvp, lax.fori_loop)(jnp.sum(x) ** 2))(x)
    close(got, want)


# ---- errors ----


def test_forward_mode_of_custom_vjp_is_refused_as_in_jax():
    ft = make_sin_vjp(*TD)
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        td.jvp(ft, (2.0, 3.0), (1.0, 1.0))
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        td.jacfwd(lambda x: ft(x, 3.0))(np.ones(2))


def test_missing_rules_raise_attribute_error():
    f = td.custom_jvp(lambda x: x)
    with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function"):
        f(1.0)
    g = td.custom_vjp(lambda x: x)
    with pytest.raises(AttributeError, match="No VJP defined for custom_vjp function"):
        td.grad(g)(1.0)


def test_bad_rules_raise_jax_errors():
    f = td.custom_jvp(lambda x: td.sin(x))
    f.defjvp(lambda p, t: (td.sin(p[0]), td.ones(3)))
    with pytest.raises(TypeError, match=r"Expected float64\[\] \(tangent type of float64\[\]\) "
                                        r"but got float64\[3\]"):
        td.jvp(f, (1.0,), (1.0,))
    f.defjvp(lambda p, t: (td.sin(p[0]), (t[0], t[0])))
    with pytest.raises(TypeError, match="equal container"):
        td.grad(f)(1.0)
    g = td.custom_vjp(lambda x, y: td.sin(x) * y)
    g.defvjp(lambda x, y: (g(x, y), (x, y)), lambda r, c: (c,))
    with pytest.raises(TypeError, match="tuple of length equal to the number of arguments"):
        td.grad(g)(1.0, 2.0)
    g.defvjp(lambda x, y: (g(x, y), (x, y)), lambda r, c: (c, td.ones(3)))
    with pytest.raises(ValueError, match=r"at output\[1\] .* float64\[3\] .* shapes do not match"):
        td.grad(g)(1.0, 2.0)


def test_closing_over_a_differentiated_value_is_refused():
    def outer(y):
        @td.custom_jvp
        def h(x):
            return x * y

        h.defjvp(lambda p, t: (h(p[0]), t[0] * y))
        return h(2.0)

    with pytest.raises(TypeError, match="closes over a value being differentiated"):
        td.grad(outer)(3.0)
    close(td.jit(outer)(3.0), 6.0)  # not differentiated: fine


def test_transform_inside_a_loop_body_on_a_captured_value():
    """A vjp inside a while_loop body of a value from outside the body (fixed_point's rev_iter
    does this): the transform is traced into the body, which captures the value."""
    def g(a):
        x_star = a * 2.0

        def body(c):
            _, pb = td.vjp(lambda x: x * x * a, x_star)
            return c + pb(1.0)[0]

        return td.while_loop(lambda c: c < 10.0, body, 0.0)

    assert td.jit(g)(1.0) == 12.0


def test_lax_namespace():
    x = np.arange(5.0)
    assert td.jit(lambda x: td.lax.dynamic_slice(x, (1,), (2,)))(x).tolist() == [1.0, 2.0]
    close(td.jit(lambda x: td.lax.scan(lambda c, v: (c + v, c), 0.0, x))(x),
          lax.scan(lambda c, v: (c + v, c), 0.0, x))
    assert td.grad(lambda x: td.lax.stop_gradient(x) * x)(3.0) == 3.0


def test_rules_closing_over_traced_values_inside_loops_and_vmap():
    """A rule reading a value of the enclosing trace: the op gets it as an operand, so the rule
    traced later inside a scan body, or batched by vmap, reads the body's (batched) value."""
    def make(kind):
        def outer(x, s):
            if kind == "jvp":
                f = td.custom_jvp(lambda x: x * 2.0)
                f.defjvp(lambda p, t: (f(p[0]), t[0] * s * 10))
            else:
                f = td.custom_vjp(lambda x: x * 2.0)
                f.defvjp(lambda x: (f(x), None), lambda r, g: (g * s * 10,))
            return f, td.scan(lambda c, v: (f(c) + v, None), x, np.ones(2))[0]

        return outer

    for kind in ("jvp", "vjp"):
        outer = make(kind)
        assert td.jit(td.grad(lambda x, s: outer(x, s)[1]))(2.0, 3.0) == 900.0  # (10 s)^2
        s = np.array([1.0, 2.0])
        one = lambda x, s: outer(x, s)[0](x)  # noqa: E731
        close(td.grad(lambda x: td.sum(td.vmap(one)(x, s)))(np.ones(2)), np.array([10.0, 20.0]))
        close(td.grad(lambda x: td.sum(td.vmap(one, in_axes=(None, 0))(x, s)))(1.0), 30.0)
        with pytest.raises(TypeError, match="closes over a value being differentiated"):
            td.grad(lambda s: outer(2.0, s)[1])(3.0)


def test_rules_keep_no_traced_value_alive_after_the_trace():
    """An op holds its rule and the interner's tables hold the op; the rule holds the user's
    functions (and the traced values they close over) only while the trace lasts, so
    clear_caches can empty the interner afterwards, and the functions work again after it."""
    rt = newton_root(td, td.lax, td.jvp, td.fori_loop)
    g = td.jit(td.grad(rt))
    want = g(0.5)
    assert td.clear_caches()
    assert g(0.5) == want
    ft = make_log1pexp(*TD)
    assert td.grad(ft)(1.0) == td.grad(ft)(1.0)
    assert td.clear_caches()


# ---- symbolic zeros (custom_jvp) ----


def make_symbolic(api, ns, zero_type, seen):
    @api.custom_jvp
    def f(x, y):
        return ns.sin(x) * y

    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        seen.append(tuple(isinstance(t, zero_type) for t in tangents))
        t = 0.0
        if not isinstance(tx, zero_type):
            t = t + ns.cos(x) * y * tx
        if not isinstance(ty, zero_type):
            t = t + ns.sin(x) * ty
        return f(x, y), t

    f.defjvp(f_jvp, symbolic_zeros=True)

    @api.custom_jvp
    def no_tangent(x):
        return x * 2

    no_tangent.defjvp(lambda p, t: (no_tangent(p[0]), zero_type.from_primal_value(p[0])),
                      symbolic_zeros=True)
    return f, no_tangent


def test_symbolic_zeros_reach_the_rule_where_jax_passes_them():
    seen_td, seen_jax = [], []
    f, g = make_symbolic(td, td, td.custom_derivatives.SymbolicZero, seen_td)
    jf, jg = make_symbolic(jax, jnp, jax.custom_derivatives.SymbolicZero, seen_jax)
    close(td.grad(f)(0.3, 2.0), jax.grad(jf)(0.3, 2.0))
    close(td.grad(f, argnums=1)(0.3, 2.0), jax.grad(jf, argnums=1)(0.3, 2.0))
    close(td.jit(td.grad(f, argnums=(0, 1)))(0.3, 2.0), jax.grad(jf, argnums=(0, 1))(0.3, 2.0))
    x, y = np.array([0.1, 0.2]), np.array([1.0, 2.0])
    close(td.vmap(td.grad(f))(x, y), jax.vmap(jax.grad(jf))(x, y))
    assert seen_td == seen_jax and seen_td[:2] == [(False, True), (True, False)]
    close(td.grad(lambda x: g(x) + x)(1.0), 1.0)  # the rule's SymbolicZero output is zero
    with pytest.raises(TypeError, match="no truth value"):
        bool(td.custom_derivatives.SymbolicZero(td.spec(())))
