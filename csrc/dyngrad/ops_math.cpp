// ops_math.cpp: arithmetic, unary, comparison and reduction ops: check, run the kernel, record the node.
// What each node saves is chosen here, next to the forward; the formulas using it are in derivatives.cpp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops_common.h"

namespace dyngrad {

std::vector<int64_t> normalize_dims(const Dims& dims, int64_t ndim, const char* op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  std::vector<int64_t> seen;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim, op);
    DG_CHECK(std::find(seen.begin(), seen.end(), w) == seen.end(), RuntimeError, op, ": dim ", d,
             " appears more than once in the list of dims.");
    seen.push_back(w);
    if (ndim == 0) continue;  // reducing a 0-d tensor over dim 0/-1 is the identity
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Tensor scalar_like(const Tensor& t, double v, bool is_integral) {
  DType dt = t->dtype;
  if (!is_integral && !is_differentiable(dt)) dt = default_float_dtype();
  // a float next to a float16/bfloat16 tensor with dims stays float32: result_type keeps the tensor's dtype and the
  // kernel computes in float32 (Note [Half types]), so the number is not rounded to 16 bits first (as torch)
  else if (!is_integral && is_half(dt) && t->ndim() > 0) dt = DType::Float32;
  else if (is_integral && dt == DType::Bool && !(v == 0 || v == 1)) dt = DType::Int64;
  else if (is_integral && dt == DType::Bool) dt = DType::Int64;
  return scalar_tensor(v, dt);
}

// Note [Integers that do not fit the tensor's dtype]: torch keeps a Python number next to a tensor as a "wrapped
// number", which promotion ranks below every tensor, 0-d ones included; it is converted to the dtype of the
// computation only there. So `uint8 [7, 200] / 256` and `uint8 (7) / 256` divide by 256.0 (0.027, 0.78), while
// `uint8 + 256` wraps to uint8 (as torch). A value that does not fit a narrow integer tensor's dtype stays an int64
// 0-d operand marked wrapped_number, and result_type() ranks the three tiers as torch: tensors with dims, then 0-d
// tensors, then wrapped numbers, a lower tier counting only when its category is higher. The result dtype is the
// tensor's, and a float computation (div, copysign, xlogy) converts 256 itself rather than its wrapped 0. (Before
// the third tier, a 0-d tensor next to such a number promoted by size: `int8 (7) / 1000` divided by -24.)
static bool fits_in(int64_t v, DType d) {
  switch (d) {
    case DType::UInt8: return v >= 0 && v <= 255;
    case DType::Int8: return v >= -128 && v <= 127;
    case DType::Int16: return v >= -32768 && v <= 32767;
    case DType::Int32: return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
    default: return true;
  }
}
Tensor scalar_like_int(const Tensor& t, int64_t v) {
  if (is_complex(t->dtype)) return scalar_tensor((double)v, t->dtype);
  if (t->dtype == DType::Bool || !fits_in(v, t->dtype)) return scalar_tensor_int(v, DType::Int64);
  return scalar_tensor_int(v, t->dtype);
}

// torch's rule: tensors with dims outrank 0-d tensors, which outrank wrapped Python numbers; a lower tier changes
// the result only when its category (bool < int < float < complex) is higher: float32 * 0-d float64 stays float32,
// int64 * 0-d float64 becomes float64, 0-d uint8 * the number 1000 stays uint8, float64 * 0-d complex64 becomes
// complex128 (combine_categories in dtype.h).
static int tier(const Tensor& t) { return t->ndim() > 0 ? 2 : (t->wrapped_number ? 0 : 1); }
DType result_type(const Tensor& a, const Tensor& b) {
  const int ta = tier(a), tb = tier(b);
  if (ta == tb) return promote(a->dtype, b->dtype);
  return ta > tb ? combine_categories(a->dtype, b->dtype) : combine_categories(b->dtype, a->dtype);
}

// a Python complex number next to `t` (null: alone): torch's wrapped complex number, the default complex dtype
// (complex128 when the default float is float64), or t's own precision when t is floating (float64 * 1j is
// complex128; combine_categories)
Tensor scalar_like_complex(const Tensor* t, double re, double im) {
  DType dt = complex_of(default_float_dtype());
  if (t && is_complex((*t)->dtype)) dt = (*t)->dtype;
  else if (t && is_floating((*t)->dtype) && (*t)->ndim() > 0) dt = complex_of((*t)->dtype);
  return full_complex(Shape{}, re, im, dt);
}

Tensor ones_like_shape(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

// ---------------- arithmetic ----------------

// out = a + b
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryKind::Add, a, b, result_type(a, b), "add");
  if (any_requires_grad({&a, &b})) record<OpKind::add>(out, {&a, &b});
  if (forward_ad::active()) forward_tangents<OpKind::add>(out, {&a, &b}, SavesNothing{});
  return out;
}

