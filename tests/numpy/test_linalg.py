"""td.linalg and its primitives (Cholesky, TriangularSolve) against jax.numpy.linalg /
jax.scipy.linalg in x64: values on both backends (batch axes, every inexact dtype), derivatives by
finite differences (check_grads, order 2) and against jax.grad / jax.hessian, a Gaussian-process
likelihood, bad and ill-conditioned input, and the validation of forged instructions."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

import tidu as td
from tidu import _eval, evaluator
from tidu import ops as P
from tidu.testing import check_grads, gp_nll
from _support.compare import jax_value, rand_inexact
from _support.values import INEXACT, one_op_graph

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402

jax.config.update("jax_enable_x64", True)
BACKENDS = ("cpu", "xla")
TOL = {"float32": 2e-4, "complex64": 2e-4, "float64": 1e-10, "complex128": 1e-10}




def spd(rng, shape, dtype):
    """Hermitian positive-definite matrices (..., n, n), well conditioned."""
    x = rand_inexact(rng, shape, dtype)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def tri(rng, shape, dtype):
    """Matrices with a dominant diagonal: either triangle is well conditioned."""
    return (rand_inexact(rng, shape, dtype) + 3 * shape[-1] ** 0.5 * np.eye(shape[-1])).astype(dtype)


def close(got, want, dtype):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=TOL[dtype],
                               atol=TOL[dtype])


# ---- values against jax, both backends ----
# The jax references of the tests parametrized by backend are stable functions (functools.cache):
# jax.jit compiles each once per shape and dtype, and the other backend's test reuses it.

@functools.cache
def _jnp_cholesky(upper):
    return lambda a: jnp.linalg.cholesky(a, upper=upper)


@functools.cache
def _jsl_solve_triangular(trans, lower, unit):
    def f(a, b, v):
        return (jsl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit),
                jax.vmap(lambda m: jsl.solve_triangular(m, v, trans=trans, lower=lower,
                                                        unit_diagonal=unit))(a))
    return f


@functools.cache
def _jsl_cho(lower):
    def f(a, b):
        jc = jsl.cho_factor(a, lower=lower)
        return jc[0], jax.vmap(lambda m: jsl.cho_solve((m, lower), b))(jc[0])
    return f


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INEXACT)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5), (0, 3, 3), (1, 1)])
def test_cholesky_matches_jax(backend, dtype, shape):
    a = spd(np.random.default_rng(0), shape, dtype)
    for upper in (False, True):
        got = td.jit(lambda a: td.linalg.cholesky(a, upper=upper), backend=backend)(a)
        assert got.dtype == np.dtype(dtype) and got.shape == shape
        close(got, jax_value(_jnp_cholesky(upper), a), dtype)


TRI_CASES = list(itertools.product((0, 1, 2), (False, True), (False, True)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INEXACT)
def test_solve_triangular_matches_jax(backend, dtype):
    rng = np.random.default_rng(1)
    a, b, v = tri(rng, (2, 4, 4), dtype), rand_inexact(rng, (2, 4, 3), dtype), rand_inexact(rng, (4,), dtype)
    for trans, lower, unit in TRI_CASES:
        def f(a, b, v):
            s = td.linalg.solve_triangular
            return (s(a, b, trans, lower, unit), s(a, v, trans=trans, lower=lower,
                                                   unit_diagonal=unit))

        got = td.jit(f, backend=backend)(a, b, v)
        want_b, want_v = jax_value(_jsl_solve_triangular(trans, lower, unit), a, b, v)
        close(got[0], want_b, dtype)
        close(got[1], want_v, dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ("float64", "complex128", "float32"))
def test_cho_factor_and_cho_solve_match_jax(backend, dtype):
    rng = np.random.default_rng(2)
    a, b = spd(rng, (3, 4, 4), dtype), rand_inexact(rng, (4, 2), dtype)   # b broadcasts over a's batch
    for lower in (False, True):
        def f(a, b):
            c = td.linalg.cho_factor(a, lower=lower)
            return c[0], td.linalg.cho_solve(c, b)

        c, x = td.jit(f, backend=backend)(a, b)
        jc0, want_x = jax_value(_jsl_cho(lower), a, b)
        close(c, jc0, dtype)
        close(x, want_x, dtype)
        close(np.linalg.solve(a, b), x, dtype)


# ---- the primitives: C++ kernels with and without the LAPACK hooks, against impl ----

FLAGS = list(itertools.product((False, True), repeat=5))  # left, lower, trans, conj, unit


def _primitive_cases(dtype):
    rng = np.random.default_rng(3)
    for flags in FLAGS:
        op = P.TriangularSolve(*flags)
        a = tri(rng, (2, 5, 5), dtype)
        b = rand_inexact(rng, (2, 5, 3) if flags[0] else (2, 3, 5), dtype)
        yield op, [a, b]
    yield P.Cholesky(), [spd(rng, (2, 6, 6), dtype) + np.triu(rand_inexact(rng, (6, 6), dtype), 1)]


@pytest.mark.parametrize("dtype", INEXACT)
def test_kernels_with_and_without_lapack_hooks_match_the_numpy_reference(dtype):
    progs = []
    for op, args in _primitive_cases(dtype):
        g = one_op_graph(op, [td.aval(x.shape, x.dtype) for x in args])
        progs.append((op, args, td.compile(g)))
    evaluator.ensure_blas()
    try:
        for hooks in (True, False):
            if not hooks:
                _eval.clear_blas()
            for op, args, prog in progs:
                (got,) = prog.eval(args)
                close(got, op.impl(*args), dtype)
    finally:
        evaluator.BLAS = None
        evaluator.ensure_blas()


def test_impl_solves_the_system_it_names():
    rng = np.random.default_rng(4)
    for flags in FLAGS:
        left, lower, trans, conj, unit = flags
        a, b = tri(rng, (4, 4), "complex128"), rand_inexact(rng, (4, 4), "complex128")
        m = np.tril(a) if lower else np.triu(a)
        if unit:
            m = m - np.diag(np.diag(m)) + np.eye(4)
        m = m.T if trans else m
        m = np.conj(m) if conj else m
        x = P.TriangularSolve(*flags).impl(a, b)
        np.testing.assert_allclose(m @ x if left else x @ m, b, atol=1e-12)


# ---- derivatives: finite differences (order 2) and jax ----

def _sym(a):
    return a + td.conj(td.transpose(a, (0, 2, 1)) if a.ndim == 3 else td.transpose(a))


@pytest.mark.parametrize("dtype", INEXACT)
def test_cholesky_derivatives_to_order_two(dtype):
    single = dtype in ("float32", "complex64")
    kw = dict(atol=5e-2, rtol=5e-2, eps=1e-2) if single else dict(atol=1e-6, rtol=1e-6)
    rng = np.random.default_rng(5)
    a = spd(rng, (2, 3, 3), dtype)
    # the primitive reads the lower triangle: its derivative must ignore the upper one
    check_grads(lambda a: td.apply(P.Cholesky(), a), [a + np.triu(rand_inexact(rng, (3, 3), dtype), 1)],
                order=2, **kw)
    check_grads(lambda a: td.linalg.cholesky(a, upper=True), [a], order=2, **kw)


@pytest.mark.parametrize("dtype", INEXACT)
def test_triangular_solve_derivatives_to_order_two(dtype):
    single = dtype in ("float32", "complex64")
    kw = dict(atol=5e-2, rtol=5e-2, eps=1e-2) if single else dict(atol=1e-6, rtol=1e-6)
    rng = np.random.default_rng(6)
    for flags in [(True, True, False, False, False), (False, False, True, True, False),
                  (True, False, False, True, True), (False, True, True, False, True)]:
        a = tri(rng, (2, 3, 3), dtype)
        b = rand_inexact(rng, (2, 3, 2) if flags[0] else (2, 2, 3), dtype)
        op = P.TriangularSolve(*flags)
        check_grads(lambda a, b: td.apply(op, a * a, b) * b, [a, b], order=2, **kw)


def test_cho_solve_derivatives_to_order_two():
    rng = np.random.default_rng(7)
    a, b = spd(rng, (3, 3), "float64"), rand_inexact(rng, (3,), "float64")
    check_grads(lambda a, b: td.linalg.cho_solve(td.linalg.cho_factor(_sym(a)), b),
                [a, b], order=2)


def test_gradients_and_hessians_match_jax():
    rng = np.random.default_rng(8)
    a, b = tri(rng, (4, 4), "float64"), rand_inexact(rng, (4, 2), "float64")

    def f(ns, sl):
        def loss(a, b):
            x = sl.solve_triangular(a, b, trans=1, lower=True)
            c = ns.linalg.cholesky(a @ ns.transpose(a) + 0.5 * ns.sum(x * x) * np.eye(4))
            return ns.sum(ns.tanh(c)) + ns.sum(x * x)
        return loss

    tf, jf = f(td, td.linalg), f(jnp, jsl)
    want, want_h = jax_value(lambda a, b: (jax.grad(jf, argnums=(0, 1))(a, b),
                                           jax.hessian(jf)(a, b)), a, b)
    for backend in BACKENDS:
        got = td.jit(td.grad(tf, argnums=(0, 1)), backend=backend)(a, b)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(td.jit(td.hessian(tf), backend=backend)(a, b),
                                   want_h, rtol=1e-8, atol=1e-10)


def test_complex_gradient_is_the_conjugate_of_jax():
    # through a Hermitian parameterisation: jax's cho_factor treats a tangent as Hermitian where
    # tidu's derivative is that of the triangle read (docs/linalg.md), equal on Hermitian paths
    rng = np.random.default_rng(9)
    x, b = rand_inexact(rng, (3, 3), "complex128"), rand_inexact(rng, (3, 2), "complex128")

    def f(ns, sl):
        def loss(x, b):
            a = x @ ns.conj(ns.transpose(x)) + 3.0 * np.eye(3)
            return ns.sum(ns.real(ns.conj(sl.cho_solve(sl.cho_factor(a), b)) * b))
        return loss

    got = td.jit(td.grad(f(td, td.linalg), argnums=(0, 1)))(x, b)
    want = jax_value(jax.grad(f(jnp, jsl), argnums=(0, 1)), x, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.conj(w), rtol=1e-9, atol=1e-11)


# ---- a Gaussian process ----

def _gp_data():
    rng = np.random.default_rng(10)
    x = np.sort(rng.uniform(0, 5, 30))
    y = np.sin(x) + 0.1 * rng.standard_normal(30)
    return x, y, np.array([0.2, -0.3, -2.0])


@functools.cache
def _jax_gp_reference():
    """jax's value, gradient and Hessian of the GP likelihood at _gp_data: one jit, shared by
    both backends' tests."""
    x, y, theta = _gp_data()
    jf = gp_nll(jnp, jsl, jnp.diagonal, x, y)
    return jax_value(lambda t: (jf(t), jax.grad(jf)(t), jax.hessian(jf)(t)), theta)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gp_likelihood_value_gradient_and_hessian_match_jax(backend):
    x, y, theta = _gp_data()
    tf = gp_nll(td, td.linalg, td.linalg.diagonal, x, y)
    val, grad, hess = _jax_gp_reference()
    np.testing.assert_allclose(td.jit(tf, backend=backend)(theta), val, rtol=1e-11)
    np.testing.assert_allclose(td.jit(td.grad(tf), backend=backend)(theta), grad,
                               rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(td.jit(td.hessian(tf), backend=backend)(theta),
                               hess, rtol=1e-7, atol=1e-9)
    if backend == "cpu":
        check_grads(tf, [theta], order=2, atol=1e-5, rtol=1e-5)


# ---- bad and ill-conditioned input ----

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ("float64", "complex64"))
def test_not_positive_definite_gives_nan_for_that_matrix_only(backend, dtype):
    """NaN on and below the diagonal (both parts of a complex), zeros above it, as jax's on CPU.
    Was: all NaN (and nan+0j for complex), while docs/linalg.md said "as jax"."""
    good = spd(np.random.default_rng(11), (3, 3), dtype)
    bad = good - 10 * np.eye(3, dtype=dtype)
    got = td.jit(td.linalg.cholesky, backend=backend)(np.stack([good, bad, good]))
    want = np.asarray(jnp.linalg.cholesky(np.stack([good, bad, good])))
    for part in (np.real, np.imag):
        np.testing.assert_array_equal(part(got[1]), part(want[1]))
    assert np.isnan(np.real(got[1])[np.tril_indices(3)]).all()
    assert (got[1][np.triu_indices(3, 1)] == 0).all()
    upper = td.jit(lambda a: td.linalg.cholesky(a, upper=True), backend=backend)(bad)
    np.testing.assert_array_equal(np.isnan(upper), np.isnan(jnp.linalg.cholesky(bad, upper=True)))
    np.testing.assert_array_equal(P.Cholesky().impl(bad), got[1])  # the Python reference too
    close(got[0], np.linalg.cholesky(good), dtype)
    close(got[2], np.linalg.cholesky(good), dtype)
    grad = td.jit(td.grad(lambda a: td.sum(td.real(td.linalg.cholesky(a)))),
                  backend=backend)(bad)
    assert np.isnan(grad).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_singular_and_ill_conditioned_inputs_do_not_crash(backend):
    sing = np.triu(np.ones((4, 4)))
    sing[2, 2] = 0.0
    got = td.jit(lambda a, b: td.linalg.solve_triangular(a, b), backend=backend)(sing, np.ones(4))
    assert not np.isfinite(got).all()  # inf / nan, as LAPACK's trsm
    hilbert = 1.0 / (np.arange(8)[:, None] + np.arange(8)[None, :] + 1)
    low = td.jit(td.linalg.cholesky, backend=backend)(hilbert)
    assert np.isfinite(low).all()
    np.testing.assert_allclose(low @ low.T, hilbert, atol=1e-12)


