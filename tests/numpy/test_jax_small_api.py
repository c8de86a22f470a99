"""The small jax API items of issue #32, each against jax in x64 on both backends: ``.at[]``'s
subtract/divide/power/apply, ``get(mode="drop")`` and ``wrap_negative_indices``; scalar boolean
indices; the reductions' ``dtype``/``initial``/``where``/``promote_integers``; ``jax.ops``'
segment reductions; and the jit/inspection names (``donate_argnums``, ``Lowered.compile`` and
``as_text``, ``make_jaxpr``, ``block_until_ready``, ``device_get``, ``fori_loop(unroll=)``,
``checkpoint(policy=)``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support.compare import close, jax_value

import tidu as td

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(7)
X = RNG.standard_normal((4, 5))
M = X > -0.3  # a mask with at least two True in every row and column
M[:2, :] = M[:, :2] = True
IDX = np.array([1, 1, -1, 3])  # repeated and negative
OOB = np.array([0, 9, -1, -9])
U = np.array([2, 0, -1])  # unique  # out of range both ways
IDS = np.array([0, 2, 2, 1, -1])  # segment ids: a repeat, an empty segment (3), a negative one
XI = np.arange(20, dtype=np.int32).reshape(4, 5) - 7
D = np.abs(RNG.standard_normal((5, 3))) + 0.5

BACKENDS = ["cpu", "xla"]

# name -> (function of (module, x), input, differentiable)
VALUES = {
    "at_subtract": (lambda m, x: x.at[IDX].subtract(0.5), X, True),
    "at_subtract_int": (lambda m, x: x.at[IDX].subtract(3), XI, False),
    "at_divide": (lambda m, x: x.at[IDX].divide(1.5), X, False),
    "at_divide_unique": (lambda m, x: x.at[U].divide(x[0, :1] + 3.0, unique_indices=True), X,
                         True),
    "at_divide_traced": (lambda m, x: x.at[1:3].divide(x[0]), X, True),
    "at_power": (lambda m, x: x.at[IDX].power(2.0), X, False),
    "at_power_unique": (lambda m, x: x.at[U].power(3.0, unique_indices=True), X, True),
    # jax's apply has no derivative: tidu's is checked against finite differences below
    "at_apply": (lambda m, x: x.at[np.array([0, 2])].apply(m.sin), X, False),
    "at_apply_slice": (lambda m, x: x.at[:, 1:3].apply(m.exp), X, False),
    "get_drop": (lambda m, x: x.at[OOB].get(mode="drop", fill_value=-2.0), X, True),
    "get_no_wrap_fill": (lambda m, x: x.at[OOB].get(mode="fill", fill_value=0.0,
                                                     wrap_negative_indices=False), X, True),
    "get_no_wrap_clip": (lambda m, x: x.at[OOB].get(mode="clip", wrap_negative_indices=False),
                         X, True),
    "set_no_wrap": (lambda m, x: x.at[OOB].set(7.0, wrap_negative_indices=False), X, True),
    "add_no_wrap": (lambda m, x: x.at[IDX].add(x[0, :1], wrap_negative_indices=False), X, True),
    "bool_true": (lambda m, x: x[True], X, True),
    "bool_false": (lambda m, x: x[False], X, False),
    "bool_tuple": (lambda m, x: x[1:, True, None, 2], X, True),
    "bool_ellipsis_false": (lambda m, x: x[..., False, :], X, False),
    "bool_int_apart": (lambda m, x: x[True, :, 2], X, True),
    "bool_int_adjacent": (lambda m, x: x[:, 3, True, None], X, True),
    "sum_where_initial": (lambda m, x: m.sum(x, axis=1, initial=1.5, where=M), X, True),
    "sum_dtype": (lambda m, x: m.sum(x, axis=0, dtype=m.float32), X, False),
    "sum_int_no_promote": (lambda m, x: m.sum(x, axis=1, promote_integers=False), XI, False),
    # dtype= of an integer sum/prod is the result's dtype (not promoted to int64)
    "sum_int_dtype": (lambda m, x: m.sum(x * 1000, axis=0, dtype=m.int16), XI, False),
    "prod_int_dtype": (lambda m, x: m.prod(x + 9, axis=1, dtype=m.uint8), XI, False),
    "sum_int_where": (lambda m, x: m.sum(x, where=M), XI, False),
    "prod_where_initial": (lambda m, x: m.prod(x, axis=0, initial=2.0, where=M), X, True),
    "max_where_initial": (lambda m, x: m.max(x, axis=1, initial=-0.25, where=M), X, True),
    "min_initial": (lambda m, x: m.min(x, axis=0, initial=-0.5), X, True),
    "amax": (lambda m, x: m.amax(x, 0, keepdims=True), X, True),
    "amin": (lambda m, x: m.amin(x), X, True),
    "max_int_where": (lambda m, x: m.max(x, axis=0, initial=-100, where=M), XI, False),
    # complex: lexicographic; the masked-out entries take `initial`
    "max_complex_where": (lambda m, x: m.max(x + 1j * x[::-1], axis=0, initial=0.1 - 1j,
                                             where=M), X, False),
    "min_complex_where": (lambda m, x: m.min(m.round(x) + 1j * x, axis=1, initial=-0.5 + 0j,
                                             where=M), X, False),
    "max_complex_initial": (lambda m, x: m.max(m.round(x) + 1j * x, initial=1.0 + 0j), X,
                            False),
    # jax's complex maximum/minimum: x where lexicographically greater (smaller), else y
    "maximum_complex": (lambda m, x: m.maximum(m.round(x) + 1j * x, m.round(x[::-1]) + 1j * x.T[
        ::-1].T), X, False),
    "minimum_complex": (lambda m, x: m.minimum(m.round(x) + 1j * x, 0.5), X, False),
    "maximum_complex_lax": (lambda m, x: (td.lax if m is td else jax.lax).max(
        m.round(x) + 1j * m.round(x * 2), m.round(x[:, ::-1]) + 0j), X, False),
    "mean_where": (lambda m, x: m.mean(x, axis=0, where=M), X, True),
    "mean_where_keepdims": (lambda m, x: m.mean(x, axis=1, where=M, keepdims=True), X, True),
    "mean_int_where": (lambda m, x: m.mean(x, where=M), XI.astype(np.int64), False),
    "var_where": (lambda m, x: m.var(x, axis=1, where=M, ddof=1), X, True),
    "std_where": (lambda m, x: m.std(x, where=M), X, True),
    "any_where": (lambda m, x: m.any(x > 1.0, axis=0, where=M), X, False),
    "all_where": (lambda m, x: m.all(x > -1.0, axis=1, where=M), X, False),
    "method_sum": (lambda m, x: x.sum(axis=0, dtype=m.float32), X, False),
    "method_max": (lambda m, x: x.max(1, initial=0.5, where=M), X, True),
    "method_min": (lambda m, x: x.min(axis=1, where=M, initial=5.0), X, True),
    "method_mean": (lambda m, x: x.mean(where=M), X, True),
    "method_prod": (lambda m, x: x.prod(1, keepdims=True), X, True),
    "method_var": (lambda m, x: x.var(axis=0, where=M), X, True),
}

SEGMENTS = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def _seg(m, name):
    return getattr(td, name) if m is td else getattr(jax.ops, name)


for _name in SEGMENTS:  # (jax's segment_prod has no derivative with repeated ids)
    VALUES[_name] = ((lambda n: lambda m, x: _seg(m, n)(x, IDS, num_segments=4))(_name), D,
                     _name != "segment_prod")
    VALUES[_name + "_inferred"] = (
        (lambda n: lambda m, x: _seg(m, n)(x, IDS))(_name), D, False)
    VALUES[_name + "_int"] = (
        (lambda n: lambda m, x: _seg(m, n)(x, IDS, 4))(_name), D.astype(np.int32) * 3 - 2, False)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(VALUES))
def test_values_match_jax(name, backend):
    f, x, _ = VALUES[name]
    got = td.jit(lambda a: f(td, a), backend=backend)(x)
    want = np.asarray(f(jnp, jnp.asarray(x)))  # eager: jax infers num_segments only from concrete ids
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    close(got, want, rtol=1e-12, atol=1e-12)


DIFFERENTIABLE = sorted(n for n, (_, _, d) in VALUES.items() if d)


def _scalar(m, f):
    return lambda a: m.sum(m.sin(f(m, a)) * m.arange(1, f(m, a).size + 1).reshape(f(m, a).shape))


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_first_and_second_derivatives_match_jax(name):
    f, x, _ = VALUES[name]
    v = RNG.standard_normal(x.shape)  # (drawn first: nothing before it draws from RNG)
    # jax's gradient and its jvp under one jit (eagerly where the function needs concrete
    # values: jax_value falls back)
    s = _scalar(jnp, f)
    want_g, want = jax_value(lambda a, t: (jax.grad(s)(a), jax.jvp(jax.grad(s), (a,), (t,))[1]),
                             x, v)
    close(td.grad(_scalar(td, f))(x), np.asarray(want_g), rtol=1e-9, atol=1e-12)
    got = td.jvp(td.grad(_scalar(td, f)), (x,), (v,))[1]
    close(got, np.asarray(want), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", ["at_apply", "at_apply_slice", "at_divide", "at_power",
                                  "mean_where", "prod_where_initial"])
def test_derivatives_agree_with_finite_differences(name):
    f = VALUES[name][0]
    g = td.grad(_scalar(td, f))(X)
    h = td.jit(_scalar(td, f))
    eps = 1e-6
    for k in [(0, 1), (2, 0), (3, 3), (1, 4)]:
        e = np.zeros_like(X)
        e[k] = eps
        assert g[k] == pytest.approx((h(X + e) - h(X - e)) / (2 * eps), rel=1e-6, abs=1e-8), k


def test_two_scalar_bools_each_add_an_axis_where_they_stand():
    """jax 0.10.2 drops an axis here (x[None, True, 1:, True] of a (4, 5) array is (1, 1, 0, 1)
    in it); tidu reads each True as a None, as jax does for one."""
    got = td.jit(lambda a: a[None, True, 1:, True])(X)
    close(got, X[None, None, 1:, None])
    assert td.jit(lambda a: a[True, ..., False])(X).shape == (1, 4, 5, 0)


def test_under_vmap():
    f = VALUES["sum_where_initial"][0]
    xs = RNG.standard_normal((3, 4, 5))
    got = td.vmap(lambda a: f(td, a))(xs)
    close(got, np.asarray(jax_value(jax.vmap(lambda a: f(jnp, a)), xs)))
    got = td.vmap(lambda a: td.segment_sum(a, IDS, 4))(RNG.standard_normal((2, 5, 3)))
    assert got.shape == (2, 4, 3)


@pytest.mark.parametrize("call, err, match", [
    (lambda x: td.max(x, where=M), ValueError, "does not have an identity"),
    (lambda x: td.sum(x, where=M[:2]), ValueError, "does not broadcast"),
    (lambda x: td.sum(x, where=X), TypeError, "bool array"),
    (lambda x: td.sum(x, out=x), NotImplementedError, "out argument"),
    (lambda x: td.segment_sum(x, x[:, 0].astype(td.int32)), ValueError, "num_segments"),
    (lambda x: td.segment_sum(x, IDS[:3], 4), ValueError, "leading axes"),
    (lambda x: td.segment_sum(x, IDS.astype(float), 4), TypeError, "integers"),
    (lambda x: x.at[0].apply(3.0), TypeError, "callable"),
    (lambda x: x.at[0].get(mode="wrap"), ValueError, "unknown index mode"),
    (lambda x: (x > 0).at[0].subtract(True), TypeError, "bool"),
])
def test_bad_arguments_name_the_problem(call, err, match):
    with pytest.raises(err, match=match):
        td.jit(call)(D)


# ---- jit, inspection and runtime names ----

def test_jit_accepts_jaxs_donation_and_compile_arguments():
    f = td.jit(lambda a, b: a * 2 + b, donate_argnums=(0,), donate_argnames="b",
               keep_unused=True, inline=True)
    close(f(X, X), 3 * X)
    dec = td.jit(donate_argnums=0)(lambda a: a + 1)
    close(dec(X), X + 1)
    with pytest.raises(TypeError, match="donate_argnums"):
        td.jit(lambda a: a, donate_argnums="a")
    with pytest.raises(NotImplementedError, match="compiler_options"):
        td.jit(lambda a: a, compiler_options={"xla_cpu_enable_fast_math": True})


def test_lowered_compile_and_as_text():
    low = td.jit(lambda a: td.sum(td.sin(a) * 2.0)).lower(X)
    assert low.compile() is low
    close(low.compile()(X), np.sum(np.sin(X) * 2.0))
    hlo = low.as_text()
    assert hlo == low.as_text("stablehlo") and "stablehlo.sine" in hlo and "func.func" in hlo
    listing = low.as_text("tidu")
    assert listing == str(low)
    assert "Sin(" in listing and "ReduceSum(" in listing and "input 0 a: float64[4,5]" in listing
    with pytest.raises(ValueError, match="dialect"):
        low.as_text("hlo")
    with pytest.raises(NotImplementedError, match="compiler_options"):
        low.compile({"x": 1})


def test_make_jaxpr_prints_the_program():
    low = td.make_jaxpr(lambda a, b: td.tanh(a) @ b)(X, X.T)
    assert isinstance(low, td.Lowered) and "Tanh(" in str(low) and "Dot" in str(low)
    close(low(X, X.T), np.tanh(X) @ X.T)
    low, shapes = td.make_jaxpr(lambda a: (a, td.sum(a)), return_shape=True)(X)
    assert [(s.shape, str(s.dtype)) for s in shapes] == [((4, 5), "float64"), ((), "float64")]
    stat = td.make_program(lambda a, n: a * n, static_argnums=1)(X, 3)
    close(stat(X, 3), X * 3)
    with pytest.raises(NotImplementedError, match="axis_env"):
        td.make_jaxpr(lambda a: a, axis_env=[("i", 2)])


def test_block_until_ready_and_device_get():
    tree = {"a": X, "b": [np.float32(1), 2.0]}
    assert td.block_until_ready(tree) is tree
    ja = jnp.asarray(X)
    assert td.block_until_ready(ja) is ja
    got = td.device_get({"j": ja, "n": X, "s": 3})
    assert type(got["j"]) is np.ndarray and got["n"] is X and got["s"] == 3
    close(got["j"], X)


def test_fori_loop_unroll_is_checked_and_keeps_the_values():
    def f(m, a, u):
        return m.fori_loop(0, 5, lambda i, c: c * 1.1 + i, a, unroll=u) if m is td else \
            jax.lax.fori_loop(0, 5, lambda i, c: c * 1.1 + i, a, unroll=u)
    for u in (1, 2, True, False):
        close(td.jit(lambda a, u=u: f(td, a, u))(X), np.asarray(jax.jit(lambda a: f(jax, a, u))(X)))
    with pytest.raises(ValueError, match="static loop bounds"):
        td.jit(lambda a, n: td.fori_loop(0, n, lambda i, c: c, a, unroll=2))(X, 3)
    with pytest.raises(ValueError, match="positive int"):
        td.jit(lambda a: td.fori_loop(0, 3, lambda i, c: c, a, unroll=0))(X)


@pytest.mark.parametrize("policy", ["everything_saveable", "nothing_saveable", "dots_saveable",
                                    "dots_with_no_batch_dims_saveable", "save_only_these_names",
                                    "save_from_both_policies"])
def test_checkpoint_policies_keep_jaxs_gradients(policy):
    def pol(policies):
        p = getattr(policies, policy)
        if policy == "save_only_these_names":
            return p("h")
        if policy == "save_from_both_policies":
            return p(policies.nothing_saveable, policies.dots_saveable)
        return p

    def f(m, checkpoint, policies):
        def inner(b):
            h = m.tanh(b @ b.T)
            return m.sum(m.sin(h) * h)
        return checkpoint(inner, policy=pol(policies))

    got = td.grad(f(td, td.checkpoint, td.checkpoint_policies))(X)
    want = jax_value(jax.grad(f(jnp, jax.checkpoint, jax.checkpoint_policies)), X)
    close(got, np.asarray(want))
    got = td.hessian(f(td, td.checkpoint, td.checkpoint_policies))(X[:2, :3])
    want = jax_value(jax.hessian(f(jnp, jax.checkpoint, jax.checkpoint_policies)), X[:2, :3])
    close(got, np.asarray(want), rtol=1e-9)


def test_checkpoint_name_is_the_identity_and_policy_must_be_callable():
    close(td.jit(lambda a: td.checkpoint_name(a * 2, "h"))(X), 2 * X)
    with pytest.raises(TypeError, match="callable"):
        td.checkpoint(lambda a: a, policy="dots")
