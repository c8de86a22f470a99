"""Named axes (td.vmap(..., axis_name=) with td.lax.psum/pmean/pmax/pmin/all_gather/axis_index):
values and derivatives against jax in x64, nesting in both orders, loops, errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value

jax.config.update("jax_enable_x64", True)

X = np.arange(12.0).reshape(4, 3) * 0.37 - 1.5
W = np.array([0.5, -1.0, 2.0])

# (name, tidu function of one member's row, jax's)
CASES = [
    ("psum", lambda v: td.lax.psum(v, "i"), lambda v: jax.lax.psum(v, "i")),
    ("pmean", lambda v: v - td.lax.pmean(v, "i"), lambda v: v - jax.lax.pmean(v, "i")),
    ("pmax", lambda v: td.lax.pmax(v, "i"), lambda v: jax.lax.pmax(v, "i")),
    ("pmin", lambda v: td.lax.pmin(v * v, "i"), lambda v: jax.lax.pmin(v * v, "i")),
    ("axis_index", lambda v: v * td.lax.axis_index("i"), lambda v: v * jax.lax.axis_index("i")),
    ("psum_1", lambda v: v * td.lax.psum(1, "i"), lambda v: v * jax.lax.psum(1, "i")),
    ("psum_bool", lambda v: td.lax.psum(v > 0, "i"), lambda v: jax.lax.psum(v > 0, "i")),
    ("psum_unmapped", lambda v: v + td.lax.psum(2.5, "i"), lambda v: v + jax.lax.psum(2.5, "i")),
    ("gather", lambda v: td.lax.all_gather(v, "i"), lambda v: jax.lax.all_gather(v, "i")),
    ("gather_axis1", lambda v: td.lax.all_gather(v, "i", axis=1),
     lambda v: jax.lax.all_gather(v, "i", axis=1)),
    ("gather_axis_neg", lambda v: td.lax.all_gather(v, "i", axis=-1),
     lambda v: jax.lax.all_gather(v, "i", axis=-1)),
    ("gather_tiled", lambda v: td.lax.all_gather(v, "i", tiled=True),
     lambda v: jax.lax.all_gather(v, "i", tiled=True)),
    ("pytree", lambda v: td.lax.psum({"a": v, "b": (v * 2, v[0])}, "i")["b"][0],
     lambda v: jax.lax.psum({"a": v, "b": (v * 2, v[0])}, "i")["b"][0]),
]


@pytest.mark.parametrize("name,tf,jf", CASES, ids=[c[0] for c in CASES])
def test_collectives_match_jax(name, tf, jf):
    got = td.vmap(tf, axis_name="i")(X)
    want = jax.vmap(jf, axis_name="i")(X)
    assert np.shape(got) == want.shape and np.asarray(got).dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("outer,inner", [("i", "j"), ("j", "i")])
def test_nested_named_axes_in_both_orders(outer, inner):
    def tf(v):
        return td.lax.psum(v, "i") * td.lax.axis_index("j") + td.lax.pmax(v, "j") \
            + td.lax.all_gather(v, "i")[0]

    def jf(v):
        return jax.lax.psum(v, "i") * jax.lax.axis_index("j") + jax.lax.pmax(v, "j") \
            + jax.lax.all_gather(v, "i")[0]

    got = td.vmap(td.vmap(tf, axis_name=inner), axis_name=outer)(X)
    want = jax.vmap(jax.vmap(jf, axis_name=inner), axis_name=outer)(X)
    np.testing.assert_allclose(got, want, rtol=1e-14)


def _tloss(w, v):
    r = v * w
    return td.sum((r - td.lax.pmean(r, "i")) ** 2) + td.sum(td.lax.all_gather(r, "i") ** 3)


def _jloss(w, v):
    r = v * w
    return jnp.sum((r - jax.lax.pmean(r, "i")) ** 2) + jnp.sum(jax.lax.all_gather(r, "i") ** 3)


def test_grad_inside_vmap_matches_jax_and_differences():
    got = td.vmap(td.grad(_tloss), in_axes=(None, 0), axis_name="i")(W, X)
    want = jax_value(jax.vmap(jax.grad(_jloss), in_axes=(None, 0), axis_name="i"), W, X)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    hess = td.vmap(td.hessian(_tloss), in_axes=(None, 0), axis_name="i")(W, X)
    jhess = jax_value(jax.vmap(jax.hessian(_jloss), in_axes=(None, 0), axis_name="i"), W, X)
    np.testing.assert_allclose(hess, jhess, rtol=1e-12, atol=1e-12)


def test_grad_of_a_vmapped_mean_loss_is_central_differences():
    def total(w):
        return td.sum(td.vmap(lambda v: td.lax.pmean(td.sum(td.tanh(v * w)), "i") ** 2,
                              axis_name="i")(X))

    g = td.grad(total)(W)
    h, value = 1e-6, td.jit(total)
    fd = [(value(W + h * e) - value(W - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(g, fd, rtol=1e-7)
    jg = jax_value(jax.grad(lambda w: jnp.sum(jax.vmap(
        lambda v: jax.lax.pmean(jnp.sum(jnp.tanh(v * w)), "i") ** 2, axis_name="i")(X))), W)
    np.testing.assert_allclose(g, jg, rtol=1e-13)


def test_pmax_tangent_goes_to_the_members_attaining_it():
    # jax has no derivative for pmax; tidu's is its reductions' (ties share the tangent)
    g = td.grad(lambda w: td.sum(td.vmap(lambda v: td.lax.pmax(v * w, "i"),
                                         axis_name="i")(X)))(W)
    want = jax.grad(lambda w: jnp.sum(jnp.max(X * w, axis=0)) * X.shape[0])(W)
    np.testing.assert_allclose(g, want, rtol=1e-14)
    tie = td.grad(lambda s: td.sum(td.vmap(lambda v: td.lax.pmax(v * 0 + s, "i"),
                                           axis_name="i")(X)))(1.5)
    assert tie == pytest.approx(X.size)  # 4 tied members per column share each tangent


def test_collectives_in_loops_and_jit():
    def tf(v):
        c = td.scan(lambda c, e: (c + td.lax.psum(e, "i"), c), 0.0, v)[0]
        return td.fori_loop(0, 3, lambda k, a: a + td.lax.axis_index("i") * k, c)

    def jf(v):
        c = jax.lax.scan(lambda c, e: (c + jax.lax.psum(e, "i"), c), 0.0, v)[0]
        return jax.lax.fori_loop(0, 3, lambda k, a: a + jax.lax.axis_index("i") * k, c)

    got = td.jit(td.vmap(tf, axis_name="i"))(X)
    np.testing.assert_allclose(got, jax.vmap(jf, axis_name="i")(X), rtol=1e-14)
    # in_axes None: every member sees the same value, the index still tells them apart
    got = td.vmap(lambda v, k: v * td.lax.axis_index("i") + td.lax.axis_size("i"),
                  in_axes=(None, 0), axis_name="i")(W, np.arange(4.0))
    np.testing.assert_allclose(got, np.arange(4.0)[:, None] * W + 4)


def test_unbound_and_bad_axis_names_are_refused():
    with pytest.raises(NameError, match="unbound axis name: 'k'"):
        td.jit(lambda v: td.lax.psum(v, "k"))(X)
    with pytest.raises(NameError, match=r"bound here are \['i'\]"):
        td.vmap(lambda v: td.lax.axis_index("j"), axis_name="i")(X)
    with pytest.raises(TypeError, match="hashable"):
        td.vmap(lambda v: v, axis_name=["i"])(X)
    with pytest.raises(ValueError, match="out of range"):
        td.vmap(lambda v: td.lax.all_gather(v, "i", axis=3), axis_name="i")(X)
    # a name only binds inside its own vmap
    assert td.vmap(lambda v: td.lax.psum(v, "i"), axis_name="i")(X).shape == X.shape
    with pytest.raises(NameError):
        td.vmap(lambda v: td.lax.psum(v, "i"))(X)
