"""Windowed reductions (ops/window.py, numpy/conv.py's reduce_window) against jax.lax in x64:
values on the interpreter and XLA, first- and second-order derivatives (max/min's
select-and-scatter-add, ties as jax), vmap, and the errors of unsupported forms."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.values import one_op_graph
from tidu import ops as P
from tidu.numpy.conv import reduce_window

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)

BACKENDS = ("cpu", "xla")
COMPS = {"add": (0.0, lax.add), "max": (-np.inf, lax.max), "min": (np.inf, lax.min)}

# (id, shape, window, strides, padding, base dilation, window dilation): max pooling and average
# pooling layouts (NCHW, NHWC), jax's lax_test reduce_window grid shapes, 1-D and 3-D
CASES = [
    ("pool-nchw", (2, 3, 8, 6), (1, 1, 2, 2), (1, 1, 2, 2), "VALID", None, None),
    ("pool-nhwc-same", (2, 7, 5, 3), (1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None),
    ("explicit", (4, 6), (2, 3), (1, 2), [(1, 2), (0, 3)], None, None),
    ("base-dilation", (3, 5), (2, 2), (1, 1), [(0, 1), (1, 0)], (2, 1), None),
    ("window-dilation", (6, 7), (2, 3), (2, 1), "SAME", None, (2, 2)),
    ("1d", (9,), (3,), (2,), "SAME_LOWER", None, None),
    ("3d", (2, 5, 4, 6), (1, 2, 2, 3), (1, 1, 2, 2), "VALID", None, None),
]
IDS = [c[0] for c in CASES]


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _rw(case, comp, lib):
    _, _, wd, st, pad, bd, wdl = case
    init, jc = COMPS[comp]
    if lib == "jax":
        return lambda a: lax.reduce_window(a, init, jc, wd, st, pad, bd, wdl)
    return lambda a: reduce_window(a, init, comp, wd, st, pad, bd, wdl)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("comp", COMPS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_match_jax(case, comp, backend):
    x = _x(case[1])
    want = np.asarray(_rw(case, comp, "jax")(x))
    got = td.jit(_rw(case, comp, "td"), backend=backend)(x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(_rw(case, comp, "td")(x), want, rtol=1e-13, atol=1e-13)


def _grad_ok(case, comp):
    # jax has no VJP of select_and_gather with window dilation (tidu does: checked by jvp below)
    return comp == "add" or case[6] is None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("comp", COMPS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_match_jax(case, comp, backend):
    x = _x(case[1], 1)
    t = _x(case[1], 2)
    jf, tf = _rw(case, comp, "jax"), _rw(case, comp, "td")
    _, want_t = jax.jvp(lambda a: jnp.sin(jf(a)), (x,), (t,))
    _, got_t = td.jit(lambda a, d: td.jvp(lambda b: td.sin(tf(b)), (a,), (d,)),
                      backend=backend)(x, t)
    np.testing.assert_allclose(got_t, np.asarray(want_t), rtol=1e-12, atol=1e-12)
    if _grad_ok(case, comp):
        want = jax.grad(lambda a: jnp.sum(jnp.sin(jf(a)) * jf(a)))(x)
        got = td.jit(td.grad(lambda a: td.sum(td.sin(tf(a)) * tf(a))), backend=backend)(x)
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("comp", COMPS)
@pytest.mark.parametrize("case", [c for c in CASES if c[6] is None], ids=lambda c: c[0])
def test_second_order_matches_jax(case, comp):
    x = _x(case[1], 3)
    v = _x(case[1], 4)

    def hvp(lib):
        m, grad = (jnp, jax.grad) if lib == "jax" else (td, td.grad)
        f = _rw(case, comp, lib)
        g = grad(lambda a: m.sum(m.sin(f(a * a))))
        return grad(lambda a: m.sum(g(a) * v))

    np.testing.assert_allclose(td.jit(hvp("td"))(x), np.asarray(hvp("jax")(x)), rtol=1e-11,
                               atol=1e-11)


@pytest.mark.parametrize("strides", [(2, 1), (2, 2)])  # (2, 2): windows tiling x exactly
@pytest.mark.parametrize("comp", ["max", "min"])
def test_ties_go_to_the_first_element_as_in_jax(comp, strides):
    z = np.array([[1.0, 1.0, 2.0, 2.0], [1.0, 1.0, 2.0, 2.0], [0.0, 3.0, 3.0, 3.0],
                  [3.0, 3.0, 3.0, 0.0]])
    case = ("ties", z.shape, (2, 2), strides, "VALID", None, None)
    want = jax.grad(lambda a: jnp.sum(_rw(case, comp, "jax")(a)))(z)
    got = td.jit(td.grad(lambda a: td.sum(_rw(case, comp, "td")(a))))(z)
    np.testing.assert_array_equal(got, np.asarray(want))


@pytest.mark.parametrize("in_axes", [0, 1])
@pytest.mark.parametrize("comp", COMPS)
def test_vmap_matches_jax(comp, in_axes):
    case = CASES[0]
    xs = np.stack([_x(case[1], 5), _x(case[1], 6)], axis=in_axes)
    jf, tf = _rw(case, comp, "jax"), _rw(case, comp, "td")
    want = jax.vmap(jf, in_axes=in_axes)(xs)
    for backend in BACKENDS:
        got = td.jit(td.vmap(tf, in_axes=in_axes), backend=backend)(xs)
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-13, atol=1e-13)
    gwant = jax.grad(lambda a: jnp.sum(jnp.sin(jax.vmap(jf, in_axes=in_axes)(a))))(xs)
    ggot = td.jit(td.grad(lambda a: td.sum(td.sin(td.vmap(tf, in_axes=in_axes)(a)))))(xs)
    np.testing.assert_allclose(ggot, np.asarray(gwant), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integers_nan_and_complex(backend):
    ints = np.arange(24, dtype=np.int32).reshape(4, 6) * np.int32(7) % np.int32(11)
    imin = np.int32(np.iinfo(np.int32).min)
    got = td.jit(lambda a: reduce_window(a, imin, "max", (2, 3), (2, 3), "VALID"),
                 backend=backend)(ints)
    np.testing.assert_array_equal(got, lax.reduce_window(ints, imin, lax.max, (2, 3), (2, 3),
                                                         "VALID"))
    xn = _x((6,), 7)
    xn[2] = np.nan
    for comp in ("max", "min"):
        for st in ((1,), (2,)):  # (2,): the strided run of the kernel's fast path
            case = ("n", (6,), (2,), st, "VALID", None, None)
            got = td.jit(_rw(case, comp, "td"), backend=backend)(xn)
            want = np.asarray(_rw(case, comp, "jax")(xn))
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_array_equal(np.asarray(got)[~np.isnan(want)], want[~np.isnan(want)])
    z = _x((5,), 8) + 1j * _x((5,), 9)
    got = td.jit(lambda a: reduce_window(a, 0j, "add", (2,), (1,), "SAME"), backend=backend)(z)
    np.testing.assert_allclose(got, lax.reduce_window(z, 0j, lax.add, (2,), (1,), "SAME"),
                               rtol=1e-13)


def test_pooling_is_one_instruction():
    """Max and average pooling written with reduce_window are one primitive each."""
    F = td.build(lambda x: reduce_window(x, -np.inf, "max", (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
                 + reduce_window(x, 0.0, "add", (1, 1, 2, 2), (1, 1, 2, 2), "VALID") / 4,
                 x=td.spec((2, 3, 8, 8), "float32"))
    text = str(F)
    assert text.count("ReduceWindowMax(") == 1 and text.count("ReduceWindowSum(") == 1


@pytest.mark.parametrize("args,err,match", [
    ((1.0, "add"), NotImplementedError, "init_value 1.0 is not the identity"),
    ((0.0, "mul"), NotImplementedError, "computation 'mul' is not supported"),
    ((0.0, lambda a, b: a + b), NotImplementedError, "is not supported"),
])
def test_unsupported_forms_say_so(args, err, match):
    with pytest.raises(err, match=match):
        td.jit(lambda a: reduce_window(a, args[0], args[1], (2,), (1,), "VALID"))(np.zeros(4))


def test_bad_windows_name_the_problem():
    with pytest.raises(ValueError, match="window_dimensions .* must have 2 entries"):
        td.jit(lambda a: reduce_window(a, 0.0, "add", (2,), (1, 1), "VALID"))(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="window_strides \\(0,\\) must be positive"):
        td.jit(lambda a: reduce_window(a, 0.0, np.add, (2,), (0,), "VALID"))(np.zeros(3))


# ---- the batched XLA lowering (eval_batch: every value with a leading axis) ----


@pytest.mark.parametrize("op,shapes", [
    (P.Conv((2, 1), (1, 0), (0, 2), (1, 2), (2, 1)), [(2, 3, 7, 5), (4, 3, 2, 3)]),
    (P.Conv((1,), (1,), (1,), (1,), (1,), 2, 1), [(2, 4, 6), (6, 2, 3)]),
    (P.Conv((1,), (0,), (0,), (1,), (1,), 1, 2), [(4, 2, 6), (6, 2, 3)]),
    (P.ReduceWindowMax((2, 2), (1, 2), (1, 0), (0, 1), (1, 2), (1, 1)), [(4, 5)]),
    (P.ReduceWindowSum((3,), (2,), (1,), (1,), (2,), (1,)), [(6,)]),
], ids=lambda v: getattr(v, "name", None))
def test_eval_batch_on_xla_matches_the_interpreter(op, shapes):
    r = np.random.default_rng(10)
    g = one_op_graph(op, [td.aval(s, "float64") for s in shapes])
    cpu, acc = td.compile(g, backend="cpu"), td.compile(g, backend="xla")
    stacked = [r.standard_normal((3,) + s) for s in shapes]
    (want,) = cpu.eval_batch(stacked)
    (got,) = acc.eval_batch(stacked)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    for i in range(3):
        np.testing.assert_allclose(want[i], op.impl(*[s[i] for s in stacked]), rtol=1e-12,
                                   atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["int8", "int16", "int64", "uint8", "uint16", "uint32",
                                   "uint64"])
def test_integer_dtypes_match_jax(dtype, backend):
    """add/max/min windows of every integer dtype, with padding, strides and dilations, equal
    jax's (sums wrap alike)."""
    info = np.iinfo(dtype)
    x = np.random.default_rng(11).integers(info.min, info.max, (5, 7), dtype=dtype,
                                           endpoint=True)
    for comp, init, jcomp in (("add", 0, lax.add), ("max", info.min, lax.max),
                              ("min", info.max, lax.min)):
        init = np.asarray(init, dtype)
        args = ((2, 3), (1, 2), [(1, 0), (2, 1)], (2, 1), (1, 2))
        got = td.jit(lambda a: reduce_window(a, init, comp, *args), backend=backend)(x)
        want = lax.reduce_window(x, init, jcomp, *args)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, np.asarray(want))


