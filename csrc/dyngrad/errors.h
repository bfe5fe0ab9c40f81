// errors.h: the messages of the classic autograd mistakes, defined once. python/dyngrad/reference/errors.py
// carries the same strings, so one regex in the tests matches both engines.
#pragma once
#include <string>

#include "check.h"

namespace dyngrad {

inline std::string err_backward_twice(const std::string& node) {
  return str_cat("backward() reached ", node,
                 ", whose saved tensors were already freed by an earlier backward(). Pass retain_graph=True to "
                 "the first backward() if you need to backpropagate through this graph twice.");
}

inline std::string err_saved_modified(const std::string& shape, const std::string& node, uint64_t now,
                                      uint64_t saved) {
  return str_cat("a tensor of shape ", shape, " saved by ", node,
                 " for the backward pass was modified in place: it is at version ", now, ", but version ", saved,
                 " was saved. Use an out-of-place op (x = x + 1) instead of an in-place one (x += 1), or clone() "
                 "before modifying.");
}

// as torch: a complex output has no implicit gradient (which real loss would it be?)
inline std::string err_complex_backward(const char* dtype) {
  return str_cat("backward(): a gradient can be created implicitly only for real scalar outputs, but this output is ",
                 dtype, ". Take .real or .abs() first, or pass gradient=...");
}
inline std::string err_nonscalar_backward(const std::string& shape) {
  return str_cat("backward() without a gradient argument needs a scalar output, but this output has shape ", shape,
                 ". Call .sum() first or pass gradient=...");
}

inline std::string err_no_grad_fn() {
  return "backward(): this tensor does not require grad and has no grad_fn. Set requires_grad=True on the leaves "
         "you want gradients for.";
}

inline std::string err_leaf_inplace(const std::string& op) {
  return str_cat(op,
                 ": a leaf tensor that requires grad is being used in an in-place operation. Wrap it in `with "
                 "no_grad():` or operate on a clone.");
}

inline std::string err_int_requires_grad(const char* dtype) {
  return str_cat("only floating-point tensors can require gradients; this tensor is ", dtype, ".");
}

// Note [Writable tensors] in tensor.h
inline std::string err_internal_overlap(const std::string& op, const std::string& shape, const std::string& strides) {
  return str_cat(op,
                 ": unsupported operation: more than one element of the written-to tensor refers to a single memory "
                 "location (shape ", shape, ", strides ", strides,
                 ": an expanded view). Please clone() the tensor before performing the operation.");
}

inline std::string err_read_only(const std::string& op) {
  return str_cat(op,
                 ": the tensor's memory is read-only: it is shared with a numpy array that is not writeable (such as "
                 "np.load(..., mmap_mode='r') or np.frombuffer(bytes)). Write into a copy instead (tensor.clone(), "
                 "or dyngrad.tensor(array)).");
}

}  // namespace dyngrad
