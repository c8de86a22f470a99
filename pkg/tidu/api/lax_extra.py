"""``td.lax``'s remaining composable names: ``dtype``, ``stack``/``unstack``,
``broadcast_like``, ``empty``, ``index_take``, ``population_count``/``clz`` (bit tricks in int64,
no overflow), ``bitcast_convert_type`` (the BitcastConvertType primitive), ``fft`` (the Fft
primitive), ``conv_general_dilated_patches`` (a grouped
convolution with a one-hot kernel, as jax builds it) and the shape-tuple helpers of convolutions
and windowed reductions (plain Python).  docs/lax.md."""

from __future__ import annotations

import functools
import math
from typing import Union

import numpy as np

from tidu import ops as _P
from tidu.api.lax_gather import GatherDimensionNumbers, gather
from tidu.api.lax_shapes import Precision, broadcast_in_dim, dot_general, padtype_to_pads
from tidu.graph.dtypes import INTS
from tidu.numpy.conv import (
    ConvDimensionNumbers,
    _conv_transpose_padding,
    conv_dimension_numbers,
    conv_general_dilated,
)
from tidu.numpy.core import astype, concatenate, reshape, where
from tidu.numpy.logical import bitwise_and, bitwise_or, right_shift
from tidu.numpy.shapes import moveaxis
from tidu.ops.fft import FftType
from tidu.trace.tracer import _current, _emit, _lift, _trace_of

__all__ = [
    "ConvGeneralDilatedDimensionNumbers", "FftType", "PrecisionLike", "bitcast_convert_type",
    "broadcast_like", "clz",
    "conv_general_dilated_local", "conv_general_dilated_patches", "conv_general_permutations",
    "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose_shape_tuple", "dtype",
    "composite", "empty", "fft", "index_take", "mulhi",
    "population_count", "reduce_window_shape_tuple", "stack", "unstack",
]

PrecisionLike = Union[str, Precision, tuple, None]
ConvGeneralDilatedDimensionNumbers = Union[None, ConvDimensionNumbers, tuple]


def _tr(x):
    return _lift(_trace_of(x), x)


def dtype(x):
    """``jax.lax.dtype``: the numpy dtype of an array, traced value or Python scalar (Python
    floats float64, ints int64: x64)."""
    dt = getattr(x, "dtype", None)
    return np.dtype(dt) if dt is not None else np.result_type(x)


def stack(operands, axis: int = 0):
    """``jax.lax.stack``: operands of one shape joined along a new axis."""
    ops = [_lift(_trace_of(*operands), o) for o in operands]
    if not ops:
        raise ValueError("stack: needs at least one operand")
    nd = ops[0].ndim + 1
    ax = axis + nd if axis < 0 else axis
    if not 0 <= ax < nd:
        raise ValueError(f"stack: axis {axis} out of range for rank {nd}")
    return concatenate([reshape(o, o.shape[:ax] + (1,) + o.shape[ax:]) for o in ops], axis=ax)


def unstack(x, axis: int = 0):
    """``jax.lax.unstack``: the slices along ``axis``, as a tuple."""
    x = _tr(x)
    ax = axis + x.ndim if axis < 0 else axis
    if not 0 <= ax < x.ndim:
        raise ValueError(f"unstack: axis {axis} out of range for shape {x.shape}")
    rest = x.shape[:ax] + x.shape[ax + 1:]
    out = []
    for i in range(x.shape[ax]):
        st = [0] * x.ndim
        li = list(x.shape)
        st[ax], li[ax] = i, i + 1
        out.append(reshape(_emit(x._t, _P.Slice(tuple(st), tuple(li), (1,) * x.ndim), x), rest))
    return tuple(out)


def broadcast_like(arr, like_arr):
    """``jax.lax.broadcast_like``: arr broadcast (numpy's rule) to like_arr's shape."""
    t = _trace_of(arr, like_arr)
    a, b = _lift(t, arr), _lift(t, like_arr)
    shape = b.shape
    if a.shape == shape:
        return a
    off = len(shape) - a.ndim
    if off < 0 or any(d not in (1, shape[off + i]) for i, d in enumerate(a.shape)):
        raise ValueError(f"broadcast_like: shape {a.shape} does not broadcast to {shape}")
    return broadcast_in_dim(a, shape, tuple(range(off, len(shape))))


def empty(shape, dtype, *, out_sharding=None):
    """``jax.lax.empty``: an array of the shape and dtype; tidu's holds zeros."""
    t = _current()
    z = _lift(t, np.zeros((), np.dtype(dtype)))
    return _emit(t, _P.BroadcastInDim(tuple(int(d) for d in shape), ()), z)


