"""nn.functional's embedding functions: embedding (rows of a weight matrix looked up by index, with max_norm,
padding_idx and scale_grad_by_freq), one_hot, and embedding_bag: sums, means or maxima of bags of embedding rows,
without materialising the (bags, bag length, dim) tensor of an embedding followed by a reduction, with torch's
rules for offsets, per_sample_weights, padding_idx and include_last_offset.

sum and mean add the looked-up rows into their bags with index_add (the gradient of each row is its bag's
gradient, times its per-sample weight); max reads each bag's rows through a (bags, longest bag) table of row
positions and keeps, per column, the first maximum (which alone gets the gradient, as in torch).
"""
import numpy as np

from ... import _C
from ...autograd.grad_mode import no_grad
from .. import bridge
from ..args import refuse_complex, shape_str, tensor_arg, to_int, type_name
from ..node_names import rename, shows_as

MODES = ("sum", "mean", "max")


# the C++ engine's plain case of embedding in one call (Note [Fast paths of the gpt step], csrc/bindings/fast_paths.cpp);
# read once here, so that a recorder that swaps _C's functions does not see it (it returns None while one records)
_EMBEDDING_FAST = getattr(_C, "_embedding_fast", None)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """weight[input]: rows of weight for int64 indices of any shape; the padding row gets no gradient."""
    if (_EMBEDDING_FAST is not None and padding_idx is None and max_norm is None and scale_grad_by_freq is False and
            sparse is False):
        out = _EMBEDDING_FAST(input, weight)
        if out is not None:
            return out
    return _embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)


@shows_as("Embedding")
def _embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
               sparse=False):
    idx = tensor_arg(input, "embedding")
    w = tensor_arg(weight, "embedding", "weight")
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not supported yet.")
    if w.ndim != 2:
        raise RuntimeError(f"embedding: weight must be 2-D (num_embeddings, dim), got {shape_str(w.shape)}.")
    if idx.dtype is not _C.int64:
        raise IndexError(f"embedding: indices must be int64, got {idx.dtype.name}.")
    values = bridge.view(idx)
    bad = values[(values < 0) | (values >= w.shape[0])]
    if bad.size:
        raise IndexError(f"embedding: index {int(bad.reshape(-1)[0])} is out of range for dimension 0 of size "
                         f"{w.shape[0]}.")
    rows = _C.index_select(w, 0, _C.reshape(idx, (idx.numel(),)))
    if padding_idx is not None:          # the padding row gets no gradient
        p = to_int(padding_idx, "embedding", "padding_idx")
        if not -w.shape[0] <= p < w.shape[0]:
            raise AssertionError(f"embedding: padding_idx {p} must be within num_embeddings ({w.shape[0]}).")
        p = p % w.shape[0]
        keep = _C.compare("ne", _C.reshape(idx, (idx.numel(), 1)), _C.scalar_operand(p, idx))
        rows = _C.where(keep, rows, rows.detach())
    return _C.reshape(rows, tuple(idx.shape) + (w.shape[1],))


def one_hot(tensor, num_classes=-1):
    """int64 (..., num_classes) with a 1 at each index (num_classes=-1: one more than the largest index)."""
    t = tensor_arg(tensor, "one_hot", "tensor")
    if t.dtype is not _C.int64:
        raise RuntimeError(f"one_hot: expected an int64 tensor of class indices, got {t.dtype.name}.")
    idx = bridge.view(t)
    n = to_int(num_classes, "one_hot", "num_classes")
    if n < 0:
        if idx.size == 0:
            raise RuntimeError("one_hot: cannot infer num_classes from an empty tensor.")
        n = int(idx.max()) + 1
    bad = idx[(idx < 0) | (idx >= n)]
    if bad.size:
        raise RuntimeError(f"one_hot: class index {int(bad.reshape(-1)[0])} is out of range for {n} classes.")
    return bridge.copy((idx[..., None] == np.arange(n)).astype(np.int64), False)


