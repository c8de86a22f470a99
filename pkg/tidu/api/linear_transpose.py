"""``tidu.linear_transpose``: the transpose of a linear function, as ``jax.linear_transpose``.

fun is traced once per primal shapes and dtypes; a walk over its fragment proves it linear
(every op that sees an input is linear in it, the coefficients of Mul / Div / DotGeneral do not
depend on the inputs, and no constant offset is added), and the transpose is the VJP program, which
for a linear function is the same at every point.  Complex values follow jax's convention (the
plain transpose, ``a * ct`` for ``a * x``), not tidu's adjoint (``conj(a) * ct``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tidu._native import _core
from tidu.api.grad import vjp
from tidu.api.tree import flatten_args as _flatten_args
from tidu.api.tree import unflatten
from tidu.graph import Local
from tidu.graph.dtypes import kind_of
from tidu.numpy.core import conj
from tidu.trace.build import as_aval, build
from tidu.trace.tracer import Tracer

__all__ = ["linear_transpose", "make"]



def _zero_constant(op) -> bool:
    return op.name == "Constant" and not np.any(op.value)


def check_linear(frag, name: str = "linear_transpose") -> None:
    """Raise TypeError naming the first op that makes frag's outputs non-linear in its inputs."""
    active = {frag.local_of(k) for k in frag.inputs}
    zero: set[int] = set()
    for op, refs, outs, _ in frag.ops():
        ins = [r.id if isinstance(r, Local) else None for r in refs]
        act = [i is not None and i in active for i in ins]
        if not any(act):
            if _zero_constant(op) or (ins and all(i in zero for i in ins if i is not None)
                                      and getattr(op, "linear", False)):
                zero.update(outs)
            continue
        kind = op.name
        bilinear_in = getattr(op, "bilinear_in", ())  # Mul, DotGeneral, Div (by a fixed divisor)
        if bilinear_in:
            if sum(act) > 1 or any(a and i not in bilinear_in for i, a in enumerate(act)):
                raise TypeError(f"{name}: the function is not linear: {kind} multiplies or "
                                f"divides by a value that depends on the inputs")
        elif not getattr(op, "linear", False):
            raise TypeError(f"{name}: the function is not linear in its inputs: it applies "
                            f"{kind} to a value that depends on them")
        else:
            for i, a in zip(ins, act):
                dt = None
                if not a and i is not None:
                    dt = frag.key_of(i).aval.dtype
                if not a and dt is not None and kind_of(dt) in "fc" and i not in zero:
                    raise TypeError(f"{name}: the function is affine, not linear: {kind} "
                                    f"combines the inputs with a nonzero constant term")
        active.update(outs)


def _conj(c):
    return conj(c) if isinstance(c, Tracer) else np.conj(c)


def make(fun: Callable, primals: tuple) -> Callable:
    leaves, in_tree = _core.flatten_args(primals)
    avals = [as_aval(np.asarray(x) if not hasattr(x, "shape") else x) for x in leaves]
    for i, av in enumerate(avals):
        if kind_of(av.dtype) not in "fc":
            raise TypeError(f"linear_transpose: primal {i} has dtype {av.dtype}; only floating "
                            f"and complex inputs can be transposed")
    keys = [("linear_transpose", i) for i in range(len(avals))]
    frag = build(lambda *xs: fun(*unflatten(in_tree, list(xs))),
                 inputs=dict(zip(keys, avals)))
    check_linear(frag)
    zeros = unflatten(in_tree, [np.zeros(av.shape, av.dtype) for av in avals])
    out, back = vjp(fun, *zeros)
    complex_ = any(kind_of(av.dtype) == "c" for av in avals)

    def transposed(ct: Any) -> tuple:
        if complex_:  # jax's plain transpose: conj(adjoint(conj(ct)))

            ls, tr = _flatten_args(ct)
            res = back(unflatten(tr, [_conj(c) for c in ls]))
            ls, tr = _flatten_args(res)
            return unflatten(tr, [_conj(c) for c in ls])
        return back(ct)

    return transposed


# ---- linear_transpose ----

def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of the linear function `fun`, as ``jax.linear_transpose``.

    Args:
        fun: a function of arrays (or tuples/lists/dicts of them), linear in all of them.
        *primals: example arguments; only their shapes and dtypes are used.

    Returns:
        A function of one cotangent (with the structure, shapes and dtypes of fun's output)
        that returns a tuple with one cotangent per primal.

    Raises:
        TypeError: fun is not linear in its inputs (the message names the first primitive that
            makes it so), or a primal is not floating or complex.
    """
    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes is not supported")
    return make(fun, primals)
