"""jax.numpy's function-mapping names, built on ``vmap``: ``vectorize`` (numpy's broadcasting
and gufunc signatures), ``apply_along_axis``, ``apply_over_axes`` and ``piecewise``.

As jax's: ``vectorize`` broadcasts the arguments' loop dimensions and maps the function over
them with one ``vmap`` (the loop axes flattened into one); ``apply_along_axis`` nests ``vmap``
over the other axes; ``piecewise`` evaluates every piece and selects (the last true condition
wins, numpy's rule), which is what jax's vmapped ``switch`` computes.
"""

from __future__ import annotations

import functools
import math
import re

import numpy as np

from tidu.api.vmap import vmap
from tidu.numpy import core, dispatch, shapes
from tidu.trace.tracer import Tracer, _lift, _trace_of

__all__ = ["apply_along_axis", "apply_over_axes", "fromfunction", "piecewise", "vectorize"]

_DIM = r"\w+"
_CORE = rf"\((?:{_DIM}(?:,{_DIM})*)?\)"
_ARGS = rf"{_CORE}(?:,{_CORE})*"
_SIGNATURE = re.compile(rf"^{_ARGS}->{_ARGS}$")


def _parse_signature(sig: str):
    s = sig.replace(" ", "")
    if not _SIGNATURE.match(s):
        raise ValueError(f"vectorize: not a valid gufunc signature: {sig}")
    ins, outs = s.split("->")

    def parse(part):
        return [tuple(re.findall(_DIM, c)) for c in re.findall(_CORE, part)]

    return parse(ins), parse(outs)


def _shape(x):
    return x.shape if isinstance(x, Tracer) else np.shape(x)


class vectorize:  # noqa: N801 - jax.numpy's name
    """``jnp.vectorize(pyfunc, *, excluded=frozenset(), signature=None)``: pyfunc mapped over
    the broadcast loop dimensions of its arguments (the core dimensions of `signature` passed
    whole)."""

    def __init__(self, pyfunc, *, excluded=frozenset(), signature: str | None = None):
        self.pyfunc = pyfunc
        self.excluded = set(excluded)
        self.signature = signature
        functools.update_wrapper(self, pyfunc)
        if any(isinstance(e, str) for e in self.excluded):
            raise ValueError("vectorize: only positional arguments can be excluded")

    def __call__(self, *args, **kwargs):
        excluded = {i for i in self.excluded if i < len(args)}
        mapped = [i for i in range(len(args)) if i not in excluded]

        def inner(*margs):
            full = list(args)
            for i, a in zip(mapped, margs):
                full[i] = a
            return self.pyfunc(*full, **kwargs)

        margs = [args[i] for i in mapped]
        if self.signature is None:
            in_core = [()] * len(margs)
            out_core = None
        else:
            in_core, out_core = _parse_signature(self.signature)
            if len(in_core) != len(margs):
                raise TypeError(f"vectorize: signature {self.signature} has {len(in_core)} "
                                f"inputs, got {len(margs)}")
        sizes: dict[str, int] = {}
        loops = []
        for a, dims in zip(margs, in_core):
            sh = _shape(a)
            if len(sh) < len(dims):
                raise ValueError(f"vectorize: input with shape {sh} has fewer dimensions than "
                                 f"the core dimensions {dims}")
            core_sh = sh[len(sh) - len(dims):]
            for d, n in zip(dims, core_sh):
                if sizes.setdefault(d, n) != n:
                    raise ValueError(f"vectorize: inconsistent size for core dimension {d!r}: "
                                     f"{sizes[d]} vs {n}")
            loops.append(sh[:len(sh) - len(dims)])
        loop = tuple(np.broadcast_shapes(*loops)) if loops else ()
        if not loop:
            return inner(*margs)
        n = math.prod(loop)
        t = _trace_of(*margs) if any(isinstance(a, Tracer) for a in margs) else None
        flat = []
        for a, dims in zip(margs, in_core):
            sh = _shape(a)
            core_sh = tuple(sh[len(sh) - len(dims):])
            if t is None:
                b = np.broadcast_to(np.asarray(a), loop + core_sh).reshape((n,) + core_sh)
            else:
                b = core.reshape(core.broadcast_to(_lift(t, a), loop + core_sh),
                                 (n,) + core_sh)
            flat.append(b)
        out = vmap(inner)(*flat)

        def unflat(y):
            return (np.reshape(y, loop + np.shape(y)[1:]) if not isinstance(y, Tracer)
                    else core.reshape(y, loop + y.shape[1:]))

        if isinstance(out, tuple):
            if out_core is not None and len(out_core) != len(out):
                raise ValueError(f"vectorize: signature {self.signature} has {len(out_core)} "
                                 f"outputs, the function returned {len(out)}")
            return tuple(unflat(y) for y in out)
        return unflat(out)


