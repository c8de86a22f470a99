"""Random compositions differentiated by tidu and by JAX (the reference), float64 and complex128.

A hypothesis-drawn program of elementwise ops, broadcasting, reductions, indexing and matmul is
written once against a numpy-like namespace and run with ``tidu`` and ``jax.numpy``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tidu as td
from _support.compare import jax_value

jax.config.update("jax_enable_x64", True)

UNARY = ["sin", "tanh", "cos", "square", "exp_tanh", "neg"]
STEPS = ["unary", "add_row", "mul_row", "slice", "matmul", "transpose_back", "div_safe"]


def make_program(steps, ns):
    """f(x (3,4), y (4,)) -> scalar, from steps drawn by hypothesis."""

    def unary(kind, v):
        if kind == "sin":
            return ns.sin(v)
        if kind == "cos":
            return ns.cos(v)
        if kind == "tanh":
            return ns.tanh(v)
        if kind == "square":
            return v * v
        if kind == "exp_tanh":
            return ns.exp(ns.tanh(v))
        return -v

    def f(x, y):
        v = x
        for step, kind in steps:
            if step == "unary":
                v = unary(kind, v)
            elif step == "add_row":
                v = v + y
            elif step == "mul_row":
                v = v * y
            elif step == "slice":
                v = ns.concatenate([v[:, 1:], v[:, :1]], axis=1)
            elif step == "matmul":
                v = ns.tanh(v @ (y[:, None] * y[None, :]) * 0.1)
            elif step == "transpose_back":
                v = ns.transpose(ns.transpose(v) * y[:, None])
            elif step == "div_safe":
                v = v / (2.0 + ns.cos(v))
        return ns.sum(v * v) + ns.sum(ns.sin(v[0]))

    return f


def complex_loss(f_prog, ns):
    """A real loss of complex inputs: |f|^2 style through real/imag."""

    def f(x, y):
        v = x
        v = v * y + ns.sin(v)
        v = v @ (y[:, None] * y[None, :]) * 0.1
        return ns.sum(ns.real(v * ns.conj(v))) + ns.sum(ns.imag(v[0] * v[1]))

    return f


steps_st = st.lists(st.tuples(st.sampled_from(STEPS), st.sampled_from(UNARY)),
                    min_size=1, max_size=6)
rng = np.random.default_rng(0)


@settings(max_examples=25, deadline=None)
@given(steps_st, st.integers(0, 2**31 - 1))
def test_random_programs_match_jax(steps, seed):
    r = np.random.default_rng(seed)
    x, y = r.standard_normal((3, 4)) * 0.7, r.standard_normal(4) * 0.7
    tx, ty = r.standard_normal((3, 4)), r.standard_normal(4)
    f_td, f_jx = make_program(steps, td), make_program(steps, jnp)

    # value and gradient
    v, (gx, gy) = td.value_and_grad(f_td, argnums=(0, 1))(x, y)
    jv, (jgx, jgy) = jax.value_and_grad(f_jx, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(v, jv, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gx, jgx, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(gy, jgy, rtol=1e-9, atol=1e-11)

    # jvp
    _, t = td.jvp(f_td, (x, y), (tx, ty))
    _, jt = jax.jvp(f_jx, (x, y), (tx, ty))
    np.testing.assert_allclose(t, jt, rtol=1e-9, atol=1e-11)

    # hessian wrt x (forward over reverse on the pipeline)
    h = td.hessian(lambda x: f_td(x, y))(x)
    jh = jax.hessian(lambda x: f_jx(x, y))(x)
    np.testing.assert_allclose(h, jh, rtol=1e-8, atol=1e-10)


def test_vjp_of_vector_output_matches_jax():
    f_td = lambda x, y: td.tanh(x @ y) * x[:, 0]  # noqa: E731
    f_jx = lambda x, y: jnp.tanh(x @ y) * x[:, 0]  # noqa: E731
    x, y = rng.standard_normal((3, 4)), rng.standard_normal(4)
    ct = rng.standard_normal(3)
    out, back = td.vjp(f_td, x, y)
    jout, jback = jax.vjp(f_jx, x, y)
    np.testing.assert_allclose(out, jout, rtol=1e-12)
    for a, b in zip(back(ct), jback(ct)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_complex_gradient_is_conj_of_jax_grad():
    f_td, f_jx = complex_loss(None, td), complex_loss(None, jnp)
    x = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    y = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    gx, gy = td.grad(f_td, argnums=(0, 1))(x, y)
    jgx, jgy = jax_value(jax.grad(f_jx, argnums=(0, 1)), x, y)
    np.testing.assert_allclose(gx, np.conj(jgx), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gy, np.conj(jgy), rtol=1e-10, atol=1e-12)
    tx = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    ty = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    _, t = td.jvp(f_td, (x, y), (tx, ty))
    jt = jax_value(lambda *a: jax.jvp(f_jx, a[:2], a[2:])[1], x, y, tx, ty)
    np.testing.assert_allclose(t, jt, rtol=1e-10, atol=1e-12)


def test_jacobians_match_jax():
    f_td = lambda x: td.sin(x) * td.sum(x * x)  # noqa: E731
    f_jx = lambda x: jnp.sin(x) * jnp.sum(x * x)  # noqa: E731
    x = rng.standard_normal(4)
    np.testing.assert_allclose(td.jacfwd(f_td)(x), jax_value(jax.jacfwd(f_jx), x), rtol=1e-11,
                               atol=1e-12)
    np.testing.assert_allclose(td.jacrev(f_td)(x), jax_value(jax.jacrev(f_jx), x), rtol=1e-11,
                               atol=1e-12)


def test_nested_grad_matches_jax():
    f = lambda x: td.sin(x) * x * x  # noqa: E731
    g = lambda x: jnp.sin(x) * x * x  # noqa: E731
    assert td.grad(td.grad(f))(0.7) == pytest.approx(float(jax.grad(jax.grad(g))(0.7)), rel=1e-12)
    hv = td.hvp(lambda x: td.sum(td.sin(x) * x[0]), (np.arange(3.0),), (np.ones(3),))
    jhv = jax.jvp(jax.grad(lambda x: jnp.sum(jnp.sin(x) * x[0])), (np.arange(3.0),),
                  (np.ones(3),))[1]
    np.testing.assert_allclose(hv, jhv, rtol=1e-12)


def test_has_aux_and_pytrees_follow_jax():
    def f(p, x):
        loss = td.sum((p["w"] @ x + p["b"]) ** 2)
        return loss, {"l": loss * 2}

    p = {"w": rng.standard_normal((2, 3)), "b": rng.standard_normal(2)}
    x = rng.standard_normal(3)
    g, aux = td.grad(f, has_aux=True)(p, x)
    jg, jaux = jax.grad(lambda p, x: (jnp.sum((p["w"] @ x + p["b"]) ** 2),
                                      {"l": 2 * jnp.sum((p["w"] @ x + p["b"]) ** 2)}),
                        has_aux=True)(p, x)
    np.testing.assert_allclose(g["w"], jg["w"], rtol=1e-12)
    np.testing.assert_allclose(g["b"], jg["b"], rtol=1e-12)
    assert float(aux["l"]) == pytest.approx(float(jaux["l"]))


def test_int_arguments_are_never_differentiable():
    f = lambda x, n: x * td.astype(n, "float64")  # noqa: E731
    assert td.grad(f)(2.0, np.int32(3)) == 3.0
    with pytest.raises(TypeError, match="argument 1: dtype int32 is not differentiable"):
        td.grad(f, argnums=1)(2.0, np.int32(3))
    with pytest.raises(TypeError, match="real scalar output"):
        td.grad(lambda x: x * 2)(np.ones(2))


def _leaves_close(a, b, rtol=1e-11, atol=1e-12):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        assert np.shape(u) == np.shape(v)
        np.testing.assert_allclose(u, v, rtol=rtol, atol=atol)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0)])
@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_jacobians_of_pytrees_follow_jax(argnums, mode):
    """Dict/tuple outputs, scalar and matrix outputs, a tuple of argnums (in any order): the
    structure and every block as jax's."""
    def f(ns):
        return lambda x, y: {"a": ns.sin(x) * y[0], "b": (ns.sum(x * x), ns.tanh(ns.outer(x, y)))}
    x, y = rng.standard_normal(3), rng.standard_normal(2)
    tj, jj = (td.jacfwd, jax.jacfwd) if mode == "fwd" else (td.jacrev, jax.jacrev)
    _leaves_close(tj(f(_TdNs), argnums=argnums)(x, y),
                  jax_value(jj(f(jnp), argnums=argnums), x, y))


