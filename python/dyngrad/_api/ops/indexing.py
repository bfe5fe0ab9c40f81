"""Indexing: t[idx] and t[idx] = v with ints, slices, None, Ellipsis, int/bool tensors, lists and arrays, and the
index ops: gather, take_along_dim, index_select, take, scatter/scatter_add/scatter_reduce, index_put/fill/copy/add,
masked_fill/select/scatter, nonzero/argwhere, searchsorted/bucketize.

Basic indices (ints, slices, None, Ellipsis) make views. Anything else is turned into the flat positions of the
selected elements (numpy computes them, so numpy's rules for advanced indexing apply, after torch's rule for a list
that holds sequences: see _sequence_index) and read with the core's take or written with put. The index ops
likewise compute positions with numpy (checking the index values as torch does) and read or write with the core's
take, put, put_add, gather, index_add and scatter_add, which carry the gradients. On the C++ engine, t[basic] is
answered by fast_paths.cpp with the same core calls.
"""
import builtins
import math
import re

import numpy as np

from ... import _C
from ..._user_frame import warn
from ...autograd.grad_mode import no_grad
from .. import bridge
from ..args import (Tensor, broadcast_shapes, check_int_range, checked_write, dtype_arg, number, operand_or_throw,
                    operands, refuse_complex, shape_str, tensor_arg, to_int, type_name, warn_complex_to_real, wrap_dim)
from ..node_names import shows_as


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
        return bridge.view(item)
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
    items = idx if isinstance(idx, tuple) else (idx,)
    for i in items:
        if isinstance(i, (str, bytes)):      # torch tries to make an index tensor of it
            raise TypeError(f"indices must be ints, slices, None, Ellipsis, or int/bool tensors; got "
                            f"{type_name(i)}.")
    items = tuple(_as_index_array(i) for i in items)
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
    return bridge.copy(np.asarray(positions, dtype=np.int64), False)


def _sequence_index(idx):
    """torch's reading of a non-tuple sequence used as an index (treatSequenceAsTuple in torch's
    python_variable_indexing.cpp, after numpy's old rule): a list of fewer than 32 items holding a tensor, a
    sequence, a slice, None or Ellipsis means a tuple, x[[[0, 1], [1, 2]]] == x[[0, 1], [1, 2]] (deprecated: torch
    warns); any other list (ints or bools, or 32 items or more) is one index tensor."""
    if isinstance(idx, (tuple, Tensor, np.ndarray)) or not isinstance(idx, (list, range, str)) or len(idx) >= 32:
        return idx
    for item in idx:
        if item is None or item is Ellipsis or isinstance(item, (Tensor, slice, list, tuple, np.ndarray, str, range)):
            warn("Using a non-tuple sequence for multidimensional indexing is deprecated (as in torch); use "
                 "x[tuple(seq)] instead of x[seq].", UserWarning)
            return tuple(idx)
    return idx


def getitem(self, idx):
    idx = _sequence_index(idx)
    if is_basic_index(idx):
        return basic_index(self, idx)
    return _C.take(self, index_positions(tuple(self.shape), idx))


def _written_value(value, like, op, **checks):
    """The value written by setitem or masked_fill as a tensor: a number is checked (Note [Numbers written into
    tensors]) and made in like's dtype directly (through the float32 an operand would be, int32 16777217 would
    round); tensors, lists and arrays as operands."""
    if isinstance(value, (bool, int, float, np.generic)) and not isinstance(value, Tensor):
        number_ = checked_write(value, like.dtype, op, **checks)
        if isinstance(number_, (bool, int, float)):
            return _C.full((), number_, like.dtype)
    return operand_or_throw(value, like, op, "value")


