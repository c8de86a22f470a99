"""td.linalg.eig / eigvals and td.lax.linalg.eig (the Eig primitive, LAPACK geev) against jax in
x64: values on both backends (every inexact dtype, batch axes, left and right vectors, LAPACK's
normalisation and order), the kernel against scipy, derivatives (eigenvalues; eigenvectors under
jax's enable_eigvec_derivs opt-in) against jax.grad and finite differences, jax's restrictions,
vmap, NaN input, bad input and forged instructions."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from tidu import _eval
from tidu import ops as P
from tidu.testing import check_grads
from _support.compare import close_for, jax_value, mH, rand_inexact
from _support.blas import without_lapack
from _support.values import INEXACT, one_op_graph

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)
BACKENDS = ("cpu", "xla")
CPLX = {"float32": np.complex64, "complex64": np.complex64, "float64": np.complex128,
        "complex128": np.complex128}




@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INEXACT)
@pytest.mark.parametrize("shape", [(5, 5), (2, 3, 4, 4), (1, 1), (0, 3, 3)])
def test_eig_matches_jax(backend, dtype, shape):
    a = rand_inexact(np.random.default_rng(1), shape, dtype)
    w, v = td.jit(td.linalg.eig, backend=backend)(a)
    w2 = td.jit(td.linalg.eigvals, backend=backend)(a)
    assert w.dtype == v.dtype == w2.dtype == CPLX[dtype]
    assert w.shape == shape[:-1] and v.shape == shape
    close_for(a @ v, v * w[..., None, :], dtype, 10)  # a v = v diag(w)
    close_for(np.linalg.norm(v, axis=-2), np.ones(shape[:-1]), dtype, 10)
    if a.size:
        jw, jv = jnp.linalg.eig(a)
        close_for(w, jw, dtype, 10)
        close_for(w2, jw, dtype, 10)
        close_for(v, jv, dtype, 100)  # LAPACK's normalisation and order on both: the same vectors
    lw, lvl, lvr = td.jit(td.lax.linalg.eig, backend=backend)(a)
    close_for(lw, w, dtype, 10)
    close_for(lvr, v, dtype, 10)
    close_for(mH(lvl) @ a, w[..., :, None] * mH(lvl), dtype, 10)  # vl^H a = diag(w) vl^H
    if a.size:
        close_for(lvl, jax.lax.linalg.eig(a)[1], dtype, 100)
    only_left = td.jit(lambda a: td.lax.linalg.eig(a, compute_right_eigenvectors=False),
                       backend=backend)(a)
    assert len(only_left) == 2
    close_for(only_left[1], lvl, dtype, 10)


def test_real_input_with_complex_pairs_and_a_real_spectrum():
    rot = np.array([[0.0, -2.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    w, v = td.jit(td.linalg.eig)(rot)
    np.testing.assert_allclose(w, [2j, -2j, 3], atol=1e-14)
    np.testing.assert_allclose(v[:, 1], np.conj(v[:, 0]), atol=1e-14)  # a conjugate pair
    assert abs(v[2, 2] - 1) < 1e-14 and v[:, 2].imag.max() == 0
    sym = np.array([[2.0, 1.0], [1.0, 3.0]])
    np.testing.assert_allclose(np.sort(td.jit(td.linalg.eigvals)(sym).real), np.linalg.eigvalsh(sym))
    # int32 promotes as jax: to float32 (to_inexact_dtype), so complex64 eigenvalues
    assert td.jit(td.linalg.eigvals)(np.eye(2, dtype=np.int32)).dtype == np.complex64


@pytest.mark.parametrize("dtype", INEXACT)
def test_kernel_matches_scipy_and_needs_lapack(dtype):
    rng = np.random.default_rng(5)
    x = rand_inexact(rng, (2, 4, 4), dtype)
    progs = []
    for op in (P.Eig(False, False), P.Eig(False, True), P.Eig(True, False), P.Eig(True, True)):
        g = one_op_graph(op, [td.aval(x.shape, x.dtype)])
        progs.append((op, td.compile(g)))
    for op, prog in progs:
        (got,) = prog.eval([x])
        close_for(got, op.impl(x), dtype, 100)
    with without_lapack(), pytest.raises(RuntimeError, match=r"Eig \(\?geev\) needs LAPACK"):
        progs[0][1].eval([x])


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_finite_input_gives_nan(backend):
    a = np.eye(3)
    a[1, 2] = np.inf
    w, v = td.jit(td.linalg.eig, backend=backend)(np.stack([a, np.eye(3)]))
    assert np.isnan(w[0]).all() and np.isnan(v[0]).all()
    np.testing.assert_allclose(w[1], np.ones(3))
    assert np.isnan(td.jit(td.linalg.eigvals, backend=backend)(np.full((2, 2), np.nan))).all()


def test_vmap_matches_the_batch_axis():
    a = rand_inexact(np.random.default_rng(3), (3, 4, 4), "float64")
    w, v = td.jit(td.vmap(td.linalg.eig))(a)
    bw, bv = td.jit(td.linalg.eig)(a)
    np.testing.assert_allclose(w, bw, atol=1e-12)
    np.testing.assert_allclose(v, bv, atol=1e-12)
    b = rand_inexact(np.random.default_rng(4), (4, 3, 4), "complex128")
    got = td.jit(td.vmap(td.linalg.eigvals, in_axes=1))(b)
    np.testing.assert_allclose(got, td.jit(td.linalg.eigvals)(np.moveaxis(b, 1, 0)), atol=1e-12)


# ---- derivatives ----

def _phase_free(ns, left=False):
    """A real function of eig's results that no eigenvector phase changes."""
    def f(a):
        outs = ns.lax.linalg.eig(a, compute_left_eigenvectors=left, enable_eigvec_derivs=True)
        w, vs = outs[0], outs[1:]
        total = ns.sum(ns.real(w) ** 2) + ns.sum(ns.imag(w) * ns.real(w))
        for v in vs:
            total = total + ns.sum(ns.abs(v) ** 4) + ns.sum(ns.real(v * ns.conj(v[..., :1, :])))
        return total
    return f


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_gradients_match_jax(dtype):
    rng = np.random.default_rng(7)
    a = rand_inexact(rng, (2, 4, 4), dtype)
    cases = [
        lambda ns: lambda a: ns.sum(ns.abs(ns.linalg.eigvals(a)) ** 2),
        lambda ns: lambda a: ns.sum(ns.real(ns.linalg.eigvals(a))),
        lambda ns: lambda a: ns.sum(ns.imag(ns.linalg.eigvals(a)) ** 3),
        lambda ns: _phase_free(ns),
        lambda ns: _phase_free(ns, left=True),
    ]
    for case in cases:
        for backend in BACKENDS:
            got = td.jit(td.grad(case(td)), backend=backend)(a)
            want = jax.grad(case(jnp_ns))(a)
            if dtype == "complex128":
                want = np.conj(want)  # tidu's convention (DESIGN.md: the conjugate of jax's)
            np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)


