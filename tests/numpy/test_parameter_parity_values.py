"""Values (and first derivatives, where differentiable) of the parameters tidu took on for jax
parity (issue #32, test_signature_parity.py checks the signatures): each call here is the same
call on jax.numpy, in x64, on both backends."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

pytest.importorskip("jax")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

BACKENDS = ["cpu", "xla"]
RNG = np.random.default_rng(7)
X = RNG.normal(size=(3, 5))
XN = X.copy()
XN[1, 2] = np.nan
MEAN = X.mean(1, keepdims=True) + 0.1
WHERE = X > -0.5
W = RNG.uniform(0.1, 1.0, size=(3, 5))
Q = np.array([0.1, 0.5, 0.93])
F32 = np.float32


# name -> (f(np_namespace, nn_namespace, x), input, differentiable)
CASES = {
    "var_mean": (lambda n, nn, a: n.var(a, 1, mean=MEAN), X, True),
    "std_mean_ddof": (lambda n, nn, a: n.std(a, 1, ddof=1, mean=MEAN, keepdims=True), X, True),
    "nansum_positional": (lambda n, nn, a: n.nansum(a, 1, None, None, True, 2.0, WHERE), XN, True),
    "nanprod_where": (lambda n, nn, a: n.nanprod(a, 0, where=WHERE, initial=3.0), XN, True),
    "nanmax_where": (lambda n, nn, a: n.nanmax(a, 1, where=WHERE, initial=-9.0), XN, False),
    "nanmin_keepdims": (lambda n, nn, a: n.nanmin(a, 0, None, True), XN, False),
    "nanmean_where": (lambda n, nn, a: n.nanmean(a, 1, where=WHERE), XN, True),
    "nanvar_where_mean": (lambda n, nn, a: n.nanvar(a, 1, where=WHERE, mean=MEAN), XN, True),
    "nanstd_positional": (lambda n, nn, a: n.nanstd(a, 1, None, None, 1, True), XN, True),
    "nanargmax_keepdims": (lambda n, nn, a: n.nanargmax(a, 1, None, True), XN, False),
    "argmin_keepdims": (lambda n, nn, a: n.argmin(a, 1, None, True), X, False),
    "argsort_dtype": (lambda n, nn, a: n.argsort(a, 1, dtype=np.int32), X, False),
    "concatenate_axis_none_dtype": (
        lambda n, nn, a: n.concatenate([a, a[:1]], None, dtype=F32), X, False),
    "reshape_fortran": (lambda n, nn, a: n.reshape(a, (5, 3), order="F"), X, True),
    "where_one_argument": (lambda n, nn, a: n.where(a > 0, size=9, fill_value=-1), X, False),
    "dot_preferred_wider": (
        lambda n, nn, a: n.dot(a.astype(F32), a.T.astype(F32), preferred_element_type=np.float64),
        X, False),
    "matmul_int8_to_int32": (
        lambda n, nn, a: n.matmul((a * 40).astype(np.int8), (a.T * 40).astype(np.int8),
                                  preferred_element_type=np.int32), X, False),
    "tensordot_precision": (
        lambda n, nn, a: n.tensordot(a, a, axes=([1], [1]), precision="highest"), X, True),
    "inner_precision": (lambda n, nn, a: n.inner(a, a, precision=None), X, True),
    "cov_dtype": (lambda n, nn, a: n.cov(a, dtype=F32), X, False),
    "corrcoef_dtype": (lambda n, nn, a: n.corrcoef(a, dtype=F32), X, False),
    "ptp_keepdims": (lambda n, nn, a: n.ptp(a, 1, None, True), X, True),
    "trace_offset": (lambda n, nn, a: n.trace(a, 1), X, True),
    "take_hints": (lambda n, nn, a: n.take(a, np.array([0, 4, -1]), 1, None, "clip", True, True),
                   X, True),
    "take_along_axis_clip_negative": (
        lambda n, nn, a: n.take_along_axis(a, np.array([[-1, 0, 7]] * 3), 1, mode="clip"),
        X, True),
    "take_along_axis_no_wrap": (
        lambda n, nn, a: n.take_along_axis(a, np.array([[-1, 0, 2]] * 3), 1,
                                           wrap_negative_indices=False), X, False),
    "quantile_inverted_cdf_weights": (
        lambda n, nn, a: n.quantile(a, Q, axis=1, method="inverted_cdf", weights=W), X, True),
    "quantile_inverted_cdf_axis_weights": (
        lambda n, nn, a: n.quantile(a, Q, axis=1, method="inverted_cdf", weights=W[0]), X, True),
    "nanpercentile_inverted_cdf": (
        lambda n, nn, a: n.nanpercentile(a, 100 * Q, axis=1, method="inverted_cdf", weights=W),
        XN, False),
    "linalg_diagonal_offset": (lambda n, nn, a: n.linalg.diagonal(a, offset=1), X, True),
    "slogdet_qr": (lambda n, nn, a: n.linalg.slogdet(a[:, :3], method="qr"), X, True),
    "pinv_rcond": (lambda n, nn, a: n.linalg.pinv(a, rcond=0.1), X, True),
    "lstsq_numpy_resid": (lambda n, nn, a: n.linalg.lstsq(a, a[:, 0], numpy_resid=True)[:2],
                          X, False),
    "standardize_fast": (lambda n, nn, a: nn.standardize(a, 1), X, True),
    "standardize_where_stable": (
        lambda n, nn, a: nn.standardize(a, 1, where=WHERE, algorithm="stable"), X, True),
    "ravel_multi_index_dtype": (
        lambda n, nn, a: n.ravel_multi_index((n.argmax(a, 1), n.argmin(a, 1)), (3, 5),
                                             mode="clip", dtype=np.int32), X, False),
    "einsum_out_none": (lambda n, nn, a: n.einsum("ij,kj->ik", a, a, out=None), X, True),
    "round_keyword_a": (lambda n, nn, a: n.round(a=a, decimals=1), X, False),
    "cumsum_out_none": (lambda n, nn, a: n.cumsum(a, 1, None, None), X, True),
}

def _minus_one(lx, a):
    """-1 as a traced int32 (a value the program computes, not a constant)."""
    return lx.convert_element_type(a[0, 0] * 0, np.int32) - 1


# jax.lax calls: f(lax_namespace, x)
LAX_CASES = {
    "atan2_keywords": (lambda lx, a: lx.atan2(x=a, y=a[::-1]), True),
    "mul_out_dtype": (lambda lx, a: lx.mul(a.astype(F32), a.astype(F32), out_dtype=np.float64),
                      False),
    "bitwise_keywords": (lambda lx, a: lx.bitwise_xor(x=(a > 0), y=(a < 0.5)), False),
    "dynamic_slice_no_negative": (  # a traced negative start clamps to 0
        lambda lx, a: lx.dynamic_slice(a, (_minus_one(lx, a), np.int32(1)), (2, 2),
                                       allow_negative_indices=False), True),
    "dynamic_slice_per_axis": (
        lambda lx, a: lx.dynamic_slice(a, (np.int32(-1), _minus_one(lx, a) - 1), (2, 2),
                                       allow_negative_indices=(True, False)), True),
    "dynamic_update_slice_no_negative": (
        lambda lx, a: lx.dynamic_update_slice(a, a[:1, :2] * 2, (_minus_one(lx, a), np.int32(0)),
                                              allow_negative_indices=False), True),
    "cond_operand_keyword": (
        lambda lx, a: lx.cond(True, lambda v: v * 2, lambda v: v, operand=a), True),
    "switch_operand_keyword": (
        lambda lx, a: lx.switch(1, [lambda v: v, lambda v: v + 1], operand=a), True),
    "full_like_keywords": (lambda lx, a: lx.full_like(x=a, fill_value=2.0, shape=(2, 2)), False),
    "tile_operand": (lambda lx, a: lx.tile(operand=a, reps=(1, 2)), True),
}


def _leaves(v):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(v)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_jax(name, backend):
    f, x, _ = CASES[name]
    got = td.jit(lambda a: f(td, td.nn, a), backend=backend)(x)
    want = f(jnp, jax.nn, x)
    g, w = _leaves(got), _leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
        tol = 1e-5 if a.dtype in (np.float32, np.complex64) else 1e-12
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(LAX_CASES))
def test_lax_values_match_jax(name, backend):
    f, _ = LAX_CASES[name]
    got = td.jit(lambda a: f(td.lax, a), backend=backend)(X)
    want = f(jax.lax, jnp.asarray(X))
    g, w = _leaves(got), _leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("name", sorted(n for n, c in LAX_CASES.items() if c[1]))
def test_lax_first_derivatives_match_jax(name):
    f, _ = LAX_CASES[name]
    got = td.jit(td.grad(lambda a: td.sum(td.sin(f(td.lax, a)))))(X)
    want = np.asarray(jax.grad(lambda a: jnp.sum(jnp.sin(f(jax.lax, a))))(X))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c[2]))
def test_first_derivatives_match_jax(name):
    f, x, _ = CASES[name]

    def loss(ns, nn):
        def g(a):
            out = f(ns, nn, a)
            leaves = [v for v in jax.tree_util.tree_leaves(out)
                      if np.dtype(v.dtype).kind in "fc"]
            return sum(ns.nansum(ns.sin(v) * (i + 1)) for i, v in enumerate(leaves))
        return g

    got = td.jit(td.grad(loss(td, td.nn)))(x)
    want = np.asarray(jax.grad(loss(jnp, jax.nn))(x))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)


def test_bad_arguments_name_the_problem():
    with pytest.raises(NotImplementedError, match="out argument"):
        td.jit(lambda a: td.nansum(a, out=np.zeros(1)))(X)
    with pytest.raises(ValueError, match="size and fill_value"):
        td.jit(lambda a: td.where(a > 0, a, 0, size=3))(X)
    with pytest.raises(ValueError, match="both x and y"):
        td.jit(lambda a: td.where(a > 0, a))(X)
    with pytest.raises(NotImplementedError, match="order"):
        td.jit(lambda a: td.reshape(a, (5, 3), order="A"))(X)
    with pytest.raises(NotImplementedError, match="inverted_cdf"):
        td.jit(lambda a: td.quantile(a, 0.5, weights=W))(X)
    with pytest.raises(ValueError, match="reduced axes"):
        td.jit(lambda a: td.quantile(a, 0.5, axis=1, method="inverted_cdf", weights=W[:, 0]))(X)
    with pytest.raises(ValueError, match="rank"):
        td.jit(lambda a: td.linalg.lstsq(a.T, a[0], numpy_resid=True))(X)
    with pytest.raises(ValueError, match="method"):
        td.jit(lambda a: td.linalg.slogdet(a[:, :3], method="cholesky"))(X)
    with pytest.raises(ValueError, match="only one of rtol and rcond"):
        td.jit(lambda a: td.linalg.pinv(a, 0.1, rcond=0.1))(X)
    with pytest.raises(ValueError, match="host"):
        td.jit(lambda a: td.zeros_like(a, device="gpu"))(X)
    with pytest.raises(TypeError, match="precision"):
        td.jit(lambda a: td.dot(a, a.T, precision=3))(X)
    with pytest.raises(ValueError, match="algorithm"):
        td.jit(lambda a: td.nn.standardize(a, algorithm="slow"))(X)
    with pytest.raises(ValueError, match="integer dtype"):
        td.jit(lambda a: td.argsort(a, dtype=np.float32))(X)
    with pytest.raises(TypeError, match="not both"):
        td.jit(lambda a: td.lax.cond(True, lambda v: v, lambda v: v, a, operand=a))(X)
    with pytest.raises(NotImplementedError, match="axis_index_groups"):
        td.vmap(lambda v: td.lax.psum(v, "i", axis_index_groups=[[0]]), axis_name="i")(X)
    with pytest.raises(ValueError, match="out of bounds"):
        td.jit(lambda a: td.lax.dynamic_slice(a, (-1, 0), (1, 1),
                                              allow_negative_indices=False))(X)
    with pytest.raises(ValueError, match="one per axis"):
        td.jit(lambda a: td.lax.dynamic_slice(a, (0, 0), (1, 1),
                                              allow_negative_indices=(True,)))(X)
