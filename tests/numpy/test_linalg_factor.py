"""td.linalg on the factorisations (LU, Eigh, QR, SVD and LUPermute) against jax.numpy.linalg /
jax.scipy.linalg in x64: values on both backends (batch axes, every inexact dtype), derivatives by
finite differences (check_grads, order 2) and against jax.grad / jax.hessian, singular and
ill-conditioned input, build-time errors, and the validation of forged instructions."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value
from tidu import _eval, evaluator
from tidu import ops as P
from tidu.testing import check_grads
from _support.blas import without_lapack
from _support.values import INEXACT, one_op_graph

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402

jax.config.update("jax_enable_x64", True)
BACKENDS = ("cpu", "xla")
TOL = {"float32": 5e-4, "complex64": 5e-4, "float64": 1e-10, "complex128": 1e-10}
SINGLE = ("float32", "complex64")


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def herm(rng, shape, dtype):
    x = rand(rng, shape, dtype)
    return ((x + np.conj(np.swapaxes(x, -1, -2))) / 2).astype(dtype)


def close(got, want, dtype, scale=1.0):
    tol = TOL[str(np.dtype(dtype))] * scale
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


def grad_kw(dtype):
    if dtype in SINGLE:
        return dict(atol=5e-2, rtol=5e-2, eps=1e-2)
    return dict(atol=1e-6, rtol=1e-6)


def _mH(x):
    return np.conj(np.swapaxes(x, -1, -2))


# ---- values against jax, both backends ----

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INEXACT)
def test_lu_family_matches_jax(backend, dtype):
    rng = np.random.default_rng(0)
    a, b, v = rand(rng, (2, 4, 4), dtype), rand(rng, (2, 4, 3), dtype), rand(rng, (4,), dtype)

    def f(a, b, v):
        lu, piv = td.linalg.lu_factor(a)
        return (lu, piv, td.linalg.solve(a, b), td.linalg.solve(a[0], v), td.linalg.inv(a),
                td.linalg.det(a), *td.linalg.slogdet(a),
                *[td.linalg.lu_solve((lu, piv), b, trans=t) for t in (0, 1, 2)])

    got = td.jit(f, backend=backend)(a, b, v)
    lu, piv = jsl.lu_factor(a)
    sign, logdet = jnp.linalg.slogdet(a)
    want = (lu, piv, jnp.linalg.solve(a, b), jnp.linalg.solve(a[0], v), jnp.linalg.inv(a),
            jnp.linalg.det(a), sign, logdet,
            *[jsl.lu_solve((lu, piv), b, trans=t) for t in (0, 1, 2)])
    assert got[1].dtype == np.int32
    for g, w in zip(got, want):
        assert g.shape == w.shape
        close(g, w, dtype, 10)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INEXACT)
@pytest.mark.parametrize("shape", [(5, 5), (2, 3, 4, 4), (0, 3, 3), (1, 1)])
def test_eigh_matches_jax(backend, dtype, shape):
    a = herm(np.random.default_rng(1), shape, dtype)
    w, v = td.jit(td.linalg.eigh, backend=backend)(a)
    w2 = td.jit(td.linalg.eigvalsh, backend=backend)(a)
    jw = jnp.linalg.eigvalsh(a)
    assert w.dtype == jw.dtype and v.dtype == np.dtype(dtype) and v.shape == shape
    close(w, jw, dtype, 10)
    close(w2, jw, dtype, 10)
    # eigenvectors up to a phase per column: a v = v diag(w), v unitary
    close(a @ v, v * w[..., None, :].astype(dtype), dtype, 10)
    close(_mH(v) @ v, np.broadcast_to(np.eye(shape[-1]), shape), dtype, 10)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INEXACT)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (2, 0, 3)])
def test_qr_matches_jax(backend, dtype, shape):
    a = rand(np.random.default_rng(2), shape, dtype)
    for mode in ("reduced", "full", "complete", "r", "raw"):  # raw: LAPACK's reflectors
        got = td.jit(lambda a: td.linalg.qr(a, mode=mode), backend=backend)(a)
        want = jnp.linalg.qr(a, mode=mode)
        for g, w in zip(*(((got,), (want,)) if mode == "r" else (got, want))):
            assert g.shape == w.shape and g.dtype == w.dtype
            close(g, w, dtype, 10)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INEXACT)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (2, 0, 3)])
def test_svd_matches_jax(backend, dtype, shape):
    a = rand(np.random.default_rng(3), shape, dtype)
    s = td.jit(td.linalg.svdvals, backend=backend)(a)
    close(s, jnp.linalg.svd(a, compute_uv=False), dtype, 10)
    for full in (False, True):
        u, s, vh = td.jit(lambda a: td.linalg.svd(a, full_matrices=full), backend=backend)(a)
        ju, js, jvh = jnp.linalg.svd(a, full_matrices=full)
        assert u.shape == ju.shape and vh.shape == jvh.shape and s.dtype == js.dtype
        close(s, js, dtype, 10)
        k = s.shape[-1]
        rec = (u[..., :, :k] * s[..., None, :].astype(dtype)) @ vh[..., :k, :]
        close(rec, a, dtype, 10)
        close(np.abs(u), np.abs(ju), dtype, 100)  # LAPACK's gesdd on both: same up to phases


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ("float64", "complex128", "float32"))
def test_norm_pinv_matrix_power_lstsq_match_jax(backend, dtype):
    rng = np.random.default_rng(4)
    x, a, sq = rand(rng, (2, 5), dtype), rand(rng, (5, 3), dtype), rand(rng, (3, 3), dtype)
    vec_orders = [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5]
    mat_orders = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]

    def f(x, a, sq):
        out = [td.linalg.norm(x), td.linalg.norm(x, keepdims=True)]
        out += [td.linalg.norm(x, ord=o, axis=1) for o in vec_orders]
        out += [td.linalg.norm(a, ord=o) for o in mat_orders]
        out += [td.linalg.norm(x[:, :, None] * x[:, None, :], ord=2, axis=(1, 2))]
        out += [td.linalg.pinv(a), td.linalg.pinv(a.T)]
        out += [td.linalg.matrix_power(sq, n) for n in (0, 1, 3, -2)]
        out += list(td.linalg.lstsq(a, x.T))
        return out

    def jf(x, a, sq):
        out = [jnp.linalg.norm(x), jnp.linalg.norm(x, keepdims=True)]
        out += [jnp.linalg.norm(x, ord=o, axis=1) for o in vec_orders]
        out += [jnp.linalg.norm(a, ord=o) for o in mat_orders]
        out += [jnp.linalg.norm(x[:, :, None] * x[:, None, :], ord=2, axis=(1, 2))]
        out += [jnp.linalg.pinv(a), jnp.linalg.pinv(a.T)]
        out += [jnp.linalg.matrix_power(sq, n) for n in (0, 1, 3, -2)]
        out += list(jnp.linalg.lstsq(a, x.T))
        return out

    got, want = td.jit(f, backend=backend)(x, a, sq), jf(x, a, sq)
    for i, (g, w) in enumerate(zip(got, want)):
        assert np.shape(g) == np.shape(w), i
        close(g, w, dtype, 100)


# ---- the primitives: C++ kernels against impl, with and without LAPACK ----

@pytest.mark.parametrize("dtype", INEXACT)
def test_kernels_match_the_numpy_reference(dtype):
    rng = np.random.default_rng(5)
    cases = [(P.LU(), [rand(rng, (2, 5, 5), dtype)]),
             (P.LUPermute(False), [np.array([[2, 2, 3], [1, 2, 2]], np.int32),
                                   rand(rng, (2, 4, 3), dtype)]),
             (P.LUPermute(True), [np.array([[2, 9, -1]], np.int32), rand(rng, (1, 4, 2), dtype)]),
             (P.Eigh(False), [herm(rng, (2, 4, 4), dtype)]),
             (P.QR(False), [rand(rng, (5, 3), dtype)]), (P.QR(True), [rand(rng, (2, 3, 5), dtype)]),
             (P.SVD(False, False), [rand(rng, (4, 6), dtype)])]
    progs = []
    for op, args in cases:
        g = one_op_graph(op, [td.aval(x.shape, x.dtype) for x in args])
        progs.append((op, args, td.compile(g)))
    for op, args, prog in progs:
        (got,) = prog.eval(args)
        close(got, op.impl(*args), dtype, 10)
    evaluator.ensure_blas()
    try:
        _eval.clear_blas()
        for op, args, prog in progs:
            if isinstance(op, (P.LU, P.LUPermute)):  # loops of their own
                (got,) = prog.eval(args)
                close(got, op.impl(*args), dtype, 10)
            else:
                with pytest.raises(RuntimeError, match="needs LAPACK"):
                    prog.eval(args)
    finally:
        evaluator.BLAS = None
        evaluator.ensure_blas()


# ---- derivatives: finite differences (order 2) and jax ----

@pytest.mark.parametrize("dtype", INEXACT)
def test_lu_solve_inv_det_derivatives_to_order_two(dtype):
    kw = grad_kw(dtype)
    rng = np.random.default_rng(6)
    a = (rand(rng, (2, 3, 3), dtype) + 2 * np.eye(3)).astype(dtype)
    b = rand(rng, (2, 3, 2), dtype)
    check_grads(lambda a: td.linalg.lu_factor(a)[0], [a], order=2, **kw)
    check_grads(td.linalg.solve, [a, b], order=2, **kw)
    check_grads(lambda a, b: td.linalg.lu_solve(td.linalg.lu_factor(a), b, trans=2), [a, b],
                order=2, **kw)
    check_grads(td.linalg.inv, [a], order=2, **kw)
    check_grads(td.linalg.det, [a], order=2, **kw)
    check_grads(lambda a: td.linalg.slogdet(a)[1], [a], order=2, **kw)


@pytest.mark.parametrize("dtype", INEXACT)
def test_eigh_derivatives_to_order_two(dtype):
    kw = grad_kw(dtype)
    rng = np.random.default_rng(7)
    a = herm(rng, (2, 3, 3), dtype)
    check_grads(td.linalg.eigvalsh, [a], order=2, **kw)
    # the primitive reads the lower triangle: its derivative ignores the upper one
    check_grads(lambda a: td.linalg.eigh(a, symmetrize_input=False)[0],
                [a + np.triu(rand(rng, (3, 3), dtype), 1)], order=2, **kw)
    # eigenvectors through gauge-invariant quantities: |v_ij|^2 and v diag(f(w)) v^H
    check_grads(lambda a: td.real(td.linalg.eigh(a)[1] * td.conj(td.linalg.eigh(a)[1])), [a],
                order=2, **kw)

    def fun(a):
        w, v = td.linalg.eigh(a)
        return (v * td.astype(td.tanh(w), v.dtype)[..., None, :]) @ td.conj(
            td.transpose(v, (0, 2, 1)))

    check_grads(fun, [a], order=2, **kw)


@pytest.mark.parametrize("dtype", INEXACT)
def test_qr_derivatives_to_order_two(dtype):
    kw = grad_kw(dtype)
    rng = np.random.default_rng(8)
    for shape in ((4, 3), (2, 3, 3)):
        a = (rand(rng, shape, dtype) + 2 * np.eye(*shape[-2:])).astype(dtype)  # well conditioned
        order = 1 if dtype in SINGLE else 2  # second differences in single precision: noise
        check_grads(lambda a: td.linalg.qr(a)[0], [a], order=order, **kw)
        check_grads(lambda a: td.linalg.qr(a)[1], [a], order=order, **kw)


@pytest.mark.parametrize("dtype", INEXACT)
def test_svd_derivatives_to_order_two(dtype):
    kw = grad_kw(dtype)
    rng = np.random.default_rng(9)
    for shape in ((4, 3), (3, 4), (2, 3, 3)):
        a = rand(rng, shape, dtype)
        check_grads(td.linalg.svdvals, [a], order=2, **kw)

        def gauge_free(a):
            u, s, vh = td.linalg.svd(a, full_matrices=False)
            us = u * td.astype(td.exp(s), u.dtype)[..., None, :]
            return td.real(u * td.conj(u)), us @ vh

        check_grads(lambda a: gauge_free(a)[0], [a], order=2, **kw)
        check_grads(lambda a: gauge_free(a)[1], [a], order=2, **kw)


def test_norm_pinv_lstsq_matrix_power_derivatives_to_order_two():
    rng = np.random.default_rng(10)
    x, a = rand(rng, (4,), "float64"), rand(rng, (4, 3), "float64")
    sq = rand(rng, (3, 3), "float64") + 2 * np.eye(3)
    for o in (None, 1, 3, np.inf):
        check_grads(lambda x: td.linalg.norm(x, ord=o), [x], order=2)
    for o in ("fro", "nuc", 2, -2, 1):
        check_grads(lambda a: td.linalg.norm(a, ord=o), [a], order=2)
    check_grads(td.linalg.pinv, [a], order=2)
    check_grads(lambda a, x: td.linalg.lstsq(a, x)[0], [a, x], order=2)
    check_grads(lambda m: td.linalg.matrix_power(m, -3), [sq], order=2)


def test_gradients_and_hessians_match_jax():
    rng = np.random.default_rng(11)
    a, b = rand(rng, (3, 3), "float64") + 2 * np.eye(3), rand(rng, (3, 2), "float64")

    def f(ns):
        def loss(a, b):
            la = ns.linalg
            h = a + ns.transpose(a)
            x = la.solve(a, b)
            q, r = la.qr(a @ a + 1.0)
            return (ns.sum(x * x) + la.slogdet(a)[1] + ns.sum(ns.tanh(la.eigvalsh(h)))
                    + la.det(a) + ns.sum(la.svd(a, compute_uv=False)) + ns.sum(ns.tanh(r))
                    + ns.sum(la.inv(a) * b[:, :1]) + la.norm(a, ord=2))
        return loss

    tf, jf = f(td), f(jnp)
    want = jax_value(jax.grad(jf, argnums=(0, 1)), a, b)
    want_h = jax_value(jax.hessian(jf), a, b)
    for backend in BACKENDS:
        got = td.jit(td.grad(tf, argnums=(0, 1)), backend=backend)(a, b)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(td.jit(td.hessian(tf), backend=backend)(a, b),
                                   want_h, rtol=1e-7, atol=1e-9)


def test_complex_gradients_are_the_conjugate_of_jax():
    rng = np.random.default_rng(12)
    a, b = rand(rng, (3, 3), "complex128") + 2 * np.eye(3), rand(rng, (3,), "complex128")

    def f(ns):
        def loss(a, b):
            la = ns.linalg
            h = a + ns.conj(ns.transpose(a))
            return (ns.sum(ns.abs(la.solve(a, b))) + la.slogdet(a)[1]
                    + ns.sum(la.eigvalsh(h) ** 2) + ns.sum(la.svd(a, compute_uv=False) ** 3)
                    + ns.sum(ns.abs(la.qr(a)[1])))
        return loss

    got = td.jit(td.grad(f(td), argnums=(0, 1)))(a, b)
    want = jax_value(jax.grad(f(jnp), argnums=(0, 1)), a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.conj(w), rtol=1e-8, atol=1e-10)


def test_pivots_are_never_differentiable():
    a = np.eye(3) + 0.1
    piv = lambda a: td.linalg.lu_factor(a)[1]  # noqa: E731
    with pytest.raises(TypeError, match="real-valued outputs.*int64"):  # sum(int32) is int64
        td.grad(lambda a: td.sum(piv(a)))(a)
    with pytest.raises(TypeError, match="real-valued outputs.*int32"):
        td.jacrev(piv)(a)
    p, t = td.jvp(piv, (a,), (a,))  # as every integer output: a zero tangent
    assert t.dtype == np.int32 and not t.any()


# ---- singular, ill-conditioned and bad input ----

@pytest.mark.parametrize("backend", BACKENDS)
def test_singular_and_ill_conditioned_inputs_do_not_crash(backend):
    sing = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])

    def f(a):
        la = td.linalg
        return (la.det(a), *la.slogdet(a), la.solve(a, np.ones(3)), la.inv(a), la.pinv(a),
                la.svd(a)[1], la.eigvalsh(a), la.qr(a)[1], la.lstsq(a, np.ones(3))[0])

    got = td.jit(f, backend=backend)(sing)
    assert abs(got[0]) < 1e-12 and got[1] == 0 and got[2] == -np.inf
    np.testing.assert_allclose(got[5], np.linalg.pinv(sing), atol=1e-10)
    np.testing.assert_allclose(got[9], np.linalg.lstsq(sing, np.ones(3), rcond=None)[0],
                               atol=1e-10)
    td.jit(td.grad(lambda a: td.linalg.det(a)), backend=backend)(sing)  # NaN, no crash
    hilbert = 1.0 / (np.arange(10)[:, None] + np.arange(10)[None, :] + 1)
    w, v = td.jit(td.linalg.eigh, backend=backend)(hilbert)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(hilbert), atol=1e-12)
    x = td.jit(td.linalg.solve, backend=backend)(hilbert, hilbert @ np.ones(10))
    np.testing.assert_allclose(hilbert @ x, hilbert @ np.ones(10), atol=1e-8)
    nan = np.full((3, 3), np.nan)
    for fn in (td.linalg.eigh, td.linalg.svd, td.linalg.qr, td.linalg.lu_factor):
        td.jit(fn, backend=backend)(nan)  # NaN in, NaN (or garbage) out, no crash


def test_wrong_shapes_and_dtypes_fail_at_build_with_clear_errors():
    la = td.linalg
    power = lambda a: la.matrix_power(a, 2)  # noqa: E731
    for fn in (la.solve, la.lu_factor, la.inv, la.det, la.slogdet, la.eigh, la.eigvalsh, power):
        args = (np.ones((3, 4)), np.ones(3)) if fn is la.solve else (np.ones((3, 4)),)
        with pytest.raises(ValueError, match=r"\(3, 4\) is not a square"):
            td.jit(fn)(*args)
    for fn in (la.qr, la.svd, la.pinv):
        with pytest.raises(ValueError, match="is not a matrix"):
            td.jit(fn)(np.ones(3))
    with pytest.raises(ValueError, match=r"b of shape \(4,\) does not match a of shape"):
        td.jit(la.solve)(np.eye(3), np.ones(4))
    with pytest.raises(ValueError, match="unsupported mode"):
        td.jit(lambda a: la.qr(a, mode="economic"))(np.eye(2))
    with pytest.raises(ValueError, match="invalid order"):
        td.jit(lambda a: la.norm(a, ord="fro", axis=0))(np.ones(3))
    with pytest.raises(TypeError, match="integer"):
        td.jit(lambda a: la.matrix_power(a, 1.5))(np.eye(2))
    with pytest.raises(TypeError, match="LU: operand dtype int64 is not floating"):
        td.jit(lambda a: td.apply(P.LU(), a))(np.eye(2, dtype=np.int64))
    with pytest.raises(TypeError, match="pivots dtype float64 is not int32"):
        td.jit(lambda p, x: td.apply(P.LUPermute(False), p, x))(np.zeros(2), np.eye(2))
    with pytest.raises(NotImplementedError, match="QR factorisation of a 2x3"):
        td.jit(td.grad(lambda a: td.sum(la.qr(a)[0])))(np.ones((2, 3)))
    with pytest.raises(NotImplementedError, match="full_matrices=True"):
        td.jit(td.grad(lambda a: td.sum(la.svd(a)[0])))(np.ones((3, 2)))


def test_qr_raw_kernel_vmap_reflectors_and_no_derivative():
    """Geqrf (qr mode 'raw'): the kernel against numpy's reference, vmap, Q and R rebuilt from
    the reflectors, jax's lack of a derivative (a clear error) and a missing LAPACK."""
    x = rand(np.random.default_rng(29), (2, 5, 3), "complex128")
    prog = td.compile(one_op_graph(P.Geqrf(), [td.aval(x.shape, x.dtype)]))
    (got,) = prog.eval([x])
    close(got, P.Geqrf().impl(x), "complex128")
    h, tau = td.jit(lambda a: td.linalg.qr(a, mode="raw"))(x)
    vh, vtau = td.jit(td.vmap(lambda a: td.linalg.qr(a, mode="raw")))(x)
    np.testing.assert_array_equal(vh, h)
    np.testing.assert_array_equal(vtau, tau)
    for b in range(2):  # Q = H_1 ... H_k, H_i = I - tau_i v_i v_i^H; R the upper triangle
        a = h[b].T
        q = np.eye(5, dtype=x.dtype)
        for i in range(3):
            v = np.concatenate([np.zeros(i), [1.0], a[i + 1:, i]])
            q = q @ (np.eye(5) - tau[b, i] * np.outer(v, v.conj()))
        close(q[:, :3] @ np.triu(a[:3]), x[b], "complex128", 10)
    with pytest.raises(NotImplementedError, match="Geqrf.*no derivative rule"):
        td.grad(lambda a: td.sum(td.linalg.qr(a, mode="raw")[0]))(x[0].real)
    with pytest.raises(ValueError, match="unsupported mode 'economic'"):
        td.jit(lambda a: td.linalg.qr(a, mode="economic"))(x)
    with without_lapack(), pytest.raises(RuntimeError, match=r"Geqrf \(\?geqrf\) needs LAPACK"):
        prog.eval([x])


