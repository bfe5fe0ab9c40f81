"""Reference engine: neural-net ops. softmax, log_softmax, cross_entropy and im2col/col2im (unfold/fold) are
primitives; conv2d and pooling are composed from primitives. Mirrors csrc/dyngrad/ops_nn.cpp, function for function.
"""
import numpy as np

from . import dtypes as _dt
from . import kernels
from . import forward_ad
from .errors import shape_str
from .grad_mode import GradModeGuard
from .ops import record, record_outputs, any_requires_grad, needs_input_grad, check_float, fresh
from .tensor import make_tensor, wrap_dim, check_allocation, cannot_allocate


# out = exp(a) / sum(exp(a), dim)
def softmax(a, dim):
    if a.dtype.is_floating_point and a.dtype.itemsize == 2:    # computed in float32, rounded back (as ops_nn.cpp)
        return to_dtype(softmax(to_dtype(a, _dt.float32), dim), a.dtype)
    check_not_complex(a.dtype, "softmax")
    if not a.dtype.is_floating_point:
        a = to_dtype(a, _dt.float32)
    d = wrap_dim(dim, a.ndim, "softmax")
    out = make_tensor(kernels.softmax(a._data, d) if a.ndim else np.ones((), dtype=a._data.dtype))
    if any_requires_grad(a):
        node = record("softmax", out, (a,))
        node.save("out", out, is_output=True)
        node.args = {"dim": d}
    if forward_ad.active(): forward_ad.attach("softmax", out, (a,), out=out, dim=d)
    return out


# out = a - logsumexp(a, dim)
def log_softmax(a, dim):
    if a.dtype.is_floating_point and a.dtype.itemsize == 2:    # computed in float32, rounded back (as ops_nn.cpp)
        return to_dtype(log_softmax(to_dtype(a, _dt.float32), dim), a.dtype)
    check_not_complex(a.dtype, "log_softmax")
    if not a.dtype.is_floating_point:
        a = to_dtype(a, _dt.float32)
    d = wrap_dim(dim, a.ndim, "log_softmax")
    out = make_tensor(kernels.log_softmax(a._data, d) if a.ndim else np.zeros((), dtype=a._data.dtype))
    if any_requires_grad(a):
        node = record("log_softmax", out, (a,))
        node.save("out", out, is_output=True)
        node.args = {"dim": d}
    if forward_ad.active(): forward_ad.attach("log_softmax", out, (a,), out=out, dim=d)
    return out


def _softmax_backward_op(op, grad, out, dim, log):
    """softmax's and log_softmax's gradients given their output (ops_nn.cpp's softmax_backward_op): in the promoted
    dtype, float32 for the half types."""
    dtype = _dt.promote(grad.dtype, out.dtype)
    if grad.shape != out.shape or not dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a gradient and an output of one shape and a floating dtype, got "
                           f"{grad.dtype.name} {shape_str(grad.shape)} and {out.dtype.name} {shape_str(out.shape)}.")
    d = wrap_dim(dim, out.ndim, op) if out.ndim else (wrap_dim(dim, 0, op), 0)[1]
    compute = _dt.float32 if dtype.itemsize == 2 else dtype
    g, y = compute.cast(grad._data), compute.cast(out._data)
    axis = (d,) if out.ndim else None
    with np.errstate(all="ignore"):
        if log:
            r = g - np.exp(y) * kernels.sum(g, axis, True)
        else:
            r = y * (g - kernels.sum(g * y, axis, True))
    result = make_tensor(fresh(dtype.cast(r)))
    if any_requires_grad(grad, out):
        node = record(op, result, (grad, out))
        if needs_input_grad(node, 1):
            node.save("grad", grad)
        node.save("out", out)
        node.args = {"dim": d}
    if forward_ad.active(): forward_ad.attach(op, result, (grad, out), grad=grad, out=out, dim=d)
    return result


def softmax_backward(grad, out, dim):
    return _softmax_backward_op("softmax_backward", grad, out, dim, False)


def log_softmax_backward(grad, out, dim):
    return _softmax_backward_op("log_softmax_backward", grad, out, dim, True)


