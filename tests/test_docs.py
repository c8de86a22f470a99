"""The documentation runs as written: every ```python block of README.md and docs/*.md is
executed, in order, one namespace per file (a block fenced ```python no-run is deliberately not
run, and says so where it stands); the README's C++ example compiles against the installed
package and evaluates the file the README's Python saves; the API reference builds with Sphinx
with warnings as errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w[\w+-]*)?([^\n]*)\n(.*?)^```\s*$", re.S | re.M)


def blocks(path: Path, lang: str = "python") -> list[tuple[int, str, str]]:
    """(line, info string after the language, code) of each block in lang."""
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        if m[1] == lang:
            out.append((text.count("\n", 0, m.start()) + 1, m[2].strip(), m[3]))
    return out


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_python_blocks_run_as_written(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # files a snippet saves land here
    ns: dict = {"__name__": f"doc_{path.stem}"}
    for line, info, code in blocks(path):
        if info == "no-run":
            continue
        assert not info, f"{path.name}:{line}: unknown fence info {info!r} (use 'no-run')"
        try:
            exec(compile(code, f"{path.name}:{line}", "exec"), ns)
        except Exception as e:
            raise AssertionError(f"{path.name}, the block at line {line}, raised "
                                 f"{type(e).__name__}: {e}") from e


def test_readme_cpp_example_compiles_and_evaluates_the_saved_gradient(tmp_path):
    """The README's C++ section as written: its Python saves grad.tidu, its CMakeLists.txt and
    main.cpp build against the installed package, and the program prints the values Python
    computes."""
    import tidu as td
    from _support.cpp_build import cmake

    readme = ROOT / "README.md"
    (py_block,) = [c for _, _, c in blocks(readme) if 'save("grad.tidu")' in c]
    (cmake_block,) = [c for _, _, c in blocks(readme, "cmake")]
    (cpp_block,) = [c for _, _, c in blocks(readme, "cpp")]
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(cmake_block)
    (src / "main.cpp").write_text(cpp_block)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        ns: dict = {}
        exec(compile(py_block, "README.md (C++ section)", "exec"), ns)
    finally:
        os.chdir(cwd)
    build = tmp_path / "build"
    # configured as the README says (no build type: the compiler's default, unoptimised, flags;
    # was -DCMAKE_BUILD_TYPE=Release, not in the README, which took ~160 of the file's 165 s)
    for cmd in ([*cmake(), "-S", str(src), "-B", str(build), f"-Dtidu_DIR={td.get_cmake_dir()}"],
                [*cmake(), "--build", str(build), "-j2"]):
        res = subprocess.run(cmd, capture_output=True, text=True)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    res = subprocess.run([str(build / "my_app")], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    prog = ns["prog"]
    want = [np.asarray(v, float).ravel() for v in ns["expected"]]
    got = [np.array(line.split()[2:], float) for line in res.stdout.splitlines()
           if line.startswith("output")]
    assert len(got) == len(want), res.stdout
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    assert all(f"input {i} {n}" in res.stdout for i, n in enumerate(prog.input_names())), \
        res.stdout


def test_api_reference_builds_without_warnings(tmp_path):
    pytest.importorskip("sphinx", reason="the API reference needs the docs extra (sphinx)")
    res = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b",
                          "html", str(ROOT / "docs" / "api"), str(tmp_path / "html")],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert (tmp_path / "html" / "index.html").is_file()
