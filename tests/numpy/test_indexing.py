"""Gather/scatter and integer-array indexing against jax.numpy in x64: x[int_array], x[traced_int],
mixes with slices/None/..., x.at[idx].get/set/add/mul/min/max, take, take_along_axis,
dynamic_slice, dynamic_update_slice; values on both backends, grad/jvp/hessian, order-2
check_grads, out-of-range and negative indices, duplicate indices, the seven-step pipeline to third
order, bad input, and the kernels under forged (hostile) indices and attributes."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from tidu import ops as P
from tidu.testing import check_grads
from _support.compare import jax_value
from _support.values import ALL, NUMERIC, one_op_graph

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)
BACKENDS = ("cpu", "xla")
rng = np.random.default_rng(7)


def run(f, *args, backend="cpu"):
    return td.jit(f, backend=backend)(*args)


def close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


X = rng.standard_normal((4, 5, 6))
# (name, index builder): numpy-style index expressions, each also checked against jax
GET = {
    "1d array": lambda: np.array([0, 3, 3, 1]),
    "2d array": lambda: np.array([[0, 1], [3, 2]]),
    "negative": lambda: np.array([-1, -4, 2]),
    "out of range": lambda: np.array([7, -9, 1]),
    "int32": lambda: np.array([1, 2], np.int32),
    "slice then array": lambda: (slice(None), np.array([4, 0, 4])),
    "array, slice, array": lambda: (np.array([0, 2]), slice(1, 4), np.array([5, -1])),
    "adjacent arrays": lambda: (slice(None), np.array([[0], [4]]), np.array([1, 2, 5])),
    "int and array": lambda: (1, slice(None), np.array([0, 5])),
    "ellipsis": lambda: (Ellipsis, np.array([2, 1])),
    "none": lambda: (None, np.array([1, 2]), slice(0, 5, 2)),
    "strided slice": lambda: (slice(1, None, 2), np.array([1, 1])),
    "list": lambda: [0, 2, 2],
    "scalar array": lambda: np.array(2),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(GET))
def test_getitem_matches_jax(name, backend):
    idx = GET[name]()
    jidx = np.asarray(idx) if isinstance(idx, list) else idx  # jax refuses lists; numpy's meaning
    close(run(lambda x: x[idx], X, backend=backend), jnp.asarray(X)[jidx])


@pytest.mark.parametrize("backend", BACKENDS)
def test_traced_indices_match_jax(backend):
    i = np.array([3, -1, 9, 0])
    j = np.int64(-2)
    close(run(lambda x, i: x[i], X, i, backend=backend), jnp.asarray(X)[i])
    close(run(lambda x, j: x[j], X, j, backend=backend), jnp.asarray(X)[j])
    close(run(lambda x, i, j: x[i, :, j], X, i, j, backend=backend), jnp.asarray(X)[i, :, j])
    close(run(lambda x, i: x[:, 1:3, i], X, i, backend=backend), jnp.asarray(X)[:, 1:3, i])


@pytest.mark.parametrize("dtype", ALL)
def test_gather_every_dtype(dtype):
    x = (rng.standard_normal((5, 3)) * 3).astype(dtype)
    i = np.array([4, 0, 0, -2, 11])
    for backend in BACKENDS:
        np.testing.assert_array_equal(run(lambda x: x[i], x, backend=backend), jnp.asarray(x)[i])


UPDATES = ["set", "add", "mul", "min", "max"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", UPDATES)
@pytest.mark.parametrize("index", ["dups", "mixed", "slices", "int", "2d"])
def test_at_updates_match_jax(how, index, backend):
    x = rng.standard_normal((4, 5))
    idx, v = {
        "dups": ((np.array([0, 3, 0, 9, -1]),), rng.standard_normal((5, 5))),
        "mixed": ((slice(1, 4), np.array([4, 4, -5, 7])), rng.standard_normal((3, 4))),
        "slices": ((slice(None, None, 2), slice(1, 3)), 2.5),
        "int": ((2,), rng.standard_normal(5)),
        "2d": ((np.array([[0, 1], [1, 3]]), np.array([2, 2])), rng.standard_normal((2, 2))),
    }[index]
    idx = idx if len(idx) > 1 else idx[0]
    want = getattr(jnp.asarray(x).at[idx], how)(v)
    got = run(lambda x, v: getattr(x.at[idx], how)(v), x, np.asarray(v), backend=backend)
    close(got, want)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_scatter_add_accumulates_duplicates_in_every_dtype(dtype):
    x = np.zeros(4, dtype)
    i = np.array([1, 1, 1, 3, 4, -1])
    v = np.ones(6, dtype)
    for backend in BACKENDS:
        got = run(lambda x, v: x.at[i].add(v), x, v, backend=backend)
        np.testing.assert_array_equal(got, np.asarray(jnp.asarray(x).at[i].add(v)))
    np.testing.assert_array_equal(got, np.array([0, 3, 0, 2], dtype))  # -1 wraps to 3; 4 drops


def test_at_modes_and_get():
    x = np.arange(5.0)
    i = np.array([7, -1, -9, 2])
    for backend in BACKENDS:
        close(run(lambda x: x.at[i].add(10.0, mode="clip"), x, backend=backend),
              jnp.asarray(x).at[i].add(10.0, mode="clip"))
        close(run(lambda x: x.at[i].get(), x, backend=backend), jnp.asarray(x).at[i].get())
        close(run(lambda x: x.at[i].get(mode="fill", fill_value=-3.0), x, backend=backend),
              jnp.asarray(x).at[i].get(mode="fill", fill_value=-3.0))


# int64 indices far beyond 2^53, where a modulo through float64 goes wrong
HUGE = np.array([2**63 - 1, -2**63, -2**62 - 3, 7, -1, 2**53 + 1])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["wrap", "clip"])
@pytest.mark.parametrize("traced", [True, False])
def test_take_wrap_and_clip_of_huge_int64_indices_are_exact(backend, mode, traced):
    """Was: take(mode="wrap") with indices [2**63-1, -2**63, -2**62-3] on 5 elements gave
    [0, 4, 4] (a modulo through float64), not [2, 2, 3]."""
    x = np.arange(5.0) * 10
    want = np.asarray(jnp.take(x, HUGE, mode=mode))
    exact = [int(i) % 5 if mode == "wrap" else min(max(int(i), 0), 4) for i in HUGE]
    np.testing.assert_array_equal(want, x[exact])  # jax (x64) as Python's int arithmetic

    def f(x, i):
        return td.take(x, i if traced else HUGE, mode=mode)

    np.testing.assert_array_equal(run(f, x, HUGE, backend=backend), want)
    m = np.stack([x, -x])
    np.testing.assert_array_equal(
        run(lambda m, i: td.take(m, i, axis=1, mode=mode), m, HUGE, backend=backend),
        np.asarray(jnp.take(m, HUGE, axis=1, mode=mode)))
    # the gradient scatters to the same wrapped or clamped positions
    w = np.arange(HUGE.size, dtype=np.float64)
    got = run(td.grad(lambda x, i: td.sum(td.take(x, i, mode=mode) * w)), x, HUGE,
              backend=backend)
    np.testing.assert_array_equal(
        got, np.asarray(jax.grad(lambda x: jnp.sum(jnp.take(x, HUGE, mode=mode) * w))(x)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_take_along_axis_wrap_is_integer_modulo(backend):
    """take_along_axis(mode="wrap") filled every position with NaN (the mode was not read);
    jax's take_along_axis has no 'wrap': tidu wraps as take does."""
    x = rng.standard_normal((2, 5))
    j = np.stack([HUGE, HUGE[::-1]])
    got = run(lambda x, j: td.take_along_axis(x, j, axis=1, mode="wrap"), x, j, backend=backend)
    np.testing.assert_array_equal(got, np.take_along_axis(x, j % 5, axis=1))
    with pytest.raises(ValueError, match="unknown mode 'bogus'"):
        run(lambda x: td.take_along_axis(x, j, axis=1, mode="bogus"), x)


