"""Rewrites of a compiled instruction stream for the C++ interpreter only (XLA gets the program as
compiled): registered with ``tidu.backends.interpreter.register_rewrite`` and applied by
``encode``, so every way to the interpreter (jit, a loop body, ``save``) gets them.

**Per-example outer products reduced over the batch** (issue #30, dpsgd). ``vmap(grad)`` of a
dense layer gives each example's weight gradient as a batched outer product
``O[b, m, n] = x[b, m] * g[b, n]`` (a ``DotGeneral`` with batch axis 0 and no contracting axis:
B*M*N elements written), which per-example clipping then reads twice:

- a weighted sum over the batch, ``sum_b s[b] * O[b]`` (``ReduceSum(axes=(0,))`` of ``O`` times a
  broadcast of ``s`` along axis 0; also with no weight): one matrix product
  ``(s * x)^T g``, the weights folded into the smaller operand;
- each example's squared norm, ``sum_{m,n} O[b, m, n]^2`` (``O`` or its reshape to ``(B, M*N)``
  squared by a ``Mul`` and summed over every axis but the batch): the norm factorises,
  ``(sum_m x[b, m]^2) * (sum_n g[b, n]^2)``.

Same values up to rounding (the sums are taken in another order: the products' BLAS order, and
the factorised norm's two short sums), for float32/64 and complex64/128. ``O`` is dropped when
nothing else reads it. A pattern whose intermediates are read elsewhere, or are program outputs,
is left as it is. The search asks only the distinct ops of a program (not each instruction) for an
outer product, so a program without one costs one ``np.unique``.

**Division by a power of two** (issue #30: attention's ``s / sqrt(d)`` with ``d = 16``, forward and
gradient). ``x / c`` for a constant ``c`` (a ``Constant``, or a ``BroadcastInDim`` of a one-element
one) holding one power of two whose reciprocal is a normal number of the dtype is ``x * (1 / c)``:
both round the same exact quotient once, so the values are the same to the bit, and a multiply
costs a fraction of a divide (as XLA's algebraic simplifier rewrites it). Real floats only.
"""

from __future__ import annotations

import numpy as np

from tidu.backends.interpreter import register_rewrite
from tidu.graph import prim_of
from tidu.graph.dtypes import aval, aval_of
from tidu.graph.keys import prim_id
from tidu.ops.core import BroadcastInDim, Constant, Mul, ReduceSum, Reshape
from tidu.ops.elementwise import Div
from tidu.ops.structural import DotGeneral

__all__ = ["batched_outer_sums", "exact_reciprocals"]

# float16/bfloat16 are left alone: their outer product rounds each element to the narrow type.
_DTYPES = frozenset(np.dtype(d) for d in ("float32", "float64", "complex64", "complex128"))


def _is_batch_outer(op) -> bool:
    return (type(op) is DotGeneral and not op.lhs_contracting and not op.rhs_contracting
            and op.lhs_batch == (0,) and op.rhs_batch == (0,))


class _Stream:
    """Read access to SSA arrays: who writes and who reads a slot."""

    def __init__(self, arrays):
        self.a = arrays
        self.prims = arrays["instr_prim"]
        self.in_off = arrays["in_off"].astype(np.int64)
        self.in_slots = arrays["in_slots"]
        self.out_off = arrays["out_off"].astype(np.int64)
        self.out_slots = arrays["out_slots"]
        self.outputs = set(arrays["output_slots"].tolist())
        n = len(self.prims)
        self.writer = np.full(len(arrays["slot_aval"]), -1, np.int64)
        self.writer[self.out_slots] = np.repeat(np.arange(n), np.diff(self.out_off))

    def ins(self, i: int) -> list[int]:
        return self.in_slots[self.in_off[i]:self.in_off[i + 1]].tolist()

    def out(self, i: int) -> int:
        return int(self.out_slots[self.out_off[i]])

    def op(self, i: int):
        return prim_of(int(self.prims[i]))

    def readers(self, slot: int) -> list[int]:
        pos = np.flatnonzero(self.in_slots == slot)
        return sorted(set((np.searchsorted(self.in_off, pos, "right") - 1).tolist()))

    def only_reader(self, slot: int) -> int | None:
        """The one instruction reading slot, when it is not a program output."""
        r = self.readers(slot)
        return r[0] if len(r) == 1 and slot not in self.outputs else None

    def shape(self, slot: int) -> tuple[int, ...]:
        return aval_of(int(self.a["slot_aval"][slot])).shape


