// fast_paths.cpp: hand-written CPython entry points for the calls a dynamic model makes most: the arithmetic
// operators (+ - * /) and the one-tensor functions and methods (dg.tanh(x), x.tanh(), ...).
//
// pybind11's general dispatcher (argument loaders, overload resolution, keyword matching) costs about as much as
// one of our 1-element ops itself. Here the operators are the type's number slots, and the functions are
// METH_FASTCALL builtins: they check that they were given exactly what they handle (tensors and Python numbers;
// one positional tensor, no keywords) and otherwise call the pybind11 binding they replace, which stays the one
// definition of the full signature and of its error messages. Results are still made by pybind11 (py::cast), so
// every Tensor object is an ordinary pybind11 instance.
#include <cxxabi.h>

#include "common.h"

namespace dyngrad {

namespace {

PyTypeObject* g_tensor_type = nullptr;

// The Tensor held by a Python Tensor (or subclass) object; nullptr for anything else.
const Tensor* tensor_of(PyObject* o) {
  if (Py_TYPE(o) != g_tensor_type && !PyType_IsSubtype(Py_TYPE(o), g_tensor_type)) return nullptr;
  auto* inst = reinterpret_cast<py::detail::instance*>(o);
  py::detail::value_and_holder vh = inst->get_value_and_holder();
  if (!vh.holder_constructed()) return nullptr;  // a subclass whose __init__ has not run
  return &vh.holder<Tensor>();
}

PyObject* to_python(Tensor&& t) { return py::cast(std::move(t)).release().ptr(); }

// C++ exceptions become the Python exceptions pybind11's translators map them to (check.h). A thread that CPython
// ends at exit unwinds by abi::__forced_unwind, which must be rethrown (Note [Daemon threads at exit], gil.h).
#define DG_PY_TRY try {
#define DG_PY_CATCH                          \
  }                                          \
  catch (py::error_already_set & e) {        \
    e.restore();                             \
    return nullptr;                          \
  }                                          \
  catch (abi::__forced_unwind&) {            \
    throw;                                   \
  }                                          \
  catch (...) {                              \
    py::detail::try_translate_exceptions();  \
    return nullptr;                          \
  }

// ---- operators: nb_add and friends get (a, b) for both a + b and the reflected b + a ----
template <Tensor (*Op)(const Tensor&, const Tensor&)>
PyObject* binary_slot(PyObject* a, PyObject* b) {
  DG_PY_TRY
  const Tensor* ta = tensor_of(a);
  const Tensor* tb = tensor_of(b);
  if (ta && tb) return to_python(Op(*ta, *tb));
  if (ta) {  // a number, a numpy array, a list... as the operand of a tensor (the same rules as the methods)
    Tensor o = as_operand(b, ta);
    if (!o) Py_RETURN_NOTIMPLEMENTED;
    return to_python(Op(*ta, o));
  }
  if (tb) {
    Tensor o = as_operand(a, tb);
    if (!o) Py_RETURN_NOTIMPLEMENTED;
    return to_python(Op(o, *tb));
  }
  Py_RETURN_NOTIMPLEMENTED;
  DG_PY_CATCH
}

// ---- one-tensor functions and methods ----
// `self` of the builtin is the pybind11 function it replaces: called for anything but one positional tensor.
template <Tensor (*Op)(const Tensor&)>
PyObject* unary_function(PyObject* slow, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs == 1 && !kwnames)
    if (const Tensor* t = tensor_of(args[0])) {
      DG_PY_TRY
      return to_python(Op(*t));
      DG_PY_CATCH
    }
  return PyObject_Vectorcall(slow, args, nargsf, kwnames);
}

using UnaryOp = Tensor (*)(const Tensor&);
struct UnaryEntry {
  const char* name;
  PyCFunction function;  // module-level: dg.NAME(x)
  PyCFunction method;    // x.NAME()
};

constexpr size_t kMaxUnary = 16;
PyObject* g_slow_methods[kMaxUnary];  // the pybind11 methods the fast ones replace (kept alive)

