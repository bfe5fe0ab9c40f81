// tensor.h: storage, the tensor (shape/strides/offset over a shared storage) and its autograd fields.
//
// A worked example of what the rest of csrc/ does with these types:
//
//     a = dg.tensor([2.], requires_grad=True)      // leaf: requires_grad, no grad_fn
//     y = a * a + a                                // mul records MulBackward(a, a), add records AddBackward
//     y.backward()                                 // engine.cpp: AddBackward -> MulBackward -> AccumulateGrad(a)
//     a.grad                                       // 2*a + 1 = 5
//
// Note [Version counter]: the counter lives in the Storage, so every view of the same memory (and every
// detach()) shares it. Every in-place write bumps it; a SavedTensor remembers the version it saw and refuses to
// unpack if it moved (node.h).
//
// Note [Writable tensors]: an in-place write must never reach memory that is read-only (from_numpy of a numpy
// array that is not writeable: np.load(..., mmap_mode="r") maps the file read-only, np.frombuffer(bytes) points
// into an immutable bytes object), nor a tensor several of whose elements share one memory location (an
// expand()ed view, where the last write would silently win). Every in-place path of the core (assign_inplace,
// copy_, fill_, zero_, write_into, the random fills, the fused optimisers) calls check_writable on its target
// first and raises a RuntimeError naming the op, as torch does for overlap ("unsupported operation: more than one
// element of the written-to tensor refers to a single memory location"). torch shares a read-only array with a
// warning and leaves writes undefined; we share it with the same warning and refuse the writes. A .grad that is
// not writable is accumulated out of place (AccumulateGrad).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "check.h"
#include "dim_vector.h"
#include "dtype.h"
#include "pool.h"

namespace dyngrad {

using Shape = DimVector;  // shapes and strides: inline up to 6 dims
using Dims = std::vector<int64_t>;  // lists of dims (sum over dims, permute) and other int lists
inline std::string shape_str(const Shape& s) { return shape_str(std::vector<int64_t>(s.begin(), s.end())); }

struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  // Memory we do not own (a numpy array's buffer): `owner` keeps it alive; null when we allocated `data`.
  std::shared_ptr<void> owner;
  uint64_t version = 0;
  bool read_only = false;  // memory we must not write (Note [Writable tensors])
  // Tiny tensors (scalars, a few elements) live inside the Storage object: one allocation fewer per op.
  alignas(16) unsigned char inline_buffer[16];

  Storage();  // user-provided (make_pooled<Storage>() must not zero the whole object first); counts live storages
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();
  static std::shared_ptr<Storage> allocate(size_t nbytes);  // uninitialised, 64-byte aligned
};

struct Node;
struct TensorImpl;
using Tensor = std::shared_ptr<TensorImpl>;
// A tensor hook gets the gradient and returns a replacement, or nullptr to keep it.
using GradHook = std::function<Tensor(const Tensor&)>;
// A post-accumulate-grad hook gets the leaf itself once its .grad holds the accumulated gradient (torch's
// register_post_accumulate_grad_hook); it returns nothing.
using PostAccumulateGradHook = std::function<void(const Tensor&)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Shape strides;  // in elements
  int64_t numel = 1;
  DType dtype = DType::Float32;

  // Autograd. A tensor requires grad if it is a leaf the user marked, or the output of a recorded op (then
  // grad_fn is set and output_nr says which of grad_fn's outputs it is).
  bool requires_grad = false;
  bool retains_grad = false;
  bool cycle_suspect = false;  // in the registry of Note [Cycles through C++] (cycles.h)
  bool is_view = false;  // made by a view op from a tensor that required grad, sharing its storage
  // A Python number made into a 0-d operand (scalar_operand): result_type() ranks it below 0-d tensors (Note
  // [Integers that do not fit the tensor's dtype], ops_math.cpp). No op's output has it.
  bool wrapped_number = false;
  Tensor view_base;      // for such views: the non-view tensor owning the memory (Note [In-place writes into views])
  uint32_t output_nr = 0;
  std::shared_ptr<Node> grad_fn;
  Tensor grad;
  std::weak_ptr<Node> grad_accumulator;  // the leaf's AccumulateGrad, alive while some graph holds it
  std::vector<std::pair<int64_t, GradHook>> hooks;  // leaf hooks (non-leaf hooks live on grad_fn)
  std::vector<std::pair<int64_t, PostAccumulateGradHook>> post_accumulate_hooks;  // leaves only
  // Forward AD: (level, tangent) for each dual level this tensor is dual at (Note [Dual tensors], forward_ad.h)
  std::vector<std::pair<int64_t, Tensor>> tangents;

  TensorImpl() {}  // user-provided, for the same reason (members have their own initialisers)
  ~TensorImpl();

  bool is_leaf() const { return grad_fn == nullptr; }
  size_t itemsize() const { return dtype_size(dtype); }
  int64_t ndim() const { return (int64_t)shape.size(); }
  char* raw() const { return static_cast<char*>(storage->data) + offset * (int64_t)itemsize(); }
  template <typename T>
  T* data() const { return reinterpret_cast<T*>(storage->data) + offset; }
  bool is_contiguous() const;
  uint64_t version() const { return storage->version; }
  void bump_version() { ++storage->version; }
};

