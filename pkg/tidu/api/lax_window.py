"""``td.lax.reduce_window`` with jax's full semantics: add, max or min is one ReduceWindow
primitive (``tidu.numpy.conv.reduce_window``, docs/conv.md) from the identity, and a
non-identity or traced init value is combined with its result once (XLA folds the init value in
once per window and skips padding); any other body, a pytree of operands, or negative padding is
one ReduceWindowGeneral op (``tidu.ops.control_flow.reduce_window``, docs/lax.md "How the
general forms are mapped"), which holds

1. the computation traced on scalars: XLA lowers the op to ``stablehlo.reduce_window`` with it
   as the region, as jax does;
2. the same reduction traced over whole arrays (``_windowed``): the operands padded and
   dilated, then per windowed axis strided slices combined by the computation (k views for a
   small window, window doubling, ceil(log2 k) + popcount(k) steps, for a large one), with
   constant masks where a window reaches into padding or a hole of base dilation (XLA skips
   those), and the init value combined once at the end.  The interpreter runs it as one nested
   program; derivatives and vmap come from it.

No Python runs per window, and no array holds window-size copies of the operand.  As for
``reduce``, the body must be associative and commutative (XLA leaves the order of application
unspecified)."""

from __future__ import annotations

import math
import operator
import sys

import numpy as np