def setitem(self, idx, value):
    """self[idx] = value: an in-place write, recorded when grad is involved (Note [In-place writes into views])."""
    v = _written_value(value, self, "__setitem__", int64_numbers=True, halves=False)
    warn_complex_to_real(v.dtype, self.dtype)
    idx = _sequence_index(idx)
    base = self._base
    recording = (_C.is_grad_enabled() and (self.requires_grad or v.requires_grad or
                                           (base is not None and base.requires_grad))) or \
        _C._current_dual_level() >= 0         # forward AD: the write's tangent goes through put's formula
    if not recording and is_basic_index(idx):      # nothing to record: write into the window of self only
        with no_grad():
            window = basic_index(self, idx)
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
    idx = tensor_arg(index, "gather", "index")
    a = tensor_arg(input, "gather")
    d = to_int(dim, "gather", "dim")
    if idx.numel() == 0 and idx.dtype is not _C.int32 and not idx.dtype.is_floating_point:
        idx = _C.to_dtype(idx, _C.int64)    # torch checks an empty index's dtype not at all (uint8, bool, ...)
    if idx.numel() == 0 and idx.ndim != a.ndim:
        # torch checks an empty index's rank not at all either: the result is empty, of the index's shape (and
        # the input's gradient zero: an empty slice of it)
        return _C.reshape(_C.slice(_C.reshape(a, [-1]), 0, 0, 0, 1), list(idx.shape))
    if a.ndim == 0 and idx.ndim <= 1:
        # torch reads a 0-d input as one element along dim 0 (an index of shape () or (k,))
        return _C.reshape(_C.gather(_C.reshape(a, [1]), d, _C.reshape(idx, [-1])), list(idx.shape))
    return _C.gather(a, d, idx)


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


@shows_as("MaskedFill")
def masked_fill(input, mask, value):
    """input with value (a number or a 0-d tensor) where mask is True; input broadcasts with mask."""
    a = tensor_arg(input, "masked_fill")
    m = _bool_mask(mask, "masked_fill")
    v = _written_value(value, a, "masked_fill")
    if v.ndim != 0:
        raise RuntimeError(f"masked_fill: value must be a number or a 0-d tensor, got shape {shape_str(v.shape)}.")
    if isinstance(value, Tensor):
        checked_write(v.item(), a.dtype, "masked_fill")                # a 0-d tensor's value is checked too (torch)
    shape = broadcast_shapes(a.shape, m.shape, "masked_fill")
    return _C.masked_fill(a if shape == tuple(a.shape) else _C.expand(a, shape), m, v)


def take_along_dim(input, indices, dim=None):
    """The elements of input at `indices` along dim (input and indices broadcast in the other dims); with dim None,
    of the flattened input at the flattened indices. Negative indices count from the end along a dim."""
    a = tensor_arg(input, "take_along_dim")
    idx = tensor_arg(indices, "take_along_dim", "indices")
    if idx.dtype is not _C.int64:
        raise RuntimeError(f"take_along_dim: expected an int64 tensor as indices, got {idx.dtype.name}.")
    if dim is None:
        positions = _index_values(idx, a.numel(), 0, "take_along_dim")
        return _C.take(a, _positions(positions.reshape(-1)))
    if idx.ndim != a.ndim:
        raise RuntimeError(f"take_along_dim: input and indices must have the same number of dimensions, got shapes "
                           f"{shape_str(a.shape)} and {shape_str(idx.shape)}.")
    d = wrap_dim(to_int(dim, "take_along_dim", "dim"), a.ndim, "take_along_dim")
    if a.ndim == 0:
        return _C.take(a, _positions(_index_values(idx, 1, 0, "take_along_dim", wrap=True)))
    others = broadcast_shapes([n for k, n in enumerate(a.shape) if k != d],
                              [n for k, n in enumerate(idx.shape) if k != d], "take_along_dim")
    wide = _C.expand(a, others[:d] + (a.shape[d],) + others[d:])
    values = _index_values(idx, a.shape[d], d, "take_along_dim", wrap=True)
    values = np.broadcast_to(values, others[:d] + (idx.shape[d],) + others[d:])
    return _C.gather(wide, d, _positions(values))


# ----- checks shared by the index ops ----------------------------------------------------------------------------

def _index_values(index, size, dim, op, *, wrap=False, error=RuntimeError):
    """The index's values as a numpy array, checked against a dim of `size` (negative ones counted from the end
    when `wrap`, else refused, as torch's scatter/gather/index_add refuse them)."""
    idx = bridge.view(index)
    low = -size if wrap else 0
    bad = (idx < low) | (idx >= size)
    if bad.any():
        raise error(f"{op}: index {int(idx[bad].reshape(-1)[0])} is out of bounds for dimension {dim} with size "
                    f"{size}.")
    return np.where(idx < 0, idx + size, idx) if wrap else idx


def _int64_index(index, op, error=RuntimeError, int32=False):
    """The index as int64; with `int32`, an int32 index is widened (torch's scatter family takes both)."""
    idx = tensor_arg(index, op, "index")
    if int32 and idx.dtype is _C.int32:
        return _C.to_dtype(idx, _C.int64)
    if idx.dtype is not _C.int64:
        raise error(f"{op}: expected an int64 {'or int32 ' if int32 else ''}tensor as index, got {idx.dtype.name}.")
    return idx


