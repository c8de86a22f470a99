"""Structured control flow with jax's signatures: scan, fori_loop, while_loop, cond, switch.

Each construct traces its function(s) once into a closed body (``tidu.ops.control_flow.Body``):
values of enclosing traces the function uses are captured as explicit operands.  The loop or
branch is then one op of the enclosing fragment, whatever the trip count (docs/control_flow.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import numpy as np

from tidu._native import _core
from tidu.api.jit import jit
from tidu.api.tree import check_leaves
from tidu.api.tree_util import PyTreeDef
from tidu.graph import FragmentBuilder, ValKey, _aval_list, aval
from tidu.graph.dtypes import kind_of
from tidu.numpy import core as T
from tidu.numpy.core import iota
from tidu.ops.control_flow import Checkpoint, Cond, Scan, While, close_body, fresh_key
from tidu.trace.build import as_aval, mark_weak, tracing
from tidu.trace.effects import body_effect, has_effects, mark_op, tie
from tidu.trace.tracer import Tracer, _as_weak, _capture, _lift, _stack, result_type

__all__ = ["scan", "fori_loop", "while_loop", "cond", "switch", "checkpoint", "remat"]


# ---- pytrees: the transforms' one convention (tidu.api.tree, jax's) ----

_flatten = _core.tree_flatten  # tree -> (leaves, spec)
_unflatten = _core.unflatten  # (spec, leaves) -> tree


def _tree_str(spec) -> str:
    """A structure as jax prints it: ``PyTreeDef((*, {'a': *}))``."""
    return repr(PyTreeDef(spec))


# ---- tracing bodies ----

class _BodyBuilder(FragmentBuilder):
    """The builder of a body being traced: values of enclosing traces it reads become inputs
    (``capture``), and the op holding the body gets them as operands."""

    def __init__(self, outer):
        super().__init__(prefix="b")
        self.outer = outer  # the trace the control-flow op is emitted into
        self.trace = None
        self.captured: dict[int, Tracer] = {}
        self.capture_list: list[Tracer] = []  # outer values, in input order
        self.capture_inputs: list[ValKey] = []

    def capture(self, x: Tracer) -> Tracer:
        if x._t is not self.outer:  # from further out: captured by the enclosing body first
            x = _capture(self.outer, x)
        hit = self.captured.get(x._v)
        if hit is None:
            local = self.add_input(fresh_key(), x.aval)
            hit = Tracer(self.trace, self.store.global_of(local), x.aval)
            self.captured[x._v] = hit
            self.capture_list.append(x)
            self.capture_inputs.append(hit.key)
        return hit


def _outer_trace():
    s = _stack()
    return s[-1] if s else None


def _trace_body(outer, fn: Callable, arg_avals, make_args: Callable, what: str, weak=()):
    """Trace fn on fresh inputs of arg_avals (weakly typed where weak[i]); returns (builder, input
    ValKeys, output Tracers as a flat list, output tree)."""
    builder = _BodyBuilder(outer)
    try:
        with tracing(builder) as t:
            builder.trace = t.trace
            ins = [t.input(fresh_key(), av) for av in arg_avals]
            for x, w in zip(ins, weak):
                x.weak_type = w
            prev = _core.body_enter(t.trace)  # ops on outer values go into the body (_home)
            try:
                out = fn(*make_args(ins))
            finally:
                _core.body_exit(prev)
            leaves, spec = _flatten(out)
            flat = []
            for x in leaves:
                try:
                    flat.append(_lift(t.trace, x))
                except TypeError:
                    raise TypeError(f"{what} must return arrays or tuples/lists/dicts of them, got "
                                    f"{type(x).__name__}") from None
            if has_effects(t.trace):  # a debug callback in the body: the op holding it is one too
                flat = tie(t.trace, flat)
                body_effect(outer, t.trace)
    finally:
        builder.trace = None  # trace -> builder -> trace: a cycle only the GC would free
    return builder, [x.key for x in ins], flat, spec


def _forwarded(body_ins: Sequence, outer_vals: Sequence[Tracer], body_outs: Sequence[Tracer]):
    """For each body output, the outer value it is when the body returns one of its inputs
    unchanged (None otherwise): body_ins[i] is the body's input for outer_vals[i]."""
    src = {k: v for k, v in zip(body_ins, outer_vals)}
    return [src.get(x.key) for x in body_outs]


