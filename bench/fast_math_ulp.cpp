// fast_math_ulp.cpp: the largest error, in float32 ulps of the float64 std function's value, of the vectorised
// float32 functions of csrc/dyngrad/kernels/fast_math.h (Note [Vectorised float32 libm] quotes its output),
// over every 61st float32 bit pattern of each function's range and, for atan2, a grid of 601 x 601 pairs.
//
//   g++ -O2 -std=c++17 -Icsrc -o /tmp/fast_math_ulp bench/fast_math_ulp.cpp && /tmp/fast_math_ulp
//   (add -march=native for the FMA contractions the build makes: a few tenths of an ulp either way)
#include <cmath>
#include <cstdio>
#include <cstring>

#include "dyngrad/kernels/fast_math.h"

using namespace dyngrad;

// |got - want| in ulps of want rounded to float32; NaN and the infinities must be met exactly (1e9 otherwise)
static double ulp_error(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e9;
  const float wf = (float)want;
  if (std::isinf(wf)) return got == wf ? 0 : 1e9;
  const double ulp = wf == 0 ? (double)std::nextafter(0.0f, 1.0f)
                             : (double)std::nextafter(std::fabs(wf), INFINITY) - std::fabs(wf);
  return std::fabs((double)got - want) / ulp;
}

template <class Fast, class Exact>
static void sweep(const char* name, Fast fast, Exact exact, float lo, float hi) {
  double worst = 0;
  float at = 0;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 61) {
    const uint32_t bits = (uint32_t)b;
    float x;
    std::memcpy(&x, &bits, 4);
    if (!(x >= lo && x <= hi)) continue;
    const double e = ulp_error(fast(x), exact((double)x));
    if (e > worst) {
      worst = e;
      at = x;
    }
  }
  std::printf("%-6s [%g, %g]: %.2f ulp at %.9g\n", name, lo, hi, worst, at);
}

int main() {
  sweep("log2", [](float x) { return fast_log2f(x); }, [](double x) { return std::log2(x); }, -1, 3.4e38f);
  sweep("log10", [](float x) { return fast_log10f(x); }, [](double x) { return std::log10(x); }, -1, 3.4e38f);
  sweep("log1p", [](float x) { return fast_log1pf(x); }, [](double x) { return std::log1p(x); }, -1, 3.4e38f);
  sweep("expm1", [](float x) { return fast_expm1f(x); }, [](double x) { return std::expm1(x); }, -104, 88.72f);
  sweep("sinh", [](float x) { return fast_sinhf(x); }, [](double x) { return std::sinh(x); }, -89.41f, 89.41f);
  sweep("atan", [](float x) { return fast_atanf(x); }, [](double x) { return std::atan(x); }, -3.4e38f, 3.4e38f);
  sweep("asin", [](float x) { return fast_asinf(x); }, [](double x) { return std::asin(x); }, -1, 1);
  sweep("acos", [](float x) { return fast_acosf(x); }, [](double x) { return std::acos(x); }, -1, 1);
  sweep("tan", [](float x) { return fast_tanf(x); }, [](double x) { return std::tan(x); }, -64, 64);
  double worst = 0;
  float wa = 0, wb = 0;
  for (int i = -300; i <= 300; ++i)
    for (int j = -300; j <= 300; ++j) {
      const float a = std::sinh(i * 0.05f), b = std::sinh(j * 0.05f);
      const double e = ulp_error(fast_atan2f(a, b), std::atan2((double)a, (double)b));
      if (e > worst) {
        worst = e;
        wa = a;
        wb = b;
      }
    }
  std::printf("atan2  grid: %.2f ulp at (%.9g, %.9g)\n", worst, wa, wb);
  return 0;
}
