// forward_derivatives.cpp: EVERY tangent formula (forward-mode derivative), one function per primitive op, in
// ops.def order, the twin of derivatives.cpp's backward formulas; a plain unary op (a DG_KERNEL_OP of signature
// unary or unary_float) has one only where its default, the tangent from its backward formula, does not fit
// (Note [Default tangents]). Mirrored by python/dyngrad/reference/forward_derivatives.py. Note [Dual tensors] and Note [Nested levels] in forward_ad.h.
// Conventions: `t` holds one tangent per input of the op, in the order its forward lists them for record() (null
// where an input has none: a zero tangent); `out` is the primal output; `s` is the op's named struct (saved.h),
// built by the forward from its own arguments, so every field is there (unlike the backward's, which saves only
// what the needed gradients read). Formulas need not broadcast or cast: attach() expands each tangent to its
// output's shape and casts it to its dtype. They are written in differentiable ops, so a tangent carries the
// tangents of the lower levels (jvp of jvp) and records a graph in grad mode (reverse over forward).
#include <cmath>

#include "derivatives.h"
#include "engine.h"
#include "forward_ad.h"
#include "grad_mode.h"
#include "kernels/kernels.h"
#include "ops.h"
#include "saved.h"

namespace dyngrad {

using Grads = std::vector<Tensor>;

static Tensor num(double v, const Tensor& like) { return scalar_tensor(v, like->dtype); }
// null-aware sums of tangent terms (null is zero)
static Tensor plus(const Tensor& x, const Tensor& y) { return !x ? y : !y ? x : add(x, y); }
static Tensor minus(const Tensor& x, const Tensor& y) { return !y ? x : !x ? neg(y) : sub(x, y); }
static Tensor times(const Tensor& t, const Tensor& factor) { return t ? mul(t, factor) : nullptr; }
static Tensor zeros_of(const Shape& shape, const Tensor& like) { return zeros(shape, like->dtype); }
// a reduction's output put back to its input's shape (as derivatives.cpp's unreduce)
static Tensor unreduce(const Tensor& r, const Shape& shape, const Dims& dims, bool keepdim) {
  Tensor k = r;
  if (!keepdim) {
    Shape kept = shape;
    for (int64_t d : dims) kept[d] = 1;
    k = reshape(r, kept);
  }
  return expand(k, shape);
}
static Dims softmax_dims(const Tensor& y, int64_t dim) { return y->ndim() ? Dims{dim} : Dims{}; }

// Note [Tangents by transposition]: five fused ops (rnn_layer, layer_norm_backward, rnn_layer_backward, attention,
// attention_backward) would need a page of closed-form tangent each. Their backward formulas exist, and J t = the VJP of (u -> J^T u) with
// cotangent t, J^T u being linear in u: so the op (or its differentiable definition) is re-run on detached
// stand-ins of its inputs, its VJP taken with a zero cotangent u that requires grad (recorded), and the VJP of
// <J^T u, t> with respect to u read off. It costs the forward, a backward and the backward's backward; the
// result carries the lower levels' tangents but is not reverse-differentiable with respect to the primals.
template <class Rerun>
static Grads jvp_by_transposition(const Grads& primals, const Grads& t, Rerun rerun) {
  Grads xs(primals.size()), outs, result;
  {
    GradModeGuard recording(true);
    const uint64_t first_node = next_sequence_nr();
    for (size_t i = 0; i < primals.size(); ++i) {
      if (!primals[i]) continue;
      xs[i] = alias(primals[i]);
      forward_ad::copy_tangents(xs[i], primals[i]);
      xs[i]->requires_grad = t[i] != nullptr && is_differentiable(primals[i]->dtype);
    }
    outs = rerun(xs);
    Grads us(outs.size());
    for (size_t j = 0; j < outs.size(); ++j) {
      if (!outs[j] || !outs[j]->requires_grad) continue;
      us[j] = zeros(outs[j]->shape, outs[j]->dtype);
      us[j]->requires_grad = true;
    }
    Grads vjps = vjp(outs, us, xs, first_node);
    Tensor inner;
    for (size_t i = 0; i < vjps.size(); ++i)
      if (vjps[i] && t[i]) inner = plus(inner, sum(mul(vjps[i], t[i]), {}, false));
    result.assign(outs.size(), nullptr);
    if (!inner) return result;
    Grads jt = vjp({inner}, {num(1, inner)}, us, first_node);
    for (size_t j = 0; j < jt.size(); ++j)
      if (jt[j]) {
        result[j] = alias(jt[j]);
        forward_ad::copy_tangents(result[j], jt[j]);
      }
  }
  return result;
}

// Note [Default tangents]: a plain unary op (ops.def: a DG_KERNEL_OP of signature unary or unary_float) needs no
// tangent formula here: its entry defaults to the tangent from its backward formula (Note [Tangents from backward
// formulas] in derivatives.cpp), t * f'(a) through the backward's own ops. The default is a function template
// named like the formula, made for each such op from its ops.def line; a hand-written `name_jvp` (a non-template
// function of the same type) wins over it where the table takes its address (overload resolution prefers the
// non-template), so an op keeps its own formula by writing one: one that is not holomorphic on complex tensors
// (abs, conj), or one cheaper than its backward.
#define DG_DEFAULT_TANGENT_unary(name, saves)                                         \
  template <int = 0>                                                                  \
  static Tensor name##_jvp(const Grads& t, const Tensor&, const saves& s) {           \
    return tangent_from_backward(OpKind::name, t[0], &s);                             \
  }
