"""td.lax.reduce_window with a general body, a non-identity or traced init value, or several
operands (api/lax_window.py's gather + masked tree) against jax.lax in x64: values on both
backends, forward-mode derivatives against jax's (jax defines only those for a general body),
reverse mode against central differences, vmap, and no per-window growth of the program."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from tidu import lax as T

jax = pytest.importorskip("jax")
from jax import lax as L  # noqa: E402

jax.config.update("jax_enable_x64", True)

BACKENDS = ("cpu", "xla")
# (id, shape, window, strides, padding, base dilation, window dilation)
CASES = [
    ("same", (5, 7), (2, 3), (1, 2), "SAME", None, None),
    ("pad-base-wdil", (5, 7), (2, 2), (2, 1), [(1, 2), (0, 1)], (2, 1), (1, 2)),
    ("valid", (4, 6), (3, 1), (1, 1), "VALID", None, None),
    ("crop", (6, 5), (2, 2), (1, 1), [(-1, 1), (2, -1)], None, None),
    ("1d-same-lower", (9,), (4,), (2,), "SAME_LOWER", None, None),
    ("3d", (2, 4, 5), (1, 2, 3), (1, 2, 1), "SAME", None, (1, 1, 2)),
    ("all-padding", (3,), (2,), (1,), [(4, 0)], None, None),
]
IDS = [c[0] for c in CASES]
# (id, tidu body, jax body, init): a non-monoid body, monoids from a non-identity init, and a
# monoid written as a lambda (not recognised, so the general path)
BODIES = [
    ("mul", lambda a, b: a * b, lambda a, b: a * b, 1.0),
    ("add-init", T.add, L.add, 1.5),
    ("max-init", T.max, L.max, 0.25),
    ("min-lambda", lambda a, b: T.min(a, b), lambda a, b: L.min(a, b), np.inf),
    ("logaddexp", lambda a, b: td.logaddexp(a, b), lambda a, b: jax.numpy.logaddexp(a, b),
     -np.inf),
]
BIDS = [b[0] for b in BODIES]


def _x(shape, seed=0):
    return 0.5 + np.random.default_rng(seed).random(shape)


def _args(case):
    return case[2:]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("body", BODIES, ids=BIDS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_match_jax(case, body, backend, dtype):
    x = _x(case[1]).astype(dtype)
    _, bt, bj, init = body
    init = np.asarray(init, dtype)
    want = np.asarray(L.reduce_window(x, init, bj, *_args(case)))
    got = td.jit(lambda a: T.reduce_window(a, init, bt, *_args(case)), backend=backend)(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-12 if dtype == "float64" else 2e-6
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol / 10)


@pytest.mark.parametrize("body", BODIES[:4], ids=BIDS[:4])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_mode_matches_jax(case, body):
    x, v = _x(case[1]), _x(case[1], 1) - 1.0
    _, bt, bj, init = body
    _, want = jax.jvp(lambda a: L.reduce_window(a, init, bj, *_args(case)), (x,), (v,))
    _, got = td.jvp(lambda a: T.reduce_window(a, init, bt, *_args(case)), (x,), (v,))
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)


def test_jax_has_no_reverse_mode_for_a_general_body():
    """The reason the docs say tidu's gradient goes beyond jax's: jax's linearization fails."""
    x = _x((4, 5))
    with pytest.raises(ValueError, match="reverse-mode"):
        jax.grad(lambda a: L.reduce_window(a, 1.0, lambda p, q: p * q, (2, 2), (1, 1),
                                           "SAME").sum())(x)


