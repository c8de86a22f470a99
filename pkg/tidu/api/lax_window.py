"""``td.lax.reduce_window`` with jax's full semantics: add, max or min is one ReduceWindow
primitive (``tidu.numpy.conv.reduce_window``, docs/conv.md) from the identity, and a
non-identity or traced init value is combined with its result once (XLA folds the init value in
once per window and skips padding); any other body, a pytree of operands, or negative padding is
a composite of compiled primitives (docs/lax.md "How the general forms are mapped"):

1. one ``Gather`` of the flattened operand by a constant index array takes every window's
   elements onto a new trailing axis, ``out_shape + (prod(window),)``; positions in the padding
   or in a hole of base dilation are marked unreal by a constant mask (XLA skips them: the init
   value is folded in once per window, not once per padding element);
2. that axis is reduced by the body in a tree of ceil(log2 K) traced applications, each on whole
   arrays; where one of a pair is unreal the other is kept (a constant-mask select), and the
   init value is combined once at the end.

So no Python runs per window, both backends compile it, and derivatives and vmap come from the
body's own primitives.  As for ``reduce``, the body must be associative and commutative (XLA
leaves the order of application unspecified).  Memory is that of the window matrix
(``prod(out) * K`` elements per operand)."""

from __future__ import annotations

import math
import operator
import sys

import numpy as np

from tidu import ops as _P
from tidu.api.control_flow import _flatten, _unflatten
from tidu.api.lax_math import add, max, min
from tidu.api.lax_shapes import _concatenate, broadcast_in_dim, slice_in_dim
from tidu.numpy import conv as _conv
from tidu.numpy.aliases import add as _np_add
from tidu.numpy.core import astype, reshape, where
from tidu.numpy.core import maximum as _np_maximum
from tidu.numpy.core import minimum as _np_minimum
from tidu.numpy.take import take
from tidu.trace.tracer import Tracer, _lift, _trace_of

__all__ = ["reduce_window"]


def _monoid_name(computation):
    """'add', 'max' or 'min' for those bodies given as a name or as tidu's, jax.lax's, numpy's
    or operator's function (by identity, as jax's _get_monoid_window_reducer); else None."""
    if isinstance(computation, str):
        return {"add": "add", "sum": "add", "max": "max", "maximum": "max", "min": "min",
                "minimum": "min"}.get(computation)
    fns = {add: "add", max: "max", min: "min", _np_add: "add", _np_maximum: "max",
           _np_minimum: "min", operator.add: "add", np.add: "add", np.maximum: "max",
           np.minimum: "min"}
    jl = sys.modules.get("jax.lax")
    if jl is not None:
        fns.update({jl.add: "add", jl.max: "max", jl.min: "min"})
    try:
        return fns.get(computation)
    except TypeError:  # an unhashable callable
        return None


def _is_identity(ident, init) -> bool:
    if isinstance(init, Tracer):
        return False
    iv = np.asarray(init)
    return iv.shape == () and (bool(iv == ident) or bool(np.isnan(ident) and np.isnan(iv)))


