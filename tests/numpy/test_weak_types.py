"""Weak types and jax's promotion lattice, against jax in x64: result dtypes over Python scalar
kinds x array dtypes x ops, with the scalar as a constant in the traced function and as a jit
argument; the full promotion table (jnp.promote_types); weak-ness through ops, loops (scan,
fori_loop, while_loop carries), grad, jvp and vmap; td.asarray and astype making values strong."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import tidu as td
from tidu.graph.dtypes import lattice_result_type, promote_types

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

ALL = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
       "float32", "float64", "complex64", "complex128")
SCALARS = {"bool": True, "int": 3, "float": 0.5, "complex": 1.5 - 0.5j}
OPS = {
    "add": operator.add,
    "mul": operator.mul,
    "sub": operator.sub,
    "radd": lambda x, s: s + x,
    "rmul": lambda x, s: s * x,
    "maximum": None,  # module function: filled per library below
    "where": None,
}


def _fn(lib, name):
    if name == "maximum":
        return lambda x, s: lib.maximum(x, s)
    if name == "where":
        return lambda x, s: lib.where(x == x, x, s)
    return OPS[name]


def _jax_dtype(fn, *args):
    """The dtype of jax.jit(fn)(*args), from its trace (jax.eval_shape): the same dtype and the
    same errors, without an XLA compile per case (345 of them were 19 of the file's 23 s)."""
    try:
        return np.dtype(jax.eval_shape(fn, *args).dtype)
    except (TypeError, OverflowError, ValueError):
        return None


def _cases():
    for op in OPS:
        for kind in SCALARS:
            for dt in ALL:
                if op == "maximum" and "complex" in dt + kind:
                    continue  # complex maximum: not ordered in tidu
                yield op, kind, dt


def test_promotion_table_is_jnp_promote_types():
    """All 169 pairs of tidu's dtypes: what x + y builds, jnp.promote_types in x64 exactly."""
    mismatches = []
    for a in ALL:
        for b in ALL:
            want = np.dtype(jnp.promote_types(a, b))
            assert promote_types(a, b) == want, (a, b)
            F = td.build(lambda x, y: x + y, x=td.spec((2,), a), y=td.spec((2,), b))
            if F.outputs[0].dtype != want:
                mismatches.append((a, b, str(F.outputs[0].dtype), str(want)))
    assert not mismatches, mismatches
    # the pairs where numpy's rule differs (integers with float32/complex64 among them) exist
    assert np.result_type("int32", "float32") != jnp.promote_types("int32", "float32")


def test_lattice_result_type_with_weak_operands():
    """(dtype, weak) of every pair with each side weak or strong, as jax's lattice_result_type."""
    from jax._src import dtypes as jd
    from jax._src.lax import lax as jlax

    bad = []
    for a in ALL:
        for b in ALL:
            for wa in (False, True):
                for wb in (False, True):
                    if (wa and a == "bool") or (wb and b == "bool"):
                        continue
                    xa = jlax._convert_element_type(jnp.ones(2, a), None, wa)
                    xb = jlax._convert_element_type(jnp.ones(2, b), None, wb)
                    dt, weak = jd.lattice_result_type(xa, xb)
                    want = (np.dtype(jd.canonicalize_dtype(dt)), weak)
                    got = lattice_result_type((np.dtype(a), wa), (np.dtype(b), wb))
                    if got != want:
                        bad.append((a, wa, b, wb, got, want))
    assert not bad, bad


@pytest.mark.parametrize("how", ["constant", "argument"])
def test_scalar_with_array_dtypes_match_jax(how):
    """Python scalar kinds x array dtypes x ops: the result dtype is jax's (x64), whether the
    scalar is a constant inside the function or a jit argument (weakly typed either way)."""
    bad, checked = [], 0
    for op, kind, dt in _cases():
        s = SCALARS[kind]
        x = np.ones(3, dt)
        if op == "sub" and (dt == "bool" or kind == "bool"):
            continue
        if how == "constant":
            want = _jax_dtype(lambda x, f=_fn(jnp, op): f(x, s), x)
            run = lambda x, f=_fn(td, op): f(x, s)  # noqa: E731
            args = (x,)
        else:
            want = _jax_dtype(_fn(jnp, op), x, s)
            run = _fn(td, op)
            args = (x, s)
        if want is None:
            continue
        try:
            got = np.asarray(td.jit(run)(*args)).dtype
        except (TypeError, OverflowError) as e:
            got = f"raises {e}"
        checked += 1
        if got != want:
            bad.append((op, kind, dt, str(got), str(want)))
    assert not bad, bad
    assert checked > 300


@pytest.mark.parametrize("kind", ["int", "float", "complex"])
@pytest.mark.parametrize("dt", ["uint8", "int32", "float32", "complex64", "float64"])
def test_weak_argument_values_match_jax(kind, dt):
    s = SCALARS[kind]
    x = (np.arange(1, 4) * 3 % 7).astype(dt)
    got = td.jit(lambda x, s: x * s + s)(x, s)
    want = jax.jit(lambda x, s: x * s + s)(x, s)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-6)


