"""Reference engine: torch names that only this engine has (the C++ engine lacks them; see the parity test
tests/test_parity.py). Each is a small composite of the ops in ops_bind.py, or a plain numpy computation for the
ops torch gives no useful gradient (floor, ceil, round, floor_divide, remainder, nonzero, comparisons).

They have no C++ twin: keep this file short, and move a name into ops_bind.py when the C++ engine gains it.
"""
import numpy as np

from . import ops_bind as _b
from . import ops_math as _m
from . import ops_shape as _s
from . import tensor_bind as _tb
from .tensor import Tensor, make_tensor, wrap_dim


# ----- comparisons under torch's long names, and closeness ----------------------------------------------------
greater, greater_equal, less, less_equal, not_equal = _b.gt, _b.ge, _b.lt, _b.le, _b.ne


@_b.takes_tensors("input")
def isinf(input):
    return make_tensor(np.isinf(input._data))


@_b.takes_tensors("input", "other")
def isclose(input, other, rtol=1e-5, atol=1e-8, equal_nan=False):
    return make_tensor(np.isclose(input._data, other._data, rtol=rtol, atol=atol, equal_nan=equal_nan))


@_b.takes_tensors("input", "other")
def allclose(input, other, rtol=1e-5, atol=1e-8, equal_nan=False):
    return bool(np.allclose(input._data, other._data, rtol=rtol, atol=atol, equal_nan=equal_nan))


@_b.takes_tensors("input", "other")
def equal(input, other):
    return input.shape == other.shape and bool(np.array_equal(input._data, other._data))


@_b.takes_tensors("input")
def all(input, dim=None, keepdim=False):
    return _tb._all(input, dim, keepdim)


@_b.takes_tensors("input")
def any(input, dim=None, keepdim=False):
    return _tb._any(input, dim, keepdim)


@_b.takes_tensors("input")
def count_nonzero(input, dim=None):
    return _b.sum(_b.ne(input, 0), dim)


@_b.takes_tensors("input")
def nonzero(input, as_tuple=False):
    idx = np.nonzero(input._data)
    if as_tuple:
        return tuple(make_tensor(i.astype(np.int64)) for i in idx)
    return make_tensor(np.stack(idx, axis=1).astype(np.int64) if idx else np.zeros((1, 0), np.int64))


# ----- rounding and integer division (no gradient, as their derivative is zero almost everywhere) ---------------
def _no_grad_binary(kernel, op):
    def fn(input, other):
        x, y = _b._operands(input, other, op)
        dtype = _m.result_type(x, y)
        with np.errstate(all="ignore"):
            return make_tensor(np.asarray(kernel(x._data.astype(dtype.np), y._data.astype(dtype.np)), dtype.np))
    fn.__name__ = fn.__qualname__ = op
    return fn


floor_divide = _no_grad_binary(np.floor_divide, "floor_divide")
remainder = _no_grad_binary(np.remainder, "remainder")


@_b.takes_tensors("input")
def floor(input): return make_tensor(np.floor(input._data))
@_b.takes_tensors("input")
def ceil(input): return make_tensor(np.ceil(input._data))
@_b.takes_tensors("input")
def round(input): return make_tensor(np.round(input._data))


# ----- composites ------------------------------------------------------------------------------------------------
@_b.takes_tensors("input")
def reciprocal(input):
    return _b.div(1.0, input)


@_b.takes_tensors("input")
def ravel(input):
    return _s.reshape(input, (-1,))


@_b.takes_tensors("input")
def movedim(input, source, destination):
    src, dst = wrap_dim(source, input.ndim, "movedim"), wrap_dim(destination, input.ndim, "movedim")
    order = [d for d in range(input.ndim) if d != src]
    order.insert(dst, src)
    return _s.permute(input, order)


@_b.takes_tensors("input")
def unflatten(input, dim, sizes):
    d = wrap_dim(dim, input.ndim, "unflatten")
    return _s.reshape(input, input.shape[:d] + tuple(sizes) + input.shape[d + 1:])


@_b.takes_tensors("input", "indices")
def take_along_dim(input, indices, dim):
    return _b.gather(input, dim, indices)


@_b.takes_tensors("input", "index", "src")
def scatter_add(input, dim, index, src):
    """input + (src scatter-added at index along dim)."""
    d = wrap_dim(dim, input.ndim, "scatter_add")
    return _m.add(input, _s.scatter_add(src, d, index, input.shape))


@_b.takes_tensors("input")
def index_put(input, indices, values, accumulate=False):
    positions = _tb.index_positions(input.shape, tuple(indices))
    v = _b.as_operand_or_throw(values, input, "index_put")
    if accumulate:
        return _m.add(input, _s.put_add(_s.expand(v, positions.shape), positions, input.shape))
    return _s.put(input, positions, v)


@_b.takes_tensors("input")
def clone(input):
    return _s.clone(input)


@_b.takes_tensors("input")
def detach(input):
    return input.detach()


concatenate = _b.cat


@_b.takes_tensors("input")
def is_floating_point(input):
    return input.is_floating_point()


# ----- in-place forms ------------------------------------------------------------------------------------------
def _inplace_unary(op, f):
    @_b.takes_tensors("self")
    def method(self):
        _tb.inplace_apply(self, make_tensor(np.zeros((), self._data.dtype)), op, lambda a, _: f(a))
        return self
    method.__name__ = method.__qualname__ = op
    return method


exp_, neg_, relu_ = _inplace_unary("exp_", _m.exp), _inplace_unary("neg_", _m.neg), _inplace_unary("relu_", _m.relu)
sigmoid_, tanh_ = _inplace_unary("sigmoid_", _m.sigmoid), _inplace_unary("tanh_", _m.tanh)
clamp_ = _b.takes_tensors("self")(_tb.clamp_)
zero_ = _b.takes_tensors("self")(_tb.zero_)
fill_ = _b.takes_tensors("self")(_tb.fill_)


@_b.takes_tensors("input")
def index_put_(input, indices, values, accumulate=False):
    v = _b.as_operand_or_throw(values, input, "index_put_")
    _tb.inplace_apply(input, v, "index_put_", lambda a, b: index_put(a, indices, b, accumulate))
    return input


MODULE_NAMES = (
    "greater", "greater_equal", "less", "less_equal", "not_equal", "isinf", "isclose", "allclose", "equal", "all",
    "any", "count_nonzero", "nonzero", "floor_divide", "remainder", "floor", "ceil", "round", "reciprocal", "ravel",
    "movedim", "unflatten", "take_along_dim", "scatter_add", "index_put", "clone", "detach", "concatenate",
    "is_floating_point", "exp_", "neg_", "relu_", "sigmoid_", "tanh_", "clamp_", "zero_", "fill_", "index_put_",
)
TENSOR_NAMES = (
    "greater", "greater_equal", "less", "less_equal", "not_equal", "isinf", "isclose", "allclose", "equal",
    "count_nonzero", "nonzero", "floor_divide", "remainder", "floor", "ceil", "round", "reciprocal", "ravel",
    "movedim", "unflatten", "take_along_dim", "scatter_add", "index_put", "exp_", "neg_", "relu_", "sigmoid_",
    "tanh_", "index_put_",
)

# Not attached to Tensor nor exported at the root: the two engines keep the same public names (tests/test_parity.py),
# and these have no C++ twin yet. Call them as dyngrad.reference.ops_extra.NAME(tensor, ...).
