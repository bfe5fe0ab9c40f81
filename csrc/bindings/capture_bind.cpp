// capture_bind.cpp: the replay loop of dyngrad.compile's static replay (python/dyngrad/_api/capture.py).
//
// Note [Replaying steps in C++]: a recorded variant is a list of calls of _C functions whose arguments are slots
// (earlier results, the call's arguments, externals) or constants. Run from Python, each step costs about 1 us of
// interpreter work around the call (reading the slots, building the call, storing the result). This loop makes
// the same calls with CPython's vectorcall from a fixed argument vector and stores each tensor result in its
// slot, returning to Python only at a step whose result must be compared (a value guard) or is not the tensor the
// recording expects, or at a step whose call Python must build (a tuple of tensors, keywords). It changes nothing
// the steps do; the reference engine's twin is reference/_C.py's
// _ReplayProgram, the same loop in Python.
#include "common.h"

namespace dyngrad {

namespace {

constexpr size_t kMaxStepArgs = 16;

struct ReplayProgram {
  struct Step {
    py::object fn;
    std::vector<int64_t> slots;      // per argument: its slot, or -1 for the constant at the same position
    std::vector<py::object> consts;  // per argument: the constant (None where the argument is a slot)
    int64_t out;                     // the slot of a tensor result; -1: hand the result back to Python; -2: a step
                                     // Python runs itself (its call needs Python to build: nested arguments)
  };
  explicit ReplayProgram(py::handle tensor_type) : tensor_type((PyTypeObject*)tensor_type.ptr()) {}
  PyTypeObject* tensor_type;
  std::vector<Step> steps;
};

bool is_tensor(PyObject* o, PyTypeObject* type) {
  return Py_TYPE(o) == type || PyType_IsSubtype(Py_TYPE(o), type);
}

}  // namespace

void bind_capture(py::module_& m) {
  py::class_<ReplayProgram>(m, "_ReplayProgram")
      .def(py::init<py::handle>(), py::arg("tensor_type"))
      .def("add", [](ReplayProgram& p, py::object fn, std::vector<int64_t> slots, std::vector<py::object> consts,
                     int64_t out) {
        DG_CHECK(slots.size() == consts.size() && slots.size() <= kMaxStepArgs, ValueError,
                 "_ReplayProgram.add: expected as many slots as constants, at most ", kMaxStepArgs, ", got ",
                 slots.size(), " and ", consts.size(), ".");
        p.steps.push_back({std::move(fn), std::move(slots), std::move(consts), out});
      }, py::arg("fn"), py::arg("slots"), py::arg("consts"), py::arg("out"))
      .def("__len__", [](const ReplayProgram& p) { return p.steps.size(); })
      // Runs the steps from `start` on, the slots being a Python list; returns None when every step ran, else
      // (index, result) of the first step whose result Python must look at, or (index,) for a step Python runs.
      .def("run", [](const ReplayProgram& p, py::list slots, size_t start) -> py::object {
        PyObject* list = slots.ptr();
        const Py_ssize_t n_slots = PyList_GET_SIZE(list);
        PyObject* argv[kMaxStepArgs];
        for (size_t i = start; i < p.steps.size(); ++i) {
          const ReplayProgram::Step& s = p.steps[i];
          if (s.out == -2) return py::make_tuple(i);
          const size_t n = s.slots.size();
          for (size_t k = 0; k < n; ++k) {
            const int64_t slot = s.slots[k];
            DG_CHECK(slot < n_slots, IndexError, "_ReplayProgram.run: slot ", slot, " of step ", i,
                     " is beyond the ", n_slots, " slots.");
            argv[k] = slot >= 0 ? PyList_GET_ITEM(list, slot) : s.consts[k].ptr();
          }
          PyObject* result = PyObject_Vectorcall(s.fn.ptr(), argv, n, nullptr);
          if (!result) throw py::error_already_set();
          if (s.out >= 0 && s.out < n_slots && is_tensor(result, p.tensor_type)) {
            PyList_SetItem(list, s.out, result);  // steals the reference, drops the slot's previous value
            continue;
          }
          return py::make_tuple(i, py::reinterpret_steal<py::object>(result));
        }
        return py::none();
      }, py::arg("slots"), py::arg("start"));
}

}  // namespace dyngrad
