"""Where the C++ headers and the CMake package files of this installation are."""

from __future__ import annotations

from pathlib import Path

from tidu._native import _core

__all__ = ["get_cmake_dir", "get_include"]


def _installed(name: str) -> Path | None:
    """A directory installed into the package: next to this file in a wheel, next to the
    compiled module in an editable install (scikit-build-core keeps those in its build tree)."""
    for base in (Path(__file__).parent, Path(_core.__file__).parent):
        if (base / name).is_dir():
            return base / name
    return None


def get_include() -> str:
    """Directory of the C++ headers (<tidu/...>), installed inside the package."""
    found = _installed("include")
    return str(found) if found else str(Path(__file__).resolve().parents[2] / "cpp" / "include")


def get_cmake_dir() -> str:
    """Directory holding tiduConfig.cmake, for ``-Dtidu_DIR=...`` / ``find_package(tidu)``."""
    found = _installed("cmake")
    if found is None:
        raise FileNotFoundError("tidu's CMake package files are not installed with this copy")
    return str(found)
