"""Linear algebra with torch's signatures: the matrix products (matmul, mm, bmm, mv, dot, inner, outer, addmm and
friends, einsum, tensordot, kron, cross, trace, multi_dot), torch.linalg's factorisations and solvers (inv, det,
slogdet, solve, solve_triangular, cholesky, qr, eigh, svd, pinv, lstsq, ...) and the vector and matrix norms.

Products and norms are composites of core ops (matmul, mul, sum, permute, reshape, slice), so both engines
differentiate them to any order. A factorisation has no core op: its forward runs LAPACK through numpy.linalg
(numpy's wheels bundle OpenBLAS from the same scipy-openblas family on PyPI that dyngrad's BLAS comes from) inside a
custom autograd.Function whose backward is the matrix-calculus formula written with dyngrad ops, so that gradients
of gradients work too (Note [Outputs in linalg backwards]).
"""
import collections
import math
import os
import sys
import warnings

import numpy as np

from ... import _C
from ...autograd.function import Function
from ..args import (Tensor, broadcast_shapes, dtype_arg, number, numpy_dtype, shape_str, tensor_arg, tensor_list,
                   to_int, type_name, wrap_dim)
from ..node_names import shows_as


class LinAlgError(RuntimeError):
    """Raised by the linalg functions when the data make the problem unsolvable (a singular matrix, a matrix that is
    not positive-definite), as torch.linalg.LinAlgError."""


LinAlgError.__module__ = __name__.replace("._api.linalg", ".linalg")     # where users reach it: dyngrad.linalg


# torch.return_types of this family: named pairs that unpack like tuples
_named = collections.namedtuple
return_slogdet = _named("slogdet", ["sign", "logabsdet"])
return_linalg_slogdet = _named("linalg_slogdet", ["sign", "logabsdet"])
return_qr = _named("qr", ["Q", "R"])
return_linalg_qr = _named("linalg_qr", ["Q", "R"])
return_linalg_eigh = _named("linalg_eigh", ["eigenvalues", "eigenvectors"])
return_svd = _named("svd", ["U", "S", "V"])
return_linalg_svd = _named("linalg_svd", ["U", "S", "Vh"])
return_linalg_inv_ex = _named("linalg_inv_ex", ["inverse", "info"])
return_linalg_cholesky_ex = _named("linalg_cholesky_ex", ["L", "info"])
return_linalg_lstsq = _named("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


# ===== helpers ==================================================================================================

def _deprecated(message):
    """A UserWarning attributed to the caller's line: the first frame outside this shared layer (the out= wrapper
    and the methods add frames of their own)."""
    here, frame, level = os.path.dirname(os.path.abspath(__file__)), sys._getframe(1), 1
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == here:
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level + 1)


def _scaled(x, v):
    return _C.mul(x, _C.scalar_operand(v, x))


def _const(array, like):
    """A constant tensor (no history) from a numpy array, in like's dtype."""
    return _C.from_numpy(np.array(array, dtype=numpy_dtype(like.dtype), order="C"))


def _from_np(array, dtype):
    """A new tensor holding a copy of `array` in `dtype` (a forward's result)."""
    return _C.from_numpy(np.array(array, dtype=numpy_dtype(dtype), order="C"))


def _np(t):
    """A numpy view of t's values."""
    return t.detach()._numpy_view()


def _eye(n, like):
    return _const(np.eye(n), like)


def _index(values):
    return _C.from_numpy(np.array(values, dtype=np.int64))


def _check_matmul_dtypes(op, *tensors):
    """The products multiply tensors of one dtype (torch refuses mixed ones, and has no bool kernel)."""
    first = tensors[0].dtype
    for t in tensors[1:]:
        if t.dtype is not first:
            raise RuntimeError(f"{op}: expected tensors of the same dtype, got {first.name} and {t.dtype.name}.")
    if first.name == "bool":
        raise NotImplementedError(f"{op}: not implemented for bool tensors.")


def _float_input(op, t, name="A", not_implemented=False):
    if not t.dtype.is_floating_point:
        error = NotImplementedError if not_implemented else RuntimeError
        raise error(f"{op}: expected a floating-point tensor as {name}, got {t.dtype.name}.")


def _matrices(op, A, name="A", square=True, not_implemented=False):
    """A as a (batch of) float matrices: torch's checks in torch's order (dtype, dimensions, squareness)."""
    A = tensor_arg(A, op, name)
    _float_input(op, A, name, not_implemented)
    if A.ndim < 2:
        raise RuntimeError(f"{op}: {name} must have at least 2 dimensions, got shape {shape_str(A.shape)}.")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: {name} must be a batch of square matrices, got {A.shape[-2]} by {A.shape[-1]} "
                           "matrices.")
    return A


def _same_float_dtype(op, A, B):
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{op}: expected A and B of the same dtype, got {A.dtype.name} and {B.dtype.name}.")


def _recording(*tensors):
    """Whether a backward formula is being recorded (create_graph=True) with respect to one of `tensors`."""
    return _C.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _where_batch(info):
    """The '(batch element k) ' prefix of an error about matrix k of a batch (flat index), as torch's messages."""
    flat = np.asarray(info).reshape(-1)
    k = int(np.flatnonzero(flat)[0])
    return k, (f"(batch element {k}) " if np.ndim(info) > 0 else "")


def _diag(x):
    """The diagonal of a (batch of) square matrices (differentiable)."""
    return _C.sum(_C.mul(x, _eye(x.shape[-1], x)), (-1,), False)


def _diag_embed(v):
    """Square matrices with v on their diagonal (differentiable)."""
    return _C.mul(_C.unsqueeze(v, -1), _eye(v.shape[-1], v))


def _tri(x, lower, k=0):
    """tril(x, k) (lower) or triu(x, k) of the last two dims, as a product with a constant mask."""
    m, n = x.shape[-2], x.shape[-1]
    mask = np.tril(np.ones((m, n)), k) if lower else np.triu(np.ones((m, n)), k)
    return _C.mul(x, _const(mask, x))


# ===== products (composites of the core's matmul, mul, sum, permute, reshape) ==================================

def matmul(input, other):
    return _C.matmul(tensor_arg(input, "matmul"), tensor_arg(other, "matmul", "other"))


@shows_as("Mm")
def mm(input, mat2):
    a, b = tensor_arg(input, "mm"), tensor_arg(mat2, "mm", "mat2")
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got {shape_str(a.shape)} and {shape_str(b.shape)}.")
    _check_matmul_dtypes("mm", a, b)
    return _C.matmul(a, b)


@shows_as("Bmm")
def bmm(input, mat2):
    a, b = tensor_arg(input, "bmm"), tensor_arg(mat2, "bmm", "mat2")
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise RuntimeError(f"bmm: expected 3-D tensors with the same batch size, got {shape_str(a.shape)} and "
                           f"{shape_str(b.shape)}.")
    _check_matmul_dtypes("bmm", a, b)
    return _C.matmul(a, b)


def mv(input, vec):
    a, v = tensor_arg(input, "mv"), tensor_arg(vec, "mv", "vec")
    if a.ndim != 2 or v.ndim != 1:
        raise RuntimeError(f"mv: expected a 2-D matrix and a 1-D vector, got {shape_str(a.shape)} and "
                           f"{shape_str(v.shape)}.")
    _check_matmul_dtypes("mv", a, v)
    return _C.matmul(a, v)


def _dot(op, input, other, name):
    a, b = tensor_arg(input, op), tensor_arg(other, op, name)
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"{op}: expected 1-D tensors, got {a.ndim}-D and {b.ndim}-D.")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"{op}: expected vectors of the same length, got {a.shape[0]} and {b.shape[0]}.")
    _check_matmul_dtypes(op, a, b)
    return _C.matmul(a, b)


def dot(input, tensor):
    return _dot("dot", input, tensor, "tensor")


def vdot(input, other):
    """dot with the first vector conjugated: the same as dot for real tensors."""
    return _dot("vdot", input, other, "other")


def inner(input, other):
    """Sum over the last dims of input and other (a product with a 0-d operand)."""
    a, b = tensor_arg(input, "inner"), tensor_arg(other, "inner", "other")
    if a.ndim == 0 or b.ndim == 0:
        return _C.mul(a, b)
    _check_matmul_dtypes("inner", a, b)
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"inner: the last dimensions must match, got shapes {shape_str(a.shape)} and "
                           f"{shape_str(b.shape)}.")
    la, lb = list(range(a.ndim)), list(range(a.ndim, a.ndim + b.ndim))
    lb[-1] = la[-1]
    return _contract(a, la, b, lb, set(la[:-1]) | set(lb[:-1]))[0]


def outer(input, vec2):
    a, b = tensor_arg(input, "outer"), tensor_arg(vec2, "outer", "vec2")
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"outer: expected 1-D tensors, got {shape_str(a.shape)} and {shape_str(b.shape)}.")
    return _C.mul(_C.unsqueeze(a, 1), _C.unsqueeze(b, 0))


def _coefficient(value, dtype, op, name, truncate):
    """beta/alpha as a number of the result's kind: an integer result takes an int (torch truncates a float for the
    matmul family and refuses one for addr)."""
    v = number(value, op, name)
    if not dtype.is_floating_point and isinstance(v, float):
        if not truncate:
            raise RuntimeError(f"{op}: for integer tensors, {name} must not be a floating-point number, got {v}.")
        v = int(v)
    return v