def apply_along_axis(func1d, axis: int, arr, *args, **kwargs):
    """func1d applied to the 1-D slices of arr along axis (jax's nested vmaps)."""
    nd = len(_shape(arr))
    axis = shapes._axis(axis, nd, "apply_along_axis")

    def func(a):
        return func1d(a, *args, **kwargs)

    for i in range(1, nd - axis):
        func = vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(arr)


def apply_over_axes(func, a, axes):
    """func(a, axis) applied for each axis in turn, a reduced axis kept as length 1."""
    for axis in axes:
        b = func(a, axis)
        nb, na = len(_shape(b)), len(_shape(a))
        if nb == na:
            a = b
        elif nb == na - 1:
            a = shapes.expand_dims(b, axis) if isinstance(b, Tracer) else np.expand_dims(b, axis)
        else:
            raise ValueError("apply_over_axes: func must return an array of the same or one "
                             "fewer dimensions")
    return a


def piecewise(x, condlist, funclist, *args, **kw):
    """numpy's piecewise: funclist[i] (a function of x or a constant) where condlist[i] holds,
    the last true condition winning; one extra function is the default (0 otherwise)."""
    if not isinstance(x, Tracer) and not shapes._traced() \
            and not shapes._has_tracer([condlist]):
        return np.piecewise(x, condlist, funclist, *args, **kw)
    t = _trace_of(x, *(condlist if isinstance(condlist, (list, tuple)) else [condlist]))
    xt = _lift(t, x)
    conds = condlist if isinstance(condlist, (list, tuple)) else (
        [condlist] if (isinstance(condlist, Tracer) and condlist.shape == xt.shape)
        or np.ndim(condlist) == xt.ndim else list(condlist))
    nc, nf = len(conds), len(funclist)
    if nf not in (nc, nc + 1):
        raise ValueError(f"piecewise: with {nc} condition(s), either {nc} or {nc + 1} "
                         f"functions are expected, got {nf}")

    def val(f):
        v = f(xt, *args, **kw) if callable(f) else f
        return core.broadcast_to(core.astype(_lift(t, v), xt.dtype), xt.shape)

    out = val(funclist[nc]) if nf == nc + 1 else core.astype(_lift(t, 0), xt.dtype)
    out = core.broadcast_to(out, xt.shape)
    for c, f in zip(conds, funclist[:nc]):
        c = _lift(t, c)
        out = core.where(c if c.dtype == np.bool_ else c != 0, val(f), out)
    return out


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """function applied to each index tuple of `shape` (jax's: vmapped over aranges, so
    function sees scalar indices of `dtype`)."""
    shape = tuple(int(s) for s in shape)
    for i in range(len(shape)):
        in_axes = [0 if i == j else None for j in range(len(shape))]
        function = vmap(function, in_axes=tuple(in_axes[::-1]))
    return function(*(np.arange(s, dtype=dtype) for s in shape), **kwargs)


# numpy's own functions of these names on traced values call these (tidu.numpy.dispatch)
for _name in ("apply_along_axis", "apply_over_axes", "piecewise"):
    dispatch.register(_name, globals()[_name])
