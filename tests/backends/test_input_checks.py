"""What a program does with the inputs it is handed: CompiledProgram and LoadedProgram (a saved
file) check them on one path (tidu.backends.inputs), for eval and eval_batch alike, naming the
input by position and name; an empty batch gives (0, ...)-shaped outputs."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td


def _compiled(backend="cpu"):
    F = td.build(lambda x, n, z: (x * 2.0, n + 1, z * z),
                 x=td.spec((), "float64"), n=td.spec((), "int32"), z=td.spec((), "float64"))
    return td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend=backend)


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    prog = _compiled()
    path = tmp_path_factory.mktemp("inputs") / "p.tidu"
    prog.save(str(path))
    return {"compiled": prog, "loaded": td.load(str(path))}


KINDS = ("compiled", "loaded")


# ---- no silent casts (eval) ----

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [np.int64(2**40 + 3), 2**40 + 3, np.int64(-2**31 - 1),
                               np.uint64(2**63), np.array([2**40])[0]])
def test_integer_out_of_range_refused(programs, kind, n):
    """Was: np.int64(2**40+3) into an int32 input became 3 (both kinds of program)."""
    with pytest.raises(OverflowError, match=rf"input 1 \('n'\): the value {int(n)} is out of "
                                            r"range of int32"):
        programs[kind].eval([1.0, n, 1.0])


@pytest.mark.parametrize("kind", KINDS)
def test_float_into_int_refused(programs, kind):
    """Was: 2.9 into LoadedProgram's int32 input became 2."""
    with pytest.raises(TypeError, match=r"input 1 \('n'\): expected dtype int32, got float64"):
        programs[kind].eval([1.0, 2.9, 1.0])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("z", [2 + 5j, np.complex64(1 + 1j), np.array(3 + 0j)])
def test_complex_into_float_refused(programs, kind, z):
    """Was: 2+5j into LoadedProgram's float64 input lost its imaginary part."""
    with pytest.raises(TypeError, match=r"input 2 \('z'\): expected dtype float64, got complex"):
        programs[kind].eval([1.0, 2, z])


@pytest.mark.parametrize("kind", KINDS)
def test_values_that_fit_are_converted(programs, kind):
    got = programs[kind].eval([np.float32(1.5), np.int64(2**31 - 2), True])
    assert got[0].dtype == np.float64 and float(got[0]) == 3.0
    assert got[1].dtype == np.int32 and int(got[1]) == 2**31 - 1
    assert float(got[2]) == 1.0
    got = programs[kind].eval([1, np.uint32(7), np.int32(-3)])
    assert int(got[1]) == 8 and float(got[2]) == 9.0


@pytest.mark.parametrize("kind", KINDS)
def test_unconvertible_objects_named(programs, kind):
    with pytest.raises(OverflowError, match=r"input 1 \('n'\): the Python int " + str(2**70)):
        programs[kind].eval([1.0, 2**70, 1.0])
    with pytest.raises(TypeError, match=r"input 0 \('x'\): expected a number"):
        programs[kind].eval([None, 1, 1.0])


# ---- eval_batch ----

@pytest.mark.parametrize("kind", KINDS)
def test_batch_errors_name_the_input_and_what_is_wrong(programs, kind):
    """Was: eval_batch([np.ones(3), np.int32(2)]) said "expected shape (3,), got (3,)"."""
    prog = programs[kind]
    with pytest.raises(ValueError, match=r"input 1 \('n'\): expected shape \(3,\), got \(\) "
                                         r"\(a scalar\) \(the leading batch axis is missing\)"):
        prog.eval_batch([np.ones(3), np.int32(2), np.ones(3)])
    with pytest.raises(ValueError, match=r"input 2 \('z'\): expected shape \(3,\), got \(4,\) "
                                         r"\(a batch of 4, not 3"):
        prog.eval_batch([np.ones(3), np.ones(3, np.int32), np.ones(4)])
    with pytest.raises(ValueError, match=r"input 0 \('x'\): expected shape \(batch,\), got "
                                         r"\(3, 1\)"):
        prog.eval_batch([np.ones((3, 1)), np.ones(3, np.int32), np.ones(3)])
    with pytest.raises(OverflowError, match=r"input 1 \('n'\): the value 4294967296"):
        prog.eval_batch([np.ones(2), np.array([1, 2**32]), np.ones(2)])


@pytest.mark.parametrize("kind", KINDS)
def test_empty_batch_gives_empty_outputs(programs, kind):
    """Was: eval_batch of 0 points gave outputs without the batch axis, uninitialised."""
    out = programs[kind].eval_batch([np.zeros(0), np.zeros(0, np.int32), np.zeros(0)])
    assert [o.shape for o in out] == [(0,), (0,), (0,)]
    assert [o.dtype for o in out] == [np.float64, np.int32, np.float64]


@pytest.mark.parametrize("backend", ["cpu", "xla"])
def test_empty_batch_of_array_program(backend):
    """The issue's reproducer: prog.eval_batch([np.zeros((0, 3))]) gave shape (3,)."""
    if backend == "xla":
        pytest.importorskip("jax")
    F = td.build(lambda x: (x * 2.0, td.sum(x)), x=td.spec((3,), "float64"))
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend=backend)
    out = prog.eval_batch([np.zeros((0, 3))])
    assert [o.shape for o in out] == [(0, 3), (0,)]
    full = prog.eval_batch([np.arange(6.0).reshape(2, 3)])
    np.testing.assert_array_equal(full[1], [3.0, 12.0])


def test_program_without_inputs_batches_to_nothing(tmp_path):
    """A program with no inputs has no batch axis to read: eval_batch([]) is a batch of 0."""
    F = td.build(lambda: td.ones((2,)) * 2.0)
    prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    np.testing.assert_array_equal(prog.eval([])[0], [2.0, 2.0])
    assert [o.shape for o in prog.eval_batch([])] == [(0, 2)]
    prog.save(str(tmp_path / "c.tidu"))
    assert [o.shape for o in td.load(str(tmp_path / "c.tidu")).eval_batch([])] == [(0, 2)]


# ---- jit arguments ----

@pytest.mark.parametrize("v", [2**70, 2**63, -2**63 - 1])
def test_jit_python_int_out_of_int64_is_overflow_error(v):
    """Was: td.jit(f)(2**70) said "unsupported dtype object"; jax (x64) raises OverflowError."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    with pytest.raises(OverflowError):
        jax.jit(lambda x: x + 1)(v)
    with pytest.raises(OverflowError, match=str(v)):
        td.jit(lambda x: x + 1)(v)
    assert int(td.jit(lambda x: x + 1)(2**63 - 2)) == 2**63 - 1