def _same_dtype(a, b, op, name):
    if b.dtype is not a.dtype:
        raise RuntimeError(f"{op}: expected {name} to have the dtype of the input ({a.dtype.name}), got "
                           f"{b.dtype.name}.")


def _strides(shape):
    strides, step = [], 1
    for n in reversed(tuple(shape)):
        strides.append(step)
        step *= n
    return strides[::-1]


def _flat(coords, shape):
    """Flat row-major positions in `shape` of the (broadcasting) coordinate arrays, one per dim."""
    out = np.zeros((), dtype=np.int64)
    for c, s in zip(coords, _strides(shape)):
        out = out + np.asarray(c, dtype=np.int64) * s
    return out


def _along(shape, dim, idx):
    """Flat positions of the slices input.select(dim, i) for each i of the 1-D idx: shape with dim -> len(idx)."""
    grid = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    return grid.reshape(1).repeat(len(idx)) if not shape else np.take(grid, idx, axis=dim)


# ----- scatter, scatter_add, scatter_reduce ----------------------------------------------------------------------

def _scatter_plan(a, dim, index, src_shape, op):
    """(dim, target, source): for each element of index, the flat position it writes in input (index value along
    dim, its own coordinates elsewhere) and the flat position of the src element it reads (its coordinates)."""
    idx = _int64_index(index, op, int32=True)
    d = wrap_dim(to_int(dim, op, "dim"), a.ndim, op)
    if idx.ndim != a.ndim and idx.numel() > 0:
        raise RuntimeError(f"{op}: index must have the number of dimensions of the input ({a.ndim}), got shape "
                           f"{shape_str(idx.shape)}.")
    if idx.numel() > 0:
        for k in range(a.ndim):
            if (k != d and idx.shape[k] > a.shape[k]) or (src_shape is not None and idx.shape[k] > src_shape[k]):
                raise RuntimeError(f"{op}: index of shape {shape_str(idx.shape)} must be no larger than the input "
                                   f"{shape_str(a.shape)} apart from dimension {d}"
                                   + ("" if src_shape is None else f", and no larger than src {shape_str(src_shape)}")
                                   + ".")
    values = _index_values(idx, a.shape[d] if a.ndim else 1, d, op)
    coords = list(np.indices(values.shape, sparse=True))
    source = None if src_shape is None else _flat(coords, src_shape)
    if a.ndim:
        coords[d] = values
    return d, _flat(coords, a.shape) + np.zeros(values.shape, dtype=np.int64), source


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """input with src[i][j] (or the number value) written at [index[i][j]][j] (dim 0; likewise for other dims);
    reduce='add' or 'multiply' combines it with what is there instead."""
    a = tensor_arg(input, "scatter")
    if src is not None and value is not None:
        raise TypeError("scatter: pass either src or value, not both.")
    if src is None and value is None:
        raise TypeError("scatter: expected src (a Tensor) or value (a number).")
    tensor_src = isinstance(src, Tensor)
    if tensor_src:
        _same_dtype(a, src, "scatter", "src")
    _, target, source = _scatter_plan(a, dim, index, tuple(src.shape) if tensor_src else None, "scatter")
    if tensor_src:
        values = _C.take(src, _positions(source))
    else:
        values = _C.full(target.shape, checked_write(number(src if value is None else value, "scatter", "value"),
                                                     a.dtype, "scatter"), a.dtype)
    if reduce is None:
        return _C.put(a, _positions(target), values)
    if reduce not in ("add", "multiply"):
        raise RuntimeError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}.")
    if tensor_src:
        warn("scatter: the reduce argument with a Tensor src is deprecated (as in torch); use "
             "scatter_reduce instead.", UserWarning)
    return _grouped_reduce(a, target, values, "sum" if reduce == "add" else "prod", True)


@shows_as("ScatterAdd")
def scatter_add(input, dim, index, src):
    """input with src[i][j] added at input[index[i][j]][j] (dim 0; likewise for other dims)."""
    a = tensor_arg(input, "scatter_add")
    s = tensor_arg(src, "scatter_add", "src")
    _same_dtype(a, s, "scatter_add", "src")
    d, _, _ = _scatter_plan(a, dim, index, tuple(s.shape), "scatter_add")
    if index.numel() == 0:
        return _C.clone(a)
    for k, n in enumerate(index.shape):        # the core reads src in index's shape: the part index covers
        if s.shape[k] != n:
            s = _C.slice(s, k, 0, n, 1)
    return _C.add(a, _C.scatter_add(s, d, index, tuple(a.shape)))


