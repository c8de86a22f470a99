"""Every primitive's AD rules: a table over primitive x differentiable dtype x order <= 2 checked
with tidu.testing.check_grads (forward vs finite differences, reverse via the adjoint identity).
tests/ops/test_completeness.py checks that every primitive has the rules and a row in TABLE."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import tidu as td
from tidu import ops as P
from tidu.numpy.conv import conv_general_dilated, reduce_window
from tidu.testing import check_grads

rng = np.random.default_rng(0)


def arr(shape, dtype, positive=False):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    if positive:
        x = np.abs(x) + 0.5 if np.dtype(dtype).kind != "c" else x + 2.0
    return x.astype(dtype)


def apart(shape, dtype):
    """x and y with |x - y| >= 0.5 everywhere: no kink of max/min/select within the FD step."""
    x = arr(shape, dtype)
    return [x, (x + rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 1.5, shape)).astype(dtype)]


def spread(shape, dtype):
    """Entries at least 0.3 apart (no near-ties for ReduceMax)."""
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) * 0.3 + 0.2).astype(dtype)


# name -> (function of traced values, argument factory(dtype), dtypes)
REAL = ("float32", "float64")
ALL = ("float32", "float64", "complex64", "complex128")
TABLE = {
    "Add": (lambda x, y: x + y, lambda d: [arr((3,), d), arr((3,), d)], ALL),
    "Sub": (lambda x, y: x - y, lambda d: [arr((3,), d), arr((3,), d)], ALL),
    "Mul": (lambda x, y: x * y, lambda d: [arr((3,), d), arr((3,), d)], ALL),
    "Neg": (lambda x: -x, lambda d: [arr((3,), d)], ALL),
    "Div": (lambda x, y: x / y, lambda d: [arr((3,), d), arr((3,), d, True)], ALL),
    "Pow": (lambda x, y: td.power(x, y), lambda d: [arr((3,), d, True), arr((3,), d)], REAL),
    "Max": (lambda x, y: td.maximum(x, y), lambda d: apart((3,), d), REAL),
    "Min": (lambda x, y: td.minimum(x, y), lambda d: apart((3,), d), REAL),
    "Conj": (lambda z: td.conj(z) * z[0], lambda d: [arr((3,), d)], ("complex64", "complex128")),
    "Real": (lambda z: td.real(z * z), lambda d: [arr((3,), d)], ("complex64", "complex128")),
    "Imag": (lambda z: td.imag(z * z), lambda d: [arr((3,), d)], ("complex64", "complex128")),
    "Exp": (td.exp, lambda d: [arr((3,), d)], ALL),
    "Log": (td.log, lambda d: [arr((3,), d, True)], ALL),
    "Sin": (td.sin, lambda d: [arr((3,), d)], ALL),
    "Cos": (td.cos, lambda d: [arr((3,), d)], ALL),
    "Tanh": (td.tanh, lambda d: [arr((3,), d)], ALL),
    "Sqrt": (td.sqrt, lambda d: [arr((3,), d, True)], ALL),
    "Rsqrt": (td.rsqrt, lambda d: [arr((3,), d, True)], ALL),
    "Expm1": (td.expm1, lambda d: [arr((3,), d)], ALL),
    "Log1p": (td.log1p, lambda d: [arr((3,), d, True)], ALL),
    "Abs": (lambda x: td.abs(x), lambda d: [arr((3,), d, True)], ALL),
    "ReduceSum": (lambda x: td.sum(x * x, axis=1), lambda d: [arr((2, 3), d)], ALL),
    "ReduceMax": (lambda x: td.max(x * x, axis=0), lambda d: [spread((4, 3), d)], REAL),
    "BroadcastInDim": (lambda x: td.broadcast_to(x, (2, 3)) * td.broadcast_to(x[:1], (2, 3)),
                       lambda d: [arr((3,), d)], ALL),
    "Reshape": (lambda x: td.reshape(x * x, (3, 2)), lambda d: [arr((2, 3), d)], ALL),
    "Transpose": (lambda x: td.transpose(x * x), lambda d: [arr((2, 3), d)], ALL),
    "DotGeneral": (lambda x, y: x @ y, lambda d: [arr((2, 3), d), arr((3, 4), d)], ALL),
    "DotGeneral batched": (lambda x, y: td.matmul(x, y),
                           lambda d: [arr((2, 2, 3), d), arr((2, 3, 4), d)], ALL),
    "Convert": (lambda x: td.astype(x * x, "float64"), lambda d: [arr((3,), d)], ("float32",)),
    "Convert to complex": (lambda x: td.astype(x, "complex128") * (1 + 2j),
                           lambda d: [arr((3,), d)], REAL),
    "Select": (lambda x, y: td.where(x > y, x * y, y), lambda d: apart((4,), d), REAL),
    "Slice": (lambda x: x[1:, ::2] * x[:-1, 1:2], lambda d: [arr((3, 4), d)], ALL),
    "Pad": (lambda x: td.sum(P_pad(x) * P_pad(x)), lambda d: [arr((3,), d)], REAL),
    "Concatenate": (lambda x, y: td.concatenate([x * x, y], axis=0),
                    lambda d: [arr((2,), d), arr((3,), d)], ALL),
    "TriangularSolve": (lambda a, b: td.apply(P.TriangularSolve(True, True, True, True, False),
                                              a, b * b),
                        lambda d: [(arr((3, 3), d) + 4 * np.eye(3)).astype(d), arr((3, 2), d)],
                        ALL),
    "Rev": (lambda x: x[::-1, ::-2] * td.flip(x)[:, :2], lambda d: [arr((3, 4), d)], ALL),
    # convolution (ops/conv.py; tests/numpy/test_conv.py checks values against jax)
    "Conv": (lambda x, w: conv_general_dilated(x, w * w, (2, 1), [(1, 0), (0, 1)], (1, 2), (2, 1)),
             lambda d: [arr((2, 2, 3, 3), d), arr((3, 2, 2, 2), d)], ALL),
    "Conv groups": (lambda x, w: conv_general_dilated(x, w, (1,), "SAME",
                                                      feature_group_count=2) * x[:, :1],
                    lambda d: [arr((1, 4, 3), d), arr((2, 2, 2), d)], ALL),
    "Conv batch groups": (lambda x, w: conv_general_dilated(x * x, w, (1,), "VALID",
                                                            batch_group_count=2),
                          lambda d: [arr((4, 2, 3), d), arr((4, 2, 2), d)], ALL),
    "ReduceWindowSum": (lambda x: reduce_window(x * x, 0.0, "add", (2, 2), (1, 2), "SAME",
                                                (2, 1), (1, 2)),
                        lambda d: [arr((3, 4), d)], ALL),
    "ReduceWindowMax": (lambda x: reduce_window(x * x, -np.inf, "max", (2, 2), (1, 2), "SAME"),
                        lambda d: [spread((3, 4), d)], REAL),
    "ReduceWindowMin": (lambda x: reduce_window(x, np.inf, "min", (3,), (2,), [(1, 1)], (2,)),
                        lambda d: [spread((5,), d)], REAL),
    # max pooling's derivative (ops/select_window.py): the tangent and the gradient as one op,
    # each differentiated again (linear in t / s; the selection is constant in x)
    "SelectAndGatherAdd": (lambda x, t: td.jvp(lambda u: reduce_window(
        u, -np.inf, "max", (2, 3), (1, 2), "SAME"), (x,), (t * t,))[1] * x[:, :2],
        lambda d: [spread((3, 4), d), arr((3, 4), d)], REAL),
    "SelectAndScatterAdd": (lambda x, c: td.vjp(lambda u: reduce_window(
        u, np.inf, "min", (2, 2), (2, 1), [(1, 0), (0, 1)]), x)[1](c * c)[0] * x,
        lambda d: [spread((3, 4), d), arr((2, 4), d)], REAL),
    "Cholesky": (lambda a: td.apply(P.Cholesky(), a),
                 lambda d: [(arr((3, 3), d) + 6 * np.eye(3)).astype(d)], ALL),
    # indexing (tests/numpy/test_indexing.py has the front end's cases)
    "Gather": (lambda x: x[np.array([[2, 0], [2, 9]]), 1:] * x[np.array([1, 1])][:, 1:],
               lambda d: [arr((3, 3), d)], ALL),
    "Scatter": (lambda x, u: x.at[np.array([0, 2, 0, 5])].add(u * u).at[1].set(x[0]),
                lambda d: [arr((3, 2), d), arr((4, 2), d)], ALL),
    "Scatter mul": (lambda x, u: x.at[np.array([0, 2, 0])].mul(u * x[1]),
                    lambda d: [arr((3, 2), d), arr((3, 2), d)], ALL),
    "Scatter max": (lambda x, u: x.at[np.array([0, 2, 0])].max(u),
                    lambda d: apart((3,), d), REAL),
    "DynamicSlice": (lambda x: td.dynamic_slice(x * x, (1, -1), (2, 2)),
                     lambda d: [arr((3, 3), d)], ALL),
    "DynamicUpdateSlice": (lambda x, u: td.dynamic_update_slice(x, u * u, (2, 0)),
                           lambda d: [arr((3, 3), d), arr((2, 2), d)], ALL),
    # ordering and accumulation (tidu.ops.sorting)
    "ReduceMin": (lambda x: td.min(x * x, axis=0), lambda d: [spread((4, 3), d)], REAL),
    "ReduceProd": (lambda x: td.prod(x, axis=1), lambda d: [arr((2, 3), d)], ALL),
    "Cumsum": (lambda x: td.cumsum(x * x, axis=1), lambda d: [arr((2, 3), d)], ALL),
    "Cumprod": (lambda x: td.cumprod(x, axis=0), lambda d: [arr((3, 2), d)], ALL),
    "Cummax": (lambda x: td.cummax(x * x, axis=0), lambda d: [spread((4, 3), d)], REAL),
    "Cummin": (lambda x: td.cummin(x, axis=1, reverse=True), lambda d: [spread((3, 4), d)], REAL),
    "LinearScan": (lambda a, b: td.apply(P.LinearScan(0), a, b * b),
                   lambda d: [arr((4, 2), d), arr((4, 2), d)], ALL),
    "Sort": (lambda x: td.sort(x * x, axis=0), lambda d: [spread((4, 3), d)], REAL),
    "Sort by keys": (lambda k, v: td.apply(P.Sort(1, True), k, v * v),
                     lambda d: [spread((2, 4), d), arr((2, 4), d)], REAL),
    "LU": (lambda a: td.apply(P.LU(), a), lambda d: [(arr((3, 3), d) + 4 * np.eye(3)).astype(d)],
           ALL),
    "LUPermute": (lambda x: td.apply(P.LUPermute(False), np.array([2, 2, 2], np.int32), x * x),
                  lambda d: [arr((3, 2), d)], ALL),
    "Eigh": (lambda a: td.apply(P.Eigh(True), a) * td.conj(td.apply(P.Eigh(True), a)),
             lambda d: [(arr((3, 3), d) + np.diag([0.0, 3.0, 6.0])).astype(d)], ALL),
    "Eigh values": (lambda a: td.apply(P.Eigh(False), a),
                    lambda d: [(arr((3, 3), d) + np.diag([0.0, 3.0, 6.0])).astype(d)], ALL),
    # Eig: eigenvectors under jax's opt-in (enable_eigvec_derivs), through |.|^2 (phase-free)
    "Eig": (lambda a: td.apply(P.Eig(False, True, True), a)
            * td.conj(td.apply(P.Eig(False, True, True), a)),
            lambda d: [(arr((3, 3), d) + np.diag([0.0, 3.0, 6.0])).astype(d)], ALL),
    "Eig values": (lambda a: td.apply(P.Eig(False, False, True), a),
                   lambda d: [(arr((3, 3), d) + np.diag([0.0, 3.0, 6.0])).astype(d)], ALL),
    "QR": (lambda a: td.apply(P.QR(False), a),
           lambda d: [(arr((4, 3), d) + 3 * np.eye(4, 3)).astype(d)], ALL),
    "SVD": (lambda a: td.apply(P.SVD(False, True), a) * td.conj(td.apply(P.SVD(False, True), a)),
            lambda d: [(arr((3, 2), d) + np.diag([0.0, 3.0])[[0, 1, 1]]).astype(d)], ALL),
    "SVD values": (lambda a: td.apply(P.SVD(False, False), a),
                   lambda d: [(arr((2, 3), d) + 3 * np.eye(2, 3)).astype(d)], ALL),
    # control flow (docs/control_flow.md; While is forward-mode only:
    # tests/api/test_control_flow.py)
    "Scan": (lambda x, y: td.scan(lambda c, v: (c * v + td.sin(c), c * c), x, y)[1],
             lambda d: [(arr((3,), d) * 0.5).astype(d), (arr((4, 3), d) * 0.5).astype(d)], ALL),
    "Cond": (lambda x, y: td.switch(1, [lambda a, b: a * b, lambda a, b: td.sin(a) * b], x, y),
             lambda d: [arr((3,), d), arr((3,), d)], ALL),
    "Checkpoint": (lambda x, y: td.checkpoint(lambda a, b: td.sin(a * b) * a)(x, y),
                   lambda d: [arr((3,), d), arr((3,), d)], ALL),
    # a general reduce_window (api/lax_window.py): derivatives through its array program
    "ReduceWindowGeneral": (lambda x: td.lax.reduce_window(x, 1.0, lambda p, q: p * q, (2, 3),
                                                           (1, 2), "SAME"),
                            lambda d: [arr((3, 5), d)], ALL),
    # custom rules (tests/api/test_custom_rules.py; CustomVJP and its CustomVJPLin are reverse
    # mode only, as in jax: there)
    "CustomJVP": (lambda x, y: _sin_times(x, y), lambda d: [arr((3,), d), arr((3,), d)], ALL),
    "CustomLinear": (lambda a, x: td.lax.linear_call(lambda r, v: r * v * r,
                                                     lambda r, c: td.conj(r * r) * c, a, x),
                     lambda d: [arr((3,), d), arr((3,), d)], ALL),
}



@td.custom_jvp
def _sin_times(x, y):
    return td.sin(x) * y


_sin_times.defjvp(lambda p, t: (_sin_times(*p), td.cos(p[0]) * p[1] * t[0] + td.sin(p[0]) * t[1]))


def unit(shape, dtype):
    """Inside |x| < 1, away from the edge (asin, acos, atanh, erfinv)."""
    x = arr(shape, dtype)
    return (np.tanh(x) * 0.7 if np.dtype(dtype).kind == "f" else x * 0.3).astype(dtype)


def rem_args(d):
    """x / y in (1.2, 1.8): no jump of fmod within the finite-difference step."""
    y = arr((3,), d, True)
    return [(y * rng.uniform(1.2, 1.8, 3)).astype(d), y]


# elementwise math (ops/math.py); Floor, Ceil, Round and IsFinite are non-differentiable
TABLE.update({
    "Tan": (td.tan, lambda d: [unit((3,), d)], ALL),
    "Atan": (td.arctan, lambda d: [unit((3,), d)], ALL),
    "Asin": (td.arcsin, lambda d: [unit((3,), d)], ALL),
    "Acos": (td.arccos, lambda d: [unit((3,), d)], ALL),
    "Atanh": (td.arctanh, lambda d: [unit((3,), d)], ALL),
    "Sinh": (td.sinh, lambda d: [arr((3,), d)], ALL),
    "Cosh": (td.cosh, lambda d: [arr((3,), d)], ALL),
    "Asinh": (td.arcsinh, lambda d: [arr((3,), d)], ALL),
    "Acosh": (td.arccosh, lambda d: [(arr((3,), d, True) + 1).astype(d)], ALL),
    "Erf": (td.erf, lambda d: [arr((3,), d)], REAL),
    "Erfc": (td.erfc, lambda d: [arr((3,), d)], REAL),
    "ErfInv": (td.erfinv, lambda d: [unit((3,), d)], REAL),
    "Cbrt": (td.cbrt, lambda d: [arr((3,), d, True)], REAL),
    "Logistic": (td.nn.sigmoid, lambda d: [arr((3,), d)], REAL),
    "Rem": (td.fmod, rem_args, REAL),
    "Atan2": (td.arctan2, lambda d: [arr((3,), d), arr((3,), d)], REAL),
    "Lgamma": (td.lax.lgamma, lambda d: [(arr((3,), d, True) + 0.5).astype(d)], REAL),
})
NONDIFF_MATH = {"Floor", "Ceil", "Round", "IsFinite"}

# a debug callback (ops/callback.py) passes no tangent; the Tie that keeps it passes x's
_calls: list = []
TABLE.update({
    "HostCallback": (lambda x: (td.debug.callback(_calls.append, x), td.sin(x) * x)[1],
                     lambda d: [arr((3,), d)], ("float64",)),
    "Tie": (lambda x: (td.debug.callback(_calls.append, x), x * x)[1], lambda d: [arr((3,), d)],
            ALL),
})


# the Fourier transform (ops/fft.py): every fft_type, odd, even and prime lengths, n padding
# and truncation, the norms
TABLE.update({
    "Fft": (lambda x: td.fft.fft(x * x, n=6, norm="ortho"), lambda d: [arr((2, 5), d)], ALL),
    "Fft ifft2": (lambda x: td.fft.ifft2(td.sin(x), s=(3, 4)), lambda d: [arr((2, 5), d)], ALL),
    "Fft rfft": (lambda x: td.fft.rfftn(x * x, s=(3, 7), norm="forward"),
                 lambda d: [arr((2, 6), d)], REAL),
    "Fft irfft": (lambda x: td.fft.irfft(x * x, n=8), lambda d: [arr((2, 5), d)], ALL),
    "Fft irfft2 odd": (lambda x: td.fft.irfft2(td.sin(x), s=(3, 5)), lambda d: [arr((3, 4), d)],
                       ALL),
})


def P_pad(x):
    from tidu.trace.tracer import _emit

    return _emit(x._t, P.Pad((1,), (2,), (1,)), x)


CASES = [(name, d) for name, (_, _, dts) in TABLE.items() for d in dts]


@pytest.mark.parametrize("name,dtype", CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_rules_against_finite_differences(name, dtype):
    global rng
    rng = np.random.default_rng(zlib.crc32(f"{name}-{dtype}".encode()))  # same draw in any order
    fn, make, _ = TABLE[name]
    args = make(dtype)
    single = np.dtype(dtype).itemsize <= 8 and np.dtype(dtype).kind in "fc" and \
        np.dtype(dtype) in (np.dtype("float32"), np.dtype("complex64"))
    check_grads(fn, args, order=2, atol=5e-2 if single else 1e-6, rtol=5e-2 if single else 1e-6,
                eps=1e-2 if single else 1e-6)


def test_linear_fragments_never_hold_bilinear_products():
    M = td.spec((2, 2), "float64")
    F0 = td.build(lambda x: td.sum((x @ x) * x), x=M)
    L1 = td.differentiate(td.resolve([F0]), F0.outputs, ["x"])
    T1 = td.transpose(L1)
    for frag in (L1.fragment, T1.fragment):
        for op, _, _, mode in frag.ops():
            if op.name in ("Mul", "DotGeneral") and mode.is_linear:
                assert sum(mode.active_mask) == 1, (op, mode)
