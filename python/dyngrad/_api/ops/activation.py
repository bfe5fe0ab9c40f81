"""Activations and softmax with torch.nn.functional's signatures, composites of the core's primitives.

Piecewise activations are written with `where` so that the gradient at each kink is torch's: the branch that
torch's backward formula takes at the boundary is the branch `where` selects there (hardtanh's gradient is 0 at
its bounds, softshrink's is 0 at +-lambd, elu's is alpha at 0, ...). Branches that could overflow are fed clamped
inputs, so that the branch `where` drops never turns a zero gradient into 0 * inf = nan.

`inplace=True` is torch's in-place op: the result is written into input (refused on a leaf that requires grad),
input is returned, and the node of the write is recorded on input's history.
"""
import math

from ... import _C
from ..._user_frame import warn
from ..args import number, optional_dtype, refuse_complex, shape_str, tensor_arg, to_int, torch_name, wrap_dim
from ..generator import drawing
from ..node_names import shows_as
def _k(value, like):
    """A Python number next to tensor `like` (it keeps like's dtype)."""
    return _C.scalar_operand(value, like)


def _activation(input, inplace, op, compute):
    """compute(input), or with inplace=True the same written into input (torch's `op_`)."""
    a = tensor_arg(input, op)
    if not inplace:
        return compute(a)
    before = _C.inplace_input(a, op + "_", False)
    _C.assign_inplace(a, compute(before), op + "_")
    return a


# ----- rectifiers ------------------------------------------------------------------------------------------------

def relu(input, inplace=False):
    if not inplace:                       # the common call, without the closure
        return _C.relu(tensor_arg(input, "relu"))
    return _activation(input, inplace, "relu", _C.relu)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    slope = float(number(negative_slope, "leaky_relu", "negative_slope"))
    return _activation(input, inplace, "leaky_relu", lambda a: _C.leaky_relu(a, slope))


def _hardtanh(a, lo, hi):
    # the gradient is 1 strictly inside (lo, hi) and 0 from the bounds on, as torch's hardtanh_backward; a NaN
    # (outside neither bound) passes its gradient, as torch's
    outside = _C.logical_or(_C.compare("le", a, _k(lo, a)), _C.compare("ge", a, _k(hi, a)))
    inside = _C.logical_not(outside)
    return _C.where(inside, a, _C.clamp(a.detach(), lo, hi))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    lo, hi = float(number(min_val, "hardtanh", "min_val")), float(number(max_val, "hardtanh", "max_val"))
    if lo > hi:
        raise ValueError(f"hardtanh: min_val cannot be greater than max_val, got min_val={lo} and max_val={hi}.")
    return _activation(input, inplace, "hardtanh", lambda a: _hardtanh(a, lo, hi))


@shows_as("Hardtanh")
def relu6(input, inplace=False):
    """min(max(x, 0), 6), torch's hardtanh(x, 0, 6) (gradient 0 at 0 and 6)."""
    return _activation(input, inplace, "relu6", lambda a: _hardtanh(a, 0.0, 6.0))


def _elu(a, alpha, scale, input_scale):
    # scale * x for x > 0, else scale * alpha * (exp(input_scale * x) - 1); exp sees min(x, 0) so that large
    # positive x cannot overflow in the branch where() drops. At x = 0 torch's first derivative is the negative
    # branch's (scale alpha input_scale) but its second derivative is 0 (elu_backward's own derivative masks x < 0
    # strictly): exp's argument is constant from 0 up, and a term that is 0 below 0 and x from 0 up carries the
    # first derivative there
    negative_x = _C.compare("lt", a, _k(0.0, a))
    clamped = _C.clamp(a, None, 0.0)
    neg = _C.where(negative_x, clamped, clamped.detach())
    ex = _C.exp(_C.mul(neg, _k(input_scale, neg)) if input_scale != 1.0 else neg)
    negative = _C.mul(_C.sub(ex, _k(1.0, ex)), _k(scale * alpha, ex))
    from_zero = _C.where(negative_x, _k(0.0, a), a)
    negative = _C.add(negative, _C.mul(from_zero, _k(scale * alpha * input_scale, a)))
    positive = _C.mul(a, _k(scale, a)) if scale != 1.0 else a
    # (x <= 0 picks the negative branch, so a NaN takes the positive branch's gradient, as torch's elu_backward)
    return _C.where(_C.compare("le", a, _k(0.0, a)), negative, positive)


