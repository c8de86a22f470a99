"""The numpy shape and array-construction functions (tidu.shapes, the Rev primitive) against
jax.numpy in x64: values on the interpreter and on XLA, grad / jvp / hessian against jax's,
order-2 derivative checks, keyword arguments, and the errors bad arguments get."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value
from tidu.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

rng = np.random.default_rng(7)


def r(*shape, dtype="float64"):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


# name -> (f(m, *args) with m tidu or jax.numpy, args).  Every f is differentiable in its args.
CASES = {
    "neg_step_slice": (lambda m, x: x[::-1, 4:0:-2], [r(3, 5)]),
    "neg_step_slice_mixed": (lambda m, x: x[1, ::-2, None, 1:3], [r(2, 5, 4)]),
    "neg_step_slice_empty": (lambda m, x: m.sum(x[0:3:-1]) + m.sum(x[::-3]), [r(7)]),
    "stack": (lambda m, x, y: m.stack([x, y, x * y], axis=1), [r(2, 3), r(2, 3)]),
    "stack_neg_axis": (lambda m, x: m.stack([x, 2 * x], axis=-1), [r(2, 3)]),
    "vstack": (lambda m, x, y: m.vstack([x, y, x]), [r(3), r(3)]),
    "hstack": (lambda m, x, y: m.hstack([x, y]), [r(2, 3), r(2, 1)]),
    "hstack_1d": (lambda m, x, y: m.hstack([x, y, 1.0]), [r(3), r(2)]),
    "dstack": (lambda m, x, y: m.dstack([x, y]), [r(2, 3), r(2, 3)]),
    "column_stack": (lambda m, x, y: m.column_stack([x, y]), [r(4), r(4, 2)]),
    "split": (lambda m, x: m.split(x, 3, axis=1)[1] * m.split(x, [1, 4])[2][0, :2], [r(5, 6)]),
    "array_split": (lambda m, x: m.concatenate([p * (i + 1) for i, p in
                                                 enumerate(m.array_split(x, 3))]), [r(7)]),
    "squeeze": (lambda m, x: m.squeeze(x) + m.squeeze(x, axis=(0, 2))[None], [r(1, 3, 1)]),
    "expand_dims": (lambda m, x: m.expand_dims(x, (0, -1)) * m.expand_dims(x, 1)[None, ..., None],
                    [r(2, 3)]),
    "flip": (lambda m, x: m.flip(x) + m.flip(x, 1) * m.flip(x, (0, 2)), [r(2, 3, 4)]),
    "flip_lr_ud": (lambda m, x: m.fliplr(x) * m.flipud(x), [r(3, 4)]),
    "roll": (lambda m, x: m.roll(x, 2, 1) + m.roll(x, -1) + m.roll(x, (1, 2), (0, 1)), [r(3, 4)]),
    "roll_big_shift": (lambda m, x: m.roll(x, 13, axis=0), [r(5)]),
    "tile": (lambda m, x: m.tile(x, (2, 1, 3)), [r(2, 3)]),
    "tile_int": (lambda m, x: m.tile(x, 3), [r(2)]),
    "repeat": (lambda m, x: m.repeat(x, 2, axis=1), [r(2, 3)]),
    "repeat_flat": (lambda m, x: m.repeat(x, 3), [r(2, 2)]),
    "repeat_counts": (lambda m, x: m.repeat(x, np.array([2, 0, 1]), axis=0), [r(3, 2)]),
    "moveaxis": (lambda m, x: m.moveaxis(x, (0, 1), (2, 0)), [r(2, 3, 4)]),
    "swapaxes": (lambda m, x: m.swapaxes(x, 0, -1), [r(2, 3, 4)]),
    "ravel": (lambda m, x: m.ravel(x.T), [r(2, 3)]),
    "diag_of_matrix": (lambda m, x: m.diag(x)[:2] + m.diag(x, 1) + m.diag(x, -2), [r(3, 3)]),
    "diag_of_vector": (lambda m, x: m.diag(x) + m.diag(x[:2], 1) + m.diag(x[1:], -1), [r(3)]),
    "diagonal": (lambda m, x: m.diagonal(x, 1, 0, 2), [r(3, 2, 4)]),
    "diagonal_neg": (lambda m, x: m.diagonal(x, -1), [r(4, 3)]),
    "diagonal_empty": (lambda m, x: m.sum(m.diagonal(x, 5)) + m.sum(x), [r(3, 3)]),
    "tril": (lambda m, x: m.tril(x) + m.tril(x, -1) * 2, [r(2, 3, 4)]),
    "triu": (lambda m, x: m.triu(x, 1) + m.triu(x, -1) * 2, [r(3, 4)]),
    "var": (lambda m, x: m.var(x) + m.var(x, axis=0, ddof=1), [r(4, 3)]),
    "var_keepdims": (lambda m, x: m.var(x, axis=(0, 2), keepdims=True), [r(2, 3, 4)]),
    "std": (lambda m, x: m.std(x, axis=1) + m.std(x, ddof=1), [r(3, 4)]),
    "var_complex": (lambda m, z: m.var(z, axis=0), [r(3, 2, dtype="complex128")]),
    "diff": (lambda m, x: m.diff(x), [r(3, 5)]),
    "diff_n_axis": (lambda m, x: m.diff(x, n=2, axis=0), [r(5, 2)]),
    "diff_prepend": (lambda m, x: m.diff(x, prepend=0.0, append=x[-1:] * 2), [r(4)]),
    "atleast": (lambda m, x: m.atleast_1d(x[0, 0]) * m.atleast_2d(x[0]) * m.atleast_3d(x),
                [r(2, 3)]),
    "atleast_3d_1d": (lambda m, x: m.atleast_3d(x), [r(3)]),
    "pad_constant": (lambda m, x: m.pad(x, ((1, 2), (0, 3))), [r(2, 3)]),
    "pad_constant_values": (lambda m, x: m.pad(x, 2, constant_values=1.5), [r(2, 3)]),
    "pad_constant_pairs": (lambda m, x: m.pad(x, (1, 2), constant_values=((1.0, 2.0), (3., 4.))),
                           [r(2, 3)]),
    "pad_traced_value": (lambda m, x: m.pad(x, 1, constant_values=x[0, 0]), [r(2, 3)]),
    "pad_edge": (lambda m, x: m.pad(x, ((2, 1), (1, 3)), mode="edge"), [r(2, 3)]),
    "pad_reflect": (lambda m, x: m.pad(x, ((2, 1), (1, 3)), mode="reflect"), [r(3, 4)]),
    "pad_reflect_wide": (lambda m, x: m.pad(x, (7, 5), mode="reflect"), [r(3)]),
    "pad_symmetric": (lambda m, x: m.pad(x, ((2, 1), (4, 3)), mode="symmetric"), [r(3, 2)]),
    "pad_wrap": (lambda m, x: m.pad(x, ((2, 5), (1, 3)), mode="wrap"), [r(3, 2)]),
    "select": (lambda m, x, y: m.select([x > 0.5, y < 0], [x * y, x + y], default=x),
               [r(5), r(5)]),
    "meshgrid": (lambda m, x, y: m.meshgrid(x, y)[0] * m.meshgrid(x, y)[1], [r(3), r(2)]),
    "meshgrid_ij_sparse": (lambda m, x, y, z: sum(m.meshgrid(x, y, z, indexing="ij", sparse=True)),
                           [r(3), r(2), r(4)]),
    "meshgrid_xy3": (lambda m, x, y, z: m.meshgrid(x, y, z)[2], [r(3), r(2), r(4)]),
    "linspace": (lambda m, a, b: m.linspace(a, b, 5), [r(), r()]),
    "linspace_arrays": (lambda m, a, b: m.linspace(a, b, 4, endpoint=False, axis=1),
                        [r(2), r(2)]),
    "asarray_list": (lambda m, x, y: m.asarray([x, 2.0, y]), [r(), r()]),
    "asarray_nested": (lambda m, x, y: m.asarray([[x[0], y], [1.0, x[1] * y]]), [r(2), r()]),
    "array_of_arrays": (lambda m, x: m.array([x, x * 2, m.ones(3)]), [r(3)]),
    "full_like": (lambda m, x: m.full_like(x, 3.0) * x + m.full((2, 3), x[0, 1]), [r(2, 3)]),
    "zeros_ones_like": (lambda m, x: m.zeros_like(x) + m.ones_like(x) * x +
                        m.zeros((2, 3)) + m.eye(2, 3, k=1), [r(2, 3)]),
}

NAMES = list(CASES)


def _flat(o):
    if isinstance(o, (list, tuple)):
        return [y for x in o for y in _flat(x)]
    return [np.asarray(o)]


def _close(got, want, tol=1e-12):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _loss(m, f):
    """A real scalar of f's outputs that is curved in every output entry."""
    def loss(*args):
        total = 0.0
        for o in _flat_traced(f(m, *args)):
            o = m.real(o * o) if o.dtype.kind == "c" else o
            total = total + m.sum(m.sin(o) * (1.0 + m.cos(o)))
        return total
    return loss


