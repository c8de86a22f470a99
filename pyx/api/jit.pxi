# Included by _core.pyx: the per-call work of tidu's transforms (jit, grad, ...), which optimisers
# and samplers run millions of times: the hashable signature a compiled program is cached under,
# the outputs' flattening, the jitted call's entry (the pytree convention is api/tree.pxi).

from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM

cdef object _PyBool = type(True)  # `bool` here is C++'s (libcpp)
cdef tuple _PY_SCALAR_TYPES = (_PyBool, int, float, complex)


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
        elif (t is float or t is int or t is _PyBool or t is complex
              or isinstance(x, _PY_SCALAR_TYPES)):
            sig.append(t)
        else:
            arr = x if hasattr(x, "dtype") and hasattr(x, "shape") else np.asarray(x)
            sig.append((tuple(arr.shape), np.dtype(arr.dtype)))
    return tuple(sig)


cdef dict _leaf_aval_memo = {}


def leaf_avals(leaves, slow):
    """The AbstractValue of each argument leaf: slow(x) (tidu.trace.build.as_aval of it) once per
    ndarray shape and dtype or Python float, complex or bool type, then from a memo."""
    cdef list out = []
    cdef cnp.ndarray a
    for x in leaves:
        t = type(x)
        if t is cnp.ndarray:
            a = <cnp.ndarray>x
            k = (x.shape, <object>cnp.PyArray_DESCR(a))
        elif t is float or t is complex or t is _PyBool:
            k = t
        else:
            out.append(slow(x))
            continue
        av = _leaf_aval_memo.get(k)
        if av is None:
            av = slow(x)
            _leaf_aval_memo[k] = av
        out.append(av)
    return out


def flatten_outputs(Trace trace not None, out, lift):
    """(Tracers of a traced function's result, its structure): tidu.trace.build.flatten_outputs.
    Leaves that are not Tracers are lifted (lift); a Tracer of another trace is an error."""
    cdef list leaves = []
    cdef Py_ssize_t i
    tree = _flatten_into(out, leaves, None)
    for i in range(len(leaves)):
        x = leaves[i]
        if type(x) is Tracer or isinstance(x, Tracer):
            if (<Tracer>x)._t is not trace:
                raise ValueError("the function returned a value from another trace")
            continue
        try:
            leaves[i] = lift(x)
        except TypeError:
            raise TypeError(f"a traced function must return arrays or tuples/lists/dicts of them, "
                            f"got {type(x).__name__} (output leaf {i}); a class of its own is a "
                            f"pytree node once registered with "
                            f"td.tree_util.register_pytree_node") from None
    return leaves, tree


def keys_of(tracers):
    """The ValKey of each Tracer."""
    cdef Tracer x
    return [ValKey(x._v) for x in tracers]


def intern_ids(dict ids, list objs, keys, lock):
    """The id of each of keys in the table ids (object -> id; objs: id -> object), new keys
    taking the next ids, holding lock (tidu.graph._Interned.ids_of; taken here, in C, so that an
    exception raised in Python code, a Ctrl-C, cannot leave it held: see call_locked)."""
    cdef list out = []
    cdef Py_ssize_t n
    with lock:
        for key in keys:
            n = len(objs)
            try:
                i = ids.setdefault(key, n)
            except TypeError:
                raise TypeError(f"keys and ops must be hashable, got {type(key).__name__}") \
                    from None
            if <Py_ssize_t>i == n:
                objs.append(key)
            out.append(i)
    return out


def call_locked(lock, fn, *args):
    """fn(*args) holding lock, which is taken and given back here, in C. A Python `with lock:`
    has instructions outside the handler that gives it back (CPython 3.11 runs the exit of a
    `with` left normally as plain code under the `with`'s line): an exception raised there (a
    Ctrl-C, as tests/backends/test_interrupt.py injects it) left the interner's lock held and
    the next trace waiting on it for good."""
    with lock:
        return fn(*args)


cdef class StaticJitted


def set_jit_disabled(bint on):
    """Set whether jit is disabled; returns the previous setting (tidu.api.jit.disable_jit)."""
    global _jit_off
    old = _jit_off
    _jit_off = on
    return old


def jit_disabled():
    """Whether td.disable_jit() is in effect."""
    return _jit_off