# ---- forged instructions are refused by validate.hpp ----

def _raw(slot_dtype, shapes, op, ins, attrs):
    u8, u32, i64 = np.uint8, np.uint32, np.int64
    out = len(slot_dtype) - 1
    return _eval.Program(
        np.array([_eval.DTYPES.index(d) for d in slot_dtype], u8),
        np.array([len(s) for s in shapes], u32), np.array([d for s in shapes for d in s], i64),
        np.array([_eval.OPCODES.index(op)], u8), np.array([0, len(ins)], u32),
        np.array(ins, u32), np.array([0, 1], u32), np.array([out], u32), np.array([0, len(attrs)], u32),
        np.array(attrs, i64), np.array([], u8), np.arange(out, dtype=u32),
        np.array([out], u32))


F64 = ("float64", "float64")


@pytest.mark.parametrize("op, dtypes, shapes, attrs, msg", [
    ("LU", F64, [(3, 3), (3, 4)], [], "result size"),
    ("LU", F64, [(3, 4), (3, 6)], [], "square"),
    ("LU", F64, [(3, 3), (3, 5)], [1], "number of attributes"),
    ("LU", ("int32", "int32"), [(3, 3), (3, 5)], [], "not inexact"),
    ("Eigh", F64, [(3, 3), (3, 4)], [2], "flag"),
    ("Eigh", ("complex128", "complex128"), [(3, 3), (3,)], [0], "rank or dtype"),
    ("Eigh", F64, [(2, 3, 3), (3, 3, 4)], [1], "batch axes"),
    ("QR", F64, [(3, 2), (11,)], [0], "result size"),
    ("Geqrf", F64, [(3, 2), (7,)], [], "result size"),
    ("Geqrf", F64, [(3, 2), (8,)], [0], "number of attributes"),
    ("Geqrf", F64, [(2, 3, 2), (3, 8)], [], "batch axes"),
    ("Geqrf", ("float64", "float32"), [(3, 2), (8,)], [], "rank or dtype"),
    ("QR", F64, [(2 ** 40, 2 ** 40), (1,)], [1], "result size|more than 2\\^48"),
    ("SVD", F64, [(3, 2), (2,)], [0, 1], "result size"),
    ("SVD", F64, [(3, 2), (3,)], [0, 0], "result size"),
    ("SVD", ("complex64", "complex64"), [(3, 2), (2,)], [0, 0], "rank or dtype"),
    ("SVD", F64, [(3,), (3,)], [0, 0], "not a \\(batch of\\) matrices"),
])
def test_forged_factorisations_are_refused(op, dtypes, shapes, attrs, msg):
    with pytest.raises(ValueError, match=msg):
        _raw(dtypes, shapes, op, [0], attrs)