// out = a - b
Tensor sub(const Tensor& a, const Tensor& b) {
  // torch refuses a bool operand on either side (a Python bool is refused by the shared layer, before it becomes a
  // tensor of the other operand's dtype)
  DG_CHECK(!(a->dtype == DType::Bool && b->dtype == DType::Bool), RuntimeError,
           "sub: subtracting two bool tensors (the `-` operator) is not supported; use `^` or logical_xor() instead.");
  DG_CHECK(a->dtype != DType::Bool && b->dtype != DType::Bool, RuntimeError,
           "sub: subtracting with a bool tensor (the `-` operator) is not supported; to invert a mask, use `~` or "
           "logical_not() instead.");
  Tensor out = binary_kernel(BinaryKind::Sub, a, b, result_type(a, b), "sub");
  if (any_requires_grad({&a, &b})) record<OpKind::sub>(out, {&a, &b});
  if (forward_ad::active()) forward_tangents<OpKind::sub>(out, {&a, &b}, SavesNothing{});
  return out;
}

// out = a * b; saves b for da and a for db
Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryKind::Mul, a, b, result_type(a, b), "mul");
  if (any_requires_grad({&a, &b})) {
    auto& node = record<OpKind::mul>(out, {&a, &b});
    if (node.needs_input_grad(1)) node.saved.a.save(a, false);
    if (node.needs_input_grad(0)) node.saved.b.save(b, false);
  }
  if (forward_ad::active()) forward_tangents<OpKind::mul>(out, {&a, &b}, SavesAB{a, b});
  return out;
}

// out = a / b (true division: integers divide in float32)
Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryKind::Div, a, b, to_floating(result_type(a, b)), "div");
  if (any_requires_grad({&a, &b})) {
    auto& node = record<OpKind::div>(out, {&a, &b});
    if (node.needs_input_grad(1)) node.saved.a.save(a, false);
    node.saved.b.save(b, false);
  }
  if (forward_ad::active()) forward_tangents<OpKind::div>(out, {&a, &b}, SavesAB{a, b});
  return out;
}

Tensor neg(const Tensor& a) {
  DG_CHECK(a->dtype != DType::Bool, RuntimeError,
           "neg: negation of a bool tensor (the `-` operator) is not supported; to invert a mask, use `~` or "
           "logical_not().");
  Tensor out = unary_kernel(UnaryKind::Neg, a, a->dtype);
  if (any_requires_grad({&a})) record<OpKind::neg>(out, {&a});
  if (forward_ad::active()) forward_tangents<OpKind::neg>(out, {&a}, SavesNothing{});
  return out;
}

// out = a ** b (tensor exponent)
Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryKind::Pow, a, b, result_type(a, b), "pow");
  if (any_requires_grad({&a, &b})) {
    auto& node = record<OpKind::pow>(out, {&a, &b});
    node.saved.a.save(a, false);
    node.saved.b.save(b, false);
    if (node.needs_input_grad(1)) node.saved.out.save(out, true);
  }
  if (forward_ad::active()) forward_tangents<OpKind::pow>(out, {&a, &b}, SavesABOut{a, b, out});
  return out;
}

// out = a ** p (number exponent)
Tensor pow_scalar(const Tensor& a, double p) {
  bool integral_result = !is_differentiable(a->dtype) && p == std::floor(p) && p >= 0;
  DType dt = integral_result ? (a->dtype == DType::Bool ? DType::Int64 : a->dtype) : to_floating(a->dtype);
  Tensor out;
  if (integral_result) out = binary_kernel(BinaryKind::Pow, a, scalar_tensor(p, dt), dt, "pow");
  else out = unary_kernel(UnaryKind::PowScalar, a, dt, p);
  if (any_requires_grad({&a})) {
    auto& node = record<OpKind::pow_scalar>(out, {&a});
    node.saved.a.save(a, false);
    node.saved.exponent = p;
  }
  if (forward_ad::active()) forward_tangents<OpKind::pow_scalar>(out, {&a}, SavesPowScalar{a, p});
  return out;
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryKind::Maximum, a, b, result_type(a, b), "maximum");
  if (any_requires_grad({&a, &b})) {
    auto& node = record<OpKind::maximum>(out, {&a, &b});
    node.saved.a.save(a, false);
    node.saved.b.save(b, false);
  }
  if (forward_ad::active()) forward_tangents<OpKind::maximum>(out, {&a, &b}, SavesAB{a, b});
  return out;
}

// out = atan2(a, b), the angle of the point (b, a): computed in floating point (float32 for integers)
Tensor atan2(const Tensor& a, const Tensor& b) {
  DType dt = result_type(a, b);
  DG_CHECK(!is_complex(dt), TypeError, "atan2: not supported for complex tensors (", dtype_name(dt),
           "); complex numbers have no order (the angle of a complex z is angle(z)).");
  Tensor out = binary_kernel(BinaryKind::Atan2, a, b, is_floating(dt) ? dt : DType::Float32, "atan2");
  if (any_requires_grad({&a, &b})) {
    auto& node = record<OpKind::atan2>(out, {&a, &b});
    node.saved.a.save(a, false);
    node.saved.b.save(b, false);
  }
  if (forward_ad::active()) forward_tangents<OpKind::atan2>(out, {&a, &b}, SavesAB{a, b});
  return out;
}

