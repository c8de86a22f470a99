"""materialize_merge and compile on random multi-fragment DAGs, against a plain Python reference."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

import tidu as td
from tidu import ops as P


def _reference_reachable(outputs):
    """Reachable op keys by a recursive Python walk over ValKey.op_key()."""
    seen, ops = set(), set()

    def visit(k):
        if k in seen:
            return
        seen.add(k)
        spec = k.op_key()
        if spec is not None:
            ops.add((spec[0], spec[1], spec[2]))
            for i in spec[1]:
                visit(i)

    for k in outputs:
        visit(k)
    return seen, ops


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.booleans(),
                          st.integers(0, 3)), min_size=1, max_size=120),
       st.integers(1, 4))
def test_random_dag_across_fragments(steps, n_frags):
    """Values spread over several fragments (each the parent of the next), re-using each other's
    values as External references; the walk must equal the reference and be topological."""
    frags = []
    vals = []
    builders = []
    for f in range(n_frags):
        b = td.FragmentBuilder(parents=frags[-1:], prefix=f"f{f}_")
        builders.append(b)
        x = b.add_input(("x", f), td.aval((), "float64"))
        vals.append(b.key(td.Local(x)))
        chunk = steps[f::n_frags]
        for i, j, mul, _ in chunk:
            u, v = vals[i % len(vals)], vals[j % len(vals)]
            refs = [td.Local(b.local_of(k)) if b.local_of(k) is not None else td.External(k)
                    for k in (u, v)]
            (out,) = b.add_op(P.Mul() if mul else P.Add(), refs)
            vals.append(b.key(td.Local(out)))
        frags.append(b.build([vals[-1]]))
    picks = sorted({s[3] % len(vals) for s in steps})
    outputs = [vals[-1 - p] for p in picks]
    g = td.materialize_merge(td.resolve([frags[-1]]), outputs)
    ref_vals, ref_ops = _reference_reachable(outputs)
    assert set(g.vals) == ref_vals
    got_ops = g.ops()
    assert {(op, tuple(ins), mode) for op, ins, _, mode in got_ops} == ref_ops
    assert len(got_ops) == len(ref_ops)  # de-duplicated
    defined = set(g.inputs)
    for op, ins, outs, _ in got_ops:
        assert all(i in defined for i in ins)
        defined.update(outs)
    prog = td.compile(g)
    assert len(prog.executable.arrays["slot_aval"]) == len(ref_vals)


def test_large_random_dag_walk_matches_reference():
    """Thousands of nodes with long-range edges: the walk's id maps leave their dense window."""
    import random

    rng = random.Random(7)
    b = td.FragmentBuilder()
    vals = [b.key(td.Local(b.add_input(k, td.aval((), "float64")))) for k in ("x", "y")]
    for _ in range(20_000):
        u, v = rng.choice(vals), rng.choice(vals)
        refs = [td.Local(b.local_of(u)), td.Local(b.local_of(v))]
        (out,) = b.add_op(P.Mul() if rng.random() < 0.5 else P.Add(), refs)
        vals.append(b.key(td.Local(out)))
    outputs = rng.sample(vals, 50)
    frag = b.build(outputs)
    g = td.materialize_merge(td.resolve([frag]), outputs)

    # iterative reference walk
    seen, stack = set(), list(outputs)
    while stack:
        k = stack.pop()
        if k in seen:
            continue
        seen.add(k)
        spec = k.op_key()
        if spec is not None:
            stack.extend(spec[1])
    assert set(g.vals) == seen
    defined = set(g.inputs)
    for op, ins, outs, _ in g.ops():
        assert all(i in defined for i in ins)
        defined.update(outs)
    td.compile(g)
