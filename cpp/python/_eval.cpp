// tidu._eval: the evaluator binding (few large calls: run a program on numpy buffers, GIL released).
#include <dlfcn.h>
#include <signal.h>

#include <atomic>
#include <cmath>
#include <limits>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "tidu/tidu.hpp"

namespace py = pybind11;

namespace {

int dtype_num(tidu::DType d);

// True when a numpy dtype holds tidu dtype d exactly: same kind and width, native byte order
// (so int64 made as np.longlong is accepted, and a big-endian array is not read as native).
bool same_dtype(const py::dtype& dt, tidu::DType d) {
  if (d == tidu::DType::BF16) return dt.num() == dtype_num(d);  // ml_dtypes' type: kind 'V'
  static const char kinds[] = {'f', 'f', 'c', 'c', 'i', 'i', 'b', 'u', 'i', 'i', 'u', 'u', 'u', 'f', 'V'};
  static_assert(sizeof(kinds) == static_cast<std::size_t>(tidu::DType::kCount), "one kind per dtype");
  static const char host = [] {
    const std::uint16_t one = 1;
    return *reinterpret_cast<const char*>(&one) ? '<' : '>';
  }();
  const char order = dt.byteorder();
  const bool native = order == '=' || order == '|' || order == host;
  return native && dt.kind() == kinds[static_cast<int>(d)] &&
         static_cast<std::size_t>(dt.itemsize()) == tidu::dtype_size(d);
}

// `h` as an array for slot `slot` of p (with a leading axis of `batch` when batch >= 0): a
// numpy array of exactly the slot's dtype and shape, C-contiguous (and writable for outputs).
// Raises TypeError for a non-array or wrong dtype, ValueError for a wrong shape or layout.
py::array checked_array(const tidu::Program& p, py::handle h, std::uint32_t slot, std::int64_t batch,
                        const std::string& what, bool writable) {
  if (!py::isinstance<py::array>(h))
    throw py::type_error(what + ": expected a numpy array, got " + std::string(py::str(py::type::of(h).attr("__name__"))));
  auto a = py::reinterpret_borrow<py::array>(h);
  const tidu::Slot& s = p.slots[slot];
  if (!same_dtype(a.dtype(), s.dtype))
    throw py::type_error(what + ": expected dtype " + tidu::dtype_name(s.dtype) + " in native byte order, got " +
                         std::string(py::str(a.dtype())));
  const py::ssize_t lead = batch >= 0 ? 1 : 0;
  const std::int64_t* shape = p.shape(slot);
  bool ok = a.ndim() == static_cast<py::ssize_t>(s.ndim) + lead && (batch < 0 || a.shape(0) == batch);
  for (std::uint32_t k = 0; ok && k < s.ndim; ++k) ok = a.shape(lead + k) == shape[k];
  if (!ok) {
    std::string want = batch >= 0 ? "(" + std::to_string(batch) + ", *" : "";
    want += "(";
    for (std::uint32_t k = 0; k < s.ndim; ++k) want += std::to_string(shape[k]) + (s.ndim == 1 || k + 1 < s.ndim ? "," : "");
    want += batch >= 0 ? "))" : ")";
    throw py::value_error(what + ": expected shape " + want + ", got " + std::string(py::str(a.attr("shape"))));
  }
  if (!(a.flags() & py::array::c_style)) throw py::value_error(what + ": not C-contiguous");
  if (writable && !a.writeable()) throw py::value_error(what + ": not writable");
  return a;
}

// ---- Ctrl-C during an evaluation ----
// An evaluation runs with the GIL released, so Python's SIGINT handler only marks the signal
// and the KeyboardInterrupt would wait for the evaluation to end (forever, for a while loop
// that never does).  While a long evaluation runs on the main thread, SigintWatch puts a
// handler in front of Python's: it sets g_interrupted, which the interpreter polls (cancel.hpp),
// and calls Python's handler as before.  The evaluation throws tidu::Cancelled; the binding
// takes the GIL back and runs Python's handlers (PyErr_CheckSignals), which raise
// KeyboardInterrupt (or whatever a handler of the user's raises; one that raises nothing lets
// the evaluation start again).  Only the main thread runs Python's signal handlers, so only
// its evaluations are watched; eval_batch's threads all watch the same flag.
std::atomic<bool> g_interrupted{false};
struct sigaction g_python_sigint;  // the action SigintWatch replaced, called by on_sigint
unsigned long g_main_thread = 0;   // threading.main_thread().ident

extern "C" void on_sigint(int sig, siginfo_t* info, void* ctx) {
  g_interrupted.store(true, std::memory_order_relaxed);
  const struct sigaction& py = g_python_sigint;
  if (py.sa_flags & SA_SIGINFO)
    py.sa_sigaction(sig, info, ctx);
  else if (py.sa_handler != SIG_DFL && py.sa_handler != SIG_IGN)
    py.sa_handler(sig);
}

// Installs on_sigint for its lifetime (on the main thread, when Python's handler is a function:
// SIG_DFL and SIG_IGN are left alone) and restores the action it replaced.  Two system calls
// (about a microsecond), so only evaluations that may run long are watched (PyProgram::work).
class SigintWatch {
 public:
  explicit SigintWatch(bool on) {
    if (!on) return;
    struct sigaction cur;
    if (sigaction(SIGINT, nullptr, &cur) != 0) return;
    const bool fn = (cur.sa_flags & SA_SIGINFO) ? cur.sa_sigaction != nullptr
                                                 : cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN;
    if (!fn || ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigint)) return;
    g_python_sigint = cur;
    struct sigaction mine = cur;
    mine.sa_sigaction = on_sigint;
    mine.sa_flags = (cur.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
    on_ = sigaction(SIGINT, &mine, nullptr) == 0;
  }
  ~SigintWatch() {
    if (on_) sigaction(SIGINT, &g_python_sigint, nullptr);
  }
  SigintWatch(const SigintWatch&) = delete;
  SigintWatch& operator=(const SigintWatch&) = delete;

