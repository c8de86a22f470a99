"""ShardingHint: the identity on values that tells XLA's SPMD partitioner how a value is laid out
over the devices of a ``jax.sharding.Mesh`` (jax's ``with_sharding_constraint``).

``td.shard_map`` emits it around its per-device blocks: each axis of the value is split over
one Mesh axis (``dims[i]``, an index into the Mesh's axes) or kept whole (-1), and the Mesh axes
no dimension names replicate it. It lowers to what jax writes for a sharding constraint:
Shardy's ``sdy.sharding_constraint`` over an ``sdy.mesh`` the module declares (jax's default
partitioner), or, with jax's ``jax_use_shardy_partitioner`` off, GSPMD's ``custom_call
@Sharding`` with an ``mhlo.sharding`` attribute (a GSPMD annotation under Shardy would make XLA
fall back to GSPMD for the whole program). Devices are numbered by their position in the Mesh,
which the XLA runner uses as the program's devices, so XLA places each block on its device and
turns a reduction over the Mesh axis into an all-reduce.

On one device, in the interpreter and in files it is the identity (it runs StopGradient's copy
kernel, which takes no attributes: a saved program keeps no Mesh). It is linear: its tangent and
cotangent carry the same hint, so a gradient is partitioned as its primal is.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from typing import Any

from tidu.ad.rules import register
from tidu.ops.core import ALL, A, Primitive, check_dtype, fix, lin

__all__ = ["ShardingHint", "hlo_sharding"]


def hlo_sharding(mesh_shape: tuple[int, ...], dims: tuple[int, ...]) -> str:
    """The ``mhlo.sharding`` text of a value whose axis i is split over Mesh axis dims[i] (-1:
    not split), replicated over the Mesh axes that no dimension names."""
    used = [d for d in dims if d >= 0]
    if not used or math.prod(mesh_shape[d] for d in used) == 1:
        return "{replicated}"
    others = [a for a in range(len(mesh_shape)) if a not in used]
    tile = [mesh_shape[d] if d >= 0 else 1 for d in dims]
    rep = math.prod(mesh_shape[a] for a in others)
    if rep > 1:
        tile.append(rep)
    perm = used + others
    if perm == list(range(len(mesh_shape))):  # the devices in the Mesh's order
        text = f"devices=[{','.join(map(str, tile))}]<=[{math.prod(mesh_shape)}]"
    else:
        text = (f"devices=[{','.join(map(str, tile))}]<=[{','.join(map(str, mesh_shape))}]"
                f"T({','.join(map(str, perm))})")
    if rep > 1:
        text += " last_tile_dim_replicate"
    return "{" + text + "}"


def sdy_mesh(names: tuple, shape: tuple[int, ...]) -> tuple[str, str]:
    """(symbol, module-level declaration) of a Shardy mesh with these axis names and sizes, its
    devices in order (the program's devices are the Mesh's, in the Mesh's order)."""
    sym = "tidu_mesh_" + "_".join(f"{re.sub(r'[^A-Za-z0-9]', '', str(n))}{k}"
                                  for n, k in zip(names, shape))
    axes = ", ".join(f"{json.dumps(str(n))}={k}" for n, k in zip(names, shape))
    return sym, f"  sdy.mesh @{sym} = <[{axes}]>"


def _shardy() -> bool:
    """Whether jax partitions with Shardy (its default), where a GSPMD annotation would make XLA
    fall back to GSPMD for the whole program."""
    jax = sys.modules.get("jax")
    return bool(jax is not None and getattr(jax.config, "jax_use_shardy_partitioner", False))


@register
@dataclass(frozen=True)
class ShardingHint(Primitive):
    """x, laid out over `mesh` (a jax Mesh): axis i of x split over Mesh axis dims[i], or not
    split (-1)."""

    mesh: Any
    dims: tuple[int, ...]
    linear = True
    opcode = "StopGradient"  # the interpreter's copy; the hint is for XLA only

    def __post_init__(self):
        object.__setattr__(self, "dims", tuple(int(d) for d in self.dims))
        m = len(self.mesh.axis_names)
        bad = [d for d in self.dims if not -1 <= d < m]
        used = [d for d in self.dims if d >= 0]
        if bad or len(set(used)) != len(used):
            raise ValueError(f"ShardingHint: dims {self.dims} must name each of the Mesh's "
                             f"{m} axes at most once (-1: not split)")

    @property
    def mesh_hint(self):
        """The Mesh the XLA runner runs a program holding this op on (tidu.backends.xla)."""
        return self.mesh

    def abstract_eval(self, x):
        check_dtype(self.name, x, ALL, "supported")
        if x.ndim != len(self.dims):
            raise ValueError(f"ShardingHint: dims {self.dims} for an operand of rank {x.ndim}")
        shape = tuple(self.mesh.devices.shape)
        for n, d in zip(x.shape, self.dims):
            if d >= 0 and n % shape[d]:
                raise ValueError(f"ShardingHint: an axis of size {n} cannot be split over Mesh "
                                 f"axis {self.mesh.axis_names[d]!r} of size {shape[d]}")
        return x

    def batch(self, b, primal_in, primal_out, bt):  # the batch axis leads, not split
        return [fix(b, ShardingHint(self.mesh, (-1,) + self.dims), bt[0])]

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        return [lin(b, self, ct, [A])]

    def lower(self, lo, out, x):
        if lo.nb:  # eval_batch places its batch axis itself, over its own devices
            return x
        if _shardy():  # jax's partitioner: Shardy's constraint over a declared mesh
            name, decl = sdy_mesh(tuple(self.mesh.axis_names), tuple(self.mesh.devices.shape))
            lo.funcs.setdefault(name, decl)
            axes = ", ".join("{" + (json.dumps(str(self.mesh.axis_names[d])) if d >= 0 else "")
                             + "}" for d in self.dims)
            return lo.op("sdy.sharding_constraint", [x], out,
                         f"sharding = #sdy.sharding<@{name}, [{axes}]>")
        text = hlo_sharding(tuple(self.mesh.devices.shape), self.dims)
        return lo.op("stablehlo.custom_call", [x], out,
                     f'call_target_name = "Sharding", mhlo.sharding = "{text}"')

    def impl(self, x):
        return x
