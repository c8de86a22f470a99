"""td.scipy.signal (numpy/scipy/signal.py) against jax.scipy.signal in x64: values on the
interpreter and XLA, first derivatives of both operands on both backends, second derivatives,
vmap; the errors jax raises."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import jax.scipy.signal as jsig  # noqa: E402

jax.config.update("jax_enable_x64", True)

BACKENDS = ("cpu", "xla")
MODES = ("full", "same", "valid")

# (in1 shape, in2 shape): in2 smaller, in1 smaller (jax swaps them), equal, 1-D/2-D/3-D
ND_SHAPES = [((9,), (4,)), ((3,), (7,)), ((5,), (5,)), ((6, 7), (3, 2)), ((2, 3), (4, 5)),
             ((4, 5, 3), (2, 3, 2))]
SHAPES_2D = [((6, 7), (3, 2)), ((2, 3), (4, 5)), ((4, 4), (4, 4)), ((5, 3), (5, 3)),
             ((3, 6), (3, 2))]


def _ops(shapes, dtype="float64", seed=0):
    r = np.random.default_rng(seed)
    out = []
    for s in shapes:
        x = r.standard_normal(s)
        if np.dtype(dtype).kind == "c":
            x = x + 1j * r.standard_normal(s)
        out.append(x.astype(dtype))
    return out


def _td(name):
    return getattr(td.scipy.signal, name)


_JAX_REFS = {}


def _once(test, case, compute):
    """compute() (a jax reference) once per test and case: both backends' rows compare with the
    same arrays, where each jax.jit of a new function was one more compile."""
    key = (test, id(case))
    if key not in _JAX_REFS:
        _JAX_REFS[key] = (case, compute())
    kept, value = _JAX_REFS[key]
    assert kept is case
    return value


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("method", ["direct", "fft"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", ND_SHAPES, ids=str)
@pytest.mark.parametrize("name", ["convolve", "correlate"])
def test_nd_values_match_jax(name, shapes, mode, method, backend):
    a, v = _ops(shapes, "complex128" if name == "correlate" else "float64")
    want = getattr(jsig, name)(a, v, mode, method=method)
    got = td.jit(lambda p, q: _td(name)(p, q, mode, method=method), backend=backend)(a, v)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", SHAPES_2D, ids=str)
@pytest.mark.parametrize("name", ["convolve2d", "correlate2d"])
def test_2d_values_match_jax(name, shapes, mode, backend):
    a, v = _ops(shapes, "complex128", seed=1)
    want = getattr(jsig, name)(a, v, mode)
    got = td.jit(lambda p, q: _td(name)(p, q, mode), backend=backend)(a, v)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", [((8, 5), (3, 4), None), ((4, 9), (4, 3), 1),
                                  ((4, 9), (4, 3), (-1,)), ((3, 6, 5), (3, 2, 2), (1, 2)),
                                  ((5,), (1,), None)], ids=str)
def test_fftconvolve_matches_jax(case, mode, backend):
    s1, s2, axes = case
    for dtype in ("float64", "complex128"):
        a, v = _ops((s1, s2), dtype, seed=2)
        want = jsig.fftconvolve(a, v, mode, axes=axes)
        got = td.jit(lambda p, q: td.scipy.signal.fftconvolve(p, q, mode, axes=axes),
                     backend=backend)(a, v)
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_inputs_are_computed_in_floating_point(backend):
    a = np.array([[1, 2, 3], [4, 5, 6]], np.int64)
    v = np.array([[1, -1], [2, 0]], np.int64)
    for name in ("convolve", "correlate", "convolve2d", "correlate2d"):
        want = np.asarray(getattr(jsig, name)(a, v))
        got = td.jit(lambda p, q: _td(name)(p, q), backend=backend)(a, v)
        assert got.dtype == np.float64 and want.dtype == np.float64
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", [("constant", -1, 0), ("linear", -1, 0), ("linear", 0, 0),
                                  ("linear", 1, [3, 7]), ("linear", -1, 5), ("constant", 0, 0)],
                         ids=str)
def test_detrend_matches_jax(case, backend):
    typ, axis, bp = case
    x = np.random.default_rng(3).standard_normal((10, 11)) + np.arange(11) * 0.7
    want = jsig.detrend(x, axis=axis, type=typ, bp=bp)
    got = td.jit(lambda d: td.scipy.signal.detrend(d, axis=axis, type=typ, bp=bp),
                 backend=backend)(x)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-10)


GRAD_CASES = [("convolve", ((9,), (4,)), "same", "direct"),
              ("convolve", ((3,), (7,)), "full", "direct"),
              ("correlate", ((6, 7), (3, 2)), "valid", "direct"),
              ("correlate", ((2, 3), (4, 5)), "same", "fft"),
              ("convolve", ((6, 7), (3, 2)), "full", "fft"),
              ("convolve2d", ((6, 7), (3, 2)), "same", None),
              ("correlate2d", ((2, 3), (4, 5)), "full", None),
              ("correlate2d", ((3, 6), (3, 2)), "valid", None),
              ("fftconvolve", ((8, 5), (3, 4)), "same", None)]


def _call(lib, name, mode, method):
    mod = jsig if lib == "jax" else td.scipy.signal
    fn = getattr(mod, name)
    if method is None:
        return lambda p, q: fn(p, q, mode)
    return lambda p, q: fn(p, q, mode, method=method)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", GRAD_CASES, ids=str)
def test_gradients_match_jax(case, backend):
    name, shapes, mode, method = case
    a, v = _ops(shapes, seed=4)
    fj, ft = _call("jax", name, mode, method), _call("td", name, mode, method)
    want = jax_value(jax.grad(lambda p, q: jnp.sum(jnp.sin(fj(p, q))), argnums=(0, 1)), a, v)
    got = td.jit(td.grad(lambda p, q: td.sum(td.sin(ft(p, q))), argnums=(0, 1)),
                 backend=backend)(a, v)
    for g, j in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(j), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", GRAD_CASES[::2], ids=str)
def test_second_derivatives_match_jax(case):
    name, shapes, mode, method = case
    a, v = _ops(shapes, seed=5)
    r = np.random.default_rng(6)
    va, vv = r.standard_normal(a.shape), r.standard_normal(v.shape)

    def hvp(lib):
        m, grad = (jnp, jax.grad) if lib == "jax" else (td, td.grad)
        f = _call(lib, name, mode, method)
        g = grad(lambda p, q: m.sum(m.sin(f(p, q))), argnums=(0, 1))
        return grad(lambda p, q: m.sum(g(p, q)[0] * va) + m.sum(g(p, q)[1] * vv),
                    argnums=(0, 1))

    want = hvp("jax")(a, v)
    got = td.jit(hvp("td"))(a, v)
    for g, j in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(j), rtol=1e-9, atol=1e-9)


def test_detrend_derivatives_match_jax():
    x = np.random.default_rng(7).standard_normal((3, 12))
    v = np.random.default_rng(8).standard_normal((3, 12))
    fj = lambda d: jnp.sum(jnp.sin(jsig.detrend(d, bp=[4])) * v)  # noqa: E731
    ft = lambda d: td.sum(td.sin(td.scipy.signal.detrend(d, bp=[4])) * v)  # noqa: E731
    np.testing.assert_allclose(td.jit(td.grad(ft))(x), jax.grad(fj)(x), rtol=1e-10, atol=1e-10)
    hj = jax.hessian(lambda d: jnp.sum(jnp.sin(jsig.detrend(d, bp=[4])) * v[0]))(x[0])
    ht = td.jit(td.hessian(lambda d: td.sum(td.sin(td.scipy.signal.detrend(d, bp=[4])) * v[0])))(
        x[0])
    np.testing.assert_allclose(ht, np.asarray(hj), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("axes", [(0, 0), (0, None), (None, 0)])
@pytest.mark.parametrize("name", ["convolve", "correlate2d", "fftconvolve"])
def test_vmap_matches_jax(name, axes):
    r = np.random.default_rng(9)
    a, v = r.standard_normal((6, 7)), r.standard_normal((3, 2))
    a = np.stack([a, r.standard_normal(a.shape)]) if axes[0] == 0 else a
    v = np.stack([v, r.standard_normal(v.shape)]) if axes[1] == 0 else v
    want = jax.vmap(lambda p, q: getattr(jsig, name)(p, q, "same"), in_axes=axes)(a, v)
    got = td.jit(td.vmap(lambda p, q: _td(name)(p, q, "same"), in_axes=axes))(a, v)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("call,err,match", [
    (lambda a, v: td.scipy.signal.convolve2d(a, v, boundary="wrap"), NotImplementedError,
     "boundary='fill', fillvalue=0"),
    (lambda a, v: td.scipy.signal.correlate2d(a, v, fillvalue=1.5), NotImplementedError,
     "fillvalue=0"),
    (lambda a, v: td.scipy.signal.convolve(a, v, "middle"), ValueError, "mode 'middle'"),
    (lambda a, v: td.scipy.signal.convolve(a, v, method="magic"), ValueError, "method='magic'"),
    (lambda a, v: td.scipy.signal.convolve(a, a.T[:, :1]), ValueError,
     "smaller than the other in every dimension"),
    (lambda a, v: td.scipy.signal.convolve(a, v[0]), ValueError, "same number of dimensions"),
    (lambda a, v: td.scipy.signal.convolve2d(a[0], v[0]), ValueError, "2-dimensional"),
    (lambda a, v: td.scipy.signal.fftconvolve(a, v, axes=0), ValueError, "mapped axes"),
    (lambda a, v: td.scipy.signal.detrend(a, type="quadratic"), ValueError, "'quadratic'"),
    (lambda a, v: td.scipy.signal.detrend(a, bp=9), ValueError, "breakpoints"),
])
def test_bad_arguments_name_the_problem(call, err, match):
    a, v = np.zeros((4, 5)), np.zeros((2, 3))
    with pytest.raises(err, match=match):
        td.jit(call)(a, v)


def test_names_are_jax_names():
    """Every td.scipy.signal name is a jax.scipy.signal name with jax's parameters."""
    import inspect
    for name in td.scipy.signal.__all__:
        want = list(inspect.signature(getattr(jsig, name)).parameters)
        got = list(inspect.signature(getattr(td.scipy.signal, name)).parameters)
        assert got == want, name


