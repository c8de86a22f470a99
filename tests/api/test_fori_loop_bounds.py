"""fori_loop's bounds as jax.lax.fori_loop takes them: static bounds go through int() (float
bounds truncate), the two bounds share a dtype (a Python int takes the other's), traced float
bounds loop on floats."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)


FORI_BOUNDS = [(0.0, 3.5), (0.0, 3.0), (-1.5, 2.7), (np.float32(0), np.float32(2.9)),
               (0, np.int32(3)), (np.int64(1), 4), (np.array(2.0), np.array(5.0))]


@pytest.mark.parametrize("lo,hi", FORI_BOUNDS, ids=[f"{a!r}-{b!r}" for a, b in FORI_BOUNDS])
@pytest.mark.parametrize("jitted", [False, True])
def test_fori_loop_static_bounds_convert_as_jax(lo, hi, jitted):
    """Was: td.fori_loop(0.0, 3.5, body, 1.0) looped on floats while i < 3.5 (7.0 in the issue,
    5.0 at the time of the fix); jax converts static bounds with int(): 3 steps, 4.0."""
    def body(i, v):
        return v * 2.0 + i

    want = lax.fori_loop(lo, hi, body, 1.0)
    if jitted:
        got = td.jit(lambda v: td.fori_loop(lo, hi, body, v))(1.0)
    else:
        got = td.fori_loop(lo, hi, body, 1.0)
    assert float(got) == float(want)


@pytest.mark.parametrize("lo,hi", [(0, 3.5), (np.int32(0), np.int64(3)), (0.0, 3)])
def test_fori_loop_bounds_of_different_types_refused_as_jax(lo, hi):
    with pytest.raises(TypeError, match="equal types"):
        lax.fori_loop(lo, hi, lambda i, v: v + 1.0, 1.0)
    with pytest.raises(TypeError, match="lower and upper must have equal types"):
        td.fori_loop(lo, hi, lambda i, v: v + 1.0, 1.0)


def test_fori_loop_traced_float_bounds_loop_on_floats_as_jax():
    def f(lax_or_td):
        return lambda a, b: lax_or_td.fori_loop(a, b, lambda i, v: v + i, 0.0)

    assert float(td.jit(f(td))(0.5, 3.2)) == float(jax.jit(f(lax))(0.5, 3.2)) == 4.5