_REDUCTIONS = {"sum": "sum", "prod": "prod", "mean": "mean", "amax": "amax", "amin": "amin", "max": "amax",
               "min": "amin"}


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """input where every position that index points at becomes the reduction (sum, prod, mean, amax, amin) of the
    src values sent there, and of its own value when include_self."""
    a = tensor_arg(input, "scatter_reduce")
    s = tensor_arg(src, "scatter_reduce", "src")
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"scatter_reduce: reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got {reduce!r}.")
    _same_dtype(a, s, "scatter_reduce", "src")
    if _REDUCTIONS[reduce] in ("amax", "amin"):
        refuse_complex("scatter_reduce", a, ordered=True)
    _, target, source = _scatter_plan(a, dim, index, tuple(s.shape), "scatter_reduce")
    return _grouped_reduce(a, target, _C.take(s, _positions(source)), _REDUCTIONS[reduce], bool(include_self))


def _grouped_reduce(a, target, values, reduce, include_self):
    """a with each position p of `target` (flat positions) replaced by the reduction of the values sent to p (and
    a[p] when include_self).

    Each group becomes a row of a (groups, widest group) matrix read with one take from cat(a, values, pad): the
    reductions are then the core's sum/amax/amin along rows (amax and amin share the gradient among ties, as
    torch's scatter_reduce does), a product of columns, or a sum over the counts."""
    t = target.reshape(-1)
    if t.size == 0:
        return _C.clone(a)
    touched, group, counts = np.unique(t, return_inverse=True, return_counts=True)
    group = group.reshape(-1)
    first = 1 if include_self else 0
    order = np.argsort(group, kind="stable")
    rank = np.empty(t.size, dtype=np.int64)
    rank[order] = np.arange(t.size) - np.repeat(np.cumsum(counts) - counts, counts)
    numel = a.numel()
    members = np.full((touched.size, int(counts.max()) + first), numel + t.size, dtype=np.int64)
    if include_self:
        members[:, 0] = touched
    members[group, rank + first] = numel + np.arange(t.size)
    pad = {"sum": 0, "mean": 0, "prod": 1}.get(reduce)
    if pad is None:
        pad = _extreme(a.dtype, reduce == "amin")
    pool = _C.cat([_C.reshape(a, (-1,)), _C.reshape(values, (-1,)), _C.full((1,), pad, a.dtype)], 0)
    rows = _C.take(pool, _positions(members))
    if reduce in ("sum", "mean"):
        out = _C.sum(rows, (1,), False, None)
        if reduce == "mean":
            sizes = counts + first
            if a.dtype.is_floating_point or a.dtype.is_complex:     # (a complex mean divides by a real count)
                real = {"complex64": "float32", "complex128": "float64"}.get(a.dtype.name, a.dtype.name)
                out = _C.div(out, bridge.copy(sizes.astype(np.dtype(real)), False))
            else:        # integers: floor division, as torch (no gradient to keep)
                out = bridge.copy(np.floor_divide(bridge.view(out), sizes).astype(bridge.view(out).dtype),
                                         False)
    elif reduce == "prod":
        out = rows
        while out.shape[1] > 1:        # halve the columns: log2(width) products, exact gradients at zeros
            half = (out.shape[1] + 1) // 2
            top, rest = _C.slice(out, 1, 0, half, 1), _C.slice(out, 1, half, out.shape[1], 1)
            if rest.shape[1] < half:
                rest = _C.cat([rest, _C.full((out.shape[0], 1), 1, a.dtype)], 1)
            out = _C.mul(top, rest)
        out = _C.reshape(out, (-1,))
    else:
        out = (_C.amin if reduce == "amin" else _C.amax)(rows, (1,), False)
    return _C.put(a, _positions(touched), out)


def _extreme(dtype, largest):
    """The padding that never wins an amax (the lowest value) or an amin (the highest)."""
    if dtype.is_floating_point:
        return math.inf if largest else -math.inf
    if dtype is _C.bool:
        return largest
    info = np.iinfo(np.dtype(dtype.name))
    return int(info.max if largest else info.min)


def _positions(arr):
    return bridge.copy(np.asarray(arr, dtype=np.int64, order="C"), False)


# ----- index_put, index_fill, index_copy, index_add ----------------------------------------------------------------

