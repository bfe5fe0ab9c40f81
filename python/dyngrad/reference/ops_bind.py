"""Reference engine: every op as a function of dyngrad.reference with torch's names and keywords, composed from
the ops of ops_math.py, ops_shape.py and ops_nn.py. Mirrors csrc/bindings/ops_bind.cpp, function for function:
argument conversion (Python numbers become 0-d tensors), dispatch (pow vs pow_scalar, max(dim) vs max(other)) and
the composites that live in the binding (losses, linear, embedding, dropout, one_hot, layer_norm).

The functions the C++ engine also binds as Tensor methods are attached to Tensor in tensor_bind.py.
"""
import collections
import functools
import inspect

import numpy as np

from . import dtypes as _dt
from . import ops_math as _m
from . import ops_nn as _nn
from . import ops_shape as _s
from .errors import shape_str
from .tensor import Tensor, make_tensor, wrap_dim, scalar_tensor


# ===== argument conversion (csrc/bindings/module.cpp) ==========================================================

def as_operand(o, like):
    """A Python number, array or tensor as a tensor operand of an op whose other operand is `like` (or None).
    None when `o` is not something an op can take (operators then return NotImplemented)."""
    if isinstance(o, Tensor):
        return o
    if isinstance(o, bool):
        return scalar_tensor(o, like.dtype if like is not None and like.dtype is not _dt.bool_ else _dt.bool_)
    if isinstance(o, int):
        if not -2 ** 63 <= o < 2 ** 63:
            raise RuntimeError("an integer operand does not fit in int64.")
        return _m.scalar_like(like, o, True) if like is not None else scalar_tensor(o, _dt.int64)
    if isinstance(o, float):
        return _m.scalar_like(like, o, False) if like is not None else scalar_tensor(o, _dt.float32)
    if isinstance(o, (np.ndarray, np.generic, list)):
        from .ops_creation import tensor
        r = tensor(o)
        if like is not None and r.ndim == 0 and isinstance(o, np.generic):    # a numpy scalar acts like a number
            return _m.scalar_like(like, o.item(), not r.dtype.is_floating_point)
        return r
    return None


def as_operand_or_throw(o, like, op):
    t = as_operand(o, like)
    if t is None:
        raise TypeError(f"{op}: expected a Tensor or a number, got {type(o).__name__}.")
    return t


def _tensor_arg(o, op, name="input"):
    if not isinstance(o, Tensor):
        raise TypeError(f"{op}: expected a Tensor as {name}, got {type(o).__name__}.")
    return o


def takes_tensors(*names):
    """As pybind11 does for `const Tensor&` parameters: a TypeError naming the op when one of `names` is not a
    Tensor (None is accepted only where the parameter's default is None)."""
    def wrap(fn):
        params = list(inspect.signature(fn).parameters.values())
        checks = [(p.name, i, p.default is None) for i, p in enumerate(params) if p.name in names]

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            for name, i, optional in checks:
                v = args[i] if i < len(args) else kwargs.get(name)
                if not isinstance(v, Tensor) and not (v is None and optional):
                    raise TypeError(f"{fn.__name__}: expected a Tensor as {name}, got {type(v).__name__}.")
            return fn(*args, **kwargs)
        return checked
    return wrap


def _operands(a, b, op):
    """The first operand may be a number when the second is a tensor: dg.add(2, t)."""
    if isinstance(a, Tensor):
        return a, as_operand_or_throw(b, a, op)
    if isinstance(b, Tensor):
        return as_operand_or_throw(a, b, op), b
    ta = as_operand_or_throw(a, None, op)
    return ta, as_operand_or_throw(b, ta, op)


def _int(o, op):
    if isinstance(o, bool) or not isinstance(o, (int, np.integer)) and not (
            hasattr(o, "__index__") and not isinstance(o, float)):
        raise TypeError(f"{op}: expected an int, got {type(o).__name__}.")
    return int(o.__index__() if isinstance(o, Tensor) else o)


