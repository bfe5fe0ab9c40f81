// tensor_bind.cpp: the Tensor type itself: properties, numpy interop, operators, indexing, in-place methods,
// creation functions. Argument checking lives in the ops; this file converts and forwards.
#include <pybind11/numpy.h>

#include <cmath>
#include <cstring>

#include "common.h"
#include "dyngrad/cycles.h"
#include "dyngrad/engine.h"
#include "dyngrad/errors.h"
#include "dyngrad/grad_mode.h"
#include "dyngrad/node.h"
#include "dyngrad/random.h"

namespace dyngrad {

namespace {

using TensorClass = py::class_<TensorImpl, Tensor>;

// ---- numpy ----
const char* numpy_dtype_name(DType d) {
  switch (d) {
    case DType::Bool: return "bool";
    case DType::Int64: return "int64";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "?";
}

py::array numpy_view(const Tensor& t) {
  std::vector<py::ssize_t> shape(t->shape.begin(), t->shape.end()), strides;
  for (int64_t s : t->strides) strides.push_back(s * (int64_t)t->itemsize());
  // The array keeps the storage alive through a capsule owning a reference to it.
  auto* keep = new std::shared_ptr<Storage>(t->storage);
  py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
  py::array arr(py::dtype(numpy_dtype_name(t->dtype)), shape, strides, t->raw(), base);
  if (t->storage->read_only) arr.attr("flags").attr("writeable") = false;  // Note [Writable tensors]
  return arr;
}

// `warn`: from_numpy shares a read-only array with torch's warning; a copy (dyngrad.tensor) needs none.
Tensor from_numpy(py::array arr, bool warn = true) {
  std::string kind = py::str(arr.dtype().attr("name"));
  DType dt;
  if (kind == "float32") dt = DType::Float32;
  else if (kind == "float64") dt = DType::Float64;
  else if (kind == "int64") dt = DType::Int64;
  else if (kind == "bool") dt = DType::Bool;
  else
    throw TypeError(str_cat("from_numpy: arrays of dtype ", kind,
                            " are not supported; dyngrad has float32, float64, int64 and bool (use dyngrad.tensor to "
                            "convert)."));
  const int64_t item = (int64_t)dtype_size(dt);
  bool strides_ok = true;
  for (py::ssize_t i = 0; i < arr.ndim(); ++i)
    if (arr.strides(i) < 0 || arr.strides(i) % item != 0) strides_ok = false;
  if (!strides_ok || !arr.dtype().attr("isnative").cast<bool>())
    // asarray (not ascontiguousarray, which turns 0-d into 1-d) with a native byte order
    arr = py::module_::import("numpy").attr("asarray")(arr, arr.dtype().attr("newbyteorder")("="), "C");
  auto t = make_pooled<TensorImpl>();
  auto storage = make_pooled<Storage>();
  storage->data = const_cast<void*>(arr.data());
  if (!arr.writeable()) {  // Note [Writable tensors]: shared, as torch does (with its warning), but never written
    storage->read_only = true;
    if (warn && PyErr_WarnEx(PyExc_UserWarning,
                     "from_numpy: the given numpy array is not writable; the tensor shares its memory read-only, so "
                     "in-place operations on it will raise. Copy the array (dyngrad.tensor(array)) to get a "
                     "writable tensor.", 1) < 0)
      throw py::error_already_set();
  }
  py::object keep = arr;
  storage->owner = std::shared_ptr<void>(keep.release().ptr(), [](void* p) {
    py::gil_scoped_acquire gil;
    Py_DECREF(static_cast<PyObject*>(p));
  });
  t->storage = storage;
  t->dtype = dt;
  for (py::ssize_t i = 0; i < arr.ndim(); ++i) {
    t->shape.push_back(arr.shape(i));
    t->strides.push_back(arr.strides(i) / item);
  }
  t->numel = shape_numel(t->shape);
  int64_t span = 1;
  for (size_t i = 0; i < t->shape.size(); ++i) span += (t->shape[i] - 1) * t->strides[i];
  storage->nbytes = t->numel ? (size_t)span * item : 0;
  return t;
}

// ---- autograd-aware in-place ops ----
// self (op)= other: recorded as torch records in-place ops when grad is involved (grad_fn moves to the new node).
void inplace_apply(const Tensor& self, const Tensor& other, const char* op, Tensor (*f)(const Tensor&, const Tensor&)) {
  if (grad_enabled() && (self->requires_grad || (other && other->requires_grad))) {
    Tensor before = inplace_input(self, op, other && other->requires_grad);
    assign_inplace(self, f(before, other), op);
    return;
  }
  check_writable(self, op);
  Tensor r = f(self, other);
  DG_CHECK(r->shape == self->shape, RuntimeError, op, ": the result of shape ", shape_str(r->shape),
           " does not fit the tensor written in place, of shape ", shape_str(self->shape), ".");
  DG_CHECK(is_floating(self->dtype) || !is_floating(r->dtype), RuntimeError, op, ": the result type ",
           dtype_name(r->dtype), " can't be cast to the tensor's type ", dtype_name(self->dtype), ".");
  write_into(self, r, op);
}

py::object inplace_op(py::object self_obj, py::handle other, const char* op,
                      Tensor (*f)(const Tensor&, const Tensor&)) {
  Tensor self = self_obj.cast<Tensor>();
  Tensor o = as_operand(other, &self);
  if (!o) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  inplace_apply(self, o, op, f);
  return self_obj;
}

// ---- indexing ----
bool is_basic_item(py::handle o) {
  return o.is_none() || o.ptr() == Py_Ellipsis || PySlice_Check(o.ptr()) ||
         (PyLong_Check(o.ptr()) && !PyBool_Check(o.ptr()));
}

bool is_basic_index(py::handle idx) {
  if (PyTuple_Check(idx.ptr())) {
    for (auto item : py::reinterpret_borrow<py::tuple>(idx))
      if (!is_basic_item(item)) return false;
    return true;
  }
  return is_basic_item(idx);
}

// ints, slices, None and Ellipsis: always a view of self.
Tensor basic_index(const Tensor& self, py::handle idx) {
  py::tuple items = PyTuple_Check(idx.ptr()) ? py::reinterpret_borrow<py::tuple>(idx) : py::make_tuple(idx);
  int64_t consumed = 0;
  bool seen_ellipsis = false;
  for (auto item : items) {
    if (item.ptr() == Py_Ellipsis) {
      DG_CHECK(!seen_ellipsis, IndexError, "an index can only have a single ellipsis ('...').");
      seen_ellipsis = true;
    } else if (!item.is_none()) {
      ++consumed;
    }
  }
  DG_CHECK(consumed <= self->ndim(), IndexError, "too many indices for a tensor of dimension ", self->ndim(),
           " (shape ", shape_str(self->shape), "): got ", consumed, ".");
  Tensor r = self;
  int64_t d = 0;
  for (auto item : items) {
    if (item.is_none()) {
      r = unsqueeze(r, d);
      ++d;
    } else if (item.ptr() == Py_Ellipsis) {
      d += self->ndim() - consumed;
    } else if (PySlice_Check(item.ptr())) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(item.ptr(), &start, &stop, &step) < 0) throw py::error_already_set();
      DG_CHECK(step > 0, ValueError, "slicing with a step of ", (int64_t)step,
               ": step must be greater than zero (negative steps are not supported, as in torch).");
      PySlice_AdjustIndices(r->shape[d], &start, &stop, step);
      r = slice(r, d, start, stop, step);
      ++d;
    } else {
      int64_t i = item.cast<int64_t>();
      int64_t n = r->shape[d];
      DG_CHECK(i >= -n && i < n, IndexError, "index ", i, " is out of range for dimension ", d, " of size ", n, ".");
      r = select(r, d, i);
    }
  }
  if (r == self) r = reshape(self, self->shape);  // x[...] is still a new view
  return r;
}

Tensor index_positions(const Tensor& self, py::handle idx) {
  py::object pos = py_helper("index_positions")(make_size(self->shape), idx);
  return pos.cast<Tensor>();
}

py::object getitem(const Tensor& self, py::handle idx) {
  if (is_basic_index(idx)) return py::cast(basic_index(self, idx));
  Tensor pos = index_positions(self, idx);
  return py::cast(take(self, pos));
}

void setitem(const Tensor& self, py::handle idx, py::handle value) {
  Tensor v = as_operand_or_throw(value, &self, "__setitem__");
  bool recording = grad_enabled() && (self->requires_grad || v->requires_grad);
  if (!recording && is_basic_index(idx)) {
    Tensor window;
    {
      GradModeGuard no_grad(false);
      window = basic_index(self, idx);
    }
    broadcast_shapes(window->shape, v->shape, "__setitem__");
    write_into(window, v, "__setitem__");
    return;
  }
  Tensor pos = index_positions(self, idx);
  if (!recording) {
    check_writable(self, "__setitem__");
    write_into(self, put(self, pos, v), "__setitem__");
    return;
  }
  Tensor before = inplace_input(self, "__setitem__", v->requires_grad);
  assign_inplace(self, put(before, pos, v), "__setitem__");
}

// ---- creation ----
// A Python int as int64, or a RuntimeError naming `op` (pybind11's cast names no op).
int64_t int64_of(py::handle o, const char* op) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  DG_CHECK(!overflow, RuntimeError, op, ": ", py::str(o).cast<std::string>(), " does not fit in int64.");
  return v;
}