// out = a - floor(a / b) b (remainder) or a - trunc(a / b) b (fmod), in the promoted dtype (Note [Remainders] in
// kernels/elementwise.cpp); an integer divisor 0 is refused, as torch's ZeroDivisionError
static Tensor modulo(BinaryKind k, const Tensor& a, const Tensor& b, const char* op) {
  const DType dt = result_type(a, b);
  DG_CHECK(dt != DType::Bool, NotImplementedError, op, ": not implemented for bool tensors.");
  // each operand rounded to the result's dtype first, as torch's kernel: float16 x % 0.7 divides by 0.7002, and an
  // int8 tensor % 256 divides by the 0 that 256 wraps to (torch: ZeroDivisionError), so the divisor is checked after
  auto rounded = [dt](const Tensor& t) { return t->dtype == dt ? t : contiguous_copy(t, dt); };
  const Tensor divisor = rounded(b);
  DG_CHECK(is_floating(dt) || !has_zero_kernel(divisor), RuntimeError, op,
           ": integer division by zero (ZeroDivisionError).");
  return binary_kernel(k, rounded(a), divisor, dt, op);
}

Tensor remainder(const Tensor& a, const Tensor& b) {
  Tensor out = modulo(BinaryKind::Remainder, a, b, "remainder");
  if (any_requires_grad({&a, &b})) {
    auto& node = record<OpKind::remainder>(out, {&a, &b});
    if (node.needs_input_grad(1)) {  // db = -grad floor(a / b); da = grad reads nothing
      node.saved.a.save(a, false);
      node.saved.b.save(b, false);
    }
  }
  if (forward_ad::active()) forward_tangents<OpKind::remainder>(out, {&a, &b}, SavesAB{a, b});
  return out;
}

Tensor fmod(const Tensor& a, const Tensor& b) {
  Tensor out = modulo(BinaryKind::Fmod, a, b, "fmod");
  if (any_requires_grad({&a, &b})) {
    auto& node = record<OpKind::fmod>(out, {&a, &b});
    if (node.needs_input_grad(1)) {
      node.saved.a.save(a, false);
      node.saved.b.save(b, false);
    }
  }
  if (forward_ad::active()) forward_tangents<OpKind::fmod>(out, {&a, &b}, SavesAB{a, b});
  return out;
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(BinaryKind::Minimum, a, b, result_type(a, b), "minimum");
  if (any_requires_grad({&a, &b})) {
    auto& node = record<OpKind::minimum>(out, {&a, &b});
    node.saved.a.save(a, false);
    node.saved.b.save(b, false);
  }
  if (forward_ad::active()) forward_tangents<OpKind::minimum>(out, {&a, &b}, SavesAB{a, b});
  return out;
}

// out = cond ? a : b; saves cond
Tensor where(const Tensor& cond_in, const Tensor& a_in, const Tensor& b_in) {
  Tensor cond = cond_in->dtype == DType::Bool ? cond_in : compare(CompareOp::Ne, cond_in, scalar_tensor(0, cond_in->dtype));
  DType dt = result_type(a_in, b_in);
  Tensor a = a_in->dtype == dt ? a_in : contiguous_copy(a_in, dt);
  Tensor b = b_in->dtype == dt ? b_in : contiguous_copy(b_in, dt);
  Tensor out = where_kernel(cond, a, b, "where");
  if (any_requires_grad({&a_in, &b_in})) {
    auto& node = record<OpKind::where>(out, {nullptr, &a_in, &b_in});
    node.saved.cond.save(cond, false);
  }
  if (forward_ad::active()) forward_tangents<OpKind::where>(out, {nullptr, &a_in, &b_in}, SavesCond{cond});
  return out;
}

// out = min(max(a, lo), hi); saves a and the bounds given
// An absent bound is -inf / +inf, so a NaN bound is a bound: as in torch, it makes every element NaN (it used to
// mean "absent" and was ignored). An integer tensor with a bound it cannot hold (NaN, inf, 2.5) is clamped in
// float32, as torch promotes it.
Tensor clamp(const Tensor& a_in, std::optional<double> lo, std::optional<double> hi) {
  DG_CHECK(lo || hi, RuntimeError, "clamp: at least one of min and max must be given.");
  check_not_complex(a_in, "clamp");
  const double inf = std::numeric_limits<double>::infinity();
  double l = lo ? *lo : -inf, h = hi ? *hi : inf;
  auto integral = [](std::optional<double> b) { return !b || (std::isfinite(*b) && *b == std::floor(*b)); };
  Tensor a = is_floating(a_in->dtype) || (integral(lo) && integral(hi)) ? a_in : to_dtype(a_in, DType::Float32);
  Tensor out = clamp_kernel(a, l, h);
  if (any_requires_grad({&a})) {
    auto& node = record<OpKind::clamp>(out, {&a});
    node.saved.a.save(a, false);
    // a NaN bound: the gradient is 0 everywhere (torch), recorded as the empty interval [inf, -inf]
    const bool nan_bound = std::isnan(l) || std::isnan(h);
    if (nan_bound) {
      node.saved.lo = inf;
      node.saved.hi = -inf;
    } else {
      node.saved.lo = lo;
      node.saved.hi = hi;
    }
  }
  if (forward_ad::active()) forward_tangents<OpKind::clamp>(out, {&a}, SavesClamp{a, lo, hi});
  return out;
}

