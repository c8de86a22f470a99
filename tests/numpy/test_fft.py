"""td.fft (ops/fft.py, numpy/fft.py) against jax.numpy.fft in x64: values on the interpreter and
XLA, first and second derivatives (grad, jvp, vjp) of real functions of the transforms, vmap and
jit, odd, even and prime lengths, n/s padding and truncation, every norm; the error cases."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value
from _support.values import value  # normal floats, complexes with normal real and imaginary parts

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

BACKENDS = ("cpu", "xla")
rng = np.random.default_rng(1234)


# (id, function name, input shape, input dtype, keyword arguments)
CASES = [
    ("fft-even", "fft", (3, 8), "complex128", {}),
    ("fft-odd-real-in", "fft", (2, 9), "float64", {}),
    ("fft-prime-ortho", "fft", (13,), "complex128", {"norm": "ortho"}),
    ("fft-pad-axis0", "fft", (5, 3), "complex128", {"n": 8, "axis": 0}),
    ("fft-trunc-forward", "fft", (2, 11), "complex128", {"n": 6, "norm": "forward"}),
    ("ifft-odd", "ifft", (4, 7), "complex128", {}),
    ("ifft-pad-ortho", "ifft", (4, 5), "complex128", {"n": 9, "norm": "ortho"}),
    ("rfft-even", "rfft", (3, 10), "float64", {}),
    ("rfft-prime-forward", "rfft", (17,), "float64", {"norm": "forward"}),
    ("rfft-trunc-axis0", "rfft", (9, 2), "float64", {"n": 5, "axis": 0}),
    ("irfft-default", "irfft", (2, 6), "complex128", {}),
    ("irfft-odd-n", "irfft", (2, 6), "complex128", {"n": 11}),
    ("irfft-trunc-ortho", "irfft", (3, 9), "complex128", {"n": 6, "norm": "ortho"}),
    ("hfft", "hfft", (2, 5), "complex128", {}),
    ("hfft-n", "hfft", (5,), "complex128", {"n": 7, "norm": "ortho"}),
    ("ihfft", "ihfft", (2, 7), "float64", {}),
    ("fft2", "fft2", (2, 4, 5), "complex128", {}),
    ("fft2-s-axes", "fft2", (3, 4, 5), "complex128", {"s": (6, 2), "axes": (0, 2)}),
    ("ifft2-forward", "ifft2", (3, 7), "complex128", {"norm": "forward"}),
    ("rfft2", "rfft2", (4, 6), "float64", {}),
    ("rfft2-odd-s", "rfft2", (2, 5, 7), "float64", {"s": (4, 9), "norm": "ortho"}),
    ("irfft2", "irfft2", (4, 5), "complex128", {}),
    ("irfft2-s", "irfft2", (3, 4), "complex128", {"s": (5, 7), "axes": (1, 0)}),
    ("fftn-all", "fftn", (2, 3, 5), "complex128", {}),
    ("fftn-4d", "fftn", (2, 3, 2, 3), "complex128", {}),
    ("ifftn-axes", "ifftn", (3, 4, 5), "complex128", {"axes": (2, 0), "norm": "ortho"}),
    ("rfftn", "rfftn", (3, 4, 6), "float64", {"axes": (0, 2)}),
    ("rfftn-4d", "rfftn", (2, 3, 2, 4), "float64", {}),
    ("irfftn", "irfftn", (3, 4, 3), "complex128", {"s": (3, 5, 4)}),
    ("irfftn-4d", "irfftn", (2, 2, 3, 3), "complex128", {}),
]
IDS = [c[0] for c in CASES]


def _fn(lib, name, kw):
    mod = jnp.fft if lib == "jax" else td.fft
    return lambda x: getattr(mod, name)(x, **kw)


def _weights(case):
    """Fixed complex weights of the output's shape (a real loss that sees every part)."""
    _, name, shape, dtype, kw = case
    out = jax.eval_shape(_fn("jax", name, kw), jax.ShapeDtypeStruct(shape, dtype))
    r = np.random.default_rng(7)
    return r.standard_normal(out.shape) + 1j * r.standard_normal(out.shape)


def _loss(lib, case):
    m = jnp if lib == "jax" else td
    f = _fn(lib, case[1], case[4])
    w = _weights(case)
    return lambda x: m.sum(m.real(f(x) * w)) + m.sum(m.abs(f(x * x)) ** 2) * 0.1


