"""Neural-net layers as functions, with torch.nn.functional's signatures: linear, bilinear, embedding, one_hot,
convolution, pooling. Composites are written here once, over the core's primitives. Activations, losses,
normalisation, dropout, distances and attention have their own modules beside this one."""
import numpy as np

from ... import _C
from ..args import optional_tensor, shape_str, tensor_arg, to_int


from ..node_names import rename, shows_as
# ----- layers as functions ---------------------------------------------------------------------------------------

def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    x = tensor_arg(input, "linear")
    w = tensor_arg(weight, "linear", "weight")
    b = optional_tensor(bias, "linear", "bias")
    if w.ndim not in (1, 2):
        raise RuntimeError(f"linear: weight must be 1-D or 2-D, got shape {shape_str(w.shape)}.")
    out = _C.matmul(x, _C.mT(w) if w.ndim == 2 else w)
    if b is not None:
        out = _C.add(out, b)
    # torch's node names for a 2-D input (the C++ fast path of linear sets the same)
    return rename(out, "AddmmBackward" if b is not None else "MmBackward", (x,)) if x.ndim == 2 else out


def bilinear(input1, input2, weight, bias=None):
    """x1^T A_o x2 + b_o for each output o: weight (out, in1, in2), inputs (..., in1) and (..., in2)."""
    x1 = tensor_arg(input1, "bilinear", "input1")
    x2 = tensor_arg(input2, "bilinear", "input2")
    w = tensor_arg(weight, "bilinear", "weight")
    b = optional_tensor(bias, "bilinear", "bias")
    if x1.ndim != x2.ndim:
        raise RuntimeError(f"bilinear: input dimensions do not match: got {x1.ndim} and {x2.ndim}.")
    if x1.ndim == 0 or tuple(x1.shape[:-1]) != tuple(x2.shape[:-1]):
        raise RuntimeError(f"bilinear: input batch dimensions do not match: got {shape_str(x1.shape)} and "
                           f"{shape_str(x2.shape)}.")
    if w.ndim != 3:
        raise RuntimeError(f"bilinear: expected a 3-D weight (out, in1, in2), got shape {shape_str(w.shape)}.")
    out, in1, in2 = w.shape
    if x1.shape[-1] != in1:
        raise RuntimeError(f"bilinear: input1 size does not match weight size: got {x1.shape[-1]} but expected "
                           f"{in1}.")
    if x2.shape[-1] != in2:
        raise RuntimeError(f"bilinear: input2 size does not match weight size: got {x2.shape[-1]} but expected "
                           f"{in2}.")
    if b is not None and (b.ndim != 1 or b.shape[0] != out):
        raise RuntimeError(f"bilinear: bias size does not match weight size: got {shape_str(b.shape)} but expected "
                           f"({out},).")
    # (x1 @ A) with A (in1, out * in2), then contracted with x2 over in2
    left = _C.matmul(x1, _C.reshape(_C.permute(w, (1, 0, 2)), (in1, out * in2)))
    left = _C.reshape(left, tuple(x1.shape[:-1]) + (out, in2))
    y = _C.sum(_C.mul(left, _C.unsqueeze(x2, -2)), (x1.ndim,), False)
    return _C.add(y, b) if b is not None else y


@shows_as("Embedding")
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """weight[input]: rows of weight for int64 indices of any shape; the padding row gets no gradient."""
    idx = tensor_arg(input, "embedding")
    w = tensor_arg(weight, "embedding", "weight")
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not supported yet.")
    if w.ndim != 2:
        raise RuntimeError(f"embedding: weight must be 2-D (num_embeddings, dim), got {shape_str(w.shape)}.")
    if idx.dtype is not _C.int64:
        raise IndexError(f"embedding: indices must be int64, got {idx.dtype.name}.")
    values = idx._numpy_view()
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
    idx = t._numpy_view()
    n = to_int(num_classes, "one_hot", "num_classes")
    if n < 0:
        if idx.size == 0:
            raise RuntimeError("one_hot: cannot infer num_classes from an empty tensor.")
        n = int(idx.max()) + 1
    bad = idx[(idx < 0) | (idx >= n)]
    if bad.size:
        raise RuntimeError(f"one_hot: class index {int(bad.reshape(-1)[0])} is out of range for {n} classes.")
    return _C.copy_from_numpy((idx[..., None] == np.arange(n)).astype(np.int64), False)
