// derivatives.h: the table of backward formulas (derivatives.cpp), indexed by OpKind.
#pragma once
#include <vector>

#include "node.h"

namespace dyngrad {

// Gradients for each input of `node` given dL/d(out) for each of its outputs (null where none arrived); null where
// an input needs none.
std::vector<Tensor> run_derivative(OpNode& node, std::vector<Tensor>& grads);

}  // namespace dyngrad
