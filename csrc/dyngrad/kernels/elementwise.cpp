// elementwise.cpp: unary, binary, where and clamp kernels over one strided loop (loop.h), with SIMD-friendly
// float32 exp/tanh/sigmoid so that large elementwise work vectorises (std::expf does not).
#include <cmath>
#include <limits>
#include <type_traits>
#include <cstring>

#include "fast_math.h"
#include "loop.h"
#include "scalar.h"

namespace dyngrad {

std::atomic<int64_t> g_parallel_grain{32768};  // (kernels.h)
// exp, tanh, sigmoid, GELU, erf cost several adds per element, so their split pays from a quarter of the size.
// bench/parallel_grain.py, 2026-12-01, 2 cores, two runs: add and mul from 16-32k elements, sum over rows from 32k,
// exp from 4-16k, tanh and GELU from 2-8k.
static int64_t costly_grain() { return std::max<int64_t>(1, parallel_grain() / 4); }

// ---- the strided loop: coalesce dims, broadcast inputs to the output shape ----
StridedLoop::StridedLoop(const std::vector<const TensorImpl*>& operands) {
  nops = (int)operands.size();
  const TensorImpl* out = operands[0];
  const int64_t nd = out->ndim();
  numel = out->numel;
  Shape sh = out->shape;
  std::array<Shape, kMax> st;
  for (int i = 0; i < nops; ++i) {
    const TensorImpl* t = operands[i];
    int64_t item = (int64_t)t->itemsize();
    st[i].assign(nd, 0);
    int64_t off = nd - t->ndim();
    for (int64_t d = 0; d < t->ndim(); ++d)
      st[i][off + d] = t->shape[d] == 1 ? 0 : t->strides[d] * item;
    base[i] = t->raw();
  }
  // drop size-1 dims, then merge neighbours whose strides chain for every operand
  Shape cs;
  std::array<Shape, kMax> cst;
  for (int64_t d = 0; d < nd; ++d) {
    if (sh[d] == 1) continue;
    if (!cs.empty()) {
      bool mergeable = true;
      for (int i = 0; i < nops; ++i)
        if (cst[i].back() != st[i][d] * sh[d]) mergeable = false;
      if (mergeable) {
        cs.back() *= sh[d];
        for (int i = 0; i < nops; ++i) cst[i].back() = st[i][d];
        continue;
      }
    }
    cs.push_back(sh[d]);
    for (int i = 0; i < nops; ++i) cst[i].push_back(st[i][d]);
  }
  if (cs.empty() && numel == 1) {
    cs.push_back(1);
    for (int i = 0; i < nops; ++i) cst[i].push_back(0);
  }
  shape = std::move(cs);
  for (int i = 0; i < nops; ++i) strides[i] = std::move(cst[i]);
}

// ---- float32 math that vectorises: fast_math.h ----

// Note [Flattened loop bodies]: the loop bodies of unary_loop, unary_grad_float and binary_loop inline every call
// in them (flatten). GCC's inlining budget runs out inside this file's big switches, and it then called the op's
// lambda out of line for every element, with the loop left scalar: GELU's derivative took 3.4 ms for 393k
// float32 elements on one thread against its forward's 0.39 ms (the forward's lambda happened to inline), and
// about 10% of a char-level GPT step (perf; Intel Xeon family 6 model 167, KVM, 2026-12-03).
#if defined(__GNUC__)
#define DG_FLATTEN __attribute__((flatten))
#else
#define DG_FLATTEN
#endif

template <typename T>
inline T k_softplus(T x, T beta, T threshold) {
  T bx = x * beta;
  if (bx > threshold) return x;
  // log1p(exp(bx)) without overflow: max(bx,0) + log1p(exp(-|bx|))
  T m = bx > 0 ? bx : T(0);
  return (m + std::log1p(std::exp(-std::abs(bx)))) / beta;
}

template <typename T>
inline T k_gelu(T x) { return T(0.5) * x * (T(1) + k_erf(x * T(0.70710678118654752440))); }
// forced inline, as the fast_math.h functions are (Note [Flattened loop bodies])
template <>
DG_FAST_INLINE float k_gelu<float>(float x) { return x * fast_normal_cdff(x); }  // vectorises (std::erf does not)
template <typename T>
inline T k_gelu_grad(T x) {
  T cdf = T(0.5) * (T(1) + k_erf(x * T(0.70710678118654752440)));
  T pdf = k_exp(T(-0.5) * x * x) * T(0.39894228040143267794);
  return cdf + x * pdf;
}
template <>
DG_FAST_INLINE float k_gelu_grad<float>(float x) { return fast_gelu_gradf(x); }

// the derivative helpers' f, for unary_kernel's and unary_grad_kernel's loops alike
template <typename T> inline T k_tanh_grad_from_out(T y) { return T(1) - y * y; }
template <typename T> inline T k_sigmoid_grad_from_out(T y) { return y * (T(1) - y); }
template <typename T> inline T k_relu_mask(T x) { return x <= T(0) ? T(0) : T(1); }

// ---- unary ----
// int64 arithmetic wraps on overflow, as torch's does; done in uint64 because signed overflow is undefined.
template <typename T> inline T k_add(T x, T y) { return (T)(x + y); }
template <typename T> inline T k_sub(T x, T y) { return (T)(x - y); }
template <typename T> inline T k_mul(T x, T y) { return (T)(x * y); }
template <> inline int64_t k_add(int64_t x, int64_t y) { return (int64_t)((uint64_t)x + (uint64_t)y); }
template <> inline int64_t k_sub(int64_t x, int64_t y) { return (int64_t)((uint64_t)x - (uint64_t)y); }
template <> inline int64_t k_mul(int64_t x, int64_t y) { return (int64_t)((uint64_t)x * (uint64_t)y); }
// x ** y for int64 by squaring (a loop of y multiplications hangs for y = 2**31); negative y gives torch's
// integer results: 1 ** y = 1, (-1) ** y = +-1, anything else 0.
inline int64_t k_int_pow(int64_t x, int64_t y) {
  if (y < 0) return x == 1 ? 1 : x == -1 ? (y % 2 ? -1 : 1) : 0;
  uint64_t r = 1, base = (uint64_t)x;
  for (uint64_t e = (uint64_t)y; e; e >>= 1) {
    if (e & 1) r *= base;
    base *= base;
  }
  return (int64_t)r;
}

template <typename T, typename R, typename F>
static void unary_loop(const Tensor& out, const Tensor& a, F f, int64_t grain = parallel_grain()) {
  if (a->is_contiguous()) {
    const T* x = a->data<T>();
    R* y = out->data<R>();
    parallel_for(out->numel, [&](int64_t lo, int64_t hi) DG_FLATTEN {
      for (int64_t i = lo; i < hi; ++i) y[i] = f(x[i]);
    }, grain);
    return;
  }
  StridedLoop loop({out.get(), a.get()});
  loop.run([&](char** p, const int64_t* s, int64_t m) DG_FLATTEN {
    for (int64_t i = 0; i < m; ++i) *(R*)(p[0] + i * s[0]) = f(*(const T*)(p[1] + i * s[1]));
  }, true);
}

// sin, cos, tan: float32 through fast_sinf/fast_cosf/fast_tanf (vectorised), then the rare |x| > kFastTrigLimit (and
// inf, NaN) recomputed with std::, so that the main loop has no call in it; float64 through std::. A contiguous input
// goes by blocks of kTrigBlock, each checked for far arguments in the vectorised loop itself and only then walked a
// second time (a second pass over every element cost as much as the polynomial: 1M sin 0.91 -> 0.40 ms standalone).
enum class TrigKind { Sin, Cos, Tan };
constexpr int64_t kTrigBlock = 1024;
template <typename Fast, typename Exact>
static void trig_loop_f32(const Tensor& out, const Tensor& a, Fast fast, Exact exact) {
  auto far = [](float x) { return !(std::fabs(x) <= kFastTrigLimit); };
  if (a->is_contiguous()) {
    const float* x = a->data<float>();
    float* y = out->data<float>();
    parallel_for(out->numel, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; b += kTrigBlock) {
        const int64_t e = std::min(hi, b + kTrigBlock);
        int any_far = 0;
        for (int64_t i = b; i < e; ++i) {
          y[i] = fast(x[i]);
          any_far |= far(x[i]);
        }
        if (any_far)
          for (int64_t i = b; i < e; ++i)
            if (far(x[i])) y[i] = exact(x[i]);
      }
    }, costly_grain());
    return;
  }
  unary_loop<float, float>(out, a, fast, costly_grain());
  StridedLoop loop({out.get(), a.get()});
  loop.run([&](char** p, const int64_t* s, int64_t m) {
    for (int64_t j = 0; j < m; ++j) {
      const float x = *(const float*)(p[1] + j * s[1]);
      if (far(x)) *(float*)(p[0] + j * s[0]) = exact(x);
    }
  }, false);
}
template <typename T>
static void sin_cos_loop(const Tensor& out, const Tensor& a, TrigKind kind) {
  if constexpr (std::is_same_v<T, float>) {
    if (kind == TrigKind::Cos)
      trig_loop_f32(out, a, [](float x) { return fast_cosf(x); }, [](float x) { return std::cos(x); });
    else if (kind == TrigKind::Sin)
      trig_loop_f32(out, a, [](float x) { return fast_sinf(x); }, [](float x) { return std::sin(x); });
    else
      trig_loop_f32(out, a, [](float x) { return fast_tanf(x); }, [](float x) { return std::tan(x); });
  } else {
    if (kind == TrigKind::Cos) unary_loop<T, T>(out, a, [](T x) { return std::cos(x); });
    else if (kind == TrigKind::Sin) unary_loop<T, T>(out, a, [](T x) { return std::sin(x); });
    else unary_loop<T, T>(out, a, [](T x) { return std::tan(x); }, costly_grain());
  }
}