def parse_shape(o, op):
    """(3, 4), [3, 4] or a single int."""
    if isinstance(o, (int, np.integer)) and not isinstance(o, bool):
        return (int(o),)
    if isinstance(o, (tuple, list)):
        return tuple(_int(s, op) for s in o)
    raise TypeError(f"{op}: expected a shape (a tuple of ints), got {type(o).__name__}.")


def parse_shape_args(args, op):
    """Varargs 3, 4 or one sequence (3, 4)."""
    if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
        return parse_shape(args[0], op)
    return tuple(_int(s, op) for s in args)


def parse_dims(o, op):
    """None -> all dims (); an int or a sequence of ints."""
    if o is None:
        return ()
    if isinstance(o, (tuple, list)):
        if not o:
            raise RuntimeError(f"{op}: dim must not be an empty tuple.")
        return parse_shape(o, op)
    return (_int(o, op),)


def _with_alpha(b, alpha):
    if alpha is None or (type(alpha) is int and alpha == 1):
        return b
    return _m.mul(b, as_operand_or_throw(alpha, b, "alpha"))


def _opt_float(o):
    return None if o is None else float(o)


def _reduction_code(r, op):
    codes = {"none": 0, "mean": 1, "sum": 2}
    if r not in codes:
        raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got '{r}'.")
    return codes[r]


def _reduce_loss(losses, code):
    if code == 0:
        return losses
    if code == 1:
        return _m.mean(losses, (), False)
    return _m.sum(losses, (), False)


def _pair_arg(o, op, what):
    if isinstance(o, (int, np.integer)) and not isinstance(o, bool):
        return int(o), int(o)
    s = parse_shape(o, op)
    if len(s) != 2:
        raise ValueError(f"{op}: {what} must be an int or a pair of ints, got {shape_str(s)}.")
    return s


return_max = collections.namedtuple("max", ["values", "indices"])
return_min = collections.namedtuple("min", ["values", "indices"])


def _extremum_dispatch(a, dim, keepdim, is_max):
    """max/min: (input) -> value; (input, dim, keepdim) -> (values, indices); (input, other tensor) -> elementwise."""
    if dim is None:
        return _m.amax(a, (), False) if is_max else _m.amin(a, (), False)
    if isinstance(dim, Tensor):
        return _m.maximum(a, dim) if is_max else _m.minimum(a, dim)
    d = wrap_dim(_int(dim, "max" if is_max else "min"), a.ndim, "max" if is_max else "min")
    # values are gathered at the returned indices, so with ties the gradient goes to that one element (as torch)
    indices = _m.argmax(a, d, True) if is_max else _m.argmin(a, d, True)
    values = _s.gather(a, d, indices)
    if not keepdim and a.ndim > 0:
        values, indices = _s.squeeze(values, (d,)), _s.squeeze(indices, (d,))
    return (return_max if is_max else return_min)(values, indices)


def _correction_of(unbiased, correction):
    if correction is not None:
        return float(correction)
    if unbiased is not None:
        return 1.0 if unbiased else 0.0
    return 1.0


# ===== arithmetic ==============================================================================================

def add(input, other, *, alpha=None):
    x, y = _operands(input, other, "add")
    return _m.add(x, _with_alpha(y, alpha))


def sub(input, other, *, alpha=None):
    x, y = _operands(input, other, "sub")
    return _m.sub(x, _with_alpha(y, alpha))


def mul(input, other):
    return _m.mul(*_operands(input, other, "mul"))


def div(input, other, *, rounding_mode=None):
    if rounding_mode is not None:
        raise NotImplementedError("div: rounding_mode is not supported yet; use true division.")
    return _m.div(*_operands(input, other, "div"))


def true_divide(input, other):
    return _m.div(*_operands(input, other, "div"))


def pow(input, exponent):
    if isinstance(input, Tensor) and isinstance(exponent, (float, int)) and not isinstance(exponent, bool):
        return _m.pow_scalar(input, float(exponent))
    return _m.pow(*_operands(input, exponent, "pow"))


@takes_tensors("input")
def maximum(input, other):
    return _m.maximum(input, as_operand_or_throw(other, input, "maximum"))


