// ops_shape.cpp: conversion, views and movement: to_dtype, reshape, permute, expand, slice, cat and the views made
// of them. Indexing is ops_index.cpp; writing into a tensor (in-place ops) is inplace.cpp.
#include <algorithm>

#include "ops_common.h"

namespace dyngrad {

// ---------------- conversion ----------------

Tensor to_dtype(const Tensor& a, DType dtype) {
  if (a->dtype == dtype) return a;
  Tensor out = contiguous_copy(a, dtype);
  if (is_differentiable(dtype) && any_requires_grad({&a})) record<OpKind::to_dtype>(out, {&a});
  if (forward_ad::active()) forward_tangents<OpKind::to_dtype>(out, {&a}, SavesNothing{});
  return out;
}

Tensor clone(const Tensor& a) {
  Tensor out = contiguous_copy(a, a->dtype);
  if (any_requires_grad({&a})) record<OpKind::clone>(out, {&a});
  if (forward_ad::active()) forward_tangents<OpKind::clone>(out, {&a}, SavesNothing{});
  return out;
}

Tensor contiguous(const Tensor& a) { return a->is_contiguous() ? a : clone(a); }

// ---------------- views ----------------

// A view op's output shares the input's storage; it is recorded like any op, and marked as a view of its base
// when the input requires grad (see Note [In-place writes into views] at assign_inplace).
static Tensor view_of(const Tensor& a, Shape shape, Shape strides, int64_t offset) {
  Tensor v = make_view(a, std::move(shape), std::move(strides), offset);
  return v;
}

static void mark_view(const Tensor& out, const Tensor& a) {
  if (out->storage != a->storage) return;  // reshape had to copy: not a view
  out->is_view = true;
  out->view_base = a->is_view ? a->view_base : a;
}

// The strides that let `new_shape` view memory laid out as (shape, strides), if any (torch's computeStride).
static bool view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape, Shape& out) {
  out.assign(new_shape.size(), 0);
  if (shape.empty() || shape_numel(shape) == 0 || shape_numel(shape) == 1) {
    out = contiguous_strides(new_shape);
    return true;
  }
  int64_t view_d = (int64_t)new_shape.size() - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = (int64_t)shape.size() - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= shape[tensor_d];
    if (tensor_d == 0 ||
        (shape[tensor_d - 1] != 1 && strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (tensor_d > 0) {
        chunk_base_stride = strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

static Shape infer_shape(const Shape& requested, int64_t numel, const Shape& old, const char* op) {
  Shape shape = requested;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      DG_CHECK(infer < 0, RuntimeError, op, ": only one dimension can be -1, got shape ", shape_str(requested), ".");
      infer = (int64_t)i;
    } else {
      DG_CHECK(shape[i] >= 0, RuntimeError, op, ": invalid size ", shape[i], " in shape ", shape_str(requested), ".");
      DG_CHECK(!__builtin_mul_overflow(known, shape[i], &known), RuntimeError, op, ": shape ", shape_str(requested),
               " is invalid for a tensor of ", numel, " elements (shape ", shape_str(old),
               "): its sizes multiply to more than fits in 64 bits.");
    }
  }
  if (infer >= 0) {
    DG_CHECK(known != 0 && numel % known == 0, RuntimeError, op, ": shape ", shape_str(requested),
             " is invalid for a tensor of ", numel, " elements (shape ", shape_str(old), ").");
    shape[infer] = numel / known;
  }
  DG_CHECK(shape_numel(shape) == numel, RuntimeError, op, ": shape ", shape_str(requested),
           " is invalid for a tensor of ", numel, " elements (shape ", shape_str(old), ").");
  return shape;
}

// Note [Complex views]: a complex64 element is two float32s (real, imag) in a row, so a complex tensor of shape S
// and strides s (in elements) is a float32 tensor of shape (S, 2) and strides (2 s, 1) over the same bytes, at
// twice the offset; view_as_complex is the converse, for a real tensor whose last dim has size 2 and stride 1 and
// whose other strides and offset are even. real and imag are selects of view_as_real, so they are views too.
Tensor complex_as_real_view(const Tensor& a) {
  Shape shape = a->shape, strides;
  for (int64_t s : a->strides) strides.push_back(2 * s);
  shape.push_back(2);
  strides.push_back(1);
  Tensor v = make_view(a, std::move(shape), std::move(strides), 2 * a->offset);
  v->dtype = complex_value_type(a->dtype);
  return v;
}

Tensor real_as_complex_view(const Tensor& a) {
  Shape shape(a->shape.begin(), a->shape.end() - 1), strides;
  for (size_t d = 0; d + 1 < a->strides.size(); ++d) strides.push_back(a->strides[d] / 2);
  Tensor v = make_view(a, std::move(shape), std::move(strides), a->offset / 2);
  v->dtype = a->dtype == DType::Float64 ? DType::Complex128 : DType::Complex64;
  return v;
}

template <OpKind K>
static Tensor record_view(const Tensor& out, const Tensor& a) {
  if (any_requires_grad({&a})) {
    record<K>(out, {&a});
    mark_view(out, a);
  } else if (forward_ad::active() && !a->tangents.empty()) {
    mark_view(out, a);  // a write into it must reach the base's tangent (forward_ad::take_tangents)
  }
  if (forward_ad::active()) forward_tangents<K>(out, {&a}, SavesNothing{});
  return out;
}

Tensor reshape(const Tensor& a, const Shape& requested) {
  Shape shape = infer_shape(requested, a->numel, a->shape, "reshape");
  if (shape == a->shape) return record_view<OpKind::reshape>(alias(a), a);
  Shape strides;
  Tensor out = view_strides(a->shape, a->strides, shape, strides)
                   ? view_of(a, shape, strides, a->offset)
                   : make_view(contiguous_copy(a, a->dtype), shape, contiguous_strides(shape), 0);
  return record_view<OpKind::reshape>(out, a);
}

Tensor view(const Tensor& a, const Shape& requested) {
  Shape shape = infer_shape(requested, a->numel, a->shape, "view");
  Shape strides;
  DG_CHECK(view_strides(a->shape, a->strides, shape, strides), RuntimeError, "view: cannot view a tensor of shape ",
           shape_str(a->shape), " and strides ", shape_str(a->strides), " as ", shape_str(shape),
           "; use reshape() instead.");
  return record_view<OpKind::reshape>(view_of(a, shape, strides, a->offset), a);
}

Tensor view_as_real(const Tensor& a) {
  DG_CHECK(is_complex(a->dtype), RuntimeError, "view_as_real: expected a complex tensor (complex64 or complex128), got ",
           dtype_name(a->dtype), ".");
  return record_view<OpKind::view_as_real>(complex_as_real_view(a), a);
}

Tensor view_as_complex(const Tensor& a) {
  DG_CHECK(a->dtype == DType::Float32 || a->dtype == DType::Float64, RuntimeError,
           "view_as_complex: expected a float32 or float64 tensor, got ", dtype_name(a->dtype), ".");
  DG_CHECK(a->ndim() >= 1 && a->shape.back() == 2, RuntimeError,
           "view_as_complex: expected a tensor whose last dimension has size 2, got shape ", shape_str(a->shape), ".");
  DG_CHECK(a->strides.back() == 1, RuntimeError,
           "view_as_complex: expected the last dimension to have stride 1, got strides ", shape_str(a->strides),
           "; call .contiguous() first.");
  bool even = a->offset % 2 == 0;
  for (size_t d = 0; d + 1 < a->strides.size(); ++d) even = even && (a->strides[d] % 2 == 0 || a->shape[d] == 1);
  DG_CHECK(even, RuntimeError, "view_as_complex: expected every other stride and the storage offset to be divisible "
           "by 2, got strides ", shape_str(a->strides), " and offset ", a->offset, "; call .contiguous() first.");
  return record_view<OpKind::view_as_complex>(real_as_complex_view(a), a);
}

Tensor permute(const Tensor& a, const Dims& dims) {
  const int64_t nd = a->ndim();
  DG_CHECK((int64_t)dims.size() == nd, RuntimeError, "permute: got ", dims.size(), " dims for a tensor of ", nd,
           " dimensions (shape ", shape_str(a->shape), ").");
  Shape shape(nd), strides(nd);
  std::vector<bool> seen(nd, false);
  Dims wrapped(nd);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = wrap_dim(dims[i], nd, "permute");
    DG_CHECK(!seen[d], RuntimeError, "permute: dim ", dims[i], " appears more than once in ", shape_str(dims), ".");
    seen[d] = true;
    wrapped[i] = d;
    shape[i] = a->shape[d];
    strides[i] = a->strides[d];
  }
  Tensor out = view_of(a, shape, strides, a->offset);
  if (any_requires_grad({&a})) {
    auto& node = record<OpKind::permute>(out, {&a});
    node.saved.dims = wrapped;
    mark_view(out, a);
  } else if (forward_ad::active() && !a->tangents.empty()) {
    mark_view(out, a);
  }
  if (forward_ad::active()) forward_tangents<OpKind::permute>(out, {&a}, SavesPermute{wrapped});
  return out;
}

Tensor transpose(const Tensor& a, int64_t d0, int64_t d1) {
  const int64_t nd = a->ndim();
  if (nd == 0) {
    wrap_dim(d0, nd, "transpose");
    wrap_dim(d1, nd, "transpose");
    return reshape(a, a->shape);
  }
  d0 = wrap_dim(d0, nd, "transpose");
  d1 = wrap_dim(d1, nd, "transpose");
  Dims perm(nd);
  for (int64_t i = 0; i < nd; ++i) perm[i] = i;
  std::swap(perm[d0], perm[d1]);
  return permute(a, perm);
}

Tensor mT(const Tensor& a) {
  DG_CHECK(a->ndim() >= 2, RuntimeError, "mT: expected a tensor of at least 2 dimensions, got shape ",
           shape_str(a->shape), ".");
  return transpose(a, -2, -1);
}

Tensor expand(const Tensor& a, const Shape& requested) {
  const int64_t nd = (int64_t)requested.size();
  DG_CHECK(nd >= a->ndim(), RuntimeError, "expand: the number of sizes (", nd,
           ") must be at least the number of dimensions of the tensor (", a->ndim(), ", shape ", shape_str(a->shape),
           ").");
  Shape shape(nd), strides(nd);
  const int64_t lead = nd - a->ndim();
  for (int64_t d = 0; d < nd; ++d) {
    int64_t want = requested[d];
    if (d < lead) {
      DG_CHECK(want >= 0, RuntimeError, "expand: size -1 is not allowed for a new leading dimension (", d, ").");
      shape[d] = want;
      strides[d] = 0;
    } else {
      int64_t have = a->shape[d - lead];
      if (want == -1) want = have;
      DG_CHECK(want == have || have == 1, RuntimeError, "expand: the size of dimension ", d, " (", have,
               ") must match the requested size ", want, " or be 1; tensor shape ", shape_str(a->shape),
               ", requested ", shape_str(requested), ".");
      shape[d] = want;
      strides[d] = (have == 1 && want != 1) ? 0 : a->strides[d - lead];
    }
  }
  if (shape == a->shape) return a;
  return record_view<OpKind::expand>(view_of(a, shape, strides, a->offset), a);
}

Tensor squeeze(const Tensor& a, std::optional<Dims> dims) {
  std::vector<bool> drop(a->ndim(), false);
  if (!dims) {
    for (int64_t d = 0; d < a->ndim(); ++d) drop[d] = a->shape[d] == 1;
  } else {
    for (int64_t d : *dims) {
      int64_t w = wrap_dim(d, a->ndim(), "squeeze");
      if (a->ndim() > 0 && a->shape[w] == 1) drop[w] = true;
    }
  }
  Shape shape;
  for (int64_t d = 0; d < a->ndim(); ++d)
    if (!drop[d]) shape.push_back(a->shape[d]);
  return reshape(a, shape);
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  int64_t d = wrap_dim(dim, a->ndim() + 1, "unsqueeze");
  Shape shape = a->shape;
  shape.insert(shape.begin() + d, 1);
  return reshape(a, shape);
}

Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  if (a->ndim() == 0) return reshape(a, {1});
  int64_t s = wrap_dim(start_dim, a->ndim(), "flatten"), e = wrap_dim(end_dim, a->ndim(), "flatten");
  DG_CHECK(s <= e, RuntimeError, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim, ".");
  Shape shape(a->shape.begin(), a->shape.begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d) n *= a->shape[d];
  shape.push_back(n);
  shape.insert(shape.end(), a->shape.begin() + e + 1, a->shape.end());
  return reshape(a, shape);
}