def _flat_traced(o):
    if isinstance(o, (list, tuple)):
        return [y for x in o for y in _flat_traced(x)]
    return [o]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("backend", ["cpu", "xla"])
def test_values_match_jax(name, backend):
    f, args = CASES[name]
    got = td.jit(lambda *a: f(td, *a), backend=backend)(*args)
    want = jax.jit(lambda *a: f(jnp, *a))(*args)
    _close(got, want)


@pytest.mark.parametrize("name", NAMES)
def test_grad_and_jvp_match_jax(name):
    f, args = CASES[name]
    nums = tuple(range(len(args)))
    got = td.grad(_loss(td, f), argnums=nums)(*args)
    want = jax_value(jax.grad(_loss(jnp, f), argnums=nums), *args)
    # tidu's gradient of a real loss in a complex z is conj of jax's (DESIGN §5)
    want = [np.conj(w) if np.iscomplexobj(w) else w for w in want]
    _close(got, want, 1e-10)
    tangents = [r(*np.shape(a), dtype=np.asarray(a).dtype) for a in args]
    _, got_t = td.jvp(lambda *a: f(td, *a), args, tangents)
    _, want_t = jax_value(lambda a, t: jax.jvp(lambda *a: f(jnp, *a), a, t), tuple(args), tuple(tangents))
    _close(got_t, want_t, 1e-10)


