"""Reference engine: EVERY backward formula, one function per primitive op, in the order of OP_NAMES
(csrc/dyngrad/ops.def). Mirrors csrc/dyngrad/derivatives.cpp, same order, same names.

Conventions: `grad` is dL/d(out); `s` holds what the forward saved: `s.a`, `s.b` (inputs), `s.out` (the
result), the op's non-tensor arguments, and `s.needs_input_grad`. Each function returns one gradient (or None)
per input. Formulas ignore broadcasting and dtypes: the engine sums each gradient to its input's shape and casts
it to its dtype (Note [Unbroadcast]). They are written with the engine's own differentiable ops, so that
create_graph=True records them and second derivatives work. Constants (masks, one-hots) are numpy arrays
wrapped by `const`, which never require grad.
"""
import math

import numpy as np

from . import ops
from . import ops_nn
from .tensor import make_tensor


def const(arr):
    """A tensor over a numpy constant (a mask, a one-hot): no gradient flows into it."""
    return make_tensor(np.asarray(arr))


def _like(grad, arr):
    return const(np.asarray(arr, dtype=grad._data.dtype))


def _expand_reduced(grad, shape, dims, keepdim):
    """Broadcast a reduction's gradient back over the reduced dims."""
    if not keepdim and dims:
        kept = list(shape)
        for d in dims:
            kept[d] = 1
        grad = ops.reshape(grad, tuple(kept))
    return ops.expand(grad, tuple(shape))


def _kept_shape(shape, dims):
    return tuple(1 if d in dims else n for d, n in enumerate(shape))


# ===== arithmetic ==============================================================================================

# out = a + b  ->  da = grad,  db = grad
def add_backward(grad, s):
    return grad, grad


# out = a - b  ->  da = grad,  db = -grad
def sub_backward(grad, s):
    return grad, (-grad if s.needs_input_grad[1] else None)


# out = a * b  ->  da = grad * b,  db = grad * a
def mul_backward(grad, s):
    da = grad * s.b if s.needs_input_grad[0] else None
    db = grad * s.a if s.needs_input_grad[1] else None
    return da, db


# out = a / b  ->  da = grad / b,  db = -grad * a / b^2
def div_backward(grad, s):
    da = grad / s.b if s.needs_input_grad[0] else None
    db = -grad * s.a / (s.b * s.b) if s.needs_input_grad[1] else None
    return da, db


# out = -a  ->  da = -grad
def neg_backward(grad, s):
    return (-grad,)


# out = a^b  ->  da = grad * b * a^(b-1) (0 where b == 0),  db = grad * out * ln a (0 where a == 0)
def pow_backward(grad, s):
    da = db = None
    if s.needs_input_grad[0]:
        da = ops.where(s.b == 0, 0.0, grad * s.b * ops.pow(s.a, s.b - 1))
    if s.needs_input_grad[1]:
        db = ops.where(s.a == 0, 0.0, grad * s.out * ops.log(s.a))
    return da, db


# out = a @ b  ->  da = grad @ b^T,  db = a^T @ grad  (1-D operands are promoted to matrices and back)
def matmul_backward(grad, s):
    g = grad
    if s.a_ndim == 1:
        g = ops.unsqueeze(g, -2 if g.ndim else 0)
    if s.b_ndim == 1:
        g = ops.unsqueeze(g, -1)
    da = db = None
    if s.needs_input_grad[0]:
        b = s.b if s.b_ndim > 1 else ops.unsqueeze(s.b, -1)
        da = ops.matmul(g, ops.transpose(b, -1, -2))
        if s.a_ndim == 1:
            da = ops.squeeze(da, -2)
    if s.needs_input_grad[1]:
        a = s.a if s.a_ndim > 1 else ops.unsqueeze(s.a, 0)
        db = ops.matmul(ops.transpose(a, -1, -2), g)
        if s.b_ndim == 1:
            db = ops.squeeze(db, -1)
    return da, db


# out = max(a, b)  ->  da = grad where a > b,  db = grad where b > a  (ties share: grad / 2 each)
def maximum_backward(grad, s):
    a, b = s.a._data, s.b._data
    ties = 0.5 * (a == b)
    return grad * _like(grad, (a > b) + ties), grad * _like(grad, (b > a) + ties)


