"""jax's result dtypes and weak types, table-driven against jax in x64 (issue #32):

- float functions of bool and integer inputs (elementwise math, `/`, mean/var/std, linalg, fft,
  scipy.special, nn, statistics) give jax's ``to_inexact_dtype``: float32 for bool and integers
  of up to 32 bits, float64 for 64-bit integers;
- structural functions, contractions, constructors, loops and branches keep a weakly typed
  value weak where jax does (and make it strong where jax does: reductions, ``astype``, a
  ``dtype`` argument);
- ``td.disable_jit``.

Each table is one traced function per input (every entry an output of it), run under
``td.jit`` on both backends; what a traced value's dtype and weak_type were is recorded while
tracing and compared with ``jax.eval_shape``'s."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

BACKENDS = ("cpu", "xla")
NONFLOAT = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
F32 = np.ones(2, np.float32)


def _inexact_fns(np_, sp, nn):
    """name -> fn(x) for x a 1-D array of 4 elements (values 1, 2, 1, 3 or bools)."""
    sq = lambda x: np_.reshape(x, (2, 2))  # noqa: E731
    return {
        "sin": np_.sin, "cos": np_.cos, "tanh": np_.tanh, "sqrt": np_.sqrt, "exp": np_.exp,
        "log": np_.log, "log1p": np_.log1p, "expm1": np_.expm1, "tan": np_.tan,
        "arcsinh": np_.arcsinh, "arctan": np_.arctan, "exp2": np_.exp2, "log2": np_.log2,
        "log10": np_.log10, "deg2rad": np_.deg2rad, "rad2deg": np_.rad2deg,
        "reciprocal": np_.reciprocal, "cbrt": np_.cbrt, "fabs": np_.fabs,
        "truediv": lambda x: x / x, "truediv_int": lambda x: x / 2,
        "rtruediv_int": lambda x: 2 / x, "true_divide": lambda x: np_.true_divide(x, x),
        "arctan2": lambda x: np_.arctan2(x, x), "hypot": lambda x: np_.hypot(x, x),
        "logaddexp": lambda x: np_.logaddexp(x, x), "float_power": lambda x: np_.float_power(x, x),
        "modf": lambda x: np_.modf(x)[0], "sinc": np_.sinc, "angle": np_.angle,
        "mean": np_.mean, "var": np_.var, "std": np_.std, "average": np_.average,
        "mean_where": lambda x: np_.mean(x, where=x > 0), "median": np_.median,
        "quantile": lambda x: np_.quantile(x, 0.3), "nanmean": np_.nanmean,
        "nanvar": np_.nanvar, "trapezoid": np_.trapezoid, "gradient": np_.gradient,
        "convolve": lambda x: np_.convolve(x, x), "cov": np_.cov, "corrcoef": np_.corrcoef,
        "interp": lambda x: np_.interp(x, np_.arange(4), x),
        "norm": np_.linalg.norm, "inv": lambda x: np_.linalg.inv(sq(x) + np_.eye(2, dtype=x.dtype)),
        "det": lambda x: np_.linalg.det(sq(x)), "slogdet": lambda x: np_.linalg.slogdet(sq(x))[1],
        "fft": np_.fft.fft, "rfft": np_.fft.rfft, "ifft": np_.fft.ifft,
        "erf": sp.erf, "gammaln": sp.gammaln, "expit": sp.expit, "logsumexp": sp.logsumexp,
        "xlogy": lambda x: sp.xlogy(x, x), "ndtr": sp.ndtr,
        "softmax": nn.softmax, "log_softmax": nn.log_softmax, "gelu": nn.gelu, "silu": nn.silu,
        "softplus": nn.softplus,
    }


J_INEXACT = _inexact_fns(jnp, jax.scipy.special, jax.nn)
T_INEXACT = _inexact_fns(td, td.scipy.special, td.nn)


def _probe(fns: dict, box: dict):
    """A function of x returning every fn(x), recording each result's (dtype, weak) in box."""
    def g(x):
        outs = []
        for name, f in fns.items():
            y = f(x)
            box[name] = (np.dtype(y.dtype), bool(getattr(y, "weak_type", False)))
            outs.append(y)
        return outs
    return g


def _input(dt):
    return np.array([True, False, True, True]) if dt == "bool" else np.array([1, 2, 1, 3], dt)