 private:
  bool on_ = false;
};

bool on_main_thread() { return PyThread_get_thread_ident() == g_main_thread; }

// Elements an evaluation of p writes, roughly: a scan's body counts `length` times, a while
// loop (or anything past 2^62) is unbounded.  Evaluations of at least kWatchWork are watched
// for Ctrl-C; shorter ones end within about a millisecond anyway.
// Each nested program is measured once (linear in the file, whatever the nesting).
constexpr double kWatchWork = 1 << 20;
double work(const tidu::Program& p) {
  std::vector<double> sub(p.subs.size());
  double w = 0, all_subs = 0;
  for (std::size_t k = 0; k < sub.size(); ++k) all_subs += sub[k] = work(p.subs[k]);
  bool calls = false;
  for (const tidu::Instr& in : p.instrs) {
    for (std::uint32_t k = 0; k < in.n_out; ++k) w += static_cast<double>(p.slots[p.outs[in.out_begin + k]].size);
    const std::int64_t* at = p.attrs.data() + in.attr_begin;
    switch (in.op) {
      case tidu::Op::While: return std::numeric_limits<double>::infinity();
      case tidu::Op::Scan: w += static_cast<double>(at[1]) * (1 + sub[static_cast<std::size_t>(at[0])]); break;
      case tidu::Op::Cond: case tidu::Op::Checkpoint: calls = true; break;
      default: break;
    }
  }
  return calls ? w + all_subs : w;  // every branch once: an upper bound
}

// Runs f() (an evaluation that may throw tidu::Cancelled) with the GIL released, watching for
// Ctrl-C when `watch`; on a SIGINT, runs Python's handlers with the GIL held: their exception
// (KeyboardInterrupt) propagates, and when they raise none f runs again.
template <class F>
void run_interruptible(bool watch, F&& f) {
  watch = watch && on_main_thread();
  for (;;) {
    if (watch && PyErr_CheckSignals() != 0) throw py::error_already_set();  // one that came just before
    try {
      if (watch) g_interrupted.store(false, std::memory_order_relaxed);
      const SigintWatch sigint(watch);
      py::gil_scoped_release nogil;
      f(watch ? &g_interrupted : nullptr);
      return;
    } catch (const tidu::Cancelled&) {
      if (!watch) throw;
    }
  }
}

template <class T>
std::vector<T> to_vec(const py::array_t<T>& in) {
  auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(in);
  if (!a) throw tidu::ProgramError("tidu program: bad array");
  return std::vector<T>(a.data(), a.data() + a.size());
}

// ---- host callbacks (tidu/vm/host_callback.hpp): the interpreter calling Python ----
// The function installed by set_host_callback is called as fn(id, [operands]) and returns the
// outputs (a list of arrays already of the slots' dtypes and shapes: tidu.ops.callback checks
// them and names the user's function).  Its exception is kept here (with the GIL held) and
// raised again by the translator once the evaluation has unwound (any thread may have run it).
py::object* g_host_fn = nullptr;  // leaked on purpose: no Python object is freed at exit
PyObject *g_err_type = nullptr, *g_err_value = nullptr, *g_err_tb = nullptr;

void python_host_callback(std::int64_t id, const tidu::Program& p, const tidu::Instr& in, void* const* ptr) {
  py::gil_scoped_acquire gil;
  try {
    if (g_host_fn == nullptr) throw py::value_error("tidu: no host callback function installed");
    py::list args;
    for (std::uint32_t k = 0; k < in.n_in; ++k) {
      const std::uint32_t a = p.args[in.in_begin + k];
      const tidu::Slot& s = p.slots[a];
      std::vector<py::ssize_t> shape(p.shape(a), p.shape(a) + s.ndim);
      py::array arr(py::dtype(dtype_num(s.dtype)), shape);  // a copy: the callback may keep it
      if (p.nbytes(a)) std::memcpy(arr.mutable_data(), ptr[a], p.nbytes(a));
      args.append(arr);
    }
    py::object res = (*g_host_fn)(id, args);
    py::sequence outs = res.cast<py::sequence>();
    if (outs.size() != in.n_out) throw py::value_error("tidu: a host callback returned a wrong number of outputs");
    for (std::uint32_t k = 0; k < in.n_out; ++k) {
      const std::uint32_t o = p.outs[in.out_begin + k];
      const tidu::Slot& s = p.slots[o];
      auto arr = py::array::ensure(outs[k], py::array::c_style);
      if (!arr || arr.dtype().num() != dtype_num(s.dtype) || arr.ndim() != s.ndim ||
          !std::equal(p.shape(o), p.shape(o) + s.ndim, arr.shape()))
        throw py::value_error("tidu: a host callback returned an array of the wrong shape or dtype");
      if (p.nbytes(o)) std::memcpy(ptr[o], arr.data(), p.nbytes(o));
    }
  } catch (py::error_already_set& e) {
    e.restore();
    Py_XDECREF(g_err_type), Py_XDECREF(g_err_value), Py_XDECREF(g_err_tb);
    PyErr_Fetch(&g_err_type, &g_err_value, &g_err_tb);
    throw tidu::HostCallbackError("tidu: a host callback raised an exception");
  }
}

// A Program plus a pool of Workspaces: concurrent callers each take one (allocated once).
class PyProgram {
 public:
  PyProgram(py::array_t<std::uint8_t> slot_dtype, py::array_t<std::uint32_t> slot_ndim,
            py::array_t<std::int64_t> shapes, py::array_t<std::uint8_t> opcode,
            py::array_t<std::uint32_t> in_off, py::array_t<std::uint32_t> in_slots,
            py::array_t<std::uint32_t> out_off, py::array_t<std::uint32_t> out_slots,
            py::array_t<std::uint32_t> attr_off,
            py::array_t<std::int64_t> attrs, py::array_t<std::uint8_t> consts,
            py::array_t<std::uint32_t> inputs, py::array_t<std::uint32_t> outputs,
            std::vector<std::string> input_names, std::vector<std::string> output_names,
            const py::list& subs) {
    a_.slot_dtype = to_vec(slot_dtype), a_.slot_ndim = to_vec(slot_ndim), a_.shapes = to_vec(shapes);
    a_.opcode = to_vec(opcode), a_.in_off = to_vec(in_off), a_.in_slots = to_vec(in_slots);
    a_.out_off = to_vec(out_off), a_.out_slots = to_vec(out_slots);
    a_.attr_off = to_vec(attr_off), a_.attrs = to_vec(attrs);
    for (const py::handle& h : subs) a_.subs.push_back(h.cast<const PyProgram&>().a_);  // nested programs
    a_.consts = to_vec(consts), a_.inputs = to_vec(inputs), a_.outputs = to_vec(outputs);
    a_.input_names = std::move(input_names), a_.output_names = std::move(output_names);
    p_ = tidu::build_program(a_);
    small_ = is_small(p_);
    work_ = work(p_);
  }