# out = min(a, b)  ->  da = grad where a < b,  db = grad where b < a  (ties share: grad / 2 each)
def minimum_backward(grad, s):
    a, b = s.a._data, s.b._data
    ties = 0.5 * (a == b)
    return grad * _like(grad, (a < b) + ties), grad * _like(grad, (b < a) + ties)


# out = cond ? a : b  ->  da = cond ? grad : 0,  db = cond ? 0 : grad
def where_backward(grad, s):
    da = ops.where(s.cond, grad, 0.0) if s.needs_input_grad[0] else None
    db = ops.where(s.cond, 0.0, grad) if s.needs_input_grad[1] else None
    return da, db


# out = clamp(a, min, max)  ->  da = grad where min <= a <= max, else 0
def clamp_backward(grad, s):
    a = s.a._data
    inside = np.ones(a.shape, dtype=bool)
    if s.min is not None:
        inside &= a >= s.min
    if s.max is not None:
        inside &= a <= s.max
    return (grad * _like(grad, inside),)


# ===== unary ===================================================================================================

# out = e^a  ->  da = grad * out
def exp_backward(grad, s):
    return (grad * s.out,)


# out = ln a  ->  da = grad / a
def log_backward(grad, s):
    return (grad / s.a,)


# out = sqrt(a)  ->  da = grad / (2 out)
def sqrt_backward(grad, s):
    return (grad / (2 * s.out),)


# out = a^(-1/2)  ->  da = -grad * out^3 / 2
def rsqrt_backward(grad, s):
    return (grad * s.out * s.out * s.out * -0.5,)


# out = |a|  ->  da = grad * sign(a)
def abs_backward(grad, s):
    return (grad * ops.sign(s.a),)


# out = sin a  ->  da = grad * cos a
def sin_backward(grad, s):
    return (grad * ops.cos(s.a),)


# out = cos a  ->  da = -grad * sin a
def cos_backward(grad, s):
    return (-grad * ops.sin(s.a),)


# out = tanh a  ->  da = grad * (1 - out^2)
def tanh_backward(grad, s):
    return (grad * (1 - s.out * s.out),)


# out = sigmoid a  ->  da = grad * out * (1 - out)
def sigmoid_backward(grad, s):
    return (grad * s.out * (1 - s.out),)


# out = max(a, 0)  ->  da = grad where out > 0
def relu_backward(grad, s):
    return (grad * _like(grad, s.out._data > 0),)


# out = sign a  ->  da = 0
def sign_backward(grad, s):
    return (grad * 0.0,)


# out = erf a  ->  da = grad * 2 / sqrt(pi) * e^(-a^2)
def erf_backward(grad, s):
    return (grad * (2.0 / math.sqrt(math.pi)) * ops.exp(-(s.a * s.a)),)


# out = a > 0 ? a : slope a  ->  da = grad * (a > 0 ? 1 : slope)
def leaky_relu_backward(grad, s):
    return (grad * _like(grad, np.where(s.a._data > 0, 1.0, s.negative_slope)),)


# out = a Phi(a)  ->  da = grad * (Phi(a) + a phi(a));  tanh form: d/da of 0.5 a (1 + tanh(c (a + k a^3)))
def gelu_backward(grad, s):
    a = s.a
    if s.approximate == "tanh":
        c, k = math.sqrt(2.0 / math.pi), 0.044715
        t = ops.tanh(c * (a + k * a * a * a))
        return (grad * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * c * (1 + 3 * k * a * a)),)
    cdf = 0.5 * (1 + ops.erf(a * (1.0 / math.sqrt(2.0))))
    pdf = ops.exp(-0.5 * a * a) * (1.0 / math.sqrt(2.0 * math.pi))
    return (grad * (cdf + a * pdf),)


# out = log(1 + e^(beta a)) / beta  ->  da = grad * sigmoid(beta a)  (grad where beta a > threshold)
def softplus_backward(grad, s):
    z = s.a * s.beta
    linear = const(z._data > s.threshold)
    return (grad * ops.where(linear, 1.0, ops.sigmoid(z)),)


# ===== reductions ==============================================================================================

# out = sum a  ->  da = grad broadcast over the reduced dims
def sum_backward(grad, s):
    return (_expand_reduced(grad, s.shape, s.dims, s.keepdim),)