# loss_i = -(1-ls) * logp[i, t_i] - ls/C * sum_c logp[i, c], skipping t_i == ignore_index; reduced by mean (over the
# non-ignored rows), sum, or none.
def cross_entropy(logits, target, reduction, ignore_index, label_smoothing):
    check_float(logits, "cross_entropy")
    if logits.ndim not in (1, 2):
        raise RuntimeError(f"cross_entropy: expected logits of shape (C,) or (N, C), got {shape_str(logits.shape)}.")
    if target.dtype is not _dt.int64:
        raise RuntimeError(f"cross_entropy: expected int64 class indices as target, got {target.dtype.name}.")
    batched = logits.ndim == 2
    n, c = (logits.shape[0] if batched else 1), logits.shape[-1]
    if target.ndim != (1 if batched else 0) or (batched and target.shape[0] != n):
        raise ValueError(f"cross_entropy: target of shape {shape_str(target.shape)} does not match logits of shape "
                         f"{shape_str(logits.shape)} (expected {shape_str((n,)) if batched else '()'}).")
    if reduction not in (0, 1, 2):
        raise ValueError("cross_entropy: unknown reduction.")
    t = target._data.reshape(n)
    keep = t != ignore_index
    bad = t[keep & ((t < 0) | (t >= c))]
    if bad.size:
        raise IndexError(f"cross_entropy: target {int(bad[0])} is out of range for {c} classes.")
    logp = kernels.log_softmax(logits._data.reshape(n, c), 1)
    picked = np.take_along_axis(logp, np.where(keep, t, 0)[:, None], axis=1)[:, 0]
    losses = -(1.0 - label_smoothing) * picked
    if label_smoothing > 0:
        losses = losses - label_smoothing / c * logp.sum(axis=1)
    losses = np.where(keep, losses, 0).astype(logp.dtype)
    count = int(keep.sum())
    if reduction == 0:
        out = losses if batched else losses.reshape(())
    else:
        out = losses.sum()
        if reduction == 1:
            with np.errstate(all="ignore"):
                out = out / out.dtype.type(count)
    out = make_tensor(np.asarray(out, dtype=logp.dtype))
    if any_requires_grad(logits):
        node = record("cross_entropy", out, (logits, None))
        node.save("logits", logits)
        node.save("target", target)
        node.args = {"reduction": reduction, "ignore_index": ignore_index, "label_smoothing": label_smoothing}
    if forward_ad.active(): forward_ad.attach("cross_entropy", out, (logits, None), logits=logits, target=target, reduction=reduction, ignore_index=ignore_index, label_smoothing=label_smoothing)
    return out


def cross_entropy_target(target, n, c, ignore_index, label_smoothing, np_dtype):
    """q (n, c): the label-smoothed one-hot target, keep (n, 1): 0 for an ignored row, and the rows kept
    (kernels/loss.cpp's cross_entropy_target_kernel)."""
    t = target._data.reshape(n)
    kept = t != ignore_index
    q = np.zeros((n, c), dtype=np_dtype)
    q[kept] = np_dtype.type(label_smoothing / c)
    q[kept, t[kept]] += np_dtype.type(1 - label_smoothing)
    return q, kept.astype(np_dtype).reshape(n, 1), int(kept.sum())


# cross_entropy's gradient with respect to its logits: ((softmax(logits) - q) * keep) * scale per row, scale = grad
# (reduction none), grad / kept rows (mean) or grad (sum)
def cross_entropy_backward(grad, logits, target, reduction, ignore_index, label_smoothing):
    op = "cross_entropy_backward"
    check_float(logits, op)
    if logits.ndim not in (1, 2):
        raise RuntimeError(f"{op}: expected logits of shape (C,) or (N, C), got {shape_str(logits.shape)}.")
    if reduction not in (0, 1, 2):
        raise ValueError(f"{op}: unknown reduction {reduction}.")
    batched = logits.ndim == 2
    n, c = (logits.shape[0] if batched else 1), logits.shape[-1]
    if target.dtype is not _dt.int64 or target.ndim != (1 if batched else 0) or target.numel() != n:
        raise RuntimeError(f"{op}: expected int64 targets of shape {shape_str((n,)) if batched else '()'}, got "
                           f"{target.dtype.name} {shape_str(target.shape)}.")
    grad_shape = tuple(target.shape) if reduction == 0 else ()
    if tuple(grad.shape) != grad_shape or not grad.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating-point gradient of shape {shape_str(grad_shape)}, got "
                           f"{grad.dtype.name} {shape_str(grad.shape)}.")
    dtype = _dt.promote(grad.dtype, logits.dtype)
    if dtype not in (_dt.float32, _dt.float64):
        raise TypeError(f"{op}: expected float32 or float64 tensors, got {dtype.name}.")
    t = target._data.reshape(n)
    bad = t[(t != ignore_index) & ((t < 0) | (t >= c))]
    if bad.size:
        raise IndexError(f"{op}: target {int(bad[0])} is out of range for {c} classes.")
    x = dtype.cast(logits._data).reshape(n, c)
    q, keep, kept = cross_entropy_target(target, n, c, ignore_index, label_smoothing, x.dtype)
    g = dtype.cast(grad._data)
    with np.errstate(all="ignore"):
        scale = g.reshape(n, 1) if reduction == 0 else (g / x.dtype.type(max(kept, 1)) if reduction == 1 else g)
        dx = ((kernels.softmax(x, 1) - q) * keep) * scale
    out = make_tensor(fresh(dx if batched else dx.reshape(c)))
    if any_requires_grad(grad, logits):
        node = record(op, out, (grad, logits, None))
        if needs_input_grad(node, 1):
            node.save("grad", grad)
        node.save("logits", logits)
        node.save("target", target)
        node.args = {"reduction": reduction, "ignore_index": ignore_index, "label_smoothing": label_smoothing}
    if forward_ad.active(): forward_ad.attach(op, out, (grad, logits, None), grad=grad, logits=logits, target=target, reduction=reduction, ignore_index=ignore_index, label_smoothing=label_smoothing)
    return out


def _check_image(x, op):
    if x.ndim != 4:
        raise RuntimeError(f"{op}: expected a 4-D input (N, C, H, W), got shape {shape_str(x.shape)}.")
    check_float(x, op)


