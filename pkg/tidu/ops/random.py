"""The counter-based random generator as a primitive: Threefry-2x32 with 20 rounds (Salmon et
al. 2011), jax.random's default.  Pure integer arithmetic over (key, count) pairs, so random
numbers are drawn inside compiled programs, loops and vmapped functions with no Python per draw;
uint32 outputs carry no derivative.  ``tidu.random`` builds jax.random's API on it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tidu.ad.rules import register
from tidu.backends.xla.splice import call_jax
from tidu.graph import aval
from tidu.ops.core import Primitive, same_op_batched

__all__ = ["Threefry2x32", "Threefry2x32Iota", "iota_counters", "threefry2x32_reference"]

_U32 = np.dtype("uint32")
_ROT = ((13, 15, 26, 6), (17, 29, 16, 24))


def _hash(k0, k1, x0, x1, xp):
    """The 20 rounds over broadcastable uint32 arrays of module xp (numpy or jax.numpy)."""
    k2 = k0 ^ k1 ^ xp.uint32(0x1BD11BDA)
    ks = (k0, k1, k2)
    x0, x1 = x0 + k0, x1 + k1
    for i in range(5):
        for r in _ROT[i % 2]:
            x0 = x0 + x1
            x1 = (x1 << xp.uint32(r)) | (x1 >> xp.uint32(32 - r))
            x1 = x1 ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + xp.uint32(i + 1)
    return x0, x1


def _split_pairs(key, count, xp):
    """k0, k1 shaped to broadcast against the count halves x0, x1 (key axes lead count's)."""
    extra = count.ndim - key.ndim
    kshape = key.shape[:-1] + (1,) * extra
    return (xp.reshape(key[..., 0], kshape), xp.reshape(key[..., 1], kshape),
            count[..., 0], count[..., 1])


def threefry2x32_reference(key, count) -> np.ndarray:
    """numpy Threefry-2x32: key (K..., 2), count (K..., C..., 2) uint32 -> count's shape."""
    key, count = np.asarray(key, _U32), np.asarray(count, _U32)
    with np.errstate(over="ignore"):
        y0, y1 = _hash(*_split_pairs(key, count, np), np)
    return np.stack([y0, y1], axis=-1).astype(_U32)


def _jax_threefry(key, count):
    import jax.numpy as jnp  # noqa: PLC0415  (optional dependency)

    y0, y1 = _hash(*_split_pairs(key, count, jnp), jnp)
    return jnp.stack([y0, y1], axis=-1)


@register
@dataclass(frozen=True)
class Threefry2x32(Primitive):
    """Threefry-2x32 of count pairs under keys: key uint32 (K..., 2), count uint32 (K..., C...,
    2), output count's shape; each key hashes the pairs under it (the key's leading axes lead the
    count's), pair (x0, x1) -> (y0, y1) as jax's ``threefry_2x32`` primitive."""

    differentiable = False
    batch = same_op_batched  # a leading axis on both keeps the key's axes leading the count's

    def abstract_eval(self, key, count):
        for what, a in (("key", key), ("count", count)):
            if a.dtype != _U32:
                raise TypeError(f"{self.name}: {what} dtype {a.dtype} is not uint32")
            if a.ndim < 1 or a.shape[-1] != 2:
                raise ValueError(f"{self.name}: {what} shape {a.shape} does not end in an axis "
                                 "of 2 (a pair of uint32 words)")
        lead = key.ndim - 1
        if count.ndim < key.ndim or count.shape[:lead] != key.shape[:lead]:
            raise ValueError(f"{self.name}: key shape {key.shape} and count shape {count.shape}: "
                             "the key's leading axes must lead the count's")
        return aval(count.shape, _U32)

    def lower(self, lo, out, key, count):
        return call_jax(lo, out, [key, count], "threefry2x32", _jax_threefry)

    def impl(self, key, count):
        return threefry2x32_reference(key, count)


def iota_counters(shape, xp=np):
    """jax's iota_2x32_shape as pairs: (i >> 32, i & 0xffffffff) of the row-major index i,
    shape + (2,) uint32 (module xp: numpy or jax.numpy)."""
    n = math.prod(shape)
    i = np.arange(n, dtype=np.uint64).reshape(shape)
    if xp is np:
        return np.stack([(i >> np.uint64(32)).astype(_U32), i.astype(_U32)], axis=-1)
    lo = xp.arange(n, dtype=xp.uint32).reshape(shape)  # n < 2^32 (tidu.random checks)
    return xp.stack([xp.zeros_like(lo), lo], axis=-1)


def _jax_threefry_iota(shape, fold):
    def fn(key, *start):
        import jax.numpy as jnp  # noqa: PLC0415  (optional dependency)

        lead = key.shape[:-1]
        if start:  # counters start + i as 64-bit (high, low) words
            i = jnp.arange(math.prod(shape), dtype=jnp.uint64).reshape(shape)
            i = i + start[0].astype(jnp.uint64).reshape(lead + (1,) * len(shape))
            count = jnp.stack([(i >> 32).astype(jnp.uint32), i.astype(jnp.uint32)], axis=-1)
        else:
            count = jnp.broadcast_to(iota_counters(shape, jnp), lead + shape + (2,))
        y = _jax_threefry(key, count)
        return y[..., 0] ^ y[..., 1] if fold else y
    return fn


@register
@dataclass(frozen=True)
class Threefry2x32Iota(Primitive):
    """Threefry2x32 of the counters of a draw of `shape`: key uint32 (K..., 2) -> (K..., *shape,
    2), the hash of (i >> 32, i & 0xffffffff) for the row-major index i (jax's
    ``iota_2x32_shape``), with no count array in memory; with `fold`, (K..., *shape), the two
    words' xor (jax's 32-bit random bits).  An optional second operand `start`, uint32 (K...),
    one per key, offsets the counters: i runs from start (a block of a larger draw, as
    categorical's blocked argmax hashes them)."""

    shape: tuple[int, ...]
    fold: bool = False
    differentiable = False
    batch = same_op_batched  # a leading key axis is a leading output axis

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "fold", bool(self.fold))
        if any(d < 0 for d in self.shape):
            raise ValueError(f"{self.name}: negative dimension in shape {self.shape}")

    def abstract_eval(self, key, *start):
        if key.dtype != _U32:
            raise TypeError(f"{self.name}: key dtype {key.dtype} is not uint32")
        if key.ndim < 1 or key.shape[-1] != 2:
            raise ValueError(f"{self.name}: key shape {key.shape} does not end in an axis of 2 "
                             "(a pair of uint32 words)")
        if math.prod(self.shape) >= 2 ** 32:
            raise ValueError(f"{self.name}: {math.prod(self.shape)} counters, 2**32 or more")
        if len(start) > 1:
            raise TypeError(f"{self.name}: takes a key and at most one start, got "
                            f"{1 + len(start)} operands")
        if start and (start[0].dtype != _U32 or start[0].shape != key.shape[:-1]):
            raise TypeError(f"{self.name}: start must be uint32 of shape {key.shape[:-1]} (one "
                            f"per key), got {start[0].dtype} {start[0].shape}")
        return aval(key.shape[:-1] + self.shape + (() if self.fold else (2,)), _U32)

    def lower(self, lo, out, key, *start):
        name = (f"threefry2x32_iota_{'x'.join(map(str, self.shape))}_{int(self.fold)}"
                f"{'_start' if start else ''}")
        return call_jax(lo, out, [key, *start], name, _jax_threefry_iota(self.shape, self.fold))

    def impl(self, key, *start):
        key = np.asarray(key, _U32)
        count = np.broadcast_to(iota_counters(self.shape), key.shape[:-1] + self.shape + (2,))
        if start:
            i = (count[..., 0].astype(np.uint64) << np.uint64(32)) | count[..., 1]
            s0 = np.asarray(start[0], _U32).astype(np.uint64)
            i = i + s0.reshape(s0.shape + (1,) * len(self.shape))
            count = np.stack([(i >> np.uint64(32)).astype(_U32), i.astype(_U32)], axis=-1)
        y = threefry2x32_reference(key, count)
        return y[..., 0] ^ y[..., 1] if self.fold else y