#define DG_DEFAULT_TANGENT_unary_float(name, saves) DG_DEFAULT_TANGENT_unary(name, saves)
#define DG_DEFAULT_TANGENT_unary_backward(name, saves)
#define DG_KERNEL_OP(name, display, saves, signature, hot, kernel) DG_DEFAULT_TANGENT_##signature(name, saves)
#include "ops.def"
#undef DG_DEFAULT_TANGENT_unary
#undef DG_DEFAULT_TANGENT_unary_float
#undef DG_DEFAULT_TANGENT_unary_backward

// ---- arithmetic ----

static Tensor add_jvp(const Grads& t, const Tensor&, const SavesNothing&) { return plus(t[0], t[1]); }
static Tensor sub_jvp(const Grads& t, const Tensor&, const SavesNothing&) { return minus(t[0], t[1]); }
// d(a b) = ta b + a tb
static Tensor mul_jvp(const Grads& t, const Tensor&, const SavesAB& s) { return plus(times(t[0], s.b), times(t[1], s.a)); }
// d(a / b) = (ta - out tb) / b
static Tensor div_jvp(const Grads& t, const Tensor& out, const SavesAB& s) {
  return div(minus(t[0], times(t[1], out)), s.b);
}
static Tensor neg_jvp(const Grads& t, const Tensor&, const SavesNothing&) { return neg(t[0]); }
// d(a^b) = ta b a^(b-1) + tb out log(a)  (log taken as 0 where a == 0, as the backward)
static Tensor pow_jvp(const Grads& t, const Tensor& out, const SavesABOut& s) {
  const Tensor &a = s.a, &b = s.b;
  Tensor da = t[0] ? mul(t[0], mul(b, pow(a, sub(b, num(1, b))))) : nullptr;
  Tensor db;
  if (t[1]) db = mul(t[1], mul(out, where(compare(CompareOp::Eq, a, num(0, a)), num(0, a), log(a))));
  return plus(da, db);
}
// d(a^p) = ta p a^(p-1)
static Tensor pow_scalar_jvp(const Grads& t, const Tensor&, const SavesPowScalar& s) {
  const double p = s.exponent;
  if (p == 0) return mul(t[0], num(0, t[0]));
  return mul(t[0], p == 2 ? mul(s.a, num(2, s.a)) : mul(pow_scalar(s.a, p - 1), num(p, s.a)));
}
// the weights of the backward (1 to the larger, 1/2 each on a tie; a NaN gives both the whole tangent)
static Tensor extremum_pair_jvp(const Grads& t, const SavesAB& s, CompareOp lost_a, CompareOp lost_b) {
  const Tensor &a = s.a, &b = s.b;
  const Tensor& like = t[0] ? t[0] : t[1];
  const DType dt = like->dtype;
  Tensor half_tie = mul(to_dtype(compare(CompareOp::Eq, a, b), dt), num(0.5, like));
  Tensor one = num(1, like);
  Tensor ta = t[0] ? mul(t[0], sub(sub(one, to_dtype(compare(lost_a, a, b), dt)), half_tie)) : nullptr;
  Tensor tb = t[1] ? mul(t[1], sub(sub(one, to_dtype(compare(lost_b, a, b), dt)), half_tie)) : nullptr;
  return plus(ta, tb);
}
static Tensor maximum_jvp(const Grads& t, const Tensor&, const SavesAB& s) {
  return extremum_pair_jvp(t, s, CompareOp::Lt, CompareOp::Gt);
}
static Tensor minimum_jvp(const Grads& t, const Tensor&, const SavesAB& s) {
  return extremum_pair_jvp(t, s, CompareOp::Gt, CompareOp::Lt);
}
// d remainder(a, b) = ta - floor(a / b) tb; d fmod(a, b) = ta - trunc(a / b) tb (the quotients are constants)
static Tensor remainder_jvp(const Grads& t, const Tensor& out, const SavesAB& s) {
  return minus(t[0], times(t[1], binary_kernel(BinaryKind::FloorDivide, s.a, s.b, out->dtype, "remainder")));
}
static Tensor fmod_jvp(const Grads& t, const Tensor& out, const SavesAB& s) {
  return minus(t[0], times(t[1], binary_kernel(BinaryKind::TruncDivide, s.a, s.b, out->dtype, "fmod")));
}
// d atan2(a, b) = (ta b - tb a) / (a^2 + b^2), 0 at the origin as the backward
static Tensor atan2_jvp(const Grads& t, const Tensor&, const SavesAB& s) {
  const Tensor &a = s.a, &b = s.b;
  Tensor r2 = add(mul(a, a), mul(b, b));
  Tensor origin = compare(CompareOp::Eq, r2, num(0, r2));
  Tensor inv = where(origin, num(0, r2), div(num(1, r2), where(origin, num(1, r2), r2)));
  Tensor d = minus(times(t[0], b), times(t[1], a));
  return d ? mul(d, inv) : nullptr;
}
// inputs (cond, a, b): cond ? ta : tb
static Tensor where_jvp(const Grads& t, const Tensor& out, const SavesCond& s) {
  const Tensor& like = t[1] ? t[1] : t[2];
  Tensor zero = num(0, like);
  return where(s.cond, t[1] ? t[1] : zero, t[2] ? t[2] : zero);
}
static Tensor clamp_jvp(const Grads& t, const Tensor&, const SavesClamp& s) {
  const Tensor& a = s.a;
  Tensor inside = full(a->shape, 1.0, DType::Bool);
  if (s.lo) inside = logical_and(inside, compare(CompareOp::Ge, a, num(*s.lo, a)));
  if (s.hi) inside = logical_and(inside, compare(CompareOp::Le, a, num(*s.hi, a)));
  return where(inside, t[0], num(0, t[0]));
}