def index_put(input, indices, values, accumulate=False):
    """input with input[indices] = values (or += when accumulate); indices is a tuple of int64/bool tensors, as
    in t[i, j]."""
    a = tensor_arg(input, "index_put")
    if isinstance(indices, Tensor) or not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put: expected a tuple of tensors as indices, got {type_name(indices)}.")
    for i, t in enumerate(indices):
        if not isinstance(t, Tensor):
            raise TypeError(f"index_put: expected a Tensor at position {i} of indices, got {type_name(t)}.")
    if not indices:
        raise RuntimeError("index_put: indices must not be empty.")
    v = tensor_arg(values, "index_put", "values")
    _same_dtype(a, v, "index_put", "values")
    positions = index_positions(tuple(a.shape), tuple(indices))
    target = tuple(positions.shape)
    if broadcast_shapes(v.shape, target, "index_put") != target:
        raise RuntimeError(f"index_put: a value tensor of shape {shape_str(v.shape)} cannot be broadcast to the "
                           f"indexing result of shape {shape_str(target)}.")
    if accumulate:
        return _C.add(a, _C.put_add(_C.expand(v, target), positions, tuple(a.shape)))
    return _C.put(a, positions, v)


def _index_1d(index, op, dtype_error, ndim_error):
    """A 0-d or 1-D int64 index (torch raises a different exception type for each op and mistake)."""
    idx = _int64_index(index, op, dtype_error)
    if idx.ndim > 1:
        raise ndim_error(f"{op}: index must be 0-d or 1-D, got shape {shape_str(idx.shape)}.")
    return idx


def index_fill(input, dim, index, value):
    """input with the slices input.select(dim, i), i in index, filled with value (a number or a 0-d tensor)."""
    a = tensor_arg(input, "index_fill")
    d = wrap_dim(to_int(dim, "index_fill", "dim"), a.ndim, "index_fill")
    idx = _index_1d(index, "index_fill", IndexError, RuntimeError)
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"index_fill: value must be a number or a 0-d tensor, got shape "
                               f"{shape_str(value.shape)}.")
        checked_write(value.item(), a.dtype, "index_fill")              # (a tensor's value too, as torch)
        v = value if value.dtype is a.dtype else _C.to_dtype(value, a.dtype)
    else:
        v = _C.full((), checked_write(number(value, "index_fill", "value"), a.dtype, "index_fill"), a.dtype)
    size = a.shape[d] if a.ndim else 1
    # each filled slice once: a repeated index would put the value twice and give it twice the gradient
    i = np.unique(_index_values(idx, size, d, "index_fill", wrap=True, error=IndexError).reshape(-1))
    return _C.put(a, _positions(_along(tuple(a.shape), d, i)), v)


def _check_source(a, d, idx, source, op, size_error):
    """torch's checks of index_copy/index_add's source: the input's dtype, and its shape with len(index) along
    dim (a 0-d input takes one index and one value)."""
    _same_dtype(a, source, op, "source")
    n = idx.numel()
    if a.ndim == 0:
        if n != 1 or source.numel() != 1:
            raise size_error(f"{op}: a 0-d input takes exactly one index and one source value, got {n} and "
                             f"{source.numel()}.")
        return
    if source.ndim != a.ndim:
        raise IndexError(f"{op}: source must have the number of dimensions of the input ({a.ndim}), got shape "
                         f"{shape_str(source.shape)}.")
    if source.shape[d] != n:
        raise size_error(f"{op}: the number of indices ({n}) must equal source.size({d}) ({source.shape[d]}).")
    expected = tuple(a.shape[:d]) + (n,) + tuple(a.shape[d + 1:])
    if tuple(source.shape) != expected:
        raise RuntimeError(f"{op}: source of shape {shape_str(source.shape)} must have the shape of the input "
                           f"{shape_str(a.shape)} apart from dimension {d}.")


def index_copy(input, dim, index, source):
    """input with input.select(dim, index[i]) replaced by source.select(dim, i)."""
    a = tensor_arg(input, "index_copy")
    d = wrap_dim(to_int(dim, "index_copy", "dim"), a.ndim, "index_copy")
    idx = _index_1d(index, "index_copy", RuntimeError, IndexError)
    s = tensor_arg(source, "index_copy", "source")
    _check_source(a, d, idx, s, "index_copy", IndexError)
    i = _index_values(idx, a.shape[d] if a.ndim else 1, d, "index_copy", error=IndexError).reshape(-1)
    positions = _along(tuple(a.shape), d, i)
    return _C.put(a, _positions(positions), _C.reshape(s, positions.shape))


