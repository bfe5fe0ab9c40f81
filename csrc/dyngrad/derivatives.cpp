// derivatives.cpp: EVERY backward formula, one function per primitive op, in ops.def order.
// Mirrored by python/dyngrad/reference/derivatives.py.
// Conventions: `grad` is dL/d(out); `s` is what the forward saved, by the names of the struct the op's ops.def line
// names (saved.h): s.a, s.out, s.dims, s.keepdim... with tensors already unpacked (Note [Named saved state]);
// `n` is the node: n.needs_input_grad(i), and in_shape(n, i) / n.input_meta[i] the shape/dtype of input i.
// Formulas ignore broadcasting: the engine sums each gradient to its input's shape (Note [Unbroadcast] in
// engine.h). They are written in differentiable ops, so with create_graph=True the backward pass is itself
// recorded and can be differentiated again.
#include <cmath>
#include <limits>

#include "derivatives.h"
#include "grad_mode.h"
#include "kernels/kernels.h"
#include "ops.h"
#include "saved.h"

namespace dyngrad {

using Grads = std::vector<Tensor>;

static Tensor num(double v, const Tensor& like) { return scalar_tensor(v, like->dtype); }
static const Shape& in_shape(const OpNode& n, int i = 0) { return n.input_meta[i].shape; }
static DType in_dtype(const OpNode& n, int i = 0) { return n.input_meta[i].dtype; }
// A reduction's gradient, put back to the input's shape: re-insert reduced dims, then broadcast.
template <class S>
static Tensor unreduce(const Tensor& g, const OpNode& n, const S& s) {
  const Shape& shape = in_shape(n);
  Tensor r = g;
  if (!s.keepdim) {
    Shape kept = shape;
    for (int64_t d : s.dims) kept[d] = 1;
    r = reshape(g, kept);
  }
  return expand(r, shape);
}

// ---- arithmetic ----

// out = a + b  ->  da = grad, db = grad
static Grads add_backward(const Tensor& grad, const OpNode&, const SavesNothing&) { return {grad, grad}; }

// out = a - b  ->  da = grad, db = -grad
static Grads sub_backward(const Tensor& grad, const OpNode& n, const SavesNothing&) {
  return {grad, n.needs_input_grad(1) ? neg(grad) : nullptr};
}

// out = a * b  ->  da = grad * b, db = grad * a
static Grads mul_backward(const Tensor& grad, const OpNode& n, const SavesAB& s) {
  return {n.needs_input_grad(0) ? mul(grad, s.b) : nullptr, n.needs_input_grad(1) ? mul(grad, s.a) : nullptr};
}

// out = a / b  ->  da = grad / b, db = -grad * a / b^2
static Grads div_backward(const Tensor& grad, const OpNode& n, const SavesAB& s) {
  const Tensor& b = s.b;
  Tensor da = n.needs_input_grad(0) ? div(grad, b) : nullptr;
  Tensor db = n.needs_input_grad(1) ? neg(div(mul(grad, s.a), mul(b, b))) : nullptr;
  return {da, db};
}

// out = -a  ->  da = -grad
static Grads neg_backward(const Tensor& grad, const OpNode&, const SavesNothing&) { return {neg(grad)}; }

// out = a ** b  ->  da = grad * b * a^(b-1), db = grad * out * log(a)  (0 where a == 0, as torch)
static Grads pow_backward(const Tensor& grad, const OpNode& n, const SavesABOut& s) {
  const Tensor &a = s.a, &b = s.b;
  Tensor da = n.needs_input_grad(0) ? mul(grad, mul(b, pow(a, sub(b, num(1, b))))) : nullptr;
  Tensor db;
  if (n.needs_input_grad(1)) {
    Tensor safe_log = where(compare(CompareOp::Eq, a, num(0, a)), num(0, a), log(a));
    db = mul(grad, mul(s.out, safe_log));
  }
  return {da, db};
}

// out = a ** p  ->  da = grad * p * a^(p-1)
static Grads pow_scalar_backward(const Tensor& grad, const OpNode&, const SavesPowScalar& s) {
  double p = s.exponent;
  if (p == 0) return {mul(grad, num(0, grad))};
  const Tensor& a = s.a;
  Tensor d = p == 2 ? mul(a, num(2, a)) : mul(pow_scalar(a, p - 1), num(p, a));
  return {mul(grad, d)};
}

// out = max(a, b)  ->  da = grad where a > b, grad / 2 where a == b, 0 where a < b; db the mirror image. Written
// as torch writes it (grad masked where the input lost), so a NaN on either side, which compares false both ways,
// gives both inputs the whole grad, as torch does.
static Grads maximum_backward(const Tensor& grad, const OpNode& n, const SavesAB& s) {
  const Tensor &a = s.a, &b = s.b;
  Tensor half_tie = mul(to_dtype(compare(CompareOp::Eq, a, b), grad->dtype), num(0.5, grad));
  Tensor one = num(1, grad);
  return {n.needs_input_grad(0) ? mul(grad, sub(sub(one, to_dtype(compare(CompareOp::Lt, a, b), grad->dtype)), half_tie))
                                : nullptr,
          n.needs_input_grad(1) ? mul(grad, sub(sub(one, to_dtype(compare(CompareOp::Gt, a, b), grad->dtype)), half_tie))
                                : nullptr};
}

// out = min(a, b)  ->  the mirror image of maximum (NaN: both inputs get the whole grad)
static Grads minimum_backward(const Tensor& grad, const OpNode& n, const SavesAB& s) {
  const Tensor &a = s.a, &b = s.b;
  Tensor half_tie = mul(to_dtype(compare(CompareOp::Eq, a, b), grad->dtype), num(0.5, grad));
  Tensor one = num(1, grad);
  return {n.needs_input_grad(0) ? mul(grad, sub(sub(one, to_dtype(compare(CompareOp::Gt, a, b), grad->dtype)), half_tie))
                                : nullptr,
          n.needs_input_grad(1) ? mul(grad, sub(sub(one, to_dtype(compare(CompareOp::Lt, a, b), grad->dtype)), half_tie))
                                : nullptr};
}

// out = cond ? a : b  ->  da = cond ? grad : 0, db = cond ? 0 : grad
static Grads where_backward(const Tensor& grad, const OpNode& n, const SavesCond& s) {
  const Tensor& cond = s.cond;
  Tensor zero = num(0, grad);
  return {nullptr, n.needs_input_grad(1) ? where(cond, grad, zero) : nullptr,
          n.needs_input_grad(2) ? where(cond, zero, grad) : nullptr};
}

// out = clamp(a, lo, hi)  ->  da = grad where lo <= a <= hi, else 0
static Grads clamp_backward(const Tensor& grad, const OpNode&, const SavesClamp& s) {
  const Tensor& a = s.a;
  Tensor inside = full(a->shape, 1.0, DType::Bool);
  if (s.lo) inside = logical_and(inside, compare(CompareOp::Ge, a, num(*s.lo, a)));
  if (s.hi) inside = logical_and(inside, compare(CompareOp::Le, a, num(*s.hi, a)));
  return {where(inside, grad, num(0, grad))};
}

// ---- unary ----

// out = exp(a)  ->  da = grad * out
static Grads exp_backward(const Tensor& grad, const OpNode&, const SavesOut& s) { return {mul(grad, s.out)}; }

// out = log(a)  ->  da = grad / a
static Grads log_backward(const Tensor& grad, const OpNode&, const SavesA& s) { return {div(grad, s.a)}; }

// out = sqrt(a)  ->  da = grad / (2 out)
static Grads sqrt_backward(const Tensor& grad, const OpNode&, const SavesOut& s) {
  return {div(grad, mul(s.out, num(2, grad)))};
}

// out = a^(-1/2)  ->  da = -grad * out^3 / 2
static Grads rsqrt_backward(const Tensor& grad, const OpNode&, const SavesOut& s) {
  return {mul(grad, mul(pow_scalar(s.out, 3), num(-0.5, grad)))};
}

// out = |a|  ->  da = grad * sign(a) (sign(NaN) = 0: no gradient through a NaN, as torch)
static Grads abs_backward(const Tensor& grad, const OpNode&, const SavesA& s) { return {mul(grad, sign(s.a))}; }

// out = sin(a)  ->  da = grad * cos(a)
static Grads sin_backward(const Tensor& grad, const OpNode&, const SavesA& s) { return {mul(grad, cos(s.a))}; }

// out = cos(a)  ->  da = -grad * sin(a)
static Grads cos_backward(const Tensor& grad, const OpNode&, const SavesA& s) { return {neg(mul(grad, sin(s.a)))}; }

// grad * f(x) for a derivative helper f, when not recording: one pass over both where they allow it
static Tensor grad_times(UnaryKind k, const Tensor& grad, const Tensor& x) {
  if (unary_grad_fusable(grad, x)) return unary_grad_kernel(k, grad, x);
  return mul(grad, unary_kernel(k, x, x->dtype));
}

// out = tanh(a)  ->  da = grad * (1 - out^2)
static Grads tanh_backward(const Tensor& grad, const OpNode&, const SavesOut& s) {
  const Tensor& out = s.out;
  if (!GradMode::is_enabled())  // not recording: one fused kernel instead of three
    return {grad_times(UnaryKind::TanhGradFromOut, grad, out)};
  return {mul(grad, sub(num(1, out), mul(out, out)))};
}

// out = sigmoid(a)  ->  da = grad * out * (1 - out)
static Grads sigmoid_backward(const Tensor& grad, const OpNode&, const SavesOut& s) {
  const Tensor& out = s.out;
  if (!GradMode::is_enabled()) return {grad_times(UnaryKind::SigmoidGradFromOut, grad, out)};
  return {mul(grad, mul(out, sub(num(1, out), out)))};
}

// out = max(a, 0)  ->  da = grad * !(out <= 0) (a NaN passes its grad through, as torch's threshold_backward)
static Grads relu_backward(const Tensor& grad, const OpNode&, const SavesOut& s) {
  if (!GradMode::is_enabled() && unary_grad_fusable(grad, s.out))  // not recording: one pass
    return {unary_grad_kernel(UnaryKind::ReluMask, grad, s.out)};
  return {mul(grad, unary_kernel(UnaryKind::ReluMask, s.out, grad->dtype))};
}

// out = sign(a)  ->  da = 0 (piecewise constant)
static Grads sign_backward(const Tensor& grad, const OpNode&, const SavesNothing&) { return {mul(grad, num(0, grad))}; }

// out = a > 0 ? a : slope * a  ->  da = grad * (a > 0 ? 1 : slope)
static Grads leaky_relu_backward(const Tensor& grad, const OpNode&, const SavesLeakyRelu& s) {
  const Tensor& a = s.a;
  return {mul(grad, where(compare(CompareOp::Gt, a, num(0, a)), num(1, grad), num(s.slope, grad)))};
}

// out = a * Phi(a)  ->  da = grad * (Phi(a) + a * phi(a))
static Grads gelu_backward(const Tensor& grad, const OpNode&, const SavesA& s) {
  const Tensor& a = s.a;
  if (!GradMode::is_enabled()) return {grad_times(UnaryKind::GeluGrad, grad, a)};
  Tensor cdf = mul(add(erf(mul(a, num(M_SQRT1_2, a))), num(1, a)), num(0.5, a));
  Tensor pdf = mul(exp(mul(mul(a, a), num(-0.5, a))), num(0.3989422804014327, a));
  return {mul(grad, add(cdf, mul(a, pdf)))};
}

// out = log(1 + exp(beta a)) / beta (linear above threshold)  ->  da = grad * sigmoid(beta a) (1 above threshold)
static Grads softplus_backward(const Tensor& grad, const OpNode&, const SavesSoftplus& s) {
  const Tensor& a = s.a;
  Tensor ba = mul(a, num(s.beta, a));
  return {where(compare(CompareOp::Gt, ba, num(s.threshold, a)), grad, mul(grad, sigmoid(ba)))};
}

// out = erf(a)  ->  da = grad * 2/sqrt(pi) * exp(-a^2)
static Grads erf_backward(const Tensor& grad, const OpNode&, const SavesA& s) {
  const Tensor& a = s.a;
  return {mul(grad, mul(exp(neg(mul(a, a))), num(1.1283791670955126, a)))};
}

// ---- reductions ----

// out = sum(a, dims)  ->  da = grad broadcast back over dims
static Grads sum_backward(const Tensor& grad, const OpNode& n, const SavesReduction& s) {
  return {unreduce(grad, n, s)};
}

// out = mean(a, dims)  ->  da = grad broadcast back / count
static Grads mean_backward(const Tensor& grad, const OpNode& n, const SavesReduction& s) {
  int64_t count = 1;
  for (int64_t d : s.dims) count *= in_shape(n)[d];
  return {unreduce(div(grad, num((double)count, grad)), n, s)};
}

// out = amax(a, dims)  ->  grad shared evenly by the elements equal to the max (torch)
static Grads extremum_gradient(const Tensor& grad, const OpNode& n, const SavesReductionAOut& s) {
  const Tensor &a = s.a, &out = s.out;
  Tensor hit = to_dtype(compare(CompareOp::Eq, a, unreduce(out, n, s)), grad->dtype);
  Tensor count = sum(hit, s.dims, true);
  return {mul(div(unreduce(grad, n, s), expand(count, in_shape(n))), hit)};
}
static Grads amax_backward(const Tensor& grad, const OpNode& n, const SavesReductionAOut& s) {
  return extremum_gradient(grad, n, s);
}
static Grads amin_backward(const Tensor& grad, const OpNode& n, const SavesReductionAOut& s) {
  return extremum_gradient(grad, n, s);
}

// out = log(sum(exp(a), dims))  ->  da = grad * exp(a - out)
static Grads logsumexp_backward(const Tensor& grad, const OpNode& n, const SavesReductionAOut& s) {
  return {mul(unreduce(grad, n, s), exp(sub(s.a, unreduce(s.out, n, s))))};
}

// ---- linear algebra ----

// out = a @ b  ->  da = grad @ b^T, db = a^T @ grad  (batch dims summed by the engine)
// Note [Gradient in the operand's layout]: when an operand is a transposed view (x @ w.T in nn.Linear, q @ k^T),
// its gradient is computed transposed, db = (grad^T @ a)^T, so that it comes out in the operand's own layout:
// the permute backward then hands w a contiguous gradient. Computed as a^T @ grad it would reach w as a
// transposed view, and every accumulation into w's gradient (once per time step in an RNN) would walk memory
// column by column; a leaf's first gradient would be copied to make it contiguous. Both products go to BLAS with
// transpose flags, no copies. The forward records the layouts (a_transposed, b_transposed), since an operand is
// saved only when the other one needs a gradient: in a first layer x @ w.T, x needs none and w.T is not saved.
static Grads matmul_backward(const Tensor& grad, const OpNode& n, const SavesMatmul& s) {
  Tensor da, db;
  if (n.needs_input_grad(0)) da = s.a_transposed ? mT(matmul(s.b, mT(grad))) : matmul(grad, mT(s.b));
  if (n.needs_input_grad(1)) db = s.b_transposed ? mT(matmul(mT(grad), s.a)) : matmul(mT(s.a), grad);
  return {da, db};
}

// ---- conversion and movement ----

// out = a.to(dtype)  ->  da = grad (cast back by the engine)
static Grads to_dtype_backward(const Tensor& grad, const OpNode& n, const SavesNothing&) {
  return {to_dtype(grad, in_dtype(n))};
}

// out = a.clone()  ->  da = grad
static Grads clone_backward(const Tensor& grad, const OpNode&, const SavesNothing&) { return {grad}; }

// out = a.reshape(shape)  ->  da = grad.reshape(a.shape)
static Grads reshape_backward(const Tensor& grad, const OpNode& n, const SavesNothing&) {
  return {reshape(grad, in_shape(n))};
}

// out = a.permute(dims)  ->  da = grad.permute(inverse of dims)
static Grads permute_backward(const Tensor& grad, const OpNode&, const SavesPermute& s) {
  Dims inverse(s.dims.size());
  for (size_t i = 0; i < s.dims.size(); ++i) inverse[s.dims[i]] = (int64_t)i;
  return {permute(grad, inverse)};
}

// out = a.expand(shape)  ->  da = grad summed over the expanded dims (the engine's unbroadcast does it)
static Grads expand_backward(const Tensor& grad, const OpNode& n, const SavesNothing&) {
  return {sum_to(grad, in_shape(n))};
}

// out = a[start::step] along dim  ->  da = zeros with grad written back into that slice
static Grads slice_backward(const Tensor& grad, const OpNode& n, const SavesSlice& s) {
  return {slice_scatter(grad, in_shape(n), s.dim, s.start, s.step)};
}

// out = zeros with g written into a slice  ->  dg = grad[start::step] along dim
static Grads slice_scatter_backward(const Tensor& grad, const OpNode& n, const SavesSlice& s) {
  int64_t length = in_shape(n)[s.dim];
  return {slice(grad, s.dim, s.start, s.start + length * s.step, s.step)};
}

// out = cat(a_0, a_1, ...) along dim  ->  da_i = the i-th piece of grad
static Grads cat_backward(const Tensor& grad, const OpNode& n, const SavesCat& s) {
  Grads grads;
  int64_t offset = 0;
  for (size_t i = 0; i < s.sizes.size(); ++i) {
    int64_t length = s.sizes[i];
    grads.push_back(n.needs_input_grad(i) && length > 0 ? slice(grad, s.dim, offset, offset + length, 1) : nullptr);
    offset += length;
  }
  return grads;
}

// ---- indexing ----

// out = a.index_select(dim, index)  ->  da = zeros with grad rows added at index
static Grads index_select_backward(const Tensor& grad, const OpNode& n, const SavesIndex& s) {
  return {index_add(grad, s.dim, s.index, in_shape(n))};
}

// out = zeros; out.index_select(dim, index) += src  ->  dsrc = grad.index_select(dim, index)
static Grads index_add_backward(const Tensor& grad, const OpNode&, const SavesIndex& s) {
  return {index_select(grad, s.dim, s.index)};
}

// out = a.gather(dim, index)  ->  da = zeros with grad scatter-added at index
static Grads gather_backward(const Tensor& grad, const OpNode& n, const SavesIndex& s) {
  return {scatter_add(grad, s.dim, s.index, in_shape(n))};
}

// out = zeros; scatter-add src at index  ->  dsrc = grad.gather(dim, index)
static Grads scatter_add_backward(const Tensor& grad, const OpNode&, const SavesIndex& s) {
  return {gather(grad, s.dim, s.index)};
}

// out = a.flat[pos]  ->  da = zeros with grad added at pos
static Grads take_backward(const Tensor& grad, const OpNode& n, const SavesPositions& s) {
  return {put_add(grad, s.positions, in_shape(n))};
}

// out = a with out.flat[pos] = v  ->  da = grad with pos zeroed, dv = grad.flat[pos]
static Grads put_backward(const Tensor& grad, const OpNode& n, const SavesPositions& s) {
  const Tensor& pos = s.positions;
  return {n.needs_input_grad(0) ? put(grad, pos, num(0, grad)) : nullptr,
          n.needs_input_grad(1) ? take(grad, pos) : nullptr};
}

// out = zeros with v added at pos  ->  dv = grad.flat[pos]
static Grads put_add_backward(const Tensor& grad, const OpNode&, const SavesPositions& s) {
  return {take(grad, s.positions)};
}

// ---- neural-net primitives ----

// Without create_graph the softmax formulas below run as one fused kernel (kernels/reduce.cpp), the same maths.
static bool fused_softmax_backward(const Tensor& grad, const Tensor& out) {
  return !GradMode::is_enabled() && out->ndim() > 0 && grad->shape == out->shape && grad->dtype == out->dtype &&
         (out->dtype == DType::Float32 || out->dtype == DType::Float64);
}

// out = softmax(a, dim)  ->  da = out * (grad - sum(grad * out, dim))
static Grads softmax_backward(const Tensor& grad, const OpNode&, const SavesSoftmax& s) {
  const Tensor& out = s.out;
  if (fused_softmax_backward(grad, out)) return {softmax_backward_kernel(grad, out, s.dim, false)};
  Dims dims = out->ndim() ? Dims{s.dim} : Dims{};
  return {mul(out, sub(grad, sum(mul(grad, out), dims, true)))};
}

// out = log_softmax(a, dim)  ->  da = grad - exp(out) * sum(grad, dim)
static Grads log_softmax_backward(const Tensor& grad, const OpNode&, const SavesSoftmax& s) {
  const Tensor& out = s.out;
  if (fused_softmax_backward(grad, out)) return {softmax_backward_kernel(grad, out, s.dim, true)};
  Dims dims = out->ndim() ? Dims{s.dim} : Dims{};
  return {sub(grad, mul(exp(out), sum(grad, dims, true)))};
}

// out = reduce(-sum_c q[i,c] log_softmax(x)[i,c])  ->  dx = (softmax(x) - q) * grad (per row; / count for mean)
// where q is the (label-smoothed) one-hot target and ignored rows get 0.
static Grads cross_entropy_backward(const Tensor& grad, const OpNode&, const SavesCrossEntropy& s) {
  const Tensor& logits = s.logits;
  const double ls = s.label_smoothing;
  const bool batched = logits->ndim() == 2;
  const int64_t N = batched ? logits->shape[0] : 1, C = logits->shape[batched ? 1 : 0];
  Tensor q = zeros({N, C}, logits->dtype), keep = zeros({N, 1}, logits->dtype);
  const int64_t* t = s.target->data<int64_t>();
  DG_DISPATCH_FLOAT(logits->dtype, T, {
    T* qp = q->data<T>();
    T* kp = keep->data<T>();
    for (int64_t i = 0; i < N; ++i) {
      if (t[i] == s.ignore_index) continue;
      kp[i] = 1;
      for (int64_t c = 0; c < C; ++c) qp[i * C + c] = (T)(ls / C);
      qp[i * C + t[i]] += (T)(1 - ls);
    }
  });
  Tensor x = batched ? logits : reshape(logits, {1, C});
  Tensor g = grad;
  if (s.reduction == 1) g = div(grad, num((double)std::max<int64_t>(s.count, 1), grad));
  g = s.reduction == 0 ? reshape(g, {N, 1}) : g;  // mean/sum: a 0-d grad broadcasts over every row
  Tensor dx = mul(mul(sub(softmax(x, 1), q), keep), g);
  return {batched ? dx : reshape(dx, {C}), nullptr};
}

// out = im2col(x)  ->  dx = col2im(grad)
static Grads unfold_backward(const Tensor& grad, const OpNode& n, const SavesWindow& s) {
  const Dims& w = s.window;
  return {fold(grad, in_shape(n), w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7])};
}

