"""C++ embedding: the consumer project under tests/cpp builds against the installed package with
find_package(tidu), evaluates a gradient program saved from Python and matches Python's values;
the loader survives thousands of mutated files from Python and from C++ (the latter built once
with AddressSanitizer and UndefinedBehaviorSanitizer)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tidu as td
from _support.cpp_build import ctest


@pytest.fixture(scope="module")
def builds(cpp_build):
    return {"release": cpp_build("release"), "asan": cpp_build("asan")}


def _save_for_cpp(prog, inputs, outs, tmp_path, name: str) -> list[str]:
    """prog saved with the raw buffers of its inputs and of Python's outputs, in program order;
    returns eval_saved's arguments for them."""
    prog.save(tmp_path / f"{name}.tidu")
    (tmp_path / "in.bin").write_bytes(b"".join(np.asarray(a).tobytes() for a in inputs))
    (tmp_path / "want.bin").write_bytes(b"".join(np.asarray(o).tobytes() for o in outs))
    return [str(tmp_path / f"{name}.tidu"), str(tmp_path / "in.bin"), str(tmp_path / "want.bin")]


def _eval_saved(build_dir: Path, args: list[str]) -> subprocess.CompletedProcess:
    """The C++ consumer's eval_saved run on args (see _save_for_cpp)."""
    return subprocess.run([str(build_dir / "eval_saved"), *args], capture_output=True, text=True)


def test_get_include_and_cmake_dir_exist():
    assert (Path(td.get_include()) / "tidu" / "tidu.hpp").is_file()
    assert (Path(td.get_cmake_dir()) / "tiduConfig.cmake").is_file()


