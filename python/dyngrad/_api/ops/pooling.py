"""Pooling with torch.nn.functional's signatures: max_pool1d/2d/3d (dilation, ceil_mode, return_indices),
avg_pool1d/2d/3d (ceil_mode, count_include_pad, divisor_override), adaptive_avg/max_pool1d/2d/3d,
lp_pool1d/2d/3d and max_unpool1d/2d/3d, for batched and unbatched inputs.

The common cases (max and average pooling without dilation or indices, whose ceil_mode changes nothing) run the
core's fused max_pool2d / avg_pool2d (a 1-D pool is a 2-D pool of height 1). Everything else is one gather of
the pooling windows (Note [Pooling as a gather]).
"""
import math

import numpy as np

from ... import _C
from .. import bridge
from ..args import INT64_MAX, refuse_complex, shape_str, tensor_arg, to_int, type_name
from ..node_names import rename
from .indexing import _extreme

# Note [Pooling as a gather]
# Every pooling op reads, for each output position o of a channel's plane (the last 1 to 3 dims, P elements),
# a window of K plane positions: pos[o, j] (row-major over the window's dims, the order torch visits them in). A
# position outside the input (padding, or the unused tail of a short adaptive window) is the sentinel P, which
# reads one extra column of `fill` appended to the (M, P) view of the input (M = every leading dim):
#     windows = index_select(cat([x(M, P), fill(M, 1)], 1), 1, pos.flat)       (M, O, K)
# Average pooling sums the windows (fill 0) and divides by torch's divisor for each o. Max pooling (fill the
# lowest value) takes each window's argmax j* (torch's winner: the first maximum, or the last NaN), the plane
# position pos[o, j*] is the returned index, and the value is gathered at that index, so that the gradient goes
# to that one element as in torch. A window whose maximum is -inf could pick a padding sentinel; torch then
# answers the window's first position inside the input, and so do we. A dilated window can hold no position of the
# input at all (taps at -1 and 1 of a size-1 dim): its maximum is the fill (-inf), its index -1 and no gradient
# flows from it (torch returns an index outside the input there, and its backward writes through it).


# ----- arguments -------------------------------------------------------------------------------------------------

def _node(n, name):
    """torch's node name for a pool of n dims (a 1-D pool is a squeezed 2-D one there)."""
    return "SqueezeBackward" if n == 1 else f"{name}{n}D" + ("WithIndices" if name == "MaxPool" else "") + "Backward"


def _ints(o, n, op, name):
    """An int or a sequence of 1 or n ints (kernel_size, stride, padding, dilation), as n ints."""
    if isinstance(o, (int, np.integer)) and not isinstance(o, bool):
        return (int(o),) * n
    if isinstance(o, (tuple, list)):
        values = tuple(to_int(v, op, name, TypeError) for v in o)
        if len(values) == 1:
            return values * n
        if len(values) == n:
            return values
        raise RuntimeError(f"{op}: {name} must be an int or a tuple of {n} int{'s' if n > 1 else ''}, got "
                           f"{len(values)} values.")
    raise TypeError(f"{op}: expected an int or a tuple of ints as {name}, got {type_name(o)}.")


def _stride(stride, kernel, n, op):
    """torch's default stride (None or an empty sequence) is the kernel size."""
    if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0):
        return kernel
    return _ints(stride, n, op, "stride")


def _check_input(x, n, op, adaptive=False):
    """A (N, C, *spatial) or unbatched (C, *spatial) input, non-empty except the batch dim."""
    if x.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"{op}: expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) input, got shape "
                           f"{shape_str(x.shape)}.")
    for d in range(1 if x.ndim == n + 2 else 0, x.ndim):
        if x.shape[d] == 0:
            raise RuntimeError(f"{op}: expected non-empty dimensions other than the batch dimension, got shape "
                               f"{shape_str(x.shape)} (dimension {d} is empty).")
    refuse_complex(op, x)
    if x.dtype is _C.bool or (adaptive and not x.dtype.is_floating_point):
        raise NotImplementedError(f"{op}: not implemented for {x.dtype.name} tensors.")


def check_elements(count, what, op):
    """numpy silently makes empty ranges beyond int64 (np.arange(2**63 - 1) is empty): refuse them first."""
    if count > INT64_MAX:
        raise RuntimeError(f"{op}: {what} would have {count} elements, more elements than fit in 64 bits.")