class _Builder:
    """New instructions (op, input slots, output aval) with new slots after the program's."""

    def __init__(self, s: _Stream):
        self.s = s
        self.n_slots = len(s.a["slot_aval"])
        self.new_avals: list[int] = []

    def emit(self, code: list, op, ins: list[int], shape, dtype, out: int | None = None) -> int:
        if out is None:
            out = self.n_slots + len(self.new_avals)
            self.new_avals.append(aval(shape, dtype).id)
        code.append((prim_id(op), ins, out))
        return out


def _weight(s: _Stream, other: int, B: int) -> "int | None | bool":
    """The slot of s when `other` is BroadcastInDim(s) to (B, ...) along axis 0 only (s's
    elements indexed by the batch), else False."""
    w = int(s.writer[other])
    if w < 0 or type(s.op(w)) is not BroadcastInDim:
        return False
    (src,) = s.ins(w)
    shp, dims = s.shape(src), s.op(w).dims
    if any(d != 1 and dim != 0 for d, dim in zip(shp, dims)) or int(np.prod(shp)) not in (1, B):
        return False
    return src


def _weighted_sum(s: _Stream, b: _Builder, d: int, c: int, x: int, y: int, dt) -> tuple | None:
    """Reader c of outer product d: ReduceSum over the batch of O, or of O * broadcast(s)."""
    (B, M), N = s.shape(x), s.shape(y)[1]
    op, wslot, dead = s.op(c), None, [c]
    red = c
    if type(op) is Mul:
        o = s.out(d)
        a, bb = s.ins(c)
        if (a == o) == (bb == o):
            return None
        wslot = _weight(s, bb if a == o else a, B)
        if wslot is False:
            return None
        red = s.only_reader(s.out(c))
        if red is None:
            return None
        dead.append(red)
    if type(s.op(red)) is not ReduceSum or s.op(red).axes != (0,):
        return None
    code: list = []
    xs, ys = x, y
    if wslot is not None:
        scaled, length = (y, N) if N < M else (x, M)
        dims = (0,)
        if s.shape(wslot) != (B,):
            whole = int(np.prod(s.shape(wslot))) == B and B != 1  # else one weight for all
            dims = (0,) if whole else ()
            wslot = b.emit(code, Reshape(dims and (B,)), [wslot], dims and (B,), dt)
        wb = b.emit(code, BroadcastInDim((B, length), dims), [wslot], (B, length), dt)
        t = b.emit(code, Mul(), [scaled, wb], (B, length), dt)
        xs, ys = (x, t) if scaled == y else (t, y)
    b.emit(code, DotGeneral((0,), (0,)), [xs, ys], (M, N), dt, out=s.out(red))
    return red, dead, code


def _squared_norm(s: _Stream, b: _Builder, d: int, c: int, x: int, y: int, dt) -> tuple | None:
    """Reader c of outer product d: [Reshape to (B, M*N)], Mul(P, P), ReduceSum over the rest."""
    (B, M), N = s.shape(x), s.shape(y)[1]
    dead, p = [], s.out(d)
    if type(s.op(c)) is Reshape:
        if s.shape(s.out(c)) != (B, M * N):
            return None
        dead.append(c)
        p = s.out(c)
        c = s.only_reader(p)
        if c is None:
            return None
    if type(s.op(c)) is not Mul or s.ins(c) != [p, p]:
        return None
    dead.append(c)
    red = s.only_reader(s.out(c))
    if red is None or type(s.op(red)) is not ReduceSum:
        return None
    if s.op(red).axes != tuple(range(1, len(s.shape(p)))):
        return None
    dead.append(red)
    code: list = []
    xx = b.emit(code, Mul(), [x, x], (B, M), dt)
    sx = b.emit(code, ReduceSum((1,)), [xx], (B,), dt)
    yy = b.emit(code, Mul(), [y, y], (B, N), dt)
    sy = b.emit(code, ReduceSum((1,)), [yy], (B,), dt)
    b.emit(code, Mul(), [sx, sy], (B,), dt, out=s.out(red))
    return red, dead, code


