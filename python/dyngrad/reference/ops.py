"""Reference engine: forward entry points of the primitive ops. Mirrors csrc/dyngrad/ops.def + ops_*.cpp.

Each primitive op: check its arguments, run its numpy kernel, and, if grad mode is on and an input requires
grad, record an OpNode whose formula is `derivatives.<op>_backward`. Composite ops (flatten, split, ...) are
written with primitives and have no formula of their own. nn primitives are in ops_nn.py, factories in
ops_creation.py.
"""
import builtins
import collections
import numbers

import numpy as np

from . import dtypes as _dt
from . import errors
from . import kernels
from .errors import shape_str
from .grad_mode import is_grad_enabled, no_grad
from .node import OpNode
from .tensor import Tensor, make_tensor, _wrap_dim

# THE list of primitive (differentiable) ops, in the order of csrc/dyngrad/ops.def.
OP_NAMES = (
    # arithmetic
    "add", "sub", "mul", "div", "neg", "pow", "matmul", "maximum", "minimum", "where", "clamp",
    # unary
    "exp", "log", "sqrt", "rsqrt", "abs", "sin", "cos", "tanh", "sigmoid", "relu", "sign", "erf",
    "leaky_relu", "gelu", "softplus",
    # reductions
    "sum", "mean", "var", "std", "amax", "amin", "max", "min", "logsumexp",
    # copies and shape
    "to", "clone", "copy", "fill", "reshape", "view", "transpose", "permute", "expand", "squeeze", "unsqueeze",
    "cat", "stack",
    # indexing
    "index", "index_put", "gather", "scatter_add", "masked_fill",
    # nn
    "softmax", "log_softmax", "cross_entropy", "nll_loss", "binary_cross_entropy_with_logits", "embedding",
    "dropout", "conv2d", "im2col", "col2im", "max_pool2d", "avg_pool2d", "layer_norm",
)

_backward_fns = {}


def record(op, out, inputs, save=None, save_out=False, **args):
    """Attach the OpNode of `op` to `out` (the caller checked that recording is needed)."""
    fn = _backward_fns.get(op)
    if fn is None:
        from . import derivatives
        fn = _backward_fns[op] = getattr(derivatives, op + "_backward")
    node = OpNode(op, fn, inputs)
    if save:
        for name, t in save.items():
            node.save(name, t)
    if args:
        node.args = args
    out.grad_fn = node
    out.output_nr = 0
    if save_out:
        node.save("out", out, is_output=True)
    return out


def needs_grad(*tensors):
    """Record only in grad mode, and only if an input requires grad."""
    if not is_grad_enabled():
        return False
    for t in tensors:
        if t is not None and (t._requires_grad or t.grad_fn is not None):
            return True
    return False


def view_of(arr, a):
    """A tensor over `arr`, which numpy made as a view of `a`'s memory: it shares a's version counter."""
    return make_tensor(arr, a._storage, a._base if a._base is not None else a)


def is_scalar(x):
    return isinstance(x, (numbers.Number, np.bool_)) and not isinstance(x, Tensor)


def as_tensor_arg(op, x, name="argument"):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        from .ops_creation import tensor
        return tensor(x)
    raise TypeError(f"{op}: expected a Tensor as {name}, got {type(x).__name__}.")


def _check_tensor(op, x, name="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor as {name}, got {type(x).__name__}.")


def broadcast_shape(op, sa, sb):
    """numpy/torch broadcasting of two shapes, or the shared RuntimeError naming the first mismatching dim."""
    n = builtins.max(len(sa), len(sb))
    out = []
    for i in range(n, 0, -1):
        x = sa[-i] if i <= len(sa) else 1
        y = sb[-i] if i <= len(sb) else 1
        if x != y and x != 1 and y != 1:
            raise RuntimeError(errors.ERR_BROADCAST.format(op=op, a=shape_str(sa), b=shape_str(sb), d=-i, x=x, y=y))
        out.append(x if y == 1 else y)
    return tuple(out)


_FLOAT_KINDS = {float: 2, int: 1}


def operands(op, *xs):
    """Tensors of one promoted dtype from operands that are tensors or Python scalars; checks broadcasting.
    Returns (tensors, arrays cast to the promoted dtype, result dtype)."""
    if len(xs) == 2:                                       # fast paths for the common binary cases
        a, b = xs
        if type(a) is Tensor:
            x = a._data
            if type(b) is Tensor:
                y = b._data
                if x.dtype == y.dtype:
                    if x.shape != y.shape:
                        broadcast_shape(op, x.shape, y.shape)
                    return xs, (x, y), _dt.from_numpy_dtype(x.dtype)
            elif _FLOAT_KINDS.get(type(b), 3) <= _KIND_CATEGORY.get(x.dtype.kind, 0):
                y = np.array(b, dtype=x.dtype)
                return (a, make_tensor(y)), (x, y), _dt.from_numpy_dtype(x.dtype)
        elif type(b) is Tensor:
            y = b._data
            if _FLOAT_KINDS.get(type(a), 3) <= _KIND_CATEGORY.get(y.dtype.kind, 0):
                x = np.array(a, dtype=y.dtype)
                return (make_tensor(x), b), (x, y), _dt.from_numpy_dtype(y.dtype)
    return _operands_general(op, xs)


_KIND_CATEGORY = {"f": 2, "i": 1, "b": 0}


def _operands_general(op, xs):
    tensors, scalars = [], []
    for x in xs:
        if isinstance(x, Tensor):
            tensors.append(x)
        elif is_scalar(x):
            scalars.append(x)
        elif isinstance(x, np.ndarray):
            tensors.append(as_tensor_arg(op, x))
        else:
            raise TypeError(f"{op}: unsupported operand type {type(x).__name__}; expected a Tensor or a number.")
    dtype = _dt.result_dtype(tensors, scalars)
    out_t, out_a = [], []
    shape = None
    for x in xs:
        if isinstance(x, np.ndarray):
            x = as_tensor_arg(op, x)
        if isinstance(x, Tensor):
            arr = x._data if x._data.dtype == dtype.np else x._data.astype(dtype.np)
            shape = x._data.shape if shape is None else broadcast_shape(op, shape, x._data.shape)
            out_t.append(x)
        else:
            arr = np.array(x, dtype=dtype.np)
            out_t.append(make_tensor(arr))
        out_a.append(arr)
    return out_t, out_a, dtype


def _float_array(a):
    """Float-only ops compute int and bool tensors in float32."""
    return a._data if a._data.dtype.kind == "f" else a._data.astype(np.float32)


def _cast(arr, dtype):
    return arr if arr.dtype == dtype.np else arr.astype(dtype.np)


# ===== arithmetic ==============================================================================================

# out = a + alpha * b
def add(a, b, alpha=1):
    if alpha != 1:
        b = mul(b, alpha)
    (a, b), (x, y), dtype = operands("add", a, b)
    out = make_tensor(_cast(kernels.add(x, y), dtype))
    if needs_grad(a, b):
        record("add", out, (a, b))
    return out


