"""Normalisation with torch.nn.functional's signatures: batch_norm, instance_norm, group_norm, layer_norm,
rms_norm, local_response_norm and normalize, composites of the core's mean/var/rsqrt.

The running statistics of batch_norm and instance_norm are buffers: they are updated in place, outside autograd,
with the batch mean and the unbiased batch variance (torch's convention), while the output is normalised with the
biased variance.
"""
import builtins

import numpy as np

from ... import _C
from ...autograd.grad_mode import no_grad
from ..dtype_info import finfo
from ..args import (number, optional_tensor, refuse_complex, shape_arg, shape_str, tensor_arg, to_int, torch_name,
                    wrap_dim)
from ..node_names import shows_as
from ..out import write_out
from .distance import vector_norm
from .linalg import vector_norm as linalg_vector_norm


def _k(value, like):
    return _C.scalar_operand(value, like)


def _check_batch_values(size, op):
    """More than one value per channel: size[0] * size[2] * ... > 1 (torch's _verify_batch_size)."""
    count = size[0] if size else 1
    for s in size[2:]:
        count *= s
    if count == 1:
        raise ValueError(f"{op}: expected more than 1 value per channel when training, got input size "
                         f"{shape_str(size)}.")


def _check_channels(t, c, op, name):
    if t is not None and t.numel() != c:
        raise RuntimeError(f"{op}: {name} should contain {c} elements (one per channel), not {t.numel()}.")


def _channel_view(t, ndim):
    """A per-channel (C,) tensor shaped (1, C, 1, ...) to broadcast over (N, C, ...) input."""
    return _C.reshape(t, (1, -1) + (1,) * (ndim - 2))


def _affine(y, weight, bias, ndim):
    if weight is not None:
        y = _C.mul(y, _channel_view(weight, ndim))
    if bias is not None:
        y = _C.add(y, _channel_view(bias, ndim))
    return y


def _update_running(running, value, momentum):
    """running <- (1 - momentum) * running + momentum * value, in place and unrecorded."""
    with no_grad():
        v = _C.reshape(value.detach(), tuple(running.shape))
        v = _C.to_dtype(v, running.dtype) if v.dtype is not running.dtype else v
        _C.copy_(running, _C.add(_C.mul(running, _k(1.0 - momentum, running)), _C.mul(v, _k(momentum, v))))


