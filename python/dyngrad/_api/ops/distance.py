"""Distances with torch.nn.functional's signatures: cosine_similarity, pairwise_distance, pdist, and the vector
p-norm they share, written so that its gradient at a zero vector is 0, as torch's."""
import math

import numpy as np

from ... import _C
from ..args import broadcast_shapes, is_half, number, shape_str, tensor_arg, to_int, wrap_dim


def _k(value, like):
    return _C.scalar_operand(value, like)


def vector_norm(x, p, dims, keepdim):
    """The p-norm over dims, with torch's subgradients: 0 at a zero vector (p > 0), ties of the inf-norm share the
    gradient evenly, the 0-"norm" (the count of nonzeros) has none."""
    if p == 2:
        s = _C.sum(_C.mul(x, x), dims, keepdim)
        return _safe_root(s, 0.5)
    if p == 1:
        return _C.sum(_C.abs(x), dims, keepdim)
    if p == math.inf:
        return _C.amax(_C.abs(x), dims, keepdim)
    if p == -math.inf:
        return _C.amin(_C.abs(x), dims, keepdim)
    if p == 0:
        nonzero = _C.compare("ne", x.detach(), _k(0.0, x))
        return _C.sum(_C.to_dtype(nonzero, x.dtype), dims, keepdim)
    return _safe_root(_C.sum(_C.pow_scalar(_C.abs(x), p), dims, keepdim), 1.0 / p)


def _safe_root(s, power):
    """s ** power, with a zero gradient where s == 0 (instead of 0 * inf)."""
    zero = _C.compare("eq", s, _k(0.0, s))
    root = _C.pow_scalar(_C.where(zero, _k(1.0, s), s), power)
    return _C.where(zero, _k(0.0, s), root)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps)) along dim, after broadcasting x1 and x2."""
    a = tensor_arg(x1, "cosine_similarity", "x1")
    b = tensor_arg(x2, "cosine_similarity", "x2")
    shape = broadcast_shapes(a.shape, b.shape, "cosine_similarity")
    a, b = _C.expand(a, shape), _C.expand(b, shape)
    d = wrap_dim(to_int(dim, "cosine_similarity", "dim"), len(shape), "cosine_similarity")
    eps = float(number(eps, "cosine_similarity", "eps"))

    def unit(v):
        # torch clamps the norm in place without recording it: the value is clamped, the gradient is the norm's
        n = vector_norm(v, 2, (d,), True)
        clamped = _C.add(n, _C.sub(_C.clamp(n.detach(), eps, None), n.detach()))
        return _C.div(v, clamped)
    return _C.sum(_C.mul(unit(a), unit(b)), (d,), False)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim (after broadcasting)."""
    a = tensor_arg(x1, "pairwise_distance", "x1")
    b = tensor_arg(x2, "pairwise_distance", "x2")
    p = float(number(p, "pairwise_distance", "p"))
    diff = _C.add(_C.sub(a, b), _k(float(number(eps, "pairwise_distance", "eps")), a))
    ndim = max(a.ndim, b.ndim)
    if ndim == 0:
        return vector_norm(diff, p, (), bool(keepdim))
    return vector_norm(diff, p, (ndim - 1,), bool(keepdim))


def pdist(input, p=2):
    """The p-norm distances between the rows of an (N, M) input, for the pairs i < j in row-major order."""
    x = tensor_arg(input, "pdist")
    if x.ndim != 2:
        raise RuntimeError(f"pdist: expected a 2-D input, got shape {shape_str(x.shape)}.")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"pdist: expected a floating-point input, got {x.dtype.name}.")
    if is_half(x.dtype):
        raise NotImplementedError(f"pdist: {x.dtype.name} input is not supported (as in torch); convert it with "
                                  ".float() first.")
    p = float(number(p, "pdist", "p"))
    if p < 0:
        raise RuntimeError(f"pdist: p must be non-negative, got {p}.")
    n = x.shape[0]
    i, j = np.triu_indices(n, 1)
    rows_i = _C.index_select(x, 0, _C.copy_from_numpy(i.astype(np.int64), False))
    rows_j = _C.index_select(x, 0, _C.copy_from_numpy(j.astype(np.int64), False))
    return vector_norm(_C.sub(rows_i, rows_j), p, (1,), False)
