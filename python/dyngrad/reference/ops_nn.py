"""Reference engine: the neural-net primitives (exposed at the engine root under torch's names and re-exported by
the shared nn/functional.py). Mirrors csrc/dyngrad/ops_nn.cpp."""
import numpy as np

from . import dtypes as _dt
from . import kernels
from .errors import shape_str
from .tensor import Tensor, make_tensor, _wrap_dim
from .ops import record, needs_grad, _check_tensor, _float_array, _cast, _check_index_range


def _legacy_softmax_dim(ndim):
    return 0 if ndim in (0, 1, 3) else 1


# out = e^a / sum(e^a) along dim
def softmax(a, dim=None, dtype=None):
    _check_tensor("softmax", a)
    if dtype is not None:
        a = a.to(dtype)
    d = _wrap_dim("softmax", _legacy_softmax_dim(a.ndim) if dim is None else dim, a.ndim)
    arr = _float_array(a)
    out = make_tensor(kernels.softmax(arr, d) if a.ndim else np.ones_like(arr))
    if needs_grad(a):
        record("softmax", out, (a,), save_out=True, dim=d)
    return out


# out = a - logsumexp(a) along dim
def log_softmax(a, dim=None, dtype=None):
    _check_tensor("log_softmax", a)
    if dtype is not None:
        a = a.to(dtype)
    d = _wrap_dim("log_softmax", _legacy_softmax_dim(a.ndim) if dim is None else dim, a.ndim)
    arr = _float_array(a)
    out = make_tensor(kernels.log_softmax(arr, d) if a.ndim else np.zeros_like(arr))
    if needs_grad(a):
        record("log_softmax", out, (a,), save_out=True, dim=d)
    return out


def _check_reduction(op, reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}.")


def _class_targets(op, a, target, weight, ignore_index):
    """Checks shared by cross_entropy and nll_loss: input (N, C, *) and int64 targets (N, *).
    Returns (targets, per-sample weights, one-hot of the targets in a's shape), all numpy constants."""
    if not isinstance(target, Tensor):
        raise TypeError(f"{op}: expected the target as a Tensor, got {type(target).__name__}.")
    if target.dtype is not _dt.int64:
        raise TypeError(f"{op}: class-index targets must be an int64 tensor, got {target.dtype}.")
    if a.ndim < 2:
        raise RuntimeError(f"{op}: expected input of shape (N, C) or (N, C, d1, ...), got {shape_str(a.shape)}.")
    expected = a.shape[:1] + a.shape[2:]
    if target.shape != expected:
        raise RuntimeError(f"{op}: expected target of shape {shape_str(expected)} for input of shape "
                           f"{shape_str(a.shape)}, got {shape_str(target.shape)}.")
    n_classes = a.shape[1]
    t = target._data
    valid = t != ignore_index
    bad = t[valid & ((t < 0) | (t >= n_classes))]
    if bad.size:
        raise IndexError(f"{op}: target {int(bad.reshape(-1)[0])} is out of range for {n_classes} classes "
                         f"(expected 0..{n_classes - 1} or ignore_index={ignore_index}).")
    safe = np.where(valid, t, 0)
    if weight is not None:
        if not isinstance(weight, Tensor) or weight.shape != (n_classes,):
            raise RuntimeError(f"{op}: weight must be a tensor of shape ({n_classes},), got "
                               f"{shape_str(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}.")
        w = weight._data[safe] * valid
    else:
        w = valid.astype(a._data.dtype if a._data.dtype.kind == "f" else np.float32)
    onehot = np.zeros(a.shape, dtype=a._data.dtype if a._data.dtype.kind == "f" else np.float32)
    np.put_along_axis(onehot, np.expand_dims(safe, 1), np.expand_dims(valid, 1).astype(onehot.dtype), axis=1)
    return safe, w.astype(onehot.dtype), onehot


def _reduce_loss(losses, w, reduction):
    if reduction == "none":
        return losses, w
    if reduction == "sum":
        return losses.sum(), w
    total = w.sum()
    with np.errstate(all="ignore"):
        return losses.sum() / total, w / total


