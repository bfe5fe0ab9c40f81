"""Losses with torch.nn.functional's signatures: weight=, ignore_index=, label_smoothing= and reduction= where
torch has them, and the deprecated size_average= / reduce=, mapped to a reduction with torch's warning.

Most are composites of the core's primitives. binary_cross_entropy and ctc_loss are custom autograd Functions
(numpy forward, backward in dyngrad ops): torch's gradients there are not the derivatives of a composite (bce
clamps its logs and its gradient's denominator; ctc's gradient is the alpha-beta posterior formula).
"""
import dataclasses
import math
import warnings

import numpy as np

from ... import _C
from ..._user_frame import warn
from ...autograd.function import Function, _jvp_input_has_tangent, _jvp_primal
from .. import bridge
from ..args import (Tensor, broadcast_shapes, number, optional_tensor, reduce_loss, reduction_code, refuse_complex,
                    shape_str, tensor_arg, to_int, torch_name, type_name)
from ..node_names import shows_as
from .activation import log_sigmoid
from .distance import pairwise_distance
from .linear import linear
_REDUCTION_NAMES = {0: "none", 1: "mean", 2: "sum"}


def _k(value, like):
    return _C.scalar_operand(value, like)


# ----- reductions ------------------------------------------------------------------------------------------------

def legacy_reduction(size_average, reduce, op):
    """torch's mapping of the deprecated size_average / reduce flags (each None counting as True) to a reduction:
    both true -> 'mean', reduce alone -> 'sum', reduce=False -> 'none'; warns as torch does."""
    size_average = True if size_average is None else bool(size_average)
    reduce = True if reduce is None else bool(reduce)
    name = "mean" if size_average and reduce else ("sum" if reduce else "none")
    warn(f"{op}: size_average and reduce are deprecated, use reduction='{name}' instead.", UserWarning)
    return name


def _reduction(size_average, reduce, reduction, op):
    """The reduction code (0 none, 1 mean, 2 sum), from the legacy flags when either is given."""
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce, op)
    return reduction_code(reduction, op)


def _aten_reduction(reduction, op):
    """torch.NAME's reduction argument: an int (0 none, 1 mean, 2 sum), as ATen takes it."""
    if isinstance(reduction, bool) or not isinstance(reduction, int):
        raise TypeError(f"{op}: expected an int reduction (0 none, 1 mean, 2 sum), got {type(reduction).__name__}; "
                        "nn.functional takes the reduction by name.")
    if reduction not in _REDUCTION_NAMES:
        raise ValueError(f"{op}: reduction must be 0 (none), 1 (mean) or 2 (sum), got {reduction}.")
    return _REDUCTION_NAMES[reduction]


def _warn_broadcast(x, y, op):
    if tuple(x.shape) != tuple(y.shape):
        warn(f"{op}: using a target size {shape_str(y.shape)} that is different to the input size "
             f"{shape_str(x.shape)}; they will be broadcast, which is likely not what you want. Please "
             "ensure they have the same size.", UserWarning)


def _broadcast_pair(x, y, op):
    """x and y expanded to their common shape (the core reports shapes that cannot be broadcast)."""
    if tuple(x.shape) == tuple(y.shape):
        return x, y
    shape = broadcast_shapes(x.shape, y.shape, op)
    return _C.expand(x, shape), _C.expand(y, shape)


def _weighted(losses, weight, x, code, op, mean_over_weights=True):
    """losses * weight reduced; torch's weighted mean of mse/l1 divides by the sum of the weights, huber's by the
    number of elements."""
    w = tensor_arg(weight, op, "weight")
    if tuple(w.shape) != tuple(x.shape):
        raise ValueError(f"{op}: weight of shape {shape_str(w.shape)} must have the input's shape "
                         f"{shape_str(x.shape)}.")
    losses = _C.mul(losses, w)
    if code == 1 and mean_over_weights:
        return _C.div(_C.sum(losses, (), False), _C.sum(w, (), False))
    return reduce_loss(losses, code)


# ----- regression ------------------------------------------------------------------------------------------------

@shows_as("MseLoss")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """(input - target)^2, optionally weighted per element."""
    x = tensor_arg(input, "mse_loss")
    y = tensor_arg(target, "mse_loss", "target")
    refuse_complex("mse_loss", x, y)
    _warn_broadcast(x, y, "mse_loss")
    code = _reduction(size_average, reduce, reduction, "mse_loss")
    x, y = _broadcast_pair(x, y, "mse_loss")
    d = _C.sub(x, y)
    losses = _C.mul(d, d)
    if weight is not None:
        return _weighted(losses, weight, x, code, "mse_loss")
    return reduce_loss(losses, code)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """|input - target|, optionally weighted per element."""
    x = tensor_arg(input, "l1_loss")
    y = tensor_arg(target, "l1_loss", "target")
    _warn_broadcast(x, y, "l1_loss")
    code = _reduction(size_average, reduce, reduction, "l1_loss")
    x, y = _broadcast_pair(x, y, "l1_loss")
    losses = _C.abs(_C.sub(x, y))
    if weight is not None:
        return _weighted(losses, weight, x, code, "l1_loss")
    return reduce_loss(losses, code)


def _piecewise_quadratic(r, beta, linear_scale):
    """0.5 r^2 / beta where |r| < beta, else linear_scale * (|r| - 0.5 beta), for the residual r.

    The square is of r itself, not of |r|: through abs the second derivative at r = 0 would be sign(0)^2 = 0,
    where torch's (and the mathematics') is 1 / beta."""
    d = _C.abs(r)
    quadratic = _C.mul(_C.mul(r, r), _k(0.5 / beta, r))
    linear = _C.sub(d, _k(0.5 * beta, d))
    if linear_scale != 1.0:
        linear = _C.mul(linear, _k(linear_scale, d))
    return _C.where(_C.compare("lt", d, _k(beta, d)), quadratic, linear)


