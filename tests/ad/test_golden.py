"""Golden tests of seed 000 §IX and the (x+x)*x example of seed 001, through the public
seven-step pipeline exactly as DESIGN §4 shows it."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

S = td.spec((), "float64")


def run(frags, outputs, feed):
    return td.compile(td.materialize_merge(td.resolve(frags), outputs))(feed)


def ct_key_of(T):
    (key,) = [k for _, k in T.tangent_inputs]
    return key


def t_key_of(L):
    (key,) = [k for _, k in L.tangent_inputs]
    return key


def linear_ops(frag):
    return [(op.name, str(mode)) for op, _, _, mode in frag.ops() if mode.is_linear]


# ---- the worked example of DESIGN §4 ----

def test_worked_example_as_written():
    F0 = td.build(lambda x, a: td.exp(a * x), x=td.spec((), "float64"), a=td.spec((), "float64"))
    (y,) = F0.outputs
    L1 = td.differentiate(td.resolve([F0]), outputs=[y], wrt=["x"])
    T1 = td.transpose(L1)
    (ct_key,) = [key for _, key in T1.tangent_inputs]
    (ct_x,) = T1.tangent_outputs
    prog = td.compile(td.materialize_merge(td.resolve([F0, T1]), outputs=[y, ct_x]))
    y_val, ct_x_val = prog({"x": 0.5, "a": 2.0, ct_key: 1.0})
    assert y_val == pytest.approx(np.exp(1.0)) and ct_x_val == pytest.approx(2 * np.exp(1.0))
    L2 = td.differentiate(td.resolve([F0, T1]), outputs=[ct_x], wrt=["x"])
    (d2,) = L2.tangent_outputs
    (v,) = run([F0, T1, L2], [d2], {"x": 0.5, "a": 2.0, ct_key: 1.0, t_key_of(L2): 1.0})
    assert v == pytest.approx(4 * np.exp(1.0))
    text = f"{F0}\n{L1.fragment}\n{T1.fragment}"
    assert "t1 = Mul(External(p1), Local(t0)) mode=Linear[fixed, active]" in text
    assert "t2 = Mul(External(p3), Local(t1)) mode=Linear[fixed, active]" in text
    assert "c1 = Mul(External(p3), Local(c0)) mode=Linear[fixed, active]" in text
    assert "c2 = Mul(External(p1), Local(c1)) mode=Linear[fixed, active]" in text


def test_primal_values_are_referenced_not_copied():
    F0 = td.build(lambda x, a: td.exp(a * x), x=S, a=S)
    L1 = td.differentiate(td.resolve([F0]), F0.outputs, ["x"])
    assert all(mode.is_linear for _, _, _, mode in L1.fragment.ops())
    assert L1.fragment.n_ops == 2  # no primal op was copied into the linear fragment
    externals = [r.key for _, refs, _, _ in L1.fragment.ops() for r in refs
                 if isinstance(r, td.External)]
    assert set(externals) <= set(F0.inputs) | set(F0.outputs)


# ---- §IX golden tests ----

def test_1_x_plus_x_accumulates_by_global_key():
    F0 = td.build(lambda x: x + x, x=S)
    L1 = td.differentiate(td.resolve([F0]), F0.outputs, ["x"])
    T1 = td.transpose(L1)
    (ct_x,) = T1.tangent_outputs
    assert ("Add", "Linear[active, active]") in linear_ops(T1.fragment)
    (v,) = run([F0, T1], [ct_x], {"x": 3.0, ct_key_of(T1): 1.0})
    assert v == 2.0


def test_2_x_times_y_distinct_reverse_sinks():
    F0 = td.build(lambda x, y: x * y, x=S, y=S)
    L1 = td.differentiate(td.resolve([F0]), F0.outputs, ["x", "y"])
    T1 = td.transpose(L1)
    ct_x, ct_y = T1.tangent_outputs
    assert ct_x != ct_y
    gx, gy = run([F0, T1], [ct_x, ct_y], {"x": 3.0, "y": 5.0, ct_key_of(T1): 1.0})
    assert (gx, gy) == (5.0, 3.0)
    assert ("Mul", "Linear[fixed, active]") in linear_ops(L1.fragment)
    assert ("Mul", "Linear[active, fixed]") in linear_ops(L1.fragment)
    assert not any(m == "Linear[active, active]" and n == "Mul" for n, m in
                   linear_ops(L1.fragment) + linear_ops(T1.fragment))


def test_3_complex_conj_only_in_transpose():
    C = td.spec((), "complex128")
    F0 = td.build(lambda c, z: c * z, c=C, z=C)
    L1 = td.differentiate(td.resolve([F0]), F0.outputs, ["z"])
    T1 = td.transpose(L1)
    assert "Conj" not in [op.name for op, *_ in L1.fragment.ops()]
    assert "Conj" in [op.name for op, *_ in T1.fragment.ops()]
    c, z = 2.0 + 3.0j, 0.5 - 1.0j
    (dy,) = run([F0, L1], L1.tangent_outputs, {"c": c, "z": z, t_key_of(L1): 1.0 + 0.0j})
    assert dy == pytest.approx(c)
    (ct_z,) = run([F0, T1], T1.tangent_outputs, {"c": c, "z": z, ct_key_of(T1): 1.0 + 0.0j})
    assert ct_z == pytest.approx(np.conj(c))  # the adjoint under Re<u, v>


def _second_order(fn, feed, wrt="x"):
    """FoF, FoR, RoF, RoR with unit seeds, all through resolve -> differentiate/transpose."""
    F0 = td.build(fn, **{k: S for k in feed})
    (y,) = F0.outputs
    L1 = td.differentiate(td.resolve([F0]), [y], [wrt])
    T1 = td.transpose(L1)
    t1, c1 = t_key_of(L1), ct_key_of(T1)
    (dy,) = L1.tangent_outputs
    (ct_x,) = T1.tangent_outputs
    res = {}
    # forward over forward
    L2 = td.differentiate(td.resolve([F0, L1]), [dy], [wrt])
    res["FoF"] = run([F0, L1, L2], L2.tangent_outputs, {**feed, t1: 1.0, t_key_of(L2): 1.0})[0]
    # forward over reverse
    L2r = td.differentiate(td.resolve([F0, T1]), [ct_x], [wrt])
    res["FoR"] = run([F0, T1, L2r], L2r.tangent_outputs, {**feed, c1: 1.0, t_key_of(L2r): 1.0})[0]
    # reverse over forward
    T2 = td.transpose(L2)
    res["RoF"] = run([F0, L1, L2, T2], T2.tangent_outputs, {**feed, t1: 1.0, ct_key_of(T2): 1.0})[0]
    # reverse over reverse
    T2r = td.transpose(L2r)
    res["RoR"] = run([F0, T1, L2r, T2r], T2r.tangent_outputs,
                     {**feed, c1: 1.0, ct_key_of(T2r): 1.0})[0]
    return res


def test_4_x_squared_second_order_table():
    res = _second_order(lambda x: x * x, {"x": 1.7})
    assert res == {"FoF": 2.0, "FoR": 2.0, "RoF": 2.0, "RoR": 2.0}


def test_5_exp_ax_second_order_table():
    x, a = 0.3, 1.5
    res = _second_order(lambda x, a: td.exp(a * x), {"x": x, "a": a})
    for mode, v in res.items():
        assert v == pytest.approx(a * a * np.exp(a * x), rel=1e-14), mode


def test_6_sum_exp_ax_transpose_uses_broadcast_in_dim():
    V = td.spec((2,), "float64")
    F0 = td.build(lambda x, a: td.sum(td.exp(a * x)), x=V, a=V)
    L1 = td.differentiate(td.resolve([F0]), F0.outputs, ["x"])
    T1 = td.transpose(L1)
    assert linear_ops(L1.fragment)[-1] == ("ReduceSum", "Linear[active]")
    assert ("BroadcastInDim", "Linear[active]") in linear_ops(T1.fragment)
    x, a = np.array([0.3, -0.2]), np.array([1.5, 2.0])
    (ct_x,) = run([F0, T1], T1.tangent_outputs, {"x": x, "a": a, ct_key_of(T1): 1.0})
    np.testing.assert_allclose(ct_x, a * np.exp(a * x), rtol=1e-14)


def test_7_exp_ax_third_order_closure_over_fragments():
    F0 = td.build(lambda x, a: td.exp(a * x), x=S, a=S)
    frags, out, feed = [F0], F0.outputs[0], {"x": 0.3, "a": 1.5}
    for _ in range(3):  # resolve -> differentiate, three times, no merge in between
        L = td.differentiate(td.resolve(frags), [out], ["x"])
        frags.append(L)
        feed[t_key_of(L)] = 1.0
        (out,) = L.tangent_outputs
    (v,) = run(frags, [out], feed)
    assert v == pytest.approx(1.5 ** 3 * np.exp(0.45), rel=1e-14)


# ---- seed 001: transpose of (x + x) * x ----

def test_x_plus_x_times_x_transpose_worked_example():
    F0 = td.build(lambda x: (x + x) * x, x=S)
    L1 = td.differentiate(td.resolve([F0]), F0.outputs, ["x"])
    T1 = td.transpose(L1)
    ops = [(op.name, str(mode)) for op, _, _, mode in T1.fragment.ops()]
    # two Muls (one per fixed side) and the two accumulation Adds into t0's bucket
    assert ops.count(("Mul", "Linear[fixed, active]")) + \
        ops.count(("Mul", "Linear[active, fixed]")) == 2
    assert ops.count(("Add", "Linear[active, active]")) == 2
    (ct_x,) = T1.tangent_outputs
    for x in (0.5, -2.0):
        (v,) = run([F0, T1], [ct_x], {"x": x, ct_key_of(T1): 1.0})
        assert v == pytest.approx(4 * x)
    L2 = td.differentiate(td.resolve([F0, T1]), [ct_x], ["x"])  # FoR
    (v,) = run([F0, T1, L2], L2.tangent_outputs, {"x": 0.5, ct_key_of(T1): 1.0,
                                                   t_key_of(L2): 1.0})
    assert v == pytest.approx(4.0)


# ---- vector examples: adjoint identity and finite differences ----

@pytest.mark.parametrize("fn", [lambda x, a: td.exp(a * x), lambda x, a: td.sum(td.exp(a * x))])
def test_vector_examples_adjoint_identity_and_fd(fn):
    V = td.spec((2,), "float64")
    F0 = td.build(fn, x=V, a=V)
    (y,) = F0.outputs
    L1 = td.differentiate(td.resolve([F0]), [y], ["x"])
    T1 = td.transpose(L1)
    rng = np.random.default_rng(1)
    x, a, t_x = rng.standard_normal(2), rng.standard_normal(2), rng.standard_normal(2)
    ct_y = rng.standard_normal(y.shape)
    (dy,) = run([F0, L1], L1.tangent_outputs, {"x": x, "a": a, t_key_of(L1): t_x})
    (ct_x,) = run([F0, T1], T1.tangent_outputs, {"x": x, "a": a, ct_key_of(T1): ct_y})
    assert np.sum(ct_y * dy) == pytest.approx(np.sum(ct_x * t_x), rel=1e-13)
    f = td.jit(lambda x, a: fn(x, a))
    eps = 1e-6
    fd = (f(x + eps * t_x, a) - f(x - eps * t_x, a)) / (2 * eps)
    np.testing.assert_allclose(dy, fd, rtol=1e-7, atol=1e-9)


def test_transforms_record_their_tangent_input_ids():
    """differentiate and transpose hand on the ids of the inputs they declare; transpose reads
    them, and finds the same inputs by key when a LinearFragment comes without them."""
    import dataclasses

    F0 = td.build(lambda x, y: td.sin(x * y) + x, x=S, y=S)
    view = td.resolve([F0])
    L1 = td.differentiate(view, F0.outputs, ["x", "y", "x"])  # a key twice: one tangent input
    by_key = {k.input_key: k.id for k in L1.fragment.inputs}
    assert L1.input_ids == [by_key[t] for _, t in L1.tangent_inputs]
    assert L1.input_ids[0] == L1.input_ids[2]
    x, y = 0.3, -1.2
    for T1 in (td.transpose(L1), td.transpose(dataclasses.replace(L1, input_ids=[]))):
        ct = {k.input_key: k.id for k in T1.fragment.inputs}
        assert T1.input_ids == [ct[t] for _, t in T1.tangent_inputs]
        # the cotangents, evaluated: y cos(xy) + 1 for x (listed twice), x cos(xy) for y
        g = td.compile(td.materialize_merge(td.resolve([F0, T1]), T1.tangent_outputs),
                       backend="cpu")
        got = g({"x": x, "y": y, **{t: 1.0 for _, t in T1.tangent_inputs}})
        np.testing.assert_allclose(got, [y * np.cos(x * y) + 1, x * np.cos(x * y),
                                         y * np.cos(x * y) + 1], rtol=1e-14)


def test_builder_add_inputs_is_add_input_in_one_pass():
    b = td.FragmentBuilder()
    avs = [S, td.spec((2,)), S]
    many = b.add_inputs(["a", "b", "a"], avs)
    assert many == [b.add_input("a", S), b.add_input("b", td.spec((2,))), b.add_input("a", S)]
    assert many[0] == many[2]
    with pytest.raises(TypeError, match="hashable"):
        b.add_inputs([["unhashable"]], [S])
    with pytest.raises(ValueError, match="2 input keys for 1"):
        b.store.add_inputs([1, 2], [S.id])


# ---- errors ----

def test_differentiate_errors():
    F0 = td.build(lambda x, n: x * td.astype(n, "float64"), x=S, n=td.spec((), "int32"))
    view = td.resolve([F0])
    with pytest.raises(TypeError, match="'n': dtype int32 is not differentiable"):
        td.differentiate(view, F0.outputs, ["n"])
    with pytest.raises(td.GraphError, match="'zz'"):
        td.differentiate(view, F0.outputs, ["zz"])
    with pytest.raises(TypeError, match="LinearFragment"):
        td.transpose(F0)


def test_missing_rule_names_the_primitive():
    from dataclasses import dataclass

    from tidu.extend import Primitive
    from tidu.ad.rules import RuleMissing

    @dataclass(frozen=True)
    class Cube(Primitive):  # a user primitive with a shape rule but no linearize
        def abstract_eval(self, x):
            return x

    b = td.FragmentBuilder()
    x = b.add_input("x", td.aval((), "float64"))
    (y,) = b.add_op(Cube(), [td.Local(x)])
    frag = b.build([td.Local(y)])
    with pytest.raises(RuleMissing, match="Cube has no linearize rule"):
        td.differentiate(td.resolve([frag]), frag.outputs, ["x"])


def test_stop_gradient_and_integer_paths_carry_no_tangent():
    F0 = td.build(lambda x: td.stop_gradient(x) * x + td.sign(x), x=S)
    L1 = td.differentiate(td.resolve([F0]), F0.outputs, ["x"])
    (d,) = run([F0, L1], L1.tangent_outputs, {"x": 3.0, t_key_of(L1): 1.0})
    assert d == 3.0  # d/dx [sg(x) * x] = sg(x)
    F1 = td.build(lambda x: td.exp(x) > 1.0, x=S)
    assert td.differentiate(td.resolve([F1]), F1.outputs, ["x"]).tangent_outputs == [None]


def test_saved_values_of_a_vjp():
    M = td.spec((3, 3), "float64")
    F0 = td.build(lambda x, w: td.sum(td.tanh(x @ w)), x=M, w=M)
    T1 = td.transpose(td.differentiate(td.resolve([F0]), F0.outputs, ["w"]))
    saved = td.saved_values(T1)
    names = {s.key.input_key if s.key.is_input else s.key.op_key()[0].name for s in saved}
    assert "x" in names and "Tanh" in names and "w" not in names
    assert all(s.nbytes == 72 for s in saved)
    # the compiled VJP reports the same forward values kept for its backward part
    prog = td.compile(td.materialize_merge(td.resolve([F0, T1]), T1.tangent_outputs))
    derived = sum(s.nbytes for s in saved if not s.key.is_input)
    assert prog.memory_report()["saved_bytes"] == derived > 0