def index_take(src, idxs, axes):
    """``jax.lax.index_take``: src at the points (idxs[0][j], idxs[1][j], ...) on ``axes``,
    indices wrapped modulo the axis sizes (one gather)."""
    s = _tr(src)
    axes = tuple(int(a) for a in axes)
    cols = []
    for i, ax in zip(idxs, axes):
        i = _lift(s._t, i)
        cols.append(reshape(i % s.shape[ax], i.shape + (1,)))
    ind = concatenate([astype(c, np.int64) for c in cols], axis=1)
    sizes = tuple(1 if d in axes else n for d, n in enumerate(s.shape))
    dn = GatherDimensionNumbers(tuple(range(1, s.ndim - len(axes) + 1)), axes, axes)
    return gather(s, ind, dn, sizes)


# ---- bit counting ----

def _c(t, v):
    return _lift(t, np.int64(v))


def _pop32(t, v):
    """Set bits of v, 0 <= v < 2**32, in int64 (no intermediate exceeds 2**33)."""
    for sh, m in ((1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF),
                  (16, 0x0000FFFF)):
        v = bitwise_and(v, _c(t, m)) + bitwise_and(v >> _c(t, sh), _c(t, m))
    return v


def _smear32(t, v):
    for sh in (1, 2, 4, 8, 16):
        v = bitwise_or(v, v >> _c(t, sh))
    return v


def _halves(name, x):
    x = _tr(x)
    if x.dtype not in INTS or x.dtype.itemsize not in (4, 8):
        raise TypeError(f"{name}: operand must be a 32- or 64-bit integer, got {x.dtype}")
    t = x._t
    w = astype(x, np.int64)
    lo = bitwise_and(w, _c(t, 0xFFFFFFFF))
    if x.dtype.itemsize == 4:
        return x, t, lo, None
    hi = _emit(t, _P.ShiftRightLogical(), w, broadcast_in_dim(_c(t, 32), w.shape, ()))
    return x, t, lo, hi


def population_count(x):
    """``jax.lax.population_count``: the number of set bits of each (32- or 64-bit) integer."""
    x, t, lo, hi = _halves("population_count", x)
    n = _pop32(t, lo) if hi is None else _pop32(t, lo) + _pop32(t, hi)
    return astype(n, x.dtype)


def clz(x):
    """``jax.lax.clz``: the number of leading zero bits of each (32- or 64-bit) integer."""
    x, t, lo, hi = _halves("clz", x)

    def c32(v):
        return _c(t, 32) - _pop32(t, _smear32(t, v))

    n = c32(lo) if hi is None else where(hi != 0, c32(hi), c32(lo) + 32)
    return astype(n, x.dtype)


# ---- fft ----

def fft(x, fft_type, fft_lengths):
    """``jax.lax.fft``: the DFT over the trailing ``len(fft_lengths)`` axes (FFT, IFFT, RFFT,
    IRFFT as a FftType, jax's enum or its name)."""
    x = _tr(x)
    ft = fft_type
    if not isinstance(ft, str):
        ft = getattr(ft, "name", None) or FftType(int(ft)).name
    return _emit(x._t, _P.Fft(FftType[str(ft).upper()], tuple(int(n) for n in fft_lengths)), x)


# ---- patches ----

def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """``jax.lax.conv_general_dilated_patches``: each output position's receptive field, the
    patch as channels (channel-major, then the filter's spatial positions), by a grouped
    convolution with a constant one-hot kernel, as jax computes it."""
    x = _tr(lhs)
    fs = tuple(int(d) for d in filter_shape)
    dn = conv_dimension_numbers(x.shape, (1, 1) + fs, dimension_numbers)
    lhs_spec, rhs_spec = dn[0], dn[1]
    size = math.prod(fs)
    c = x.shape[lhs_spec[1]]
    rhs = np.eye(size, dtype=x.dtype).reshape((size, 1) + fs)
    rhs = np.tile(rhs, (c,) + (1,) * (rhs.ndim - 1))
    rhs = np.moveaxis(rhs, (0, 1), (rhs_spec[0], rhs_spec[1]))
    return conv_general_dilated(x, _lift(x._t, rhs), window_strides, padding, lhs_dilation,
                                rhs_dilation, dn, feature_group_count=c,
                                preferred_element_type=preferred_element_type)



