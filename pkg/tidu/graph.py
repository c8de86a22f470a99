"""The graph engine (the seeds' computegraph): identity, fragments, resolve, materialize_merge, compile.

Everything structural lives in the C++ core (``tidu._core``): values and ops are hash-consed to
dense 32-bit ids there, fragments store ids, and traversal, materialize and compile run there.
This module gives those ids a Python face and owns the hashable objects the core only sees as
integers: InputKeys, op instances, modes and abstract values.

This layer is generic: it names no primitive and knows nothing of differentiation.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Hashable, Iterable, Sequence

import numpy as np

from tidu import _core

__all__ = [
    "AbstractValue", "aval", "GraphOp", "OpMode", "PRIMAL", "Linear", "ValKey", "Local", "External",
    "Fragment", "FragmentBuilder", "ResolvedView", "ValDef", "resolve", "MaterializedGraph",
    "materialize_merge", "compile", "CompiledProgram", "GraphError", "input_key_id", "program_cache",
]


class GraphError(ValueError):
    """A structural problem with a graph: dangling reference, unknown key, bad output."""


# ---- abstract values ----

_DTYPES = {np.dtype(n) for n in
           ("float32", "float64", "complex64", "complex128", "int32", "int64", "bool")}


# The most elements an array may have (product of its non-zero dimensions): 2^48, so that byte
# sizes, strides and offsets fit in 64 bits with room to spare (cpp/include/tidu/checked.hpp).
MAX_ELEMENTS = 1 << 48


class AbstractValue:
    """Shape and dtype of a value; interned, so `is` and `==` agree and `.id` is dense."""

    __slots__ = ("shape", "dtype", "id", "size", "__weakref__")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, id_: int):
        self.shape = shape
        self.dtype = dtype
        self.id = id_
        self.size = math.prod(shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"

    def __reduce__(self):
        return (aval, (self.shape, self.dtype.name))


_avals: dict[tuple, AbstractValue] = {}
_aval_list: list[AbstractValue] = []
_lock = threading.Lock()


def aval(shape: Sequence[int] | int, dtype: Any) -> AbstractValue:
    """The interned abstract value for (shape, dtype); raises on an unsupported dtype or shape."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    key = (tuple(shape), dtype)
    hit = _avals.get(key)
    if hit is not None:
        return hit
    dt = np.dtype(dtype)
    if not dt.isnative:  # a big-endian array's values, converted where the program reads them
        dt = dt.newbyteorder("=")
    if dt not in _DTYPES:
        raise TypeError(f"unsupported dtype {dt}; tidu supports "
                        f"{', '.join(sorted(d.name for d in _DTYPES))}")
    shp = tuple(int(d) for d in shape)
    if any(d < 0 for d in shp):
        raise ValueError(f"negative dimension in shape {shp}")
    if math.prod(d for d in shp if d) > MAX_ELEMENTS:  # as the C++ validator (checked.hpp)
        raise ValueError(f"shape {shp} has more than 2**48 elements (the product of its non-zero "
                         "dimensions), the most an array may hold")
    with _lock:
        canon = _avals.get((shp, dt.name))
        if canon is None:
            canon = AbstractValue(shp, dt, len(_aval_list))
            _aval_list.append(canon)
            _avals[(shp, dt.name)] = canon
        _avals[key] = canon
    return canon


def aval_of(aval_id: int) -> AbstractValue:
    return _aval_list[aval_id]


# ---- ops and modes ----

class GraphOp:
    """An immutable, hashable primitive instance: its kind plus static attributes.

    Subclasses (usually frozen dataclasses) define ``name``, ``n_outputs`` and
    ``abstract_eval(*avals)``, which returns the output AbstractValue (a tuple of them when
    ``n_outputs > 1``) or raises TypeError/ValueError naming the problem.
    """

    n_outputs: int = 1

    @property
    def name(self) -> str:
        return type(self).__name__

    def abstract_eval(self, *avals: AbstractValue):
        raise NotImplementedError(f"{self.name} has no shape/dtype rule")

    def attrs(self) -> list[str]:
        """Static attributes as printed in listings, e.g. ``["axes=(0,)"]``."""
        fields = getattr(self, "__dataclass_fields__", {})
        return [f"{k}={getattr(self, k)!r}" for k in fields if k != "data"]

    def describe(self, args: Sequence[str] = ()) -> str:
        """The op applied to printed args, e.g. ``ReduceSum(Local(t0), axes=(0,))``."""
        return f"{self.name}({', '.join([*args, *self.attrs()])})"