// out = a[..., start:stop:step, ...] along dim
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t stop, int64_t step) {
  DG_CHECK(a->ndim() > 0, IndexError, "slice: cannot slice a 0-d tensor.");
  int64_t d = wrap_dim(dim, a->ndim(), "slice");
  DG_CHECK(step > 0, ValueError, "slice: step must be positive, got ", step, ".");
  int64_t n = a->shape[d];
  if (start < 0) start += n;
  if (stop < 0) stop += n;
  start = std::clamp<int64_t>(start, 0, n);
  stop = std::clamp<int64_t>(stop, start, n);
  int64_t len = (stop - start + step - 1) / step;
  Shape shape = a->shape, strides = a->strides;
  shape[d] = len;
  strides[d] = a->strides[d] * step;
  Tensor out = view_of(a, shape, strides, a->offset + start * a->strides[d]);
  if (any_requires_grad({&a})) {
    auto& node = record<OpKind::slice>(out, {&a});
    node.saved.dim = d;
    node.saved.start = start;
    node.saved.step = step;
    mark_view(out, a);
  } else if (forward_ad::active() && !a->tangents.empty()) {
    mark_view(out, a);
  }
  if (forward_ad::active()) forward_tangents<OpKind::slice>(out, {&a}, SavesSlice{d, start, step});
  return out;
}