template <typename T>
static void unary_float(UnaryKind k, const Tensor& out, const Tensor& a, T p0, T p1) {
  switch (k) {
    case UnaryKind::Neg: unary_loop<T, T>(out, a, [](T x) { return -x; }); break;
    case UnaryKind::Conj: unary_loop<T, T>(out, a, [](T x) { return x; }); break;
    case UnaryKind::Exp: unary_loop<T, T>(out, a, [](T x) { return k_exp(x); }, costly_grain()); break;
    case UnaryKind::Log: unary_loop<T, T>(out, a, [](T x) { return std::log(x); }); break;
    case UnaryKind::Sqrt: unary_loop<T, T>(out, a, [](T x) { return std::sqrt(x); }); break;
    case UnaryKind::Rsqrt: unary_loop<T, T>(out, a, [](T x) { return T(1) / std::sqrt(x); }); break;
    case UnaryKind::Abs: unary_loop<T, T>(out, a, [](T x) { return std::abs(x); }); break;
    case UnaryKind::Sin: sin_cos_loop<T>(out, a, TrigKind::Sin); break;
    case UnaryKind::Cos: sin_cos_loop<T>(out, a, TrigKind::Cos); break;
    case UnaryKind::Tanh: unary_loop<T, T>(out, a, [](T x) { return k_tanh(x); }, costly_grain()); break;
    case UnaryKind::Sigmoid: unary_loop<T, T>(out, a, [](T x) { return k_sigmoid(x); }, costly_grain()); break;
    case UnaryKind::Relu: unary_loop<T, T>(out, a, [](T x) { return x > T(0) ? x : (x != x ? x : T(0)); }); break;
    case UnaryKind::LeakyRelu: unary_loop<T, T>(out, a, [p0](T x) { return x > T(0) ? x : x * p0; }); break;
    case UnaryKind::Gelu:
#ifdef DG_HAVE_GELU16
      if constexpr (std::is_same_v<T, float>) {  // Note [GELU in 16 lanes] (fast_math.h)
        if (a->is_contiguous()) {
          const float* x = a->data<float>();
          float* y = out->data<float>();
          parallel_for(out->numel, [&](int64_t lo, int64_t hi) { gelu16(x + lo, y + lo, hi - lo); }, costly_grain());
          break;
        }
      }
#endif
      unary_loop<T, T>(out, a, [](T x) { return k_gelu(x); }, costly_grain());
      break;
    case UnaryKind::Softplus: unary_loop<T, T>(out, a, [p0, p1](T x) { return k_softplus(x, p0, p1); }); break;
    case UnaryKind::Erf: unary_loop<T, T>(out, a, [](T x) { return k_erf(x); }, costly_grain()); break;
    case UnaryKind::Log1p: unary_loop<T, T>(out, a, [](T x) { return k_log1p(x); }, costly_grain()); break;
    case UnaryKind::Expm1: unary_loop<T, T>(out, a, [](T x) { return k_expm1(x); }, costly_grain()); break;
    case UnaryKind::Log2: unary_loop<T, T>(out, a, [](T x) { return k_log2(x); }, costly_grain()); break;
    case UnaryKind::Log10: unary_loop<T, T>(out, a, [](T x) { return k_log10(x); }, costly_grain()); break;
    case UnaryKind::Tan: sin_cos_loop<T>(out, a, TrigKind::Tan); break;
    case UnaryKind::Asin: unary_loop<T, T>(out, a, [](T x) { return k_asin(x); }, costly_grain()); break;
    case UnaryKind::Acos: unary_loop<T, T>(out, a, [](T x) { return k_acos(x); }, costly_grain()); break;
    case UnaryKind::Atan: unary_loop<T, T>(out, a, [](T x) { return k_atan(x); }, costly_grain()); break;
    case UnaryKind::Sinh: unary_loop<T, T>(out, a, [](T x) { return k_sinh(x); }, costly_grain()); break;
    case UnaryKind::Asinh: unary_loop<T, T>(out, a, [](T x) { return std::asinh(x); }, costly_grain()); break;
    case UnaryKind::Atanh: unary_loop<T, T>(out, a, [](T x) { return std::atanh(x); }, costly_grain()); break;
    case UnaryKind::Cosh: unary_loop<T, T>(out, a, [](T x) { return std::cosh(x); }, costly_grain()); break;
    case UnaryKind::Acosh: unary_loop<T, T>(out, a, [](T x) { return std::acosh(x); }, costly_grain()); break;
    case UnaryKind::Sign:
      unary_loop<T, T>(out, a, [](T x) { return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0)); });  // NaN, -0: 0
      break;
    case UnaryKind::PowScalar:
      if (p0 == T(2)) unary_loop<T, T>(out, a, [](T x) { return x * x; });
      else if (p0 == T(0.5)) unary_loop<T, T>(out, a, [](T x) { return std::sqrt(x); });
      else if (p0 == T(1)) unary_loop<T, T>(out, a, [](T x) { return x; });
      else if (p0 == T(-1)) unary_loop<T, T>(out, a, [](T x) { return T(1) / x; });
      else unary_loop<T, T>(out, a, [p0](T x) { return std::pow(x, p0); });
      break;
    case UnaryKind::TanhGradFromOut: unary_loop<T, T>(out, a, [](T v) { return k_tanh_grad_from_out(v); }); break;
    case UnaryKind::SigmoidGradFromOut: unary_loop<T, T>(out, a, [](T v) { return k_sigmoid_grad_from_out(v); }); break;
    case UnaryKind::GeluGrad: unary_loop<T, T>(out, a, [](T x) { return k_gelu_grad(x); }, costly_grain()); break;
    case UnaryKind::ReluMask: unary_loop<T, T>(out, a, [](T v) { return k_relu_mask(v); }); break;
    case UnaryKind::IsNan: unary_loop<T, bool>(out, a, [](T x) { return x != x; }); break;
    case UnaryKind::IsFinite: unary_loop<T, bool>(out, a, [](T x) { return std::isfinite(x); }); break;
    case UnaryKind::Not: unary_loop<T, bool>(out, a, [](T x) { return x == T(0); }); break;
  }
}