// As a method the tensor is `self`; the pybind11 method it replaces is g_slow_methods[Slot].
template <Tensor (*Op)(const Tensor&), size_t Slot>
PyObject* unary_method(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) == 0 && !kwnames)
    if (const Tensor* t = tensor_of(self)) {
      DG_PY_TRY
      return to_python(Op(*t));
      DG_PY_CATCH
    }
  // the slow bound call: (self, *args, **kwnames)
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  std::vector<PyObject*> full(1 + nargs + nkw);
  full[0] = self;
  for (Py_ssize_t i = 0; i < nargs + nkw; ++i) full[1 + i] = args[i];
  return PyObject_Vectorcall(g_slow_methods[Slot], full.data(), 1 + nargs, kwnames);
}

template <UnaryOp Op, size_t Slot>
UnaryEntry entry(const char* name) {
  return {name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&unary_function<Op>)),
          reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&unary_method<Op, Slot>))};
}

// PyMethodDef must outlive the functions made from it: static storage.
PyMethodDef g_function_defs[kMaxUnary];
PyMethodDef g_method_defs[kMaxUnary];
std::string g_docs[kMaxUnary], g_method_docs[kMaxUnary];

}  // namespace

void install_fast_paths(py::module_& m) {
  g_tensor_type = reinterpret_cast<PyTypeObject*>(py::type::of<TensorImpl>().ptr());

  // Operators. The pybind11 __add__/__radd__... methods stay (explicit calls, Python subclasses' slots).
  PyNumberMethods* number = g_tensor_type->tp_as_number;
  number->nb_add = &binary_slot<&add>;
  number->nb_subtract = &binary_slot<&sub>;
  number->nb_multiply = &binary_slot<&mul>;
  number->nb_true_divide = &binary_slot<&div>;
  PyType_Modified(g_tensor_type);

  const UnaryEntry entries[] = {
      entry<&exp, 0>("exp"),   entry<&log, 1>("log"),         entry<&tanh, 2>("tanh"),
      entry<&sigmoid, 3>("sigmoid"), entry<&relu, 4>("relu"), entry<&sqrt, 5>("sqrt"),
      entry<&abs, 6>("abs"),   entry<&sin, 7>("sin"),         entry<&cos, 8>("cos"),
      entry<&neg, 9>("neg"),   entry<&rsqrt, 10>("rsqrt"),    entry<&erf, 11>("erf"),
  };
  static_assert(sizeof(entries) / sizeof(entries[0]) <= kMaxUnary);
  py::dict type_dict = py::reinterpret_borrow<py::dict>(g_tensor_type->tp_dict);
  size_t i = 0;
  for (const UnaryEntry& e : entries) {
    py::object slow_function = m.attr(e.name);
    g_docs[i] = py::str(slow_function.attr("__doc__")).cast<std::string>();  // help() keeps the signature
    g_function_defs[i] = {e.name, e.function, METH_FASTCALL | METH_KEYWORDS, g_docs[i].c_str()};
    py::object fast = py::reinterpret_steal<py::object>(
        PyCFunction_NewEx(&g_function_defs[i], slow_function.ptr(), m.attr("__name__").ptr()));
    if (!fast) throw py::error_already_set();
    m.attr(e.name) = fast;
    py::object slow_method = type_dict[e.name];
    g_method_docs[i] = py::str(slow_method.attr("__doc__")).cast<std::string>();
    g_slow_methods[i] = slow_method.release().ptr();
    g_method_defs[i] = {e.name, e.method, METH_FASTCALL | METH_KEYWORDS, g_method_docs[i].c_str()};
    PyObject* descr = PyDescr_NewMethod(g_tensor_type, &g_method_defs[i]);
    if (!descr) throw py::error_already_set();
    type_dict[e.name] = py::reinterpret_steal<py::object>(descr);
    ++i;
  }
  PyType_Modified(g_tensor_type);
}

}  // namespace dyngrad
