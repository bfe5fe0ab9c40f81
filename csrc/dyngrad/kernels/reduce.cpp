// reduce.cpp: sum / max / min / argmax / argmin over dims, and softmax / log_softmax along one dim.
// Reduced dims are moved last; rows are then reduced one by one (rows in parallel when large).
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <type_traits>
#include <vector>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "fast_math.h"
#include "loop.h"

namespace dyngrad {

namespace {

// The input permuted so that kept dims come first and reduced dims last, made contiguous: [outer, inner].
Tensor reduced_last(const Tensor& a, const std::vector<int64_t>& dims, int64_t& outer, int64_t& inner) {
  const int64_t nd = a->ndim();
  std::vector<bool> reduced(nd, false);
  for (int64_t d : dims) reduced[d] = true;
  Shape perm_shape, perm_strides;
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (!reduced[d]) {
      perm_shape.push_back(a->shape[d]);
      perm_strides.push_back(a->strides[d]);
      outer *= a->shape[d];
    }
  for (int64_t d = 0; d < nd; ++d)
    if (reduced[d]) {
      perm_shape.push_back(a->shape[d]);
      perm_strides.push_back(a->strides[d]);
      inner *= a->shape[d];
    }
  Tensor v = make_view(a, perm_shape, perm_strides, a->offset);
  return contiguous_data(v);
}

template <typename T, typename Acc>
Acc row_sum(const T* x, int64_t n) {
  Acc acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += (Acc)x[i + j];
  Acc total = 0;
  for (; i < n; ++i) total += (Acc)x[i];
  for (int j = 0; j < 8; ++j) total += acc[j];
  return total;
}

template <typename F>
void for_rows(int64_t outer, int64_t inner, F&& f) {
  // grain in rows, so that each thread gets about parallel_grain() elements' worth of work
  int64_t grain = std::max<int64_t>(2, parallel_grain() / std::max<int64_t>(inner, 1));
  parallel_for(outer, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) f(r);
  }, grain);
}

// Note [Sums over leading dims]: a bias gradient sums a (batch..., features) gradient over its leading dims.
// reduced_last would first transpose the whole input so that each output's elements are contiguous (a full
// strided copy, 12% of a transformer block's backward); instead walk the rows in memory order and add each into
// per-column double accumulators (a tile of columns at a time, so they stay in registers/L1). Each column is
// summed in row order in double, as row_sum sums float32 in double: the float32 results agree to the last bit
// but for rare ties, and do not depend on the thread count (threads split the columns). float64 keeps row_sum's
// 8 partial sums (sequential double sums of doubles would lose accuracy).
// The AVX-512 build keeps a tile of 64 columns' double sums in 8 registers over all the rows (the array version
// loaded and stored its accumulators at every row): the same additions in the same order, so the same bits.
// (768, 512), a GPT MLP's bias gradient, 1 thread, Xeon family 6 model 167, KVM, load 4, best of 300, two processes
// alternating: 0.051 -> 0.035 ms (torch, summing in float32: 0.022); (768, 128) 0.0122 -> 0.0082.
template <typename T>
void column_sums(const T* x, int64_t rows, int64_t cols, T* out) {
  constexpr int64_t kTile = 256;
  parallel_for(cols, [&](int64_t lo, int64_t hi) {
    double acc[kTile];
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>) {
      for (; lo + 64 <= hi; lo += 64) {
        __m512d a[8];
        for (int j = 0; j < 8; ++j) a[j] = _mm512_setzero_pd();
        for (int64_t r = 0; r < rows; ++r) {
          const float* row = x + r * cols + lo;
          for (int j = 0; j < 8; ++j) a[j] = _mm512_add_pd(a[j], _mm512_cvtps_pd(_mm256_loadu_ps(row + 8 * j)));
        }
        for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + lo + 8 * j, _mm512_cvtpd_ps(a[j]));
      }
    }
#endif
    for (int64_t c0 = lo; c0 < hi; c0 += kTile) {
      const int64_t w = std::min(kTile, hi - c0);
      for (int64_t c = 0; c < w; ++c) acc[c] = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = x + r * cols + c0;
        for (int64_t c = 0; c < w; ++c) acc[c] += (double)row[c];
      }
      for (int64_t c = 0; c < w; ++c) out[c0 + c] = (T)acc[c];
    }
  }, std::max<int64_t>(16, parallel_grain() / std::max<int64_t>(rows, 1)));
}

// float64's column sums in row_sum's own order (Note [Sums over leading dims]), so the bits are the transposing
// path's: per column, 8 partial sums of rows i + j (j = 0..7) over whole blocks of 8 rows, the remaining rows into
// a total from 0, then the 8 partial sums added to it in order. The transposing copy was 8% of the float64 LSTMCell
// + LBFGS bench's step (the bias gradients, 97 x 204 summed over rows; perf, Xeon family 6 model 167, 1 thread).
void column_sums_f64(const double* x, int64_t rows, int64_t cols, double* out) {
  constexpr int64_t kTile = 64;
  parallel_for(cols, [&](int64_t lo, int64_t hi) {
    double acc[8][kTile], total[kTile];
    const int64_t blocked = rows / 8 * 8;
    for (int64_t c0 = lo; c0 < hi; c0 += kTile) {
      const int64_t w = std::min(kTile, hi - c0);
      for (int j = 0; j < 8; ++j)
        for (int64_t c = 0; c < w; ++c) acc[j][c] = 0;
      for (int64_t c = 0; c < w; ++c) total[c] = 0;
      for (int64_t r = 0; r < blocked; r += 8)
        for (int j = 0; j < 8; ++j) {
          const double* row = x + (r + j) * cols + c0;
          double* a = acc[j];
          for (int64_t c = 0; c < w; ++c) a[c] += row[c];
        }
      for (int64_t r = blocked; r < rows; ++r) {
        const double* row = x + r * cols + c0;
        for (int64_t c = 0; c < w; ++c) total[c] += row[c];
      }
      for (int j = 0; j < 8; ++j)
        for (int64_t c = 0; c < w; ++c) total[c] += acc[j][c];
      for (int64_t c = 0; c < w; ++c) out[c0 + c] = total[c];
    }
  }, std::max<int64_t>(16, parallel_grain() / std::max<int64_t>(rows, 1)));
}

}  // namespace

