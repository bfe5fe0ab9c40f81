// forward_ad.h: forward-mode automatic differentiation (torch.autograd.forward_ad): dual tensors and levels.
//
// Note [Dual tensors]: a tensor is dual at a level when it carries a tangent there (TensorImpl::tangents, a list
// of (level, tangent) pairs; empty for almost every tensor). Every primitive's forward ends with
//     if (forward_ad::active()) forward_tangents<OpKind::K>(out, {&a, &b}, SavesK{a, b, ...});
// which, for each open level where an input has a tangent, runs K's tangent formula (forward_derivatives.cpp,
// one per ops.def line, next to the backward formula's order) and attaches the result to `out`. The formula reads
// the op's arguments through the same named struct its backward reads (saved.h), built from the forward's own
// arguments. Tangents ignore grad mode (as torch: no_grad does not stop forward AD), are summed and expanded to
// the output's shape and cast to its dtype by attach(), as the engine unbroadcasts gradients.
//
// Note [Nested levels]: levels nest as JAX's do: a dual at level L is a pair (primal, tangent) whose parts may be
// duals of the levels below L. So level L's tangent is computed with the levels >= L hidden (the formula's own
// ops then propagate only the lower levels, whose tangents the primals and the output already carry), levels in
// increasing order. jvp(jvp(f)) therefore gives the second-order cross term exactly once, in the inner tangent's
// outer tangent. Levels are numbered from 0 and never reused: a tangent of a closed level is simply invisible.
#pragma once
#include <atomic>
#include <vector>

#include "saved.h"
#include "tensor.h"

namespace dyngrad {
namespace forward_ad {

extern std::atomic<int> g_open_levels;
// One relaxed load: what every primitive pays when no dual_level is open.
inline bool active() { return g_open_levels.load(std::memory_order_relaxed) != 0; }

int64_t enter_level();           // a new innermost level
void exit_level(int64_t level);  // RuntimeError unless `level` is the innermost open level
int64_t current_level();         // the innermost open level, -1 when none
std::vector<int64_t> open_levels();  // innermost last
// An in-place write of `value` into self (inplace.cpp): self takes value's tangents (none: a zero tangent).
void take_tangents(const Tensor& self, const Tensor& value);
// The tangent of `t` at `level` if that level is open and visible (Note [Nested levels]), else null.
Tensor tangent_of(const Tensor& t, int64_t level);
// Sets (tangent non-null) or removes t's tangent at `level`.
void set_tangent(const Tensor& t, int64_t level, const Tensor& tangent);
// Copies every tangent of `from` to `to` (an alias that stands for the same value: saved outputs).
void copy_tangents(const Tensor& to, const Tensor& from);

// For a product a @ b computed with its tangent in one call (Note [A product and its tangent in one call] in
// kernels/gemm_avx512.cpp): true, with the level and a's tangent there, when that tangent is the product's only
// one and its formula's product would be plain -- one open level, visible; b without a tangent; the tangent without
// tangents of its own, and recording no graph (neither it nor b requires grad in grad mode). The caller then sets
// the tangent ta @ b itself instead of calling forward_tangents.
bool sole_tangent(const Tensor& a, const Tensor& b, int64_t* level, Tensor* tangent);

// The formulas' runner: one per OpKind (forward_derivatives.cpp). `saves` points to the op's saved struct.
void attach(OpKind kind, const std::vector<Tensor>& outs, const std::vector<const Tensor*>& inputs, const void* saves);

}  // namespace forward_ad

// The call every primitive's forward makes (Note [Dual tensors]); `s` must be the struct K's ops.def line names.
template <OpKind K>
void forward_tangents(const Tensor& out, const std::vector<const Tensor*>& inputs,
                      const typename OpSaves<K>::type& s) {
  forward_ad::attach(K, {out}, inputs, &s);
}
template <OpKind K>
void forward_tangents_outputs(const std::vector<Tensor>& outs, const std::vector<const Tensor*>& inputs,
                              const typename OpSaves<K>::type& s) {
  forward_ad::attach(K, outs, inputs, &s);
}

}  // namespace dyngrad
