"""Gather/scatter primitives: Gather, Scatter (set/add/mul/min/max); DynamicSlice and
DynamicUpdateSlice (``dynamic_slice``) build on their helpers.  Index operands are integer arrays
(int32/int64) and never carry a tangent.

Out-of-range rules (the StableHLO ones, which are also jax's defaults):

- ``Gather`` and ``DynamicSlice`` clamp: an index below 0 reads position 0, one past the end the
  last position; a start is clamped so that the whole window fits.
- ``Scatter`` drops an update whose index is outside ``[0, n)``; ``DynamicUpdateSlice`` clamps its
  start like ``DynamicSlice``.

Negative indices are wrapped by the front end (``tidu.indexing``) before they reach a primitive.
Transpose pairs: Gather <-> Scatter(add) (indices clamped for the scatter, so the pair stays
adjoint), DynamicSlice <-> DynamicUpdateSlice into zeros.  The rules of Scatter's non-linear modes
(mul, min, max) follow jax's definitions, in tidu primitives only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from tidu.ad.rules import register
from tidu.backends.xla.hlo import ELEMENT_DTYPE, tensor_type
from tidu.graph import aval
from tidu.ops.core import (
    ALL,
    INTS,
    NUMERIC,
    REAL,
    A,
    Add,
    BroadcastInDim,
    Convert,
    F,
    Mul,
    Primitive,
    Reshape,
    Transpose,
    add_all,
    aval_of,
    batch_size,
    broadcast_batch,
    check_dtype,
    conj_fixed,
    const,
    fix,
    lin,
    move_to_front,
    scale,
)
from tidu.ops.elementwise import Compare, Div, Max, Min
from tidu.ops.structural import Iota, Select

__all__ = ["Gather", "Scatter", "ScatterMode"]


# ---- helpers: fixed index arithmetic inside rules ----


def _clamp(b, idx, n: int):
    """idx clamped to [0, n - 1] (a fixed value)."""
    av = aval_of(b, idx)
    return fix(b, Min(), fix(b, Max(), idx, const(b, 0, av)), const(b, max(n - 1, 0), av))


def _bcast(b, v, shape, first: int):
    """A fixed value of shape I put at axes [first, first + len(I)) of `shape`."""
    nd = aval_of(b, v).ndim
    if tuple(shape) == aval_of(b, v).shape:
        return v
    return fix(b, BroadcastInDim(tuple(shape), tuple(range(first, first + nd))), v)


def _in_range(b, idx, n: int, shape, axis: int):
    """Bool mask over `shape` (an update's shape): its index lies in [0, n)."""
    return _bcast(b, fix(b, Compare("EQ"), idx, _clamp(b, idx, n)), shape, axis)


def _zeros_scatter(b, axis, x_av, idx, upd_t):
    """Scatter-add of the linear value upd_t into zeros of x's shape (out-of-range dropped)."""
    return lin(b, Scatter(axis, "add"), [const(b, 0, x_av), idx, upd_t], [F, F, A])


def _index_dims(name, x, idx, axis):
    check_dtype(name, x, ALL, "supported")
    if idx.dtype not in INTS:
        raise TypeError(f"{name}: index dtype {idx.dtype} is not an integer type (int32, int64)")
    if not 0 <= axis < x.ndim:
        raise ValueError(f"{name}: axis {axis} out of range for operand shape {x.shape}")
    return x.shape[:axis] + idx.shape + x.shape[axis + 1:]


def _lower_dims(lo, xnd: int, qnd: int, axis: int, kind: str) -> str:
    """StableHLO gather/scatter dimension numbers for an axis-``axis`` gather of an operand of rank
    ``xnd`` with indices of rank ``qnd`` (a trailing index vector of size 1 added)."""
    nb = lo.nb
    window = [nb + i for i in range(axis)] + [nb + axis + qnd + i for i in range(xnd - 1 - axis)]
    fields = []
    if kind == "gather":
        names = ("offset_dims", "collapsed_slice_dims", "operand_batching_dims",
                 "start_indices_batching_dims", "start_index_map")
    else:
        names = ("update_window_dims", "inserted_window_dims", "input_batching_dims",
                 "scatter_indices_batching_dims", "scatter_dims_to_operand_dims")
    for name, vals in zip(names, (window, [nb + axis], [0] * nb, [0] * nb, [nb + axis])):
        if vals:
            fields.append(f"{name} = [{', '.join(map(str, vals))}]")
    fields.append(f"index_vector_dim = {nb + qnd}")
    return ", ".join(fields)


def _index_vector(lo, idx_av, idx):
    """Indices of shape I as I + (1,) (the index vector StableHLO reads)."""
    q = idx_av.ndim
    return lo.op("stablehlo.broadcast_in_dim", [idx], aval(idx_av.shape + (1,), idx_av.dtype),
                 f"broadcast_dimensions = {lo.i64_array(range(lo.nb + q))}")


# ---- gather ----


@register
@dataclass(frozen=True)
class Gather(Primitive):
    """out[o, j, i] = x[o, clamp(idx[j]), i]: x indexed along `axis` by an integer array idx
    (output shape x.shape[:axis] + idx.shape + x.shape[axis+1:]); indices clamped to the axis."""

    axis: int
    linear = True  # in x (idx is an integer operand, never active)

    def abstract_eval(self, x, idx):
        shape = _index_dims(self.name, x, idx, self.axis)
        if x.shape[self.axis] == 0 and idx.size:
            raise ValueError(f"{self.name}: cannot gather from the empty axis {self.axis} of "
                             f"shape {x.shape}")
        return aval(shape, x.dtype)

    def batch(self, b, primal_in, primal_out, bt):
        return [_gather_batch(self.axis, b, *primal_in, *bt)]

    def linearize(self, b, primal_in, primal_out, t):
        if t[0] is None:
            return [None]
        return [lin(b, self, [t[0], primal_in[1]], [A, F])]

    def transpose_rule(self, b, ct, inputs, mode):
        if mode.active_mask[1]:
            raise ValueError("Gather is linear in its operand only; the index is never active")
        x, idx = inputs
        n = x.shape[self.axis]
        return [_zeros_scatter(b, self.axis, x.aval, _clamp(b, idx, n), ct[0]), None]

    def lower(self, lo, out, x, idx):
        x_av, i_av = _unbatched(x, lo), _unbatched(idx, lo)
        sizes = lo.lead(1) + tuple(1 if k == self.axis else d for k, d in enumerate(x_av.shape))
        dims = _lower_dims(lo, x_av.ndim, i_av.ndim, self.axis, "gather")
        return lo.op("stablehlo.gather", [x, _index_vector(lo, i_av, idx)], out,
                     f"dimension_numbers = #stablehlo.gather<{dims}>, indices_are_sorted = false, "
                     f"slice_sizes = {lo.i64_array(sizes)}")

    def impl(self, x, idx):
        n = x.shape[self.axis]
        return np.take(x, np.clip(idx, 0, max(n - 1, 0)), axis=self.axis)


def _unbatched(v, lo):
    """The AbstractValue of a lowering Value (its tensor type) without the batch axis."""
    dims, el = re.fullmatch(r"tensor<((?:\d+x)*)(.*)>", v.type).groups()
    dt = ELEMENT_DTYPE[el]
    return aval(tuple(int(p) for p in dims.split("x") if p)[lo.nb:], dt)


# ---- scatter ----


class ScatterMode(IntEnum):
    """How a Scatter combines an update with the value it lands on."""

    SET = 0
    ADD = 1
    MUL = 2
    MIN = 3
    MAX = 4

    def __repr__(self):
        return repr(self.name.lower())

    __str__ = __repr__


_MODE_DTYPES = {ScatterMode.SET: (ALL, "supported"), ScatterMode.ADD: (NUMERIC, "numeric"),
                ScatterMode.MUL: (NUMERIC, "numeric"), ScatterMode.MIN: (REAL, "real"),
                ScatterMode.MAX: (REAL, "real")}


_HLO_COMBINE = {ScatterMode.ADD: "stablehlo.add", ScatterMode.MUL: "stablehlo.multiply",
                ScatterMode.MIN: "stablehlo.minimum", ScatterMode.MAX: "stablehlo.maximum"}


@register
@dataclass(frozen=True)
class Scatter(Primitive):
    """x with updates combined in along `axis` at integer positions idx: out[o, idx[j], i] =
    combine(out[o, idx[j], i], u[o, j, i]), updates applied in order (with repeated indices `add`
    and `mul` accumulate, `set` keeps the last); an index outside [0, n) drops its update.
    u has Gather's output shape: x.shape[:axis] + idx.shape + x.shape[axis+1:]."""

    axis: int
    mode: ScatterMode

    def __post_init__(self):
        m = self.mode
        if isinstance(m, str):
            try:
                m = ScatterMode[m.upper()]
            except KeyError:
                raise ValueError(f"Scatter: unknown mode {self.mode!r}; expected one of "
                                 f"set, add, mul, min, max") from None
        object.__setattr__(self, "mode", ScatterMode(m))
        object.__setattr__(self, "axis", int(self.axis))

    @property
    def linear(self):  # set/add are linear in (x, u) jointly; mul in x for a fixed u
        return self.mode in (ScatterMode.SET, ScatterMode.ADD, ScatterMode.MUL)

    def abstract_eval(self, x, idx, u):
        shape = _index_dims(self.name, x, idx, self.axis)
        allowed, what = _MODE_DTYPES[self.mode]
        check_dtype(f"{self.name}({self.mode.name.lower()})", x, allowed, what)
        if u.dtype != x.dtype:
            raise TypeError(f"{self.name}: update dtype {u.dtype} does not match operand dtype "
                            f"{x.dtype}")
        if u.shape != shape:
            raise ValueError(f"{self.name}: update shape {u.shape} does not match {shape} (operand "
                             f"{x.shape} with index shape {idx.shape} at axis {self.axis})")
        return x

    # -- derivatives --
    def batch(self, b, primal_in, primal_out, bt):
        return [_scatter_batch(self, b, *primal_in, *bt)]

    def linearize(self, b, primal_in, primal_out, t):
        x, idx, u = primal_in
        tx, tu = t[0], t[2]
        if tx is None and tu is None:
            return [None]
        m = self.mode
        if m in (ScatterMode.SET, ScatterMode.ADD):
            args = [tx if tx is not None else const(b, 0, x.aval), idx,
                    tu if tu is not None else const(b, 0, u.aval)]
            return [lin(b, self, args, [tx is not None, F, tu is not None])]
        if m == ScatterMode.MUL:
            return [add_all(b, [lin(b, self, [tx, idx, u], [A, F, F]) if tx is not None else None,
                                self._mul_du(b, x, idx, u, tu) if tu is not None else None])]
        return [self._extremal(b, x, idx, u, primal_out[0], tx, tu)]

    def _mul_du(self, b, x, idx, u, tu):
        """d/du of x[p] * prod u[k]: c[k] du[k] scattered, c[k] = x[p] * prod_{j != k} u[j]
        without dividing by zero (jax's rule assumes unique indices; this one does not)."""
        n = x.aval.shape[self.axis]
        ci = _clamp(b, idx, n)
        nz = fix(b, Compare("NE"), u, const(b, 0, u.aval))
        one_u = const(b, 1, u.aval)
        u1 = fix(b, Select(), nz, u, one_u)
        prod_nz = fix(b, Scatter(self.axis, "mul"), const(b, 1, x.aval), idx, u1)
        zeros_i = fix(b, Convert("int64"), fix(b, Compare("EQ"), u, const(b, 0, u.aval)))
        zc = fix(b, Scatter(self.axis, "add"), const(b, 0, aval(x.aval.shape, "int64")), idx,
                 zeros_i)
        zk = fix(b, Gather(self.axis), zc, ci)
        zero_k = const(b, 0, aval_of(b, zk))
        one_k = const(b, 1, aval_of(b, zk))
        zero_u = const(b, 0, u.aval)
        w = fix(
            b,
            Select(),
            nz,
            fix(b, Select(), fix(b, Compare("EQ"), zk, zero_k), fix(b, Div(), one_u, u1), zero_u),
            fix(b, Select(), fix(b, Compare("EQ"), zk, one_k), one_u, zero_u),
        )
        c = fix(
            b,
            Mul(),
            fix(b, Mul(), fix(b, Gather(self.axis), x, ci), fix(b, Gather(self.axis), prod_nz, ci)),
            w,
        )
        return _zeros_scatter(b, self.axis, x.aval, idx, scale(b, c, tu))

    def _extremal(self, b, x, idx, u, r, tx, tu):
        """min/max: the tangent of whichever of x and the updates equals the result; ties share
        it equally (as jax's scatter_min/max JVP)."""
        n = x.aval.shape[self.axis]
        ci = _clamp(b, idx, n)
        dt = x.aval.dtype.name
        valid = _in_range(b, idx, n, u.aval.shape, self.axis)
        rk = fix(b, Gather(self.axis), r, ci)
        hu = fix(
            b,
            Convert(dt),
            fix(
                b,
                Select(),
                valid,
                fix(b, Compare("EQ"), u, rk),
                const(b, False, aval(u.aval.shape, "bool")),
            ),
        )
        hx = fix(b, Convert(dt), fix(b, Compare("EQ"), x, r))
        cnt = fix(b, Add(), hx, fix(b, Scatter(self.axis, "add"), const(b, 0, x.aval), idx, hu))
        terms = []
        if tx is not None:
            terms.append(scale(b, fix(b, Div(), hx, cnt), tx))
        if tu is not None:
            wu = fix(b, Div(), hu, fix(b, Gather(self.axis), cnt, ci))
            terms.append(_zeros_scatter(b, self.axis, x.aval, idx, scale(b, wu, tu)))
        return add_all(b, terms)

    def transpose_rule(self, b, ct, inputs, mode):
        x, idx, u = inputs
        m = mode.active_mask
        if m[1]:
            raise ValueError("Scatter: the index operand is never active")
        n = x.shape[self.axis]
        c = ct[0]
        if self.mode == ScatterMode.MUL:
            if m[2]:
                raise ValueError("Scatter(mul) is linear in its operand only (updates fixed)")
            return [lin(b, self, [c, idx, conj_fixed(b, u)], [A, F, F]), None, None]
        if self.mode not in (ScatterMode.ADD, ScatterMode.SET):
            raise ValueError(f"Scatter({self.mode.name.lower()}) is not linear")
        ci = _clamp(b, idx, n)
        ct_x = ct_u = None
        if self.mode == ScatterMode.ADD:
            if m[0]:
                ct_x = c
            if m[2]:
                keep = _in_range(b, idx, n, u.shape, self.axis)
        else:  # set: the overwritten positions get no cotangent; only the winning update does
            if m[0]:
                ct_x = lin(b, self, [c, idx, const(b, 0, u.aval)], [A, F, F])
            if m[2]:
                ids = fix(b, Reshape(u.shape), fix(b, Iota((max(u.aval.size, 0),), "int64", 0)))
                owner = fix(b, self, const(b, -1, aval(x.shape, "int64")), idx, ids)
                keep = fix(b, Compare("EQ"), fix(b, Gather(self.axis), owner, ci), ids)
        if m[2]:
            g = lin(b, Gather(self.axis), [c, ci], [A, F])
            ct_u = lin(b, Select(), [keep, g, const(b, 0, u.aval)], [F, A, F])
        return [ct_x, None, ct_u]

    # -- evaluation --
    def lower(self, lo, out, x, idx, u):
        i_av = _unbatched(idx, lo)
        dims = _lower_dims(lo, len(out.shape), i_av.ndim, self.axis, "scatter")
        st = f"tensor<{_el(out.dtype)}>"
        a, c, s = lo.fresh(), lo.fresh(), lo.fresh()
        if self.mode == ScatterMode.SET:
            body = f'      "stablehlo.return"({c}) : ({st}) -> ()\n'
        else:
            body = (
                f'      {s} = "{_HLO_COMBINE[self.mode]}"({a}, {c}) : ({st}, {st}) -> {st}\n'
                f'      "stablehlo.return"({s}) : ({st}) -> ()\n'
            )
        region = f"    ^bb0({a}: {st}, {c}: {st}):\n{body}    "
        return lo.op(
            "stablehlo.scatter",
            [x, _index_vector(lo, i_av, idx), u],
            out,
            f"scatter_dimension_numbers = #stablehlo.scatter<{dims}>, "
            f"indices_are_sorted = false, unique_indices = false",
            region=region,
        )

    def impl(self, x, idx, u):
        out = np.array(x, copy=True)
        n = x.shape[self.axis]
        xa = np.moveaxis(out, self.axis, 0)
        ua = np.moveaxis(
            u, list(range(self.axis, self.axis + idx.ndim)), list(range(idx.ndim))
        ).reshape((idx.size,) + xa.shape[1:])
        for j, p in enumerate(np.asarray(idx).reshape(-1).tolist()):
            if not 0 <= p < n:
                continue
            m = self.mode
            if m == ScatterMode.SET:
                xa[p] = ua[j]
            elif m == ScatterMode.ADD:
                xa[p] = xa[p] + ua[j]
            elif m == ScatterMode.MUL:
                xa[p] = xa[p] * ua[j]
            elif m == ScatterMode.MIN:
                xa[p] = np.minimum(xa[p], ua[j])
            else:
                xa[p] = np.maximum(xa[p], ua[j])
        return out


def _el(dtype) -> str:
    return tensor_type((), dtype)[len("tensor<") : -1]


# ---- batching (vmap) ----


def _flatten_batch(b, x, axis: int):
    """x of shape (B,) + s with its batch axis folded into axis `axis` of s: shape
    s[:axis] + (B * s[axis],) + s[axis+1:] (element b's positions come b * s[axis] later)."""
    shape = aval_of(b, x).shape
    n_b, rest = shape[0], shape[1:]
    perm = tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, len(shape)))
    xt = fix(b, Transpose(perm), x) if axis else x
    return fix(b, Reshape(rest[:axis] + (n_b * rest[axis],) + rest[axis + 1 :]), xt)


