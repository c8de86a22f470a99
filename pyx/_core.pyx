# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: language = c++
"""Cython bindings over the C++ graph core: the global key interner, fragment storage, views,
traversal, materialize and SSA compile, and the tracer's hot path (_tracer.pxi).  Many small calls
come through here, so each is thin."""

cimport cython
from libc.stdint cimport uint8_t, uint32_t
from libc.string cimport memcpy
from libcpp cimport bool
from libcpp.utility cimport pair
from libcpp.vector cimport vector

cimport numpy as cnp
import numpy as np

from tidu_core cimport (Id, kNone, FlatMap32, RangeMap, dense_window_of, mix64, KeyInterner, ValRec,
                        OpRec, FragmentData, View, Reachable, topo_walk, forward_activity, SSAProgram, compile_ssa,
                        kLinearizeRule, kTransposeRule, kAccumulateRule, RuleTemplate, RuleCache,
                        make_rule_key, replay_rule, record_rule)

cnp.import_array()

cdef KeyInterner* _I = new KeyInterner()

NONE = kNone


class DanglingReference(LookupError):
    """A reachable value is defined by no fragment of the view; .val is its global id."""

    def __init__(self, val):
        super().__init__(val)
        self.val = val


cdef object _array(const vector[Id]& v):
    cdef cnp.ndarray out = np.empty(v.size(), dtype=np.uint32)
    if v.size():
        memcpy(cnp.PyArray_DATA(out), v.data(), v.size() * sizeof(Id))
    return out


cdef vector[Id] _ids(object seq) except *:
    cdef vector[Id] out
    cdef object x
    out.reserve(len(seq))
    for x in seq:
        out.push_back(<Id>x)
    return out


# ---- interner ----

def intern_input(Id key, Id aval):
    """Global value id of Input(key) at abstract value aval."""
    return _I.intern_input(key, aval)


def n_vals():
    return _I.n_vals()


def n_ops():
    return _I.n_ops()


def interner_bytes():
    """Bytes held by the global interner (values, ops, inputs, hash tables)."""
    return _I.memory_bytes()


def val_info(Id v):
    """(op id or NONE, output slot or input key id, aval id) of value v."""
    if v >= _I.n_vals():
        raise IndexError(f"no value with id {v}")
    cdef const ValRec* r = &_I.val(v)
    return (r.op, r.index, r.aval)


def val_aval(Id v):
    return _I.val(v).aval


def val_avals(vals):
    """val_aval of each value id."""
    cdef vector[Id] v = _ids(vals)
    cdef Id n = _I.n_vals()
    out = []
    for i in range(v.size()):
        if v[i] >= n:
            raise IndexError(f"no value with id {v[i]}")
        out.append(_I.val(v[i]).aval)
    return out


def op_info(Id o):
    """(prim id, mode id, input value ids, first output value id, n_out) of op o."""
    if o >= _I.n_ops():
        raise IndexError(f"no op with id {o}")
    cdef const OpRec* r = &_I.op(o)
    cdef const Id* args = _I.op_inputs(o)
    return (r.prim, r.mode, tuple([args[k] for k in range(r.n_in)]), r.first_val, r.n_out)


# ---- keys ----

cdef object _aval_objs = None   # tidu.graph's AbstractValues by aval id (a list it appends to)
cdef object _key_hooks = None   # tidu.graph's (not-an-input error, op_key, repr) of a ValKey
cdef object _input_objs = None  # tidu.graph's InputKeys by id (a list it appends to)


def bind_keys(aval_list, input_keys, hooks):
    """tidu.graph, at import: its AbstractValues and InputKeys by id, and the Python parts of
    ValKey."""
    global _aval_objs, _input_objs, _key_hooks
    _aval_objs = aval_list
    _input_objs = input_keys
    _key_hooks = tuple(hooks)


cdef const ValRec* _val_rec(object v) except NULL:
    if not 0 <= v < _I.n_vals():
        raise IndexError(f"no value with id {v}")
    return &_I.val(<Id>v)


