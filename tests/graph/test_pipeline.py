"""resolve, materialize_merge, compile and the program cache."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from tidu import ops as P
from tidu.graph import GraphError


def f64(shape=()):
    return td.spec(shape, "float64")


def _linear_on(frag, prefix="t"):
    """A hand-built linear fragment over frag: t0 = Input(t_x); t1 = Mul(External(out), t0)."""
    b = td.FragmentBuilder(parents=[frag], prefix=prefix)
    t0 = b.add_input(("t", "x"), frag.outputs[0].aval)
    (t1,) = b.add_op(P.Mul(), [td.External(frag.outputs[0]), td.Local(t0)],
                     td.Linear([False, True]))
    return b.build([td.Local(t1)])


# ---- resolve ----

def test_resolve_follows_parents_without_copying():
    f0 = td.build(lambda x: td.exp(x), x=f64())
    lin = _linear_on(f0)
    view = td.resolve([lin])
    assert view.fragments == [lin, f0]
    assert view.defines(f0.outputs[0])
    d = view.resolve_val(f0.outputs[0])
    assert d.op == P.Exp() and d.inputs == (f0.inputs[0],)
    assert view.resolve_val(f0.inputs[0]).input_key == "x"


def test_dangling_external_reference_names_the_key():
    f0 = td.build(lambda x: td.exp(x), x=f64())
    b = td.FragmentBuilder(prefix="t")  # no parents: the External has no definer in the view
    t0 = b.add_input("t_x", td.aval((), "float64"))
    (t1,) = b.add_op(P.Mul(), [td.External(f0.outputs[0]), td.Local(t0)], td.Linear([False, True]))
    lin = b.build([td.Local(t1)])
    view = td.resolve([lin])
    assert view.resolve_val(f0.outputs[0]) is None
    with pytest.raises(GraphError, match=r"dangling reference: Derived\(Exp"):
        td.materialize_merge(view, lin.outputs)
    # with the defining fragment in the view it resolves
    g = td.materialize_merge(td.resolve([lin, f0]), lin.outputs)
    assert [op.name for op, *_ in g.ops()] == ["Exp", "Mul"]


def test_dangling_input_reference_is_an_error_too():
    f0 = td.build(lambda x: td.exp(x), x=f64())
    b = td.FragmentBuilder()
    y = b.add_input("y", td.aval((), "float64"))
    (z,) = b.add_op(P.Mul(), [td.External(f0.inputs[0]), td.Local(y)])
    f1 = b.build([td.Local(z)])
    with pytest.raises(GraphError, match=r"dangling reference: Input\('x'\)"):
        td.materialize_merge(td.resolve([f1]), f1.outputs)
    assert td.materialize_merge(td.resolve([f1, f0]), f1.outputs).n_ops == 1


def test_resolve_rejects_non_fragments():
    with pytest.raises(TypeError, match="Fragment"):
        td.resolve(["not a fragment"])


# ---- materialize_merge ----

def test_materialize_deduplicates_across_fragments():
    f1 = td.build(lambda x, a: td.exp(a * x), x=f64(), a=f64())
    f2 = td.build(lambda x, a: td.exp(a * x) + td.sin(a * x), x=f64(), a=f64())
    g = td.materialize_merge(td.resolve([f1, f2]), f1.outputs + f2.outputs)
    names = [op.name for op, *_ in g.ops()]
    assert sorted(names) == ["Add", "Exp", "Mul", "Sin"]  # Mul and Exp once, not twice
    assert len(g.inputs) == 2
    assert g.outputs == f1.outputs + f2.outputs


def test_materialize_order_is_topological_and_reachable_only():
    frag = td.build(lambda x, y: (td.exp(x) * y, td.sin(y)), x=f64(), y=f64())
    g = td.materialize_merge(td.resolve([frag]), frag.outputs[:1])
    assert [op.name for op, *_ in g.ops()] == ["Exp", "Mul"]  # Sin is not reachable
    seen = set(g.inputs)
    for op, ins, outs, _ in g.ops():
        assert all(i in seen for i in ins)
        seen.update(outs)


def test_materialize_rejects_non_keys():
    frag = td.build(lambda x: td.exp(x), x=f64())
    with pytest.raises(TypeError, match="ValKeys"):
        td.materialize_merge(td.resolve([frag]), ["x"])


def test_two_million_node_chain():
    """Iterative traversal: a 2e6-deep chain neither recurses nor overflows."""
    n = 2_000_000
    b = td.FragmentBuilder()
    v = b.store.global_of(b.add_input("x", td.aval((), "float64")))
    store = b.store
    from tidu.graph import prim_id
    neg = prim_id(P.Neg())
    a = td.aval((), "float64").id
    for _ in range(n):
        v = store.emit1(neg, 0, v, a)
    frag = b.build([td.ValKey(v)])
    g = td.materialize_merge(td.resolve([frag]), frag.outputs)
    assert g.n_ops == n
    prog = td.compile(g)
    assert prog.n_instructions == n


# ---- compile ----

def test_an_old_constant_far_below_a_large_graph():
    """A constant interned long before (its id far below the graph's others) is an outlier of
    the walks' and compile's dense windows: the gradient through it is still right."""
    prev = td.set_cache_limits(reclaim_bytes=0)  # keep the 100 dropped graphs' ids interned
    try:
        _old_constant_far_below()
    finally:
        td.set_cache_limits(**prev)


def _old_constant_far_below():
    old = td.build(lambda x: x * 0.318, x=f64())  # interns the constant now
    for k in range(100):  # 300,000 values later
        td.build(lambda x, k=k: _chain(x, k), x=f64())

    def f(x):
        return _chain(x, 99) * 0.318

    g = td.jit(td.grad(f))
    want = (_chain(0.4 + 1e-6, 99, np) * 0.318 - _chain(0.4 - 1e-6, 99, np) * 0.318) / 2e-6
    np.testing.assert_allclose(g(0.4), want, rtol=1e-6)
    # the gradient program's values number about 10,000: a window reaches 8 x that below its top
    n_vals = g.lower(0.4).program.n_instructions
    assert old.outputs[0].op_key()[1][1].id < td.build(f, x=f64()).outputs[0].id - 20 * n_vals


def _chain(x, salt, ns=td):
    for _ in range(1000):
        x = ns.sin(x) + (0.5 + salt * 1e-6)
    return x


def test_slots_are_ssa_and_dense():
    frag = td.build(lambda x, a: (td.exp(a * x), a * x), x=f64(), a=f64())
    g = td.materialize_merge(td.resolve([frag]), frag.outputs)
    prog = td.compile(g)
    arr = prog.executable.arrays
    written = np.concatenate([arr["input_slots"], arr["out_slots"]])
    assert sorted(written.tolist()) == list(range(len(arr["slot_aval"])))  # each slot written once
    for i in range(len(arr["instr_prim"])):
        ins = arr["in_slots"][arr["in_off"][i]:arr["in_off"][i + 1]]
        outs = arr["out_slots"][arr["out_off"][i]:arr["out_off"][i + 1]]
        assert all(s < min(outs) for s in ins)  # inputs defined before use
    assert list(arr["output_slots"]) == [3, 2]
    assert prog.inputs == [k.input_key for k in g.inputs]


def test_program_cache_hits_across_input_names():
    td.program_cache.clear()
    f1 = td.build(lambda x, a: td.exp(a * x), x=f64(), a=f64())
    f2 = td.build(lambda u, v: td.exp(v * u), u=f64(), v=f64())
    p1 = td.compile(td.materialize_merge(td.resolve([f1]), f1.outputs))
    p2 = td.compile(td.materialize_merge(td.resolve([f2]), f2.outputs))
    assert td.program_cache.misses == 1 and td.program_cache.hits == 1
    assert p1.executable is p2.executable
    assert p1.inputs == ["a", "x"] and p2.inputs == ["v", "u"]
    assert p1({"x": 0.5, "a": 2.0})[0] == pytest.approx(np.e)
    assert p2({"u": 0.5, "v": 2.0})[0] == pytest.approx(np.e)


def test_program_cache_distinguishes_structure_shape_and_constants():
    td.program_cache.clear()
    progs = []
    for fn, shape in [(lambda x: x * 2.0, ()), (lambda x: x * 3.0, ()), (lambda x: x * 2.0, (2,)),
                      (lambda x: x + 2.0, ())]:
        frag = td.build(fn, x=f64(shape))
        progs.append(td.compile(td.materialize_merge(td.resolve([frag]), frag.outputs)))
    assert td.program_cache.misses == 4 and td.program_cache.hits == 0
    assert len({id(p.executable) for p in progs}) == 4


def test_program_cache_renames_pass_style_keys():
    """Keys like Tangent('x', 3) vs Tangent('x', 9) are renamed away, as pass ids must be."""
    td.program_cache.clear()
    progs = []
    for pass_id in (3, 9):
        frag = td.build(lambda t: t * 2.0, inputs={("tangent", "x", pass_id): f64()})
        progs.append(td.compile(td.materialize_merge(td.resolve([frag]), frag.outputs)))
    assert progs[0].executable is progs[1].executable
    assert td.program_cache.hits == 1


def test_compile_rejects_fragments():
    frag = td.build(lambda x: td.exp(x), x=f64())
    with pytest.raises(TypeError, match="MaterializedGraph"):
        td.compile(frag)


# ---- evaluation through the public pipeline ----

def test_program_inputs_by_mapping_and_errors():
    frag = td.build(lambda x, a: td.exp(a * x), x=f64(), a=f64())
    prog = td.compile(td.materialize_merge(td.resolve([frag]), frag.outputs))
    (y,) = prog({"x": 0.5, "a": 2.0})
    assert y == pytest.approx(np.exp(1.0))
    with pytest.raises(KeyError, match="missing input"):
        prog({"x": 0.5})
    with pytest.raises(KeyError, match="unknown input"):  # a key no fragment of the session declared
        prog({"x": 0.5, "a": 2.0, "b_declared_nowhere": 1.0})
    with pytest.raises(ValueError, match="shape"):
        prog({"x": np.ones(2), "a": 2.0})
    with pytest.raises(TypeError):
        prog({"x": 1 + 2j, "a": 2.0})
    with pytest.raises(ValueError, match="inputs"):
        prog.eval([1.0])
