"""``td.shard_map(f, mesh, in_specs, out_specs)``: f written for one device's block of each
argument, run on every device of a ``jax.sharding.Mesh``, with ``td.lax.psum``, ``pmean``,
``pmax``, ``pmin``, ``all_gather``, ``axis_index`` over the Mesh's axes (jax's shard_map).

How it is built (docs/scale.md, "shard_map"): an argument split over Mesh axes is reshaped so
that each of those axes is a leading axis of its own (the blocks stacked), and f runs under one
``td.vmap(..., axis_name=a)`` per Mesh axis a, so the collectives are the named-axis ones of
tidu.api.collectives, resolved when the program is traced. The stacked blocks, in and out, carry
a ShardingHint (tidu.ops.sharding, jax's sharding constraint) that splits each stacked axis over
its Mesh axis: on backend "xla" the program runs on the Mesh's devices, each device computes its
own block, and a reduction over a Mesh axis (psum) becomes XLA's all-reduce. On the
interpreter the same program computes the same values on one device. Derivatives, vmap and
jit of it are those of its parts.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from tidu.api.jit import describe, jit
from tidu.api.tree_util import tree_flatten, tree_structure, tree_unflatten
from tidu.api.vmap import vmap
from tidu.numpy.creation import asarray
from tidu.ops.sharding import ShardingHint
from tidu.trace.tracer import _emit, _lift, _trace_of

__all__ = ["shard_map"]


def _is_spec(s) -> bool:
    from jax.sharding import PartitionSpec  # noqa: PLC0415 - optional dependency

    return s is None or isinstance(s, PartitionSpec)


def _spread(specs, tree, what: str) -> list:
    """One spec per leaf of tree: specs is a PartitionSpec (or None) for a whole subtree, or a
    tuple/list/dict prefix of tree's structure."""
    if _is_spec(specs):
        return [specs] * len(tree_flatten(tree)[0])
    if isinstance(specs, (tuple, list)) and isinstance(tree, (tuple, list)):
        if len(specs) != len(tree):
            raise ValueError(f"shard_map {what}: {len(specs)} specs for a structure of "
                             f"{len(tree)} entries")
        return [s for sp, t in zip(specs, tree) for s in _spread(sp, t, what)]
    if isinstance(specs, dict) and isinstance(tree, dict):
        if set(specs) != set(tree):
            raise ValueError(f"shard_map {what}: spec keys {sorted(map(str, specs))} are not "
                             f"the structure's {sorted(map(str, tree))}")
        return [s for k in sorted(tree) for s in _spread(specs[k], tree[k], what)]
    raise TypeError(f"shard_map {what}: expected a PartitionSpec, or a tuple/list/dict of them "
                    f"matching the structure, got {specs!r} for {tree_structure(tree)}")


def _split(spec, shape: tuple, names: tuple, sizes: dict, what: str,
           divide: bool = True) -> list[tuple]:
    """Per axis of a value of `shape`: the Mesh axes it is split over, major first (an
    argument's axes must divide by theirs: `divide`)."""
    entries = tuple(spec) if spec is not None else ()
    if len(entries) > len(shape):
        raise ValueError(f"shard_map {what}: spec {spec} has {len(entries)} entries for a value "
                         f"of rank {len(shape)} (shape {shape})")
    out, seen = [], set()
    for d, e in enumerate(entries + (None,) * (len(shape) - len(entries))):
        axes = () if e is None else tuple(e) if isinstance(e, (tuple, list)) else (e,)
        for a in axes:
            if a not in sizes:
                raise ValueError(f"shard_map {what}: spec {spec} names {a!r}, which is not an "
                                 f"axis of the Mesh (its axes: {names})")
            if a in seen:
                raise ValueError(f"shard_map {what}: spec {spec} names Mesh axis {a!r} twice")
            seen.add(a)
        k = math.prod(sizes[a] for a in axes)
        if divide and shape[d] % k:
            raise ValueError(
                f"shard_map {what}: dimension {d} of shape {shape} has size {shape[d]}, which "
                f"Mesh axes {axes} (of total size {k}) do not divide; spec {spec}")
        out.append(axes)
    return out


def _hint(x, mesh, dims):
    t = _trace_of(x)
    return _emit(t, ShardingHint(mesh, tuple(dims)), _lift(t, x))


