// rnn.cpp: the loops of rnn_layer (Note [Whole-sequence RNN layer] in ops_nn.cpp): the forward recurrence, and the
// backward recurrence with each cell's derivative fused into one pass. No autograd here.

// GCC's -march=native on AVX-512 CPUs vectorises loops 256 bits wide (it prefers ymm, for the clock of older
// parts); the cell loops below are transcendental-bound, and at 512 bits an LSTM layer's forward cell loop takes
// about half the time (Xeon family 6 model 167, 2026-12-03). Before the includes, so that the inline helpers
// (k_sigmoid, k_tanh) have the same target options as their callers here and still inline.
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "fast_math.h"
#include "gil.h"
#include "kernels.h"
#include "thread_pool.h"

// The inner loops read and write up to a dozen rows of distinct buffers (gates, states, activations): more than
// GCC will check for overlap at run time, so without this it leaves them scalar (5x the instructions).
#define DG_NO_ALIAS _Pragma("GCC ivdep")

namespace dyngrad {

namespace {
// rows x cols at element `offset` of contiguous t's storage, rows `ld` apart (a view, no autograd)
Tensor matrix_view(const Tensor& t, int64_t offset, int64_t rows, int64_t cols, int64_t ld) {
  return make_view(t, {rows, cols}, {ld, 1}, t->offset + offset);
}
// the transpose of a contiguous (r, c) matrix, as a view
Tensor transposed_view(const Tensor& t, int64_t offset, int64_t r, int64_t c) {
  return make_view(t, {c, r}, {1, c}, t->offset + offset);
}

// Note [Zero initial state]: nn.LSTM/GRU/RNN called without hx start from zeros (the module makes them), and then
// step 0's recurrent product h0 W^T (forward) and its share dgh_0^T h0 of dW (backward) are zeros: both are skipped
// where that is exact. The forward skips h0 W^T when h0 is all zeros and W has no inf or NaN (0 * inf is NaN); a
// zero product is +0 (its chains start from +0), and x + +0 + b is what the cell computes from it, so the bits are
// the same. The backward drops dgh_0^T h0 when h0 is all zeros and step 0's dgh is finite: dW is then the one
// product over the other L-1 steps, without the small product and the add of its (G*H, H) result (the add of +0
// changes no bits but -0's sign, which the product would also have made +0: -0 + +0 = +0; dW's -0 entries occur
// only where every term is -0, ignored). One pass over N x H (and G*H x H, N x G*H) values to check.
// Measured (one layer 32 x 50, 4 x 128 gates, float32, 1 thread, CPU time, a zero h0 against one with a single
// 1e-30 entry taking turns, 150 calls each, two runs, Xeon family 6 model 167, 2 cores, KVM, load 5-7): forward best
// 1.75 -> 1.72 and 1.69 -> 1.59 ms, median 1.93 -> 1.91 and 1.91 -> 1.87; forward + backward best 5.12 -> 5.04 and
// 5.48 -> 5.38, median 5.97 -> 5.89 and 6.33 -> 6.25: ~1.5% of the layer, ~1% of the lstm-train step. The float64
// LSTMCell program (a one-step layer per cell call: only its first step has a zero h0) gives the same bits.
template <typename T>
bool all_zero(const T* p, int64_t n) {  // (-0 counts as zero: its products are zeros too)
  for (int64_t i = 0; i < n; ++i)
    if (p[i] != T(0)) return false;  // NaN too
  return true;
}
// no inf or NaN: an exponent field of all ones, found by an integer OR over the bits (vectorises)
template <typename T>
bool all_finite(const T* p, int64_t n) {
  using U = typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type;
  const U exponent = sizeof(T) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
  U bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    U bits;
    std::memcpy(&bits, p + i, sizeof(T));
    bad |= (bits & exponent) == exponent ? U(1) : U(0);
  }
  return bad == 0;
}

template <typename T>
std::vector<T> bias_or_zeros(const Tensor& b, int64_t n) {
  std::vector<T> v(n, T(0));
  if (b) std::copy(b->data<T>(), b->data<T>() + n, v.begin());
  return v;
}

// Note [RNN rows in parallel]: each batch row's recurrence depends on that row alone (row n of h_t W^T needs row n
// of h_t only), so a batch of N >= 32 rows is cut into ceil(N / kRowBlock) blocks, fixed by the shape, and each
// block runs the whole sequence on one thread: one parallel region per layer, not two per step. The blocks are the
// same whatever the thread count, so the bits are too (a product's bits depend on its row count, so blocks chosen
// by the thread count would not be). On one thread the smaller products cost ~5% of an LSTM training step
// (2026-12-01); on two the step is ~20% faster.
constexpr int64_t kRowBlock = 16;
// Note [Float64 rows in parallel]: with the own float64 kernel (Note [Own float64 small-product kernel] in
// gemm_f64_small.cpp) from 2^18 (a float64 step costs about twice a float32 one per element, and its products'
// bits do not depend on the rows they are given), so that the LSTMCell program's one-step layers (97 rows, hidden
// 51: 1.0M) use both cores; elsewhere from 2^20 as before.
int64_t row_block_count(int64_t N, int64_t work, bool f64_own) {
  const int64_t min_work = f64_own ? (int64_t(1) << 18) : (int64_t(1) << 20);
  return N >= 2 * kRowBlock && work >= min_work ? (N + kRowBlock - 1) / kRowBlock : 1;
}
template <typename F>
void for_row_blocks(int64_t N, int64_t blocks, const F& f) {
  const int64_t rows = (N + blocks - 1) / blocks;
  run_parallel((int)blocks, [&](int i) { f(i * rows, std::min(N, (i + 1) * rows)); });
}
template <typename T>
int64_t row_blocks_for(int64_t N, int64_t work) {
  return row_block_count(N, work, std::is_same<T, double>::value && own_gemm_enabled());
}

// Note [Recurrent products without repacking]: each step of a recurrence multiplies a few batch rows by the same
// weight: h_prev (rows x H) W^T forward, dgates (rows x GH) W backward. OpenBLAS packs both operands of every
// call, and for a 20 x 200 @ 200 x 800 step product packing the weight (sgemm_incopy) took more time than the
// product itself (31% of an LSTM layer's forward against the kernel's 28%; perf, Xeon Sapphire Rapids, 1 thread).
// With at most kFewRows rows, the weight is packed once per layer call (PackedMatrix: column panels of kTileCols,
// each K x kTileCols contiguous, the last one padded with zeros) and rows_times_matrix keeps a kTileRows x kTileCols
// block of the result in registers, adding a[i, k] b[k, j0:j0+kTileCols] for each k. The panel rows are contiguous,
// so a panel's block of kBlockK rows (32 KiB for float) stays in L1 across the tiles of rows; read in place from
// the row-major weight, rows 2 KiB apart mapped to a few cache sets and the panel came from L2 each time. The a
// values are multiplied as scalars (a broadcast from memory inside the FMA; `V{} + x` cost an add and a shuffle
// per value on the FMA ports). 32 x 128 @ 128 x 512: 114 -> 197 GFLOP/s, 16 x 512 @ 512 x 128: 126 -> 189
// (a C++ loop of 50 products, Xeon family 6 model 167, 1 thread, 2026-12-03).
constexpr int64_t kFewRows = 64;

// 64 bytes of T as one GCC/Clang vector (one AVX-512 register; two or four narrower ones elsewhere)
typedef float Floats64 __attribute__((vector_size(64)));
typedef double Doubles64 __attribute__((vector_size(64)));
template <typename T> struct Vector64;
template <> struct Vector64<float> { using type = Floats64; };
template <> struct Vector64<double> { using type = Doubles64; };

template <typename T>
struct Tiling {
  static constexpr int64_t kLanes = 64 / sizeof(T), kTileRows = 4, kTileVectors = 4, kTileCols = kLanes * kTileVectors;
  static constexpr int64_t kBlockK = 32768 / (kTileCols * int64_t(sizeof(T)));  // a panel block of 32 KiB
};

// a K x N matrix as ceil(N / kTileCols) panels of K x kTileCols, row-major inside, zero-padded past column N
template <typename T>
struct PackedMatrix {
  int64_t K = 0, N = 0;
  std::vector<T> data;
  // from m (K x N) with strides (s0, s1) in elements
  PackedMatrix(const T* m, int64_t K_, int64_t N_, int64_t s0, int64_t s1) : K(K_), N(N_) {
    constexpr int64_t C = Tiling<T>::kTileCols;
    const int64_t panels = (N + C - 1) / C;
    data.assign(panels * K * C, T(0));
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t k = 0; k < K; ++k) {
        T* dst = data.data() + (p * K + k) * C;
        const int64_t nc = std::min(C, N - p * C);
        for (int64_t j = 0; j < nc; ++j) dst[j] = m[k * s0 + (p * C + j) * s1];
      }
  }
};

