"""tidu's XLA path after ``jax.distributed.initialize``: two processes on 127.0.0.1, each with
two forced host CPU devices, run a data-parallel gradient sharded over all four devices, an
eval_batch over them (numpy, and jax Arrays of which each process made only its part) and a
td.shard_map with a psum across them, and get what one process computes; a host callback over
the four devices is refused by name; the default device is each process's own.  The single-process test runs the same code paths with process_count 1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tidu as td
from tidu.backends import xla

jax = pytest.importorskip("jax")

WORKER = textwrap.dedent("""
    import sys
    import jax
    pid, port, out, computation = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid,
                               initialization_timeout=40)
    import numpy as np, tidu as td
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from tidu.backends import xla
    assert jax.process_count() == 2 and len(jax.devices()) == 4
    assert len(jax.local_devices()) == 2

    # the default device is this process's own (jax.devices()[0] is process 0's everywhere)
    assert xla.resolve_device(None) == jax.local_devices()[0]
    assert xla.resolve_device("cpu") == jax.local_devices()[0]
    local = td.jit(lambda x: td.sin(x) * 2.0, backend="xla")(np.linspace(0, 1, 3) + pid)

    exec(computation)  # the computation, shared with the single-process reference
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    rep, bat = NamedSharding(mesh, P()), NamedSharding(mesh, P("batch"))
    dp = td.jit(td.grad(loss), backend="xla", in_shardings=(rep, bat, bat), out_shardings=rep)
    g = dp(w, x, y)  # numpy in (the global value, the same in every process), numpy out
    assert type(g) is np.ndarray

    # process-local data made global by the user: a jax Array in, a jax Array out
    half = x.shape[0] // 2
    with jax.enable_x64(True):
        xs = jax.make_array_from_process_local_data(bat, x[pid * half:(pid + 1) * half])
        ys = jax.make_array_from_process_local_data(bat, y[pid * half:(pid + 1) * half])
    ga = dp(w, xs, ys)
    assert isinstance(ga, jax.Array) and not ga.is_fully_addressable and ga.is_fully_replicated

    gn = td.jit(td.grad(normalised), backend="xla", in_shardings=(rep, bat),
                out_shardings=rep)(w, x)

    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="xla")
    b_mesh = prog.eval_batch(batch_inputs, backend="xla", devices=mesh)  # sharded: gathered
    b_four = prog.eval_batch(one_shared, backend="xla", devices=4, in_axes=[0, None])

    # eval_batch over jax Arrays: each process passes only its part of the batch, and gets a
    # jax Array over both processes' devices back (no host round trip, nothing gathered)
    with jax.enable_x64(True):
        t_local = jax.make_array_from_process_local_data(
            bat, batch_inputs[0][:8][pid * 4:(pid + 1) * 4])
    (bl,) = prog.eval_batch([t_local, batch_inputs[1][0]], backend="xla", devices=mesh,
                            in_axes=[0, None])
    assert isinstance(bl, jax.Array) and not bl.is_fully_addressable and bl.shape == (8, 2)
    from jax.experimental import multihost_utils
    b_local = np.asarray(multihost_utils.process_allgather(bl, tiled=True))

    # td.shard_map over every process's devices: the psum is a cross-process all-reduce
    sm = td.jit(td.shard_map(lambda x, w: td.lax.psum(td.sum(td.tanh(x @ w), 0), "batch"),
                             mesh, (P("batch"), P()), P()), backend="xla")(x, w)

    # a host callback in a program over a Mesh spanning the processes: a clear refusal
    def noisy(x):
        td.debug.print("x = {}", x)
        return x * 2.0
    try:
        td.jit(noisy, backend="xla", in_shardings=bat, out_shardings=bat)(x)
        raise AssertionError("a host callback over two processes was not refused")
    except NotImplementedError as e:
        assert "spans 2 processes" in str(e), e

    np.savez(out, local=local, g=g, gn=gn, ga=np.asarray(ga.addressable_data(0)), b_mesh=b_mesh[0],
             b_four=b_four[0], b_local=b_local, sm=sm)
