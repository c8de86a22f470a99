# pyx/graph/keys.pxi - the module's cimports and shared helpers, the global key interner
# (tidu/graph/interner.hpp) and ValKey/Tangent: included by _core.pyx.

cimport cython
from libc.stdint cimport uint8_t, uint32_t
from libc.string cimport memcpy
from libcpp cimport bool
from libcpp.utility cimport pair
from libcpp.vector cimport vector

cimport numpy as cnp
import numpy as np

from graph cimport (Id, kNone, FlatMap32, RangeMap, dense_window_of, mix64, KeyInterner, ValRec,
                    OpRec, FragmentData, View, Reachable, topo_walk, forward_activity, SSAProgram,
                    compile_ssa)
from rule_cache cimport (kLinearizeRule, kTransposeRule, kAccumulateRule, RuleTemplate, RuleCache,
                         make_rule_key, replay_rule, record_rule)

cnp.import_array()

cdef KeyInterner* _I = new KeyInterner()

NONE = kNone

# Reclaiming (graph/memory.pxi, tidu.graph.memory): the interner is emptied only when no fragment
# store and no walk (Materialized) that holds its ids is alive; each emptying starts a new epoch,
# and a ValKey (which does not count as a holder) made in an earlier epoch raises FreedGraphError
# instead of naming whatever value took its id.
cdef unsigned long long _epoch = 0
cdef Py_ssize_t _live_holders = 0

# Generations (graph/memory.pxi, truncate_interner): between two emptyings, the interner may be
# cut back to the ids that live holders reach (the newest ids go, as a stack).  Each cut starts a
# new generation; _vfloor[g] (_pfloor[g]) is the fewest values (primitives) any cut since
# generation g kept, so an id made in generation g is alive iff it is below that floor.
cdef unsigned int _gen = 0
cdef vector[Id] _vfloor
cdef vector[Id] _pfloor


cdef inline bint _val_freed(unsigned long long epoch, unsigned int gen, Id v):
    """Whether value id v, made in (epoch, gen), was freed since."""
    return epoch != _epoch or (gen != _gen and v >= _vfloor[gen])


# Holders that count (graph/memory.pxi): where their ids are, so a cut can find the newest id any
# of them reaches.  Each holder knows its slot; removal moves the last record into it.
cdef struct HolderRec:
    const vector[Id]* vals
    const vector[Id]* ops
    Py_ssize_t* slot

cdef vector[HolderRec] _holders


cdef inline void _hold(const vector[Id]* vals, const vector[Id]* ops, Py_ssize_t* slot):
    global _live_holders
    cdef HolderRec r
    r.vals = vals
    r.ops = ops
    r.slot = slot
    slot[0] = <Py_ssize_t>_holders.size()
    _holders.push_back(r)
    _live_holders += 1


cdef inline void _unhold(Py_ssize_t* slot):
    global _live_holders
    cdef Py_ssize_t s = slot[0]
    if s < 0:
        return
    _holders[s] = _holders.back()
    _holders[s].slot[0] = s
    _holders.pop_back()
    slot[0] = -1
    _live_holders -= 1


class FreedGraphError(ReferenceError):
    """A key, fragment or walk refers to graph nodes that tidu.clear_caches() (or the automatic
    reclaim of an unreferenced interner) has freed."""


cdef int _freed(object what) except -1:
    raise FreedGraphError(f"{what} belongs to a graph whose nodes were freed (tidu.clear_caches "
                          f"or the automatic reclaim ran while nothing held them): build it again")


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

    cdef object _id
    cdef Py_hash_t _hash
    cdef unsigned long long _epoch
    cdef unsigned int _gen

    def __cinit__(self, id_):
        if type(id_) is not int:
            id_ = int(id_)
        self._id = id_
        self._epoch = _epoch
        self._gen = _gen
        if 0 <= id_ < 0x1000000000000:  # Python's hash of (id ^ K): that int mod 2**61 - 1
            self._hash = <Py_hash_t>((<unsigned long long>id_ ^ 0x5BD1E9955BD1E995ULL)
                                     % 0x1FFFFFFFFFFFFFFFULL)
        else:
            self._hash = hash(id_ ^ 0x5BD1E9955BD1E995)

    cdef inline bint freed(self):
        return self._epoch != _epoch or (self._gen != _gen and self._id >= _vfloor[self._gen])

    @property
    def id(self):
        """The interned value id (FreedGraphError once its graph has been freed)."""
        if self.freed():
            _freed(f"ValKey #{self._id}")
        return self._id

    def __eq__(self, other):
        if not (type(other) is ValKey and (<ValKey>other)._id == self._id
                and (<ValKey>other)._epoch == self._epoch):
            return False
        # the same id in two generations: equal unless a cut freed one of them (its id may name
        # another value now)
        return (<ValKey>other)._gen == self._gen or not (self.freed() or (<ValKey>other).freed())

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return self._hash

    def __reduce__(self):
        return ValKey, (self.id,)

    def __repr__(self):
        if self.freed():
            return f"ValKey({self._id}, freed)"
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