def _momentum(momentum, op):
    if momentum is None:
        raise TypeError(f"{op}: momentum must be a float, got None (nn.BatchNorm's momentum=None, a cumulative "
                        "average, is computed by the module, which passes 1 / num_batches_tracked).")
    return float(number(momentum, op, "momentum"))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias per channel (dim 1), over the batch and spatial dims; training
    uses the batch statistics and updates the running ones, eval uses the running ones."""
    op = "batch_norm"
    x = tensor_arg(input, op)
    rm = optional_tensor(running_mean, op, "running_mean")
    rv = optional_tensor(running_var, op, "running_var")
    w = optional_tensor(weight, op, "weight")
    refuse_complex(op, x, rm, rv, w)
    b = optional_tensor(bias, op, "bias")
    eps = float(number(eps, op, "eps"))
    momentum = _momentum(momentum, op)
    if training:
        _check_batch_values(tuple(x.shape), op)
    if training and eps <= 0:
        raise ValueError(f"{op}: eps must be positive during training, got {eps}.")
    if eps < 0:
        raise ValueError(f"{op}: eps must be non-negative, got {eps}.")
    c = x.shape[1] if x.ndim > 1 else 0
    for t, name in ((w, "weight"), (b, "bias"), (rm, "running_mean"), (rv, "running_var")):
        _check_channels(t, c, op, name)
    if not training and (rm is None or rv is None):
        raise RuntimeError(f"{op}: running_mean and running_var must be given in evaluation mode (training=False).")
    if x.ndim < 2 and x.numel() == 0:
        return _C.clone(x)              # torch normalises an empty 1-D input to an empty result
    if x.ndim < 2:
        raise RuntimeError(f"{op}: expected input of shape (N, C, ...), got {shape_str(x.shape)}.")
    dims = (0,) + tuple(range(2, x.ndim))
    if training:
        mean = _C.mean(x, dims, True)
        var = _C.var(x, dims, 0.0, True)
        if rm is not None or rv is not None:
            count = x.numel() // max(c, 1)
            if rm is not None:
                _update_running(rm, mean, momentum)
            if rv is not None:
                _update_running(rv, _C.mul(var, _k(count / max(count - 1, 1), var)), momentum)
    else:
        mean, var = _channel_view(rm, x.ndim), _channel_view(rv, x.ndim)
    y = _C.mul(_C.sub(x, mean), _C.rsqrt(_C.add(var, _k(eps, var))))
    return _affine(y, w, b, x.ndim)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalises each channel of each sample over its spatial dims; with running statistics given, they are
    updated with the batch averages of the per-instance statistics (or used instead, use_input_stats=False)."""
    op = "instance_norm"
    x = tensor_arg(input, op)
    rm = optional_tensor(running_mean, op, "running_mean")
    rv = optional_tensor(running_var, op, "running_var")
    w = optional_tensor(weight, op, "weight")
    b = optional_tensor(bias, op, "bias")
    eps = float(number(eps, op, "eps"))
    momentum = _momentum(momentum, op)
    if use_input_stats:
        spatial = 1
        for s in x.shape[2:]:
            spatial *= s
        if spatial == 1:
            raise ValueError(f"{op}: expected more than 1 spatial element when training, got input size "
                             f"{shape_str(x.shape)}.")
    elif rm is None or rv is None:
        raise RuntimeError(f"{op}: running_mean and running_var must be given when use_input_stats is False.")
    if x.ndim < 2:
        raise RuntimeError(f"{op}: expected input of shape (N, C, ...), got {shape_str(x.shape)}.")
    c = x.shape[1]
    for t, name in ((w, "weight"), (b, "bias"), (rm, "running_mean"), (rv, "running_var")):
        _check_channels(t, c, op, name)
    dims = tuple(range(2, x.ndim))
    if use_input_stats:
        mean = _C.mean(x, dims, True)
        var = _C.var(x, dims, 0.0, True)
        count = x.numel() // max(x.shape[0] * c, 1)
        if rm is not None:
            _update_running(rm, _C.mean(mean, (0,), False), momentum)
        if rv is not None:
            unbiased = _C.mul(var, _k(count / max(count - 1, 1), var))
            _update_running(rv, _C.mean(unbiased, (0,), False), momentum)
    else:
        mean, var = _channel_view(rm, x.ndim), _channel_view(rv, x.ndim)
    y = _C.mul(_C.sub(x, mean), _C.rsqrt(_C.add(var, _k(eps, var))))
    return _affine(y, w, b, x.ndim)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalises each group of C / num_groups channels of each sample (over those channels and the spatial dims),
    then applies the per-channel weight and bias."""
    op = "group_norm"
    x = tensor_arg(input, op)
    g = to_int(num_groups, op, "num_groups")
    w = optional_tensor(weight, op, "weight")
    b = optional_tensor(bias, op, "bias")
    eps = float(number(eps, op, "eps"))
    if x.ndim < 2:
        raise RuntimeError(f"{op}: expected at least 2 dimensions for input tensor but received {x.ndim}.")
    if g <= 0:
        raise RuntimeError(f"{op}: num_groups must be positive, got {g}.")
    n, c = x.shape[0], x.shape[1]
    _check_batch_values((n * c // g, g) + tuple(x.shape[2:]), op)
    if c % g:
        raise RuntimeError(f"{op}: the number of channels ({c}, dim 1 of input shape {shape_str(x.shape)}) must be "
                           f"divisible by num_groups={g}.")
    for t, name in ((w, "weight"), (b, "bias")):
        if t is not None and (t.ndim != 1 or t.shape[0] != c):
            raise RuntimeError(f"{op}: {name} must be a vector of {c} elements (one per channel), got shape "
                               f"{shape_str(t.shape)}.")
    groups = _C.reshape(x, (n, g, x.numel() // max(n * g, 1)))     # explicit: -1 is ambiguous when n is 0
    mean = _C.mean(groups, (2,), True)
    var = _C.var(groups, (2,), 0.0, True)
    y = _C.reshape(_C.mul(_C.sub(groups, mean), _C.rsqrt(_C.add(var, _k(eps, var)))), tuple(x.shape))
    return _affine(y, w, b, x.ndim)


def _normalized_dims(x, normalized_shape, op):
    ns = shape_arg(normalized_shape, op, "normalized_shape")
    k = len(ns)
    # () would make the dims empty, which the core's mean reads as "all dims": torch refuses it
    if k < 1:
        raise RuntimeError(f"{op}: normalized_shape must have at least one dim, got ().")
    if k > x.ndim or tuple(x.shape[x.ndim - k:]) != ns:
        raise RuntimeError(f"{op}: normalized_shape {shape_str(ns)} does not match the last dims of the input "
                           f"shape {shape_str(x.shape)}.")
    return ns, tuple(range(x.ndim - k, x.ndim))


def _check_affine_shape(t, ns, op, name):
    if t is not None and tuple(t.shape) != ns:
        raise RuntimeError(f"{op}: expected {name} to have the shape of normalized_shape {shape_str(ns)}, got "
                           f"{shape_str(t.shape)}.")


# the C++ engine's fused case of layer_norm in one call (Note [Fast paths of the gpt step], csrc/bindings/fast_paths.cpp);
# read once here, so that a recorder that swaps _C's functions does not see it (it returns None while one records)
_LAYER_NORM_FAST = getattr(_C, "_layer_norm_fast", None)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over the last len(normalized_shape) dims, then * weight + bias."""
    if _LAYER_NORM_FAST is not None:
        out = _LAYER_NORM_FAST(input, normalized_shape, weight, bias, eps)
        if out is not None:
            return out
    return _layer_norm(input, normalized_shape, weight, bias, eps)


