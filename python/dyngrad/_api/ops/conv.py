"""Convolutions with torch.nn.functional's signatures: conv1d/2d/3d, conv_transpose1d/2d/3d, unfold
(im2col) and fold (col2im). Written once over the core's conv2d, unfold and fold (csrc/dyngrad/ops_nn.cpp,
reference/ops_nn.py), whose backwards are each other (Note [Convolutions as im2col]).

Note [Convolutions as im2col]: the core has two primitives, unfold (im2col, with kernel, stride, padding and
dilation) and its adjoint fold (col2im), and conv2d is composed from them in the core: weight @ unfold(x), with
groups as one batched product over (G, O/G, C/G*kh*kw) @ (N, G, C/G*kh*kw, L), or, with at most 8 filters per
group, over (G, O/G, C/G*kh*kw) @ (G, C/G*kh*kw, N*L), the whole batch in one product (Note [conv2d as one
product] in csrc/dyngrad/ops_nn.cpp). Every backward is therefore written
with differentiable ops (unfold's is fold, fold's is unfold, matmul's are matmuls), so gradients of gradients come
for free. Here, above the core:
  - 1-d convolutions are 2-d ones over a height of 1 (kernel (1, k), stride (1, s), ...);
  - conv_transpose is the adjoint of conv with respect to its input: each input pixel scatters weight-sized patches,
    cols = W^T @ x (per group), out = fold(cols) into the output size torch computes,
        H_out = (H - 1)*stride - 2*padding + dilation*(k - 1) + output_padding + 1;
  - padding='same' pads dilation*(k - 1) in total, the extra one (when odd) on the right as torch does: the core
    pads symmetrically, so we pad by the larger side and drop the first output row/column.
Dilation lives in the core's im2col/col2im (for dilation 1 it is one more multiply in an index) and groups in the
core's conv2d (one batched product, no split + cat), so there is one conv2d in the core for every configuration.
The CNN layers' call of conv2d skips the general argument handling here (Note [conv2d's common call]).
"""
import math

import numpy as np

from ... import _C
from .. import bridge
from ..args import optional_tensor, shape_str, tensor_arg, to_int, type_name
from ..node_names import rename, shows_as

Tensor = _C.Tensor

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
_INT64_MAX = 2 ** 63 - 1


def _ntuple(v, n, op, name):
    """An int, or a sequence of n ints (torch: a single integer value or a list of n values)."""
    if isinstance(v, (tuple, list)):
        vals = tuple(to_int(e, op, name) for e in v)
        if len(vals) == 1 and n > 1 and name not in ("kernel_size", "output_size"):
            vals = vals * n
        if len(vals) != n:
            raise RuntimeError(f"{op}: expected {name} to be a single integer value or a list of {n} values to match "
                               f"the convolution dimensions, but got {name}={list(vals)}.")
        return vals
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v),) * n
    raise TypeError(f"{op}: expected an int or a tuple of {n} ints as {name}, got {type_name(v)}.")


def _operands(op, x, w, b):
    """(x, w, b, dtype to convert the result to or None). Integer convolutions (torch has them on the CPU) are
    computed in float64, exact while every partial sum stays below 2**53, and converted back."""
    if w.dtype is not x.dtype:
        raise RuntimeError(f"{op}: input ({x.dtype}) and weight ({w.dtype}) must have the same dtype.")
    if b is not None and b.dtype is not x.dtype:
        raise RuntimeError(f"{op}: input ({x.dtype}) and bias ({b.dtype}) must have the same dtype.")
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return x, w, b, None
    if x.dtype is _C.bool:
        raise RuntimeError(f"{op}: expected a floating-point or integer input, got {x.dtype}.")
    f = _C.float64
    return _C.to_dtype(x, f), _C.to_dtype(w, f), None if b is None else _C.to_dtype(b, f), x.dtype