// out = col2im(cols)  ->  dcols = im2col(grad)
static Grads fold_backward(const Tensor& grad, const OpNode&, const SavesWindow& s) {
  const Dims& w = s.window;
  return {unfold(grad, w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7])};
}

// out = xhat * weight + bias over the last ndims dims, xhat = (a - mean) * rstd, rstd = 1 / sqrt(var + eps)
// (biased var); with g = grad * weight (grad without a weight), per row of D elements:
//   da = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dweight = sum(grad * xhat),  dbias = sum(grad)
// the sums over the leading dims (the engine's unbroadcast in the differentiable form). Note [Fused layer_norm]
static Grads layer_norm_backward(const Tensor& grad, const OpNode& n, const SavesLayerNorm& s) {
  const Tensor& a = s.a;
  const Tensor& w = s.weight;
  const bool need_b = n.needs_input_grad(2);
  const Shape norm_shape(a->shape.end() - s.ndims, a->shape.end());
  if (!GradMode::is_enabled() && grad->dtype == a->dtype && grad->shape == a->shape) {
    Tensor da = n.needs_input_grad(0) ? empty(a->shape, a->dtype) : nullptr;
    Tensor dw = w && n.needs_input_grad(1) ? empty(norm_shape, a->dtype) : nullptr;
    Tensor db = need_b ? empty(norm_shape, a->dtype) : nullptr;
    layer_norm_backward_kernel(contiguous_data(grad), contiguous_data(a), w ? contiguous_data(w) : w,
                               shape_numel(norm_shape), s.eps, da, dw, db);
    return {da, dw, db};
  }
  Dims dims;
  for (int64_t d = a->ndim() - s.ndims; d < a->ndim(); ++d) dims.push_back(d);
  Tensor xc = sub(a, mean(a, dims, true));
  Tensor rstd = rsqrt(add(mean(mul(xc, xc), dims, true), num(s.eps, a)));
  Tensor xhat = mul(xc, rstd);
  Tensor g = w ? mul(grad, w) : grad;
  Tensor da = mul(rstd, sub(sub(g, mean(g, dims, true)), mul(xhat, mean(mul(g, xhat), dims, true))));
  return {da, w ? mul(grad, xhat) : nullptr, need_b ? grad : nullptr};
}