// The public name of a kernel's op, for errors (the kernel ops' names come from ops.def).
static const char* unary_kind_name(UnaryKind k) {
  switch (k) {
#define DG_KERNEL_OP(name, display, saves, signature, hot, kernel) case UnaryKind::kernel: return #name;
#include "../ops.def"
    case UnaryKind::Neg: return "neg";
    case UnaryKind::LeakyRelu: return "leaky_relu";
    case UnaryKind::Softplus: return "softplus";
    case UnaryKind::PowScalar: return "pow";
    case UnaryKind::Not: return "logical_not";
    case UnaryKind::IsNan: return "isnan";
    case UnaryKind::IsFinite: return "isfinite";
  }
  return "?";
}

// ---- complex (Note [Complex dtypes]) ----
// std::complex's functions, except where a cancellation near 0 would lose digits that torch keeps: log1p and expm1
// from their real parts' log1p / expm1 (|1+z|^2 = 1 + (2x + x^2 + y^2); e^x cos y - 1 = expm1(x) cos y - 2 sin^2(y/2)).
template <typename C>
inline C k_complex_log1p(C z) {
  using R = typename C::value_type;
  const R x = z.real(), y = z.imag();
  return C(R(0.5) * std::log1p(x * (R(2) + x) + y * y), std::atan2(y, R(1) + x));
}
template <typename C>
inline C k_complex_expm1(C z) {
  using R = typename C::value_type;
  const R x = z.real(), y = z.imag(), s = std::sin(y / R(2));
  return C(std::expm1(x) * std::cos(y) - R(2) * s * s, std::exp(x) * std::sin(y));
}
template <typename C>
inline C k_sgn(C z) {  // torch.sgn: z / |z|, 0 at 0
  using R = typename C::value_type;
  const R m = std::abs(z);
  return m == R(0) ? C(0) : z / m;
}

