// matmul.cpp: batched matrix products through numpy's own OpenBLAS (or, where numpy's BLAS is not one we can use,
// the one scipy-openblas32 ships): python/dyngrad/_cpp_blas.py finds the library and hands its sgemm/dgemm over
// as function pointers, so the build needs no BLAS at all.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "gil.h"
#include "kernels.h"
#include "thread_pool.h"

namespace dyngrad {

// kernels/gemm_avx512.cpp: own_sgemm with c = alpha a b + beta c (beta 0 or 1); false when it cannot (beta = 1
// with k beyond one of its k blocks, other betas): the caller then uses the BLAS.
bool own_sgemm_into(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t ars, int64_t acs,
                    const float* b, int64_t brs, int64_t bcs, float beta, float* c, int64_t ldc, const float* bias,
                    int max_tasks);

namespace {
// cblas_?gemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc): the enums are C ints; the
// sizes are 32-bit ints (LP64 builds, scipy-openblas32) or 64-bit (ILP64 builds such as numpy's scipy_*64_).
enum { CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112 };
template <typename T, typename I>
using gemm_t = void (*)(int, int, int, I, I, I, T, const T*, I, const T*, I, T, T*, I);
using set_threads_t = void (*)(int);
using get_threads_t = int (*)();
void* g_sgemm = nullptr;
void* g_dgemm = nullptr;
bool g_ilp64 = false;
set_threads_t g_blas_set_threads = nullptr;
get_threads_t g_blas_get_threads = nullptr;

// Products of at least this many multiply-adds are split into row panels (Note [Deterministic matmul]).
constexpr int64_t kBlasThreadWork = int64_t(1) << 22;
// Short products (fewer than 128 rows) of at least this many are split into column panels.
constexpr int64_t kBlasColumnWork = int64_t(1) << 20;

// Note [One BLAS]: the library is numpy's own OpenBLAS, so the process has one BLAS and one pool of BLAS threads
// (before issue 11 dyngrad loaded a second copy, with its own threads and thread setting). Its thread count is
// process-wide, but dyngrad's calls must run on one BLAS thread (Note [Deterministic matmul]) while numpy's use the
// count the user chose (dg.set_num_threads, OPENBLAS_NUM_THREADS). So a matmul lowers the count to 1 while it runs
// and then puts back what it found; matmuls overlapping in several Python threads share one lowering (a count of
// users). A numpy product running meanwhile in another Python thread is single-threaded for that while: same
// result, only slower. dg.set_num_threads during a matmul changes the count to put back. OpenBLAS's workers
// busy-wait between and within calls, which stalls when the cores are shared: with OPENBLAS_NUM_THREADS=1 no BLAS
// worker runs and only dyngrad's sleeping pool splits work (docs/pitfalls.md, bench/blas_interop.py).
std::mutex g_blas_mutex;
int g_blas_users = 0;
int g_blas_outside = -1;  // the count numpy's calls use, put back when the last dyngrad matmul ends

}  // namespace

BlasOneThread::BlasOneThread(bool needed) : active_(needed && g_blas_set_threads != nullptr) {
  if (!active_) return;
  std::lock_guard<std::mutex> lock(g_blas_mutex);
  if (g_blas_users++ == 0) {
    g_blas_outside = g_blas_get_threads ? g_blas_get_threads() : -1;
    if (g_blas_outside != 1) g_blas_set_threads(1);
  }
}

BlasOneThread::~BlasOneThread() {
  if (!active_) return;
  std::lock_guard<std::mutex> lock(g_blas_mutex);
  if (--g_blas_users == 0 && g_blas_outside > 1) g_blas_set_threads(g_blas_outside);
}

namespace {
// Note [BLAS calls at exit]: when the process exits while a daemon thread is inside a matmul, that thread (and
// our pool's workers running its panels) keep computing while exit() runs the libraries' destructors, and
// OpenBLAS's (gotoblas_quit) unmaps the buffers its kernels are using: SIGSEGV in sgemm_kernel (8 of 12 exits on
// an Intel machine; Note [Daemon threads at exit] keeps such threads from returning to Python, not from
// computing). So every BLAS call is counted, and an exit handler (registered after OpenBLAS was loaded, so it
// runs before OpenBLAS's destructor) stops new calls and waits for the ones in flight, each one panel of a
// product; a thread that would start a call after that parks for good (the process is ending), except the
// exiting thread itself, which may run kernels from later exit handlers.
std::atomic<int> g_gemms_in_flight{0};
std::atomic<bool> g_exiting{false};
pthread_t g_exit_thread;

struct CountedBlasCall {
  CountedBlasCall() {
    for (;;) {
      g_gemms_in_flight.fetch_add(1);  // seq_cst with the exit handler's store and load (a Dekker pair)
      if (!g_exiting.load() || pthread_equal(pthread_self(), g_exit_thread)) return;
      g_gemms_in_flight.fetch_sub(1);
      for (;;) pause();
    }
  }
  ~CountedBlasCall() { g_gemms_in_flight.fetch_sub(1); }
};

void finish_blas_calls_at_exit() {
  g_exit_thread = pthread_self();
  g_exiting.store(true);
  while (g_gemms_in_flight.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// Note [Forks while kernels run] (thread_pool.cpp): a fork while another thread held g_blas_mutex (a matmul
// starting or ending) left it locked forever in the child, whose first matmul then hung (1-7 of 100 forks). The
// fork takes the mutex first, so the state it copies is whole; the child, which has none of the parent's other
// threads, has no matmul running: it forgets their count and puts back the BLAS thread count they lowered.
void blas_before_fork() { g_blas_mutex.lock(); }
void blas_after_fork_in_parent() { g_blas_mutex.unlock(); }
void blas_after_fork_in_child() {
  if (g_blas_users > 0) {
    g_blas_users = 0;
    if (g_blas_outside > 1 && g_blas_set_threads) g_blas_set_threads(g_blas_outside);
  }
  g_blas_mutex.unlock();  // taken by this thread before the fork, so the child's copy is this thread's
}

template <typename T, typename I>
void call_gemm(void* f, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
               int64_t ldb, T* c, int64_t ldc) {
  CountedBlasCall counted;  // Note [BLAS calls at exit]
  reinterpret_cast<gemm_t<T, I>>(f)(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                                    (I)m, (I)n, (I)k, T(1), a, (I)lda, b, (I)ldb, T(0), c, (I)ldc);
}

template <typename T>
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
               T* c, int64_t ldc) {
  void* f = std::is_same_v<T, float> ? g_sgemm : g_dgemm;
  if (g_ilp64)
    call_gemm<T, int64_t>(f, ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
  else
    call_gemm<T, int32_t>(f, ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
}

// Note [One call on one thread], checked where it runs: one call must give the bits of the panels it replaces, and
// that was verified on one OpenBLAS (0.3.31, SkylakeX sgemm). Another OpenBLAS, or another CPU with AVX-512 whose
// kernel OpenBLAS picks differently, may not give them; so the first large one-thread product asks this BLAS once:
// two products of 2^23 multiply-adds a panel (above kBlasThreadWork's 2^22), split unevenly by rows and by
// columns, with b plain and transposed, compared bit for bit with one call (~1 ms, once per process).
bool blas_sgemm_split_invariant() {
  static const bool invariant = [] {
    const int64_t n = 320, m = 320, k = 256, cut = 192;
    std::vector<float> a(n * k), b(k * m), one(n * m), split(n * m);
    uint32_t state = 12345;
    for (auto* v : {&a, &b})
      for (float& x : *v) x = float((state = state * 1664525u + 1013904223u) >> 8) / float(1 << 24) - 0.5f;
    for (bool tb : {false, true}) {
      const int64_t ldb = tb ? k : m;
      blas_gemm<float>(false, tb, n, m, k, a.data(), k, b.data(), ldb, one.data(), m);
      blas_gemm<float>(false, tb, cut, m, k, a.data(), k, b.data(), ldb, split.data(), m);  // rows
      blas_gemm<float>(false, tb, n - cut, m, k, a.data() + cut * k, k, b.data(), ldb, split.data() + cut * m, m);
      if (std::memcmp(one.data(), split.data(), one.size() * sizeof(float)) != 0) return false;
      blas_gemm<float>(false, tb, n, cut, k, a.data(), k, b.data(), ldb, split.data(), m);  // columns
      blas_gemm<float>(false, tb, n, m - cut, k, a.data(), k, b.data() + cut * (tb ? ldb : 1), ldb,
                       split.data() + cut, m);
      if (std::memcmp(one.data(), split.data(), one.size() * sizeof(float)) != 0) return false;
    }
    return true;
  }();
  return invariant;
}

// How a 2-D slice (rows x cols, element strides rs, cs) can be handed to BLAS without a copy.
struct MatrixView {
  bool ok = false;
  bool trans = false;
  int64_t ld = 0;
};
MatrixView blas_view(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if ((cs == 1 || cols == 1) && rs >= std::max<int64_t>(cols, 1)) return {true, false, rs};
  if ((rs == 1 || rows == 1) && cs >= std::max<int64_t>(rows, 1)) return {true, true, cs};
  return {};
}

// Small products without BLAS (its call overhead dominates below ~32k multiply-adds). The loop order follows
// the memory layout so the inner loop runs over contiguous memory and vectorises.
// Note [Dot products in 8 lanes]: a product with one column of output (dot, mv) over contiguous a rows and b column
// sums a[i, p] b[p] in 32 interleaved partial sums (p mod 32: four chains of 8 lanes, so that four independent
// multiply-adds are in flight; one chain of 8 waits 4 cycles for each), added pairwise at the end, then the tail.
// The one running sum of the loops below is a chain of dependent adds, 4 cycles each. float64 dot of 32k elements
// (LBFGS's two-loop recursion): 81 -> ~10 us with one chain of 8 (Xeon family 6 model 167, 1 thread); float32 dot
// of 2M elements: 0.43 ms with one chain, see gemm() for four. The order depends only on k, never on threads.
template <typename T>
T dot_8(const T* x, const T* y, int64_t k) {
  constexpr int L = 32;
  T acc[L] = {};
  int64_t p = 0;
  for (; p + L <= k; p += L)
    for (int j = 0; j < L; ++j) acc[j] += x[p + j] * y[p + j];
  T total = 0;
  for (; p < k; ++p) total += x[p] * y[p];
  for (int width = L / 2; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return total + acc[0];
}

template <typename T>
void small_gemm(int64_t n, int64_t m, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs,
                int64_t bcs, T* c) {
  if (bcs == 1 || brs != 1) {
    // c[i, :] += a[i, p] * b[p, :]   (rows of b contiguous)
    for (int64_t i = 0; i < n; ++i) {
      T* ci = c + i * m;
      for (int64_t j = 0; j < m; ++j) ci[j] = T(0);
      for (int64_t p = 0; p < k; ++p) {
        const T aip = a[i * ars + p * acs];
        const T* bp = b + p * brs;
        if (bcs == 1)
          for (int64_t j = 0; j < m; ++j) ci[j] += aip * bp[j];
        else
          for (int64_t j = 0; j < m; ++j) ci[j] += aip * bp[j * bcs];
      }
    }
  } else {
    // b is column-major (a transposed view): c[i, j] = dot(a[i, :], b[:, j]) over contiguous columns
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        const T* bj = b + j * bcs;
        T acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += a[i * ars + p * acs] * bj[p];
        c[i * m + j] = acc;
      }
  }
}

// Where the own kernel (Note [Own small-product kernel]) beats the BLAS: products up to 2^24 multiply-adds
// (256^3: 1.17x OpenBLAS), and short ones (at most 256 rows) whose a fits L2 (m k <= 2^18 floats), which it reads
// once per strip of 32 columns (32 x 1024 @ 1024 x 1024: 1.35x; 2048 x 128 @ 128 x 512, many rows: 0.83x, so not
// those) -- but not the small products with b's rows contiguous and more than 8 rows of c, from 2^15 (below,
// the BLAS path is a plain loop) to 2^18 multiply-adds: there OpenBLAS's small-matrix kernel was 1.1-1.2x faster
// (64 x 32 @ 32 x 64, 64^3; with b transposed it was 0.63x of the own kernel). Split over the pool's threads
// from 2^20 multiply-adds, where the BLAS path's column panels start (an LSTM step's 32 x 128 @ 128 x 512 is 2^21):
// the bench's LSTM and transformer steps at 2 threads ran 1.02x and 1.10x as fast as on the BLAS path with it,
// 1.06x and 1.01x splitting only from 2^22 (bench/gemm_kernel_ab.py, load 9-12: the difference is noise).
bool own_gemm_pays(int64_t n, int64_t m, int64_t k, bool b_rows_contiguous, bool a_rows_contiguous) {
  // One output column is the lane dot's (gemm's first branch); linear's bias store and the product-and-tangent
  // kernel ask this function too, so refusing here keeps their bits those of matmul (then add) on every path.
  if (m == 1) return false;
  const int64_t work = n * m * k;
  if (b_rows_contiguous && n > 8 && work > 32768 && work <= (int64_t(1) << 18) && g_sgemm != nullptr) return false;
  if (work <= (int64_t(1) << 24) || (n <= 256 && n * k <= (int64_t(1) << 18))) return true;
  // Note [Own kernel for many rows]: the char-level GPT's and the transformer block's products (768-1024 rows,
  // k and the columns 128-512) whose a is at most 1.5 MB (it is read once per strip of 48 columns, from L2). A
  // standalone harness (one thread, Xeon family 6 model 167, 2 cores, KVM, load 8-10, best of 15 interleaved)
  // had the kernel at 150-166 GFLOP/s there, OpenBLAS at 137-147 and MKL (torch) at ~165; bench/gemm_shapes.py's
  // gpt rows, torch/dyngrad at 1 thread before -> after (load 4 and 8, so roughly): x @ W^T 0.79 -> 1.22 (384
  // columns), 0.83 -> 1.10 (512), 0.83 -> 0.97 (512 -> 128); dX = g @ W 0.93 -> 1.02, 0.91 -> 0.97, 0.87 -> 0.99.
  // Not the weight gradients g^T x (a given transposed, k = the 768-1024 rows): there the kernel reached only
  // 108-145 GFLOP/s (a's columns 1.5-4 KB apart; packing a per k block, or per row block, and strips of 64
  // columns in 6-row blocks were all slower still), so they stay on OpenBLAS (torch/dyngrad 0.85-0.94).
  // b at most 1 MB (k m <= 2^18 floats): with the wide MLP's 512 x 784 @ 784 x 1024 and the word LSTM's decoder
  // 700 x 200 @ 200 x 10000 the kernel was 0.75-0.93x OpenBLAS (same harness), so those stay there.
  // Note [a and b within L2]: also where a and b together fit the 2 MB L2 (the transformer block's 1024 x 512 @
  // 512 x 128 products, h @ W2 and g @ W1^T: a 2 MB, b 256 KB). One thread, thread CPU time, the two paths
  // alternating in one process, GFLOP/s OpenBLAS -> own (Xeon family 6 model 167, 2 cores, KVM, load 10, two
  // runs): h @ W2 139-141 -> 146-147, g @ W1^T 134-136 -> 146-156. Not larger: 2048 x 512 x 128 145 -> 129,
  // 1024 x 512 x 512 151 -> 133, 1024 x 1024 x 128 131 -> 132. The transformer-train step: within noise (load 16).
  if (a_rows_contiguous && n <= 4096 && n * k + k * m <= (int64_t(1) << 19) + (int64_t(1) << 16)) return true;
  return a_rows_contiguous && n <= 4096 && n * k < (int64_t(1) << 19) && k * m <= (int64_t(1) << 18);
}
int own_gemm_tasks(int64_t n, int64_t m, int64_t k) { return n * m * k >= (int64_t(1) << 20) ? num_threads() : 1; }

template <typename T>
void gemm(int64_t n, int64_t m, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs,
          int64_t bcs, T* c) {
  if (n == 0 || m == 0) return;
  if (k == 0) {
    std::memset(c, 0, n * m * sizeof(T));
    return;
  }
  // Dot products over contiguous rows of a and a contiguous b (dot, mv, a whole-tensor sum of squares) at every
  // length, by Note [Dot products in 8 lanes], so that a row's bits never depend on the other rows or on the size:
  // a 1 x 1 BLAS gemm packed both vectors first (2M floats: 2.5 ms float32, 3.6 ms float64; dot_8 0.28 / 0.54 ms,
  // torch's dot 0.28 / 0.56; Xeon family 6 model 167, 1 thread, clip_grad_norm_'s norms). Rows split over threads.
  if constexpr (std::is_floating_point_v<T>) {
    if (m == 1 && (acs == 1 || k == 1) && (brs == 1 || k == 1)) {
      const int tasks = n * k >= kBlasThreadWork ? (int)std::min<int64_t>(n, num_threads()) : 1;
      const int64_t per = (n + tasks - 1) / tasks;
      run_parallel(tasks, [&](int t) {
        for (int64_t i = t * per; i < std::min(n, (t + 1) * per); ++i) c[i] = dot_8(a + i * ars, b, k);
      });
      return;
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    if (own_gemm_enabled() && own_gemm_pays(n, m, k, bcs == 1 || m == 1, acs == 1 || k == 1)) {
      own_sgemm(n, m, k, a, ars, acs, b, brs, bcs, c, m, nullptr, own_gemm_tasks(n, m, k));
      return;
    }
  }
  if constexpr (std::is_same_v<T, double>) {  // Note [Own float64 small-product kernel] (gemm_f64_small.cpp)
    // (not one column over contiguous rows of a: Note [Dot products in 8 lanes] gives those dot's bits)
    if (!(m == 1 && acs == 1) && own_dgemm_pays(n, m, k))
      return own_dgemm(n, m, k, a, ars, acs, b, brs, bcs, c, m, num_threads());
  }
  if constexpr (std::is_floating_point_v<T>) {
    // Tiny products: the BLAS call overhead (and its threads) cost more than the arithmetic.
    bool tiny = n * m * k <= 32768;
    MatrixView va = blas_view(n, k, ars, acs), vb = blas_view(k, m, brs, bcs);
    // 32-bit BLAS: every size and leading dimension must fit its ints (else the loop below does the product)
    const int64_t lim = g_ilp64 ? INT64_MAX : INT32_MAX;
    bool fits = va.ok && vb.ok && n < lim && m < lim && k < lim && va.ld < lim && vb.ld < lim;
    const bool have_blas = std::is_same_v<T, float> ? g_sgemm != nullptr : g_dgemm != nullptr;
    if (!tiny && fits && have_blas) {
      // Note [Deterministic matmul]: OpenBLAS's results change with its thread count (its kernels split the work
      // differently), so BLAS runs on one thread (matmul_kernel holds a BlasOneThread, Note [One BLAS]), and
      // large products are split into row panels whose number depends only on the shape (and the machine's core
      // count); each panel is one BLAS call, on whichever of our threads is free.
      // At most one panel per core of the machine (not per thread: the bits must not change with
      // set_num_threads), and at most 8: each panel's BLAS call packs the other operand again, which cost a large
      // product 3-19% on one thread with 8 panels, 0.5-7% with 2 (2 cores, 2026-12-01). A short, wide product (an
      // RNN step's 32 x 128 @ 128 x 512) has too few rows for row panels: it is split into column panels instead,
      // from a smaller size, since its steps run one after another.
      // Note [Panels across the wider side]: each panel's call packs the whole of the operand it does not split
      // again: b (k x m) for row panels, a (n x k) for column panels. So a product with more columns than rows
      // (the wide MLP's 512 x 1024 outputs) is split into column panels, the extra packing a's n k floats
      // instead of b's k m. OpenBLAS on one thread, 1 call against 2 panels (thread CPU time, best of 9, two
      // runs; Xeon family 6 model 167, 2 cores, KVM, load 10): 512 x 784 @ (1024 x 784)^T 0.92 by rows, 0.93-0.94
      // by columns; 512 x 1024 @ (1024 x 1024)^T 0.91 / 0.93-0.94; 512 x 1024 @ 1024 x 1024 0.91 / 0.95-0.96;
      // products with more rows (the weight gradients, 1024 x 512 @ 512 x 784) stay split by rows (0.90-0.93
      // against 0.87-0.89 by columns). Either way the split depends only on the shape.
      const int64_t max_panels = std::min(8, std::max(2, machine_cores()));
      const bool by_columns = m >= 128 && ((n < 128 && n * m * k >= kBlasColumnWork) ||
                                           (m > n && n * m * k >= kBlasThreadWork));
      const int64_t extent = by_columns ? m : n;
      const int64_t panels = by_columns ? std::min<int64_t>(max_panels, std::max<int64_t>(1, m / 64))
                             : n * m * k >= kBlasThreadWork ? std::min<int64_t>(max_panels, (n + 63) / 64) : 1;
      // Note [One call on one thread]: on one thread the panels ran one after another, each packing the operand it
      // does not split again (1024^3: b, 4 MB, twice): numpy/dyngrad 0.95-0.96 at 1024^3 under load 5. OpenBLAS's
      // large-product path gives each output the same chain whatever the rows or columns of the call (its k blocks
      // depend on k alone; checked bit for bit on this OpenBLAS 0.3.31 at 1024^3, 1000 x 777 x 1300, 2048 x 512 x
      // 2048, 513 x 1025 x 700, 300 x 1000 x 4000, 768 x 3000 x 257, by 2 and 8 panels of rows and 2 of
      // columns, and 60 random shapes of 160-1600 a side by 2 and 8 panels of rows and of columns, all four
      // layouts), so one thread makes one call with the panels' bits -- only where every panel has at least 2^22
      // multiply-adds, far above the sizes where OpenBLAS takes its small-matrix kernels (about 100^3), whose
      // chains differ. bench/gemm.py's targets, 1024^3 numpy/dyngrad, one thread, thread CPU time (Xeon family 6
      // model 167, 2 cores, KVM, load 7-8, main's build and this one alternating): 0.95-0.98 -> 1.01-1.03.
      // Only float32 on the CPUs with AVX-512F (where OpenBLAS runs its SkylakeX sgemm kernel,
      // the one checked): its dgemm is not split-invariant (1000 x 777 x 1300 by rows: 0.4% of the outputs differ
      // in the last bits, 4000 x 300 x 301 both ways), and the other CPUs' kernels were not checked.
      // tests/test_gemm_kernel.py's test_one_blas_call_on_one_thread checks the bits; blas_sgemm_split_invariant
      // asks the BLAS in use before the first such call.
      if (std::is_same_v<T, float> && own_gemm_enabled() && panels > 1 && num_threads() == 1 &&
          n * m * k / panels >= kBlasThreadWork && blas_sgemm_split_invariant()) {
        blas_gemm<T>(va.trans, vb.trans, n, m, k, a, va.ld, b, vb.ld, c, m);
        return;
      }
      const int64_t width = (extent + panels - 1) / panels;
      run_parallel((int)panels, [&](int p) {
        const int64_t lo = p * width, hi = std::min(extent, lo + width);
        if (hi <= lo) return;
        if (by_columns)  // columns lo..hi of b (stored row- or column-major) and of c
          blas_gemm<T>(va.trans, vb.trans, n, hi - lo, k, a, va.ld, b + lo * (vb.trans ? vb.ld : 1), vb.ld, c + lo, m);
        else  // rows lo..hi of a (stored row- or column-major) and of c
          blas_gemm<T>(va.trans, vb.trans, hi - lo, m, k, a + lo * (va.trans ? 1 : va.ld), va.ld, b, vb.ld, c + lo * m,
                       m);
      });
      return;
    }
  }
  small_gemm(n, m, k, a, ars, acs, b, brs, bcs, c);
}
}  // namespace

// c = alpha op(a) op(b) + beta c, row-major, for the fused kernels' blocks (attention.cpp): BLAS but for tiny
// blocks (below kLoopGemmWork multiply-adds), where a loop whose inner loop runs over a contiguous row of c (b
// transposed into a scratch first when it is given transposed) saves the call. The loop for GPT-sized attention
// blocks too (64 x 64 x 32, threshold 2^18) made the fused attention 1.4x slower forward and 2-4x backward than
// OpenBLAS (bench/attention.py, Xeon family 6 model 167, 2 cores, KVM, load 9): the BLAS it is, from 4096.
// The caller holds a BlasOneThread when it runs several at once.
constexpr int64_t kLoopGemmWork = 4096;
template <typename T>
void gemm_into(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if constexpr (std::is_same_v<T, float>) {  // Note [Own small-product kernel]: one thread (the caller's task)
    if (own_gemm_enabled() && own_gemm_pays(m, n, k, !tb || n == 1, !ta || k == 1) &&
        own_sgemm_into(m, n, k, alpha, a, ta ? 1 : lda, ta ? lda : 1, b, tb ? 1 : ldb, tb ? ldb : 1, beta, c, ldc,
                       nullptr, 1))
      return;
  }
  void* f = std::is_same_v<T, float> ? g_sgemm : g_dgemm;
  if (f && k > 0 && m * n * k >= kLoopGemmWork) {
    CountedBlasCall counted;  // Note [BLAS calls at exit]
    if (g_ilp64)
      reinterpret_cast<gemm_t<T, int64_t>>(f)(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                                              tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta,
                                              c, ldc);
    else
      reinterpret_cast<gemm_t<T, int32_t>>(f)(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                                              tb ? CblasTrans : CblasNoTrans, (int32_t)m, (int32_t)n, (int32_t)k,
                                              alpha, a, (int32_t)lda, b, (int32_t)ldb, beta, c, (int32_t)ldc);
    return;
  }
  static thread_local std::vector<T> bt;
  if (tb) {  // b is (n, k) row-major: transposed into (k, n)
    bt.resize((size_t)(n * k));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) bt[p * n + j] = b[j * ldb + p];
    b = bt.data();
    ldb = n;
  }
  for (int64_t i = 0; i < m; ++i) {
    T* __restrict ci = c + i * ldc;
    if (beta == T(0))
      for (int64_t j = 0; j < n; ++j) ci[j] = T(0);
    else if (beta != T(1))
      for (int64_t j = 0; j < n; ++j) ci[j] *= beta;
    for (int64_t p = 0; p < k; ++p) {
      const T aip = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);
      const T* __restrict bp = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
    }
  }
}
template void gemm_into<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                               int64_t, float, float*, int64_t);
template void gemm_into<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                                int64_t, double, double*, int64_t);

void set_blas_functions(uintptr_t sgemm, uintptr_t dgemm, uintptr_t set_num_threads, uintptr_t get_num_threads,
                        bool ilp64) {
  static const bool registered = [] {  // once, now that the BLAS is loaded (Notes [BLAS calls at exit], [Forks ...])
    std::atexit(finish_blas_calls_at_exit);
    pthread_atfork(blas_before_fork, blas_after_fork_in_parent, blas_after_fork_in_child);
    return true;
  }();
  (void)registered;
  std::lock_guard<std::mutex> lock(g_blas_mutex);
  g_sgemm = reinterpret_cast<void*>(sgemm);
  g_dgemm = reinterpret_cast<void*>(dgemm);
  g_ilp64 = ilp64;
  g_blas_set_threads = reinterpret_cast<set_threads_t>(set_num_threads);
  g_blas_get_threads = reinterpret_cast<get_threads_t>(get_num_threads);
}
bool blas_loaded() { return g_sgemm != nullptr; }

void set_blas_threads(int n) {
  std::lock_guard<std::mutex> lock(g_blas_mutex);
  if (!g_blas_set_threads || n < 1) return;
  if (g_blas_users > 0)
    g_blas_outside = n;  // a matmul is running on one BLAS thread: n is put back when it ends
  else
    g_blas_set_threads(n);
}

int blas_threads() {
  std::lock_guard<std::mutex> lock(g_blas_mutex);
  if (!g_blas_get_threads) return -1;
  return g_blas_users > 0 ? g_blas_outside : g_blas_get_threads();
}

// Note [Complex matmul as one real product]: a complex a (..., n, k) whose rows are contiguous is, as its (real,
// imag) pairs, a real (..., n, 2k) matrix with no copy. With b rewritten as the real (..., 2k, 2m) matrix whose
// 2x2 block (j, l) is [[re, im], [-im, re]] of b[j, l], the real product (..., n, 2m) is exactly the pairs of
// a @ b: (ar + i ai)(br + i bi) = (ar br - ai bi) + i (ar bi + ai br). One real gemm of 4nkm multiply-adds, the
// work of a cgemm; only b (4km numbers) is copied, and the output is written in place as complex pairs.
// bench/complex_matmul.py, 512x512 complex64, 2026-12-02, 2 cores shared (load 10), medians of 30: numpy's cgemm
// 39 ms, dyngrad 48 ms (1.23x), torch 33 ms with OPENBLAS_NUM_THREADS=1; with numpy's default threads under that
// load numpy 111 ms, dyngrad 44, torch 63: too noisy to call the 1.2x target met or missed.
static Tensor complex_matmul(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in->strides.back() == 1 ? a_in : contiguous_copy(a_in, a_in->dtype);
  Tensor b = contiguous_data(b_in);
  const DType real = complex_value_type(a->dtype);
  const int64_t nb = b->ndim(), k = b->shape[nb - 2], m = b->shape[nb - 1];
  Shape a_shape = a->shape, a_strides;
  a_shape.back() = 2 * k;
  for (int64_t s : a->strides) a_strides.push_back(2 * s);
  a_strides.back() = 1;
  Tensor a_pairs = make_view(a, a_shape, a_strides, 2 * a->offset);
  a_pairs->dtype = real;
  Shape b_shape = b->shape;
  b_shape[nb - 2] = 2 * k;
  b_shape[nb - 1] = 2 * m;
  Tensor b_blocks = empty(b_shape, real);
  const int64_t batches = k * m ? b->numel / (k * m) : 0;
  DG_DISPATCH_COMPLEX(b->dtype, C, {
    using R = typename C::value_type;
    const C* src = b->data<C>();
    R* dst = b_blocks->data<R>();
    for (int64_t i = 0; i < batches; ++i)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t l = 0; l < m; ++l) {
          const C v = src[(i * k + j) * m + l];
          R* top = dst + i * 4 * k * m + (2 * j) * (2 * m) + 2 * l;
          R* bottom = top + 2 * m;
          top[0] = v.real();
          top[1] = v.imag();
          bottom[0] = -v.imag();
          bottom[1] = v.real();
        }
  });
  Tensor out_pairs = matmul_kernel(a_pairs, b_blocks);  // (..., n, 2m), contiguous
  Shape out_shape = out_pairs->shape;
  out_shape.back() = m;
  Tensor out = make_view(out_pairs, out_shape, contiguous_strides(out_shape), 0);
  out->dtype = a->dtype;
  return out;
}

