"""Max / min pooling's derivative as one kernel (ops/select_window.py: SelectAndGatherAdd and
SelectAndScatterAdd) against jax x64: integer-valued inputs, so windows tie and the first maximum
in window order must get the cotangent (XLA's select-and-scatter with ``ge``), overlapping
windows, strides and padding, float32 and float64, both backends; the gradient program holds one
SelectAndScatterAdd and no patch convolution; vmap of the gradient; bad files rejected."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value
from _support.threads import threads
from tidu._native import _eval
from tidu.numpy.conv import reduce_window
from tidu.ops.select_window import SelectAndScatterAdd

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)

BACKENDS = ("cpu", "xla")
COMPS = {"max": (-np.inf, lax.max), "min": (np.inf, lax.min)}
# (shape, window, strides, padding): pooling grids of jax's lax_test (NCHW, NHWC), overlapping
# windows (stride < window), windows tiling x, explicit and SAME padding, 1-D and 3-D
CASES = [
    ((2, 3, 8, 6), (1, 1, 2, 2), (1, 1, 2, 2), "VALID"),
    ((2, 3, 9, 8), (1, 1, 3, 3), (1, 1, 2, 2), "SAME"),
    ((2, 7, 5, 3), (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
    ((2, 7, 5, 3), (1, 3, 3, 1), (1, 1, 1, 1), "VALID"),
    ((4, 6), (2, 3), (1, 2), [(1, 2), (0, 3)]),
    ((4, 6), (3, 2), (2, 1), "SAME_LOWER"),
    ((9,), (3,), (2,), "SAME_LOWER"),
    ((9,), (4,), (1,), [(3, 3)]),
    ((2, 5, 4, 6), (1, 2, 2, 3), (1, 1, 2, 2), "VALID"),
]
IDS = [f"{len(c[0])}d-{i}" for i, c in enumerate(CASES)]


def _pool(case, comp, lib):
    _, wd, st, pad = case
    init, jc = COMPS[comp]
    if lib == "jax":
        return lambda a: lax.reduce_window(a, init, jc, wd, st, pad)
    return lambda a: reduce_window(a, init, comp, wd, st, pad)


def _ties(shape, dtype, seed=0):
    return np.random.default_rng(seed).integers(0, 3, shape).astype(dtype)


_JAX_REFS = {}


def _jax_vjp_and_jacobian(case, comp, x, ct):
    """jax's gradient (the vjp of ct) and Jacobian of the pooling at x, under one jax.jit, once
    per case, comparison and dtype: both backends' tests compare with the same arrays (op by
    op, jax compiled for ~20 s here)."""
    key = (CASES.index(case), comp, str(x.dtype))
    if key not in _JAX_REFS:
        jf = _pool(case, comp, "jax")
        ref = jax_value(lambda a, c: (jax.vjp(jf, a)[1](c)[0], jax.jacrev(jf)(a)), x, ct)
        _JAX_REFS[key] = (x, ct, *(np.asarray(r) for r in ref))
    x0, ct0, vjp, jac = _JAX_REFS[key]
    np.testing.assert_array_equal(x, x0)  # the same inputs as the cached reference's
    np.testing.assert_array_equal(ct, ct0)
    return vjp, jac


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("comp", COMPS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradient_and_tangent_match_jax_with_ties(case, comp, dtype, backend):
    x = _ties(case[0], dtype)
    jf, tf = _pool(case, comp, "jax"), _pool(case, comp, "td")
    rng = np.random.default_rng(1)
    ct = rng.standard_normal(jax.eval_shape(jf, x).shape).astype(dtype)
    want, jac = _jax_vjp_and_jacobian(case, comp, x, ct)
    got = td.jit(lambda a, c: td.vjp(tf, a)[1](c)[0], backend=backend)(x, ct)
    tol = 1e-6 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    # the tangent is the transpose of that: jax's own jvp picks another element on ties (its
    # reduce_window pairs), so the reference is jax's Jacobian from its gradient
    t = rng.standard_normal(x.shape).astype(dtype)
    jac = jac.reshape(-1, x.size)
    got_t = td.jit(lambda a, u: td.jvp(tf, (a,), (u,))[1], backend=backend)(x, t)
    np.testing.assert_allclose(got_t, (jac @ t.reshape(-1)).reshape(got_t.shape), rtol=tol,
                               atol=tol)


def _non_finite(x, comp, fill, rng):
    """NaN, +inf and -inf written into x in place: a few of each ("sparse"), or mostly the
    comparison's identity (-inf for max) with some NaN ("identity-heavy")."""
    flat = x.reshape(-1)
    ident = -np.inf if comp == "max" else np.inf
    fracs = ((np.nan, 0.05), (np.inf, 0.05), (-np.inf, 0.05)) if fill == "sparse" else \
        ((ident, 0.6), (np.nan, 0.05))
    for val, frac in fracs:
        flat[rng.random(flat.size) < frac] = val


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("comp", COMPS)
@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[4], CASES[7],
                                  ((3, 4, 28, 30), (1, 1, 2, 2), (1, 1, 2, 2), "VALID"),
                                  ((2, 3, 17, 33), (1, 1, 3, 3), (1, 1, 2, 2), "SAME")])
