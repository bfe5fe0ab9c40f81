"""nn.functional.pad: constant, reflect, replicate and circular padding of the last dims, with torch's rules.

Every mode is an index map along each padded dim (Note [Padding as an index map]); the gradients are those of
the core ops the map is read with (slice and cat for constant padding, index_select for the others).
"""
import math

import numpy as np

from ... import _C
from .. import bridge
from ..args import INT64_MAX, shape_str, tensor_arg, to_int, type_name
from ..node_names import rename

MODES = ("constant", "reflect", "replicate", "circular")

# Note [Padding as an index map]
# Output position j of a dim of size L padded by (left, right) reads source position i = j - left, for
# j in [0, L + left + right). Inside [0, L) it is the input; outside, each mode maps i back into the input:
#   reflect    i < 0 -> -i,  i >= L -> 2 (L - 1) - i      (the edge is not repeated: needs left, right < L)
#   replicate  clamp(i, 0, L - 1)                         (the edge is repeated)
#   circular   i mod L                                    (needs left, right <= L: wraps at most once; a
#                                                          negative pad crops first and the other wraps over
#                                                          what is left, as torch)
# and constant padding fills it with the value. A negative left/right drops that many positions from that side
# (cropping), which the same map does without a special case. Dims are padded last to first, pad[0:2] being the
# last dim's (left, right), as torch reads the pad tuple.


def source_index(size, left, right, mode):
    """The input position each output position of one dim reads (Note [Padding as an index map])."""
    i = np.arange(-left, size + right, dtype=np.int64)
    if mode == "reflect":
        i = np.abs(i)
        return np.where(i >= size, 2 * (size - 1) - i, i)
    if mode == "replicate":
        return np.clip(i, 0, size - 1)
    # circular: a negative pad crops first, and the positive one wraps around what is left (as torch)
    lo, kept = max(-left, 0), size - max(-left, 0) - max(-right, 0)
    return lo + np.mod(np.arange(-max(left, 0), kept + max(right, 0), dtype=np.int64), kept)


def pad_arg(pad, op="pad"):
    if not isinstance(pad, (tuple, list)):
        if isinstance(pad, _C.Tensor):
            pad = pad.tolist()
        else:
            raise TypeError(f"{op}: expected a tuple of ints as pad, got {type_name(pad)}.")
    return tuple(to_int(p, op, "pad", TypeError) for p in pad)


def fill_value(value, dtype):
    """The padding value in the input's dtype (torch converts it: 2.5 pads an int64 tensor with 2)."""
    if dtype is _C.bool:
        return bool(value)
    if dtype.is_complex:
        return complex(value)
    if not dtype.is_floating_point:
        return int(value)
    return float(value)


def _constant(x, pads, value):
    """Constant padding: slice away negative pads, then cat blocks of the value onto each side."""
    out = x
    for k, (left, right) in enumerate(pads):
        d = x.ndim - 1 - k
        size = out.shape[d]
        start, stop = max(-left, 0), size - max(-right, 0)
        if stop < start:
            raise RuntimeError(f"pad: padding ({left}, {right}) of dimension {d} (size {x.shape[d]}) crops more "
                               f"than the dimension holds; the padded size would be {size + left + right}.")
        if start or stop != size:
            out = _C.slice(out, d, start, stop, 1)
        parts = []
        for n in (left, right):
            if n > 0:
                shape = list(out.shape)
                shape[d] = n
                parts.append(_C.full(tuple(shape), value, x.dtype))
            else:
                parts.append(None)
        if parts[0] is not None or parts[1] is not None:
            out = _C.cat([t for t in (parts[0], out, parts[1]) if t is not None], d)
    if out is x:
        out = _C.clone(x)       # torch returns a new tensor even for zero padding
    return out


