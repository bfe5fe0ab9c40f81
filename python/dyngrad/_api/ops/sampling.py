"""Sampling with torch.nn.functional's signatures: affine_grid, grid_sample (2-d and 3-d; bilinear, nearest and
bicubic; zeros, border and reflection padding; align_corners) and gumbel_softmax.

Note [grid_sample as weighted gathers]: every output position o reads a few input positions (2^n corners for
bilinear, 4x4 taps for bicubic, one for nearest) and sums them with weights that depend on the sampling point:
    out[n, c, o] = sum_t w_t(n, o) * x[n, c, pos_t(n, o)]
The positions are integers computed in numpy from the grid's values (in the input's compute type, torch's
formulas of GridSampler.h: unnormalize, then clip or reflect); a position outside the input (zeros padding) reads
a zero column appended to the (N, C, P) view of the input, so each term is one gather, whose gradient is torch's
scatter-add into the input. The weights are dyngrad ops of the sampling coordinate c(grid), so the gradient with
respect to the grid comes from autograd: c is built as
    c = c_numpy + (grid - grid_numpy) * dc/dgrid
which is c_numpy exactly in the forward (the second term is 0) and has torch's derivative: the unnormalising
scale times the padding's slope (0 where a coordinate is clipped, -1 where a reflection flips it). Bicubic
weights use the unnormalised coordinate only (torch pads each tap, not the point), and nearest has a zero grid
gradient (as torch), made explicit with a zero term so that grid.grad is zeros rather than None.
"""
import math
import numbers

import numpy as np

from ... import _C
from .. import bridge
from ..._user_frame import warn
from ..args import number, shape_str, tensor_arg, to_int, type_name, wrap_dim
from ..node_names import rename
from .activation import softmax

_MODES = ("bilinear", "nearest", "bicubic")
_PADDING_MODES = ("zeros", "border", "reflection")


def _align(align_corners, op):
    if align_corners is None:
        warn(f"{op}: align_corners was not given and defaults to False (torch's default since 1.3.0); "
             "pass align_corners=True or False explicitly to silence this warning.", UserWarning)
        return False
    if not isinstance(align_corners, (bool, np.bool_)):
        raise TypeError(f"{op}: expected a bool as align_corners, got {type_name(align_corners)}.")
    return bool(align_corners)


def _const(a, dtype):
    t = bridge.copy(np.asarray(a, order="C"), False)
    return t if t.dtype is dtype else _C.to_dtype(t, dtype)


def _compute_type(t):
    return np.float64 if t.dtype is _C.float64 else np.float32


# ----- coordinates (torch's GridSampler.h formulas, with their derivatives) ------------------------------------

def _unnormalize(g, size, align, ft):
    """(-1, 1) -> pixel coordinates: the corner pixels' centres (align_corners) or their outer edges; and the
    derivative of the map."""
    if align:
        return ((g + ft(1)) / ft(2)) * ft(size - 1), ft(size - 1) / ft(2)
    return ((g + ft(1)) * ft(size) - ft(1)) / ft(2), ft(size) / ft(2)


def _clip(c, size, ft):
    """c clipped into [0, size - 1]; slope 0 at and beyond the borders (torch counts the borders as clipped)."""
    hi = ft(size - 1)
    slope = np.where((c > 0) & (c < hi), ft(1), ft(0)).astype(ft)
    return np.minimum(np.maximum(c, ft(0)), hi).astype(ft), slope


def _reflect(c, twice_low, twice_high, ft):
    """c reflected into [twice_low / 2, twice_high / 2] (bouncing between the two ends); slope +-1."""
    if twice_low == twice_high:
        return np.zeros_like(c), np.zeros_like(c)
    low, span = ft(twice_low) / ft(2), ft(twice_high - twice_low) / ft(2)
    d = c - low
    sign = np.where(d < 0, ft(-1), ft(1)).astype(ft)
    d = np.abs(d)
    extra = np.fmod(d, span)
    even = np.floor(d / span) % 2 == 0
    return (np.where(even, extra + low, span - extra + low).astype(ft),
            np.where(even, sign, -sign).astype(ft))