@shows_as("SmoothL1Loss")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta."""
    x = tensor_arg(input, "smooth_l1_loss")
    y = tensor_arg(target, "smooth_l1_loss", "target")
    refuse_complex("smooth_l1_loss", x, y)
    _warn_broadcast(x, y, "smooth_l1_loss")
    code = _reduction(size_average, reduce, reduction, "smooth_l1_loss")
    beta = float(number(beta, "smooth_l1_loss", "beta"))
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss: beta must be non-negative, got {beta}.")
    x, y = _broadcast_pair(x, y, "smooth_l1_loss")
    r = _C.sub(x, y)
    return reduce_loss(_C.abs(r) if beta == 0 else _piecewise_quadratic(r, beta, 1.0), code)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta): delta times smooth_l1 with beta = delta."""
    x = tensor_arg(input, "huber_loss")
    y = tensor_arg(target, "huber_loss", "target")
    refuse_complex("huber_loss", x, y)
    _warn_broadcast(x, y, "huber_loss")
    code = reduction_code(reduction, "huber_loss")
    delta = float(number(delta, "huber_loss", "delta"))
    if delta <= 0:
        raise RuntimeError(f"huber_loss: delta must be positive, got {delta}.")
    x, y = _broadcast_pair(x, y, "huber_loss")
    # (0.5 r^2 / delta where |r| < delta, else |r| - 0.5 delta) times delta; rounded as torch's 0.5 r^2
    r = _C.sub(x, y)
    d = _C.abs(r)
    quadratic = _C.mul(_C.mul(r, r), _k(0.5, r))
    linear = _C.mul(_C.sub(d, _k(0.5 * delta, d)), _k(delta, d))
    losses = _C.where(_C.compare("lt", d, _k(delta, d)), quadratic, linear)
    if weight is not None:
        return _weighted(losses, weight, x, code, "huber_loss", mean_over_weights=False)
    return reduce_loss(losses, code)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """exp(input) - target * input (log_input), else input - target * log(input + eps); full=True adds Stirling's
    approximation of log(target!) where target > 1."""
    x = tensor_arg(input, "poisson_nll_loss")
    y = tensor_arg(target, "poisson_nll_loss", "target")
    code = _reduction(size_average, reduce, reduction, "poisson_nll_loss")
    if log_input:
        losses = _C.sub(_C.exp(x), _C.mul(y, x))
    else:
        losses = _C.sub(x, _C.mul(y, _C.log(_C.add(x, _k(float(eps), x)))))
    if full:
        # target log(target) - target + 0.5 log(2 pi target), only where target > 1 (log(target) sees 1 elsewhere)
        big = _C.compare("gt", y, _k(1.0, y))
        safe = _C.where(big, y, _k(1.0, y))
        stirling = _C.add(_C.sub(_C.mul(safe, _C.log(safe)), safe),
                          _C.mul(_C.log(_C.mul(safe, _k(2 * math.pi, safe))), _k(0.5, safe)))
        losses = _C.add(losses, _C.where(big, stirling, _k(0.0, stirling)))
    return reduce_loss(losses, code)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) with full=True); var may
    have one dim fewer than input, or size 1 in one dim (one variance shared)."""
    x = tensor_arg(input, "gaussian_nll_loss")
    y = tensor_arg(target, "gaussian_nll_loss", "target")
    if isinstance(var, Tensor):
        if bool(_C.sum(_C.compare("lt", var, _k(0, var)), (), False).item()):
            raise ValueError("gaussian_nll_loss: var has negative entries.")
        v = var
    else:
        value = float(number(var, "gaussian_nll_loss", "var"))
        if value < 0:
            raise ValueError("gaussian_nll_loss: var has negative entries.")
        v = _C.full(tuple(x.shape), value, x.dtype)
    if tuple(v.shape) != tuple(x.shape):
        if tuple(x.shape[:-1]) == tuple(v.shape):
            v = _C.unsqueeze(v, -1)          # one variance per row of the last dim
        elif not (x.ndim == v.ndim and sum(b for a, b in zip(x.shape, v.shape) if a != b) == 1):
            raise ValueError(f"gaussian_nll_loss: var of shape {shape_str(v.shape)} is of incorrect size for input "
                             f"of shape {shape_str(x.shape)}.")
    code = reduction_code(reduction, "gaussian_nll_loss")
    # torch clamps a copy of var without recording it: the value is clamped, the gradient is var's own
    clamped = _C.add(v, _C.sub(_C.clamp(v.detach(), float(eps), None), v.detach()))
    d = _C.sub(x, y)
    losses = _C.mul(_C.add(_C.log(clamped), _C.div(_C.mul(d, d), clamped)), _k(0.5, clamped))
    if full:
        losses = _C.add(losses, _k(0.5 * math.log(2 * math.pi), losses))
    return reduce_loss(losses, code)


# ----- classification: probabilities -----------------------------------------------------------------------------

# torch's epsilon of the bce gradient is the float32 constant 1e-12
_BCE_EPSILON = float(np.float32(1e-12))


class BinaryCrossEntropy(Function):
    """-w (y log x + (1 - y) log(1 - x)) per element, each log clamped at -100 as torch; torch's gradient
    w (x - y) / max(x (1 - x), 1e-12) stays finite at x = 0 and 1, where a composite's would not."""

    @staticmethod
    def forward(ctx, input, target, *weight):
        x, y = bridge.host_values(input), bridge.host_values(target)        # (float32 for the half types)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_x = np.maximum(np.log(x), -100.0)
            log_1mx = np.maximum(np.log1p(-x), -100.0)
        losses = (y - 1) * log_1mx - y * log_x
        if weight:
            losses = losses * bridge.host_values(weight[0])
        ctx.save_for_backward(input, target, *weight)
        return bridge.host_result(losses, input.dtype)

    @staticmethod
    def _partials(x, y, weight):
        """d loss/dx = w (x - y) / max(x (1 - x), eps) and d loss/dy = w (log(1 - x) - log x), elementwise."""
        one = _k(1.0, x)
        dx = _C.div(_C.sub(x, y), _C.clamp(_C.mul(x, _C.sub(one, x)), _BCE_EPSILON, None))
        dy = _C.sub(_C.log(_C.sub(one, x)), _C.log(x))
        if weight:
            dx, dy = _C.mul(dx, weight[0]), _C.mul(dy, weight[0])
        return dx, dy

    @staticmethod
    def backward(ctx, grad):
        x, y, *weight = ctx.saved_tensors
        dx, dy = BinaryCrossEntropy._partials(x, y, weight)
        return (_C.mul(grad, dx), _C.mul(grad, dy)) + (None,) * len(weight)

    # torch's forward derivative: the same partials on the tangents of input and target (none through weight)
    @staticmethod
    def jvp(ctx, tx, ty, *tw):
        x, y, *weight = ctx.saved_tensors
        dx, dy = BinaryCrossEntropy._partials(_jvp_primal(ctx, x), _jvp_primal(ctx, y), weight)
        terms = [_C.mul(t, d) for a, t, d in ((x, tx, dx), (y, ty, dy)) if _jvp_input_has_tangent(ctx, a)]
        return None if not terms else terms[0] if len(terms) == 1 else _C.add(*terms)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-w (y log x + (1 - y) log(1 - x)) for probabilities x in [0, 1]; weight broadcasts to the target's
    shape."""
    x = tensor_arg(input, "binary_cross_entropy")
    y = tensor_arg(target, "binary_cross_entropy", "target")
    w = optional_tensor(weight, "binary_cross_entropy", "weight")
    code = _reduction(size_average, reduce, reduction, "binary_cross_entropy")
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"binary_cross_entropy: target of size {shape_str(y.shape)} must have the input's size "
                         f"{shape_str(x.shape)} (torch does not broadcast them).")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"binary_cross_entropy: expected a floating-point input, got {x.dtype.name}.")
    values = bridge.host_values(x)
    if not ((values >= 0) & (values <= 1)).all():
        raise RuntimeError("binary_cross_entropy: all elements of input should be between 0 and 1.")
    if y.dtype is not x.dtype:
        y = _C.to_dtype(y, x.dtype)
    args = (x, y)
    if w is not None:
        shape = broadcast_shapes(y.shape, w.shape, "binary_cross_entropy")
        if shape != tuple(x.shape):
            raise RuntimeError(f"binary_cross_entropy: weight of shape {shape_str(w.shape)} does not broadcast to the "
                               f"input's shape {shape_str(x.shape)}.")
        args += (_C.contiguous(_C.expand(w if w.dtype is x.dtype else _C.to_dtype(w, x.dtype), shape)),)
    return reduce_loss(BinaryCrossEntropy.apply(*args), code)


@shows_as("BinaryCrossEntropyWithLogits")
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """Sigmoid + binary cross entropy in one stable expression: (1 - y) x - (1 + (pos_weight - 1) y) log sigmoid(x),
    times weight; pos_weight (one per class, broadcast over the last dims) weighs the positive term."""
    x = tensor_arg(input, "binary_cross_entropy_with_logits")
    y = tensor_arg(target, "binary_cross_entropy_with_logits", "target")
    pw = optional_tensor(pos_weight, "binary_cross_entropy_with_logits", "pos_weight")
    w = optional_tensor(weight, "binary_cross_entropy_with_logits", "weight")
    code = _reduction(size_average, reduce, reduction, "binary_cross_entropy_with_logits")
    if tuple(x.shape) != tuple(y.shape):      # torch does not broadcast here
        raise ValueError(f"binary_cross_entropy_with_logits: target size {shape_str(y.shape)} must be the same as "
                         f"input size {shape_str(x.shape)}.")
    log_sig = log_sigmoid(x)
    if pw is not None:
        log_sig = _C.mul(_C.add(_C.mul(_C.sub(pw, _k(1, pw)), y), _k(1, pw)), log_sig)
    losses = _C.sub(_C.sub(x, _C.mul(x, y)), log_sig)
    if w is not None:
        losses = _C.mul(losses, w)
    return reduce_loss(losses, code)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target (log target - input) for log-probabilities input; reduction='batchmean' divides the sum by the
    batch size (the KL divergence), 'mean' by the number of elements (with torch's warning)."""
    x = tensor_arg(input, "kl_div")
    y = tensor_arg(target, "kl_div", "target")
    refuse_complex("kl_div", x, y)
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce, "kl_div")
    elif reduction == "mean":
        warn("kl_div: reduction='mean' divides the total loss by both the batch size and the support size; "
             "'batchmean' divides by the batch size only, which is the KL divergence, and 'mean' will "
             "behave as 'batchmean' in a future torch release.", UserWarning)
    batchmean = reduction == "batchmean"
    code = 2 if batchmean else reduction_code(reduction, "kl_div")
    if log_target:
        losses = _C.mul(_C.exp(y), _C.sub(y, x))
    else:
        # xlogy(y, y) - y x, with 0 log 0 = 0
        zero = _C.compare("eq", y, _k(0.0, y))
        ylogy = _C.mul(y, _C.log(_C.where(zero, _k(1.0, y), y)))
        losses = _C.sub(_C.where(zero, _k(0.0, ylogy), ylogy), _C.mul(y, x))
    out = reduce_loss(losses, code)
    if batchmean and x.ndim != 0:
        out = _C.div(out, _k(float(x.shape[0]), out))
    return out


