"""jax.numpy's other spellings of names tidu has (the ufunc names of the operators, the array-API
aliases ``acos``/``concat``/``permute_dims``/``pow``; ``amax``/``amin`` are in
``tidu.numpy.reducers``) and the small elementwise predicates and helpers: ``isneginf``,
``isposinf``, ``isreal``, ``iscomplex``, ``isrealobj``, ``iscomplexobj``, ``isscalar``,
``float_power``, ``modf``, ``spacing``, ``cumulative_sum``, ``cumulative_prod``, ``nancumsum``,
``nancumprod``, ``copy``."""

from __future__ import annotations

import numpy as np

from tidu._native import _core
from tidu.graph.dtypes import BOOL, COMPLEXES, INTS, kind_of
from tidu.numpy import core, shapes, sorting, ufuncs
from tidu.numpy.numeric import copysign, nextafter
from tidu.numpy.shapes import _numpy_outside
from tidu.trace.tracer import Tracer, _compare, _lift, _promote, _trace_of, as_inexact, keeps_weak

__all__ = [
    "absolute", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh",
    "concat", "conjugate", "copy", "cumulative_prod", "cumulative_sum", "divide", "equal",
    "fabs", "float_power", "greater", "greater_equal", "iscomplex", "iscomplexobj", "isneginf",
    "isposinf", "isreal", "isrealobj", "isscalar", "iterable", "less", "less_equal",
    "matrix_transpose", "modf", "multiply", "nancumprod", "nancumsum", "negative", "not_equal",
    "permute_dims", "positive", "pow", "spacing", "subtract", "true_divide",
]


def _tr(x) -> Tracer:
    return _lift(_trace_of(x), x)


def _binary_fn(code, name, np_fn):
    @_numpy_outside(np_fn)
    def f(x1, x2, /):
        return _core.binary(code, x1, x2)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"``jnp.{name}``: the operator's elementwise function (promotion as the operator)."
    return f


add = _binary_fn(_core.B_ADD, "add", np.add)
subtract = _binary_fn(_core.B_SUB, "subtract", np.subtract)
multiply = _binary_fn(_core.B_MUL, "multiply", np.multiply)
divide = _binary_fn(_core.B_DIV, "divide", np.divide)
true_divide = divide


def _compare_fn(direction, name, np_fn):
    @_numpy_outside(np_fn)
    def f(x1, x2, /):
        return _compare(direction, x1, x2)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"``jnp.{name}``: elementwise comparison, a bool result."
    return f


equal = _compare_fn("EQ", "equal", np.equal)
not_equal = _compare_fn("NE", "not_equal", np.not_equal)
less = _compare_fn("LT", "less", np.less)
less_equal = _compare_fn("LE", "less_equal", np.less_equal)
greater = _compare_fn("GT", "greater", np.greater)
greater_equal = _compare_fn("GE", "greater_equal", np.greater_equal)


@_numpy_outside(np.negative)
def negative(x, /):
    """-x (integers wrap; bool is a TypeError, as jax's)."""
    x = _tr(x)
    if x.dtype == BOOL:
        raise TypeError("negative: bool input is not supported (use logical_not)")
    return -x


@_numpy_outside(np.positive)
def positive(x, /):
    """+x: the value itself (bool is a TypeError, as jax's)."""
    x = _tr(x)
    if x.dtype == BOOL:
        raise TypeError("positive: bool input is not supported")
    return x


absolute = core.abs
conjugate = core.conj
pow = core.power  # noqa: A001 - the array API's name
acos, asin, atan = ufuncs.arccos, ufuncs.arcsin, ufuncs.arctan
acosh, asinh, atanh = ufuncs.arccosh, ufuncs.arcsinh, ufuncs.arctanh
atan2 = ufuncs.arctan2


@_numpy_outside(np.fabs)
def fabs(x, /):
    """|x| of a real value as float (integers and bools in float64; complex is a TypeError)."""
    x = _tr(x)
    if x.dtype in COMPLEXES:
        raise TypeError("fabs: complex input is not supported (use abs)")
    return core.abs(as_inexact(x))


@keeps_weak(0, seq=True)
@_numpy_outside(np.concat)
def concat(arrays, /, *, axis: int | None = 0):
    """``jnp.concat`` (the array API's concatenate); ``axis=None`` flattens first."""
    if axis is None:
        return core.concatenate([shapes.ravel(a) for a in arrays], 0)
    return core.concatenate(list(arrays), axis)


@_numpy_outside(np.permute_dims)
def permute_dims(a, /, axes):
    """``jnp.permute_dims``: transpose by ``axes``."""
    return core.transpose(_tr(a), tuple(axes))


