"""Reference engine: the Tensor's operators, in-place methods, indexing and op methods. Mirrors
csrc/bindings/tensor_bind.cpp (operators, in-place, indexing) and the `def_both` method half of
csrc/bindings/ops_bind.cpp. Importing this module installs everything on Tensor.
"""
import numpy as np

from . import dtypes as _dt
from . import ops_bind as _b
from . import ops_math as _m
from . import ops_shape as _s
from .errors import shape_str
from .grad_mode import is_grad_enabled, no_grad
from .tensor import Tensor, make_tensor, broadcast_shapes


# ===== operators ===============================================================================================

def _forward_op(f):
    def op(self, other):
        o = _b.as_operand(other, self)
        return NotImplemented if o is None else f(self, o)
    return op


def _reflected_op(f):
    def op(self, other):
        o = _b.as_operand(other, self)
        return NotImplemented if o is None else f(o, self)
    return op


def _pow(self, other):
    if isinstance(other, (float, int)) and not isinstance(other, bool):
        return _m.pow_scalar(self, float(other))
    o = _b.as_operand(other, self)
    return NotImplemented if o is None else _m.pow(self, o)


def _invert(self):
    if self.dtype is not _dt.bool_:
        raise TypeError(f"~ is only supported for bool tensors here, got {self.dtype.name}.")
    return _m.logical_not(self)


def _compare_op(name):
    return _forward_op(lambda a, b: _m.compare(name, a, b))


OPERATORS = {
    "__add__": _forward_op(_m.add), "__radd__": _reflected_op(_m.add),
    "__sub__": _forward_op(_m.sub), "__rsub__": _reflected_op(_m.sub),
    "__mul__": _forward_op(_m.mul), "__rmul__": _reflected_op(_m.mul),
    "__truediv__": _forward_op(_m.div), "__rtruediv__": _reflected_op(_m.div),
    "__matmul__": _forward_op(_m.matmul), "__rmatmul__": _reflected_op(_m.matmul),
    "__pow__": _pow, "__rpow__": _reflected_op(_m.pow),
    "__neg__": _m.neg, "__pos__": lambda self: self, "__abs__": _m.abs, "__invert__": _invert,
    "__and__": _forward_op(_m.logical_and), "__rand__": _reflected_op(_m.logical_and),
    "__or__": _forward_op(_m.logical_or), "__ror__": _reflected_op(_m.logical_or),
    "__xor__": _forward_op(_m.logical_xor), "__rxor__": _reflected_op(_m.logical_xor),
    "__eq__": _compare_op("eq"), "__ne__": _compare_op("ne"), "__lt__": _compare_op("lt"),
    "__le__": _compare_op("le"), "__gt__": _compare_op("gt"), "__ge__": _compare_op("ge"),
}


# ===== autograd-aware in-place ops =============================================================================

def inplace_apply(self, other, op, f):
    """self (op)= other: recorded as torch records in-place ops when grad is involved (grad_fn moves to the new
    node); otherwise computed and written straight into self's memory."""
    base = self._base
    if is_grad_enabled() and (self.requires_grad or other.requires_grad or (base is not None and base.requires_grad)):
        before = _s.inplace_input(self, op, other.requires_grad)
        _s.assign_inplace(self, f(before, other), op)
        return
    r = f(self, other)
    if r.shape != self.shape:
        raise RuntimeError(f"{op}: the result of shape {shape_str(r.shape)} does not fit the tensor written in place, "
                           f"of shape {shape_str(self.shape)}.")
    if r.dtype.is_floating_point and not self.dtype.is_floating_point:
        raise RuntimeError(f"{op}: the result type {r.dtype.name} can't be cast to the tensor's type "
                           f"{self.dtype.name}.")
    _s._write(self, r, op)


def _inplace_op(op, f):
    def method(self, other):
        o = _b.as_operand(other, self)
        if o is None:
            return NotImplemented
        inplace_apply(self, o, op, f)
        return self
    return method


