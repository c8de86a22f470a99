"""Structured control flow (td.scan, fori_loop, while_loop, cond, switch) against jax.lax in x64:
values on both backends, grad / jvp / hessian (order 2, reverse scans, pytrees of carries,
zero-length scans, nested loops), the seven-step pipeline to third order on a fragment with a
loop, body identity (equal loops are one op), listings, and clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value
from tidu.testing import check_grads

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)
BACKENDS = ("cpu", "xla")


_JAX_REFS: dict = {}


def jax_once(key, fn, *args):
    """jax_value(fn, *args), once per key: a test parametrized by backend computes the same
    reference (same function, same inputs) for both backends, and the second reuses the first."""
    if key not in _JAX_REFS:
        _JAX_REFS[key] = jax_value(fn, *args)
    return _JAX_REFS[key]


def close(got, want, tol=1e-10):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


# ---- functions written once, run with (numpy-like module, lax-like module) ----

def _cat(ns, xs):
    return ns.concatenate([ns.reshape(x, (1,)) for x in xs])


def lorenz(ns, L, steps=20, dt=0.01):
    def f(s, p):
        x, y, z = s[0], s[1], s[2]
        return _cat(ns, [p[0] * (y - x), x * (p[1] - z) - y, x * y - p[2] * z])

    def loss(s0, p):
        def step(s, _):
            k1 = f(s, p)
            k2 = f(s + 0.5 * dt * k1, p)
            k3 = f(s + 0.5 * dt * k2, p)
            k4 = f(s + dt * k3, p)
            s = s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            return s, ns.sum(s * s)
        s, ys = L.scan(step, s0, None, length=steps)
        return ns.sum(s) + 0.01 * ns.sum(ys)
    return loss


S0 = np.array([1.0, 0.5, -0.3])
P0 = np.array([10.0, 28.0, 8.0 / 3.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_lorenz_scan_value_grad_hessian(backend):
    tf, jf = lorenz(td, td), lorenz(jnp, lax)
    val, grad, hess = jax_once("lorenz", lambda s, p: (jf(s, p), jax.grad(jf, argnums=(0, 1))(s, p),
                                                       jax.hessian(jf)(s, p)), S0, P0)
    close(td.jit(tf, backend=backend)(S0, P0), val)
    close(td.jit(td.grad(tf, argnums=(0, 1)), backend=backend)(S0, P0), grad, 1e-9)
    close(td.jit(td.hessian(tf), backend=backend)(S0, P0), hess, 1e-8)


def test_lorenz_jvp_and_finite_differences():
    tf, jf = lorenz(td, td, steps=5), lorenz(jnp, lax, steps=5)
    t = (np.array([0.1, -0.2, 0.3]), np.array([0.5, 0.1, -0.1]))
    got = td.jvp(tf, (S0, P0), t)
    want = jax_value(lambda s, p, ts, tp: jax.jvp(jf, (s, p), (ts, tp)), S0, P0, *t)
    close(got, want, 1e-9)
    check_grads(tf, [S0, P0], order=2)


def pytree_scan(ns, L, reverse=False):
    def loss(a, xs):
        def step(c, x):
            h, (u, v) = c["h"], c["uv"]
            h2 = ns.tanh(a * h + x["w"])
            return {"h": h2, "uv": (u + ns.sum(h2), v * 0.9 + x["b"])}, (h2 * u, x["b"] * v)
        c0 = {"h": ns.zeros_like(xs["w"][0]), "uv": (0.5, 1.0)}
        c, (ys, zs) = L.scan(step, c0, xs, reverse=reverse)
        return ns.sum(c["h"]) + c["uv"][0] * c["uv"][1] + ns.sum(ys * ys) + ns.sum(zs)
    return loss


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_pytree_carries_and_reverse(backend, reverse):
    rng = np.random.default_rng(0)
    a = 0.7
    xs = {"w": rng.standard_normal((6, 3)), "b": rng.standard_normal(6)}
    tf, jf = pytree_scan(td, td, reverse), pytree_scan(jnp, lax, reverse)
    val, grad, hess = jax_once(("pytree", reverse),
                               lambda a, xs: (jf(a, xs), jax.grad(jf, argnums=(0, 1))(a, xs),
                                              jax.hessian(jf)(a, xs)), a, xs)
    close(td.jit(tf, backend=backend)(a, xs), val)
    close(td.jit(td.grad(tf, argnums=(0, 1)), backend=backend)(a, xs), grad, 1e-9)
    close(td.jit(td.hessian(tf), backend=backend)(a, xs), hess, 1e-8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_length_scan(backend):
    def f(L):
        def loss(x, xs):
            c, ys = L.scan(lambda c, x: (c * x, c + x), x, xs)
            return c * 2.0 + ys.sum() if L is lax else c * 2.0 + td.sum(ys)
        return loss
    xs = np.zeros((0,))
    close(td.jit(f(td), backend=backend)(1.5, xs), jax_value(f(lax), 1.5, xs))
    close(td.jit(td.grad(f(td)), backend=backend)(1.5, xs), jax_value(jax.grad(f(lax)), 1.5, xs))


def fori(ns, L):
    def loss(x, w):
        def body(i, c):
            return ns.sin(c * w) + 0.1 * i
        return ns.sum(L.fori_loop(0, 7, body, x))
    return loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_fori_loop_static(backend):
    x, w = np.array([0.3, -0.2]), np.array([1.1, 0.9])
    tf, jf = fori(td, td), fori(jnp, lax)
    val, grad, hess = jax_once("fori", lambda x, w: (jf(x, w), jax.grad(jf, argnums=(0, 1))(x, w),
                                                     jax.hessian(jf)(x, w)), x, w)
    close(td.jit(tf, backend=backend)(x, w), val)
    close(td.jit(td.grad(tf, argnums=(0, 1)), backend=backend)(x, w), grad)
    close(td.jit(td.hessian(tf), backend=backend)(x, w), hess, 1e-9)


def nested(ns, L):
    # a scan inside a scan inside a cond
    def loss(x, w):
        def inner(c, v):
            return c * ns.cos(v * w[0]) + v, c
        def outer(c, row):
            c2, ys = L.scan(inner, c, row)
            return c2 + ns.sum(ys) * w[1], c2
        def yes(x):
            c, ys = L.scan(outer, x[0], ns.reshape(x, (2, 2)))
            return c + ns.sum(ys)
        def no(x):
            return ns.sum(x * x)
        return L.cond(ns.sum(x) > 0, yes, no, x)
    return loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_scan_in_scan_in_cond(backend):
    w = np.array([0.7, 0.3])
    tf, jf = nested(td, td), nested(jnp, lax)
    for x in (np.array([0.5, 0.2, -0.1, 0.3]), np.array([-0.5, 0.2, -0.1, 0.3])):
        val, grad, hess = jax_once(("nested", float(x[0])),
                                   lambda x, w: (jf(x, w), jax.grad(jf, argnums=(0, 1))(x, w),
                                                 jax.hessian(jf)(x, w)), x, w)
        close(td.jit(tf, backend=backend)(x, w), val)
        close(td.jit(td.grad(tf, argnums=(0, 1)), backend=backend)(x, w), grad, 1e-9)
        close(td.jit(td.hessian(tf), backend=backend)(x, w), hess, 1e-8)


def switchy(ns, L):
    def loss(i, x, y):
        branches = [lambda x, y: ns.sin(x) * y, lambda x, y: x * x + y,
                    lambda x, y: ns.exp(x) * ns.cos(y)]
        return ns.sum(L.switch(i, branches, x, y))
    return loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_switch_and_cond(backend):
    x, y = np.array([0.3, -0.4]), np.array([1.2, 0.1])
    tf, jf = switchy(td, td), switchy(jnp, lax)
    for i in (-1, 0, 1, 2, 5):  # i a constant in the jax reference, as it was eagerly
        val, grad, hess = jax_once(
            ("switch", i), lambda x, y: (jf(i, x, y), jax.grad(jf, argnums=(1, 2))(i, x, y),
                                         jax.hessian(jf, argnums=1)(i, x, y)), x, y)
        close(td.jit(tf, backend=backend)(i, x, y), val)
        close(td.jit(td.grad(tf, argnums=(1, 2)), backend=backend)(i, x, y), grad)
        close(td.jit(td.hessian(tf, argnums=1), backend=backend)(i, x, y), hess, 1e-9)
    t = (np.array([0.1, 0.2]), np.array([-0.3, 0.4]))
    close(td.jvp(lambda x, y: tf(1, x, y), (x, y), t),
          jax_value(lambda x, y, tx, ty: jax.jvp(lambda x, y: jf(1, x, y), (x, y), (tx, ty)),
                    x, y, *t))


def newton_sqrt(ns, L):
    def f(a):
        def cond_fun(c):
            return c[1] < 20
        def body_fun(c):
            x, k = c
            return 0.5 * (x + a / x), k + 1
        return L.while_loop(cond_fun, body_fun, (a, 0))[0]
    return f


@pytest.mark.parametrize("backend", BACKENDS)
def test_while_loop_forward_and_jvp(backend):
    tf, jf = newton_sqrt(td, td), newton_sqrt(jnp, lax)
    a = np.array([2.0, 9.0])
    val, jvp, jac = jax_once("while", lambda a: (jf(a), jax.jvp(jf, (a,), (jnp.ones(2),)),
                                                 jax.jacfwd(jf)(a)), a)
    close(td.jit(tf, backend=backend)(a), val)
    close(td.jvp(tf, (a,), (np.ones(2),)), jvp)
    close(td.jit(td.jacfwd(tf), backend=backend)(a), jac)


def test_while_loop_reverse_mode_names_the_alternatives():
    f = newton_sqrt(td, td)
    with pytest.raises(NotImplementedError, match="fori_loop.*scan"):
        td.grad(lambda a: td.sum(f(a)))(np.array([2.0]))


def test_traced_bounds_fori_loop_is_a_while():
    def f(x, n):
        return td.fori_loop(0, n, lambda i, c: c * 2.0, x)
    assert float(td.jit(f)(1.5, 3)) == 12.0


# ---- the graph model ----

def test_equal_loops_are_one_op_and_listing_shows_the_body():
    def g(x):
        a, _ = td.scan(lambda c, _: (td.sin(c) * 2.0, None), x, length=5)
        b, _ = td.scan(lambda c, _: (td.sin(c) * 2.0, None), x, length=5)
        return a + b
    F = td.build(g, x=td.spec((3,)))
    text = str(F)
    assert text.count("Scan(") == 1, text  # hash-consed: the second loop is the first
    assert "body:" in text and "    b" in text and "Sin(" in text
    F2 = td.build(g, x=td.spec((3,)))
    assert F2.outputs == F.outputs


def test_seven_step_pipeline_to_third_order():
    F0 = td.build(lambda x, a: td.sum(td.scan(lambda c, _: (td.sin(a * c), c * c), x,
                                              length=4)[1]), x=td.spec(()), a=td.spec(()))
    (y,) = F0.outputs
    L1 = td.differentiate(td.resolve([F0]), [y], ["x"])
    T1 = td.transpose(L1)
    (ct1,) = [k for _, k in T1.tangent_inputs]
    (g1,) = T1.tangent_outputs
    L2 = td.differentiate(td.resolve([F0, T1]), [g1], ["x"])
    (g2,) = L2.tangent_outputs
    L3 = td.differentiate(td.resolve([F0, T1, L2]), [g2], ["x"])
    (g3,) = L3.tangent_outputs
    (t2,) = [k for _, k in L2.tangent_inputs]
    (t3,) = [k for _, k in L3.tangent_inputs]
    prog = td.compile(td.materialize_merge(td.resolve([F0, T1, L2, L3]), [y, g1, g2, g3]))
    vals = prog({"x": 0.4, "a": 1.3, ct1: 1.0, t2: 1.0, t3: 1.0})

    def jf(x):
        return jnp.sum(lax.scan(lambda c, _: (jnp.sin(1.3 * c), c * c), x, None, length=4)[1])
    want = jax_value(lambda x: [jf(x), jax.grad(jf)(x), jax.grad(jax.grad(jf))(x),
                                jax.grad(jax.grad(jax.grad(jf)))(x)], 0.4)
    close(vals, want, 1e-9)


def test_saved_values_and_program_cache():
    tf = lorenz(td, td, steps=10)
    g = td.jit(td.grad(tf))
    g(S0, P0)
    n = len(td.program_cache)
    td.jit(td.grad(lorenz(td, td, steps=10)))(S0, P0)  # an equal loop: the cached program
    assert len(td.program_cache) == n


def test_trace_size_does_not_grow_with_steps():
    sizes = [td.build(lambda s, p: lorenz(td, td, steps=n)(s, p), s=td.spec((3,)),
                      p=td.spec((3,))).n_ops for n in (10, 10000)]
    assert sizes[0] == sizes[1]


# ---- bad input ----

def test_errors_name_the_problem():
    with pytest.raises(TypeError, match="carry"):
        td.jit(lambda x: td.scan(lambda c, _: (td.reshape(c, (1,)), None), x, length=2)[0])(1.0)
    with pytest.raises(ValueError, match="disagree"):
        td.jit(lambda x: td.scan(lambda c, x: (c, x), 0.0, x, length=3)[0])(np.zeros(2))
    with pytest.raises(TypeError, match="same structure"):
        td.jit(lambda x: td.cond(x > 0, lambda x: x, lambda x: (x, x), x))(1.0)
    with pytest.raises(TypeError, match="boolean"):
        td.jit(lambda x: td.while_loop(lambda c: c, lambda c: c, x))(1.0)
    with pytest.raises(TypeError, match="pair"):
        td.jit(lambda x: td.scan(lambda c, _: c, x, length=2))(1.0)


def _loop_program():
    """A gradient through every construct (values.loops: nested programs two deep, reverse
    scans), compiled for the interpreter."""
    from _support.values import loops as f

    F = td.build(f, x=td.spec((3,)), w=td.spec((3,)))
    D = td.transpose(td.differentiate(td.resolve([F]), F.outputs, ["x"]))
    g = td.materialize_merge(td.resolve([F, D]), F.outputs + D.tangent_outputs)
    return td.compile(g, backend="cpu"), f


def test_loop_programs_run_in_cpp_and_save_and_load(tmp_path):
    """A program holding loops is one C++ program (the loops are instructions over nested
    programs); it saves to a .tidu file and loads with its nested programs."""
    from tidu import _eval

    prog, f = _loop_program()
    native = prog.executable.native
    assert native is not None
    x, w = np.array([0.4, -0.2, 0.3]), np.array([0.9, 1.1, 0.7])
    inputs = [{"x": x, "w": w}.get(k, np.ones(())) for k in prog.inputs]
    got = prog.eval(inputs)
    want = prog.executable.run_python([np.asarray(v) for v in inputs])  # op by op, Python impls
    close(got, want, 1e-12)
    tf = td.value_and_grad(f)(x, w)
    close([got[0], got[1]], tf, 1e-12)
    path = tmp_path / "loops.tidu"
    prog.save(path)
    loaded = td.load(path)
    close(loaded.eval(inputs), got, 0)
    # version 2 files; the same bytes round-trip through the C++ reader and writer
    data = path.read_bytes()
    assert int.from_bytes(data[8:12], "little") == 2
    assert _eval.Program(data).to_bytes() == data


def test_loop_instruction_validation_names_the_problem():
    """Attributes of a control-flow instruction that disagree with its nested program are
    rejected when the program is built (tests/_support/forge.py fuzzes them further)."""
    from _support import forge
    from tidu import _eval

    prog, _ = _loop_program()
    p = forge.parse(prog.executable.native.to_bytes())
    scan = [i for i, o in enumerate(p.a["opcode"]) if forge.OPCODES[o] == "Scan"][0]
    b, _ = p.instr_attrs(scan)
    for pos, value, msg in [(0, 99, "nested program out of range"), (1, 5, "length"),
                            (1, -1, "bad length"), (3, 9, "out of range"),
                            (6, 40, "take index out of range")]:
        q = p.copy()
        q.a["attrs"][b + pos] = value
        with pytest.raises(ValueError, match=msg):
            _eval.Program(q.to_bytes())
    q = p.copy()
    q.subs = []
    with pytest.raises(ValueError, match="nested program out of range"):
        _eval.Program(q.to_bytes())


def test_version_1_files_still_load():
    """Files written before nested programs (version 1: one output slot per instruction) load."""
    import struct

    from _support import forge
    from tidu import _eval

    F = td.build(lambda x: td.sin(x) * 2.0, x=td.spec((3,)))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    p = forge.parse(prog.executable.native.to_bytes())
    out = bytearray()
    for name, dt in forge.FIELDS:
        v = p.a["out_slots"] if name == "out_off" else p.a[name]
        if name == "out_slots":
            continue
        v = np.ascontiguousarray(v, dtype=dt)
        out += struct.pack("<Q", v.size) + v.tobytes()
    for names in (p.input_names, p.output_names):
        out += struct.pack("<Q", len(names)) + b"".join(struct.pack("<I", len(s)) + s
                                                         for s in names)
    v1 = forge.MAGIC + struct.pack("<IIQQ", 1, 0, len(out), forge.fnv1a(bytes(out))) + bytes(out)
    x = np.array([0.1, 0.2, 0.3])
    close(_eval.Program(v1).run([x]), prog.eval([x]), 0)


def test_eager_calls_outside_a_trace():
    c, ys = td.scan(lambda c, x: (c + x, c * x), 1.0, np.arange(4.0))
    jc, jys = lax.scan(lambda c, x: (c + x, c * x), 1.0, jnp.arange(4.0))
    close([c, ys], [jc, jys])
    assert float(td.cond(True, lambda x: x + 1, lambda x: x - 1, 2.0)) == 3.0


# ---- checkpoint ----

def deep(ns, ck, layers=4):
    def layer(h, w):
        a = ns.tanh(h * w)
        b = ns.sin(a * h) + ns.exp(-a * a)
        return ns.tanh(b * w + h)

    f = ck(layer)

    def loss(ws, x):
        h = x
        for i in range(layers):
            h = f(h, ws[i])
        return ns.sum(h * h)
    return loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_same_gradient_less_saved(backend):
    rng = np.random.default_rng(3)
    ws, x = rng.standard_normal((4, 5)), rng.standard_normal(5)
    plain, ck = deep(td, lambda f: f), deep(td, td.checkpoint)
    jf = deep(jnp, jax.checkpoint)
    grad, hess = jax_once("checkpoint", lambda ws, x: (jax.grad(jf, argnums=(0, 1))(ws, x),
                                                       jax.hessian(jf)(ws, x)), ws, x)
    close(td.jit(td.grad(ck, argnums=(0, 1)), backend=backend)(ws, x), grad)
    close(td.jit(td.hessian(ck), backend=backend)(ws, x), hess, 1e-9)
    close(td.jit(td.grad(ck), backend=backend)(ws, x), td.jit(td.grad(plain))(ws, x))

    def saved(fn):
        F = td.build(fn, ws=td.spec(ws.shape), x=td.spec(x.shape))
        T = td.transpose(td.differentiate(td.resolve([F]), F.outputs, ["ws", "x"]))
        prog = td.compile(td.materialize_merge(td.resolve([F, T]), T.tangent_outputs),
                          backend="cpu")
        return prog.memory_report()["saved_bytes"], sum(v.nbytes for v in td.saved_values(T))
    (p_mem, p_sv), (c_mem, c_sv) = saved(plain), saved(ck)
    assert c_mem < p_mem and c_sv < p_sv, (p_mem, c_mem, p_sv, c_sv)


def test_a_checkpoint_policy_that_is_not_callable_is_refused():
    with pytest.raises(TypeError, match="policy must be callable"):
        td.checkpoint(lambda x: x, policy=object())


@pytest.mark.parametrize("backend", BACKENDS)
def test_eval_batch_over_a_loop_program(backend):
    F = td.build(lambda x, w: td.scan(lambda c, v: (td.sin(c * w) + v, c * c), x, w * 0.5 +
                                      td.zeros_like(w))[0], x=td.spec((3,)), w=td.spec((3,)))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    rng = np.random.default_rng(1)
    xs, ws = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    want = np.stack([prog.eval([x, w])[0] for x, w in zip(xs, ws)])
    (got,) = prog.eval_batch([xs, ws], backend=backend, threads=2)
    close(got, want)


def test_while_and_cond_batch_on_the_interpreter():
    F = td.build(newton_sqrt(td, td), a=td.spec((2,)))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    a = np.array([[2.0, 9.0], [4.0, 0.25], [1.0, 100.0]])
    (got,) = prog.eval_batch([a], backend="cpu")
    close(got, np.sqrt(a))


def test_body_loop_runs_in_cpp_and_matches_the_reference():
    from tidu.ops.control_flow import Scan

    F = td.build(lambda x: td.scan(lambda c, v: (c * 0.5 + v, td.sum(c)), x,
                                   td.reshape(td.iota((12,), "float64"), (4, 3)),
                                   reverse=True), x=td.spec((3,)))
    (op, _, _, _), = [o for o in F.ops() if isinstance(o[0], Scan)]
    assert op.body.native() is not None
    x = np.array([1.0, 2.0, 3.0])
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    assert prog.executable.native is not None  # the whole program, loop included, in C++
    close(prog.eval([x]), op.impl(x, np.arange(12.0).reshape(4, 3)))
    c, ys = op.impl(x, np.arange(12.0).reshape(4, 3))  # the Python reference loop
    jc, jys = lax.scan(lambda c, v: (c * 0.5 + v, jnp.sum(c)), x, jnp.arange(12.0).reshape(4, 3),
                       reverse=True)
    close([c, ys], [jc, jys])
