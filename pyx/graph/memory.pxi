# pyx/graph/memory.pxi - giving the interner's memory back (tidu.graph.memory): the holder count,
# disowning, and emptying the interner with every C++-side memo of its ids.  Included last by
# _core.pyx (it clears the rule cache and the tracer's memos, defined in the files before it).

from collections import OrderedDict as _OrderedDict


# Graph transforms in progress over all threads (tidu.graph.memory.busy).
cdef Py_ssize_t _n_busy = 0


cdef class BusyScope:
    """``with BusyScope():`` marks a graph transform (differentiate, transpose, the batching
    walk) in progress: it holds ids outside any holder for a while, so the automatic cut waits
    while one runs in any thread.  Entering and leaving are C (no Python code between the check
    and the count), so a KeyboardInterrupt cannot leave the count raised: that would hold off the
    automatic cut for the rest of the process."""

    def __enter__(self):
        global _n_busy
        _n_busy += 1
        return self

    def __exit__(self, *exc):
        global _n_busy
        _n_busy -= 1
        return False


def n_busy():
    """Graph transforms in progress over all threads (see BusyScope)."""
    return _n_busy


def holder_tops():
    """Per counting holder, (values past its newest value id, ops past its newest op id): what
    keeps a cut from going lower (diagnostics)."""
    cdef size_t h
    return [(_top(_holders[h].vals[0]), _top(_holders[h].ops[0])) for h in range(_holders.size())]


def live_holders():
    """Fragment stores and walks (Materialized) alive that count as holders of interned ids."""
    return _live_holders


def epoch():
    """How many times the interner has been emptied (ids of an earlier epoch are void)."""
    return _epoch


cdef Id _top(const vector[Id]& vals):
    cdef Id t = 0
    cdef size_t i
    for i in range(vals.size()):
        if vals[i] + 1 > t:
            t = vals[i] + 1
    return t


def disown(obj):
    """Stop counting obj (a FragmentStore or Materialized) as a holder: it belongs to something
    that is itself freed with the interner (a control-flow Body, owned by its interned op).
    Once the interner is emptied, or cut below obj's ids, obj raises FreedGraphError when used.
    Returns obj."""
    if isinstance(obj, FragmentStore):
        if (<FragmentStore>obj).slot >= 0:
            _unhold(&(<FragmentStore>obj).slot)
            (<FragmentStore>obj).top = _top((<FragmentStore>obj).data.vals)
            (<FragmentStore>obj).gen = _gen
    elif isinstance(obj, Materialized):
        if (<Materialized>obj).slot >= 0:
            _unhold(&(<Materialized>obj).slot)
            (<Materialized>obj).top = _top((<Materialized>obj).r.vals)
            (<Materialized>obj).gen = _gen
    else:
        raise TypeError(f"disown takes a FragmentStore or Materialized, got {type(obj).__name__}")
    return obj


def generation():
    """How many times the interner has been cut back since it was last emptied."""
    return _gen


def kept_marks():
    """(values, ops, primitives, input keys) a cut must keep: every id a counting holder
    reaches, closed so that each kept op keeps its outputs and each kept value its op, and the
    primitives of the kept ops and the keys of the kept inputs.  Ids are handed out in order,
    so everything below the marks stays (a stack)."""
    cdef size_t h
    cdef Id x, nv = 0, no = 0, np_ = 0, nk = 0, o
    for h in range(_holders.size()):
        x = _top(_holders[h].vals[0])
        if x > nv:
            nv = x
        x = _top(_holders[h].ops[0])
        if x > no:
            no = x
    # close: the last kept value's op, the last kept op's outputs (ids grow together in time)
    while True:
        o = no
        x = nv
        while x > 0 and _I.val(x - 1).op == kNone:
            x -= 1
        if x > 0 and _I.val(x - 1).op + 1 > no:
            no = _I.val(x - 1).op + 1
        if no > 0 and _I.op(no - 1).first_val + _I.op(no - 1).n_out > nv:
            nv = _I.op(no - 1).first_val + _I.op(no - 1).n_out
        if no == o:
            break
    for o in range(no):
        if _I.op(o).prim + 1 > np_:
            np_ = _I.op(o).prim + 1
    for x in range(nv):
        if _I.val(x).op == kNone and _I.val(x).index + 1 > nk:
            nk = _I.val(x).index + 1
    return nv, no, np_, nk