def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape,
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """``jax.lax.conv_general_dilated_local``: an unshared (locally connected) convolution, one
    kernel per output position, composed as jax composes it: the patches
    (``conv_general_dilated_patches``) contracted with ``rhs`` by one ``dot_general`` batched
    over the output positions.  ``rhs`` has the output's spatial sizes in its spatial axes and
    ``C * prod(filter_shape)`` in its ``I`` axis (channel-major, then the filter's positions in
    ``rhs_spec``'s order)."""
    x = _tr(lhs)
    patches = conv_general_dilated_patches(x, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dimension_numbers)
    _, rhs_spec, out_spec = conv_dimension_numbers(
        x.shape, (1, 1) + tuple(int(d) for d in filter_shape), dimension_numbers)
    w = _lift(x._t, rhs)
    if w.ndim != x.ndim:
        raise ValueError(f"conv_general_dilated_local: rhs of rank {w.ndim} for lhs of rank "
                         f"{x.ndim}")
    want = {rhs_spec[1]: patches.shape[out_spec[1]]}
    want.update({r: patches.shape[o] for r, o in zip(rhs_spec[2:], out_spec[2:])})
    bad = {a: n for a, n in want.items() if w.shape[a] != n}
    if bad:
        raise ValueError(f"conv_general_dilated_local: rhs shape {w.shape} must have "
                         f"{', '.join(f'{n} at axis {a}' for a, n in sorted(want.items()))} "
                         f"(the output positions and C * prod(filter_shape) patch entries)")
    lhs_b = list(out_spec[2:])
    rhs_b = list(rhs_spec[2:])
    rhs_b = [rhs_b[i] for i in sorted(range(len(rhs_b)), key=lambda k: lhs_b[k])]
    lhs_b = sorted(lhs_b)
    dn = (([out_spec[1]], [rhs_spec[1]]), (lhs_b, rhs_b))
    out = dot_general(patches, w, dn)
    return moveaxis(out, (-2, -1), (out_spec[0], out_spec[1]))


# ---- shape tuples (plain Python, as jax's) ----

def conv_general_permutations(dimension_numbers):
    """``jax.lax.conv_general_permutations``: the (lhs, rhs, out) axis permutations of three
    spec strings such as ('NHWC', 'HWIO', 'NHWC')."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_char, rhs_char, out_char = ("N", "C"), ("O", "I"), ("N", "C")
    for pair, spec in zip((lhs_char, rhs_char, out_char), (lhs_spec, rhs_spec, out_spec)):
        if not spec.count(pair[0]) == spec.count(pair[1]) == 1:
            raise TypeError(f"conv_general_permutations: spec {spec!r} must name {pair[0]} "
                            f"and {pair[1]} once each")
        if len(set(spec)) != len(spec):
            raise TypeError(f"conv_general_permutations: repeated axis names in {spec!r}")
    if not (set(lhs_spec) - set(lhs_char) == set(rhs_spec) - set(rhs_char) ==
            set(out_spec) - set(out_char)):
        raise TypeError(f"conv_general_permutations: the spatial names of {dimension_numbers} "
                        f"differ")

    def getperm(spec, charpair):
        spatial = (i for i, c in enumerate(spec) if c not in charpair)
        if spec is not rhs_spec:
            spatial = sorted(spatial, key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(charpair[0]), spec.index(charpair[1])) + tuple(spatial)

    return (getperm(lhs_spec, lhs_char), getperm(rhs_spec, rhs_char),
            getperm(out_spec, out_char))


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """``jax.lax.conv_shape_tuple``: the NC... output shape of an NC... / OI... convolution with
    explicit (low, high) pads."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"conv_shape_tuple: {len(pads)} pads for {len(lhs_shape) - 2} spatial "
                        f"axes")
    lhs_padded = np.add(lhs_shape[2:], np.sum(np.array(pads).reshape(-1, 2), axis=1))
    if np.any(lhs_padded < 0):
        raise ValueError("conv_shape_tuple: negative padding larger than the input")
    out_space = np.floor_divide(np.subtract(lhs_padded, rhs_shape[2:]), strides) + 1
    out_space = np.maximum(0, out_space)
    if batch_group_count > 1 and lhs_shape[0] % batch_group_count:
        raise ValueError(f"conv_shape_tuple: batch {lhs_shape[0]} is not a multiple of "
                         f"batch_group_count {batch_group_count}")
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + tuple(int(d) for d in out_space)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """``jax.lax.conv_general_shape_tuple``: the output shape in the out spec's layout."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs_trans = tuple(lhs_shape[i] for i in lhs_perm)
    rhs_trans = tuple(rhs_shape[i] for i in rhs_perm)
    out_trans = conv_shape_tuple(lhs_trans, rhs_trans, window_strides, padding)
    return tuple(out_trans[i] for i in np.argsort(out_perm))


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers):
    """``jax.lax.conv_transpose_shape_tuple``: the output shape of a transposed convolution
    with explicit (low, high) pads."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs_trans = tuple(lhs_shape[i] for i in lhs_perm)
    rhs_trans = tuple(rhs_shape[i] for i in rhs_perm)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(k, s, padding)
                   for k, s in zip(rhs_trans[2:], window_strides)]
    out_space = [int((n - 1) * s - k + 2 + lo + hi) for s, n, k, (lo, hi) in zip(
        window_strides, lhs_trans[2:], rhs_trans[2:], padding)]
    out_trans = (lhs_trans[0], rhs_trans[0]) + tuple(out_space)
    return tuple(out_trans[i] for i in np.argsort(out_perm))


