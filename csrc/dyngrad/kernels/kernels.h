// kernels.h: raw loops over tensors, no autograd. Ops (ops_*.cpp) check arguments, then call these.
// Large kernels release the GIL and use every core (thread_pool.h) above parallel_grain() elements.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "../tensor.h"

namespace dyngrad {

// Below this many elements (32768 by default; a quarter of it for exp-like ops), splitting a kernel across threads
// costs more than it saves: bench/parallel_grain.py measures the crossover. A setting, not a constant, only so that
// the bench can move it (_C._set_parallel_grain); atomic, as kernels on other threads read it meanwhile.
extern std::atomic<int64_t> g_parallel_grain;
inline int64_t parallel_grain() { return g_parallel_grain.load(std::memory_order_relaxed); }
inline void set_parallel_grain(int64_t n) { g_parallel_grain.store(n, std::memory_order_relaxed); }

enum class UnaryKind {
  // the kernels of ops.def's DG_KERNEL_OP lines (their forwards are generated: ops_common.h)
#define DG_KERNEL_OP(name, display, saves, signature, hot, kernel) kernel,
#include "../ops.def"
  // the kernels of hand-written forwards
  Neg, LeakyRelu, Softplus, PowScalar, Not, IsNan, IsFinite,
};
// Of the kernels above, those of a unary op's derivative f' (the `unary_backward` signature of ops.def):
// TanhGradFromOut 1 - y*y, SigmoidGradFromOut y (1 - y), GeluGrad Phi(x) + x phi(x), ReluMask x <= 0 ? 0 : 1
// (NaN: 1). unary_kernel computes f'(x); unary_grad_kernel grad * f'(x) in one pass.
// out = f(a) elementwise, computed in out_dtype (a is converted first when its dtype differs).
Tensor unary_kernel(UnaryKind k, const Tensor& a, DType out_dtype, double p0 = 0, double p1 = 0);
// out = grad * f(a) for a derivative helper f (TanhGradFromOut ... ReluMask) in one pass, for grad and a
// contiguous, of one shape and of one dtype, float32 or float64 (unary_grad_fusable).
bool unary_grad_fusable(const Tensor& grad, const Tensor& a);
Tensor unary_grad_kernel(UnaryKind k, const Tensor& grad, const Tensor& a);

// Remainder: a - floor(a / b) b (the divisor's sign, as Python's %); Fmod: a - trunc(a / b) b (C's fmod); an integer
// divisor 0 gives 0 (the ops refuse it first: has_zero_kernel). FloorDivide / TruncDivide: the quotients their
// gradients read, floating point only (FloorDivide rounds as numpy's floor_divide).
enum class BinaryKind {
  Add, Sub, Mul, Div, Pow, Maximum, Minimum, Atan2, Remainder, Fmod, FloorDivide, TruncDivide,
  Eq, Ne, Lt, Le, Gt, Ge, And, Or, Xor
};
// out = a (op) b with broadcasting; inputs are converted to compute_dtype; comparisons give bool.
Tensor binary_kernel(BinaryKind k, const Tensor& a, const Tensor& b, DType compute_dtype, const char* op);
// Whether some element of t is zero (the integer divisors of remainder and fmod).
bool has_zero_kernel(const Tensor& t);
// dst += src in place (same shape, same floating dtype); dst may be a strided view. For the engine's own buffers.
void add_into_kernel(const Tensor& dst, const Tensor& src);
// dst = dst (op) other in place, other broadcast to dst (float32/float64 of one dtype; the caller checks overlap).
void binary_into_kernel(BinaryKind k, const Tensor& dst, const Tensor& other);
// dst += other * alpha in place (contiguous, one shape, float32/float64 of one dtype), rounding as mul then add.
void add_scaled_into_kernel(const Tensor& dst, const Tensor& other, double alpha);
// out = cond ? a : b (cond bool; a, b already of the result dtype), broadcast.
Tensor where_kernel(const Tensor& cond, const Tensor& a, const Tensor& b, const char* op);
// out = clamp(a, lo, hi); NaN bounds mean no bound.
Tensor clamp_kernel(const Tensor& a, double lo, double hi);
// Fused y = a * x + b... reserved.

enum class ReduceKind { Sum, Max, Min, ArgMax, ArgMin, LogSumExp };
// Reduces over `dims` (sorted, unique, wrapped; empty = none). Result dtype: Arg* -> int64; Sum of bool/int ->
// int64; else a's dtype. keepdim keeps reduced dims as size 1.
Tensor reduce_kernel(ReduceKind k, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim);

// out = the running sum of a along d (wrapped), from the end if reverse, in a's dtype (float32, float64, int64,
// the halves): float32 accumulates in double, the halves in float32 (torch's CPU acc types), int64 wraps.
Tensor cumsum_kernel(const Tensor& a, int64_t d, bool reverse);
// The running product (accumulated as cumsum's: float32 in double, int64 wrapping) and the running
// log(sum(exp)) (float32, float64 or a half type), in a's dtype.
Tensor cumprod_kernel(const Tensor& a, int64_t d, bool reverse);
Tensor logcumsumexp_kernel(const Tensor& a, int64_t d, bool reverse);
// y_k = b_k + c_k y_{k-1} along d (y_{k+1} from the end if reverse; the first y is b's), b and c of one shape and
// floating dtype; float32 accumulates in double.
Tensor linear_recurrence_kernel(const Tensor& b, const Tensor& c, int64_t d, bool reverse);
// The int64 index along d of the running max (min) of a: the latest position holding it (torch updates on >=, <=);
// a NaN, once seen, stays the extremum, its index the latest NaN's.
// With `values`, also the running extremum's elements into *values where a's dtype is the one it computes in
// (float32, float64, int64: the elements themselves, as gather would copy them), else *values is left empty.
Tensor cumulative_extremum_index_kernel(const Tensor& a, int64_t d, bool is_max, Tensor* values = nullptr);

// softmax / log_softmax over dim (Note [Softmax in float32] in reduce.cpp), and their backward given the output:
// the gradient with respect to the input, out and grad of one shape and floating dtype.
Tensor softmax_kernel(const Tensor& a, int64_t dim, bool log);
// log_softmax(rows)[i, target[i]] for each row of a contiguous (N, C) rows, 0 where target[i] == ignore_index
// (Note [Cross entropy without the log_softmax] in reduce.cpp)
Tensor log_softmax_at_kernel(const Tensor& rows, const int64_t* target, int64_t ignore_index);
Tensor softmax_backward_kernel(const Tensor& grad, const Tensor& out, int64_t dim, bool log);

// The indexing loops (index.cpp), over contiguous operands and int64 indices the op checked to be in range.
// index_select: out[.., i, ..] = a[.., index[i], ..] along d; index_add: zeros(out_shape) with src's rows added at
// index along d (its adjoint). gather: out[i][j] = a[i][index[i][j]] (d = 1); scatter_add: zeros(out_shape) with
// out[i][index[i][j]] += src[i][j] (its adjoint). take: a.flat[positions]; put: out.flat[positions] = v (out is
// written in place, v of positions' shape); put_add: zeros(out_shape) with v added at flat positions.
Tensor index_select_kernel(const Tensor& a, int64_t d, const Tensor& index);
Tensor index_add_kernel(const Tensor& src, int64_t d, const Tensor& index, const Shape& out_shape);
Tensor gather_kernel(const Tensor& a, int64_t d, const Tensor& index);
Tensor scatter_add_kernel(const Tensor& src, int64_t d, const Tensor& index, const Shape& out_shape);
Tensor take_kernel(const Tensor& a, const Tensor& positions);
void put_kernel(const Tensor& out, const Tensor& positions, const Tensor& v);
Tensor put_add_kernel(const Tensor& v, const Tensor& positions, const Shape& out_shape);
// The flat position in `base` (contiguous) of each element of `view`, a view of it: the view's index map.
Tensor view_positions_kernel(const Tensor& view, const Tensor& base);

// Batched matrix product of a (..., n, k) and b (..., k, m) with batch broadcasting (both at least 2-D, same
// dtype). Uses the loaded BLAS for float32/float64.
Tensor matmul_kernel(const Tensor& a, const Tensor& b);
// *out = a @ b and *tout = ta @ b (a, ta 2-D float32 of one shape, b 2-D) in one pass of the own kernel over b
// (Note [A product and its tangent in one call] in gemm_avx512.cpp), with matmul_kernel's bits; false, computing
// nothing, where matmul_kernel would not take the own kernel.
bool matmul_pair_kernel(const Tensor& a, const Tensor& ta, const Tensor& b, Tensor* out, Tensor* tout);
// *out = a @ b + bias (a (n, k), b (k, m) float32, bias (m,) float32) with the bias added in the own kernel's last
// store (Note [Bias in the product's last store] in matmul.cpp): the bits of matmul_kernel then add. False,
// computing nothing, where matmul_kernel would not take the own kernel.
bool matmul_bias_kernel(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor* out);
// BLAS entry points, found by python/dyngrad/_cpp_blas.py: cblas_sgemm, cblas_dgemm (64-bit integer arguments
// when ilp64) and openblas_set_num_threads / openblas_get_num_threads of the same library (0 when absent).
void set_blas_functions(uintptr_t sgemm, uintptr_t dgemm, uintptr_t set_num_threads, uintptr_t get_num_threads,
                        bool ilp64);
bool blas_loaded();
// The thread count of the BLAS outside dyngrad's own calls (numpy's products, when the library is numpy's: Note
// [One BLAS] in matmul.cpp). dg.set_num_threads sets it; -1 when the library gives no thread control.
void set_blas_threads(int n);
int blas_threads();
// While one lives, the BLAS runs on one thread (dyngrad's products split work over its own threads: Note [One BLAS]
// in matmul.cpp); nested ones share the lowering. Each matmul_kernel holds one; a loop of many small products (an
// RNN's steps) holds one around the loop, so that the BLAS's thread count is set twice, not twice per step
// (openblas_set_num_threads costs tens of microseconds when it raises the count).
class BlasOneThread {
 public:
  explicit BlasOneThread(bool needed = true);
  ~BlasOneThread();
  BlasOneThread(const BlasOneThread&) = delete;
  BlasOneThread& operator=(const BlasOneThread&) = delete;

