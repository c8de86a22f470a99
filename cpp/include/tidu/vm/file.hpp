// tidu/vm/file.hpp - the versioned program file (.tidu) and building a Program from plain arrays.
//
// Layout (little-endian):
//   magic "TIDUPROG" | u32 version | u32 reserved (0) | u64 payload bytes | u64 FNV-1a-64 of payload
//   payload (version 2): a program:
//     13 arrays, each u64 element count + raw elements, in the order of ProgramArrays,
//     input names and output names, each u64 count + (u32 length + UTF-8 bytes)*,
//     u64 count of nested programs (loop bodies, branches: control_flow.hpp), each a program
//     laid out the same way (at most kMaxNesting deep).
//   Version 1 (no nested programs, one output per instruction: a u32 output slot array in place
//   of out_off and out_slots) is still read.
// The loader checks magic, version, sizes and checksum, reads nothing outside the buffer, and
// hands the result to finalize(): structural and per-instruction validation, then the plan.
//
// Untrusted files: the checksum only detects accidents, so everything past it is validated as if
// hostile, with overflow-checked arithmetic (checked.hpp): at most 2^48 elements per array and
// 2^56 bytes per memory plan, every index, shape, attribute list and constant range in bounds.
// A Program that loads cannot make eval() touch memory outside its Workspace and the caller's
// buffers (of input_bytes(i) / output_bytes(i) bytes).  The resources a valid program asks for
// are the caller's to bound: workspace_bytes (what a Workspace allocates, nested programs
// included) and total_instructions, capped at load by LoadLimits; time is bounded by cancelling
// (Workspace::cancel_flag), since a while loop need not end.  A kernel missing for a dtype
// throws std::runtime_error from eval(), leaving the Workspace usable.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tidu/vm/program.hpp"
#include "tidu/vm/validate.hpp"
#include "tidu/vm/widen.hpp"