def _parts(z):
    """(real, imag) of a complex tensor, as differentiable views."""
    pairs = _C.view_as_real(z)
    return _C.select(pairs, -1, 0), _C.select(pairs, -1, 1)


def _from_parts(re, im):
    return _C.view_as_complex(_C.stack([re, im], -1))


def _complex_bilinear(core, x, w, b, bias_shape):
    """Note [Complex convolutions]: a convolution is bilinear in (x, w) with real coefficients, so over complex
    tensors it is real ones of the parts. Three, as torch's complex_convolution (Gauss's trick):
        a = core(xr, wr), b = core(xi, wi), c = core(xr + xi, wr + wi);  out = (a - b) + i (c - a - b),
    and the bias added after. The parts are differentiable views, so the gradients are the real convolutions'
    backwards put together, torch's conjugate-Wirtinger ones (dx = conv_adjoint(grad, conj(w)), ...): no formula
    of its own, and every configuration of the real path (groups, dilation, 'same', 1-d/3-d, transposed)."""
    xr, xi = _parts(x)
    wr, wi = _parts(w)
    a = core(xr, wr)
    bb = core(xi, wi)
    c = core(_C.add(xr, xi), _C.add(wr, wi))
    out = _from_parts(_C.sub(a, bb), _C.sub(_C.sub(c, a), bb))
    return out if b is None else _C.add(out, _C.reshape(b, bias_shape))


def _complex_linear(core, x):
    """A map linear in x with real coefficients (unfold, fold) on a complex x: the map of each part."""
    xr, xi = _parts(x)
    return _from_parts(core(xr), core(xi))


def _batched(op, x, nd):
    """(x as a batch, whether it was unbatched): torch takes (C, *spatial) as a batch of one."""
    if x.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, got shape "
                           f"{shape_str(x.shape)}.")
    return (_C.unsqueeze(x, 0), True) if x.ndim == nd + 1 else (x, False)


def _check_positive(op, name, vals, allow_zero=False):
    if any(v < 0 if allow_zero else v <= 0 for v in vals):
        what = "negative" if allow_zero else "non-positive"
        raise RuntimeError(f"{op}: {what} {name} is not supported, got {name}={tuple(vals)}.")