def index_add(input, dim, index, source, *, alpha=1):
    """input with alpha * source.select(dim, i) added to input.select(dim, index[i])."""
    a = tensor_arg(input, "index_add")
    d = wrap_dim(to_int(dim, "index_add", "dim"), a.ndim, "index_add")
    idx = _index_1d(index, "index_add", RuntimeError, IndexError)
    s = tensor_arg(source, "index_add", "source")
    _check_source(a, d, idx, s, "index_add", RuntimeError)
    _index_values(idx, a.shape[d] if a.ndim else 1, d, "index_add")
    alpha = number(alpha, "index_add", "alpha")
    if not (type(alpha) is int and alpha == 1):
        if not a.dtype.is_floating_point:        # torch converts alpha to the input's type
            alpha = bool(alpha) if a.dtype is _C.bool else int(alpha)
        s = _C.mul(s, _C.scalar_operand(alpha, s))
    if a.ndim == 0:
        s = _C.reshape(s, ())
    return _C.add(a, _C.index_add(s, d, _C.reshape(idx, (-1,)), tuple(a.shape)))


# ----- masks ------------------------------------------------------------------------------------------------------

def _bool_mask(mask, op):
    m = tensor_arg(mask, op, "mask")
    if m.dtype is not _C.bool:
        raise RuntimeError(f"{op}: expected a bool tensor as mask, got {m.dtype.name}.")
    return m


def _mask_positions(a, m, op):
    """a expanded to the broadcast shape of a and m, and the flat positions of m's True elements in it."""
    shape = broadcast_shapes(a.shape, m.shape, op)
    return _C.expand(a, shape), np.flatnonzero(np.broadcast_to(bridge.view(m), shape))


def masked_select(input, mask):
    """The elements of input (broadcast with mask) where mask is True, as a 1-D tensor."""
    a = tensor_arg(input, "masked_select")
    wide, positions = _mask_positions(a, _bool_mask(mask, "masked_select"), "masked_select")
    return _C.take(wide, _positions(positions))


def masked_scatter(input, mask, source):
    """input (broadcast with mask) with the elements where mask is True replaced, in order, by source's first
    elements."""
    a = tensor_arg(input, "masked_scatter")
    m = _bool_mask(mask, "masked_scatter")
    s = tensor_arg(source, "masked_scatter", "source")
    _same_dtype(a, s, "masked_scatter", "source")
    wide, positions = _mask_positions(a, m, "masked_scatter")
    if s.numel() < positions.size:
        raise RuntimeError(f"masked_scatter: source has {s.numel()} elements, fewer than the {positions.size} True "
                           "elements of mask.")
    return _C.put(wide, _positions(positions), _C.take(s, _positions(np.arange(positions.size))))


def nonzero(input, *, as_tuple=False):
    """The indices of the nonzero elements: an (n, ndim) int64 tensor, or a tuple of ndim 1-D tensors."""
    arr = bridge.host_values(tensor_arg(input, "nonzero"))
    if as_tuple:
        found = np.nonzero(arr.reshape(1) if arr.ndim == 0 else arr)
        return tuple(_positions(c) for c in found)
    return _positions(np.argwhere(arr))


def argwhere(input):
    return nonzero(tensor_arg(input, "argwhere"))


# ----- sorted search ---------------------------------------------------------------------------------------------