def _add_product(op, input, product, beta, alpha, truncate=True):
    """beta * input + alpha * product, input broadcast to the product's shape (never the other way round)."""
    shape = tuple(product.shape)
    if input.ndim > len(shape) or any(s != 1 and s != t for s, t in zip(input.shape[::-1], shape[::-1])):
        raise RuntimeError(f"{op}: input of shape {shape_str(input.shape)} cannot be broadcast to the result's "
                           f"shape {shape_str(shape)}.")
    b = _coefficient(beta, product.dtype, op, "beta", truncate)
    a = _coefficient(alpha, product.dtype, op, "alpha", truncate)
    scaled = product if a == 1 else _scaled(product, a)
    if b == 0:                                # input is ignored: its NaNs and infs do not propagate
        return scaled if scaled is not product else _C.clone(product)
    return _C.add(input if b == 1 else _scaled(input, b), scaled)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2)."""
    i = tensor_arg(input, "addmm")
    a, b = tensor_arg(mat1, "addmm", "mat1"), tensor_arg(mat2, "addmm", "mat2")
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"addmm: expected 2-D matrices, got {shape_str(a.shape)} and {shape_str(b.shape)}.")
    _check_matmul_dtypes("addmm", i, a, b)
    return _add_product("addmm", i, _C.matmul(a, b), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    i = tensor_arg(input, "addmv")
    a, v = tensor_arg(mat, "addmv", "mat"), tensor_arg(vec, "addmv", "vec")
    if a.ndim != 2 or v.ndim != 1:
        raise RuntimeError(f"addmv: expected a 2-D matrix and a 1-D vector, got {shape_str(a.shape)} and "
                           f"{shape_str(v.shape)}.")
    _check_matmul_dtypes("addmv", i, a, v)
    return _add_product("addmv", i, _C.matmul(a, v), beta, alpha)


def _batches(op, b1, b2):
    if b1.ndim != 3 or b2.ndim != 3 or b1.shape[0] != b2.shape[0]:
        raise RuntimeError(f"{op}: expected 3-D tensors with the same batch size, got {shape_str(b1.shape)} and "
                           f"{shape_str(b2.shape)}.")


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * sum_i batch1[i] @ batch2[i]: one matmul of (n, B*m) by (B*m, p)."""
    i = tensor_arg(input, "addbmm")
    b1, b2 = tensor_arg(batch1, "addbmm", "batch1"), tensor_arg(batch2, "addbmm", "batch2")
    _batches("addbmm", b1, b2)
    _check_matmul_dtypes("addbmm", i, b1, b2)
    (nb, n, m), p = b1.shape, b2.shape[2]
    if b2.shape[1] != m:
        raise RuntimeError(f"addbmm: batch1 and batch2 shapes cannot be multiplied ({shape_str(b1.shape)} and "
                           f"{shape_str(b2.shape)}).")
    rows = _C.reshape(_C.permute(b1, (1, 0, 2)), (n, nb * m))
    return _add_product("addbmm", i, _C.matmul(rows, _C.reshape(b2, (nb * m, p))), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2), batch by batch."""
    i = tensor_arg(input, "baddbmm")
    b1, b2 = tensor_arg(batch1, "baddbmm", "batch1"), tensor_arg(batch2, "baddbmm", "batch2")
    _batches("baddbmm", b1, b2)
    _check_matmul_dtypes("baddbmm", i, b1, b2)
    return _add_product("baddbmm", i, _C.matmul(b1, b2), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    i = tensor_arg(input, "addr")
    v1, v2 = tensor_arg(vec1, "addr", "vec1"), tensor_arg(vec2, "addr", "vec2")
    if v1.ndim != 1 or v2.ndim != 1:
        raise RuntimeError(f"addr: expected 1-D vectors, got {shape_str(v1.shape)} and {shape_str(v2.shape)}.")
    product = outer(v1, v2)
    if i.dtype is not product.dtype:
        product = _C.to_dtype(product, _C.result_type(i, product))
    return _add_product("addr", i, product, beta, alpha, truncate=False)


def kron(input, other):
    """The Kronecker product: out[i*q + k, ...] = input[i, ...] * other[k, ...] in every dim."""
    a, b = tensor_arg(input, "kron"), tensor_arg(other, "kron", "other")
    nd = max(a.ndim, b.ndim)
    sa, sb = (1,) * (nd - a.ndim) + tuple(a.shape), (1,) * (nd - b.ndim) + tuple(b.shape)
    a2 = _C.reshape(a, tuple(x for s in sa for x in (s, 1)))
    b2 = _C.reshape(b, tuple(x for s in sb for x in (1, s)))
    return _C.reshape(_C.mul(a2, b2), tuple(x * y for x, y in zip(sa, sb)))


def _cross(op, a, b, dim):
    if a.ndim != b.ndim:
        raise RuntimeError(f"{op}: inputs must have the same number of dimensions, got {shape_str(a.shape)} and "
                           f"{shape_str(b.shape)}.")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{op}: expected input and other of the same dtype, got {a.dtype.name} and "
                           f"{b.dtype.name}.")
    shape = broadcast_shapes(a.shape, b.shape, op)
    if dim is None:                        # torch.cross's deprecated default: the first dim of size 3
        sizes = [d for d, s in enumerate(shape) if s == 3]
        if not sizes:
            raise RuntimeError(f"{op}: no dimension of size 3 in the inputs' shape {shape_str(shape)}.")
        d = sizes[0]
        _deprecated("cross: calling cross without dim is deprecated; pass dim explicitly (the default is the first "
                    "dimension of size 3, while linalg.cross defaults to dim=-1).")
    else:
        d = wrap_dim(to_int(dim, op, "dim"), len(shape), op)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"{op}: the inputs' dimension {dim if dim is not None else d} must have length 3, got "
                           f"{a.shape[d]} and {b.shape[d]}.")
    a, b = _C.expand(a, shape), _C.expand(b, shape)
    # (a x b)_i = a_{i+1} b_{i+2} - a_{i+2} b_{i+1}, indices mod 3
    i1, i2 = _index([1, 2, 0]), _index([2, 0, 1])
    return _C.sub(_C.mul(_C.index_select(a, d, i1), _C.index_select(b, d, i2)),
                  _C.mul(_C.index_select(a, d, i2), _C.index_select(b, d, i1)))


def cross(input, other, dim=None):
    return _cross("cross", tensor_arg(input, "cross"), tensor_arg(other, "cross", "other"), dim)


def linalg_cross(input, other, *, dim=-1):
    op = "linalg.cross"
    return _cross(op, tensor_arg(input, op), tensor_arg(other, op, "other"), dim)


def _diagonal(a, offset, d1, d2):
    """The diagonal of dims d1, d2 (wrapped, distinct) as a new last dim: flatten the two dims and take every
    (n+1)-th element (a slice, so the gradient is the core's)."""
    m, n = a.shape[d1], a.shape[d2]
    rest = [d for d in range(a.ndim) if d not in (d1, d2)]
    t = _C.permute(a, tuple(rest) + (d1, d2))
    flat = _C.reshape(t, tuple(a.shape[d] for d in rest) + (m * n,))
    if offset >= 0:
        count, start = max(0, min(m, n - offset)), offset
    else:
        count, start = max(0, min(m + offset, n)), -offset * n
    if count == 0:
        return _C.slice(flat, -1, 0, 0, 1)
    return _C.slice(flat, -1, start, start + (count - 1) * (n + 1) + 1, n + 1)


def linalg_diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals of A's matrices along dim1, dim2, as a last dim (torch.diagonal with matrix defaults)."""
    op = "linalg.diagonal"
    A = tensor_arg(A, op)
    d1 = wrap_dim(to_int(dim1, op, "dim1"), A.ndim, op)
    d2 = wrap_dim(to_int(dim2, op, "dim2"), A.ndim, op)
    if d1 == d2 or A.ndim < 2:
        raise RuntimeError(f"{op}: dim1 and dim2 must be two different dims, got {dim1} and {dim2}.")
    return _diagonal(A, to_int(offset, op, "offset"), d1, d2)


def trace(input):
    """The sum of the main diagonal of a matrix."""
    a = tensor_arg(input, "trace")
    if a.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, got a tensor with {a.ndim} dimensions.")
    if a.dtype.name == "bool":
        raise NotImplementedError("trace: not implemented for bool tensors.")
    return _C.sum(_diagonal(a, 0, 0, 1), (0,), False, None)


# ----- contraction of labelled operands (einsum, tensordot, inner) ---------------------------------------------

def _contract(a, la, b, lb, keep):
    """Contracts two operands whose dims carry the labels la, lb (lists of ints): labels in both are multiplied
    along; those not in `keep` are summed. The result's labels are [in both, kept] + [a's own] + [b's own], each
    group in its operand's order. One batched matmul of (batch, M, K) by (batch, K, N), or a product when K = 1.
    Labels of size 1 on one side broadcast against the other."""
    own_a = [l for l in la if l not in lb and l not in keep]
    if own_a:                                # summed before the product: fewer multiplications
        a = _C.sum(a, tuple(la.index(l) for l in own_a), False, None)
        la = [l for l in la if l not in own_a]
    own_b = [l for l in lb if l not in la and l not in keep]
    if own_b:
        b = _C.sum(b, tuple(lb.index(l) for l in own_b), False, None)
        lb = [l for l in lb if l not in own_b]
    batch = [l for l in la if l in lb and l in keep]
    summed = [l for l in la if l in lb and l not in keep]
    only_a = [l for l in la if l not in lb]
    only_b = [l for l in lb if l not in la]
    size = {}
    for t, labels in ((a, la), (b, lb)):
        for d, l in enumerate(labels):
            size[l] = t.shape[d] if size.get(l, 1) == 1 else size[l]
    a = _C.permute(a, tuple(la.index(l) for l in batch + only_a + summed))
    b = _C.permute(b, tuple(lb.index(l) for l in batch + summed + only_b))
    shared = tuple(size[l] for l in batch)
    a = _C.expand(a, shared + tuple(a.shape[len(batch):len(batch) + len(only_a)]) + tuple(size[l] for l in summed))
    b = _C.expand(b, shared + tuple(size[l] for l in summed) + tuple(b.shape[len(batch) + len(summed):]))
    nb = math.prod(shared)
    m = math.prod(a.shape[len(batch):len(batch) + len(only_a)])
    n = math.prod(b.shape[len(batch) + len(summed):])
    k = math.prod(size[l] for l in summed)
    a3 = _C.reshape(a, (nb, m, k))
    b3 = _C.reshape(b, (nb, k, n))
    out = _C.mul(a3, b3) if k == 1 else _C.matmul(a3, b3)
    shape = shared + tuple(a.shape[len(batch):len(batch) + len(only_a)]) + tuple(b.shape[len(batch) + len(summed):])
    return _C.reshape(out, shape), batch + only_a + only_b


_ELLIPSIS = 52          # label of the first ellipsis dim; letters are 0..51 ('A'..'Z', 'a'..'z')


def _letter(ch, equation, pos):
    if "A" <= ch <= "Z":
        return ord(ch) - ord("A")
    if "a" <= ch <= "z":
        return 26 + ord(ch) - ord("a")
    raise RuntimeError(f"einsum(): invalid subscript {ch!r} at index {pos} of the equation {equation!r}; "
                       "subscripts must be letters a-z or A-Z.")


def _label_name(label):
    if label >= _ELLIPSIS:
        return "..."
    return chr(ord("A") + label) if label < 26 else chr(ord("a") + label - 26)


def _parse_term(term, start, equation, what):
    """A term's labels, with None where its ellipsis stands."""
    labels, i = [], 0
    while i < len(term):
        ch = term[i]
        if ch == ".":
            if term[i:i + 3] != "...":
                raise RuntimeError(f"einsum(): found '.' for {what} that is not part of an ellipsis in "
                                   f"{equation!r}.")
            if None in labels:
                raise RuntimeError(f"einsum(): found more than one ellipsis for {what} in {equation!r}.")
            labels.append(None)
            i += 3
            continue
        labels.append(_letter(ch, equation, start + i))
        i += 1
    return labels


def _sublist_equation(args):
    """einsum(op0, sublist0, op1, sublist1, ..., [sublist_out]) as an equation and its operands."""
    def term(sub):
        if not isinstance(sub, (list, tuple)):
            raise TypeError(f"einsum(): expected a list of subscripts after each operand, got {type_name(sub)}.")
        out = ""
        for s in sub:
            if s is Ellipsis:
                out += "..."
                continue
            s = to_int(s, "einsum", "a subscript")
            if not 0 <= s < 52:
                raise ValueError(f"einsum(): subscripts in the sublist format must be in [0, 52), got {s}.")
            out += _label_name(s)
        return out
    operands, terms = [], []
    for i in range(0, len(args) - 1, 2):
        operands.append(args[i])
        terms.append(term(args[i + 1]))
    equation = ",".join(terms)
    if len(args) % 2 == 1:
        equation += "->" + term(args[-1])
    return equation, operands


def einsum(*args):
    """torch.einsum: 'ij,jk->ik' style equations (implicit output, ellipsis, repeated subscripts for diagonals,
    broadcasting of size-1 dims) and the sublist format. Operands are contracted pairwise, each time the pair whose
    result is smallest (Note [einsum's contraction order])."""
    if len(args) < 2:
        raise ValueError("einsum(): must specify the equation string and at least one operand, or at least one "
                         "operand and its subscripts list.")
    if isinstance(args[0], str):
        equation, operands = args[0], list(args[1:])
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
    elif isinstance(args[0], Tensor):
        equation, operands = _sublist_equation(args)
    else:
        raise TypeError(f"einsum(): expected an equation string as the first argument, got {type_name(args[0])}.")
    operands = tensor_list(operands, "einsum", "operands")
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) > len(operands):
        raise RuntimeError(f"einsum(): the equation {equation!r} names {len(terms)} operands but {len(operands)} "
                           "were given.")
    if len(terms) < len(operands):
        raise RuntimeError(f"einsum(): {len(operands)} operands were given but the equation {equation!r} names "
                           f"only {len(terms)}.")
    dtype = operands[0].dtype
    for t in operands[1:]:
        if t.dtype is not dtype:
            raise RuntimeError(f"einsum(): expected operands of the same dtype, got {dtype.name} and "
                               f"{t.dtype.name}.")
    if dtype.name == "bool" and len(operands) > 1:
        raise NotImplementedError("einsum(): not implemented for bool tensors.")
    # labels per operand; the ellipsis dims of all operands broadcast together, aligned on the right
    parsed, pos = [], 0
    for k, term in enumerate(terms):
        parsed.append(_parse_term(term, pos, equation, f"operand {k}"))
        pos += len(term) + 1
    n_ell = 0
    for k, (labels, t) in enumerate(zip(parsed, operands)):
        named = len([l for l in labels if l is not None])
        if None in labels:
            if t.ndim < named:
                raise RuntimeError(f"einsum(): operand {k} has {t.ndim} dimensions, fewer than the {named} "
                                   f"subscripts of its term {terms[k]!r}.")
            n_ell = max(n_ell, t.ndim - named)
        elif t.ndim != named:
            raise RuntimeError(f"einsum(): the term {terms[k]!r} has {named} subscripts but operand {k} has "
                               f"{t.ndim} dimensions (and no ellipsis).")
    ops = []
    for k, (labels, t) in enumerate(zip(parsed, operands)):
        full = []
        for l in labels:
            if l is None:
                e = t.ndim - (len(labels) - 1)
                full += [_ELLIPSIS + n_ell - e + j for j in range(e)]
            else:
                full.append(l)
        ops.append((t, full))
    counts = collections.Counter(l for _, labels in ops for l in labels)
    if arrow:
        out_labels = []
        for l in _parse_term(rhs, len(lhs) + 2, equation, "the output"):
            new = list(range(_ELLIPSIS, _ELLIPSIS + n_ell)) if l is None else [l]
            for x in new:
                if x in out_labels:
                    raise RuntimeError(f"einsum(): output subscript {_label_name(x)} appears more than once in "
                                       f"{equation!r}.")
                if x not in counts and x < _ELLIPSIS:
                    raise RuntimeError(f"einsum(): output subscript {_label_name(x)} does not appear in any input "
                                       f"term of {equation!r}.")
            out_labels += new
    else:
        out_labels = list(range(_ELLIPSIS, _ELLIPSIS + n_ell)) + sorted(
            l for l, c in counts.items() if c == 1 and l < _ELLIPSIS)
    # sizes: a label's sizes must agree, or be 1 (broadcast); a repeated label within a term takes a diagonal
    size = {}
    for k, (t, labels) in enumerate(ops):
        for d, l in enumerate(labels):
            s = t.shape[d]
            first = labels.index(l)
            if first != d and t.shape[first] != s:
                raise RuntimeError(f"einsum(): subscript {_label_name(l)} is repeated for operand {k} but the sizes "
                                   f"do not match, {t.shape[first]} != {s}.")
            if size.get(l, 1) != 1 and s != 1 and size[l] != s:
                raise RuntimeError(f"einsum(): subscript {_label_name(l)} has size {s} for operand {k}, which does "
                                   f"not broadcast with the size {size[l]} seen before.")
            size[l] = s if size.get(l, 1) == 1 else size[l]
    ops = [_take_diagonals(t, labels) for t, labels in ops]
    keep_out = set(out_labels)
    while len(ops) > 1:
        best = None
        for i in range(len(ops)):
            for j in range(i + 1, len(ops)):
                needed = keep_out.union(*(set(ops[x][1]) for x in range(len(ops)) if x not in (i, j)))
                result = [l for l in dict.fromkeys(ops[i][1] + ops[j][1]) if l in needed]
                cost = math.prod(size[l] for l in result)
                if best is None or cost < best[0]:
                    best = (cost, i, j, needed)
        _, i, j, needed = best
        merged = _contract(ops[i][0], ops[i][1], ops[j][0], ops[j][1], needed)
        ops = [op for x, op in enumerate(ops) if x not in (i, j)] + [merged]
    t, labels = ops[0]
    extra = [d for d, l in enumerate(labels) if l not in keep_out]
    if extra:
        t = _C.sum(t, tuple(extra), False, None)
        labels = [l for l in labels if l in keep_out]
    t = _C.permute(t, tuple(labels.index(l) for l in out_labels))
    shape = tuple(size.get(l, 1) for l in out_labels)
    return _C.expand(t, shape) if tuple(t.shape) != shape else t


