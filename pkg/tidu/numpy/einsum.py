"""``td.einsum`` and ``td.einsum_path`` (as ``jax.numpy``'s) and the contractions written with them
or
with DotGeneral: ``tensordot, inner, vdot, outer, kron, trace, cross``.

An einsum is lowered to tidu's tier-1 primitives -- DotGeneral for every pairwise contraction,
Transpose, Reshape, ReduceSum, and Slice for diagonals (repeated indices) -- in the order of a
contraction path.  The path comes from ``opt_einsum`` when it is installed (the library jax uses;
``optimize="auto"`` by default, as jax), from an internal greedy search otherwise.  For networks of
many operands the order is the whole cost: ``einsum_path`` reports it and its flop count.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from tidu import ops as P
from tidu.numpy.core import no_out
from tidu.trace.tracer import _as_weak, _compare, _is_weak, _lift, _trace_of, result_type
from tidu.trace.tracer import _emit as emit

__all__ = ["PathInfo", "einsum", "einsum_path"]


# ---- parsing ----

def _parse(subscripts, operands) -> tuple[list[list[Any]], list[Any], list]:
    """(index lists per operand, output index list, operands) with '...' expanded; indices are
    one-character strings or, in the sublist form, ints (both hashable labels)."""
    if isinstance(subscripts, str):
        return (*_parse_str(subscripts, [np.ndim(o) if not hasattr(o, "ndim") else o.ndim
                                          for o in operands]), list(operands))
    # interleaved form: op0, sublist0, op1, sublist1, ..., [output sublist]
    args = [subscripts, *operands]
    ops, subs = args[0::2], args[1::2]
    out = None
    if len(ops) > len(subs):  # an odd count: the last is the output sublist
        out = ops.pop()
        if not isinstance(out, (list, tuple)):
            raise ValueError("einsum: the interleaved form is einsum(x, [i, j], y, [j, k], "
                             "[i, k])")
    ins = [_expand_list(list(s), _ndim(o), k) for k, (o, s) in enumerate(zip(ops, subs))]
    n_ell = max([len(e) for e in _ellipses(ins)] or [0])
    if out is None:
        out = _implicit_output(ins, n_ell)
    else:
        out = _expand_output(list(out), n_ell)
    return ins, out, ops


def _ndim(o):
    return o.ndim if hasattr(o, "ndim") else np.ndim(o)


_ELL = "…"  # prefix of the labels an ellipsis stands for


def _ellipses(ins):
    return [[i for i in idx if isinstance(i, tuple)] for idx in ins]


def _expand_list(sub, ndim, k):
    """An index list with Ellipsis replaced by labels (_ELL, j) for the trailing-aligned axes."""
    if sub.count(Ellipsis) > 1:
        raise ValueError("einsum: more than one ellipsis in an operand")
    if Ellipsis not in sub:
        if k is not None and len(sub) != ndim:
            raise ValueError(f"einsum: operand {k} has {ndim} axes but its subscripts name "
                             f"{len(sub)}")
        return sub
    at = sub.index(Ellipsis)
    n = ndim - (len(sub) - 1)
    if n < 0:
        raise ValueError(f"einsum: operand {k} has {ndim} axes, fewer than its subscripts name")
    return sub[:at] + [(_ELL, n - 1 - j) for j in range(n)] + sub[at + 1:]


def _expand_output(sub, n_ell):
    return _expand_list(sub, n_ell + len(sub) - 1, None) if Ellipsis in sub else sub


def _implicit_output(ins, n_ell):
    counts: dict = {}
    for idx in ins:
        for i in idx:
            if not isinstance(i, tuple):
                counts[i] = counts.get(i, 0) + 1
    named = sorted((i for i, c in counts.items() if c == 1), key=lambda i: (str(type(i)), i))
    return [(_ELL, n_ell - 1 - j) for j in range(n_ell)] + named


def _parse_str(subscripts: str, ndims: list[int]):
    s = subscripts.replace(" ", "")
    if "->" in s:
        lhs, rhs = s.split("->")
        if "->" in rhs:
            raise ValueError(f"einsum: more than one '->' in {subscripts!r}")
    else:
        lhs, rhs = s, None
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise ValueError(f"einsum: {len(terms)} operand subscripts in {subscripts!r} but "
                         f"{len(ndims)} operands")
    ins = [_expand_list(_chars(t), nd, k) for k, (t, nd) in enumerate(zip(terms, ndims))]
    n_ell = max([len(e) for e in _ellipses(ins)] or [0])
    if rhs is None:
        out = _implicit_output(ins, n_ell)
    else:
        out = _expand_output(_chars(rhs), n_ell)  # no '...': those axes are summed
    seen = {i for idx in ins for i in idx}
    for i in out:
        if i not in seen:
            raise ValueError(f"einsum: output subscript {i!r} does not appear in an operand")
    if len(set(out)) != len(out):
        raise ValueError(f"einsum: output subscripts {rhs!r} repeat an index")
    return ins, out


def _chars(term: str) -> list:
    out, k = [], 0
    while k < len(term):
        if term.startswith("...", k):
            out.append(Ellipsis)
            k += 3
            continue
        c = term[k]
        if c in ".->,":
            raise ValueError(f"einsum: invalid subscript character {c!r} in {term!r}")
        out.append(c)
        k += 1
    return out


# ---- sizes ----

def _sizes(ins, shapes):
    """index -> size; ellipsis axes broadcast (size 1 against n), named ones must agree."""
    size: dict = {}
    for k, (idx, shape) in enumerate(zip(ins, shapes)):
        for i, d in zip(idx, shape):
            d = int(d)
            have = size.get(i)
            if have is None or have == 1 and isinstance(i, tuple):
                size[i] = d
            elif d != have and not (d == 1 and isinstance(i, tuple)):
                raise ValueError(f"einsum: index {_label(i)!r} has size {have} and {d} "
                                 f"(operand {k}, shape {tuple(shape)})")
    return size


def _label(i):
    return "..." if isinstance(i, tuple) else i


# ---- paths ----

class PathInfo:
    """What ``einsum_path`` reports when opt_einsum is absent: the path, its flop count
    (``opt_cost``, counted as opt_einsum does), the naive cost and the largest intermediate."""

    def __init__(self, path, opt_cost, naive_cost, largest, eq):
        self.path, self.opt_cost, self.naive_cost = path, opt_cost, naive_cost
        self.largest_intermediate, self.eq = largest, eq
        self.speedup = naive_cost / max(opt_cost, 1)

    def __repr__(self):
        return (f"  Complete contraction:  {self.eq}\n"
                f"  Naive FLOP count:  {self.naive_cost:.4g}\n"
                f"  Optimized FLOP count:  {self.opt_cost:.4g}\n"
                f"  Theoretical speedup:  {self.speedup:.4g}\n"
                f"  Largest intermediate:  {self.largest_intermediate:.4g} elements\n"
                f"  Path: {self.path}")


def _flops(indices, inner: bool, n_terms: int, size) -> int:
    """opt_einsum's flop count of one contraction over `indices`."""
    return math.prod(size[i] for i in indices) * (max(1, n_terms - 1) + (1 if inner else 0))


