// tidu._eval: the evaluator binding (few large calls: run a program on numpy buffers, GIL released).
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "tidu/interpreter.hpp"
#include "tidu/program.hpp"

namespace py = pybind11;

namespace {

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
            py::array_t<std::uint32_t> inputs, py::array_t<std::uint32_t> outputs) {
    auto dt = to_vec(slot_dtype);
    auto nd = to_vec(slot_ndim);
    auto op = to_vec(opcode);
    auto io = to_vec(in_off);
    auto ao = to_vec(attr_off);
    auto os = to_vec(out_slot);
    if (nd.size() != dt.size() || io.size() != op.size() + 1 || ao.size() != op.size() + 1 ||
        os.size() != op.size())
      throw tidu::ProgramError("tidu program: array lengths disagree");
    p_.shapes = to_vec(shapes);
    std::uint32_t pos = 0;
    for (std::size_t s = 0; s < dt.size(); ++s) {
      std::int64_t n = 1;
      for (std::uint32_t k = 0; k < nd[s] && pos + k < p_.shapes.size(); ++k) n *= p_.shapes[pos + k];
      p_.slots.push_back(tidu::Slot{static_cast<tidu::DType>(dt[s]), nd[s], pos, n, 0});
      pos += nd[s];
    }
    for (std::size_t i = 0; i < op.size(); ++i)
      p_.instrs.push_back(tidu::Instr{static_cast<tidu::Op>(op[i]), io[i], io[i + 1] - io[i], os[i],
                                      ao[i], ao[i + 1] - ao[i]});
    p_.args = to_vec(in_slots);
    p_.attrs = to_vec(attrs);
    p_.consts = to_vec(consts);
    p_.inputs = to_vec(inputs);
    p_.outputs = to_vec(outputs);
    p_.validate();
    p_.plan();
  }

  const tidu::Program& program() const { return p_; }

  py::list run(const py::list& inputs, py::object out) {
    if (inputs.size() != p_.inputs.size())
      throw py::value_error("expected " + std::to_string(p_.inputs.size()) + " inputs");
    std::vector<const void*> in(p_.inputs.size());
    std::vector<py::array> keep;
    keep.reserve(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      py::array a = py::reinterpret_borrow<py::array>(inputs[i]);
      if (!(a.flags() & py::array::c_style) ||
          static_cast<std::uint64_t>(a.nbytes()) != p_.nbytes(p_.inputs[i]))
        throw py::value_error("input " + std::to_string(i) + ": not a contiguous buffer of " +
                              std::to_string(p_.nbytes(p_.inputs[i])) + " bytes");
      in[i] = a.data();
      keep.push_back(a);
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
    {
      py::gil_scoped_release nogil;
      auto ws = take();
      try {
        tidu::eval(p_, *ws, in.data(), outs.data());
      } catch (...) {
        give(std::move(ws));
        throw;
      }
      give(std::move(ws));
    }
    return result;
  }

  py::list run_batch(const py::list& inputs, std::int64_t batch, int threads) {
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
      tidu::eval_batch(p_, batch, in.data(), outs.data(), threads);
    }
    return result;
  }

 private:
  py::array new_array(std::uint32_t slot, std::int64_t batch) const {
    static const char* fmt[] = {"float32", "float64", "complex64", "complex128", "int32", "int64", "bool"};
    const tidu::Slot& s = p_.slots[slot];
    std::vector<py::ssize_t> shape;
    if (batch > 0) shape.push_back(batch);
    for (std::uint32_t k = 0; k < s.ndim; ++k) shape.push_back(p_.shape(slot)[k]);
    return py::array(py::dtype(fmt[static_cast<int>(s.dtype)]), shape);
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

  tidu::Program p_;
  std::mutex mu_;
  std::vector<std::unique_ptr<tidu::Workspace>> pool_;
};

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

void make_program(py::module_& m) {
  py::register_exception<tidu::ProgramError>(m, "ProgramError", PyExc_ValueError);
  py::class_<PyProgram>(m, "Program")
      .def(py::init<py::array_t<std::uint8_t>, py::array_t<std::uint32_t>, py::array_t<std::int64_t>,
                    py::array_t<std::uint8_t>, py::array_t<std::uint32_t>, py::array_t<std::uint32_t>,
                    py::array_t<std::uint32_t>, py::array_t<std::uint32_t>, py::array_t<std::int64_t>,
                    py::array_t<std::uint8_t>, py::array_t<std::uint32_t>, py::array_t<std::uint32_t>>())
      .def("run", &PyProgram::run, py::arg("inputs"), py::arg("out") = py::none())
      .def("run_batch", &PyProgram::run_batch, py::arg("inputs"), py::arg("batch"), py::arg("threads"))
      .def_property_readonly("arena_bytes", [](const PyProgram& p) { return p.program().arena_bytes; })
      .def_property_readonly("naive_bytes", [](const PyProgram& p) { return p.program().naive_bytes; })
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
