"""tidu: graph-based automatic differentiation with a compiled core.

The pipeline: build -> resolve -> differentiate -> transpose -> materialize_merge -> compile -> eval.
"""

from __future__ import annotations

from pathlib import Path

from tidu.graph import (PRIMAL, AbstractValue, External, Fragment,
                        FragmentBuilder, GraphError, Linear, Local, MaterializedGraph, OpMode,
                        ResolvedView, ValKey, aval, materialize_merge, program_cache,
                        resolve)
from tidu.backends.program import CompiledProgram, compile
from tidu.backends import xla
from tidu.tracing import (Tracer, abs, apply, astype, broadcast_to, build, concatenate, conj, cos, dot,
                          exp, expm1, imag, iota, log, log1p, matmul, max, maximum, mean, minimum,
                          ones_like, power, real, reshape, rsqrt, sign, sin, spec, sqrt,
                          stop_gradient, sum, tanh, where, zeros_like)
from tidu import ops
from tidu.einsum import cross, einsum, einsum_path, inner, kron, outer, tensordot, trace, vdot
from tidu.sorting import (all, any, argmax, argmin, argsort, cummax, cummin, cumprod, cumsum, min,
                          prod, sort)
from tidu.shapes import (arange, array, array_split, asarray, atleast_1d, atleast_2d, atleast_3d,
                         column_stack, diag, diagonal, diff, dstack, empty, empty_like,
                         expand_dims, eye, flip, fliplr, flipud, full, full_like, hstack,
                         identity, linear_transpose, linspace, meshgrid, moveaxis, ones, ones_like,
                         pad, ravel, repeat, roll, select, split, squeeze, stack, std, swapaxes,
                         tile, tri, tril, triu, var, vstack, zeros, zeros_like)
from tidu.shapes import ndim, shape, size
from tidu import linalg
from tidu.indexing import dynamic_slice, dynamic_update_slice, take, take_along_axis
from tidu.numpy_math import (angle, arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh, around,
                             cbrt, ceil, clip, cosh, deg2rad, degrees, divmod, erf, erfc, erfinv, exp2,
                             fix, floor, floor_divide, fmax, fmin, fmod, hypot, isfinite, isinf, isnan,
                             log2, log10, logaddexp, logaddexp2, mod, nan_to_num, rad2deg, radians,
                             reciprocal, remainder, rint, round, sinh, square, tan, trunc)
from tidu import nn, scipy
from tidu.backends.interpreter import LoadedProgram, load
from tidu.backends.pictures import show, to_dot
from tidu.api import jit
from tidu.batching import vmap
from tidu.ad import LinearFragment, SavedValue, differentiate, saved_values
from tidu.api import (grad, hessian, hvp, jacfwd, jacrev, jvp, linearize, transpose, value_and_grad,
                      vjp)
from tidu.control_flow import (checkpoint, cond, fori_loop, remat, scan, switch,  # noqa: E402
                               while_loop)  # docs/control_flow.md

__version__ = "0.1.0"

__all__ = [
    "AbstractValue", "CompiledProgram", "External", "Fragment", "FragmentBuilder", "GraphError",
    "Linear", "Local", "MaterializedGraph", "OpMode", "PRIMAL", "ResolvedView", "Tracer", "ValKey",
    "LoadedProgram", "linalg", "load", "abs", "apply", "astype", "aval", "jit", "LinearFragment", "SavedValue", "differentiate",
    "saved_values", "transpose", "grad", "value_and_grad", "jvp", "vjp", "linearize",
    "hessian", "vmap", "jacfwd", "jacrev", "hvp", "broadcast_to", "build", "compile", "concatenate", "conj", "cos", "dot",
    "exp", "expm1", "get_cmake_dir", "get_include", "imag", "iota", "log", "log1p",
    "materialize_merge", "matmul", "max", "maximum", "mean", "minimum", "ones_like", "ops", "power",
    "program_cache", "real", "reshape", "resolve", "rsqrt", "sign", "sin", "spec", "sqrt",
    "stop_gradient", "sum", "tanh", "transpose", "where", "zeros_like",
    "show", "to_dot",
    "dynamic_slice", "dynamic_update_slice", "take", "take_along_axis",
]
__all__ += ["all", "any", "argmax", "argmin", "argsort", "cummax", "cummin", "cumprod", "cumsum",
            "min", "prod", "sort"]  # tidu.sorting
__all__ += ["cross", "einsum", "einsum_path", "inner", "kron", "outer", "tensordot", "trace",
            "vdot"]  # tidu.einsum
# elementwise math (tidu.numpy_math), jax.nn and jax.scipy names (docs/numpy.md)
__all__ += ["angle", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh",
            "around", "cbrt", "ceil", "clip", "cosh", "deg2rad", "degrees", "divmod", "erf", "erfc",
            "erfinv", "exp2", "fix", "floor", "floor_divide", "fmax", "fmin", "fmod", "hypot",
            "isfinite", "isinf", "isnan", "log2", "log10", "logaddexp", "logaddexp2", "mod",
            "nan_to_num", "rad2deg", "radians", "reciprocal", "remainder", "rint", "round", "sinh",
            "square", "tan", "trunc", "nn", "scipy"]
from tidu import shapes as _shapes  # noqa: E402 - docs/numpy.md, "Shapes and array construction"

__all__ += [n for n in _shapes.__all__ if n not in __all__]
__all__ += ["scan", "fori_loop", "while_loop", "cond", "switch", "checkpoint", "remat"]


def _installed(name: str) -> Path | None:
    """A directory installed into the package: next to this file in a wheel, next to the
    compiled module in an editable install (scikit-build-core keeps those in its build tree)."""
    from tidu import _core

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
