// ops_sort.cpp: sort, argsort, topk, cummax/cummin: check the arguments, order along dim (kernels/sort.cpp), gather the values.
#include "ops_sort.h"

#include "kernels/kernels.h"
#include "kernels/sort.h"
#include "ops_common.h"

namespace dyngrad {

namespace {
// Note [Values of an order]: the values of sort, topk, cummax and cummin are gather(a, d, order), whose node carries
// the gradient. Where no gradient or tangent is recorded, the order kernel copies them as it writes the order
// (sort, topk), or gather's kernel alone runs (gather's checks and dispatch were a third of a 16-element sort's
// time): the same elements either way.
bool records(const Tensor& a) { return any_requires_grad({&a}) || forward_ad::active(); }
Tensor values_at(const Tensor& a, int64_t d, const Tensor& order) {
  if (records(a)) return gather(a, d, order);
  return gather_kernel(contiguous_data(a), d, order);
}
}  // namespace

std::pair<Tensor, Tensor> sort(const Tensor& a, int64_t dim, bool descending, bool stable) {
  check_not_complex(a, "sort");
  const int64_t d = wrap_dim(dim, a->ndim(), "sort");
  Tensor values;
  Tensor order = sort_order_kernel(a, d, descending, stable, records(a) ? nullptr : &values);
  return {values ? values : values_at(a, d, order), order};
}

Tensor argsort(const Tensor& a, int64_t dim, bool descending, bool stable) {
  check_not_complex(a, "argsort");
  return sort_order_kernel(a, wrap_dim(dim, a->ndim(), "argsort"), descending, stable);
}

std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim, bool largest) {
  check_not_complex(a, "topk");
  const int64_t d = wrap_dim(dim, a->ndim(), "topk");
  const int64_t n = a->ndim() ? a->shape[d] : 1;
  DG_CHECK(k >= 0 && k <= n, RuntimeError, "topk: k (", k, ") is out of range for dimension ", d, " of size ", n,
           ".");
  Tensor values;
  Tensor order = topk_order_kernel(a, d, k, largest, records(a) ? nullptr : &values);
  return {values ? values : values_at(a, d, order), order};
}

std::pair<Tensor, Tensor> cumulative_extremum(const Tensor& a, int64_t dim, bool is_max) {
  const char* op = is_max ? "cummax" : "cummin";
  check_not_complex(a, op);
  const int64_t d = a->ndim() ? wrap_dim(dim, a->ndim(), op) : (wrap_dim(dim, 0, op), 0);
  Tensor values;
  Tensor index = cumulative_extremum_index_kernel(a, d, is_max, records(a) ? nullptr : &values);
  return {values ? values : values_at(a, d, index), index};
}

}  // namespace dyngrad