def _take_diagonals(t, labels):
    """Replaces each label repeated within one operand by its diagonal (as a last dim)."""
    labels = list(labels)
    while len(set(labels)) != len(labels):
        l = next(x for x in labels if labels.count(x) > 1)
        d1 = labels.index(l)
        d2 = labels.index(l, d1 + 1)
        t = _diagonal(t, 0, d1, d2)
        labels = [x for k, x in enumerate(labels) if k not in (d1, d2)] + [l]
    return t, labels

# Note [einsum's contraction order]: einsum contracts two operands at a time (a batched matmul after a permute and
# a reshape), choosing each time the pair whose result has the fewest elements (the first such pair on ties), and
# sums a label out as soon as neither another operand nor the output needs it. This greedy rule is opt_einsum's
# cheap default; it finds the good order of chains (ab,bc,cd->ad with a small a contracts from the small end) without
# the exponential search of an optimal order.


def tensordot(a, b, dims=2):
    """Sums the products of a's last `dims` dims with b's first (dims an int), or of the listed dims of each (a pair
    of lists). The result's dims are a's remaining dims, then b's."""
    op = "tensordot"
    a, b = tensor_arg(a, op, "a"), tensor_arg(b, op, "b")
    if isinstance(dims, Tensor):
        dims = dims.item() if dims.ndim == 0 else dims.tolist()
    if isinstance(dims, (int, np.integer)) and not isinstance(dims, bool):
        dims = int(dims)
        if dims < 0:
            raise RuntimeError(f"{op}: dims must be >= 0, got {dims}.")
        if dims > a.ndim or dims > b.ndim:
            raise RuntimeError(f"{op}: dims={dims} is more than the dimensions of a {shape_str(a.shape)} or of b "
                               f"{shape_str(b.shape)}.")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    elif isinstance(dims, (list, tuple)) and len(dims) == 2:
        da, db = dims
        for x in (da, db):
            if not isinstance(x, (list, tuple)):
                raise TypeError(f"{op}: expected dims as an int or a pair of lists of ints, got a pair holding "
                                f"{type_name(x)}.")
        da = [wrap_dim(to_int(d, op, "dims"), a.ndim, op) for d in da]
        db = [wrap_dim(to_int(d, op, "dims"), b.ndim, op) for d in db]
    else:
        raise TypeError(f"{op}: expected dims as an int or a pair of lists of ints, got {type_name(dims)}.")
    if len(da) != len(db):
        raise RuntimeError(f"{op}: both lists of dims must have the same length, got {len(da)} and {len(db)}.")
    if len(set(da)) != len(da) or len(set(db)) != len(db):
        raise RuntimeError(f"{op}: a dim appears more than once in dims {da}, {db}.")
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y]:
            raise RuntimeError(f"{op}: contracted dimensions must match, but a has size {a.shape[x]} in dim {x} and "
                               f"b has size {b.shape[y]} in dim {y}.")
    _check_matmul_dtypes(op, a, b)
    la = list(range(a.ndim))
    lb = [a.ndim + d for d in range(b.ndim)]
    for x, y in zip(da, db):
        lb[y] = la[x]
    keep = {l for l in la if l not in lb} | {l for l in lb if l not in la}
    return _contract(a, la, b, lb, keep)[0]