class _TdNs:
    sin, tanh, sum = td.sin, td.tanh, td.sum

    @staticmethod
    def outer(x, y):
        return td.reshape(x, (-1, 1)) * td.reshape(y, (1, -1))


def test_hessian_under_jit_with_argnums_and_aux_follows_jax():
    f_td = lambda x, y: td.sum(td.sin(x) * y) * td.sum(x * x * y)  # noqa: E731
    f_jx = lambda x, y: jnp.sum(jnp.sin(x) * y) * jnp.sum(x * x * y)  # noqa: E731
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    for argnums in (0, 1):
        want = jax_value(jax.hessian(f_jx, argnums=argnums), x, y)
        _leaves_close(td.hessian(f_td, argnums=argnums)(x, y), want)
        _leaves_close(td.jit(td.hessian(f_td, argnums=argnums))(x, y), want)
    h, aux = td.hessian(lambda x: (td.sum(td.exp(x)), x * 2), has_aux=True)(x)
    _leaves_close((h, aux), (np.diag(np.exp(x)), x * 2))
    # jacobians and jvp/vjp inside a jit trace compose too
    g = td.jit(lambda x: td.jacrev(lambda z: td.sin(z) * z)(x) + td.jacfwd(td.cos)(x))
    _leaves_close(g(x), jax_value(lambda x: jax.jacrev(lambda z: jnp.sin(z) * z)(x) +
                                  jax.jacfwd(jnp.cos)(x), x))


