"""Bad buffers, failed evaluations and hostile programs never touch memory tidu does not own:
each gets an exception naming the problem, or the right value.  (Forged program files are
tests/backends/test_forged_files.py's; these are the Python-side classes and the numeric edges.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from _support import forge
import tidu as td
from tidu import _eval


def _program(fn, *specs):
    F = td.build(fn, **{f"x{i}": s for i, s in enumerate(specs)})
    return td.compile(td.materialize_merge(td.resolve([F]), F.outputs))


def _raw(slot_dtype, slot_ndim, shapes, code, inputs, outputs, attrs=(), attr_off=None):
    """An _eval.Program from plain arrays: code is [(opcode name, operand slots, output slot)]."""
    in_off, in_slots = [0], []
    for _, ins, _ in code:
        in_slots += ins
        in_off.append(len(in_slots))
    u8, u32, i64 = np.uint8, np.uint32, np.int64
    return _eval.Program(
        np.array([_eval.DTYPES.index(d) for d in slot_dtype], u8), np.array(slot_ndim, u32),
        np.array(shapes, i64), np.array([_eval.OPCODES.index(op) for op, _, _ in code], u8),
        np.array(in_off, u32), np.array(in_slots, u32), np.arange(len(code) + 1, dtype=u32),
        np.array([o for _, _, o in code], u32),
        np.array(attr_off if attr_off is not None else [0] * (len(code) + 1), u32),
        np.array(attrs, i64), np.array([], u8), np.array(inputs, u32), np.array(outputs, u32))


# ---- out= and inputs: type, dtype, shape, byte order ----

@pytest.mark.parametrize("bad, err, msg", [
    ([b"abc"], TypeError, r"out\[0\]: expected a numpy array, got bytes"),
    ([np.zeros(6, np.float32)], TypeError, r"out\[0\]: expected dtype float64 .* got float32"),
    ([np.zeros(3, ">f8")], TypeError, r"out\[0\]: expected dtype float64 in native byte order"),
    ([np.zeros(4)], ValueError, r"out\[0\]: expected shape \(3,\), got \(4,\)"),
    ([np.zeros((3, 1))], ValueError, r"out\[0\]: expected shape \(3,\), got \(3, 1\)"),
    ([np.zeros(6)[::2]], ValueError, r"out\[0\]: not C-contiguous"),
    ([], ValueError, r"out: expected 1 arrays, got 0"),
    (b"abc", TypeError, r"out: expected a list of numpy arrays"),
])
def test_out_items_are_checked_for_type_dtype_shape_and_layout(bad, err, msg):
    prog = _program(lambda x0: x0 * 2.0, td.spec((3,)))
    with pytest.raises(err, match=msg):
        prog.eval([np.arange(3.0)], out=bad)
    ro = np.zeros(3)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"out\[0\]: not writable"):
        prog.eval([np.arange(3.0)], out=[ro])
    good = np.zeros(3)
    assert prog.eval([np.arange(3.0)], out=[good])[0] is good
    np.testing.assert_array_equal(good, [0.0, 2.0, 4.0])


def test_big_endian_inputs_are_converted_not_reinterpreted():
    x = np.array([1.5, -2.0, 3.25])
    prog = _program(lambda x0: x0 * 2.0, td.spec((3,)))
    np.testing.assert_array_equal(prog.eval([x.astype(">f8")])[0], x * 2)
    np.testing.assert_array_equal(td.jit(lambda v: v * 2.0)(x.astype(">f8")), x * 2)
    batch = np.stack([x, -x]).astype(">f8")
    np.testing.assert_array_equal(prog.eval_batch([batch])[0], batch.astype("<f8") * 2)
    with pytest.raises(TypeError, match="native byte order"):
        prog.runner()([x.astype(">f8")])  # the raw entry point refuses; eval converts


def test_longlong_and_intc_arrays_are_accepted_as_int64_and_int32():
    for dt, spec in [(np.longlong, "int64"), (np.intc, "int32")]:
        prog = _program(lambda x0: x0 * 2, td.spec((3,), spec))
        a = np.arange(3, dtype=dt)
        assert prog.runner()([a])[0].tolist() == [0, 2, 4]
        np.testing.assert_array_equal(td.jit(lambda v: v * 2)(a), [0, 2, 4])


def test_batched_inputs_are_checked_like_single_ones():
    prog = _program(lambda x0: x0 + 1.0, td.spec((3,)))
    native = prog.executable.native
    with pytest.raises(ValueError, match="expected 1 inputs, got 0"):
        native.run_batch([], 2, 1)
    with pytest.raises(TypeError, match="batched input 0: expected a numpy array"):
        native.run_batch([b"x" * 48], 2, 1)
    with pytest.raises(TypeError, match="batched input 0: expected dtype float64"):
        native.run_batch([np.zeros((2, 6), np.float32)], 2, 1)  # same bytes, other dtype
    with pytest.raises(ValueError, match=r"batched input 0: expected shape \(2, \*\(3,\)\)"):
        native.run_batch([np.zeros((3, 2))], 2, 1)
    with pytest.raises(ValueError, match="batch must be >= 0"):
        native.run_batch([np.zeros((0, 3))], -1, 1)
    with pytest.raises(ValueError, match="threads must be >= 1"):
        native.run_batch([np.zeros((2, 3))], 2, 0)
    with pytest.raises(ValueError, match="too large"):
        native.run_batch([np.zeros((0, 3))], 2**62, 1)


# ---- a failed evaluation leaves the workspace sound ----

def test_a_failed_evaluation_does_not_leave_the_workspace_pointing_at_its_outputs():
    """A kernel that throws mid-evaluation (Sin has no bool kernel) must not leave the pooled
    workspace pointing at the failed call's output buffer: the next in-place call (through the
    arena) would write into freed memory, such as an array allocated in between."""
    n = 1 << 16
    prog = _raw(["float64", "bool", "float64", "bool"], [1, 1, 1, 1], [n, n, n, n],
                [("Neg", [0], 2), ("Sin", [1], 3)], inputs=[0, 1], outputs=[2, 3])
    x, b = np.arange(1.0, n + 1.0), np.zeros(n, bool)
    for _ in range(3):
        with pytest.raises(RuntimeError, match="Sin has no kernel for bool"):
            prog.run([x, b])
        victim = np.zeros(n)  # may take the failed call's freed output buffer
        with pytest.raises(RuntimeError, match="Sin has no kernel for bool"):
            prog.run([x, b], out=[x, np.zeros(n, bool)])  # out aliases an input: via the arena
        assert not victim.any()
    np.testing.assert_array_equal(x, np.arange(1.0, n + 1.0))  # the failed call wrote nothing


# ---- eval_batch threads ----

def test_eval_batch_survives_absurd_thread_counts_and_failed_thread_starts():
    """threads=100000 is capped; where no thread can be started (an address-space limit leaves
    no room for a stack) the caller's thread does the work and the answer is still right."""
    code = textwrap.dedent("""
        import resource
        import numpy as np
        import tidu as td
        F = td.build(lambda x: td.sin(x) * 2.0, x=td.spec((3,)))
        prog = td.compile(td.materialize_merge(td.resolve([F]), F.outputs))
        x = np.random.default_rng(0).random((4000, 3))
        assert np.allclose(prog.eval_batch([x], threads=100000)[0], np.sin(x) * 2)
        vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (4 << 20), vm + (4 << 20)))
        assert np.allclose(prog.eval_batch([x], threads=1000)[0], np.sin(x) * 2)
        assert np.allclose(prog.eval_batch([x])[0], np.sin(x) * 2)
        print("ok")
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]


# ---- sizes that overflow ----

@pytest.mark.parametrize("shape", [(2**31, 2**31, 2**31), (2**49,), (0, 2**40, 2**40)])
def test_shapes_past_2_to_the_48_elements_are_refused_at_build(shape):
    with pytest.raises(ValueError, match=r"more than 2\*\*48 elements"):
        td.spec(shape)
    with pytest.raises(ValueError, match=r"more than 2\*\*48 elements"):
        td.build(lambda x: td.broadcast_to(x, shape), x=td.spec(()))


def test_a_memory_plan_past_2_to_the_56_bytes_is_refused():
    """4,096 live slots of 2^44 float64 elements (2^47 bytes each) would wrap a 64-bit sum
    after 2^17 of them; the checked plan refuses at 2^56 bytes."""
    k = 4096
    dims = [1 << 44] * (k + 1)
    code = [("Iota", [], 1 + i) for i in range(k)]
    attrs, off = [], [0]
    for _ in range(k):
        attrs += [1, 1 << 44, _eval.DTYPES.index("float64"), 0]
        off.append(len(attrs))
    with pytest.raises(ValueError, match="memory plan needs more than 2\\^56 bytes"):
        _raw(["float64"] * (k + 1), [1] * (k + 1), dims, code, inputs=[0],
             outputs=list(range(1, k + 1)), attrs=attrs, attr_off=off)


def test_input_and_output_name_counts_must_match():
    prog = _program(lambda x0: x0 * 2.0, td.spec((3,)))
    saved = forge.parse(prog.executable.native.to_bytes())
    arrays = list(saved.a.values())
    with pytest.raises(ValueError, match="2 input names for 1 inputs"):
        _eval.Program(*arrays, ["a", "b"], [])
    with pytest.raises(ValueError, match="2 output names for 1 outputs"):
        _eval.Program(*arrays, ["a"], ["y", "z"])
    assert _eval.Program(*arrays, ["a"], ["y"]).input_names == ["a"]
    unnamed = forge.parse(_eval.Program(*arrays, ["a"], ["y"]).to_bytes())
    unnamed.input_names = []  # a file must name every input
    with pytest.raises(ValueError, match="0 input names for 1 inputs"):
        _eval.Program(unnamed.to_bytes())


@pytest.mark.parametrize("bad", [b"\xe9", b"a\xc0\xafb", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                                 b"ok\xf0\x9f"])
def test_names_in_a_file_must_be_utf8(bad):
    """Names become Python str (and get printed): malformed UTF-8 (a stray continuation byte, an
    overlong form, a surrogate, past U+10FFFF, truncated) is refused at load."""
    prog = _program(lambda x0: x0 * 2.0, td.spec((3,)))
    saved = forge.parse(_eval.Program(*forge.parse(prog.executable.native.to_bytes()).a.values(),
                                      ["x"], ["y"]).to_bytes())
    saved.input_names = [bad]
    with pytest.raises(ValueError, match="not valid UTF-8"):
        _eval.Program(saved.to_bytes())
    saved.input_names = ["é \U0001f600".encode()]
    assert _eval.Program(saved.to_bytes()).input_names == ["é \U0001f600"]


# ---- numeric edges: both evaluators agree with numpy and jax ----

def test_abs_of_negative_zero_is_positive_zero_on_every_path():
    for dt in ("float32", "float64"):
        x = np.array([-0.0, 0.0, -1.5], dt)
        r = td.jit(lambda v: 1 / td.abs(v))(x)  # the array path
        np.testing.assert_array_equal(r, np.array([np.inf, np.inf, 1 / 1.5], dt))
        assert np.signbit(td.jit(td.abs)(x)).sum() == 0
    assert td.jit(lambda v: 1 / td.abs(v))(-0.0) == np.inf  # the scalar JIT
    prog = _program(lambda x0: 1 / td.abs(x0), td.spec(()))
    assert prog.eval_batch([np.array([-0.0, -2.0])])[0].tolist() == [np.inf, 0.5]


def test_sign_of_nan_is_nan_on_every_path():
    for dt in ("float32", "float64"):
        r = td.jit(td.sign)(np.array([np.nan, -2.0, 0.0, 3.0], dt))
        np.testing.assert_array_equal(r, np.sign(np.array([np.nan, -2.0, 0.0, 3.0], dt)))
    assert np.isnan(td.jit(td.sign)(np.nan))
    prog = _program(lambda x0: td.sign(x0), td.spec(()))
    assert np.isnan(prog.eval_batch([np.array([np.nan, 1.0])], exact=False)[0][0])


def test_integer_arithmetic_wraps_as_numpy():
    big = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min], np.int64)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(td.jit(lambda v: v + 1)(big), big + 1)
        np.testing.assert_array_equal(td.jit(lambda v: v * 3)(big), big * 3)
        np.testing.assert_array_equal(td.jit(lambda v: -v)(big), -big)
        np.testing.assert_array_equal(td.jit(td.abs)(big), np.abs(big))


def test_float_to_int_conversion_saturates_and_maps_nan_to_zero():
    x = np.array([np.nan, 1e300, -1e300, 2.9, -2.9, np.inf])
    r = td.jit(lambda v: v.astype("int32"))(x)
    assert r.tolist() == [0, 2**31 - 1, -2**31, 2, -2, 2**31 - 1]