def batched_outer_sums(arrays: dict) -> dict | None:
    """The rewrite described in the module's docstring, or None when nothing matched."""
    prims = arrays["instr_prim"]
    found = [p for p in np.unique(prims).tolist() if _is_batch_outer(prim_of(p))]
    if not found:
        return None
    s = _Stream(arrays)
    b = _Builder(s)
    at: dict[int, list] = {}  # instruction -> new code that replaces it
    dead: set[int] = set()
    for d in np.flatnonzero(np.isin(prims, found)).tolist():
        x, y = s.ins(d)
        if len(s.shape(x)) != 2 or len(s.shape(y)) != 2 or aval_of(
                int(arrays["slot_aval"][x])).dtype not in _DTYPES:
            continue
        dt = aval_of(int(arrays["slot_aval"][x])).dtype
        o = s.out(d)
        readers = s.readers(o)
        kept = len(readers)
        for c in readers:
            hit = (_weighted_sum(s, b, d, c, x, y, dt) if type(s.op(c)) in (Mul, ReduceSum)
                   and not (type(s.op(c)) is Mul and s.ins(c) == [o, o]) else
                   _squared_norm(s, b, d, c, x, y, dt))
            if hit is None:
                continue
            red, gone, code = hit
            at[red] = code
            dead.update(g for g in gone if g != red)
            kept -= 1
        if kept == 0 and o not in s.outputs:
            dead.add(d)
    if not at:
        return None
    # Broadcast weights read by nothing that stays (the new code's operands stay).
    removed = dead | set(at)
    needed = {a for code in at.values() for _, ins, _ in code for a in ins}
    for i in sorted(removed):
        for a in s.ins(i):
            w = int(s.writer[a])
            if w >= 0 and w not in removed and type(s.op(w)) is BroadcastInDim \
                    and a not in s.outputs and a not in needed and set(s.readers(a)) <= removed:
                dead.add(w)
    return _assemble(s, b, at, dead)


