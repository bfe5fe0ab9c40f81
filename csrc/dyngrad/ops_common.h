// ops_common.h: what every ops_*.cpp file needs to record history.
#pragma once
#include <memory>

#include "grad_mode.h"
#include "kernels/kernels.h"
#include "node.h"
#include "ops.h"

namespace dyngrad {

// Records an OpNode of kind k as the grad_fn of `out`, with one edge per input (null = not differentiable).
inline std::shared_ptr<OpNode> record(OpKind k, const Tensor& out, std::initializer_list<const Tensor*> inputs) {
  auto node = make_pooled<OpNode>(k);
  collect_next_edges(*node, std::vector<const Tensor*>(inputs));
  set_history(out, node);
  return node;
}

inline void check_float(const Tensor& a, const char* op) {
  DG_CHECK(is_floating(a->dtype), TypeError, op, ": expected a floating-point tensor, got ", dtype_name(a->dtype),
           ".");
}

// Sorted, unique, wrapped dims; empty input means every dim.
std::vector<int64_t> normalize_dims(const Dims& dims, int64_t ndim, const char* op);

}  // namespace dyngrad