@pytest.mark.parametrize("fill", ["sparse", "identity-heavy"])
def test_gradient_with_nans_and_infinities_matches_jax(case, comp, backend, fill):
    """Windows holding NaN, +inf and -inf select the element XLA's select-and-scatter selects
    after jax pads the operand with the comparison's identity (-inf for max): a later value
    replaces the current one unless current >= it, so a NaN is taken and then replaced by the
    next value, padding included, and padding before an element equal to -inf keeps the window
    from selecting it. The branch-free passes over a row's outputs (kernels/select_window.hpp)
    and the numpy reference outside a trace against jax, rows long enough for several passes."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(case[0])
    _non_finite(x, comp, fill, rng)
    jf, tf = _pool(case, comp, "jax"), _pool(case, comp, "td")
    ct = rng.standard_normal(jf(x).shape)
    want = np.asarray(jax.jit(lambda a, c: jax.vjp(jf, a)[1](c)[0])(x, ct))
    got = td.jit(lambda a, c: td.vjp(tf, a)[1](c)[0], backend=backend)(x, ct)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    if backend == "cpu" and x.size < 1000:  # the numpy reference (ops/select_window.py)
        _, wd, st, pad = case
        pads = lax.padtype_to_pads(x.shape, wd, st, pad) if isinstance(pad, str) else pad
        prim = SelectAndScatterAdd(wd, st, [p for p, _ in pads], [q for _, q in pads],
                                   comp == "max")
        np.testing.assert_allclose(prim.impl(ct, x), want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("comp", COMPS)
@pytest.mark.parametrize("case", [CASES[1], CASES[4], CASES[5], CASES[7],
                                  ((2, 2, 9, 11), (1, 1, 3, 3), (1, 1, 2, 2), "SAME")])
@pytest.mark.parametrize("fill", ["sparse", "identity-heavy"])
def test_tangent_with_nans_and_infinities_is_the_gradients_transpose(case, comp, backend, fill):
    """The tangent (SelectAndGatherAdd) selects what the gradient does, padding included: a
    window whose only maximum is -inf behind padding selects the padding (tangent 0) on XLA as
    on the interpreter, where XLA's reduce_window padding lost ties to elements. The reference is
    jax's Jacobian built from its gradient."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal(case[0])
    _non_finite(x, comp, fill, rng)
    jf, tf = _pool(case, comp, "jax"), _pool(case, comp, "td")
    jac = np.asarray(jax.jacrev(jf)(x)).reshape(-1, x.size)
    t = rng.standard_normal(x.shape)
    got = td.jit(lambda a, u: td.jvp(tf, (a,), (u,))[1], backend=backend)(x, t)
    np.testing.assert_allclose(got, (jac @ t.reshape(-1)).reshape(got.shape), rtol=1e-13,
                               atol=1e-13)


def _instructions(lowered, *args) -> str:
    """The opcode names of a lowered program's instructions (docs/evaluator.md, profiling)."""
    _eval.set_profiling(True)
    try:
        lowered(*args)
    finally:
        _eval.set_profiling(False)
    return " ".join(row[0] for row in lowered.program.executable.native.profile())