Tensor reduce_kernel(ReduceKind k, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  if (is_complex(a->dtype)) {
    // a complex sum is the sum of its (real, imag) pairs (Note [Complex views]): the float kernel over the real view,
    // whose last dim (the pair) is not reduced; complex numbers have no max or min
    DG_CHECK(k == ReduceKind::Sum, TypeError, "this reduction (max, min, argmax, argmin, logsumexp) is not supported "
             "for complex tensors (", dtype_name(a->dtype), "); complex numbers have no order.");
    Tensor pairs = reduce_kernel(k, complex_as_real_view(a), dims, keepdim);
    return real_as_complex_view(pairs->is_contiguous() ? pairs : contiguous_copy(pairs, pairs->dtype));
  }
  if (is_half(a->dtype) || is_narrow_int(a->dtype)) {  // Note [Half types], Note [Narrow integers]
    // reduced in float32 / int64; max, min (and a half type's sum) convert back, sums of integers stay int64
    const DType wide = widen(a->dtype);
    Tensor r = reduce_kernel(k, contiguous_copy(a, wide), dims, keepdim);
    const bool back = k == ReduceKind::Max || k == ReduceKind::Min ||
                      (is_half(a->dtype) && (k == ReduceKind::Sum || k == ReduceKind::LogSumExp));
    return back ? contiguous_copy(r, a->dtype) : r;
  }
  const int64_t nd = a->ndim();
  std::vector<bool> reduced(nd, false);
  for (int64_t d : dims) reduced[d] = true;
  Shape out_shape;
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) out_shape.push_back(a->shape[d]);
    else if (keepdim) out_shape.push_back(1);
  }
  DType out_dtype = a->dtype;
  if (k == ReduceKind::ArgMax || k == ReduceKind::ArgMin) out_dtype = DType::Int64;
  if (k == ReduceKind::Sum && !is_floating(a->dtype)) out_dtype = DType::Int64;
  Tensor out = empty(out_shape, out_dtype);
  if (out->numel == 0) return out;

  int64_t outer = 1, inner = 1;
  for (int64_t d : dims) inner *= a->shape[d];
  if (inner == 0) {
    if (k == ReduceKind::Sum) {
      DG_DISPATCH_ALL(out_dtype, T, std::fill(out->data<T>(), out->data<T>() + out->numel, T(0)));
      return out;
    }
    if (k == ReduceKind::LogSumExp) {
      DG_DISPATCH_FLOAT(out_dtype, T, std::fill(out->data<T>(), out->data<T>() + out->numel,
                                                -std::numeric_limits<T>::infinity()));
      return out;
    }
    throw IndexError(str_cat("reduction over a zero-size dimension: the input of shape ", shape_str(a->shape),
                             " has no elements to take the max/min/argmax of."));
  }
  bool leading = !dims.empty() && (int64_t)dims.size() < nd;
  for (size_t i = 0; i < dims.size() && leading; ++i) leading = dims[i] == (int64_t)i;
  if (k == ReduceKind::Sum && a->dtype == DType::Float32 && leading && a->is_contiguous() && a->numel / inner >= 8) {
    // Note [Sums over leading dims]
    column_sums<float>(a->data<float>(), inner, a->numel / inner, out->data<float>());
    return out;
  }
  if (k == ReduceKind::Sum && a->dtype == DType::Float64 && leading && a->is_contiguous() && a->numel / inner >= 8) {
    column_sums_f64(a->data<double>(), inner, a->numel / inner, out->data<double>());
    return out;
  }
  Tensor x = reduced_last(a, dims, outer, inner);

  DG_DISPATCH_ALL(a->dtype, T, {
    const T* src = x->data<T>();
    switch (k) {
      case ReduceKind::Sum:
        if constexpr (std::is_floating_point_v<T>) {
          T* o = out->data<T>();
          for_rows(outer, inner, [&](int64_t r) { o[r] = (T)row_sum<T, double>(src + r * inner, inner); });
        } else {
          int64_t* o = out->data<int64_t>();
          for_rows(outer, inner, [&](int64_t r) { o[r] = row_sum<T, int64_t>(src + r * inner, inner); });
        }
        break;
      case ReduceKind::Max:
      case ReduceKind::Min: {
        T* o = out->data<T>();
        bool is_max = k == ReduceKind::Max;
        for_rows(outer, inner, [&](int64_t r) {
          const T* row = src + r * inner;
          T best = row[0];
          for (int64_t i = 1; i < inner; ++i) {
            T v = row[i];
            if (v != v) { best = v; break; }  // NaN propagates
            if (is_max ? v > best : v < best) best = v;
          }
          o[r] = best;
        });
        break;
      }
      case ReduceKind::ArgMax:
      case ReduceKind::ArgMin: {
        int64_t* o = out->data<int64_t>();
        bool is_max = k == ReduceKind::ArgMax;
        for_rows(outer, inner, [&](int64_t r) {
          const T* row = src + r * inner;
          int64_t best = 0;
          for (int64_t i = 1; i < inner; ++i) {
            T v = row[i];
            if (row[best] != row[best]) break;
            if (v != v || (is_max ? v > row[best] : v < row[best])) best = i;
          }
          o[r] = best;
        });
        break;
      }
      case ReduceKind::LogSumExp:
        if constexpr (std::is_floating_point_v<T>) {
          T* o = out->data<T>();
          for_rows(outer, inner, [&](int64_t r) {
            const T* row = src + r * inner;
            T m = row[0];
            for (int64_t i = 1; i < inner; ++i) m = row[i] > m ? row[i] : m;
            if (std::isinf(m)) { o[r] = m; return; }  // all -inf, or an +inf present
            double s = 0;
            for (int64_t i = 0; i < inner; ++i) s += std::exp((double)(row[i] - m));
            o[r] = (T)(std::log(s) + (double)m);
          });
        } else {
          throw TypeError("logsumexp: expected a floating-point tensor.");
        }
        break;
    }
  });
  return out;
}