def _pad_coordinates(c, size, padding_mode, align, ft):
    """torch's compute_coordinates: (coordinate after the padding mode, its derivative)."""
    if padding_mode == "border":
        return _clip(c, size, ft)
    if padding_mode == "reflection":
        if align:
            c, s1 = _reflect(c, 0, 2 * (size - 1), ft)
        else:
            c, s1 = _reflect(c, -1, 2 * size - 1, ft)
        c, s2 = _clip(c, size, ft)
        return c, s1 * s2
    return c, np.ones_like(c)


def _finite_coordinates(c, size, ft):
    """A non-finite coordinate (torch's result is undefined there: it casts inf or NaN to an integer) samples
    nothing: it is moved two pixels before the input, so that every tap is outside and the zero padding is read."""
    return np.where(np.isfinite(c), c, ft(-2)).astype(ft)


def _coordinate_tensor(g_t, g_np, c_np, slope):
    """c_np in the forward, with derivative `slope` with respect to the grid component g_t (the Note)."""
    dtype = g_t.dtype
    finite = np.isfinite(g_np)
    if not finite.all():      # keep inf - inf out of the forward: the non-finite entries get no gradient
        g_safe = np.where(finite, g_np, 0).astype(g_np.dtype)
        g_t = _C.where(_const(finite, _C.bool), g_t, _const(g_safe, dtype))
        g_np, slope = g_safe, np.where(finite, slope, 0).astype(slope.dtype)
    delta = _C.sub(g_t, _const(g_np, dtype))
    return _C.add(_const(c_np, dtype), _C.mul(delta, _const(slope, dtype)))


def _cubic_weights(t):
    """Keys' cubic convolution weights (A = -0.75) of the taps -1, 0, 1, 2 at fraction t, as tensors."""
    a = -0.75

    def num(v):
        return _C.scalar_operand(v, t)

    def near(d):        # |d| <= 1: ((A + 2) d - (A + 3)) d^2 + 1
        return _C.add(_C.mul(_C.mul(_C.sub(_C.mul(d, num(a + 2)), num(a + 3)), d), d), num(1.0))

    def far(d):         # 1 < |d| < 2: ((A d - 5 A) d + 8 A) d - 4 A
        return _C.sub(_C.mul(_C.add(_C.mul(_C.sub(_C.mul(d, num(a)), num(5 * a)), d), num(8 * a)), d), num(4 * a))
    one_minus = _C.sub(num(1.0), t)
    return [far(_C.add(t, num(1.0))), near(t), near(one_minus), far(_C.add(one_minus, num(1.0)))]


# ----- grid_sample -----------------------------------------------------------------------------------------------