@pytest.mark.parametrize("comp", COMPS)
def test_gradient_is_one_select_and_scatter(comp):
    case = CASES[1]
    x = _ties(case[0], "float32")
    f = _pool(case, comp, "td")
    text = _instructions(td.jit(td.grad(lambda a: td.sum(f(a) ** 2)), backend="cpu").lower(x), x)
    assert text.count("SelectAndScatterAdd") == 1
    assert "Conv" not in text and "ArgMax" not in text and "ArgMin" not in text
    text = _instructions(td.jit(lambda a, u: td.jvp(f, (a,), (u,))[1], backend="cpu").lower(
        x, x), x, x)
    assert text.count("SelectAndGatherAdd") == 1 and "Conv" not in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap_of_the_gradient(backend):
    case = CASES[4]
    xs = np.stack([_ties(case[0], "float64", s) for s in range(3)])
    jf, tf = _pool(case, "max", "jax"), _pool(case, "max", "td")
    want = jax.vmap(jax.grad(lambda a: jnp.sum(jnp.sin(jf(a)))))(xs)
    got = td.jit(td.vmap(td.grad(lambda a: td.sum(td.sin(tf(a))))), backend=backend)(xs)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-13, atol=1e-13)
    # a batched cotangent against one operand: the batch rule broadcasts the operand
    cts = np.random.default_rng(3).standard_normal((3,) + jf(xs[0]).shape)
    got = td.jit(td.vmap(lambda c: td.vjp(tf, xs[0])[1](c)[0]), backend=backend)(cts)
    want = jax.vmap(lambda c: jax.vjp(jf, xs[0])[1](c)[0])(cts)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-13, atol=1e-13)


def test_half_and_dilated_pooling_keep_the_composite_rule():
    """float16 and dilated windows have no select kernel: their gradient still matches jax."""
    x = np.random.default_rng(4).permutation(42).reshape(6, 7) * 0.5  # no ties: jax's jvp
    tf = lambda a: reduce_window(a, -np.inf, "max", (2, 2), (1, 1), "SAME", None, (2, 1))
    g = td.jit(td.grad(lambda a: td.sum(tf(a) * tf(a))))(x)
    jf = lambda a: lax.reduce_window(a, -np.inf, lax.max, (2, 2), (1, 1), "SAME", None, (2, 1))
    jac = np.asarray(jax.jacfwd(jf)(x)).reshape(-1, x.size)
    np.testing.assert_allclose(g.reshape(-1), (2 * np.asarray(jf(x)).reshape(-1)) @ jac, rtol=1e-13)
    h = _ties((4, 6), "float16")
    gh = td.jit(td.grad(lambda a: td.sum(reduce_window(a, -np.inf, "max", (2, 2), (1, 2),
                                                       "VALID"))))(h)
    want = jax.grad(lambda a: jnp.sum(lax.reduce_window(a, -np.inf, lax.max, (2, 2), (1, 2),
                                                        "VALID")))(h)
    np.testing.assert_array_equal(gh, np.asarray(want))


def test_files_with_bad_select_attributes_are_rejected(tmp_path):
    """A saved gradient program loads and matches; its SelectAndScatterAdd with a window,
    stride or padding that no longer gives the source's shape is refused by the validator,
    which names the instruction."""
    from _support import forge

    x = _ties((5, 6), "float64")
    f = lambda x: td.sum(reduce_window(x, -np.inf, "max", (2, 3), (1, 2), "SAME") ** 2)
    F0 = td.build(f, x=td.spec(x.shape, "float64"))
    T1 = td.transpose(td.differentiate(td.resolve([F0]), F0.outputs, ["x"]))
    prog = td.compile(td.materialize_merge(td.resolve([F0, T1]), T1.tangent_outputs))
    path = tmp_path / "pool.tidu"
    prog.save(path)
    data = path.read_bytes()
    (ct,) = [k for _, k in T1.tangent_inputs]
    ins = {"x": x, ct: np.float64(1.0)}
    want = prog(ins)[0]
    got = _eval.Program(data).run([np.asarray(ins[k]) for k in prog.inputs], None)[0]
    np.testing.assert_allclose(got, want, rtol=1e-14)
    q = forge.parse(data)
    code = forge.OPCODES.index("SelectAndScatterAdd")
    (i,) = [k for k, o in enumerate(q.a["opcode"]) if o == code]
    start = int(q.a["attr_off"][i])
    for pos, value in ((1, 4), (4, 3), (7, 5), (10, 9)):  # window, stride, low, high of axis 0
        bad = forge.parse(data)
        bad.a["attrs"][start + pos] = value
        with pytest.raises(Exception, match="SelectAndScatterAdd"):
            _eval.Program(bad.to_bytes())


