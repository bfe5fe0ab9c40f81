"""Reductions with torch's signatures: dim as None, an int or a tuple; keepdim; max/min dispatch on their
second argument; var/std with correction= and unbiased=."""
from .. import _C
from .args import Tensor, dims_arg, optional_dtype, return_max, return_min, tensor_arg, to_int, wrap_dim


def sum(input, dim=None, keepdim=False, *, dtype=None):
    return _C.sum(tensor_arg(input, "sum"), dims_arg(dim, "sum"), bool(keepdim), optional_dtype(dtype, "sum"))


def mean(input, dim=None, keepdim=False, *, dtype=None):
    a = tensor_arg(input, "mean")
    if dtype is not None:
        a = _C.to_dtype(a, optional_dtype(dtype, "mean"))
    return _C.mean(a, dims_arg(dim, "mean"), bool(keepdim))


def _correction(unbiased, correction, op):
    if correction is not None:
        if unbiased is not None:
            raise RuntimeError(f"{op}: pass either correction= or unbiased=, not both.")
        return float(correction)
    if unbiased is not None:
        return 1.0 if unbiased else 0.0
    return 1.0


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over dim with Bessel's correction by default (correction=1; unbiased=False means 0)."""
    a = tensor_arg(input, "var")
    if isinstance(dim, bool):            # var(x, False): the old unbiased positional form
        dim, unbiased = None, dim
    return _C.var(a, dims_arg(dim, "var"), _correction(unbiased, correction, "var"), bool(keepdim))


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over dim (see var)."""
    a = tensor_arg(input, "std")
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return _C.std(a, dims_arg(dim, "std"), _correction(unbiased, correction, "std"), bool(keepdim))


def _extremum(input, dim, keepdim, is_max):
    """max/min: (input) -> the value; (input, dim, keepdim) -> (values, indices); (input, other tensor) ->
    elementwise maximum/minimum."""
    op = "max" if is_max else "min"
    a = tensor_arg(input, op)
    if dim is None:
        return _C.amax(a, (), False) if is_max else _C.amin(a, (), False)
    if isinstance(dim, Tensor):
        return _C.maximum(a, dim) if is_max else _C.minimum(a, dim)
    d = wrap_dim(to_int(dim, op, "dim"), a.ndim, op)
    # values are gathered at the returned indices, so with ties the gradient goes to that one element (as torch)
    indices = _C.argmax(a, d, True) if is_max else _C.argmin(a, d, True)
    values = _C.gather(a, d, indices)
    if not keepdim and a.ndim > 0:
        values, indices = _C.squeeze(values, (d,)), _C.squeeze(indices, (d,))
    return (return_max if is_max else return_min)(values, indices)


def max(input, dim=None, keepdim=False):
    return _extremum(input, dim, keepdim, True)


def min(input, dim=None, keepdim=False):
    return _extremum(input, dim, keepdim, False)


def amax(input, dim=(), keepdim=False):
    return _C.amax(tensor_arg(input, "amax"), dims_arg(dim or None, "amax"), bool(keepdim))


def amin(input, dim=(), keepdim=False):
    return _C.amin(tensor_arg(input, "amin"), dims_arg(dim or None, "amin"), bool(keepdim))


def argmax(input, dim=None, keepdim=False):
    a = tensor_arg(input, "argmax")
    return _C.argmax(a, None if dim is None else to_int(dim, "argmax", "dim"), bool(keepdim))


def argmin(input, dim=None, keepdim=False):
    a = tensor_arg(input, "argmin")
    return _C.argmin(a, None if dim is None else to_int(dim, "argmin", "dim"), bool(keepdim))


def logsumexp(input, dim=None, keepdim=False):
    return _C.logsumexp(tensor_arg(input, "logsumexp"), dims_arg(dim, "logsumexp"), bool(keepdim))


def any(input, dim=None, keepdim=False):
    """Whether any element is nonzero (over dim)."""
    a = tensor_arg(input, "any")
    nonzero = _C.compare("ne", a, _C.scalar_operand(False, a))
    return _C.compare("gt", _C.sum(nonzero, dims_arg(dim, "any"), bool(keepdim)), _C.scalar_operand(0, None))


def all(input, dim=None, keepdim=False):
    """Whether every element is nonzero (over dim)."""
    a = tensor_arg(input, "all")
    zero = _C.compare("eq", a, _C.scalar_operand(False, a))
    return _C.compare("eq", _C.sum(zero, dims_arg(dim, "all"), bool(keepdim)), _C.scalar_operand(0, None))