def _jax_takes(f, x) -> bool:
    """jax accepts f(x) (it refuses e.g. ndtr of integers): only then is there a dtype to match."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy's, inside jax's reductions
            jax.eval_shape(f, x)
    except TypeError:
        return False
    return True


@pytest.mark.parametrize("dt", NONFLOAT)
def test_float_functions_of_integers_have_jax_dtype(dt):
    """Every float-valued function of a bool or integer array: jax's dtype (float32 for up to
    32 bits, float64 for 64-bit integers) and values, on both backends."""
    x = _input(dt)
    fns_j = {k: v for k, v in J_INEXACT.items() if _jax_takes(v, x)}
    fns_t = {k: T_INEXACT[k] for k in fns_j}
    assert len(fns_t) > 50
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = jax.jit(_probe(fns_j, {}))(x)
        wshape = jax.eval_shape(_probe(fns_j, {}), x)
    wrong = []
    for backend in BACKENDS if dt in ("bool", "int32", "uint64") else ("cpu",):
        tbox: dict = {}
        got = td.jit(_probe(fns_t, tbox), backend=backend)(x)
        for name, g, w, ws in zip(fns_t, got, want, wshape):
            if (tbox[name][0], np.dtype(g.dtype)) != (ws.dtype, ws.dtype):
                wrong.append(f"{name} {backend}: tidu {tbox[name][0]}/{g.dtype}, jax {ws.dtype}")
                continue
            tol = 2e-5 if ws.dtype in (np.float32, np.complex64) else 1e-12
            w = np.asarray(w)
            if np.isfinite(w).all():  # (jax's softmax of unsigned input wraps to NaN)
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol,
                                           err_msg=f"{name} {dt} {backend}")
    assert not wrong, "\n".join(wrong)


def test_weak_python_int_in_float_function():
    """A Python int argument is weak: sin of it is a weak float64, which a float32 array then
    wins over (jax's float32)."""
    box: dict = {}
    f = lambda np_: lambda x, s: x * np_.sin(s) + np_.sqrt(s) / 2  # noqa: E731
    got = td.jit(lambda x, s: (box.setdefault("s", td.sin(s).weak_type), f(td)(x, s))[1])(F32, 3)
    assert box["s"] is True
    assert got.dtype == jax.jit(f(jnp))(F32, 3).dtype == np.float32


def _weak_cases(np_, lax, cf):
    """name -> fn(s) for s a scalar (a Python int or float: weak; a numpy scalar: strong)."""
    row = lambda s: np_.broadcast_to(s, (1, 2))  # noqa: E731
    vec = lambda s, n=3: np_.broadcast_to(s, (n,))  # noqa: E731
    return {
        "stack": lambda s: np_.stack([s, s]), "stack_f32": lambda s: np_.stack([s, F32[0]]),
        "vstack": lambda s: np_.vstack([s, s]), "hstack": lambda s: np_.hstack([s, s]),
        "concatenate": lambda s: np_.concatenate([vec(s, 1), vec(s, 2)]),
        "concatenate_f32": lambda s: np_.concatenate([vec(s, 1), F32]),
        "stack_pos_dtype": lambda s: np_.stack([s, s], 0, None, np.float32),
        "stack_pos_none": lambda s: np_.stack([s, s], 0, None, None),
        "vstack_pos_dtype": lambda s: np_.vstack([s, s], np.float32),
        "hstack_dtype": lambda s: np_.hstack([s, s], dtype=np.float32),
        "concatenate_dtype": lambda s: np_.concatenate([vec(s, 1), vec(s, 2)], 0, np.float32),
        "concatenate_axis_none": lambda s: np_.concatenate([row(s), vec(s, 2)], axis=None),
        "where": lambda s: np_.where(s > 1, s, s), "where_py": lambda s: np_.where(s > 0, s, 2.0),
        "select": lambda s: lax.select(s > 0, s, s),
        "sum": lambda s: np_.sum(vec(s)), "max": lambda s: np_.max(vec(s)),
        "prod": lambda s: np_.prod(vec(s)), "cumsum": lambda s: np_.cumsum(vec(s)),
        "argmax": lambda s: np_.argmax(vec(s)),
        "matmul_op": lambda s: row(s) @ np_.transpose(row(s)),
        "matmul": lambda s: np_.matmul(row(s), np_.transpose(row(s))),
        "dot": lambda s: np_.dot(vec(s), vec(s)), "dot_f32": lambda s: np_.dot(vec(s, 2), F32),
        "T": lambda s: row(s).T, "transpose": lambda s: np_.transpose(row(s)),
        "swapaxes": lambda s: np_.swapaxes(row(s), 0, 1),
        "moveaxis": lambda s: np_.moveaxis(row(s), 0, 1),
        "reshape": lambda s: np_.reshape(s, (1,)), "broadcast_to": lambda s: vec(s),
        "expand_dims": lambda s: np_.expand_dims(s, 0),
        "squeeze": lambda s: np_.squeeze(np_.reshape(s, (1,))), "ravel": lambda s: np_.ravel(row(s)),
        "cond": lambda s: cf.cond(True, lambda a: a, lambda a: a * 2, s),
        "cond_traced": lambda s: cf.cond(s > 1, lambda a: a + 1, lambda a: a * 2, s),
        "switch": lambda s: cf.switch(1, [lambda a: a - 1, lambda a: a * 2], s),
        "scan": lambda s: cf.scan(lambda c, _: (c * 2, c), s, None, length=2)[0],
        "scan_ys": lambda s: cf.scan(lambda c, _: (c * 2, c), s, None, length=2)[1],
        "fori_loop": lambda s: cf.fori_loop(0, 2, lambda i, c: c * 2, s),
        "while_loop": lambda s: cf.while_loop(lambda c: c < 3, lambda c: c * 2, s),
        "full_py": lambda s: np_.full((2,), 0.5), "full_py_int": lambda s: np_.full((2,), 3),
        "full": lambda s: np_.full((2,), s), "full_dtype": lambda s: np_.full((2,), s, np.float32),
        "full_like_f32": lambda s: np_.full_like(F32, 0.5),
        "full_like": lambda s: np_.full_like(s, 3.0), "zeros_like": lambda s: np_.zeros_like(s),
        "ones_like": lambda s: np_.ones_like(s),
        "zeros_like_dtype": lambda s: np_.zeros_like(s, np.float32),
        "index": lambda s: vec(s)[1], "index_array": lambda s: vec(s)[np.array([0, 1])],
        "slice": lambda s: vec(s)[1:], "at_set": lambda s: vec(s).at[1].set(2),
        "at_add_strong": lambda s: vec(s, 2).at[1].add(np.int8(1)),
        "flip": lambda s: np_.flip(vec(s)), "tile": lambda s: np_.tile(s, 2),
        "repeat": lambda s: np_.repeat(s, 2), "pad": lambda s: np_.pad(vec(s, 1), 1),
        "roll": lambda s: np_.roll(vec(s), 1), "clip": lambda s: np_.clip(s, 0, 1),
        "abs": lambda s: np_.abs(s), "sort": lambda s: np_.sort(vec(s)),
        "real": lambda s: np_.real(s), "sqrt": lambda s: np_.sqrt(s),
        "sign": lambda s: np_.sign(s),
        "outer": lambda s: np_.outer(vec(s, 1), vec(s, 1)),
        "einsum": lambda s: np_.einsum("i,i->", vec(s), vec(s)),
        "tensordot": lambda s: np_.tensordot(vec(s), vec(s), 1),
        "diag": lambda s: np_.diag(vec(s, 2)), "triu": lambda s: np_.triu(np_.broadcast_to(s, (2, 2))),
        "split": lambda s: np_.split(vec(s, 2), 2)[0], "stop_gradient": lambda s: lax.stop_gradient(s),
        "astype": lambda s: np_.asarray(s).astype(np.float32),
        "take": lambda s: np_.take(vec(s), np.array([0, 2])),
        "atleast_1d": lambda s: np_.atleast_1d(s), "maximum": lambda s: np_.maximum(s, 1),
        "neg": lambda s: -s, "pow": lambda s: s ** 2, "square": lambda s: np_.square(s),
    }


J_WEAK = _weak_cases(jnp, jax.lax, jax.lax)
T_WEAK = _weak_cases(td, td.lax, td)
SCALARS = {"int": 3, "float": 0.5, "np.float32": np.float32(0.5), "np.int8": np.int8(3)}


@pytest.mark.parametrize("kind", SCALARS)
def test_weak_type_through_functions_matches_jax(kind):
    """(dtype, weak_type) of each function of a weakly typed (Python scalar) or strongly typed
    (numpy scalar) argument, as jax.eval_shape gives; the values on both backends."""
    s = SCALARS[kind]
    want = jax.eval_shape(_probe(J_WEAK, {}), s)
    wvals = jax.jit(_probe(J_WEAK, {}))(s)
    wrong = []
    for backend in BACKENDS:
        box: dict = {}
        got = td.jit(_probe(T_WEAK, box), backend=backend)(s)
        for name, g, w, wv in zip(T_WEAK, got, want, wvals):
            if box[name] != (np.dtype(w.dtype), bool(w.weak_type)) or g.dtype != w.dtype:
                wrong.append(f"{name} {backend}: tidu {box[name]}, jax {(w.dtype, w.weak_type)}")
                continue
            np.testing.assert_allclose(g, np.asarray(wv), rtol=1e-6, err_msg=name)
    assert not wrong, "\n".join(wrong)


def test_weak_results_then_meet_float32():
    """What the weak types are for: each weak result combined with a float32 array stays
    float32 (jax's), a strong one promotes."""
    def f(np_, lax, cf):
        cases = _weak_cases(np_, lax, cf)
        names = ("stack", "matmul_op", "T", "cond", "switch", "full_py", "zeros_like", "concatenate",
                 "scan", "broadcast_to", "sum")
        return lambda x, s: [F32[0] * cases[n](s) for n in names]
    got = td.jit(f(td, td.lax, td))(F32, 0.5)
    want = jax.jit(f(jnp, jax.lax, jax.lax))(F32, 0.5)
    assert [g.dtype for g in got] == [w.dtype for w in want]
    assert got[0].dtype == np.float32 and got[-1].dtype == np.float64  # stack weak, sum strong


# ---- jax.nn's activations of bool and integer input ----

NN = ("celu", "elu", "gelu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "identity",
      "leaky_relu", "log_sigmoid", "log_softmax", "logmeanexp", "logsumexp", "mish", "relu",
      "relu6", "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus", "sparse_plus",
      "sparse_sigmoid", "squareplus", "standardize", "tanh", "swish", "glu")


@pytest.mark.parametrize("dt", ("bool", "int8", "int16", "int32", "int64"))
def test_nn_activations_of_integers_have_jax_dtype_and_weak_type(dt):
    """Each jax.nn activation of a bool or integer array: jax's dtype and weak type (jax's
    float literals in elu, selu, relu6, sparse_plus make a weak float64 in x64; softplus and
    mish of bool are weak too; squareplus squares bool as int32) and values; where jax refuses
    the dtype (sigmoid, silu, swish, glu: lax.logistic takes floats only) tidu refuses it too.
    (Unsigned input is left out: jax's hard_tanh compares it with -1 wrapped to 2^k - 1, where
    tidu refuses the negative Python int, docs/frontend.md.)"""
    x = _input(dt) if dt == "bool" else np.array([1, -2, 0, 3] if dt[0] == "i" else [1, 2, 0, 3],
                                                  dt)
    wrong = []
    for name in NN:
        jf, tf = getattr(jax.nn, name), getattr(td.nn, name)
        if not _jax_takes(jf, x):
            with pytest.raises(TypeError):
                td.jit(tf)(x)
            continue
        w = jax.eval_shape(jf, x)
        box: dict = {}
        got = td.jit(_probe({name: tf}, box))(x)[0]
        if box[name] != (np.dtype(w.dtype), bool(w.weak_type)):
            wrong.append(f"{name}: tidu {box[name]}, jax {(w.dtype, w.weak_type)}")
            continue
        tol = 2e-6 if w.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, np.asarray(jf(x)), rtol=tol, atol=tol, err_msg=name)
    assert not wrong, "\n".join(wrong)


