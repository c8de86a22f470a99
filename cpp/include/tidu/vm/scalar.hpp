// tidu/vm/scalar.hpp - the all-scalar float64 fast path's instruction, the table of what each opcode
// computes there, and (x86-64 Linux) a template JIT that turns scheduled scalar code into one
// straight-line function: no dispatch at all, so a program runs at the speed of its chain of
// dependent operations, as the same code compiled ahead of time would.
//
// The JIT emits, per instruction: load x (skipped when the previous instruction left it in xmm0),
// then an SSE2 add/sub/mul/div with y from memory, an integer sign-bit flip or clear (neg, abs),
// an integer move (copies, constants), or a call to a helper generated from TIDU_SCALAR_OPS, the
// same expressions the interpreter uses: the two paths give bit-identical results.  Code pages are
// written, then made read+execute (never both writable and executable).  Where that is refused, or
// on other platforms, or with TIDU_JIT=0 in the environment (read when a program is built), or when
// compiled with TIDU_NO_JIT defined, the interpreter runs instead.
#pragma once

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "tidu/kernels/math.hpp"
#include "tidu/vm/opcodes.hpp"

#if defined(__x86_64__) && defined(__linux__) && !defined(TIDU_NO_JIT)
#include <sys/mman.h>
#define TIDU_SCALAR_JIT 1
#else
#define TIDU_SCALAR_JIT 0
#endif

namespace tidu {

// A fixed-width instruction of the all-scalar float64 fast path: operands index a flat array of
// doubles (one per slot); Constant carries its value inline.  The code is scheduled into runs of
// one opcode: `run` (on a run's first instruction) is how many instructions from here share the
// handler, so the interpreter dispatches once per run rather than once per instruction.  32 bytes:
// measured faster than a packed 24 (an instruction never straddles a cache line).
struct alignas(32) ScalarInstr {
  Op op;
  std::uint32_t run;
  std::uint32_t out, a, b;
  double imm;
};
static_assert(sizeof(ScalarInstr) == 32, "ScalarInstr is meant to be 32 bytes");

// What each opcode computes from x = v[a], y = v[b] and the inline constant imm; opcodes not
// listed copy x (Conj, StopGradient, Reshape, BroadcastInDim of a scalar).
#define TIDU_SCALAR_OPS(X)                               \
  X(Add, x + y)                                          \
  X(Sub, x - y)                                          \
  X(Mul, x * y)                                          \
  X(Div, x / y)                                          \
  X(Pow, std::pow(x, y))                                 \
  X(Max, (x != x || x > y) ? x : y)                      \
  X(Min, (x != x || x < y) ? x : y)                      \
  X(Neg, -x)                                             \
  X(Exp, std::exp(x))                                    \
  X(Log, std::log(x))                                    \
  X(Sin, std::sin(x))                                    \
  X(Cos, std::cos(x))                                    \
  X(Tanh, std::tanh(x))                                  \
  X(Sqrt, std::sqrt(x))                                  \
  X(Rsqrt, 1.0 / std::sqrt(x))                           \
  X(Expm1, std::expm1(x))                                \
  X(Log1p, std::log1p(x))                                \
  X(Abs, std::fabs(x))                                   \
  X(Sign, x != x ? x : static_cast<double>((x > 0) - (x < 0)))  /* NaN stays NaN */ \
  X(Constant, imm)                                       \
  X(Floor, std::floor(x))                                \
  X(Ceil, std::ceil(x))                                  \
  X(Round, std::nearbyint(x))  /* half to even */        \
  X(Tan, std::tan(x))                                    \
  X(Atan, std::atan(x))                                  \
  X(Asin, std::asin(x))                                  \
  X(Acos, std::acos(x))                                  \
  X(Sinh, std::sinh(x))                                  \
  X(Cosh, std::cosh(x))                                  \
  X(Asinh, std::asinh(x))                                \
  X(Acosh, std::acosh(x))                                \
  X(Atanh, std::atanh(x))                                \
  X(Erf, std::erf(x))                                    \
  X(Erfc, std::erfc(x))                                  \
  X(ErfInv, kern::erfinv(x))                             \
  X(Cbrt, std::cbrt(x))                                  \
  X(Logistic, kern::logistic(x))                         \
  X(Rem, std::fmod(x, y))                                \
  X(Atan2, std::atan2(x, y))

namespace scalar_detail {
// One out-of-line function per opcode, for the JIT to call: f(x, y) with the interpreter's
// expression (imm is 0: Constant never calls its helper).
#define TIDU_SCALAR_HELPER(name, expr)                        \
  inline double op_##name(double x, double y) {               \
    const double imm = 0.0;                                   \
    (void)x, (void)y, (void)imm;                              \
    return (expr);                                            \
  }
TIDU_SCALAR_OPS(TIDU_SCALAR_HELPER)
#undef TIDU_SCALAR_HELPER

// The C library's own function for the unary opcodes whose expression is just that call (the
// JIT calls it directly, skipping the helper's extra jump); nullptr for the rest.
inline double (*libm_unary(Op op))(double) {
  switch (op) {
    case Op::Exp: return static_cast<double (*)(double)>(&std::exp);
    case Op::Log: return static_cast<double (*)(double)>(&std::log);
    case Op::Sin: return static_cast<double (*)(double)>(&std::sin);
    case Op::Cos: return static_cast<double (*)(double)>(&std::cos);
    case Op::Tanh: return static_cast<double (*)(double)>(&std::tanh);
    case Op::Expm1: return static_cast<double (*)(double)>(&std::expm1);
    case Op::Log1p: return static_cast<double (*)(double)>(&std::log1p);
    default: return nullptr;
  }
}

inline double (*helper(Op op))(double, double) {
  switch (op) {
#define TIDU_SCALAR_HELPER_CASE(name, expr) \
  case Op::name:                            \
    return &op_##name;
    TIDU_SCALAR_OPS(TIDU_SCALAR_HELPER_CASE)
#undef TIDU_SCALAR_HELPER_CASE
    default:
      return nullptr;
  }
}
}  // namespace scalar_detail