 private:
  bool active_;
};

// dyngrad's own float32 product kernel (kernels/gemm_avx512.cpp, Note [Own small-product kernel]), on CPUs with
// AVX-512F: c (m x n, row stride ldc) = a (m x k, element strides ars, acs) @ b (k x n, strides brs, bcs), plus
// bias[j] (length n, or null) after the sum; split over up to max_tasks of the pool's threads (same bits).
bool own_gemm_enabled();
const char* gemm_kernel_name();
// "auto" (own kernel where the CPU has AVX-512F), "avx512" (false if the CPU lacks it), "blas" (the BLAS path
// everywhere, as on other CPUs); false for an unknown name. DYNGRAD_GEMM=blas at import chooses "blas".
bool set_gemm_kernel(const std::string& name);
void own_sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b,
               int64_t brs, int64_t bcs, float* c, int64_t ldc, const float* bias, int max_tasks);
// c1 = a1 @ b and c2 = a2 @ b (a1, a2: m x k, any strides; c1, c2: m x n contiguous) in one pass over b's packed
// strips, each with own_sgemm's bits (Note [A product and its tangent in one call]).
void own_sgemm_pair(int64_t m, int64_t n, int64_t k, const float* a1, int64_t a1rs, int64_t a1cs, const float* a2,
                    int64_t a2rs, int64_t a2cs, const float* b, int64_t brs, int64_t bcs, float* c1, float* c2,
                    int max_tasks);
