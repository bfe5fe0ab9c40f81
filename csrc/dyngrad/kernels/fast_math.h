// fast_math.h: float32 exp, tanh, sigmoid, the normal CDF (GELU and its derivative), erf, sin, cos, tan, the
// logarithms, expm1, sinh and the inverse trigonometric functions that vectorise (the std functions do not), for
// elementwise.cpp and the fused recurrent cells of rnn.cpp; the k_ functions (k_exp, k_log1p, k_atan2...) pick them
// for float and the std functions for double.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace dyngrad {

// The kernels' loops vectorise only when every call in them is inlined; inside elementwise.cpp's templates GCC's
// inlining budget stopped short of the compositions (log2 on fast_log_reduce, sinh on two exps, tan on the
// reduction). Forced, 1M float32 elements on one thread (bench/prims.py's inputs, load 4): log2 2.24 -> 0.49 ms,
// tan 2.81 -> 1.08, sinh 4.30 -> 1.15, atan2 3.43 -> 1.03 (expm1 went 9.2 -> 32.5 ms, not understood yet: the
// same loop compiled alone runs in 2.2 ms).
#define DG_FAST_INLINE inline __attribute__((always_inline))

// ---- float32 math that vectorises (Cephes-style polynomials; ~1 ulp) ----
DG_FAST_INLINE float fast_expf(float x) {
  const float hi = 88.3762626647949f, lo = -87.3365447504019f;
  float xc = x > hi ? hi : (x < lo ? lo : x);
  float n = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;  // round to nearest
  float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  float y = p * scale;
  y = x > hi ? INFINITY : y;
  y = x < lo ? 0.0f : y;
  return x != x ? x : y;
}

DG_FAST_INLINE float fast_tanhf(float x) {
  float ax = x < 0 ? -x : x;
  // small |x|: odd polynomial (no cancellation); large: 1 - 2/(exp(2|x|)+1)
  float z = x * x;
  float small = ((((-5.70498872745E-3f * z + 2.06390887954E-2f) * z - 5.37397155531E-2f) * z +
                  1.33314422036E-1f) * z - 3.33332819422E-1f) * z * x + x;
  float e = fast_expf(2.0f * ax);
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = x < 0 ? -big : big;
  float y = ax < 0.625f ? small : big;
  return x != x ? x : y;
}

DG_FAST_INLINE float fast_sigmoidf(float x) { return 1.0f / (1.0f + fast_expf(-x)); }

// Phi(x) = (1 + erf(x / sqrt 2)) / 2, the standard normal CDF, for GELU. Note [GELU's normal CDF]: one formula
// over the whole range, through the tail Phi(-|x|) = erfc(a) / 2, a = |x| / sqrt 2:
//   erfc(a) = exp(-a^2) t Q(t),  t = 1 / (1 + 0.37 a),  Q of degree 8,
// our fit of erfc(a) exp(a^2) / t on Chebyshev nodes of t over a in [0, 9] (relative error 1.3e-8 in float64;
// the coefficients below are Q / 2, rounded to float32); Phi(x) = 1 - erfc/2 for x >= 0, erfc/2 below. exp's
// argument a^2 = x^2 / 2 is split exactly into u + ulo (by fma) and exp(-u - ulo) taken as exp(-u) (1 - ulo), so
// the far left tail keeps its digits (the rounding of a^2 alone cost 1.5e-5 relative by x = -12). Measured against
// float64 erfc over 400k points of [-12.5, 6]: GELU within 4.8e-7 relative (tests/test_numerics.py). Past |x| =
// 9 sqrt 2 (exp(-81) = 6.6e-36, still a normal float32) the tail is 0, as float32 erf's (gelu(-inf) is NaN, as
// torch's). Branch-free, so loops over it vectorise. Also gives exp(-x^2 / 2) (the normal density times
// sqrt(2 pi)) through *density, 0 past the same limit.
constexpr float kGeluTailLimit = 12.727922061357855f;  // 9 sqrt 2
DG_FAST_INLINE float fast_normal_cdff(float x, float* density = nullptr) {
  const float ax0 = x < 0 ? -x : x;
  const float ax = ax0 < kGeluTailLimit ? ax0 : kGeluTailLimit;
  const float hx = 0.5f * ax;
  const float u = hx * ax, ulo = std::fma(hx, ax, -u);  // x^2 / 2 = u + ulo exactly
  const float t = 1.0f / (ax * 2.6162952185e-01f + 1.0f);  // 0.37 / sqrt 2
  float q = 3.1307134777e-02f;
  q = q * t - 1.5332449973e-01f;
  q = q * t + 2.4693249166e-01f;
  q = q * t - 1.4671166241e-01f;
  q = q * t + 1.5823978186e-01f;
  q = q * t + 5.2029408514e-02f;
  q = q * t + 1.0344924033e-01f;
  q = q * t + 1.0366840661e-01f;
  q = q * t + 1.0440970212e-01f;
  float ex = fast_expf(-u);
  ex = ex - ex * ulo;
  ex = ax0 < kGeluTailLimit ? ex : 0.0f;
  if (density) *density = ex;
  const float h = ex * (t * q);  // Phi(-|x|)
  const float y = x < 0 ? h : 1.0f - h;
  return x != x ? x : y;
}