def _chain_order(shapes):
    """The cheapest parenthesisation of a chain of matrices (classic dynamic programming on the flop count):
    split[i][j] is where the product of matrices i..j splits."""
    n = len(shapes)
    dims = [shapes[0][0]] + [s[1] for s in shapes]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain_product(mats, split, i, j):
    if i == j:
        return mats[i]
    k = split[i][j]
    return _C.matmul(_chain_product(mats, split, i, k), _chain_product(mats, split, k + 1, j))


def multi_dot(tensors):
    """The product of a chain of matrices in the cheapest order; the first and the last may be vectors."""
    op = "linalg.multi_dot"
    ts = tensor_list(tensors, op)
    if len(ts) < 2:
        raise RuntimeError(f"{op}: expected at least 2 tensors, got {len(ts)}.")
    for i, t in enumerate(ts):
        end = i in (0, len(ts) - 1)
        if t.ndim != 2 and not (end and t.ndim == 1):
            which = "the first tensor" if i == 0 else "the last tensor" if i == len(ts) - 1 else f"tensor {i}"
            raise RuntimeError(f"{op}: {which} must be {'1-D or 2-D' if end else '2-D'}, got {t.ndim}-D.")
        if t.dtype is not ts[0].dtype:
            raise RuntimeError(f"{op}: all tensors must have the same dtype, but tensor 0 is {ts[0].dtype.name} and "
                               f"tensor {i} is {t.dtype.name}.")
    if ts[0].dtype.name == "bool":
        raise NotImplementedError(f"{op}: not implemented for bool tensors.")
    row, col = ts[0].ndim == 1, ts[-1].ndim == 1
    mats = list(ts)
    if row:
        mats[0] = _C.unsqueeze(mats[0], 0)
    if col:
        mats[-1] = _C.unsqueeze(mats[-1], 1)
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"{op}: tensors {i} and {i + 1} with shapes {shape_str(ts[i].shape)} and "
                               f"{shape_str(ts[i + 1].shape)} cannot be multiplied.")
    out = _chain_product(mats, _chain_order([tuple(m.shape) for m in mats]), 0, len(mats) - 1)
    squeeze = ((0,) if row else ()) + ((1,) if col else ())
    return _C.squeeze(out, squeeze) if squeeze else out


def chain_matmul(*matrices):
    """Deprecated by torch in favour of linalg.multi_dot, which it calls."""
    if not matrices:
        raise RuntimeError("chain_matmul(): expected one or more matrices.")
    for i, m in enumerate(matrices):
        if not isinstance(m, Tensor):
            raise TypeError(f"chain_matmul(): expected tensors, got {type_name(m)} at position {i}.")
        if m.ndim != 2:
            raise RuntimeError(f"chain_matmul(): expected 2-D matrices, got {m.ndim} dimensions at position {i}.")
    _deprecated("chain_matmul is deprecated and will be removed; use linalg.multi_dot instead (it takes a list).")
    return _C.clone(matrices[0]) if len(matrices) == 1 else multi_dot(list(matrices))


def vecdot(x, y, *, dim=-1):
    """sum(x * y, dim) with broadcasting (x conjugated for complex tensors)."""
    op = "linalg.vecdot"
    x, y = tensor_arg(x, op, "x"), tensor_arg(y, op, "y")
    _float_input(op, x, "x")
    if x.dtype is not y.dtype:
        raise RuntimeError(f"{op}: expected x and y of the same dtype, got {x.dtype.name} and {y.dtype.name}.")
    shape = broadcast_shapes(x.shape, y.shape, op)
    d = wrap_dim(to_int(dim, op, "dim"), len(shape), op)
    return _C.sum(_C.mul(x, y), (d,), False, None)


# ===== factorisations: numpy.linalg forwards, dyngrad backwards ==================================================
#
# Note [Outputs in linalg backwards]: the formulas below need the forward's outputs (A^-1, Q and R, U, S and V...).
# A Function saves them detached: saving the returned tensors themselves would close a reference cycle (ctx ->
# output -> its node -> ctx). When the backward is itself recorded (create_graph=True) and an input requires grad,
# it recomputes them through the Function, so that second derivatives see how they depend on the input.
# Conventions: `g` is dL/d(out); real matrices, so conjugate transposes are transposes (mT).

def _first_zero_pivot(a):
    """LAPACK getrf's info for one matrix: the 1-based index of the first exactly-zero pivot of its LU factorisation
    with partial pivoting, 0 if there is none."""
    u = np.array(a, dtype=np.float64)
    n = u.shape[-1]
    for k in range(n):
        p = k + int(np.argmax(np.abs(u[k:, k])))
        if u[p, k] == 0:
            return k + 1
        u[[k, p]] = u[[p, k]]
        u[k + 1:, k:] -= np.outer(u[k + 1:, k] / u[k, k], u[k, k:])
    return 0


def _per_matrix(factor, a, info_of_failure):
    """(factor of each matrix, LAPACK-style info) of a stack: the whole stack in one numpy call when every matrix
    succeeds; otherwise matrix by matrix, a failing one getting NaNs and info_of_failure(matrix) (> 0)."""
    info = np.zeros(a.shape[:-2], dtype=np.int64)
    try:
        return factor(a), info
    except np.linalg.LinAlgError:
        pass
    out = np.full(a.shape, np.nan, dtype=a.dtype)
    for idx in np.ndindex(*a.shape[:-2]):
        try:
            out[idx] = factor(a[idx])
        except np.linalg.LinAlgError:
            info[idx] = info_of_failure(a[idx])
    return out, info


def _lapack_inv(a):
    """(inverses, info) of a stack of matrices; a singular matrix gets NaNs and its getrf info (> 0)."""
    return _per_matrix(np.linalg.inv, a, lambda m: _first_zero_pivot(m) or m.shape[-1])


def _raise_singular(op, info):
    if np.any(info):
        k, where = _where_batch(info)
        raise LinAlgError(f"{op}: {where}the input matrix is singular: the diagonal element "
                          f"{int(np.asarray(info).reshape(-1)[k])} of its LU factorization is zero, so it has no "
                          "inverse.")


def _first_non_pd_minor(m):
    """The order of the first leading minor of m that is not positive-definite (LAPACK potrf's info)."""
    for k in range(1, m.shape[-1] + 1):
        try:
            np.linalg.cholesky(m[:k, :k])
        except np.linalg.LinAlgError:
            return k
    return m.shape[-1]


def _lapack_cholesky(a):
    """(lower Cholesky factors, info) of a stack of matrices, reading their lower triangles; a matrix that is not
    positive-definite gets NaNs and the order of its first leading minor that is not (LAPACK potrf's info)."""
    return _per_matrix(np.linalg.cholesky, a, _first_non_pd_minor)


def _raise_not_pd(op, info):
    if np.any(info):
        k, where = _where_batch(info)
        raise LinAlgError(f"{op}: {where}the factorization could not be completed because the input is not "
                          f"positive-definite (its leading minor of order {int(np.asarray(info).reshape(-1)[k])} is "
                          "not positive-definite).")


def _info_tensor(info):
    """LAPACK's info, as int32 (torch's dtype for it)."""
    return _C.from_numpy(np.array(info, dtype=np.int32))


def _lapack_solve_triangular(a, b, upper, unitriangular):
    """A^-1 B reading only A's upper or lower triangle (and not its diagonal if unitriangular), as LAPACK's trsm:
    a zero on the diagonal gives infs and NaNs, not an error. A lower system is flipped into an upper one, on which
    numpy's LU solve pivots nowhere and is exactly back substitution."""
    n = a.shape[-1]
    t = np.triu(a) if upper else np.tril(a)
    idx = np.arange(n)
    if unitriangular:
        t[..., idx, idx] = 1
    if not upper:
        t, b = t[..., ::-1, ::-1], b[..., ::-1, :]
    if np.all(t[..., idx, idx] != 0):
        x = np.linalg.solve(t, b)
    else:
        x = np.zeros(np.broadcast_shapes(t.shape[:-2], b.shape[:-2]) + b.shape[-2:], dtype=b.dtype)
        with np.errstate(all="ignore"):
            for i in range(n - 1, -1, -1):
                rest = np.einsum("...j,...jk->...k", t[..., i, i + 1:], x[..., i + 1:, :])
                x[..., i, :] = (b[..., i, :] - rest) / t[..., i, i, None]
    return x[..., ::-1, :] if not upper else x


class LinalgInv(Function):
    """linalg.inv: LAPACK getrf/getri (no core op factorises a matrix)."""

    @staticmethod
    def forward(ctx, A):
        out, info = _lapack_inv(_np(A))
        _raise_singular("linalg.inv", info)
        X = _from_np(out, A.dtype)
        ctx.save_for_backward(A, X.detach())
        return X

    # X = A^-1  ->  gA = -X^T g X^T
    @staticmethod
    def backward(ctx, g):
        A, X = ctx.saved_tensors
        if _recording(A):
            X = LinalgInv.apply(A)
        Xt = _C.mT(X)
        return _C.neg(_C.matmul(_C.matmul(Xt, g), Xt))