Tensor mul_scalar(const Tensor& a, double s) { return mul(a, scalar_like(a, s, false)); }
Tensor add_scalar(const Tensor& a, double s) { return add(a, scalar_like(a, s, false)); }

// ---------------- unary ----------------

// The forwards of ops.def's DG_KERNEL_OP lines: run the kernel, record the node, save what the line names.
#define DG_FORWARD_unary(name, kernel) \
  Tensor name(const Tensor& a) { return unary_op<OpKind::name>(UnaryKind::kernel, a, a->dtype); }
#define DG_FORWARD_unary_float(name, kernel) \
  Tensor name(const Tensor& a) { return unary_op<OpKind::name>(UnaryKind::kernel, a, to_floating(a->dtype)); }
#define DG_FORWARD_unary_backward(name, kernel)                                   \
  Tensor name(const Tensor& grad, const Tensor& x) {                              \
    return unary_backward_op<OpKind::name>(UnaryKind::kernel, grad, x, #name);    \
  }
#define DG_KERNEL_OP(name, display, saves, signature, hot, kernel) DG_FORWARD_##signature(name, kernel)
#include "ops.def"
#undef DG_FORWARD_unary
#undef DG_FORWARD_unary_float
#undef DG_FORWARD_unary_backward

Tensor leaky_relu(const Tensor& a, double slope) {
  Tensor out = unary_kernel(UnaryKind::LeakyRelu, a, to_floating(a->dtype), slope);
  if (any_requires_grad({&a})) {
    auto& node = record<OpKind::leaky_relu>(out, {&a});
    node.saved.a.save(a, false);
    node.saved.slope = slope;
  }
  if (forward_ad::active()) forward_tangents<OpKind::leaky_relu>(out, {&a}, SavesLeakyRelu{a, slope});
  return out;
}

Tensor softplus(const Tensor& a, double beta, double threshold) {
  Tensor out = unary_kernel(UnaryKind::Softplus, a, to_floating(a->dtype), beta, threshold);
  if (any_requires_grad({&a})) {
    auto& node = record<OpKind::softplus>(out, {&a});
    node.saved.a.save(a, false);
    node.saved.beta = beta;
    node.saved.threshold = threshold;
  }
  if (forward_ad::active()) forward_tangents<OpKind::softplus>(out, {&a}, SavesSoftplus{a, beta, threshold});
  return out;
}

// ---------------- comparisons and logic (no grad) ----------------

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b) {
  static const BinaryKind kinds[] = {BinaryKind::Eq, BinaryKind::Ne, BinaryKind::Lt,
                                     BinaryKind::Le, BinaryKind::Gt, BinaryKind::Ge};
  static const char* names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  const DType dt = result_type(a, b);
  // torch compares in the promoted dtype: a Python int that does not fit a narrow integer tensor's dtype (an int64
  // 0-d operand, Note [Integers that do not fit the tensor's dtype]) wraps there first (uint8 [0] == 256 is True)
  if (is_narrow_int(dt) && (a->dtype != dt || b->dtype != dt))
    return binary_kernel(kinds[(int)op], a->dtype != dt ? to_dtype(a, dt) : a, b->dtype != dt ? to_dtype(b, dt) : b,
                         dt, names[(int)op]);
  return binary_kernel(kinds[(int)op], a, b, dt, names[(int)op]);
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return binary_kernel(BinaryKind::And, a, b, result_type(a, b), "logical_and");
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return binary_kernel(BinaryKind::Or, a, b, result_type(a, b), "logical_or");
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  return binary_kernel(BinaryKind::Xor, a, b, result_type(a, b), "logical_xor");
}
Tensor logical_not(const Tensor& a) { return unary_kernel(UnaryKind::Not, a, DType::Bool); }
Tensor isnan(const Tensor& a) { return unary_kernel(UnaryKind::IsNan, a, DType::Bool); }
Tensor isfinite(const Tensor& a) { return unary_kernel(UnaryKind::IsFinite, a, DType::Bool); }

// ---------------- reductions ----------------

// Every reduction saves the reduced dims (sorted, wrapped) and keepdim.
template <OpKind K>
static OpNodeOf<K>& record_reduction(const Tensor& out, const Tensor& a, const Dims& dims, bool keepdim) {
  auto& node = record<K>(out, {&a});
  node.saved.dims = dims;
  node.saved.keepdim = keepdim;
  return node;
}