# out = -sum_n w_n log softmax(a)_n[target_n] (/ sum w for mean): the fused softmax + nll with class indices
def cross_entropy(a, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    _check_tensor("cross_entropy", a)
    _check_reduction("cross_entropy", reduction)
    if label_smoothing:
        raise NotImplementedError("cross_entropy: label_smoothing is not supported by dyngrad.")
    if isinstance(target, Tensor) and target.dtype.is_floating_point:
        if target.shape != a.shape:
            raise RuntimeError(f"cross_entropy: probability targets must have the input's shape "
                               f"{shape_str(a.shape)}, got {shape_str(target.shape)}.")
        class_dim = 1 if a.ndim >= 2 else 0
        logp = log_softmax(a, class_dim)
        if weight is not None:
            shape = [1] * a.ndim
            shape[class_dim] = -1
            logp = logp * weight.reshape(shape)
        losses = -(logp * target).sum(class_dim)
        if reduction == "none":
            return losses
        return losses.sum() if reduction == "sum" else losses.sum() / max(losses.numel() if a.ndim >= 2 else 1, 1)
    if a.ndim == 1:                              # one sample of C classes, a 0-d target
        out = cross_entropy(a.unsqueeze(0), target.reshape(1), weight, None, ignore_index, None, reduction)
        return out.squeeze(0) if reduction == "none" else out
    safe, w, onehot = _class_targets("cross_entropy", a, target, weight, ignore_index)
    logp = kernels.log_softmax(_float_array(a), 1)
    picked = np.take_along_axis(logp, np.expand_dims(safe, 1), axis=1).squeeze(1)
    value, coef = _reduce_loss(-w * picked, w, reduction)
    out = make_tensor(np.asarray(value, dtype=logp.dtype))
    if needs_grad(a):
        record("cross_entropy", out, (a,), save={"a": a}, coef=coef, onehot=onehot)
    return out


# out = -sum_n w_n a_n[target_n] (/ sum w for mean), with a holding log-probabilities
def nll_loss(a, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    _check_tensor("nll_loss", a)
    _check_reduction("nll_loss", reduction)
    if a.ndim == 1:
        out = nll_loss(a.unsqueeze(0), target.reshape(1), weight, None, ignore_index, None, reduction)
        return out.squeeze(0) if reduction == "none" else out
    safe, w, onehot = _class_targets("nll_loss", a, target, weight, ignore_index)
    arr = _float_array(a)
    picked = np.take_along_axis(arr, np.expand_dims(safe, 1), axis=1).squeeze(1)
    value, coef = _reduce_loss(-w * picked, w, reduction)
    out = make_tensor(np.asarray(value, dtype=arr.dtype))
    if needs_grad(a):
        record("nll_loss", out, (a,), coef=coef, onehot=onehot)
    return out


# out = w * ((1 - y) x + (1 + (pw - 1) y) softplus(-x)), reduced: a stable sigmoid + binary cross entropy
def binary_cross_entropy_with_logits(a, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    _check_tensor("binary_cross_entropy_with_logits", a)
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    if not isinstance(target, Tensor):
        raise TypeError(f"binary_cross_entropy_with_logits: expected the target as a Tensor, got "
                        f"{type(target).__name__}.")
    if target.shape != a.shape:
        raise ValueError(f"binary_cross_entropy_with_logits: target size {shape_str(target.shape)} must be the "
                         f"same as input size {shape_str(a.shape)}.")
    x = _float_array(a)
    y = _cast(target._data, _dt.from_numpy_dtype(x.dtype))
    pw = pos_weight._data if pos_weight is not None else None
    w = weight._data if weight is not None else None
    with np.errstate(all="ignore"):
        softplus_neg_x = np.logaddexp(0, -x)
        scale = 1 + (pw - 1) * y if pw is not None else 1
        losses = (1 - y) * x + scale * softplus_neg_x
        if w is not None:
            losses = losses * w
    value = losses if reduction == "none" else losses.sum() if reduction == "sum" else losses.mean()
    out = make_tensor(np.asarray(value, dtype=x.dtype))
    if needs_grad(a, target):
        record("binary_cross_entropy_with_logits", out, (a, target), save={"a": a, "target": target},
               weight=w, pos_weight=pw, reduction=reduction, count=max(a.numel(), 1))
    return out


# out[...] = weight[index[...]]: rows of the embedding matrix
def embedding(index, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    if not isinstance(index, Tensor) or not isinstance(weight, Tensor):
        raise TypeError("embedding: expected embedding(input: int64 Tensor, weight: Tensor).")
    if index.dtype is not _dt.int64:
        raise IndexError(f"embedding: the indices must be an int64 tensor, got {index.dtype}.")
    if weight.ndim != 2:
        raise RuntimeError(f"embedding: weight must be 2-D (num_embeddings, dim), got {shape_str(weight.shape)}.")
    if max_norm is not None:
        raise NotImplementedError("embedding: max_norm is not supported by dyngrad.")
    _check_index_range("embedding", index._data, 0, weight.shape[0])
    idx = index._data % max(weight.shape[0], 1)
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    out = make_tensor(weight._data[idx])
    if needs_grad(weight):
        record("embedding", out, (None, weight), shape=weight.shape, index=idx, padding_idx=padding_idx)
    return out


# out = a * mask / (1 - p), mask ~ Bernoulli(1 - p)
def dropout(a, p=0.5, training=True, inplace=False):
    _check_tensor("dropout", a)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability has to be between 0 and 1, but got {p}.")
    if not training or p == 0.0:
        return a
    from .ops_creation import generator
    arr = _float_array(a)
    keep = generator().random(arr.shape) >= p
    mask = keep.astype(arr.dtype) * arr.dtype.type(1.0 / (1.0 - p) if p < 1.0 else 0.0)
    out = make_tensor(arr * mask)
    if needs_grad(a):
        record("dropout", out, (a,), mask=mask)
    return out


def _pair(op, name, value):
    if isinstance(value, (int, np.integer)):
        return (int(value), int(value))
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return (int(value[0]), int(value[1]))
    raise ValueError(f"{op}: {name} must be an int or a pair of ints, got {value!r}.")


def _conv_geometry(op, x_shape, kernel, stride, padding, dilation):
    n, c, h, w = x_shape
    oh = kernels.conv_out_size(h, kernel[0], stride[0], padding[0], dilation[0])
    ow = kernels.conv_out_size(w, kernel[1], stride[1], padding[1], dilation[1])
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"{op}: the output size would be ({oh}, {ow}) for input {shape_str(x_shape)}, kernel "
                           f"{kernel}, stride {stride}, padding {padding}, dilation {dilation}; it must be positive.")
    if min(stride) <= 0 or min(dilation) <= 0 or min(padding) < 0:
        raise ValueError(f"{op}: stride and dilation must be positive and padding non-negative, got stride "
                         f"{stride}, padding {padding}, dilation {dilation}.")
    return oh, ow


# out[n, o] = sum_{c, i, j} weight[o, c, i, j] x[n, c, s*y + d*i - p, s*x + d*j - p] + bias[o]
def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    _check_tensor("conv2d", x)
    _check_tensor("conv2d", weight, "weight")
    if groups != 1:
        raise NotImplementedError(f"conv2d: groups={groups} is not supported by dyngrad (only groups=1).")
    if x.ndim == 3:
        out = conv2d(x.unsqueeze(0), weight, bias, stride, padding, dilation)
        return out.squeeze(0)
    if x.ndim != 4 or weight.ndim != 4:
        raise RuntimeError(f"conv2d: expected a 4-D input (N, C, H, W) and a 4-D weight (O, C, kh, kw), got "
                           f"input {shape_str(x.shape)} and weight {shape_str(weight.shape)}.")
    if x.shape[1] != weight.shape[1]:
        raise RuntimeError(f"conv2d: expected input with {weight.shape[1]} channels (weight shape "
                           f"{shape_str(weight.shape)}), but got input of shape {shape_str(x.shape)}.")
    kernel = weight.shape[2:]
    stride, dilation = _pair("conv2d", "stride", stride), _pair("conv2d", "dilation", dilation)
    if padding == "valid":
        padding = 0
    elif padding == "same":
        if stride != (1, 1):
            raise ValueError("conv2d: padding='same' needs stride 1.")
        total = [dilation[i] * (kernel[i] - 1) for i in range(2)]
        if any(t % 2 for t in total):
            raise NotImplementedError("conv2d: padding='same' with an even kernel extent is not supported.")
        padding = (total[0] // 2, total[1] // 2)
    padding = _pair("conv2d", "padding", padding)
    oh, ow = _conv_geometry("conv2d", x.shape, kernel, stride, padding, dilation)
    if bias is not None and (not isinstance(bias, Tensor) or bias.shape != (weight.shape[0],)):
        raise RuntimeError(f"conv2d: bias must be a tensor of shape ({weight.shape[0]},), got "
                           f"{shape_str(bias.shape) if isinstance(bias, Tensor) else type(bias).__name__}.")
    dtype = _dt.promote(x.dtype, weight.dtype)
    cols = kernels.im2col(_cast(x._data, dtype), kernel, stride, padding, dilation)       # (N, C*kh*kw, L)
    out = kernels.matmul(_cast(weight._data, dtype).reshape(weight.shape[0], -1), cols)   # (N, O, L)
    out = out.reshape(x.shape[0], weight.shape[0], oh, ow)
    if bias is not None:
        out = out + _cast(bias._data, dtype).reshape(1, -1, 1, 1)
    out = make_tensor(out)
    if needs_grad(x, weight, bias):
        record("conv2d", out, (x, weight, bias), save={"x": x, "weight": weight}, stride=stride, padding=padding,
               dilation=dilation)
    return out


# out = every receptive field of x as a column: (N, C, H, W) -> (N, C*kh*kw, OH*OW)
def im2col(x, kernel_size, stride=1, padding=0, dilation=1):
    _check_tensor("im2col", x)
    kernel, stride = _pair("im2col", "kernel_size", kernel_size), _pair("im2col", "stride", stride)
    padding, dilation = _pair("im2col", "padding", padding), _pair("im2col", "dilation", dilation)
    if x.ndim != 4:
        raise RuntimeError(f"im2col: expected a 4-D input (N, C, H, W), got {shape_str(x.shape)}.")
    _conv_geometry("im2col", x.shape, kernel, stride, padding, dilation)
    out = make_tensor(kernels.im2col(x._data, kernel, stride, padding, dilation))
    if needs_grad(x):
        record("im2col", out, (x,), input_size=x.shape, kernel=kernel, stride=stride, padding=padding,
               dilation=dilation)
    return out


# out = the adjoint of im2col: columns summed back onto the (N, C, H, W) positions they came from
def col2im(cols, input_size, kernel_size, stride=1, padding=0, dilation=1):
    _check_tensor("col2im", cols)
    kernel, stride = _pair("col2im", "kernel_size", kernel_size), _pair("col2im", "stride", stride)
    padding, dilation = _pair("col2im", "padding", padding), _pair("col2im", "dilation", dilation)
    input_size = tuple(int(s) for s in input_size)
    oh, ow = _conv_geometry("col2im", input_size, kernel, stride, padding, dilation)
    expected = (input_size[0], input_size[1] * kernel[0] * kernel[1], oh * ow)
    if cols.shape != expected:
        raise RuntimeError(f"col2im: expected columns of shape {shape_str(expected)} for input size "
                           f"{shape_str(input_size)}, got {shape_str(cols.shape)}.")
    out = make_tensor(kernels.col2im(cols._data, input_size, kernel, stride, padding, dilation))
    if needs_grad(cols):
        record("col2im", out, (cols,), input_size=input_size, kernel=kernel, stride=stride, padding=padding,
               dilation=dilation)
    return out


def _pool_args(op, x, kernel_size, stride, padding, dilation, ceil_mode):
    _check_tensor(op, x)
    if ceil_mode:
        raise NotImplementedError(f"{op}: ceil_mode=True is not supported by dyngrad.")
    if x.ndim not in (3, 4):
        raise RuntimeError(f"{op}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got {shape_str(x.shape)}.")
    kernel = _pair(op, "kernel_size", kernel_size)
    stride = kernel if stride is None or stride == [] else _pair(op, "stride", stride)
    padding, dilation = _pair(op, "padding", padding), _pair(op, "dilation", dilation)
    if padding[0] * 2 > kernel[0] or padding[1] * 2 > kernel[1]:
        raise ValueError(f"{op}: padding {padding} should be at most half of the kernel size {kernel}.")
    return kernel, stride, padding, dilation


# out[n, c, y, x] = max of the window of x[n, c] at (y, x); the gradient goes to the arg-max
def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    kernel, stride, padding, dilation = _pool_args("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)
    if return_indices:
        raise NotImplementedError("max_pool2d: return_indices=True is not supported by dyngrad.")
    if x.ndim == 3:
        return max_pool2d(x.unsqueeze(0), kernel, stride, padding, dilation).squeeze(0)
    n, c, h, w = x.shape
    oh, ow = _conv_geometry("max_pool2d", x.shape, kernel, stride, padding, dilation)
    arr = _float_array(x).reshape(n * c, 1, h, w)
    cols = kernels.im2col(arr, kernel, stride, padding, dilation, pad_value=-np.inf)     # (N*C, kh*kw, L)
    argmax = np.argmax(cols, axis=1)
    out = make_tensor(np.take_along_axis(cols, argmax[:, None, :], axis=1).reshape(n, c, oh, ow))
    if needs_grad(x):
        record("max_pool2d", out, (x,), input_size=(n * c, 1, h, w), argmax=argmax, kernel=kernel, stride=stride,
               padding=padding, dilation=dilation)
    return out


# out[n, c, y, x] = mean of the window of x[n, c] at (y, x) (zero padding counted unless count_include_pad=False)
def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    kernel, stride, padding, dilation = _pool_args("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode)
    if x.ndim == 3:
        return avg_pool2d(x.unsqueeze(0), kernel, stride, padding, False, count_include_pad,
                          divisor_override).squeeze(0)
    n, c, h, w = x.shape
    oh, ow = _conv_geometry("avg_pool2d", x.shape, kernel, stride, padding, dilation)
    arr = _float_array(x).reshape(n * c, 1, h, w)
    cols = kernels.im2col(arr, kernel, stride, padding, dilation)
    if divisor_override:
        divisor = np.full((1, 1, oh * ow), float(divisor_override), dtype=arr.dtype)
    elif count_include_pad:
        divisor = np.full((1, 1, oh * ow), float(kernel[0] * kernel[1]), dtype=arr.dtype)
    else:
        divisor = kernels.im2col(np.ones((1, 1, h, w), arr.dtype), kernel, stride, padding, dilation).sum(
            axis=1, keepdims=True)
    out = make_tensor((cols.sum(axis=1, keepdims=True) / divisor).reshape(n, c, oh, ow).astype(arr.dtype))
    if needs_grad(x):
        record("avg_pool2d", out, (x,), input_size=(n * c, 1, h, w), divisor=divisor, kernel=kernel, stride=stride,
               padding=padding, dilation=dilation)
    return out


# out = (x - mean) / sqrt(var + eps) * weight + bias over the last len(normalized_shape) dims
def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    _check_tensor("layer_norm", x)
    if isinstance(normalized_shape, (int, np.integer)):
        normalized_shape = (int(normalized_shape),)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or x.shape[x.ndim - k:] != normalized_shape or x.ndim < k:
        raise RuntimeError(f"layer_norm: normalized_shape {shape_str(normalized_shape)} must match the last "
                           f"dimensions of the input, whose shape is {shape_str(x.shape)}.")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and (not isinstance(p, Tensor) or p.shape != normalized_shape):
            raise RuntimeError(f"layer_norm: {name} must have shape {shape_str(normalized_shape)}, got "
                               f"{shape_str(p.shape) if isinstance(p, Tensor) else type(p).__name__}.")
    dims = tuple(range(x.ndim - k, x.ndim))
    arr = _float_array(x)
    with np.errstate(all="ignore"):
        centered = arr - arr.mean(axis=dims, keepdims=True)
        xhat = centered / np.sqrt((centered * centered).mean(axis=dims, keepdims=True) + eps)
        out = xhat
        if weight is not None:
            out = out * weight._data
        if bias is not None:
            out = out + bias._data
    out = make_tensor(out.astype(arr.dtype, copy=False))
    if needs_grad(x, weight, bias):
        record("layer_norm", out, (x, weight, bias), save={"x": x, "weight": weight}, dims=dims, eps=eps)
    return out


# ===== composites the C++ engine also exports at its root (the shared nn/functional.py composes them too) =====

def mse_loss(a, target, size_average=None, reduce=None, reduction="mean"):
    _check_reduction("mse_loss", reduction)
    diff = a - target
    losses = diff * diff
    return losses if reduction == "none" else losses.sum() if reduction == "sum" else losses.mean()


def linear(x, weight, bias=None):
    out = x @ weight.transpose(0, 1) if weight.ndim == 2 else x @ weight
    return out + bias if bias is not None else out


def one_hot(index, num_classes=-1):
    if not isinstance(index, Tensor) or index.dtype is not _dt.int64:
        raise TypeError("one_hot: expected an int64 tensor of class indices.")
    n = int(index._data.max()) + 1 if num_classes == -1 and index.numel() else num_classes
    _check_index_range("one_hot", index._data, 0, n)
    if (index._data < 0).any():
        raise IndexError("one_hot: class indices must be non-negative.")
    return make_tensor((index._data[..., None] == np.arange(n)).astype(np.int64))