# ---- td.disable_jit ----

def test_disable_jit_runs_the_function_on_every_call_with_values():
    calls, shown, branch = [], [], []

    @td.jit
    def f(x):
        calls.append(1)
        y = td.sin(x)
        shown.append(repr(y))
        if not td._core.jit_disabled():
            return y * 2
        branch.append(float(y[1]) > 0.5)  # Python control flow on values works meanwhile
        return y * 2 if y[1] > 0.5 else y

    x = np.arange(3.0)
    f(x)
    f(x)
    assert len(calls) == 1  # traced once, then the compiled program
    with td.disable_jit():
        r = f(x)
        f(x)
    assert len(calls) == 3 and branch == [True, True]
    assert "with value" in shown[-1] and "0.84147" in shown[-1]  # print(y) shows values
    np.testing.assert_allclose(r, 2 * np.sin(x))
    f(x)
    assert len(calls) == 3  # jit is back, with its program still cached
    with td.disable_jit():
        with td.disable_jit(False):
            f(x)
        assert len(calls) == 3
        f(x)
    assert len(calls) == 4
    assert "with value" not in repr(td.jit(lambda x: (shown.append(repr(x)), x)[1])(x)) and \
        "with value" not in shown[-1]


def test_disable_jit_with_static_and_keyword_arguments_and_grad():
    calls = []

    def g(x, n, *, scale=1.0):
        calls.append(1)
        return td.sum(x ** n) * scale

    f = td.jit(g, static_argnums=1)
    x = np.arange(3.0)
    with td.disable_jit():
        assert f(x, 2, scale=2.0) == pytest.approx(10.0)
        assert f(x, 2) == pytest.approx(5.0)
        assert len(calls) == 2
        np.testing.assert_allclose(td.grad(f)(x, 2), 2 * x)  # transforms still apply
        np.testing.assert_allclose(td.jit(td.grad(lambda x: g(x, 2)))(x), 2 * x)
    assert not td._core.jit_disabled()
