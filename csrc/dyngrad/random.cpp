// random.cpp: xoshiro256** seeded by splitmix64; doubles from the top 53 bits; normals by Box-Muller. The reference
// engine runs the same generator and transforms, so both draw the same numbers (Note [One random stream for both
// engines] in python/dyngrad/reference/rng.py): keep the two in step.
#include "random.h"

#include <cmath>

namespace dyngrad {

namespace {
struct Xoshiro {
  uint64_t s[4];
  uint64_t seed = 0;
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  void reseed(uint64_t value) {
    seed = value;
    uint64_t z = value;
    for (auto& word : s) {  // splitmix64
      z += 0x9e3779b97f4a7c15ULL;
      uint64_t x = z;
      x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
      x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
      word = x ^ (x >> 31);
    }
  }
  uint64_t next() {
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
};
Xoshiro& gen() {
  static Xoshiro g = [] {
    Xoshiro x;
    x.reseed(67280421310721ULL);  // torch's default seed; the reference engine's too (reference/rng.py)
    return x;
  }();
  return g;
}

template <typename F>
void fill_with(const Tensor& t, F&& f) {
  Tensor c = t->is_contiguous() ? t : nullptr;
  DG_CHECK(c, RuntimeError, "random fill: expected a contiguous tensor.");
  DG_DISPATCH_ALL(t->dtype, T, {
    T* p = t->data<T>();
    for (int64_t i = 0; i < t->numel; ++i) p[i] = static_cast<T>(f());
  });
}
}  // namespace

void manual_seed(uint64_t seed) { gen().reseed(seed); }
uint64_t initial_seed() { return gen().seed; }
std::array<uint64_t, 5> rng_state() {
  const Xoshiro& g = gen();
  return {g.s[0], g.s[1], g.s[2], g.s[3], g.seed};
}
void set_rng_state(const std::array<uint64_t, 5>& state) {
  Xoshiro& g = gen();
  for (int i = 0; i < 4; ++i) g.s[i] = state[i];
  g.seed = state[4];
}

void uniform_(const Tensor& t, double lo, double hi) {
  check_writable(t, "uniform_");
  Xoshiro& g = gen();
  fill_with(t, [&] { return lo + (hi - lo) * g.uniform(); });
  t->bump_version();
}

void normal_(const Tensor& t, double mean, double std) {
  check_writable(t, "normal_");
  Xoshiro& g = gen();
  bool have = false;
  double spare = 0;
  fill_with(t, [&] {
    if (have) {
      have = false;
      return mean + std * spare;
    }
    double u1 = g.uniform(), u2 = g.uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    double r = std::sqrt(-2.0 * std::log(u1)), th = 6.283185307179586 * u2;
    spare = r * std::sin(th);
    have = true;
    return mean + std * r * std::cos(th);
  });
  t->bump_version();
}

Tensor rand(const Shape& shape, DType dtype) {
  if (is_half(dtype)) {
    // Note [Half types]: drawn in float32 and cut down to the dtype's grid k / 2**digits (11 for float16, 8 for
    // bfloat16, as torch draws), which the conversion keeps exactly: rounding could give 1.0, outside U[0, 1)
    Tensor t = rand(shape, DType::Float32);
    const float scale = dtype == DType::Float16 ? 2048.0f : 256.0f;
    float* p = t->data<float>();
    for (int64_t i = 0; i < t->numel; ++i) p[i] = std::floor(p[i] * scale) / scale;
    return contiguous_copy(t, dtype);
  }
  Tensor t = empty(shape, dtype);
  uniform_(t, 0, 1);
  if (dtype == DType::Float32) {  // rounding up to 1.0f must not happen: U[0, 1)
    float* p = t->data<float>();
    for (int64_t i = 0; i < t->numel; ++i)
      if (p[i] >= 1.0f) p[i] = 0.99999994f;
  }
  return t;
}

Tensor randn(const Shape& shape, DType dtype) {
  if (is_half(dtype)) return contiguous_copy(randn(shape, DType::Float32), dtype);  // Note [Half types]
  Tensor t = empty(shape, dtype);
  normal_(t, 0, 1);
  return t;
}

// Exact in int64: the range and the offset in unsigned arithmetic (high - low overflows int64 for a range wider than
// 2**63), no trip through a double (which rounded 2**62 - 1 up to `high`), and no modulo bias (rejection sampling).
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype) {
  DG_CHECK(high > low, RuntimeError, "randint: expected low < high, got low=", low, " and high=", high, ".");
  Tensor t = empty(shape, dtype);
  Xoshiro& g = gen();
  const uint64_t range = (uint64_t)high - (uint64_t)low;
  const uint64_t limit = UINT64_MAX - UINT64_MAX % range;  // draws at or above it would favour small offsets
  auto draw = [&] {
    uint64_t r;
    do r = g.next();
    while (r >= limit);
    return (int64_t)((uint64_t)low + r % range);
  };
  DG_CHECK(t->is_contiguous(), RuntimeError, "random fill: expected a contiguous tensor.");
  DG_DISPATCH_STORAGE(dtype, T, {
    T* p = t->data<T>();
    for (int64_t i = 0; i < t->numel; ++i) p[i] = static_cast<T>(draw());
  });
  return t;
}

Tensor bernoulli_mask(const Shape& shape, double keep_prob, DType dtype) {
  if (is_half(dtype)) return contiguous_copy(bernoulli_mask(shape, keep_prob, DType::Float32), dtype);
  Tensor t = empty(shape, dtype);
  Xoshiro& g = gen();
  fill_with(t, [&] { return g.uniform() < keep_prob ? 1.0 : 0.0; });
  return t;
}

}  // namespace dyngrad
