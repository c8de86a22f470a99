# pyx/backends/encode.pxi - encode_gather: a compiled program's arrays for the evaluator, copied
# out of per-op and per-aval tables (tidu.evaluator): included by _core.pyx.

def encode_gather(const uint32_t[::1] slot_aval, const uint32_t[::1] instr_prim, aval_code,
                  prim_code):
    """The interpreter's per-slot and per-instruction arrays of a compiled program (tidu.evaluator
    .encode): each distinct abstract value's (dtype code, shape) and each distinct primitive's
    (opcode, int64 attributes, ...) are asked of aval_code / prim_code once, then copied to every
    slot and instruction in one pass.  Returns (slot_dtype, slot_ndim, shapes, opcode, attr_off,
    attrs, prims, p_inv): prims the distinct primitive ids in order of first use, p_inv each
    instruction's index into them.  NotImplementedError: a primitive with no C++ kernel."""
    cdef size_t n_slots = slot_aval.shape[0], n_instr = instr_prim.shape[0], i, k
    cdef FlatMap32 aval_at = FlatMap32(64), prim_at = FlatMap32(64)
    cdef vector[uint8_t] a_dtype, p_op
    cdef vector[uint32_t] a_ndim, a_off, p_off, slot_loc
    cdef vector[cnp.int64_t] a_shape, p_attrs
    cdef Id aid, loc
    cdef long code
    cdef const cnp.int64_t[::1] av
    a_off.push_back(0)
    p_off.push_back(0)
    slot_loc.resize(n_slots)
    cdef cnp.ndarray slot_dtype = np.empty(n_slots, np.uint8)
    cdef cnp.ndarray slot_ndim = np.empty(n_slots, np.uint32)
    cdef uint8_t* sd = <uint8_t*>cnp.PyArray_DATA(slot_dtype)
    cdef uint32_t* sn = <uint32_t*>cnp.PyArray_DATA(slot_ndim)
    cdef size_t total = 0
    for i in range(n_slots):
        aid = slot_aval[i]
        loc = aval_at.get(aid, kNone)
        if loc == kNone:
            loc = <Id>a_dtype.size()
            aval_at.insert(aid, loc)
            c, shape = aval_code(aid)
            a_dtype.push_back(<uint8_t>c)
            a_ndim.push_back(<uint32_t>len(shape))
            for x in shape:
                a_shape.push_back(<cnp.int64_t>x)
            a_off.push_back(<uint32_t>a_shape.size())
        slot_loc[i] = loc
        sd[i] = a_dtype[loc]
        sn[i] = a_ndim[loc]
        total += a_ndim[loc]
    shapes = _gather_ragged(slot_loc.data(), n_slots, a_off, a_shape, total)
    cdef cnp.ndarray opcode = np.empty(n_instr, np.uint8)
    cdef cnp.ndarray attr_off = np.empty(n_instr + 1, np.uint32)
    cdef cnp.ndarray p_inv = np.empty(n_instr, np.uint32)
    cdef uint8_t* oc = <uint8_t*>cnp.PyArray_DATA(opcode)
    cdef uint32_t* ao = <uint32_t*>cnp.PyArray_DATA(attr_off)
    cdef uint32_t* pi = <uint32_t*>cnp.PyArray_DATA(p_inv)
    prims = []
    total = 0
    for i in range(n_instr):
        aid = instr_prim[i]
        loc = prim_at.get(aid, kNone)
        if loc == kNone:
            loc = <Id>p_op.size()
            prim_at.insert(aid, loc)
            hit = prim_code(aid)
            code = hit[0]
            if code < 0 or code > 255:
                raise NotImplementedError("an op has no C++ kernel")
            p_op.push_back(<uint8_t>code)
            av = hit[1]
            for k in range(<size_t>av.shape[0]):
                p_attrs.push_back(av[k])
            p_off.push_back(<uint32_t>p_attrs.size())
            prims.append(aid)
        oc[i] = p_op[loc]
        pi[i] = loc
        ao[i] = <uint32_t>total
        total += p_off[loc + 1] - p_off[loc]
    if total > 0xFFFFFFFF:
        raise ValueError("a program with more than 2^32 attribute values")
    ao[n_instr] = <uint32_t>total
    attrs = _gather_ragged(pi, n_instr, p_off, p_attrs, total)
    return slot_dtype, slot_ndim, shapes, opcode, attr_off, attrs, prims, p_inv