def _emit_multi(t, op, args: Sequence[Tracer]) -> list[Tracer]:
    locals_ = t.builder.add_op(op, [ValKey(a._v) for a in args])
    outs = [Tracer(t, t.store.global_of(l), _aval_list[ValKey(t.store.global_of(l)).aval.id])
            for l in locals_]
    mark_op(t, outs)
    return outs


def _checker(what: str, args: Sequence, names: Sequence[str]) -> Callable[[], None]:
    """A check, run when a construct's operands fail to lift, that names the leaf at fault
    (tidu.api.tree.check_leaves): `args` are the user's operands, called `names`."""
    return lambda: check_leaves(what, tuple(args), list(names))


def _lifted(t, leaves: Sequence, check: Callable[[], None]) -> list:
    try:
        return [_lift(t, x) for x in leaves]
    except TypeError:
        check()
        raise


def _arg_names(fn: Callable, n: int) -> list[str]:
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"args[{i}]" for i in range(n)]


def _operand_names(n: int) -> list[str]:
    return [f"operands[{i}]" for i in range(n)]


def _eager(fn: Callable, *args, check: Callable[[], None] | None = None):
    """Called outside any trace: run fn under jit (the construct needs a graph to live in).

    The result goes through jit as its flat list of leaves, so any of this module's pytrees
    comes back (None and empty structures included, which jit's outputs do not take)."""
    spec = []

    def flat(*a):
        leaves, s = _flatten(fn(*a))
        spec.append(s)
        return list(leaves)

    try:
        leaves = jit(flat)(*args)
    except TypeError:
        if check is not None:
            check()
        raise
    return _unflatten(spec[-1], leaves)


def _weak_as(outs: list, body_outs: Sequence[Tracer]) -> None:
    """A loop's results as weakly typed as the body's outputs (a forwarded carry stays as it
    is)."""
    for k, (o, b) in enumerate(zip(outs, body_outs)):
        if b.weak_type and not o.weak_type:
            o.weak_type = True


def _promote_weak_carry(t, init_t: list, outs: Sequence[Tracer]) -> bool:
    """jax's _promote_weak_typed_inputs: a weakly typed initial carry (a Python scalar) whose
    body returns another dtype of the same shape becomes the promotion of the two (0.0 carried
    through a float32 body is float32).  Changes init_t in place; True when one changed."""
    changed = False
    for k, (x, o) in enumerate(zip(init_t, outs)):
        if x.weak_type and o.aval.shape == x.aval.shape and o.aval.dtype != x.aval.dtype:
            init_t[k] = _lift(t, x, result_type(x, o))
            changed = True
    return changed


def _leaf_aval(x):
    return x.aval if isinstance(x, Tracer) else as_aval(np.asarray(x))


# ---- scan ----