template <typename C>
static void unary_complex(UnaryKind k, const Tensor& out, const Tensor& a, double p0) {
  using R = typename C::value_type;
  switch (k) {
    case UnaryKind::Neg: unary_loop<C, C>(out, a, [](C z) { return -z; }); break;
    case UnaryKind::Conj: unary_loop<C, C>(out, a, [](C z) { return std::conj(z); }); break;
    case UnaryKind::Exp: unary_loop<C, C>(out, a, [](C z) { return std::exp(z); }, costly_grain()); break;
    case UnaryKind::Log: unary_loop<C, C>(out, a, [](C z) { return std::log(z); }, costly_grain()); break;
    case UnaryKind::Log2:
      unary_loop<C, C>(out, a, [](C z) { return std::log(z) / R(0.693147180559945309417232121458176568); });
      break;
    case UnaryKind::Log10: unary_loop<C, C>(out, a, [](C z) { return std::log10(z); }, costly_grain()); break;
    case UnaryKind::Log1p: unary_loop<C, C>(out, a, [](C z) { return k_complex_log1p(z); }, costly_grain()); break;
    case UnaryKind::Expm1: unary_loop<C, C>(out, a, [](C z) { return k_complex_expm1(z); }, costly_grain()); break;
    case UnaryKind::Sqrt: unary_loop<C, C>(out, a, [](C z) { return std::sqrt(z); }); break;
    case UnaryKind::Rsqrt: unary_loop<C, C>(out, a, [](C z) { return C(1) / std::sqrt(z); }); break;
    case UnaryKind::Sin: unary_loop<C, C>(out, a, [](C z) { return std::sin(z); }, costly_grain()); break;
    case UnaryKind::Cos: unary_loop<C, C>(out, a, [](C z) { return std::cos(z); }, costly_grain()); break;
    case UnaryKind::Tan: unary_loop<C, C>(out, a, [](C z) { return std::tan(z); }, costly_grain()); break;
    case UnaryKind::Tanh: unary_loop<C, C>(out, a, [](C z) { return std::tanh(z); }, costly_grain()); break;
    case UnaryKind::Sinh: unary_loop<C, C>(out, a, [](C z) { return std::sinh(z); }, costly_grain()); break;
    case UnaryKind::Asin: unary_loop<C, C>(out, a, [](C z) { return std::asin(z); }, costly_grain()); break;
    case UnaryKind::Acos: unary_loop<C, C>(out, a, [](C z) { return std::acos(z); }, costly_grain()); break;
    case UnaryKind::Atan: unary_loop<C, C>(out, a, [](C z) { return std::atan(z); }, costly_grain()); break;
    case UnaryKind::Asinh: unary_loop<C, C>(out, a, [](C z) { return std::asinh(z); }, costly_grain()); break;
    case UnaryKind::Atanh: unary_loop<C, C>(out, a, [](C z) { return std::atanh(z); }, costly_grain()); break;
    case UnaryKind::Cosh: unary_loop<C, C>(out, a, [](C z) { return std::cosh(z); }, costly_grain()); break;
    case UnaryKind::Acosh: unary_loop<C, C>(out, a, [](C z) { return std::acosh(z); }, costly_grain()); break;
    case UnaryKind::Sigmoid:
      unary_loop<C, C>(out, a, [](C z) { return C(1) / (C(1) + std::exp(-z)); }, costly_grain());
      break;
    case UnaryKind::Sign: unary_loop<C, C>(out, a, [](C z) { return k_sgn(z); }); break;
    case UnaryKind::PowScalar: {
      const R p = (R)p0;
      if (p0 == 2) unary_loop<C, C>(out, a, [](C z) { return z * z; });
      else if (p0 == 1) unary_loop<C, C>(out, a, [](C z) { return z; });
      else if (p0 == 0) unary_loop<C, C>(out, a, [](C) { return C(1); });
      else unary_loop<C, C>(out, a, [p](C z) { return std::pow(z, p); }, costly_grain());
      break;
    }
    case UnaryKind::TanhGradFromOut: unary_loop<C, C>(out, a, [](C y) { return C(1) - y * y; }); break;
    case UnaryKind::SigmoidGradFromOut: unary_loop<C, C>(out, a, [](C y) { return y * (C(1) - y); }); break;
    case UnaryKind::Abs: unary_loop<C, R>(out, a, [](C z) { return std::abs(z); }); break;
    case UnaryKind::IsNan:
      unary_loop<C, bool>(out, a, [](C z) { return std::isnan(z.real()) || std::isnan(z.imag()); });
      break;
    case UnaryKind::IsFinite:
      unary_loop<C, bool>(out, a, [](C z) { return std::isfinite(z.real()) && std::isfinite(z.imag()); });
      break;
    case UnaryKind::Not: unary_loop<C, bool>(out, a, [](C z) { return z == C(0); }); break;
    default:
      throw TypeError(str_cat(unary_kind_name(k), ": not supported for complex tensors (dtype ",
                              dtype_name(a->dtype), ")."));
  }
}

template <typename T>
static void unary_integral(UnaryKind k, const Tensor& out, const Tensor& a) {
  switch (k) {
    case UnaryKind::Neg: unary_loop<T, T>(out, a, [](T x) { return (T)-x; }); break;
    case UnaryKind::Conj: unary_loop<T, T>(out, a, [](T x) { return x; }); break;
    case UnaryKind::Abs: unary_loop<T, T>(out, a, [](T x) { return x < 0 ? (T)-x : x; }); break;
    case UnaryKind::Sign: unary_loop<T, T>(out, a, [](T x) { return (T)(x > 0 ? 1 : (x < 0 ? -1 : 0)); }); break;
    case UnaryKind::Relu: unary_loop<T, T>(out, a, [](T x) { return x > 0 ? x : (T)0; }); break;
    case UnaryKind::Not: unary_loop<T, bool>(out, a, [](T x) { return x == 0; }); break;
    case UnaryKind::IsNan: unary_loop<T, bool>(out, a, [](T) { return false; }); break;
    case UnaryKind::IsFinite: unary_loop<T, bool>(out, a, [](T) { return true; }); break;
    default: throw TypeError("this elementwise op is not defined for integer tensors.");
  }
}

Tensor unary_kernel(UnaryKind k, const Tensor& a_in, DType out_dtype, double p0, double p1) {
  bool bool_out = k == UnaryKind::Not || k == UnaryKind::IsNan || k == UnaryKind::IsFinite;
  const DType in = a_in->dtype;
  if (is_complex(in) || is_complex(out_dtype)) {
    // computed in the complex dtype asked for (a real input is converted); abs gives the real value type
    const DType compute = bool_out ? (is_complex(in) ? in : complex_of(in)) : (is_complex(out_dtype) ? out_dtype : in);
    Tensor a = in == compute ? a_in : contiguous_copy(a_in, compute);
    const DType result = bool_out ? DType::Bool : (k == UnaryKind::Abs ? complex_value_type(compute) : compute);
    Tensor out = empty(a->shape, result);
    // an empty tensor too: an op without a complex kernel refuses it whatever its size (torch does), so the
    // kind is tried on one element
    const bool none = out->numel == 0;
    DG_DISPATCH_COMPLEX(compute, C, unary_complex<C>(k, none ? empty({1}, result) : out,
                                                     none ? full({1}, 0.0, compute) : a, p0));
    return out;
  }
  if (is_half(in) || (!bool_out && is_half(out_dtype)) || (is_narrow_int(in) && (bool_out || in == out_dtype))) {
    // Note [Half types] and Note [Narrow integers]: computed in float32 / int64, converted back
    const DType wide = is_half(in) ? DType::Float32 : (is_narrow_int(in) ? DType::Int64 : in);
    Tensor r = unary_kernel(k, contiguous_copy(a_in, wide), bool_out ? DType::Bool : widen(out_dtype), p0, p1);
    return bool_out || r->dtype == out_dtype ? r : contiguous_copy(r, out_dtype);
  }
  DType compute = bool_out ? a_in->dtype : out_dtype;
  Tensor a = a_in->dtype == compute ? a_in : contiguous_copy(a_in, compute);
  Tensor out = empty(a->shape, bool_out ? DType::Bool : compute);
  if (out->numel == 0) return out;
  switch (compute) {
    case DType::Float32: unary_float<float>(k, out, a, (float)p0, (float)p1); break;
    case DType::Float64: unary_float<double>(k, out, a, p0, p1); break;
    case DType::Int64: unary_integral<int64_t>(k, out, a); break;
    case DType::Bool: unary_integral<bool>(k, out, a); break;
    default: throw_dtype_unsupported(compute);
  }
  return out;
}