// ---- unary ----
// The plain unary ops take their tangents from their backward formulas (Note [Default tangents] above); these
// are the ones that are not the default: abs and conj are not holomorphic on complex tensors, and the fused
// derivatives have two inputs.

// (complex a: the real part of conj(sgn(a)) t, the change of |a| along t)
static Tensor abs_jvp(const Grads& t, const Tensor&, const SavesA& s) {
  if (is_complex(s.a->dtype)) return select(view_as_real(mul(t[0], conj(abs_sgn(s.a)))), -1, 0);
  return mul(t[0], sign(s.a));
}
// out = grad (1 - x^2)  ->  tgrad (1 - x^2) - 2 grad x tx
static Tensor tanh_backward_jvp(const Grads& t, const Tensor&, const SavesGradX& s) {
  Tensor dg = t[0] ? tanh_backward(t[0], s.x) : nullptr;
  return plus(dg, t[1] ? mul(mul(s.grad, t[1]), mul(s.x, num(-2, s.x))) : nullptr);
}
// out = grad x (1 - x)  ->  tgrad x (1 - x) + grad (1 - 2x) tx
static Tensor sigmoid_backward_jvp(const Grads& t, const Tensor&, const SavesGradX& s) {
  const Tensor& x = s.x;
  Tensor dg = t[0] ? sigmoid_backward(t[0], x) : nullptr;
  return plus(dg, t[1] ? mul(mul(s.grad, t[1]), sub(num(1, x), mul(x, num(2, x)))) : nullptr);
}
// out = grad * !(x <= 0)  ->  tgrad * !(x <= 0) (x's part is zero almost everywhere)
static Tensor threshold_backward_jvp(const Grads& t, const Tensor& out, const SavesX& s) {
  return t[0] ? threshold_backward(t[0], s.x) : zeros_of(out->shape, out);
}
static Tensor leaky_relu_jvp(const Grads& t, const Tensor&, const SavesLeakyRelu& s) {
  const Tensor& a = s.a;
  return mul(t[0], where(compare(CompareOp::Gt, a, num(0, a)), num(1, t[0]), num(s.slope, t[0])));
}
// out = grad (Phi(x) + x phi(x))  ->  gelu_backward(tgrad, x) + grad phi(x) (2 - x^2) tx
static Tensor gelu_backward_jvp(const Grads& t, const Tensor&, const SavesGradX& s) {
  const Tensor& x = s.x;
  Tensor dx;
  if (t[1]) {
    Tensor pdf = mul(exp(mul(mul(x, x), num(-0.5, x))), num(0.3989422804014327, x));
    dx = mul(mul(t[1], s.grad), mul(pdf, sub(num(2, x), mul(x, x))));
  }
  return plus(t[0] ? gelu_backward(t[0], x) : nullptr, dx);
}
static Tensor softplus_jvp(const Grads& t, const Tensor&, const SavesSoftplus& s) {
  const Tensor& a = s.a;
  Tensor ba = mul(a, num(s.beta, a));
  return where(compare(CompareOp::Gt, ba, num(s.threshold, a)), t[0], mul(t[0], sigmoid(ba)));
}
// conj is not holomorphic (it is antilinear): its tangent is conj(t)
static Tensor conj_jvp(const Grads& t, const Tensor&, const SavesNothing&) { return conj(t[0]); }