@cython.no_gc  # holds an int: never part of a cycle, so the collector need not track it
cdef class ValKey:
    """Global identity of a value: Input(key) or Derived(OpKey, output_slot), as an interned
    id.  ``ValKey(id)``.  A transform makes hundreds (one per input, output and rule result),
    so construction, hash (``id ^ 0x5BD1E9955BD1E995``: no tuple per call) and equality are
    compiled, and the collector does not track them."""

    cdef readonly object id
    cdef Py_hash_t _hash

    def __cinit__(self, id_):
        if type(id_) is not int:
            id_ = int(id_)
        self.id = id_
        if 0 <= id_ < 0x1000000000000:  # Python's hash of (id ^ K): that int mod 2**61 - 1
            self._hash = <Py_hash_t>((<unsigned long long>id_ ^ 0x5BD1E9955BD1E995ULL)
                                     % 0x1FFFFFFFFFFFFFFFULL)
        else:
            self._hash = hash(id_ ^ 0x5BD1E9955BD1E995)

    def __eq__(self, other):
        return type(other) is ValKey and (<ValKey>other).id == self.id

    def __ne__(self, other):
        return not (type(other) is ValKey and (<ValKey>other).id == self.id)

    def __hash__(self):
        return self._hash

    def __reduce__(self):
        return ValKey, (self.id,)

    def __repr__(self):
        return _key_hooks[2](self)

    @property
    def aval(self):
        return _aval_objs[_val_rec(self.id).aval]

    @property
    def shape(self):
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype

    @property
    def ndim(self):
        return self.aval.ndim

    @property
    def is_input(self):
        return _val_rec(self.id).op == kNone

    @property
    def output_slot(self):
        cdef const ValRec* r = _val_rec(self.id)
        return 0 if r.op == kNone else r.index

    @property
    def input_key(self):
        """The InputKey of an input value (GraphError for a derived one)."""
        cdef const ValRec* r = _val_rec(self.id)
        if r.op != kNone:
            _key_hooks[0](self)  # raises the GraphError
        return _input_objs[r.index]

    def op_key(self):
        """(op, input keys, mode) of a derived value; None for an input."""
        return _key_hooks[1](self)


@cython.no_gc  # interned for good, like its primal key: the collector need not track it
cdef class Tangent:
    """The tangent input key of primal input `key` in differentiate pass `pass_id`
    (differentiate makes one per input it differentiates: compiled, as ValKey)."""

    cdef readonly object key
    cdef readonly object pass_id

    def __init__(self, key, pass_id):
        self.key = key
        self.pass_id = pass_id

    def __eq__(self, other):
        if type(other) is not Tangent:
            return NotImplemented
        return (self.key, self.pass_id) == ((<Tangent>other).key, (<Tangent>other).pass_id)

    def __ne__(self, other):
        if type(other) is not Tangent:
            return NotImplemented
        return (self.key, self.pass_id) != ((<Tangent>other).key, (<Tangent>other).pass_id)

    def __hash__(self):
        return hash((self.key, self.pass_id))

    def __repr__(self):
        return f"d{self.key!r}@{self.pass_id}"

    def __reduce__(self):
        return Tangent, (self.key, self.pass_id)

    def input_name(self, name_of):
        """Its name in a saved program: d<primal's name>."""
        return "d" + name_of(self.key)


# ---- fragments ----