HESS = ["neg_step_slice", "stack", "roll", "tile", "repeat_counts", "diag_of_vector", "diagonal",
        "tril", "var", "std", "diff_prepend", "pad_reflect", "pad_wrap", "pad_traced_value",
        "select", "linspace", "asarray_nested", "flip"]


@pytest.mark.parametrize("name", HESS)
def test_hessian_matches_jax(name):
    f, args = CASES[name]
    x = args[0]
    rest = args[1:]
    got = td.hessian(lambda x: _loss(td, f)(x, *rest))(x)
    want = jax_value(jax.hessian(lambda x: _loss(jnp, f)(x, *rest)), x)
    _close(got, want, 1e-9)


@pytest.mark.parametrize("name", HESS)
def test_order_two_against_finite_differences(name):
    f, args = CASES[name]
    check_grads(_loss(td, f), args, order=2)


# ---- dtypes and plain numpy ----

@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "int32",
                                   "int64", "bool"])
@pytest.mark.parametrize("backend", ["cpu", "xla"])
def test_every_dtype_flips_and_rolls(dtype, backend):
    x = (r(3, 4) * 3).astype(dtype) if dtype != "bool" else r(3, 4) > 0
    fns = lambda m, x: [x[::-1, ::-2], m.flip(x, 1), m.roll(x, 1, 0), m.tile(x, (1, 2)),
                        m.tril(x), m.diagonal(x), m.pad(x, 1, mode="reflect"), m.stack([x, x]),
                        m.repeat(x, np.array([1, 2, 0]), axis=0)]
    got = td.jit(lambda x: fns(td, x), backend=backend)(x)
    want = jax.jit(lambda x: fns(jnp, x))(x)
    _close(got, want, 1e-6)


def test_integer_outputs_refuse_differentiation():
    with pytest.raises(TypeError, match="int"):
        td.grad(lambda x: td.sum(td.flip(x)))(np.arange(3))