  PyProgram(const py::bytes& data, const tidu::LoadLimits& limits) {
    std::string_view v = data;
    a_ = tidu::deserialize(v.data(), v.size());
    p_ = tidu::build_program(a_, limits);
    small_ = is_small(p_);
    work_ = work(p_);
  }

  py::bytes to_bytes() const {
    auto b = tidu::serialize(a_);
    return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
  }

  const tidu::Program& program() const { return p_; }

  py::list run(const py::list& inputs, py::object out) {
    if (inputs.size() != p_.inputs.size())
      throw py::value_error("expected " + std::to_string(p_.inputs.size()) + " inputs");
    std::vector<const void*> in(p_.inputs.size());
    std::vector<double> scalars(p_.inputs.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      PyObject* o = inputs[i].ptr();
      const tidu::Slot& s = p_.slots[p_.inputs[i]];
      if (PyFloat_CheckExact(o) && s.ndim == 0 && s.dtype == tidu::DType::F64) {
        scalars[i] = PyFloat_AS_DOUBLE(o);  // the common scalar-program call, no array needed
        in[i] = &scalars[i];
        continue;
      }
      in[i] = checked_array(p_, o, p_.inputs[i], -1, "input " + std::to_string(i), false).data();
    }
    py::list result;
    std::vector<void*> outs(p_.outputs.size());
    py::list given;
    if (!out.is_none()) {
      if (!PyList_Check(out.ptr()) && !PyTuple_Check(out.ptr()))
        throw py::type_error("out: expected a list of numpy arrays, one per output");
      given = py::list(out);
      if (given.size() != outs.size())
        throw py::value_error("out: expected " + std::to_string(outs.size()) + " arrays, got " +
                              std::to_string(given.size()));
    }
    for (std::size_t i = 0; i < outs.size(); ++i) {
      py::array a = out.is_none() ? new_array(p_.outputs[i], -1)
                                  : checked_array(p_, given[i], p_.outputs[i], -1, "out[" + std::to_string(i) + "]", true);
      outs[i] = a.mutable_data();
      result.append(a);
    }
    auto ws = take();
    try {
      if (small_) {  // a few microseconds at most: releasing the GIL would cost more than it frees
        ws->watch(nullptr);
        tidu::eval(p_, *ws, in.data(), outs.data());
      } else {
        run_interruptible(work_ >= kWatchWork, [&](const std::atomic<bool>* stop) {
          ws->watch(stop);
          tidu::eval(p_, *ws, in.data(), outs.data());
        });
      }
    } catch (...) {
      give(std::move(ws));
      throw;
    }
    give(std::move(ws));
    return result;
  }