// ---- reductions ----

static Tensor sum_jvp(const Grads& t, const Tensor&, const SavesReduction& s) { return sum(t[0], s.dims, s.keepdim); }
static Tensor mean_jvp(const Grads& t, const Tensor&, const SavesReduction& s) {
  return mean(t[0], s.dims, s.keepdim);
}
// the tangent shared evenly by the elements equal to the extremum, as the backward shares the gradient
static Tensor extremum_jvp(const Grads& t, const SavesReductionAOut& s) {
  const Tensor& a = s.a;
  Tensor hit = to_dtype(compare(CompareOp::Eq, a, unreduce(s.out, a->shape, s.dims, s.keepdim)), t[0]->dtype);
  return div(sum(mul(t[0], hit), s.dims, s.keepdim), sum(hit, s.dims, s.keepdim));
}
static Tensor amax_jvp(const Grads& t, const Tensor&, const SavesReductionAOut& s) { return extremum_jvp(t, s); }
static Tensor amin_jvp(const Grads& t, const Tensor&, const SavesReductionAOut& s) { return extremum_jvp(t, s); }
// d logsumexp = sum(t exp(a - out))
static Tensor logsumexp_jvp(const Grads& t, const Tensor&, const SavesReductionAOut& s) {
  return sum(mul(t[0], exp(sub(s.a, unreduce(s.out, s.a->shape, s.dims, s.keepdim)))), s.dims, s.keepdim);
}
static Tensor cumsum_jvp(const Grads& t, const Tensor&, const SavesScan& s) { return cumsum(t[0], s.dim, s.reverse); }
// out_k = a_k out_{k-1}  ->  d out_k = a_k d out_{k-1} + t_k out_{k-1}: the linear recurrence over a (no division)
static Tensor cumprod_jvp(const Grads& t, const Tensor& out, const SavesScanAOut& s) {
  return linear_recurrence(mul(t[0], scan_shift(out, s.dim, s.reverse, 1)), s.a, s.dim, s.reverse);
}
// out_k = log(exp(out_{k-1}) + exp(a_k))  ->  d out_k = w_k t_k + (1 - w_k) d out_{k-1} with w_k = exp(a_k - out_k),
// 1 - w_k = exp(out_{k-1} - out_k): weights in [0, 1] from differences, so no exp overflows or underflows to 0/0
// across a wide range (torch's exp(a - max) / cumsum does, where a spans more than ~1400)
static Tensor logcumsumexp_jvp(const Grads& t, const Tensor& out, const SavesScanAOut& s) {
  Tensor keep = exp(sub(scan_shift(out, s.dim, s.reverse, -INFINITY), out));
  return linear_recurrence(mul(t[0], exp(sub(s.a, out))), keep, s.dim, s.reverse);
}
// y_k = b_k + c_k y_{k-1}  ->  d y_k = (tb_k + tc_k y_{k-1}) + c_k d y_{k-1}
static Tensor linear_recurrence_jvp(const Grads& t, const Tensor& out, const SavesRecurrence& s) {
  Tensor driven = plus(t[0], times(t[1], scan_shift(out, s.dim, s.reverse, 0)));
  return linear_recurrence(expand(driven, out->shape), s.c, s.dim, s.reverse);
}

// ---- linear algebra ----

static Tensor matmul_jvp(const Grads& t, const Tensor&, const SavesMatmul& s) {
  return plus(t[0] ? matmul(t[0], s.b) : nullptr, t[1] ? matmul(s.a, t[1]) : nullptr);
}

// ---- conversion and movement: each is linear, so its tangent is the op applied to the tangent ----