// GELU's derivative Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi): one exp for both terms
DG_FAST_INLINE float fast_gelu_gradf(float x) {
  float ex;
  const float cdf = fast_normal_cdff(x, &ex);
  return cdf + x * (ex * 0.39894228040143267794f);
}

// erf in float32 for the erf op, branch-free so that its loops vectorise (std::erf does not; GELU uses
// fast_normal_cdff above, which keeps the far left tail). The coefficients are our own least-squares fits on
// Chebyshev nodes, made in float64 and rounded to float32; measured error <= 3 ulp over [-5, 5] (tests/test_numerics.py checks 4).
//   |x| <= 1:     erf(x) = x P(x^2), P of degree 6 (relative fit error 1.2e-9)
//   1 < |x| < 4:  erf(x) = 1 - exp(-x^2) R(1/|x|), R of degree 8 fitting erfc(x) exp(x^2) (7.9e-8); x^2 is split
//                 exactly (x^2 = s + e, by fma) so that exp's argument carries no rounding: exp(-s) (1 - e)
//   |x| >= 4:     +-1 (erf(3.92) already rounds to 1 in float32)
DG_FAST_INLINE float fast_erff(float x) {
  float ax = std::fabs(x);
  float z = x * x;
  float p = 7.847259257687256e-05f;
  p = p * z - 0.0008008189033716917f;
  p = p * z + 0.005188099108636379f;
  p = p * z - 0.026853691786527634f;
  p = p * z + 0.1128358244895935f;
  p = p * z - 0.3761262595653534f;
  p = p * z + 1.1283791065216064f;
  float small = x * p;
  float u = 1.0f / (ax > 1.0f ? ax : 1.0f);
  float r = -0.010075770318508148f;
  r = r * u + 0.03165554255247116f;
  r = r * u + 0.01721281185746193f;
  r = r * u - 0.23427069187164307f;
  r = r * u + 0.491550475358963f;
  r = r * u - 0.4692513644695282f;
  r = r * u + 0.041355110704898834f;
  r = r * u + 0.5591439008712769f;
  r = r * u + 0.0002635270939208567f;
  float e = std::fma(ax, ax, -z);
  float big = 1.0f - fast_expf(-z) * (1.0f - e) * r;
  big = ax >= 4.0f ? 1.0f : big;
  big = x < 0 ? -big : big;
  float y = ax <= 1.0f ? small : big;
  return x != x ? x : y;
}

// sin and cos in float32 (Cephes sinf/cosf, branch-free so that loops vectorise; std::sin does not: 3.8 ns per
// element scalar, 0.47 vectorised, measured alone on this machine). |x| is reduced by multiples of pi/4 with pi/4
// split in three parts (Cody-Waite), then the sine or cosine polynomial (degree 7 and 8) on [-pi/4, pi/4].
// Measured against double: <= 1.5 ulp for |x| <= 4, <= 4.4 ulp for |x| <= 64; beyond, the reduction loses digits
// near the zeros (33 ulp by 256, 690 by 8192), so the caller recomputes |x| > kFastTrigLimit, inf and NaN with
// std::sin/std::cos (elementwise.cpp's sin_cos_loop).
constexpr float kFastTrigLimit = 64.0f;
// The octant q in {0, 2, 4, 6} of |x| and z = |x| - q pi/4 in [-pi/4, pi/4]; sin|x| is +-sin z (q = 0, 4) or
// +-cos z (q = 2, 6). Written with integer bit operations and no bools, which GCC would not vectorise.
struct TrigReduced {
  float z, zz;
  int32_t octant;
};
DG_FAST_INLINE TrigReduced fast_trig_reduce(float x) {
  const float ax = std::fabs(x);
  const float a = ax <= kFastTrigLimit ? ax : 0.0f;  // (NaN and the large ones: recomputed by the caller)
  int32_t j = (int32_t)(a * 1.27323954473516f);    // 4 / pi
  j += j & 1;                                        // to the even octant: z in [-pi/4, pi/4]
  const float y = (float)j;
  const float z = ((a - y * 0.78515625f) - y * 2.4187564849853515625e-4f) - y * 3.77489497744594108e-8f;
  return {z, z * z, j & 7};
}
DG_FAST_INLINE float fast_sin_poly(float z, float zz) {
  return ((-1.9515295891e-4f * zz + 8.3321608736e-3f) * zz - 1.6666654611e-1f) * zz * z + z;
}
DG_FAST_INLINE float fast_cos_poly(float zz) {
  return ((2.443315711809948e-5f * zz - 1.388731625493765e-3f) * zz + 4.166664568298827e-2f) * zz * zz -
         0.5f * zz + 1.0f;
}
// r with its sign bit flipped where `flip` has bit 31 set
DG_FAST_INLINE float flip_sign(float r, uint32_t flip) {
  uint32_t b;
  std::memcpy(&b, &r, 4);
  b ^= flip;
  std::memcpy(&r, &b, 4);
  return r;
}
DG_FAST_INLINE float fast_sinf(float x) {
  const TrigReduced t = fast_trig_reduce(x);
  const float s = fast_sin_poly(t.z, t.zz), c = fast_cos_poly(t.zz);
  const float r = (t.octant & 2) ? c : s;
  uint32_t xb;
  std::memcpy(&xb, &x, 4);
  // sin(z + pi) = -sin z, and sin is odd (sin(-0.0) = -0.0)
  return flip_sign(r, ((uint32_t)(t.octant & 4) << 29) ^ (xb & 0x80000000u));
}
DG_FAST_INLINE float fast_cosf(float x) {
  const TrigReduced t = fast_trig_reduce(x);
  const float s = fast_sin_poly(t.z, t.zz), c = fast_cos_poly(t.zz);
  const float r = (t.octant & 2) ? s : c;
  // cos(z + pi/2) = -sin z, cos(z + pi) = -cos z, cos(z + 3pi/2) = sin z: negative for octants 2 and 4
  return flip_sign(r, (uint32_t)((t.octant + 2) & 4) << 29);
}