# out = a - alpha * b
def sub(a, b, alpha=1):
    if alpha != 1:
        b = mul(b, alpha)
    (a, b), (x, y), dtype = operands("sub", a, b)
    if dtype is _dt.bool_:
        raise TypeError("sub: subtracting bool tensors is not supported; use logical_xor() or ~ instead.")
    out = make_tensor(_cast(kernels.sub(x, y), dtype))
    if needs_grad(a, b):
        record("sub", out, (a, b))
    return out


# out = a * b
def mul(a, b):
    (a, b), (x, y), dtype = operands("mul", a, b)
    out = make_tensor(_cast(kernels.mul(x, y), dtype))
    if needs_grad(a, b):
        record("mul", out, (a, b), save={"a": a if b.requires_grad else None, "b": b if a.requires_grad else None})
    return out


# out = a / b (true division: int / int is float32)
def div(a, b, rounding_mode=None):
    if rounding_mode is not None:
        return floor_divide(a, b) if rounding_mode == "floor" else _trunc_divide(a, b)
    (a, b), (x, y), dtype = operands("div", a, b)
    if not dtype.is_floating_point:
        dtype = _dt.get_default_dtype()
        x, y = x.astype(dtype.np), y.astype(dtype.np)
    out = make_tensor(_cast(kernels.div(x, y), dtype))
    if needs_grad(a, b):
        record("div", out, (a, b), save={"a": a if b.requires_grad else None, "b": b})
    return out


# out = -a
def neg(a):
    _check_tensor("neg", a)
    if a.dtype is _dt.bool_:
        raise TypeError("neg: negation of a bool tensor is not supported; use ~ (logical_not) instead.")
    out = make_tensor(kernels.neg(a._data))
    if needs_grad(a):
        record("neg", out, (a,))
    return out


# out = a ** b
def pow(a, b):
    (a, b), (x, y), dtype = operands("pow", a, b)
    if not dtype.is_floating_point and np.any(y < 0):
        raise RuntimeError("pow: integers to negative integer powers are not allowed; use a float tensor.")
    out = make_tensor(_cast(kernels.pow(x, y), dtype))
    if needs_grad(a, b):
        record("pow", out, (a, b), save={"a": a, "b": b}, save_out=b.requires_grad)
    return out


# out = a @ b (1-D, 2-D and batched, numpy's matmul rules)
def matmul(a, b):
    a, b = as_tensor_arg("matmul", a, "first argument"), as_tensor_arg("matmul", b, "second argument")
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(f"matmul: both arguments need at least 1 dimension, got shapes {shape_str(a.shape)} "
                           f"and {shape_str(b.shape)}.")
    k1 = a.shape[-1]
    k2 = b.shape[-2] if b.ndim >= 2 else b.shape[0]
    if k1 != k2:
        raise RuntimeError(errors.ERR_MATMUL.format(a=shape_str(a.shape), b=shape_str(b.shape), k1=k1, k2=k2))
    if a.ndim > 2 or b.ndim > 2:
        broadcast_shape("matmul", a.shape[:-2], b.shape[:-2] if b.ndim >= 2 else ())
    dtype = _dt.promote(a.dtype, b.dtype)
    out = make_tensor(kernels.matmul(_cast(a._data, dtype), _cast(b._data, dtype)))
    if needs_grad(a, b):
        record("matmul", out, (a, b), save={"a": a if b.requires_grad else None, "b": b if a.requires_grad else None},
               a_ndim=a.ndim, b_ndim=b.ndim)
    return out


# out = max(a, b) elementwise
def maximum(a, b):
    (a, b), (x, y), dtype = operands("maximum", a, b)
    out = make_tensor(kernels.maximum(x, y))
    if needs_grad(a, b):
        record("maximum", out, (a, b), save={"a": a, "b": b})
    return out


# out = min(a, b) elementwise
def minimum(a, b):
    (a, b), (x, y), dtype = operands("minimum", a, b)
    out = make_tensor(kernels.minimum(x, y))
    if needs_grad(a, b):
        record("minimum", out, (a, b), save={"a": a, "b": b})
    return out


# out = cond ? a : b
def where(condition, a, b):
    _check_tensor("where", condition, "condition")
    if condition.dtype is not _dt.bool_:
        raise TypeError(f"where: the condition must be a bool tensor, got {condition.dtype}.")
    (a, b), (x, y), dtype = operands("where", a, b)
    broadcast_shape("where", condition.shape, broadcast_shape("where", a.shape, b.shape))
    out = make_tensor(_cast(kernels.where(condition._data, x, y), dtype))
    if needs_grad(a, b):
        record("where", out, (a, b), save={"cond": condition})
    return out


# out = min(max(a, min), max)
def clamp(a, min=None, max=None):
    _check_tensor("clamp", a)
    if min is None and max is None:
        raise RuntimeError("clamp: at least one of min and max must be given.")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = a
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out
    dtype = _dt.result_dtype([a], [v for v in (min, max) if v is not None])
    out = make_tensor(_cast(kernels.clamp(a._data, min, max), dtype))
    if needs_grad(a):
        record("clamp", out, (a,), save={"a": a}, min=min, max=max)
    return out


clip = clamp


# ===== unary ===================================================================================================

def _unary(op, a, kernel, save_input=False, save_out=False, **args):
    _check_tensor(op, a)
    out = make_tensor(kernel(_float_array(a)))
    if needs_grad(a):
        record(op, out, (a,), save={"a": a} if save_input else None, save_out=save_out, **args)
    return out


def exp(a): return _unary("exp", a, kernels.exp, save_out=True)                    # out = e^a
def log(a): return _unary("log", a, kernels.log, save_input=True)                  # out = ln a
def sqrt(a): return _unary("sqrt", a, kernels.sqrt, save_out=True)                 # out = a^(1/2)
def rsqrt(a): return _unary("rsqrt", a, kernels.rsqrt, save_out=True)              # out = a^(-1/2)
def sin(a): return _unary("sin", a, kernels.sin, save_input=True)                  # out = sin a
def cos(a): return _unary("cos", a, kernels.cos, save_input=True)                  # out = cos a
def tanh(a): return _unary("tanh", a, kernels.tanh, save_out=True)                 # out = tanh a
def sigmoid(a): return _unary("sigmoid", a, kernels.sigmoid, save_out=True)        # out = 1 / (1 + e^-a)
def erf(a): return _unary("erf", a, kernels.erf, save_input=True)                  # out = erf a


# out = |a| (keeps integer dtypes)
def abs(a):
    _check_tensor("abs", a)
    out = make_tensor(kernels.abs(a._data))
    if needs_grad(a):
        record("abs", out, (a,), save={"a": a})
    return out


# out = max(a, 0); relu saves its output, not its input: the mask out > 0 is the same (as torch's relu_ note)
def relu(a):
    _check_tensor("relu", a)
    out = make_tensor(kernels.relu(a._data))
    if needs_grad(a):
        record("relu", out, (a,), save_out=True)
    return out


# out = sign(a), whose gradient is zero
def sign(a):
    _check_tensor("sign", a)
    out = make_tensor(kernels.sign(a._data) if a.dtype is not _dt.bool_ else a._data.copy())
    if needs_grad(a):
        record("sign", out, (a,))
    return out