""")

COMPUTATION = textwrap.dedent("""
    import numpy as np, tidu as td
    r = np.random.default_rng(7)
    w, x, y = r.standard_normal((3, 2)), r.standard_normal((8, 3)), r.standard_normal((8, 2))
    loss = lambda w, x, y: td.mean((td.tanh(x @ w) - y) ** 2)

    def normalised(w, x):  # a named batch axis: batch statistics over every process's rows
        def one(w, row):
            h = td.tanh(row @ w)
            mu = td.lax.pmean(h, "batch")
            var = td.lax.pmean((h - mu) ** 2, "batch")
            return td.sum((h - mu) / td.sqrt(var + 1e-6) * row[:2])
        return td.mean(td.vmap(one, in_axes=(None, 0), axis_name="batch")(w, x))
    F = td.build(lambda t, a: td.exp(a * td.sin(t)), t=td.spec((2,), "float64"),
                 a=td.spec((2,), "float64"))
    batch_inputs = [r.standard_normal((10, 2)), r.standard_normal((10, 2))]
    one_shared = [batch_inputs[0], batch_inputs[1][0]]  # with in_axes=[0, None]
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _reference() -> dict:
    ns: dict = {}
    exec(COMPUTATION, ns)  # noqa: S102 - the workers' own computation, run here in one process
    prog = td.compile(td.materialize_merge(td.resolve([ns["F"]]), ns["F"].outputs),
                      backend="cpu")
    return {
        "g": td.jit(td.grad(ns["loss"]), backend="cpu")(ns["w"], ns["x"], ns["y"]),
        "gn": td.jit(td.grad(ns["normalised"]), backend="cpu")(ns["w"], ns["x"]),
        "b_mesh": prog.eval_batch(ns["batch_inputs"])[0],
        "b_four": prog.eval_batch(ns["one_shared"], in_axes=[0, None])[0],
        "b_local": prog.eval_batch([ns["batch_inputs"][0][:8], ns["batch_inputs"][1][0]],
                                   in_axes=[0, None])[0],
        "sm": np.tanh(ns["x"] @ ns["w"]).sum(0),
    }


def test_two_processes_data_parallel_gradient_and_eval_batch_equal_one_process(tmp_path):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               JAX_PLATFORMS="cpu")
    env.pop("JAX_ENABLE_X64", None)
    port = _free_port()
    logs = [tmp_path / f"log{pid}.txt" for pid in (0, 1)]
    procs = []
    deadline = time.monotonic() + 60
    try:
        for pid, log in enumerate(logs):  # output to files: no pipe fills while we wait
            with open(log, "w") as f:
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", WORKER, str(pid), str(port),
                     str(tmp_path / f"out{pid}.npz"), COMPUTATION],
                    stdout=f, stderr=subprocess.STDOUT, env=env))
        for p in procs:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.fail("the two jax.distributed processes did not finish within 60 s:\n"
                    + "\n".join(log.read_text()[-2000:] for log in logs))
    finally:
        for p in procs:  # killed on a failure or a timeout
            if p.poll() is None:
                p.kill()
                p.wait()
    for pid, (p, log) in enumerate(zip(procs, logs)):
        assert p.returncode == 0, f"process {pid} failed:\n{log.read_text()[-4000:]}"
    ref = _reference()
    assert min(np.abs(ref[k]).max() for k in ("g", "gn")) > 1e-3  # gradients worth comparing
    for pid in (0, 1):
        got = np.load(tmp_path / f"out{pid}.npz")
        np.testing.assert_allclose(got["local"], 2 * np.sin(np.linspace(0, 1, 3) + pid),
                                   rtol=1e-14)
        for name in ("g", "ga"):
            np.testing.assert_allclose(got[name], ref["g"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got["gn"], ref["gn"], rtol=1e-10, atol=1e-12)
        for name in ("b_mesh", "b_four", "b_local", "sm"):
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-12, atol=1e-12)


def test_one_process_paths_default_device_and_global_inputs():
    """process_count 1: the default device is jax.local_devices()[0]; a Mesh over this
    process's devices is fully addressable, so numpy inputs go to jax as they are, and a
    non-addressable output's conversion is only reached with several processes."""
    assert xla.resolve_device(None) == jax.local_devices()[0]
    assert xla.resolve_device("cpu") == jax.local_devices(backend="cpu")[0]
    with pytest.raises(ValueError, match="no jax device for platform 'nosuch'"):
        xla.resolve_device("nosuch")
    F = td.build(lambda t: td.sin(t) * 3.0, t=td.spec((), "float64"))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="xla")
    t = np.linspace(0, 2, 6)
    got = prog.eval_batch([t], backend="xla", devices=jax.local_devices())
    np.testing.assert_allclose(got[0], 3 * np.sin(t), rtol=1e-14)
    (runner,) = prog.executable._xla.values()
    assert runner.spread == {}  # every device is this process's
    with jax.enable_x64(True):
        a = jax.device_put(t)
    assert np.array_equal(xla.to_numpy(a), t)
