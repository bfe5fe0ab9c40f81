"""Python-side conveniences of the C++ Tensor: what is naturally Python and off the hot path.

repr, tolist, iteration, numpy's __array__, torch's Size and (values, indices) named tuples, and the positions
behind advanced indexing (numpy computes them, so dyngrad's indexing follows numpy's rules exactly).
"""
import collections
import re

import numpy as np


class Size(tuple):
    """A tensor's shape: a tuple of ints, as torch.Size."""

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return "dyngrad.Size([" + ", ".join(str(s) for s in self) + "])"


return_max = collections.namedtuple("max", ["values", "indices"])
return_min = collections.namedtuple("min", ["values", "indices"])


class RemovableHandle:
    """Returned by register_hook; remove() unregisters the hook."""

    def __init__(self, tensor, hook_id):
        self._tensor, self._id = tensor, hook_id

    def remove(self):
        if self._tensor is not None:
            self._tensor._remove_hook(self._id)
            self._tensor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _as_index_array(item):
    """An index item as numpy understands it (tensors become arrays)."""
    if hasattr(item, "_numpy_view"):
        return np.asarray(item._numpy_view())
    if isinstance(item, list):
        return np.asarray([_as_index_array(i) for i in item]) if item and hasattr(item[0], "_numpy_view") else np.asarray(item)
    return item


def index_positions(shape, index):
    """Flat positions (int64, in row-major order of `shape`) of the elements that `index` selects.

    Each dim's coordinate grid is a broadcast view (no memory); indexing it with the user's index gives, per dim,
    the coordinates of the selected elements, so numpy's rules (advanced index placement, bool masks, None,
    Ellipsis) apply unchanged.
    """
    items = index if isinstance(index, tuple) else (index,)
    items = tuple(_as_index_array(i) for i in items)
    for i in items:
        if isinstance(i, np.ndarray) and i.dtype.kind not in "biu":
            raise IndexError(f"tensors used as indices must be int64 or bool, got {i.dtype}.")
        if isinstance(i, float):
            raise IndexError("indices must be ints, slices, None, Ellipsis, or int/bool tensors; got a float.")
    ndim = len(shape)
    strides = [1] * ndim
    for d in range(ndim - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    positions = None
    try:
        for d in range(ndim):
            grid = np.arange(shape[d], dtype=np.int64).reshape([1] * d + [-1] + [1] * (ndim - d - 1))
            coord = np.broadcast_to(grid, shape)[items]
            term = coord * strides[d]
            positions = term if positions is None else positions + term
        if ndim == 0:
            positions = np.zeros((), dtype=np.int64)[items]
    except IndexError as exc:
        # numpy's "index 5 is out of bounds for axis 0 with size 3" in the shared wording (docs/design.md)
        found = re.match(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)", str(exc))
        if found:
            i, d, n = found.groups()
            raise IndexError(f"index {i} is out of range for dimension {d} of size {n}.") from None
        raise IndexError(f"index out of range for a tensor of shape {tuple(shape)}: {exc}") from None
    from . import _C
    return _C.from_numpy(np.asarray(positions, dtype=np.int64, order="C"))  # asarray keeps 0-d (ascontiguousarray makes it 1-d)


def tensor_from_data(data, dtype=None, requires_grad=False):
    """dyngrad.tensor(data): always a copy. Python floats become float32, ints int64, bools bool."""
    from . import _C
    if isinstance(data, _C.Tensor):
        t = data.detach().clone()
        if dtype is not None:
            t = t.to(dtype)
        return t.requires_grad_(requires_grad) if requires_grad else t
    if isinstance(data, (list, tuple)) and any(isinstance(x, _C.Tensor) for x in _flatten(data)):
        data = _nested_items(data)
    arr = np.array(data)
    if dtype is not None:
        arr = arr.astype(_numpy_dtype(dtype))
    elif arr.dtype.kind == "f":
        # numpy arrays keep float64 (as torch.tensor(ndarray)); Python floats become float32
        if not isinstance(data, np.ndarray) and not isinstance(data, np.floating):
            arr = arr.astype(np.float32)
    elif arr.dtype.kind in "iu":
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "b":
        pass
    elif arr.dtype == object or arr.dtype.kind in "USV":
        raise TypeError(f"tensor(): could not convert data of type {type(data).__name__} to a tensor of numbers.")
    else:
        arr = arr.astype(np.float32)
    if arr.dtype == np.float16:
        arr = arr.astype(np.float32)
    return _C._tensor_from_numpy_copy(np.asarray(arr, order="C"), requires_grad)


def _flatten(data):
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        else:
            yield x


def _nested_items(data):
    if isinstance(data, (list, tuple)):
        return [_nested_items(x) for x in data]
    return data.item() if hasattr(data, "item") else data


def _numpy_dtype(dtype):
    from . import _C
    if isinstance(dtype, _C.dtype):
        return np.dtype(dtype.name)
    if dtype is float:
        return np.dtype(np.float64)
    if dtype is int:
        return np.dtype(np.int64)
    if dtype is bool:
        return np.dtype(np.bool_)
    return np.dtype(dtype)


# ---- methods attached to the C++ Tensor type ----

def _format_values(arr):
    if arr.dtype.kind == "f":
        finite = arr[np.isfinite(arr)]
        integral = finite.size == 0 or np.all(finite == np.round(finite))
        big = finite.size and (np.abs(finite).max() >= 1e8 or (np.abs(finite[finite != 0]).min() < 1e-4 if np.any(finite != 0) else False))
        if integral and not big:
            formatter = {"float": lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)}
        elif big:
            formatter = {"float": lambda v: f"{v:.4e}"}
        else:
            formatter = {"float": lambda v: f"{v:.4f}"}
        return np.array2string(arr, separator=", ", formatter=formatter, threshold=1000, edgeitems=3,
                               prefix="tensor(", max_line_width=100)
    if arr.dtype.kind == "b":
        width = 4 if arr.all() else 5  # True is padded to False's width when both occur: tensor([ True, False])
        return np.array2string(arr, separator=", ", formatter={"bool": lambda v: ("True" if v else "False").rjust(width)},
                               threshold=1000, prefix="tensor(")
    return np.array2string(arr, separator=", ", threshold=1000, prefix="tensor(")


