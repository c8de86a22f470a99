"""Convolution front end with jax's signatures: ``conv_general_dilated``, ``conv``,
``conv_with_general_padding``, ``conv_transpose``, ``conv_dimension_numbers`` (jax.lax), and
numpy's ``convolve``/``correlate``.  Every one is a Conv primitive (``tidu.ops.conv``) between
Transpose nodes that move jax's ``dimension_numbers`` onto Conv's canonical layout
(lhs N, C, spatial...; rhs O, I, window...).  Outside a trace, with no traced argument, they
compute with numpy (Conv's reference implementation; numpy's own convolve/correlate)."""

from __future__ import annotations

import builtins
from typing import NamedTuple

import numpy as np

from tidu import ops as P
from tidu.graph.dtypes import kind_of, to_inexact_dtype
from tidu.trace.tracer import Tracer, _emit, _op, _stack, _trace_of, result_type
from tidu.trace.tracer import _lift as _lift_in

__all__ = ["ConvDimensionNumbers", "conv", "conv_dimension_numbers", "conv_general_dilated",
           "conv_transpose", "conv_with_general_padding", "convolve", "correlate",
           "reduce_window"]

_range = builtins.range


class ConvDimensionNumbers(NamedTuple):
    """jax.lax.ConvDimensionNumbers: per operand, its (batch or out-feature, feature or
    in-feature, spatial...) axes."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


# ---- dimension numbers and padding (jax's rules) ----


def _perms(specs) -> ConvDimensionNumbers:
    lhs_spec, rhs_spec, out_spec = specs
    if not all(isinstance(s, str) for s in specs):
        raise TypeError(f"conv: dimension_numbers {specs!r} must be three strings or a "
                        f"ConvDimensionNumbers")
    if len(lhs_spec) != len(rhs_spec) or len(out_spec) != len(rhs_spec):
        raise ValueError(f"conv: dimension_numbers {specs!r} are not all of one length")
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for spec, pair in zip(specs, pairs):
        if sorted(spec) != sorted(set(spec)) or not all(c in spec for c in pair):
            raise ValueError(f"conv: dimension_numbers spec {spec!r} must name {pair[0]!r} and "
                             f"{pair[1]!r} once each, and each spatial axis once")
    rhs_sp = [c for c in rhs_spec if c not in "OI"]
    for spec, pair in zip((lhs_spec, out_spec), (pairs[0], pairs[2])):
        if sorted(c for c in spec if c not in pair) != sorted(rhs_sp):
            raise ValueError(f"conv: the spatial axes of {spec!r} differ from those of the "
                             f"kernel spec {rhs_spec!r}")

    def perm(spec, pair):
        spatial = [i for i, c in enumerate(spec) if c not in pair]
        if spec is not rhs_spec:
            spatial = sorted(spatial, key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spatial)

    return ConvDimensionNumbers(perm(lhs_spec, pairs[0]), perm(rhs_spec, pairs[1]),
                                perm(out_spec, pairs[2]))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """jax.lax.conv_dimension_numbers: None (NC..., OI..., NC...), three spec strings such as
    ('NHWC', 'HWIO', 'NHWC'), or a ConvDimensionNumbers, as a ConvDimensionNumbers."""
    nd = len(lhs_shape)
    if len(rhs_shape) != nd:
        raise ValueError(f"conv: lhs shape {tuple(lhs_shape)} and rhs shape {tuple(rhs_shape)} "
                         f"differ in rank")
    if nd < 2:
        raise ValueError(f"conv: operands need at least 2 axes, got shape {tuple(lhs_shape)}")
    if dimension_numbers is None:
        ident = tuple(_range(nd))
        return ConvDimensionNumbers(ident, ident, ident)
    if isinstance(dimension_numbers, ConvDimensionNumbers) or (
            len(dimension_numbers) == 3 and all(not isinstance(s, str) for s in dimension_numbers)):
        dn = ConvDimensionNumbers(*(tuple(int(a) for a in s) for s in dimension_numbers))
        for s in dn:
            if sorted(s) != list(_range(nd)):
                raise ValueError(f"conv: dimension_numbers {tuple(dimension_numbers)!r} are not "
                                 f"permutations of the {nd} axes")
        return dn
    if len(dimension_numbers) != 3:
        raise TypeError(f"conv: dimension_numbers {dimension_numbers!r} must be None, three spec "
                        f"strings or a ConvDimensionNumbers")
    dn = _perms(tuple(dimension_numbers))
    if len(dn.lhs_spec) != nd:
        raise ValueError(f"conv: dimension_numbers {dimension_numbers!r} do not match operands "
                         f"of rank {nd}")
    return dn


def _pads(padding, in_shape, window, strides) -> list[tuple[int, int]]:
    """jax.lax.padtype_to_pads, and explicit pairs checked."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return [(0, 0)] * len(in_shape)
        if mode in ("SAME", "SAME_LOWER"):
            out = [-(-d // s) for d, s in zip(in_shape, strides)]
            size = [builtins.max(0, (o - 1) * s + w - d)
                    for o, s, w, d in zip(out, strides, window, in_shape)]
            if mode == "SAME":
                return [(p // 2, p - p // 2) for p in size]
            return [(p - p // 2, p // 2) for p in size]
        raise ValueError(f"conv: unknown padding {padding!r} (use 'SAME', 'SAME_LOWER', 'VALID' "
                         f"or (low, high) pairs)")
    pads = [tuple(p) for p in padding]
    if len(pads) != len(in_shape) or any(len(p) != 2 for p in pads):
        raise ValueError(f"conv: padding {padding!r} must be {len(in_shape)} (low, high) pairs")
    return [(int(lo), int(hi)) for lo, hi in pads]


def _tuple(name, v, n, default=1) -> tuple[int, ...]:
    if v is None:
        return (default,) * n
    v = tuple(int(a) for a in v)
    if len(v) != n:
        raise ValueError(f"conv: {name} {v} must have {n} entries (one per spatial axis)")
    return v


# ---- the traced and numpy paths ----


def _inv(perm) -> tuple[int, ...]:
    return tuple(sorted(_range(len(perm)), key=perm.__getitem__))


def _live(*xs) -> bool:
    return bool(_stack()) or any(isinstance(x, Tracer) for x in xs)


def _lift(t, x, dtype):
    return _lift_in(t, x, dtype)


def _transpose(x, perm, live):
    if tuple(perm) == tuple(_range(len(perm))):
        return x
    return _emit(x._t, _op(P.Transpose, tuple(perm)), x) if live else np.transpose(x, perm)


def _dtype_of(x):
    return x.aval.dtype if isinstance(x, Tracer) else np.asarray(x).dtype


def _result_dtype(name, dt, preferred) -> np.dtype:
    """The convolution's dtype: the operands' (promoted), or `preferred_element_type` checked as
    jax checks it (integers or bool to a wider-or-equal integer of the same signedness or to a
    float, floats to a wider-or-equal float, complex to a wider-or-equal complex).  The operands
    are converted to it and the Conv runs in it: for integers that is exact (fixed-width
    arithmetic wraps the same way at any width that holds the result), as XLA's i8 x i8 -> i32."""
    dt = np.dtype(dt)
    if preferred is None:
        return dt
    p = np.dtype(preferred)
    if p == dt:
        return p
    if kind_of(dt) in "biu" and p.kind in "iuf" or kind_of(dt) == p.kind and kind_of(dt) in "fc":
        if kind_of(dt) != "b" and p.itemsize < dt.itemsize:
            raise TypeError(f"{name}: preferred_element_type {p} must not be narrower than the "
                            f"operands' dtype {dt}")
        if kind_of(dt) == "i" and p.kind == "u":
            raise TypeError(f"{name}: preferred_element_type {p} must have the signedness of "
                            f"the operands' dtype {dt}")
        return p
    raise TypeError(f"{name}: operands of dtype {dt} cannot accumulate in preferred_element_type "
                    f"{p} (the pairs allowed, as jax: integer or bool to integer or floating, "
                    f"floating to floating, complex to complex)")


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """jax.lax.conv_general_dilated: a Conv primitive between layout transposes.

    Args:
        lhs, rhs: the input and the kernel, laid out as `dimension_numbers` say.
        window_strides: the stride per spatial axis.
        padding: 'SAME', 'SAME_LOWER', 'VALID' or one (low, high) pair per spatial axis.
        lhs_dilation, rhs_dilation: input and kernel dilation per spatial axis (default 1).
        dimension_numbers: None, three spec strings or a ConvDimensionNumbers.
        feature_group_count, batch_group_count: grouped convolutions (at most one above 1).
        precision: accepted for jax compatibility (tidu always computes at full precision).
        preferred_element_type: the result dtype, checked as jax does (e.g. int8 operands
            accumulating in int32); the operands are converted to it.

    Returns:
        The convolution, laid out as `dimension_numbers`' output spec.

    Raises:
        ValueError / TypeError naming the shape, attribute or dtype at fault.
    """
    del precision
    live = _live(lhs, rhs)
    shp = lambda x: tuple(x.shape) if isinstance(x, Tracer) else np.shape(x)
    lshape, rshape = shp(lhs), shp(rhs)
    dn = conv_dimension_numbers(lshape, rshape, dimension_numbers)
    ns = len(lshape) - 2
    dt = _result_dtype("conv_general_dilated", result_type(lhs, rhs), preferred_element_type)
    if live:
        t = _trace_of(lhs, rhs)
        lhs, rhs = _lift(t, lhs, dt), _lift(t, rhs, dt)
    else:
        lhs, rhs = np.asarray(lhs, dt), np.asarray(rhs, dt)
    strides = _tuple("window_strides", window_strides, ns)
    ld = _tuple("lhs_dilation", lhs_dilation, ns)
    rd = _tuple("rhs_dilation", rhs_dilation, ns)
    in_sp = tuple(lshape[a] for a in dn.lhs_spec[2:])
    win = tuple(rshape[a] for a in dn.rhs_spec[2:])
    eff = tuple(0 if k == 0 else 1 + r * (k - 1) for k, r in zip(win, rd))
    pads = _pads(padding, in_sp, eff, strides)
    op = _op(P.Conv, strides, tuple(p for p, _ in pads), tuple(q for _, q in pads), ld, rd,
             int(feature_group_count), int(batch_group_count))
    x = _transpose(lhs, dn.lhs_spec, live)
    w = _transpose(rhs, dn.rhs_spec, live)
    if live:
        y = _emit(x._t, op, x, w)
    else:
        y = op.impl(x, w)
    return _transpose(y, _inv(dn.out_spec), live)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """jax.lax.conv: NC... input, OI... kernel, no dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """jax.lax.conv_with_general_padding: NC... input, OI... kernel, with dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_transpose_padding(k: int, s: int, padding) -> tuple[int, int]:
    if isinstance(padding, tuple):  # a forward conv's (low, high) (use_consistent_padding)
        pad_a, pad_len = k - padding[0] - 1, 2 * k - padding[0] - padding[1] - 2
    elif padding == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else -(-pad_len // 2)
    elif padding == "VALID":
        pad_len = k + s - 2 + builtins.max(k - s, 0)
        pad_a = k - 1
    else:
        raise ValueError(f"conv_transpose: padding {padding!r} must be 'SAME', 'VALID' or pairs")
    return pad_a, pad_len - pad_a


_TRANSPOSE_DEFAULTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                       4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):
    """jax.lax.conv_transpose: a convolution with lhs dilation `strides` (the gradient of a
    strided convolution), padding 'SAME'/'VALID' as jax computes it, or pairs (with
    `use_consistent_padding`, pairs are the forward convolution's padding, as PyTorch)."""
    shp = lambda x: tuple(x.shape) if isinstance(x, Tracer) else np.shape(x)
    lshape, rshape = shp(lhs), shp(rhs)
    nd = len(lshape)
    if len(rshape) != nd or nd < 2:
        raise ValueError(f"conv_transpose: lhs shape {lshape} and rhs shape {rshape} must have "
                         f"one rank of at least 2")
    if dimension_numbers is None:
        if nd not in _TRANSPOSE_DEFAULTS:
            raise ValueError(f"conv_transpose: no default dimension_numbers for rank {nd}")
        dimension_numbers = _TRANSPOSE_DEFAULTS[nd]
    dn = conv_dimension_numbers(lshape, rshape, dimension_numbers)
    ns = nd - 2
    win = [rshape[a] for a in dn.rhs_spec[2:]]
    strides = _tuple("strides", strides, ns)
    rd = _tuple("rhs_dilation", rhs_dilation, ns)
    if use_consistent_padding or isinstance(padding, str) and padding in ("SAME", "VALID"):
        eff = [0 if k == 0 else 1 + r * (k - 1) for k, r in zip(win, rd)]
        rep = [padding] * ns if isinstance(padding, str) else [tuple(p) for p in padding]
        if len(rep) != ns:
            raise ValueError(f"conv_transpose: padding {padding!r} must be {ns} (low, high) "
                             f"pairs")
        pads = [_conv_transpose_padding(k, s, p) for k, s, p in zip(eff, strides, rep)]
    else:
        pads = padding
    if transpose_kernel:
        live = _live(lhs, rhs)
        sp = tuple(dn.rhs_spec[2:])
        if live:
            t = _trace_of(lhs, rhs)
            rhs = _lift(t, rhs, None)
            sp = tuple(a for a in sp if rshape[a] > 1)
            if sp:
                rhs = _emit(rhs._t, _op(P.Rev, sp), rhs)
        else:
            rhs = np.flip(np.asarray(rhs), sp)
        perm = list(_range(nd))
        o, i = dn.rhs_spec[0], dn.rhs_spec[1]
        perm[o], perm[i] = i, o
        rhs = _transpose(rhs, perm, live)
    return conv_general_dilated(lhs, rhs, (1,) * ns, pads, strides, rd, dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


# ---- reduce_window ----

_COMPUTATIONS = {"add": "ReduceWindowSum", "sum": "ReduceWindowSum", "max": "ReduceWindowMax",
                 "maximum": "ReduceWindowMax", "min": "ReduceWindowMin",
                 "minimum": "ReduceWindowMin"}


def _computation(computation) -> str:
    """The primitive's name for an add/max/min body given as a name, a numpy ufunc, a tidu or
    jax.lax function, or operator.add / builtins max, min."""
    name = computation if isinstance(computation, str) else getattr(computation, "__name__", "")
    prim = _COMPUTATIONS.get(name)
    if prim is None:
        raise NotImplementedError(
            f"reduce_window: computation {computation!r} is not supported; tidu reduces windows "
            f"with add, max or min here; td.lax.reduce_window takes any associative body")
    return prim


def reduce_window(operand, init_value, computation, window_dimensions, window_strides,
                  padding, base_dilation=None, window_dilation=None):
    """jax.lax.reduce_window for add, max and min: one ReduceWindow primitive.

    Args:
        operand: the array.
        init_value: the computation's identity (0 for add, -inf or the dtype's minimum for max,
            +inf or its maximum for min), as jax's reduce_window_sum/max/min take it.
        computation: add, max or min (a name, np.add/np.maximum/np.minimum, tidu's or
            jax.lax's add/max/min).
        window_dimensions, window_strides: per axis.
        padding: 'SAME', 'SAME_LOWER', 'VALID' or one (low, high) pair per axis.
        base_dilation, window_dilation: per axis (default 1).

    Raises:
        NotImplementedError for another computation or a non-identity init_value;
        ValueError naming a bad window, stride, padding or dilation.
    """
    name = _computation(computation)
    live = _live(operand)
    shape = tuple(operand.shape) if isinstance(operand, Tracer) else np.shape(operand)
    dt = _dtype_of(operand)
    nd = len(shape)
    prim = getattr(P, name)
    if isinstance(init_value, Tracer):
        raise NotImplementedError("reduce_window: a traced init_value is not supported here "
                                  "(td.lax.reduce_window takes one)")
    wd = _tuple("window_dimensions", window_dimensions, nd)
    st = _tuple("window_strides", window_strides, nd)
    bd = _tuple("base_dilation", base_dilation, nd)
    wdl = _tuple("window_dilation", window_dilation, nd)
    eff = tuple(1 + r * (k - 1) for k, r in zip(wd, wdl))  # jax pads for the dilated window
    pads = _pads(padding, shape, eff, st)
    op = _op(prim, wd, st, tuple(p for p, _ in pads), tuple(q for _, q in pads), bd, wdl)
    ident = op.init(dt)
    iv = np.asarray(init_value)
    if iv.shape != () or not (iv == ident or (np.isnan(ident) and np.isnan(iv))):
        raise NotImplementedError(
            f"reduce_window: init_value {init_value!r} is not the identity {ident!r} of "
            f"{name[len('ReduceWindow'):].lower()} for {dt}; only the identity is supported here "
            f"(td.lax.reduce_window takes any init value)")
    if not live:
        return op.impl(np.asarray(operand))
    t = _trace_of(operand)
    x = _lift_in(t, operand, None)
    return _emit(x._t, op, x)


# ---- numpy: convolve, correlate ----


def _full_correlation(a, w, name: str):
    """sum_i a[i + j - (m - 1)] w[i] for j in [0, n + m - 1): one 1-D Conv."""
    n, m = a.shape[0], w.shape[0]
    x = _emit(a._t, _op(P.Reshape, (1, 1, n)), a)
    k = _emit(w._t, _op(P.Reshape, (1, 1, m)), w)
    y = _emit(a._t, _op(P.Conv, (1,), (m - 1,), (m - 1,), (1,), (1,), 1, 1), x, k)
    return _emit(a._t, _op(P.Reshape, (n + m - 1,)), y)


def _np_work_dtype(a, v, name, preferred) -> np.dtype:
    """jnp.convolve's dtype: the operands promoted to inexact (jax's to_inexact_dtype:
    int32 to float32, int64 to float64), or, with `preferred_element_type`, the operands' promoted
    dtype accumulating in it (integers stay integers, exactly as jax)."""
    dt = result_type(a, v)
    if preferred is None:
        return to_inexact_dtype(dt)
    return _result_dtype(name, dt, preferred)


def _np_mode(a, v, mode: str, name: str, conj: bool, preferred=None):
    t = _trace_of(a, v)
    work = _np_work_dtype(a, v, name, preferred)
    a, v = _lift_in(t, a, work), _lift_in(t, v, work)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"{name}: object too deep for desired array (shapes {a.shape} and "
                         f"{v.shape}; both must be 1-D)")
    n, m = a.shape[0], v.shape[0]
    if n == 0 or m == 0:
        raise ValueError(f"{name}: inputs cannot be empty (shapes {a.shape} and {v.shape})")
    if conj:
        w = _emit(t, _op(P.Conj), v) if kind_of(work) == "c" else v
    else:
        w = _emit(t, _op(P.Rev, (0,)), v) if m > 1 else v
    full = _full_correlation(a, w, name)
    if mode == "full":
        return full
    if mode == "same":
        size, start = builtins.max(n, m), (builtins.min(n, m) - 1) // 2
        if conj and n < m:  # numpy correlates the swapped pair and reverses it
            start = n // 2
        return full[start:start + size]
    if mode == "valid":
        size, start = builtins.max(n, m) - builtins.min(n, m) + 1, builtins.min(n, m) - 1
        return full[start:start + size]
    raise ValueError(f"{name}: mode {mode!r} must be 'full', 'same' or 'valid'")


def _np_outside(fn, a, v, mode, name, preferred):
    """numpy's convolve/correlate on concrete arrays in the dtype jnp's would compute in."""
    work = _np_work_dtype(a, v, name, preferred)
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"{name}: mode {mode!r} must be 'full', 'same' or 'valid'")
    a, v = np.asarray(a), np.asarray(v)
    if kind_of(work) == "b":  # numpy has no boolean sum of products: count, then test
        return fn(a.astype(np.int64), v.astype(np.int64), mode) != 0
    return fn(a.astype(work), v.astype(work), mode).astype(work)


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """jnp.convolve: the discrete linear convolution of two 1-D arrays (modes full, same,
    valid), one Conv primitive.  Integer and bool inputs give float64 (jax: an inexact dtype)
    unless `preferred_element_type` names the accumulation dtype (e.g. int8 inputs summed in
    int32, exactly).  `precision` is accepted and ignored (full precision)."""
    del precision
    if not _live(a, v):
        return _np_outside(np.convolve, a, v, mode, "convolve", preferred_element_type)
    return _np_mode(a, v, mode, "convolve", False, preferred_element_type)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """jnp.correlate: sum_n a[n + k] * conj(v[n]) (modes full, same, valid), one Conv; dtypes
    as `convolve`."""
    del precision
    if not _live(a, v):
        return _np_outside(np.correlate, a, v, mode, "correlate", preferred_element_type)
    return _np_mode(a, v, mode, "correlate", True, preferred_element_type)
