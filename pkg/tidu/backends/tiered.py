"""Tiered execution for ``backend="auto"``: a program the auto rule gives the interpreter starts
there, and moves to XLA once it has been called often enough that an XLA compile pays for itself.

The rule (docs/xla.md, "Tiered execution"), per compiled program of a jitted function:

1. At compile time a program is *ruled out* (it keeps the bare C++ entry point: no counter, no
   clock) when tiering is off, jax is not installed, the program has guards, a host callback or a
   primitive without a StableHLO lowering, more than ``AUTO_MAX_INSTRUCTIONS`` instructions, or
   less than ``MIN_WORK`` work (``program_work``: scalar and small programs, where the
   interpreter's call costs less than XLA's dispatch) and no loop or branch (whose work
   ``program_work`` does not count: such programs are timed, step 2).
2. Otherwise each call of the interpreter is timed (a counter and two clock reads).  Once the
   interpreter time spent on the program reaches the estimated cost of compiling it through XLA
   (``compile_estimate``: ``COMPILE_S + COMPILE_S_PER_INSTRUCTION`` per instruction), the XLA
   compile is queued for one background thread (a bounded queue; XLA releases the GIL while it
   compiles).  A program whose calls take less than ``MIN_CALL_S`` is ruled out after
   ``MIN_CALLS`` calls (XLA's dispatch alone costs about that).  Calls never wait for the compile.
3. When the compile is ready, the next call runs both the interpreter (whose result it returns)
   and XLA, and compares them (``agree``: a tolerance by dtype).  If they agree, the next
   ``2 * TRIAL_CALLS`` calls run XLA and the interpreter in turn, timed in the process's CPU
   time (all threads) and wall time; the program switches to XLA for good when XLA's best CPU
   time is below ``SPEEDUP`` times the interpreter's (unless the interpreter's threads won it
   wall time that XLA does not match: ``_decide``), and stays on the interpreter for good
   otherwise.  CPU time is what other processes' load does not inflate.  A failed compile,
   an XLA error or a disagreement also leave it on the interpreter for good; ``tiers()`` says
   which tier each program is on and why, and each step is logged to the ``tidu.tiered``
   logger (level DEBUG; failures at INFO).

Settings: ``TIDU_TIERED`` in the environment (``0``/``off``: no tiering; ``1``/``on``, the
default: as above; ``sync``: compile in the calling thread at call ``TIDU_TIERED_CALLS``
(default 3), and switch whenever XLA agrees, for deterministic tests), or ``set_tiering``.
``TIDU_XLA_CACHE_DIR`` (or ``set_tiering(cache_dir=...)``): jax's persistent compilation cache
for tidu's XLA executables, so a second process starts warm (``tidu.backends.xla``).
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib.util
import logging
import os
import queue
import sys
import threading
import time
import weakref

import numpy as np

from tidu.backends import xla
from tidu.graph.dtypes import kind_of
from tidu.graph.memory import _BUSY, register_cache

__all__ = ["TierTable", "Tiered", "agree", "compile_estimate", "set_tiering", "tiering", "track",
           "wrap"]

log = logging.getLogger("tidu.tiered")

MIN_WORK = 1e5  # program_work below this: ruled out at compile time
MIN_CALL_S = 1e-4  # interpreter calls faster than this: ruled out after MIN_CALLS calls
MIN_CALLS = 8
COMPILE_S = 0.3  # estimated XLA compile: COMPILE_S + COMPILE_S_PER_INSTRUCTION * instructions
COMPILE_S_PER_INSTRUCTION = 5e-3
TRIAL_CALLS = 10  # the trial: this many calls of each tier, in turn
SPEEDUP = 0.9  # XLA's best trial time must be below this fraction of the interpreter's
PARALLEL = 0.75  # interpreter wall / CPU time below this: it ran in parallel (the wall guard)
QUEUE_SIZE = 4
COMPILE_NICE = 10  # the compile thread's nice value above the process's (Linux)


def _env_mode() -> str:
    v = os.environ.get("TIDU_TIERED", "1").strip().lower()
    if v in ("0", "off", "false", "no"):
        return "off"
    return "sync" if v == "sync" else "on"


_settings = {"mode": _env_mode(), "calls": int(os.environ.get("TIDU_TIERED_CALLS", "3")),
             "cache_dir": os.environ.get("TIDU_XLA_CACHE_DIR") or None}


def tiering() -> dict:
    """The current settings: ``mode`` ("on", "off", "sync"), ``calls`` (sync mode's compile
    call), ``cache_dir`` (the persistent compilation cache, or None)."""
    return dict(_settings)


def set_tiering(mode: str | None = None, calls: int | None = None,
                cache_dir: str | None = None) -> dict:
    """Set tiering for programs compiled from now on; returns the previous settings.

    Args:
        mode: "on" (background compile, switch when XLA agrees and is faster), "off" (the auto
            rule alone: the interpreter for these programs) or "sync" (compile in the calling
            thread at call ``calls``, switch whenever XLA agrees: deterministic, for tests).
        calls: the call at which sync mode compiles (>= 1).
        cache_dir: a directory for jax's persistent compilation cache (tidu's XLA executables,
            every backend), set before jax's first compile in this process."""
    old = tiering()
    if mode is not None:
        if mode not in ("on", "off", "sync"):
            raise ValueError(f"set_tiering: mode must be 'on', 'off' or 'sync', got {mode!r}")
        _settings["mode"] = mode
    if calls is not None:
        if int(calls) < 1:
            raise ValueError(f"set_tiering: calls must be >= 1, got {calls}")
        _settings["calls"] = int(calls)
    if cache_dir is not None:
        _settings["cache_dir"] = str(cache_dir)
        xla.use_compilation_cache(_settings["cache_dir"])
    return old