def reduce_window(operand, init_value, computation, window_dimensions, window_strides,
                  padding, base_dilation=None, window_dilation=None):
    """``jax.lax.reduce_window``: ``computation(acc, x) -> acc`` over each window of
    ``operand`` (a pytree of arrays of one shape, with a matching pytree of scalar
    ``init_values``), strided, padded ('SAME', 'SAME_LOWER', 'VALID' or (low, high) pairs, for
    the dilated window) and dilated as jax.

    add, max or min is one ReduceWindow primitive (from the identity; another init value is then
    combined once per window, as XLA folds it in); every other form, and negative padding, is
    the module's composite (one gather of the windows, a log-depth tree of the body), so the
    body must be associative and commutative, as XLA requires.  Derivatives are the body's: jax
    defines only forward mode for a general body (reverse mode raises there); tidu's composite
    differentiates in both modes."""
    xs, spec = _flatten(operand)
    inits, ispec = _flatten(init_value)
    if len(xs) != len(inits) or not xs:
        raise ValueError(f"reduce_window: {len(xs)} operands but {len(inits)} init values")
    name = _monoid_name(computation) if len(xs) == 1 else None
    dt0 = getattr(xs[0], "dtype", None)
    dt0 = np.dtype(dt0) if dt0 is not None else np.result_type(xs[0])
    crop = not isinstance(padding, str) and any(int(v) < 0 for pair in padding for v in pair)
    if name is not None and not crop:  # (the primitives take no negative padding)
        # XLA skips padding and holes and folds the init value in once per window, so a
        # monoid from any init is the primitive from the identity, then init (+) it once
        prim = {"add": _P.ReduceWindowSum, "max": _P.ReduceWindowMax,
                "min": _P.ReduceWindowMin}[name]
        ident = prim.init(prim, dt0)  # init reads only the class's body name
        out = _conv.reduce_window(xs[0], ident, name, window_dimensions, window_strides,
                                  padding, base_dilation, window_dilation)
        if not _is_identity(ident, inits[0]):
            t = _trace_of(out, inits[0])
            init = _lift(t, inits[0])
            if init.ndim:
                raise ValueError(f"reduce_window: init value must be a scalar, got shape "
                                 f"{init.shape}")
            init = astype(init, dt0) if init.dtype != dt0 else init
            out = {"add": add, "max": max, "min": min}[name](init, out)
        return _unflatten(spec, [out])
    if not callable(computation):
        raise TypeError(f"reduce_window: computation {computation!r} must be a function (a "
                        f"name is accepted only for add/max/min from their identity)")
    t = _trace_of(*xs, *inits)
    xs = [_lift(t, x) for x in xs]
    shape = xs[0].shape
    if any(x.shape != shape for x in xs):
        raise ValueError(f"reduce_window: operands must have one shape, got "
                         f"{[x.shape for x in xs]}")
    inits = [_lift(t, i) for i in inits]
    if any(i.ndim for i in inits):
        raise ValueError(f"reduce_window: init values must be scalars, got shapes "
                         f"{[i.shape for i in inits]}")
    inits = [astype(i, x.dtype) if i.dtype != x.dtype else i for i, x in zip(inits, xs)]
    nd = len(shape)
    wd = _conv._tuple("window_dimensions", window_dimensions, nd)
    st = _conv._tuple("window_strides", window_strides, nd)
    bd = _conv._tuple("base_dilation", base_dilation, nd)
    wdl = _conv._tuple("window_dilation", window_dilation, nd)
    if any(v < 1 for v in st + bd + wdl) or any(v < 0 for v in wd):
        raise ValueError(f"reduce_window: window dimensions must be >= 0 and strides and "
                         f"dilations >= 1, got {wd}, {st}, {bd}, {wdl}")
    eff = tuple(1 + r * (k - 1) if k else 0 for k, r in zip(wd, wdl))
    based = tuple((n - 1) * b + 1 if n else 0 for n, b in zip(shape, bd))
    pads = _conv._pads(padding, based, eff, st)
    full = tuple(n + lo + hi for n, (lo, hi) in zip(based, pads))
    if any(f < 0 for f in full):
        raise ValueError(f"reduce_window: padding {pads} crops shape {shape} below zero")
    out = tuple((f - e) // s + 1 if f >= e else 0 for f, e, s in zip(full, eff, st))
    k = math.prod(wd)
    kshape = out + (k,)
    # per axis, each window element's position in the padded, dilated operand, and whether it
    # is an element of the operand (not padding, not a hole of base dilation)
    o_at = np.indices(out).reshape((nd,) + out + (1,))
    w_at = np.indices(wd).reshape((nd,) + (1,) * nd + (k,))
    col = (nd,) + (1,) * (nd + 1)
    pos = o_at * np.reshape(st, col) + w_at * np.reshape(wdl, col) - np.reshape(
        [lo for lo, _ in pads], col)
    src = pos // np.reshape(bd, col)
    real = np.all((pos >= 0) & (pos % np.reshape(bd, col) == 0)
                  & (src < np.reshape(shape, col)), axis=0)
    real = np.broadcast_to(real, kshape)
    if not real.any():  # no windows, empty ones, or all padding: the init value
        return _unflatten(spec, [broadcast_in_dim(i, out, ()) for i in inits])
    strides = np.asarray([math.prod(shape[d + 1:]) for d in range(nd)], np.int64)
    idx = np.where(real, np.tensordot(strides, src, axes=1), 0).astype(np.int64)
    windows = [take(reshape(x, (x.size,)), idx, mode="promise_in_bounds") for x in xs]

    def body(a, b):
        res, _ = _flatten(computation(_unflatten(spec, a), _unflatten(spec, b)))
        if len(res) != len(xs):
            raise ValueError(f"reduce_window: computation returned {len(res)} values for "
                             f"{len(xs)} operands")
        return [astype(r, x.dtype) if r.dtype != x.dtype else r for r, x in zip(res, xs)]

    return _unflatten(spec, _masked_tree(windows, real, body, inits))


def _masked_tree(xs, real, body, inits):
    """Each row (last axis) of xs reduced by an associative body over its real elements (a
    constant mask), then combined once with the init values: a tree of halvings, where a pair
    with one real element keeps it and a pair with none stays unreal (XLA skips padding and
    base-dilation holes; it does not fold the init value in for them)."""
    lead = xs[0].shape[:-1]
    k = len(lead)
    n = xs[0].shape[-1]
    while n > 1:
        if n % 2:  # an odd row: one more (unreal) column, any value
            xs = [_concatenate([x, slice_in_dim(x, n - 1, n, 1, k)], k) for x in xs]
            real = np.concatenate([real, np.zeros(lead + (1,), bool)], k)
            n += 1
        a = [slice_in_dim(x, 0, n, 2, k) for x in xs]
        b = [slice_in_dim(x, 1, n, 2, k) for x in xs]
        ra, rb = real[..., 0::2], real[..., 1::2]
        both = ra & rb
        if both.all():
            xs = body(a, b)
        elif both.any():
            first = ra & ~both  # only a real: a; only b real (or neither): b
            xs = [where(both, r, where(first, ai, bi)) for r, ai, bi in zip(body(a, b), a, b)]
        else:
            xs = [where(ra, ai, bi) for ai, bi in zip(a, b)]
        real = ra | rb
        n //= 2
    xs = [reshape(x, lead) for x in xs]
    real = real.reshape(lead)
    init = [broadcast_in_dim(i, lead, ()) for i in inits]
    out = body(init, xs)
    return out if real.all() else [where(real, o, i) for o, i in zip(out, init)]

