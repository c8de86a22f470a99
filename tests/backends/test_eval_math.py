"""Accuracy of the evaluator's transcendental kernels (cpp/include/tidu/fastmath.hpp) in ulps,
against the C library (Python's math module, double precision, rounded to the dtype), over wide
random ranges and special values, on every evaluation path: the array kernel, blocked chains,
the all-scalar fast path and eval_batch, and each SIMD variant the CPU has (TIDU_SIMD)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import tidu as td

FNS = {"exp": (td.exp, math.exp), "expm1": (td.expm1, math.expm1), "log": (td.log, math.log),
       "log1p": (td.log1p, math.log1p), "sin": (td.sin, math.sin), "cos": (td.cos, math.cos),
       "tanh": (td.tanh, math.tanh)}
# Largest error allowed, in ulps of the dtype.  float32 exp, expm1, log, log1p and tanh run float
# kernels in float arithmetic; float32 sin and cos are evaluated in double and rounded once.
MAX_ULP = {"float64": {"exp": 1, "expm1": 2, "log": 1, "log1p": 2, "sin": 1, "cos": 1, "tanh": 3},
           "float32": {"exp": 1, "expm1": 2, "log": 1, "log1p": 2, "sin": 1, "cos": 1, "tanh": 2}}

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
           2.225073858507201e-308, 1.0, -1.0, 1.0 + 2**-52, 1.0 - 2**-53, -1.0 + 2**-53, 0.5,
           1e-300, -1e-300, 1e-18, -1e-18, 2**-1022, 708.0, 708.0000001, 709.782712893384,
           709.7827128933841, 710.0, -708.0, -708.4, -745.1332191019411, -745.1332191019412,
           -746.0, -45.0, -45.0001, -40.0, 19.0, 19.1, 20.0, 20.1, -20.1, 1e300, -1e300,
           1.7976931348623157e308, -1.7976931348623157e308, 88.72283, 88.72284, -87.33655,
           -103.97208, -104.0, 524287.9, 524288.0, -524288.0, 1e6, 1e22, -1e22, 2.0**60,
           3.141592653589793, 1.5707963267948966, 6381956970095103.0 * 2.0**797,
           0.7853981633974483, 1e5 * math.pi, 3.4028235e38, -3.4028235e38, 1.17549435e-38,
           1.4e-45]


def reference(name: str, x: np.ndarray, dtype) -> np.ndarray:
    """The C library's double result for each value, rounded to dtype (numpy's for the values
    math refuses: poles and overflow)."""
    f = FNS[name][1]
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        fallback = getattr(np, name)(x64)
    out = np.empty_like(x64)
    for i, v in enumerate(x64.tolist()):
        try:
            out[i] = f(v)
        except (ValueError, OverflowError):
            out[i] = fallback[i]
    with np.errstate(all="ignore"):
        return out.astype(dtype)


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in ulps of want; specials must match exactly (NaN, infinities, sign of 0)."""
    dt = want.dtype
    assert got.dtype == dt
    exact = (got == want) & (np.signbit(got) == np.signbit(want))
    exact |= np.isnan(got) & np.isnan(want)
    spacing = np.spacing(np.abs(want)).astype(np.float64)
    spacing = np.where(np.isfinite(spacing) & (spacing > 0), spacing, np.inf)
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(np.float64) - want.astype(np.float64)) / spacing
    err = np.where(np.isfinite(want) & np.isfinite(got), err, np.inf)
    return np.where(exact, 0.0, err)


def wide_values(dtype, n=20_000, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    big = 700.0 if dtype == "float64" else 85.0
    parts = [rng.uniform(-10, 10, n), rng.uniform(-big, big, n), rng.uniform(-1, 2, n),
             rng.uniform(-1e-3, 1e-3, n), rng.uniform(-6e5, 6e5, n),
             np.exp(rng.uniform(-700, 700, n)) * rng.choice([-1.0, 1.0], n)]
    with np.errstate(over="ignore"):
        return np.concatenate(parts + [np.array(SPECIAL)]).astype(dtype)


def compile_(f, **specs):
    F = td.build(f, **specs)
    return td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")


def check(name, dtype, got, x, where):
    want = reference(name, x, dtype)
    err = ulps(np.asarray(got, dtype), want)
    i = int(np.argmax(err))
    assert err[i] <= MAX_ULP[dtype][name], (
        f"{name} {dtype} {where}: {err[i]} ulp at x={x[i]!r}: got {got[i]!r}, want {want[i]!r}")
    return float(err.max())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(FNS))
def test_array_kernel(name, dtype):
    x = wide_values(dtype)
    prog = compile_(lambda x: FNS[name][0](x), x=td.spec(x.shape, dtype))
    (got,) = prog.eval([x])
    check(name, dtype, got, x, "array")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(FNS))
def test_blocked_chain(name, dtype):
    """Over 8192 elements, f(x) then f(x) + z run block by block (and over threads)."""
    x = wide_values(dtype, n=60_000, seed=1)
    z = np.zeros_like(x)
    prog = compile_(lambda x, z: (FNS[name][0](x), FNS[name][0](x) + z),
                    x=td.spec(x.shape, dtype), z=td.spec(x.shape, dtype))
    feed = {"x": x, "z": z}
    got, got2 = prog.eval([feed[k] for k in prog.inputs])
    check(name, dtype, got, x, "blocked chain")
    check(name, dtype, got2, x, "blocked chain + z")


