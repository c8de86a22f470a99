# Included by _core.pyx: the tracer's hot path (tidu.trace.tracer's Tracer and trace, in Cython).
#
# Tracing a user function calls one arithmetic dunder or numpy-like function per primal op, so the
# common cases run here without a Python frame:
#   * Tracer op Tracer of the same trace and the same abstract value,
#   * Tracer op Python float/int (exact types) with a rank-0 float/complex Tracer,
#   * a transcendental function (or Neg) of a Tracer,
#   * x @ y, x[i], reshape and concatenate in their common forms.
# Each emits the op(s) straight into the trace's FragmentStore and builds the result Tracer in C.
# Everything else (promotion, broadcasting, conversion, every error) is the Python slow path of
# tidu.trace.tracer, which also supplies the shape/dtype rules: a rule is asked once per (op,
# abstract
# value) — or per (op, abstract value, scalar) — and its answer memoised here by id.
#
# This file knows no primitive: tidu.numpy.array_methods registers, per slot below, the Python
# callables (rule,
# scalar rule, slow path) when it is imported (tracer_setup), which importing tidu does.

cimport cython
from cpython.long cimport PyLong_AsLongLongAndOverflow
from libc.stdint cimport uint64_t
from libc.string cimport memset

# Binary slots: the dunders, and tidu.numpy.core's maximum/minimum/power through binary().
cdef enum:
    _ADD, _SUB, _MUL, _DIV, _POW, _MAX, _MIN, _N_BINARY
# Unary slots.
cdef enum:
    _EXP, _LOG, _SIN, _COS, _TANH, _SQRT, _RSQRT, _EXPM1, _LOG1P, _NEG, _N_UNARY
cdef enum:
    _SCALAR_CACHE = 1024  # direct-mapped: a collision evicts (the rule is asked again)

B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN = _ADD, _SUB, _MUL, _DIV, _POW, _MAX, _MIN
U_EXP, U_LOG, U_SIN, U_COS, U_TANH, U_SQRT, U_RSQRT, U_EXPM1, U_LOG1P, U_NEG = (
    _EXP, _LOG, _SIN, _COS, _TANH, _SQRT, _RSQRT, _EXPM1, _LOG1P, _NEG)


cdef class Trace:
    """One tracing session: the builder of the fragment being traced (and its store)."""

    cdef readonly object builder
    cdef readonly FragmentStore store
    # Outside jit, a transform traces with the values at hand: this object (tidu.guards) reads a
    # traced value's concrete value for Python control flow; None where values are abstract.
    cdef public object concrete

    def __init__(self, builder, concrete=None):
        self.builder = builder
        self.store = builder.store
        self.concrete = concrete


cdef struct Rule:
    Id pid      # primitive id of the op
    Id out      # its output abstract value id
    uint8_t state  # 0 not asked yet, 1 fast, 2 slow path for this abstract value

cdef struct ScalarRule:
    uint64_t bits   # the scalar: a float's bits or an int's value
    Id aval         # the tracer's abstract value id
    uint8_t tag     # 1 + slot * 4 + scalar_left * 2 + is_int (0: empty entry)
    Id const_pid    # Constant(scalar as the tracer's dtype)
    Id const_aval
    bint bcast      # the tracer is an array: the Constant is broadcast to its shape first
    Id bcast_pid
    Id bcast_aval
    Id pid          # the op
    Id out

cdef bint _fast = True
# While a control-flow body is being traced (tidu.api.control_flow), an op on values of an
# enclosing trace belongs to the body (as in jax: a branch's sqrt runs only in that branch), so it
# takes the general path, which captures them (tidu.trace.tracer._emit).  The fast path stays
# for the innermost body's own values: _n_bodies counts the bodies open over all threads and
# _body_top is the one opened last; another thread's values only lose the fast path meanwhile.
cdef Py_ssize_t _n_bodies = 0
cdef object _body_top = None


cdef inline bint _here(Trace t):
    """t's values may take the fast path: no body open, or t is the innermost one."""
    return _n_bodies == 0 or t is _body_top


def body_enter(Trace t not None):
    """A body's trace t opens; returns what body_exit restores."""
    global _n_bodies, _body_top
    prev = _body_top
    _n_bodies += 1
    _body_top = t
    return prev


def body_exit(prev):
    global _n_bodies, _body_top
    _n_bodies -= 1
    _body_top = prev


