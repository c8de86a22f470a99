# pyx/graph/graph.pxd - extern declarations mirroring
# cpp/include/tidu/graph/{flat_map,interner,graph}.hpp
# one to one (cimported by _core.pyx as `graph`).
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libcpp cimport bool
from libcpp.utility cimport pair
from libcpp.vector cimport vector

cdef extern from "tidu/graph/flat_map.hpp" namespace "tidu" nogil:
    ctypedef uint32_t Id
    const Id kNone

    cdef cppclass FlatMap32:
        FlatMap32()
        FlatMap32(size_t expected)
        size_t size()
        Id get(Id key, Id fallback)
        bool contains(Id key)
        Id insert(Id key, Id val)
        void set(Id key, Id val)

    pair[Id, Id] dense_window_of(const vector[Id]& ids)
    uint64_t mix64(uint64_t h)

    cdef cppclass RangeMap:
        RangeMap(Id lo, Id hi, size_t expected)
        Id get(Id key, Id fallback)
        bool contains(Id key)
        void set(Id key, Id val)

cdef extern from "tidu/graph/interner.hpp" namespace "tidu" nogil:
    cdef struct ValRec:
        Id op
        Id index
        Id aval

    cdef struct OpRec:
        Id prim
        Id mode
        Id in_begin
        uint16_t n_in
        uint16_t n_out
        Id first_val

    cdef cppclass KeyInterner:
        KeyInterner()
        Id intern_input(Id key, Id aval) except +
        Id intern_op(Id prim, Id mode, const Id* args, size_t n_in, const Id* out_avals,
                     size_t n_out, bool* created) except +
        size_t n_vals()
        size_t n_ops()
        const ValRec& val(Id v)
        const OpRec& op(Id o)
        const Id* op_inputs(Id o)
        bool is_input(Id v)
        size_t memory_bytes()
        void truncate(size_t n_vals, size_t n_ops) except +

cdef extern from "tidu/graph/graph.hpp" namespace "tidu" nogil:
    cdef cppclass FragmentData:
        vector[Id] vals
        vector[Id] ops
        vector[Id] inputs
        vector[Id] outputs
        vector[Id]* log
        bool log_input
        Id local_of(Id v)
        Id add_input(const KeyInterner& interner, Id v) except +
        Id add_op(KeyInterner& interner, Id prim, Id mode, const Id* args, size_t n_in,
                  const Id* out_avals, size_t n_out) except +
        size_t memory_bytes()

    cdef cppclass View:
        View(vector[const FragmentData*] frags) except +
        bool defines(Id v)

    cdef cppclass Reachable:
        vector[Id] vals
        vector[Id] ops
        vector[Id] inputs

    Id topo_walk(const KeyInterner& interner, const View& view, const Id* outputs, size_t n_out,
                 Reachable& out) except +

    void forward_activity(const KeyInterner& interner, const vector[Id]& ops, const Id* seeds,
                          size_t n_seeds, const uint8_t* nondiff_aval, size_t n_avals,
                          FlatMap32& active) except +

    cdef cppclass SSAProgram:
        vector[Id] slot_aval
        vector[Id] instr_prim
        vector[Id] instr_mode
        vector[Id] in_off
        vector[Id] in_slots
        vector[Id] out_off
        vector[Id] out_slots
        vector[Id] input_slots
        vector[Id] output_slots
        vector[Id] canon

    void compile_ssa(const KeyInterner& interner, const vector[Id]& vals, const vector[Id]& ops,
                     const vector[Id]& inputs, const Id* outputs, size_t n_out,
                     SSAProgram& p) except +
