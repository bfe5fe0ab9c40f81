"""NAdam: Adam with Nesterov momentum and a momentum-decay schedule (torch's update rule)."""
from .. import zeros_like
from .adamax import _check_betas
from .optimizer import Optimizer, torch_flags, f32


class NAdam(Optimizer):
    """
        g = grad (+ weight_decay * p; decoupled_weight_decay: p = p * (1 - lr * weight_decay) instead)
        mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay));   mu_product = prod_{i <= t} mu_i
        m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g * g
        denom = sqrt(v / (1 - beta2^t)) + eps
        p = p - lr * (1 - mu_t) / (1 - mu_product) * g / denom - lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / denom
    mu_product is kept in float32, as torch keeps it (a float32 0-d tensor).
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_betas("NAdam", lr, betas, eps, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"NAdam: invalid momentum_decay value: {momentum_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize,
                                      **torch_flags("NAdam", foreach=foreach, capturable=capturable,
                                                    differentiable=differentiable)))

    def _init_state(self, p, group):
        return {"step": 0, "mu_product": 1.0, "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}

    def _update_group(self, group, params, grads, states):
        lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        momentum_decay = group["momentum_decay"]
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
            mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * momentum_decay))
            mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
            s["mu_product"] = f32(f32(s["mu_product"]) * f32(mu))
            mu_product_next = s["mu_product"] * mu_next
            s["exp_avg"].lerp_(g, 1 - beta1)
            s["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
            denom = s["exp_avg_sq"].div(1 - beta2 ** t).sqrt().add_(eps)
            p.addcdiv_(g, denom, value=-lr * (1.0 - mu) / (1.0 - s["mu_product"]))
            p.addcdiv_(s["exp_avg"], denom, value=-lr * mu_next / (1.0 - mu_product_next))