# the hook table of tidu.numpy.array_methods: the methods that are plain Python
cdef object _py = None
cdef list _avals = None  # tidu.graph's interned abstract values, by id
cdef list _bslow = [None] * _N_BINARY, _brule = [None] * _N_BINARY, _bscalar = [None] * _N_BINARY
cdef list _uslow = [None] * _N_UNARY, _urule = [None] * _N_UNARY
cdef vector[vector[Rule]] _r2 = vector[vector[Rule]](_N_BINARY)
cdef vector[vector[Rule]] _r1 = vector[vector[Rule]](_N_UNARY)
cdef vector[uint8_t] _aval_flags  # per aval id: 0 not seen, 3 float/complex, 1 other
cdef ScalarRule _scalar_cache[_SCALAR_CACHE]


def tracer_setup(module, avals, binary, unary):
    """Register the Python side: `module` (tidu.numpy.array_methods.HOOKS: the Tracer methods that
    stay Python look
    their functions up there), `avals` (the interned AbstractValue list, by id), `binary`
    {slot: (slow(x, y), rule(aval), scalar_rule(aval, scalar))}, `unary` {slot: (slow(x),
    rule(aval))}.  rule returns (prim id, output AbstractValue), or None for the slow path;
    scalar_rule returns (Constant prim id, Constant aval id, BroadcastInDim prim id and aval id or
    None and None for a rank-0 aval, prim id, output AbstractValue) for a float/complex aval and a
    Python float/int."""
    global _py, _avals
    for k in binary:
        if not 0 <= k < _N_BINARY:
            raise ValueError(f"no binary slot {k}")
    for k in unary:
        if not 0 <= k < _N_UNARY:
            raise ValueError(f"no unary slot {k}")
    _py = module
    _avals = avals
    for k, (slow, rule, srule) in binary.items():
        _bslow[k], _brule[k], _bscalar[k] = slow, rule, srule
    for k, (slow, rule) in unary.items():
        _uslow[k], _urule[k] = slow, rule
    clear_tracer_rules()


def clear_tracer_rules():
    """Forget the memoised rules (they are asked again)."""
    cdef size_t k
    for k in range(_r2.size()):
        _r2[k].clear()
    for k in range(_r1.size()):
        _r1[k].clear()
    _aval_flags.clear()
    _mm_rules.clear()
    _getitem_plans.clear()
    _reshape_rules.clear()
    _concat_rules.clear()
    memset(_scalar_cache, 0, sizeof(_scalar_cache))


def set_trace_fast_path(bint enabled):
    """Turn the compiled tracing fast path on or off (off: every op takes the general
    promotion path; the emitted nodes are the same); returns the previous setting."""
    global _fast
    prev = _fast
    _fast = enabled
    return True if prev else False


cdef inline Tracer _new(Trace t, Id v, Id aid):
    cdef Tracer r = Tracer.__new__(Tracer)
    r._t = t
    r._v = v
    r._aid = aid
    r.aval = _avals[aid]
    r.weak_type = False
    return r


cdef inline Tracer _new_w(Trace t, Id v, Id aid, bint weak):
    """_new, weakly typed where weak (jax's weak_type: see tidu.graph.dtypes)."""
    cdef Tracer r = _new(t, v, aid)
    r.weak_type = weak
    return r


def tracer_at(Trace t not None, Id v):
    """The Tracer of trace t for global value id v, at the value's interned abstract value."""
    _check(v)
    return _new(t, v, _I.val(v).aval)


def tracers_at(Trace t not None, vals):
    """tracer_at of each value id."""
    cdef list out = []
    cdef Id v
    for x in vals:
        v = x
        _check(v)
        out.append(_new(t, v, _I.val(v).aval))
    return out


def input_tracers(Trace t not None, key_ids, aval_ids):
    """Declares Input(key_ids[i]) at abstract value aval_ids[i] as inputs of t's fragment (as
    FragmentStore.add_inputs); returns their Tracers."""
    cdef list out = []
    cdef FragmentData* d = &t.store.data
    for l in t.store.add_inputs(key_ids, aval_ids):
        v = d.vals[<Id>l]
        out.append(_new(t, v, _I.val(v).aval))
    return out


