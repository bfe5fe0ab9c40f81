"""Neural-net ops with torch.nn.functional's signatures: activations, softmax, losses, linear, embedding, dropout,
convolution, pooling, layer_norm. Composites are written here once, over the core's primitives."""
import math

import numpy as np

from .. import _C
from .args import (Tensor, number, operand_or_throw, optional_dtype, optional_tensor, pair, reduce_loss,
                   reduction_code, shape_arg, shape_str, tensor_arg, to_int)


# ----- activations -----------------------------------------------------------------------------------------------

def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _inplace_result(input, _C.leaky_relu(tensor_arg(input, "leaky_relu"), float(negative_slope)), inplace,
                           "leaky_relu")


def gelu(input, approximate="none"):
    """x * Phi(x); approximate='tanh' uses 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    a = tensor_arg(input, "gelu")
    if approximate == "none":
        return _C.gelu(a)
    if approximate != "tanh":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got '{approximate}'.")
    cube = _C.mul(_C.pow_scalar(a, 3.0), _C.scalar_operand(0.044715, a))
    inner = _C.mul(_C.add(a, cube), _C.scalar_operand(math.sqrt(2.0 / math.pi), a))
    half = _C.mul(a, _C.scalar_operand(0.5, a))
    return _C.mul(half, _C.add(_C.tanh(inner), _C.scalar_operand(1.0, a)))


def softplus(input, beta=1.0, threshold=20.0):
    return _C.softplus(tensor_arg(input, "softplus"), float(beta), float(threshold))


def relu(input, inplace=False):
    return _inplace_result(input, _C.relu(tensor_arg(input, "relu")), inplace, "relu")


def relu6(input, inplace=False):
    return _inplace_result(input, _C.clamp(tensor_arg(input, "relu6"), 0.0, 6.0), inplace, "relu6")


def silu(input, inplace=False):
    a = tensor_arg(input, "silu")
    return _inplace_result(input, _C.mul(a, _C.sigmoid(a)), inplace, "silu")


def _inplace_result(input, result, inplace, op):
    """The activations' inplace=True: write the result into input (recorded as torch records in-place ops)."""
    if not inplace:
        return result
    _C.assign_inplace(input, result, op + "_")
    return input


# ----- softmax ---------------------------------------------------------------------------------------------------

def _softmax_dim(dim, a, op):
    if dim is None:                      # torch's legacy implicit dim
        return 0 if a.ndim in (0, 1, 3) else 1
    return to_int(dim, op, "dim")


def softmax(input, dim=None, dtype=None):
    a = tensor_arg(input, "softmax")
    dt = optional_dtype(dtype, "softmax")
    return _C.softmax(_C.to_dtype(a, dt) if dt is not None else a, _softmax_dim(dim, a, "softmax"))


def log_softmax(input, dim=None, dtype=None):
    a = tensor_arg(input, "log_softmax")
    dt = optional_dtype(dtype, "log_softmax")
    return _C.log_softmax(_C.to_dtype(a, dt) if dt is not None else a, _softmax_dim(dim, a, "log_softmax"))


# ----- losses ----------------------------------------------------------------------------------------------------