cdef class FragmentStore:
    """Local values and ops of one fragment, as global ids; C++ owns the storage."""
    cdef FragmentData data

    def add_input(self, Id v):
        """Declare Input value v as an input; returns its local id."""
        if v >= _I.n_vals():
            raise IndexError(f"no value with id {v}")
        return self.data.add_input(_I[0], v)

    def add_inputs(self, key_ids, aval_ids):
        """Declare Input(key_ids[i]) at abstract value aval_ids[i] as inputs; returns their
        local ids (add_input(intern_input(k, a)) for each pair, in one call)."""
        cdef vector[Id] k = _ids(key_ids), a = _ids(aval_ids)
        cdef size_t i
        if k.size() != a.size():
            raise ValueError(f"{k.size()} input keys for {a.size()} abstract values")
        out = []
        for i in range(k.size()):
            out.append(self.data.add_input(_I[0], _I.intern_input(k[i], a[i])))
        return out

    def add_op(self, Id prim, Id mode, args, out_avals):
        """Intern the op and make it local; returns the local id of output slot 0."""
        cdef vector[Id] a = _ids(args)
        cdef vector[Id] o = _ids(out_avals)
        return self.data.add_op(_I[0], prim, mode, a.data(), a.size(), o.data(), o.size())

    def emit(self, Id prim, Id mode, args, Id aval):
        """Single-output op; returns the global id of its output."""
        cdef vector[Id] a = _ids(args)
        cdef Id l = self.data.add_op(_I[0], prim, mode, a.data(), a.size(), &aval, 1)
        return self.data.vals[l]

    def emit0(self, Id prim, Id aval):
        cdef Id l = self.data.add_op(_I[0], prim, 0, NULL, 0, &aval, 1)
        return self.data.vals[l]

    def emit1(self, Id prim, Id mode, Id a, Id aval):
        if a >= _I.n_vals():
            raise IndexError(f"no value with id {a}")
        cdef Id l = self.data.add_op(_I[0], prim, mode, &a, 1, &aval, 1)
        return self.data.vals[l]

    def emit2(self, Id prim, Id mode, Id a, Id b, Id aval):
        cdef Id args[2]
        args[0] = a
        args[1] = b
        if a >= _I.n_vals() or b >= _I.n_vals():
            raise IndexError(f"no value with id {max(a, b)}")
        cdef Id l = self.data.add_op(_I[0], prim, mode, args, 2, &aval, 1)
        return self.data.vals[l]

    def local_of(self, Id v):
        """Local id of global value v, or -1 when v is not defined here (External)."""
        cdef Id l = self.data.local_of(v)
        return -1 if l == kNone else l

    def global_of(self, Id local):
        if local >= self.data.vals.size():
            raise IndexError(f"no local value t{local}")
        return self.data.vals[local]

    def globals_of(self, locals_):
        """global_of of each local id."""
        cdef vector[Id] l = _ids(locals_)
        cdef size_t n = self.data.vals.size()
        out = []
        for i in range(l.size()):
            if l[i] >= n:
                raise IndexError(f"no local value t{l[i]}")
            out.append(self.data.vals[l[i]])
        return out

    @property
    def n_vals(self):
        return self.data.vals.size()

    @property
    def n_ops(self):
        return self.data.ops.size()

    def vals(self):
        return _array(self.data.vals)

    def ops(self):
        return _array(self.data.ops)

    def inputs(self):
        return _array(self.data.inputs)

    def outputs(self):
        return _array(self.data.outputs)

    def set_outputs(self, locals_):
        cdef vector[Id] o = _ids(locals_)
        cdef Id l
        for l in o:
            if l >= self.data.vals.size():
                raise IndexError(f"no local value t{l}")
        self.data.outputs = o

    def memory_bytes(self):
        return self.data.memory_bytes()


# ---- views, traversal, compile ----

cdef class ViewStore:
    """Which fragment defines each value, over a list of fragment stores (no copying)."""
    cdef View* view
    cdef list stores  # keeps the fragments alive while the view points at them

    def __cinit__(self, stores):
        cdef vector[const FragmentData*] ptrs
        cdef FragmentStore s
        self.stores = list(stores)
        for s in self.stores:
            ptrs.push_back(&s.data)
        self.view = new View(ptrs)

    def __dealloc__(self):
        del self.view

    def defines(self, Id v):
        return self.view.defines(v)

    def walk(self, outputs):
        """Reachable (vals, ops, inputs) from outputs in one topological order, as a Materialized."""
        cdef Materialized m = Materialized()
        m.outputs = _ids(outputs)
        cdef Id bad
        # The GIL stays held: the interner is global and grows under other threads' emits, so a
        # walk without it could read vectors while they reallocate.
        bad = topo_walk(_I[0], self.view[0], m.outputs.data(), m.outputs.size(), m.r)
        if bad != kNone:
            raise DanglingReference(bad)
        return m


