// loss.cpp: cross_entropy's loops (kernels.h), forward and fused backward. Targets were checked by the op.
#include <algorithm>

#include "kernels.h"

namespace dyngrad {

Tensor cross_entropy_kernel(const Tensor& logp, const Tensor& target, int64_t ignore_index, double label_smoothing,
                            int64_t& kept) {
  const int64_t N = logp->shape[0], C = logp->shape[1];
  Tensor losses = empty({N}, logp->dtype);
  const int64_t* tp = target->data<int64_t>();
  kept = 0;
  DG_DISPATCH_FLOAT(logp->dtype, T, {
    const T* lp = logp->data<T>();
    T* l = losses->data<T>();
    for (int64_t i = 0; i < N; ++i) {
      const int64_t c = tp[i];
      if (c == ignore_index) {
        l[i] = 0;
        continue;
      }
      double v = -(1.0 - label_smoothing) * (double)lp[i * C + c];
      if (label_smoothing > 0) {
        double s = 0;
        for (int64_t k = 0; k < C; ++k) s += lp[i * C + k];
        v -= label_smoothing / C * s;
      }
      l[i] = (T)v;
      ++kept;
    }
  });
  return losses;
}

// The per-element arithmetic of the differentiable formula (derivatives.cpp), in its order, so the two agree to
// the bit: ((p - q) * keep) * scale, q = ls/C (+ (1 - ls) at the target), scale = grad / kept for a mean.
Tensor cross_entropy_backward_kernel(const Tensor& grad, const Tensor& logits, const Tensor& target, int64_t reduction,
                                     int64_t ignore_index, double label_smoothing) {
  const int64_t N = logits->shape[0], C = logits->shape[1];
  Tensor p = softmax_kernel(logits, 1, false);  // a fresh (N, C) buffer: the result is written into it
  const int64_t* t = target->data<int64_t>();
  int64_t kept = 0;
  for (int64_t i = 0; i < N; ++i) kept += t[i] != ignore_index;
  DG_DISPATCH_FLOAT(p->dtype, T, {
    T* pp = p->data<T>();
    const T* g = grad->data<T>();
    const T spread = (T)(label_smoothing / C), hit = (T)(1 - label_smoothing);
    const T mean_scale = reduction == 1 ? g[0] / (T)std::max<int64_t>(kept, 1) : T(0);
    for (int64_t i = 0; i < N; ++i) {
      T* row = pp + i * C;
      if (t[i] == ignore_index) {
        std::fill(row, row + C, T(0));
        continue;
      }
      const T scale = reduction == 0 ? g[i] : reduction == 1 ? mean_scale : g[0];
      for (int64_t c = 0; c < C; ++c) {
        const T q = c == t[i] ? spread + hit : spread;
        row[c] = (row[c] - q) * scale;
      }
    }
  });
  return p;
}

CrossEntropyTarget cross_entropy_target_kernel(const Tensor& target, int64_t C, int64_t ignore_index,
                                               double label_smoothing, DType dtype) {
  const int64_t N = target->numel;
  CrossEntropyTarget r{zeros({N, C}, dtype), zeros({N, 1}, dtype), 0};
  const int64_t* t = target->data<int64_t>();
  DG_DISPATCH_FLOAT(dtype, T, {
    T* q = r.q->data<T>();
    T* keep = r.keep->data<T>();
    const T spread = (T)(label_smoothing / C), hit = (T)(1 - label_smoothing);
    for (int64_t i = 0; i < N; ++i) {
      if (t[i] == ignore_index) continue;
      keep[i] = 1;
      ++r.kept;
      for (int64_t c = 0; c < C; ++c) q[i * C + c] = spread;
      q[i * C + t[i]] += hit;
    }
  });
  return r;
}

}  // namespace dyngrad