def elu(input, alpha=1.0, inplace=False):
    alpha = float(number(alpha, "elu", "alpha"))
    return _activation(input, inplace, "elu", lambda a: _elu(a, alpha, 1.0, 1.0))


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """SELU_SCALE * elu(x, SELU_ALPHA)."""
    return _activation(input, inplace, "selu", lambda a: _elu(a, SELU_ALPHA, SELU_SCALE, 1.0))


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    alpha = float(number(alpha, "celu", "alpha"))
    if alpha == 0:
        raise RuntimeError("celu: alpha must not be 0 (the input is divided by it).")
    return _activation(input, inplace, "celu", lambda a: _elu(a, alpha, 1.0, 1.0 / alpha))


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: in training each x <= 0 is multiplied by its own slope drawn from U(lower, upper);
    in eval the slope is (lower + upper) / 2."""
    lo, hi = float(number(lower, "rrelu", "lower")), float(number(upper, "rrelu", "upper"))
    if lo > hi:
        raise RuntimeError(f"rrelu: lower bound must be less than or equal to the upper bound, got lower={lo} and "
                           f"upper={hi}.")
    if not training:
        return _activation(input, inplace, "rrelu", lambda a: _C.leaky_relu(a, (lo + hi) / 2))

    def sample(a):
        u = _C.rand(tuple(a.shape), a.dtype if a.dtype.is_floating_point else _C.float32)
        slopes = _C.add(_C.mul(u, _k(hi - lo, u)), _k(lo, u))
        return _C.where(_C.compare("gt", a, _k(0.0, a)), a, _C.mul(a, slopes))
    return _activation(input, inplace, "rrelu", sample)


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), with one weight or one per channel (dim 1)."""
    a = tensor_arg(input, "prelu")
    w = tensor_arg(weight, "prelu", "weight")
    if w.ndim > 1:
        raise RuntimeError(f"prelu: expected weight to be a number or a 1-D tensor, got shape {shape_str(w.shape)}.")
    channels = a.shape[1] if a.ndim >= 2 else 1
    if w.numel() != 1 and w.numel() != channels:
        raise RuntimeError(f"prelu: weight has {w.numel()} elements but the input has {channels} channels (dim 1 of "
                           f"shape {shape_str(a.shape)}); expected 1 or {channels}.")
    if w.numel() == 1:
        w = _C.reshape(w, ())
    elif a.ndim > 2:
        w = _C.reshape(w, (channels,) + (1,) * (a.ndim - 2))
    return _C.where(_C.compare("gt", a, _k(0.0, a)), a, _C.mul(w, a))


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value."""
    return _threshold(input, threshold, value, inplace)


def _threshold(input, th, value, inplace=False):
    th = float(number(th, "threshold", "threshold"))
    v = number(value, "threshold", "value")
    return _activation(input, inplace, "threshold",
                       lambda a: _C.where(_C.compare("gt", a, _k(th, a)), a, _k(v, a)))


# ----- smooth activations ----------------------------------------------------------------------------------------

@shows_as("Gelu")
def gelu(input, approximate="none"):
    """x * Phi(x); approximate='tanh' uses 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    a = tensor_arg(input, "gelu")
    if approximate == "none":
        return _C.gelu(a)
    if approximate != "tanh":
        raise RuntimeError(f"gelu: approximate must be 'none' or 'tanh', got '{approximate}'.")
    cube = _C.mul(_C.pow_scalar(a, 3.0), _k(0.044715, a))
    inner = _C.mul(_C.add(a, cube), _k(math.sqrt(2.0 / math.pi), a))
    half = _C.mul(a, _k(0.5, a))
    return _C.mul(half, _C.add(_C.tanh(inner), _k(1.0, a)))


