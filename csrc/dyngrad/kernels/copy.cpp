// copy.cpp: strided copy with dtype conversion and broadcasting: contiguous(), to(dtype), expand materialised,
// in-place writes.
#include <cstring>
#include <type_traits>

#include "../errors.h"
#include "loop.h"

namespace dyngrad {

// float -> integer of NaN or of a value out of range is undefined in C++; give what x86 (and so numpy and torch)
// give: int64 takes INT64_MIN; the narrower integers go through int32 (INT32_MIN when out of range) and keep its low
// bits (300.0 -> int8 44). The 16-bit floats go through float32 (Note [Half types]).
// A complex value converts to a real dtype through its real part (torch's cast, which warns that the imaginary part is
// discarded; to bool: nonzero in either part); a real value to a complex dtype has a zero imaginary part.
template <typename D, typename S>
static inline D convert(S x) {
  if constexpr (is_complex_type_v<S> && is_complex_type_v<D>) {
    return D((typename D::value_type)x.real(), (typename D::value_type)x.imag());
  } else if constexpr (is_complex_type_v<S> && std::is_same_v<D, bool>) {
    return x.real() != 0 || x.imag() != 0;
  } else if constexpr (is_complex_type_v<S>) {
    return convert<D, typename S::value_type>(x.real());
  } else if constexpr (is_complex_type_v<D>) {
    return D((typename D::value_type)convert<double, S>(x), 0);
  } else if constexpr (is_half_type_v<S> && !std::is_same_v<D, S>) {
    return convert<D, float>(static_cast<float>(x));
  } else if constexpr (std::is_same_v<D, int64_t> && std::is_floating_point_v<S>) {
    if (!(x >= S(-9.2233720368547758e18) && x < S(9.2233720368547758e18))) return INT64_MIN;
    return static_cast<D>(x);
  } else if constexpr (std::is_integral_v<D> && !std::is_same_v<D, bool> && std::is_floating_point_v<S>) {
    if (!(x >= S(-2147483648.0) && x < S(2147483648.0))) return static_cast<D>(INT32_MIN);
    return static_cast<D>(static_cast<int32_t>(x));
  } else if constexpr (std::is_same_v<D, bool> && is_half_type_v<S>) {
    return static_cast<float>(x) != 0.0f;
  } else {
    return static_cast<D>(x);
  }
}

// One row of a copy. The strided loop is instantiated once, over a pointer to this function: a loop per pair of
// the ten dtypes would multiply the code of StridedLoop::run by 100.
using CopyRow = void (*)(char** p, const int64_t* s, int64_t m);
template <typename D, typename S>
static void copy_row(char** p, const int64_t* s, int64_t m) {
  if (s[0] == sizeof(D) && s[1] == sizeof(S)) {
    D* d = (D*)p[0];
    const S* x = (const S*)p[1];
    if constexpr (std::is_same_v<D, S>) {
      std::memcpy(d, x, m * sizeof(D));
    } else {
      for (int64_t i = 0; i < m; ++i) d[i] = convert<D, S>(x[i]);
    }
  } else {
    for (int64_t i = 0; i < m; ++i) *(D*)(p[0] + i * s[0]) = convert<D, S>(*(const S*)(p[1] + i * s[1]));
  }
}

static void copy_rows(const StridedLoop& loop, CopyRow row) {
  loop.run([row](char** p, const int64_t* s, int64_t m) { row(p, s, m); }, true);
}

template <typename D, typename S>
static void copy_typed(const StridedLoop& loop) { copy_rows(loop, &copy_row<D, S>); }

void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst->numel == 0) return;
  // the last line of defence of Note [Writable tensors]: callers name their op in check_writable first
  if (dst->storage->read_only) throw RuntimeError(err_read_only("copy_"));
  broadcast_shapes(dst->shape, src->shape, "copy_");  // checks src broadcasts to dst
  DG_CHECK(shape_numel(broadcast_shapes(dst->shape, src->shape, "copy_")) == dst->numel, RuntimeError,
           "copy_: a tensor of shape ", shape_str(src->shape), " cannot be written into shape ",
           shape_str(dst->shape), ".");
  if (dst->dtype == src->dtype && dst->is_contiguous() && src->is_contiguous() && src->numel == dst->numel) {
    if (dst->raw() != src->raw()) std::memmove(dst->raw(), src->raw(), dst->numel * dst->itemsize());
    return;
  }
  // Writing a tensor into memory it overlaps (x.copy_(x.T)) needs a snapshot first.
  Tensor s = src;
  if (src->storage == dst->storage && !(src->offset == dst->offset && src->strides == dst->strides))
    s = contiguous_copy(src, src->dtype);
  StridedLoop loop({dst.get(), s.get()});
  DG_DISPATCH_STORAGE(dst->dtype, D, { DG_DISPATCH_STORAGE(s->dtype, S, copy_typed<D, S>(loop)); });
}

Tensor contiguous_copy(const Tensor& t, DType dtype) {
  Tensor out = empty(t->shape, dtype);
  if (out->numel == 0) return out;
  StridedLoop loop({out.get(), t.get()});
  DG_DISPATCH_STORAGE(dtype, D, { DG_DISPATCH_STORAGE(t->dtype, S, copy_typed<D, S>(loop)); });
  return out;
}

}  // namespace dyngrad
