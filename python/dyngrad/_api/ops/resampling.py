"""Resampling with torch.nn.functional's signatures: interpolate (nearest, nearest-exact, linear, bilinear,
trilinear, bicubic, area; antialias for bilinear and bicubic) and the deprecated upsample, upsample_nearest and
upsample_bilinear; pixel_shuffle, pixel_unshuffle, channel_shuffle and native_channel_shuffle.

Every interpolation mode is separable: it resamples one spatial dim at a time, each output position reading a
few input positions along that dim (index_select) and summing them with fixed weights (Note [Interpolation
weights]). The gradient is that of index_select (index_add), so it is torch's adjoint.
"""
import math
import numbers

import numpy as np

from ... import _C
from .. import bridge
from ..._user_frame import warn
from ..args import shape_str, tensor_arg, to_int, type_name
from ..node_names import rename
from .pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, check_elements

MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")
_LINEAR_DIMS = {"linear": 1, "bilinear": 2, "trilinear": 3}

# Note [Interpolation weights]
# For output position j of a dim resized from L to O, torch (aten/src/ATen/native/UpSample.h) computes, in the
# tensor's compute type (float32 for float32 tensors, float64 for float64: we use numpy scalars of the same type so
# that the indices agree to the last bit):
#   scale     = 1 / scale_factor when a scale factor was given (and not recomputed), else L / O; with
#               align_corners, (L - 1) / (O - 1) (0 when O = 1)
#   nearest        src = min(floor(j * scale), L - 1)   (O = L and O = 2 L are exact: j and j / 2)
#   nearest-exact  src = min(floor((j + 0.5) * scale), L - 1)
#   linear    x = scale * j with align_corners, else max(scale * (j + 0.5) - 0.5, 0); i0 = min(floor(x), L - 1),
#             i1 = i0 + 1 (i0 at the last position), weights (1 - t, t) with t = clamp(x - i0, 0, 1)
#   cubic     x as linear but not clamped at 0; i = floor(x), t = x - i; taps i - 1 .. i + 2 clamped into
#             [0, L - 1] with Keys' cubic convolution weights (A = -0.75)
#   area      adaptive average pooling to the output size


def _compute_type(x):
    return np.float64 if x.dtype is _C.float64 else np.float32


def _scale(size, out, scale_factor, align_corners, ft):
    if align_corners:
        return ft(size - 1) / ft(out - 1) if out > 1 else ft(0)
    if scale_factor is not None and scale_factor > 0:
        return ft(1.0 / scale_factor)
    return ft(size) / ft(out)


def _nearest_index(size, out, scale_factor, exact):
    j = np.arange(out)
    if not exact and out == size:
        return j
    if not exact and out == 2 * size:
        return j >> 1
    scale = _scale(size, out, scale_factor, False, np.float32)      # torch computes nearest in float32
    if exact:
        src = np.floor(((j + 0.5) * np.float64(scale)).astype(np.float32))
    else:
        src = np.floor(j.astype(np.float32) * scale)
    return np.minimum(src.astype(np.int64), size - 1)


def _linear_taps(size, out, scale_factor, align_corners, ft):
    scale = _scale(size, out, scale_factor, align_corners, ft)
    j = np.arange(out).astype(ft)
    x = scale * j if align_corners else np.maximum(scale * (j + ft(0.5)) - ft(0.5), ft(0))
    i0 = np.minimum(np.floor(x).astype(np.int64), size - 1)
    t = np.clip(x - i0.astype(ft), ft(0), ft(1)).astype(ft)
    i1 = i0 + (i0 < size - 1)
    return [i0, i1], [(ft(1) - t).astype(ft), t]


