"""Debugging callbacks against jax in x64: td.debug.print / td.debug.callback run at evaluation
time with the runtime values (jit, scan/fori/while bodies, cond branches, vmap, grad/jvp) and
print what jax prints, in jax's order; td.pure_callback's values, vmap methods and errors; a
program holding a callback refuses to be saved; a traced value's repr."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)

X = np.array([0.5, -1.25, 2.0])


def printed(capsys, run) -> list[str]:
    """The lines run() prints (jax's callbacks flushed first)."""
    capsys.readouterr()
    run()
    jax.effects_barrier()
    return capsys.readouterr().out.splitlines()


def same_output(capsys, make, *args):
    """make(ns, api, print) built on td and on jax prints the same lines and gives the same
    values; returns the lines."""
    want_val, got_val = [], []
    want = printed(capsys, lambda: want_val.append(make(jnp, jax, jax.debug.print)(*args)))
    got = printed(capsys, lambda: got_val.append(make(td, td, td.debug.print)(*args)))
    assert got == want and got
    for g, w in zip(jax.tree_util.tree_leaves(got_val), jax.tree_util.tree_leaves(want_val)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)
    return got


# ---- debug.print where jax prints ----


def jit_two_prints(ns, api, p):
    def f(x):
        p("x = {}", x)
        y = ns.sin(x)
        p("y = {y}, first {}", y[0], y=y)
        return y * 2

    return api.jit(f)


def scan_steps(ns, api, p):
    def body(c, x):
        p("step c={} x={}", c, x)
        return c + x, c * x

    return api.jit(lambda xs: (api.lax if api is jax else api).scan(body, 0.0, xs))


def fori_and_while(ns, api, p):
    lx = lax if api is jax else td

    def f(x):
        c = lx.fori_loop(0, 3, lambda i, c: (p("i={} c={}", i, c), c * 2.0)[1], x[0])
        return lx.while_loop(lambda c: c < 10.0, lambda c: (p("w {}", c), c + 3.0)[1], c)

    return api.jit(f)


def cond_branches(ns, api, p):
    lx = lax if api is jax else td

    def f(x):
        return lx.cond(x[0] > 0, lambda v: (p("true {}", v), v * 2)[1],
                       lambda v: (p("false {}", v), -v)[1], x)

    return api.jit(f)


def vmapped(ns, api, p):
    return api.vmap(lambda x: (p("v {}", x), x * 3)[1])


def nested_vmap_no_output(ns, api, p):
    inner = api.vmap(lambda x, y: p("{} {}", x, y), in_axes=(0, None))
    return lambda x, y: api.vmap(inner, in_axes=(None, 0))(x, y)


def grad_prints_primal(ns, api, p):
    return api.grad(lambda x: (p("primal {}", x), ns.sum(ns.sin(x) * x))[1])


def jit_grad_prints_primal(ns, api, p):
    return api.jit(grad_prints_primal(ns, api, p))


def jvp_prints_primal(ns, api, p):
    return lambda x: api.jvp(lambda v: (p("primal {}", v), v ** 3)[1], (x,), (ns.ones_like(x),))


@pytest.mark.parametrize("make", [jit_two_prints, scan_steps, fori_and_while, cond_branches,
                                  vmapped, jit_grad_prints_primal, grad_prints_primal,
                                  jvp_prints_primal])
def test_debug_print_matches_jax(capsys, make):
    same_output(capsys, make, X)


def test_cond_takes_the_other_branch(capsys):
    assert same_output(capsys, cond_branches, -X) == [f"false {-X}"]


def test_nested_vmap_prints_each_point_in_jax_order(capsys):
    lines = same_output(capsys, nested_vmap_no_output, X, X[:2])
    assert len(lines) == 6


def test_prints_run_at_every_call_in_program_order(capsys):
    f = jit_two_prints(td, td, td.debug.print)
    lines = printed(capsys, lambda: (f(X), f(X + 1)))
    assert [line.split(" =")[0] for line in lines] == ["x", "y", "x", "y"]
    assert lines[2] == f"x = {X + 1}"


def test_print_outside_any_trace_runs_at_once(capsys):
    assert printed(capsys, lambda: td.debug.print("{a} and {}", 1.5, a=np.arange(2))) == \
        ["[0 1] and 1.5"]


def test_callback_gets_numpy_pytrees_and_its_result_is_ignored():
    seen = []

    def cb(tree, scale):
        seen.append((sorted(tree), type(tree["w"]), tree["w"] * scale))
        return "ignored"

    f = td.jit(lambda p: (td.debug.callback(cb, p, scale=2.0), p["w"] + p["b"])[1])
    out = f({"w": X, "b": 1.0})
    np.testing.assert_allclose(out, X + 1.0)
    assert seen[0][:2] == (["b", "w"], np.ndarray)
    np.testing.assert_allclose(seen[0][2], 2 * X)


def test_an_unused_debug_callback_still_runs_an_unused_pure_one_does_not():
    calls = []

    def f(x):
        td.debug.callback(lambda v: calls.append("debug"), x)
        td.pure_callback(lambda v: (calls.append("pure"), v)[1], td.spec((3,)), x)
        return x * 2

    td.jit(f)(X)
    assert calls == ["debug"]


def test_an_exception_in_a_callback_propagates_and_the_program_runs_again():
    n = []

    def flaky(v):
        n.append(1)
        if len(n) == 1:
            raise ZeroDivisionError("from the callback")

    f = td.jit(lambda x: (td.debug.callback(flaky, x), td.exp(x))[1])
    with pytest.raises(ZeroDivisionError, match="from the callback"):
        f(X)
    np.testing.assert_allclose(f(X), np.exp(X))
    assert len(n) == 2


def test_a_callback_raising_value_error_runs_once_per_call():
    n = []

    def bad(v):
        n.append(1)
        raise ValueError("bad value")

    f = td.jit(lambda x: (td.debug.callback(bad, x), x)[1])
    for k in (1, 2):
        with pytest.raises(ValueError, match="bad value"):
            f(X)
        assert len(n) == k


# ---- pure_callback ----


def test_pure_callback_values_inside_jit_and_grad_of_the_rest():
    f = td.jit(lambda x: td.pure_callback(np.sin, td.spec((3,)), x) * x)
    np.testing.assert_allclose(f(X), np.sin(X) * X)
    g = td.grad(lambda x: td.sum(x * td.pure_callback(np.cos, td.spec((3,)), td.stop_gradient(x))))
    np.testing.assert_allclose(g(X), np.cos(X))


def test_pure_callback_pytree_results():
    def both(x):
        return {"s": np.sin(x), "n": np.int32(x.size)}

    out = td.jit(lambda x: td.pure_callback(
        both, {"s": jax.ShapeDtypeStruct((3,), np.float64), "n": td.spec((), "int32")}, x))(X)
    np.testing.assert_allclose(out["s"], np.sin(X))
    assert out["n"] == 3 and out["n"].dtype == np.int32


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_pure_callback_vmap_methods_call_as_jax_does(method):
    def run(api, spec):
        shapes = []

        def cb(a, b):
            shapes.append((a.shape, b.shape))
            return (a * b + 1.0).astype(np.float64)

        inner = api.vmap(lambda x, y: api.pure_callback(cb, spec, x, y, vmap_method=method),
                         in_axes=(0, None))
        out = api.vmap(inner, in_axes=(None, 0))(X, X[:2])
        return np.asarray(out), shapes

    want, want_shapes = run(jax, jax.ShapeDtypeStruct((), np.float64))
    got, got_shapes = run(td, td.spec(()))
    np.testing.assert_allclose(got, want)
    assert got_shapes == want_shapes


def test_pure_callback_refuses_vmap_without_a_method_and_derivatives():
    f = lambda x: td.pure_callback(np.sin, td.spec(()), x)  # noqa: E731
    with pytest.raises(NotImplementedError, match="vmap_method"):
        td.vmap(f)(X)
    with pytest.raises(ValueError, match="do not support JVP.*td.custom_jvp"):
        td.grad(f)(0.5)
    with pytest.raises(ValueError, match="vmap_method must be one of"):
        td.pure_callback(np.sin, td.spec(()), 0.5, vmap_method="loop")


def test_pure_callback_is_differentiable_inside_a_custom_jvp():
    @td.custom_jvp
    def host_sin(x):
        return td.pure_callback(np.sin, td.spec(x.shape), x)

    @host_sin.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return host_sin(x), td.pure_callback(np.cos, td.spec(x.shape), x) * t

    np.testing.assert_allclose(td.jit(td.grad(lambda x: td.sum(host_sin(x))))(X), np.cos(X))


def test_pure_callback_result_of_the_wrong_shape_or_dtype_names_the_function():
    def wrong(x):
        return x.astype(np.float32)

    f = td.jit(lambda x: td.pure_callback(wrong, td.spec((3,)), x))
    with pytest.raises(RuntimeError, match=r"pure_callback .*wrong: result 0 has shape \(3,\) "
                                           r"and dtype float32, but .* float64"):
        f(X)
    with pytest.raises(TypeError, match="result_shape_dtypes must be a pytree"):
        td.pure_callback(wrong, "f64", X)


# ---- saving, backends, repr ----


def test_a_program_holding_a_callback_refuses_to_be_saved(tmp_path):
    body = lambda c, x: (td.debug.print("x {}", x), (c + x, c))[1]  # noqa: E731
    lowered = td.jit(lambda xs: td.scan(body, 0.0, xs)).lower(X)
    with pytest.raises(ValueError, match=r"calls back into Python \(debug.print\('x \{\}'\)\)"):
        lowered.save(tmp_path / "f.tidu")
    assert not (tmp_path / "f.tidu").exists()
    native = lowered.program.executable.native
    with pytest.raises(ValueError, match="host callback"):  # the C++ writer refuses too
        native.to_bytes()


def test_xla_runs_a_programs_callbacks_between_segments_and_refuses_them_in_loops(capsys):
    def f(x):
        td.debug.print("x {}", x)
        z = td.pure_callback(np.cos, td.spec((3,)), td.sin(x) * 2)
        td.debug.print("z {}", z)
        return z + x

    want = printed(capsys, lambda: td.jit(f, backend="cpu")(X))
    got_val = []
    assert printed(capsys, lambda: got_val.append(td.jit(f, backend="xla")(X))) == want
    np.testing.assert_allclose(got_val[0], np.cos(np.sin(X) * 2) + X)
    body = lambda c, x: (td.debug.print("{}", x), (c + x, c))[1]  # noqa: E731
    with pytest.raises(NotImplementedError, match="inside a loop body or branch.*backend='cpu'"):
        td.jit(lambda xs: td.scan(body, 0.0, xs), backend="xla")(X)
    np.testing.assert_allclose(td.jit(f, backend="auto")(X), got_val[0])


def test_a_traced_value_says_it_is_abstract_and_names_debug_print():
    seen = []
    td.jit(lambda x: (seen.append((repr(x), str(td.sin(x)))), x)[1])(X)
    r, s = seen[0]
    assert r.startswith("Traced<float64[3]> from argument leaf 0: an abstract value")
    assert "td.debug.print" in r and "the result of Sin" in s


def test_eval_batch_calls_back_per_point_in_order_and_raises_the_callbacks_error():
    seen = []
    prog = td.jit(lambda x: (td.debug.callback(lambda v: seen.append(float(v)), x),
                             x * 2)[1]).lower(1.0).program
    np.testing.assert_allclose(prog.eval_batch([np.arange(5.0)], threads=4)[0],
                               2 * np.arange(5.0))
    assert seen == [0.0, 1.0, 2.0, 3.0, 4.0]

    def bad(v):
        raise KeyError("nope")

    prog = td.jit(lambda x: (td.debug.callback(bad, x), x)[1]).lower(1.0).program
    with pytest.raises(KeyError, match="nope"):
        prog.eval_batch([np.arange(5.0)], threads=4)