def _output_size(size, k, s, p, d, ceil_mode):
    """torch's pooling output size; with ceil_mode the last window must start inside the input or the left
    padding."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _geometry(x, n, kernel, stride, padding, dilation, ceil_mode, op):
    """The checked window arguments and output sizes of a max/avg pool (torch's checks, in torch's order)."""
    k = _ints(kernel, n, op, "kernel_size")
    s = _stride(stride, k, n, op)
    p = _ints(padding, n, op, "padding")
    d = _ints(dilation, n, op, "dilation")
    if any(v <= 0 for v in k):
        raise RuntimeError(f"{op}: kernel_size must be greater than zero, got {k}.")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"{op}: stride must be greater than zero, got {s}.")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"{op}: dilation must be greater than zero, got {d}.")
    if any(v < 0 for v in p):
        raise RuntimeError(f"{op}: padding must be non-negative, got {p}.")
    if any(pv > kv // 2 for pv, kv in zip(p, k)):
        raise RuntimeError(f"{op}: padding {p} is too large: it should be at most half of the kernel size {k}.")
    _check_input(x, n, op)
    spatial = tuple(x.shape[-n:])
    outs = tuple(_output_size(*args, bool(ceil_mode)) for args in zip(spatial, k, s, p, d))
    if any(o < 1 for o in outs):
        raise RuntimeError(f"{op}: the output size {outs} is too small: kernel {k}, stride {s}, padding {p} and "
                           f"dilation {d} on an input of shape {shape_str(x.shape)} leave no window.")
    check_elements(math.prod(x.shape[:-n]) * math.prod(outs) * math.prod(k), "the pooling windows", op)
    return k, s, p, d, outs


# ----- windows ---------------------------------------------------------------------------------------------------

def _combine(dims):
    """Plane positions (O, K) and validity from per-dim (positions (o, k), valid, size) lists (row-major)."""
    pos, valid = dims[0][0], dims[0][1]
    for i, ok, size in dims[1:]:
        o, k = i.shape
        pos = (pos[:, None, :, None] * size + i[None, :, None, :]).reshape(pos.shape[0] * o, pos.shape[1] * k)
        valid = (valid[:, None, :, None] & ok[None, :, None, :]).reshape(pos.shape)
    return pos, valid


def _reach(size, k, s, p, d, o):
    """A range of kernel taps [lo, hi) holding every tap that some window puts inside [0, size) (tap j of window w
    reads w*s - p + j*d), of at most (size + (o-1)*s) / d + 1 taps. The other taps read padding in every window,
    which never wins a max nor adds to a sum, so the windows leave them out and a kernel far larger than the input
    costs no more than the input (2**20 with padding 2**19 on 4x4). If no tap can reach the input (a dilated
    kernel stepping over a size-1 dim), one tap is kept: every window is empty."""
    lo = max(0, -(((o - 1) * s - p) // d))                # ceil((p - (o-1)*s) / d): the last window reaches 0
    hi = min(k, (size - 1 + p) // d + 1)                  # the first window still inside below size
    return (lo, hi) if lo < hi else (min(lo, k - 1), min(lo, k - 1) + 1)


def _sliding(spatial, k, s, p, d, outs):
    """(positions (O, K) with the sentinel P outside the input, first position inside the input per window)."""
    dims = []
    for size, kk, ss, pp, dd, o in zip(spatial, k, s, p, d, outs):
        lo, hi = _reach(size, kk, ss, pp, dd, o)
        i = (np.arange(o, dtype=np.int64) * ss - pp)[:, None] + np.arange(lo, hi, dtype=np.int64) * dd
        dims.append((i, (i >= 0) & (i < size), size))
    pos, valid = _combine(dims)
    plane = math.prod(spatial)
    first = np.where(valid.any(1), pos[np.arange(pos.shape[0]), np.argmax(valid, 1)], plane)
    return np.where(valid, pos, plane), first


def _adaptive(spatial, outs):
    """Adaptive windows: output o of a dim of size L reads [floor(o L / O), ceil((o + 1) L / O))."""
    dims = []
    for size, o in zip(spatial, outs):
        r = np.arange(o, dtype=np.int64)
        start, end = (r * size) // o, -((-(r + 1) * size) // o)
        i = start[:, None] + np.arange(int((end - start).max()), dtype=np.int64)
        dims.append((i, i < end[:, None], size))
    pos, valid = _combine(dims)
    return np.where(valid, pos, math.prod(spatial)), pos[:, 0]


def _windows(x, n, positions, fill):
    """(cat of x as (M, P) with a fill column, the windows (M, O, K)) (Note [Pooling as a gather])."""
    lead = tuple(x.shape[:-n])
    m, plane = math.prod(lead), math.prod(x.shape[-n:])
    flat = _C.reshape(x, (m, plane))
    padded = _C.cat([flat, _C.full((m, 1), fill, x.dtype)], 1)
    index = bridge.copy(np.asarray(positions.reshape(-1), order="C"), False)
    win = _C.reshape(_C.index_select(padded, 1, index), (m,) + positions.shape)
    return padded, win


def _max_windows(x, n, positions, first, outs):
    """(values, indices) of max pooling over the windows, both of shape lead + outs."""
    padded, win = _windows(x, n, positions, _extreme(x.dtype, False))
    w = bridge.host_array(win.detach())
    arg = np.argmax(w, -1)
    if x.dtype.is_floating_point:       # torch: a NaN wins, and a later NaN replaces an earlier one
        nan = np.isnan(w)
        if nan.any():
            arg = np.where(nan.any(-1), w.shape[-1] - 1 - np.argmax(nan[..., ::-1], -1), arg)
    idx = positions[np.arange(positions.shape[0]), arg]                 # (M, O)
    plane = math.prod(x.shape[-n:])
    idx = np.where(idx == plane, first, idx)                            # an all -inf window (see the Note)
    out_shape = tuple(x.shape[:-n]) + tuple(outs)
    index = bridge.copy(np.asarray(idx, dtype=np.int64, order="C"), False)
    values = _C.reshape(_C.gather(padded, 1, index), out_shape)
    if (idx == plane).any():                                            # a window with no input position
        index = bridge.copy(np.asarray(np.where(idx == plane, -1, idx), order="C"), False)
    return values, _C.reshape(index, out_shape)


def _sum_divided(x, n, positions, divisor, outs):
    """Each window's sum divided by divisor (O,): float division, or C's truncating one for int64 (torch)."""
    if x.dtype in (_C.float16, _C.bfloat16):       # in float32, rounded once, as torch
        return _C.to_dtype(_sum_divided(_C.to_dtype(x, _C.float32), n, positions, divisor, outs), x.dtype)
    _, win = _windows(x, n, positions, 0)
    total = _C.sum(win, (2,), False)
    out_shape = tuple(x.shape[:-n]) + tuple(outs)
    if x.dtype.is_floating_point:
        div = bridge.copy(divisor.astype(np.dtype(x.dtype.name)), False)
        return _C.reshape(_C.div(total, div), out_shape)
    t = bridge.view(total)
    q = np.abs(t) // divisor.astype(np.int64) * np.sign(t)
    return bridge.copy(np.asarray(q.reshape(out_shape), order="C"), False)


def _as_2d(x, n):
    """x as a 4-D (N, C, H, W) view for the core's 2-D pools (a 1-D pool is a pool of height 1)."""
    if x.ndim == n + 1:
        x = _C.unsqueeze(x, 0)
    return _C.unsqueeze(x, 2) if n == 1 else x


