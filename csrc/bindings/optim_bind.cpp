// optim_bind.cpp: the fused optimiser steps as dyngrad._C._<name>_step (called by python/dyngrad/optim).
#include "common.h"
#include "dyngrad/optim.h"

namespace dyngrad {

void bind_optim(py::module_& m) {
  using py::arg;
  using Tensors = std::vector<Tensor>;
  m.def("_sgd_step", [](const Tensors& params, const Tensors& grads, const Tensors& bufs,
                        const std::vector<bool>& fresh, double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                        bool maximize) {
    sgd_step(params, grads, bufs, fresh, {lr, momentum, dampening, weight_decay, nesterov, maximize});
  }, arg("params"), arg("grads"), arg("momentum_buffers"), arg("fresh"), arg("lr"), arg("momentum"),
     arg("dampening"), arg("weight_decay"), arg("nesterov"), arg("maximize"));
  m.def("_adam_step", [](const Tensors& params, const Tensors& grads, const Tensors& exp_avgs,
                         const Tensors& exp_avg_sqs, const Tensors& max_exp_avg_sqs, const Tensors& steps,
                         double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled,
                         bool amsgrad, bool maximize) {
    adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
              {lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad, maximize});
  }, arg("params"), arg("grads"), arg("exp_avgs"), arg("exp_avg_sqs"), arg("max_exp_avg_sqs"), arg("steps"),
     arg("lr"), arg("beta1"), arg("beta2"), arg("eps"), arg("weight_decay"), arg("decoupled_weight_decay"),
     arg("amsgrad"), arg("maximize"));
  m.def("_rmsprop_step", [](const Tensors& params, const Tensors& grads, const Tensors& square_avgs,
                            const Tensors& bufs, const Tensors& grad_avgs, double lr, double alpha, double eps,
                            double weight_decay, double momentum, bool centered, bool maximize) {
    rmsprop_step(params, grads, square_avgs, bufs, grad_avgs, {lr, alpha, eps, weight_decay, momentum, centered,
                                                               maximize});
  }, arg("params"), arg("grads"), arg("square_avgs"), arg("momentum_buffers"), arg("grad_avgs"), arg("lr"),
     arg("alpha"), arg("eps"), arg("weight_decay"), arg("momentum"), arg("centered"), arg("maximize"));
  m.def("_adagrad_step", [](const Tensors& params, const Tensors& grads, const Tensors& sums,
                            const std::vector<int64_t>& steps, double lr, double lr_decay, double weight_decay,
                            double eps, bool maximize) {
    adagrad_step(params, grads, sums, steps, {lr, lr_decay, weight_decay, eps, maximize});
  }, arg("params"), arg("grads"), arg("sums"), arg("steps"), arg("lr"), arg("lr_decay"), arg("weight_decay"),
     arg("eps"), arg("maximize"));
}

}  // namespace dyngrad