def test_outside_a_trace_the_functions_are_numpys():
    x = np.arange(12.0).reshape(3, 4)
    assert np.array_equal(td.flip(x), np.flip(x))
    assert np.array_equal(td.stack([x, x], 1), np.stack([x, x], 1))
    assert np.array_equal(td.pad(x, 1, mode="wrap"), np.pad(x, 1, mode="wrap"))
    assert td.var(x, ddof=1) == np.var(x, ddof=1)
    assert np.array_equal(td.asarray([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]]))
    assert isinstance(td.eye(3), np.ndarray) and isinstance(td.arange(4), np.ndarray)


def test_asarray_promotes_as_jax():
    x32 = np.float32(1.5)
    got = td.jit(lambda x: td.asarray([x, 2.0, 3]))(np.array(x32))
    assert got.dtype == np.float32
    # arrays of different dtypes promote by jax's lattice: int32 with float32 is float32
    got = td.jit(lambda x, n: td.asarray([x, n]))(np.array(x32), np.array(2, np.int32))
    assert got.dtype == jnp.asarray([jnp.float32(1.5), jnp.int32(2)]).dtype == np.float32
    got = td.jit(lambda x: td.asarray([x, 1j]))(1.0)
    assert got.dtype == np.complex128 and got[1] == 1j
    got = td.jit(lambda x: td.array([x, x], dtype="float32", ndmin=3))(2.0)
    assert got.shape == (1, 1, 2) and got.dtype == np.float32


def test_asarray_under_grad():
    g = td.grad(lambda x, y: td.sum(td.asarray([[x, 2 * y], [x * y, 1.0]]) ** 2),
                argnums=(0, 1))(1.5, -0.5)
    want = jax.grad(lambda x, y: jnp.sum(jnp.asarray([[x, 2 * y], [x * y, 1.0]]) ** 2),
                    argnums=(0, 1))(1.5, -0.5)
    _close(g, want)


# ---- linear_transpose ----

def test_linear_transpose_matches_jax():
    A = r(3, 4)
    f = lambda x, y: (A @ x + 2.0 * y[::-1], td.sum(x) if False else x[1:3])
    fj = lambda x, y: (jnp.asarray(A) @ x + 2.0 * y[::-1], x[1:3])
    x, y = r(4), r(3)
    ct = (r(3), r(2))
    got = td.linear_transpose(f, x, y)(ct)
    want = jax.linear_transpose(fj, x, y)(ct)
    _close(got, want)


def test_linear_transpose_complex_is_jaxs_transpose():
    a = r(3, dtype="complex128")
    z = r(3, dtype="complex128")
    got = td.linear_transpose(lambda z: a * z + td.conj(a) * z[::-1], z)(z)
    want = jax.linear_transpose(lambda z: a * z + jnp.conj(a) * z[::-1], z)(z)
    _close(got, want)


def test_linear_transpose_of_a_pytree():
    f = lambda d: {"s": td.sum(d["a"], axis=0), "t": td.tile(d["b"], 2)}
    fj = lambda d: {"s": jnp.sum(d["a"], axis=0), "t": jnp.tile(d["b"], 2)}
    p = {"a": r(2, 3), "b": r(2)}
    ct = {"s": r(3), "t": r(4)}
    (got,) = td.linear_transpose(f, p)(ct)
    (want,) = jax.linear_transpose(fj, p)(ct)
    _close([got["a"], got["b"]], [want["a"], want["b"]])


@pytest.mark.parametrize("fn,msg", [
    (lambda x: x * x, "Mul multiplies"),
    (lambda x: td.sin(x), "applies Sin"),
    (lambda x: x + 1.0, "affine"),
    (lambda x: x / x[0], "divides"),
    (lambda x: td.pad(x, 1, constant_values=2.0), "affine"),
])
def test_linear_transpose_refuses_nonlinear_functions(fn, msg):
    with pytest.raises(TypeError, match=msg):
        td.linear_transpose(fn, r(3))


def test_linear_transpose_accepts_zero_constants():
    f = td.linear_transpose(lambda x: td.pad(x, 1) + 0.0, r(3))
    np.testing.assert_allclose(f(np.arange(5.0))[0], [1.0, 2.0, 3.0])


