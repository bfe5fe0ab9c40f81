// ops_shape.cpp: conversion, views and movement, indexing, and in-place writes.
#include <algorithm>
#include <cstring>

#include "errors.h"
#include "ops_common.h"

namespace dyngrad {

// ---------------- conversion ----------------

Tensor to_dtype(const Tensor& a, DType dtype) {
  if (a->dtype == dtype) return a;
  Tensor out = contiguous_copy(a, dtype);
  if (is_floating(dtype) && any_requires_grad({&a})) record<OpKind::to_dtype>(out, {&a});
  return out;
}

Tensor clone(const Tensor& a) {
  Tensor out = contiguous_copy(a, a->dtype);
  if (any_requires_grad({&a})) record<OpKind::clone>(out, {&a});
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

template <OpKind K>
static Tensor record_view(const Tensor& out, const Tensor& a) {
  if (any_requires_grad({&a})) {
    record<K>(out, {&a});
    mark_view(out, a);
  }
  return out;
}

Tensor reshape(const Tensor& a, const Shape& requested) {
  Shape shape = infer_shape(requested, a->numel, a->shape, "reshape");
  if (shape == a->shape) return a->requires_grad ? record_view<OpKind::reshape>(alias(a), a) : alias(a);
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
  }
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
  }
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
    node.saved.sizes = std::move(sizes);
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

// ---------------- indexing ----------------

static Tensor checked_index(const Tensor& index, const char* op) {
  // torch takes int32 indices too; they are widened here, once, so that the loops below read int64 only
  if (index->dtype == DType::Int32) return contiguous_copy(index, DType::Int64);
  DG_CHECK(index->dtype == DType::Int64, IndexError, op, ": indices must be an int64 or int32 tensor, got ",
           dtype_name(index->dtype), ".");
  return contiguous_data(index);
}

// index_select, gather and their adjoints take indices in [0, size), as torch: a negative index is an error there
// (it used to wrap, so nll_loss with target -1 picked the last class). Indexing with [] keeps Python's negatives.
static void check_bounds(const int64_t* idx, int64_t n, int64_t size, int64_t dim, const char* op) {
  for (int64_t i = 0; i < n; ++i)
    DG_CHECK(idx[i] >= 0 && idx[i] < size, IndexError, op, ": index ", idx[i], " is out of range for dimension ",
             dim, " of size ", size, ".");
}

// out = a.index_select(dim, index)
Tensor index_select(const Tensor& a_in, int64_t dim, const Tensor& index_in) {
  DG_CHECK(index_in->ndim() <= 1, IndexError, "index_select: index must be 0-d or 1-D, got shape ",
           shape_str(index_in->shape), ".");
  Tensor index = checked_index(index_in, "index_select");
  Tensor a = contiguous_data(a_in);
  int64_t d = wrap_dim(dim, a->ndim(), "index_select");
  const int64_t n = index->numel;
  const int64_t size = a->ndim() ? a->shape[d] : 1;
  // a 0-d result has room for one element (as torch: "Index to scalar can have only 1 value")
  DG_CHECK(a->ndim() || n == 1, RuntimeError, "index_select: a 0-d tensor takes exactly one index, got ", n, ".");
  const int64_t* idx = index->data<int64_t>();
  check_bounds(idx, n, size, d, "index_select");
  Shape shape = a->shape;
  if (a->ndim()) shape[d] = n;
  Tensor out = empty(shape, a->dtype);
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= a->shape[k];
  for (int64_t k = d + 1; k < a->ndim(); ++k) inner *= a->shape[k];
  const size_t item = a->itemsize();
  const char* src = a->raw();
  char* dst = out->raw();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n; ++i) {
      int64_t j = idx[i];
      std::memcpy(dst + ((o * n + i) * inner) * item, src + ((o * size + j) * inner) * item, inner * item);
    }
  if (any_requires_grad({&a_in})) {
    auto& node = record<OpKind::index_select>(out, {&a_in});
    node.saved.index.save(index, false);
    node.saved.dim = d;
  }
  return out;
}