@pytest.mark.parametrize("case", CASES[:4], ids=IDS[:4])
def test_reverse_mode_matches_central_differences(case):
    x = _x(case[1])
    w = _x(case[1], 2)

    def f(a):
        return td.sum(T.reduce_window(a, 1.0, lambda p, q: p * q, *_args(case)) * w[:1].sum())

    g = td.jit(td.grad(f))(x)
    fn = td.jit(f)
    eps = 1e-6
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        fd[i] = (float(fn(x + e)) - float(fn(x - e))) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    # and reverse mode agrees with forward mode (jax's jvp) along a direction
    v = _x(case[1], 3)
    _, jt = jax.jvp(lambda a: (L.reduce_window(a, 1.0, lambda p, q: p * q, *_args(case))
                               * w[:1].sum()).sum(), (x,), (v,))
    np.testing.assert_allclose(np.sum(np.asarray(g) * v), jt, rtol=1e-10)


def test_several_operands_and_a_traced_init():
    """A pytree of operands (a windowed argmax: value and index) and a traced init value."""
    x = _x((5, 6))
    ix = np.arange(30.0).reshape(5, 6)

    def jbody(a, b):
        keep = a[0] >= b[0]
        return L.select(keep, a[0], b[0]), L.select(keep, a[1], b[1])

    def tbody(a, b):
        keep = T.ge(a[0], b[0])
        return T.select(keep, a[0], b[0]), T.select(keep, a[1], b[1])

    args = ((2, 3), (1, 2), "SAME")
    want = L.reduce_window((x, ix), (-np.inf, -1.0), jbody, *args)
    for backend in BACKENDS:
        got = td.jit(lambda a, b: T.reduce_window((a, b), (-np.inf, -1.0), tbody, *args),
                     backend=backend)(x, ix)
        for u, v in zip(got, want):
            np.testing.assert_array_equal(u, v)
    # the init value traced: its derivative is the count of windows it is folded into
    want = L.reduce_window(x, 2.0, L.add, *args)
    got = td.jit(lambda a, c: T.reduce_window(a, c, T.add, *args))(x, 2.0)
    np.testing.assert_allclose(got, want, rtol=1e-13)
    dc = td.jit(td.grad(lambda c: td.sum(T.reduce_window(x, c, T.add, *args))))(2.0)
    assert float(dc) == want.size


@pytest.mark.parametrize("in_axes", [0, 1])
def test_vmap_matches_jax(in_axes):
    xs = _x((3, 5, 6))
    args = ((2, 2), (1, 1), "SAME", (1, 2))
    want = jax.vmap(lambda a: L.reduce_window(a, 1.0, lambda p, q: p * q, *args),
                    in_axes=in_axes)(xs)
    got = td.jit(td.vmap(lambda a: T.reduce_window(a, 1.0, lambda p, q: p * q, *args),
                         in_axes=in_axes))(xs)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_integers_exact():
    x = np.random.default_rng(4).integers(-5, 6, (6, 7)).astype(np.int32)
    want = L.reduce_window(x, np.int32(3), L.add, (3, 2), (2, 1), "SAME")
    for backend in BACKENDS:
        got = td.jit(lambda a: T.reduce_window(a, np.int32(3), T.add, (3, 2), (2, 1), "SAME"),
                     backend=backend)(x)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
    want = L.reduce_window(x, np.int32(-1), L.bitwise_xor, (2, 2), (1, 1), "VALID")
    got = td.jit(lambda a: T.reduce_window(a, np.int32(-1), T.bitwise_xor, (2, 2), (1, 1),
                                           "VALID"))(x)
    np.testing.assert_array_equal(got, want)


def _general_text(k):
    return str(td.build(lambda a: T.reduce_window(a, 1.0, lambda p, q: p * q, (k,), (1,),
                                                  "VALID"), a=td.spec((80,), "float64")))