def _greedy(ins, out, size):
    """Greedy pairwise order: repeatedly the pair whose result is smallest relative to its
    operands (opt_einsum's greedy heuristic), pairs sharing an index first."""
    sets = [frozenset(i) for i in ins]
    out_set = frozenset(out)
    path = []
    while len(sets) > 1:
        best = None
        for a, b in itertools.combinations(range(len(sets)), 2):
            shared = sets[a] & sets[b]
            keep = out_set.union(*[s for k, s in enumerate(sets) if k not in (a, b)])
            res = (sets[a] | sets[b]) & keep
            cost = (math.prod(size[i] for i in res) - math.prod(size[i] for i in sets[a]) -
                    math.prod(size[i] for i in sets[b]))
            key = (not shared, cost, a, b)
            if best is None or key < best[0]:
                best = (key, a, b, res)
        _, a, b, res = best
        path.append((a, b))
        sets = [s for k, s in enumerate(sets) if k not in (a, b)] + [res]
    return path or ([(0,)] if sets else [])


def _path_cost(ins, out, size, path):
    """(flops, largest intermediate) of a path, counted as opt_einsum counts."""
    sets = [frozenset(i) for i in ins]
    total, largest = 0, 0
    for step in path:
        step = tuple(sorted(step, reverse=True))
        taken = [sets.pop(k) for k in step]
        keep = frozenset(out).union(*sets)
        every = frozenset().union(*taken)
        res = every & keep
        inner = bool(every - res)
        total += _flops(every, inner, len(taken), size)
        largest = max(largest, math.prod(size[i] for i in res))
        sets.append(res)
    return total, largest


def _symbols(ins, out):
    """The einsum string of the expanded index lists, one symbol per label (opt_einsum's)."""
    labels: dict = {}
    try:
        from opt_einsum import get_symbol  # noqa: PLC0415 - optional dependency, imported on first use
    except ImportError:  # pragma: no cover - the fallback only needs a readable string

        def get_symbol(k):
            return (
                chr(0x4E00 + k)
                if k >= 52
                else "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[k]
            )

    def sym(i):
        if i not in labels:
            labels[i] = get_symbol(len(labels))
        return labels[i]

    return (
        ",".join("".join(sym(i) for i in idx) for idx in ins) + "->" + "".join(sym(i) for i in out)
    )