from tidu import ops as _P
from tidu.api.control_flow import _emit_multi, _flatten, _trace_body, _unflatten
from tidu.api.lax_math import add, max, min
from tidu.api.lax_shapes import broadcast_in_dim, pad, slice_in_dim
from tidu.graph import aval
from tidu.numpy import conv as _conv
from tidu.numpy.aliases import add as _np_add
from tidu.numpy.core import astype, reshape, where
from tidu.numpy.core import maximum as _np_maximum
from tidu.numpy.core import minimum as _np_minimum
from tidu.ops import control_flow as _CF
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
    pads = tuple(tuple(int(v) for v in p) for p in _conv._pads(padding, based, eff, st))
    full = tuple(n + lo + hi for n, (lo, hi) in zip(based, pads))
    if any(f < 0 for f in full):
        raise ValueError(f"reduce_window: padding {pads} crops shape {shape} below zero")
    out = tuple((f - e) // s + 1 if f >= e else 0 for f, e, s in zip(full, eff, st))
    # per axis, which positions of the padded, dilated operand are its elements (XLA skips
    # padding and base-dilation holes), and which outputs see at least one of them
    reals = []
    for n, (lo, _), b, f in zip(shape, pads, bd, full):
        p = np.arange(f) - lo
        reals.append((p >= 0) & (p % b == 0) & (p // b < n))
    seen = [np.array([r[o * s:o * s + e:w].any() for o in range(m)], bool)
            for r, s, e, w, m in zip(reals, st, eff, wdl, out)]
    if not all(v.any() for v in seen) or not all(wd):  # no windows, or all padding: the init
        return _unflatten(spec, [broadcast_in_dim(i, out, ()) for i in inits])

    def body(a, b):
        res, _ = _flatten(computation(_unflatten(spec, a), _unflatten(spec, b)))
        if len(res) != len(xs):
            raise ValueError(f"reduce_window: computation returned {len(res)} values for "
                             f"{len(xs)} operands")
        tt = _trace_of(*a, *res)
        res = [_lift(tt, r) for r in res]
        return [astype(r, x.dtype) if r.dtype != x.dtype else r for r, x in zip(res, xs)]

    n = len(xs)
    # the computation on scalars: XLA's region (none if it reads traced values from outside)
    rb, rkeys, rflat, _ = _trace_body(t, lambda *a: body(list(a[:n]), list(a[n:])),
                                      [aval((), x.dtype) for x in xs] * 2, lambda a: a,
                                      "reduce_window's computation")
    region = None if rb.capture_list else _CF.close_body([x.key for x in rflat], rkeys)
    # the same reduction over whole arrays: what the interpreter runs and derivatives follow
    ab, akeys, aflat, _ = _trace_body(
        t, lambda *a: _windowed(list(a[:n]), list(a[n:]), body, wd, st, pads, bd, wdl, reals,
                                out),
        [x.aval for x in xs] + [i.aval for i in inits], lambda a: a, "reduce_window")
    prog = _CF.close_body([x.key for x in aflat], ab.capture_inputs + akeys)
    op = _CF.ReduceWindowGeneral(prog, region, len(ab.capture_list), wd, st, pads, bd, wdl)
    return _unflatten(spec, _emit_multi(t, op, list(ab.capture_list) + xs + inits))


def _windowed(xs, inits, body, wd, st, pads, bd, wdl, reals, out):
    """The reduction as array operations: the operands padded and dilated (filled with their
    first element, a value the body takes without NaN; masked out below), then per windowed
    axis the computation over strided slices (_axis), then the init values combined once."""
    nd = len(wd)
    cfg = [(lo, hi, b - 1) for (lo, hi), b in zip(pads, bd)]
    if any(c != (0, 0, 0) for c in cfg):
        xs = [pad(x, reshape(slice_in_dim(reshape(x, (x.size,)), 0, 1, 1, 0), ()), cfg)
              for x in xs]
    seen = []
    for d in range(nd):
        if wd[d] == 1 and st[d] == 1 and reals[d].all():
            seen.append(reals[d])
            continue
        xs, r = _axis(xs, d, reals[d], wd[d], st[d], wdl[d], out[d], body)
        seen.append(r)
    inits = [broadcast_in_dim(i, out, ()) for i in inits]
    res = body(inits, xs)
    real = np.ones(out, bool)
    for d, r in enumerate(seen):
        real = real & r.reshape([-1 if a == d else 1 for a in range(nd)])
    return res if real.all() else [where(real, v, i) for v, i in zip(res, inits)]


def _axis(xs, d, real, k, s, w, n_out, body):
    """Along axis d, each output's window (k elements w apart, windows s apart) reduced by the
    body over its real elements; returns the reduced arrays and which outputs saw an element.

    Small windows (or strides that make most positions unused) take k strided views; larger
    ones double: level m holds the reduction of m consecutive window elements at every start,
    so a window is ceil(log2 k) + popcount(k) body applications, each on whole arrays."""
    nd = xs[0].ndim

    def view(vs, r, start, count, stride):
        stop = start + (count - 1) * stride + 1
        return [slice_in_dim(v, start, stop, stride, d) for v in vs], r[start:stop:stride]

    def comb(a, ra, b, rb):
        return _combine(a, ra, b, rb, body, d, nd)

    length = xs[0].shape[d]
    if k <= 3 or k * n_out <= 2 * math.ceil(math.log2(k)) * length:
        views = [view(xs, real, j * w, n_out, s) for j in range(k)]
        views.sort(key=lambda v: not v[1].all())  # wholly real views first: no masking
        acc, racc = views[0]
        for v, rv in views[1:]:
            acc, racc = comb(acc, racc, v, rv)
        return acc, racc
    cur, rc, m = xs, real, 1  # cur[p]: elements p, p + w, ..., p + (m - 1) w reduced
    acc = racc = None
    off = 0
    while True:
        if k & m:
            v, rv = view(cur, rc, off * w, n_out, s)
            acc, racc = (v, rv) if acc is None else comb(acc, racc, v, rv)
            off += m
        if 2 * m > k:
            return acc, racc
        lc = cur[0].shape[d] - m * w
        a, ra = view(cur, rc, 0, lc, 1)
        b, rb = view(cur, rc, m * w, lc, 1)
        cur, rc = comb(a, ra, b, rb)
        m *= 2


def _combine(a, ra, b, rb, body, d, nd):
    """body(a, b) where both are real along axis d (constant masks ra, rb), the real one where
    only one is, a where neither (any value: masked later)."""
    both = ra & rb
    if both.all():
        return body(a, b), both
    col = [-1 if i == d else 1 for i in range(nd)]
    only_b = rb & ~ra
    res = body(a, b) if both.any() else None
    out = []
    for j, v in enumerate(a):
        if only_b.any():
            v = where(only_b.reshape(col), b[j], v)
        if res is not None:
            v = where(both.reshape(col), res[j], v)
        out.append(v)
    return out, ra | rb
