"""jax.numpy's conversion and file names: ``frombuffer``, ``fromstring``, ``from_dlpack``,
``save``, ``savez``, ``array_repr``, ``array_str`` are numpy's (tidu's arrays outside a trace are
numpy arrays); ``fromfile`` and ``fromiter`` refuse, as jax's do (reading a file or consuming an
iterator is not pure); the histograms ``histogram_bin_edges``, ``histogram2d``, ``histogramdd``
are ``histogram``'s searchsorted and scatter-add in several dimensions, as jax's.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from tidu.graph.dtypes import kind_of
from tidu.numpy import core, shapes
from tidu.numpy.selection import histogram
from tidu.numpy.shapes import _numpy_outside
from tidu.numpy.statistics import searchsorted
from tidu.trace.tracer import Tracer, _lift, _trace_of

__all__ = ["array_repr", "array_str", "from_dlpack", "frombuffer", "fromfile", "fromiter",
           "fromstring", "histogram2d", "histogram_bin_edges", "histogramdd", "save", "savez"]

frombuffer, fromstring, from_dlpack = np.frombuffer, np.fromstring, np.from_dlpack
save, savez = np.save, np.savez


def _impure(name):
    def f(*args, **kwargs):
        raise NotImplementedError(
            f"td.{name}() is not implemented because it is not pure (as jax's): use "
            f"np.{name}(...) and pass the array to tidu")

    f.__name__ = f.__qualname__ = name
    return f


fromfile, fromiter = _impure("fromfile"), _impure("fromiter")


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None):
    """numpy's array_repr; a traced value's repr."""
    if isinstance(arr, Tracer):
        return repr(arr)
    return np.array_repr(np.asarray(arr), max_line_width, precision, suppress_small)


def array_str(a, max_line_width=None, precision=None, suppress_small=None):
    """numpy's array_str; a traced value's str."""
    if isinstance(a, Tracer):
        return str(a)
    return np.array_str(np.asarray(a), max_line_width, precision, suppress_small)


@_numpy_outside(np.histogram_bin_edges)
def histogram_bin_edges(a, bins=10, range=None, weights=None):  # noqa: A002 - numpy's name
    """The bin edges histogram(a, bins, range) uses."""
    return histogram(a, bins, range)[1]


def _edges(col, bins, rng):
    return histogram_bin_edges(col, bins, rng)


@_numpy_outside(np.histogramdd)
def histogramdd(sample, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """(counts, [edges per dimension]) of the N points of the (N, D) sample; each dimension's
    last bin includes its right edge."""
    t = _trace_of(sample, weights)
    s = _lift(t, sample)
    if s.ndim != 2:
        raise ValueError("histogramdd: sample must be a 2-D array of shape (N, D)")
    if kind_of(s.dtype) not in "fc":
        s = core.astype(s, np.float64)
    n, d = s.shape
    if isinstance(bins, (int, np.integer)):
        bins = [int(bins)] * d
    if len(bins) != d:
        raise ValueError(f"histogramdd: {len(bins)} bin specifications for {d} dimensions")
    rng = [None] * d if range is None else list(range)
    edges, idx, nbs = [], None, []
    for k in builtins.range(d):
        col = s[:, k]
        e = _edges(col, bins[k], rng[k])
        nb = e.shape[0]
        i = core.astype(searchsorted(e, col, side="right"), np.int64)
        i = core.where(col == e[-1], nb - 1, i)
        edges.append(e)
        nbs.append(nb + 1)
        idx = i if idx is None else idx * (nb + 1) + i
    w = core.astype(s[:, 0] * 0 + 1, np.int64) if weights is None else \
        shapes.ravel(_lift(t, weights))
    total = math.prod(nbs)
    counts = core.astype(core.iota((total,), "int64") * 0, w.dtype).at[idx].add(w)
    counts = core.reshape(counts, tuple(nbs))
    counts = counts[tuple(slice(1, m - 1) for m in nbs)]
    if density:
        counts = counts / core.sum(counts)
        for k, e in enumerate(edges):
            shape = [1] * d
            shape[k] = e.shape[0] - 1
            counts = counts / core.reshape(e[1:] - e[:-1], tuple(shape))
    return counts, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """(counts, x_edges, y_edges) of the points (x, y), histogramdd's rules."""
    if not shapes._traced() and not shapes._has_tracer([x, y, weights, bins]):
        return np.histogram2d(x, y, bins, range, density, weights)
    try:
        nbins = len(bins)
    except TypeError:
        nbins = 1
    if nbins not in (1, 2):
        bins = [bins, bins]
    elif nbins == 1:
        bins = [bins, bins] if not isinstance(bins, (int, np.integer)) else bins
    t = _trace_of(x, y)
    xt, yt = _lift(t, x), _lift(t, y)
    dt = np.result_type(xt.dtype, yt.dtype)
    sample = shapes.stack([_lift(t, xt, dt), _lift(t, yt, dt)], axis=1)
    h, e = histogramdd(sample, bins, range, weights, density)
    return h, e[0], e[1]