INT64_MAX = 2 ** 63 - 1


def _check_window(x, kh, kw, sh, sw, ph, pw, op, dh=1, dw=1, shape=None):
    """See Note [Window geometry] in csrc/dyngrad/ops_nn.cpp: the sizes implied by kernel, stride, padding and
    dilation must fit in int64 (Python's ints do not overflow; C++'s did, so both engines refuse the same
    geometry). `shape` is the image's shape when x is not the image (fold)."""
    xs = tuple(x.shape) if shape is None else tuple(shape)
    if not (kh > 0 and kw > 0 and sh > 0 and sw > 0 and ph >= 0 and pw >= 0 and dh > 0 and dw > 0):
        raise RuntimeError(f"{op}: kernel size, stride and dilation must be positive and padding non-negative, got "
                           f"kernel ({kh}, {kw}), stride ({sh}, {sw}), padding ({ph}, {pw}), dilation ({dh}, {dw}).")
    hp, wp = xs[2] + 2 * ph, xs[3] + 2 * pw
    if max(2 * ph, 2 * pw, hp, wp) > INT64_MAX:
        raise RuntimeError(f"{op}: padding ({ph}, {pw}) is too large: the padded input of shape {shape_str(xs)} "
                           "would have more rows or columns than fit in 64 bits.")
    ekh, ekw = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    if max(ekh, ekw) > INT64_MAX:
        raise RuntimeError(f"{op}: dilation ({dh}, {dw}) with kernel ({kh}, {kw}) spans more than fits in 64 bits.")
    if hp < ekh or wp < ekw:
        raise RuntimeError(f"{op}: kernel ({kh}, {kw}) with dilation ({dh}, {dw}) is larger than the padded input of "
                           f"shape {shape_str(xs)} with padding ({ph}, {pw}).")
    oh, ow = (hp - ekh) // sh + 1, (wp - ekw) // sw + 1
    rows, positions = xs[1] * kh * kw, oh * ow
    if max(rows, positions, xs[0] * rows * positions) > INT64_MAX:
        raise RuntimeError(f"{op}: kernel ({kh}, {kw}), stride ({sh}, {sw}) and padding ({ph}, {pw}) on an input of "
                           f"shape {shape_str(xs)} give {oh} x {ow} windows: the unfolded input "
                           "(N * C*kh*kw * OH*OW elements) would have more elements than fit in 64 bits.")
    if shape is None:
        check_allocation((xs[0], rows, positions), x._data.dtype)
    return (xs[0], rows, positions)


