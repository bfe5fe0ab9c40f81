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
//
// A step of a one- or two-tensor primitive of ops.def (signatures unary, unary_float, unary_backward, binary,
// binary_tensors) whose arguments are all slots calls the core function itself, as its binding would, without
// pybind11's dispatcher (about half a microsecond per call): the table comes from ops.def, so a new primitive of
// those signatures replays this way with no code of its own.
#include <algorithm>
#include <string>
#include <unordered_map>

#include "common.h"

namespace dyngrad {

namespace {

constexpr size_t kMaxStepArgs = 16;
// Note [Results compared in the loop]: a step that returns None (a setter, grad-mode switch, backward, optimiser
// step, value check) or a plain Python value (bool/int/float/str: is_grad_enabled, a guard's item()) is compared
// here instead of in Python; measured on the MLP training step, 10 of its 30 steps returned such results, which
// kept the whole program out of this loop (Variant.native: more than one step in 8 handed back).
constexpr int64_t kNone = -3, kValue = -4;

using UnaryCore = Tensor (*)(const Tensor&);
using BinaryCore = Tensor (*)(const Tensor&, const Tensor&);
struct CoreCall {
  UnaryCore unary = nullptr;
  BinaryCore binary = nullptr;
};

// _C name -> the core function its binding calls (bindings/ops_bind.cpp's DG_BIND_* for the same signatures)
const std::unordered_map<std::string, CoreCall>& core_calls() {
  static const std::unordered_map<std::string, CoreCall> table = [] {
    std::unordered_map<std::string, CoreCall> t;
#define DG_CORE_unary(name) t[#name].unary = [](const Tensor& a) { return name(a); };
#define DG_CORE_unary_float(name) DG_CORE_unary(name)
#define DG_CORE_unary_backward(name) t[#name].binary = [](const Tensor& g, const Tensor& x) { return name(g, x); };
#define DG_CORE_binary(name) t[#name].binary = [](const Tensor& a, const Tensor& b) { return name(a, b); };
#define DG_CORE_binary_tensors(name) DG_CORE_binary(name)
#define DG_CORE_reduction(name)
#define DG_CORE_custom(name)
#define DG_OP(name, display, saves, signature, hot) DG_CORE_##signature(name)
#include "dyngrad/ops.def"
#undef DG_CORE_unary
#undef DG_CORE_unary_float
#undef DG_CORE_unary_backward
#undef DG_CORE_binary
#undef DG_CORE_binary_tensors
#undef DG_CORE_reduction
#undef DG_CORE_custom
    return t;
  }();
  return table;
}

struct ReplayProgram {
  struct Step {
    py::object fn;
    std::vector<int64_t> slots;      // per argument: its slot, or -1 for the constant at the same position; for a
                                     // step Python runs (out == -2), the slots its call reads
    std::vector<py::object> consts;  // per argument: the constant (None where the argument is a slot)
    int64_t out;                     // the slot of a tensor result; -1: hand the result back to Python; -2: a step
                                     // Python runs itself (its call needs Python to build: nested arguments);
                                     // kNone / kValue: a result compared here (None; `expected`, same type and ==)
    CoreCall core;                   // set: call the core directly (every argument a slot holding a tensor)
    py::object expected;             // the recorded value of a kValue step
  };
  explicit ReplayProgram(py::handle tensor_type) : tensor_type((PyTypeObject*)tensor_type.ptr()) {}
  PyTypeObject* tensor_type;
  std::vector<Step> steps;
  // Note [Slots in C++]: a core step's result stays a C++ Tensor in `values` (no Python object, nothing for
  // Python's gc to count) unless `exported` says Python reads its slot (an output, a value guard's input, a step
  // Python runs); materialize() makes the Python object where one is needed. Cleared when a run ends.
  std::vector<Tensor> values;
  std::vector<char> exported;
  bool running = false;

