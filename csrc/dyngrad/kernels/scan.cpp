// scan.cpp: the scans along one dim: the running sum (cumsum and, reversed, its derivative), product and
// log-sum-exp, the first-order linear recurrence their derivatives are made of, and the running extremum's index.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "fast_math.h"
#include "kernels.h"
#include "loop.h"

namespace dyngrad {

namespace {

// Acc: the accumulator, torch's acc_type on the CPU (double for float32, as numpy's float64 accumulate that the
// reference engine runs; int64 wraps, done in uint64 because signed overflow is undefined). step(acc, x) is the
// next accumulator, starting from init.
template <typename T, typename Acc, typename Step>
void running_scan(const Tensor& a, const Tensor& out, int64_t d, bool reverse, Acc init, Step step) {
  const AroundDim around = around_dim(a->shape, d);
  const int64_t outer = around.outer, n = around.n, inner = around.inner;
  const T* x = a->data<T>();
  T* y = out->data<T>();
  const int64_t grain = std::max<int64_t>(1, parallel_grain() / std::max<int64_t>(n * inner, 1));
  parallel_for(outer, [&](int64_t lo, int64_t hi) {
    std::vector<Acc> acc((size_t)inner);
    for (int64_t o = lo; o < hi; ++o) {
      std::fill(acc.begin(), acc.end(), init);
      for (int64_t k = 0; k < n; ++k) {
        const int64_t j = reverse ? n - 1 - k : k;
        const T* src = x + (o * n + j) * inner;
        T* dst = y + (o * n + j) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          acc[i] = step(acc[i], (Acc)src[i]);
          dst[i] = (T)acc[i];
        }
      }
    }
  }, grain);
}

// log(exp(x) + exp(y)) without overflow; equal infinities stay (x + log 2 is x), NaN propagates (numpy's logaddexp)
template <typename Acc>
inline Acc log_add_exp(Acc x, Acc y) {
  if (x == y) return x + Acc(M_LN2);
  const Acc hi = x > y ? x : y, lo = x > y ? y : x;
  if (hi != hi || lo != lo) return x + y;
  return hi + std::log1p(std::exp(lo - hi));
}

// logcumsumexp of a float32 row of finite values (contiguous along the scan), accumulated in float64 without a
// call per element: with M_k the running max, y_k = M_k + log s_k where s_k = s_{k-1} exp(M_{k-1} - M_k) +
// exp(x_k - M_k) (s_k >= 1: the max's own term is 1). The running max and the s recurrence are sequential but
// cheap; the exps and the logs, the cost of log_add_exp's log1p(exp(.)), are loops fast_math.h's float64 functions
// vectorise. By blocks of kLcseBlock, whose scratch lives on the stack. The same values as log_add_exp's scan up
// to float64 roundings, which the float32 result does not show but in the rarest of ties.
constexpr int64_t kLcseBlock = 256;
void logcumsumexp_row_f32(const float* x, float* y, int64_t n) {
  double run_max[kLcseBlock], a[kLcseBlock], b[kLcseBlock];
  double prev_max = x[0], s = 0.0;
  for (int64_t lo = 0; lo < n; lo += kLcseBlock) {
    const int64_t m = std::min(kLcseBlock, n - lo);
    const float* xb = x + lo;
    double mx = prev_max;
    for (int64_t i = 0; i < m; ++i) {
      mx = (double)xb[i] > mx ? (double)xb[i] : mx;
      run_max[i] = mx;
    }
    a[0] = fast_exp_nonpositive(prev_max - run_max[0]);
    for (int64_t i = 1; i < m; ++i) a[i] = fast_exp_nonpositive(run_max[i - 1] - run_max[i]);
    for (int64_t i = 0; i < m; ++i) b[i] = fast_exp_nonpositive((double)xb[i] - run_max[i]);
    for (int64_t i = 0; i < m; ++i) {
      s = s * a[i] + b[i];
      a[i] = s;
    }
    for (int64_t i = 0; i < m; ++i) y[lo + i] = (float)(run_max[i] + fast_log_from_one(a[i]));
    prev_max = mx;
  }
}

// a in a dtype the scans compute in (float32, float64, int64), or the error naming the op
Tensor scan_input(const Tensor& a_in, const char* op, bool integers) {
  const DType dt = a_in->dtype;
  DG_CHECK(dt == DType::Float32 || dt == DType::Float64 || (integers && dt == DType::Int64), TypeError, op,
           ": expected a float32, float64", integers ? " or int64" : "", " tensor (the API converts the others), got ",
           dtype_name(dt), ".");
  return contiguous_data(a_in);
}

}  // namespace