namespace tidu {

inline constexpr char kMagic[8] = {'T', 'I', 'D', 'U', 'P', 'R', 'O', 'G'};
inline constexpr std::uint32_t kFormatVersion = 2;
inline constexpr int kMaxNesting = 32;  // nested programs inside nested programs

struct ProgramArrays {
  std::vector<std::uint8_t> slot_dtype;
  std::vector<std::uint32_t> slot_ndim;
  std::vector<std::int64_t> shapes;
  std::vector<std::uint8_t> opcode;
  std::vector<std::uint32_t> in_off, in_slots, out_off, out_slots, attr_off;
  std::vector<std::int64_t> attrs;
  std::vector<std::uint8_t> consts;
  std::vector<std::uint32_t> inputs, outputs;
  std::vector<std::string> input_names, output_names;
  std::vector<ProgramArrays> subs;  // nested programs, referenced by index from attributes
};

// A validated, planned Program from arrays (throws ProgramError on any inconsistency).
// widen: whether float16/bfloat16 instructions still need their float32 rewrite (widen.hpp).
inline Program build_program(const ProgramArrays& arrays, int depth = 0, bool widen = true) {
  if (widen && has_half(arrays)) return build_program(widen_half(arrays), depth, false);  // widen.hpp
  const ProgramArrays& r = arrays;
  if (r.slot_ndim.size() != r.slot_dtype.size() || r.in_off.size() != r.opcode.size() + 1 ||
      r.attr_off.size() != r.opcode.size() + 1 || r.out_off.size() != r.opcode.size() + 1)
    throw ProgramError("tidu program: array lengths disagree");
  if (depth > kMaxNesting) throw ProgramError("tidu program: nested programs more than 32 deep");
  Program p;
  for (const ProgramArrays& sub : r.subs) p.subs.push_back(build_program(sub, depth + 1));
  p.shapes = r.shapes;
  std::uint64_t pos = 0;
  for (std::size_t s = 0; s < r.slot_dtype.size(); ++s) {
    if (r.slot_ndim[s] > 16 || pos + r.slot_ndim[s] > r.shapes.size() || pos + r.slot_ndim[s] > UINT32_MAX)
      throw ProgramError("tidu program: slot shapes out of range");
    const std::int64_t n = checked::elements(r.shapes.data() + pos, r.slot_ndim[s]);
    if (n < 0)
      throw ProgramError("tidu program: slot " + std::to_string(s) +
                         " has a negative dimension or more than 2^48 elements");
    p.slots.push_back(Slot{static_cast<DType>(r.slot_dtype[s]), r.slot_ndim[s], static_cast<std::uint32_t>(pos), n, 0});
    pos += r.slot_ndim[s];
  }
  for (std::size_t i = 0; i < r.opcode.size(); ++i) {
    if (r.in_off[i + 1] < r.in_off[i] || r.attr_off[i + 1] < r.attr_off[i] || r.out_off[i + 1] <= r.out_off[i])
      throw ProgramError("tidu program: offsets decrease (or an instruction has no output)");
    if (r.out_off[i] >= r.out_slots.size()) throw ProgramError("tidu program: outputs out of range");
    p.instrs.push_back(Instr{static_cast<Op>(r.opcode[i]), r.in_off[i], r.in_off[i + 1] - r.in_off[i],
                             r.out_slots[r.out_off[i]], r.attr_off[i], r.attr_off[i + 1] - r.attr_off[i],
                             r.out_off[i], r.out_off[i + 1] - r.out_off[i]});
  }
  p.args = r.in_slots;
  p.outs = r.out_slots;
  p.attrs = r.attrs;
  p.consts = r.consts;
  p.inputs = r.inputs;
  p.outputs = r.outputs;
  p.input_names = r.input_names;
  p.output_names = r.output_names;
  finalize(p);
  return p;
}

namespace io {

// Whether d[0..n) is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF): names are handed to Python as str, and a user may print them.
inline bool utf8(const std::uint8_t* d, std::size_t n) {
  for (std::size_t i = 0; i < n;) {
    const std::uint8_t c = d[i];
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || len > n - i) return false;
    std::uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (std::size_t k = 1; k < len; ++k) {
      if ((d[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d[i + k] & 0x3F);
    }
    static const std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

inline std::uint64_t fnv1a(const std::uint8_t* d, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ d[i]) * 0x100000001b3ULL;
  return h;
}

class Writer {
 public:
  template <class T>
  void pod(T v) {
    const auto* b = reinterpret_cast<const std::uint8_t*>(&v);
    out.insert(out.end(), b, b + sizeof(T));
  }
  template <class T>
  void vec(const std::vector<T>& v) {
    pod<std::uint64_t>(v.size());
    const auto* b = reinterpret_cast<const std::uint8_t*>(v.data());
    out.insert(out.end(), b, b + v.size() * sizeof(T));
  }
  void strings(const std::vector<std::string>& v) {
    pod<std::uint64_t>(v.size());
    for (const auto& s : v) {
      pod<std::uint32_t>(static_cast<std::uint32_t>(s.size()));
      out.insert(out.end(), s.begin(), s.end());
    }
  }
  std::vector<std::uint8_t> out;
};

class Reader {
 public:
  Reader(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  template <class T>
  T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, d_ + i_, sizeof(T));
    i_ += sizeof(T);
    return v;
  }
  template <class T>
  std::vector<T> vec() {
    std::uint64_t n = pod<std::uint64_t>();
    if (n > (n_ - i_) / sizeof(T)) fail("array larger than the file");
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), d_ + i_, n * sizeof(T));
    i_ += n * sizeof(T);
    return v;
  }
  std::vector<std::string> strings() {
    std::uint64_t n = pod<std::uint64_t>();
    if (n > (n_ - i_) / 4) fail("name list larger than the file");
    std::vector<std::string> v;
    for (std::uint64_t k = 0; k < n; ++k) {
      std::uint32_t len = pod<std::uint32_t>();
      need(len);
      if (!utf8(d_ + i_, len)) fail("a name is not valid UTF-8");
      v.emplace_back(reinterpret_cast<const char*>(d_ + i_), len);
      i_ += len;
    }
    return v;
  }
  bool done() const { return i_ == n_; }
  [[noreturn]] static void fail(const std::string& m) { throw ProgramError("tidu program file: " + m); }

 private:
  void need(std::size_t k) {
    if (k > n_ - i_) fail("truncated");
  }
  const std::uint8_t* d_;
  std::size_t n_;
  std::size_t i_ = 0;
};

}  // namespace io