def _renorm(weight, idx, max_norm, norm_type):
    """torch's max_norm: rows of weight used by idx whose norm exceeds max_norm are scaled in place (without
    recording a gradient) to max_norm / (norm + 1e-7) of themselves."""
    rows = np.unique(idx)
    if rows.size == 0:
        return
    w = weight.detach()
    values = np.asarray(bridge.view(w))[rows].astype(np.float64)
    p = float(norm_type)
    norms = np.linalg.norm(values, ord=p, axis=1) if p != 0 else (values != 0).sum(1).astype(np.float64)
    big = norms > max_norm
    if not big.any():
        return
    scale = np.where(big, max_norm / (norms + 1e-7), 1.0)
    with no_grad():
        positions = bridge.copy(rows[big].astype(np.int64), False)
        current = _C.index_select(w, 0, positions)
        factor = bridge.copy(scale[big].reshape(-1, 1).astype(np.dtype(w.dtype.name)), False)
        w[positions] = _C.mul(current, factor)


def _bags(n, offsets, include_last_offset, op):
    """(first, end) positions of each bag in the flat input of n indices."""
    off = np.asarray(offsets, dtype=np.int64).reshape(-1)
    if off.size == 0 and not include_last_offset:
        return off, off
    if off.size and off[0] != 0:
        raise RuntimeError(f"{op}: offsets[0] must be 0 (the first bag starts at the first index), got {off[0]}.")
    if off.size and off[-1] > n:
        raise RuntimeError(f"{op}: offsets[-1] ({off[-1]}) must not exceed the number of indices ({n}).")
    if np.any(np.diff(off) < 0):
        raise RuntimeError(f"{op}: offsets must be non-decreasing, got {off.tolist()}.")
    if include_last_offset:
        return off[:-1], off[1:]
    return off, np.append(off[1:], n)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """The sum, mean or max of each bag of rows of weight: bags are the rows of a 2-D input, or the runs of a 1-D
    input that start at offsets (with include_last_offset, offsets also holds the end of the last bag). Indices
    equal to padding_idx are left out of their bag; an empty bag gives zeros."""
    op = "embedding_bag"
    idx = tensor_arg(input, op)
    w = tensor_arg(weight, op, "weight")
    if mode == "max":
        refuse_complex(op, w, ordered=True)
    if offsets is not None:
        offsets = tensor_arg(offsets, op, "offsets")
    psw = per_sample_weights
    if psw is not None:
        psw = tensor_arg(psw, op, "per_sample_weights")
        if tuple(psw.shape) != tuple(idx.shape):
            raise ValueError(f"{op}: per_sample_weights must have the input's shape {shape_str(idx.shape)}, got "
                             f"{shape_str(psw.shape)}.")
    if w.ndim != 2:
        raise ValueError(f"{op}: weight must be 2-D (num_embeddings, embedding_dim), got shape "
                         f"{shape_str(w.shape)}.")
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: a 2-D input is a batch of equal bags and takes no offsets, got offsets of type "
                             f"{type_name(offsets)}.")
        offset_values = np.arange(idx.shape[0], dtype=np.int64) * idx.shape[1]     # bag b = row b
        include_last_offset = False
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError(f"{op}: a 1-D input needs 1-D offsets, got None.")
        if offsets.ndim != 1:
            raise ValueError(f"{op}: offsets must be 1-D, got shape {shape_str(offsets.shape)}.")
        offset_values = None
    else:
        raise ValueError(f"{op}: input must be 1-D or 2-D, got shape {shape_str(idx.shape)}.")
    if mode not in MODES:
        raise ValueError(f"{op}: mode must be 'sum', 'mean' or 'max', got {mode!r}.")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError(f"{op}: max mode does not support scale_grad_by_freq.")
    if mode == "max" and sparse:
        raise ValueError(f"{op}: max mode does not support sparse gradients.")
    if idx.dtype is not _C.int64 or (offsets is not None and offsets.dtype is not _C.int64):
        raise RuntimeError(f"{op}: input and offsets must be int64 tensors, got {idx.dtype.name}"
                           f"{'' if offsets is None else ' and ' + offsets.dtype.name}.")
    values = np.asarray(bridge.view(idx), dtype=np.int64).reshape(-1)
    num = w.shape[0]
    bad = np.flatnonzero((values < 0) | (values >= num))
    if bad.size:
        raise RuntimeError(f"{op}: index {values[bad[0]]} at position {bad[0]} is out of range for "
                           f"{num} embeddings.")
    if max_norm is not None:
        _renorm(w, values, max_norm, norm_type)
    if psw is not None and mode != "sum":
        raise NotImplementedError(f"{op}: per_sample_weights is only supported with mode='sum', got "
                                  f"mode={mode!r}.")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError(f"{op}: scale_grad_by_freq and sparse are not supported yet.")
    if psw is not None and psw.dtype is not w.dtype:
        raise RuntimeError(f"{op}: per_sample_weights ({psw.dtype.name}) must have the weight's dtype "
                           f"({w.dtype.name}).")
    if padding_idx is not None:
        padding_idx = to_int(padding_idx, op, "padding_idx")
        if not -num <= padding_idx < num:
            raise RuntimeError(f"{op}: padding_idx must be within the number of embeddings, {-num} through "
                               f"{num - 1}, got {padding_idx}.")
        padding_idx %= num
    if offset_values is None:
        offset_values = bridge.view(offsets)
    first, end = _bags(values.size, offset_values, include_last_offset, op)
    bags, dim = first.size, w.shape[1]
    # the bag of each index (-1: after the last bag, or a padding index: left out)
    bag_of = np.full(values.size, -1, dtype=np.int64)
    for b in np.flatnonzero(end > first):
        bag_of[first[b]:end[b]] = b
    if padding_idx is not None:
        bag_of[values == padding_idx] = -1
    kept = np.flatnonzero(bag_of >= 0)
    rows = _C.index_select(w, 0, bridge.copy(values[kept], False))           # (K, dim)
    if mode == "max":
        out = _bag_max(rows, bag_of[kept], bags, dim, w.dtype)
    else:
        if psw is not None:
            weights = _C.take(psw, bridge.copy(kept, False))
            rows = _C.mul(rows, _C.unsqueeze(weights, 1))
        out = _C.index_add(rows, 0, bridge.copy(bag_of[kept], False), (bags, dim))
        if mode == "mean":
            counts = np.maximum(np.bincount(bag_of[kept], minlength=bags), 1).astype(np.dtype(w.dtype.name))
            out = _C.div(out, bridge.copy(counts.reshape(-1, 1), False))
    return rename(out, "EmbeddingBagBackward", (w,) if psw is None else (w, psw))