cdef class Materialized:
    """C++-held result of a walk: reachable values and ops in topological order."""
    cdef Reachable r
    cdef vector[Id] outputs

    @property
    def vals(self):
        return _array(self.r.vals)

    @property
    def ops(self):
        return _array(self.r.ops)

    @property
    def inputs(self):
        return _array(self.r.inputs)

    @property
    def outputs(self):
        return _array(self.outputs)

    def input_keys(self):
        """The ValKey of each input."""
        cdef Id v
        return [ValKey(v) for v in self.r.inputs]

    def output_keys(self):
        """The ValKey of each output."""
        cdef Id v
        return [ValKey(v) for v in self.outputs]

    @property
    def n_ops(self):
        return self.r.ops.size()

    def active(self, seeds, const uint8_t[::1] nondiff_aval):
        """Values that depend on `seeds` (forward activity); non-differentiable avals stay inactive."""
        cdef vector[Id] s = _ids(seeds)
        cdef FlatMap32 act = FlatMap32(64)
        cdef vector[Id] out
        cdef Id v
        forward_activity(_I[0], self.r.ops, s.data(), s.size(),
                         &nondiff_aval[0] if nondiff_aval.shape[0] else NULL,
                         nondiff_aval.shape[0], act)
        for v in self.r.vals:
            if act.contains(v):
                out.push_back(v)
        return _array(out)

    def compile(self):
        """SSA arrays (dict of uint32 arrays) and the normalised structure key (bytes)."""
        cdef SSAProgram p
        compile_ssa(_I[0], self.r.vals, self.r.ops, self.r.inputs, self.outputs.data(),
                    self.outputs.size(), p)
        arrays = {
            "slot_aval": _array(p.slot_aval),
            "instr_prim": _array(p.instr_prim),
            "instr_mode": _array(p.instr_mode),
            "in_off": _array(p.in_off),
            "in_slots": _array(p.in_slots),
            "out_off": _array(p.out_off),
            "out_slots": _array(p.out_slots),
            "input_slots": _array(p.input_slots),
            "output_slots": _array(p.output_slots),
        }
        canon = (<char*>p.canon.data())[:p.canon.size() * sizeof(Id)]
        return arrays, canon

    def active_ops(self, seeds, const uint8_t[::1] nondiff_aval):
        """Ops (topological) with at least one active input, where activity flows forward from
        `seeds` and never into a non-differentiable abstract value: the ops `differentiate`
        must linearize; every other op has a zero tangent."""
        cdef vector[Id] s = _ids(seeds)
        cdef FlatMap32 act = FlatMap32(64)
        cdef vector[Id] out
        cdef Id o
        cdef size_t k
        cdef const Id* args
        forward_activity(_I[0], self.r.ops, s.data(), s.size(),
                         &nondiff_aval[0] if nondiff_aval.shape[0] else NULL,
                         nondiff_aval.shape[0], act)
        for o in self.r.ops:
            args = _I.op_inputs(o)
            for k in range(_I.op(o).n_in):
                if act.contains(args[k]):
                    out.push_back(o)
                    break
        return _array(out)


def substitute(FragmentStore b, Materialized m, mapping):
    """Re-emit into b the ops of m (a walk) that depend on the keys of `mapping` {value id:
    value id}, with those values replaced; returns m's outputs' value ids after the
    replacement.  Ops that depend on none of them keep their ids (hash-consing), so this is how
    a nested transform binds its fresh inputs to the values it was called with."""
    cdef FlatMap32 sub = FlatMap32(64)
    cdef vector[Id] args
    cdef vector[Id] outs
    cdef Id o, v, w, l, first, prim, mode
    cdef const OpRec* r
    cdef const Id* ins
    cdef size_t k
    cdef bint changed
    for a, c in mapping.items():
        sub.insert(<Id>a, <Id>c)
    for o in m.r.ops:
        r = &_I.op(o)
        ins = _I.op_inputs(o)
        args.clear()
        changed = False
        for k in range(r.n_in):
            v = ins[k]
            w = sub.get(v, kNone)
            if w != kNone:
                v = w
                changed = True
            args.push_back(v)
        if not changed:
            continue
        outs.clear()
        first = r.first_val
        prim = r.prim
        mode = r.mode
        for k in range(r.n_out):
            outs.push_back(_I.val(first + k).aval)
        # add_op may grow the interner: r and ins are not to be read after it
        l = b.data.add_op(_I[0], prim, mode, args.data(), args.size(), outs.data(), outs.size())
        for k in range(outs.size()):
            sub.insert(first + k, b.data.vals[l + k])
    res = []
    for v in m.outputs:
        w = sub.get(v, kNone)
        res.append(v if w == kNone else w)
    return res


