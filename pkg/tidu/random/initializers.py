"""``td.nn.initializers``: jax.nn.initializers with a ``td.random`` key, the same algorithms and
constants, so a key gives jax's numbers (to rounding).  Each factory returns
``init(key, shape, dtype=None)``; ``zeros`` and ``ones`` are initializers themselves.  jax's
``out_sharding`` argument is accepted and must be None.  (Attached to ``td.nn`` here because
``td.random`` sits above the numpy layer: docs/architecture.md.)"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

import tidu as td
from tidu.graph.dtypes import kind_of
from tidu.random.distributions import normal as _normal
from tidu.random.distributions import orthogonal as _orthogonal
from tidu.random.distributions import truncated_normal as _truncated_normal
from tidu.random.distributions import uniform as _uniform
from tidu.random.keys import split

__all__ = ["constant", "delta_orthogonal", "glorot_normal", "glorot_uniform", "he_normal",
           "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform",
           "normal", "ones", "orthogonal", "truncated_normal", "uniform", "variance_scaling",
           "xavier_normal", "xavier_uniform", "zeros"]


def _dt(dtype) -> np.dtype:
    return np.dtype(np.float64 if dtype is None else dtype)


def _no_sharding(name, out_sharding):
    if out_sharding is not None:
        raise NotImplementedError(f"nn.initializers.{name}: out_sharding is not supported")


def _shape(shape) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)


def zeros(key, shape, dtype=None, out_sharding=None):
    """Zeros (the key is unused)."""
    _no_sharding("zeros", out_sharding)
    return np.zeros(_shape(shape), _dt(dtype))


def ones(key, shape, dtype=None, out_sharding=None):
    """Ones (the key is unused)."""
    _no_sharding("ones", out_sharding)
    return np.ones(_shape(shape), _dt(dtype))


def constant(value, dtype=None):
    """An initializer filling with ``value``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding("constant", out_sharding)
        return td.full(_shape(shape), value, dtype=_dt(dtype))
    return init


