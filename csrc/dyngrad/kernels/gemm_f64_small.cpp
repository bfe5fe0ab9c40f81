// gemm_f64_small.cpp: dyngrad's own float64 kernel for small matrix products (Note [Own float64 small-product
// kernel]). Compiled for AVX-512F through function attributes whatever the build's -march, used only where
// own_gemm_enabled() (the CPU has AVX-512F, and neither DYNGRAD_GEMM=blas nor _C._set_gemm_kernel("blas") chose
// the BLAS path): elsewhere matmul.cpp calls the BLAS as before.
//
// Note [Own float64 small-product kernel]: the float64 LSTMCell + LBFGS time-series program (the bench's
// lstmcell-lbfgs row: batch 97, hidden 51, so 97 x 51 @ 51 x 204 gate products, 97 x 204 @ 204 x 51 input
// gradients and 204 x 97 @ 97 x 51 weight gradients, ~9 per time step, ~1M multiply-adds each) spent ~29% of its
// samples in OpenBLAS's dgemm: its kernel, its packing of both operands (4 copy routines) and a memset of the
// output for beta = 0 before the kernel adds into it (perf, Xeon family 6 model 167, 1 thread). This kernel is the
// register-blocked one of gemm_avx512.cpp in float64: c's rows in blocks of kMR = 8, its columns in strips of
// kNR = 24 (three 8-double vectors), 24 accumulators in zmm registers, per step of k eight broadcasts of a (read
// in place, any strides) and three loads of the strip of b, which is packed once per strip and k block (kKC x 24
// doubles, 36 KiB: it stays in L1 across c's row blocks) and zero-padded past the last column. The accumulators
// start at zero and are stored once (masked past the last column), so c is never cleared first nor read; a later
// k block starts from the stored partial sums, so every output is one chain of fused multiply-adds over p = 0 ..
// k-1 in order, however the columns are split among threads: the bits do not depend on the thread count.
// Products with one output column over contiguous rows of a stay on matmul.cpp's dot path (Note [Dot products in 8
// lanes]: mv's bits are dot's). Measured (bench/f64_small_gemm.py, Xeon family 6 model 167, 2 cores, KVM, 1 thread,
// load 7-12, medians of 3-5 rounds; BLAS path / own, numpy / own, torch (MKL) / own): 97 x 51 @ 51 x 204 (b given
// transposed) 1.40, 1.42, 1.08; 97 x 204 @ 204 x 51 1.48, 1.50, 0.97; 204 x 97 @ 97 x 51 (a transposed) 1.69, 1.71,
// 1.11; 32 x 128 @ 128 x 512 1.45, 1.41, 1.01; 128^3 1.48, 1.49, 1.00; 256^3 1.32, 1.32, 1.05; 64^3 ~1.0. The bench's
// lstmcell-lbfgs-1t row went from torch/dyngrad 1.10-1.12 (last session, quiet) to 1.42-1.59 (load 3-12) with this
// kernel, the packed float64 step products of rnn.cpp and the cells' folded biases together.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "thread_pool.h"