def _rows(off: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions in a CSR value array of `rows`' entries, row after row, and each row's
    length."""
    starts = off[rows]
    lens = off[rows + 1] - starts
    firsts = np.cumsum(lens) - lens
    return np.arange(int(lens.sum()), dtype=np.int64) + np.repeat(starts - firsts, lens), lens


def _assemble(s: _Stream, b: _Builder, at: dict, dead: set) -> dict:
    """New SSA arrays: the kept instructions in order, each replaced one's code at its place,
    slots renumbered densely over those still written or read (numpy throughout: this runs in
    every first call of a program it matches)."""
    a = s.a
    n = len(s.prims)
    modes = a["instr_mode"]
    keep = np.ones(n, bool)
    keep[list(dead | set(at))] = False
    kept = np.flatnonzero(keep)
    # The replacing code, in the order of the instructions it replaces, then of each code list.
    rep = sorted(at)
    pos = [i for i in rep for _ in at[i]]
    c_prim = [p for i in rep for p, _, _ in at[i]]
    c_ins = [x for i in rep for _, xs, _ in at[i] for x in xs]
    c_len = [len(xs) for i in rep for _, xs, _ in at[i]]
    c_out = [o for i in rep for _, _, o in at[i]]
    # Kept instruction i and the code replacing i both sort at key i (never both for one i);
    # a stable sort keeps each code list in its order.
    order = np.argsort(np.concatenate([kept, np.array(pos, np.int64)]), kind="stable")
    idt = a["in_slots"].dtype

    def csr(off, flat, extra, extra_len):
        """Rows of the kept instructions (off, flat) and then of the code, in `order`."""
        off = off.astype(np.int64)
        idx, lens = _rows(off, kept)
        vals = np.concatenate([flat[idx].astype(np.int64), np.array(extra, np.int64)])
        lens = np.concatenate([lens, np.array(extra_len, np.int64)])
        both = np.zeros(len(lens) + 1, np.int64)
        np.cumsum(lens, out=both[1:])
        idx, lens = _rows(both, order)
        new_off = np.zeros(len(lens) + 1, a["in_off"].dtype)
        np.cumsum(lens, out=new_off[1:])
        return new_off, vals[idx]

    in_off, ins = csr(a["in_off"], a["in_slots"], c_ins, c_len)
    out_off, outs = csr(a["out_off"], a["out_slots"], c_out, [1] * len(c_out))
    slot_aval = np.concatenate([a["slot_aval"], np.array(b.new_avals, a["slot_aval"].dtype)])
    used = np.zeros(len(slot_aval), bool)
    used[a["input_slots"]] = True
    used[ins] = True
    used[outs] = True
    new = np.cumsum(used) - 1
    prim = np.concatenate([s.prims[kept], np.array(c_prim, s.prims.dtype)])[order]
    mode = np.concatenate([modes[kept], modes[np.array(pos, np.int64)]])[order]
    return {
        "slot_aval": slot_aval[used],
        "instr_prim": prim.astype(a["instr_prim"].dtype),
        "instr_mode": mode.astype(modes.dtype),
        "in_off": in_off, "in_slots": new[ins].astype(idt),
        "out_off": out_off, "out_slots": new[outs].astype(a["out_slots"].dtype),
        "input_slots": new[a["input_slots"]].astype(a["input_slots"].dtype),
        "output_slots": new[a["output_slots"]].astype(a["output_slots"].dtype),
    }


_REAL = frozenset(np.dtype(d) for d in ("float16", "float32", "float64"))


def _reciprocal(c: Constant) -> "np.ndarray | None":
    """1 / c as a one-element array of c's dtype when c holds one power of two (every element)
    whose reciprocal is a normal number of the dtype, else None."""
    v = c.value
    if v.dtype not in _REAL or v.size == 0:
        return None
    first = v.reshape(-1)[:1]
    if not np.all(v == first[0]) or not np.isfinite(first[0]) or first[0] == 0:
        return None
    mant, _ = np.frexp(first.astype(np.float64))
    with np.errstate(over="ignore", under="ignore"):
        r = (np.float64(1.0) / first.astype(np.float64)).astype(v.dtype)
    info = np.finfo(v.dtype)
    if abs(mant[0]) != 0.5 or not np.isfinite(r[0]) or abs(r[0]) < info.tiny:
        return None
    if r[0] * first[0] != 1:
        return None
    return r


def exact_reciprocals(arrays: dict) -> dict | None:
    """The division by a power of two of the module's docstring, or None when nothing matched."""
    prims = arrays["instr_prim"]
    kinds = {p: type(prim_of(p)) for p in np.unique(prims).tolist()}
    divs = [p for p, k in kinds.items() if k is Div]
    if not divs or Constant not in kinds.values():
        return None
    s = _Stream(arrays)
    b = _Builder(s)
    at: dict[int, list] = {}
    made: dict[int, int] = {}  # divisor slot -> the slot of its reciprocal (made once)
    for d in np.flatnonzero(np.isin(prims, divs)).tolist():
        x, c = s.ins(d)
        dt = aval_of(int(arrays["slot_aval"][c])).dtype
        code: list = []
        if c not in made:
            w = int(s.writer[c])
            if w < 0:
                continue
            bcast = None
            if type(s.op(w)) is BroadcastInDim:
                bcast = s.op(w)
                (src,) = s.ins(w)
                w = int(s.writer[src])
                if w < 0 or int(np.prod(s.shape(src), dtype=np.int64)) != 1:
                    continue
            if type(s.op(w)) is not Constant:
                continue
            r = _reciprocal(s.op(w))
            if r is None:
                continue
            shape = s.op(w).shape
            k = b.emit(code, Constant.of(np.broadcast_to(r.reshape(()), shape), dt), [], shape, dt)
            if bcast is not None:
                k = b.emit(code, bcast, [k], bcast.shape, dt)
            made[c] = k
        b.emit(code, Mul(), [x, made[c]], s.shape(s.out(d)), dt, out=s.out(d))
        at[d] = code
    if not at:
        return None
    # A divisor's broadcast read by nothing that stays goes (its constant is one element).
    dead = {int(s.writer[c]) for c in made
            if type(s.op(int(s.writer[c]))) is BroadcastInDim and c not in s.outputs
            and set(s.readers(c)) <= set(at)}
    return _assemble(s, b, at, dead)


register_rewrite(batched_outer_sums)
register_rewrite(exact_reciprocals)