class OpMode:
    """Primal (active_mask None) or Linear(active_mask); part of an op's identity.

    Interned: ``Linear(mask)`` returns one shared instance per mask, with its hash precomputed
    (modes are looked up once per emitted op)."""

    __slots__ = ("active_mask", "_hash")

    def __init__(self, active_mask: tuple[bool, ...] | None = None):
        self.active_mask = active_mask
        self._hash = hash(("OpMode", active_mask))

    def __eq__(self, other):
        return isinstance(other, OpMode) and other.active_mask == self.active_mask

    def __hash__(self):
        return self._hash

    def __reduce__(self):
        return (OpMode, (self.active_mask,))

    @property
    def is_linear(self) -> bool:
        return self.active_mask is not None

    def __repr__(self) -> str:
        return f"OpMode({self.active_mask!r})"

    def __str__(self) -> str:
        if self.active_mask is None:
            return "Primal"
        return "Linear[" + ", ".join("active" if a else "fixed" for a in self.active_mask) + "]"


PRIMAL = OpMode()
_linear_modes: dict[tuple, OpMode] = {}


def Linear(active_mask: Iterable[bool]) -> OpMode:  # noqa: N802 - reads like the seeds' enum
    mask = tuple(active_mask)
    mode = _linear_modes.get(mask)
    if mode is None:
        mode = OpMode(tuple(bool(a) for a in mask))
        _linear_modes[mask] = mode
    return mode


class _Interned:
    """Hashable objects -> dense ids (the C++ core sees only the ids)."""

    __slots__ = ("ids", "objs")

    def __init__(self, first: Iterable = ()):
        self.ids: dict = {}
        self.objs: list = []
        for x in first:
            self.id(x)

    def id(self, obj) -> int:
        try:
            i = self.ids.get(obj)
        except TypeError:
            i = None  # ids_of names the unhashable object
        return i if i is not None else self.ids_of((obj,))[0]


    def ids_of(self, objs: Iterable) -> list[int]:
        """id() of each of objs, under one lock (a new object is hashed once, not twice)."""
        with _lock:
            return _core.intern_ids(self.ids, self.objs, objs)


_input_keys = _Interned()
_prims = _Interned()
_modes = _Interned([PRIMAL])


def input_key_id(key: Hashable) -> int:
    return _input_keys.id(key)


def input_key_ids(keys: Iterable[Hashable]) -> list[int]:
    """input_key_id of each key, under one lock."""
    return _input_keys.ids_of(keys)


def prim_id(op: GraphOp) -> int:
    return _prims.id(op)


def mode_id(mode: OpMode) -> int:
    return _modes.id(mode)


def prim_of(pid: int) -> GraphOp:
    return _prims.objs[pid]


def mode_of(mid: int) -> OpMode:
    return _modes.objs[mid]


# ---- keys and references ----

# ValKey(id): the global identity of a value, Input(key) or Derived(OpKey, output_slot), as an
# interned id; compiled (_core.ValKey: made hundreds of times per transform).  Its Python parts:
ValKey = _core.ValKey


def _not_an_input(k: ValKey):
    raise GraphError(f"{k!r} is not an input")


def _op_key_of(k: ValKey) -> tuple[GraphOp, tuple[ValKey, ...], OpMode] | None:
    op, _, _ = _core.val_info(k.id)
    if op == _core.NONE:
        return None
    prim, mode, ins, _, _ = _core.op_info(op)
    return prim_of(prim), tuple(ValKey(i) for i in ins), mode_of(mode)


def _key_repr(k: ValKey) -> str:
    op, index, _ = _core.val_info(k.id)
    if op == _core.NONE:
        return f"Input({_input_keys.objs[index]!r})"
    prim, _, _, _, n_out = _core.op_info(op)
    slot = f"[{index}]" if n_out > 1 else ""
    return f"Derived({prim_of(prim).name}#{op}{slot})"


_core.bind_keys(_aval_list, _input_keys.objs, (_not_an_input, _op_key_of, _key_repr))


@dataclass(frozen=True)
class Local:
    """Reference to a value defined in the fragment being built (by local id)."""

    id: int


@dataclass(frozen=True)
class External:
    """Reference to a value defined elsewhere, by global key."""

    key: ValKey


ValRef = Local | External


# ---- fragments ----