// out (rows x b.N, contiguous) = a (rows x b.K, rows lda apart) b
template <typename T>
void rows_times_matrix(const T* a, int64_t lda, int64_t rows, const PackedMatrix<T>& b, T* out) {
  using V = typename Vector64<T>::type;
  using Tl = Tiling<T>;
  constexpr int64_t kLanes = Tl::kLanes, kTileRows = Tl::kTileRows, kTileCols = Tl::kTileCols;
  static_assert(kTileRows == 4 && Tl::kTileVectors == 4, "the accumulators below are written out");
  const int64_t K = b.K, N = b.N;
  for (int64_t j0 = 0; j0 < N; j0 += kTileCols) {
    const int64_t nc = std::min(kTileCols, N - j0);
    const T* panel = b.data.data() + j0 * K;
    for (int64_t k0 = 0; k0 < K; k0 += Tl::kBlockK) {
      const int64_t k1 = std::min(K, k0 + Tl::kBlockK);
      for (int64_t i0 = 0; i0 < rows; i0 += kTileRows) {
        const int64_t nr = std::min(kTileRows, rows - i0);
        // past the last row, the tile reads the last row again and does not store it
        const T *a0 = a + i0 * lda, *a1 = a + std::min(i0 + 1, rows - 1) * lda;
        const T *a2 = a + std::min(i0 + 2, rows - 1) * lda, *a3 = a + std::min(i0 + 3, rows - 1) * lda;
        V c00{}, c01{}, c02{}, c03{}, c10{}, c11{}, c12{}, c13{}, c20{}, c21{}, c22{}, c23{}, c30{}, c31{}, c32{}, c33{};
        for (int64_t k = k0; k < k1; ++k) {  // 16 accumulators, named so that they stay in registers
          const T* bk = panel + k * kTileCols;
          V y0, y1, y2, y3;
          std::memcpy(&y0, bk, sizeof(V)), std::memcpy(&y1, bk + kLanes, sizeof(V));
          std::memcpy(&y2, bk + 2 * kLanes, sizeof(V)), std::memcpy(&y3, bk + 3 * kLanes, sizeof(V));
          const T x0 = a0[k], x1 = a1[k], x2 = a2[k], x3 = a3[k];
          c00 += x0 * y0, c01 += x0 * y1, c02 += x0 * y2, c03 += x0 * y3;
          c10 += x1 * y0, c11 += x1 * y1, c12 += x1 * y2, c13 += x1 * y3;
          c20 += x2 * y0, c21 += x2 * y1, c22 += x2 * y2, c23 += x2 * y3;
          c30 += x3 * y0, c31 += x3 * y1, c32 += x3 * y2, c33 += x3 * y3;
        }
        V tile[kTileRows][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23},
                                {c30, c31, c32, c33}};
        for (int64_t i = 0; i < nr; ++i) {
          T* o = out + (i0 + i) * N + j0;
          const T* t = reinterpret_cast<const T*>(tile[i]);
          if (k0 == 0)
            std::memcpy(o, t, nc * sizeof(T));
          else
            for (int64_t j = 0; j < nc; ++j) o[j] += t[j];
        }
      }
    }
  }
}

