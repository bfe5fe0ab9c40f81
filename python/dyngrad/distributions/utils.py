"""Helpers shared by the distributions (torch.distributions.utils' names)."""
from numbers import Number

from .. import Tensor, broadcast_tensors, finfo, get_default_dtype, no_grad, ones, rand, randn, tensor, zeros
from ..autograd.grad_mode import enable_grad
from ..nn import functional as F

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs", "probs_to_logits",
           "tril_matrix_to_vec", "vec_to_tril_matrix"]

euler_constant = 0.57721566490153286060


def broadcast_all(*values):
    """Tensors broadcast to one shape; numbers become tensors of the tensors' dtype (the default dtype if there are
    none). Anything else is a ValueError, as torch's."""
    if not all(isinstance(v, (Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of Number or Tensor.")
    if not all(isinstance(v, Tensor) for v in values):
        dtype = next((v.dtype for v in values if isinstance(v, Tensor)), get_default_dtype())
        values = [v if isinstance(v, Tensor) else tensor(float(v), dtype=dtype) for v in values]
    return broadcast_tensors(*values)


def _standard_normal(shape, dtype):
    """Standard normal draws from the engine's generator, without a graph."""
    with no_grad():
        return randn(tuple(shape), dtype=dtype)


def _uniform(shape, dtype):
    with no_grad():
        return rand(tuple(shape), dtype=dtype)


def _sum_rightmost(value, dim):
    """value summed over its dim rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)).sum(-1)


def logits_to_probs(logits, is_binary=False):
    """Probabilities from logits: sigmoid for binary ones, else softmax over the last dimension."""
    if is_binary:
        return logits.sigmoid()
    return F.softmax(logits, dim=-1)


def clamp_probs(probs):
    """probs clamped to [eps, 1 - eps] so that their logs are finite."""
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Logits from probabilities: log-odds for binary ones, else log(probs)."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return ps_clamped.log() - (-ps_clamped).log1p()
    return ps_clamped.log()


class lazy_property:
    """A property computed on first access and stored on the instance (the distributions' derived parameters: a
    Bernoulli made from probs computes its logits only when asked). On the class it reads as itself, so argument
    validation can tell a not-yet-computed parameter."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with _grad_like_parameters():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _grad_like_parameters:
    """lazy_property runs under the caller's grad mode (torch uses enable_grad; a derived parameter computed inside
    no_grad would lose its graph for later calls, so grad mode is switched on for it as torch does)."""

    def __enter__(self):
        self._mode = enable_grad()
        self._mode.__enter__()

    def __exit__(self, *exc):
        return self._mode.__exit__(*exc)


def tril_matrix_to_vec(mat, diag=0):
    """The lower-triangular part (below diagonal diag) of the last two dims of mat, as a vector."""
    n = mat.shape[-1]
    if not (-n <= diag < n):
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    mask = ones(n, n, dtype=bool).tril(diag)
    return mat[..., mask]


def vec_to_tril_matrix(vec, diag=0):
    """The inverse of tril_matrix_to_vec."""
    length, n = vec.shape[-1], 0
    count = lambda k: sum(max(0, min(k, row + diag + 1)) for row in range(k))   # entries of tril(diag) in k x k
    while count(n) < length:
        n += 1
    if count(n) != length:
        raise ValueError(f"The size of last dimension is {length} which cannot be expressed as the "
                         "lower triangular part of a square D x D matrix.")
    mat = zeros(tuple(vec.shape[:-1]) + (n, n), dtype=vec.dtype)
    mask = ones(n, n, dtype=bool).tril(diag)
    mat[..., mask] = vec
    return mat