def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False,
         unroll: int = 1):
    """``jax.lax.scan``: ``carry, y = f(carry, x)`` over the leading axis of ``xs``.

    Args:
        f: ``(carry, x) -> (carry, y)``; carry a pytree whose shapes and dtypes stay fixed, x a
            slice of xs (None when xs is None), y a pytree (or None).
        init: the initial carry.
        xs: a pytree of arrays with one leading length, or None (then ``length`` is required).
        length: the number of steps when xs is None (must agree with xs otherwise).
        reverse: walk xs and write ys from the last step to the first.
        unroll: accepted for jax compatibility; the loop is never unrolled.

    Returns:
        ``(final carry, ys)`` with ys stacked on a new leading axis of size length.
    """
    del unroll
    outer = _outer_trace()
    check = _checker("td.scan", (init, xs), ("init", "xs"))
    if outer is None:
        i_leaves, i_spec = _flatten(init)
        x_leaves, x_spec = _flatten(xs)
        return _eager(lambda a, b: scan(f, _unflatten(i_spec, a), _unflatten(x_spec, b), length,
                                        reverse), i_leaves, x_leaves, check=check)
    t = outer
    i_leaves, i_spec = _flatten(init)
    x_leaves, x_spec = _flatten(xs)
    init_t = _lifted(t, i_leaves, check)
    mark_weak(init_t, i_leaves)  # a Python scalar carry is weakly typed (as jax's)
    xs_t = _lifted(t, x_leaves, check)
    lengths = {x.shape[0] if x.aval.ndim else None for x in xs_t}
    if None in lengths:
        raise ValueError("scan: every leaf of xs needs a leading axis to scan over, got a scalar")
    if length is not None:
        length = int(length)
        lengths.add(length)
    if not lengths:
        raise ValueError("scan: give xs or length (the number of steps)")
    if len(lengths) > 1:
        raise ValueError(f"scan: xs leaves and length disagree on the number of steps: "
                         f"{sorted(lengths)}")
    (n,) = lengths
    x_avals = [aval(x.shape[1:], x.dtype) for x in xs_t]
    for again in (True, False):
        c_avals = [x.aval for x in init_t]

        def make(ins, k=len(c_avals)):
            return (_unflatten(i_spec, ins[:k]), _unflatten(x_spec, ins[k:]))

        builder, in_keys, flat, spec = _trace_body(
            t, lambda c, x: f(c, x), c_avals + x_avals, make, "the scanned function",
            [x.weak_type for x in init_t] + [x.weak_type for x in xs_t])
        if spec is None or spec[0] not in (tuple, list) or len(spec[1]) != 2:
            raise TypeError("scan: the scanned function must return a pair (carry, y)")
        if not (again and _promote_weak_carry(t, init_t, flat[:len(c_avals)])):
            break
    c_out_spec, y_spec = spec[1]
    n_c = len(c_avals)
    if c_out_spec != i_spec:
        raise TypeError(f"scan: the function returns a carry of structure "
                        f"{_tree_str(c_out_spec)}, but init has {_tree_str(i_spec)}")
    for k, (o, a) in enumerate(zip(flat[:n_c], c_avals)):
        if o.aval is not a:
            raise TypeError(f"scan: carry leaf {k} enters the body as {a} but the body returns "
                            f"{o.aval}; the carry's shape and dtype must stay fixed")
    if not flat:  # no carry and no ys: nothing to compute (jax returns the empty structures)
        return _unflatten(i_spec, []), _unflatten(y_spec, [])
    caps = builder.capture_list
    body = close_body([x.key for x in flat], builder.capture_inputs + in_keys)
    op = Scan(body, n, bool(reverse), len(caps), n_c)
    outs = _emit_multi(t, op, list(caps) + init_t + xs_t)
    # A carry the body returns unchanged is its initial value (jax forwards it too): under vmap an
    # unbatched read-only carry then stays unbatched, and AD sees no dependence on the loop.
    fwd = _forwarded(in_keys[:n_c], init_t, flat[:n_c])
    outs[:n_c] = [o if f is None else f for o, f in zip(outs[:n_c], fwd)]
    _weak_as(outs, flat)
    return _unflatten(i_spec, outs[:n_c]), _unflatten(y_spec, outs[n_c:])


def fori_loop(lower, upper, body_fun: Callable, init_val, *, unroll: int | bool | None = None):
    """``jax.lax.fori_loop``: ``val = body_fun(i, val)`` for i in [lower, upper).

    ``unroll`` (a positive int or a bool) is checked as jax's and, as ``scan``'s, ignored: the
    loop is never unrolled.  As in jax it needs static bounds.

    Static bounds (anything not traced, converted by ``int()`` as jax does: float bounds
    truncate) give a scan (differentiable in both modes); traced bounds give a while_loop
    (forward mode only).  The bounds' dtypes must agree, as in jax: a Python int beside an integer
    array takes its dtype; fori_loop(0, 3.5, ...) is a TypeError."""
    _fori_bounds_dtype(lower, upper)
    static = not isinstance(lower, Tracer) and not isinstance(upper, Tracer)
    if unroll is not None:
        if not isinstance(unroll, (bool, int, np.integer)) or (
                not isinstance(unroll, bool) and unroll < 1):
            raise ValueError(f"fori_loop: unroll must be a positive int or a bool, got {unroll!r}")
        if not static:
            raise ValueError("fori_loop: unroll needs static loop bounds (as in jax); these are "
                             "traced")
    if static:
        try:
            lo, hi = int(lower), int(upper)
        except TypeError as e:  # complex, or not a number at all
            raise TypeError(f"fori_loop: bounds must be integers (or numbers int() takes), "
                            f"got {lower!r} and {upper!r}") from e
        if _outer_trace() is None:  # called eagerly: trace and run it through td.jit
            leaves, spec = _flatten(init_val)
            return _eager(lambda a: fori_loop(lo, hi, body_fun, _unflatten(spec, a)), leaves,
                          check=_checker("td.fori_loop", (init_val,), ("init_val",)))
        # The counter is the scan's xs (an int64 iota), not a carry as in jax: a body that
        # ignores it then reads no integer at all, and a float64 step can take the scalar fast
        # path (docs/evaluator.md); the values are the same.

        n = max(hi - lo, 0)
        counter = iota((n,), "int64") + np.int64(lo) if lo else iota((n,), "int64")
        val, _ = scan(lambda v, i: (body_fun(i, v), None), init_val, counter)
        return val

    def cond_fun(c):
        return c[0] < c[1]

    def body2(c):
        i, u, v = c
        return i + 1, u, body_fun(i, v)

    return while_loop(cond_fun, body2, (lower, upper, init_val))[2]


