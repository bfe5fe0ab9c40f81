// module.cpp: dyngrad._C, the C++ engine's narrow surface (Note [Fast paths] in fast_paths.cpp says what sits on
// top of it). Exception translation, dtypes, the number rule; the rest is in the bind_* files.
#include <pybind11/numpy.h>
#include <algorithm>
#include <cstdlib>
#include <thread>

#include "common.h"
#include "dyngrad/check.h"
#include "dyngrad/kernels/gil.h"
#include "dyngrad/kernels/kernels.h"
#include "dyngrad/kernels/thread_pool.h"
#include "dyngrad/pool.h"
#include "dyngrad/node.h"
#include "dyngrad/random.h"

namespace dyngrad {

// ---- dtypes: one singleton object each, never freed (they outlive every tensor) ----
static py::object* g_dtypes[kNumDTypes] = {};

py::object dtype_object(DType d) { return *g_dtypes[(int)d]; }

std::optional<DType> dtype_from_name(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name == dtype_name((DType)i)) return (DType)i;
  return std::nullopt;
}

DType parse_dtype(py::handle o) {
  if (py::isinstance<DTypeObject>(o)) return o.cast<DTypeObject&>().dtype;
  if (o.ptr() == (PyObject*)&PyFloat_Type) return DType::Float64;
  if (o.ptr() == (PyObject*)&PyLong_Type) return DType::Int64;
  if (o.ptr() == (PyObject*)&PyBool_Type) return DType::Bool;
  if (o.ptr() == (PyObject*)&PyComplex_Type) return DType::Complex128;
  py::object np = py::module_::import("numpy");
  py::object dt;
  try {
    dt = np.attr("dtype")(o);
  } catch (py::error_already_set&) {
    throw TypeError(str_cat("expected a dtype (dyngrad.float32, int64, ...), got ",
                            py::str(py::repr(o)).cast<std::string>(), "."));
  }
  std::string name = py::str(dt.attr("name"));
  if (auto found = dtype_from_name(name)) return *found;
  throw TypeError(str_cat("dtype ", name, " is not supported: dyngrad has bool, uint8, int8, int16, int32, int64, "
                          "float16, bfloat16, float32, float64, complex64 and complex128."));
}

std::optional<DType> parse_optional_dtype(py::handle o) {
  if (!o || o.is_none()) return std::nullopt;
  return parse_dtype(o);
}

void name_as_public(py::handle cls, const char* module, const char* name) {
  cls.attr("__module__") = module;
  reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_name = name;  // a literal: lives as long as the type
}

void bind_dtypes(py::module_& m) {
  py::class_<DTypeObject> dtype_class(m, "dtype");
  name_as_public(dtype_class, "dyngrad", "dtype");
  dtype_class
      .def("__repr__", [](const DTypeObject& d) { return std::string("dyngrad.") + dtype_name(d.dtype); })
      .def_property_readonly("is_floating_point", [](const DTypeObject& d) { return is_floating(d.dtype); })
      .def_property_readonly("itemsize", [](const DTypeObject& d) { return dtype_size(d.dtype); })
      .def_property_readonly("is_signed", [](const DTypeObject& d) {
        return d.dtype != DType::Bool && d.dtype != DType::UInt8;
      })
      .def_property_readonly("is_complex", [](const DTypeObject& d) { return is_complex(d.dtype); })
      .def_property_readonly("name", [](const DTypeObject& d) { return std::string(dtype_name(d.dtype)); })
      .def("__reduce__", [](const DTypeObject& d) {
        return py::make_tuple(py::module_::import("dyngrad").attr("_dtype_from_name"),
                              py::make_tuple(std::string(dtype_name(d.dtype))));
      });
  for (int i = 0; i < kNumDTypes; ++i) {
    DType d = (DType)i;
    g_dtypes[i] = new py::object(py::cast(DTypeObject{d}));
    m.attr(dtype_name(d)) = *g_dtypes[i];
  }
  // torch.set_default_dtype: the dtype of Python floats and of integer inputs to float ops
  m.def("_get_default_dtype", [] { return dtype_object(default_float_dtype()); });
  m.def("_set_default_dtype", [](py::handle o) {
    DType d = parse_dtype(o);
    DG_CHECK(is_floating(d), TypeError, "set_default_dtype: only floating-point dtypes can be the default, got ",
             dtype_name(d), ".");
    default_float_dtype_ref() = d;
  }, py::arg("dtype"));
}

