"""vmap: the batching transform (jax.vmap's semantics) as a pass over the traced graph.

``vmap(fn)(*args)`` traces fn once on the arguments without their mapped axis (fresh inputs
standing for one element of the batch), then walks the traced ops in topological order (the
same compiled walk ``differentiate`` uses) from those inputs: an op none of whose operands
depends on them is left as it is (computed once, not per element); every other op is replaced
by its primitive's ``batch`` rule, which emits tidu primitives over operands with a leading
batch axis.  The result is one program over batched arrays: the interpreter's blocked loops and
XLA see the whole batch, and it differentiates, transposes, nests and lowers like any other
program.  ``eval_batch`` stays the way to run an already compiled program over many points.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from tidu._native import _core
from tidu.ad.batch import batch_walk
from tidu.api.collectives import bound_axis
from tidu.api.jit import describe, jit
from tidu.api.nested import NestedArg, _Ctx, _outer_trace, _val
from tidu.api.tree import check_leaves, unflatten
from tidu.api.tree_util import PyTreeDef, tree_structure
from tidu.graph import FragmentBuilder, ValKey, _aval_list, aval, resolve
from tidu.numpy import core as T
from tidu.numpy.core import broadcast_to
from tidu.trace.build import flatten_outputs, mark_weak
from tidu.trace.effects import add_token, tokens
from tidu.trace.tracer import Tracer

__all__ = ["vmap"]


def _is_leaf_axis(a) -> bool:
    return a is None or (isinstance(a, (int, np.integer)) and not isinstance(a, bool))


def _axes_for(axes, tree, what: str) -> list:
    """Per leaf of `tree` (a pytree of values), its axis from `axes`, a prefix of tree's
    structure (an int or None applies to a whole subtree), as jax's: None is a leaf of axes."""
    leaves, spec = _core.tree_flatten(axes, _is_none)
    bad = [a for a in leaves if not _is_leaf_axis(a)]
    if bad:
        raise ValueError(f"vmap {what} must be an int, None, or a pytree (tuple/list/dict, ...) "
                         f"of them matching the structure of the value; got {bad[0]!r} in "
                         f"{axes!r}")
    try:
        subtrees = PyTreeDef(spec).flatten_up_to(tree)
    except ValueError as e:
        raise ValueError(f"vmap {what} specification must be a tree prefix of the corresponding "
                         f"value, got specification {axes!r} for value tree "
                         f"{tree_structure(tree)}: {e}") from None
    return [None if a is None else int(a)
            for a, sub in zip(leaves, subtrees) for _ in _core.tree_leaves(sub)]


def _is_none(a) -> bool:
    return a is None


def _norm_axis(ax: int, ndim: int, what: str) -> int:
    if not -ndim <= ax < ndim:
        raise ValueError(f"vmap was requested to map its argument along axis {ax}, which "
                         f"implies that its rank should be at least {ax + 1 if ax >= 0 else -ax}"
                         f", but is only {ndim - 1 if what == 'out_axes' else ndim} ({what})")
    return ax % ndim


def _moveaxis(x, src: int, dst: int):
    if src == dst:
        return x
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    return T.transpose(x, tuple(perm))


