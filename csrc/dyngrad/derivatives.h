// derivatives.h: the table of backward formulas (derivatives.cpp), indexed by OpKind.
#pragma once
#include <vector>

#include "node.h"

namespace dyngrad {

// Gradients for each input of `node` given dL/d(out) for each of its outputs (null where none arrived); null where
// an input needs none.
std::vector<Tensor> run_derivative(OpNode& node, std::vector<Tensor>& grads);

// Note [Gradients written in place] (node.h): the op's in-place variant of its formula, if it has one that applies
// here; true if it wrote the gradient.
bool run_derivative_in_place(OpNode& node, std::vector<Tensor>& grads);

// Note [Tangents from backward formulas] (derivatives.cpp): the tangent of a plain unary op (a DG_KERNEL_OP of
// signature unary or unary_float) at tangent t, from its backward formula; `saves` points to the op's struct.
Tensor tangent_from_backward(OpKind kind, const Tensor& t, const void* saves);
// sgn(a) = a / |a| (0 at 0) of a complex a, for abs's derivatives: the kernel sign computes the same values but
// is piecewise constant to autograd (its derivative is 0, right for real tensors only), so for a complex a this
// composes it from ops whose derivatives are right (Note [Differentiable sgn of abs] in derivatives.cpp).
Tensor abs_sgn(const Tensor& a);
// Slice gradients in place (derivatives.cpp): a new buffer of meta's shape, zero outside a window along dim
Tensor zeros_outside_window(const InputMeta& meta, int64_t dim, int64_t start, int64_t step, int64_t length);

// The differentiable definitions of three fused backwards (Note [Derivatives of fused backwards]), which their
// tangent formulas also use (forward_derivatives.cpp).
std::vector<Tensor> layer_norm_backward_definition(const Tensor& grad, const Tensor& a, const Tensor& w,
                                                   int64_t ndims, double eps);
std::vector<Tensor> rnn_layer_backward_definition(const Tensor& grad, const Tensor& gi, const Tensor& h0,
                                                  const Tensor& c0, const Tensor& w, const Tensor& b,
                                                  const Tensor& out, int64_t mode, bool reverse);
std::vector<Tensor> attention_backward_definition(const Tensor& grad, const Tensor& q, const Tensor& k,
                                                  const Tensor& v, const Tensor& mask, bool is_causal, double scale,
                                                  double dropout_p, int64_t seed);

}  // namespace dyngrad