# ----- classification: class indices -----------------------------------------------------------------------------

def _class_targets(x, y, ignore_index, op):
    """Checks int64 class targets of logits/log-probabilities x: (N, C) with (N,), (C,) with (), or (N, C, d1, ...)
    with (N, d1, ...); every target but ignore_index in [0, C). The wording is the core cross_entropy's. Returns
    the target, a (1,) target of (C,) input read as 0-d (torch accepts it)."""
    if y.dtype is not _C.int64:
        raise RuntimeError(f"{op}: expected int64 class indices as target, got {y.dtype.name}.")
    if x.ndim == 0:
        raise RuntimeError(f"{op}: expected input of shape (C,), (N, C) or (N, C, d1, ...), got a 0-d tensor.")
    expected = () if x.ndim == 1 else (x.shape[0],) + tuple(x.shape[2:])
    if x.ndim == 1 and tuple(y.shape) == (1,):
        y = _C.reshape(y, ())
    if tuple(y.shape) != expected:
        what = "logits" if op == "cross_entropy" else "input"
        message = (f"{op}: target of shape {shape_str(y.shape)} does not match {what} of shape {shape_str(x.shape)} "
                   f"(expected {shape_str(expected)}).")
        # a different batch size is torch's ValueError, any other mismatch its RuntimeError
        batch_differs = (x.ndim > 1 and (y.ndim == 0 or y.shape[0] != x.shape[0])) or (x.ndim == 1 and y.ndim == 1)
        raise (ValueError if batch_differs else RuntimeError)(message)
    bridge.validate(_check_target_range, y, x.shape[1 if x.ndim > 1 else 0], ignore_index, op)
    return y


def _check_target_range(t, c, ignore_index, op):
    bad = t[(t != ignore_index) & ((t < 0) | (t >= c))]
    if bad.size:
        raise IndexError(f"{op}: target {int(bad.reshape(-1)[0])} is out of range for {c} classes.")


def _check_class_weight(w, c, op):
    if w is not None and (w.ndim != 1 or w.shape[0] != c):
        raise RuntimeError(f"{op}: weight must hold one weight per class ({c}), got shape {shape_str(w.shape)}.")


def _rows(x):
    """(N, C, d1, ...) -> (N * d1 * ..., C): one row of class scores per position."""
    c = x.shape[1]
    return _C.reshape(_C.permute(x, (0,) + tuple(range(2, x.ndim)) + (1,)), (-1, c))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Softmax cross entropy of logits (C,), (N, C) or (N, C, d1, ...) against class indices, or against class
    probabilities (a float target of the input's shape)."""
    x = tensor_arg(input, "cross_entropy")
    y = tensor_arg(target, "cross_entropy", "target")
    w = optional_tensor(weight, "cross_entropy", "weight")
    code = _reduction(size_average, reduce, reduction, "cross_entropy")
    ignore_index = to_int(ignore_index, "cross_entropy", "ignore_index")
    label_smoothing = float(number(label_smoothing, "cross_entropy", "label_smoothing"))
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}.")
    if x.ndim == 0:
        raise RuntimeError("cross_entropy: expected input of shape (C,), (N, C) or (N, C, d1, ...), got a 0-d "
                           "tensor.")
    class_dim = 1 if x.ndim > 1 else 0
    c = x.shape[class_dim]
    _check_class_weight(w, c, "cross_entropy")
    if tuple(y.shape) == tuple(x.shape):
        return _cross_entropy_probabilities(x, y, w, ignore_index, code, label_smoothing, class_dim)
    y = _class_targets(x, y, ignore_index, "cross_entropy")
    if w is not None:
        return _weighted_cross_entropy(x, y, w, ignore_index, code, label_smoothing)
    if x.ndim > 2:
        losses = _C.cross_entropy(_rows(x), _C.reshape(y, (-1,)), code, ignore_index, label_smoothing)
        return _C.reshape(losses, tuple(y.shape)) if code == 0 else losses
    return _C.cross_entropy(x, y, code, ignore_index, label_smoothing)



