// derivatives.cpp: EVERY backward formula, one function per primitive op, in ops.def order.
// Mirrored by python/dyngrad/reference/derivatives.py.
// Conventions: `grad` is dL/d(out) (`grads`, one per output, null where none arrived, for an op of several
// outputs); `s` is what the forward saved, by the names of the struct the op's ops.def line names (saved.h): s.a,
// s.out, s.dims, s.keepdim... with tensors already unpacked (Note [Named saved state]); `n` is the node:
// n.needs_input_grad(i), and in_shape(n, i) / n.input_meta[i] the shape/dtype of input i. A plain unary op's
// formula (a DG_KERNEL_OP of signature unary or unary_float) takes no node, and is its tangent formula too (Note
// [Tangents from backward formulas]).
// Formulas ignore broadcasting: the engine sums each gradient to its input's shape (Note [Unbroadcast] in
// engine.h). They are written in differentiable ops, so with create_graph=True the backward pass is itself
// recorded and can be differentiated again.
//
// Note [Fused derivatives as primitives]: a derivative worth a fused kernel is a primitive of its own, as in
// PyTorch's derivatives.yaml: tanh's formula is tanh_backward(grad, out), whose forward is one pass over both
// tensors and whose own formula below is written in differentiable ops, so that create_graph differentiates it
// again. So there is one path per derivative: the formula never asks whether the backward is being recorded, and
// a recorded backward runs the same kernels as an unrecorded one. The fused derivatives are tanh_, sigmoid_,
// gelu_ and threshold_backward (relu's), softmax_ and log_softmax_backward, cross_entropy_backward,
// layer_norm_backward, rnn_layer_backward and attention_backward.
//
// Note [Derivatives of fused backwards]: the derivatives of layer_norm_backward, rnn_layer_backward and
// attention_backward would take a page each in closed form. Instead each has a differentiable definition (the backward written in ops, the same
// maths as its kernel: *_backward_definition below), and its formula is the vector-Jacobian product of that
// definition (definition_vjp): the definition is recorded from stand-ins of the node's inputs, and engine.h's vjp()
// runs just that graph. A stand-in of an input with history is an identity view of it (a ReshapeBackward node), so
// when the formula itself records (create_graph), the result reaches the inputs' histories and can be
// differentiated once more; distinct stand-ins keep two inputs apart even when they are one tensor.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "derivatives.h"
#include "engine.h"
#include "grad_mode.h"
#include "kernels/kernels.h"
#include "ops.h"
#include "saved.h"

namespace dyngrad {

using Grads = std::vector<Tensor>;

static Tensor num(double v, const Tensor& like) { return scalar_tensor(v, like->dtype); }

// Note [Complex gradients]: torch's convention for complex tensors (its autograd notes, "conjugate Wirtinger
// calculus"): a real loss L of a complex z = x + iy gets z.grad = dL/dx + i dL/dy = 2 dL/d(conj z), the direction
// of steepest ascent (|z|^2 gives 2z). The chain rule then multiplies the incoming gradient by the CONJUGATE of a
// holomorphic op's derivative, grad * conj(f'(z)) (mul: da = grad * conj(b); matmul: da = grad @ b^H). cj() is that conjugate, and the identity on real tensors, so each formula is written once
// for both. A real input reached by a complex gradient gets its real part (the engine's validate_gradient).
static Tensor cj(const Tensor& t) { return is_complex(t->dtype) ? conj(t) : t; }
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

// Note [Derivatives of fused backwards]: the VJP of definition(inputs) given one cotangent per output.
template <class Definition>
static Grads definition_vjp(const OpNode& n, const Grads& inputs, const Grads& cotangents, Definition definition) {
  const uint64_t first_node = next_sequence_nr();
  Grads xs(inputs.size()), outputs;
  {
    GradModeGuard recording(true);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i]) continue;
      if (n.needs_input_grad(i) && inputs[i]->requires_grad) {
        xs[i] = reshape(inputs[i], inputs[i]->shape);  // a stand-in with a node of its own
      } else {
        xs[i] = alias(inputs[i]);  // no history: a leaf of the definition's graph, if it needs a gradient
        xs[i]->requires_grad = n.needs_input_grad(i);
      }
    }
    outputs = definition(xs);
  }
  Grads grads = vjp(outputs, cotangents, xs, first_node);
  for (size_t i = 0; i < grads.size(); ++i)
    if (!n.needs_input_grad(i)) grads[i] = nullptr;
  return grads;
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
  return {n.needs_input_grad(0) ? mul(grad, cj(s.b)) : nullptr, n.needs_input_grad(1) ? mul(grad, cj(s.a)) : nullptr};
}

// out = a / b  ->  da = grad / b, db = -grad * (a / b) / b: as torch, not over b * b, whose float16 square
// overflows from |b| = 256 (x / x.norm() of [300, 400] in float16 lost the norm's path: gradient [0.002, 0.002])
static Grads div_backward(const Tensor& grad, const OpNode& n, const SavesAB& s) {
  const Tensor& b = s.b;
  Tensor da = n.needs_input_grad(0) ? div(grad, cj(b)) : nullptr;
  Tensor db = n.needs_input_grad(1) ? neg(mul(grad, cj(div(div(s.a, b), b)))) : nullptr;
  return {da, db};
}

// out = -a  ->  da = -grad
static Grads neg_backward(const Tensor& grad, const OpNode&, const SavesNothing&) { return {neg(grad)}; }

// out = a ** b  ->  da = grad * b * a^(b-1), db = grad * out * log(a)  (0 where a == 0, as torch)
static Grads pow_backward(const Tensor& grad, const OpNode& n, const SavesABOut& s) {
  const Tensor &a = s.a, &b = s.b;
  Tensor da = n.needs_input_grad(0) ? mul(grad, cj(mul(b, pow(a, sub(b, num(1, b)))))) : nullptr;
  Tensor db;
  if (n.needs_input_grad(1)) {
    Tensor safe_log = where(compare(CompareOp::Eq, a, num(0, a)), num(0, a), log(a));
    db = mul(grad, cj(mul(s.out, safe_log)));
  }
  return {da, db};
}

