// scalar.h: one float32 element of the elementwise kernels (Note [One-element kernels] in elementwise.cpp), for the
// static replay of one-element programs (Note [Scalar replay] in bindings/capture_bind.cpp).
#pragma once
#include "kernels.h"

namespace dyngrad {

// The same bits as binary_kernel, unary_kernel and unary_grad_kernel on one element; false for a kind they do not
// cover.
bool scalar_binary_f32(BinaryKind k, float x, float y, float& out);
bool scalar_unary_f32(UnaryKind k, float x, float& out);
bool scalar_unary_grad_f32(UnaryKind k, float g, float y, float& out);

}  // namespace dyngrad