cdef cnp.ndarray _gather_ragged(const uint32_t* loc, size_t n, const vector[uint32_t]& off,
                                const vector[cnp.int64_t]& flat, size_t total):
    """The entries flat[off[loc[i]] .. off[loc[i] + 1]) for i in [0, n), end to end (total of
    them): per-item data copied out of a table of distinct items."""
    cdef cnp.ndarray out = np.empty(total, np.int64)
    cdef cnp.int64_t* o = <cnp.int64_t*>cnp.PyArray_DATA(out)
    cdef size_t i, k, j = 0
    for i in range(n):
        for k in range(off[loc[i]], off[loc[i] + 1]):
            o[j] = flat[k]
            j += 1
    return out


def encode_gather(const uint32_t[::1] slot_aval, const uint32_t[::1] instr_prim, aval_code,
                  prim_code):
    """The interpreter's per-slot and per-instruction arrays of a compiled program (tidu.evaluator
    .encode): each distinct abstract value's (dtype code, shape) and each distinct primitive's
    (opcode, int64 attributes, ...) are asked of aval_code / prim_code once, then copied to every
    slot and instruction in one pass.  Returns (slot_dtype, slot_ndim, shapes, opcode, attr_off,
    attrs, prims, p_inv): prims the distinct primitive ids in order of first use, p_inv each
    instruction's index into them.  NotImplementedError: a primitive with no C++ kernel."""
    cdef size_t n_slots = slot_aval.shape[0], n_instr = instr_prim.shape[0], i, k
    cdef FlatMap32 aval_at = FlatMap32(64), prim_at = FlatMap32(64)
    cdef vector[uint8_t] a_dtype, p_op
    cdef vector[uint32_t] a_ndim, a_off, p_off, slot_loc
    cdef vector[cnp.int64_t] a_shape, p_attrs
    cdef Id aid, loc
    cdef long code
    cdef const cnp.int64_t[::1] av
    a_off.push_back(0)
    p_off.push_back(0)
    slot_loc.resize(n_slots)
    cdef cnp.ndarray slot_dtype = np.empty(n_slots, np.uint8)
    cdef cnp.ndarray slot_ndim = np.empty(n_slots, np.uint32)
    cdef uint8_t* sd = <uint8_t*>cnp.PyArray_DATA(slot_dtype)
    cdef uint32_t* sn = <uint32_t*>cnp.PyArray_DATA(slot_ndim)
    cdef size_t total = 0
    for i in range(n_slots):
        aid = slot_aval[i]
        loc = aval_at.get(aid, kNone)
        if loc == kNone:
            loc = <Id>a_dtype.size()
            aval_at.insert(aid, loc)
            c, shape = aval_code(aid)
            a_dtype.push_back(<uint8_t>c)
            a_ndim.push_back(<uint32_t>len(shape))
            for x in shape:
                a_shape.push_back(<cnp.int64_t>x)
            a_off.push_back(<uint32_t>a_shape.size())
        slot_loc[i] = loc
        sd[i] = a_dtype[loc]
        sn[i] = a_ndim[loc]
        total += a_ndim[loc]
    shapes = _gather_ragged(slot_loc.data(), n_slots, a_off, a_shape, total)
    cdef cnp.ndarray opcode = np.empty(n_instr, np.uint8)
    cdef cnp.ndarray attr_off = np.empty(n_instr + 1, np.uint32)
    cdef cnp.ndarray p_inv = np.empty(n_instr, np.uint32)
    cdef uint8_t* oc = <uint8_t*>cnp.PyArray_DATA(opcode)
    cdef uint32_t* ao = <uint32_t*>cnp.PyArray_DATA(attr_off)
    cdef uint32_t* pi = <uint32_t*>cnp.PyArray_DATA(p_inv)
    prims = []
    total = 0
    for i in range(n_instr):
        aid = instr_prim[i]
        loc = prim_at.get(aid, kNone)
        if loc == kNone:
            loc = <Id>p_op.size()
            prim_at.insert(aid, loc)
            hit = prim_code(aid)
            code = hit[0]
            if code < 0 or code > 255:
                raise NotImplementedError("an op has no C++ kernel")
            p_op.push_back(<uint8_t>code)
            av = hit[1]
            for k in range(<size_t>av.shape[0]):
                p_attrs.push_back(av[k])
            p_off.push_back(<uint32_t>p_attrs.size())
            prims.append(aid)
        oc[i] = p_op[loc]
        pi[i] = loc
        ao[i] = <uint32_t>total
        total += p_off[loc + 1] - p_off[loc]
    if total > 0xFFFFFFFF:
        raise ValueError("a program with more than 2^32 attribute values")
    ao[n_instr] = <uint32_t>total
    attrs = _gather_ragged(pi, n_instr, p_off, p_attrs, total)
    return slot_dtype, slot_ndim, shapes, opcode, attr_off, attrs, prims, p_inv


