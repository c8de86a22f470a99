"""Host callbacks: :class:`HostCallback` calls a Python function at evaluation time with the
runtime values (``td.debug.callback``, ``td.debug.print``, ``td.pure_callback``), and
:class:`Tie`, the value of its first operand once its other operands (effect tokens) are
computed, which keeps effectful callbacks from being dropped as dead code.

The interpreter runs HostCallback as one instruction that takes the GIL for that instruction only
(cpp/include/tidu/vm/host_callback.hpp; ``tidu._eval`` calls :func:`_run` here).  A program
holding one is never written to a ``.tidu`` file (the C++ loader refuses the opcode), and
``backend="auto"`` keeps it on the interpreter.

On XLA, the runner calls a program's own callbacks between compiled segments
(``tidu.backends.xla``); one inside a loop body or branch is refused by name there.

An effectful callback's output is a token (a bool scalar, no tangent); the front end
(``tidu.trace.effects``) chains a trace's tokens through the callbacks' operands, so they run in
program order, and ties the last one into every output of the trace (:class:`Tie`), whose
linearization and transpose carry the token along: under ``grad`` the primal callback runs once.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np

from tidu._native import _eval
from tidu.ad.rules import register
from tidu.graph import aval
from tidu.ops.core import A, F, Primitive, batch_size, broadcast_batch, fix, lin, ref

__all__ = ["TOKEN", "HostCallback", "HostFunction", "Tie", "VMAP_METHODS"]

TOKEN = aval((), "bool")  # an effectful callback's output
VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")
_NO_JVP = ("Pure callbacks do not support JVP. Please use `td.custom_jvp` to use callbacks while "
           "taking gradients.")


class HostFunction:
    """The user's function as a callback calls it: ``call(arrays)`` rebuilds the arguments from
    the operand arrays (``unflatten``) and returns the flat results, checked against ``out_avals``
    for a pure callback.  Equal by identity: each traced call site makes its own."""

    _ids = itertools.count(1)

    def __init__(self, name: str, fn, unflatten, flatten=None, out_avals=None):
        self.name, self.fn, self.unflatten, self.flatten = name, fn, unflatten, flatten
        self.out_avals = out_avals
        self.id = next(self._ids)

    def __repr__(self) -> str:
        return f"<callback {self.name}>"

    def call(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        res = self.fn(*self.unflatten(arrays))
        if self.out_avals is None:  # an effect: its result is ignored (jax's debug.callback)
            return []
        leaves = self.flatten(res)
        if len(leaves) != len(self.out_avals):
            raise RuntimeError(f"pure_callback {self.name}: the callback returned "
                               f"{len(leaves)} arrays, result_shape_dtypes declares "
                               f"{len(self.out_avals)}")
        out = []
        for k, (r, av) in enumerate(zip(leaves, self.out_avals)):
            r = np.asarray(r)
            if r.shape != av.shape or r.dtype != av.dtype:
                raise RuntimeError(f"pure_callback {self.name}: result {k} has shape {r.shape} "
                                   f"and dtype {r.dtype}, but result_shape_dtypes declares "
                                   f"{av.shape} and {av.dtype}")
            out.append(r)
        return out


# ---- the interpreter's entry: HostCallback ops by the id the instruction carries ----

# Kept for the process (not emptied by clear_caches): a compiled program the user holds may run
# again.  One entry per distinct callback op traced, each also held by the interner.
_ops: dict[int, HostCallback] = {}
_op_ids: dict[HostCallback, int] = {}
_next_op = itertools.count(1)


def _run(op_id: int, arrays: list) -> list:
    """Called by the interpreter (tidu._eval.set_host_callback) for one HostCallback
    instruction: its operands in, its outputs out."""
    op = _ops.get(op_id)
    if op is None:
        raise RuntimeError(f"tidu: no host callback {op_id} in this process (a program made "
                           f"before tidu.clear_caches, or not by this process)")
    return op.run(arrays)


_eval.set_host_callback(_run)


# ---- HostCallback ----


@register
@dataclass(frozen=True)
class HostCallback(Primitive):
    """``fn(*operands[:n_args])`` run by the host at evaluation time.

    ``effect``: a debug callback (its output is a token, it is never dropped, its linearization
    emits nothing); otherwise a pure callback with outputs ``out_avals`` (no derivative).
    ``levels``: the vmaps around it, outermost first, each ``(size, batched mask)``: operands
    batched at a level carry its axis, leading, in level order."""

    fn: HostFunction
    out_avals: tuple
    n_args: int
    effect: bool = True
    vmap_method: str | None = None
    levels: tuple = ()
    rule_cache = False

    @property
    def n_outputs(self) -> int:
        return len(self.out_avals)

    @property
    def callback_name(self) -> str:
        """What a program refusing to be saved names (tidu.backends.program)."""
        return self.fn.name

    def attrs(self) -> list[str]:
        return [f"fn={self.fn.name}"] + ([f"levels={len(self.levels)}"] if self.levels else [])

    def abstract_eval(self, *xs):
        if len(xs) < self.n_args:
            raise TypeError(f"{self.name}: {self.n_args} operands expected, given {len(xs)}")
        outs = self.out_avals
        return outs if len(outs) != 1 else outs[0]

    def kernel_attrs(self) -> list:
        k = _op_ids.get(self)
        if k is None:
            k = _op_ids[self] = next(_next_op)
            _ops[k] = self
        return [k]

    # ---- AD: a debug callback passes nothing on; a pure one refuses, as jax does ----

    def linearize(self, b, primal_in, primal_out, t):
        if not self.effect:
            raise ValueError(_NO_JVP)
        return [None] * self.n_outputs

    # ---- vmap: one level more ----

    def batch(self, b, primal_in, primal_out, bt):
        if not self.effect and self.vmap_method is None:
            raise NotImplementedError(
                f"vmap is only supported for pure_callback ({self.fn.name}) when vmap_method is "
                f"one of {', '.join(map(repr, VMAP_METHODS))}. Got vmap_method=None.")
        n = batch_size(b, bt)
        mask = tuple(x is not None for x in bt[:self.n_args])
        # the tokens after the arguments pass as they come (batched: broadcast by this rule)
        ops = [x if x is not None else p for x, p in zip(bt, primal_in)]
        outs = self.out_avals if self.effect else tuple(aval((n,) + a.shape, a.dtype)
                                                        for a in self.out_avals)
        op = replace(self, out_avals=outs, levels=((n, mask),) + self.levels)
        res = b.add_op(op, [ref(x) for x in ops])
        if self.effect:  # the token is the same for every point
            return [broadcast_batch(b, r, n) for r in res]
        return list(res)

    def lower(self, lo, out, *args):
        # the XLA runner calls a program's own callbacks between its compiled segments
        # (tidu.backends.xla.lower_segments); inside a lowered loop or branch there is no seam
        raise NotImplementedError(
            f"host callback {self.fn.name} inside a loop body or branch has no StableHLO "
            f"lowering: run this program with backend='cpu'")

    # ---- evaluation ----

    def run(self, arrays: list) -> list:
        """The outputs for the operand arrays (the interpreter's and ``impl``'s kernel)."""
        res = self._call(list(arrays[:self.n_args]), self.levels)
        if self.effect:
            return [np.zeros((), bool)]
        return [np.asarray(r, av.dtype, order="C") for r, av in zip(res, self.out_avals)]

    def _call(self, args: list, levels: tuple) -> list:
        if not levels:
            return self.fn.call(args)
        if self.effect or self.vmap_method in ("sequential", "sequential_unrolled"):
            # jax's order: the innermost vmap's loop outermost (its rule runs first, and the
            # vmaps around it batch each call it makes)
            (n, mask), rest = levels[-1], levels[:-1]
            pos = [sum(m[j] for _, m in rest) for j in range(len(args))]  # the level's axis
            parts = [self._call([a.take(i, axis=p) if m else a
                                 for a, m, p in zip(args, mask, pos)], rest) for i in range(n)]
            if self.effect:
                return []
            outs = self._out_avals(levels)
            return [np.stack([p[k] for p in parts], axis=len(rest)) if parts else
                    np.zeros(av.shape, av.dtype) for k, av in enumerate(outs)]
        return self._call_once(args, levels)

    def _out_avals(self, levels: tuple) -> list:
        """The results over ``levels`` (their sizes leading, outermost first)."""
        sizes = tuple(n for n, _ in levels)
        return [aval(sizes + av.shape, av.dtype) for av in self.fn.out_avals]

    def _call_once(self, args: list, levels: tuple) -> list:
        """expand_dims / broadcast_all: one call over every remaining level's axes."""
        sizes = tuple(n for n, _ in levels)
        shaped = []
        for j, a in enumerate(args):
            lead, pos = [], 0
            for n, mask in levels:
                lead.append(a.shape[pos] if mask[j] else 1)
                pos += bool(mask[j])
            a = a.reshape(tuple(lead) + a.shape[pos:])
            if self.vmap_method == "broadcast_all":
                a = np.broadcast_to(a, sizes + a.shape[len(sizes):])
            shaped.append(np.asarray(a, order="C"))
        fn = HostFunction(self.fn.name, self.fn.fn, self.fn.unflatten, self.fn.flatten,
                          self._out_avals(levels))
        return fn.call(shaped)

    def impl(self, *xs):
        res = self.run([np.asarray(x) for x in xs])
        return tuple(res) if self.n_outputs != 1 else res[0]


# ---- Tie ----


@register
@dataclass(frozen=True)
class Tie(Primitive):
    """``x``, computed after the tokens (operands 1...): a traced function's outputs are tied
    to its last effect token so that its callbacks run whenever an output is asked for."""

    def abstract_eval(self, *xs):
        if not xs:
            raise TypeError("Tie: needs the value operand")
        return xs[0]

    def linearize(self, b, primal_in, primal_out, t):
        if t[0] is None:
            return [None]
        return [lin(b, self, [t[0], *primal_in[1:]], [A] + [F] * (len(primal_in) - 1))]

    def transpose_rule(self, b, ct, inputs, mode):
        return [lin(b, self, [ct[0], *inputs[1:]], [A] + [F] * (len(inputs) - 1))] + \
            [None] * (len(inputs) - 1)

    def batch(self, b, primal_in, primal_out, bt):
        x = bt[0] if bt[0] is not None else broadcast_batch(b, primal_in[0], batch_size(b, bt))
        toks = [t if t is not None else p for t, p in zip(bt[1:], primal_in[1:])]
        return [fix(b, self, x, *toks)]

    def lower(self, lo, out, x, *tokens):
        return x

    def impl(self, x, *tokens):
        return x
