// ops.h: every differentiable op's C++ entry point. Each one checks its inputs (errors name the op, shapes and
// dtypes), runs a kernel, and records an OpNode when grad mode is on and an input requires grad.
// Primitives (ops.def) have a derivative in derivatives.cpp; composites are built from primitives here and need
// none. Python binds these functions directly (bindings/ops_bind.cpp).
#pragma once
#include <array>
#include <optional>
#include <vector>

#include "tensor.h"

namespace dyngrad {

// ---- the primitives whose signature ops.def names (unary, binary, reduction...), declared from it ----
#define DG_DECLARE_unary(name) Tensor name(const Tensor& a);
#define DG_DECLARE_unary_float(name) Tensor name(const Tensor& a);
#define DG_DECLARE_unary_backward(name) Tensor name(const Tensor& grad, const Tensor& x);
#define DG_DECLARE_binary(name) Tensor name(const Tensor& a, const Tensor& b);
#define DG_DECLARE_binary_tensors(name) Tensor name(const Tensor& a, const Tensor& b);
#define DG_DECLARE_reduction(name) Tensor name(const Tensor& a, const Dims& dims, bool keepdim);  // dims empty: all
#define DG_DECLARE_custom(name)
#define DG_OP(name, display, saves, signature, hot) DG_DECLARE_##signature(name)
#include "ops.def"
#undef DG_DECLARE_unary
#undef DG_DECLARE_unary_float
#undef DG_DECLARE_unary_backward
#undef DG_DECLARE_binary
#undef DG_DECLARE_binary_tensors
#undef DG_DECLARE_reduction
#undef DG_DECLARE_custom

// ---- the custom-signature primitives and the composites, by family ----

// ---- arithmetic (ops_math.cpp) ----
Tensor pow_scalar(const Tensor& a, double p);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor clamp(const Tensor& a, std::optional<double> lo, std::optional<double> hi);
// the running sum along dim (from the end if reverse): float32, float64, int64 or a half type
Tensor cumsum(const Tensor& a, int64_t dim, bool reverse);
// the running product and log(sum(exp)) along dim (from the end if reverse), and y_k = b_k + c_k y_{k-1}
// (y_{k+1} if reverse), the recurrence the formulas of both are made of
Tensor cumprod(const Tensor& a, int64_t dim, bool reverse);
Tensor logcumsumexp(const Tensor& a, int64_t dim, bool reverse);
Tensor linear_recurrence(const Tensor& b, const Tensor& c, int64_t dim, bool reverse);
// t moved one place along a scan (out_k = t_{k-1}, t_{k+1} if reverse), `fill` where the scan starts
Tensor scan_shift(const Tensor& t, int64_t d, bool reverse, double fill);
// Scalar forms: the scalar becomes a 0-d tensor of the dtype the result will have (a Python number never
// widens a float tensor).
Tensor scalar_like(const Tensor& t, double v, bool is_integral);
Tensor scalar_like_complex(const Tensor* t, double re, double im);
// A Python int as an operand, exact in int64 (the bindings use it for every int: 2**53 + 1 stays odd).
Tensor scalar_like_int(const Tensor& t, int64_t v);
// The dtype of a binary op's result (torch's promotion with 0-d operands ranked below tensors with dims).
DType result_type(const Tensor& a, const Tensor& b);
Tensor mul_scalar(const Tensor& a, double s);
Tensor add_scalar(const Tensor& a, double s);
// add(matmul(a, b), bias), the bias added in the product's last store where the own kernel computes it (linear)
Tensor matmul_add(const Tensor& a, const Tensor& b, const Tensor& bias);

// ---- unary (ops_math.cpp) ----
Tensor leaky_relu(const Tensor& a, double negative_slope);
Tensor softplus(const Tensor& a, double beta, double threshold);

// ---- comparisons and logic (no grad; bool results) ----
enum class CompareOp { Eq, Ne, Lt, Le, Gt, Ge };
Tensor compare(CompareOp op, const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
Tensor isnan(const Tensor& a);
Tensor isfinite(const Tensor& a);

// ---- reductions (ops_math.cpp) ----
// dims empty = all dims.
Tensor sum(const Tensor& a, const Dims& dims, bool keepdim, std::optional<DType> dtype = std::nullopt);
Tensor var(const Tensor& a, const Dims& dims, double correction, bool keepdim);
Tensor std_(const Tensor& a, const Dims& dims, double correction, bool keepdim);
Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim);
// Sums `t` down to `shape` (undoing broadcasting): the engine's Note [Unbroadcast].
Tensor sum_to(const Tensor& t, const Shape& shape);

// ---- conversion and movement (ops_shape.cpp) ----
Tensor to_dtype(const Tensor& a, DType dtype);
Tensor contiguous(const Tensor& a);
Tensor reshape(const Tensor& a, const Shape& shape);  // one -1 allowed
Tensor view(const Tensor& a, const Shape& shape);     // like reshape, but never copies
Tensor permute(const Tensor& a, const Dims& dims);
Tensor transpose(const Tensor& a, int64_t d0, int64_t d1);
Tensor mT(const Tensor& a);  // transpose of the last two dims
Tensor expand(const Tensor& a, const Shape& shape);  // -1 keeps a size
Tensor squeeze(const Tensor& a, std::optional<Dims> dims);
Tensor unsqueeze(const Tensor& a, int64_t dim);
Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim);
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t stop, int64_t step);  // python semantics
Tensor slice_scatter(const Tensor& grad, const Shape& input_shape, int64_t dim, int64_t start, int64_t step);
Tensor select(const Tensor& a, int64_t dim, int64_t index);
Tensor cat(const std::vector<Tensor>& ts, int64_t dim);
Tensor stack(const std::vector<Tensor>& ts, int64_t dim);
std::vector<Tensor> split(const Tensor& a, const Dims& sizes, int64_t dim);
std::vector<Tensor> split_size(const Tensor& a, int64_t size, int64_t dim);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim);

