"""The AD transforms with JAX's signatures: grad, value_and_grad, jvp, vjp, linearize, jacfwd,
jacrev, hessian, hvp, and ``transpose`` (a LinearFragment's VJP, or numpy's axis permutation).
Each traces the user function and runs the seven-step pipeline (no separate code path)."""

from __future__ import annotations

import functools
import types
import weakref
from collections.abc import Callable

import numpy as np

from tidu import ad
from tidu._native import _core
from tidu.ad import differentiate
from tidu.ad import transpose as ad_transpose
from tidu.api.jit import describe, jit
from tidu.api.nested import (
    _arg_leaves,
    _argnums,
    _check_inputs,
    _check_outputs,
    _Ctx,
    _Nested,
    _outer_trace,
    _tracer_of,
)
from tidu.api.tree import check_leaves, unflatten
from tidu.api.tree import flatten_args as _flatten_args
from tidu.api.tree_util import PyTreeDef
from tidu.api.vmap import _inline_vmap
from tidu.graph import Fragment, resolve
from tidu.graph.dtypes import kind_of
from tidu.graph.memory import register_cache
from tidu.numpy import core as T
from tidu.numpy.creation import zeros_like as _zeros_like
from tidu.trace.tracer import Tracer

__all__ = ["grad", "hessian", "hvp", "jacfwd", "jacrev", "jvp", "linearize", "transpose",
           "value_and_grad", "vjp"]


def transpose(a, axes=None):
    """``transpose(linear_fragment)``: the AD transpose (VJP) of a LinearFragment;
    ``transpose(traced_value, axes=None)``: numpy's axis permutation."""
    x = a
    if isinstance(x, Fragment):
        raise TypeError("transpose of a graph expects a LinearFragment (from differentiate), "
                        "got a Fragment")
    if isinstance(x, ad.LinearFragment):
        if axes is not None:
            raise TypeError("transpose of a LinearFragment takes no axes")
        return ad.transpose(x)
    return T.transpose(x, axes)


def _inline_grad(trace, fn, args, argnums, has_aux, holomorphic=False):
    nums = _argnums(argnums)
    for i in nums:
        if not -len(args) <= i < len(args):  # jax's TypeError: too few positional arguments
            need = i + 1 if i >= 0 else -i
            raise TypeError(
                f"grad: differentiating with respect to argnums={argnums} needs at least {need} "
                f"positional argument{'s' if need != 1 else ''} to differentiate, but the "
                f"function was called with {len(args)} (argnums {i} out of range)")
    fn, args, argnums = _bind_python_args(fn, args, argnums)
    nums = _argnums(argnums)
    arg_leaves = _arg_leaves(args)
    nest = _Nested(trace, args, "td.grad")
    _check_inputs("grad", holomorphic,
                  [(i, [nest.fresh[l].aval for l in arg_leaves[i]]) for i in nums])
    flat, out_tree, aux, snap = nest.call(fn, has_aux)
    if len(flat) != 1 or flat[0].shape != () or out_tree is not None:
        kind = "complex" if holomorphic else "real"
        got = [str(o.aval) for o in flat]
        if out_tree is not None:  # a tuple/list/dict, even of one scalar (jax's TypeError too)
            what = "the output (the pair's first element) is" if has_aux else "fn returned"
            hint = "" if has_aux else \
                "; to return auxiliary data along with the scalar, use has_aux=True"
            raise TypeError(f"grad requires a {kind} scalar output, got {got}: {what} "
                            f"a container of {len(flat)} value{'s' if len(flat) != 1 else ''}, "
                            f"not a scalar (gradient only defined for scalar-output functions)"
                            f"{hint}")
        raise TypeError(f"grad requires a {kind} scalar output, got {got}: an output of shape "
                        f"{flat[0].shape}, not a scalar (gradient only defined for "
                        f"scalar-output functions)")
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
    _same_structure(_flatten_args(primals)[1], _flatten_args(tangents)[1])
    nest = _Nested(trace, primals, "td.jvp")
    ctx = _Ctx(trace)
    t_leaves = [ctx.lift(t) for t in _flatten_args(tangents)[0]]
    pairs = [(p, t) for p, t in zip(nest.fresh, t_leaves) if kind_of(p.dtype) in "fc"]
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


