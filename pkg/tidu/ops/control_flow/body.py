"""Bodies of the control-flow primitives: a :class:`Body` is a closed Fragment whose inputs are
the canonical keys ``BodyArg(0..n-1)``; the helpers every control-flow primitive shares
(linearizing, partially evaluating and batching a body) and the region lowering
(``stablehlo.while`` / ``stablehlo.case`` regions).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tidu._native import _core
from tidu.ad import differentiate
from tidu.ad.batch import batch_walk
from tidu.backends.program import compile as compile_
from tidu.backends.xla import lower_range
from tidu.backends.xla.hlo import Lowering, Value, tensor_type
from tidu.graph import (
    AbstractValue,
    External,
    Fragment,
    FragmentBuilder,
    GraphError,
    Local,
    ValKey,
    aval,
    input_key_id,
    materialize_merge,
    mode_of,
    prim_of,
    resolve,
)
from tidu.graph.memory import disown
from tidu.ops.core import Transpose, aval_of, broadcast_batch, const, fix, is_differentiable


@dataclass(frozen=True)
class BodyArg:
    """The canonical InputKey of a body's input number ``index``."""

    index: int

    def __repr__(self) -> str:
        return f"arg{self.index}"


_fresh = itertools.count()


@dataclass(frozen=True)
class _Tmp:
    """A throw-away InputKey (tracing a body, accumulators); replaced by BodyArg on closing."""

    uid: int
    index: int


def fresh_key() -> _Tmp:
    return _Tmp(next(_fresh), 0)