# large enough (2^17 window steps and more) that the kernels cut their output rows over threads:
# chunks start inside the row odometer; planes for the scatter where leading axes are not
# windowed, one chunk where the first axis is (overlapping windows there); channels last
THREADED = [
    ((8, 16, 30, 30), (1, 1, 3, 3), (1, 1, 2, 2), "SAME"),
    ((64, 30, 50), (3, 1, 4), (2, 1, 3), [(1, 1), (0, 0), (2, 1)]),
    ((8, 30, 30, 16), (1, 3, 3, 1), (1, 2, 2, 1), "VALID"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("comp", COMPS)
@pytest.mark.parametrize("case", THREADED, ids=["nchw", "first-axis-windowed", "nhwc"])
def test_threaded_pooling_and_its_derivatives_match_one_thread_and_jax(case, comp, dtype):
    """ReduceWindow, SelectAndGatherAdd (the tangent) and SelectAndScatterAdd (the gradient)
    split their output rows over threads: the same bytes on one thread and two, and jax's
    values. The gradient is taken at integer values, so windows tie everywhere and the first
    maximum in window order must still get each cotangent; the tangent at distinct values
    (jax's own jvp picks another element on ties)."""
    x = _ties(case[0], dtype)
    rng = np.random.default_rng(2)
    xd = rng.permutation(x.size).reshape(x.shape).astype(dtype)
    jf, tf = _pool(case, comp, "jax"), _pool(case, comp, "td")
    t = rng.standard_normal(x.shape).astype(dtype)
    s = rng.standard_normal(jax.eval_shape(jf, x).shape).astype(dtype)

    def both(a, ad, ta, sa):
        return tf(a), td.jvp(tf, (ad,), (ta,))[1], td.vjp(tf, a)[1](sa)[0]

    f = td.jit(both, backend="cpu")
    with threads(2):
        two = f(x, xd, t, s)
    with threads(1):
        one = f(x, xd, t, s)
    want = (jf(x), jax.jvp(jf, (xd,), (t,))[1], jax.vjp(jf, x)[1](s)[0])
    for a, b, w in zip(two, one, want):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, w, rtol=1e-6 if dtype == "float32" else 1e-13, atol=1e-5)


@pytest.mark.parametrize("shape,window", [((64, 16, 10, 10), (1, 1, 2, 2)),
                                          ((8, 30, 31, 9), (1, 3, 3, 1)),
                                          ((7, 5), (2, 2))])
def test_average_pooling_gradient_repeats_each_cotangent_as_jax(shape, window):
    """The transpose of a sum over windows side by side (average pooling) is one broadcast of
    the cotangent over each window, zeros after the last whole window (31 rows in windows of 3);
    first and second derivatives against jax, both backends, threaded sizes included."""
    x = np.random.default_rng(3).standard_normal(shape)
    init = 0.0

    def loss(ns, red):
        return lambda a: (ns.tanh(red(a, init, "add" if ns is td else lax.add, window, window,
                                      "VALID")) ** 2).sum()

    jl = loss(jnp, lax.reduce_window)
    tl = loss(td, reduce_window)
    want = jax.grad(jl)(x)
    v = np.random.default_rng(4).standard_normal(shape)
    want_hvp = jax.jvp(jax.grad(jl), (x,), (v,))[1]
    for backend in BACKENDS:
        g = td.jit(td.grad(tl), backend=backend)(x)
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-14)
        hvp = td.jit(lambda a, b: td.jvp(td.grad(tl), (a,), (b,))[1], backend=backend)(x, v)
        np.testing.assert_allclose(hvp, want_hvp, rtol=1e-11, atol=1e-13)