def _check_grid_sample(x, g, mode, padding_mode, op):
    if x.dtype is not g.dtype:
        raise RuntimeError(f"{op}: input ({x.dtype}) and grid ({g.dtype}) must have the same dtype.")
    if x.ndim not in (4, 5) or g.ndim != x.ndim:
        raise RuntimeError(f"{op}: expected a 4-D or 5-D input and a grid with as many dimensions, got input "
                           f"{shape_str(x.shape)} and grid {shape_str(g.shape)}.")
    n = x.ndim - 2
    if g.shape[0] != x.shape[0]:
        raise RuntimeError(f"{op}: input {shape_str(x.shape)} and grid {shape_str(g.shape)} must have the same "
                           "batch size.")
    if g.shape[-1] != n:
        raise RuntimeError(f"{op}: expected a grid of {n} coordinates in its last dimension for a {x.ndim}-D input, "
                           f"got grid {shape_str(g.shape)}.")
    for d in range(2, x.ndim):
        if x.shape[d] == 0:
            raise RuntimeError(f"{op}: expected non-empty spatial dimensions, got input {shape_str(x.shape)} "
                               f"(dimension {d} is empty).")
    if mode == "bicubic" and n != 2:
        raise RuntimeError(f"{op}: bicubic interpolation needs a 4-D input, got {shape_str(x.shape)}.")
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"{op}: not implemented for {x.dtype.name} tensors.")


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Samples (N, C, H, W) at grid (N, Ho, Wo, 2) (x, y in [-1, 1]) into (N, C, Ho, Wo); or (N, C, D, H, W) at
    grid (N, Do, Ho, Wo, 3) (x, y, z) into (N, C, Do, Ho, Wo) (Note [grid_sample as weighted gathers])."""
    op = "grid_sample"
    x = tensor_arg(input, op)
    g = tensor_arg(grid, op, "grid")
    if mode not in _MODES:
        raise ValueError(f"{op}: mode must be 'bilinear', 'nearest' or 'bicubic', got {mode!r}.")
    if padding_mode not in _PADDING_MODES:
        raise ValueError(f"{op}: padding_mode must be 'zeros', 'border' or 'reflection', got {padding_mode!r}.")
    align = _align(align_corners, op)
    _check_grid_sample(x, g, mode, padding_mode, op)
    n = x.ndim - 2
    batch, channels = x.shape[0], x.shape[1]
    spatial, outs = tuple(x.shape[2:]), tuple(g.shape[1:-1])
    plane, length = math.prod(spatial), math.prod(outs)
    ft = _compute_type(x)
    g_np = np.asarray(bridge.view(g.detach()), dtype=ft).reshape(batch, length, n)
    # per spatial dim (the grid's component i addresses dim n - 1 - i): the tap positions and weights
    taps, weights = [], []
    zero_term = None
    for axis in range(n):
        i = n - 1 - axis
        size = spatial[axis]
        gi = g_np[..., i]
        gt = _C.reshape(_C.select(g, -1, i), (batch, length))
        c, scale = _unnormalize(gi, size, align, ft)
        if mode == "bicubic":
            c = _finite_coordinates(c, size, ft)
            base = np.floor(c)
            ct = _coordinate_tensor(gt, gi, c, np.full_like(c, scale))
            frac = _C.sub(ct, _const(base.astype(ft), x.dtype))
            pos = []
            for k in (-1, 0, 1, 2):
                tap, _ = _pad_coordinates((base + k).astype(ft), size, padding_mode, align, ft)
                pos.append(np.trunc(tap))
            taps.append(pos)
            weights.append(_cubic_weights(frac))
            continue
        c, slope = _pad_coordinates(c, size, padding_mode, align, ft)
        c = _finite_coordinates(c, size, ft)
        if mode == "nearest":
            taps.append([np.rint(c)])
            weights.append([None])
            if g.requires_grad and _C.is_grad_enabled():
                z = _C.mul(_coordinate_tensor(gt, gi, c, slope * scale), _C.scalar_operand(0.0, gt))
                zero_term = z if zero_term is None else _C.add(zero_term, z)
            continue
        base = np.floor(c)
        ct = _coordinate_tensor(gt, gi, c, slope * scale)
        frac = _C.sub(ct, _const(base.astype(ft), x.dtype))
        taps.append([base, base + 1])
        weights.append([_C.sub(_C.scalar_operand(1.0, frac), frac), frac])
    flat = _C.cat([_C.reshape(x, (batch, channels, plane)), _C.full((batch, channels, 1), 0, x.dtype)], 2)
    strides = [math.prod(spatial[axis + 1:]) for axis in range(n)]
    out = None
    for combo in np.ndindex(*(len(t) for t in taps)):
        pos = np.zeros((batch, length), dtype=np.int64)
        valid = np.ones((batch, length), dtype=bool)
        w = None
        for axis, j in enumerate(combo):
            p = taps[axis][j]
            valid &= (p >= 0) & (p < spatial[axis])
            pos += p.astype(np.int64) * strides[axis]
            wj = weights[axis][j]
            if wj is not None:
                w = wj if w is None else _C.mul(w, wj)
        pos = np.where(valid, pos, plane)
        index = _const(np.broadcast_to(pos[:, None, :], (batch, channels, length)), _C.int64)
        vals = _C.gather(flat, 2, index)
        if w is not None:
            vals = _C.mul(vals, _C.unsqueeze(w, 1))
        out = vals if out is None else _C.add(out, vals)
    if zero_term is not None:
        out = _C.add(out, _C.unsqueeze(zero_term, 1))
    out = _C.reshape(out, (batch, channels) + outs)
    return rename(out, f"GridSampler{n}DBackward", (x, g))


# ----- affine_grid -----------------------------------------------------------------------------------------------

def _steps(count, align, ft):
    """The normalised centres of `count` pixels along a dim: -1 .. 1 (align_corners) or shrunk by
    (count - 1) / count; a single pixel sits at 0."""
    if count <= 1:
        return np.zeros(max(count, 0), dtype=ft)
    r = np.linspace(-1, 1, count).astype(ft)
    return r if align else (r * ft(count - 1) / ft(count)).astype(ft)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of the affine maps theta (N, 2, 3) for an output of size (N, C, H, W) -> (N, H, W, 2),
    or theta (N, 3, 4) for (N, C, D, H, W) -> (N, D, H, W, 3): grid[n, ..., :] = theta[n] @ (x, y[, z], 1)."""
    op = "affine_grid"
    th = tensor_arg(theta, op, "theta")
    align = _align(align_corners, op)
    if not th.dtype.is_floating_point:
        raise ValueError(f"{op}: expected a floating-point theta, got {th.dtype}.")
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"{op}: expected a list or tuple of ints as size, got {type_name(size)}.")
    size = tuple(to_int(v, op, "size", TypeError) for v in size)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"{op}: size must have 4 (2-D transforms) or 5 (3-D transforms) entries, got "
                                  f"{size}.")
    n = len(size) - 2
    if th.ndim != 3 or tuple(th.shape[1:]) != (n, n + 1):
        raise ValueError(f"{op}: expected theta of shape (N, {n}, {n + 1}) for size {size}, got "
                         f"{shape_str(th.shape)}.")
    if min(size) <= 0:
        raise ValueError(f"{op}: expected positive output sizes, got {size}.")
    if th.shape[0] != size[0]:
        raise RuntimeError(f"{op}: theta {shape_str(th.shape)} has {th.shape[0]} transforms but size {size} has a "
                           f"batch of {size[0]}.")
    if align and min(size[2:]) == 1:
        warn(f"{op}: with align_corners=True a dimension of size 1 is sampled at 0 (torch's behaviour "
             "since 1.3.0), not at -1.", UserWarning)
    ft = _compute_type(th)
    spatial = size[2:]
    axes = [_steps(spatial[n - 1 - i], align, ft) for i in range(n)]      # x over the last dim, y, z
    mesh = np.meshgrid(*[axes[n - 1 - a] for a in range(n)], indexing="ij")  # over (D,) H, W
    base = np.stack([mesh[n - 1 - i] for i in range(n)] + [np.ones(spatial, dtype=ft)], -1)
    base = _const(base.reshape(-1, n + 1).astype(ft), th.dtype)             # (L, n + 1)
    grid = _C.matmul(base, _C.transpose(th, 1, 2))                          # (N, L, n)
    return rename(_C.reshape(grid, (size[0],) + spatial + (n,)), "AffineGridGeneratorBackward", (th,))