  // shared: None, or one bool per input, true where the input has no batch axis (one copy
  // every point reads: jax.vmap's in_axes=None).
  py::list run_batch(const py::list& inputs, std::int64_t batch, int threads, bool exact,
                     const py::object& shared) {
    if (inputs.size() != p_.inputs.size())
      throw py::value_error("expected " + std::to_string(p_.inputs.size()) + " inputs, got " +
                            std::to_string(inputs.size()));
    if (batch < 0) throw py::value_error("batch must be >= 0, got " + std::to_string(batch));
    if (threads < 1) throw py::value_error("threads must be >= 1, got " + std::to_string(threads));
    for (std::uint32_t o : p_.outputs) {
      std::uint64_t total = 0;
      if (!tidu::checked::mul<std::uint64_t>(p_.nbytes(o), static_cast<std::uint64_t>(batch), total) ||
          total > tidu::checked::kMaxBytes)
        throw py::value_error("a batch of " + std::to_string(batch) + " points is too large for this program");
    }
    std::vector<std::uint8_t> one(p_.inputs.size(), 0);
    if (!shared.is_none()) {
      py::list flags = py::list(shared);
      if (flags.size() != one.size())
        throw py::value_error("shared: expected " + std::to_string(one.size()) + " flags, got " +
                              std::to_string(flags.size()));
      for (std::size_t i = 0; i < one.size(); ++i) one[i] = flags[i].cast<bool>() ? 1 : 0;
    }
    std::vector<const void*> in(p_.inputs.size());
    for (std::size_t i = 0; i < in.size(); ++i)
      in[i] = one[i] ? checked_array(p_, inputs[i], p_.inputs[i], -1, "shared input " + std::to_string(i), false).data()
                     : checked_array(p_, inputs[i], p_.inputs[i], batch, "batched input " + std::to_string(i), false).data();
    py::list result;
    std::vector<void*> outs(p_.outputs.size());
    for (std::size_t i = 0; i < outs.size(); ++i) {
      py::array a = new_array(p_.outputs[i], batch);
      outs[i] = a.mutable_data();
      result.append(a);
    }
    run_interruptible(work_ * static_cast<double>(batch) >= kWatchWork, [&](const std::atomic<bool>* stop) {
      tidu::eval_batch(p_, batch, in.data(), outs.data(), threads, exact, stop, one.data());
    });
    return result;
  }

