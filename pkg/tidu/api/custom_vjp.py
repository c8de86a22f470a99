"""``td.custom_vjp``: a function with a custom VJP rule (jax's API, ``symbolic_zeros`` too).

The primal op and the argument handling are shared with ``td.custom_jvp`` (``tidu.api.custom``);
this module holds the rule object the op's linearization and transpose ask for the traced fwd and
bwd rules (``tidu.ops.control_flow.custom``, ``CustomVJP`` / ``CustomVJPLin``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tidu.api.control_flow import _flatten, _unflatten
from tidu.api.custom import _Custom, _Rule, _trace_rule, _tree
from tidu.api.custom_derivatives import CustomVJPPrimal, SymbolicZero
from tidu.numpy import core as T
from tidu.ops.control_flow import CustomVJP
from tidu.ops.core import is_differentiable

__all__ = ["custom_vjp"]


def _no_primal_records(x, what: str) -> None:
    for leaf in _flatten(x)[0]:
        if isinstance(leaf, CustomVJPPrimal):
            raise TypeError(f"{what} returned a CustomVJPPrimal (the record its argument is passed "
                            f"as with symbolic_zeros=True); return its .value instead")


class _VJPRule(_Rule):
    """The traced fwd and bwd rules of one custom_vjp function, per operand abstract values
    (and, with ``symbolic_zeros``, per set of perturbed operands ``act`` and of output
    cotangents that are zero)."""

    kind = "custom_vjp"

    def _fwd_key(self, avals, act):
        return ("fwd", avals, act if self.symbolic_zeros else None)

    def fwd_body(self, avals, act=None):
        """(Body, caps, n_out) of fwd at avals; act: the indices of the perturbed operands."""
        key = self._fwd_key(avals, act)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._trace_fwd(avals, key[2])
        return hit[:3]

    def _trace_fwd(self, avals, act):
        fwd = self.fn.fwd
        what = f"Custom VJP fwd rule {getattr(fwd, '__name__', '')} for function {self.name}"
        res_spec = []

        def run(ins):
            if act is not None:
                ins = [CustomVJPPrimal(x, i in act) for i, x in enumerate(ins)]
            return fwd(*self.full_args(self.args(ins)))

        def check(out, leaf):
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(f"{what} must produce a pair (list or tuple of length two) where "
                                f"the first element represents the primal output (equal to the "
                                f"output of the custom_vjp-decorated function {self.name}) and "
                                f"the second element represents residuals (i.e. values stored "
                                f"from the forward pass for use on the backward pass), but got "
                                f"{out}.")
            y, res = out
            _no_primal_records(out, what)
            self.check_outs(y, f"Custom VJP fwd rule of {self.name}")
            ys = [leaf(x, av) for x, av in zip(_flatten(y)[0], self.out_avals)]
            for x, want in zip(ys, self.out_avals):
                if x.aval is not want:
                    raise TypeError(f"Custom VJP fwd rule of {self.name} must produce primal "
                                    f"outputs of the function's shapes and dtypes: expected "
                                    f"{want}, got {x.aval}")
            r_leaves, spec = _flatten(res)
            res_spec.append(spec)
            return ys + [leaf(x, None) for x in r_leaves]

        body, caps = _trace_rule(run, list(avals), f"the fwd rule of {self.name}", check)
        return body, caps, len(self.out_avals), res_spec[0]

    def bwd_body(self, avals, ct_avals, act=None, zeros=None):
        """(Body, caps) of bwd: inputs caps + fwd's residuals (at avals, act) + the output
        cotangents (ct_avals; with symbolic_zeros only those not in ``zeros``, a mask over
        ct_avals, which bwd sees as SymbolicZero)."""
        sz = self.symbolic_zeros
        key = ("bwd", avals, act, zeros) if sz else ("bwd", avals)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._trace_bwd(avals, ct_avals, self._fwd_key(avals, act),
                                                     zeros if sz else None)
        return hit

    def _trace_bwd(self, avals, ct_avals, fwd_key, zeros):
        fbody, _, n_out, res_spec = self._cache[fwd_key]
        res_avals = fbody.out_avals[n_out:]
        bwd = self.fn.bwd
        n_res = len(res_avals)
        diff = _unflatten(self.in_spec, list(avals))  # the args' structure (avals as leaves)
        n_args = len(diff)
        sz = self.symbolic_zeros
        zeros = zeros or (False,) * len(ct_avals)
        live_cts = [av for av, z in zip(ct_avals, zeros) if not z]

        def run(ins):
            res = _unflatten(res_spec, ins[:n_res])
            cts, zs = iter(ins[n_res:]), iter(zeros)
            g = []
            for av in self.out_avals:
                if is_differentiable(av.dtype) and not next(zs):
                    g.append(next(cts))
                else:  # no cotangent: an integer output, or a zero one (symbolic_zeros)
                    g.append(SymbolicZero(av) if sz else np.zeros(av.shape, av.dtype))
            return bwd(*self.static(), res, _unflatten(self.out_spec, g))

        def check(out, leaf):
            if not isinstance(out, (tuple, list)) or len(out) != n_args:
                got = _tree(out) if isinstance(out, (tuple, list)) else type(out).__name__
                raise TypeError(
                    f"Custom VJP bwd rule must produce an output with the same container "
                    f"(pytree) structure as the args tuple of the primal function, and in "
                    f"particular must produce a tuple of length equal to the number of "
                    f"arguments to the primal function, but got bwd output structure {got} "
                    f"for primal input structure {_tree(tuple(diff))}.")
            flat = []
            for k, (o, a) in enumerate(zip(out, diff)):
                a_leaves = _flatten(a)[0]
                if o is None:
                    flat += [leaf(None, av) for av in a_leaves]
                    continue
                if _tree(o) != _tree(a):
                    raise TypeError(f"Custom VJP bwd rule must produce an output with the same "
                                    f"container (pytree) structure as the args tuple of the "
                                    f"primal function: at output[{k}] got {_tree(o)}, the "
                                    f"argument is {_tree(a)}")
                for x, av in zip(_flatten(o)[0], a_leaves):
                    if isinstance(x, SymbolicZero) and (x.shape, x.dtype) != (av.shape, av.dtype):
                        raise ValueError(
                            f"Custom VJP bwd rule produced a SymbolicZero with a shape/dtype "
                            f"that does not match the corresponding input tangent shape/dtype: "
                            f"at output[{k}] the SymbolicZero had shape/dtype {x.aval} while "
                            f"the corresponding input had shape/dtype {av}. Consider just "
                            f"returning a None here instead of a SymbolicZero object.")
                    v = leaf(x, av)
                    if v.aval.shape != av.shape:
                        raise ValueError(
                            f"Custom VJP bwd rule must produce an output with the same type as "
                            f"the args tuple of the primal function, but at output[{k}] the bwd "
                            f"rule produced an output of type {v.aval} corresponding to an input "
                            f"of type {av}, so the shapes do not match")
                    flat.append(T.astype(v, av.dtype) if v.aval.dtype != av.dtype else v)
            return flat

        return _trace_rule(run, list(res_avals) + live_cts, f"the bwd rule of {self.name}", check)


class custom_vjp(_Custom):
    """``jax.custom_vjp``: a function with a custom VJP rule.

    Decorate ``f`` and give the rule with ``f.defvjp(fwd, bwd)``: ``fwd(*args)`` returns
    ``(out, residuals)`` and ``bwd(residuals, g)`` (``bwd(*nondiff, residuals, g)`` with
    ``nondiff_argnums``) returns one cotangent per differentiated argument (a tuple; None for a
    zero).  ``grad``/``vjp`` run fwd and bwd; forward mode (``jvp``, ``jacfwd``) raises
    TypeError, as jax does.  Both rules are traced once per argument shapes, when first needed.

    Args:
        fun: the primal function (pytrees of arrays in and out).
        nondiff_argnums: positions of static arguments passed to bwd first and given no
            cotangent.
    """

    op = CustomVJP
    rule_cls = _VJPRule

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = self.bwd = None
        self.symbolic_zeros = False

    def _rule_fns(self):
        return (self.fwd, self.bwd)

    def _check_defined(self):
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {self.__name__} using "
                                 f"defvjp.")

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False) -> None:
        """Set the rules: ``fwd(*args) -> (out, residuals)``, ``bwd(residuals, g) -> cts``.

        With ``symbolic_zeros`` (as jax): fwd receives each leaf of its (differentiated)
        arguments as a ``td.custom_derivatives.CustomVJPPrimal`` (``.value``, and
        ``.perturbed``: whether the leaf is differentiated), and bwd receives a
        ``SymbolicZero`` for each output cotangent that is zero (an output not used by what is
        differentiated, or of an integer dtype).  Each pattern traces the rules once."""
        self.fwd, self.bwd = fwd, bwd
        self.symbolic_zeros = bool(symbolic_zeros)
