"""Adamax: Adam with the infinity norm (torch's update rule)."""
from .. import zeros_like, maximum
from .optimizer import Optimizer, torch_flags


class Adamax(Optimizer):
    """
        g = grad (+ weight_decay * p);   m = beta1 * m + (1 - beta1) * g
        u = max(beta2 * u, |g| + eps);   p = p - lr / (1 - beta1^t) * m / u
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check_betas("Adamax", lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      maximize=maximize,
                                      **torch_flags("Adamax", foreach=foreach, differentiable=differentiable,
                                                    capturable=capturable)))

    def _init_state(self, p, group):
        return {"step": 0, "exp_avg": zeros_like(p), "exp_inf": zeros_like(p)}

    def _update_group(self, group, params, grads, states):
        lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        for p, g, s in zip(params, grads, states):
            s["step"] += 1
            if group["maximize"]:
                g = -g
            if weight_decay != 0:
                g = g.add(p, alpha=weight_decay)
            s["exp_avg"].lerp_(g, 1 - beta1)
            s["exp_inf"].copy_(maximum(s["exp_inf"].mul_(beta2), g.abs().add_(eps)))
            clr = lr / (1 - beta1 ** s["step"])
            p.addcdiv_(s["exp_avg"], s["exp_inf"], value=-clr)


def _check_betas(name, lr, betas, eps, weight_decay):
    """torch's argument checks shared by the Adam family."""
    if not 0.0 <= lr:
        raise ValueError(f"{name}: invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"{name}: invalid epsilon value: {eps}")
    if len(betas) != 2:
        raise ValueError(f"{name}: betas must be a pair (beta1, beta2), got {betas!r}")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"{name}: invalid beta parameter at index {i}: {beta}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"{name}: invalid weight_decay value: {weight_decay}")