class Fragment:
    """Local values and ops plus references to others; produced by build, differentiate, transpose."""

    __slots__ = ("store", "parents", "prefix", "_inputs", "outputs", "__weakref__")

    def __init__(self, store: _core.FragmentStore, parents: Sequence[Fragment], prefix: str,
                 outputs: Sequence[ValKey]):
        self.store = store
        self.parents = tuple(parents)
        self.prefix = prefix
        self._inputs = None
        self.outputs = list(outputs)

    @property
    def inputs(self) -> list[ValKey]:
        """The fragment's inputs (made on first use: the transforms' own fragments seldom need
        them)."""
        if self._inputs is None:
            store = self.store
            self._inputs = [ValKey(store.global_of(int(i))) for i in store.inputs()]
        return self._inputs

    @property
    def n_vals(self) -> int:
        return self.store.n_vals

    @property
    def n_ops(self) -> int:
        return self.store.n_ops

    def local_of(self, key: ValKey) -> int | None:
        local = self.store.local_of(key.id)
        return None if local < 0 else local

    def key_of(self, local: int) -> ValKey:
        return ValKey(self.store.global_of(local))

    def defines(self, key: ValKey) -> bool:
        return self.store.local_of(key.id) >= 0

    def ops(self) -> list[tuple[GraphOp, list[ValRef], list[int], OpMode]]:
        """(op, input refs, output local ids, mode) per local op, in construction order."""
        out = []
        store = self.store
        for o in store.ops():
            prim, mode, ins, first, n_out = _core.op_info(int(o))
            refs = []
            for v in ins:
                local = store.local_of(v)
                refs.append(Local(local) if local >= 0 else External(ValKey(v)))
            first_local = store.local_of(first)
            out.append((prim_of(prim), refs, list(range(first_local, first_local + n_out)),
                        mode_of(mode)))
        return out

    def __str__(self) -> str:
        return _listing(self)

    def to_dot(self, parents: bool = True) -> str:
        """Graphviz DOT text: inputs, ops (Primal and Linear styled apart) and, with
        ``parents``, External references as edges from the parent fragments (tidu.pictures)."""
        from tidu import pictures  # a leaf module of the front end, naming no primitive

        return pictures.fragment_to_dot(self, parents)

    def __repr__(self) -> str:
        return f"<Fragment {self.prefix}: {self.n_vals} values, {self.n_ops} ops>"


def _name_in(frags: Sequence[Fragment], key: ValKey, seen: set) -> str | None:
    """Local name of key in the nearest ancestor fragment that defines it."""
    for f in frags:
        if id(f) in seen:
            continue
        seen.add(id(f))
        local = f.store.local_of(key.id)
        if local >= 0:
            return f"{f.prefix}{local}"
        name = _name_in(f.parents, key, seen)
        if name is not None:
            return name
    return None


def _listing(frag: Fragment) -> str:
    """The seeds' notation: ``t1 = Mul(External(p1), Local(t0)) mode=Linear[fixed, active]``."""
    p = frag.prefix
    lines = []
    input_locals = {int(i) for i in frag.store.inputs()}
    for i in sorted(input_locals):
        k = frag.key_of(i)
        lines.append(f"{p}{i} = Input({k.input_key!r}: {k.aval})")
    for op, refs, outs, mode in frag.ops():
        args = []
        for r in refs:
            if isinstance(r, Local):
                args.append(f"Local({p}{r.id})")
            else:
                name = _name_in(frag.parents, r.key, set())
                if name is None and r.key.is_input:
                    name = repr(r.key.input_key)
                args.append(f"External({name or repr(r.key)})")
        lhs = ", ".join(f"{p}{o}" for o in outs)
        desc = op.describe(args)
        out_aval = frag.key_of(outs[0]).aval
        lines.append(f"{lhs} = {desc} mode={mode} :{out_aval}")
        sub = getattr(op, "sub_listing", None)  # control flow: its bodies, indented
        if sub is not None:
            lines.append(sub())
    outs = ", ".join(
        f"{p}{frag.local_of(k)}" if frag.defines(k) else f"External({k!r})" for k in frag.outputs)
    lines.append(f"outputs: [{outs}]")
    return "\n".join(lines)


_rule_memo: dict[tuple, tuple[int, list[int]]] = {}


def shape_rule(op: GraphOp, in_avals: tuple[int, ...]) -> tuple[int, list[int]]:
    """(op's prim id, its output aval ids) at operand aval ids in_avals; raises as the op's shape
    rule does.  Shape rules are pure in (op, operand avals): memoised (tracing and the AD rules
    emit the same few over and over)."""
    key = (op, in_avals)
    hit = _rule_memo.get(key)
    if hit is None:
        out = op.abstract_eval(*[_aval_list[a] for a in in_avals])
        out_avals = out if isinstance(out, tuple) else (out,)
        if len(out_avals) != op.n_outputs:
            raise GraphError(f"{op.name}: shape rule gave {len(out_avals)} outputs, "
                             f"expected {op.n_outputs}")
        hit = _rule_memo[key] = (prim_id(op), [a.id for a in out_avals])
    return hit


