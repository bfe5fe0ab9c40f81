"""nn.functional: the engine's neural-net ops (all primitives or C++/numpy composites of the engine root)."""
from .. import (  # noqa: F401  re-exported: both engines provide these at their root
    softmax, log_softmax, cross_entropy, nll_loss, mse_loss, binary_cross_entropy_with_logits, linear, embedding,
    dropout, one_hot, conv2d, max_pool2d, avg_pool2d, layer_norm, relu, leaky_relu, gelu, softplus, sigmoid, tanh,
)
from .. import where, clamp, abs as _abs


def l1_loss(input, target, reduction="mean"):
    diff = _abs(input - target)
    return _reduce(diff, reduction, "l1_loss")


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    diff = _abs(input - target)
    loss = where(diff < beta, 0.5 * diff * diff / beta, diff - 0.5 * beta) if beta > 0 else diff
    return _reduce(loss, reduction, "smooth_l1_loss")


def relu6(input):
    return clamp(input, 0.0, 6.0)


def silu(input):
    return input * sigmoid(input)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """input / max(||input||_p over dim, eps), as torch.nn.functional.normalize."""
    norm = (_abs(input) ** p).sum(dim=dim, keepdim=True) ** (1.0 / p)
    return input / clamp(norm, min=eps)


def _reduce(loss, reduction, op):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got '{reduction}'.")