namespace io {

inline void write_program(Writer& pay, const ProgramArrays& r) {
  pay.vec(r.slot_dtype), pay.vec(r.slot_ndim), pay.vec(r.shapes), pay.vec(r.opcode);
  pay.vec(r.in_off), pay.vec(r.in_slots), pay.vec(r.out_off), pay.vec(r.out_slots), pay.vec(r.attr_off);
  pay.vec(r.attrs), pay.vec(r.consts), pay.vec(r.inputs), pay.vec(r.outputs);
  // A file names every input and output: a program built without names gets their positions.
  auto names = [](const std::vector<std::string>& given, std::size_t n) {
    std::vector<std::string> v = given;
    for (std::size_t i = v.size(); i < n; ++i) v.push_back(std::to_string(i));
    return v;
  };
  pay.strings(names(r.input_names, r.inputs.size())), pay.strings(names(r.output_names, r.outputs.size()));
  pay.pod<std::uint64_t>(r.subs.size());
  for (const ProgramArrays& sub : r.subs) write_program(pay, sub);
}

inline ProgramArrays read_program(Reader& r, std::uint32_t version, int depth) {
  if (depth > kMaxNesting) Reader::fail("nested programs more than 32 deep");
  ProgramArrays a;
  a.slot_dtype = r.vec<std::uint8_t>(), a.slot_ndim = r.vec<std::uint32_t>();
  a.shapes = r.vec<std::int64_t>(), a.opcode = r.vec<std::uint8_t>();
  a.in_off = r.vec<std::uint32_t>(), a.in_slots = r.vec<std::uint32_t>();
  if (version == 1) {  // one output slot per instruction
    a.out_slots = r.vec<std::uint32_t>();
    for (std::size_t i = 0; i <= a.out_slots.size(); ++i) a.out_off.push_back(static_cast<std::uint32_t>(i));
  } else {
    a.out_off = r.vec<std::uint32_t>(), a.out_slots = r.vec<std::uint32_t>();
  }
  a.attr_off = r.vec<std::uint32_t>();
  a.attrs = r.vec<std::int64_t>(), a.consts = r.vec<std::uint8_t>();
  a.inputs = r.vec<std::uint32_t>(), a.outputs = r.vec<std::uint32_t>();
  a.input_names = r.strings(), a.output_names = r.strings();
  // A saved program names every input and output (callers address inputs by these names).
  if (a.input_names.size() != a.inputs.size() || a.output_names.size() != a.outputs.size())
    Reader::fail(std::to_string(a.input_names.size()) + " input names for " + std::to_string(a.inputs.size()) +
                 " inputs, " + std::to_string(a.output_names.size()) + " output names for " +
                 std::to_string(a.outputs.size()) + " outputs");
  if (version >= 2) {
    const std::uint64_t n = r.pod<std::uint64_t>();
    for (std::uint64_t k = 0; k < n; ++k) a.subs.push_back(read_program(r, version, depth + 1));
  }
  return a;
}

}  // namespace io

// True when a program or a nested one holds a HostCallback (a call into the host that made it,
// host_callback.hpp): such a program is never written to or read from a file.
inline bool has_host_callback(const ProgramArrays& a) {
  for (std::uint8_t op : a.opcode)
    if (op == static_cast<std::uint8_t>(Op::HostCallback)) return true;
  for (const ProgramArrays& sub : a.subs)
    if (has_host_callback(sub)) return true;
  return false;
}

inline std::vector<std::uint8_t> serialize(const ProgramArrays& r) {
  if (has_host_callback(r))
    throw ProgramError("tidu program: a program holding a host callback (td.debug.print, "
                       "td.debug.callback, td.pure_callback) cannot be saved");
  io::Writer pay;
  io::write_program(pay, r);
  io::Writer f;
  f.out.insert(f.out.end(), kMagic, kMagic + 8);
  f.pod<std::uint32_t>(kFormatVersion);
  f.pod<std::uint32_t>(0);
  f.pod<std::uint64_t>(pay.out.size());
  f.pod<std::uint64_t>(io::fnv1a(pay.out.data(), pay.out.size()));
  f.out.insert(f.out.end(), pay.out.begin(), pay.out.end());
  return f.out;
}