def uniform(scale=1e-2, dtype=None):
    """U[0, scale)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding("uniform", out_sharding)
        dt = _dt(dtype)
        return _uniform(key, _shape(shape), dt) * td.asarray(scale, dt)
    return init


def normal(stddev=1e-2, dtype=None):
    """N(0, stddev^2)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding("normal", out_sharding)
        dt = _dt(dtype)
        return _normal(key, _shape(shape), dt) * td.asarray(stddev, dt)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """stddev times a standard normal truncated to [lower, upper]."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding("truncated_normal", out_sharding)
        dt = _dt(dtype)
        return _truncated_normal(key, lower, upper, _shape(shape), dt) * td.asarray(stddev, dt)
    return init


def _size(shape, axis) -> int:
    return shape[axis] if isinstance(axis, int) else math.prod(shape[i] for i in axis)


def _compute_fans(shape, in_axis=-2, out_axis=-1, batch_axis=()):
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional "
                         f"weights tensor with default in_axis. Must be at least 2D or specify "
                         f"in_axis explicitly.")
    in_size, out_size = _size(shape, in_axis), _size(shape, out_axis)
    receptive = math.prod(shape) / in_size / out_size / _size(shape, batch_axis)
    return in_size * receptive, out_size * receptive


def _complex_uniform(key, shape, dt):
    kr, kt = split(key)
    real = np.dtype(np.float64 if dt == np.complex128 else np.float32)
    r = td.astype(td.sqrt(2 * _uniform(kr, shape, real)), dt)
    theta = 2 * np.pi * td.astype(_uniform(kt, shape, real), dt)
    return td.astype(r * td.exp(1j * theta), dt)


def _complex_truncated_normal(key, upper, shape, dt):
    kr, kt = split(key)
    real = np.dtype(np.float64 if dt == np.complex128 else np.float32)
    t = (1 - np.exp(-(upper ** 2))) * td.astype(_uniform(kr, shape, real), dt)
    r = td.sqrt(-td.log(1 - t))
    theta = 2 * np.pi * td.astype(_uniform(kt, shape, real), dt)
    return td.astype(r * td.exp(1j * theta), dt)


def variance_scaling(scale, mode: str, distribution: str, in_axis: int | Sequence[int] = -2,
                     out_axis: int | Sequence[int] = -1, batch_axis: int | Sequence[int] = (),
                     dtype=None):
    """Samples with variance scale / n, n the fan-in, fan-out, their mean or geometric mean, from
    a truncated normal, a normal or a uniform distribution (complex dtypes: jax's complex
    versions)."""
    if mode not in ("fan_in", "fan_out", "fan_avg", "fan_geo_avg"):
        raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ValueError(f"invalid distribution for variance scaling initializer: "
                         f"{distribution}")

    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding("variance_scaling", out_sharding)
        shape, dt = _shape(shape), _dt(dtype)
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        den = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
               "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
        variance = np.array(scale / den, dtype=dt)
        complex_ = kind_of(dt) == "c"
        if distribution == "truncated_normal":
            if not complex_:
                stddev = np.sqrt(variance) / np.array(.87962566103423978, dt)
                return _truncated_normal(key, -2, 2, shape, dt) * stddev
            stddev = np.sqrt(variance) / np.array(.95311164380491208, dt)
            return _complex_truncated_normal(key, 2, shape, dt) * stddev
        if distribution == "normal":
            return _normal(key, shape, dt) * np.sqrt(variance)
        if not complex_:
            return _uniform(key, shape, dt, -1) * np.sqrt(3 * variance)
        return _complex_uniform(key, shape, dt) * np.sqrt(variance)
    return init


def _vs(scale, mode, distribution):
    def factory(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis=in_axis, out_axis=out_axis,
                                batch_axis=batch_axis, dtype=dtype)
    return factory


glorot_uniform = xavier_uniform = _vs(1.0, "fan_avg", "uniform")
glorot_normal = xavier_normal = _vs(1.0, "fan_avg", "truncated_normal")
lecun_uniform = _vs(1.0, "fan_in", "uniform")
lecun_normal = _vs(1.0, "fan_in", "truncated_normal")
he_uniform = kaiming_uniform = _vs(2.0, "fan_in", "uniform")
he_normal = kaiming_normal = _vs(2.0, "fan_in", "truncated_normal")
for _name in ("glorot_uniform", "glorot_normal", "lecun_uniform", "lecun_normal", "he_uniform",
              "he_normal"):
    globals()[_name].__name__ = globals()[_name].__qualname__ = _name


def orthogonal(scale=1.0, column_axis: int = -1, dtype=None):
    """A (semi-)orthogonal matrix along ``column_axis``, the other axes flattened into rows."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding("orthogonal", out_sharding)
        shape, dt = _shape(shape), _dt(dtype)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if any(d == 0 for d in shape):
            return np.zeros(shape, dt)
        n_rows, n_cols = math.prod(shape) // shape[column_axis], shape[column_axis]
        q = _orthogonal(key, n_rows, (), dt, n_cols)
        q = td.reshape(q, tuple(np.delete(shape, column_axis)) + (shape[column_axis],))
        return np.array(scale, dt) * td.moveaxis(q, -1, column_axis)
    return init


def delta_orthogonal(scale=1.0, column_axis: int = -1, dtype=None):
    """A 3-, 4- or 5-D convolution kernel, an orthogonal matrix at the spatial centre."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding("delta_orthogonal", out_sharding)
        shape, dt = _shape(shape), _dt(dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        mat = orthogonal(scale=scale, column_axis=column_axis, dtype=dt)(key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        widths = [(c, k - 1 - c) for c, k in zip(centre, shape[:-2])] + [(0, 0), (0, 0)]
        return td.pad(td.reshape(mat, (1,) * (len(shape) - 2) + shape[-2:]), widths)
    return init