def _cubic_taps(size, out, scale_factor, align_corners, ft):
    scale = _scale(size, out, scale_factor, align_corners, ft)
    j = np.arange(out).astype(ft)
    x = scale * j if align_corners else scale * (j + ft(0.5)) - ft(0.5)
    i = np.floor(x).astype(np.int64)
    t = (x - i.astype(ft)).astype(ft)
    a = ft(-0.75)

    def near(d):        # |d| <= 1: ((A + 2) d - (A + 3)) d^2 + 1
        return ((a + ft(2)) * d - (a + ft(3))) * d * d + ft(1)

    def far(d):         # 1 < |d| < 2: ((A d - 5 A) d + 8 A) d - 4 A
        return ((a * d - ft(5) * a) * d + ft(8) * a) * d - ft(4) * a
    weights = [far(t + ft(1)), near(t), near(ft(1) - t), far(ft(2) - t)]
    taps = [np.clip(i + k, 0, size - 1) for k in (-1, 0, 1, 2)]
    return taps, [w.astype(ft) for w in weights]


def _aa_filter(x, cubic, ft):
    """The antialiasing filters: the triangle (bilinear) or Keys' cubic with A = -0.5 (bicubic)."""
    x = np.abs(x)
    if not cubic:
        return np.where(x < 1, ft(1) - x, ft(0)).astype(ft)
    a = ft(-0.5)
    near = ((a + ft(2)) * x - (a + ft(3))) * x * x + ft(1)
    far = ((a * x - ft(5) * a) * x + ft(8) * a) * x - ft(4) * a
    return np.where(x < 1, near, np.where(x < 2, far, ft(0))).astype(ft)


def _antialias_taps(size, out, scale_factor, align_corners, cubic, ft):
    """Note [Antialiasing]: when shrinking by `scale` > 1, the filter is stretched by scale so that every input
    position contributes (torch's PIL-like kernels): output j reads the input positions within `support` of its
    centre scale * (j + 0.5), weighted by filter((i - centre + 0.5) / scale) normalised to sum 1."""
    scale = _scale(size, out, scale_factor, align_corners, ft)
    interp = 4 if cubic else 2
    support = ft(interp * 0.5) * scale if scale >= 1 else ft(interp * 0.5)
    invscale = ft(1) / scale if scale >= 1 else ft(1)
    width = int(math.ceil(support)) * 2 + 1
    centre = scale * (np.arange(out) + 0.5).astype(ft)
    lo = np.maximum((centre - support + ft(0.5)).astype(np.int64), 0)
    hi = np.minimum((centre + support + ft(0.5)).astype(np.int64), size)
    count = np.clip(hi - lo, 0, width)
    k = np.arange(width)
    taps = lo[:, None] + k
    w = _aa_filter((taps - centre[:, None] + ft(0.5)).astype(ft) * invscale, cubic, ft)
    w = np.where(k < count[:, None], w, ft(0))
    total = w.sum(1, keepdims=True)
    w = np.where(total != 0, w / np.where(total != 0, total, ft(1)), w).astype(ft)
    taps = np.minimum(taps, size - 1)           # unused taps (weight 0) read a valid position
    return [taps[:, i] for i in range(width)], [w[:, i] for i in range(width)]


def _resample_dim(x, d, taps, weights):
    """sum_k weights[k] * x.index_select(d, taps[k]), the weights broadcast along dim d."""
    out = None
    trailing = (1,) * (x.ndim - 1 - d)
    for idx, w in zip(taps, weights):
        part = _C.index_select(x, d, bridge.copy(np.asarray(idx, dtype=np.int64, order="C"), False))
        if w is not None:
            wt = bridge.copy(np.asarray(w.reshape((-1,) + trailing), order="C"), False)
            part = _C.mul(part, _C.to_dtype(wt, x.dtype) if wt.dtype is not x.dtype else wt)
        out = part if out is None else _C.add(out, part)
    return out