def _adjugate_t(A):
    """adj(A)^T, the gradient of det at any matrix, singular ones included: with A = U S V^T,
    adj(A)^T = det(U) det(V) U diag(prod_{j != i} s_j) V^T (differentiable through the SVD)."""
    U, S, Vh = LinalgSvd.apply(A, False)
    sign = np.linalg.det(_np(U)) * np.linalg.det(_np(Vh))
    n = S.shape[-1]
    others = None
    for j in range(n):          # c_i = prod_{j != i} s_j, without dividing by a zero s_i
        factor = _C.where(_C.from_numpy(np.arange(n) == j), _C.scalar_operand(1.0, S),
                          _C.unsqueeze(_C.select(S, -1, j), -1))
        others = factor if others is None else _C.mul(others, factor)
    if others is None:
        others = _C.mul(S, _C.scalar_operand(0.0, S))
    adj = _C.matmul(_C.mul(U, _C.unsqueeze(others, -2)), Vh)
    return _C.mul(adj, _const(sign[..., None, None], A))


class LinalgDet(Function):
    """linalg.det: LAPACK getrf through numpy.linalg.det."""

    @staticmethod
    def forward(ctx, A):
        d = _from_np(np.linalg.det(_np(A)), A.dtype)
        ctx.save_for_backward(A, d.detach())
        return d

    # d = det(A)  ->  gA = g d A^-T (= g adj(A)^T, which also holds where A is singular)
    @staticmethod
    def backward(ctx, g):
        A, d = ctx.saved_tensors
        g2 = _C.unsqueeze(_C.unsqueeze(g, -1), -1)
        if A.shape[-1] == 0:
            return _C.mul(A, _C.scalar_operand(0.0, A))
        if np.any(_np(d) == 0):
            return _C.mul(g2, _adjugate_t(A))
        if _recording(A):
            d = LinalgDet.apply(A)
        X = LinalgInv.apply(A) if _recording(A) else _from_np(np.linalg.inv(_np(A)), A.dtype)
        return _C.mul(_C.mul(g2, _C.unsqueeze(_C.unsqueeze(d, -1), -1)), _C.mT(X))


class LinalgSlogdet(Function):
    """linalg.slogdet: LAPACK getrf through numpy.linalg.slogdet; the sign is not differentiable."""

    @staticmethod
    def forward(ctx, A):
        sign, logabs = np.linalg.slogdet(_np(A))
        s, l = _from_np(sign, A.dtype), _from_np(logabs, A.dtype)
        ctx.mark_non_differentiable(s)
        ctx.save_for_backward(A, l.detach())
        return s, l

    # logabsdet = log|det A|  ->  gA = g A^-T; at a singular matrix adj(A)^T / det(A), infinite as torch's
    @staticmethod
    def backward(ctx, g_sign, g):
        A, logabs = ctx.saved_tensors
        g2 = _C.unsqueeze(_C.unsqueeze(g, -1), -1)
        if np.any(np.isneginf(_np(logabs))):
            with np.errstate(all="ignore"):
                a = _np(A)
                adj = _np(_adjugate_t(A.detach()))
                inv_t = adj / np.linalg.det(a)[..., None, None]
            return _C.mul(g2, _const(inv_t, A))
        X = LinalgInv.apply(A) if _recording(A) else _from_np(np.linalg.inv(_np(A)), A.dtype)
        return _C.mul(g2, _C.mT(X))


class LinalgSolve(Function):
    """linalg.solve for A X = B, B a batch of matrices with A's batch shape: LAPACK gesv."""

    @staticmethod
    def forward(ctx, A, B):
        try:
            out = np.linalg.solve(_np(A), _np(B))
        except np.linalg.LinAlgError:
            raise LinAlgError("linalg.solve: the solver failed because the input matrix is singular.") from None
        X = _from_np(out, A.dtype)
        ctx.save_for_backward(A, B, X.detach())
        return X

    # X = A^-1 B  ->  gB = A^-T g,  gA = -gB X^T
    @staticmethod
    def backward(ctx, g):
        A, B, X = ctx.saved_tensors
        gB = LinalgSolve.apply(_C.mT(A), g)
        if not ctx.needs_input_grad[0]:
            return None, gB
        if _recording(A, B):
            X = LinalgSolve.apply(A, B)
        return _C.neg(_C.matmul(gB, _C.mT(X))), gB


class LinalgSolveTriangular(Function):
    """linalg.solve_triangular for A X = B (left): LAPACK trsm semantics (only A's triangle is read)."""

    @staticmethod
    def forward(ctx, A, B, upper, unitriangular):
        X = _from_np(_lapack_solve_triangular(_np(A), _np(B), upper, unitriangular), A.dtype)
        ctx.upper, ctx.unitriangular = upper, unitriangular
        ctx.save_for_backward(A, B, X.detach())
        return X

    # X = A^-1 B  ->  gB = A^-T g,  gA = -gB X^T restricted to the triangle the forward read
    @staticmethod
    def backward(ctx, g):
        A, B, X = ctx.saved_tensors
        gB = LinalgSolveTriangular.apply(_C.mT(A), g, not ctx.upper, ctx.unitriangular)
        if not ctx.needs_input_grad[0]:
            return None, gB, None, None
        if _recording(A, B):
            X = LinalgSolveTriangular.apply(A, B, ctx.upper, ctx.unitriangular)
        k = 1 if ctx.upper else -1
        gA = _tri(_C.neg(_C.matmul(gB, _C.mT(X))), not ctx.upper, k if ctx.unitriangular else 0)
        return gA, gB, None, None


def _solve_tri(A, B, upper):
    return LinalgSolveTriangular.apply(A, B, upper, False)


class LinalgCholesky(Function):
    """linalg.cholesky, lower factor, reading A's lower triangle: LAPACK potrf."""

    @staticmethod
    def forward(ctx, A, op):
        out, info = _lapack_cholesky(_np(A))
        _raise_not_pd(op, info)
        L = _from_np(out, A.dtype)
        ctx.save_for_backward(A, L.detach())
        return L

    # A = L L^T  ->  gA = sym(L^-T Phi(L^T gL) L^-1), Phi = the lower triangle with its diagonal halved,
    # sym(X) = (X + X^T) / 2
    @staticmethod
    def backward(ctx, g):
        A, L = ctx.saved_tensors
        if _recording(A):
            L = LinalgCholesky.apply(A, "linalg.cholesky")
        P = _C.matmul(_C.mT(L), g)
        P = _C.sub(_tri(P, True), _scaled(_diag_embed(_diag(P)), 0.5))
        Lt = _C.mT(L)
        Y = _solve_tri(Lt, P, True)                          # L^-T P
        gA = _C.mT(_solve_tri(Lt, _C.mT(Y), True))           # (L^-T Y^T)^T = Y L^-1
        return _scaled(_C.add(gA, _C.mT(gA)), 0.5), None


def _copyltu(M):
    """The symmetric matrix whose lower triangle is M's."""
    low = _tri(M, True, -1)
    return _C.add(_C.add(low, _C.mT(low)), _diag_embed(_diag(M)))


def _qr_backward_tall(gQ, gR, Q, R):
    """A = QR with m >= n (reduced): gA = (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q."""
    M = _C.sub(_C.matmul(R, _C.mT(gR)), _C.matmul(_C.mT(gQ), Q))
    B = _C.add(gQ, _C.matmul(Q, _copyltu(M)))
    return _C.mT(_solve_tri(R, _C.mT(B), True))               # B R^-T = (R^-1 B^T)^T


class LinalgQr(Function):
    """linalg.qr: LAPACK geqrf/orgqr through numpy.linalg.qr."""

    @staticmethod
    def forward(ctx, A, mode):
        a = _np(A)
        if mode == "r":
            Q, R = _from_np(np.zeros(0), A.dtype), _from_np(np.linalg.qr(a, mode="r"), A.dtype)
        else:
            q, r = np.linalg.qr(a, mode=mode)
            Q, R = _from_np(q, A.dtype), _from_np(r, A.dtype)
        ctx.mode = mode
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A, Q.detach(), R.detach())
        return Q, R

    # m >= n: _qr_backward_tall. m < n: A = [X | Y], X = Q U, Y = Q V (R = [U | V]): gY = Q gV and X's gradient is
    # the square case with gQ + Y gV^T
    @staticmethod
    def backward(ctx, gQ, gR):
        A, Q, R = ctx.saved_tensors
        m, n = A.shape[-2], A.shape[-1]
        if ctx.mode == "r":
            raise RuntimeError("linalg.qr: the derivative depends on Q, which is not computed when mode='r'; use "
                               "mode='reduced' to differentiate through linalg.qr.")
        if ctx.mode == "complete" and m > n:
            raise RuntimeError("linalg.qr: the QR decomposition is not differentiable when mode='complete' and A has "
                               "more rows than columns.")
        if _recording(A):
            Q, R = LinalgQr.apply(A, ctx.mode)
        if gQ is None:
            gQ = _C.mul(Q, _C.scalar_operand(0.0, Q))
        if gR is None:
            gR = _C.mul(R, _C.scalar_operand(0.0, R))
        if m >= n:
            return _qr_backward_tall(gQ, gR, Q, R), None
        Y = _C.slice(A, -1, m, n, 1)
        U, gU = _C.slice(R, -1, 0, m, 1), _C.slice(gR, -1, 0, m, 1)
        gV = _C.slice(gR, -1, m, n, 1)
        gX = _qr_backward_tall(_C.add(gQ, _C.matmul(Y, _C.mT(gV))), gU, Q, U)
        return _C.cat([gX, _C.matmul(Q, gV)], -1), None


def _inverse_gaps(values):
    """F_ij = 1 / (v_j - v_i) off the diagonal, 0 on it (v_i equal to v_j off the diagonal gives inf, as torch)."""
    n = values.shape[-1]
    eye = _eye(n, values)
    gaps = _C.sub(_C.unsqueeze(values, -2), _C.unsqueeze(values, -1))
    return _C.mul(_C.div(_C.scalar_operand(1.0, values), _C.add(gaps, eye)), _C.sub(_C.scalar_operand(1.0, eye), eye))