// ---- Python helpers ----
static py::dict* g_helpers = nullptr;

py::object py_helper(const char* name) {
  if (!g_helpers || !g_helpers->contains(name))
    throw RuntimeError(str_cat("dyngrad._C helper '", name, "' is not registered; import dyngrad, not dyngrad._C."));
  return (*g_helpers)[name];
}

py::object make_size(const Shape& shape) {
  py::tuple t(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t[i] = py::int_(shape[i]);
  static PyObject* size_type = nullptr;
  if (!size_type) size_type = py_helper("Size").release().ptr();
  return py::reinterpret_steal<py::object>(PyObject_CallOneArg(size_type, t.ptr()));
}

// ---- argument conversion ----
bool is_tensor(py::handle o) { return py::isinstance<TensorImpl>(o); }

// torch's rule for a Python number next to a tensor: it never widens the tensor's dtype within its category
// (float32 * 2.5 is float32), and a number of a higher category (bool < int < float) gives the default dtype of
// that category. `like` null: the number alone (bool, int64, float32). The operand is marked a wrapped number, which
// result_type() ranks below 0-d tensors (Note [Integers that do not fit the tensor's dtype], ops_math.cpp).
static Tensor number_as_tensor(py::handle o, const Tensor* like) {
  if (PyBool_Check(o.ptr())) {
    bool v = o.ptr() == Py_True;
    if (like && (*like)->dtype != DType::Bool) return scalar_tensor(v, (*like)->dtype);
    return scalar_tensor(v, DType::Bool);
  }
  if (PyLong_Check(o.ptr())) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o.ptr(), &overflow);
    if (overflow) throw RuntimeError("an integer operand does not fit in int64.");
    if (like) return scalar_like_int(*like, v);  // exact: no trip through a double
    return scalar_tensor_int(v, DType::Int64);
  }
  if (PyFloat_Check(o.ptr())) {
    double v = PyFloat_AS_DOUBLE(o.ptr());
    if (like) return scalar_like(*like, v, false);
    return scalar_tensor(v, default_float_dtype());
  }
  if (PyComplex_Check(o.ptr())) {
    Py_complex v = PyComplex_AsCComplex(o.ptr());
    return scalar_like_complex(like, v.real, v.imag);
  }
  throw TypeError(str_cat("expected a Python number (bool, int, float or complex), got ",
                          py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>(), "."));
}
Tensor scalar_operand(py::handle o, const Tensor* like) {
  Tensor t = number_as_tensor(o, like);
  t->wrapped_number = true;
  return t;
}

}  // namespace dyngrad