def lift_all(Trace t not None, xs, lift):
    """Each of xs as a value of trace t: its own Tracers as they are, lift(x) for the rest."""
    cdef list out = []
    for x in xs:
        if type(x) is Tracer and (<Tracer>x)._t is t:
            out.append(x)
        else:
            out.append(lift(x))
    return out


cdef inline Id _check(Id a) except? 0xFFFFFFFF:
    if a >= _I.n_vals():
        raise IndexError(f"no value with id {a}")
    return a


cdef inline Id _emit0(Trace t, Id prim, Id aid) except? 0xFFFFFFFF:
    cdef FragmentData* d = &t.store.data
    return d.vals[d.add_op(_I[0], prim, 0, NULL, 0, &aid, 1)]


cdef inline Id _emit1(Trace t, Id prim, Id a, Id aid) except? 0xFFFFFFFF:
    cdef FragmentData* d = &t.store.data
    _check(a)
    return d.vals[d.add_op(_I[0], prim, 0, &a, 1, &aid, 1)]


cdef inline Id _emit2(Trace t, Id prim, Id a, Id b, Id aid) except? 0xFFFFFFFF:
    cdef Id args[2]
    cdef FragmentData* d = &t.store.data
    args[0] = _check(a)
    args[1] = _check(b)
    return d.vals[d.add_op(_I[0], prim, 0, args, 2, &aid, 1)]


cdef inline Id _emit_n(Trace t, Id prim, vector[Id]& args, Id aid) except? 0xFFFFFFFF:
    cdef FragmentData* d = &t.store.data
    return d.vals[d.add_op(_I[0], prim, 0, args.data(), args.size(), &aid, 1)]


cdef int _ask(object rule, object av, Id aid, Rule* r) except -1:
    """Fill r from rule(av) (a Python call)."""
    res = rule(av)
    r.state = 2
    if res is None:
        return 0
    pid, out = res
    cdef Id oid = out.id
    if oid < <Py_ssize_t>len(_avals) and _avals[oid] is out:  # interned: _new can find it by id
        r.pid = pid
        r.out = oid
        r.state = 1
    return 0


cdef inline int _rule(vector[vector[Rule]]& table, list rules, int k, Tracer x, Rule* r) except -1:
    """The memoised rule of slot k at x's abstract value, into r (state 1: take the fast path)."""
    cdef Id aid = x._aid
    if aid < table[k].size():
        r[0] = table[k][aid]
        if r.state:
            return 0
    rule = rules[k]
    if rule is None:
        r.state = 2
        return 0
    _ask(rule, x.aval, aid, r)  # Python: table may have grown meanwhile; index it again
    if aid >= table[k].size():
        table[k].resize(aid + 1)
    table[k][aid] = r[0]
    return 0


cdef inline bint _scalar_ok(Tracer x) except -1:
    """x is floating or complex: numpy's weak scalar promotion keeps its dtype."""
    cdef Id aid = x._aid
    cdef uint8_t f
    if aid < _aval_flags.size() and _aval_flags[aid]:
        return _aval_flags[aid] == 3
    av = x.aval
    f = 3 if av.dtype.kind in "fc" or av.dtype.name == "bfloat16" else 1  # bfloat16: kind "V"
    if aid >= _aval_flags.size():
        _aval_flags.resize(aid + 1, 0)
    _aval_flags[aid] = f
    return f == 3


