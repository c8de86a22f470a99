"""The C++ consumer project under tests/cpp builds against the installed package with
find_package(tidu) and passes under CTest."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tidu

HERE = Path(__file__).parent / "cpp"


def _cmake() -> str:
    exe = shutil.which("cmake")
    if exe is None:  # the cmake wheel ships a module entry point
        return f"{sys.executable} -m cmake"
    return exe


def test_get_include_and_cmake_dir_exist():
    assert (Path(tidu.get_include()) / "tidu" / "interner.hpp").is_file()
    assert (Path(tidu.get_cmake_dir()) / "tiduConfig.cmake").is_file()


def test_find_package_consumer_builds_and_passes(tmp_path):
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.fail("no C++ compiler on PATH: the C++ consumer test needs one")
    cmake = _cmake().split()
    build = tmp_path / "build"
    subprocess.run([*cmake, "-S", str(HERE), "-B", str(build), f"-Dtidu_DIR={tidu.get_cmake_dir()}",
                    "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True, text=True)
    subprocess.run([*cmake, "--build", str(build), "-j2"], check=True, capture_output=True, text=True)
    ctest = shutil.which("ctest") or str(Path(cmake[0]).with_name("ctest"))
    res = subprocess.run([ctest, "--test-dir", str(build), "--output-on-failure"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "100% tests passed" in res.stdout