# out = sum a / n  ->  da = grad / n broadcast over the reduced dims
def mean_backward(grad, s):
    return (_expand_reduced(grad, s.shape, s.dims, s.keepdim) / s.count,)


# out = sum (a - mean)^2 / (n - c)  ->  da = grad * 2 (a - mean) / (n - c)
def var_backward(grad, s):
    centered = s.a - ops.mean(s.a, s.dims, keepdim=True)
    return (_expand_reduced(grad, s.a.shape, s.dims, s.keepdim) * centered * (2.0 / (s.count - s.correction)),)


# out = sqrt(var a)  ->  da = grad * (a - mean) / ((n - c) out)
def std_backward(grad, s):
    centered = s.a - ops.mean(s.a, s.dims, keepdim=True)
    out = _expand_reduced(s.out, s.a.shape, s.dims, s.keepdim)
    return (_expand_reduced(grad, s.a.shape, s.dims, s.keepdim) * centered / (out * (s.count - s.correction)),)


def _evenly_to_extremes(grad, s):
    """The gradient of a max/min over dims: shared evenly by the elements equal to the result."""
    out = s.out._data if s.keepdim else s.out._data.reshape(_kept_shape(s.a.shape, s.dims))
    hits = s.a._data == out
    share = hits / np.sum(hits, axis=s.dims, keepdims=True)
    return (_expand_reduced(grad, s.a.shape, s.dims, s.keepdim) * _like(grad, share),)


# out = amax a  ->  da = grad / (number of maxima) at each maximum
def amax_backward(grad, s):
    return _evenly_to_extremes(grad, s)


# out = amin a  ->  da = grad / (number of minima) at each minimum
def amin_backward(grad, s):
    return _evenly_to_extremes(grad, s)


def _to_indices(grad, s):
    """The gradient of max/min along a dim: all of it to the index the forward returned."""
    if not s.dims:
        return (grad,)
    d = s.dims[0]
    idx = s.indices if s.keepdim else np.expand_dims(s.indices, d)
    onehot = np.zeros(s.shape, dtype=grad._data.dtype)
    np.put_along_axis(onehot, idx, 1, axis=d)
    return (_expand_reduced(grad, s.shape, s.dims, s.keepdim) * const(onehot),)


# values = max a along dim  ->  da = grad at the arg-max (without dim: shared by tied maxima)
def max_backward(grad, s):
    return _evenly_to_extremes(grad, s) if s.indices is None else _to_indices(grad, s)


# values = min a along dim  ->  da = grad at the arg-min (without dim: shared by tied minima)
def min_backward(grad, s):
    return _evenly_to_extremes(grad, s) if s.indices is None else _to_indices(grad, s)


# out = log sum e^a  ->  da = grad * e^(a - out)
def logsumexp_backward(grad, s):
    out = _expand_reduced(s.out, s.a.shape, s.dims, s.keepdim)
    return (_expand_reduced(grad, s.a.shape, s.dims, s.keepdim) * ops.exp(s.a - out),)


# ===== copies and shape ========================================================================================

# out = a cast to a dtype  ->  da = grad (cast back by the engine)
def to_backward(grad, s):
    return (grad,)


# out = copy of a  ->  da = grad
def clone_backward(grad, s):
    return (grad,)


# out = src written over a  ->  da = 0 (overwritten),  dsrc = grad (summed to src's shape by the engine)
def copy_backward(grad, s):
    return None, grad


# out = value everywhere  ->  da = 0
def fill_backward(grad, s):
    return (None,)


# out = a.reshape(shape)  ->  da = grad.reshape(a.shape)
def reshape_backward(grad, s):
    return (ops.reshape(grad, s.shape),)


# out = a.view(shape)  ->  da = grad.reshape(a.shape)
def view_backward(grad, s):
    return (ops.reshape(grad, s.shape),)


# out = a.transpose(d0, d1)  ->  da = grad.transpose(d0, d1)
def transpose_backward(grad, s):
    return (ops.transpose(grad, s.dim0, s.dim1),)


# out = a.permute(dims)  ->  da = grad.permute(inverse of dims)
def permute_backward(grad, s):
    return (ops.permute(grad, tuple(int(i) for i in np.argsort(s.dims))),)


# out = a.expand(shape)  ->  da = grad summed over the expanded dims
def expand_backward(grad, s):
    return (ops.sum_to_shape(grad, s.shape, "ExpandBackward"),)


