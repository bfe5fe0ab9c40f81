"""Matrix products with torch's signatures: matmul (any batch dims, 1-D operands), mm, bmm."""
from .. import _C
from .args import shape_str, tensor_arg


def matmul(input, other):
    return _C.matmul(tensor_arg(input, "matmul"), tensor_arg(other, "matmul", "other"))


def mm(input, mat2):
    a, b = tensor_arg(input, "mm"), tensor_arg(mat2, "mm", "mat2")
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got {shape_str(a.shape)} and {shape_str(b.shape)}.")
    return _C.matmul(a, b)


def bmm(input, mat2):
    a, b = tensor_arg(input, "bmm"), tensor_arg(mat2, "bmm", "mat2")
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise RuntimeError(f"bmm: expected 3-D tensors with the same batch size, got {shape_str(a.shape)} and "
                           f"{shape_str(b.shape)}.")
    return _C.matmul(a, b)
