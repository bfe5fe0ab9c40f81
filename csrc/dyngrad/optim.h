// optim.h: fused optimiser updates for python/dyngrad/optim (see Note [Fused optimiser steps] in
// python/dyngrad/optim/optimizer.py). One call updates a whole parameter group in place: for each parameter, one
// loop over its elements reads the gradient and the state buffers once and writes the parameter and buffers once.
// The formulas are torch's single-tensor update rules, evaluated element by element in the parameter's dtype.
// No autograd: parameters are leaves and the caller holds no_grad; every written tensor's version is bumped.
#pragma once
#include <vector>

#include "tensor.h"

namespace dyngrad {

struct SgdOptions {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
};
// bufs and fresh are empty when momentum == 0; fresh[i] means bufs[i] starts as the first (decayed) gradient.
void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& bufs,
              const std::vector<bool>& fresh, const SgdOptions& o);

struct AdamOptions {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay, amsgrad, maximize;  // decoupled: AdamW
};
// steps[i] is parameter i's step count, a one-element float32 tensor (torch's state["step"]) that the step
// increments before using it (1 on the first step): a count kept in a tensor replays with dyngrad.compile, where a
// Python number would be a new constant at every step. max_exp_avg_sqs empty unless amsgrad.
void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
               const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps, const AdamOptions& o);

struct RmspropOptions {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered, maximize;
};
// bufs empty unless momentum > 0; grad_avgs empty unless centered.
void rmsprop_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                  const std::vector<Tensor>& square_avgs, const std::vector<Tensor>& bufs,
                  const std::vector<Tensor>& grad_avgs, const RmspropOptions& o);

struct AdagradOptions {
  double lr, lr_decay, weight_decay, eps;
  bool maximize;
};
void adagrad_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& sums,
                  const std::vector<int64_t>& steps, const AdagradOptions& o);

}  // namespace dyngrad