namespace {
// y has shape (a's dims without dim..., dim), contiguous: the same values in a's dim order (a copy unless dim is
// already last)
Tensor dim_put_back(const Tensor& y, const Tensor& a, int64_t dim) {
  const int64_t nd = a->ndim();
  if (nd == 0 || dim == nd - 1) return nd == 0 ? make_view(y, a->shape, {}, 0) : y;
  Shape shape(nd), strides(nd);
  Shape ystr = contiguous_strides(y->shape);
  int64_t j = 0;
  for (int64_t d = 0; d < nd; ++d) {
    if (d == dim) continue;
    shape[d] = a->shape[d];
    strides[d] = ystr[j++];
  }
  shape[dim] = a->shape[dim];
  strides[dim] = ystr[nd - 1];
  return contiguous_copy(make_view(y, shape, strides, 0), a->dtype);
}

template <typename T>
T row_max(const T* x, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  T lane[8] = {m, m, m, m, m, m, m, m};  // eight running maxima: vectorises
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (int j = 0; j < 8; ++j) m = lane[j] > m ? lane[j] : m;
  return m;
}

// Note [Softmax in float32]: a float32 row is exponentiated with fast_expf (~1 ulp, vectorised) into the output
// row, summed in double, then scaled (or, for log_softmax, turned into (x - m) - log(s)). float64 rows use
// std::exp. Either way the maximum is subtracted first, so no exp overflows.
#if defined(__AVX512F__)
// Note [Softmax in 16 lanes]: a float32 row (the last dim, contiguous) in vectors of 16, the tail masked: the
// maximum, exp16 of x - max into the output, the sum in float32 (16 lane sums, then across the lanes), then the
// scale (or (x - m) - log(s)); the same formula as softmax_row's, the sum's order changed. Rows of up to 64 stay in
// registers (softmax_row_regs). (16, 4, 64, 64), the transformer block's attention weights, forward, 1 thread, thread
// CPU time, best of 200 alternating with torch (bench/norm_parts.py, Xeon family 6 model 167, KVM, load 5-8):
// 0.280 -> 0.131 ms (torch 0.178); forward + backward 0.580 -> 0.415 (torch 0.470). cross_entropy (768, 65)
// forward 0.060 -> 0.036 (torch 0.041).
inline __mmask16 tail_mask16(int64_t n) { return (__mmask16)((1u << n) - 1); }  // n in [0, 16)

// max over x[0, n) and, through exps (n floats), exp(x - max) and its sum; returns (max, sum)
inline std::pair<float, float> row_exp16(const float* x, float* exps, int64_t n) {
  const int64_t nv = n / 16;
  const __mmask16 tm = tail_mask16(n - 16 * nv);
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 mx0 = ninf, mx1 = ninf;
  int64_t v = 0;
  for (; v + 2 <= nv; v += 2) {
    mx0 = _mm512_max_ps(mx0, _mm512_loadu_ps(x + 16 * v));
    mx1 = _mm512_max_ps(mx1, _mm512_loadu_ps(x + 16 * v + 16));
  }
  if (v < nv) mx0 = _mm512_max_ps(mx0, _mm512_loadu_ps(x + 16 * v));
  if (tm) mx1 = _mm512_max_ps(mx1, _mm512_mask_loadu_ps(ninf, tm, x + 16 * nv));
  float m = _mm512_reduce_max_ps(_mm512_max_ps(mx0, mx1));
  // a NaN is dropped by max_ps: the NaN's exp below is NaN, so the sum and every output are NaN, as softmax_row's
  if (std::isinf(m) && m < 0) m = 0;  // a row of -inf: avoid inf - inf
  const __m512 mv = _mm512_set1_ps(m);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  for (v = 0; v + 2 <= nv; v += 2) {
    const __m512 e0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + 16 * v), mv));
    const __m512 e1 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + 16 * v + 16), mv));
    _mm512_storeu_ps(exps + 16 * v, e0);
    _mm512_storeu_ps(exps + 16 * v + 16, e1);
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
  }
  if (v < nv) {
    const __m512 e0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + 16 * v), mv));
    _mm512_storeu_ps(exps + 16 * v, e0);
    s0 = _mm512_add_ps(s0, e0);
  }
  if (tm) {
    const __m512 e1 = _mm512_maskz_mov_ps(tm, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tm, x + 16 * nv), mv)));
    _mm512_mask_storeu_ps(exps + 16 * nv, tm, e1);
    s1 = _mm512_add_ps(s1, e1);
  }
  return {m, _mm512_reduce_add_ps(_mm512_add_ps(s0, s1))};
}

// A row of 16 (NV - 1) < n <= 16 NV elements held in NV registers (one read of the row, one write): short rows,
// as attention weights over 64 keys, were bound by the latency of the reloads and the per-row reductions.
template <int NV>
DG_FAST_INLINE void softmax_row_regs(const float* row, float* o, int64_t n, bool log) {
  const __mmask16 tm = (__mmask16)(n - 16 * (NV - 1) >= 16 ? 0xFFFF : tail_mask16(n - 16 * (NV - 1)));
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 v[NV];
  #pragma GCC unroll 16
  for (int j = 0; j < NV - 1; ++j) v[j] = _mm512_loadu_ps(row + 16 * j);
  v[NV - 1] = _mm512_mask_loadu_ps(ninf, tm, row + 16 * (NV - 1));
  __m512 mx = v[0];
  #pragma GCC unroll 16
  for (int j = 1; j < NV; ++j) mx = _mm512_max_ps(mx, v[j]);
  float m = _mm512_reduce_max_ps(mx);
  if (std::isinf(m) && m < 0) m = 0;  // a row of -inf: avoid inf - inf
  const __m512 mv = _mm512_set1_ps(m);
  if (log) {
    __m512 sum = _mm512_setzero_ps();
    #pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) {
      v[j] = _mm512_sub_ps(v[j], mv);
      sum = _mm512_add_ps(sum, exp16(v[j]));  // the masked lanes hold -inf: exp 0
    }
    const __m512 ls = _mm512_set1_ps(std::log(_mm512_reduce_add_ps(sum)));
    #pragma GCC unroll 16
    for (int j = 0; j < NV - 1; ++j) _mm512_storeu_ps(o + 16 * j, _mm512_sub_ps(v[j], ls));
    _mm512_mask_storeu_ps(o + 16 * (NV - 1), tm, _mm512_sub_ps(v[NV - 1], ls));
    return;
  }
  __m512 sum = _mm512_setzero_ps();
  #pragma GCC unroll 16
  for (int j = 0; j < NV; ++j) {
    v[j] = exp16(_mm512_sub_ps(v[j], mv));
    sum = _mm512_add_ps(sum, v[j]);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  #pragma GCC unroll 16
  for (int j = 0; j < NV - 1; ++j) _mm512_storeu_ps(o + 16 * j, _mm512_mul_ps(v[j], inv));
  _mm512_mask_storeu_ps(o + 16 * (NV - 1), tm, _mm512_mul_ps(v[NV - 1], inv));
}