Tensor sum(const Tensor& a, const Dims& dims_in, bool keepdim, std::optional<DType> dtype) {
  auto dims = normalize_dims(dims_in, a->ndim(), "sum");
  Tensor src = dtype && *dtype != a->dtype ? to_dtype(a, *dtype) : a;
  Tensor out = reduce_kernel(ReduceKind::Sum, src, dims, keepdim);
  // integers accumulate in int64; an explicit narrow dtype= is the result's dtype (wrapping as torch's sum in it)
  if (dtype && out->dtype != *dtype && !is_differentiable(*dtype)) out = to_dtype(out, *dtype);
  if (any_requires_grad({&src})) record_reduction<OpKind::sum>(out, src, dims, keepdim);
  if (forward_ad::active()) forward_tangents<OpKind::sum>(out, {&src}, SavesReduction{dims, keepdim});
  return out;
}

// a sum of `count` elements (contiguous, float32 or float64, ours to write) divided by count in place; NaN for none
static Tensor mean_of_sum(const Tensor& out, int64_t count) {
  DG_DISPATCH_FLOAT(out->dtype, T, {
    T* p = out->data<T>();
    T inv = count ? T(1) / T(count) : std::numeric_limits<T>::quiet_NaN();
    for (int64_t i = 0; i < out->numel; ++i) p[i] = count ? p[i] * inv : inv;
  });
  return out;
}

Tensor mean(const Tensor& a, const Dims& dims_in, bool keepdim) {
  DG_CHECK(is_differentiable(a->dtype), RuntimeError, "mean: expected a floating-point or complex tensor, got ",
           dtype_name(a->dtype), "; convert with .float() first.");
  if (is_complex(a->dtype)) {  // the sum's pairs, divided: the same rounding as a real mean
    auto dims = normalize_dims(dims_in, a->ndim(), "mean");
    int64_t count = 1;
    for (int64_t d : dims) count *= a->shape[d];
    Tensor s = reduce_kernel(ReduceKind::Sum, a, dims, keepdim);
    Tensor out = real_as_complex_view(mean_of_sum(complex_as_real_view(s), count));
    if (any_requires_grad({&a})) record_reduction<OpKind::mean>(out, a, dims, keepdim);
    if (forward_ad::active()) forward_tangents<OpKind::mean>(out, {&a}, SavesReduction{dims, keepdim});
    return out;
  }
  auto dims = normalize_dims(dims_in, a->ndim(), "mean");
  // Note [Half types]: a half type's mean is its float32 sum divided in float32, rounded once (as torch)
  const bool half = is_half(a->dtype);
  Tensor out = reduce_kernel(ReduceKind::Sum, half ? contiguous_copy(a, DType::Float32) : a, dims, keepdim);
  int64_t count = 1;
  for (int64_t d : dims) count *= a->shape[d];
  out = mean_of_sum(out, count);
  if (half) out = contiguous_copy(out, a->dtype);
  if (any_requires_grad({&a})) record_reduction<OpKind::mean>(out, a, dims, keepdim);
  if (forward_ad::active()) forward_tangents<OpKind::mean>(out, {&a}, SavesReduction{dims, keepdim});
  return out;
}

// var = sum((a - mean)^2) / (n - correction): composite
Tensor var(const Tensor& a, const Dims& dims_in, double correction, bool keepdim) {
  check_float(a, "var");
  if (is_half(a->dtype))  // computed in float32 and rounded once (Note [Half types]), as torch
    return to_dtype(var(to_dtype(a, DType::Float32), dims_in, correction, keepdim), a->dtype);
  auto dims = normalize_dims(dims_in, a->ndim(), "var");
  int64_t count = 1;
  for (int64_t d : dims) count *= a->shape[d];
  Tensor centered = sub(a, mean(a, dims, true));
  Tensor ss = sum(mul(centered, centered), dims, keepdim);
  double denom = std::max<double>(0.0, (double)count - correction);
  return div(ss, scalar_tensor(denom, a->dtype));
}

// sqrt(var), except where var is 0: there the gradient is 0, as in torch (sqrt's would be inf * 0 = NaN), by
// taking sqrt of 1 there and selecting 0 (docs/numerics.md). Only an exact 0 is masked: a NaN variance (one element
// or none, or NaN inputs) gives NaN, as var, torch and numpy do (the mask once read "not positive" and gave 0).
Tensor std_(const Tensor& a, const Dims& dims, double correction, bool keepdim) {
  Tensor v = var(a, dims, correction, keepdim);
  Tensor zero = scalar_tensor(0.0, v->dtype);
  Tensor is_zero = compare(CompareOp::Eq, v, zero);
  return where(is_zero, zero, sqrt(where(is_zero, scalar_tensor(1.0, v->dtype), v)));
}