def test_take_wrap_into_an_empty_axis_is_an_index_error_as_jax():
    with pytest.raises(IndexError, match="non-empty"):
        jnp.take(jnp.zeros(0), np.array([1]), mode="wrap")
    with pytest.raises(IndexError, match="non-empty take from an empty axis"):
        run(lambda x: td.take(x, np.array([1]), mode="wrap"), np.zeros(0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_take_and_take_along_axis_match_jax(backend):
    x = rng.standard_normal((3, 4))
    i = np.array([[0, 5], [-1, 2]])
    for mode in (None, "clip", "fill"):
        close(run(lambda x: td.take(x, i, axis=1, mode=mode), x, backend=backend),
              jnp.take(x, i, axis=1, mode=mode))
        close(run(lambda x: td.take(x, i, mode=mode), x, backend=backend),
              jnp.take(x, i, mode=mode))
    close(run(lambda x: td.take(x, np.array([5, -6, 13]), mode="wrap"), x, backend=backend),
          jnp.take(x, np.array([5, -6, 13]), mode="wrap"))
    j = np.array([[2, 0, 1, 1], [0, 0, 2, 7]])
    for mode in (None, "clip"):
        close(run(lambda x: td.take_along_axis(x, j, axis=0, mode=mode), x, backend=backend),
              jnp.take_along_axis(x, j, axis=0, mode=mode))
    k = np.argsort(x, axis=1)
    close(run(lambda x: td.take_along_axis(x, k, axis=-1), x, backend=backend),
          jnp.take_along_axis(x, k, axis=-1))
    close(run(lambda x: td.take_along_axis(x, k[:1], axis=1), x, backend=backend),
          jnp.take_along_axis(x, k[:1], axis=1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_slices_match_jax_with_clamping(backend):
    x = rng.standard_normal((5, 6))
    u = rng.standard_normal((2, 3))
    for s in [(0, 0), (1, 2), (4, 5), (-1, 2), (-9, 9), (3, -2)]:
        i, j = np.int64(s[0]), np.int32(s[1])
        ji, jj = np.int64(i), np.int64(j)  # jax wants one index dtype; tidu converts
        close(run(lambda x, i, j: td.dynamic_slice(x, (i, j), (2, 3)), x, i, j, backend=backend),
              jax.lax.dynamic_slice(x, (ji, jj), (2, 3)))
        close(run(lambda x, u, i, j: td.dynamic_update_slice(x, u, (i, j)), x, u, i, j,
                  backend=backend),
              jax.lax.dynamic_update_slice(x, u, (ji, jj)))
        close(run(lambda x: td.dynamic_slice(x, s, (2, 3)), x, backend=backend),
              jax.lax.dynamic_slice(x, s, (2, 3)))


# ---- derivatives ----

def _loss_fns(i=np.array([0, 3, 3, -1, 4])):
    j = np.array([1, 1, 4])
    return {
        "getitem": (lambda x: jnp.sum(jnp.sin(x[i]) * x[:, j].sum()), lambda x: td.sum(td.sin(x[i]) * td.sum(x[:, j]))),
        "mixed": (lambda x: jnp.sum(x[j, 1:4] ** 3), lambda x: td.sum(x[j, 1:4] ** 3)),
        "add": (lambda x: jnp.sum(jnp.cos(x.at[i].add(x[1] * x[2]))),
                lambda x: td.sum(td.cos(x.at[i].add(x[1] * x[2])))),
        "set": (lambda x: jnp.sum(jnp.sin(x.at[j].set(x[0] * x[2] ** 2)) * x),
                lambda x: td.sum(td.sin(x.at[j].set(x[0] * x[2] ** 2)) * x)),
        "mul": (lambda x: jnp.sum(jnp.sin(x.at[np.array([0, 2])].mul(x[3] * x[1],
                                                                     unique_indices=True))),
                lambda x: td.sum(td.sin(x.at[np.array([0, 2])].mul(x[3] * x[1])))),
        "max": (lambda x: jnp.sum(x.at[j].max(x[0] * 1.5) ** 2),
                lambda x: td.sum(x.at[j].max(x[0] * 1.5) ** 2)),
        "min": (lambda x: jnp.sum(x.at[i].min(x[2] - 0.5) ** 2),
                lambda x: td.sum(x.at[i].min(x[2] - 0.5) ** 2)),
        "take_along_axis": (lambda x: jnp.sum(jnp.take_along_axis(x, np.argsort(x, 0), 0)[:2] ** 2),
                            None),
        "dynamic": (lambda x: jnp.sum(jax.lax.dynamic_update_slice(
            x, jax.lax.dynamic_slice(x, (1, 2), (2, 2)) ** 2, (3, 3)) ** 2),
            lambda x: td.sum(td.dynamic_update_slice(
                x, td.dynamic_slice(x, (1, 2), (2, 2)) ** 2, (3, 3)) ** 2)),
    }


DERIV = [k for k, (_, t) in _loss_fns().items() if t is not None]


@pytest.mark.parametrize("name", DERIV)
def test_grad_and_hessian_match_jax(name):
    jf, tf = _loss_fns()[name]
    x = rng.standard_normal((5, 5))
    t = rng.standard_normal((5, 5))
    jgrad, jhess, (jy, jdy) = jax_value(
        lambda x, t: (jax.grad(jf)(x), jax.hessian(jf)(x), jax.jvp(jf, (x,), (t,))), x, t)
    for backend in BACKENDS:
        close(run(td.grad(tf), x, backend=backend), jgrad, 1e-10)
        close(run(td.hessian(tf), x, backend=backend), jhess, 1e-9)
    y, dy = td.jvp(tf, (x,), (t,))
    close(y, jy, 1e-10)
    close(dy, jdy, 1e-10)


@pytest.mark.parametrize("name", DERIV)
def test_check_grads_order_two(name):
    """Also with an index past the end: tidu's derivative is that of the clamped read (jax's
    gradient drops such a read instead: its gather transpose assumes in-bounds indices)."""
    _, tf = _loss_fns(np.array([0, 3, 3, -1, 8, -11]))[name]
    check_grads(tf, [rng.standard_normal((5, 5))], order=2)


def test_traced_index_derivatives_and_dynamic_index():
    i = np.array([2, 0, 2])
    f = lambda x, i: td.sum(x[i] * x[i[0]])  # noqa: E731
    g = lambda x, i: jnp.sum(x[i] * x[i[0]])  # noqa: E731
    x = rng.standard_normal(4)
    jgrad, jhess = jax_value(lambda x: (jax.grad(g)(x, i), jax.hessian(g)(x, i)), x)
    close(td.grad(f)(x, i), jgrad)
    close(td.jit(td.hessian(f))(x, i), jhess)


def test_mul_derivative_with_duplicates_and_zeros_has_no_division_by_zero():
    # d/du of x[p] * u[0] * u[1] * u[2] at p = 0, with one or two zero factors
    def f(u):
        return td.sum(td.ones_like(u[:2]).at[np.array([0, 0, 0])].mul(u))

    for u in ([2.0, 3.0, 0.5], [2.0, 0.0, 5.0], [0.0, 0.0, 4.0]):
        u = np.array(u)
        want = np.array([u[1] * u[2], u[0] * u[2], u[0] * u[1]])
        got = td.grad(f)(u)
        assert np.all(np.isfinite(got))
        close(got, want)
    check_grads(f, [np.array([2.0, 0.7, -1.5])], order=2)


def test_integer_outputs_and_indices_are_never_differentiable():
    with pytest.raises(TypeError, match="not differentiable"):
        td.grad(lambda x, i: td.sum(x[i]), argnums=1)(np.ones(3), np.array([0, 1]))
    with pytest.raises(TypeError, match="not differentiable"):
        td.grad(lambda i: td.sum(td.astype(i[np.array([0])], "float64")))(np.array([0, 1]))


def test_seven_step_pipeline_to_third_order():
    i = np.array([0, 2, 2, 1])

    def fn(x, u):
        y = x.at[i].add(u * x[1])
        return td.sum(td.sin(y[np.array([2, 0])]) * td.dynamic_slice(y, (1,), (2,)))

    F0 = td.build(fn, x=td.spec((3,)), u=td.spec((4,)))
    (y,) = F0.outputs
    frags, out = [F0], y
    keys = []
    for _ in range(3):
        L = td.differentiate(td.resolve(frags), outputs=[out], wrt=["x"])
        T = td.transpose(L)
        (ck,) = [k for _, k in T.tangent_inputs]
        keys.append(ck)
        frags = frags + [L.fragment, T.fragment]
        (ct,) = T.tangent_outputs
        out = td.sum(ct) if False else ct
        # reduce to a scalar for the next order: contract with a fixed direction
        b = td.FragmentBuilder(parents=[f for f in frags])
        s = b.add_op(P.ReduceSum((0,)), [td.External(ct)])[0]
        F = b.build([td.Local(s)])
        frags.append(F)
        out = F.outputs[0]
    prog = td.compile(td.materialize_merge(td.resolve(frags), outputs=[out]))
    x, u = rng.standard_normal(3), rng.standard_normal(4)
    feed = {"x": x, "u": u, **{k: 1.0 for k in keys}}
    (got,) = prog(feed)

    def jfn(x):
        y = x.at[i].add(u * x[1])
        return jnp.sum(jnp.sin(y[np.array([2, 0])]) * jax.lax.dynamic_slice(y, (1,), (2,)))

    g = jfn
    for _ in range(3):
        g = (lambda h: lambda x: jnp.sum(jax.grad(h)(x)))(g)
    close(got, jax_value(g, x), 1e-10)


# ---- bad input ----

def test_bad_indices_raise_clear_errors():
    x = np.ones((3, 4))
    with pytest.raises(IndexError, match="boolean mask"):
        td.jit(lambda x: x[np.array([True, False, True])])(x)
    with pytest.raises(IndexError, match="boolean mask"):
        td.jit(lambda x: x[x > 0])(x)
    with pytest.raises(IndexError, match="indices must be integers"):
        td.jit(lambda x: x[np.array([0.5])])(x)
    with pytest.raises(IndexError, match="indices must be integers"):
        td.jit(lambda x: x[x[0, 0]])(x)
    with pytest.raises(IndexError, match="too many indices"):
        td.jit(lambda x: x[np.array([0]), 0, 1])(x)
    with pytest.raises(ValueError, match="cannot scatter updates of shape"):
        td.jit(lambda x: x.at[np.array([0, 1])].set(np.ones(3)))(x)
    with pytest.raises(ValueError, match="unknown index mode"):
        td.jit(lambda x: x.at[np.array([0, 1])].add(1.0, mode="bogus"))(x)
    with pytest.raises(ValueError, match="dynamic_slice: 1 start indices"):
        td.jit(lambda x: td.dynamic_slice(x, (0,), (1, 1)))(x)
    with pytest.raises(ValueError, match="slice sizes"):
        td.jit(lambda x: td.dynamic_slice(x, (0, 0), (4, 1)))(x)
    with pytest.raises(TypeError, match="start index 0 must be a scalar"):
        td.jit(lambda x: td.dynamic_slice(x, (x[0, 0], 0), (1, 1)))(x)
    with pytest.raises(ValueError, match="take: axis 2 is out of bounds"):
        td.jit(lambda x: td.take(x, np.array([0]), axis=2))(x)


# ---- kernels under hostile programs ----

def test_kernels_never_leave_buffers_for_any_index_value():
    """Indices at the integer extremes: gathers clamp, scatters drop, dynamic starts clamp."""
    big = np.array([np.iinfo(np.int64).min, -1, 0, 3, np.iinfo(np.int64).max])
    x = np.arange(4.0)
    A = td.aval
    prog = td.compile(one_op_graph(P.Gather(0), [A((4,), "float64"), A((5,), "int64")]))
    np.testing.assert_array_equal(prog.eval([x, big])[0], [0, 0, 0, 3, 3])
    prog = td.compile(one_op_graph(P.Scatter(0, "add"),
                                   [A((4,), "float64"), A((5,), "int64"), A((5,), "float64")]))
    np.testing.assert_array_equal(prog.eval([x, big, np.ones(5)])[0], [1, 1, 2, 4])
    prog = td.compile(one_op_graph(P.DynamicSlice((2,)), [A((4,), "float64"), A((), "int64")]))
    for s, want in [(np.iinfo(np.int64).min, [0, 1]), (np.iinfo(np.int64).max, [2, 3])]:
        np.testing.assert_array_equal(prog.eval([x, np.int64(s)])[0], want)
    prog = td.compile(one_op_graph(P.DynamicUpdateSlice(),
                                   [A((4,), "float64"), A((3,), "float64"), A((), "int32")]))
    np.testing.assert_array_equal(prog.eval([x, -np.ones(3), np.int32(2 ** 31 - 1)])[0],
                                  [0, -1, -1, -1])


def test_forged_attributes_are_rejected_at_load():
    from _support import forge
    from tidu import _eval

    A = td.aval
    cases = [
        (P.Gather(0), [A((4,), "float64"), A((2,), "int64")], 0, 5, "axis out of range"),
        (P.Gather(0), [A((4,), "float64"), A((2,), "int64")], 0, -1, "axis out of range"),
        (P.Scatter(0, "add"), [A((4,), "float64"), A((2,), "int64"), A((2,), "float64")], 1, 9,
         "scatter mode out of range"),
        (P.Scatter(0, "min"), [A((4,), "float64"), A((2,), "int64"), A((2,), "float64")], 0, 1,
         "axis out of range"),
        (P.DynamicSlice((2,)), [A((4,), "float64"), A((), "int64")], 1, 7, "slice sizes"),
        (P.DynamicSlice((2,)), [A((4,), "float64"), A((), "int64")], 0, 2 ** 62,
         "attribute list out of range"),
    ]
    for op, avals, pos, value, msg in cases:
        prog = td.compile(one_op_graph(op, avals), backend="cpu")
        p = forge.parse(prog.executable.native.to_bytes())
        first, _ = p.instr_attrs(len(p.a["opcode"]) - 1)
        p.a["attrs"][first + pos] = value
        with pytest.raises(ValueError, match=msg):
            _eval.Program(p.to_bytes())


# ---- XLA against the interpreter, single and batched (eval_batch) ----

def _xla_check(op, args, batch=3):
    args = [np.asarray(a) for a in args]
    g = one_op_graph(op, [td.aval(a.shape, a.dtype) for a in args])
    cpu, acc = td.compile(g, backend="cpu"), td.compile(g, backend="xla")
    (want,) = cpu.eval(args)
    np.testing.assert_array_equal(acc.eval(args)[0], want)
    if batch:
        pts = [[(a + k).astype(a.dtype) if a.dtype.kind == "i" else a for a in args]
               for k in range(batch)]  # indices differ per point
        stacked = [np.stack([p[j] for p in pts]) for j in range(len(args))]
        np.testing.assert_array_equal(acc.eval_batch(stacked)[0], cpu.eval_batch(stacked)[0])


@pytest.mark.parametrize("dtype", ALL)
def test_xla_gather_scatter_match_the_interpreter_batched(dtype):
    x = (rng.standard_normal((4, 3, 2)) * 4).astype(dtype)
    i = np.array([[3, -1], [0, 9], [2, 2]])
    _xla_check(P.Gather(1), [x, i])
    modes = ["set"] if dtype == "bool" else ["set", "add", "mul"] + \
        (["min", "max"] if np.dtype(dtype).kind != "c" else [])
    u = (rng.standard_normal((4, 3, 2, 2)) * 4).astype(dtype)
    for m in modes:
        _xla_check(P.Scatter(1, m), [x, i, u])


def test_xla_dynamic_slices_match_the_interpreter():
    x = rng.standard_normal((4, 5))
    _xla_check(P.DynamicSlice((2, 3)), [x, np.int64(3), np.int32(-1)])
    _xla_check(P.DynamicSlice((2,)), [x[0], np.int32(2)])
    _xla_check(P.DynamicUpdateSlice(), [x, np.ones((2, 2)), np.int32(9), np.int64(1)])
    _xla_check(P.DynamicUpdateSlice(), [x[0], np.ones(3), np.int64(-4)])