def _check_legacy(size_average, reduce, op):
    if size_average is not None or reduce is not None:
        raise NotImplementedError(f"{op}: size_average and reduce are deprecated in torch and not supported; use "
                                  "reduction='none' | 'mean' | 'sum'.")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Softmax cross entropy of logits (N, C) or (N, C, d1, ...) against class indices or class probabilities."""
    x = tensor_arg(input, "cross_entropy")
    y = tensor_arg(target, "cross_entropy", "target")
    w = optional_tensor(weight, "cross_entropy", "weight")
    _check_legacy(size_average, reduce, "cross_entropy")
    label_smoothing = float(label_smoothing)
    if not 0 <= label_smoothing <= 1:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}.")
    code = reduction_code(reduction, "cross_entropy")
    class_dim = 1 if x.ndim > 1 else 0
    if y.dtype.is_floating_point:
        # class probabilities as target: -(w * target' * log_softmax).sum(class_dim), target' smoothed
        if y.shape != x.shape:
            raise RuntimeError(f"cross_entropy: class probabilities as target must have the input's shape "
                               f"{shape_str(x.shape)}, got {shape_str(y.shape)}.")
        logp = _C.log_softmax(x, class_dim)
        if label_smoothing:
            c = x.shape[class_dim]
            y = _C.add(_C.mul(y, _C.scalar_operand(1 - label_smoothing, y)),
                       _C.scalar_operand(label_smoothing / c, y))
        terms = _C.mul(y, logp)
        if w is not None:
            shape = [1] * x.ndim
            shape[class_dim] = w.shape[0]
            terms = _C.mul(terms, _C.reshape(w, tuple(shape)))
        return reduce_loss(_C.neg(_C.sum(terms, (class_dim,), False)), code)
    if w is not None:
        return _weighted_cross_entropy(x, y, w, ignore_index, code, label_smoothing)
    if x.ndim > 2 and y.ndim == x.ndim - 1:
        # (N, C, d1, ...) logits with (N, d1, ...) targets: classes moved last, one row per position
        c = x.shape[1]
        rows = _C.reshape(_C.permute(x, (0,) + tuple(range(2, x.ndim)) + (1,)), (-1, c))
        losses = _C.cross_entropy(rows, _C.reshape(y, (-1,)), code, to_int(ignore_index, "cross_entropy",
                                                                              "ignore_index"), label_smoothing)
        return _C.reshape(losses, tuple(y.shape)) if code == 0 else losses
    return _C.cross_entropy(x, y, code, to_int(ignore_index, "cross_entropy", "ignore_index"), label_smoothing)


def _weighted_cross_entropy(x, y, w, ignore_index, code, label_smoothing):
    """torch's class-weighted cross entropy: (1 - eps) * weighted nll + eps * the weighted uniform term, the mean
    taken over the weights of the targets."""
    logp = _C.log_softmax(x, 1 if x.ndim > 1 else 0)
    nll = nll_loss(logp, y, w, ignore_index=ignore_index, reduction="none")
    if not label_smoothing:
        return _reduce_weighted(nll, y, w, ignore_index, code)
    c = x.shape[1 if x.ndim > 1 else 0]
    shape = [1] * x.ndim
    shape[1 if x.ndim > 1 else 0] = c
    smooth = _C.neg(_C.sum(_C.mul(logp, _C.reshape(w, tuple(shape))), (1 if x.ndim > 1 else 0,), False))
    keep = _C.to_dtype(_C.compare("ne", y, _C.scalar_operand(ignore_index, y)), x.dtype)
    smooth = _C.mul(smooth, keep)
    losses = _C.add(_C.mul(nll, _C.scalar_operand(1 - label_smoothing, nll)),
                    _C.mul(smooth, _C.scalar_operand(label_smoothing / c, smooth)))
    return _reduce_weighted(losses, y, w, ignore_index, code)


def _reduce_weighted(losses, y, w, ignore_index, code):
    if code != 1:
        return reduce_loss(losses, code)
    keep = _C.compare("ne", y, _C.scalar_operand(ignore_index, y))
    safe = _C.where(keep, y, _C.scalar_operand(0, y))
    weights = _C.mul(_C.index_select(w, 0, _C.reshape(safe, (-1,))), _C.to_dtype(_C.reshape(keep, (-1,)), w.dtype))
    return _C.div(_C.sum(losses, (), False), _C.sum(weights, (), False))


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-input[n, target[n]] (times weight[target[n]]), for log-probabilities (N, C) or (N, C, d1, ...)."""
    x = tensor_arg(input, "nll_loss")
    y = tensor_arg(target, "nll_loss", "target")
    w = optional_tensor(weight, "nll_loss", "weight")
    _check_legacy(size_average, reduce, "nll_loss")
    code = reduction_code(reduction, "nll_loss")
    ignore_index = to_int(ignore_index, "nll_loss", "ignore_index")
    if y.dtype is not _C.int64:
        raise RuntimeError(f"nll_loss: expected int64 class indices as target, got {y.dtype.name}.")
    if x.ndim > 2 and y.ndim == x.ndim - 1:
        c = x.shape[1]
        rows = _C.reshape(_C.permute(x, (0,) + tuple(range(2, x.ndim)) + (1,)), (-1, c))
        losses = nll_loss(rows, _C.reshape(y, (-1,)), w, ignore_index=ignore_index, reduction="none")
        if code == 0:
            return _C.reshape(losses, tuple(y.shape))
        return _reduce_weighted(losses, y, w, ignore_index, code) if w is not None else (
            _mean_kept(losses, y, ignore_index) if code == 1 else reduce_loss(losses, code))
    if not (x.ndim == 2 and y.ndim == 1 and y.shape[0] == x.shape[0]) and not (x.ndim == 1 and y.ndim == 0):
        raise RuntimeError(f"nll_loss: expected input (N, C) and target (N,), got {shape_str(x.shape)} and "
                           f"{shape_str(y.shape)}.")
    if w is not None and (w.ndim != 1 or w.shape[0] != x.shape[-1]):
        raise RuntimeError(f"nll_loss: weight must be a 1-D tensor of {x.shape[-1]} class weights, got shape "
                           f"{shape_str(w.shape)}.")
    rows, t = (x, y) if x.ndim == 2 else (_C.unsqueeze(x, 0), _C.unsqueeze(y, 0))
    keep = _C.compare("ne", t, _C.scalar_operand(ignore_index, t))
    safe = _C.where(keep, t, _C.scalar_operand(0, t))
    picked = _C.squeeze(_C.gather(rows, 1, _C.unsqueeze(safe, 1)), (1,))
    factor = _C.to_dtype(keep, x.dtype)
    if w is not None:
        factor = _C.mul(factor, _C.index_select(w.detach(), 0, safe))
    losses = _C.neg(_C.mul(picked, factor))
    if x.ndim == 1:
        losses = _C.squeeze(losses, (0,))
    if code == 1:
        return _C.div(_C.sum(losses, (), False), _C.sum(factor, (), False))
    return reduce_loss(losses, code)