// grad * f'(x) in one pass over contiguous operands of one shape and dtype (the derivative helpers' kinds)
template <typename T>
static void unary_grad_float(UnaryKind k, const Tensor& out, const Tensor& g, const Tensor& a) {
  const T* __restrict gp = g->data<T>();
  const T* __restrict x = a->data<T>();
  T* __restrict y = out->data<T>();  // a fresh tensor: aliases neither operand
  auto loop = [&](auto f, int64_t grain) {
    parallel_for(out->numel, [&](int64_t lo, int64_t hi) DG_FLATTEN {
      for (int64_t i = lo; i < hi; ++i) y[i] = gp[i] * f(x[i]);
    }, grain);
  };
  switch (k) {
    case UnaryKind::TanhGradFromOut: loop([](T v) { return k_tanh_grad_from_out(v); }, parallel_grain()); break;
    case UnaryKind::SigmoidGradFromOut: loop([](T v) { return k_sigmoid_grad_from_out(v); }, parallel_grain()); break;
    case UnaryKind::GeluGrad:
#ifdef DG_HAVE_GELU16
      if constexpr (std::is_same_v<T, float>) {  // Note [GELU in 16 lanes] (fast_math.h)
        parallel_for(out->numel, [&](int64_t lo, int64_t hi) { gelu_grad16(gp + lo, x + lo, y + lo, hi - lo); },
                     costly_grain());
        break;
      }
#endif
      loop([](T v) { return k_gelu_grad(v); }, costly_grain());
      break;
    case UnaryKind::ReluMask: loop([](T v) { return k_relu_mask(v); }, parallel_grain()); break;
    default: throw std::logic_error("unary_grad_kernel: not a derivative kind");
  }
}

bool unary_grad_fusable(const Tensor& grad, const Tensor& a) {
  const DType dt = a->dtype;
  return grad->dtype == dt && grad->shape == a->shape && grad->is_contiguous() && a->is_contiguous() &&
         (dt == DType::Float32 || dt == DType::Float64);
}

Tensor unary_grad_kernel(UnaryKind k, const Tensor& grad, const Tensor& a) {
  const DType dt = a->dtype;
  Tensor out = empty(a->shape, dt);
  if (out->numel == 0) return out;
  if (dt == DType::Float32) unary_grad_float<float>(k, out, grad, a);
  else unary_grad_float<double>(k, out, grad, a);
  return out;
}

// ---- binary ----
// Note [Row-broadcast binary loops]: bench/vmap.py rows-2000 multiplies a (2000, 16) tensor by a (16,) one; the
// strided loop ran it as 2000 calls of its row body (9.8 us, a contiguous product of the same size 3.5 us, on the
// loaded 2-core Xeon). trailing_block(out, t) is k > 0 when t is contiguous and its shape is out's trailing dims
// (leading size-1 dims allowed) over k elements, with k a proper divisor of out's size and out contiguous; 0
// otherwise. Each element is still f(x, y) of the same two values, so results are those of the strided loop.
static int64_t trailing_block(const Tensor& out, const Tensor& t) {
  if (!t->is_contiguous() || !out->is_contiguous() || t->numel <= 1 || t->numel >= out->numel) return 0;
  const int64_t nd = (int64_t)out->shape.size(), td = (int64_t)t->shape.size();
  int64_t j = td - 1, d = nd - 1, k = 1;
  for (; j >= 0 && d >= 0 && k < t->numel; --j, --d) {
    if (t->shape[j] != out->shape[d]) return 0;
    k *= t->shape[j];
  }
  for (; j >= 0; --j)
    if (t->shape[j] != 1) return 0;
  return k == t->numel ? k : 0;
}

template <typename T, typename R, typename F>
static void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  const int64_t n = out->numel;
  // hot path: same shape, both contiguous, or one side a single element
  bool a_flat = a->is_contiguous() && (a->numel == n), b_flat = b->is_contiguous() && (b->numel == n);
  if ((a_flat || a->numel == 1) && (b_flat || b->numel == 1) && (a_flat || b_flat || n == 1)) {
    const T* x = a->data<T>();
    const T* y = b->data<T>();
    R* o = out->data<R>();
    if (a_flat && b_flat) {
      parallel_for(n, [&](int64_t lo, int64_t hi) DG_FLATTEN {
        for (int64_t i = lo; i < hi; ++i) o[i] = f(x[i], y[i]);
      });
    } else if (a_flat) {
      const T yv = *y;
      parallel_for(n, [&](int64_t lo, int64_t hi) DG_FLATTEN {
        for (int64_t i = lo; i < hi; ++i) o[i] = f(x[i], yv);
      });
    } else if (b_flat) {
      const T xv = *x;
      parallel_for(n, [&](int64_t lo, int64_t hi) DG_FLATTEN {
        for (int64_t i = lo; i < hi; ++i) o[i] = f(xv, y[i]);
      });
    } else {
      o[0] = f(x[0], y[0]);
    }
    return;
  }
  // a contiguous operand against one broadcast over its leading dims (x * w for x (N, k), w (k,)): a loop over the
  // rows of k, without the strided loop's per-row bookkeeping (Note [Row-broadcast binary loops])
  const int64_t k = a_flat ? trailing_block(out, b) : b_flat ? trailing_block(out, a) : 0;
  if (k > 0 && n > 0) {
    const T* x = a->data<T>();
    const T* y = b->data<T>();
    R* o = out->data<R>();
    const int64_t rows = n / k;
    const int64_t grain = std::max<int64_t>(1, parallel_grain() / k);
    if (a_flat) {
      parallel_for(rows, [&](int64_t lo, int64_t hi) DG_FLATTEN {
        for (int64_t r = lo; r < hi; ++r) {
          const T* xr = x + r * k;
          R* orow = o + r * k;
          for (int64_t i = 0; i < k; ++i) orow[i] = f(xr[i], y[i]);
        }
      }, grain);
    } else {
      parallel_for(rows, [&](int64_t lo, int64_t hi) DG_FLATTEN {
        for (int64_t r = lo; r < hi; ++r) {
          const T* yr = y + r * k;
          R* orow = o + r * k;
          for (int64_t i = 0; i < k; ++i) orow[i] = f(x[i], yr[i]);
        }
      }, grain);
    }
    return;
  }
  StridedLoop loop({out.get(), a.get(), b.get()});
  loop.run([&](char** p, const int64_t* s, int64_t m) DG_FLATTEN {
    if (s[0] == sizeof(R) && s[1] == sizeof(T) && s[2] == sizeof(T)) {  // rows of windows: vectorises
      R* o = (R*)p[0]; const T* x = (const T*)p[1]; const T* y = (const T*)p[2];
      for (int64_t i = 0; i < m; ++i) o[i] = f(x[i], y[i]);
    } else if (s[0] == sizeof(R) && s[1] == sizeof(T) && s[2] == 0) {
      R* o = (R*)p[0]; const T* x = (const T*)p[1]; const T yv = *(const T*)p[2];
      for (int64_t i = 0; i < m; ++i) o[i] = f(x[i], yv);
    } else if (s[0] == sizeof(R) && s[1] == 0 && s[2] == sizeof(T)) {
      R* o = (R*)p[0]; const T xv = *(const T*)p[1]; const T* y = (const T*)p[2];
      for (int64_t i = 0; i < m; ++i) o[i] = f(xv, y[i]);
    } else {
      for (int64_t i = 0; i < m; ++i)
        *(R*)(p[0] + i * s[0]) = f(*(const T*)(p[1] + i * s[1]), *(const T*)(p[2] + i * s[2]));
    }
  }, true);
}