def softplus(input, beta=1.0, threshold=20.0):
    return _C.softplus(tensor_arg(input, "softplus"), float(beta), float(threshold))


@shows_as("Silu")
def silu(input, inplace=False):
    """x * sigmoid(x)."""
    return _activation(input, inplace, "silu", lambda a: _C.mul(a, _C.sigmoid(a)))


def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    return _activation(input, inplace, "mish", lambda a: _C.mul(a, _C.tanh(_C.softplus(a, 1.0, 20.0))))


def log_sigmoid(a):
    """log(sigmoid(x)) = -log(1 + exp(-x)), by the core's overflow-free softplus (no linear cut-off)."""
    return _C.neg(_C.softplus(_C.neg(a), 1.0, math.inf))


def logsigmoid(input):
    return log_sigmoid(tensor_arg(input, "logsigmoid"))


def hardsigmoid(input, inplace=False):
    """min(max(x + 3, 0), 6) / 6; the gradient is 1/6 strictly inside (-3, 3), else 0."""
    def compute(a):
        y = _C.div(_C.add(a, _k(3.0, a)), _k(6.0, a))
        inside = _C.logical_and(_C.compare("gt", a, _k(-3.0, a)), _C.compare("lt", a, _k(3.0, a)))
        return _C.where(inside, y, _C.clamp(y.detach(), 0.0, 1.0))
    return _activation(input, inplace, "hardsigmoid", compute)


def hardswish(input, inplace=False):
    """x * min(max(x + 3, 0), 6) / 6: 0 up to -3, x from 3 on, the quadratic between (torch's gradient: 0 at -3,
    1 at 3)."""
    def compute(a):
        # the quadratic sees only (-3, 3) (elsewhere 0), so that +-inf cannot make NaN gradients in the branch
        # where() drops; a NaN takes the upper branch's gradient 1, as torch's hardswish_backward
        within = _C.logical_and(_C.compare("gt", a, _k(-3.0, a)), _C.compare("lt", a, _k(3.0, a)))
        am = _C.where(within, a, _k(0.0, a))
        middle = _C.div(_C.mul(am, _C.add(am, _k(3.0, am))), _k(6.0, am))
        upper = _C.where(_C.compare("lt", a, _k(3.0, a)), middle, a)
        # 0 up to -3 as a * 0, so that -inf gives NaN as torch's x * relu6(x + 3) / 6
        return _C.where(_C.compare("le", a, _k(-3.0, a)), _C.mul(a, _k(0.0, a)), upper)
    return _activation(input, inplace, "hardswish", compute)


def softsign(input):
    """x / (1 + |x|)."""
    a = tensor_arg(input, "softsign")
    return _C.div(a, _C.add(_C.abs(a), _k(1.0, a)))


