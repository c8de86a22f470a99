"""Shared fixtures: the C++ consumer builds (one per session, built on first use) and the
``--long`` option of the forged-file tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tidu as td


def pytest_configure(config):
    # TIDU_TEST_RECLAIM_BYTES=65536: cut the interner back (tidu.graph.memory) far more often
    # than the default, so a test that keeps ids past their holders fails (FreedGraphError)
    limit = os.environ.get("TIDU_TEST_RECLAIM_BYTES")
    if limit:
        td.set_cache_limits(reclaim_bytes=int(limit))


_OWN_PROCESS = "TIDU_TEST_OWN_PROCESS"


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test marked ``own_process`` runs in a child ``python -m pytest <its id>``: the interner,
    the holders and the background compiles it sees are its own, not what the tests before it in
    this worker left (a cut's cost grows with them: 2-3 minutes each in a full run against 5 s
    alone). The child runs it with the same options; its failure is this test's."""
    if pyfuncitem.get_closest_marker("own_process") is None or os.environ.get(_OWN_PROCESS):
        return None
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, **{_OWN_PROCESS: "1"})
    cmd = [sys.executable, "-m", "pytest", pyfuncitem.nodeid, "-q", "-n", "0", "-p",
           "no:cacheprovider", "--durations=0", "-W", "error"]
    run = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    if run.returncode != 0:
        pytest.fail(f"in its own process ({' '.join(cmd[2:])}), rc={run.returncode}:\n"
                    f"{run.stdout[-6000:]}\n{run.stderr[-3000:]}", pytrace=False)
    return True


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="forged-file tests: 100,000 files instead of 5,000")


@pytest.fixture(scope="session")
def saved(tmp_path_factory):
    """A function and its gradient, saved, with inputs and Python's outputs as raw buffers:
    (folder, input names, inputs, outputs). No graph or program object is returned: one held for
    the session would keep the interner from being reclaimed, and tests/api/test_memory.py's
    checks of that would fail in any worker that ran a test using this fixture first."""
    tmp = tmp_path_factory.mktemp("prog")
    F0 = td.build(lambda x, w: td.sum(td.tanh(x @ w) * x[:, :1]), x=td.spec((4, 3)),
                  w=td.spec((3, 3)))
    T1 = td.transpose(td.differentiate(td.resolve([F0]), F0.outputs, ["w"]))
    (ct,) = [k for _, k in T1.tangent_inputs]
    prog = td.compile(td.materialize_merge(td.resolve([F0, T1]), F0.outputs + T1.tangent_outputs))
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((4, 3)), "w": rng.standard_normal((3, 3)), ct: 1.0}
    inputs = [np.asarray(feed[k], np.float64) for k in prog.inputs]
    outs = prog.eval(inputs)
    prog.save(tmp / "grad.tidu")
    (tmp / "inputs.bin").write_bytes(b"".join(a.tobytes() for a in inputs))
    (tmp / "expected.bin").write_bytes(b"".join(o.tobytes() for o in outs))
    return tmp, list(prog.input_names()), inputs, outs


@pytest.fixture(scope="session")
def cpp_build(tmp_path_factory, saved):
    """cpp_build("release" | "asan"): the tests/cpp build directory, built once per session.
    Under xdist the workers share it (the first builds, under a file lock, the others wait and
    reuse it): each build takes minutes, and two at once on two cores take twice as long."""
    import fcntl

    from _support.cpp_build import build

    cache = {}
    if os.environ.get("PYTEST_XDIST_WORKER"):  # this session's folder, shared by its workers
        tmp = tmp_path_factory.getbasetemp().parent / "cpp-shared"
        tmp.mkdir(exist_ok=True)
    else:
        tmp = tmp_path_factory.mktemp("cpp")

    def get(kind: str):
        if kind not in cache:
            with open(tmp / f"{kind}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                done = tmp / f"{kind}.done"
                if done.exists():
                    cache[kind] = Path(done.read_text())
                else:
                    cache[kind] = build(tmp, kind == "asan", saved[0])
                    done.write_text(str(cache[kind]))
        return cache[kind]

    return get


@pytest.fixture(scope="module")
def no_reclaim():
    """For tests that compare the ids of graphs built one after the other: an automatic cut of
    the interner between them (tidu.graph.memory) would renumber the second. Module-wide:
    ``pytestmark = pytest.mark.usefixtures("no_reclaim")``."""
    prev = td.set_cache_limits(reclaim_bytes=0)
    yield
    td.set_cache_limits(**prev)


@pytest.fixture
def fresh_caches():
    """The test starts from empty caches and gives the limits back as it found them."""
    prev = td.cache_limits()
    td.clear_caches()
    yield
    td.set_cache_limits(**prev)
