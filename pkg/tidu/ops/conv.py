"""Convolution: the Conv primitive (XLA's ConvGeneralDilated) in one canonical layout.

The operands are lhs ``(N, C, *spatial)`` and rhs ``(O, I, *window)``; the result is
``(N // batch_group_count, O, *out_spatial)``.  The front end (``tidu.numpy.conv``) moves jax's
``dimension_numbers`` onto this layout with Transpose nodes, so the primitive, its rules, its
kernel (``cpp/include/tidu/kernels/conv.hpp``, im2col + GEMM through the BLAS hook) and its
lowering know one layout only.  Padding may be negative (the transposes produce it).

Derivatives are jax's: Conv is bilinear; the lhs cotangent is a convolution of the cotangent with
the reversed, feature-swapped kernel (strides and lhs dilation trade places), the rhs cotangent a
convolution of the input with the cotangent (strides and rhs dilation trade places), feature and
batch groups trading places too (jax ``_conv_general_dilated_transpose_lhs/rhs``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.graph import aval
from tidu.ops.core import (
    ALL,
    A,
    BroadcastInDim,
    F,
    Mul,
    Primitive,
    ReduceSum,
    Reshape,
    Transpose,
    aval_of,
    bilinear,
    check_dtype,
    conj_fixed,
    const,
    fix,
    i64_array,
    ints,
    lin,
)
from tidu.ops.shapes import Rev

__all__ = ["Conv", "conv_output_shape", "dilate_shape"]


# ---- shapes ----


def dilate_shape(shape, dilation) -> tuple[int, ...]:
    """Each size d spread by `dilation` (d - 1 holes of dilation - 1): 0 stays 0."""
    return tuple(0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation))


def conv_output_shape(spatial, window, strides, low, high, lhs_dilation, rhs_dilation):
    """The output's spatial sizes: windows that fit the padded, dilated input."""
    ins = dilate_shape(spatial, lhs_dilation)
    wins = dilate_shape(window, rhs_dilation)
    out = []
    for d, w, s, lo, hi in zip(ins, wins, strides, low, high):
        n = d + lo + hi
        out.append(0 if n < w else (n - w) // s + 1)
    return tuple(out)


def _swap01(nd: int) -> tuple[int, ...]:
    return (1, 0) + tuple(range(2, nd))


def _axis_into(b, x, src: int, dst: int):
    """jax's _reshape_axis_into: axis `src` merged into axis `dst` (numbered without src), as
    its major part."""
    shape = aval_of(b, x).shape
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    new = [d for i, d in enumerate(shape) if i != src]
    new[dst] *= shape[src]
    if perm != list(range(len(shape))):
        x = fix(b, Transpose(tuple(perm)), x)
    return fix(b, Reshape(tuple(new)), x)


def _axis_out_of(b, x, src: int, size1: int):
    """jax's _reshape_axis_out_of: axis `src` split into (size1, rest)."""
    shape = list(aval_of(b, x).shape)
    shape[src:src + 1] = [size1, shape[src] // size1]
    return fix(b, Reshape(tuple(shape)), x)


def _lin_axis_into(b, x, src: int, dst: int):
    shape = aval_of(b, x).shape
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    new = [d for i, d in enumerate(shape) if i != src]
    new[dst] *= shape[src]
    if perm != list(range(len(shape))):
        x = lin(b, Transpose(tuple(perm)), [x], [A])
    return lin(b, Reshape(tuple(new)), [x], [A])


def _lin_axis_out_of(b, x, src: int, size1: int):
    shape = list(aval_of(b, x).shape)
    shape[src:src + 1] = [size1, shape[src] // size1]
    return lin(b, Reshape(tuple(shape)), [x], [A])


# ---- Conv ----


@register
@dataclass(frozen=True)
class Conv(Primitive):
    """lhs (N, C, *S) convolved with rhs (O, I, *K) -> (N // batch_group_count, O, *S'):
    ``lax.conv_general_dilated`` in the canonical layout (padding as low/high pairs)."""

    window_strides: tuple[int, ...]
    padding_low: tuple[int, ...]
    padding_high: tuple[int, ...]
    lhs_dilation: tuple[int, ...]
    rhs_dilation: tuple[int, ...]
    feature_group_count: int = 1
    batch_group_count: int = 1

    uses_blas = True
    bilinear_in = (0, 1)

    def __post_init__(self):
        for f in ("window_strides", "padding_low", "padding_high", "lhs_dilation", "rhs_dilation"):
            object.__setattr__(self, f, ints(getattr(self, f)))
        object.__setattr__(self, "feature_group_count", int(self.feature_group_count))
        object.__setattr__(self, "batch_group_count", int(self.batch_group_count))

    # ---- shape and dtype rule ----

    def abstract_eval(self, lhs, rhs):
        n = self.name
        if lhs.dtype != rhs.dtype:
            raise TypeError(f"{n}: dtype mismatch {lhs.dtype} vs {rhs.dtype}")
        check_dtype(n, lhs, ALL, "numeric or bool")
        ns = len(self.window_strides)
        if lhs.ndim != ns + 2 or rhs.ndim != ns + 2:
            raise ValueError(f"{n}: lhs shape {lhs.shape} and rhs shape {rhs.shape} must both have "
                             f"rank {ns + 2} (batch, feature and {ns} spatial axes)")
        for f in ("padding_low", "padding_high", "lhs_dilation", "rhs_dilation"):
            if len(getattr(self, f)) != ns:
                raise ValueError(f"{n}: {f} {getattr(self, f)} does not have {ns} entries")
        for f in ("window_strides", "lhs_dilation", "rhs_dilation"):
            if any(v < 1 for v in getattr(self, f)):
                raise ValueError(f"{n}: {f} {getattr(self, f)} must be positive")
        g, bg = self.feature_group_count, self.batch_group_count
        if g < 1 or bg < 1:
            raise ValueError(f"{n}: feature_group_count {g} and batch_group_count {bg} must be "
                             f"positive")
        if g > 1 and bg > 1:
            raise ValueError(f"{n}: feature_group_count {g} and batch_group_count {bg} cannot "
                             f"both exceed 1")
        nb, c = lhs.shape[:2]
        o, i = rhs.shape[:2]
        if c != i * g:
            raise ValueError(f"{n}: lhs feature size {c} is not rhs input features {i} times "
                             f"feature_group_count {g} (lhs {lhs.shape}, rhs {rhs.shape})")
        if o % g or o % bg:
            raise ValueError(f"{n}: rhs output features {o} are not divisible by the group count "
                             f"{max(g, bg)} (rhs {rhs.shape})")
        if nb % bg:
            raise ValueError(f"{n}: lhs batch size {nb} is not divisible by batch_group_count {bg}")
        sp = conv_output_shape(lhs.shape[2:], rhs.shape[2:], self.window_strides,
                               self.padding_low, self.padding_high, self.lhs_dilation,
                               self.rhs_dilation)
        return aval((nb // bg, o) + sp, lhs.dtype)

    # ---- AD ----

    def linearize(self, b, primal_in, primal_out, t):
        return [bilinear(self, b, primal_in, t)]

    def transpose_rule(self, b, ct, inputs, mode):
        m = mode.active_mask
        if m[0] and m[1]:
            raise ValueError("Conv with both operands active is not linear")
        lhs, rhs = inputs
        g = ct[0]
        gav = aval_of(b, g)
        nd = lhs.ndim
        ns = nd - 2
        sp = tuple(range(2, nd))
        fg, bg = self.feature_group_count, self.batch_group_count
        in_d = dilate_shape(lhs.shape[2:], self.lhs_dilation)
        win_d = dilate_shape(rhs.shape[2:], self.rhs_dilation)
        out_d = dilate_shape(gav.shape[2:], self.window_strides)
        if m[0]:  # the lhs cotangent: g conv rev(rhs) with features swapped
            w = conj_fixed(b, rhs)
            groups = fg
            if fg > 1 or bg > 1:
                k = max(fg, bg)
                w = _axis_into(b, _axis_out_of(b, w, 0, k), 0, 1)
                groups = k
            w = fix(b, Transpose(_swap01(nd)), w)
            if ns:
                w = fix(b, Rev(sp), w)
            before = tuple(wd - lo - 1 for wd, lo in zip(win_d, self.padding_low))
            after = tuple(i + wd - 1 - od - bf for i, wd, od, bf in
                          zip(in_d, win_d, out_d, before))
            op = Conv(self.lhs_dilation, before, after, self.window_strides, self.rhs_dilation,
                      groups, 1)
            out = lin(b, op, [g, w], [A, F])
            if bg > 1:
                out = _lin_axis_into(b, _lin_axis_out_of(b, out, 1, bg), 1, 0)
            return [out, None]
        # the rhs cotangent: lhs (features as batch) conv g (batch as input features)
        if gav.size == 0:
            return [None, _zeros_like(b, rhs, g)]
        x = fix(b, Transpose(_swap01(nd)), conj_fixed(b, lhs))
        gt = lin(b, Transpose(_swap01(nd)), [g], [A])
        lo = self.padding_low
        hi = tuple(od - i + wd - p - 1 for od, i, wd, p in zip(out_d, in_d, win_d, lo))
        op = Conv(self.rhs_dilation, lo, hi, self.lhs_dilation, self.window_strides,
                  bg, fg)
        out = lin(b, op, [x, gt], [F, A])
        return [None, lin(b, Transpose(_swap01(nd)), [out], [A])]

    # ---- vmap ----

    def batch(self, b, primal_in, primal_out, bt):
        (x, w), (bx, bw) = primal_in, bt
        fg, bg = self.feature_group_count, self.batch_group_count
        if bx is not None and bw is not None:
            nbt = aval_of(b, bx).shape[0]
            ws = aval_of(b, bw).shape
            rw = fix(b, Reshape((nbt * ws[1],) + ws[2:]), bw)
            if bg == 1:  # the vmapped axis becomes feature groups
                lx = _axis_into(b, bx, 0, 1)
                out = fix(b, _with(self, feature_group_count=fg * nbt), lx, rw)
            else:  # ... or batch groups
                xs = aval_of(b, bx).shape
                lx = fix(b, Reshape((nbt * xs[1],) + xs[2:]), bx)
                out = fix(b, _with(self, batch_group_count=bg * nbt), lx, rw)
            return [_front(b, _axis_out_of(b, out, 1, nbt), 1)]
        if bx is not None:
            xs = aval_of(b, bx).shape
            nbt = xs[0]
            if bg == 1:
                lx = fix(b, Reshape((nbt * xs[1],) + xs[2:]), bx)
            else:  # keep the batch groups major: (B, BG, N') -> (BG, B, N')
                lx = fix(b, Reshape((nbt, bg, xs[1] // bg) + xs[2:]), bx)
                lx = fix(b, Transpose((1, 0) + tuple(range(2, len(xs) + 1))), lx)
                lx = fix(b, Reshape((nbt * xs[1],) + xs[2:]), lx)
            out = fix(b, self, lx, w)
            return [_axis_out_of(b, out, 0, nbt)]
        ws = aval_of(b, bw).shape
        nbt, o = ws[0], ws[1]
        k = max(fg, bg)  # output features as (groups, vmapped axis, per group)
        rw = fix(b, Reshape((nbt, k, o // k) + ws[2:]), bw)
        rw = fix(b, Transpose((1, 0) + tuple(range(2, len(ws) + 1))), rw)
        rw = fix(b, Reshape((nbt * o,) + ws[2:]), rw)
        out = fix(b, self, x, rw)
        os_ = aval_of(b, out).shape
        out = fix(b, Reshape((os_[0], k, nbt, o // k) + os_[2:]), out)
        out = fix(b, Transpose((2, 0, 1, 3) + tuple(range(4, len(os_) + 2))), out)
        return [fix(b, Reshape((nbt, os_[0], o) + os_[2:]), out)]

    # ---- StableHLO ----

    def lower(self, lo, out, x, w):
        if not lo.nb:
            return lo.op("stablehlo.convolution", [x, w], out, self._hlo_attrs(self))
        # a batched lowering: the leading axis folded into feature (or batch) groups
        nbt = lo.batch
        xs = _shape_of(x)
        ws = _shape_of(w)
        dt = out.dtype
        rw = lo.op("stablehlo.reshape", [w], lo.tensor_type((nbt * ws[1],) + ws[2:], dt))
        if self.batch_group_count == 1:
            perm = (1, 0) + tuple(range(2, len(xs)))
            tx = lo.op("stablehlo.transpose", [x], lo.tensor_type(
                tuple(xs[p] for p in perm), dt), f"permutation = {lo.i64_array(perm)}")
            lx = lo.op("stablehlo.reshape", [tx], lo.tensor_type(
                (xs[1], nbt * xs[2]) + xs[3:], dt))
            op = _with(self, feature_group_count=self.feature_group_count * nbt)
        else:
            lx = lo.op("stablehlo.reshape", [x], lo.tensor_type((nbt * xs[1],) + xs[2:], dt))
            op = _with(self, batch_group_count=self.batch_group_count * nbt)
        n0, o = out.shape[0], out.shape[1]
        r = lo.op("stablehlo.convolution", [lx, rw],
                  lo.tensor_type((n0, nbt * o) + out.shape[2:], dt), self._hlo_attrs(op))
        r = lo.op("stablehlo.reshape", [r], lo.tensor_type((n0, nbt, o) + out.shape[2:], dt))
        perm = (1, 0) + tuple(range(2, len(out.shape) + 1))
        return lo.op("stablehlo.transpose", [r], out, f"permutation = {lo.i64_array(perm)}")

    @staticmethod
    def _hlo_attrs(op) -> str:
        ns = len(op.window_strides)
        sp = ", ".join(str(i) for i in range(ns))
        sep = ", " if ns else ""
        dims = f"[b, f{sep}{sp}]x[o, i{sep}{sp}]->[b, f{sep}{sp}]"
        pad = "[" + ", ".join(f"[{p}, {q}]" for p, q in zip(op.padding_low, op.padding_high)) + "]"
        pad_attr = f"padding = dense<{pad}> : tensor<{ns}x2xi64>, " if ns else ""
        return (f"batch_group_count = {op.batch_group_count} : i64, "
                f"dimension_numbers = #stablehlo.conv<{dims}>, "
                f"feature_group_count = {op.feature_group_count} : i64, "
                f"lhs_dilation = {i64_array(op.lhs_dilation)}, {pad_attr}"
                f"rhs_dilation = {i64_array(op.rhs_dilation)}, "
                f"window_strides = {i64_array(op.window_strides)}, "
                f"precision_config = [#stablehlo<precision HIGHEST>, "
                f"#stablehlo<precision HIGHEST>]")

    # ---- reference ----

    def impl(self, x, w):
        """numpy reference: one product per window offset (a loop over the window, not over
        output positions). Padding and lhs dilation's holes are never multiplied, as in XLA: a
        kernel's infinity or NaN reaches only real input elements (kernels/conv.hpp's scatter
        form), where a plain product with the padded input would make 0 * inf = NaN."""
        x, w = np.asarray(x), np.asarray(w)
        out_av = self.abstract_eval(aval(x.shape, x.dtype), aval(w.shape, w.dtype))
        fg, bg = self.feature_group_count, self.batch_group_count
        # the input dilated and padded (negative padding crops); `real` marks its input elements
        ld = self.lhs_dilation
        lo, hi = self.padding_low, self.padding_high

        def dilate_pad(v):
            dil = np.zeros(v.shape[:2] + dilate_shape(v.shape[2:], ld), v.dtype)
            dil[(slice(None), slice(None)) + tuple(slice(None, None, r) for r in ld)] = v
            pad = [(0, 0), (0, 0)] + [(max(p, 0), max(q, 0)) for p, q in zip(lo, hi)]
            vp = np.pad(dil, pad)
            crop = tuple(slice(max(-p, 0), vp.shape[2 + k] - max(-q, 0))
                         for k, (p, q) in enumerate(zip(lo, hi)))
            return vp[(slice(None), slice(None)) + crop]

        xp = dilate_pad(x)
        finite = np.isfinite(w)
        real = None if finite.all() else dilate_pad(np.ones((1, 1) + x.shape[2:], bool))
        if real is not None:  # products with the non-finite entries are added where real
            w_bad, w = np.where(finite, 0, w), np.where(finite, w, 0).astype(w.dtype)
        nout = out_av.shape
        y = np.zeros(nout, np.result_type(x.dtype, w.dtype))
        if 0 in nout or 0 in w.shape[2:]:
            return y
        k = max(fg, bg)
        og = w.shape[0] // k
        n1 = x.shape[0] // bg
        cin = w.shape[1]
        for off in np.ndindex(*w.shape[2:]):
            sl = tuple(slice(o * r, o * r + (d - 1) * s + 1, s) for o, r, d, s in
                       zip(off, self.rhs_dilation, nout[2:], self.window_strides))
            patch = xp[(slice(None), slice(None)) + sl]  # (N, C, *S')
            wk = w[(slice(None), slice(None)) + off]  # (O, I)
            for grp in range(k):
                ws_ = wk[grp * og:(grp + 1) * og]
                if bg > 1:
                    p = patch[grp * n1:(grp + 1) * n1]
                else:
                    p = patch[:, grp * cin:(grp + 1) * cin] if fg > 1 else patch
                y[:, grp * og:(grp + 1) * og] += np.einsum("nc...,oc->no...", p, ws_)
                if real is not None:
                    bad = w_bad[(slice(grp * og, (grp + 1) * og), slice(None)) + off]
                    mask = real[(0, 0) + sl]
                    for o, c in zip(*np.nonzero(~np.isfinite(bad))):
                        with np.errstate(invalid="ignore"):  # the masked-out 0 * inf
                            y[:, grp * og + o] += np.where(mask, p[:, c] * bad[o, c], 0)
        return y.astype(out_av.dtype)


def _zeros_like(b, like, g):
    """A zero cotangent of `like`'s aval: 0 * sum(g) broadcast (keeps the result linear in g)."""
    s = lin(b, ReduceSum(tuple(range(aval_of(b, g).ndim))), [g], [A])
    s = lin(b, Mul(), [const(b, 0, aval((), like.dtype)), s], [F, A])
    return lin(b, BroadcastInDim(like.shape, ()), [s], [A])



def _with(op: Conv, **changes) -> Conv:
    return dataclasses.replace(op, **changes)


def _front(b, x, axis: int):
    nd = aval_of(b, x).ndim
    perm = (axis,) + tuple(i for i in range(nd) if i != axis)
    return fix(b, Transpose(perm), x)


def _shape_of(v) -> tuple[int, ...]:
    body = v.type[len("tensor<"):-1]
    if "complex" in body:
        body = body[:body.index("complex")] + "c"
    return tuple(int(d) for d in body.split("x")[:-1])

