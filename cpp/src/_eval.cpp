// tidu._eval: the evaluator binding (few large calls: run a program on numpy buffers, GIL released).
#include <dlfcn.h>

#include <algorithm>
#include <memory>
#include <mutex>
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

template <class T>
std::vector<T> to_vec(const py::array_t<T>& in) {
  auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(in);
  if (!a) throw tidu::ProgramError("tidu program: bad array");
  return std::vector<T>(a.data(), a.data() + a.size());
}

// A Program plus a pool of Workspaces: concurrent callers each take one (allocated once).
class PyProgram {
 public:
  PyProgram(py::array_t<std::uint8_t> slot_dtype, py::array_t<std::uint32_t> slot_ndim,
            py::array_t<std::int64_t> shapes, py::array_t<std::uint8_t> opcode,
            py::array_t<std::uint32_t> in_off, py::array_t<std::uint32_t> in_slots,
            py::array_t<std::uint32_t> out_slot, py::array_t<std::uint32_t> attr_off,
            py::array_t<std::int64_t> attrs, py::array_t<std::uint8_t> consts,
            py::array_t<std::uint32_t> inputs, py::array_t<std::uint32_t> outputs,
            std::vector<std::string> input_names, std::vector<std::string> output_names) {
    a_.slot_dtype = to_vec(slot_dtype), a_.slot_ndim = to_vec(slot_ndim), a_.shapes = to_vec(shapes);
    a_.opcode = to_vec(opcode), a_.in_off = to_vec(in_off), a_.in_slots = to_vec(in_slots);
    a_.out_slot = to_vec(out_slot), a_.attr_off = to_vec(attr_off), a_.attrs = to_vec(attrs);
    a_.consts = to_vec(consts), a_.inputs = to_vec(inputs), a_.outputs = to_vec(outputs);
    a_.input_names = std::move(input_names), a_.output_names = std::move(output_names);
    p_ = tidu::build_program(a_);
    small_ = is_small(p_);
  }

  explicit PyProgram(const py::bytes& data) {
    std::string_view v = data;
    a_ = tidu::deserialize(v.data(), v.size());
    p_ = tidu::build_program(a_);
    small_ = is_small(p_);
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
      if (!py::isinstance<py::array>(inputs[i]))
        throw py::type_error("input " + std::to_string(i) + ": not a numpy array");
      auto a = py::reinterpret_borrow<py::array>(inputs[i]);
      if (!(a.flags() & py::array::c_style) || a.dtype().num() != dtype_num(s.dtype) ||
          a.ndim() != static_cast<py::ssize_t>(s.ndim) ||
          !std::equal(a.shape(), a.shape() + s.ndim, p_.shape(p_.inputs[i])))
        throw py::type_error("input " + std::to_string(i) + ": not a contiguous array of the "
                             "program's dtype and shape");
      in[i] = a.data();
    }
    py::list result;
    std::vector<void*> outs(p_.outputs.size());
    for (std::size_t i = 0; i < outs.size(); ++i) {
      py::array a;
      if (!out.is_none()) {
        a = py::reinterpret_borrow<py::array>(py::list(out)[i]);
        if (!(a.flags() & py::array::c_style) || !a.writeable() ||
            static_cast<std::uint64_t>(a.nbytes()) != p_.nbytes(p_.outputs[i]))
          throw py::value_error("out[" + std::to_string(i) + "]: not a writable contiguous buffer of " +
                                std::to_string(p_.nbytes(p_.outputs[i])) + " bytes");
      } else {
        a = new_array(p_.outputs[i], 0);
      }
      outs[i] = a.mutable_data();
      result.append(a);
    }
    auto ws = take();
    try {
      if (small_) {  // a few microseconds at most: releasing the GIL would cost more than it frees
        tidu::eval(p_, *ws, in.data(), outs.data());
      } else {
        py::gil_scoped_release nogil;
        tidu::eval(p_, *ws, in.data(), outs.data());
      }
    } catch (...) {
      give(std::move(ws));
      throw;
    }
    give(std::move(ws));
    return result;
  }

  py::list run_batch(const py::list& inputs, std::int64_t batch, int threads, bool exact) {
    std::vector<const void*> in(p_.inputs.size());
    std::vector<py::array> keep;
    for (std::size_t i = 0; i < in.size(); ++i) {
      py::array a = py::reinterpret_borrow<py::array>(inputs[i]);
      if (!(a.flags() & py::array::c_style) ||
          static_cast<std::uint64_t>(a.nbytes()) != batch * p_.nbytes(p_.inputs[i]))
        throw py::value_error("batched input " + std::to_string(i) + " has the wrong size");
      in[i] = a.data();
      keep.push_back(a);
    }
    py::list result;
    std::vector<void*> outs(p_.outputs.size());
    for (std::size_t i = 0; i < outs.size(); ++i) {
      py::array a = new_array(p_.outputs[i], batch);
      outs[i] = a.mutable_data();
      result.append(a);
    }
    {
      py::gil_scoped_release nogil;
      tidu::eval_batch(p_, batch, in.data(), outs.data(), threads, exact);
    }
    return result;
  }

 private:
  py::array new_array(std::uint32_t slot, std::int64_t batch) const {
    const tidu::Slot& s = p_.slots[slot];
    std::vector<py::ssize_t> shape;
    if (batch > 0) shape.push_back(batch);
    for (std::uint32_t k = 0; k < s.ndim; ++k) shape.push_back(p_.shape(slot)[k]);
    return py::array(py::dtype(dtype_num(s.dtype)), shape);  // by type number: no name parsing
  }

  std::unique_ptr<tidu::Workspace> take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (pool_.empty()) return std::make_unique<tidu::Workspace>(p_);
    auto ws = std::move(pool_.back());
    pool_.pop_back();
    return ws;
  }
  void give(std::unique_ptr<tidu::Workspace> ws) {
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
  std::mutex mu_;
  std::vector<std::unique_ptr<tidu::Workspace>> pool_;
};

