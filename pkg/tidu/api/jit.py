"""jit: trace once per argument kinds (shapes, dtypes, Python scalar types), run the seven-step
pipeline, cache the compiled program; with static and keyword arguments (one program per static
value) and ``jit(f).lower(*args)`` (the program a call would run, to save or draw).

jit and its static-argument form share this file: each calls the other."""

from __future__ import annotations

import contextlib
import functools
import inspect
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from tidu._native import _core
from tidu.api.guards import MAX_VARIANTS, Concrete, Guarded, GuardMiss
from tidu.api.lowered import Lowered
from tidu.api.lowered import output_builder as _output_builder
from tidu.api.tree import check_leaves, unflatten
from tidu.api.tree import flatten_args as _flatten_args
from tidu.api.tree_util import keystr, tree_leaves_with_path
from tidu.backends.program import CompiledProgram, _check_backend, compile
from tidu.backends.tiered import TierTable, track, wrap
from tidu.graph import FragmentBuilder, materialize_merge, resolve
from tidu.graph.memory import FunctionCache, at_safe_point, register_cache
from tidu.ops.sorting import share_sorts, sorts_twice
from tidu.trace.build import as_aval, flatten_outputs, mark_weak, tracing
from tidu.trace.effects import tokens
from tidu.trace.tracer import Tracer
from tidu.trace.tracer import _stack as _trace_stack

__all__ = ["Lowered", "describe", "disable_jit", "jit", "leaf_names", "lower_program", "static_jit",
           "trace_program", "unflatten"]


# ---- jit ----

# Flattening positional arguments and the signature a compiled program is cached under run on
# every call of a transformed function: compiled (pyx/api/jit.pxi).
_signature = _core.signature
register_cache("leaf_avals", _core.clear_leaf_aval_memo,
               lambda: {"entries": _core.memo_sizes()["leaf_avals"]})


_INT64 = np.iinfo(np.int64)


def _leaf_aval(x):
    if type(x) is int and not _INT64.min <= x <= _INT64.max:  # as jax (x64): an OverflowError
        raise OverflowError(f"an argument of a transformed function is the Python int {x}, "
                            f"outside int64 [{_INT64.min}, {_INT64.max}]")
    return as_aval(np.asarray(x) if not hasattr(x, "dtype") else x)


def trace_program(fn: Callable, args: tuple, backend: str = "auto", device=None,
                  concrete: bool = False) -> tuple[CompiledProgram, Any]:
    """Trace fn at the shapes/dtypes of args; returns (program over flattened args, output tree).

    concrete: trace with the values of args at hand (Python control flow on traced values
    works, tidu.guards); the program then has one more output, its guard vector, and
    ``prog.n_guards`` says how many guards it holds."""
    leaves, in_tree = _flatten_args(args)
    at_safe_point()  # a top-level trace: memory of dropped graphs may go back first
    builder = FragmentBuilder(prefix="p")
    conc = Concrete() if concrete else None
    with tracing(builder, conc) as t:
        try:
            avals = _core.leaf_avals(leaves, _leaf_aval)
        except TypeError:  # name the leaf, its path and the argument it is in
            what, names = _described(fn)
            check_leaves(what, args, names)
            raise
        tracers = t.inputs([("arg", i) for i in range(len(leaves))], avals)
        mark_weak(tracers, leaves)  # Python int/float/complex arguments are weakly typed
        # A transform's own trace: no user code has run in it, so the first nested call may
        # differentiate these inputs in place (see _Nested).
        builder.top_inputs = {x._v for x in tracers} if getattr(fn, "_own_trace", False) \
            else None
        if conc is not None:
            for tr, x in zip(tracers, leaves):
                conc.bind(tr._v, x)
        out = fn(*unflatten(in_tree, tracers))
        flat, out_tree = flatten_outputs(t, out)
        # a function with debug callbacks and no output: its last token is one (dropped on return)
        effect = tokens(t.trace)[-1:] if not flat else []
        guard = conc.output(t.trace) if conc is not None else None
    keys = _core.keys_of(flat) + [x.key for x in effect]
    keys += [guard.key] if guard is not None else []
    frag = builder.build(keys)
    prog = compile(materialize_merge(resolve([frag]), frag.outputs), backend, device)
    if sorts_twice(prog.executable):  # sort and its permutation (sort's gradient): one sort
        shared = share_sorts(builder, keys)
        if shared is not None:
            frag = builder.build(shared)
            prog = compile(materialize_merge(resolve([frag]), frag.outputs), backend, device)
    prog.n_guards = len(conc.guards) if guard is not None else 0
    prog.n_effects = len(effect)
    return prog, out_tree


