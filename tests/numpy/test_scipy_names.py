"""td.scipy.special, td.scipy.stats, td.scipy.linalg, the td.nn extras and the td.linalg extras
against jax in x64: values under jit, first derivatives, and second derivatives along a
direction, at ordinary points and at the edges of each function's domain."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest

import tidu as td
from _support.compare import close as _close
from _support.compare import jax_value

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.scipy import linalg as jsl  # noqa: E402
from jax.scipy import special as jsp  # noqa: E402
from jax.scipy import stats as jst  # noqa: E402

jax.config.update("jax_enable_x64", True)

TD = SimpleNamespace(sp=td.scipy.special, st=td.scipy.stats, sl=td.scipy.linalg, nn=td.nn,
                     np=td, la=td.linalg)
JX = SimpleNamespace(sp=jsp, st=jst, sl=jsl, nn=jax.nn,
                     np=jnp, la=jnp.linalg)

RNG = np.random.default_rng(7)
POS = np.array([1e-3, 0.1, 0.5, 1.0, 1.5, 2.0, 3.7, 10.0, 30.5, 150.0])
REAL = np.array([-3.2, -1.5, -0.7, -0.2, 0.3, 0.5, 1.0, 2.5, 4.0])
NEGNI = np.array([-0.5, -1.5, -2.3, -4.7, 0.25])  # negative non-integers: the reflection branch
POLES = np.array([0.0, -1.0, -2.0, -10.0, np.inf, -np.inf, np.nan])
PROB = np.array([1e-300, 1e-20, 1e-5, 0.02, 0.1, 0.135, 0.5, 0.8647, 0.9, 0.999, 1 - 1e-12])
PROB_EDGE = np.array([0.0, 1.0, -0.1, 1.1])
TAILS = np.array([-40.0, -25.0, -20.0, -19.0, -10.0, -5.0, 0.0, 5.0, 7.9, 8.1, 12.0, 40.0])
UNIT = np.array([0.05, 0.2, 0.5, 0.7, 0.95])
GAMMA_EDGE = np.array([0.0, np.inf, -1.0, np.nan, 1e-300, 1e4])


close = partial(_close, rtol=1e-10, atol=1e-12)


# name -> (f(L, x), [inputs], differentiable inputs (indices into the list) or None, rtol)
CASES = {
    # ---- scipy.special ----
    "gammaln": (lambda L, x: L.sp.gammaln(x), [POS, NEGNI, POLES, REAL], [0, 1], 1e-12),
    "gammaln_large": (lambda L, x: L.sp.gammaln(x), [np.array([1e5, 1e10, 1e300])], [0], 1e-12),
    "digamma": (lambda L, x: L.sp.digamma(x), [POS, NEGNI, POLES], [0, 1], 1e-10),
    "betaln": (lambda L, x: L.sp.betaln(x, x[::-1] + 0.5), [POS], [0], 1e-11),
    "xlogy": (lambda L, x: L.sp.xlogy(x, x * x + 0.5), [REAL], [0], 1e-12),
    "xlogy_zero": (lambda L, x: L.sp.xlogy(x * 0, x), [REAL, POS], [1], 1e-12),
    "xlog1py": (lambda L, x: L.sp.xlog1py(x, x * x), [REAL], [0], 1e-12),
    "xlog1py_zero": (lambda L, x: L.sp.xlog1py(x * 0, x - 2), [REAL], None, 1e-12),
    "entr": (lambda L, x: L.sp.entr(x), [POS, REAL, np.array([0.0, -0.0])], [0], 1e-12),
    "ndtr": (lambda L, x: L.sp.ndtr(x), [REAL, TAILS], [0, 1], 1e-12),
    "ndtri": (lambda L, x: L.sp.ndtri(x), [PROB, PROB_EDGE], [0], 1e-12),
    # below -20 both are the asymptotic series (good to ~1e-9): jax differentiates with
    # exp(logpdf - log_ndtr), tidu differentiates the series; they agree to ~1e-9
    "log_ndtr": (lambda L, x: L.sp.log_ndtr(x), [REAL, TAILS[4:]], [0, 1], 1e-10),
    "log_ndtr_tail": (lambda L, x: L.sp.log_ndtr(x), [TAILS[:4]], [0], 1e-8),
    "log_ndtr_series": (lambda L, x: L.sp.log_ndtr(x, series_order=5), [TAILS], None, 1e-12),
    "logit": (lambda L, x: L.sp.logit(x), [UNIT], [0], 1e-12),
    "expit": (lambda L, x: L.sp.expit(x), [REAL, TAILS], [0], 1e-12),
    "erf": (lambda L, x: L.sp.erf(x), [REAL], [0], 1e-12),
    "erfc": (lambda L, x: L.sp.erfc(x), [REAL], [0], 1e-12),
    "erfinv": (lambda L, x: L.sp.erfinv(x), [UNIT * 2 - 1], [0], 1e-12),
    # the iterating ones (tidu.api.special): jax's algorithms; the second rows are the edges
    "gammainc": (lambda L, x: L.sp.gammainc(2.5, x), [POS, GAMMA_EDGE], [0], 1e-12),
    "gammainc_a": (lambda L, x: L.sp.gammainc(x, 1.7), [POS, np.array([0.0, -1.0])], None,
                   1e-12),
    "gammaincc": (lambda L, x: L.sp.gammaincc(0.8, x), [POS, GAMMA_EDGE], [0], 1e-12),
    "gammaincc_a": (lambda L, x: L.sp.gammaincc(x, 12.0), [POS], None, 1e-12),
    "betainc": (lambda L, x: L.sp.betainc(2.0, 3.5, x), [UNIT, PROB_EDGE], [0], 1e-12),
    "betainc_ab": (lambda L, x: L.sp.betainc(x, x[::-1] + 0.5, 0.3), [POS[1:8]], None, 1e-11),
    "i0e": (lambda L, x: L.sp.i0e(x), [REAL, TAILS], [0, 1], 1e-13),
    "i1e": (lambda L, x: L.sp.i1e(x), [REAL, TAILS, np.array([0.0, 19.99, 20.01, 700.0])],
            [0, 1], 1e-12),
    "i0": (lambda L, x: L.sp.i0(x), [REAL], [0], 1e-13),
    "i1": (lambda L, x: L.sp.i1(x), [REAL], [0], 1e-12),
    "zeta": (lambda L, x: L.sp.zeta(2.5, x), [POS], [0], 1e-12),
    "zeta_x": (lambda L, x: L.sp.zeta(x + 1.01, 1.5), [POS], None, 1e-12),
    "polygamma": (lambda L, x: L.sp.polygamma(2, x), [POS], [0], 1e-11),
    "sp_logsumexp": (lambda L, x: L.sp.logsumexp(x), [REAL], [0], 1e-12),
    "sp_softmax": (lambda L, x: L.sp.softmax(x), [REAL], [0], 1e-12),
    "sp_log_softmax": (lambda L, x: L.sp.log_softmax(x), [REAL], [0], 1e-12),
    # ---- scipy.stats ----
    "norm_logpdf": (lambda L, x: L.st.norm.logpdf(x, 0.3, 1.7), [REAL, TAILS], [0], 1e-12),
    "norm_pdf": (lambda L, x: L.st.norm.pdf(x, loc=-0.2, scale=0.5), [REAL], [0], 1e-12),
    "norm_cdf": (lambda L, x: L.st.norm.cdf(x, 0.3, 1.7), [REAL, TAILS], [0], 1e-12),
    "norm_logcdf": (lambda L, x: L.st.norm.logcdf(x, 0.3, 1.7), [REAL, TAILS[4:]], [0, 1],
                    1e-10),
    "norm_sf": (lambda L, x: L.st.norm.sf(x, 0.3, 1.7), [REAL], [0], 1e-12),
    "norm_logsf": (lambda L, x: L.st.norm.logsf(x, 0.3, 1.7), [REAL, TAILS], [0], 1e-10),
    "norm_ppf": (lambda L, x: L.st.norm.ppf(x, 1.0, 2.0), [PROB, PROB_EDGE], [0], 1e-12),
    "norm_isf": (lambda L, x: L.st.norm.isf(x, 1.0, 2.0), [UNIT], [0], 1e-12),
    "t_logpdf": (lambda L, x: L.st.t.logpdf(x, 3.5, 0.2, 1.3), [REAL, TAILS], [0], 1e-11),
    "t_pdf_df": (lambda L, x: L.st.t.pdf(0.7, x), [POS], [0], 1e-10),
    "gamma_logpdf": (lambda L, x: L.st.gamma.logpdf(x, 2.5, 0.0, 1.5), [POS, REAL], [0], 1e-11),
    "gamma_pdf_a": (lambda L, x: L.st.gamma.pdf(1.3, x), [POS[:-1]], [0], 1e-10),
    "gamma_cdf": (lambda L, x: L.st.gamma.cdf(x, 2.5, 0.5, 1.5), [POS, REAL], [0], 1e-12),
    "gamma_sf": (lambda L, x: L.st.gamma.sf(x, 2.5, 0.5, 1.5), [POS, REAL], [0], 1e-12),
    "gamma_logcdf": (lambda L, x: L.st.gamma.logcdf(x, 0.7), [POS], [0], 1e-11),
    "chi2_logpdf": (lambda L, x: L.st.chi2.logpdf(x, 3.0), [POS, REAL], [0], 1e-11),
    "chi2_cdf": (lambda L, x: L.st.chi2.cdf(x, 3.0, 0.2, 2.0), [POS, REAL], [0], 1e-12),
    "chi2_sf": (lambda L, x: L.st.chi2.sf(x, 4.0), [POS], [0], 1e-12),
    "beta_cdf": (lambda L, x: L.st.beta.cdf(x, 2.0, 3.5), [UNIT, REAL], [0], 1e-12),
    "beta_sf": (lambda L, x: L.st.beta.sf(x, 2.0, 3.5), [UNIT], [0], 1e-12),
    "poisson_cdf": (lambda L, x: L.st.poisson.cdf(L.np.round(x * 3), 4.2), [POS, REAL], None,
                    1e-12),
    "beta_logpdf": (lambda L, x: L.st.beta.logpdf(x, 2.0, 3.5), [UNIT, REAL], [0], 1e-11),
    "beta_pdf_edge": (lambda L, x: L.st.beta.pdf(x, 1.0, 1.0), [np.array([0., 1., .5])], None,
                      1e-12),
    "poisson_logpmf": (lambda L, x: L.st.poisson.logpmf(L.np.round(x * 3), 4.2),
                       [POS, REAL], None, 1e-11),
    "poisson_pmf_mu": (lambda L, x: L.st.poisson.pmf(3.0, x), [POS[:-1]], [0], 1e-10),
    "bernoulli_logpmf": (lambda L, x: L.st.bernoulli.logpmf(L.np.round(x), 0.3),
                         [REAL], None, 1e-12),
    "bernoulli_pmf_p": (lambda L, x: L.st.bernoulli.pmf(1.0, x), [UNIT], [0], 1e-12),
    "bernoulli_cdf": (lambda L, x: L.st.bernoulli.cdf(x, 0.3), [REAL], None, 1e-12),
    "bernoulli_ppf": (lambda L, x: L.st.bernoulli.ppf(x, 0.3), [UNIT, PROB_EDGE], None, 1e-12),
    "uniform_logpdf": (lambda L, x: L.st.uniform.logpdf(x, -1.0, 3.0), [REAL], None, 1e-12),
    "uniform_cdf": (lambda L, x: L.st.uniform.cdf(x, -1.0, 3.0), [REAL], [0], 1e-12),
    "uniform_ppf": (lambda L, x: L.st.uniform.ppf(x, -1.0, 3.0), [UNIT, PROB_EDGE], [0], 1e-12),
    "expon_logpdf": (lambda L, x: L.st.expon.logpdf(x, 0.1, 2.0), [REAL, POS], [1], 1e-12),
    "expon_cdf": (lambda L, x: L.st.expon.cdf(x, 0.1, 2.0), [REAL, POS], [1], 1e-12),
    "expon_sf": (lambda L, x: L.st.expon.sf(x, 0.1, 2.0), [REAL, POS], [1], 1e-12),
    "expon_logcdf": (lambda L, x: L.st.expon.logcdf(x, 0.1, 2.0), [POS], [0], 1e-12),
    "expon_ppf": (lambda L, x: L.st.expon.ppf(x, 0.1, 2.0), [UNIT, PROB_EDGE], [0], 1e-12),
    "laplace_logpdf": (lambda L, x: L.st.laplace.logpdf(x, 0.4, 1.5), [REAL], [0], 1e-12),
    "laplace_cdf": (lambda L, x: L.st.laplace.cdf(x, 0.4, 1.5), [REAL, TAILS], [0], 1e-12),
    "cauchy_logpdf": (lambda L, x: L.st.cauchy.logpdf(x, 0.4, 1.5), [REAL, TAILS], [0], 1e-12),
    "cauchy_cdf": (lambda L, x: L.st.cauchy.cdf(x, 0.4, 1.5), [REAL], [0], 1e-12),
    "cauchy_sf": (lambda L, x: L.st.cauchy.sf(x, 0.4, 1.5), [REAL], [0], 1e-12),
    "cauchy_ppf": (lambda L, x: L.st.cauchy.ppf(x, 0.4, 1.5), [UNIT], [0], 1e-12),
    "cauchy_isf": (lambda L, x: L.st.cauchy.isf(x, 0.4, 1.5), [UNIT], [0], 1e-12),
    "logistic_logpdf": (lambda L, x: L.st.logistic.logpdf(x, 0.4, 1.5), [REAL, TAILS], [0],
                        1e-12),
    "logistic_cdf": (lambda L, x: L.st.logistic.cdf(x, 0.4, 1.5), [REAL], [0], 1e-12),
    "logistic_sf": (lambda L, x: L.st.logistic.sf(x, 0.4, 1.5), [REAL], [0], 1e-12),
    "logistic_ppf": (lambda L, x: L.st.logistic.ppf(x, 0.4, 1.5), [UNIT], [0], 1e-12),
    "logistic_isf": (lambda L, x: L.st.logistic.isf(x, 0.4, 1.5), [UNIT], [0], 1e-12),
    # ---- nn ----
    "glu": (lambda L, x: L.nn.glu(x[:8]), [REAL], [0], 1e-12),
    "selu": (lambda L, x: L.nn.selu(x), [REAL, TAILS], [0], 1e-12),
    "celu": (lambda L, x: L.nn.celu(x, 0.7), [REAL, np.array([0.0])], [0, 1], 1e-12),
    "hard_tanh": (lambda L, x: L.nn.hard_tanh(x), [REAL], [0], 1e-12),
    "hard_sigmoid": (lambda L, x: L.nn.hard_sigmoid(x), [REAL, TAILS], [0], 1e-12),
    "hard_silu": (lambda L, x: L.nn.hard_silu(x), [REAL, TAILS], [0], 1e-12),
    "mish": (lambda L, x: L.nn.mish(x), [REAL, TAILS], [0, 1], 1e-12),
    "squareplus": (lambda L, x: L.nn.squareplus(x), [REAL, TAILS], [0, 1], 1e-12),
    "squareplus_b": (lambda L, x: L.nn.squareplus(x, 0.5), [REAL], [0], 1e-12),
    "sparse_plus": (lambda L, x: L.nn.sparse_plus(x), [REAL], [0], 1e-12),
}


def _rows():
    for name, (f, xs, _, rtol) in CASES.items():
        for i, x in enumerate(xs):
            yield pytest.param(f, x, rtol, id=f"{name}-{i}")


@pytest.mark.parametrize("f,x,rtol", list(_rows()))
def test_values_against_jax(f, x, rtol):
    want = jax_value(lambda x: f(JX, x), jnp.asarray(x))
    got = td.jit(lambda x: f(TD, x))(x)
    close(got, want, rtol=rtol)
    assert np.asarray(got).dtype == np.asarray(want).dtype


def _grad_rows():
    for name, (f, xs, diff, rtol) in CASES.items():
        for i in diff or ():
            yield pytest.param(f, xs[i], rtol, id=f"{name}-{i}")


@pytest.mark.parametrize("f,x,rtol", list(_grad_rows()))
def test_first_and_second_derivatives_against_jax(f, x, rtol):
    w = RNG.normal(size=np.shape(jax_value(lambda x: f(JX, x), jnp.asarray(x))))

    def loss(L):
        return lambda x: L.np.sum(f(L, x) * w)

    close(td.grad(loss(TD))(x), jax_value(jax.grad(loss(JX)), jnp.asarray(x)), rtol=max(rtol, 1e-10))
    d = RNG.normal(size=np.shape(x))

    def dd(L, g):
        return lambda s: g(lambda s: loss(L)(x + s * d))(s)

    close(td.grad(dd(TD, td.grad))(0.0), jax_value(jax.grad(dd(JX, jax.grad)), 0.0),
          rtol=max(rtol * 100, 1e-8), atol=1e-9)


def test_trigamma_on_the_reflection_branch_is_exact_where_jaxs_drifts():
    """d/dx digamma at -7.9 by the reflection identity psi1(x) = pi^2 / sin^2(pi x) -
    psi1(1 - x) (jax's polygamma(1, -7.9) is off by 6e-6 relative; tidu's is exact)."""
    x = -7.9
    want = np.pi ** 2 / np.sin(np.pi * x) ** 2 - float(jsp.polygamma(1, 1 - x))
    close(td.jit(td.grad(td.scipy.special.digamma))(x), want, rtol=1e-12)
    close(td.jit(td.grad(td.grad(td.scipy.special.gammaln)))(x), want, rtol=1e-12)


def test_gammaln_derivative_is_finite_at_positive_integers():
    x = np.array([1.0, 2.0, 10.0, 150.0])
    got = td.jit(td.vmap(td.grad(td.scipy.special.gammaln)))(x)
    close(got, jax.vmap(jax.grad(jsp.gammaln))(x), rtol=1e-12)


def test_incomplete_gamma_in_its_shape_argument_and_the_sample_gradient():
    """d/da of gammainc/gammaincc is igamma_grad_a (jax's series and fraction); jax's
    random_gamma_grad (gamma samples' implicit reparameterisation) and igamma_grad_a agree."""
    a = np.array([0.3, 1.0, 2.5, 7.0, 40.0])
    x = np.array([0.2, 3.0, 1.0, 9.0, 35.0])
    for t, j in ((td.scipy.special.gammainc, jsp.gammainc),
                 (td.scipy.special.gammaincc, jsp.gammaincc)):
        close(td.jit(td.grad(lambda a: td.sum(t(a, x))))(a),
              jax.grad(lambda a: jnp.sum(j(a, x)))(a), rtol=1e-11)
    close(td.jit(td.lax.random_gamma_grad)(a, x), jax.lax.random_gamma_grad(a, x), rtol=1e-11)
    close(td.jit(td.lax.igamma_grad_a)(a, x), jax.lax.igamma_grad_a(a, x), rtol=1e-11)
    # jax refuses the derivatives of betainc in a and b; tidu's are central differences
    g = td.jit(td.grad(lambda a, b: td.scipy.special.betainc(a, b, 0.3), argnums=(0, 1)))
    h = 1e-4
    for k, e in enumerate(np.eye(2)):
        p, q = np.array([1.5, 2.0]) + h * e, np.array([1.5, 2.0]) - h * e
        fd = (jsp.betainc(*p, 0.3) - jsp.betainc(*q, 0.3)) / (2 * h)
        close(g(1.5, 2.0)[k], fd, rtol=1e-7)
    g = td.jit(td.grad(lambda x: td.scipy.special.betainc(1.5, 2.0, x)))(0.3)
    close(g, jax.grad(lambda x: jsp.betainc(1.5, 2.0, x))(0.3), rtol=1e-12)


def test_iterating_functions_compose_with_vmap_scan_and_float32():
    a = np.array([0.5, 2.0, 9.0], np.float32)
    x = np.array([[0.1, 2.0, 8.0], [3.0, 0.5, 12.0]], np.float32)
    got = td.jit(td.vmap(lambda r: td.scipy.special.gammainc(a, r)))(x)
    assert got.dtype == np.float32
    close(got, jsp.gammainc(a, x), rtol=2e-6, atol=1e-7)

    def run(L, sp):
        return L.scan(lambda c, r: (c + L.np.sum(sp.i1e(r) * sp.betainc(2.0, 3.0, r / 20.0)),
                                    c), 0.0, x.astype(np.float64))[0]

    close(td.jit(lambda: run(SimpleNamespace(scan=td.scan, np=td), td.scipy.special))(),
          jax.jit(lambda: run(SimpleNamespace(scan=jax.lax.scan, np=jnp), jsp))(), rtol=1e-12)


def test_iterating_functions_refuse_bad_arguments():
    with pytest.raises(ValueError, match="integer dtype"):
        td.jit(lambda x: td.scipy.special.polygamma(2.0, x))(1.5)
    with pytest.raises(NotImplementedError, match="q=1.0"):
        td.jit(lambda x: td.scipy.special.zeta(x))(2.0)
    with pytest.raises(TypeError, match="complex"):
        td.jit(lambda x: td.scipy.special.gammainc(1.0, x))(1j)
