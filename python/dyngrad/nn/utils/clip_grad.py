"""Gradient clipping, as torch.nn.utils.clip_grad: the total norm is the norm of the per-tensor norms, and the
gradients are always multiplied by min(max_norm / (total + 1e-6), 1) (so a non-finite total spreads, as in torch,
unless error_if_nonfinite=True)."""
import math
import types

from ... import Tensor, no_grad, tensor, stack
from ... import float32 as _float32, float64 as _float64
from ..._user_frame import warn


def _vector_norm(t, norm_type):
    """torch.linalg.vector_norm(t, norm_type) of a whole tensor."""
    if norm_type == 2 and t.dtype in (_float32, _float64):
        flat = t.reshape(-1)
        return flat.dot(flat).sqrt()   # |x|^2 summed as one dot product: one pass, no temporary
    if norm_type == 2 and not t.is_complex():
        return (t * t).sum().sqrt()
    a = t.abs()
    if norm_type == math.inf:
        return a.amax() if a.numel() else tensor(0.0, dtype=t.dtype)
    if norm_type == -math.inf:
        return a.amin()
    if norm_type == 0:
        return (a != 0).sum().to(t.dtype)
    if norm_type == 1:
        return a.sum()
    if norm_type == 2:
        return (a * a).sum().sqrt()
    return (a ** norm_type).sum() ** (1.0 / norm_type)


def _tensors(parameters):
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms of `tensors` (foreach is accepted; dyngrad has one code path)."""
    tensors = _tensors(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    with no_grad():
        norms = [_vector_norm(t, norm_type) for t in tensors]
        total = _vector_norm(stack([n.to(norms[0].dtype) for n in norms]), norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it "
                           "cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                           "anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales the gradients by min(max_norm / (total_norm + 1e-6), 1)."""
    grads = [p.grad for p in _tensors(parameters) if p.grad is not None]
    if not grads:
        return
    with no_grad():
        coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales all gradients together so that their joint norm is at most max_norm; returns the norm before."""
    is_generator = isinstance(parameters, types.GeneratorType)
    parameters = _tensors(parameters)
    if is_generator and not parameters:
        warn("`parameters` is an empty generator, no gradient clipping will occur.")
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient to [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _tensors(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)
