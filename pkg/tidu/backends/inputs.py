"""Checking what a caller hands a program: one path for CompiledProgram and LoadedProgram,
``eval`` and ``eval_batch`` alike.

An input becomes a C-contiguous array of the program's dtype (copied only when needed; numpy's
same-kind casts, so a float64 into a float32 input rounds). A cast that would lose more is
refused, naming the input: a float into an integer input (truncation), a complex into a real one
(the imaginary part), an integer out of the input's range (wrapping); so is a shape that differs
(with both shapes shown)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tidu.graph.dtypes import kind_of

__all__ = ["check_input", "check_inputs", "shared_inputs"]

_IINFO = {np.dtype(t): np.iinfo(t) for t in (np.int32, np.int64)}


def _label(i: int, name) -> str:
    return f"input {i} ({name!r})"


def _describe(shape: tuple) -> str:
    return f"{shape} (a scalar)" if shape == () else str(shape)


def _as_array(x, label: str) -> np.ndarray:
    try:
        arr = np.asarray(x)
    except OverflowError:
        arr = None
    if arr is None or arr.dtype == object:
        if isinstance(x, int) and not isinstance(x, bool):
            raise OverflowError(f"{label}: the Python int {x} is out of range of every integer "
                                "dtype tidu has (int64 at most)")
        raise TypeError(f"{label}: expected a number or numeric array, got "
                        f"{type(x).__name__} (numpy holds it as dtype object)")
    return arr


def _convert(arr: np.ndarray, dtype: np.dtype, label: str) -> np.ndarray:
    """arr as dtype, refusing any cast that changes a value's kind or wraps an integer."""
    src = arr.dtype
    if kind_of(dtype) in "iu" and kind_of(src) in "iub":
        if kind_of(src) != "b" and not np.can_cast(src, dtype, casting="safe") and arr.size:
            info = _IINFO.get(dtype) or np.iinfo(dtype)
            lo, hi = (arr.item(),) * 2 if arr.ndim == 0 else (arr.min(), arr.max())
            if lo < info.min or hi > info.max:
                bad = lo if lo < info.min else hi
                raise OverflowError(f"{label}: the value {bad} is out of range of {dtype} "
                                    f"[{info.min}, {info.max}] (got dtype {src})")
        return arr.astype(dtype)
    if not np.can_cast(src, dtype, casting="same_kind") or (
            kind_of(src) == "c" and kind_of(dtype) != "c") or (kind_of(src) not in "biufc"):
        raise TypeError(f"{label}: expected dtype {dtype}, got {src}"
                        + (" (casting would drop or truncate part of the value)"
                           if kind_of(src) in "fc" else ""))
    return arr.astype(dtype)


def check_input(i: int, name, x, shape: tuple, dtype: np.dtype,
                batch: int | None = -1) -> np.ndarray:
    """Input i (called ``name`` in errors) as a C-contiguous array of ``dtype`` and ``shape``;
    with ``batch`` not -1, with a leading batch axis of that length (None: any length, the first
    batched input sets it).  ValueError for a shape, TypeError for a dtype, OverflowError for an
    integer out of range, each naming the input by position and name."""
    if (batch == -1 and type(x) is np.ndarray and x.dtype == dtype and x.shape == shape
            and x.flags.c_contiguous):
        return x  # zero copy
    label = _label(i, name)
    arr = _as_array(x, label)
    if batch == -1:
        if arr.shape != shape:
            raise ValueError(f"{label}: expected shape {_describe(shape)}, "
                             f"got {_describe(arr.shape)}")
    elif arr.ndim != len(shape) + 1 or arr.shape[1:] != shape or (
            batch is not None and arr.shape[0] != batch):
        dims = ["batch" if batch is None else str(batch)] + [str(d) for d in shape]
        want = f"({', '.join(dims)}{',' if not shape else ''})"
        why = ""
        if arr.ndim == len(shape):
            why = " (the leading batch axis is missing)"
        elif batch is not None and arr.ndim == len(shape) + 1 and arr.shape[1:] == shape:
            why = f" (a batch of {arr.shape[0]}, not {batch} as the inputs before it)"
        raise ValueError(f"{label}: expected shape {want}, got {_describe(arr.shape)}{why}")
    if arr.dtype != dtype:
        arr = _convert(arr, dtype, label)
    return np.require(arr, requirements="C")


def shared_inputs(in_axes, n: int) -> list[bool] | None:
    """Which of n inputs have no batch axis, from jax.vmap's ``in_axes`` convention: 0 (every
    input batched on its leading axis, the default), None (that input shared by every point), or
    a list/tuple of those, one per input.  None when every input is batched.  Raises ValueError
    for anything else (other axes, a wrong length, every input shared)."""
    axes = list(in_axes) if isinstance(in_axes, (list, tuple)) else [in_axes] * n
    if isinstance(in_axes, (list, tuple)) and len(axes) != n:
        raise ValueError(f"in_axes: {len(axes)} entries for a program of {n} inputs")
    for i, a in enumerate(axes):
        if a is not None and (isinstance(a, bool) or not isinstance(a, (int, np.integer))
                              or int(a) != 0):
            raise ValueError(f"in_axes[{i}] = {a!r}: eval_batch takes 0 (batched on the leading "
                             f"axis) or None (shared by every point)")
    shared = [a is None for a in axes]
    if n and all(shared):
        raise ValueError("in_axes: at least one input must be batched (0), or the batch length "
                         "is unknown")
    return shared if any(shared) else None


def check_inputs(names, shapes, dtypes, inputs, batched: bool = False,
                 shared: Sequence[bool] | None = None) -> tuple[list[np.ndarray], int]:
    """All inputs checked (``check_input``), in order; with ``batched``, every input but the
    ``shared`` ones shares one leading batch length, returned with them (0 for a program with no
    batched inputs)."""
    names = list(names)
    if len(inputs) != len(names):
        raise ValueError(f"program takes {len(names)} inputs {names}, got {len(inputs)}")
    batch: int | None = None if batched else -1
    out = []
    for i, (name, shape, dt, x) in enumerate(zip(names, shapes, dtypes, inputs)):
        if shared is not None and shared[i]:
            out.append(check_input(i, name, x, shape, dt, -1))
            continue
        a = check_input(i, name, x, shape, dt, batch)
        if batched and batch is None:
            batch = a.shape[0]
        out.append(a)
    return out, (batch or 0) if batched else -1