// ---- logarithms, expm1, sinh, the inverse trigonometric functions and tan in float32 (Cephes logf, log2f,
// log10f, atanf, asinf, acosf and tanf, written branch-free: each select is a ternary GCC turns into a blend) ----
// Note [Vectorised float32 libm]: the std functions are scalar calls that do not vectorise; these do. Measured
// against the float64 std functions over every 61st float32 bit pattern of their range (bench/fast_math_ulp.cpp),
// the largest errors in float32 ulps of the exact value:
//   log2 1.37, log10 1.73, log1p 2.37, expm1 1.42 (to 88.3), sinh 1.58,
//   atan 2.74, asin 2.35, acos 1.23, tan 2.54 for |x| <= 64 (beyond, as sin and cos, std::tan recomputes:
//   elementwise.cpp's sin_cos_loop), atan2 2.67 on a 601 x 601 grid of signs and magnitudes.
// tests/test_numerics.py holds them to 4 ulp against numpy's float64. Edges follow C: log(0) = -inf, log(x < 0)
// = NaN, log1p(-1) = -inf, expm1(-inf) = -1, asin(|x| > 1) = NaN, atan2's signed zeros and infinities; NaN stays.

// x = m 2^e with m in [sqrt(1/2), sqrt(2)), f = m - 1: log m = f + y, y = f^3 P(f) - f^2 / 2 (P of degree 8).
// For x positive and finite (subnormals are scaled first); the callers select zero, negatives, inf and NaN.
struct LogReduced {
  float e, f, y;
};
DG_FAST_INLINE LogReduced fast_log_reduce(float x) {
  const float tiny = x < 1.17549435e-38f ? 1.0f : 0.0f;  // subnormal: times 2^23
  x = tiny != 0.0f ? x * 8388608.0f : x;
  uint32_t b;
  std::memcpy(&b, &x, 4);
  int32_t e = (int32_t)(b >> 23) - 126;
  const uint32_t mb = (b & 0x007fffffu) | 0x3f000000u;  // m in [0.5, 1)
  float m;
  std::memcpy(&m, &mb, 4);
  const int32_t low = m < 0.707106781186547524f ? 1 : 0;
  e -= low;
  const float f = low ? (m + m) - 1.0f : m - 1.0f;
  const float z = f * f;
  float p = 7.0376836292E-2f;
  p = p * f - 1.1514610310E-1f;
  p = p * f + 1.1676998740E-1f;
  p = p * f - 1.2420140846E-1f;
  p = p * f + 1.4249322787E-1f;
  p = p * f - 1.6668057665E-1f;
  p = p * f + 2.0000714765E-1f;
  p = p * f - 2.4999993993E-1f;
  p = p * f + 3.3333331174E-1f;
  return {(float)e - 23.0f * tiny, f, p * f * z - 0.5f * z};
}
// the value C's log gives where x is 0, negative, inf or NaN, else `y`
DG_FAST_INLINE float log_edges(float x, float y) {
  y = x == 0.0f ? -INFINITY : y;
  y = x < 0.0f ? NAN : y;
  y = x == INFINITY ? INFINITY : y;
  return x != x ? x : y;
}
DG_FAST_INLINE float fast_logf(float x) {
  const LogReduced r = fast_log_reduce(x);
  return log_edges(x, ((r.y - 2.12194440e-4f * r.e) + r.f) + 0.693359375f * r.e);
}
DG_FAST_INLINE float fast_log2f(float x) {
  const LogReduced r = fast_log_reduce(x);
  const float log2e_minus_1 = 0.44269504088896340736f;
  return log_edges(x, (((r.y * log2e_minus_1 + r.f * log2e_minus_1) + r.y) + r.f) + r.e);
}
DG_FAST_INLINE float fast_log10f(float x) {
  const LogReduced r = fast_log_reduce(x);
  // log10(e) and log10(2), each as a short head (exact products) and a tail
  const float l10e_a = 4.3359375E-1f, l10e_b = 7.00731903251828E-4f;
  const float l102_a = 3.0078125E-1f, l102_b = 2.48745663981195213739E-4f;
  const float v = ((((r.y * l10e_b + r.f * l10e_b) + r.e * l102_b) + r.y * l10e_a) + r.f * l10e_a) + r.e * l102_a;
  return log_edges(x, v);
}
// log(1 + x) = log(u) x / (u - 1) with u = 1 + x rounded (Goldberg): the rounding of u cancels in the ratio
DG_FAST_INLINE float fast_log1pf(float x) {
  const float u = 1.0f + x, d = u - 1.0f;
  const float l = fast_logf(u);
  float y = d == 0.0f ? x : l * (x / d);
  y = x == INFINITY ? INFINITY : y;
  return x != x ? x : y;
}
// exp's reduction shared by expm1 and sinh: x = n ln 2 + r with n = round(x / ln 2) and |r| <= ln(2)/2 (ln 2 in
// two parts, Cody-Waite: n ln2_hi is exact for |n| < 2^15), and expm1(r) = r + r^2 P(r), P of degree 5 (our
// least-squares fit on Chebyshev nodes, weighted to expm1's relative error: 0.005 ulp in float64, 0.74 ulp in
// float32 arithmetic). For |x| <= 104 (the callers clamp).
struct ExpReduced {
  float n, em;  // exp(x) = 2^n (1 + em)
};
DG_FAST_INLINE ExpReduced fast_exp_reduce(float x) {
  const float n = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;  // round to nearest
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.98516107047908e-4f;
  p = p * r + 1.3941084034740925e-3f;
  p = p * r + 8.333378471434116e-3f;
  p = p * r + 4.166635498404503e-2f;
  p = p * r + 1.666666567325592e-1f;
  p = p * r + 0.5f;
  return {n, r * r * p + r};
}
// 2^k for integral k in [-126, 127], from the exponent bits (unsigned: outside, garbage the callers select away)
DG_FAST_INLINE float pow2_int(float k) {
  const uint32_t bits = (uint32_t)((int32_t)k + 127) << 23;
  float y;
  std::memcpy(&y, &bits, 4);
  return y;
}
// expm1(x) = 2^n (1 + em) - 1 = 2 (2^(n-1) em + (2^(n-1) - 1/2)): both scalings by powers of 2 are exact, 2^(n-1) -
// 1/2 is exact for n <= 25, so the result is rounded once from em's error (a few tenths of an ulp for n = 0, where
// expm1 = em, and at most about 2 ulp where 2^n em and 2^n - 1 nearly cancel, n = 1 and n = -1); 2^(n-1) keeps
// n = 128 (x up to 88.72, where expm1 overflows) in range. Below -18, expm1 rounds to -1 in float32.
DG_FAST_INLINE float fast_expm1f(float x) {
  const float xc = x > 88.8f ? 88.8f : (x < -18.0f ? -18.0f : x);  // e^88.8 overflows, as expm1(inf) = inf
  const ExpReduced e = fast_exp_reduce(xc);
  const float s = pow2_int(e.n - 1.0f);
  const float y = 2.0f * (s * e.em + (s - 0.5f));
  return x == 0.0f || x != x ? x : y;  // -0 stays -0; NaN stays
}
// sinh: an odd polynomial below |x| = 1 (Cephes sinhf); above, from one reduction of |x|: exp|x| / 2 = 2^(n-1) (1 +
// em), and exp(-|x|) / 2 = 2^(-n-1) / (1 + em), which is below 2^-26 of the first beyond |x| = 9 and dropped there
// (n held at 13 for it, so that 2^(-n-1) stays a normal float). 2^(n-1) is applied as 2^(n-2) * 2, so that n = 129
// (|x| to 89.4, where sinh overflows) stays in range.
DG_FAST_INLINE float fast_sinhf(float x) {
  const float ax = std::fabs(x), z = x * x;
  const float small = ((2.03721912945E-4f * z + 8.33028376239E-3f) * z + 1.66667160211E-1f) * z * x + x;
  const float axc = ax < 90.0f ? ax : 90.0f;
  const ExpReduced e = fast_exp_reduce(axc);
  const float m = 1.0f + e.em;
  const float half = (pow2_int(e.n - 2.0f) * m) * 2.0f;
  const float nn = e.n < 13.0f ? e.n : 13.0f;
  const float inv = pow2_int(-nn - 1.0f) / m;
  float big = ax <= 9.0f ? half - inv : half;
  big = x < 0.0f ? -big : big;
  const float y = ax < 1.0f ? small : big;
  return x != x ? x : y;
}
// atan of t >= 0 (NaN stays): reduced to [-tan(pi/8), tan(pi/8)] by atan t = pi/2 + atan(-1/t) above tan(3pi/8) and
// pi/4 + atan((t-1)/(t+1)) above tan(pi/8), then an odd polynomial of degree 9
DG_FAST_INLINE float fast_atan_positive(float t) {
  const bool above = t > 2.414213562373095f, middle = t > 0.4142135623730950f;
  const float base = above ? 1.5707963267948966f : (middle ? 0.7853981633974483f : 0.0f);
  const float r = above ? -1.0f / t : (middle ? (t - 1.0f) / (t + 1.0f) : t);
  const float z = r * r;
  return base + ((((8.05374449538e-2f * z - 1.38776856032E-1f) * z + 1.99777106478E-1f) * z - 3.33329491539E-1f) *
                 z * r + r);
}
DG_FAST_INLINE float fast_atanf(float x) {
  const float y = fast_atan_positive(std::fabs(x));
  return std::copysign(y, x);
}
// atan2 from the atan of min(|a|, |b|) / max(|a|, |b|) in [0, 1], moved to the octant: C's signed zeros and
// infinities (atan2(+-0, -0) = +-pi, atan2(inf, inf) = pi/4)
DG_FAST_INLINE float fast_atan2f(float a, float b) {
  const float aa = std::fabs(a), ab = std::fabs(b);
  const float big = aa > ab ? aa : ab, small = aa > ab ? ab : aa;
  float t = small / big;
  t = big == 0.0f ? 0.0f : t;
  t = (aa == INFINITY && ab == INFINITY) ? 1.0f : t;
  float r = fast_atan_positive(t);
  r = aa > ab ? 1.5707963267948966f - r : r;
  r = std::signbit(b) ? 3.14159265358979323846f - r : r;
  r = std::copysign(r, a);
  return (a != a || b != b) ? a + b : r;
}
// asin of |x| <= 0.5 by an odd polynomial; above, asin t = pi/2 - 2 asin(sqrt((1 - t) / 2)) (Cephes asinf)
DG_FAST_INLINE float fast_asin_poly(float t, float z) {
  return ((((4.2163199048E-2f * z + 2.4181311049E-2f) * z + 4.5470025998E-2f) * z + 7.4953002686E-2f) * z +
          1.6666752422E-1f) * z * t + t;
}
DG_FAST_INLINE float fast_asinf(float x) {
  const float ax = std::fabs(x);
  const bool high = ax > 0.5f;
  const float z = high ? 0.5f * (1.0f - ax) : ax * ax;
  const float t = high ? std::sqrt(z) : ax;
  const float p = fast_asin_poly(t, z);
  float y = high ? 1.5707963267948966f - (p + p) : p;
  y = ax > 1.0f ? NAN : y;
  y = std::copysign(y, x);
  return x != x ? x : y;
}
// acos x = pi/2 - asin x for |x| <= 0.5, 2 asin(sqrt((1 - x) / 2)) above, pi - 2 asin(sqrt((1 + x) / 2)) below
DG_FAST_INLINE float fast_acosf(float x) {
  const float ax = std::fabs(x);
  const bool high = ax > 0.5f;
  const float z = high ? 0.5f * (1.0f - ax) : x * x;
  const float t = high ? std::sqrt(z) : x;
  const float p = fast_asin_poly(t, z);
  float y = high ? (x < 0.0f ? 3.14159265358979323846f - (p + p) : p + p) : 1.5707963267948966f - p;
  y = ax > 1.0f ? NAN : y;
  return x != x ? x : y;
}
// tan on the sine's reduction (fast_trig_reduce): tan z = z + z^3 P(z^2) on [-pi/4, pi/4], -1/tan z in the odd
// quadrants; |x| > kFastTrigLimit, inf and NaN are recomputed by the caller
DG_FAST_INLINE float fast_tanf(float x) {
  const TrigReduced t = fast_trig_reduce(x);
  const float zz = t.zz;
  float y = (((((9.38540185543E-3f * zz + 3.11992232697E-3f) * zz + 2.44301354525E-2f) * zz + 5.34112807005E-2f) *
                  zz + 1.33387994085E-1f) * zz + 3.33331568548E-1f) * zz * t.z + t.z;
  y = (t.octant & 2) ? -1.0f / y : y;
  uint32_t xb;
  std::memcpy(&xb, &x, 4);
  return flip_sign(y, xb & 0x80000000u);
}