def _mean_kept(losses, y, ignore_index):
    keep = _C.to_dtype(_C.compare("ne", y, _C.scalar_operand(ignore_index, y)), losses.dtype)
    return _C.div(_C.sum(losses, (), False), _C.sum(keep, (), False))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _check_legacy(size_average, reduce, "mse_loss")
    d = _C.sub(tensor_arg(input, "mse_loss"), tensor_arg(target, "mse_loss", "target"))
    return reduce_loss(_C.mul(d, d), reduction_code(reduction, "mse_loss"))


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _check_legacy(size_average, reduce, "l1_loss")
    d = _C.sub(tensor_arg(input, "l1_loss"), tensor_arg(target, "l1_loss", "target"))
    return reduce_loss(_C.abs(d), reduction_code(reduction, "l1_loss"))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta."""
    _check_legacy(size_average, reduce, "smooth_l1_loss")
    code = reduction_code(reduction, "smooth_l1_loss")
    d = _C.abs(_C.sub(tensor_arg(input, "smooth_l1_loss"), tensor_arg(target, "smooth_l1_loss", "target")))
    beta = float(beta)
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss: beta must be non-negative, got {beta}.")
    if beta == 0:
        return reduce_loss(d, code)
    quadratic = _C.mul(_C.mul(d, d), _C.scalar_operand(0.5 / beta, d))
    linear_part = _C.sub(d, _C.scalar_operand(0.5 * beta, d))
    return reduce_loss(_C.where(_C.compare("lt", d, _C.scalar_operand(beta, d)), quadratic, linear_part), code)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """Sigmoid + binary cross entropy in one stable expression; pos_weight weighs the positive term per class."""
    x = tensor_arg(input, "binary_cross_entropy_with_logits")
    y = tensor_arg(target, "binary_cross_entropy_with_logits", "target")
    pw = optional_tensor(pos_weight, "binary_cross_entropy_with_logits", "pos_weight")
    _check_legacy(size_average, reduce, "binary_cross_entropy_with_logits")
    code = reduction_code(reduction, "binary_cross_entropy_with_logits")
    if x.shape != y.shape:      # torch does not broadcast here
        raise ValueError(f"binary_cross_entropy_with_logits: target size {shape_str(y.shape)} must be the same as "
                         f"input size {shape_str(x.shape)}.")
    # loss = (1 - y) x + (1 + (pw - 1) y) log(1 + exp(-x)), with softplus keeping exp from overflowing
    sp = _C.softplus(_C.neg(x), 1.0, 20.0)
    if pw is not None:
        sp = _C.mul(_C.add(_C.mul(_C.sub(pw, _C.scalar_operand(1, pw)), y), _C.scalar_operand(1, pw)), sp)
    losses = _C.add(_C.sub(x, _C.mul(x, y)), sp)
    if weight is not None:
        losses = _C.mul(losses, operand_or_throw(weight, x, "binary_cross_entropy_with_logits", "weight"))
    return reduce_loss(losses, code)


# ----- layers as functions ---------------------------------------------------------------------------------------

def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    x = tensor_arg(input, "linear")
    w = tensor_arg(weight, "linear", "weight")
    b = optional_tensor(bias, "linear", "bias")
    if w.ndim not in (1, 2):
        raise RuntimeError(f"linear: weight must be 1-D or 2-D, got shape {shape_str(w.shape)}.")
    out = _C.matmul(x, _C.mT(w) if w.ndim == 2 else w)
    return _C.add(out, b) if b is not None else out


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """weight[input]: rows of weight for int64 indices of any shape; the padding row gets no gradient."""
    idx = tensor_arg(input, "embedding")
    w = tensor_arg(weight, "embedding", "weight")
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not supported yet.")
    if w.ndim != 2:
        raise RuntimeError(f"embedding: weight must be 2-D (num_embeddings, dim), got {shape_str(w.shape)}.")
    if idx.dtype is not _C.int64:
        raise IndexError(f"embedding: indices must be int64, got {idx.dtype.name}.")
    values = idx._numpy_view()
    bad = values[(values < 0) | (values >= w.shape[0])]
    if bad.size:
        raise IndexError(f"embedding: index {int(bad.reshape(-1)[0])} is out of range for dimension 0 of size "
                         f"{w.shape[0]}.")
    rows = _C.index_select(w, 0, _C.reshape(idx, (idx.numel(),)))
    if padding_idx is not None:          # the padding row gets no gradient
        p = to_int(padding_idx, "embedding", "padding_idx")
        if not -w.shape[0] <= p < w.shape[0]:
            raise AssertionError(f"embedding: padding_idx {p} must be within num_embeddings ({w.shape[0]}).")
        p = p % w.shape[0]
        keep = _C.compare("ne", _C.reshape(idx, (idx.numel(), 1)), _C.scalar_operand(p, idx))
        rows = _C.where(keep, rows, rows.detach())
    return _C.reshape(rows, tuple(idx.shape) + (w.shape[1],))


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes each element with probability p and scales the rest by 1 / (1 - p) (identity when not training)."""
    a = tensor_arg(input, "dropout")
    p = float(number(p, "dropout", "p"))
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: probability must be in [0, 1], got {p}.")
    if not training or p == 0:
        return a
    if p == 1:
        result = _C.mul(a, _C.scalar_operand(0.0, a))
    else:
        keep = _C.bernoulli_mask(tuple(a.shape), 1 - p, a.dtype if a.dtype.is_floating_point else _C.float32)
        result = _C.mul(a, _C.mul(keep, _C.scalar_operand(1.0 / (1 - p), keep)))
    return _inplace_result(a, result, inplace, "dropout")


