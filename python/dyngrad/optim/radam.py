"""RAdam: Adam with a rectified (variance-corrected) adaptive learning rate (torch's update rule)."""
import math

from .. import zeros_like
from .adamax import _check_betas
from .optimizer import Optimizer, torch_flags


class RAdam(Optimizer):
    """
        g = grad (+ weight_decay * p; decoupled_weight_decay: p = p * (1 - lr * weight_decay) instead)
        m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g * g;   m_hat = m / (1 - beta1^t)
        rho_inf = 2 / (1 - beta2) - 1;     rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
        rho_t > 5:  r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
                    p = p - lr * m_hat * r * sqrt(1 - beta2^t) / (sqrt(v) + eps)
        otherwise:  p = p - lr * m_hat     (the variance estimate is not yet reliable: plain momentum SGD)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_betas("RAdam", lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                                      **torch_flags("RAdam", foreach=foreach, capturable=capturable,
                                                    differentiable=differentiable)))

    def _init_state(self, p, group):
        return {"step": 0, "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}

    def _update_group(self, group, params, grads, states):
        lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        for p, g, s in zip(params, grads, states):
            s["step"] += 1
            t = s["step"]
            if group["maximize"]:
                g = -g
            if weight_decay != 0:
                if group["decoupled_weight_decay"]:
                    p.mul_(1 - lr * weight_decay)
                else:
                    g = g.add(p, alpha=weight_decay)
            s["exp_avg"].lerp_(g, 1 - beta1)
            s["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
            bias_correction1, bias_correction2 = 1 - beta1 ** t, 1 - beta2 ** t
            m_hat = s["exp_avg"] / bias_correction1
            rho_inf = 2 / (1 - beta2) - 1
            rho_t = rho_inf - 2 * t * (beta2 ** t) / bias_correction2
            if rho_t > 5.0:
                rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                adaptive = math.sqrt(bias_correction2) / s["exp_avg_sq"].sqrt().add_(eps)
                p.add_(m_hat * lr * adaptive * rect, alpha=-1.0)
            else:
                p.add_(m_hat * lr, alpha=-1.0)
