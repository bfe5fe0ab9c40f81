"""nn.utils: gradient clipping and flattening parameters to one vector."""
import math

from .. import Tensor, no_grad, tensor, cat, stack


def _params_with_grad(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale all gradients together so that their joint norm is at most max_norm; returns the norm before."""
    params = _params_with_grad(parameters)
    if not params:
        return tensor(0.0)
    norm_type = float(norm_type)
    with no_grad():
        grads = [p.grad for p in params]
        if norm_type == math.inf:
            total = stack([g.abs().max().to(grads[0].dtype) for g in grads]).max()
        else:
            total = stack([(g.abs() ** norm_type).sum().to(grads[0].dtype) for g in grads]).sum() ** (1.0 / norm_type)
        total_value = float(total)
        if error_if_nonfinite and not math.isfinite(total_value):
            raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
                               f"{total_value}; set error_if_nonfinite=False to clip anyway")
        clip_coef = max_norm / (total_value + 1e-6)
        if clip_coef < 1.0:
            for g in grads:
                g.mul_(clip_coef)
    return total


def clip_grad_value_(parameters, clip_value):
    with no_grad():
        for p in _params_with_grad(parameters):
            p.grad.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters):
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    offset = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[offset:offset + n].reshape(tuple(p.shape)))
            offset += n