_has_jax: list = []


def compile_estimate(prog) -> float:
    """Seconds an XLA compile of prog is estimated to take (from its size)."""
    return COMPILE_S + COMPILE_S_PER_INSTRUCTION * prog.n_instructions


def ruled_out(prog) -> str | None:
    """Why prog never tiers (None: it may)."""
    if _settings["mode"] == "off":
        return "tiering is off (TIDU_TIERED=0)"
    if not _has_jax:
        _has_jax.append(importlib.util.find_spec("jax") is not None)
    if not _has_jax[0]:
        return "jax is not installed"
    if prog.n_guards or prog.n_effects:
        return "the program has guards or effects"
    exe = prog.executable
    n = prog.n_instructions
    if n == 0 or n > xla.AUTO_MAX_INSTRUCTIONS:
        return f"{n} instructions"
    work = xla.program_work(exe)
    if work < MIN_WORK and not _has_bodies(exe):  # a loop's work is not counted: timed instead
        return f"work {work:.3g} < MIN_WORK {MIN_WORK:.3g}: the interpreter wins"
    if xla.unlowered(exe) or any(xla.is_host(op) for op, _, _ in exe.instructions):
        return "a primitive without a StableHLO lowering or a host callback"
    return None


def _has_bodies(exe) -> bool:
    """Whether some instruction runs a nested program (a loop body, a branch)."""
    for op, _, _ in exe.instructions:
        if dataclasses.is_dataclass(op):
            for f in dataclasses.fields(op):
                v = getattr(op, f.name)
                if any(hasattr(b, "fragment") for b in (v if isinstance(v, tuple) else (v,))):
                    return True
    return False


def wrap(prog, run, backend: str = "auto"):
    """The entry point for a program jit compiled with ``backend``: where that is "auto" and
    it gave the interpreter, a Tiered over ``run`` (the C++ entry point), else ``run`` itself
    (also where the program is ruled out)."""
    if run is None or backend != "auto" or prog.backend != "cpu" or prog.n_guards:
        return run
    why = ruled_out(prog)
    if why is not None:
        log.debug("tiering: %r ruled out: %s", prog, why)
        return run
    return Tiered(prog, run)


# ---- comparing results ----

_RTOL = {"e": 1e-2, "f": 1e-3, "d": 1e-6, "g": 1e-6, "F": 1e-3, "D": 1e-6, "G": 1e-6}


def _rtol(dtype: np.dtype) -> float | None:
    if dtype.name == "bfloat16":
        return 1e-2
    return _RTOL.get(dtype.char)