def tanhshrink(input):
    """x - tanh(x)."""
    a = tensor_arg(input, "tanhshrink")
    return _C.sub(a, _C.tanh(a))


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, else 0 (gradient 0 on [-lambd, lambd])."""
    a = tensor_arg(input, "softshrink")
    lam = float(number(lambd, "softshrink", "lambd"))
    if lam < 0:
        raise RuntimeError(f"softshrink: lambd must be non-negative, got {lam}.")
    # 0 inside [-lambd, lambd]; a NaN is outside, where it stays NaN with gradient 1 (torch's softshrink_backward)
    inside = _C.logical_and(_C.compare("ge", a, _k(-lam, a)), _C.compare("le", a, _k(lam, a)))
    shrunk = _C.where(_C.compare("gt", a, _k(lam, a)), _C.sub(a, _k(lam, a)), _C.add(a, _k(lam, a)))
    return _C.where(inside, _k(0.0, a), shrunk)


def hardshrink(input, lambd=0.5):
    """x outside [-lambd, lambd], else 0."""
    a = tensor_arg(input, "hardshrink")
    lam = float(number(lambd, "hardshrink", "lambd"))
    inside = _C.logical_and(_C.compare("ge", a, _k(-lam, a)), _C.compare("le", a, _k(lam, a)))
    return _C.where(inside, _k(0.0, a), a)


def glu(input, dim=-1):
    """a * sigmoid(b), where a and b are the two halves of input along dim."""
    x = tensor_arg(input, "glu")
    refuse_complex("glu", x)
    if x.ndim == 0:
        raise RuntimeError("glu: a 0-d tensor cannot be halved; expected at least one dimension.")
    d = wrap_dim(to_int(dim, "glu", "dim"), x.ndim, "glu")
    n = x.shape[d]
    if n % 2:
        raise RuntimeError(f"glu: the halved dimension must have an even size, but dimension {d} has size {n}.")
    first, second = _C.chunk(x, 2, d)
    return _C.mul(first, _C.sigmoid(second))


# ----- softmax ---------------------------------------------------------------------------------------------------

def _softmax_dim(dim, a, op, stacklevel):
    if dim is None:                      # torch's legacy implicit dim
        warn(f"{op}: implicit dimension choice is deprecated; pass dim=X.", UserWarning)
        return 0 if a.ndim in (0, 1, 3) else 1
    return to_int(dim, op, "dim")


def _as_dtype(a, dtype, op):
    """softmax's input in `dtype` if given; else it must be floating point: torch has no integer or bool kernel
    (NotImplementedError), dtype=float32 being the way to take one."""
    dt = optional_dtype(dtype, op)
    if dt is None and not a.dtype.is_floating_point:
        raise NotImplementedError(f"{op}: {a.dtype.name} input is not supported (as in torch); pass "
                                  "dtype=dyngrad.float32 or convert it with .float().")
    return _C.to_dtype(a, dt) if dt is not None and dt is not a.dtype else a


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    a = tensor_arg(input, "softmax")
    d = _softmax_dim(dim, a, "softmax", _stacklevel)
    return _C.softmax(_as_dtype(a, dtype, "softmax"), d)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    a = tensor_arg(input, "log_softmax")
    d = _softmax_dim(dim, a, "log_softmax", _stacklevel)
    return _C.log_softmax(_as_dtype(a, dtype, "log_softmax"), d)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-input)."""
    a = tensor_arg(input, "softmin")
    d = _softmax_dim(dim, a, "softmin", _stacklevel)
    return _C.softmax(_as_dtype(_C.neg(a), dtype, "softmin"), d)


@torch_name("softmax")
def softmax_fn(input, dim, dtype=None):
    """torch.softmax / Tensor.softmax: dim is required."""
    a = tensor_arg(input, "softmax")
    return _C.softmax(_as_dtype(a, dtype, "softmax"), to_int(dim, "softmax", "dim"))


@torch_name("log_softmax")
def log_softmax_fn(input, dim, dtype=None):
    """torch.log_softmax / Tensor.log_softmax: dim is required."""
    a = tensor_arg(input, "log_softmax")
    return _C.log_softmax(_as_dtype(a, dtype, "log_softmax"), to_int(dim, "log_softmax", "dim"))


# ----- in-place forms (F.NAME_, torch.NAME_) ---------------------------------------------------------------------

def relu_(input):
    return relu(input, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


def selu_(input):
    return selu(input, inplace=True)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def threshold_(input, threshold, value):
    return _threshold(input, threshold, value, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


# torch.NAME forms whose signatures differ from nn.functional's (no inplace=; rrelu takes a generator)

@torch_name("selu")
def selu_fn(input):
    return selu(input)


@torch_name("celu")
def celu_fn(input, alpha=1.0):
    return celu(input, alpha)


@torch_name("threshold")
def threshold_fn(input, threshold, value):
    return _threshold(input, threshold, value)


@torch_name("rrelu")
def rrelu_fn(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    with drawing(generator, "rrelu"):
        return rrelu(input, lower, upper, training)


@torch_name("rrelu_")
def rrelu_fn_inplace(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    with drawing(generator, "rrelu_"):
        return rrelu(input, lower, upper, training, inplace=True)