def test_issue_examples():
    f32 = np.ones(3, np.float32)
    assert td.jit(lambda x, lr: x * lr)(f32, 0.9).dtype == np.float32
    got = td.jit(lambda c0, lr: td.scan(lambda c, _: (c * lr, None), c0, None, length=3)[0])(
        f32, 0.9)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.full(3, 0.9 ** 3, np.float32), rtol=1e-6)
    # an int32 scalar (numpy) is strong: int32 with float32 is float32 on jax's lattice
    assert td.jit(lambda x, i: x * i)(f32, np.int32(3)).dtype == \
        jax.jit(lambda x, i: x * i)(f32, np.int32(3)).dtype == np.float32
    assert td.jit(lambda x, i: x * i)(f32, 3).dtype == np.float32


def test_weak_chain_stays_weak():
    """Ops between weak values stay weak: (a * b + 1) with Python float arguments still lets a
    float32 array decide; a numpy float64 scalar is strong and makes the result float64."""
    f32 = np.ones(2, np.float32)

    def f(x, a, b):
        w = -(a * b + 1.0) / 2.0
        return x + td.exp(w) + w ** 2

    jf = lambda x, a, b: x + jnp.exp(-(a * b + 1.0) / 2.0) + (-(a * b + 1.0) / 2.0) ** 2  # noqa
    for a, b in [(0.5, 2.0), (0.5, np.float64(2.0)), (1, 2.0), (np.float32(1), 2)]:
        got, want = td.jit(f)(f32, a, b), jax.jit(jf)(f32, a, b)
        assert got.dtype == want.dtype, (a, b)
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-6)


def test_jit_cache_key_per_weakness():
    f = td.jit(lambda x, s: x * s)
    f32 = np.ones(2, np.float32)
    assert f(f32, 2.0).dtype == np.float32
    assert f(f32, np.float64(2.0)).dtype == np.float64  # strong: a program of its own
    assert f(f32, 2.0).dtype == np.float32
    assert f(f32, np.array(2.0)).dtype == np.float64


def test_asarray_and_astype_are_strong():
    f32 = np.ones(2, np.float32)
    assert td.jit(lambda x: x * td.asarray(0.5))(f32).dtype == np.float64
    assert td.jit(lambda x, s: x * td.asarray(s))(f32, 0.5).dtype == \
        jax.jit(lambda x, s: x * jnp.asarray(s))(f32, 0.5).dtype == np.float32
    assert td.jit(lambda x, s: x * s.astype(np.float64))(f32, 0.5).dtype == \
        jax.jit(lambda x, s: x * s.astype(jnp.float64))(f32, 0.5).dtype == np.float64


def test_indexing_and_reshape_keep_weakness():
    f32 = np.ones((2, 2), np.float32)
    assert td.jit(lambda x, s: x * td.reshape(s * 1.0, (1,))[0])(f32, 0.5).dtype == np.float32
    assert td.jit(lambda x, s: x * td.where(x > 0, s, 2.0))(f32, 0.5).dtype == np.float32


