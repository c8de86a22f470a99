"""Static and keyword arguments of jit (jax's semantics), and jit(f).lower: the compiled program
behind a jitted function, its input names, saving it and its StableHLO."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tidu as td

jax.config.update("jax_enable_x64", True)

X = np.linspace(0.5, 1.5, 4)


def power_sum(x, n, flag=False):
    s = x
    for _ in range(n):
        s = s * x
    return -s.sum() if flag else s.sum()


def power_sum_jax(x, n, flag=False):
    s = x
    for _ in range(n):
        s = s * x
    return -jnp.sum(s) if flag else jnp.sum(s)


# ---- static arguments ----

@pytest.mark.parametrize("backend", ["cpu", "xla"])
def test_static_argnums_select_one_program_per_value(backend):
    f = td.jit(power_sum, static_argnums=1, static_argnames="flag", backend=backend)
    g = jax.jit(power_sum_jax, static_argnums=1, static_argnames="flag")
    for n in (1, 3, 1):
        for flag in (False, True):
            np.testing.assert_allclose(f(X, n, flag=flag), g(X, n, flag=flag), rtol=1e-14)
    assert len(f.selections) == 4  # (n, flag) in {1, 3} x {False, True}


def test_static_argnums_negative_and_by_name_mark_the_same_parameter():
    f = td.jit(power_sum, static_argnums=-2)  # n: -2 of power_sum's three parameters
    np.testing.assert_allclose(f(X, 2), np.sum(X ** 3))
    np.testing.assert_allclose(f(X, n=2), np.sum(X ** 3))  # static_argnums also names n
    h = td.jit(power_sum, static_argnames="n")
    np.testing.assert_allclose(h(X, 2), np.sum(X ** 3))  # ... and static_argnames its position


def test_static_bool_and_int_one_select_different_programs():
    f = td.jit(lambda x, k: x * 2 if k is True else x * 3, static_argnums=1)
    assert f(1.0, True) == 2.0 and f(1.0, 1) == 3.0


def test_static_argument_that_is_not_hashable_is_a_clear_type_error():
    f = td.jit(power_sum, static_argnums=1)
    with pytest.raises(TypeError, match=r"static argument 1 \(n\) must be hashable.*list"):
        f(X, [1, 2])
    with pytest.raises(TypeError, match="must be hashable.*ndarray"):
        f(X, np.array(2))


def test_static_argnums_out_of_range_is_a_value_error():
    with pytest.raises(ValueError, match="static_argnums 3 is out of range"):
        td.jit(power_sum, static_argnums=3)


def test_traced_value_in_range_says_what_to_do():
    with pytest.raises(TypeError, match="no concrete value.*static_argnums"):
        td.jit(power_sum)(X, 2)


def test_keyword_arguments_to_jitted_functions_are_traced():
    f = td.jit(lambda x, scale=1.0, shift=0.0: x * scale + shift)
    np.testing.assert_allclose(f(X, scale=2.0), X * 2)
    np.testing.assert_allclose(f(X, shift=1.0, scale=3.0), X * 3 + 1)
    np.testing.assert_allclose(f(X, scale=np.full(4, 2.0)), X * 2)


def test_static_jit_inside_grad_and_keyword_arguments_to_transforms():
    f = td.jit(power_sum, static_argnums=1)
    np.testing.assert_allclose(td.grad(lambda x: f(x, 2))(X), 3 * X ** 2, rtol=1e-14)
    np.testing.assert_allclose(td.grad(power_sum)(X, n=2), 3 * X ** 2, rtol=1e-14)
    np.testing.assert_allclose(td.grad(power_sum)(X, n=2, flag=True), -3 * X ** 2, rtol=1e-14)
    np.testing.assert_allclose(td.hessian(power_sum)(X, n=2), np.diag(6 * X), rtol=1e-14)
    v, g = td.value_and_grad(power_sum)(X, n=1)
    np.testing.assert_allclose(v, np.sum(X ** 2))
    np.testing.assert_allclose(g, 2 * X)
    np.testing.assert_allclose(td.jacfwd(power_sum)(X, n=1), 2 * X)
    jf = td.jit(td.grad(power_sum), static_argnums=1)
    np.testing.assert_allclose(jf(X, 2), jax.grad(power_sum_jax)(X, 2), rtol=1e-14)


def test_static_argnums_with_varargs_count_from_the_call():
    f = td.jit(lambda *a: a[0] * a[-1] if a[-1] > 1 else a[0], static_argnums=-1)
    assert f(2.0, 3) == 6.0 and f(2.0, 1) == 2.0


# ---- the per-call fast path (tidu._core.StaticJitted) ----

def _count_slow(f):
    """f with its general path counted: calls[0] is how many calls took it."""
    calls = [0]
    slow = f.slow

    def counted(*a, **k):
        calls[0] += 1
        return slow(*a, **k)

    f.slow = counted
    return calls


def test_repeated_static_and_keyword_calls_skip_the_general_path_and_stay_right():
    f = td.jit(power_sum, static_argnums=1, static_argnames="flag")
    calls = _count_slow(f)
    for _ in range(3):
        np.testing.assert_allclose(f(X, 2, flag=True), -np.sum(X ** 3), rtol=1e-14)
    assert calls[0] == 1  # the first call selects; the next two go straight to its program
    # another static value, a static of another type (True vs 1), keywords left out: each takes
    # the general path; other shapes and dtypes of the traced argument take the selected jit's
    # own (in tidu._core.Jitted); every one answers right
    np.testing.assert_allclose(f(X, 3, flag=True), -np.sum(X ** 4), rtol=1e-14)
    np.testing.assert_allclose(f(X, 3, flag=1), -np.sum(X ** 4), rtol=1e-14)
    np.testing.assert_allclose(f(X[:3], 3, flag=1), -np.sum(X[:3] ** 4), rtol=1e-14)
    np.testing.assert_allclose(f(X.astype(np.float32), 3, flag=1),
                               -np.sum(X.astype(np.float32) ** 4), rtol=1e-6)
    np.testing.assert_allclose(f(X, 3), np.sum(X ** 4), rtol=1e-14)  # flag left out
    assert calls[0] == 4
    np.testing.assert_allclose(f(X, 3), np.sum(X ** 4), rtol=1e-14)
    assert calls[0] == 4


def test_keyword_fast_path_takes_values_by_name_in_any_order():
    f = td.jit(lambda x, scale=1.0, shift=0.0: x * scale + shift)
    f(X, scale=1.0)  # the first keyword call makes the keyword jit
    calls = _count_slow(f.keyword)
    np.testing.assert_allclose(f(X, scale=2.0, shift=1.0), X * 2 + 1)
    np.testing.assert_allclose(f(X, shift=5.0, scale=3.0), X * 3 + 5)  # swapped order
    np.testing.assert_allclose(f(X, shift=5.0, scale=3.0), X * 3 + 5)
    np.testing.assert_allclose(f(X, scale=3.0), X * 3)  # other names: the general path
    assert calls[0] == 2  # (scale, shift) once, then (scale,)
    with pytest.raises(TypeError):
        f(X, scale=2.0, bogus=1.0)  # an unknown keyword still reaches fn and its error


# ---- lower ----

def loss(x, a):
    return td.sum(td.exp(a * x))


def test_lower_gives_the_program_with_input_names_and_values():
    low = td.jit(loss).lower(X, 2.0)
    assert isinstance(low.program, td.CompiledProgram)
    assert sorted(low.inputs) == ["a", "x"] and low.input_names() == low.inputs
    np.testing.assert_allclose(low(X, 2.0), np.sum(np.exp(2 * X)))
    feed = {"x": X, "a": 2.0}
    (out,) = low.program.eval([feed[n] for n in low.inputs])
    np.testing.assert_allclose(out, np.sum(np.exp(2 * X)))


@pytest.mark.parametrize("make", [lambda f: td.grad(f), lambda f: td.value_and_grad(f),
                                  lambda f: td.grad(f, argnums=(0, 1))])
def test_lower_of_a_gradient_saves_a_file_that_loads_with_its_names(tmp_path, make):
    g = make(loss)
    low = td.jit(g).lower(X, 2.0)
    path = tmp_path / "grad.tidu"
    low.save(path)
    loaded = td.load(path)
    assert loaded.inputs == low.inputs
    feed = {"x": X, "a": np.float64(2.0)}
    got = loaded.eval([feed[n] for n in loaded.inputs])
    want = td.jit(g)(X, 2.0)
    want = [want] if not isinstance(want, tuple) else [w for w in want for w in
                                                      (w if isinstance(w, tuple) else (w,))]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-14)
    assert low.program is not None and "func.func public @main" in low.as_stablehlo() \
        or "@main" in low.as_stablehlo()


def test_lower_names_leaves_of_structured_arguments():
    low = td.jit(lambda p, xs: p["w"] * xs[0] + p["b"] * xs[1]).lower(
        {"w": 1.0, "b": 2.0}, (X, X))
    assert sorted(low.inputs) == sorted(["p['w']", "p['b']", "xs[0]", "xs[1]"])


def test_lower_with_static_and_keyword_arguments():
    low = td.jit(power_sum, static_argnums=1, static_argnames="flag").lower(X, 2, flag=True)
    assert low.inputs == ["x"]
    np.testing.assert_allclose(low(X), -np.sum(X ** 3))
    low = td.jit(lambda x, scale: x * scale).lower(X, scale=2.0)
    assert sorted(low.inputs) == ["scale", "x"]


def test_lower_of_a_function_with_python_control_flow_on_values_is_a_clear_error():
    with pytest.raises(TypeError, match="no concrete value"):
        td.jit(lambda x: x if x > 0 else -x).lower(1.0)


def test_low_level_program_names_the_cotangent_seed():
    F0 = td.build(lambda x, a: td.exp(a * x), x=td.spec((), "float64"),
                  a=td.spec((), "float64"))
    (y,) = F0.outputs
    T1 = td.transpose(td.differentiate(td.resolve([F0]), outputs=[y], wrt=["x"]))
    (ct_x,) = T1.tangent_outputs
    prog = td.compile(td.materialize_merge(td.resolve([F0, T1]), outputs=[y, ct_x]))
    assert sorted(prog.input_names()) == ["a", "ct[0]", "x"]


def test_lower_of_a_transform_of_a_jitted_function_is_the_transform():
    jf = td.jit(loss)
    low = td.grad(jf).lower(X, 2.0)
    np.testing.assert_allclose(low(X, 2.0), 2.0 * np.exp(2.0 * X), rtol=1e-14)
    np.testing.assert_allclose(td.jit(td.grad(jf)).lower(X, 2.0)(X, 2.0), 2.0 * np.exp(2.0 * X),
                               rtol=1e-14)


@pytest.mark.parametrize("names,bad", [("m", "m"), (("n", "m"), "m")])
def test_static_argnames_not_a_parameter_is_refused_as_jax(names, bad):
    """Was: td.jit(f, static_argnames='m') for an f with no parameter m was accepted."""
    with pytest.raises(ValueError, match="invalid argnames"):
        jax.jit(power_sum_jax, static_argnames=names)
    with pytest.raises(ValueError, match=rf"static_argnames \['{bad}'\] are not parameters"):
        td.jit(power_sum, static_argnames=names)


def test_static_argnames_positional_only_refused_and_kwargs_accepted_as_jax():
    def posonly(x, /, n):
        return x * n

    def kwargs(x, **kw):
        return x * kw["n"]

    with pytest.raises(ValueError, match="positional-only"):
        jax.jit(posonly, static_argnames="x")
    with pytest.raises(ValueError, match="positional-only"):
        td.jit(posonly, static_argnames="x")
    np.testing.assert_allclose(td.jit(kwargs, static_argnames="n")(X, n=3), X * 3)
    np.testing.assert_allclose(jax.jit(kwargs, static_argnames="n")(X, n=3), X * 3)
