"""Static and keyword arguments of jit, and ``jit(f).lower``: the compiled program behind a
jitted function for given arguments, with input names that say what each input is.

A static argument is a hashable Python value that selects the program (``range(n)``, ``if
flag:``), as in jax: fn is traced and compiled once per distinct static value (and per set of
keyword names); the other arguments, positional or keyword, are traced.  Each static selection is
a plain ``tidu.jit`` of fn with the static values bound, called with flat positional arguments,
so it keeps jit's compiled per-call fast path.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import numpy as np

__all__ = ["Lowered", "static_jit", "lower_program", "leaf_names"]


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
    from tidu.api import jit

    statics = _Statics(fn, static_argnums, static_argnames)
    plans: dict[tuple, tuple] = {}
    selections: dict[tuple, tuple] = {}

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
            hit = selections.get(key)
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
        return jit(g, backend=backend, device=device, _concrete=concrete), g, names

    def call(*args, **kwargs):  # the general path; `entry` takes calls like the last one
        (spos, dyn_idx, skw, dyn_kw, _), (inner, _, _) = select(args, kwargs)
        flat = [args[i] for i in dyn_idx]
        if dyn_kw:
            flat += [kwargs[k] for k in dyn_kw]
        out = inner(*flat)
        entry.remember(args, kwargs, spos, skw, dyn_idx, dyn_kw, inner)
        return out

    def lower(*args, **kwargs):
        """The compiled program for these arguments (a tidu.api.Lowered)."""
        (_, dyn_idx, _, dyn_kw, _), (_, g, names) = select(args, kwargs)
        flat = [args[i] for i in dyn_idx] + [kwargs[k] for k in dyn_kw]
        return lower_program(g, tuple(flat), backend, device, names)

    from tidu import _core

    entry = _core.StaticJitted(call)
    functools.update_wrapper(entry, fn)
    entry.lower = lower
    entry.selections = selections
    return entry


# ---- lower ----

def leaf_names(arg, name: str) -> list[str]:
    """Names of an argument's leaves in tidu's flattening order: ``x``, ``params['w']``,
    ``xs[0]``."""
    if isinstance(arg, (tuple, list)):
        return [n for i, a in enumerate(arg) for n in leaf_names(a, f"{name}[{i}]")]
    if isinstance(arg, dict):
        return [n for k, a in arg.items() for n in leaf_names(a, f"{name}[{k!r}]")]
    return [name]


def lower_program(fn: Callable, args: tuple, backend: str, device, names) -> "Lowered":
    """fn traced abstractly at the shapes/dtypes of args and compiled (as a jit inside a trace
    is: Python control flow on traced values is an error, static arguments select it)."""
    from tidu.api import _flatten_args, trace_program
    from tidu.trace.tracer import Tracer

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


class Lowered:
    """The compiled program behind a jitted function for given argument shapes and dtypes:
    ``tidu.jit(f).lower(*args)`` (and ``tidu.jit(tidu.grad(f)).lower(*args)``).

    Attributes:
        program: the tidu.CompiledProgram (its ``inputs`` are tidu's own keys).
        inputs: the name of each program input, in the order the program (and a C++ caller of
            the saved file) takes them: the parameter name of fn (``x``), with the path into a
            tuple/list/dict argument (``params['w']``, ``xs[0]``).  An argument fn never reads
            is not an input.
        in_avals: each input's shape and dtype, in that order.
        outputs: how many outputs the program has (fn's output leaves in flattening order).
    """

    def __init__(self, program, out_tree, flat_names: list[str]):
        from tidu.api import _output_builder

        self.program = program
        self._leaf = [key[1] for key in program.inputs]  # each input's leaf index
        self.inputs = [flat_names[i] for i in self._leaf]
        self.in_avals = [k.aval for k in program.input_vals]
        self.outputs = len(program.outputs)
        self._build = _output_builder(out_tree)

    def input_names(self) -> list[str]:
        """The inputs' names in program order (as ``tidu::Program::input_names()`` reads them
        from the saved file)."""
        return list(self.inputs)

    def save(self, path) -> None:
        """Write the program as a .tidu file for ``tidu.load`` or C++ ``tidu::Program::load``;
        the file carries the input names of ``self.inputs``."""
        self.program.save(path, input_names=self.inputs)

    def as_stablehlo(self, batch: int | None = None) -> str:
        """The program as StableHLO MLIR text, ``@main`` taking ``self.inputs`` in order."""
        return self.program.as_stablehlo(batch)

    def to_dot(self) -> str:
        """The program as Graphviz DOT text."""
        return self.program.to_dot()

    def __call__(self, *args) -> Any:
        """Evaluate at these arguments (same structure, shapes and dtypes as lowered)."""
        from tidu.api import _flatten_args

        leaves, _ = _flatten_args(args)
        return self._build(self.program.eval([leaves[i] for i in self._leaf]))

    def __repr__(self) -> str:
        ins = ", ".join(f"{n}: {a}" for n, a in zip(self.inputs, self.in_avals))
        return f"Lowered({ins}) -> {self.outputs} outputs, {self.program.n_instructions} instructions"