@shows_as("NativeLayerNorm")
def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    x = tensor_arg(input, "layer_norm")
    w = optional_tensor(weight, "layer_norm", "weight")
    b = optional_tensor(bias, "layer_norm", "bias")
    refuse_complex("layer_norm", x, w, b)
    ns, dims = _normalized_dims(x, normalized_shape, "layer_norm")
    _check_affine_shape(w, ns, "layer_norm", "weight")
    _check_affine_shape(b, ns, "layer_norm", "bias")
    eps = float(number(eps, "layer_norm", "eps"))
    if x.dtype.is_floating_point and all(t is None or t.dtype == x.dtype for t in (w, b)):
        return _C.layer_norm(x, w, b, len(dims), eps)   # Note [Fused layer_norm]: one node
    mu = _C.mean(x, dims, True)                          # mixed dtypes: composed, promoting as the ops do
    centered = _C.sub(x, mu)
    v = _C.mean(_C.mul(centered, centered), dims, True)
    y = _C.mul(centered, _C.rsqrt(_C.add(v, _k(eps, v))))
    if w is not None:
        y = _C.mul(y, w)
    if b is not None:
        y = _C.add(y, b)
    return y


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the last len(normalized_shape) dims, times weight; eps=None is the machine
    epsilon of input's dtype."""
    x = tensor_arg(input, "rms_norm")
    w = optional_tensor(weight, "rms_norm", "weight")
    ns, dims = _normalized_dims(x, normalized_shape, "rms_norm")
    _check_affine_shape(w, ns, "rms_norm", "weight")
    if eps is None:
        eps = float(finfo(x.dtype if x.dtype.is_floating_point else _C.float32).eps)
    half = x.dtype in (_C.float16, _C.bfloat16)
    xs = _C.to_dtype(x, _C.float32) if half else x       # a half type squares in float32 (300^2 overflows float16)
    ms = _C.mean(_C.mul(xs, xs), dims, True)
    y = _C.mul(xs, _C.rsqrt(_C.add(ms, _k(float(number(eps, "rms_norm", "eps")), ms))))
    if half:
        y = _C.to_dtype(y, x.dtype)
    return _C.mul(y, w) if w is not None else y


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha * mean of x^2 over `size` neighbouring channels, zero-padded)^beta."""
    x = tensor_arg(input, "local_response_norm")
    refuse_complex("local_response_norm", x)
    size = to_int(size, "local_response_norm", "size")
    if x.ndim < 3:
        raise ValueError(f"local_response_norm: expected 3-D or higher input, got {x.ndim} dimensions.")
    if x.numel() == 0:
        return x
    c = x.shape[1]
    sq = _C.mul(x, x)
    before, after = size // 2, (size - 1) // 2
    pieces = []
    if before:
        pieces.append(_C.full((x.shape[0], before) + tuple(x.shape[2:]), 0.0, sq.dtype))
    pieces.append(sq)
    if after:
        pieces.append(_C.full((x.shape[0], after) + tuple(x.shape[2:]), 0.0, sq.dtype))
    padded = _C.cat(pieces, 1) if len(pieces) > 1 else sq
    total = None
    for j in range(size):              # the window sum, one shifted slice per offset
        window = _C.slice(padded, 1, j, j + c, 1)
        total = window if total is None else _C.add(total, window)
    div = _C.add(_C.mul(total, _k(float(alpha) / size, total)), _k(float(k), total))
    return _C.div(x, _C.pow_scalar(div, float(beta)))


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p over dim, eps)."""
    a = tensor_arg(input, "normalize")
    p = float(number(p, "normalize", "p"))
    d = to_int(dim, "normalize", "dim")
    norm = vector_norm(a, p, (d,), True)
    result = _C.div(a, _C.clamp(norm, float(number(eps, "normalize", "eps")), None))
    if out is None:
        return result
    return write_out(result, out, "normalize")


