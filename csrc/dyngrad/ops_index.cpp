// ops_index.cpp: indexing: index_select, gather, take and their adjoints, put, masked_fill. Each op checks its
// arguments and every index, runs its loop (kernels/index.cpp) and records the node.
#include "ops_common.h"

namespace dyngrad {

static Tensor checked_index(const Tensor& index, const char* op) {
  // torch takes int32 indices too; they are widened here, once, so that the loops read int64 only
  if (index->dtype == DType::Int32) return contiguous_copy(index, DType::Int64);
  DG_CHECK(index->dtype == DType::Int64, IndexError, op, ": indices must be an int64 or int32 tensor, got ",
           dtype_name(index->dtype), ".");
  return contiguous_data(index);
}

// index_select, gather and their adjoints take indices in [0, size), as torch: a negative index is an error there
// (it used to wrap, so nll_loss with target -1 picked the last class). Indexing with [] keeps Python's negatives.
// IndexError for index_select and index_add, RuntimeError for gather and scatter_add, as torch.
template <class Error = IndexError>
static void check_bounds(const Tensor& index, int64_t size, int64_t dim, const char* op) {
  const int64_t* idx = index->data<int64_t>();
  for (int64_t i = 0; i < index->numel; ++i)
    DG_CHECK(idx[i] >= 0 && idx[i] < size, Error, op, ": index ", idx[i], " is out of range for dimension ", dim,
             " of size ", size, ".");
}

template <OpKind K>
static void record_index(const Tensor& out, const Tensor& input, const Tensor& index, int64_t d) {
  if (any_requires_grad({&input})) {
    auto& node = record<K>(out, {&input});
    node.saved.index.save(index, false);
    node.saved.dim = d;
  }
  if (forward_ad::active()) forward_tangents<K>(out, {&input}, SavesIndex{index, d});
}

// out = a.index_select(dim, index)
Tensor index_select(const Tensor& a_in, int64_t dim, const Tensor& index_in) {
  DG_CHECK(index_in->ndim() <= 1, IndexError, "index_select: index must be 0-d or 1-D, got shape ",
           shape_str(index_in->shape), ".");
  Tensor index = checked_index(index_in, "index_select");
  Tensor a = contiguous_data(a_in);
  int64_t d = wrap_dim(dim, a->ndim(), "index_select");
  // a 0-d result has room for one element (as torch: "Index to scalar can have only 1 value")
  DG_CHECK(a->ndim() || index->numel == 1, RuntimeError, "index_select: a 0-d tensor takes exactly one index, got ",
           index->numel, ".");
  check_bounds(index, a->ndim() ? a->shape[d] : 1, d, "index_select");
  Tensor out = index_select_kernel(a, d, index);
  record_index<OpKind::index_select>(out, a_in, index, d);
  return out;
}

// out = zeros(out_shape); out.index_select(dim, index) += src
Tensor index_add(const Tensor& src_in, int64_t d, const Tensor& index_in, const Shape& out_shape) {
  if (is_half(src_in->dtype))  // Note [Half types]: accumulated in float32 (differentiably), rounded once
    return to_dtype(index_add(to_dtype(src_in, DType::Float32), d, index_in, out_shape), src_in->dtype);
  Tensor index = checked_index(index_in, "index_add");
  DG_CHECK(index->ndim() <= 1, IndexError, "index_add: index must be 0-d or 1-D, got shape ", shape_str(index->shape),
           ".");
  d = wrap_dim(d, (int64_t)out_shape.size(), "index_add");
  Shape src_shape = out_shape;
  if (!src_shape.empty()) src_shape[d] = index->numel;
  DG_CHECK(src_in->shape == src_shape, RuntimeError, "index_add: src of shape ", shape_str(src_in->shape),
           " does not fit an output of shape ", shape_str(out_shape), " with ", index->numel,
           " indices along dim ", d, " (expected ", shape_str(src_shape), ").");
  check_bounds(index, out_shape.empty() ? 1 : out_shape[d], d, "index_add");
  Tensor out = index_add_kernel(contiguous_data(src_in), d, index, out_shape);
  record_index<OpKind::index_add>(out, src_in, index, d);
  return out;
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
  check_bounds<RuntimeError>(index, index->ndim() ? a->shape[d] : 1, d, "gather");
  Tensor out = gather_kernel(a, d, index);
  record_index<OpKind::gather>(out, a_in, index, d);
  return out;
}

// out = zeros(out_shape); out[i][index[i][j]] += src[i][j]
Tensor scatter_add(const Tensor& src_in, int64_t d, const Tensor& index_in, const Shape& out_shape) {
  if (is_half(src_in->dtype))  // Note [Half types]
    return to_dtype(scatter_add(to_dtype(src_in, DType::Float32), d, index_in, out_shape), src_in->dtype);
  Tensor index = checked_index(index_in, "scatter_add");
  const int64_t nd = index->ndim();
  DG_CHECK(src_in->ndim() == nd && (int64_t)out_shape.size() == nd, RuntimeError,
           "scatter_add: src, index and the output need one number of dimensions, got shapes ",
           shape_str(src_in->shape), ", ", shape_str(index->shape), " and ", shape_str(out_shape), ".");
  d = wrap_dim(d, nd, "scatter_add");
  for (int64_t k = 0; k < nd; ++k)
    DG_CHECK(index->shape[k] <= src_in->shape[k] && (k == d || index->shape[k] <= out_shape[k]), RuntimeError,
             "scatter_add: index of shape ", shape_str(index->shape), " is larger than src (", shape_str(src_in->shape),
             ") or, outside dim ", d, ", the output (", shape_str(out_shape), ") in dimension ", k, ".");
  check_bounds<RuntimeError>(index, nd ? out_shape[d] : 1, d, "scatter_add");
  // src's elements at index's positions (all of src when the shapes agree), as torch
  Tensor src = src_in->shape == index->shape ? contiguous_data(src_in)
                                             : contiguous_copy(make_view(src_in, index->shape, src_in->strides,
                                                                         src_in->offset), src_in->dtype);
  Tensor out = scatter_add_kernel(src, d, index, out_shape);
  record_index<OpKind::scatter_add>(out, src_in, index, d);
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
  Tensor out = take_kernel(a, positions);
  if (any_requires_grad({&a_in})) record<OpKind::take>(out, {&a_in}).saved.positions.save(positions, false);
  if (forward_ad::active()) forward_tangents<OpKind::take>(out, {&a_in}, SavesPositions{positions});
  return out;
}

// out = a with out.flatten()[positions] = v (v broadcast to positions' shape)
Tensor put(const Tensor& a, const Tensor& positions_in, const Tensor& v_in) {
  Tensor positions = checked_index(positions_in, "put");
  check_positions(positions, a->numel, "put");
  DType dt = a->dtype;
  Tensor v = contiguous_copy(expand(v_in->requires_grad ? alias(v_in) : v_in, positions->shape), dt);
  Tensor out = contiguous_copy(a, dt);
  put_kernel(out, positions, v);
  if (any_requires_grad({&a, &v_in})) record<OpKind::put>(out, {&a, &v_in}).saved.positions.save(positions, false);
  if (forward_ad::active()) forward_tangents<OpKind::put>(out, {&a, &v_in}, SavesPositions{positions});
  return out;
}

// out = zeros(out_shape) with out.flatten()[positions] += v
Tensor put_add(const Tensor& v_in, const Tensor& positions_in, const Shape& out_shape) {
  if (is_half(v_in->dtype))  // Note [Half types]
    return to_dtype(put_add(to_dtype(v_in, DType::Float32), positions_in, out_shape), v_in->dtype);
  Tensor positions = checked_index(positions_in, "put_add");
  DG_CHECK(v_in->shape == positions->shape, RuntimeError, "put_add: values of shape ", shape_str(v_in->shape),
           " for positions of shape ", shape_str(positions->shape), "; expected one value per position.");
  check_positions(positions, shape_numel(out_shape), "put_add");
  Tensor out = put_add_kernel(contiguous_data(v_in), positions, out_shape);
  if (any_requires_grad({&v_in})) record<OpKind::put_add>(out, {&v_in}).saved.positions.save(positions, false);
  if (forward_ad::active()) forward_tangents<OpKind::put_add>(out, {&v_in}, SavesPositions{positions});
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

}  // namespace dyngrad
