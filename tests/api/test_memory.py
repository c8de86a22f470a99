"""Memory a long-running process gets back: caches that die with their function, bounded caches,
td.clear_caches, td.memory_stats and emptying the interner (docs/memory.md).  Measured with
gc.collect() and weak references, never RSS (that is bench/memory_soak.py)."""

from __future__ import annotations

import gc
import re
import subprocess
import sys
import weakref

import numpy as np
import pytest

import tidu as td
from tidu.graph import memory


pytestmark = pytest.mark.usefixtures("fresh_caches")


def _workload():
    """A bit of everything the transforms cache: jit, grad, jvp, vjp, hvp, vmap, scan, build."""
    x = np.linspace(0.1, 1.0, 5)

    def f(x):
        return td.sum(td.sin(x) * x)

    out = [td.jit(f)(x), td.grad(f)(x), td.jvp(f, (x,), (x,))[1], td.vjp(f, x)[1](1.0)[0],
           td.hvp(f, (x,), (x,)), td.vmap(td.grad(f))(np.ones((2, 5))),
           td.jit(lambda c: td.scan(lambda c, y: (c * y + 1.0, c), c, x)[0])(0.5),
           td.grad(lambda c: td.scan(lambda c, y: (c * y, c), c, x)[0])(1.5)]
    want = [np.sum(np.sin(x) * x), np.sin(x) + x * np.cos(x),
            np.sum((np.sin(x) + x * np.cos(x)) * x), np.sin(x) + x * np.cos(x),
            (2 * np.cos(x) - x * np.sin(x)) * x, np.tile(np.sin(1.0) + np.cos(1.0), (2, 5)),
            None, np.prod(x)]
    c = 0.5
    for y in x:
        c = c * y + 1.0
    want[6] = c
    return out, want


def _check(out, want):
    for o, w in zip(out, want):
        np.testing.assert_allclose(o, w, rtol=1e-12, atol=1e-12)


# ---- caches die with their function ----

def test_a_jitted_functions_cache_goes_with_it():
    f = td.jit(lambda x: x * 2.0)
    f(np.ones(3))
    cache = weakref.ref(f.cache)
    del f
    gc.collect()
    assert cache() is None


def _custom_vjp_sin():
    @td.custom_vjp
    def k(x):
        return td.sin(x)

    k.defvjp(lambda x: (td.sin(x), x), lambda r, g: (td.cos(r) * g,))
    return k


_MAKERS = [
    lambda: td.jit(lambda x: x * 2.0),
    lambda: td.jit(lambda x, n: x * n, static_argnums=1),
    lambda: td.jit(lambda x, *, s: x * s),
    lambda: td.jit(lambda x: td.scan(lambda h, y: (h * 0.5 + td.tanh(y), h), 0.0, x)[0]),
    lambda: td.jit(td.grad(lambda x: td.sum(td.fori_loop(0, 3, lambda i, c: td.sin(c), x)))),
    lambda: td.jit(td.vmap(lambda x: td.cond(x > 0.5, td.sin, td.cos, x))),
    lambda: td.jit(td.grad(lambda x, k=_custom_vjp_sin(): td.sum(k(x)))),
    lambda: td.jit(td.hessian(lambda x: td.sum(td.sin(x) ** 3))),
]


@pytest.mark.parametrize("make, args", list(zip(_MAKERS, [(np.ones(3),), (np.ones(3), 3)] +
                                              [(np.ones(3),)] * 6)),
                         ids=["plain", "static", "keyword", "scan", "grad-fori", "vmap-cond",
                              "custom_vjp", "hessian"])
def test_a_dropped_jitted_function_goes_at_once_without_the_collector(make, args):
    """No reference cycle through tidu's own objects: the function, its programs and the graph
    ids they hold go when the last reference does, with the collector off."""
    gc.collect()
    gc.disable()
    try:
        f = make()
        kw = {"s": 2.0} if make is _MAKERS[2] else {}
        f(*args, **kw)
        f(*args, **kw)
        assert memory._core.live_holders() > 0
        cache = weakref.ref(f.cache) if hasattr(f, "cache") else None
        del f
        assert memory._core.live_holders() == 0
        assert cache is None or cache() is None
    finally:
        gc.enable()


@pytest.mark.parametrize("call", [
    lambda fn, x: td.jvp(fn, (x,), (x,)),
    lambda fn, x: td.vjp(fn, x)[1](1.0),
    lambda fn, x: td.hvp(fn, (x,), (x,)),
])
def test_transform_caches_hold_the_function_weakly(call):
    def fn(x):
        return td.sum(x * x)

    x = np.ones(3)
    call(fn, x)
    ref = weakref.ref(fn)
    del fn
    gc.collect()
    assert ref() is None
    assert memory_stats_entries("transforms") == 0


