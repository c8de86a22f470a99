"""td.lax.ppermute, pshuffle, pbroadcast, psum_scatter, all_to_all and pswapaxes (from
all_gather and axis_index) under td.vmap(..., axis_name=) against jax.vmap in x64: values,
gradients of a loss through them, under jit on both backends, and the errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

R = np.random.default_rng(11)
X = R.standard_normal((4, 4, 3))  # 4 members, each a (4, 3) array
W = R.standard_normal((4, 4, 3))


def both(name, *args, **kw):
    return (lambda v: getattr(td.lax, name)(v, "i", *args, **kw),
            lambda v: getattr(jax.lax, name)(v, "i", *args, **kw))


CASES = [
    ("ppermute-cycle", *both("ppermute", [(0, 1), (1, 2), (2, 3), (3, 0)])),
    # members 0 and 3 receive nothing: zeros (jax's vmap takes only whole permutations, so its
    # side completes this one and zeroes those two)
    ("ppermute-partial", lambda v: td.lax.ppermute(v, "i", [(0, 2), (3, 1)]),
     lambda v: jax.numpy.where((jax.lax.axis_index("i") == 1) | (jax.lax.axis_index("i") == 2),
                               jax.lax.ppermute(v, "i", [(0, 2), (3, 1), (1, 0), (2, 3)]), 0.0)),
    ("pshuffle", *both("pshuffle", [2, 0, 3, 1])),
    ("pbroadcast", *both("pbroadcast", 2)),
    ("psum_scatter", *both("psum_scatter")),
    ("psum_scatter-tiled", *both("psum_scatter", tiled=True)),
    ("psum_scatter-dim1", lambda v: td.lax.psum_scatter(v[:, :1] * v[0], "i", scatter_dimension=0),
     lambda v: jax.lax.psum_scatter(v[:, :1] * v[0], "i", scatter_dimension=0)),
    ("all_to_all-0-1", *both("all_to_all", 0, 1)),
    ("all_to_all-0-0", *both("all_to_all", 0, 0)),
    ("all_to_all-tiled-0-1", *both("all_to_all", 0, 1, tiled=True)),
    ("pswapaxes", *both("pswapaxes", 0)),
    ("pytree", lambda v: td.lax.ppermute({"a": v, "b": v[0]}, "i", [(1, 0), (0, 1), (2, 3), (3, 2)])["b"],
     lambda v: jax.lax.ppermute({"a": v, "b": v[0]}, "i",
                                [(1, 0), (0, 1), (2, 3), (3, 2)])["b"]),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name,tf,jf", CASES, ids=IDS)
def test_values_match_jax(name, tf, jf):
    want = np.asarray(jax.vmap(jf, axis_name="i")(X))
    got = td.vmap(tf, axis_name="i")(X)
    assert np.shape(got) == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
    for backend in ("cpu", "xla"):
        got = td.jit(td.vmap(tf, axis_name="i"), backend=backend)(X)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("name,tf,jf", CASES, ids=IDS)
def test_gradients_match_jax(name, tf, jf):
    if name == "pbroadcast":  # jax's own transpose of pbroadcast fails under vmap: its
        # docstring's equivalent instead
        def jf(v):
            return jax.lax.psum(jax.numpy.where(jax.lax.axis_index("i") == 2, v, 0.0), "i")
    w = R.standard_normal(np.shape(jax.vmap(jf, axis_name="i")(X)))

    def loss(f, M, S):
        return lambda x: S.sum(M.vmap(f, axis_name="i")(x) ** 2 * w)

    want = jax.grad(loss(jf, jax, jax.numpy))(X)
    got = td.jit(td.grad(loss(tf, td, td)))(X)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_bad_input_names_the_problem():
    def run(f):
        return td.vmap(f, axis_name="i")(X)

    with pytest.raises(ValueError, match="distinct sources with distinct destinations"):
        run(lambda v: td.lax.ppermute(v, "i", [(0, 1), (2, 1)]))
    with pytest.raises(ValueError, match="not a permutation"):
        run(lambda v: td.lax.pshuffle(v, "i", [0, 0, 1, 2]))
    with pytest.raises(ValueError, match="source 4 is not a member"):
        run(lambda v: td.lax.pbroadcast(v, "i", 4))
    with pytest.raises(ValueError, match="must equal the size 4"):
        run(lambda v: td.lax.psum_scatter(v, "i", scatter_dimension=1))
    with pytest.raises(ValueError, match="must divide by the size 4"):
        run(lambda v: td.lax.all_to_all(v, "i", 1, 0, tiled=True))
    with pytest.raises(NotImplementedError, match="axis_index_groups"):
        run(lambda v: td.lax.all_to_all(v, "i", 0, 1, axis_index_groups=[[0, 1], [2, 3]]))
    with pytest.raises(NameError, match="unbound axis name: 'j'"):
        run(lambda v: td.lax.ppermute(v, "j", [(0, 1)]))