@_numpy_outside(np.matrix_transpose)
def matrix_transpose(x, /):
    """Swap the last two axes (rank >= 2, a ValueError otherwise, as jax's)."""
    x = _tr(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: x must have at least 2 dimensions, got {x.ndim}")
    return shapes.swapaxes(x, -1, -2)


def copy(a, order=None):
    """A copy of a: a traced value is immutable, so the value itself (numpy's copy outside a
    trace)."""
    if not isinstance(a, Tracer) and not shapes._traced():
        return np.copy(a, order="K" if order is None else order)
    return _tr(a)


@_numpy_outside(np.float_power)
def float_power(x1, x2, /):
    """x1 ** x2 in the operands' promoted inexact dtype (jax's: int32 in float32, int64 in
    float64)."""
    t = _trace_of(x1, x2)
    a, b = _promote("float_power", t, x1, x2, min_dtype=True)
    return core.power(a, b)


def _signed_inf(x, sign):
    x = _tr(x)
    if x.dtype in COMPLEXES:
        raise ValueError("isposinf/isneginf: complex values are not supported (jax's rule)")
    if x.dtype in INTS or x.dtype == BOOL:
        return _compare("NE", x, x)  # all False
    return _compare("EQ", x, sign * np.inf)


@_numpy_outside(np.isposinf)
def isposinf(x, /, out=None):
    """x == +inf (all False for integers)."""
    core.no_out(out, "isposinf")
    return _signed_inf(x, 1)


@_numpy_outside(np.isneginf)
def isneginf(x, /, out=None):
    """x == -inf (all False for integers)."""
    core.no_out(out, "isneginf")
    return _signed_inf(x, -1)


@_numpy_outside(np.isreal)
def isreal(x):
    """Elementwise: the imaginary part is 0 (all True for real dtypes)."""
    x = _tr(x)
    if x.dtype in COMPLEXES:
        return _compare("EQ", core.imag(x), 0)
    return _compare("EQ", x, x) | _compare("NE", x, x)


@_numpy_outside(np.iscomplex)
def iscomplex(x):
    """Elementwise: the imaginary part is nonzero (all False for real dtypes)."""
    x = _tr(x)
    if x.dtype in COMPLEXES:
        return _compare("NE", core.imag(x), 0)
    return _compare("NE", x, x) & _compare("EQ", x, x)


def iscomplexobj(x) -> bool:
    """Whether x's dtype is complex (static)."""
    dt = x.dtype if isinstance(x, Tracer) else getattr(x, "dtype", None)
    if dt is None:
        dt = np.asarray(x).dtype
    return kind_of(np.dtype(dt)) == "c"


def isrealobj(x) -> bool:
    """Whether x's dtype is not complex (static)."""
    return not iscomplexobj(x)


def isscalar(element) -> bool:
    """jax's rule: Python and numpy scalars, and rank-0 arrays and traced values, are scalars."""
    if isinstance(element, Tracer):
        return element.ndim == 0
    if isinstance(element, np.ndarray):
        return element.ndim == 0
    return bool(np.isscalar(element))


def iterable(y) -> bool:
    """Whether iter(y) works (a traced value of rank >= 1 iterates over its first axis)."""
    if isinstance(y, Tracer):
        return y.ndim > 0
    return bool(np.iterable(y))


@_numpy_outside(np.modf)
def modf(x, /, out=None):
    """(fractional part, integral part), both with x's sign, as jax's ``x - trunc(x), trunc(x)``."""
    core.no_out(out, "modf")
    x = as_inexact(x)
    whole = ufuncs.trunc(x)
    return x - whole, whole


@_numpy_outside(np.spacing)
def spacing(x, /):
    """The distance from x to the next representable value away from zero (jax's
    ``nextafter(x, copysign(inf, x)) - x``)."""
    x = as_inexact(x)
    return nextafter(x, copysign(np.inf, x)) - x


def _cumulative(fn, name, x, axis, dtype, include_initial, initial):
    x = _tr(x)
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"{name}: axis must be given for arrays of more than one dimension")
        axis = 0
    if x.ndim == 0:
        raise ValueError(f"{name}: the input must have at least one dimension")
    ax = shapes._axis(axis, x.ndim, name)
    out = fn(x, ax, dtype)
    if include_initial:
        shape = list(out.shape)
        shape[ax] = 1
        first = core.broadcast_to(core.astype(_lift(out._t, initial), out.dtype), tuple(shape))
        out = core.concatenate([first, out], ax)
    return out


@_numpy_outside(np.cumulative_sum)
def cumulative_sum(x, /, *, axis: int | None = None, dtype=None, include_initial: bool = False):
    """``jnp.cumulative_sum`` (the array API's): axis required above rank 1; `include_initial`
    puts a 0 first."""
    return _cumulative(sorting.cumsum, "cumulative_sum", x, axis, dtype, include_initial, 0)


@_numpy_outside(np.cumulative_prod)
def cumulative_prod(x, /, *, axis: int | None = None, dtype=None, include_initial: bool = False):
    """``jnp.cumulative_prod``: as cumulative_sum, a 1 first with `include_initial`."""
    return _cumulative(sorting.cumprod, "cumulative_prod", x, axis, dtype, include_initial, 1)


@_numpy_outside(np.nancumsum)
def nancumsum(a, axis=None, dtype=None, out=None):
    """cumsum with NaN counted as 0."""
    core.no_out(out, "nancumsum")
    x = _tr(a)
    if kind_of(x.dtype) in "fc":
        x = core.where(ufuncs.isnan(x), 0, x)
    return sorting.cumsum(x, axis, dtype)


@_numpy_outside(np.nancumprod)
def nancumprod(a, axis=None, dtype=None, out=None):
    """cumprod with NaN counted as 1."""
    core.no_out(out, "nancumprod")
    x = _tr(a)
    if kind_of(x.dtype) in "fc":
        x = core.where(ufuncs.isnan(x), 1, x)
    return sorting.cumprod(x, axis, dtype)

