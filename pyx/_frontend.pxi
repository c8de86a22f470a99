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


cdef class Jitted:
    """A jitted function's per-call entry.  Flat arguments of the kinds seen on the last call
    (each a Python scalar of one type, or an ndarray of one dtype and shape) go straight to the
    compiled program's C++ entry point; anything else, or an error or guard miss there, takes
    `slow` (tidu.api's general path: flatten, signature, cache, conversions), which hands the
    entry it used to remember()."""

    cdef public object slow
    cdef dict __dict__        # functools.wraps metadata, .cache
    cdef Py_ssize_t _n
    cdef list _kinds           # per argument: its type, or the ndarray's dtype
    cdef vector[vector[cnp.npy_intp]] _dims  # per ndarray argument: its shape
    cdef list _order
    cdef object _run, _build

    def __init__(self, slow):
        self.slow = slow
        self._run = None
        self._n = -1

    def remember(self, tuple args, list order, run, build):
        """Take this entry for the next calls with arguments of these kinds."""
        cdef cnp.ndarray a
        kinds = []
        self._dims.clear()
        self._dims.resize(len(args))
        for i, x in enumerate(args):
            t = type(x)
            if t is cnp.ndarray:
                a = <cnp.ndarray>x
                kinds.append(<object>cnp.PyArray_DESCR(a))
                self._dims[i].assign(cnp.PyArray_DIMS(a), cnp.PyArray_DIMS(a) + cnp.PyArray_NDIM(a))
            elif t is float or t is int or t is _PyBool or t is complex:
                kinds.append(t)
            else:
                self._run = None
                return
        self._kinds, self._order, self._run, self._build = kinds, order, run, build
        self._n = len(args)

    def forget(self):
        self._run = None

    def __call__(self, *args, **kwargs):
        cdef Py_ssize_t i, k, nd
        cdef cnp.ndarray a
        cdef cnp.npy_intp* dims
        if kwargs or _n_tracing or self._run is None or len(args) != self._n:
            return self.slow(*args, **kwargs)
        for i in range(self._n):
            x = args[i]
            kind = self._kinds[i]
            if type(x) is cnp.ndarray:
                a = <cnp.ndarray>x
                nd = cnp.PyArray_NDIM(a)
                if <object>cnp.PyArray_DESCR(a) is not kind or <size_t>nd != self._dims[i].size():
                    return self.slow(*args)
                dims = cnp.PyArray_DIMS(a)
                for k in range(nd):
                    if dims[k] != self._dims[i][k]:
                        return self.slow(*args)
            elif type(x) is not kind:
                return self.slow(*args)
        inputs = [args[i] for i in self._order]
        try:
            return self._build(self._run(inputs))
        except Exception:  # a conversion, a guard miss, an error to report: the general path
            return self.slow(*args)


cdef object _unflatten_at(object tree, list flat, Py_ssize_t* pos):
    if tree is None:
        x = flat[pos[0]]
        pos[0] += 1
        return x
    kind, children = tree
    if kind is dict:
        return {k: _unflatten_at(c, flat, pos) for k, c in children}
    vals = [_unflatten_at(c, flat, pos) for c in children]
    if kind is tuple:
        return tuple(vals)
    if kind is list:
        return vals
    return kind(*vals)  # a namedtuple


def unflatten(tree, flat):
    """A function's output structure (tidu.tracing.flatten_outputs' tree) rebuilt over flat
    values: per call of every transform with nested outputs, so compiled."""
    cdef Py_ssize_t pos = 0
    return _unflatten_at(tree, flat if type(flat) is list else list(flat), &pos)
