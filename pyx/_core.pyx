# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: language = c++
"""Cython bindings over the C++ graph core: the global key interner, fragment storage, views,
traversal, materialize and SSA compile.  Many small calls come through here, so each is thin."""

from libc.stdint cimport uint8_t, uint32_t
from libc.string cimport memcpy
from libcpp cimport bool
from libcpp.vector cimport vector

cimport numpy as cnp
import numpy as np

from tidu_core cimport (Id, kNone, FlatMap32, KeyInterner, ValRec, OpRec, FragmentData, View,
                        Reachable, topo_walk, forward_activity, SSAProgram, compile_ssa)

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


def op_info(Id o):
    """(prim id, mode id, input value ids, first output value id, n_out) of op o."""
    if o >= _I.n_ops():
        raise IndexError(f"no op with id {o}")
    cdef const OpRec* r = &_I.op(o)
    cdef const Id* args = _I.op_inputs(o)
    return (r.prim, r.mode, tuple([args[k] for k in range(r.n_in)]), r.first_val, r.n_out)


# ---- fragments ----

cdef class FragmentStore:
    """Local values and ops of one fragment, as global ids; C++ owns the storage."""
    cdef FragmentData data

    def add_input(self, Id v):
        """Declare Input value v as an input; returns its local id."""
        if v >= _I.n_vals():
            raise IndexError(f"no value with id {v}")
        return self.data.add_input(_I[0], v)

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