def add_(self, other, *, alpha=None):
    o = _b.as_operand_or_throw(other, self, "add_")
    if alpha is not None:
        o = _m.mul(o, _b.as_operand_or_throw(alpha, o, "add_"))
    inplace_apply(self, o, "add_", _m.add)
    return self


def sub_(self, other, *, alpha=None):
    o = _b.as_operand_or_throw(other, self, "sub_")
    if alpha is not None:
        o = _m.mul(o, _b.as_operand_or_throw(alpha, o, "sub_"))
    inplace_apply(self, o, "sub_", _m.sub)
    return self


def clamp_(self, min=None, max=None):
    lo, hi = _b._opt_float(min), _b._opt_float(max)
    if is_grad_enabled() and (self.requires_grad or (self._base is not None and self._base.requires_grad)):
        before = _s.inplace_input(self, "clamp_", False)
        _s.assign_inplace(self, _m.clamp(before, lo, hi), "clamp_")
    else:
        _s._write(self, _m.clamp(self, lo, hi), "clamp_")
    return self


def zero_(self):
    _s.zero_(self)
    return self


def fill_(self, value):
    v = value.item() if isinstance(value, Tensor) else value
    # a Python int stays exact (through float(), 2**62 + 1 lost its low bits), as scalar_like_int in C++
    _s.fill_(self, int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else float(v))
    return self


def copy_(self, src):
    _s.copy_(self, _b.as_operand_or_throw(src, self, "copy_"))
    return self


@_b.takes_tensors("mask")
def masked_fill_(self, mask, value):
    v = _b.as_operand_or_throw(value, self, "masked_fill_")
    base = self._base
    if is_grad_enabled() and (self.requires_grad or v.requires_grad or (base is not None and base.requires_grad)):
        before = _s.inplace_input(self, "masked_fill_", v.requires_grad)
        _s.assign_inplace(self, _s.masked_fill(before, mask, v), "masked_fill_")
    else:
        _s._write(self, _s.masked_fill(self, mask, v), "masked_fill_")
    return self


# nn.init's fills: never recorded (torch runs them under no_grad)
def uniform_(self, a=0.0, b=1.0):
    from .ops_creation import generator
    _s._write(self, make_tensor(generator().uniform(a, b, self.shape)), "uniform_")
    return self


def normal_(self, mean=0.0, std=1.0):
    from .ops_creation import generator
    _s._write(self, make_tensor(generator().standard_normal(self.shape) * std + mean), "normal_")
    return self


INPLACE = {
    "__iadd__": _inplace_op("add_", _m.add), "__isub__": _inplace_op("sub_", _m.sub),
    "__imul__": _inplace_op("mul_", _m.mul), "__itruediv__": _inplace_op("div_", _m.div),
    "add_": add_, "sub_": sub_,
    "mul_": lambda self, other: _inplace_or_throw(self, other, "mul_", _m.mul),
    "div_": lambda self, other: _inplace_or_throw(self, other, "div_", _m.div),
    "pow_": lambda self, other: _inplace_or_throw(self, other, "pow_", _m.pow),
    "clamp_": clamp_, "zero_": zero_, "fill_": fill_, "copy_": copy_, "masked_fill_": masked_fill_,
    "uniform_": uniform_, "normal_": normal_,
}


def _inplace_or_throw(self, other, op, f):
    inplace_apply(self, _b.as_operand_or_throw(other, self, op), op, f)
    return self


# ===== indexing ================================================================================================

def _is_basic_item(o):
    return o is None or o is Ellipsis or isinstance(o, slice) or (isinstance(o, (int, np.integer))
                                                                 and not isinstance(o, (bool, np.bool_)))


def _is_basic_index(idx):
    if isinstance(idx, tuple):
        return all(_is_basic_item(i) for i in idx)
    return _is_basic_item(idx)