namespace dyngrad {

namespace {
constexpr int kMR = 8;        // rows of c per block
constexpr int kNR = 24;       // columns of c per strip (three 8-double vectors)
constexpr int64_t kKC = 192;  // k per block: a packed strip block (kKC x 24 doubles, 36 KiB) stays in L1

#define DG_AVX512 __attribute__((target("avx512f")))

// Rows r < R of a block of c times the packed strip block bp (kc rows of kNR doubles) over columns [0, 8 NV), the
// last vector masked by `tail`: c = (load ? c : 0) + sum_p a[r, p] bp[p, :]. a[r, p] is ap[r * ars + p * acs].
// The accumulators are named variables (an array of them was kept on the stack by gcc in the float32 kernel).
#define DG_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
template <int R, int NV>
DG_AVX512 void micro(int64_t kc, const double* __restrict ap, int64_t ars, int64_t acs, const double* __restrict bp,
                     double* __restrict c, int64_t ldc, __mmask8 tail, bool load) {
  static_assert(R >= 1 && R <= kMR && NV >= 1 && NV <= 3, "micro: block shape");
  const __mmask8 m0 = NV == 1 ? tail : (__mmask8)0xFF, m1 = NV == 2 ? tail : (__mmask8)0xFF, m2 = tail;
  const __m512d z = _mm512_setzero_pd();
#define DG_DECL(i)                                                      \
  __m512d x##i##0 = z, x##i##1 = z, x##i##2 = z;                        \
  if (R > i && load) {                                                  \
    x##i##0 = _mm512_maskz_loadu_pd(m0, c + i * ldc);                   \
    if (NV >= 2) x##i##1 = _mm512_maskz_loadu_pd(m1, c + i * ldc + 8);  \
    if (NV == 3) x##i##2 = _mm512_maskz_loadu_pd(m2, c + i * ldc + 16); \
  }
  DG_ROWS(DG_DECL)
#undef DG_DECL
  for (int64_t p = 0; p < kc; ++p) {
    // (the strip is zero-padded: full loads)
    const __m512d b0 = _mm512_loadu_pd(bp);
    const __m512d b1 = NV >= 2 ? _mm512_loadu_pd(bp + 8) : z;
    const __m512d b2 = NV == 3 ? _mm512_loadu_pd(bp + 16) : z;
#define DG_STEP(i)                                              \
  if (R > i) {                                                  \
    const __m512d av = _mm512_set1_pd(ap[i * ars]);             \
    x##i##0 = _mm512_fmadd_pd(av, b0, x##i##0);                 \
    if (NV >= 2) x##i##1 = _mm512_fmadd_pd(av, b1, x##i##1);    \
    if (NV == 3) x##i##2 = _mm512_fmadd_pd(av, b2, x##i##2);    \
  }
    DG_ROWS(DG_STEP)
#undef DG_STEP
    ap += acs;
    bp += kNR;
  }
#define DG_STORE(i)                                                      \
  if (R > i) {                                                           \
    _mm512_mask_storeu_pd(c + i * ldc, m0, x##i##0);                     \
    if (NV >= 2) _mm512_mask_storeu_pd(c + i * ldc + 8, m1, x##i##1);    \
    if (NV == 3) _mm512_mask_storeu_pd(c + i * ldc + 16, m2, x##i##2);   \
  }
  DG_ROWS(DG_STORE)
#undef DG_STORE
}
#undef DG_ROWS

using micro_t = void (*)(int64_t, const double*, int64_t, int64_t, const double*, double*, int64_t, __mmask8, bool);
template <int NV>
micro_t micro_for(int rows) {
  switch (rows) {
    case 1: return micro<1, NV>;
    case 2: return micro<2, NV>;
    case 3: return micro<3, NV>;
    case 4: return micro<4, NV>;
    case 5: return micro<5, NV>;
    case 6: return micro<6, NV>;
    case 7: return micro<7, NV>;
    default: return micro<8, NV>;
  }
}

// dst[r * kNR + 8 h ..] = rows r < rows of the 8 x 8 block whose column c (c < 8) is col[c][0 .. 8): the columns'
// values at 8 consecutive p (a transpose in registers; cols past the block's width are zero vectors).
DG_AVX512 inline void store_transposed8(const __m512d r[8], int rows, double* dst) {
  const __m512d t0 = _mm512_unpacklo_pd(r[0], r[1]), t1 = _mm512_unpackhi_pd(r[0], r[1]);
  const __m512d t2 = _mm512_unpacklo_pd(r[2], r[3]), t3 = _mm512_unpackhi_pd(r[2], r[3]);
  const __m512d t4 = _mm512_unpacklo_pd(r[4], r[5]), t5 = _mm512_unpackhi_pd(r[4], r[5]);
  const __m512d t6 = _mm512_unpacklo_pd(r[6], r[7]), t7 = _mm512_unpackhi_pd(r[6], r[7]);
  // 128-bit lane L of t0 is (r0[2L], r1[2L]), of t1 (r0[2L+1], r1[2L+1]), and so on: output row p gathers lane
  // p / 2 of t0, t2, t4, t6 (p even) or of t1, t3, t5, t7 (p odd)
  const __m512d e0 = _mm512_shuffle_f64x2(t0, t2, 0x88), e1 = _mm512_shuffle_f64x2(t4, t6, 0x88);  // lanes 0, 2
  const __m512d e2 = _mm512_shuffle_f64x2(t0, t2, 0xDD), e3 = _mm512_shuffle_f64x2(t4, t6, 0xDD);  // lanes 1, 3
  const __m512d o0 = _mm512_shuffle_f64x2(t1, t3, 0x88), o1 = _mm512_shuffle_f64x2(t5, t7, 0x88);
  const __m512d o2 = _mm512_shuffle_f64x2(t1, t3, 0xDD), o3 = _mm512_shuffle_f64x2(t5, t7, 0xDD);
  const __m512d out[8] = {_mm512_shuffle_f64x2(e0, e1, 0x88), _mm512_shuffle_f64x2(o0, o1, 0x88),
                          _mm512_shuffle_f64x2(e2, e3, 0x88), _mm512_shuffle_f64x2(o2, o3, 0x88),
                          _mm512_shuffle_f64x2(e0, e1, 0xDD), _mm512_shuffle_f64x2(o0, o1, 0xDD),
                          _mm512_shuffle_f64x2(e2, e3, 0xDD), _mm512_shuffle_f64x2(o2, o3, 0xDD)};
  for (int i = 0; i < rows; ++i) _mm512_storeu_pd(dst + i * kNR, out[i]);
}

// dst[p * kNR + jj] = b[p, j0 + jj] for p < kc, jj < w (w <= kNR), zeros for w <= jj < kNR; b's strides brs, bcs.
DG_AVX512 void pack_strip(int64_t kc, int64_t w, const double* b, int64_t brs, int64_t bcs, double* dst) {
  if (bcs == 1 || w == 1) {  // rows of b contiguous: three masked copies per row
    __mmask8 mk[3];
    for (int v = 0; v < 3; ++v) {
      const int64_t left = w - 8 * v;
      mk[v] = (__mmask8)(left >= 8 ? 0xFF : left <= 0 ? 0 : (1u << left) - 1);
    }
    for (int64_t p = 0; p < kc; ++p)
      for (int v = 0; v < 3; ++v)
        _mm512_storeu_pd(dst + p * kNR + 8 * v, _mm512_maskz_loadu_pd(mk[v], b + p * brs + 8 * v));
    return;
  }
  if (brs == 1) {  // b transposed (linear's weight, a recurrent W^T): column j is contiguous in p; 8 x 8 blocks
    for (int64_t p0 = 0; p0 < kc; p0 += 8) {
      const int rows = (int)std::min<int64_t>(8, kc - p0);
      const __mmask8 pm = (__mmask8)(rows == 8 ? 0xFF : (1u << rows) - 1);
      for (int h = 0; h < 3; ++h) {
        __m512d r[8];
        for (int c = 0; c < 8; ++c) {
          const int64_t jj = 8 * h + c;
          r[c] = jj < w ? _mm512_maskz_loadu_pd(pm, b + jj * bcs + p0) : _mm512_setzero_pd();
        }
        store_transposed8(r, rows, dst + p0 * kNR + 8 * h);
      }
    }
    return;
  }
  for (int64_t p = 0; p < kc; ++p)  // strided both ways: element by element
    for (int64_t jj = 0; jj < kNR; ++jj) dst[p * kNR + jj] = jj < w ? b[p * brs + jj * bcs] : 0.0;
}

// The micro-kernel for one strip of width w (1 .. kNR) and `rows` rows.
micro_t micro_for_width(int64_t w, int rows) {
  const int nv = (int)((w + 7) / 8);
  return nv == 3 ? micro_for<3>(rows) : nv == 2 ? micro_for<2>(rows) : micro_for<1>(rows);
}
__mmask8 tail_mask(int64_t w) {
  const int64_t rem = w - 8 * ((w + 7) / 8 - 1);
  return (__mmask8)(rem >= 8 ? 0xFF : (1u << rem) - 1);
}

// Strips [s0, s1) of c (m x n, row stride ldc) = a (m x k, strides ars, acs) b; packed (k x kNR per strip,
// contiguous, zero-padded) when given, else b (strides brs, bcs) is packed here per strip and k block.
void run_strips(int64_t s0, int64_t s1, int64_t m, int64_t n, int64_t k, const double* a, int64_t ars, int64_t acs,
                const double* b, int64_t brs, int64_t bcs, const double* packed, double* c, int64_t ldc) {
  static thread_local std::vector<double> buf;
  if (!packed) buf.resize((size_t)(kKC * kNR));
  for (int64_t s = s0; s < s1; ++s) {
    const int64_t j0 = s * kNR, w = std::min<int64_t>(kNR, n - j0);
    const __mmask8 tail = tail_mask(w);
    for (int64_t p0 = 0; p0 < k; p0 += kKC) {
      const int64_t kc = std::min(kKC, k - p0);
      const double* bp;
      if (packed) {
        bp = packed + (s * k + p0) * kNR;
      } else {
        pack_strip(kc, w, b + p0 * brs + j0 * bcs, brs, bcs, buf.data());
        bp = buf.data();
      }
      for (int64_t i0 = 0; i0 < m; i0 += kMR) {
        const int rows = (int)std::min<int64_t>(kMR, m - i0);
        micro_for_width(w, rows)(kc, a + i0 * ars + p0 * acs, ars, acs, bp, c + i0 * ldc + j0, ldc, tail, p0 > 0);
      }
    }
  }
}

void run(int64_t m, int64_t n, int64_t k, const double* a, int64_t ars, int64_t acs, const double* b, int64_t brs,
         int64_t bcs, const double* packed, double* c, int64_t ldc, int max_tasks) {
  const int64_t strips = (n + kNR - 1) / kNR;
  const int tasks = (int)std::max<int64_t>(1, std::min<int64_t>(max_tasks, strips));
  if (tasks == 1) {
    run_strips(0, strips, m, n, k, a, ars, acs, b, brs, bcs, packed, c, ldc);
    return;
  }
  // strips split as evenly as they go; each output is the same chain of multiply-adds whichever task has it
  run_parallel(tasks, [&](int t) {
    const int64_t s0 = strips * t / tasks, s1 = strips * (t + 1) / tasks;
    if (s0 < s1) run_strips(s0, s1, m, n, k, a, ars, acs, b, brs, bcs, packed, c, ldc);
  });
}
}  // namespace

// Split over the pool's threads from 2^19 multiply-adds (half the float32 kernel's threshold: a float64 multiply-add
// takes twice the time per element), so that the LSTMCell program's ~1M products use both cores.
int own_dgemm_tasks(int64_t m, int64_t n, int64_t k) { return m * n * k >= (int64_t(1) << 19) ? num_threads() : 1; }

bool own_dgemm_pays(int64_t m, int64_t n, int64_t k) {
  if (!own_gemm_enabled()) return false;
  const int64_t work = m * n * k;
  // measured against OpenBLAS: bench/f64_small_gemm.py
  return work > 4096 && work <= (int64_t(1) << 24) && k <= 4096;
}

void own_dgemm(int64_t m, int64_t n, int64_t k, const double* a, int64_t ars, int64_t acs, const double* b,
               int64_t brs, int64_t bcs, double* c, int64_t ldc, int max_tasks) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, n * sizeof(double));
    return;
  }
  run(m, n, k, a, ars, acs, b, brs, bcs, nullptr, c, ldc, std::min(max_tasks, own_dgemm_tasks(m, n, k)));
}

void own_pack_b_f64(const double* b, int64_t k, int64_t n, int64_t brs, int64_t bcs, OwnPackedBf64* out) {
  out->k = k;
  out->n = n;
  const int64_t strips = (n + kNR - 1) / kNR;
  out->data.resize((size_t)(strips * k * kNR));  // (pack_strip writes every element, the padding too)
  for (int64_t s = 0; s < strips; ++s) {
    const int64_t j0 = s * kNR, w = std::min<int64_t>(kNR, n - j0);
    if (k > 0) pack_strip(k, w, b + j0 * bcs, brs, bcs, out->data.data() + s * k * kNR);
  }
}

void own_dgemm_packed(int64_t m, const double* a, int64_t ars, int64_t acs, const OwnPackedBf64& b, double* c,
                      int64_t ldc) {
  if (m <= 0 || b.n <= 0) return;
  if (b.k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, b.n * sizeof(double));
    return;
  }
  run(m, b.n, b.k, a, ars, acs, nullptr, 0, 0, b.data.data(), c, ldc, 1);
}

}  // namespace dyngrad