class LinalgEigh(Function):
    """linalg.eigh: LAPACK syevd through numpy.linalg.eigh, reading the UPLO triangle."""

    @staticmethod
    def forward(ctx, A, UPLO):
        w, v = np.linalg.eigh(_np(A), UPLO=UPLO)
        L, V = _from_np(w, A.dtype), _from_np(v, A.dtype)
        ctx.UPLO = UPLO
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A, L.detach(), V.detach())
        return L, V

    # A = V diag(L) V^T  ->  gA = V (diag(gL) + F o skew(V^T gV)) V^T, F_ij = 1 / (L_j - L_i) off the diagonal,
    # skew(X) = (X - X^T) / 2: only V^T dV's skew part moves V, which keeps gA symmetric (as torch's)
    @staticmethod
    def backward(ctx, gL, gV):
        A, L, V = ctx.saved_tensors
        if _recording(A):
            L, V = LinalgEigh.apply(A, ctx.UPLO)
        inner = None if gL is None else _diag_embed(gL)
        if gV is not None:
            VtgV = _C.matmul(_C.mT(V), gV)
            term = _C.mul(_scaled(_C.sub(VtgV, _C.mT(VtgV)), 0.5), _inverse_gaps(L))
            inner = term if inner is None else _C.add(inner, term)
        if inner is None:
            return None, None
        return _C.matmul(_C.matmul(V, inner), _C.mT(V)), None


class LinalgSvd(Function):
    """linalg.svd: LAPACK gesdd through numpy.linalg.svd."""

    @staticmethod
    def forward(ctx, A, full_matrices):
        u, s, vh = np.linalg.svd(_np(A), full_matrices=full_matrices)
        U, S, Vh = _from_np(u, A.dtype), _from_np(s, A.dtype), _from_np(vh, A.dtype)
        ctx.full_matrices = full_matrices
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A, U.detach(), S.detach(), Vh.detach())
        return U, S, Vh

    # A = U S V^T (k = min(m, n) singular values):
    #   gA = U [J S + diag(gS) + S K] V^T + (I - U U^T) gU S^-1 V^T + U S^-1 gV^T (I - V V^T),
    #   J = F o (U^T gU - gU^T U),  K = F o (V^T gV - gV^T V),  F_ij = 1 / (s_j^2 - s_i^2) off the diagonal.
    # With full_matrices, only the first k columns of U and rows of V^T count (the rest are not determined by A).
    @staticmethod
    def backward(ctx, gU, gS, gVh):
        A, U, S, Vh = ctx.saved_tensors
        if _recording(A):
            U, S, Vh = LinalgSvd.apply(A, ctx.full_matrices)
        m, n = A.shape[-2], A.shape[-1]
        k = S.shape[-1]
        if ctx.full_matrices:
            U, Vh = _C.slice(U, -1, 0, k, 1), _C.slice(Vh, -2, 0, k, 1)
            gU = None if gU is None else _C.slice(gU, -1, 0, k, 1)
            gVh = None if gVh is None else _C.slice(gVh, -2, 0, k, 1)
        if gU is None and gVh is None:
            if gS is None:
                return None, None
            return _C.matmul(_C.mul(U, _C.unsqueeze(gS, -2)), Vh), None
        V = _C.mT(Vh)
        gV = None if gVh is None else _C.mT(gVh)
        F = _inverse_gaps(_C.mul(S, S))
        inner = None if gS is None else _diag_embed(gS)
        s_row, s_col = _C.unsqueeze(S, -2), _C.unsqueeze(S, -1)
        inv_s = _C.div(_C.scalar_operand(1.0, S), S)
        extra = None
        if gU is not None:
            UtgU = _C.matmul(_C.mT(U), gU)
            J = _C.mul(F, _C.sub(UtgU, _C.mT(UtgU)))
            term = _C.mul(J, s_row)
            inner = term if inner is None else _C.add(inner, term)
            if m > k:
                extra = _C.matmul(_C.mul(_C.sub(gU, _C.matmul(U, UtgU)), _C.unsqueeze(inv_s, -2)), Vh)
        if gV is not None:
            VtgV = _C.matmul(Vh, gV)
            K = _C.mul(F, _C.sub(VtgV, _C.mT(VtgV)))
            term = _C.mul(s_col, K)
            inner = term if inner is None else _C.add(inner, term)
            if n > k:
                gVt = _C.mT(gV)
                side = _C.matmul(_C.mul(U, _C.unsqueeze(inv_s, -2)), _C.sub(gVt, _C.matmul(_C.matmul(gVt, V), Vh)))
                extra = side if extra is None else _C.add(extra, side)
        gA = _C.matmul(_C.matmul(U, inner), Vh)
        return (gA if extra is None else _C.add(gA, extra)), None


def _pinv_numpy(a, atol, rtol, hermitian):
    """The pseudo-inverse of a stack of matrices: singular values (|eigenvalues| if hermitian) at most
    max(atol, rtol * largest) count as zero."""
    if hermitian:
        w, v = np.linalg.eigh(a)
        s = np.abs(w)
    else:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
    big = np.max(s, axis=-1, initial=0.0)
    cut = np.maximum(atol, rtol * big)[..., None]
    with np.errstate(divide="ignore"):
        if hermitian:
            inv = np.where(s > cut, 1 / np.where(s > cut, w, 1), 0)
            return np.matmul(v * inv[..., None, :], np.swapaxes(v, -1, -2))
        inv = np.where(s > cut, 1 / np.where(s > cut, s, 1), 0)
        return np.matmul(np.swapaxes(vh, -1, -2) * inv[..., None, :], np.swapaxes(u, -1, -2))


class LinalgPinv(Function):
    """linalg.pinv: LAPACK gesdd (or syevd if hermitian) through numpy.linalg."""

    @staticmethod
    def forward(ctx, A, atol, rtol, hermitian):
        P = _from_np(_pinv_numpy(_np(A), atol, rtol, hermitian), A.dtype)
        ctx.params = (atol, rtol, hermitian)
        ctx.save_for_backward(A, P.detach())
        return P

    # P = A^+ (locally constant rank)  ->  gA = -P^T g P^T + (I - A P) g^T P P^T + P^T P g^T (I - P A)
    @staticmethod
    def backward(ctx, g):
        A, P = ctx.saved_tensors
        if _recording(A):
            P = LinalgPinv.apply(A, *ctx.params)
        Pt, gt = _C.mT(P), _C.mT(g)
        t1 = _C.neg(_C.matmul(_C.matmul(Pt, g), Pt))
        X = _C.matmul(_C.matmul(gt, P), Pt)
        t2 = _C.sub(X, _C.matmul(A, _C.matmul(P, X)))
        Z = _C.matmul(_C.matmul(Pt, P), gt)
        t3 = _C.sub(Z, _C.matmul(_C.matmul(Z, P), A))
        return _C.add(_C.add(t1, t2), t3), None, None, None


# ===== torch.linalg's functions over the factorisations ===========================================================

def inv(A):
    return LinalgInv.apply(_matrices("linalg.inv", A))


def inv_ex(A, *, check_errors=False):
    """(inverse, info): info > 0 marks a singular matrix (its inverse is then NaN) instead of raising, unless
    check_errors."""
    A = _matrices("linalg.inv_ex", A)
    _, info = _lapack_inv(_np(A))
    if np.any(info):
        if check_errors:
            _raise_singular("linalg.inv_ex", info)
        out, _ = _lapack_inv(_np(A))
        return return_linalg_inv_ex(_from_np(out, A.dtype), _info_tensor(info))
    return return_linalg_inv_ex(LinalgInv.apply(A), _info_tensor(info))


def inverse(input):
    return LinalgInv.apply(_matrices("linalg.inv", input, "input"))


def linalg_det(A):
    return LinalgDet.apply(_matrices("linalg.det", A))


def det(input):
    return LinalgDet.apply(_matrices("linalg.det", input, "input"))


def linalg_slogdet(A):
    """(sign, log|det|) of A's matrices."""
    return return_linalg_slogdet(*LinalgSlogdet.apply(_matrices("linalg.slogdet", A)))


def slogdet(input):
    return return_slogdet(*LinalgSlogdet.apply(_matrices("linalg.slogdet", input, "input")))


def logdet(input):
    """log(det(input)): NaN where the determinant is negative, -inf where it is zero."""
    sign, logabs = LinalgSlogdet.apply(_matrices("logdet", input, "input"))
    nan = _C.scalar_operand(float("nan"), logabs)
    return _C.where(_C.compare("lt", sign, _C.scalar_operand(0.0, sign)), nan, logabs)


def _solve_operands(op, A, B, left, vectors=True):
    """A, B broadcast over their batch dims, B as a batch of matrices; whether B was a (batch of) vector(s): with
    `vectors`, B is one if it is 1-D, or if its shape is A's without the last dim."""
    A = _matrices(op, A)
    B = tensor_arg(B, op, "B")
    _float_input(op, B, "B")
    _same_float_dtype(op, A, B)
    vector = vectors and (B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1])))
    Bm = _C.unsqueeze(B, -1) if vector else B
    if Bm.ndim < 2:
        raise RuntimeError(f"{op}: B must have at least 1 dimension, got shape {shape_str(B.shape)}.")
    n = A.shape[-1]
    if (Bm.shape[-2] if left else Bm.shape[-1]) != n:
        raise RuntimeError(f"{op}: incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} "
                           f"({A.shape[-2]}x{n} and {Bm.shape[-2]}x{Bm.shape[-1]}).")
    batch = broadcast_shapes(A.shape[:-2], Bm.shape[:-2], op)
    A = _C.expand(A, tuple(batch) + tuple(A.shape[-2:])) if tuple(A.shape[:-2]) != tuple(batch) else A
    if tuple(Bm.shape[:-2]) != tuple(batch):
        Bm = _C.expand(Bm, tuple(batch) + tuple(Bm.shape[-2:]))
    return A, Bm, vector