def tensor_repr(self):
    arr = self._numpy_view()
    body = _format_values(arr) if arr.size or arr.ndim else str(arr.tolist())
    if arr.size == 0:
        body = "[]"
    extras = []
    name = self.dtype.name
    if self.numel() == 0 and self.ndim != 1:
        extras.append(f"size={tuple(self.shape)}")
    if name not in ("float32", "int64", "bool"):
        extras.append(f"dtype=dyngrad.{name}")
    if self.grad_fn is not None:
        extras.append(f"grad_fn=<{self.grad_fn.name()}>")
    elif self.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"


def tolist(self):
    return self._numpy_view().tolist()


def _iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter(self.unbind(0))


def _array(self, dtype=None, copy=None):
    arr = self._numpy_view()
    if dtype is not None:
        arr = arr.astype(dtype)
    elif copy:
        arr = arr.copy()
    return arr


def _any(self, dim=None, keepdim=False):
    return (self != 0).sum(dim, keepdim=keepdim) > 0 if dim is not None else (self != 0).sum() > 0


def _all(self, dim=None, keepdim=False):
    if dim is None:
        return (self == 0).sum() == 0
    return (self == 0).sum(dim, keepdim=keepdim) == 0


def _reduce(self):
    from . import tensor
    return (_rebuild, (self.detach().numpy().copy(), self.requires_grad))


def _rebuild(array, requires_grad):
    from . import _C
    return _C._tensor_from_numpy_copy(np.asarray(array, order="C"), requires_grad)


_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "int64": "LongTensor", "bool": "BoolTensor"}


def _type(self, dtype=None):
    if dtype is None:
        return "dyngrad." + _TYPE_NAMES[self.dtype.name]
    return self.to(dtype)


def install(tensor_type):
    tensor_type.is_cuda = property(lambda self: False)
    tensor_type.ndimension = lambda self: self.ndim
    tensor_type.type = _type
    tensor_type.__repr__ = tensor_repr
    tensor_type.__str__ = tensor_repr
    tensor_type.tolist = tolist
    tensor_type.__iter__ = _iter
    tensor_type.__array__ = _array
    tensor_type.__array_priority__ = 1000  # numpy defers to our reflected operators
    tensor_type.any = _any
    tensor_type.all = _all
    tensor_type.__reduce__ = _reduce
    tensor_type.__deepcopy__ = lambda self, memo: _rebuild(self.detach().numpy().copy(), self.requires_grad) \
        if self.is_leaf else self.clone()