def _fast(x, n, k, s, p, outs, core):
    """The core's fused 2-D pool (no dilation, no indices, no ceil_mode effect); an empty batch is all zeros."""
    if x.numel() == 0:
        return _C.add(_C.full(tuple(x.shape[:-n]) + tuple(outs), 0, x.dtype), _C.sum(x, (), False))
    kk, ss, pp = ((1,) + k, (1,) + s, (0,) + p) if n == 1 else (k, s, p)
    out = core(_as_2d(x, n), kk[0], kk[1], ss[0], ss[1], pp[0], pp[1])
    return _C.reshape(out, tuple(x.shape[:-n]) + tuple(outs))


def _unceiled(x, n, k, s, p, d, outs):
    """ceil_mode changed nothing: the floor-mode sizes are the same."""
    return outs == tuple(_output_size(*a, False) for a in zip(x.shape[-n:], k, s, p, d))


# ----- max and average pooling -----------------------------------------------------------------------------------

def _max_pool(x, n, kernel_size, stride, padding, dilation, ceil_mode, return_indices, op):
    x = tensor_arg(x, op)
    k, s, p, d, outs = _geometry(x, n, kernel_size, stride, padding, dilation, ceil_mode, op)
    if (n < 3 and not return_indices and x.dtype.is_floating_point and all(v == 1 for v in d)
            and _unceiled(x, n, k, s, p, d, outs)):
        return rename(_fast(x, n, k, s, p, outs, _C.max_pool2d), _node(n, "MaxPool"), (x,))
    positions, first = _sliding(tuple(x.shape[-n:]), k, s, p, d, outs)
    values, indices = _max_windows(x, n, positions, first, outs)
    rename(values, _node(n, "MaxPool"), (x,))
    return (values, indices) if return_indices else values


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """(values, indices) of max_pool1d."""
    return _max_pool(input, 1, kernel_size, stride, padding, dilation, ceil_mode, True, "max_pool1d")


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """(values, indices) of max_pool2d."""
    return _max_pool(input, 2, kernel_size, stride, padding, dilation, ceil_mode, True, "max_pool2d")


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over sliding windows of the last dim of (N, C, L) or (C, L); with return_indices also the position
    of each maximum within L."""
    return _max_pool(input, 1, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool1d")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over sliding windows of the last 2 dims of (N, C, H, W) or (C, H, W); with return_indices also the
    flat position (h * W + w) of each maximum."""
    return _max_pool(input, 2, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool2d")


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over sliding windows of the last 3 dims of (N, C, D, H, W) or (C, D, H, W); with return_indices also
    the flat position (d * H * W + h * W + w) of each maximum."""
    return _max_pool(input, 3, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool3d")


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """(values, indices) of max_pool3d."""
    return _max_pool(input, 3, kernel_size, stride, padding, dilation, ceil_mode, True, "max_pool3d")


def _avg_divisor(spatial, k, s, p, outs, count_include_pad, divisor_override):
    """torch's divisor per output position: the override, or the window's size clipped to the padded input
    (count_include_pad) or to the input."""
    if divisor_override is not None:
        return np.full(math.prod(outs), divisor_override, dtype=np.int64)
    div = np.ones(1, dtype=np.int64)
    for size, kk, ss, pp, o in zip(spatial, k, s, p, outs):
        start = np.arange(o, dtype=np.int64) * ss - pp
        end = np.minimum(start + kk, size + pp)
        n = end - start if count_include_pad else np.minimum(end, size) - np.maximum(start, 0)
        div = (div[:, None] * n[None, :]).reshape(-1)
    return div


def _avg_pool(x, n, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, op):
    x = tensor_arg(x, op)
    k, s, p, d, outs = _geometry(x, n, kernel_size, stride, padding, 1, ceil_mode, op)
    if divisor_override is not None:
        divisor_override = to_int(divisor_override, op, "divisor_override")
        if divisor_override == 0:
            raise RuntimeError(f"{op}: divisor_override must not be zero.")
    if n == 3 and any(size < kk for size, kk in zip(x.shape[-n:], k)):      # torch's avg_pool3d check
        raise RuntimeError(f"{op}: the input's spatial size {tuple(x.shape[-n:])} is smaller than the kernel size {k} "
                           "(avg_pool3d needs every input dim, without padding, to be at least the kernel's).")
    name = _node(n, "AvgPool")
    if (n < 3 and x.dtype.is_floating_point and divisor_override is None and (count_include_pad or not any(p))
            and _unceiled(x, n, k, s, p, d, outs) and all(kk <= size for kk, size in zip(k, x.shape[-n:]))):
        return rename(_fast(x, n, k, s, p, outs, _C.avg_pool2d), name, (x,))
    spatial = tuple(x.shape[-n:])
    positions, _ = _sliding(spatial, k, s, p, d, outs)
    divisor = _avg_divisor(spatial, k, s, p, outs, count_include_pad, divisor_override)
    return rename(_sum_divided(x, n, positions, divisor, outs), name, (x,))


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Mean over sliding windows of the last dim of (N, C, L) or (C, L)."""
    return _avg_pool(input, 1, kernel_size, stride, padding, ceil_mode, count_include_pad, None, "avg_pool1d")


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over sliding windows of the last 2 dims of (N, C, H, W) or (C, H, W); padded zeros count unless
    count_include_pad=False; divisor_override replaces the window size as the divisor."""
    return _avg_pool(input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                     "avg_pool2d")


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over sliding windows of the last 3 dims of (N, C, D, H, W) or (C, D, H, W)."""
    return _avg_pool(input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                     "avg_pool3d")


# ----- adaptive pooling ------------------------------------------------------------------------------------------

def _adaptive_size(output_size, x, n, op):
    """output_size as n ints; None keeps the input's size along that dim."""
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != n:
            raise RuntimeError(f"{op}: output_size must have {n} element{'s' if n > 1 else ''}, got "
                               f"{len(output_size)}.")
        sizes = tuple(x.shape[x.ndim - n + i] if v is None else to_int(v, op, "output_size", TypeError)
                      for i, v in enumerate(output_size))
    else:
        sizes = (to_int(output_size, op, "output_size", TypeError),) * n
    if any(v < 0 for v in sizes):
        raise RuntimeError(f"{op}: output_size must be non-negative, got {sizes}.")
    check_elements(math.prod(x.shape) * math.prod(sizes), "the pooling windows", op)
    return sizes


def _adaptive_pool(x, n, output_size, is_max, return_indices, op):
    x = tensor_arg(x, op)
    _check_input(x, n, op, adaptive=True)
    outs = _adaptive_size(output_size, x, n, op)
    spatial = tuple(x.shape[-n:])
    name = _node(n, "AdaptiveMaxPool" if is_max else "AdaptiveAvgPool")
    out_shape = tuple(x.shape[:-n]) + outs
    if 0 in outs:
        empty = _C.full(out_shape, 0, x.dtype)
        return (empty, _C.full(out_shape, 0, _C.int64)) if return_indices else empty
    if not return_indices and all(size % o == 0 for size, o in zip(spatial, outs)):
        # equal windows that tile the input: an ordinary pool with kernel = stride = size / out
        k = tuple(size // o for size, o in zip(spatial, outs))
        if not is_max and all(o == 1 for o in outs):
            return rename(_C.mean(x, tuple(range(x.ndim - n, x.ndim)), True), name, (x,))
        if n < 3:
            out = _fast(x, n, k, k, (0,) * n, outs, _C.max_pool2d if is_max else _C.avg_pool2d)
            return rename(out, name, (x,))
    positions, first = _adaptive(spatial, outs)
    if is_max:
        values, indices = _max_windows(x, n, positions, first, outs)
        rename(values, name, (x,))
        return (values, indices) if return_indices else values
    sizes = (positions != math.prod(spatial)).sum(1)
    return rename(_sum_divided(x, n, positions, sizes, outs), name, (x,))


def adaptive_avg_pool1d(input, output_size):
    """Mean over output_size windows that cover the last dim of (N, C, L) or (C, L)."""
    return _adaptive_pool(input, 1, output_size, False, False, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input, output_size):
    """Mean over (oh, ow) windows that cover the last 2 dims; None in output_size keeps that size."""
    return _adaptive_pool(input, 2, output_size, False, False, "adaptive_avg_pool2d")


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max over output_size windows that cover the last dim, with the indices of the maxima if asked."""
    return _adaptive_pool(input, 1, output_size, True, return_indices, "adaptive_max_pool1d")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max over (oh, ow) windows that cover the last 2 dims, with the flat indices of the maxima if asked."""
    return _adaptive_pool(input, 2, output_size, True, return_indices, "adaptive_max_pool2d")


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return _adaptive_pool(input, 1, output_size, True, True, "adaptive_max_pool1d")


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return _adaptive_pool(input, 2, output_size, True, True, "adaptive_max_pool2d")


def adaptive_avg_pool3d(input, output_size):
    """Mean over (od, oh, ow) windows that cover the last 3 dims; None in output_size keeps that size."""
    return _adaptive_pool(input, 3, output_size, False, False, "adaptive_avg_pool3d")


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max over (od, oh, ow) windows that cover the last 3 dims, with the flat indices of the maxima if asked."""
    return _adaptive_pool(input, 3, output_size, True, return_indices, "adaptive_max_pool3d")


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return _adaptive_pool(input, 3, output_size, True, True, "adaptive_max_pool3d")


# ----- power-average pooling -------------------------------------------------------------------------------------

def _lp_pool(x, n, norm_type, kernel_size, stride, ceil_mode, op):
    """(sum over the window of x^p)^(1/p), computed as torch does: avg_pool(x^p) * K, then sign * relu(|.|) (so
    that an all-zero window has a zero gradient) to the power 1/p; p = +-inf is a max pool of |x| (of -|x|)."""
    x = tensor_arg(x, op)
    refuse_complex(op, x)
    k = _ints(kernel_size, n, op, "kernel_size")
    pool = (max_pool1d, max_pool2d, max_pool3d)[n - 1]
    p = norm_type.item() if isinstance(norm_type, _C.Tensor) else norm_type
    if not isinstance(p, (int, float)) or isinstance(p, bool):
        raise TypeError(f"{op}: expected a number as norm_type, got {type_name(norm_type)}.")
    if p == math.inf:
        return pool(_C.abs(x), kernel_size, stride, 0, 1, ceil_mode)
    if p == -math.inf:
        return _C.neg(pool(_C.neg(_C.abs(x)), kernel_size, stride, 0, 1, ceil_mode))
    avg = (avg_pool1d, avg_pool2d, avg_pool3d)[n - 1]
    out = avg(_C.pow_scalar(x, float(p)), kernel_size, stride, 0, ceil_mode)
    out = _C.mul(_C.mul(_C.sign(out), _C.relu(_C.abs(out))), _C.scalar_operand(math.prod(k), out))
    return _C.pow_scalar(out, 1.0 / p)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling over the last dim: (sum of x^p over each window)^(1/p)."""
    return _lp_pool(input, 1, norm_type, kernel_size, stride, ceil_mode, "lp_pool1d")


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling over the last 2 dims: (sum of x^p over each window)^(1/p)."""
    return _lp_pool(input, 2, norm_type, kernel_size, stride, ceil_mode, "lp_pool2d")


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling over the last 3 dims: (sum of x^p over each window)^(1/p)."""
    return _lp_pool(input, 3, norm_type, kernel_size, stride, ceil_mode, "lp_pool3d")


# ----- max unpooling ---------------------------------------------------------------------------------------------

def _unpool_size(x, n, k, s, p, output_size, op):
    """torch's rule: the default (in - 1) * stride + kernel - 2 * padding, or output_size (its last n entries
    if it has n + 2) strictly within stride of the default."""
    default = tuple((x.shape[x.ndim - n + i] - 1) * s[i] + k[i] - 2 * p[i] for i in range(n))
    if output_size is None:
        sizes = default
    else:
        sizes = tuple(to_int(v, op, "output_size", TypeError) for v in output_size)
        if len(sizes) == n + 2:
            sizes = sizes[2:]
        if len(sizes) != n:
            raise ValueError(f"{op}: output_size must have {n} or {n + 2} elements, got {len(sizes)}.")
        for i in range(n):
            lo, hi = default[i] - s[i], default[i] + s[i]
            if not lo < sizes[i] < hi:
                raise ValueError(f"{op}: invalid output_size {sizes}: dimension {i} must be between {lo} and {hi} "
                                 "(exclusive).")
    if any(v < 0 for v in sizes):
        raise RuntimeError(f"{op}: the output size {sizes} must be non-negative.")
    check_elements(math.prod(x.shape[:-n]) * math.prod(sizes), "the output", op)
    return sizes


def _max_unpool(x, indices, n, kernel_size, stride, padding, output_size, op):
    """Zeros of the output size with each value written at its index within its channel's plane (the inverse of
    max_pool's indices); the gradient of each value is the output gradient read back at its index."""
    x = tensor_arg(x, op)
    idx = tensor_arg(indices, op, "indices")
    refuse_complex(op, x)
    k = _ints(kernel_size, n, op, "kernel_size")
    s = _stride(stride, k, n, op)
    p = _ints(padding, n, op, "padding")
    if idx.dtype is not _C.int64:
        raise RuntimeError(f"{op}: indices must be int64, got {idx.dtype.name}.")
    if x.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"{op}: expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) input, got shape "
                           f"{shape_str(x.shape)}.")
    if tuple(idx.shape) != tuple(x.shape):
        raise RuntimeError(f"{op}: indices must have the input's shape {shape_str(x.shape)}, got "
                           f"{shape_str(idx.shape)}.")
    if any(v <= 0 for v in k + s):
        raise RuntimeError(f"{op}: kernel_size and stride must be greater than zero, got {k} and {s}.")
    sizes = _unpool_size(x, n, k, s, p, output_size, op)
    lead = tuple(x.shape[:-n])
    m, plane = math.prod(lead), math.prod(sizes)
    where = np.asarray(bridge.view(idx), dtype=np.int64).reshape(m, -1)
    bad = where[(where < 0) | (where >= plane)]
    if bad.size:
        raise RuntimeError(f"{op}: index {int(bad[0])} is out of range for an output plane of size "
                           f"{' x '.join(map(str, sizes))}.")
    positions = where + np.arange(m, dtype=np.int64)[:, None] * plane
    out = _C.put(_C.full((m, plane), 0, x.dtype), bridge.copy(positions, False), _C.reshape(x, (m, -1)))
    out = _C.reshape(out, lead + sizes)
    return rename(out, _node(n, "MaxUnpool"), (x,))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Places each value of (N, C, L) or (C, L) at its max_pool1d index in a zero output."""
    return _max_unpool(input, indices, 1, kernel_size, stride, padding, output_size, "max_unpool1d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Places each value of (N, C, H, W) or (C, H, W) at its max_pool2d index in a zero output."""
    return _max_unpool(input, indices, 2, kernel_size, stride, padding, output_size, "max_unpool2d")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Places each value of (N, C, D, H, W) or (C, D, H, W) at its max_pool3d index in a zero output."""
    return _max_unpool(input, indices, 3, kernel_size, stride, padding, output_size, "max_unpool3d")


# ----- fractional max pooling ------------------------------------------------------------------------------------
# Note [Fractional windows]: fractional max pooling (Graham, 2014) takes the max over k-wide windows whose starts
# are pseudo-random increasing integers, one sequence per (sample, channel) plane and dim, drawn from a number u
# in [0, 1) (torch's _random_samples, (N, C, n)): with alpha = (L - k) / (O - 1) in the input's compute type,
#     start[i] = int((i + u) * alpha) - int(u * alpha)   (i < O - 1),   start[O - 1] = L - k,
# so the windows cover [0, L) with steps of floor(alpha) or ceil(alpha). The windows differ per plane, so the
# window values are read per plane in numpy for the argmax (torch's winner: the first maximum, or the last NaN) and
# the values are one gather of the input at the winners, whose gradient goes to that one element as torch's.

def _fractional_starts(u, size, out, k, ft):
    """(M, out) window starts for the samples u (M,) of one dim (the Note's formula)."""
    starts = np.empty((u.shape[0], out), dtype=np.int64)
    if out > 1:
        alpha = ft(size - k) / ft(out - 1)
        i = np.arange(out - 1).astype(ft)
        starts[:, :-1] = ((i[None, :] + u[:, None]) * alpha).astype(np.int64) - (u * alpha).astype(np.int64)[:, None]
    if out > 0:
        starts[:, -1] = size - k
    return starts


def _output_ratio(output_ratio, n, op):
    if isinstance(output_ratio, (tuple, list)):
        if len(output_ratio) > n or len(output_ratio) == 0:
            raise ValueError(f"{op}: output_ratio must be a number or a tuple of {n} numbers, got {output_ratio}.")
        ratio = tuple(output_ratio) * (n if len(output_ratio) == 1 else 1)
        if len(ratio) != n:
            raise ValueError(f"{op}: output_ratio must be a number or a tuple of {n} numbers, got {output_ratio}.")
    else:
        ratio = (output_ratio,) * n
    for r in ratio:
        if isinstance(r, bool) or not isinstance(r, (int, float, np.integer, np.floating)):
            raise TypeError(f"{op}: expected numbers in output_ratio, got {type_name(r)}.")
    return ratio


def _fractional_max_pool(x, n, kernel_size, output_size, output_ratio, return_indices, samples, op):
    x = tensor_arg(x, op)
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op}: either output_size or output_ratio must be given.")
    if x.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"{op}: expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) input, got shape "
                           f"{shape_str(x.shape)}.")
    spatial = tuple(x.shape[-n:])
    if output_size is None:
        ratio = _output_ratio(output_ratio, n, op)
        output_size = tuple(int(size * r) for size, r in zip(spatial, ratio))
    batch, channels = (x.shape[0] if x.ndim == n + 2 else 1), x.shape[-n - 1]
    if samples is None:
        if not x.dtype.is_floating_point:
            raise NotImplementedError(f"{op}: not implemented for {x.dtype.name} tensors.")
        samples = _C.rand((batch, channels, n), x.dtype)
    samples = tensor_arg(samples, op, "_random_samples")
    k = _ints(kernel_size, n, op, "kernel_size")
    outs = _ints(output_size, n, op, "output_size")
    if any(v <= 0 for v in k):
        raise RuntimeError(f"{op}: kernel_size must be greater than zero, got {k}.")
    if any(v < 0 for v in outs):
        raise RuntimeError(f"{op}: output_size must be non-negative, got {outs}.")
    _check_input(x, n, op)
    if samples.dtype is not x.dtype:
        raise RuntimeError(f"{op}: _random_samples ({samples.dtype}) must have the input's dtype ({x.dtype}).")
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"{op}: not implemented for {x.dtype.name} tensors.")
    if samples.requires_grad and _C.is_grad_enabled():
        raise RuntimeError(f"{op}: _random_samples has no gradient; it must not require grad.")
    if samples.ndim != 3 or samples.shape[0] < batch or samples.shape[1] != channels or samples.shape[2] != n:
        raise RuntimeError(f"{op}: expected _random_samples of shape (N >= {batch}, {channels}, {n}) for an input of "
                           f"shape {shape_str(x.shape)}, got {shape_str(samples.shape)}.")
    for d in range(n):
        if outs[d] + k[d] - 1 > spatial[d] - (n == 3):                  # torch's 3-d check is strict
            raise RuntimeError(f"{op}: kernel_size {k[d]} is too large for output size {outs[d]} in dimension "
                               f"{x.ndim - n + d} of size {spatial[d]} (output_size + kernel_size - 1 must be "
                               f"{'below' if n == 3 else 'at most'} the input size).")
    ft = np.float64 if x.dtype is _C.float64 else np.float32
    m = batch * channels
    u = np.asarray(bridge.view(samples.detach()), dtype=ft)[:batch].reshape(m, n)
    # which sample drives which dim: torch's kernels read (W, H) for 2-d planes and (T, H, W) for 3-d ones
    sample_of = (1, 0) if n == 2 else (0, 1, 2)
    pos = np.zeros((m, 1, 1), dtype=np.int64)
    for d in range(n):
        starts = _fractional_starts(u[:, sample_of[d]], spatial[d], outs[d], k[d], ft)
        i = starts[:, :, None] + np.arange(k[d], dtype=np.int64)                 # (M, o_d, k_d)
        o_sofar, k_sofar = pos.shape[1], pos.shape[2]
        pos = (pos[:, :, None, :, None] * spatial[d] + i[:, None, :, None, :]).reshape(
            m, o_sofar * outs[d], k_sofar * k[d])
    plane = math.prod(spatial)
    flat = _C.reshape(x, (m, plane))
    values_np = np.asarray(bridge.view(x.detach())).reshape(m, plane)
    win = np.take_along_axis(values_np, pos.reshape(m, pos.shape[1] * pos.shape[2]), 1).reshape(pos.shape)
    arg = np.argmax(win, -1) if win.size else np.zeros(win.shape[:2], dtype=np.int64)
    nan = np.isnan(win)
    if nan.any():               # torch: a NaN wins, and a later NaN replaces an earlier one
        arg = np.where(nan.any(-1), win.shape[-1] - 1 - np.argmax(nan[..., ::-1], -1), arg)
    idx = np.take_along_axis(pos, arg[..., None], 2)[..., 0]                       # (M, O)
    out_shape = tuple(x.shape[:-n]) + outs
    index = bridge.copy(np.asarray(idx, dtype=np.int64, order="C"), False)
    values = rename(_C.reshape(_C.gather(flat, 1, index), out_shape), f"FractionalMaxPool{n}DBackward", (x,))
    return (values, _C.reshape(index, out_shape)) if return_indices else values


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """(values, indices) of fractional_max_pool2d."""
    return _fractional_max_pool(input, 2, kernel_size, output_size, output_ratio, True, _random_samples,
                                "fractional_max_pool2d")


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """Max over kernel_size windows at pseudo-random increasing positions of the last 2 dims of (N, C, H, W) or
    (C, H, W), to output_size or output_ratio times the input size (Note [Fractional windows])."""
    return _fractional_max_pool(input, 2, kernel_size, output_size, output_ratio, return_indices, _random_samples,
                                "fractional_max_pool2d")


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """(values, indices) of fractional_max_pool3d."""
    return _fractional_max_pool(input, 3, kernel_size, output_size, output_ratio, True, _random_samples,
                                "fractional_max_pool3d")


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """Fractional max pooling over the last 3 dims of (N, C, D, H, W) or (C, D, H, W) (Note [Fractional
    windows])."""
    return _fractional_max_pool(input, 3, kernel_size, output_size, output_ratio, return_indices, _random_samples,
                                "fractional_max_pool3d")