# out = a if a > 0 else slope * a
def leaky_relu(a, negative_slope=0.01, inplace=False):
    return _unary("leaky_relu", a, lambda x: kernels.leaky_relu(x, negative_slope), save_input=True,
                  negative_slope=negative_slope)


# out = a * Phi(a) (erf form) or its tanh approximation
def gelu(a, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}.")
    kernel = kernels.gelu if approximate == "none" else kernels.gelu_tanh
    return _unary("gelu", a, kernel, save_input=True, approximate=approximate)


# out = log(1 + e^(beta a)) / beta, linear above the threshold
def softplus(a, beta=1.0, threshold=20.0):
    return _unary("softplus", a, lambda x: kernels.softplus(x, beta, threshold), save_input=True,
                  beta=beta, threshold=threshold)


def square(a):
    return mul(a, a)


def reciprocal(a):
    return div(1.0, a)


# ===== reductions ==============================================================================================

def reduce_dims(op, dim, ndim):
    """dim=None -> all dims; an int or a tuple of ints -> sorted positive dims (duplicates are an error)."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        dims = tuple(_wrap_dim(op, d, ndim) for d in dim)
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"{op}: dim {tuple(dim)} appears multiple times in the list of dims.")
        return tuple(sorted(dims)) if ndim > 0 else ()
    return (_wrap_dim(op, dim, ndim),) if ndim > 0 else ()


def _reduced_count(shape, dims):
    n = 1
    for d in dims:
        n *= shape[d]
    return n


# out = sum of a over dims
def sum(a, dim=None, keepdim=False, dtype=None):
    _check_tensor("sum", a)
    dims = reduce_dims("sum", dim, a.ndim)
    arr = a._data
    if dtype is not None:
        arr = _cast(arr, _dt.to_dtype(dtype, "sum"))
    elif arr.dtype.kind in "bi":
        arr = arr.astype(np.int64)
    out = make_tensor(kernels.sum(arr, dims, keepdim))
    if needs_grad(a):
        record("sum", out, (a,), shape=a.shape, dims=dims, keepdim=keepdim)
    return out


# out = sum(a) / n over dims
def mean(a, dim=None, keepdim=False, dtype=None):
    _check_tensor("mean", a)
    dims = reduce_dims("mean", dim, a.ndim)
    arr = _float_array(a) if dtype is None else _cast(a._data, _dt.to_dtype(dtype, "mean"))
    out = make_tensor(_cast(kernels.mean(arr, dims, keepdim), _dt.from_numpy_dtype(arr.dtype)))
    if needs_grad(a):
        record("mean", out, (a,), shape=a.shape, dims=dims, keepdim=keepdim, count=_reduced_count(a.shape, dims))
    return out


def _correction(op, correction, unbiased):
    if unbiased is not None:
        if correction is not None and correction != (1 if unbiased else 0):
            raise ValueError(f"{op}: pass either correction or unbiased, not both.")
        return 1 if unbiased else 0
    return 1 if correction is None else correction


# out = sum((a - mean a)^2) / (n - correction)
def var(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    _check_tensor("var", a)
    if isinstance(dim, bool):                      # var(True) is the legacy var(unbiased=True)
        dim, unbiased = None, dim
    correction = _correction("var", correction, unbiased)
    dims = reduce_dims("var", dim, a.ndim)
    arr = _float_array(a)
    out = make_tensor(_cast(kernels.var(arr, dims, correction, keepdim), _dt.from_numpy_dtype(arr.dtype)))
    if needs_grad(a):
        record("var", out, (a,), save={"a": a}, dims=dims, keepdim=keepdim, correction=correction,
               count=_reduced_count(a.shape, dims))
    return out


# out = sqrt(var(a))
def std(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    _check_tensor("std", a)
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    correction = _correction("std", correction, unbiased)
    dims = reduce_dims("std", dim, a.ndim)
    arr = _float_array(a)
    out = make_tensor(_cast(np.sqrt(kernels.var(arr, dims, correction, keepdim)), _dt.from_numpy_dtype(arr.dtype)))
    if needs_grad(a):
        record("std", out, (a,), save={"a": a}, save_out=True, dims=dims, keepdim=keepdim, correction=correction,
               count=_reduced_count(a.shape, dims))
    return out


def _check_nonempty(op, a, dims):
    for d in dims:
        if a.shape[d] == 0:
            raise IndexError(f"{op}: cannot reduce over dimension {d} of size 0 (shape {shape_str(a.shape)}); "
                             "expected a non-empty dimension.")
    if not dims and a.numel() == 0:
        raise RuntimeError(f"{op}: cannot reduce an empty tensor (shape {shape_str(a.shape)}).")


def _extreme(op, kernel, a, dim, keepdim):
    _check_tensor(op, a)
    dims = reduce_dims(op, dim, a.ndim)
    _check_nonempty(op, a, dims)
    out = make_tensor(kernel(a._data, dims, keepdim))
    if needs_grad(a):
        record(op, out, (a,), save={"a": a}, save_out=True, dims=dims, keepdim=keepdim)
    return out


# out = max of a over dims; the gradient is shared evenly between tied maxima
def amax(a, dim=(), keepdim=False):
    return _extreme("amax", kernels.amax, a, None if dim == () else dim, keepdim)


# out = min of a over dims; the gradient is shared evenly between tied minima
def amin(a, dim=(), keepdim=False):
    return _extreme("amin", kernels.amin, a, None if dim == () else dim, keepdim)


MaxResult = collections.namedtuple("max", ["values", "indices"])
MinResult = collections.namedtuple("min", ["values", "indices"])


def _max_or_min(op, a, dim, keepdim, other):
    _check_tensor(op, a)
    if isinstance(dim, Tensor) or other is not None:
        return (maximum if op == "max" else minimum)(a, dim if other is None else other)
    if dim is None:                             # max() over everything: ties share the gradient (torch)
        _check_nonempty(op, a, ())
        out = make_tensor((kernels.amax if op == "max" else kernels.amin)(a._data, None, False))
        if needs_grad(a):
            record(op, out, (a,), save={"a": a}, save_out=True, dims=tuple(range(a.ndim)), keepdim=False,
                   indices=None)
        return out
    d = _wrap_dim(op, dim, a.ndim)
    _check_nonempty(op, a, (d,) if a.ndim else ())
    arr = a._data if a.ndim else a._data.reshape(1)
    idx = (np.argmax if op == "max" else np.argmin)(arr, axis=d, keepdims=True)
    values = np.take_along_axis(arr, idx, axis=d)
    if not keepdim or a.ndim == 0:
        values, idx = values.squeeze(d), idx.squeeze(d)
    if a.ndim == 0:
        values, idx = values.reshape(()), idx.reshape(())
    out = make_tensor(values)
    if needs_grad(a):
        record(op, out, (a,), shape=a.shape, dims=(d,) if a.ndim else (), keepdim=keepdim, indices=idx)
    result = MaxResult if op == "max" else MinResult
    return result(out, make_tensor(idx.astype(np.int64)))


# values = max of a along dim (gradient to the arg-max), or max of everything, or elementwise maximum(a, other)
def max(a, dim=None, keepdim=False, other=None):
    return _max_or_min("max", a, dim, keepdim, other)


# values = min of a along dim (gradient to the arg-min), or min of everything, or elementwise minimum(a, other)
def min(a, dim=None, keepdim=False, other=None):
    return _max_or_min("min", a, dim, keepdim, other)


def _arg_extreme(op, fn, a, dim, keepdim):
    _check_tensor(op, a)
    if dim is None:
        _check_nonempty(op, a, ())
        out = np.asarray(fn(a._data.reshape(-1)))
        return make_tensor(out.reshape((1,) * a.ndim) if keepdim else out.astype(np.int64))
    d = _wrap_dim(op, dim, a.ndim)
    _check_nonempty(op, a, (d,) if a.ndim else ())
    if a.ndim == 0:
        return make_tensor(np.array(0, dtype=np.int64))
    return make_tensor(np.asarray(fn(a._data, axis=d, keepdims=keepdim)).astype(np.int64))


def argmax(a, dim=None, keepdim=False):
    return _arg_extreme("argmax", np.argmax, a, dim, keepdim)


def argmin(a, dim=None, keepdim=False):
    return _arg_extreme("argmin", np.argmin, a, dim, keepdim)


# out = log(sum(e^a)) over dims, computed stably
def logsumexp(a, dim=None, keepdim=False):
    _check_tensor("logsumexp", a)
    dims = reduce_dims("logsumexp", dim, a.ndim)
    out = make_tensor(kernels.logsumexp(_float_array(a), dims, keepdim))
    if needs_grad(a):
        record("logsumexp", out, (a,), save={"a": a}, save_out=True, dims=dims, keepdim=keepdim)
    return out


def sum_to_shape(g, shape, node_name="sum_to_shape", index=0):
    """See Note [Unbroadcast] in csrc/dyngrad/node.h: sum g over the dims that broadcasting added or
    stretched, so it gets `shape` (a gradient with size-1 dims is expanded instead)."""
    gshape = g.shape
    shape = tuple(shape)
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    if lead < 0:
        return expand(g, shape) if _expandable(gshape, shape) else _unbroadcast_error(node_name, index, gshape, shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and gshape[lead + i] != 1)
    if dims:
        g = sum(g, dims, keepdim=True)
        g = reshape(g, g.shape[lead:])
    if g.shape != shape:
        if not _expandable(g.shape, shape):
            _unbroadcast_error(node_name, index, gshape, shape)
        g = expand(g, shape)
    return g


def _expandable(src, dst):
    if len(src) > len(dst):
        return False
    return builtins.all(s == d or s == 1 for s, d in zip(src[::-1], dst[::-1]))


def _unbroadcast_error(node_name, index, gshape, shape):
    raise RuntimeError(f"{node_name}: the gradient for input {index} has shape {shape_str(gshape)}, which does "
                       f"not broadcast to the input's shape {shape_str(shape)}.")


# ===== comparisons and logic (no grad) =========================================================================

def _compare(op, a, b):
    (a, b), (x, y), _ = operands(op, a, b)
    return make_tensor(kernels.compare[op](x, y))


def eq(a, b): return _compare("eq", a, b)
def ne(a, b): return _compare("ne", a, b)
def lt(a, b): return _compare("lt", a, b)
def le(a, b): return _compare("le", a, b)
def gt(a, b): return _compare("gt", a, b)
def ge(a, b): return _compare("ge", a, b)


greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


def equal(a, b):
    return a.shape == b.shape and bool(np.array_equal(a._data, b._data))


def allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=False):
    return bool(np.allclose(a._data, b._data, rtol=rtol, atol=atol, equal_nan=equal_nan))


def isclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=False):
    return make_tensor(np.isclose(a._data, b._data, rtol=rtol, atol=atol, equal_nan=equal_nan))


def logical_not(a): return make_tensor(np.logical_not(a._data))
def logical_and(a, b): return make_tensor(np.logical_and(*operands("logical_and", a, b)[1]))
def logical_or(a, b): return make_tensor(np.logical_or(*operands("logical_or", a, b)[1]))
def logical_xor(a, b): return make_tensor(np.logical_xor(*operands("logical_xor", a, b)[1]))
def isnan(a): return make_tensor(np.isnan(a._data))
def isinf(a): return make_tensor(np.isinf(a._data))
def isfinite(a): return make_tensor(np.isfinite(a._data))


def any(a, dim=None, keepdim=False):
    return make_tensor(np.any(a._data, axis=reduce_dims("any", dim, a.ndim), keepdims=keepdim))


def all(a, dim=None, keepdim=False):
    return make_tensor(np.all(a._data, axis=reduce_dims("all", dim, a.ndim), keepdims=keepdim))


def floor_divide(a, b):
    (a, b), (x, y), dtype = operands("floor_divide", a, b)
    return make_tensor(_cast(kernels.quiet(np.floor_divide)(x, y), dtype))


def _trunc_divide(a, b):
    (a, b), (x, y), dtype = operands("div", a, b)
    return make_tensor(_cast(kernels.quiet(lambda p, q: np.trunc(p / q))(x, y), dtype))


def remainder(a, b):
    (a, b), (x, y), dtype = operands("remainder", a, b)
    return make_tensor(_cast(kernels.quiet(np.remainder)(x, y), dtype))


def floor(a): return make_tensor(np.floor(a._data))
def ceil(a): return make_tensor(np.ceil(a._data))
def round(a): return make_tensor(np.round(a._data))


def count_nonzero(a, dim=None):
    return make_tensor(np.asarray(np.count_nonzero(a._data, axis=dim), dtype=np.int64))


def nonzero(a, as_tuple=False):
    idx = np.nonzero(a._data)
    if as_tuple:
        return tuple(make_tensor(i.astype(np.int64)) for i in idx)
    return make_tensor(np.stack(idx, axis=1).astype(np.int64) if idx else np.zeros((1, 0), np.int64))


# ===== copies and shape ========================================================================================

# out = a cast to dtype (the gradient is cast back by the engine)
def to(a, dtype):
    dtype = _dt.to_dtype(dtype, "to")
    if a._data.dtype == dtype.np:
        return a
    out = make_tensor(a._data.astype(dtype.np))
    if dtype.is_floating_point and needs_grad(a):
        record("to", out, (a,))
    return out


# out = a copy of a
def clone(a, memory_format=None):
    _check_tensor("clone", a)
    out = make_tensor(a._data.copy())
    if needs_grad(a):
        record("clone", out, (a,))
    return out


def contiguous(a, memory_format=None):
    return a if a._data.flags.c_contiguous else clone(a)


def detach(a):
    return a.detach()


def _size_args(op, sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    out = []
    for s in sizes:
        if isinstance(s, Tensor):
            s = s.item()
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"{op}: sizes must be ints, got {type(s).__name__} in {tuple(sizes)}.")
        out.append(int(s))
    return tuple(out)


def _infer_shape(op, shape, a):
    numel = a.numel()
    if shape.count(-1) > 1:
        raise RuntimeError(f"{op}: only one dimension can be inferred (-1), got shape {shape_str(shape)}.")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise RuntimeError(errors.ERR_RESHAPE.format(new=shape_str(shape), numel=numel, old=shape_str(a.shape)))
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(errors.ERR_RESHAPE.format(new=shape_str(shape), numel=numel, old=shape_str(a.shape)))
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise RuntimeError(errors.ERR_RESHAPE.format(new=shape_str(shape), numel=numel, old=shape_str(a.shape)))
    return shape


# out = a with a new shape (a view when the strides allow it, a copy otherwise)
def reshape(a, *shape):
    _check_tensor("reshape", a)
    shape = _infer_shape("reshape", _size_args("reshape", shape), a)
    arr = a._data.reshape(shape)
    out = view_of(arr, a) if np.may_share_memory(arr, a._data) else make_tensor(arr)
    if needs_grad(a):
        record("reshape", out, (a,), shape=a.shape)
    return out


# out = a with a new shape, always a view (an error if the strides do not allow it)
def view(a, *shape):
    _check_tensor("view", a)
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer, tuple, list)):
        return to(a, shape[0])                   # view(dtype) as a cast (no bit reinterpretation)
    shape = _infer_shape("view", _size_args("view", shape), a)
    try:
        arr = np.reshape(a._data, shape, copy=False)
    except ValueError:
        raise RuntimeError(errors.ERR_VIEW.format(old=shape_str(a.shape), strides=a.stride(),
                                                  new=shape_str(shape))) from None
    out = view_of(arr, a)
    if needs_grad(a):
        record("view", out, (a,), shape=a.shape)
    return out


def view_as(a, other):
    return view(a, other.shape)


def reshape_as(a, other):
    return reshape(a, other.shape)


def flatten(a, start_dim=0, end_dim=-1):
    if a.ndim == 0:
        return reshape(a, 1)
    s = _wrap_dim("flatten", start_dim, a.ndim)
    e = _wrap_dim("flatten", end_dim, a.ndim)
    if s > e:
        raise RuntimeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for shape "
                           f"{shape_str(a.shape)}.")
    return reshape(a, a.shape[:s] + (-1,) + a.shape[e + 1:]) if a.numel() else \
        reshape(a, a.shape[:s] + (_reduced_count(a.shape, range(s, e + 1)),) + a.shape[e + 1:])


def unflatten(a, dim, sizes):
    d = _wrap_dim("unflatten", dim, a.ndim)
    return reshape(a, a.shape[:d] + tuple(sizes) + a.shape[d + 1:])


def ravel(a):
    return reshape(a, -1)


# out = a with dims d0 and d1 swapped (a view)
def transpose(a, dim0, dim1):
    _check_tensor("transpose", a)
    d0, d1 = _wrap_dim("transpose", dim0, a.ndim), _wrap_dim("transpose", dim1, a.ndim)
    if d0 == d1:
        return a
    out = view_of(np.swapaxes(a._data, d0, d1), a)
    if needs_grad(a):
        record("transpose", out, (a,), dim0=d0, dim1=d1)
    return out


swapaxes = transpose


def t(a):
    if a.ndim > 2:
        raise RuntimeError(f"t: expects a tensor with <= 2 dimensions, got shape {shape_str(a.shape)}.")
    return transpose(a, 0, 1) if a.ndim == 2 else a


# out = a with its dims reordered (a view)
def permute(a, *dims):
    _check_tensor("permute", a)
    dims = _size_args("permute", dims)
    if len(dims) != a.ndim:
        raise RuntimeError(f"permute: the number of dims {len(dims)} does not match the tensor's {a.ndim} "
                           f"dimensions (shape {shape_str(a.shape)}).")
    dims = tuple(_wrap_dim("permute", d, a.ndim) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"permute: dims {dims} must be a permutation of 0..{a.ndim - 1}.")
    out = view_of(np.transpose(a._data, dims), a)
    if needs_grad(a):
        record("permute", out, (a,), dims=dims)
    return out


def movedim(a, source, destination):
    src = _wrap_dim("movedim", source, a.ndim)
    dst = _wrap_dim("movedim", destination, a.ndim)
    order = [d for d in range(a.ndim) if d != src]
    order.insert(dst, src)
    return permute(a, order)


# out = a broadcast to `sizes` (a read-only view; -1 keeps a size)
def expand(a, *sizes):
    _check_tensor("expand", a)
    sizes = _size_args("expand", sizes)
    if len(sizes) < a.ndim:
        raise RuntimeError(f"expand: the number of sizes {len(sizes)} must be at least the tensor's {a.ndim} "
                           f"dimensions (shape {shape_str(a.shape)}).")
    lead = len(sizes) - a.ndim
    target = []
    for i, s in enumerate(sizes):
        old = a.shape[i - lead] if i >= lead else None
        if s == -1:
            if old is None:
                raise RuntimeError(f"expand: -1 is not allowed in a new leading dimension (sizes {sizes}).")
            s = old
        if old is not None and old != s and old != 1:
            raise RuntimeError(f"expand: the expanded size of the tensor ({s}) must match the existing size ({old}) "
                               f"at non-singleton dimension {i}. Target sizes: {shape_str(sizes)}. Tensor sizes: "
                               f"{shape_str(a.shape)}.")
        target.append(s)
    target = tuple(target)
    if target == a.shape:
        return a
    out = view_of(np.broadcast_to(a._data, target), a)
    if needs_grad(a):
        record("expand", out, (a,), shape=a.shape)
    return out


def expand_as(a, other):
    return expand(a, other.shape)


def broadcast_to(a, shape):
    return expand(a, shape)


# out = a without size-1 dims (all of them, or those in dim)
def squeeze(a, dim=None):
    _check_tensor("squeeze", a)
    dims = reduce_dims("squeeze", dim, a.ndim)
    dims = tuple(d for d in dims if a.shape[d] == 1)
    if not dims:
        return a
    out = view_of(np.squeeze(a._data, axis=dims), a)
    if needs_grad(a):
        record("squeeze", out, (a,), shape=a.shape)
    return out


# out = a with a new size-1 dim at `dim`
def unsqueeze(a, dim):
    _check_tensor("unsqueeze", a)
    n = a.ndim + 1
    if not isinstance(dim, (int, np.integer)) or not -n <= dim < n:
        raise errors.dim_error("unsqueeze", dim, n) if isinstance(dim, (int, np.integer)) else \
            TypeError(f"unsqueeze: dim must be an int, got {type(dim).__name__}.")
    d = int(dim) % n
    out = view_of(np.expand_dims(a._data, d), a)
    if needs_grad(a):
        record("unsqueeze", out, (a,), dim=d)
    return out


def _tensor_list(op, tensors):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}: expected a list or tuple of tensors, got {type(tensors).__name__}.")
    if len(tensors) == 0:
        raise RuntimeError(f"{op}: expected a non-empty list of tensors.")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected a Tensor at position {i}, got {type(t).__name__}.")
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = _dt.promote(dtype, t.dtype)
    return dtype


# out = the tensors joined along an existing dim
def cat(tensors, dim=0):
    dtype = _tensor_list("cat", tensors)
    first = tensors[0]
    if first.ndim == 0:
        raise RuntimeError("cat: zero-dimensional tensors cannot be concatenated; use stack().")
    d = _wrap_dim("cat", dim, first.ndim)
    for i, t in enumerate(tensors):
        if t.ndim != first.ndim or t.shape[:d] + t.shape[d + 1:] != first.shape[:d] + first.shape[d + 1:]:
            raise RuntimeError(f"cat: tensors must have the same shape except in dimension {d}: tensor 0 has shape "
                               f"{shape_str(first.shape)} but tensor {i} has shape {shape_str(t.shape)}.")
    out = make_tensor(np.concatenate([_cast(t._data, dtype) for t in tensors], axis=d))
    if needs_grad(*tensors):
        record("cat", out, tuple(tensors), dim=d, sizes=tuple(t.shape[d] for t in tensors))
    return out


concat = concatenate = cat


# out = the tensors joined along a new dim
def stack(tensors, dim=0):
    dtype = _tensor_list("stack", tensors)
    first = tensors[0]
    n = first.ndim + 1
    if not isinstance(dim, (int, np.integer)) or not -n <= dim < n:
        raise errors.dim_error("stack", dim, n)
    d = int(dim) % n
    for i, t in enumerate(tensors):
        if t.shape != first.shape:
            raise RuntimeError(f"stack: expects each tensor to be equal size, but tensor 0 has shape "
                               f"{shape_str(first.shape)} and tensor {i} has shape {shape_str(t.shape)}.")
    out = make_tensor(np.stack([_cast(t._data, dtype) for t in tensors], axis=d))
    if needs_grad(*tensors):
        record("stack", out, tuple(tensors), dim=d)
    return out


def split(a, split_size_or_sections, dim=0):
    d = _wrap_dim("split", dim, a.ndim)
    n = a.shape[d]
    if isinstance(split_size_or_sections, (int, np.integer)):
        step = int(split_size_or_sections)
        if step <= 0 and n > 0:
            raise RuntimeError(f"split: split_size must be positive, got {step}.")
        sizes = [builtins.min(step, n - s) for s in range(0, n, step)] if n else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if builtins.sum(sizes) != n:
            raise RuntimeError(f"split: split sizes {sizes} must sum to the size {n} of dimension {d} "
                               f"(shape {shape_str(a.shape)}).")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(a, d, start, s))
        start += s
    return tuple(out)


def chunk(a, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError(f"chunk: chunks must be positive, got {chunks}.")
    d = _wrap_dim("chunk", dim, a.ndim)
    n = a.shape[d]
    step = -(-n // chunks) if n else 1
    return split(a, step, d)


def unbind(a, dim=0):
    d = _wrap_dim("unbind", dim, a.ndim)
    return tuple(select(a, d, i) for i in range(a.shape[d]))


def narrow(a, dim, start, length):
    d = _wrap_dim("narrow", dim, a.ndim)
    if start < 0:
        start += a.shape[d]
    if not 0 <= start <= a.shape[d] or length < 0 or start + length > a.shape[d]:
        raise IndexError(f"narrow: start {start} and length {length} exceed dimension {d} of size {a.shape[d]}.")
    return index(a, (slice(None),) * d + (slice(start, start + length),))


def select(a, dim, i):
    d = _wrap_dim("select", dim, a.ndim)
    return index(a, (slice(None),) * d + (i,))


# ===== indexing ================================================================================================

def parse_index(a, key):
    """Turn a Python index into a tuple numpy understands, checking it the way torch does.

    ints, slices (step > 0), None, Ellipsis, bool masks, and integer tensors / lists / arrays."""
    if not isinstance(key, tuple):
        key = (key,)
    parsed = []
    consumed = 0
    for k in key:
        if isinstance(k, Tensor):
            k = k._data
        if isinstance(k, list):
            k = np.asarray(k) if k else np.zeros(0, dtype=np.int64)
        if isinstance(k, np.ndarray):
            if k.dtype == np.bool_:
                consumed += builtins.max(k.ndim, 1) if k.ndim else 0
            elif k.dtype.kind in "iu":
                consumed += 1
            else:
                raise IndexError(f"index: tensors used as indices must be int64 or bool, got {k.dtype}.")
        elif k is None or k is Ellipsis:
            pass
        elif isinstance(k, slice):
            for part in (k.start, k.stop, k.step):
                if part is not None and not isinstance(part, (int, np.integer, Tensor)):
                    raise TypeError(f"index: slice bounds must be ints or None, got {type(part).__name__}.")
            if k.step is not None and int(k.step) <= 0:
                raise ValueError(f"index: slice step must be positive, got {k.step}.")
            k = slice(*(int(p) if p is not None else None for p in (k.start, k.stop, k.step)))
            consumed += 1
        elif isinstance(k, (bool, np.bool_)):
            k = np.asarray(k)
        elif isinstance(k, (int, np.integer)):
            consumed += 1
        else:
            raise TypeError(f"index: only integers, slices, None, Ellipsis, and integer or bool tensors are valid "
                            f"indices, got {type(k).__name__}.")
        parsed.append(k)
    if builtins.sum(1 for k in parsed if k is Ellipsis) > 1:
        raise IndexError("index: an index can only have a single ellipsis ('...').")
    if consumed > a.ndim:
        raise IndexError(f"index: too many indices for a tensor of {a.ndim} dimensions (shape {shape_str(a.shape)}).")
    # check ranges to give the shared message (numpy's own would name no op)
    dim = 0
    ell_extra = a.ndim - consumed
    for k in parsed:
        if k is Ellipsis:
            dim += ell_extra
        elif k is None:
            continue
        elif isinstance(k, np.ndarray) and k.dtype == np.bool_:
            if k.ndim and k.shape != a.shape[dim:dim + k.ndim]:
                raise IndexError(f"index: the bool mask of shape {shape_str(k.shape)} does not match the indexed "
                                 f"shape {shape_str(a.shape[dim:dim + k.ndim])} at dimension {dim}.")
            dim += k.ndim
        elif isinstance(k, np.ndarray) or isinstance(k, (int, np.integer)):
            size = a.shape[dim]
            bad = np.asarray(k)
            bad = bad[(bad >= size) | (bad < -size)]
            if bad.size:
                raise IndexError(errors.ERR_INDEX.format(i=int(bad.reshape(-1)[0]), d=dim, n=size))
            dim += 1
        else:
            dim += 1
    return tuple(parsed)


def _is_basic(key):
    return builtins.all(k is None or k is Ellipsis or isinstance(k, (slice, int, np.integer)) for k in key)


# out = a[key] (a view for ints, slices, None and Ellipsis; a copy for tensor indices)
def index(a, key):
    _check_tensor("index", a)
    key = parse_index(a, key)
    arr = a._data[key]
    out = view_of(arr, a) if _is_basic(key) else make_tensor(arr)
    if needs_grad(a):
        record("index", out, (a,), shape=a.shape, key=key)
    return out


# out = a copy of a with out[key] = v (or out[key] += v when accumulate)
def index_put(a, key, v, accumulate=False, _parsed=False):
    _check_tensor("index_put", a)
    if not _parsed:
        key = parse_index(a, key)
    if is_scalar(v):
        v = make_tensor(np.array(v, dtype=a._data.dtype))
    (v,), (varr,), _ = operands("index_put", v)
    target_shape = np.empty(a.shape, dtype=np.bool_)[key].shape
    if not _expandable(v.shape, target_shape):
        raise RuntimeError(f"index_put: a value of shape {shape_str(v.shape)} cannot be broadcast to the indexed "
                           f"shape {shape_str(target_shape)}.")
    out = make_tensor(kernels.index_put(a._data, key, _cast(varr, a.dtype), accumulate))
    if needs_grad(a, v):
        record("index_put", out, (a, v), key=key, accumulate=accumulate)
    return out


# out[i][j] = a[index[i][j]][j] for dim 0 (torch.gather)
def gather(a, dim, index, sparse_grad=False):
    _check_tensor("gather", a)
    _check_index_tensor("gather", index)
    d = _wrap_dim("gather", dim, a.ndim)
    if index.ndim != a.ndim:
        raise RuntimeError(f"gather: index {shape_str(index.shape)} must have as many dimensions as the input "
                           f"{shape_str(a.shape)}.")
    for i, (n, m) in enumerate(zip(index.shape, a.shape)):
        if i != d and n > m:
            raise RuntimeError(f"gather: index {shape_str(index.shape)} is larger than the input "
                               f"{shape_str(a.shape)} in dimension {i}.")
    _check_index_range("gather", index._data, d, a.shape[d])
    idx = index._data % builtins.max(a.shape[d], 1)
    out = make_tensor(kernels.gather(a._data, d, idx))
    if needs_grad(a):
        record("gather", out, (a,), shape=a.shape, dim=d, index=idx)
    return out


# out = a copy of a with out[index[i][j]][j] += src[i][j] for dim 0 (torch.scatter_add)
def scatter_add(a, dim, index, src):
    _check_tensor("scatter_add", a)
    _check_index_tensor("scatter_add", index)
    d = _wrap_dim("scatter_add", dim, a.ndim)
    if index.ndim != a.ndim or src.ndim != a.ndim:
        raise RuntimeError(f"scatter_add: index {shape_str(index.shape)} and src {shape_str(src.shape)} must have "
                           f"as many dimensions as the input {shape_str(a.shape)}.")
    _check_index_range("scatter_add", index._data, d, a.shape[d])
    idx = index._data % builtins.max(a.shape[d], 1)
    dtype = _dt.promote(a.dtype, src.dtype)
    out = make_tensor(kernels.scatter_add(_cast(a._data, dtype), d, idx, _cast(src._data, dtype)))
    if needs_grad(a, src):
        record("scatter_add", out, (a, src), dim=d, index=idx)
    return out


def _check_index_tensor(op, index):
    if not isinstance(index, Tensor):
        raise TypeError(f"{op}: expected an int64 Tensor as index, got {type(index).__name__}.")
    if index.dtype is not _dt.int64:
        raise IndexError(f"{op}: the index must be an int64 tensor, got {index.dtype}.")


def _check_index_range(op, idx, dim, size):
    bad = idx[(idx >= size) | (idx < -size)]
    if bad.size:
        raise IndexError(errors.ERR_INDEX.format(i=int(bad.reshape(-1)[0]), d=dim, n=size))


def index_select(a, dim, index):
    _check_index_tensor("index_select", index)
    if index.ndim > 1:
        raise IndexError(f"index_select: the index must be 0-d or 1-D, got shape {shape_str(index.shape)}.")
    d = _wrap_dim("index_select", dim, a.ndim)
    return globals()["index"](a, (slice(None),) * d + (index.reshape(-1),))


def take_along_dim(a, indices, dim):
    return gather(a, dim, indices)


# out = a with value wherever mask is True
def masked_fill(a, mask, value):
    _check_tensor("masked_fill", a)
    if not isinstance(mask, Tensor) or mask.dtype is not _dt.bool_:
        raise TypeError(f"masked_fill: the mask must be a bool tensor, got "
                        f"{mask.dtype if isinstance(mask, Tensor) else type(mask).__name__}.")
    if not _expandable(mask.shape, a.shape):
        broadcast_shape("masked_fill", a.shape, mask.shape)
        raise RuntimeError(f"masked_fill: the mask of shape {shape_str(mask.shape)} must broadcast to the input "
                           f"shape {shape_str(a.shape)}.")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"masked_fill: only a 0-d tensor value is supported, got shape "
                               f"{shape_str(value.shape)}.")
        if value.requires_grad:
            return where(mask, value, a)
        value = value.item()
    if a.dtype.category < _dt.scalar_dtype(value).category:
        raise RuntimeError(f"masked_fill: cannot fill a {a.dtype} tensor with the value {value!r}.")
    out = make_tensor(np.where(mask._data, np.array(value, dtype=a._data.dtype), a._data))
    if needs_grad(a):
        record("masked_fill", out, (a,), save={"mask": mask})
    return out


# ===== in-place ops ============================================================================================
# Note [In-place ops] in csrc/dyngrad/ops.h: an in-place op is recorded as its out-of-place twin applied to a
# snapshot of the tensor (same grad_fn, copied data), whose result is written back into the tensor's memory;
# the tensor's grad_fn then moves to the new node. Writing into a view also rewrites its base's history.

def _inplace(op, self, compute, *others):
    _check_tensor(op, self)
    grad_on = is_grad_enabled()
    base = self._base
    if grad_on and self.grad_fn is None and self._requires_grad:
        raise RuntimeError(errors.ERR_LEAF_INPLACE.format(op=op))
    if grad_on and base is not None and base.grad_fn is None and base._requires_grad:
        raise RuntimeError(errors.ERR_LEAF_INPLACE.format(op=op) + " (The tensor is a view of such a leaf.)")
    if not self._data.flags.writeable:
        raise RuntimeError(f"{op}: this tensor is a read-only view (for example made by expand(), where several "
                           "elements share one memory location); clone() it before writing to it.")
    recording = grad_on and (self.requires_grad or (base is not None and base.requires_grad)
                             or builtins.any(isinstance(o, Tensor) and o.requires_grad for o in others))
    if not recording:
        with no_grad():
            res = compute(self)
        _write(op, self, res)
        return self
    snapshot = make_tensor(self._data.copy())
    snapshot.grad_fn, snapshot.output_nr, snapshot._requires_grad = self.grad_fn, self.output_nr, self._requires_grad
    res = compute(snapshot)
    base_alias = None
    if base is not None:
        base_alias = make_tensor(base._data)
        base_alias.grad_fn, base_alias.output_nr = base.grad_fn, base.output_nr
    _write(op, self, res)
    if base is None:
        self.grad_fn, self.output_nr = res.grad_fn, res.output_nr
    else:
        _rebase_view(self, base, base_alias, res)
    return self


def _write(op, self, res):
    if res.dtype.category > self.dtype.category:
        raise RuntimeError(f"{op}: the result type {res.dtype} can't be cast to the tensor's dtype {self.dtype} "
                           "in an in-place op.")
    if res.shape != self.shape and not _expandable(res.shape, self.shape):
        raise RuntimeError(f"{op}: the result of shape {shape_str(res.shape)} doesn't match the shape "
                           f"{shape_str(self.shape)} of the tensor written in place.")
    np.copyto(self._data, res._data, casting="unsafe")
    self._storage.version += 1


def _element_offsets(arr):
    """The byte offset of every element of arr from its first element, as an array of arr's shape."""
    offsets = np.zeros(arr.shape, dtype=np.int64)
    for d, (n, stride) in enumerate(zip(arr.shape, arr.strides)):
        shape = [1] * arr.ndim
        shape[d] = n
        offsets = offsets + (np.arange(n, dtype=np.int64) * stride).reshape(shape)
    return offsets