# out = a.squeeze(dims)  ->  da = grad.reshape(a.shape)
def squeeze_backward(grad, s):
    return (ops.reshape(grad, s.shape),)


# out = a.unsqueeze(dim)  ->  da = grad.squeeze(dim)
def unsqueeze_backward(grad, s):
    return (ops.squeeze(grad, s.dim),)


# out = cat(a_1..a_n, dim)  ->  da_i = the slice of grad that a_i filled
def cat_backward(grad, s):
    grads, start = [], 0
    for size in s.sizes:
        grads.append(ops.narrow(grad, s.dim, start, size))
        start += size
    return tuple(grads)


# out = stack(a_1..a_n, dim)  ->  da_i = grad.select(dim, i)
def stack_backward(grad, s):
    return tuple(ops.select(grad, s.dim, i) for i in range(grad.shape[s.dim]))


# ===== indexing ================================================================================================

# out = a[key]  ->  da = zeros with grad added at key (repeated indices add up)
def index_backward(grad, s):
    zeros = const(np.zeros(s.shape, dtype=grad._data.dtype))
    return (ops.index_put(zeros, s.key, grad, accumulate=True, _parsed=True),)


# out = a with out[key] = v (or += v)  ->  da = grad with key zeroed (all of grad if accumulate),  dv = grad[key]
def index_put_backward(grad, s):
    da = dv = None
    if s.needs_input_grad[0]:
        if s.accumulate:
            da = grad
        else:
            keep = np.ones(grad.shape, dtype=grad._data.dtype)
            keep[s.key] = 0
            da = grad * const(keep)
    if s.needs_input_grad[1]:
        dv = ops.index(grad, s.key)
    return da, dv


# out = a.gather(dim, index)  ->  da = zeros.scatter_add(dim, index, grad)
def gather_backward(grad, s):
    zeros = const(np.zeros(s.shape, dtype=grad._data.dtype))
    return (ops.scatter_add(zeros, s.dim, const(s.index), grad),)


# out = a.scatter_add(dim, index, src)  ->  da = grad,  dsrc = grad.gather(dim, index)
def scatter_add_backward(grad, s):
    dsrc = ops.gather(grad, s.dim, const(s.index)) if s.needs_input_grad[1] else None
    return grad, dsrc


# out = a.masked_fill(mask, value)  ->  da = grad where the mask is False
def masked_fill_backward(grad, s):
    return (ops.where(s.mask, 0.0, grad),)


# ===== nn ======================================================================================================

# out = softmax(a)  ->  da = out * (grad - sum(grad * out))
def softmax_backward(grad, s):
    return (s.out * (grad - ops.sum(grad * s.out, s.dim, keepdim=True)),)


# out = log_softmax(a)  ->  da = grad - e^out * sum(grad)
def log_softmax_backward(grad, s):
    return (grad - ops.exp(s.out) * ops.sum(grad, s.dim, keepdim=True),)


# out = -sum_n coef_n log softmax(a)_n[t_n]  ->  da = (softmax(a) - onehot(t)) * coef * grad
def cross_entropy_backward(grad, s):
    scale = ops.unsqueeze(grad * _like(grad, s.coef), 1)
    return ((ops_nn.softmax(s.a, 1) - _like(grad, s.onehot)) * scale,)


# out = -sum_n coef_n a_n[t_n]  ->  da = -onehot(t) * coef * grad
def nll_loss_backward(grad, s):
    scale = ops.unsqueeze(grad * _like(grad, s.coef), 1)
    return (_like(grad, -s.onehot) * scale,)


# out = w ((1 - y) x + L softplus(-x)), L = 1 + (pw - 1) y
#   ->  dx = grad * w * ((1 - y) - L sigmoid(-x)),  dy = grad * w * (-x + (pw - 1) softplus(-x))
def binary_cross_entropy_with_logits_backward(grad, s):
    x, y = s.a, s.target
    scale = grad if s.reduction != "mean" else grad / s.count
    if s.weight is not None:
        scale = scale * _like(grad, s.weight)
    dx = dy = None
    if s.needs_input_grad[0]:
        factor = 1 if s.pos_weight is None else 1 + (_like(grad, s.pos_weight) - 1) * y
        dx = scale * ((1 - y) - factor * ops.sigmoid(-x))
    if s.needs_input_grad[1]:
        dy = -x if s.pos_weight is None else -x + (_like(grad, s.pos_weight) - 1) * ops.softplus(-x)
        dy = scale * dy
    return dx, dy


