"""The rest of jax's scipy.special / scipy.linalg / scipy.stats / linalg / nn names (issue 32)
against jax in x64: values on both backends (the interpreter and XLA), first derivatives, and
second derivatives along a direction where the function is differentiable."""

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
JX = SimpleNamespace(sp=jsp, st=jst, sl=jsl, nn=jax.nn, np=jnp, la=jnp.linalg)

RNG = np.random.default_rng(11)
REAL = np.array([-3.2, -1.5, -0.7, -0.2, 0.3, 0.5, 1.0, 2.5, 4.0, 7.3])
POS = np.array([1e-3, 0.1, 0.5, 1.0, 1.5, 2.0, 3.7, 10.0, 30.5])
NEG = np.array([-0.5, -1.5, -2.3, -4.7, -3.0, -0.0, 0.0, np.nan, np.inf])
UNIT = np.array([0.05, 0.2, 0.5, 0.7, 0.95])
VEC = np.array([1.0, 2.0, 3.5, -1.0])
MAT = RNG.normal(size=(2, 4))
SQ = RNG.normal(size=(4, 4))
BSQ = RNG.normal(size=(2, 3, 3))

close = partial(_close, rtol=1e-12, atol=1e-14)

# name -> (f(L, x), [inputs], differentiable inputs (indices) or None, rtol)
CASES = {
    # ---- linalg: the array-API names ----
    "la_cross": (lambda L, x: L.la.cross(x[..., :3], x[..., 1:]), [MAT], [0], 1e-12),
    "la_matmul": (lambda L, x: L.la.matmul(x, x.T), [MAT], [0], 1e-12),
    "la_matrix_norm": (lambda L, x: (L.la.matrix_norm(x), L.la.matrix_norm(x, ord=1),
                                     L.la.matrix_norm(x, ord="nuc", keepdims=True)),
                       [SQ, BSQ], [0, 1], 1e-11),
    "la_matrix_transpose": (lambda L, x: L.la.matrix_transpose(x), [BSQ], [0], 1e-12),
    "la_outer": (lambda L, x: L.la.outer(x[0], x[1]), [MAT], [0], 1e-12),
    "la_tensordot": (lambda L, x: L.la.tensordot(x, x, axes=2), [MAT, SQ], [0], 1e-12),
    "la_tensordot1": (lambda L, x: L.la.tensordot(x, x.T, axes=1), [MAT], [0], 1e-12),
    "la_trace": (lambda L, x: (L.la.trace(x), L.la.trace(x, offset=1)), [SQ, BSQ], [0, 1],
                 1e-12),
    "la_vecdot": (lambda L, x: L.la.vecdot(x, x[::-1]), [MAT, BSQ], [0], 1e-12),
    "la_vecdot_axis": (lambda L, x: L.la.vecdot(x, x, axis=0), [MAT], [0], 1e-12),
    "la_vector_norm": (lambda L, x: (L.la.vector_norm(x), L.la.vector_norm(x, ord=1, axis=-1),
                                     L.la.vector_norm(x, ord=np.inf, axis=0, keepdims=True),
                                     L.la.vector_norm(x, ord=3.0, axis=(0, 1))),
                       [MAT], [0], 1e-12),
    # ---- scipy.linalg: the special matrices ----
    "toeplitz": (lambda L, x: L.sl.toeplitz(x, x[..., :3] * 2), [VEC, MAT], [0, 1], 1e-13),
    "toeplitz_c": (lambda L, x: L.sl.toeplitz(x), [VEC, MAT], [0], 1e-13),
    "hankel": (lambda L, x: L.sl.hankel(x, x[..., :3] * 2), [VEC, MAT], [0, 1], 1e-13),
    "hankel_c": (lambda L, x: L.sl.hankel(x), [VEC], [0], 1e-13),
    "circulant": (lambda L, x: L.sl.circulant(x), [VEC, MAT], [0, 1], 1e-13),
    "leslie": (lambda L, x: L.sl.leslie(x, x[..., 1:] * 0.5), [VEC, MAT], [0, 1], 1e-13),
    "companion": (lambda L, x: L.sl.companion(x), [VEC, MAT], [0, 1], 1e-13),
    "fiedler": (lambda L, x: L.sl.fiedler(x), [VEC, MAT], [0], 1e-13),
    "fiedler_companion": (lambda L, x: L.sl.fiedler_companion(x), [VEC, MAT, REAL], [0, 2],
                          1e-13),
    "convolution_matrix": (lambda L, x: (L.sl.convolution_matrix(x, 3),
                                         L.sl.convolution_matrix(x, 6, "same"),
                                         L.sl.convolution_matrix(x, 2, "valid")),
                           [VEC, MAT], [0, 1], 1e-13),
    "polar": (lambda L, x: (L.sl.polar(x), L.sl.polar(x, method="svd", side="left"),
                            L.sl.polar(x[:, :3]), L.sl.polar(x[:3], side="left")),
              [SQ], None, 1e-10),  # jax's qdwh iteration has no reverse-mode derivative
    "polar_svd": (lambda L, x: (L.sl.polar(x, method="svd"),
                                L.sl.polar(x[:3], method="svd", side="left")), [SQ], [0], 1e-10),
    "expm_frechet": (lambda L, x: L.sl.expm_frechet(0.5 * x, x[::-1]), [SQ, BSQ], [0, 1],
                     1e-11),
    "expm_frechet_only": (lambda L, x: L.sl.expm_frechet(x, 0.3 * x.T, compute_expm=False),
                          [SQ], None, 1e-11),
    "eigh_tridiagonal": (lambda L, x: (L.sl.eigh_tridiagonal(x, x[1:] * 0.5, eigvals_only=True),
                                       L.sl.eigh_tridiagonal(x, x[1:], eigvals_only=True,
                                                             select="i", select_range=(1, 2))),
                         [VEC, REAL], None, 1e-10),
    # ---- scipy.special ----
    "gammasgn": (lambda L, x: L.sp.gammasgn(x), [REAL, NEG], None, 1e-12),
    "gamma": (lambda L, x: L.sp.gamma(x), [REAL, NEG], [0], 1e-11),
    "loggamma": (lambda L, x: L.sp.loggamma(x), [REAL, POS], [1], 1e-12),
    "beta": (lambda L, x: L.sp.beta(x, 1.3), [REAL, POS], [0, 1], 1e-11),
    "factorial": (lambda L, x: L.sp.factorial(x), [REAL, POS[:-1]], [0], 1e-11),
    "comb": (lambda L, x: L.sp.comb(10.0, x), [REAL, POS], [1], 1e-11),
    "comb_repetition": (lambda L, x: L.sp.comb(x, 3.0, repetition=True), [REAL, POS], [1],
                        1e-11),
    "poch": (lambda L, x: L.sp.poch(x, 1.7), [REAL, POS[:-1]], [1], 1e-11),
    "poch_m": (lambda L, x: L.sp.poch(2.5, x), [POS[:-1]], [0], 1e-11),
    "poch_zero": (lambda L, x: L.sp.poch(x, 0.0), [REAL], None, 1e-12),
    "multigammaln": (lambda L, x: L.sp.multigammaln(x, 3), [POS + 1], [0], 1e-12),
    "boxcox": (lambda L, x: (L.sp.boxcox(x, 0.3), L.sp.boxcox(x, 0.0)), [POS], [0], 1e-12),
    "boxcox1p": (lambda L, x: L.sp.boxcox1p(x, -0.7), [POS, REAL], [0], 1e-12),
    "boxcox_lmbda": (lambda L, x: L.sp.boxcox(2.5, x), [REAL], [0], 1e-12),
    "rel_entr": (lambda L, x: L.sp.rel_entr(x, 0.7), [POS, REAL], [0], 1e-12),
    "kl_div": (lambda L, x: L.sp.kl_div(0.4, x), [POS, REAL], [0], 1e-12),
    "erfcx": (lambda L, x: L.sp.erfcx(x), [REAL, POS, np.array([26.0, 27.0, 1e3, -30.0])],
              [0, 1], 1e-12),
    "dawsn": (lambda L, x: L.sp.dawsn(x), [REAL, POS], [0, 1], 1e-12),
    # jax's derivative is NaN at 1.5 and 2.0 (its piecewise branches): compared below instead
    "spence": (lambda L, x: L.sp.spence(x), [POS[[0, 1, 2, 3, 6, 7, 8]], REAL,
                                             np.array([0.0, 1.0, 2.0, 1.5, 0.5])], [0], 1e-12),
    "wofz": (lambda L, x: L.sp.wofz(x + 0.5j * x[::-1]), [REAL, POS], None, 1e-12),
    "wofz_real": (lambda L, x: L.sp.wofz(x), [REAL], None, 1e-12),
    "owens_t": (lambda L, x: L.sp.owens_t(x, x[::-1] * 0.8), [REAL, POS], [0], 1e-12),
    "owens_t_edges": (lambda L, x: L.sp.owens_t(x, np.array([0.0, 1.0, -1.0, 2.0, np.nan, 0.5,
                                                              1.0, 3.0, -0.2, 1.0])),
                      [REAL * 0.5], None, 1e-12),
    "bessel_jn": (lambda L, x: L.sp.bessel_jn(x, v=4), [POS[2:7], REAL[4:], POS[:2], POS[7:]], [0, 1],
                  1e-10),
    "bessel_jn_iter": (lambda L, x: L.sp.bessel_jn(x, v=2, n_iter=20), [MAT * 0 + UNIT[:4]],
                       None, 1e-10),
    "erfcx_complex": (lambda L, x: L.sp.erfcx(x - 0.3j), [REAL], None, 1e-12),
    # ---- scipy.stats ----
    "binom": (lambda L, x: L.st.binom.logpmf(L.np.round(x), 8.0, 0.3), [REAL * 2, POS], None,
              1e-11),
    "binom_p": (lambda L, x: L.st.binom.pmf(3.0, 8.0, x), [UNIT], [0], 1e-11),
    "binom_edge": (lambda L, x: L.st.binom.pmf(x, 0.0, 0.4), [np.array([0.0, 1.0, -1.0])],
                   None, 1e-12),
    "betabinom": (lambda L, x: L.st.betabinom.logpmf(L.np.round(x), 9.0, 1.5, 2.5),
                  [REAL * 2, POS], None, 1e-11),
    "betabinom_ab": (lambda L, x: L.st.betabinom.pmf(4.0, 9.0, x, 2.5), [POS[1:]], [0], 1e-10),
    "nbinom": (lambda L, x: L.st.nbinom.logpmf(L.np.round(x), 3.0, 0.4), [REAL * 2, POS], None,
               1e-11),
    "nbinom_p": (lambda L, x: L.st.nbinom.pmf(2.0, 3.5, x), [UNIT], [0], 1e-11),
    "geom": (lambda L, x: L.st.geom.logpmf(L.np.round(x), 0.3), [REAL * 2, POS], None, 1e-12),
    "geom_p": (lambda L, x: L.st.geom.pmf(3.0, x), [UNIT], [0], 1e-12),
    "pareto": (lambda L, x: (L.st.pareto.logpdf(x, 2.5, 0.1, 0.7), L.st.pareto.cdf(x, 2.5),
                             L.st.pareto.logcdf(x, 2.5, 0.1), L.st.pareto.sf(x, 2.5),
                             L.st.pareto.logsf(x, 1.5, 0.0, 0.5)), [POS, REAL], [0], 1e-11),
    "pareto_ppf": (lambda L, x: L.st.pareto.ppf(x, 2.5, 0.1, 0.7), [UNIT, np.array([-0.1, 1.1])],
                   [0], 1e-12),
    "gumbel_l": (lambda L, x: (L.st.gumbel_l.logpdf(x, 0.3, 1.5), L.st.gumbel_l.cdf(x, 0.3),
                               L.st.gumbel_l.logcdf(x, 0.3, 1.5), L.st.gumbel_l.sf(x),
                               L.st.gumbel_l.logsf(x, 0.3, 1.5), L.st.gumbel_l.pdf(x)),
                 [REAL], [0], 1e-11),
    "gumbel_r": (lambda L, x: (L.st.gumbel_r.logpdf(x, 0.3, 1.5), L.st.gumbel_r.cdf(x, 0.3),
                               L.st.gumbel_r.logcdf(x, 0.3, 1.5), L.st.gumbel_r.sf(x),
                               L.st.gumbel_r.logsf(x, 0.3, 1.5), L.st.gumbel_r.pdf(x)),
                 [REAL], [0], 1e-11),
    "gumbel_ppf": (lambda L, x: (L.st.gumbel_l.ppf(x, 0.3, 1.5), L.st.gumbel_r.ppf(x, 0.3, 1.5)),
                   [UNIT, np.array([0.0, 1.0, -0.5])], None, 1e-12),  # jax: no gradient
    "gumbel_bad_scale": (lambda L, x: L.st.gumbel_r.logpdf(x, 0.0, -1.0), [REAL], None, 1e-12),
    "gennorm": (lambda L, x: (L.st.gennorm.logpdf(x, 1.5), L.st.gennorm.pdf(x, 0.8)), [REAL],
                [0], 1e-11),
    "gennorm_cdf": (lambda L, x: L.st.gennorm.cdf(x, 1.5), [REAL], [0], 1e-11),
    "vonmises": (lambda L, x: (L.st.vonmises.logpdf(x, 2.5), L.st.vonmises.pdf(0.3, x)),
                 [POS], [0], 1e-11),
    "wrapcauchy": (lambda L, x: (L.st.wrapcauchy.logpdf(x, 0.4), L.st.wrapcauchy.pdf(x, 0.7)),
                   [POS[:7], REAL], [0], 1e-11),
    "truncnorm": (lambda L, x: (L.st.truncnorm.logpdf(x, -1.0, 2.0), L.st.truncnorm.pdf(x, 0.5,
                                                                                     3.0, 0.2),
                                L.st.truncnorm.cdf(x, -1.0, 2.0), L.st.truncnorm.logcdf(
                                    x, -2.0, -0.5), L.st.truncnorm.sf(x, 0.3, 4.0),
                                L.st.truncnorm.logsf(x, -1.0, 2.0, 0.1, 1.5)),
                  [REAL, np.linspace(-0.9, 1.9, 7)], [1], 1e-10),
    "dirichlet": (lambda L, x: L.st.dirichlet.logpdf(x, np.array([1.5, 2.0, 0.7])),
                  [np.array([0.2, 0.3, 0.5]), np.array([[0.2, 0.1], [0.3, 0.6], [0.5, 0.3]]),
                   np.array([0.2, 0.3])], [0, 1, 2], 1e-11),
    "dirichlet_outside": (lambda L, x: L.st.dirichlet.pdf(x, np.array([1.5, 2.0, 0.7])),
                          [np.array([0.5, 0.3, 0.5])], None, 1e-12),
    "sem": (lambda L, x: (L.st.sem(x), L.st.sem(x, axis=None, ddof=0),
                          L.st.sem(x, axis=1, keepdims=True)), [MAT, SQ], [0], 1e-12),
    "sem_omit": (lambda L, x: L.st.sem(L.np.where(x > 1.5, np.nan, x), nan_policy="omit"),
                 [MAT * 2], None, 1e-12),
    "rankdata": (lambda L, x: tuple(L.st.rankdata(L.np.round(x), m) for m in
                                    ("average", "min", "max", "dense", "ordinal")),
                 [REAL, MAT * 3], None, 1e-12),
    "rankdata_axis": (lambda L, x: L.st.rankdata(L.np.round(x), axis=1), [MAT * 3], None, 1e-12),
    "rankdata_nan": (lambda L, x: L.st.rankdata(x), [NEG], None, 1e-12),
    "mode": (lambda L, x: tuple(L.st.mode(L.np.round(x))), [REAL, MAT * 2, SQ * 2], None, 1e-12),
    "mode_axis": (lambda L, x: (tuple(L.st.mode(L.np.round(x), axis=None)),
                                tuple(L.st.mode(L.np.round(x), axis=1, keepdims=True))),
                  [SQ * 2], None, 1e-12),
    # ---- nn ----
    "log1mexp": (lambda L, x: L.nn.log1mexp(x), [POS, np.array([0.69, 0.7, 40.0, 0.0])], [0],
                 1e-12),
    "logmeanexp": (lambda L, x: (L.nn.logmeanexp(x), L.nn.logmeanexp(x, axis=1, keepdims=True),
                                 L.nn.logmeanexp(x, axis=0, where=x > 0)), [MAT, SQ], [0],
                   1e-12),
    "soft_sign": (lambda L, x: L.nn.soft_sign(x), [REAL], [0], 1e-12),
    "sparse_sigmoid": (lambda L, x: L.nn.sparse_sigmoid(x), [REAL], [0], 1e-12),
}


