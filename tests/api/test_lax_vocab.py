"""td.lax's jax.lax vocabulary against jax.lax in x64, table-driven: values and dtypes on the
interpreter and XLA, first and second derivatives where differentiable (and central differences
for the composite forms), td.vmap of a representative subset, and a walk of dir(jax.lax) that fails on any name td.lax lacks and
docs/lax.md does not list as deliberately absent."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value
from tidu.api.lax_absent import ABSENT

jax = pytest.importorskip("jax")
from jax import lax as L  # noqa: E402

jax.config.update("jax_enable_x64", True)

T = td.lax
BACKENDS = ("cpu", "xla")
R = np.random.default_rng(0)
X = R.standard_normal((3, 4))
Y = R.standard_normal((3, 4))
POS = np.abs(X) + 0.3
UNIT = np.tanh(X) * 0.8
Z = R.standard_normal((5, 4, 3))
U = R.standard_normal((5, 4, 3))
I1 = np.array([[0], [4], [2], [7], [-1]], np.int32)  # two out of range
I2 = np.array([[0, 1], [3, 2], [4, 3], [2, 9]], np.int32)
INTS = (X * 10).astype(np.int32)
TIE = np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 2.0, 0.5]])
TIE2 = np.array([[1.0, 0.0, 3.0, -1.0], [2.0, 2.5, 2.0, 1.0]])
GD, SD = L.GatherDimensionNumbers, L.ScatterDimensionNumbers
ROUND = np.array([0.5, 1.5, -0.5, -2.5, 2.4999, 0.49999999999999994, -3.7])

_EXTREME = ("scatter_min", "scatter_max")  # jax's derivative with repeated (clipped) indices
# is inf/NaN at the untouched positions; tidu's is finite, so only mode None is compared

# (id, f(M, *args) with M jax.lax or td.lax, args, differentiable)
CASES = [
    *[(n, (lambda n: lambda M, a, b: getattr(M, n)(a, b))(n), (X, Y), d) for n, d in
      [("add", 1), ("sub", 1), ("mul", 1), ("div", 1), ("max", 1), ("min", 1), ("atan2", 1),
       ("pow", 0), ("rem", 1), ("nextafter", 0), ("eq", 0), ("ne", 0), ("lt", 0), ("le", 0),
       ("gt", 0), ("ge", 0)]],
    ("pow-pos", lambda M, a, b: M.pow(a, b), (POS, Y), 1),
    *[(n, (lambda n: lambda M, a: getattr(M, n)(a))(n), (X,), d) for n, d in
      [("neg", 1), ("abs", 1), ("sign", 0), ("exp", 1), ("exp2", 1),
       ("expm1", 1), ("sin", 1), ("cos", 1), ("tan", 1), ("tanh", 1), ("atan", 1), ("sinh", 1),
       ("cosh", 1), ("asinh", 1), ("logistic", 1), ("erf", 1), ("erfc", 1), ("floor", 0),
       ("ceil", 0), ("is_finite", 0), ("square", 1), ("reciprocal", 1), ("cbrt", 1),
       ("conj", 0)]],
    *[(n, (lambda n: lambda M, a: getattr(M, n)(a))(n), (POS,), 1) for n in
      ["log", "log1p", "sqrt", "rsqrt", "lgamma", "digamma"]],
    *[(n, (lambda n: lambda M, a: getattr(M, n)(a))(n), (UNIT,), 1) for n in
      ["asin", "acos", "atanh", "erf_inv"]],
    ("acosh", lambda M, a: M.acosh(a), (POS + 1,), 1),
    ("round-away", lambda M, a: M.round(a), (ROUND,), 0),
    ("round-even", lambda M, a: M.round(a, M.RoundingMethod.TO_NEAREST_EVEN), (ROUND,), 0),
    ("integer_pow", lambda M, a: (M.integer_pow(a, 3), M.integer_pow(a, -2),
                                  M.integer_pow(a, 0)), (X,), 1),
    ("complex", lambda M, a, b: M.complex(a, b), (X, Y), 0),
    ("real-imag", lambda M, a, b: (M.real(M.complex(a, b)), M.imag(M.complex(a, b))), (X, Y), 1),
    ("clamp", lambda M, a: M.clamp(-0.5, a, 0.5), (X,), 1),
    ("clamp-arrays", lambda M, a, b: M.clamp(b - 1, a, b + 0.2), (X, Y), 1),
    ("select", lambda M, a, b: M.select(a > b, a, b), (X, Y), 1),
    ("select_n", lambda M, a, b: M.select_n((a > 0).astype(np.int32) + (b > 0), a, b, a * b),
     (X, Y), 1),
    ("convert", lambda M, a: (M.convert_element_type(a * 3, np.int32),
                              M.convert_element_type(a, np.float32)), (X,), 0),
    ("dot_general", lambda M, a, b: M.dot_general(a, b, (((1,), (1,)), ((0,), (0,)))),
     (X, Y), 1),
    ("dot_general-pet", lambda M, a, b: M.dot_general(
        a.astype(np.float32), b.astype(np.float32), (((0,), (0,)), ((), ())),
        preferred_element_type=np.float64), (X, Y), 0),
    ("dot", lambda M, a, b: (M.dot(a, b.T), M.dot(a[0], b[0])), (X, Y), 1),
    ("batch_matmul", lambda M, a, b: M.batch_matmul(a[None], b.T[None]), (X, Y), 1),
    ("broadcast", lambda M, a: M.broadcast(a, (2,)), (X,), 1),
    ("broadcast_in_dim", lambda M, a: M.broadcast_in_dim(a[:, :1], (2, 3, 4), (1, 2)), (X,), 1),
    ("broadcast_to_rank", lambda M, a: M.broadcast_to_rank(a, 4), (X,), 1),
    ("reshape", lambda M, a: M.reshape(a, (2, 6), (1, 0)), (X,), 1),
    ("squeeze", lambda M, a: M.squeeze(a[None, :, None], (0, 2)), (X,), 1),
    ("expand_dims", lambda M, a: M.expand_dims(a, (0, 2)), (X,), 1),
    ("transpose", lambda M, a: M.transpose(a, (1, 0)), (X,), 1),
    ("rev", lambda M, a: M.rev(a, (0, 1)), (X,), 1),
    ("pad", lambda M, a: M.pad(a, 1.5, [(1, 2, 1), (-1, 0, 2)]), (X,), 1),
    ("pad-zero", lambda M, a: M.pad(a, 0.0, [(0, 0, 1), (2, -1, 0)]), (X,), 1),
    ("slice", lambda M, a: M.slice(a, (0, 1), (3, 4), (2, 2)), (X,), 1),
    ("slice_in_dim", lambda M, a: M.slice_in_dim(a, 1, -1, 1, 1), (X,), 1),
    ("index_in_dim", lambda M, a: M.index_in_dim(a, -1, 1, False), (X,), 1),
    ("dynamic_slice_in_dim", lambda M, a: M.dynamic_slice_in_dim(a, np.int32(1), 2, 1), (X,), 1),
    ("dynamic_index_in_dim", lambda M, a: M.dynamic_index_in_dim(a, np.int32(2), 0, False),
     (X,), 1),
    ("dynamic_update_slice_in_dim", lambda M, a, b: M.dynamic_update_slice_in_dim(
        a, b[:2], np.int32(1), 0), (X, Y), 1),
    ("dynamic_update_index_in_dim", lambda M, a, b: M.dynamic_update_index_in_dim(
        a, b[0], np.int32(2), 0), (X, Y), 1),
    ("concatenate", lambda M, a, b: M.concatenate([a, b], 1), (X, Y), 1),
    ("iota", lambda M: (M.iota(np.int32, 5), M.broadcasted_iota(np.float64, (2, 3), 1)), (), 0),
    ("full", lambda M, a: (M.full((2, 3), 1.5), M.full_like(a, 2, np.int32)), (X,), 0),
    ("split", lambda M, a: M.split(a, (1, 3), 1), (X,), 1),
    ("tile", lambda M, a: M.tile(a, (2, 1)), (X,), 1),
    ("collapse", lambda M, a: M.collapse(a[None], 0, 2), (X,), 1),
    *[(n, (lambda n: lambda M, a: getattr(M, n)(a, (1,)))(n), (X,), 1) for n in
      ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"]],
    *[(n, (lambda n: lambda M, a, b: (getattr(M, n)(a, (0,)), getattr(M, n)(b, (0, 1))))(n),
       (X > 0, INTS), 0) for n in ["reduce_and", "reduce_or", "reduce_xor"]],
    ("reduce-add", lambda M, a: M.reduce(a, 0.0, M.add, (0,)), (X,), 1),
    ("reduce-max", lambda M, a: M.reduce(a, -np.inf, M.max, (0, 1)), (X,), 1),
    ("reduce-body", lambda M, a: M.reduce(a, 0.0, lambda p, q: p + q * 1.0, (1,)), (X,), 1),
    ("reduce-tuple", lambda M, a, b: M.reduce((a, b), (0.0, -np.inf), lambda p, q: (
        p[0] + q[0], M.max(p[1], q[1])), (0,)), (X, Y), 1),
    ("argmax", lambda M, a: (M.argmax(a, 1, np.int32), M.argmin(a, 0, np.int64)), (X,), 0),
    ("sort", lambda M, a: M.sort(a, 0), (X,), 1),
    ("sort-multi", lambda M, a, b: M.sort((a, b), 1), (X, Y), 1),
    ("sort-num_keys", lambda M, a, b: M.sort((np.round(a), b, a), 1, num_keys=2), (X, Y), 0),
    ("sort_key_val", lambda M, a, b: M.sort_key_val(a, b), (X, Y), 1),
    *[(f"{n}-{r}", (lambda n, r: lambda M, a: getattr(M, n)(a, 1, reverse=r))(n, r), (X,), 1)
      for n in ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"] for r in (False, True)],
    ("associative_scan", lambda M, a: M.associative_scan(M.add, a, axis=1),
     (R.standard_normal((3, 7)),), 1),
    ("associative_scan-tree", lambda M, a, b: M.associative_scan(
        lambda p, q: (p[0] * q[0], p[1] * q[0] + q[1]), (a, b), reverse=True),
     (R.standard_normal((6, 2)), R.standard_normal((6, 2))), 1),
    ("map", lambda M, a: M.map(lambda r: r * 2 + 1, a), (X,), 1),
    ("map-batch_size", lambda M, a: M.map(lambda r: (r ** 2).sum(), a, batch_size=2), (X,), 1),
    ("approx_max_k", lambda M, a: M.approx_max_k(a, 2), (X,), 1),
    ("approx_min_k", lambda M, a: M.approx_min_k(a, 2), (X,), 1),
    ("optimization_barrier", lambda M, a: M.optimization_barrier(a) * 2, (X,), 1),
    *[(f"gather-{lbl}-{m}", (lambda dn, ss, m: lambda M, a, i: M.gather(
        a, i, GD(*dn), ss, mode=m))(dn, ss, m), (Z, idx), int(m is not None))
      for lbl, dn, ss, idx in [("rows", ((1, 2), (0,), (0,)), (1, 4, 3), I1),
                               ("axis1", ((0, 2), (1,), (1,)), (5, 1, 3), I1),
                               ("points", ((1,), (0, 1), (0, 1)), (1, 1, 3), I2),
                               ("windows", ((1, 2, 3), (), (0, 1)), (2, 2, 3), I2),
                               ("perm", ((0, 2), (1,), (2, 1)), (3, 1, 2), I2)]
      for m in (None, "clip", "fill")],
    *[(f"{fn}-{lbl}-{m}", (lambda fn, dn, m, us: lambda M, a, i, v: getattr(M, fn)(
        a, i, v[us], SD(*dn), mode=m))(fn, dn, m, us), (Z, idx, U),
      int(fn not in ("scatter", "scatter_mul") and (m is None or fn not in _EXTREME)))
      for fn in ["scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max",
                 "scatter_sub"]
      for lbl, dn, idx, us in [("rows", ((1, 2), (0,), (0,)), I1, np.s_[:, :, :]),
                               ("points", ((1,), (0, 1), (0, 1)), I2, np.s_[:4, 0, :]),
                               ("windows", ((1, 2), (1,), (0, 1)), I2, np.s_[:4, :2, :2])]
      for m in (None, "clip")],
    ("scatter_apply", lambda M, a, i: M.scatter_apply(a, i, lambda q: q * 2 + 1, SD(
        (1, 2), (0,), (0,)), update_shape=(5, 4, 3)), (Z, I1), 0),
    ("stack", lambda M, a, b: (M.stack([a, b], 1), M.unstack(a, 1)), (X, Y), 1),
    ("broadcast_like", lambda M, a: M.broadcast_like(a[0], np.zeros((5, 2, 4))), (X,), 1),
    ("empty", lambda M: M.empty((2, 3), np.float32) * 0, (), 0),
    ("index_take", lambda M, a: M.index_take(a, (np.array([0, 4, -1]), np.array([2, -3, 1])),
                                             (0, 2)), (Z,), 1),
    ("population_count-clz", lambda M, a: (M.population_count(a), M.clz(a),
                                           M.population_count(a.astype(np.int64) * 3),
                                           M.clz(a.astype(np.int64) * 3)),
     (np.array([0, 1, -1, 7, 2**31 - 1, -2**31, 12345], np.int32),), 0),
    ("fft", lambda M, a: (M.fft(a.astype(np.complex128), M.FftType.FFT, (3, 4)),
                          M.fft(a, "RFFT", (4,))), (X,), 0),
    ("conv_general_dilated_patches", lambda M, a: M.conv_general_dilated_patches(
        a.reshape(1, 3, 4, 5), (2, 3), (1, 2), "SAME"), (R.standard_normal(60),), 1),
    # ties and boundaries, where jax's derivative conventions show (halved at max/min ties,
    # shared among equal maxima, zero on clamp's bounds)
    ("max-min-ties", lambda M, a, b: (M.max(a, b), M.min(a, b)), (TIE, TIE2), 1),
    ("reduce_max-ties", lambda M, a: (M.reduce_max(a, (1,)), M.reduce_min(a, (0,)),
                                      M.reduce(a, -np.inf, M.max, (1,))), (TIE,), 1),
    ("clamp-bounds", lambda M, a: M.clamp(-1.0, a, 1.0), (TIE,), 1),
    # derivatives where jax defines them: in-bounds indices for PROMISE_IN_BOUNDS (jax's
    # transpose drops what a clamped read took), unique ones for scatter_mul
    ("gather-points-inbounds", lambda M, a, i: M.gather(a, i, GD((1,), (0, 1), (0, 1)),
                                                        (1, 1, 3)), (Z, I2 % 4), 1),
    ("scatter_mul-unique", lambda M, a, i, v: M.scatter_mul(
        a, i, v[:4, 0, :], SD((1,), (0, 1), (0, 1)), unique_indices=True), (Z, I2 % 4, U), 1),
]
IDS = [c[0] for c in CASES]
assert len(set(IDS)) == len(IDS)


def _leaves(v):
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(v)]


def _same(got, want, rtol=1e-11):
    g, w = _leaves(got), _leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values(case, backend):
    _, f, args, _ = case
    want = f(L, *args)
    got = td.jit(lambda *a: f(T, *a), backend=backend)(*args)
    _same(got, want)


def _float_positions(args):
    return [k for k, a in enumerate(args) if np.asarray(a).dtype.kind == "f"]


def _scalar(M, f, args, pos, w):
    """sum of every float output weighted, a function of the float arguments at pos."""
    def s(*fl):
        full = list(args)
        for k, v in zip(pos, fl):
            full[k] = v
        outs = jax.tree_util.tree_leaves(f(M, *full))
        tot = 0.0
        for o, c in zip(outs, w):
            if np.dtype(o.dtype).kind == "f":
                tot = tot + (o * c).sum()
        return tot
    return s


DIFF = [c for c in CASES if c[3]]


@pytest.mark.parametrize("case", DIFF, ids=[c[0] for c in DIFF])
def test_first_and_second_derivatives(case):
    _, f, args, _ = case
    pos = _float_positions(args)
    outs = jax.tree_util.tree_leaves(f(L, *args))
    w = [np.random.default_rng(1).standard_normal(np.shape(o)) for o in outs]
    fl = [args[k] for k in pos]
    argn = tuple(range(len(pos)))
    v = [np.random.default_rng(2).standard_normal(np.shape(a)) for a in fl]

    def hvp(M, G):
        def h(*a):
            g = G(_scalar(M, f, args, pos, w), argnums=argn)(*a)
            return sum((gi * vi).sum() for gi, vi in zip(g, v))
        return G(h, argnums=argn)

    # jax's gradient and Hessian-vector product, traced and compiled once
    gj, hj = jax_value(lambda *a: (jax.grad(_scalar(L, f, args, pos, w), argnums=argn)(*a),
                                   hvp(L, jax.grad)(*a)), *fl)
    gt = td.jit(td.grad(_scalar(T, f, args, pos, w), argnums=argn))(*fl)
    _same(gt, gj, rtol=1e-9)
    _same(td.jit(hvp(T, td.grad))(*fl), hj, rtol=1e-8)


VMAP = ["add", "atan2", "integer_pow", "clamp", "select_n", "dot_general", "pad", "rev",
        "dynamic_slice_in_dim", "reduce-body", "reduce-tuple", "sort-multi", "cumsum-True",
        "cumlogsumexp-False", "associative_scan", "argmax", "gather-points-None",
        "gather-windows-fill", "scatter_add-points-None", "scatter-windows-clip", "round-away"]


@pytest.mark.parametrize("name", VMAP)
def test_vmap(name):
    _, f, args, _ = {c[0]: c for c in CASES}[name]
    batched = [np.stack([a, a * 0.5 + 0.25]) if np.asarray(a).dtype.kind == "f" else a
               for a in args]
    axes = tuple(0 if np.asarray(a).dtype.kind == "f" else None for a in args)
    want = jax_value(jax.vmap(lambda *a: f(L, *a), in_axes=axes), *batched)
    got = td.jit(td.vmap(lambda *a: f(T, *a), in_axes=axes))(*batched)
    _same(got, want)


# ---- errors and the name walk ----

def test_reduce_recognises_jax_and_operator_monoids():
    import operator

    for comp, init in [(L.add, 0.0), (operator.mul, 1.0), (np.maximum, -np.inf), (L.min, 5.0)]:
        got = td.jit(lambda a, c=comp, i=init: T.reduce(a, i, c, (1,)))(X)
        np.testing.assert_allclose(got, L.reduce(X, init, comp if comp is not np.maximum
                                                 else L.max, (1,)), rtol=1e-13)


def test_bad_input_errors():
    with pytest.raises(NotImplementedError, match="ONE_HOT"):
        td.jit(lambda a, i: T.gather(a, i, GD((1, 2), (0,), (0,)), (1, 4, 3),
                                     mode="one_hot"))(Z, I1)
    with pytest.raises(ValueError, match="offset_dims"):
        td.jit(lambda a, i: T.gather(a, i, GD((1,), (0,), (0,)), (1, 4, 3)))(Z, I1)
    with pytest.raises(TypeError, match="exponent must be a Python int"):
        td.jit(lambda a: T.integer_pow(a, 1.5))(X)
    with pytest.raises(ValueError, match="rounding_method"):
        td.jit(lambda a: T.round(a, 7))(X)
    with pytest.raises(ValueError, match="num_keys"):
        td.jit(lambda a, b: T.sort((a, b), num_keys=3))(X, Y)
    with pytest.raises(ValueError, match="sizes"):
        td.jit(lambda a: T.split(a, (1, 1), 0))(X)


def _jax_names():
    return sorted(n for n in dir(L) if not n.startswith("_"))


def test_every_jax_lax_name_is_served_or_documented_absent():
    doc = (Path(__file__).parents[2] / "docs" / "lax.md").read_text()
    missing = []
    for n in _jax_names():
        if hasattr(T, n):
            continue
        if n.endswith("_p"):
            continue  # the primitive objects, one rule in docs/lax.md
        if n not in ABSENT or not re.search(rf"`{re.escape(n)}`", doc):
            missing.append(n)
    assert not missing, f"jax.lax names neither in td.lax nor documented absent: {missing}"


def test_shape_helpers_and_absent_names_say_why():
    for n, why in ABSENT.items():
        with pytest.raises(AttributeError, match=re.escape(f"td.lax has no {n!r}: {why}")):
            getattr(T, n)
    with pytest.raises(AttributeError, match="jax's primitive objects"):
        T.sort_p  # noqa: B018
    shapes = [((2, 9, 10, 3), (3, 3, 3, 4), ("NHWC", "HWIO", "NHWC")),
              ((2, 3, 9, 10), (4, 3, 3, 3), ("NCHW", "OIHW", "NCHW")),
              ((2, 9, 10, 3), (4, 3, 3, 3), ("NHWC", "OIHW", "NCHW"))]
    for ls, rs, dn in shapes:
        assert T.conv_general_permutations(dn) == L.conv_general_permutations(dn)
        for pad in ("SAME", "VALID", [(1, 2), (0, 1)]):
            for name in ("conv_general_shape_tuple", "conv_transpose_shape_tuple"):
                got = getattr(T, name)(ls, rs, (2, 1), pad, dn)
                assert got == tuple(getattr(L, name)(ls, rs, (2, 1), pad, dn)), (name, dn, pad)
    assert T.conv_shape_tuple((2, 3, 9, 10), (4, 3, 3, 3), (2, 1), "SAME") == \
        tuple(L.conv_shape_tuple((2, 3, 9, 10), (4, 3, 3, 3), (2, 1), "SAME"))
    args = ((5, 7), (2, 3), (1, 2), [(1, 0), (0, 2)], (2, 1), (1, 2))
    assert T.reduce_window_shape_tuple(*args) == tuple(L.reduce_window_shape_tuple(*args))
    assert T.broadcast_shapes((2, 1), (1, 3)) == L.broadcast_shapes((2, 1), (1, 3))
    assert T.padtype_to_pads((5,), (3,), (2,), "SAME") == L.padtype_to_pads((5,), (3,), (2,),
                                                                            "SAME")
    assert T.dtype(np.float32(1)) == L.dtype(np.float32(1))
    served = [n for n in _jax_names() if hasattr(T, n)]
    assert not set(served) & set(ABSENT), "a served name is also listed absent"


FD = ["gather-windows-clip", "scatter_add-points-None", "reduce-body", "reduce-tuple",
      "associative_scan-tree", "cumlogsumexp-True", "clamp-arrays", "integer_pow", "pad",
      "dot_general", "sort-multi", "select_n", "conv_general_dilated_patches"]


@pytest.mark.parametrize("name", FD)
def test_directional_derivative_matches_central_differences(name):
    _, f, args, _ = {c[0]: c for c in CASES}[name]
    pos = _float_positions(args)
    outs = jax.tree_util.tree_leaves(f(L, *args))
    w = [np.random.default_rng(1).standard_normal(np.shape(o)) for o in outs]
    s = _scalar(T, f, args, pos, w)
    fl = [np.asarray(args[k], np.float64) for k in pos]
    v = [np.random.default_rng(3).standard_normal(a.shape) for a in fl]
    g = td.jit(td.grad(s, argnums=tuple(range(len(pos)))))(*fl)
    want = sum(float((gi * vi).sum()) for gi, vi in zip(g, v))
    fs = td.jit(s)
    eps = 1e-6
    plus = fs(*[a + eps * d for a, d in zip(fl, v)])
    minus = fs(*[a - eps * d for a, d in zip(fl, v)])
    np.testing.assert_allclose((plus - minus) / (2 * eps), want, rtol=1e-6, atol=1e-7)