def _described(fn) -> tuple[str, list | None]:
    """(the transform as the user spelled it, ``td.grad(loss)``; fn's parameter names) for
    errors about its arguments: a transform's traced function carries them as attributes."""
    names = getattr(fn, "_tidu_names", None)
    if names is None:
        sig = _positional_names(fn)
        names = sig[0] if sig and not sig[1] else None
    return getattr(fn, "_tidu_what", None) or f"td.jit({_short(fn)})", names


def _short(fn) -> str:
    return getattr(fn, "__name__", None) or _name(fn)


def describe(fn, what: str, user, names=None):
    """Mark fn (a transform's traced function) as `what` of the user's function `user` (errors
    about its arguments name them so), with the names of its positional arguments."""
    fn._tidu_what = f"td.{what}({_short(user)})"
    if names is None:  # resolved now: fn must not hold `user` (transform caches key on it weakly)
        sig = _positional_names(user)
        names = sig[0] if sig and not sig[1] else None
    if names is not None:
        fn._tidu_names = list(names)
    return fn


def _entry(fn, args, backend, device, concrete, variants=None) -> tuple:
    """A jit cache entry (program, output builder, input order, C++ entry point); a program
    with guards gets a guard-checking builder (a tidu.guards.Guarded variant, one of
    `variants`: those of this signature)."""
    prog, out_tree = trace_program(fn, args, backend, device, concrete)
    order = [key[1] for key in prog.inputs]  # the program's input order over the leaves
    build = _output_builder(out_tree)
    if prog.n_effects:  # the token output of a function returning nothing (trace_program)
        build = functools.partial(_drop_effect, build)
    if prog.n_guards:
        if variants is None or len(variants) >= MAX_VARIANTS:
            variants = []
        build = Guarded(len(prog.outputs) - 1, build, variants)
    entry = (prog, build, order, wrap(prog, prog.runner(), backend))  # tidu.backends.tiered
    if prog.n_guards:
        build.entry = entry
    return entry


