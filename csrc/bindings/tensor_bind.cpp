// tensor_bind.cpp: the core of the Tensor type (memory, shape, dtype, autograd fields, numpy interop) and the
// tensor constructors that need the engine (from_numpy, copy_from_numpy). Argument checking lives in the ops.
#include <pybind11/numpy.h>

#include <cmath>
#include <cstring>

#include "common.h"
#include "dyngrad/cycles.h"
#include "dyngrad/engine.h"
#include "dyngrad/errors.h"
#include "dyngrad/grad_mode.h"
#include "dyngrad/kernels/gil.h"
#include "dyngrad/node.h"
#include "dyngrad/random.h"

namespace dyngrad {

namespace {

using TensorClass = py::class_<TensorImpl, Tensor>;

// Same text in python/dyngrad/reference/tensor.py.
constexpr const char* kNonLeafGradWarning =
    "grad: reading .grad of a non-leaf tensor (one with a grad_fn): backward() does not fill it in. Call "
    ".retain_grad() on it before backward() to keep its gradient, or read .grad of the leaf tensors.";

// A UserWarning at the user's line: python/dyngrad/_user_frame.py walks past dyngrad's Python frames (the shared
// layer's wrappers sit between the user and these bindings), Note [Warnings at the user's line]. Throws if the
// warning was turned into an error (-W error).
void warn_at_user_line(const char* message) {
  py::module_::import("dyngrad._user_frame").attr("warn")(message, py::handle(PyExc_UserWarning));
}

// ---- numpy ----
// numpy has every dtype but bfloat16 under the same name; bfloat16 tensors have no numpy view (torch: TypeError).
const char* numpy_dtype_name(DType d) {
  DG_CHECK(d != DType::BFloat16, TypeError, "numpy: bfloat16 has no numpy dtype; convert with .float() first.");
  return dtype_name(d);
}

py::array numpy_view(const Tensor& t) {
  DG_CHECK(t->ndim() <= 64, RuntimeError, "numpy: a tensor of ", t->ndim(),
           " dimensions has no numpy view (numpy allows at most 64).");
  std::vector<py::ssize_t> shape(t->shape.begin(), t->shape.end()), strides;
  for (int64_t s : t->strides) strides.push_back(s * (int64_t)t->itemsize());
  // The array keeps the storage alive through a capsule owning a reference to it.
  auto* keep = new std::shared_ptr<Storage>(t->storage);
  py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
  py::array arr(py::dtype(numpy_dtype_name(t->dtype)), shape, strides, t->raw(), base);
  if (t->storage->read_only) arr.attr("flags").attr("writeable") = false;  // Note [Writable tensors]
  return arr;
}

// The dyngrad dtype of a numpy dtype from its kind and item size, read from numpy's C struct: dtype.name is a
// Python-level property that cost ~5 us of every from_numpy (a sixth of a numpy-computed op such as tan).
static std::optional<DType> dtype_of_numpy(const py::dtype& d) {
  const py::ssize_t n = d.itemsize();
  switch (d.kind()) {
    case 'b': if (n == 1) return DType::Bool; break;
    case 'u': if (n == 1) return DType::UInt8; break;
    case 'i':
      if (n == 1) return DType::Int8;
      if (n == 2) return DType::Int16;
      if (n == 4) return DType::Int32;
      if (n == 8) return DType::Int64;
      break;
    case 'f':
      if (n == 2) return DType::Float16;
      if (n == 4) return DType::Float32;
      if (n == 8) return DType::Float64;
      break;
    case 'c':
      if (n == 8) return DType::Complex64;
      if (n == 16) return DType::Complex128;
      break;
  }
  return std::nullopt;
}

// `warn`: from_numpy shares a read-only array with torch's warning; a copy (dyngrad.tensor) needs none.
Tensor from_numpy(py::array arr, bool warn = true) {
  std::optional<DType> found = dtype_of_numpy(arr.dtype());
  if (!found)
    throw TypeError(str_cat("from_numpy: arrays of dtype ", py::str(arr.dtype().attr("name")).cast<std::string>(),
                            " are not supported; dyngrad has float64, float32, float16, int64, int32, int16, int8, "
                            "uint8, bool, complex128 and complex64 (use dyngrad.tensor to convert)."));
  const DType dt = *found;
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
    if (warn)
      warn_at_user_line(
          "from_numpy: the given numpy array is not writable; the tensor shares its memory read-only, so in-place "
          "operations on it will raise. Copy the array (dyngrad.tensor(array)) to get a writable tensor.");
  }
  py::object keep = arr;
  storage->owner = std::shared_ptr<void>(keep.release().ptr(), [](void* p) {
    if (!may_take_gil()) return;  // leaked at exit (kernels/gil.h)
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

Tensor finish(Tensor t, bool requires_grad) {
  if (requires_grad) {
    DG_CHECK(is_differentiable(t->dtype), RuntimeError, err_int_requires_grad(dtype_name(t->dtype)));
    t->requires_grad = true;
  }
  return t;
}

}  // namespace

// The Tensor type's core: what only the engine can answer (memory, shape, dtype, autograd fields). Every
// torch-facing method (operators, ops as methods, repr, conversions, in-place variants) is attached by the shared
// layer, python/dyngrad/_api/, for both engines; the hottest of them are replaced by fast_paths.cpp.
void bind_fast_helpers(py::module_& m);  // fast_paths.cpp

void bind_tensor(py::module_& m) {
  bind_fast_helpers(m);
  using py::arg;
  auto none = py::none();
  // No buffer protocol: numpy would read memory through it without asking, where torch (and __array__ here) refuses
  // a tensor that requires grad.
  TensorClass cls(m, "Tensor");
  name_as_public(cls, "dyngrad", "Tensor");  // Note [Public type names]
  cls.def(py::init([](const Tensor& src) { return alias(src); }), arg("src"),
          "A new tensor object sharing src's memory, without history (the shared layer's __init__ builds on it).");

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
      .def_property_readonly("ndim", [](const Tensor& t) { return t->ndim(); })
      .def("dim", [](const Tensor& t) { return t->ndim(); })
      .def("numel", [](const Tensor& t) { return t->numel; })
      .def("element_size", [](const Tensor& t) { return t->itemsize(); })
      .def("is_contiguous", [](const Tensor& t) { return t->is_contiguous(); })
      // verified_autograd_read: Note [Verified ops run from the plan] (fast_paths.cpp)
      .def_property_readonly("is_leaf", [](const Tensor& t) { return verified_autograd_read(), t->is_leaf(); })
      .def_property_readonly("_version", [](const Tensor& t) { return t->version(); })
      .def_property_readonly("_base", [](const Tensor& t) -> py::object {
        verified_autograd_read();
        if (!t->is_view) return py::none();
        return py::cast(t->view_base);
      })
      .def_property_readonly("retains_grad", [](const Tensor& t) { return t->retains_grad; })
      .def_property_readonly("grad_fn", [](const Tensor& t) { return verified_autograd_read(), t->grad_fn; })
      .def_property_readonly("output_nr", [](const Tensor& t) { return verified_autograd_read(), t->output_nr; })
      .def("data_ptr", [](const Tensor& t) { return (uintptr_t)t->raw(); })
      .def("_storage_id", [](const Tensor& t) { return (uintptr_t)t->storage.get(); })
      .def("__hash__", [](py::handle self) { return (py::ssize_t)(uintptr_t)self.ptr(); });

  cls.def_property("requires_grad", [](const Tensor& t) { return verified_autograd_read(), t->requires_grad; },
                   [](const Tensor& t, bool value) {
                     if (!t->is_leaf()) {
                       DG_CHECK(value, RuntimeError,
                                "you can only change requires_grad flags of leaf tensors. If you want to use a "
                                "computed tensor in a subgraph that doesn't require differentiation use "
                                "x_no_grad = x.detach().");
                       return;
                     }
                     DG_CHECK(!value || is_differentiable(t->dtype), RuntimeError,
                              err_int_requires_grad(dtype_name(t->dtype)));
                     t->requires_grad = value;
                   });
  cls.def_property("grad", [](const Tensor& t) {
                     // torch warns here: backward() never fills in a non-leaf's .grad unless retain_grad() asked
                     if (!t->grad && t->grad_fn && !t->retains_grad) warn_at_user_line(kNonLeafGradWarning);
                     return t->grad;
                   },
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
                     // as torch: a tensor that requires grad keeps a floating dtype (its .grad could not exist)
                     DG_CHECK(!(t->requires_grad || t->grad_fn) || is_differentiable(src->dtype), RuntimeError,
                              "data: a tensor that requires grad can only be given floating-point data, got ",
                              dtype_name(src->dtype), ".");
                     t->storage = src->storage;
                     t->offset = src->offset;
                     t->shape = src->shape;
                     t->strides = src->strides;
                     t->numel = src->numel;
                     t->dtype = src->dtype;
                   });

  // ---- values ----
  cls.def("item", [](const Tensor& t) -> py::object {
    DG_CHECK(t->numel == 1, RuntimeError, "item: a tensor with ", t->numel,
             " elements cannot be converted to a Python number (shape ", shape_str(t->shape),
             "); expected exactly one element.");
    if (t->dtype == DType::Bool) return py::bool_(item_double(t) != 0);
    if (is_integral(t->dtype)) return py::int_(item_int(t));
    if (is_complex(t->dtype)) {
      std::complex<double> v = item_complex(t);
      return py::reinterpret_steal<py::object>(PyComplex_FromDoubles(v.real(), v.imag()));
    }
    return py::float_(item_double(t));
  });
  cls.def("_numpy_view", [](const Tensor& t) { return numpy_view(t); },
          "a numpy array over this tensor's memory (no copy, no requires_grad check)");
  cls.def("detach", [](const Tensor& t) { return alias(t); });
  cls.def("detach_", [](py::object self) {
    Tensor t = self.cast<Tensor>();
    t->grad_fn.reset();
    t->requires_grad = false;
    return self;
  });

  // ---- creation ----
  m.def("from_numpy", [](py::array arr) { return from_numpy(arr); }, arg("ndarray"));
  m.def("copy_from_numpy", [](py::array arr, bool requires_grad) {
    Tensor shared = from_numpy(arr, false);
    return finish(contiguous_copy(shared, shared->dtype), requires_grad);
  }, arg("ndarray"), arg("requires_grad"), "a new tensor with its own memory holding a copy of the array");
}

}  // namespace dyngrad