def test_one_op_whose_array_program_is_logarithmic_in_the_window():
    """One ReduceWindowGeneral; its array program (what the interpreter runs) takes no gather
    of the windows, and a large window is ceil(log2 K) + popcount(K) body applications (window
    doubling), not K.  The listing holds the region (one Mul) and the array program."""
    t64, t8, t3 = _general_text(64), _general_text(8), _general_text(3)
    assert t64.count("ReduceWindowGeneral(") == 1
    assert "Gather(" not in t64
    # region 1 + doubling 6 + init 1 (64 = 2^6: one view of the last level)
    assert t64.count("Mul(") == 8
    assert t8.count("Mul(") <= 1 + 3 + 1 + 1
    assert t3.count("Mul(") == 1 + 2 + 1  # three strided views, then the init


def _hlo(fn, *avals):
    F = td.build(fn, inputs=dict(enumerate(avals)))
    return td.compile(td.materialize_merge(td.resolve([F]), F.outputs),
                      backend="xla").as_stablehlo()


def test_xla_lowers_one_reduce_window_with_the_body_as_its_region():
    """As jax emits it: stablehlo.reduce_window whose region is the computation, no gather and
    no window-size copy of the operand, also under vmap (the batch axis gets a size-1 window)
    and for several operands."""
    spec = td.spec((5, 7), "float64")
    text = _hlo(lambda a: T.reduce_window(a, 1.0, lambda p, q: p * q, (2, 3), (1, 2), "SAME"),
                spec)
    assert text.count("stablehlo.reduce_window") == 1 and "gather" not in text
    assert "stablehlo.multiply" in text
    text = _hlo(td.vmap(lambda a: T.reduce_window(a, 1.0, lambda p, q: p * q, (2, 2), (1, 1),
                                                  "SAME")), td.spec((3, 5, 6), "float64"))
    assert text.count("stablehlo.reduce_window") == 1 and "array<i64: 1, 2, 2>" in text

    def argmax_body(a, b):
        keep = T.ge(a[0], b[0])
        return T.select(keep, a[0], b[0]), T.select(keep, a[1], b[1])

    text = _hlo(lambda a, b: T.reduce_window((a, b), (-np.inf, -1.0), argmax_body, (2, 3),
                                             (1, 2), "SAME"), spec, spec)
    assert text.count("stablehlo.reduce_window") == 1 and "gather" not in text


def test_a_computation_closing_over_a_traced_value_has_no_region():
    """XLA's region takes only the window's scalars: a computation that reads a traced value of
    the enclosing function lowers through the array program instead, with the same values."""
    x = _x((5, 6))

    def f(a, s):  # sums for s > 0, products otherwise
        return T.reduce_window(a, 0.0, lambda p, q: td.where(s > 0, p + q, p * q), (2, 2),
                               (1, 1), "VALID")

    want = L.reduce_window(x, 0.0, L.add, (2, 2), (1, 1), "VALID")
    for backend in BACKENDS:
        np.testing.assert_allclose(td.jit(f, backend=backend)(x, 3.0), want, rtol=1e-13)


def test_large_windows_match_jax():
    """Window doubling: windows of 5, 8 and 13 elements, strided and dilated."""
    x = _x((40,))
    for k, s, w in [(5, 1, 1), (8, 3, 1), (13, 2, 2)]:
        args = ((k,), (s,), [(3, 2)], None, (w,))
        want = L.reduce_window(x, 1.0, lambda p, q: p * q, *args)
        for backend in BACKENDS:
            got = td.jit(lambda a: T.reduce_window(a, 1.0, lambda p, q: p * q, *args),
                         backend=backend)(x)
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_monoids_from_identity_stay_one_primitive():
    text = str(td.build(lambda a: T.reduce_window(a, -np.inf, T.max, (2, 2), (2, 2), "VALID"),
                        a=td.spec((4, 6), "float64")))
    assert text.count("ReduceWindowMax(") == 1 and "Gather(" not in text
    # another init value: the primitive from the identity, then the init combined once
    text = str(td.build(lambda a: T.reduce_window(a, 1.5, T.add, (2, 2), (1, 1), "SAME"),
                        a=td.spec((4, 6), "float64")))
    assert text.count("ReduceWindowSum(") == 1 and "Gather(" not in text