@pytest.mark.parametrize("dtypes, shapes, attrs, msg", [
    (("float64", "float64", "float64"), [(2,), (3, 2), (3, 2)], [0], "int32"),
    (("int32", "float64", "float64"), [(2, 2), (3, 2), (3, 2)], [0], "rank one less"),
    (("int32", "float64", "float64"), [(2, 3), (3, 3, 2), (3, 3, 2)], [0], "batch axes"),
    (("int32", "float64", "float64"), [(2,), (3, 2), (3, 3)], [0], "operand shape"),
    (("int32", "float64", "float64"), [(2,), (3, 2), (3, 2)], [], "number of attributes"),
])
def test_forged_lu_permutes_are_refused(dtypes, shapes, attrs, msg):
    with pytest.raises(ValueError, match=msg):
        _raw(dtypes, shapes, "LUPermute", [0, 1], attrs)


# ---- XLA: the spliced functions survive segments and a batch axis ----

def test_xla_segments_and_batch_axis_carry_the_spliced_functions():
    from tidu import xla

    def f(a, b):
        la = td.linalg
        w, v = la.eigh(a + td.transpose(a))
        return la.solve(a, b) + v @ b + la.qr(a)[1] @ b + la.svd(a)[0] @ b, w

    F = td.build(f, a=td.spec((3, 3), "float64"), b=td.spec((3, 2), "float64"))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    rng = np.random.default_rng(13)
    a, b = rand(rng, (4, 3, 3), "float64") + 2 * np.eye(3), rand(rng, (4, 3, 2), "float64")
    order = [{"a": 0, "b": 1}[k] for k in prog.inputs]
    runner = xla.XlaRunner(prog.executable, max_instructions=4)
    assert len(runner.segments) >= 3
    assert any("func.call" in s.text for s in runner.segments)
    for i in range(2):
        got = runner.run([(a[i], b[i])[j] for j in order])
        want = prog.eval([(a[i], b[i])[j] for j in order])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10)
    batched = xla.XlaRunner(prog.executable, batch=4)
    got = batched.run([(a, b)[j] for j in order])
    for i in range(4):
        want = prog.eval([(a[i], b[i])[j] for j in order])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g[i], w, rtol=1e-10, atol=1e-10)
