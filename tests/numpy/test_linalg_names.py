"""td.linalg's named results and extras, td.scipy.linalg and td.nn.dot_product_attention
against jax in x64: values under jit, first and second derivatives along a direction."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value
from _support.compare import close as _close

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.scipy import linalg as jsl  # noqa: E402

jax.config.update("jax_enable_x64", True)

TD = SimpleNamespace(sl=td.scipy.linalg, la=td.linalg, np=td, nn=td.nn)
JX = SimpleNamespace(sl=jsl, la=jnp.linalg, np=jnp, nn=jax.nn)

RNG = np.random.default_rng(3)
A = RNG.normal(size=(4, 4))
SPD = A @ A.T + 4 * np.eye(4)
LOWER = np.tril(A) + 3 * np.eye(4)
B = RNG.normal(size=(4, 2))
BATCH = RNG.normal(size=(2, 3, 3))
SMALL = 0.01 * A  # expm: the Pade-3 branch
MID = 0.4 * A  # Pade 7/9
BIG = 3.0 * A  # Pade 13 with squarings
RANKDEF = np.outer(A[0], A[1]) + np.outer(A[2], A[3])


def _sym(x):
    return (x + x.T) / 2


close = partial(_close, rtol=1e-10, atol=1e-11)


# name -> (f(L, x), [inputs], differentiable)
CASES = {
    "solve_triangular": (lambda L, x: L.sl.solve_triangular(x, B, lower=True), [LOWER], True),
    "solve_triangular_T": (lambda L, x: L.sl.solve_triangular(x.T, B, trans=1), [LOWER], True),
    # the factorizations of Hermitian input read one triangle; jax's derivative takes the
    # perturbation as given, tidu's as one of that triangle: they agree on Hermitian
    # perturbations, so these differentiate through (x + x^T) / 2
    "cho_solve": (lambda L, x: L.sl.cho_solve(L.sl.cho_factor(_sym(x)), B), [SPD], True),
    "cho_solve_lower": (lambda L, x: L.sl.cho_solve(L.sl.cho_factor(_sym(x), lower=True),
                                                    B[:, 0]), [SPD], True),
    "sl_cholesky": (lambda L, x: L.sl.cholesky(_sym(x)), [SPD], True),
    "sl_cholesky_lower": (lambda L, x: L.sl.cholesky(_sym(x), lower=True), [SPD], True),
    "sl_cholesky_reads_upper": (lambda L, x: L.sl.cholesky(x + L.np.tril(x * 5, -1)), [SPD],
                                False),
    "sl_cholesky_reads_lower": (lambda L, x: L.sl.cholesky(x + L.np.triu(x * 5, 1), lower=True),
                                [SPD], False),
    "lu_solve": (lambda L, x: L.sl.lu_solve(L.sl.lu_factor(x), B), [A], True),
    "lu": (lambda L, x: L.sl.lu(x), [A], True),
    "lu_permute_l": (lambda L, x: L.sl.lu(x, permute_l=True), [A], True),
    "block_diag": (lambda L, x: L.sl.block_diag(x, x[:2, :3], 2.0 * x[0], x[1, 1]), [A], True),
    "expm_small": (lambda L, x: L.sl.expm(x), [SMALL, 0.05 * A, 0.2 * A], True),
    "expm_mid": (lambda L, x: L.sl.expm(x), [MID, 0.7 * A], True),
    "expm_big": (lambda L, x: L.sl.expm(x), [BIG, BATCH * 4], True),
    "expm_upper": (lambda L, x: L.sl.expm(x, upper_triangular=True), [np.triu(A)], True),
    "expm_too_many_squarings": (lambda L, x: L.sl.expm(x, max_squarings=1), [BIG], False),
    "sl_det": (lambda L, x: L.sl.det(x), [A], True),
    "sl_inv": (lambda L, x: L.sl.inv(x), [A], True),
    "sl_solve": (lambda L, x: L.sl.solve(x, B), [A], True),
    "sl_solve_pos": (lambda L, x: L.sl.solve(_sym(x), B, assume_a="pos"), [SPD], True),
    "sl_eigh": (lambda L, x: L.sl.eigh(_sym(x))[0], [SPD], True),
    "sl_eigh_nonsymmetric": (lambda L, x: L.sl.eigh(x + L.np.tril(x, -1), lower=False)[0],
                             [SPD], False),
    "sl_eigvals_only": (lambda L, x: L.sl.eigh(_sym(x), eigvals_only=True), [SPD], True),
    "sl_svd_s": (lambda L, x: L.sl.svd(x, compute_uv=False), [A], True),
    "sl_qr_r": (lambda L, x: L.np.abs(L.sl.qr(x, mode="r")[0]), [A], True),
    "sl_qr_economic": (lambda L, x: L.np.abs(L.sl.qr(x[:, :3], mode="economic")[1]), [A], True),
    "matrix_rank": (lambda L, x: L.la.matrix_rank(x), [A, RANKDEF, A[0]], False),
    "matrix_rank_tol": (lambda L, x: L.la.matrix_rank(x, 1.0), [A], False),
    "cond": (lambda L, x: L.la.cond(x), [A, BATCH], True),
    "cond_p": (lambda L, x: (L.la.cond(x, 1), L.la.cond(x, -2), L.la.cond(x, "fro"),
                             L.la.cond(x, np.inf)), [A], True),
    "multi_dot": (lambda L, x: L.la.multi_dot([x, x[:, :2], x[:2, :3], x[:3]]), [A], True),
    "multi_dot_vec": (lambda L, x: L.la.multi_dot([x[0], x, x[:, 1]]), [A], True),
    "tensorinv": (lambda L, x: L.la.tensorinv(L.np.reshape(x, (2, 2, 4)), ind=2), [A], True),
    "tensorsolve": (lambda L, x: L.la.tensorsolve(L.np.reshape(x, (2, 2, 2, 2)), B[:2, :2]),
                    [A], True),
    "slogdet_fields": (lambda L, x: (L.la.slogdet(x).sign, L.la.slogdet(x).logabsdet), [A],
                       True),
    "eigh_fields": (lambda L, x: L.la.eigh(x).eigenvalues, [SPD], True),
    "svd_fields": (lambda L, x: L.la.svd(x).S, [A], True),
    "qr_fields": (lambda L, x: L.np.abs(L.la.qr(x).R), [A], True),
}


def _rows():
    for name, (f, xs, _) in CASES.items():
        for i, x in enumerate(xs):
            yield pytest.param(f, x, id=f"{name}-{i}")


@pytest.mark.parametrize("f,x", list(_rows()))
def test_values_against_jax(f, x):
    want = jax.tree_util.tree_leaves(f(JX, jnp.asarray(x)))
    got = jax.tree_util.tree_leaves(td.jit(lambda x: f(TD, x))(x))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        close(g, w)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c[2]])
def test_first_and_second_derivatives_against_jax(name):
    f, xs, _ = CASES[name]
    for x in xs:
        ws = [RNG.normal(size=np.shape(o)) for o in jax.tree_util.tree_leaves(f(JX, x))]

        def loss(L):
            return lambda x: sum(L.np.sum(o * w) for o, w in
                                 zip(jax.tree_util.tree_leaves(f(L, x)), ws))

        close(td.grad(loss(TD))(x), jax_value(jax.grad(loss(JX)), jnp.asarray(x)), rtol=1e-8, atol=1e-9)
        d = RNG.normal(size=np.shape(x))

        def dd(L, g):
            return lambda s: g(lambda s: loss(L)(x + s * d))(s)

        close(td.grad(dd(TD, td.grad))(0.0), jax_value(jax.grad(dd(JX, jax.grad)), 0.0), rtol=1e-7,
              atol=1e-8)


def test_results_are_named_tuples_that_unpack():
    seen = {}

    def f(a):
        r = (td.linalg.slogdet(a), td.linalg.eigh(a @ a.T), td.linalg.svd(a), td.linalg.qr(a))
        seen["types"] = [type(x) for x in r]
        return r

    sl, eh, sv, qr = td.jit(f)(A)
    assert seen["types"] == [td.linalg.SlogdetResult, td.linalg.EighResult,
                             td.linalg.SVDResult, td.linalg.QRResult]
    sl, eh, sv, qr = (td.linalg.SlogdetResult(*sl), td.linalg.EighResult(*eh),
                      td.linalg.SVDResult(*sv), td.linalg.QRResult(*qr))
    assert isinstance(sl, td.linalg.SlogdetResult) and sl._fields == ("sign", "logabsdet")
    assert eh._fields == ("eigenvalues", "eigenvectors")
    assert sv._fields == ("U", "S", "Vh") and qr._fields == ("Q", "R")
    sign, logabsdet = sl
    close(sign * np.exp(logabsdet), np.linalg.det(A))
    u, s, vh = sv
    close(u @ np.diag(s) @ vh, A)


def test_bad_shapes_name_the_problem():
    with pytest.raises(ValueError, match="multi_dot: the last axis"):
        td.jit(lambda a: td.linalg.multi_dot([a, B.T]))(A)
    with pytest.raises(ValueError, match="tensorinv: the product"):
        td.jit(lambda a: td.linalg.tensorinv(a, ind=1))(np.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="cond: for p=1 x must be square"):
        td.jit(lambda a: td.linalg.cond(a, 1))(np.ones((2, 3)))
    with pytest.raises(ValueError, match="lu: .*square|square"):
        td.jit(td.scipy.linalg.lu)(np.ones((2, 3)))
    with pytest.raises(ValueError, match="block_diag: arguments must be at most 2-D"):
        td.jit(td.scipy.linalg.block_diag)(np.ones((2, 2, 2)))


# ---- dot_product_attention ----

Q = RNG.normal(size=(2, 5, 4, 3))
K = RNG.normal(size=(2, 6, 2, 3))  # grouped-query: 4 heads over 2 key/value heads
V = RNG.normal(size=(2, 6, 2, 3))
BIAS = RNG.normal(size=(1, 4, 5, 6))
MASK = RNG.random(size=(2, 1, 5, 6)) > 0.3

ATTN = {
    "plain": lambda L, q, k, v: L.nn.dot_product_attention(q, k, v),
    "bias_scale": lambda L, q, k, v: L.nn.dot_product_attention(q, k, v, BIAS, scale=0.7),
    "mask": lambda L, q, k, v: L.nn.dot_product_attention(q, k, v, mask=MASK),
    "causal": lambda L, q, k, v: L.nn.dot_product_attention(q, k, v, is_causal=True),
    "window": lambda L, q, k, v: L.nn.dot_product_attention(q, k, v, local_window_size=(1, 2)),
    "lengths": lambda L, q, k, v: L.nn.dot_product_attention(
        q, k, v, query_seq_lengths=np.array([3, 5], np.int32),
        key_value_seq_lengths=np.array([6, 2], np.int32)),
    "unbatched": lambda L, q, k, v: L.nn.dot_product_attention(q[0], k[0], v[0], BIAS[0],
                                                               is_causal=True),
    "residual": lambda L, q, k, v: L.nn.dot_product_attention(q, k, v, is_causal=True,
                                                              return_residual=True),
}


@pytest.mark.parametrize("name", sorted(ATTN))
def test_dot_product_attention_against_jax(name):
    f = ATTN[name]
    want = jax.tree_util.tree_leaves(f(JX, *(jnp.asarray(a, jnp.float32) for a in (Q, K, V))))
    got = jax.tree_util.tree_leaves(td.jit(lambda q, k, v: f(TD, q, k, v))(
        *(a.astype(np.float32) for a in (Q, K, V))))
    for g, w in zip(got, want):
        close(g, w, rtol=2e-5, atol=2e-6)
    # float64: jax computes the softmax in float32 even then; tidu keeps float64
    w = RNG.normal(size=Q.shape)

    def loss(L):
        return lambda q, k, v: L.np.sum(jax.tree_util.tree_leaves(f(L, q, k, v))[0] * w)

    gt = td.grad(loss(TD), argnums=(0, 1, 2))(Q, K, V)
    gj = jax.grad(loss(JX), argnums=(0, 1, 2))(*(jnp.asarray(a) for a in (Q, K, V)))
    for g, w_ in zip(gt, gj):
        close(g, w_, rtol=1e-5, atol=1e-5)


def test_dot_product_attention_rejects_bad_heads():
    with pytest.raises(ValueError, match="N a multiple of K"):
        td.jit(td.nn.dot_product_attention)(Q, K[:, :, :1].repeat(3, axis=2),
                                             V[:, :, :1].repeat(3, axis=2))
    with pytest.raises(TypeError, match="mask must be bool"):
        td.jit(lambda q: td.nn.dot_product_attention(q, K, V, mask=MASK * 1.0))(Q)
