"""``td.lax``: jax.lax's names with jax's signatures, on tidu's primitives (docs/lax.md lists
them, where each lives, and the names left out with the reason).  Here: the re-exports, the
shifts, ``linear_call``, and the implicit differentiation of roots and linear solves,
``custom_root`` and ``custom_linear_solve``, built on ``td.custom_jvp`` (docs/frontend.md); the
vocabulary itself is in ``lax_math``, ``lax_shapes``, ``lax_reduce``, ``lax_gather``,
``lax_window``, ``lax_ragged`` and ``lax_extra``."""

from __future__ import annotations

from collections.abc import Callable

from tidu import ops as _P
from tidu.api import lax_absent as _absent
from tidu.api import lax_linalg as linalg
from tidu.api import special_expint as _special_expint  # noqa: F401  (registers expi, exp1, expn)
from tidu.api.collectives import (
    all_gather,
    all_to_all,
    axis_index,
    axis_size,
    pbroadcast,
    pmax,
    pmean,
    pmin,
    ppermute,
    pshuffle,
    psum,
    psum_scatter,
    pswapaxes,
)
from tidu.api.control_flow import (
    _eager,
    _emit_multi,
    _flatten,
    _outer_trace,
    _trace_body,
    _unflatten,
    cond,
    fori_loop,
    scan,
    switch,
    while_loop,
)
from tidu.api.custom import closure_convert, custom_jvp
from tidu.api.grad import jvp, vjp
from tidu.api.lax_extra import (
    ConvGeneralDilatedDimensionNumbers,
    FftType,
    PrecisionLike,
    bitcast_convert_type,
    broadcast_like,
    clz,
    composite,
    conv_general_dilated_local,
    conv_general_dilated_patches,
    conv_general_permutations,
    conv_general_shape_tuple,
    conv_shape_tuple,
    conv_transpose_shape_tuple,
    dtype,
    empty,
    fft,
    index_take,
    mulhi,
    population_count,
    reduce_window_shape_tuple,
    stack,
    unstack,
)
from tidu.api.lax_gather import (
    GatherDimensionNumbers,
    GatherScatterMode,
    ScatterDimensionNumbers,
    gather,
    scatter,
    scatter_add,
    scatter_apply,
    scatter_max,
    scatter_min,
    scatter_mul,
    scatter_sub,
)
from tidu.api.lax_math import (
    AccuracyMode,
    RoundingMethod,
    Tolerance,
    abs,
    acos,
    acosh,
    add,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    cbrt,
    ceil,
    clamp,
    complex,
    conj,
    convert_element_type,
    cos,
    cosh,
    div,
    eq,
    erf,
    erf_inv,
    erfc,
    exp,
    exp2,
    expm1,
    floor,
    ge,
    gt,
    imag,
    integer_pow,
    is_finite,
    le,
    log,
    log1p,
    logistic,
    lt,
    max,
    min,
    mul,
    ne,
    neg,
    nextafter,
    pow,
    real,
    reciprocal,
    reduce_precision,
    rem,
    round,
    rsqrt,
    select,
    select_n,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    sub,
    tan,
    tanh,
)
from tidu.api.lax_ragged import (
    DotAlgorithm,
    DotAlgorithmPreset,
    RaggedDotDimensionNumbers,
    platform_dependent,
    ragged_dot,
    ragged_dot_general,
    with_sharding_constraint,
)
from tidu.api.lax_reduce import (
    _cummax as cummax,
)
from tidu.api.lax_reduce import (
    _cummin as cummin,
)
from tidu.api.lax_reduce import (
    approx_max_k,
    approx_min_k,
    argmax,
    argmin,
    associative_scan,
    cumlogsumexp,
    cumprod,
    cumsum,
    map,
    optimization_barrier,
    reduce,
    reduce_and,
    reduce_max,
    reduce_min,
    reduce_or,
    reduce_prod,
    reduce_sum,
    reduce_xor,
    sort,
    sort_key_val,
)
from tidu.api.lax_shapes import (
    DotDimensionNumbers,
    Precision,
    batch_matmul,
    broadcast,
    broadcast_in_dim,
    broadcast_shapes,
    broadcast_to_rank,
    broadcasted_iota,
    collapse,
    dot,
    dot_general,
    dynamic_index_in_dim,
    dynamic_slice_in_dim,
    dynamic_update_index_in_dim,
    dynamic_update_slice_in_dim,
    expand_dims,
    full,
    full_like,
    index_in_dim,
    iota,
    pad,
    padtype_to_pads,
    rev,
    slice_in_dim,
    split,
    squeeze,
    tile,
)
from tidu.api.lax_shapes import _concatenate as concatenate
from tidu.api.lax_shapes import _reshape as reshape
from tidu.api.lax_shapes import _slice as slice
from tidu.api.lax_shapes import _transpose as transpose
from tidu.api.lax_window import reduce_window
from tidu.api.special import (
    bessel_i0e,
    bessel_i1e,
    betainc,
    igamma,
    igamma_grad_a,
    igammac,
    polygamma,
    random_gamma_grad,
    zeta,
)
from tidu.numpy.conv import (
    ConvDimensionNumbers,
    conv,
    conv_dimension_numbers,
    conv_general_dilated,
    conv_transpose,
    conv_with_general_padding,
)
from tidu.numpy.core import stop_gradient
from tidu.numpy.logical import bitwise_and as _bitwise_and
from tidu.numpy.logical import bitwise_not
from tidu.numpy.logical import bitwise_or as _bitwise_or
from tidu.numpy.logical import bitwise_xor as _bitwise_xor
from tidu.numpy.scipy.special import digamma
from tidu.numpy.scipy.special import gammaln as lgamma
from tidu.numpy.sorting import top_k
from tidu.numpy.take import dynamic_slice, dynamic_update_slice
from tidu.ops.control_flow import CustomLinear, close_body
from tidu.trace.tracer import _emit, _lift, _promote, _trace_of


