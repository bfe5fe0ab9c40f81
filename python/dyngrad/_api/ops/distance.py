"""Distances with torch.nn.functional's signatures: cosine_similarity, pairwise_distance, pdist, and the vector
p-norm they share, written so that its gradient at a zero vector is 0, as torch's."""
import math

import numpy as np

from ... import _C
from .. import bridge
from ..args import (broadcast_shapes, broadcast_shapes as broadcast_pair, number, refuse_complex, shape_str, tensor_arg,
                    to_int, wrap_dim)
from ..bridge import is_half
from .linalg import vector_norm as linalg_vector_norm
from .pointwise import _cast
from .reduction import abs_square, real_dtype
from .shape import _no_grad, _zeros


def _k(value, like):
    return _C.scalar_operand(value, like)


def vector_norm(x, p, dims, keepdim):
    """The p-norm over dims, with torch's subgradients: 0 at a zero vector (p > 0), ties of the inf-norm share the
    gradient evenly, the 0-"norm" (the count of nonzeros) has none."""
    if x.dtype in (_C.float16, _C.bfloat16) and p not in (0, math.inf, -math.inf):
        # powers and sums of a half type in float32, the norm rounded once (as torch; float16 300^2 overflows)
        return _C.to_dtype(vector_norm(_C.to_dtype(x, _C.float32), p, dims, keepdim), x.dtype)
    if p == 2:
        s = _C.sum(abs_square(x), dims, keepdim)
        return _safe_root(s, 0.5)
    if p == 1:
        return _C.sum(_C.abs(x), dims, keepdim)
    if p == math.inf:
        return _C.amax(_C.abs(x), dims, keepdim)
    if p == -math.inf:
        return _C.amin(_C.abs(x), dims, keepdim)
    if p == 0:
        nonzero = _C.compare("ne", x.detach(), _k(0.0, x))
        return _C.sum(_C.to_dtype(nonzero, real_dtype(x.dtype)), dims, keepdim)
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
    refuse_complex("cosine_similarity", a, b)
    shape = broadcast_shapes(a.shape, b.shape, "cosine_similarity")
    a, b = _C.expand(a, shape), _C.expand(b, shape)
    d = wrap_dim(to_int(dim, "cosine_similarity", "dim"), len(shape), "cosine_similarity")
    eps = float(number(eps, "cosine_similarity", "eps"))

    def unit(v):
        # torch clamps the norm in place without recording it: the value is clamped, the gradient is the norm's.
        # The correction is eps - n where n < eps and 0 elsewhere, not clamp(n) - n: a norm whose squares
        # overflow is inf, and inf - inf made the similarity NaN where torch gives 0 (bfloat16 [1e20, 2e20])
        n = vector_norm(v, 2, (d,), True)
        raw = n.detach()
        below = _C.compare("lt", raw, _C.scalar_operand(eps, raw))
        correction = _C.where(below, _C.sub(_C.scalar_operand(eps, raw), raw), _C.scalar_operand(0.0, raw))
        return _C.div(v, _C.add(n, correction))
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
    rows_i = _C.index_select(x, 0, bridge.copy(i.astype(np.int64), False))
    rows_j = _C.index_select(x, 0, bridge.copy(j.astype(np.int64), False))
    return vector_norm(_C.sub(rows_i, rows_j), p, (1,), False)


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast), as a 0-d tensor."""
    a, b = tensor_arg(input, "dist"), tensor_arg(other, "dist", "other")
    dtype = _C.result_type(a, b)
    if not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"dist: expected floating-point or complex tensors, got {a.dtype.name} and "
                           f"{b.dtype.name}.")
    p = float(number(p, "dist", "p"))
    return linalg_vector_norm(_C.sub(_cast(a, dtype), _cast(b, dtype)), p)


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def _root(s, exponent):
    """s ** exponent with a zero gradient where s == 0 (torch's cdist backward: no gradient at zero distance)."""
    zero = _C.compare("eq", s, _zeros((), s.dtype))
    return _C.where(zero, _zeros((), s.dtype), _C.pow_scalar(_C.where(zero, _C.full((), 1, s.dtype), s), exponent))


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M): (..., P, R).

    compute_mode only chooses torch's kernel (a matmul for large Euclidean problems); the distances here are always
    computed directly from the differences, so it is checked and otherwise ignored."""
    a, b = tensor_arg(x1, "cdist", "x1"), tensor_arg(x2, "cdist", "x2")
    p = float(number(p, "cdist", "p"))
    for t, name in ((a, "x1"), (b, "x2")):
        if t.ndim < 2:
            raise RuntimeError(f"cdist: {name} must have at least 2 dimensions, got shape {shape_str(t.shape)}.")
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"cdist: expects floating-point inputs, {name} is {t.dtype.name}.")
        if is_half(t.dtype):
            raise NotImplementedError(f"cdist: {name} is {t.dtype.name}, which is not supported (as in torch); "
                                      "convert it with .float() first.")
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"cdist: x1 and x2 must have the same number of columns, got {a.shape[-1]} and "
                           f"{b.shape[-1]}.")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"cdist: x1 and x2 must have the same dtype, got {a.dtype.name} and {b.dtype.name}.")
    if p < 0:
        raise RuntimeError(f"cdist: p must be non-negative, got {p}.")
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"cdist: {compute_mode!r} is not a valid value for compute_mode (expected one of "
                         f"{', '.join(_CDIST_MODES)}).")
    batch = broadcast_pair(tuple(a.shape[:-2]), tuple(b.shape[:-2]), "cdist")
    a = _C.expand(a, batch + tuple(a.shape[-2:]))
    b = _C.expand(b, batch + tuple(b.shape[-2:]))
    diff = _C.sub(_C.unsqueeze(a, -2), _C.unsqueeze(b, -3))          # (..., P, R, M)
    zero = _zeros((), diff.dtype)
    if p == 0:      # the count of differing coordinates; its gradient is zero, as torch's
        count = _C.to_dtype(_C.compare("ne", diff, zero), diff.dtype)
        return _C.add(_C.sum(count, (-1,), False, None), _C.sum(_C.mul(diff, zero), (-1,), False, None))
    if p == 1:
        return _C.sum(_C.abs(diff), (-1,), False, None)
    if p == 2:
        return _root(_C.sum(_C.mul(diff, diff), (-1,), False, None), 0.5)
    size = _C.abs(diff)
    if math.isinf(p):
        # torch gives every coordinate that attains the maximum the full gradient (not a share, as amax does):
        # dist + sum(ties * (|d| - |d|.detach())) has dist's value and that gradient
        # (infinite sizes are left out of the second term, whose value would be inf - inf)
        with _no_grad():
            top = _C.amax(size, (-1,), True)
            ties = _C.to_dtype(_C.compare("eq", size, top), size.dtype)
        finite = _C.where(_C.isfinite(size), size, zero)
        moved = _C.sum(_C.mul(ties, _C.sub(finite, finite.detach())), (-1,), False, None)
        return _C.add(_C.squeeze(top, (-1,)), moved)
    flat = _C.compare("eq", size, zero)      # |d| ** p with no gradient at d == 0 (p < 1 would give inf * 0)
    powered = _C.where(flat, zero, _C.pow_scalar(_C.where(flat, _C.full((), 1, size.dtype), size), p))
    return _root(_C.sum(powered, (-1,), False, None), 1.0 / p)