def _normalize_optimize(optimize):
    if optimize is True:
        return "greedy"
    if optimize is False or optimize is None:
        return False
    if isinstance(optimize, (list, tuple)):
        path = [tuple(int(k) for k in step) for step in optimize if step != "einsum_path"]
        return path
    return str(optimize)


def _find_path(ins, out, shapes, size, optimize):
    """(path, info): the contraction order for `optimize` and what it costs."""
    n = len(ins)
    opt = _normalize_optimize(optimize)
    eq = _symbols(ins, out)
    if isinstance(opt, list):
        path = opt
    elif n <= 1:
        path = [(0,)] if n else []
    elif opt is False:
        path = [(0, 1)] * (n - 1)
    else:
        try:
            import opt_einsum  # noqa: PLC0415 - optional dependency, imported on first use
        except ImportError:
            opt_einsum = None
        if opt_einsum is not None:
            bshapes = [tuple(size[i] for i in idx) for idx in ins]  # broadcast ellipsis sizes
            path, info = opt_einsum.contract_path(eq, *bshapes, shapes=True, optimize=opt)
            return [tuple(s) for s in path], info
        path = _greedy(ins, out, size)
    cost, largest = _path_cost(ins, out, size, path)
    naive = (
        _flops(
            frozenset().union(*[frozenset(i) for i in ins]),
            bool(frozenset().union(*[frozenset(i) for i in ins]) - frozenset(out)),
            max(n, 1),
            size,
        )
        if n
        else 0
    )
    return path, PathInfo(path, cost, naive, largest, eq)


def einsum_path(subscripts, *operands, optimize="greedy"):
    """The contraction order einsum would take and its cost, as ``jnp.einsum_path``.

    Operands may be arrays, traced values or anything with a ``shape``.

    Returns:
        (path, info): path a list of tuples of operand positions (opt_einsum's convention: the
        operands at those positions are contracted and the result appended); info opt_einsum's
        ``PathInfo`` when installed (``info.opt_cost`` the flop count), else tidu's
        ``PathInfo`` with the same fields.
    """

    def shaped(o):
        if isinstance(o, (list, tuple)):  # a sublist of the interleaved form
            return o
        return _Shaped(o.shape if hasattr(o, "shape") else np.shape(o))

    if isinstance(subscripts, str):
        ins, out, ops = _parse(subscripts, [shaped(o) for o in operands])
    else:
        ins, out, ops = _parse(shaped(subscripts), [shaped(o) for o in operands])
    shapes = [o.shape for o in ops]
    size = _sizes(ins, shapes)
    return _find_path(ins, out, shapes, size, optimize)


class _Shaped:
    __slots__ = ("shape", "ndim")

    def __init__(self, shape):
        self.shape = tuple(shape)
        self.ndim = len(self.shape)


# ---- lowering one einsum into primitives ----


class _Term:
    """A traced value with one label per axis."""

    __slots__ = ("x", "idx")

    def __init__(self, x, idx):
        self.x, self.idx = x, list(idx)


def _emit(op, *xs):
    return emit(_trace_of(*xs), op, *xs)


def _diagonals(term: _Term) -> _Term:
    """Repeated labels of one operand reduced to one axis each (the diagonal)."""
    while True:
        dup = next((i for i in term.idx if term.idx.count(i) > 1), None)
        if dup is None:
            return term
        p, q = [k for k, i in enumerate(term.idx) if i == dup][:2]
        rest = [k for k in range(len(term.idx)) if k not in (p, q)]
        x = term.x
        perm = tuple(rest + [p, q])
        if perm != tuple(range(len(perm))):
            x = _emit(P.Transpose(perm), x)
        n = x.shape[-1]
        lead = tuple(x.shape[:-2])
        x = _emit(P.Reshape(lead + (n * n,)), x)
        nd = len(lead) + 1
        x = _emit(P.Slice((0,) * nd, lead + (n * n,), (1,) * (nd - 1) + (n + 1,)), x)
        term = _Term(x, [term.idx[k] for k in rest] + [dup])


def _sum_out(term: _Term, keep) -> _Term:
    """Sum over labels not in keep."""
    axes = tuple(k for k, i in enumerate(term.idx) if i not in keep)
    if not axes:
        return term
    return _Term(_emit(P.ReduceSum(axes), term.x), [i for i in term.idx if i in keep])


def _broadcast_ellipsis(term: _Term, size) -> _Term:
    """Size-1 ellipsis axes broadcast to their index's size."""
    shape = tuple(size[i] for i in term.idx)
    if tuple(term.x.shape) == shape:
        return term
    nd = len(shape)
    return _Term(_emit(P.BroadcastInDim(shape, tuple(range(nd))), term.x), term.idx)


