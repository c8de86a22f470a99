"""jax.numpy's reductions with their whole signatures: ``dtype``, ``out``, ``keepdims``,
``initial``, ``where`` and ``promote_integers`` over the plain reductions of ``tidu.numpy.core``
and ``tidu.numpy.sorting`` (which take an axis and keepdims only, and stay what tidu's own code
calls).  A ``where`` mask puts the reduction's identity where it is False, as jax does; ``max``
and ``min`` have none, so with ``where`` they need ``initial`` (jax's rule and message)."""

from __future__ import annotations

import numpy as np

from tidu.graph.dtypes import BOOL, COMPLEXES, INTS, kind_of
from tidu.numpy import core as T
from tidu.numpy import reductions as R
from tidu.numpy import sorting as S
from tidu.numpy.shapes import _lift
from tidu.trace.tracer import as_inexact

__all__ = ["all", "amax", "amin", "any", "max", "mean", "min", "prod", "std", "sum", "var"]


_no_out = T.no_out


def _where_mask(x, where, name: str):
    """``where`` as a bool value of x's shape (broadcast as jax does)."""
    m = _lift(where)
    if m.dtype != BOOL:
        raise TypeError(f"{name}: where must be a bool array, got dtype {m.dtype}")
    try:
        shape = np.broadcast_shapes(m.shape, x.shape)
    except ValueError:
        shape = None
    if shape != x.shape:
        raise ValueError(f"{name}: where of shape {m.shape} does not broadcast to the array's "
                         f"shape {x.shape}")
    return T.broadcast_to(m, x.shape) if m.shape != x.shape else m


def _mask(x, where, fill, name: str):
    """x with fill where ``where`` is False."""
    if where is None:
        return x
    return T.where(_where_mask(x, where, name), x, np.asarray(fill, x.dtype))


def _prepared(a, dtype, name: str):
    x = _lift(a)
    return T.astype(x, np.dtype(dtype)) if dtype is not None else x


def _keep_small_ints(y, x, promote_integers: bool):
    """promote_integers=False: an integer (or bool) sum/prod keeps its input's integer dtype."""
    if promote_integers or not (x.dtype in INTS or x.dtype == BOOL):
        return y
    return T.astype(y, x.dtype if x.dtype != BOOL else np.dtype("int64"))


def _as_dtype(y, dtype):
    """An integer sum/prod with ``dtype=`` given is of that dtype, as jax's (the int64
    accumulation wraps to the same bits)."""
    dt = np.dtype(dtype)
    return y if y.dtype == dt else T.astype(y, dt)


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,  # noqa: A001
        promote_integers=True):
    """``jnp.sum``: over ``axis`` (all when None) of the elements where ``where`` holds, plus
    ``initial``; integers accumulate in int64/uint64 unless ``promote_integers=False``."""
    _no_out(out, "sum")
    x = _prepared(a, dtype, "sum")
    y = T.sum(_mask(x, where, 0, "sum"), axis, keepdims)
    y = _keep_small_ints(y, x, promote_integers) if dtype is None else _as_dtype(y, dtype)
    return y if initial is None else y + np.asarray(initial, y.dtype)


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
         promote_integers=True):
    """``jnp.prod``: as ``sum`` with 1 for the masked elements, times ``initial``."""
    _no_out(out, "prod")
    x = _prepared(a, dtype, "prod")
    y = S.prod(_mask(x, where, 1, "prod"), axis, None, keepdims)
    y = _keep_small_ints(y, x, promote_integers) if dtype is None else _as_dtype(y, dtype)
    return y if initial is None else y * np.asarray(initial, y.dtype)


def extreme_identity(dt: np.dtype, largest: bool):
    """The identity of max (largest) or min over dtype dt: -inf/+inf for floats, the integer
    dtype's lowest/highest value, False/True for bool."""
    if dt == BOOL:
        return not largest
    if kind_of(dt) in "iu":
        info = np.iinfo(dt)
        return info.min if largest else info.max
    return -np.inf if largest else np.inf