def truncate_interner(Id n_vals, Id n_ops, Id n_prims, Id n_keys, prims, keys, tables=()):
    """Cut the interner back to its first n_vals values and n_ops ops, and the tables of
    primitives and input keys (`prims`, `keys`: (ids: object -> id, objs: id -> object)) to
    their first n_prims and n_keys, emptying every memo of ids (`tables`, and the C++ ones) as
    reset_interner does; a new generation starts.  The marks must be at least kept_marks()
    (checked again here).  Returns the number of ops freed."""
    global _gen
    cdef list held = []
    cdef size_t g
    cdef Id freed_ops = <Id>_I.n_ops() - n_ops
    tables = list(tables)
    for t in tables:
        if type(t) is not dict and type(t) is not list and type(t) is not _OrderedDict:
            raise TypeError(f"truncate_interner: {type(t).__name__} is not a dict, OrderedDict "
                            f"or list")
    cdef dict prim_ids = prims[0], key_ids = keys[0]
    cdef list prim_objs = prims[1], key_objs = keys[1]
    if (n_vals > _I.n_vals() or n_ops > _I.n_ops() or n_prims > <Id>len(prim_objs)
            or n_keys > <Id>len(key_objs)):
        raise ValueError("truncate_interner: marks beyond the interner's size")
    nv, no, np_, nk = kept_marks()
    if nv > n_vals or no > n_ops or np_ > n_prims or nk > n_keys:
        raise ValueError(f"truncate_interner: live holders reach ({nv}, {no}, {np_}, {nk}) past "
                         f"the marks ({n_vals}, {n_ops}, {n_prims}, {n_keys})")
    for t in tables:
        if type(t) is dict:
            held.append((<dict>t).copy())
            (<dict>t).clear()
        elif type(t) is _OrderedDict:
            held.append(dict(t))
            t.clear()
        else:
            held.append((<list>t)[:])
            del (<list>t)[:]
    for ids, objs, n in ((prim_ids, prim_objs, n_prims), (key_ids, key_objs, n_keys)):
        tail = objs[n:]
        held.append(tail)
        del objs[n:]
        for obj in tail:
            if ids.get(obj, -1) >= n:
                del ids[obj]
    _I.truncate(n_vals, n_ops)
    _vfloor.push_back(kNone)
    _pfloor.push_back(kNone)
    for g in range(_vfloor.size()):
        if n_vals < _vfloor[g]:
            _vfloor[g] = n_vals
        if n_prims < _pfloor[g]:
            _pfloor[g] = n_prims
    _gen += 1
    clear_rule_cache()
    clear_tracer_rules()
    _transposes.clear()
    _transposes.shrink_to_fit()
    _leaf_aval_memo.clear()
    return freed_ops


def prims_freed(unsigned long long epoch, unsigned int gen, Id n_prims):
    """Whether primitive ids below n_prims, handed out in (epoch, gen), may have been freed."""
    return epoch != _epoch or (gen != _gen and n_prims > _pfloor[gen])


def reset_interner(tables=()):
    """Empty the interner and every memo of its ids when no holder is alive; returns whether it
    did.  `tables` are the Python dicts and lists that hold interned ids (tidu.graph.memory: the
    tables of primitives and input keys, the memos of prim ids): they are emptied in the same
    call, and their old contents released only after it, so no Python code runs (and no other
    thread interns) between emptying the interner and emptying them."""
    global _epoch, _gen
    cdef list held = []
    tables = list(tables)
    for t in tables:
        if type(t) is not dict and type(t) is not list and type(t) is not _OrderedDict:
            raise TypeError(f"reset_interner: {type(t).__name__} is not a dict, OrderedDict or "
                            f"list")
    if _live_holders != 0:
        return False
    for t in tables:
        if type(t) is dict:
            held.append((<dict>t).copy())
            (<dict>t).clear()
        elif type(t) is _OrderedDict:  # its C methods: no Python code runs
            held.append(dict(t))
            t.clear()
        else:
            held.append((<list>t)[:])
            del (<list>t)[:]
    _I.truncate(0, 0)
    _epoch += 1
    _gen = 0
    _vfloor.clear()
    _pfloor.clear()
    clear_rule_cache()
    clear_tracer_rules()
    _transposes.clear()
    _transposes.shrink_to_fit()
    _leaf_aval_memo.clear()
    return True


def memo_sizes():
    """Entries of the C++-side memos: rule templates, tracer rule tables, leaf avals."""
    cdef size_t k, rules = 0
    for k in range(_r2.size()):
        rules += _r2[k].size()
    for k in range(_r1.size()):
        rules += _r1[k].size()
    return {"rule_templates": _RC.size(), "tracer_rules": rules + len(_mm_rules)
            + len(_getitem_plans) + len(_reshape_rules) + len(_concat_rules),
            "leaf_avals": len(_leaf_aval_memo)}


def clear_leaf_aval_memo():
    _leaf_aval_memo.clear()
