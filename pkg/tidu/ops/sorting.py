"""Ordering and accumulation primitives: Cumsum, Cumprod, Cummax, Cummin, LinearScan and Sort
(the reductions built on them are in ``reductions``) (C++ kernels: ``sort_scan.hpp``).

Order is numpy's: NaN above every number (sorted last, propagated by min and the cumulative
min/max, the first NaN is both argmax and argmin), complex numbers by real then imaginary part.
Derivatives are jax's and use only tidu primitives:

- min: the tangent of the minimum, ties sharing it equally (as ReduceMax);
- prod: sum_i (product of the others) dx_i, the products of the others from exclusive prefix and
  suffix products (Cumprod) -- no division, so exact at zeros;
- cumsum is linear, its transpose a cumsum the other way;
- cumprod, cummax, cummin and LinearScan differentiate to a LinearScan (the first-order linear
  recurrence s_k = a_k s_{k-1} + b_k, linear in b), whose transpose is the recurrence run backwards:
  every derivative stays O(n), never divides, and differentiates again;
- sort's tangent is the tangent gathered by the sorting permutation (a Sort of an iota by the
  keys); its transpose is the gather's, a scatter-add of the cotangent back.  A jitted program
  that has both that permutation and the sort of the same keys (sort's gradient; sort and
  argsort) sorts once: ``share_sorts`` makes the sorted values the keys gathered by the
  permutation (jax's sort JVP sorts keys and iota together too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidu._native import _core
from tidu.ad.rules import register
from tidu.backends.xla.hlo import ELEMENT_DTYPE, Value, tensor_type
from tidu.graph import ValKey, aval, materialize_merge, prim_of, resolve
from tidu.graph.dtypes import kind_of
from tidu.ops.core import (
    ALL,
    INEXACT,
    NUMERIC,
    REAL,
    A,
    Add,
    Constant,
    Convert,
    F,
    Mul,
    Primitive,
    Reshape,
    add_all,
    aval_of,
    check_dtype,
    conj_fixed,
    const,
    fix,
    lin,
    ref,
    scale,
    shifted,
)
from tidu.ops.elementwise import Compare
from tidu.ops.gather import Gather
from tidu.ops.structural import Concatenate, Iota, Slice

__all__ = ["Cumsum", "Cumprod", "Cummax", "Cummin", "LinearScan", "Sort", "share_sorts",
           "sorts_twice"]


# ---- helpers ----


def _permute(b, keys, axis: int, descending: bool, t):
    """t (active) permuted along `axis` as Sort(axis, descending) permutes `keys`: the sorting
    permutation (one Sort of an iota by the keys), then one Gather of t along a flat axis."""
    shape = aval_of(b, keys).shape
    perm = fix(b, Sort(axis, descending), keys, fix(b, Iota(shape, "int64", axis)))
    return _take_along(b, t, perm, shape, axis, True)


def _take_along(b, t, perm, shape, axis: int, active: bool):
    """t[..., perm, ...] along `axis` (perm: int64 of t's shape): one Gather along a flat axis;
    a linear node of t when active, else a fixed one."""
    n = int(np.prod(shape))

    def emit(op, x, *rest):
        return lin(b, op, [x, *rest], [A] + [F] * len(rest)) if active else fix(b, op, x, *rest)
    if len(shape) == 1:
        return emit(Gather(0), t, perm)
    # flat index: perm * stride(axis) + the offset of every other coordinate
    strides = np.cumprod((1,) + shape[:0:-1])[::-1].astype(np.int64)
    grid = np.indices(shape, dtype=np.int64)
    offsets = sum(grid[k] * strides[k] for k in range(len(shape)) if k != axis)
    iav = aval(shape, "int64")
    flat = fix(b, Add(), fix(b, Mul(), perm, const(b, strides[axis], iav)),
               fix(b, Constant.of(np.asarray(offsets, np.int64))))
    flat = fix(b, Reshape((n,)), flat)
    return emit(Reshape(shape), emit(Gather(0), emit(Reshape((n,)), t), flat))


def share_sorts(builder, keys: list) -> list | None:
    """One sort where a program sorts keys x both alone (``Sort(x)``, the sorted values) and
    with an iota along the axis (``Sort(x, iota)``, the sorting permutation: argsort, and the
    permutation of sort's derivative): the values become x gathered by the permutation, as
    jax's sort JVP sorts once and gathers (values equal, element for element).  Returns the
    program's output keys with that replacement (ops emitted into builder, the trace's), or
    None where there is nothing to share."""
    frag = builder.build(keys)
    defs, alone, paired = {}, [], {}
    for op, ins, outs, _mode in materialize_merge(resolve([frag]), frag.outputs).ops():
        defs[outs[0].id] = op
        if type(op) is not Sort:
            continue
        if len(ins) == 1:
            alone.append((op, ins[0], outs[0]))
            continue
        io = defs.get(ins[1].id)
        if type(io) is Iota and io.dimension == op.axis and io.shape == ins[0].aval.shape \
                and np.dtype(io.dtype).kind in "iu":
            paired[(op, ins[0].id)] = outs[0]
    mapping = {}
    for op, x, y in alone:
        perm = paired.get((op, x.id))
        if perm is None:
            continue
        p = perm if perm.aval.dtype == np.int64 else fix(builder, Convert("int64"), perm)
        mapping[y.id] = builder.key(ref(_take_along(builder, x, p, x.aval.shape, op.axis,
                                                    False))).id
    if not mapping:
        return None
    mat = resolve([builder.build(keys)]).walk(list(keys))
    return [ValKey(v) for v in _core.substitute(builder.store, mat, mapping)]


def sorts_twice(exe) -> bool:
    """Whether a compiled program has a one-operand Sort and a two-operand one (whose
    sharing ``share_sorts`` would look for)."""
    prims = exe.arrays["instr_prim"]
    if not len(prims):
        return False
    sorts = [p for p in np.unique(prims).tolist() if type(prim_of(p)) is Sort]
    if not sorts:
        return False
    n_in = np.diff(exe.arrays["in_off"])
    counts = {int(k) for k in n_in[np.isin(prims, sorts)]}
    return {1, 2} <= counts


def _check_axis(name: str, axis: int, x) -> None:
    if not 0 <= axis < x.ndim:
        raise ValueError(f"{name}: axis {axis} out of range for shape {x.shape}")


def _shift(b, x, axis: int, toward_end: bool, fill):
    """x moved one place along axis (toward higher indices when toward_end), the vacated end
    filled with `fill`: a fixed value from a fixed one."""
    av = aval_of(b, x)
    n = av.shape[axis]
    if n == 0:
        return x
    edge = const(b, fill, aval(tuple(1 if i == axis else d for i, d in enumerate(av.shape)),
                               av.dtype))
    start = [0] * av.ndim
    limit = list(av.shape)
    if toward_end:
        limit[axis] = n - 1
    else:
        start[axis] = 1
    body = fix(b, Slice(tuple(start), tuple(limit), (1,) * av.ndim), x)
    parts = [edge, body] if toward_end else [body, edge]
    return fix(b, Concatenate(axis), *parts)


def _hlo_cmp(lo_, a, b, direction, ty):
    r = lo_.fresh()
    lo_.lines.append(f'      {r} = "stablehlo.compare"({a}, {b}) {{comparison_direction = '
                     f'#stablehlo<comparison_direction {direction}>}} : ({ty}, {ty}) -> tensor<i1>')
    return r


def _hlo_bin(lo_, op, a, b, ty):
    r = lo_.fresh()
    lo_.lines.append(f'      {r} = "stablehlo.{op}"({a}, {b}) : ({ty}, {ty}) -> {ty}')
    return r


def _hlo_un(lo_, op, a, ty, out_ty):
    r = lo_.fresh()
    lo_.lines.append(f'      {r} = "stablehlo.{op}"({a}) : ({ty}) -> {out_ty}')
    return r


def _less(rg, a, b, dtype) -> str:
    """i1: a < b in numpy's sort order (NaN last, complex lexicographic) on rank-0 tensors."""
    dt = np.dtype(dtype)
    ty = tensor_type((), dt)
    if kind_of(dt) == "c":
        rt = tensor_type((), np.empty(0, dt).real.dtype)
        ar, br = _hlo_un(rg, "real", a, ty, rt), _hlo_un(rg, "real", b, ty, rt)
        ai, bi = _hlo_un(rg, "imag", a, ty, rt), _hlo_un(rg, "imag", b, ty, rt)
        lt_r, gt_r = _less(rg, ar, br, np.float64 if "f64" in rt else np.float32), \
            _less(rg, br, ar, np.float64 if "f64" in rt else np.float32)
        lt_i = _less(rg, ai, bi, np.float64 if "f64" in rt else np.float32)
        b1 = "tensor<i1>"
        eq_r = _hlo_un(rg, "not", _hlo_bin(rg, "or", lt_r, gt_r, b1), b1, b1)
        return _hlo_bin(rg, "or", lt_r, _hlo_bin(rg, "and", eq_r, lt_i, b1), b1)
    lt = _hlo_cmp(rg, a, b, "LT", ty)
    if kind_of(dt) != "f":
        return lt
    b1 = "tensor<i1>"
    b_nan = _hlo_cmp(rg, b, b, "NE", ty)
    a_num = _hlo_cmp(rg, a, a, "EQ", ty)
    return _hlo_bin(rg, "or", lt, _hlo_bin(rg, "and", b_nan, a_num, b1), b1)


def _region(lo, args, build) -> str:
    """A region ^bb0(args...) whose body `build(lo)` writes (into lo.lines, taken back here) and
    whose return values it gives."""
    saved = lo.lines
    lo.lines = []
    rets = build()
    body = lo.lines
    lo.lines = saved
    head = ", ".join(f"{n}: {t}" for n, t in args)
    tys = ", ".join(t for _, t in rets)
    return (f"    ^bb0({head}):\n" + "\n".join(body) + ("\n" if body else "") +
            f'      "stablehlo.return"({", ".join(n for n, _ in rets)}) : ({tys}) -> ()\n    ')


_EL = ELEMENT_DTYPE


def _type_dtype(ty: str) -> str:
    """The dtype name of a ranked tensor type string ``tensor<2x3xf64>``."""
    body = ty[len("tensor<"):-1]
    if "complex" in body:
        return _EL[body[body.index("complex"):]]
    return _EL[body.rsplit("x", 1)[-1]]


def _type_shape(ty: str) -> tuple[int, ...]:
    body = ty[len("tensor<"):-1]
    if "complex" in body:
        body = body[:body.index("complex")] + "c"
    return tuple(int(d) for d in body.split("x")[:-1])


# ---- scans ----


@dataclass(frozen=True)
class _Scan(Primitive):
    axis: int
    reverse: bool = False
    _dtypes = NUMERIC
    _what = "numeric"
    _body = ""
    _ufunc = None

    batch = shifted("axis")

    def __post_init__(self):
        object.__setattr__(self, "axis", int(self.axis))
        object.__setattr__(self, "reverse", bool(self.reverse))

    def abstract_eval(self, x):
        check_dtype(self.name, x, self._dtypes, self._what)
        _check_axis(self.name, self.axis, x)
        return x

    def lower(self, lo, out, x):
        # as jax on CPU/GPU: a reduce_window whose window covers the whole axis, padded before
        nd, n = len(out.shape), out.shape[self.axis]
        win = lo.lead(1) + tuple(n if i == self.axis else 1 for i in range(nd))
        pad = [[0, 0]] * lo.nb + [[0, 0] if i != self.axis else
                                  ([0, n - 1] if self.reverse else [n - 1, 0]) for i in range(nd)]
        pad_ty = f"tensor<{nd + lo.nb}x2xi64>"
        pad_txt = "[" + ", ".join(f"[{p}, {q}]" for p, q in pad) + "]"
        init = lo.scalar(self._init(out.dtype), out.dtype)
        st = lo.tensor_type((), out.dtype)
        u, v, s = lo.fresh(), lo.fresh(), lo.fresh()
        region = (f"    ^bb0({u}: {st}, {v}: {st}):\n"
                  f'      {s} = "{self._body}"({u}, {v}) : ({st}, {st}) -> {st}\n'
                  f'      "stablehlo.return"({s}) : ({st}) -> ()\n    ')
        return lo.op("stablehlo.reduce_window", [x, init], out,
                     f"window_dimensions = {lo.i64_array(win)}, "
                     f"window_strides = {lo.i64_array((1,) * (nd + lo.nb))}, "
                     f"padding = dense<{pad_txt}> : {pad_ty}", region=region)

    def impl(self, x):
        x = np.asarray(x)
        xs = np.flip(x, self.axis) if self.reverse else x
        with np.errstate(all="ignore"):
            y = self._ufunc.accumulate(xs, axis=self.axis, dtype=x.dtype)
        return np.flip(y, self.axis) if self.reverse else y


@register
@dataclass(frozen=True)
class Cumsum(_Scan):
    """Running sum along `axis` (from the end when `reverse`); integers wrap."""

    linear = True
    _body = "stablehlo.add"
    _ufunc = np.add

    @staticmethod
    def _init(dt):
        return 0

    def linearize(self, b, primal_in, primal_out, t):
        return [lin(b, self, t, [A])]

    def transpose_rule(self, b, ct, inputs, mode):
        return [lin(b, Cumsum(self.axis, not self.reverse), ct, [A])]


@register
@dataclass(frozen=True)
class Cumprod(_Scan):
    """Running product along `axis` (from the end when `reverse`); integers wrap."""

    _body = "stablehlo.multiply"
    _ufunc = np.multiply

    @staticmethod
    def _init(dt):
        return 1

    def linearize(self, b, primal_in, primal_out, t):
        # dy_k = x_k dy_{k-1} + y_{k-1} dx_k (y before the first element is 1): a LinearScan
        if t[0] is None:
            return [None]
        x, y = primal_in[0], primal_out[0]
        prev = _shift(b, y, self.axis, not self.reverse, 1)
        return [lin(b, LinearScan(self.axis, self.reverse), [x, scale(b, prev, t[0])], [F, A])]


@dataclass(frozen=True)
class _CumExtreme(_Scan):
    _dtypes = REAL
    _what = "real (float or int)"

    def linearize(self, b, primal_in, primal_out, t):
        # the tangent of the element where the running extreme was last attained:
        # s_k = (1 - m_k) s_{k-1} + m_k dx_k, m_k = (x_k == y_k)
        if t[0] is None:
            return [None]
        x, y = primal_in[0], primal_out[0]
        dt = x.aval.dtype.name
        hit = fix(b, Convert(dt), fix(b, Compare("EQ"), x, y))
        miss = fix(b, Convert(dt), fix(b, Compare("NE"), x, y))
        return [lin(b, LinearScan(self.axis, self.reverse), [miss, scale(b, hit, t[0])], [F, A])]


@register
@dataclass(frozen=True)
class Cummax(_CumExtreme):
    """Running maximum along `axis` (from the end when `reverse`); NaN propagates."""

    _body = "stablehlo.maximum"
    _ufunc = np.fmax  # (replaced in impl: NaN propagates)

    @staticmethod
    def _init(dt):
        return -np.inf if kind_of(np.dtype(dt)) == "f" else np.iinfo(dt).min

    def impl(self, x):
        return _cum_extreme(np.maximum, x, self.axis, self.reverse)


@register
@dataclass(frozen=True)
class Cummin(_CumExtreme):
    """Running minimum along `axis` (from the end when `reverse`); NaN propagates."""

    _body = "stablehlo.minimum"

    @staticmethod
    def _init(dt):
        return np.inf if kind_of(np.dtype(dt)) == "f" else np.iinfo(dt).max

    def impl(self, x):
        return _cum_extreme(np.minimum, x, self.axis, self.reverse)


def _cum_extreme(uf, x, axis, reverse):
    x = np.asarray(x)
    xs = np.flip(x, axis) if reverse else x
    y = uf.accumulate(xs, axis=axis)
    return np.flip(y, axis) if reverse else y


@register
@dataclass(frozen=True)
class LinearScan(Primitive):
    """s_k = a_k s_{k-1} + b_k along `axis` (s before the first element 0; from the end when
    `reverse`): the first-order linear recurrence, linear in b.  Derivatives of the cumulative
    ops are written with it."""

    axis: int
    reverse: bool = False
    batch = shifted("axis")

    def __post_init__(self):
        object.__setattr__(self, "axis", int(self.axis))
        object.__setattr__(self, "reverse", bool(self.reverse))

    def abstract_eval(self, a, b):
        check_dtype(self.name, a, INEXACT, "floating or complex")
        if a.dtype != b.dtype or a.shape != b.shape:
            raise ValueError(f"{self.name}: operands {a} and {b} differ in shape or dtype")
        _check_axis(self.name, self.axis, a)
        return a

    def linearize(self, b, primal_in, primal_out, t):
        # ds_k = a_k ds_{k-1} + (da_k s_{k-1} + db_k)
        a, s = primal_in[0], primal_out[0]
        terms = [t[1]]
        if t[0] is not None:
            terms.append(scale(b, _shift(b, s, self.axis, not self.reverse, 0), t[0]))
        rhs = add_all(b, terms)
        return [None if rhs is None else lin(b, self, [a, rhs], [F, A])]

    def transpose_rule(self, b, ct, inputs, mode):
        # adjoint: g_k = ct_k + conj(a_{k+1}) g_{k+1}, the recurrence run the other way
        if mode.active_mask[0]:
            raise ValueError("LinearScan is linear in b only; a must be fixed")
        a = conj_fixed(b, inputs[0])
        a_next = _shift(b, a, self.axis, self.reverse, 0)
        return [None, lin(b, LinearScan(self.axis, not self.reverse), [a_next, ct[0]], [F, A])]

    def lower(self, lo, out, a, x):
        # log-depth (Hillis-Steele) scan of the pairs (a, b) with (a1, b1) then (a2, b2) =
        # (a1 a2, a2 b1 + b2): ceil(log2 n) rounds of shifted multiply-adds
        nd, n = len(out.shape), out.shape[self.axis]
        ax = self.axis + lo.nb
        full = lo.shape(out.shape)
        zero = lo.scalar(0, out.dtype)
        one = lo.scalar(1, out.dtype)

        def shifted(v, d, fill):
            # v moved d places in scan direction, `fill` in the d vacated places
            start = [0] * len(full)
            limit = list(full)
            low = [0] * len(full)
            high = [0] * len(full)
            if self.reverse:
                start[ax] = d
                high[ax] = d
            else:
                limit[ax] = full[ax] - d
                low[ax] = d
            part_shape = tuple(limit[i] - start[i] for i in range(len(full)))
            pty = lo.tensor_type(part_shape, out.dtype)
            part = lo.op("stablehlo.slice", [v], pty,
                         f"start_indices = {lo.i64_array(start)}, limit_indices = "
                         f"{lo.i64_array(limit)}, strides = {lo.i64_array([1] * len(full))}")
            return lo.op("stablehlo.pad", [part, fill], out,
                         f"edge_padding_low = {lo.i64_array(low)}, edge_padding_high = "
                         f"{lo.i64_array(high)}, "
                         f"interior_padding = {lo.i64_array([0] * len(full))}")

        s, coef, d = x, a, 1
        del nd
        while d < n:
            s = lo.op("stablehlo.add", [s, lo.op("stablehlo.multiply",
                                                 [coef, shifted(s, d, zero)], out)], out)
            if 2 * d < n:
                coef = lo.op("stablehlo.multiply", [coef, shifted(coef, d, one)], out)
            d *= 2
        return s

    def impl(self, a, b):
        a, b = np.moveaxis(np.asarray(a), self.axis, 0), np.moveaxis(np.asarray(b), self.axis, 0)
        out = np.empty_like(b)
        order = range(len(b) - 1, -1, -1) if self.reverse else range(len(b))
        s = np.zeros_like(b[0]) if len(b) else None
        for k in order:
            s = a[k] * s + b[k]
            out[k] = s
        return np.moveaxis(out, 0, self.axis)


# ---- sort ----


@register
@dataclass(frozen=True)
class Sort(Primitive):
    """Stable sort along `axis`: of the operand, or with two operands (keys, values) the values
    permuted as the keys sort.  Ascending with NaN last, or `descending` with NaN first (the
    reverse of the ascending order, ties kept in their original order)."""

    axis: int
    descending: bool = False
    batch = shifted("axis")

    def __post_init__(self):
        object.__setattr__(self, "axis", int(self.axis))
        object.__setattr__(self, "descending", bool(self.descending))

    def abstract_eval(self, *xs):
        if len(xs) not in (1, 2):
            raise ValueError(f"{self.name}: takes keys or (keys, values), got {len(xs)} operands")
        keys = xs[0]
        check_dtype(self.name, keys, ALL, "supported")
        _check_axis(self.name, self.axis, keys)
        if len(xs) == 2 and xs[1].shape != keys.shape:
            raise ValueError(f"{self.name}: values of shape {xs[1].shape} do not match keys of "
                             f"shape {keys.shape}")
        return xs[-1]

    def linearize(self, b, primal_in, primal_out, t):
        # the tangent permuted as the values (keys carry no tangent: the order is locally
        # constant): gathered by the sorting permutation, so that the transpose is Gather's, a
        # scatter-add of the cotangent back (O(n)), and no third sort
        if t[-1] is None:
            return [None]
        return [_permute(b, primal_in[0], self.axis, self.descending, t[-1])]

    def transpose_rule(self, b, ct, inputs, mode):
        if len(inputs) != 2 or mode.active_mask[0]:
            raise ValueError("Sort is linear in its values only; the keys must be fixed")
        keys = inputs[0]
        iota = fix(b, Iota(keys.shape, "int64", self.axis))
        perm = fix(b, Sort(self.axis, self.descending), keys, iota)
        return [None, lin(b, Sort(self.axis, False), [perm, ct[0]], [F, A])]

    def lower(self, lo, out, *xs):
        keys = xs[0]
        kdt = np.dtype(_type_dtype(keys.type))
        names = [lo.fresh() for _ in range(2 * len(xs))]
        args = []
        for v, (p, q) in zip(xs, zip(names[::2], names[1::2])):
            st = lo.tensor_type((), _type_dtype(v.type))
            args += [(p, st), (q, st)]
        p, q = names[0], names[1]

        def body():
            lt = _less(lo, q, p, kdt) if self.descending else _less(lo, p, q, kdt)
            return [(lt, "tensor<i1>")]

        region = _region(lo, args, body)
        r = lo.fresh()
        tys = ", ".join(v.type for v in xs)
        lo.lines.append(f'    {r}:{len(xs)} = "stablehlo.sort"({", ".join(v.name for v in xs)}) '
                        f'({{\n{region}}}) {{dimension = {self.axis + lo.nb} : i64, '
                        f'is_stable = true}} : ({tys}) -> ({tys})')
        return Value(f"{r}#{len(xs) - 1}", xs[-1].type)

    def impl(self, *xs):
        keys = np.asarray(xs[0])
        if self.descending:
            n = keys.shape[self.axis]
            rk = np.flip(keys, self.axis)
            perm = n - 1 - np.flip(np.argsort(rk, axis=self.axis, kind="stable"), self.axis)
        else:
            perm = np.argsort(keys, axis=self.axis, kind="stable")
        return np.take_along_axis(np.asarray(xs[-1]), perm, axis=self.axis)
