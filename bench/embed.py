"""C++ embedding: per-call time of the 5,000-op value-and-gradient program from C++ (no Python)
vs the same program from Python; the difference is the binding overhead.

    python bench/embed.py      (builds tests/cpp against the installed package with CMake)
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tidu as td

sys.path.insert(0, str(Path(__file__).parent))
from eval import scalar_dag  # noqa: E402


def main():
    f = scalar_dag(5000, td)
    F = td.build(f, x=td.spec(()), y=td.spec(()))
    T1 = td.transpose(td.differentiate(td.resolve([F]), F.outputs, ["x", "y"]))
    (ct,) = [k for _, k in T1.tangent_inputs]
    prog = td.compile(td.materialize_merge(td.resolve([F, T1]), F.outputs + T1.tangent_outputs),
                      backend="cpu")
    inputs = [np.asarray({"x": 0.3, "y": 0.4, ct: 1.0}[k], np.float64) for k in prog.inputs]
    outs = prog.eval(inputs)
    n = 2000
    runs = []
    for _ in range(7):  # median of 7 runs: the machine is shared and noisy
        t0 = time.perf_counter()
        for _ in range(n // 7):
            prog.eval(inputs)
        runs.append((time.perf_counter() - t0) / (n // 7) * 1e6)
    py_us = statistics.median(runs)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        prog.save(tmp / "vg.tidu")
        (tmp / "in.bin").write_bytes(b"".join(a.tobytes() for a in inputs))
        (tmp / "out.bin").write_bytes(b"".join(o.tobytes() for o in outs))
        cmake = shutil.which("cmake") or "cmake"
        src = Path(__file__).resolve().parents[1] / "tests" / "cpp"
        subprocess.run([cmake, "-S", str(src), "-B", str(tmp / "b"), f"-Dtidu_DIR={td.get_cmake_dir()}",
                        "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
        subprocess.run([cmake, "--build", str(tmp / "b"), "-j2"], check=True, capture_output=True)
        res = subprocess.run([str(tmp / "b" / "eval_saved"), str(tmp / "vg.tidu"), str(tmp / "in.bin"),
                              str(tmp / "out.bin"), str(n)], check=True, capture_output=True, text=True)
        cpp_us = float(res.stdout.split("per call:")[1].split("us")[0])
    print(f"5k-op value+grad ({prog.n_instructions} instr): C++ {cpp_us:.2f} us/call, Python "
          f"{py_us:.2f} us/call, binding overhead {py_us - cpp_us:.2f} us ({py_us / cpp_us:.3f}x)")


if __name__ == "__main__":
    main()
