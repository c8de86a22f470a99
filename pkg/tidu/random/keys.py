"""Keys and raw bits: jax.random's threefry2x32 keys as raw uint32 key data of shape (2,), and
the counters jax hashes for split, fold_in and bits (``jax_threefry_partitionable`` True, jax's
default since 0.5.0): the i-th value of a draw of shape S hashes the 64-bit counter i, as the pair
(i >> 32, i & 0xffffffff), under the key; split(key, S) is that hash's pair of words, bits its
xor.  Everything here emits tidu primitives (Threefry2x32, Iota, ...), so it runs inside jit,
scan, while_loop and vmap with no Python per draw."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

import tidu as td
from tidu import ops as P
from tidu.graph.dtypes import kind_of
from tidu.trace.tracer import Tracer, _current, _emit, _lift, _stack

__all__ = ["PRNGKey", "bits", "fold_in", "key", "key_data", "split", "wrap_key_data"]

U32 = np.dtype("uint32")


def eager(*static: str) -> Callable:
    """A public function of keys and arrays: traced as itself inside a trace, and run under a
    cached td.jit outside one (arguments named in `static` are compile-time constants)."""
    def deco(fn):
        cache: dict = {}

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            if _stack():
                return fn(*args, **kwargs)
            names = fn.__code__.co_varnames[:fn.__code__.co_argcount]
            bound = dict(zip(names, args)) | kwargs
            st = {k: bound.pop(k) for k in static if k in bound}
            bound = {k: v for k, v in bound.items() if v is not None}  # their defaults
            ck = tuple((k, _hashable(v)) for k, v in sorted(st.items()))
            hit = cache.get(ck)
            if hit is None:
                hit = cache[ck] = td.jit(functools.partial(fn, **st))
            return hit(**bound)
        return wrapped
    return deco


def _hashable(v):
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, np.ndarray):
        return (v.shape, v.dtype.str, v.tobytes())
    if v is None or isinstance(v, (int, float, str, bool)):
        return v
    try:
        return np.dtype(v).name
    except TypeError:
        return repr(v)


def shape_of(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        return tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"shape must be a tuple of ints, got {shape!r}") from None


def check_key(name: str, key) -> Tracer:
    """key as a traced uint32 (2,) value; a clear error for anything else."""
    t = _current()
    k = _lift(t, key)
    if k.aval.dtype != U32 or k.aval.shape != (2,):
        raise TypeError(f"{name}: expected a PRNG key, uint32 key data of shape (2,) "
                        f"(td.random.key / PRNGKey), got {k.aval.dtype}{list(k.aval.shape)}; "
                        "map over a batch of keys with td.vmap, as in jax")
    return k


def counters(shape: tuple[int, ...]) -> Tracer:
    """The pairs (i >> 32, i & 0xffffffff) of the row-major index i, shape + (2,)."""
    n = math.prod(shape)
    if n >= 2 ** 32:
        raise NotImplementedError(f"random draws of {n} >= 2**32 values at once")
    t = _current()
    lo = td.reshape(_emit(t, P.Iota((n,), "uint32", 0)), shape + (1,))
    return td.concatenate([td.zeros(shape + (1,), U32), lo], axis=-1)


def hash_pairs(key: Tracer, shape: tuple[int, ...]) -> Tracer:
    """Threefry-2x32 of the counters of `shape` under key: shape + (2,) uint32 (the counters
    made inside the kernel, never stored)."""
    n = math.prod(shape)
    if n >= 2 ** 32:
        raise NotImplementedError(f"random draws of {n} >= 2**32 values at once")
    return _emit(_current(), P.Threefry2x32Iota(shape), key)


def bits32(key: Tracer, shape: tuple[int, ...]) -> Tracer:
    """jax's 32-bit random bits of a draw of `shape`: the hash words' xor, from the kernel."""
    if math.prod(shape) >= 2 ** 32:
        raise NotImplementedError(f"random draws of {math.prod(shape)} >= 2**32 values at once")
    return _emit(_current(), P.Threefry2x32Iota(shape, True), key)


def random_bits(key: Tracer, shape: tuple[int, ...]) -> tuple[Tracer, Tracer]:
    """The two hash words of each value of a draw of `shape` (jax's bits1, bits2)."""
    h = hash_pairs(key, shape)
    return h[..., 0], h[..., 1]


# ---- the public key functions ----


def _seed_words(seed) -> np.ndarray:
    """jax's threefry_seed: a 64-bit seed's (high, low) words; a 32-bit seed's high word is 0
    (XLA's shift by the width), its low word the seed modulo 2^32."""
    s = np.asarray(seed)
    if s.shape:
        raise TypeError(f"PRNG key seed must be a scalar; got an array of shape {s.shape}")
    if kind_of(s.dtype) not in "iu":
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    v = int(seed)
    if isinstance(seed, int) and not -2 ** 63 <= v < 2 ** 63:
        raise OverflowError(f"PRNG key seed {v} does not fit in int64")
    wide = isinstance(seed, int) or s.dtype.itemsize == 8
    return np.array([(v % 2 ** 64) >> 32 if wide else 0, v % 2 ** 32], U32)


def PRNGKey(seed) -> np.ndarray | Tracer:
    """A threefry2x32 key from an integer seed, as ``jax.random.PRNGKey``: uint32 (2,), the
    seed's 64 bits as (high, low) words (a negative seed is its two's complement)."""
    if isinstance(seed, Tracer):
        s = seed.astype(np.int64) if seed.aval.dtype != np.int64 else seed
        hi = td.lax.shift_right_logical(s, np.int64(32)).astype(U32)
        lo = (s & np.int64(0xFFFFFFFF)).astype(U32)
        return td.concatenate([td.reshape(hi, (1,)), td.reshape(lo, (1,))])
    return _seed_words(seed)


def key(seed, *, impl=None) -> np.ndarray | Tracer:
    """``jax.random.key``: tidu has no typed key dtype, so this returns the raw key data, as
    ``PRNGKey``; every td.random function takes it."""
    if impl not in (None, "threefry2x32"):
        raise ValueError(f"unsupported PRNG implementation {impl!r}; tidu has threefry2x32")
    return PRNGKey(seed)


def key_data(keys):
    """The uint32 key data of keys: keys themselves (raw key data, see ``key``)."""
    return keys


def wrap_key_data(key_bits, *, impl=None):
    """Keys from uint32 key data (..., 2): the data itself (see ``key``)."""
    if impl not in (None, "threefry2x32"):
        raise ValueError(f"unsupported PRNG implementation {impl!r}; tidu has threefry2x32")
    a = key_bits if isinstance(key_bits, Tracer) else np.asarray(key_bits)
    if a.dtype != U32 or a.shape[-1:] != (2,):
        raise TypeError(f"key data must be uint32 of shape (..., 2), got {a.dtype}{list(a.shape)}")
    return a


@eager("num")
def split(key, num=2):
    """``jax.random.split``: `num` (an int or a shape) new keys, shape (*num, 2)."""
    return hash_pairs(check_key("split", key), shape_of(num))


@eager()
def fold_in(key, data):
    """``jax.random.fold_in``: a new key from key and an integer (taken as uint32)."""
    k = check_key("fold_in", key)
    t = _current()
    d = _lift(t, data)
    if d.aval.shape != ():
        raise TypeError(f"fold_in: data must be a scalar, got shape {d.aval.shape}")
    d = td.reshape(d.astype(U32), (1,))
    return _emit(t, P.Threefry2x32(), k, td.concatenate([td.zeros((1,), U32), d]))


UINTS = {8: np.dtype("uint8"), 16: np.dtype("uint16"), 32: U32, 64: np.dtype("uint64")}


def bits_of(key: Tracer, shape: tuple[int, ...], dt: np.dtype) -> Tracer:
    """jax's random bits of unsigned dtype dt (partitionable threefry): 32 bits are the hash
    words' xor, 8 and 16 that xor's low bits, 64 the words as (high, low)."""
    if dt == U32:
        return bits32(key, shape)
    if dt.itemsize < 4:
        return bits32(key, shape).astype(dt)
    hi, lo = random_bits(key, shape)
    return td.lax.shift_left(hi.astype(dt), np.array(32, dt)) | lo.astype(dt)


@eager("shape", "dtype")
def bits(key, shape=(), dtype=None):
    """``jax.random.bits``: uniform random bits of an unsigned dtype (uint64 by default, as jax
    under x64)."""
    dt = UINTS[64] if dtype is None else np.dtype(dtype)
    if dt not in UINTS.values():
        raise TypeError(f"bits: dtype argument must be an unsigned int dtype (uint8, uint16, "
                        f"uint32 or uint64), got {dt}")
    return bits_of(check_key("bits", key), shape_of(shape), dt)