template <typename T>
static inline T k_max(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a > b ? a : b)); }
template <typename T>
static inline T k_min(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a < b ? a : b)); }

// Note [Remainders]: remainder moves fmod's result into the divisor's sign (torch's kernel; a zero stays fmod's
// zero, the dividend's sign). An integer divisor 0 is refused by the op before the kernel runs, and -1 gives 0
// without the division whose INT64_MIN / -1 overflows. floor_divide's quotient rounds as numpy's npy_divmod (the
// reference engine calls np.floor_divide): (a - fmod(a, b)) / b, moved down a step into the divisor's sign, then
// rounded to the nearest integer, so an inexact division cannot land a step off.
template <typename T>
static inline T k_fmod(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) return std::fmod(x, y);
  else if constexpr (std::is_same_v<T, bool>) return T(0);
  else return (y == 0 || y == -1) ? T(0) : T(x % y);
}
template <typename T>
static inline T k_remainder(T x, T y) {
  T r = k_fmod(x, y);
  if constexpr (!std::is_same_v<T, bool>)
    if (r != 0 && ((y < 0) != (r < 0))) r = T(r + y);
  return r;
}
template <typename T>
static inline T k_floor_divide(T x, T y) {
  if (y == 0) return x / y;
  const T mod = std::fmod(x, y);
  T q = (x - mod) / y;
  if (mod != 0 && ((y < 0) != (mod < 0))) q -= T(1);
  if (q == 0) return std::copysign(T(0), x / y);
  T floored = std::floor(q);
  if (q - floored > T(0.5)) floored += T(1);
  return floored;
}

template <typename T>
static void binary_typed(BinaryKind k, const Tensor& out, const Tensor& a, const Tensor& b) {
  switch (k) {
    case BinaryKind::Add: binary_loop<T, T>(out, a, b, [](T x, T y) { return k_add(x, y); }); break;
    case BinaryKind::Sub: binary_loop<T, T>(out, a, b, [](T x, T y) { return k_sub(x, y); }); break;
    case BinaryKind::Mul: binary_loop<T, T>(out, a, b, [](T x, T y) { return k_mul(x, y); }); break;
    case BinaryKind::Div:
      if constexpr (std::is_floating_point_v<T>) binary_loop<T, T>(out, a, b, [](T x, T y) { return x / y; });
      else throw TypeError("div: integer division is computed in floating point; this is a bug.");
      break;
    case BinaryKind::Pow:
      if constexpr (std::is_floating_point_v<T>)
        binary_loop<T, T>(out, a, b, [](T x, T y) { return std::pow(x, y); });
      else if constexpr (std::is_same_v<T, int64_t>)
        binary_loop<T, T>(out, a, b, [](T x, T y) { return k_int_pow(x, y); });
      else throw TypeError("pow: not supported for bool tensors.");
      break;
    case BinaryKind::Maximum: binary_loop<T, T>(out, a, b, [](T x, T y) { return k_max(x, y); }); break;
    case BinaryKind::Minimum: binary_loop<T, T>(out, a, b, [](T x, T y) { return k_min(x, y); }); break;
    case BinaryKind::Atan2:
      if constexpr (std::is_floating_point_v<T>)
        binary_loop<T, T>(out, a, b, [](T x, T y) { return k_atan2(x, y); });
      else throw TypeError("atan2: integers are computed in floating point; this is a bug.");
      break;
    case BinaryKind::Remainder: binary_loop<T, T>(out, a, b, [](T x, T y) { return k_remainder(x, y); }); break;
    case BinaryKind::Fmod: binary_loop<T, T>(out, a, b, [](T x, T y) { return k_fmod(x, y); }); break;
    case BinaryKind::FloorDivide:
    case BinaryKind::TruncDivide:
      if constexpr (std::is_floating_point_v<T>) {
        if (k == BinaryKind::FloorDivide) binary_loop<T, T>(out, a, b, [](T x, T y) { return k_floor_divide(x, y); });
        else binary_loop<T, T>(out, a, b, [](T x, T y) { return std::trunc(x / y); });
      } else {
        throw TypeError("the quotients of remainder and fmod are computed in floating point; this is a bug.");
      }
      break;
    case BinaryKind::Eq: binary_loop<T, bool>(out, a, b, [](T x, T y) { return x == y; }); break;
    case BinaryKind::Ne: binary_loop<T, bool>(out, a, b, [](T x, T y) { return x != y; }); break;
    case BinaryKind::Lt: binary_loop<T, bool>(out, a, b, [](T x, T y) { return x < y; }); break;
    case BinaryKind::Le: binary_loop<T, bool>(out, a, b, [](T x, T y) { return x <= y; }); break;
    case BinaryKind::Gt: binary_loop<T, bool>(out, a, b, [](T x, T y) { return x > y; }); break;
    case BinaryKind::Ge: binary_loop<T, bool>(out, a, b, [](T x, T y) { return x >= y; }); break;
    case BinaryKind::And: binary_loop<T, bool>(out, a, b, [](T x, T y) { return x != T(0) && y != T(0); }); break;
    case BinaryKind::Or: binary_loop<T, bool>(out, a, b, [](T x, T y) { return x != T(0) || y != T(0); }); break;
    case BinaryKind::Xor: binary_loop<T, bool>(out, a, b, [](T x, T y) { return (x != T(0)) != (y != T(0)); }); break;
  }
}