cdef object _scalar(int k, Tracer x, object s, bint left):
    """x op s (or s op x when left) for a Python float or int s, or None for the slow path.

    Memoised by the scalar's exact bits, so 0.0 and -0.0 (and NaNs) are distinct entries."""
    cdef uint64_t bits = 0
    cdef double d
    cdef int overflow = 0
    cdef uint8_t tag
    cdef ScalarRule* e
    if x._t is None or not _here(x._t) or not _scalar_ok(x):  # None: Tracer.__new__ alone
        return None
    if type(s) is float:
        d = s
        memcpy(&bits, &d, sizeof(double))
        tag = 1 + k * 4 + left * 2
    else:
        bits = <uint64_t>PyLong_AsLongLongAndOverflow(s, &overflow)
        if overflow:
            return None
        tag = 2 + k * 4 + left * 2
    # Mixed through every bit: constants a power of two apart (h and h / 2) differ in one
    # exponent bit, which a multiply alone carries only upward, past the slot's bits.
    cdef size_t slot = mix64(bits ^ (<uint64_t>x._aid << 32) ^ tag) % _SCALAR_CACHE
    e = &_scalar_cache[slot]
    if not (e.tag == tag and e.bits == bits and e.aval == x._aid):
        srule = _bscalar[k]
        if srule is None:
            return None
        res = srule(x.aval, s)
        if res is None:
            return None
        cpid, caid, bpid, baid, opid, out_av = res
        oid = out_av.id
        if not (oid < len(_avals) and _avals[oid] is out_av):
            return None
        e = &_scalar_cache[slot]
        e.bits = bits
        e.aval = x._aid
        e.tag = tag
        e.const_pid = cpid
        e.const_aval = caid
        e.bcast = bpid is not None
        if e.bcast:
            e.bcast_pid = bpid
            e.bcast_aval = baid
        e.pid = opid
        e.out = oid
    cdef Trace t = x._t
    cdef Id pid = e.pid, out = e.out
    cdef Id c = _emit0(t, e.const_pid, e.const_aval)
    if e.bcast:
        c = _emit1(t, e.bcast_pid, c, e.bcast_aval)
    if left:  # a Python scalar is weak: the result is as weak as x
        return _new_w(t, _emit2(t, pid, c, x._v, out), out, x.weak_type)
    return _new_w(t, _emit2(t, pid, x._v, c, out), out, x.weak_type)


cdef object _binary(int k, object x, object y):
    cdef Tracer a, b
    cdef Rule r
    if _fast:
        if type(x) is Tracer:
            a = <Tracer>x
            if type(y) is Tracer:
                b = <Tracer>y
                if a._t is b._t and a.aval is b.aval and a._t is not None and _here(a._t):
                    _rule(_r2, _brule, k, a, &r)
                    if r.state == 1:
                        return _new_w(a._t, _emit2(a._t, r.pid, a._v, b._v, r.out), r.out,
                                      a.weak_type and b.weak_type)
            elif type(y) is float or type(y) is int:
                res = _scalar(k, a, y, False)
                if res is not None:
                    return res
        elif type(y) is Tracer and (type(x) is float or type(x) is int):
            res = _scalar(k, <Tracer>y, x, True)
            if res is not None:
                return res
    slow = _bslow[k]
    if slow is None:
        raise RuntimeError("tidu.numpy is not imported (it registers the tracer's methods)")
    return slow(x, y)


cdef object _unary(int k, object x):
    cdef Tracer a
    cdef Rule r
    if _fast and type(x) is Tracer and (<Tracer>x)._t is not None and _here((<Tracer>x)._t):
        a = <Tracer>x
        _rule(_r1, _urule, k, a, &r)
        if r.state == 1:
            return _new_w(a._t, _emit1(a._t, r.pid, a._v, r.out), r.out, a.weak_type)
    slow = _uslow[k]
    if slow is None:
        raise RuntimeError("tidu.numpy is not imported (it registers the tracer's methods)")
    return slow(x)


cdef dict _mm_rules = {}  # (aval id a << 32 | aval id b) -> (prim id, output aval id), or None


cdef vector[uint8_t] _transposes  # by prim id: 1 for a Transpose (tracing.transpose marks them)


def mark_transpose(Id pid):
    """Prim pid is a Transpose: x @ y of its result takes tidu.numpy.core.matmul, which folds it."""
    if _transposes.size() <= pid:
        _transposes.resize(pid + 1, 0)
    _transposes[pid] = 1


cdef inline bint _from_transpose(Id v):
    cdef Id op = _I.val(v).op
    if op == kNone:
        return False
    cdef Id prim = _I.op(op).prim
    return prim < _transposes.size() and _transposes[prim] != 0


cdef object _matmul(object x, object y):
    """x @ y: one DotGeneral of two traced operands of rank 1 or 2 and one dtype (the rule,
    tidu.numpy.core.matmul_rule, memoised per pair of abstract values), else
    tidu.numpy.core.matmul."""
    cdef Tracer a, b
    cdef uint64_t key
    if _fast and type(x) is Tracer and type(y) is Tracer:
        a = <Tracer>x
        b = <Tracer>y
        if a._t is b._t and a._t is not None and _here(a._t) and not _from_transpose(a._v) and \
                not _from_transpose(b._v):
            key = (<uint64_t>a._aid << 32) | b._aid
            hit = _mm_rules.get(key, 0)
            if hit is 0:
                res = _py.matmul_rule(a.aval, b.aval)
                hit = None
                if res is not None and res[1].id < len(_avals) and _avals[res[1].id] is res[1]:
                    hit = (res[0], res[1].id)
                _mm_rules[key] = hit
            if hit is not None:
                return _new_w(a._t, _emit2(a._t, <Id>hit[0], a._v, b._v, <Id>hit[1]),
                              <Id>hit[1], a.weak_type and b.weak_type)
    return _py.matmul(x, y)