// ---- indexing (ops_index.cpp) ----
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
Tensor index_add(const Tensor& src, int64_t dim, const Tensor& index, const Shape& out_shape);
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& src, int64_t dim, const Tensor& index, const Shape& out_shape);
Tensor take(const Tensor& a, const Tensor& positions);  // positions: int64 flat indices into a
Tensor put(const Tensor& a, const Tensor& positions, const Tensor& v);
Tensor put_add(const Tensor& v, const Tensor& positions, const Shape& out_shape);
Tensor masked_fill(const Tensor& a, const Tensor& mask, const Tensor& value);

// ---- in-place (inplace.cpp): bump the version; record history as torch does (grad_fn moves to the new node) ----
// Computes `result` out of place and writes it into `self`; `op` names the in-place op in errors.
void assign_inplace(const Tensor& self, const Tensor& result, const char* op);
void copy_(const Tensor& self, const Tensor& src);
void fill_(const Tensor& self, double value);
void fill_(const Tensor& self, const Tensor& value);  // a 0-d value (exact for a Python int: scalar_like_int)
void zero_(const Tensor& self);
// The value of `self` before an in-place op, with self's history: what the out-of-place op is computed from.
Tensor inplace_input(const Tensor& self, const char* op, bool other_requires_grad);
enum class BinaryKind;  // kernels/kernels.h
// self = self (op) other [* alpha] computed straight into self when no graph and no tangent is involved and the
// dtypes and shapes allow it (Note [In-place arithmetic without a temporary]); false: take the general path.
bool binary_inplace_without_graph(BinaryKind k, const Tensor& self, const Tensor& other, const double* alpha,
                                  const char* op);

// ---- neural-net primitives (ops_nn.cpp) ----
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);
// reduction: 0 none, 1 mean, 2 sum. Targets: int64 class indices, ignore_index is skipped.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t reduction, int64_t ignore_index,
                     double label_smoothing);
// unfold = im2col, fold = col2im (its adjoint), with dilation (dh, dw); conv2d = grouped weight @ unfold(x).
Tensor unfold(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
              int64_t dh = 1, int64_t dw = 1);
Tensor fold(const Tensor& cols, const Shape& input_shape, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
            int64_t ph, int64_t pw, int64_t dh = 1, int64_t dw = 1);
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
              int64_t dh = 1, int64_t dw = 1, int64_t groups = 1);
// (x - mean) / sqrt(var + eps) * weight + bias over x's last `ndims` dims (Note [Fused layer_norm]); weight and
// bias are null or of exactly those dims' shape.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t ndims, double eps);
// One RNN (mode 0 tanh, 1 relu), LSTM (2) or GRU (3) layer over a whole sequence, from the input projection gi
// (L, N, G*H); c0 and b_hh may be null (c0 is given exactly for an LSTM). Returns (S, L, N, H): the hidden state
// after each step, and for an LSTM (S = 2) the cell state. Note [Whole-sequence RNN layer] in ops_nn.cpp.
Tensor rnn_layer(const Tensor& gi, const Tensor& h0, const Tensor& c0, const Tensor& w_hh, const Tensor& b_hh,
                 int64_t mode, bool reverse);
// softmax(scale q k^T + mask) v, fused (Note [Fused attention] in ops_nn.cpp): mask null, bool (True takes part)
// or additive; is_causal masks keys j > i; dropout_p > 0 drops weights by the hash of seed (Note [Dropout inside
// attention]). Not differentiable in the mask.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool is_causal, double scale,
                 double dropout_p, int64_t seed);
Tensor max_pool2d(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw);
Tensor avg_pool2d(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw);

// ---- the fused derivatives of nn primitives (Note [Fused derivatives as primitives] in derivatives.cpp) ----
// softmax's and log_softmax's, given their output
Tensor softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim);
Tensor log_softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim);
// cross_entropy's with respect to its logits; grad has the loss's shape
Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target, int64_t reduction,
                              int64_t ignore_index, double label_smoothing);
// layer_norm's: {da, dweight, dbias}, each null where output_mask is false (dweight also without a weight)
std::vector<Tensor> layer_norm_backward(const Tensor& grad, const Tensor& a, const Tensor& weight, int64_t ndims,
                                        double eps, const std::array<bool, 3>& output_mask);
// rnn_layer's: {dgi, dh0, dc0, dw_hh, db_hh}, from its output `out` and the gate activations `ws` its forward kept
// (null for a plain RNN); each null where output_mask is false or the input is absent
std::vector<Tensor> rnn_layer_backward(const Tensor& grad, const Tensor& gi, const Tensor& h0, const Tensor& c0,
                                       const Tensor& w_hh, const Tensor& b_hh, const Tensor& out, const Tensor& ws,
                                       int64_t mode, bool reverse, const std::array<bool, 5>& output_mask);

// ---- creation helpers used by ops ----
// attention's: {dq, dk, dv}, each null where output_mask is false; out and lse are the forward's (lse each query
// row's logsumexp, saved by attention), recomputed when null
std::vector<Tensor> attention_backward(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& mask, const Tensor& out, const Tensor& lse, bool is_causal,
                                       double scale, double dropout_p, int64_t seed,
                                       const std::array<bool, 3>& output_mask);
Tensor ones_like_shape(const Shape& shape, DType dtype);

}  // namespace dyngrad
