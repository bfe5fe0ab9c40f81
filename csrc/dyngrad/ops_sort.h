// ops_sort.h: sort, argsort, topk, cummax and cummin along one dim (ops_sort.cpp). Not primitives: the order has no gradient
// and the values are gather(a, dim, indices), whose node carries the gradient to the chosen elements.
#pragma once
#include <utility>

#include "tensor.h"

namespace dyngrad {

// (values, indices) of a sorted along dim; stable: equal values keep their order, else any order among them
// (Note [Sorting by keys]).
std::pair<Tensor, Tensor> sort(const Tensor& a, int64_t dim, bool descending, bool stable);
Tensor argsort(const Tensor& a, int64_t dim, bool descending, bool stable);
// (values, indices) of the k largest (smallest) elements along dim, in order; ties: the earlier index first.
std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim, bool largest);
// (values, indices) of the running max (min) along dim: the index of the latest position holding it, a NaN once
// seen staying (torch's cummax); the values gather(a, dim, indices), so the gradient goes to those positions.
std::pair<Tensor, Tensor> cumulative_extremum(const Tensor& a, int64_t dim, bool is_max);

}  // namespace dyngrad
