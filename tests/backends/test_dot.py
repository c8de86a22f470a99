"""Pictures: DOT text of the seeds' worked example exp(a*x) (fragments, materialized graph,
compiled program), checked by parsing the text and, where installed, with pydot; td.show renders
it where graphviz and its dot program are installed."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import tidu as td


@pytest.fixture(scope="module")
def example():
    F0 = td.build(lambda x, a: td.exp(a * x), x=td.spec((), "float64"),
                  a=td.spec((), "float64"))
    (y,) = F0.outputs
    L1 = td.differentiate(td.resolve([F0]), outputs=[y], wrt=["x"])
    T1 = td.transpose(L1)
    (ct_x,) = T1.tangent_outputs
    graph = td.materialize_merge(td.resolve([F0, T1]), outputs=[y, ct_x])
    return F0, L1, T1, graph, td.compile(graph)


def parse(text: str):
    """(nodes {name: attribute text}, edges [(src, dst, attribute text)], clusters) of DOT text
    as tidu writes it (one statement per line)."""
    assert text.startswith("digraph") and text.rstrip().endswith("}")
    nodes, edges, clusters = {}, [], []
    for line in text.splitlines():
        line = line.strip()
        if m := re.fullmatch(r"(\w+) -> (\w+)(?: \[(.*)\])?", line):
            edges.append((m[1], m[2], m[3] or ""))
        elif m := re.fullmatch(r"subgraph (cluster_\w+) \{", line):
            clusters.append(m[1])
        elif m := re.fullmatch(r"(\w+) \[(.*)\]", line):
            if m[1] not in ("node", "edge"):
                nodes[m[1]] = m[2]
    for s, d, _ in edges:
        assert s in nodes and d in nodes, (s, d)
    return nodes, edges, clusters


def label(attrs: str) -> str:
    return re.search(r'label="((?:[^"\\]|\\.)*)"', attrs)[1]


def by_label(nodes, start):
    (name,) = [n for n, a in nodes.items() if label(a).startswith(start)]
    return name


def test_fragment_dot_has_the_example_nodes_and_edges(example):
    F0, *_ = example
    nodes, edges, clusters = parse(td.to_dot(F0))
    x, a = by_label(nodes, "p0 = Input('x')"), by_label(nodes, "p1 = Input('a')")
    mul, exp = by_label(nodes, "p2 = Mul"), by_label(nodes, "p3 = Exp")
    assert {(s, d) for s, d, _ in edges} == {(a, mul), (x, mul), (mul, exp)}
    assert "peripheries=2" in nodes[exp] and "peripheries=2" not in nodes[mul]  # the output
    assert clusters == []  # no parents


def test_transposed_fragment_draws_external_references_from_its_parents(example):
    F0, L1, T1, *_ = example
    nodes, edges, clusters = parse(td.to_dot(T1))
    assert len(clusters) == 3  # F0, L1's fragment, T1's fragment
    exp, a = by_label(nodes, "p3 = Exp"), by_label(nodes, "p1 = Input('a')")
    c1, c2 = by_label(nodes, "c1 = Mul"), by_label(nodes, "c2 = Mul")
    ct = by_label(nodes, "c0 = Input(ct0@")
    external = {(s, d) for s, d, at in edges if "dashed" in at}
    assert {(exp, c1), (a, c2)} <= external  # c1 = Mul(External(p3), ...), c2 = Mul(External(p1), ...)
    assert (ct, c1, "") in edges and (c1, c2, "") in edges
    assert "Linear[fixed, active]" in label(nodes[c1]) and "#fde2c4" in nodes[c1]
    assert "#dbe9f6" in nodes[exp]  # Primal and Linear styled apart
    own = td.to_dot(T1, parents=False)
    assert "p3 = Exp" not in own and "External(" in own


def test_graph_and_program_dot(example):
    *_, graph, prog = example
    nodes, edges, _ = parse(td.to_dot(graph))
    assert len(nodes) == 3 + graph.n_ops and len(edges) == 7  # 2 per Mul, 1 into Exp
    nodes, edges, clusters = parse(prog.to_dot())
    assert sorted(label(nodes[n]).split(":")[0] for n in nodes if n.startswith("in")) == \
        ["a", "ct[0]", "x"]
    assert len([n for n in nodes if n.startswith("i") and not n.startswith("in")]) == \
        prog.n_instructions
    assert clusters == []


def test_long_program_draws_xla_segments_as_clusters():
    from tidu.xla import MAX_FUSED_INSTRUCTIONS

    def chain(x):
        for _ in range(MAX_FUSED_INSTRUCTIONS + 10):
            x = td.sin(x)
        return x

    low = td.jit(chain).lower(np.ones(2))
    nodes, edges, clusters = parse(low.to_dot())
    assert len(clusters) == 2


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pyparsing's, inside pydot
def test_dot_parses_with_pydot(example):
    pydot = pytest.importorskip("pydot")
    *_, T1, graph, prog = example
    for text in (td.to_dot(T1), td.to_dot(graph), prog.to_dot()):
        (g,) = pydot.graph_from_dot_data(text)
        assert g.get_edges()


def test_show_renders_svg(example, tmp_path):
    pytest.importorskip("graphviz")
    if shutil.which("dot") is None:
        with pytest.raises(RuntimeError, match="dot program"):
            td.show(example[0], tmp_path / "f.svg")
        return
    path = td.show(example[2], tmp_path / "t.svg")
    assert "<svg" in path.read_text()


def test_show_of_something_else_is_a_type_error():
    with pytest.raises(TypeError, match="cannot draw a int"):
        td.show(3)