def _drop_effect(build, outs):
    return build(outs[:-1])


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
        backend: str = "auto", device=None, in_shardings=None, out_shardings=None,
        donate_argnums=None, donate_argnames=None, keep_unused: bool = False,
        inline: bool = False, compiler_options: dict | None = None,
        _concrete: bool = False) -> Callable:
    """Compile fn once per input shapes/dtypes and evaluate it with the compiled program.

    Args:
        fn: a function of arrays (or tuples/lists/dicts of arrays) returning the same.
        backend: "cpu" (the C++ interpreter), "xla" (StableHLO through XLA; needs the ``xla``
            extra) or "auto" (``tidu.xla.choose_backend``: XLA for large tensor work, else the
            interpreter, tiered to XLA once that pays: ``tidu.backends.tiered``, ``.tiers()``).
        device: XLA only: None (jax's default device), a platform name or a jax Device.
        in_shardings: XLA only, as jax.jit's: a ``jax.sharding.NamedSharding`` for every
            argument, or a tuple with one per positional argument (applying to each of its
            leaves; None: replicated).  The program runs partitioned over the sharding's Mesh
            (XLA's SPMD partitioner adds the collectives, e.g. the all-reduce of a gradient
            summed over a sharded batch).
        out_shardings: XLA only: one sharding for every output, a tuple with one per output
            of the flattened result, or None (XLA's choice).  Arguments that are jax Arrays
            stay on their devices, and then the outputs come back as jax Arrays; numpy in,
            numpy out.
        static_argnums: an int or ints (negative counts from the end of fn's positional
            parameters): positional arguments that are hashable Python values, not arrays; fn
            is traced and compiled once per distinct value (``range(n)``, ``if flag:`` work).
        static_argnames: a str or strs: the same for arguments passed by keyword.  Each of the
            two also marks the parameter it names in fn's signature, as in jax.
        donate_argnums, donate_argnames: accepted and checked as jax's (ints / strs), and
            ignored: tidu never writes into a caller's array (the interpreter's outputs are new
            numpy arrays; XLA gets a copy of a numpy input), so there is nothing to donate.
        keep_unused, inline: accepted for jax's signature: an argument fn never reads is not
            a program input whatever keep_unused says (the call still takes it), and a jit
            called inside a trace is always inlined.
        compiler_options: XLA's flags in jax; only None or {} (tidu takes none).

    Returns:
        A function with fn's signature returning numpy arrays in fn's output structure, with
        ``.lower(*args, **kwargs)`` giving the compiled program (tidu.api.Lowered).  Keyword
        arguments that are not static are traced like positional ones.

    Raises:
        ValueError: unknown backend, or a static_argnums out of range of fn's parameters;
            in_shardings/out_shardings with a backend other than "xla"/"auto", or an
            in_shardings tuple whose length is not the number of positional arguments.
        TypeError: fn uses a traced value in Python control flow (``if x > 0``); inside jit
            values are abstract: use ``tidu.where``, or make the argument static.  A static
            argument that is not hashable (a list, an array).
    """
    if fn is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, backend=backend, device=device,
                                 in_shardings=in_shardings, out_shardings=out_shardings,
                                 donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                                 keep_unused=keep_unused, inline=inline,
                                 compiler_options=compiler_options)
    _check_backend(backend)
    _as_tuple(donate_argnums, int, "donate_argnums")  # checked as jax does, then ignored
    _as_tuple(donate_argnames, str, "donate_argnames")
    del keep_unused, inline
    if compiler_options:
        raise NotImplementedError("jit: compiler_options are XLA flags in jax; tidu takes none")
    sharded = in_shardings is not None or out_shardings is not None
    if sharded:
        if backend == "cpu" or device is not None:
            raise ValueError("in_shardings/out_shardings need backend='xla' (or 'auto') and no "
                             "device= (the shardings say where the program runs)")
        if static_argnums is not None or static_argnames is not None:
            raise NotImplementedError("in_shardings/out_shardings with static arguments")
        backend = "xla"
    if static_argnums is not None or static_argnames is not None:
        return static_jit(fn, static_argnums, static_argnames, backend, device, _concrete)
    # Transforms (grad, jvp, ...) are jits with _concrete: traced with the values at hand, under
    # guards (tidu.guards).  A user's jit traces abstractly, also where it is inlined into a
    # transform's trace.
    # (program, output builder, input order, C++ entry) by call signature: bounded, LRU
    # (tidu.graph.memory.FunctionCache); it lives as long as the jitted function does
    cache = FunctionCache()

    def wrapped(*args, **kwargs):  # the general path; `jitted` takes calls like the last one
        if not _concrete and _core.jit_disabled():  # td.disable_jit(): traced with values,
            return jit(fn, _concrete=True)(*args, **kwargs)  # afresh on every call
        if kwargs:  # traced like positional arguments, one jit per set of keyword names
            if sharded:
                raise NotImplementedError("in_shardings/out_shardings with keyword arguments")
            return by_keyword()(*args, **kwargs)
        leaves, in_tree = _flatten_args(args)
        sig = _signature(leaves)
        if sig is None:  # called inside a trace (a jit in a jit, a transform): inline fn
            return fn(*args) if _concrete else _abstractly(fn, args)
        sig = (sig, in_tree)
        hit = cache.lookup(sig)
        if hit is None:
            where = _placement(args, in_shardings, out_shardings) if sharded else device
            hit = cache[sig] = _entry(fn, args, backend, where, _concrete)
            track(hit[3], sig, getattr(me(), "tiers", None))
        prog, build, order, run = hit
        inputs = [leaves[i] for i in order]
        try:
            if run:
                try:  # the C++ entry point checks count, dtype, shape and contiguity itself
                    out = build(run(inputs))
                except (TypeError, ValueError):
                    pass  # CompiledProgram.eval converts, or raises an error naming the input
                else:
                    j = me()
                    if j is not None and len(leaves) == len(args):  # flat: the next call may
                        j.remember(args, order, run, build)        # go direct
                    return out
            return build(prog.eval(inputs))
        except GuardMiss as miss:
            where = _placement(args, in_shardings, out_shardings) if sharded else device
            return _other_path(cache, sig, fn, args, leaves, miss, backend, where)

    keyword: list = []  # the jit taking keyword arguments, made on first use (jit itself is
                        # created per transform call, so it stays cheap)

    def by_keyword():
        if not keyword:
            keyword.append(static_jit(fn, None, None, backend, device, _concrete))
            j = me()  # (gone where only `lower` was kept: td.jit(f).lower(...))
            if j is not None:
                j.keyword = keyword[0]  # keyword calls now go there directly
        return keyword[0]

    def lower(*args, **kwargs):
        """The compiled program for these arguments (tidu.api.Lowered)."""
        return by_keyword().lower(*args, **kwargs)

    jitted = _core.Jitted(wrapped)
    # wrapped, lower and the cache reach jitted weakly (they run only while it is alive), so a
    # dropped jitted function goes at once, with its programs and the graph ids they hold,
    # not at the next garbage collection
    me = weakref.ref(jitted)
    functools.update_wrapper(jitted, fn)
    jitted.cache = cache
    cache.forget = functools.partial(_forget, me)  # an evicted entry may be the fast path
    jitted.lower = lower
    jitted.tiers = TierTable(cache)  # the programs tiering moves: jitted.tiers() lists them
    return jitted