template <OpKind K>
static Tensor extremum(ReduceKind rk, const Tensor& a, const Dims& dims_in, bool keepdim, const char* op) {
  check_not_complex(a, op);
  auto dims = normalize_dims(dims_in, a->ndim(), op);
  for (int64_t d : dims)
    DG_CHECK(a->shape[d] != 0, RuntimeError, op, ": cannot reduce over dimension ", d, " of size 0 (input shape ",
             shape_str(a->shape), "): an empty tensor has no ", op == std::string("amax") ? "max" : "min", ".");
  Tensor out = reduce_kernel(rk, a, dims, keepdim);
  if (any_requires_grad({&a})) {
    auto& node = record_reduction<K>(out, a, dims, keepdim);
    node.saved.a.save(a, false);
    node.saved.out.save(out, true);
  }
  if (forward_ad::active()) forward_tangents<K>(out, {&a}, SavesReductionAOut{a, out, dims, keepdim});
  return out;
}
Tensor amax(const Tensor& a, const Dims& dims, bool keepdim) {
  return extremum<OpKind::amax>(ReduceKind::Max, a, dims, keepdim, "amax");
}
Tensor amin(const Tensor& a, const Dims& dims, bool keepdim) {
  return extremum<OpKind::amin>(ReduceKind::Min, a, dims, keepdim, "amin");
}

static Tensor arg_extremum(ReduceKind rk, const Tensor& a, std::optional<int64_t> dim, bool keepdim, const char* op) {
  check_not_complex(a, op);
  if (!dim) {
    DG_CHECK(a->numel != 0, RuntimeError, op, ": cannot take the ", op, " of an empty tensor (shape ",
             shape_str(a->shape), ").");
    Tensor flat = reshape(a->requires_grad ? alias(a) : a, {a->numel});
    Tensor r = reduce_kernel(rk, flat, {0}, false);
    if (keepdim) return reshape(r, Shape(a->ndim(), 1));
    return r;
  }
  int64_t d = wrap_dim(*dim, a->ndim(), op);
  if (a->ndim() == 0) return zeros({}, DType::Int64);
  // checked even when the result is empty too ((2, 0, 0) over dim 1), as torch does
  DG_CHECK(a->shape[d] != 0, IndexError, op, ": cannot reduce over dimension ", d, " of size 0 (input shape ",
           shape_str(a->shape), ").");
  return reduce_kernel(rk, a, {d}, keepdim);
}
Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_extremum(ReduceKind::ArgMax, a, dim, keepdim, "argmax");
}
Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_extremum(ReduceKind::ArgMin, a, dim, keepdim, "argmin");
}

// out = log(sum(exp(a))) computed stably; saves a and out
Tensor logsumexp(const Tensor& a_in, const Dims& dims_in, bool keepdim) {
  check_not_complex(a_in, "logsumexp");
  Tensor a = is_floating(a_in->dtype) ? a_in : to_dtype(a_in, DType::Float32);
  auto dims = normalize_dims(dims_in, a->ndim(), "logsumexp");
  Tensor out = reduce_kernel(ReduceKind::LogSumExp, a, dims, keepdim);
  if (any_requires_grad({&a})) {
    auto& node = record_reduction<OpKind::logsumexp>(out, a, dims, keepdim);
    node.saved.a.save(a, false);
    node.saved.out.save(out, true);
  }
  if (forward_ad::active()) forward_tangents<OpKind::logsumexp>(out, {&a}, SavesReductionAOut{a, out, dims, keepdim});
  return out;
}

// out_i = sum_{j <= i} a_j along dim (j >= i if reverse): a loop (kernels/scan.cpp), where a composite would be a
// doubling scan of log n levels of nodes; saves nothing but the dim
Tensor cumsum(const Tensor& a, int64_t dim, bool reverse) {
  check_not_complex(a, "cumsum");
  const int64_t d = a->ndim() ? wrap_dim(dim, a->ndim(), "cumsum") : (wrap_dim(dim, 0, "cumsum"), 0);
  Tensor out = cumsum_kernel(a, d, reverse);
  if (any_requires_grad({&a})) {
    auto& node = record<OpKind::cumsum>(out, {&a});
    node.saved.dim = d;
    node.saved.reverse = reverse;
  }
  if (forward_ad::active()) forward_tangents<OpKind::cumsum>(out, {&a}, SavesScan{d, reverse});
  return out;
}

static int64_t scan_dim(const Tensor& a, int64_t dim, const char* op) {
  return a->ndim() ? wrap_dim(dim, a->ndim(), op) : (wrap_dim(dim, 0, op), 0);
}

// out_i = prod_{j <= i} a_j along dim (j >= i if reverse): a loop (kernels/scan.cpp); saves a and out for the
// division-free formula that is exact at zeros (derivatives.cpp)
Tensor cumprod(const Tensor& a, int64_t dim, bool reverse) {
  const int64_t d = scan_dim(a, dim, "cumprod");
  Tensor out = cumprod_kernel(a, d, reverse);
  if (any_requires_grad({&a})) {
    auto& node = record<OpKind::cumprod>(out, {&a});
    node.saved.a.save(a, false);
    node.saved.out.save(out, true);
    node.saved.dim = d;
    node.saved.reverse = reverse;
  }
  if (forward_ad::active()) forward_tangents<OpKind::cumprod>(out, {&a}, SavesScanAOut{a, out, d, reverse});
  return out;
}

