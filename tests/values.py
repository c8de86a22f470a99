"""Test inputs shared by the evaluator and XLA tests: random arrays of every dtype."""

from __future__ import annotations

import numpy as np


def value(rng: np.random.Generator, shape, dtype, positive: bool = False) -> np.ndarray:
    """Random values of `dtype`: small ints, random bools, normal floats/complexes (shifted away
    from zero when `positive`, for log/sqrt/div)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind == "i":
        return rng.integers(-5, 6, shape).astype(dt)
    x = rng.standard_normal(shape)
    if dt.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    if positive:
        x = np.abs(x) + 0.5 if dt.kind == "f" else x + 3.0
    return x.astype(dt)