// Note [Recurrent products on the own kernel]: in float32, where the CPU has AVX-512F (own_gemm_enabled(), Note [Own
// small-product kernel] in gemm_avx512.cpp), the step products h_prev W^T (forward) and dgates W (backward) run on the
// own kernel's micro-kernels (8 rows x 48 columns of accumulators), the weight packed once per layer call into its
// column strips (own_pack_b) so that no step packs anything (own_sgemm_packed); in float64 likewise on the own
// float64 kernel (own_pack_b_f64, own_dgemm_packed: Note [Own float64 small-product kernel] in gemm_f64_small.cpp);
// elsewhere (other CPUs, DYNGRAD_GEMM=blas or _C._set_gemm_kernel("blas")) rows_times_matrix above, as before
// (tests/test_gemm_f64_small.py runs both in float64). Each output is one chain of
// fused multiply-adds over k in order on either path, so the bits do not depend on the row block or the thread count
// (Note [RNN rows in parallel]); tests/test_rnn.py runs both paths. Measured (bench/rnn_step_kernel_ab.py --before <a
// copy of the package built before>, batch 32 x 50 steps, 64 -> 128, Xeon family 6 model 167, 2 cores, KVM, load
// 3.4-3.7, median of 5 turns of best of 20, before / after, > 1 = faster now): 1 thread, CPU time: LSTM forward 1.08x,
// forward + backward 1.08x, GRU forward 1.12x, forward + backward 1.11x; 2 threads, CPU time 1.08- 1.22x (wall at 2
// threads on this loaded machine: 1.10-1.66x, noise); a second run (load 3.7-3.9): LSTM 1.04x and 1.07x, GRU 1.09x and
// 1.06x at 1 thread, 1.05-1.10x at 2 (where the other core was mostly busy elsewhere). Sampled (perf -e cpu-clock, LSTM
// forward + backward, 1 thread, load 5): the step products went from 28.8% to 25.3% of the samples, 3946 -> ~3260
// samples, ~15% less time in them; the whole step ~3% fewer samples. Against torch (same run, 1 thread, torch /
// dyngrad): LSTM forward 0.82x, forward + backward 1.07x, GRU 1.25x and 1.97x. The weight gradient (one product over
// all steps, 512 x 1568 @ 1568 x 128 with dgates read transposed) stays on matmul_kernel (OpenBLAS at that size): on
// the own kernel it took ~12% more time (an experiment, perf as above: the own kernel's samples grew by ~2200 while
// OpenBLAS's fell by ~1900, load 5.5), so it is not moved. k blocks of 512 or 128 instead of 192 in own_sgemm_packed:
// within noise. The bench's lstm-train row (python -m dyngrad.bench --only lstm-train --engines cpp,torch, before and
// after taking turns, 5 runs, load 4.3-5.6) swung by 30% from run to run at either build (1 thread 6.8-11.1 ms): it
// cannot show a few per cent.
template <typename T>
struct StepWeight {
  bool own = false, own64 = false;
  OwnPackedB own_b;
  OwnPackedBf64 own_b64;
  PackedMatrix<T> tiles;
  // m (K x N) with strides (s0, s1) in elements
  StepWeight(const T* m, int64_t K, int64_t N, int64_t s0, int64_t s1)
      : own(std::is_same<T, float>::value && own_gemm_enabled()),
        own64(std::is_same<T, double>::value && own_gemm_enabled()),
        tiles(nullptr, 0, 0, 0, 0) {
    if (own)
      own_pack_b(reinterpret_cast<const float*>(m), K, N, s0, s1, &own_b);
    else if (own64)
      own_pack_b_f64(reinterpret_cast<const double*>(m), K, N, s0, s1, &own_b64);
    else
      tiles = PackedMatrix<T>(m, K, N, s0, s1);
  }
  // out (rows x N, contiguous) = a (rows x K, rows lda apart) m
  void times(const T* a, int64_t lda, int64_t rows, T* out) const {
    if (own)
      own_sgemm_packed(rows, reinterpret_cast<const float*>(a), lda, 1, own_b, reinterpret_cast<float*>(out),
                       own_b.n);
    else if (own64)
      own_dgemm_packed(rows, reinterpret_cast<const double*>(a), lda, 1, own_b64, reinterpret_cast<double*>(out),
                       own_b64.n);
    else
      rows_times_matrix<T>(a, lda, rows, tiles, out);
  }
};