// Debug counter (tests/test_leaks.py): Storage objects alive now.
int64_t live_storage_count();

// ---- shapes ----
int64_t shape_numel(const Shape& shape);  // throws on overflow
Shape contiguous_strides(const Shape& shape);
// Wraps a possibly negative dim; IndexError naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// Broadcast two shapes as numpy does; RuntimeError naming `op` on mismatch.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// ---- construction (no autograd) ----
Tensor empty(const Shape& shape, DType dtype);
Tensor zeros(const Shape& shape, DType dtype);
Tensor full(const Shape& shape, double value, DType dtype);
Tensor scalar_tensor(double value, DType dtype);  // 0-d
Tensor full_complex(const Shape& shape, double re, double im, DType dtype);  // a complex dtype
// Integral values, exact in int64 (a Python int through a double loses its low bits above 2**53).
Tensor full_int(const Shape& shape, int64_t value, DType dtype);
Tensor scalar_tensor_int(int64_t value, DType dtype);
// [start, end) by step: in exact int64 arithmetic, or in doubles; the element count is checked (RuntimeError
// naming arange when the range is not finite, the step has the wrong sign, or the count does not fit in int64).
Tensor arange_int(int64_t start, int64_t end, int64_t step, DType dtype);
Tensor arange_float(double start, double end, double step, DType dtype);
// A tensor over existing memory: shares storage, no autograd history.
Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);
// The complex tensor's memory as (real, imag) pairs, and the converse (Note [Complex views] in ops_shape.cpp): no
// autograd, no checks (view_as_real and view_as_complex check and record).
Tensor complex_as_real_view(const Tensor& a);
Tensor real_as_complex_view(const Tensor& a);
// detach(): same memory and version counter, no history.
Tensor alias(const Tensor& t);

// ---- element access ----
double item_double(const Tensor& t);  // of a 1-element tensor
int64_t item_int(const Tensor& t);
std::complex<double> item_complex(const Tensor& t);

// ---- in-place writes (Note [Writable tensors]) ----
// A dim of more than one element with stride 0: several elements share a memory location.
bool has_internal_overlap(const TensorImpl& t);
bool is_writable(const TensorImpl& t);
// RuntimeError naming `op` when `t` must not be written in place.
void check_writable(const Tensor& t, const char* op);
// The plain (no-autograd) in-place write: check_writable, copy `src` into `dst` (broadcast and cast), bump the
// version.
void write_into(const Tensor& dst, const Tensor& src, const char* op);

// ---- copies and conversions (kernels/copy.cpp) ----
// dst[...] = src[...] elementwise, converting dtype and broadcasting src to dst's shape. No autograd.
void copy_into(const Tensor& dst, const Tensor& src);
Tensor contiguous_copy(const Tensor& t, DType dtype);  // always a fresh contiguous tensor
inline Tensor contiguous_data(const Tensor& t) {       // t itself if already contiguous (no autograd)
  return t->is_contiguous() ? t : contiguous_copy(t, t->dtype);
}

}  // namespace dyngrad