class FragmentBuilder:
    """Builds one fragment: inputs, ops (shape-checked, hash-consed), outputs."""

    def __init__(self, parents: Sequence[Fragment] = (), prefix: str = "p"):
        self.store = _core.FragmentStore()
        self.parents = list(parents)
        self.prefix = prefix

    def add_input(self, key: Hashable, av: AbstractValue) -> int:
        """Declare Input(key) at abstract value av; returns its local id."""
        return self.store.add_input(_core.intern_input(input_key_id(key), av.id))

    def add_inputs(self, keys: Sequence[Hashable], avals: Sequence[AbstractValue]) -> list[int]:
        """add_input of each (key, aval) pair, in one pass; returns their local ids."""
        return self.store.add_inputs(_input_keys.ids_of(keys), [av.id for av in avals])

    def key(self, ref: ValRef | ValKey) -> ValKey:
        """Global key of a reference."""
        if isinstance(ref, ValKey):
            return ref
        if isinstance(ref, Local):
            return ValKey(self.store.global_of(ref.id))
        if isinstance(ref, External):
            return ref.key
        raise TypeError(f"expected Local, External or ValKey, got {type(ref).__name__}")

    def aval(self, ref: ValRef | ValKey) -> AbstractValue:
        return self.key(ref).aval

    def add_op(self, op: GraphOp, inputs: Sequence[ValRef | ValKey], mode: OpMode = PRIMAL) -> list[int]:
        """Add op over inputs in mode; returns the local ids of its outputs (existing ones if the
        same op is already local: hash-consing)."""
        store = self.store
        ids = []
        for r in inputs:
            t = type(r)
            if t is Local:
                ids.append(store.global_of(r.id))
            elif t is External or t is ValKey:
                ids.append(r.key.id if t is External else r.id)
            else:
                raise TypeError(f"expected Local, External or ValKey, got {type(r).__name__}")
        mask = mode.active_mask
        if mask is not None and len(mask) != len(ids):
            raise GraphError(f"{op.name}: active mask {mode} has {len(mask)} entries "
                             f"for {len(ids)} inputs")
        hit = shape_rule(op, tuple([_core.val_aval(v) for v in ids]))
        first = store.add_op(hit[0], mode_id(mode), ids, hit[1])
        return list(range(first, first + len(hit[1])))

    def emit(self, op: GraphOp, args: Sequence, mode: OpMode = PRIMAL) -> int:
        """Fast path for AD rules: args are local ids (int) or ValKeys; returns the local id
        of output 0.  Same checks and hash-consing as add_op."""
        store = self.store
        ids = [store.global_of(a) if type(a) is int else a.id for a in args]
        mask = mode.active_mask
        if mask is not None and len(mask) != len(ids):
            raise GraphError(f"{op.name}: active mask {mode} has {len(mask)} entries "
                             f"for {len(ids)} inputs")
        hit = shape_rule(op, tuple([_core.val_aval(v) for v in ids]))
        return store.add_op(hit[0], mode_id(mode), ids, hit[1])

    def local_of(self, key: ValKey) -> int | None:
        local = self.store.local_of(key.id)
        return None if local < 0 else local

    def build(self, outputs: Sequence[ValRef | ValKey]) -> Fragment:
        keys = [self.key(r) for r in outputs]
        return Fragment(self.store, self.parents, self.prefix, keys)


# ---- resolve ----

@dataclass(frozen=True)
class ValDef:
    """How a value is defined: an input (op is None) or output `output_slot` of op over inputs."""

    key: ValKey
    input_key: Hashable | None = None
    op: GraphOp | None = None
    inputs: tuple[ValKey, ...] = ()
    mode: OpMode = PRIMAL
    output_slot: int = 0


class ResolvedView:
    """A logical view over fragments and their parents: which fragment defines each key."""

    def __init__(self, fragments: Sequence[Fragment]):
        roots = []
        for f in fragments:
            # Derived-fragment records (e.g. ad.LinearFragment) resolve as their fragment.
            f = getattr(f, "fragment", f)
            if not isinstance(f, Fragment):
                raise TypeError(f"resolve expects Fragments, got {type(f).__name__}")
            roots.append(f)
        order: list[Fragment] = []
        seen: set[int] = set()
        stack = list(reversed(roots))
        while stack:
            f = stack.pop()
            if id(f) in seen:
                continue
            seen.add(id(f))
            order.append(f)
            stack.extend(reversed(f.parents))
        self.roots = roots
        self.fragments = order
        self.store = _core.ViewStore([f.store for f in order])

    def defines(self, key: ValKey) -> bool:
        return self.store.defines(key.id)

    def resolve_val(self, key: ValKey) -> ValDef | None:
        """The definition of key, or None when no fragment of the view defines it."""
        if not self.store.defines(key.id):
            return None
        spec = key.op_key()
        if spec is None:
            return ValDef(key, input_key=key.input_key)
        op, ins, mode = spec
        return ValDef(key, op=op, inputs=ins, mode=mode, output_slot=key.output_slot)

    def walk(self, outputs: Sequence[ValKey]):
        """Reachable values/ops from outputs in topological order (C++), or a GraphError."""
        ids = []
        for k in outputs:
            if not isinstance(k, ValKey):
                raise TypeError(f"outputs must be ValKeys, got {type(k).__name__}")
            ids.append(k.id)
        try:
            return self.store.walk(ids)
        except _core.DanglingReference as e:
            key = ValKey(e.val)
            raise GraphError(f"dangling reference: {key!r} ({key.aval}) is reachable from the "
                             f"requested outputs but no fragment in the view defines it") from None