# out = weight[index]  ->  dweight = zeros with grad rows added at index (none for padding_idx)
def embedding_backward(grad, s):
    if s.padding_idx is not None:
        grad = grad * _like(grad, (s.index != s.padding_idx)[..., None])
    zeros = const(np.zeros(s.shape, dtype=grad._data.dtype))
    return None, ops.index_put(zeros, (s.index,), grad, accumulate=True, _parsed=True)


# out = a * mask  ->  da = grad * mask
def dropout_backward(grad, s):
    return (grad * _like(grad, s.mask),)


# out = W_flat @ im2col(x) + b  ->  dx = col2im(W_flat^T @ grad),  dW = sum_n grad @ im2col(x)^T,  db = sum grad
def conv2d_backward(grad, s):
    x, w = s.x, s.weight
    n, o = grad.shape[0], w.shape[0]
    g = ops.reshape(grad, (n, o, -1))
    geometry = dict(stride=s.stride, padding=s.padding, dilation=s.dilation)
    dx = dw = db = None
    if s.needs_input_grad[0]:
        w_flat = ops.reshape(w, (o, -1))
        dx = ops_nn.col2im(ops.matmul(ops.transpose(w_flat, 0, 1), g), x.shape, w.shape[2:], **geometry)
    if s.needs_input_grad[1]:
        cols = ops_nn.im2col(x, w.shape[2:], **geometry)
        dw = ops.reshape(ops.sum(ops.matmul(g, ops.transpose(cols, 1, 2)), 0), w.shape)
    if s.needs_input_grad[2]:
        db = ops.sum(grad, (0, 2, 3))
    return dx, dw, db


# out = im2col(x)  ->  dx = col2im(grad)
def im2col_backward(grad, s):
    return (ops_nn.col2im(grad, s.input_size, s.kernel, s.stride, s.padding, s.dilation),)


# out = col2im(cols)  ->  dcols = im2col(grad)
def col2im_backward(grad, s):
    return (ops_nn.im2col(grad, s.kernel, s.stride, s.padding, s.dilation),)


# out = max over each window  ->  dx = col2im(grad placed at each window's arg-max)
def max_pool2d_backward(grad, s):
    n, c = grad.shape[:2]
    rows, _, h, w = s.input_size
    onehot = np.zeros((rows, s.kernel[0] * s.kernel[1], s.argmax.shape[1]), dtype=grad._data.dtype)
    np.put_along_axis(onehot, s.argmax[:, None, :], 1, axis=1)
    cols = const(onehot) * ops.reshape(grad, (rows, 1, -1))
    dx = ops_nn.col2im(cols, s.input_size, s.kernel, s.stride, s.padding, s.dilation)
    return (ops.reshape(dx, (n, c, h, w)),)


# out = mean over each window  ->  dx = col2im(grad / divisor spread over each window)
def avg_pool2d_backward(grad, s):
    n, c = grad.shape[:2]
    rows, _, h, w = s.input_size
    share = ops.reshape(grad, (rows, 1, -1)) / _like(grad, s.divisor)
    cols = ops.expand(share, (rows, s.kernel[0] * s.kernel[1], share.shape[2]))
    dx = ops_nn.col2im(cols, s.input_size, s.kernel, s.stride, s.padding, s.dilation)
    return (ops.reshape(dx, (n, c, h, w)),)


# out = xhat * w + b, xhat = (x - mean) * rstd
#   ->  dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = grad * w,  dw = grad * xhat,  db = grad
def layer_norm_backward(grad, s):
    x, dims = s.x, s.dims
    centered = x - ops.mean(x, dims, keepdim=True)
    rstd = ops.rsqrt(ops.mean(centered * centered, dims, keepdim=True) + s.eps)
    xhat = centered * rstd
    dx = dw = db = None
    if s.needs_input_grad[0]:
        g = grad * s.weight if s.weight is not None else grad
        dx = rstd * (g - ops.mean(g, dims, keepdim=True) - xhat * ops.mean(g * xhat, dims, keepdim=True))
    if s.needs_input_grad[1]:
        dw = grad * xhat
    if s.needs_input_grad[2]:
        db = grad
    return dx, dw, db
