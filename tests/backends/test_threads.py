"""The interpreter's thread pool (cpp/include/tidu/vm/parallel.hpp): one persistent pool whose
workers and the calling thread take chunks of a loop one at a time; the thread count is set by
TIDU_NUM_THREADS or tidu.set_num_threads; a child after fork starts a pool of its own; nested and
concurrent loops run on their caller and never deadlock."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import tidu as td
from tidu._native import _eval

# 2^25 multiply-adds: over the 2^23 at which products are split over threads.
A = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)
B = np.random.default_rng(1).standard_normal((512, 256)).astype(np.float32)


@pytest.fixture
def two_threads():
    before = td.get_num_threads()
    td.set_num_threads(2)
    yield
    td.set_num_threads(before)


def matmul():
    return td.jit(lambda a, b: a @ b, backend="cpu")


def test_set_num_threads_round_trips_and_none_restores_the_default():
    default = td.get_num_threads()
    assert default >= 1
    try:
        td.set_num_threads(3)
        assert td.get_num_threads() == 3
        td.set_num_threads(1000)
        assert td.get_num_threads() == 256  # capped
    finally:
        td.set_num_threads(None)
    assert td.get_num_threads() == default


@pytest.mark.parametrize("bad, err", [(0, ValueError), (-2, ValueError), (2.0, TypeError), ("2", TypeError),
                                      (True, TypeError)])
def test_set_num_threads_refuses_bad_counts(bad, err):
    with pytest.raises(err, match="positive int or None"):
        td.set_num_threads(bad)


def test_tidu_num_threads_sets_the_default():
    env = dict(os.environ, TIDU_NUM_THREADS="3")
    code = "import tidu; tidu.set_num_threads(5); tidu.set_num_threads(None); print(tidu.get_num_threads())"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["3"]


_BLAS_LOAD = """
import os, sys
import numpy as np
import tidu
from tidu.backends import interpreter
tasks = lambda: len(os.listdir("/proc/self/task"))
before = tasks()
assert interpreter.ensure_blas()
print(before, tasks(), os.environ.get("OPENBLAS_NUM_THREADS"), "scipy_openblas32" in sys.modules)
a = np.random.default_rng(0).standard_normal((300, 200)).astype(np.float32)
got = tidu.jit(lambda x: x @ x.T, backend="cpu")(a)
want = a.astype(np.float64) @ a.T.astype(np.float64)
print(float(np.abs(got - want).max()))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
@pytest.mark.parametrize("user", [None, "3"])
def test_loading_the_blas_starts_no_thread_and_restores_the_environment(user):
    """tidu's OpenBLAS copy is loaded with OPENBLAS_NUM_THREADS=1, so it starts no worker
    threads (each spun ~0.1 s of CPU into the first evaluation), without importing
    scipy_openblas32 (25-30 ms of importlib.metadata); the user's setting, or its absence, is
    put back, and large products still go to the BLAS and agree with numpy."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if user is not None:
        env["OPENBLAS_NUM_THREADS"] = user
    res = subprocess.run([sys.executable, "-c", _BLAS_LOAD], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    first, second = res.stdout.splitlines()
    before, after, setting, imported = first.split()
    assert int(after) == int(before)
    assert setting == str(user)
    assert imported == "False"
    assert float(second) < 1e-3


def test_large_products_reuse_one_pool_and_agree_with_numpy(two_threads):
    f = matmul()
    want = A.astype(np.float64) @ B.astype(np.float64)
    f(A, B)
    workers, before = _eval.pool_workers(), _eval.pool_stats()
    for _ in range(5):
        np.testing.assert_allclose(f(A, B), want, rtol=1e-4, atol=1e-3)
    after = _eval.pool_stats()
    assert after["posted"] + after["inline"] - before["posted"] - before["inline"] == 5
    assert _eval.pool_workers() == workers >= 1  # started once, kept: not a thread per product


def test_one_thread_never_uses_the_pool():
    before_n = td.get_num_threads()
    td.set_num_threads(1)
    try:
        before = _eval.pool_stats()
        matmul()(A, B)
        after = _eval.pool_stats()
    finally:
        td.set_num_threads(before_n)
    assert (after["posted"], after["inline"]) == (before["posted"], before["inline"])


def test_concurrent_evaluations_share_the_pool_without_deadlock(two_threads):
    f = matmul()
    want = f(A, B)
    errors = []

    def worker():
        try:
            for _ in range(4):
                np.testing.assert_array_equal(f(A, B), want)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    ts = [threading.Thread(target=worker) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ts)
    assert errors == []


def test_loops_nested_in_eval_batch_run_on_their_thread(two_threads):
    prog = td.jit(lambda a, b: td.tanh(a @ b), backend="cpu").lower(A, B).program
    batch = [np.stack([A, -A, 2 * A]), np.stack([B, B, B])]
    got = prog.eval_batch(batch, threads=2)[0]
    for i in range(3):
        np.testing.assert_allclose(got[i], np.tanh(batch[0][i].astype(np.float64) @ B), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_a_pool_of_its_own(two_threads):
    f = matmul()
    want = f(A, B)
    assert _eval.pool_workers() >= 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jax, when imported, warns at every fork
        pid = os.fork()
    if pid == 0:  # the child: the parent's workers do not exist here
        code = 1
        try:
            fresh = _eval.pool_workers() == 0
            ok = np.array_equal(f(A, B), want)
            code = 0 if fresh and ok and _eval.pool_workers() == 1 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