DType dtype_or(py::handle dtype, DType dflt) {
  auto d = parse_optional_dtype(dtype);
  return d ? *d : dflt;
}

Tensor finish(Tensor t, bool requires_grad) {
  if (requires_grad) {
    DG_CHECK(is_floating(t->dtype), RuntimeError, err_int_requires_grad(dtype_name(t->dtype)));
    t->requires_grad = true;
  }
  return t;
}

void check_device(py::handle device) {
  if (!device || device.is_none()) return;
  std::string s = py::str(device);
  DG_CHECK(s == "cpu", RuntimeError, "dyngrad runs on the CPU only; got device '", s, "'.");
}

}  // namespace

void bind_tensor(py::module_& m) {
  using py::arg;
  auto none = py::none();
  TensorClass cls(m, "Tensor", py::buffer_protocol());
  cls.def(py::init([](const Tensor& src) { return alias(src); }), arg("data"),
          "A new tensor object sharing src's memory, without history (used by subclasses such as nn.Parameter).");

  // ---- properties ----
  cls.def_property_readonly("shape", [](const Tensor& t) { return make_size(t->shape); })
      .def("size", [](const Tensor& t, py::handle dim) -> py::object {
        if (dim.is_none()) return make_size(t->shape);
        int64_t d = wrap_dim(dim.cast<int64_t>(), t->ndim(), "size");
        return py::int_(t->ndim() ? t->shape[d] : 1);
      }, arg("dim") = none)
      .def("stride", [](const Tensor& t, py::handle dim) -> py::object {
        if (dim.is_none()) return py::tuple(py::cast(t->strides));
        return py::int_(t->strides[wrap_dim(dim.cast<int64_t>(), t->ndim(), "stride")]);
      }, arg("dim") = none)
      .def("storage_offset", [](const Tensor& t) { return t->offset; })
      .def_property_readonly("dtype", [](const Tensor& t) { return dtype_object(t->dtype); })
      .def_property_readonly("device", [](const Tensor&) { return std::string("cpu"); })
      .def_property_readonly("ndim", [](const Tensor& t) { return t->ndim(); })
      .def("dim", [](const Tensor& t) { return t->ndim(); })
      .def("numel", [](const Tensor& t) { return t->numel; })
      .def("nelement", [](const Tensor& t) { return t->numel; })
      .def("element_size", [](const Tensor& t) { return t->itemsize(); })
      .def("is_contiguous", [](const Tensor& t) { return t->is_contiguous(); })
      .def("is_floating_point", [](const Tensor& t) { return is_floating(t->dtype); })
      .def_property_readonly("is_leaf", [](const Tensor& t) { return t->is_leaf(); })
      .def_property_readonly("_version", [](const Tensor& t) { return t->version(); })
      .def_property_readonly("retains_grad", [](const Tensor& t) { return t->retains_grad; })
      .def_property_readonly("grad_fn", [](const Tensor& t) { return t->grad_fn; })
      .def_property_readonly("output_nr", [](const Tensor& t) { return t->output_nr; })
      .def("data_ptr", [](const Tensor& t) { return (uintptr_t)t->raw(); })
      .def("_storage_id", [](const Tensor& t) { return (uintptr_t)t->storage.get(); })
      .def("__hash__", [](py::handle self) { return (py::ssize_t)(uintptr_t)self.ptr(); });

  cls.def_property("requires_grad", [](const Tensor& t) { return t->requires_grad; },
                   [](const Tensor& t, bool value) {
                     if (!t->is_leaf()) {
                       DG_CHECK(value, RuntimeError,
                                "you can only change requires_grad flags of leaf tensors. If you want to use a "
                                "computed tensor in a subgraph that doesn't require differentiation use "
                                "x_no_grad = x.detach().");
                       return;
                     }
                     DG_CHECK(!value || is_floating(t->dtype), RuntimeError,
                              err_int_requires_grad(dtype_name(t->dtype)));
                     t->requires_grad = value;
                   });
  cls.def("requires_grad_", [](py::object self, bool value) {
    self.attr("requires_grad") = value;
    return self;
  }, arg("requires_grad") = true);
  cls.def_property("grad", [](const Tensor& t) { return t->grad; },
                   [](const Tensor& t, std::optional<Tensor> g) {
                     if (g) {
                       DG_CHECK((*g)->shape == t->shape, RuntimeError, "assigned grad has shape ",
                                shape_str((*g)->shape), " but the tensor has shape ", shape_str(t->shape), ".");
                       DG_CHECK((*g)->dtype == t->dtype, RuntimeError, "assigned grad has dtype ",
                                dtype_name((*g)->dtype), " but the tensor has dtype ", dtype_name(t->dtype), ".");
                     }
                     t->grad = g ? *g : nullptr;
                     note_grad_assigned(t);
                   });
  cls.def_property("data", [](const Tensor& t) { return alias(t); },
                   [](const Tensor& t, const Tensor& src) {
                     t->storage = src->storage;
                     t->offset = src->offset;
                     t->shape = src->shape;
                     t->strides = src->strides;
                     t->numel = src->numel;
                     t->dtype = src->dtype;
                   });

  // ---- conversion ----
  cls.def("item", [](const Tensor& t) -> py::object {
    double v = item_double(t);
    if (t->dtype == DType::Bool) return py::bool_(v != 0);
    if (t->dtype == DType::Int64) return py::int_(item_int(t));
    return py::float_(v);
  });
  cls.def("__float__", [](const Tensor& t) { return item_double(t); });
  cls.def("__int__", [](const Tensor& t) { return item_int(t); });
  cls.def("__index__", [](const Tensor& t) {
    DG_CHECK(!is_floating(t->dtype) && t->numel == 1, TypeError,
             "only integer tensors of a single element can be converted to an index.");
    return item_int(t);
  });
  cls.def("__bool__", [](const Tensor& t) {
    DG_CHECK(t->numel == 1, RuntimeError, "the truth value of a tensor with ", t->numel,
             " elements is ambiguous (shape ", shape_str(t->shape), "); use .any() or .all().");
    return item_double(t) != 0;
  });
  cls.def("__len__", [](const Tensor& t) {
    DG_CHECK(t->ndim() > 0, TypeError, "len() of a 0-d tensor.");
    return t->shape[0];
  });
  cls.def("numpy", [](const Tensor& t, bool force) -> py::array {
    DG_CHECK(!t->requires_grad || force, RuntimeError,
             "can't call numpy() on a tensor that requires grad; use tensor.detach().numpy() instead.");
    return numpy_view(t);
  }, arg("force") = false);
  cls.def("_numpy_view", [](const Tensor& t) { return numpy_view(t); });
  cls.def_buffer([](TensorImpl& t) {
    std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end()), strides;
    for (int64_t s : t.strides) strides.push_back(s * (int64_t)t.itemsize());
    static const char* formats[] = {"?", "q", "f", "d"};
    return py::buffer_info(t.raw(), (py::ssize_t)t.itemsize(), formats[(int)t.dtype], t.ndim(), shape, strides,
                           t.storage->read_only);
  });
  cls.def("to", [](const Tensor& t, py::args args, py::kwargs kwargs) -> Tensor {
    py::handle target = args.size() ? args[0] : (kwargs.contains("dtype") ? kwargs["dtype"] : py::handle());
    if (!target) return t;
    if (is_tensor(target)) return to_dtype(t, target.cast<Tensor>()->dtype);
    if (py::isinstance<py::str>(target)) {  // a device
      check_device(target);
      if (args.size() > 1) return to_dtype(t, parse_dtype(args[1]));
      return t;
    }
    return to_dtype(t, parse_dtype(target));
  });
  cls.def("float", [](const Tensor& t) { return to_dtype(t, DType::Float32); });
  cls.def("double", [](const Tensor& t) { return to_dtype(t, DType::Float64); });
  cls.def("long", [](const Tensor& t) { return to_dtype(t, DType::Int64); });
  cls.def("int", [](const Tensor& t) { return to_dtype(t, DType::Int64); });
  cls.def("bool", [](const Tensor& t) { return to_dtype(t, DType::Bool); });
  cls.def("type_as", [](const Tensor& t, const Tensor& o) { return to_dtype(t, o->dtype); });
  cls.def("cpu", [](py::object self) { return self; });
  cls.def("clone", [](const Tensor& t) { return clone(t); });
  cls.def("contiguous", [](const Tensor& t) { return contiguous(t); });
  cls.def("detach", [](const Tensor& t) { return alias(t); });
  cls.def("detach_", [](py::object self) {
    Tensor t = self.cast<Tensor>();
    t->grad_fn.reset();
    t->requires_grad = false;
    return self;
  });
  cls.def_property_readonly("T", [](const Tensor& t) {
    Dims perm;
    for (int64_t d = t->ndim() - 1; d >= 0; --d) perm.push_back(d);
    return permute(t, perm);
  });
  cls.def_property_readonly("mT", [](const Tensor& t) { return mT(t); });

  // ---- operators ----
  using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
  auto forward_op = [](BinaryFn f) {
    return [f](const Tensor& self, py::handle other) -> py::object {
      Tensor o = as_operand(other, &self);
      if (!o) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
      return py::cast(f(self, o));
    };
  };
  auto reflected_op = [](BinaryFn f) {
    return [f](const Tensor& self, py::handle other) -> py::object {
      Tensor o = as_operand(other, &self);
      if (!o) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
      return py::cast(f(o, self));
    };
  };
  cls.def("__add__", forward_op(&add)).def("__radd__", reflected_op(&add));
  cls.def("__sub__", forward_op(&sub)).def("__rsub__", reflected_op(&sub));
  cls.def("__mul__", forward_op(&mul)).def("__rmul__", reflected_op(&mul));
  cls.def("__truediv__", forward_op(&div)).def("__rtruediv__", reflected_op(&div));
  cls.def("__matmul__", forward_op(&matmul)).def("__rmatmul__", reflected_op(&matmul));
  cls.def("__pow__", [](const Tensor& self, py::handle other) -> py::object {
    if (PyFloat_Check(other.ptr()) || (PyLong_Check(other.ptr()) && !PyBool_Check(other.ptr())))
      return py::cast(pow_scalar(self, other.cast<double>()));
    Tensor o = as_operand(other, &self);
    if (!o) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    return py::cast(pow(self, o));
  });
  cls.def("__rpow__", reflected_op(&pow));
  cls.def("__neg__", [](const Tensor& t) { return neg(t); });
  cls.def("__pos__", [](py::object self) { return self; });
  cls.def("__abs__", [](const Tensor& t) { return abs(t); });
  cls.def("__invert__", [](const Tensor& t) {
    DG_CHECK(t->dtype == DType::Bool, TypeError, "~ is only supported for bool tensors here, got ",
             dtype_name(t->dtype), ".");
    return logical_not(t);
  });
  cls.def("__and__", forward_op(&logical_and)).def("__rand__", reflected_op(&logical_and));
  cls.def("__or__", forward_op(&logical_or)).def("__ror__", reflected_op(&logical_or));
  cls.def("__xor__", forward_op(&logical_xor)).def("__rxor__", reflected_op(&logical_xor));
  const std::pair<const char*, CompareOp> cmps[] = {{"__eq__", CompareOp::Eq}, {"__ne__", CompareOp::Ne},
                                                    {"__lt__", CompareOp::Lt}, {"__le__", CompareOp::Le},
                                                    {"__gt__", CompareOp::Gt}, {"__ge__", CompareOp::Ge}};
  for (auto [name, op] : cmps) {
    cls.def(name, [op = op](const Tensor& self, py::handle other) -> py::object {
      Tensor o = as_operand(other, &self);
      if (!o) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
      return py::cast(compare(op, self, o));
    });
  }
  cls.def("__iadd__", [](py::object self, py::handle o) { return inplace_op(self, o, "add_", &add); });
  cls.def("__isub__", [](py::object self, py::handle o) { return inplace_op(self, o, "sub_", &sub); });
  cls.def("__imul__", [](py::object self, py::handle o) { return inplace_op(self, o, "mul_", &mul); });
  cls.def("__itruediv__", [](py::object self, py::handle o) { return inplace_op(self, o, "div_", &div); });

  // ---- in-place methods ----
  cls.def("add_", [](py::object self, py::handle other, py::handle alpha) {
    Tensor t = self.cast<Tensor>();
    Tensor o = as_operand_or_throw(other, &t, "add_");
    if (!alpha.is_none()) o = mul(o, as_operand_or_throw(alpha, &o, "add_"));
    inplace_apply(t, o, "add_", &add);
    return self;
  }, arg("other"), py::kw_only(), arg("alpha") = none);
  cls.def("sub_", [](py::object self, py::handle other, py::handle alpha) {
    Tensor t = self.cast<Tensor>();
    Tensor o = as_operand_or_throw(other, &t, "sub_");
    if (!alpha.is_none()) o = mul(o, as_operand_or_throw(alpha, &o, "sub_"));
    inplace_apply(t, o, "sub_", &sub);
    return self;
  }, arg("other"), py::kw_only(), arg("alpha") = none);
  cls.def("mul_", [](py::object self, py::handle other) { return inplace_op(self, other, "mul_", &mul); });
  cls.def("div_", [](py::object self, py::handle other) { return inplace_op(self, other, "div_", &div); });
  cls.def("pow_", [](py::object self, py::handle other) { return inplace_op(self, other, "pow_", &pow); });
  cls.def("clamp_", [](py::object self, std::optional<double> lo, std::optional<double> hi) {
    Tensor t = self.cast<Tensor>();
    if (grad_enabled() && t->requires_grad) {
      Tensor before = inplace_input(t, "clamp_", false);
      assign_inplace(t, clamp(before, lo, hi), "clamp_");
    } else {
      check_writable(t, "clamp_");
      Tensor r = clamp(t, lo, hi);  // (float32 for an integer tensor with a NaN, infinite or fractional bound)
      DG_CHECK(r->dtype == t->dtype, RuntimeError, "clamp_: the result type ", dtype_name(r->dtype),
               " can't be cast to the tensor's type ", dtype_name(t->dtype), ".");
      write_into(t, r, "clamp_");
    }
    return self;
  }, arg("min") = none, arg("max") = none);
  cls.def("zero_", [](py::object self) {
    zero_(self.cast<Tensor>());
    return self;
  });
  cls.def("fill_", [](py::object self, py::handle v) {
    Tensor t = self.cast<Tensor>();
    fill_(t, as_operand_or_throw(v, &t, "fill_"));  // a Python int stays exact (scalar_like_int)
    return self;
  });
  cls.def("copy_", [](py::object self, py::handle src) {
    Tensor t = self.cast<Tensor>();
    copy_(t, as_operand_or_throw(src, &t, "copy_"));
    return self;
  });
  cls.def("masked_fill_", [](py::object self, const Tensor& mask, py::handle value) {
    Tensor t = self.cast<Tensor>();
    Tensor v = as_operand_or_throw(value, &t, "masked_fill_");
    if (grad_enabled() && (t->requires_grad || v->requires_grad)) {
      Tensor before = inplace_input(t, "masked_fill_", v->requires_grad);
      assign_inplace(t, masked_fill(before, mask, v), "masked_fill_");
    } else {
      check_writable(t, "masked_fill_");
      write_into(t, masked_fill(t, mask, v), "masked_fill_");
    }
    return self;
  });
  // nn.init's fills: never recorded (torch runs them under no_grad)
  cls.def("uniform_", [](py::object self, double lo, double hi) {
    Tensor t = self.cast<Tensor>();
    check_writable(t, "uniform_");
    Tensor tmp = rand(t->shape, t->dtype == DType::Float64 ? DType::Float64 : DType::Float32);
    write_into(t, add(mul(tmp, scalar_tensor(hi - lo, tmp->dtype)), scalar_tensor(lo, tmp->dtype)), "uniform_");
    return self;
  }, arg("from") = 0.0, arg("to") = 1.0);
  cls.def("normal_", [](py::object self, double mean, double std) {
    Tensor t = self.cast<Tensor>();
    check_writable(t, "normal_");
    Tensor tmp = randn(t->shape, t->dtype == DType::Float64 ? DType::Float64 : DType::Float32);
    write_into(t, add(mul(tmp, scalar_tensor(std, tmp->dtype)), scalar_tensor(mean, tmp->dtype)), "normal_");
    return self;
  }, arg("mean") = 0.0, arg("std") = 1.0);

  // ---- indexing ----
  cls.def("__getitem__", [](const Tensor& self, py::handle idx) { return getitem(self, idx); });
  cls.def("__setitem__", [](const Tensor& self, py::handle idx, py::handle value) { setitem(self, idx, value); });

  // ---- creation ----
  m.def("from_numpy", [](py::array arr) { return from_numpy(arr); }, arg("ndarray"));
  m.def("_tensor_from_numpy_copy", [](py::array arr, bool requires_grad) {
    Tensor shared = from_numpy(arr, false);
    return finish(contiguous_copy(shared, shared->dtype), requires_grad);
  });
  auto sized = [&](const char* name, double fill, bool uninit) {
    m.def(name, [name, fill, uninit](py::args size, py::handle dtype, bool requires_grad, py::handle device) {
      check_device(device);
      Shape shape = parse_shape_args(size, name);
      DType dt = dtype_or(dtype, DType::Float32);
      return finish(uninit ? empty(shape, dt) : full(shape, fill, dt), requires_grad);
    }, arg("dtype") = none, arg("requires_grad") = false, arg("device") = none);
  };
  sized("zeros", 0.0, false);
  sized("ones", 1.0, false);
  sized("empty", 0.0, true);
  m.def("full", [](py::handle size, py::handle value, py::handle dtype, bool requires_grad, py::handle device) {
    check_device(device);
    DType dflt = PyBool_Check(value.ptr()) ? DType::Bool
                 : (PyLong_Check(value.ptr()) ? DType::Int64 : DType::Float32);
    Shape shape = parse_shape(size, "full");
    if (dflt == DType::Int64)  // exact: 2**62 + 1 stays odd
      return finish(full_int(shape, int64_of(value, "full"), dtype_or(dtype, dflt)), requires_grad);
    return finish(full(shape, value.cast<double>(), dtype_or(dtype, dflt)), requires_grad);
  }, arg("size"), arg("fill_value"), py::kw_only(), arg("dtype") = none, arg("requires_grad") = false,
     arg("device") = none);
  auto like = [&](const char* name, int kind) {
    // kind: 0 zeros, 1 ones, 2 empty, 3 rand, 4 randn
    m.def(name, [kind](const Tensor& t, py::handle dtype, bool requires_grad, py::handle device) {
      check_device(device);
      DType dt = dtype_or(dtype, t->dtype);
      Tensor r = kind == 0 ? zeros(t->shape, dt) : kind == 1 ? full(t->shape, 1, dt) : kind == 2 ? empty(t->shape, dt)
               : kind == 3 ? rand(t->shape, dt) : randn(t->shape, dt);
      return finish(r, requires_grad);
    }, arg("input"), py::kw_only(), arg("dtype") = none, arg("requires_grad") = false, arg("device") = none);
  };
  like("zeros_like", 0);
  like("ones_like", 1);
  like("empty_like", 2);
  like("rand_like", 3);
  like("randn_like", 4);
  m.def("full_like", [](const Tensor& t, py::handle value, py::handle dtype, bool requires_grad) {
    if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr()))
      return finish(full_int(t->shape, int64_of(value, "full_like"), dtype_or(dtype, t->dtype)), requires_grad);
    return finish(full(t->shape, value.cast<double>(), dtype_or(dtype, t->dtype)), requires_grad);
  }, arg("input"), arg("fill_value"), py::kw_only(), arg("dtype") = none, arg("requires_grad") = false);
  m.def("arange", [](py::handle start, py::handle end, py::handle step, py::handle dtype, bool requires_grad) {
    py::handle lo = end.is_none() ? py::handle(py::int_(0)) : start;
    py::handle hi = end.is_none() ? start : end;
    bool all_int = PyLong_Check(lo.ptr()) && PyLong_Check(hi.ptr()) && PyLong_Check(step.ptr());
    DType dt = dtype_or(dtype, all_int ? DType::Int64 : DType::Float32);
    if (all_int)  // exact: 2**62 + 1 .. 2**62 + 4 is three elements, not zero
      return finish(arange_int(int64_of(lo, "arange"), int64_of(hi, "arange"), int64_of(step, "arange"), dt),
                    requires_grad);
    return finish(arange_float(lo.cast<double>(), hi.cast<double>(), step.cast<double>(), dt), requires_grad);
  }, arg("start"), arg("end") = none, arg("step") = 1, py::kw_only(), arg("dtype") = none,
     arg("requires_grad") = false);
  m.def("linspace", [](double start, double end, int64_t steps, py::handle dtype, bool requires_grad) {
    DG_CHECK(steps >= 0, RuntimeError, "linspace: number of steps must be non-negative, got ", steps, ".");
    DType dt = dtype_or(dtype, DType::Float32);
    Tensor t = empty({steps}, dt);
    DG_DISPATCH_ALL(dt, T, {
      T* p = t->data<T>();
      for (int64_t i = 0; i < steps; ++i)
        p[i] = static_cast<T>(steps == 1 ? start : start + (end - start) * (double)i / (double)(steps - 1));
    });
    return finish(t, requires_grad);
  }, arg("start"), arg("end"), arg("steps"), py::kw_only(), arg("dtype") = none, arg("requires_grad") = false);
  m.def("eye", [](int64_t n, std::optional<int64_t> mcols, py::handle dtype, bool requires_grad) {
    int64_t mm = mcols ? *mcols : n;
    DG_CHECK(n >= 0 && mm >= 0, RuntimeError, "eye: sizes must be non-negative, got ", n, " and ", mm, ".");
    DType dt = dtype_or(dtype, DType::Float32);
    Tensor t = zeros({n, mm}, dt);
    DG_DISPATCH_ALL(dt, T, {
      for (int64_t i = 0; i < std::min(n, mm); ++i) t->data<T>()[i * mm + i] = T(1);
    });
    return finish(t, requires_grad);
  }, arg("n"), arg("m") = none, py::kw_only(), arg("dtype") = none, arg("requires_grad") = false);
  m.def("rand", [](py::args size, py::handle dtype, bool requires_grad) {
    DType dt = dtype_or(dtype, DType::Float32);
    DG_CHECK(is_floating(dt), RuntimeError, "rand: expected a floating-point dtype, got ", dtype_name(dt), ".");
    return finish(rand(parse_shape_args(size, "rand"), dt), requires_grad);
  }, arg("dtype") = none, arg("requires_grad") = false);
  m.def("randn", [](py::args size, py::handle dtype, bool requires_grad) {
    DType dt = dtype_or(dtype, DType::Float32);
    DG_CHECK(is_floating(dt), RuntimeError, "randn: expected a floating-point dtype, got ", dtype_name(dt), ".");
    return finish(randn(parse_shape_args(size, "randn"), dt), requires_grad);
  }, arg("dtype") = none, arg("requires_grad") = false);
  m.def("randint", [](py::args args, py::handle dtype) {
    // randint(high, size) or randint(low, high, size)
    DG_CHECK(args.size() == 2 || args.size() == 3, TypeError, "randint: expected (high, size) or (low, high, size).");
    int64_t low = args.size() == 3 ? args[0].cast<int64_t>() : 0;
    int64_t high = args[args.size() - 2].cast<int64_t>();
    return randint(low, high, parse_shape(args[args.size() - 1], "randint"), dtype_or(dtype, DType::Int64));
  }, arg("dtype") = none);
  m.def("randperm", [](int64_t n) {
    DG_CHECK(n >= 0, RuntimeError, "randperm: n must be non-negative, got ", n, ".");
    Tensor t = empty({n}, DType::Int64);
    int64_t* p = t->data<int64_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = i;
    for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates with our generator
      Tensor r = randint(0, i + 1, {}, DType::Int64);
      std::swap(p[i], p[*r->data<int64_t>()]);
    }
    return t;
  }, arg("n"));
}

}  // namespace dyngrad
