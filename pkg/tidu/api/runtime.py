"""jax's runtime and inspection helpers: ``block_until_ready`` and ``device_get`` (simple, as
tidu's results are numpy arrays, computed by the time a call returns: docs/frontend.md "Results";
only an XLA program with ``out_shardings`` returns jax Arrays, on which they act as jax's), and
``make_jaxpr``/``make_program`` (the program a jit runs)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from tidu.api.jit import jit
from tidu.api.tree_util import tree_leaves, tree_map

__all__ = ["block_until_ready", "device_get", "make_jaxpr", "make_program"]


def _is_jax_array(x) -> bool:
    return type(x).__module__.startswith(("jax", "jaxlib")) and hasattr(x, "block_until_ready")


def block_until_ready(x: Any) -> Any:
    """``jax.block_until_ready``: wait until every array leaf of the pytree x is computed and
    return x.  A numpy array (what tidu returns) is ready already; a jax Array waits."""
    for leaf in tree_leaves(x):
        if _is_jax_array(leaf):
            leaf.block_until_ready()
    return x


def device_get(x: Any) -> Any:
    """``jax.device_get``: the pytree x with each jax Array leaf copied to a numpy array on the
    host; numpy arrays and other leaves (Python scalars) are returned as they are."""
    return tree_map(lambda a: np.asarray(a) if _is_jax_array(a) else a, x)


def make_program(fn: Callable, static_argnums=(), *, backend: str = "cpu") -> Callable:
    """``make_program(fn)(*args)``: the program ``tidu.jit(fn)`` would run for these arguments,
    as a ``Lowered`` (``print`` it for tidu's instruction listing, ``.as_text()`` for
    StableHLO, ``.program`` for the CompiledProgram).  ``static_argnums`` as ``tidu.jit``'s."""
    def lower(*args, **kwargs):
        return jit(fn, static_argnums=static_argnums or None, backend=backend).lower(*args,
                                                                                     **kwargs)

    functools.update_wrapper(lower, fn)
    return lower


def make_jaxpr(fn: Callable, static_argnums=(), axis_env=None, return_shape: bool = False,
               abstracted_axes=None) -> Callable:
    """jax.make_jaxpr's name and signature over ``make_program``: ``print(td.make_jaxpr(f)(x))``
    prints tidu's program (its instructions, not a jaxpr: tidu has no jaxprs).  With
    ``return_shape=True`` it returns ``(lowered, out_shapes)``, each output's
    ``jax.ShapeDtypeStruct``-like ``(shape, dtype)`` aval.  ``axis_env`` and
    ``abstracted_axes`` are jax-internal and refused."""
    if axis_env is not None or abstracted_axes is not None:
        raise NotImplementedError("make_jaxpr: axis_env and abstracted_axes are not supported")
    lower = make_program(fn, static_argnums)

    def run(*args, **kwargs):
        low = lower(*args, **kwargs)
        if return_shape:
            return low, [k.aval for k in low.program.outputs]
        return low

    functools.update_wrapper(run, fn)
    return run