def _stack_blocks(x, split, names: tuple, sizes: dict, mesh):
    """x with every Mesh axis it is split over as a leading axis (in the Mesh's order), then the
    block's axes; and the Mesh axes it is split over."""
    shape = x.shape
    parts, where = [], {}
    for d, axes in enumerate(split):
        for a in axes:
            where[a] = len(parts)
            parts.append(sizes[a])
        parts.append(shape[d] // math.prod(sizes[a] for a in axes))
    mapped = [a for a in names if a in where]
    if not mapped:
        return x, mapped
    y = x.reshape(tuple(parts))
    block = [i for i in range(len(parts)) if i not in where.values()]
    y = y.transpose(tuple(where[a] for a in mapped) + tuple(block))
    dims = [names.index(a) for a in mapped] + [-1] * len(block)
    return _hint(y, mesh, dims), mapped


def _unstack_blocks(y, split, names: tuple, mesh):
    """The inverse for an output: y has every Mesh axis leading (in the Mesh's order), then the
    block; axes no dimension is split over are read on their first member."""
    m = len(names)
    y = _hint(y, mesh, list(range(m)) + [-1] * (y.ndim - m))
    used = [a for axes in split for a in axes]
    for i in reversed(range(m)):  # replicated over this axis: every member holds the same
        if names[i] not in used:
            y = y[(slice(None),) * i + (0,)]
    lead = [a for a in names if a in used]
    block = y.shape[len(lead):]
    perm, shape = [], []
    for d, axes in enumerate(split):
        perm += [lead.index(a) for a in axes] + [len(lead) + d]
        shape.append(block[d] * math.prod(y.shape[lead.index(a)] for a in axes))
    if perm != list(range(len(perm))):
        y = y.transpose(tuple(perm))
    return y.reshape(tuple(shape))


def shard_map(f: Callable, mesh=None, in_specs=None, out_specs=None, check_rep: bool = True, *,
              check_vma: bool | None = None, auto: Any = frozenset()) -> Callable:
    """Like jax's shard_map: ``f`` maps per-device blocks to per-device blocks over `mesh`.

    Args:
        f: a function of arrays (pytrees of arrays) written for one device's block.
        mesh: a ``jax.sharding.Mesh``; its axis names are the names the collectives in f use
            (``td.lax.psum(x, "i")``, ``pmean``, ``pmax``, ``pmin``, ``all_gather``,
            ``axis_index``).
        in_specs: a ``PartitionSpec`` per positional argument (a tuple of them, or one for all;
            a tuple/list/dict prefix of an argument's structure gives its leaves theirs): entry
            d names the Mesh axis (or tuple of axes, major first) that splits dimension d of
            the argument; the block f sees is the argument's size divided by theirs.
        out_specs: the same for f's outputs: a Mesh axis named in an output's spec stacks the
            devices' blocks along that dimension; over a Mesh axis the spec does not name, the
            output must be the same on every device (as after a psum), and the first device's
            block is returned.
        check_rep, check_vma: accepted for jax's signature; tidu does not check that an output
            is replicated over the axes its spec leaves out (it returns the first device's
            block; jax's check_rep=False behaviour).
        auto: must be empty (jax's partial-auto mode is not built).

    Returns the global function: arguments and results are the global arrays. It composes with
    td.jit (on backend "xla" the program runs partitioned over the Mesh's devices, docs/scale.md),
    td.grad (psum's transpose is psum) and td.vmap; called directly it runs on the interpreter.
    A dimension that the named Mesh axes do not divide raises ValueError naming it.
    """
    if mesh is None or out_specs is None:
        raise TypeError("shard_map needs mesh= and out_specs= (and in_specs=)")
    if auto:
        raise NotImplementedError("shard_map auto=: partial-auto sharding is not built")
    names = tuple(mesh.axis_names)
    sizes = dict(zip(names, mesh.devices.shape))

    def traced(*args):
        specs = (in_specs,) * len(args) if _is_spec(in_specs) else in_specs
        if not isinstance(specs, (tuple, list)) or len(specs) != len(args):
            raise ValueError(f"shard_map in_specs: {specs!r} does not give one spec per each "
                             f"of the {len(args)} positional arguments")
        leaves, tree = tree_flatten(tuple(args))
        leaf_specs = _spread(tuple(specs), tuple(args), "in_specs")
        stacked, mapped = [], []
        for i, (x, spec) in enumerate(zip(leaves, leaf_specs)):
            x = asarray(x)
            split = _split(spec, tuple(x.shape), names, sizes, f"in_specs (argument leaf {i})")
            y, on = _stack_blocks(x, split, names, sizes, mesh)
            stacked.append(y)
            mapped.append(on)
        out_tree = []

        def body(*blocks):
            out = f(*tree_unflatten(tree, list(blocks)))
            flat, t = tree_flatten(out)
            out_tree[:] = [(t, out)]
            return tuple(flat)

        run = body
        for level in reversed(range(len(names))):
            axes = tuple(0 if names[level] in on else None for on in mapped)
            run = vmap(run, in_axes=axes, out_axes=0, axis_size=sizes[names[level]],
                       axis_name=names[level])
        outs = run(*stacked)
        t, example = out_tree[0]
        out_leaf_specs = _spread(out_specs, example, "out_specs")
        result = []
        for i, (y, spec) in enumerate(zip(outs, out_leaf_specs)):
            block = tuple(y.shape[len(names):])
            split = _split(spec, block, names, sizes, f"out_specs (output leaf {i})", False)
            result.append(_unstack_blocks(y, split, names, mesh))
        return tree_unflatten(t, result)

    return functools.wraps(f)(jit(describe(traced, "shard_map", f)))
