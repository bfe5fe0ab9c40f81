// gemm_avx512.cpp: dyngrad's own float32 matrix-product kernel for the small and skinny products training makes
// (Note [Own small-product kernel]). Compiled for AVX-512F through function attributes whatever the build's -march,
// and used only when the CPU says it has AVX-512F (and the OS saves its registers); elsewhere (and with
// DYNGRAD_GEMM=blas, or _C._set_gemm_kernel("blas")) matmul.cpp calls the BLAS as before.
//
// Note [Own small-product kernel]: OpenBLAS spends a fixed cost per call (argument checks, buffer set-up, packing
// both operands) that dominates products of a few million multiply-adds, the size of an LSTM step's gate product
// (32 x 128 @ 128 x 512) and of attention's per-head products (64 x 32 @ 32 x 64, batched): there dyngrad ran at
// 0.59-0.67x of PyTorch's MKL, and linear's A B^T (the weight given transposed) at 0.54x (bench/gemm_shapes.py,
// Xeon family 6 model 167, 2 cores, KVM, load 2.7, 1 thread). This kernel is the classic register-blocked one:
// c's rows in blocks of kMR = 8, its columns in strips of 48 (three 16-float vectors), 24 accumulators in zmm
// registers, per step of k eight broadcasts of a (read in place, any strides: packing it cost more than it saved
// on small products) and three loads of b. b is read in place when its rows are contiguous and c has a single row
// block, and otherwise packed once per strip and k block (copied, or transposed 16 x 16 at a time in registers
// when given transposed) and reused by every row block; read in place with a 4 KB row stride, a strip's rows all
// fell in one L1 set (32 x 1024 @ 1024 x 1024 1.5x slower). k is blocked by kKC so that a strip stays in L1
// across c's row blocks; a later k block's accumulators start from the stored partial sums, so every output is
// the same chain of fused multiply-adds p = 0, 1, ..., k-1 however the columns are split: the bits do not depend
// on the thread count (Note [Deterministic matmul]). alpha, beta = 1 and a bias are applied in the last store,
// after the sum, as the unfused ops would. Strips of 32 (16 accumulators) were 5-20% slower than 48 (the
// broadcasts and the per-block overhead are spread over fewer multiply-adds); 12 rows per block spilled
// registers (twelve row addresses of a); k blocks of 512 instead of 192 made no difference beyond noise.
// Measured (bench/gemm_shapes.py, same machine, load 4.5, medians of 7, 1 thread; torch/dyngrad and
// numpy/dyngrad, > 1 = dyngrad faster; before -> after): 32 x 128 @ (512 x 128)^T 0.54 -> 0.99 (numpy 1.71);
// its dX 32 x 512 @ 512 x 128 0.63 -> 0.83; its dW (A^T B) 0.82 -> 0.86; 32 x 128 @ 128 x 512 0.67 -> 0.90;
// linear with bias 0.54 -> 1.00; batched q @ k^T 48 x (64 x 32 @ (64 x 32)^T) 0.67 -> 1.01. The batched
// 48 x (64 x 32 @ 32 x 64) stays on OpenBLAS's small-matrix kernel (1.21; matmul.cpp's own_gemm_pays). The bias
// epilogue serves linear's fast path since Note [Bias in the product's last store] in matmul.cpp. Whole training
// steps: within noise of the BLAS path (bench/gemm_kernel_ab.py: the LSTM's per-step products were then rnn.cpp's
// own loop -- now own_sgemm_packed, Note [Recurrent products on the own kernel] in rnn.cpp; since Note [Own kernel
// for many rows] in matmul.cpp the GPT's and the transformer block's 768-1024-row forward and input-gradient
// products run here too, their weight gradients on OpenBLAS). Where the CPU lacks AVX-512F (AMD before Zen 4,
// most laptops), or with DYNGRAD_GEMM=blas, every product takes the BLAS path as before (tests/test_gemm_kernel.py
// runs both).
//
// Note [Where the wide MLP's time goes]: issue 26 asks the wide MLP's step (784-1024-1024-10, batch 512, 1
// thread) at 1.25x PyTorch's. All figures here: Xeon family 6 model 167, 2 cores, KVM, one thread, thread CPU
// time (the machine was shared, load 7-10: waits for a core are not counted), 2026-12-03.
// - The machine's peak: 213 GFLOP/s per core (twelve independent zmm FMA chains: 3.3 GHz x 2 ports x 32 flops).
// - bench/gemm_wide_mlp.py, five runs: the eight products of the step are 87-91% of dyngrad's step (38-42 of
//   45-47 ms); MKL (torch) runs them at 132-147 GFLOP/s (62-69% of peak), numpy's OpenBLAS at 119-138, dyngrad
//   (the same OpenBLAS, split into two panels per product for thread-count-free bits) at 117-128, since Note
//   [Panels across the wider side] in matmul.cpp within 1-4% of numpy. The rest of the step (ReLU, cross entropy,
//   bias sums, SGD) is 4.3-6.5 ms in dyngrad against PyTorch's 7.5-8.7. Step torch/dyngrad: 0.91-0.92 before that
//   Note, 0.95-0.99 after (three runs).
// - So 1.25x PyTorch needs dyngrad's products at 152-186 GFLOP/s (the bench prints it each run): 71-87% of the
//   peak, 1.15-1.26x MKL's own rate on the same products. A float32 GEMM of MKL's class on this CPU does not get
//   there; the target is beyond what the products can give (the rest of the step is already faster than
//   PyTorch's).
// - What this kernel reaches (a standalone C++ harness calling own_sgemm, numpy's OpenBLAS and torch's MKL
//   (its sgemm_), best of 5-9 interleaved): its 8 x 48 block, everything in L1 (k 192), 187-190 GFLOP/s (89% of
//   peak; 32 columns 177-179); but the whole 1024^3 product 88-109 (OpenBLAS 113-138, MKL 131-158). Tried and
//   measured, not kept: a packed once per k block and shared by every strip (k blocks outermost) 120-133 (0.89-
//   0.97 of OpenBLAS); all of a packed first, a strip's partial sums kept in a contiguous buffer between its k
//   blocks and c written once, 107-117 (0.85-0.96); k blocks of 96-384 and row chunks of 128-1024 within noise;
//   prefetching the next block's c, and loading c after the k loop instead of before, no gain. A streaming test of
//   the block alone puts the loss in c's 4 KB row stride: 138-140 GFLOP/s updating a 1024 x 1024 c's strip per k
//   block against 165-168 into a contiguous buffer (a from L2); with all of a packed (from L3), 148-172 into the
//   buffer, 130-155 when c is written once at the end (with or without its tile prefetched). The weight gradients'
//   shapes (a given transposed, k = 512-1024) with a packed: 0.85-0.89 of OpenBLAS at 1024 rows, 0.95-1.06 at
//   384-512 rows and 128 columns (noise), so they stay on OpenBLAS (matmul.cpp's own_gemm_pays).
// - The last strip: a 32-column strip runs at 91% of a 48-column one's rate (768 x 384 @ 384 x 32: 139-140 against
//   153), a 16-column one (1024 = 21 x 48 + 16) at 70-75%, 1/64 of such a product's work.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "thread_pool.h"

