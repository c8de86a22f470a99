"""td.shard_map against jax.shard_map (x64) on 4 forced host CPU devices (a subprocess): values
and gradients of bodies with psum, pmean, pmax, pmin, all_gather, axis_index over 1-D and 2-D
Meshes, nested in jit, grad and vmap, on the interpreter and on XLA; the HLO of a data-parallel
step holds the all-reduce; clear errors for specs that do not fit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")

PRELUDE = """
import numpy as np, jax, jax.numpy as jnp, tidu as td
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.config.update("jax_enable_x64", True)
assert len(jax.devices()) == 4
mesh = Mesh(np.array(jax.devices()), ("i",))
mesh2 = Mesh(np.array(jax.devices()).reshape(2, 2), ("a", "b"))
r = np.random.default_rng(0)

def close(got, want, tol=1e-12):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)

def both(t_fn, j_fn, mesh, in_specs, out_specs, args, grad_argnums=None, ref=None):
    '''td.shard_map on the interpreter and XLA (inside jit) vs jax.shard_map, and (optionally)
    the gradient of the sum of squares of the output (against jax's of `ref`, the global
    function, where jax's shard_map has no derivative). jax's references under one jax.jit:
    op by op, its grad compiles a program per primitive.'''
    tf = td.shard_map(t_fn, mesh, in_specs=in_specs, out_specs=out_specs)
    jf = jax.shard_map(j_fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                       check_vma=False)
    want = jax.jit(jf)(*args)
    close(tf(*args), want)
    close(td.jit(tf, backend="xla")(*args), want)
    if grad_argnums is not None:
        tl = lambda *a: td.sum(tf(*a) ** 2)
        jl = lambda *a: jnp.sum((ref or jf)(*a) ** 2)
        gw = jax.jit(jax.grad(jl, argnums=grad_argnums))(*args)
        assert max(float(np.abs(g).max()) for g in gw) > 1e-3
        for g, w in zip(td.grad(tl, argnums=grad_argnums)(*args), gw):
            close(g, w)
        for g, w in zip(td.jit(td.grad(tl, argnums=grad_argnums), backend="xla")(*args), gw):
            close(g, w)
