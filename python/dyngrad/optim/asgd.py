"""ASGD: averaged stochastic gradient descent (torch's update rule)."""
from .. import zeros_like
from .optimizer import Optimizer, torch_flags, f32


class ASGD(Optimizer):
    """
        g = grad (+ weight_decay * p)
        p = p * (1 - lambd * eta) - eta * g
        ax = p if mu == 1 else ax + mu * (p - ax)              (the running average of the iterates)
        eta = lr / (1 + lambd * lr * t)^alpha;   mu = 1 / max(1, t - t0)
    eta and mu are kept in float32, as torch keeps them (float32 0-d tensors).
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        if not 0.0 <= lr:
            raise ValueError(f"ASGD: invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"ASGD: invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      maximize=maximize,
                                      **torch_flags("ASGD", foreach=foreach, differentiable=differentiable,
                                                    capturable=capturable)))

    def _init_state(self, p, group):
        return {"step": 0, "eta": f32(group["lr"]), "mu": 1.0, "ax": zeros_like(p)}

    def _update_group(self, group, params, grads, states):
        lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
        for p, g, s in zip(params, grads, states):
            s["step"] += 1
            if group["maximize"]:
                g = -g
            if group["weight_decay"] != 0:
                g = g.add(p, alpha=group["weight_decay"])
            eta = s["eta"]
            p.mul_(1 - lambd * eta)
            p.add_(g, alpha=-eta)
            if s["mu"] != 1:
                s["ax"].add_(p.sub(s["ax"]).mul_(s["mu"]))
            else:
                s["ax"].copy_(p)
            s["eta"] = f32(lr / ((1 + lambd * lr * s["step"]) ** alpha))
            s["mu"] = f32(1 / max(1, s["step"] - t0))