@pytest.mark.parametrize("channels", [1, 4, 17])
@pytest.mark.parametrize("comp", COMPS)
def test_channels_last_pools_match_jax(comp, channels):
    """NHWC pools (the last axis unwindowed: the kernel's lane loop) with padding, strides and
    dilation on the middle axes, against the same pool with the last axis windowed or padded
    (the general loop), float64 and int32."""
    shape = (2, 9, 7, channels)
    for dt in ("float64", "int32"):
        x = (_x(shape, 11) * 10).astype(dt)
        init = {"add": 0, "max": np.iinfo(np.int32).min, "min": np.iinfo(np.int32).max}[comp] \
            if dt == "int32" else COMPS[comp][0]
        for wd, st, pad, bd, wdl in [((1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None),
                                     ((1, 2, 3, 1), (1, 1, 2, 1), [(0, 0), (1, 2), (0, 1), (0, 0)],
                                      (1, 2, 1, 1), (1, 1, 2, 1)),
                                     ((1, 3, 2, 1), (1, 2, 1, 1), [(0, 0), (0, 0), (1, 0), (0, 1)],
                                      None, None)]:
            want = lax.reduce_window(x, np.asarray(init, dt), COMPS[comp][1], wd, st, pad, bd, wdl)
            for backend in ("cpu",):
                got = td.jit(lambda a: reduce_window(a, np.asarray(init, dt), comp, wd, st, pad,
                                                     bd, wdl), backend=backend)(x)
                np.testing.assert_allclose(got, np.asarray(want), rtol=1e-13, atol=1e-11)