@dataclasses.dataclass(slots=True, frozen=True)
class LinearCrossEntropyOptions:
    """torch 2.13's nn.LinearCrossEntropyOptions: how F.linear_cross_entropy may evaluate in chunks of batch rows
    (allow_retain_graph, batch_chunk_size, chunking_method, acc_policy, acc_dtype), checked as torch checks them.
    dyngrad evaluates the whole product whatever the options say (the result is the same: torch's chunked path is
    a memory saving), and warns where torch warns that they are ignored."""
    allow_retain_graph: bool = False
    batch_chunk_size: "int | None" = None
    chunking_method: "str | None" = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.acc_policy not in {"auto", "accurate", "balanced", "compact"}:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            name, sep, factor = str(self.chunking_method).partition(":")
            factor = factor if sep else "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        if not (self.batch_chunk_size is None or (isinstance(self.batch_chunk_size, int) and
                                                  not isinstance(self.batch_chunk_size, bool) and
                                                  self.batch_chunk_size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {self.batch_chunk_size!r}")
        if self.acc_dtype is not None and (not isinstance(self.acc_dtype, _C.dtype) or self.acc_dtype.name not in
                                           ("float16", "bfloat16", "float32", "float64")):
            raise ValueError(f"acc_dtype must be one of {{None, float16, bfloat16, float32, float64}}, got "
                             f"{self.acc_dtype!r}. Pass acc_dtype=None to let the op pick automatically.")


