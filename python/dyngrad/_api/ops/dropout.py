"""Dropout in torch.nn.functional's forms: elementwise, per channel (dropout1d/2d/3d, feature_alpha_dropout) and
alpha dropout, which keeps SELU activations at zero mean and unit variance.

Each is the input times a random mask (with alpha dropout, plus a shift), drawn from the engine's generator;
outside training, with p == 0 or on an empty input, the input itself is returned, as torch does.
"""
import math

from ... import _C
from ..._user_frame import warn
from ..args import number, tensor_arg, torch_name

# the SELU saturation value -scale * alpha (activation.SELU_SCALE * activation.SELU_ALPHA), as torch
_ALPHA = 1.7580993408473766


def _probability(p, op):
    p = float(number(p, op, "p"))
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}.")
    return p


def _drop(input, p, training, inplace, op, noise_shape=None, alpha=False, unbatched=False):
    """input * mask / (1 - p), or alpha dropout; the mask has the shape noise_shape(input) (broadcast over input),
    or input's. Unchanged, input itself is returned, or a view of it for an unbatched input (torch adds and removes
    a batch dim there) unless inplace."""
    a = tensor_arg(input, op)
    if p == 0 or not training or a.numel() == 0:
        return _C.reshape(a, tuple(a.shape)) if unbatched and not inplace else a

    def compute(x):
        if p == 1:                        # everything dropped (alpha dropout too, as torch)
            return _C.mul(x, _C.scalar_operand(0.0, x))
        dtype = x.dtype if x.dtype.is_floating_point else _C.float32
        keep = _C.bernoulli_mask(tuple(noise_shape(x) if noise_shape is not None else x.shape), 1 - p, dtype)
        if not alpha:
            return _C.mul(x, _C.mul(keep, _C.scalar_operand(1.0 / (1 - p), keep)))
        # dropped units are set to the SELU saturation value, then an affine map a * y + b restores the mean and
        # variance: a = 1 / sqrt((alpha^2 p + 1)(1 - p)), and kept units get a * x + alpha a p
        scale = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p))
        shift = _C.add(_C.mul(_C.sub(keep, _C.scalar_operand(1.0, keep)), _C.scalar_operand(_ALPHA * scale, keep)),
                       _C.scalar_operand(_ALPHA * scale * p, keep))
        return _C.add(_C.mul(x, _C.mul(keep, _C.scalar_operand(scale, keep))), shift)

    if not inplace:
        return compute(a)
    before = _C.inplace_input(a, op + "_", False)
    _C.assign_inplace(a, compute(before), op + "_")
    return a


def _feature_shape(op):
    """(N, C, 1, ...): one draw per channel of a batched input."""
    def shape(a):
        if a.ndim < 2:
            raise RuntimeError(f"{op}: feature dropout requires at least 2 dimensions in the input, got shape "
                               f"{tuple(a.shape)}.")
        return tuple(a.shape[:2]) + (1,) * (a.ndim - 2)
    return shape


def _unbatched_feature_shape(a):
    """(C, 1, ...): one draw per channel of an input without a batch dim (torch adds and removes one)."""
    if a.ndim < 1:
        raise RuntimeError("feature dropout requires at least 2 dimensions in the input; a 0-d tensor read as "
                           "unbatched has 1.")
    return (a.shape[0],) + (1,) * (a.ndim - 1)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes each element with probability p and scales the rest by 1 / (1 - p)."""
    return _drop(input, _probability(p, "dropout"), training, inplace, "dropout")


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _drop(input, _probability(p, "alpha_dropout"), training, inplace, "alpha_dropout", alpha=True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels (dim 1)."""
    return _drop(input, _probability(p, "feature_alpha_dropout"), training, inplace, "feature_alpha_dropout",
                 _feature_shape("feature_alpha_dropout"), alpha=True)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, L) or (C, L) input."""
    p = _probability(p, "dropout1d")
    a = tensor_arg(input, "dropout1d")
    if a.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: expected a 2-D (C, L) or 3-D (N, C, L) input, got {a.ndim}-D input of "
                           f"shape {tuple(a.shape)}.")
    shape = _feature_shape("dropout1d") if a.ndim == 3 else _unbatched_feature_shape
    return _drop(a, p, training, inplace, "dropout1d", shape, unbatched=a.ndim == 2)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, H, W) input; a 3-D input is read as (N, C, L), as torch still does."""
    p = _probability(p, "dropout2d")
    a = tensor_arg(input, "dropout2d")
    if a.ndim not in (3, 4):
        warn(f"dropout2d: received a {a.ndim}-D input; dropout2d is meant for 3-D or 4-D inputs (channels "
             "with 2 spatial dims), other shapes are deprecated in torch: use dropout instead.",
             UserWarning)
    if a.ndim == 3:
        warn("dropout2d: a 3-D input is read as (N, C, L) and whole channels of dim 1 are dropped (torch's "
             "behaviour, which torch plans to change to (C, H, W)); use dropout1d for that intent.",
             UserWarning)
    return _drop(a, p, training, inplace, "dropout2d", _feature_shape("dropout2d"))


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) input."""
    p = _probability(p, "dropout3d")
    a = tensor_arg(input, "dropout3d")
    if a.ndim not in (4, 5):
        warn(f"dropout3d: received a {a.ndim}-D input; dropout3d is meant for 4-D or 5-D inputs (channels "
             "with 3 spatial dims), other shapes are deprecated in torch: use dropout instead.",
             UserWarning)
    # anything but 5-D is read as unbatched, as torch
    shape = _feature_shape("dropout3d") if a.ndim == 5 else _unbatched_feature_shape
    return _drop(a, p, training, inplace, "dropout3d", shape, unbatched=a.ndim != 5)


# ----- torch.NAME forms: (input, p, train) ------------------------------------------------------------------------

def dropout_(input, p, train):
    return dropout(input, p, train, inplace=True)


@torch_name("alpha_dropout")
def alpha_dropout_fn(input, p, train):
    return alpha_dropout(input, p, train)


def alpha_dropout_(input, p, train):
    return alpha_dropout(input, p, train, inplace=True)


@torch_name("feature_alpha_dropout")
def feature_alpha_dropout_fn(input, p, train):
    return feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input, p, train):
    return feature_alpha_dropout(input, p, train, inplace=True)
