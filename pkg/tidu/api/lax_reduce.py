"""``td.lax``'s reductions, orderings and scans (jax.lax's spelling and semantics): ``reduce``
(a recognised monoid as one reduction primitive, any other associative body as a log-depth tree
of its traced applications), ``reduce_*``, ``argmax``/``argmin``, ``sort`` (several operands,
``num_keys``), ``sort_key_val``, the cumulative reductions with ``reverse``,
``associative_scan`` (jax's odd/even recursion), ``map`` (with ``batch_size``),
``optimization_barrier`` and ``approx_max_k``/``approx_min_k`` (exact).  docs/lax.md."""

from __future__ import annotations

import builtins
import operator
import sys

import numpy as np

from tidu.api.control_flow import _flatten, _unflatten, scan
from tidu.api.lax_math import add, max, min, mul
from tidu.api.lax_shapes import _concatenate, broadcast_in_dim, pad, rev, slice_in_dim
from tidu.api.vmap import vmap
from tidu.graph.dtypes import BOOL, INTS, kind_of
from tidu.numpy.construct import lexsort
from tidu.numpy.core import astype, reshape, transpose, where
from tidu.numpy.core import max as _tmax
from tidu.numpy.core import sum as _tsum
from tidu.numpy.logical import bitwise_and, bitwise_or, bitwise_xor
from tidu.numpy.sorting import all as _tall
from tidu.numpy.sorting import any as _tany
from tidu.numpy.sorting import argmax as _targmax
from tidu.numpy.sorting import argmin as _targmin
from tidu.numpy.sorting import argsort, cummax, cummin, top_k
from tidu.numpy.sorting import cumprod as _tcumprod
from tidu.numpy.sorting import cumsum as _tcumsum
from tidu.numpy.sorting import min as _tmin
from tidu.numpy.sorting import prod as _tprod
from tidu.numpy.sorting import sort as _tsort
from tidu.numpy.take import take_along_axis
from tidu.numpy.ufuncs import logaddexp
from tidu.trace.tracer import _lift, _trace_of

__all__ = [
    "approx_max_k", "approx_min_k", "argmax", "argmin", "associative_scan", "cumlogsumexp",
    "cummax", "cummin", "cumprod", "cumsum", "map", "optimization_barrier", "reduce",
    "reduce_and", "reduce_max", "reduce_min", "reduce_or", "reduce_prod", "reduce_sum",
    "reduce_xor", "sort", "sort_key_val",
]


def _tr(x):
    return _lift(_trace_of(x), x)