def _same_padding(dilation, kernel):
    """(left, right) per dim for padding='same' with stride 1: dilation*(k-1) in total, the odd one on the right."""
    total = [d * (k - 1) for d, k in zip(dilation, kernel)]
    return [(t // 2, t - t // 2) for t in total]


def _conv(op, nd, input, weight, bias, stride, padding, dilation, groups):
    x = tensor_arg(input, op)
    w = tensor_arg(weight, op, "weight")
    b = optional_tensor(bias, op, "bias")
    x, unbatched = _batched(op, x, nd)
    if w.ndim != nd + 2:
        raise RuntimeError(f"{op}: expected a {nd + 2}-D weight (out_channels, in_channels/groups, *kernel), got "
                           f"shape {shape_str(w.shape)}.")
    stride = _ntuple(stride, nd, op, "stride")
    dilation = _ntuple(dilation, nd, op, "dilation")
    groups = to_int(groups, op, "groups")
    if groups <= 0:
        raise RuntimeError(f"{op}: non-positive groups is not supported, got groups={groups}.")
    _check_positive(op, "stride", stride)
    _check_positive(op, "dilation", dilation)
    kernel = tuple(w.shape[2:])
    drop = [0] * nd                     # 'same' with an odd total: outputs to drop at the start of each dim
    if isinstance(padding, str):
        if padding == "valid":
            pad = (0,) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError(f"{op}: padding='same' is not supported for strided convolutions, got "
                                   f"stride={stride}.")
            sides = _same_padding(dilation, kernel)
            pad = tuple(r for _, r in sides)
            drop = [r - l for l, r in sides]
        else:
            raise RuntimeError(f"{op}: invalid padding string {padding!r}: expected 'same' or 'valid'.")
    else:
        pad = _ntuple(padding, nd, op, "padding")
        _check_positive(op, "padding", pad, allow_zero=True)
    x, w, b, int_dtype = _operands(op, x, w, b)
    o, c = w.shape[0], x.shape[1]
    if o < groups or o % groups:
        raise RuntimeError(f"{op}: the weight's {o} output channels (weight {shape_str(w.shape)}) are not divisible "
                           f"by groups={groups}.")
    if w.shape[1] * groups != c:
        raise RuntimeError(f"{op}: input {shape_str(x.shape)} has {c} channels, but weight {shape_str(w.shape)} "
                           f"with groups={groups} expects {w.shape[1] * groups}.")
    if b is not None and (b.ndim != 1 or b.shape[0] != o):
        raise RuntimeError(f"{op}: expected a bias of shape ({o},) for weight {shape_str(w.shape)}, got "
                           f"{shape_str(b.shape)}.")
    def core(x, w, b=None):
        if nd == 1:
            out = _C.conv2d(_C.unsqueeze(x, 2), _C.unsqueeze(w, 2), b, 1, stride[0], 0, pad[0], 1, dilation[0],
                            groups)
            return _C.squeeze(out, (2,))
        if nd == 2:
            return _C.conv2d(x, w, b, stride[0], stride[1], pad[0], pad[1], dilation[0], dilation[1], groups)
        return _conv3d_core(op, x, w, b, stride, pad, dilation, groups)

    if x.dtype.is_complex:
        out = _complex_bilinear(core, x, w, b, (o,) + (1,) * nd)
    else:
        out = core(x, w, b)
    for d, k in enumerate(drop):
        if k:
            out = _C.slice(out, 2 + d, k, out.shape[2 + d], 1)
    if int_dtype is not None:
        out = _C.to_dtype(out, int_dtype)
    return _C.squeeze(out, (0,)) if unbatched else out


def _depth_taps(op, depth, k, s, p, d):
    """(out depth, positions (Do, K) into the depth dim, the sentinel `depth` where a tap reads the padding)."""
    out = (depth + 2 * p - d * (k - 1) - 1) // s + 1
    if out <= 0:
        raise RuntimeError(f"{op}: the input's depth {depth} with padding {p} is smaller than the dilated kernel "
                           f"depth {d * (k - 1) + 1}: the output would be empty.")
    i = (np.arange(out, dtype=np.int64) * s - p)[:, None] + np.arange(k, dtype=np.int64) * d
    return out, np.where((i >= 0) & (i < depth), i, depth)


def _conv3d_core(op, x, w, b, stride, pad, dilation, groups):
    """Note [conv3d as depth taps]: a 3-d convolution is a 2-d one whose channels are (kernel depth tap, channel)
    pairs. For output depth z and tap t the input plane z*s - p + t*d is read (one index_select of the depth dim,
    the padding planes reading an appended zero plane), the taps are moved next to the channels within each group
    (N*Do, G*KD*Cg, H, W), and the weight (O, Cg, KD, kh, kw) becomes (O, KD*Cg, kh, kw): the core's grouped conv2d
    then sums over taps and channels at once, with stride, padding and dilation in H and W. This is im2col along
    depth only, so the extra memory is KD times the input (not KD*kh*kw), and the core's conv2d (BLAS, its own
    fused backward) does the rest; every piece is differentiable (index_select's gradient is index_add), so no new
    C++ primitive is needed."""
    n, c, depth, h, wd = x.shape
    o, cg, kd = w.shape[0], w.shape[1], w.shape[2]
    do, taps = _depth_taps(op, depth, kd, stride[0], pad[0], dilation[0])
    if (taps == depth).any():
        x = _C.cat([x, _C.full((n, c, 1, h, wd), 0, x.dtype)], 2)
    cols = _C.index_select(x, 2, bridge.copy(np.asarray(taps.reshape(-1), order="C"), False))
    cols = _C.reshape(cols, (n, groups, cg, do, kd, h, wd))
    cols = _C.reshape(_C.permute(cols, (0, 3, 1, 4, 2, 5, 6)), (n * do, groups * kd * cg, h, wd))
    w2 = _C.reshape(_C.permute(w, (0, 2, 1, 3, 4)), (o, kd * cg) + tuple(w.shape[3:]))
    out = _C.conv2d(cols, w2, b, stride[1], stride[2], pad[1], pad[2], dilation[1], dilation[2], groups)
    out = _C.reshape(out, (n, do) + tuple(out.shape[1:]))
    return _C.permute(out, (0, 2, 1, 3, 4))


@shows_as("Convolution")
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-d cross-correlation: input (N, C, D, H, W) or (C, D, H, W), weight (O, C/groups, kd, kh, kw)."""
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


@shows_as("Convolution")
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d cross-correlation: input (N, C, L) or (C, L), weight (O, C/groups, k)."""
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def _int_pair(v):
    """(a, b) for an int or a tuple of two ints, else None."""
    if type(v) is int:
        return v, v
    if type(v) is tuple and len(v) == 2 and type(v[0]) is int and type(v[1]) is int:
        return v
    return None


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d cross-correlation: input (N, C, H, W) or (C, H, W), weight (O, C/groups, kh, kw)."""
    # Note [conv2d's common call]: the argument handling of _conv costs tens of microseconds of Python per call,
    # more than the core's whole conv2d of a small image. The CNN layers' call (batched, int stride and padding,
    # no dilation or groups) therefore goes straight to the core, which checks the same things (float input, 4-D
    # weight, channels, bias shape, window geometry) with the same exception types; only the dtypes' agreement
    # and the signs are checked here. Everything else takes the general path.
    s, p = _int_pair(stride), _int_pair(padding)
    if (s is not None and p is not None and (dilation == 1 or dilation == (1, 1)) and groups == 1
            and isinstance(input, Tensor) and isinstance(weight, Tensor) and input.ndim == 4
            and s[0] > 0 and s[1] > 0 and p[0] >= 0 and p[1] >= 0 and (s[0] | s[1] | p[0] | p[1]) < 1 << 63
            and (dt := input.dtype).is_floating_point and weight.dtype is dt
            and (bias is None or isinstance(bias, Tensor) and bias.dtype is dt)):
        out = _C.conv2d(input, weight, bias, s[0], s[1], p[0], p[1])
        node = out.grad_fn
        if node is not None:
            node._display_name = "ConvolutionBackward"
        return out
    return rename(_conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups), "ConvolutionBackward",
                  (input, weight, bias))


def _transpose_out_size(op, in_sizes, stride, padding, output_padding, dilation, kernel):
    sizes = tuple((i - 1) * s - 2 * p + d * (k - 1) + op_ + 1
                  for i, s, p, op_, d, k in zip(in_sizes, stride, padding, output_padding, dilation, kernel))
    if any(v <= 0 for v in sizes):
        raise RuntimeError(f"{op}: the output size {sizes} computed from input size {tuple(in_sizes)}, kernel "
                           f"{kernel}, stride {stride}, padding {padding}, output_padding {output_padding} and "
                           f"dilation {dilation} is too small (every size must be positive).")
    return sizes


def _conv_transpose(op, nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
    x = tensor_arg(input, op)
    w = tensor_arg(weight, op, "weight")
    b = optional_tensor(bias, op, "bias")
    x, unbatched = _batched(op, x, nd)
    if w.ndim != nd + 2:
        raise RuntimeError(f"{op}: expected a {nd + 2}-D weight (in_channels, out_channels/groups, *kernel), got "
                           f"shape {shape_str(w.shape)}.")
    if isinstance(padding, str):
        raise TypeError(f"{op}: padding must be an int or a tuple of ints, got the string {padding!r}.")
    stride = _ntuple(stride, nd, op, "stride")
    pad = _ntuple(padding, nd, op, "padding")
    out_pad = _ntuple(output_padding, nd, op, "output_padding")
    dilation = _ntuple(dilation, nd, op, "dilation")
    groups = to_int(groups, op, "groups")
    if groups <= 0:
        raise RuntimeError(f"{op}: non-positive groups is not supported, got groups={groups}.")
    _check_positive(op, "stride", stride)
    _check_positive(op, "dilation", dilation)
    _check_positive(op, "padding", pad, allow_zero=True)
    _check_positive(op, "output_padding", out_pad, allow_zero=True)
    if any(q >= s and q >= d for q, s, d in zip(out_pad, stride, dilation)):
        raise RuntimeError(f"{op}: output padding must be smaller than either stride or dilation, got "
                           f"output_padding={out_pad}, stride={stride}, dilation={dilation}.")
    x, w, b, int_dtype = _operands(op, x, w, b)
    cin, og = w.shape[0], w.shape[1]
    if cin < groups or cin % groups:
        raise RuntimeError(f"{op}: the weight's {cin} input channels (weight {shape_str(w.shape)}) are not divisible "
                           f"by groups={groups}.")
    if x.shape[1] != cin:
        raise RuntimeError(f"{op}: input {shape_str(x.shape)} has {x.shape[1]} channels, but weight "
                           f"{shape_str(w.shape)} expects {cin}.")
    cout = og * groups
    if b is not None and (b.ndim != 1 or b.shape[0] != cout):
        raise RuntimeError(f"{op}: expected a bias of shape ({cout},) for weight {shape_str(w.shape)} and "
                           f"groups={groups}, got {shape_str(b.shape)}.")
    kernel = tuple(w.shape[2:])
    if nd == 1:                          # a 2-d transposed convolution over a height of 1
        x, w = _C.unsqueeze(x, 2), _C.unsqueeze(w, 2)
        stride, pad, out_pad, dilation, kernel = ((1,) + stride, (0,) + pad, (0,) + out_pad, (1,) + dilation,
                                                  (1,) + kernel)
    out_sizes = _transpose_out_size(op, tuple(x.shape[2:]), stride, pad, out_pad, dilation, kernel)
    full = tuple((i - 1) * s + d * (k - 1) + 1 for i, s, d, k in zip(x.shape[2:], stride, dilation, kernel))
    if max(x.shape[0], 1) * max(cout, 1) * math.prod(max(a, f) for a, f in zip(out_sizes, full)) > _INT64_MAX:
        raise RuntimeError(f"{op}: the output of shape {shape_str((x.shape[0], cout) + out_sizes)} (stride {stride}, "
                           f"dilation {dilation}) would have more elements than fit in 64 bits.")
    def core(x, w):
        if len(kernel) == 3:
            return _conv_transpose3d_core(x, w, groups, stride, pad, out_pad, dilation, out_sizes)
        return _conv_transpose2d_core(x, w, groups, stride, pad, out_pad, dilation, out_sizes)

    bias_shape = (cout,) + (1,) * len(kernel)
    if x.dtype.is_complex:
        out = _complex_bilinear(core, x, w, b, bias_shape)
    else:
        out = core(x, w)
        if b is not None:
            out = _C.add(out, _C.reshape(b, bias_shape))
    if nd == 1:
        out = _C.squeeze(out, (2,))
    if int_dtype is not None:
        out = _C.to_dtype(out, int_dtype)
    return _C.squeeze(out, (0,)) if unbatched else out


def _conv_transpose2d_core(x, w, groups, stride, pad, out_pad, dilation, out_hw):
    """conv_transpose2d of checked operands, without bias: (N, C_in, H, W) -> (N, C_out, *out_hw)."""
    n, cin, h, wd = x.shape
    og, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    cout = og * groups
    full_hw = tuple((i - 1) * s + d * (k - 1) + 1 for i, s, d, k in zip((h, wd), stride, dilation, (kh, kw)))
    # cols[n, (g, o, i, j), l] = sum_c w[g*Cg + c, o, i, j] * x[n, g*Cg + c, l]: W^T @ x per group
    cg = cin // groups
    wt = _C.transpose(_C.reshape(w, (groups, cg, og * kh * kw)), 1, 2)          # (G, Og*kh*kw, Cg)
    cols = _C.matmul(wt, _C.reshape(x, (n, groups, cg, h * wd)))              # (N, G, Og*kh*kw, H*W)
    cols = _C.reshape(cols, (n, cout * kh * kw, h * wd))
    if all(q < s for q, s in zip(out_pad, stride)):
        # fold's windows over the output are exactly the input's positions (see the Note's formula)
        return _C.fold(cols, (n, cout) + out_hw, kh, kw, stride[0], stride[1], pad[0], pad[1], dilation[0],
                       dilation[1])
    # output_padding >= stride (allowed when < dilation): fold into the full, unpadded output, where the windows
    # match the input's positions again, then crop the padding and extend by zeros where nothing lands
    out = _C.fold(cols, (n, cout) + full_hw, kh, kw, stride[0], stride[1], 0, 0, dilation[0], dilation[1])
    for d in range(2):
        start, size = pad[d], out_hw[d]
        keep = min(size, full_hw[d] - start)
        out = _C.slice(out, 2 + d, start, start + keep, 1)
        if keep < size:
            shape = list(out.shape)
            shape[2 + d] = size - keep
            out = _C.cat([out, _C.full(tuple(shape), 0.0, out.dtype)], 2 + d)
    return out


def _conv_transpose3d_core(x, w, groups, stride, pad, out_pad, dilation, out_sizes):
    """conv_transpose3d of checked operands, without bias, as the adjoint of Note [conv3d as depth taps]: each
    input plane z goes through a 2-d transposed convolution whose output channels are (channel, depth tap) pairs
    (the weight (C_in, Og, KD, kh, kw) read as (C_in, Og*KD, kh, kw)), and tap t of plane z is added into output
    plane z*s - p + t*d (one index_add over the depth dim; taps landing outside [0, D_out) go to a dropped extra
    plane, which is how padding crops and output_padding extends)."""
    n, cin, depth, h, wd = x.shape
    og, kd = w.shape[1], w.shape[2]
    cout = og * groups
    do = out_sizes[0]
    planes = _C.reshape(_C.permute(x, (0, 2, 1, 3, 4)), (n * depth, cin, h, wd))
    w2 = _C.reshape(w, (cin, og * kd) + tuple(w.shape[3:]))
    y = _conv_transpose2d_core(planes, w2, groups, stride[1:], pad[1:], out_pad[1:], dilation[1:], out_sizes[1:])
    ho, wo = out_sizes[1:]
    y = _C.permute(_C.reshape(y, (n, depth, groups, og, kd, ho, wo)), (0, 1, 4, 2, 3, 5, 6))
    y = _C.reshape(y, (n, depth * kd, cout, ho, wo))
    z = (np.arange(depth, dtype=np.int64) * stride[0] - pad[0])[:, None] + np.arange(kd, dtype=np.int64) * dilation[0]
    z = np.where((z >= 0) & (z < do), z, do).reshape(-1)
    out = _C.index_add(y, 1, bridge.copy(np.asarray(z, order="C"), False), (n, do + 1, cout, ho, wo))
    out = _C.slice(out, 1, 0, do, 1)
    return _C.permute(out, (0, 2, 1, 3, 4))


@shows_as("Convolution")
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The adjoint of conv1d with respect to its input: input (N, C_in, L) or (C_in, L), weight
    (C_in, C_out/groups, k)."""
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


@shows_as("Convolution")
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The adjoint of conv2d with respect to its input: input (N, C_in, H, W) or (C_in, H, W), weight
    (C_in, C_out/groups, kh, kw)."""
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


@shows_as("Convolution")
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The adjoint of conv3d with respect to its input: input (N, C_in, D, H, W) or (C_in, D, H, W), weight
    (C_in, C_out/groups, kd, kh, kw)."""
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


@shows_as("ConvTbc")
def conv_tbc(input, weight, bias, pad=0):
    """A 1-d convolution of a (time, batch, channels) sequence: input (T, B, C_in), weight (K, C_in, C_out), bias
    (C_out,), output (T + 2 pad - K + 1, B, C_out); a negative pad crops the sequence. conv1d of the permuted
    operands (no copy until the core's conv2d)."""
    op = "conv_tbc"
    x = tensor_arg(input, op)
    w = tensor_arg(weight, op, "weight")
    b = tensor_arg(bias, op, "bias")
    if isinstance(pad, bool) or not isinstance(pad, (int, np.integer)):
        raise TypeError(f"{op}: expected an int as pad, got {type_name(pad)}.")
    pad = int(pad)
    if x.ndim != 3:
        raise RuntimeError(f"{op}: expected a 3-D input (time, batch, in_channels), got shape {shape_str(x.shape)}.")
    if w.ndim != 3:
        raise RuntimeError(f"{op}: expected a 3-D weight (kernel_width, in_channels, out_channels), got shape "
                           f"{shape_str(w.shape)}.")
    if b.ndim != 1:
        raise RuntimeError(f"{op}: expected a 1-D bias, got shape {shape_str(b.shape)}.")
    if x.shape[2] != w.shape[1]:
        raise RuntimeError(f"{op}: the input's {x.shape[2]} channels (input {shape_str(x.shape)}) do not match the "
                           f"weight's in_channels {w.shape[1]} (weight {shape_str(w.shape)}).")
    if b.shape[0] != w.shape[2]:
        raise RuntimeError(f"{op}: the bias's {b.shape[0]} entries do not match the weight's out_channels "
                           f"{w.shape[2]}.")
    t, k = x.shape[0], w.shape[0]
    length = t + 2 * pad - k + 1
    if length < 0:
        raise RuntimeError(f"{op}: the output length {t} + 2*{pad} - {k} + 1 = {length} is negative.")
    if pad < 0:                         # a negative padding crops both ends of the sequence
        x = _C.slice(x, 0, -pad, max(t + pad, -pad), 1)
        pad = 0
    if length == 0:
        return _C.add(_C.full((0, x.shape[1], w.shape[2]), 0, x.dtype), _C.sum(x, (), False))
    out = _conv(op, 1, _C.permute(x, (1, 2, 0)), _C.permute(w, (2, 1, 0)), b, 1, pad, 1, 1)
    return _C.permute(out, (2, 0, 1))


def _window_args(op, kernel_size, dilation, padding, stride):
    k = _ntuple(kernel_size, 2, op, "kernel_size")
    d = _ntuple(dilation, 2, op, "dilation")
    p = _ntuple(padding, 2, op, "padding")
    s = _ntuple(stride, 2, op, "stride")
    if any(v <= 0 for v in k + d + s) or any(v < 0 for v in p):
        raise RuntimeError(f"{op}: kernel_size, dilation and stride must be positive and padding non-negative, got "
                           f"kernel_size={k}, dilation={d}, padding={p}, stride={s}.")
    return k, d, p, s


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C*kh*kw, L) (or (C, H, W) -> (C*kh*kw, L)), every sliding block as a column."""
    x = tensor_arg(input, "unfold")
    if x.ndim not in (3, 4):
        raise (IndexError if x.ndim < 3 else RuntimeError)(f"unfold: expected a 3-D (unbatched) or 4-D (batched) input, got shape "
                           f"{shape_str(x.shape)}.")
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _window_args("unfold", kernel_size, dilation, padding, stride)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"unfold: expected a floating-point or complex input, got {x.dtype}.")

    def core(x):
        if x.ndim == 3:
            return _C.squeeze(_C.unfold(_C.unsqueeze(x, 0), kh, kw, sh, sw, ph, pw, dh, dw), (0,))
        return _C.unfold(x, kh, kw, sh, sw, ph, pw, dh, dw)
    return _complex_linear(core, x) if x.dtype.is_complex else core(x)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, unfold's adjoint: (N, C*kh*kw, L) -> (N, C, *output_size) (or unbatched), summing overlaps."""
    x = tensor_arg(input, "fold")
    if x.ndim not in (2, 3):
        raise RuntimeError(f"fold: expected a 2-D (unbatched) or 3-D (batched) input, got shape "
                           f"{shape_str(x.shape)}.")
    out_hw = _ntuple(output_size, 2, "fold", "output_size")
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _window_args("fold", kernel_size, dilation, padding, stride)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"fold: expected a floating-point or complex input, got {x.dtype}.")
    unbatched = x.ndim == 2
    if unbatched:
        x = _C.unsqueeze(x, 0)
    n, rows, length = x.shape
    if rows % (kh * kw):
        raise RuntimeError(f"fold: expected the input's dimension {1 - unbatched} ({rows}) to be divisible by the "
                           f"product of kernel_size {(kh, kw)}.")
    blocks = [(o + 2 * p - d * (k - 1) - 1) // s + 1
              for o, p, d, k, s in zip(out_hw, (ph, pw), (dh, dw), (kh, kw), (sh, sw))]
    if min(blocks) <= 0 or any(o <= 0 for o in out_hw):
        raise RuntimeError(f"fold: output_size={out_hw}, kernel_size={(kh, kw)}, dilation={(dh, dw)}, "
                           f"padding={(ph, pw)}, stride={(sh, sw)} give no sliding blocks ({blocks[0]} x {blocks[1]}).")
    if blocks[0] * blocks[1] != length:
        raise RuntimeError(f"fold: output_size={out_hw}, kernel_size={(kh, kw)}, dilation={(dh, dw)}, "
                           f"padding={(ph, pw)}, stride={(sh, sw)} give {blocks[0]} x {blocks[1]} = "
                           f"{blocks[0] * blocks[1]} blocks, but the input {shape_str(input.shape)} has {length}.")
    def core(x):
        return _C.fold(x, (n, rows // (kh * kw)) + out_hw, kh, kw, sh, sw, ph, pw, dh, dw)
    out = _complex_linear(core, x) if x.dtype.is_complex else core(x)
    return _C.squeeze(out, (0,)) if unbatched else out


# ----- padding modes of the Conv modules -------------------------------------------------------------------------
# Note [Conv padding modes]: nn.Conv1d/2d(padding_mode='reflect'|'replicate'|'circular') pad the input before a
# convolution with padding 0, as torch does. F.pad did not exist when this was written, so this private helper
# builds each padded dim as an index_select of source positions (its gradient is index_add: overlapping sources
# accumulate, as torch's).

def _source_index(size, left, right, mode, op):
    i = np.arange(-left, size + right)
    if mode == "reflect":
        if left >= size or right >= size:
            raise RuntimeError(f"{op}: reflect padding ({left}, {right}) must be smaller than the input size {size}.")
        i = np.abs(i)
        i = np.where(i >= size, 2 * (size - 1) - i, i)
    elif mode == "replicate":
        if size == 0:
            raise RuntimeError(f"{op}: replicate padding needs a non-empty input dimension.")
        i = np.clip(i, 0, size - 1)
    else:  # circular
        if left > size or right > size:
            raise RuntimeError(f"{op}: circular padding ({left}, {right}) must be at most the input size {size}.")
        i = np.mod(i, size)
    return i.astype(np.int64)


def _pad_nonzero(x, sides, mode, op):
    """x padded on its last len(sides) dims by sides[d] = (left, right), with a non-zero padding mode."""
    first = x.ndim - len(sides)
    for d, (left, right) in enumerate(sides):
        if left or right:
            idx = bridge.copy(_source_index(x.shape[first + d], left, right, mode, op), False)
            x = _C.index_select(x, first + d, idx)
    return x