def _rebase_view(view_t, base, base_alias, res):
    """PyTorch's CopySlices: base := index_put(base, positions of the view, res); the view := base[positions]."""
    base_offsets = _element_offsets(base._data).reshape(-1)
    shift = view_t._data.__array_interface__["data"][0] - base._data.__array_interface__["data"][0]
    view_offsets = _element_offsets(view_t._data) + shift
    order = np.argsort(base_offsets, kind="stable")
    flat = order[np.searchsorted(base_offsets[order], view_offsets)]
    key = np.unravel_index(flat, base.shape) if base.ndim else ()
    new_base = index_put(base_alias, key, res, _parsed=True)
    base.grad_fn, base.output_nr = new_base.grad_fn, 0
    fresh = make_tensor(base._data)
    fresh.grad_fn = base.grad_fn
    new_view = index(fresh, key)
    view_t.grad_fn, view_t.output_nr = new_view.grad_fn, 0


def add_(a, b, alpha=1): return _inplace("add_", a, lambda s: add(s, b, alpha), b)
def sub_(a, b, alpha=1): return _inplace("sub_", a, lambda s: sub(s, b, alpha), b)
def mul_(a, b): return _inplace("mul_", a, lambda s: mul(s, b), b)
def div_(a, b): return _inplace("div_", a, lambda s: div(s, b), b)
def pow_(a, b): return _inplace("pow_", a, lambda s: pow(s, b), b)
def clamp_(a, min=None, max=None): return _inplace("clamp_", a, lambda s: clamp(s, min, max), min, max)
def masked_fill_(a, mask, value): return _inplace("masked_fill_", a, lambda s: masked_fill(s, mask, value), value)
def neg_(a): return _inplace("neg_", a, neg)
def exp_(a): return _inplace("exp_", a, exp)
def relu_(a): return _inplace("relu_", a, relu)
def sigmoid_(a): return _inplace("sigmoid_", a, sigmoid)
def tanh_(a): return _inplace("tanh_", a, tanh)