def _contract(a: _Term, b: _Term, keep, out=None) -> _Term:
    """One pairwise contraction as a DotGeneral: shared labels kept later are batch axes, the
    other shared ones are contracted.  `out` (the final contraction's output labels): the
    operands are taken in the order whose result needs no Transpose, when only one does."""
    a, b = _sum_out(a, keep | set(b.idx)), _sum_out(b, keep | set(a.idx))
    if out is not None:
        def in_order(u, v):
            sh = [i for i in u.idx if i in v.idx]
            idx = [i for i in sh if i in keep] + [i for i in u.idx if i not in sh] + \
                  [i for i in v.idx if i not in sh]
            return idx == [i for i in out if i in idx]
        if not in_order(a, b) and in_order(b, a):
            a, b = b, a
    shared = [i for i in a.idx if i in b.idx]
    batch = [i for i in shared if i in keep]
    contr = [i for i in shared if i not in keep]
    lc = tuple(a.idx.index(i) for i in contr)
    rc = tuple(b.idx.index(i) for i in contr)
    lb = tuple(a.idx.index(i) for i in batch)
    rb = tuple(b.idx.index(i) for i in batch)
    x = _emit(P.DotGeneral(lc, rc, lb, rb), a.x, b.x)
    idx = batch + [i for i in a.idx if i not in shared] + [i for i in b.idx if i not in shared]
    return _Term(x, idx)


def einsum(
    subscripts,
    /,
    *operands,
    out=None,
    optimize="auto",
    precision=None,
    preferred_element_type=None,
    _dot_general=None,
):
    """Einstein summation, as ``jnp.einsum``: ``td.einsum("ij,jk->ik", a, b)``, the implicit
    form (``"ij,jk"``), ellipses (``"...ij,...jk"``), repeated indices (diagonals, traces:
    ``"ii->"``), and the interleaved form ``td.einsum(a, [0, 1], b, [1, 2], [0, 2])``.

    Args:
        optimize: the contraction order: ``"auto"`` (default, as jax), ``"greedy"``,
            ``"optimal"``, ``"dp"``, ... (opt_einsum's names; without opt_einsum every name
            takes tidu's greedy search), True (greedy), False (left to right), or an explicit
            path as ``einsum_path`` returns.
        precision, preferred_element_type: accepted for jax compatibility; products are always
            at full precision, in the operands' promoted dtype (or this dtype when given).

    Raises:
        ValueError: subscripts that do not match the operands' ranks, an index with two sizes,
            an output index not among the inputs.
    """
    no_out(out, "einsum")
    ins, out, ops = _parse(subscripts, operands)
    t = _trace_of(*ops)
    dt = result_type(*ops) if ops else np.dtype("float64")
    if preferred_element_type is not None:
        dt = np.dtype(preferred_element_type)
    if dt == np.dtype(bool):
        dt = np.dtype("bool")
    xs = [_lift(t, o, dt) for o in ops]
    size = _sizes(ins, [x.shape for x in xs])
    path, _ = _find_path(ins, out, [x.shape for x in xs], size, optimize)
    terms = [_broadcast_ellipsis(_diagonals(_Term(x, idx)), size) for x, idx in zip(xs, ins)]
    if dt == np.dtype(bool):  # DotGeneral is numeric: contract as int, back to bool
        terms = [_Term(_lift(t, tm.x, np.int64), tm.idx) for tm in terms]
    out_set = set(out)
    for step in path:
        step = tuple(sorted(step, reverse=True))
        taken = [terms.pop(k) for k in step]
        keep = out_set.union(*[set(tm.idx) for tm in terms])
        if len(taken) == 1:
            terms.append(_sum_out(taken[0], keep))
            continue
        acc = taken[0]
        for k, other in enumerate(taken[1:]):
            later = set().union(*[set(tm.idx) for tm in taken[k + 2 :]])
            last = not terms and k == len(taken) - 2
            acc = _contract(acc, other, keep | later, out if last else None)
        terms.append(acc)
    if len(terms) != 1:
        raise ValueError(f"einsum: the path {path} leaves {len(terms)} operands, not one")
    res = _sum_out(terms[0], out_set)
    perm = tuple(res.idx.index(i) for i in out)
    x = res.x if perm == tuple(range(len(perm))) else _emit(P.Transpose(perm), res.x)
    if dt == np.dtype(bool):
        x = _compare("NE", x, 0)
    if preferred_element_type is None and ops and all(_is_weak(o) for o in ops):
        x = _as_weak(x)  # weak operands only: a weak result, as jax's
    return x