# Structural ops on the fast path: each memo maps (abstract value(s), static argument) to the
# nodes the general path emits, as (prim id, output aval id) pairs, learnt from that path's memos
# (tidu.numpy.indexing._index_plans, tidu.graph.shape_rule); None marks a case the general path
# keeps.
cdef dict _getitem_plans = {}   # (aval id, int index) -> ((pid, out), ...)
cdef dict _reshape_rules = {}   # (aval id, shape tuple) -> (pid, out), or () for no op
cdef dict _concat_rules = {}    # (aval ids tuple, axis) -> (pid, out)


cdef object _emit_plan(Tracer x, tuple plan):
    cdef Trace t = x._t
    cdef Id v = x._v, out = x._aid
    for step in plan:
        out = <Id>step[1]
        v = _emit1(t, <Id>step[0], v, out)
    return _new_w(t, v, out, x.weak_type) if plan else x


cdef inline object _keep_weak(Tracer x, object out):
    """out (x indexed or reshaped) as weakly typed as x, as jax's."""
    if x.weak_type and type(out) is Tracer:
        (<Tracer>out).weak_type = True
    return out


cdef object _getitem(Tracer x, object idx):
    """x[i] for a Python int i through the plan the general path made for it."""
    if _fast and type(idx) is int and x._t is not None and _here(x._t):
        key = (x._aid, idx)
        plan = _getitem_plans.get(key)
        if plan is not None:
            return _emit_plan(x, <tuple>plan)
        out = _py._getitem(x, idx)  # raises what numpy would
        plan = _py._index_plans.get((x._aid, ((int, idx),)))
        if type(plan) is tuple:
            _getitem_plans[key] = plan
        return _keep_weak(x, out)
    return _keep_weak(x, _py._getitem(x, idx))


def reshape(a, shape, order="C", *, copy=None, out_sharding=None):
    """tidu.reshape, jax's signature: a Tracer and a tuple of ints (or an int) in C order on the
    fast path, the general path (tidu.numpy.core.reshape_general) for everything else and every
    error.  ``copy`` changes nothing (a traced value is never a view); ``out_sharding`` must
    be None."""
    cdef Tracer tr
    x = a
    if order != "C" or out_sharding is not None:
        return _py.reshape_ordered(x, shape, order, out_sharding)
    if _fast and type(x) is Tracer and (<Tracer>x)._t is not None and \
            _here((<Tracer>x)._t) and (type(shape) is tuple or type(shape) is int):
        tr = <Tracer>x
        key = (tr._aid, shape)
        try:
            hit = _reshape_rules.get(key)
        except TypeError:  # an unhashable shape: the general path names it
            return _py.reshape_general(x, shape)
        if hit is None:
            out = _py.reshape_general(x, shape)
            hit = _py.reshape_rule(tr.aval, shape)
            if hit is not None:
                _reshape_rules[key] = hit
            return _keep_weak(tr, out)
        if not hit:
            return x
        return _new_w(tr._t, _emit1(tr._t, <Id>hit[0], tr._v, <Id>hit[1]), <Id>hit[1],
                      tr.weak_type)
    if type(x) is Tracer:
        return _keep_weak(<Tracer>x, _py.reshape_general(x, shape))
    return _py.reshape_general(x, shape)


