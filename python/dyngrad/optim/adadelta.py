"""Adadelta (torch's update rule)."""
from .. import zeros_like
from .optimizer import Optimizer, torch_flags


class Adadelta(Optimizer):
    """
        g = grad (+ weight_decay * p);   sq = rho * sq + (1 - rho) * g * g
        delta = sqrt(acc + eps) / sqrt(sq + eps) * g;   acc = rho * acc + (1 - rho) * delta * delta
        p = p - lr * delta
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Adadelta: invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Adadelta: invalid rho value: {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      **torch_flags("Adadelta", foreach=foreach, capturable=capturable,
                                                    differentiable=differentiable)))

    def _init_state(self, p, group):
        return {"step": 0, "square_avg": zeros_like(p), "acc_delta": zeros_like(p)}

    def _update_group(self, group, params, grads, states):
        lr, rho, eps, weight_decay = group["lr"], group["rho"], group["eps"], group["weight_decay"]
        for p, g, s in zip(params, grads, states):
            s["step"] += 1
            if group["maximize"]:
                g = -g
            if weight_decay != 0:
                g = g.add(p, alpha=weight_decay)
            s["square_avg"].mul_(rho).addcmul_(g, g, value=1 - rho)
            delta = s["acc_delta"].add(eps).sqrt_().div_(s["square_avg"].add(eps).sqrt_()).mul_(g)
            s["acc_delta"].mul_(rho).addcmul_(delta, delta, value=1 - rho)
            p.add_(delta, alpha=-lr)