@takes_tensors("input")
def minimum(input, other):
    return _m.minimum(input, as_operand_or_throw(other, input, "minimum"))


def where(condition, input, other):
    x, y = _operands(input, other, "where")
    return _m.where(_tensor_arg(condition, "where", "condition"), x, y)


def clamp(input, min=None, max=None):
    a = _tensor_arg(input, "clamp")
    if isinstance(min, Tensor) or isinstance(max, Tensor):    # tensor bounds: compose from maximum/minimum
        r = a
        if min is not None:
            r = _m.maximum(r, as_operand_or_throw(min, a, "clamp"))
        if max is not None:
            r = _m.minimum(r, as_operand_or_throw(max, a, "clamp"))
        return r
    # an integer tensor clamped to float bounds is float32, as torch promotes it
    float_bound = isinstance(min, float) or isinstance(max, float)
    if float_bound and not a.dtype.is_floating_point:
        a = _s.to_dtype(a, _dt.float32)
    return _m.clamp(a, _opt_float(min), _opt_float(max))


clip = clamp


def neg(input):
    return _m.neg(_tensor_arg(input, "neg"))


negative = neg


# ===== unary ===================================================================================================

def _unary(op):
    kernel = getattr(_m, op)

    def fn(input):
        return kernel(_tensor_arg(input, op))
    fn.__name__ = fn.__qualname__ = op
    return fn


exp, log, sqrt, rsqrt, abs, sin, cos = (_unary(n) for n in ("exp", "log", "sqrt", "rsqrt", "abs", "sin", "cos"))
tanh, sigmoid, relu, sign, erf = (_unary(n) for n in ("tanh", "sigmoid", "relu", "sign", "erf"))
logical_not, isnan, isfinite = (_unary(n) for n in ("logical_not", "isnan", "isfinite"))


@takes_tensors("input")
def square(input):
    return _m.mul(input, input)


def leaky_relu(input, negative_slope=0.01):
    return _m.leaky_relu(_tensor_arg(input, "leaky_relu"), float(negative_slope))


def gelu(input, approximate="none"):
    a = _tensor_arg(input, "gelu")
    if approximate == "tanh":       # 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))), composed (torch has it)
        inner = _m.mul(_m.add(a, _m.mul(_m.pow_scalar(a, 3.0), _m.scalar_like(a, 0.044715, False))),
                       _m.scalar_like(a, (2.0 / np.pi) ** 0.5, False))
        return _m.mul(_m.mul(a, _m.scalar_like(a, 0.5, False)), _m.add(_m.tanh(inner), _m.scalar_like(a, 1.0, False)))
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got '{approximate}'.")
    return _m.gelu(a)


def softplus(input, beta=1.0, threshold=20.0):
    return _m.softplus(_tensor_arg(input, "softplus"), float(beta), float(threshold))


# ===== comparisons and logic ===================================================================================

def _comparison(op):
    def fn(input, other):
        return _m.compare(op, *_operands(input, other, op))
    fn.__name__ = fn.__qualname__ = op
    return fn


eq, ne, lt, le, gt, ge = (_comparison(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))


@takes_tensors("input")
def logical_and(input, other):
    return _m.logical_and(input, as_operand_or_throw(other, input, "logical_and"))


@takes_tensors("input")
def logical_or(input, other):
    return _m.logical_or(input, as_operand_or_throw(other, input, "logical_or"))


@takes_tensors("input")
def logical_xor(input, other):
    return _m.logical_xor(input, as_operand_or_throw(other, input, "logical_xor"))


# ===== reductions ==============================================================================================

def sum(input, dim=None, keepdim=False, *, dtype=None):
    a = _tensor_arg(input, "sum")
    return _m.sum(a, parse_dims(dim, "sum"), keepdim, _dt.to_dtype(dtype, "sum") if dtype is not None else None)


def mean(input, dim=None, keepdim=False):
    return _m.mean(_tensor_arg(input, "mean"), parse_dims(dim, "mean"), keepdim)


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    a = _tensor_arg(input, "var")
    return _m.var(a, parse_dims(dim, "var"), _correction_of(unbiased, correction), keepdim)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    a = _tensor_arg(input, "std")
    return _m.std(a, parse_dims(dim, "std"), _correction_of(unbiased, correction), keepdim)


