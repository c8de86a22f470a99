"""The vectorised float64 erf_inv (kernels/math.hpp, over glibc's log replicated in
kernels/log_glibc.hpp) and the Threefry2x32Iota counter offset give the scalar path's bits: each
SIMD variant the CPU has (TIDU_SIMD, in a subprocess) against TIDU_SIMD=generic, whose float64
erf_inv is the scalar function element by element, on edge values (0, -0, denormals, tiny,
near +-1, the log1p and polynomial range boundaries, NaN, +-1, beyond) and on float64 normals."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tidu as td
from tidu.trace.tracer import _current, _emit, _lift

_SCRIPT = r"""
import json, sys
import numpy as np
import tidu as td
sys.path.insert(0, sys.argv[1])
import test_simd_random as m
x = m.edge_array()
y = td.jit(td.scipy.special.erfinv)(x)
n = td.jit(lambda k: td.random.normal(k, (70_001,), td.float64))(td.random.PRNGKey(5))
print(json.dumps({"variant": td._eval.simd_variant(),
                  "erfinv": np.asarray(y).view(np.uint64).tolist(),
                  "normal": np.asarray(n).view(np.uint64).tolist()}))
"""


def edge_array() -> np.ndarray:
    """Edge values spread over clean 256-element chunks (the vector loop), a chunk holding NaN
    and |y| >= 1 (element by element), and uniform values in (-1, 1)."""
    tiny = np.finfo(np.float64).tiny
    r_log = np.sqrt(np.sqrt(2) - 1)  # |y| where log1p switches from Cephes' to log(1 + x)
    r_625, r_16 = np.sqrt(-np.expm1(-6.25)), np.sqrt(-np.expm1(-16.0))  # w = 6.25, 16
    edges = [0.0, 5e-324, 1e-310, tiny, np.nextafter(tiny, 1), 1e-300, 1e-200, 1e-20, 1e-8,
             0.5, 0.9375, 0.99, 0.999, 0.999999, 1 - 2 ** -52, 1 - 2 ** -53]
    for b in (r_log, r_625, r_16):
        edges += [np.nextafter(b, 0), b, np.nextafter(b, 2)]
    edges = np.array(edges)
    edges = np.concatenate([edges, -edges])
    rng = np.random.default_rng(3)
    clean = rng.uniform(-1, 1, 4 * 256)
    clean[::19][:edges.size] = edges
    clean[-edges.size:] = edges
    bad = rng.uniform(-1, 1, 256)
    bad[[3, 50, 100, 101, 200]] = [np.nan, 1.0, -1.0, 2.0, -np.inf]
    bad[10:10 + edges.size] = edges
    tail = np.concatenate([edges, [np.inf]])  # a short last chunk
    return np.concatenate([clean, bad, rng.uniform(-1, 1, 3000), tail])


def _run(variant):
    env = dict(os.environ, TIDU_SIMD=variant)
    res = subprocess.run([sys.executable, "-c", _SCRIPT, os.path.dirname(__file__)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def generic():
    out = _run("generic")
    assert out["variant"] == "generic"
    return out


@pytest.mark.parametrize("variant", ["avx2", "avx512"])
def test_erfinv_float64_every_simd_variant_is_the_scalar_path(variant, generic):
    got = _run(variant)
    if got["variant"] != variant:
        pytest.skip(f"the CPU has no {variant}")
    assert got["erfinv"] == generic["erfinv"]
    assert got["normal"] == generic["normal"]


def test_erfinv_float64_edges_in_process():
    """This process's variant on the whole array against one element at a time (a length-1
    chunk), and the special values."""
    x = edge_array()
    y = np.asarray(td.jit(td.scipy.special.erfinv)(x))
    f = td.jit(td.scipy.special.erfinv)
    idx = np.r_[0:300, 1024:1300, x.size - 40:x.size]
    for i in idx:
        want = np.asarray(f(np.float64(x[i])))
        assert want.view(np.uint64) == y[i].view(np.uint64) or (np.isnan(want) and np.isnan(y[i])), (i, x[i])
    with np.errstate(invalid="ignore"):
        assert np.isnan(y[np.isnan(x) | (np.abs(x) > 1)]).all()
    assert np.array_equal(y[np.abs(x) == 1], x[np.abs(x) == 1] * np.inf)
    assert y[0] == 0 and not np.signbit(y[0]) and np.signbit(y[np.flatnonzero(x == 0)[-1]])


def test_erfinv_float64_matches_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    x = edge_array()
    x = x[np.abs(x) > 1e-300]  # XLA:CPU may flush denormals; tidu does not
    got = np.asarray(td.jit(td.scipy.special.erfinv)(x))
    want = np.asarray(jax.jit(jax.scipy.special.erfinv)(x))
    np.testing.assert_array_equal(got.view(np.uint64)[~np.isnan(want)],
                                  want.view(np.uint64)[~np.isnan(want)])


def _iota(key, start, shape, fold=False):
    t = _current()
    return _emit(t, td.ops.Threefry2x32Iota(shape, fold), key, _lift(t, start))


@pytest.mark.parametrize("fold", [False, True])
def test_threefry_iota_start_is_the_offset_counters(fold):
    """Threefry2x32Iota with a start operand hashes counters start + i (64-bit), as the
    Threefry2x32 of explicit counts; batched starts under vmap, one per key."""
    key = np.array([7, 2**31 + 3], np.uint32)
    for start in (0, 1, 12345, 2**32 - 5):  # the last carries into the high word
        i = np.uint64(start) + np.arange(60, dtype=np.uint64)
        cnt = np.stack([(i >> np.uint64(32)).astype(np.uint32), i.astype(np.uint32)], -1)
        want = td.ops.Threefry2x32().impl(key, cnt.reshape(3, 20, 2))
        if fold:
            want = want[..., 0] ^ want[..., 1]
        s = np.uint32(start)
        for backend in ("cpu", "xla"):
            got = td.jit(lambda k, s: _iota(k, s, (3, 20), fold), backend=backend)(key, s)
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(td.ops.Threefry2x32Iota((3, 20), fold).impl(key, s), want)
    keys = np.array([[1, 2], [3, 4], [5, 6]], np.uint32)
    starts = np.array([0, 100, 2**31], np.uint32)
    got = td.vmap(lambda k, s: _iota(k, s, (40,), fold))(keys, starts)
    for j in range(3):
        np.testing.assert_array_equal(got[j], td.jit(lambda k, s: _iota(k, s, (40,), fold))(keys[j], starts[j]))
    got = td.vmap(lambda k: _iota(k, np.uint32(9), (40,), fold))(keys)  # start unbatched
    np.testing.assert_array_equal(got[1], td.jit(lambda k: _iota(k, np.uint32(9), (40,), fold))(keys[1]))


def test_threefry_iota_start_checked():
    with pytest.raises(TypeError, match="start must be uint32 of shape"):
        td.jit(lambda k: _iota(k, np.int32(3), (4,)))(np.zeros(2, np.uint32))
    with pytest.raises(TypeError, match="start must be uint32 of shape"):
        td.jit(lambda k: _iota(k, np.zeros(3, np.uint32), (4,)))(np.zeros(2, np.uint32))


def test_saved_blocked_categorical_draws_the_same(tmp_path, monkeypatch):
    """A blocked categorical (Threefry2x32Iota with its start, inside scan) saved, loaded by the
    C++ loader (with its validation) and evaluated there gives Python's numbers, which are the
    whole draw's."""
    import tidu.random.distributions as dist
    monkeypatch.setattr(dist, "_BLOCK", 64)  # blocks of 64 noise values: 6 rows of 10 classes
    logits = np.log(np.linspace(1.0, 2.0, 10))

    def draw(key):
        return td.random.categorical(key, logits, shape=(200,))
    F = td.build(draw, key=td.spec((2,), "uint32"))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs))
    prog.save(tmp_path / "cat.tidu")
    loaded = td.load(tmp_path / "cat.tidu")
    k = td.random.PRNGKey(3)
    (got,) = loaded.eval([k])
    np.testing.assert_array_equal(got, prog.eval([k])[0])
    monkeypatch.setattr(dist, "_BLOCK", 1 << 20)  # whole: 2,000 values at once
    np.testing.assert_array_equal(got, td.jit(draw)(k))
