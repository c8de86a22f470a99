"""td.jit(..., in_shardings=, out_shardings=) on XLA: a data-parallel gradient over a batch
sharded on a Mesh of 4 forced host devices (a subprocess) is all-reduced on the devices and
equals one device; jax Arrays stay on their devices; clear errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")


def _run_4_devices(code: str) -> str:
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu")
    env.pop("JAX_ENABLE_X64", None)
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
    return res.stdout


def test_data_parallel_training_step_all_reduces_and_equals_one_device():
    out = _run_4_devices("""
        import numpy as np, jax, tidu as td
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        assert len(jax.devices()) == 4
        mesh = Mesh(np.array(jax.devices()), ("batch",))
        rep, bat = NamedSharding(mesh, P()), NamedSharding(mesh, P("batch"))

        def loss(w1, w2, x, y):
            return td.mean((td.tanh(x @ w1) @ w2 - y) ** 2)

        def step(w1, w2, x, y):
            g1, g2 = td.grad(loss, argnums=(0, 1))(w1, w2, x, y)
            return w1 - 0.1 * g1, w2 - 0.1 * g2

        r = np.random.default_rng(0)
        w1, w2 = r.standard_normal((3, 8)), r.standard_normal((8, 2))
        x, y = r.standard_normal((16, 3)), r.standard_normal((16, 2))
        one = td.jit(step, backend="cpu")
        dp = td.jit(step, backend="xla", in_shardings=(rep, rep, bat, bat), out_shardings=rep)
        a, b = w1, w2
        for _ in range(3):  # numpy in, numpy out
            a, b = dp(a, b, x, y)
            w1, w2 = one(w1, w2, x, y)
            assert type(a) is np.ndarray
        np.testing.assert_allclose(a, w1, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b, w2, rtol=1e-12, atol=1e-12)

        with jax.enable_x64(True):  # jax Arrays in: they stay put, jax Arrays out
            args = [jax.device_put(v, s) for v, s in ((a, rep), (b, rep), (x, bat), (y, bat))]
        c, d = dp(*args)
        assert isinstance(c, jax.Array) and c.sharding.is_equivalent_to(rep, c.ndim)
        assert len(c.sharding.device_set) == 4
        np.testing.assert_allclose(np.asarray(c), one(a, b, x, y)[0], rtol=1e-12, atol=1e-12)

        ((prog, *_),) = dp.cache.values()
        (runner,) = prog.executable._xla.values()
        by_slot = {int(s): args[k[1]] for s, k in zip(prog.executable.input_slots, prog.inputs)}
        ins = [by_slot[k] for k in runner.segments[0].in_keys]
        with jax.enable_x64(True):
            hlo = runner.calls[0].lower(*ins).compile().as_text()
        print("all-reduce" in hlo, len(runner.calls))
    """)
    assert out.split() == ["True", "1"]


def test_shardings_refused_with_the_interpreter_and_a_wrong_count():
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    rep = NamedSharding(Mesh(np.array(jax.devices()[:1]), ("b",)), P())
    with pytest.raises(ValueError, match="need backend='xla'"):
        td.jit(lambda x: x, backend="cpu", in_shardings=rep)
    f = td.jit(lambda x, y: x * y, backend="xla", in_shardings=(rep,))
    with pytest.raises(ValueError, match="in_shardings: 1 entries for 2 positional arguments"):
        f(np.ones(2), np.ones(2))
    g = td.jit(lambda x, y: td.sin(x) * y, in_shardings=rep, out_shardings=rep)  # one device
    with jax.enable_x64(True):
        xs = jax.device_put(np.linspace(0, 1, 4), rep)
    got = g(xs, xs)
    assert isinstance(got, jax.Array)
    np.testing.assert_allclose(np.asarray(got), np.sin(np.linspace(0, 1, 4)) *
                               np.linspace(0, 1, 4), rtol=1e-15)
    ((prog, *_),) = g.cache.values()
    with pytest.raises(ValueError, match=r"input 1 .*expected float64\[4\], got the jax Array "
                                         r"float32\[3\]"):
        prog.eval([xs, jax.device_put(np.ones(3, np.float32), rep)])


def test_jax_arrays_stay_on_device_without_shardings():
    f = td.jit(lambda x: td.exp(x) + 1.0, backend="xla")
    with jax.enable_x64(True):
        x = jax.device_put(np.linspace(0, 1, 5))
    y = f(x)
    assert isinstance(y, jax.Array) and y.dtype == np.float64
    np.testing.assert_allclose(np.asarray(y), np.exp(np.linspace(0, 1, 5)) + 1, rtol=1e-15)
    assert type(f(np.linspace(0, 1, 5))) is np.ndarray  # numpy in, numpy out


def test_eval_batch_takes_jax_arrays_on_their_devices():
    out = _run_4_devices("""
        import numpy as np, jax, tidu as td
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        mesh = Mesh(np.array(jax.devices()), ("batch",))
        bat, rep = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
        F = td.build(lambda t, w: td.sum(td.tanh(t * w)), t=td.spec((), "float64"),
                     w=td.spec((5,), "float64"))
        prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="xla")
        ts, w = np.linspace(-1, 1, 12), np.linspace(0.5, 2, 5)
        want = np.tanh(ts[:, None] * w).sum(1)
        args = [ts if k == "t" else w for k in prog.inputs]
        axes = [0 if k == "t" else None for k in prog.inputs]
        with jax.enable_x64(True):
            on = [jax.device_put(ts, bat) if k == "t" else jax.device_put(w, rep)
                  for k in prog.inputs]
            elsewhere = [jax.device_put(a, jax.devices()[3]) for a in args]  # moved, not copied
        for inputs in (on, elsewhere, [on[0] if k == "t" else w for k in prog.inputs]):
            (got,) = prog.eval_batch(inputs, backend="xla", devices=mesh, in_axes=axes)
            assert isinstance(got, jax.Array) and got.sharding.is_equivalent_to(bat, 1)
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-14)
        (one,) = prog.eval_batch(on, backend="xla", in_axes=axes)  # one device
        assert isinstance(one, jax.Array)
        np.testing.assert_allclose(np.asarray(one), want, rtol=1e-14)
        (num,) = prog.eval_batch(args, backend="xla", devices=mesh, in_axes=axes)
        assert type(num) is np.ndarray  # numpy in, numpy out, as before
        with jax.enable_x64(True):
            ten = [jax.device_put(ts[:10]) if k == "t" else w for k in prog.inputs]
            bad = [jax.device_put(ts[:, None]) if k == "t" else w for k in prog.inputs]
        try:
            prog.eval_batch(ten, backend="xla", devices=mesh, in_axes=axes)
        except ValueError as e:
            print("a batch of 10 points in jax Arrays over 4 devices" in str(e))
        try:
            prog.eval_batch(bad, backend="xla", in_axes=axes)
        except ValueError as e:
            print("expected float64[12] (the batch axis leading), got the jax Array" in str(e))
    """)
    assert out.split() == ["True", "True"]
