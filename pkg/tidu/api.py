"""JAX-like front end: jit (and, built on the same pipeline, the AD transforms).

Every transform traces the user function into a fragment and runs the seven-step pipeline; the
compiled program is cached per input shapes and dtypes (and by structure in the program cache).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tidu import _core
from tidu.backends.program import CompiledProgram, _check_backend, compile
from tidu.graph import Fragment, FragmentBuilder, materialize_merge, resolve
from tidu.guards import MAX_VARIANTS, Concrete, Guarded, GuardMiss
from tidu.trace.tracer import Tracer, _lift, _stack as _trace_stack
from tidu.trace.build import as_aval, flatten_outputs, tracing
from tidu.numpy.core import zeros_like

__all__ = ["jit", "unflatten"]


unflatten = _core.unflatten  # a function's output structure over flat values (compiled)


# ---- jit ----

# Flattening positional arguments and the signature a compiled program is cached under run on
# every call of a transformed function: compiled (pyx/_frontend.pxi).
_flatten_args = _core.flatten_args
_signature = _core.signature


def _leaf_aval(x):
    return as_aval(np.asarray(x) if not hasattr(x, "dtype") else x)


def trace_program(fn: Callable, args: tuple, backend: str = "auto", device=None,
                  concrete: bool = False) -> tuple[CompiledProgram, Any]:
    """Trace fn at the shapes/dtypes of args; returns (program over flattened args, output tree).

    concrete: trace with the values of args at hand (Python control flow on traced values
    works, tidu.guards); the program then has one more output, its guard vector, and
    ``prog.n_guards`` says how many guards it holds."""
    leaves, in_tree = _flatten_args(args)
    builder = FragmentBuilder(prefix="p")
    conc = Concrete() if concrete else None
    with tracing(builder, conc) as t:
        tracers = t.inputs([("arg", i) for i in range(len(leaves))],
                           _core.leaf_avals(leaves, _leaf_aval))
        # A transform's own trace: no user code has run in it, so the first nested call may
        # differentiate these inputs in place (see _Nested).
        builder.top_inputs = {x._v for x in tracers} if getattr(fn, "_own_trace", False) \
            else None
        if conc is not None:
            for tr, x in zip(tracers, leaves):
                conc.bind(tr._v, x)
        out = fn(*unflatten(in_tree, tracers))
        flat, out_tree = flatten_outputs(t, out)
        guard = conc.output(t.trace) if conc is not None else None
    keys = _core.keys_of(flat) + ([guard.key] if guard is not None else [])
    frag = builder.build(keys)
    prog = compile(materialize_merge(resolve([frag]), frag.outputs), backend, device)
    prog.n_guards = len(conc.guards) if guard is not None else 0
    return prog, out_tree


def _output_builder(tree) -> Callable[[list], Any]:
    """A function from a program's flat outputs to fn's output structure (the common shapes,
    one array or a flat tuple of them, without walking the tree per call)."""
    if tree is None:
        return lambda res: res[0]
    kind, children = tree
    if kind is tuple and all(c is None for c in children):
        return tuple
    return functools.partial(unflatten, tree)


def _entry(fn, args, backend, device, concrete, variants=None) -> tuple:
    """A jit cache entry (program, output builder, input order, C++ entry point); a program
    with guards gets a guard-checking builder (a tidu.guards.Guarded variant, one of
    `variants`: those of this signature)."""
    prog, out_tree = trace_program(fn, args, backend, device, concrete)
    order = [key[1] for key in prog.inputs]  # the program's input order over the leaves
    build = _output_builder(out_tree)
    if prog.n_guards:
        if variants is None or len(variants) >= MAX_VARIANTS:
            variants = []
        build = Guarded(len(prog.outputs) - 1, build, variants)
    entry = (prog, build, order, prog.runner())
    if prog.n_guards:
        build.entry = entry
    return entry


def _run(entry, leaves) -> Any:
    prog, build, order, run = entry
    inputs = [leaves[i] for i in order]
    if run:
        try:  # the C++ entry point checks count, dtype, shape and contiguity itself
            return build(run(inputs))
        except (TypeError, ValueError):
            pass  # CompiledProgram.eval converts, or raises an error naming the input
    return build(prog.eval(inputs))


def _other_path(cache, sig, fn, args, leaves, miss, backend, device):
    """A guard differed: switch to the variant of this call's path (tracing and compiling it
    the first time that path is taken)."""
    for _ in range(MAX_VARIANTS):  # each hop agrees with the call on more guards
        variant = miss.variant
        nxt = variant.next_variant(miss.res)
        if nxt is None:
            break
        try:
            out = _run(nxt.entry, leaves)
        except GuardMiss as again:
            miss = again
            continue
        cache[sig] = nxt.entry  # the next call starts from this path
        return out
    entry = _entry(fn, args, backend, device, True, miss.variant.variants)
    out = _run(entry, leaves)
    cache[sig] = entry
    return out


def jit(fn: Callable | None = None, *, static_argnums=None, static_argnames=None,
        backend: str = "auto", device=None, _concrete: bool = False) -> Callable:
    """Compile fn once per input shapes/dtypes and evaluate it with the compiled program.

    Args:
        fn: a function of arrays (or tuples/lists/dicts of arrays) returning the same.
        backend: "cpu" (the C++ interpreter), "xla" (StableHLO through XLA; needs the ``xla``
            extra) or "auto" (XLA for large tensor work, the interpreter otherwise; see
            ``tidu.xla.choose_backend``).
        device: XLA only: None (jax's default device), a platform name or a jax Device.
        static_argnums: an int or ints (negative counts from the end of fn's positional
            parameters): positional arguments that are hashable Python values, not arrays; fn
            is traced and compiled once per distinct value (``range(n)``, ``if flag:`` work).
        static_argnames: a str or strs: the same for arguments passed by keyword.  Each of the
            two also marks the parameter it names in fn's signature, as in jax.

    Returns:
        A function with fn's signature returning numpy arrays in fn's output structure, with
        ``.lower(*args, **kwargs)`` giving the compiled program (tidu.api.Lowered).  Keyword
        arguments that are not static are traced like positional ones.

    Raises:
        ValueError: unknown backend, or a static_argnums out of range of fn's parameters.
        TypeError: fn uses a traced value in Python control flow (``if x > 0``); inside jit
            values are abstract: use ``tidu.where``, or make the argument static.  A static
            argument that is not hashable (a list, an array).
    """
    if fn is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, backend=backend, device=device)
    _check_backend(backend)
    if static_argnums is not None or static_argnames is not None:
        from tidu.static import static_jit

        return static_jit(fn, static_argnums, static_argnames, backend, device, _concrete)
    # Transforms (grad, jvp, ...) are jits with _concrete: traced with the values at hand, under
    # guards (tidu.guards).  A user's jit traces abstractly, also where it is inlined into a
    # transform's trace.
    cache: dict[tuple, tuple[CompiledProgram, Any, list[int], Any]] = {}

    def wrapped(*args, **kwargs):  # the general path; `jitted` takes calls like the last one
        if kwargs:  # traced like positional arguments, one jit per set of keyword names
            return by_keyword()(*args, **kwargs)
        leaves, in_tree = _flatten_args(args)
        sig = _signature(leaves)
        if sig is None:  # called inside a trace (a jit in a jit, a transform): inline fn
            return fn(*args) if _concrete else _abstractly(fn, args)
        sig = (sig, in_tree)
        hit = cache.get(sig)
        if hit is None:
            hit = cache[sig] = _entry(fn, args, backend, device, _concrete)
        prog, build, order, run = hit
        inputs = [leaves[i] for i in order]
        try:
            if run:
                try:  # the C++ entry point checks count, dtype, shape and contiguity itself
                    out = build(run(inputs))
                except (TypeError, ValueError):
                    pass  # CompiledProgram.eval converts, or raises an error naming the input
                else:
                    if len(leaves) == len(args):  # flat arguments: the next call may go direct
                        jitted.remember(args, order, run, build)
                    return out
            return build(prog.eval(inputs))
        except GuardMiss as miss:
            return _other_path(cache, sig, fn, args, leaves, miss, backend, device)

    keyword: list = []  # the jit taking keyword arguments, made on first use (jit itself is
                        # created per transform call, so it stays cheap)

    def by_keyword():
        if not keyword:
            from tidu.static import static_jit

            keyword.append(static_jit(fn, None, None, backend, device, _concrete))
            jitted.keyword = keyword[0]  # keyword calls now go there directly
        return keyword[0]

    def lower(*args, **kwargs):
        """The compiled program for these arguments (tidu.api.Lowered)."""
        return by_keyword().lower(*args, **kwargs)

    jitted = _core.Jitted(wrapped)
    functools.update_wrapper(jitted, fn)
    jitted.cache = cache
    jitted.lower = lower
    return jitted


def _abstractly(fn, args):
    """fn inlined into the current trace with its values abstract (a jit inside a transform)."""
    t = _trace_stack()[-1]
    saved, t.concrete = t.concrete, None
    try:
        return fn(*args)
    finally:
        t.concrete = saved


def transpose(x, axes=None):
    """``transpose(linear_fragment)``: the AD transpose (VJP) of a LinearFragment;
    ``transpose(traced_value, axes=None)``: numpy's axis permutation."""
    from tidu import ad
    from tidu.numpy import core as tracing

    if isinstance(x, Fragment):
        raise TypeError("transpose of a graph expects a LinearFragment (from differentiate), "
                        "got a Fragment")
    if isinstance(x, ad.LinearFragment):
        if axes is not None:
            raise TypeError("transpose of a LinearFragment takes no axes")
        return ad.transpose(x)
    return tracing.transpose(x, axes)


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
    from tidu.trace.tracer import Tracer

    for tree in trees:
        for x in _flatten_args(tree)[0]:
            if isinstance(x, Tracer):
                return x._t
    s = _trace_stack()
    return s[-1] if s else None


def _split_aux(out):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        what = f"a {type(out).__name__} of length {len(out)}" \
            if isinstance(out, (tuple, list)) else f"a {type(out).__name__}"
        raise TypeError(f"has_aux=True requires fn to return a pair (output, aux), got {what}")
    return out[0], out[1]


class _Nested:
    """One transform call inside a trace: fresh inputs for its argument leaves, fn traced on
    them, and ``bind`` to replace them by the argument values in anything derived."""

    def __init__(self, trace, args):
        from tidu.trace.tracer import Tracer

        ctx = _Ctx(trace)
        leaves, self.in_tree = _flatten_args(args)
        self.trace = trace
        self.args = _core.lift_all(trace, leaves, ctx.lift)
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
            self.fresh.append(Tracer(trace, trace.store.global_of(local), a.aval))
        self.mapping = {f._v: a._v for f, a in zip(self.fresh, self.args)}
        conc = trace.concrete
        if conc is not None:
            conc.aliases.update(zip(self.mapping, self.args))

    def call(self, fn, has_aux=False):
        """fn on the fresh inputs: (flat outputs, out tree, aux, snapshot fragment)."""
        conc = self.trace.concrete
        n_guards = len(conc.guards) if conc is not None else 0
        out = fn(*unflatten(self.in_tree, self.fresh))
        aux = None
        if has_aux:
            out, aux = _split_aux(out)
        flat, out_tree = flatten_outputs(_Ctx(self.trace), out)
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
        from tidu.trace.tracer import Tracer

        idx = [i for i, x in enumerate(leaves) if isinstance(x, Tracer)]
        bound = self.bind([leaves[i] for i in idx])
        out = list(leaves)
        for i, x in zip(idx, bound):
            out[i] = x
        return out


def _val(trace, v: int):
    return _core.tracer_at(trace, v)


def _tracer_of(trace, key, like):
    return _core.tracer_at(trace, key.id) if key is not None else zeros_like(like)


def _check_inputs(name, holomorphic, avals_by_arg, allow_complex=True):
    """jax's input checks of grad/jacrev (allow_complex) and jacfwd, naming the argument."""
    for i, avs in avals_by_arg:
        for av in avs:
            k = av.dtype.kind
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
        if holomorphic and av.dtype.kind != "c":
            raise TypeError(f"{name} with holomorphic=True requires outputs with complex dtype, "
                            f"but got {av.dtype}")
        if not holomorphic and av.dtype.kind != "f":
            extra = (" For holomorphic differentiation, pass holomorphic=True."
                     if av.dtype.kind == "c" else "")
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


def _inline_grad(trace, fn, args, argnums, has_aux, holomorphic=False):
    from tidu.ad import differentiate, transpose as ad_transpose
    from tidu.numpy import core as T

    nums = _argnums(argnums)
    for i in nums:
        if not -len(args) <= i < len(args):
            raise ValueError(f"argnums {i} out of range for {len(args)} arguments")
    fn, args, argnums = _bind_python_args(fn, args, argnums)
    nums = _argnums(argnums)
    arg_leaves = _arg_leaves(args)
    nest = _Nested(trace, args)
    _check_inputs("grad", holomorphic,
                  [(i, [nest.fresh[l].aval for l in arg_leaves[i]]) for i in nums])
    flat, _, aux, snap = nest.call(fn, has_aux)
    if len(flat) != 1 or flat[0].shape != ():
        kind = "complex" if holomorphic else "real"
        raise TypeError(f"grad requires a {kind} scalar output, got "
                        f"{[str(o.aval) for o in flat]}")
    _check_outputs("grad", holomorphic, [flat[0].aval])
    wrt = [nest.fresh[l] for i in nums for l in arg_leaves[i]]
    lin = differentiate(resolve([snap]), [flat[0].key], [w.key for w in wrt])
    one = _Ctx(trace).lift(np.ones((), flat[0].dtype))
    back = ad_transpose(lin, cotangents=[one.key])
    trace.builder.parents.extend([lin.fragment, back.fragment])
    outs = back.tangent_outputs
    grads = _core.tracers_at(trace, [g.id for g in outs]) if None not in outs else \
        [_tracer_of(trace, g, w) for g, w in zip(outs, wrt)]
    if holomorphic:  # the transpose is the adjoint: conj of f'(z)
        grads = [T.conj(g) for g in grads]
    value, *grads = nest.bind([flat[0]] + grads)
    it = iter(grads)
    out = [unflatten(_flatten_args(args[i])[1], [next(it) for _ in arg_leaves[i]]) for i in nums]
    g = out[0] if isinstance(argnums, int) else tuple(out)
    return value, g, aux


def _bind_python_args(fn, args, argnums):
    """(fn, args, argnums) with the arguments not differentiated that are plain Python values
    (an int, a bool: a static argument of an enclosing jit, say) bound into fn as they are, as
    jax passes them, so that fn may use them in ``range`` or ``if``."""
    from tidu.trace.tracer import Tracer

    n = len(args)
    nums = [i % n for i in _argnums(argnums)]
    bound = {i: a for i, a in enumerate(args) if i not in nums and
             isinstance(a, (bool, int, float, complex, str, type(None)))
             and not isinstance(a, Tracer)}
    if not bound:
        return fn, args, argnums
    keep = [i for i in range(n) if i not in bound]

    def g(*a):
        full = list(args)
        for i, x in zip(keep, a):
            full[i] = x
        return fn(*full)

    new = [keep.index(i) for i in nums]
    return g, tuple(args[i] for i in keep), new[0] if isinstance(argnums, int) else tuple(new)


def _inline_jvp(trace, fn, primals, tangents, has_aux):
    from tidu.ad import differentiate

    nest = _Nested(trace, primals)
    ctx = _Ctx(trace)
    t_leaves = [ctx.lift(t) for t in _flatten_args(tangents)[0]]
    if len(t_leaves) != len(nest.fresh):
        raise ValueError(f"jvp: tangents have {len(t_leaves)} leaves, primals {len(nest.fresh)}")
    pairs = [(p, t) for p, t in zip(nest.fresh, t_leaves) if p.dtype.kind in "fc"]
    for p, t in pairs:
        if p.aval is not t.aval:
            raise ValueError(f"jvp: tangent {t.aval} does not match primal {p.aval}")
    flat, out_tree, aux, snap = nest.call(fn, has_aux)
    lin = differentiate(resolve([snap]), [o.key for o in flat], [p.key for p, _ in pairs],
                        tangents=[t.key for _, t in pairs])
    trace.builder.parents.append(lin.fragment)
    touts = [_tracer_of(trace, k, o) for k, o in zip(lin.tangent_outputs, flat)]
    both = nest.bind(flat + touts)
    result = (unflatten(out_tree, both[:len(flat)]), unflatten(out_tree, both[len(flat):]))
    return result + (aux,) if has_aux else result


def _bind_kw(fn: Callable, kwargs: dict) -> Callable:
    """fn with keyword arguments bound (constants to the derivative, as in jax)."""
    return functools.partial(fn, **kwargs) if kwargs else fn


def _traced_or_compiled(fn: Callable, traced: Callable) -> Callable:
    """A transform of fn: a jit of `traced` with concrete values (Python control flow on them
    works, under guards), which jit inlines when called inside a trace."""
    traced._own_trace = True
    jitted = jit(traced, _concrete=True)
    own = jitted.cache, jitted.lower
    functools.update_wrapper(jitted, fn)  # (fn's __dict__ too: a jitted fn's cache and lower)
    jitted.cache, jitted.lower = own
    return jitted


def value_and_grad(fn: Callable, argnums=0, has_aux: bool = False,
                   holomorphic: bool = False) -> Callable:
    """Like jax.value_and_grad: fn's value and its gradient wrt `argnums` (real scalar output;
    complex with ``holomorphic=True``, which gives f'(z) as jax does).

    For a complex input z of a real L the gradient is 2 dL/dz̄ = conj(jax.grad(L)(z)) (DESIGN
    §5).  Outside jit, fn may use Python control flow on values (``if x > 0``); the program is
    compiled once per path taken (tidu.guards)."""
    def traced(*args, **kwargs):  # keyword arguments are not differentiated (as in jax)
        value, g, aux = _inline_grad(_outer_trace(args, kwargs), _bind_kw(fn, kwargs), args,
                                     argnums, has_aux, holomorphic)
        return ((value, aux), g) if has_aux else (value, g)

    return _traced_or_compiled(fn, traced)


def grad(fn: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False) -> Callable:
    """Like jax.grad: the gradient of a real scalar function wrt `argnums` (of a complex one with
    ``holomorphic=True``).  Outside jit, fn may use Python control flow on values."""
    def traced(*args, **kwargs):  # keyword arguments are not differentiated (as in jax)
        _, g, aux = _inline_grad(_outer_trace(args, kwargs), _bind_kw(fn, kwargs), args,
                                 argnums, has_aux, holomorphic)
        return (g, aux) if has_aux else g

    return _traced_or_compiled(fn, traced)


# Top-level jvp/vjp/hvp calls go through a jit of the inline (traced) path, kept per function
# here, so each (function, shapes/dtypes) is traced and compiled once.  Bounded: functions made
# afresh per call (lambdas) recycle the oldest entries instead of growing it.
_TRANSFORMS: "dict[tuple, Callable]" = {}
_TRANSFORMS_MAX = 512


def _jitted(key: tuple, make: Callable[[], Callable], own: bool = True) -> Callable:
    """The jit of make() (a transform's traced function; own=False: the user's function)."""
    f = _TRANSFORMS.pop(key, None)
    if f is None:
        if len(_TRANSFORMS) >= _TRANSFORMS_MAX:
            del _TRANSFORMS[next(iter(_TRANSFORMS))]
        traced = make()
        if own:
            traced = functools.partial(traced)  # (a lambda's attributes are its own; user fns not)
            traced._own_trace = True
        f = jit(traced, _concrete=True)
    _TRANSFORMS[key] = f  # most recently used last
    return f


def _like_primals(primals, tangents):
    """Tangent leaves as arrays of their primal's dtype (a Python float for a float32 primal)."""
    p_leaves, _ = _flatten_args(primals)
    t_leaves, t_tree = _flatten_args(tangents)
    if len(p_leaves) != len(t_leaves):
        raise ValueError(f"jvp: tangents have {len(t_leaves)} leaves, primals {len(p_leaves)}")
    out = []
    for p, t in zip(p_leaves, t_leaves):
        dt = np.asarray(p).dtype if not hasattr(p, "dtype") else p.dtype
        out.append(np.asarray(t, dt) if np.dtype(dt).kind in "fc" else t)
    return unflatten(t_tree, out)


def jvp(fn: Callable, primals, tangents, has_aux: bool = False):
    """Like jax.jvp: ``(fn(*primals), J·tangents)``, tangents structured like primals.  Compiled once
    per function and shapes/dtypes."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    trace = _outer_trace(primals, tangents)
    if trace is not None:
        return _inline_jvp(trace, fn, primals, tangents, has_aux)
    f = _jitted(("jvp", fn, has_aux),
                lambda: lambda p, t: jvp(fn, p, t, has_aux=has_aux))
    return f(primals, _like_primals(primals, tangents))


def linearize(fn: Callable, *primals):
    """Like jax.linearize: ``(fn(*primals), f_jvp)`` where ``f_jvp(*tangents) = J·tangents``."""
    out = jvp(fn, primals, [np.zeros_like(np.asarray(p)) for p in primals])[0]
    return out, lambda *tangents: jvp(fn, primals, tangents)[1]


def _vjp_parts(trace, fn, primals, has_aux=False, holomorphic=False):
    """fn traced into the current trace and linearized: (nest, out, out tree, aux, back) with
    back(ct) the cotangents of the primals' leaves, not yet bound (nest.bind), transposed inside
    the same trace (holomorphic: conjugated, giving ct·f'(z) as jax's)."""
    from tidu.ad import differentiate, transpose as ad_transpose
    from tidu.numpy import core as T

    nest = _Nested(trace, primals)
    for p in nest.fresh:
        if p.dtype.kind not in "fc":
            raise TypeError(f"vjp: cannot differentiate with respect to an input of dtype "
                            f"{p.dtype} (only float and complex inputs are)")
    flat, out_tree, aux, snap = nest.call(fn, has_aux)
    lin = differentiate(resolve([snap]), [o.key for o in flat], [p.key for p in nest.fresh])
    trace.builder.parents.append(lin.fragment)

    def back(ct):
        ctx = _Ctx(trace)
        ct_leaves = _flatten_args(ct)[0] if out_tree is not None else [ct]
        if len(ct_leaves) != len(flat):
            raise ValueError(f"vjp: {len(ct_leaves)} cotangents for {len(flat)} outputs")
        cts = []
        for c, o in zip(ct_leaves, flat):
            c = ctx.lift(c if hasattr(c, "_t") else np.asarray(c, o.dtype))
            if c.aval is not o.aval:
                raise ValueError(f"vjp: cotangent {c.aval} does not match output {o.aval}")
            cts.append(T.conj(c) if holomorphic else c)
        bt = ad_transpose(lin, cotangents=[c.key for c in cts])
        trace.builder.parents.append(bt.fragment)
        grads = [_tracer_of(trace, g, p) for g, p in zip(bt.tangent_outputs, nest.fresh)]
        return [T.conj(g) for g in grads] if holomorphic else grads

    return nest, flat, out_tree, aux, back


def _inline_vjp(trace, fn, primals, has_aux=False, holomorphic=False):
    """(out, back, aux): _vjp_parts with back's cotangents bound and structured like primals."""
    nest, flat, out_tree, aux, raw = _vjp_parts(trace, fn, primals, has_aux, holomorphic)

    def back(ct):
        grads = iter(nest.bind(raw(ct)))
        return tuple(unflatten(_flatten_args(a)[1], [next(grads) for _ in _flatten_args(a)[0]])
                     for a in primals)

    return unflatten(out_tree, nest.bind(flat)), back, aux


def vjp(fn: Callable, *primals, has_aux: bool = False):
    """Like jax.vjp: ``(fn(*primals), vjp_fn)`` with ``vjp_fn(cotangent)`` -> cotangents of primals.
    Compiled once per function and shapes/dtypes (the forward value, and the backward pass)."""
    trace = _outer_trace(primals)
    if trace is not None:
        out, back, aux = _inline_vjp(trace, fn, primals, has_aux)
        return (out, back, aux) if has_aux else (out, back)
    fwd = _jitted(("fwd", fn), lambda: fn, own=False)
    res = fwd(*primals)
    out, aux = res if has_aux else (res, None)
    bwd = _jitted(("vjp", fn, has_aux),
                  lambda: lambda p, ct: _inline_vjp(_outer_trace(p), fn, p, has_aux)[1](ct))

    out_leaves = _flatten_args(out)[0] if isinstance(out, (tuple, list, dict)) else [out]

    def vjp_fn(ct):
        # cotangents as arrays of their output's dtype (a Python float for a float32 output)
        leaves, tree = _flatten_args(ct) if isinstance(out, (tuple, list, dict)) else ([ct], None)
        if len(leaves) == len(out_leaves):  # (a Tracer, inside a trace, stays as it is)
            leaves = [c if hasattr(c, "_t") else np.asarray(c, np.asarray(o).dtype)
                      for c, o in zip(leaves, out_leaves)]
            ct = unflatten(tree, leaves)
        return bwd(primals, ct)

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _basis_stack(ctx, av):
    """The standard basis of av's space, stacked: shape (av.size,) + av.shape, built from two
    Iotas (no n x n constant in the program)."""
    from tidu.numpy import core as T

    n = av.size
    eye = T.astype(T.iota((n, n), "int32", 0) == T.iota((n, n), "int32", 1), av.dtype)
    return T.reshape(eye, (n,) + av.shape)


def _one_leaf(x, i, what):
    from tidu.trace.tracer import Tracer

    if not isinstance(x, Tracer):
        raise TypeError(f"{what}: argument {i} must be a single array")
    return x


def _jac_fn(fn, argnums, has_aux, forward: bool, holomorphic: bool = False):
    """The traced Jacobian: the JVP (forward) or VJP (reverse) of fn, vmapped over the basis of
    each differentiated argument (forward) or of each output (reverse), in one program whose
    size does not grow with the number of elements.  Complex arguments
    (jacfwd) and outputs (jacrev) need holomorphic=True, as in jax: without it the two modes
    would silently disagree (J vs its conjugate)."""
    nums = _argnums(argnums)
    what = "jacfwd" if forward else "jacrev"

    def jac(*args, **kwargs):  # keyword arguments are not differentiated (as in jax)
        fn_kw = _bind_kw(fn, kwargs)
        trace = _outer_trace(args, kwargs)
        ctx = _Ctx(trace)
        args = [ctx.lift(a) if i in nums or i - len(args) in nums else a
                for i, a in enumerate(args)]
        xs = [_one_leaf(args[i], i, what) for i in nums]
        _check_inputs(what, holomorphic, [(i, [x.aval]) for i, x in zip(nums, xs)],
                      allow_complex=not forward or holomorphic)

        def f_x(*xv):
            a = list(args)
            for i, xi in zip(nums, xv):
                a[i] = xi
            return fn_kw(*a)

        # fn traced once; the JVP (forward) or VJP (reverse) derived once and mapped by vmap
        # over the basis of the argument (forward) or of each output (reverse): the program
        # holds one batched derivative, whatever the number of elements.
        from tidu.numpy import core as T
        from tidu.batching import _inline_vmap

        per_num = []  # per argnum: per output leaf, the Jacobian block
        if forward:
            from tidu.ad import differentiate

            nest = _Nested(trace, tuple(xs))
            out_leaves, out_tree, aux, snap = nest.call(f_x, has_aux)
            if holomorphic:
                _check_outputs(what, True, [o.aval for o in out_leaves])
            view = resolve([snap])
            for x in nest.fresh:
                def push(t, x=x):
                    lin = differentiate(view, [o.key for o in out_leaves], [x.key],
                                        tangents=[t.key])
                    trace.builder.parents.append(lin.fragment)
                    return [_tracer_of(trace, k, o)
                            for k, o in zip(lin.tangent_outputs, out_leaves)]
                cols = _inline_vmap(trace, push, (_basis_stack(ctx, x.aval),), {}, 0, -1, None)
                per_num.append([T.reshape(c, o.shape + x.shape)
                                for c, o in zip(cols, out_leaves)])
        else:
            nest, out_leaves, out_tree, aux, back = _vjp_parts(trace, f_x, tuple(xs), has_aux,
                                                               holomorphic)
            _check_outputs(what, holomorphic, [o.aval for o in out_leaves])
            rows = []  # per output leaf: the cotangent of each x, stacked over the basis
            for m, o in enumerate(out_leaves):
                def pull(e, m=m):
                    ct = [e if q == m else np.zeros(p.shape, p.dtype)
                          for q, p in enumerate(out_leaves)]
                    return list(back(unflatten(out_tree, ct)))
                rows.append(_inline_vmap(trace, pull, (_basis_stack(ctx, o.aval),), {}, 0, 0,
                                         None))
            for k, x in enumerate(xs):
                per_num.append([T.reshape(rows[m][k], o.shape + x.shape)
                                for m, o in enumerate(out_leaves)])
        flat_blocks = nest.bind([b for blocks in per_num for b in blocks])
        it = iter(flat_blocks)
        per_num = [[next(it) for _ in blocks] for blocks in per_num]
        if isinstance(argnums, int):
            leaves = per_num[0]
        else:
            leaves = [tuple(blocks[m] for blocks in per_num) for m in range(len(per_num[0]))]
        result = unflatten(out_tree, leaves)
        return (result, aux) if has_aux else result

    return jac


def jacfwd(fn: Callable, argnums=0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """Like jax.jacfwd: the Jacobian by forward mode, the JVP vmapped over the basis of the
    differentiated arguments (each a single array; outputs any tuple/list/dict of arrays), in
    one program compiled once per shapes/dtypes.  Shape: output.shape + argument.shape; with a tuple of
    argnums, a tuple of those per output.  Arguments must be real, or complex with
    ``holomorphic=True`` (then outputs must be complex too)."""
    return _traced_or_compiled(fn, _jac_fn(fn, argnums, has_aux, True, holomorphic))


def jacrev(fn: Callable, argnums=0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """Like jax.jacrev: the Jacobian by reverse mode, the VJP vmapped over the basis of each
    output, in one program compiled once per shapes/dtypes.  Same arguments and result as ``jacfwd``; outputs
    must be real, or complex with ``holomorphic=True`` (then arguments must be complex too)."""
    return _traced_or_compiled(fn, _jac_fn(fn, argnums, has_aux, False, holomorphic))


def hessian(fn: Callable, argnums=0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable:
    """Like jax.hessian: forward over reverse (jacfwd of the gradient), one program compiled
    once per shapes/dtypes; fn must return a real scalar (complex with holomorphic=True)."""
    g = grad(fn, argnums, has_aux, holomorphic)
    return jacfwd(g, argnums, has_aux=has_aux, holomorphic=holomorphic)


def hvp(fn: Callable, primals, tangents, argnums: int = 0):
    """Hessian-vector product H(primals)·v of a real scalar fn with respect to argument
    `argnums` (forward over reverse), v = tangents[argnums] (or `tangents` itself when it is a
    single array).  Compiled once per function and shapes/dtypes."""
    primals = tuple(primals)
    v = tangents[argnums] if isinstance(tangents, (tuple, list)) else tangents

    def hv(p, t):
        def g_i(xi):
            a = list(p)
            a[argnums] = xi
            return grad(fn, argnums)(*a)
        return jvp(g_i, (p[argnums],), (t,))[1]

    if _outer_trace(primals, v) is not None:
        return hv(primals, v)
    f = _jitted(("hvp", fn, argnums), lambda: hv)
    return f(primals, _like_primals((primals[argnums],), (v,))[0])