def _traced_or_compiled(fn: Callable, traced: Callable, what: str) -> Callable:
    """A transform of fn (`what`: its name, for errors): a jit of `traced` with concrete values
    (Python control flow on them works, under guards), which jit inlines when called inside a
    trace."""
    traced._own_trace = True
    describe(traced, what, fn)
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

    return _traced_or_compiled(fn, traced, "value_and_grad")


def grad(fn: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False) -> Callable:
    """Like jax.grad: the gradient of a real scalar function wrt `argnums` (of a complex one with
    ``holomorphic=True``).  Outside jit, fn may use Python control flow on values."""
    def traced(*args, **kwargs):  # keyword arguments are not differentiated (as in jax)
        _, g, aux = _inline_grad(_outer_trace(args, kwargs), _bind_kw(fn, kwargs), args,
                                 argnums, has_aux, holomorphic)
        return (g, aux) if has_aux else g

    return _traced_or_compiled(fn, traced, "grad")


# Top-level jvp/vjp/hvp calls go through a jit of the inline (traced) path, kept per function
# here, so each (function, shapes/dtypes) is traced and compiled once.  Kept weakly: the jits go
# when the function does (their traced functions reach it through a weak reference, not
# holding it).  A function that cannot be weakly referenced or hashed is kept strongly, at most
# _TRANSFORMS_MAX of them, the least recently used going first.
_TRANSFORMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # owner -> {key: jit}
_STRONG: "dict[tuple, Callable]" = {}
_TRANSFORMS_MAX = 512


def _clear_transforms() -> None:
    _TRANSFORMS.clear()
    _STRONG.clear()


register_cache("transforms", _clear_transforms,
               lambda: {"entries": sum(len(t) for t in list(_TRANSFORMS.values())) + len(_STRONG),
                        "functions": len(_TRANSFORMS) + len(_STRONG)})


def _weakly(fn: Callable):
    """(object to key on weakly, the rest of its key, a function calling fn without holding it),
    or None when fn cannot be referenced weakly."""
    try:
        if isinstance(fn, types.MethodType):  # made afresh per attribute access: key on its parts
            ref, owner, part = weakref.WeakMethod(fn), fn.__self__, fn.__func__
        else:
            ref, owner, part = weakref.ref(fn), fn, None
        hash(owner)
    except TypeError:
        return None

    def call(*args, **kwargs):
        return ref()(*args, **kwargs)

    return owner, part, call


def _make_jit(traced: Callable, own: bool, what: str, fn: Callable, names) -> Callable:
    if own:
        traced = functools.partial(traced)  # (a lambda's attributes are its own; user fns not)
        traced._own_trace = True
        describe(traced, what, fn, names)  # errors name td.<what>(fn) and these arguments
    return jit(traced, _concrete=True)


def _jitted(fn: Callable, key: tuple, make: Callable[[Callable], Callable],
            own: bool = True, names: tuple | None = None) -> Callable:
    """The jit of make(fn) (a transform's traced function `key[0]` of fn, taking arguments
    called `names`; own=False: the user's function), made once per (fn, key)."""
    weak = _weakly(fn)
    if weak is not None:
        owner, part, call = weak
        table = _TRANSFORMS.get(owner)
        if table is None:
            table = _TRANSFORMS[owner] = {}
        key = (part, *key)
        f = table.get(key)
        if f is None:
            f = table[key] = _make_jit(make(call), own, key[1], fn, names)
        return f
    key = (fn, *key)
    f = _STRONG.pop(key, None)
    if f is None:
        if len(_STRONG) >= _TRANSFORMS_MAX:
            del _STRONG[next(iter(_STRONG))]
        f = _make_jit(make(fn), own, key[1], fn, names)
    _STRONG[key] = f  # most recently used last
    return f


def _like_primals(primals, tangents):
    """Tangent leaves as arrays of their primal's dtype (a Python float for a float32 primal)."""
    p_leaves, p_tree = _flatten_args(primals)
    t_leaves, t_tree = _flatten_args(tangents)
    _same_structure(p_tree, t_tree)
    out = []
    for p, t in zip(p_leaves, t_leaves):
        dt = np.asarray(p).dtype if not hasattr(p, "dtype") else p.dtype
        out.append(np.asarray(t, dt) if kind_of(np.dtype(dt)) in "fc" else t)
    return unflatten(t_tree, out)