def test_bound_methods_are_cached_by_their_object_and_freed_with_it():
    class Model:
        def loss(self, x):
            return td.sum(x * x)

    m = Model()
    x = np.ones(3)
    td.jvp(m.loss, (x,), (x,))
    td.jvp(m.loss, (x,), (x,))  # a new bound method object: the same entry
    assert memory_stats_entries("transforms") == 1
    ref = weakref.ref(m)
    del m
    gc.collect()
    assert ref() is None
    assert memory_stats_entries("transforms") == 0


def _capturing(big):
    def fn(x):
        return td.sum(x * big)
    return fn


def test_a_captured_constant_is_freed_with_its_function():
    big = np.random.default_rng(0).standard_normal(1 << 17)  # 1 MiB
    ref, total, size = weakref.ref(big), big.sum(), big.size
    fn = _capturing(big)
    del big
    f = td.jit(fn)
    np.testing.assert_allclose(f(np.ones(size)), total)
    td.jvp(fn, (np.ones(size),), (np.ones(size),))
    held = td.memory_stats()["interner"]["tables_bytes"]
    assert held >= size * 8  # the traced constant's copy, in its primitive
    del f, fn
    gc.collect()
    assert ref() is None
    assert td.clear_caches()
    assert td.memory_stats()["interner"]["tables_bytes"] == 0


def test_the_interner_is_reclaimed_automatically_when_nothing_holds_it():
    td.set_cache_limits(reclaim_bytes=1)
    f = td.jit(lambda x: x * 3.0 + 1.0)
    np.testing.assert_allclose(f(np.ones(2)), 4.0)
    before = td.memory_stats()["interner"]
    assert before["n_ops"] > 0 and before["live_holders"] > 0  # f's cache entry holds it
    del f
    gc.collect()
    assert td.memory_stats()["interner"]["live_holders"] == 0
    frag = td.build(lambda x: td.exp(x), x=td.spec((), "float64"))  # starts from an empty one
    after = td.memory_stats()["interner"]
    assert after["epoch"] == before["epoch"] + 1
    assert after["n_ops"] == frag.n_ops == 1


# ---- bounds ----

def test_the_per_function_bound_is_lru_and_configurable():
    td.set_cache_limits(jit_per_function=3)
    f = td.jit(lambda x: td.sum(x * x))
    for n in range(1, 6):
        assert f(np.ones(n)) == n
    assert len(f.cache) == 3
    kept = [sig[0][0][0] for sig in f.cache]  # each signature's first leaf's shape
    assert kept == [(3,), (4,), (5,)]
    f(np.ones(3))  # a hit: now the most recent
    assert [sig[0][0][0] for sig in f.cache] == [(4,), (5,), (3,)]
    assert f(np.ones(1)) == 1  # evicted, compiled again, right
    assert [sig[0][0][0] for sig in f.cache] == [(5,), (3,), (1,)]


def test_the_total_bound_evicts_the_least_recently_used_function_first():
    td.set_cache_limits(jit_total=4)
    fs = [td.jit(lambda x, k=k: x + float(k)) for k in range(3)]
    for f in fs:
        f(np.ones(1))
        f(np.ones(2))
    assert sum(len(f.cache) for f in fs) <= 4
    assert len(fs[2].cache) == 2  # the most recently used function kept its entries
    assert td.memory_stats()["jit"]["entries"] <= 4
    for k, f in enumerate(fs):
        np.testing.assert_allclose(f(np.ones(2)), 1.0 + k)


def test_the_program_cache_is_bounded():
    td.set_cache_limits(program_cache=2)
    for k in range(5):
        td.jit(lambda x, k=k: x * float(k + 2))(np.ones(2))
    assert len(td.program_cache) <= 2


def test_bad_limits_are_refused():
    with pytest.raises(TypeError, match="unknown limit"):
        td.set_cache_limits(jit_per_fn=3)
    with pytest.raises(ValueError, match="positive"):
        td.set_cache_limits(program_cache=0)
    with pytest.raises(TypeError, match="int"):
        td.set_cache_limits(jit_total=2.5)


# ---- clear_caches and memory_stats ----

def memory_stats_entries(name):
    return td.memory_stats()[name]["entries"]


def test_clear_caches_empties_everything_and_calls_still_give_right_answers():
    out, want = _workload()
    _check(out, want)
    stats = td.memory_stats()
    assert stats["interner"]["n_ops"] > 0 and stats["program_cache"]["entries"] > 0
    assert stats["rule_templates"]["entries"] > 0 and stats["shape_rules"]["entries"] > 0
    gc.collect()
    assert td.clear_caches()
    stats = td.memory_stats()
    assert stats["interner"]["n_ops"] == stats["interner"]["n_vals"] == 0
    assert stats["interner"]["primitives"] == stats["interner"]["input_keys"] == 0
    assert stats["interner"]["live_holders"] == 0
    for name, s in stats.items():
        if name != "interner":
            assert s["entries"] == 0, name
    out2, _ = _workload()  # everything traced and compiled again
    _check(out2, want)