# where users reach it: torch.nn.modules.linear_cross_entropy_options (re-exported there and as nn.*)
LinearCrossEntropyOptions.__module__ = __name__.replace("._api.ops.loss", ".nn.modules.linear_cross_entropy_options")


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, options=None):
    """torch 2.13's F.linear_cross_entropy: cross_entropy(linear(input, linear_weight, linear_bias), target, ...),
    ignore_index None meaning -100, with torch's checks: input of 1 or 2 dims, linear_weight of at least 2 (a weight
    of shape (C, d_1, ..., d_K, in_features) gives K-dimensional logits (N, C, d_1, ..., d_K) and needs a batched
    input), linear_bias of shape (C, d_1, ..., d_K), no ignore_index with class probabilities, `options` None or a
    LinearCrossEntropyOptions (see there: the same result as torch's chunked evaluation)."""
    op = "linear_cross_entropy"
    x = tensor_arg(input, op)
    w = tensor_arg(linear_weight, op, "linear_weight")
    y = tensor_arg(target, op, "target")
    b = optional_tensor(linear_bias, op, "linear_bias")
    if options is not None and not isinstance(options, LinearCrossEntropyOptions):
        raise TypeError(f"{op}(): argument 'options' must be LinearCrossEntropyOptions or None, not "
                        f"{type_name(options)}")
    if x.ndim < 1 or x.ndim > 2:
        raise RuntimeError(f"{op}: expected input with dimensionality 1 or 2, got {x.ndim}")
    if w.ndim < 2:
        raise RuntimeError(f"{op}: expected linear_weight with dimensionality at least 2, got {w.ndim}")
    if x.shape[-1] != w.shape[-1]:
        raise RuntimeError(f"{op}: expected equal input and linear_weight last dimensions (in_features), got "
                           f"{x.shape[-1]} and {w.shape[-1]}, respectively")
    out_features = tuple(w.shape[1:-1])
    if b is not None and tuple(b.shape) != (w.shape[0],) + out_features:
        raise RuntimeError(f"{op}: expected linear_bias shape {(w.shape[0],) + out_features}, got {tuple(b.shape)}")
    if out_features and x.ndim == 1:
        raise RuntimeError(f"{op}: K-dimensional loss defined by linear_weight shape {tuple(w.shape)} requires "
                           f"batched input, (N, {x.shape[-1]}), got unbatched input with shape {tuple(x.shape)}")
    logits_shape = tuple(x.shape[:-1]) + (w.shape[0],) + out_features
    if tuple(y.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError(f"{op}: ignore_index cannot be specified when target contains probabilities")
    if options is not None and (out_features or reduction not in ("mean", "sum", "none") or label_smoothing != 0.0
                                or y.dtype.name != "int64"):
        warn(f"{op}: ``options`` ignored; chunked path needs reduction in {{'mean','sum','none'}}, "
             f"label_smoothing == 0, target.dtype == int64, out_features == (). Got reduction={reduction!r}, "
             f"label_smoothing={label_smoothing}, target.dtype={y.dtype.name}, out_features={out_features}.",
             UserWarning)
    if not out_features:
        logits = linear(x, w, b)
    else:
        flat = _C.matmul(x, _C.mT(_C.reshape(w, [-1, w.shape[-1]])))
        logits = _C.reshape(flat, list(x.shape[:-1]) + list(w.shape[:-1]))
        if b is not None:
            logits = _C.add(logits, b)
    return cross_entropy(logits, y, weight, ignore_index=-100 if ignore_index is None else ignore_index,
                         reduction=reduction, label_smoothing=label_smoothing)


def _cross_entropy_probabilities(x, y, w, ignore_index, code, label_smoothing, class_dim):
    """-(w * target' * log_softmax(x)).sum(class_dim), target' = target (1 - eps) + eps / C; the mean divides by
    the number of positions (not by the weights)."""
    if not y.dtype.is_floating_point:
        raise RuntimeError(f"cross_entropy: a target of the input's shape holds class probabilities and must be "
                           f"floating point, got {y.dtype.name}.")
    if ignore_index >= 0:
        raise RuntimeError("cross_entropy: ignore_index is not supported for class probabilities as target.")
    logp = _C.log_softmax(x, class_dim)
    if label_smoothing:
        c = x.shape[class_dim]
        y = _C.add(_C.mul(y, _k(1 - label_smoothing, y)), _k(label_smoothing / c, y))
    terms = _C.mul(y, logp)
    if w is not None:
        shape = [1] * x.ndim
        shape[class_dim] = w.shape[0]
        terms = _C.mul(terms, _C.reshape(w, tuple(shape)))
    return reduce_loss(_C.neg(_C.sum(terms, (class_dim,), False)), code)


def _weighted_cross_entropy(x, y, w, ignore_index, code, label_smoothing):
    """torch's class-weighted cross entropy: (1 - eps) * weighted nll + eps / C * the weighted uniform term, the
    mean taken over the weights of the targets."""
    class_dim = 1 if x.ndim > 1 else 0
    logp = _C.log_softmax(x, class_dim)
    nll = nll_loss(logp, y, w, ignore_index=ignore_index, reduction="none")
    if not label_smoothing:
        return _reduce_weighted(nll, y, w, ignore_index, code)
    c = x.shape[class_dim]
    shape = [1] * x.ndim
    shape[class_dim] = c
    smooth = _C.neg(_C.sum(_C.mul(logp, _C.reshape(w, tuple(shape))), (class_dim,), False))
    keep = _C.to_dtype(_C.compare("ne", y, _k(ignore_index, y)), x.dtype)
    smooth = _C.mul(smooth, keep)
    losses = _C.add(_C.mul(nll, _k(1 - label_smoothing, nll)), _C.mul(smooth, _k(label_smoothing / c, smooth)))
    return _reduce_weighted(losses, y, w, ignore_index, code)


def _reduce_weighted(losses, y, w, ignore_index, code):
    """The mean of class-weighted losses divides by the summed weights of the (kept) targets."""
    if code != 1:
        return reduce_loss(losses, code)
    keep = _C.compare("ne", y, _k(ignore_index, y))
    safe = _C.where(keep, y, _k(0, y))
    weights = _C.mul(_C.index_select(w.detach(), 0, _C.reshape(safe, (-1,))),
                     _C.to_dtype(_C.reshape(keep, (-1,)), w.dtype))
    return _weighted_mean(losses, _C.sum(weights, (), False))


def _weighted_mean(losses, total):
    """sum(losses) / total, for a constant total; 0 / 0 = nan when every target is ignored, with zero gradients
    (torch's), not nan ones."""
    empty = _C.compare("eq", total, _k(0.0, total))
    mean = _C.div(_C.sum(losses, (), False), _C.where(empty, _k(1.0, total), total))
    return _C.where(empty, _k(math.nan, mean), mean)


@shows_as("NllLoss")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-input[n, target[n]] (times weight[target[n]]), for log-probabilities (C,), (N, C) or (N, C, d1, ...)."""
    x = tensor_arg(input, "nll_loss")
    y = tensor_arg(target, "nll_loss", "target")
    w = optional_tensor(weight, "nll_loss", "weight")
    refuse_complex("nll_loss", x, w)
    code = _reduction(size_average, reduce, reduction, "nll_loss")
    ignore_index = to_int(ignore_index, "nll_loss", "ignore_index")
    y = _class_targets(x, y, ignore_index, "nll_loss")
    _check_class_weight(w, x.shape[1 if x.ndim > 1 else 0], "nll_loss")
    if x.ndim > 2:
        losses = nll_loss(_rows(x), _C.reshape(y, (-1,)), w, ignore_index=ignore_index, reduction="none")
        if code == 0:
            return _C.reshape(losses, tuple(y.shape))
        if w is not None:
            return _reduce_weighted(losses, y, w, ignore_index, code)
        return _mean_kept(losses, y, ignore_index) if code == 1 else reduce_loss(losses, code)
    rows, t = (x, y) if x.ndim == 2 else (_C.unsqueeze(x, 0), _C.unsqueeze(y, 0))
    keep = _C.compare("ne", t, _k(ignore_index, t))
    safe = _C.where(keep, t, _k(0, t))
    picked = _C.squeeze(_C.gather(rows, 1, _C.unsqueeze(safe, 1)), (1,))
    factor = _C.to_dtype(keep, x.dtype)
    if w is not None:                    # the class weights get no gradient, as in torch
        factor = _C.mul(factor, _C.index_select(_C.to_dtype(w.detach(), x.dtype), 0, safe))
    losses = _C.neg(_C.mul(picked, factor))
    if x.ndim == 1:
        losses, factor = _C.squeeze(losses, (0,)), _C.squeeze(factor, (0,))
    if code == 1:
        return _weighted_mean(losses, _C.sum(factor.detach(), (), False))
    return reduce_loss(losses, code)


def _mean_kept(losses, y, ignore_index):
    keep = _C.to_dtype(_C.compare("ne", y, _k(ignore_index, y)), losses.dtype)
    return _weighted_mean(losses, _C.sum(keep, (), False))


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
    """sum over classes i != y of max(0, margin - x[y] + x[i])^p (times weight[y]), divided by the number of
    classes, per sample of (N, C) or (C,) input."""
    x = tensor_arg(input, "multi_margin_loss")
    y = tensor_arg(target, "multi_margin_loss", "target")
    code = _reduction(size_average, reduce, reduction, "multi_margin_loss")
    p = number(p, "multi_margin_loss", "p")
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 are supported, got {p}.")
    w = optional_tensor(weight, "multi_margin_loss", "weight")
    if w is not None and w.ndim != 1:
        raise ValueError(f"multi_margin_loss: weight must be one-dimensional, got shape {shape_str(w.shape)}.")
    if x.ndim > 2 or (x.ndim == 2 and x.shape[1] == 0) or (x.ndim == 1 and x.shape[0] == 0):
        raise RuntimeError(f"multi_margin_loss: expected a non-empty (C,) or (N, C) input, got shape "
                           f"{shape_str(x.shape)}.")
    n, c = (x.shape[0], x.shape[1]) if x.ndim == 2 else (1, x.shape[0] if x.ndim == 1 else 1)
    if (x.ndim == 2 and y.ndim != 1) or y.ndim > 1 or y.numel() != n:
        raise RuntimeError(f"multi_margin_loss: expected a target of {n} class indices, got shape "
                           f"{shape_str(y.shape)}.")
    if w is not None and w.numel() != c:
        raise RuntimeError(f"multi_margin_loss: weight must hold {c} class weights, got shape {shape_str(w.shape)}.")
    if y.dtype is not _C.int64:
        raise RuntimeError(f"multi_margin_loss: expected int64 class indices as target, got {y.dtype.name}.")
    t = bridge.view(y).reshape(-1)
    if ((t < 0) | (t >= c)).any():
        raise RuntimeError(f"multi_margin_loss: target {int(t[(t < 0) | (t >= c)][0])} is out of range for {c} "
                           "classes.")
    rows = _C.reshape(x, (n, c))
    idx = bridge.copy(t.reshape(n, 1).astype(np.int64), False)
    picked = _C.gather(rows, 1, idx)                                      # x[y], (n, 1)
    # relu's gradient at 0 is 0, as torch's `if (z > 0)`
    z = _C.relu(_C.add(_C.sub(rows, picked), _k(float(margin), rows)))
    if p == 2:
        z = _C.mul(z, z)
    others = bridge.copy(np.arange(c)[None, :] != t[:, None], False)
    z = _C.where(others, z, _k(0.0, z))
    if w is not None:
        z = _C.mul(z, _C.reshape(_C.index_select(_C.to_dtype(w, x.dtype), 0, _C.reshape(idx, (n,))), (n, 1)))
    losses = _C.div(_C.sum(z, (1,), False), _k(float(c), z))
    if x.ndim < 2:
        losses = _C.reshape(losses, tuple(y.shape))
    return reduce_loss(losses, code)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over target classes j and non-target classes i of max(0, 1 - (x[j] - x[i])), divided by the number of
    classes; each row of target lists class indices, ended by the first -1."""
    x = tensor_arg(input, "multilabel_margin_loss")
    y = tensor_arg(target, "multilabel_margin_loss", "target")
    code = _reduction(size_average, reduce, reduction, "multilabel_margin_loss")
    if x.ndim > 2 or (x.ndim == 2 and x.shape[1] == 0) or (x.ndim == 1 and x.shape[0] == 0):
        raise RuntimeError(f"multilabel_margin_loss: expected a non-empty (C,) or (N, C) input, got shape "
                           f"{shape_str(x.shape)}.")
    n, c = (x.shape[0], x.shape[1]) if x.ndim == 2 else (1, x.shape[0] if x.ndim == 1 else 1)
    if (x.ndim == 2 and tuple(y.shape) != (n, c)) or (x.ndim < 2 and (y.ndim > 1 or y.numel() != c)):
        raise RuntimeError(f"multilabel_margin_loss: inconsistent target size {shape_str(y.shape)} for input of size "
                           f"{shape_str(x.shape)}.")
    if y.dtype is not _C.int64:
        raise RuntimeError(f"multilabel_margin_loss: expected int64 class indices as target, got {y.dtype.name}.")
    t = bridge.view(y).reshape(n, c)
    if ((t < -1) | (t >= c)).any():
        raise RuntimeError(f"multilabel_margin_loss: target values must be in [-1, {c}), got "
                           f"{int(t[(t < -1) | (t >= c)][0])}.")
    # counts[n, j]: how often class j is listed before the first -1 (a class listed twice counts twice, as torch)
    listed = np.cumprod(t >= 0, axis=1).astype(bool)
    counts = np.zeros((n, c))
    rows_idx = np.nonzero(listed)
    np.add.at(counts, (rows_idx[0], t[listed]), 1.0)
    rows = _C.reshape(x, (n, c))
    # pairs[n, j, i] = relu(1 - x[j] + x[i]) weighted by counts[j] for non-target i
    pairs = _C.relu(_C.add(_C.sub(_C.unsqueeze(rows, 1), _C.unsqueeze(rows, 2)), _k(1.0, rows)))
    factor = counts[:, :, None] * (counts == 0)[:, None, :]
    z = _C.mul(pairs, bridge.copy(factor.astype(np.dtype(x.dtype.name)), False))
    losses = _C.div(_C.sum(z, (1, 2), False), _k(float(c), z))
    if x.ndim < 2:
        losses = _C.reshape(losses, ())
    return reduce_loss(losses, code)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-y x))."""
    x = tensor_arg(input, "soft_margin_loss")
    y = tensor_arg(target, "soft_margin_loss", "target")
    code = _reduction(size_average, reduce, reduction, "soft_margin_loss")
    return reduce_loss(_C.neg(log_sigmoid(_C.mul(y, x))), code)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(y log sigmoid(x) + (1 - y) log sigmoid(-x)) (times weight), averaged over the classes (the last dim)."""
    x = tensor_arg(input, "multilabel_soft_margin_loss")
    y = tensor_arg(target, "multilabel_soft_margin_loss", "target")
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce, "multilabel_soft_margin_loss")
    losses = _C.neg(_C.add(_C.mul(y, log_sigmoid(x)),
                           _C.mul(_C.sub(_k(1.0, y), y), log_sigmoid(_C.neg(x)))))
    if weight is not None:
        losses = _C.mul(losses, tensor_arg(weight, "multilabel_soft_margin_loss", "weight"))
    class_dim = x.ndim - 1
    c = x.shape[class_dim] if x.ndim else 1
    losses = _C.div(_C.sum(losses, (class_dim,) if x.ndim else (), False), _k(float(c), losses))
    return reduce_loss(losses, reduction_code(reduction, "multilabel_soft_margin_loss"))