// Note [Packed steps in float64]: with the own float64 kernel (Note [Own float64 small-product kernel] in
// gemm_f64_small.cpp) the step products use the packed weight whatever the row count (its row blocks of 8 have no
// limit of their own); the float32 and the portable paths keep kFewRows.
template <typename T>
bool packed_steps(int64_t rows) {
  return rows <= kFewRows || (std::is_same<T, double>::value && own_gemm_enabled());
}

template <typename T>
void forward(const Tensor& gi, const Tensor& h0, const Tensor& c0, const Tensor& w, const Tensor& b, int64_t mode,
             bool reverse, const Tensor& out, const Tensor& ws, const StepWeight<T>* wt_packed, bool zero_h0,
             int64_t n0, int64_t n1) {
  const int64_t L = gi->shape[0], N = gi->shape[1], H = h0->shape[1], GH = gi->shape[2];
  const std::vector<T> bias = bias_or_zeros<T>(b, GH);
  const T* bb = bias.data();
  const Tensor wt = transposed_view(w, 0, GH, H);
  const bool few_rows = wt_packed != nullptr;  // Note [Recurrent products without repacking]
  Tensor gh_t = few_rows ? empty({n1 - n0, GH}, gi->dtype) : nullptr;
  const T* h_prev = h0->data<T>();
  Tensor h_prev_t = matrix_view(h0, n0 * H, n1 - n0, H, H);
  const T* c_prev = c0 ? c0->data<T>() : nullptr;
  for (int64_t k = 0; k < L; ++k) {
    const int64_t t = reverse ? L - 1 - k : k;
    if (k == 0 && zero_h0) {  // Note [Zero initial state]
      if (few_rows)
        std::fill(gh_t->data<T>(), gh_t->data<T>() + (n1 - n0) * GH, T(0));
      else
        gh_t = zeros({n1 - n0, GH}, gi->dtype);
    } else if (few_rows) {  // (n1 - n0, G*H): h_prev W^T for this block's rows
      wt_packed->times(h_prev + n0 * H, H, n1 - n0, gh_t->data<T>());
    } else {
      gh_t = matmul_kernel(h_prev_t, wt);
    }
    const T* gh = gh_t->data<T>() - n0 * GH;          // (indexed by the row's number in the batch)
    const T* x = gi->data<T>() + t * N * GH;
    T* h = out->data<T>() + t * N * H;
    for (int64_t n = n0; n < n1; ++n) {
      const T *xn = x + n * GH, *gn = gh + n * GH, *hp = h_prev + n * H;
      T* hn = h + n * H;
      if (mode == kLstm) {  // c' = s(f) c + s(i) tanh(g), h' = s(o) tanh(c')
        const T* cp = c_prev + n * H;
        T* cn = out->data<T>() + (L + t) * N * H + n * H;
        T* a = ws->data<T>() + (t * N + n) * 5 * H;
        // Note [LSTM cell in two passes]: the gate activations first, each gate block one loop of three loads and
        // a store (ws's layout si, sf, tg, so is the gates' i, f, g, o), then the state update reading them back
        // from L1. One loop over all of it kept 17 row pointers live, more than the registers: gcc reloaded them
        // from the stack (38 stack accesses per 16 elements). Same operations per element, so the same bits.
        DG_NO_ALIAS
        for (int64_t j = 0; j < 2 * H; ++j) a[j] = k_sigmoid(xn[j] + gn[j] + bb[j]);
        DG_NO_ALIAS
        for (int64_t j = 2 * H; j < 3 * H; ++j) a[j] = k_tanh(xn[j] + gn[j] + bb[j]);
        DG_NO_ALIAS
        for (int64_t j = 3 * H; j < 4 * H; ++j) a[j] = k_sigmoid(xn[j] + gn[j] + bb[j]);
        DG_NO_ALIAS
        for (int64_t j = 0; j < H; ++j) {
          const T si = a[j], sf = a[H + j], tg = a[2 * H + j], so = a[3 * H + j];
          const T c = sf * cp[j] + si * tg;
          const T tc = k_tanh(c);
          cn[j] = c;
          hn[j] = so * tc;
          a[4 * H + j] = tc;
        }
      } else if (mode == kGru) {  // r, z = s(.), n = tanh(gi_n + r gh_n), h' = n + z (h - n)
        T* a = ws->data<T>() + (t * N + n) * 4 * H;
        DG_NO_ALIAS
        for (int64_t j = 0; j < H; ++j) {
          const T r = k_sigmoid(xn[j] + gn[j] + bb[j]);
          const T z = k_sigmoid(xn[H + j] + gn[H + j] + bb[H + j]);
          const T ghn = gn[2 * H + j] + bb[2 * H + j];
          const T nn = k_tanh(xn[2 * H + j] + r * ghn);
          hn[j] = nn + z * (hp[j] - nn);
          a[j] = r, a[H + j] = z, a[2 * H + j] = nn, a[3 * H + j] = ghn;
        }
      } else if (mode == kRnnTanh) {
        DG_NO_ALIAS
        for (int64_t j = 0; j < H; ++j) hn[j] = k_tanh(xn[j] + gn[j] + bb[j]);
      } else {
        DG_NO_ALIAS
        for (int64_t j = 0; j < H; ++j) {
          const T a = xn[j] + gn[j] + bb[j];
          hn[j] = a < T(0) ? T(0) : a;  // NaN passes, as relu
        }
      }
    }
    if (mode == kLstm) c_prev = out->data<T>() + (L + t) * N * H;
    h_prev = h;
    h_prev_t = matrix_view(out, (t * N + n0) * H, n1 - n0, H, H);
  }
}