@contextlib.contextmanager
def disable_jit(disable: bool = True):
    """``with td.disable_jit():`` a jitted function runs its Python function on every call,
    traced with the argument values as the transforms trace outside jit (tidu.guards), so
    breakpoints stop in it, ``print(y)`` of a traced value shows its value, and Python control
    flow on values (``if y > 0:``, ``float(y)``) works, as under jax.disable_jit.  Nothing is
    cached: each call traces and runs a program afresh.  Transforms (grad, vmap, ...) still
    apply.  The setting is process-wide (not per thread) and nests: ``disable_jit(False)``
    turns jit back on inside."""
    old = _core.set_jit_disabled(bool(disable))
    try:
        yield
    finally:
        _core.set_jit_disabled(old)


def _forget(me: weakref.ref) -> None:
    """Drop the remembered fast path of the jitted function me refers to, if it lives."""
    jitted = me()
    if jitted is not None:
        jitted.forget()


def _placement(args: tuple, in_shardings, out_shardings):
    """td.jit's shardings for this call's arguments: one per leaf (tidu.xla.Shardings)."""
    from tidu.backends.xla import Shardings  # noqa: PLC0415 - the backend, on first sharded call

    if isinstance(in_shardings, (tuple, list)):
        if len(in_shardings) != len(args):
            raise ValueError(f"in_shardings: {len(in_shardings)} entries for {len(args)} "
                             f"positional arguments")
        leaves = [sh for a, sh in zip(args, in_shardings)
                  for _ in range(len(_flatten_args((a,))[0]))]
    else:
        leaves = [in_shardings] * len(_flatten_args(args)[0])
    return Shardings(leaves, out_shardings)


def _abstractly(fn, args):
    """fn inlined into the current trace with its values abstract (a jit inside a transform)."""
    t = _trace_stack()[-1]
    saved, t.concrete = t.concrete, None
    try:
        return fn(*args)
    finally:
        t.concrete = saved



# ---- fn's signature ----