def agree(ref, got) -> str | None:
    """None when got (XLA's outputs) agrees with ref (the interpreter's), else what differs.
    Floating outputs: ``|got - ref| <= rtol * (|ref| + max|ref|)`` elementwise, rtol 1e-2 for
    16-bit, 1e-3 for 32-bit and 1e-6 for 64-bit floats (NaN where ref has NaN); others exact."""
    if len(ref) != len(got):
        return f"{len(got)} outputs, expected {len(ref)}"
    for i, (r, g) in enumerate(zip(ref, got)):
        r, g = np.asarray(r), np.asarray(g)
        if r.shape != g.shape or r.dtype != g.dtype:
            return f"output {i}: {g.dtype}{list(g.shape)}, expected {r.dtype}{list(r.shape)}"
        tol = _rtol(r.dtype)
        if tol is None:
            if not np.array_equal(r, g):
                return f"output {i} ({r.dtype}) differs"
            continue
        r64 = r.astype(np.complex128 if kind_of(r.dtype) == "c" else np.float64)
        g64 = g.astype(r64.dtype)
        finite = np.isfinite(r64)
        scale = float(np.max(np.abs(r64[finite]))) if finite.any() else 0.0
        if not np.allclose(g64, r64, rtol=tol, atol=tol * scale, equal_nan=True):
            err = np.abs(g64 - r64)
            return (f"output {i} ({r.dtype}): max |xla - interpreter| {np.nanmax(err):.3g} "
                    f"with rtol {tol:g} and max |interpreter| {scale:.3g}")
    return None


# ---- the background compile ----

class _Job:
    """One XLA compile: the runner, compiled by running it once on copies of the inputs of the
    call that asked for it (so a loop bounded by the data ends as the interpreter's did)."""

    __slots__ = ("prog", "inputs", "runner", "error", "done", "seconds", "__weakref__")

    def __init__(self, prog, inputs):
        self.prog = prog
        self.inputs = [np.array(x) for x in inputs]
        self.runner = self.error = self.seconds = None
        self.done = threading.Event()

    def run(self) -> None:
        t0 = time.perf_counter()
        try:
            if _closed:
                raise RuntimeError("the process is exiting")
            with _BUSY:  # the lowering reads the program's primitives: the automatic cut waits
                runner = _compile_xla(self.prog)
            arrs = self.prog._check_all(self.inputs)[0]
            runner.run(arrs)  # jax.jit compiles on the first call
            self.runner = runner
        except BaseException as e:  # noqa: BLE001 - any failure leaves the interpreter in place
            self.error = e
        finally:
            self.inputs = self.prog = None
            self.seconds = time.perf_counter() - t0
            _pending.discard(self)
            self.done.set()


def _compile_xla(prog):
    """The program's XlaRunner on jax's default device (tests replace this)."""
    xla.use_compilation_cache(_settings["cache_dir"])
    return prog.executable.xla(device=None)


_queue: queue.Queue = queue.Queue(QUEUE_SIZE)
_worker: list = []  # the worker thread, once started
_pending: set = set()  # jobs queued or compiling (no weak references: no callbacks to run)
_closed = False
_lock = threading.Lock()


def _lower_priority() -> None:
    """The compile thread at a lower priority than the calls (Linux: nice is per thread, and
    threads XLA starts from it inherit it): a compile that shares a core with the calls yields
    it to them, so that calls during a compile are not held up behind it (mlp's p99)."""
    if not sys.platform.startswith("linux"):  # elsewhere setpriority would renice the process
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) +
                                                 COMPILE_NICE))
    except (AttributeError, OSError):
        pass


def _work(q) -> None:
    _lower_priority()
    try:  # jax imported now, not by a compile running while Python finalizes, where an import
        xla.require_jax()  # fails (concurrent.futures: "can't register atexit after shutdown")
    except Exception:  # noqa: BLE001 - not installed, or broken: the thread must stay up
        pass  # each compile then fails by name, and its program stays on the interpreter
    while True:
        job = q.get()
        if job is None:
            return
        job.run()
        del job  # not held (with its program) until the next compile


