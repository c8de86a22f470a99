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
    jgx, jgy = jax.grad(f_jx, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, np.conj(jgx), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gy, np.conj(jgy), rtol=1e-10, atol=1e-12)
    tx = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    ty = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    _, t = td.jvp(f_td, (x, y), (tx, ty))
    _, jt = jax.jvp(f_jx, (x, y), (tx, ty))
    np.testing.assert_allclose(t, jt, rtol=1e-10, atol=1e-12)


def test_jacobians_match_jax():
    f_td = lambda x: td.sin(x) * td.sum(x * x)  # noqa: E731
    f_jx = lambda x: jnp.sin(x) * jnp.sum(x * x)  # noqa: E731
    x = rng.standard_normal(4)
    np.testing.assert_allclose(td.jacfwd(f_td)(x), jax.jacfwd(f_jx)(x), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(td.jacrev(f_td)(x), jax.jacrev(f_jx)(x), rtol=1e-11, atol=1e-12)


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