def max(input, dim=None, keepdim=False):
    return _extremum_dispatch(_tensor_arg(input, "max"), dim, keepdim, True)


def min(input, dim=None, keepdim=False):
    return _extremum_dispatch(_tensor_arg(input, "min"), dim, keepdim, False)


def amax(input, dim=None, keepdim=False):
    return _m.amax(_tensor_arg(input, "amax"), parse_dims(dim, "amax"), keepdim)


def amin(input, dim=None, keepdim=False):
    return _m.amin(_tensor_arg(input, "amin"), parse_dims(dim, "amin"), keepdim)


def argmax(input, dim=None, keepdim=False):
    return _m.argmax(_tensor_arg(input, "argmax"), None if dim is None else _int(dim, "argmax"), keepdim)


def argmin(input, dim=None, keepdim=False):
    return _m.argmin(_tensor_arg(input, "argmin"), None if dim is None else _int(dim, "argmin"), keepdim)


def logsumexp(input, dim=None, keepdim=False):
    return _m.logsumexp(_tensor_arg(input, "logsumexp"), parse_dims(dim, "logsumexp"), keepdim)


# ===== linear algebra ==========================================================================================

def matmul(input, other):
    return _m.matmul(_tensor_arg(input, "matmul", "first argument"), _tensor_arg(other, "matmul", "second argument"))


@takes_tensors("input", "mat2")
def mm(input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got {shape_str(input.shape)} and {shape_str(mat2.shape)}.")
    return _m.matmul(input, mat2)


@takes_tensors("input", "mat2")
def bmm(input, mat2):
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: expected 3-D tensors with the same batch size, got {shape_str(input.shape)} and "
                           f"{shape_str(mat2.shape)}.")
    return _m.matmul(input, mat2)


# ===== shape ===================================================================================================

def reshape(input, shape):
    return _s.reshape(_tensor_arg(input, "reshape"), parse_shape(shape, "reshape"))


def flatten(input, start_dim=0, end_dim=-1):
    return _s.flatten(_tensor_arg(input, "flatten"), _int(start_dim, "flatten"), _int(end_dim, "flatten"))


def transpose(input, dim0, dim1):
    return _s.transpose(_tensor_arg(input, "transpose"), _int(dim0, "transpose"), _int(dim1, "transpose"))


swapaxes = transpose


@takes_tensors("input")
def t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t: expects a tensor with <= 2 dimensions, got shape {shape_str(input.shape)}; use "
                           "transpose or mT.")
    return input if input.ndim < 2 else _s.transpose(input, 0, 1)


def permute(input, dims):
    return _s.permute(_tensor_arg(input, "permute"), parse_shape(dims, "permute"))


def squeeze(input, dim=None):
    a = _tensor_arg(input, "squeeze")
    return _s.squeeze(a, None if dim is None else parse_dims(dim, "squeeze"))


def unsqueeze(input, dim):
    return _s.unsqueeze(_tensor_arg(input, "unsqueeze"), _int(dim, "unsqueeze"))


def broadcast_to(input, shape):
    return _s.expand(_tensor_arg(input, "broadcast_to"), parse_shape(shape, "broadcast_to"))


def _tensor_list(tensors, op):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}: expected a list or tuple of tensors, got {type(tensors).__name__}.")
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"{op}: expected a Tensor at position {i}, got {type(x).__name__}.")
    return list(tensors)


def cat(tensors, dim=0):
    return _s.cat(_tensor_list(tensors, "cat"), _int(dim, "cat"))


concat = cat


def stack(tensors, dim=0):
    return _s.stack(_tensor_list(tensors, "stack"), _int(dim, "stack"))