def _unflatten_batch(b, y, axis: int, n_b: int):
    """The inverse of _flatten_batch: batch axis back in front."""
    shape = aval_of(b, y).shape
    y = fix(b, Reshape(shape[:axis] + (n_b, shape[axis] // n_b) + shape[axis + 1 :]), y)
    return move_to_front(b, y, axis)


def _batch_offsets(b, idx, n: int, drop: bool):
    """Batched indices idx (B,) + I made global over a batch folded into an axis of size n:
    idx + b * n, element b's own index clamped to [0, n) first (a gather), or sent out of range
    where it was out of range (a scatter, which drops it)."""
    av = aval_of(b, idx)
    off = fix(b, Mul(), fix(b, Iota(av.shape, av.dtype.name, 0)), const(b, n, av))
    if not drop:
        return fix(b, Add(), _clamp(b, idx, n), off)
    inside = fix(b, Compare("EQ"), idx, _clamp(b, idx, n))
    return fix(b, Select(), inside, fix(b, Add(), idx, off), const(b, -1, av))


def _gather_batch(axis, b, x, idx, bx, bidx):
    """Gather(axis) over batched operands (batch axis leading in and out)."""
    if bidx is None:
        return fix(b, Gather(axis + 1), bx, idx)
    if bx is None:
        return move_to_front(b, fix(b, Gather(axis), x, bidx), axis)
    n = aval_of(b, bx).shape[axis + 1]
    out = fix(b, Gather(axis), _flatten_batch(b, bx, axis), _batch_offsets(b, bidx, n, False))
    return move_to_front(b, out, axis)


def _scatter_batch(op, b, x, idx, u, bx, bidx, bu):
    """Scatter(axis, mode) over batched operands (batch axis leading in and out)."""
    axis = op.axis
    n_b = batch_size(b, [bx, bidx, bu])
    bx = bx if bx is not None else broadcast_batch(b, x, n_b)
    bu = bu if bu is not None else broadcast_batch(b, u, n_b)
    if bidx is None:
        return fix(b, Scatter(axis + 1, op.mode), bx, idx, bu)
    n = aval_of(b, bx).shape[axis + 1]
    uf = bu
    if axis:  # (B,) + o + I + i  ->  o + (B,) + I + i
        nd = aval_of(b, bu).ndim
        uf = fix(b, Transpose(tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, nd))), bu)
    out = fix(
        b, Scatter(axis, op.mode), _flatten_batch(b, bx, axis), _batch_offsets(b, bidx, n, True), uf
    )
    return _unflatten_batch(b, out, axis, n_b)