// out = a ** p  ->  da = grad * p * a^(p-1)
static Grads pow_scalar_backward(const Tensor& grad, const OpNode&, const SavesPowScalar& s) {
  double p = s.exponent;
  if (p == 0) return {mul(grad, num(0, grad))};
  const Tensor& a = s.a;
  Tensor d = p == 2 ? mul(a, num(2, a)) : mul(pow_scalar(a, p - 1), num(p, a));
  return {mul(grad, cj(d))};
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

// out = atan2(a, b)  ->  da = grad b / (a^2 + b^2), db = -grad a / (a^2 + b^2); 0 at the origin (as torch)
static Grads atan2_backward(const Tensor& grad, const OpNode& n, const SavesAB& s) {
  const Tensor &a = s.a, &b = s.b;
  Tensor r2 = add(mul(a, a), mul(b, b));
  Tensor origin = compare(CompareOp::Eq, r2, num(0, r2));
  Tensor inv = where(origin, num(0, r2), div(num(1, r2), where(origin, num(1, r2), r2)));
  return {n.needs_input_grad(0) ? mul(mul(grad, b), inv) : nullptr,
          n.needs_input_grad(1) ? neg(mul(mul(grad, a), inv)) : nullptr};
}

// out = remainder(a, b) = a - floor(a / b) b  ->  da = grad, db = -grad floor(a / b); fmod the same with trunc. The
// quotient is piecewise constant, so it is computed by the kernel alone, a constant of the formula (as torch's
// div(rounding_mode=...), which has zero derivative)
static Tensor quotient(BinaryKind k, const Tensor& grad, const SavesAB& s, const char* op) {
  return binary_kernel(k, s.a, s.b, grad->dtype, op);
}
static Grads remainder_backward(const Tensor& grad, const OpNode& n, const SavesAB& s) {
  return {n.needs_input_grad(0) ? grad : nullptr,
          n.needs_input_grad(1) ? neg(mul(grad, quotient(BinaryKind::FloorDivide, grad, s, "remainder"))) : nullptr};
}
static Grads fmod_backward(const Tensor& grad, const OpNode& n, const SavesAB& s) {
  return {n.needs_input_grad(0) ? grad : nullptr,
          n.needs_input_grad(1) ? neg(mul(grad, quotient(BinaryKind::TruncDivide, grad, s, "fmod"))) : nullptr};
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
static Grads exp_backward(const Tensor& grad, const SavesOut& s) { return {mul(grad, cj(s.out))}; }

// out = log(a)  ->  da = grad / a
static Grads log_backward(const Tensor& grad, const SavesA& s) { return {div(grad, cj(s.a))}; }

// out = sqrt(a)  ->  da = grad / (2 out)
static Grads sqrt_backward(const Tensor& grad, const SavesOut& s) {
  return {div(grad, cj(mul(s.out, num(2, s.out))))};
}

// out = a^(-1/2)  ->  da = -grad * out^3 / 2
static Grads rsqrt_backward(const Tensor& grad, const SavesOut& s) {
  return {mul(grad, cj(mul(pow_scalar(s.out, 3), num(-0.5, s.out))))};
}

// Note [Differentiable sgn of abs]: abs's gradient (grad * sgn(a)) and tangent (Re(conj(sgn(a)) t)) of a complex
// a hold sgn(a), whose own derivative d sgn = (da - sgn Re(conj(sgn) da)) / |a| is not zero: a second derivative of
// |a| (a Hessian, forward over reverse, reverse over forward) needs it. The kernel sign's derivative is zero (right
// for real tensors, which keep it), so for a complex a sgn is a / |a| through ops (0 at a = 0, as torch's sgn):
// the kernel's values, and one path whether or not the backward is recorded (test_one_path_per_derivative).
Tensor abs_sgn(const Tensor& a) {
  if (!is_complex(a->dtype)) return sign(a);
  Tensor magnitude = abs(a);
  Tensor zero = compare(CompareOp::Eq, magnitude, num(0, magnitude));
  return where(zero, num(0, a), div(a, where(zero, num(1, magnitude), magnitude)));
}

// out = |a|  ->  da = grad * sign(a) (sign(NaN) = 0: no gradient through a NaN, as torch); a complex a: grad * sgn(a),
// sgn(a) = a / |a| (Note [Differentiable sgn of abs])
static Grads abs_backward(const Tensor& grad, const SavesA& s) { return {mul(grad, abs_sgn(s.a))}; }

// out = sin(a)  ->  da = grad * cos(a)
static Grads sin_backward(const Tensor& grad, const SavesA& s) { return {mul(grad, cj(cos(s.a)))}; }

// out = cos(a)  ->  da = -grad * sin(a)
static Grads cos_backward(const Tensor& grad, const SavesA& s) {
  return {neg(mul(grad, cj(sin(s.a))))};
}

// out = tanh(a)  ->  da = grad * (1 - out^2)
static Grads tanh_backward(const Tensor& grad, const SavesOut& s) { return {tanh_backward(grad, s.out)}; }

// out = grad * (1 - x^2)  ->  dgrad = tanh_backward(g, x), dx = -2 g grad x
// (complex: out = grad * conj(1 - x^2), so dgrad = g * (1 - x^2), dx = conj(-2 g conj(grad) x))
static Grads tanh_backward_backward(const Tensor& g, const OpNode& n, const SavesGradX& s) {
  const Tensor& x = s.x;
  if (is_complex(x->dtype))
    return {n.needs_input_grad(0) ? mul(g, sub(num(1, x), mul(x, x))) : nullptr,
            n.needs_input_grad(1) ? conj(mul(mul(g, cj(s.grad)), mul(x, num(-2, x)))) : nullptr};
  return {n.needs_input_grad(0) ? tanh_backward(g, x) : nullptr,
          n.needs_input_grad(1) ? mul(mul(g, s.grad), mul(x, num(-2, x))) : nullptr};
}

// out = sigmoid(a)  ->  da = grad * out * (1 - out)
static Grads sigmoid_backward(const Tensor& grad, const SavesOut& s) {
  return {sigmoid_backward(grad, s.out)};
}

// out = grad * x * (1 - x)  ->  dgrad = sigmoid_backward(g, x), dx = g grad (1 - 2x)
static Grads sigmoid_backward_backward(const Tensor& g, const OpNode& n, const SavesGradX& s) {
  const Tensor& x = s.x;
  if (is_complex(x->dtype))  // as tanh_backward_backward: out = grad * conj(x (1 - x))
    return {n.needs_input_grad(0) ? mul(g, mul(x, sub(num(1, x), x))) : nullptr,
            n.needs_input_grad(1) ? conj(mul(mul(g, cj(s.grad)), sub(num(1, x), mul(x, num(2, x))))) : nullptr};
  return {n.needs_input_grad(0) ? sigmoid_backward(g, x) : nullptr,
          n.needs_input_grad(1) ? mul(mul(g, s.grad), sub(num(1, x), mul(x, num(2, x)))) : nullptr};
}

// out = max(a, 0)  ->  da = grad * !(out <= 0) (a NaN passes its grad through, as torch's threshold_backward)
static Grads relu_backward(const Tensor& grad, const SavesOut& s) {
  return {threshold_backward(grad, s.out)};
}

// out = grad * !(x <= 0)  ->  dgrad = threshold_backward(g, x); dx = 0 almost everywhere (zeros, as torch)
static Grads threshold_backward_backward(const Tensor& g, const OpNode& n, const SavesX& s) {
  return {n.needs_input_grad(0) ? threshold_backward(g, s.x) : nullptr,
          n.needs_input_grad(1) ? zeros(in_shape(n, 1), in_dtype(n, 1)) : nullptr};
}

// out = sign(a)  ->  da = 0 (piecewise constant)
static Grads sign_backward(const Tensor& grad, const SavesNothing&) { return {mul(grad, num(0, grad))}; }

// out = a > 0 ? a : slope * a  ->  da = grad * (a > 0 ? 1 : slope)
static Grads leaky_relu_backward(const Tensor& grad, const OpNode&, const SavesLeakyRelu& s) {
  const Tensor& a = s.a;
  return {mul(grad, where(compare(CompareOp::Gt, a, num(0, a)), num(1, grad), num(s.slope, grad)))};
}

// out = a * Phi(a)  ->  da = grad * (Phi(a) + a * phi(a))
static Grads gelu_backward(const Tensor& grad, const SavesA& s) { return {gelu_backward(grad, s.a)}; }

// out = grad * (Phi(x) + x phi(x))  ->  dgrad = gelu_backward(g, x), dx = g grad phi(x) (2 - x^2)
static Grads gelu_backward_backward(const Tensor& g, const OpNode& n, const SavesGradX& s) {
  const Tensor& x = s.x;
  Tensor dx;
  if (n.needs_input_grad(1)) {
    Tensor pdf = mul(exp(mul(mul(x, x), num(-0.5, x))), num(0.3989422804014327, x));
    dx = mul(mul(g, s.grad), mul(pdf, sub(num(2, x), mul(x, x))));
  }
  return {n.needs_input_grad(0) ? gelu_backward(g, x) : nullptr, dx};
}

// out = log(1 + exp(beta a)) / beta (linear above threshold)  ->  da = grad * sigmoid(beta a) (1 above threshold)
static Grads softplus_backward(const Tensor& grad, const OpNode&, const SavesSoftplus& s) {
  const Tensor& a = s.a;
  Tensor ba = mul(a, num(s.beta, a));
  return {where(compare(CompareOp::Gt, ba, num(s.threshold, a)), grad, mul(grad, sigmoid(ba)))};
}

// out = erf(a)  ->  da = grad * 2/sqrt(pi) * exp(-a^2)
static Grads erf_backward(const Tensor& grad, const SavesA& s) {
  const Tensor& a = s.a;
  return {mul(grad, mul(exp(neg(mul(a, a))), num(1.1283791670955126, a)))};
}

// out = log1p(a)  ->  da = grad / (1 + a)
static Grads log1p_backward(const Tensor& grad, const SavesA& s) {
  return {div(grad, cj(add(s.a, num(1, s.a))))};
}

// out = expm1(a)  ->  da = grad * (out + 1)
static Grads expm1_backward(const Tensor& grad, const SavesOut& s) {
  return {mul(grad, cj(add(s.out, num(1, s.out))))};
}

// out = log2(a)  ->  da = grad / (a ln 2)
static Grads log2_backward(const Tensor& grad, const SavesA& s) {
  return {div(grad, cj(mul(s.a, num(0.69314718055994530942, s.a))))};
}

// out = log10(a)  ->  da = grad / (a ln 10)
static Grads log10_backward(const Tensor& grad, const SavesA& s) {
  return {div(grad, cj(mul(s.a, num(2.30258509299404568402, s.a))))};
}

// out = tan(a)  ->  da = grad * (1 + out^2)
static Grads tan_backward(const Tensor& grad, const SavesOut& s) {
  return {mul(grad, cj(add(mul(s.out, s.out), num(1, s.out))))};
}

// out = asin(a)  ->  da = grad / sqrt(1 - a^2) (inf at |a| = 1, NaN beyond, as torch)
static Grads asin_backward(const Tensor& grad, const SavesA& s) {
  return {mul(grad, cj(rsqrt(sub(num(1, s.a), mul(s.a, s.a)))))};
}

// out = acos(a)  ->  da = -grad / sqrt(1 - a^2)
static Grads acos_backward(const Tensor& grad, const SavesA& s) {
  return {neg(mul(grad, cj(rsqrt(sub(num(1, s.a), mul(s.a, s.a))))))};
}

// out = atan(a)  ->  da = grad / (1 + a^2)
static Grads atan_backward(const Tensor& grad, const SavesA& s) {
  return {div(grad, cj(add(mul(s.a, s.a), num(1, s.a))))};
}

// out = sinh(a)  ->  da = grad * cosh(a)
static Grads sinh_backward(const Tensor& grad, const SavesA& s) { return {mul(grad, cj(cosh(s.a)))}; }

// out = cosh(a)  ->  da = grad * sinh(a)
static Grads cosh_backward(const Tensor& grad, const SavesA& s) { return {mul(grad, cj(sinh(s.a)))}; }

// out = asinh(a)  ->  da = grad / sqrt(a^2 + 1)
static Grads asinh_backward(const Tensor& grad, const SavesA& s) {
  return {mul(grad, cj(rsqrt(add(mul(s.a, s.a), num(1, s.a)))))};
}

// out = atanh(a)  ->  da = grad / (1 - a^2) (inf at |a| = 1, as torch)
static Grads atanh_backward(const Tensor& grad, const SavesA& s) {
  return {div(grad, cj(sub(num(1, s.a), mul(s.a, s.a))))};
}

// out = acosh(a)  ->  da = grad / sqrt(a^2 - 1) for real a (torch's values outside the domain too: 0 at -inf, inf
// at -1); for complex a, grad / conj(sqrt(a - 1) sqrt(a + 1)), the derivative of the principal branch everywhere:
// 1 / sqrt(a^2 - 1) has the wrong sign where Re a < 0 (gradcheck at -2 + 0.5i tells the two apart)
static Grads acosh_backward(const Tensor& grad, const SavesA& s) {
  if (!is_complex(s.a->dtype)) return {mul(grad, rsqrt(sub(mul(s.a, s.a), num(1, s.a))))};
  return {mul(grad, conj(mul(rsqrt(sub(s.a, num(1, s.a))), rsqrt(add(s.a, num(1, s.a))))))};
}

// out = conj(a)  ->  da = conj(grad)
static Grads conj_backward(const Tensor& grad, const SavesNothing&) { return {cj(grad)}; }

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

// out = cumsum(a, dim)  ->  da_i = sum_{k >= i} grad_k: the running sum the other way
static Grads cumsum_backward(const Tensor& grad, const OpNode&, const SavesScan& s) {
  return {cumsum(grad, s.dim, !s.reverse)};
}

// out = cumprod(a)  ->  da_k = sum_{j >= k} grad_j prod_{i <= j, i != k} a_i = L_k S_k, with L_k = prod_{i < k} a_i
// (out moved one place: 1 at the start) and S_k = grad_k + a_{k+1} S_{k+1}, the linear recurrence the other way
// over a moved back (0 past the end). No division: exact where a holds zeros, and so is its own derivative (torch
// divides by a when a has no zero, and has an O(n^2) formula for create_graph when it has)
static Grads cumprod_backward(const Tensor& grad, const OpNode&, const SavesScanAOut& s) {
  Tensor before = scan_shift(s.out, s.dim, s.reverse, 1);
  Tensor after = linear_recurrence(grad, scan_shift(s.a, s.dim, !s.reverse, 0), s.dim, !s.reverse);
  return {mul(before, after)};
}

// the lowest finite value of a floating dtype (torch's logcumsumexp_backward puts it where log|grad| is -inf)
static double lowest_finite(DType dt) {
  switch (dt) {
    case DType::Float16: return -65504.0;
    case DType::Float32: return -(double)std::numeric_limits<float>::max();
    case DType::BFloat16: return -3.3895313892515355e38;
    default: return std::numeric_limits<double>::lowest();
  }
}

// out = logcumsumexp(a)  ->  da_i = sum_{k >= i} grad_k exp(a_i - out_k), summed in log space with grad's positive
// and negative parts apart (torch's logcumsumexp_backward): exp(a_i + logcumsumexp(log|grad| - out) the other way).
// log|grad| is taken where grad is not 0 (1 stands in), so that its own derivative there is 0, not NaN.
static Grads logcumsumexp_backward(const Tensor& grad, const OpNode&, const SavesScanAOut& s) {
  Tensor zero = num(0, grad), lowest = num(lowest_finite(grad->dtype), grad);
  Tensor log_abs = log(abs(where(compare(CompareOp::Eq, grad, zero), num(1, grad), grad)));
  Tensor parts[2];
  const CompareOp signs[2] = {CompareOp::Gt, CompareOp::Lt};
  for (int i = 0; i < 2; ++i) {
    Tensor log_part = where(compare(signs[i], grad, zero), log_abs, lowest);
    parts[i] = exp(add(logcumsumexp(sub(log_part, s.out), s.dim, !s.reverse), s.a));
  }
  return {sub(parts[0], parts[1])};
}

// y = linear_recurrence(b, c), y_k = b_k + c_k y_{k-1}  ->  gb_k = grad_k + c_{k+1} gb_{k+1} (the recurrence the
// other way over c moved back: 0 past the end) and gc_k = gb_k y_{k-1} (y moved one place: 0 at the start)
static Grads linear_recurrence_backward(const Tensor& grad, const OpNode& n, const SavesRecurrence& s) {
  Tensor gb = linear_recurrence(grad, scan_shift(s.c, s.dim, !s.reverse, 0), s.dim, !s.reverse);
  return {n.needs_input_grad(0) ? gb : nullptr,
          n.needs_input_grad(1) ? mul(gb, scan_shift(s.out, s.dim, s.reverse, 0)) : nullptr};
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
  if (n.needs_input_grad(0)) da = s.a_transposed ? mT(matmul(cj(s.b), mT(grad))) : matmul(grad, cj(mT(s.b)));
  if (n.needs_input_grad(1)) db = s.b_transposed ? mT(matmul(mT(grad), cj(s.a))) : matmul(cj(mT(s.a)), grad);
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

// A new tensor of meta's shape and dtype, zero outside the window [start, start + length) of step `step` along dim
// (the caller writes the window next). A window of step 1 is, in each block of the dims before dim, one contiguous
// run: only the rest of each block is cleared (an LSTM cell's h and c halves; out[:, -1] of an LSTM's (N, L, H)
// output clears 49 of 50 steps' rows, not all). Runs shorter than 64 bytes: one memset of it all.
Tensor zeros_outside_window(const InputMeta& meta, int64_t dim, int64_t start, int64_t step, int64_t length) {
  Tensor cur = empty(meta.shape, meta.dtype);
  const size_t item = dtype_size(meta.dtype), total = (size_t)cur->numel * item;
  char* base = static_cast<char*>(cur->storage->data);
  const size_t row = total ? (size_t)cur->strides[dim] * item : 0;
  if (total && step == 1 && row * (size_t)length >= 64) {
    const size_t block = row * (size_t)meta.shape[dim], blocks = total / block;
    const size_t lo = (size_t)start * row, hi = std::min(block, lo + (size_t)length * row);
    for (size_t b = 0; b < blocks; ++b) {
      std::memset(base + b * block, 0, lo);
      std::memset(base + b * block + hi, 0, block - hi);
    }
  } else if (total) {
    std::memset(base, 0, total);
  }
  return cur;
}

// Note [Slice gradients in place]: the gradient of out = a[..., start::step, ...] is zeros of a's shape with the
// incoming gradient in the slice (slice_scatter). A value cut into pieces (chunk, split, x[:, t] per time step)
// would get one zero-filled full-size tensor per piece, then a full-size add per piece: O(pieces * size) work
// for O(size) data. When no graph is built (Note [Gradients written in place]), slice instead writes (or adds)
// each piece's gradient into the window of its input's pending buffer, made once per backward (zeros, or a private
// copy of what was pending). Same numbers: x + 0 == x and each window element gets the same k_add as the
// full-size sum. False (the formula above runs as usual) when this does not apply.
static bool slice_backward_in_place(Grads& grads, OpNode& n, const SavesSlice& s) {
  if (grads.size() != 1 || !grads[0] || n.next_edges.size() != 1) return false;
  if (!grads[0]->tangents.empty()) return false;  // forward over reverse: the op carries the tangent
  const Edge& next = n.next_edges[0];
  const InputMeta& meta = n.input_meta[0];
  const Tensor& g = grads[0];
  if (!next.fn || g->dtype != meta.dtype || !is_floating(g->dtype) || g->ndim() != (int64_t)meta.shape.size())
    return false;
  Shape window_shape = meta.shape;
  window_shape[s.dim] = g->shape[s.dim];
  if (window_shape != g->shape) return false;
  Tensor& cur = next.fn->pending_slot(next.input_nr);
  if (cur && (cur->shape != meta.shape || cur->dtype != meta.dtype || !cur->tangents.empty())) return false;
  const bool fresh = !cur;
  if (fresh) {
    cur = zeros_outside_window(meta, s.dim, s.start, s.step, g->shape[s.dim]);
  } else if (!owned_buffer(cur)) {
    cur = contiguous_copy(cur, cur->dtype);
  }
  Shape strides = cur->strides;
  strides[s.dim] *= s.step;
  Tensor window = make_view(cur, window_shape, strides, s.start * cur->strides[s.dim]);
  if (fresh) copy_into(window, g);
  else add_into_kernel(window, g);
  return true;
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
    // an empty input (one torch skips, too) gets an empty zero gradient of its shape, as torch's: `.grad` is set
    if (!n.needs_input_grad(i)) grads.push_back(nullptr);
    else if (length > 0) grads.push_back(slice(grad, s.dim, offset, offset + length, 1));
    else grads.push_back(zeros(in_shape(n, i), in_dtype(n, i)));
    offset += length;
  }
  return grads;
}

// out = view_as_real(a)  ->  da = view_as_complex(grad) (made contiguous: its last dim must have stride 1)
static Grads view_as_real_backward(const Tensor& grad, const OpNode&, const SavesNothing&) {
  return {view_as_complex(contiguous(grad))};
}

// out = view_as_complex(a)  ->  da = view_as_real(grad)
static Grads view_as_complex_backward(const Tensor& grad, const OpNode&, const SavesNothing&) {
  return {view_as_real(grad)};
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

// out = softmax(a, dim)  ->  da = out * (grad - sum(grad * out, dim))
static Grads softmax_backward(const Tensor& grad, const OpNode&, const SavesSoftmax& s) {
  return {softmax_backward(grad, s.out, s.dim)};
}

// out = y * (grad - sum(grad * y))  ->  dgrad = softmax_backward(g, y), dy = g (grad - sum(grad y)) - grad sum(g y)
static Grads softmax_backward_backward(const Tensor& g, const OpNode& n, const SavesSoftmaxBackward& s) {
  const Tensor &y = s.out, &grad = s.grad;
  const Dims dims = y->ndim() ? Dims{s.dim} : Dims{};
  Tensor dy;
  if (n.needs_input_grad(1))
    dy = sub(mul(g, sub(grad, sum(mul(grad, y), dims, true))), mul(grad, sum(mul(g, y), dims, true)));
  return {n.needs_input_grad(0) ? softmax_backward(g, y, s.dim) : nullptr, dy};
}

// out = log_softmax(a, dim)  ->  da = grad - exp(out) * sum(grad, dim)
static Grads log_softmax_backward(const Tensor& grad, const OpNode&, const SavesSoftmax& s) {
  return {log_softmax_backward(grad, s.out, s.dim)};
}

// out = grad - exp(y) sum(grad)  ->  dgrad = g - sum(g exp(y)), dy = -g exp(y) sum(grad)
static Grads log_softmax_backward_backward(const Tensor& g, const OpNode& n, const SavesSoftmaxBackward& s) {
  const Tensor& y = s.out;
  const Dims dims = y->ndim() ? Dims{s.dim} : Dims{};
  Tensor e = exp(y);
  return {n.needs_input_grad(0) ? sub(g, sum(mul(g, e), dims, true)) : nullptr,
          n.needs_input_grad(1) ? neg(mul(mul(g, e), sum(s.grad, dims, true))) : nullptr};
}

// out = reduce(-sum_c q[i,c] log_softmax(x)[i,c])  ->  dx = (softmax(x) - q) * grad (per row; / count for mean)
// where q is the (label-smoothed) one-hot target and ignored rows get 0.
static Grads cross_entropy_backward(const Tensor& grad, const OpNode&, const SavesCrossEntropy& s) {
  return {cross_entropy_backward(grad, s.logits, s.target, s.reduction, s.ignore_index, s.label_smoothing), nullptr};
}

// out = ((p - q) * keep) * scale, p = softmax(x) by rows, scale = grad (none: per row), grad / kept (mean), grad (sum)
//   ->  dgrad = sum over each row (none) or everything of g (p - q) keep, / kept for a mean;
//       dx = softmax_backward(g keep scale, p)
static Grads cross_entropy_backward_backward(const Tensor& g, const OpNode& n, const SavesCrossEntropyBackward& s) {
  const Tensor& logits = s.logits;
  const bool batched = logits->ndim() == 2;
  const int64_t N = batched ? logits->shape[0] : 1, C = logits->shape[batched ? 1 : 0];
  const CrossEntropyTarget target =
      cross_entropy_target_kernel(s.target, C, s.ignore_index, s.label_smoothing, logits->dtype);
  const Tensor p = softmax(batched ? logits : reshape(logits, {1, C}), 1);
  const Tensor g2 = batched ? g : reshape(g, {1, C});
  const double kept = (double)std::max<int64_t>(target.kept, 1);
  Tensor dgrad, dx;
  if (n.needs_input_grad(0)) {
    Tensor r = mul(mul(sub(p, target.q), target.keep), g2);
    if (s.reduction == 0) dgrad = reshape(sum(r, {1}, false), in_shape(n, 0));
    else dgrad = s.reduction == 1 ? div(sum(r, {}, false), num(kept, r)) : sum(r, {}, false);
  }
  if (n.needs_input_grad(1)) {
    const Tensor& grad = s.grad;
    Tensor scale = s.reduction == 0 ? reshape(grad, {N, 1}) : s.reduction == 1 ? div(grad, num(kept, grad)) : grad;
    dx = softmax_backward(mul(mul(g2, target.keep), scale), p, 1);
    if (!batched) dx = reshape(dx, {C});
  }
  return {dgrad, dx, nullptr};
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

// out = xhat * weight + bias over the last ndims dims  ->  layer_norm_backward (Note [Fused layer_norm])
static Grads layer_norm_backward(const Tensor& grad, const OpNode& n, const SavesLayerNorm& s) {
  return layer_norm_backward(grad, s.a, s.weight, s.ndims, s.eps,
                             {n.needs_input_grad(0), n.needs_input_grad(1), n.needs_input_grad(2)});
}

// layer_norm_backward's differentiable definition: xhat = (a - mean) * rstd, rstd = 1 / sqrt(var + eps) (biased
// var); with g = grad * weight (grad without a weight), per row of the last ndims dims:
//   da = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dweight = sum(grad * xhat),  dbias = sum(grad)
// the sums over the leading dims.
Grads layer_norm_backward_definition(const Tensor& grad, const Tensor& a, const Tensor& w, int64_t ndims,
                                            double eps) {
  Dims dims, leading;
  for (int64_t d = 0; d < a->ndim(); ++d) (d < a->ndim() - ndims ? leading : dims).push_back(d);
  auto over_rows = [&](const Tensor& t) { return leading.empty() ? t : sum(t, leading, false); };
  Tensor xc = sub(a, mean(a, dims, true));
  Tensor rstd = rsqrt(add(mean(mul(xc, xc), dims, true), num(eps, a)));
  Tensor xhat = mul(xc, rstd);
  Tensor g = w ? mul(grad, w) : grad;
  Tensor da = mul(rstd, sub(sub(g, mean(g, dims, true)), mul(xhat, mean(mul(g, xhat), dims, true))));
  return {da, w ? over_rows(mul(grad, xhat)) : nullptr, over_rows(grad)};
}

// out = (da, dweight, dbias)  ->  the VJP of the definition (Note [Derivatives of fused backwards])
static Grads layer_norm_backward_backward(const Grads& grads, const OpNode& n, const SavesLayerNormBackward& s) {
  return definition_vjp(n, {s.grad, s.a, s.weight}, grads, [&](const Grads& x) {
    return layer_norm_backward_definition(x[0], x[1], x[2], s.ndims, s.eps);
  });
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
// rnn_layer_backward runs this in kernels/rnn.cpp, with the activations the forward kept (ws), each step's cell
// derivative in one pass, dW as one product; rnn_layer_backward_definition, below, in differentiable ops,
// recomputing the activations from the saved inputs and output.
static Grads rnn_layer_backward(const Tensor& grad, const OpNode& n, const SavesRnnLayer& s) {
  return rnn_layer_backward(grad, s.gi, s.h0, s.c0, s.w_hh, s.b_hh, s.out, s.ws, s.mode, s.reverse,
                            {n.needs_input_grad(0), n.needs_input_grad(1), n.needs_input_grad(2),
                             n.needs_input_grad(3), n.needs_input_grad(4)});
}

Grads rnn_layer_backward_definition(const Tensor& grad, const Tensor& gi, const Tensor& h0, const Tensor& c0,
                                           const Tensor& w, const Tensor& b, const Tensor& out, int64_t mode,
                                           bool reverse) {
  const int64_t L = gi->shape[0], N = h0->shape[0], H = h0->shape[1];
  auto time = [&](int64_t k) { return reverse ? L - 1 - k : k; };
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
    if (mode == kLstm) {
      const Tensor a = add(x, gh);
      const Tensor si = sigmoid(gate(a, 0)), sf = sigmoid(gate(a, 1)), tg = tanh(gate(a, 2)), so = sigmoid(gate(a, 3));
      const Tensor cs = select(out, 0, 1);
      const Tensor cp = k == 0 ? c0 : select(cs, 0, time(k - 1));
      const Tensor tc = tanh(select(cs, 0, t));
      Tensor dct = add(select(select(grad, 0, 1), 0, t), mul(mul(dh, so), sub(one, mul(tc, tc))));
      if (dc) dct = add(dct, dc);
      Tensor da = cat({mul(mul(dct, tg), mul(si, sub(one, si))), mul(mul(dct, cp), mul(sf, sub(one, sf))),
                       mul(mul(dct, si), sub(one, mul(tg, tg))), mul(mul(dh, tc), mul(so, sub(one, so)))},
                      1);
      dc = mul(dct, sf);
      dgi[t] = dgh[k] = da;
      dh = matmul(da, w);
    } else if (mode == kGru) {
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
      const Tensor da = mode == kRnnTanh ? mul(dh, sub(one, mul(h, h)))
                                         : where(compare(CompareOp::Le, h, num(0, h)), num(0, dh), dh);
      dgi[t] = dgh[k] = da;
      dh = matmul(da, w);
    }
    h_prev[k] = hp;
  }
  Tensor all_dgh = reshape(stack(dgh, 0), {L * N, w->shape[0]});
  Tensor dw = matmul(mT(all_dgh), reshape(stack(h_prev, 0), {L * N, H}));
  Tensor db = b ? sum(all_dgh, {0}, false) : nullptr;
  return {stack(dgi, 0), dh, c0 ? dc : nullptr, dw, db};
}

// out = (dgi, dh0, dc0, dw_hh, db_hh)  ->  the VJP of the definition (Note [Derivatives of fused backwards])
static Grads rnn_layer_backward_backward(const Grads& grads, const OpNode& n, const SavesRnnLayerBackward& s) {
  return definition_vjp(n, {s.grad, s.gi, s.h0, s.c0, s.w_hh, s.b_hh, s.out, nullptr}, grads, [&](const Grads& x) {
    return rnn_layer_backward_definition(x[0], x[1], x[2], x[3], x[4], x[5], x[6], s.mode, s.reverse);
  });
}

// out = softmax(scale q k^T + mask) v  ->  attention_backward (Note [Fused attention] in ops_nn.cpp)
static Grads attention_backward(const Tensor& grad, const OpNode& n, const SavesAttention& s) {
  return attention_backward(grad, s.q, s.k, s.v, s.mask, s.out, s.lse, s.is_causal, s.scale, s.dropout_p, s.seed,
                            {n.needs_input_grad(0), n.needs_input_grad(1), n.needs_input_grad(2)});
}

// attention_backward's differentiable definition, the kernel's maths in ops: with S = scale q k^T + mask (-inf
// above the diagonal when causal), P = softmax(S) (0 on fully masked rows), K the dropout factors (Note [Dropout
// inside attention]) and Pd = P K:
//   dv = Pd^T grad,  dP = (grad v^T) K,  dS = P (dP - rowsum(dP P)),  dq = scale dS k,  dk = scale dS^T q
Grads attention_backward_definition(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, bool is_causal, double scale, double dropout_p,
                                    int64_t seed) {
  const int64_t Lq = q->shape[q->ndim() - 2], Lk = k->shape[k->ndim() - 2], last = -1;
  Tensor S = mul(matmul(q, mT(k)), num(scale, q));
  if (mask) S = add(S, mask);
  if (is_causal) S = add(S, attention_causal_bias_kernel(Lq, Lk, q->dtype));
  Tensor dead;
  {
    GradModeGuard off(false);
    dead = Lk == 0 ? compare(CompareOp::Eq, sum(S, {last}, true), num(0, S))  // no keys: every row is dead
                   : compare(CompareOp::Eq, amax(S, {last}, true), num(-std::numeric_limits<double>::infinity(), S));
  }
  Tensor zero = num(0, S);
  Tensor P = where(dead, zero, softmax(where(dead, zero, S), last));
  Tensor keep;
  if (dropout_p > 0) {
    const Shape batch(S->shape.begin(), S->shape.end() - 2);
    keep = attention_keep_scale_kernel(batch, Lq, Lk, dropout_p, seed, q->dtype);
  }
  Tensor Pd = keep ? mul(P, keep) : P;
  Tensor dv = matmul(mT(Pd), grad);
  Tensor dP = matmul(grad, mT(v));
  if (keep) dP = mul(dP, keep);
  Tensor dS = mul(P, sub(dP, sum(mul(dP, P), {last}, true)));
  return {mul(matmul(dS, k), num(scale, q)), mul(matmul(mT(dS), q), num(scale, q)), dv};
}

// out = (dq, dk, dv)  ->  the VJP of the definition (Note [Derivatives of fused backwards])
static Grads attention_backward_backward(const Grads& grads, const OpNode& n, const SavesAttentionBackward& s) {
  return definition_vjp(n, {s.grad, s.q, s.k, s.v}, grads, [&](const Grads& x) {
    return attention_backward_definition(x[0], x[1], x[2], x[3], s.mask, s.is_causal, s.scale, s.dropout_p, s.seed);
  });
}

// ---- the table ----
// One entry per ops.def line: unpack the node's saved struct (the one its line names) and call the op's formula,
// with the gradient of its output (or, for an op of several outputs, all of them). A formula that is missing, or
// whose `s` is not that struct, does not compile.
template <class S, Grads (*formula)(const Tensor&, const OpNode&, const S&)>
static Grads unpack_and_run(Grads& grads, OpNode& node) {
  // make_op_node<K>() built the node with the struct of K's ops.def line, which is S here
  return formula(grads[0], node, static_cast<const SavedOpNode<S>&>(node).saved.unpack(node));
}
template <class S, Grads (*formula)(const Grads&, const OpNode&, const S&)>
static Grads unpack_and_run(Grads& grads, OpNode& node) {
  return formula(grads, node, static_cast<const SavedOpNode<S>&>(node).saved.unpack(node));
}
// A plain unary op's formula (ops.def: a DG_KERNEL_OP of signature unary or unary_float) takes no node: its one
// input is the one that needs the gradient, and the same formula gives its tangent (below).
template <class S, Grads (*formula)(const Tensor&, const S&)>
static Grads unpack_and_run(Grads& grads, OpNode& node) {
  return formula(grads[0], static_cast<const SavedOpNode<S>&>(node).saved.unpack(node));
}
using Formula = Grads (*)(Grads&, OpNode&);
static const Formula kFormulas[] = {
#define DG_OP(name, display, saves, signature, hot) &unpack_and_run<saves, &name##_backward>,
#include "ops.def"
};
static_assert(sizeof(kFormulas) / sizeof(kFormulas[0]) == (size_t)OpKind::COUNT,
              "every op in ops.def needs a formula here");

std::vector<Tensor> run_derivative(OpNode& node, std::vector<Tensor>& grads) {
  return kFormulas[(int)node.kind](grads, node);
}

// Note [Tangents from backward formulas]: a plain unary op (a DG_KERNEL_OP of signature unary or unary_float) is
// elementwise, so its Jacobian is diagonal: the backward formula grad -> grad * conj(f'(a)) (Note [Complex
// gradients]) and the tangent t -> t * f'(a) are the same linear map on real tensors, and on complex ones, for a
// holomorphic f, the tangent is conj(backward(conj(t))). So such an op needs no tangent formula of its own:
// forward_derivatives.cpp's table falls back to this one (its Note [Default tangents]), which runs the backward
// formula, in the same differentiable ops, on the tangent and the struct the forward filled. On real tensors it
// costs exactly what a hand-written tangent would; on complex ones two more conjugations (exact, so the values
// are the same). An op that is not holomorphic on complex tensors (abs, conj) keeps its own tangent formula.
// Its backward formula must take no node: `Grads name_backward(const Tensor& grad, const S& s)`; one that takes
// a node does not compile here.
template <class S, Grads (*formula)(const Tensor&, const S&)>
static Tensor backward_as_tangent(const Tensor& t, const void* saves) {
  const S& s = *static_cast<const S*>(saves);
  if (!is_complex(t->dtype)) return formula(t, s)[0];
  return conj(formula(conj(t), s)[0]);
}
using TangentFromBackward = Tensor (*)(const Tensor&, const void*);
#define DG_BACKWARD_AS_TANGENT_unary(name, saves) &backward_as_tangent<saves, &name##_backward>,
#define DG_BACKWARD_AS_TANGENT_unary_float(name, saves) &backward_as_tangent<saves, &name##_backward>,
#define DG_BACKWARD_AS_TANGENT_unary_backward(name, saves) nullptr,
static const TangentFromBackward kTangentsFromBackward[] = {
#define DG_OP(name, display, saves, signature, hot) nullptr,
#define DG_KERNEL_OP(name, display, saves, signature, hot, kernel) DG_BACKWARD_AS_TANGENT_##signature(name, saves)
#include "ops.def"
};
#undef DG_BACKWARD_AS_TANGENT_unary
#undef DG_BACKWARD_AS_TANGENT_unary_float
#undef DG_BACKWARD_AS_TANGENT_unary_backward
static_assert(sizeof(kTangentsFromBackward) / sizeof(kTangentsFromBackward[0]) == (size_t)OpKind::COUNT,
              "one entry per op in ops.def");

Tensor tangent_from_backward(OpKind kind, const Tensor& t, const void* saves) {
  const TangentFromBackward f = kTangentsFromBackward[(int)kind];
  DG_CHECK(f != nullptr, RuntimeError, "tangent_from_backward: op ", (int)kind, " is not a plain unary op.");
  return f(t, saves);
}

// The in-place variants of formulas (Note [Gradients written in place]): none, but where specialised below. A
// column of its own, indexed by OpKind like the formulas (as a forward-derivative column would be).
using InPlaceFormula = bool (*)(Grads&, OpNode&);
template <class S, bool (*formula)(Grads&, OpNode&, const S&)>
static bool unpack_and_write(Grads& grads, OpNode& node) {
  return formula(grads, node, static_cast<const SavedOpNode<S>&>(node).saved.unpack(node));
}
template <OpKind K>
constexpr InPlaceFormula kInPlaceOf = nullptr;
template <>
constexpr InPlaceFormula kInPlaceOf<OpKind::slice> = &unpack_and_write<SavesSlice, &slice_backward_in_place>;
static const InPlaceFormula kInPlaceFormulas[] = {
#define DG_OP(name, display, saves, signature, hot) kInPlaceOf<OpKind::name>,
#include "ops.def"
};

bool run_derivative_in_place(OpNode& node, std::vector<Tensor>& grads) {
  const InPlaceFormula formula = kInPlaceFormulas[(int)node.kind];
  return formula && formula(grads, node);
}

}  // namespace dyngrad