// The whole layer: W^T (H x GH; element (k, j) is w's (j, k)) packed once for every row block.
template <typename T>
void forward_layer(const Tensor& gi, const Tensor& h0, const Tensor& c0, const Tensor& w, const Tensor& b,
                   int64_t mode, bool reverse, const Tensor& out, const Tensor& ws) {
  const int64_t N = gi->shape[1], H = h0->shape[1], GH = gi->shape[2];
  const int64_t blocks = row_blocks_for<T>(N, N * H * GH);
  std::unique_ptr<StepWeight<T>> wt_packed;
  if (packed_steps<T>((N + blocks - 1) / blocks))
    wt_packed.reset(new StepWeight<T>(w->data<T>(), H, GH, w->strides[1], w->strides[0]));
  // Note [Zero initial state]
  const bool zero_h0 = all_zero(h0->data<T>(), N * H) && w->is_contiguous() && all_finite(w->data<T>(), GH * H);
  for_row_blocks(N, blocks, [&](int64_t n0, int64_t n1) {
    forward<T>(gi, h0, c0, w, b, mode, reverse, out, ws, wt_packed.get(), zero_h0, n0, n1);
  });
}

// The backward recurrence for batch rows [n0, n1) (Note [RNN rows in parallel]): fills those rows of dgi, dgh,
// dc_carry and dh0.
template <typename T>
void backward_rows(const Tensor& grad, const Tensor& h0, const Tensor& c0, const Tensor& w, const Tensor& out,
                   const Tensor& ws, int64_t mode, bool reverse, const bool need[5], const Tensor& dgi,
                   const Tensor& dgh, const Tensor& dc_carry, const Tensor& dh0, const StepWeight<T>* w_packed,
                   double* db, int64_t n0, int64_t n1) {
  const int64_t L = out->shape[1], N = out->shape[2], H = out->shape[3], GH = w->shape[0];
  // The carries (dh from the step after, and dc_carry's rows) are read from the second step on: the first reads
  // zeros in their place (`first` below), so neither buffer is cleared (a one-step layer, an LSTMCell's, paid two
  // memsets of N x H per call for them).
  Tensor dh_carry = L > 0 ? empty({n1 - n0, H}, out->dtype) : zeros({n1 - n0, H}, out->dtype);
  const bool few_rows = w_packed != nullptr;  // Note [Recurrent products without repacking]
  std::vector<T> direct(mode == kGru ? N * H : 0);  // GRU: dh z, h_prev's own share
  std::vector<T> row_sum(db ? GH : 0);  // this step's rows of dgh summed (Note [Bias gradient in the recurrence])
  auto time = [&](int64_t k) { return reverse ? L - 1 - k : k; };
  const T* g = grad->data<T>();
  const T* o = out->data<T>();
  for (int64_t k = L - 1; k >= 0; --k) {
    const int64_t t = time(k);
    const bool first = k == L - 1;
    const T* hp_all = k == 0 ? h0->data<T>() : o + time(k - 1) * N * H;
    const T* dhc = dh_carry->data<T>() - n0 * H;  // (indexed by the row's number in the batch)
    for (int64_t n = n0; n < n1; ++n) {
      const T* gh_ = g + (t * N + n) * H;  // grad of h_t
      const T* dcn = dhc + n * H;
      T* di = dgi->data<T>() + (t * N + n) * GH;
      if (mode == kLstm) {
        const T* gc = g + ((L + t) * N + n) * H;  // grad of c_t
        const T* cp = k == 0 ? c0->data<T>() + n * H : o + ((L + time(k - 1)) * N + n) * H;
        const T* a = ws->data<T>() + (t * N + n) * 5 * H;
        T* dcc = dc_carry->data<T>() + n * H;
        DG_NO_ALIAS
        for (int64_t j = 0; j < H; ++j) {
          const T si = a[j], sf = a[H + j], tg = a[2 * H + j], so = a[3 * H + j], tc = a[4 * H + j];
          const T dh = gh_[j] + (first ? T(0) : dcn[j]);
          const T dc = gc[j] + (first ? T(0) : dcc[j]) + dh * so * (T(1) - tc * tc);
          di[j] = dc * tg * (si * (T(1) - si));
          di[H + j] = dc * cp[j] * (sf * (T(1) - sf));
          di[2 * H + j] = dc * si * (T(1) - tg * tg);
          di[3 * H + j] = dh * tc * (so * (T(1) - so));
          dcc[j] = dc * sf;
        }
      } else if (mode == kGru) {
        const T* hp = hp_all + n * H;
        const T* a = ws->data<T>() + (t * N + n) * 4 * H;
        T* dg = dgh->data<T>() + (t * N + n) * GH;
        T* dd = direct.data() + n * H;
        DG_NO_ALIAS
        for (int64_t j = 0; j < H; ++j) {
          const T rr = a[j], z = a[H + j], nn = a[2 * H + j], ghn = a[3 * H + j];
          const T dh = gh_[j] + (first ? T(0) : dcn[j]);
          const T dan = dh * (T(1) - z) * (T(1) - nn * nn);
          const T daz = dh * (hp[j] - nn) * (z * (T(1) - z));
          const T dar = dan * ghn * (rr * (T(1) - rr));
          di[j] = dg[j] = dar;
          di[H + j] = dg[H + j] = daz;
          di[2 * H + j] = dan;
          dg[2 * H + j] = dan * rr;
          dd[j] = dh * z;
        }
      } else {
        const T* h = o + (t * N + n) * H;
        DG_NO_ALIAS
        for (int64_t j = 0; j < H; ++j) {
          const T dh = gh_[j] + (first ? T(0) : dcn[j]);
          di[j] = mode == kRnnTanh ? dh * (T(1) - h[j] * h[j]) : (h[j] <= T(0) ? T(0) : dh);
        }
      }
    }
    if (db && n1 > n0) {  // Note [Bias gradient in the recurrence]
      const T* dg = dgh->data<T>() + (t * N + n0) * GH;
      T* rs = row_sum.data();
      std::copy(dg, dg + GH, rs);
      for (int64_t n = n0 + 1; n < n1; ++n) {
        const T* d = dg + (n - n0) * GH;
        DG_NO_ALIAS
        for (int64_t j = 0; j < GH; ++j) rs[j] += d[j];
      }
      DG_NO_ALIAS
      for (int64_t j = 0; j < GH; ++j) db[j] += (double)rs[j];
    }
    if (k == 0 && !need[1]) break;
    // dh_prev = dgh_t W (+ dh z for GRU)
    if (few_rows)  // Note [Recurrent products without repacking]
      w_packed->times(dgh->data<T>() + (t * N + n0) * GH, GH, n1 - n0, dh_carry->data<T>());
    else
      dh_carry = matmul_kernel(matrix_view(dgh, (t * N + n0) * GH, n1 - n0, GH, GH), w);
    if (mode == kGru) {
      T* d = dh_carry->data<T>();
      for (int64_t i = 0; i < (n1 - n0) * H; ++i) d[i] += direct[n0 * H + i];
    }
  }
  if (need[1]) std::copy(dh_carry->data<T>(), dh_carry->data<T>() + (n1 - n0) * H, dh0->data<T>() + n0 * H);
}

