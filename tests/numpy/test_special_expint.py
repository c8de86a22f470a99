"""td.scipy.special's exponential, trigonometric and Fresnel integrals (expi, exp1, expn, sici,
fresnel: jax's Cephes ports) against jax.scipy.special in x64 over their domain (both signs, the
piece boundaries, 0, +-inf, NaN, expn's n up to and past 5000) on both backends, float32, and
first and second derivatives against jax and finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from tidu.testing import check_grads

jax = pytest.importorskip("jax")
import jax.scipy.special as jss  # noqa: E402

jax.config.update("jax_enable_x64", True)
S = td.scipy.special
EDGES = [2.0 ** i for i in range(1, 7)]
X = np.concatenate([-np.geomspace(1e-4, 700, 45), np.geomspace(1e-4, 700, 70), EDGES,
                    np.nextafter(EDGES, 0), [0.0, -0.0, 1.0, np.inf, -np.inf, np.nan]])


@pytest.mark.parametrize("backend", ["cpu", "xla"])
@pytest.mark.parametrize("name", ["expi", "exp1"])
def test_values_match_jax(backend, name):
    got = td.jit(getattr(S, name), backend=backend)(X)
    want = np.asarray(getattr(jss, name)(X))
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0, equal_nan=True)
    x32 = X.astype(np.float32)
    got32 = td.jit(getattr(S, name), backend=backend)(x32)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, np.asarray(getattr(jss, name)(x32)), rtol=2e-5,
                               atol=1e-6, equal_nan=True)  # 1e-6: Ei's zero at 0.3725


@pytest.mark.parametrize("backend", ["cpu", "xla"])
def test_expn_matches_jax(backend):
    n = np.array([-1, 0, 1, 2, 3, 5, 10, 30, 4999, 5000, 6000.0])[:, None]
    x = np.array([-1.0, 0, 1e-3, 0.1, 0.5, 1, 1.0001, 1.5, 3, 10, 50, 700, np.inf,
                  np.nan])[None, :]
    got = td.jit(S.expn, backend=backend)(n, x)
    # atol: XLA on CPU flushes subnormal results (E_5000(700) ~ 1e-308) to zero
    np.testing.assert_allclose(got, np.asarray(jss.expn(n, x)), rtol=1e-12, atol=1e-300,
                               equal_nan=True)
    assert td.jit(lambda x: S.expn(2, x))(np.float32(0.5)).dtype == np.float32


def test_derivatives_match_jax_and_finite_differences():
    x = np.array([-30.0, -3.0, -0.5, 0.05, 0.7, 1.9, 2.5, 5.0, 12.0, 40.0, 90.0])
    pos = x[x > 0]
    cases = [("expi", x), ("exp1", pos)]
    for name, pts in cases:
        got = td.jit(td.vmap(td.grad(getattr(S, name))))(pts)
        want = np.asarray(jax.vmap(jax.grad(getattr(jss, name)))(pts))
        np.testing.assert_allclose(got, want, rtol=1e-12)
        got2 = td.jit(td.vmap(td.grad(td.grad(getattr(S, name)))))(pts)
        if name == "expi":
            want2 = np.asarray(jax.vmap(jax.grad(jax.grad(jss.expi)))(pts))
        else:  # jax's second derivative of exp1 fails to trace; E1'' = e^-x (1/x + 1/x^2)
            # above 1; jax's rule (E_0' = -E_{-1}, NaN for n < 0) makes it NaN at x <= 1
            want2 = np.where(pts > 1, np.exp(-pts) * (1 / pts + 1 / pts ** 2), np.nan)
        np.testing.assert_allclose(got2, want2, rtol=1e-10)
    for n in (1, 2, 5):
        got = td.jit(td.vmap(td.grad(lambda x: S.expn(n, x))))(pos)
        want = [jax.grad(lambda x: jss.expn(n, x))(p) for p in pos]  # jax's fails under vmap
        np.testing.assert_allclose(got, want, rtol=1e-12)
    small = np.array([-2.0, 0.3, 1.5, 6.0])
    check_grads(S.expi, [small], order=2, atol=1e-6, rtol=1e-6)
    check_grads(S.exp1, [np.abs(small)], order=1, atol=1e-6, rtol=1e-6)
    check_grads(S.exp1, [np.array([1.5, 6.0])], order=2, atol=1e-6, rtol=1e-6)
    check_grads(lambda x: S.expn(3, x), [np.abs(small)], order=2, atol=1e-6, rtol=1e-6)


def test_complex_input_is_refused():
    for fn in (S.expi, S.exp1, lambda z: S.expn(1, z)):
        with pytest.raises(TypeError, match="complex input is not supported"):
            td.jit(fn)(np.ones(2, np.complex128))


# ---- sici (Cephes' sici.c as jax ports it) ----

XS = np.concatenate([-np.geomspace(1e-4, 1e12, 50), np.geomspace(1e-4, 1e12, 70),
                     [4.0, np.nextafter(4.0, 0), 8.0, 1e9, 0.0, -0.0, np.inf, -np.inf, np.nan]])


@pytest.mark.parametrize("backend", ["cpu", "xla"])
def test_sici_matches_jax(backend):
    si, ci = td.jit(S.sici, backend=backend)(XS)
    jsi, jci = jss.sici(XS)
    np.testing.assert_allclose(si, jsi, rtol=1e-14, atol=0, equal_nan=True)
    np.testing.assert_allclose(ci, jci, rtol=1e-14, atol=0, equal_nan=True)
    x32 = XS.astype(np.float32)
    si32, ci32 = td.jit(S.sici, backend=backend)(x32)
    assert si32.dtype == ci32.dtype == np.float32
    jsi32, jci32 = jss.sici(x32)
    np.testing.assert_allclose(si32, jsi32, rtol=1e-5, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(ci32, jci32, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_sici_derivatives_match_jax():
    x = np.array([-20.0, -3.0, -0.5, 0.0, 0.05, 0.7, 3.9, 4.1, 7.0, 9.0, 50.0])
    for k in range(2):
        f = lambda ns, k=k: lambda x: ns.scipy.special.sici(x)[k]  # noqa: E731
        got = td.jit(td.vmap(td.grad(f(td))))(x)
        want = np.asarray(jax.vmap(jax.grad(f(jax)))(x))
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
    pts = np.array([-2.0, 0.3, 3.0, 6.0])
    check_grads(lambda x: S.sici(x)[0], [pts], order=2, atol=1e-6, rtol=1e-6)
    check_grads(lambda x: S.sici(x)[1], [pts], order=2, atol=1e-6, rtol=1e-6)


# ---- fresnel (jax's port of SciPy's/Cephes' fresnl) ----

XF = np.concatenate([-np.geomspace(1e-4, 1e6, 50), np.geomspace(1e-4, 1e6, 70),
                     [1.6, np.nextafter(1.6, 0), 36974.0, 0.0, -0.0, np.inf, -np.inf, np.nan]])


@pytest.mark.parametrize("backend", ["cpu", "xla"])
@pytest.mark.parametrize("dtype, tol", [("float64", 1e-14), ("float32", 1e-6)])
def test_fresnel_matches_jax(backend, dtype, tol):
    x = XF.astype(dtype)
    s, c = td.jit(S.fresnel, backend=backend)(x)
    js, jc = jss.fresnel(x)
    assert s.dtype == c.dtype == np.dtype(dtype)
    np.testing.assert_allclose(s, js, rtol=tol, atol=0, equal_nan=True)
    np.testing.assert_allclose(c, jc, rtol=tol, atol=0, equal_nan=True)


def test_fresnel_derivatives_match_jax():
    x = np.array([-9.0, -1.3, -0.2, 0.0, 0.4, 1.59, 1.61, 3.3, 7.5])
    for k in range(2):
        f = lambda ns, k=k: lambda x: ns.scipy.special.fresnel(x)[k]  # noqa: E731
        got = td.jit(td.vmap(td.grad(f(td))))(x)
        np.testing.assert_allclose(got, np.asarray(jax.vmap(jax.grad(f(jax)))(x)), rtol=1e-13,
                                   atol=1e-15)
        check_grads(f(td), [np.array([-1.3, 0.4, 2.0])], order=2, atol=1e-6, rtol=1e-6)
