"""A primitive defined from Python, as docs/extending.md shows: traced, differentiated to second
order, evaluated through its Python kernel."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import tidu as td
from tidu.testing import check_grads

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def _doc_example():
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    code = code.replace("print(td.grad(f)(np.array([0.5, -1.0])))", "")
    # tests/test_docs.py runs the same block, and a primitive's name is registered once per process
    code = code.replace("Softplus", "SoftplusFromDocs")
    ns: dict = {}
    exec(compile(code, str(DOC), "exec"), ns)
    return ns


def test_documented_user_primitive_works_end_to_end():
    ns = _doc_example()
    Softplus, f = ns["SoftplusFromDocs"], ns["f"]
    x = np.array([0.5, -1.0, 2.0])
    sp = np.logaddexp(0, x)
    sig = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(td.jit(f)(x), np.sum(sp * x), rtol=1e-12)
    np.testing.assert_allclose(td.grad(f)(x), sig * x + sp, rtol=1e-12)
    check_grads(lambda x: td.apply(Softplus(), x) * x, [x], order=2)
    F0 = td.build(lambda x: td.apply(Softplus(), x), x=td.spec((3,)))
    prog = td.compile(td.materialize_merge(td.resolve([F0]), F0.outputs))
    assert prog.executable.native is None  # no C++ opcode: the Python kernel evaluates it
    np.testing.assert_allclose(prog({"x": x})[0], sp, rtol=1e-12)