def _positional_names(fn) -> tuple[list[str], bool] | None:
    """Names of fn's positional parameters and whether it takes *args; None if unknown."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    names, varargs = [], False
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            varargs = True
    return names, varargs


def _check_argnames(fn, names) -> None:
    """static_argnames must name parameters fn takes by keyword, as jax requires (any name
    where fn takes **kwargs; no check where fn has no signature to read)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    keyword = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    positional_only = {p.name for p in params if p.kind is p.POSITIONAL_ONLY}
    bad = [n for n in names if n not in keyword]
    if bad:
        why = ("positional-only parameters of it" if set(bad) <= positional_only
               else "not parameters of it")
        raise ValueError(f"jit of {_name(fn)}: static_argnames {bad} are {why}; it takes "
                         f"{sorted(keyword)} by keyword")


def _as_tuple(x, kind, what) -> tuple:
    if x is None:
        return ()
    if isinstance(x, kind):
        return (x,)
    out = tuple(x)
    for v in out:
        if not isinstance(v, kind) or isinstance(v, bool):
            raise TypeError(f"{what} must be {kind.__name__}s, got {v!r}")
    return out


class _Statics:
    """static_argnums/static_argnames resolved against fn's signature, as jax does: each names
    the same parameter by the other's means where fn's signature allows."""

    def __init__(self, fn, static_argnums, static_argnames):
        nums = _as_tuple(static_argnums, int, "static_argnums")
        names = _as_tuple(static_argnames, str, "static_argnames")
        _check_argnames(fn, names)
        sig = _positional_names(fn)
        self.params = sig[0] if sig else None
        n_pos = len(sig[0]) if sig and not sig[1] else None
        resolved = []
        for i in nums:
            if n_pos is not None:
                if not -n_pos <= i < n_pos:
                    raise ValueError(f"jit: static_argnums {i} is out of range: "
                                     f"{_name(fn)} takes {n_pos} positional arguments")
                i %= n_pos
            resolved.append(i)
        params = self.params or []
        names = list(names) + [params[i] for i in resolved if 0 <= i < len(params)]
        resolved += [params.index(n) for n in names if n in params]
        self.nums = frozenset(resolved)
        self.negative = any(i < 0 for i in self.nums)  # relative to each call's len(args)
        self.names = frozenset(names)

    def positions(self, n: int) -> frozenset:
        if not self.negative:
            return self.nums
        return frozenset(i % n if -n <= i < 0 else i for i in self.nums)

    def arg_name(self, i: int) -> str:
        return self.params[i] if self.params and i < len(self.params) else f"args[{i}]"


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _unhashable(fn, what: str, v) -> TypeError:
    return TypeError(f"jit of {_name(fn)}: static argument {what} must be hashable (it selects "
                     f"the compiled program), got a {type(v).__name__}; pass arrays as "
                     f"non-static arguments, and tuples instead of lists")


# ---- the static jit ----

