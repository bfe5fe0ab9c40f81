"""Indexing: t[idx] and t[idx] = v with ints, slices, None, Ellipsis, int/bool tensors, lists and arrays, and the
index ops gather, index_select, take, masked_fill.

Basic indices (ints, slices, None, Ellipsis) make views. Anything else is turned into the flat positions of the
selected elements (numpy computes them, so numpy's rules for advanced indexing apply) and read with the core's
take or written with put. On the C++ engine, t[basic] is answered by fast_paths.cpp with the same core calls.
"""
import re

import numpy as np

from .. import _C
from .args import Tensor, operand_or_throw, shape_str, tensor_arg, to_int


def _is_basic_item(o):
    return o is None or o is Ellipsis or isinstance(o, slice) or (
        isinstance(o, (int, np.integer)) and not isinstance(o, (bool, np.bool_)))


def is_basic_index(idx):
    if isinstance(idx, tuple):
        return all(_is_basic_item(i) for i in idx)
    return _is_basic_item(idx)


def basic_index(self, idx):
    """ints, slices (step > 0), None and Ellipsis: always a view of self."""
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
            r = _C.unsqueeze(r, d)
            d += 1
        elif item is Ellipsis:
            d += self.ndim - consumed
        elif isinstance(item, slice):
            if item.step is not None and item.step <= 0:
                raise ValueError(f"slicing with a step of {item.step}: step must be greater than zero (negative "
                                 "steps are not supported, as in torch).")
            start, stop, step = item.indices(r.shape[d])
            r = _C.slice(r, d, start, stop, step)
            d += 1
        else:
            i, n = int(item), r.shape[d]
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of range for dimension {d} of size {n}.")
            r = _C.select(r, d, i)
    if r is self:
        r = _C.reshape(self, tuple(self.shape))      # x[...] is still a new view
    return r


def _as_index_array(item):
    """An index item as numpy understands it (tensors become arrays)."""
    if isinstance(item, Tensor):
        return item._numpy_view()
    if isinstance(item, list):
        if item and any(isinstance(i, Tensor) for i in item):
            return np.asarray([_as_index_array(i) for i in item])
        return np.asarray(item, dtype=None if item else np.int64)
    return item


def index_positions(shape, idx):
    """Flat positions (int64, in row-major order of `shape`) of the elements that `idx` selects.

    Each dim's coordinate grid is a broadcast view (no memory); indexing it with the user's index gives, per dim,
    the coordinates of the selected elements, so numpy's rules (advanced index placement, bool masks, None,
    Ellipsis) apply unchanged."""
    items = tuple(_as_index_array(i) for i in (idx if isinstance(idx, tuple) else (idx,)))
    for i in items:
        if isinstance(i, np.ndarray) and i.dtype.kind not in "biu":
            raise IndexError(f"tensors used as indices must be int64 or bool, got {i.dtype.name}.")
        if isinstance(i, float):
            raise IndexError("indices must be ints, slices, None, Ellipsis, or int/bool tensors; got a float.")
    ndim = len(shape)
    strides = [1] * ndim
    for d in range(ndim - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    try:
        positions = np.zeros((), dtype=np.int64)[items] if ndim == 0 else None
        for d in range(ndim):
            grid = np.arange(shape[d], dtype=np.int64).reshape([1] * d + [-1] + [1] * (ndim - d - 1))
            term = np.broadcast_to(grid, shape)[items] * strides[d]
            positions = term if positions is None else positions + term
    except IndexError as exc:
        # numpy's "index 5 is out of bounds for axis 0 with size 3" in the shared wording (docs/design.md)
        found = re.match(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)", str(exc))
        if found:
            i, d, n = found.groups()
            raise IndexError(f"index {i} is out of range for dimension {d} of size {n}.") from None
        raise IndexError(f"index out of range for a tensor of shape {shape_str(shape)}: {exc}") from None
    return _C.copy_from_numpy(np.asarray(positions, dtype=np.int64), False)


def getitem(self, idx):
    if is_basic_index(idx):
        return basic_index(self, idx)
    return _C.take(self, index_positions(tuple(self.shape), idx))


def setitem(self, idx, value):
    """self[idx] = value: an in-place write, recorded when grad is involved (Note [In-place writes into views])."""
    v = operand_or_throw(value, self, "__setitem__", "value")
    base = self._base
    recording = _C.is_grad_enabled() and (self.requires_grad or v.requires_grad or
                                          (base is not None and base.requires_grad))
    if not recording and is_basic_index(idx):      # nothing to record: write into the window of self only
        from ..autograd.grad_mode import no_grad
        with no_grad():
            window = basic_index(self, idx)
        from .args import broadcast_shapes
        if broadcast_shapes(window.shape, v.shape, "__setitem__") != tuple(window.shape):
            raise RuntimeError(f"__setitem__: a value of shape {shape_str(v.shape)} cannot be written into a window "
                               f"of shape {shape_str(window.shape)}.")
        _C.copy_(window, v)
        return
    before = _C.inplace_input(self, "__setitem__", v.requires_grad)
    positions = index_positions(tuple(self.shape), idx)
    _C.assign_inplace(self, _C.put(before, positions, v), "__setitem__")


# ----- index ops -------------------------------------------------------------------------------------------------

def gather(input, dim, index, *, sparse_grad=False):
    if sparse_grad:
        raise NotImplementedError("gather: sparse_grad=True is not supported (dyngrad has no sparse tensors).")
    return _C.gather(tensor_arg(input, "gather"), to_int(dim, "gather", "dim"), tensor_arg(index, "gather", "index"))


def index_select(input, dim, index):
    return _C.index_select(tensor_arg(input, "index_select"), to_int(dim, "index_select", "dim"),
                           tensor_arg(index, "index_select", "index"))


def take(input, index):
    """input.flatten()[index]: negative positions count from the end, as in torch."""
    a = tensor_arg(input, "take")
    idx = tensor_arg(index, "take", "index")
    if a.numel() > 0 and idx.dtype is _C.int64:
        wrap = _C.to_dtype(_C.compare("lt", idx, _C.scalar_operand(0, idx)), _C.int64)
        idx = _C.add(idx, _C.mul(_C.scalar_operand(a.numel(), idx), wrap))
    return _C.take(a, idx)


def masked_fill(input, mask, value):
    a = tensor_arg(input, "masked_fill")
    return _C.masked_fill(a, tensor_arg(mask, "masked_fill", "mask"), operand_or_throw(value, a, "masked_fill", "value"))


def scatter_add(input, dim, index, src):
    """input with src[i][j] added at input[index[i][j]][j] (dim 0; likewise for other dims)."""
    a = tensor_arg(input, "scatter_add")
    idx = tensor_arg(index, "scatter_add", "index")
    s = tensor_arg(src, "scatter_add", "src")
    d = to_int(dim, "scatter_add", "dim")
    return _C.add(a, _C.scatter_add(s, d, idx, tuple(a.shape)))