namespace dyngrad {

namespace {
constexpr int kMR = 8;        // rows of c per block
constexpr int kNR = 48;       // columns of c per strip (three 16-float vectors)
constexpr int64_t kKC = 192;  // k per block: a strip of b (kKC x 48 floats, 36 KB) stays in L1

#define DG_AVX512 __attribute__((target("avx512f")))

// The CPU and the OS support AVX-512F (gcc's check reads XCR0: the OS saves the zmm state).
bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

int initial_kernel() {
  const char* env = std::getenv("DYNGRAD_GEMM");
  if (env && std::strcmp(env, "blas") == 0) return 0;
  return cpu_has_avx512() ? 1 : 0;
}
int g_kernel = initial_kernel();  // 1: this file's kernel, 0: the BLAS

// Rows r < R of a block of c (kMR packed rows of a: ap[p * kMR + r]) times columns [0, 16 * NV) of b (row p at
// b + p * ldb; the last vector masked by `tail`): c = (load ? c : 0) + sum_p a[r, p] b[p, :] (+ bias after the sum).
// The accumulators are named variables, not an array: gcc kept an array of them on the stack, storing all 16
// after every step of k (half the speed).
// What the store of the last k block does: c = alpha * sum (+ the c found there) (+ bias[j]).
struct Epilogue {
  float alpha = 1.f;
  bool add_c = false;
  const float* bias = nullptr;  // at the strip's first column
};

DG_AVX512 inline __m512 finish(__m512 x, const float* c, __mmask16 mk, __m512 bias, __m512 alpha, bool scale,
                               bool add_c, bool add_bias) {
  if (scale) x = _mm512_mul_ps(x, alpha);
  if (add_c) x = _mm512_add_ps(_mm512_maskz_loadu_ps(mk, c), x);
  if (add_bias) x = _mm512_add_ps(x, bias);
  return x;
}

#define DG_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
// PACK: b is read in place (its rows contiguous) and each vector read is also stored at bp + p * kNR + 16 v:
// the first row block packs the strip for the others.
// Note [Packing b in the first row block]: copying a strip of b (kKC rows 2-4 KB apart, three cache lines each)
// before the row blocks ran was a separate pass whose loads wait on L2 one after another; the first row block
// reading the strip in place and storing each vector it loads hides those loads behind its multiply-adds (three
// more stores per 24 of them). The bits are those of the packed copy (the same floats, the same chain).
// 32 x 128 @ 128 x 512, one thread, standalone harness against numpy's OpenBLAS and torch's MKL called from C
// (Xeon family 6 model 167, 2 cores, KVM, load 7.5, best of 7, two runs): 134 -> 153 GFLOP/s (MKL 145-157);
// 64 x 128 @ 128 x 512 144-153 -> 155-157 (MKL 153); the 768-1024-row products within noise.
template <int R, int NV, bool PACK>
DG_AVX512 void micro(int64_t kc, const float* __restrict ap, int64_t ars, int64_t acs, const float* __restrict b,
                     int64_t ldb, float* __restrict c, int64_t ldc, __mmask16 tail, bool load, const Epilogue* ep,
                     float* __restrict bp) {
  static_assert(R >= 1 && R <= kMR && NV >= 1 && NV <= 3, "micro: block shape");
  // vector v covers columns 16 v .. 16 v + 15; the last one (v = NV - 1) is masked by tail
  const __mmask16 m0 = NV == 1 ? tail : (__mmask16)0xFFFF, m1 = NV == 2 ? tail : (__mmask16)0xFFFF, m2 = tail;
  const __m512 z = _mm512_setzero_ps();
#define DG_DECL(i)                                                                   \
  __m512 x##i##0 = z, x##i##1 = z, x##i##2 = z;                                      \
  if (R > i && load) {                                                               \
    x##i##0 = _mm512_maskz_loadu_ps(m0, c + i * ldc);                                \
    if (NV >= 2) x##i##1 = _mm512_maskz_loadu_ps(m1, c + i * ldc + 16);              \
    if (NV == 3) x##i##2 = _mm512_maskz_loadu_ps(m2, c + i * ldc + 32);              \
  }
  DG_ROWS(DG_DECL)
#undef DG_DECL
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = NV == 1 ? _mm512_maskz_loadu_ps(m0, b) : _mm512_loadu_ps(b);
    const __m512 b1 = NV == 2 ? _mm512_maskz_loadu_ps(m1, b + 16) : NV == 3 ? _mm512_loadu_ps(b + 16) : z;
    const __m512 b2 = NV == 3 ? _mm512_maskz_loadu_ps(m2, b + 32) : z;
    if (PACK) {
      _mm512_storeu_ps(bp, b0);
      if (NV >= 2) _mm512_storeu_ps(bp + 16, b1);
      if (NV == 3) _mm512_storeu_ps(bp + 32, b2);
      bp += kNR;
    }
#define DG_STEP(i)                                                                   \
  if (R > i) {                                                                       \
    const __m512 av = _mm512_set1_ps(ap[i * ars]);                                   \
    x##i##0 = _mm512_fmadd_ps(av, b0, x##i##0);                                      \
    if (NV >= 2) x##i##1 = _mm512_fmadd_ps(av, b1, x##i##1);                         \
    if (NV == 3) x##i##2 = _mm512_fmadd_ps(av, b2, x##i##2);                         \
  }
    DG_ROWS(DG_STEP)
#undef DG_STEP
    ap += acs;
    b += ldb;
  }
  if (ep && (ep->alpha != 1.f || ep->add_c || ep->bias)) {
    const __m512 al = _mm512_set1_ps(ep->alpha);
    const __m512 bias0 = ep->bias ? _mm512_maskz_loadu_ps(m0, ep->bias) : z;
    const __m512 bias1 = ep->bias && NV >= 2 ? _mm512_maskz_loadu_ps(m1, ep->bias + 16) : z;
    const __m512 bias2 = ep->bias && NV == 3 ? _mm512_maskz_loadu_ps(m2, ep->bias + 32) : z;
    const bool scale = ep->alpha != 1.f, add_c = ep->add_c, add_bias = ep->bias != nullptr;
#define DG_FINISH(i)                                                                                        \
  if (R > i) {                                                                                              \
    x##i##0 = finish(x##i##0, c + i * ldc, m0, bias0, al, scale, add_c, add_bias);                          \
    if (NV >= 2) x##i##1 = finish(x##i##1, c + i * ldc + 16, m1, bias1, al, scale, add_c, add_bias);        \
    if (NV == 3) x##i##2 = finish(x##i##2, c + i * ldc + 32, m2, bias2, al, scale, add_c, add_bias);        \
  }
    DG_ROWS(DG_FINISH)
#undef DG_FINISH
  }
#define DG_STORE(i)                                                                   \
  if (R > i) {                                                                        \
    _mm512_mask_storeu_ps(c + i * ldc, m0, x##i##0);                                  \
    if (NV >= 2) _mm512_mask_storeu_ps(c + i * ldc + 16, m1, x##i##1);                \
    if (NV == 3) _mm512_mask_storeu_ps(c + i * ldc + 32, m2, x##i##2);                \
  }
  DG_ROWS(DG_STORE)
#undef DG_STORE
}
#undef DG_ROWS

using micro_t = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, __mmask16,
                         bool, const Epilogue*, float*);
template <int NV, bool PACK = false>
micro_t micro_for(int rows) {
  switch (rows) {
    case 1: return micro<1, NV, PACK>;
    case 2: return micro<2, NV, PACK>;
    case 3: return micro<3, NV, PACK>;
    case 4: return micro<4, NV, PACK>;
    case 5: return micro<5, NV, PACK>;
    case 6: return micro<6, NV, PACK>;
    case 7: return micro<7, NV, PACK>;
    default: return micro<8, NV, PACK>;
  }
}
micro_t micro_pick(int nv, int rows, bool pack) {
  if (pack) return nv == 3 ? micro_for<3, true>(rows) : nv == 2 ? micro_for<2, true>(rows) : micro_for<1, true>(rows);
  return nv == 3 ? micro_for<3>(rows) : nv == 2 ? micro_for<2>(rows) : micro_for<1>(rows);
}


// dst[i * ldd + j] = src[j * lds + i], i, j < 16: three rounds of in-register shuffles.
DG_AVX512 void transpose16(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  for (int i = 0; i < 16; i += 2) {  // per 128-bit lane: [a0 b0 a1 b1], [a2 b2 a3 b3]
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // r[g + e], lane L: element 4L + e of rows g .. g + 3
    const __m512d t0 = _mm512_castps_pd(t[g]), t1 = _mm512_castps_pd(t[g + 1]);
    const __m512d t2 = _mm512_castps_pd(t[g + 2]), t3 = _mm512_castps_pd(t[g + 3]);
    r[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    r[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    r[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    r[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int e = 0; e < 4; ++e) {  // a 4 x 4 transpose of 128-bit lanes: output row 4L + e
    const __m512 u0 = _mm512_shuffle_f32x4(r[e], r[4 + e], 0x44), u1 = _mm512_shuffle_f32x4(r[e], r[4 + e], 0xEE);
    const __m512 u2 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0x44);
    const __m512 u3 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0xEE);
    _mm512_storeu_ps(dst + (0 + e) * ldd, _mm512_shuffle_f32x4(u0, u2, 0x88));
    _mm512_storeu_ps(dst + (4 + e) * ldd, _mm512_shuffle_f32x4(u0, u2, 0xDD));
    _mm512_storeu_ps(dst + (8 + e) * ldd, _mm512_shuffle_f32x4(u1, u3, 0x88));
    _mm512_storeu_ps(dst + (12 + e) * ldd, _mm512_shuffle_f32x4(u1, u3, 0xDD));
  }
}

// Packs rows p0 .. p0 + kc of columns j0 .. j0 + w (w <= 32) of b into dst[p * 32 + jj], zeros beyond w.
DG_AVX512 void pack_b(int64_t kc, int64_t w, const float* b, int64_t brs, int64_t bcs, float* dst) {
  int64_t p = 0;
  if (bcs == 1 || w == 1) {  // rows of b contiguous: two masked copies per row
    __mmask16 mk[kNR / 16];
    for (int v = 0; v < kNR / 16; ++v) {
      const int64_t left = w - 16 * v;
      mk[v] = (__mmask16)(left >= 16 ? 0xFFFF : left <= 0 ? 0 : (1u << left) - 1);
    }
    for (; p < kc; ++p)
      for (int v = 0; v < kNR / 16; ++v)
        _mm512_storeu_ps(dst + p * kNR + 16 * v, _mm512_maskz_loadu_ps(mk[v], b + p * brs + 16 * v));
    return;
  }
  if (brs == 1) {  // b transposed: column j is contiguous in p
    const int64_t full = w / 16;
    for (; p + 16 <= kc; p += 16) {
      for (int64_t h = 0; h < full; ++h) transpose16(b + h * 16 * bcs + p, bcs, dst + p * kNR + h * 16, kNR);
      for (int64_t i = 0; i < 16; ++i)
        for (int64_t jj = full * 16; jj < kNR; ++jj) dst[(p + i) * kNR + jj] = jj < w ? b[jj * bcs + p + i] : 0.f;
    }
  }
  for (; p < kc; ++p)
    for (int64_t jj = 0; jj < kNR; ++jj) dst[p * kNR + jj] = jj < w ? b[p * brs + jj * bcs] : 0.f;
}

// One product's rows: a (m x k, strides ars, acs) and its c (m x n, row stride ldc). run_strips takes one or two
// of them by the same b (Note [A product and its tangent in one call]).
struct RowSet {
  const float* a;
  int64_t ars, acs;
  float* c;
};

// Strips [s0, s1) of c. a is read in place (any strides): a block's kMR rows are kMR streams of broadcasts.
// b is read in place only when its rows are contiguous and c has one row block (no reuse to pay for a copy);
// otherwise each strip's kKC x 32 block is packed once and reused by every row block (of every row set): a b read
// in place with a row stride of 4 KB (32 x 1024 @ 1024 x 1024) put every row of the strip in one L1 set, 1.5x
// slower.
DG_AVX512 void run_strips(int64_t s0, int64_t s1, int64_t m, int64_t n, int64_t k, const RowSet* sets, int nsets,
                          const float* b, int64_t brs, int64_t bcs, int64_t ldc, const Epilogue& ep) {
  const bool direct = (bcs == 1 || n == 1) && m <= kMR && nsets == 1;
  static thread_local std::vector<float> bbuf;
  if (!direct) bbuf.resize((size_t)(kKC * kNR));
  for (int64_t s = s0; s < s1; ++s) {
    const int64_t j0 = s * kNR, w = std::min<int64_t>(kNR, n - j0);
    const int nv = (int)((w + 15) / 16);
    const int64_t rem = w - 16 * (nv - 1);
    const __mmask16 tail = (__mmask16)(rem >= 16 ? 0xFFFF : (1u << rem) - 1);
    for (int64_t p0 = 0; p0 < k; p0 += kKC) {
      const int64_t kc = std::min(kKC, k - p0);
      const float* bs;
      int64_t ldb;
      // Note [Packing b in the first row block]: b's rows contiguous: the first row block reads the strip in
      // place and packs it as it goes
      const bool fuse = !direct && bcs == 1;
      if (direct) {
        bs = b + p0 * brs + j0;
        ldb = brs;
      } else {
        if (!fuse) pack_b(kc, w, b + p0 * brs + j0 * bcs, brs, bcs, bbuf.data());
        bs = bbuf.data();
        ldb = kNR;
      }
      Epilogue strip_ep = ep;
      if (ep.bias) strip_ep.bias = ep.bias + j0;
      const Epilogue* last = p0 + kc >= k ? &strip_ep : nullptr;
      for (int set = 0; set < nsets; ++set) {
        const RowSet& r = sets[set];
        for (int64_t i0 = 0; i0 < m; i0 += kMR) {
          const int rows = (int)std::min<int64_t>(kMR, m - i0);
          const bool packing = fuse && set == 0 && i0 == 0;
          micro_t f = micro_pick(nv, rows, packing);
          f(kc, r.a + i0 * r.ars + p0 * r.acs, r.ars, r.acs, packing ? b + p0 * brs + j0 : bs, packing ? brs : ldb,
            r.c + i0 * ldc + j0, ldc, tail, p0 > 0, last, packing ? bbuf.data() : nullptr);
        }
      }
    }
  }
}

// c split over up to max_tasks of the pool's threads (the same bits whatever the split).
// Note [Own kernel's split]: a product of many rows is split into row panels (multiples of kMR rows, each
// packing b's strips itself), since its strips seldom divide evenly: a 768 x 128 output is 3 strips (48, 48,
// 32), 2 and 1 to two threads. A short product (an LSTM step's 32 rows) is split by strips, as before.
// Either way each output is the same chain of multiply-adds: the bits do not depend on the split.
void run_strips_parallel(int64_t m, int64_t n, int64_t k, const RowSet* sets, int nsets, const float* b, int64_t brs,
                         int64_t bcs, int64_t ldc, const Epilogue& ep, int max_tasks) {
  const int64_t strips = (n + kNR - 1) / kNR;
  const int64_t row_blocks = (m + kMR - 1) / kMR;
  const bool by_rows = m >= 256 && max_tasks > 1;
  const int tasks = (int)std::max<int64_t>(1, std::min<int64_t>(max_tasks, by_rows ? row_blocks : strips));
  auto run = [&](int64_t s0, int64_t s1, int64_t rows, const RowSet* rs) {
    run_strips(s0, s1, rows, n, k, rs, nsets, b, brs, bcs, ldc, ep);
  };
  if (tasks == 1) {
    run(0, strips, m, sets);
    return;
  }
  if (by_rows) {
    const int64_t rows_per = (row_blocks + tasks - 1) / tasks * kMR;
    run_parallel(tasks, [&](int t) {
      const int64_t r0 = t * rows_per, r1 = std::min(m, r0 + rows_per);
      if (r0 >= r1) return;
      std::vector<RowSet> panel(sets, sets + nsets);  // each set's rows r0 .. r1
      for (RowSet& r : panel) {
        r.a += r0 * r.ars;
        r.c += r0 * ldc;
      }
      run(0, strips, r1 - r0, panel.data());
    });
    return;
  }
  const int64_t per = (strips + tasks - 1) / tasks;
  run_parallel(tasks, [&](int t) {
    const int64_t s0 = t * per, s1 = std::min(strips, s0 + per);
    if (s0 < s1) run(s0, s1, m, sets);
  });
}

// Note [Few rows by a transposed b]: c = a b with b given transposed (linear's x @ W^T) and few rows of c (an
// LSTM step's 32 x 128 @ (512 x 128)^T) spent a quarter of its time packing b: all k x n of it is transposed
// 16 x 16 in registers (shuffles, one port), for 4 row blocks. Computed instead as c^T = b^T a^T, the operand
// that is transposed when packed is a (k x m, 4K floats here), and c^T (n x m, in a scratch) is transposed into c
// at the end, with the epilogue: 20K floats through the shuffles instead of 64K. Each output is the same chain of
// fused multiply-adds (fma(b, a, acc) = fma(a, b, acc): the product of two floats does not depend on the order),
// p = 0 .. k-1 in the same k blocks, then alpha, c and the bias in the same order: the bits of the direct route.
// Taken when m (k + n) < k n / 2, the floats transposed either way. bench/gemm.py's targets, 32 x 128 @ (512 x
// 128)^T, one thread, thread CPU time, torch/dyngrad before (main's build) and after, alternating runs (Xeon
// family 6 model 167, 2 cores, KVM, load 5-6): a @ w.mT 0.98-1.04 -> 1.07-1.08, F.linear with bias 1.06-1.10 ->
// 1.17-1.18. What is left: c^T's strips are 32 columns wide (16 accumulators, micro<8, 2>), at about 0.8 of the
// rate of the rows-contiguous product's 48-column strips (x @ W: 161-179 GFLOP/s against 119-139 here).
DG_AVX512 void finish_transposed(int64_t m, int64_t n, const float* ct, int64_t ldt, float* c, int64_t ldc,
                                 const Epilogue& ep) {
  alignas(64) float tile[16 * 16];
  const bool scale = ep.alpha != 1.f, add_c = ep.add_c, add_bias = ep.bias != nullptr;
  const __m512 al = _mm512_set1_ps(ep.alpha);
  for (int64_t j0 = 0; j0 < n; j0 += 16) {  // ct is padded to 16-multiples of both extents (see the caller)
    const int64_t w = std::min<int64_t>(16, n - j0);
    const __mmask16 mk = (__mmask16)(w >= 16 ? 0xFFFF : (1u << w) - 1);
    const __m512 bias = add_bias ? _mm512_maskz_loadu_ps(mk, ep.bias + j0) : _mm512_setzero_ps();
    for (int64_t i0 = 0; i0 < m; i0 += 16) {
      transpose16(ct + j0 * ldt + i0, ldt, tile, 16);  // tile[ii * 16 + jj] = c[i0 + ii, j0 + jj]
      const int64_t h = std::min<int64_t>(16, m - i0);
      for (int64_t ii = 0; ii < h; ++ii) {
        float* ci = c + (i0 + ii) * ldc + j0;
        const __m512 x = finish(_mm512_load_ps(tile + ii * 16), ci, mk, bias, al, scale, add_c, add_bias);
        _mm512_mask_storeu_ps(ci, mk, x);
      }
    }
  }
}

bool few_rows_by_transposed_b(int64_t m, int64_t n, int64_t k, int64_t brs, int64_t bcs) {
  return brs == 1 && bcs != 1 && n > 1 && k > 1 && 2 * m * (k + n) < k * n;
}
}  // namespace

bool own_gemm_enabled() { return g_kernel == 1; }

const char* gemm_kernel_name() { return g_kernel == 1 ? "avx512" : "blas"; }

bool set_gemm_kernel(const std::string& name) {
  if (name == "blas") {
    g_kernel = 0;
    return true;
  }
  if (name == "avx512" || name == "auto") {
    if (!cpu_has_avx512()) {
      if (name == "auto") g_kernel = 0;
      return name == "auto";
    }
    g_kernel = 1;
    return true;
  }
  return false;
}

bool own_sgemm_into(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t ars, int64_t acs,
                    const float* b, int64_t brs, int64_t bcs, float beta, float* c, int64_t ldc, const float* bias,
                    int max_tasks) {
  if (m == 0 || n == 0) return true;
  // beta = 1 keeps the old c to add in the last store, so the partial sums of several k blocks cannot live in c
  if ((beta != 0.f && beta != 1.f) || (beta == 1.f && k > kKC)) return false;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = (beta == 1.f ? c[i * ldc + j] : 0.f) + (bias ? bias[j] : 0.f);
    return true;
  }
  Epilogue ep;
  ep.alpha = alpha;
  ep.add_c = beta == 1.f;
  ep.bias = bias;
  if (few_rows_by_transposed_b(m, n, k, brs, bcs)) {  // Note [Few rows by a transposed b]
    const int64_t m16 = (m + 15) / 16 * 16, n16 = (n + 15) / 16 * 16;
    static thread_local std::vector<float> scratch;
    scratch.resize((size_t)(n16 * m16));
    // c^T (n x m) = b^T (a row-major n x k view of b: rows bcs apart) @ a^T (a k x m view of a)
    const RowSet set{b, bcs, brs, scratch.data()};
    run_strips_parallel(n, m, k, &set, 1, a, acs, ars, m16, Epilogue{}, max_tasks);
    finish_transposed(m, n, scratch.data(), m16, c, ldc, ep);
    return true;
  }
  const RowSet set{a, ars, acs, c};
  run_strips_parallel(m, n, k, &set, 1, b, brs, bcs, ldc, ep, max_tasks);
  return true;
}

// Note [A product and its tangent in one call]: forward mode through x @ w with a constant w computes x @ w and
// its tangent tx @ w, two products by the same b. Packing b's strips (copied, or transposed when w is given
// transposed, as linear's is) was 9% of bench/forward_ad.py's jvp; here each strip is packed once for both, the
// rows of x and then those of tx run by it. Each output is the chain of fused multiply-adds own_sgemm gives it
// (p = 0 .. k-1, whatever the row block or the packing), so both results have own_sgemm's bits.
void own_sgemm_pair(int64_t m, int64_t n, int64_t k, const float* a1, int64_t a1rs, int64_t a1cs, const float* a2,
                    int64_t a2rs, int64_t a2cs, const float* b, int64_t brs, int64_t bcs, float* c1, float* c2,
                    int max_tasks) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(c1, c1 + m * n, 0.f);
    std::fill(c2, c2 + m * n, 0.f);
    return;
  }
  const RowSet sets[2] = {{a1, a1rs, a1cs, c1}, {a2, a2rs, a2cs, c2}};
  run_strips_parallel(m, n, k, sets, 2, b, brs, bcs, n, Epilogue{}, max_tasks);
}

// b packed once for many products by it (rnn.cpp's recurrent steps, Note [Recurrent products without repacking]):
// strip s of kNR columns is k rows of kNR floats at data[s * k * kNR], zeros past column n -- the layout pack_b
// gives one k block, so every k block of a strip is read in place with ldb = kNR.
DG_AVX512 void own_pack_b(const float* b, int64_t k, int64_t n, int64_t brs, int64_t bcs, OwnPackedB* out) {
  const int64_t strips = (n + kNR - 1) / kNR;
  out->k = k, out->n = n;
  out->data.assign((size_t)(strips * k * kNR), 0.f);
  for (int64_t s = 0; s < strips; ++s)
    pack_b(k, std::min<int64_t>(kNR, n - s * kNR), b + s * kNR * bcs, brs, bcs, out->data.data() + s * k * kNR);
}

// c (m x b.n, row stride ldc) = a (m x b.k, strides ars, acs) @ b, on the calling thread: the same chain of
// fused multiply-adds per output as own_sgemm (so the same bits whatever m or the row block).
DG_AVX512 void own_sgemm_packed(int64_t m, const float* a, int64_t ars, int64_t acs, const OwnPackedB& b, float* c,
                                int64_t ldc) {
  const int64_t n = b.n, k = b.k;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.f);
    return;
  }
  const int64_t strips = (n + kNR - 1) / kNR;
  for (int64_t s = 0; s < strips; ++s) {
    const int64_t j0 = s * kNR, w = std::min<int64_t>(kNR, n - j0);
    const int nv = (int)((w + 15) / 16);
    const int64_t rem = w - 16 * (nv - 1);
    const __mmask16 tail = (__mmask16)(rem >= 16 ? 0xFFFF : (1u << rem) - 1);
    const float* panel = b.data.data() + s * k * kNR;
    for (int64_t p0 = 0; p0 < k; p0 += kKC) {
      const int64_t kc = std::min(kKC, k - p0);
      for (int64_t i0 = 0; i0 < m; i0 += kMR) {
        const int rows = (int)std::min<int64_t>(kMR, m - i0);
        micro_t f = micro_pick(nv, rows, false);
        f(kc, a + i0 * ars + p0 * acs, ars, acs, panel + p0 * kNR, kNR, c + i0 * ldc + j0, ldc, tail, p0 > 0,
          nullptr, nullptr);
      }
    }
  }
}

void own_sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b,
               int64_t brs, int64_t bcs, float* c, int64_t ldc, const float* bias, int max_tasks) {
  own_sgemm_into(m, n, k, 1.f, a, ars, acs, b, brs, bcs, 0.f, c, ldc, bias, max_tasks);
}

}  // namespace dyngrad
