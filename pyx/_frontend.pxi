# Included by _core.pyx: the per-call work of tidu's transforms (jit, grad, ...), which optimisers
# and samplers run millions of times: flattening the positional arguments into leaves and the
# hashable signature a compiled program is cached under.  tidu.api's _flatten_args and
# _signature are these functions.

cdef object _PyBool = type(True)  # `bool` here is C++'s (libcpp)
cdef tuple _PY_SCALAR_TYPES = (_PyBool, int, float, complex)


cdef object _flatten_into(object x, list leaves):
    """Appends x's leaves; returns x's tree (None for a leaf)."""
    cdef list trees
    if isinstance(x, (tuple, list)):
        trees = []
        for a in x:
            if isinstance(a, (tuple, list, dict)):
                trees.append(_flatten_into(a, leaves))
            else:
                leaves.append(a)
                trees.append(None)
        return (type(x), tuple(trees))
    if isinstance(x, dict):
        trees = []
        for k in x:
            trees.append((k, _flatten_into(x[k], leaves)))
        return (dict, tuple(trees))
    leaves.append(x)
    return None


def flatten_args(args):
    """Leaves (arrays/scalars) of positional args that may be tuples/lists/dicts, and their tree
    (nested tuples, hashable: it is part of the transforms' cache keys)."""
    cdef list leaves = []
    tree = _flatten_into(args, leaves)
    return leaves, tree


def signature(leaves):
    """What a compiled program depends on: each leaf's shape and dtype (a Python scalar's type);
    None when a leaf is a Tracer or a trace is open on this thread (the call is inside a trace,
    where the caller inlines, so that fn may use the enclosing trace's values)."""
    cdef list sig = []
    cdef cnp.ndarray a
    if _n_tracing and _py._stack():
        return None
    for x in leaves:
        t = type(x)
        if t is Tracer:
            return None
        if t is cnp.ndarray:
            a = <cnp.ndarray>x
            sig.append((x.shape, <object>cnp.PyArray_DESCR(a)))
        elif t is float or t is int or t is _PyBool or t is complex or isinstance(x, _PY_SCALAR_TYPES):
            sig.append(t)
        else:
            arr = x if hasattr(x, "dtype") and hasattr(x, "shape") else np.asarray(x)
            sig.append((tuple(arr.shape), np.dtype(arr.dtype)))
    return tuple(sig)