int dtype_num(tidu::DType d) {
  static const int nums[] = {py::detail::npy_api::NPY_FLOAT_, py::detail::npy_api::NPY_DOUBLE_,
                             py::detail::npy_api::NPY_CFLOAT_, py::detail::npy_api::NPY_CDOUBLE_,
                             py::dtype::of<std::int32_t>().num(), py::dtype::of<std::int64_t>().num(),
                             py::detail::npy_api::NPY_BOOL_};
  return nums[static_cast<int>(d)];
}

void make_tables(py::module_& m) {
  py::list ops, dts;
  for (unsigned i = 0; i < static_cast<unsigned>(tidu::Op::kCount); ++i)
    ops.append(tidu::op_name(static_cast<tidu::Op>(i)));
  for (unsigned i = 0; i < static_cast<unsigned>(tidu::DType::kCount); ++i)
    dts.append(tidu::dtype_name(static_cast<tidu::DType>(i)));
  m.attr("OPCODES") = ops;
  m.attr("DTYPES") = dts;
  m.attr("COMPARE") = py::make_tuple("EQ", "NE", "LT", "LE", "GT", "GE");
}

// Points the dot_general BLAS hooks at a CBLAS shared library (scipy-openblas32's, from Python).
bool set_blas(const std::string& path, const std::string& prefix) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  auto sym = [&](const char* name) { return dlsym(lib, (prefix + name).c_str()); };
  tidu::kern::BlasHooks h{sym("cblas_sgemm"), sym("cblas_dgemm"), sym("cblas_cgemm"), sym("cblas_zgemm")};
  if (!h.sgemm || !h.dgemm || !h.cgemm || !h.zgemm) return false;
  tidu::kern::blas() = h;
  return true;
}

void make_program(py::module_& m) {
  m.def("set_blas", &set_blas, py::arg("path"), py::arg("prefix") = "",
        "Use the CBLAS gemm of a shared library for large matrix products; returns success.");
  m.def("clear_blas", [] { tidu::kern::blas() = tidu::kern::BlasHooks{}; });
  m.def("simd_variant", [] { return std::string(tidu::fm::isa_name()); },
        "Which SIMD variant the transcendental kernels use: avx512, avx2 or generic (TIDU_SIMD).");
  py::register_exception<tidu::ProgramError>(m, "ProgramError", PyExc_ValueError);
  py::class_<PyProgram>(m, "Program")
      .def(py::init<py::array_t<std::uint8_t>, py::array_t<std::uint32_t>, py::array_t<std::int64_t>,
                    py::array_t<std::uint8_t>, py::array_t<std::uint32_t>, py::array_t<std::uint32_t>,
                    py::array_t<std::uint32_t>, py::array_t<std::uint32_t>, py::array_t<std::int64_t>,
                    py::array_t<std::uint8_t>, py::array_t<std::uint32_t>, py::array_t<std::uint32_t>,
                    std::vector<std::string>, std::vector<std::string>>(),
           py::arg("slot_dtype"), py::arg("slot_ndim"), py::arg("shapes"), py::arg("opcode"),
           py::arg("in_off"), py::arg("in_slots"), py::arg("out_slot"), py::arg("attr_off"),
           py::arg("attrs"), py::arg("consts"), py::arg("inputs"), py::arg("outputs"),
           py::arg("input_names") = std::vector<std::string>(),
           py::arg("output_names") = std::vector<std::string>())
      .def(py::init<const py::bytes&>(), py::arg("data"))
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
      .def("run_batch", &PyProgram::run_batch, py::arg("inputs"), py::arg("batch"), py::arg("threads"),
           py::arg("exact") = true)
      .def_property_readonly("arena_bytes", [](const PyProgram& p) { return p.program().arena_bytes; })
      .def_property_readonly("naive_bytes", [](const PyProgram& p) { return p.program().naive_bytes; })
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
}
