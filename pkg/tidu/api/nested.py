"""Transforms called inside a trace (a grad inside a jit, a jvp inside a grad): they trace their
function on fresh inputs, differentiate with respect to those alone, and bind them to the values
they were called with. The shared argument and output checks of the AD transforms."""

from __future__ import annotations

from dataclasses import dataclass

from tidu._native import _core
from tidu.api.tree import check_leaves, unflatten
from tidu.api.tree import flatten_args as _flatten_args
from tidu.graph import resolve
from tidu.graph.dtypes import kind_of
from tidu.trace.build import flatten_outputs, mark_weak
from tidu.trace.effects import add_token, tokens
from tidu.trace.tracer import Tracer, _broadcast, _const, _lift, _trace_of
from tidu.trace.tracer import _stack as _trace_stack

__all__ = ["NestedArg"]

# ---- AD transforms ------------------------------------------------------------------------------

def _argnums(argnums) -> tuple[int, ...]:
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


# ---- transforms nested inside a trace ----
# Called inside a trace (jit, build, another transform; on traced values or not), a transform
# traces fn into the current trace on *fresh* inputs, differentiates with respect to those alone
# (whatever else fn closes over, values of enclosing traces included, is a constant to it), and
# binds the fresh inputs to the values it was called with by re-emitting what depends on them.

@dataclass(frozen=True)
class NestedArg:
    """InputKey of a fresh input standing for a nested transform's argument leaf."""

    index: int


class _Ctx:
    def __init__(self, trace):
        self.trace = trace

    def lift(self, x):
        return _lift(self.trace, x)


def _outer_trace(*trees):
    """The trace a transform called with these arguments runs in: their Tracers', or the open
    trace of this thread (fn may close over its values); None at top level."""
    s = _trace_stack()
    for tree in trees:
        for x in _flatten_args(tree)[0]:
            if isinstance(x, Tracer):
                # inside a control-flow body (or a custom rule) traced within x's trace, the
                # transform belongs to the body, which captures x
                if s and s[-1] is not x._t and hasattr(s[-1].builder, "capture"):
                    return s[-1]
                return x._t
    return s[-1] if s else None


def _split_aux(out):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        if isinstance(out, (tuple, list)):
            what = f"a {type(out).__name__} of length {len(out)}"
        elif hasattr(out, "aval") or hasattr(out, "dtype") or isinstance(out, (int, float)):
            what = "a single value, not a pair"
        else:
            what = f"a {type(out).__name__}"
        raise TypeError(f"has_aux=True requires fn to return a pair (output, aux), got {what}")
    return out[0], out[1]