static bool is_bool_result(BinaryKind k) { return k >= BinaryKind::Eq; }

// a switch, not an array indexed by the enum: a kind added to the enum (remainder, fmod) cannot shift the names
// (-Wswitch names a missing case)
static const char* binary_kind_name(BinaryKind k) {
  switch (k) {
    case BinaryKind::Add: return "add";
    case BinaryKind::Sub: return "sub";
    case BinaryKind::Mul: return "mul";
    case BinaryKind::Div: return "div";
    case BinaryKind::Pow: return "pow";
    case BinaryKind::Maximum: return "maximum";
    case BinaryKind::Minimum: return "minimum";
    case BinaryKind::Atan2: return "atan2";
    case BinaryKind::Remainder: return "remainder";
    case BinaryKind::Fmod: return "fmod";
    case BinaryKind::FloorDivide: return "floor_divide";
    case BinaryKind::TruncDivide: return "trunc_divide";
    case BinaryKind::Eq: return "eq";
    case BinaryKind::Ne: return "ne";
    case BinaryKind::Lt: return "lt";
    case BinaryKind::Le: return "le";
    case BinaryKind::Gt: return "gt";
    case BinaryKind::Ge: return "ge";
    case BinaryKind::And: return "logical_and";
    case BinaryKind::Or: return "logical_or";
    case BinaryKind::Xor: return "logical_xor";
  }
  return "binary op";
}

// Complex operands: arithmetic, pow, equality and the logical ops (nonzero is true); torch defines no order on
// complex numbers, so maximum, minimum, atan2 and <, <=, >, >= are refused.
template <typename C>
static void binary_complex(BinaryKind k, const Tensor& out, const Tensor& a, const Tensor& b) {
  const C zero(0);
  switch (k) {
    case BinaryKind::Add: binary_loop<C, C>(out, a, b, [](C x, C y) { return x + y; }); break;
    case BinaryKind::Sub: binary_loop<C, C>(out, a, b, [](C x, C y) { return x - y; }); break;
    case BinaryKind::Mul: binary_loop<C, C>(out, a, b, [](C x, C y) { return x * y; }); break;
    case BinaryKind::Div: binary_loop<C, C>(out, a, b, [](C x, C y) { return x / y; }); break;
    case BinaryKind::Pow:
      binary_loop<C, C>(out, a, b, [](C x, C y) { return y == C(0) ? C(1) : std::pow(x, y); });
      break;
    case BinaryKind::Eq: binary_loop<C, bool>(out, a, b, [](C x, C y) { return x == y; }); break;
    case BinaryKind::Ne: binary_loop<C, bool>(out, a, b, [](C x, C y) { return x != y; }); break;
    case BinaryKind::And: binary_loop<C, bool>(out, a, b, [zero](C x, C y) { return x != zero && y != zero; }); break;
    case BinaryKind::Or: binary_loop<C, bool>(out, a, b, [zero](C x, C y) { return x != zero || y != zero; }); break;
    case BinaryKind::Xor:
      binary_loop<C, bool>(out, a, b, [zero](C x, C y) { return (x != zero) != (y != zero); });
      break;
    default:
      throw TypeError(str_cat(binary_kind_name(k), ": not supported for complex tensors (", dtype_name(a->dtype),
                              "); complex numbers have no order."));
  }
}

Tensor binary_kernel(BinaryKind k, const Tensor& a_in, const Tensor& b_in, DType compute, const char* op) {
  if (is_half(compute) || is_narrow_int(compute)) {  // Note [Half types] and Note [Narrow integers]
    Tensor r = binary_kernel(k, a_in, b_in, widen(compute), op);
    return is_bool_result(k) ? r : contiguous_copy(r, compute);
  }
  Shape shape = a_in->shape == b_in->shape ? a_in->shape : broadcast_shapes(a_in->shape, b_in->shape, op);
  Tensor a = a_in->dtype == compute ? a_in : contiguous_copy(a_in, compute);
  Tensor b = b_in->dtype == compute ? b_in : contiguous_copy(b_in, compute);
  Tensor out = empty(shape, is_bool_result(k) ? DType::Bool : compute);
  if (is_complex(compute)) {  // an empty tensor too: the ops complex numbers have no order refuse it (on one element)
    const bool none = out->numel == 0;
    Tensor one = none ? full({1}, 0.0, compute) : Tensor();
    DG_DISPATCH_COMPLEX(compute, C, binary_complex<C>(k, none ? empty({1}, out->dtype) : out, none ? one : a,
                                                      none ? one : b));
    return out;
  }
  if (out->numel == 0) return out;
  if (compute == DType::Bool && !is_bool_result(k)) {
    // bool arithmetic: add/mul as logical or/and (torch), others via int64
    if (k == BinaryKind::Add || k == BinaryKind::Maximum) k = BinaryKind::Or;
    else if (k == BinaryKind::Mul || k == BinaryKind::Minimum) k = BinaryKind::And;
    else throw TypeError(str_cat(op, ": not supported for bool tensors; convert with .long() or .float() first."));
    Tensor tmp = empty(shape, DType::Bool);
    binary_typed<bool>(k, tmp, a, b);
    return tmp;
  }
  DG_DISPATCH_ALL(compute, T, binary_typed<T>(k, out, a, b));
  return out;
}

bool has_zero_kernel(const Tensor& t_in) {
  if (t_in->numel == 0) return false;
  Tensor t = contiguous_data(is_half(t_in->dtype) || is_narrow_int(t_in->dtype) ? contiguous_copy(t_in, widen(t_in->dtype))
                                                                                 : t_in);
  bool found = false;
  DG_DISPATCH_ALL(t->dtype, T, {
    const T* p = t->data<T>();
    for (int64_t i = 0; i < t->numel && !found; ++i) found = p[i] == T(0);
  });
  return found;
}

// dst += src in place (same shape and floating dtype; dst may be a strided window of a buffer). Elementwise
// k_add as binary_kernel's Add, so the bits equal those of add(dst, src).
void add_into_kernel(const Tensor& dst, const Tensor& src) {
  DG_CHECK(dst->shape == src->shape && dst->dtype == src->dtype && is_floating(dst->dtype), RuntimeError,
           "add_into: expected tensors of one shape and floating dtype.");
  if (dst->numel == 0) return;
  if (is_half(dst->dtype)) {  // Note [Half types]: add's float32 sum rounded once, written back (add's bits)
    copy_into(dst, binary_kernel(BinaryKind::Add, dst, src, dst->dtype, "add"));
    return;
  }
  DG_DISPATCH_FLOAT(dst->dtype, T, binary_loop<T, T>(dst, dst, src, [](T x, T y) { return k_add(x, y); }));
}