# ---- stft, csd, welch ----

SPECTRAL = [
    ("welch", 1, dict(nperseg=32)),
    ("welch", 1, dict(nperseg=30, noverlap=10, nfft=40, detrend="linear", average="median")),
    ("welch", 1, dict(nperseg=16, axis=0, scaling="spectrum")),
    ("csd", 2, dict(nperseg=20)),
    ("csd", 2, dict(nperseg=20, average="median", return_onesided=False)),
    ("stft", 1, dict(nperseg=32)),
    ("stft", 1, dict(nperseg=25, noverlap=5, boundary="odd", padded=False, detrend="constant")),
    ("stft", 1, dict(nperseg=16, boundary="even", fs=3.0)),
    ("stft", 1, dict(nperseg=16, boundary="constant", window=np.hamming(16))),
]


def _signals(name, kw, seed=10):
    r = np.random.default_rng(seed)
    x, y = r.standard_normal((2, 100)), r.standard_normal((2, 90))
    if kw.get("axis") == 0:
        x = x.T.copy()
    return (x,) if name != "csd" else (x, y)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", SPECTRAL, ids=str)
def test_spectral_values_match_jax(case, backend):
    name, _, kw = case
    args = _signals(name, kw)
    want = getattr(jsig, name)(*args, **kw)
    got = td.jit(lambda *a: getattr(td.scipy.signal, name)(*a, **kw), backend=backend)(*args)
    assert len(got) == len(want)
    for g, j in zip(got, want):
        assert np.shape(g) == j.shape and np.asarray(g).dtype == j.dtype
        np.testing.assert_allclose(g, np.asarray(j), rtol=1e-10, atol=1e-12)