class _JaxNS:
    """jnp with jax.lax under the names the cases use."""
    linalg = jnp.linalg
    lax = jax.lax

    def __getattr__(self, name):
        return getattr(jnp, name)


jnp_ns = _JaxNS()


def test_derivatives_by_finite_differences():
    rng = np.random.default_rng(8)
    for dtype in ("float64", "complex128"):
        a = rand_inexact(rng, (3, 3), dtype)
        check_grads(td.linalg.eigvals, [a], order=1, atol=1e-6, rtol=1e-6)
        check_grads(_phase_free(td), [a], order=2, atol=1e-5, rtol=1e-5)
        check_grads(_phase_free(td, left=True), [a], order=1, atol=1e-5, rtol=1e-5)
    a32 = rand_inexact(rng, (3, 3), "float32")
    check_grads(td.linalg.eigvals, [a32], order=1, atol=5e-2, rtol=5e-2, eps=1e-2)


def test_hessian_with_the_opt_in_matches_jax():
    a = rand_inexact(np.random.default_rng(9), (3, 3), "float64")
    got = td.jit(td.hessian(_phase_free(td)))(a)
    want = jax_value(jax.hessian(_phase_free(jnp_ns)), a)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)


def test_traced_roots_are_companion_eigenvalues_as_jax():
    p = np.array([1.0, -6.0, 11.0, -6.0, 0.5])
    got = td.jit(lambda p: td.roots(p, strip_zeros=False))(p)
    np.testing.assert_allclose(got, jax_value(lambda p: jnp.roots(p, strip_zeros=False), p),
                               rtol=1e-10)
    f = lambda ns: lambda p: ns.sum(ns.real(ns.roots(p, strip_zeros=False)) ** 2)  # noqa: E731
    np.testing.assert_allclose(td.jit(td.grad(f(td)))(p), jax_value(jax.grad(f(jnp)), p), rtol=1e-8,
                               atol=1e-12)