inline void softmax_row16(const float* row, float* o, int64_t n, bool log) {
  switch ((n + 15) / 16) {  // the register path wants 16 (NV - 1) < n <= 16 NV
    case 1: return softmax_row_regs<1>(row, o, n, log);
    case 2: return softmax_row_regs<2>(row, o, n, log);
    case 3: return softmax_row_regs<3>(row, o, n, log);
    case 4: return softmax_row_regs<4>(row, o, n, log);
    default: break;
  }
  const auto [m, s] = row_exp16(row, o, n);
  const int64_t nv = n / 16;
  const __mmask16 tm = tail_mask16(n - 16 * nv);
  if (log) {
    const __m512 mv = _mm512_set1_ps(m), ls = _mm512_set1_ps(std::log(s));
    for (int64_t v = 0; v < nv; ++v)
      _mm512_storeu_ps(o + 16 * v, _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(row + 16 * v), mv), ls));
    if (tm)
      _mm512_mask_storeu_ps(o + 16 * nv, tm, _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(tm, row + 16 * nv), mv), ls));
  } else {
    const __m512 inv = _mm512_set1_ps(1.0f / s);
    for (int64_t v = 0; v < nv; ++v) _mm512_storeu_ps(o + 16 * v, _mm512_mul_ps(_mm512_loadu_ps(o + 16 * v), inv));
    if (tm) _mm512_mask_storeu_ps(o + 16 * nv, tm, _mm512_mul_ps(_mm512_maskz_loadu_ps(tm, o + 16 * nv), inv));
  }
}
#endif

template <typename T>
void softmax_row(const T* row, T* o, int64_t n, bool log) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    softmax_row16(row, o, n, log);
    return;
  }
#endif
  T m = row_max(row, n);
  if (std::isinf(m) && m < 0) m = 0;  // a row of -inf: avoid inf - inf
  for (int64_t i = 0; i < n; ++i) o[i] = k_exp<T>(row[i] - m);
  const double s = row_sum<T, double>(o, n);
  if (log) {
    // (x - m) - log(s), not x - (m + log(s)): m + log(s) would round to m's precision (0.001 at 1e4)
    const T log_s = (T)std::log(s);
    for (int64_t i = 0; i < n; ++i) o[i] = (row[i] - m) - log_s;
  } else {
    const T inv = (T)(1.0 / s);
    for (int64_t i = 0; i < n; ++i) o[i] *= inv;
  }
}
}  // namespace

Tensor softmax_kernel(const Tensor& a, int64_t dim, bool log) {
  // move `dim` last, make contiguous, normalise each row, then write back in a's layout order
  int64_t outer, inner;
  Tensor x = reduced_last(a, {dim}, outer, inner);
  Tensor y = empty(x->shape, a->dtype);
  if (y->numel > 0) {
    DG_DISPATCH_FLOAT(a->dtype, T, {
      const T* src = x->data<T>();
      T* dst = y->data<T>();
      for_rows(outer, inner, [&](int64_t r) { softmax_row<T>(src + r * inner, dst + r * inner, inner, log); });
    });
  }
  return dim_put_back(y, a, dim);
}

// Note [Cross entropy without the log_softmax]: without label smoothing the loss reads one element of each row of
// log_softmax(logits), so the forward computes that element alone: the row's exps go to a row-sized scratch (in L2)
// instead of an (N, C) output written twice and read once, with softmax_row's arithmetic in its order, so the value
// is the same. On a word model's decoder output (700 x 10000 float32) the forward went from ~6.4 ms (log_softmax
// alone, which it ran first) to ~5.4 ms of CPU time (Xeon family 6 model 167, 1 thread, load 8): the exps dominate.
// logp_at[i] = log_softmax(rows)[i, target[i]], 0 where target[i] == ignore_index; rows is (N, C), contiguous.
Tensor log_softmax_at_kernel(const Tensor& rows, const int64_t* target, int64_t ignore_index) {
  const int64_t N = rows->shape[0], C = rows->shape[1];
  Tensor out = empty({N}, rows->dtype);
  DG_DISPATCH_FLOAT(rows->dtype, T, {
    const T* src = rows->data<T>();
    T* o = out->data<T>();
    for_rows(N, C, [&](int64_t r) {
      if (target[r] == ignore_index) {
        o[r] = T(0);
        return;
      }
      static thread_local std::vector<T> scratch;
      if ((int64_t)scratch.size() < C) scratch.resize(C);
      const T* row = src + r * C;
      T* e = scratch.data();
#if defined(__AVX512F__)
      if constexpr (std::is_same_v<T, float>) {  // softmax_row16's arithmetic (Note [Softmax in 16 lanes])
        // (the casts only name T as float: this branch is compiled for float alone, yet in a generic lambda)
        if (C <= 64) {  // the short rows' register path, so the same bits as log_softmax's
          softmax_row16(reinterpret_cast<const float*>(row), reinterpret_cast<float*>(e), C, true);
          o[r] = e[target[r]];
          return;
        }
        const auto [m16, s16] = row_exp16(reinterpret_cast<const float*>(row), reinterpret_cast<float*>(e), C);
        o[r] = (T)(((float)row[target[r]] - m16) - std::log(s16));
        return;
      }
#endif
      T m = row_max(row, C);
      if (std::isinf(m) && m < 0) m = 0;  // as softmax_row
      for (int64_t i = 0; i < C; ++i) e[i] = k_exp<T>(row[i] - m);
      const double sum = row_sum<T, double>(e, C);
      o[r] = (row[target[r]] - m) - (T)std::log(sum);
    });
  });
  return out;
}