# ---- AD rule templates (tidu/rule_cache.hpp) ----
#
# The walks of differentiate and transpose run here; each rule call is looked up by its shape
# (primitive, mode, operand avals, which tangents are present, aliasing) in a cache of recorded
# templates and replayed in C++; only a miss calls the Python rule (through the callbacks tidu.ad
# passes), with the builder logging what it emits so the call becomes a template.

cdef RuleCache* _RC = new RuleCache()
cdef bint _rc_enabled = True
cdef vector[uint8_t] _prim_flags  # per prim id: 0 unknown, else 1 | 2 differentiable | 4 cacheable
cdef vector[vector[uint8_t]] _mode_masks  # per mode id: the active mask (empty: not fetched)


def set_rule_cache(bint enabled):
    """Turn template replay on or off (off: every rule call runs the Python rule); returns the
    previous setting."""
    global _rc_enabled
    prev = _rc_enabled
    _rc_enabled = enabled
    return prev


def rule_cache_info():
    """Templates held and hit/miss counters of the rule template cache."""
    return {"enabled": True if _rc_enabled else False, "templates": _RC.size(), "hits": _RC.hits,
            "misses": _RC.misses, "unrecordable": _RC.unrecordable}


def clear_rule_cache():
    """Forget every template (and the cached per-primitive flags and mode masks)."""
    _RC.clear()
    _RC.hits = _RC.misses = _RC.unrecordable = 0
    _prim_flags.clear()
    _mode_masks.clear()


cdef inline uint8_t _flags_of(Id prim, object prim_flags) except 0:
    if prim >= _prim_flags.size():
        _prim_flags.resize(prim + 1, 0)
    if _prim_flags[prim] == 0:
        _prim_flags[prim] = 1 | <uint8_t>prim_flags(prim)
    return _prim_flags[prim]


cdef int _mask_of(Id mode, object mode_mask, vector[uint8_t]& out) except -1:
    """Mode `mode`'s active mask into `out` (its storage reused: no allocation per op)."""
    cdef bytes m
    cdef size_t k
    if mode >= _mode_masks.size():
        _mode_masks.resize(mode + 1)
    if _mode_masks[mode].empty():
        m = bytes(mode_mask(mode))
        _mode_masks[mode] = [1 if c else 0 for c in m]
    out.resize(_mode_masks[mode].size())
    for k in range(out.size()):
        out[k] = _mode_masks[mode][k]
    return 0


cdef inline object _ref_obj(FragmentStore b, Id g, object valkey):
    """A value as a rule receives a tangent/cotangent: None, a local id, or a ValKey."""
    if g == kNone:
        return None
    cdef Id l = b.data.local_of(g)
    return l if l != kNone else valkey(g)


cdef inline Id _global_of(FragmentStore b, object x) except? 0xFFFFFFFE:
    """A rule result (None, a local id of b, or a ValKey) as a global value id."""
    if x is None:
        return kNone
    if isinstance(x, int):
        if x < 0 or x >= <Py_ssize_t>b.data.vals.size():
            raise IndexError(f"rule returned local id {x}, not a value of the fragment")
        return b.data.vals[<Id>x]
    return <Id>x.id


cdef int _run_rule(FragmentStore b, vector[Id]& key, const vector[Id]& sym, vector[Id]& results,
                   bint record, object fn, tuple args) except -1:
    """Call the Python rule fn(*args) (results into `results`); when `record`, log what it emits
    and keep the template under `key` if it replays exactly."""
    cdef vector[Id] log
    cdef size_t before = _I.n_vals()
    cdef RuleTemplate t
    cdef Py_ssize_t i
    if record:
        b.data.log = &log
        b.data.log_input = False
    try:
        out = fn(*args)
    finally:
        b.data.log = NULL
    if len(out) != <Py_ssize_t>results.size():
        raise ValueError(f"rule returned {len(out)} results, expected {results.size()}")
    for i in range(results.size()):
        results[i] = _global_of(b, out[i])
    if record:
        if not b.data.log_input and record_rule(_I[0], log, sym.data(), sym.size(), results.data(),
                                                results.size(), before, t):
            _RC.insert(key, t)
        else:
            _RC.unrecordable += 1
    return 0