PYBIND11_MODULE(_C, m) {
  using namespace dyngrad;
  m.doc() = "dyngrad's C++ core: tensors, ops with their derivatives, and the backward engine.";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const dyngrad::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const dyngrad::NotImplementedError& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    }
  });
  m.def("_register_helpers", [](py::dict helpers) {
    if (!g_helpers) g_helpers = new py::dict();
    for (auto item : helpers) (*g_helpers)[item.first] = item.second;
  }, py::arg("helpers"));
  // Note [Daemon threads at exit] (kernels/gil.h): the thread that will run the interpreter's finalization
  main_thread_ident() = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  m.def("_set_blas", &set_blas_functions, "hand over cblas_sgemm/cblas_dgemm function pointers", py::arg("sgemm"),
        py::arg("dgemm"), py::arg("set_num_threads"), py::arg("get_num_threads"), py::arg("ilp64"));
  m.def("_blas_loaded", &blas_loaded);
  m.def("_gemm_kernel", [] { return std::string(gemm_kernel_name()); },
        "the float32 product kernel in use: 'avx512' (dyngrad's own, Note [Own small-product kernel]) or 'blas'");
  m.def("_set_gemm_kernel", [](const std::string& name) {
    const std::string before = gemm_kernel_name();
    DG_CHECK(name == "auto" || name == "avx512" || name == "blas", ValueError,
             "_set_gemm_kernel: expected 'auto', 'avx512' or 'blas', got '", name, "'.");
    DG_CHECK(set_gemm_kernel(name), RuntimeError, "_set_gemm_kernel: this CPU has no AVX-512F.");
    return before;
  }, py::arg("name"), "choose the float32 product kernel (tests run both); returns the one before");
  m.def("_set_blas_threads", &set_blas_threads, py::arg("n"), "the BLAS's thread count outside dyngrad's calls");
  m.def("_blas_threads", &blas_threads, "the BLAS's thread count outside dyngrad's calls (-1: no control)");
  m.def("get_num_threads", &num_threads, "threads used by large kernels");
  m.def("_set_parallel_grain", [](int64_t n) {
    DG_CHECK(n >= 1, RuntimeError, "_set_parallel_grain: expected a positive element count, got ", n, ".");
    set_parallel_grain(n);
  }, py::arg("n"), "for bench/parallel_grain.py: the element count from which kernels use every thread");
  m.def("_parallel_grain", [] { return parallel_grain(); });
  // Like torch.set_num_threads, it also sets the BLAS's threads: those of numpy's own OpenBLAS (Note [One BLAS]),
  // at most one per core (an OpenBLAS that fails to start a thread hangs instead of failing) and at most
  // OPENBLAS_NUM_THREADS when that is set: OPENBLAS_NUM_THREADS=1 keeps the BLAS free of busy-waiting workers
  // while dyngrad's kernels still use n threads (docs/pitfalls.md, "numpy and dyngrad on a busy machine").
  m.def("set_num_threads", [](int n) {
    set_num_threads(n);
    int blas = std::min(num_threads(), (int)std::max(1u, std::thread::hardware_concurrency()));
    if (const char* env = std::getenv("OPENBLAS_NUM_THREADS")) {
      const int cap = std::atoi(env);
      if (cap > 0) blas = std::min(blas, cap);
    }
    set_blas_threads(blas);
  }, py::arg("n"), "threads used by large kernels and by the BLAS (1: none)");
  m.def("_cached_buffer_bytes", &pool::cached_buffer_bytes, "bytes of freed large buffers kept for reuse");
  m.def("_empty_cache", &pool::empty_buffer_cache, "return the cached large buffers to the system");
  m.def("_live_node_count", &live_node_count, "debug counter: graph nodes alive now");
  m.def("_live_storage_count", &live_storage_count, "debug counter: tensor storages alive now");
  m.def("scalar_operand", [](py::handle value, std::optional<Tensor> like) {
    return scalar_operand(value, like ? &*like : nullptr);
  }, py::arg("value"), py::arg("like").none(true));
  m.def("_fast_path_names", &fast_path_names, "what _install_fast_paths can speed up (Note [Fast paths])");
  m.def("_install_fast_paths", &install_fast_paths, py::arg("fallbacks"), py::arg("docs"));
  m.def("_set_autocast_active", &set_autocast_active, py::arg("active"),
        "while true, matmul, linear and cross_entropy take their Python path (Note [Fast paths under autocast])");
  m.def("_set_meta_class", &set_meta_class, py::arg("cls"),
        "instances of cls are meta tensors, which the fast paths leave to Python (Note [Meta tensors])");
  m.def("_set_capturing", &set_capturing, py::arg("active"),
        "while true, every fast path takes its Python path (Note [Fast paths while capturing])");
  m.def("op_names", [] {
    std::vector<std::string> names;
    for (int i = 0; i < (int)OpKind::COUNT; ++i) names.push_back(op_name((OpKind)i));
    return names;
  }, "the primitive ops of csrc/dyngrad/ops.def, in order");
  m.def("op_saved_fields", [] {
    py::dict out;
    for (int i = 0; i < (int)OpKind::COUNT; ++i) {
      py::list names;
      for (const char* name : op_saved_fields((OpKind)i)) names.append(name);
      out[op_name((OpKind)i)] = py::tuple(names);
    }
    return out;
  }, "{op: names of the fields its node saves} (the saved.h struct each ops.def line names)");
  bind_dtypes(m);
  bind_tensor(m);
  bind_ops(m);
  bind_autograd(m);
  bind_optim(m);
  bind_cycles(m);
  bind_capture(m);
  bind_capture_record(m);
  bind_verify(m);
}
