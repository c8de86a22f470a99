"""Running forged files through the Python loader and evaluator in worker subprocesses: a death
by signal names the file being processed (the worker writes its index to a progress file before
each) and a new worker resumes from the next index, so one run reports every crashing file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from _support.forge import parse

CAP = 64 << 20        # evaluate only when declared inputs, outputs and workspace fit in 64 MiB ...
ADDRESS_LIMIT = 4 << 30  # ... or when an allocation past the worker's address-space limit must fail
PER_FILE_S = 20       # SIGALRM (a failure) for a file that hangs


def manifest(d: Path) -> list[tuple[int, str, str]]:
    rows = []
    for line in (d / "manifest.txt").read_text().splitlines():
        i, seed, desc = line.split("\t", 2)
        rows.append((int(i), seed, desc))
    return rows


def _inputs(shapes, dtypes) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for shp, dt in zip(shapes, dtypes):
        dt = np.dtype(dt)
        if dt.kind == "b":
            out.append(rng.random(shp) < 0.5)
        elif dt.kind in "iu":
            out.append(rng.integers(-5, 6, shp).astype(dt))
        elif dt.kind == "c":
            out.append((rng.standard_normal(shp) + 1j * rng.standard_normal(shp)).astype(dt))
        else:
            out.append((rng.standard_normal(shp) + 2.0).astype(dt))
    return [np.array(x) for x in out]  # 0-d stays 0-d (ascontiguousarray would not)


def check_one(data: bytes, same_as: bytes | None = None) -> str | None:
    """Load and (size permitting) evaluate one file.  Exceptions are fine; returns a failure
    message for an accepted file that breaks an invariant (or wrong values for a no-op edit)."""
    from tidu import _eval
    from tidu.evaluator import ensure_blas

    ensure_blas()
    try:
        p = _eval.Program(data)
    except Exception:  # noqa: BLE001 - any exception is a clean rejection
        return None
    a = parse(data)
    n_in, n_out = len(a.a["inputs"]), len(a.a["outputs"])
    if len(p.input_names) != n_in or len(a.input_names) != n_in or len(a.output_names) != n_out:
        return (f"accepted name counts that differ from the input/output counts | "
                f"{len(a.input_names)} input names for {n_in} inputs, "
                f"{len(a.output_names)} output names for {n_out} outputs")
    shapes, dtypes = [tuple(s) for s in p.input_shapes], list(p.input_dtypes)
    in_bytes = sum(int(np.prod(s, dtype=object)) * np.dtype(d).itemsize
                   for s, d in zip(shapes, dtypes))
    out_bytes = sum(a.nbytes(int(s)) for s in a.a["outputs"])
    # workspace_bytes counts nested programs (loop bodies, branches) and loop buffers: what
    # the evaluation allocates.  load's max_bytes must refuse exactly the programs over it.
    ws_bytes = int(p.workspace_bytes)
    if ws_bytes < int(p.arena_bytes):
        return f"workspace_bytes {ws_bytes} below arena_bytes {int(p.arena_bytes)}"
    try:
        _eval.Program(data, max_bytes=CAP)
        capped = False
    except ValueError:
        capped = True
    if capped != (ws_bytes > CAP):
        return (f"max_bytes={CAP} {'refused' if capped else 'accepted'} a program whose "
                f"workspace_bytes is {ws_bytes}")
    big = [b for b in (out_bytes, ws_bytes) if b > CAP]
    if in_bytes > CAP or any(b < ADDRESS_LIMIT for b in big):
        return None  # loading was the test; evaluating would take too much time or memory
    try:
        outs = p.run(_inputs(shapes, dtypes))
    except MemoryError:
        if not big:  # the worker may map 4 GiB: the program allocated far more than it declared
            return (f"ran out of memory evaluating a program that declared {ws_bytes} bytes "
                    f"of workspace | arena_bytes {int(p.arena_bytes)}")
        return None
    except Exception:  # noqa: BLE001
        if big:
            return None
        if same_as is not None:
            return "a no-op edit made evaluation raise"
        return None
    if big:
        return f"evaluated a program claiming {big} bytes without raising"
    if same_as is not None:
        ref = _eval.Program(same_as).run(_inputs(shapes, dtypes))
        for k, (x, y) in enumerate(zip(outs, ref)):
            if not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"):
                return f"a no-op edit changed output {k}"
    return None


def worker(d: Path, todo: Path, progress: Path) -> int:
    """Check the files of d whose indices `todo` lists, in order; prints FAIL lines, then DONE."""
    import resource

    import tidu  # noqa: F401 - imported (and its BLAS loaded) before the address-space limit
    from tidu.evaluator import ensure_blas

    ensure_blas()
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_LIMIT, ADDRESS_LIMIT))
    rows = {i: (seed, desc) for i, seed, desc in manifest(d)}
    seeds = {}
    for i in map(int, todo.read_text().split()):
        progress.write_text(f"{i}\n")
        seed, desc = rows[i]
        same = None
        if desc.startswith("same"):
            same = seeds.setdefault(seed, (d / f"seed_{seed}.tidu").read_bytes())
        signal.alarm(PER_FILE_S)
        msg = check_one((d / f"{i:06d}.tidu").read_bytes(), same)
        signal.alarm(0)
        if msg:
            print(f"FAIL\t{i}\t{msg}", flush=True)
    print("DONE", flush=True)
    return 0


def run_resuming(d: Path, name: str, run, describe, cap: int = 150, per_class: int = 3,
                 save_to: Path | None = None) -> tuple[list[tuple[int, str]], list[str]]:
    """Runs run(list_file, progress_file) -> CompletedProcess over every file of d; when it dies,
    records describe(result) for the file in progress and resumes after it.  After `per_class`
    deaths in one mutation class the rest of that class is skipped (noted), and after `cap`
    deaths the run stops.  Returns (failures as (index, what), notes)."""
    rows = manifest(d)
    cls = {i: mutation_class(desc) for i, _, desc in rows}
    todo, failures, notes, deaths = [i for i, _, _ in rows], [], [], {}
    lst, progress = d / f"{name}_todo.txt", d / f"{name}_progress.txt"
    while todo:
        if sum(deaths.values()) >= cap:
            notes.append(f"{name}: stopped after {cap} crashes, {len(todo)} files unchecked")
            break
        lst.write_text("\n".join(map(str, todo)) + "\n")
        res = run(lst, progress)
        for line in res.stdout.splitlines():
            if line.startswith("FAIL\t"):
                _, i, msg = line.split("\t", 2)
                failures.append((int(i), msg))
        if res.returncode == 0:
            break
        i = int(progress.read_text())
        failures.append((i, describe(res)))
        if save_to is not None:
            save_to.mkdir(parents=True, exist_ok=True)
            (save_to / f"{i:06d}.tidu").write_bytes((d / f"{i:06d}.tidu").read_bytes())
        todo = todo[todo.index(i) + 1:]
        c = cls[i]
        deaths[c] = deaths.get(c, 0) + 1
        if deaths[c] >= per_class:
            rest = [j for j in todo if cls[j] != c]
            if len(rest) < len(todo):
                notes.append(f"{name}: {len(todo) - len(rest)} more files of class '{c}' "
                             f"skipped after {per_class} crashes")
            todo = rest
    return failures, notes


def run_python(d: Path, cap: int = 150, save_to: Path | None = None):
    """The Python loader+evaluator over d in worker subprocesses (see run_resuming)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")

    def run(lst: Path, progress: Path):
        return subprocess.run([sys.executable, str(Path(__file__).with_name("forge.py")),
                               "--worker", str(d), "--todo", str(lst), "--progress",
                               str(progress)], capture_output=True, text=True, env=env)

    def describe(res) -> str:
        if res.returncode < 0:
            return f"python worker killed by {signal.Signals(-res.returncode).name}"
        return f"python worker exit {res.returncode} | {res.stderr.strip()[-300:]}"

    return run_resuming(d, "python", run, describe, cap=cap, save_to=save_to)


