"""Matrix products with torch's signatures: matmul, mm, bmm, mv, dot, vdot, inner, outer, addmm and friends,
einsum, tensordot, kron, cross, trace, chain_matmul and multi_dot. Composites of the core's matmul, mul, sum,
permute, reshape and slice, so both engines differentiate them to any order."""
import collections
import math

import numpy as np

from ... import _C
from .. import bridge
from ..args import (Tensor, broadcast_shapes, number, shape_str, tensor_arg, tensor_list, to_int, type_name,
                    warn_deprecated, wrap_dim)
from ..node_names import shows_as


def _scaled(x, v):
    return _C.mul(x, _C.scalar_operand(v, x))


def _index(values):
    return bridge.share(np.array(values, dtype=np.int64))


def _check_matmul_dtypes(op, *tensors):
    """The products multiply tensors of one dtype (torch refuses mixed ones, and has no bool kernel)."""
    first = tensors[0].dtype
    for t in tensors[1:]:
        if t.dtype is not first:
            raise RuntimeError(f"{op}: expected tensors of the same dtype, got {first.name} and {t.dtype.name}.")
    if first.name == "bool":
        raise NotImplementedError(f"{op}: not implemented for bool tensors.")


def _float_input(op, t, name="A", not_implemented=False, complex_ok=False):
    """Refuses a tensor that is not floating-point (complex ones too, unless complex_ok: the op takes them)."""
    if not t.dtype.is_floating_point and not (complex_ok and t.dtype.is_complex):
        error = NotImplementedError if not_implemented else RuntimeError
        kind = "a floating-point or complex" if complex_ok else "a floating-point"
        raise error(f"{op}: expected {kind} tensor as {name}, got {t.dtype.name}.")


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
    a = tensor_arg(input, "vdot")
    return _dot("vdot", _C.conj(a) if a.dtype.is_complex else a, other, "other")


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
    if isinstance(v, complex) and not dtype.is_complex:
        raise RuntimeError(f"{op}: for non-complex tensors, {name} must not be a complex number, got {v}.")
    if not (dtype.is_floating_point or dtype.is_complex) and isinstance(v, float):
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
    for name, coefficient in (("beta", beta), ("alpha", alpha)):
        if isinstance(coefficient, bool) and product.dtype is not _C.bool:     # torch's addr only (addmm takes it)
            raise RuntimeError(f"addr: a bool {name} is only supported for bool results, got {product.dtype.name}.")
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
        warn_deprecated("cross: calling cross without dim is deprecated; pass dim explicitly (the default is the first "
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
        # a contracted dim of size 1 broadcasts against the other's, as torch's: the other is summed over it first
        if a.shape[x] == 1 and b.shape[y] != 1:
            b = _C.sum(b, (y,), True, None)
        elif b.shape[y] == 1 and a.shape[x] != 1:
            a = _C.sum(a, (x,), True, None)
        elif a.shape[x] != b.shape[y]:
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
    warn_deprecated("chain_matmul is deprecated and will be removed; use linalg.multi_dot instead (it takes a list).")
    return _C.clone(matrices[0]) if len(matrices) == 1 else multi_dot(list(matrices))


def vecdot(x, y, *, dim=-1):
    """sum(x * y, dim) with broadcasting (x conjugated for complex tensors)."""
    op = "linalg.vecdot"
    x, y = tensor_arg(x, op, "x"), tensor_arg(y, op, "y")
    _float_input(op, x, "x", complex_ok=True)
    if x.dtype is not y.dtype:
        raise RuntimeError(f"{op}: expected x and y of the same dtype, got {x.dtype.name} and {y.dtype.name}.")
    shape = broadcast_shapes(x.shape, y.shape, op)
    d = wrap_dim(to_int(dim, op, "dim"), len(shape), op)
    return _C.sum(_C.mul(_C.conj(x) if x.dtype.is_complex else x, y), (d,), False, None)