def bitwise_and(x, y):
    """``jax.lax.bitwise_and``: x & y elementwise (bool or integer)."""
    return _bitwise_and(x, y)


def bitwise_or(x, y):
    """``jax.lax.bitwise_or``: x | y elementwise (bool or integer)."""
    return _bitwise_or(x, y)


def bitwise_xor(x, y):
    """``jax.lax.bitwise_xor``: x ^ y elementwise (bool or integer)."""
    return _bitwise_xor(x, y)


__all__ = [
    "abs", "AccuracyMode", "acos", "acosh", "add", "all_gather", "all_to_all", "approx_max_k",
    "approx_min_k", "argmax", "argmin", "asin", "asinh", "associative_scan", "atan", "atan2",
    "atanh", "axis_index", "axis_size", "batch_matmul", "bessel_i0e", "bessel_i1e", "betainc",
    "bitcast_convert_type", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "broadcast",
    "broadcast_in_dim", "broadcast_like", "broadcast_shapes", "broadcast_to_rank",
    "broadcasted_iota", "cbrt", "ceil", "clamp", "clz", "collapse", "complex", "composite",
    "concatenate", "cond", "conj", "conv", "conv_dimension_numbers", "conv_general_dilated",
    "conv_general_dilated_local", "conv_general_dilated_patches", "conv_general_permutations",
    "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose", "conv_transpose_shape_tuple",
    "conv_with_general_padding", "ConvDimensionNumbers", "convert_element_type",
    "ConvGeneralDilatedDimensionNumbers", "cos", "cosh", "cumlogsumexp", "cummax", "cummin",
    "cumprod", "cumsum", "custom_linear_solve", "custom_root", "digamma", "div", "dot",
    "dot_general", "DotAlgorithm", "DotAlgorithmPreset", "DotDimensionNumbers", "dtype",
    "dynamic_index_in_dim", "dynamic_slice", "dynamic_slice_in_dim", "dynamic_update_index_in_dim",
    "dynamic_update_slice", "dynamic_update_slice_in_dim", "empty", "eq", "erf", "erf_inv", "erfc",
    "exp", "exp2", "expand_dims", "expm1", "fft", "FftType", "floor", "fori_loop", "full",
    "full_like", "gather", "GatherDimensionNumbers", "GatherScatterMode", "ge", "gt", "igamma",
    "igamma_grad_a", "igammac", "imag", "index_in_dim", "index_take", "integer_pow", "iota",
    "is_finite", "le", "lgamma", "linalg", "linear_call", "log", "log1p", "logistic", "lt", "map",
    "max", "min", "mul", "mulhi", "ne", "neg", "nextafter", "optimization_barrier", "pad",
    "padtype_to_pads", "pbroadcast", "platform_dependent", "pmax", "pmean", "pmin", "polygamma",
    "population_count", "pow", "ppermute", "Precision", "PrecisionLike", "pshuffle", "psum",
    "psum_scatter", "pswapaxes", "ragged_dot", "ragged_dot_general", "RaggedDotDimensionNumbers",
    "random_gamma_grad", "real", "reciprocal", "reduce", "reduce_and", "reduce_max", "reduce_min",
    "reduce_or", "reduce_precision", "reduce_prod", "reduce_sum", "reduce_window",
    "reduce_window_shape_tuple", "reduce_xor", "rem", "reshape", "rev", "round", "RoundingMethod",
    "rsqrt", "scan", "scatter", "scatter_add", "scatter_apply", "scatter_max", "scatter_min",
    "scatter_mul", "scatter_sub", "ScatterDimensionNumbers", "select", "select_n", "shift_left",
    "shift_right_arithmetic", "shift_right_logical", "sign", "sin", "sinh", "slice",
    "slice_in_dim", "sort", "sort_key_val", "split", "sqrt", "square", "squeeze", "stack",
    "stop_gradient", "sub", "switch", "tan", "tanh", "tile", "Tolerance", "top_k", "transpose",
    "unstack", "while_loop", "with_sharding_constraint", "zeta",
]