def mutation_class(desc: str) -> str:
    """'craft pad_wrap', 'attr Slice stride', 'field', 'names', ... for grouping failures."""
    w = desc.split()
    if w[0] == "craft":
        return " ".join(w[:2] + (w[2:3] if w[1] == "zero_extent" else []))
    if w[0] == "attr":
        return f"attr {w[1].split('#')[0]} {w[2]}"
    if w[0] == "field":  # by the arrays edited
        return "field " + "+".join(sorted({x.split("[")[0] for x in w[1:] if "[" in x}))
    return " ".join(w[:2]) if w[0] in ("names", "raw") else w[0]


def report(d: Path, failures: list[tuple[int, str]], notes=(), examples: int = 2) -> str:
    """Failures grouped by (mutation class, symptom), with manifest lines to reproduce."""
    rows = {i: (seed, desc) for i, seed, desc in manifest(d)}
    groups: dict[tuple[str, str], list[int]] = {}
    for i, what in failures:
        key = (mutation_class(rows[i][1]) if i in rows else "-", what.split(" | ")[0][:160])
        groups.setdefault(key, []).append(i)
    out = []
    for (cls, what), idx in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        out.append(f"{len(idx):5d} x {cls} -> {what}")
        out += [f"        {i}\t{rows[i][0]}\t{rows[i][1]}" for i in idx[:examples] if i in rows]
    return "\n".join(out + list(notes))