// out_i = log(sum_{j <= i} exp(a_j)) along dim (j >= i if reverse), floating point
Tensor logcumsumexp(const Tensor& a, int64_t dim, bool reverse) {
  const int64_t d = scan_dim(a, dim, "logcumsumexp");
  Tensor out = logcumsumexp_kernel(a, d, reverse);
  if (any_requires_grad({&a})) {
    auto& node = record<OpKind::logcumsumexp>(out, {&a});
    node.saved.a.save(a, false);
    node.saved.out.save(out, true);
    node.saved.dim = d;
    node.saved.reverse = reverse;
  }
  if (forward_ad::active()) forward_tangents<OpKind::logcumsumexp>(out, {&a}, SavesScanAOut{a, out, d, reverse});
  return out;
}

// y_k = b_k + c_k y_{k-1} along dim (y_{k+1} if reverse); b and c of one shape and floating dtype
Tensor linear_recurrence(const Tensor& b, const Tensor& c, int64_t dim, bool reverse) {
  const int64_t d = scan_dim(b, dim, "linear_recurrence");
  Tensor out = linear_recurrence_kernel(b, c, d, reverse);
  if (any_requires_grad({&b, &c})) {
    auto& node = record<OpKind::linear_recurrence>(out, {&b, &c});
    node.saved.c.save(c, false);
    if (node.needs_input_grad(1)) node.saved.out.save(out, true);
    node.saved.dim = d;
    node.saved.reverse = reverse;
  }
  if (forward_ad::active())
    forward_tangents<OpKind::linear_recurrence>(out, {&b, &c}, SavesRecurrence{c, out, d, reverse});
  return out;
}

// t moved one place along the scan's direction: out_k = t_{k-1} (t_{k+1} if reverse), `fill` where the scan
// starts. A composite of slice and cat, so the formulas built on it stay differentiable.
Tensor scan_shift(const Tensor& t, int64_t d, bool reverse, double fill) {
  if (t->ndim() == 0) return full(t->shape, fill, t->dtype);
  const int64_t n = t->shape[d];
  if (n == 0) return t;
  Shape edge_shape = t->shape;
  edge_shape[d] = 1;
  Tensor edge = full(edge_shape, fill, t->dtype);
  return reverse ? cat({slice(t, d, 1, n, 1), edge}, d) : cat({edge, slice(t, d, 0, n - 1, 1)}, d);
}

// Note [Unbroadcast]: sum the broadcast dims of t away so that it has `shape`.
Tensor sum_to(const Tensor& t, const Shape& shape) {
  if (t->shape == shape) return t;
  const int64_t lead = t->ndim() - (int64_t)shape.size();
  DG_CHECK(lead >= 0, RuntimeError, "sum_to: cannot sum shape ", shape_str(t->shape), " to ", shape_str(shape), ".");
  Dims dims;
  for (int64_t d = 0; d < t->ndim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else {
      int64_t want = shape[d - lead];
      if (want == 1 && t->shape[d] != 1) dims.push_back(d);
      else
        DG_CHECK(want == t->shape[d], RuntimeError, "sum_to: cannot sum shape ", shape_str(t->shape), " to ",
                 shape_str(shape), ".");
    }
  }
  Tensor r = dims.empty() ? t : sum(t, dims, true);
  return r->shape == shape ? r : reshape(r, shape);
}

// ---------------- linear algebra ----------------