def basic_index(self, idx):
    """ints, slices, None and Ellipsis: always a view of self."""
    items = idx if isinstance(idx, tuple) else (idx,)
    consumed, seen_ellipsis = 0, False
    for item in items:
        if item is Ellipsis:
            if seen_ellipsis:
                raise IndexError("an index can only have a single ellipsis ('...').")
            seen_ellipsis = True
        elif item is not None:
            consumed += 1
    if consumed > self.ndim:
        raise IndexError(f"too many indices for a tensor of dimension {self.ndim} (shape {shape_str(self.shape)}): "
                         f"got {consumed}.")
    r, d = self, 0
    for item in items:
        if item is None:
            r = _s.unsqueeze(r, d)
            d += 1
        elif item is Ellipsis:
            d += self.ndim - consumed
        elif isinstance(item, slice):
            if item.step is not None and item.step <= 0:
                raise ValueError(f"slicing with a step of {item.step}: step must be greater than zero (negative "
                                 "steps are not supported, as in torch).")
            start, stop, step = item.indices(r.shape[d])
            r = _s.slice(r, d, start, stop, step)
            d += 1
        else:
            i, n = int(item), r.shape[d]
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of range for dimension {d} of size {n}.")
            r = _s.select(r, d, i)
    if r is self:
        r = _s.reshape(self, self.shape)      # x[...] is still a new view
    return r


def _as_index_array(item):
    if isinstance(item, Tensor):
        return item._data
    if isinstance(item, list):
        return np.asarray([_as_index_array(i) for i in item]) if item and isinstance(item[0], Tensor) else \
            np.asarray(item, dtype=None if item else np.int64)
    return item


def index_positions(shape, idx):
    """Flat positions (int64, row-major in `shape`) of the elements that `idx` selects. Each dim's coordinate grid
    is a broadcast view; indexing it with the user's index gives the coordinates of the selected elements, so
    numpy's rules (advanced index placement, bool masks, None, Ellipsis) apply unchanged."""
    items = tuple(_as_index_array(i) for i in (idx if isinstance(idx, tuple) else (idx,)))
    for i in items:
        if isinstance(i, np.ndarray) and i.dtype.kind not in "biu":
            raise IndexError(f"tensors used as indices must be int64 or bool, got {_dt.from_numpy_dtype(i.dtype)}.")
        if isinstance(i, float):
            raise IndexError("indices must be ints, slices, None, Ellipsis, or int/bool tensors; got a float.")
    ndim = len(shape)
    strides = [1] * ndim
    for d in range(ndim - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    positions = np.zeros((), dtype=np.int64)[items] if ndim == 0 else None
    try:
        for d in range(ndim):
            grid = np.arange(shape[d], dtype=np.int64).reshape([1] * d + [-1] + [1] * (ndim - d - 1))
            term = np.broadcast_to(grid, shape)[items] * strides[d]
            positions = term if positions is None else positions + term
    except IndexError as exc:
        import re
        found = re.match(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)", str(exc))
        if found:
            i, d, n = found.groups()
            raise IndexError(f"index {i} is out of range for dimension {d} of size {n}.") from None
        raise IndexError(f"index out of range for a tensor of shape {tuple(shape)}: {exc}") from None
    return make_tensor(np.array(positions, dtype=np.int64))


def getitem(self, idx):
    if _is_basic_index(idx):
        return basic_index(self, idx)
    return _s.take(self, index_positions(self.shape, idx))


def setitem(self, idx, value):
    v = _b.as_operand_or_throw(value, self, "__setitem__")
    base = self._base
    recording = is_grad_enabled() and (self.requires_grad or v.requires_grad or
                                       (base is not None and base.requires_grad))
    if not recording and _is_basic_index(idx):
        with no_grad():
            window = basic_index(self, idx)
        window_shape = window.shape
        if broadcast_shapes(window_shape, v.shape, "__setitem__") != window_shape:
            raise RuntimeError(f"__setitem__: a value of shape {shape_str(v.shape)} cannot be written into a window "
                               f"of shape {shape_str(window_shape)}.")
        _s._write(window, v, "__setitem__")
        return
    pos = index_positions(self.shape, idx)
    if not recording:
        _s._write(self, _s.put(self, pos, v), "__setitem__")
        return
    before = _s.inplace_input(self, "__setitem__", v.requires_grad)
    _s.assign_inplace(self, _s.put(before, pos, v), "__setitem__")


# ===== op methods (def_both in ops_bind.cpp) and conveniences ==================================================

def _reshape(self, *shape): return _s.reshape(self, _b.parse_shape_args(shape, "reshape"))
def _permute(self, *dims): return _s.permute(self, _b.parse_shape_args(dims, "permute"))
def _expand(self, *sizes): return _s.expand(self, _b.parse_shape_args(sizes, "expand"))


@_b.takes_tensors("other")
def expand_as(self, other): return _s.expand(self, other.shape)


@_b.takes_tensors("other")
def view_as(self, other): return _s.view(self, other.shape)


@_b.takes_tensors("other")
def reshape_as(self, other): return _s.reshape(self, other.shape)


@_b.takes_tensors("other")
def type_as(self, other): return _s.to_dtype(self, other.dtype)


@_b.takes_tensors("condition")
def where(self, condition, other): return _m.where(condition, self, _b.as_operand_or_throw(other, self, "where"))


def _contains(self, element):
    """`element in t`: whether some entry equals it (a number or a tensor), as torch."""
    if not isinstance(element, (Tensor, int, float, bool)):
        raise RuntimeError(f"__contains__: expected a Tensor or a number, got {type(element).__name__}.")
    return bool(_any(_b.eq(self, element)).item())
def _clone(self): return _s.clone(self)
def _contiguous(self): return _s.contiguous(self)


def _view(self, *shape):
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer, tuple, list)):
        return _s.to_dtype(self, _dt.to_dtype(shape[0], "view"))     # view(dtype): a cast here
    return _s.view(self, _b.parse_shape_args(shape, "view"))