@pytest.mark.parametrize("name", list(FNS))
def test_scalar_fast_path_and_eval_batch(name):
    """float64 scalars take the all-scalar path; eval_batch runs it once per point."""
    x = wide_values("float64", n=300, seed=2)
    prog = compile_(lambda x: FNS[name][0](x), x=td.spec(()))
    (batched,) = prog.eval_batch([x], threads=2)
    check(name, "float64", batched, x, "eval_batch of the scalar program")
    singles = np.array([prog.eval([float(v)])[0] for v in x[-len(SPECIAL):]])
    check(name, "float64", singles, x[-len(SPECIAL):], "scalar eval")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(FNS))
def test_eval_batch_of_arrays(name, dtype):
    x = wide_values(dtype, n=500, seed=3)
    x = x[: len(x) // 5 * 5].reshape(-1, 5)
    prog = compile_(lambda x: FNS[name][0](x), x=td.spec((5,), dtype))
    (got,) = prog.eval_batch([x], threads=2)
    check(name, dtype, got.ravel(), x.ravel(), "eval_batch")


# Run in a fresh process per SIMD variant (the variant is chosen once per process).
_VARIANT_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import test_eval_math as m
out = {}
for dtype in ("float64", "float32"):
    x = m.wide_values(dtype, n=20_000, seed=4)
    for name in m.FNS:
        prog = m.compile_(lambda x: m.FNS[name][0](x), x=m.td.spec(x.shape, dtype))
        out[f"{name}/{dtype}"] = m.check(name, dtype, prog.eval([x])[0], x, "variant")
out["variant"] = m.td._eval.simd_variant()
# selects and broadcast fills (plain moves and blends in every variant): numpy's bits, lengths
# around the vector widths and a chain's blocks of 2,048
rng = np.random.default_rng(5)
for n in (1, 7, 16, 33, 2047, 2049, 3 * 4096 + 5):
    for dt in ("float32", "float64", "int8", "int32", "bool", "complex64"):
        c = rng.random(n) < 0.5
        u = (rng.standard_normal(n) * 50).astype(dt)
        v = (rng.standard_normal(n) * 50).astype(dt)
        got = m.td.jit(lambda c, u, v: m.td.where(c, u, v), backend="cpu")(c, u, v)
        assert np.array_equal(got, np.where(c, u, v)), (n, dt)
        row = rng.standard_normal((3, 1)).astype("float32")
        got = m.td.jit(lambda r, u: r + 0 * u[:n] + 2.5, backend="cpu")(row, u.astype("float32"))
        assert np.array_equal(got, row + np.float32(0) * u.astype("float32")[:n] + np.float32(2.5)), (n, dt)
print(json.dumps(out))
"""


@pytest.mark.parametrize("variant", ["generic", "avx2", "avx512"])
def test_every_simd_variant(variant):
    """TIDU_SIMD picks a variant (never above what the CPU has): each one is accurate."""
    env = dict(os.environ, TIDU_SIMD=variant)
    res = subprocess.run([sys.executable, "-c", _VARIANT_SCRIPT, os.path.dirname(__file__)],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    worst = json.loads(res.stdout.strip().splitlines()[-1])
    got = worst.pop("variant")
    order = ["generic", "avx2", "avx512"]
    assert order.index(got) <= order.index(variant)  # the request, or less where the CPU lacks it
    if variant == "generic":
        assert got == "generic"
    assert set(worst) == {f"{n}/{d}" for n in FNS for d in ("float64", "float32")}


def test_in_place_and_tiny_arrays():
    """Lengths around the chunk size and the vector width, empty included."""
    for n in (0, 1, 3, 7, 8, 9, 255, 256, 257, 513):
        x = np.linspace(-3, 3, n)
        x[::7] = np.inf  # some chunks go element by element
        prog = compile_(lambda x: td.exp(td.sin(x)), x=td.spec((n,)))
        (got,) = prog.eval([x])
        with np.errstate(invalid="ignore"):
            want = np.array([math.exp(math.sin(v)) if math.isfinite(v) else np.nan for v in x])
        np.testing.assert_allclose(got, want, rtol=4e-16)
        assert np.array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exp_of_masked_scores_is_zero_on_the_vector_path_and_leaves_the_rest_unchanged(dtype):
    """A causal softmax's masked scores (-1e9) and anything below the point where e^x rounds to
    +0 (-104 in float32, -746 in float64) give exactly 0 without leaving the vector loop; the
    other elements of the same chunks keep the values they have without the masked ones; the
    subnormal range next to it still matches the C library."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(4096) * 3).astype(dtype)
    masked = x.copy()
    masked[::2] = -1e9
    masked[1::7] = -np.inf
    zero_at = -104.0 if dtype == "float32" else -746.0
    masked[3::11] = zero_at - rng.uniform(0, 50, masked[3::11].shape)
    f = td.jit(td.exp, backend="cpu")
    got, plain = f(masked), f(x)
    low = masked < zero_at
    assert np.all(got[low] == 0) and not np.signbit(got[low]).any()
    np.testing.assert_array_equal(got[~low], plain[~low])
    edge = np.array([zero_at - 1e-3 * abs(zero_at), zero_at, zero_at + 0.5, zero_at + 1], dtype)
    want = np.array([math.exp(float(v)) for v in edge]).astype(dtype)
    if dtype == "float32":  # math.exp is float64: round its value to float32 as expf does
        want = np.array([np.float32(math.exp(float(v))) for v in edge])
    np.testing.assert_array_equal(f(edge), want)