def one_hot(tensor, num_classes=-1):
    """int64 (..., num_classes) with a 1 at each index (num_classes=-1: one more than the largest index)."""
    t = tensor_arg(tensor, "one_hot", "tensor")
    if t.dtype is not _C.int64:
        raise RuntimeError(f"one_hot: expected an int64 tensor of class indices, got {t.dtype.name}.")
    idx = t._numpy_view()
    n = to_int(num_classes, "one_hot", "num_classes")
    if n < 0:
        if idx.size == 0:
            raise RuntimeError("one_hot: cannot infer num_classes from an empty tensor.")
        n = int(idx.max()) + 1
    bad = idx[(idx < 0) | (idx >= n)]
    if bad.size:
        raise RuntimeError(f"one_hot: class index {int(bad.reshape(-1)[0])} is out of range for {n} classes.")
    return _C.copy_from_numpy((idx[..., None] == np.arange(n)).astype(np.int64), False)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    x = tensor_arg(input, "conv2d")
    w = tensor_arg(weight, "conv2d", "weight")
    b = optional_tensor(bias, "conv2d", "bias")
    sh, sw = pair(stride, "conv2d", "stride")
    ph, pw = pair(padding, "conv2d", "padding")
    dh, dw = pair(dilation, "conv2d", "dilation")
    if dh != 1 or dw != 1 or to_int(groups, "conv2d", "groups") != 1:
        raise NotImplementedError("conv2d: dilation and groups other than 1 are not supported yet.")
    return _C.conv2d(x, w, b, sh, sw, ph, pw)