def _any(self, dim=None, keepdim=False):
    nonzero = _m.compare("ne", self, make_tensor(np.zeros((), self._data.dtype)))
    return _m.compare("gt", _b.sum(nonzero, dim, keepdim), make_tensor(np.zeros((), np.int64)))


def _all(self, dim=None, keepdim=False):
    zero = _m.compare("eq", self, make_tensor(np.zeros((), self._data.dtype)))
    return _m.compare("eq", _b.sum(zero, dim, keepdim), make_tensor(np.zeros((), np.int64)))


METHODS = {
    # the functions ops_bind.cpp binds with def_both (first argument self)
    **{name: getattr(_b, name) for name in (
        "add", "sub", "mul", "div", "true_divide", "pow", "maximum", "minimum", "clamp", "clip", "neg", "negative",
        "exp", "log", "sqrt", "rsqrt", "abs", "sin", "cos", "tanh", "sigmoid", "relu", "sign", "erf",
        "logical_not", "isnan", "isfinite", "square", "leaky_relu", "gelu", "softplus",
        "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
        "sum", "mean", "var", "std", "max", "min", "amax", "amin", "argmax", "argmin", "logsumexp",
        "matmul", "mm", "bmm", "flatten", "transpose", "swapaxes", "t", "squeeze", "unsqueeze", "split", "chunk",
        "unbind", "narrow", "select", "gather", "index_select", "take", "masked_fill", "softmax", "log_softmax")},
    # Tensor-only forms
    "reshape": _reshape, "view": _view, "view_as": view_as, "reshape_as": reshape_as, "permute": _permute,
    "expand": _expand, "expand_as": expand_as, "type_as": type_as, "where": where, "clone": _clone,
    "contiguous": _contiguous, "any": _any, "all": _all, "__getitem__": getitem, "__setitem__": setitem,
    "__contains__": _contains,
}


def install(cls):
    for table in (OPERATORS, INPLACE, METHODS):
        for name, fn in table.items():
            setattr(cls, name, fn)


install(Tensor)
