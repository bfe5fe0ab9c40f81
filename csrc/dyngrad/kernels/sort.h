// sort.h: the orders of sort, argsort and topk along one dim (sort.cpp, Note [Sorting by keys]).
#pragma once
#include "../tensor.h"

namespace dyngrad {

// The order of a's elements along d (wrapped; a of any dtype, 0-d as one element): int64 indices of a's shape.
// NaN is the largest value (last ascending, first descending); -0.0 equals 0.0; with `stable` equal values keep
// their order in either direction, without it they come in any order (Note [Sorting by keys]).
// With `values`, also a's elements in that order into *values where a's dtype is its own key type (float32, float64,
// int64: the elements themselves, as gather would copy them), else *values is left empty.
Tensor sort_order_kernel(const Tensor& a, int64_t d, bool descending, bool stable, Tensor* values = nullptr);
// The first k (0 <= k <= size along d) of the stable order: int64 indices of a's shape with k along d.
Tensor topk_order_kernel(const Tensor& a, int64_t d, int64_t k, bool largest, Tensor* values = nullptr);

}  // namespace dyngrad