// For many products by one b (rnn.cpp's recurrent steps): b (k x n, strides brs, bcs) packed once into the own
// kernel's column strips, then c (m x n, row stride ldc) = a (m x k, strides ars, acs) @ b on the calling thread.
// Only when own_gemm_enabled().
struct OwnPackedB {
  int64_t k = 0, n = 0;
  std::vector<float> data;
};
void own_pack_b(const float* b, int64_t k, int64_t n, int64_t brs, int64_t bcs, OwnPackedB* out);
void own_sgemm_packed(int64_t m, const float* a, int64_t ars, int64_t acs, const OwnPackedB& b, float* c,
                      int64_t ldc);

// dyngrad's own float64 kernel for small products (kernels/gemm_f64_small.cpp, Note [Own float64 small-product
// kernel]), where own_gemm_enabled(): c (m x n, row stride ldc) = a (m x k, element strides ars, acs) @ b (k x n,
// strides brs, bcs), c written without being read (nor cleared first); split by column strips over up to max_tasks
// of the pool's threads (same bits). own_dgemm_pays: the sizes where it beats the BLAS (false where not enabled).
bool own_dgemm_pays(int64_t m, int64_t n, int64_t k);
void own_dgemm(int64_t m, int64_t n, int64_t k, const double* a, int64_t ars, int64_t acs, const double* b,
               int64_t brs, int64_t bcs, double* c, int64_t ldc, int max_tasks);
