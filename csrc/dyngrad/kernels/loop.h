// loop.h: StridedLoop::run, the one strided loop every elementwise kernel goes through (header so that the
// per-op lambdas inline into it).
#pragma once
#include "gil.h"
#include "kernels.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace dyngrad {

// body(lo, hi) over [0, n): inline below kParallelGrain (never entering OpenMP, whose fork/join costs more than a
// small op), else split across the cores with the GIL released.
template <typename F>
inline void parallel_for(int64_t n, F&& body, int64_t grain = kParallelGrain) {
  if (n < grain) {
    if (n > 0) body(int64_t(0), n);
    return;
  }
  GilRelease no_gil(true);
#ifdef _OPENMP
#pragma omp parallel
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t chunk = (n + nt - 1) / nt;
    chunk = (chunk + 15) / 16 * 16;  // keep chunk starts aligned for SIMD
    int64_t lo = std::min<int64_t>(n, t * chunk), hi = std::min<int64_t>(n, lo + chunk);
    if (hi > lo) body(lo, hi);
  }
#else
  body(int64_t(0), n);
#endif
}

template <typename F>
void StridedLoop::run(F&& fn, bool parallel_ok) const {
  const int64_t nd = (int64_t)shape.size();
  if (numel == 0) return;
  if (nd == 0) {
    char* ptrs[kMax];
    int64_t st[kMax] = {0, 0, 0, 0};
    for (int i = 0; i < nops; ++i) ptrs[i] = base[i];
    fn(ptrs, st, 1);
    return;
  }
  const int64_t inner = shape[nd - 1];
  int64_t inner_strides[kMax] = {0, 0, 0, 0};
  for (int i = 0; i < nops; ++i) inner_strides[i] = strides[i][nd - 1];
  const int64_t rows = numel / inner;

  // One row range [r0, r1): compute the starting pointers from the row's multi-index, then walk rows.
  auto run_rows = [&](int64_t r0, int64_t r1) {
    Shape idx(nd > 1 ? nd - 1 : 0);
    int64_t rem = r0;
    for (int64_t d = nd - 2; d >= 0; --d) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    char* ptrs[kMax];
    for (int i = 0; i < nops; ++i) {
      ptrs[i] = base[i];
      for (int64_t d = 0; d < nd - 1; ++d) ptrs[i] += idx[d] * strides[i][d];
    }
    for (int64_t r = r0; r < r1; ++r) {
      fn(ptrs, inner_strides, inner);
      for (int64_t d = nd - 2; d >= 0; --d) {  // odometer increment
        ++idx[d];
        for (int i = 0; i < nops; ++i) ptrs[i] += strides[i][d];
        if (idx[d] < shape[d]) break;
        for (int i = 0; i < nops; ++i) ptrs[i] -= strides[i][d] * shape[d];
        idx[d] = 0;
      }
    }
  };

  if (parallel_ok && numel >= kParallelGrain) {
    GilRelease no_gil(true);
#ifdef _OPENMP
    if (rows == 1) {  // one long row: split it
      int nthreads = omp_get_max_threads();
#pragma omp parallel num_threads(nthreads)
      {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t chunk = (inner + nt - 1) / nt;
        chunk = (chunk + 15) / 16 * 16;
        int64_t s = std::min<int64_t>(inner, t * chunk), e = std::min<int64_t>(inner, s + chunk);
        if (e > s) {
          char* ptrs[kMax];
          for (int i = 0; i < nops; ++i) ptrs[i] = base[i] + s * inner_strides[i];
          fn(ptrs, inner_strides, e - s);
        }
      }
      return;
    }
#pragma omp parallel
    {
      int t = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
      if (r1 > r0) run_rows(r0, r1);
    }
    return;
#endif
  }
  run_rows(0, rows);
}

}  // namespace dyngrad