// out = zeros(input_shape) with out[..., start::step (len of grad), ...] = grad
Tensor slice_scatter(const Tensor& grad, const Shape& input_shape, int64_t dim, int64_t start, int64_t step) {
  Tensor out = zeros(input_shape, grad->dtype);
  Shape strides = out->strides;
  int64_t len = grad->shape[dim];
  Shape shape = input_shape;
  shape[dim] = len;
  strides[dim] *= step;
  Tensor window = make_view(out, shape, strides, start * out->strides[dim]);
  copy_into(window, grad);
  if (any_requires_grad({&grad})) {
    auto& node = record<OpKind::slice_scatter>(out, {&grad});
    node.saved.dim = dim;
    node.saved.start = start;
    node.saved.step = step;
  }
  if (forward_ad::active()) forward_tangents<OpKind::slice_scatter>(out, {&grad}, SavesSlice{dim, start, step});
  return out;
}

Tensor select(const Tensor& a, int64_t dim, int64_t index) {
  DG_CHECK(a->ndim() > 0, IndexError, "select: cannot index a 0-d tensor; use item() instead.");
  int64_t d = wrap_dim(dim, a->ndim(), "select");
  int64_t n = a->shape[d];
  DG_CHECK(index >= -n && index < n, IndexError, "index ", index, " is out of range for dimension ", d, " of size ",
           n, ".");
  if (index < 0) index += n;
  return squeeze(slice(a, d, index, index + 1, 1), Dims{d});
}