cdef class Jitted:
    """A jitted function's per-call entry.  Flat arguments of the kinds seen on the last call
    (each a Python scalar of one type, or an ndarray of one dtype and shape) go straight to the
    compiled program's C++ entry point; anything else, or an error or guard miss there, takes
    `slow` (tidu.api.jit's general path: flatten, signature, cache, conversions), which hands the
    entry it used to remember()."""

    cdef public object slow
    cdef public StaticJitted keyword  # the jit taking keyword arguments, once made
    cdef dict __dict__        # functools.wraps metadata, .cache
    cdef object __weakref__   # `slow` holds its jitted function weakly: no cycle to collect
    cdef Py_ssize_t _n
    cdef list _kinds           # per argument: its type, or the ndarray's dtype
    cdef vector[vector[cnp.npy_intp]] _dims  # per ndarray argument: its shape
    cdef list _order
    cdef object _run, _build

    def __init__(self, slow):
        self.slow = slow
        self.keyword = None
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
        if kwargs:
            if self.keyword is not None:
                return self.keyword.call(args, kwargs)
            return self.slow(*args, **kwargs)
        return self.call_flat(args)

    cdef object call_flat(self, tuple args):
        """The call with positional arguments args: the compiled entry when they are of the
        remembered kinds, the general path otherwise."""
        cdef Py_ssize_t i, k, nd
        cdef cnp.ndarray a
        cdef cnp.npy_intp* dims
        if _n_tracing or _jit_off or self._run is None or len(args) != self._n:
            return self.slow(*args)
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


cdef inline bint _same_static(object x, object v, object t):
    """x selects the same program as the static value v of type t did (the selection key is
    (type, value), so True and 1 differ)."""
    if x is v:
        return True
    if type(x) is not t:
        return False
    try:
        if x == v:
            return True
    except Exception:
        pass
    return False


cdef class StaticJitted:
    """The per-call entry of a jit with static or keyword arguments (tidu.static.static_jit).  A
    call whose positional count, keyword names and static values are those of the last call goes
    straight to the plain jit those statics selected, with the other arguments as flat positional
    ones (whose kinds that jit checks, in Jitted.call_flat); anything else takes `slow`, which
    hands what it selected to remember()."""

    cdef public object slow
    cdef dict __dict__         # functools.wraps metadata, .lower, .selections
    cdef object __weakref__    # `slow` holds this entry weakly: no cycle to collect
    cdef Py_ssize_t _n
    cdef tuple _kw             # keyword names, in the last call's order
    cdef list _spos, _svals, _stypes       # static positions, their values and types
    cdef list _skw, _skwvals, _skwtypes    # static keywords, likewise
    cdef list _dyn_idx, _dyn_kw            # the traced arguments, in the inner jit's order
    cdef Jitted _inner

    def __init__(self, slow):
        self.slow = slow
        self._inner = None
        self._n = -1

    def remember(self, tuple args, dict kwargs, spos, skw, dyn_idx, dyn_kw, inner):
        """Take `inner` (a Jitted) for the next calls with these statics and keyword names."""
        self._inner = None  # (a call that lands mid-update takes the general path)
        if not isinstance(inner, Jitted):
            return
        self._n = len(args)
        self._kw = tuple(kwargs)
        self._spos = list(spos)
        self._svals = [args[i] for i in spos]
        self._stypes = [type(args[i]) for i in spos]
        self._skw = list(skw)
        self._skwvals = [kwargs[k] for k in skw]
        self._skwtypes = [type(kwargs[k]) for k in skw]
        self._dyn_idx, self._dyn_kw = list(dyn_idx), list(dyn_kw)
        self._inner = <Jitted>inner

    def forget(self):
        self._inner = None

    def __call__(self, *args, **kwargs):
        return self.call(args, kwargs)

    cdef object call(self, tuple args, dict kwargs):
        cdef Py_ssize_t j, n_pos, nkw
        if _n_tracing or _jit_off or self._inner is None or len(args) != self._n:
            return self.slow(*args, **kwargs)
        nkw = len(self._kw)
        if len(kwargs) != nkw:
            return self.slow(*args, **kwargs)
        for j in range(nkw):
            if self._kw[j] not in kwargs:
                return self.slow(*args, **kwargs)
        for j in range(len(self._spos)):
            if not _same_static(args[<Py_ssize_t>self._spos[j]], self._svals[j], self._stypes[j]):
                return self.slow(*args, **kwargs)
        for j in range(len(self._skw)):
            if not _same_static(kwargs[self._skw[j]], self._skwvals[j], self._skwtypes[j]):
                return self.slow(*args, **kwargs)
        n_pos = len(self._dyn_idx)
        flat = PyTuple_New(n_pos + len(self._dyn_kw))
        for j in range(n_pos):
            x = args[<Py_ssize_t>self._dyn_idx[j]]
            Py_INCREF(x)
            PyTuple_SET_ITEM(flat, j, x)
        for j in range(len(self._dyn_kw)):
            x = kwargs[self._dyn_kw[j]]
            Py_INCREF(x)
            PyTuple_SET_ITEM(flat, n_pos + j, x)
        return self._inner.call_flat(flat)