def resolve(fragments: Sequence[Fragment]) -> ResolvedView:
    """Make external references traceable: a cheap logical view (no copying, no CSE)."""
    return ResolvedView(fragments)


# ---- materialize_merge ----

class MaterializedGraph:
    """The flattened, de-duplicated reachable graph in one topological order."""

    def __init__(self, mat: _core.Materialized):
        self._mat = mat

    @property
    def vals(self) -> list[ValKey]:
        return [ValKey(v) for v in self._mat.vals]

    @property
    def inputs(self) -> list[ValKey]:
        return self._mat.input_keys()

    @property
    def outputs(self) -> list[ValKey]:
        return self._mat.output_keys()

    @property
    def n_ops(self) -> int:
        return self._mat.n_ops

    def ops(self) -> list[tuple[GraphOp, list[ValKey], list[ValKey], OpMode]]:
        """(op, input keys, output keys, mode) in topological order."""
        out = []
        for o in self._mat.ops:
            prim, mode, ins, first, n_out = _core.op_info(int(o))
            out.append((prim_of(prim), [ValKey(i) for i in ins],
                        [ValKey(first + k) for k in range(n_out)], mode_of(mode)))
        return out

    def to_dot(self) -> str:
        """Graphviz DOT text of the graph (tidu.pictures)."""
        from tidu import pictures

        return pictures.graph_to_dot(self)

    def __str__(self) -> str:
        names = {v.id: f"v{i}" for i, v in enumerate(self.vals)}
        lines = [f"{names[k.id]} = Input({k.input_key!r}: {k.aval})" for k in self.inputs]
        for op, ins, outs, mode in self.ops():
            lines.append(f"{', '.join(names[o.id] for o in outs)} = "
                         f"{op.describe([names[i.id] for i in ins])} mode={mode}")
        lines.append(f"outputs: [{', '.join(names[o.id] for o in self.outputs)}]")
        return "\n".join(lines)


def materialize_merge(view: ResolvedView, outputs: Sequence[ValKey]) -> MaterializedGraph:
    """Flatten the view's reachable part from outputs: de-duplicated by key, one topological order."""
    if isinstance(view, Fragment):
        view = resolve([view])
    return MaterializedGraph(view.walk(list(outputs)))


# ---- compile ----

