# pyx/ad/rules.pxi - AD rule templates (tidu/ad/rule_cache.hpp) and the linearize/transpose
# walks over fragments that replay them: included by _core.pyx.

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
    differentiate caches, which would otherwise leak between the two walks.  Returns the tangent
    value id
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
