"""What an evaluation allocates, nested programs included: ``memory_report()["workspace_bytes"]``
counts the workspaces of loop bodies and branches (recursively) and loop carry buffers, where
``arena_bytes`` is the top-level plan only; ``td.load(path, max_bytes=, max_instructions=)``
refuses programs over the caller's caps before any workspace exists."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support import forge, forge_gen

BIG = 1 << 27  # float64 elements: 1 GiB


def _nested(x):
    """A 1 GiB intermediate inside a scan body inside a while body inside a cond branch."""
    def scan_body(c, _):
        # a max: a chain ending in a sum would take the sum block by block, with no 1 GiB buffer
        return c + td.max(td.broadcast_to(c, (BIG,)) * 2.0), None

    def while_body(s):
        return td.scan(scan_body, s[0], None, length=2)[0], s[1] + 1.0

    def branch(x):
        return td.while_loop(lambda s: s[1] < 3.0, while_body, (x, 0.0))[0]

    return td.cond(x > 0, branch, lambda x: x, x)


def test_workspace_bytes_count_nested_programs(tmp_path):
    lowered = td.jit(_nested).lower(1.0)
    rep = lowered.program.memory_report()
    assert rep["arena_bytes"] < 4096  # the top level holds scalars only
    assert rep["workspace_bytes"] >= BIG * 8 > rep["arena_bytes"]
    assert rep["workspace_bytes"] < BIG * 8 + (1 << 20)  # and not much more: one such buffer
    assert rep["instructions"] > len(lowered.program.executable.arrays["instr_prim"])
    lowered.save(tmp_path / "nested.tidu")
    loaded = td.load(tmp_path / "nested.tidu")
    assert loaded.memory_report() == {k: rep[k] for k in loaded.memory_report()}


def test_load_refuses_programs_over_the_callers_caps(tmp_path):
    path = tmp_path / "nested.tidu"
    td.jit(_nested).lower(1.0).save(path)
    rep = td.load(path).memory_report()
    with pytest.raises(ValueError, match=r"bytes of workspace \(nested programs included"):
        td.load(path, max_bytes=64 << 20)
    with pytest.raises(ValueError, match="instructions"):
        td.load(path, max_instructions=rep["instructions"] - 1)
    ok = td.load(path, max_bytes=rep["workspace_bytes"], max_instructions=rep["instructions"])
    assert ok.memory_report()["workspace_bytes"] == rep["workspace_bytes"]
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(ValueError, match="max_bytes"):
            td.load(path, max_bytes=bad)
    td.load(path, max_bytes=2**80)  # larger than any size: caps nothing


def test_a_capped_load_evaluates_within_its_cap(tmp_path):
    """A program under the cap evaluates to numpy's values: the cap does not change results."""
    f = td.jit(lambda x: td.scan(lambda c, xi: (c * 0.5 + xi, td.sin(c)), x[0], x)[1])
    x = np.linspace(0, 1, 50).reshape(10, 5)
    f.lower(x).save(tmp_path / "scan.tidu")
    rep = td.load(tmp_path / "scan.tidu").memory_report()
    p = td.load(tmp_path / "scan.tidu", max_bytes=rep["workspace_bytes"])
    c, want = x[0], []
    for xi in x:
        want.append(np.sin(c))
        c = c * 0.5 + xi
    np.testing.assert_allclose(p.eval([x])[0], np.array(want), rtol=1e-15)


def test_a_forged_small_file_with_a_huge_nested_arena_is_counted(tmp_path):
    """The issue's file: a few hundred bytes, top-level arena_bytes tiny, a loop body whose
    arena is 1 GiB (a dead Iota added to a seed's nested program, tests/_support/forge_gen.py)."""
    q = forge.parse(forge_gen.seeds()["while_cond"])
    body = q.subs[1] if len(q.subs) > 1 else q.subs[0]
    forge_gen.add_dead_iota(body, "float64", BIG)
    data = q.to_bytes()
    assert len(data) < 4096
    (tmp_path / "forged.tidu").write_bytes(data)
    rep = td.load(tmp_path / "forged.tidu").memory_report()
    assert rep["arena_bytes"] < 4096 <= BIG * 8 <= rep["workspace_bytes"]
    with pytest.raises(ValueError, match="workspace"):
        td.load(tmp_path / "forged.tidu", max_bytes=64 << 20)