def test_negative_padding_of_a_monoid_matches_jax():
    """The primitives take no negative padding; the composite does (for the identity too)."""
    x = _x((6, 5))
    for init, bt, bj in [(0.0, T.add, L.add), (-np.inf, T.max, L.max)]:
        args = ((2, 2), (1, 1), [(-1, 1), (2, -1)])
        want = L.reduce_window(x, init, bj, *args)
        got = td.jit(lambda a: T.reduce_window(a, init, bt, *args))(x)
        np.testing.assert_allclose(got, want, rtol=1e-13)


def test_bad_input_names_the_problem():
    x = np.zeros((4, 4))

    with pytest.raises(ValueError, match="2 operands but 1 init"):
        td.jit(lambda a: T.reduce_window((a, a), 0.0, lambda p, q: p, (2, 2), (1, 1),
                                         "VALID"))(x)
    with pytest.raises(TypeError, match="must be a function"):
        td.jit(lambda a: T.reduce_window(a, 1.0, "mul", (2, 2), (1, 1), "VALID"))(x)
    with pytest.raises(ValueError, match="strides and dilations >= 1"):
        td.jit(lambda a: T.reduce_window(a, 1.0, lambda p, q: p * q, (2, 2), (0, 1),
                                         "VALID"))(x)
    with pytest.raises(ValueError, match="must have 2 entries"):
        td.jit(lambda a: T.reduce_window(a, 1.0, lambda p, q: p * q, (2,), (1, 1), "VALID"))(x)
    with pytest.raises(ValueError, match="returned 1 values for 2"):
        td.jit(lambda a: T.reduce_window((a, a), (0.0, 0.0), lambda p, q: p[0], (2, 2),
                                         (1, 1), "VALID"))(x)


def test_saved_program_runs_the_array_program(tmp_path):
    """The interpreter runs the op as its Checkpoint opcode: a saved file needs no new opcode
    and loads and runs with the same values."""
    x = _x((5, 7))
    args = ((2, 3), (1, 2), "SAME")
    F = td.build(lambda a: T.reduce_window(a, 1.0, lambda p, q: p * q, *args),
                 a=td.spec((5, 7), "float64"))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    prog.save(tmp_path / "rw.tidu")
    got = td.load(tmp_path / "rw.tidu").eval([x])[0]
    np.testing.assert_allclose(got, L.reduce_window(x, 1.0, lambda p, q: p * q, *args),
                               rtol=1e-13)


def test_gradient_of_a_vmapped_window_matches_central_differences():
    xs = _x((2, 4, 5))
    args = ((2, 2), (1, 1), "SAME")

    def f(a):
        return td.sum(td.vmap(lambda r: T.reduce_window(r, 1.0, lambda p, q: p * q, *args))(a))

    g = td.jit(td.grad(f))(xs)
    fn, eps = td.jit(f), 1e-6
    v = _x((2, 4, 5), 5)
    fd = (float(fn(xs + eps * v)) - float(fn(xs - eps * v))) / (2 * eps)
    np.testing.assert_allclose(np.sum(g * v), fd, rtol=1e-7)


def test_vmap_over_the_init_value_matches_a_loop_of_jax_calls():
    """A batched init value has no scalar region: the vmapped op is the batched array program
    alone (a Checkpoint), on both backends.  (jax's vmap raises "reduce_window batching is not
    implemented for initial values", so the reference is one jax call per init value.)"""
    x = _x((5, 6))
    inits = np.array([1.0, 0.5, 2.0])
    args = ((2, 3), (1, 2), "SAME")
    want = np.stack([L.reduce_window(x, c, lambda p, q: p * q, *args) for c in inits])
    for backend in BACKENDS:
        got = td.jit(td.vmap(lambda c: T.reduce_window(x, c, lambda p, q: p * q, *args)),
                     backend=backend)(inits)
        np.testing.assert_allclose(got, want, rtol=1e-12)
