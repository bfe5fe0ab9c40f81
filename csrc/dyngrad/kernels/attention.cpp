// attention.cpp: the fused scaled-dot-product attention kernels, forward and backward (Note [Fused attention] in
// ops_nn.cpp), and the counter-based dropout mask they share (Note [Dropout inside attention]).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "fast_math.h"
#include "gil.h"
#include "kernels.h"
#include "thread_pool.h"

namespace dyngrad {

// Note [Dropout inside attention]: the keep decision of weight (bh, i, j) is a hash of (seed, its flat index
// (bh * Lq + i) * Lk + j) -- splitmix64's finaliser -- so the backward regenerates exactly the forward's mask from
// the seed alone (no mask is saved), the result does not depend on how the work is split over threads, and the
// reference engine reproduces the same bits in numpy (reference/ops_nn.py, attention_keep). Kept iff the top 24
// bits of the hash are >= floor(p * 2^24); kept weights are scaled by 1 / (1 - p). The seed is drawn once per call
// from the generator (the API's randint), so manual_seed reproduces a call and both engines draw the same one. The
// forward drops the weights after their row sum (dropout of the softmax's output, as torch); the backward uses
// D_i = dO_i . O_i, which equals sum_j P_ij dP_ij with the dropped weights too. The hash costs a multiply-xorshift
// chain per weight, in the forward and again in the backward: bench/attention.py, (12, 4, 64, 32) causal, float32,
// 1 thread, Xeon family 6 model 167, 2 cores, KVM, load 6.6, ms: p = 0.1 forward 0.95 against 0.50 without dropout
// (composite 1.82, torch 1.93), forward+backward 2.42 against 1.42 (composite 2.95, torch 3.21).
uint64_t attention_dropout_threshold(double p) {
  if (p <= 0) return 0;
  if (p >= 1) return uint64_t(1) << 24;
  return (uint64_t)std::floor(p * 16777216.0);
}

static inline bool attention_keep(uint64_t seed, uint64_t index, uint64_t threshold) {
  uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return (z >> 40) >= threshold;
}

namespace {

constexpr int64_t kQueryTile = 64;   // query rows per tile
// Note [Causal query tiles]: with a causal mask a tile of query rows i0 .. i0 + rows needs keys up to i0 + rows
// only; tiles of 16 rows skip most of the masked upper triangle that tiles of 64 computed and then threw away
// (a 64-token context: 62.5% of the score products and exps). bench/attention.py, (12, 4, 64, 32) causal,
// float32, 1 thread, Xeon family 6 model 167, 2 cores, KVM, load 7.6-8.2, ms (torch/dyngrad in one run): forward
// 0.495 -> 0.375 (0.76x -> 1.00x), forward + backward 1.349 -> 1.094 (1.03x -> 1.40x).
constexpr int64_t kCausalQueryTile = 16;
inline int64_t query_tile(bool causal) { return causal ? kCausalQueryTile : kQueryTile; }
constexpr int64_t kKeyBlock = 256;   // keys per block of the online softmax

// exp that vectorises for float32 (fast_math.h), std::exp for float64
template <typename T>
DG_FAST_INLINE T attn_exp(T x) {
  if constexpr (std::is_same_v<T, float>) return fast_expf(x);
  else return std::exp(x);
}
// max and sum over a row in 8 fixed lanes (the order does not depend on anything but n, and the loops vectorise)
template <typename T>
T row_max(const T* x, int64_t n) {
  T acc[8];
  for (int l = 0; l < 8; ++l) acc[l] = -std::numeric_limits<T>::infinity();
  int64_t c = 0;
  for (; c + 8 <= n; c += 8)
    for (int l = 0; l < 8; ++l) acc[l] = acc[l] > x[c + l] ? acc[l] : x[c + l];
  for (; c < n; ++c) acc[0] = acc[0] > x[c] ? acc[0] : x[c];
  T m = acc[0];
  for (int l = 1; l < 8; ++l) m = m > acc[l] ? m : acc[l];
  return m;
}
template <typename T>
T exp_shifted_sum(T* x, int64_t n, T shift) {  // x = exp(x - shift) in place, returns the sum
  for (int64_t c = 0; c < n; ++c) x[c] = attn_exp(x[c] - shift);
  T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t c = 0;
  for (; c + 8 <= n; c += 8)
    for (int l = 0; l < 8; ++l) acc[l] += x[c + l];
  for (; c < n; ++c) acc[0] += x[c];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

struct AttnShape {
  int64_t BH, Lq, Lk, E, Ev;
  int64_t ldq, ldk, ldv;  // row strides of q, k, v (Note [Attention on row-strided views])
  bool causal;
  double scale, p;
  uint64_t seed, threshold;
  // element offsets of each (flattened) batch index into q, k, v, mask (broadcast dims have stride 0)
  std::vector<int64_t> qo, ko, vo, mo;
  int64_t msi = 0, msj = 0;  // the mask's row and column strides (0 where broadcast)
  // the written (and the gradient's) tensors' offsets and row strides: Note [Attention outputs in the heads' layout]
  std::vector<int64_t> oo, go, dqo, dko, dvo;
  int64_t ldo = 0, ldg = 0, lddq = 0, lddk = 0, lddv = 0;
};

// Offsets of every batch index of `batch` into t (whose last `trailing` dims are the matrix), right-aligned
// broadcasting: a missing or size-1 dim has stride 0.
std::vector<int64_t> batch_offsets(const Tensor& t, const Shape& batch, int64_t trailing) {
  const int64_t nb = (int64_t)batch.size(), tb = t->ndim() - trailing;
  int64_t total = 1;
  for (int64_t s : batch) total *= s;
  std::vector<int64_t> off((size_t)total, 0);
  std::vector<int64_t> stride((size_t)nb, 0);
  for (int64_t d = 0; d < nb; ++d) {
    const int64_t td = d - (nb - tb);
    if (td >= 0 && t->shape[td] != 1) stride[d] = t->strides[td];
  }
  std::vector<int64_t> idx((size_t)nb, 0);
  for (int64_t f = 0; f < total; ++f) {
    int64_t o = 0;
    for (int64_t d = 0; d < nb; ++d) o += idx[d] * stride[d];
    off[f] = o;
    for (int64_t d = nb - 1; d >= 0; --d) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return off;
}

// The offsets of every batch index into t (a tensor of shape batch + two dims, rows contiguous) and its row stride;
// nothing for a null t.
void rows_of(const Tensor& t, const Shape& batch, std::vector<int64_t>& off, int64_t& ld) {
  if (!t) return;
  off = batch_offsets(t, batch, 2);
  ld = t->strides[t->ndim() - 2];
}

AttnShape attn_shape(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Shape& batch,
                     bool causal, double scale, double p, int64_t seed) {
  AttnShape a;
  a.BH = 1;
  for (int64_t s : batch) a.BH *= s;
  a.Lq = q->shape[q->ndim() - 2];
  a.E = q->shape[q->ndim() - 1];
  a.Lk = k->shape[k->ndim() - 2];
  a.Ev = v->shape[v->ndim() - 1];
  a.ldq = q->strides[q->ndim() - 2];
  a.ldk = k->strides[k->ndim() - 2];
  a.ldv = v->strides[v->ndim() - 2];
  a.causal = causal;
  a.scale = scale;
  a.p = p;
  a.seed = (uint64_t)seed;
  a.threshold = attention_dropout_threshold(p);
  a.qo = batch_offsets(q, batch, 2);
  a.ko = batch_offsets(k, batch, 2);
  a.vo = batch_offsets(v, batch, 2);
  if (mask) {
    a.mo = batch_offsets(mask, batch, 2);
    const int64_t nd = mask->ndim();
    a.msj = nd >= 1 && mask->shape[nd - 1] != 1 ? mask->strides[nd - 1] : 0;
    a.msi = nd >= 2 && mask->shape[nd - 2] != 1 ? mask->strides[nd - 2] : 0;
  }
  return a;
}

// Runs body(bh) for every batch*head on the pool, each bh on exactly one thread (results do not depend on the
// thread count), with the GIL released and the BLAS on one thread (Note [One BLAS] in matmul.cpp).
template <class F>
void over_batch_heads(const AttnShape& a, F&& body) {
  const double work = (double)a.BH * a.Lq * a.Lk * (double)(a.E + a.Ev);
  BlasOneThread one;
  GilRelease no_gil(work > 1e5);
  const int nt = work > 2e5 ? std::min<int64_t>(num_threads(), a.BH) : 1;
  if (nt <= 1) {
    for (int64_t bh = 0; bh < a.BH; ++bh) body(bh);
    return;
  }
  const int64_t chunk = (a.BH + nt - 1) / nt;
  run_parallel(nt, [&](int t) {
    for (int64_t bh = t * chunk; bh < std::min(a.BH, (t + 1) * chunk); ++bh) body(bh);
  });
}

// x[r * ld + c] = 0 for r < rows, c < cols: one fill when the rows are adjacent, else row by row in a loop that
// stays a loop (GCC would make each row a call to memset: 192 calls of 128 bytes per (batch, head) of a GPT's
// backward, 8% of the attention's time).
template <typename T>
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void zero_rows(T* x, int64_t rows, int64_t cols,
                                                                             int64_t ld) {
  if (ld == cols) {
    std::fill(x, x + rows * cols, T(0));
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) x[r * ld + c] = T(0);
}

// The scores of rows i0.. (rows) against keys j0.. (cols), already in S (scale * q k^T): plus the mask, -inf
// above the diagonal when causal.
template <typename T>
void finish_scores(const AttnShape& a, const T* M, int64_t i0, int64_t rows, int64_t j0, int64_t cols, T* S) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    T* row = S + r * kKeyBlock;
    const int64_t i = i0 + r;
    if (M) {
      const T* mrow = M + i * a.msi + j0 * a.msj;
      if (a.msj == 1)
        for (int64_t c = 0; c < cols; ++c) row[c] += mrow[c];
      else
        for (int64_t c = 0; c < cols; ++c) row[c] += mrow[c * a.msj];
    }
    if (a.causal)
      for (int64_t c = std::max<int64_t>(0, i + 1 - j0); c < cols; ++c) row[c] = ninf;
  }
}

template <typename T>
void attention_forward_typed(const AttnShape& a, const T* Q, const T* K, const T* V, const T* M, T* O, T* LSE) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const T keep_scale = a.p < 1 ? T(1.0 / (1.0 - a.p)) : T(0);
  over_batch_heads(a, [&](int64_t bh) {
    std::vector<T> S((size_t)(kQueryTile * kKeyBlock)), m((size_t)kQueryTile), l((size_t)kQueryTile);
    const T* q = Q + a.qo[bh];
    const T* k = K + a.ko[bh];
    const T* v = V + a.vo[bh];
    const T* mk = M ? M + a.mo[bh] : nullptr;
    T* o = O + a.oo[bh];
    const int64_t ldo = a.ldo;
    T* lse = LSE + bh * a.Lq;
    const int64_t tile_rows = query_tile(a.causal);
    for (int64_t i0 = 0; i0 < a.Lq; i0 += tile_rows) {
      const int64_t rows = std::min(tile_rows, a.Lq - i0);
      std::fill(m.begin(), m.end(), ninf);
      std::fill(l.begin(), l.end(), T(0));
      const int64_t jend = a.causal ? std::min(a.Lk, i0 + rows) : a.Lk;
      for (int64_t j0 = 0; j0 < jend; j0 += kKeyBlock) {
        const int64_t cols = std::min(kKeyBlock, jend - j0);
        gemm_into<T>(false, true, rows, cols, a.E, T(a.scale), q + i0 * a.ldq, a.ldq, k + j0 * a.ldk, a.ldk, T(0), S.data(),
                     kKeyBlock);
        finish_scores(a, mk, i0, rows, j0, cols, S.data());
        for (int64_t r = 0; r < rows; ++r) {  // the online softmax: running max m and sum l per row
          T* row = S.data() + r * kKeyBlock;
          const T mx = row_max(row, cols);
          const T m_new = std::max(m[r], mx);
          if (m_new == ninf) {  // every key so far masked out
            std::fill(row, row + cols, T(0));
            continue;
          }
          const T corr = std::exp(m[r] - m_new);
          const T sum = exp_shifted_sum(row, cols, m_new);
          l[r] = l[r] * corr + sum;
          m[r] = m_new;
          if (j0 > 0 && corr != T(1)) {  // (the first block's product writes o: nothing to rescale yet)
            T* orow = o + (i0 + r) * ldo;
            for (int64_t e = 0; e < a.Ev; ++e) orow[e] *= corr;
          }
          if (a.threshold) {
            const uint64_t base = ((uint64_t)bh * a.Lq + (i0 + r)) * a.Lk + j0;
            for (int64_t c = 0; c < cols; ++c)
              row[c] = attention_keep(a.seed, base + c, a.threshold) ? row[c] * keep_scale : T(0);
          }
        }
        gemm_into<T>(false, false, rows, a.Ev, cols, T(1), S.data(), kKeyBlock, v + j0 * a.ldv, a.ldv,
                     j0 > 0 ? T(1) : T(0), o + i0 * ldo, ldo);
      }
      for (int64_t r = 0; r < rows; ++r) {
        T* orow = o + (i0 + r) * ldo;
        if (l[r] == T(0)) {  // a fully masked row: zeros, as torch's math path
          std::fill(orow, orow + a.Ev, T(0));
          lse[i0 + r] = ninf;
          continue;
        }
        const T inv = T(1) / l[r];
        for (int64_t e = 0; e < a.Ev; ++e) orow[e] *= inv;
        lse[i0 + r] = m[r] + std::log(l[r]);
      }
    }
  });
}

template <typename T>
void attention_backward_typed(const AttnShape& a, const T* G, const T* Q, const T* K, const T* V, const T* M,
                              const T* O, const T* LSE, T* DQ, T* DK, T* DV) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const T keep_scale = a.p < 1 ? T(1.0 / (1.0 - a.p)) : T(0);
  over_batch_heads(a, [&](int64_t bh) {
    const size_t tile = (size_t)(kQueryTile * kKeyBlock);
    std::vector<T> P(tile), Pd(a.threshold ? tile : 0), dP(tile), D((size_t)a.Lq);
    const T* q = Q + a.qo[bh];
    const T* k = K + a.ko[bh];
    const T* v = V + a.vo[bh];
    const T* mk = M ? M + a.mo[bh] : nullptr;
    const T* g = G + a.go[bh];
    const T* o = O + a.oo[bh];
    const int64_t ldg = a.ldg, ldo = a.ldo, lddq = a.lddq, lddk = a.lddk, lddv = a.lddv;
    const T* lse = LSE + bh * a.Lq;
    T* dq = DQ ? DQ + a.dqo[bh] : nullptr;
    T* dk = DK ? DK + a.dko[bh] : nullptr;
    T* dv = DV ? DV + a.dvo[bh] : nullptr;
    if (dq) zero_rows(dq, a.Lq, a.E, lddq);
    if (dk) zero_rows(dk, a.Lk, a.E, lddk);
    if (dv) zero_rows(dv, a.Lk, a.Ev, lddv);
    for (int64_t i = 0; i < a.Lq; ++i) {  // D_i = dO_i . O_i = sum_j P_ij dP_ij
      T s = 0;
      for (int64_t e = 0; e < a.Ev; ++e) s += g[i * ldg + e] * o[i * ldo + e];
      D[i] = s;
    }
    const int64_t tile_rows = query_tile(a.causal);
    for (int64_t i0 = 0; i0 < a.Lq; i0 += tile_rows) {
      const int64_t rows = std::min(tile_rows, a.Lq - i0);
      const int64_t jend = a.causal ? std::min(a.Lk, i0 + rows) : a.Lk;
      for (int64_t j0 = 0; j0 < jend; j0 += kKeyBlock) {
        const int64_t cols = std::min(kKeyBlock, jend - j0);
        gemm_into<T>(false, true, rows, cols, a.E, T(a.scale), q + i0 * a.ldq, a.ldq, k + j0 * a.ldk, a.ldk, T(0), P.data(),
                     kKeyBlock);
        finish_scores(a, mk, i0, rows, j0, cols, P.data());
        for (int64_t r = 0; r < rows; ++r) {  // P = exp(s - lse), 0 where masked (and for fully masked rows)
          T* row = P.data() + r * kKeyBlock;
          const T L = lse[i0 + r];
          if (L == ninf)
            std::fill(row, row + cols, T(0));
          else  // exp(-inf - L) = 0 where masked
            for (int64_t c = 0; c < cols; ++c) row[c] = attn_exp(row[c] - L);
          if (a.threshold) {
            T* drow = Pd.data() + r * kKeyBlock;
            const uint64_t base = ((uint64_t)bh * a.Lq + (i0 + r)) * a.Lk + j0;
            for (int64_t c = 0; c < cols; ++c)
              drow[c] = attention_keep(a.seed, base + c, a.threshold) ? keep_scale : T(0);
          }
        }
        if (a.threshold)  // Pd = P * keep / (1 - p), kept in Pd (the factor alone was there)
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) Pd[r * kKeyBlock + c] *= P[r * kKeyBlock + c];
        const T* pd = a.threshold ? Pd.data() : P.data();
        if (dv)  // dV += Pd^T dO
          gemm_into<T>(true, false, cols, a.Ev, rows, T(1), pd, kKeyBlock, g + i0 * ldg, ldg, T(1),
                       dv + j0 * lddv, lddv);
        if (!dq && !dk) continue;
        // dPd = dO V^T; dP = dPd * keep / (1 - p); dS = P (dP - D)
        gemm_into<T>(false, true, rows, cols, a.Ev, T(1), g + i0 * ldg, ldg, v + j0 * a.ldv, a.ldv, T(0), dP.data(),
                     kKeyBlock);
        for (int64_t r = 0; r < rows; ++r) {
          T* drow = dP.data() + r * kKeyBlock;
          const T* prow = P.data() + r * kKeyBlock;
          const T Di = D[i0 + r];
          if (a.threshold) {
            const T* pdrow = Pd.data() + r * kKeyBlock;
            for (int64_t c = 0; c < cols; ++c)  // P * keep/(1-p) * dPd = Pd * dPd
              drow[c] = pdrow[c] * drow[c] - prow[c] * Di;
          } else {
            for (int64_t c = 0; c < cols; ++c) drow[c] = prow[c] * (drow[c] - Di);
          }
        }
        if (dq)  // dQ += scale dS K
          gemm_into<T>(false, false, rows, a.E, cols, T(a.scale), dP.data(), kKeyBlock, k + j0 * a.ldk, a.ldk, T(1),
                       dq + i0 * lddq, lddq);
        if (dk)  // dK += scale dS^T Q
          gemm_into<T>(true, false, cols, a.E, rows, T(a.scale), dP.data(), kKeyBlock, q + i0 * a.ldq, a.ldq, T(1),
                       dk + j0 * lddk, lddk);
      }
    }
  });
}

}  // namespace

