"""Rprop: resilient backpropagation, per-element step sizes driven by gradient signs (torch's update rule)."""
from .. import zeros_like, full_like, where
from .optimizer import Optimizer, torch_flags


class Rprop(Optimizer):
    """
        s = sign(g * prev):  step_size = clamp(step_size * (etaplus if s > 0, etaminus if s < 0, 1 if s == 0),
                                               step_size_min, step_size_max)
        where s < 0 the gradient is taken as 0 (no move, and prev = 0 so the next step's sign is 0)
        p = p - sign(g) * step_size;   prev = g
    step_size starts at lr everywhere.
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Rprop: invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Rprop: invalid eta values: {etas[0]}, {etas[1]} (expected 0 < etaminus < 1 < "
                             "etaplus)")
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), maximize=maximize,
                                      **torch_flags("Rprop", capturable=capturable, foreach=foreach,
                                                    differentiable=differentiable)))

    def _init_state(self, p, group):
        return {"step": 0, "prev": zeros_like(p), "step_size": full_like(p, group["lr"])}

    def _update_group(self, group, params, grads, states):
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        for p, g, s in zip(params, grads, states):
            s["step"] += 1
            if group["maximize"]:
                g = -g
            sign = g.mul(s["prev"]).sign()
            factor = where(sign > 0, full_like(sign, etaplus),
                           where(sign < 0, full_like(sign, etaminus), full_like(sign, 1.0)))
            s["step_size"].mul_(factor).clamp_(step_size_min, step_size_max)
            g = where(sign < 0, zeros_like(g), g)
            p.addcmul_(g.sign(), s["step_size"], value=-1)
            s["prev"].copy_(g)