// out = a @ b for inputs of at least 2 dims; 1-D operands are promoted to matrices and the extra dim removed after.
// out = a @ b's node, what it saves and the operands' layouts
static void record_matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  auto& node = record<OpKind::matmul>(out, {&a, &b});
  if (node.needs_input_grad(1)) node.saved.a.save(a, false);
  if (node.needs_input_grad(0)) node.saved.b.save(b, false);
  // Note [Gradient in the operand's layout] (derivatives.cpp): a (..., n, k) view of a (..., k, n) matrix
  auto transposed = [&](const Tensor& t) {
    const int64_t nd = t->ndim();
    return nd == out->ndim() && t->strides[nd - 2] == 1 && t->strides[nd - 1] != 1 && t->shape[nd - 2] > 1;
  };
  node.saved.a_transposed = transposed(a);
  node.saved.b_transposed = transposed(b);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  DG_CHECK(a->ndim() >= 1 && b->ndim() >= 1, RuntimeError, "matmul: both arguments need at least 1 dimension, got ",
           shape_str(a->shape), " @ ", shape_str(b->shape), ".");
  DG_CHECK(a->dtype != DType::Bool && b->dtype != DType::Bool, TypeError,
           "matmul: not supported for bool tensors.");
  if (a->ndim() == 1 || b->ndim() == 1) {
    const int64_t ka = a->shape[a->ndim() - 1], kb = b->shape[b->ndim() == 1 ? 0 : b->ndim() - 2];
    DG_CHECK(ka == kb, RuntimeError, "matmul: inner dimensions do not match: ", shape_str(a->shape), " @ ",
             shape_str(b->shape), " (", ka, " != ", kb, ").");
    Tensor a2 = a->ndim() == 1 ? unsqueeze(a, 0) : a;
    Tensor b2 = b->ndim() == 1 ? unsqueeze(b, 1) : b;
    Tensor r = matmul(a2, b2);
    if (a->ndim() == 1) r = squeeze(r, Dims{-2});
    if (b->ndim() == 1) r = squeeze(r, Dims{-1});
    return r;
  }
  int64_t ka = a->shape[a->ndim() - 1], kb = b->shape[b->ndim() - 2];
  DG_CHECK(ka == kb, RuntimeError, "matmul: inner dimensions do not match: ", shape_str(a->shape), " @ ",
           shape_str(b->shape), " (", ka, " != ", kb, ").");
  // torch never promotes in a matrix product: float64 @ float32 is a mistake to report, not to hide (checked
  // after the shapes, as torch does).
  DG_CHECK(a->dtype == b->dtype, RuntimeError, "matmul: expected both operands to have the same dtype, got ",
           dtype_name(a->dtype), " @ ", dtype_name(b->dtype), "; convert one with .to(dtype).");
  const DType dt = a->dtype;  // = b->dtype: no promotion, no conversion
  if (is_half(dt) || is_narrow_int(dt))  // Note [Half types], Note [Narrow integers]: computed wide, converted back
    return to_dtype(matmul(to_dtype(a, widen(dt)), to_dtype(b, widen(dt))), dt);
  if (a->ndim() > 2 && b->ndim() == 2) {
    // Note [Folded batch]: (..., n, k) @ (k, m) is one (... * n, k) @ (k, m) product, as torch computes it: one
    // BLAS call instead of one per batch, and in backward the weight's gradient is one product too, where per
    // batch it was a product per batch and then a sum over the batch (a transformer block's x @ W).
    Shape rows_shape(a->shape.begin(), a->shape.end() - 1);
    Tensor out = matmul(reshape(a, {shape_numel(rows_shape), ka}), b);
    rows_shape.push_back(b->shape[1]);
    return reshape(out, rows_shape);
  }
  // forward mode through x @ w with a constant w: x @ w and its tangent tx @ w in one call (Note [A product and its
  // tangent in one call] in kernels/gemm_avx512.cpp), where matmul_jvp would compute tx @ w alone after this
  Tensor out, tangent_in, tangent;
  int64_t level = -1;
  if (!(forward_ad::active() && forward_ad::sole_tangent(a, b, &level, &tangent_in) &&
        matmul_pair_kernel(a, tangent_in, b, &out, &tangent)))
    out = matmul_kernel(a, b);
  if (any_requires_grad({&a, &b})) record_matmul(out, a, b);
  if (tangent) forward_ad::set_tangent(out, level, tangent);
  else if (forward_ad::active()) forward_tangents<OpKind::matmul>(out, {&a, &b}, SavesMatmul{a, b, false, false});
  return out;
}

// add(matmul(a, b), bias) for linear's fast path, with the bias added in the product's last store where the own
// kernel computes it (Note [Bias in the product's last store] in kernels/matmul.cpp): the same values and the same
// graph (a (..., n, k) folded into rows as matmul folds it: reshape, matmul, reshape, then add), one pass over
// the output fewer. Everything else (other dtypes and shapes, tangents) is add(matmul(a, b), bias) itself.
Tensor matmul_add(const Tensor& a, const Tensor& b, const Tensor& bias) {
  if (a->ndim() >= 2 && b->ndim() == 2 && !forward_ad::active() && a->shape.back() == b->shape[0]) {
    const bool folded = a->ndim() > 2;
    Shape rows_shape(a->shape.begin(), a->shape.end() - 1);
    const Tensor rows = folded ? reshape(a, {shape_numel(rows_shape), a->shape.back()}) : a;
    Tensor out2;
    if (matmul_bias_kernel(rows, b, bias, &out2)) {
      if (any_requires_grad({&rows, &b})) record_matmul(out2, rows, b);
      Tensor out = out2;
      if (folded) {  // matmul's reshape back, as a tensor of its own (nothing else sees out2)
        rows_shape.push_back(b->shape[1]);
        out = make_view(out2, rows_shape, contiguous_strides(rows_shape), 0);
        if (out2->requires_grad) record<OpKind::reshape>(out, {&out2});
      }
      if (any_requires_grad({&out, &bias})) record<OpKind::add>(out, {&out, &bias});
      return out;
    }
  }
  return add(matmul(a, b), bias);
}

}  // namespace dyngrad
