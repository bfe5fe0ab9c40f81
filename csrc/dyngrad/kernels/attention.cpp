// attention.cpp: the fused scaled-dot-product attention kernels, forward and backward (Note [Fused attention] in
// ops_nn.cpp), and the counter-based dropout mask they share (Note [Dropout inside attention]). Heads of 16-64 take
// the register-tiled path of Note [Attention tiles for small head dims]; other sizes the gemm_into path.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
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

// ---- Note [Attention tiles for small head dims] -------------------------------------------------------------------
// Heads of 16, 32, 48 or 64 (value dims too): the products of a block run in register-tiled loops written here
// instead of gemm_into, on 16-lane vectors (GCC's vector extensions: one zmm of float32 with AVX-512, two ymm
// without; float64 runs the same code on 16 doubles). Three tile shapes cover the five products of the forward and
// backward:
//   scores  S[i, j] = alpha sum_e A[i, e] Bt[e, j]          (q k^T and dO v^T: k and v transposed once per head)
//   rows    O[i, :] (+)= alpha sum_j P[i, j] B[j, :]         (P v and dS k: B's rows read in place)
//   columns O[j, :] (+)= alpha sum_i P[i, j] B[i, :]         (P^T dO and dS^T q)
// A causal mask is skipped per group of rows (a group of rows i0.. needs keys up to its last row only), the
// products write their first block (no zero fill of dq, dk, dv), and nothing goes through gemm_into's packing.
// The softmax's rows run on whole vectors too (lanes past a row's keys masked: causal rows are 1 .. 64 keys long,
// and the scalar tails of row_max / exp_shifted_sum were 28% of the forward's samples under perf), and so does
// dropout's hash (dropped). Tiles of 32 queries (P and dP 8 KB each, in L1 beside k^T and v^T) and blocks of 64
// keys; score groups of 6 rows x 4 vectors (24 accumulators), row/column groups of 8 rows x 2 vectors (4 x 4 for
// heads of 48-64). Not taken: heads of other sizes (8, 24, 128...), empty q or k; DYNGRAD_ATTENTION=generic takes
// the gemm_into path (A/B runs, tests: tests/test_attention.py's small_heads tests compare the two).
// Measured quiet (load 0.6, Xeon family 6 model 167, 2 cores, KVM, float32, 1 thread, thread CPU time, best of 30,
// the two paths and torch alternating call by call in one process: bench/attention.py; ms, generic -> tiled, torch):
//   GPT (12, 4, 64, 32) causal    forward 0.377 -> 0.253 (torch 0.419), forward + backward 1.145 -> 0.780 (1.611)
//   not causal                    forward 0.465 -> 0.340 (0.407),       forward + backward 1.302 -> 1.004 (1.513)
//   causal, dropout 0.1           forward 0.651 -> 0.377 (2.075),       forward + backward 1.914 -> 0.970 (3.599)
//   (2, 4, 512, 64) causal        forward 3.15 -> 2.80 (4.49),          forward + backward 9.80 -> 8.15 (16.6)
// The gpt-train step (bench/gpt_parts.py, same machine, load 0.0-0.3, 1 thread CPU time): attention's family
// (4 calls) 5.68 -> 3.51 ms of a 48 -> 46 ms step, torch/dyngrad 1.17x -> 1.73x (forward + backward), the step
// 1.06x -> 1.11x. At 2 threads, alternating with torch (bench/attention.py, wall time), the GPT-sized call took as
// long as at one on both paths (0.254 ms forward; the long one scales, 2.80 -> 1.53), but alone it scales:
// _C.attention(q, k, v) causal forward, best of 300 wall, load 1.4: 0.210 ms at 1 thread, 0.107 at 2 (batch 48:
// 0.884, 0.441). So what is lost at 2 threads is outside these loops (likely torch's spinning OpenMP threads
// taking the second core right after each of its calls, which the alternation puts just before ours).
namespace tiles {

template <typename T> struct VecOf;
template <> struct VecOf<float> { typedef float type __attribute__((vector_size(64))); };
template <> struct VecOf<double> { typedef double type __attribute__((vector_size(128))); };
constexpr int kL = 16;  // lanes of a vector, both types
template <typename T> using Vec = typename VecOf<T>::type;

template <typename T>
DG_FAST_INLINE Vec<T> vload(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
DG_FAST_INLINE void vstore(T* p, Vec<T> v) { std::memcpy(p, &v, sizeof v); }
template <typename T>
DG_FAST_INLINE Vec<T> splat(T s) {  // (not Vec{} + s: GCC keeps that 0 + s, a scalar add before each broadcast)
  return Vec<T>{s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s};
}

// rows of a group in the scores tile (R x 4 vectors of accumulators: 16 zmm for float32) and in the row and
// column tiles (by the output's vectors NV: R x NV accumulators)
template <typename T> constexpr int kScoreRows = sizeof(T) == 4 ? 6 : 2;
template <typename T> inline int pv_rows(int nv) {
  if (sizeof(T) == 4) return nv <= 2 ? 8 : 4;
  return nv <= 1 ? 8 : nv <= 2 ? 4 : 2;
}
constexpr int kMaxPvRows = 8;

// S[r * lds + c] = alpha sum_{e < n} a[r * lda + e] bt[e * ldb + c], r < R, c < NC * kL
template <typename T, int R, int NC>
void scores_tile(const T* a, int64_t lda, const T* bt, int64_t ldb, int64_t n, T alpha, T* s, int64_t lds) {
  Vec<T> acc[R][NC];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NC; ++c) acc[r][c] = Vec<T>{};
  for (int64_t e = 0; e < n; ++e) {
    Vec<T> b[NC];
    for (int c = 0; c < NC; ++c) b[c] = vload(bt + e * ldb + c * kL);
    for (int r = 0; r < R; ++r) {
      const Vec<T> x = splat(a[r * lda + e]);
      for (int c = 0; c < NC; ++c) acc[r][c] += x * b[c];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NC; ++c) vstore(s + r * lds + c * kL, acc[r][c] * alpha);
}

template <typename T, int R>
void scores_nc(int nc, const T* a, int64_t lda, const T* bt, int64_t ldb, int64_t n, T alpha, T* s, int64_t lds) {
  switch (nc) {
    case 1: return scores_tile<T, R, 1>(a, lda, bt, ldb, n, alpha, s, lds);
    case 2: return scores_tile<T, R, 2>(a, lda, bt, ldb, n, alpha, s, lds);
    case 3: return scores_tile<T, R, 3>(a, lda, bt, ldb, n, alpha, s, lds);
    default: return scores_tile<T, R, 4>(a, lda, bt, ldb, n, alpha, s, lds);
  }
}

// one group of `rows` (<= kScoreRows) rows against nc (<= 4) column vectors
template <typename T>
void scores_group(int rows, int nc, const T* a, int64_t lda, const T* bt, int64_t ldb, int64_t n, T alpha, T* s,
                  int64_t lds) {
  if constexpr (kScoreRows<T> > 2) {
    switch (rows) {
      case 1: return scores_nc<T, 1>(nc, a, lda, bt, ldb, n, alpha, s, lds);
      case 2: return scores_nc<T, 2>(nc, a, lda, bt, ldb, n, alpha, s, lds);
      case 3: return scores_nc<T, 3>(nc, a, lda, bt, ldb, n, alpha, s, lds);
      case 4: return scores_nc<T, 4>(nc, a, lda, bt, ldb, n, alpha, s, lds);
      case 5: return scores_nc<T, 5>(nc, a, lda, bt, ldb, n, alpha, s, lds);
      default: return scores_nc<T, 6>(nc, a, lda, bt, ldb, n, alpha, s, lds);
    }
  } else {
    if (rows == 1) return scores_nc<T, 1>(nc, a, lda, bt, ldb, n, alpha, s, lds);
    return scores_nc<T, 2>(nc, a, lda, bt, ldb, n, alpha, s, lds);
  }
}

// o[r * ldo + :NV kL] (+)= alpha sum_{j0 <= j < j1} p[r * prs + j * pjs] b[j * ldb + :], r < R
template <typename T, int R, int NV>
void pv_tile(const T* p, int64_t prs, int64_t pjs, const T* b, int64_t ldb, int64_t j0, int64_t j1, T alpha, T* o,
             int64_t ldo, bool accumulate) {
  Vec<T> acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NV; ++c) acc[r][c] = Vec<T>{};
  for (int64_t j = j0; j < j1; ++j) {
    Vec<T> bv[NV];
    for (int c = 0; c < NV; ++c) bv[c] = vload(b + j * ldb + c * kL);
    for (int r = 0; r < R; ++r) {
      const Vec<T> x = splat(p[r * prs + j * pjs]);
      for (int c = 0; c < NV; ++c) acc[r][c] += x * bv[c];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NV; ++c) {
      T* dst = o + r * ldo + c * kL;
      vstore(dst, accumulate ? vload(dst) + acc[r][c] * alpha : acc[r][c] * alpha);
    }
}

template <typename T, int R>
void pv_nv(int nv, const T* p, int64_t prs, int64_t pjs, const T* b, int64_t ldb, int64_t j0, int64_t j1, T alpha,
           T* o, int64_t ldo, bool accumulate) {
  switch (nv) {
    case 1: return pv_tile<T, R, 1>(p, prs, pjs, b, ldb, j0, j1, alpha, o, ldo, accumulate);
    case 2: return pv_tile<T, R, 2>(p, prs, pjs, b, ldb, j0, j1, alpha, o, ldo, accumulate);
    case 3: return pv_tile<T, R, 3>(p, prs, pjs, b, ldb, j0, j1, alpha, o, ldo, accumulate);
    default: return pv_tile<T, R, 4>(p, prs, pjs, b, ldb, j0, j1, alpha, o, ldo, accumulate);
  }
}

template <typename T>
void pv_group(int rows, int nv, const T* p, int64_t prs, int64_t pjs, const T* b, int64_t ldb, int64_t j0, int64_t j1,
              T alpha, T* o, int64_t ldo, bool accumulate) {
  switch (rows) {
    case 1: return pv_nv<T, 1>(nv, p, prs, pjs, b, ldb, j0, j1, alpha, o, ldo, accumulate);
    case 2: return pv_nv<T, 2>(nv, p, prs, pjs, b, ldb, j0, j1, alpha, o, ldo, accumulate);
    case 3: return pv_nv<T, 3>(nv, p, prs, pjs, b, ldb, j0, j1, alpha, o, ldo, accumulate);
    case 4: return pv_nv<T, 4>(nv, p, prs, pjs, b, ldb, j0, j1, alpha, o, ldo, accumulate);
    case 5: return pv_nv<T, 5>(nv, p, prs, pjs, b, ldb, j0, j1, alpha, o, ldo, accumulate);
    case 6: return pv_nv<T, 6>(nv, p, prs, pjs, b, ldb, j0, j1, alpha, o, ldo, accumulate);
    case 7: return pv_nv<T, 7>(nv, p, prs, pjs, b, ldb, j0, j1, alpha, o, ldo, accumulate);
    default: return pv_nv<T, 8>(nv, p, prs, pjs, b, ldb, j0, j1, alpha, o, ldo, accumulate);
  }
}

// x (16 vectors: the rows of a 16 x 16 block) transposed in place: four rounds that swap the off-diagonal blocks
// of 8, 4, 2 and 1 lanes, two-vector shuffles each (a 16 x 16 float block in 64 permutes, not 256 scalar moves)
template <typename T, int B>
DG_FAST_INLINE void swap_blocks(Vec<T>* x) {
  for (int r = 0; r < kL; ++r) {
    if (r & B) continue;
    const Vec<T> a = x[r], b = x[r + B];
    if constexpr (B == 8) {
      x[r] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
      x[r + B] = __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    } else if constexpr (B == 4) {
      x[r] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
      x[r + B] = __builtin_shufflevector(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    } else if constexpr (B == 2) {
      x[r] = __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
      x[r + B] = __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    } else {
      x[r] = __builtin_shufflevector(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
      x[r + B] = __builtin_shufflevector(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
    }
  }
}

// bt[e * ldb + j] = x[j * ldx + e] for j < n, e < E (a multiple of 16); zeros in columns n .. ldb (a multiple of
// 16: the scores tile reads whole vectors)
template <typename T>
void transpose_rows(const T* x, int64_t ldx, int64_t n, int64_t E, T* bt, int64_t ldb) {
  for (int64_t j0 = 0; j0 < ldb; j0 += kL) {
    const int64_t jn = std::max<int64_t>(0, std::min<int64_t>(kL, n - j0));
    for (int64_t e0 = 0; e0 < E; e0 += kL) {
      Vec<T> blk[kL];
      for (int r = 0; r < kL; ++r) blk[r] = r < jn ? vload(x + (j0 + r) * ldx + e0) : Vec<T>{};
      swap_blocks<T, 8>(blk);
      swap_blocks<T, 4>(blk);
      swap_blocks<T, 2>(blk);
      swap_blocks<T, 1>(blk);
      for (int r = 0; r < kL; ++r) vstore(bt + (e0 + r) * ldb + j0, blk[r]);
    }
  }
}

// ---- rows of the softmax on whole vectors: lanes past the row's n keys are masked, so rows of any length (the
// causal ones are 1 .. 64 keys long) take no scalar tail
template <typename T>
DG_FAST_INLINE Vec<T> vmax(Vec<T> a, Vec<T> b) { return a > b ? a : b; }
template <typename T>
DG_FAST_INLINE Vec<T> lane_ids() {
  Vec<T> v;
  for (int l = 0; l < kL; ++l) v[l] = T(l);
  return v;
}
template <typename T>
DG_FAST_INLINE T hmax(Vec<T> v) {
  v = vmax<T>(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  v = vmax<T>(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  v = vmax<T>(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  v = vmax<T>(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
  return v[0];
}
template <typename T>
DG_FAST_INLINE T hsum(Vec<T> v) {
  v += __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
  v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  v += __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
  return v[0];
}

// exp on a vector: fast_expf's polynomial for float32 (the same steps, lane by lane), std::exp for float64
DG_FAST_INLINE Vec<float> vexp(Vec<float> x) {
  typedef int32_t VI __attribute__((vector_size(64)));
  const Vec<float> hi = splat(88.3762626647949f), lo = splat(-87.3365447504019f);
  Vec<float> xc = x > hi ? hi : x;
  xc = xc < lo ? lo : xc;
  const Vec<float> n = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;  // round to nearest
  const Vec<float> r = xc - n * 0.693359375f - n * -2.12194440e-4f;
  Vec<float> p = splat(1.9875691500E-4f);
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r * r + r + 1.0f;
  const VI bits = (__builtin_convertvector(n, VI) + 127) << 23;
  Vec<float> y = p * (Vec<float>)bits;
  y = x > hi ? splat(std::numeric_limits<float>::infinity()) : y;
  y = x < lo ? Vec<float>{} : y;
  return x != x ? x : y;
}
DG_FAST_INLINE Vec<double> vexp(Vec<double> x) {
  for (int l = 0; l < kL; ++l) x[l] = std::exp(x[l]);
  return x;
}

// the largest of row[0 .. n) (n >= 1)
template <typename T>
DG_FAST_INLINE T row_max_v(const T* row, int64_t n) {
  const Vec<T> ids = lane_ids<T>(), ninf = splat(-std::numeric_limits<T>::infinity());
  Vec<T> m = ninf;
  for (int64_t c = 0; c < n; c += kL) m = vmax<T>(m, ids < T(n - c) ? vload(row + c) : ninf);
  return hmax<T>(m);
}
// row[c] = exp(row[c] - shift) for c < n and 0 for n <= c < the next multiple of 16; returns the sum
template <typename T>
DG_FAST_INLINE T row_exp_v(T* row, int64_t n, T shift) {
  const Vec<T> ids = lane_ids<T>();
  Vec<T> sum{};
  for (int64_t c = 0; c < n; c += kL) {
    const Vec<T> e = vexp(vload(row + c) - shift);
    const Vec<T> x = ids < T(n - c) ? e : Vec<T>{};
    vstore(row + c, x);
    sum += x;
  }
  return hsum<T>(sum);
}
// ds[c] = p[c] (ds[c] - d) for c < n, 0 for n <= c < the next multiple of 16
template <typename T>
DG_FAST_INLINE void row_ds_v(T* ds, const T* p, int64_t n, T d) {
  const Vec<T> ids = lane_ids<T>();
  for (int64_t c = 0; c < n; c += kL) {
    const Vec<T> x = vload(p + c) * (vload(ds + c) - d);
    vstore(ds + c, ids < T(n - c) ? x : Vec<T>{});
  }
}
// row[c] = 0 for from <= c < to, from a multiple of 16
template <typename T>
DG_FAST_INLINE void zero_from(T* row, int64_t from, int64_t to) {
  for (int64_t c = from; c < to; c += kL) vstore(row + c, Vec<T>{});
}
inline int64_t round_lanes(int64_t n) { return (n + kL - 1) / kL * kL; }

// x[c] * keep_scale where weight base + c is kept (Note [Dropout inside attention]), else 0, for the 16 weights
// base .. base + 15: attention_keep's splitmix64 finaliser on two vectors of 8 lanes of 64 bits (the same bits;
// vpmullq with AVX-512DQ), the top 24 bits compared with the threshold (<= 2^24) as signed integers of the lanes'
// width. Written on one 16-lane vector of 64 bits, GCC's lowering made it 10x slower (5.7 ns a weight against 0.55
// in a standalone loop on the Xeon family 6 model 167; the scalar loop 0.7).
typedef uint64_t VU64x8 __attribute__((vector_size(64)));
DG_FAST_INLINE VU64x8 keep_top24(uint64_t seed, uint64_t first) {
  const VU64x8 lanes = {1, 2, 3, 4, 5, 6, 7, 8};
  VU64x8 z = seed + (first + lanes) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return z >> 40;
}
template <typename T>
DG_FAST_INLINE Vec<T> dropped(Vec<T> x, uint64_t seed, uint64_t base, uint64_t threshold, T keep_scale) {
  const VU64x8 lo = keep_top24(seed, base), hi = keep_top24(seed, base + 8);
  if constexpr (sizeof(T) == 4) {
    typedef int32_t VI8 __attribute__((vector_size(32)));
    typedef int32_t VI __attribute__((vector_size(64)));
    const VI t = __builtin_shufflevector(__builtin_convertvector(lo, VI8), __builtin_convertvector(hi, VI8), 0, 1, 2,
                                         3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return t >= (int32_t)threshold ? x * keep_scale : Vec<T>{};
  } else {
    typedef int64_t VI8 __attribute__((vector_size(64)));
    typedef int64_t VI __attribute__((vector_size(128)));
    const VI t = __builtin_shufflevector((VI8)lo, (VI8)hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return t >= (int64_t)threshold ? x * keep_scale : Vec<T>{};
  }
}
// row[c] = dropped(src[c]) for c < n (whole vectors: the lanes past n are 0 in src and stay 0)
template <typename T>
DG_FAST_INLINE void row_dropped_v(T* row, const T* src, int64_t n, uint64_t seed, uint64_t base, uint64_t threshold,
                                  T keep_scale) {
  for (int64_t c = 0; c < n; c += kL) vstore(row + c, dropped(vload(src + c), seed, base + c, threshold, keep_scale));
}

}  // namespace tiles

// ---- the small-head path (Note [Attention tiles for small head dims]) ----------------------------------------------
constexpr int64_t kSmallRows = 32;  // query rows per tile
constexpr int64_t kSmallKeys = 64;  // keys per block of the online softmax (a multiple of 16 and of every group)

// DYNGRAD_ATTENTION=generic sends every call to the gemm_into path (for A/B runs and tests), read at each call
bool use_tiles() {
  const char* env = std::getenv("DYNGRAD_ATTENTION");
  return !(env && std::strcmp(env, "generic") == 0);
}

bool small_heads(const AttnShape& a) {
  auto ok = [](int64_t e) { return e >= 16 && e <= 64 && e % 16 == 0; };
  return ok(a.E) && ok(a.Ev) && a.Lq > 0 && a.Lk > 0;
}

// keys of the block j0 .. j0 + cols that rows i .. i + n - 1 need (causal: up to the last row's diagonal)
inline int64_t group_keys(const AttnShape& a, int64_t i, int64_t n, int64_t j0, int64_t cols) {
  return a.causal ? std::min<int64_t>(cols, i + n - j0) : cols;
}
// keys of the block that row i takes part with (the rest of its row is masked by causality)
inline int64_t row_keys(const AttnShape& a, int64_t i, int64_t j0, int64_t cols) {
  return a.causal ? std::max<int64_t>(0, std::min<int64_t>(cols, i + 1 - j0)) : cols;
}

// S (rows x kSmallKeys, row stride kSmallKeys) = scale a bt for rows i0.. of a, keys j0.. (bt: the keys transposed,
// row stride ldb), each group of rows only as far as its keys go
template <typename T>
void small_scores(const AttnShape& a, const T* x, int64_t ldx, int64_t depth, const T* bt, int64_t ldb, T alpha,
                  int64_t i0, int64_t rows, int64_t j0, int64_t cols, T* S) {
  constexpr int R = tiles::kScoreRows<T>;
  for (int64_t r0 = 0; r0 < rows; r0 += R) {
    const int n = (int)std::min<int64_t>(R, rows - r0);
    const int64_t g = group_keys(a, i0 + r0, n, j0, cols);
    if (g <= 0) continue;
    tiles::scores_group<T>(n, (int)((g + tiles::kL - 1) / tiles::kL), x + (i0 + r0) * ldx, ldx, bt + j0, ldb, depth,
                           alpha, S + r0 * kSmallKeys, kSmallKeys);
  }
}

// out rows i0 + r (+)= alpha sum_j P[r, j] b[j0 + j] over each group's keys (P v, dS k)
template <typename T>
void small_rows(const AttnShape& a, const T* P, const T* b, int64_t ldb, int nvec, T alpha, int64_t i0, int64_t rows,
                int64_t j0, int64_t cols, T* out, int64_t ldo, bool accumulate) {
  const int R = tiles::pv_rows<T>(nvec);
  for (int64_t r0 = 0; r0 < rows; r0 += R) {
    const int n = (int)std::min<int64_t>(R, rows - r0);
    const int64_t g = group_keys(a, i0 + r0, n, j0, cols);
    if (g <= 0) continue;
    tiles::pv_group<T>(n, nvec, P + r0 * kSmallKeys, kSmallKeys, 1, b + j0 * ldb, ldb, 0, g, alpha,
                       out + r0 * ldo, ldo, accumulate);
  }
}

// out rows j0 + c (+)= alpha sum_i P[i, c] b[i0 + i] over the rows that see key j0 + c (P^T dO, dS^T q); written[j]
// says whether out's row j holds a sum already (the first contribution stores)
template <typename T>
void small_cols(const AttnShape& a, const T* P, const T* b, int64_t ldb, int nvec, T alpha, int64_t i0, int64_t rows,
                int64_t j0, int64_t cols, T* out, int64_t ldo, char* written) {
  const int R = tiles::pv_rows<T>(nvec);
  for (int64_t c0 = 0; c0 < cols; c0 += R) {
    const int n = (int)std::min<int64_t>(R, cols - c0);
    const int64_t j = j0 + c0;
    const int64_t ib = a.causal ? std::max<int64_t>(0, j - i0) : 0;  // rows before see none of these keys
    if (ib >= rows) continue;
    tiles::pv_group<T>(n, nvec, P + c0, 1, kSmallKeys, b + i0 * ldb, ldb, ib, rows, alpha, out + j * ldo, ldo,
                       written[j] != 0);
    std::fill(written + j, written + j + n, char(1));
  }
}

template <typename T>
void add_mask_row(const AttnShape& a, const T* M, int64_t i, int64_t j0, int64_t n, T* row) {
  const T* mrow = M + i * a.msi + j0 * a.msj;
  if (a.msj == 1)
    for (int64_t c = 0; c < n; ++c) row[c] += mrow[c];
  else
    for (int64_t c = 0; c < n; ++c) row[c] += mrow[c * a.msj];
}

template <typename T>
struct SmallScratch {  // one thread's buffers, kept between calls
  std::vector<T> buf;
  std::vector<char> flags;
  T* take(size_t n) {
    if (buf.size() < n) buf.resize(n);
    return buf.data();
  }
  // a long sequence's k^T and v^T (E x Lk each) are not kept past the call that needed them
  void release_if_large() {
    if (buf.size() > (size_t(1) << 18)) std::vector<T>().swap(buf);
    if (flags.size() > (size_t(1) << 18)) std::vector<char>().swap(flags);
  }
};
template <typename T>
SmallScratch<T>& small_scratch() {
  thread_local SmallScratch<T> s;
  return s;
}

template <typename T>
void attention_forward_small(const AttnShape& a, const T* Q, const T* K, const T* V, const T* M, T* O, T* LSE) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const T keep_scale = a.p < 1 ? T(1.0 / (1.0 - a.p)) : T(0);
  const int64_t Lkp = (a.Lk + tiles::kL - 1) / tiles::kL * tiles::kL;
  const int nv = (int)(a.Ev / tiles::kL);
  over_batch_heads(a, [&](int64_t bh) {
    SmallScratch<T>& scratch = small_scratch<T>();
    T* kt = scratch.take((size_t)(a.E * Lkp + kSmallRows * kSmallKeys + kSmallRows * a.Ev + 2 * kSmallRows));
    T* S = kt + a.E * Lkp;
    T* ob = S + kSmallRows * kSmallKeys;  // the tile's output rows, contiguous, before the division by l
    T* m = ob + kSmallRows * a.Ev;
    T* l = m + kSmallRows;
    const T* q = Q + a.qo[bh];
    const T* k = K + a.ko[bh];
    const T* v = V + a.vo[bh];
    const T* mk = M ? M + a.mo[bh] : nullptr;
    T* o = O + a.oo[bh];
    T* lse = LSE + bh * a.Lq;
    tiles::transpose_rows(k, a.ldk, a.Lk, a.E, kt, Lkp);
    for (int64_t i0 = 0; i0 < a.Lq; i0 += kSmallRows) {
      const int64_t rows = std::min(kSmallRows, a.Lq - i0);
      std::fill(m, m + rows, ninf);
      std::fill(l, l + rows, T(0));
      const int64_t jend = a.causal ? std::min(a.Lk, i0 + rows) : a.Lk;
      for (int64_t j0 = 0; j0 < jend; j0 += kSmallKeys) {
        const int64_t cols = std::min(kSmallKeys, jend - j0);
        small_scores(a, q, a.ldq, a.E, kt, Lkp, T(a.scale), i0, rows, j0, cols, S);
        for (int64_t r = 0; r < rows; ++r) {  // the online softmax: running max m and sum l per row
          T* row = S + r * kSmallKeys;
          const int64_t i = i0 + r, n = row_keys(a, i, j0, cols);
          if (n > 0 && mk) add_mask_row(a, mk, i, j0, n, row);
          const T m_new = n > 0 ? std::max(m[r], tiles::row_max_v(row, n)) : ninf;
          if (m_new == ninf) {  // no key of the block (or every key so far masked out)
            tiles::zero_from(row, 0, cols);
            continue;
          }
          const T corr = m[r] == ninf ? T(0) : std::exp(m[r] - m_new);  // (no libm call in a row's first block)
          const T sum = tiles::row_exp_v(row, n, m_new);
          l[r] = l[r] * corr + sum;
          m[r] = m_new;
          if (j0 > 0 && corr != T(1))
            for (int64_t e = 0; e < a.Ev; ++e) ob[r * a.Ev + e] *= corr;
          if (a.threshold)
            tiles::row_dropped_v(row, row, n, a.seed, ((uint64_t)bh * a.Lq + i) * a.Lk + j0, a.threshold, keep_scale);
          tiles::zero_from(row, tiles::round_lanes(n), cols);
        }
        small_rows(a, S, v, a.ldv, nv, T(1), i0, rows, j0, cols, ob, a.Ev, j0 > 0);
      }
      for (int64_t r = 0; r < rows; ++r) {
        T* orow = o + (i0 + r) * a.ldo;
        if (l[r] == T(0)) {  // a fully masked row: zeros, as torch's math path
          std::fill(orow, orow + a.Ev, T(0));
          lse[i0 + r] = ninf;
          continue;
        }
        const T inv = T(1) / l[r];
        for (int64_t e = 0; e < a.Ev; ++e) orow[e] = ob[r * a.Ev + e] * inv;
        lse[i0 + r] = m[r] + std::log(l[r]);
      }
    }
    scratch.release_if_large();
  });
}

template <typename T>
void attention_backward_small(const AttnShape& a, const T* G, const T* Q, const T* K, const T* V, const T* M,
                              const T* O, const T* LSE, T* DQ, T* DK, T* DV) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const T keep_scale = a.p < 1 ? T(1.0 / (1.0 - a.p)) : T(0);
  const T scale = T(a.scale);
  const int64_t Lkp = (a.Lk + tiles::kL - 1) / tiles::kL * tiles::kL;
  const int ne = (int)(a.E / tiles::kL), nv = (int)(a.Ev / tiles::kL);
  const int64_t tile = kSmallRows * kSmallKeys;
  over_batch_heads(a, [&](int64_t bh) {
    SmallScratch<T>& scratch = small_scratch<T>();
    T* kt = scratch.take((size_t)((a.E + a.Ev) * Lkp + 3 * tile + a.Lq));
    T* vt = kt + a.E * Lkp;
    T* P = vt + a.Ev * Lkp;
    T* Pd = P + tile;  // P * keep / (1 - p) with dropout
    T* dP = Pd + tile;
    T* D = dP + tile;
    if (scratch.flags.size() < (size_t)(2 * a.Lk)) scratch.flags.resize((size_t)(2 * a.Lk));
    char* dk_written = scratch.flags.data();
    char* dv_written = dk_written + a.Lk;
    std::fill(dk_written, dk_written + 2 * a.Lk, char(0));
    const T* q = Q + a.qo[bh];
    const T* k = K + a.ko[bh];
    const T* v = V + a.vo[bh];
    const T* mk = M ? M + a.mo[bh] : nullptr;
    const T* g = G + a.go[bh];
    const T* o = O + a.oo[bh];
    const T* lse = LSE + bh * a.Lq;
    T* dq = DQ ? DQ + a.dqo[bh] : nullptr;
    T* dk = DK ? DK + a.dko[bh] : nullptr;
    T* dv = DV ? DV + a.dvo[bh] : nullptr;
    tiles::transpose_rows(k, a.ldk, a.Lk, a.E, kt, Lkp);
    if (dq || dk) tiles::transpose_rows(v, a.ldv, a.Lk, a.Ev, vt, Lkp);
    for (int64_t i = 0; i < a.Lq; ++i) {  // D_i = dO_i . O_i = sum_j P_ij dP_ij (in 16 lanes, then across them)
      tiles::Vec<T> s{};
      for (int64_t e = 0; e < a.Ev; e += tiles::kL) s += tiles::vload(g + i * a.ldg + e) * tiles::vload(o + i * a.ldo + e);
      D[i] = tiles::hsum<T>(s);
    }
    for (int64_t i0 = 0; i0 < a.Lq; i0 += kSmallRows) {
      const int64_t rows = std::min(kSmallRows, a.Lq - i0);
      const int64_t jend = a.causal ? std::min(a.Lk, i0 + rows) : a.Lk;
      for (int64_t j0 = 0; j0 < jend; j0 += kSmallKeys) {
        const int64_t cols = std::min(kSmallKeys, jend - j0);
        small_scores(a, q, a.ldq, a.E, kt, Lkp, scale, i0, rows, j0, cols, P);
        for (int64_t r = 0; r < rows; ++r) {  // P = exp(s - lse), 0 where masked (and for fully masked rows)
          T* row = P + r * kSmallKeys;
          const int64_t i = i0 + r;
          const T L = lse[i];
          const int64_t n = L == ninf ? 0 : row_keys(a, i, j0, cols);
          if (n > 0 && mk) add_mask_row(a, mk, i, j0, n, row);
          tiles::row_exp_v(row, n, L);  // exp(-inf - L) = 0 where masked
          tiles::zero_from(row, tiles::round_lanes(n), cols);
          if (a.threshold) {
            T* drow = Pd + r * kSmallKeys;
            tiles::row_dropped_v(drow, row, n, a.seed, ((uint64_t)bh * a.Lq + i) * a.Lk + j0, a.threshold, keep_scale);
            tiles::zero_from(drow, tiles::round_lanes(n), cols);
          }
        }
        const T* pd = a.threshold ? Pd : P;
        if (dv)  // dV += Pd^T dO
          small_cols(a, pd, g, a.ldg, nv, T(1), i0, rows, j0, cols, dv, a.lddv, dv_written);
        if (!dq && !dk) continue;
        // dPd = dO V^T; dP = dPd * keep / (1 - p); dS = P (dP - D)
        small_scores(a, g, a.ldg, a.Ev, vt, Lkp, T(1), i0, rows, j0, cols, dP);
        for (int64_t r = 0; r < rows; ++r) {
          T* drow = dP + r * kSmallKeys;
          const T* prow = P + r * kSmallKeys;
          const int64_t i = i0 + r, n = lse[i] == ninf ? 0 : row_keys(a, i, j0, cols);
          const T Di = D[i];
          if (a.threshold) {
            const T* pdrow = Pd + r * kSmallKeys;
            for (int64_t c = 0; c < n; ++c) drow[c] = pdrow[c] * drow[c] - prow[c] * Di;
            std::fill(drow + n, drow + cols, T(0));
          } else {
            tiles::row_ds_v(drow, prow, n, Di);
            tiles::zero_from(drow, tiles::round_lanes(n), cols);
          }
        }
        if (dq)  // dQ += scale dS K
          small_rows(a, dP, k, a.ldk, ne, scale, i0, rows, j0, cols, dq + i0 * a.lddq, a.lddq, j0 > 0);
        if (dk)  // dK += scale dS^T Q
          small_cols(a, dP, q, a.ldq, ne, scale, i0, rows, j0, cols, dk, a.lddk, dk_written);
      }
    }
    // key rows no query saw (causal with more keys than queries): zeros
    for (int64_t j = 0; j < a.Lk; ++j) {
      if (dk && !dk_written[j]) std::fill(dk + j * a.lddk, dk + j * a.lddk + a.E, T(0));
      if (dv && !dv_written[j]) std::fill(dv + j * a.lddv, dv + j * a.lddv + a.Ev, T(0));
    }
    scratch.release_if_large();
  });
}

template <typename T>
void attention_forward_typed(const AttnShape& a, const T* Q, const T* K, const T* V, const T* M, T* O, T* LSE) {
  if (small_heads(a) && use_tiles()) return attention_forward_small(a, Q, K, V, M, O, LSE);
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
  if (small_heads(a) && use_tiles()) return attention_backward_small(a, G, Q, K, V, M, O, LSE, DQ, DK, DV);
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