def _window_out(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


# out = im2col(x)
def unfold(x, kh, kw, sh, sw, ph, pw, dh=1, dw=1):
    _check_image(x, "unfold")
    shape = _check_window(x, kh, kw, sh, sw, ph, pw, "unfold", dh, dw)
    try:
        out = make_tensor(kernels.im2col(x._data, (kh, kw), (sh, sw), (ph, pw), dilation=(dh, dw)))
    except MemoryError:             # (numpy pads the input first: say what C++ would have allocated)
        raise cannot_allocate(shape, x._data.dtype) from None
    if any_requires_grad(x):
        record("unfold", out, (x,)).args = {"window": (kh, kw, sh, sw, ph, pw, dh, dw)}
    if forward_ad.active(): forward_ad.attach("unfold", out, (x,), window=(kh, kw, sh, sw, ph, pw, dh, dw))
    return out


# out = col2im(cols) (sums overlapping windows). cols must be exactly what unfold makes of an input of
# input_shape: the kernel trusts its shape.
def fold(cols, input_shape, kh, kw, sh, sw, ph, pw, dh=1, dw=1):
    input_shape = tuple(int(v) for v in input_shape)
    if len(input_shape) != 4 or min(input_shape) < 0:
        raise RuntimeError(f"fold: expected a 4-D output shape (N, C, H, W), got {shape_str(input_shape)}.")
    check_float(cols, "fold")
    _check_window(cols, kh, kw, sh, sw, ph, pw, "fold", dh, dw, shape=input_shape)
    n, c, h, w = input_shape
    expected = (n, c * kh * kw, _window_out(h, kh, sh, ph, dh) * _window_out(w, kw, sw, pw, dw))
    if tuple(cols.shape) != expected:
        raise RuntimeError(f"fold: expected columns of shape {shape_str(expected)} for an output of shape "
                           f"{shape_str(input_shape)}, got {shape_str(cols.shape)}.")
    out = make_tensor(kernels.col2im(cols._data, input_shape, (kh, kw), (sh, sw), (ph, pw), (dh, dw)))
    if any_requires_grad(cols):
        record("fold", out, (cols,)).args = {"window": (kh, kw, sh, sw, ph, pw, dh, dw)}
    if forward_ad.active(): forward_ad.attach("fold", out, (cols,), window=(kh, kw, sh, sw, ph, pw, dh, dw))
    return out


# conv2d = weight (O, C/G*kh*kw) @ im2col(x) (N, C*kh*kw, L), reshaped to (N, O, OH, OW). With G groups the
# columns split into G blocks of C/G*kh*kw rows (unfold orders rows by channel first) and the weight into G blocks
# of O/G filters: one batched product (G, O/G, K) @ (N, G, K, L) -> (N, G, O/G, L), which is (N, O, L).
def conv2d(x, w, bias, sh, sw, ph, pw, dh=1, dw=1, groups=1):
    _check_image(x, "conv2d")
    if w.ndim != 4:
        raise RuntimeError(f"conv2d: expected a 4-D weight (O, C, kh, kw), got shape {shape_str(w.shape)}.")
    if groups <= 0:
        raise RuntimeError(f"conv2d: groups must be positive, got {groups}.")
    if w.shape[0] % groups:
        raise RuntimeError(f"conv2d: the weight's {w.shape[0]} output channels are not divisible by groups={groups}.")
    if w.shape[1] * groups != x.shape[1]:
        raise RuntimeError(f"conv2d: input has {x.shape[1]} channels but the weight expects {w.shape[1] * groups} "
                           f"(input {shape_str(x.shape)}, weight {shape_str(w.shape)}, groups={groups}).")
    n, o, kh, kw = x.shape[0], w.shape[0], w.shape[2], w.shape[3]
    _check_window(x, kh, kw, sh, sw, ph, pw, "conv2d", dh, dw)
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != o):
        raise RuntimeError(f"conv2d: bias must have shape ({o},), got {shape_str(bias.shape)}.")
    oh, ow = _window_out(x.shape[2], kh, sh, ph, dh), _window_out(x.shape[3], kw, sw, pw, dw)
    k = w.shape[1] * kh * kw            # rows of one group's columns (sizes, not -1: N or O may be 0)
    if o // groups <= 8 and n != 1:     # Note [conv2d as one product] (csrc/dyngrad/ops_nn.cpp): the same graph
        rows = reshape(permute(unfold(x, kh, kw, sh, sw, ph, pw, dh, dw), (1, 0, 2)),
                       (k, n * oh * ow) if groups == 1 else (groups, k, n * oh * ow))
        out = matmul(reshape(w, (o, k)) if groups == 1 else reshape(w, (groups, o // groups, k)), rows)
        out = permute(reshape(out, (o, n, oh * ow)), (1, 0, 2))
        out = add(out, reshape(bias, (o, 1))) if bias is not None else contiguous(out)
        return reshape(out, (n, o, oh, ow))
    cols = unfold(x, kh, kw, sh, sw, ph, pw, dh, dw)
    if groups == 1:
        out = matmul(reshape(w, (o, k)), cols)                  # (N, O, L)
    else:
        out = reshape(matmul(reshape(w, (groups, o // groups, k)), reshape(cols, (n, groups, k, oh * ow))),
                      (n, o, oh * ow))
    if bias is not None:
        out = add(out, reshape(bias, (o, 1)))
    return reshape(out, (n, o, oh, ow))


def _check_pool_padding(kh, kw, ph, pw, op):
    if ph > kh // 2 or pw > kw // 2:
        raise RuntimeError(f"{op}: padding should be at most half of the kernel size, got padding ({ph}, {pw}) for "
                           f"kernel ({kh}, {kw}).")


def _pool_windows(x, kh, kw, sh, sw, ph, pw, op):
    """(N, C, kh*kw, L): every pooling window of every channel as a column."""
    _check_image(x, op)
    _check_window(x, kh, kw, sh, sw, ph, pw, op)
    _check_pool_padding(kh, kw, ph, pw, op)
    cols = unfold(x, kh, kw, sh, sw, ph, pw)               # (N, C*kh*kw, L)
    return reshape(cols, (x.shape[0], x.shape[1], kh * kw, -1))


def _pooled_shape(r, x, kh, kw, sh, sw, ph, pw):
    oh, ow = (x.shape[2] + 2 * ph - kh) // sh + 1, (x.shape[3] + 2 * pw - kw) // sw + 1
    return reshape(r, (x.shape[0], x.shape[1], oh, ow))


# Note [Max pooling by positions] (csrc/dyngrad/kernels/conv.cpp): the maximum's flat position in x, then take;
# the gradient is take's (the first maximum of each window takes all of it, as in torch).
def max_pool2d(x, kh, kw, sh, sw, ph, pw):
    _check_image(x, "max_pool2d")
    _check_window(x, kh, kw, sh, sw, ph, pw, "max_pool2d")
    _check_pool_padding(kh, kw, ph, pw, "max_pool2d")
    return take(x, make_tensor(kernels.max_pool2d_positions(x._data, (kh, kw), (sh, sw), (ph, pw))))


# avg_pool2d counts padded zeros in the average (torch's count_include_pad=True default)
def avg_pool2d(x, kh, kw, sh, sw, ph, pw):
    win = _pool_windows(x, kh, kw, sh, sw, ph, pw, "avg_pool2d")
    return _pooled_shape(mean(win, (2,), False), x, kh, kw, sh, sw, ph, pw)


from .ops_math import add, check_not_complex, matmul, mean  # noqa: E402
from .ops_shape import contiguous, permute, reshape, to_dtype  # noqa: E402
from .ops_index import take  # noqa: E402


# Note [Fused layer_norm] (csrc/dyngrad/ops_nn.cpp): one node; mean and 1/std per row from the input (in float64),
# recomputed by the backward from the saved input.
def layer_norm(x, weight, bias, ndims, eps):
    op = "layer_norm"
    check_float(x, op)
    if not 1 <= ndims <= x.ndim:
        raise RuntimeError(f"{op}: cannot normalise the last {ndims} dims of an input of shape {shape_str(x.shape)}.")
    norm_shape = tuple(x.shape[x.ndim - ndims:])
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            if tuple(t.shape) != norm_shape:
                raise RuntimeError(f"{op}: expected {name} of shape {shape_str(norm_shape)}, got "
                                   f"{shape_str(t.shape)}.")
            if t.dtype is not x.dtype:
                raise RuntimeError(f"{op}: expected {name} of the input's dtype {x.dtype.name}, got {t.dtype.name}.")
    if x.dtype.itemsize < 4:   # half types (bfloat16 too, a float32 array here): in float32, rounded back, as C++
        def wide(t):
            return to_dtype(t, _dt.float32) if t is not None else None
        return to_dtype(layer_norm(wide(x), wide(weight), wide(bias), ndims, eps), x.dtype)
    a = x._data
    axes = tuple(range(a.ndim - ndims, a.ndim))
    mu = a.mean(axis=axes, keepdims=True, dtype=np.float64)
    rstd = 1.0 / np.sqrt(((a - mu) ** 2).mean(axis=axes, keepdims=True) + eps)
    y = (a - mu.astype(a.dtype)) * rstd.astype(a.dtype)
    if weight is not None:
        y = y * weight._data
    if bias is not None:
        y = y + bias._data
    out = make_tensor(np.asarray(y, dtype=a.dtype, order="C"))
    if any_requires_grad(x, weight, bias):
        node = record("layer_norm", out, (x, weight, bias))
        node.save("a", x)
        node.save("weight", weight)
        node.args = {"ndims": ndims, "eps": eps}
    if forward_ad.active(): forward_ad.attach("layer_norm", out, (x, weight, bias), a=x, weight=weight, ndims=ndims, eps=eps)
    return out


# Note [Whole-sequence RNN layer] (csrc/dyngrad/ops_nn.cpp): one node for a layer's whole recurrence, given the
# input projection gi = x @ W_ih^T + b_ih of every step, (L, N, G*H). mode 0 tanh / 1 relu RNN, 2 LSTM, 3 GRU;
# reverse runs t = L-1 .. 0. out is (S, L, N, H): out[0] the hidden state after each time step, out[1] (LSTM) the
# cell state. ws keeps the gate activations the C++ backward reuses: LSTM (L, N, 5H) sigma(i), sigma(f), tanh(g),
# sigma(o), tanh(c'); GRU (L, N, 4H) r, z, n and the hidden part of n's pre-activation h @ W_hn^T + b_hn.
RNN_TANH, RNN_RELU, LSTM, GRU = 0, 1, 2, 3          # rnn_layer's modes (kernels.h's RnnMode)
RNN_GATES = {RNN_TANH: 1, RNN_RELU: 1, LSTM: 4, GRU: 3}  # gate blocks of H in gi and w_hh


def _check_rnn_inputs(op, gi, h0, c0, w_hh, b_hh, mode):
    if mode not in RNN_GATES:
        raise ValueError(f"{op}: mode must be 0 (tanh), 1 (relu), 2 (LSTM) or 3 (GRU), got {mode}.")
    if gi is None or h0 is None or gi.ndim != 3 or h0.ndim != 2:
        raise RuntimeError(f"{op}: expected gi of shape (L, N, G*H) and h0 of shape (N, H), got "
                           f"{shape_str(gi.shape) if gi is not None else 'None'} and "
                           f"{shape_str(h0.shape) if h0 is not None else 'None'}.")
    (L, N, _), H, G = gi.shape, h0.shape[1], RNN_GATES[mode]
    lstm = mode == LSTM
    if (c0 is not None) != lstm:
        raise RuntimeError(f"{op}: c0 is given exactly for an LSTM (mode 2).")
    shapes = [(gi, (L, N, G * H)), (h0, (N, H)), (w_hh, (G * H, H))] + ([(c0, (N, H))] if lstm else []) + \
        ([(b_hh, (G * H,))] if b_hh is not None else [])
    for t, want in shapes:
        if tuple(t.shape) != want or t.dtype is not gi.dtype:
            raise RuntimeError(f"{op}: expected a {gi.dtype.name} tensor of shape {shape_str(want)}, got "
                               f"{t.dtype.name} {shape_str(t.shape)}.")
    if gi.dtype not in (_dt.float32, _dt.float64):
        raise TypeError(f"{op}: expected float32 or float64 tensors, got {gi.dtype.name}.")


def rnn_layer(gi, h0, c0, w_hh, b_hh, mode, reverse):
    _check_rnn_inputs("rnn_layer", gi, h0, c0, w_hh, b_hh, mode)
    (L, N, _), H, G = gi.shape, h0.shape[1], RNN_GATES[mode]
    lstm = mode == LSTM
    x, w = gi._data, w_hh._data
    b = b_hh._data if b_hh is not None else np.zeros(G * H, dtype=x.dtype)
    h = h0._data
    c = c0._data if lstm else None
    out = np.empty((2 if lstm else 1, L, N, H), dtype=x.dtype)
    ws = np.empty((L, N, {LSTM: 5, GRU: 4}[mode] * H), dtype=x.dtype) if mode in (LSTM, GRU) else None
    for t in (range(L - 1, -1, -1) if reverse else range(L)):
        gh = h @ w.T + b
        if mode == LSTM:  # c' = s(f) c + s(i) tanh(g), h' = s(o) tanh(c')
            a = x[t] + gh
            si, sf, so = (kernels.sigmoid(a[:, k * H:(k + 1) * H]) for k in (0, 1, 3))
            tg = np.tanh(a[:, 2 * H:3 * H])
            c = sf * c + si * tg
            tc = np.tanh(c)
            h = so * tc
            out[1, t] = c
            ws[t] = np.concatenate([si, sf, tg, so, tc], axis=1)
        elif mode == GRU:  # r, z = s(.), n = tanh(gi_n + r gh_n), h' = (1 - z) n + z h
            r = kernels.sigmoid(x[t, :, :H] + gh[:, :H])
            z = kernels.sigmoid(x[t, :, H:2 * H] + gh[:, H:2 * H])
            n = np.tanh(x[t, :, 2 * H:] + r * gh[:, 2 * H:])
            h = n + z * (h - n)
            ws[t] = np.concatenate([r, z, n, gh[:, 2 * H:]], axis=1)
        else:
            a = x[t] + gh
            h = np.tanh(a) if mode == RNN_TANH else kernels.relu(a)
        out[0, t] = h
    result = make_tensor(out)
    if any_requires_grad(gi, h0, c0, w_hh, b_hh):
        node = record("rnn_layer", result, (gi, h0, c0, w_hh, b_hh))
        for name, t in (("gi", gi), ("h0", h0), ("c0", c0), ("w_hh", w_hh), ("b_hh", b_hh)):
            node.save(name, t)
        node.save("out", result, is_output=True)
        node.save("ws", make_tensor(ws) if ws is not None else None)
        node.args = {"mode": mode, "reverse": bool(reverse)}
    if forward_ad.active(): forward_ad.attach("rnn_layer", result, (gi, h0, c0, w_hh, b_hh), gi=gi, h0=h0, c0=c0, w_hh=w_hh, b_hh=b_hh, mode=mode, reverse=bool(reverse))
    return result


def _unrecorded_definition(name, *args):
    """A fused derivative's values from its differentiable definition in derivatives.py (the reference has no fused
    kernel to mirror), computed without recording."""
    from . import derivatives            # (derivatives.py imports this module)
    with GradModeGuard(False):
        return getattr(derivatives, name)(*args)


# layer_norm's gradients (da, dweight, dbias), None where output_mask says no (dweight also without a weight)
def layer_norm_backward(grad, a, weight, ndims, eps, output_mask):
    op = "layer_norm_backward"
    check_float(a, op)
    if not 1 <= ndims <= a.ndim:
        raise RuntimeError(f"{op}: cannot normalise the last {ndims} dims of an input of shape {shape_str(a.shape)}.")
    norm_shape = tuple(a.shape[a.ndim - ndims:])
    if grad.shape != a.shape or not grad.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating-point gradient of the input's shape {shape_str(a.shape)}, got "
                           f"{grad.dtype.name} {shape_str(grad.shape)}.")
    if weight is not None and (tuple(weight.shape) != norm_shape or weight.dtype is not a.dtype):
        raise RuntimeError(f"{op}: expected a {a.dtype.name} weight of shape {shape_str(norm_shape)}.")
    dtype = _dt.promote(grad.dtype, a.dtype)
    compute = _dt.float32 if dtype.itemsize == 2 else dtype

    def wide(t):
        return t if t is None or t.dtype is compute else make_tensor(compute.cast(t._data))
    values = _unrecorded_definition("layer_norm_backward_definition", wide(grad), wide(a), wide(weight), ndims, eps)
    outs = [make_tensor(fresh(dtype.cast(v._data))) if v is not None and keep else None
            for v, keep in zip(values, output_mask)]
    if any_requires_grad(grad, a, weight):
        node = record_outputs(op, outs, (grad, a, weight))
        node.save("grad", grad)
        node.save("a", a)
        node.save("weight", weight)
        node.args = {"ndims": ndims, "eps": eps}
    if forward_ad.active(): forward_ad.attach(op, outs, (grad, a, weight), grad=grad, a=a, weight=weight, ndims=ndims, eps=eps)
    return tuple(outs)


# rnn_layer's gradients (dgi, dh0, dc0, dw_hh, db_hh), None where output_mask says no or the input is absent; ws,
# the gate activations the C++ kernel reads, is checked but not needed here
def rnn_layer_backward(grad, gi, h0, c0, w_hh, b_hh, out, ws, mode, reverse, output_mask):
    op = "rnn_layer_backward"
    _check_rnn_inputs(op, gi, h0, c0, w_hh, b_hh, mode)
    (L, N, _), H = gi.shape, h0.shape[1]
    out_shape = (2 if mode == LSTM else 1, L, N, H)
    if out is None or tuple(out.shape) != out_shape or out.dtype is not gi.dtype:
        raise RuntimeError(f"{op}: expected rnn_layer's {gi.dtype.name} output of shape {shape_str(out_shape)}.")
    if grad is None or tuple(grad.shape) != out_shape or not grad.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating-point gradient of shape {shape_str(out_shape)}, got "
                           f"{shape_str(grad.shape) if grad is not None else 'None'}.")
    gated = mode in (LSTM, GRU)
    ws_shape = (L, N, (5 if mode == LSTM else 4) * H)
    if gated and (ws is None or tuple(ws.shape) != ws_shape or ws.dtype is not gi.dtype):
        raise RuntimeError(f"{op}: expected the gate activations of rnn_layer's forward, of shape "
                           f"{shape_str(ws_shape)}.")
    if not gated and ws is not None:
        raise RuntimeError(f"{op}: a plain RNN keeps no gate activations (ws is None).")
    if grad.dtype is not gi.dtype:
        grad = make_tensor(gi.dtype.cast(grad._data))
    values = _unrecorded_definition("rnn_layer_backward_definition", grad, gi, h0, c0, w_hh, b_hh, out, mode,
                                    bool(reverse))
    outs = [v if v is not None and keep else None for v, keep in zip(values, output_mask)]
    if any_requires_grad(grad, gi, h0, c0, w_hh, b_hh, out):
        node = record_outputs(op, outs, (grad, gi, h0, c0, w_hh, b_hh, out, None))
        for name, t in (("grad", grad), ("gi", gi), ("h0", h0), ("c0", c0), ("w_hh", w_hh), ("b_hh", b_hh),
                        ("out", out)):
            node.save(name, t)
        node.args = {"mode": mode, "reverse": bool(reverse)}
    if forward_ad.active(): forward_ad.attach(op, outs, (grad, gi, h0, c0, w_hh, b_hh, out, None), grad=grad, gi=gi, h0=h0, c0=c0, w_hh=w_hh, b_hh=b_hh, out=out, mode=mode, reverse=bool(reverse))
    return tuple(outs)


# Note [Fused attention] (csrc/dyngrad/ops_nn.cpp): softmax(scale q k^T + mask) v as one node saving the output and
# each query row's logsumexp; here computed whole in numpy (the C++ kernel tiles and runs an online softmax). The
# dropout mask is the C++ kernel's, bit for bit (kernels.attention_keep_scale: Note [Dropout inside attention]).
def _attention_inputs(q, k, v, mask, is_causal, dropout_p, op):
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t is None or t.ndim < 2:
            raise RuntimeError(f"{op}: expected {name} to be at least 2-D, got "
                               f"{shape_str(t.shape) if t is not None else 'None'}.")
    if q.dtype not in (_dt.float32, _dt.float64):
        raise TypeError(f"{op}: expected float32 or float64 query, key and value, got {q.dtype.name}.")
    if k.dtype is not q.dtype or v.dtype is not q.dtype:
        raise TypeError(f"{op}: expected query, key and value of one dtype, got {q.dtype.name}, {k.dtype.name} and "
                        f"{v.dtype.name}.")
    e, lk = q.shape[-1], k.shape[-2]
    if k.shape[-1] != e:
        raise RuntimeError(f"{op}: expected key's last dim to be query's ({e}), got shape {shape_str(k.shape)}.")
    if v.shape[-2] != lk:
        raise RuntimeError(f"{op}: expected value to have key's length {lk} in dim -2, got shape "
                           f"{shape_str(v.shape)}.")
    if not 0 <= dropout_p <= 1:
        raise RuntimeError(f"{op}: dropout_p must be in [0, 1], got {dropout_p}.")
    if is_causal and mask is not None:
        raise RuntimeError(f"{op}: attn_mask must not be given when is_causal=True.")
    try:
        batch = np.broadcast_shapes(tuple(q.shape[:-2]), tuple(k.shape[:-2]), tuple(v.shape[:-2]))
    except ValueError:
        raise RuntimeError(f"{op}: the batch dims of query {shape_str(q.shape)}, key {shape_str(k.shape)} and value "
                           f"{shape_str(v.shape)} do not broadcast.") from None
    additive = None
    if mask is not None:
        if mask.requires_grad:
            raise RuntimeError(f"{op}: the fused kernel does not differentiate attn_mask; got a mask that requires "
                               "grad.")
        if mask.dtype is not _dt.bool_ and not mask.dtype.is_floating_point:
            raise TypeError(f"{op}: expected attn_mask to be bool or floating point, got {mask.dtype.name}.")
        full_shape = tuple(batch) + (q.shape[-2], lk)
        try:
            ok = np.broadcast_shapes(tuple(mask.shape), full_shape) == full_shape
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(f"{op}: attn_mask of shape {shape_str(mask.shape)} does not broadcast to the scores' "
                               f"shape {shape_str(full_shape)}.")
        dt = q._data.dtype
        if mask.dtype is _dt.bool_:
            additive = make_tensor(np.where(mask._data, dt.type(0), dt.type(-np.inf)).astype(dt))
        else:
            additive = mask if mask.dtype is q.dtype else make_tensor(mask._data.astype(dt))
    return tuple(batch), additive


def _attention_values(q, k, v, mask, is_causal, scale, dropout_p, seed, batch):
    """(out, lse) as numpy arrays."""
    dt = q.dtype
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * dt.type(scale)
    s = np.broadcast_to(s, tuple(batch) + s.shape[-2:])
    if mask is not None:
        s = s + mask
    if is_causal:
        s = s + kernels.attention_causal_bias(s.shape[-2], s.shape[-1], dt)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        m = s.max(axis=-1, keepdims=True) if s.shape[-1] else np.full(s.shape[:-1] + (1,), -np.inf, dt)
        dead = m == -np.inf
        m0 = np.where(dead, dt.type(0), m)
        e = np.exp(s - m0)
        total = e.sum(axis=-1, keepdims=True)
        p = np.where(dead, dt.type(0), e / np.where(dead, dt.type(1), total))
        lse = np.where(dead, dt.type(-np.inf), m0 + np.log(np.where(dead, dt.type(1), total)))[..., 0]
    if dropout_p > 0:
        p = p * kernels.attention_keep_scale(batch, s.shape[-2], s.shape[-1], dropout_p, seed, dt)
    out = np.matmul(p, v)
    out = np.broadcast_to(out, tuple(batch) + out.shape[-2:])
    return np.ascontiguousarray(out, dtype=dt), np.ascontiguousarray(lse, dtype=dt)


def attention(q, k, v, mask, is_causal, scale, dropout_p, seed):
    op = "attention"
    if seed < 0:    # drawn here (the C++ binding's twin): randint(0, 2**62, (), int64).item()
        from .rng import randint
        seed = int(randint(0, 2 ** 62, (), _dt.int64)._data.item())
    batch, additive = _attention_inputs(q, k, v, mask, is_causal, dropout_p, op)
    out_arr, lse_arr = _attention_values(q._data, k._data, v._data, None if additive is None else additive._data,
                                         is_causal, scale, dropout_p, seed, batch)
    out, lse = make_tensor(out_arr), make_tensor(lse_arr)
    if any_requires_grad(q, k, v):
        node = record(op, out, (q, k, v))
        node.save("q", q)
        node.save("k", k)
        node.save("v", v)
        node.save("mask", additive)
        node.save("out", out, is_output=True)
        node.save("lse", lse)
        node.args = {"is_causal": is_causal, "scale": scale, "dropout_p": dropout_p, "seed": seed}
    if forward_ad.active(): forward_ad.attach(op, out, (q, k, v), q=q, k=k, v=v, mask=additive, out=out, lse=lse, is_causal=is_causal, scale=scale, dropout_p=dropout_p, seed=seed)
    return out


# attention's gradients (dq, dk, dv), None where output_mask says no; out and lse (the forward's) are checked, not
# needed: the values come from the differentiable definition (derivatives.py), computed without recording
def attention_backward(grad, q, k, v, mask, out, lse, is_causal, scale, dropout_p, seed, output_mask):
    op = "attention_backward"
    batch, additive = _attention_inputs(q, k, v, mask, is_causal, dropout_p, op)
    lq, lk, e, ev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    out_shape = tuple(batch) + (lq, ev)
    if grad is None or tuple(grad.shape) != out_shape or not grad.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating-point gradient of the output's shape {shape_str(out_shape)}, "
                           f"got {grad.dtype.name + ' ' + shape_str(grad.shape) if grad is not None else 'None'}.")
    if (out is None) != (lse is None):
        raise RuntimeError(f"{op}: out and lse are given together or not at all.")
    if out is not None and (tuple(out.shape) != out_shape or tuple(lse.shape) != tuple(batch) + (lq,)
                            or out.dtype is not q.dtype or lse.dtype is not q.dtype):
        raise RuntimeError(f"{op}: expected out of shape {shape_str(out_shape)} and lse of shape "
                           f"{shape_str(tuple(batch) + (lq,))} in the query's dtype.")
    g = grad if grad.dtype is q.dtype else make_tensor(grad._data.astype(q._data.dtype))
    values = _unrecorded_definition("attention_backward_definition", g, q, k, v, additive, is_causal, scale,
                                    dropout_p, seed)
    shapes = (tuple(batch) + (lq, e), tuple(batch) + (lk, e), tuple(batch) + (lk, ev))
    outs = [make_tensor(fresh(np.ascontiguousarray(np.broadcast_to(t._data, shape), dtype=q._data.dtype)))
            if keep else None for t, shape, keep in zip(values, shapes, output_mask)]
    if any_requires_grad(grad, q, k, v):
        node = record_outputs(op, outs, (grad, q, k, v))
        node.save("grad", grad)
        node.save("q", q)
        node.save("k", k)
        node.save("v", v)
        node.save("mask", additive)
        node.args = {"is_causal": is_causal, "scale": scale, "dropout_p": dropout_p, "seed": seed}
    if forward_ad.active(): forward_ad.attach(op, outs, (grad, q, k, v), grad=grad, q=q, k=k, v=v, mask=additive, is_causal=is_causal, scale=scale, dropout_p=dropout_p, seed=seed)
    return tuple(outs)