class Body:
    """A closed sub-program: inputs BodyArg(0..n-1), outputs, held by a control-flow op."""

    __slots__ = ("fragment", "in_avals", "out_avals", "_key", "_hash", "_prog", "__weakref__")

    def __init__(self, fragment: Fragment, in_avals: Sequence[AbstractValue]):
        self.fragment = fragment
        self.in_avals = tuple(in_avals)
        self.out_avals = tuple(k.aval for k in fragment.outputs)
        self._key = (tuple(a.id for a in self.in_avals), tuple(k.id for k in fragment.outputs))
        self._hash = hash(("Body", self._key))
        self._prog = None
        # A Body lives in the interned op that holds it: it goes when the interner is emptied, so
        # its store does not count as a holder of interned ids (tidu.graph.memory).
        disown(fragment.store)

    @property
    def inputs(self) -> list[ValKey]:
        """The input ValKeys in BodyArg order (declared even when unused)."""
        return [ValKey(_core.intern_input(_input_key_id(BodyArg(i)), a.id))
                for i, a in enumerate(self.in_avals)]

    @property
    def outputs(self) -> list[ValKey]:
        return self.fragment.outputs

    def __eq__(self, other):
        return isinstance(other, Body) and other._key == self._key

    def __hash__(self):
        return self._hash

    def __repr__(self) -> str:
        return (f"Body(({', '.join(map(str, self.in_avals))}) -> "
                f"({', '.join(map(str, self.out_avals))}), {self.fragment.n_ops} ops)")

    def listing(self, indent: str = "    ") -> str:
        return "\n".join(indent + line for line in str(self.fragment).splitlines())

    def program(self):
        """The body compiled once for the interpreter (a CompiledProgram on the cpu backend)."""
        if self._prog is None:
            mat = materialize_merge(resolve([self.fragment]), self.outputs)
            prog = compile_(mat, backend="cpu")
            disown(mat._mat)  # owned by this Body, as its fragment (__init__)
            # inputs the body never reads are not program inputs: map positions
            keys = [k.id for k in prog.input_vals]
            pos = {k.id: i for i, k in enumerate(self.inputs)}
            self._prog = (prog, [pos[k] for k in keys])
        return self._prog

    def run(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        prog, take = self.program()
        return prog.eval([args[i] for i in take])

    def native(self):
        """The body's C++ program (tidu._eval.Program) for a control-flow instruction, or None
        when an op of the body has no C++ kernel."""
        return self.program()[0].executable.native

    def take(self) -> list[int]:
        """The body's program input k reads body input take()[k] (unread inputs are dropped)."""
        return self.program()[1]


def _input_key_id(key):
    return input_key_id(key)


def close_body(outputs: Sequence[ValKey | None], inputs: Sequence[ValKey | AbstractValue],
               out_avals: Sequence[AbstractValue] | None = None) -> Body:
    """A canonical Body computing ``outputs`` from ``inputs``.

    ``inputs[i]`` is a ValKey (becomes ``BodyArg(i)``: its definition is cut there) or an
    AbstractValue (an input nothing reads).  Every value reachable from the outputs must be a
    listed input or derived from them; an output None is zero (``out_avals`` gives its aval).
    The ops are replayed into a fresh fragment, so the result is the same Body whatever keys the
    inputs had."""
    b = FragmentBuilder(prefix="b")
    env: dict[int, ValKey] = {}
    in_avals = []
    for i, k in enumerate(inputs):
        av = k if isinstance(k, AbstractValue) else k.aval
        in_avals.append(av)
        local = b.add_input(BodyArg(i), av)
        if isinstance(k, ValKey) and k.id not in env:
            env[k.id] = b.key_of_local(local) if hasattr(b, "key_of_local") else \
                ValKey(b.store.global_of(local))
    outs = []
    for j, o in enumerate(outputs):
        if o is None:
            av = out_avals[j]
            outs.append(ValKey(b.store.global_of(const(b, 0, av))))
            continue
        outs.append(_replay(b, env, o))
    return Body(b.build(outs), in_avals)


def _replay(b: FragmentBuilder, env: dict[int, ValKey], root: ValKey) -> ValKey:
    """root's definition copied into b, with env's values standing in (iterative DFS)."""
    if root.id in env:
        return env[root.id]
    stack = [root.id]
    while stack:
        v = stack[-1]
        if v in env:
            stack.pop()
            continue
        op_id, _, _ = _core.val_info(v)
        if op_id == _core.NONE:
            key = ValKey(v)
            raise GraphError(f"control flow: the body reads {key!r} ({key.aval}), which is not one "
                             f"of its inputs")
        prim, mode, ins, first, n_out = _core.op_info(op_id)
        pending = [int(i) for i in ins if int(i) not in env]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        new = b.add_op(prim_of(prim), [env[int(i)] for i in ins], mode_of(mode))
        for s, local in enumerate(new):
            env[int(first) + s] = ValKey(b.store.global_of(local))
    return env[root.id]


def _zero_like(b: FragmentBuilder, av: AbstractValue) -> int:
    return const(b, 0, av)


def _outs(b: FragmentBuilder, first: int, n: int) -> list[int]:
    return list(range(first, first + n))


def _lin_body(body: Body, active: Sequence[bool]):
    """differentiate the body w.r.t. its active inputs; returns (LinearFragment, tangent input
    ValKeys aligned with body inputs (None inactive))."""
    keys = [BodyArg(i) for i, a in enumerate(active) if a]
    view = resolve([body.fragment])
    lf = differentiate(view, body.outputs, keys)
    tin: list[ValKey | None] = [None] * len(active)
    frag = lf.fragment
    by_key = {k.input_key: k for k in frag.inputs}
    for (what, tkey) in lf.tangent_inputs:
        tin[what.index] = by_key[tkey]
    return lf, tin


def _partial_eval(body: Body, lf, tin: Sequence[ValKey | None]):
    """Split the body's JVP into the known part (the body plus residual outputs) and the tangent
    part.  Returns (residuals: ValKeys the tangent part reads that are not tangents)."""
    frag = lf.fragment
    tangent: set[int] = {k.id for k in tin if k is not None}
    residuals: dict[int, ValKey] = {}
    for op, refs, outs, mode in frag.ops():
        keys = [frag.key_of(r.id) if hasattr(r, "id") and not hasattr(r, "key") else r.key
                for r in refs]
        if any(k.id in tangent for k in keys):
            for k in keys:
                if k.id not in tangent:
                    residuals.setdefault(k.id, k)
            for o in outs:
                tangent.add(frag.key_of(o).id)
    for o in lf.tangent_outputs:
        if o is not None and o.id not in tangent:
            residuals.setdefault(o.id, o)
    return list(residuals.values()), tangent


# ---- batching (vmap) ----


def batch_body(body: Body, mask: Sequence[bool], n: int) -> Body:
    """`body` with inputs i where mask[i] given a leading batch axis of size n, every output
    batched (outputs independent of the batched inputs are broadcast): the batching pass
    (tidu.ad.batch) over the body's own fragment."""
    fb = FragmentBuilder(parents=[body.fragment], prefix="vb")
    inputs, seeds = [], []
    for k, m in zip(body.inputs, mask):
        if not m:
            inputs.append(k)
            continue
        local = fb.add_input(fresh_key(), aval((n,) + k.aval.shape, k.aval.dtype))
        v = ValKey(fb.store.global_of(local))
        inputs.append(v)
        seeds.append((k.id, v.id))
    found = batch_walk(resolve([body.fragment]), body.outputs, seeds, fb)
    outs = [ValKey(v) if v != _core.NONE else
            ValKey(fb.store.global_of(broadcast_batch(fb, o, n)))
            for o, v in zip(body.outputs, found)]
    return close_body(outs, inputs)


def _swap01(b, x):
    """x with its first two axes swapped (a batch axis and a scan axis)."""
    nd = aval_of(b, x).ndim
    return fix(b, Transpose((1, 0) + tuple(range(2, nd))), x)


def _add_multi(b, op, args) -> list:
    return b.add_op(op, [External(a) if isinstance(a, ValKey) else Local(a) for a in args])


def _operands(b, primal_in, bt, n, always=()):
    """Operands batched where given (and at the positions in `always`, broadcast), and the mask."""
    ops, mask = [], []
    for i, (x, bx) in enumerate(zip(primal_in, bt)):
        if bx is None and i in always:
            bx = broadcast_batch(b, x, n)
        ops.append(x if bx is None else bx)
        mask.append(bx is not None)
    return ops, mask


def _check_differentiable(name, primal_in, tangent_in):
    for x, t in zip(primal_in, tangent_in):
        if t is not None and not is_differentiable(x.dtype):
            raise TypeError(f"{name}: operand of dtype {x.dtype} is not differentiable")


# ---- transposing a body ----


def _ct_inputs(tr) -> dict[int, ValKey]:
    """The cotangent input ValKey of each output index of a transposed body (an output listed
    twice gets one per index)."""
    return {key.index: ValKey(_core.intern_input(_input_key_id(key), what.aval.id))
            for what, key in tr.tangent_inputs}


def _is_linear_value(o: ValKey, inputs: Sequence[ValKey], lin_idx: Sequence[int]) -> bool:
    """o is a linear input of the body or produced by a Linear-mode op."""
    if any(o.id == inputs[i].id for i in lin_idx):
        return True
    op_id, _, _ = _core.val_info(o.id)
    if op_id == _core.NONE:
        return False
    return mode_of(_core.op_info(op_id)[1]).is_linear


# ---- StableHLO lowering ----


def _child(lo):
    """A Lowering writing into a region of lo's function (fresh names continue lo's; functions
    a spliced jax lowering adds land in lo's module, where the region's calls find them)."""
    c = Lowering(lo.batch, getattr(lo, "platform", "cpu"))
    c._n = lo._n
    c.funcs = lo.funcs
    return c


def _region(lo, child, params, results) -> str:
    """``^bb0(params): child's lines; stablehlo.return(results)`` as region text."""
    lo._n = child._n
    sig = ", ".join(f"{v.name}: {v.type}" for v in params)
    rts = ", ".join(v.type for v in results)
    body = "\n".join("  " + line for line in child.lines)
    return (f"    ^bb0({sig}):\n" + (body + "\n" if body else "") +
            f'      "stablehlo.return"({", ".join(v.name for v in results)}) : ({rts}) -> ()\n    ')


def lower_body(lo, body: Body, args):
    """body's instructions written into lo with args (Values, body input order) as inputs;
    returns the output Values."""
    prog, take = body.program()
    exe = prog.executable
    env = {int(s): args[i] for s, i in zip(exe.input_slots, take)}
    lower_range(exe, lo, env, 0, len(exe.instructions))
    return [env[int(s)] for s in exe.output_slots]


def _multi(lo, name: str, args, types, regions: Sequence[str], attrs: str = ""):
    """An operation with several results (and regions); returns one Value per result."""
    r = lo.fresh()
    n = len(types)
    regs = " (" + ", ".join("{\n" + reg + "}" for reg in regions) + ")" if regions else ""
    att = f" {{{attrs}}}" if attrs else ""
    lhs = f"{r}:{n}" if n > 1 else r
    lo.lines.append(f'    {lhs} = "{name}"({", ".join(a.name for a in args)}){regs}{att} : '
                    f'({", ".join(a.type for a in args)}) -> ({", ".join(types)})')
    return [Value(f"{r}#{k}" if n > 1 else r, t) for k, t in enumerate(types)]


def _i64(lo, value: int):
    return lo.scalar(value, np.int64)


def tensor_type_of(shape, dtype) -> str:
    return tensor_type(shape, dtype)