// ---- float64 exp and log that vectorise, for the float32 scans accumulated in float64 (scan.cpp's logcumsumexp,
// whose result is rounded to float32: errors of a few float64 ulps vanish in that rounding) ----
// exp(x) for x <= 0: x = n ln 2 + r (fdlibm's ln 2 in two parts, n ln2_hi exact), exp(r) by its Taylor series to
// r^13 (|r| <= ln(2)/2: truncation 4e-18), 2^n from the exponent bits; below -708, 0 (no subnormals).
DG_FAST_INLINE double fast_exp_nonpositive(double x) {
  const double xc = x < -708.0 ? -708.0 : x;
  const double n = (xc * 1.4426950408889634074 + 6755399441055744.0) - 6755399441055744.0;
  const double r = (xc - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r * r + r + 1.0;
  const uint64_t bits = (uint64_t)((int64_t)n + 1023) << 52;
  double scale;
  std::memcpy(&scale, &bits, 8);
  const double y = p * scale;
  return x < -708.0 ? 0.0 : y;
}
// log(x) for x >= 1, finite: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m - 1) / (m + 1),
// |s| <= 0.1716, by the odd series to s^23 (truncation 6e-19).
DG_FAST_INLINE double fast_log_from_one(double x) {
  uint64_t b;
  std::memcpy(&b, &x, 8);
  int64_t e = (int64_t)(b >> 52) - 1023;
  const uint64_t mb = (b & 0x000fffffffffffffull) | 0x3ff0000000000000ull;  // m in [1, 2)
  double m;
  std::memcpy(&m, &mb, 8);
  const bool high = m > 1.4142135623730950488;
  m = high ? 0.5 * m : m;
  e += high ? 1 : 0;
  const double s = (m - 1.0) / (m + 1.0), z = s * s;
  double p = 1.0 / 23.0;
  p = p * z + 1.0 / 21.0;
  p = p * z + 1.0 / 19.0;
  p = p * z + 1.0 / 17.0;
  p = p * z + 1.0 / 15.0;
  p = p * z + 1.0 / 13.0;
  p = p * z + 1.0 / 11.0;
  p = p * z + 1.0 / 9.0;
  p = p * z + 1.0 / 7.0;
  p = p * z + 1.0 / 5.0;
  p = p * z + 1.0 / 3.0;
  const double ed = (double)e;
  return ed * 6.93147180369123816490e-01 + ((2.0 * s) * z * p + 2.0 * s + ed * 1.90821492927058770002e-10);
}

// ---- float64 tanh and sigmoid that vectorise (Note [float64 tanh and sigmoid]) ----
// Note [float64 tanh and sigmoid]: glibc's tanh (through expm1) and exp are scalar calls, and in float64 recurrent
// work they were the largest cost after the products: a float64 LSTMCell(51) step of 97 rows took ~300 us, most
// of it in 5 libm calls per element (PyTorch's time_sequence_prediction example; perf, Intel Xeon family 6 model
// 167, KVM, 2026-12-03). These are branch-free, so the loops over them vectorise:
//   exp: x = n ln2 + r, |r| <= ln2 / 2 (ln2 in two parts, the reduction by fma), exp(r) by its Taylor series to r^13
//        (truncation < 1e-17 relative), times 2^n as 2^(n/2) 2^(n - n/2) so that subnormal results round once;
//   tanh: |x| < 0.35: x + x^3 P(x^2), its Taylor series to x^25 (truncation < 1e-17); else 1 - 2 / (exp(2|x|) + 1)
//         with x's sign (the subtraction costs at most a couple of ulps just above 0.35);
//   sigmoid: 1 / (1 + exp(-x)).
// Measured against mpmath-exact values (tests/test_numerics.py): within 4 ulp. The exp op itself keeps std::exp.
// That LSTMCell step (no grad, 1 thread, same machine, load 6): 312 -> 167 us; rnn_layer's fused cell over the same
// shapes (nn.LSTM in float64) 289 -> 106 us.
DG_FAST_INLINE double fast_exp_for_tanh(double x) {
  const double hi = 709.782712893384, lo = -745.1332191019412;  // exp overflows above hi, rounds to 0 below lo
  const double xc = x > hi ? hi : (x < lo ? lo : x);
  const double shifter = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const double n = (xc * 1.4426950408889634 + shifter) - shifter;
  double r = std::fma(n, -0.6931471805599453, xc);  // ln2 rounded to double ...
  r = std::fma(n, -2.3190468138462996e-17, r);      // ... and the rest of it
  double p = 1.6059043836821613e-10;                // 1/13!
  p = std::fma(p, r, 2.08767569878681e-09);
  p = std::fma(p, r, 2.505210838544172e-08);
  p = std::fma(p, r, 2.755731922398589e-07);
  p = std::fma(p, r, 2.7557319223985893e-06);
  p = std::fma(p, r, 2.48015873015873e-05);
  p = std::fma(p, r, 0.0001984126984126984);
  p = std::fma(p, r, 0.001388888888888889);
  p = std::fma(p, r, 0.008333333333333333);
  p = std::fma(p, r, 0.041666666666666664);
  p = std::fma(p, r, 0.16666666666666666);
  p = std::fma(p, r, 0.5);
  p = std::fma(p, r, 1.0);
  p = std::fma(p, r, 1.0);
  const int64_t ni = (int64_t)n, n1 = ni >> 1, n2 = ni - n1;  // each of 2^n1, 2^n2 a normal double
  const int64_t b1 = (n1 + 1023) << 52, b2 = (n2 + 1023) << 52;
  double s1, s2;
  std::memcpy(&s1, &b1, 8);
  std::memcpy(&s2, &b2, 8);
  double y = (p * s1) * s2;
  y = x > hi ? INFINITY : y;
  y = x < lo ? 0.0 : y;
  return x != x ? x : y;
}

DG_FAST_INLINE double fast_tanh(double x) {
  const double ax = std::fabs(x);
  const double z = x * x;
  double p = 1.5918905069328964e-05;  // the coefficient of x^25
  p = std::fma(p, z, -3.927832388331683e-05);
  p = std::fma(p, z, 9.691537956929451e-05);
  p = std::fma(p, z, -0.00023912911424355248);
  p = std::fma(p, z, 0.000590027440945586);
  p = std::fma(p, z, -0.0014558343870513183);
  p = std::fma(p, z, 0.003592128036572481);
  p = std::fma(p, z, -0.008863235529902197);
  p = std::fma(p, z, 0.021869488536155203);
  p = std::fma(p, z, -0.05396825396825397);
  p = std::fma(p, z, 0.13333333333333333);
  p = std::fma(p, z, -0.3333333333333333);  // x^3's
  const double small = std::fma(x * z, p, x);
  const double e = fast_exp_for_tanh(2.0 * ax);
  double big = 1.0 - 2.0 / (e + 1.0);
  big = x < 0 ? -big : big;
  double y = ax < 0.35 ? small : big;
  y = x == 0 ? x : y;  // tanh(-0) = -0 (small's fma gives +0)
  return x != x ? x : y;
}

DG_FAST_INLINE double fast_sigmoid(double x) { return 1.0 / (1.0 + fast_exp_for_tanh(-x)); }

template <typename T> DG_FAST_INLINE T k_log1p(T x) { return std::log1p(x); }
template <> DG_FAST_INLINE float k_log1p<float>(float x) { return fast_log1pf(x); }
template <typename T> DG_FAST_INLINE T k_expm1(T x) { return std::expm1(x); }
template <> DG_FAST_INLINE float k_expm1<float>(float x) { return fast_expm1f(x); }
template <typename T> DG_FAST_INLINE T k_log2(T x) { return std::log2(x); }
template <> DG_FAST_INLINE float k_log2<float>(float x) { return fast_log2f(x); }
template <typename T> DG_FAST_INLINE T k_log10(T x) { return std::log10(x); }
template <> DG_FAST_INLINE float k_log10<float>(float x) { return fast_log10f(x); }
template <typename T> DG_FAST_INLINE T k_asin(T x) { return std::asin(x); }
template <> DG_FAST_INLINE float k_asin<float>(float x) { return fast_asinf(x); }
template <typename T> DG_FAST_INLINE T k_acos(T x) { return std::acos(x); }
template <> DG_FAST_INLINE float k_acos<float>(float x) { return fast_acosf(x); }
template <typename T> DG_FAST_INLINE T k_atan(T x) { return std::atan(x); }
template <> DG_FAST_INLINE float k_atan<float>(float x) { return fast_atanf(x); }
template <typename T> DG_FAST_INLINE T k_sinh(T x) { return std::sinh(x); }
template <> DG_FAST_INLINE float k_sinh<float>(float x) { return fast_sinhf(x); }
template <typename T> DG_FAST_INLINE T k_atan2(T a, T b) { return std::atan2(a, b); }
template <> DG_FAST_INLINE float k_atan2<float>(float a, float b) { return fast_atan2f(a, b); }

template <typename T> DG_FAST_INLINE T k_exp(T x) { return std::exp(x); }
template <> DG_FAST_INLINE float k_exp<float>(float x) { return fast_expf(x); }
template <typename T> DG_FAST_INLINE T k_tanh(T x) { return std::tanh(x); }
template <> DG_FAST_INLINE float k_tanh<float>(float x) { return fast_tanhf(x); }
template <> DG_FAST_INLINE double k_tanh<double>(double x) { return fast_tanh(x); }
template <typename T> DG_FAST_INLINE T k_sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }
template <> DG_FAST_INLINE float k_sigmoid<float>(float x) { return fast_sigmoidf(x); }
template <> DG_FAST_INLINE double k_sigmoid<double>(double x) { return fast_sigmoid(x); }
#if defined(__AVX512F__)
// ---- GELU in float32, 16 lanes at a time where the build targets AVX-512F ----
// Note [GELU in 16 lanes]: fast_normal_cdff's loops were vectorised by GCC at 256 bits (-march=native on this
// Xeon prefers 256-bit vectors) and with a division per vector (1 / a, no reciprocal without -ffast-math):
// GELU's forward ran at 2.6x torch's time per element. The same polynomials written with AVX-512 intrinsics, the
// reciprocal as rcp14 and one Newton step (relative error 2^-28, below float32's rounding), exp's power of two by
// scalef: 393k elements (the GPT's 768 x 512 activations) 500 -> 273 us forward, 521 -> 285 us for the derivative,
// standalone loop, one thread, Xeon family 6 model 167, KVM, load 8. Then one formula for the whole range (Note
// [GELU's normal CDF]) in place of an erf polynomial and an erfc one both computed and blended: 58 -> 42
// instructions per 16 lanes, 281 -> 205 us forward and 298 -> 220 us for the derivative (same loop and machine,
// load 5; a copy of the same bytes takes 84 us). The same NaN, inf and -0.0 as the scalar loops, which run where the
// build does not target AVX-512F.
#define DG_HAVE_GELU16 1
// 2^n e^r for |r| <= ln 2 / 2 in 16 lanes: fast_expf's polynomial, the power of two by scalef. The last step of
// exp16 and of the normal CDF's exp(-u) below (the same operations, so the same bits as when each had its copy).
DG_FAST_INLINE __m512 exp_reduced16(__m512 r, __m512 n) {
  __m512 p = _mm512_set1_ps(1.9875691500E-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// Phi(x) as fast_normal_cdff (the same formula), and exp(-x^2 / 2) in *density
DG_FAST_INLINE __m512 normal_cdf16(__m512 x, __m512* density) {
  const __m512 one = _mm512_set1_ps(1.0f), lim = _mm512_set1_ps(kGeluTailLimit);
  const __m512 ax = _mm512_min_ps(_mm512_abs_ps(x), lim);  // NaN -> lim (the caller's product with x keeps NaN)
  const __m512 hx = _mm512_mul_ps(ax, _mm512_set1_ps(0.5f));
  const __m512 u = _mm512_mul_ps(hx, ax);
  const __m512 ulo = _mm512_fmsub_ps(hx, ax, u);  // x^2 / 2 = u + ulo exactly
  // t = 1 / (1 + 0.37 a): the reciprocal estimate (relative error 2^-14) and one Newton step (2^-28)
  const __m512 d = _mm512_fmadd_ps(ax, _mm512_set1_ps(2.6162952185e-01f), one);
  __m512 t = _mm512_rcp14_ps(d);
  t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.0f)));
  __m512 q = _mm512_set1_ps(3.1307134777e-02f);
  q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(-1.5332449973e-01f));
  q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(2.4693249166e-01f));
  q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(-1.4671166241e-01f));
  q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(1.5823978186e-01f));
  q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(5.2029408514e-02f));
  q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(1.0344924033e-01f));
  q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(1.0366840661e-01f));
  q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(1.0440970212e-01f));
  // exp(-u), u in [0, 81] (no clamps needed): -u = n ln 2 + r, ln 2 in two parts as fast_expf
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(u, _mm512_set1_ps(-1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmsub_ps(n, _mm512_set1_ps(-2.12194440e-4f),
                                    _mm512_fmadd_ps(n, _mm512_set1_ps(0.693359375f), u));
  __m512 ex = exp_reduced16(r, n);
  ex = _mm512_fnmadd_ps(ex, ulo, ex);  // exp(-u - ulo) = exp(-u) (1 - ulo)
  ex = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(ax, lim, _CMP_LT_OQ), ex);
  if (density) *density = ex;
  const __m512 h = _mm512_mul_ps(ex, _mm512_mul_ps(t, q));  // Phi(-|x|) = erfc(a) / 2
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_blend_ps(neg, _mm512_sub_ps(one, h), h);
}
// exp(x) in 16 lanes, fast_expf's polynomial and clamps (x > 88.38 -> inf, x < -87.34 -> 0, NaN -> NaN), the
// power of two by scalef; for softmax and cross_entropy (reduce.cpp), whose arguments x - max are <= 0.
DG_FAST_INLINE __m512 exp16(__m512 x) {
  const __m512 hi = _mm512_set1_ps(88.3762626647949f), lo = _mm512_set1_ps(-87.3365447504019f);
  const __m512 xc = _mm512_max_ps(_mm512_min_ps(x, hi), lo);  // NaN -> hi, fixed below
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f),
                                    _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc));
  __m512 y = exp_reduced16(r, n);
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), y, _mm512_set1_ps(INFINITY));
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), y, _mm512_setzero_ps());
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}
// y[i] = gelu(x[i]), i < n
inline void gelu16(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    _mm512_storeu_ps(y + i, _mm512_mul_ps(v, normal_cdf16(v, nullptr)));
  }
  if (i < n) {
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, normal_cdf16(v, nullptr)));
  }
}
// y[i] = g[i] gelu'(x[i]) = g (Phi(x) + x exp(-x^2 / 2) / sqrt(2 pi)), i < n
inline void gelu_grad16(const float* g, const float* x, float* y, int64_t n) {
  const __m512 c = _mm512_set1_ps(0.39894228040143267794f);
  auto one = [&](__m512 v, __m512 gv) {
    __m512 ex;
    const __m512 cdf = normal_cdf16(v, &ex);
    return _mm512_mul_ps(gv, _mm512_fmadd_ps(v, _mm512_mul_ps(ex, c), cdf));
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, one(_mm512_loadu_ps(x + i), _mm512_loadu_ps(g + i)));
  if (i < n) {
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, one(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, g + i)));
  }
}
#endif  // __AVX512F__

template <typename T> DG_FAST_INLINE T k_erf(T x) { return std::erf(x); }
template <> DG_FAST_INLINE float k_erf<float>(float x) { return fast_erff(x); }

}  // namespace dyngrad