static Tensor to_dtype_jvp(const Grads& t, const Tensor& out, const SavesNothing&) { return to_dtype(t[0], out->dtype); }
static Tensor clone_jvp(const Grads& t, const Tensor&, const SavesNothing&) { return clone(t[0]); }
static Tensor reshape_jvp(const Grads& t, const Tensor& out, const SavesNothing&) { return reshape(t[0], out->shape); }
static Tensor permute_jvp(const Grads& t, const Tensor&, const SavesPermute& s) { return permute(t[0], s.dims); }
static Tensor expand_jvp(const Grads& t, const Tensor& out, const SavesNothing&) { return expand(t[0], out->shape); }
static Tensor slice_jvp(const Grads& t, const Tensor& out, const SavesSlice& s) {
  const int64_t length = out->ndim() ? out->shape[s.dim] : 1;
  return slice(t[0], s.dim, s.start, length ? s.start + (length - 1) * s.step + 1 : s.start, s.step);
}
static Tensor slice_scatter_jvp(const Grads& t, const Tensor& out, const SavesSlice& s) {
  return slice_scatter(t[0], out->shape, s.dim, s.start, s.step);
}
static Tensor cat_jvp(const Grads& t, const Tensor& out, const SavesCat& s) {
  Grads pieces;
  for (size_t i = 0; i < s.sizes.size(); ++i) {
    if (t[i]) {
      pieces.push_back(to_dtype(t[i], out->dtype));
      continue;
    }
    Shape shape = out->shape;
    shape[s.dim] = s.sizes[i];
    pieces.push_back(zeros(shape, out->dtype));
  }
  return cat(pieces, s.dim);
}
static Tensor view_as_real_jvp(const Grads& t, const Tensor&, const SavesNothing&) { return view_as_real(t[0]); }
static Tensor view_as_complex_jvp(const Grads& t, const Tensor&, const SavesNothing&) {
  return view_as_complex(contiguous(t[0]));
}

// ---- indexing: linear in the indexed tensors ----

static Tensor index_select_jvp(const Grads& t, const Tensor&, const SavesIndex& s) {
  return index_select(t[0], s.dim, s.index);
}
static Tensor index_add_jvp(const Grads& t, const Tensor& out, const SavesIndex& s) {
  return index_add(t[0], s.dim, s.index, out->shape);
}
static Tensor gather_jvp(const Grads& t, const Tensor&, const SavesIndex& s) { return gather(t[0], s.dim, s.index); }
static Tensor scatter_add_jvp(const Grads& t, const Tensor& out, const SavesIndex& s) {
  return scatter_add(t[0], s.dim, s.index, out->shape);
}
static Tensor take_jvp(const Grads& t, const Tensor&, const SavesPositions& s) { return take(t[0], s.positions); }
// inputs (a, v): a's tangent with v's written at the positions
static Tensor put_jvp(const Grads& t, const Tensor& out, const SavesPositions& s) {
  Tensor base = t[0] ? to_dtype(expand(t[0], out->shape), out->dtype) : zeros_of(out->shape, out);
  return put(base, s.positions, t[1] ? to_dtype(t[1], out->dtype) : num(0, out));
}
static Tensor put_add_jvp(const Grads& t, const Tensor& out, const SavesPositions& s) {
  return put_add(t[0], s.positions, out->shape);
}

// ---- neural-net primitives ----