// out = concatenation along dim
Tensor cat(const std::vector<Tensor>& ts, int64_t dim) {
  DG_CHECK(!ts.empty(), RuntimeError, "cat: expected a non-empty list of tensors.");
  // torch skips 1-D empty tensors in cat
  const Tensor* ref = nullptr;
  for (auto& t : ts)
    if (!(t->ndim() == 1 && t->shape[0] == 0)) { ref = &t; break; }
  if (!ref) return clone(ts[0]);
  const int64_t nd = (*ref)->ndim();
  DG_CHECK(nd > 0, RuntimeError, "cat: zero-dimensional tensors cannot be concatenated; use stack.");
  int64_t d = wrap_dim(dim, nd, "cat");
  DType dt = ts[0]->dtype;
  for (auto& t : ts) dt = promote(dt, t->dtype);
  Shape shape = (*ref)->shape;
  shape[d] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    if (t->ndim() == 1 && t->shape[0] == 0) continue;
    DG_CHECK(t->ndim() == nd, RuntimeError, "cat: tensor ", i, " has ", t->ndim(), " dimensions (shape ",
             shape_str(t->shape), ") but tensor 0 has ", nd, " (shape ", shape_str((*ref)->shape), ").");
    for (int64_t k = 0; k < nd; ++k)
      DG_CHECK(k == d || t->shape[k] == (*ref)->shape[k], RuntimeError, "cat: sizes of tensors must match except in dim ",
               d, ": tensor ", i, " has shape ", shape_str(t->shape), ", expected ", shape_str((*ref)->shape),
               " apart from that dim.");
    shape[d] += t->shape[d];
  }
  Tensor out = empty(shape, dt);
  int64_t offset = 0;
  std::vector<int64_t> sizes;
  for (auto& t : ts) {
    int64_t len = (t->ndim() == 1 && t->shape[0] == 0) ? 0 : t->shape[d];
    sizes.push_back(len);
    if (len == 0) continue;
    Shape wshape = shape;
    wshape[d] = len;
    copy_into(make_view(out, wshape, out->strides, offset * out->strides[d]), t);
    offset += len;
  }
  if (any_requires_grad(ts)) {
    std::vector<const Tensor*> inputs;
    for (auto& t : ts) inputs.push_back(&t);
    auto& node = record<OpKind::cat>(out, inputs);
    node.saved.dim = d;
    node.saved.sizes = sizes;
  }
  if (forward_ad::active()) {
    std::vector<const Tensor*> inputs;
    for (auto& t : ts) inputs.push_back(&t);
    forward_tangents<OpKind::cat>(out, inputs, SavesCat{d, sizes});
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
  DG_CHECK(!ts.empty(), RuntimeError, "stack: expected a non-empty list of tensors.");
  int64_t d = wrap_dim(dim, ts[0]->ndim() + 1, "stack");
  for (size_t i = 1; i < ts.size(); ++i)
    DG_CHECK(ts[i]->shape == ts[0]->shape, RuntimeError, "stack: expects each tensor to be equal size, but got ",
             shape_str(ts[0]->shape), " at entry 0 and ", shape_str(ts[i]->shape), " at entry ", i, ".");
  std::vector<Tensor> us;
  us.reserve(ts.size());
  for (auto& t : ts) us.push_back(unsqueeze(t, d));
  return cat(us, d);
}

