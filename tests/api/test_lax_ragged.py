"""td.lax's ragged_dot, ragged_dot_general (three modes, with batch dims and per-prefix group
sizes), platform_dependent and with_sharding_constraint against jax.lax in x64: values on the
interpreter and XLA, first derivatives against jax's, and the errors for bad input; and the
names accepted and ignored: DotAlgorithm/DotAlgorithmPreset as precision=, accuracy= with
Tolerance/AccuracyMode."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
from jax import lax as L  # noqa: E402

jax.config.update("jax_enable_x64", True)

T = td.lax
R = np.random.default_rng(7)
BACKENDS = ("cpu", "xla")


def _dn(M, dot, ragged, group):
    return M.RaggedDotDimensionNumbers(dot, ragged, group)


# (id, lhs, rhs, group_sizes, (dot dimension numbers, lhs ragged, rhs group) or None: ragged_dot)
CASES = [
    ("ragged_dot", R.standard_normal((7, 3)), R.standard_normal((3, 3, 4)),
     np.array([2, 0, 4], np.int32), None),
    ("ragged_dot-short", R.standard_normal((7, 3)), R.standard_normal((2, 3, 4)),
     np.array([2, 3], np.int32), None),  # rows 5 and 6 in no group: zero
    ("free-batch", R.standard_normal((2, 6, 3)), R.standard_normal((3, 2, 3, 5)),
     np.array([[1, 2, 3], [3, 3, 0]], np.int32),
     (((2,), (2,)), ((0,), (1,))), (1,), (0,)),
    ("contracting", R.standard_normal((4, 6)), R.standard_normal((6, 5)),
     np.array([2, 1, 3], np.int32), (((1,), (0,)), ((), ())), (1,), ()),
    ("contracting-batch", R.standard_normal((2, 4, 6)), R.standard_normal((2, 6, 3)),
     np.array([4, 0, 2], np.int32), (((2,), (1,)), ((0,), (0,))), (2,), ()),
    ("batch", R.standard_normal((5, 2, 3)), R.standard_normal((5, 3, 4)),
     np.array([2, 3], np.int32), (((2,), (1,)), ((0,), (0,))), (0,), ()),
]
IDS = [c[0] for c in CASES]


def _call(M, case):
    _, _, _, _, *dn = case
    if dn[0] is None:
        return lambda a, b, g: M.ragged_dot(a, b, g)
    return lambda a, b, g: M.ragged_dot_general(a, b, g, _dn(M, *dn))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_match_jax(case, backend):
    a, b, g = case[1:4]
    want = np.asarray(_call(L, case)(a, b, g))
    got = td.jit(_call(T, case), backend=backend)(a, b, g)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_match_jax(case):
    a, b, g = case[1:4]
    w = R.standard_normal(np.shape(_call(L, case)(a, b, g)))

    def loss(M, S):
        return lambda x, y: S.sum(_call(M, case)(x, y, g) * w)

    got = td.jit(td.grad(loss(T, td), argnums=(0, 1)))(a, b)
    if case[0].startswith(("ragged", "free")):
        want = jax.grad(loss(L, jax.numpy), argnums=(0, 1))(a, b)
    else:  # jax's reverse mode is not implemented for ragged contracting or batch dims: its
        # forward mode along a random direction checks tidu's gradient
        want = [None, None]
        u, v = R.standard_normal(a.shape), R.standard_normal(b.shape)
        _, d = jax.jvp(loss(L, jax.numpy), (a, b), (u, v))
        np.testing.assert_allclose(np.sum(got[0] * u) + np.sum(got[1] * v), d, rtol=1e-12)
    for u, v in zip(got, want):
        if v is not None:
            np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)


def test_preferred_element_type():
    a = R.standard_normal((5, 3)).astype(np.float32)
    b = R.standard_normal((2, 3, 2)).astype(np.float32)
    g = np.array([3, 2], np.int32)
    want = L.ragged_dot(a, b, g, preferred_element_type=np.float64)
    got = td.jit(lambda x, y: T.ragged_dot(x, y, g, preferred_element_type=np.float64))(a, b)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_ragged_bad_input_names_the_problem():
    a, b = np.ones((4, 3)), np.ones((2, 3, 2))
    with pytest.raises(TypeError, match="group_sizes must be integers"):
        td.jit(lambda x, y: T.ragged_dot(x, y, np.array([2.0, 2.0])))(a, b)
    with pytest.raises(TypeError, match="group dimension 0 has size 2, but group_sizes has 3"):
        td.jit(lambda x, y: T.ragged_dot(x, y, np.array([1, 1, 2], np.int32)))(a, b)
    with pytest.raises(NotImplementedError, match="group_offset"):
        td.jit(lambda x, y: T.ragged_dot(x, y, np.array([2, 2], np.int32),
                                         group_offset=np.array([0], np.int32)))(a, b)
    with pytest.raises(TypeError, match="must be a RaggedDotDimensionNumbers"):
        td.jit(lambda x, y: T.ragged_dot_general(x, y, np.array([2, 2], np.int32),
                                                 (((1,), (1,)), ((), ()))))(a, b)


def test_platform_dependent_takes_the_cpu_branch():
    x = np.arange(3.0)
    want = L.platform_dependent(x, cpu=lambda v: v * 2, default=lambda v: v * 3)
    got = td.jit(lambda v: T.platform_dependent(v, cpu=lambda u: u * 2,
                                                default=lambda u: u * 3))(x)
    np.testing.assert_array_equal(got, want)
    got = td.jit(lambda v: T.platform_dependent(v, tpu=lambda u: u * 2,
                                                default=lambda u: u + 1))(x)
    np.testing.assert_array_equal(got, x + 1)
    with pytest.raises(NotImplementedError, match="no branch for 'cpu'"):
        td.jit(lambda v: T.platform_dependent(v, cuda=lambda u: u))(x)
    with pytest.raises(ValueError, match="unknown platform 'cpux'"):
        td.jit(lambda v: T.platform_dependent(v, cpux=lambda u: u))(x)


def test_with_sharding_constraint_is_a_sharding_hint():
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()[:1]), ("a",))
    sh = NamedSharding(mesh, PartitionSpec("a", None))
    x = R.standard_normal((4, 3))

    def f(v):
        return T.with_sharding_constraint(v * 2.0, sh) + 1.0

    text = str(td.build(f, v=td.spec((4, 3), "float64")))
    assert "ShardingHint" in text
    for backend in BACKENDS:
        np.testing.assert_allclose(td.jit(f, backend=backend)(x), x * 2.0 + 1.0)
    g = td.jit(td.grad(lambda v: td.sum(f(v) ** 2)))(x)
    np.testing.assert_allclose(g, 4.0 * (2.0 * x + 1.0))
    class Fake:  # jax refuses to build a NamedSharding naming an axis its Mesh lacks
        spec = ("b",)

    Fake.mesh = mesh
    with pytest.raises(ValueError, match="names 'b', not an axis of the Mesh"):
        td.jit(lambda v: T.with_sharding_constraint(v, Fake()))(x)
    with pytest.raises(TypeError, match="NamedSharding"):
        td.jit(lambda v: T.with_sharding_constraint(v, PartitionSpec("a")))(x)


def test_dot_algorithms_are_accepted_and_ignored():
    """DotAlgorithm and DotAlgorithmPreset as precision=: jax's fields and members; tidu's
    product is the operands' dtype's (here float64, as jax's F64_F64_F64)."""
    assert [m.name for m in T.DotAlgorithmPreset] == [m.name for m in L.DotAlgorithmPreset]
    assert T.DotAlgorithm._fields == tuple(
        p for p in __import__("inspect").signature(L.DotAlgorithm).parameters)
    a, b = R.standard_normal((3, 4)), R.standard_normal((4, 2))
    want = L.dot(a, b, precision=L.DotAlgorithmPreset.F64_F64_F64)
    for prec in (T.DotAlgorithmPreset.F64_F64_F64, T.DotAlgorithm("float64", "float64",
                                                                  "float64")):
        got = td.jit(lambda x, y, p=prec: T.dot(x, y, precision=p))(a, b)
        np.testing.assert_allclose(got, want, rtol=1e-14)


@pytest.mark.parametrize("name", ["cbrt", "cos", "exp", "exp2", "expm1", "log", "log1p",
                                  "logistic", "rsqrt", "sin", "sqrt", "tan", "tanh"])
def test_accuracy_is_accepted_and_ignored(name):
    """jax's accuracy= on its transcendental functions: tidu's or jax's Tolerance and
    AccuracyMode are taken, and the value is the one without them."""
    x = np.abs(R.standard_normal(5)) + 0.2
    plain = td.jit(getattr(T, name))(x)
    np.testing.assert_allclose(plain, getattr(L, name)(x), rtol=1e-13)
    for acc in (T.AccuracyMode.HIGHEST, T.Tolerance(atol=1e-6, rtol=1e-6),
                L.AccuracyMode.DEFAULT, L.Tolerance(atol=0.0, ulps=1)):
        got = td.jit(lambda v, a=acc: getattr(T, name)(v, accuracy=a))(x)
        np.testing.assert_array_equal(got, plain)
    with pytest.raises(TypeError, match="accuracy must be"):
        td.jit(lambda v: getattr(T, name)(v, accuracy="high"))(x)
    with pytest.raises(ValueError, match="not rtol and ulps"):
        T.Tolerance(rtol=1e-3, ulps=2)
