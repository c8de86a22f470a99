"""Identity: hash-consed keys, Primal vs Linear never alias, fragments, listings."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tidu as td
from tidu import ops as P
from tidu.graph import GraphError


def f64(shape=()):
    return td.spec(shape, "float64")


def test_equal_structure_gives_equal_key_across_fragments():
    f1 = td.build(lambda x, a: td.exp(a * x), x=f64(), a=f64())
    f2 = td.build(lambda x, a: td.exp(a * x), x=f64(), a=f64())
    assert f1 is not f2
    assert f1.outputs == f2.outputs
    assert f1.outputs[0].id == f2.outputs[0].id


def test_different_structure_gives_different_keys():
    f1 = td.build(lambda x, a: td.exp(a * x), x=f64(), a=f64())
    f2 = td.build(lambda x, a: td.exp(x * a), x=f64(), a=f64())  # operand order is structure
    f3 = td.build(lambda x, a: td.sin(a * x), x=f64(), a=f64())
    assert len({f1.outputs[0], f2.outputs[0], f3.outputs[0]}) == 3


def test_same_input_key_at_another_shape_is_another_value():
    f1 = td.build(lambda x: td.exp(x), x=f64((3,)))
    f2 = td.build(lambda x: td.exp(x), x=f64((4,)))
    assert f1.inputs[0] != f2.inputs[0]
    assert f1.outputs[0] != f2.outputs[0]
    assert f1.inputs[0].input_key == f2.inputs[0].input_key == "x"


def test_hash_consing_within_a_fragment():
    frag = td.build(lambda x: td.exp(x) + td.exp(x), x=f64())
    ops = [op.name for op, *_ in frag.ops()]
    assert ops == ["Exp", "Add"]
    (op, refs, _, _), = [o for o in frag.ops() if o[0].name == "Add"]
    assert refs[0] == refs[1]


def test_primal_and_linear_modes_never_alias():
    b = td.FragmentBuilder()
    x = b.add_input("x", td.aval((), "float64"))
    y = b.add_input("y", td.aval((), "float64"))
    (m_primal,) = b.add_op(P.Mul(), [td.Local(x), td.Local(y)], td.PRIMAL)
    (m_lin,) = b.add_op(P.Mul(), [td.Local(x), td.Local(y)], td.Linear([False, True]))
    (m_lin2,) = b.add_op(P.Mul(), [td.Local(x), td.Local(y)], td.Linear([True, False]))
    (m_again,) = b.add_op(P.Mul(), [td.Local(x), td.Local(y)], td.Linear([False, True]))
    assert len({m_primal, m_lin, m_lin2}) == 3
    assert m_again == m_lin
    frag = b.build([td.Local(m_lin)])
    assert frag.key_of(m_lin).op_key()[2] == td.Linear([False, True])


def test_ops_with_different_attributes_are_different_keys():
    f1 = td.build(lambda x: td.sum(x, axis=0), x=f64((2, 3)))
    f2 = td.build(lambda x: td.sum(x, axis=1), x=f64((2, 3)))
    assert f1.outputs[0] != f2.outputs[0]
    assert P.ReduceSum((1, 0)) == P.ReduceSum([0, 1])  # attributes are normalised


def test_constants_are_keyed_by_exact_bytes():
    f1 = td.build(lambda x: x * 0.1, x=f64())
    f2 = td.build(lambda x: x * 0.1, x=f64())
    f3 = td.build(lambda x: x * np.nextafter(0.1, 1.0), x=f64())
    assert f1.outputs == f2.outputs
    assert f1.outputs != f3.outputs


def test_val_key_describes_its_definition():
    frag = td.build(lambda x, a: td.exp(a * x), x=f64(), a=f64())
    (y,) = frag.outputs
    op, ins, mode = y.op_key()
    assert op == P.Exp() and mode == td.PRIMAL
    mul_op, mul_ins, _ = ins[0].op_key()
    assert mul_op == P.Mul()
    assert {k.input_key for k in mul_ins} == {"x", "a"}
    assert y.aval == td.aval((), "float64")
    assert frag.inputs[0].op_key() is None


def test_listing_uses_the_seeds_notation():
    frag = td.build(lambda x, a: td.exp(a * x), x=f64(), a=f64())
    b = td.FragmentBuilder(parents=[frag], prefix="t")
    t0 = b.add_input("t_x", td.aval((), "float64"))
    a_key = frag.inputs[1]
    (t1,) = b.add_op(P.Mul(), [td.External(a_key), td.Local(t0)], td.Linear([False, True]))
    (t2,) = b.add_op(P.Mul(), [td.External(frag.outputs[0]), td.Local(t1)],
                     td.Linear([False, True]))
    lin = b.build([td.Local(t2)])
    text = str(lin)
    assert "t1 = Mul(External(p1), Local(t0)) mode=Linear[fixed, active]" in text
    assert "t2 = Mul(External(p3), Local(t1)) mode=Linear[fixed, active]" in text
    assert "p3 = Exp(Local(p2)) mode=Primal" in str(frag)


def test_builder_rejects_bad_references_and_masks():
    b = td.FragmentBuilder()
    x = b.add_input("x", td.aval((), "float64"))
    with pytest.raises(IndexError):
        b.add_op(P.Exp(), [td.Local(x + 5)])
    with pytest.raises(GraphError, match="active mask"):
        b.add_op(P.Exp(), [td.Local(x)], td.Linear([True, True]))
    with pytest.raises(TypeError, match="Local, External or ValKey"):
        b.add_op(P.Exp(), ["x"])


def test_unhashable_input_key_is_rejected():
    with pytest.raises(TypeError, match="hashable"):
        td.build(lambda x: x, inputs={("ok", [1]): f64()})


def test_non_string_input_keys():
    frag = td.build(lambda u, v: u * v, inputs={("u", 1): f64(), 7: f64()})
    assert [k.input_key for k in frag.inputs] == [("u", 1), 7]
    prog = td.compile(td.materialize_merge(td.resolve([frag]), frag.outputs))
    (out,) = prog({("u", 1): 3.0, 7: 4.0})
    assert out == 12.0


def test_concurrent_tracing_threads_agree():
    """Interning is atomic per call: threads tracing the same function get the same keys."""
    import threading

    def fn(x, y):
        z = x
        for _ in range(300):
            z = td.sin(z) * y + x
        return z

    results = [None] * 6
    barrier = threading.Barrier(len(results))

    def work(i):
        barrier.wait()
        results[i] = td.build(fn, x=f64((2,)), y=f64((2,))).outputs[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1


def test_val_key_is_compiled_but_behaves_as_a_value():
    """ValKey and Tangent are compiled, untracked by the cyclic collector; hash, equality,
    pickling and their errors are those of the Python classes they replaced."""
    import gc
    import pickle

    from tidu.graph import ValKey
    from tidu.ad.rules import Tangent, tangent_of

    frag = td.build(lambda x: td.exp(x), x=f64((2,)))
    x, y = frag.inputs[0], frag.outputs[0]
    k = ValKey(np.uint32(y.id))  # numpy ids convert
    assert k == y and k is not y and hash(k) == hash(y.id ^ 0x5BD1E9955BD1E995)
    assert k != x and not (k == y.id) and k != y.id and len({k, y, x}) == 2
    assert pickle.loads(pickle.dumps(k)) == k and type(pickle.loads(pickle.dumps(k))) is ValKey
    assert not gc.is_tracked(k)
    assert k.aval == td.aval((2,), "float64") and k.shape == (2,) and k.ndim == 1
    assert not k.is_input and x.is_input and k.output_slot == 0 and x.input_key == "x"
    assert repr(x) == "Input('x')" and repr(k).startswith("Derived(Exp#")
    with pytest.raises(GraphError, match="not an input"):
        k.input_key
    with pytest.raises(AttributeError):
        k.id = 3
    with pytest.raises(IndexError, match="no value with id"):
        ValKey(2**40).aval
    t = tangent_of(x, 7)
    assert t == Tangent(x, 7) and hash(t) == hash((x, 7)) and t != Tangent(x, 8)
    assert t != Tangent("x", 7) and t != (x, 7) and not gc.is_tracked(t)
    assert repr(Tangent("x", 7)) == "d'x'@7" and t.input_name(lambda key: "x") == "dx"
    assert pickle.loads(pickle.dumps(Tangent("x", 7))) == Tangent("x", 7)


def test_compiled_trace_helpers():
    """leaf_avals memoises per shape and exact dtype; flatten_outputs and intern_ids keep the
    Python versions' trees and errors."""
    from tidu import _core
    from tidu.api.jit import _leaf_aval

    leaves = [np.zeros((2, 3)), np.zeros((2, 3), ">f8"), np.zeros((3, 2), np.float32), 1.5,
              True, 2, 1j, np.float32(2.0), [1.0, 2.0]]
    got = _core.leaf_avals(leaves, _leaf_aval)
    assert got == [_leaf_aval(x) for x in leaves]
    assert got == _core.leaf_avals(leaves, _leaf_aval)  # from the memo now
    assert got[2] == td.aval((3, 2), "float32") and got[3] == td.aval((), "float64")
    assert got[7] == td.aval((), "float32") and got[8] == td.aval((2,), "float64")

    ids, objs, lock = {}, [], threading.Lock()
    assert _core.intern_ids(ids, objs, ["a", ("b", 1), "a"], lock) == [0, 1, 0] \
        and objs == ["a", ("b", 1)]
    with pytest.raises(TypeError, match="hashable, got list"):
        _core.intern_ids(ids, objs, ["c", [1]], lock)
    assert not lock.locked()  # given back on the error too
    with pytest.raises(ZeroDivisionError):
        _core.call_locked(lock, lambda: 1 / 0)
    assert not lock.locked() and _core.call_locked(lock, max, 2, 5) == 5

    def f(x):
        return {"a": (x, [x * 2.0]), "b": 3.0}

    fn = td.jit(f)
    out = fn(np.ones(2))
    assert np.allclose(out["a"][1][0], 2.0) and float(out["b"]) == 3.0
    assert isinstance(out["a"], tuple) and isinstance(out["a"][1], list)
    with pytest.raises(TypeError, match="must return arrays or tuples/lists/dicts of them, got "
                                        "object"):
        td.jit(lambda x: object())(1.0)