@pytest.mark.parametrize("init", [0.0, 1, 2.0])
def test_scan_weak_carry_promotes_to_body_dtype(init):
    xs = np.arange(1, 4, dtype=np.float32)
    f = lambda lib: lambda c0, xs: lib.lax.scan(lambda c, x: (c + x, c * x), c0, xs) \
        if lib is jax else td.scan(lambda c, x: (c + x, c * x), c0, xs)  # noqa: E731
    (gc, gy), (wc, wy) = td.jit(f(td))(init, xs), jax.jit(f(jax))(init, xs)
    assert gc.dtype == wc.dtype == np.float32 and gy.dtype == wy.dtype
    np.testing.assert_allclose(gc, wc, rtol=1e-6)
    np.testing.assert_allclose(gy, wy, rtol=1e-6)
    # called outside jit too
    gc2, _ = td.scan(lambda c, x: (c + x, c * x), init, xs)
    assert np.asarray(gc2).dtype == np.float32


def test_fori_and_while_weak_carry():
    x = np.float32(1.5)
    got = td.fori_loop(0, 3, lambda i, c: c + x, 0.0)
    want = jax.lax.fori_loop(0, 3, lambda i, c: c + x, 0.0)
    assert np.asarray(got).dtype == want.dtype == np.float32
    got = td.jit(lambda x: td.while_loop(lambda c: c < 4.0, lambda c: c * x, 1.0))(x)
    want = jax.jit(lambda x: jax.lax.while_loop(lambda c: c < 4.0, lambda c: c * x, 1.0))(x)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, want)
    with pytest.raises(TypeError, match="carry"):  # a strong carry still must keep its dtype
        td.jit(lambda x: td.while_loop(lambda c: c < 4.0, lambda c: c * np.float64(2.0),
                                       x))(x)


def test_grad_of_python_scalar_argument():
    f32 = np.float32(3.0)
    cases = [(lambda a, x: a * x, lambda a, x: a * x),
             (lambda a, x: td.sin(a) * x ** 2, lambda a, x: jnp.sin(a) * x ** 2)]
    for f, jf in cases:
        for argnums in (0, 1):
            got = td.grad(f, argnums=argnums)(0.5, f32)
            want = jax.grad(jf, argnums=argnums)(0.5, f32)
            assert np.asarray(got).dtype == want.dtype, argnums
            np.testing.assert_allclose(got, want, rtol=1e-6)
            got = td.jit(td.grad(f, argnums=argnums))(0.5, f32)
            assert np.asarray(got).dtype == want.dtype, argnums
    # a function of a weak argument alone: float64 (the weak type's concrete dtype)
    v, g = td.value_and_grad(lambda a: a * a)(0.5)
    wv, wg = jax.value_and_grad(lambda a: a * a)(0.5)
    assert np.asarray(v).dtype == wv.dtype and np.asarray(g).dtype == wg.dtype
    np.testing.assert_allclose(g, wg)


def test_jvp_and_vmap_weak_scalars():
    f32 = np.arange(3, dtype=np.float32)
    p, t = td.jvp(lambda x, s: x * s, (f32, 0.5), (f32, 1.0))
    jp, jt = jax.jvp(lambda x, s: x * s, (f32, 0.5), (f32, 1.0))
    assert p.dtype == jp.dtype and t.dtype == jt.dtype
    got = td.vmap(lambda x, s: x * s, in_axes=(0, None))(f32, 0.5)
    want = jax.vmap(lambda x, s: x * s, in_axes=(0, None))(f32, 0.5)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, want)


def test_weak_dtype_seen_from_outside_is_concrete():
    out = td.jit(lambda s: s * 2)(3)
    assert np.asarray(out).dtype == np.int64
    out = td.jit(lambda s: s * 2.0)(3)
    assert np.asarray(out).dtype == np.float64