Tensor matmul_kernel(const Tensor& a_in, const Tensor& b_in) {
  if (is_complex(a_in->dtype)) return complex_matmul(a_in, b_in);
  // Matrices whose memory layout BLAS cannot take (broadcast or strided views) are copied first.
  auto blas_ready = [](const Tensor& t) {
    int64_t nd = t->ndim();
    return blas_view(t->shape[nd - 2], t->shape[nd - 1], t->strides[nd - 2], t->strides[nd - 1]).ok;
  };
  Tensor a = blas_ready(a_in) ? a_in : contiguous_copy(a_in, a_in->dtype);
  Tensor b = blas_ready(b_in) ? b_in : contiguous_copy(b_in, b_in->dtype);
  const int64_t na = a->ndim(), nb = b->ndim();
  const int64_t n = a->shape[na - 2], k = a->shape[na - 1], m = b->shape[nb - 1];
  Shape batch_a(a->shape.begin(), a->shape.end() - 2), batch_b(b->shape.begin(), b->shape.end() - 2);
  Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  Shape out_shape = batch;
  out_shape.push_back(n);
  out_shape.push_back(m);
  Tensor out = empty(out_shape, a->dtype);
  const int64_t nbatch = shape_numel(batch);
  if (out->numel == 0) return out;
  const int64_t bd = (int64_t)batch.size();
  // per-batch element offsets of a and b (broadcast batch dims have stride 0)
  auto batch_strides = [&](const Tensor& t) {
    Shape st(bd, 0);
    int64_t off = bd - (t->ndim() - 2);
    for (int64_t d = 0; d < t->ndim() - 2; ++d) st[off + d] = t->shape[d] == 1 ? 0 : t->strides[d];
    return st;
  };
  Shape sa = batch_strides(a), sb = batch_strides(b);
  GilRelease no_gil(n * m * k >= 1 << 18 || (nbatch > 1 && n * m * k * nbatch >= kBlasThreadWork));
  // Note [One BLAS]: one BLAS thread for all of this product's calls (tiny ones never reach the BLAS)
  // (not for products the own kernel computes: raising OpenBLAS's count back costs tens of microseconds, the
  // time of a whole 32 x 128 @ 128 x 512 product)
  const bool own = (a->dtype == DType::Float32 && own_gemm_enabled() &&
                    own_gemm_pays(n, m, k, b->strides[nb - 1] == 1 || m == 1, a->strides[na - 1] == 1 || k == 1)) ||
                   (a->dtype == DType::Float64 && own_dgemm_pays(n, m, k));
  BlasOneThread one_blas_thread((a->dtype == DType::Float32 || a->dtype == DType::Float64) && n * m * k > 32768 &&
                                !own);
  auto one_batch = [&](int64_t i) {
    int64_t oa = 0, ob = 0, rem = i;
    for (int64_t d = bd - 1; d >= 0; --d) {
      const int64_t j = rem % batch[d];
      rem /= batch[d];
      oa += j * sa[d];
      ob += j * sb[d];
    }
    DG_DISPATCH_ALL(a->dtype, T, {
      if constexpr (std::is_same_v<T, bool>) {
        throw TypeError("matmul: not supported for bool tensors.");
      } else {
        gemm<T>(n, m, k, a->data<T>() + oa, a->strides[na - 2], a->strides[na - 1], b->data<T>() + ob,
                b->strides[nb - 2], b->strides[nb - 1], out->data<T>() + i * n * m);
      }
    });
  };
  // Note [Parallel batches]: a batch of products too small to split (attention's per-head 64x32 @ 32x64) is
  // split by batch instead, one batch per task. Each product is still one gemm whose panels depend only on the
  // shape (Note [Deterministic matmul]; nested, they run on the task's thread), so the bits do not depend on
  // the thread count. Same work threshold as a single product's split.
  const int threads = num_threads();
  if (nbatch > 1 && threads > 1 && n * m * k * nbatch >= kBlasThreadWork && a->dtype != DType::Bool) {
    const int tasks = (int)std::min<int64_t>(nbatch, threads);
    const int64_t per = (nbatch + tasks - 1) / tasks;
    run_parallel(tasks, [&](int t) {
      for (int64_t i = t * per; i < std::min(nbatch, (t + 1) * per); ++i) one_batch(i);
    });
  } else {
    for (int64_t i = 0; i < nbatch; ++i) one_batch(i);
  }
  return out;
}