 private:
  // A fresh output array for slot (with a leading axis of `batch` when batch >= 0: an empty
  // batch gives a (0, ...) array, never the unbatched shape).
  py::array new_array(std::uint32_t slot, std::int64_t batch) const {
    const tidu::Slot& s = p_.slots[slot];
    std::vector<py::ssize_t> shape;
    if (batch >= 0) shape.push_back(batch);
    for (std::uint32_t k = 0; k < s.ndim; ++k) shape.push_back(p_.shape(slot)[k]);
    return py::array(py::dtype(dtype_num(s.dtype)), shape);  // by type number: no name parsing
  }

  // A workspace for one call, its arena taken back from the process's ArenaPool (an idle
  // program lends it there: programs kept in the cache hold no arena between calls, and a new
  // one's first call reuses theirs instead of faulting in fresh pages).
  std::unique_ptr<tidu::Workspace> take() {
    std::unique_ptr<tidu::Workspace> ws;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!pool_.empty()) {
        ws = std::move(pool_.back());
        pool_.pop_back();
      }
    }
    if (!ws) return std::make_unique<tidu::Workspace>(p_);
    ws->reclaim(p_);
    return ws;
  }
  void give(std::unique_ptr<tidu::Workspace> ws) {
    ws->lend();
    std::lock_guard<std::mutex> lock(mu_);
    pool_.push_back(std::move(ws));
  }

  // All-scalar programs of up to 512 instructions run with the GIL held (under ~3 us).
  static bool is_small(const tidu::Program& p) {
    return !p.scalar_code.empty() && p.scalar_code.size() <= 512;
  }

  tidu::ProgramArrays a_;
  tidu::Program p_;
  bool small_ = false;
  double work_ = 0;  // work(p_): whether an evaluation is watched for Ctrl-C
  std::mutex mu_;
  std::vector<std::unique_ptr<tidu::Workspace>> pool_;
};

int dtype_num(tidu::DType d) {
  static const int nums[] = {py::detail::npy_api::NPY_FLOAT_, py::detail::npy_api::NPY_DOUBLE_,
                             py::detail::npy_api::NPY_CFLOAT_, py::detail::npy_api::NPY_CDOUBLE_,
                             py::dtype::of<std::int32_t>().num(), py::dtype::of<std::int64_t>().num(),
                             py::detail::npy_api::NPY_BOOL_, py::dtype::of<std::uint32_t>().num(),
                             py::dtype::of<std::int8_t>().num(), py::dtype::of<std::int16_t>().num(),
                             py::dtype::of<std::uint8_t>().num(), py::dtype::of<std::uint16_t>().num(),
                             py::dtype::of<std::uint64_t>().num(), 23 /* NPY_HALF */, -1};
  if (d == tidu::DType::BF16) {  // numpy numbers ml_dtypes' bfloat16 when ml_dtypes registers it
    static const int bf16 = py::dtype::from_args(py::module_::import("ml_dtypes").attr("bfloat16")).num();
    return bf16;
  }
  static_assert(sizeof(nums) / sizeof(nums[0]) == static_cast<std::size_t>(tidu::DType::kCount),
                "one numpy type number per dtype");
  return nums[static_cast<int>(d)];
}

void make_tables(py::module_& m) {
  py::list ops, dts;
  py::dict sigs;  // name -> attribute signature (TIDU_OPCODES' third column, opcodes.hpp)
  for (unsigned i = 0; i < static_cast<unsigned>(tidu::Op::kCount); ++i) {
    const auto op = static_cast<tidu::Op>(i);
    ops.append(tidu::op_name(op));
    sigs[tidu::op_name(op)] = tidu::op_signature(op);
  }
  for (unsigned i = 0; i < static_cast<unsigned>(tidu::DType::kCount); ++i)
    dts.append(tidu::dtype_name(static_cast<tidu::DType>(i)));
  m.attr("OPCODES") = ops;
  m.attr("OPCODE_SIGNATURES") = sigs;
  m.attr("DTYPES") = dts;
  m.attr("COMPARE") = py::make_tuple("EQ", "NE", "LT", "LE", "GT", "GE");
}

