// Loads forged program files (tests/_support/forge.py: DIR/000000.tidu, ...) with
// tidu::Program::load_from_memory and evaluates those that load, with input and output buffers
// of the declared sizes.  Built with -fsanitize=address,undefined -fno-sanitize-recover=all by the
// tests: any sanitizer report aborts the run (the test restarts it after the file that did so).
// Loading must throw tidu::ProgramError or succeed; evaluating may throw any std::exception.
// Programs are evaluated when their workspace_bytes (nested programs included) fit in 64 MiB: one
// that allocates more than it declares (a nested arena left out) aborts under ASan.
//   forge_load <dir> <list> <progress>: the files whose indices <list> holds (one per line), in
//   order, each index written to <progress> before its file is read.
#include <algorithm>
#include <complex>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <tidu/tidu.hpp>

namespace forge_load {


constexpr std::uint64_t kCap = std::uint64_t{64} << 20;  // as tests/_support/forge_check.py

// One element of a harmless value of dtype d (bools must be 0 or 1 for UBSan).
void fill(std::vector<std::uint8_t>& b, tidu::DType d) {
  auto put = [&](auto v) {
    for (std::size_t i = 0; i + sizeof(v) <= b.size(); i += sizeof(v)) std::memcpy(b.data() + i, &v, sizeof(v));
  };
  switch (d) {
    case tidu::DType::F32: put(1.5f); break;
    case tidu::DType::F64: put(1.5); break;
    case tidu::DType::C64: put(std::complex<float>(1.5f, 0.5f)); break;
    case tidu::DType::C128: put(std::complex<double>(1.5, 0.5)); break;
    case tidu::DType::I32: put(std::int32_t{3}); break;
    case tidu::DType::I64: put(std::int64_t{3}); break;
    default: put(std::uint8_t{1}); break;
  }
}


int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: forge_load <dir> <list> <progress>\n");
    return 2;
  }
  const std::string dir = argv[1], progress = argv[3];
  std::ifstream list(argv[2]);
  long loaded = 0, rejected = 0, evaluated = 0, eval_threw = 0, i = 0;
  while (list >> i) {
    char name[32];
    std::snprintf(name, sizeof name, "/%06ld.tidu", i);
    std::ifstream f(dir + name, std::ios::binary);
    if (!f) {
      std::printf("FAIL\t%ld\tcannot open %s\n", i, (dir + name).c_str());
      continue;
    }
    std::vector<std::uint8_t> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (std::FILE* p = std::fopen(progress.c_str(), "w")) {
      std::fprintf(p, "%ld\n", i);
      std::fclose(p);
    }
    try {
      tidu::Program p = tidu::Program::load_from_memory(b.data(), b.size());
      ++loaded;
      // workspace_bytes counts nested programs and loop buffers (what a Workspace allocates):
      // a cap of kCap refuses exactly the programs over it.
      bool capped = false;
      try {
        tidu::Program::load_from_memory(b.data(), b.size(), tidu::LoadLimits{kCap, UINT64_MAX});
      } catch (const tidu::ProgramError&) {
        capped = true;
      }
      if (capped != (p.workspace_bytes > kCap) || p.workspace_bytes < p.arena_bytes)
        std::printf("FAIL\t%ld\tworkspace_bytes %llu and a load cap of %llu disagree\n", i,
                    static_cast<unsigned long long>(p.workspace_bytes), static_cast<unsigned long long>(kCap));
      bool small = p.workspace_bytes <= kCap;
      for (std::size_t k = 0; k < p.n_inputs(); ++k) small = small && p.input_bytes(k) <= kCap;
      for (std::size_t k = 0; k < p.n_outputs(); ++k) small = small && p.output_bytes(k) <= kCap;
      if (!small) continue;  // loading was the test: evaluating needs more than the cap
      std::vector<std::vector<std::uint8_t>> in(p.n_inputs()), out(p.n_outputs());
      std::vector<const void*> ip;
      std::vector<void*> op;
      for (std::size_t k = 0; k < p.n_inputs(); ++k) {
        in[k].assign(std::max<std::uint64_t>(p.input_bytes(k), 1), 0);
        fill(in[k], p.input_dtype(k));
        ip.push_back(in[k].data());
      }
      for (std::size_t k = 0; k < p.n_outputs(); ++k) {
        out[k].assign(std::max<std::uint64_t>(p.output_bytes(k), 1), 0);  // never a null data()
        op.push_back(out[k].data());
      }
      try {
        tidu::Workspace ws(p);
        p.eval(ws, ip.data(), op.data());
        ++evaluated;
      } catch (const std::exception&) {
        ++eval_threw;  // e.g. a kernel refusing a dtype: an exception, never a crash
      }
    } catch (const tidu::ProgramError&) {
      ++rejected;
    } catch (const std::exception& e) {
      std::printf("FAIL\t%ld\tload threw a non-ProgramError: %s\n", i, e.what());
    }
  }
  std::printf("forge_load: %ld loaded (%ld evaluated, %ld threw at eval), %ld rejected\n", loaded,
              evaluated, eval_threw, rejected);
  return 0;
}

}  // namespace forge_load