def _shift(op):
    def shift(x, y):
        """jax.lax's shift: operands of one integer dtype and shape; negative or oversized
        amounts give 0 (the sign for an arithmetic right shift)."""
        t = _trace_of(x, y)
        a, b = _promote(op.name, t, x, y)
        return _emit(t, op, a, b)

    shift.__name__ = op.name
    return shift


shift_left = _shift(_P.ShiftLeft())
shift_right_arithmetic = _shift(_P.ShiftRightArithmetic())
shift_right_logical = _shift(_P.ShiftRightLogical())


def __getattr__(name: str):
    # a jax.lax name tidu does not have: say so and why, rather than a bare AttributeError
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(_absent.message(name, len(__all__)))


def _tree_map(fn, *trees):
    leaves, spec = _flatten(trees[0])
    others = [_flatten(t)[0] for t in trees[1:]]
    return _unflatten(spec, [fn(*xs) for xs in zip(leaves, *others)])


def _zeros_like(tree):
    return _tree_map(lambda x: x * 0, tree)


# ---- linear_call ----


def linear_call(fun: Callable, transpose: Callable | None, residual_args, linear_args,  # noqa: F811
                message: str = ""):
    """``jax.custom_derivatives.linear_call``: ``fun(residual_args, linear_args)``, linear in
    linear_args, whose transpose is ``transpose(residual_args, cotangent)`` (one op; its forward
    derivative in linear_args is itself).  ``transpose`` None: reverse mode raises TypeError
    with ``message``."""
    r_leaves, r_spec = _flatten(residual_args)
    x_leaves, x_spec = _flatten(linear_args)
    outer = _outer_trace()
    if outer is None:
        return _eager(lambda r, x: linear_call(fun, transpose, _unflatten(r_spec, r),
                                               _unflatten(x_spec, x), message), r_leaves, x_leaves)
    t = outer
    rs = [_lift(t, x) for x in r_leaves]
    xs = [_lift(t, x) for x in x_leaves]
    nr = len(rs)
    fb, f_keys, f_flat, out_spec = _trace_body(
        t, fun, [x.aval for x in rs + xs],
        lambda i: (_unflatten(r_spec, i[:nr]), _unflatten(x_spec, i[nr:])), "linear_call's fun")
    tr = None
    if transpose is not None:
        tr = _trace_body(t, transpose, [x.aval for x in rs + f_flat],
                         lambda i: (_unflatten(r_spec, i[:nr]), _unflatten(out_spec, i[nr:])),
                         "linear_call's transpose")
        t_leaves = tr[2]
        if [x.aval for x in t_leaves] != [x.aval for x in xs]:
            raise TypeError(f"linear_call: transpose returns "
                            f"({', '.join(str(x.aval) for x in t_leaves)}), the linear arguments "
                            f"are ({', '.join(str(x.aval) for x in xs)})")
    f_caps = fb.capture_list
    t_caps = tr[0].capture_list if tr is not None else []
    fixed = list(f_caps) + list(t_caps) + rs
    body = close_body([x.key for x in f_flat], fb.capture_inputs + [x.aval for x in t_caps] +
                      f_keys)
    tbody = None
    if tr is not None:
        tb, t_keys, t_flat, _ = tr
        tbody = close_body([x.key for x in t_flat],
                           [x.aval for x in f_caps] + tb.capture_inputs + t_keys)
    op = CustomLinear(body, tbody, len(fixed), message)
    outs = _emit_multi(t, op, fixed + xs)
    return _unflatten(out_spec, outs)


# ---- custom_root ----


