"""``td.lax``'s grouped matmuls and platform choice: ``ragged_dot``, ``ragged_dot_general`` with
``RaggedDotDimensionNumbers`` (jax's own decomposition, as jax lowers them off TPU: the ragged
axis expanded into a leading group axis by a mask from the cumulative group sizes, then one
``dot_general``), ``platform_dependent`` (the CPU branch: tidu traces one program for all
backends), ``with_sharding_constraint`` (the ShardingHint primitive), and the dot algorithm
names ``DotAlgorithm``/``DotAlgorithmPreset``, accepted by ``precision=`` and ignored, as
``Precision`` is.  docs/lax.md."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, NamedTuple

import numpy as np

from tidu.api.control_flow import _flatten, _unflatten
from tidu.api.lax_reduce import cumsum
from tidu.api.lax_shapes import broadcast_in_dim, broadcasted_iota, dot_general, transpose
from tidu.numpy.core import astype, where
from tidu.numpy.creation import zeros_like
from tidu.numpy.logical import bitwise_and
from tidu.ops.sharding import ShardingHint
from tidu.trace.tracer import _emit, _lift, _trace_of

__all__ = ["DotAlgorithm", "DotAlgorithmPreset", "RaggedDotDimensionNumbers", "platform_dependent",
           "ragged_dot", "ragged_dot_general", "with_sharding_constraint"]


@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """``jax.lax.RaggedDotDimensionNumbers``: ``dot_dimension_numbers`` as for ``dot_general``,
    the lhs ragged dimension (one) and the rhs group dimension (at most one)."""

    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: tuple
    rhs_group_dimensions: tuple

    def __init__(self, dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions):
        object.__setattr__(self, "dot_dimension_numbers",
                           tuple(tuple(map(tuple, t)) for t in dot_dimension_numbers))
        object.__setattr__(self, "lhs_ragged_dimensions", tuple(lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions", tuple(rhs_group_dimensions))


_BASIC = RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [0])


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, out_sharding=None):
    """``jax.lax.ragged_dot``: lhs ``(m, k)``, rhs ``(g, k, n)``, group_sizes ``(g,)``: row i
    of the result is ``lhs[i] @ rhs[j]`` for the group j whose rows hold i (zero past the
    last group)."""
    return ragged_dot_general(lhs, rhs, group_sizes, _BASIC, precision, preferred_element_type,
                              group_offset, out_sharding)


def _remaining(n, *taken):
    used = {d for t in taken for d in t}
    return [d for d in range(n) if d not in used]


def _prefix(mode, rank, ragged, batch, contract):
    batch, contract = list(batch), list(contract)
    free = _remaining(rank, contract, batch)
    if mode == 1:
        return batch + free[:free.index(ragged)]
    if mode == 2:
        return batch + contract[:contract.index(ragged)]
    return batch[:batch.index(ragged)]


def _expand(x, dim, gs, prefix):
    """x with a leading group axis: entry j keeps the positions of group j along ``dim`` (zero
    elsewhere); gs is ``prefix-axes + (g,)``, the group sizes per prefix index."""
    g = gs.shape[-1]
    shape = (g,) + x.shape
    ends = cumsum(gs, axis=gs.ndim - 1)
    starts = ends - gs
    perm = (gs.ndim - 1,) + tuple(range(gs.ndim - 1))
    dims = (0,) + tuple(p + 1 for p in prefix)
    ends = broadcast_in_dim(transpose(ends, perm), shape, dims)
    starts = broadcast_in_dim(transpose(starts, perm), shape, dims)
    pos = broadcasted_iota(gs.dtype, shape, dim + 1)
    mask = bitwise_and(starts <= pos, pos < ends)
    xb = broadcast_in_dim(x, shape, tuple(range(1, len(shape))))
    return where(mask, xb, zeros_like(xb))


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None):
    """``jax.lax.ragged_dot_general`` in its three modes (the lhs ragged dimension a free,
    contracting or batch dimension), computed as jax's reference decomposition: the ragged
    operand(s) expanded into a masked leading group axis, then one ``dot_general`` (the group
    axis contracted with rhs's group dimension, or a batch axis giving the output's leading
    ``g``).  The work is ``g`` times a dense product's.  ``group_offset`` is not supported,
    as in jax."""
    if group_offset is not None:
        raise NotImplementedError("ragged_dot_general: group_offset is not supported (jax "
                                  "does not implement it either)")
    dn = ragged_dot_dimension_numbers
    if not isinstance(dn, RaggedDotDimensionNumbers):
        raise TypeError(f"ragged_dot_general: ragged_dot_dimension_numbers must be a "
                        f"RaggedDotDimensionNumbers, got {dn!r}")
    t = _trace_of(lhs, rhs, group_sizes)
    lhs, rhs, gs = _lift(t, lhs), _lift(t, rhs), _lift(t, group_sizes)
    if np.dtype(gs.dtype).kind not in "iu":
        raise TypeError(f"ragged_dot_general: group_sizes must be integers, got {gs.dtype}")
    if len(dn.lhs_ragged_dimensions) != 1:
        raise TypeError(f"ragged_dot_general: one lhs ragged dimension, got "
                        f"{dn.lhs_ragged_dimensions}")
    (lc, rc), (lb, rb) = dn.dot_dimension_numbers
    lc, rc, lb, rb = map(list, (lc, rc, lb, rb))
    rd = dn.lhs_ragged_dimensions[0]
    if rd in _remaining(lhs.ndim, lc, lb):
        mode = 1
    elif rd in lc:
        mode = 2
    elif rd in lb:
        mode = 3
    else:
        raise TypeError(f"ragged_dot_general: lhs ragged dimension {rd} is not an axis of lhs "
                        f"(rank {lhs.ndim})")
    rg = list(dn.rhs_group_dimensions)
    if mode == 1 and len(rg) != 1:
        raise TypeError("ragged_dot_general: a ragged free dimension needs one rhs group "
                        f"dimension, got {rg}")
    if mode != 1 and rg:
        raise TypeError(f"ragged_dot_general: rhs group dimensions {rg} are only allowed when "
                        f"the lhs ragged dimension is a free one")
    lp = _prefix(mode, lhs.ndim, rd, lb, lc)
    want = tuple(lhs.shape[i] for i in lp)
    if gs.ndim == 1:
        gs = broadcast_in_dim(gs, want + gs.shape, (len(want),))
    elif gs.shape[:-1] != want:
        raise TypeError(f"ragged_dot_general: group_sizes of shape {gs.shape}; expected "
                        f"{want + gs.shape[-1:]} or ({gs.shape[-1]},)")
    g = gs.shape[-1]

    def inc(ds):
        return [d + 1 for d in ds]

    kw = {"precision": precision, "preferred_element_type": preferred_element_type}
    if mode == 1:
        if rhs.shape[rg[0]] != g:
            raise TypeError(f"ragged_dot_general: rhs group dimension {rg[0]} has size "
                            f"{rhs.shape[rg[0]]}, but group_sizes has {g} groups")
        return dot_general(_expand(lhs, rd, gs, lp), rhs,
                           ((inc(lc) + [0], rc + rg), (inc(lb), rb)), **kw)
    if mode == 2:
        rr = rc[lc.index(rd)]
        rp = _prefix(2, rhs.ndim, rr, rb, rc)
        return dot_general(_expand(lhs, rd, gs, lp), _expand(rhs, rr, gs, rp),
                           ((inc(lc), inc(rc)), ([0] + inc(lb), [0] + inc(rb))), **kw)
    out = dot_general(lhs, rhs, dn.dot_dimension_numbers, **kw)
    return out if preferred_element_type is None else astype(out, preferred_element_type)


def platform_dependent(*args, default=None, **per_platform):
    """``jax.lax.platform_dependent``: ``per_platform['cpu'](*args)`` if given, else
    ``default(*args)``.  tidu traces one program for the interpreter and XLA (whose device is
    chosen after tracing), so it takes the CPU branch; jax would take the branch of the device
    it lowers for ('cuda', 'rocm', 'tpu')."""
    for name in per_platform:
        if name not in ("cpu", "cuda", "rocm", "tpu", "gpu"):
            raise ValueError(f"platform_dependent: unknown platform {name!r}")
    fn = per_platform.get("cpu", default)
    if fn is None:
        raise NotImplementedError(f"platform_dependent: no branch for 'cpu' and no default "
                                  f"(given: {sorted(per_platform)}); tidu runs the 'cpu' branch")
    return fn(*args)


def with_sharding_constraint(x, shardings):
    """``jax.lax.with_sharding_constraint``: each array of the pytree ``x`` laid out as its
    ``jax.sharding.NamedSharding`` says (one sharding for all, or a matching pytree): the
    ShardingHint primitive, which XLA's partitioner reads and the interpreter passes through.
    A PartitionSpec entry may name one Mesh axis per array axis (``P('a', None)``); several
    Mesh axes on one array axis raise NotImplementedError."""
    leaves, spec = _flatten(x)
    if type(shardings).__name__ == "PartitionSpec":  # a tuple: it would flatten to its entries
        raise TypeError(f"with_sharding_constraint: a bare PartitionSpec {shardings} needs a "
                        f"Mesh; pass jax.sharding.NamedSharding(mesh, spec)")
    if hasattr(shardings, "mesh") and hasattr(shardings, "spec"):
        shs = [shardings] * len(leaves)
    else:
        shs, _ = _flatten(shardings)
        if len(shs) != len(leaves):
            raise ValueError(f"with_sharding_constraint: {len(shs)} shardings for "
                             f"{len(leaves)} arrays")
    out = []
    for v, sh in zip(leaves, shs):
        if not (hasattr(sh, "mesh") and hasattr(sh, "spec")):
            raise TypeError(f"with_sharding_constraint: a sharding must be a "
                            f"jax.sharding.NamedSharding (a Mesh and a PartitionSpec), got "
                            f"{sh!r}")
        t = _trace_of(v)
        v = _lift(t, v)
        names = tuple(sh.mesh.axis_names)
        entries = tuple(sh.spec) + (None,) * (v.ndim - len(tuple(sh.spec)))
        if len(entries) > v.ndim:
            raise ValueError(f"with_sharding_constraint: spec {sh.spec} has more entries than "
                             f"the array's rank {v.ndim}")
        dims = []
        for e in entries:
            axes = () if e is None else tuple(e) if isinstance(e, (tuple, list)) else (e,)
            if len(axes) > 1:
                raise NotImplementedError(f"with_sharding_constraint: spec {sh.spec} splits "
                                          f"one axis over several Mesh axes {axes}")
            if axes and axes[0] not in names:
                raise ValueError(f"with_sharding_constraint: spec {sh.spec} names {axes[0]!r},"
                                 f" not an axis of the Mesh (its axes: {names})")
            dims.append(names.index(axes[0]) if axes else -1)
        out.append(_emit(t, ShardingHint(sh.mesh, tuple(dims)), v))
    return _unflatten(spec, out)


class DotAlgorithm(NamedTuple):
    """``jax.lax.DotAlgorithm`` (jax's fields and defaults): accepted as ``precision=`` and
    ignored; tidu's products run in the operands' dtype (docs/lax.md)."""

    lhs_precision_type: Any
    rhs_precision_type: Any
    accumulation_type: Any
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


class DotAlgorithmPreset(enum.Enum):
    """``jax.lax.DotAlgorithmPreset``'s members: accepted as ``precision=`` and ignored."""

    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()