def _spectral_loss(lib, name, kw):
    m, mod = (jnp, jsig) if lib == "jax" else (td, td.scipy.signal)

    def loss(*a):
        out = getattr(mod, name)(*a, **kw)[-1]
        return m.sum(m.sin(m.real(out))) + m.sum(m.imag(out) ** 2)
    return loss


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", SPECTRAL[::2] + [SPECTRAL[3]], ids=str)
def test_spectral_gradients_match_jax(case, backend):
    name, nargs, kw = case
    args = _signals(name, kw, seed=11)
    argnums = tuple(range(nargs))
    want = _once("spectral_gradients", case, lambda: jax_value(
        jax.grad(_spectral_loss("jax", name, kw), argnums=argnums), *args))
    got = td.jit(td.grad(_spectral_loss("td", name, kw), argnums=argnums), backend=backend)(*args)
    for g, j in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(j), rtol=1e-9, atol=1e-10)


def test_spectral_second_derivatives_match_jax():
    x = np.random.default_rng(12).standard_normal(40)
    kw = dict(nperseg=16)
    hj = jax_value(jax.hessian(_spectral_loss("jax", "welch", kw)), x)
    ht = td.jit(td.hessian(_spectral_loss("td", "welch", kw)))(x)
    np.testing.assert_allclose(ht, np.asarray(hj), rtol=1e-9, atol=1e-10)


ISTFT = [(dict(nperseg=32), dict(nperseg=32)),
         (dict(nperseg=24, noverlap=6), dict(nperseg=24, noverlap=6)),
         (dict(nperseg=16, return_onesided=False), dict(nperseg=16, input_onesided=False)),
         (dict(nperseg=20, nfft=24), dict(nperseg=20, nfft=24, boundary=False))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ISTFT, ids=str)
def test_istft_matches_jax(case, backend):
    """Values of jax's istft (of jax's stft of a signal), and the gradient of a loss of it."""
    skw, ikw = case
    x = np.random.default_rng(13).standard_normal((2, 100))
    z = np.asarray(jsig.stft(x, **skw)[2])
    want = jsig.istft(z, **ikw)
    got = td.jit(lambda a: td.scipy.signal.istft(a, **ikw), backend=backend)(z)
    for g, j in zip(got, want):
        assert np.shape(g) == j.shape and np.asarray(g).dtype == j.dtype
        np.testing.assert_allclose(g, np.asarray(j), rtol=1e-10, atol=1e-12)
    zr = z.real.copy()  # the gradient in a real input (tidu's complex convention differs)
    gj = _once("istft_gradient", case, lambda: jax_value(
        jax.grad(lambda a: jnp.sum(jnp.sin(jnp.real(jsig.istft(a + 0j, **ikw)[1])))), zr))
    gt = td.jit(td.grad(lambda a: td.sum(td.sin(td.real(td.scipy.signal.istft(a, **ikw)[1])))),
                backend=backend)(zr)
    np.testing.assert_allclose(gt, np.asarray(gj), rtol=1e-10, atol=1e-12)