// out = zeros(out_shape); out.index_select(dim, index) += src
Tensor index_add(const Tensor& src_in, int64_t d, const Tensor& index_in, const Shape& out_shape) {
  if (is_half(src_in->dtype))  // Note [Half types]: accumulated in float32 (differentiably), rounded once
    return to_dtype(index_add(to_dtype(src_in, DType::Float32), d, index_in, out_shape), src_in->dtype);
  Tensor index = checked_index(index_in, "index_add");
  Tensor src = contiguous_data(src_in);
  Tensor out = zeros(out_shape, src->dtype);
  const int64_t n = index->numel;
  const int64_t size = out_shape.empty() ? 1 : out_shape[d];
  const int64_t* idx = index->data<int64_t>();
  check_bounds(idx, n, size, d, "index_add");
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= out_shape[k];
  for (int64_t k = d + 1; k < (int64_t)out_shape.size(); ++k) inner *= out_shape[k];
  DG_DISPATCH_INTEGERS(src->dtype, T, {
    const T* s = src->data<T>();
    T* o = out->data<T>();
    for (int64_t q = 0; q < outer; ++q)
      for (int64_t i = 0; i < n; ++i) {
        int64_t j = idx[i];
        T* row = o + (q * size + j) * inner;
        const T* in = s + (q * n + i) * inner;
        for (int64_t k = 0; k < inner; ++k) row[k] += in[k];
      }
  });
  if (any_requires_grad({&src_in})) {
    auto& node = record<OpKind::index_add>(out, {&src_in});
    node.saved.index.save(index, false);
    node.saved.dim = d;
  }
  return out;
}

// Walks every position of `index` (contiguous), giving (flat position in index, flat position in a tensor of
// `shape` where dim `d` is replaced by the index value).
template <typename F>
static void for_each_gather_position(const Tensor& index, const Shape& shape, int64_t d, const char* op, F&& f) {
  const int64_t nd = index->ndim();
  Shape strides = contiguous_strides(shape);
  Shape pos(nd, 0);
  const int64_t* idx = index->data<int64_t>();
  const int64_t size = nd ? shape[d] : 1;
  for (int64_t i = 0; i < index->numel; ++i) {
    int64_t j = idx[i];
    // RuntimeError for gather/scatter, as torch (index_select's IndexError is its own check above)
    DG_CHECK(j >= 0 && j < size, RuntimeError, op, ": index ", j, " is out of range for dimension ", d, " of size ",
             size, ".");
    int64_t flat = 0;
    for (int64_t k = 0; k < nd; ++k) flat += (k == d ? j : pos[k]) * strides[k];
    f(i, flat);
    for (int64_t k = nd - 1; k >= 0; --k) {
      if (++pos[k] < index->shape[k]) break;
      pos[k] = 0;
    }
  }
}

static void check_gather_shapes(const Tensor& a, int64_t d, const Tensor& index, const char* op) {
  DG_CHECK(index->ndim() == a->ndim(), RuntimeError, op, ": index has ", index->ndim(),
           " dimensions but the input has ", a->ndim(), " (shapes ", shape_str(index->shape), " and ",
           shape_str(a->shape), ").");
  for (int64_t k = 0; k < a->ndim(); ++k)
    DG_CHECK(k == d || index->shape[k] <= a->shape[k], RuntimeError, op, ": index shape ", shape_str(index->shape),
             " is larger than the input shape ", shape_str(a->shape), " in dimension ", k, ".");
}