def _sizes(x, n, size, scale_factor, recompute_scale_factor, mode):
    """(output sizes, the scale factors the kernels use: None where the size decides), torch's rules."""
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate: only one of size or scale_factor should be given.")
    spatial = tuple(x.shape[2:])
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("interpolate: recompute_scale_factor is not meaningful with an explicit size.")
        if isinstance(size, (tuple, list)):
            if len(size) != n:
                raise ValueError(f"interpolate: size {tuple(size)} must have one entry per spatial dimension of "
                                 f"the input {shape_str(x.shape)} ({n}).")
            for s in size:
                if isinstance(s, bool) or not isinstance(s, (numbers.Integral, _C.Tensor)):
                    raise TypeError(f"interpolate: expected ints in size, got {type_name(s)}.")
            outs = tuple(to_int(s, "interpolate", "size", TypeError) for s in size)
        else:
            outs = (to_int(size, "interpolate", "size", TypeError),) * n
        scales = (None,) * n
    elif scale_factor is not None:
        if isinstance(scale_factor, (tuple, list)):
            if len(scale_factor) != n:
                raise ValueError(f"interpolate: scale_factor {tuple(scale_factor)} must have one entry per spatial "
                                 f"dimension of the input {shape_str(x.shape)} ({n}).")
            scales = tuple(scale_factor)
        else:
            scales = (scale_factor,) * n
        for s in scales:
            if isinstance(s, bool) or not isinstance(s, numbers.Real):
                raise TypeError(f"interpolate: expected numbers in scale_factor, got {type_name(s)}.")
        scales = tuple(float(s) for s in scales)
        outs = tuple(int(math.floor(L * s)) for L, s in zip(spatial, scales))
        if recompute_scale_factor or mode == "area":
            scales = (None,) * n
    else:
        raise ValueError("interpolate: either size or scale_factor should be given.")
    if any(v <= 0 for v in spatial + outs):
        raise RuntimeError(f"interpolate: input and output sizes should be greater than 0, got input "
                           f"{spatial} and output {outs}.")
    check_elements(math.prod(x.shape[:2]) * math.prod(outs), "the output", "interpolate")
    return outs, scales


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resizes the spatial dims of (N, C, *spatial) input (1 to 3 of them) to `size` or by `scale_factor`."""
    x = tensor_arg(input, "interpolate")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(f"interpolate: align_corners can only be set with the interpolating modes (linear, "
                             f"bilinear, bicubic, trilinear), not with mode={mode!r}.")
    elif align_corners is None:
        align_corners = False
    n = x.ndim - 2
    if mode not in MODES or n not in (1, 2, 3):
        raise NotImplementedError(f"interpolate: expected a 3-D, 4-D or 5-D input and a mode among {', '.join(MODES)}; "
                                  f"got a {x.ndim}-D input and mode={mode!r}.")
    outs, scales = _sizes(x, n, size, scale_factor, recompute_scale_factor, mode)
    if antialias and (mode not in ("bilinear", "bicubic") or x.ndim != 4):
        raise ValueError("interpolate: antialias is for the bilinear and bicubic modes of a 4-D input.")
    if mode in _LINEAR_DIMS and _LINEAR_DIMS[mode] != n:
        raise NotImplementedError(f"interpolate: mode={mode!r} needs a {_LINEAR_DIMS[mode] + 2}-D input, got "
                                  f"{x.ndim}-D.")
    if mode == "bicubic" and n != 2:
        raise NotImplementedError(f"interpolate: mode='bicubic' needs a 4-D input, got {x.ndim}-D.")
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[n - 1](x, outs)
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"interpolate: not implemented for {x.dtype.name} tensors.")
    ft = _compute_type(x)
    out = x
    for k in range(n):          # the last dim first, as torch's separable kernels (rounding only)
        d = x.ndim - 1 - k
        size_d, out_d, sf = x.shape[d], outs[n - 1 - k], scales[n - 1 - k]
        if antialias:
            taps, weights = _antialias_taps(size_d, out_d, sf, align_corners, mode == "bicubic", ft)
        elif mode in ("nearest", "nearest-exact"):
            taps, weights = [_nearest_index(size_d, out_d, sf, mode == "nearest-exact")], [None]
        elif mode == "bicubic":
            taps, weights = _cubic_taps(size_d, out_d, sf, align_corners, ft)
        else:
            taps, weights = _linear_taps(size_d, out_d, sf, align_corners, ft)
        out = _resample_dim(out, d, taps, weights)
    if out is x:
        out = _C.clone(x)
    name = {"nearest": "UpsampleNearest", "nearest-exact": "UpsampleNearestExact", "linear": "UpsampleLinear",
            "bilinear": "UpsampleBilinear", "trilinear": "UpsampleTrilinear", "bicubic": "UpsampleBicubic"}[mode]
    return rename(out, f"{name}{n}D{'Aa' if antialias else ''}Backward", (x,))


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of interpolate (torch warns the same)."""
    warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: interpolate(input, size, scale_factor, mode='nearest')."""
    warn("nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate instead.")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: interpolate(input, size, scale_factor, mode='bilinear', align_corners=True)."""
    warn("nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate instead.")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ----- shuffles ----------------------------------------------------------------------------------------------------

