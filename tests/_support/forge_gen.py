"""Seed programs (built with tidu) and the forgery generator: forgery i of seed s is a pure
function of (s, i), so any one is reproducible from its manifest line."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from _support import values
from _support.forge import (DT, I64_MAX, I64_MIN, OP, OPCODES, Asm, Prog, attr_roles, parse,
                            seal)

EXTREMES = [0, 1, -1, 2, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40, 2**48, 2**52, 2**62,
            I64_MAX, I64_MIN, I64_MAX - 1, I64_MIN + 1, 2**63 - 2**40, -2**32]


def _compile(fn, **specs):
    import tidu as td

    F = td.build(fn, **specs)
    return td.compile(td.materialize_merge(td.resolve([F]), F.outputs))


def _pool(x, comp, window, strides, padding):
    from tidu.numpy.conv import reduce_window

    return reduce_window(x, -np.inf if comp == "max" else np.inf, comp, window, strides, padding)


def _grad(fn, wrt, **specs):
    import tidu as td

    F0 = td.build(fn, **specs)
    T1 = td.transpose(td.differentiate(td.resolve([F0]), F0.outputs, wrt))
    return td.compile(td.materialize_merge(td.resolve([F0, T1]), F0.outputs + T1.tangent_outputs))


@functools.cache
def seeds() -> dict[str, bytes]:
    """Valid program files of several kinds: elementwise, structural, gradients (Pad, Dot),
    scalar (the JIT path), int/bool/complex/float32, constants, a blocked chain."""
    import tempfile

    import tidu as td

    S = td.spec
    progs = {
        "elementwise": _compile(lambda x, y: td.tanh(x) * y + td.exp(x) - td.sqrt(td.abs(y)),
                                x=S((4, 3)), y=S((4, 3))),
        "structural": _compile(lambda x: (td.concatenate([x[1:3, ::2], td.transpose(x)[:2, :2]],
                                                         axis=1),
                                          td.sum(td.reshape(x, (2, 8)), axis=1),
                                          td.broadcast_to(x[0], (3, 4))), x=S((4, 4))),
        "grad_slice_pad": _grad(lambda x: td.sum(x[1:3, ::2] ** 2), ["x"], x=S((4, 4))),
        "grad_dot": _grad(lambda x, w: td.sum(td.tanh(x @ w) * x[:, :1]), ["w"],
                          x=S((4, 3)), w=S((3, 3))),
        "scalar_jit": _compile(lambda a, b: td.sin(a) * b + td.exp(a) / b, a=S(()), b=S(())),
        "int_iota": _compile(lambda a: td.where(a > 2, a * 3, -a) + td.iota((5,), "int32"),
                             a=S((5,), "int32")),
        "complex": _compile(lambda z: (td.real(z * td.conj(z)), td.imag(z) + td.abs(z)),
                            z=S((3,), "complex128")),
        "bool_f32": _compile(lambda x, y: (x > y, td.where(x < y, x, y) @ td.transpose(y)),
                             x=S((2, 3), "float32"), y=S((2, 3), "float32")),
        "constants": _compile(lambda x: x * np.arange(3.0) + np.array([1.0, 2.0, 3.0]),
                              x=S((3,))),
        "chain": _compile(lambda x: td.exp(x) * 2.0 + td.sin(x), x=S((16384,))),
        "math": _compile(lambda x, y: (td.floor(x) + td.arctan2(x, y) + td.fmod(x, y)
                                       + td.erfinv(td.tanh(x) * 0.5) + td.nn.sigmoid(y),
                                       td.isfinite(x)), x=S((3,)), y=S((3,))),
        "int_divmod": _compile(lambda a, b: divmod(a, b), a=S((4,), "int32"), b=S((4,), "int32")),
        "sort_scan": _grad(lambda x: td.sum(td.sort(x, axis=0) * td.cumprod(x, axis=1)) +
                           td.prod(x) + td.min(x, axis=1)[0], ["x"], x=S((3, 4))),
        "control_flow": _grad(values.loops, ["x"], x=S((3,)), w=S((3,))),
        "while_cond": _compile(lambda a: td.while_loop(lambda c: c[1] < 7,
                                                        lambda c: (c[0] * 0.5 + a, c[1] + 1),
                                                        (a, 0))[0], a=S((2,))),
        "pool_grad": _grad(lambda x: td.sum(_pool(x, "max", (2, 3), (1, 2), "SAME") ** 2)
                           + td.sum(_pool(x, "min", (3, 2), (2, 1), "VALID")),
                           ["x"], x=S((5, 6))),
        "arg_bool": _compile(lambda x: (td.argmax(x, axis=1), td.argsort(x, axis=0),
                                        td.any(x > 0, axis=0), td.all(x > 0), td.cummax(x, axis=1),
                                        td.searchsorted(td.sort(x[0]), x[1:]),
                                        td.vmap(td.searchsorted)(td.sort(x, axis=1), x[::-1])),
                             x=S((3, 4))),
    }
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, prog in progs.items():
            path = Path(tmp) / f"{name}.tidu"
            prog.save(path)
            out[name] = path.read_bytes()
    return out


def pick(rng, seq):
    """One element of seq (Python ints stay exact: no numpy array of mixed magnitudes)."""
    return seq[int(rng.integers(len(seq)))]


# ---- edits of one integer field ----

def _value_for(rng, dt, old: int, ctx: list[int]) -> int:
    """An extreme, a value near the old one, or a length from the program (ctx)."""
    r = rng.random()
    if r < 0.5:
        v = int(pick(rng, EXTREMES))
    elif r < 0.75:
        v = old + int(pick(rng, [-2, -1, 1, 2, 16])) if rng.random() < 0.7 else old * 2 - 1
    else:
        v = int(pick(rng, ctx)) + int(rng.integers(-1, 2))
    if dt == np.int64:
        return (v + 2**63) % 2**64 - 2**63
    bits = 8 * np.dtype(dt).itemsize
    if dt == np.uint8 and rng.random() < 0.5:
        v = int(rng.integers(0, 48))  # near the opcode/dtype table sizes
    return v % 2**bits


def edit_fields(p: Prog, rng) -> tuple[Prog, str]:
    """1-3 elements of any array set to an extreme (element-type aware)."""
    q, notes = p.copy(), []
    ctx = [len(v) for v in q.a.values()] + [int(x) for x in q.a["shapes"][:8]]
    weights = {"slot_dtype": 1, "slot_ndim": 2, "shapes": 4, "opcode": 2, "in_off": 2,
               "in_slots": 2, "out_off": 1, "out_slots": 2, "attr_off": 2, "attrs": 5, "consts": 0.3,
               "inputs": 1, "outputs": 1}
    names = [k for k in weights if len(q.a[k])]
    w = np.array([weights[k] for k in names])
    for _ in range(int(rng.integers(1, 4))):
        k = names[rng.choice(len(names), p=w / w.sum())]
        j = int(rng.integers(len(q.a[k])))
        old = int(q.a[k][j])
        new = _value_for(rng, q.a[k].dtype.type, old, ctx)
        q.a[k][j] = np.array(new).astype(q.a[k].dtype)
        notes.append(f"{k}[{j}]={new} (was {old})")
    return q, "field " + "; ".join(notes)


def edit_attrs(p: Prog, rng) -> tuple[Prog, str]:
    """One attribute by role: list lengths to INT64_MAX and friends (the count() walk), axes,
    bounds, strides, padding, constant offset/size, iota dimension."""
    q = p.copy()
    cands = []
    for i in range(len(q.a["opcode"])):
        b, e = q.instr_attrs(i)
        cands += [(i, b + j, role) for j, role in attr_roles(int(q.a["opcode"][i]),
                                                             q.a["attrs"][b:e].tolist())]
    if not cands:
        return edit_fields(p, rng)
    last = [c for c in cands if c[0] == cands[-1][0]]
    if rng.random() < 0.3:  # the last instruction's lists: a walk past them leaves the array
        cands = last
    i, j, role = cands[int(rng.integers(len(cands)))]
    b, e = q.instr_attrs(i)
    old = int(q.a["attrs"][j])
    if role == "len":
        opts = [I64_MAX, I64_MAX - (j - b), I64_MAX - (j - b) - 1, I64_MAX - 1, I64_MIN, -1,
                2**32, 2**31, e - j - 1, e - j, old + 1, old - 1]
        new = int(pick(rng, opts))
    else:
        new = _value_for(rng, np.int64, old, [e - b, old, len(q.a["consts"])])
    q.a["attrs"][j] = (new + 2**63) % 2**64 - 2**63
    return q, f"attr {OPCODES[q.a['opcode'][i]]}#{i} {role} attrs[{j}]={new} (was {old})"


def edit_nested(p: Prog, rng) -> tuple[Prog, str]:
    """A field or attribute edit inside a nested program (a loop body or branch, any depth)."""
    q = p.copy()
    path, node = [], q
    while node.subs and (not path or rng.random() < 0.5):
        k = int(rng.integers(len(node.subs)))
        path.append(k)
        node = node.subs[k]
    if not path:
        return edit_fields(p, rng)
    edited, desc = (edit_fields if rng.random() < 0.6 else edit_attrs)(node, rng)
    parent = q
    for k in path[:-1]:
        parent = parent.subs[k]
    parent.subs[path[-1]] = edited
    return q, f"nested {path}: {desc}"


# ---- crafted overflows ----

def _pad_triple(rng, d: int, out: int) -> tuple[int, int, int] | None:
    """lo, hi, interior >= 0 with lo + hi + d + (d - 1) * interior == out modulo 2^64 (wrapping)."""
    for _ in range(64):
        lo = int(pick(rng, [2**40, 0, 1, 2**62, I64_MAX, 2**52]))
        if rng.random() < 0.5:  # interior free, hi solved
            z = int(pick(rng, [I64_MAX, 2**62, 2**61 + 1, 2**32, 2**40])) if d > 1 else 0
            hi = (out - lo - d - (d - 1) * z) % 2**64
        else:  # hi free, interior solved (d - 1 odd: invertible modulo 2^64)
            hi = int(pick(rng, [I64_MAX, 2**62, 2**40, 0]))
            if d % 2:
                continue
            z = (out - lo - hi - d) * pow(d - 1, -1, 2**64) % 2**64
        if hi <= I64_MAX and z <= I64_MAX and (lo + hi + d + (d - 1) * z) >= 2**63:
            return lo, hi, z
    return None


def craft_pad(rng) -> tuple[Prog, str]:
    """Pad whose output-size check wraps to the declared size."""
    for _ in range(32):
        d, out = int(rng.integers(2, 6)), int(rng.integers(1, 12))
        t = _pad_triple(rng, d, out)
        if t:
            break
    m = Asm()
    dt = str(pick(rng, ["float64", "float32", "complex128", "int32"]))
    x = m.input(dt, [d])
    y = m.instr("Pad", [x], m.slot(dt, [out]), [1, t[0], 1, t[1], 1, t[2]])
    m.outputs.append(y)
    return m.prog(), f"craft pad_wrap {dt} d={d} out={out} lo={t[0]} hi={t[1]} interior={t[2]}"


def craft_pad_seed(p: Prog, rng) -> tuple[Prog, str]:
    """The Pad of a seed, one axis's (lo, hi, interior) replaced by a wrapping triple."""
    pads = [i for i in range(len(p.a["opcode"])) if p.a["opcode"][i] == OP["Pad"]]
    assert pads, "pad_seed edits need a seed with a Pad"
    q, i = p.copy(), pads[int(rng.integers(len(pads)))]
    x, o = int(q.a["in_slots"][q.a["in_off"][i]]), q.out_slot(i)
    n, (b, _) = len(q.shape_of(x)), q.instr_attrs(i)
    k = int(rng.integers(n))
    t = _pad_triple(rng, q.shape_of(x)[k], q.shape_of(o)[k])
    if t is None:  # an axis of size < 2 has no wrapping triple: another edit
        return edit_attrs(p, rng)
    for j, v in enumerate(t):
        q.a["attrs"][b + 1 + j * (n + 1) + k] = v
    return q, f"craft pad_wrap seed instr {i} axis {k} lo={t[0]} hi={t[1]} interior={t[2]}"