cdef inline const RuleTemplate* _lookup(Id kind, Id prim, Id mode, uint8_t flags,
                                       const vector[Id]& sym, vector[Id]& key):
    """The template for this call shape, or NULL (also when caching is off for it); a NULL
    with caching on counts as a miss."""
    cdef const RuleTemplate* t
    if not (_rc_enabled and flags & 4):
        return NULL
    make_rule_key(_I[0], kind, prim, mode, sym.data(), sym.size(), key)
    t = _RC.find(key)
    if t == NULL:
        _RC.misses += 1
    else:
        _RC.hits += 1
    return t


cdef RangeMap* _range_map(vector[Id]& vals):
    """A new RangeMap over the dense window of vals (the walk's values: old constants below it
    are hashed); the caller deletes it."""
    cdef pair[Id, Id] w = dense_window_of(vals)
    return new RangeMap(w.first, w.second, vals.size() + 16)


def linearize_ops(FragmentStore b, Materialized m, seeds, const uint8_t[::1] nondiff_aval,
                  outputs, rule, prim_flags, valkey):
    """The forward walk of differentiate over m's ops (topological) into builder store b.

    seeds: (primal value id, tangent value id) pairs.  Every op with a tangent input and a
    differentiable primitive (prim_flags(prim) & 2) gets its tangents from its rule template or
    from rule(prim, primal_in, primal_out, tangent_in) (ValKeys; tangents as local ids, ValKeys
    or None); tangents of non-differentiable avals are dropped.  prim_flags None (the batching
    pass of vmap): every op runs `rule`, without the per-primitive flags and linearize templates
    differentiate caches, which would otherwise leak between the two walks.  Returns the tangent value id
    (NONE: zero) of each of `outputs`."""
    cdef RangeMap* env = _range_map(m.r.vals)
    try:
        return _linearize_walk(b, m, env[0], seeds, nondiff_aval, outputs, rule, prim_flags, valkey)
    finally:
        del env


cdef list _linearize_walk(FragmentStore b, Materialized m, RangeMap& env, seeds,
                          const uint8_t[::1] nondiff_aval, outputs, rule, prim_flags, valkey):
    cdef vector[Id] sym, results, key, scratch
    cdef Id o, prim, first, g
    cdef size_t k, n_in, n_out
    cdef const OpRec* r
    cdef const Id* a
    cdef bint any_t
    cdef uint8_t flags
    cdef const RuleTemplate* t
    cdef size_t n_avals = nondiff_aval.shape[0]
    for pv, tg in seeds:
        env.set(<Id>pv, <Id>tg)
    for o in m.r.ops:
        r = &_I.op(o)
        n_in = r.n_in
        a = _I.op_inputs(o)
        any_t = False
        for k in range(n_in):
            if env.contains(a[k]):
                any_t = True
                break
        if not any_t:
            continue
        prim = r.prim
        n_out = r.n_out
        first = r.first_val
        sym.resize(2 * n_in + n_out)
        for k in range(n_in):
            sym[k] = a[k]
            sym[n_in + n_out + k] = env.get(a[k], kNone)
        for k in range(n_out):
            sym[n_in + k] = first + k
        if prim_flags is None:
            flags = 3  # not cacheable: _lookup finds no template and _run_rule records none
        else:
            flags = _flags_of(prim, prim_flags)  # may call Python: r and a not used after it
        if not flags & 2:
            continue
        results.assign(n_out, kNone)
        t = _lookup(kLinearizeRule, prim, 0, flags, sym, key)
        if t != NULL:
            replay_rule(_I[0], b.data, t[0], sym.data(), results.data(), scratch)
        else:
            _run_rule(b, key, sym, results, _rc_enabled and flags & 4, rule,
                      (prim, [valkey(sym[k]) for k in range(n_in)],
                       [valkey(first + k) for k in range(n_out)],
                       [_ref_obj(b, sym[n_in + n_out + k], valkey) for k in range(n_in)]))
        for k in range(n_out):
            g = results[k]
            if g == kNone:
                continue
            if _I.val(first + k).aval < n_avals and nondiff_aval[_I.val(first + k).aval]:
                continue
            env.set(first + k, g)
    return [env.get(<Id>x, kNone) for x in outputs]