// out[i][j] = a[i][index[i][j]] (dim 1)
Tensor gather(const Tensor& a_in, int64_t dim, const Tensor& index_in) {
  Tensor index = checked_index(index_in, "gather");
  Tensor a = contiguous_data(a_in);
  int64_t d = wrap_dim(dim, a->ndim(), "gather");
  check_gather_shapes(a, d, index, "gather");
  Tensor out = empty(index->shape, a->dtype);
  const size_t item = a->itemsize();
  for_each_gather_position(index, a->shape, d, "gather", [&](int64_t i, int64_t flat) {
    std::memcpy(out->raw() + i * item, a->raw() + flat * item, item);
  });
  if (any_requires_grad({&a_in})) {
    auto& node = record<OpKind::gather>(out, {&a_in});
    node.saved.index.save(index, false);
    node.saved.dim = d;
  }
  return out;
}

// out = zeros(out_shape); out[i][index[i][j]] += src[i][j]
Tensor scatter_add(const Tensor& src_in, int64_t d, const Tensor& index_in, const Shape& out_shape) {
  if (is_half(src_in->dtype))  // Note [Half types]
    return to_dtype(scatter_add(to_dtype(src_in, DType::Float32), d, index_in, out_shape), src_in->dtype);
  Tensor index = checked_index(index_in, "scatter_add");
  Tensor src = contiguous_data(src_in);
  Tensor out = zeros(out_shape, src->dtype);
  DG_DISPATCH_INTEGERS(src->dtype, T, {
    const T* s = src->data<T>();
    T* o = out->data<T>();
    for_each_gather_position(index, out_shape, d, "scatter_add", [&](int64_t i, int64_t flat) { o[flat] += s[i]; });
  });
  if (any_requires_grad({&src_in})) {
    auto& node = record<OpKind::scatter_add>(out, {&src_in});
    node.saved.index.save(index, false);
    node.saved.dim = d;
  }
  return out;
}

static void check_positions(const Tensor& positions, int64_t numel, const char* op) {
  const int64_t* p = positions->data<int64_t>();
  for (int64_t i = 0; i < positions->numel; ++i)
    DG_CHECK(p[i] >= 0 && p[i] < numel, IndexError, op, ": flat position ", p[i],
             " is out of range for a tensor of ", numel, " elements.");
}

// out = a.flatten()[positions]
Tensor take(const Tensor& a_in, const Tensor& positions_in) {
  Tensor positions = checked_index(positions_in, "take");
  Tensor a = contiguous_data(a_in);
  check_positions(positions, a->numel, "take");
  Tensor out = empty(positions->shape, a->dtype);
  const int64_t* p = positions->data<int64_t>();
  auto gather_items = [&](auto item) {  // typed by item size, so the copy is one load and store
    using I = decltype(item);
    const I* src = reinterpret_cast<const I*>(a->raw());
    I* dst = reinterpret_cast<I*>(out->raw());
    for (int64_t i = 0; i < positions->numel; ++i) dst[i] = src[p[i]];
  };
  switch (a->itemsize()) {
    case 1: gather_items(uint8_t{}); break;
    case 2: gather_items(uint16_t{}); break;
    case 4: gather_items(uint32_t{}); break;
    default: gather_items(uint64_t{}); break;
  }
  if (any_requires_grad({&a_in})) record<OpKind::take>(out, {&a_in}).saved.positions.save(positions, false);
  return out;
}

// out = a with out.flatten()[positions] = v (v broadcast to positions' shape)
Tensor put(const Tensor& a, const Tensor& positions_in, const Tensor& v_in) {
  Tensor positions = checked_index(positions_in, "put");
  check_positions(positions, a->numel, "put");
  DType dt = a->dtype;
  Tensor v = contiguous_copy(expand(v_in->requires_grad ? alias(v_in) : v_in, positions->shape), dt);
  Tensor out = contiguous_copy(a, dt);
  const int64_t* p = positions->data<int64_t>();
  const size_t item = out->itemsize();
  for (int64_t i = 0; i < positions->numel; ++i) std::memcpy(out->raw() + p[i] * item, v->raw() + i * item, item);
  if (any_requires_grad({&a, &v_in})) record<OpKind::put>(out, {&a, &v_in}).saved.positions.save(positions, false);
  return out;
}