def test_linear_transpose_refuses_integer_primals():
    with pytest.raises(TypeError, match="int64"):
        td.linear_transpose(lambda x: x, np.arange(3))


# ---- bad arguments ----

def _traced(fn, *args):
    return td.jit(fn)(*args)


@pytest.mark.parametrize("fn,exc,msg", [
    (lambda x: td.stack([x, x[:1]]), ValueError, "stack: all input arrays must have the same"),
    (lambda x: td.stack([x], axis=3), ValueError, "stack: axis 3 is out of bounds"),
    (lambda x: td.stack([]), ValueError, "need at least one array"),
    (lambda x: td.split(x, 4), ValueError, "equal division"),
    (lambda x: td.split(x, 0), ValueError, "larger than 0"),
    (lambda x: td.split(x, x), TypeError, "static"),
    (lambda x: td.squeeze(x, 0), ValueError, "size not equal to one"),
    (lambda x: td.expand_dims(x, 3), ValueError, "out of bounds"),
    (lambda x: td.moveaxis(td.stack([x, x]), (0, 1), 0), ValueError, "same number of elements"),
    (lambda x: td.flip(x, (0, 0)), ValueError, "repeated axis"),
    (lambda x: td.roll(x, x[0]), TypeError, "roll: shift must be static"),
    (lambda x: td.roll(x, (1, 2), (0, 1, 0)), ValueError, "matching lengths"),
    (lambda x: td.tile(x, -1), ValueError, "negative repetitions"),
    (lambda x: td.repeat(x, [1, 2]), ValueError, "do not match axis 0"),
    (lambda x: td.repeat(x, 1.5), TypeError, "integers"),
    (lambda x: td.repeat(x, -1), ValueError, "negative repeats"),
    (lambda x: td.diagonal(x), ValueError, "at least two dimensions"),
    (lambda x: td.diagonal(td.stack([x, x]), 0, 1, 1), ValueError, "cannot be the same"),
    (lambda x: td.diag(td.stack([td.stack([x])])), ValueError, "1-D or 2-D"),
    (lambda x: td.diff(x, -1), ValueError, "non-negative"),
    (lambda x: td.tril(x), ValueError, "tril: argument must be at least 2-D"),
    (lambda x: td.pad(x, ((1, 2), (3, 4))), ValueError, "does not fit"),
    (lambda x: td.pad(x, -1), ValueError, "negative pad_width"),
    (lambda x: td.pad(x, 1, mode="median"), NotImplementedError, "median"),
    (lambda x: td.pad(x, 1, mode="reflect", reflect_type="odd"), NotImplementedError, "even"),
    (lambda x: td.pad(x, 1, mode="edge", constant_values=1), TypeError, "unexpected keyword"),
    (lambda x: td.pad(x[:0], 1, mode="wrap"), ValueError, "empty axis"),
    (lambda x: td.select([x > 0], [x, x]), ValueError, "same length"),
    (lambda x: td.select([x], [x]), TypeError, "must be bool"),
    (lambda x: td.asarray([x, x[:2]]), ValueError, "inhomogeneous"),
    (lambda x: td.arange(x[0]), TypeError, "static"),
    (lambda x: td.zeros(x), TypeError, "static"),
    (lambda x: td.meshgrid(x, indexing="ji"), ValueError, "indexing"),
    (lambda x: td.var(x, ddof=1, correction=1), ValueError, "both"),
])
def test_bad_arguments_raise_clear_errors(fn, exc, msg):
    with pytest.raises(exc, match=msg):
        _traced(fn, r(3))