def _rows():
    for name, (f, xs, _, rtol) in CASES.items():
        for i, x in enumerate(xs):
            for backend in ("cpu", "xla"):
                yield pytest.param(f, x, rtol, backend, id=f"{name}-{i}-{backend}")


def _leaves(t):
    return jax.tree_util.tree_leaves(t)


_JAX_VALUES = {}


def _jax_leaves(f, x):
    """The leaves of jax's f(JX, x) under one jax.jit, computed once per case: both backends'
    rows of test_values_against_jax compare with them, and the derivative test sizes its weights
    from them (each computation was one more jax compile)."""
    key = (id(f), id(x))
    if key not in _JAX_VALUES:
        _JAX_VALUES[key] = (f, x, _leaves(jax_value(lambda x: f(JX, x), jnp.asarray(x))))
    f0, x0, leaves = _JAX_VALUES[key]
    assert f0 is f and x0 is x
    return leaves


@pytest.mark.parametrize("f,x,rtol,backend", list(_rows()))
def test_values_against_jax(f, x, rtol, backend):
    want = _jax_leaves(f, x)
    got = _leaves(td.jit(lambda x: f(TD, x), backend=backend)(x))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        close(g, w, rtol=rtol)
        assert np.shape(g) == np.shape(w)
        assert np.asarray(g).dtype == np.asarray(w).dtype