template <typename T>
RnnLayerGrads backward(const Tensor& grad, const Tensor& h0, const Tensor& c0, const Tensor& w, bool has_bias,
                       const Tensor& out, const Tensor& ws, int64_t mode, bool reverse, const bool need[5]) {
  const int64_t L = out->shape[1], N = out->shape[2], H = out->shape[3], GH = w->shape[0];
  const DType dt = out->dtype;
  RnnLayerGrads r;
  Tensor dgi = empty({L, N, GH}, dt);
  Tensor dgh = mode == kGru ? empty({L, N, GH}, dt) : dgi;  // GRU: the hidden side differs in the n gate
  // (every row written at the first step; zeros for an empty sequence)
  Tensor dc_carry = mode != kLstm ? nullptr : L > 0 ? empty({N, H}, dt) : zeros({N, H}, dt);
  Tensor dh0 = need[1] ? empty({N, H}, dt) : nullptr;
  // W (GH x H) packed once for every block (Note [Recurrent products without repacking])
  const int64_t blocks = row_blocks_for<T>(N, N * H * GH);
  std::unique_ptr<StepWeight<T>> w_packed;
  if (packed_steps<T>((N + blocks - 1) / blocks))
    w_packed.reset(new StepWeight<T>(w->data<T>(), GH, H, w->strides[0], w->strides[1]));
  // Note [Bias gradient in the recurrence]: db, the column sums of dgh over all L N rows, is summed by each row block
  // as it writes its rows (still in L1): per step its rows in T, then that sum into float64 partial sums of the
  // block, added in block order at the end. No second pass over the L x N x GH gradient (column_sums took 2% of an
  // LSTM training step, float32, batch 32, 50 steps, 128 hidden; the sum of every row into float64 took more), and
  // the same bits at any thread count (the blocks depend on the shape only).
  const bool want_db = need[4] && has_bias;
  const int64_t rows_per = (N + blocks - 1) / blocks;
  std::vector<double> partial(want_db ? blocks * GH : 0, 0.0);
  for_row_blocks(N, blocks, [&](int64_t n0, int64_t n1) {
    double* db = want_db ? partial.data() + (n0 / rows_per) * GH : nullptr;
    backward_rows<T>(grad, h0, c0, w, out, ws, mode, reverse, need, dgi, dgh, dc_carry, dh0, w_packed.get(), db, n0,
                     n1);
  });
  auto time = [&](int64_t k) { return reverse ? L - 1 - k : k; };
  if (need[0]) r.dgi = dgi;
  if (need[1]) r.dh0 = dh0;
  if (need[2] && mode == kLstm) r.dc0 = dc_carry;
  if (need[3]) {
    // dW = sum over steps of dgh_t^T h_prev: the steps after the first as one product over (L-1) N rows, whose
    // h_prev are out[0]'s rows shifted by one step, plus the first step's with h0.
    const int64_t first = time(0), M = (L - 1) * N;
    const int64_t g_off = reverse ? 0 : N * GH, h_off = reverse ? N * H : 0;
    // Note [Zero initial state]: without step 0's share when h0 is zero
    const bool drop_first = M > 0 && all_zero(h0->data<T>(), N * H) &&
                            all_finite(dgh->data<T>() + first * N * GH, N * GH);
    if (drop_first) {
      r.dw = matmul_kernel(transposed_view(dgh, g_off, M, GH), matrix_view(out, h_off, M, H, H));
    } else {
      r.dw = matmul_kernel(transposed_view(dgh, first * N * GH, N, GH), h0);
      if (M > 0)
        add_into_kernel(r.dw, matmul_kernel(transposed_view(dgh, g_off, M, GH), matrix_view(out, h_off, M, H, H)));
    }
  }
  if (want_db) {
    r.db = empty({GH}, dt);
    T* db = r.db->data<T>();
    for (int64_t j = 0; j < GH; ++j) {
      double sum = 0;
      for (int64_t i = 0; i < blocks; ++i) sum += partial[i * GH + j];
      db[j] = (T)sum;
    }
  }
  return r;
}
}  // namespace

void rnn_layer_forward_kernel(const Tensor& gi, const Tensor& h0, const Tensor& c0, const Tensor& w, const Tensor& b,
                              int64_t mode, bool reverse, const Tensor& out, const Tensor& ws) {
  BlasOneThread one_blas_thread;  // once for all the steps' products
  GilRelease no_gil(true);
  const int64_t N = gi->shape[1];
  DG_DISPATCH_FLOAT(gi->dtype, T, forward_layer<T>(gi, h0, c0, w, b, mode, reverse, out, ws));
}

RnnLayerGrads rnn_layer_backward_kernel(const Tensor& grad, const Tensor& h0, const Tensor& c0, const Tensor& w,
                                        bool has_bias, const Tensor& out, const Tensor& ws, int64_t mode,
                                        bool reverse, const bool need[5]) {
  RnnLayerGrads r;
  BlasOneThread one_blas_thread;  // once for all the steps' products
  GilRelease no_gil(true);
  DG_DISPATCH_FLOAT(out->dtype, T, r = backward<T>(grad, h0, c0, w, has_bias, out, ws, mode, reverse, need));
  return r;
}

}  // namespace dyngrad