// d softmax = out (t - sum(t out)): softmax_backward(t, out), its Jacobian being symmetric
static Tensor softmax_jvp(const Grads& t, const Tensor& out, const SavesSoftmax& s) {
  return softmax_backward(t[0], out, s.dim);
}
// out = y (grad - sum(grad y))  ->  softmax_backward(tgrad, y) + ty (grad - sum(grad y)) - y sum(grad ty)
static Tensor softmax_backward_jvp(const Grads& t, const Tensor&, const SavesSoftmaxBackward& s) {
  const Tensor &y = s.out, &grad = s.grad;
  const Dims dims = softmax_dims(y, s.dim);
  Tensor dy;
  if (t[1])
    dy = sub(mul(t[1], sub(grad, sum(mul(grad, y), dims, true))), mul(y, sum(mul(grad, t[1]), dims, true)));
  return plus(t[0] ? softmax_backward(t[0], y, s.dim) : nullptr, dy);
}
// d log_softmax = t - sum(t exp(out))
static Tensor log_softmax_jvp(const Grads& t, const Tensor& out, const SavesSoftmax& s) {
  return sub(t[0], sum(mul(t[0], exp(out)), softmax_dims(out, s.dim), true));
}
// out = grad - exp(y) sum(grad)  ->  tgrad - exp(y) sum(tgrad) - exp(y) ty sum(grad)
static Tensor log_softmax_backward_jvp(const Grads& t, const Tensor&, const SavesSoftmaxBackward& s) {
  const Tensor& y = s.out;
  const Dims dims = softmax_dims(y, s.dim);
  Tensor e = exp(y);
  Tensor dg = t[0] ? sub(t[0], mul(e, sum(t[0], dims, true))) : nullptr;
  return minus(dg, t[1] ? mul(mul(e, t[1]), sum(s.grad, dims, true)) : nullptr);
}
// inputs (logits, target): the loss's derivative in the logits (cross_entropy_backward with a unit gradient),
// contracted with the tangent over the classes (none) or everything (mean, sum)
static Tensor cross_entropy_jvp(const Grads& t, const Tensor& out, const SavesCrossEntropy& s) {
  Tensor d = cross_entropy_backward(full(out->shape, 1.0, out->dtype), s.logits, s.target, s.reduction,
                                    s.ignore_index, s.label_smoothing);
  Tensor r = mul(d, t[0]);
  return out->ndim() ? sum(r, {1}, false) : sum(r, {}, false);
}
// out = ((p - q) keep) scale  ->  cross_entropy_backward(tgrad, ...) + softmax_backward(tlogits, p) keep scale
static Tensor cross_entropy_backward_jvp(const Grads& t, const Tensor&, const SavesCrossEntropyBackward& s) {
  const Tensor& logits = s.logits;
  Tensor dg = t[0] ? cross_entropy_backward(t[0], logits, s.target, s.reduction, s.ignore_index, s.label_smoothing)
                   : nullptr;
  if (!t[1]) return dg;
  const bool batched = logits->ndim() == 2;
  const int64_t N = batched ? logits->shape[0] : 1, C = logits->shape[batched ? 1 : 0];
  const CrossEntropyTarget target =
      cross_entropy_target_kernel(s.target, C, s.ignore_index, s.label_smoothing, logits->dtype);
  const Tensor p = softmax(batched ? logits : reshape(logits, {1, C}), 1);
  const Tensor tx = batched ? t[1] : reshape(t[1], {1, C});
  const double kept = (double)std::max<int64_t>(target.kept, 1);
  const Tensor& grad = s.grad;
  Tensor scale = s.reduction == 0 ? reshape(grad, {N, 1}) : s.reduction == 1 ? div(grad, num(kept, grad)) : grad;
  Tensor dx = mul(mul(softmax_backward(tx, p, 1), target.keep), scale);
  return plus(dg, batched ? dx : reshape(dx, {C}));
}
static Tensor unfold_jvp(const Grads& t, const Tensor&, const SavesWindow& s) {
  const Dims& w = s.window;
  return unfold(t[0], w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]);
}
static Tensor fold_jvp(const Grads& t, const Tensor& out, const SavesWindow& s) {
  const Dims& w = s.window;
  return fold(t[0], out->shape, w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]);
}
// inputs (gi, h0, c0, w_hh, b_hh): Note [Tangents by transposition]
static Tensor rnn_layer_jvp(const Grads& t, const Tensor&, const SavesRnnLayer& s) {
  return jvp_by_transposition({s.gi, s.h0, s.c0, s.w_hh, s.b_hh}, t, [&](const Grads& x) {
    return Grads{rnn_layer(x[0], x[1], x[2], x[3], x[4], s.mode, s.reverse)};
  })[0];
}
// inputs (a, weight, bias), xhat = (a - mean) rstd over the last ndims dims:
//   d xhat = rstd (dxc - xhat mean(xhat dxc)), dxc = ta - mean(ta);  d out = d xhat w + xhat tw + tb
static Tensor layer_norm_jvp(const Grads& t, const Tensor&, const SavesLayerNorm& s) {
  const Tensor& a = s.a;
  Dims dims;
  for (int64_t d = a->ndim() - s.ndims; d < a->ndim(); ++d) dims.push_back(d);
  Tensor xc = sub(a, mean(a, dims, true));
  Tensor rstd = rsqrt(add(mean(mul(xc, xc), dims, true), num(s.eps, a)));
  Tensor xhat = mul(xc, rstd);
  Tensor dxhat;
  if (t[0]) {
    Tensor dxc = sub(t[0], mean(t[0], dims, true));
    dxhat = mul(rstd, sub(dxc, mul(xhat, mean(mul(xhat, dxc), dims, true))));
    if (s.weight) dxhat = mul(dxhat, s.weight);
  }
  return plus(plus(dxhat, t[1] ? mul(xhat, t[1]) : nullptr), t[2]);
}
// inputs (grad, a, weight): Note [Tangents by transposition], through the backward's differentiable definition
static Grads layer_norm_backward_jvp(const Grads& t, const Grads&, const SavesLayerNormBackward& s) {
  return jvp_by_transposition({s.grad, s.a, s.weight}, t, [&](const Grads& x) {
    return layer_norm_backward_definition(x[0], x[1], x[2], s.ndims, s.eps);
  });
}
// inputs (grad, gi, h0, c0, w_hh, b_hh, out, ws): as layer_norm_backward's (ws, the kernel's scratch, has none)
static Grads rnn_layer_backward_jvp(const Grads& t, const Grads&, const SavesRnnLayerBackward& s) {
  Grads tangents(t.begin(), t.begin() + 7);
  return jvp_by_transposition({s.grad, s.gi, s.h0, s.c0, s.w_hh, s.b_hh, s.out}, tangents, [&](const Grads& x) {
    return rnn_layer_backward_definition(x[0], x[1], x[2], x[3], x[4], x[5], x[6], s.mode, s.reverse);
  });
}
// inputs (q, k, v): Note [Tangents by transposition] (the mask is a constant)
static Tensor attention_jvp(const Grads& t, const Tensor&, const SavesAttention& s) {
  return jvp_by_transposition({s.q, s.k, s.v}, t, [&](const Grads& x) {
    return Grads{attention(x[0], x[1], x[2], s.mask, s.is_causal, s.scale, s.dropout_p, s.seed)};
  })[0];
}
// inputs (grad, q, k, v): through the backward's differentiable definition, as layer_norm_backward's
static Grads attention_backward_jvp(const Grads& t, const Grads&, const SavesAttentionBackward& s) {
  return jvp_by_transposition({s.grad, s.q, s.k, s.v}, t, [&](const Grads& x) {
    return attention_backward_definition(x[0], x[1], x[2], x[3], s.mask, s.is_causal, s.scale, s.dropout_p, s.seed);
  });
}

