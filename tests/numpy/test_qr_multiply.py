"""td.scipy.linalg.qr_multiply against jax.scipy.linalg.qr_multiply in x64: both modes, conjugate,
1-d c, batch broadcasting, tall/wide/square a, both backends; gradients (m >= n, which jax's
lacks) against jax's through its reduced QR;
jax's errors."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value

jax = pytest.importorskip("jax")
import jax.scipy.linalg as jsl  # noqa: E402

jax.config.update("jax_enable_x64", True)


@functools.cache
def _jsl_qr_multiply(mode, conj):
    """jax's qr_multiply with these options: one function, so jax.jit compiles it once per shape
    and dtype and the other backend's test reuses it."""
    return lambda a, c: jsl.qr_multiply(a, c, mode=mode, conjugate=conj)


@pytest.mark.parametrize("backend", ["cpu", "xla"])
@pytest.mark.parametrize("dtype", ["float64", "complex128", "float32"])
def test_matches_jax(backend, dtype):
    rng = np.random.default_rng(0)
    tol = 1e-4 if dtype == "float32" else 1e-12
    for m, n in [(5, 3), (3, 5), (4, 4)]:
        k = min(m, n)
        a = rng.normal(size=(2, m, n)).astype(dtype)
        for mode, cs in [("right", (3, m)), ("left", (k, 2)), ("right", (m,)), ("left", (k,)),
                         ("left", (3, 1, k, 2))]:
            c = rng.normal(size=cs).astype(dtype)
            for conj in (False, True):
                fn = lambda a, c: td.scipy.linalg.qr_multiply(a, c, mode=mode,  # noqa: E731
                                                              conjugate=conj)
                got = td.jit(fn, backend=backend)(a, c)
                want = jax_value(_jsl_qr_multiply(mode, conj), a, c)
                for g, w in zip(got, want):
                    assert g.shape == w.shape and g.dtype == w.dtype
                    np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def test_gradients_are_those_of_the_reduced_qr():
    # jax's qr_multiply has no derivative (geqrf has no rule); tidu's is QR's: compare with jax's
    # gradient of the same products through jax.scipy.linalg.qr(mode='economic')
    rng = np.random.default_rng(1)
    a, c = rng.normal(size=(5, 3)), rng.normal(size=(2, 5))

    def tidu_loss(a, c):
        cq, r = td.scipy.linalg.qr_multiply(a, c)
        lq, _ = td.scipy.linalg.qr_multiply(a, c[:, :3].T, mode="left")
        return td.sum(cq ** 2) + td.sum(r ** 3) + td.sum(lq * lq) + td.sum(cq[:, :1] ** 3)

    def jax_loss(a, c):
        q, r = jsl.qr(a, mode="economic")
        cq, lq = c @ q, q @ c[:, :3].T
        return (cq ** 2).sum() + (r ** 3).sum() + (lq * lq).sum() + (cq[:, :1] ** 3).sum()

    got = td.grad(tidu_loss, argnums=(0, 1))(a, c)
    want = jax_value(jax.grad(jax_loss, argnums=(0, 1)), a, c)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)


def test_errors_as_jax():
    q = td.scipy.linalg.qr_multiply
    with pytest.raises(ValueError, match="mode must be 'right' or 'left'"):
        td.jit(lambda a: q(a, a, mode="up"))(np.eye(2))
    with pytest.raises(ValueError, match="c @ Q operation"):
        td.jit(q)(np.ones((4, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="Q @ c operation"):
        td.jit(lambda a, c: q(a, c, mode="left"))(np.ones((4, 3)), np.ones((4, 2)))
    with pytest.raises(NotImplementedError, match="geqp3"):
        td.jit(lambda a: q(a, a, pivoting=True))(np.eye(2))
