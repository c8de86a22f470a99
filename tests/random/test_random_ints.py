"""td.random's integer draws of every width against jax.random (x64, partitionable threefry):
bits of uint8/uint16/uint32/uint64, randint of each integer dtype (int64 by default, as jax)
over spans that hit the clipping and wrap-around branches, and choice with replacement (which
draws int64 indices, as jax). All bit-identical, in and out of jit, on both backends."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

UINTS = ("uint8", "uint16", "uint32", "uint64")
INTS = ("int8", "int16", "int32", "int64") + UINTS


@pytest.mark.parametrize("dtype", UINTS)
@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3])
def test_bits_identical(seed, dtype):
    k, jk = td.random.PRNGKey(seed), jax.random.PRNGKey(seed)
    for shape in [(), (5,), (3, 4)]:
        got = td.random.bits(k, shape, dtype)
        want = np.asarray(jax.random.bits(jk, shape, dtype))
        assert got.dtype == want.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)
    got, want = td.random.bits(k, (4,)), np.asarray(jax.random.bits(jk, (4,)))
    assert got.dtype == want.dtype == np.uint64  # jax's default under x64
    np.testing.assert_array_equal(got, want)


def _spans(dtype):
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    out = [(0, 10), (3, 3), (5, 2), (lo, hi), (0, hi)]
    if info.bits < 64:  # maxval beyond the dtype: the span one larger (randint(0, 256, uint8))
        out += [(0, hi + 1), (lo, hi + 1)]
    if lo < 0:
        out += [(-5, 17), (lo, 0)]
    big = lambda v: np.uint64(v) if v >= 2**63 else v  # noqa: E731 - a Python int that large
    return [(big(a), big(b)) for a, b in out]          # is refused by jax and tidu alike


@pytest.mark.parametrize("dtype", INTS)
def test_randint_identical(dtype):
    k, jk = td.random.PRNGKey(3), jax.random.PRNGKey(3)
    for lo, hi in _spans(dtype):
        got = td.random.randint(k, (40,), lo, hi, dtype)
        want = np.asarray(jax.random.randint(jk, (40,), lo, hi, dtype))
        assert got.dtype == want.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"[{lo}, {hi})")


def test_randint_default_is_int64_and_traced_bounds():
    k, jk = td.random.PRNGKey(9), jax.random.PRNGKey(9)
    got = td.random.randint(k, (30,), -2**40, 2**50)
    want = np.asarray(jax.random.randint(jk, (30,), -2**40, 2**50))
    assert got.dtype == want.dtype == np.int64
    np.testing.assert_array_equal(got, want)
    lo, hi = np.array([0, -3, 100], np.int64), np.array([[7], [2**33]], np.int64)
    for backend in ("cpu", "xla"):
        f = td.jit(lambda key, a, b: td.random.randint(key, (2, 3), a, b, td.int16),
                   backend=backend)
        np.testing.assert_array_equal(f(k, lo, hi),
                                      jax.random.randint(jk, (2, 3), lo, hi, jnp.int16))


def test_inside_jit_vmap_and_xla():
    keys = td.random.split(td.random.PRNGKey(1), 4)
    jkeys = jax.random.split(jax.random.PRNGKey(1), 4)
    for backend in ("cpu", "xla"):
        f = td.jit(lambda key: (td.random.bits(key, (6,), td.uint64),
                                td.random.bits(key, (6,), td.uint8),
                                td.random.randint(key, (6,), -100, 100, td.int8)),
                   backend=backend)
        for i in range(4):
            got = f(keys[i])
            np.testing.assert_array_equal(got[0], jax.random.bits(jkeys[i], (6,), jnp.uint64))
            np.testing.assert_array_equal(got[1], jax.random.bits(jkeys[i], (6,), jnp.uint8))
            np.testing.assert_array_equal(
                got[2], jax.random.randint(jkeys[i], (6,), -100, 100, jnp.int8))
    got = td.vmap(lambda key: td.random.randint(key, (5,), 0, 2**62))(keys)
    np.testing.assert_array_equal(
        got, jax.vmap(lambda key: jax.random.randint(key, (5,), 0, 2**62))(jkeys))


def test_choice_with_replacement_identical():
    k, jk = td.random.PRNGKey(4), jax.random.PRNGKey(4)
    for n, shape in [(10, (7,)), (1, (3,)), (1000, (4, 5))]:
        got = td.random.choice(k, n, shape)
        want = np.asarray(jax.random.choice(jk, n, shape))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    a = np.arange(24.0).reshape(4, 6)
    for axis in (0, 1):
        np.testing.assert_array_equal(td.random.choice(k, a, (5,), axis=axis),
                                      jax.random.choice(jk, a, (5,), axis=axis))
    small = np.array([3, 1, 4], np.uint8)
    got = td.random.choice(k, small, (8,))
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, jax.random.choice(jk, small, (8,)))


def test_bad_dtypes_are_refused():
    k = td.random.PRNGKey(0)
    with pytest.raises(TypeError, match="unsigned int dtype"):
        td.random.bits(k, (2,), td.int8)
    with pytest.raises(TypeError, match="integer dtypes"):
        td.random.randint(k, (2,), 0, 3, td.float64)


def test_large_draws_split_over_threads_are_jaxs():
    # draws of >= 2^18 values are hashed in ranges of 2^16 counters on the thread pool, by the
    # AVX2/AVX-512 loop where the CPU has it: the same bits as one pass
    k, jk = td.random.PRNGKey(9), jax.random.PRNGKey(9)
    ks, jks = td.random.split(k, 3), jax.random.split(jk, 3)
    np.testing.assert_array_equal(td.vmap(lambda q: td.random.bits(q, (300_001,)))(ks),
                                  jax.vmap(lambda q: jax.random.bits(q, (300_001,)))(jks))
    np.testing.assert_array_equal(td.random.bits(k, (2**18 + 5,), td.uint32),
                                  jax.random.bits(jk, (2**18 + 5,), jnp.uint32))