// out = rnn_layer(gi, h0, c0, W, b, mode, reverse) (Note [Whole-sequence RNN layer] in ops_nn.cpp): the recurrence
// runs backwards over the steps k = L-1 .. 0 (step k reads h_prev = h0 at k = 0, else the state of step k-1),
// carrying dh (and dc) to the step before. With gh = h_prev W^T + b, a = gi_t + gh the gate pre-activations,
// dh = grad of out[0, t] + what step k+1 sent back:
//   RNN:  h = tanh(a) -> da = dh (1 - h^2);  relu -> da = dh where h > 0, else 0
//   LSTM: c = s(f) c_prev + s(i) tanh(g), h = s(o) tanh(c); dc = grad of out[1, t] + carried + dh s(o) (1 - tanh(c)^2)
//         da_i = dc tanh(g) s(i) (1 - s(i)), da_f = dc c_prev s(f) (1 - s(f)), da_g = dc s(i) (1 - tanh(g)^2),
//         da_o = dh tanh(c) s(o) (1 - s(o)); dc_prev = dc s(f)
//   GRU:  r = s(gi_r + gh_r), z = s(gi_z + gh_z), n = tanh(gi_n + r gh_n), h = n + z (h_prev - n):
//         da_n = dh (1 - z) (1 - n^2), da_z = dh (h_prev - n) z (1 - z), da_r = da_n gh_n r (1 - r);
//         dgi = (da_r, da_z, da_n), dgh = (da_r, da_z, r da_n), and h_prev also gets dh z directly
//   (RNN, LSTM: dgi = dgh = da.)  dh_prev = dgh W (+ dh z);  dW = sum_k dgh_k^T h_prev_k;  db = sum_k sum_rows dgh_k;
//   dgi = dgi_t for every t; dh0, dc0 = what step 0 sends back.
// Not recording (the usual case): kernels/rnn.cpp runs exactly this with the activations the forward kept (ws),
// each step's cell derivative in one pass, dW as one product. Recording (create_graph): the same in
// differentiable ops, recomputing the activations from the saved inputs and output.
static Grads rnn_layer_backward(const Tensor& grad, const OpNode& n, const SavesRnnLayer& s) {
  const bool need[5] = {n.needs_input_grad(0), n.needs_input_grad(1), n.needs_input_grad(2), n.needs_input_grad(3),
                        n.needs_input_grad(4)};
  const int64_t mode = s.mode;
  if (!GradMode::is_enabled()) {
    RnnLayerGrads r = rnn_layer_backward_kernel(contiguous_data(grad), contiguous_data(s.h0),
                                                s.c0 ? contiguous_data(s.c0) : nullptr, contiguous_data(s.w_hh),
                                                (bool)s.b_hh, s.out, s.ws, mode, s.reverse, need);
    return {r.dgi, r.dh0, r.dc0, r.dw, r.db};
  }
  const Tensor &gi = s.gi, &h0 = s.h0, &w = s.w_hh, &b = s.b_hh, &out = s.out;
  const int64_t L = gi->shape[0], N = h0->shape[0], H = h0->shape[1];
  auto time = [&](int64_t k) { return s.reverse ? L - 1 - k : k; };
  auto gate = [&](const Tensor& a, int64_t j) { return slice(a, 1, j * H, (j + 1) * H, 1); };
  const Tensor hs = select(out, 0, 0), grad_h = select(grad, 0, 0), one = num(1, gi);
  Tensor dh, dc;
  std::vector<Tensor> dgi(L), dgh(L), h_prev(L);
  for (int64_t k = L - 1; k >= 0; --k) {
    const int64_t t = time(k);
    const Tensor hp = k == 0 ? h0 : select(hs, 0, time(k - 1));
    Tensor gh = matmul(hp, mT(w));
    if (b) gh = add(gh, b);
    const Tensor x = select(gi, 0, t);
    dh = dh ? add(select(grad_h, 0, t), dh) : select(grad_h, 0, t);
    if (mode == 2) {
      const Tensor a = add(x, gh);
      const Tensor si = sigmoid(gate(a, 0)), sf = sigmoid(gate(a, 1)), tg = tanh(gate(a, 2)), so = sigmoid(gate(a, 3));
      const Tensor cs = select(out, 0, 1);
      const Tensor cp = k == 0 ? s.c0 : select(cs, 0, time(k - 1));
      const Tensor tc = tanh(select(cs, 0, t));
      Tensor dct = add(select(select(grad, 0, 1), 0, t), mul(mul(dh, so), sub(one, mul(tc, tc))));
      if (dc) dct = add(dct, dc);
      Tensor da = cat({mul(mul(dct, tg), mul(si, sub(one, si))), mul(mul(dct, cp), mul(sf, sub(one, sf))),
                       mul(mul(dct, si), sub(one, mul(tg, tg))), mul(mul(dh, tc), mul(so, sub(one, so)))},
                      1);
      dc = mul(dct, sf);
      dgi[t] = dgh[k] = da;
      dh = matmul(da, w);
    } else if (mode == 3) {
      const Tensor r = sigmoid(add(gate(x, 0), gate(gh, 0))), z = sigmoid(add(gate(x, 1), gate(gh, 1)));
      const Tensor ghn = gate(gh, 2);
      const Tensor nn = tanh(add(gate(x, 2), mul(r, ghn)));
      const Tensor dan = mul(mul(dh, sub(one, z)), sub(one, mul(nn, nn)));
      const Tensor daz = mul(mul(dh, sub(hp, nn)), mul(z, sub(one, z)));
      const Tensor dar = mul(mul(dan, ghn), mul(r, sub(one, r)));
      dgi[t] = cat({dar, daz, dan}, 1);
      dgh[k] = cat({dar, daz, mul(dan, r)}, 1);
      dh = add(matmul(dgh[k], w), mul(dh, z));
    } else {
      const Tensor h = select(hs, 0, t);
      const Tensor da = mode == 0 ? mul(dh, sub(one, mul(h, h)))
                                  : where(compare(CompareOp::Le, h, num(0, h)), num(0, dh), dh);
      dgi[t] = dgh[k] = da;
      dh = matmul(da, w);
    }
    h_prev[k] = hp;
  }
  Tensor all_dgh = need[3] || need[4] ? reshape(stack(dgh, 0), {L * N, w->shape[0]}) : nullptr;
  Tensor dw = need[3] ? matmul(mT(all_dgh), reshape(stack(h_prev, 0), {L * N, H})) : nullptr;
  Tensor db = b && need[4] ? sum(all_dgh, {0}, false) : nullptr;
  return {need[0] ? stack(dgi, 0) : nullptr, need[1] ? dh : nullptr, need[2] ? dc : nullptr, dw, db};
}

// ---- the table ----
// One entry per ops.def line: unpack the node's saved struct (the one its line names) and call the op's formula.
// A formula that is missing, or whose `s` is not that struct, does not compile.
template <class S, Grads (*formula)(const Tensor&, const OpNode&, const S&)>
static Grads unpack_and_run(const Tensor& grad, OpNode& node) {
  // make_op_node<K>() built the node with the struct of K's ops.def line, which is S here
  return formula(grad, node, static_cast<const SavedOpNode<S>&>(node).saved.unpack(node));
}
using Formula = Grads (*)(const Tensor&, OpNode&);
static const Formula kFormulas[] = {
#define DG_OP(name, display, saves, signature, hot) &unpack_and_run<saves, &name##_backward>,
#include "ops.def"
};
static_assert(sizeof(kFormulas) / sizeof(kFormulas[0]) == (size_t)OpKind::COUNT,
              "every op in ops.def needs a formula here");

std::vector<Tensor> run_derivative(OpNode& node, const Tensor& grad) { return kFormulas[(int)node.kind](grad, node); }

}  // namespace dyngrad