def custom_root(f: Callable, initial_guess, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False):
    """``jax.lax.custom_root``: ``solve(f, initial_guess)``, a root of ``f``, differentiated
    implicitly (never through ``solve``).

    Args:
        f: the function whose root is found; the values it closes over are what the root is
            differentiated with respect to.
        initial_guess: the starting point (a pytree of arrays).
        solve: ``solve(f, initial_guess) -> root`` (``(root, aux)`` with has_aux).
        tangent_solve: ``tangent_solve(g, y)`` solves the linear system ``g(x) = y`` (g the
            linearization of f at the root); e.g. ``lambda g, y: y / g(1.0)`` for scalars.
        has_aux: solve also returns auxiliary data (not differentiated).

    Returns:
        The root (and aux), with the derivative ``-tangent_solve(df/dx, df/dparams . dparams)``.
    """
    leaves, spec = _flatten(initial_guess)
    if _outer_trace() is None:
        return _eager(lambda a: custom_root(f, _unflatten(spec, a), solve, tangent_solve,
                                            has_aux), leaves)
    f_conv, consts = closure_convert(f, initial_guess)

    def root(consts, x0):
        return solve(lambda x: f_conv(x, *consts), x0)

    root.__name__ = getattr(solve, "__name__", "solve")
    root = custom_jvp(root)
    root.caps_fixed = True  # what solve closes over is constant to the root, as in jax

    @root.defjvp
    def _root_jvp(primals, tangents):
        cs, x0 = primals
        dcs, _ = tangents
        out = root(cs, x0)
        sol = out[0] if has_aux else out
        if cs:
            _, rhs = jvp(lambda c: f_conv(sol, *c), (list(cs),), (list(dcs),))
        else:
            rhs = _zeros_like(f_conv(sol))

        def g(v):
            return jvp(lambda x: f_conv(x, *cs), (sol,), (v,))[1]

        sol_dot = _tree_map(lambda v: -v, tangent_solve(g, rhs))
        return out, ((sol_dot, _zeros_like(out[1])) if has_aux else sol_dot)

    return root(list(consts), initial_guess)


# ---- custom_linear_solve ----


def custom_linear_solve(matvec: Callable, b, solve: Callable,
                        transpose_solve: Callable | None = None, symmetric: bool = False,
                        has_aux: bool = False):
    """``jax.lax.custom_linear_solve``: ``solve(matvec, b)``, the x with ``matvec(x) = b``,
    differentiated implicitly: ``dx = solve(matvec, db - dmatvec(x))``, transposed with
    ``transpose_solve(vecmat, ct)`` (``solve`` itself when symmetric).

    Args:
        matvec: the linear operator (the values it closes over, the matrix, are differentiated).
        b: the right-hand side (a pytree of arrays).
        solve: ``solve(matvec, b) -> x`` (``(x, aux)`` with has_aux).
        transpose_solve: ``transpose_solve(vecmat, b) -> x`` for reverse mode; None: reverse mode
            raises (unless symmetric).
        symmetric: matvec is symmetric, so solve is its own transpose.
        has_aux: solve (and transpose_solve) return ``(x, aux)``; aux is not differentiated.
    """
    leaves, spec = _flatten(b)
    if _outer_trace() is None:
        return _eager(lambda a: custom_linear_solve(matvec, _unflatten(spec, a), solve,
                                                    transpose_solve, symmetric, has_aux), leaves)
    mv_conv, consts = closure_convert(matvec, b)
    if symmetric:
        transpose_solve = solve

    def mv(cs):
        return lambda v: mv_conv(v, *cs)

    def x_of(out):
        return out[0] if has_aux else out

    def fsolve(cs, rhs):
        return x_of(solve(mv(cs), rhs))

    def tsolve(cs, ct):
        if symmetric:
            vecmat = mv(cs)
        else:
            _, pullback = vjp(mv(cs), ct)  # a linear map's VJP at any point: its transpose
            vecmat = lambda u: pullback(u)[0]  # noqa: E731
        return x_of(transpose_solve(vecmat, ct))

    def primal(cs, rhs):
        return solve(mv(cs), rhs)

    primal.__name__ = getattr(solve, "__name__", "solve")
    lsolve = custom_jvp(primal)
    lsolve.caps_fixed = True  # what solve closes over is constant to x, as in jax

    @lsolve.defjvp
    def _solve_jvp(primals, tangents):
        cs, rhs = primals
        dcs, drhs = tangents
        out = lsolve(cs, rhs)
        x = x_of(out)
        if cs:
            _, adot_x = jvp(lambda c: mv_conv(x, *c), (list(cs),), (list(dcs),))
            drhs = _tree_map(lambda u, v: u - v, drhs, adot_x)
        dx = linear_call(fsolve, tsolve if transpose_solve is not None else None, list(cs), drhs,
                         "transpose_solve required for backwards mode automatic "
                         "differentiation of custom_linear_solve")
        return out, ((dx, _zeros_like(out[1])) if has_aux else dx)

    return lsolve(list(consts), b)