def _fori_bounds_dtype(lower, upper) -> None:
    """jax.lax.fori_loop's rule: lower and upper of one dtype, except that a Python int (weakly
    typed) beside a signed integer array or scalar takes that one's dtype."""
    def dtype(b):
        return b.aval.dtype if isinstance(b, Tracer) else np.asarray(b).dtype

    dl, du = dtype(lower), dtype(upper)
    if dl == du:
        return
    weak_l, weak_u = type(lower) is int, type(upper) is int
    if kind_of(dl) == kind_of(du) == "i" and weak_l != weak_u:
        return
    raise TypeError(f"fori_loop: lower and upper must have equal types, got {dl} and {du}")


# ---- while_loop ----

def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """``jax.lax.while_loop``: ``while cond_fun(val): val = body_fun(val)``.

    Forward mode (``jvp``, ``jacfwd``) only: reverse mode raises, naming ``fori_loop`` with static
    bounds or ``scan`` as the alternatives (as jax does)."""
    outer = _outer_trace()
    leaves, spec = _flatten(init_val)
    check = _checker("td.while_loop", (init_val,), ("init_val",))
    if outer is None:
        return _eager(lambda a: while_loop(cond_fun, body_fun, _unflatten(spec, a)), leaves,
                      check=check)
    t = outer
    init_t = _lifted(t, leaves, check)
    mark_weak(init_t, leaves)
    make = lambda ins: (_unflatten(spec, ins),)  # noqa: E731
    for again in (True, False):
        avals = [x.aval for x in init_t]
        weak = [x.weak_type for x in init_t]
        bb, b_keys, b_flat, b_spec = _trace_body(t, body_fun, avals, make, "body_fun", weak)
        if not (again and b_spec == spec and _promote_weak_carry(t, init_t, b_flat)):
            break
    cb, c_keys, c_flat, c_spec = _trace_body(t, cond_fun, avals, make, "cond_fun", weak)
    if len(c_flat) != 1 or c_flat[0].aval is not aval((), "bool"):
        got = ", ".join(str(x.aval) for x in c_flat)
        raise TypeError(f"while_loop: cond_fun must return a boolean scalar, got {got}")
    if b_spec != spec:
        raise TypeError(f"while_loop: body_fun returns structure {_tree_str(b_spec)}, but "
                        f"init_val has {_tree_str(spec)}")
    for k, (o, a) in enumerate(zip(b_flat, avals)):
        if o.aval is not a:
            raise TypeError(f"while_loop: carry leaf {k} enters body_fun as {a} but it returns "
                            f"{o.aval}; the carry's shape and dtype must stay fixed")
    if not b_flat:  # an empty carry: the loop has no result (and no effect) to compute
        return _unflatten(spec, [])
    c_caps, b_caps = cb.capture_list, bb.capture_list
    c_body = close_body([c_flat[0].key], cb.capture_inputs + [x.aval for x in b_caps] + c_keys)
    b_body = close_body([x.key for x in b_flat],
                        [x.aval for x in c_caps] + bb.capture_inputs + b_keys)
    op = While(c_body, b_body, len(c_caps), len(b_caps))
    outs = _emit_multi(t, op, list(c_caps) + list(b_caps) + init_t)
    fwd = _forwarded(b_keys, init_t, b_flat)  # read-only carries are their initial values
    outs = [o if f is None else f for o, f in zip(outs, fwd)]
    _weak_as(outs, b_flat)
    return _unflatten(spec, outs)