Tensor cumsum_kernel(const Tensor& a_in, int64_t d, bool reverse) {
  if (is_half(a_in->dtype))  // Note [Half types]: accumulated in float32, rounded once per element
    return contiguous_copy(cumsum_kernel(contiguous_copy(a_in, DType::Float32), d, reverse), a_in->dtype);
  Tensor a = scan_input(a_in, "cumsum", true);
  Tensor out = empty(a->shape, a->dtype);
  if (out->numel == 0) return out;
  switch (a->dtype) {
    case DType::Float32: running_scan<float, double>(a, out, d, reverse, 0.0, std::plus<double>()); break;
    case DType::Float64: running_scan<double, double>(a, out, d, reverse, 0.0, std::plus<double>()); break;
    default: running_scan<int64_t, uint64_t>(a, out, d, reverse, 0, std::plus<uint64_t>()); break;
  }
  return out;
}

Tensor cumprod_kernel(const Tensor& a_in, int64_t d, bool reverse) {
  if (is_half(a_in->dtype))
    return contiguous_copy(cumprod_kernel(contiguous_copy(a_in, DType::Float32), d, reverse), a_in->dtype);
  Tensor a = scan_input(a_in, "cumprod", true);
  Tensor out = empty(a->shape, a->dtype);
  if (out->numel == 0) return out;
  switch (a->dtype) {
    case DType::Float32: running_scan<float, double>(a, out, d, reverse, 1.0, std::multiplies<double>()); break;
    case DType::Float64: running_scan<double, double>(a, out, d, reverse, 1.0, std::multiplies<double>()); break;
    default: running_scan<int64_t, uint64_t>(a, out, d, reverse, 1, std::multiplies<uint64_t>()); break;
  }
  return out;
}

Tensor logcumsumexp_kernel(const Tensor& a_in, int64_t d, bool reverse) {
  if (is_half(a_in->dtype))
    return contiguous_copy(logcumsumexp_kernel(contiguous_copy(a_in, DType::Float32), d, reverse), a_in->dtype);
  Tensor a = scan_input(a_in, "logcumsumexp", false);
  Tensor out = empty(a->shape, a->dtype);
  if (out->numel == 0) return out;
  const double lowest = -std::numeric_limits<double>::infinity();
  const AroundDim around = around_dim(a->shape, d);
  if (a->dtype == DType::Float32 && around.inner == 1 && !reverse) {
    // rows of finite values by logcumsumexp_row_f32, the others (infinities, NaN) by log_add_exp's scan
    const float* x = a->data<float>();
    float* y = out->data<float>();
    const int64_t n = around.n;
    parallel_for(around.outer, [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o) {
        const float* row = x + o * n;
        int finite = 1;
        for (int64_t i = 0; i < n; ++i) finite &= std::isfinite(row[i]) ? 1 : 0;
        if (finite) {
          logcumsumexp_row_f32(row, y + o * n, n);
          continue;
        }
        double acc = lowest;
        for (int64_t i = 0; i < n; ++i) y[o * n + i] = (float)(acc = log_add_exp<double>(acc, (double)row[i]));
      }
    }, std::max<int64_t>(1, parallel_grain() / std::max<int64_t>(n, 1)));
    return out;
  }
  if (a->dtype == DType::Float32) running_scan<float, double>(a, out, d, reverse, lowest, log_add_exp<double>);
  else running_scan<double, double>(a, out, d, reverse, lowest, log_add_exp<double>);
  return out;
}

namespace {
template <typename T, typename Acc>
void recurrence(const Tensor& b, const Tensor& c, const Tensor& out, int64_t d, bool reverse) {
  const AroundDim around = around_dim(b->shape, d);
  const int64_t outer = around.outer, n = around.n, inner = around.inner;
  const T* bs = b->data<T>();
  const T* cs = c->data<T>();
  T* y = out->data<T>();
  const int64_t grain = std::max<int64_t>(1, parallel_grain() / std::max<int64_t>(n * inner, 1));
  parallel_for(outer, [&](int64_t lo, int64_t hi) {
    std::vector<Acc> acc((size_t)inner);
    for (int64_t o = lo; o < hi; ++o) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t k = 0; k < n; ++k) {
        const int64_t at = (o * n + (reverse ? n - 1 - k : k)) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          acc[i] = (Acc)bs[at + i] + (Acc)cs[at + i] * acc[i];
          y[at + i] = (T)acc[i];
        }
      }
    }
  }, grain);
}

