# pyx/ad/rule_cache.pxd - extern declarations mirroring cpp/include/tidu/ad/rule_cache.hpp one to
# one (cimported by _core.pyx as `rule_cache`).
from libcpp cimport bool
from libcpp.vector cimport vector

from graph cimport Id, KeyInterner, FragmentData

cdef extern from "tidu/ad/rule_cache.hpp" namespace "tidu" nogil:
    const Id kLinearizeRule
    const Id kTransposeRule
    const Id kAccumulateRule

    cdef cppclass RuleTemplate:
        RuleTemplate()
        size_t n_emit()

    void make_rule_key(const KeyInterner& interner, Id kind, Id prim, Id mode, const Id* sym,
                       size_t n_sym, vector[Id]& key)

    cdef cppclass RuleCache:
        RuleCache()
        const RuleTemplate* find(const vector[Id]& key)
        void insert(const vector[Id]& key, RuleTemplate t) except +
        size_t size()
        void clear()
        size_t hits
        size_t misses
        size_t unrecordable

    void replay_rule(KeyInterner& interner, FragmentData& f, const RuleTemplate& t, const Id* sym,
                     Id* results, vector[Id]& scratch) except +
    bool record_rule(const KeyInterner& interner, const vector[Id]& log, const Id* sym,
                     size_t n_sym, const Id* results, size_t n_res, size_t n_vals_before,
                     RuleTemplate& t) except +
