// conv.h: max pooling's kernel with the values (conv.cpp, Note [Max pooling in one pass] in ops_nn.cpp); the
// other window kernels (im2col, col2im, the positions alone) are in kernels.h.
#pragma once
#include "../tensor.h"

namespace dyngrad {

// max_pool2d_positions_kernel's positions (kernels.h), and into *values (not null) x's elements at them, of x's
// dtype and the positions' shape: what take(x, positions) gives.
Tensor max_pool2d_positions_kernel(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                   int64_t pw, Tensor* values);

}  // namespace dyngrad