#if defined(__AVX512F__)
namespace {
// one row of softmax_backward_kernel in float32, 16 lanes: the row's sum, then the row's output
// softmax_backward_row16 for 16 (NV - 1) < n <= 16 NV, the rows in registers (as softmax_row_regs)
template <int NV>
DG_FAST_INLINE void softmax_backward_regs(const float* g, const float* y, float* d, int64_t n, bool log) {
  const __mmask16 tm = (__mmask16)(n - 16 * (NV - 1) >= 16 ? 0xFFFF : tail_mask16(n - 16 * (NV - 1)));
  __m512 gv[NV], yv[NV];
  #pragma GCC unroll 16
  for (int j = 0; j < NV - 1; ++j) {
    gv[j] = _mm512_loadu_ps(g + 16 * j);
    yv[j] = _mm512_loadu_ps(y + 16 * j);
  }
  gv[NV - 1] = _mm512_maskz_loadu_ps(tm, g + 16 * (NV - 1));
  yv[NV - 1] = _mm512_maskz_loadu_ps(tm, y + 16 * (NV - 1));
  __m512 sum = _mm512_setzero_ps();
  #pragma GCC unroll 16
  for (int j = 0; j < NV; ++j) sum = log ? _mm512_add_ps(sum, gv[j]) : _mm512_fmadd_ps(gv[j], yv[j], sum);
  const __m512 sv = _mm512_set1_ps(_mm512_reduce_add_ps(sum));
  #pragma GCC unroll 16
  for (int j = 0; j < NV; ++j) {
    const __m512 r = log ? _mm512_fnmadd_ps(exp16(yv[j]), sv, gv[j]) : _mm512_mul_ps(yv[j], _mm512_sub_ps(gv[j], sv));
    if (j < NV - 1)
      _mm512_storeu_ps(d + 16 * j, r);
    else
      _mm512_mask_storeu_ps(d + 16 * j, tm, r);
  }
}

inline void softmax_backward_row16(const float* g, const float* y, float* d, int64_t n, bool log) {
  switch ((n + 15) / 16) {  // the register path wants 16 (NV - 1) < n <= 16 NV
    case 1: return softmax_backward_regs<1>(g, y, d, n, log);
    case 2: return softmax_backward_regs<2>(g, y, d, n, log);
    case 3: return softmax_backward_regs<3>(g, y, d, n, log);
    case 4: return softmax_backward_regs<4>(g, y, d, n, log);
    default: break;
  }
  const int64_t nv = n / 16;
  const __mmask16 tm = tail_mask16(n - 16 * nv);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t v = 0;
  if (log) {
    for (; v + 2 <= nv; v += 2) {
      s0 = _mm512_add_ps(s0, _mm512_loadu_ps(g + 16 * v));
      s1 = _mm512_add_ps(s1, _mm512_loadu_ps(g + 16 * v + 16));
    }
    if (v < nv) s0 = _mm512_add_ps(s0, _mm512_loadu_ps(g + 16 * v));
    if (tm) s1 = _mm512_add_ps(s1, _mm512_maskz_loadu_ps(tm, g + 16 * nv));
    const __m512 sv = _mm512_set1_ps(_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
    for (v = 0; v < nv; ++v)
      _mm512_storeu_ps(d + 16 * v, _mm512_fnmadd_ps(exp16(_mm512_loadu_ps(y + 16 * v)), sv, _mm512_loadu_ps(g + 16 * v)));
    if (tm)
      _mm512_mask_storeu_ps(d + 16 * nv, tm, _mm512_fnmadd_ps(exp16(_mm512_maskz_loadu_ps(tm, y + 16 * nv)), sv,
                                                              _mm512_maskz_loadu_ps(tm, g + 16 * nv)));
    return;
  }
  for (; v + 2 <= nv; v += 2) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(g + 16 * v), _mm512_loadu_ps(y + 16 * v), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(g + 16 * v + 16), _mm512_loadu_ps(y + 16 * v + 16), s1);
  }
  if (v < nv) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(g + 16 * v), _mm512_loadu_ps(y + 16 * v), s0);
  if (tm) s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tm, g + 16 * nv), _mm512_maskz_loadu_ps(tm, y + 16 * nv), s1);
  const __m512 sv = _mm512_set1_ps(_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
  for (v = 0; v < nv; ++v)
    _mm512_storeu_ps(d + 16 * v, _mm512_mul_ps(_mm512_loadu_ps(y + 16 * v), _mm512_sub_ps(_mm512_loadu_ps(g + 16 * v), sv)));
  if (tm)
    _mm512_mask_storeu_ps(d + 16 * nv, tm, _mm512_mul_ps(_mm512_maskz_loadu_ps(tm, y + 16 * nv),
                                                          _mm512_sub_ps(_mm512_maskz_loadu_ps(tm, g + 16 * nv), sv)));
}
}  // namespace
#endif

// softmax: da = out * (grad - sum(grad * out)); log_softmax: da = grad - exp(out) * sum(grad), along dim, in one
// pass per row (the formulas of derivatives.cpp, fused; the sums in double)
Tensor softmax_backward_kernel(const Tensor& grad, const Tensor& out, int64_t dim, bool log) {
  int64_t outer, inner;
  Tensor g = reduced_last(grad, {dim}, outer, inner);
  Tensor y = reduced_last(out, {dim}, outer, inner);
  Tensor da = empty(y->shape, out->dtype);
  if (da->numel > 0) {
    DG_DISPATCH_FLOAT(out->dtype, T, {
      for_rows(outer, inner, [&](int64_t r) {
        const T* gr = g->data<T>() + r * inner;
        const T* yr = y->data<T>() + r * inner;
        T* d = da->data<T>() + r * inner;
#if defined(__AVX512F__)
        if constexpr (std::is_same_v<T, float>) {  // Note [Softmax in 16 lanes]: the sum in float32 lanes
          softmax_backward_row16(reinterpret_cast<const float*>(gr), reinterpret_cast<const float*>(yr),
                                 reinterpret_cast<float*>(d), inner, log);
          return;
        }
#endif
        if (log) {
          const T s = (T)row_sum<T, double>(gr, inner);
          for (int64_t i = 0; i < inner; ++i) d[i] = gr[i] - k_exp<T>(yr[i]) * s;
        } else {
          for (int64_t i = 0; i < inner; ++i) d[i] = gr[i] * yr[i];
          const T s = (T)row_sum<T, double>(d, inner);
          for (int64_t i = 0; i < inner; ++i) d[i] = yr[i] * (gr[i] - s);
        }
      });
    });
  }
  return dim_put_back(da, out, dim);
}

// ---- layer_norm (Note [Fused layer_norm] in ops_nn.cpp) ----
namespace {
// A row's mean and 1 / sqrt(biased variance + eps), both in double, the variance from the centred values (two
// passes over the row, as mean((x - mean)^2) in the composite form).
template <typename T>
std::pair<double, double> row_moments(const T* x, int64_t D, double eps) {
  const double mu = row_sum<T, double>(x, D) / (double)D;
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= D; i += 8)
    for (int j = 0; j < 8; ++j) {
      const double d = (double)x[i + j] - mu;
      acc[j] += d * d;
    }
  double ss = 0;
  for (; i < D; ++i) ss += ((double)x[i] - mu) * ((double)x[i] - mu);
  for (int j = 0; j < 8; ++j) ss += acc[j];
  return {mu, 1.0 / std::sqrt(ss / (double)D + eps)};
}