def _wrapped_ceil(n: int, z: int) -> int:
    """(n + z - 1) / z as the C++ computes it in int64 (wrapping, truncating)."""
    v = (n + z - 1 + 2**63) % 2**64 - 2**63
    return abs(v) // z * (1 if v >= 0 else -1)


def craft_slice(rng) -> tuple[Prog, str]:
    """Slice whose (limit - start + stride - 1) or stride * input stride overflows; the output
    shape either the wrapped value (passes an overflowing check) or the true one."""
    d0, d1 = int(rng.integers(1, 5)), int(rng.integers(3, 8))
    start = int(rng.integers(0, d1 - 2))
    limit = int(rng.integers(start + 2, d1 + 1))
    strides = [int(pick(rng, [1, I64_MAX, 2**62])),
               int(pick(rng, [I64_MAX, I64_MAX - 1, 2**62, 2**63 - 2**40]))]
    wrap = rng.random() < 0.7
    out = [_wrapped_ceil(n, z) if wrap and _wrapped_ceil(n, z) >= 0 else -(-n // z)
           for n, z in zip([d0, limit - start], strides)]
    m = Asm()
    x = m.input("float64", [d0, d1])
    y = m.instr("Slice", [x], m.slot("float64", out), [2, 0, start, 2, d0, limit, 2, *strides])
    m.outputs.append(y)
    return m.prog(), (f"craft slice_overflow x=({d0},{d1}) start=(0,{start}) "
                      f"limit=({d0},{limit}) strides={tuple(strides)} out={tuple(out)}")


def craft_concat(rng) -> tuple[Prog, str]:
    """Concatenate of empty operands whose axis sizes sum past 2^63 (the int64 total wraps)."""
    sizes = [[2**62] * 4, [2**62] * 5, [I64_MAX, I64_MAX, 2], [I64_MAX, 1],
             [2**63 - 2**40, 2**40], [2**62] * 4 + [3]][int(rng.integers(6))]
    total = (sum(sizes) + 2**63) % 2**64 - 2**63
    m = Asm()
    xs = [m.input("float64", [0, n]) for n in sizes]
    y = m.instr("Concatenate", xs, m.slot("float64", [0, max(total, 0)]), [1])
    m.outputs.append(y)
    return m.prog(), f"craft concat_wrap (0,n) for n in {sizes} -> (0,{max(total, 0)})"


def craft_arena(rng) -> tuple[Prog, str]:
    """Dead Iotas of distinct sizes near 2^52 bytes (none reuses another's buffer) whose sum
    wraps the uint64 arena size to a few bytes, or to 2^64 - 64 (then arena_bytes + 64 wraps)."""
    dt, item = (("complex128", 16), ("float64", 8))[int(rng.integers(2))]
    target = int(pick(rng, [0, 64, 128, 2**64 - 64]))
    m = Asm()
    small = m.slot("float64", [4])
    m.instr("Iota", [], small, [1, 4, DT["float64"], 0])
    m.outputs.append(small)
    total, used = 64, set()
    while True:
        rest = (target - total) % 2**64
        e = rest // item
        if not (0 < rest <= item * 2**48 and e not in used):
            e = 2**48 - 8 * len(used)
        s = m.slot(dt, [e])
        m.instr("Iota", [], s, [1, e, DT[dt], 0])
        used.add(e)
        total += e * item
        if total % 2**64 == target:
            break
    return m.prog(), (f"craft arena_wrap {len(used)} dead iotas of {dt} near 2^52 bytes, "
                      f"arena = {target} mod 2^64")


def craft_attr_walk(rng) -> tuple[Prog, str]:
    """A reduction whose axis-list length is INT64_MAX: pos + 1 + length wraps in the
    validator's count() and the axis loop reads past the end of the attribute array."""
    op = str(pick(rng, ["ReduceSum", "ReduceMax"]))
    m = Asm()
    x = m.input("float64", [2, 3])
    y = m.instr(op, [x], m.slot("float64", [3]), [I64_MAX, 0])
    m.outputs.append(y)
    return m.prog(), f"craft attr_walk {op} attrs=[{I64_MAX}, 0] (the last attributes)"


def craft_zero_extent(rng) -> tuple[Prog, str]:
    """An op over empty tensors with huge other dimensions (stride products overflow)."""
    big = int(pick(rng, [2**62, I64_MAX, 2**40, 2**32 + 1]))
    shp = [0, big, big] if rng.random() < 0.5 else [0, 3, big]
    m = Asm()
    kind = str(pick(rng, ["Transpose", "ReduceSum", "Slice", "Pad", "Iota", "DotGeneral",
                           "BroadcastInDim", "Reshape", "Exp"]))
    x = m.input("float64", shp)
    if kind == "Transpose":
        y = m.instr(kind, [x], m.slot("float64", [shp[2], shp[1], shp[0]]), [3, 2, 1, 0])
    elif kind == "ReduceSum":
        y = m.instr(kind, [x], m.slot("float64", [shp[0], shp[2]]), [1, 1])
    elif kind == "Slice":
        y = m.instr(kind, [x], m.slot("float64", shp), [3, 0, 0, 0, 3, *shp, 3, 1, 1, 1])
    elif kind == "Pad":
        y = m.instr(kind, [x], m.slot("float64", [shp[0], shp[1] + 1, shp[2]]),
                    [3, 0, 0, 0, 3, 0, 1, 0, 3, 0, 0, 0])
    elif kind == "Iota":
        y = m.instr(kind, [], m.slot("float64", shp), [3, *shp, DT["float64"], 0])
    elif kind == "DotGeneral":
        w = m.input("float64", [0, shp[2], big])
        y = m.instr(kind, [x, w], m.slot("float64", [0, shp[1], 0, big]), [1, 2, 1, 1, 0, 0])
    elif kind == "BroadcastInDim":
        y = m.instr(kind, [x], m.slot("float64", [2, *shp]), [4, 2, *shp, 3, 1, 2, 3])
    elif kind == "Reshape":
        y = m.instr(kind, [x], m.slot("float64", [0, shp[2], shp[1]]), [])
    else:
        y = m.instr(kind, [x], m.slot("float64", shp), [])
    m.outputs.append(y)
    return m.prog(), f"craft zero_extent {kind} x={tuple(shp)}"


# ---- names, no-op edits, raw bytes ----

def edit_names(p: Prog, rng) -> tuple[Prog, str]:
    """Name counts that disagree with the input/output counts (must be rejected at load)."""
    q = p.copy()
    which = "input_names" if rng.random() < 0.6 else "output_names"
    names = getattr(q, which)
    if names and rng.random() < 0.5:
        names.pop()
        how = "dropped one"
    else:
        names.append(b"forged")
        how = "added one"
    return q, f"names {which} {how}: {len(names)} names"


def edit_same(p: Prog, rng) -> tuple[Prog, str]:
    """Edits that change nothing the evaluator computes: values must equal the seed's."""
    q = p.copy()
    if rng.random() < 0.5:
        q.input_names = [n + b"'" for n in q.input_names]
        return q, "same renamed inputs"
    q.a["consts"] = np.concatenate([q.a["consts"], rng.integers(0, 256, 37).astype(np.uint8)])
    return q, "same 37 unused constant bytes appended"


def edit_raw(data: bytes, rng) -> tuple[bytes, str]:
    """Random bytes, a forged array count, or truncation, with size and checksum recomputed."""
    pay = bytearray(data[32:])
    r = rng.random()
    if r < 0.4:
        at = [int(rng.integers(len(pay))) for _ in range(int(rng.integers(1, 5)))]
        for j in at:
            pay[j] = int(rng.integers(256))
        return seal(bytes(pay)), f"raw bytes at payload {at}"
    if r < 0.7:  # the first array count: the only prefix at a fixed offset
        v = int(pick(rng, [2**64 - 1, 2**63, 2**61, 2**32, len(pay), len(pay) // 8 + 1]))
        pay[0:8] = v.to_bytes(8, "little")
        return seal(bytes(pay)), f"raw slot_dtype count={v}"
    n = int(rng.integers(len(pay)))
    return seal(bytes(pay[:n])), f"raw truncated payload to {n} bytes"


def add_dead_iota(q: Prog, dt: str, elements: int) -> int:
    """Appends to q an Iota of `elements` elements that nothing reads (it still gets a buffer and
    runs); returns its slot."""
    a = q.a
    slot = len(a["slot_dtype"])
    a["slot_dtype"] = np.append(a["slot_dtype"], np.uint8(DT[dt]))
    a["slot_ndim"] = np.append(a["slot_ndim"], np.uint32(1))
    a["shapes"] = np.append(a["shapes"], np.int64(elements))
    a["opcode"] = np.append(a["opcode"], np.uint8(OP["Iota"]))
    a["in_off"] = np.append(a["in_off"], a["in_off"][-1])
    a["out_slots"] = np.append(a["out_slots"], np.uint32(slot))
    a["out_off"] = np.append(a["out_off"], np.uint32(len(a["out_slots"])))
    a["attrs"] = np.append(a["attrs"], np.array([1, elements, DT[dt], 0], np.int64))
    a["attr_off"] = np.append(a["attr_off"], np.uint32(len(a["attrs"])))
    return slot


def craft_nested_arena(rng) -> tuple[Prog, str]:
    """A loop program whose nested programs (a body, a condition, a branch, at any depth) hold
    dead Iotas of 1 GiB to 2^51 bytes: the top-level plan stays small while an evaluation
    would allocate the nested arenas, so workspace_bytes (and load's max_bytes) must count
    them (issue #29: a 968-byte file with arena_bytes 64 allocated 1 GiB)."""
    name = str(pick(rng, ["control_flow", "while_cond"]))
    q = parse(seeds()[name])
    path, node = [], q
    while node.subs and (not path or rng.random() < 0.5):
        k = int(rng.integers(len(node.subs)))
        path.append(k)
        node = node.subs[k]
    dt = str(pick(rng, ["float64", "int64"]))
    sizes = [int(pick(rng, [2**27, 2**33, 2**45, 2**48])) for _ in range(int(rng.integers(1, 3)))]
    for e in sizes:
        add_dead_iota(node, dt, e)
    return q, f"craft nested_arena {name} sub {path}: dead {dt} iotas of {sizes} elements"


CRAFTED = {"pad": craft_pad, "slice": craft_slice, "concat": craft_concat,
           "arena": craft_arena, "zero": craft_zero_extent, "walk": craft_attr_walk,
           "nested_arena": craft_nested_arena}
# (kind, weight): seed edits, crafted programs (one in 500 an arena wrap: those files are big)
PLAN = [("field", 40), ("attr", 20), ("nested", 8), ("pad_seed", 3), ("pad", 3), ("slice", 4), ("concat", 3),
        ("zero", 6), ("walk", 1), ("arena", 0.2), ("nested_arena", 2), ("names", 4), ("same", 3),
        ("raw", 8)]


def forge(index: int, seed: int = 0) -> tuple[str, bytes, str]:
    """Forgery `index` of run `seed`: (seed program name, file bytes, description)."""
    rng = np.random.default_rng([seed, index])
    kinds, w = zip(*PLAN)
    w = np.array(w, float)
    kind = kinds[rng.choice(len(kinds), p=w / w.sum())]
    if kind in CRAFTED:
        prog, desc = CRAFTED[kind](rng)
        return "-", prog.to_bytes(), desc
    names = sorted(seeds()) if kind != "pad_seed" else ["grad_slice_pad"]
    name = names[int(rng.integers(len(names)))]
    data = seeds()[name]
    if kind == "raw":
        data, desc = edit_raw(data, rng)
        return name, data, desc
    if kind == "nested":
        names = ["control_flow", "while_cond"]
        name = names[int(rng.integers(len(names)))]
        data = seeds()[name]
    fn = {"field": edit_fields, "attr": edit_attrs, "nested": edit_nested, "pad_seed": craft_pad_seed,
          "names": edit_names, "same": edit_same}[kind]
    prog, desc = fn(parse(data), rng)
    return name, prog.to_bytes(), desc


def write_dir(out: Path, n: int, seed: int = 0) -> Path:
    """Forged files NNNNNN.tidu, the seeds as seed_<name>.tidu, and manifest.txt
    (index<TAB>seed<TAB>description per line)."""
    out.mkdir(parents=True, exist_ok=True)
    for name, data in seeds().items():
        (out / f"seed_{name}.tidu").write_bytes(data)
    lines = []
    for i in range(n):
        name, data, desc = forge(i, seed)
        (out / f"{i:06d}.tidu").write_bytes(data)
        lines.append(f"{i}\t{name}\t{desc}")
    (out / "manifest.txt").write_text("\n".join(lines) + "\n")
    return out