def _inline_vmap(trace, fn, args, kwargs, in_axes, out_axes, axis_size, axis_name=None):
    if kwargs:  # jax maps keyword arguments along their axis 0
        in_axes = (in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)) + (0,)
        args = args + (kwargs,)
    leaves, in_tree = _core.flatten_args(args)
    axes = _axes_for(in_axes, args, "in_axes")
    ctx = _Ctx(trace)
    try:
        lifted = [ctx.lift(x) for x in leaves]
    except TypeError:  # name the leaf that is no array, with its path
        check_leaves("td.vmap", args)
        raise
    mark_weak(lifted, leaves)  # Python scalar leaves: weakly typed (as jit's arguments)
    sizes = {}
    for i, (x, ax) in enumerate(zip(lifted, axes)):
        if ax is None:
            continue
        if x.ndim == 0:
            raise ValueError(
                f"vmap was requested to map its argument along axis {ax}, which "
                f"implies that its rank should be at least {ax + 1 if ax >= 0 else -ax}"
                f", but is only 0 (its shape is ()) (argument leaf {i})"
            )
        axes[i] = ax = _norm_axis(ax, x.ndim, "in_axes")
        sizes.setdefault(x.shape[ax], []).append(i)
    if axis_size is not None:
        axis_size = int(axis_size)
        if sizes and set(sizes) != {axis_size}:
            raise ValueError(
                f"vmap got axis_size={axis_size} but mapped axes of sizes {sorted(sizes)}"
            )
    elif not sizes:
        raise ValueError(
            "vmap must have at least one non-None value in in_axes (or pass axis_size)"
        )
    if len(sizes) > 1:
        detail = "; ".join(f"size {n} for argument leaves {ix}" for n, ix in sizes.items())
        raise ValueError(f"vmap got inconsistent sizes for the array axes to be mapped: {detail}")
    n = axis_size if axis_size is not None else next(iter(sizes))

    # fresh inputs for the mapped leaves: one element of the batch each
    b = trace.builder
    base = getattr(b, "n_nested", 0)
    b.n_nested = base + len(leaves)
    inner, seeds = [], []
    for k, (x, ax) in enumerate(zip(lifted, axes)):
        if ax is None:
            inner.append(x)
            continue
        av = aval(x.shape[:ax] + x.shape[ax + 1 :], x.dtype)
        local = b.add_input(NestedArg(base + k), av)
        fresh = Tracer(trace, trace.store.global_of(local), av, x.weak_type)
        inner.append(fresh)
        seeds.append((fresh._v, _moveaxis(x, ax, 0)._v))
    bound = contextlib.nullcontext()
    if axis_name is not None:  # the axis's index value: one more input, seeded with arange(n)
        b.n_nested += 1
        av = aval((), np.int32)
        index = Tracer(trace, trace.store.global_of(b.add_input(NestedArg(base + len(leaves)),
                                                                av)), av)
        seeds.append((index._v, ctx.lift(np.arange(n, dtype=np.int32))._v))
        bound = bound_axis(axis_name, n, index)
    saved, trace.concrete = trace.concrete, None  # mapped values have no single value
    # fn's debug callbacks start their own token chain: its tokens are unbatched values, which
    # the trace around sees only batched (below)
    outer_tokens, b.effect_tokens = tokens(trace), []
    try:
        with bound:
            out = (
                fn(*unflatten(in_tree, inner))
                if not kwargs
                else fn(*unflatten(in_tree, inner)[:-1], **unflatten(in_tree, inner)[-1])
            )
    except BaseException:
        b.effect_tokens = outer_tokens
        raise
    finally:
        trace.concrete = saved
    flat, out_tree = flatten_outputs(ctx, out)

    # the batching walk over what fn traced, from the fresh inputs
    inner_tokens, b.effect_tokens = tokens(trace), outer_tokens
    keys = [o.key for o in flat] + [x.key for x in inner_tokens]
    view = resolve([b.build(keys)])
    nb = FragmentBuilder(parents=view.roots, prefix="v")
    found = batch_walk(view, keys, seeds, nb)
    b.parents.append(nb.build([ValKey(v) for v in found if v != _core.NONE]))
    for x, v in zip(inner_tokens, found[len(flat):]):
        add_token(trace, x if v == _core.NONE else
                  Tracer(trace, v, _aval_list[ValKey(v).aval.id]))
    found = found[:len(flat)]

    oaxes = _axes_for(
        out_axes, unflatten(out_tree, flat) if out_tree is not None else flat[0], "out_axes"
    )
    results = []
    for o, v, ax in zip(flat, found, oaxes):
        if v == _core.NONE:  # does not depend on the mapped arguments
            if ax is None:
                results.append(o)
                continue
            v_t = broadcast_to(o, (n,) + o.shape)
        else:
            if ax is None:
                raise ValueError(
                    "vmap has mapped output but out_axes is None (an output that "
                    "depends on a mapped argument must have an out axis)"
                )
            v_t = _val(trace, v)
        ax = _norm_axis(ax, v_t.ndim, "out_axes")
        results.append(_moveaxis(v_t, 0, ax))
    return unflatten(out_tree, results)


def vmap(
    fn: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_size: int | None = None,
    axis_name: Any = None, spmd_axis_name: Any = None,
) -> Callable:
    """Like jax.vmap: fn mapped over an axis of its arguments, as one program over batched arrays.

    Args:
        fn: a function of arrays (or tuples/lists/dicts of arrays).
        in_axes: per positional argument, the axis mapped over (negative counts from the end),
            None for an argument shared by every element; an int or None applies to all; a
            (nested) tuple/list/dict prefix of an argument's structure gives it per leaf.
            Keyword arguments are mapped along axis 0.
        out_axes: where the mapped axis goes in each output (same forms); None only for
            outputs that do not depend on a mapped argument.
        axis_size: the mapped size, needed when no argument is mapped.
        axis_name: a hashable name for the mapped axis, so that ``td.lax.psum``, ``pmean``,
            ``pmax``, ``pmin``, ``all_gather`` and ``axis_index`` inside fn work across its
            members (jax's semantics; docs/vmap.md, "Named axes").
        spmd_axis_name: accepted for jax's signature; tidu's vmap runs on one device, so it
            changes nothing.

    Composes with every transform in both orders (``vmap(grad(f))``, ``grad(vmap(f))``,
    ``jit``, nesting); at top level the mapped function is compiled once per shapes/dtypes.
    A primitive without a batching rule raises ``RuleMissing`` naming it.
    """
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not (_is_leaf_axis(in_axes) or isinstance(in_axes, (tuple, dict))):
        raise TypeError(
            f"vmap in_axes must be an int, None, or a tuple of entries "
            f"corresponding to the positional arguments, got {in_axes!r}"
        )

    def traced(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(
                f"vmap in_axes must be an int, None, or a tuple of entries "
                f"corresponding to the positional arguments passed to the "
                f"function, but got len(in_axes)={len(in_axes)}, "
                f"len(args)={len(args)}"
            )
        return _inline_vmap(
            _outer_trace(args, kwargs), fn, args, kwargs, in_axes, out_axes, axis_size,
            axis_name
        )

    compiled = jit(describe(traced, "vmap", fn))

    @functools.wraps(fn)
    def mapped(*args, **kwargs):
        if kwargs:  # jit takes positional arguments: fold keywords in as a trailing dict
            return _kw_jit(*args, **kwargs)
        return compiled(*args)

    def _call_kw(pos, kw):
        return traced(*pos, **kw)

    _kw_compiled = jit(_call_kw)

    def _kw_jit(*args, **kwargs):
        return _kw_compiled(args, kwargs)

    return mapped