def _submit(job) -> bool:
    """Queue a compile; False when the queue is full (the program asks again later)."""
    with _lock:
        if _closed:
            return False
        if not _worker or not _worker[0].is_alive():
            t = threading.Thread(target=_work, args=(_queue,), name="tidu-xla-compile",
                                 daemon=True)
            _worker[:] = [t]
            t.start()
        _pending.add(job)  # before the worker can take it (and discard it when done)
        try:
            _queue.put_nowait(job)
        except queue.Full:
            _pending.discard(job)
            return False
    return True


def in_flight() -> int:
    """Compiles queued or running."""
    return len(_pending)


def _drain(reason: str) -> None:
    """Drop the queued compiles (their programs stay on the interpreter)."""
    while True:
        try:
            job = _queue.get_nowait()
        except queue.Empty:
            return
        if job is not None:
            job.error = RuntimeError(reason)
            job.inputs = None
            _pending.discard(job)
            job.done.set()


def _at_exit(notice_after: float = 10.0) -> None:
    """Process exit: no new compiles, the queued ones dropped, and the running one waited for
    (jax's own exit handlers run after this one). Not given up on: a compile thread still inside
    XLA when Python finalizes is ended by pthread_exit on its way back to the interpreter, whose
    unwinding through jaxlib's frames aborts the process ("FATAL: exception not rethrown"), so an
    exit waits for the compile instead, saying so on stderr after ``notice_after`` seconds."""
    global _closed
    _closed = True
    _drain("the process is exiting")
    if _worker and _worker[0].is_alive():
        try:
            _queue.put_nowait(None)
        except queue.Full:
            pass
        _worker[0].join(notice_after)
        if _worker[0].is_alive():
            print("tidu: waiting for a background XLA compile to finish before exiting",
                  file=sys.stderr, flush=True)
            _worker[0].join()


def clear() -> None:
    """td.clear_caches: the queued compiles are dropped (the one running finishes; its program
    was dropped with the caches, or stays on the interpreter)."""
    _drain("td.clear_caches() dropped the queued compile")


def _after_fork_in_child() -> None:
    """A forked child has no worker thread: compiles the parent had in flight never finish here
    (their programs stay on the interpreter); a new worker starts on the next compile."""
    global _queue, _lock
    _lock = threading.Lock()
    for job in list(_pending):
        if not job.done.is_set():
            job.error = RuntimeError("the process forked while this compile was in flight")
            job.done.set()
    _pending.clear()
    _queue = queue.Queue(QUEUE_SIZE)
    _worker.clear()


register_cache("tiered_compiles", clear, lambda: {"entries": in_flight()})
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)  # runs before jax's handlers where jax is imported later (LIFO)


# ---- the tiered entry point ----