def _grad_rows():
    for name, (f, xs, diff, rtol) in CASES.items():
        for i in diff or ():
            yield pytest.param(f, xs[i], rtol, id=f"{name}-{i}")


@pytest.mark.parametrize("f,x,rtol", list(_grad_rows()))
def test_first_and_second_derivatives_against_jax(f, x, rtol):
    ws = [RNG.normal(size=np.shape(o)) for o in _jax_leaves(f, x)]

    def loss(L):
        return lambda x: sum(L.np.sum(L.np.where(L.np.isfinite(o), o, 0.0) * w)
                             for o, w in zip(_leaves(f(L, x)), ws))

    close(td.grad(loss(TD))(x), jax_value(jax.grad(loss(JX)), jnp.asarray(x)), rtol=max(rtol, 1e-10),
          atol=1e-11)
    d = RNG.normal(size=np.shape(x))

    def dd(L, g):
        return lambda s: g(lambda s: loss(L)(x + s * d))(s)

    close(td.grad(dd(TD, td.grad))(0.0), jax_value(jax.grad(dd(JX, jax.grad)), 0.0),
          rtol=max(rtol * 100, 1e-8), atol=1e-9)


CONSTANTS = [("hilbert", (5,)), ("invhilbert", (6,)), ("pascal", (6,)), ("pascal", (5, "lower")),
             ("pascal", (5, "upper")), ("invpascal", (6,)), ("invpascal", (5, "upper")),
             ("helmert", (5,)), ("helmert", (5, True)), ("hadamard", (8,)),
             ("hadamard", (4, np.float32)), ("dft", (5,)), ("dft", (4, "n")),
             ("dft", (4, "sqrtn"))]


