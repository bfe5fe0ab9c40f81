"""Reference engine: indexing: index_select, gather, take and their adjoints, put, masked_fill. Mirrors
csrc/dyngrad/ops_index.cpp, function for function.
"""
import numpy as np

from . import dtypes as _dt
from .errors import shape_str
from . import forward_ad
from .ops import record, any_requires_grad
from .tensor import make_tensor, broadcast_shapes, wrap_dim


def _checked_index(index, op):
    if index.dtype is _dt.int32:                     # torch takes int32 indices too (widened, as in C++)
        return index._data.astype(np.int64)
    if index.dtype is not _dt.int64:
        raise IndexError(f"{op}: indices must be an int64 or int32 tensor, got {index.dtype.name}.")
    return index._data


def _check_bounds(idx, size, dim, op, error=IndexError):
    """Indices in [0, size), as torch (see check_bounds in csrc/dyngrad/ops_index.cpp: negatives no longer wrap);
    torch raises IndexError for index_select/index_add and RuntimeError for gather/scatter."""
    bad = idx[(idx < 0) | (idx >= size)]
    if bad.size:
        raise error(f"{op}: index {int(bad.reshape(-1)[0])} is out of range for dimension {dim} of size {size}.")


def _record_index(op, out, input, index, dim):
    """What index_select, index_add, gather and scatter_add record: the index and the dim (ops_index.cpp's
    record_index)."""
    if any_requires_grad(input):
        node = record(op, out, (input,))
        node.save("index", index)
        node.args = {"dim": dim}
    if forward_ad.active(): forward_ad.attach(op, out, (input,), index=index, dim=dim)


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
    _record_index("index_select", out, a, index, d)
    return out


# out = zeros(out_shape); out.index_select(dim, index) += src
def index_add(src, dim, index, out_shape):
    idx = _checked_index(index, "index_add")
    if index.ndim > 1:
        raise IndexError(f"index_add: index must be 0-d or 1-D, got shape {shape_str(index.shape)}.")
    out_shape = tuple(out_shape)
    dim = wrap_dim(dim, len(out_shape), "index_add")
    src_shape = out_shape[:dim] + (idx.size,) + out_shape[dim + 1:] if out_shape else ()
    if tuple(src.shape) != src_shape:
        raise RuntimeError(f"index_add: src of shape {shape_str(src.shape)} does not fit an output of shape "
                           f"{shape_str(out_shape)} with {idx.size} indices along dim {dim} (expected "
                           f"{shape_str(src_shape)}).")
    size = out_shape[dim] if out_shape else 1
    _check_bounds(idx, size, dim, "index_add")
    out = np.zeros(out_shape, dtype=src._data.dtype)
    if out_shape:
        np.add.at(out, (np.s_[:],) * dim + (idx.reshape(-1) % max(size, 1),), src._data)
    else:
        out += src._data
    out = make_tensor(out)
    _record_index("index_add", out, src, index, dim)
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
    _record_index("gather", out, a, index, d)
    return out


# out = zeros(out_shape); out[i][index[i][j]] += src[i][j]
def scatter_add(src, dim, index, out_shape):
    idx = _checked_index(index, "scatter_add")
    out_shape, nd = tuple(out_shape), index.ndim
    if src.ndim != nd or len(out_shape) != nd:
        raise RuntimeError(f"scatter_add: src, index and the output need one number of dimensions, got shapes "
                           f"{shape_str(src.shape)}, {shape_str(index.shape)} and {shape_str(out_shape)}.")
    dim = wrap_dim(dim, nd, "scatter_add")
    for k in range(nd):
        if index.shape[k] > src.shape[k] or (k != dim and index.shape[k] > out_shape[k]):
            raise RuntimeError(f"scatter_add: index of shape {shape_str(index.shape)} is larger than src "
                               f"({shape_str(src.shape)}) or, outside dim {dim}, the output ({shape_str(out_shape)}) "
                               f"in dimension {k}.")
    size = out_shape[dim] if out_shape else 1
    _check_bounds(idx, size, dim, "scatter_add", RuntimeError)
    out = np.zeros(out_shape, dtype=src._data.dtype)
    if out_shape:
        np.add.at(out, _gather_key(idx, dim, size), src._data[tuple(np.s_[:n] for n in idx.shape)])
    else:
        out += src._data
    out = make_tensor(out)
    _record_index("scatter_add", out, src, index, dim)
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
    if forward_ad.active(): forward_ad.attach("take", out, (a,), positions=positions)
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
    if forward_ad.active(): forward_ad.attach("put", out, (a, v), positions=positions)
    return out


# out = zeros(out_shape) with out.flatten()[positions] += v
def put_add(v, positions, out_shape):
    pos = _checked_index(positions, "put_add")
    if v.shape != positions.shape:
        raise RuntimeError(f"put_add: values of shape {shape_str(v.shape)} for positions of shape "
                           f"{shape_str(positions.shape)}; expected one value per position.")
    out = np.zeros(out_shape, dtype=v._data.dtype)
    _check_positions(pos, out.size, "put_add")
    np.add.at(out.reshape(-1), pos, v._data)
    out = make_tensor(out)
    if any_requires_grad(v):
        record("put_add", out, (v,)).save("positions", positions)
    if forward_ad.active(): forward_ad.attach("put_add", out, (v,), positions=positions)
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


from .ops_math import where  # noqa: E402  (after the definitions: a cycle through primitives.py)
from .ops_shape import expand, to_dtype  # noqa: E402