#if defined(__AVX512F__)
// Note [layer_norm in 16 lanes]: float32 rows in vectors of 16 (the tail masked), the row in L1 throughout: its
// mean as a float32 sum (two 16-lane accumulators, then across the lanes), the biased variance from the centred
// values (a second read of the row from L1), rstd = 1 / sqrt(var + eps) (in double; in float32 on the register
// path below), then the output; the backward recomputes the row's moments and keeps dweight's and dbias's sums of a block of rows in float32 lanes (the
// blocks fixed by the shape, so the bits do not depend on the thread count), the blocks' sums added in order in
// double. Rows of up to 128 stay in registers (layer_norm_rows_regs; the loops over them unrolled by pragma, else GCC
// kept the row on the stack: 0.046 -> 0.025 ms). (12, 64, 128), the GPT's layer_norm, 1 thread, thread CPU time,
// best of 300 alternating with torch (bench/norm_parts.py, Xeon family 6 model 167, KVM, load 5-8): forward
// 0.057 -> 0.025 ms (torch 0.050), forward + backward 0.274 -> 0.153 (torch 0.238).
struct Moments16 {
  __m512 mean, rstd;
};
inline Moments16 row_moments16(const float* x, int64_t D, double eps) {
  const int64_t nv = D / 16;
  const __mmask16 tm = tail_mask16(D - 16 * nv);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t v = 0;
  for (; v + 2 <= nv; v += 2) {
    s0 = _mm512_add_ps(s0, _mm512_loadu_ps(x + 16 * v));
    s1 = _mm512_add_ps(s1, _mm512_loadu_ps(x + 16 * v + 16));
  }
  if (v < nv) s0 = _mm512_add_ps(s0, _mm512_loadu_ps(x + 16 * v));
  if (tm) s1 = _mm512_add_ps(s1, _mm512_maskz_loadu_ps(tm, x + 16 * nv));
  const __m512 m = _mm512_set1_ps(_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / (float)D);
  s0 = s1 = _mm512_setzero_ps();
  for (v = 0; v + 2 <= nv; v += 2) {
    const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + 16 * v), m);
    const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(x + 16 * v + 16), m);
    s0 = _mm512_fmadd_ps(d0, d0, s0);
    s1 = _mm512_fmadd_ps(d1, d1, s1);
  }
  if (v < nv) {
    const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + 16 * v), m);
    s0 = _mm512_fmadd_ps(d0, d0, s0);
  }
  if (tm) {
    const __m512 d1 = _mm512_maskz_sub_ps(tm, _mm512_maskz_loadu_ps(tm, x + 16 * nv), m);
    s1 = _mm512_fmadd_ps(d1, d1, s1);
  }
  const double var = (double)_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / (double)D;
  return {m, _mm512_set1_ps((float)(1.0 / std::sqrt(var + eps)))};
}

// Rows of 16 (NV - 1) < D <= 16 NV held in NV registers (a transformer's D = 128 in 8): the row read once, the
// same arithmetic as row_moments16 but for the order of the lane sums.
template <int NV>
struct RowRegs {
  __m512 v[NV];
  __mmask16 tm;  // the last vector's lanes
  DG_FAST_INLINE void load(const float* x, int64_t D) {
    tm = (__mmask16)(D - 16 * (NV - 1) >= 16 ? 0xFFFF : tail_mask16(D - 16 * (NV - 1)));
    #pragma GCC unroll 16
    for (int j = 0; j < NV - 1; ++j) v[j] = _mm512_loadu_ps(x + 16 * j);
    v[NV - 1] = _mm512_maskz_loadu_ps(tm, x + 16 * (NV - 1));
  }
};

template <int NV>
DG_FAST_INLINE __m512 tree_sum(const __m512* a) {  // a[0] + ... + a[NV - 1], pairwise
  if constexpr (NV == 1) {
    return a[0];
  } else {
    __m512 t[(NV + 1) / 2];
    #pragma GCC unroll 16
    for (int j = 0; j < NV / 2; ++j) t[j] = _mm512_add_ps(a[2 * j], a[2 * j + 1]);
    if (NV % 2) t[NV / 2] = a[NV - 1];
    return tree_sum<(NV + 1) / 2>(t);
  }
}

// the row's mean and rstd, and x - mean in c (0 in the lanes past D)
template <int NV>
DG_FAST_INLINE Moments16 regs_moments(const RowRegs<NV>& x, int64_t D, double eps, __m512* c) {
  // the row's chain of latencies (sum, mean, squares, variance, rstd) is the cost: multiplications by 1 / D, and
  // rstd in float32 (a double division and square root took a third of the time)
  const float invD = 1.0f / (float)D;
  const __m512 m = _mm512_set1_ps(_mm512_reduce_add_ps(tree_sum<NV>(x.v)) * invD);
  __m512 sq[NV];
  #pragma GCC unroll 16
  for (int j = 0; j < NV; ++j) {
    c[j] = j == NV - 1 ? _mm512_maskz_sub_ps(x.tm, x.v[j], m) : _mm512_sub_ps(x.v[j], m);
    sq[j] = _mm512_mul_ps(c[j], c[j]);
  }
  const float var = _mm512_reduce_add_ps(tree_sum<NV>(sq)) * invD;
  return {m, _mm512_set1_ps(1.0f / std::sqrt(var + (float)eps))};
}

template <int NV>
void layer_norm_rows_regs(const float* x, const float* w, const float* b, int64_t rows, int64_t D, double eps,
                          float* y) {
  for_rows(rows, D, [&](int64_t r) {
    RowRegs<NV> xr;
    xr.load(x + r * D, D);
    __m512 c[NV];
    const Moments16 mo = regs_moments<NV>(xr, D, eps, c);
    float* yr = y + r * D;
    #pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) {
      const __mmask16 m = j == NV - 1 ? xr.tm : (__mmask16)0xFFFF;
      const __m512 xh = _mm512_mul_ps(c[j], mo.rstd);
      const __m512 wv = w ? _mm512_maskz_loadu_ps(m, w + 16 * j) : _mm512_set1_ps(1.0f);
      const __m512 bv = b ? _mm512_maskz_loadu_ps(m, b + 16 * j) : _mm512_setzero_ps();
      _mm512_mask_storeu_ps(yr + 16 * j, m, _mm512_fmadd_ps(xh, wv, bv));
    }
  });
}