@pytest.mark.parametrize("name,args", CONSTANTS, ids=[f"{n}{a}" for n, a in CONSTANTS])
def test_constant_matrices_against_jax(name, args):
    """Exact here: jax's pascal is exp(lgamma(.)) in float32, off by rounding (1e-6)."""
    want = np.asarray(getattr(jsl, name)(*args))
    got = getattr(td.scipy.linalg, name)(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    close(got, want, rtol=2e-6 if name == "pascal" else 1e-12)


def test_bernoulli_numbers_against_jax():
    for n in (0, 1, 2, 3, 12, 30):
        close(td.scipy.special.bernoulli(n), jsp.bernoulli(n), rtol=1e-12)


def test_spence_derivatives_are_log_x_over_1_minus_x_everywhere():
    x = np.array([0.3, 0.7, 1.5, 2.0, 3.0, 40.0])
    d1 = td.jit(td.vmap(td.grad(td.scipy.special.spence)))(x)
    d2 = td.jit(td.vmap(td.grad(td.grad(td.scipy.special.spence))))(x)
    close(d1, np.log(x) / (1 - x))
    close(d2, ((1 - x) / x + np.log(x)) / (1 - x) ** 2, rtol=1e-10)


def test_bessel_jn_second_derivative_solves_bessels_equation_near_zero():
    """At z = 0.1 jax's second derivative of its recurrence is -649 (cancellation); tidu's
    satisfies z^2 J'' + z J' + (z^2 - n^2) J = 0."""
    z = 0.1
    for n in range(4):
        def j(z, n=n):
            return td.scipy.special.bessel_jn(z, v=4)[n]
        v, d1, d2 = (td.jit(f)(z) for f in (j, td.grad(j), td.grad(td.grad(j))))
        close(z * z * d2 + z * d1 + (z * z - n * n) * v, 0.0, atol=1e-12)


def test_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match="linalg.outer: inputs must be 1-D"):
        td.jit(td.linalg.outer)(MAT, MAT)
    with pytest.raises(ValueError, match="linalg.cross: both inputs need size 3"):
        td.jit(td.linalg.cross)(MAT, MAT)
    with pytest.raises(ValueError, match="matrix_norm: x must have at least 2"):
        td.jit(td.linalg.matrix_norm)(VEC)
    with pytest.raises(ValueError, match="leslie: the length of s"):
        td.jit(td.scipy.linalg.leslie)(VEC, VEC)
    with pytest.raises(ValueError, match="convolution_matrix: mode"):
        td.jit(lambda a: td.scipy.linalg.convolution_matrix(a, 3, "wide"))(VEC)
    with pytest.raises(ValueError, match="hadamard: n must be a positive power of 2"):
        td.scipy.linalg.hadamard(6)
    with pytest.raises(TypeError, match="gamma: complex input"):
        td.jit(td.scipy.special.gamma)(1j)
    with pytest.raises(TypeError, match="spence: x.dtype=int64"):
        td.jit(td.scipy.special.spence)(np.arange(3))
    with pytest.raises(NotImplementedError, match="exact=True"):
        td.jit(lambda n: td.scipy.special.factorial(n, exact=True))(3.0)