def concatenate(arrays, axis=0, dtype=None):
    """tidu.concatenate, jax's signature: a list or tuple of Tracers of one trace and one dtype
    along an int axis on the fast path, the general path (tidu.numpy.core.concatenate_general)
    otherwise (``axis=None`` concatenates the flattened arrays; ``dtype`` is the result's)."""
    cdef Tracer a, first
    cdef vector[Id] args
    cdef Trace t
    cdef Py_ssize_t n
    xs = arrays
    if dtype is not None or axis is None:
        return _py.concatenate_general(xs, axis, dtype=dtype)  # keeps_weak: dtype= is strong
    if _fast and (type(xs) is list or type(xs) is tuple) and type(axis) is int:
        n = len(xs)
        if n > 0 and type(xs[0]) is Tracer and (<Tracer>xs[0])._t is not None and \
                _here((<Tracer>xs[0])._t):
            first = <Tracer>xs[0]
            t = first._t
            avs = []
            weak = True
            for y in xs:
                if type(y) is not Tracer or (<Tracer>y)._t is not t:
                    return _py.concatenate_general(xs, axis)
                avs.append((<Tracer>y)._aid)
                weak = weak and (<Tracer>y).weak_type
            key = (tuple(avs), axis)
            hit = _concat_rules.get(key)
            if hit is None:
                out = _py.concatenate_general(xs, axis)
                hit = _py.concatenate_rule([(<Tracer>y).aval for y in xs], axis)
                if hit is not None:
                    _concat_rules[key] = hit
                return out
            for y in xs:
                args.push_back(_check((<Tracer>y)._v))
            # weakly typed where every operand is (jax's rule for concatenate)
            return _new_w(t, _emit_n(t, <Id>hit[0], args, <Id>hit[1]), <Id>hit[1], weak)
    return _py.concatenate_general(xs, axis)


def binary(int k, x, y):
    """x op y for binary slot k (B_ADD, ...), through the fast path when it applies."""
    if not 0 <= k < _N_BINARY:
        raise ValueError(f"no binary slot {k}")
    return _binary(k, x, y)


def unary(int k, x):
    """op(x) for unary slot k (U_EXP, ...), through the fast path when it applies."""
    if not 0 <= k < _N_UNARY:
        raise ValueError(f"no unary slot {k}")
    return _unary(k, x)


# numpy-like transcendental functions (integer and bool inputs are computed in float64).
def exp(x):
    """Elementwise e**x."""
    return _unary(_EXP, x)


def log(x):
    """Elementwise natural logarithm."""
    return _unary(_LOG, x)


def sin(x):
    """Elementwise sine."""
    return _unary(_SIN, x)


def cos(x):
    """Elementwise cosine."""
    return _unary(_COS, x)


def tanh(x):
    """Elementwise hyperbolic tangent."""
    return _unary(_TANH, x)


def sqrt(x):
    """Elementwise square root."""
    return _unary(_SQRT, x)


def rsqrt(x):
    """Elementwise 1 / sqrt(x)."""
    return _unary(_RSQRT, x)


def expm1(x):
    """Elementwise e**x - 1, accurate near 0."""
    return _unary(_EXPM1, x)


def log1p(x):
    """Elementwise log(1 + x), accurate near 0."""
    return _unary(_LOG1P, x)


# td.disable_jit(): while set, every jitted function takes its general path, which traces the
# Python function with values on each call (tidu.api.jit.disable_jit), and a traced value's repr
# shows its value where its trace has one (pyx/api/jit.pxi sets it)
cdef bint _jit_off = False


def _tracer_repr(Tracer x):
    """A traced value says it is abstract, where it came from, and how to see its value; under
    td.disable_jit, in a trace with values, it shows its value."""
    if _jit_off and x._t is not None and x._t.concrete is not None:
        return f"Traced<{x.aval}> with value {x._t.concrete.value(x)!r}"
    k = x.key
    if k.is_input:
        ik = k.input_key
        if type(ik) is tuple and len(ik) == 2 and ik[0] == "arg":
            origin = f"argument leaf {ik[1]}"
        else:
            origin = f"input {ik!r}"
    else:
        try:
            origin = f"the result of {k.op_key()[0].name}"
        except Exception:  # a key of another shape: its own repr
            origin = repr(k)
    return (f"Traced<{x.aval}> from {origin}: an abstract value while tracing (no value "
            f"yet); td.debug.print('{{}}', x) prints its value when the program runs")


cdef object _concrete(Tracer x, str kind):
    """bool/float/int/complex of x's concrete value, or the error of abstract tracing."""
    if x._t is not None and x._t.concrete is not None:
        return x._t.concrete.read(x, kind)
    what = "truth value" if kind == "bool" else f"{kind}() value"
    raise TypeError(f"a traced value has no concrete value, so no {what}, inside jit or build "
                    f"(only its shape and dtype are known there): use tidu functions on it "
                    f"(tidu.sin, not math.sin), tidu.where for a data-dependent choice, "
                    f"jit(f, static_argnums=...) for an argument that selects the program, or "
                    f"call the transform (grad, jvp, ...) outside jit, where Python control "
                    f"flow on values works")