// ---- the table ----
// One runner per ops.def line, reading the struct its line names; a primitive without a tangent formula, or one
// whose `s` is not that struct, does not compile.
template <class S, Tensor (*formula)(const Grads&, const Tensor&, const S&)>
static Grads run_formula(const Grads& t, const Grads& outs, const void* s) {
  return {formula(t, outs[0], *static_cast<const S*>(s))};
}
template <class S, Grads (*formula)(const Grads&, const Grads&, const S&)>
static Grads run_formula(const Grads& t, const Grads& outs, const void* s) {
  return formula(t, outs, *static_cast<const S*>(s));
}
using TangentFormula = Grads (*)(const Grads&, const Grads&, const void*);
static const TangentFormula kTangentFormulas[] = {
#define DG_OP(name, display, saves, signature, hot) &run_formula<saves, &name##_jvp>,
#include "ops.def"
};
static_assert(sizeof(kTangentFormulas) / sizeof(kTangentFormulas[0]) == (size_t)OpKind::COUNT,
              "every op in ops.def needs a tangent formula here");

// ---- levels (Note [Nested levels]) ----
namespace forward_ad {

std::atomic<int> g_open_levels{0};
static std::vector<int64_t> g_levels;  // the open levels, innermost last (entered and left by the Python API)
static int64_t g_next_level = 0;
static thread_local int64_t tl_visible_below = INT64_MAX;  // levels >= this are hidden (a formula is running)

int64_t enter_level() {
  g_levels.push_back(g_next_level++);
  g_open_levels.store((int)g_levels.size());
  return g_levels.back();
}

void exit_level(int64_t level) {
  DG_CHECK(!g_levels.empty() && g_levels.back() == level, RuntimeError, "exit_dual_level: level ", level,
           " is not the innermost open level (", g_levels.empty() ? -1 : g_levels.back(),
           "); leave dual levels in the reverse order of entering them.");
  g_levels.pop_back();
  g_open_levels.store((int)g_levels.size());
}

int64_t current_level() { return g_levels.empty() ? -1 : g_levels.back(); }
std::vector<int64_t> open_levels() { return g_levels; }

static bool is_open(int64_t level) {
  for (int64_t l : g_levels)
    if (l == level) return true;
  return false;
}

Tensor tangent_of(const Tensor& t, int64_t level) {
  if (!t || t->tangents.empty() || level >= tl_visible_below) return nullptr;
  for (const auto& [l, tangent] : t->tangents)
    if (l == level) return is_open(level) ? tangent : nullptr;
  return nullptr;
}

void set_tangent(const Tensor& t, int64_t level, const Tensor& tangent) {
  auto& list = t->tangents;
  for (size_t i = 0; i < list.size();) {  // drop this level's entry and those of closed levels
    if (list[i].first == level || !is_open(list[i].first)) list.erase(list.begin() + (long)i);
    else ++i;
  }
  if (tangent) list.emplace_back(level, tangent);
}

void copy_tangents(const Tensor& to, const Tensor& from) {
  if (from && !from->tangents.empty()) to->tangents = from->tangents;
}

static std::vector<std::pair<int64_t, Tensor>> detached_tangents(const Tensor& t) {
  std::vector<std::pair<int64_t, Tensor>> out;
  for (const auto& [level, tangent] : t->tangents) {
    Tensor d = alias(tangent);
    d->tangents = detached_tangents(tangent);
    out.emplace_back(level, d);
  }
  return out;
}

void take_tangents(const Tensor& self, const Tensor& value) {
  if (!active() || (self->tangents.empty() && (!value || value->tangents.empty()))) return;
  const std::vector<int64_t> levels = g_levels;
  for (int64_t level : levels) {
    Tensor t = value && is_differentiable(self->dtype) ? tangent_of(value, level) : nullptr;
    if (t && t->shape != self->shape) t = expand(t, self->shape);
    if (t && t->dtype != self->dtype) t = to_dtype(t, self->dtype);
    set_tangent(self, level, t);
  }
  // a write into a view writes its base too: the base's tangent takes the view's at the view's positions (torch
  // keeps a view's tangent a view of its base's; here each tensor holds its own)
  if (!self->is_view || !self->view_base) return;
  const Tensor& base = self->view_base;
  if (!base->is_contiguous() || !is_differentiable(base->dtype)) return;
  // a real view (real, imag, view_as_real) of a complex base: its positions are in the base's (real, imag) pairs
  const bool pairs = base->dtype != self->dtype;
  if (pairs && !is_complex(base->dtype)) return;
  Tensor positions;
  for (int64_t level : levels) {
    Tensor vt = tangent_of(self, level);
    Tensor bt = tangent_of(base, level);
    if (!vt && !bt) continue;
    if (!positions) positions = view_positions_kernel(self, pairs ? complex_as_real_view(base) : base);
    if (!bt) bt = full(base->shape, 0.0, base->dtype);
    if (!vt) vt = full(self->shape, 0.0, self->dtype);
    set_tangent(base, level, pairs ? real_as_complex_view(put(complex_as_real_view(contiguous_data(bt)),
                                                               positions, vt))
                                   : put(bt, positions, vt));
  }
}

bool sole_tangent(const Tensor& a, const Tensor& b, int64_t* level, Tensor* tangent) {
  if (g_levels.size() != 1 || a->tangents.empty()) return false;
  const int64_t l = g_levels[0];
  Tensor t = tangent_of(a, l);
  if (!t || tangent_of(b, l) || tangent_of(t, l) || any_requires_grad({&t, &b})) return false;
  *level = l;
  *tangent = t;
  return true;
}

struct VisibleBelow {
  int64_t prev;
  explicit VisibleBelow(int64_t level) : prev(tl_visible_below) { tl_visible_below = level; }
  ~VisibleBelow() { tl_visible_below = prev; }
};

void attach(OpKind kind, const Grads& outs, const std::vector<const Tensor*>& inputs, const void* saves) {
  bool any = false;
  for (const Tensor* in : inputs)
    if (in && *in && !(*in)->tangents.empty()) any = true;
  if (!any) return;
  const std::vector<int64_t> levels = g_levels;  // ascending: lower levels first
  for (int64_t level : levels) {
    if (level >= tl_visible_below) break;
    Grads t(inputs.size());
    bool has = false;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i] || !*inputs[i]) continue;
      t[i] = tangent_of(*inputs[i], level);
      has = has || t[i];
    }
    if (!has) continue;
    Grads tangents;
    {
      VisibleBelow hide(level);
      tangents = kTangentFormulas[(int)kind](t, outs, saves);
      for (size_t j = 0; j < outs.size() && j < tangents.size(); ++j) {
        Tensor& tj = tangents[j];
        if (!outs[j] || !tj || !is_differentiable(outs[j]->dtype)) continue;
        if (tj->shape != outs[j]->shape) tj = expand(tj, outs[j]->shape);
        if (tj->dtype != outs[j]->dtype) tj = to_dtype(tj, outs[j]->dtype);
      }
    }
    for (size_t j = 0; j < outs.size() && j < tangents.size(); ++j) {
      if (!outs[j] || !tangents[j] || !is_differentiable(outs[j]->dtype)) continue;
      bool is_input = false;  // an op that returned its input: the tangent is already there
      for (const Tensor* in : inputs) is_input = is_input || (in && in->get() == outs[j].get());
      if (!is_input) set_tangent(outs[j], level, tangents[j]);
    }
  }
  // The node just recorded may save an output (exp's, tanh's): its saved alias gets the tangents too, detached
  // (Note [Dual tensors]; the formula ran after the recording so that a tangent computed from `out` is
  // differentiable through out's own node).
  for (const Tensor& out : outs) {
    if (!out || out->tangents.empty() || !out->grad_fn) continue;
    for (const SavedTensor* saved : out->grad_fn->saved_tensors()) {
      const Tensor& alias = saved->data;
      if (saved->is_output && alias && alias->storage == out->storage && alias->offset == out->offset &&
          alias->shape == out->shape)
        alias->tangents = detached_tangents(out);
    }
  }
}

}  // namespace forward_ad
}  // namespace dyngrad