def test_clear_caches_keeps_a_live_fragment_and_program_valid():
    f64 = td.spec((), "float64")
    F0 = td.build(lambda x, a: td.exp(a * x), x=f64, a=f64)
    (y,) = F0.outputs
    T1 = td.transpose(td.differentiate(td.resolve([F0]), outputs=[y], wrt=["x"]))
    (ct_key,) = [key for _, key in T1.tangent_inputs]
    (ct_x,) = T1.tangent_outputs
    prog = td.compile(td.materialize_merge(td.resolve([F0, T1]), outputs=[y, ct_x]))
    listing = str(T1.fragment)
    _workload()
    assert not td.clear_caches()  # F0, T1 and prog hold interned ids
    assert td.memory_stats()["interner"]["n_ops"] > 0
    for out, want in zip(prog({"x": 0.5, "a": 2.0, ct_key: 1.0}), [np.e, 2 * np.e]):
        np.testing.assert_allclose(out, want, rtol=1e-15)
    assert str(T1.fragment) == listing
    del F0, T1, prog, y, ct_x
    assert td.clear_caches()


_WORKED = """
import tidu as td
F0 = td.build(lambda x, a: td.exp(a * x), x=td.spec((), "float64"), a=td.spec((), "float64"))
(y,) = F0.outputs
L1 = td.differentiate(td.resolve([F0]), outputs=[y], wrt=["x"])
T1 = td.transpose(L1)
(ct_key,) = [key for _, key in T1.tangent_inputs]
(ct_x,) = T1.tangent_outputs
prog = td.compile(td.materialize_merge(td.resolve([F0, T1]), outputs=[y, ct_x]))
res = [float(v) for v in prog({"x": 0.5, "a": 2.0, ct_key: 1.0})]
L2 = td.differentiate(td.resolve([F0, T1]), outputs=[ct_x], wrt=["x"])
ids = [y.id, ct_x.id, *[k.id for k in L2.tangent_outputs], td.memory_stats()["interner"]["n_ops"]]
text = "\\n".join([str(F0), str(L1.fragment), str(T1.fragment), str(L2.fragment), repr(res),
                   repr([y, ct_x, *L2.tangent_outputs]), repr(ids)])
"""


def _same_passes(text):
    """Pass ids (d'x'@7) count differentiate calls over the process: not interned ids."""
    return re.sub(r"@\d+", "@N", text)


def test_after_reclaiming_a_rebuilt_graph_is_the_one_a_fresh_process_builds():
    fresh = subprocess.run([sys.executable, "-c", _WORKED + "print(text)"], capture_output=True,
                           text=True, check=True).stdout.strip()
    assert "#" in fresh  # the listings name interned op ids (Derived(Exp#1))
    fresh = _same_passes(fresh)
    _workload()
    gc.collect()
    assert td.clear_caches()
    env: dict = {}
    exec(_WORKED, env)  # ids, listings and values as in a new process: the interner is empty
    assert _same_passes(env["text"]) == fresh
    del env
    _workload()  # build, drop, build again
    gc.collect()
    assert td.clear_caches()
    env = {}
    exec(_WORKED, env)
    assert _same_passes(env["text"]) == fresh


def test_a_key_that_outlives_its_graph_raises_instead_of_naming_another_node():
    frag = td.build(lambda x: td.sin(x), x=td.spec((3,), "float64"))
    (k,) = frag.outputs
    kid = k.id
    store = frag.store
    assert k.shape == (3,)
    del frag
    memory.disown(store)  # as a control-flow body's store: no longer counted
    assert td.clear_caches()
    td.build(lambda x: td.cos(x) * 2.0, x=td.spec((), "float32"))  # reuses the ids
    with pytest.raises(td.FreedGraphError, match="freed"):
        k.aval
    with pytest.raises(td.FreedGraphError):
        k.id
    with pytest.raises(td.FreedGraphError):
        store.vals()
    assert "freed" in repr(k)
    assert k != td.ValKey(kid)  # the value that took its id is another value


def test_memory_stats_numbers_move():
    s0 = td.memory_stats()
    assert set(s0) >= {"interner", "jit", "program_cache", "rule_templates", "tracer_rules",
                       "shape_rules", "transforms", "xla_splice", "leaf_avals"}
    assert set(s0["interner"]) >= {"bytes", "n_vals", "n_ops", "live_holders", "epoch"}
    frag = td.build(lambda x: td.exp(td.sin(x)), x=td.spec((4,), "float64"))
    s1 = td.memory_stats()
    assert s1["interner"]["n_ops"] == s0["interner"]["n_ops"] + 2
    assert s1["interner"]["live_holders"] == s0["interner"]["live_holders"] + 1
    f = td.jit(lambda x: x + 1.0)
    f(np.ones(2))
    f(np.ones(3))
    s2 = td.memory_stats()
    assert s2["jit"]["entries"] == s1["jit"]["entries"] + 2
    assert s2["program_cache"]["entries"] == s1["program_cache"]["entries"] + 2
    assert s2["interner"]["bytes"] >= s1["interner"]["bytes"]
    del frag, f