def static_jit(fn: Callable, static_argnums, static_argnames, backend: str = "auto",
               device=None, concrete: bool = False) -> Callable:
    """jit(fn) with static arguments and keyword arguments (tidu.jit's general form).

    Per call: a plan per (number of positional arguments, keyword names) says which are static;
    the static values with their types (so True and 1 differ) select a plain jit of fn with them
    bound, called with the other arguments as flat positional ones.  A call like the last one
    (same count, keyword names and static values) skips all that: tidu._core.StaticJitted goes
    straight to the selected jit's compiled entry."""
    statics = _Statics(fn, static_argnums, static_argnames)
    plans: dict[tuple, tuple] = {}
    selections = FunctionCache()  # a plain jit per static values: bounded as compiled entries

    def plan_of(n: int, kw_names: tuple) -> tuple:
        pos = statics.positions(n)
        spos = tuple(i for i in range(n) if i in pos)
        dyn_idx = tuple(i for i in range(n) if i not in pos)
        skw = tuple(sorted(k for k in kw_names if k in statics.names))
        dyn_kw = tuple(k for k in kw_names if k not in statics.names)
        plan = plans[(n, kw_names)] = (spos, dyn_idx, skw, dyn_kw, (n, skw, dyn_kw))
        return plan

    def select(args, kwargs):
        """(plan, the jit entry for these static values)."""
        kw_names = tuple(kwargs)
        plan = plans.get((len(args), kw_names)) or plan_of(len(args), kw_names)
        spos, dyn_idx, skw, dyn_kw, pkey = plan
        key = (pkey,) + tuple([(type(args[i]), args[i]) for i in spos]) + \
            tuple([(type(kwargs[k]), kwargs[k]) for k in skw])
        try:
            hit = selections.lookup(key)
        except TypeError:  # a static value that does not hash: name it
            for i in spos:
                try:
                    hash(args[i])
                except TypeError:
                    raise _unhashable(fn, f"{i} ({statics.arg_name(i)})", args[i]) from None
            for k in skw:
                try:
                    hash(kwargs[k])
                except TypeError:
                    raise _unhashable(fn, repr(k), kwargs[k]) from None
            raise
        if hit is None:
            hit = selections[key] = _selection(plan, args, kwargs)
        return plan, hit

    def _selection(plan, args, kwargs) -> tuple:
        spos, dyn_idx, skw, dyn_kw, _ = plan
        n, n_dyn = len(args), len(dyn_idx)
        bound = {i: args[i] for i in spos}
        bound_kw = {k: kwargs[k] for k in skw}

        def g(*flat):
            a = [None] * n
            for j, i in enumerate(dyn_idx):
                a[i] = flat[j]
            for i, v in bound.items():
                a[i] = v
            kw = dict(zip(dyn_kw, flat[n_dyn:]))
            kw.update(bound_kw)
            return fn(*a, **kw)

        names = [statics.arg_name(i) for i in dyn_idx] + list(dyn_kw)
        g._tidu_what, g._tidu_names = _described(fn)[0], names
        return jit(g, backend=backend, device=device, _concrete=concrete), g, names

    def call(*args, **kwargs):  # the general path; `entry` takes calls like the last one
        if not concrete and _core.jit_disabled():  # td.disable_jit()
            return jit(fn, _concrete=True)(*args, **kwargs)
        (spos, dyn_idx, skw, dyn_kw, _), (inner, _, _) = select(args, kwargs)
        flat = [args[i] for i in dyn_idx]
        if dyn_kw:
            flat += [kwargs[k] for k in dyn_kw]
        out = inner(*flat)
        e = me()
        if e is not None:
            e.remember(args, kwargs, spos, skw, dyn_idx, dyn_kw, inner)
        return out

    def lower(*args, **kwargs):
        """The compiled program for these arguments (a tidu.api.Lowered)."""
        (_, dyn_idx, _, dyn_kw, _), (_, g, names) = select(args, kwargs)
        flat = [args[i] for i in dyn_idx] + [kwargs[k] for k in dyn_kw]
        return lower_program(g, tuple(flat), backend, device, names)


    entry = _core.StaticJitted(call)
    me = weakref.ref(entry)  # call reaches entry weakly: a dropped function goes at once
    functools.update_wrapper(entry, fn)
    entry.lower, entry.selections = lower, selections
    entry.tiers = lambda: [s for inner, _, _ in list(selections.values()) for s in inner.tiers()]
    return entry


# ---- lower ----

def leaf_names(arg, name: str) -> list[str]:
    """Names of an argument's leaves in tidu's flattening order: ``x``, ``params['w']``,
    ``xs[0]``."""
    return [name + keystr(path) for path, _ in tree_leaves_with_path(arg)]


def lower_program(fn: Callable, args: tuple, backend: str, device, names) -> "Lowered":
    """fn traced abstractly at the shapes/dtypes of args and compiled (as a jit inside a trace
    is: Python control flow on traced values is an error, static arguments select it)."""
    leaves, _ = _flatten_args(args)
    if any(isinstance(x, Tracer) for x in leaves):
        raise TypeError("lower takes concrete arrays (or Python numbers), not traced values")
    if names is None:
        params = _positional_names(fn)
        params = params[0] if params else []
        names = [params[i] if i < len(params) else f"args[{i}]" for i in range(len(args))]
    flat_names = [n for a, name in zip(args, names) for n in leaf_names(a, name)]
    prog, out_tree = trace_program(fn, args, backend, device, concrete=False)
    return Lowered(prog, out_tree, flat_names)