// Note [A product and its tangent in one call] (gemm_avx512.cpp): a @ b and ta @ b for 2-D float32 a, ta of one
// shape, where matmul_kernel would take the own kernel for both (the same choice, so the same bits as two calls).
bool matmul_pair_kernel(const Tensor& a, const Tensor& ta, const Tensor& b, Tensor* out, Tensor* tout) {
  if (a->dtype != DType::Float32 || ta->dtype != DType::Float32 || b->dtype != DType::Float32 || a->ndim() != 2 ||
      ta->ndim() != 2 || b->ndim() != 2 || ta->shape != a->shape || !own_gemm_enabled())
    return false;
  const int64_t n = a->shape[0], k = a->shape[1], m = b->shape[1];
  if (n == 0 || m == 0 || k == 0 || b->shape[0] != k) return false;
  // matmul_kernel copies a b the BLAS cannot take to a contiguous one (rows contiguous) before choosing
  const bool b_ready = blas_view(k, m, b->strides[0], b->strides[1]).ok;
  auto rows_contiguous = [&](const Tensor& x) {  // as matmul_kernel sees x (a copy when the BLAS cannot take it)
    return !blas_view(n, k, x->strides[0], x->strides[1]).ok || x->strides[1] == 1 || k == 1;
  };
  const bool b_rows = !b_ready || b->strides[1] == 1 || m == 1;
  if (!own_gemm_pays(n, m, k, b_rows, rows_contiguous(a)) || !own_gemm_pays(n, m, k, b_rows, rows_contiguous(ta)))
    return false;
  *out = empty({n, m}, DType::Float32);
  *tout = empty({n, m}, DType::Float32);
  GilRelease no_gil(n * m * k >= 1 << 18);
  own_sgemm_pair(n, m, k, a->data<float>(), a->strides[0], a->strides[1], ta->data<float>(), ta->strides[0],
                 ta->strides[1], b->data<float>(), b->strides[0], b->strides[1], (*out)->data<float>(),
                 (*tout)->data<float>(), own_gemm_tasks(n, m, k));
  return true;
}

