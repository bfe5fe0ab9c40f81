"""Reference engine: conversion, views and movement, indexing, and in-place writes. Mirrors csrc/dyngrad/ops_shape.cpp,
function for function.

Views (reshape when the strides allow it, permute, expand, slice) wrap numpy views of the input's memory and share
its Storage, so they share its version counter; `_base` names the tensor owning the memory (Note [In-place writes
into views] at assign_inplace).
"""
import numpy as np

from . import dtypes as _dt
from . import errors, kernels
from .errors import shape_str
from .grad_mode import is_grad_enabled, GradModeGuard
from .ops import record, any_requires_grad, check_float
from .tensor import make_tensor, broadcast_shapes, wrap_dim, scalar_tensor, shape_numel


def _view_of(arr, a):
    """A tensor over `arr`, which numpy made as a view of a's memory: same Storage (version counter), same base."""
    return make_tensor(arr, a._storage, a._base if a._base is not None else a)


# ===== conversion ==============================================================================================

def to_dtype(a, dtype):
    if a.dtype is dtype:
        return a
    out = make_tensor(np.array(dtype.cast(a._data), order="C"))
    if dtype.is_floating_point and any_requires_grad(a):
        record("to_dtype", out, (a,))
    return out


def clone(a):
    out = make_tensor(np.array(a._data, order="C"))
    if any_requires_grad(a):
        record("clone", out, (a,))
    return out


def contiguous(a):
    return a if a._data.flags.c_contiguous else clone(a)


# ===== views ===================================================================================================

def _record_view(op, out, a):
    if any_requires_grad(a):
        record(op, out, (a,))
    return out


def _infer_shape(requested, numel, old, op):
    shape = list(requested)
    infer, known = -1, 1
    for i, s in enumerate(shape):
        if s == -1:
            if infer >= 0:
                raise RuntimeError(f"{op}: only one dimension can be -1, got shape {shape_str(requested)}.")
            infer = i
        else:
            if s < 0:
                raise RuntimeError(f"{op}: invalid size {s} in shape {shape_str(requested)}.")
            known *= s
    message = f"{op}: shape {shape_str(requested)} is invalid for a tensor of {numel} elements (shape {shape_str(old)})."
    if infer >= 0:
        if known == 0 or numel % known:
            raise RuntimeError(message)
        shape[infer] = numel // known
    if int(np.prod(shape, dtype=np.int64)) != numel:
        raise RuntimeError(message)
    return tuple(shape)


# out = a with a new shape: a view when the strides allow it, else a copy
def reshape(a, shape):
    shape = _infer_shape(shape, a.numel(), a.shape, "reshape")
    arr = a._data.reshape(shape)
    # (an empty tensor shares no memory numpy could see, but is a view, as in C++: an in-place write through it
    # must still move the base's history)
    out = _view_of(arr, a) if a._data.size == 0 or np.may_share_memory(arr, a._data) else make_tensor(arr)
    return _record_view("reshape", out, a)


# like reshape, but never copies
def view(a, shape):
    shape = _infer_shape(shape, a.numel(), a.shape, "view")
    try:
        arr = np.reshape(a._data, shape, copy=False)
    except ValueError:
        raise RuntimeError(errors.ERR_VIEW.format(old=shape_str(a.shape), strides=shape_str(a.stride()),
                                                  new=shape_str(shape))) from None
    return _record_view("reshape", _view_of(arr, a), a)


def permute(a, dims):
    nd = a.ndim
    if len(dims) != nd:
        raise RuntimeError(f"permute: got {len(dims)} dims for a tensor of {nd} dimensions (shape "
                           f"{shape_str(a.shape)}).")
    wrapped = []
    for d in dims:
        w = wrap_dim(d, nd, "permute")
        if w in wrapped:
            raise RuntimeError(f"permute: dim {d} appears more than once in {shape_str(dims)}.")
        wrapped.append(w)
    out = _view_of(np.transpose(a._data, wrapped), a)
    if any_requires_grad(a):
        record("permute", out, (a,)).args = {"dims": tuple(wrapped)}
    return out


def transpose(a, dim0, dim1):
    nd = a.ndim
    if nd == 0:
        wrap_dim(dim0, nd, "transpose")
        wrap_dim(dim1, nd, "transpose")
        return reshape(a, a.shape)
    dim0, dim1 = wrap_dim(dim0, nd, "transpose"), wrap_dim(dim1, nd, "transpose")
    perm = list(range(nd))
    perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
    return permute(a, perm)