std::vector<Tensor> split(const Tensor& a, const Dims& sizes, int64_t dim) {
  // a 0-d tensor has no shape[d] to read (as torch: "split expects at least a 1-dimensional tensor")
  DG_CHECK(a->ndim() > 0, RuntimeError, "split: cannot split a 0-d tensor; it has no dimension to split along.");
  int64_t d = wrap_dim(dim, a->ndim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    DG_CHECK(s >= 0, RuntimeError, "split: sizes must be non-negative, got ", shape_str(sizes), ".");
    total += s;
  }
  DG_CHECK(total == a->shape[d], RuntimeError, "split: sizes ", shape_str(sizes), " sum to ", total,
           " but dimension ", d, " has size ", a->shape[d], ".");
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(slice(a, d, start, start + s, 1));
    start += s;
  }
  return out;
}

std::vector<Tensor> split_size(const Tensor& a, int64_t size, int64_t dim) {
  DG_CHECK(size > 0, RuntimeError, "split: split_size must be positive, got ", size, ".");
  DG_CHECK(a->ndim() > 0, RuntimeError, "split: cannot split a 0-d tensor; it has no dimension to split along.");
  int64_t d = wrap_dim(dim, a->ndim(), "split");
  Dims sizes;
  for (int64_t s = 0; s < a->shape[d]; s += size) sizes.push_back(std::min(size, a->shape[d] - s));
  if (sizes.empty()) sizes.push_back(0);
  return split(a, sizes, d);
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  DG_CHECK(chunks > 0, RuntimeError, "chunk: number of chunks must be positive, got ", chunks, ".");
  DG_CHECK(a->ndim() > 0, RuntimeError, "chunk: cannot chunk a 0-d tensor; it has no dimension to chunk along.");
  int64_t d = wrap_dim(dim, a->ndim(), "chunk");
  int64_t n = a->shape[d];
  int64_t size = std::max<int64_t>(1, (n + chunks - 1) / chunks);
  return split_size(a, size, d);
}

}  // namespace dyngrad