// b packed once for many products by it (rnn.cpp's recurrent steps), then products on the calling thread.
struct OwnPackedBf64 {
  int64_t k = 0, n = 0;
  std::vector<double> data;
};
void own_pack_b_f64(const double* b, int64_t k, int64_t n, int64_t brs, int64_t bcs, OwnPackedBf64* out);
void own_dgemm_packed(int64_t m, const double* a, int64_t ars, int64_t acs, const OwnPackedBf64& b, double* c,
                      int64_t ldc);

// c = alpha op(a) op(b) + beta c (row-major, leading dims lda/ldb/ldc): BLAS, or a loop for tiny blocks
template <typename T>
void gemm_into(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc);

// Fused scaled-dot-product attention (Note [Fused attention] in ops_nn.cpp; kernels/attention.cpp). q (.., Lq, E),
// k (.., Lk, E), v (.., Lk, Ev) float32/float64 with contiguous rows (any row and batch strides) whose batch dims
// broadcast to `batch`; mask null or an additive mask of q's dtype broadcasting to batch + (Lq, Lk), any strides;
// out (batch.., Lq, Ev) with contiguous rows, not overlapping (Note [Attention outputs in the heads' layout] in
// ops_nn.cpp), and lse (batch.., Lq) contiguous, written. Dropout p with the seed: Note [Dropout inside attention].
void attention_kernel(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Shape& batch,
                      bool causal, double scale, double p, int64_t seed, const Tensor& out, const Tensor& lse);
// Its gradients dq, dk, dv (each null to skip; shapes batch + q's, k's, v's last two dims, rows contiguous, not
// overlapping), from grad and the forward's out (rows contiguous) and lse (contiguous).
void attention_backward_kernel(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& mask, const Tensor& out, const Tensor& lse, const Shape& batch,
                               bool causal, double scale, double p, int64_t seed, const Tensor& dq, const Tensor& dk,
                               const Tensor& dv);
// The dropout factors of the kernels' mask, batch + (Lq, Lk): 1 / (1 - p) where kept, else 0
Tensor attention_keep_scale_kernel(const Shape& batch, int64_t Lq, int64_t Lk, double p, int64_t seed, DType dtype);
// (Lq, Lk): 0 where j <= i, else -inf
Tensor attention_causal_bias_kernel(int64_t Lq, int64_t Lk, DType dtype);

// im2col / col2im for (N, C, H, W) inputs, with dilation (dh, dw). im2col gives (N, C*kh*kw, L), contiguous, or
// with batch_inner the same values in (C*kh*kw, N, L) memory, strides (L, N*L, 1) (conv2d's, Note [Columns layout]
// in conv.cpp); col2im reads columns whose last dim is contiguous in place, any other layout after a copy.
Tensor im2col_kernel(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                     int64_t dh = 1, int64_t dw = 1, bool batch_inner = false);
Tensor col2im_kernel(const Tensor& cols, const Shape& input_shape, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                     int64_t ph, int64_t pw, int64_t dh = 1, int64_t dw = 1);
// The flat position in x (N, C, H, W) of each (kh, kw) window's maximum, (N, C, OH, OW) int64; padded taps never
// win (Note [Max pooling by positions]).
Tensor max_pool2d_positions_kernel(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                   int64_t pw);

