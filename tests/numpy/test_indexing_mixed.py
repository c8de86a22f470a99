"""Advanced indices mixed with slices, ellipses and None, against numpy and jax.numpy in x64.

numpy's rule (which jax follows): the broadcast index axes replace the advanced indices when these
are adjacent in the index as written, and go first when a slice, None or an ellipsis separates
them -- even an ellipsis that covers no axis.  The table enumerates every index pattern over the
tokens A (an advanced index), S (a slice), E (an ellipsis) and N (None) of up to five items on a
4-D array (so the ellipsis covers zero, one or more axes), and fills the A's with int arrays of
two shapes, static ints, traced int scalars and traced int arrays.  Each pattern is checked for
reads (x[idx]) and for .at[idx].set / .add: shapes and values against numpy and jax."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)
rng = np.random.default_rng(11)

X = rng.standard_normal((3, 4, 2, 5))


def test_ellipsis_of_no_axes_separates_advanced_indices():
    """Issue #28 (6): y[:, i, ..., i] on a 3-D array is (2, 3) in numpy and jax, was (3, 2)."""
    y = np.arange(60.).reshape(3, 4, 5)
    i = np.array([0, 1])
    got = td.jit(lambda y: y[:, i, ..., i])(y)
    assert got.shape == y[:, i, ..., i].shape == jnp.asarray(y)[:, i, ..., i].shape == (2, 3)
    np.testing.assert_array_equal(got, y[:, i, ..., i])
    # the same through .at[] (the plan is shared) and with a traced index
    v = np.arange(6.).reshape(2, 3)
    want = y.copy()
    want[:, i, ..., i] = v
    np.testing.assert_array_equal(td.jit(lambda y, v: y.at[:, i, ..., i].set(v))(y, v), want)
    np.testing.assert_array_equal(jnp.asarray(y).at[:, i, ..., i].set(v), want)
    got = td.jit(lambda y, j: y[:, j, ..., j])(y, i)
    np.testing.assert_array_equal(got, y[:, i, ..., i])


def _patterns():
    out = set()
    for n in range(1, 6):
        for p in itertools.product("ASEN", repeat=n):
            if "A" not in p or p.count("E") > 1 or p.count("N") > 1:
                continue
            if p.count("A") + p.count("S") > X.ndim:
                continue
            out.add("".join(p))
    return sorted(out, key=lambda p: (len(p), p))


PATTERNS = _patterns()
# advanced index kinds; every axis of X has at least two elements, so each is in range
KINDS = {
    "a": np.array([1, 0]),                 # int array (2,)
    "c": np.array([[0], [-1]]),            # int array (2, 1), negative: broadcasts to (2, 2)
    "i": 1,                                # static int (advanced when mixed with arrays)
    "t": np.asarray(-1, np.int64),         # traced int scalar
    "u": np.array([0, -2], np.int32),      # traced int32 array
}
TRACED = ("t", "u")
ROTATION = ("c", "t", "u", "i", "a")
SLICES = (slice(None), slice(1, None), slice(None, None, 2), slice(None, None, -1),
          slice(-1, 0, -1))


def _cases(k: int, p: str):
    """The index fillings tried for pattern p (its k-th in the table): all int arrays, and one
    rotation of every kind, so each kind meets each position over the table."""
    m = p.count("A")
    kinds = [("a",) * m, tuple(ROTATION[(k + j) % len(ROTATION)] for j in range(m))]
    return list(dict.fromkeys(kinds))


def _build(p: str, kinds, k: int, traced=None):
    """The index for pattern p; traced values (a list, consumed in order) replace kinds t, u."""
    items, ai, si = [], 0, k
    for tok in p:
        if tok == "A":
            kind = kinds[ai]
            ai += 1
            if kind in TRACED and traced is not None:
                items.append(traced.pop(0))
            else:
                items.append(KINDS[kind])
        elif tok == "S":
            items.append(SLICES[si % len(SLICES)])
            si += 1
        elif tok == "E":
            items.append(Ellipsis)
        else:
            items.append(None)
    return tuple(items)


def _check(got, want_np, want_jax, what):
    got = np.asarray(got)
    assert got.shape == want_np.shape == np.asarray(want_jax).shape, what
    np.testing.assert_array_equal(got, want_np, err_msg=what)
    np.testing.assert_array_equal(got, np.asarray(want_jax), err_msg=what)


@pytest.mark.parametrize("k,pattern", list(enumerate(PATTERNS)), ids=PATTERNS)
def test_mixed_index_table(k, pattern):
    for kinds in _cases(k, pattern):
        idx = _build(pattern, kinds, k)
        jidx = tuple(jnp.asarray(i) if isinstance(i, np.ndarray) else i for i in idx)
        tvals = [KINDS[kd] for kd in kinds if kd in TRACED]
        what = f"x[{pattern} = {kinds}]"

        def index(*tr):
            return _build(pattern, kinds, k, list(tr))

        want = X[idx]
        _check(td.jit(lambda x, *tr: x[index(*tr)])(X, *tvals), want, jnp.asarray(X)[jidx],
               what)
        v = rng.standard_normal(want.shape)
        want_set = X.copy()
        want_set[idx] = v
        _check(td.jit(lambda x, v, *tr: x.at[index(*tr)].set(v))(X, v, *tvals), want_set,
               jnp.asarray(X).at[jidx].set(v), what + ".set")
        want_add = X.copy()
        np.add.at(want_add, idx, v)
        _check(td.jit(lambda x, v, *tr: x.at[index(*tr)].add(v))(X, v, *tvals), want_add,
               jnp.asarray(X).at[jidx].add(v), what + ".add")


def test_table_covers_the_neighbours():
    """The table holds ellipses of zero and of several axes between and around advanced indices,
    and every kind of advanced index."""
    zero_ell = [p for p in PATTERNS if "E" in p and p.count("A") + p.count("S") == X.ndim]
    assert any(p.index("E") > p.index("A") and "A" in p[p.index("E"):] for p in zero_ell)
    assert any(p.count("A") + p.count("S") <= X.ndim - 2 and "E" in p for p in PATTERNS)
    used = {kd for k, p in enumerate(PATTERNS) for c in _cases(k, p) for kd in c}
    assert used == set(KINDS)


def test_bool_array_indices_are_refused():
    """Boolean masks are not supported (data-dependent shapes); the error says so."""
    m = np.array([True, False, True])
    with pytest.raises(IndexError, match="boolean mask"):
        td.jit(lambda x: x[m, :, np.array([0, 1])])(X)
    with pytest.raises(IndexError, match="boolean mask"):
        td.jit(lambda x: x.at[:, ..., m].set(0.0))(X[..., :3])
