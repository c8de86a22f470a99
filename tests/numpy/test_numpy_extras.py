"""The jax.numpy names of issue #32's last list (rot90 ... lcm, nonzero/unique with size=,
bincount(length=), histogram) against jax in x64: values under jit, and first and second
derivatives where differentiable; outside a trace they are numpy's own functions."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import tidu as td
from _support.compare import close as _close
from _support.compare import jax_value

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(11)
X = RNG.normal(size=(4, 5))
V = np.array([-2.5, -1.0, -0.0, 0.0, 1e-300, 0.3, 1.0, 2.0, 7.5, 1e300, np.inf, -np.inf])
XZ = np.where(np.abs(X) < 0.6, 0.0, X)
INTS = np.array([0, 12, -18, 7, 1071, 2**40, -(2**40), 0, 462])
INTS2 = np.array([0, 18, 12, 0, 462, 2**20 * 3, 2**35, 5, -1071])
DUP = np.array([3.0, 1.0, 3.0, 2.0, 1.0, 3.0, 7.0])
LABELS = np.array([0, 3, 1, 3, 3, 0, 5, 9])
DUP_NAN = np.array([[np.nan, 1.0, 3.0], [1.0, np.nan, -0.0], [0.0, 3.0, 1.0]])
ROWS = np.array([[1.0, 2.0], [0.0, 5.0], [1.0, 2.0], [1.0, -1.0], [0.0, 5.0]])


close = partial(_close, rtol=1e-12, atol=1e-14)


# name -> (f(L, x), [inputs], differentiable)
CASES = {
    "rot90": (lambda L, x: L.rot90(x), [X], True),
    "rot90_k": (lambda L, x: (L.rot90(x, 2), L.rot90(x, -1), L.rot90(x, 3, axes=(1, 0))), [X],
                True),
    "heaviside": (lambda L, x: L.heaviside(x, 0.5), [XZ, V], False),
    "sinc": (lambda L, x: L.sinc(x), [X, XZ, np.array([0.0, 1.0, -2.0, 0.5])], True),
    "copysign": (lambda L, x: L.copysign(x, -x[::-1]), [X, V], True),
    "copysign_zero": (lambda L, x: L.copysign(1.0, x), [V], False),
    "logspace": (lambda L, x: L.logspace(x[0, 0], x[1, 1], 7), [X], True),
    "logspace_base": (lambda L, x: L.logspace(x[0, :2], 2.0, 4, endpoint=False, base=2.0), [X],
                      True),
    "geomspace": (lambda L, x: L.geomspace(L.abs(x[0, 0]) + 0.5, 3.0, 6), [X], True),
    "geomspace_neg": (lambda L, x: L.geomspace(-L.abs(x[0, 0]) - 1, -0.25, 5,
                                               endpoint=False), [X], True),
    "vander": (lambda L, x: L.vander(x[0]), [X], True),
    "vander_inc": (lambda L, x: L.vander(x[0], 3, increasing=True), [X], True),
    "ix_": (lambda L, x: x[L.ix_(np.array([0, 2]), np.array([1, 3, 4]))], [X], True),
    "block": (lambda L, x: L.block([[x, x[:, :2]], [x[:1], x[:1, :2]]]), [X], True),
    "block_1d": (lambda L, x: L.block([x[0], 1.0, x[1]]), [X], True),
    "lexsort": (lambda L, x: L.lexsort((L.round(x[0]), L.round(x[1] * 0.3))), [X], False),
    "lexsort_axis0": (lambda L, x: L.lexsort([L.round(x), L.round(x * 0.2)], axis=0), [X],
                      False),
    "put_along_axis": (lambda L, x: L.put_along_axis(x, np.array([[0], [2], [1], [4]]),
                                                     x[:, :1] * 10, axis=1, inplace=False),
                       [X], True),
    "frexp": (lambda L, x: L.frexp(x), [X * 1000, V[np.isfinite(V)]], False),
    "frexp_inf": (lambda L, x: L.frexp(x), [V], False),
    "ldexp": (lambda L, x: L.ldexp(x, np.array([3, -2, 0, 50])), [X[:, 0]], True),
    "ldexp_extreme": (lambda L, x: L.ldexp(x, np.array([3, -2, 1100, -1100, 1100])),
                      [np.array([0.5, -3.0, 1e-300, 1e300, 2.0])], False),
    "gcd": (lambda L, x: L.gcd(x, INTS2), [INTS], False),
    "lcm": (lambda L, x: L.lcm(x, INTS2 % 1000), [INTS % 1000], False),
    "gcd_int32": (lambda L, x: L.gcd(x.astype("int32"), np.int32(12)), [INTS % 10000], False),
    "nonzero": (lambda L, x: L.nonzero(x, size=9), [XZ], False),
    "nonzero_fill": (lambda L, x: L.nonzero(x, size=20, fill_value=-1), [XZ], False),
    "flatnonzero": (lambda L, x: L.flatnonzero(x, size=4), [XZ], False),
    "argwhere": (lambda L, x: L.argwhere(x, size=15, fill_value=(7, 8)), [XZ], False),
    "unique": (lambda L, x: L.unique(x, size=6), [DUP], False),
    "unique_fill": (lambda L, x: L.unique(x, size=3, fill_value=0.0), [DUP, DUP[:1]], False),
    "unique_counts": (lambda L, x: L.unique(x, size=6, return_counts=True), [DUP], False),
    # fewer slots than values: the last slot's run ends at the next value, not at the end
    "unique_counts_short": (lambda L, x: L.unique(x, size=2, return_counts=True), [DUP],
                            False),
    "unique_all": (lambda L, x: L.unique(x, return_index=True, return_inverse=True,
                                         return_counts=True, size=6), [DUP, DUP_NAN, INTS],
                   False),
    "unique_all_short": (lambda L, x: L.unique(x, return_index=True, return_inverse=True,
                                               return_counts=True, size=2, fill_value=-9.0),
                         [DUP, DUP_NAN], False),
    "unique_nan_apart": (lambda L, x: L.unique(x, return_index=True, return_counts=True,
                                               size=8, equal_nan=False), [DUP_NAN], False),
    "unique_axis0": (lambda L, x: L.unique(x, axis=0, return_index=True, return_inverse=True,
                                           return_counts=True, size=4), [ROWS, DUP_NAN],
                     False),
    "unique_axis1": (lambda L, x: L.unique(x, axis=1, return_inverse=True, size=2,
                                           fill_value=-1.0), [ROWS.T, DUP_NAN], False),
    "bincount": (lambda L, x: L.bincount(x, length=7), [LABELS], False),
    "bincount_w": (lambda L, x: L.bincount(x, weights=np.arange(8.0), length=10), [LABELS],
                   False),
    "histogram": (lambda L, x: L.histogram(x, bins=4), [X], False),
    "histogram_range": (lambda L, x: L.histogram(x, bins=5, range=(-1.0, 1.0), weights=x * x,
                                                 density=True), [X], False),
    "histogram_edges": (lambda L, x: L.histogram(x, bins=np.array([-3.0, -1.0, 0.0, 3.0])),
                        [X], False),
    "polyfit": (lambda L, x: L.polyfit(x[0], x[1], 2), [X], True),
    "polyfit_2d": (lambda L, x: L.polyfit(x[:, 0], x[:, 1:], 1), [X], True),
    "polyfit_cov": (lambda L, x: L.polyfit(x[0], x[1], 2, cov=True), [X], True),
    "polyfit_cov_w": (lambda L, x: L.polyfit(x[0], x[1], 1, w=L.abs(x[2]) + 0.5, cov=True), [X],
                      True),
    "polyfit_cov_2d": (lambda L, x: L.polyfit(x[:, 0], x[:, 1:], 2, cov=True), [X.T], True),
    "polyfit_cov_unscaled": (lambda L, x: (L.polyfit(x[0], x[1], 2, cov="unscaled"),
                                           L.polyfit(x[:, 0], x[:, 1:], 1, cov="unscaled")),
                             [X.T], True),
}


def _rows():
    for name, (f, xs, _) in CASES.items():
        for i, x in enumerate(xs):
            yield pytest.param(f, np.asarray(x), id=f"{name}-{i}")


@pytest.mark.parametrize("f,x", list(_rows()))
def test_values_against_jax(f, x):
    want = jax.tree_util.tree_leaves(f(jnp, jnp.asarray(x)))
    got = jax.tree_util.tree_leaves(td.jit(lambda x: f(td, x))(x))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        close(g, w)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c[2]])
def test_first_and_second_derivatives_against_jax(name):
    f, xs, _ = CASES[name]
    for x in xs:
        x = np.asarray(x, float)
        ws = [RNG.normal(size=np.shape(o)) for o in jax.tree_util.tree_leaves(f(jnp, x))]

        def loss(L):
            return lambda x: sum(L.sum(L.where(L.isfinite(o), o, 0.0) * w) for o, w in
                                 zip(jax.tree_util.tree_leaves(f(L, x)), ws))

        close(td.grad(loss(td))(x), jax_value(jax.grad(loss(jnp)), jnp.asarray(x)), rtol=1e-9,
              atol=1e-10)
        d = RNG.normal(size=np.shape(x))

        def dd(L, g):
            return lambda s: g(lambda s: loss(L)(x + s * d))(s)

        close(td.grad(dd(td, td.grad))(0.0), jax_value(jax.grad(dd(jnp, jax.grad)), 0.0),
              rtol=1e-8, atol=1e-9)


def test_outside_a_trace_they_are_numpys():
    close(td.rot90(X), np.rot90(X))
    close(td.gcd(INTS, INTS2), np.gcd(INTS, INTS2))
    close(td.histogram(X, bins=3)[0], np.histogram(X, bins=3)[0])
    close(td.nonzero(XZ)[1], np.nonzero(XZ)[1])
    close(td.unique(DUP), np.unique(DUP))
    assert td.tril_indices(4, 1, 5)[1].tolist() == np.tril_indices(4, 1, 5)[1].tolist()
    assert [a.tolist() for a in td.triu_indices_from(X, -1)] == \
        [a.tolist() for a in np.triu_indices_from(X, -1)]
    assert [a.tolist() for a in td.diag_indices(3, 3)] == \
        [a.tolist() for a in jnp.diag_indices(3, 3)]


def test_traced_selections_need_a_static_size():
    with pytest.raises(ValueError, match="nonzero: .*static size="):
        td.jit(lambda x: td.nonzero(x + 0))(XZ)
    with pytest.raises(ValueError, match="bincount: .*static size="):
        td.jit(lambda x: td.bincount(x))(LABELS)
    with pytest.raises(ValueError, match="put_along_axis: tidu arrays are immutable"):
        td.jit(lambda x: td.put_along_axis(x, np.zeros((4, 1), int), 0.0, axis=1))(X)
    with pytest.raises(TypeError, match="gcd: integer arguments required"):
        td.jit(lambda x: td.gcd(x, 2))(X)


def test_frexp_and_ldexp_are_exact():
    x = np.concatenate([X.ravel() * 10.0 ** np.arange(-150, 150, 15), [1e300, 5e-324, 2.0**-1022,
                                                                        -(2.0**1023)]])
    m, e = td.jit(td.frexp)(x)
    mw, ew = np.frexp(x)
    np.testing.assert_array_equal(m, mw)
    np.testing.assert_array_equal(e, ew)
    np.testing.assert_array_equal(td.jit(td.ldexp)(mw, ew), x)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_nextafter_is_numpys_bit_for_bit(dtype):
    f = np.finfo(dtype)
    x = np.array([0.0, -0.0, 1.0, 1.0, -1.0, 0.5, 3.0, -7.25, float(f.max), float(f.max),
                  float(f.smallest_subnormal), -float(f.smallest_subnormal),
                  float(f.smallest_normal), float(f.smallest_normal), np.inf, -np.inf, np.nan,
                  2.0, 1e-30], dtype)
    y = np.array([1.0, -1.0, 2.0, 0.0, -2.0, 0.0, 3.0, 0.0, np.inf, 0.0, 0.0, 1.0, 0.0, 1.0,
                  0.0, 0.0, 1.0, np.nan, -1.0], dtype)
    got = td.jit(td.nextafter)(x, y)
    with np.errstate(over="ignore"):
        want = np.nextafter(x, y)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.dtype(dtype)