INITS = [("uniform", (), (3, 4), None), ("normal", (0.5,), (3, 4), None),
         ("truncated_normal", (), (3, 4), np.float32), ("glorot_uniform", (), (3, 4), None),
         ("glorot_normal", (), (3, 4), np.complex64), ("xavier_normal", (), (4, 3), None),
         ("he_normal", (), (2, 3, 4), None), ("kaiming_uniform", (), (2, 3, 4), np.complex128),
         ("lecun_uniform", (), (5, 4), None), ("lecun_normal", (), (5, 4), None),
         ("he_uniform", (), (5, 4), np.float32), ("orthogonal", (), (4, 3), None),
         ("orthogonal", (2.0, 0), (4, 3), None), ("delta_orthogonal", (), (3, 2, 4), None),
         ("variance_scaling", (1.0, "fan_geo_avg", "normal"), (3, 4), None),
         ("variance_scaling", (0.5, "fan_out", "uniform", 0, 1, 2), (3, 4, 2), None),
         ("constant", (0.3,), (2, 2), None)]


@pytest.mark.parametrize("name,args,shape,dtype", INITS,
                         ids=[f"{n}-{i}" for i, (n, *_) in enumerate(INITS)])
@pytest.mark.parametrize("backend", ["cpu", "xla"])
def test_initializers_draw_jaxs_numbers_from_the_same_key(name, args, shape, dtype, backend):
    want = np.asarray(getattr(jax.nn.initializers, name)(*args)(jax.random.PRNGKey(42), shape,
                                                                 dtype or jnp.float64))
    got = td.jit(lambda k: getattr(td.nn.initializers, name)(*args)(k, shape, dtype),
                 backend=backend)(td.random.PRNGKey(42))
    assert got.dtype == want.dtype and got.shape == want.shape
    close(got, want, rtol=1e-5 if want.dtype.itemsize <= 8 else 1e-12, atol=1e-6
          if want.dtype.itemsize <= 8 else 1e-14)


def test_zeros_ones_and_bad_initializer_arguments():
    k = td.random.PRNGKey(0)
    assert td.nn.initializers.zeros(k, (2, 3)).dtype == np.float64
    close(td.nn.initializers.ones(k, 3, np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="invalid mode"):
        td.nn.initializers.variance_scaling(1.0, "fan", "normal")
    with pytest.raises(ValueError, match="requires at least a 2D shape"):
        td.jit(lambda k: td.nn.initializers.orthogonal()(k, (3,)))(k)
    with pytest.raises(ValueError, match="Must be at least 2D"):
        td.jit(lambda k: td.nn.initializers.glorot_uniform()(k, (3,)))(k)
