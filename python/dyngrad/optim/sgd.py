"""SGD with momentum, dampening, Nesterov momentum and weight decay (torch's update rule)."""
from .. import zeros_like
from .optimizer import Optimizer, required, fused_kernel, torch_flags


class SGD(Optimizer):
    """
        g = grad + weight_decay * p
        buf = g (first step), else momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        if lr is not required and lr < 0.0:
            raise ValueError(f"SGD: invalid learning rate: {lr}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize,
                                      **torch_flags("SGD", foreach=foreach, differentiable=differentiable,
                                                    fused=fused)))

    def _init_state(self, p, group):
        # torch keeps no state for a parameter of a group without momentum
        return {"momentum_buffer": None} if group["momentum"] != 0 else None

    def _update_group(self, group, params, grads, states):
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        weight_decay, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
        kernel = fused_kernel("sgd")
        if kernel is not None:
            if momentum != 0:
                fresh = [s["momentum_buffer"] is None for s in states]
                for s, p, new in zip(states, params, fresh):
                    if new:
                        s["momentum_buffer"] = zeros_like(p)
                bufs = [s["momentum_buffer"] for s in states]
            else:
                fresh, bufs = [], []
            kernel(params, grads, bufs, fresh, lr, momentum, dampening, weight_decay, nesterov, maximize)
            return
        for p, g, state in zip(params, grads, states):
            if maximize:
                g = -g
            if weight_decay != 0:
                g = g.add(p, alpha=weight_decay)
            if momentum != 0:
                buf = state["momentum_buffer"]
                if buf is None:
                    buf = state["momentum_buffer"] = g.clone()
                else:
                    buf.mul_(momentum).add_(g, alpha=1 - dampening)
                g = g.add(buf, alpha=momentum) if nesterov else buf
            p.add_(g, alpha=-lr)