def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r): each group of r^2 channels becomes an r x r block of pixels."""
    x = tensor_arg(input, "pixel_shuffle")
    r = to_int(upscale_factor, "pixel_shuffle", "upscale_factor")
    if x.ndim < 3:
        raise RuntimeError(f"pixel_shuffle: expected an input of at least 3 dimensions, got {shape_str(x.shape)}.")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle: upscale_factor must be positive, got {r}.")
    *lead, c, h, w = x.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle: the channel dimension ({c}) must be divisible by upscale_factor squared "
                           f"({r * r}).")
    k = len(lead)
    y = _C.reshape(x, tuple(lead) + (c // (r * r), r, r, h, w))
    y = _C.permute(y, tuple(range(k + 1)) + (k + 3, k + 1, k + 4, k + 2))
    return rename(_C.reshape(y, tuple(lead) + (c // (r * r), h * r, w * r)), "PixelShuffleBackward", (x,))


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W): pixel_shuffle's inverse."""
    x = tensor_arg(input, "pixel_unshuffle")
    r = to_int(downscale_factor, "pixel_unshuffle", "downscale_factor")
    if x.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle: expected an input of at least 3 dimensions, got "
                           f"{shape_str(x.shape)}.")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle: downscale_factor must be positive, got {r}.")
    *lead, c, h, w = x.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle: height ({h}) and width ({w}) must be divisible by downscale_factor "
                           f"({r}).")
    k = len(lead)
    y = _C.reshape(x, tuple(lead) + (c, h // r, r, w // r, r))
    y = _C.permute(y, tuple(range(k + 1)) + (k + 2, k + 4, k + 1, k + 3))
    return rename(_C.reshape(y, tuple(lead) + (c * r * r, h // r, w // r)), "PixelUnshuffleBackward", (x,))


def channel_shuffle(input, groups):
    """(N, C, *) with the channels of `groups` groups interleaved: channel g * (C / groups) + i moves to
    i * groups + g."""
    return _channel_shuffle(input, groups, "channel_shuffle")


def native_channel_shuffle(input, groups):
    """torch's non-decomposed channel_shuffle: the same permutation (torch gives it no backward; here it has
    channel_shuffle's, a permutation of the gradient)."""
    return _channel_shuffle(input, groups, "native_channel_shuffle")


def _channel_shuffle(input, groups, op):
    x = tensor_arg(input, op)
    g = to_int(groups, op, "groups")
    if x.ndim < 3:
        raise RuntimeError(f"{op}: expected an input of more than 2 dimensions, got "
                           f"{shape_str(x.shape)}.")
    if g <= 0:
        raise RuntimeError(f"{op}: groups must be positive, got {g}.")
    n, c, *rest = x.shape
    if c % g:
        raise RuntimeError(f"{op}: the number of channels ({c}) must be divisible by groups ({g}).")
    y = _C.reshape(x, (n, g, c // g) + tuple(rest))
    y = _C.permute(y, (0, 2, 1) + tuple(range(3, y.ndim)))
    return rename(_C.reshape(y, tuple(x.shape)), "ChannelShuffleBackward", (x,))
