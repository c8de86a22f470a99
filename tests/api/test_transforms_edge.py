"""Edge cases of the transforms that other AD libraries' test suites exercise: outputs that pass
arguments through, closures over values of enclosing traces, complex Jacobians (holomorphic)
and the errors bad calls get, each checked against jax."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tidu as td

jax.config.update("jax_enable_x64", True)


# ---- outputs with no ops ----

def test_vjp_of_an_argument_returned_twice_adds_the_cotangents():
    (ct,) = td.vjp(lambda v: (v, v), 1.0)[1]((1.0, 2.0))
    assert float(ct) == 3.0 == float(jax.vjp(lambda v: (v, v), 1.0)[1]((1.0, 2.0))[0])


def test_jacrev_of_an_argument_returned_twice():
    got = td.jacrev(lambda v: (v, v))(1.0)
    assert isinstance(got, tuple) and [float(g) for g in got] == [1.0, 1.0]


def test_pass_through_outputs_in_a_dict_or_a_list():
    d = td.jacrev(lambda v: {"a": v, "b": v})(1.0)
    assert {k: float(v) for k, v in d.items()} == {"a": 1.0, "b": 1.0}
    (ct,) = td.vjp(lambda v: [v, v], 1.0)[1]([1.0, 2.0])
    assert float(ct) == 3.0


def test_gradient_of_a_sum_called_with_the_same_array_twice():
    a = np.array([1.0, 2.0])
    gx, gy = td.grad(lambda x, y: td.sum(x + y), argnums=(0, 1))(a, a)
    np.testing.assert_array_equal(gx, np.ones(2))
    np.testing.assert_array_equal(gy, np.ones(2))
    cx, cy = td.vjp(lambda x, y: x + y, a, a)[1](np.array([3.0, 4.0]))
    np.testing.assert_array_equal(cx, [3.0, 4.0])
    np.testing.assert_array_equal(cy, [3.0, 4.0])


# ---- closures over values of enclosing traces ----

def test_grad_inside_grad_closing_over_the_outer_argument():
    got = td.grad(lambda x: x * td.grad(lambda y: x * y)(2.0))(1.0)
    want = jax.grad(lambda x: x * jax.grad(lambda y: x * y)(2.0))(1.0)
    assert float(got) == float(want) == 2.0


def test_jit_inside_jit_returning_the_outer_argument():
    assert float(td.jit(lambda x: td.jit(lambda: x)() * 2.0)(1.0)) == 2.0


def test_jvp_inside_jit_closing_over_the_jits_argument():
    f = lambda x: td.jvp(lambda y: x * y * y, (2.0,), (1.0,))  # noqa: E731
    fj = lambda x: jax.jvp(lambda y: x * y * y, (2.0,), (1.0,))  # noqa: E731
    for got, want in zip(td.jit(f)(3.0), fj(3.0)):
        assert float(got) == pytest.approx(float(want))


def test_nested_grad_does_not_confuse_perturbations():
    """The inner grad differentiates with respect to its own argument only, even when it is
    called with the outer argument it also closes over (d/dx of x is 1, not 2)."""
    got = td.grad(lambda x: td.grad(lambda y: x * y)(x))(3.0)
    assert float(got) == float(jax.grad(lambda x: jax.grad(lambda y: x * y)(x))(3.0)) == 1.0


def test_inner_argument_is_not_the_same_value_as_an_equal_constant():
    """grad(lambda y: y * 2.0)(2.0) inside a trace: the argument 2.0 and the literal 2.0 are
    distinct values (hash-consing must not merge them), so the derivative is 2, not 4."""
    assert float(td.jit(lambda x: td.grad(lambda y: y * 2.0)(2.0) * x)(1.0)) == 2.0


def test_vjp_function_called_inside_jit():
    inside = td.jit(lambda c: td.vjp(td.sin, 1.0)[1](c))(2.0)
    (_, f_vjp) = td.vjp(td.sin, 1.0)
    outside = td.jit(lambda c: f_vjp(c))(2.0)
    want = jax.vjp(jnp.sin, 1.0)[1](2.0)[0]
    assert float(inside[0]) == pytest.approx(float(want))
    assert float(outside[0]) == pytest.approx(float(want))


def test_has_aux_values_closing_over_the_argument():
    g, aux = td.grad(lambda x: (x * x, {"twice": x * 2.0}), has_aux=True)(3.0)
    assert float(g) == 6.0 and float(aux["twice"]) == 6.0
    h, aux = td.jit(lambda x: td.grad(lambda y: (x * y * y, y + x), has_aux=True)(2.0))(3.0)
    assert float(h) == 12.0 and float(aux) == 5.0


# ---- complex Jacobians ----

def test_complex_jacobians_need_holomorphic_as_in_jax():
    with pytest.raises(TypeError, match="jacfwd requires real-valued inputs.*holomorphic=True"):
        td.jacfwd(td.sin)(1 + 2j)
    with pytest.raises(TypeError, match="jacrev requires real-valued outputs.*holomorphic=True"):
        td.jacrev(td.sin)(1 + 2j)
    with pytest.raises(TypeError, match="grad requires real-valued outputs"):
        td.grad(td.sin)(1 + 2j)
    with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex dtype"):
        td.grad(td.sin, holomorphic=True)(1.0)
    with pytest.raises(TypeError, match="holomorphic=True requires outputs with complex dtype"):
        td.jacrev(lambda z: td.real(z), holomorphic=True)(1 + 2j)


def test_holomorphic_derivatives_agree_with_jax():
    z = 1 + 2j
    want = complex(jax.grad(jnp.sin, holomorphic=True)(z))
    for d in (td.jacfwd, td.jacrev, td.grad):
        assert complex(d(td.sin, holomorphic=True)(z)) == pytest.approx(want, rel=1e-14)
    v = np.array([1 + 2j, 0.5 - 1j])
    want = jax.jacrev(lambda z: jnp.sin(z) * z[0], holomorphic=True)(v)
    for d in (td.jacfwd, td.jacrev):
        got = d(lambda z: td.sin(z) * z[0], holomorphic=True)(v)
        np.testing.assert_allclose(got, want, rtol=1e-14)
    h = td.hessian(lambda z: td.sin(z) * z, holomorphic=True)(z)
    assert complex(h) == pytest.approx(
        complex(jax.hessian(lambda z: jnp.sin(z) * z, holomorphic=True)(z)), rel=1e-13)


def test_real_function_of_a_complex_argument_keeps_the_conjugate_convention():
    """Without holomorphic, grad of a real L of complex z is 2 dL/dz̄ = conj(jax.grad) (DESIGN §5),
    and jacrev of it agrees with grad."""
    f = lambda z: td.real(z * td.conj(z)) + td.imag(z)  # noqa: E731
    fj = lambda z: jnp.real(z * jnp.conj(z)) + jnp.imag(z)  # noqa: E731
    z = 1 + 2j
    assert complex(td.grad(f)(z)) == pytest.approx(np.conj(complex(jax.grad(fj)(z))))
    assert complex(td.jacrev(f)(z)) == pytest.approx(complex(td.grad(f)(z)))


# ---- errors ----

@pytest.mark.parametrize("ret", [lambda x: (x, x, x), lambda x: x])
def test_has_aux_needs_a_pair(ret):
    with pytest.raises(TypeError, match=r"has_aux=True requires fn to return a pair"):
        td.grad(ret, has_aux=True)(1.0)


def test_grad_of_an_int_argument_names_it():
    """jax issue 871's test: grad of an integer argument is a TypeError."""
    with pytest.raises(TypeError, match=r"grad requires real- or complex-valued inputs \(input "
                       r"dtype that is a sub-dtype of np.inexact\), but got int.*argument 0"):
        td.grad(lambda x: x * 2)(3)


@pytest.mark.parametrize("primal, tangent", [(1.0, np.ones(3)), (np.ones(3), 1.0),
                                             (np.ones(3), np.ones(4))])
def test_linearized_function_rejects_a_tangent_of_another_shape(primal, tangent):
    _, f_jvp = td.linearize(td.sin, primal)
    np.testing.assert_allclose(f_jvp(np.ones_like(primal)), np.cos(primal))
    with pytest.raises(ValueError, match="tangent .* does not match primal"):
        f_jvp(tangent)


def test_nested_transforms_over_a_large_function():
    """hessian (jacfwd of grad, each nested in the other's trace) of a function of thousands of
    ops: binding the nested calls' fresh inputs re-emits that many ops while the global interner
    grows under them."""
    def f(x, n=8000):
        v = x
        for k in range(n):
            v = td.sin(v) * 0.5 + x * (0.1 + 1e-4 * k) if k % 2 else td.tanh(v) + 0.3 * x
        return v

    h = float(td.hessian(f)(0.3))
    g = lambda x: float(td.grad(f)(x))  # noqa: E731
    assert h == pytest.approx((g(0.3 + 1e-5) - g(0.3 - 1e-5)) / 2e-5, rel=1e-5)