  void materialize(PyObject* list, int64_t slot) {
    if (slot < 0 || slot >= (int64_t)values.size() || !values[slot]) return;
    if (PyList_GET_ITEM(list, slot) != Py_None) return;
    PyList_SetItem(list, slot, py::cast(values[slot]).release().ptr());
  }
  void materialize_all(PyObject* list) {
    for (int64_t i = 0; i < (int64_t)values.size(); ++i) materialize(list, i);
  }
  void finish() {
    values.clear();
    running = false;
  }
};

bool is_tensor(PyObject* o, PyTypeObject* type) {
  return Py_TYPE(o) == type || PyType_IsSubtype(Py_TYPE(o), type);
}

// A slot's tensor: the C++ value of Note [Slots in C++], else the Python object's; null if it holds no tensor.
const Tensor* slot_tensor(const ReplayProgram& p, PyObject* list, int64_t slot) {
  if (slot < (int64_t)p.values.size() && p.values[slot]) return &p.values[slot];
  return held_tensor(PyList_GET_ITEM(list, slot), p.tensor_type);
}

py::object run_steps(ReplayProgram& p, py::list slots, size_t start) {
  PyObject* list = slots.ptr();
  const Py_ssize_t n_slots = PyList_GET_SIZE(list);
  if (start == 0 || !p.running) {  // a new run, or one continued on a sibling's slots (Python holds them all)
    p.values.assign(n_slots, Tensor());
    if ((Py_ssize_t)p.exported.size() < n_slots) p.exported.resize(n_slots, 1);
    p.running = true;
  }
  PyObject* argv[kMaxStepArgs];
  for (size_t i = start; i < p.steps.size(); ++i) {
    const ReplayProgram::Step& s = p.steps[i];
    const size_t n = s.slots.size();
    for (size_t k = 0; k < n; ++k)
      DG_CHECK(s.slots[k] < n_slots, IndexError, "_ReplayProgram.run: slot ", s.slots[k], " of step ", i,
               " is beyond the ", n_slots, " slots.");
    if (s.out == -2) {
      for (int64_t slot : s.slots) p.materialize(list, slot);
      return py::make_tuple(i);
    }
    if (s.core.unary || s.core.binary) {
      const Tensor* a = slot_tensor(p, list, s.slots[0]);
      const Tensor* b = s.core.binary ? slot_tensor(p, list, s.slots[1]) : nullptr;
      if (a && (s.core.unary || b)) {
        Tensor r = s.core.unary ? s.core.unary(*a) : s.core.binary(*a, *b);
        if (p.exported[s.out]) PyList_SetItem(list, s.out, py::cast(r).release().ptr());
        p.values[s.out] = std::move(r);
        continue;
      }
    }
    for (size_t k = 0; k < n; ++k) {
      const int64_t slot = s.slots[k];
      if (slot >= 0) p.materialize(list, slot);
      argv[k] = slot >= 0 ? PyList_GET_ITEM(list, slot) : s.consts[k].ptr();
    }
    PyObject* result = PyObject_Vectorcall(s.fn.ptr(), argv, n, nullptr);
    if (!result) throw py::error_already_set();
    if (s.out >= 0 && s.out < n_slots && is_tensor(result, p.tensor_type)) {
      PyList_SetItem(list, s.out, result);  // steals the reference, drops the slot's previous value
      continue;
    }
    if (s.out == kNone && result == Py_None) {
      Py_DECREF(result);
      continue;
    }
    if (s.out == kValue && Py_TYPE(result) == Py_TYPE(s.expected.ptr())) {
      const int same = PyObject_RichCompareBool(result, s.expected.ptr(), Py_EQ);
      if (same < 0) {
        Py_DECREF(result);
        throw py::error_already_set();
      }
      if (same == 1) {
        Py_DECREF(result);
        continue;
      }
    }
    return py::make_tuple(i, py::reinterpret_steal<py::object>(result));
  }
  p.finish();
  return py::none();
}


// Note [Entry guards in C++]: the static mode's entry key (Note [Entry guards] in python/dyngrad/_api/capture.py)
// is built at every call. In Python (compiling.entry_key: _describe, _module_state, _optimizer_state) it cost
// 11-20 us of a 50 us MLP training step; this is the same walk in C++ and builds the same tuple, element for
// element (tests/test_compile.py compares the two), so a key recorded by either matches the other's and
// describe_key_change reads it unchanged. The reference engine has no twin: its _C lacks _entry_key and
// compiling.entry_key keeps the Python walk there.
namespace guard {

py::object id_of(PyObject* o) { return py::reinterpret_steal<py::object>(PyLong_FromVoidPtr(o)); }

bool is_module(PyObject* o) {  // compiling._is_module: type(o)._compile_keeps_original is True
  PyObject* flag = PyObject_GetAttrString((PyObject*)Py_TYPE(o), "_compile_keeps_original");
  if (!flag) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw py::error_already_set();
    PyErr_Clear();
    return false;
  }
  const bool yes = flag == Py_True;
  Py_DECREF(flag);
  return yes;
}

bool is_optimizer(PyObject* o) {  // compiling._is_optimizer
  if (PyType_Check(o)) return false;
  PyObject** dictptr = _PyObject_GetDictPtr(o);
  PyObject* d = dictptr ? *dictptr : nullptr;
  if (!d || !PyDict_CheckExact(d)) return false;
  return PyDict_GetItemString(d, "param_groups") && PyDict_GetItemString(d, "state");
}

struct Walk {
  PyTypeObject* tensor_type;
  py::list parts, tensors, states;
  std::unordered_map<PyObject*, Py_ssize_t> seen;