def test_jax_restrictions_on_eigenvector_derivatives():
    a = rand_inexact(np.random.default_rng(10), (3, 3), "float64")
    with pytest.raises(NotImplementedError, match="enable_eigvec_derivs=True"):
        td.grad(lambda a: td.sum(td.real(td.linalg.eig(a)[0])))(a)
    with pytest.raises(NotImplementedError, match="enable_eigvec_derivs=True"):
        td.jvp(lambda a: td.lax.linalg.eig(a)[2], (a,), (a,))
    # as jax's: the second derivative of eigvals differentiates the eigenvectors it used
    with pytest.raises(NotImplementedError, match="enable_eigvec_derivs"):
        td.hessian(lambda a: td.sum(td.real(td.linalg.eigvals(a))))(a)


def test_bad_input_fails_with_clear_errors():
    with pytest.raises(ValueError, match=r"\(3, 4\) is not a square"):
        td.jit(td.linalg.eig)(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"\(3,\) is not a square"):
        td.jit(td.linalg.eigvals)(np.ones(3))
    with pytest.raises(TypeError, match="Eig: operand dtype int64 is not floating"):
        td.jit(lambda a: td.apply(P.Eig(), a))(np.eye(2, dtype=np.int64))
    with pytest.raises(ValueError, match="implementation"):
        td.lax.linalg.eig(np.eye(2), implementation="magma")
    with pytest.raises(AttributeError, match="td.lax.linalg has no 'qr'"):
        td.lax.linalg.qr  # noqa: B018


def _raw(slot_dtype, shapes, attrs):
    u8, u32, i64 = np.uint8, np.uint32, np.int64
    return _eval.Program(
        np.array([_eval.DTYPES.index(d) for d in slot_dtype], u8),
        np.array([len(s) for s in shapes], u32), np.array([d for s in shapes for d in s], i64),
        np.array([_eval.OPCODES.index("Eig")], u8), np.array([0, 1], u32),
        np.array([0], u32), np.array([0, 1], u32), np.array([1], u32),
        np.array([0, len(attrs)], u32), np.array(attrs, i64), np.array([], u8),
        np.arange(1, dtype=u32), np.array([1], u32))


@pytest.mark.parametrize("dtypes, shapes, attrs, msg", [
    (("float64", "complex128"), [(3, 3), (3, 4)], [0, 1], "number of attributes"),
    (("float64", "complex128"), [(3, 3), (3, 4)], [0, 2, 0], "flag"),
    (("float64", "float64"), [(3, 3), (3, 4)], [0, 1, 0], "rank or dtype"),
    (("float32", "complex128"), [(3, 3), (3, 4)], [0, 1, 0], "rank or dtype"),
    (("float64", "complex128"), [(3, 3), (3, 5)], [0, 1, 0], "result size"),
    (("float64", "complex128"), [(3, 3), (3, 6)], [1, 1, 0], "result size"),
    (("float64", "complex128"), [(3, 3), (3,)], [1, 0, 0], "rank or dtype"),
    (("float64", "complex128"), [(3, 4), (3,)], [0, 0, 0], "square"),
    (("int32", "complex128"), [(3, 3), (3,)], [0, 0, 0], "not inexact"),
    (("float64", "complex128"), [(2, 3, 3), (3, 3, 4)], [0, 1, 0], "batch axes"),
])
def test_forged_instructions_are_refused(dtypes, shapes, attrs, msg):
    with pytest.raises(ValueError, match=msg):
        _raw(dtypes, shapes, attrs)
    ok = _raw(("float64", "complex128"), [(3, 3), (3, 4)], [0, 1, 0])
    assert ok is not None
