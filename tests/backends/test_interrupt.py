"""Ctrl-C stops an evaluation (tidu/vm/cancel.hpp, the SIGINT watch of cpp/python/_eval.cpp):
a while loop that never ends, a 1e12-step scan and a huge eval_batch raise KeyboardInterrupt
within a moment of SIGINT, and the program evaluates correctly afterwards.  The C++ side's
cancellation flag is tests/cpp/cancel_eval.cpp, run here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tidu as td

# Each snippet prints "ready" and then starts an evaluation that would run for hours.
ENDLESS = {
    "while": "f = td.jit(lambda c: td.while_loop(lambda c: c > -1., lambda c: c + 1., c))\n"
             "f.lower(0.); print('ready', flush=True); f(0.)",
    "scan": "f = td.jit(lambda x: td.scan(lambda c, _: (c * 0.5 + 1.0, None), x, None,\n"
            "                             length=10**12)[0])\n"
            "g = td.jit(lambda x: td.scan(lambda c, _: (c * 0.5 + 1.0, None), x, None,\n"
            "                             length=3)[0])\n"
            "g(0.); print('ready', flush=True); f(0.)",
    "eval_batch": "p = td.jit(lambda n: td.while_loop(lambda c: c < n, lambda c: c + 1., 0.))\n"
                  "prog = p.lower(0.).program\n"
                  "prog.eval_batch([np.full(64, 10.)], threads=4)\n"
                  "print('ready', flush=True)\n"
                  "prog.eval_batch([np.full(64, 1e300)], threads=4)",
    "array_scan": "f = td.jit(lambda x: td.scan(lambda c, _: (td.sin(c) + 1.0, None), x, None,\n"
                  "                             length=10**12)[0])\n"
                  "print('ready', flush=True); f(np.zeros(100))",
}


@pytest.mark.parametrize("kind", sorted(ENDLESS))
def test_sigint_stops_an_endless_evaluation_in_a_subprocess(kind):
    code = "import numpy as np\nimport tidu as td\n" + ENDLESS[kind] + "\nprint('finished')"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        time.sleep(1.0)
        sent = time.perf_counter()
        p.send_signal(signal.SIGINT)
        try:
            _, err = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{kind}: still running 5 s after SIGINT")
        took = time.perf_counter() - sent
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode != 0 and "KeyboardInterrupt" in err, err[-2000:]
    assert took < 3, took


def _sigint_in(seconds: float) -> threading.Timer:
    t = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    t.start()
    return t


def _interrupted(f, *args) -> float:
    """Seconds f(*args) ran before a SIGINT sent 0.3 s after its start raised KeyboardInterrupt."""
    timer = _sigint_in(0.3)
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        f(*args)
    took = time.perf_counter() - start
    timer.join()
    return took


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
def test_an_interrupted_program_evaluates_correctly_again():
    """n = 1e8 iterations take about 15 s uninterrupted; SIGINT stops them in well under 3 s,
    and the same compiled program (its pooled workspace) then gives the right answers."""
    f = td.jit(lambda c, n: td.while_loop(lambda s: s[1] < n,
                                          lambda s: (s[0] * 0.5 + 1.0, s[1] + 1.0), (c, 0.0)))
    assert _interrupted(f, 3.0, 1e8) < 3
    got = f(3.0, 20.0)
    c = 3.0
    for _ in range(20):
        c = c * 0.5 + 1.0
    assert np.asarray(got[0]) == c and np.asarray(got[1]) == 20.0
    # array carries (the arena path, not the scalar one) and a scan with stacked outputs
    g = td.jit(lambda x, n: td.while_loop(lambda s: s[1] < n,
                                          lambda s: (td.sin(s[0]) + 1.0, s[1] + 1.0), (x, 0.0)))
    x = np.linspace(-1, 1, 64)
    assert _interrupted(g, x, 1e8) < 3
    want = x.copy()
    for _ in range(7):
        want = np.sin(want) + 1.0
    np.testing.assert_allclose(g(x, 7.0)[0], want, rtol=1e-14)
    h = td.jit(lambda x: td.scan(lambda c, _: (c * 0.5 + 1.0, c), x, None, length=3))
    carry, ys = h(np.ones(2))
    np.testing.assert_allclose(ys, [[1, 1], [1.5, 1.5], [1.75, 1.75]])
    np.testing.assert_allclose(carry, [1.875, 1.875])


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
def test_an_interrupted_eval_batch_evaluates_correctly_again():
    p = td.jit(lambda n: td.while_loop(lambda c: c < n, lambda c: c + 1.0, 0.0)).lower(0.0).program
    assert _interrupted(p.eval_batch, [np.full(16, 1e8)], 4) < 3
    n = np.arange(16.0)
    np.testing.assert_array_equal(p.eval_batch([n], threads=4)[0], n)


def test_a_signal_handler_that_does_not_raise_lets_the_evaluation_finish():
    """A user's SIGINT handler that raises nothing: the evaluation stops, the handler runs, and
    the evaluation runs again to its (right) answer."""
    seen = []
    old = signal.signal(signal.SIGINT, lambda *a: seen.append(a[0]))
    try:
        f = td.jit(lambda n: td.while_loop(lambda c: c < n, lambda c: c + 1.0, 0.0))
        f(1.0)
        timer = _sigint_in(0.2)
        assert float(f(2e7)) == 2e7
        timer.join()
    finally:
        signal.signal(signal.SIGINT, old)
    assert seen == [signal.SIGINT]


def test_evaluations_on_other_threads_are_not_interrupted():
    """Python runs signal handlers on the main thread: an evaluation on another thread runs on
    (the KeyboardInterrupt goes to the main thread, here caught)."""
    f = td.jit(lambda n: td.while_loop(lambda c: c < n, lambda c: c + 1.0, 0.0))
    f(1.0)
    out, done = [], threading.Event()

    def run():
        try:
            out.append(float(f(1e7)))
        finally:
            done.set()

    threading.Thread(target=run).start()
    timer = _sigint_in(0.2)
    interrupted = False
    while not done.is_set():
        try:
            done.wait(0.05)
        except KeyboardInterrupt:
            interrupted = True
    timer.join()
    try:
        time.sleep(0.1)  # a KeyboardInterrupt still pending arrives here
    except KeyboardInterrupt:
        interrupted = True
    assert interrupted and out == [1e7]


def test_cpp_cancellation_flag(cpp_build, tmp_path):
    """A C++ embedder sets Workspace::cancel_flag from another thread: eval throws
    tidu::Cancelled, the workspace evaluates correctly once the flag is cleared, and
    eval_batch takes a flag too (tests/cpp/cancel_eval.cpp)."""
    prog = td.jit(lambda n: td.while_loop(lambda c: c < n, lambda c: c + 1.0, 0.0)).lower(0.0)
    prog.save(tmp_path / "count.tidu")
    for kind in ("release", "asan"):
        exe = cpp_build(kind) / "cancel_eval"
        res = subprocess.run([str(exe), str(tmp_path / "count.tidu")], capture_output=True,
                             text=True, timeout=60,
                             env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
        assert res.returncode == 0, res.stdout + res.stderr
        assert "cancel_eval: ok" in res.stdout, res.stdout



_INJECT = """
import dis
import gc
import sys

