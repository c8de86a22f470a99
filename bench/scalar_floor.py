"""How close the all-scalar fast path comes to compiled code, for bench/eval.py's (b) programs.

Saves the 5,000-op scalar DAG and its value-and-gradient program, writes each again as straight-line
C++ (one statement per instruction, the same C library calls, no dispatch), compiles that with the
system C++ compiler at -O2 and times it beside tidu's interpreter (TIDU_JIT=0) and tidu's JIT
(tidu::eval through the C++ headers) in one process.  The compiled code's time is close to the
floor set by the chain of dependent transcendental calls, which no evaluator goes far under.

    python bench/scalar_floor.py [--cxx c++]

Needs a C++17 compiler.  Prints medians (minima in brackets) and the interpreter / compiled ratio.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import tidu as td

sys.path.insert(0, str(Path(__file__).parent))
from eval import scalar_dag  # noqa: E402

EXPR = {"Add": "{a} + {b}", "Sub": "{a} - {b}", "Mul": "{a} * {b}", "Div": "{a} / {b}",
        "Neg": "-{a}", "Exp": "std::exp({a})", "Log": "std::log({a})", "Sin": "std::sin({a})",
        "Cos": "std::cos({a})", "Tanh": "std::tanh({a})", "Sqrt": "std::sqrt({a})"}

MAIN = r"""
#include <tidu/tidu.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
void straight_value(const double*, double*, double*);
void straight_grad(const double*, double*, double*);
static double best(std::vector<double> v, bool median) {
  std::sort(v.begin(), v.end());
  return median ? v[v.size() / 2] : v[0];
}
template <class F> static void time(const char* what, std::size_t n, F&& f) {
  std::vector<double> ts;
  for (int r = 0; r < 31; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < 100; ++k) f();
    ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 100);
  }
  std::printf("  %-26s %6.2f ns/instr [%5.2f]  %7.1f us\n", what, best(ts, true) / n * 1e9,
              best(ts, false) / n * 1e9, best(ts, true) * 1e6);
}
int main(int argc, char** argv) {
  const char* names[] = {"value", "value+grad"};
  void (*straight[])(const double*, double*, double*) = {straight_value, straight_grad};
  for (int k = 0; k < 2; ++k) {
    setenv("TIDU_JIT", "0", 1);  // read when a program is built
    tidu::Program pi = tidu::Program::load(argv[1 + k]);
    unsetenv("TIDU_JIT");
    tidu::Program p = tidu::Program::load(argv[1 + k]);
    tidu::Workspace ws(p), wsi(pi);
    std::vector<double> in(p.n_inputs(), 1.0), out(p.n_outputs()), out2(p.n_outputs());
    in[0] = 0.3;
    if (in.size() > 1) in[1] = 0.4;
    std::vector<const void*> ip;
    std::vector<void*> op;
    for (auto& x : in) ip.push_back(&x);
    for (auto& x : out) op.push_back(&x);
    std::vector<double> v(p.slots.size());
    std::size_t n = p.instrs.size();
    std::printf("%s: %zu instructions\n", names[k], n);
    time("interpreter (TIDU_JIT=0)", n, [&] { pi.eval(wsi, ip.data(), op.data()); });
    if (p.scalar_jit) time("tidu JIT (tidu::eval)", n, [&] { p.eval(ws, ip.data(), op.data()); });
    time("straight-line C++", n, [&] { straight[k](in.data(), v.data(), out2.data()); });
    for (std::size_t i = 0; i < out.size(); ++i)
      if (out[i] != out2[i]) { std::printf("MISMATCH output %zu: %.17g vs %.17g\n", i, out[i], out2[i]); return 1; }
  }
}
"""


def straight_line(prog, name: str) -> str:
    exe = prog.executable
    lines = [f"void {name}(const double* in, double* v, double* out) {{"]
    lines += [f"  v[{s}] = in[{i}];" for i, s in enumerate(exe.input_slots)]
    for prim, ins, outs in exe.instructions:
        op = type(prim).__name__
        if op == "Constant":
            rhs = float(np.frombuffer(prim.data, dtype=prim.dtype)[0]).hex()
            lines.append(f"  v[{outs[0]}] = {rhs};")
            continue
        if op not in EXPR:
            raise SystemExit(f"scalar_floor: no C++ for {op}")
        a = f"v[{ins[0]}]"
        b = f"v[{ins[1]}]" if len(ins) > 1 else ""
        lines.append(f"  v[{outs[0]}] = {EXPR[op].format(a=a, b=b)};")
    lines += [f"  out[{i}] = v[{s}];" for i, s in enumerate(exe.output_slots)]
    return "\n".join(lines) + "\n}\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxx", default=shutil.which("c++") or shutil.which("g++") or "c++")
    a = ap.parse_args()
    f = scalar_dag(5000, td)
    F = td.build(f, x=td.spec(()), y=td.spec(()))
    val = td.compile(td.materialize_merge(td.resolve([F]), F.outputs), backend="cpu")
    T1 = td.transpose(td.differentiate(td.resolve([F]), F.outputs, ["x", "y"]))
    vg = td.compile(td.materialize_merge(td.resolve([F, T1]), F.outputs + T1.tangent_outputs),
                    backend="cpu")
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        val.save(d / "value.tidu")
        vg.save(d / "grad.tidu")
        (d / "main.cpp").write_text(MAIN)
        # The value program takes (x, y); the gradient program takes its inputs in vg.inputs order
        # and main() feeds 0.3, 0.4, 1.0, ...: the same feed as bench/eval.py when that order is
        # x, y, cotangent.
        assert list(val.inputs) == ["x", "y"] and list(vg.inputs)[:2] == ["x", "y"], vg.inputs
        (d / "straight.cpp").write_text("#include <cmath>\n" + straight_line(val, "straight_value")
                                        + straight_line(vg, "straight_grad"))
        cmd = [a.cxx, "-O2", "-std=c++17", f"-I{td.get_include()}", str(d / "main.cpp"),
               str(d / "straight.cpp"), "-o", str(d / "floor"), "-pthread"]
        subprocess.run(cmd, check=True)
        subprocess.run([str(d / "floor"), str(d / "value.tidu"), str(d / "grad.tidu")], check=True)


if __name__ == "__main__":
    main()
