"""JAX-like front end: jit (and, built on the same pipeline, the AD transforms).

Every transform traces the user function into a fragment and runs the seven-step pipeline; the
compiled program is cached per input shapes and dtypes (and by structure in the program cache).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from tidu.graph import CompiledProgram, FragmentBuilder, compile, materialize_merge, resolve
from tidu.tracing import as_aval, flatten_outputs, tracing

__all__ = ["jit", "unflatten"]


def unflatten(tree, flat: list) -> Any:
    """Rebuild a function's output structure (from flatten_outputs) over flat values."""
    it = iter(flat)

    def rec(tr):
        if tr is None:
            return next(it)
        kind, children = tr
        if kind is dict:
            return {k: rec(c) for k, c in children}
        vals = [rec(c) for c in children]
        return kind(vals) if kind in (list, tuple) else kind(*vals)

    return rec(tree)


def _flatten_args(args) -> tuple[list, Any]:
    """Leaves (arrays/scalars) of positional args that may be tuples/lists/dicts, and their tree."""
    if isinstance(args, (tuple, list)):
        leaves, trees = [], []
        for a in args:
            lv, tr = _flatten_args(a)
            leaves += lv
            trees.append(tr)
        return leaves, (type(args), trees)
    if isinstance(args, dict):
        leaves, trees = [], []
        for k in args:
            lv, tr = _flatten_args(args[k])
            leaves += lv
            trees.append((k, tr))
        return leaves, (dict, trees)
    return [args], None


def trace_program(fn: Callable, args: tuple, static_key=None) -> tuple[CompiledProgram, Any]:
    """Trace fn at the shapes/dtypes of args; returns (program over flattened args, output tree)."""
    leaves, in_tree = _flatten_args(args)
    builder = FragmentBuilder(prefix="p")
    with tracing(builder) as t:
        tracers = [t.input(("arg", i), as_aval(np.asarray(x) if not hasattr(x, "dtype") else x))
                   for i, x in enumerate(leaves)]
        out = fn(*unflatten(in_tree, tracers))
        flat, out_tree = flatten_outputs(t, out)
    frag = builder.build([x.key for x in flat])
    prog = compile(materialize_merge(resolve([frag]), frag.outputs))
    return prog, out_tree


def _signature(leaves) -> tuple:
    sig = []
    for x in leaves:
        if isinstance(x, (bool, int, float, complex)):
            sig.append((type(x).__name__,))
        else:
            a = np.asarray(x) if not hasattr(x, "dtype") else x
            sig.append((tuple(a.shape), str(a.dtype)))
    return tuple(sig)


def jit(fn: Callable | None = None, *, backend: str = "cpu") -> Callable:
    """Compile fn once per input shapes/dtypes and evaluate it with the compiled program.

    Args:
        fn: a function of arrays (or tuples/lists/dicts of arrays) returning the same.
        backend: "cpu" (the C++ interpreter).

    Returns:
        A function with fn's signature returning numpy arrays in fn's output structure.
    """
    if fn is None:
        return functools.partial(jit, backend=backend)
    if backend != "cpu":
        raise ValueError(f"unknown backend {backend!r}; available: 'cpu'")
    cache: dict[tuple, tuple[CompiledProgram, Any, list[int]]] = {}

    @functools.wraps(fn)
    def wrapped(*args):
        leaves, in_tree = _flatten_args(args)
        sig = (_signature(leaves), repr(in_tree))
        hit = cache.get(sig)
        if hit is None:
            prog, out_tree = trace_program(fn, args)
            order = [key[1] for key in prog.inputs]  # the program's input order over the leaves
            hit = cache[sig] = (prog, out_tree, order)
        prog, out_tree, order = hit
        return unflatten(out_tree, prog.eval([leaves[i] for i in order]))

    wrapped.cache = cache
    return wrapped


def transpose(x, axes=None):
    """``transpose(linear_fragment)``: the AD transpose (VJP) of a LinearFragment;
    ``transpose(traced_value, axes=None)``: numpy's axis permutation."""
    from tidu import ad, tracing

    if isinstance(x, ad.LinearFragment):
        if axes is not None:
            raise TypeError("transpose of a LinearFragment takes no axes")
        return ad.transpose(x)
    return tracing.transpose(x, axes)