def solve(A, B, *, left=True):
    """X with A X = B (XA = B if not left), A's matrices square and invertible."""
    op = "linalg.solve"
    A, Bm, vector = _solve_operands(op, A, B, left)
    if left:
        X = LinalgSolve.apply(A, Bm)
    else:                                     # X A = B  <=>  A^T X^T = B^T
        X = _C.mT(LinalgSolve.apply(_C.mT(A), _C.mT(Bm)))
    return _C.squeeze(X, (-1,)) if vector else X


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (XA = B if not left), reading only A's upper or lower triangle; a zero on its diagonal gives
    infs and NaNs, not an error (LAPACK trsm)."""
    op = "linalg.solve_triangular"
    A = _matrices(op, A)
    B = tensor_arg(B, op, "B")
    _float_input(op, B, "B")
    if B.ndim < 2:
        raise RuntimeError(f"{op}: B must have at least 2 dimensions, got shape {shape_str(B.shape)}.")
    _same_float_dtype(op, A, B)
    A, B, _ = _solve_operands(op, A, B, left, vectors=False)
    upper, unitriangular = bool(upper), bool(unitriangular)
    if left:
        return LinalgSolveTriangular.apply(A, B, upper, unitriangular)
    return _C.mT(LinalgSolveTriangular.apply(_C.mT(A), _C.mT(B), not upper, unitriangular))


def _cholesky(op, A, upper):
    if upper:          # U = L^T, computed from A^T's lower triangle: A's upper one, as LAPACK potrf('U')
        return _C.mT(LinalgCholesky.apply(_C.mT(A), op))
    return LinalgCholesky.apply(A, op)


def linalg_cholesky(A, *, upper=False):
    """L with A = L L^T (lower), or U = L^T with A = U^T U if upper; A symmetric positive-definite."""
    return _cholesky("linalg.cholesky", _matrices("linalg.cholesky", A), bool(upper))


def cholesky_ex(A, *, upper=False, check_errors=False):
    """(L, info): info > 0 marks a matrix that is not positive-definite (its factor is then NaN) instead of
    raising, unless check_errors."""
    op = "linalg.cholesky_ex"
    A = _matrices(op, A)
    source = _np(A) if not upper else np.swapaxes(_np(A), -1, -2)
    out, info = _lapack_cholesky(source)
    if np.any(info):
        if check_errors:
            _raise_not_pd(op, info)
        out = _from_np(out, A.dtype)
        return return_linalg_cholesky_ex(_C.mT(out) if upper else out, _info_tensor(info))
    return return_linalg_cholesky_ex(_cholesky(op, A, bool(upper)), _info_tensor(info))


def cholesky(input, upper=False):
    """Deprecated by torch in favour of linalg.cholesky."""
    A = _matrices("linalg.cholesky", input, "input")
    _deprecated("cholesky is deprecated in favour of linalg.cholesky; L = cholesky(A, upper) is "
                "linalg.cholesky(A, upper=upper).")
    return _cholesky("linalg.cholesky", A, bool(upper))


def linalg_qr(A, mode="reduced"):
    """(Q, R) with A = Q R; mode 'reduced' (k = min(m, n) columns of Q), 'complete' (Q square) or 'r' (R only, Q
    empty)."""
    op = "linalg.qr"
    A = _matrices(op, A, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"{op}: unrecognised mode {mode!r}; expected 'reduced' (the default), 'r' or 'complete'.")
    return return_linalg_qr(*LinalgQr.apply(A, mode))


def qr(input, some=True):
    """Deprecated by torch in favour of linalg.qr: some=True is mode 'reduced', False 'complete'."""
    A = _matrices("linalg.qr", input, "input", square=False)
    _deprecated("qr is deprecated in favour of linalg.qr; Q, R = qr(A, some) is linalg.qr(A, 'reduced' if some "
                "else 'complete').")
    return return_qr(*LinalgQr.apply(A, "reduced" if some else "complete"))


def _uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"linalg.eigh: expected UPLO to be 'L' or 'U', got {UPLO!r}.")
    return UPLO


def eigh(A, UPLO="L"):
    """(eigenvalues in ascending order, eigenvectors as columns) of symmetric matrices, reading the UPLO
    triangle."""
    A = _matrices("linalg.eigh", A, not_implemented=True)
    return return_linalg_eigh(*LinalgEigh.apply(A, _uplo(UPLO)))


def eigvalsh(A, UPLO="L"):
    """The eigenvalues of symmetric matrices, ascending (their gradient needs the eigenvectors)."""
    A = _matrices("linalg.eigh", A, not_implemented=True)
    UPLO = _uplo(UPLO)
    if _recording(A):
        return LinalgEigh.apply(A, UPLO)[0]
    return _from_np(np.linalg.eigvalsh(_np(A), UPLO=UPLO), A.dtype)


def _driver(driver, op):
    if driver is not None:
        raise RuntimeError(f"{op}: driver= is only supported on CUDA (cuSOLVER); dyngrad runs on the CPU, so pass "
                           "driver=None.")


def linalg_svd(A, full_matrices=True, *, driver=None):
    """(U, S, Vh) with A = U diag(S) Vh, S descending; full_matrices gives square U and Vh."""
    op = "linalg.svd"
    A = _matrices(op, A, square=False)
    _driver(driver, op)
    return return_linalg_svd(*LinalgSvd.apply(A, bool(full_matrices)))


def _svdvals(A):
    if _recording(A):
        return LinalgSvd.apply(A, False)[1]
    return _from_np(np.linalg.svd(_np(A), compute_uv=False), A.dtype)


def svdvals(A, *, driver=None):
    """The singular values of A's matrices, descending."""
    op = "linalg.svd"
    A = _matrices(op, A, square=False)
    _driver(driver, op)
    return _svdvals(A)


def svd(input, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with input = U diag(S) V^T (V, not V^T); some=False gives square U and V. Without
    compute_uv, U and V are zeros of shapes (m, m) and (n, n)."""
    A = _matrices("linalg.svd", input, "input", square=False)
    if not compute_uv:
        S = _svdvals(A)
        batch, (m, n) = tuple(A.shape[:-2]), tuple(A.shape[-2:])
        return return_svd(_C.full(batch + (m, m), 0.0, A.dtype), S, _C.full(batch + (n, n), 0.0, A.dtype))
    U, S, Vh = LinalgSvd.apply(A, not some)
    return return_svd(U, S, _C.mT(Vh))


def _tolerance(value, op, name):
    """atol/rtol: a number, or a tensor broadcast over the batch."""
    if value is None:
        return None
    if isinstance(value, Tensor):
        return np.array(_np(value), dtype=np.float64)
    return float(number(value, op, name))


def _tolerances(A, atol, rtol, op):
    """torch's rule: without rtol, rtol is eps * max(m, n) unless atol is given (and positive), then 0."""
    atol, rtol = _tolerance(atol, op, "atol"), _tolerance(rtol, op, "rtol")
    if rtol is None:
        eps = np.finfo(numpy_dtype(A.dtype)).eps
        rtol = eps * max(A.shape[-2], A.shape[-1]) if atol is None or np.all(np.asarray(atol) <= 0) else 0.0
    return (0.0 if atol is None else atol), rtol


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse; singular values at most max(atol, rtol * largest) count as zero."""
    op = "linalg.pinv"
    A = _matrices(op, A, square=bool(hermitian))
    atol, rtol = _tolerances(A, atol, rtol, op)
    return LinalgPinv.apply(A, atol, rtol, bool(hermitian))


def pinverse(input, rcond=1e-15):
    """torch.pinverse: pinv with rtol=rcond."""
    A = _matrices("linalg.pinv", input, "input", square=False)
    return LinalgPinv.apply(A, 0.0, float(number(rcond, "pinverse", "rcond")), False)


def matrix_rank(A, tol=None, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values (|eigenvalues| if hermitian) above max(atol, rtol * largest); torch's older
    overload matrix_rank(A, tol) is atol=tol with rtol=0."""
    op = "linalg.matrix_rank"
    A = _matrices(op, A, square=bool(hermitian))
    if tol is not None:
        if atol is not None or rtol is not None:
            raise RuntimeError(f"{op}: pass either tol or atol/rtol, not both.")
        atol, rtol = tol, 0.0
    atol, rtol = _tolerances(A, atol, rtol, op)
    a = _np(A)
    s = np.abs(np.linalg.eigvalsh(a)) if hermitian else np.linalg.svd(a, compute_uv=False)
    cut = np.maximum(atol, rtol * np.max(s, axis=-1, initial=0.0))[..., None]
    return _C.from_numpy(np.array(np.sum(s > cut, axis=-1), dtype=np.int64))


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares (minimum-norm) solution X of A X = B, with the residuals (squared, for tall full-rank A
    with drivers other than the default gelsy), ranks (not for gels) and singular values (gelsd, gelss) that
    LAPACK's driver would return; empty tensors where the driver computes none. X is pinv(A) B, differentiable."""
    op = "linalg.lstsq"
    A = _matrices(op, A, square=False)
    B = tensor_arg(B, op, "B")
    _float_input(op, B, "B")
    _same_float_dtype(op, A, B)
    if driver is not None and driver not in _LSTSQ_DRIVERS:
        raise RuntimeError(f"{op}: driver must be one of {', '.join(_LSTSQ_DRIVERS)}, got {driver!r}.")
    driver = driver or "gelsy"
    vector = B.ndim == A.ndim - 1
    Bm = _C.unsqueeze(B, -1) if vector else B
    if Bm.ndim < 2 or Bm.shape[-2] != A.shape[-2]:
        raise RuntimeError(f"{op}: A and B must have the same number of rows, got shapes {shape_str(A.shape)} and "
                           f"{shape_str(B.shape)}.")
    m, n = A.shape[-2], A.shape[-1]
    cut = float(np.finfo(numpy_dtype(A.dtype)).eps * max(m, n)) if rcond is None else float(
        number(rcond, op, "rcond"))
    X = _C.matmul(LinalgPinv.apply(A, 0.0, max(cut, 0.0), False), Bm)
    s = np.linalg.svd(_np(A), compute_uv=False)
    ranks = np.sum(s > cut * np.max(s, axis=-1, initial=0.0)[..., None], axis=-1)
    empty = _C.full((0,), 0.0, A.dtype)
    residuals = empty
    if driver != "gelsy" and m > n and np.all(ranks == n):
        r = _C.sub(_C.matmul(A, X), Bm)
        residuals = _C.sum(_C.mul(r, r), (-2,), False, None)      # (..., k), k = 1 for a vector B (as torch)
    rank = _C.from_numpy(np.array(ranks, dtype=np.int64)) if driver != "gels" else _C.full((0,), 0, _C.int64)
    sv = _from_np(s, A.dtype) if driver in ("gelsd", "gelss") else empty
    return return_linalg_lstsq(_C.squeeze(X, (-1,)) if vector else X, residuals, rank, sv)


def _matrix_power(op, A, n):
    n = to_int(n, op, "n")
    A = tensor_arg(A, op, "A")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: A must have at least 2 dimensions, got shape {shape_str(A.shape)}.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: A must be a batch of square matrices, got {A.shape[-2]} by {A.shape[-1]} "
                           "matrices.")
    if n == 0:
        eye = _const(np.broadcast_to(np.eye(A.shape[-1]), tuple(A.shape)), A)
        return _C.where(_C.full((), True, _C.bool), eye, A) if A.requires_grad else eye
    if n < 0:
        A, n = LinalgInv.apply(_matrices("linalg.inv", A)), -n
    if n == 1:
        return _C.clone(A)
    result, square = None, A                 # binary powering: A^n from the squares A, A^2, A^4, ...
    while n:
        if n & 1:
            result = square if result is None else _C.matmul(result, square)
        n >>= 1
        if n:
            square = _C.matmul(square, square)
    return result