# out = value everywhere (the old values get no gradient)
def fill(a, value):
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"fill_: only a 0-d tensor value is supported, got shape {shape_str(value.shape)}.")
        return copy(a, value)
    out = make_tensor(np.full(a.shape, value, dtype=a._data.dtype))
    if needs_grad(a):
        record("fill", out, (a,))
    return out


def fill_(a, value): return _inplace("fill_", a, lambda s: fill(s, value), value)
def zero_(a): return _inplace("zero_", a, lambda s: fill(s, 0))


# out = src broadcast to a's shape and cast to a's dtype (a's old values get no gradient)
def copy(a, src):
    src = as_tensor_arg("copy_", src, "src")
    if not _expandable(src.shape, a.shape):
        raise RuntimeError(f"copy_: the source of shape {shape_str(src.shape)} cannot be broadcast to the "
                           f"destination shape {shape_str(a.shape)}.")
    out = make_tensor(np.broadcast_to(src._data, a.shape).astype(a._data.dtype))
    if needs_grad(a, src):
        record("copy", out, (a, src))
    return out


def copy_(a, src, non_blocking=False):
    src = as_tensor_arg("copy_", src, "src")
    return _inplace("copy_", a, lambda s: _copy_as(s, src), src)


def _copy_as(s, src):
    out = copy(s, src)
    return out if out.dtype is s.dtype else to(out, s.dtype)