def _same_structure(p_tree, t_tree) -> None:
    """jax's check of jvp's arguments: tangents structured exactly as primals."""
    if p_tree != t_tree:
        raise TypeError(f"jvp: primal and tangent arguments must have the same tree structure; "
                        f"primals have tree structure {PyTreeDef(p_tree)} whereas tangents have "
                        f"tree structure {PyTreeDef(t_tree)}")


def jvp(fn: Callable, primals, tangents, has_aux: bool = False):
    """Like jax.jvp: ``(fn(*primals), J·tangents)``, tangents structured like primals.  Compiled
    once
    per function and shapes/dtypes."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    trace = _outer_trace(primals, tangents)
    if trace is not None:
        return _inline_jvp(trace, fn, primals, tangents, has_aux)
    f = _jitted(fn, ("jvp", has_aux),
                lambda fn_: lambda p, t: jvp(fn_, p, t, has_aux=has_aux),
                names=("primals", "tangents"))
    return f(primals, _like_primals(primals, tangents))


def linearize(fn: Callable, *primals):
    """Like jax.linearize: ``(fn(*primals), f_jvp)`` where ``f_jvp(*tangents) = J·tangents``."""
    leaves, tree = _flatten_args(primals)  # primals are pytrees: zeros leaf by leaf
    zeros = unflatten(tree, [_zeros_like(p) if isinstance(p, Tracer)
                             else np.zeros_like(np.asarray(p)) for p in leaves])
    out = jvp(fn, primals, zeros)[0]
    return out, lambda *tangents: jvp(fn, primals, tangents)[1]


def _check_vjp_primals(primals, dtypes=None):
    """A TypeError naming the first argument with an integer or bool leaf: tidu never
    differentiates those (jax's vjp gives them float0 cotangents; docs/frontend.md)."""
    if dtypes is None:  # a leaf that is no array at all: named with its path first
        check_leaves("td.vjp", primals, [f"primals[{i}]" for i in range(len(primals))])
    k = 0
    for i, a in enumerate(primals):
        leaves = _flatten_args(a)[0]
        for leaf in leaves:
            dt = np.dtype(dtypes[k]) if dtypes is not None else \
                np.dtype(leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype)
            k += 1
            if kind_of(dt) not in "fc":
                raise TypeError(
                    f"vjp: cannot differentiate with respect to argument {i} (primals[{i}]), of "
                    f"dtype {dt}: only float and complex inputs are differentiable (tidu never "
                    f"differentiates integer or bool arguments, where jax gives float0 "
                    f"cotangents); pass it as a float, or close over it in fn")


def _vjp_parts(trace, fn, primals, has_aux=False, holomorphic=False):
    """fn traced into the current trace and linearized: (nest, out, out tree, aux, back) with
    back(ct) the cotangents of the primals' leaves, not yet bound (nest.bind), transposed inside
    the same trace (holomorphic: conjugated, giving ct·f'(z) as jax's)."""
    nest = _Nested(trace, primals, "td.vjp")
    _check_vjp_primals(primals, [p.dtype for p in nest.fresh])
    flat, out_tree, aux, snap = nest.call(fn, has_aux)
    lin = differentiate(resolve([snap]), [o.key for o in flat], [p.key for p in nest.fresh])
    trace.builder.parents.append(lin.fragment)

    def back(ct):
        ctx = _Ctx(trace)
        ct_leaves, ct_tree = _flatten_args(ct)
        if ct_tree != out_tree:
            raise ValueError(f"vjp: the cotangent's tree structure {PyTreeDef(ct_tree)} does not "
                             f"match the structure of the primal output {PyTreeDef(out_tree)}")
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
    _check_vjp_primals(primals)  # now, not when vjp_fn is first called
    fwd = _jitted(fn, ("fwd",), lambda fn_: fn_, own=False)
    res = fwd(*primals)
    out, aux = res if has_aux else (res, None)

    out_leaves = _flatten_args(out)[0]

    def vjp_fn(ct):
        # cotangents as arrays of their output's dtype (a Python float for a float32 output)
        leaves, tree = _flatten_args(ct)
        if len(leaves) == len(out_leaves):  # (a Tracer, inside a trace, stays as it is)
            leaves = [c if hasattr(c, "_t") else np.asarray(c, np.asarray(o).dtype)
                      for c, o in zip(leaves, out_leaves)]
            ct = unflatten(tree, leaves)
        # looked up per call: vjp_fn holds fn, the cache holds it only weakly
        bwd = _jitted(fn, ("vjp", has_aux),
                      lambda fn_: lambda p, c: _inline_vjp(_outer_trace(p), fn_, p, has_aux)[1](c),
                      names=("primals", "cotangent"))
        return bwd(primals, ct)

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _basis_stack(ctx, av):
    """The standard basis of av's space, stacked: shape (av.size,) + av.shape, built from two
    Iotas (no n x n constant in the program)."""
    n = av.size
    eye = T.astype(T.iota((n, n), "int32", 0) == T.iota((n, n), "int32", 1), av.dtype)
    return T.reshape(eye, (n,) + av.shape)


def _jac_fn(fn, argnums, has_aux, forward: bool, holomorphic: bool = False):
    """The traced Jacobian: the JVP (forward) or VJP (reverse) of fn, vmapped over the basis of
    each differentiated input leaf (forward) or of each output leaf (reverse), in one program
    whose size does not grow with the number of elements.  As in jax, arguments and outputs may
    be pytrees: the Jacobian is shaped like the output, each of its leaves shaped like the
    differentiated argument (a tuple of them for a tuple of argnums), with leaves of shape
    out_leaf.shape + in_leaf.shape.  Complex arguments (jacfwd) and outputs (jacrev) need
    holomorphic=True, as in jax: without it the two modes would silently disagree (J vs its
    conjugate)."""
    what = "jacfwd" if forward else "jacrev"

    def jac(*args, **kwargs):  # keyword arguments are not differentiated (as in jax)
        fn_kw = _bind_kw(fn, kwargs)
        trace = _outer_trace(args, kwargs)
        ctx = _Ctx(trace)
        n = len(args)
        for i in _argnums(argnums):
            if not -n <= i < n:
                raise ValueError(f"argnums {i} out of range for {n} arguments")
        nums = [i % n for i in _argnums(argnums)]
        # each differentiated argument is a pytree: its leaves lifted one by one (lifting the
        # tuple/dict itself would ask a traced leaf for a concrete value)
        trees, x_args = [], []
        for i in nums:
            leaves, tree = _flatten_args(args[i])
            try:
                lifted = [ctx.lift(leaf) for leaf in leaves]
            except TypeError:
                check_leaves(f"td.{what}", args)
                raise
            trees.append((tree, len(lifted)))
            x_args.append(unflatten(tree, lifted))
            _check_inputs(what, holomorphic, [(i, [x.aval for x in lifted])],
                          allow_complex=not forward or holomorphic)

        def f_x(*xv):
            a = list(args)
            for i, xi in zip(nums, xv):
                a[i] = xi
            return fn_kw(*a)

        # fn traced once; the JVP (forward) or VJP (reverse) derived once and mapped by vmap
        # over the basis of each input leaf (forward) or of each output leaf (reverse): the
        # program holds one batched derivative per leaf, whatever the number of elements.

        blocks = []  # per output leaf: per input leaf (of all argnums, in order), the block
        if forward:
            nest = _Nested(trace, tuple(x_args))
            out_leaves, out_tree, aux, snap = nest.call(f_x, has_aux)
            if holomorphic:
                _check_outputs(what, True, [o.aval for o in out_leaves])
            view = resolve([snap])
            blocks = [[] for _ in out_leaves]
            for x in nest.fresh:
                def push(t, x=x):
                    lin = differentiate(view, [o.key for o in out_leaves], [x.key],
                                        tangents=[t.key])
                    trace.builder.parents.append(lin.fragment)
                    return [_tracer_of(trace, k, o)
                            for k, o in zip(lin.tangent_outputs, out_leaves)]
                cols = _inline_vmap(trace, push, (_basis_stack(ctx, x.aval),), {}, 0, -1, None)
                for m, (c, o) in enumerate(zip(cols, out_leaves)):
                    blocks[m].append(T.reshape(c, o.shape + x.shape))
        else:
            nest, out_leaves, out_tree, aux, back = _vjp_parts(trace, f_x, tuple(x_args),
                                                               has_aux, holomorphic)
            _check_outputs(what, holomorphic, [o.aval for o in out_leaves])
            for m, o in enumerate(out_leaves):
                def pull(e, m=m):
                    ct = [e if q == m else np.zeros(p.shape, p.dtype)
                          for q, p in enumerate(out_leaves)]
                    return list(back(unflatten(out_tree, ct)))
                # the cotangent of each input leaf, stacked over the basis of output leaf m; a
                # one-element output (a scalar loss, hessian's inner jacrev) is one plain VJP
                if o.aval.size == 1:
                    row = pull(np.ones(o.shape, o.dtype))
                else:
                    row = _inline_vmap(trace, pull, (_basis_stack(ctx, o.aval),), {}, 0, 0, None)
                blocks.append([T.reshape(r, o.shape + x.shape)
                               for r, x in zip(row, nest.fresh)])
        it = iter(nest.bind([b for row in blocks for b in row]))
        per_out = []
        for _ in out_leaves:  # each output leaf's Jacobian, structured like the arguments
            per_arg = [unflatten(tree, [next(it) for _ in range(k)]) for tree, k in trees]
            per_out.append(per_arg[0] if isinstance(argnums, int) else tuple(per_arg))
        result = unflatten(out_tree, per_out)
        return (result, aux) if has_aux else result

    return jac


def jacfwd(fn: Callable, argnums=0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """Like jax.jacfwd: the Jacobian by forward mode, the JVP vmapped over the basis of the
    differentiated arguments (each a single array; outputs any tuple/list/dict of arrays), in
    one program compiled once per shapes/dtypes.  Shape: output.shape + argument.shape; with a
    tuple of argnums, a tuple of those per output.  Arguments must be real, or complex with
    ``holomorphic=True`` (then outputs must be complex too)."""
    return _traced_or_compiled(fn, _jac_fn(fn, argnums, has_aux, True, holomorphic), "jacfwd")


def jacrev(fn: Callable, argnums=0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """Like jax.jacrev: the Jacobian by reverse mode, the VJP vmapped over the basis of each
    output, in one program compiled once per shapes/dtypes.  Same arguments and result as
    ``jacfwd``; outputs
    must be real, or complex with ``holomorphic=True`` (then arguments must be complex too)."""
    return _traced_or_compiled(fn, _jac_fn(fn, argnums, has_aux, False, holomorphic), "jacrev")


def hessian(fn: Callable, argnums=0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable:
    """Like jax.hessian: forward over reverse (jacfwd of jacrev), one program compiled once per
    shapes/dtypes.  As jax's, fn's arguments and output may be pytrees (real outputs, complex
    with holomorphic=True): the result is the Jacobian's structure nested twice, leaves of shape
    out.shape + in.shape + in.shape."""
    g = jacrev(fn, argnums, has_aux, holomorphic)
    return _traced_or_compiled(fn, _jac_fn(g, argnums, has_aux, True, holomorphic), "hessian")


def _hv(fn: Callable, argnums: int) -> Callable:
    """(p, t) -> H(p)·t of fn wrt argument argnums (forward over reverse), traced inline."""
    def hv(p, t):
        def g_i(xi):
            a = list(p)
            a[argnums] = xi
            return grad(fn, argnums)(*a)
        return jvp(g_i, (p[argnums],), (t,))[1]
    return hv


def hvp(fn: Callable, primals, tangents, argnums: int = 0):
    """Hessian-vector product H(primals)·v of a real scalar fn with respect to argument
    `argnums` (forward over reverse), v = tangents[argnums] (or `tangents` itself when it is a
    single array).  Compiled once per function and shapes/dtypes."""
    primals = tuple(primals)
    v = tangents[argnums] if isinstance(tangents, (tuple, list)) else tangents

    if _outer_trace(primals, v) is not None:
        return _hv(fn, argnums)(primals, v)
    f = _jitted(fn, ("hvp", argnums), lambda fn_: _hv(fn_, argnums), names=("primals", "tangents"))
    return f(primals, _like_primals((primals[argnums],), (v,))[0])