def linalg_matrix_power(A, n):
    return _matrix_power("linalg.matrix_power", A, n)


def matrix_power(input, n):
    return _matrix_power("linalg.matrix_power", input, n)


# ===== norms (composites) =========================================================================================

def _ord_number(ord, op):
    if isinstance(ord, bool) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: expected a number as ord, got {type_name(ord)}.")
    return float(ord)


def _norm_dtype(x, dtype, op):
    """x cast to dtype (a float dtype at least as wide as x's, as torch allows)."""
    if dtype is None:
        return x
    dt = dtype_arg(dtype, op)
    if not dt.is_floating_point or np.dtype(numpy_dtype(dt)).itemsize < np.dtype(numpy_dtype(x.dtype)).itemsize:
        raise RuntimeError(f"{op}: the input's dtype {x.dtype.name} cannot be converted to dtype {dt.name} without "
                           "narrowing.")
    return x if dt is x.dtype else _C.to_dtype(x, dt)


def _safe_power(s, e):
    """s ** e for s >= 0, with a zero gradient at s = 0 (where the true one is infinite), as torch's norms."""
    positive = _C.compare("gt", s, _C.scalar_operand(0.0, s))
    safe = _C.where(positive, s, _C.scalar_operand(1.0, s))
    root = _C.sqrt(safe) if e == 0.5 else _C.pow_scalar(safe, e)
    return _C.where(positive, root, _C.scalar_operand(0.0, s))


def _extreme(x, dims, keepdim, largest, op):
    """amax/amin over dims. Over an empty dim the largest is 0 (the norms of empty matrices are 0) and the smallest
    does not exist (IndexError, as torch's)."""
    if any(x.shape[d] == 0 for d in dims):
        if not largest:
            raise IndexError(f"{op}: cannot take the smallest value over an empty dimension (shape "
                             f"{shape_str(x.shape)}).")
        shape = [1 if d in dims else s for d, s in enumerate(x.shape)] if keepdim else [
            s for d, s in enumerate(x.shape) if d not in dims]
        return _C.full(tuple(shape), 0.0, x.dtype)
    return _C.amax(x, dims, keepdim) if largest else _C.amin(x, dims, keepdim)


def _zero_gradient(value, x, dims, keepdim):
    """value, recorded as a function of x with a zero gradient (torch's ord=0 norm is part of the graph)."""
    if not x.requires_grad:
        return value
    return _C.where(_C.full((), True, _C.bool), value, _C.sum(x, dims, keepdim, None))


def _vector_norm(x, p, dims, keepdim, op):
    """(sum |x|^p)^(1/p) over dims; p = 0 counts nonzeros, +-inf take the largest/smallest |x|."""
    count = math.prod(x.shape[d] for d in dims) if x.ndim else 1
    if (math.isinf(p) or p < 0) and count == 0:
        raise RuntimeError(f"{op}: cannot compute the {p:g} norm of an empty tensor: the reduction has no identity.")
    ax = _C.abs(x)
    if p == 0:
        nonzero = _C.compare("ne", x, _C.scalar_operand(0.0, x))
        return _zero_gradient(_C.to_dtype(_C.sum(nonzero, dims, keepdim, None), x.dtype), x, dims, keepdim)
    if math.isinf(p):
        return _C.amax(ax, dims, keepdim) if p > 0 else _C.amin(ax, dims, keepdim)
    if p == 1:
        return _C.sum(ax, dims, keepdim, None)
    if p == 2:
        return _safe_power(_C.sum(_C.mul(x, x), dims, keepdim, None), 0.5)
    if p > 0:
        powered = _safe_power(ax, p)        # |x|^p, with a zero gradient where x = 0
        return _safe_power(_C.sum(powered, dims, keepdim, None), 1 / p)
    return _C.pow_scalar(_C.sum(_C.pow_scalar(ax, p), dims, keepdim, None), 1 / p)


def _reduce_dims(dim, ndim, op):
    """None or () -> every dim; an int or a sequence of ints, wrapped."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return tuple(range(ndim))
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    out = tuple(wrap_dim(to_int(d, op, "dim"), ndim, op) for d in dims)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{op}: dim {tuple(dims)} names a dimension more than once.")
    return out


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector p-norm of x over dim (every dim by default)."""
    op = "linalg.vector_norm"
    x = tensor_arg(x, op, "x")
    _float_input(op, x, "x")
    p = _ord_number(ord, op)
    x = _norm_dtype(x, dtype, op)
    return _vector_norm(x, p, _reduce_dims(dim, x.ndim, op), bool(keepdim), op)


_MATRIX_ORDS = ("fro", "nuc", 1.0, -1.0, 2.0, -2.0, math.inf, -math.inf)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix norm of the matrices in dims `dim`: 'fro', 'nuc' (sum of singular values), +-2 (largest/smallest
    singular value), +-1 (largest/smallest column sum of |A|), +-inf (largest/smallest row sum)."""
    op = "linalg.matrix_norm"
    A = _matrices(op, A, square=False)
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"{op}: dim must be a 2-tuple, got {dim!r}.")
    d0, d1 = (wrap_dim(to_int(d, op, "dim"), A.ndim, op) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"{op}: the two dims must be different, got {tuple(dim)}.")
    key = ord if isinstance(ord, str) else (_ord_number(ord, op) if not isinstance(ord, bool) else None)
    if key not in _MATRIX_ORDS:
        raise RuntimeError(f"{op}: order {ord} is not supported; expected 'fro', 'nuc', 1, -1, 2, -2, inf or -inf.")
    A = _norm_dtype(A, dtype, op)
    keepdim = bool(keepdim)
    if key == "fro":
        return _vector_norm(A, 2.0, (d0, d1), keepdim, op)
    if key in ("nuc", 2.0, -2.0):
        rest = [d for d in range(A.ndim) if d not in (d0, d1)]
        s = _svdvals(_C.permute(A, tuple(rest) + (d0, d1)))
        r = _C.sum(s, (-1,), False, None) if key == "nuc" else _extreme(s, (s.ndim - 1,), False, key > 0, op)
        if keepdim:
            for d in sorted((d0, d1)):
                r = _C.unsqueeze(r, d)
        return r
    rows, cols = (d0, d1) if abs(key) == 1 else (d1, d0)    # 1: sum over rows, extreme over columns
    sums = _C.sum(_C.abs(A), (rows,), True, None)
    r = _extreme(sums, (cols,), True, key > 0, op)
    return r if keepdim else _C.squeeze(r, tuple(sorted((d0, d1))))


def linalg_norm(input, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector norm (dim an int or a 1-tuple, or ord=None over everything) or a matrix norm (dim a 2-tuple, or a
    2-D input with ord given)."""
    op = "linalg.norm"
    A = tensor_arg(input, op)
    if dim is not None:
        dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
        if len(dims) == 1 and not isinstance(ord, str):
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) in (1, 2):
            return matrix_norm(A, "fro" if ord is None else ord, dim if len(dims) == 2 else dims[0], keepdim,
                               dtype=dtype)
        raise RuntimeError(f"{op}: dim must have 1 or 2 elements, got {list(dims)}.")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if isinstance(ord, str) or A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    if A.ndim != 1:
        raise RuntimeError(f"{op}: with ord given and no dim, the input must be 1-D or 2-D, got {A.ndim}-D.")
    return vector_norm(A, ord, None, keepdim, dtype=dtype)


def cond(A, p=None):
    """The condition number in the p-norm: largest over smallest singular value for p None or 2 (smallest over
    largest for -2), else matrix_norm(A, p) * matrix_norm(A^-1, p) (inf for a singular matrix)."""
    op = "linalg.cond"
    A = _matrices(op, A, square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        s = _svdvals(A)
        if s.shape[-1] == 0:
            return _C.full(tuple(s.shape[:-1]), 0.0, A.dtype)
        big, small = _C.select(s, -1, 0), _C.select(s, -1, s.shape[-1] - 1)
        return _C.div(big, small) if p != -2 else _C.div(small, big)
    _, info = _lapack_inv(_np(A))
    if np.any(info):
        singular = _C.from_numpy(np.array(info > 0, dtype=bool))
        X = _from_np(np.nan_to_num(_lapack_inv(_np(A))[0]), A.dtype)
        r = _C.mul(matrix_norm(A, p), matrix_norm(X, p))
        return _C.where(singular, _C.scalar_operand(math.inf, r), r)
    return _C.mul(matrix_norm(A, p), matrix_norm(LinalgInv.apply(A), p))
