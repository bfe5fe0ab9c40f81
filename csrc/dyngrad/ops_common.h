// ops_common.h: what every ops_*.cpp file needs to record history.
#pragma once
#include <memory>

#include "grad_mode.h"
#include "kernels/kernels.h"
#include "node.h"
#include "ops.h"
#include "saved.h"

namespace dyngrad {

// Records the node of op K as the grad_fn of `out`, with one edge per input (null = not differentiable). The
// caller then fills, by name, what K's ops.def line says it saves: node.saved.a.save(a, false), ...
// Returns a reference: `out` owns the node, so recording costs no reference-count traffic beyond the edges.
template <OpKind K>
OpNodeOf<K>& record(const Tensor& out, const std::vector<const Tensor*>& inputs) {
  std::shared_ptr<OpNodeOf<K>> node = make_op_node<K>();
  OpNodeOf<K>& ref = *node;
  collect_next_edges(ref, inputs);
  set_history(out, std::move(node));
  return ref;
}

// ---- the forwards of ops.def's DG_KERNEL_OP lines (generated in ops_math.cpp) ----
// What a one-input op saves, by the struct its ops.def line names.
inline void save_unary(SavesNothing::Stored&, const Tensor&, const Tensor&) {}
inline void save_unary(SavesA::Stored& s, const Tensor& a, const Tensor&) { s.a.save(a, false); }
inline void save_unary(SavesOut::Stored& s, const Tensor&, const Tensor& out) { s.out.save(out, true); }

// out = kernel(a) in out_dtype (a's dtype for `unary`, float32 for the integers of `unary_float`)
template <OpKind K>
Tensor unary_op(UnaryKind kernel, const Tensor& a, DType out_dtype) {
  Tensor out = unary_kernel(kernel, a, out_dtype);
  if (any_requires_grad({&a})) save_unary(record<K>(out, {&a}).saved, a, out);
  return out;
}

inline void check_float(const Tensor& a, const char* op) {
  DG_CHECK(is_floating(a->dtype), TypeError, op, ": expected a floating-point tensor, got ", dtype_name(a->dtype),
           ".");
}

// Sorted, unique, wrapped dims; empty input means every dim.
std::vector<int64_t> normalize_dims(const Dims& dims, int64_t ndim, const char* op);

}  // namespace dyngrad