def mT(a):
    if a.ndim < 2:
        raise RuntimeError(f"mT: expected a tensor of at least 2 dimensions, got shape {shape_str(a.shape)}.")
    return transpose(a, -2, -1)


# out = a broadcast to `shape` (-1 keeps a size); a view
def expand(a, shape):
    nd = len(shape)
    if nd < a.ndim:
        raise RuntimeError(f"expand: the number of sizes ({nd}) must be at least the number of dimensions of the "
                           f"tensor ({a.ndim}, shape {shape_str(a.shape)}).")
    lead = nd - a.ndim
    out_shape = []
    for d, want in enumerate(shape):
        if d < lead:
            if want < 0:
                raise RuntimeError(f"expand: size -1 is not allowed for a new leading dimension ({d}).")
        else:
            have = a.shape[d - lead]
            if want == -1:
                want = have
            if want != have and have != 1:
                raise RuntimeError(f"expand: the size of dimension {d} ({have}) must match the requested size {want} "
                                   f"or be 1; tensor shape {shape_str(a.shape)}, requested {shape_str(shape)}.")
        out_shape.append(want)
    out_shape = tuple(out_shape)
    if out_shape == a.shape:
        return a
    # writable like its base, as in C++ and torch (np.broadcast_to's views are read-only): a write into it that
    # would reach one element twice is refused by check_writable (Note [Writable tensors]), a 0-d window of it
    # (x.expand(4)[0] = 1) is not
    shape_numel(out_shape)       # a view of more elements than fit in int64 is refused, as in C++
    strides = np.broadcast_to(a._data, out_shape).strides
    view = np.lib.stride_tricks.as_strided(a._data, out_shape, strides, writeable=a._data.flags.writeable)
    return _record_view("expand", _view_of(view, a), a)


def squeeze(a, dims=None):
    drop = [False] * a.ndim
    if dims is None:
        drop = [n == 1 for n in a.shape]
    else:
        for d in dims:
            w = wrap_dim(d, a.ndim, "squeeze")
            if a.ndim > 0 and a.shape[w] == 1:
                drop[w] = True
    return reshape(a, tuple(n for n, gone in zip(a.shape, drop) if not gone))


def unsqueeze(a, dim):
    d = wrap_dim(dim, a.ndim + 1, "unsqueeze")
    return reshape(a, a.shape[:d] + (1,) + a.shape[d:])


def flatten(a, start_dim, end_dim):
    if a.ndim == 0:
        return reshape(a, (1,))
    s, e = wrap_dim(start_dim, a.ndim, "flatten"), wrap_dim(end_dim, a.ndim, "flatten")
    if s > e:
        raise RuntimeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}.")
    n = 1
    for d in range(s, e + 1):
        n *= a.shape[d]
    return reshape(a, a.shape[:s] + (n,) + a.shape[e + 1:])


# out = a[..., start:stop:step, ...] along dim (Python's clamping)
def slice(a, dim, start, stop, step):
    if a.ndim == 0:
        raise IndexError("slice: cannot slice a 0-d tensor.")
    d = wrap_dim(dim, a.ndim, "slice")
    if step <= 0:
        raise ValueError(f"slice: step must be positive, got {step}.")
    n = a.shape[d]
    start = start + n if start < 0 else start
    stop = stop + n if stop < 0 else stop
    start = min(max(start, 0), n)
    stop = min(max(stop, start), n)
    key = (np.s_[:],) * d + (np.s_[start:stop:step],)
    out = _view_of(a._data[key], a)
    if any_requires_grad(a):
        record("slice", out, (a,)).args = {"dim": d, "start": start, "step": step}
    return out


# out = zeros(input_shape) with out[..., start::step (as long as grad), ...] = grad
def slice_scatter(grad, input_shape, dim, start, step):
    out = np.zeros(input_shape, dtype=grad._data.dtype)
    length = grad.shape[dim]
    out[(np.s_[:],) * dim + (np.s_[start:start + length * step:step],)] = grad._data
    out = make_tensor(out)
    if any_requires_grad(grad):
        record("slice_scatter", out, (grad,)).args = {"dim": dim, "start": start, "step": step}
    return out


def select(a, dim, index):
    if a.ndim == 0:
        raise IndexError("select: cannot index a 0-d tensor; use item() instead.")
    d = wrap_dim(dim, a.ndim, "select")
    n = a.shape[d]
    if not -n <= index < n:
        raise IndexError(errors.ERR_INDEX.format(i=index, d=d, n=n))
    if index < 0:
        index += n
    return squeeze(slice(a, d, index, index + 1, 1), (d,))