  void add(py::object where, py::object what) { parts.append(py::make_tuple(std::move(where), std::move(what))); }

  void describe(PyObject* o, const py::object& where) {
    py::handle h(o);
    if (Py_TYPE(o) == tensor_type || PyType_IsSubtype(Py_TYPE(o), tensor_type)) {
      const Py_ssize_t n = PyList_GET_SIZE(tensors.ptr());
      auto it = seen.emplace(o, n).first;
      if (it->second == n) tensors.append(h);
      py::object shape = py::reinterpret_steal<py::object>(PySequence_Tuple(h.attr("shape").ptr()));
      if (!shape) throw py::error_already_set();
      add(where, py::make_tuple("tensor", py::handle((PyObject*)Py_TYPE(o)), shape, h.attr("dtype"),
                                h.attr("stride")(), h.attr("requires_grad"), it->second));
    } else if (PyTuple_CheckExact(o) || PyList_CheckExact(o)) {
      py::object keep = py::reinterpret_borrow<py::object>(o);
      add(where, py::make_tuple(py::handle((PyObject*)Py_TYPE(o)), PySequence_Fast_GET_SIZE(o)));
      // as Python's enumerate: a list's length is read again at each item (a shape read may run Python)
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
        py::object item = py::reinterpret_borrow<py::object>(PySequence_Fast_GET_ITEM(o, i));
        describe(item.ptr(), py::make_tuple(where, i));
      }
    } else if (PyDict_CheckExact(o)) {
      py::object keys = py::reinterpret_steal<py::object>(PySequence_Tuple(o));
      if (!keys) throw py::error_already_set();
      add(where, py::make_tuple("dict", keys));
      py::object items = py::reinterpret_steal<py::object>(PyDict_Items(o));
      for (py::handle kv : items) describe(kv[py::int_(1)].ptr(), py::make_tuple(where, kv[py::int_(0)]));
    } else if (is_module(o) || is_optimizer(o)) {
      states.append(h);
      add(where, py::make_tuple("object", id_of(o)));
    } else if (PyObject_Hash(o) != -1) {
      add(where, py::make_tuple("value", py::handle((PyObject*)Py_TYPE(o)), h));
    } else {
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
      PyErr_Clear();
      add(where, py::make_tuple("object", py::handle((PyObject*)Py_TYPE(o)), id_of(o)));
    }
  }
};

py::object dict_of(PyObject* o) {
  PyObject** dictptr = _PyObject_GetDictPtr(o);
  DG_CHECK(dictptr && *dictptr, TypeError, "compile: the entry guard expected an object with a __dict__, got ",
           Py_TYPE(o)->tp_name, ".");
  return py::reinterpret_borrow<py::object>(*dictptr);
}

py::tuple module_state(py::handle module) {  // compiling._module_state, the same walk (a stack, last in first out)
  py::list out;
  std::vector<py::object> stack{py::reinterpret_borrow<py::object>(module)};
  std::unordered_map<PyObject*, char> seen;
  while (!stack.empty()) {
    py::object m = std::move(stack.back());
    stack.pop_back();
    if (m.is_none() || !seen.emplace(m.ptr(), 1).second) continue;
    py::dict d = dict_of(m.ptr());
    out.append(id_of(m.ptr()));
    out.append(m.attr("training"));
    for (auto kv : py::reinterpret_borrow<py::dict>(d["_parameters"])) {
      out.append(kv.first);
      out.append(id_of(kv.second.ptr()));
      out.append(kv.second.is_none() ? py::object(py::bool_(false)) : kv.second.attr("requires_grad"));
    }
    for (auto kv : py::reinterpret_borrow<py::dict>(d["_buffers"])) {
      out.append(kv.first);
      out.append(id_of(kv.second.ptr()));
    }
    out.append(py::none());
    for (auto kv : py::reinterpret_borrow<py::dict>(d["_modules"]))
      stack.push_back(py::reinterpret_borrow<py::object>(kv.second));
  }
  return py::tuple(out);
}

bool plain_hyperparameter(PyObject* v) {
  return PyLong_Check(v) || PyFloat_Check(v) || PyUnicode_Check(v) || v == Py_None || PyTuple_Check(v);
}

py::tuple optimizer_state(py::handle opt) {  // compiling._optimizer_state
  py::list groups;
  for (py::handle g : opt.attr("param_groups")) {
    py::list entries;
    for (py::handle kv : g.attr("items")()) {
      py::handle k = kv[py::int_(0)], v = kv[py::int_(1)];
      if (PyUnicode_Check(k.ptr()) && PyUnicode_CompareWithASCIIString(k.ptr(), "params") == 0) continue;
      if (plain_hyperparameter(v.ptr())) entries.append(py::make_tuple(k, v));
    }
    py::list ids;
    for (py::handle p : g[py::str("params")]) ids.append(id_of(p.ptr()));
    entries.append(py::make_tuple("params", py::tuple(ids)));
    groups.append(py::tuple(entries));
  }
  py::list state;
  for (py::handle ps : opt.attr("state").attr("items")()) {
    py::list entries;
    for (py::handle kv : ps[py::int_(1)].attr("items")()) {
      py::handle k = kv[py::int_(0)], v = kv[py::int_(1)];
      const bool number = PyLong_Check(v.ptr()) || PyFloat_Check(v.ptr());
      entries.append(py::make_tuple(k, number ? py::reinterpret_borrow<py::object>(v) : id_of(v.ptr())));
    }
    state.append(py::make_tuple(id_of(ps[py::int_(0)].ptr()), py::tuple(entries)));
  }
  return py::make_tuple(py::tuple(groups), py::tuple(state));
}

}  // namespace guard

}  // namespace

