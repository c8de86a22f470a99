"""Building the C++ consumer project under tests/cpp against the installed package (release at
-O1, or Debug with AddressSanitizer and UndefinedBehaviorSanitizer), shared by the C++ tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tidu as td

HERE = Path(__file__).parents[1] / "cpp"  # tests/cpp


def cmake() -> list[str]:
    exe = shutil.which("cmake")
    return [exe] if exe else [sys.executable, "-m", "cmake"]


def ctest() -> str:
    return shutil.which("ctest") or str(Path(cmake()[0]).with_name("ctest"))


def build(tmp: Path, sanitize: bool, saved_dir: Path | None = None) -> Path:
    """Configure and build tests/cpp in tmp; returns the build directory."""
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.fail("no C++ compiler on PATH: the C++ consumer tests need one")
    out = tmp / ("build-asan" if sanitize else "build")
    cfg = [*cmake(), "-S", str(HERE), "-B", str(out), f"-Dtidu_DIR={td.get_cmake_dir()}",
           "-DCMAKE_BUILD_TYPE=" + ("Debug" if sanitize else "Release"),
           f"-DTIDU_SANITIZE={'ON' if sanitize else 'OFF'}"]
    if not sanitize:
        # an optimised, NDEBUG build, at -O1: the tests check values (bit for bit against
        # Python's -O3 evaluator) and behaviour, not speed, and -O3 took 3.3 times the CPU
        # (tools.cpp: 196 s against 59 s, most of the C++ tests' time)
        cfg.append("-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG")
    if saved_dir is not None:
        cfg.append(f"-DTIDU_SAVED_DIR={saved_dir}")
    for cmd in (cfg, [*cmake(), "--build", str(out), "-j2"]):
        res = subprocess.run(cmd, capture_output=True, text=True)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out