# out = concatenation along dim
def cat(tensors, dim):
    if not tensors:
        raise RuntimeError("cat: expected a non-empty list of tensors.")
    ref = next((t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)), None)   # torch skips 1-D empty tensors
    if ref is None:
        return clone(tensors[0])
    nd = ref.ndim
    if nd == 0:
        raise RuntimeError("cat: zero-dimensional tensors cannot be concatenated; use stack.")
    d = wrap_dim(dim, nd, "cat")
    dtype = tensors[0].dtype
    for t in tensors:
        dtype = _dt.promote(dtype, t.dtype)
    parts, sizes = [], []
    for i, t in enumerate(tensors):
        if t.ndim == 1 and t.shape[0] == 0:
            sizes.append(0)
            continue
        if t.ndim != nd:
            raise RuntimeError(f"cat: tensor {i} has {t.ndim} dimensions (shape {shape_str(t.shape)}) but tensor 0 "
                               f"has {nd} (shape {shape_str(ref.shape)}).")
        for k in range(nd):
            if k != d and t.shape[k] != ref.shape[k]:
                raise RuntimeError(f"cat: sizes of tensors must match except in dim {d}: tensor {i} has shape "
                                   f"{shape_str(t.shape)}, expected {shape_str(ref.shape)} apart from that dim.")
        parts.append(dtype.cast(t._data))
        sizes.append(t.shape[d])
    out = make_tensor(dtype.cast(np.concatenate(parts, axis=d)))     # cast: keeps bfloat16's tag
    if any_requires_grad(*tensors):
        record("cat", out, tuple(tensors)).args = {"dim": d, "sizes": tuple(sizes)}
    return out


def stack(tensors, dim):
    if not tensors:
        raise RuntimeError("stack: expected a non-empty list of tensors.")
    d = wrap_dim(dim, tensors[0].ndim + 1, "stack")
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != tensors[0].shape:
            raise RuntimeError(f"stack: expects each tensor to be equal size, but got {shape_str(tensors[0].shape)} at "
                               f"entry 0 and {shape_str(t.shape)} at entry {i}.")
    return cat([unsqueeze(t, d) for t in tensors], d)


def split(a, sizes, dim):
    if a.ndim == 0:      # as torch: "split expects at least a 1-dimensional tensor"
        raise RuntimeError("split: cannot split a 0-d tensor; it has no dimension to split along.")
    d = wrap_dim(dim, a.ndim, "split")
    for s in sizes:
        if s < 0:
            raise RuntimeError(f"split: sizes must be non-negative, got {shape_str(sizes)}.")
    total = int(np.sum(sizes, dtype=np.int64))
    if total != a.shape[d]:
        raise RuntimeError(f"split: sizes {shape_str(sizes)} sum to {total} but dimension {d} has size "
                           f"{a.shape[d]}.")
    out, start = [], 0
    for s in sizes:
        out.append(slice(a, d, start, start + s, 1))
        start += s
    return out


def split_size(a, size, dim):
    if size <= 0:
        raise RuntimeError(f"split: split_size must be positive, got {size}.")
    if a.ndim == 0:
        raise RuntimeError("split: cannot split a 0-d tensor; it has no dimension to split along.")
    d = wrap_dim(dim, a.ndim, "split")
    n = a.shape[d]
    sizes = [min(size, n - s) for s in range(0, n, size)] or [0]
    return split(a, sizes, d)


