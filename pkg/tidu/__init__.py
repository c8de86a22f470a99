"""tidu: graph-based automatic differentiation with a compiled core.

The pipeline: build -> resolve -> differentiate -> transpose -> materialize_merge -> compile ->
eval.
This module is the face: it re-exports the public names of the layers below (docs/architecture.md)
and holds no code.
"""

from __future__ import annotations

from tidu import ops
from tidu._paths import get_cmake_dir, get_include
from tidu.ad import LinearFragment, SavedValue, differentiate, saved_values
from tidu.api import lax
from tidu.api.control_flow import checkpoint, cond, fori_loop, remat, scan, switch, while_loop
from tidu.api.custom import custom_jvp, custom_vjp
from tidu.api.grad import (
    grad,
    hessian,
    hvp,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    transpose,
    value_and_grad,
    vjp,
)
from tidu.api.jit import jit
from tidu.api.linear_transpose import linear_transpose
from tidu.api.vmap import vmap
from tidu.backends import xla
from tidu.backends.interpreter import LoadedProgram, load
from tidu.backends.pictures import show, to_dot
from tidu.backends.program import CompiledProgram, compile
from tidu.graph import (
    PRIMAL,
    AbstractValue,
    External,
    Fragment,
    FragmentBuilder,
    GraphError,
    Linear,
    Local,
    MaterializedGraph,
    OpMode,
    ResolvedView,
    ValKey,
    aval,
    materialize_merge,
    program_cache,
    resolve,
)
from tidu.numpy import linalg, nn, scipy
from tidu.numpy.contractions import cross, inner, kron, outer, tensordot, trace, vdot
from tidu.numpy.core import (
    abs,
    astype,
    broadcast_to,
    concatenate,
    conj,
    cos,
    dot,
    exp,
    expm1,
    imag,
    iota,
    log,
    log1p,
    matmul,
    max,
    maximum,
    mean,
    minimum,
    power,
    real,
    reshape,
    rsqrt,
    sign,
    sin,
    sqrt,
    stop_gradient,
    sum,
    tanh,
    where,
)
from tidu.numpy.creation import (
    arange,
    array,
    asarray,
    diag,
    diagonal,
    empty,
    empty_like,
    eye,
    full,
    full_like,
    identity,
    linspace,
    meshgrid,
    ndim,
    ones,
    ones_like,
    shape,
    size,
    tri,
    tril,
    triu,
    zeros,
    zeros_like,
)
from tidu.numpy.einsum import einsum, einsum_path
from tidu.numpy.reductions import diff, std, var
from tidu.numpy.shapes import (
    array_split,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    column_stack,
    dstack,
    expand_dims,
    flip,
    fliplr,
    flipud,
    hstack,
    moveaxis,
    pad,
    ravel,
    repeat,
    roll,
    select,
    split,
    squeeze,
    stack,
    swapaxes,
    tile,
    vstack,
)
from tidu.numpy.sorting import (
    all,
    any,
    argmax,
    argmin,
    argsort,
    cummax,
    cummin,
    cumprod,
    cumsum,
    min,
    prod,
    sort,
)
from tidu.numpy.take import dynamic_slice, dynamic_update_slice, take, take_along_axis
from tidu.numpy.ufuncs import (
    angle,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    around,
    cbrt,
    ceil,
    clip,
    cosh,
    deg2rad,
    degrees,
    divmod,
    erf,
    erfc,
    erfinv,
    exp2,
    fix,
    floor,
    floor_divide,
    fmax,
    fmin,
    fmod,
    hypot,
    isfinite,
    isinf,
    isnan,
    log2,
    log10,
    logaddexp,
    logaddexp2,
    mod,
    nan_to_num,
    rad2deg,
    radians,
    reciprocal,
    remainder,
    rint,
    round,
    sinh,
    square,
    tan,
    trunc,
)
from tidu.trace.build import apply, build, spec
from tidu.trace.tracer import Tracer

__version__ = "0.1.0"

__all__ = [
    "abs", "AbstractValue", "all", "angle", "any", "apply", "arange", "arccos", "arccosh",
    "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "argmax", "argmin", "argsort",
    "around", "array", "array_split", "asarray", "astype", "atleast_1d", "atleast_2d",
    "atleast_3d", "aval", "broadcast_to", "build", "cbrt", "ceil", "checkpoint", "clip",
    "column_stack", "compile", "CompiledProgram", "concatenate", "cond", "conj", "cos", "cosh",
    "cross", "cummax", "cummin", "cumprod", "cumsum", "custom_jvp", "custom_vjp", "deg2rad",
    "degrees", "diag", "diagonal",
    "diff", "differentiate", "divmod", "dot", "dstack", "dynamic_slice", "dynamic_update_slice",
    "einsum", "einsum_path", "empty", "empty_like", "erf", "erfc", "erfinv", "exp", "exp2",
    "expand_dims", "expm1", "External", "eye", "fix", "flip", "fliplr", "flipud", "floor",
    "floor_divide", "fmax", "fmin", "fmod", "fori_loop", "Fragment", "FragmentBuilder", "full",
    "full_like", "get_cmake_dir", "get_include", "grad", "GraphError", "hessian", "hstack",
    "hvp", "hypot", "identity", "imag", "inner", "iota", "isfinite", "isinf", "isnan", "jacfwd",
    "jacrev", "jit", "jvp", "kron", "lax", "linalg", "Linear", "linear_transpose", "LinearFragment",
    "linearize", "linspace", "load", "LoadedProgram", "Local", "log", "log10", "log1p", "log2",
    "logaddexp", "logaddexp2", "materialize_merge", "MaterializedGraph", "matmul", "max",
    "maximum", "mean", "meshgrid", "min", "minimum", "mod", "moveaxis", "nan_to_num", "ndim",
    "nn", "ones", "ones_like", "OpMode", "ops", "outer", "pad", "power", "PRIMAL", "prod",
    "program_cache", "rad2deg", "radians", "ravel", "real", "reciprocal", "remainder", "remat",
    "repeat", "reshape", "resolve", "ResolvedView", "rint", "roll", "round", "rsqrt",
    "saved_values", "SavedValue", "scan", "scipy", "select", "shape", "show", "sign", "sin",
    "sinh", "size", "sort", "spec", "split", "sqrt", "square", "squeeze", "stack", "std",
    "stop_gradient", "sum", "swapaxes", "switch", "take", "take_along_axis", "tan", "tanh",
    "tensordot", "tile", "to_dot", "trace", "Tracer", "transpose", "tri", "tril", "triu",
    "trunc", "ValKey", "value_and_grad", "var", "vdot", "vjp", "vmap", "vstack", "where",
    "while_loop", "xla", "zeros", "zeros_like",
]
