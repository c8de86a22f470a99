"""Forged .tidu files (tests/_support/forge.py): fields of valid programs set to integer
extremes and overflow-crafted combinations, with a valid checksum, through the Python
loader+evaluator (in worker subprocesses: a death by signal is a failure) and the C++
loader+evaluator under AddressSanitizer and UndefinedBehaviorSanitizer (any report is a failure).
5,000 files per run; ``pytest --long`` runs 100,000.  Reproduce one run by hand with
``python tests/_support/forge.py --out DIR --n 5000 --seed 0 &&
python tests/_support/forge.py --check DIR``."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from _support import forge, forge_check, forge_gen
from tidu import _eval

SEED = 0
CAP = 150  # crashes (worker or sanitizer restarts) per run before giving up


@pytest.fixture(scope="module")
def forged(request, tmp_path_factory):
    n = 100_000 if request.config.getoption("--long") else 5000
    return forge_gen.write_dir(tmp_path_factory.mktemp("forged"), n, SEED), n


def test_tables_match_the_evaluator():
    assert forge.OPCODES == list(_eval.OPCODES)
    assert forge.DTYPES == list(_eval.DTYPES)


def test_seeds_round_trip_load_and_evaluate():
    """The parser/serializer is exact on every seed, and every seed loads and evaluates."""
    for name, data in forge_gen.seeds().items():
        assert forge.parse(data).to_bytes() == data, name
        p = _eval.Program(data)
        shapes = [tuple(s) for s in p.input_shapes]
        outs = p.run(forge_check._inputs(shapes, p.input_dtypes))
        assert len(outs) == len(forge.parse(data).a["outputs"]), name
    def ops(q):  # opcodes of a program and its nested programs
        return {forge.OPCODES[o] for o in q.a["opcode"]}.union(*[ops(s) for s in q.subs])

    kinds = set().union(*[ops(forge.parse(d)) for d in forge_gen.seeds().values()])
    assert {"Slice", "Pad", "Concatenate", "Reshape", "Transpose", "BroadcastInDim", "ReduceSum",
            "DotGeneral", "Iota", "Constant", "Compare", "Select", "Scan", "While", "Cond",
            "Checkpoint"} <= kinds


def test_forgeries_are_deterministic_and_reach_the_validator():
    """Same (seed, index), same bytes; every forgery has a valid checksum, so none is turned
    away by the checksum and most reach the validator or the evaluator."""
    assert [forge_gen.forge(i, SEED) for i in (3, 77)] == [forge_gen.forge(i, SEED) for i in (3, 77)]
    reasons = {}
    for i in range(400):
        _, data, desc = forge_gen.forge(i, SEED)
        assert forge.fnv1a(data[32:]) == int.from_bytes(data[24:32], "little"), desc
        try:
            _eval.Program(data)
            reasons["loaded"] = reasons.get("loaded", 0) + 1
        except ValueError as e:
            key = "validator" if str(e).startswith("tidu program:") else str(e)[:40]
            reasons[key] = reasons.get(key, 0) + 1
    assert not any("checksum" in k or "payload size" in k for k in reasons), reasons
    assert reasons.get("validator", 0) + reasons.get("loaded", 0) >= 320, reasons
    assert reasons.get("loaded", 0) >= 40, reasons


def test_python_loader_and_evaluator_survive_forged_files(forged, tmp_path):
    """Every forged file loads or raises, evaluates or raises: no signal, no accepted file that
    breaks an invariant (name counts), no value changed by a no-op edit."""
    d, n = forged
    failures, notes = forge_check.run_python(d, cap=CAP, save_to=tmp_path / "crashing")
    assert not failures, (f"{len(failures)} of {n} forged files failed in Python (crashing files "
                          f"saved under {tmp_path / 'crashing'}):\n"
                          + forge_check.report(d, failures, notes))


def _sanitizer_report(text: str) -> str:
    """'<sanitizer> <kind> at <file:line> | <its message>' (paths cut to file names): the part
    before '|' names one bug site, for grouping."""
    ub = re.search(r"(\S+):(\d+):\d+: runtime error: ([^:\n]+)(.*)$", text, re.M)
    if ub:
        kind = re.sub(r"0x[0-9a-f]+", "0x..", ub[3])  # addresses differ run to run
        return f"UBSan {kind} at {Path(ub[1]).name}:{ub[2]} | {ub[3]}{ub[4]}"[:300]
    asan = re.search(r"^SUMMARY: AddressSanitizer: (\S+) (\S+)(.*)$", text, re.M)
    if asan:
        err = re.search(r"ERROR: AddressSanitizer: (.*)$", text, re.M)
        return f"ASan {asan[1]} at {Path(asan[2]).name}{asan[3]} | {err[1] if err else ''}"[:300]
    return "no sanitizer report | " + text.strip()[-300:]


def test_cpp_loader_and_evaluator_survive_forged_files_under_sanitizers(forged, cpp_build,
                                                                        tmp_path):
    """tests/cpp/forge_load over every forged file, built with ASan+UBSan and
    -fno-sanitize-recover=all: a report aborts it, the report is recorded and the run resumes
    after that file."""
    d, n = forged
    exe = cpp_build("asan") / "forge_load"
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", OPENBLAS_NUM_THREADS="1",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")

    def run(lst, progress):
        res = subprocess.run([str(exe), str(d), str(lst), str(progress)], capture_output=True,
                             text=True, env=env, timeout=3000)
        assert res.returncode != 0 or "forge_load:" in res.stdout, res.stdout + res.stderr[-2000:]
        return res

    failures, notes = forge_check.run_resuming(
        d, "cpp", run, lambda res: f"C++ {_sanitizer_report(res.stderr)}", cap=CAP,
        save_to=tmp_path / "crashing")
    assert not failures, (f"{len(failures)} of {n} forged files failed in C++ under sanitizers:\n"
                          + forge_check.report(d, failures, notes))