// layer_norm over rows of length D (x contiguous, (rows, D)); weight and bias null or of D elements. The backward
// computes dx and, where asked (non-null outputs), dweight = sum over rows of grad * xhat and dbias = sum of grad.
void layer_norm_kernel(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t D, double eps,
                       const Tensor& out);
void layer_norm_backward_kernel(const Tensor& grad, const Tensor& x, const Tensor& weight, int64_t D, double eps,
                                const Tensor& dx, const Tensor& dweight, const Tensor& dbias);

// The cell of an rnn_layer (ops.h): its `mode` argument.
enum RnnMode : int64_t { kRnnTanh = 0, kRnnRelu = 1, kLstm = 2, kGru = 3 };
// How many gate blocks of H its gi and w_hh have.
inline int64_t rnn_gates(int64_t mode) { return mode == kLstm ? 4 : mode == kGru ? 3 : 1; }

// rnn_layer's loops (rnn.cpp; Note [Whole-sequence RNN layer] in ops_nn.cpp), over contiguous tensors: gi (L, N, G*H),
// h0 and c0 (N, H; c0 null unless LSTM), w (G*H, H), b (G*H) or null; mode an RnnMode. The
// forward fills out (S, L, N, H) and ws (the gate activations; null for RNN). The backward takes the contiguous
// gradient of out and computes the gradients that need[i] asks for (db only with a bias).
void rnn_layer_forward_kernel(const Tensor& gi, const Tensor& h0, const Tensor& c0, const Tensor& w, const Tensor& b,
                              int64_t mode, bool reverse, const Tensor& out, const Tensor& ws);
struct RnnLayerGrads {
  Tensor dgi, dh0, dc0, dw, db;
};
RnnLayerGrads rnn_layer_backward_kernel(const Tensor& grad, const Tensor& h0, const Tensor& c0, const Tensor& w,
                                        bool has_bias, const Tensor& out, const Tensor& ws, int64_t mode,
                                        bool reverse, const bool need[5]);

// cross_entropy's loops (loss.cpp), over logits (N, C) and int64 targets (N,) already checked to be in [0, C) or
// ignore_index. The forward gives each row's loss -(1-ls) logp[i, t_i] - ls/C sum_c logp[i, c] (0 for an ignored
// row) from logp = log_softmax(logits) and counts the rows kept. The backward gives
// (softmax(logits) - q) * keep * scale per row: q the label-smoothed one-hot target, keep 0 for an ignored row,
// scale grad[i] (reduction 0, grad of N elements), grad / kept rows (1, mean) or grad (2, sum).
Tensor cross_entropy_kernel(const Tensor& logp, const Tensor& target, int64_t ignore_index, double label_smoothing,
                            int64_t& kept);
Tensor cross_entropy_backward_kernel(const Tensor& grad, const Tensor& logits, const Tensor& target, int64_t reduction,
                                     int64_t ignore_index, double label_smoothing);
// The target as the formulas use it: q (N, C) and keep (N, 1) in `dtype`, and the number of rows kept.
struct CrossEntropyTarget {
  Tensor q, keep;
  int64_t kept;
};
CrossEntropyTarget cross_entropy_target_kernel(const Tensor& target, int64_t C, int64_t ignore_index,
                                               double label_smoothing, DType dtype);

// Strided iteration over up to 4 operands of one broadcast shape: the shared engine of elementwise kernels.
// fn(char* ptrs[N], const int64_t byte_strides[N], int64_t n) is called for each innermost row.
struct StridedLoop {
  static constexpr int kMax = 4;
  int nops = 0;
  Shape shape;                                // coalesced
  std::array<Shape, kMax> strides;            // in bytes, per operand, coalesced
  std::array<char*, kMax> base{};
  int64_t numel = 0;
  // operands[0] is the output (its shape is the loop shape); inputs broadcast to it.
  StridedLoop(const std::vector<const TensorImpl*>& operands);
  template <typename F>
  void run(F&& fn, bool parallel_ok) const;
  bool is_contiguous_all(const std::vector<int64_t>& itemsizes) const;
};

}  // namespace dyngrad
