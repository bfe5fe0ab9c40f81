"""RMSprop (optionally centred, with momentum), torch's update rule."""
from .. import zeros_like
from .optimizer import Optimizer, fused_kernel, torch_flags


class RMSprop(Optimizer):
    """
        g = grad + weight_decay * p;   sq = alpha * sq + (1 - alpha) * g * g
        avg = sqrt(sq - ga * ga) + eps with ga = alpha * ga + (1 - alpha) * g if centered, else sqrt(sq) + eps
        buf = momentum * buf + g / avg; p = p - lr * buf     (no momentum: p = p - lr * g / avg)
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        if lr < 0.0:
            raise ValueError(f"RMSprop: invalid learning rate: {lr}")
        if not 0.0 <= alpha:
            raise ValueError(f"RMSprop: invalid alpha value: {alpha}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, maximize=maximize,
                                      **torch_flags("RMSprop", capturable=capturable, foreach=foreach,
                                                    differentiable=differentiable)))

    def _init_state(self, p, group):
        state = {"step": 0, "square_avg": zeros_like(p)}
        if group["momentum"] > 0:
            state["momentum_buffer"] = zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = zeros_like(p)
        return state

    def _update_group(self, group, params, grads, states):
        lr, alpha, eps, weight_decay = group["lr"], group["alpha"], group["eps"], group["weight_decay"]
        momentum, centered, maximize = group["momentum"], group["centered"], group["maximize"]
        for s in states:
            s["step"] += 1
        kernel = fused_kernel("rmsprop")
        if kernel is not None:
            kernel(params, grads, [s["square_avg"] for s in states],
                   [s["momentum_buffer"] for s in states] if momentum > 0 else [],
                   [s["grad_avg"] for s in states] if centered else [],
                   lr, alpha, eps, weight_decay, momentum, centered, maximize)
            return
        for p, g, s in zip(params, grads, states):
            if maximize:
                g = -g
            if weight_decay != 0:
                g = g.add(p, alpha=weight_decay)
            square_avg = s["square_avg"]
            square_avg.mul_(alpha).add_(g * g, alpha=1 - alpha)
            if centered:
                grad_avg = s["grad_avg"]
                grad_avg.add_(g - grad_avg, alpha=1 - alpha)
                avg = (square_avg - grad_avg * grad_avg).sqrt() + eps
            else:
                avg = square_avg.sqrt() + eps
            if momentum > 0:
                buf = s["momentum_buffer"]
                buf.mul_(momentum).add_(g / avg)
                p.add_(buf, alpha=-lr)
            else:
                p.add_(g / avg, alpha=-lr)