# ----- embeddings and ranking ------------------------------------------------------------------------------------

def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -y (x1 - x2) + margin)."""
    x1 = tensor_arg(input1, "margin_ranking_loss", "input1")
    x2 = tensor_arg(input2, "margin_ranking_loss", "input2")
    y = tensor_arg(target, "margin_ranking_loss", "target")
    code = _reduction(size_average, reduce, reduction, "margin_ranking_loss")
    if not x1.ndim == x2.ndim == y.ndim:
        raise RuntimeError(f"margin_ranking_loss: input1, input2 and target must have the same number of dims, got "
                           f"shapes {shape_str(x1.shape)}, {shape_str(x2.shape)} and {shape_str(y.shape)}.")
    z = _C.add(_C.neg(_C.mul(y, _C.sub(x1, x2))), _k(float(margin), x1))
    return reduce_loss(_C.clamp(z, 0.0, None), code)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """x where y == 1, max(0, margin - x) where y == -1 (both terms for any other target value, as torch)."""
    x = tensor_arg(input, "hinge_embedding_loss")
    y = tensor_arg(target, "hinge_embedding_loss", "target")
    code = _reduction(size_average, reduce, reduction, "hinge_embedding_loss")
    margin_term = _C.where(_C.compare("ne", y, _k(1, y)), _C.clamp(_C.sub(_k(float(margin), x), x), 0.0, None),
                           _k(0.0, x))
    self_term = _C.where(_C.compare("ne", y, _k(-1, y)), x, _k(0.0, x))
    return reduce_loss(_C.add(margin_term, self_term), code)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(x1, x2) where y == 1, max(0, cos(x1, x2) - margin) where y == -1, for rows of (N, D) inputs (or one
    (D,) pair with a 0-d target)."""
    x1 = tensor_arg(input1, "cosine_embedding_loss", "input1")
    x2 = tensor_arg(input2, "cosine_embedding_loss", "input2")
    y = tensor_arg(target, "cosine_embedding_loss", "target")
    code = _reduction(size_average, reduce, reduction, "cosine_embedding_loss")
    if y.ndim > 1:
        raise RuntimeError(f"cosine_embedding_loss: expected a 0-d or 1-d target, got shape {shape_str(y.shape)}.")
    want = 2 if y.ndim == 1 else 1
    if x1.ndim != want or x2.ndim != want:
        raise RuntimeError(f"cosine_embedding_loss: a {y.ndim}-d target expects {want}-d inputs, got shapes "
                           f"{shape_str(x1.shape)} and {shape_str(x2.shape)}.")
    d = y.ndim
    eps = 1e-12                           # torch adds it to both squared magnitudes
    dot = _C.sum(_C.mul(x1, x2), (d,), False)
    m1 = _C.add(_C.sum(_C.mul(x1, x1), (d,), False), _k(eps, x1))
    m2 = _C.add(_C.sum(_C.mul(x2, x2), (d,), False), _k(eps, x2))
    cos = _C.div(dot, _C.sqrt(_C.mul(m1, m2)))
    positive = _C.where(_C.compare("eq", y, _k(1, y)), _C.sub(_k(1.0, cos), cos), _k(0.0, cos))
    negative = _C.where(_C.compare("eq", y, _k(-1, y)), _C.clamp(_C.sub(cos, _k(float(margin), cos)), 0.0, None),
                        _k(0.0, cos))
    return reduce_loss(_C.add(positive, negative), code)


