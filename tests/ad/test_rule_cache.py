"""AD rule templates: replaying a recorded rule call gives exactly the nodes the rule would emit.

Every check runs the same transforms three times, with the cache off (each rule called: the
reference), on from empty (rules called and recorded) and on again (replayed), and asserts the
fragments hold the same global op ids in the same order: hash-consing makes that id-identity.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tidu as td
from tidu import _core, ad
from tidu.ops import Add, Cos, Mul
from tidu.extend import INEXACT, Primitive, check_dtype
from tidu.extend import fix, scale
from tidu.ad.rules import register


pytestmark = pytest.mark.usefixtures("no_reclaim")  # ids of successive builds compared


@contextlib.contextmanager
def rule_cache(enabled: bool, clear: bool = False):
    if clear:
        _core.clear_rule_cache()
    prev = ad.set_rule_cache(enabled)
    try:
        yield
    finally:
        ad.set_rule_cache(prev)


def _program(recipe, ns):
    """A function of x, y from (fn, pick, combine) steps over the values built so far."""
    def f(x, y):
        vals = [x, y]
        for fn, pick, comb in recipe:
            u = vals[-1]
            v = vals[pick % len(vals)]
            w = {"s": lambda: ns.sin(u), "c": lambda: ns.cos(u), "e": lambda: ns.exp(ns.sin(u)),
                 "l": lambda: ns.log(1.0 + u * u), "t": lambda: ns.tanh(u),
                 "q": lambda: ns.sqrt(2.0 + u * u), "n": lambda: -u, "i": lambda: u}[fn]()
            vals.append({"m": lambda: w * v, "a": lambda: w + v, "s": lambda: w - v,
                         "d": lambda: w / (2.0 + v * v), "x": lambda: w * w}[comb]())
        return td.sum(vals[-1]) if vals[-1].shape else vals[-1]
    return f


def _transforms(f, av):
    """FoR pipeline with external seeds (no fresh pass-id keys): op ids and listings of every
    derived fragment, and the ids of its results."""
    F0 = td.build(f, x=td.spec(av.shape, av.dtype), y=td.spec(av.shape, av.dtype))
    sb = td.FragmentBuilder(prefix="s")
    tx, ty, tx2 = (sb.key(td.Local(sb.add_input(k, av))) for k in ("tx", "ty", "tx2"))
    (out,) = F0.outputs
    ct = sb.key(td.Local(sb.add_input("ct", out.aval)))
    seeds = sb.build([tx, ty, tx2, ct])
    L1 = ad.differentiate(td.resolve([F0]), [out], ["x", "y"], tangents=[tx, ty])
    T1 = ad.transpose(L1, cotangents=[ct])
    grads = [k for k in T1.tangent_outputs if k is not None]
    derived = [L1, T1]
    if grads:
        L2 = ad.differentiate(td.resolve([F0, T1, seeds]), grads, ["x"], tangents=[tx2])
        T2 = ad.transpose(L2, cotangents=[g for g in grads])
        derived += [L2, T2]
    return ([list(d.fragment.store.ops()) for d in derived],
            [str(d.fragment) for d in derived],
            [[None if k is None else k.id for k in d.tangent_outputs] for d in derived])


def _three_ways(f, av):
    with rule_cache(False):
        ref = _transforms(f, av)
    with rule_cache(True, clear=True):
        recorded = _transforms(f, av)
    with rule_cache(True):
        before = ad.rule_cache_info()["hits"]
        replayed = _transforms(f, av)
        hits = ad.rule_cache_info()["hits"] - before
    assert recorded == ref
    assert replayed == ref
    return ref, hits


_steps = st.lists(st.tuples(st.sampled_from("scelqtni"), st.integers(0, 50),
                            st.sampled_from("masdx")), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None)
@given(_steps, st.sampled_from([((), "float64"), ((3,), "float64"), ((), "complex128"),
                                ((2,), "float32")]))
def test_replayed_fragments_are_id_identical_to_calling_the_rules(recipe, shape_dtype):
    av = td.aval(*shape_dtype)
    _, hits = _three_ways(_program(recipe, td), av)
    assert hits > 0  # the third run replays


def test_aliasing_is_part_of_the_call_shape():
    """x * x and x * y linearize differently (one tangent used twice vs two): recording one must
    not answer the other."""
    av = td.aval((), "float64")
    with rule_cache(True, clear=True):
        _transforms(lambda x, y: x * y, av)  # records Mul with distinct operands
        (ops_xx, _, _) = _transforms(lambda x, y: x * x + y, av)
    with rule_cache(False):
        assert _transforms(lambda x, y: x * x + y, av)[0] == ops_xx


def test_gradient_values_agree_with_cache_on_and_off():
    recipe = [("e", 1, "m"), ("l", 0, "a"), ("s", 3, "d"), ("t", 2, "x")]
    f = _program(recipe, td)
    x, y = 0.3, -0.7
    with rule_cache(False):
        ref = td.grad(f, argnums=(0, 1))(x, y)
        ref_h = td.hessian(f)(x, y)
    with rule_cache(True, clear=True):
        got = td.grad(f, argnums=(0, 1))(x, y)
        got_h = td.hessian(f)(x, y)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    np.testing.assert_array_equal(np.asarray(got_h), np.asarray(ref_h))


# ---- user primitives ----

@register
@dataclass(frozen=True)
class ScaledSin(Primitive):
    """k * sin(x): an attribute the linearization depends on (the op instance keys templates)."""

    k: float = 1.0

    def abstract_eval(self, x):
        check_dtype(self.name, x, INEXACT, "floating or complex")
        return x

    def impl(self, x):
        return self.k * np.sin(x)

    def linearize(self, b, primal_in, primal_out, t):
        from tidu.extend import const

        (x,) = primal_in
        return [scale(b, fix(b, Mul(), const(b, self.k, x.aval), fix(b, Cos(), x)), t[0])]


def test_user_primitive_attributes_key_the_templates():
    av = td.aval((3,), "float64")
    x = np.array([0.1, 0.5, -2.0])
    for k in (2.0, -3.0, 2.0):
        f = lambda x, y: td.sum(td.apply(ScaledSin(k), x) * y)  # noqa: E731
        _three_ways(f, av)
        with rule_cache(True):
            g = td.grad(lambda x: td.sum(td.apply(ScaledSin(k), x)))(x)
        np.testing.assert_allclose(g, k * np.cos(x), rtol=1e-12)


@register
@dataclass(frozen=True)
class CountedSin(Primitive):
    """A primitive that opts out of templates: its rule runs on every call."""

    rule_cache = False
    calls = [0]

    def abstract_eval(self, x):
        return x

    def impl(self, x):
        return np.sin(x)

    def linearize(self, b, primal_in, primal_out, t):
        CountedSin.calls[0] += 1
        return [scale(b, fix(b, Cos(), primal_in[0]), t[0])]


def test_rule_cache_false_calls_the_rule_every_time():
    f = lambda x: td.apply(CountedSin(), td.apply(CountedSin(), x))  # noqa: E731
    with rule_cache(True):
        for n in range(1, 4):
            F0 = td.build(f, x=td.spec(()))
            ad.differentiate(td.resolve([F0]), F0.outputs, ["x"])
            assert CountedSin.calls[0] == 2 * n


@register
@dataclass(frozen=True)
class Outsider(Primitive):
    """A rule that reads the graph around its call (the operand of its operand's op), breaking
    the contract: its call shape does not determine what it emits, so no template may be kept."""

    def abstract_eval(self, x):
        return x

    def impl(self, x):
        return np.sin(x)

    def linearize(self, b, primal_in, primal_out, t):
        spec = primal_in[0].op_key()
        base = spec[1][0] if spec is not None else primal_in[0]
        return [scale(b, fix(b, Cos(), base), t[0])]


def test_rule_reaching_outside_its_call_is_not_replayed():
    f = lambda x, y: td.apply(Outsider(), x * x) + td.apply(Outsider(), y * y)  # noqa: E731
    _three_ways(f, td.aval((), "float64"))
    assert ad.rule_cache_info()["unrecordable"] >= 1


def test_add_rule_accumulation_matches_golden_worked_example():
    """(x + x) * x: accumulation Adds replayed from templates keep the seeds' listing."""
    with rule_cache(True, clear=True):
        for _ in range(2):
            F0 = td.build(lambda x: (x + x) * x, x=td.spec(()))
            T1 = ad.transpose(ad.differentiate(td.resolve([F0]), F0.outputs, ["x"]))
            adds = [op for op, _, _, mode in T1.fragment.ops() if isinstance(op, Add)]
            assert len(adds) == 2


@pytest.mark.parametrize("enabled", [True, False])
def test_set_rule_cache_returns_previous(enabled):
    prev = ad.set_rule_cache(enabled)
    try:
        assert ad.rule_cache_info()["enabled"] is enabled
    finally:
        ad.set_rule_cache(prev)
