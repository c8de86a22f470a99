"""Python control flow on traced values outside jit: concrete values at trace time, and guards.

A transform called outside ``jit`` (``td.grad(f)(x)``) traces f with the argument values at hand,
so ``bool()``, ``float()``, ``int()`` of a traced value work there, as they do under jax's grad
without jit.  Each such read is recorded as a **guard**: a boolean predicate of the program's
inputs (the value's truth, or ``value == what was read``) and the outcome tracing saw.  The
compiled program computes all its guards as one extra output, a bool vector; a call whose guard
vector differs from the one its program was traced under switches to (or traces and compiles)
the variant for the new path: a variant that failed at guard j with outcome o hands over to
a variant whose outcomes begin with its own first j and then o (its path agrees with the call
that far), so a function with Python branches is compiled once per path, and a call on the
path of the previous call costs one evaluation plus one bytes comparison.  Functions
that read no values have no guard output and pay nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tidu._native import _core
from tidu.graph import GraphError, ValKey, _aval_list, prim_of, resolve
from tidu.graph.dtypes import kind_of
from tidu.numpy import core as T
from tidu.trace.tracer import Tracer, _compare

__all__ = ["Concrete", "Guarded", "GuardMiss", "MAX_VARIANTS"]

MAX_VARIANTS = 256  # per signature; past it the tree starts afresh (old variants are dropped)


# ---- concrete values at trace time ----

class Concrete:
    """The concrete values of one trace: its inputs' given values, the rest computed on demand
    (each op's numpy ``impl``, once per value); every read for Python control flow is a guard."""

    def __init__(self):
        self.values: dict[int, np.ndarray] = {}
        self.aliases: dict[int, Any] = {}  # a nested transform's fresh input -> its argument
        self.guards: list[int] = []        # value ids of rank-0 bool predicates
        self.outcomes: list[bool] = []

    def bind(self, val_id: int, value) -> None:
        av = _aval_list[_core.val_aval(val_id)]
        self.values[val_id] = np.asarray(value, av.dtype).reshape(av.shape)

    def value(self, x) -> np.ndarray:
        """The concrete value of Tracer x."""
        hit = self.values.get(x._v)
        if hit is not None:
            return hit
        key = ValKey(x._v)
        mat = resolve([x._t.builder.build([key])]).walk([key])
        for v in mat.inputs:
            if int(v) not in self.values:
                alias = self.aliases.get(int(v))
                if alias is None:
                    raise GraphError(f"no concrete value for {ValKey(int(v))!r} while reading a "
                                     f"traced value for Python control flow")
                self.values[int(v)] = self.value(alias)
        vals = self.values
        with np.errstate(all="ignore"):
            for o in mat.ops:
                prim, _, ins, first, n_out = _core.op_info(int(o))
                if first in vals:
                    continue
                res = prim_of(prim).impl(*[vals[i] for i in ins])
                for k, r in enumerate((res,) if n_out == 1 else res):
                    av = _aval_list[_core.val_aval(first + k)]
                    vals[first + k] = np.asarray(r, av.dtype).reshape(av.shape)
        return vals[x._v]

    def read(self, x, kind: str):
        """bool/float/int/complex of Tracer x, recorded as a guard of the program."""
        v = self.value(x)
        if v.size != 1:
            raise TypeError(f"{kind}() of a traced value of shape {x.shape}: only one-element "
                            f"values convert to Python scalars (the truth value of an array "
                            f"with several elements is ambiguous)")
        v = v.reshape(())
        x0 = T.reshape(x, ()) if x.shape else x
        if kind == "bool":
            pred = x0 if x0.dtype == np.bool_ else _compare("NE", x0, np.zeros((), x0.dtype))
            out = bool(v)
            self._guard(pred, out)
            return out
        # A number read out of the trace may steer anything later: the program holds only for
        # this exact value (NaN: for NaN).
        pred = (
            _compare("NE", x0, x0)
            if kind_of(v.dtype) in "fc" and np.isnan(v)
            else _compare("EQ", x0, v)
        )
        self._guard(pred, True)
        return {"float": float, "int": int, "complex": complex}[kind](v)

    def _guard(self, pred, outcome: bool) -> None:
        self.guards.append(pred._v)
        self.outcomes.append(outcome)

    def output(self, trace):
        """The guards as one bool vector (a Tracer), or None when there are none."""
        if not self.guards:
            return None
        av = _aval_list[_core.val_aval(self.guards[0])]
        parts = [T.reshape(Tracer(trace, g, av), (1,)) for g in self.guards]
        return T.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]


# ---- variants and the per-call check ----


class GuardMiss(Exception):
    """A guarded program's guards came out differently from its path: another variant is due."""

    def __init__(self, variant: "Guarded", res: list):
        self.variant = variant
        self.res = res


class Guarded:
    """A compiled variant's output builder that first checks its guard vector (the last
    output) against the outcomes it was traced under; raises GuardMiss on a difference."""

    __slots__ = ("n", "expected", "build", "entry", "variants")

    def __init__(self, n: int, build: Callable, variants: list):
        self.n = n  # the function's own outputs
        self.expected = None  # guard vector bytes; adopted from the first (tracing) call
        self.build = build
        self.entry = None  # (prog, self, order, run): the jit cache entry
        self.variants = variants  # all variants of this signature (shared), self included
        variants.append(self)

    def __call__(self, res: list):
        got = res[self.n].tobytes()
        if got != self.expected:
            if self.expected is not None:
                raise GuardMiss(self, res)
            self.expected = got
        return self.build(res[: self.n])

    def next_variant(self, res: list) -> "Guarded | None":
        """A variant whose path agrees with res (this variant's outputs, its guards failed) up to
        and including the first guard that differed, or None (a path not traced yet)."""
        got = res[self.n]
        want = np.frombuffer(self.expected, dtype=np.bool_)
        j = int(np.flatnonzero(got != want)[0])
        prefix = self.expected[:j] + got[j : j + 1].tobytes()
        for v in reversed(self.variants):
            if v.expected is not None and v.expected.startswith(prefix):
                return v
        return None