def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value of input, the index at which it would be inserted into sorted_sequence (along its last dim)
    to keep it sorted: before equal values ('left'), or after them (right=True or side='right')."""
    seq = tensor_arg(sorted_sequence, "searchsorted", "sorted_sequence")
    scalar = not isinstance(input, Tensor)
    refuse_complex("searchsorted", seq, None if scalar else input, ordered=True)
    if scalar and isinstance(input, complex):
        raise TypeError("searchsorted: not supported for a complex value; complex numbers have no order.")
    values = np.asarray(number(input, "searchsorted", "input")) if scalar else bridge.host_values(input)
    if seq.ndim == 0:
        raise RuntimeError("searchsorted: sorted_sequence must have at least one dimension, got a 0-d tensor.")
    if side not in (None, "left", "right"):
        raise RuntimeError(f"searchsorted: side must be 'left' or 'right', got {side!r}.")
    if side == "left" and right:
        raise RuntimeError("searchsorted: side='left' and right=True contradict each other.")
    where = "right" if right or side == "right" else "left"
    boundaries = bridge.host_values(seq)
    if sorter is not None:
        order = tensor_arg(sorter, "searchsorted", "sorter")
        if order.dtype is not _C.int64 or tuple(order.shape) != tuple(seq.shape):
            raise RuntimeError(f"searchsorted: sorter must be an int64 tensor of the shape of sorted_sequence "
                               f"{shape_str(seq.shape)}, got {order.dtype.name} {shape_str(order.shape)}.")
        boundaries = np.take_along_axis(boundaries, bridge.view(order), -1)
    if seq.ndim == 1:
        found = np.searchsorted(boundaries, values, side=where)
    else:
        if scalar or values.ndim != seq.ndim or values.shape[:-1] != boundaries.shape[:-1]:
            raise RuntimeError(f"searchsorted: sorted_sequence of shape {shape_str(seq.shape)} must be 1-D or match "
                               f"the leading dimensions of input (shape {shape_str(values.shape)}).")
        rows = int(np.prod(boundaries.shape[:-1], dtype=np.int64))     # explicit: -1 is ambiguous when empty
        rows_b = boundaries.reshape(rows, boundaries.shape[-1])
        rows_v = values.reshape(rows, values.shape[-1])
        found = np.stack([np.searchsorted(b, v, side=where) for b, v in zip(rows_b, rows_v)]).reshape(values.shape) \
            if rows_b.shape[0] else np.zeros(values.shape, dtype=np.int64)
    dtype = dtype_arg(np.int32, "searchsorted") if out_int32 else _C.int64
    return bridge.copy(np.asarray(found).astype(np.dtype(dtype.name)), False)


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """For each value of input, the index of its bucket among the sorted 1-D boundaries: boundaries[i-1] < x <=
    boundaries[i] (right=False) or boundaries[i-1] <= x < boundaries[i] (right=True)."""
    b = tensor_arg(boundaries, "bucketize", "boundaries")
    if b.ndim != 1:
        raise RuntimeError(f"bucketize: boundaries must be 1-D, got shape {shape_str(b.shape)}.")
    return searchsorted(b, input, out_int32=out_int32, right=right)


# ----- unravel_index, nonzero_static -------------------------------------------------------------------------------

def unravel_index(indices, shape):
    """The coordinates of flat (row-major) `indices` in a tensor of `shape`: a tuple of int64 tensors of indices'
    shape, one per dim. Negative indices count from the end; an index outside the tensor raises."""
    a = tensor_arg(indices, "unravel_index", "indices")
    if a.dtype.is_floating_point or a.dtype is _C.bool:
        raise TypeError(f"unravel_index: expected 'indices' of an integer dtype, got {a.dtype.name}.")
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"unravel_index: expected an int or a sequence of ints as shape, got {type_name(shape)}.")
    dims = tuple(to_int(s, "unravel_index", "shape", TypeError) for s in shape)
    if any(s < 0 for s in dims):
        raise ValueError(f"unravel_index: 'shape' cannot have negative values, got {shape_str(dims)}.")
    total = math.prod(dims)
    v = bridge.host_array(a.detach()).astype(np.int64)
    if v.size and (v.min() < -total or v.max() >= total):
        bad = int(v.min()) if v.min() < -total else int(v.max())
        raise RuntimeError(f"unravel_index: index {bad} is out of bounds for shape {shape_str(dims)} "
                           f"({total} elements).")
    v = np.where(v < 0, v + total, v)
    out = []
    for s in reversed(dims):
        out.append(v % s if s else v)
        v = v // s if s else v
    return tuple(bridge.host_result(c, _C.int64) for c in reversed(out))


def nonzero_static(input, *, size, fill_value=-1):
    """nonzero(input) padded with rows of fill_value (or cut) to exactly `size` rows: an output shape known before
    the values are."""
    a = tensor_arg(input, "nonzero_static")
    size = to_int(size, "nonzero_static", "size")
    if size < 0:
        raise RuntimeError(f"nonzero_static: size must be non-negative, got {size}.")
    fill_value = to_int(fill_value, "nonzero_static", "fill_value")
    found = np.argwhere(bridge.host_array(a.detach()))
    out = np.full((size, a.ndim), fill_value, dtype=np.int64)
    out[:min(size, len(found))] = found[:size]
    return bridge.host_result(out, _C.int64)


# ----- index_reduce and put ----------------------------------------------------------------------------------------

_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """input where row index[i] along dim becomes the reduction (prod, mean, amax, amin) of the source rows i
    sent to it, and of its own value when include_self: scatter_reduce with index spread over source's shape."""
    op = "index_reduce"
    a, s = tensor_arg(input, op), tensor_arg(source, op, "source")
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"{op}: expected reduce to be one of prod, mean, amax or amin, got {reduce!r}.")
    d = wrap_dim(to_int(dim, op, "dim"), a.ndim, op)
    idx = tensor_arg(index, op, "index")
    if idx.dtype.name not in ("int32", "int64"):
        raise RuntimeError(f"{op}: expected an int32 or int64 tensor as index, got {idx.dtype.name}.")
    if idx.ndim > 1:
        raise IndexError(f"{op}: index must be 0-d or 1-D, got shape {shape_str(idx.shape)}.")
    size = a.shape[d] if a.ndim else 1
    positions = bridge.host_array(idx.detach()).astype(np.int64).reshape(-1)
    if positions.size and (positions.min() < 0 or positions.max() >= size):     # no wrapping of negatives (torch)
        bad = int(positions.min()) if positions.min() < 0 else int(positions.max())
        raise IndexError(f"{op}: index {bad} is out of range for dimension {d} of size {size} (expected "
                         f"0..{size - 1}).")
    idx = bridge.host_result(positions, _C.int64)
    if s.ndim != a.ndim and not (a.ndim <= 1 and s.ndim <= 1):
        raise RuntimeError(f"{op}: source has {s.ndim} dimensions, input has {a.ndim}; they must be equal.")
    ssize = s.shape[d] if s.ndim else 1
    if idx.numel() != ssize:
        raise RuntimeError(f"{op}: index has {idx.numel()} elements, source has {ssize} along dim {d}.")
    for k in builtins.range(s.ndim):
        if k != d and s.shape[k] != a.shape[k]:
            raise RuntimeError(f"{op}: source shape {shape_str(s.shape)} must match input shape "
                               f"{shape_str(a.shape)} except along dim {d}.")
    if a.ndim == 0:
        spread = _C.reshape(idx, ())
    else:
        view = tuple(-1 if k == d else 1 for k in builtins.range(s.ndim))
        spread = _C.contiguous(_C.expand(_C.reshape(idx, view), tuple(s.shape)))
    return scatter_reduce(a, d, spread, s, reduce, include_self=include_self)


