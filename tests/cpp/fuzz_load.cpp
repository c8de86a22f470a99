// Loads thousands of mutated copies of a valid program file: each must load or throw
// tidu::ProgramError, and a program that loads must evaluate without touching memory it does not
// own (run under AddressSanitizer/UndefinedBehaviorSanitizer in the tests).
//   fuzz_load <prog.tidu> [iterations] [skip_checksum 0|1]
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include <tidu/tidu.hpp>

namespace fuzz_load {

static void refresh_checksum(std::vector<std::uint8_t>& b) {
  if (b.size() < 32) return;
  std::uint64_t size = b.size() - 32, sum = tidu::io::fnv1a(b.data() + 32, size);
  std::memcpy(b.data() + 16, &size, 8);
  std::memcpy(b.data() + 24, &sum, 8);
}

int main(int argc, char** argv) {
  std::ifstream f(argv[1], std::ios::binary);
  std::vector<std::uint8_t> good((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  int iters = argc > 2 ? std::atoi(argv[2]) : 2000;
  bool fix_sum = argc > 3 && std::atoi(argv[3]) != 0;  // reach the validator past the checksum
  std::mt19937_64 rng(12345);
  int loaded = 0, rejected = 0;
  for (int it = 0; it < iters; ++it) {
    std::vector<std::uint8_t> b = good;
    switch (rng() % 4) {
      case 0: b.resize(rng() % (b.size() + 1)); break;                       // truncate
      case 1: for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k)        // flip bits
                b[32 + rng() % (b.size() - 32)] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
              break;
      case 2: for (int k = 0; k < 1 + static_cast<int>(rng() % 8); ++k)        // random bytes
                b[32 + rng() % (b.size() - 32)] = static_cast<std::uint8_t>(rng());
              break;
      default: b.assign(rng() % 256, 0); for (auto& c : b) c = static_cast<std::uint8_t>(rng());  // noise
    }
    if (fix_sum) refresh_checksum(b);
    try {
      tidu::Program p = tidu::Program::load_from_memory(b.data(), b.size());
      tidu::Workspace ws(p);
      std::vector<std::vector<std::uint8_t>> in(p.n_inputs()), out(p.n_outputs());
      std::vector<const void*> ip;
      std::vector<void*> op;
      for (std::size_t i = 0; i < p.n_inputs(); ++i) { in[i].assign(p.input_bytes(i) + 8, 0); ip.push_back(in[i].data()); }
      for (std::size_t i = 0; i < p.n_outputs(); ++i) { out[i].assign(p.output_bytes(i) + 8, 0); op.push_back(out[i].data()); }
      try {
        p.eval(ws, ip.data(), op.data());
      } catch (const std::runtime_error&) {
        // e.g. a kernel refusing a dtype: an exception, never a crash
      }
      ++loaded;
    } catch (const tidu::ProgramError&) {
      ++rejected;
    }
  }
  std::printf("fuzz_load: %d mutated files, %d loaded, %d rejected\n", iters, loaded, rejected);
  return 0;
}

}  // namespace fuzz_load