def transpose_ops(FragmentStore b, FragmentStore linear, seeds, queries, rule, accumulate,
                  prim_flags, mode_mask, valkey):
    """The reverse walk of transpose over the linear-mode ops of `linear` into builder store b.

    seeds: (linear output value id, cotangent value id) pairs.  Each op with a cotangent gets its
    input cotangents from its template or rule(prim, mode, inputs, cotangent_out); those reaching
    an active input accumulate by global value id, through accumulate(prim, prev, ct) (the op's
    add() node) when one is already there.  Returns the cotangent value id (NONE: zero) of each
    of `queries`."""
    cdef RangeMap* ct_env = _range_map(linear.data.vals)
    try:
        return _transpose_walk(b, linear, ct_env[0], seeds, queries, rule, accumulate, prim_flags,
                               mode_mask, valkey)
    finally:
        del ct_env


cdef list _transpose_walk(FragmentStore b, FragmentStore linear, RangeMap& ct_env, seeds, queries,
                          rule, accumulate, prim_flags, mode_mask, valkey):
    cdef vector[Id] sym, results, key, scratch, acc_sym, acc_res, ins
    cdef vector[uint8_t] mask
    cdef Id o, prim, mode, first, prev, ct
    cdef size_t i, k, n_in, n_out
    cdef const OpRec* r
    cdef const Id* a
    cdef bint any_ct
    cdef uint8_t flags
    cdef const RuleTemplate* t
    for v, c in seeds:
        ct_env.set(<Id>v, <Id>c)
    acc_sym.resize(2)
    acc_res.resize(1)
    i = linear.data.ops.size()
    while i > 0:
        i -= 1
        o = linear.data.ops[i]
        r = &_I.op(o)
        mode = r.mode
        if mode == 0:
            continue  # a fixed coefficient: referenced by the transposed nodes, not reversed
        n_in = r.n_in
        n_out = r.n_out
        first = r.first_val
        prim = r.prim
        any_ct = False
        sym.resize(n_in + n_out)
        for k in range(n_out):
            sym[n_in + k] = ct_env.get(first + k, kNone)
            if sym[n_in + k] != kNone:
                any_ct = True
        if not any_ct:
            continue
        a = _I.op_inputs(o)
        for k in range(n_in):
            sym[k] = a[k]
        ins.assign(sym.begin(), sym.begin() + n_in)
        flags = _flags_of(prim, prim_flags)
        _mask_of(mode, mode_mask, mask)
        results.assign(n_in, kNone)
        t = _lookup(kTransposeRule, prim, mode, flags, sym, key)
        if t != NULL:
            replay_rule(_I[0], b.data, t[0], sym.data(), results.data(), scratch)
        else:
            _run_rule(b, key, sym, results, _rc_enabled and flags & 4, rule,
                      (prim, mode, [valkey(sym[k]) for k in range(n_in)],
                       [_ref_obj(b, sym[n_in + k], valkey) for k in range(n_out)]))
        for k in range(n_in):
            ct = results[k]
            if not mask[k] or ct == kNone:
                continue
            prev = ct_env.get(ins[k], kNone)
            if prev == kNone:
                ct_env.set(ins[k], ct)
                continue
            acc_sym[0] = prev
            acc_sym[1] = ct
            t = _lookup(kAccumulateRule, prim, 0, flags, acc_sym, key)
            if t != NULL:
                replay_rule(_I[0], b.data, t[0], acc_sym.data(), acc_res.data(), scratch)
            else:
                _run_rule(b, key, acc_sym, acc_res, _rc_enabled and flags & 4, accumulate,
                          (prim, _ref_obj(b, prev, valkey), _ref_obj(b, ct, valkey)))
            ct_env.set(ins[k], acc_res[0])
    return [ct_env.get(<Id>q, kNone) for q in queries]


# ---- tracing (tidu.tracing's Tracer and its hot path) ----

include "_tracer.pxi"

# ---- the transforms' per-call work (tidu.api) ----

include "_frontend.pxi"
