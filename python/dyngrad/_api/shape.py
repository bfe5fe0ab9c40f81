"""Shape ops with torch's signatures: reshape/view (varargs or a tuple as methods), transpose, squeeze, cat, split
with an int or a list of sizes, narrow, select, unbind. Views share memory with their input (the core decides)."""
from .. import _C
from .args import dims_arg, shape_arg, shape_args, shape_str, tensor_arg, tensor_list, to_int, wrap_dim


def reshape(input, shape):
    return _C.reshape(tensor_arg(input, "reshape"), shape_arg(shape, "reshape"))


def flatten(input, start_dim=0, end_dim=-1):
    return _C.flatten(tensor_arg(input, "flatten"), to_int(start_dim, "flatten", "start_dim"),
                      to_int(end_dim, "flatten", "end_dim"))


def transpose(input, dim0, dim1):
    return _C.transpose(tensor_arg(input, "transpose"), to_int(dim0, "transpose", "dim0"),
                        to_int(dim1, "transpose", "dim1"))


def t(input):
    """The transpose of a matrix (0-d and 1-d tensors are returned as they are)."""
    a = tensor_arg(input, "t")
    if a.ndim > 2:
        raise RuntimeError(f"t: expects a tensor with <= 2 dimensions, got shape {shape_str(a.shape)}; use "
                           "transpose or mT.")
    return a if a.ndim < 2 else _C.transpose(a, 0, 1)


def permute(input, dims):
    return _C.permute(tensor_arg(input, "permute"), shape_arg(dims, "permute", "dims"))


def squeeze(input, dim=None):
    a = tensor_arg(input, "squeeze")
    return _C.squeeze(a, None if dim is None else dims_arg(dim, "squeeze"))


def unsqueeze(input, dim):
    return _C.unsqueeze(tensor_arg(input, "unsqueeze"), to_int(dim, "unsqueeze", "dim"))


def broadcast_to(input, size):
    return _C.expand(tensor_arg(input, "broadcast_to"), shape_arg(size, "broadcast_to", "size"))


def cat(tensors, dim=0):
    return _C.cat(tensor_list(tensors, "cat"), to_int(dim, "cat", "dim"))


def stack(tensors, dim=0):
    return _C.stack(tensor_list(tensors, "stack"), to_int(dim, "stack", "dim"))


def split(tensor, split_size_or_sections, dim=0):
    """Pieces of `split_size_or_sections` elements along dim (the last may be smaller), or of the listed sizes."""
    a = tensor_arg(tensor, "split", "tensor")
    d = to_int(dim, "split", "dim")
    if isinstance(split_size_or_sections, (list, tuple)):
        return tuple(_C.split(a, shape_arg(split_size_or_sections, "split", "split_size_or_sections"), d))
    return tuple(_C.split_size(a, to_int(split_size_or_sections, "split", "split_size_or_sections"), d))


def chunk(input, chunks, dim=0):
    return tuple(_C.chunk(tensor_arg(input, "chunk"), to_int(chunks, "chunk", "chunks"), to_int(dim, "chunk", "dim")))


def unbind(input, dim=0):
    """The slices along dim, as a tuple of views."""
    a = tensor_arg(input, "unbind")
    if a.ndim == 0:
        raise IndexError("unbind: cannot unbind a 0-d tensor; it has no dimension to unbind along.")
    d = wrap_dim(to_int(dim, "unbind", "dim"), a.ndim, "unbind")
    return tuple(_C.select(a, d, i) for i in range(a.shape[d]))


def narrow(input, dim, start, length):
    """The view input[..., start:start + length, ...] along dim."""
    a = tensor_arg(input, "narrow")
    start, length = to_int(start, "narrow", "start"), to_int(length, "narrow", "length")
    return _C.slice(a, to_int(dim, "narrow", "dim"), start, start + length, 1)


def select(input, dim, index):
    return _C.select(tensor_arg(input, "select"), to_int(dim, "select", "dim"), to_int(index, "select", "index"))


# ----- Tensor-only forms -----------------------------------------------------------------------------------------

def reshape_method(self, *shape):
    return _C.reshape(self, shape_args(shape, "reshape", "shape"))


def view(self, *shape):
    """A view with a new shape (never a copy); view(dtype) reinterprets the elements' type."""
    if len(shape) == 1 and not isinstance(shape[0], (int, tuple, list)) and not hasattr(shape[0], "__index__"):
        from .args import dtype_arg
        return _C.to_dtype(self, dtype_arg(shape[0], "view"))
    return _C.view(self, shape_args(shape, "view", "shape"))


def view_as(self, other):
    return _C.view(self, tuple(tensor_arg(other, "view_as", "other").shape))


def reshape_as(self, other):
    return _C.reshape(self, tuple(tensor_arg(other, "reshape_as", "other").shape))


def permute_method(self, *dims):
    return _C.permute(self, shape_args(dims, "permute", "dims"))


def expand(self, *sizes):
    return _C.expand(self, shape_args(sizes, "expand", "size"))


def expand_as(self, other):
    return _C.expand(self, tuple(tensor_arg(other, "expand_as", "other").shape))


def T(self):
    return _C.permute(self, tuple(range(self.ndim - 1, -1, -1)))


def mT(self):
    return _C.mT(self)


def contiguous(self):
    return _C.contiguous(self)


def clone(input):
    return _C.clone(tensor_arg(input, "clone"))