import numpy as np

import tidu as td
from tidu._native import _core
from tidu.trace.build import tracing
from tidu.trace.tracer import _stack

assert not isinstance(tracing.__enter__, type(lambda: 0))  # C, not a Python function
seen, at = [0], [0]
NOP = dis.opmap["NOP"]


def local(frame, event, arg):
    # not at a NOP (a `try:` line): CPython 3.11's exception table leaves some outside every
    # handler, so an exception raised there skips the enclosing `with`'s exit; a signal is
    # never delivered there (the eval loop looks for one at calls and backward jumps)
    if event == "line" and frame.f_code.co_code[frame.f_lasti] != NOP:
        seen[0] += 1
        if seen[0] == at[0]:
            raise KeyboardInterrupt
    return local


def tracer(frame, event, arg):  # tidu's own code only (not weakref callbacks)
    code = frame.f_code
    if "tidu" in code.co_filename and code.co_name not in ("_forget", "<lambda>"):
        return local
    return None


def make(k):
    def f(x):
        for _ in range(2):
            x = td.sin(x) * (1.0 + k * 1e-3) + td.scan(
                lambda c, a: (c * 0.5 + a, c), x, np.ones(3))[0]
        return td.sum(x)
    return td.jit(td.grad(f))


def run(k, n):
    seen[0], at[0] = 0, n
    sys.settrace(tracer)
    try:
        make(k)(np.ones(3))
    except KeyboardInterrupt:
        return True
    finally:
        sys.settrace(None)
    return False


assert not run(0, 0)
lines = seen[0]  # lines of tidu's Python code one such trace runs
assert lines > 500, lines
hits = 0
for k, n in enumerate(range(1, lines, max(1, lines // 150)), start=1):
    hits += run(k, n)
    state = (_core.n_tracing(), _core.n_busy(), len(_stack()), gc.isenabled())
    assert state == (0, 0, 0, True), (n, lines, state)
assert hits > 100, hits
print("ok", lines, hits)
"""


def test_ctrl_c_during_tracing_leaves_the_trace_state_as_it_was():
    """A KeyboardInterrupt raised at every n-th line tidu's Python code runs while tracing and
    differentiating (where a Ctrl-C lands: between bytecodes of Python code): whatever it
    interrupts, the count of open traces, the count of graph transforms in progress, the
    thread's trace stack and the cyclic GC are as before (a leaked count would hold off the
    interner's automatic cut for good; a stale stack entry or a paused GC would outlive it).
    Entering and leaving are C steps (_core.TraceScope, _core.BusyScope).  In a process of its
    own: an interrupt at an arbitrary line may leave a half-made cache entry behind (a Body
    whose store was not yet disowned), which would keep the rest of a test process from
    emptying its interner."""
    res = subprocess.run([sys.executable, "-c", _INJECT], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("ok"), res.stdout + res.stderr[-3000:]