def _axes(name, axes, ndim):
    out = []
    for a in axes:
        a = operator.index(a)
        if not -ndim <= a < max_(ndim, 1):
            raise ValueError(f"{name}: axis {a} is out of range for rank {ndim}")
        out.append(a % max_(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: repeated axes {tuple(axes)}")
    return tuple(sorted(out))


max_ = builtins.max


# ---- reduce_* ----

def reduce_sum(operand, axes):
    """``jax.lax.reduce_sum``: the sum over ``axes`` (one ReduceSum)."""
    x = _tr(operand)
    ax = _axes("reduce_sum", axes, x.ndim)
    return _tsum(x, axis=ax) if ax else x


def reduce_prod(operand, axes):
    """``jax.lax.reduce_prod``: the product over ``axes``."""
    x = _tr(operand)
    ax = _axes("reduce_prod", axes, x.ndim)
    return _tprod(x, axis=ax, dtype=x.dtype) if ax else x


def reduce_max(operand, axes):
    """``jax.lax.reduce_max``: the maximum over ``axes`` (NaN propagates)."""
    x = _tr(operand)
    ax = _axes("reduce_max", axes, x.ndim)
    return _tmax(x, axis=ax) if ax else x


def reduce_min(operand, axes):
    """``jax.lax.reduce_min``: the minimum over ``axes``."""
    x = _tr(operand)
    ax = _axes("reduce_min", axes, x.ndim)
    return _tmin(x, axis=ax) if ax else x


def _bitwise_reduce(name, x, axes, on_bool, combine, ident):
    x = _tr(x)
    ax = _axes(name, axes, x.ndim)
    if not ax:
        return x
    if x.dtype == BOOL and on_bool is not None:
        return on_bool(x, axis=ax)
    if x.dtype not in INTS and x.dtype != BOOL:
        raise TypeError(f"{name}: operand must be bool or integer, got {x.dtype}")
    init = _lift(x._t, np.array(ident(x.dtype), x.dtype))
    return _tree([x], ax, lambda a, b: [combine(a[0], b[0])], [init])[0]


def reduce_and(operand, axes):
    """``jax.lax.reduce_and``: logical and over ``axes`` (bitwise for integers)."""
    return _bitwise_reduce("reduce_and", operand, axes, _tall, bitwise_and,
                           lambda dt: True if dt == BOOL else np.array(-1).astype(dt))


def reduce_or(operand, axes):
    """``jax.lax.reduce_or``: logical or over ``axes`` (bitwise for integers)."""
    return _bitwise_reduce("reduce_or", operand, axes, _tany, bitwise_or, lambda dt: 0)


def reduce_xor(operand, axes):
    """``jax.lax.reduce_xor``: exclusive or over ``axes`` (bitwise for integers)."""
    return _bitwise_reduce("reduce_xor", operand, axes, None, bitwise_xor, lambda dt: 0)


# ---- reduce ----

_COMBINE = {"add": add, "mul": mul, "max": max, "min": min, "and": bitwise_and,
            "or": bitwise_or}  # tidu's own, for a non-identity init (computation may be jax's)


def _monoids():
    """computation -> (tidu reducer, identity of a dtype) for the bodies jax's own
    _get_monoid_reducer recognises, by identity (tidu's, jax.lax's if jax is loaded, operator's
    and numpy's)."""
    def ident_max(dt):
        k = kind_of(dt)
        return -np.inf if k == "f" else (np.iinfo(dt).min if k in "iu" else False)

    def ident_min(dt):
        k = kind_of(dt)
        return np.inf if k == "f" else (np.iinfo(dt).max if k in "iu" else True)

    table = {
        "add": (reduce_sum, lambda dt: 0), "mul": (reduce_prod, lambda dt: 1),
        "max": (reduce_max, ident_max), "min": (reduce_min, ident_min),
        "and": (reduce_and, lambda dt: True if dt == BOOL else -1),
        "or": (reduce_or, lambda dt: False if dt == BOOL else 0),
    }
    fns = {add: "add", mul: "mul", max: "max", min: "min", bitwise_and: "and",
           bitwise_or: "or", operator.add: "add", operator.mul: "mul", operator.and_: "and",
           operator.or_: "or", np.add: "add", np.multiply: "mul", np.maximum: "max",
           np.minimum: "min"}
    jl = sys.modules.get("jax.lax")
    if jl is not None:
        fns.update({jl.add: "add", jl.mul: "mul", jl.max: "max", jl.min: "min",
                    jl.bitwise_and: "and", jl.bitwise_or: "or"})
    return fns, table


def reduce(operands, init_values, computation, dimensions, out_sharding=None):
    """``jax.lax.reduce``: operands (a pytree of arrays of one shape) reduced over
    ``dimensions`` with ``computation(acc, x) -> acc`` from ``init_values``.

    A single operand with add, mul, max, min, and or or (tidu's, jax.lax's, operator's or
    numpy's) and a concrete init value is one reduction primitive (the init combined once when it
    is not the identity).  Any other body must be associative (as XLA requires of it): it is
    applied in a tree of ceil(log2 n) traced steps, each on half the remaining elements, so
    values and derivatives come from the body's own primitives."""
    xs, spec = _flatten(operands)
    inits, ispec = _flatten(init_values)
    if len(xs) != len(inits) or not xs:
        raise ValueError(f"reduce: {len(xs)} operands but {len(inits)} init values")
    t = _trace_of(*xs, *inits)
    xs = [_lift(t, x) for x in xs]
    if any(x.shape != xs[0].shape for x in xs):
        raise ValueError(f"reduce: operands must have one shape, got {[x.shape for x in xs]}")
    ax = _axes("reduce", dimensions, xs[0].ndim)
    fns, table = _monoids()
    kind = fns.get(computation) if len(xs) == 1 else None
    if kind is not None and not hasattr(inits[0], "_t"):
        fn, ident = table[kind]
        x = xs[0]
        if kind in ("and", "or") and x.dtype not in INTS and x.dtype != BOOL:
            kind = None
        else:
            out = fn(x, ax)
            init = np.asarray(inits[0])
            if init.shape != () or not np.all(init == ident(x.dtype)):
                out = _COMBINE[kind](_lift(t, init.astype(x.dtype)), out)
            return _unflatten(spec, [out])

    def body(a, b):
        out, _ = _flatten(computation(_unflatten(spec, a), _unflatten(spec, b)))
        if len(out) != len(xs):
            raise ValueError(f"reduce: computation returned {len(out)} values for {len(xs)} "
                             f"operands")
        return out

    init_t = [_lift(t, i) for i in inits]
    init_t = [astype(i, x.dtype) if i.dtype != x.dtype else i for i, x in zip(init_t, xs)]
    return _unflatten(spec, _tree(xs, ax, body, init_t))


def _tree(xs, ax, body, inits):
    """xs reduced over axes ax by an associative body of lists, a tree of halvings."""
    nd = xs[0].ndim
    keep = [d for d in range(nd) if d not in ax]
    kshape = tuple(xs[0].shape[d] for d in keep)
    n = int(np.prod([xs[0].shape[d] for d in ax]))
    xs = [reshape(transpose(x, tuple(keep) + ax), kshape + (n,)) for x in xs]
    k = len(kshape)

    def fill(i, m):
        return broadcast_in_dim(inits[i], kshape + (m,), ())

    if n == 0:
        return [broadcast_in_dim(i, kshape, ()) for i in inits]
    while n > 1:
        if n % 2:
            xs = [_concatenate([x, fill(i, 1)], k) for i, x in enumerate(xs)]
            n += 1
        xs = body([slice_in_dim(x, 0, n, 2, k) for x in xs],
                  [slice_in_dim(x, 1, n, 2, k) for x in xs])
        n //= 2
    out = [reshape(x, kshape) for x in xs]
    return body([broadcast_in_dim(i, kshape, ()) for i in inits], out)


# ---- argmax / argmin ----

def argmax(operand, axis: int, index_dtype):
    """``jax.lax.argmax``: the index of the first maximum along ``axis`` (NaN first)."""
    x = _tr(operand)
    return astype(_targmax(x, axis=_axes("argmax", [axis], x.ndim)[0]), np.dtype(index_dtype))


def argmin(operand, axis: int, index_dtype):
    """``jax.lax.argmin``: the index of the first minimum along ``axis`` (NaN first)."""
    x = _tr(operand)
    return astype(_targmin(x, axis=_axes("argmin", [axis], x.ndim)[0]), np.dtype(index_dtype))


# ---- sort ----

def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """``jax.lax.sort``: ascending along ``dimension`` (NaN last, always stable); a sequence of
    operands is sorted by its first ``num_keys`` (lexicographically) and returned as a tuple,
    each operand permuted alike (one sort of the keys and a gather per operand)."""
    if not isinstance(operand, (tuple, list)):
        x = _tr(operand)
        if num_keys != 1:
            raise ValueError(f"sort: num_keys={num_keys} for a single operand")
        return _sort1(x, dimension)
    ops = [_lift(_trace_of(*operand), o) for o in operand]
    if not ops:
        raise ValueError("sort: no operands")
    if not 1 <= num_keys <= len(ops):
        raise ValueError(f"sort: num_keys={num_keys} out of range for {len(ops)} operands")
    if any(o.shape != ops[0].shape for o in ops):
        raise ValueError(f"sort: operands must have one shape, got {[o.shape for o in ops]}")
    ax = _axes("sort", [dimension], ops[0].ndim)[0]
    if num_keys == 1:
        perm = argsort(ops[0], axis=ax)
    else:
        perm = lexsort(list(reversed(ops[:num_keys])), axis=ax)
    return tuple(take_along_axis(o, perm, ax, mode="clip") for o in ops)


def _sort1(x, dimension):
    return _tsort(x, axis=_axes("sort", [dimension], x.ndim)[0])


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """``jax.lax.sort_key_val``: (sorted keys, values permuted alike)."""
    return sort((keys, values), dimension, is_stable, 1)


# ---- cumulative ----

def _cum(name, fn, operand, axis, reverse):
    x = _tr(operand)
    ax = _axes(name, [axis], x.ndim)[0]
    if reverse:
        return rev(fn(rev(x, [ax]), ax), [ax])
    return fn(x, ax)


def cumsum(operand, axis: int = 0, reverse: bool = False):
    """``jax.lax.cumsum``: the running sum along ``axis`` (from the end when ``reverse``), in
    the operand's dtype."""
    return _cum("cumsum", lambda x, a: _tcumsum(x, a, dtype=x.dtype), operand, axis, reverse)


def cumprod(operand, axis: int = 0, reverse: bool = False):
    """``jax.lax.cumprod``: the running product along ``axis``."""
    return _cum("cumprod", lambda x, a: _tcumprod(x, a, dtype=x.dtype), operand, axis, reverse)


def _cummax(operand, axis: int = 0, reverse: bool = False):
    return cummax(operand, axis, reverse)


def _cummin(operand, axis: int = 0, reverse: bool = False):
    return cummin(operand, axis, reverse)


def cumlogsumexp(operand, axis: int = 0, reverse: bool = False):
    """``jax.lax.cumlogsumexp``: log of the running sum of exp along ``axis``, as jax computes it
    off TPU: ``associative_scan(logaddexp)``."""
    x = _tr(operand)
    ax = _axes("cumlogsumexp", [axis], x.ndim)[0]
    return associative_scan(logaddexp, x, reverse=reverse, axis=ax)


# ---- associative_scan (jax's algorithm) ----

def associative_scan(fn, elems, reverse: bool = False, axis: int = 0):
    """``jax.lax.associative_scan``: the inclusive scan of an associative ``fn`` over a pytree of
    arrays along ``axis``, by jax's odd/even recursion (O(log n) levels of ``fn`` on slices)."""
    flat, spec = _flatten(elems)
    if not flat:
        raise ValueError("associative_scan: elems is empty")
    t = _trace_of(*flat)
    flat = [_lift(t, e) for e in flat]
    nd = flat[0].ndim
    ax = _axes("associative_scan", [axis], nd)[0]
    n = flat[0].shape[ax]
    if any(e.shape[ax] != n if e.ndim == nd else True for e in flat):
        raise ValueError(f"associative_scan: elems must share axis {axis} length, got shapes "
                         f"{[e.shape for e in flat]}")
    if reverse:
        flat = [rev(e, [ax]) for e in flat]

    def combine(a, b):
        out, _ = _flatten(fn(_unflatten(spec, a), _unflatten(spec, b)))
        if len(out) != len(a):
            raise ValueError(f"associative_scan: fn returned {len(out)} leaves, expected "
                             f"{len(a)}")
        return out

    def sl(e, a, b, s=1):
        m = e.shape[ax]
        return slice_in_dim(e, a, m + b if b is not None and b < 0 else b, s, ax)

    def _scan(es):
        m = es[0].shape[ax]
        if m < 2:
            return es
        reduced = combine([sl(e, 0, -1, 2) for e in es], [sl(e, 1, None, 2) for e in es])
        odd = _scan(reduced)
        if m % 2 == 0:
            even = combine([sl(e, 0, -1) for e in odd], [sl(e, 2, None, 2) for e in es])
        else:
            even = combine(odd, [sl(e, 2, None, 2) for e in es])
        even = [_concatenate([sl(e, 0, 1), r], ax) for e, r in zip(es, even)]
        return [_interleave(a, b, ax) for a, b in zip(even, odd)]

    out = _scan(flat)
    if reverse:
        out = [rev(e, [ax]) for e in out]
    return _unflatten(spec, out)


def _interleave(a, b, axis):
    """a[0], b[0], a[1], b[1], ... along axis (a one longer or as long as b), two Pads."""
    same = a.shape[axis] == b.shape[axis]
    ca = [(0, 1 if same else 0, 1) if i == axis else (0, 0, 0) for i in range(a.ndim)]
    cb = [(1, 0 if same else 1, 1) if i == axis else (0, 0, 0) for i in range(b.ndim)]
    pa, pb = pad(a, 0, ca), pad(b, 0, cb)
    return bitwise_or(pa, pb) if a.dtype == BOOL else pa + pb


# ---- map ----

def map(f, xs, *, batch_size: int | None = None):  # noqa: A001 - jax.lax's name
    """``jax.lax.map``: f over the leading axis of xs (a pytree) as a scan; with ``batch_size``,
    a scan over batches of f vmapped, the remainder vmapped once."""
    if batch_size is None:
        _, ys = scan(lambda c, x: (c, f(x)), (), xs)
        return ys
    leaves, spec = _flatten(xs)
    n = leaves[0].shape[0]
    b = int(batch_size)
    if b < 1:
        raise ValueError(f"map: batch_size must be positive, got {batch_size}")
    nb, rem = divmod(n, b)
    outs = []
    if nb:
        main = [reshape(slice_in_dim(_tr(x), 0, nb * b, 1, 0), (nb, b) + x.shape[1:])
                for x in leaves]
        _, ys = scan(lambda c, x: (c, vmap(f)(x)), (), _unflatten(spec, main))
        yl, yspec = _flatten(ys)
        outs.append(([reshape(y, (nb * b,) + y.shape[2:]) for y in yl], yspec))
    if rem:
        tail = [slice_in_dim(_tr(x), nb * b, n, 1, 0) for x in leaves]
        yl, yspec = _flatten(vmap(f)(_unflatten(spec, tail)))
        outs.append((yl, yspec))
    if len(outs) == 1:
        return _unflatten(outs[0][1], outs[0][0])
    return _unflatten(outs[0][1], [_concatenate([p, q], 0) for p, q in
                                   zip(outs[0][0], outs[1][0])])


# ---- misc ----

def optimization_barrier(operand, /):
    """``jax.lax.optimization_barrier``: the operand unchanged (tidu's scheduler does not move
    work across program boundaries it would need to respect)."""
    return operand


def approx_max_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """``jax.lax.approx_max_k``, computed exactly: top_k along reduction_dimension."""
    x = _tr(operand)
    return top_k(x, int(k), axis=_axes("approx_max_k", [reduction_dimension], x.ndim)[0])


def approx_min_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """``jax.lax.approx_min_k``, computed exactly: the k smallest along reduction_dimension,
    smallest first, and their int32 indices (one stable argsort and two slices/gathers)."""
    x = _tr(operand)
    ax = _axes("approx_min_k", [reduction_dimension], x.ndim)[0]
    k = int(k)
    if not 0 <= k <= x.shape[ax]:
        raise ValueError(f"approx_min_k: k={k} out of range for axis {ax} of shape {x.shape}")
    perm = slice_in_dim(argsort(x, axis=ax), 0, k, 1, ax)
    return take_along_axis(x, perm, ax, mode="clip"), astype(perm, np.int32)


_ = where
