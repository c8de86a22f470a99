"""td.lax.conv_general_dilated_local (api/lax_extra.py: patches + one batched dot_general, as
jax composes it) against jax.lax in x64: values on both backends, gradients of both operands,
second derivatives, vmap, a shared kernel reproducing conv_general_dilated, and bad shapes."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from tidu import lax as T

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax as L  # noqa: E402

jax.config.update("jax_enable_x64", True)

BACKENDS = ("cpu", "xla")
# (id, lhs shape, filter shape, strides, padding, lhs dilation, rhs dilation, dimension numbers)
CASES = [
    ("nchw-same", (2, 3, 6, 5), (3, 2), (1, 1), "SAME", None, None, None),
    ("nhwc-valid-rdil", (2, 6, 5, 3), (2, 2), (2, 1), "VALID", None, (1, 2),
     ("NHWC", "HWIO", "NHWC")),
    ("1d-ldil-odd-specs", (1, 7, 2), (3,), (2,), [(1, 2)], (2,), None, ("NWC", "OWI", "WNC")),
    ("3d", (1, 2, 4, 3, 4), (2, 1, 2), (1, 2, 1), "SAME_LOWER", None, None, None),
    ("whio", (2, 5, 4, 2), (2, 3), (1, 1), [(0, 1), (1, 1)], None, None,
     ("NHWC", "WHIO", "NHWC")),
]
IDS = [c[0] for c in CASES]


def _operands(case, out_features=4, seed=0):
    _, shp, fs, st, pad, ld, rd, dn = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shp)
    p = L.conv_general_dilated_patches(x, fs, st, pad, ld, rd, dn)
    _, rhs_spec, out_spec = L.conv_dimension_numbers(x.shape, (1, 1) + fs, dn)
    wshape = [0] * len(shp)
    wshape[rhs_spec[0]] = out_features
    wshape[rhs_spec[1]] = p.shape[out_spec[1]]
    for r, o in zip(rhs_spec[2:], out_spec[2:]):
        wshape[r] = p.shape[o]
    return x, rng.standard_normal(wshape)


def _f(lib, case):
    _, _, fs, st, pad, ld, rd, dn = case
    return lambda a, b: lib.conv_general_dilated_local(a, b, st, pad, fs, ld, rd, dn)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_match_jax(case, backend):
    x, w = _operands(case)
    want = np.asarray(_f(L, case)(x, w))
    got = td.jit(_f(T, case), backend=backend)(x, w)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_match_jax(case):
    x, w = _operands(case)
    want = jax.grad(lambda a, b: jnp.sum(jnp.sin(_f(L, case)(a, b))), argnums=(0, 1))(x, w)
    got = td.jit(td.grad(lambda a, b: td.sum(td.sin(_f(T, case)(a, b))), argnums=(0, 1)))(x, w)
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-11, atol=1e-12)


def test_second_derivative_matches_jax():
    case = CASES[1]
    x, w = _operands(case)
    v = np.random.default_rng(5).standard_normal(x.shape)

    def hvp(m, grad, f):
        g = grad(lambda a: m.sum(m.sin(f(a, w)) ** 2))
        return grad(lambda a: m.sum(g(a) * v))(x)

    np.testing.assert_allclose(hvp(td, td.grad, _f(T, case)), hvp(jnp, jax.grad, _f(L, case)),
                               rtol=1e-10, atol=1e-11)


def test_float32_and_vmap():
    case = CASES[0]
    x, w = _operands(case)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    got = td.jit(_f(T, case))(x32, w32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _f(L, case)(x32, w32), rtol=2e-5, atol=2e-5)
    xs = np.stack([x, 2 * x, -x])
    want = jax.vmap(_f(L, case), in_axes=(0, None))(xs, w)
    got = td.jit(td.vmap(_f(T, case), in_axes=(0, None)))(xs, w)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_a_shared_kernel_is_conv_general_dilated():
    """The same kernel at every output position gives the ordinary convolution."""
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 6))
    k = np.random.default_rng(2).standard_normal((4, 3, 2, 3))  # OIHW
    out = L.conv_general_dilated(x, k, (1, 1), "SAME")
    w = np.broadcast_to(k.reshape(4, 3 * 6, 1, 1), (4, 18) + out.shape[2:])
    got = td.jit(lambda a, b: T.conv_general_dilated_local(a, b, (1, 1), "SAME", (2, 3)))(x, w)
    np.testing.assert_allclose(got, out, rtol=1e-12, atol=1e-12)


def test_bad_rhs_names_the_problem():
    x = np.zeros((1, 2, 4, 4))
    with pytest.raises(ValueError, match=r"must have 8 at axis 1"):
        td.jit(lambda a, b: T.conv_general_dilated_local(a, b, (1, 1), "VALID", (2, 2)))(
            x, np.zeros((3, 7, 3, 3)))
    with pytest.raises(ValueError, match="rank 3 for lhs of rank 4"):
        td.jit(lambda a, b: T.conv_general_dilated_local(a, b, (1, 1), "VALID", (2, 2)))(
            x, np.zeros((3, 8, 3)))