# ----- torch.NAME forms: ATen's argument orders ------------------------------------------------------------------

@torch_name("batch_norm")
def batch_norm_fn(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    return batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


@torch_name("instance_norm")
def instance_norm_fn(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                     cudnn_enabled):
    return instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


@torch_name("group_norm")
def group_norm_fn(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    return group_norm(input, num_groups, weight, bias, eps)


@torch_name("layer_norm")
def layer_norm_fn(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return layer_norm(input, normalized_shape, weight, bias, eps)


def renorm(input, p, dim, maxnorm):
    """Each slice of input along dim whose p-norm (over the slice) exceeds maxnorm is scaled to norm maxnorm:
    factor = maxnorm / (norm + 1e-7) where norm > maxnorm, else 1 (torch's epsilon)."""
    a = tensor_arg(input, "renorm")
    p, maxnorm = float(number(p, "renorm", "p")), float(number(maxnorm, "renorm", "maxnorm"))
    if p <= 0:
        raise RuntimeError(f"renorm: p must be positive (non-positive norms are not supported), got {p:g}.")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0, got {maxnorm:g}.")
    if a.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {a.ndim}.")
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        raise RuntimeError(f"renorm: expected a floating-point or complex tensor, got {a.dtype.name}.")
    d = wrap_dim(to_int(dim, "renorm", "dim"), a.ndim, "renorm")
    others = tuple(i for i in builtins.range(a.ndim) if i != d)
    norms = linalg_vector_norm(a, p, others, True)
    limit = _C.scalar_operand(maxnorm, norms)
    scale = _C.div(limit, _C.add(norms, _C.scalar_operand(1e-7, norms)))
    factor = _C.where(_C.compare("gt", norms, limit), scale, _C.scalar_operand(1.0, norms))
    return _C.mul(a, factor)
