"""DotGeneral over operands whose batch axes are not leading and whose contracting axes lie
anywhere (issue #30: attention's "qhd,khd->hqk"): the interpreter reads them in place through the
BLAS's leading dimensions (no transpose instruction, no copy) where each operand is a matrix per
batch, its own loops otherwise; values against numpy's einsum, gradients against jax (x64)."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td
from tidu import ops as P
from tidu._native import _eval

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

# (lhs shape, rhs shape, lc, rc, lb, rb): batch axes in the middle or last, contracting axes
# first, middle or last, several of each
CASES = [
    ((32, 4, 16), (40, 4, 16), (2,), (2,), (1,), (1,)),        # qhd,khd->hqk: batch in the middle
    ((4, 32, 40), (40, 4, 16), (2,), (0,), (0,), (1,)),        # hqk,khd->hqd
    ((16, 32, 4), (16, 40, 4), (0,), (0,), (2,), (2,)),        # batch last, contracting first
    ((32, 16, 4), (4, 16, 24), (1,), (1,), (2,), (0,)),        # contracting in the middle
    ((6, 3, 20, 5), (5, 20, 6, 7), (2,), (1,), (0, 3), (2, 0)),  # two batch axes, apart
    ((8, 5, 6, 3), (6, 3, 9, 5), (2, 3), (0, 1), (1,), (3,)),  # two contracting axes, batch between
    ((3, 30, 2, 20), (20, 2, 3), (3,), (0,), (0, 2), (2, 1)),  # batch axes first and third, reversed in the rhs
]


def _einsum_ref(x, y, lc, rc, lb, rb):
    """numpy's einsum of the same contraction, output (batch, lhs free, rhs free)."""
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    ls = [None] * x.ndim
    rs = [None] * y.ndim
    for a, b in zip(lb, rb):
        ls[a] = rs[b] = next(letters)
    for a, b in zip(lc, rc):
        ls[a] = rs[b] = next(letters)
    for k in range(x.ndim):
        ls[k] = ls[k] or next(letters)
    for k in range(y.ndim):
        rs[k] = rs[k] or next(letters)
    out = [ls[a] for a in lb] + [ls[k] for k in range(x.ndim) if k not in lc + lb] + \
          [rs[k] for k in range(y.ndim) if k not in rc + rb]
    return np.einsum(f"{''.join(ls)},{''.join(rs)}->{''.join(out)}", x.astype(np.complex128)
                     if x.dtype.kind == "c" else x.astype(np.float64),
                     y.astype(np.complex128) if y.dtype.kind == "c" else y.astype(np.float64))


def _value(shape, dtype, rng):
    v = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.standard_normal(shape)
    return v.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_strided_products_match_numpy_einsum_with_one_instruction(case, dtype):
    ls, rs, lc, rc, lb, rb = case
    rng = np.random.default_rng(len(ls) + len(rs))
    x, y = _value(ls, dtype, rng), _value(rs, dtype, rng)
    op = P.DotGeneral(lc, rc, lb, rb)
    f = td.jit(lambda a, b: td.lax.dot_general(a, b, ((lc, rc), (lb, rb))), backend="cpu")
    lowered = f.lower(x, y)
    _eval.set_profiling(True)
    got = np.asarray(lowered(x, y))
    _eval.set_profiling(False)
    ops = [r[0] for r in lowered.program.executable.native.profile()]
    assert ops == ["DotGeneral"], ops  # the operands read in place: no transpose, no copy
    want = _einsum_ref(x, y, lc, rc, lb, rb)
    tol = 2e-5 if dtype in ("float32", "complex64") else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
    assert got.shape == op.abstract_eval(td.aval(ls, dtype), td.aval(rs, dtype)).shape


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("spec", ["qhd,khd->hqk", "hqk,khd->qhd", "bih,bjh->hij", "ihb,hjb->bij",
                                  "xcy,cyz->xz", "aib,bja->iab"])
def test_gradients_of_strided_einsums_match_jax(spec, dtype):
    """The gradient's products (the transposed einsums) over the same layouts, against jax
    (complex inputs: tidu's gradient of a real loss is conj of jax's, as everywhere in tidu)."""
    ins, out = spec.split("->")
    a_idx, b_idx = ins.split(",")
    size = dict(zip("qkhdbijxcyza", (24, 20, 4, 8, 3, 10, 12, 6, 5, 7, 9, 11)))
    rng = np.random.default_rng(1)
    a = _value(tuple(size[c] for c in a_idx), dtype, rng)
    b = _value(tuple(size[c] for c in b_idx), dtype, rng)

    def loss(m):
        def f(a, b):
            y = m.einsum(spec, a, b)
            return m.sum(m.real(y * m.conj(y)))
        return f

    got = td.jit(td.value_and_grad(loss(td), argnums=(0, 1)), backend="cpu")(a, b)
    want = jax.jit(jax.value_and_grad(loss(jax.numpy), argnums=(0, 1)))(a, b)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-10)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, np.conj(np.asarray(w)), rtol=1e-10, atol=1e-10)