template <int NV>
void layer_norm_backward_rows_regs(const float* g, const float* x, const float* w, int64_t r0, int64_t r1, int64_t D,
                                   double eps, float* dx, float* aw, float* ab) {
  const float invD = 1.0f / (float)D;
  for (int64_t r = r0; r < r1; ++r) {
    RowRegs<NV> xr, gr;
    xr.load(x + r * D, D);
    gr.load(g + r * D, D);
    __m512 xh[NV], gw[NV], sgx[NV];
    const Moments16 mo = regs_moments<NV>(xr, D, eps, xh);
    #pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) {
      const __mmask16 m = j == NV - 1 ? xr.tm : (__mmask16)0xFFFF;
      xh[j] = _mm512_mul_ps(xh[j], mo.rstd);
      if (aw) _mm512_mask_storeu_ps(aw + 16 * j, m, _mm512_fmadd_ps(gr.v[j], xh[j], _mm512_maskz_loadu_ps(m, aw + 16 * j)));
      if (ab) _mm512_mask_storeu_ps(ab + 16 * j, m, _mm512_add_ps(gr.v[j], _mm512_maskz_loadu_ps(m, ab + 16 * j)));
      gw[j] = w ? _mm512_mul_ps(gr.v[j], _mm512_maskz_loadu_ps(m, w + 16 * j)) : gr.v[j];
      sgx[j] = _mm512_mul_ps(gw[j], xh[j]);
    }
    if (!dx) continue;
    // dx = rstd (gw - mean(gw) - xhat mean(gw xhat))
    const __m512 mg = _mm512_set1_ps(_mm512_reduce_add_ps(tree_sum<NV>(gw)) * invD);
    const __m512 mgx = _mm512_set1_ps(_mm512_reduce_add_ps(tree_sum<NV>(sgx)) * invD);
    float* dr = dx + r * D;
    #pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) {
      const __mmask16 m = j == NV - 1 ? xr.tm : (__mmask16)0xFFFF;
      const __m512 t = _mm512_fnmadd_ps(xh[j], mgx, _mm512_sub_ps(gw[j], mg));
      _mm512_mask_storeu_ps(dr + 16 * j, m, _mm512_mul_ps(mo.rstd, t));
    }
  }
}

void layer_norm_rows16(const float* x, const float* w, const float* b, int64_t rows, int64_t D, double eps,
                       float* y) {
  switch ((D + 15) / 16) {  // the register path wants 16 (NV - 1) < D <= 16 NV
    case 1: return layer_norm_rows_regs<1>(x, w, b, rows, D, eps, y);
    case 2: return layer_norm_rows_regs<2>(x, w, b, rows, D, eps, y);
    case 3: return layer_norm_rows_regs<3>(x, w, b, rows, D, eps, y);
    case 4: return layer_norm_rows_regs<4>(x, w, b, rows, D, eps, y);
    case 5: return layer_norm_rows_regs<5>(x, w, b, rows, D, eps, y);
    case 6: return layer_norm_rows_regs<6>(x, w, b, rows, D, eps, y);
    case 7: return layer_norm_rows_regs<7>(x, w, b, rows, D, eps, y);
    case 8: return layer_norm_rows_regs<8>(x, w, b, rows, D, eps, y);
    default: break;
  }
  const int64_t nv = D / 16;
  const __mmask16 tm = tail_mask16(D - 16 * nv);
  const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
  for_rows(rows, D, [&](int64_t r) {
    const float* xr = x + r * D;
    float* yr = y + r * D;
    const Moments16 mo = row_moments16(xr, D, eps);
    for (int64_t v = 0; v < nv; ++v) {
      const __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(xr + 16 * v), mo.mean), mo.rstd);
      const __m512 wv = w ? _mm512_loadu_ps(w + 16 * v) : one, bv = b ? _mm512_loadu_ps(b + 16 * v) : zero;
      _mm512_storeu_ps(yr + 16 * v, _mm512_fmadd_ps(xh, wv, bv));
    }
    if (tm) {
      const __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(tm, xr + 16 * nv), mo.mean), mo.rstd);
      const __m512 wv = w ? _mm512_maskz_loadu_ps(tm, w + 16 * nv) : one;
      const __m512 bv = b ? _mm512_maskz_loadu_ps(tm, b + 16 * nv) : zero;
      _mm512_mask_storeu_ps(yr + 16 * nv, tm, _mm512_fmadd_ps(xh, wv, bv));
    }
  });
}

// rows [r0, r1): dx, and the rows' sums of g xhat into aw and of g into ab (D floats each, accumulated into)
void layer_norm_backward_rows16(const float* g, const float* x, const float* w, int64_t r0, int64_t r1, int64_t D,
                                double eps, float* dx, float* aw, float* ab) {
  switch ((D + 15) / 16) {  // the register path wants 16 (NV - 1) < D <= 16 NV
    case 1: return layer_norm_backward_rows_regs<1>(g, x, w, r0, r1, D, eps, dx, aw, ab);
    case 2: return layer_norm_backward_rows_regs<2>(g, x, w, r0, r1, D, eps, dx, aw, ab);
    case 3: return layer_norm_backward_rows_regs<3>(g, x, w, r0, r1, D, eps, dx, aw, ab);
    case 4: return layer_norm_backward_rows_regs<4>(g, x, w, r0, r1, D, eps, dx, aw, ab);
    case 5: return layer_norm_backward_rows_regs<5>(g, x, w, r0, r1, D, eps, dx, aw, ab);
    case 6: return layer_norm_backward_rows_regs<6>(g, x, w, r0, r1, D, eps, dx, aw, ab);
    case 7: return layer_norm_backward_rows_regs<7>(g, x, w, r0, r1, D, eps, dx, aw, ab);
    case 8: return layer_norm_backward_rows_regs<8>(g, x, w, r0, r1, D, eps, dx, aw, ab);
    default: break;
  }
  const int64_t nv = D / 16, nfull = 16 * nv;
  const __mmask16 tm = tail_mask16(D - nfull);
  const float invD = 1.0f / (float)D;
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * D;
    const float* gr = g + r * D;
    const Moments16 mo = row_moments16(xr, D, eps);
    __m512 sg = _mm512_setzero_ps(), sgx = _mm512_setzero_ps();
    auto pass_a = [&](int64_t i, __mmask16 m) {
      const __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, xr + i), mo.mean), mo.rstd);
      const __m512 gv = _mm512_maskz_loadu_ps(m, gr + i);
      if (aw) _mm512_mask_storeu_ps(aw + i, m, _mm512_fmadd_ps(gv, xh, _mm512_maskz_loadu_ps(m, aw + i)));
      if (ab) _mm512_mask_storeu_ps(ab + i, m, _mm512_add_ps(gv, _mm512_maskz_loadu_ps(m, ab + i)));
      const __m512 gw = w ? _mm512_mul_ps(gv, _mm512_maskz_loadu_ps(m, w + i)) : gv;
      sg = _mm512_add_ps(sg, gw);
      sgx = _mm512_fmadd_ps(gw, xh, sgx);
    };
    for (int64_t i = 0; i < nfull; i += 16) pass_a(i, (__mmask16)0xFFFF);
    if (tm) pass_a(nfull, tm);
    if (!dx) continue;
    // dx = rstd (gw - mean(gw) - xhat mean(gw xhat))
    const __m512 mg = _mm512_set1_ps(_mm512_reduce_add_ps(sg) * invD);
    const __m512 mgx = _mm512_set1_ps(_mm512_reduce_add_ps(sgx) * invD);
    float* dr = dx + r * D;
    auto pass_b = [&](int64_t i, __mmask16 m) {
      const __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, xr + i), mo.mean), mo.rstd);
      const __m512 gv = _mm512_maskz_loadu_ps(m, gr + i);
      const __m512 gw = w ? _mm512_mul_ps(gv, _mm512_maskz_loadu_ps(m, w + i)) : gv;
      const __m512 t = _mm512_fnmadd_ps(xh, mgx, _mm512_sub_ps(gw, mg));
      _mm512_mask_storeu_ps(dr + i, m, _mm512_mul_ps(mo.rstd, t));
    };
    for (int64_t i = 0; i < nfull; i += 16) pass_b(i, (__mmask16)0xFFFF);
    if (tm) pass_b(nfull, tm);
  }
}
#endif

