// common.h: what the binding files share: dtype and number conversion from Python objects, and the Python helpers
// (Size, RemovableHandle) that the shared layer registers at import.
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "dyngrad/ops.h"

namespace py = pybind11;

// Shapes (DimVector) cross into Python as lists, like std::vector<int64_t>.
namespace pybind11::detail {
template <>
struct type_caster<dyngrad::DimVector> : list_caster<dyngrad::DimVector, int64_t> {};
}  // namespace pybind11::detail

namespace pybind11::detail {
// None is not a Tensor. pybind11 would pass None to a `const Tensor&` argument as a null pointer, which an op then
// dereferences; refusing it here makes every such call a TypeError. std::optional<Tensor> still maps None to nullopt.
template <>
class type_caster<std::shared_ptr<dyngrad::TensorImpl>>
    : public copyable_holder_caster<dyngrad::TensorImpl, std::shared_ptr<dyngrad::TensorImpl>> {
 public:
  bool load(handle src, bool convert) {
    if (src.is_none()) return false;
    // A Tensor made by Tensor.__new__ whose __init__ never ran holds no tensor: say so (pybind11 would report
    // "Unable to cast from non-held to held instance").
    if (isinstance<dyngrad::TensorImpl>(src)) {
      auto* inst = reinterpret_cast<instance*>(src.ptr());
      if (!inst->get_value_and_holder().holder_constructed())
        throw dyngrad::TypeError("this Tensor was never initialised (Tensor.__new__ without Tensor.__init__); make "
                                 "tensors with dyngrad.tensor(...), dyngrad.empty(...) or Tensor(...).");
    }
    return copyable_holder_caster<dyngrad::TensorImpl, std::shared_ptr<dyngrad::TensorImpl>>::load(src, convert);
  }
};
}  // namespace pybind11::detail

namespace dyngrad {

struct DTypeObject {
  DType dtype;
};

py::object dtype_object(DType d);
// dyngrad dtypes, numpy dtypes, and float/int/bool (float means float64, as in torch).
DType parse_dtype(py::handle o);
std::optional<DType> dtype_from_name(const std::string& name);
std::optional<DType> parse_optional_dtype(py::handle o);

// A Python bool/int/float as the operand of an op whose other operand is `like` (null: the number alone).
Tensor scalar_operand(py::handle o, const Tensor* like);
bool is_tensor(py::handle o);

// The Tensor a Python Tensor (or subclass, `type` being the Tensor class) object holds, without pybind11's caster;
// null for anything else and for a subclass instance whose __init__ has not run.
inline const Tensor* held_tensor(PyObject* o, PyTypeObject* type) {
  if (Py_TYPE(o) != type && !PyType_IsSubtype(Py_TYPE(o), type)) return nullptr;
  py::detail::value_and_holder vh = reinterpret_cast<py::detail::instance*>(o)->get_value_and_holder();
  return vh.holder_constructed() ? &vh.holder<Tensor>() : nullptr;
}

// Note [Public type names]: a class made by py::class_(m, "Tensor") is "dyngrad._C.Tensor" everywhere a user
// reads it: CPython's own errors ("unsupported operand type(s) for +: 'dyngrad._C.Tensor' and 'str'") print the
// type's tp_name, repr(type) and nn.Module's errors its __module__, and pybind11 writes __module__.__qualname__
// into the signatures of every function defined after the class. Called right after the class is made (before its
// methods), this gives the name users reach it by, as the reference engine's Python classes and torch have:
// tp_name `name` ("Tensor") and __module__ `module` ("dyngrad", where `dyngrad.Tensor` is this class, so pickle
// finds it there too).
void name_as_public(py::handle cls, const char* module, const char* name);

// Python helpers the shared layer registers at import (python/dyngrad/_api/__init__.py: Size, RemovableHandle).
py::object py_helper(const char* name);
py::object make_size(const Shape& shape);

// A Python function as a tensor hook (GradHook). A named type, so the cycle collector can find the Python object
// inside the std::function (Note [Cycles through C++]).
struct PyGradHook {
  py::function fn;
  Tensor operator()(const Tensor& g) const;  // autograd_bind.cpp
};
// A Python function as a node pre-hook (grad_fn.register_prehook): fn(grads tuple) -> None or a tuple.
struct PyNodePreHook {
  py::function fn;
  void operator()(std::vector<Tensor>& grads) const;  // autograd_bind.cpp
};

// A Python function as a post-accumulate-grad hook, named for the same reason.
struct PyPostAccumulateGradHook {
  py::function fn;
  void operator()(const Tensor& variable) const;  // autograd_bind.cpp
};

// cycles_bind.cpp (Note [Cycles through C++]): frees cycles through C++ objects, returns how many objects were
// garbage; maybe_...() does so once enough new suspects were noted (called at the start of backward).
int64_t collect_cycles();
void maybe_collect_cycles();

void bind_dtypes(py::module_& m);
void bind_tensor(py::module_& m);
void bind_ops(py::module_& m);
void bind_autograd(py::module_& m);
void bind_optim(py::module_& m);  // optim_bind.cpp: fused optimiser steps
void bind_capture(py::module_& m);  // capture_bind.cpp: Note [Replaying steps in C++]
void bind_capture_record(py::module_& m);  // capture_record.cpp: Note [Recording in C++]
void bind_cycles(py::module_& m);  // cycles_bind.cpp: the collector of Note [Cycles through C++]
// fast_paths.cpp (Note [Fast paths]): the hot entries of the shared API table, with their Python fallbacks.
std::vector<std::string> fast_path_names();
py::dict install_fast_paths(py::dict fallbacks, py::dict docs);
void set_autocast_active(bool active);  // Note [Fast paths under autocast]
void set_meta_class(py::handle cls);  // Note [Meta tensors] (fast_paths.cpp)
void set_capturing(bool active);       // Note [Fast paths while capturing]
// The function a recorder's _VerifiedFunction stands for (borrowed), or f itself (Note [The recorded surface stays
// in place] in python/dyngrad/_api/capture.py)
PyObject* stand_in_target(PyObject* f);
// Whether fn is _C's own function `name`, seen through a stand-in (replay_fuse.cpp): how a recorded step is known to
// call the function a fast path replaces, not a user's function of the same name.
bool is_c_function(PyObject* fn, const char* name);
void bind_verify(py::module_& m);      // Note [Verified ops in the fast paths] (fast_paths.cpp)
// Before Python reads a tensor's autograd state (grad_fn, is_leaf, requires_grad): a verified call that runs ops
// from the plan gives them their graph first (Note [Verified ops run from the plan] in fast_paths.cpp).
void verified_autograd_read();

}  // namespace dyngrad
