"""vmap: every primitive's batching rule against its numpy reference applied per element (every
operand batched or not, both backends), the transform against jax.vmap in x64 (in_axes/out_axes,
pytrees, keywords, nesting, composition with jit/grad/jvp/hessian both ways), per-example
gradients, jacfwd/jacrev on vmap, and the errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tidu as td
from _support import values
from _support.compare import jax_value
from _support.values import ALL, BINARY, FLOATS, INEXACT, INTS, NUMERIC, UNARY, cases
from tidu import ops as P
from tidu.ad.rules import RuleMissing

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

rng = np.random.default_rng(7)
B = 3  # batch size


def value(shape, dtype, positive=False):
    return values.value(rng, shape, dtype, positive)


def close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype,
                                                                  want.shape, want.dtype)
    if want.dtype.kind in "fc":
        tol = 2e-5 if want.dtype in (np.float32, np.complex64) else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


def check_rule(op, args, positive=False, xla=True):
    """vmap of op over every non-empty subset of its operands (batched at axis 0, or at the
    last axis) equals op's numpy reference applied per element, in the interpreter (and on XLA
    with every operand batched)."""
    args = [np.asarray(a) for a in args]
    n = len(args)
    for mask in itertools.product([False, True], repeat=n):
        if not any(mask):
            continue
        batched = [np.stack([a] + [values.value(rng, a.shape, a.dtype, positive)
                                   for _ in range(B - 1)]) if m else a
                   for a, m in zip(args, mask)]
        want = np.stack([np.asarray(op.impl(*[x[i] if m else x for x, m in zip(batched, mask)]))
                         for i in range(B)])
        in_axes = tuple(0 if m else None for m in mask)
        f = td.vmap(lambda *a: td.apply(op, *a), in_axes=in_axes)
        for backend in ("cpu", "xla") if all(mask) and xla else ("cpu",):
            got = td.jit(f, backend=backend)(*batched)
            close(got, want.astype(got.dtype) if want.dtype != got.dtype and
                  want.dtype.kind == got.dtype.kind else want)
    # a mapped axis that is not the leading one
    moved = [np.moveaxis(np.stack([a] * B), 0, -1) if a.ndim else np.stack([a] * B)
             for a in args]
    axes = tuple(-1 if a.ndim else 0 for a in args)
    got = td.vmap(lambda *a: td.apply(op, *a), in_axes=axes)(*moved)
    want = np.stack([np.asarray(op.impl(*args))] * B)
    close(got, want.astype(got.dtype) if want.dtype.kind == got.dtype.kind else want)


def test_primitive_without_rule_raises_naming_it():
    from dataclasses import dataclass
    from tidu.extend import Primitive

    @dataclass(frozen=True)
    class NoBatch(Primitive):
        def abstract_eval(self, x):
            return x

    with pytest.raises(RuleMissing, match="NoBatch has no batching rule"):
        td.vmap(lambda x: td.apply(NoBatch(), x))(np.ones((2, 3)))


# ---- every primitive x dtype ----

@pytest.mark.parametrize("cls,dtype,pos", cases(UNARY),
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_unary(cls, dtype, pos):
    check_rule(cls(), [value((2, 3), dtype, pos)], pos)


@pytest.mark.parametrize("cls,dtype,pos", cases(BINARY),
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_binary(cls, dtype, pos):
    check_rule(cls(), [value((4,), dtype, pos), value((4,), dtype, pos)], pos)


@pytest.mark.parametrize("dtype", FLOATS + INTS + ("bool",))
def test_compare_select_convert(dtype):
    for d in ("EQ", "LT", "GE"):
        check_rule(P.Compare(d), [value((4,), dtype), value((4,), dtype)])
    check_rule(P.Select(), [value((4,), "bool"), value((4,), dtype), value((4,), dtype)])
    check_rule(P.Convert("float64"), [value((2, 2), dtype)])


@pytest.mark.parametrize("dtype", NUMERIC)
def test_reductions(dtype):
    x = value((2, 3, 4), dtype)
    for axes in [(), (0,), (1, 2), (0, 1, 2)]:
        check_rule(P.ReduceSum(axes), [x])
        if np.dtype(dtype).kind != "c":
            check_rule(P.ReduceMax(axes), [x])


@pytest.mark.parametrize("dtype", ALL)
def test_layout_slice_pad_concatenate(dtype):
    x = value((2, 3, 1), dtype)
    check_rule(P.Transpose((2, 0, 1)), [x])
    check_rule(P.Reshape((3, 2)), [x])
    check_rule(P.BroadcastInDim((4, 2, 3, 5), (1, 2, 3)), [x])
    check_rule(P.BroadcastInDim((2, 3), ()), [value((), dtype)])
    y = value((5, 4), dtype)
    check_rule(P.Slice((1, 0), (5, 3), (2, 2)), [y])
    check_rule(P.Pad((1, 0), (2, 1), (1, 0)), [y])
    check_rule(P.Concatenate(1), [y, value((5, 2), dtype), y])


@pytest.mark.parametrize("dtype", NUMERIC)
def test_dot_general(dtype):
    check_rule(P.DotGeneral((1,), (0,)), [value((3, 4), dtype), value((4, 5), dtype)])
    check_rule(P.DotGeneral((2,), (1,), (0,), (0,)), [value((2, 3, 4), dtype),
                                                     value((2, 4, 5), dtype)])
    check_rule(P.DotGeneral((0, 2), (2, 1), (1,), (0,)),
               [value((3, 2, 4), dtype), value((2, 4, 3, 5), dtype)])
    check_rule(P.DotGeneral((), ()), [value((2,), dtype), value((3,), dtype)])


@pytest.mark.parametrize("dtype", INEXACT)
def test_linalg(dtype):
    a = value((3, 3), dtype)
    spd = (a @ np.conj(a.T) + 3 * np.eye(3)).astype(dtype)
    check_rule(P.Cholesky(), [spd])
    tri = (np.tril(a) + 4 * np.eye(3)).astype(dtype)
    check_rule(P.TriangularSolve(True, True, False, False, False), [tri, value((3, 2), dtype)])
    check_rule(P.TriangularSolve(False, True, True, True, False), [tri, value((2, 3), dtype)])


@pytest.mark.parametrize("op,dtype,pos", cases(values.SORT_SCAN), ids=str)
def test_sort_scan(op, dtype, pos):
    n_in = 2 if isinstance(op, P.LinearScan) else 1
    check_rule(op, [value((2, 3, 4), dtype, pos) for _ in range(n_in)], pos)


def test_sort_several_operands():
    check_rule(P.Sort(0, True), [value((5,), "float64"), value((5,), "int32")])


@pytest.mark.parametrize("op,shape,dtypes", values.SHAPE_OPS, ids=str)
def test_shape_ops(op, shape, dtypes):
    for dtype in dtypes:
        check_rule(op, [value(shape, dtype)])


@pytest.mark.parametrize("dtype", ["float64", "int32", "complex64"])
def test_gather_scatter(dtype):
    x = value((4, 3), dtype)
    idx = np.array([3, -1, 0, 7, 2])  # out of range: clamped by Gather, dropped by Scatter
    check_rule(P.Gather(0), [x, idx])
    check_rule(P.Gather(1), [x, np.array([[2, 0], [1, 1]], np.int32)])
    modes = ("set", "add", "mul") + (("min", "max") if dtype != "complex64" else ())
    for mode in modes:
        check_rule(P.Scatter(0, mode), [x, idx, value((5, 3), dtype)])
        check_rule(P.Scatter(1, mode), [x, np.array([0, 2, 2]), value((4, 3), dtype)])
    check_rule(P.DynamicSlice((2, 2)), [x, np.int64(3), np.int64(-1)])
    check_rule(P.DynamicUpdateSlice(), [x, value((2, 1), dtype), np.int32(1), np.int32(5)])


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_factorizations(dtype):
    a = value((3, 3), dtype)
    sym = (a + np.conj(a.T)).astype(dtype)
    check_rule(P.LU(), [a + 3 * np.eye(3, dtype=dtype)], xla=False)
    check_rule(P.Eigh(True), [sym], xla=False)
    check_rule(P.QR(False), [value((4, 3), dtype)], xla=False)
    check_rule(P.SVD(False, True), [value((4, 3), dtype)], xla=False)
    check_rule(P.SVD(True, False), [value((3, 4), dtype)])
    piv = np.array([[2, 2, 2], [1, 1, 2], [0, 2, 2]], np.int32)  # valid LAPACK pivots
    x = np.stack([value((3, 2), dtype) for _ in range(3)])
    for inv in (False, True):
        op = P.LUPermute(inv)
        want = np.stack([op.impl(p, xi) for p, xi in zip(piv, x)])
        close(td.vmap(lambda p, x: td.apply(op, p, x))(piv, x), want)
        close(td.vmap(lambda p, x: td.apply(op, p, x), in_axes=(0, None))(piv, x[0]),
              np.stack([op.impl(p, x[0]) for p in piv]))


def test_control_flow_against_jax():
    lax = jax.lax
    xs, c0 = rng.standard_normal((4, 6, 2)), rng.standard_normal((4, 2))

    def scan_fn(ns, scan):
        def f(c, xs):
            def step(c, x):
                c = ns.tanh(c * 0.9 + x)
                return c, ns.sum(c * x)
            return scan(step, c, xs)
        return f
    got = td.vmap(scan_fn(td, td.scan))(c0, xs)
    want = jax_value(jax.vmap(scan_fn(jnp, lax.scan)), c0, xs)
    close(got[0], want[0]), close(got[1], want[1])
    got = td.vmap(scan_fn(td, td.scan), in_axes=(None, 0))(c0[0], xs)
    want = jax_value(jax.vmap(scan_fn(jnp, lax.scan), in_axes=(None, 0)), c0[0], xs)
    close(got[0], want[0]), close(got[1], want[1])
    # per-example gradient through a scan
    g = td.vmap(td.grad(lambda c, xs: td.sum(scan_fn(td, td.scan)(c, xs)[1])))(c0, xs)
    gj = jax_value(jax.vmap(jax.grad(lambda c, xs: jnp.sum(scan_fn(jnp, lax.scan)(c, xs)[1]))),
                   c0, xs)
    close(g, gj)

    def cond_fn(ns, cond):
        return lambda p, x: cond(p, lambda x: ns.sin(x) * 2, lambda x: ns.cos(x) - 1, x)
    ps = np.array([True, False, True, False])
    close(td.vmap(cond_fn(td, td.cond))(ps, c0),
          jax_value(jax.vmap(cond_fn(jnp, lax.cond)), ps, c0))
    close(td.vmap(cond_fn(td, td.cond), in_axes=(None, 0))(True, c0),
          jax_value(lambda x: jax.vmap(cond_fn(jnp, lax.cond), in_axes=(None, 0))(True, x), c0))
    ks = np.array([0, 2, 1, 5], np.int32)
    sw = lambda ns, switch: (lambda k, x: switch(k, [lambda x: x * 2, lambda x: -x, ns.sin], x))
    close(td.vmap(sw(td, td.switch))(ks, c0), jax_value(jax.vmap(sw(jnp, lax.switch)), ks, c0))

    def while_fn(ns, wl):
        return lambda x: wl(lambda c: c[0] < 10.0, lambda c: (c[0] + c[1], c[1] * 1.5),
                            (ns.abs(x[0]), ns.abs(x[1]) + 0.5))
    got = td.vmap(while_fn(td, td.while_loop))(c0)
    want = jax_value(jax.vmap(while_fn(jnp, lax.while_loop)), c0)
    close(got[0], want[0]), close(got[1], want[1])

    ck = lambda ns, cp: (lambda x: cp(lambda y: ns.sin(y) * y)(x) * 3)
    close(td.vmap(ck(td, td.checkpoint))(c0), jax_value(jax.vmap(ck(jnp, jax.checkpoint)), c0))
    close(td.vmap(td.grad(lambda x: td.sum(ck(td, td.checkpoint)(x))))(c0),
          jax_value(jax.vmap(jax.grad(lambda x: jnp.sum(ck(jnp, jax.checkpoint)(x)))), c0))


# ---- the transform against jax.vmap ----

def both(f_td, f_jx, *args, **kw):
    close(td.vmap(f_td, **kw)(*args), jax_value(jax.vmap(f_jx, **kw), *args))


def test_in_axes_out_axes():
    x, y = rng.standard_normal((4, 3, 5)), rng.standard_normal((3,))
    mk = lambda ns: (lambda x, y: ns.sum(ns.sin(x) * y[:, None], axis=0) + ns.sum(y))
    both(mk(td), mk(jnp), x, y, in_axes=(0, None))
    both(mk(td), mk(jnp), x, y, in_axes=(0, None), out_axes=-1)
    mk2 = lambda ns: (lambda x: ns.tanh(x) @ np.ones((5, 2)))
    both(mk2(td), mk2(jnp), x, in_axes=1)
    both(mk2(td), mk2(jnp), x, in_axes=-3, out_axes=1)


def test_pytrees_and_keywords():
    a, b = rng.standard_normal((3, 2)), rng.standard_normal((2,))
    f = lambda d, s: {"y": d["a"] * s[0], "z": (d["b"], d["a"].sum())}
    axes = ({"a": 0, "b": None}, (None,))
    got = td.vmap(f, in_axes=axes)({"a": a, "b": b}, (b,))
    want = jax.vmap(f, in_axes=axes)({"a": a, "b": b}, (b,))
    close(got["y"], want["y"])
    close(got["z"][0], np.broadcast_to(b, (3, 2)))
    close(got["z"][1], want["z"][1])
    g = lambda x, scale: x * scale
    close(td.vmap(g)(a, scale=np.arange(3.0)[:, None]), a * np.arange(3.0)[:, None])
    close(td.vmap(lambda x: (x, 2.0), out_axes=(0, None))(a)[1], np.asarray(2.0))


def test_unmapped_and_integer_outputs():
    x = rng.standard_normal((4, 3))
    got = td.vmap(lambda x, k: (x.sum() * 0 + k, td.max(x) > 0), in_axes=(0, None))(x, 2.5)
    close(got[0], np.full(4, 2.5))
    close(got[1], x.max(axis=1) > 0)
    i = np.arange(12, dtype=np.int64).reshape(4, 3)
    close(td.vmap(lambda v: v * 2 + 1)(i), i * 2 + 1)


def test_nested_vmap_and_jit():
    x, y = rng.standard_normal((3, 5)), rng.standard_normal((4, 5))
    mk = lambda ns: (lambda u, v: ns.dot(ns.sin(u), v))
    got = td.vmap(td.vmap(mk(td), in_axes=(None, 0)), in_axes=(0, None))(x, y)
    close(got, np.sin(x) @ y.T)
    got = td.jit(td.vmap(td.jit(td.vmap(mk(td), in_axes=(None, 0))), in_axes=(0, None)))(x, y)
    close(got, np.sin(x) @ y.T)
    for backend in ("cpu", "xla"):
        got = td.jit(td.vmap(mk(td), in_axes=(0, None)), backend=backend)(x, y[0])
        close(got, np.sin(x) @ y[0])


def test_compositions_with_ad():
    w, xs = rng.standard_normal((3, 2)), rng.standard_normal((6, 4, 3))
    loss = lambda ns: (lambda w, x: ns.sum(ns.tanh(x @ w) ** 2))
    # vmap of grad / value_and_grad / hessian, grad of vmap, jvp of vmap, vmap of jvp
    close(td.vmap(td.grad(loss(td)), in_axes=(None, 0))(w, xs),
          jax_value(jax.vmap(jax.grad(loss(jnp)), in_axes=(None, 0)), w, xs))
    close(td.vmap(td.value_and_grad(loss(td), argnums=1), in_axes=(None, 0))(w, xs)[1],
          jax_value(jax.vmap(jax.value_and_grad(loss(jnp), argnums=1), in_axes=(None, 0)),
                    w, xs)[1])
    total = lambda ns, vm: (lambda w, xs: ns.sum(vm(loss(ns), in_axes=(None, 0))(w, xs)))
    close(td.grad(total(td, td.vmap))(w, xs), jax_value(jax.grad(total(jnp, jax.vmap)), w, xs))
    close(td.hessian(total(td, td.vmap))(w, xs),
          jax_value(jax.hessian(total(jnp, jax.vmap)), w, xs))
    h = lambda ns: (lambda x: ns.sum(ns.sin(x) ** 3))
    close(td.vmap(td.hessian(h(td)))(xs[:, 0]), jax_value(jax.vmap(jax.hessian(h(jnp))), xs[:, 0]))
    t = rng.standard_normal((6, 3))
    close(td.vmap(lambda x, t: td.jvp(h(td), (x,), (t,))[1])(xs[:, 0], t),
          jax_value(jax.vmap(lambda x, t: jax.jvp(h(jnp), (x,), (t,))[1]), xs[:, 0], t))
    close(td.jvp(td.vmap(h(td)), (xs[:, 0],), (t,))[1],
          jax_value(lambda x, t: jax.jvp(jax.vmap(h(jnp)), (x,), (t,))[1], xs[:, 0], t))
    # vjp inside vmap: batched cotangents
    f = lambda ns: (lambda x: ns.tanh(x) * 2.0)
    cts = rng.standard_normal((5, 3))
    got = td.vmap(lambda c: td.vjp(f(td), xs[0, 0])[1](c)[0])(cts)
    want = jax_value(jax.vmap(lambda c: jax.vjp(f(jnp), xs[0, 0])[1](c)[0]), cts)
    close(got, want)


def test_per_example_gradients_equal_the_loop():
    """Per-example gradients of a small MLP: vmap(grad) against grad per example."""
    params = [rng.standard_normal((4, 8)) * 0.5, np.zeros(8), rng.standard_normal((8, 1)) * 0.5]
    xs, ys = rng.standard_normal((16, 4)), rng.standard_normal((16, 1))

    def loss(p, x, y):
        w1, b1, w2 = p
        return td.sum((td.tanh(x @ w1 + b1) @ w2 - y) ** 2)

    per = td.jit(td.vmap(td.grad(loss), in_axes=(None, 0, 0)))(params, xs, ys)
    g = td.grad(loss)
    for i in range(len(xs)):
        for k in range(3):
            np.testing.assert_allclose(per[k][i], g(params, xs[i], ys[i])[k], rtol=1e-12,
                                       atol=1e-14)


def test_jacobians_are_vmapped_and_do_not_grow():
    f = lambda x: td.tanh(x) * td.sum(x ** 2)
    fj = lambda x: jnp.tanh(x) * jnp.sum(x ** 2)
    sizes = {}
    for n in (5, 50):
        x = rng.standard_normal(n)
        for name, tf, jf in (("fwd", td.jacfwd, jax.jacfwd), ("rev", td.jacrev, jax.jacrev)):
            j = td.jit(tf(f), backend="cpu")
            close(j(x), jax_value(jf(fj), x))
            (prog, *_), = j.cache.values()
            sizes[name, n] = prog.n_instructions
    assert sizes["fwd", 5] == sizes["fwd", 50] and sizes["rev", 5] == sizes["rev", 50], sizes
    x = rng.standard_normal((2, 3))
    close(td.hessian(lambda x: td.sum(td.sin(x) * x[0]))(x),
          jax_value(jax.hessian(lambda x: jnp.sum(jnp.sin(x) * x[0])), x))


# ---- errors ----

def test_errors():
    x = np.ones((3, 2))
    with pytest.raises(ValueError, match="inconsistent sizes"):
        td.vmap(lambda a, b: a + b)(x, np.ones((4, 2)))
    with pytest.raises(ValueError, match="at least one non-None"):
        td.vmap(lambda a: a, in_axes=None)(x)
    close(td.vmap(lambda a: a * 2, in_axes=None, axis_size=2)(np.ones(3)), np.full((2, 3), 2.0))
    with pytest.raises(ValueError, match="out_axes is None"):
        td.vmap(lambda a: a, out_axes=None)(x)
    with pytest.raises(ValueError, match="len\\(in_axes\\)=1, len\\(args\\)=2"):
        td.vmap(lambda a, b: a, in_axes=(0,))(x, x)
    with pytest.raises(ValueError, match="axis 2"):
        td.vmap(lambda a: a, in_axes=2)(x)
    with pytest.raises(ValueError, match="rank"):
        td.vmap(lambda a: a)(np.float64(1.0))
    with pytest.raises(TypeError, match="in_axes"):
        td.vmap(lambda a: a, in_axes="0")
    with pytest.raises(TypeError):  # Python control flow on a mapped value
        td.vmap(lambda a: a if a[0] > 0 else -a)(x)


def test_batching_walk_leaves_differentiate_state_alone():
    # the batching pass walks every primitive, Compare included; differentiate's per-primitive
    # flags (Compare: not differentiable) and its linearize templates must not see that walk
    x = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    td.jit(td.vmap(lambda r: td.where(r > 0.25, r, -r * r)))(x)
    f = lambda x: td.sum(td.where(x > 0.25, x, -0.5 * x) ** 2)  # noqa: E731
    want = np.where(x > 0.25, 2 * x, 0.5 * x)
    np.testing.assert_allclose(td.jit(td.grad(f))(x), want, rtol=1e-13)
    np.testing.assert_allclose(td.jit(td.vmap(td.grad(f)))(x[:, None, :])[:, 0], want, rtol=1e-13)
