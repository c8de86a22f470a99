"""The interpreter's rewrite of per-example outer products reduced over the batch
(tidu.ops.rewrites, issue #30): the same values as the unrewritten program and as jax (x64), the
8 MB outer product gone from the interpreter's program, and XLA's program unchanged."""
from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from _support.workloads import dpsgd_step
from tidu.backends import interpreter
from tidu.ops.rewrites import batched_outer_sums

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)


def _plain(exe):
    """exe's interpreter program encoded with no rewrite."""
    saved = list(interpreter._REWRITES)
    interpreter._REWRITES.clear()
    try:
        return interpreter.encode(exe.arrays)
    finally:
        interpreter._REWRITES.extend(saved)


def _check(f, *args, rtol=1e-12, atol=0.0, outer=None, rewritten=True):
    """f's interpreter results against jax.jit's and the unrewritten program's; whether an
    instruction of shape `outer` is left in the interpreter's program."""
    lowered = td.jit(f(td), backend="cpu").lower(*args)
    exe = lowered.program.executable
    got = td.jit(f(td), backend="cpu")(*args)
    want = jax.jit(f(jnp))(*args)
    got, want = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, np.asarray(w), rtol=rtol, atol=atol)
    flat = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
    plain = _plain(exe).run([flat[k[1]] for k in lowered.program.inputs], None)
    for g, p in zip(got, plain, strict=True):
        np.testing.assert_allclose(g, p, rtol=rtol, atol=atol)
    native = exe.native
    assert (batched_outer_sums(exe.arrays) is not None) == rewritten
    if outer is not None:
        td._native._eval.set_profiling(True)
        lowered(*args)
        td._native._eval.set_profiling(False)
        shapes = {tuple(r[1]) for r in native.profile()}
        assert (tuple(outer) in shapes) != rewritten, shapes


def _dpsgd(dtype, B=64, d_in=16, h=32):
    rng = np.random.default_rng(3)
    p = [rng.standard_normal((d_in, h)).astype(dtype) * 0.3, np.zeros(h, dtype),
         rng.standard_normal((h, 10)).astype(dtype) * 0.3, np.zeros(10, dtype)]
    x = rng.standard_normal((B, d_in)).astype(dtype)
    y = np.eye(10, dtype=dtype)[rng.integers(0, 10, B)]

    def make(m):
        return dpsgd_step(m, *((td.vmap, td.grad) if m is td else (jax.vmap, jax.grad)))
    return make, (p, x, y)


def test_dpsgd_float64_matches_jax_and_drops_the_outer_products():
    make, args = _dpsgd(np.float64)
    _check(make, *args, rtol=1e-11, atol=1e-15, outer=(64, 16, 32))


def test_dpsgd_float32_matches_jax():
    make, args = _dpsgd(np.float32, B=256, d_in=64, h=128)
    _check(make, *args, rtol=2e-5, atol=1e-7, outer=(256, 64, 128))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_weighted_plain_and_scalar_weighted_sums(dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((9, 5)) + (1j * rng.standard_normal((9, 5)) if dtype == np.complex128
                                       else 0)).astype(dtype)
    g = rng.standard_normal((9, 7)).astype(dtype)
    s = rng.uniform(0.1, 2.0, 9).astype(dtype)

    def make(m):
        def f(x, g, s):
            o = m.einsum("bm,bn->bmn", x, g)
            return (m.sum(o * s[:, None, None], axis=0), m.sum(o, axis=0), m.sum(o * 3.0, axis=0),
                    m.sum(o * o, axis=(1, 2)), m.sum(o.reshape(9, -1) ** 2, axis=1))
        return f
    _check(make, x, g, s, rtol=1e-12, atol=1e-14, outer=(9, 5, 7))


def test_outer_product_also_an_output_is_kept():
    rng = np.random.default_rng(1)
    x, g = rng.standard_normal((6, 4)), rng.standard_normal((6, 3))

    def make(m):
        def f(x, g):
            o = m.einsum("bm,bn->bmn", x, g)
            return o, m.sum(o, axis=0)
        return f
    _check(make, x, g)  # the sum is rewritten, the product stays for the output


def test_weights_along_another_axis_are_not_folded():
    rng = np.random.default_rng(2)
    x, g, s = rng.standard_normal((6, 4)), rng.standard_normal((6, 3)), rng.standard_normal(4)

    def make(m):
        def f(x, g, s):
            o = m.einsum("bm,bn->bmn", x, g)
            return m.sum(o * s[None, :, None], axis=0), m.sum(o * o, axis=1)
        return f
    _check(make, x, g, s, outer=(6, 4, 3), rewritten=False)


def test_xla_gets_the_program_as_compiled():
    make, args = _dpsgd(np.float32)
    lowered = td.jit(make(td), backend="cpu").lower(*args)
    with_rewrite = lowered.as_stablehlo()
    saved = list(interpreter._REWRITES)
    interpreter._REWRITES.clear()
    try:
        without = td.jit(make(td), backend="cpu").lower(*args).as_stablehlo()
    finally:
        interpreter._REWRITES.extend(saved)
    assert with_rewrite == without
    assert "stablehlo.transpose" in with_rewrite  # the batched outer products, as jax writes them


def test_operands_made_by_broadcasts_stay():
    """x and the weights' source are broadcasts read only by the replaced instructions: the new
    product still reads them."""
    rng = np.random.default_rng(4)
    xv, g, c = rng.standard_normal(4), rng.standard_normal((6, 3)), 0.7

    def make(m):
        def f(xv, g, c):
            x = m.broadcast_to(xv[None, :], (6, 4))
            s = m.broadcast_to(c, (6,))
            o = m.einsum("bm,bn->bmn", x, g)
            return m.sum(o * s[:, None, None], axis=0), m.sum(o.reshape(6, -1) ** 2, axis=1)
        return f
    _check(make, xv, g, c, outer=(6, 4, 3))


# ---- division by a power of two (exact_reciprocals) ----

@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("c,rewritten", [(4.0, True), (-0.5, True), (2.0 ** -20, True), (3.0, False),
                                         (1.0, True), (0.1, False)])
def test_division_by_a_power_of_two_is_a_multiply_with_the_same_bits(dtype, c, rewritten):
    """x / c for a constant power of two c (scalar, broadcast over a chain, or as a full array)
    runs as x * (1 / c): the same bits as numpy's division for every x (subnormal results,
    infinities, NaN, -0.0); other constants stay divisions."""
    from tidu.ops.rewrites import exact_reciprocals

    info = np.finfo(dtype)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(3 * 4096 + 5).astype(dtype)
    x[:6] = [info.tiny, info.tiny * 3, -info.max, np.inf, np.nan, -0.0]
    x[6:12] = info.smallest_subnormal * np.arange(1, 7)
    cd = np.asarray(c, dtype)
    if c == 2.0 ** -20 and dtype == "float16":  # below float16's normal range: not rewritten
        rewritten = False
    full = np.full(x.shape, cd)
    cases = [(lambda v: v / cd, lambda v: v / cd),
             (lambda v: (v + 1) / cd * v, lambda v: (v + dtype_one(dtype)) / cd * v),
             (lambda v: v / td.asarray(full), lambda v: v / full)]
    for f, ref in cases:
        lowered = td.jit(f, backend="cpu").lower(x)
        got = np.asarray(lowered(x))
        with np.errstate(all="ignore"):
            want = np.asarray(ref(x))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
        assert (exact_reciprocals(lowered.program.executable.arrays) is not None) == rewritten


def dtype_one(dtype):
    return np.asarray(1, dtype)