// out = zeros(out_shape) with out.flatten()[positions] += v
Tensor put_add(const Tensor& v_in, const Tensor& positions_in, const Shape& out_shape) {
  if (is_half(v_in->dtype))  // Note [Half types]
    return to_dtype(put_add(to_dtype(v_in, DType::Float32), positions_in, out_shape), v_in->dtype);
  Tensor positions = checked_index(positions_in, "put_add");
  Tensor out = zeros(out_shape, v_in->dtype);
  check_positions(positions, out->numel, "put_add");
  Tensor v = contiguous_data(v_in);
  const int64_t* p = positions->data<int64_t>();
  DG_DISPATCH_INTEGERS(v->dtype, T, {
    const T* s = v->data<T>();
    T* o = out->data<T>();
    for (int64_t i = 0; i < positions->numel; ++i) o[p[i]] += s[i];
  });
  if (any_requires_grad({&v_in})) record<OpKind::put_add>(out, {&v_in}).saved.positions.save(positions, false);
  return out;
}

// masked_fill(a, mask, value) = where(mask, value, a)
Tensor masked_fill(const Tensor& a, const Tensor& mask, const Tensor& value) {
  DG_CHECK(mask->dtype == DType::Bool, TypeError, "masked_fill: mask must be a bool tensor, got ",
           dtype_name(mask->dtype), ".");
  DG_CHECK(value->ndim() == 0, RuntimeError, "masked_fill: value must be a number or a 0-d tensor, got shape ",
           shape_str(value->shape), ".");
  Shape out_shape = broadcast_shapes(a->shape, mask->shape, "masked_fill");
  DG_CHECK(out_shape == a->shape, RuntimeError, "masked_fill: mask of shape ", shape_str(mask->shape),
           " does not broadcast to the input shape ", shape_str(a->shape), ".");
  Tensor v = value->dtype == a->dtype ? value : to_dtype(value, a->dtype);
  return where(mask, v, a);
}

// ---------------- in-place ----------------

Tensor inplace_input(const Tensor& self, const char* op, bool other_requires_grad) {
  check_writable(self, op);  // Note [Writable tensors]
  if (!grad_enabled()) return self;
  if (self->requires_grad && self->is_leaf()) throw RuntimeError(err_leaf_inplace(op));
  if (!self->requires_grad && !other_requires_grad) return self;
  if (self->is_view) {
    const Tensor& base = self->view_base;
    if (base->requires_grad && base->is_leaf()) throw RuntimeError(err_leaf_inplace(op));
    DG_CHECK(base->is_contiguous(), NotImplementedError, op, ": in-place writes into a view of a non-contiguous ",
             "tensor that requires grad are not supported; write into the base tensor or use out-of-place ops.");
  }
  // The out-of-place op reads self's current value, which the write is about to replace; give it a snapshot
  // that carries self's history so that any saved copy stays valid (Note [Saved tensor versions]).
  Tensor before = contiguous_copy(self, self->dtype);
  before->requires_grad = self->requires_grad;
  before->grad_fn = self->grad_fn;
  before->output_nr = self->output_nr;
  return before;
}

// A tensor with t's memory and the given history, to feed t's current value into a recorded op.
static Tensor with_history(const Tensor& t, const Tensor& history_of) {
  Tensor h = alias(t);
  h->requires_grad = history_of->requires_grad;
  h->grad_fn = history_of->grad_fn;
  h->output_nr = history_of->output_nr;
  return h;
}

// Flat positions, in the (contiguous) base, of the view's elements: the view's index map as an int64 tensor.
static Tensor view_positions(const Tensor& view, const Tensor& base) {
  Tensor pos = empty(view->shape, DType::Int64);
  int64_t* p = pos->data<int64_t>();
  std::vector<int64_t> idx(view->shape.size(), 0);
  for (int64_t i = 0; i < view->numel; ++i) {
    int64_t at = view->offset - base->offset;
    for (size_t d = 0; d < idx.size(); ++d) at += idx[d] * view->strides[d];
    p[i] = at;
    for (int64_t d = (int64_t)idx.size() - 1; d >= 0 && ++idx[d] == view->shape[d]; --d) idx[d] = 0;
  }
  return pos;
}

