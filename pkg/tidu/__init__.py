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
from tidu.api import custom_derivatives, debug, lax, tree_util
from tidu.api.control_flow import (
    checkpoint,
    checkpoint_name,
    checkpoint_policies,
    cond,
    fori_loop,
    remat,
    scan,
    switch,
    while_loop,
)
from tidu.api.custom import custom_jvp
from tidu.api.custom_vjp import custom_vjp
from tidu.api.debug import pure_callback
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
from tidu.api.lowered import Lowered
from tidu.api.runtime import block_until_ready, device_get, make_jaxpr, make_program
from tidu.api.shard_map import shard_map
from tidu.api.vmap import vmap
from tidu.backends import xla
from tidu.backends.interpreter import LoadedProgram, get_num_threads, load, set_num_threads
from tidu.backends.pictures import show, to_dot
from tidu.backends.program import CompiledProgram, compile
from tidu.backends.tiered import set_tiering, tiering
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
from tidu.graph.memory import (
    FreedGraphError,
    cache_limits,
    clear_caches,
    memory_stats,
    set_cache_limits,
)
from tidu.numpy import fft, linalg, nn, scipy
from tidu.numpy.constants import (
    bool_,
    complex64,
    complex128,
    dtype,
    e,
    euler_gamma,
    finfo,
    float32,
    float64,
    iinfo,
    inf,
    int8,
    int16,
    int32,
    int64,
    nan,
    newaxis,
    pi,
    uint8,
    uint16,
    uint32,
    uint64,
)
from tidu.numpy.construct import (
    block,
    diag_indices,
    diag_indices_from,
    geomspace,
    ix_,
    lexsort,
    logspace,
    polyfit,
    put_along_axis,
    rot90,
    tril_indices,
    tril_indices_from,
    triu_indices,
    triu_indices_from,
    vander,
)
from tidu.numpy.contractions import cross, inner, kron, outer, tensordot, trace, vdot
from tidu.numpy.conv import convolve, correlate
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
    maximum,
    minimum,
    power,
    real,
    reshape,
    rsqrt,
    sign,
    sin,
    sqrt,
    stop_gradient,
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
from tidu.numpy.logical import (
    bitwise_and,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    invert,
    left_shift,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    right_shift,
)
from tidu.numpy.numeric import (
    copysign,
    frexp,
    gcd,
    heaviside,
    lcm,
    ldexp,
    nextafter,
    signbit,
    sinc,
)
from tidu.numpy.reducers import all, amax, amin, any, max, mean, min, prod, std, sum, var
from tidu.numpy.reductions import diff
from tidu.numpy.segment import segment_max, segment_min, segment_prod, segment_sum
from tidu.numpy.selection import (
    argwhere,
    bincount,
    flatnonzero,
    histogram,
    nonzero,
    unique,
)
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
    argmax,
    argmin,
    argsort,
    cummax,
    cummin,
    cumprod,
    cumsum,
    sort,
)
from tidu.numpy.statistics import (
    allclose,
    average,
    corrcoef,
    count_nonzero,
    cov,
    digitize,
    interp,
    isclose,
    median,
    nanargmax,
    nanargmin,
    nanmax,
    nanmean,
    nanmedian,
    nanmin,
    nanpercentile,
    nanprod,
    nanquantile,
    nanstd,
    nansum,
    nanvar,
    percentile,
    polyval,
    ptp,
    quantile,
    searchsorted,
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
    "abs", "AbstractValue", "all", "allclose", "angle", "any", "apply", "arange", "arccos",
    "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "argmax", "argmin", "argsort",
    "argwhere", "around", "array", "array_split", "asarray", "astype", "atleast_1d", "atleast_2d",
    "atleast_3d", "aval", "average", "bincount", "bitwise_and", "bitwise_invert",
    "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "block", "bool_", "broadcast_to", "build", "cache_limits", "cbrt", "ceil", "checkpoint",
    "clear_caches", "clip", "column_stack", "compile", "CompiledProgram", "complex128",
    "complex64", "concatenate", "cond", "conj", "convolve", "copysign", "corrcoef", "correlate",
    "cos", "cosh", "count_nonzero", "cov", "cross", "cummax", "cummin", "cumprod", "cumsum",
    "custom_derivatives", "custom_jvp", "custom_vjp", "debug", "deg2rad", "degrees", "diag",
    "diag_indices", "diag_indices_from",
    "diagonal", "diff", "differentiate", "digitize", "divmod", "dot", "dstack", "dtype",
    "dynamic_slice", "dynamic_update_slice", "e", "einsum", "einsum_path", "empty", "empty_like",
    "erf", "erfc", "erfinv", "euler_gamma", "exp", "exp2", "expand_dims", "expm1", "External",
    "eye", "fft", "finfo", "fix", "flatnonzero", "flip", "fliplr", "flipud", "float32", "float64",
    "floor", "floor_divide", "fmax", "fmin", "fmod", "fori_loop", "Fragment", "FragmentBuilder",
    "FreedGraphError", "frexp", "full", "full_like", "gcd", "geomspace", "get_cmake_dir",
    "get_include", "get_num_threads", "grad", "GraphError", "heaviside", "hessian", "histogram",
    "hstack", "hvp",
    "hypot", "identity", "iinfo", "imag", "inf", "inner", "int8", "int16", "int32", "int64",
    "interp", "invert",
    "iota", "isclose", "isfinite", "isinf", "isnan", "ix_", "jacfwd", "jacrev", "jit", "jvp",
    "kron", "lax", "lcm", "ldexp", "left_shift", "lexsort", "linalg", "Linear", "linear_transpose",
    "LinearFragment", "linearize", "linspace", "load", "LoadedProgram", "Local", "log", "log10",
    "log1p", "log2", "logaddexp", "logaddexp2", "logical_and", "logical_not", "logical_or",
    "logical_xor", "logspace", "materialize_merge", "MaterializedGraph", "matmul", "max",
    "maximum", "mean", "median", "memory_stats", "meshgrid", "min", "minimum", "mod", "moveaxis",
    "nan", "nan_to_num", "nanargmax", "nanargmin", "nanmax", "nanmean", "nanmedian", "nanmin",
    "nanpercentile", "nanprod", "nanquantile", "nanstd", "nansum", "nanvar", "ndim", "newaxis",
    "nextafter", "nn", "nonzero", "ones", "ones_like", "OpMode", "ops", "outer", "pad",
    "percentile", "pi", "polyfit", "polyval", "power", "PRIMAL", "prod", "program_cache", "ptp",
    "pure_callback",
    "put_along_axis", "quantile", "rad2deg", "radians", "ravel", "real", "reciprocal", "remainder",
    "remat", "repeat", "reshape", "resolve", "ResolvedView", "right_shift", "rint", "roll",
    "rot90", "round", "rsqrt", "saved_values", "SavedValue", "scan", "scipy", "searchsorted",
    "select", "set_cache_limits",
    "set_num_threads", "set_tiering", "shape", "shard_map", "show", "sign", "signbit", "sin",
    "sinc", "sinh",
    "size", "sort", "spec", "split", "sqrt", "square", "squeeze", "stack", "std", "stop_gradient",
    "sum", "swapaxes", "switch", "take", "take_along_axis", "tan", "tanh", "tensordot", "tiering",
    "tile", "to_dot", "trace", "Tracer", "transpose", "tree_util", "tri", "tril", "tril_indices",
    "tril_indices_from", "triu", "triu_indices", "triu_indices_from", "trunc", "uint8", "uint16",
    "uint32", "uint64", "unique",
    "ValKey",
    "value_and_grad", "vander", "var", "vdot", "vjp", "vmap", "vstack", "where", "while_loop",
    "xla", "zeros", "zeros_like", "random",
    # jax's runtime and inspection names (tidu.api.runtime, tidu.api.lowered)
    "block_until_ready", "checkpoint_name", "checkpoint_policies", "device_get", "Lowered",
    "make_jaxpr", "make_program",
    "amax", "amin", "segment_max", "segment_min", "segment_prod", "segment_sum",
]

from tidu import random  # noqa: E402  (last: it builds on the names above)