@takes_tensors("tensor")
def split(tensor, split_size_or_sections, dim=0):
    if isinstance(split_size_or_sections, (int, np.integer)) and not isinstance(split_size_or_sections, bool):
        return tuple(_s.split_size(tensor, int(split_size_or_sections), _int(dim, "split")))
    return tuple(_s.split(tensor, parse_shape(split_size_or_sections, "split"), _int(dim, "split")))


@takes_tensors("input")
def chunk(input, chunks, dim=0):
    return tuple(_s.chunk(input, _int(chunks, "chunk"), _int(dim, "chunk")))


@takes_tensors("input")
def unbind(input, dim=0):
    d = wrap_dim(_int(dim, "unbind"), input.ndim, "unbind")
    if input.ndim == 0:
        raise IndexError("unbind: cannot unbind a 0-d tensor; it has no dimension to unbind along.")
    return tuple(_s.select(input, d, i) for i in range(input.shape[d]))


@takes_tensors("input")
def narrow(input, dim, start, length):
    return _s.slice(input, _int(dim, "narrow"), start, start + length, 1)


@takes_tensors("input")
def select(input, dim, index):
    return _s.select(input, _int(dim, "select"), _int(index, "select"))


# ===== indexing ================================================================================================

@takes_tensors("input", "index")
def gather(input, dim, index):
    return _s.gather(input, _int(dim, "gather"), _tensor_arg(index, "gather", "index"))


@takes_tensors("input", "index")
def index_select(input, dim, index):
    return _s.index_select(input, _int(dim, "index_select"), _tensor_arg(index, "index_select", "index"))


@takes_tensors("input", "index")
def take(input, index):
    idx = _tensor_arg(index, "take", "index")
    if input.numel() > 0 and idx.dtype is _dt.int64:     # negative positions count from the end, as torch
        idx = _m.add(idx, _m.mul(scalar_tensor(input.numel(), _dt.int64),
                                 _s.to_dtype(_m.compare("lt", idx, scalar_tensor(0, _dt.int64)), _dt.int64)))
    return _s.take(input, idx)


@takes_tensors("input", "mask")
def masked_fill(input, mask, value):
    return _s.masked_fill(input, _tensor_arg(mask, "masked_fill", "mask"),
                          as_operand_or_throw(value, input, "masked_fill"))


# ===== neural-net ops (also re-exported by nn.functional) ======================================================

def softmax(input, dim, dtype=None):
    a = _tensor_arg(input, "softmax")
    return _nn.softmax(_s.to_dtype(a, _dt.to_dtype(dtype)) if dtype is not None else a, _int(dim, "softmax"))


def log_softmax(input, dim, dtype=None):
    a = _tensor_arg(input, "log_softmax")
    return _nn.log_softmax(_s.to_dtype(a, _dt.to_dtype(dtype)) if dtype is not None else a,
                           _int(dim, "log_softmax"))


@takes_tensors("input", "target", "weight")
def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    _tensor_arg(input, "cross_entropy")
    _tensor_arg(target, "cross_entropy", "target")
    if not 0 <= label_smoothing <= 1:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}.")
    if weight is not None:                 # torch's class weights: only this engine has them (composed)
        if label_smoothing:
            raise NotImplementedError("cross_entropy: class weights with label_smoothing are not supported.")
        logp = _nn.log_softmax(input, 1 if input.ndim > 1 else 0)
        return nll_loss(logp, target, weight, ignore_index, reduction)
    if target.dtype is not _dt.int64 and target.dtype.is_floating_point and target.shape == input.shape:
        # class probabilities as target: -(target * log_softmax).sum(1)
        code = _reduction_code(reduction, "cross_entropy")
        d = 1 if input.ndim > 1 else 0
        losses = _m.neg(_m.sum(_m.mul(target, _nn.log_softmax(input, d)), (d,), False))
        return _reduce_loss(losses, code)
    if input.ndim > 2 and target.ndim == input.ndim - 1:
        # (N, C, d1, ...) logits with (N, d1, ...) targets: classes moved last, one row per position
        c = input.shape[1]
        code = _reduction_code(reduction, "cross_entropy")
        rows = _s.reshape(_s.permute(input, (0,) + tuple(range(2, input.ndim)) + (1,)), (-1, c))
        losses = _nn.cross_entropy(rows, _s.reshape(target, (-1,)), code, ignore_index, float(label_smoothing))
        return _s.reshape(losses, target.shape) if code == 0 else losses
    return _nn.cross_entropy(input, target, _reduction_code(reduction, "cross_entropy"), ignore_index,
                             float(label_smoothing))