cdef object _numpy_dispatch():
    """tidu.numpy.dispatch, as the numpy layer registered it (``_py.dispatch``)."""
    return _py.dispatch


# How many tracing sessions are open over all threads: while none is, the transforms' per-call
# signature skips looking at this thread's trace stack.
cdef Py_ssize_t _n_tracing = 0


cdef extern from "Python.h":
    int PyGC_Enable()
    int PyGC_Disable()


cdef class TraceScope:
    """The context of one trace (``tidu.trace.build.tracing`` derives from it): entering pushes
    ``trace`` on this thread's trace stack, counts it in ``n_tracing`` and pauses the cyclic GC
    (tracing allocates millions of short acyclic objects, which it would rescan); leaving undoes
    the three.  Each side is C that runs no Python code between its steps, so a KeyboardInterrupt
    (Ctrl-C during a trace) cannot leave the count, the stack or the GC half changed: a leaked
    count would hold off the interner's automatic cut for the rest of the process, a stale stack
    entry would make later top-level calls look nested, and the GC would stay off."""

    cdef public object trace
    cdef list _on
    cdef int _gc_was
    cdef bint _open

    def __enter__(self):
        global _n_tracing
        cdef list stack = _py._stack()  # Python code: may raise, before anything changes
        if self._open:
            raise RuntimeError("a tracing context is entered once")
        stack.append(self.trace)
        self._on = stack
        self._open = True
        _n_tracing += 1
        self._gc_was = PyGC_Disable()
        return self

    def __exit__(self, *exc):
        global _n_tracing
        if self._open:
            self._open = False
            _n_tracing -= 1
            if self._on:
                self._on.pop()
            self._on = None
            if self._gc_was:
                PyGC_Enable()
        return False


def n_tracing():
    """Tracing sessions open over all threads."""
    return _n_tracing


