"""Reference engine: conversion, views and movement. Mirrors csrc/dyngrad/ops_shape.cpp, function for function;
indexing is ops_index.py, in-place writes inplace.py.

Views (reshape when the strides allow it, permute, expand, slice) wrap numpy views of the input's memory and share
its Storage, so they share its version counter; `_base` names the tensor owning the memory (Note [In-place writes
into views] at assign_inplace).
"""
import numpy as np

from . import dtypes as _dt
from . import errors
from . import forward_ad
from .errors import shape_str
from .ops import record, any_requires_grad
from .tensor import make_tensor, wrap_dim, shape_numel


def _view_of(arr, a):
    """A tensor over `arr`, which numpy made as a view of a's memory: same Storage (version counter), same base."""
    return make_tensor(arr, a._storage, a._base if a._base is not None else a)


# ===== conversion ==============================================================================================

def to_dtype(a, dtype):
    if a.dtype is dtype:
        return a
    out = make_tensor(np.array(dtype.cast(a._data), order="C"))
    if (dtype.is_floating_point or dtype.is_complex) and any_requires_grad(a):
        record("to_dtype", out, (a,))
    if forward_ad.active(): forward_ad.attach("to_dtype", out, (a,))
    return out


def clone(a):
    out = make_tensor(np.array(a._data, order="C"))
    if any_requires_grad(a):
        record("clone", out, (a,))
    if forward_ad.active(): forward_ad.attach("clone", out, (a,))
    return out


def contiguous(a):
    return a if a._data.flags.c_contiguous else clone(a)


# ===== views ===================================================================================================

def _record_view(op, out, a):
    if any_requires_grad(a):
        record(op, out, (a,))
    if forward_ad.active(): forward_ad.attach(op, out, (a,))
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


def view_as_real(a):
    """The complex tensor's (real, imag) pairs as a real tensor of shape (..., 2) over the same memory (Note
    [Complex views] in csrc/dyngrad/ops_shape.cpp)."""
    if not a.dtype.is_complex:
        raise RuntimeError(f"view_as_real: expected a complex tensor (complex64 or complex128), got {a.dtype.name}.")
    out = _view_of(a._data[..., None].view(a._data.real.dtype), a)
    if any_requires_grad(a):
        record("view_as_real", out, (a,))
    if forward_ad.active(): forward_ad.attach("view_as_real", out, (a,))
    return out


def view_as_complex(a):
    """A real tensor of shape (..., 2) as the complex tensor of its pairs, over the same memory."""
    if a.dtype.name not in ("float32", "float64"):
        raise RuntimeError(f"view_as_complex: expected a float32 or float64 tensor, got {a.dtype.name}.")
    if a.ndim < 1 or a.shape[-1] != 2:
        raise RuntimeError(f"view_as_complex: expected a tensor whose last dimension has size 2, got shape "
                           f"{shape_str(a.shape)}.")
    item = a._data.itemsize
    strides = tuple(s // item for s in a._data.strides)
    if a._data.size == 0:  # no memory to share; numpy gives an empty array zero strides, C++ any (torch accepts it)
        arr = np.ascontiguousarray(a._data).view(np.complex128 if a.dtype.name == "float64" else np.complex64)
        out = _view_of(arr[..., 0], a)
        if any_requires_grad(a):
            record("view_as_complex", out, (a,))
        if forward_ad.active(): forward_ad.attach("view_as_complex", out, (a,))
        return out
    if strides[-1] != 1:
        raise RuntimeError(f"view_as_complex: expected the last dimension to have stride 1, got strides "
                           f"{shape_str(strides)}; call .contiguous() first.")
    base = a._base if a._base is not None else a                 # the offset in elements, as C++ keeps it
    offset = (a._data.__array_interface__["data"][0] - base._data.__array_interface__["data"][0]) // item
    if offset % 2 or any(s % 2 and n != 1 for s, n in zip(strides[:-1], a.shape[:-1])):
        raise RuntimeError(f"view_as_complex: expected every other stride and the storage offset to be divisible by "
                           f"2, got strides {shape_str(strides)} and offset {offset}; call .contiguous() first.")
    arr = a._data.view(np.complex128 if a.dtype.name == "float64" else np.complex64)[..., 0]
    out = _view_of(arr, a)
    if any_requires_grad(a):
        record("view_as_complex", out, (a,))
    if forward_ad.active(): forward_ad.attach("view_as_complex", out, (a,))
    return out


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
    if forward_ad.active(): forward_ad.attach("permute", out, (a,), dims=tuple(wrapped))
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
    if forward_ad.active(): forward_ad.attach("slice", out, (a,), dim=d, start=start, step=step)
    return out


# out = zeros(input_shape) with out[..., start::step (as long as grad), ...] = grad
def slice_scatter(grad, input_shape, dim, start, step):
    out = np.zeros(input_shape, dtype=grad._data.dtype)
    length = grad.shape[dim]
    out[(np.s_[:],) * dim + (np.s_[start:start + length * step:step],)] = grad._data
    out = make_tensor(out)
    if any_requires_grad(grad):
        record("slice_scatter", out, (grad,)).args = {"dim": dim, "start": start, "step": step}
    if forward_ad.active(): forward_ad.attach("slice_scatter", out, (grad,), dim=dim, start=start, step=step)
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
    if forward_ad.active(): forward_ad.attach("cat", out, tuple(tensors), dim=d, sizes=tuple(sizes))
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