// Note [In-place writes into views]: writing into a view changes its base too. As torch's CopySlices does, the
// base's history becomes put(base, positions of the view, result) and the view's history becomes a view (take)
// of that new base, so gradients reach both the old base and the value written. put and take save only the
// positions, so the tensors passed as their inputs just carry history (their memory already holds the result).
static void rebase_view_history(const Tensor& view, const Tensor& result) {
  const Tensor& base = view->view_base;
  Tensor positions = view_positions(view, base);
  Tensor new_base = put(with_history(base, base), positions, result);
  base->requires_grad = true;
  base->grad_fn = new_base->grad_fn;
  base->output_nr = new_base->output_nr;
  Tensor new_view = take(with_history(base, base), positions);
  view->requires_grad = true;
  view->grad_fn = new_view->grad_fn;
  view->output_nr = new_view->output_nr;
}

static int dtype_category(DType d) { return d == DType::Bool ? 0 : (is_floating(d) ? 2 : 1); }

void assign_inplace(const Tensor& self, const Tensor& result, const char* op) {
  DG_CHECK(result->shape == self->shape, RuntimeError, op, ": the result of shape ", shape_str(result->shape),
           " does not fit the tensor written in place, of shape ", shape_str(self->shape), ".");
  // as torch: a float result is not written into an int tensor, nor an int one into a bool tensor
  DG_CHECK(dtype_category(result->dtype) <= dtype_category(self->dtype), RuntimeError, op, ": the result type ",
           dtype_name(result->dtype), " can't be cast to the tensor's type ", dtype_name(self->dtype), ".");
  if (grad_enabled() && self->requires_grad && self->is_leaf()) throw RuntimeError(err_leaf_inplace(op));
  write_into(self, result, op);
  if (result->requires_grad && grad_enabled() && self->is_view) {
    rebase_view_history(self, result);
    return;
  }
  if (result->requires_grad && grad_enabled()) {
    self->requires_grad = true;
    self->grad_fn = result->grad_fn;
    self->output_nr = result->output_nr;
  }
}

void copy_(const Tensor& self, const Tensor& src) {
  if (any_requires_grad({&self, &src})) {
    Tensor before = inplace_input(self, "copy_", src->requires_grad);  // also checks leaf / view rules
    // self's old value is overwritten entirely: it gets a zero gradient (as in torch), the new value src's
    Tensor all = full(self->shape, 1.0, DType::Bool);
    assign_inplace(self, clone(where(all, to_dtype(expand(src, self->shape), self->dtype), before)), "copy_");
    return;
  }
  broadcast_shapes(self->shape, src->shape, "copy_");
  write_into(self, src, "copy_");
}

void fill_(const Tensor& self, const Tensor& value_in) {
  DG_CHECK(value_in->ndim() == 0, RuntimeError, "fill_: the value must be a number or a 0-d tensor, got shape ",
           shape_str(value_in->shape), ".");
  Tensor value = value_in->dtype == self->dtype ? value_in : to_dtype(value_in, self->dtype);
  if (grad_enabled() && self->requires_grad) {
    Tensor before = inplace_input(self, "fill_", false);
    // the old value gets a zero gradient; where, not multiplying by 0, which would turn inf into nan
    Tensor all = full(self->shape, 1.0, DType::Bool);
    Tensor zeroed = where(all, scalar_tensor(0, self->dtype), before);
    assign_inplace(self, add(zeroed, alias(value)), "fill_");
    return;
  }
  write_into(self, value, "fill_");
}

void fill_(const Tensor& self, double value) { fill_(self, scalar_tensor(value, self->dtype)); }

void zero_(const Tensor& self) { fill_(self, 0.0); }

}  // namespace dyngrad