def _bag_max(rows, bag_of, bags, dim, dtype):
    """Per bag and column, the first maximum of the bag's rows; an empty bag gives zeros."""
    k = rows.shape[0]
    counts = np.bincount(bag_of, minlength=bags)
    longest = max(int(counts.max()) if counts.size else 0, 1)
    # table[b, i]: the row of the i-th member of bag b; k (a row of -inf) past its end; k + 1 (a row of zeros)
    # at the start of an empty bag, so that it answers 0
    table = np.full((bags, longest), k, dtype=np.int64)
    order = np.argsort(bag_of, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) if bags else np.zeros(0, dtype=np.int64)
    slot = np.arange(k) - np.repeat(starts, counts)
    table[bag_of[order], slot] = order
    table[counts == 0, 0] = k + 1
    ext = _C.cat([rows, _C.full((1, dim), -np.inf, dtype), _C.full((1, dim), 0, dtype)], 0)
    members = _C.reshape(_C.index_select(ext, 0, bridge.copy(table.reshape(-1), False)),
                         (bags, longest, dim))
    arg = np.argmax(bridge.view(members.detach()), axis=1)                       # (bags, dim): first maximum
    picked = _C.gather(members, 1, bridge.copy(arg.reshape(bags, 1, dim).astype(np.int64), False))
    return _C.reshape(picked, (bags, dim))