def index_put_(a, key, value, accumulate=False):
    """`a[key] = value` (the tensor's __setitem__)."""
    _check_tensor("index_put_", a)
    parsed = parse_index(a, key)
    if isinstance(value, np.ndarray):
        value = as_tensor_arg("index_put_", value)
    if isinstance(value, Tensor) and value.dtype.category > a.dtype.category:
        raise RuntimeError(f"index_put_: cannot write {value.dtype} values into a {a.dtype} tensor in place.")
    return _inplace("index_put_", a, lambda s: index_put(s, parsed, value, accumulate, _parsed=True), value)


# ===== the engine's own entry points on tensors ================================================================

def numel(a):
    return a.numel()


true_divide = div
negative = neg


def mm(a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got {shape_str(a.shape)} and {shape_str(b.shape)}.")
    return matmul(a, b)


def bmm(a, b):
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors, got {shape_str(a.shape)} and {shape_str(b.shape)}.")
    return matmul(a, b)


def take(a, index):
    return globals()["index"](reshape(a, -1), index)


def is_tensor(x):
    return isinstance(x, Tensor)


from .ops_nn import (softmax, log_softmax, cross_entropy, nll_loss, binary_cross_entropy_with_logits,  # noqa: E402
                     embedding, dropout, conv2d, im2col, col2im, max_pool2d, avg_pool2d, layer_norm)

# ===== Tensor methods ==========================================================================================
_METHODS = (
    "add", "sub", "mul", "div", "neg", "pow", "matmul", "maximum", "minimum", "clamp", "clip", "exp", "log", "sqrt",
    "rsqrt", "abs", "sin", "cos", "tanh", "sigmoid", "relu", "sign", "erf", "square", "reciprocal", "sum",
    "mean", "var", "std", "amax", "amin", "max", "min", "argmax", "argmin", "logsumexp", "eq", "ne", "lt", "le",
    "gt", "ge", "greater", "less", "greater_equal", "less_equal", "not_equal", "equal", "allclose", "isclose",
    "logical_not", "logical_and", "logical_or", "logical_xor", "isnan", "isinf", "isfinite", "any", "all",
    "floor_divide", "remainder", "floor", "ceil", "round", "count_nonzero", "nonzero", "clone", "contiguous",
    "reshape", "view", "view_as", "reshape_as", "flatten", "unflatten", "ravel", "transpose", "swapaxes", "t",
    "permute", "movedim", "expand", "expand_as", "broadcast_to", "squeeze", "unsqueeze", "split", "chunk", "unbind",
    "narrow", "select", "gather", "scatter_add", "index_select", "take_along_dim", "masked_fill", "add_", "sub_",
    "mul_", "div_", "pow_", "clamp_", "masked_fill_", "neg_", "exp_", "relu_", "sigmoid_", "tanh_", "fill_",
    "zero_", "copy_", "index_put_", "softmax", "log_softmax", "true_divide", "negative", "mm", "bmm", "take",
)
for _name in _METHODS:
    setattr(Tensor, _name, globals()[_name])


def _where_method(self, condition, other):
    return where(condition, self, other)


Tensor.where = _where_method
Tensor.index_put = lambda self, indices, values, accumulate=False: index_put(self, tuple(indices), values, accumulate)