def test_wrong_shapes_and_dtypes_fail_at_build_with_clear_errors():
    with pytest.raises(ValueError, match=r"cholesky: a of shape \(3, 4\) is not a square"):
        td.jit(td.linalg.cholesky)(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"b of shape \(3, 2\) does not match a of shape"):
        td.jit(td.linalg.solve_triangular)(np.eye(4), np.ones((3, 2)))
    with pytest.raises(ValueError, match="do not broadcast"):
        td.jit(td.linalg.solve_triangular)(np.ones((2, 3, 3)), np.ones((4, 3, 1)))
    with pytest.raises(ValueError, match="invalid trans"):
        td.jit(lambda a, b: td.linalg.solve_triangular(a, b, trans=3))(np.eye(2), np.ones(2))
    with pytest.raises(ValueError, match=r"TriangularSolve: b of shape \(2, 3\) has 3 columns"):
        td.jit(lambda a, b: td.apply(P.TriangularSolve(False, True, False, False, False), a, b))(
            np.eye(2), np.ones((2, 3)))
    with pytest.raises(TypeError, match="Cholesky: operand dtype int64 is not floating"):
        td.jit(lambda a: td.apply(P.Cholesky(), a))(np.eye(2, dtype=np.int64))
    # integer input to the front end is promoted, as jax does
    np.testing.assert_allclose(td.jit(td.linalg.cholesky)(np.eye(2, dtype=np.int64) * 4),
                               2 * np.eye(2))