template <typename T>
void layer_norm_typed(const T* x, const T* w, const T* b, int64_t rows, int64_t D, double eps, T* y) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    layer_norm_rows16(x, w, b, rows, D, eps, y);
    return;
  }
#endif
  for_rows(rows, D, [&](int64_t r) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    const auto [mu, rstd] = row_moments(xr, D, eps);
    const T m = (T)mu, s = (T)rstd;
    if (w && b)
      for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - m) * s * w[i] + b[i];
    else if (w)
      for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - m) * s * w[i];
    else if (b)
      for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - m) * s + b[i];
    else
      for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - m) * s;
  });
}

// dx per row; dweight and dbias as sums over rows, first per block of rows (the blocks fixed by the shape, so the
// bits do not depend on the thread count), then the blocks' partial sums in order.
template <typename T>
void layer_norm_backward_typed(const T* g, const T* x, const T* w, int64_t rows, int64_t D, double eps, T* dx,
                               T* dw, T* db) {
  const int64_t block = std::max<int64_t>(32, (rows + 63) / 64), nblocks = (rows + block - 1) / block;
  std::vector<double> part_w(dw ? nblocks * D : 0), part_b(db ? nblocks * D : 0);
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {  // Note [layer_norm in 16 lanes]
    parallel_for(nblocks, [&](int64_t lo, int64_t hi) {
      std::vector<float> acc((dw ? D : 0) + (db ? D : 0));
      float* aw = dw ? acc.data() : nullptr;
      float* ab = db ? acc.data() + (dw ? D : 0) : nullptr;
      for (int64_t k = lo; k < hi; ++k) {
        // float32 lane sums over at most 32 rows at a time, added into the block's double sums
        for (int64_t r0 = k * block, end = std::min(rows, (k + 1) * block); r0 < end; r0 += 32) {
          std::fill(acc.begin(), acc.end(), 0.0f);
          layer_norm_backward_rows16(g, x, w, r0, std::min(end, r0 + 32), D, eps, dx, aw, ab);
          for (int64_t i = 0; i < D; ++i) {
            if (aw) part_w[k * D + i] += aw[i];
            if (ab) part_b[k * D + i] += ab[i];
          }
        }
      }
    }, std::max<int64_t>(2, parallel_grain() / std::max<int64_t>(block * D, 1)));
  } else
#endif
  parallel_for(nblocks, [&](int64_t lo, int64_t hi) {
    std::vector<T> gw(D);
    for (int64_t k = lo; k < hi; ++k) {
      double* pw = dw ? part_w.data() + k * D : nullptr;
      double* pb = db ? part_b.data() + k * D : nullptr;
      for (int64_t r = k * block; r < std::min(rows, (k + 1) * block); ++r) {
        const T* xr = x + r * D;
        const T* gr = g + r * D;
        const auto [mu, rstd] = row_moments(xr, D, eps);
        const T m = (T)mu, s = (T)rstd;
        if (pw)
          for (int64_t i = 0; i < D; ++i) pw[i] += (double)(gr[i] * ((xr[i] - m) * s));
        if (pb)
          for (int64_t i = 0; i < D; ++i) pb[i] += (double)gr[i];
        if (!dx) continue;
        for (int64_t i = 0; i < D; ++i) gw[i] = w ? gr[i] * w[i] : gr[i];
        const double mean_g = row_sum<T, double>(gw.data(), D) / (double)D;
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sgx = 0;
        int64_t i = 0;
        for (; i + 8 <= D; i += 8)
          for (int j = 0; j < 8; ++j) acc[j] += (double)(gw[i + j] * ((xr[i + j] - m) * s));
        for (; i < D; ++i) sgx += (double)(gw[i] * ((xr[i] - m) * s));
        for (int j = 0; j < 8; ++j) sgx += acc[j];
        const T mg = (T)mean_g, mgx = (T)(sgx / (double)D);
        T* dr = dx + r * D;
        for (int64_t i2 = 0; i2 < D; ++i2) dr[i2] = s * (gw[i2] - mg - ((xr[i2] - m) * s) * mgx);
      }
    }
  }, std::max<int64_t>(2, parallel_grain() / std::max<int64_t>(block * D, 1)));
  for (int64_t i = 0; i < D; ++i) {
    double sw = 0, sb = 0;
    for (int64_t k = 0; k < nblocks; ++k) {
      if (dw) sw += part_w[k * D + i];
      if (db) sb += part_b[k * D + i];
    }
    if (dw) dw[i] = (T)sw;
    if (db) db[i] = (T)sb;
  }
}
}  // namespace

void layer_norm_kernel(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t D, double eps,
                       const Tensor& out) {
  if (out->numel == 0) return;
  const int64_t rows = x->numel / D;
  DG_DISPATCH_FLOAT(x->dtype, T, layer_norm_typed<T>(x->data<T>(), weight ? weight->data<T>() : nullptr,
                                                     bias ? bias->data<T>() : nullptr, rows, D, eps,
                                                     out->data<T>()));
}

void layer_norm_backward_kernel(const Tensor& grad, const Tensor& x, const Tensor& weight, int64_t D, double eps,
                                const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t rows = D > 0 ? x->numel / D : 0;
  DG_DISPATCH_FLOAT(x->dtype, T, {
    if (rows == 0) {  // sums over no rows
      if (dweight) std::fill(dweight->data<T>(), dweight->data<T>() + dweight->numel, T(0));
      if (dbias) std::fill(dbias->data<T>(), dbias->data<T>() + dbias->numel, T(0));
      return;
    }
    layer_norm_backward_typed<T>(grad->data<T>(), x->data<T>(), weight ? weight->data<T>() : nullptr, rows, D, eps,
                                 dx ? dx->data<T>() : nullptr, dweight ? dweight->data<T>() : nullptr,
                                 dbias ? dbias->data<T>() : nullptr);
  });
}

}  // namespace dyngrad