class Executable:
    """A compiled instruction stream shared by all programs of one normalised structure."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        self.arrays = arrays
        self.n_slots = len(arrays["slot_aval"])
        self._slot_avals = None
        self.input_slots = arrays["input_slots"]
        self.output_slots = arrays["output_slots"]
        self._instructions = None
        self._native = None
        self._xla: dict = {}  # XlaRunners by (batch, device or mesh)
        self._auto = None

    @property
    def slot_avals(self) -> list[AbstractValue]:
        """Each slot's abstract value, made on first use (the interpreter needs none of them)."""
        if self._slot_avals is None:
            self._slot_avals = [_aval_list[a] for a in self.arrays["slot_aval"].tolist()]
        return self._slot_avals

    @property
    def instructions(self) -> list[tuple[GraphOp, list[int], list[int]]]:
        """(op, input slots, output slots) per instruction, built on first use."""
        if self._instructions is None:
            a = self.arrays
            ops = [prim_of(p) for p in a["instr_prim"].tolist()]
            in_off, in_slots = a["in_off"].tolist(), a["in_slots"].tolist()
            out_off, out_slots = a["out_off"].tolist(), a["out_slots"].tolist()
            self._instructions = [
                (op, in_slots[in_off[i]:in_off[i + 1]], out_slots[out_off[i]:out_off[i + 1]])
                for i, op in enumerate(ops)]
        return self._instructions

    @property
    def native(self):
        """The C++ program (tidu._eval.Program), or None when some op has no C++ kernel
        (a user primitive evaluated by its Python ``impl``)."""
        if self._native is None:
            from tidu import evaluator  # the evaluator bridge; graph itself names no primitive

            try:  # encode raises NotImplementedError at the first op with no C++ kernel
                self._native = evaluator.encode(self.arrays)
            except NotImplementedError:
                self._native = False
        return self._native or None

    def run(self, inputs: Sequence[np.ndarray], out=None) -> list[np.ndarray]:
        """Evaluate: the C++ interpreter, or each op's Python ``impl`` for programs holding a
        primitive with no C++ kernel."""
        native = self.native
        if native is not None:
            return native.run(list(inputs), out)
        return self.run_python(inputs)

    def xla(self, batch: int | None = None, device=None, mesh=None):
        """The program compiled through XLA (``tidu.xla``), once per batch size and placement."""
        from tidu import xla

        key = (batch, device if mesh is None else ("mesh", mesh))  # equal meshes share one
        runner = self._xla.get(key)
        if runner is None:
            runner = self._xla.setdefault(key, xla.XlaRunner(self, batch, device, mesh))
        return runner

    def auto_backend(self) -> str:
        """The backend ``"auto"`` picks for this program (``tidu.xla.choose_backend``)."""
        if self._auto is None:
            from tidu import xla

            self._auto = xla.choose_backend(self)
        return self._auto

    def run_python(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Reference evaluation through each op's ``impl`` (numpy)."""
        slots: list[Any] = [None] * self.n_slots
        for s, x in zip(self.input_slots, inputs):
            slots[s] = x
        for op, ins, outs in self.instructions:
            res = op.impl(*[slots[i] for i in ins])
            if len(outs) == 1:
                slots[outs[0]] = res
            else:
                for s, r in zip(outs, res):
                    slots[s] = r
        return [np.array(slots[s], dtype=self.slot_avals[s].dtype, copy=True).reshape(
            self.slot_avals[s].shape) for s in self.output_slots]


BACKENDS = ("cpu", "xla", "auto")


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; available: {', '.join(map(repr, BACKENDS))}")


def _input_name(key) -> str:
    """An input's name in a saved file (CompiledProgram.input_names): a str as it is, a key's
    own ``input_name(name_of)`` where it has one (tidu.rules' tangent and cotangent keys), else
    its repr."""
    if isinstance(key, str):
        return key
    hook = getattr(key, "input_name", None)
    return hook(_input_name) if callable(hook) else repr(key)


class CompiledProgram:
    """An SSA program: ``prog(mapping)`` or ``prog.eval(list_in_input_order)``.

    ``backend`` is where ``eval`` runs it: ``"cpu"`` (the C++ interpreter) or ``"xla"``
    (StableHLO through XLA on ``device``)."""

    def __init__(self, executable: Executable, graph: MaterializedGraph, backend: str = "cpu",
                 device=None):
        self.executable = executable
        self.graph = graph
        self.backend = backend
        self.device = device
        self.input_vals = graph.inputs
        self.inputs = [k.input_key for k in self.input_vals]
        self.outputs = graph.outputs
        self._input_avals = [k.aval for k in self.input_vals]
        self._run = None  # the C++ entry point, bound on first use

    @property
    def n_instructions(self) -> int:
        return len(self.executable.arrays["instr_prim"])

    def _check(self, i: int, x, batched: bool = False) -> np.ndarray:
        """Input i as a C-contiguous array of the program's dtype (a copy only when needed);
        a shape or unsafe dtype mismatch raises, naming the input."""
        av = self._input_avals[i]
        if not batched and type(x) is np.ndarray and x.dtype is av.dtype and \
                x.shape == av.shape and x.flags.c_contiguous:
            return x  # zero copy
        arr = np.asarray(x)
        shape = arr.shape[1:] if batched and arr.ndim else arr.shape
        if shape != av.shape or (batched and arr.ndim != av.ndim + 1):
            want = f"(batch, *{av.shape})" if batched else str(av.shape)
            raise ValueError(f"input {self.inputs[i]!r}: expected shape {want}, got {arr.shape}")
        if arr.dtype != av.dtype:
            if not np.can_cast(arr.dtype, av.dtype, casting="same_kind") or \
                    (arr.dtype.kind == "c" and av.dtype.kind != "c"):
                raise TypeError(f"input {self.inputs[i]!r}: expected dtype {av.dtype}, "
                                f"got {arr.dtype}")
            arr = arr.astype(av.dtype)
        return np.require(arr, requirements="C")

    def eval(self, inputs: Sequence[Any], out=None) -> list[np.ndarray]:
        """Evaluate with inputs in ``self.inputs`` order; returns a list of numpy arrays."""
        run = self._run
        if run is None:
            run = self._bind()
        if run and out is None:
            try:  # fast path: C++ checks count, dtype, shape and contiguity itself
                return run(inputs)
            except (TypeError, ValueError):
                pass  # convert below, or raise an error naming the input
        if len(inputs) != len(self.inputs):
            raise ValueError(f"program takes {len(self.inputs)} inputs {self.inputs}, "
                             f"got {len(inputs)}")
        arrs = [self._check(i, x) for i, x in enumerate(inputs)]
        if self.backend == "xla":
            res = self.executable.xla(device=self.device).run(arrs)
            return res if out is None else _copy_out(res, out)
        return self.executable.run(arrs, out)

    def runner(self):
        """The C++ interpreter's entry point for this program (a callable taking a list of
        inputs, which checks them itself), or None where ``eval`` must go through Python."""
        run = self._run
        if run is None:
            run = self._bind()
        return run or None

    def _bind(self):
        """The entry point ``eval`` calls first: the C++ interpreter's (which checks its inputs
        itself), or False to go through the checks in Python (XLA, Python kernels)."""
        native = self.executable.native if self.backend == "cpu" else None
        self._run = native.run if native is not None else False
        return self._run

    def as_stablehlo(self, batch: int | None = None) -> str:
        """The program as StableHLO MLIR text: ``@main(inputs in self.inputs order) -> outputs``;
        with ``batch=B`` every value has a leading axis of size B (as ``eval_batch`` runs it)."""
        from tidu import xla

        return xla.lower(self.executable, batch)

    def eval_batch(self, inputs: Sequence[Any], threads: int | None = None,
                   backend: str | None = None, devices=None,
                   exact: bool = True) -> list[np.ndarray]:
        """Evaluate at many points at once: every input has a leading batch axis of one length;
        the points are independent.

        Args:
            inputs: arrays in ``self.inputs`` order, each with a leading batch axis.
            threads: interpreter threads (default: all cores); blocks are split over them with
                the GIL released.
            backend: ``"cpu"``, ``"xla"`` or None (this program's backend).
            devices: XLA only: split the batch over devices — an int (jax's first n devices), a
                sequence of jax devices, or a ``jax.sharding.Mesh`` (the batch axis is sharded
                over all its axes).  A batch that does not divide evenly is padded.
            exact: interpreter, all-scalar float64 programs: True (default) keeps every point
                bit-identical to ``eval``; False runs exp/log/sin/cos/tanh/expm1/log1p across
                blocks of points through the SIMD array kernels (within 3 ulp of the C library
                per op, as array programs are), several times faster.  Other programs are
                evaluated point by point with the array kernels either way.

        Returns:
            One numpy array per output, with the leading batch axis.
        """
        import os

        backend = backend or self.backend
        _check_backend(backend)
        if backend == "auto":
            backend = self.executable.auto_backend()
        if devices is not None and backend != "xla":
            raise ValueError("devices= needs backend='xla'")
        if len(inputs) != len(self.inputs):
            raise ValueError(f"program takes {len(self.inputs)} inputs {self.inputs}, "
                             f"got {len(inputs)}")
        arrs, batch = [], None
        for i, x in enumerate(inputs):
            a = self._check(i, x, batched=True)
            if batch is not None and a.shape[0] != batch:
                raise ValueError(f"input {self.inputs[i]!r}: batch {a.shape[0]} != {batch}")
            batch = a.shape[0]
            arrs.append(a)
        if backend == "xla":
            return self._eval_batch_xla(arrs, batch or 0, devices)
        native = self.executable.native
        if native is None:
            raise NotImplementedError("eval_batch needs C++ kernels for every op")
        return native.run_batch(arrs, batch or 0, threads or os.cpu_count() or 1, exact)

    def _eval_batch_xla(self, arrs: list[np.ndarray], batch: int, devices) -> list[np.ndarray]:
        from tidu import xla

        if devices is None:
            return self.executable.xla(batch=batch, device=self.device).run(arrs)
        mesh = xla.resolve_devices(devices)
        n = mesh.devices.size
        padded = -(-batch // n) * n if batch else n
        if padded != batch:  # repeat the last point (or zeros for an empty batch), then drop
            arrs = [np.concatenate([a, np.repeat(a[-1:] if batch else
                                                 np.zeros((1,) + a.shape[1:], a.dtype),
                                                 padded - batch, axis=0)]) for a in arrs]
        res = self.executable.xla(batch=padded, mesh=mesh).run(arrs)
        return [r[:batch] for r in res]

    def to_dot(self) -> str:
        """Graphviz DOT text: one node per instruction, edges along slots (tidu.pictures)."""
        from tidu import pictures

        return pictures.program_to_dot(self)

    def input_names(self) -> list[str]:
        """A name per input, in ``self.inputs`` order, as ``save`` writes them: a str key as it
        is (``x``), a cotangent seed ``ct[i]`` (i: the linear output it seeds), a tangent
        ``d<name>``, any other key its repr (a name that would repeat is the key's repr)."""
        names = [_input_name(k) for k in self.inputs]
        seen: dict[str, int] = {}
        for n in names:
            seen[n] = seen.get(n, 0) + 1
        return [n if seen[n] == 1 else repr(k) for n, k in zip(names, self.inputs)]

    def save(self, path, input_names: Sequence[str] | None = None) -> None:
        """Write the program as a versioned .tidu file for ``tidu.load`` or C++
        (``tidu::Program::load``); inputs are named by ``input_names`` (default:
        ``self.input_names()``)."""
        from tidu import evaluator

        ex = self.executable
        if not evaluator.has_kernels(ex.arrays["instr_prim"]):
            raise NotImplementedError("a program holding a primitive with no C++ kernel cannot "
                                      "be saved")
        names = self.input_names() if input_names is None else [str(n) for n in input_names]
        if len(names) != len(self.inputs):
            raise ValueError(f"save: {len(names)} input names for {len(self.inputs)} inputs")
        native = evaluator.encode(ex.arrays, names,
                                  [repr(k) for k in self.outputs])
        with open(path, "wb") as f:
            f.write(native.to_bytes())

    def memory_report(self) -> dict:
        """Arena bytes of the memory plan vs one buffer per slot, and ``saved_bytes``: the
        values computed in Primal mode that Linear-mode instructions read (what a VJP keeps from
        its forward part for its backward part; the plan holds them exactly that long)."""
        native = self.executable.native
        a = self.executable.arrays
        linear = np.array([mode_of(int(m)).is_linear for m in a["instr_mode"]], dtype=bool)
        primal_out = set(a["out_slots"][np.repeat(~linear, np.diff(a["out_off"]))].tolist())
        read_linear = set(a["in_slots"][np.repeat(linear, np.diff(a["in_off"]))].tolist())
        avals = self.executable.slot_avals
        saved = sum(avals[s].size * avals[s].dtype.itemsize for s in primal_out & read_linear)
        if native is None:  # evaluated op by op (a user primitive with no C++ kernel): no arena
            return {"saved_bytes": saved}
        return {"arena_bytes": native.arena_bytes, "naive_bytes": native.naive_bytes,
                "saved_bytes": saved}

    def __call__(self, mapping: dict) -> list[np.ndarray]:
        if not isinstance(mapping, dict):
            raise TypeError("a program is called with a dict {input_key: value}; "
                            "use prog.eval(list) for positional inputs")
        missing = [k for k in self.inputs if k not in mapping]
        if missing:
            raise KeyError(f"missing input(s) {missing}; the program takes {self.inputs}")
        # Keys of inputs this program does not read (e.g. a primal input of a linear derivative)
        # are ignored; a key no fragment ever declared is an error (most likely a typo).
        unknown = [k for k in mapping if k not in _input_keys.ids]
        if unknown:
            raise KeyError(f"unknown input(s) {unknown}; the program takes {self.inputs}")
        return self.eval([mapping[k] for k in self.inputs])

    def __repr__(self) -> str:
        return (f"<CompiledProgram: {len(self.inputs)} inputs, {len(self.outputs)} outputs, "
                f"{self.n_instructions} instructions>")


def _copy_out(res: list[np.ndarray], out) -> list[np.ndarray]:
    if len(out) != len(res):
        raise ValueError(f"out: expected {len(res)} arrays, got {len(out)}")
    for i, (r, o) in enumerate(zip(res, out)):
        if not isinstance(o, np.ndarray) or o.shape != r.shape or o.dtype != r.dtype:
            raise ValueError(f"out[{i}]: expected an array of shape {r.shape} and dtype {r.dtype}")
        o[...] = r
    return list(out)


class ProgramCache:
    """Executables keyed by normalised structure (input keys and pass ids never enter the key)."""

    def __init__(self):
        self._table: dict[bytes, Executable] = {}
        self.hits = 0
        self.misses = 0

    def get_or_build(self, canon: bytes, arrays: dict[str, np.ndarray]) -> Executable:
        exe = self._table.get(canon)
        if exe is None:
            self.misses += 1
            exe = self._table.setdefault(canon, Executable(arrays))
        else:
            self.hits += 1
        return exe

    def clear(self) -> None:
        self._table.clear()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._table)


program_cache = ProgramCache()


def compile(graph: MaterializedGraph, backend: str = "auto",  # noqa: A001 - the seeds' name
            device=None) -> CompiledProgram:
    """SSA slot assignment and dense instruction arrays (C++), through the program cache.

    Args:
        graph: from ``materialize_merge``.
        backend: ``"cpu"`` (the C++ interpreter), ``"xla"`` (StableHLO through XLA, needs the
            ``xla`` extra), or ``"auto"``: XLA for programs with much tensor work, the
            interpreter otherwise (``tidu.xla.choose_backend``).
        device: for XLA: None (jax's default device), a platform name ("cpu", "gpu") or a
            jax Device.

    Returns:
        A CompiledProgram; with backend "xla" it is compiled by XLA on first evaluation.

    Raises:
        ValueError: unknown backend.
        ImportError: backend "xla" without jax installed.
    """
    if not isinstance(graph, MaterializedGraph):
        raise TypeError(f"compile expects a MaterializedGraph (from materialize_merge), "
                        f"got {type(graph).__name__}")
    _check_backend(backend)
    arrays, canon = graph._mat.compile()
    exe = program_cache.get_or_build(canon, arrays)
    if backend == "auto":
        backend = exe.auto_backend() if device is None else "xla"
    if backend == "xla":
        from tidu import xla

        xla.require_jax()
        xla.check_lowerable(exe)
    return CompiledProgram(exe, graph, backend, device)
