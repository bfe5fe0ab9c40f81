// loop.h: StridedLoop::run, the one strided loop every elementwise kernel goes through (header so that the
// per-op lambdas inline into it).
#pragma once
#include "gil.h"
#include "kernels.h"
#include "thread_pool.h"

namespace dyngrad {

// body(lo, hi) over [0, n): inline below `grain` (a small op never touches the pool), else split into one chunk
// per thread with the GIL released. Each element is computed by exactly one chunk, so results do not depend on
// the number of threads.
// A contiguous tensor seen as outer x n x inner around dim d (n = 1 for a 0-d tensor): the slices a scan or a
// sort walks along d.
struct AroundDim {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AroundDim around_dim(const Shape& shape, int64_t d) {
  AroundDim r;
  for (int64_t i = 0; i < d; ++i) r.outer *= shape[i];
  for (int64_t i = d + 1; i < (int64_t)shape.size(); ++i) r.inner *= shape[i];
  if (!shape.empty()) r.n = shape[d];
  return r;
}

template <typename F>
inline void parallel_for(int64_t n, F&& body, int64_t grain = parallel_grain()) {
  if (n < grain) {
    if (n > 0) body(int64_t(0), n);
    return;
  }
  // a large kernel lets other Python threads run even when it runs on one thread (bench/threads_gil.py)
  GilRelease no_gil(true);
  const int nt = num_threads();
  if (nt <= 1) {
    body(int64_t(0), n);
    return;
  }
  int64_t chunk = (n + nt - 1) / nt;
  chunk = (chunk + 15) / 16 * 16;  // keep chunk starts aligned for SIMD
  run_parallel(nt, [&](int t) {
    int64_t lo = std::min<int64_t>(n, t * chunk), hi = std::min<int64_t>(n, lo + chunk);
    if (hi > lo) body(lo, hi);
  });
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

  if (parallel_ok && numel >= parallel_grain()) {
    if (rows == 1) {  // one long row: split it
      parallel_for(inner, [&](int64_t lo, int64_t hi) {
        char* ptrs[kMax];
        for (int i = 0; i < nops; ++i) ptrs[i] = base[i] + lo * inner_strides[i];
        fn(ptrs, inner_strides, hi - lo);
      });
    } else {
      parallel_for(rows, run_rows, 2);
    }
    return;
  }
  run_rows(0, rows);
}

}  // namespace dyngrad
