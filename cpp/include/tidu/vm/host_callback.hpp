// tidu/vm/host_callback.hpp - the HostCallback instruction (td.debug.print, td.debug.callback,
// td.pure_callback): it calls a function of the embedding host (Python) with its operands and
// lets it write its outputs.  The core holds no Python: the host installs one handler
// (set_host_callback; tidu._eval installs Python's), and a program run where none is installed,
// or loaded from a file (file.hpp refuses the opcode), cannot reach it.
//
// Attributes: id (the host's number for the function).  Operands: any; outputs: one or more.
#pragma once

#include <cstdint>
#include <stdexcept>

#include "tidu/vm/program.hpp"

namespace tidu {

// Called with the instruction, its program and the workspace's slot pointers: reads the operands
// ptr[args[in.in_begin + k]] and writes every output ptr[outs[in.out_begin + k]] in full, or
// throws (HostCallbackError when the host's own error is pending, to be raised by the binding).
using HostCallbackFn = void (*)(std::int64_t id, const Program& p, const Instr& in, void* const* ptr);

inline HostCallbackFn& host_callback_handler() {
  static HostCallbackFn fn = nullptr;
  return fn;
}

inline void set_host_callback(HostCallbackFn fn) { host_callback_handler() = fn; }

// A host's exception, raised inside the callback and kept by the host: the binding that started
// the evaluation raises it again once the evaluation has unwound.
class HostCallbackError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

inline void run_host_callback(const Program& p, const Instr& in, void* const* ptr) {
  HostCallbackFn fn = host_callback_handler();
  if (fn == nullptr)
    throw std::runtime_error("tidu: a HostCallback instruction needs a host (no handler installed)");
  fn(p.attrs[in.attr_begin], p, in, ptr);
}

// Tie: the value of operand 0, computed once the others (effect tokens) are: keeps a program's
// callbacks from being dropped as dead code and orders them before the value is used.
inline void run_tie(const Program& p, const Instr& in, void* const* ptr) {
  const std::uint32_t x = p.args[in.in_begin];
  const std::uint64_t n = p.nbytes(in.out);
  if (n && ptr[in.out] != ptr[x]) std::memcpy(ptr[in.out], ptr[x], n);
}

}  // namespace detail
}  // namespace tidu