@cython.freelist(64)
cdef class Tracer:
    """A value in a function being traced: supports numpy-style arithmetic, indexing and methods."""

    cdef readonly Trace _t
    cdef readonly Id _v
    cdef readonly object aval
    cdef Id _aid  # aval.id
    # jax's weak_type: a Python scalar argument, or computed from weakly typed values only;
    # type promotion lets the other operand's dtype win (tidu.graph.dtypes.lattice_result_type)
    cdef public bint weak_type

    __array_priority__ = 1000  # numpy defers to our reflected operators

    def __init__(self, Trace trace not None, Id v, av, bint weak_type=False):
        self._t = trace
        self._v = v
        self._aid = av.id
        self.aval = av
        self.weak_type = weak_type

    @property
    def key(self):
        """The global key of this value."""
        return ValKey(self._v)

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
    def size(self):
        return self.aval.size

    @property
    def T(self):  # noqa: N802 - numpy's name
        return _py.transpose(self)

    def __repr__(self):
        return _tracer_repr(self)

    # Python control flow on a traced value: its concrete value where the trace has one (a
    # transform outside jit, tidu.guards records the outcome as a guard of the program), else
    # an error.
    def __bool__(self):
        return _concrete(self, "bool")

    def __float__(self):
        return _concrete(self, "float")

    def __int__(self):
        return _concrete(self, "int")

    def __complex__(self):
        return _concrete(self, "complex")

    def __len__(self):
        if not self.aval.shape:
            raise TypeError(f"len() of a traced scalar ({self.aval}): a rank-0 value has no "
                            f"length")
        return self.aval.shape[0]

    def item(self):
        """The Python number of a one-element value (where the trace has concrete values)."""
        if self.aval.size != 1:
            raise ValueError(f"item() of a traced value of shape {self.aval.shape}: only "
                             f"one-element values have one")
        k = self.aval.dtype.kind
        return _concrete(self, "bool" if k == "b" else "int" if k in "iu" else
                         "complex" if k == "c" else "float")

    # numpy functions on traced values call tidu's (tidu.numpy.dispatch)
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _numpy_dispatch().array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _numpy_dispatch().array_function(func, types, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        raise TypeError(f"a traced value ({self.aval}) has no concrete value to convert to a "
                        f"numpy array (np.asarray, np.array): use tidu functions on it, which "
                        f"numpy functions called on it dispatch to")

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __index__(self):
        if self.aval.dtype.kind not in "iub":
            raise TypeError(f"a traced value of dtype {self.aval.dtype} cannot be used as a "
                            f"Python index")
        return _concrete(self, "int")

    # arithmetic
    def __add__(self, o): return _binary(_ADD, self, o)
    def __radd__(self, o): return _binary(_ADD, o, self)
    def __sub__(self, o): return _binary(_SUB, self, o)
    def __rsub__(self, o): return _binary(_SUB, o, self)
    def __mul__(self, o): return _binary(_MUL, self, o)
    def __rmul__(self, o): return _binary(_MUL, o, self)
    def __truediv__(self, o): return _binary(_DIV, self, o)
    def __rtruediv__(self, o): return _binary(_DIV, o, self)
    # numpy's sign rules, integers exact (tidu.numpy_math)
    def __floordiv__(self, o): return _py.floor_divide(self, o)
    def __rfloordiv__(self, o): return _py.floor_divide(o, self)
    def __mod__(self, o): return _py.remainder(self, o)
    def __rmod__(self, o): return _py.remainder(o, self)
    def __divmod__(self, o): return _py._divmod(self, o)
    def __rdivmod__(self, o): return _py._divmod(o, self)

    def __pow__(self, o, mod):
        if mod is not None:
            return NotImplemented
        if (type(o) is int or type(o) is float) and o == 2:  # tidu.numpy.core.power's x * x
            return _binary(_MUL, self, self)
        return _py.power(self, o)

    def __rpow__(self, o, mod):
        if mod is not None:
            return NotImplemented
        return _py.power(o, self)

    def __matmul__(self, o): return _matmul(self, o)
    def __rmatmul__(self, o): return _matmul(o, self)
    def __neg__(self): return _unary(_NEG, self)
    def __pos__(self): return self
    def __abs__(self): return _py.abs(self)

    # logical/bitwise (tidu.numpy.logical)
    def __and__(self, o): return _py.bitwise_and(self, o)
    def __rand__(self, o): return _py.bitwise_and(o, self)
    def __or__(self, o): return _py.bitwise_or(self, o)
    def __ror__(self, o): return _py.bitwise_or(o, self)
    def __xor__(self, o): return _py.bitwise_xor(self, o)
    def __rxor__(self, o): return _py.bitwise_xor(o, self)
    def __invert__(self): return _py.invert(self)
    def __lshift__(self, o): return _py.left_shift(self, o)
    def __rlshift__(self, o): return _py.left_shift(o, self)
    def __rshift__(self, o): return _py.right_shift(self, o)
    def __rrshift__(self, o): return _py.right_shift(o, self)

    # comparisons (a Tracer is unhashable, like a numpy array)
    def __lt__(self, o): return _py._compare("LT", self, o)
    def __le__(self, o): return _py._compare("LE", self, o)
    def __gt__(self, o): return _py._compare("GT", self, o)
    def __ge__(self, o): return _py._compare("GE", self, o)
    def __eq__(self, o): return _py._compare("EQ", self, o)
    def __ne__(self, o): return _py._compare("NE", self, o)

    # methods
    # jax.Array's signatures (dtype, initial, where, ...): tidu.numpy.reducers
    def sum(self, *args, **kwargs): return _py.sum(self, *args, **kwargs)
    def max(self, *args, **kwargs): return _py.max(self, *args, **kwargs)
    def mean(self, *args, **kwargs): return _py.mean(self, *args, **kwargs)
    def reshape(self, *shape): return reshape(self, shape[0] if len(shape) == 1 else shape)

    def transpose(self, *axes):
        return _py.transpose(self, axes[0] if len(axes) == 1 else (axes or None))

    def astype(self, dtype): return _py.astype(self, dtype)
    def conj(self): return _py.conj(self)

    @property
    def real(self): return _py.real(self)

    @property
    def imag(self): return _py.imag(self)

    def __getitem__(self, idx):
        return _getitem(self, idx)

    @property
    def at(self):  # jax's indexed updates: x.at[idx].set/add/mul/min/max/get
        return _py._at(self)

    def __getattr__(self, name):
        # the other jax.Array methods (x.min(), x.std(), x.clip(), ...): tidu.numpy.array_methods
        return _py.method(self, name)