def _tidu_grad_of(jax_grad, dtype):
    """tidu's gradient in a complex input is conj(jax's) (docs/architecture.md)."""
    return np.conj(jax_grad) if np.dtype(dtype).kind == "c" else jax_grad


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_match_jax(case, backend):
    _, name, shape, dtype, kw = case
    x = value(rng, shape, dtype)
    want = _fn("jax", name, kw)(x)
    got = td.jit(_fn("td", name, kw), backend=backend)(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_match_jax(case, backend):
    x = value(rng, case[2], case[3])
    want = _tidu_grad_of(jax_value(jax.grad(_loss("jax", case)), x), case[3])
    got = td.jit(td.grad(_loss("td", case)), backend=backend)(x)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("case", CASES[::3], ids=IDS[::3])
def test_jvp_and_vjp_match_jax(case):
    _, name, shape, dtype, kw = case
    x, v = value(rng, shape, dtype), value(rng, shape, dtype)
    yw, tw = jax.jvp(_fn("jax", name, kw), (x,), (v,))
    yg, tg = td.jvp(_fn("td", name, kw), (x,), (v,))
    np.testing.assert_allclose(yg, yw, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(tg, tw, rtol=1e-10, atol=1e-10)
    ct = np.asarray(value(rng, np.shape(yw), np.asarray(yw).dtype))
    _, vjp_w = jax.vjp(_fn("jax", name, kw), x)
    _, vjp_g = td.vjp(_fn("td", name, kw), x)
    # jax's vjp is the plain transpose, tidu's the adjoint: conj on both sides
    (want,) = vjp_w(np.conj(ct) if ct.dtype.kind == "c" else ct)
    (got,) = vjp_g(ct)
    np.testing.assert_allclose(got, _tidu_grad_of(want, dtype), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", CASES[1::4], ids=IDS[1::4])
def test_second_order_matches_jax(case):
    x, v = value(rng, case[2], case[3]), value(rng, case[2], case[3])

    def hvp(lib):
        m, grad = (jnp, jax.grad) if lib == "jax" else (td, td.grad)
        g = grad(_loss(lib, case))
        vv = np.conj(v) if lib == "td" and v.dtype.kind == "c" else v
        return grad(lambda a: m.sum(m.real(g(a) * vv)))(x)

    want = _tidu_grad_of(hvp("jax"), case[3])
    got = hvp("td")
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES[::2], ids=IDS[::2])
def test_vmap_matches_jax(case, backend):
    _, name, shape, dtype, kw = case
    xs = value(rng, (3,) + shape, dtype)
    want = jax_value(jax.vmap(_fn("jax", name, kw)), xs)
    got = td.jit(td.vmap(_fn("td", name, kw)), backend=backend)(xs)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    gw = _tidu_grad_of(jax.grad(lambda a: jnp.sum(jnp.abs(jax.vmap(_fn("jax", name, kw))(a))
                                                  ** 2))(xs), dtype)
    gg = td.jit(td.grad(lambda a: td.sum(td.abs(td.vmap(_fn("td", name, kw))(a)) ** 2)),
                backend=backend)(xs)
    np.testing.assert_allclose(gg, gw, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "complex64"])
def test_single_precision(dtype, backend):
    x = value(rng, (4, 12), dtype)
    for name in ("fft", "ifft", "rfft", "irfft", "fft2"):
        if name == "rfft" and dtype == "complex64":
            continue
        want = getattr(jnp.fft, name)(x)
        got = td.jit(getattr(td.fft, name), backend=backend)(x)
        assert got.dtype == want.dtype, name
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_integer_input_promotes_as_jax():
    x = np.arange(6, dtype=np.int64)
    for name in ("fft", "rfft", "ihfft"):
        got = td.jit(getattr(td.fft, name))(x)
        want = getattr(jnp.fft, name)(x)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_large_lengths_match_numpy():
    """pocketfft's O(n log n) paths: a power of two, a large prime (Bluestein), a smooth size."""
    for n in (4096, 10007, 3 * 5 * 7 * 11 * 4):
        x = value(rng, (n,), "complex128")
        np.testing.assert_allclose(td.jit(td.fft.fft)(x), np.fft.fft(x), rtol=1e-9, atol=1e-9)
        r = x.real.copy()
        np.testing.assert_allclose(td.jit(td.fft.rfft)(r), np.fft.rfft(r), rtol=1e-9, atol=1e-9)


def test_freqs_and_shifts_match_jax():
    for n in (1, 6, 7):
        for d in (1.0, 0.25):
            np.testing.assert_allclose(td.fft.fftfreq(n, d), jnp.fft.fftfreq(n, d))
            np.testing.assert_allclose(td.fft.rfftfreq(n, d), jnp.fft.rfftfreq(n, d))
    assert td.fft.fftfreq(4, dtype="float32").dtype == np.float32
    got = td.jit(lambda d: td.fft.fftfreq(5, d))(np.float64(0.5))
    np.testing.assert_allclose(got, jnp.fft.fftfreq(5, 0.5))
    x = value(rng, (4, 5, 3), "float64")
    for axes in (None, 1, (0, 2)):
        np.testing.assert_array_equal(td.jit(lambda a: td.fft.fftshift(a, axes))(x),
                                      jnp.fft.fftshift(x, axes))
        np.testing.assert_array_equal(td.jit(lambda a: td.fft.ifftshift(a, axes))(x),
                                      jnp.fft.ifftshift(x, axes))


def test_saved_program_runs_in_the_loader(tmp_path):
    """A saved gradient through every fft_type loads (its Fft attributes validated) and runs."""
    x = value(rng, (3, 10), "float64")

    def f(a):
        y = td.fft.irfft(td.fft.rfft(a) * 2.0, n=10) + td.fft.ifft(td.fft.fft(a)).real
        return td.sum(y * y)

    prog = td.jit(td.grad(f)).lower(x)
    want = prog.program.eval([x])
    prog.save(tmp_path / "fft.tidu")
    got = td.load(tmp_path / "fft.tidu").eval([x])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[0], 2 * 9 * x, rtol=1e-10)