// Whether TIDU_JIT allows the JIT (read at each program's build: TIDU_JIT=0 turns it off).
inline bool scalar_jit_enabled() {
  const char* e = std::getenv("TIDU_JIT");
  return TIDU_SCALAR_JIT && !(e && std::strcmp(e, "0") == 0);
}

// Machine code for one scalar program: run(v) does what eval_scalar's loop does to v.
class ScalarJit {
 public:
  // The most bytes one instruction emits (a binary helper call: two loads of 9 bytes, or a swap
  // of 12, then mov rax of 10, call of 2 and a store of 9), with room to spare.
  static constexpr std::size_t kMaxInstrBytes = 48;

  // nullptr when the platform, the program or the operating system rules the JIT out.
  static std::shared_ptr<const ScalarJit> build(const std::vector<ScalarInstr>& code,
                                                std::size_t n_slots) {
#if TIDU_SCALAR_JIT
    if (code.empty() || n_slots >= (std::size_t{1} << 28)) return nullptr;  // disp32 = 8 * slot
    // The code is written straight into its pages, byte by byte (no instruction takes more than
    // kMaxInstrBytes); the pages past its end are given back before they turn executable.
    const std::size_t page = 4096;
    const std::size_t cap = (code.size() * kMaxInstrBytes + 16 + page - 1) / page * page;
    void* mem = mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return nullptr;
    std::uint8_t* const begin = static_cast<std::uint8_t*>(mem);
    std::uint8_t* w = begin;
    auto u8 = [&](std::initializer_list<std::uint8_t> xs) {
      for (std::uint8_t x : xs) *w++ = x;
    };
    auto u32 = [&](std::uint32_t x) {
      std::memcpy(w, &x, 4);  // little-endian, as the instruction encoding wants
      w += 4;
    };
    auto u64 = [&](std::uint64_t x) {
      std::memcpy(w, &x, 8);
      w += 8;
    };
    auto disp = [&](std::uint32_t slot) { u32(slot * 8u); };
    // SSE2 scalar-double instructions on xmm0..xmm15: prefix, REX when a register is >= 8, then
    // 0F opc and a ModRM; memory operands are [rbx + disp32] (mod=10, rm=011).
    auto rex = [&](int reg, int rm) {
      if (reg >= 8 || rm >= 8) *w++ = static_cast<std::uint8_t>(0x40 | ((reg >= 8) << 2) | (rm >= 8));
    };
    auto sse_rm = [&](std::uint8_t prefix, std::uint8_t opc, int reg, std::uint32_t slot) {
      *w++ = prefix;
      rex(reg, 0);
      u8({0x0F, opc, static_cast<std::uint8_t>(0x83 | ((reg & 7) << 3))});
      disp(slot);
    };
    auto sse_rr = [&](std::uint8_t prefix, std::uint8_t opc, int dst, int src) {
      *w++ = prefix;
      rex(dst, src);
      u8({0x0F, opc, static_cast<std::uint8_t>(0xC0 | ((dst & 7) << 3) | (src & 7))});
    };
    auto load_rax = [&](std::uint32_t s) { u8({0x48, 0x8B, 0x83}); disp(s); };
    auto store_rax = [&](std::uint32_t s) { u8({0x48, 0x89, 0x83}); disp(s); };
    auto mov_rax = [&](std::uint64_t x) { u8({0x48, 0xB8}); u64(x); };

    u8({0x53});              // push rbx (also aligns the stack to 16 for the calls)
    u8({0x48, 0x89, 0xFB});  // mov rbx, rdi: the slot array
    // A register cache: which slot each xmm register holds (slots are written once, so a cached
    // value never goes stale).  Arithmetic reads its operands from registers where it can, which
    // keeps a chain of dependent operations off the store-to-load path through memory; every
    // result is also stored, for readers after the next call (calls clobber every xmm register).
    constexpr std::uint32_t kNoSlot = 0xffffffffu;
    std::uint32_t held[16];
    std::vector<std::int8_t> reg_of(n_slots, -1);
    auto forget_all = [&] {
      for (int r = 0; r < 16; ++r) {
        if (held[r] != kNoSlot) reg_of[held[r]] = -1;
        held[r] = kNoSlot;
      }
    };
    for (int r = 0; r < 16; ++r) held[r] = kNoSlot;
    int next_reg = 0;
    auto take = [&](std::uint32_t slot, int avoid1, int avoid2) {  // a register for a new value
      int r = next_reg;
      while (r == avoid1 || r == avoid2) r = (r + 1) & 15;
      next_reg = (r + 1) & 15;
      if (held[r] != kNoSlot) reg_of[held[r]] = -1;
      held[r] = slot;
      reg_of[slot] = static_cast<std::int8_t>(r);
      return r;
    };
    auto store = [&](int r, std::uint32_t slot) { sse_rm(0xF2, 0x11, r, slot); };  // movsd [slot], xr
    [[maybe_unused]] std::size_t emitted = 0;
    for (const ScalarInstr& c : code) {
      // Each instruction stays within its kMaxInstrBytes, so the code stays within the pages.
      assert(static_cast<std::size_t>(w - begin) <= 4 + emitted++ * kMaxInstrBytes);
      switch (c.op) {
        case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: {
          const std::uint8_t opc = c.op == Op::Add ? 0x58 : c.op == Op::Sub ? 0x5C : c.op == Op::Mul ? 0x59 : 0x5E;
          const int ra = reg_of[c.a], rb = reg_of[c.b];
          const int r = take(c.out, ra, rb);
          if (ra >= 0) sse_rr(0x66, 0x28, r, ra);  // movapd xr, xa
          else sse_rm(0xF2, 0x10, r, c.a);         // movsd xr, [a]
          if (rb >= 0) sse_rr(0xF2, opc, r, rb);   // op xr, xb
          else sse_rm(0xF2, opc, r, c.b);          // op xr, [b]
          store(r, c.out);
          break;
        }
        case Op::Neg: case Op::Abs:
          load_rax(c.a);
          u8({0x48, 0x0F, 0xBA, static_cast<std::uint8_t>(c.op == Op::Neg ? 0xF8 : 0xF0), 0x3F});  // btc/btr rax, 63
          store_rax(c.out);
          break;
        case Op::Constant: {
          std::uint64_t bits;
          std::memcpy(&bits, &c.imm, sizeof bits);
          mov_rax(bits);
          store_rax(c.out);
          break;
        }
        default: {
          double (*f)(double, double) = scalar_detail::helper(c.op);
          if (f == nullptr) {  // the copies: Conj, StopGradient, Reshape, BroadcastInDim
            load_rax(c.a);
            store_rax(c.out);
            break;
          }
          // x to xmm0 and, for the binary helpers, y to xmm1, from registers or memory.
          const bool binary = c.op == Op::Pow || c.op == Op::Max || c.op == Op::Min ||
                              c.op == Op::Rem || c.op == Op::Atan2;
          const int ra = reg_of[c.a], rb = binary ? reg_of[c.b] : -2;
          auto x_to_0 = [&] {
            if (ra > 0) sse_rr(0x66, 0x28, 0, ra);
            else if (ra < 0) sse_rm(0xF2, 0x10, 0, c.a);
          };
          auto y_to_1 = [&] {
            if (rb == 0 || rb > 1) sse_rr(0x66, 0x28, 1, rb);
            else if (rb == -1) sse_rm(0xF2, 0x10, 1, c.b);
          };
          if (rb == 0 && ra == 1) {  // swap through xmm2
            sse_rr(0x66, 0x28, 2, 0);
            sse_rr(0x66, 0x28, 0, 1);
            sse_rr(0x66, 0x28, 1, 2);
          } else if (rb == 0) {  // y leaves xmm0 before x arrives
            y_to_1();
            x_to_0();
          } else {
            x_to_0();
            y_to_1();
          }
          double (*direct)(double) = scalar_detail::libm_unary(c.op);
          mov_rax(direct ? reinterpret_cast<std::uint64_t>(direct) : reinterpret_cast<std::uint64_t>(f));
          u8({0xFF, 0xD0});  // call rax
          forget_all();
          held[0] = c.out;
          reg_of[c.out] = 0;
          next_reg = 1;
          store(0, c.out);
          break;
        }
      }
    }
    u8({0x5B, 0xC3});  // pop rbx; ret
    const std::size_t size = (static_cast<std::size_t>(w - begin) + page - 1) / page * page;
    if (size < cap) munmap(begin + size, cap - size);
    if (mprotect(mem, size, PROT_READ | PROT_EXEC) != 0) {
      munmap(mem, size);
      return nullptr;
    }
    return std::shared_ptr<const ScalarJit>(new ScalarJit(mem, size));
#else
    (void)code, (void)n_slots;
    return nullptr;
#endif
  }

  void run(double* v) const { fn_(v); }
  std::size_t code_bytes() const { return size_; }
  const void* code() const { return mem_; }

  ~ScalarJit() {
#if TIDU_SCALAR_JIT
    munmap(mem_, size_);
#endif
  }
  ScalarJit(const ScalarJit&) = delete;
  ScalarJit& operator=(const ScalarJit&) = delete;

 private:
  ScalarJit(void* mem, std::size_t size)
      : mem_(mem), size_(size), fn_(reinterpret_cast<void (*)(double*)>(mem)) {}
  void* mem_;
  std::size_t size_;
  void (*fn_)(double*);
};

}  // namespace tidu
