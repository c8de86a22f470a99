"""td.scipy.linalg.schur (the Schur primitive, LAPACK gees), rsf2csf and sqrtm against
jax.scipy.linalg in x64: values on both backends (every inexact dtype, output='real' and
'complex', batch axes), the decomposition's invariants, the kernel against scipy, vmap, NaN
input, jax's lack of a derivative (a clear error), bad input and forged instructions."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from tidu import _eval
from tidu import ops as P
from _support.compare import close_for, mH, rand_inexact
from _support.blas import without_lapack
from _support.values import INEXACT, one_op_graph

jax = pytest.importorskip("jax")
import jax.scipy.linalg as jsl  # noqa: E402

jax.config.update("jax_enable_x64", True)
BACKENDS = ("cpu", "xla")
L = td.scipy.linalg




def _check_schur(a, t, z, dtype, complex_form):
    n = a.shape[-1]
    close_for(z @ t @ mH(z), a, dtype, 10)
    close_for(mH(z) @ z, np.broadcast_to(np.eye(n), z.shape), dtype, 10)
    below = np.tril(np.ones((n, n), bool), -1 if complex_form else -2)
    assert np.all(t[..., below] == 0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INEXACT)
@pytest.mark.parametrize("output", ["real", "complex"])
@pytest.mark.parametrize("shape", [(5, 5), (2, 3, 4, 4), (1, 1)])
def test_schur_matches_jax(backend, dtype, output, shape):
    a = rand_inexact(np.random.default_rng(0), shape, dtype)
    t, z = td.jit(lambda a: L.schur(a, output=output), backend=backend)(a)
    cplx = output == "complex" or np.dtype(dtype).kind == "c"
    want_dt = {"float32": np.complex64, "float64": np.complex128}.get(dtype, dtype) \
        if output == "complex" else dtype
    assert t.dtype == z.dtype == np.dtype(want_dt)
    _check_schur(a, t, z, dtype, cplx)
    if len(shape) == 2:  # jax's schur takes one matrix
        jt, jz = jsl.schur(a, output=output)
        # the same LAPACK routine: the same T and Z, up to a phase per Schur vector
        ph = np.sum(np.conj(np.asarray(jz)) * z, axis=-2)
        ph = ph / np.abs(ph)
        close_for(z, np.asarray(jz) * ph, dtype, 100)
        close_for(t, np.conj(ph)[:, None] * np.asarray(jt) * ph[None, :], dtype, 100)


def test_real_schur_has_a_block_per_complex_pair():
    rot = np.array([[0.0, -2.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    q, _ = np.linalg.qr(np.random.default_rng(1).standard_normal((3, 3)))
    a = q @ rot @ q.T
    t, z = td.jit(L.schur)(a)
    _check_schur(a, t, z, "float64", False)
    w = np.sort_complex(np.linalg.eigvals(t))
    np.testing.assert_allclose(w, np.sort_complex(np.array([-2j, 2j, 3.0])), atol=1e-12)


@pytest.mark.parametrize("dtype", INEXACT)
def test_kernel_matches_scipy_and_needs_lapack(dtype):
    x = rand_inexact(np.random.default_rng(5), (2, 4, 4), dtype)
    prog = td.compile(one_op_graph(P.Schur(), [td.aval(x.shape, x.dtype)]))
    (got,) = prog.eval([x])
    ref = P.Schur().impl(x)
    for k in range(2):  # up to a phase per Schur vector
        z, zr = got[k, :, 4:], ref[k, :, 4:]
        ph = np.sum(np.conj(zr) * z, axis=0)
        ph = ph / np.abs(ph)
        close_for(z, zr * ph, dtype, 100)
        close_for(got[k, :, :4], np.conj(ph)[:, None] * ref[k, :, :4] * ph[None, :], dtype, 100)
    with without_lapack(), pytest.raises(RuntimeError, match=r"Schur \(\?gees\) needs LAPACK"):
        prog.eval([x])


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_finite_input_gives_nan(backend):
    a = np.eye(3)
    a[1, 2] = np.nan
    t, z = td.jit(L.schur, backend="cpu")(np.stack([a, np.eye(3)]))
    assert np.isnan(t[0]).all() and np.isnan(z[0]).all()
    np.testing.assert_allclose(t[1], np.eye(3))
    del backend


def test_vmap_matches_the_batch_axis():
    a = rand_inexact(np.random.default_rng(3), (3, 4, 4), "float64")
    t, z = td.jit(td.vmap(L.schur))(a)
    bt, bz = td.jit(L.schur)(a)
    np.testing.assert_array_equal(t, bt)
    np.testing.assert_array_equal(z, bz)
    t2, _ = td.jit(td.vmap(L.schur, in_axes=1))(np.swapaxes(a, 0, 1))
    np.testing.assert_array_equal(t2, bt)


def test_no_derivative_as_jax():
    a = rand_inexact(np.random.default_rng(2), (3, 3), "float64")
    with pytest.raises(NotImplementedError, match="Schur.*no derivative"):
        td.grad(lambda a: L.schur(a)[0].sum())(a)
    with pytest.raises(NotImplementedError, match="Schur.*no derivative"):
        td.jvp(lambda a: L.schur(a)[1], (a,), (a,))


def test_bad_input_fails_with_clear_errors():
    with pytest.raises(ValueError, match="output must be 'real' or 'complex'"):
        L.schur(np.eye(2), output="upper")
    with pytest.raises(ValueError, match="not a square"):
        td.jit(L.schur)(np.ones((2, 3)))
    with pytest.raises(ValueError, match="'T' must be square"):
        td.jit(L.rsf2csf)(np.ones((2, 3)), np.eye(2))
    with pytest.raises(ValueError, match="shapes must match"):
        td.jit(L.rsf2csf)(np.eye(3), np.eye(2))
    with pytest.raises(NotImplementedError, match="blocksize"):
        L.sqrtm(np.eye(2), blocksize=2)


# ---- rsf2csf ----

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rsf2csf_matches_jax(backend, dtype):
    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 6):
        a = rand_inexact(rng, (n, n), dtype)
        jt, jz = (np.asarray(v) for v in jsl.schur(a))
        t, z = td.jit(L.rsf2csf, backend=backend)(jt, jz)
        wt, wz = jsl.rsf2csf(jt, jz)
        assert t.dtype == np.asarray(wt).dtype
        close_for(t, wt, dtype, 10)
        close_for(z, wz, dtype, 10)
        _check_schur(a, t, z, dtype, True)
    # batch axes broadcast, as jax's
    a = rand_inexact(rng, (2, 4, 4), "float64")
    ts, zs = zip(*[(np.asarray(u) for u in jsl.schur(m)) for m in a])
    t, z = td.jit(L.rsf2csf)(np.stack(ts), np.stack(zs))
    for k in range(2):
        wt, wz = jsl.rsf2csf(ts[k], zs[k])
        close_for(t[k], wt, "float64")
        close_for(z[k], wz, "float64")


# ---- sqrtm ----

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INEXACT)
def test_sqrtm_matches_jax(backend, dtype):
    rng = np.random.default_rng(11)
    for a in (rand_inexact(rng, (5, 5), dtype), np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 2.0],
                                                  [3.0, 2.0, 1.0]], dtype)):
        got = td.jit(L.sqrtm, backend=backend)(a)
        want = np.asarray(jsl.sqrtm(a))
        assert got.dtype == want.dtype
        close_for(got, want, dtype, 10)
        close_for(got @ got, a, dtype, 10)
    eye = np.eye(3)
    np.testing.assert_allclose(td.jit(L.sqrtm)(4 * eye), 2 * eye, atol=1e-15)


# ---- forged instructions (the file format's validation) ----

def _raw(slot_dtype, shapes, attrs):
    u8, u32, i64 = np.uint8, np.uint32, np.int64
    return _eval.Program(
        np.array([_eval.DTYPES.index(d) for d in slot_dtype], u8),
        np.array([len(s) for s in shapes], u32), np.array([d for s in shapes for d in s], i64),
        np.array([_eval.OPCODES.index("Schur")], u8), np.array([0, 1], u32),
        np.array([0], u32), np.array([0, 1], u32), np.array([1], u32),
        np.array([0, len(attrs)], u32), np.array(attrs, i64), np.array([], u8),
        np.arange(1, dtype=u32), np.array([1], u32))


@pytest.mark.parametrize("dtypes, shapes, attrs, msg", [
    (("float64", "float64"), [(3, 3), (3, 6)], [0], "number of attributes"),
    (("float64", "complex128"), [(3, 3), (3, 6)], [], "rank or dtype"),
    (("float64", "float64"), [(3, 3), (3, 5)], [], "result size"),
    (("float64", "float64"), [(3, 3), (2, 6)], [], "result size"),
    (("float64", "float64"), [(3, 4), (3, 8)], [], "square"),
    (("int32", "int32"), [(3, 3), (3, 6)], [], "not inexact"),
    (("float64", "float64"), [(2, 3, 3), (3, 3, 6)], [], "batch axes"),
])
def test_forged_instructions_are_refused(dtypes, shapes, attrs, msg):
    with pytest.raises(ValueError, match=msg):
        _raw(dtypes, shapes, attrs)
    assert _raw(("float64", "float64"), [(3, 3), (3, 6)], []) is not None


# ---- funm and solve_sylvester ----

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INEXACT)
def test_funm_matches_jax(backend, dtype):
    rng = np.random.default_rng(13)
    a = rand_inexact(rng, (5, 5), dtype)
    for fn in ("exp", "sin"):
        got = td.jit(lambda a, fn=fn: L.funm(a, getattr(td, fn)), backend=backend)(a)
        want = np.asarray(jsl.funm(a, getattr(jax.numpy, fn)))
        assert got.dtype == want.dtype
        close_for(got, want, dtype, 100)
    close_for(td.jit(lambda a: L.funm(a, td.exp))(a), np.asarray(jsl.expm(a)), dtype, 100)
    f, err = td.jit(lambda a: L.funm(a, td.exp, disp=False), backend=backend)(a)
    jf, jerr = jsl.funm(a, jax.numpy.exp, disp=False)
    close_for(f, jf, dtype, 100)
    np.testing.assert_allclose(err, np.asarray(jerr), rtol=1e-3)
    with pytest.raises(ValueError, match="square"):
        td.jit(lambda a: L.funm(a, td.exp))(np.ones((2, 2, 2)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INEXACT)
@pytest.mark.parametrize("method", ["schur", "eigen"])
def test_solve_sylvester_matches_jax(backend, dtype, method):
    rng = np.random.default_rng(17)
    a, b, c = rand_inexact(rng, (4, 4), dtype), rand_inexact(rng, (3, 3), dtype), rand_inexact(rng, (4, 3), dtype)
    a = a + 4 * np.eye(4, dtype=dtype)  # keep eig(a) + eig(b) away from 0
    x = td.jit(lambda a, b, c: L.solve_sylvester(a, b, c, method=method), backend=backend)(a, b,
                                                                                          c)
    want = np.asarray(jsl.solve_sylvester(a, b, c, method=method))
    assert x.dtype == want.dtype
    close_for(x, want, dtype, 100)
    close_for(a @ x + x @ b, c, dtype, 100)


def test_solve_sylvester_near_singular_gives_nan_and_bad_input():
    a, b = np.diag([1.0, 2.0]), np.diag([-1.0, 3.0])
    assert np.isnan(td.jit(L.solve_sylvester)(a, b, np.ones((2, 2)))).all()
    with pytest.raises(ValueError, match="Unrecognized method"):
        td.jit(lambda a: L.solve_sylvester(a, a, a, method="qr"))(np.eye(2))
    with pytest.raises(ValueError, match="must be"):
        td.jit(L.solve_sylvester)(np.eye(2), np.eye(3), np.ones((3, 2)))


# ---- hessenberg (the Hessenberg primitive, LAPACK gehrd + orghr) ----

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INEXACT)
@pytest.mark.parametrize("shape", [(5, 5), (2, 3, 4, 4), (1, 1), (0, 0)])
def test_hessenberg_matches_jax(backend, dtype, shape):
    a = rand_inexact(np.random.default_rng(19), shape, dtype)
    h, q = td.jit(lambda a: L.hessenberg(a, calc_q=True), backend=backend)(a)
    assert h.dtype == q.dtype == np.dtype(dtype) and h.shape == q.shape == shape
    jh, jq = jsl.hessenberg(a, calc_q=True)
    close_for(h, jh, dtype, 10)  # the same reflectors: the same H and Q
    close_for(q, jq, dtype, 10)
    n = shape[-1]
    close_for(q @ h @ mH(q), a, dtype, 10)
    assert np.all(h[..., np.tril(np.ones((n, n), bool), -2)] == 0)
    close_for(td.jit(L.hessenberg, backend=backend)(a), jh, dtype, 10)


def test_hessenberg_kernel_vmap_and_no_derivative():
    x = rand_inexact(np.random.default_rng(23), (2, 4, 4), "float64")
    prog = td.compile(one_op_graph(P.Hessenberg(), [td.aval(x.shape, x.dtype)]))
    (got,) = prog.eval([x])
    close_for(got, P.Hessenberg().impl(x), "float64")
    h = td.jit(td.vmap(L.hessenberg))(x)
    np.testing.assert_array_equal(h, td.jit(L.hessenberg)(x))
    with pytest.raises(NotImplementedError, match="Hessenberg.*no derivative"):
        td.grad(lambda a: L.hessenberg(a).sum())(x[0])
    with without_lapack(), pytest.raises(RuntimeError, match=r"Hessenberg \(\?gehrd\) needs LAPACK"):
        prog.eval([x])
