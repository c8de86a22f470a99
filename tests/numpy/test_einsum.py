"""td.einsum / td.einsum_path and the contractions (tensordot, inner, vdot, outer, kron, trace,
cross) against jax.numpy / numpy in x64: values on both backends, every einsum form (implicit,
ellipsis, diagonals, traces, interleaved), derivatives (grad/jvp/hessian against jax,
check_grads), a 20-operand random tensor network (value equal to numpy's, path cost equal to
opt_einsum's), the greedy fallback, and bad subscripts."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value
from tidu.testing import check_grads

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)
BACKENDS = ("cpu", "xla")
E = sys.modules["tidu.numpy.einsum"]  # (td.einsum is the function)


def rand(rng, shape, dtype="float64"):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def close(got, want, tol=1e-10):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


R = np.random.default_rng(0)
A, B, C = R.standard_normal((3, 4)), R.standard_normal((4, 5)), R.standard_normal((5, 3))
SQ, T3 = R.standard_normal((4, 4)), R.standard_normal((2, 3, 4))
EINSUMS = [
    ("ij,jk->ik", A, B), ("ij,jk,ki->", A, B, C), ("ij,jk", A, B), ("ii->", SQ), ("ii->i", SQ),
    ("ij->ji", A), ("...jk,kl->...jl", T3, B), ("i,i", A[0], A[0]), ("ij,ij->ij", A, A),
    ("iij->j", R.standard_normal((3, 3, 2))), ("ijk->", T3), ("i,j->ij", A[0], B[0]),
    ("bij,bjk->bik", T3, R.standard_normal((2, 4, 3))), ("...ii->...i", R.standard_normal((2, 3, 3))),
    ("ij...,jk...->ik...", R.standard_normal((3, 4, 2)), R.standard_normal((4, 5, 1))),
    ("i j , j k -> k i", A, B), ("ijk,ikj->i", T3[:, :3, :3], T3[:, :3, :3]), ("ij->", A),
    ("abc,cd,dbe->ae", R.standard_normal((2, 3, 4)), R.standard_normal((4, 5)),
     R.standard_normal((5, 3, 2))),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", EINSUMS, ids=[c[0] for c in EINSUMS])
def test_einsum_matches_numpy(backend, case):
    sub, *ops = case
    got = td.jit(lambda *o: td.einsum(sub, *o), backend=backend)(*ops)
    close(got, np.einsum(sub, *ops))


@pytest.mark.parametrize("dtype", ("float32", "complex128", "int32", "int64", "bool"))
def test_einsum_dtypes_match_jax(dtype):
    rng = np.random.default_rng(1)
    if np.dtype(dtype).kind in "ib":
        a = rng.integers(0, 3, (3, 4)).astype(dtype)
        b = rng.integers(0, 3, (4, 2)).astype(dtype)
    else:
        a, b = rand(rng, (3, 4), dtype), rand(rng, (4, 2), dtype)
    got = td.jit(lambda a, b: td.einsum("ij,jk->ik", a, b))(a, b)
    want = jnp.einsum("ij,jk->ik", a, b)
    assert got.dtype == want.dtype
    close(got, want, 1e-5 if dtype == "float32" else 1e-10)


def test_einsum_interleaved_and_optimize_forms():
    want = np.einsum(A, [0, 1], B, [1, 2], [0, 2])
    close(td.jit(lambda a, b: td.einsum(a, [0, 1], b, [1, 2], [0, 2]))(A, B), want)
    close(td.jit(lambda a, b: td.einsum(a, [0, 1], b, [1, 2]))(A, B), want)
    close(td.jit(lambda a, b: td.einsum(a, [Ellipsis, 1], b, [1, 2], [Ellipsis, 2]))(A, B), want)
    for opt in ("greedy", "optimal", True, False, [(1, 2), (0, 1)], ["einsum_path", (0, 1), (0, 1)]):
        close(td.jit(lambda a, b, c: td.einsum("ij,jk,kl->il", a, b, c, optimize=opt))(A, B, C),
              A @ B @ C)


def test_einsum_derivatives_match_jax():
    rng = np.random.default_rng(2)
    a, b, c = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((5, 3))

    def f(m, a):
        return m.einsum("ij,jk,ki->", a, b, c) + m.sum(m.einsum("ii->i", a[:, :3] @ a[:, :3].T) ** 2)

    close(td.grad(lambda a: f(td, a))(a), jax_value(jax.grad(lambda a: f(jnp, a)), a), 1e-9)
    t = np.ones_like(a)
    close(td.jvp(lambda a: f(td, a), (a,), (t,))[1],
          jax_value(lambda a, t: jax.jvp(lambda a: f(jnp, a), (a,), (t,))[1], a, t), 1e-9)
    close(td.hessian(lambda a: f(td, a))(a), jax_value(jax.hessian(lambda a: f(jnp, a)), a), 1e-9)
    check_grads(lambda a: td.einsum("ij,jk->ik", a, b), (a,), order=2)
    z = rand(rng, (3, 3), "complex128")
    check_grads(lambda z: td.einsum("ij,jk,kl->il", z, z, z), (z,), order=2)


# ---- a tensor network of 20 operands ----

def random_network(rng, n_ops=20, n_idx=30, dim=(2, 3), per_op=(2, 4), open_idx=2):
    """A random connected network: every index on two operands (or one, for open indices)."""
    sizes = {k: int(rng.integers(*dim, endpoint=True)) for k in range(n_idx)}
    ops = [[] for _ in range(n_ops)]
    for k in range(n_ops - 1):  # a chain keeps it connected
        ops[k].append(k)
        ops[k + 1].append(k)
    for k in range(n_ops - 1, n_idx):
        p, q = rng.choice(n_ops, 2, replace=False)
        if len(ops[p]) < per_op[1] and len(ops[q]) < per_op[1]:
            ops[p].append(k)
            ops[q].append(k)
    used = sorted({k for o in ops for k in o})
    out = []
    for k in range(open_idx):
        label = 1000 + k
        sizes[label] = 2
        ops[int(rng.integers(n_ops))].append(label)
        out.append(label)
    from opt_einsum import get_symbol

    sym = {k: get_symbol(i) for i, k in enumerate(used + out)}
    eq = ",".join("".join(sym[k] for k in o) for o in ops) + "->" + "".join(sym[k] for k in out)
    arrays = [rng.standard_normal([sizes[k] for k in o]) for o in ops]
    return eq, arrays


def test_twenty_operand_network_matches_numpy_and_opt_einsum():
    oe = pytest.importorskip("opt_einsum")
    eq, arrays = random_network(np.random.default_rng(3))
    got = td.jit(lambda *xs: td.einsum(eq, *xs))(*arrays)
    want = np.einsum(eq, *arrays, optimize=True)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    path, info = td.einsum_path(eq, *arrays, optimize="greedy")
    _, ref = oe.contract_path(eq, *arrays, optimize="greedy")
    assert info.opt_cost == ref.opt_cost
    _, jinfo = jnp.einsum_path(eq, *arrays, optimize="greedy")
    assert info.opt_cost == jinfo.opt_cost
    g = td.grad(lambda x0: td.einsum(eq, x0, *arrays[1:]).sum())(arrays[0])
    jg = jax_value(jax.grad(lambda x0: jnp.einsum(eq, x0, *arrays[1:]).sum()), arrays[0])
    np.testing.assert_allclose(g, jg, rtol=1e-8, atol=1e-8)


def test_greedy_fallback_without_opt_einsum(monkeypatch):
    eq, arrays = random_network(np.random.default_rng(4), n_ops=12, n_idx=18)
    import builtins

    real_import = builtins.__import__

    def no_opt_einsum(name, *args, **kw):
        if name == "opt_einsum":
            raise ImportError("opt_einsum hidden by the test")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_opt_einsum)
    path, info = td.einsum_path(eq, *arrays)
    assert isinstance(info, E.PathInfo) and len(path) == len(arrays) - 1
    got = td.jit(lambda *xs: td.einsum(eq, *xs))(*arrays)
    monkeypatch.setattr(builtins, "__import__", real_import)
    np.testing.assert_allclose(got, np.einsum(eq, *arrays, optimize=True), rtol=1e-9, atol=1e-9)
    _, ref = pytest.importorskip("opt_einsum").contract_path(eq, *arrays, optimize="greedy")
    assert info.opt_cost <= 4 * ref.opt_cost  # the same heuristic: within a small factor


# ---- contractions ----

@pytest.mark.parametrize("backend", BACKENDS)
def test_contractions_match_jax(backend):
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    u, v = rng.standard_normal((4, 3)), rng.standard_normal((2, 4, 3))
    z = rand(rng, (2, 3), "complex128")
    cases = [
        (lambda m: m.cross(x, y)), (lambda m: m.cross(u, v)), (lambda m: m.cross(u[:, :2], y[:2])),
        (lambda m: m.cross(u.T, v, axisa=0, axisc=0)), (lambda m: m.cross(u[:, :2], v)),
        (lambda m: m.inner(u, v)), (lambda m: m.inner(x, 2.0)), (lambda m: m.vdot(z, z)),
        (lambda m: m.outer(u, x)), (lambda m: m.kron(u, v)), (lambda m: m.kron(x, u)),
        (lambda m: m.tensordot(u, v, axes=([0, 1], [1, 2]))), (lambda m: m.tensordot(v, u.T, 1)),
        (lambda m: m.tensordot(x, y, 0)), (lambda m: m.trace(u)), (lambda m: m.trace(v, 1, 1, 2)),
        (lambda m: m.trace(v, -1, 2, 1)), (lambda m: m.trace(u, 7)),
    ]
    for k, f in enumerate(cases):
        got = td.jit(lambda: f(td), backend=backend)()
        want = f(jnp)
        assert np.shape(got) == np.shape(want), k
        close(got, want)


def test_contraction_gradients_match_jax():
    rng = np.random.default_rng(6)
    u, v = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    fs = [lambda m, a: m.sum(m.cross(a, v) ** 2), lambda m, a: m.sum(m.kron(a, v) ** 2),
          lambda m, a: m.trace(a[:3] @ a[:3].T * a[:3, 0]), lambda m, a: m.vdot(a, a * v),
          lambda m, a: m.sum(m.tensordot(a, v, ([0], [0])) ** 3),
          lambda m, a: m.sum(m.outer(a, v) * m.inner(a, v)[0, 0])]
    for f in fs:
        close(td.grad(lambda a: f(td, a))(u), jax_value(jax.grad(lambda a: f(jnp, a)), u), 1e-9)
        close(td.hessian(lambda a: f(td, a))(u), jax_value(jax.hessian(lambda a: f(jnp, a)), u),
              1e-8)


# ---- bad input ----

def test_bad_subscripts_give_clear_errors():
    j = lambda sub, *ops: td.jit(lambda *o: td.einsum(sub, *o))(*ops)  # noqa: E731
    with pytest.raises(ValueError, match="operand 0 has 2 axes but its subscripts name 3"):
        j("ijk->", A)
    with pytest.raises(ValueError, match="index 'j' has size 4 and 3"):
        j("ij,jk->ik", A, A)
    with pytest.raises(ValueError, match="output subscript 'z'"):
        j("ij->z", A)
    with pytest.raises(ValueError, match="2 operand subscripts"):
        j("ij,jk->ik", A)
    with pytest.raises(ValueError, match="repeat"):
        j("ij->ii", A)
    with pytest.raises(ValueError, match="invalid subscript"):
        j("i.j->", A)
    with pytest.raises(ValueError, match="differ in length"):
        td.jit(lambda a: td.tensordot(a, a, ([0], [0, 1])))(A)
    with pytest.raises(ValueError, match="does not match"):
        td.jit(lambda a: td.tensordot(a, a, ([0], [1])))(A)
    with pytest.raises(ValueError, match="vector sizes"):
        td.jit(lambda a: td.cross(a, a))(A)
    with pytest.raises(ValueError, match="at least 2 axes"):
        td.jit(td.trace)(A[0])


@pytest.mark.parametrize("eq,shapes,transposes", [
    ("bi,bj->bij", [(6, 3), (6, 4)], 0),      # the operands taken in the output's order
    ("ij,jk->ki", [(3, 5), (5, 4)], 0),
    ("qhd,khd->hqk", [(7, 2, 3), (5, 2, 3)], 0),
    ("bqhd,bkhd->bhkq", [(2, 7, 3, 4), (2, 5, 3, 4)], 0),
    ("bhqk,bkhd->bqhd", [(2, 3, 5, 6), (2, 6, 3, 4)], 1),  # no operand order avoids it
])
def test_last_contraction_needs_no_transpose_when_an_order_gives_the_output(eq, shapes, transposes):
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(s) for s in shapes]
    f = td.jit(lambda *a: td.einsum(eq, *a), backend="cpu")
    listing = str(f.lower(*xs).program.graph)
    assert listing.count("Transpose(") == transposes
    np.testing.assert_allclose(f(*xs), np.einsum(eq, *xs), rtol=1e-12, atol=1e-12)