def _same_ndim(anchor, positive, negative, op):
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"{op}: the anchor, positive and negative tensors must have the same number of dims, got "
                           f"{anchor.ndim}-d, {positive.ndim}-d and {negative.ndim}-d inputs.")


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)) with the pairwise p-norm distance d (swap: d(a, n) replaced by
    d(p, n) where that is smaller)."""
    a = tensor_arg(anchor, "triplet_margin_loss", "anchor")
    pos = tensor_arg(positive, "triplet_margin_loss", "positive")
    neg = tensor_arg(negative, "triplet_margin_loss", "negative")
    code = _reduction(size_average, reduce, reduction, "triplet_margin_loss")
    margin = float(number(margin, "triplet_margin_loss", "margin"))
    if margin <= 0:
        raise ValueError(f"triplet_margin_loss: margin must be greater than 0, got {margin}.")
    _same_ndim(a, pos, neg, "triplet_margin_loss")
    d_pos = pairwise_distance(a, pos, p, eps)
    d_neg = pairwise_distance(a, neg, p, eps)
    if swap:
        d_neg = _C.minimum(d_neg, pairwise_distance(pos, neg, p, eps))
    return reduce_loss(_C.clamp(_C.sub(_C.add(d_pos, _k(margin, d_pos)), d_neg), 0.0, None), code)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """triplet_margin_loss with any distance function (default: pairwise_distance)."""
    op = "triplet_margin_with_distance_loss"
    code = reduction_code(reduction, op)
    margin = float(number(margin, op, "margin"))
    if margin <= 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}.")
    a = tensor_arg(anchor, op, "anchor")
    pos = tensor_arg(positive, op, "positive")
    neg = tensor_arg(negative, op, "negative")
    _same_ndim(a, pos, neg, op)
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos = distance(a, pos)
    d_neg = distance(a, neg)
    if swap:
        d_neg = _C.minimum(d_neg, distance(pos, neg))
    return reduce_loss(_C.clamp(_C.sub(_C.add(d_pos, _k(margin, d_pos)), d_neg), 0.0, None), code)


# ----- connectionist temporal classification ---------------------------------------------------------------------

def _lengths(lengths, op, name):
    if isinstance(lengths, Tensor):
        values = bridge.view(lengths)
        if values.dtype.kind not in "iu":
            raise RuntimeError(f"{op}: {name} must hold integers, got {lengths.dtype.name}.")
        return np.asarray(values, dtype=np.int64).reshape(-1)
    if isinstance(lengths, (list, tuple)):
        return np.asarray([to_int(v, op, name) for v in lengths], dtype=np.int64)
    return np.asarray([to_int(lengths, op, name)], dtype=np.int64)


def _logsumexp3(a, b, c):
    with np.errstate(invalid="ignore"):
        return np.logaddexp(np.logaddexp(a, b), c)


def _ctc_one(lp, target, blank):
    """-log p(target | lp) and torch's gradient with respect to lp for one sample (lp: (T, C) float64).

    In the log domain, over the target extended with blanks l' = (blank, l1, blank, l2, ..., blank):
      alpha[t, s] = lp[t, l'_s] + logsumexp(alpha[t-1, s], alpha[t-1, s-1], alpha[t-1, s-2] if l'_s is not blank
                    and l'_s != l'_{s-2});  beta likewise from the end; nll = -logsumexp(alpha[T-1, S-1 and S-2]).
    torch's gradient: grad[t, c] = exp(lp[t, c]) - exp(logsumexp_{s: l'_s = c}(alpha + beta)[t] + nll - lp[t, c])
    (the derivative through a log_softmax: it includes the exp(lp) term)."""
    big_t, c = lp.shape
    ext = np.full(2 * len(target) + 1, blank, dtype=np.int64)
    ext[1::2] = target
    s_len = len(ext)
    if big_t == 0:
        return (0.0 if len(target) == 0 else math.inf), np.zeros_like(lp)
    skip = np.zeros(s_len, dtype=bool)          # alpha may come from s - 2 into s
    skip[2:] = (ext[2:] != blank) & (ext[2:] != ext[:-2])
    emit = lp[:, ext]                           # (T, S)
    alpha = np.full((big_t, s_len), -np.inf)
    alpha[0, 0] = emit[0, 0]
    if s_len > 1:
        alpha[0, 1] = emit[0, 1]
    for t in range(1, big_t):
        prev = alpha[t - 1]
        one = np.concatenate(([-np.inf], prev[:-1]))
        two = np.where(skip, np.concatenate(([-np.inf, -np.inf], prev[:-2]))[:s_len], -np.inf)   # s_len 1: empty
        alpha[t] = _logsumexp3(prev, one, two) + emit[t]
    end = alpha[-1, -1] if s_len == 1 else np.logaddexp(alpha[-1, -1], alpha[-1, -2])
    nll = -end
    beta = np.full((big_t, s_len), -np.inf)
    beta[-1, -1] = emit[-1, -1]
    if s_len > 1:
        beta[-1, -2] = emit[-1, -2]
    skip_next = np.zeros(s_len, dtype=bool)     # beta may come from s + 2 into s
    skip_next[:-2] = skip[2:]
    for t in range(big_t - 2, -1, -1):
        nxt = beta[t + 1]
        one = np.concatenate((nxt[1:], [-np.inf]))
        two = np.where(skip_next, np.concatenate((nxt[2:], [-np.inf, -np.inf]))[:s_len], -np.inf)
        beta[t] = _logsumexp3(nxt, one, two) + emit[t]
    both = np.full((big_t, c), -np.inf)
    for s in range(s_len):
        both[:, ext[s]] = np.logaddexp(both[:, ext[s]], alpha[:, s] + beta[:, s])
    with np.errstate(invalid="ignore", over="ignore"):
        grad = np.exp(lp) - np.exp(both + nll - lp)
    return nll, grad


class CtcLoss(Function):
    """The per-sample CTC losses of (T, N, C) log-probabilities; numpy alpha-beta recursions (a composite would
    take T steps of small ops, and torch's gradient is the posterior formula, not a composite's derivative)."""

    @staticmethod
    def forward(ctx, log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
        lp = np.asarray(bridge.view(log_probs), dtype=np.float64)
        big_t, n, _ = lp.shape
        losses = np.zeros(n)
        grad = np.zeros_like(lp)
        for b in range(n):
            tb = int(input_lengths[b])
            nll, g = _ctc_one(lp[:tb, b], targets[b], blank)
            if zero_infinity and nll == math.inf:
                nll, g = 0.0, np.zeros_like(g)
            losses[b] = nll
            grad[:tb, b] = g
        dtype = np.dtype(log_probs.dtype.name)
        ctx.grad = bridge.copy(grad.astype(dtype), False)
        ctx.save_for_backward(log_probs)
        return bridge.copy(losses.astype(dtype), False)

    @staticmethod
    def backward(ctx, grad):
        (log_probs,) = ctx.saved_tensors
        return (_CtcGradient.apply(_C.reshape(grad, (1, -1, 1)), log_probs, ctx.grad), None, None, None, None, None)

    @staticmethod
    def jvp(ctx, *tangents):
        raise NotImplementedError("ctc_loss: forward-mode AD (a dual tensor as input) is not implemented (as in "
                                  "torch).")


class _CtcGradient(Function):
    """grad_out * the saved CTC gradient (log_probs is an input only so that a create_graph gradient depends on
    it); its own derivative is not implemented, as in torch."""

    @staticmethod
    def forward(ctx, grad, log_probs, ctc_grad):
        ctx.log_probs, ctx.ctc_grad = (log_probs, ctc_grad) if _C._current_dual_level() >= 0 else (None, None)
        return _C.mul(grad, ctc_grad)

    # linear in grad; the saved gradient's own derivative in log_probs is not implemented (as in torch)
    @staticmethod
    def jvp(ctx, t_grad, t_log_probs, t_ctc_grad):
        if _jvp_input_has_tangent(ctx, ctx.log_probs):
            raise NotImplementedError("ctc_loss: the forward derivative of ctc_loss's gradient in log_probs is not "
                                      "implemented (as in torch).")
        return _C.mul(t_grad, ctx.ctc_grad)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("ctc_loss: the derivative of ctc_loss's gradient is not implemented (double backward "
                           "through ctc_loss is not supported, as in torch).")


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist temporal classification loss of (T, N, C) log-probabilities (or (T, C) unbatched) against
    targets padded to (N, S) or concatenated (sum(target_lengths),); reduction='mean' divides each loss by its
    target length before averaging over the batch."""
    op = "ctc_loss"
    lp = tensor_arg(log_probs, op, "log_probs")
    tg = tensor_arg(targets, op, "targets")
    code = reduction_code(reduction, op)
    blank = to_int(blank, op, "blank")
    in_lens = _lengths(input_lengths, op, "input_lengths")
    tg_lens = _lengths(target_lengths, op, "target_lengths")
    unbatched = lp.ndim == 2
    if unbatched:
        lp = _C.unsqueeze(lp, 1)
        if tg.ndim == 1 and tg_lens.size == 1:
            tg = _C.unsqueeze(tg, 0)
    if lp.ndim != 3:
        raise RuntimeError(f"{op}: expected log_probs of shape (T, N, C) or (T, C), got {shape_str(log_probs.shape)}.")
    if not lp.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected floating-point log_probs, got {lp.dtype.name}.")
    big_t, n, c = lp.shape
    if not 0 <= blank < c:
        raise RuntimeError(f"{op}: blank must be in the label range [0, {c}), got {blank}.")
    if in_lens.size != n:
        raise RuntimeError(f"{op}: input_lengths must hold one length per batch element ({n}), got {in_lens.size}.")
    if tg_lens.size != n:
        raise RuntimeError(f"{op}: target_lengths must hold one length per batch element ({n}), got {tg_lens.size}.")
    if (in_lens < 0).any() or (in_lens > big_t).any():
        bad = int(in_lens[(in_lens < 0) | (in_lens > big_t)][0])
        raise RuntimeError(f"{op}: input_lengths must be in [0, {big_t}] (the length of log_probs), got {bad}.")
    if (tg_lens < 0).any():
        raise RuntimeError(f"{op}: target_lengths must be non-negative, got {int(tg_lens[tg_lens < 0][0])}.")
    values = np.asarray(bridge.view(tg)).astype(np.int64)
    if tg.ndim == 2:
        if tg.shape[0] != n:
            raise RuntimeError(f"{op}: padded targets must have {n} rows, got shape {shape_str(tg.shape)}.")
        if (tg_lens > tg.shape[1]).any():
            raise RuntimeError(f"{op}: target length {int(tg_lens.max())} exceeds the padded targets' size "
                               f"{tg.shape[1]} (dim 1).")
        rows = [values[b, :tg_lens[b]] for b in range(n)]
    elif tg.ndim == 1:
        if tg_lens.sum() > tg.shape[0]:
            raise RuntimeError(f"{op}: the target lengths sum to {int(tg_lens.sum())}, but the concatenated targets "
                               f"hold {tg.shape[0]}.")
        ends = np.cumsum(tg_lens)
        rows = [values[end - length:end] for end, length in zip(ends, tg_lens)]
    else:
        raise RuntimeError(f"{op}: expected targets of shape (N, S) or (sum(target_lengths),), got "
                           f"{shape_str(tg.shape)}.")
    for row in rows:
        if ((row < 0) | (row >= c)).any():
            raise RuntimeError(f"{op}: target {int(row[(row < 0) | (row >= c)][0])} is out of the label range "
                               f"[0, {c}).")
    losses = CtcLoss.apply(lp, rows, in_lens, tg_lens, blank, bool(zero_infinity))
    if code == 1:
        divisor = bridge.copy(np.maximum(tg_lens, 1).astype(np.dtype(losses.dtype.name)), False)
        return _C.mean(_C.div(losses, divisor), (), False)
    if code == 2:
        return _C.sum(losses, (), False)
    return _C.reshape(losses, ()) if unbatched else losses