// dst = dst (op) other, written straight into dst (Note [In-place arithmetic without a temporary], inplace.cpp):
// the same loop as binary_kernel's with dst as both the output and the left operand, so the bits are add()'s.
void binary_into_kernel(BinaryKind k, const Tensor& dst, const Tensor& other) {
  DG_CHECK(dst->dtype == other->dtype && (dst->dtype == DType::Float32 || dst->dtype == DType::Float64), RuntimeError,
           "binary_into: expected float32 or float64 tensors of one dtype.");
  if (dst->numel == 0) return;
  DG_DISPATCH_FLOAT(dst->dtype, T, binary_typed<T>(k, dst, dst, other));
}

// dst += other * alpha for contiguous tensors of one shape: the product rounded on its own, then the sum (the bits
// of add(dst, mul(other, alpha))). The product goes through a small buffer, block by block: one loop computing
// d + o * a would be contracted into a fused multiply-add, which rounds once.
template <typename T>
static void add_scaled_typed(T* d, const T* o, T alpha, int64_t n) {
  constexpr int64_t kBlock = 512;
  parallel_for(n, [&](int64_t lo, int64_t hi) {
    T product[kBlock];
    for (int64_t start = lo; start < hi; start += kBlock) {
      const int64_t m = hi - start < kBlock ? hi - start : kBlock;
      for (int64_t j = 0; j < m; ++j) product[j] = k_mul(o[start + j], alpha);
      for (int64_t j = 0; j < m; ++j) d[start + j] = k_add(d[start + j], product[j]);
    }
  });
}

void add_scaled_into_kernel(const Tensor& dst, const Tensor& other, double alpha) {
  DG_CHECK(dst->dtype == other->dtype && (dst->dtype == DType::Float32 || dst->dtype == DType::Float64) &&
           dst->shape == other->shape && dst->is_contiguous() && other->is_contiguous(), RuntimeError,
           "add_scaled_into: expected contiguous float32 or float64 tensors of one shape and dtype.");
  if (dst->numel == 0) return;
  DG_DISPATCH_FLOAT(dst->dtype, T, add_scaled_typed<T>(dst->data<T>(), other->data<T>(), static_cast<T>(alpha),
                                                       dst->numel));
}

// ---- where, clamp ----
Tensor where_kernel(const Tensor& cond, const Tensor& a, const Tensor& b, const char* op) {
  Shape shape = broadcast_shapes(broadcast_shapes(cond->shape, a->shape, op), b->shape, op);
  Tensor out = empty(shape, a->dtype);
  if (out->numel == 0) return out;
  StridedLoop loop({out.get(), cond.get(), a.get(), b.get()});
  DG_DISPATCH_STORAGE(a->dtype, T, {
    loop.run([&](char** p, const int64_t* s, int64_t m) {
      for (int64_t i = 0; i < m; ++i)
        *(T*)(p[0] + i * s[0]) = *(const bool*)(p[1] + i * s[1]) ? *(const T*)(p[2] + i * s[2])
                                                                   : *(const T*)(p[3] + i * s[3]);
    }, true);
  });
  return out;
}

// lo / hi: -inf / +inf where absent. NaN (in x or a bound) propagates; an integer tensor gets integral or infinite
// bounds only (clamp() promotes it otherwise), converted to the nearest value its dtype holds.
template <typename T>
static T clamp_bound(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (v <= (double)std::numeric_limits<T>::lowest()) return std::numeric_limits<T>::lowest();
    if (v >= (double)std::numeric_limits<T>::max()) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

Tensor clamp_kernel(const Tensor& a, double lo, double hi) {
  if (is_half(a->dtype) || is_narrow_int(a->dtype))  // the bounds are clamped to int64, so the result fits back
    return contiguous_copy(clamp_kernel(contiguous_copy(a, widen(a->dtype)), lo, hi), a->dtype);
  Tensor out = empty(a->shape, a->dtype);
  if (out->numel == 0) return out;
  const bool nan_bound = std::isnan(lo) || std::isnan(hi);
  DG_DISPATCH_ALL(a->dtype, T, {
    const T l = clamp_bound<T>(lo), h = clamp_bound<T>(hi);
    unary_loop<T, T>(out, a, [=](T x) {
      if constexpr (std::is_floating_point_v<T>)
        if (nan_bound) return std::numeric_limits<T>::quiet_NaN();
      if (x != x) return x;
      if (x < l) x = l;
      if (x > h) x = h;
      return x;
    });
  });
  return out;
}

// Note [One-element kernels]: the static replay of a program of one-element float32 ops (capture_bind.cpp, Note
// [Scalar replay]) computes each op on a float instead of a tensor. These are the loops' bodies above for one
// element: the same k_* functions on the same operands, so the same bits as the kernels' one-element case
// (binary_loop, unary_float, unary_grad_float). They are out of line (noinline, another translation unit than their
// callers) so that no caller's arithmetic can be contracted with theirs into a fused multiply-add, which rounds once.
// false: a kind these do not cover (the replay then runs the tensors' kernels).
__attribute__((noinline)) bool scalar_binary_f32(BinaryKind k, float x, float y, float& out) {
  switch (k) {
    case BinaryKind::Add: out = k_add(x, y); return true;
    case BinaryKind::Sub: out = k_sub(x, y); return true;
    case BinaryKind::Mul: out = k_mul(x, y); return true;
    case BinaryKind::Div: out = x / y; return true;
    default: return false;
  }
}

__attribute__((noinline)) bool scalar_unary_f32(UnaryKind k, float x, float& out) {
  switch (k) {
    case UnaryKind::Neg: out = -x; return true;
    case UnaryKind::Exp: out = k_exp(x); return true;
    case UnaryKind::Tanh: out = k_tanh(x); return true;
    case UnaryKind::Sigmoid: out = k_sigmoid(x); return true;
    case UnaryKind::Relu: out = x > 0.0f ? x : (x != x ? x : 0.0f); return true;
    default: return false;
  }
}

__attribute__((noinline)) bool scalar_unary_grad_f32(UnaryKind k, float g, float y, float& out) {
  switch (k) {  // unary_grad_float's gp[i] * f(x[i])
    case UnaryKind::TanhGradFromOut: out = g * k_tanh_grad_from_out(y); return true;
    case UnaryKind::SigmoidGradFromOut: out = g * k_sigmoid_grad_from_out(y); return true;
    case UnaryKind::ReluMask: out = g * k_relu_mask(y); return true;
    default: return false;
  }
}

}  // namespace dyngrad