@takes_tensors("input", "target", "weight")
def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    _tensor_arg(input, "nll_loss")
    _tensor_arg(target, "nll_loss", "target")
    if not (input.ndim == 2 and target.ndim == 1 and target.shape[0] == input.shape[0]):
        raise RuntimeError(f"nll_loss: expected input (N, C) and target (N,), got {shape_str(input.shape)} and "
                           f"{shape_str(target.shape)}.")
    if target.dtype is not _dt.int64:
        raise RuntimeError(f"nll_loss: expected int64 class indices as target, got {target.dtype.name}.")
    code = _reduction_code(reduction, "nll_loss")
    keep = _m.compare("ne", target, scalar_tensor(ignore_index, _dt.int64))
    safe_t = _m.where(keep, target, scalar_tensor(0, _dt.int64))
    picked = _s.squeeze(_s.gather(input, 1, _s.unsqueeze(safe_t, 1)), (1,))
    keepf = _s.to_dtype(keep, input.dtype)
    if weight is not None:                 # torch's class weights: only this engine has them (composed)
        keepf = _m.mul(keepf, _s.index_select(weight.detach(), 0, safe_t))
    losses = _m.neg(_m.mul(picked, keepf))
    if code == 1:
        return _m.div(_m.sum(losses, (), False), _m.sum(keepf, (), False))
    return _reduce_loss(losses, code)


@takes_tensors("input", "target")
def mse_loss(input, target, reduction="mean"):
    d = _m.sub(input, target)
    return _reduce_loss(_m.mul(d, d), _reduction_code(reduction, "mse_loss"))


@takes_tensors("input", "target", "pos_weight")
def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    x, y = input, target
    if x.shape != y.shape:      # torch does not broadcast here
        raise ValueError(f"binary_cross_entropy_with_logits: target size {shape_str(y.shape)} must be the same as "
                         f"input size {shape_str(x.shape)}.")
    # loss = x - x*y + log(1 + exp(-x)), with softplus keeping exp from overflowing
    sp = _m.softplus(_m.neg(x), 1.0, 20.0)
    if pos_weight is not None:           # torch's pos_weight: only this engine has it (composed)
        # loss = (1 - y) x + (1 + (pw - 1) y) softplus(-x)
        scale = _m.add(_m.mul(_m.sub(pos_weight, scalar_tensor(1, pos_weight.dtype)), y),
                       scalar_tensor(1, pos_weight.dtype))
        losses = _m.add(_m.sub(x, _m.mul(x, y)), _m.mul(scale, sp))
    else:
        losses = _m.add(_m.sub(x, _m.mul(x, y)), sp)
    if weight is not None:
        losses = _m.mul(losses, as_operand_or_throw(weight, x, "binary_cross_entropy_with_logits"))
    return _reduce_loss(losses, _reduction_code(reduction, "binary_cross_entropy_with_logits"))


@takes_tensors("input", "weight", "bias")
def linear(input, weight, bias=None):
    if weight.ndim not in (1, 2):
        raise RuntimeError(f"linear: weight must be 1-D or 2-D, got shape {shape_str(weight.shape)}.")
    out = _m.matmul(input, _s.mT(weight) if weight.ndim == 2 else weight)
    return _m.add(out, bias) if bias is not None else out