# ---- cond / switch ----

_NO_OPERAND = object()


def _legacy_operand(operands, operand, name):
    """jax's older single ``operand=`` keyword: the one operand, never with positional ones."""
    if operand is _NO_OPERAND:
        return operands
    if operands:
        raise TypeError(f"{name}: give the operands positionally or as operand=, not both")
    return (operand,)


def switch(index, branches: Sequence[Callable], *operands, operand=_NO_OPERAND):
    """``jax.lax.switch``: ``branches[clamp(index, 0, n-1)](*operands)``; every branch must
    return the same structure of shapes and dtypes. ``operand=`` is jax's older spelling of
    one operand."""
    operands = _legacy_operand(operands, operand, "switch")
    branches = list(branches)
    if not branches:
        raise ValueError("switch: need at least one branch")
    outer = _outer_trace()
    leaves, spec = _flatten(list(operands))
    if outer is None:
        return _eager(lambda i, a: switch(i, branches, *_unflatten(spec, a)), index, leaves,
                      check=_checker("td.switch", operands, _operand_names(len(operands))))
    t = outer

    idx = _lift(t, index)
    if idx.aval.ndim != 0 or kind_of(idx.aval.dtype) not in "iub":
        raise TypeError(f"switch: index must be an integer scalar, got {idx.aval}")
    idx = T.astype(idx, "int32")
    if len(branches) > 1:  # clamped, as jax does
        idx = T.minimum(T.maximum(idx, 0), len(branches) - 1)
    ops_t = _lifted(t, leaves, _checker("td.switch", operands, _operand_names(len(operands))))
    mark_weak(ops_t, leaves)  # a Python scalar operand is weakly typed (as jax's)
    weak = [x.weak_type for x in ops_t]
    avals = [x.aval for x in ops_t]
    make = lambda ins: _unflatten(spec, ins)  # noqa: E731
    traced = [_trace_body(t, br, avals, make, f"branch {i}", weak)
              for i, br in enumerate(branches)]
    out_spec = traced[0][3]
    out_avals = [x.aval for x in traced[0][2]]
    for i, (_, _, flat, s) in enumerate(traced[1:], 1):
        if s != out_spec or [x.aval for x in flat] != out_avals:
            raise TypeError(
                f"switch/cond: branch {i} returns {_tree_str(s)} of "
                f"({', '.join(str(x.aval) for x in flat)}), branch 0 returns "
                f"{_tree_str(out_spec)} of ({', '.join(map(str, out_avals))}); all branches must "
                f"return the same structure, shapes and dtypes")
    if not out_avals:  # the branches return an empty structure: no op to emit
        return _unflatten(out_spec, [])
    caps = [x for b, _, _, _ in traced for x in b.capture_list]
    bodies = []
    for j, (b, keys, flat, _) in enumerate(traced):
        inputs: list = []
        for jj, (b2, _, _, _) in enumerate(traced):
            inputs += b.capture_inputs if jj == j else [x.aval for x in b2.capture_list]
        bodies.append(close_body([x.key for x in flat], inputs + keys))
    op = Cond(tuple(bodies))
    outs = _emit_multi(t, op, [idx] + caps + ops_t)
    # An output every branch returns as the same outer value (an operand or a captured value,
    # unchanged) is that value, whichever branch runs: jax forwards operands the same way, so a
    # vmapped cond keeps an unbatched pass-through unbatched (out_axes=None works).
    fwds = [_forwarded(b.capture_inputs + keys, b.capture_list + ops_t, flat)
            for b, keys, flat, _ in traced]
    for m, f0 in enumerate(fwds[0]):
        if f0 is not None and all(f[m] is not None and f[m]._v == f0._v for f in fwds[1:]):
            outs[m] = f0
        elif all(flat[m].weak_type for _, _, flat, _ in traced):  # weak in every branch: weak
            outs[m] = _as_weak(outs[m])                           # (jax's cond)
    return _unflatten(out_spec, outs)