// Points the dot_general BLAS hooks at a CBLAS shared library (scipy-openblas32's, from Python).
bool set_blas(const std::string& path, const std::string& prefix) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  auto sym = [&](const char* name) { return dlsym(lib, (prefix + name).c_str()); };
  tidu::kern::BlasHooks h{sym("cblas_sgemm"), sym("cblas_dgemm"), sym("cblas_cgemm"), sym("cblas_zgemm"),
                          sym("cblas_sgemv"), sym("cblas_dgemv"), sym("cblas_ssyrk"), sym("cblas_dsyrk")};
  if (!h.sgemm || !h.dgemm || !h.cgemm || !h.zgemm) return false;
  tidu::kern::blas() = h;
  // Triangular solves and Cholesky (linalg.hpp): CBLAS ?trsm and LAPACK ?potrf_ where present.
  tidu::kern::lapack() = tidu::kern::LapackHooks{sym("cblas_strsm"), sym("cblas_dtrsm"), sym("cblas_ctrsm"),
                                                 sym("cblas_ztrsm"), sym("spotrf_"), sym("dpotrf_"),
                                                 sym("cpotrf_"), sym("zpotrf_")};
  // Factorisations (factor.hpp): LAPACK ?getrf_, ?syevd_/?heevd_, ?geqrf_, ?orgqr_/?ungqr_, ?gesdd_, ?geev_, ?gees_, ?gehrd_, ?orghr_/?unghr_.
  auto four = [&](const char* s, const char* d, const char* c, const char* z, void* (&out)[4]) {
    out[0] = sym(s), out[1] = sym(d), out[2] = sym(c), out[3] = sym(z);
  };
  tidu::kern::FactorHooks& f = tidu::kern::factor_hooks();
  four("sgetrf_", "dgetrf_", "cgetrf_", "zgetrf_", f.getrf);
  four("ssyevd_", "dsyevd_", "cheevd_", "zheevd_", f.syevd);
  four("sgeqrf_", "dgeqrf_", "cgeqrf_", "zgeqrf_", f.geqrf);
  four("sorgqr_", "dorgqr_", "cungqr_", "zungqr_", f.orgqr);
  four("sgesdd_", "dgesdd_", "cgesdd_", "zgesdd_", f.gesdd);
  four("sgeev_", "dgeev_", "cgeev_", "zgeev_", f.geev);
  four("sgees_", "dgees_", "cgees_", "zgees_", f.gees);
  four("sgehrd_", "dgehrd_", "cgehrd_", "zgehrd_", f.gehrd);
  four("sorghr_", "dorghr_", "cunghr_", "zunghr_", f.orghr);
  // tidu splits large products over its own pool (vm/parallel.hpp): the BLAS runs single-threaded,
  // so its threads never compete with tidu's or spin on a busy core.  This library copy is
  // tidu's own (numpy and scipy bundle theirs), so no other user's setting changes.
  if (auto set_threads = reinterpret_cast<void (*)(int)>(sym("openblas_set_num_threads"))) set_threads(1);
  return true;
}