# ----- gumbel_softmax --------------------------------------------------------------------------------------------

def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + g) / tau) along dim with g ~ Gumbel(0, 1) drawn from the engine's generator; hard=True
    returns the one-hot of its argmax with the soft sample's gradient (straight-through:
    one_hot - soft.detach() + soft)."""
    op = "gumbel_softmax"
    x = tensor_arg(logits, op, "logits")
    if eps != 1e-10:
        warn(f"{op}: eps is deprecated and has no effect.", UserWarning)
    tau = number(tau, op, "tau")
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise TypeError(f"{op}: expected an int as dim, got {type_name(dim)}.")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected floating-point logits, got {x.dtype}.")
    d = wrap_dim(int(dim), x.ndim, op)
    # Gumbel(0, 1) = -log(E) with E ~ Exp(1) = -log(1 - U), U ~ U[0, 1) (E clamped away from 0 as torch's
    # exponential sampler never returns 0)
    u = np.asarray(bridge.view(_C.rand(tuple(x.shape), _C.float64)))
    e = np.maximum(-np.log1p(-u), np.finfo(np.float64).tiny)
    gumbels = _const(-np.log(e), x.dtype)
    y = softmax(_C.div(_C.add(x, gumbels), _C.scalar_operand(tau, x)), d)
    if not hard:
        return y
    soft = bridge.view(y.detach())
    one_hot = np.zeros(soft.shape, dtype=soft.dtype)
    if soft.size:
        np.put_along_axis(one_hot, np.expand_dims(np.argmax(soft, d), d), 1, d)
    return _C.add(_C.sub(_const(one_hot, x.dtype), y.detach()), y)