def put(input, index, source, accumulate=False):
    """input, seen as 1-D, with input[index] = source (or += when accumulate): index and source have the same
    number of elements; negative indices count from the end."""
    op = "put"
    a, s = tensor_arg(input, op), tensor_arg(source, op, "source")
    i = tensor_arg(index, op, "index")
    if i.dtype is not _C.int64:
        raise RuntimeError(f"{op}: expected index to be int64, got {i.dtype.name}.")
    if s.dtype is not a.dtype:
        raise RuntimeError(f"{op}: expected source to have the input's dtype ({a.dtype.name}), got {s.dtype.name}.")
    if i.numel() != s.numel():
        raise IndexError(f"{op}: expected source and index to have the same number of elements, got "
                         f"{s.numel()} and {i.numel()}.")
    n = a.numel()
    flat = bridge.host_array(i.detach()).reshape(-1)
    if flat.size and (flat.min() < -n or flat.max() >= n):
        bad = int(flat.min()) if flat.min() < -n else int(flat.max())
        raise IndexError(f"{op}: index {bad} is out of range for a tensor of {n} elements.")
    positions = bridge.host_result(np.where(flat < 0, flat + n, flat), _C.int64)
    values = _C.reshape(s, (-1,))
    flat_a = _C.reshape(a, (-1,))
    if accumulate:          # a + (the values summed into a zero tensor at their positions: duplicates add up)
        out = _C.add(flat_a, _C.put_add(values, positions, (n,)))
    else:
        out = _C.put(flat_a, positions, values)
    return _C.reshape(out, tuple(a.shape))


# ----- where (a selection: torch lists it with the indexing ops) ---------------------------------------------------

def where(condition, input=None, other=None):
    """input where condition, else other (either may be a number); where(condition) alone is
    nonzero(condition, as_tuple=True)."""
    if input is None and other is None:
        return nonzero(tensor_arg(condition, "where", "condition"), as_tuple=True)
    if input is None or other is None:
        raise TypeError("where: expected where(condition) or where(condition, input, other).")
    check_int_range(input, "where")
    check_int_range(other, "where")
    a, b = operands(input, other, "where")
    if isinstance(input, Tensor) != isinstance(other, Tensor):    # a number branch must fit the result's dtype
        checked_write(other if isinstance(input, Tensor) else input, _C.result_type(a, b), "where", halves=False)
    return _C.where(tensor_arg(condition, "where", "condition"), a, b)


def where_method(self, condition, other):
    """self.where(condition, other): self where condition, else other."""
    return where(condition, self, other)