"""


def _run_4_devices(code: str) -> str:
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu")
    env.pop("JAX_ENABLE_X64", None)
    res = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    return res.stdout


def test_collectives_values_and_gradients_match_jax():
    out = _run_4_devices("""
        x, w = r.standard_normal((8, 3)), r.standard_normal((3, 2))
        # psum of a per-device partial sum (the data-parallel reduction), pmean
        both(lambda x, w: td.lax.psum(td.sum(td.tanh(x @ w), 0), "i"),
             lambda x, w: jax.lax.psum(jnp.sum(jnp.tanh(x @ w), 0), "i"),
             mesh, (P("i"), P()), P(), (x, w), (0, 1))
        both(lambda x, w: td.tanh(x @ w) - td.lax.pmean(td.mean(td.tanh(x @ w), 0), "i"),
             lambda x, w: jnp.tanh(x @ w) - jax.lax.pmean(jnp.mean(jnp.tanh(x @ w), 0), "i"),
             mesh, (P("i"), P()), P("i"), (x, w), (0, 1))
        # pmax, pmin (distinct values: no ties)
        both(lambda x: td.lax.pmax(x, "i") * td.lax.pmin(x, "i") + x,
             lambda x: jax.lax.pmax(x, "i") * jax.lax.pmin(x, "i") + x,
             mesh, P("i"), P("i"), (x,), (0,),
             ref=lambda x: (jnp.tile(x.reshape(4, 2, 3).max(0), (4, 1)) *
                            jnp.tile(x.reshape(4, 2, 3).min(0), (4, 1)) + x))
        # all_gather, stacked and tiled, and axis_index
        both(lambda x: td.sum(td.lax.all_gather(x, "i") ** 2, 0) * x,
             lambda x: jnp.sum(jax.lax.all_gather(x, "i") ** 2, 0) * x,
             mesh, P("i"), P("i"), (x,), (0,))
        both(lambda x: td.lax.all_gather(x, "i", axis=1, tiled=True).T @ x,
             lambda x: jax.lax.all_gather(x, "i", axis=1, tiled=True).T @ x,
             mesh, P(None, "i"), P(None, "i"), (r.standard_normal((5, 8)),), (0,))
        both(lambda x: x * (td.lax.axis_index("i") + 1.0),
             lambda x: x * (jax.lax.axis_index("i") + 1.0),
             mesh, P("i"), P("i"), (x,), (0,))
        # a 2-D Mesh: one axis per dimension, both axes on one dimension, replicated over one
        z = r.standard_normal((4, 6))
        both(lambda z: td.lax.psum(z, "a") * td.lax.pmax(z, "b"),
             lambda z: jax.lax.psum(z, "a") * jax.lax.pmax(z, "b"),
             mesh2, P("a", "b"), P("a", "b"), (z,), (0,),
             ref=lambda z: (jnp.tile(z.reshape(2, 2, 6).sum(0), (2, 1)) *
                            jnp.tile(z.reshape(4, 2, 3).max(1), (1, 2)).reshape(4, 6)))
        both(lambda z: td.lax.psum(td.sin(z), ("a", "b")) + td.lax.axis_index("a") * z,
             lambda z: jax.lax.psum(jnp.sin(z), ("a", "b")) + jax.lax.axis_index("a") * z,
             mesh2, P(("b", "a")), P(("b", "a")), (z,), (0,))
        both(lambda z, v: td.lax.psum(z * v, "b"),
             lambda z, v: jax.lax.psum(z * v, "b"),
             mesh2, (P("a", "b"), P("a")), P("a"), (z, r.standard_normal((4, 1)) + 1), (0, 1))
        # pytrees in and out, vmap of a shard_map, a shard_map under grad under jit
        tf = td.shard_map(lambda d: {"s": td.lax.psum(d["x"], "i"), "x": 2 * d["x"]}, mesh,
                          in_specs=({"x": P("i")},), out_specs={"s": P(), "x": P("i")})
        got = tf({"x": x})
        close(got["s"], x.reshape(4, 2, 3).sum(0))
        close(got["x"], 2 * x)
        f = td.shard_map(lambda x: td.lax.psum(td.sum(x ** 2), "i"), mesh, P("i"), P())
        jf = jax.shard_map(lambda x: jax.lax.psum(jnp.sum(x ** 2), "i"), mesh=mesh,
                           in_specs=P("i"), out_specs=P())
        xs = r.standard_normal((5, 8))
        close(td.vmap(f)(xs), jax.jit(jax.vmap(jf))(xs))
        close(td.jit(td.vmap(td.grad(f)), backend="xla")(xs), jax.jit(jax.vmap(jax.grad(jf)))(xs))
        close(td.hessian(f)(x[:, 0]), jax.jit(jax.hessian(jf))(x[:, 0]))
        print("ok")
    """)
    assert out.split() == ["ok"]


def test_data_parallel_step_all_reduces_on_four_devices():
    out = _run_4_devices("""
        def loss(w, x, y):
            return td.mean((td.tanh(x @ w) - y) ** 2)

        def step(w, x, y):  # each device: its block's gradient, then the mean over devices
            g = td.grad(loss)(w, x, y)
            return w - 0.1 * td.lax.pmean(g, "i")

        def jstep(w, x, y):
            g = jax.grad(lambda w: jnp.mean((jnp.tanh(x @ w) - y) ** 2))(w)
            return w - 0.1 * jax.lax.pmean(g, "i")

        w, x, y = r.standard_normal((3, 2)), r.standard_normal((16, 3)), r.standard_normal((16, 2))
        specs = dict(in_specs=(P(), P("i"), P("i")), out_specs=P())
        train = td.jit(td.shard_map(step, mesh, **specs), backend="xla")
        want = jax.jit(jax.shard_map(jstep, mesh=mesh, check_vma=False, **specs))(w, x, y)
        close(train(w, x, y), want)
        close(td.jit(td.shard_map(step, mesh, **specs), backend="cpu")(w, x, y), want)
        ((prog, *_),) = train.cache.values()
        (runner,) = prog.executable._xla.values()
        assert "sdy.sharding_constraint" in runner.segments[0].text  # Shardy, jax's default
        with jax.enable_x64(True):
            hlo = runner.calls[0].lower(w, x, y).compile().as_text()
        assert "num_partitions=4" in hlo
        rep, bat = NamedSharding(mesh, P()), NamedSharding(mesh, P("i"))  # with shardings too
        placed = td.jit(td.shard_map(step, mesh, **specs), backend="xla",
                        in_shardings=(rep, bat, bat), out_shardings=rep)
        close(placed(w, x, y), want)
        with jax.enable_x64(True):
            xs, ys = jax.device_put(x, bat), jax.device_put(y, bat)
        got = train(w, xs, ys)  # jax Arrays in: a jax Array out, on the Mesh
        assert isinstance(got, jax.Array) and len(got.sharding.device_set) == 4
        close(got, want)
        print("all-reduce" in hlo)
    """)
    assert out.split() == ["True"]


def test_gspmd_partitioner():
    """With jax's Shardy off, the hints are GSPMD's sharding custom calls, partitioned alike."""
    out = _run_4_devices("""
        jax.config.update("jax_use_shardy_partitioner", False)
        x, w = r.standard_normal((8, 3)), r.standard_normal((3, 2))
        both(lambda x, w: td.lax.psum(td.sum(td.tanh(x @ w), 0), "i"),
             lambda x, w: jax.lax.psum(jnp.sum(jnp.tanh(x @ w), 0), "i"),
             mesh, (P("i"), P()), P(), (x, w), (0, 1))
        z = r.standard_normal((4, 6))
        both(lambda z, v: td.lax.psum(z * v, "b"), lambda z, v: jax.lax.psum(z * v, "b"),
             mesh2, (P("a", "b"), P("a")), P("a"), (z, r.standard_normal((4, 1)) + 1), (0, 1))
        f = td.jit(td.shard_map(lambda x: td.lax.psum(x, "i"), mesh, P("i"), P()), backend="xla")
        f(x)
        ((prog, *_),) = f.cache.values()
        (runner,) = prog.executable._xla.values()
        assert "mhlo.sharding" in runner.segments[0].text
        with jax.enable_x64(True):
            print("all-reduce" in runner.calls[0].lower(x).compile().as_text())
    """)
    assert out.split() == ["True"]


def test_specs_that_do_not_fit_are_refused():
    out = _run_4_devices("""
        import pytest
        f = lambda x: x
        with pytest.raises(ValueError, match=r"dimension 0 of shape \\(6, 2\\) has size 6, which "
                                             r"Mesh axes \\('i',\\) \\(of total size 4\\)"):
            td.shard_map(f, mesh, P("i"), P("i"))(np.ones((6, 2)))
        with pytest.raises(ValueError, match=r"Mesh axes \\('a', 'b'\\) \\(of total size 4\\)"):
            td.shard_map(f, mesh2, P(None, ("a", "b")), P())(np.ones((2, 6)))
        with pytest.raises(ValueError, match="names 'j', which is not an axis of the Mesh"):
            td.shard_map(f, mesh, P("j"), P())(np.ones(4))
        with pytest.raises(ValueError, match="has 2 entries for a value of rank 1"):
            td.shard_map(f, mesh, P("i", None), P())(np.ones(4))
        with pytest.raises(ValueError, match="names Mesh axis 'a' twice"):
            td.shard_map(f, mesh2, P("a", "a"), P())(np.ones((2, 2)))
        with pytest.raises(ValueError, match="2 specs for a structure of 1 entries"):
            td.shard_map(f, mesh, ((P(), P()),), P())((np.ones(4),))
        with pytest.raises(NameError, match="unbound axis name: 'k'"):
            td.shard_map(lambda x: td.lax.psum(x, "k"), mesh, P("i"), P())(np.ones(4))
        with pytest.raises(TypeError, match="needs mesh= and out_specs="):
            td.shard_map(f, mesh, P())
        print("ok")
    """)
    assert out.split() == ["ok"]


def test_one_device_mesh_in_process(tmp_path):
    """On the devices this process sees (one CPU in the suite): the interpreter and XLA agree
    with the function written without shard_map; a program holding its sharding hints saves
    (as copies: a file holds no Mesh) and loads."""
    from jax.sharding import Mesh, PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:1]), ("i",))
    f = td.shard_map(lambda x: td.lax.psum(td.sum(x ** 2, 0), "i"), mesh, P("i"), P())
    x = np.random.default_rng(1).standard_normal((4, 3))
    np.testing.assert_allclose(f(x), (x ** 2).sum(0), rtol=1e-14)
    np.testing.assert_allclose(td.jit(td.grad(lambda x: td.sum(f(x))), backend="xla")(x), 2 * x,
                               rtol=1e-14)
    F = td.build(lambda x: f(x), x=td.spec((4, 3), "float64"))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    assert "ShardingHint" in {op.name for op, _, _ in prog.executable.instructions}
    prog.save(tmp_path / "sharded.tidu")
    (got,) = td.load(tmp_path / "sharded.tidu").eval([x])
    np.testing.assert_allclose(got, (x ** 2).sum(0), rtol=1e-14)
    (batched,) = prog.eval_batch([np.stack([x, 2 * x])], backend="xla")  # hints dropped
    np.testing.assert_allclose(batched, [(x ** 2).sum(0), 4 * (x ** 2).sum(0)], rtol=1e-14)
    assert "sharding" not in prog.as_stablehlo(batch=2) and "sharding" in prog.as_stablehlo()


def test_hlo_sharding_text_is_jax_s():
    """The mhlo.sharding of a ShardingHint: tiles over the named Mesh axes, the devices in the
    Mesh's order (transposed where the value's axes name them out of order), replicated over
    the Mesh axes it does not name."""
    from tidu.ops.sharding import hlo_sharding

    assert hlo_sharding((4,), (0, -1)) == "{devices=[4,1]<=[4]}"
    assert hlo_sharding((2, 2), (0, 1, -1)) == "{devices=[2,2,1]<=[4]}"
    assert hlo_sharding((2, 2), (1, 0)) == "{devices=[2,2]<=[2,2]T(1,0)}"
    assert hlo_sharding((2, 3), (1, -1)) == \
        "{devices=[3,1,2]<=[2,3]T(1,0) last_tile_dim_replicate}"
    assert hlo_sharding((2, 2), (-1, -1)) == "{replicated}"
    assert hlo_sharding((1, 4), (0, -1)) == "{replicated}"