// Note [Bias in the product's last store]: linear's x @ W^T + b was the product, then a second pass over its
// output for the add (the row-broadcast binary loop): 9-12% of the GPT-sized linears' forward (768 x 128 @
// (384 or 512 x 128)^T, 1 thread; torch's addmm pays 3.6-4%), since the own kernel already adds a bias after the
// sum in its last store (Note [Own small-product kernel]). Here the product takes it: each output is
// (chain of fused multiply-adds) + b[j], the one float add the separate pass made, so the bits are those of
// matmul_kernel then add. Only where matmul_kernel would take the own kernel (the BLAS path has no such store).
// ops_math.cpp's matmul_add records the product's and the add's nodes around it, as the two ops would. The cost of
// the bias, linear with against without, 1 thread, thread CPU time, best of 9 (Xeon family 6 model 167, 2 cores,
// KVM, load 11): 768 x 128 -> 512 +8.7% -> +1.6-2.1%, 768 x 128 -> 384 +12.4% -> +3.1-4.6%, 32 x 128 -> 512
// +6.6% -> +5-9% (noise: 2 us of 40), torch's +4-15% on the same. The char-level GPT's step (gpt-train-1t) against
// the same step with F.linear as x @ w.mT + b, bench/linear_bias_ab.py: apart/fused 1.00-1.07, median 1.025 (five
// runs, process CPU time, load 6-9).
bool matmul_bias_kernel(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor* out) {
  if (a->dtype != DType::Float32 || b->dtype != DType::Float32 || bias->dtype != DType::Float32 || a->ndim() != 2 ||
      b->ndim() != 2 || bias->ndim() != 1 || !own_gemm_enabled())
    return false;
  const int64_t n = a->shape[0], k = a->shape[1], m = b->shape[1];
  if (n == 0 || m == 0 || k == 0 || b->shape[0] != k || bias->shape[0] != m) return false;
  // as matmul_kernel sees them: operands the BLAS cannot take are copied there first (not here: not taken)
  if (!blas_view(n, k, a->strides[0], a->strides[1]).ok || !blas_view(k, m, b->strides[0], b->strides[1]).ok)
    return false;
  if (!own_gemm_pays(n, m, k, b->strides[1] == 1 || m == 1, a->strides[1] == 1 || k == 1)) return false;
  Tensor bc = bias->strides[0] == 1 || m == 1 ? bias : contiguous_copy(bias, DType::Float32);
  *out = empty({n, m}, DType::Float32);
  GilRelease no_gil(n * m * k >= 1 << 18);
  own_sgemm(n, m, k, a->data<float>(), a->strides[0], a->strides[1], b->data<float>(), b->strides[0], b->strides[1],
            (*out)->data<float>(), m, bc->data<float>(), own_gemm_tasks(n, m, k));
  return true;
}

}  // namespace dyngrad
