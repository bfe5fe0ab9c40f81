// tensor.cpp: storage allocation, shapes and strides, construction of tensors without history.
#include "tensor.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "errors.h"
#include "node.h"

namespace dyngrad {

[[noreturn]] void throw_dtype_not_float(DType d) {
  throw TypeError(str_cat("expected a floating-point tensor (float32 or float64), got ", dtype_name(d), "."));
}

[[noreturn]] void throw_dtype_unsupported(DType d) {
  throw TypeError(str_cat("this operation is not implemented for ", dtype_name(d), " tensors; convert with .float()."));
}

[[noreturn]] void throw_no_complex32(const char* why) {
  throw TypeError(str_cat("complex32 (chalf), the complex type of ", why,
                          ", is not supported; dyngrad has complex64 and complex128: convert with .float() first."));
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) os << ",";
  os << ")";
  return os.str();
}

static std::atomic<int64_t> g_live_storages{0};
int64_t live_storage_count() { return g_live_storages.load(); }

Storage::Storage() { g_live_storages.fetch_add(1, std::memory_order_relaxed); }

Storage::~Storage() {
  g_live_storages.fetch_sub(1, std::memory_order_relaxed);
  if (!owner && data && data != inline_buffer) pool::free_buffer(data, nbytes);
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  auto s = make_pooled<Storage>();
  if (nbytes > 0 && nbytes <= sizeof(s->inline_buffer)) {
    s->data = s->inline_buffer;
  } else if (nbytes > 0) {
    s->data = pool::allocate_buffer(nbytes);
  }
  s->nbytes = nbytes;
  return s;
}

TensorImpl::~TensorImpl() {
  // Note [Iterative graph destruction] in node.h: hand the history to the trampoline instead of
  // letting a long chain of nodes destroy itself recursively.
  if (grad_fn) release_node_iteratively(std::move(grad_fn));
}

bool TensorImpl::is_contiguous() const {
  if (numel == 0) return true;  // no element to be out of place (torch agrees)
  int64_t expected = 1;
  for (int64_t i = ndim() - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    DG_CHECK(s >= 0, ValueError, "negative dimension ", s, " in shape ", shape_str(shape), ".");
    if (s != 0 && n > INT64_MAX / s)
      throw ValueError(str_cat("shape ", shape_str(shape), " has more elements than fit in 64 bits."));
    n *= s;
  }
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t acc = 1;
  for (int64_t i = (int64_t)shape.size() - 1; i >= 0; --i) {
    strides[i] = acc;
    acc *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = ndim > 0 ? ndim : 1;  // a 0-d tensor accepts dim 0 and -1, as in torch
  if (dim < -n || dim >= n)
    throw IndexError(str_cat(op, ": dim ", dim, " is out of range for a tensor of ", ndim,
                             " dimensions (expected ", -n, "..", n - 1, ")."));
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  if (a == b) return a;
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw RuntimeError(str_cat(op, ": shapes ", shape_str(a), " and ", shape_str(b),
                                 " cannot be broadcast: dimension ", (int64_t)i - (int64_t)n, " is ", da,
                                 " in the first and ", db, " in the second."));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// The MemoryError of a tensor that cannot be allocated, with what it would have needed (torch names the bytes).
[[noreturn]] static void throw_cannot_allocate(const Shape& shape, DType dtype, int64_t numel) {
  unsigned __int128 bytes = (unsigned __int128)numel * dtype_size(dtype);
  std::string size = "more than 2**64 bytes";
  if (!(bytes >> 64)) {
    double gib = (double)bytes / (double)(1ull << 30);
    std::ostringstream human;
    human.precision(3);
    if (gib >= 1024) human << gib / 1024 << " TiB"; else human << gib << " GiB";
    size = str_cat((uint64_t)bytes, " bytes (", human.str(), ")");
  }
  throw MemoryError(str_cat("cannot allocate memory for a tensor of shape ", shape_str(shape), " and dtype ",
                            dtype_name(dtype), ": it needs ", size, "."));
}

Tensor empty(const Shape& shape, DType dtype) {
  auto t = make_pooled<TensorImpl>();
  t->numel = shape_numel(shape);
  size_t item = dtype_size(dtype);
  if (t->numel > 0 && (uint64_t)t->numel > (uint64_t)(SIZE_MAX / 4) / item) throw_cannot_allocate(shape, dtype, t->numel);
  try {
    t->storage = Storage::allocate((size_t)t->numel * item);
  } catch (const std::bad_alloc&) {
    throw_cannot_allocate(shape, dtype, t->numel);
  }
  t->shape = shape;
  t->strides = contiguous_strides(shape);
  t->dtype = dtype;
  return t;
}

Tensor zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  if (t->storage->nbytes) std::memset(t->storage->data, 0, t->storage->nbytes);
  return t;
}

Tensor full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  int64_t n = t->numel;
  DG_DISPATCH_STORAGE(dtype, T, {
    T v = static_cast<T>(value);
    T* p = t->data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  });
  return t;
}

Tensor scalar_tensor(double value, DType dtype) { return full(Shape{}, value, dtype); }

Tensor full_complex(const Shape& shape, double re, double im, DType dtype) {
  DG_CHECK(is_complex(dtype), TypeError, "full: a complex value cannot fill a tensor of dtype ", dtype_name(dtype),
           "; use a complex dtype or take its real part.");
  Tensor t = empty(shape, dtype);
  DG_DISPATCH_COMPLEX(dtype, T, {
    T v((typename T::value_type)re, (typename T::value_type)im);
    T* p = t->data<T>();
    for (int64_t i = 0; i < t->numel; ++i) p[i] = v;
  });
  return t;
}