void bind_capture(py::module_& m) {
  // Note [Entry guards in C++]: (key, argument tensors) of compiling.entry_key for a static program; `middle`
  // are the parts between the arguments' and the modules' (grad mode, default dtype), `reachable` the modules and
  // optimisers compiling._reachable found.
  m.def("_entry_key", [](py::handle tensor_type, py::handle args, py::handle kwargs, py::tuple middle,
                         py::list reachable) {
    guard::Walk w;
    w.tensor_type = (PyTypeObject*)tensor_type.ptr();
    w.describe(args.ptr(), py::make_tuple("args"));
    w.describe(kwargs.ptr(), py::make_tuple("kwargs"));
    for (py::handle part : middle) w.parts.append(part);
    for (py::handle obj : reachable) w.states.append(obj);
    std::unordered_map<PyObject*, char> done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(w.states.ptr()); ++i) {
      py::handle obj = PyList_GET_ITEM(w.states.ptr(), i);
      if (!done.emplace(obj.ptr(), 1).second) continue;
      const std::string type_name = py::str(py::handle((PyObject*)Py_TYPE(obj.ptr())).attr("__name__"));
      if (guard::is_module(obj.ptr()))
        w.add(py::str("module " + type_name), guard::module_state(obj));
      else
        w.add(py::str("optimizer " + type_name), guard::optimizer_state(obj));
    }
    return py::make_tuple(py::tuple(w.parts), w.tensors);
  }, py::arg("tensor_type"), py::arg("args"), py::arg("kwargs"), py::arg("middle"), py::arg("reachable"));
  py::class_<ReplayProgram>(m, "_ReplayProgram")
      .def(py::init<py::handle>(), py::arg("tensor_type"))
      // name: the _C function's name, which picks its core call when every argument is a slot
      .def("add", [](ReplayProgram& p, py::object fn, std::vector<int64_t> slots, std::vector<py::object> consts,
                     int64_t out, const std::string& name, py::object expected) {
        // a step Python runs (out == -2) lists the slots it reads, any number; a call here has at most 16
        DG_CHECK(slots.size() == consts.size() && (slots.size() <= kMaxStepArgs || out == -2), ValueError,
                 "_ReplayProgram.add: expected as many slots as constants, at most ", kMaxStepArgs, ", got ",
                 slots.size(), " and ", consts.size(), ".");
        CoreCall core;
        auto found = core_calls().find(name);
        const bool all_slots = std::all_of(slots.begin(), slots.end(), [](int64_t s) { return s >= 0; });
        if (found != core_calls().end() && out >= 0 && all_slots &&
            slots.size() == (found->second.unary ? 1u : 2u))
          core = found->second;
        DG_CHECK(out >= kValue, ValueError, "_ReplayProgram.add: out is a slot, -1, -2, -3 (None) or -4 (a value), "
                 "got ", out, ".");
        p.steps.push_back({std::move(fn), std::move(slots), std::move(consts), out, core, std::move(expected)});
      }, py::arg("fn"), py::arg("slots"), py::arg("consts"), py::arg("out"), py::arg("name"),
         py::arg("expected") = py::none())
      // exported: per slot, whether Python reads it besides the steps (the outputs); the slots the steps outside
      // the core calls read are exported by the steps themselves (Note [Slots in C++]).
      .def("set_exported", [](ReplayProgram& p, const std::vector<bool>& flags) {
        std::vector<char> exported(flags.begin(), flags.end());
        for (const auto& s : p.steps)
          if (!(s.core.unary || s.core.binary))
            for (int64_t slot : s.slots)
              if (slot >= 0 && slot < (int64_t)exported.size()) exported[slot] = 1;
        p.exported = std::move(exported);
      }, py::arg("exported"))
      .def("__len__", [](const ReplayProgram& p) { return p.steps.size(); })
      // Runs the steps from `start` on, the slots being a Python list; returns None when every step ran, else
      // (index, result) of the first step whose result Python must look at, or (index,) for a step Python runs.
      // A step that raises ends the run.
      .def("run", [](ReplayProgram& p, py::list slots, size_t start) -> py::object {
        try {
          return run_steps(p, slots, start);
        } catch (...) {
          p.finish();
          throw;
        }
      }, py::arg("slots"), py::arg("start"))
      // Every slot a C++ value holds gets its Python object (a miss reads the served results), and the run ends.
      .def("materialize", [](ReplayProgram& p, py::list slots) {
        p.materialize_all(slots.ptr());
        p.finish();
      }, py::arg("slots"));
}

}  // namespace dyngrad