void attention_kernel(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Shape& batch,
                      bool causal, double scale, double p, int64_t seed, const Tensor& out, const Tensor& lse) {
  AttnShape a = attn_shape(q, k, v, mask, batch, causal, scale, p, seed);
  rows_of(out, batch, a.oo, a.ldo);
  DG_DISPATCH_FLOAT(q->dtype, T, attention_forward_typed<T>(a, q->data<T>(), k->data<T>(), v->data<T>(),
                                                             mask ? mask->data<T>() : nullptr, out->data<T>(),
                                                             lse->data<T>()));
}

void attention_backward_kernel(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& mask, const Tensor& out, const Tensor& lse, const Shape& batch,
                               bool causal, double scale, double p, int64_t seed, const Tensor& dq, const Tensor& dk,
                               const Tensor& dv) {
  AttnShape a = attn_shape(q, k, v, mask, batch, causal, scale, p, seed);
  rows_of(out, batch, a.oo, a.ldo);
  rows_of(grad, batch, a.go, a.ldg);
  rows_of(dq, batch, a.dqo, a.lddq);
  rows_of(dk, batch, a.dko, a.lddk);
  rows_of(dv, batch, a.dvo, a.lddv);
  DG_DISPATCH_FLOAT(q->dtype, T, attention_backward_typed<T>(a, grad->data<T>(), q->data<T>(), k->data<T>(),
                                                              v->data<T>(), mask ? mask->data<T>() : nullptr,
                                                              out->data<T>(), lse->data<T>(),
                                                              dq ? dq->data<T>() : nullptr,
                                                              dk ? dk->data<T>() : nullptr,
                                                              dv ? dv->data<T>() : nullptr));
}

Tensor attention_keep_scale_kernel(const Shape& batch, int64_t Lq, int64_t Lk, double p, int64_t seed, DType dtype) {
  Shape shape = batch;
  shape.push_back(Lq);
  shape.push_back(Lk);
  Tensor t = empty(shape, dtype);
  const uint64_t threshold = attention_dropout_threshold(p);
  const double keep_scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;
  DG_DISPATCH_FLOAT(dtype, T, {
    T* d = t->data<T>();
    for (int64_t f = 0; f < t->numel; ++f)
      d[f] = attention_keep((uint64_t)seed, (uint64_t)f, threshold) ? T(keep_scale) : T(0);
  });
  return t;
}

Tensor attention_causal_bias_kernel(int64_t Lq, int64_t Lk, DType dtype) {
  Tensor t = empty({Lq, Lk}, dtype);
  DG_DISPATCH_FLOAT(dtype, T, {
    T* d = t->data<T>();
    for (int64_t i = 0; i < Lq; ++i)
      for (int64_t j = 0; j < Lk; ++j) d[i * Lk + j] = j <= i ? T(0) : -std::numeric_limits<T>::infinity();
  });
  return t;
}

}  // namespace dyngrad
