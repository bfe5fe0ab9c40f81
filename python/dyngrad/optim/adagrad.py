"""Adagrad, torch's update rule (with lr_decay and initial_accumulator_value)."""
from .. import full_like
from .optimizer import Optimizer, fused_kernel, torch_flags


class Adagrad(Optimizer):
    """
        g = grad + weight_decay * p;   clr = lr / (1 + (t - 1) * lr_decay)
        sum = sum + g * g;             p = p - clr * g / (sqrt(sum) + eps)
    """

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Adagrad: invalid learning rate: {lr}")
        if initial_accumulator_value < 0.0:
            raise ValueError(f"Adagrad: invalid initial_accumulator_value value: {initial_accumulator_value}")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps,
                                      initial_accumulator_value=initial_accumulator_value, maximize=maximize,
                                      **torch_flags("Adagrad", foreach=foreach, differentiable=differentiable,
                                                    fused=fused)))
        # torch creates Adagrad's state at construction (the accumulator starts at initial_accumulator_value)
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = self._init_state(p, group)

    def _init_state(self, p, group):
        return {"step": 0, "sum": full_like(p, group["initial_accumulator_value"])}

    def _update_group(self, group, params, grads, states):
        lr, lr_decay, weight_decay = group["lr"], group["lr_decay"], group["weight_decay"]
        eps, maximize = group["eps"], group["maximize"]
        for s in states:
            s["step"] += 1
        kernel = fused_kernel("adagrad")
        if kernel is not None:
            kernel(params, grads, [s["sum"] for s in states], [s["step"] for s in states],
                   lr, lr_decay, weight_decay, eps, maximize)
            return
        for p, g, s in zip(params, grads, states):
            if maximize:
                g = -g
            if weight_decay != 0:
                g = g.add(p, alpha=weight_decay)
            clr = lr / (1 + (s["step"] - 1) * lr_decay)
            s["sum"].add_(g * g)
            p.add_(g / (s["sum"].sqrt() + eps), alpha=-clr)