def test_transforms_trace_once_per_signature():
    """jvp, vjp, hvp and the jacobians compile once per function and shapes/dtypes: the function
    body runs (traces) only the first time."""
    calls = []

    def f(x):
        calls.append(1)
        return td.sum(td.sin(x) * x)

    x = rng.standard_normal(4)
    for call in (lambda: td.jvp(f, (x,), (x,)), lambda: td.vjp(f, x)[1](1.0),
                 lambda: td.hvp(f, (x,), (x,))):
        calls.clear()
        first = call()
        for _ in range(3):
            _leaves_close(call(), first, rtol=0, atol=0)
        assert len(calls) <= 2, len(calls)  # vjp traces its forward and its backward once each
    for tf in (td.jacfwd(f), td.jacrev(f), td.hessian(f)):
        calls.clear()
        tf(x)
        traced = len(calls)  # jacfwd inlines one JVP (one trace of f) per element
        assert traced >= 1
        for _ in range(3):
            tf(x)
        assert len(calls) == traced
    calls.clear()
    td.jvp(f, (x[:2],), (x[:2],))  # a new shape traces again
    assert len(calls) == 1


def test_jacobian_errors_and_empty_arguments():
    with pytest.raises(TypeError, match="not differentiable"):
        td.jacfwd(lambda n, x: x * n, argnums=0)(np.int64(3), np.ones(2))
    with pytest.raises(TypeError, match="not differentiable"):
        td.jacrev(lambda n: n * 2.0)(np.arange(3))
    with pytest.raises(ValueError, match="cotangent"):
        td.vjp(lambda x: x * 2.0, np.ones(3))[1](np.ones(4))
    with pytest.raises(ValueError, match="tangent"):
        td.jvp(lambda x: x * 2.0, (np.ones(3),), (np.ones(4),))
    e = np.ones((0,))
    assert td.jacfwd(lambda x: td.sum(x) + 1.0)(e).shape == (0,)
    assert td.jacrev(lambda x: x * 2.0)(e).shape == (0, 0)


def test_cotangents_and_tangents_take_the_primal_dtypes():
    x = np.ones(3, np.float32)
    out, back = td.vjp(lambda x: td.sum(x * x), x)
    (g,) = back(1.0)  # a Python float for a float32 output
    assert out.dtype == np.float32 and g.dtype == np.float32
    np.testing.assert_array_equal(g, 2 * x)
    (g,) = td.vjp(lambda x: (x * 2.0, td.sum(x)), x)[1]((np.ones(3), 1.0))
    np.testing.assert_array_equal(g, np.full(3, 3.0, np.float32))
    _, t = td.jvp(lambda x: x * x, (x,), (np.ones(3),))  # float64 tangent for a float32 primal
    assert t.dtype == np.float32
    np.testing.assert_array_equal(t, 2 * x)


def test_linearize_and_hvp_under_jit_follow_jax():
    f_td = lambda x, y: td.sin(x) * y + x * x  # noqa: E731
    f_jx = lambda x, y: jnp.sin(x) * y + x * x  # noqa: E731
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    tx, ty = rng.standard_normal(3), rng.standard_normal(3)
    out, f_jvp = td.linearize(f_td, x, y)
    jout, jf_jvp = jax.linearize(f_jx, x, y)
    _leaves_close(out, jout)
    _leaves_close(f_jvp(tx, ty), jf_jvp(tx, ty))
    g = lambda z: td.sum(td.sin(z) * z * z)  # noqa: E731
    gj = lambda z: jnp.sum(jnp.sin(z) * z * z)  # noqa: E731
    want = jax.jvp(jax.grad(gj), (x,), (tx,))[1]
    _leaves_close(td.hvp(g, (x,), (tx,)), want)
    _leaves_close(td.jit(lambda a, v: td.hvp(g, (a,), (v,)))(x, tx), want)