def _dilate(shape, dil):
    return tuple(0 if d == 0 else 1 + (d - 1) * k for d, k in zip(shape, dil))


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    """``jax.lax.reduce_window_shape_tuple``: the output shape of a reduce_window with explicit
    (low, high) padding."""
    shape = tuple(operand_shape)
    win = tuple(window_dimensions)
    if base_dilation is not None:
        shape = _dilate(shape, base_dilation)
    if window_dilation is not None:
        win = _dilate(win, window_dilation)
    return tuple(int((n + lo + hi - w) // s + 1) for n, w, s, (lo, hi) in
                 zip(shape, win, window_strides, padding))


# ---- mulhi, composite ----

def mulhi(x, y):
    """``jax.lax.mulhi``: the high half of the full-width product of two integers of one dtype
    (signed or unsigned).  Up to 32 bits, the product in 64 bits shifted down; 64 bits, the
    32-bit halves' four partial products in uint64 with their carries, then the signed
    correction (subtract y where x < 0 and x where y < 0)."""
    t = _trace_of(x, y)
    a, b = _lift(t, x), _lift(t, y)
    if a.dtype != b.dtype or a.dtype not in INTS:
        raise TypeError(f"mulhi: operands must be integers of one dtype, got {a.dtype} and "
                        f"{b.dtype}")
    dt = a.dtype
    bits = dt.itemsize * 8
    if bits <= 32:
        wide = np.dtype(np.int64 if dt.kind == "i" else np.uint64)
        return astype(right_shift(astype(a, wide) * astype(b, wide), wide.type(bits)), dt)
    u64 = np.dtype(np.uint64)
    ua, ub = astype(a, u64), astype(b, u64)
    lo32, s32 = np.uint64(0xFFFFFFFF), np.uint64(32)
    al, ah = bitwise_and(ua, lo32), right_shift(ua, s32)
    bl, bh = bitwise_and(ub, lo32), right_shift(ub, s32)
    lh, hl = al * bh, ah * bl
    cross = right_shift(al * bl, s32) + bitwise_and(lh, lo32) + hl  # < 2**64
    hi = ah * bh + right_shift(lh, s32) + right_shift(cross, s32)
    if dt.kind == "i":
        zero = np.uint64(0)
        hi = hi - where(a < 0, ub, zero) - where(b < 0, ua, zero)
    return astype(hi, dt)


def composite(decomposition, name: str, version: int = 0):
    """``jax.lax.composite``: ``decomposition`` as a function; its keyword arguments are the
    composite's attributes.  tidu runs (and lowers) the decomposition itself: there is no
    ``stablehlo.composite`` wrapper for a backend to match by ``name``."""
    if not callable(decomposition):
        raise TypeError(f"composite: decomposition {decomposition!r} must be a function")

    @functools.wraps(decomposition)
    def call(*args, **kwargs):
        return decomposition(*args, **kwargs)

    return call


def bitcast_convert_type(operand, new_dtype):
    """``jax.lax.bitcast_convert_type``: the operand's bytes read as ``new_dtype`` (one
    BitcastConvertType; a narrower dtype adds a trailing axis of the width ratio, a wider one
    takes the last axis, which must be that ratio long). Bool and complex only to their own
    dtype, as jax."""
    x = _tr(operand)
    dt = np.dtype(new_dtype)
    if x.dtype == dt:
        return x
    if x.dtype.kind in "bc" or dt.kind in "bc":
        raise TypeError(f"bitcast_convert_type does not support bool or complex values unless "
                        f"the operand and destination types match; got {x.dtype} to {dt}")
    return _emit(x._t, _P.BitcastConvertType(dt.name), x)
