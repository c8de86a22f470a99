"""Python control flow on values under the transforms outside jit (``if x > 0``, ``while err >
tol``), as jax's grad without jit allows: values against jax and finite differences, and each
path traced and compiled once (tidu.guards)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tidu as td
from tidu.api.guards import Guarded

jax.config.update("jax_enable_x64", True)


def _fd(f, x, eps=1e-6):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


def _variants(transformed):
    """The compiled variants (paths) of a transformed function's one signature."""
    ((_, build, _, _),) = transformed.cache.values()
    return build.variants if isinstance(build, Guarded) else []


# ---- branches ----

def test_branch_flips_between_calls_and_each_path_compiles_once():
    traces = []

    def f(x, np_=td):
        traces.append(x)
        if x > 0:
            return x * x * x
        return np_.sin(x) * 2.0

    g = td.grad(f)
    gj = jax.grad(lambda x: f(x, jnp))
    xs = [1.5, 2.0, -1.0, -0.25, 3.0, -2.0, 0.5, -0.5]
    for x in xs:
        assert float(g(x)) == pytest.approx(float(gj(x)), rel=1e-14)
    n_jax = len(xs)  # jax's own calls traced f too
    assert len(traces) - n_jax == 2  # one trace per path, not per call
    assert len(_variants(g)) == 2


def test_function_without_python_control_flow_has_no_guards():
    g = td.grad(lambda x: td.sin(x) * x)
    g(1.0), g(-1.0)
    ((prog, build, _, _),) = g.cache.values()
    assert prog.n_guards == 0 and not isinstance(build, Guarded)
    assert len(prog.outputs) == 1


def test_guarded_program_computes_its_predicates_as_one_output():
    g = td.grad(lambda x: x * x if x > 0 else -x)
    g(2.0)
    ((prog, build, _, _),) = g.cache.values()
    assert prog.n_guards == 1 and isinstance(build, Guarded)
    assert prog.outputs[-1].aval == td.aval((1,), "bool")


def test_nested_branches_and_several_arguments():
    def f(x, y, np_=td):
        if x > y:
            if x * y > 1.0:
                return np_.sin(x) * y
            return x - y * y
        return np_.exp(x * y)

    g = td.grad(f, argnums=(0, 1))
    gj = jax.grad(lambda x, y: f(x, y, jnp), argnums=(0, 1))
    for x, y in [(2.0, 1.0), (0.5, 0.25), (0.1, 0.4), (3.0, 2.0), (0.2, 0.3), (1.0, 0.5)]:
        for a, b in zip(g(x, y), gj(x, y)):
            assert float(a) == pytest.approx(float(b), rel=1e-13)
    assert len(_variants(g)) == 3


def test_branch_on_an_array_reduction_with_jvp_and_vjp():
    def f(v, np_=td):
        if np_.sum(v) > 0:
            return v * v
        return np_.sin(v)

    for v in (np.array([1.0, 2.0]), np.array([-1.0, -2.0])):
        out, tan = td.jvp(f, (v,), (np.ones(2),))
        jout, jtan = jax.jvp(lambda v: f(v, jnp), (v,), (jnp.ones(2),))
        np.testing.assert_allclose(out, jout, rtol=1e-14)
        np.testing.assert_allclose(tan, jtan, rtol=1e-14)
        (ct,) = td.vjp(f, v)[1](np.array([1.0, 3.0]))
        np.testing.assert_allclose(ct, jax.vjp(lambda v: f(v, jnp), v)[1](jnp.array([1.0, 3.0]))[0],
                                   rtol=1e-14)


def test_number_read_out_of_a_traced_value_guards_its_exact_value():
    """float(x) becomes a constant of the program; a call with another x must not reuse it."""
    h = td.grad(lambda x: x * float(x))
    assert float(h(3.0)) == 3.0
    assert float(h(4.0)) == 4.0
    assert float(h(3.0)) == 3.0


def test_int_of_a_traced_value_drives_a_python_loop():
    def f(x, n):
        acc = x
        for _ in range(int(n)):
            acc = acc * x
        return acc

    g = td.grad(f)
    assert float(g(2.0, 3.0)) == pytest.approx(4 * 2.0 ** 3)
    assert float(g(2.0, 1.0)) == pytest.approx(2 * 2.0)


# ---- loops and recursion ----

def _newton_sqrt(a, tol=1e-12):
    x = a
    step = 1.0
    while abs(step) > tol:
        step = (x * x - a) / (2 * x)
        x = x - step
    return x


def test_iterative_solver_differentiated_through_its_while_loop():
    g = td.grad(_newton_sqrt)
    gj = jax.grad(_newton_sqrt)
    for a in (2.0, 9.0, 0.3, 2.5, 100.0):
        got = float(g(a))
        assert got == pytest.approx(float(gj(a)), rel=1e-12)
        assert got == pytest.approx(0.5 / np.sqrt(a), rel=1e-10)
        assert got == pytest.approx(_fd(np.sqrt, a), rel=1e-6)


def _halving(x, np_=td):
    """A recursion whose depth depends on the value: x * f(x / 2) until x < 1."""
    if x < 1.0:
        return np_.sin(x)
    return x * _halving(x / 2.0, np_)


def test_recursive_function_with_a_data_dependent_base_case_to_order_two():
    gg = td.grad(td.grad(_halving))
    gj = jax.grad(jax.grad(lambda x: _halving(x, jnp)))
    d1 = lambda x: float(td.grad(_halving)(x))  # noqa: E731
    for x in (0.5, 1.5, 5.0, 7.0, 3.0):
        got = float(gg(x))
        assert got == pytest.approx(float(gj(x)), rel=1e-12)
        assert got == pytest.approx(_fd(d1, x), rel=1e-5, abs=1e-6)
    h = td.hessian(_halving)
    assert float(h(5.0)) == pytest.approx(float(gg(5.0)), rel=1e-14)


# ---- inside jit the values stay abstract ----

def test_python_control_flow_inside_jit_is_an_error_pointing_to_where():
    f = lambda x: x * x if x > 0 else -x  # noqa: E731
    with pytest.raises(TypeError, match="inside jit or build.*tidu.where"):
        td.jit(f)(1.0)
    with pytest.raises(TypeError, match="inside jit or build.*tidu.where"):
        td.jit(td.grad(f))(1.0)
    with pytest.raises(TypeError, match="inside jit"):
        td.grad(td.jit(f))(1.0)  # a jit stays abstract where a transform inlines it
    with pytest.raises(TypeError, match="inside jit"):
        td.build(lambda x: float(x), x=td.spec(()))
    assert float(td.jit(td.grad(lambda x: td.where(x > 0, x * x, -x)))(2.0)) == 4.0