@pytest.mark.parametrize("kind", ["release", "asan"])
def test_ctest_consumer_project(builds, kind):
    """CTest: core identity, the saved gradient evaluated from C++ vs Python's values, and the
    loader over mutated files (with and without a valid checksum)."""
    res = subprocess.run([ctest(), "--test-dir", str(builds[kind]), "--output-on-failure"],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert re.search(r"100% tests passed.* out of 4", res.stdout), res.stdout


@pytest.mark.parametrize("kind", ["release", "asan"])
def test_cpp_evaluates_saved_gradient_like_python(builds, saved, kind):
    tmp, *_ = saved
    exe = builds[kind] / "eval_saved"
    res = subprocess.run([str(exe), str(tmp / "grad.tidu"), str(tmp / "inputs.bin"),
                          str(tmp / "expected.bin")], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "eval_saved: ok (3 inputs, 2 outputs)" in res.stdout


@pytest.mark.parametrize("kind", ["release", "asan"])
def test_cpp_evaluates_saved_loop_program_like_python(builds, kind, tmp_path):
    """A gradient through scan, cond (a nested scan in a branch), while_loop and checkpoint:
    nested programs in a version-2 file, run by <tidu/tidu.hpp> (under sanitizers too)."""
    from _support.values import loops as f

    prog = td.jit(td.value_and_grad(f, argnums=(0, 1))).lower(np.ones(3), np.ones(3))
    x, w = np.array([0.4, -0.2, 0.3]), np.array([0.9, 1.1, 0.7])
    feed = {"x": x, "w": w}
    inputs = [np.asarray(feed[n], np.float64) for n in prog.inputs]
    outs = prog.program.eval(inputs)
    args = _save_for_cpp(prog, inputs, outs, tmp_path, "loops")
    res = _eval_saved(builds[kind], args)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"eval_saved: ok (2 inputs, {len(outs)} outputs)" in res.stdout


def test_cpp_evaluates_saved_integer_dtypes_like_python(cpp_build, tmp_path):
    """int8, int16, uint8, uint16, uint64 inputs and outputs (wrapping arithmetic, shifts, a
    sort, a sum in uint64, conversions) evaluated by the C++ loader bit for bit as Python's."""
    specs = {d: td.spec((16,), d) for d in ("int8", "int16", "uint8", "uint16", "uint64")}

    def f(int8, int16, uint8, uint16, uint64):
        return (int8 * int8 - 100, int16 >> 3, uint8 ^ (uint8 << 3), td.sort(uint16),
                td.lax.div(uint64, uint64 >> 7), td.sum(uint8), (int16 * 3).astype(td.uint64),
                uint64.astype(td.int8))
    prog = td.jit(f).lower(**{d: np.zeros(16, d) for d in specs})
    rng = np.random.default_rng(2)
    inputs = [rng.integers(np.iinfo(d).min, np.iinfo(d).max, 16, dtype=d, endpoint=True)
              for d in prog.inputs]
    outs = prog.program.eval(inputs)
    args = _save_for_cpp(prog, inputs, outs, tmp_path, "ints")
    res = _eval_saved(cpp_build("release"), args)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "eval_saved: ok (5 inputs, 8 outputs)" in res.stdout
    bad = bytearray((tmp_path / "want.bin").read_bytes())
    bad[-1] ^= 1  # one bit off in the last output: refused
    (tmp_path / "want.bin").write_bytes(bytes(bad))
    res = _eval_saved(cpp_build("release"), args)
    assert res.returncode == 1 and "output 7 (int8) differs" in res.stderr, res.stderr


@pytest.mark.parametrize("kind", ["release", "asan"])
def test_cpp_evaluates_saved_fft_program_like_python(builds, kind, tmp_path):
    """A gradient through all four fft_types (odd, even, prime lengths, 2-D): the vendored
    pocketfft run by <tidu/tidu.hpp>, under sanitizers too."""
    def f(x, w):  # float64 in and out (eval_saved's format), complex inside
        z = w * (1.0 + 0.25j)
        a = td.fft.irfft(td.fft.rfft(x, n=11) * z, n=11)
        b = td.fft.ifft2(td.fft.fft2(z[:, None] * x[None, :6]))
        return td.sum(a * a) + td.sum(td.abs(b) ** 2)

    x, w = np.linspace(-1.0, 1.0, 7), np.linspace(0.5, 2.0, 6)
    prog = td.jit(td.value_and_grad(f, argnums=(0, 1))).lower(x, w)
    feed = {"x": x, "w": w}
    inputs = [np.asarray(feed[n]) for n in prog.inputs]
    outs = prog.program.eval(inputs)
    args = _save_for_cpp(prog, inputs, outs, tmp_path, "fft")
    res = _eval_saved(builds[kind], args)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"eval_saved: ok (2 inputs, {len(outs)} outputs)" in res.stdout


def _not_programs(tmp, tmp_path):
    """Paths that are no program file: a device that never ends, a directory, a FIFO (open
    would block), a file whose header claims more payload than it holds."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    good = (tmp / "grad.tidu").read_bytes()
    short = tmp_path / "short.tidu"
    short.write_bytes(good[:16] + (2**62).to_bytes(8, "little") + good[24:])
    return {"/dev/zero": "not a regular file", str(tmp_path): "not a regular file",
            str(fifo): "not a regular file", str(short): "payload size 4611686018427387904 in "
            "the header does not match the file's"}


def test_cpp_loader_refuses_what_is_not_a_program_file(cpp_build, saved, tmp_path):
    """Was: tidu::Program::load("/dev/zero") read until memory ran out."""
    tmp, *_ = saved
    for path, msg in _not_programs(tmp, tmp_path).items():
        res = subprocess.run([str(cpp_build("release") / "eval_saved"), path, "x", "y"],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 3 and msg in res.stderr, (path, res.returncode, res.stderr)


def test_python_load_refuses_what_is_not_a_program_file(saved, tmp_path):
    """Was: td.load('/dev/zero') read until MemoryError; td.load(fd) read a file descriptor
    and closed it."""
    tmp, *_ = saved
    for path, msg in _not_programs(tmp, tmp_path).items():
        with pytest.raises(ValueError, match=re.escape(msg)):
            td.load(path)
    fd = os.open(tmp / "grad.tidu", os.O_RDONLY)
    try:
        with pytest.raises(TypeError, match="expected a path .* got int"):
            td.load(fd)
        os.fstat(fd)  # still open
    finally:
        os.close(fd)
    with open(tmp / "grad.tidu", "rb") as f, pytest.raises(TypeError, match="got BufferedReader"):
        td.load(f)
    with pytest.raises(FileNotFoundError):
        td.load(tmp_path / "missing.tidu")
    for p in (str(tmp / "grad.tidu"), tmp / "grad.tidu", os.fsencode(tmp / "grad.tidu")):
        assert td.load(p).inputs == td.load(tmp / "grad.tidu").inputs


@pytest.mark.parametrize("kind", ["release", "asan"])
def test_cpp_evaluates_saved_custom_rule_program_like_python(builds, kind, tmp_path):
    """A gradient through custom_jvp, custom_vjp and lax.custom_root: each primal function is a
    nested program (the Checkpoint opcode) and its rules are inlined, so C++ needs no rule."""
    @td.custom_jvp
    def log1pexp(x):
        return td.log(1.0 + td.exp(x))

    log1pexp.defjvp(lambda p, t: (log1pexp(p[0]), t[0] * (1 - 1 / (1 + td.exp(p[0])))))

    @td.custom_vjp
    def clip(x):
        return x

    clip.defvjp(lambda x: (x, None), lambda _, g: (td.clip(g, -0.5, 0.5),))

    def newton(f, x0):
        return td.fori_loop(0, 20, lambda i, x: x - f(x) / td.jvp(f, (x,), (1.0,))[1], x0)

    def loss(x):
        root = td.lax.custom_root(lambda r: r * r - td.sum(x * x) - 1.0, 1.0, newton,
                                  lambda g, y: y / g(1.0))
        return td.sum(log1pexp(clip(x) * 3.0)) + root

    prog = td.jit(td.value_and_grad(loss)).lower(np.ones(3))
    x = np.array([0.4, -0.2, 0.3])
    outs = prog.program.eval([x])
    # clip's bwd clips 3 sigmoid(3 x) (above 0.5 here) to 0.5; the root is sqrt(|x|^2 + 1)
    assert np.allclose(outs[1], 0.5 + x / np.sqrt(np.sum(x * x) + 1.0))
    args = _save_for_cpp(prog, [x], outs, tmp_path, "custom")
    res = _eval_saved(builds[kind], args)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"eval_saved: ok (1 inputs, {len(outs)} outputs)" in res.stdout


def test_python_round_trip_is_exact(saved):
    tmp, names, inputs, outs = saved
    loaded = td.load(tmp / "grad.tidu")
    assert loaded.inputs == names
    for a, b in zip(loaded.eval(inputs), outs):
        np.testing.assert_array_equal(a, b)
    assert loaded.native.to_bytes() == (tmp / "grad.tidu").read_bytes()


@pytest.mark.parametrize("fix_checksum", [0, 1])
def test_cpp_loader_survives_mutated_files_under_sanitizers(builds, saved, fix_checksum):
    tmp, *_ = saved
    res = subprocess.run([str(builds["asan"] / "fuzz_load"), str(tmp / "grad.tidu"), "3000",
                          str(fix_checksum)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert "3000 mutated files" in res.stdout


def test_python_loader_rejects_bad_files_clearly(saved, tmp_path):
    from tidu import _eval

    tmp, *_ = saved
    good = (tmp / "grad.tidu").read_bytes()
    rng = np.random.default_rng(1)
    cases = {
        "not a tidu": b"hello world, definitely not a program file" * 2,
        "bad magic": b"X" + good[1:],
        "version": good[:8] + (99).to_bytes(4, "little") + good[12:],
        "truncated": good[:-5],
        "checksum": good[:-1] + bytes([good[-1] ^ 1]),
    }
    msgs = {"not a tidu": "bad magic", "bad magic": "bad magic", "version": "format version 99",
            "truncated": "payload size", "checksum": "checksum mismatch"}
    for name, data in cases.items():
        p = tmp_path / f"{name}.tidu"
        p.write_bytes(data)
        with pytest.raises(ValueError, match=msgs[name]):
            td.load(p)
    rejected = 0
    for _ in range(2000):
        b = bytearray(good)
        kind = rng.integers(3)
        if kind == 0:
            b = b[:rng.integers(len(b))]
        else:
            for _ in range(rng.integers(1, 6)):
                b[rng.integers(32, len(b))] = int(rng.integers(256))
        try:
            _eval.Program(bytes(b))
        except ValueError:
            rejected += 1
    assert rejected >= 1990  # the checksum catches (nearly) every mutation