def cond(pred, true_fun: Callable, false_fun: Callable, *operands, operand=_NO_OPERAND):
    """``jax.lax.cond``: ``true_fun(*operands)`` if pred else ``false_fun(*operands)``
    (``operand=`` as switch's)."""
    operands = _legacy_operand(operands, operand, "cond")
    outer = _outer_trace()
    if outer is None:
        leaves, spec = _flatten(list(operands))
        return _eager(lambda p, a: cond(p, true_fun, false_fun, *_unflatten(spec, a)), pred, leaves,
                      check=_checker("td.cond", operands, _operand_names(len(operands))))

    p = _lift(outer, pred)
    if p.aval.ndim != 0:
        raise TypeError(f"cond: pred must be a scalar, got {p.aval}")
    if kind_of(p.aval.dtype) != "b":
        p = p != 0
    return switch(T.astype(p, "int32"), [false_fun, true_fun], *operands)


# ---- checkpoint ----

def checkpoint(fn: Callable, policy=None, prevent_cse: bool = True, static_argnums=()):
    """``jax.checkpoint`` (alias ``remat``): ``fn`` whose derivatives recompute its intermediates
    from its arguments instead of saving them: a VJP keeps only fn's inputs (and outputs) and
    runs fn's forward part again in its backward part.

    ``policy``: one of ``tidu.checkpoint_policies`` (jax's names) or any callable jax takes.
    tidu applies a policy at its two ends only: ``everything_saveable`` saves everything (fn
    as it is, no recomputation); every other policy recomputes everything, as None does. The
    values are the same; the memory a VJP holds is at most jax's, its work at least jax's."""
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint: policy must be callable (a tidu.checkpoint_policies "
                        f"entry), got {policy!r}")
    if policy is everything_saveable:
        return fn
    if static_argnums:
        raise NotImplementedError("checkpoint: static_argnums is not supported; close over "
                                  "static values instead")
    del prevent_cse

    def wrapped(*args):
        outer = _outer_trace()
        leaves, spec = _flatten(list(args))
        if outer is None:
            return _eager(lambda a: wrapped(*_unflatten(spec, a)), leaves,
                          check=_checker("td.checkpoint", args, _arg_names(fn, len(args))))
        t = outer
        ins_t = _lifted(t, leaves, _checker("td.checkpoint", args, _arg_names(fn, len(args))))
        avals = [x.aval for x in ins_t]
        bld, keys, flat, out_spec = _trace_body(t, fn, avals, lambda ins: _unflatten(spec, ins),
                                                "the checkpointed function")
        if not flat:  # fn returns an empty structure
            return _unflatten(out_spec, [])
        caps = bld.capture_list
        body = close_body([x.key for x in flat], bld.capture_inputs + keys)
        outs = _emit_multi(t, Checkpoint(body), list(caps) + ins_t)
        return _unflatten(out_spec, outs)

    wrapped.__name__ = getattr(fn, "__name__", "checkpointed")
    wrapped.__doc__ = getattr(fn, "__doc__", None)
    return wrapped


remat = checkpoint


# jax.checkpoint_policies' names: saveable-value predicates (prim, *avals, **params) -> bool.
# tidu's checkpoint reads everything_saveable (save all) and treats the rest as "save nothing".

def everything_saveable(*_, **__) -> bool:
    return True


def nothing_saveable(*_, **__) -> bool:
    return False


def _saveable_by_name(*names):
    return nothing_saveable


class checkpoint_policies:  # noqa: N801 - jax's name, a namespace of policies
    """``jax.checkpoint_policies`` (see ``checkpoint``: every policy but ``everything_saveable``
    recomputes everything in tidu)."""

    everything_saveable = staticmethod(everything_saveable)
    nothing_saveable = staticmethod(nothing_saveable)
    dots_saveable = checkpoint_dots = staticmethod(nothing_saveable)
    dots_with_no_batch_dims_saveable = staticmethod(nothing_saveable)
    checkpoint_dots_with_no_batch_dims = staticmethod(nothing_saveable)
    save_only_these_names = save_any_names_but_these = staticmethod(_saveable_by_name)
    save_and_offload_only_these_names = staticmethod(
        lambda *_, **__: nothing_saveable)

    @staticmethod
    def save_from_both_policies(policy_1, policy_2):
        if policy_1 is everything_saveable or policy_2 is everything_saveable:
            return everything_saveable
        return nothing_saveable


def checkpoint_name(x, name: str):
    """``jax.ad_checkpoint.checkpoint_name``: x, named for a policy (tidu's policies read no
    names, so this is the identity)."""
    del name
    return x
