// Evaluates a program saved from Python and compares with Python's values:
//   eval_saved <prog.tidu> <inputs.bin> <expected.bin> [repeats]
// inputs.bin / expected.bin hold the raw buffers of every input / output, in program order;
// float64 outputs are compared to 1e-12, any other dtype bit for bit.
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include <tidu/tidu.hpp>

namespace eval_saved {

static std::vector<std::uint8_t> read(const char* path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: eval_saved prog.tidu inputs.bin expected.bin [repeats]\n");
    return 2;
  }
  tidu::Program prog = [&] {
    try {
      return tidu::Program::load(argv[1]);
    } catch (const tidu::ProgramError& e) {  // a bad file: say why, exit 3 (tests check it)
      std::fprintf(stderr, "eval_saved: %s\n", e.what());
      std::exit(3);
    }
  }();
  tidu::Workspace ws(prog);
  std::vector<std::uint8_t> in = read(argv[2]), want = read(argv[3]);
  std::vector<const void*> ins;
  std::size_t off = 0;
  for (std::size_t i = 0; i < prog.n_inputs(); ++i) {
    ins.push_back(in.data() + off);
    off += prog.input_bytes(i);
  }
  if (off != in.size()) { std::fprintf(stderr, "inputs.bin has the wrong size\n"); return 1; }
  std::vector<std::vector<std::uint8_t>> outs(prog.n_outputs());
  std::vector<void*> outp;
  for (std::size_t i = 0; i < prog.n_outputs(); ++i) {
    outs[i].resize(prog.output_bytes(i));
    outp.push_back(outs[i].data());
  }
  prog.eval(ws, ins.data(), outp.data());
  off = 0;
  for (std::size_t i = 0; i < prog.n_outputs(); ++i) {
    if (prog.output_dtype(i) != tidu::DType::F64) {  // integers and bools: bit for bit
      if (off + outs[i].size() > want.size() || std::memcmp(outs[i].data(), want.data() + off, outs[i].size())) {
        std::fprintf(stderr, "output %zu (%s) differs from Python's\n", i, tidu::dtype_name(prog.output_dtype(i)));
        return 1;
      }
      off += outs[i].size();
      continue;
    }
    const double* got = reinterpret_cast<const double*>(outs[i].data());
    const double* exp = reinterpret_cast<const double*>(want.data() + off);
    for (std::size_t k = 0; k < outs[i].size() / 8; ++k) {
      if (std::fabs(got[k] - exp[k]) > 1e-12 * (1 + std::fabs(exp[k]))) {
        std::fprintf(stderr, "output %zu[%zu]: C++ %.17g vs Python %.17g\n", i, k, got[k], exp[k]);
        return 1;
      }
    }
    off += outs[i].size();
  }
  int repeats = argc > 4 ? std::atoi(argv[4]) : 0;
  if (repeats > 0) {
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < repeats; ++r) prog.eval(ws, ins.data(), outp.data());
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / repeats;
    std::printf("per call: %.3f us\n", us);
  }
  std::printf("eval_saved: ok (%zu inputs, %zu outputs)\n", prog.n_inputs(), prog.n_outputs());
  return 0;
}

}  // namespace eval_saved
