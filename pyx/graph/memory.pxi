# pyx/graph/memory.pxi - giving the interner's memory back (tidu.graph.memory): the holder count,
# disowning, and emptying the interner with every C++-side memo of its ids.  Included last by
# _core.pyx (it clears the rule cache and the tracer's memos, defined in the files before it).

from collections import OrderedDict as _OrderedDict


def live_holders():
    """Fragment stores and walks (Materialized) alive that count as holders of interned ids."""
    return _live_holders


def epoch():
    """How many times the interner has been emptied (ids of an earlier epoch are void)."""
    return _epoch


def disown(obj):
    """Stop counting obj (a FragmentStore or Materialized) as a holder: it belongs to something
    that is itself freed with the interner (a control-flow Body, owned by its interned op).
    Once the interner is emptied, obj raises FreedGraphError when used.  Returns obj."""
    global _live_holders
    if isinstance(obj, FragmentStore):
        if (<FragmentStore>obj).counted:
            (<FragmentStore>obj).counted = False
            _live_holders -= 1
    elif isinstance(obj, Materialized):
        if (<Materialized>obj).counted:
            (<Materialized>obj).counted = False
            _live_holders -= 1
    else:
        raise TypeError(f"disown takes a FragmentStore or Materialized, got {type(obj).__name__}")
    return obj


def reset_interner(tables=()):
    """Empty the interner and every memo of its ids when no holder is alive; returns whether it
    did.  `tables` are the Python dicts and lists that hold interned ids (tidu.graph.memory: the
    tables of primitives and input keys, the memos of prim ids): they are emptied in the same
    call, and their old contents released only after it, so no Python code runs (and no other
    thread interns) between emptying the interner and emptying them."""
    global _epoch
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
