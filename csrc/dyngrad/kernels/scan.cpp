// scan.cpp: the running sum along one dim (cumsum and, reversed, its derivative).
#include <vector>

#include "kernels.h"
#include "loop.h"

namespace dyngrad {

namespace {

// Acc: the accumulator, torch's acc_type on the CPU (double for float32, as numpy's float64 accumulate that the
// reference engine runs; int64 wraps, done in uint64 because signed overflow is undefined)
template <typename T, typename Acc>
void running_sum(const Tensor& a, const Tensor& out, int64_t d, bool reverse) {
  const AroundDim around = around_dim(a->shape, d);
  const int64_t outer = around.outer, n = around.n, inner = around.inner;
  const T* x = a->data<T>();
  T* y = out->data<T>();
  const int64_t grain = std::max<int64_t>(1, parallel_grain() / std::max<int64_t>(n * inner, 1));
  parallel_for(outer, [&](int64_t lo, int64_t hi) {
    std::vector<Acc> acc((size_t)inner);
    for (int64_t o = lo; o < hi; ++o) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t step = 0; step < n; ++step) {
        const int64_t j = reverse ? n - 1 - step : step;
        const T* src = x + (o * n + j) * inner;
        T* dst = y + (o * n + j) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          acc[i] = (Acc)(acc[i] + (Acc)src[i]);
          dst[i] = (T)acc[i];
        }
      }
    }
  }, grain);
}

}  // namespace

Tensor cumsum_kernel(const Tensor& a_in, int64_t d, bool reverse) {
  if (is_half(a_in->dtype))  // Note [Half types]: accumulated in float32, rounded once per element
    return contiguous_copy(cumsum_kernel(contiguous_copy(a_in, DType::Float32), d, reverse), a_in->dtype);
  const DType dt = a_in->dtype;
  DG_CHECK(dt == DType::Float32 || dt == DType::Float64 || dt == DType::Int64, TypeError,
           "cumsum: expected a float32, float64 or int64 tensor (the API converts the others), got ",
           dtype_name(dt), ".");
  Tensor a = contiguous_data(a_in);
  Tensor out = empty(a->shape, dt);
  if (out->numel == 0) return out;
  switch (dt) {
    case DType::Float32: running_sum<float, double>(a, out, d, reverse); break;
    case DType::Float64: running_sum<double, double>(a, out, d, reverse); break;
    default: running_sum<int64_t, uint64_t>(a, out, d, reverse); break;
  }
  return out;
}

}  // namespace dyngrad
