"""Adam and AdamW (decoupled weight decay), torch's update rule including amsgrad.

Note [Step counts in tensors]: state["step"] is a one-element float32 tensor, as torch's, incremented in place by
each step, and the bias corrections are computed from it inside the step (the fused kernel reads it; the reference
path computes them with float64 tensor ops). A Python number would reach the step as a new constant every time:
dyngrad.compile's recordings would miss at every step (issue 20: the Adam training step recorded 8 variants, then
ran eagerly), where a tensor read by reference replays as one.
"""
from .. import float32, float64, maximum, tensor, zeros_like
from .optimizer import Optimizer, fused_kernel, torch_flags


class Adam(Optimizer):
    """
        g = grad (+ weight_decay * p for Adam; AdamW instead shrinks p by (1 - lr * weight_decay))
        m = beta1 * m + (1 - beta1) * g            v = beta2 * v + (1 - beta2) * g * g
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)   (amsgrad: v -> running max of v)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        if lr < 0.0:
            raise ValueError(f"{type(self).__name__}: invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"{type(self).__name__}: invalid epsilon value: {eps}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"{type(self).__name__}: invalid beta parameter at index {i}: {beta}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize,
                                      **torch_flags(type(self).__name__, foreach=foreach, capturable=capturable,
                                                    differentiable=differentiable, fused=fused),
                                      decoupled_weight_decay=bool(decoupled_weight_decay)))

    def _init_state(self, p, group):
        state = {"step": tensor(0.0, dtype=float32), "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = zeros_like(p)
        return state

    def _update_group(self, group, params, grads, states):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
        decoupled = group.get("decoupled_weight_decay", False)
        kernel = fused_kernel("adam")
        if kernel is not None:                     # it increments the step counts itself
            kernel(params, grads, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
                   [s["max_exp_avg_sq"] for s in states] if amsgrad else [], [s["step"] for s in states],
                   lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad, maximize)
            return
        for p, g, s in zip(params, grads, states):
            if maximize:
                g = -g
            if weight_decay != 0:
                if decoupled:
                    p.mul_(1 - lr * weight_decay)
                else:
                    g = g.add(p, alpha=weight_decay)
            exp_avg, exp_avg_sq = s["exp_avg"], s["exp_avg_sq"]
            exp_avg.add_(g - exp_avg, alpha=1 - beta1)                # lerp towards g
            exp_avg_sq.mul_(beta2).add_(g * g, alpha=1 - beta2)
            step = s["step"].add_(1).to(float64)                      # Note [Step counts in tensors]
            step_size = (lr / (1 - beta1 ** step)).to(p.dtype)
            bias_correction2_sqrt = (1 - beta2 ** step).sqrt().to(p.dtype)
            if amsgrad:
                s["max_exp_avg_sq"].copy_(maximum(s["max_exp_avg_sq"], exp_avg_sq))
                second = s["max_exp_avg_sq"]
            else:
                second = exp_avg_sq
            denom = second.sqrt() / bias_correction2_sqrt + eps
            p.sub_(exp_avg / denom * step_size)

    def _load(self, state_dict):
        super()._load(state_dict)
        for s in self.state.values():          # a loaded count (a number here, any tensor from torch) as a tensor
            if "step" in s:
                s["step"] = tensor(float(s["step"]), dtype=float32)


class AdamW(Adam):
    """Adam with decoupled weight decay: p = p * (1 - lr * weight_decay) before the Adam step (default 0.01)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
