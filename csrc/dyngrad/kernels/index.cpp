// index.cpp: the indexing loops (kernels.h): gathers and their adjoints along a dim or at flat positions, and the
// flat positions of a view in its base. Operands are contiguous and every index was checked by the op (ops_index.cpp).
#include <cstring>

#include "kernels.h"

namespace dyngrad {

namespace {

// a's dims before `d` multiplied (outer) and after it (inner): a row-major tensor is (outer, size of d, inner)
void split_at(const Shape& shape, int64_t d, int64_t& outer, int64_t& inner) {
  outer = inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= shape[k];
  for (int64_t k = d + 1; k < (int64_t)shape.size(); ++k) inner *= shape[k];
}

// Every position of `index` (contiguous) with f(position in index, flat position in a tensor of `shape` whose dim d
// is replaced by the index value there): gather's and scatter_add's walk.
template <typename F>
void for_each_gather_position(const Tensor& index, const Shape& shape, int64_t d, F&& f) {
  const int64_t nd = index->ndim();
  const Shape strides = contiguous_strides(shape);
  Shape pos(nd, 0);
  const int64_t* idx = index->data<int64_t>();
  for (int64_t i = 0; i < index->numel; ++i) {
    int64_t flat = 0;
    for (int64_t k = 0; k < nd; ++k) flat += (k == d ? idx[i] : pos[k]) * strides[k];
    f(i, flat);
    for (int64_t k = nd - 1; k >= 0; --k) {
      if (++pos[k] < index->shape[k]) break;
      pos[k] = 0;
    }
  }
}

// copies item by item, typed by the item size, so that each copy is one load and one store (two for complex128)
struct Item16 {
  uint64_t lo, hi;
};
template <typename F>
void by_item_size(size_t item, F&& f) {
  switch (item) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 16: f(Item16{}); break;
    default: f(uint64_t{}); break;
  }
}

// the adjoints' sums: the types the callers compute in, and complex (std::complex has +=)
#define DG_DISPATCH_SUMMABLE(dt, T, ...)                                                          \
  switch (dt) {                                                                                 \
    case ::dyngrad::DType::Complex64: { using T = ::dyngrad::complex64_t; __VA_ARGS__; break; }   \
    case ::dyngrad::DType::Complex128: { using T = ::dyngrad::complex128_t; __VA_ARGS__; break; } \
    default: DG_DISPATCH_INTEGERS(dt, T, __VA_ARGS__);                                          \
  }

}  // namespace

Tensor index_select_kernel(const Tensor& a, int64_t d, const Tensor& index) {
  const int64_t n = index->numel, size = a->ndim() ? a->shape[d] : 1;
  Shape shape = a->shape;
  if (a->ndim()) shape[d] = n;
  Tensor out = empty(shape, a->dtype);
  int64_t outer, inner;
  split_at(a->shape, d, outer, inner);
  const int64_t* idx = index->data<int64_t>();
  const size_t item = a->itemsize();
  const char* src = a->raw();
  char* dst = out->raw();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + ((o * n + i) * inner) * item, src + ((o * size + idx[i]) * inner) * item, inner * item);
  return out;
}

Tensor index_add_kernel(const Tensor& src, int64_t d, const Tensor& index, const Shape& out_shape) {
  Tensor out = zeros(out_shape, src->dtype);
  const int64_t n = index->numel, size = out_shape.empty() ? 1 : out_shape[d];
  int64_t outer, inner;
  split_at(out_shape, d, outer, inner);
  const int64_t* idx = index->data<int64_t>();
  DG_DISPATCH_SUMMABLE(src->dtype, T, {
    const T* s = src->data<T>();
    T* o = out->data<T>();
    for (int64_t q = 0; q < outer; ++q)
      for (int64_t i = 0; i < n; ++i) {
        T* row = o + (q * size + idx[i]) * inner;
        const T* in = s + (q * n + i) * inner;
        for (int64_t k = 0; k < inner; ++k) row[k] += in[k];
      }
  });
  return out;
}

Tensor gather_kernel(const Tensor& a, int64_t d, const Tensor& index) {
  Tensor out = empty(index->shape, a->dtype);
  by_item_size(a->itemsize(), [&](auto item) {
    using I = decltype(item);
    const I* src = reinterpret_cast<const I*>(a->raw());
    I* dst = reinterpret_cast<I*>(out->raw());
    for_each_gather_position(index, a->shape, d, [&](int64_t i, int64_t flat) { dst[i] = src[flat]; });
  });
  return out;
}

Tensor scatter_add_kernel(const Tensor& src, int64_t d, const Tensor& index, const Shape& out_shape) {
  Tensor out = zeros(out_shape, src->dtype);
  DG_DISPATCH_SUMMABLE(src->dtype, T, {
    const T* s = src->data<T>();
    T* o = out->data<T>();
    for_each_gather_position(index, out_shape, d, [&](int64_t i, int64_t flat) { o[flat] += s[i]; });
  });
  return out;
}

Tensor take_kernel(const Tensor& a, const Tensor& positions) {
  Tensor out = empty(positions->shape, a->dtype);
  const int64_t* p = positions->data<int64_t>();
  by_item_size(a->itemsize(), [&](auto item) {
    using I = decltype(item);
    const I* src = reinterpret_cast<const I*>(a->raw());
    I* dst = reinterpret_cast<I*>(out->raw());
    for (int64_t i = 0; i < positions->numel; ++i) dst[i] = src[p[i]];
  });
  return out;
}

void put_kernel(const Tensor& out, const Tensor& positions, const Tensor& v) {
  const int64_t* p = positions->data<int64_t>();
  by_item_size(out->itemsize(), [&](auto item) {
    using I = decltype(item);
    I* dst = reinterpret_cast<I*>(out->raw());
    const I* src = reinterpret_cast<const I*>(v->raw());
    for (int64_t i = 0; i < positions->numel; ++i) dst[p[i]] = src[i];
  });
}

Tensor put_add_kernel(const Tensor& v, const Tensor& positions, const Shape& out_shape) {
  Tensor out = zeros(out_shape, v->dtype);
  const int64_t* p = positions->data<int64_t>();
  DG_DISPATCH_SUMMABLE(v->dtype, T, {
    const T* s = v->data<T>();
    T* o = out->data<T>();
    for (int64_t i = 0; i < positions->numel; ++i) o[p[i]] += s[i];
  });
  return out;
}

Tensor view_positions_kernel(const Tensor& view, const Tensor& base) {
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

}  // namespace dyngrad