class Tiered:
    """A program's entry point while tiering decides: the interpreter, timed, until the XLA
    compile is ready and checked; then the chosen tier's entry point (``on_final`` gives it to
    the jitted function, which drops this wrapper from its fast path)."""

    __slots__ = ("prog", "interp", "calls", "spent", "best", "budget", "job", "tier", "why",
                 "xla_times", "interp_times", "xla_call", "final", "on_final", "compile_s",
                 "__weakref__")

    def __init__(self, prog, run):
        self.prog, self.interp = prog, run
        self.calls, self.spent, self.best = 0, 0.0, float("inf")
        self.budget = compile_estimate(prog)
        self.job = self.final = self.on_final = None
        self.xla_times: list[tuple[float, float]] = []  # the trial's (CPU, wall) seconds
        self.interp_times: list[tuple[float, float]] = []
        self.compile_s = self.xla_call = None
        self.tier, self.why = "interpreter", "counting calls"

    def state(self) -> dict:
        """``tier``: "interpreter", "compiling", "trial" or "xla"; ``final``: whether that is
        for good; ``why``; ``calls`` counted on the interpreter, its ``best_s`` and ``spent_s``,
        the compile's ``budget_s`` (its estimate) and ``compile_s`` (as it went), the trial's
        ``xla_best_s`` (wall), ``xla_best_cpu_s`` and ``interp_best_cpu_s`` (CPU time)."""
        return {"tier": self.tier, "final": self.final is not None, "why": self.why,
                "calls": self.calls, "best_s": self.best, "spent_s": self.spent,
                "budget_s": self.budget, "compile_s": self.compile_s,
                "xla_best_s": min(w for _, w in self.xla_times) if self.xla_times else None,
                "xla_best_cpu_s": min(c for c, _ in self.xla_times) if self.xla_times else None,
                "interp_best_cpu_s": (min(c for c, _ in self.interp_times)
                                      if self.interp_times else None)}

    def __call__(self, inputs):
        if self.final is not None:  # a caller still holding this wrapper: let it drop it
            if self.on_final is not None:
                self.on_final(self, self.final)
            return self.final(inputs)
        if self.job is not None:
            return self._after(inputs)
        t0 = time.perf_counter()
        out = self.interp(inputs)
        dt = time.perf_counter() - t0
        self.calls += 1
        self.spent += dt
        if dt < self.best:
            self.best = dt
        mode = _settings["mode"]
        if mode == "sync":
            if self.calls >= _settings["calls"]:
                self._start(inputs, sync=True)
        elif self.spent >= self.budget:
            if self.best < MIN_CALL_S:
                self._finish(self.interp, f"interpreter calls take {self.best * 1e6:.0f} us "
                             f"< MIN_CALL_S: XLA's dispatch would cost as much", "interpreter")
            else:
                self._start(inputs, sync=False)
        elif self.calls >= MIN_CALLS and self.best < MIN_CALL_S:
            self._finish(self.interp, f"interpreter calls take {self.best * 1e6:.0f} us "
                         f"< MIN_CALL_S: XLA's dispatch would cost as much", "interpreter")
        return out

    def _start(self, inputs, sync: bool) -> None:
        try:
            self._queue(inputs, sync)
        except Exception as e:  # noqa: BLE001 - a bug here must not fail the user's call
            self._finish(self.interp, f"could not start the XLA compile: {e!r}", "interpreter",
                         logging.INFO)

    def _queue(self, inputs, sync: bool) -> None:
        job = _Job(self.prog, inputs)
        if sync:
            self.job = job
            self.tier, self.why = "compiling", f"compiling at call {self.calls} (sync mode)"
            job.run()
            return
        if _submit(job):
            self.job = job
            self.tier = "compiling"
            self.why = (f"compiling since call {self.calls}: {self.spent:.3g} s on the "
                        f"interpreter >= estimated compile {self.budget:.3g} s")
            log.debug("tiering: %r: %s", self.prog, self.why)

    def _after(self, inputs):
        job = self.job
        if not job.done.is_set():
            return self.interp(inputs)  # never wait for the compile
        self.compile_s = job.seconds
        if job.error is not None:
            self._finish(self.interp, f"XLA compile failed: {job.error!r}", "interpreter",
                         logging.INFO)
            return self.interp(inputs)
        call = self.xla_call
        if call is None:
            call = self.xla_call = _xla_entry(self.prog, job.runner)
        if self.tier == "compiling":  # first call with XLA ready: both, compared
            ref = self.interp(inputs)
            try:
                bad = agree(ref, call(inputs))
            except Exception as e:  # noqa: BLE001 - an XLA failure leaves the interpreter
                bad = f"XLA failed: {e!r}"
            if bad is not None:
                self._finish(self.interp, f"XLA disagrees with the interpreter: {bad}",
                             "interpreter", logging.INFO)
            elif _settings["mode"] == "sync":
                self._finish(call, "XLA agrees (sync mode switches without timing)", "xla")
            else:
                self.tier, self.why = "trial", "XLA agrees: timing it against the interpreter"
            return ref
        # the trial: XLA and the interpreter in turn, each timed TRIAL_CALLS times (the same
        # load on the machine for both)
        on_xla = len(self.xla_times) <= len(self.interp_times)
        c0, t0 = time.process_time(), time.perf_counter()
        try:
            out = call(inputs) if on_xla else self.interp(inputs)
        except Exception as e:  # noqa: BLE001
            self._finish(self.interp, f"XLA failed: {e!r}", "interpreter", logging.INFO)
            return self.interp(inputs)
        t1, c1 = time.perf_counter(), time.process_time()
        (self.xla_times if on_xla else self.interp_times).append((c1 - c0, t1 - t0))
        if len(self.interp_times) >= TRIAL_CALLS:
            self._decide(call)
        return out

    def _decide(self, call) -> None:
        """The trial's verdict, on CPU time (all the process's threads: what each tier costs,
        which other processes' load does not inflate as it inflates wall time): XLA when its
        best CPU time is below ``SPEEDUP`` times the interpreter's, unless the interpreter ran
        in parallel (its best wall time below ``PARALLEL`` times its best CPU time: its threads
        bought it wall time at a CPU cost) and XLA's best wall time is above the interpreter's
        by more than 1 / ``SPEEDUP``.  (On a loaded machine wall times exceed CPU times, and
        the wall guard does not apply.)"""
        cx, cw = min(c for c, _ in self.xla_times), min(w for _, w in self.xla_times)
        ix, iw = min(c for c, _ in self.interp_times), min(w for _, w in self.interp_times)
        figs = (f"CPU {cx * 1e3:.3g} ms vs the interpreter's {ix * 1e3:.3g} ms, wall "
                f"{cw * 1e3:.3g} ms vs {iw * 1e3:.3g} ms")
        threads_won = iw < PARALLEL * ix and cw * SPEEDUP > iw
        if cx < SPEEDUP * ix and not threads_won:
            self._finish(call, f"XLA agrees and is faster: {figs}", "xla")
        else:
            self._finish(self.interp, f"XLA agrees but is not faster: {figs}", "interpreter")

    def _finish(self, run, why: str, tier: str, level: int = logging.DEBUG) -> None:
        self.tier, self.why = tier, why
        self.final = run
        self.job = None
        log.log(level, "tiering: %r on %s: %s", self.prog, tier, why)
        if self.on_final is not None:
            self.on_final(self, run)


