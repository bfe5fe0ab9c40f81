// ops_common.h: what every ops_*.cpp file needs to record history.
#pragma once
#include <memory>

#include "forward_ad.h"
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
// The same struct as its tangent formula reads it (Note [Dual tensors] in forward_ad.h).
inline SavesNothing unary_fields(SavesNothing*, const Tensor&, const Tensor&) { return {}; }
inline SavesA unary_fields(SavesA*, const Tensor& a, const Tensor&) { return {a}; }
inline SavesOut unary_fields(SavesOut*, const Tensor&, const Tensor& out) { return {out}; }
inline SavesGradX unary_fields(SavesGradX*, const Tensor& grad, const Tensor& x) { return {grad, x}; }
inline SavesX unary_fields(SavesX*, const Tensor&, const Tensor& x) { return {x}; }
template <OpKind K>
void unary_tangents(const Tensor& out, const Tensor& a, const Tensor& b_or_out, std::vector<const Tensor*> inputs) {
  using S = typename OpSaves<K>::type;
  forward_tangents<K>(out, inputs, unary_fields((S*)nullptr, a, b_or_out));
}

// out = kernel(a) in out_dtype (a's dtype for `unary`, float32 for the integers of `unary_float`)
template <OpKind K>
Tensor unary_op(UnaryKind kernel, const Tensor& a, DType out_dtype) {
  Tensor out = unary_kernel(kernel, a, out_dtype);
  if (any_requires_grad({&a})) save_unary(record<K>(out, {&a}).saved, a, out);
  if (forward_ad::active()) unary_tangents<K>(out, a, out, {&a});
  return out;
}

// out = grad * f'(x) for the derivative helper `kernel` (a unary op's fused derivative): one pass where the
// operands allow it, else the product of the two kernels (broadcast, promoted). Saves x, and grad when x needs a
// gradient (SavesGradX) or only x (SavesX).
inline void save_unary_backward(SavesGradX::Stored& s, OpNode& node, const Tensor& grad, const Tensor& x) {
  s.x.save(x, false);
  if (node.needs_input_grad(1)) s.grad.save(grad, false);
}
inline void save_unary_backward(SavesX::Stored& s, OpNode&, const Tensor&, const Tensor& x) { s.x.save(x, false); }

// A complex x: grad * conj(f'(x)), torch's convention for a holomorphic f (Note [Complex gradients] in
// derivatives.cpp).
inline Tensor derivative_factor(UnaryKind kernel, const Tensor& x) {
  Tensor d = unary_kernel(kernel, x, to_floating(x->dtype));
  return is_complex(d->dtype) ? unary_kernel(UnaryKind::Conj, d, d->dtype) : d;
}

template <OpKind K>
Tensor unary_backward_op(UnaryKind kernel, const Tensor& grad, const Tensor& x, const char* op) {
  Tensor out = unary_grad_fusable(grad, x)
                   ? unary_grad_kernel(kernel, grad, x)
                   : binary_kernel(BinaryKind::Mul, grad, derivative_factor(kernel, x),
                                   to_floating(result_type(grad, x)), op);
  if (any_requires_grad({&grad, &x})) {
    auto& node = record<K>(out, {&grad, &x});
    save_unary_backward(node.saved, node, grad, x);
  }
  if (forward_ad::active()) unary_tangents<K>(out, grad, x, {&grad, &x});
  return out;
}

// Records the node of op K as the grad_fn of each non-null output (output_nr = its position): the primitives with
// several outputs (layer_norm_backward, rnn_layer_backward).
template <OpKind K>
OpNodeOf<K>& record_outputs(const std::vector<Tensor>& outs, const std::vector<const Tensor*>& inputs) {
  std::shared_ptr<OpNodeOf<K>> node = make_op_node<K>();
  OpNodeOf<K>& ref = *node;
  collect_next_edges(ref, inputs);
  ref.outputs = (uint32_t)outs.size();
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i]) set_history(outs[i], node, (uint32_t)i);
  return ref;
}

// f() with grad mode off: a primitive's forward computed with differentiable ops records nothing of its own.
template <class F>
auto unrecorded(F&& f) {
  GradModeGuard off(false);
  return f();
}

// Complex numbers have no order: the ops that compare them refuse them (the kernels would too, naming no op).
inline void check_not_complex(const Tensor& a, const char* op) {
  DG_CHECK(!is_complex(a->dtype), TypeError, op, ": not supported for complex tensors (", dtype_name(a->dtype),
           "); complex numbers have no order.");
}

inline void check_float(const Tensor& a, const char* op) {
  DG_CHECK(is_floating(a->dtype), TypeError, op, ": expected a floating-point tensor, got ", dtype_name(a->dtype),
           ".");
}

// Sorted, unique, wrapped dims; empty input means every dim.
std::vector<int64_t> normalize_dims(const Dims& dims, int64_t ndim, const char* op);

}  // namespace dyngrad
