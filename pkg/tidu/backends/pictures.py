"""Pictures of graphs: Graphviz DOT text for fragments, materialized graphs and compiled programs,
and ``show`` to render one to SVG/PNG (needs the ``viz`` extra: the ``graphviz`` package and
Graphviz's ``dot`` program).

Conventions in every picture: inputs are ellipses, ops are boxes; Primal ops are blue, Linear ops
orange with their active mask in the label; outputs have a double border.  A fragment's External
references are drawn as dashed edges from its parent fragments, each drawn as a cluster; a
compiled program that XLA compiles in several segments (the fused runs of
``tidu.xla.MAX_FUSED_INSTRUCTIONS`` instructions) has one cluster per segment.

The text is generated here with no dependency; ``show`` alone needs graphviz.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tidu.backends.xla.segments import MAX_FUSED_INSTRUCTIONS, segment_bounds
from tidu.graph import Fragment, Local, MaterializedGraph, ValKey, mode_of

__all__ = ["fragment_to_dot", "graph_to_dot", "program_to_dot", "show", "to_dot"]

_PRIMAL = 'style=filled fillcolor="#dbe9f6" color="#2f5d8a"'
_LINEAR = 'style=filled fillcolor="#fde2c4" color="#b35900"'
_INPUT = 'shape=ellipse style=filled fillcolor="#eeeeee"'


def _q(s: str) -> str:
    """A DOT double-quoted string."""
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _op_style(mode) -> str:
    return _LINEAR if mode.is_linear else _PRIMAL


def _op_label(lhs: str, op, mode, aval) -> str:
    attrs = op.attrs() if hasattr(op, "attrs") else []
    head = f"{lhs} = {op.name}" + (f"({', '.join(attrs)})" if attrs else "")
    tail = f"\n{mode}" if mode.is_linear else ""
    return f"{head}\n{aval}{tail}"


# ---- fragments ----

class _FragmentDrawing:
    """Node names for values of the fragments drawn, by global value id."""

    def __init__(self):
        self.node: dict[int, str] = {}   # value id -> DOT node
        self.port: dict[int, str] = {}   # value id -> edge label for multi-output ops
        self.lines: list[str] = []
        self.n_frag = 0
        self.drawn: set[int] = set()

    def add(self, frag, indent: str, cluster: bool, parents: bool) -> None:
        k = self.n_frag
        self.n_frag += 1
        p = frag.prefix
        self.drawn.add(id(frag))
        if parents:  # drawn first, so External references find their nodes
            for parent in frag.parents:
                if id(parent) not in self.drawn:
                    self.add(parent, indent, True, parents)
        body = indent + "  " if cluster else indent
        if cluster:
            self.lines.append(f"{indent}subgraph cluster_{k} {{")
            self.lines.append(f"{body}label={_q(f'fragment {p}')} style=dashed color=gray50")
        for i in sorted(int(i) for i in frag.store.inputs()):
            key = frag.key_of(i)
            name = f"f{k}_{i}"
            self.node[key.id] = name
            label = f"{p}{i} = Input({key.input_key!r})\n{key.aval}"
            self.lines.append(f"{body}{name} [label={_q(label)} {_INPUT}]")
        outs = {o.id for o in frag.outputs}
        edges = []
        for op, refs, locs, mode in frag.ops():
            name = f"f{k}_{locs[0]}"
            keys = [frag.key_of(l) for l in locs]
            for j, key in enumerate(keys):
                self.node[key.id] = name
                if len(keys) > 1:
                    self.port[key.id] = f"[{j}]"
            lhs = ", ".join(f"{p}{l}" for l in locs)
            per = " peripheries=2" if any(key.id in outs for key in keys) else ""
            self.lines.append(f"{body}{name} [shape=box label="
                              f"{_q(_op_label(lhs, op, mode, keys[0].aval))} "
                              f"{_op_style(mode)}{per}]")
            for pos, r in enumerate(refs):
                if isinstance(r, Local):
                    src_id = frag.key_of(r.id).id
                    edges.append((src_id, name, pos, False))
                else:
                    edges.append((r.key.id, name, pos, True))
        if cluster:
            self.lines.append(f"{indent}}}")
        for src_id, dst, pos, external in edges:
            src = self.node.get(src_id)
            if src is None:  # defined in no fragment drawn: a node naming the key

                src = f"ext_{src_id}"
                self.node[src_id] = src
                self.lines.append(f"{indent}{src} [shape=box style=dashed "
                                  f"label={_q(f'External({ValKey(src_id)!r})')}]")
            lab = self.port.get(src_id, "")
            attrs = [f"label={_q(lab)}"] if lab else []
            if external:
                attrs.append("style=dashed")
            self.lines.append(f"{indent}{src} -> {dst}" +
                              (f" [{' '.join(attrs)}]" if attrs else ""))

def fragment_to_dot(frag, parents: bool = True) -> str:
    """A fragment (or a LinearFragment) as DOT: its inputs and ops; with ``parents`` (default)
    the fragments it references drawn as clusters, its External references as dashed edges
    from them."""
    frag = getattr(frag, "fragment", frag)
    d = _FragmentDrawing()
    d.add(frag, "  ", bool(parents and frag.parents), parents)
    return _digraph(d.lines)


def _digraph(lines: list[str], name: str = "tidu") -> str:
    head = [f"digraph {name} {{", "  rankdir=TB", '  node [fontname="Helvetica" fontsize=10]',
            '  edge [fontname="Helvetica" fontsize=9]']
    return "\n".join(head + lines + ["}"]) + "\n"


# ---- materialized graphs ----

def graph_to_dot(graph) -> str:
    """A MaterializedGraph as DOT: values ``v0, v1, ...`` as in its listing."""
    names = {v.id: f"v{i}" for i, v in enumerate(graph.vals)}
    outs = {o.id for o in graph.outputs}
    lines = []
    for k in graph.inputs:
        per = " peripheries=2" if k.id in outs else ""
        lines.append(f"  {names[k.id]} [label={_q(f'{names[k.id]} = Input({k.input_key!r})')}"
                     f" {_INPUT}{per}]")
    node: dict[int, str] = {k.id: names[k.id] for k in graph.inputs}
    for op, ins, out_keys, mode in graph.ops():
        name = names[out_keys[0].id]
        lhs = ", ".join(names[o.id] for o in out_keys)
        per = " peripheries=2" if any(o.id in outs for o in out_keys) else ""
        lines.append(f"  {name} [shape=box label={_q(_op_label(lhs, op, mode, out_keys[0].aval))}"
                     f" {_op_style(mode)}{per}]")
        for j, o in enumerate(out_keys):
            node[o.id] = name
        for i in ins:
            lines.append(f"  {node[i.id]} -> {name}")
    return _digraph(lines)


# ---- compiled programs ----

def _segment_bounds(n: int) -> list[tuple[int, int]]:
    """The instruction ranges XLA compiles separately (tidu.xla.lower_segments)."""
    return segment_bounds(n, MAX_FUSED_INSTRUCTIONS)


def program_to_dot(prog) -> str:
    """A CompiledProgram as DOT: one node per instruction (``i3: Mul -> s5``), inputs by their
    names (``prog.input_names()``), edges along slots; segments XLA compiles separately as
    clusters."""
    ex = prog.executable
    a = ex.arrays
    modes = [mode_of(int(m)) for m in a["instr_mode"].tolist()]
    avals = ex.slot_avals
    outs = {int(s) for s in ex.output_slots}
    writer: dict[int, str] = {}
    lines = []
    for name, s in zip(prog.input_names(), ex.input_slots.tolist()):
        per = " peripheries=2" if s in outs else ""
        label = f"{name}: s{s}\n{avals[s]}"
        lines.append(f"  in{s} [label={_q(label)} {_INPUT}{per}]")
        writer[s] = f"in{s}"
    instrs = ex.instructions
    bounds = _segment_bounds(len(instrs)) if len(instrs) else []
    clustered = len(bounds) > 1
    edges = []
    for b, (start, stop) in enumerate(bounds):
        ind = "    " if clustered else "  "
        if clustered:
            lines.append(f"  subgraph cluster_seg{b} {{")
            lines.append(f"    label={_q(f'XLA segment {b}: instructions {start}..{stop - 1}')}"
                         f" style=dashed color=gray50")
        for i in range(start, stop):
            op, ins, out_slots = instrs[i]
            mode = modes[i]
            lhs = ", ".join(f"s{s}" for s in out_slots)
            per = " peripheries=2" if any(s in outs for s in out_slots) else ""
            label = _op_label(f"i{i}: {lhs}", op, mode, avals[out_slots[0]])
            lines.append(f"{ind}i{i} [shape=box label={_q(label)} {_op_style(mode)}{per}]")
            for s in ins:
                edges.append((s, f"i{i}"))
            for s in out_slots:
                writer[s] = f"i{i}"
        if clustered:
            lines.append("  }")
    for s, dst in edges:
        lines.append(f"  {writer[s]} -> {dst} [label={_q(f's{s}')}]")
    return _digraph(lines)


# ---- show ----

def to_dot(obj, parents: bool = True) -> str:
    """Graphviz DOT text of a Fragment, LinearFragment (its fragment), MaterializedGraph,
    CompiledProgram or a jit's lowered program (or DOT text itself). For fragments, ``parents``
    draws the parent fragments as clusters with External references as dashed edges."""
    if isinstance(obj, str):
        return obj
    frag = getattr(obj, "fragment", obj)  # a LinearFragment draws its fragment
    if isinstance(frag, Fragment):
        return fragment_to_dot(frag, parents)
    if isinstance(obj, MaterializedGraph):
        return graph_to_dot(obj)
    fn = getattr(obj, "to_dot", None)  # CompiledProgram, Lowered
    if fn is None:
        raise TypeError(f"cannot draw a {type(obj).__name__}: expected a Fragment, "
                        f"LinearFragment, MaterializedGraph, CompiledProgram, a jit's lowered "
                        f"program or DOT text")
    return fn()


def show(obj, path=None, format: str | None = None) -> Any:  # noqa: A002 - graphviz's name
    """Render a graph as a picture with Graphviz.

    Args:
        obj: a Fragment, LinearFragment, MaterializedGraph, CompiledProgram, ``jit(f).lower(x)``
            result, or DOT text.
        path: the file to write (``graph.svg``, ``graph.png``); None: return the image bytes
            (SVG unless ``format`` says otherwise).
        format: ``"svg"``, ``"png"``, ``"pdf"``...; default: path's suffix, else svg.

    Returns:
        The path written, or the image bytes when path is None.

    Raises:
        ImportError: the ``graphviz`` Python package is missing (``pip install tidu[viz]``).
        RuntimeError: Graphviz's ``dot`` program is not installed (it is a system package:
            ``apt install graphviz``, ``brew install graphviz``).
    """
    text = to_dot(obj)
    try:
        import graphviz  # noqa: PLC0415 - optional dependency, imported on first use
    except ImportError:
        raise ImportError("tidu.show needs the graphviz Python package (pip install "
                          "'tidu[viz]') and Graphviz's dot program; tidu's to_dot() gives the "
                          "DOT text without either") from None
    if format is None:
        format = Path(path).suffix.lstrip(".").lower() if path is not None else "svg"
        format = format or "svg"
    try:
        data = graphviz.Source(text).pipe(format=format)
    except graphviz.ExecutableNotFound:
        raise RuntimeError("tidu.show needs Graphviz's dot program on PATH (a system package: "
                           "apt install graphviz, brew install graphviz)") from None
    if path is None:
        return data
    Path(path).write_bytes(data)
    return path
