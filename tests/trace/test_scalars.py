"""The tracer's fast path for a Python scalar with a rank-0 tracer emits exactly the nodes of the
general promotion path (same hash-consed keys)."""

from __future__ import annotations

import math

import pytest

import tidu as td
from tidu import _core

_OPS = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b]


@pytest.fixture
def slow_path():
    """Trace through the general paths (tidu.trace, tidu.numpy) only (the compiled fast path off)."""
    prev = _core.set_trace_fast_path(False)
    try:
        yield
    finally:
        _core.set_trace_fast_path(prev)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "int32"])
@pytest.mark.parametrize("scalar", [1.0, 2, -3.5, 0.0, -0.0, 0, math.inf, 1e-30, 7])
def test_scalar_fast_path_emits_the_general_path_nodes(dtype, scalar, request):
    def f(x):
        return [op(x, scalar) for op in _OPS] + [op(scalar, x) for op in _OPS]

    fast = td.build(f, x=td.spec((), dtype))
    request.getfixturevalue("slow_path")
    slow = td.build(f, x=td.spec((), dtype))
    assert [k.id for k in fast.outputs] == [k.id for k in slow.outputs]
    assert str(fast) == str(slow)