Tensor full_int(const Shape& shape, int64_t value, DType dtype) {
  Tensor t = empty(shape, dtype);
  int64_t n = t->numel;
  DG_DISPATCH_STORAGE(dtype, T, {
    T v = static_cast<T>(value);
    T* p = t->data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  });
  return t;
}

Tensor scalar_tensor_int(int64_t value, DType dtype) { return full_int(Shape{}, value, dtype); }

Tensor arange_int(int64_t start, int64_t end, int64_t step, DType dtype) {
  DG_CHECK(step != 0, RuntimeError, "arange: step must be nonzero.");
  __int128 span = (__int128)end - start;
  DG_CHECK(span == 0 || (span > 0) == (step > 0), RuntimeError, "arange: upper bound and step are inconsistent (start=",
           start, ", end=", end, ", step=", step, ").");
  __int128 count = (span + step + (step > 0 ? -1 : 1)) / step;  // ceil(span / step), span and step of one sign
  DG_CHECK(count <= INT64_MAX, RuntimeError, "arange: the range (start=", start, ", end=", end, ", step=", step,
           ") has more elements than fit in 64 bits.");
  Tensor t = empty({(int64_t)count}, dtype);
  DG_DISPATCH_STORAGE(dtype, T, {
    T* p = t->data<T>();
    for (int64_t i = 0; i < t->numel; ++i) p[i] = static_cast<T>((int64_t)(start + (__int128)i * step));
  });
  return t;
}

Tensor arange_float(double start, double end, double step, DType dtype) {
  DG_CHECK(std::isfinite(start) && std::isfinite(end), RuntimeError, "arange: unsupported range: ", start, " -> ",
           end, " (start and end must be finite).");
  DG_CHECK(step != 0 && std::isfinite(step), RuntimeError, "arange: step must be finite and nonzero, got ", step, ".");
  double count = std::ceil((end - start) / step);
  DG_CHECK(start == end || count >= 0, RuntimeError, "arange: upper bound and step are inconsistent (start=", start,
           ", end=", end, ", step=", step, ").");
  DG_CHECK(count < 9.2233720368547758e18, RuntimeError, "arange: the range (start=", start, ", end=", end,
           ", step=", step, ") has ", count, " elements, more than fit in 64 bits.");
  const int64_t n = count > 0 ? (int64_t)count : 0;
  if (dtype == DType::Int64 && n > 0) {  // each value must fit the dtype: a double beyond int64 converts undefined
    double last = start + (double)(n - 1) * step;
    DG_CHECK(std::fabs(start) < 9.2233720368547758e18 && std::fabs(last) < 9.2233720368547758e18, RuntimeError,
             "arange: the values from ", start, " to ", last, " do not fit in int64.");
  }
  Tensor t = empty({n}, dtype);
  DG_DISPATCH_STORAGE(dtype, T, {
    T* p = t->data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + (double)i * step);
  });
  return t;
}

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  auto t = make_pooled<TensorImpl>();
  t->storage = base->storage;
  t->numel = shape_numel(shape);
  t->shape = std::move(shape);
  t->strides = std::move(strides);
  t->offset = offset;
  t->dtype = base->dtype;
  return t;
}

Tensor alias(const Tensor& t) { return make_view(t, t->shape, t->strides, t->offset); }

bool has_internal_overlap(const TensorImpl& t) {
  if (t.numel == 0) return false;
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (t.strides[d] == 0 && t.shape[d] > 1) return true;
  return false;
}

bool is_writable(const TensorImpl& t) { return !t.storage->read_only && !has_internal_overlap(t); }

void check_writable(const Tensor& t, const char* op) {
  if (t->storage->read_only) throw RuntimeError(err_read_only(op));
  if (has_internal_overlap(*t))
    throw RuntimeError(err_internal_overlap(op, shape_str(t->shape), shape_str(t->strides)));
}

void write_into(const Tensor& dst, const Tensor& src, const char* op) {
  check_writable(dst, op);
  copy_into(dst, src);
  dst->bump_version();
}

double item_double(const Tensor& t) {
  DG_CHECK(t->numel == 1, RuntimeError, "item(): a tensor with ", t->numel,
           " elements cannot be converted to a Python number (shape ", shape_str(t->shape), ").");
  double v = 0;
  DG_DISPATCH_STORAGE(t->dtype, T, v = (double)real_part(*t->data<T>()));
  return v;
}

int64_t item_int(const Tensor& t) {
  DG_CHECK(t->numel == 1, RuntimeError, "item(): a tensor with ", t->numel,
           " elements cannot be converted to a Python number (shape ", shape_str(t->shape), ").");
  int64_t v = 0;
  DG_DISPATCH_STORAGE(t->dtype, T, v = real_part<int64_t>(*t->data<T>()));
  return v;
}

std::complex<double> item_complex(const Tensor& t) {
  DG_CHECK(t->numel == 1, RuntimeError, "item(): a tensor with ", t->numel,
           " elements cannot be converted to a Python number (shape ", shape_str(t->shape), ").");
  std::complex<double> v;
  DG_DISPATCH_STORAGE(t->dtype, T, v = std::complex<double>(real_part(*t->data<T>()), imag_part(*t->data<T>())));
  return v;
}

}  // namespace dyngrad