@takes_tensors("input", "weight")
def embedding(input, weight, padding_idx=None):
    if weight.ndim != 2:
        raise RuntimeError(f"embedding: weight must be 2-D (num_embeddings, dim), got {shape_str(weight.shape)}.")
    if input.dtype is not _dt.int64:
        raise IndexError(f"embedding: indices must be int64, got {input.dtype.name}.")
    bad = input._data[(input._data < 0) | (input._data >= weight.shape[0])]
    if bad.size:
        raise IndexError(f"embedding: index {int(bad.reshape(-1)[0])} is out of range for dimension 0 of size "
                         f"{weight.shape[0]}.")
    rows = _s.index_select(weight, 0, _s.reshape(input, (input.numel(),)))
    if padding_idx is not None:          # the padding row gets no gradient
        keep = _m.compare("ne", _s.reshape(input, (input.numel(), 1)), scalar_tensor(padding_idx, _dt.int64))
        rows = _m.where(keep, rows, rows.detach())
    return _s.reshape(rows, input.shape + (weight.shape[1],))


@takes_tensors("input")
def dropout(input, p=0.5, training=True):
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: probability must be in [0, 1], got {p}.")
    if not training or p == 0:
        return input
    if p == 1:
        return _m.mul(input, scalar_tensor(0, input.dtype))
    from .ops_creation import generator
    mask = make_tensor((generator().random(input.shape) >= p).astype(input._data.dtype))
    return _m.mul(input, _m.mul(mask, scalar_tensor(1.0 / (1 - p), input.dtype)))


@takes_tensors("tensor")
def one_hot(tensor, num_classes=-1):
    if tensor.dtype is not _dt.int64:
        raise RuntimeError(f"one_hot: expected an int64 tensor of class indices, got {tensor.dtype.name}.")
    idx = tensor._data
    n = num_classes
    if n < 0:
        if idx.size == 0:
            raise RuntimeError("one_hot: cannot infer num_classes from an empty tensor.")
        n = int(idx.max()) + 1
    bad = idx[(idx < 0) | (idx >= n)]
    if bad.size:
        raise RuntimeError(f"one_hot: class index {int(bad.reshape(-1)[0])} is out of range for {n} classes.")
    return make_tensor((idx[..., None] == np.arange(n)).astype(np.int64))


@takes_tensors("input", "weight", "bias")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    sh, sw = _pair_arg(stride, "conv2d", "stride")
    ph, pw = _pair_arg(padding, "conv2d", "padding")
    dh, dw = _pair_arg(dilation, "conv2d", "dilation")
    if dh != 1 or dw != 1 or groups != 1:
        raise NotImplementedError("conv2d: dilation and groups other than 1 are not supported yet.")
    return _nn.conv2d(input, weight, bias, sh, sw, ph, pw)


def _pool(is_max):
    op = "max_pool2d" if is_max else "avg_pool2d"

    def pool(input, kernel_size, stride=None, padding=0):
        kh, kw = _pair_arg(kernel_size, op, "kernel_size")
        sh, sw = (kh, kw) if stride is None else _pair_arg(stride, op, "stride")
        ph, pw = _pair_arg(padding, op, "padding")
        return (_nn.max_pool2d if is_max else _nn.avg_pool2d)(input, kh, kw, sh, sw, ph, pw)
    pool.__name__ = pool.__qualname__ = op
    return takes_tensors("input")(pool)


max_pool2d, avg_pool2d = _pool(True), _pool(False)


@takes_tensors("input", "weight", "bias")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    x = input
    ns = parse_shape(normalized_shape, "layer_norm")
    k = len(ns)
    # () would make `dims` empty, which mean() reads as "all dims": torch refuses it
    if k < 1:
        raise RuntimeError("layer_norm: normalized_shape must have at least one dim, got ().")
    if k > x.ndim or x.shape[x.ndim - k:] != ns:
        raise RuntimeError(f"layer_norm: normalized_shape {shape_str(ns)} does not match the last dims of the input "
                           f"shape {shape_str(x.shape)}.")
    dims = tuple(range(x.ndim - k, x.ndim))
    mu = _m.mean(x, dims, True)
    centered = _m.sub(x, mu)
    v = _m.mean(_m.mul(centered, centered), dims, True)
    y = _m.mul(centered, _m.rsqrt(_m.add(v, scalar_tensor(eps, x.dtype))))
    if weight is not None:
        y = _m.mul(y, weight)
    if bias is not None:
        y = _m.add(y, bias)
    return y