def chunk(a, chunks, dim):
    if chunks <= 0:
        raise RuntimeError(f"chunk: number of chunks must be positive, got {chunks}.")
    if a.ndim == 0:
        raise RuntimeError("chunk: cannot chunk a 0-d tensor; it has no dimension to chunk along.")
    d = wrap_dim(dim, a.ndim, "chunk")
    n = a.shape[d]
    return split_size(a, max(1, -(-n // chunks)), d)


# ===== indexing ================================================================================================

def _checked_index(index, op):
    if index.dtype is _dt.int32:                     # torch takes int32 indices too (widened, as in C++)
        return index._data.astype(np.int64)
    if index.dtype is not _dt.int64:
        raise IndexError(f"{op}: indices must be an int64 or int32 tensor, got {index.dtype.name}.")
    return index._data


def _check_bounds(idx, size, dim, op, error=IndexError):
    """Indices in [0, size), as torch (see check_bounds in csrc/dyngrad/ops_shape.cpp: negatives no longer wrap);
    torch raises IndexError for index_select/index_add and RuntimeError for gather/scatter."""
    bad = idx[(idx < 0) | (idx >= size)]
    if bad.size:
        raise error(f"{op}: index {int(bad.reshape(-1)[0])} is out of range for dimension {dim} of size {size}.")


# out = a.index_select(dim, index)
def index_select(a, dim, index):
    if index.ndim > 1:
        raise IndexError(f"index_select: index must be 0-d or 1-D, got shape {shape_str(index.shape)}.")
    idx = _checked_index(index, "index_select")
    d = wrap_dim(dim, a.ndim, "index_select")
    n = idx.size
    size = a.shape[d] if a.ndim else 1
    if not a.ndim and n != 1:         # a 0-d result has room for one element (as torch)
        raise RuntimeError(f"index_select: a 0-d tensor takes exactly one index, got {n}.")
    _check_bounds(idx, size, d, "index_select")
    flat = idx.reshape(-1) % max(size, 1)
    out = make_tensor(np.take(a._data, flat, axis=d) if a.ndim else a._data.copy())
    if any_requires_grad(a):
        node = record("index_select", out, (a,))
        node.save("index", index)
        node.args = {"dim": d}
    return out


# out = zeros(out_shape); out.index_select(dim, index) += src
def index_add(src, dim, index, out_shape):
    idx = _checked_index(index, "index_add")
    size = out_shape[dim] if out_shape else 1
    _check_bounds(idx, size, dim, "index_add")
    out = np.zeros(out_shape, dtype=src._data.dtype)
    if out_shape:
        np.add.at(out, (np.s_[:],) * dim + (idx.reshape(-1) % max(size, 1),), src._data)
    else:
        out += src._data
    out = make_tensor(out)
    if any_requires_grad(src):
        node = record("index_add", out, (src,))
        node.save("index", index)
        node.args = {"dim": dim}
    return out


def _check_gather_shapes(a, d, index, op):
    if index.ndim != a.ndim:
        raise RuntimeError(f"{op}: index has {index.ndim} dimensions but the input has {a.ndim} (shapes "
                           f"{shape_str(index.shape)} and {shape_str(a.shape)}).")
    for k in range(a.ndim):
        if k != d and index.shape[k] > a.shape[k]:
            raise RuntimeError(f"{op}: index shape {shape_str(index.shape)} is larger than the input shape "
                               f"{shape_str(a.shape)} in dimension {k}.")


def _gather_key(idx, d, size):
    """The numpy index that reads element [i][idx[i][j]] (dim 1) for every position of idx."""
    grids = list(np.indices(idx.shape, sparse=True))
    if grids:
        grids[d] = idx % max(size, 1)
    return tuple(grids)


# out[i][j] = a[i][index[i][j]] (dim 1)
def gather(a, dim, index):
    idx = _checked_index(index, "gather")
    d = wrap_dim(dim, a.ndim, "gather")
    _check_gather_shapes(a, d, index, "gather")
    size = a.shape[d] if a.ndim else 1
    _check_bounds(idx, size, d, "gather", RuntimeError)
    out = make_tensor(a._data[_gather_key(idx, d, size)].copy() if a.ndim else a._data.copy())
    if any_requires_grad(a):
        node = record("gather", out, (a,))
        node.save("index", index)
        node.args = {"dim": d}
    return out


# out = zeros(out_shape); out[i][index[i][j]] += src[i][j]
def scatter_add(src, dim, index, out_shape):
    idx = _checked_index(index, "scatter_add")
    size = out_shape[dim] if out_shape else 1
    _check_bounds(idx, size, dim, "scatter_add", RuntimeError)
    out = np.zeros(out_shape, dtype=src._data.dtype)
    if out_shape:
        np.add.at(out, _gather_key(idx, dim, size), src._data[tuple(np.s_[:n] for n in idx.shape)])
    else:
        out += src._data
    out = make_tensor(out)
    if any_requires_grad(src):
        node = record("scatter_add", out, (src,))
        node.save("index", index)
        node.args = {"dim": dim}
    return out


def _check_positions(pos, numel, op):
    bad = pos[(pos < 0) | (pos >= numel)]
    if bad.size:
        raise IndexError(f"{op}: flat position {int(bad.reshape(-1)[0])} is out of range for a tensor of {numel} "
                         "elements.")


# out = a.flatten()[positions]
def take(a, positions):
    pos = _checked_index(positions, "take")
    _check_positions(pos, a.numel(), "take")
    out = make_tensor(a._data.reshape(-1)[pos])
    if any_requires_grad(a):
        record("take", out, (a,)).save("positions", positions)
    return out


# out = a with out.flatten()[positions] = v (v broadcast to positions' shape)
def put(a, positions, v):
    pos = _checked_index(positions, "put")
    _check_positions(pos, a.numel(), "put")
    values = np.broadcast_to(expand(v.detach(), positions.shape)._data, pos.shape)
    out = a._data.copy()                          # a fresh contiguous copy, so reshape(-1) is a view
    out.reshape(-1)[pos] = values if v.dtype is a.dtype else a.dtype.cast(values)
    out = make_tensor(out)
    if any_requires_grad(a, v):
        record("put", out, (a, v)).save("positions", positions)
    return out


# out = zeros(out_shape) with out.flatten()[positions] += v
def put_add(v, positions, out_shape):
    pos = _checked_index(positions, "put_add")
    out = np.zeros(out_shape, dtype=v._data.dtype)
    _check_positions(pos, out.size, "put_add")
    np.add.at(out.reshape(-1), pos, v._data)
    out = make_tensor(out)
    if any_requires_grad(v):
        record("put_add", out, (v,)).save("positions", positions)
    return out


# masked_fill(a, mask, value) = where(mask, value, a)
def masked_fill(a, mask, value):
    if mask.dtype is not _dt.bool_:
        raise TypeError(f"masked_fill: mask must be a bool tensor, got {mask.dtype.name}.")
    if value.ndim != 0:
        raise RuntimeError(f"masked_fill: value must be a number or a 0-d tensor, got shape "
                           f"{shape_str(value.shape)}.")
    out_shape = broadcast_shapes(a.shape, mask.shape, "masked_fill")
    if out_shape != a.shape:
        raise RuntimeError(f"masked_fill: mask of shape {shape_str(mask.shape)} does not broadcast to the input "
                           f"shape {shape_str(a.shape)}.")
    v = value if value.dtype is a.dtype else to_dtype(value, a.dtype)
    return where(mask, v, a)


# ===== in-place ================================================================================================
# Note [In-place ops]: an in-place op is computed out of place, from a snapshot of the tensor that carries its
# history (inplace_input), and the result is written back into the tensor's memory (assign_inplace); the tensor's
# grad_fn then moves to the new node, as in torch.

def _is_leaf_requiring_grad(t):
    return t.grad_fn is None and t._requires_grad


def inplace_input(self, op, other_requires_grad):
    """The value of `self` before an in-place op, with self's history: what the out-of-place op is computed from."""
    check_writable(self, op)
    if not is_grad_enabled():
        return self
    if _is_leaf_requiring_grad(self):
        raise RuntimeError(errors.ERR_LEAF_INPLACE.format(op=op))
    base = self._base
    if not self.requires_grad and not other_requires_grad and (base is None or not base.requires_grad):
        return self
    if base is not None:
        if _is_leaf_requiring_grad(base):
            raise RuntimeError(errors.ERR_LEAF_INPLACE.format(op=op))
        if not base._data.flags.c_contiguous:
            raise NotImplementedError(f"{op}: in-place writes into a view of a non-contiguous tensor that requires "
                                      "grad are not supported; write into the base tensor or use out-of-place ops.")
    # The out-of-place op reads self's current value, which the write is about to replace; give it a snapshot
    # that carries self's history so that any saved copy stays valid (Note [Saved tensor versions]).
    before = make_tensor(self._data.copy())
    before._requires_grad, before.grad_fn, before.output_nr = self._requires_grad, self.grad_fn, self.output_nr
    return before


def _with_history(t, history_of):
    """A tensor with t's memory and the given history, to feed t's current value into a recorded op."""
    h = make_tensor(t._data, t._storage)
    h._requires_grad, h.grad_fn, h.output_nr = history_of._requires_grad, history_of.grad_fn, history_of.output_nr
    return h


def _view_positions(view, base):
    """Flat positions, in the (contiguous) base, of the view's elements: the view's index map as int64."""
    item = base._data.itemsize
    at = (view._data.__array_interface__["data"][0] - base._data.__array_interface__["data"][0]) // item
    pos = np.full(view.shape, at, dtype=np.int64)
    for d, (n, stride) in enumerate(zip(view.shape, view._data.strides)):
        pos = pos + (np.arange(n, dtype=np.int64) * (stride // item)).reshape((1,) * d + (n,) + (1,) * (view.ndim - d - 1))
    return make_tensor(pos)


def _rebase_view_history(view, result):
    """Note [In-place writes into views]: writing into a view changes its base too. As torch's CopySlices does, the
    base's history becomes put(base, positions of the view, result) and the view's history becomes a take of that
    new base, so gradients reach both the old base and the value written."""
    base = view._base
    positions = _view_positions(view, base)
    new_base = put(_with_history(base, base), positions, result)
    base.grad_fn, base.output_nr = new_base.grad_fn, 0
    new_view = take(_with_history(base, base), positions)
    view.grad_fn, view.output_nr = new_view.grad_fn, 0


def has_internal_overlap(arr):
    """A dim of more than one element with stride 0: several elements share a memory location."""
    return arr.size > 0 and any(s == 0 and n > 1 for n, s in zip(arr.shape, arr.strides))


def check_writable(t, op):
    """See Note [Writable tensors] in csrc/dyngrad/tensor.h: refuse an in-place write into an expanded view or into
    read-only memory (a numpy array that is not writeable)."""
    arr = t._data
    if arr.size == 0:
        return
    if has_internal_overlap(arr):
        raise RuntimeError(errors.ERR_INTERNAL_OVERLAP.format(
            op=op, shape=shape_str(arr.shape), strides=shape_str(s // arr.itemsize for s in arr.strides)))
    if not arr.flags.writeable:
        raise RuntimeError(errors.ERR_READ_ONLY.format(op=op))


def _write(self, result, op):
    """The plain in-place write (write_into in C++): check, copy (broadcast, cast), bump the version."""
    check_writable(self, op)
    if self._data.size:   # (converted as to_dtype converts: bfloat16 rounds, floats into integers as C++ casts)
        values = result._data if result.dtype is self.dtype else self.dtype.cast(result._data)
        np.copyto(self._data, values, casting="unsafe")
    self._storage.version += 1


def assign_inplace(self, result, op):
    """Writes `result` (computed out of place) into self and moves self's history to result's."""
    if result.shape != self.shape:
        raise RuntimeError(f"{op}: the result of shape {shape_str(result.shape)} does not fit the tensor written in "
                           f"place, of shape {shape_str(self.shape)}.")
    # as torch: a float result is not written into an int tensor, nor an int one into a bool tensor
    if result.dtype.category > self.dtype.category:
        raise RuntimeError(f"{op}: the result type {result.dtype.name} can't be cast to the tensor's type "
                           f"{self.dtype.name}.")
    if is_grad_enabled() and _is_leaf_requiring_grad(self):
        raise RuntimeError(errors.ERR_LEAF_INPLACE.format(op=op))
    _write(self, result, op)
    if result.requires_grad and is_grad_enabled():
        if self._base is not None:
            _rebase_view_history(self, result)
        else:
            self.grad_fn, self.output_nr = result.grad_fn, result.output_nr


# self's old value is overwritten entirely: it gets a zero gradient (torch's CopyBackwards), src gets the rest
def copy_(self, src):
    if any_requires_grad(self, src) or (self._base is not None and any_requires_grad(self._base)):
        before = inplace_input(self, "copy_", src.requires_grad)
        written = where(_all_true(self.shape), to_dtype(expand(src, self.shape), self.dtype), before)
        assign_inplace(self, clone(written), "copy_")
        return
    broadcast_shapes(self.shape, src.shape, "copy_")
    _write(self, src, "copy_")


# out = value everywhere; the old value gets a zero gradient (multiplying it by 0 would turn inf into nan)
def fill_(self, value):
    if is_grad_enabled() and (self.requires_grad or (self._base is not None and self._base.requires_grad)):
        before = inplace_input(self, "fill_", False)
        zero, v = scalar_tensor(0, self.dtype), scalar_tensor(value, self.dtype)
        assign_inplace(self, add(where(_all_true(self.shape), zero, before), v), "fill_")
        return
    _write(self, scalar_tensor(value, self.dtype), "fill_")


def zero_(self):
    fill_(self, 0.0)


def _all_true(shape):
    return make_tensor(np.ones(shape, dtype=np.bool_))


from .ops_math import add, where  # noqa: E402  (ops_math uses this module too)