template <typename T>
void extremum_index(const Tensor& a, const Tensor& out, T* values, int64_t d, bool is_max) {
  const AroundDim around = around_dim(a->shape, d);
  const int64_t outer = around.outer, n = around.n, inner = around.inner;
  const T* x = a->data<T>();
  int64_t* idx = out->data<int64_t>();
  const int64_t grain = std::max<int64_t>(1, parallel_grain() / std::max<int64_t>(n * inner, 1));
  parallel_for(outer, [&](int64_t lo, int64_t hi) {
    // one running extremum per inner position: on the stack for a scan along the last dim
    T best_one{};
    int64_t at_one = 0;
    std::vector<T> best_many(inner > 1 ? (size_t)inner : 0);
    std::vector<int64_t> at_many(inner > 1 ? (size_t)inner : 0);
    T* best = inner > 1 ? best_many.data() : &best_one;
    int64_t* at = inner > 1 ? at_many.data() : &at_one;
    for (int64_t o = lo; o < hi; ++o) {
      for (int64_t k = 0; k < n; ++k) {
        const int64_t row = (o * n + k) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          const T v = x[row + i];
          // a NaN takes over and stays (v != v), as torch's cummax: isnan(x) || (!isnan(best) && x >= best)
          if (k == 0 || v != v || (best[i] == best[i] && (is_max ? v >= best[i] : v <= best[i]))) {
            best[i] = v;
            at[i] = k;
          }
          idx[row + i] = at[i];
          if (values) values[row + i] = x[(o * n + at[i]) * inner + i];
        }
      }
    }
  }, grain);
}
}  // namespace

Tensor linear_recurrence_kernel(const Tensor& b_in, const Tensor& c_in, int64_t d, bool reverse) {
  DG_CHECK(b_in->shape == c_in->shape && b_in->dtype == c_in->dtype, RuntimeError,
           "linear_recurrence: expected b and c of one shape and dtype, got ", shape_str(b_in->shape), " ",
           dtype_name(b_in->dtype), " and ", shape_str(c_in->shape), " ", dtype_name(c_in->dtype), ".");
  if (is_half(b_in->dtype))
    return contiguous_copy(linear_recurrence_kernel(contiguous_copy(b_in, DType::Float32),
                                                    contiguous_copy(c_in, DType::Float32), d, reverse),
                           b_in->dtype);
  Tensor b = scan_input(b_in, "linear_recurrence", false), c = contiguous_data(c_in);
  Tensor out = empty(b->shape, b->dtype);
  if (out->numel == 0) return out;
  if (b->dtype == DType::Float32) recurrence<float, double>(b, c, out, d, reverse);
  else recurrence<double, double>(b, c, out, d, reverse);
  return out;
}

Tensor cumulative_extremum_index_kernel(const Tensor& a_in, int64_t d, bool is_max, Tensor* values) {
  // the order of the values is kept by widening: halves to float32, bool and the narrow integers to int64
  const DType compute = is_floating(a_in->dtype) ? widen(a_in->dtype) : DType::Int64;
  Tensor a = contiguous_data(a_in->dtype == compute ? a_in : contiguous_copy(a_in, compute));
  Tensor out = empty(a->shape, DType::Int64);
  if (values) *values = a_in->dtype == compute ? empty(a->shape, compute) : Tensor();
  if (out->numel == 0) return out;
  auto vals = [&](auto* type) -> decltype(type) {
    return values && *values ? (*values)->template data<std::remove_pointer_t<decltype(type)>>() : nullptr;
  };
  switch (compute) {
    case DType::Float32: extremum_index<float>(a, out, vals((float*)nullptr), d, is_max); break;
    case DType::Float64: extremum_index<double>(a, out, vals((double*)nullptr), d, is_max); break;
    default: extremum_index<int64_t>(a, out, vals((int64_t*)nullptr), d, is_max); break;
  }
  return out;
}

}  // namespace dyngrad
