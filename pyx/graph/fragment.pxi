# pyx/graph/fragment.pxi - fragment storage, views, traversal, materialize and compile to SSA
# (tidu/graph/graph.hpp): included by _core.pyx.

# ---- fragments ----

cdef class FragmentStore:
    """Local values and ops of one fragment, as global ids; C++ owns the storage.  Alive, it
    keeps the interner from being emptied (it counts as a holder unless disowned)."""
    cdef FragmentData data
    cdef unsigned long long epoch
    cdef unsigned int gen
    cdef Py_ssize_t slot  # in _holders while it counts; -1 once disowned
    cdef Id top           # disowned: 1 + its newest value id (a cut below it freed it)

    def __cinit__(self):
        self.epoch = _epoch
        self.gen = _gen
        _hold(&self.data.vals, &self.data.ops, &self.slot)

    def __dealloc__(self):
        _unhold(&self.slot)

    def __reduce__(self):
        raise TypeError("a fragment store holds interned ids of this process: it cannot be "
                        "converted to a picklable form (save a compiled program instead)")

    cdef inline int check(self) except -1:
        if self.epoch != _epoch or (self.slot < 0 and self.gen != _gen
                                    and self.top > _vfloor[self.gen]):
            _freed("this fragment")
        return 0

    def add_input(self, Id v):
        """Declare Input value v as an input; returns its local id."""
        self.check()
        if v >= _I.n_vals():
            raise IndexError(f"no value with id {v}")
        return self.data.add_input(_I[0], v)

    def add_inputs(self, key_ids, aval_ids):
        """Declare Input(key_ids[i]) at abstract value aval_ids[i] as inputs; returns their
        local ids (add_input(intern_input(k, a)) for each pair, in one call)."""
        self.check()
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
        self.check()
        cdef vector[Id] a = _ids(args)
        cdef vector[Id] o = _ids(out_avals)
        return self.data.add_op(_I[0], prim, mode, a.data(), a.size(), o.data(), o.size())

    def emit(self, Id prim, Id mode, args, Id aval):
        """Single-output op; returns the global id of its output."""
        self.check()
        cdef vector[Id] a = _ids(args)
        cdef Id l = self.data.add_op(_I[0], prim, mode, a.data(), a.size(), &aval, 1)
        return self.data.vals[l]

    def emit0(self, Id prim, Id aval):
        self.check()
        cdef Id l = self.data.add_op(_I[0], prim, 0, NULL, 0, &aval, 1)
        return self.data.vals[l]

    def emit1(self, Id prim, Id mode, Id a, Id aval):
        self.check()
        if a >= _I.n_vals():
            raise IndexError(f"no value with id {a}")
        cdef Id l = self.data.add_op(_I[0], prim, mode, &a, 1, &aval, 1)
        return self.data.vals[l]

    def emit2(self, Id prim, Id mode, Id a, Id b, Id aval):
        self.check()
        cdef Id args[2]
        args[0] = a
        args[1] = b
        if a >= _I.n_vals() or b >= _I.n_vals():
            raise IndexError(f"no value with id {max(a, b)}")
        cdef Id l = self.data.add_op(_I[0], prim, mode, args, 2, &aval, 1)
        return self.data.vals[l]

    def local_of(self, Id v):
        """Local id of global value v, or -1 when v is not defined here (External)."""
        self.check()
        cdef Id l = self.data.local_of(v)
        return -1 if l == kNone else l

    def global_of(self, Id local):
        self.check()
        if local >= self.data.vals.size():
            raise IndexError(f"no local value t{local}")
        return self.data.vals[local]

    def globals_of(self, locals_):
        """global_of of each local id."""
        self.check()
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
        self.check()
        return _array(self.data.vals)

    def ops(self):
        self.check()
        return _array(self.data.ops)

    def inputs(self):
        self.check()
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
            s.check()
            ptrs.push_back(&s.data)
        self.view = new View(ptrs)

    def __dealloc__(self):
        del self.view

    def defines(self, Id v):
        return self.view.defines(v)

    def walk(self, outputs):
        """Reachable (vals, ops, inputs) from outputs in one topological order, as a
        Materialized."""
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
    """C++-held result of a walk: reachable values and ops in topological order (a holder of
    interned ids, like FragmentStore)."""
    cdef Reachable r
    cdef vector[Id] outputs
    cdef unsigned long long epoch
    cdef unsigned int gen
    cdef Py_ssize_t slot  # as FragmentStore's
    cdef Id top

    def __cinit__(self):
        self.epoch = _epoch
        self.gen = _gen
        _hold(&self.r.vals, &self.r.ops, &self.slot)

    def __dealloc__(self):
        _unhold(&self.slot)

    def __reduce__(self):
        raise TypeError("a walk holds interned ids of this process: it cannot be converted "
                        "to a picklable form (save a compiled program instead)")

    cdef inline int check(self) except -1:
        if self.epoch != _epoch or (self.slot < 0 and self.gen != _gen
                                    and self.top > _vfloor[self.gen]):
            _freed("this walk (a materialized graph)")
        return 0

    @property
    def vals(self):
        self.check()
        return _array(self.r.vals)

    @property
    def ops(self):
        self.check()
        return _array(self.r.ops)

    @property
    def inputs(self):
        self.check()
        return _array(self.r.inputs)

    @property
    def outputs(self):
        self.check()
        return _array(self.outputs)

    def input_keys(self):
        """The ValKey of each input."""
        self.check()
        cdef Id v
        return [ValKey(v) for v in self.r.inputs]

    def output_keys(self):
        """The ValKey of each output."""
        self.check()
        cdef Id v
        return [ValKey(v) for v in self.outputs]

    @property
    def n_ops(self):
        return self.r.ops.size()

    def active(self, seeds, const uint8_t[::1] nondiff_aval):
        """Values that depend on `seeds` (forward activity); non-differentiable avals stay
        inactive."""
        self.check()
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
        self.check()
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
        self.check()
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
    b.check()
    m.check()
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