def _pool(is_max):
    op = "max_pool2d" if is_max else "avg_pool2d"

    def pool(input, kernel_size, stride=None, padding=0):
        x = tensor_arg(input, op)
        kh, kw = pair(kernel_size, op, "kernel_size")
        sh, sw = (kh, kw) if stride is None else pair(stride, op, "stride")
        ph, pw = pair(padding, op, "padding")
        return (_C.max_pool2d if is_max else _C.avg_pool2d)(x, kh, kw, sh, sw, ph, pw)
    pool.__name__ = pool.__qualname__ = op
    pool.__doc__ = f"{'Max' if is_max else 'Average'} over kernel_size windows of (N, C, H, W) input."
    return pool


max_pool2d, avg_pool2d = _pool(True), _pool(False)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over the last len(normalized_shape) dims, then * weight + bias."""
    x = tensor_arg(input, "layer_norm")
    w = optional_tensor(weight, "layer_norm", "weight")
    b = optional_tensor(bias, "layer_norm", "bias")
    ns = shape_arg(normalized_shape, "layer_norm", "normalized_shape")
    k = len(ns)
    # () would make `dims` empty, which the core's mean reads as "all dims": torch refuses it
    if k < 1:
        raise RuntimeError("layer_norm: normalized_shape must have at least one dim, got ().")
    if k > x.ndim or tuple(x.shape[x.ndim - k:]) != ns:
        raise RuntimeError(f"layer_norm: normalized_shape {shape_str(ns)} does not match the last dims of the input "
                           f"shape {shape_str(x.shape)}.")
    dims = tuple(range(x.ndim - k, x.ndim))
    mu = _C.mean(x, dims, True)
    centered = _C.sub(x, mu)
    v = _C.mean(_C.mul(centered, centered), dims, True)
    y = _C.mul(centered, _C.rsqrt(_C.add(v, _C.scalar_operand(float(eps), v))))
    if w is not None:
        y = _C.mul(y, w)
    if b is not None:
        y = _C.add(y, b)
    return y


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """input / max(||input||_p over dim, eps)."""
    a = tensor_arg(input, "normalize")
    p = float(p)
    d = to_int(dim, "normalize", "dim")
    norm = _C.pow_scalar(_C.sum(_C.pow_scalar(_C.abs(a), p), (d,), True), 1.0 / p)
    return _C.div(a, _C.clamp(norm, float(eps), None))