class _Nested:
    """One transform call inside a trace: fresh inputs for its argument leaves, fn traced on
    them, and ``bind`` to replace them by the argument values in anything derived."""

    def __init__(self, trace, args, what: str = "a transform"):
        ctx = _Ctx(trace)
        leaves, self.in_tree = _flatten_args(args)
        self.trace = trace
        try:
            self.args = _core.lift_all(trace, leaves, ctx.lift)
        except TypeError:  # name the leaf that is no array, with its path
            check_leaves(what, args)
            raise
        mark_weak(self.args, leaves)  # Python scalar leaves: weakly typed (as jit's arguments)
        b = trace.builder
        self.direct = False
        top = getattr(b, "top_inputs", None)
        if top is not None:  # the transform whose trace this is: its arguments are fresh inputs
            b.top_inputs = None
            ids = [a._v for a in self.args]
            if len(set(ids)) == len(ids) and top.issuperset(ids):
                self.direct = True
                self.fresh, self.mapping = self.args, {}
                return
        n = getattr(b, "n_nested", 0)  # fresh keys count per trace, so they recur across traces
        b.n_nested = n + len(leaves)
        self.fresh = []
        for k, a in enumerate(self.args):
            local = b.add_input(NestedArg(n + k), a.aval)
            self.fresh.append(Tracer(trace, trace.store.global_of(local), a.aval, a.weak_type))
        self.mapping = {f._v: a._v for f, a in zip(self.fresh, self.args)}
        conc = trace.concrete
        if conc is not None:
            conc.aliases.update(zip(self.mapping, self.args))

    def call(self, fn, has_aux=False):
        """fn on the fresh inputs: (flat outputs, out tree, aux, snapshot fragment)."""
        conc = self.trace.concrete
        n_guards = len(conc.guards) if conc is not None else 0
        # fn's debug callbacks read the fresh inputs: their own token chain, bound below
        b = self.trace.builder
        outer_tokens, b.effect_tokens = tokens(self.trace), []
        try:
            out = fn(*unflatten(self.in_tree, self.fresh))
            aux = None
            if has_aux:
                out, aux = _split_aux(out)
            flat, out_tree = flatten_outputs(_Ctx(self.trace), out)
        finally:
            inner, b.effect_tokens = tokens(self.trace), outer_tokens
        for x in self.bind(inner):
            add_token(self.trace, x)
        if conc is not None and len(conc.guards) > n_guards:  # guards read the fresh inputs
            conc.guards[n_guards:] = [x._v for x in self.bind(
                [_val(self.trace, g) for g in conc.guards[n_guards:]])]
        if aux is not None:
            aux_leaves, aux_tree = _flatten_args(aux)
            aux = unflatten(aux_tree, self._bind_any(aux_leaves))
        snapshot = self.trace.builder.build(_core.keys_of(flat))
        return flat, out_tree, aux, snapshot

    def bind(self, xs: list) -> list:
        """Tracers xs with the fresh inputs replaced by the argument values."""
        if not xs or not self.mapping:
            return list(xs)
        keys = [x.key for x in xs]
        mat = resolve([self.trace.builder.build(keys)]).walk(keys)
        ids = _core.substitute(self.trace.store, mat, self.mapping)
        return [_core.tracer_at(self.trace, v) for v in ids]

    def _bind_any(self, leaves: list) -> list:
        idx = [i for i, x in enumerate(leaves) if isinstance(x, Tracer)]
        bound = self.bind([leaves[i] for i in idx])
        out = list(leaves)
        for i, x in zip(idx, bound):
            out[i] = x
        return out


def _val(trace, v: int):
    return _core.tracer_at(trace, v)


def _tracer_of(trace, key, like):
    if key is not None:
        return _core.tracer_at(trace, key.id)
    t = _trace_of(like)  # a zero of like's shape and dtype
    return _broadcast(t, _const(t, 0, like.dtype), like.shape)


def _check_inputs(name, holomorphic, avals_by_arg, allow_complex=True):
    """jax's input checks of grad/jacrev (allow_complex) and jacfwd, naming the argument."""
    for i, avs in avals_by_arg:
        for av in avs:
            k = kind_of(av.dtype)
            if k not in "fc":
                raise TypeError(f"{name} requires real- or complex-valued inputs (input dtype "
                                f"that is a sub-dtype of np.inexact), but got {av.dtype}: "
                                f"argument {i}: dtype {av.dtype} is not differentiable (only "
                                f"float and complex inputs are); leave it out of argnums")
            if holomorphic and k != "c":
                raise TypeError(f"{name} with holomorphic=True requires inputs with complex "
                                f"dtype, but got {av.dtype} for argument {i}")
            if not allow_complex and k != "f":
                raise TypeError(f"{name} requires real-valued inputs (input dtype that is a "
                                f"sub-dtype of np.floating), but got {av.dtype} for argument "
                                f"{i}. For holomorphic differentiation, pass holomorphic=True.")


def _check_outputs(name, holomorphic, avals):
    """jax's output checks of grad/jacrev (real outputs, or complex ones when holomorphic)."""
    for av in avals:
        if holomorphic and kind_of(av.dtype) != "c":
            raise TypeError(f"{name} with holomorphic=True requires outputs with complex dtype, "
                            f"but got {av.dtype}")
        if not holomorphic and kind_of(av.dtype) != "f":
            extra = (" For holomorphic differentiation, pass holomorphic=True."
                     if kind_of(av.dtype) == "c" else "")
            raise TypeError(f"{name} requires real-valued outputs (output dtype that is a "
                            f"sub-dtype of np.floating), but got {av.dtype}.{extra}")


def _arg_leaves(args) -> list[list[int]]:
    """Per positional argument, the indices of its leaves among all the arguments' leaves."""
    out, start = [], 0
    for a in args:
        n = len(_flatten_args(a)[0])
        out.append(list(range(start, start + n)))
        start += n
    return out