void make_program(py::module_& m) {
  m.def("set_blas", &set_blas, py::arg("path"), py::arg("prefix") = "",
        "Use the CBLAS gemm of a shared library for large matrix products; returns success.");
  m.def("clear_blas", [] {
    tidu::kern::blas() = tidu::kern::BlasHooks{};
    tidu::kern::lapack() = tidu::kern::LapackHooks{};
    tidu::kern::factor_hooks() = tidu::kern::FactorHooks{};
  });
  m.def("arena_pool_bytes", [] { return tidu::ArenaPool::get().held_bytes(); },
        "Bytes of arena memory kept for the next workspaces (interpreter.hpp, ArenaPool): the\n"
        "arenas of freed programs and of programs between calls.");
  m.def("release_arena_pool", [] { tidu::ArenaPool::get().clear(); },
        "Free the arena memory kept for the next workspaces (idle programs take new memory).");
  m.def("set_num_threads", [](int n) { tidu::set_num_threads(n); }, py::arg("n"),
        "Threads one evaluation loop may use, the caller's included (n <= 0: the default).");
  m.def("get_num_threads", [] { return tidu::num_threads(); },
        "Threads one evaluation loop may use, the caller's included.");
  m.def("set_profiling", [](bool on) { tidu::set_profiling(on); }, py::arg("on"),
        "Start (clearing earlier figures) or stop the per-instruction profile of every "
        "evaluation: Program.profile() reads it.");
  m.def("pool_workers", [] { return tidu::detail::ThreadPool::get().workers(); },
        "Worker threads the pool has started (started on demand and kept: vm/parallel.hpp).");
  m.def("pool_stats", [] {
    const auto s = tidu::detail::ThreadPool::get().stats();
    py::dict d;
    d["posted"] = s.posted, d["inline"] = s.inline_loops, d["stalls"] = s.stalls, d["backoff_ns"] = s.backoff_ns;
    d["loop_ns"] = s.loop_ns, d["wait_ns"] = s.wait_ns;
    return d;
  }, "Counters of the thread pool: loops posted to it, loops run on the caller alone, stalls seen, "
     "the current back-off, and the time posted loops took and the caller waited in them, in ns "
     "(vm/parallel.hpp).");
  m.def("simd_variant", [] { return std::string(tidu::fm::isa_name()); },
        "Which SIMD variant the transcendental kernels use: avx512, avx2 or generic (TIDU_SIMD).");
  m.def("fft_variant", [] { return std::string(tidu::kern::fft_variant()); },
        "Which build of pocketfft the FFT kernel uses: avx2 or generic (TIDU_SIMD; fft.hpp).");
  py::register_exception<tidu::ProgramError>(m, "ProgramError", PyExc_ValueError);
  m.def("set_host_callback", [](py::object fn) {
    if (g_host_fn == nullptr) g_host_fn = new py::object();
    *g_host_fn = std::move(fn);
    tidu::set_host_callback(&python_host_callback);
  }, "Install fn(id, [operand arrays]) -> [output arrays], run by HostCallback instructions.");
  py::register_exception_translator([](std::exception_ptr ep) {
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const tidu::HostCallbackError& e) {
      if (g_err_type != nullptr) {  // the callback's own exception, as it was raised
        PyErr_Restore(g_err_type, g_err_value, g_err_tb);
        g_err_type = g_err_value = g_err_tb = nullptr;
      } else {
        PyErr_SetString(PyExc_RuntimeError, e.what());
      }
    }
  });
  py::class_<PyProgram>(m, "Program")
      .def(py::init<py::array_t<std::uint8_t>, py::array_t<std::uint32_t>, py::array_t<std::int64_t>,
                    py::array_t<std::uint8_t>, py::array_t<std::uint32_t>, py::array_t<std::uint32_t>,
                    py::array_t<std::uint32_t>, py::array_t<std::uint32_t>, py::array_t<std::uint32_t>,
                    py::array_t<std::int64_t>, py::array_t<std::uint8_t>, py::array_t<std::uint32_t>,
                    py::array_t<std::uint32_t>, std::vector<std::string>, std::vector<std::string>,
                    const py::list&>(),
           py::arg("slot_dtype"), py::arg("slot_ndim"), py::arg("shapes"), py::arg("opcode"),
           py::arg("in_off"), py::arg("in_slots"), py::arg("out_off"), py::arg("out_slots"),
           py::arg("attr_off"), py::arg("attrs"), py::arg("consts"), py::arg("inputs"),
           py::arg("outputs"), py::arg("input_names") = std::vector<std::string>(),
           py::arg("output_names") = std::vector<std::string>(), py::arg("subs") = py::list())
      .def(py::init([](const py::bytes& data, std::optional<std::uint64_t> max_bytes,
                       std::optional<std::uint64_t> max_instructions) {
             tidu::LoadLimits lim;
             if (max_bytes) lim.max_bytes = *max_bytes;
             if (max_instructions) lim.max_instructions = *max_instructions;
             return std::make_unique<PyProgram>(data, lim);
           }),
           py::arg("data"), py::arg("max_bytes") = py::none(), py::arg("max_instructions") = py::none())
      .def("to_bytes", &PyProgram::to_bytes)
      .def_property_readonly("input_names", [](const PyProgram& p) { return p.program().input_names; })
      .def_property_readonly("input_shapes", [](const PyProgram& p) {
        std::vector<std::vector<std::int64_t>> v;
        for (std::size_t i = 0; i < p.program().n_inputs(); ++i) v.push_back(p.program().input_shape(i));
        return v;
      })
      .def_property_readonly("input_dtypes", [](const PyProgram& p) {
        std::vector<std::string> v;
        for (std::size_t i = 0; i < p.program().n_inputs(); ++i) v.push_back(tidu::dtype_name(p.program().input_dtype(i)));
        return v;
      })
      .def("run", &PyProgram::run, py::arg("inputs"), py::arg("out") = py::none())
      .def("profile", [](const PyProgram& self, const std::vector<std::size_t>& sub) {
        // (opcode name, output shape, seconds, runs, chain end or 0) per instruction, in the
        // order this program runs them (after scheduling); empty when it ran unprofiled.
        // `sub` walks into nested programs (a loop body, a branch): indices into each one's subs.
        const tidu::Program* pp = &self.program();
        for (std::size_t k : sub) {
          if (k >= pp->subs.size()) throw py::index_error("profile: no nested program " + std::to_string(k));
          pp = &pp->subs[k];
        }
        const tidu::Program& p = *pp;
        auto t = tidu::Profiler::get().take(p);
        py::list out;
        for (std::size_t i = 0; i < t.size(); ++i) {
          const auto& ins = p.instrs[i];
          const auto& s = p.slots[ins.out];
          std::vector<std::int64_t> shape(p.shapes.begin() + s.shape_begin,
                                          p.shapes.begin() + s.shape_begin + s.ndim);
          out.append(py::make_tuple(std::string(tidu::op_name(ins.op)), shape, t[i].first, t[i].second,
                                    p.chain_end.empty() ? 0u : p.chain_end[i]));
        }
        return out;
      }, py::arg("sub") = std::vector<std::size_t>{},
         "The per-instruction profile (tidu._native._eval.set_profiling) of this program, or of "
         "the nested program reached by the indices `sub` (Program::subs, level by level).")
      .def("n_subs", [](const PyProgram& self, const std::vector<std::size_t>& sub) {
        const tidu::Program* pp = &self.program();
        for (std::size_t k : sub) {
          if (k >= pp->subs.size()) throw py::index_error("n_subs: no nested program " + std::to_string(k));
          pp = &pp->subs[k];
        }
        return pp->subs.size();
      }, py::arg("sub") = std::vector<std::size_t>{}, "How many nested programs the program reached by `sub` holds.")
      .def("run_batch", &PyProgram::run_batch, py::arg("inputs"), py::arg("batch"), py::arg("threads"),
           py::arg("exact") = true, py::arg("shared") = py::none())
      .def_property_readonly("arena_bytes", [](const PyProgram& p) { return p.program().arena_bytes; })
      .def_property_readonly("naive_bytes", [](const PyProgram& p) { return p.program().naive_bytes; })
      .def_property_readonly(
          "workspace_bytes", [](const PyProgram& p) { return p.program().workspace_bytes; },
          "Bytes an evaluation's workspace allocates: this program's arena, loop carry buffers and "
          "tables, and the workspaces of its nested programs (loop bodies, branches), recursively.")
      .def_property_readonly(
          "instructions", [](const PyProgram& p) { return p.program().total_instructions; },
          "Instructions, nested programs' included.")
      .def_property_readonly(
          "scalar_runs",
          [](const PyProgram& p) {
            std::vector<std::pair<std::string, std::uint32_t>> r;
            const auto& code = p.program().scalar_code;
            for (std::size_t i = 0; i < code.size(); i += code[i].run)
              r.emplace_back(tidu::op_name(code[i].op), code[i].run);
            return r;
          },
          "The all-scalar fast path's schedule as (opcode, run length) pairs; empty when the "
          "program does not take that path.")
      .def_property_readonly(
          "array_chains",
          [](const PyProgram& p) {
            const auto& prog = p.program();
            py::list r;
            for (std::size_t i = 0; i < prog.instrs.size(); ++i) {
              const std::size_t end = prog.chain_end.empty() || !prog.chain_end[i] ? i + 1 : prog.chain_end[i];
              if (end - i < 2) continue;
              py::list ops;
              for (std::size_t j = i; j < end; ++j) ops.append(tidu::op_name(prog.instrs[j].op));
              r.append(py::make_tuple(prog.slots[prog.instrs[i].out].size, ops));
              i = end - 1;
            }
            return r;
          },
          "The array interpreter's blocked elementwise chains in evaluation order, as (element "
          "count, [opcode names]) pairs (docs/evaluator.md).")
      .def_property_readonly(
          "fused_pad_adds",
          [](const PyProgram& p) {
            std::size_t n = 0;
            for (std::int32_t j : p.program().fused_pad) n += j >= 0;
            return n;
          },
          "How many adds accumulate a padded operand in place (a cotangent of a slice added into "
          "its window of the accumulator: docs/evaluator.md).")
      .def_property_readonly(
          "scalar_jit_bytes",
          [](const PyProgram& p) -> std::size_t {
            return p.program().scalar_jit ? p.program().scalar_jit->code_bytes() : 0;
          },
          "Bytes of machine code the scalar fast path was compiled to (0: interpreted; "
          "TIDU_JIT=0 in the environment turns the JIT off).")
      .def_property_readonly("offsets", [](const PyProgram& p) {
        std::vector<std::uint64_t> o;
        for (const auto& s : p.program().slots) o.push_back(s.offset);
        return o;
      });
}

}  // namespace

PYBIND11_MODULE(_eval, m) {
  m.doc() = "tidu's C++ interpreter";
  make_tables(m);
  make_program(m);
  g_main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  py::register_exception<tidu::Cancelled>(m, "Cancelled", PyExc_RuntimeError);
}