# ---- forged instructions are refused by validate.hpp ----

def _raw(slot_dtype, slot_ndim, shapes, code, attrs):
    in_off, in_slots = [0], []
    for _, ins, _ in code:
        in_slots += ins
        in_off.append(len(in_slots))
    u8, u32, i64 = np.uint8, np.uint32, np.int64
    n_in = len(slot_dtype) - len(code)
    return _eval.Program(
        np.array([_eval.DTYPES.index(d) for d in slot_dtype], u8), np.array(slot_ndim, u32),
        np.array(shapes, i64), np.array([_eval.OPCODES.index(op) for op, _, _ in code], u8),
        np.array(in_off, u32), np.array(in_slots, u32), np.arange(len(code) + 1, dtype=u32),
        np.array([o for _, _, o in code], u32),
        np.array([0, len(attrs)], u32), np.array(attrs, i64), np.array([], u8),
        np.arange(n_in, dtype=u32), np.array([o for _, _, o in code], u32))


@pytest.mark.parametrize("dtypes, shapes, attrs, msg", [
    (("float64",) * 3, [(3, 3), (3, 2), (3, 2)], [1, 1, 0, 0, 2], "flag attribute"),
    (("float64",) * 3, [(3, 3), (3, 2), (3, 2)], [1, 1, 0], "needs 5 attributes"),
    (("float64",) * 3, [(3, 3), (2, 3), (2, 3)], [1, 1, 0, 0, 0], "does not match the size"),
    (("float64",) * 3, [(3, 4), (3, 2), (3, 2)], [1, 1, 0, 0, 0], r"not a \(batch of\) square"),
    (("float64",) * 3, [(3, 3), (3, 2), (3, 3)], [1, 1, 0, 0, 0], "operand shape mismatch"),
    (("float64",) * 3, [(2, 3, 3), (1, 3, 2), (1, 3, 2)], [1, 1, 0, 0, 0], "batch axes"),
    (("int64",) * 3, [(3, 3), (3, 2), (3, 2)], [1, 1, 0, 0, 0], "not inexact"),
    (("float64", "float32", "float64"), [(3, 3), (3, 2), (3, 2)], [1, 1, 0, 0, 0],
     "dtype mismatch"),
])
def test_forged_triangular_solves_are_refused(dtypes, shapes, attrs, msg):
    with pytest.raises(ValueError, match=msg):
        _raw(dtypes, [len(s) for s in shapes], [d for s in shapes for d in s],
             [("TriangularSolve", [0, 1], 2)], attrs)


@pytest.mark.parametrize("shapes, msg", [([(3,), (3,)], "square"), ([(2, 3), (2, 3)], "square"),
                                         ([(3, 3), (2, 2)], "operand shape mismatch")])
def test_forged_choleskys_are_refused(shapes, msg):
    with pytest.raises(ValueError, match=msg):
        _raw(("float64",) * 2, [len(s) for s in shapes], [d for s in shapes for d in s],
             [("Cholesky", [0], 1)], [])