inline ProgramArrays deserialize(const void* data, std::size_t n) {
  const auto* d = static_cast<const std::uint8_t*>(data);
  if (n < 32) io::Reader::fail("too short to be a tidu program");
  if (std::memcmp(d, kMagic, 8) != 0) io::Reader::fail("bad magic (not a tidu program)");
  io::Reader head(d + 8, 24);
  std::uint32_t version = head.pod<std::uint32_t>();
  if (version != 1 && version != kFormatVersion)
    io::Reader::fail("format version " + std::to_string(version) + ", this build reads versions 1 to " +
                     std::to_string(kFormatVersion));
  head.pod<std::uint32_t>();
  std::uint64_t size = head.pod<std::uint64_t>(), sum = head.pod<std::uint64_t>();
  if (size != n - 32) io::Reader::fail("payload size does not match the file size");
  if (io::fnv1a(d + 32, size) != sum) io::Reader::fail("checksum mismatch (corrupt file)");
  io::Reader r(d + 32, size);
  ProgramArrays a = io::read_program(r, version, 0);
  if (!r.done()) io::Reader::fail("trailing bytes after the payload");
  if (has_host_callback(a)) io::Reader::fail("a host callback instruction (a file cannot call into a host)");
  return a;
}

// Instructions of a program and its nested programs (saturating).
inline std::uint64_t count_instructions(const ProgramArrays& a) {
  std::uint64_t n = a.opcode.size();
  for (const ProgramArrays& sub : a.subs)
    if (!checked::add(n, count_instructions(sub), n)) return UINT64_MAX;
  return n;
}

// A Program from arrays, refused (ProgramError) when it exceeds the caller's limits: the
// instruction count is checked before anything is built, the workspace bytes after the plan
// (before any workspace exists).
inline Program build_program(const ProgramArrays& a, const LoadLimits& limits) {
  const std::uint64_t n = count_instructions(a);
  if (n > limits.max_instructions)
    throw ProgramError("tidu program: " + std::to_string(n) +
                       " instructions (nested programs included), more than the limit of " +
                       std::to_string(limits.max_instructions));
  Program p = build_program(a);
  if (p.workspace_bytes > limits.max_bytes)
    throw ProgramError("tidu program: an evaluation needs " + std::to_string(p.workspace_bytes) +
                       " bytes of workspace (nested programs included; this program's own plan: " +
                       std::to_string(p.arena_bytes) + "), more than the limit of " +
                       std::to_string(limits.max_bytes));
  return p;
}

inline Program Program::load_from_memory(const void* data, std::size_t n, const LoadLimits& limits) {
  return build_program(deserialize(data, n), limits);
}

// Reads a regular file only (a FIFO or device would block or never end), and no more bytes than
// the header's payload size, which must match the file's size before the payload is read.
inline Program Program::load(const std::string& path, const LoadLimits& limits) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) throw ProgramError("tidu program file: cannot open " + path);
  if (!std::filesystem::is_regular_file(st)) throw ProgramError("tidu program file: " + path + " is not a regular file");
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw ProgramError("tidu program file: cannot open " + path);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ProgramError("tidu program file: cannot open " + path);
  std::vector<std::uint8_t> bytes(32);
  f.read(reinterpret_cast<char*>(bytes.data()), 32);
  bytes.resize(static_cast<std::size_t>(f.gcount()));
  if (bytes.size() == 32 && std::memcmp(bytes.data(), kMagic, 8) == 0) {
    std::uint64_t payload = 0;
    std::memcpy(&payload, bytes.data() + 16, 8);  // little-endian, as the writer's hosts
    if (payload != size - 32)
      throw ProgramError("tidu program file: " + path + ": payload size " + std::to_string(payload) +
                         " in the header does not match the file's " + std::to_string(size - 32) +
                         " bytes after it");
    bytes.resize(32 + payload + 1);  // one more: a file grown since is refused by deserialize
    f.read(reinterpret_cast<char*>(bytes.data()) + 32, static_cast<std::streamsize>(payload + 1));
    bytes.resize(32 + static_cast<std::size_t>(f.gcount()));
  }
  return load_from_memory(bytes.data(), bytes.size(), limits);
}

}  // namespace tidu