def test_rev_program_file_validation():
    """A program file whose Rev names a bad axis is refused by the C++ validator."""
    from tidu import _eval

    x = np.zeros((2, 3))
    i64, u8, u32 = np.int64, np.uint8, np.uint32
    for dims, ok in [([1], True), ([0, 1], True), ([2], False), ([-1], False), ([0, 0], False)]:
        args = dict(
            dtypes=np.array([1, 1], u8), ndims=np.array([2, 2], u32),
            shapes=np.array([2, 3, 2, 3], i64), opcode=np.array([_eval.OPCODES.index("Rev")], u8),
            in_off=np.array([0, 1], u32), in_slots=np.array([0], u32), out_off=np.array([0, 1], u32),
            out_slots=np.array([1], u32),
            attr_off=np.array([0, 1 + len(dims)], u32), attrs=np.array([len(dims)] + dims, i64),
            consts=np.zeros(0, u8), inputs=np.array([0], u32), outputs=np.array([1], u32))
        if ok:
            prog = _eval.Program(*args.values())
            (out,) = prog.run([np.arange(6.0).reshape(2, 3)])
            np.testing.assert_array_equal(out, np.flip(np.arange(6.0).reshape(2, 3), dims))
        else:
            with pytest.raises(Exception, match="rev dim"):
                _eval.Program(*args.values())
    del x


# ---- the shape primitives of values.SHAPE_OPS, table-driven ----

from _support import values  # noqa: E402

SHAPE_CASES = [(op, shape, d) for op, shape, dts in values.SHAPE_OPS for d in dts]
_ids = [f"{op.name}{op.dims}-{shape}-{d}" for op, shape, d in SHAPE_CASES]


@pytest.mark.parametrize("op,shape,dtype", SHAPE_CASES, ids=_ids)
def test_shape_primitive_interpreter_and_xla(op, shape, dtype):
    """Interpreter against impl; XLA against the interpreter, one point and a batch."""
    x = values.value(rng, shape, dtype)
    g = values.one_op_graph(op, [td.aval(shape, dtype)])
    cpu, acc = td.compile(g, backend="cpu"), td.compile(g, backend="xla")
    assert cpu.executable.native is not None
    (got,) = cpu.eval([x])
    want = op.impl(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(acc.eval([x])[0], got)
    xb = np.stack([x, values.value(rng, shape, dtype), x])
    np.testing.assert_array_equal(acc.eval_batch([xb])[0], cpu.eval_batch([xb])[0])


@pytest.mark.parametrize("op,shape,dtype",
                         [c for c in SHAPE_CASES if np.dtype(c[2]).kind in "fc"],
                         ids=[i for i, c in zip(_ids, SHAPE_CASES) if np.dtype(c[2]).kind in "fc"])
def test_shape_primitive_derivatives(op, shape, dtype):
    single = dtype in ("float32", "complex64")
    x = values.value(rng, shape, dtype)
    check_grads(lambda x: td.apply(op, x) * x, [x], order=2,
                atol=5e-2 if single else None, rtol=5e-2 if single else None,
                eps=1e-2 if single else None)


def test_negative_step_slicing_through_the_pipeline_to_third_order():
    """x[::-1] (Rev) differentiated three times: forward over reverse over forward."""
    f = lambda x: td.sum(td.sin(x[::-1] * x[::-2][:1]) * x)
    fj = lambda x: jnp.sum(jnp.sin(x[::-1] * x[::-2][:1]) * x)
    x = r(4)
    t = r(4)
    got = td.jvp(td.hessian(f), (x,), (t,))[1]
    want = jax.jvp(jax.hessian(fj), (x,), (t,))[1]
    _close(got, want, 1e-9)


def test_index_plan_memo_covers_negative_steps():
    from tidu.numpy import indexing as tracing

    f = td.jit(lambda x: x[::-1] + x[::-1])
    f(r(5))
    assert any(k[1] == ((slice, None, None, -1),) for k in tracing._index_plans)


def test_static_shape_queries_on_traced_values():
    def f(x):
        assert (td.ndim(x), td.shape(x), td.size(x), td.size(x, -1)) == (2, (2, 3), 6, 3)
        assert (np.ndim(x), np.shape(x), np.size(x)) == (2, (2, 3), 6)  # numpy dispatch
        return x * td.size(x, 0)

    np.testing.assert_allclose(td.jit(f)(np.ones((2, 3))), 2.0 * np.ones((2, 3)))
    assert (td.ndim([[1.0, 2.0]]), td.shape(3.0), td.size(np.zeros((4, 5)))) == (2, (), 20)
    with pytest.raises(ValueError, match="size: axis 2 is out of bounds"):
        td.size(np.zeros((4, 5)), 2)
