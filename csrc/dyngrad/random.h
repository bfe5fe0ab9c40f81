// random.h: dyngrad's own seeded generator (xoshiro256**, seeded by splitmix64), so results are reproducible
// across runs and machines. One generator per process, used with the GIL held.
#pragma once
#include <array>
#include <cstdint>

#include "tensor.h"

namespace dyngrad {

void manual_seed(uint64_t seed);
uint64_t initial_seed();
// The generator's whole state (4 words of xoshiro256**, then the seed), for utils.checkpoint's preserve_rng_state.
std::array<uint64_t, 5> rng_state();
void set_rng_state(const std::array<uint64_t, 5>& state);
Tensor rand(const Shape& shape, DType dtype);                 // U[0, 1)
Tensor randn(const Shape& shape, DType dtype);                // N(0, 1)
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype);  // [low, high)
Tensor bernoulli_mask(const Shape& shape, double keep_prob, DType dtype);    // 1 with keep_prob, else 0
// uniform_(lo, hi) / normal_(mean, std) filling an existing tensor (nn.init); bumps the version.
void uniform_(const Tensor& t, double lo, double hi);
void normal_(const Tensor& t, double mean, double std);

}  // namespace dyngrad