# ----- torch.NAME forms: ATen's signatures, with the reduction as an int -----------------------------------------

@torch_name("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits_fn(input, target, weight=None, pos_weight=None, reduction=1):
    name = _aten_reduction(reduction, "binary_cross_entropy_with_logits")
    return binary_cross_entropy_with_logits(input, target, weight, reduction=name, pos_weight=pos_weight)


@torch_name("kl_div")
def kl_div_fn(input, target, reduction=1, *, log_target=False):
    name = _aten_reduction(reduction, "kl_div")
    with warnings.catch_warnings():       # torch.kl_div does not warn about 'mean'
        warnings.simplefilter("ignore", UserWarning)
        return kl_div(input, target, reduction=name, log_target=log_target)


@torch_name("margin_ranking_loss")
def margin_ranking_loss_fn(input1, input2, target, margin=0.0, reduction=1):
    return margin_ranking_loss(input1, input2, target, margin, reduction=_aten_reduction(reduction,
                                                                                         "margin_ranking_loss"))


@torch_name("hinge_embedding_loss")
def hinge_embedding_loss_fn(input, target, margin=1.0, reduction=1):
    return hinge_embedding_loss(input, target, margin, reduction=_aten_reduction(reduction, "hinge_embedding_loss"))


@torch_name("cosine_embedding_loss")
def cosine_embedding_loss_fn(input1, input2, target, margin=0.0, reduction=1):
    return cosine_embedding_loss(input1, input2, target, margin,
                                 reduction=_aten_reduction(reduction, "cosine_embedding_loss"))


@torch_name("triplet_margin_loss")
def triplet_margin_loss_fn(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, reduction=1):
    return triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                               reduction=_aten_reduction(reduction, "triplet_margin_loss"))


@torch_name("poisson_nll_loss")
def poisson_nll_loss_fn(input, target, log_input, full, eps, reduction):
    return poisson_nll_loss(input, target, log_input, full, eps=eps,
                            reduction=_aten_reduction(reduction, "poisson_nll_loss"))


@torch_name("ctc_loss")
def ctc_loss_fn(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1, zero_infinity=False):
    return ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _aten_reduction(reduction, "ctc_loss"),
                    zero_infinity)