@pytest.mark.parametrize("call,exc,msg", [
    (lambda x: td.fft.fft(x, norm="bogus"), ValueError, "Invalid norm value bogus"),
    (lambda x: td.fft.fft(x, n=0), ValueError, "Shape should be positive"),
    (lambda x: td.fft.fft(x, axis=(0, 1)), ValueError, "does not support multiple axes"),
    (lambda x: td.fft.fftn(x, axes=(0, 0)), ValueError, "does not support repeated axes"),
    (lambda x: td.fft.fftn(x, axes=(0, -2)), ValueError, "does not support repeated axes"),
    (lambda x: td.fft.fftn(x, s=(2, 3), axes=(0,)), ValueError, "different lengths"),
    (lambda x: td.fft.fft2(x, axes=(0,)), ValueError, "only supports 2 axes"),
    (lambda x: td.fft.fft(x, axis=3), ValueError, "out of bounds"),
    (lambda x: td.fft.rfft(x * 1j), ValueError, "only real valued inputs"),
    (lambda x: td.fft.irfft(x[:, :1]), ValueError, "pass n"),
])
def test_errors(call, exc, msg):
    x = value(rng, (4, 5), "float64")
    with pytest.raises(exc, match=msg):
        td.jit(call)(x)
    with pytest.raises(ValueError, match="only takes an int"):
        td.fft.fftfreq([3])
    with pytest.raises(ValueError, match="unknown fft_type"):
        td.ops.Fft("DCT", (3,))


def _fft_file(xdt, xshape, odt, oshape, attrs) -> bytes:
    from _support import forge

    a = forge.Asm()
    x = a.input(xdt, xshape)
    y = a.slot(odt, oshape)
    a.instr("Fft", [x], y, attrs)
    a.outputs.append(y)
    return a.prog().to_bytes()


def test_file_validation_of_fft_attributes():
    """The C++ loader checks an Fft instruction's type, lengths, shapes and dtypes."""
    from tidu import _eval

    ok = _fft_file("complex128", (2, 8), "complex128", (2, 8), [0, 1, 8])
    x = value(rng, (2, 8), "complex128")
    np.testing.assert_allclose(_eval.Program(ok).run([x])[0], np.fft.fft(x), atol=1e-12)
    r = _eval.Program(_fft_file("float64", (3, 7), "complex128", (3, 4), [2, 1, 7]))
    xr = value(rng, (3, 7), "float64")
    np.testing.assert_allclose(r.run([xr])[0], np.fft.rfft(xr), atol=1e-12)
    bad = [
        (("complex128", (2, 8), "complex128", (2, 8), [4, 1, 8]), "fft_type"),
        (("complex128", (2, 8), "complex128", (2, 8), [0, 1, 7]), "fft_lengths"),
        (("complex128", (2, 8), "complex128", (2, 8), [0, 2, 8]), "attribute"),
        (("complex128", (2, 2, 2, 2), "complex128", (2, 2, 2, 2), [0, 4, 2, 2, 2, 2]),
         "1 to 3"),
        (("float64", (2, 8), "complex128", (2, 8), [0, 1, 8]), "dtypes"),
        (("float64", (2, 8), "complex128", (2, 8), [2, 1, 8]), "fft_lengths"),
        (("complex128", (2, 5), "float32", (2, 8), [3, 1, 8]), "dtypes"),
        (("complex128", (3, 5), "float64", (2, 8), [3, 1, 8]), "batch axes"),
        (("complex128", (2, 8), "complex128", (2, 8), [1, 1, 0]), "attribute|positive"),
    ]
    for args, msg in bad:
        with pytest.raises(ValueError, match=msg):
            _eval.Program(_fft_file(*args))