def _extreme(a, axis, out, keepdims, initial, where, largest: bool):
    name = "max" if largest else "min"
    _no_out(out, name)
    x = _lift(a)
    if where is not None and initial is None:
        raise ValueError(f"reduction operation {name!r} does not have an identity, so to use a "
                         f"where mask one has to specify 'initial'")
    # complex values (ordered lexicographically) have no identity of max/min: the masked-out
    # entries take `initial`, which joins the result anyway
    fill = initial if x.dtype in COMPLEXES else extreme_identity(x.dtype, largest)
    x = _mask(x, where, fill, name)
    y = (T.max if largest else S.min)(x, axis, keepdims)
    if initial is None:
        return y
    init = np.asarray(initial, y.dtype)
    return T.maximum(y, init) if largest else T.minimum(y, init)  # complex: lexicographic


def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
    """``jnp.max``: over ``axis`` of the elements where ``where`` holds, and ``initial``
    (needed with ``where``, and for an empty axis)."""
    return _extreme(a, axis, out, keepdims, initial, where, True)


def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
    """``jnp.min``: as ``max``."""
    return _extreme(a, axis, out, keepdims, initial, where, False)


amax, amin = max, min


def all(a, axis=None, out=None, keepdims=False, *, where=None):  # noqa: A001
    """``jnp.all``: True where every element over ``axis`` (where ``where`` holds) is
    nonzero."""
    _no_out(out, "all")
    x = _lift(a)
    return S.all(_mask(x if x.dtype == BOOL else x != 0, where, True, "all"), axis, keepdims)


def any(a, axis=None, out=None, keepdims=False, *, where=None):  # noqa: A001
    """``jnp.any``: True where some element over ``axis`` (where ``where`` holds) is
    nonzero."""
    _no_out(out, "any")
    x = _lift(a)
    return S.any(_mask(x if x.dtype == BOOL else x != 0, where, False, "any"), axis, keepdims)


def _count(x, axis, keepdims, where):
    """How many elements each mean takes under ``where`` (float64, traced)."""
    return T.sum(T.astype(_where_mask(x, where, "mean"), np.float64), axis, keepdims)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """``jnp.mean``: the sum over ``axis`` of the elements where ``where`` holds, divided by
    how many there are (integers and bools in jax's to_inexact_dtype)."""
    _no_out(out, "mean")
    x = _prepared(a, dtype, "mean")
    if where is None:
        return T.mean(x, axis, keepdims)
    x = as_inexact(x)
    n = _count(x, axis, keepdims, where)
    return T.sum(_mask(x, where, 0, "mean"), axis, keepdims) / T.astype(n, x.dtype)


_mean = mean


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
    """``jnp.var``, with ``where``: the mean and the sum of squares over the elements where it
    holds, divided by (their count - ddof); with ``mean`` (keepdims-shaped, as jax's), the
    squares are taken about it instead of the computed mean."""
    if where is None and mean is None:
        return R.var(a, axis, dtype, out, ddof, keepdims, correction=correction)
    if where is None:
        where = True
    _no_out(out, "var")
    if correction is not None:
        if ddof != 0:
            raise ValueError("var: ddof and correction are both given")
        ddof = correction
    x = _prepared(a, dtype, "var")
    x = as_inexact(x)
    mu = _mean(x, axis, None, None, True, where=where) if mean is None \
        else T.astype(_lift(mean), x.dtype)
    centered = x - mu
    sq = T.real(centered * T.conj(centered)) if x.dtype in COMPLEXES else centered * centered
    n = _count(x, axis, keepdims, where)
    dof = T.astype(n, sq.dtype) - ddof
    return T.sum(_mask(sq, where, 0, "var"), axis, keepdims) / T.where(dof > 0, dof, np.nan)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
    """``jnp.std``: sqrt of ``var`` with the same arguments."""
    if where is None and mean is None:
        return R.std(a, axis, dtype, out, ddof, keepdims, correction=correction)
    return T.sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                      correction=correction))