def _check_mapped(x, pads, mode):
    spatial = len(pads)
    if x.ndim not in (spatial + 1, spatial + 2):
        raise NotImplementedError(f"pad: padding size {2 * spatial} is not supported for a {x.ndim}-D input in "
                                  f"{mode} mode (expected a {spatial + 1}-D or {spatial + 2}-D input).")
    # the batch dim (batched input) may be empty; channels and padded dims must not be, for these modes
    lead = 1 if x.ndim == spatial + 2 else 0
    for d in range(lead, x.ndim):
        if x.shape[d] == 0 and (mode != "reflect" or d >= x.ndim - spatial):
            raise RuntimeError(f"pad: {mode} padding expects non-empty dimensions other than the batch dimension, "
                               f"got an input of shape {shape_str(x.shape)}.")
    for k, (left, right) in enumerate(pads):
        d = x.ndim - 1 - k
        size = x.shape[d]
        if mode == "reflect" and (left >= size or right >= size):
            raise RuntimeError(f"pad: reflect padding must be smaller than the padded dimension, got padding "
                               f"({left}, {right}) for dimension {d} of size {size} (input {shape_str(x.shape)}).")
        kept = size - max(-left, 0) - max(-right, 0)     # what a negative pad leaves of the dim
        if mode == "circular" and (left > kept or right > kept):
            raise RuntimeError(f"pad: circular padding must be at most the padded dimension (it wraps around only "
                               f"once), got padding ({left}, {right}) for dimension {d} of size {size}.")
        if size + left + right < 1:
            raise RuntimeError(f"pad: padding ({left}, {right}) of dimension {d} (size {size}) leaves an output of "
                               f"size {size + left + right}; it must be at least 1.")


def pad(input, pad, mode="constant", value=None):
    return _padded(input, pad, mode, value, "pad")


def _padded(input, pad, mode, value, op):
    """Pads the last len(pad) // 2 dims of input: pad = (last_left, last_right, 2nd_last_left, ...). Negative
    padding crops. mode: 'constant' (value, default 0; any number of dims), 'reflect', 'replicate' and
    'circular' (1 to 3 dims of a batched or unbatched input)."""
    x = tensor_arg(input, "pad")
    p = pad_arg(pad)
    if len(p) % 2:
        raise RuntimeError(f"pad: the padding length must be divisible by 2, got {len(p)}.")
    if len(p) > 2 * x.ndim:
        raise RuntimeError(f"pad: the padding length must be at most twice the input's dimensions, got padding "
                           f"length {len(p)} for an input of shape {shape_str(x.shape)}.")
    if mode not in MODES:
        raise NotImplementedError(f"pad: unrecognised padding mode {mode!r} (expected one of {', '.join(MODES)}).")
    pads = [(p[2 * k], p[2 * k + 1]) for k in range(len(p) // 2)]
    out_shape = list(x.shape)
    for k, (left, right) in enumerate(pads):
        out_shape[x.ndim - 1 - k] += left + right
    if math.prod(max(v, 0) for v in out_shape) > INT64_MAX:
        raise RuntimeError(f"pad: the padded shape {shape_str(out_shape)} has more elements than fit in 64 bits.")
    if mode == "constant":
        v = 0 if value is None else value
        real_numbers = (bool, int, float, np.bool_, np.integer, np.floating)     # F.pad's value is a float
        numbers = real_numbers + (complex, np.complexfloating) if op == "constant_pad_nd" else real_numbers
        if not isinstance(v, numbers):
            raise TypeError(f"{op}: expected a number as value, got {type_name(v)}.")
        if isinstance(v, (complex, np.complexfloating)) and not x.dtype.is_complex:
            if v.imag != 0:
                raise RuntimeError(f"{op}: the value {v} cannot be converted to the input's dtype {x.dtype.name} "
                                   "without losing its imaginary part.")
            v = v.real
        return rename(_constant(x, pads, fill_value(v, x.dtype)), "ConstantPadNdBackward", (x,))
    if value is not None and value != 0:
        raise RuntimeError(f"pad: {mode} padding does not take a value argument, got value={value!r}.")
    if not pads:
        return _C.clone(x)
    _check_mapped(x, pads, mode)
    out = x
    for k, (left, right) in enumerate(pads):
        d = x.ndim - 1 - k
        if left or right:
            idx = source_index(x.shape[d], left, right, mode)
            out = _C.index_select(out, d, bridge.copy(idx, False))
    if out is x:
        return _C.clone(x)
    if mode == "circular":
        return out
    name = {"reflect": "ReflectionPad", "replicate": "ReplicationPad"}[mode]
    return rename(out, f"{name}{len(pads)}DBackward", (x,))




def constant_pad_nd(input, pad, value=0):
    """torch.constant_pad_nd: pad(input, pad, mode='constant', value=value) (the ATen op F.pad calls)."""
    return _padded(input, pad, "constant", value, "constant_pad_nd")
