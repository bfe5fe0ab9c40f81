"""nn.functional's linear layers: linear and bilinear, composites of the core's matmul (the C++ engine's fast path
serves linear), written with torch's signatures and shape rules."""

from ... import _C
from ..args import optional_tensor, shape_str, tensor_arg
from ..node_names import rename

def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    x = tensor_arg(input, "linear")
    w = tensor_arg(weight, "linear", "weight")
    b = optional_tensor(bias, "linear", "bias")
    if w.ndim not in (1, 2):
        raise RuntimeError(f"linear: weight must be 1-D or 2-D, got shape {shape_str(w.shape)}.")
    if x.ndim and x.shape[-1] != w.shape[-1]:
        raise RuntimeError(f"linear: the input {shape_str(x.shape)} has {x.shape[-1]} features in its last dim, but "
                           f"the weight {shape_str(w.shape)} expects {w.shape[-1]}.")
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