def _xla_entry(prog, runner):
    """A per-call entry point running prog on runner: inputs of exactly the program's dtypes
    and shapes as they are (the case of every call of a jitted function after its first), any
    other checked and converted as ``eval`` does; outputs writable numpy arrays, as the
    interpreter's."""
    check = prog._check_all
    kinds = [(np.dtype(av.dtype), tuple(av.shape)) for av in prog._input_avals]
    n = len(kinds)
    run = runner.run

    def call(inputs):
        exact = len(inputs) == n
        if exact:
            for x, (dt, shape) in zip(inputs, kinds):
                if type(x) is not np.ndarray or x.dtype != dt or x.shape != shape or \
                        not x.flags.c_contiguous:
                    exact = False
                    break
        res = run(inputs if exact else check(inputs)[0])
        return [r if r.flags.writeable else r.copy() for r in res]
    return call


# ---- bookkeeping for td.jit ----

class TierTable(dict):
    """A jitted function's ``tiers``: its programs that tiering moves, by call signature;
    ``tiers()`` lists the state of each still in its cache (``Tiered.state``) with its call
    signature under ``signature``. It holds a program's Tiered weakly while tiering decides (the
    function's cache holds it: clear_caches lets the program go) and the state it ended in once
    decided (the Tiered is gone from the cache then)."""

    __slots__ = ("cache", "__weakref__")

    def __init__(self, cache):
        super().__init__()
        self.cache = cache

    def __call__(self) -> list[dict]:
        out = []
        for sig, v in list(self.items()):
            if sig not in self.cache:
                continue
            state = v if isinstance(v, dict) else (t.state() if (t := v()) is not None else None)
            if state is not None:
                out.append({"signature": sig, **state})
        return out


def track(run, sig, table: TierTable | None) -> None:
    """When run, the entry point of ``table.cache[sig]`` (a jitted function's FunctionCache), is
    a Tiered: let it put its final tier there in its place (and drop the function's remembered
    fast path, which holds it), and list it in ``table``."""
    if type(run) is not Tiered or table is None:
        return
    for s in [s for s in table if s not in table.cache]:
        del table[s]
    table[sig] = weakref.ref(run)  # no callback: a signal landing in one would be dropped
    ref, table_ref = weakref.ref(table.cache), weakref.ref(table)

    def on_final(t, run):
        tbl = table_ref()
        if tbl is not None and sig in tbl:
            tbl[sig] = t.state()  # decided: what tiers() says from now on
        c = ref()
        if c is None:
            return
        entry = c.get(sig)
        if entry is not None and entry[3] is t:
            c[sig] = entry[:3] + (run,)
        if c.forget is not None:  # the fast path may hold t (again: a call under way when t
            c.forget()            # decided remembers t after it)
    run.on_final = on_final
