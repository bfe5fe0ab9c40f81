"""torch.masked: reductions, scans and normalisations that ignore the elements where `mask` is False.

Each is torch's definition over the existing ops: the masked-out elements are replaced by the operation's
identity (0 for sums and norms, 1 for products, -inf for amax/argmax/logsumexp/softmax, +inf for amin/argmin/softmin,
nan for median), then the ordinary op runs, so gradients flow to the kept elements only (a where's). mean, var and
std divide by the count of kept elements: a fully masked slice gives nan (0/0), as torch's. The mask broadcasts
to the input and may not have more dimensions; it need not be bool (it is converted, as torch's)."""
import math

from ..args import Tensor, dtype_arg, refuse_complex, tensor_arg, type_name
from .activation import log_softmax as _log_softmax
from .activation import softmax as _softmax
from .activation import softmin as _softmin
from .indexing import where
from .linalg import vector_norm
from .pointwise import logaddexp as _logaddexp
from .shape import broadcast_to
from .sorting import nanmedian

_SMALL_INTEGERS = ("uint8", "bool", "int8", "int16", "int32")


def _input_mask(input, mask, op):
    """The mask as a bool tensor of input's shape."""
    mask = tensor_arg(mask, f"masked.{op}", "mask")
    if mask.ndim > input.ndim:
        raise IndexError(f"masked.{op}: expected mask to broadcast to input, but mask has {mask.ndim} dimensions "
                         f"and input {input.ndim}")
    if tuple(mask.shape) != tuple(input.shape):
        mask = broadcast_to(mask, tuple(input.shape))
    return mask.to(dtype_arg("bool"))


def _identity(kind, input, op):
    """The value a masked-out element is replaced by (torch.masked's _reduction_identity)."""
    if kind == "zero":
        return 0
    if kind == "one":
        return 1
    if kind == "nan":
        return math.nan
    floating = input.dtype.is_floating_point or input.dtype.is_complex   # complex: -inf + 0j (logsumexp's)
    if input.dtype.name == "bool":
        return kind == "max_of"
    if not floating:
        # the smallest/largest value of the integer dtype
        bits = {"uint8": 8, "int8": 8, "int16": 16, "int32": 32, "int64": 64}[input.dtype.name]
        if input.dtype.name == "uint8":
            return 0 if kind == "min_of" else 255
        return -(1 << (bits - 1)) if kind == "min_of" else (1 << (bits - 1)) - 1
    return -math.inf if kind == "min_of" else math.inf


def _combine(input, mask, kind, op):
    """input with its masked-out elements replaced by the identity of `kind`."""
    if not isinstance(input, Tensor):
        raise TypeError(f"masked.{op}(): argument 'input' must be Tensor, not {type_name(input)}")
    if mask is None:
        return input
    keep = _input_mask(input, mask, op)
    return where(keep, input, _identity(kind, input, op))


def _dims(dim, ndim, op):
    """torch.masked's canonical dims: a sorted tuple; None and () mean every dimension."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    bound = max(ndim, 1)
    out = []
    for d in dims:
        if not isinstance(d, int):
            raise TypeError(f"masked.{op}(): dim must be an int or a tuple of ints, got {type_name(d)}")
        if d >= bound or d < -bound:
            raise IndexError(f"masked.{op}: Dimension out of range (expected to be in range of "
                             f"[{-bound}, {bound - 1}], but got {d})")
        if d % bound in out:
            raise RuntimeError(f"masked.{op}: dim={d} appears multiple times in the list of dims")
        out.append(d % bound)
    return tuple(sorted(out))


def _reduce_dims(x, dims):
    """dims for a reduction method of x: a 0-d tensor reduces over dim 0 (torch allows it), but () means none."""
    return dims if x.ndim else (0,) if dims else ()


def _sum_dtype(input, dtype):
    if dtype is not None:
        return dtype_arg(dtype)
    return dtype_arg("int64") if input.dtype.name in _SMALL_INTEGERS else input.dtype


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Sum of the kept elements (0 where a slice is fully masked)."""
    x = _combine(input, mask, "zero", "sum")
    dims = _dims(dim, input.ndim, "sum")
    return x.sum(_reduce_dims(x, dims), bool(keepdim), dtype=_sum_dtype(input, dtype))


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Product of the kept elements (1 where a slice is fully masked)."""
    x = _combine(input, mask, "one", "prod").to(_sum_dtype(input, dtype))
    for d in reversed(_dims(dim, input.ndim, "prod")):
        x = x.prod(d, keepdim=bool(keepdim))
    return x


def cumsum(input, dim, *, dtype=None, mask=None):
    """Cumulative sum along dim where masked-out elements count as 0."""
    d = _dims(dim, input.ndim, "cumsum")[0]
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    return _combine(input, mask, "zero", "cumsum").cumsum(d, dtype=dtype).to(dtype)


def cumprod(input, dim, *, dtype=None, mask=None):
    """Cumulative product along dim where masked-out elements count as 1."""
    d = _dims(dim, input.ndim, "cumprod")[0]
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    return _combine(input, mask, "one", "cumprod").cumprod(d, dtype=dtype).to(dtype)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Largest kept element (-inf, or the dtype's minimum, where a slice is fully masked)."""
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    x = _combine(input, mask, "min_of", "amax")
    return x.amax(_reduce_dims(x, _dims(dim, input.ndim, "amax")), bool(keepdim)).to(dtype)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Smallest kept element (+inf, or the dtype's maximum, where a slice is fully masked)."""
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    x = _combine(input, mask, "max_of", "amin")
    return x.amin(_reduce_dims(x, _dims(dim, input.ndim, "amin")), bool(keepdim)).to(dtype)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the largest kept element; as torch's, the result is cast to `dtype` (default: input's dtype)."""
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    return _combine(input, mask, "min_of", "argmax").argmax(dim, bool(keepdim)).to(dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the smallest kept element; as torch's, the result is cast to `dtype` (default: input's dtype)."""
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    return _combine(input, mask, "max_of", "argmin").argmin(dim, bool(keepdim)).to(dtype)


def _count(input, mask, dim, keepdim, op):
    """The number of kept elements of each slice (int64)."""
    if mask is None:
        count = input.new_ones(tuple(input.shape), dtype=dtype_arg("int64"))
    else:
        count = _input_mask(input, mask, op)
    return sum(count, dim, keepdim=keepdim)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Mean of the kept elements (nan where a slice is fully masked)."""
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    if not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(f"masked.mean(): Could not infer output dtype. The dtype must be a floating point or "
                         f"complex dtype. Got: {dtype}")
    total = sum(input, dim, keepdim=keepdim, dtype=dtype, mask=mask)
    return total / _count(input, mask, dim, keepdim, "mean")


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """Median of the kept elements along one dim (nan where a slice is fully masked)."""
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    d = _dims(dim, input.ndim, "median")[0]
    floating = input.dtype.is_floating_point
    x = input if floating else input.to(dtype_arg("float32"))
    out = nanmedian(_combine(x, mask, "nan", "median"), d, bool(keepdim)).values
    if floating:
        return out
    if bool(out.isnan().any()):
        raise ValueError("masked.median: the result has nan (a fully masked slice) and cannot be converted to "
                         f"the integer dtype {dtype}")
    return out.to(dtype)


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """log(sum(exp)) of the kept elements (-inf where a slice is fully masked)."""
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    x = _combine(input, mask, "min_of", "logsumexp")
    return x.logsumexp(_reduce_dims(x, _dims(dim, input.ndim, "logsumexp")), keepdim=bool(keepdim)).to(dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """logaddexp of input and other, each with its own mask (a masked-out element counts as -inf)."""
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    a = _combine(input, input_mask, "min_of", "logaddexp")
    b = _combine(tensor_arg(other, "masked.logaddexp", "other"), other_mask, "min_of", "logaddexp")
    return _logaddexp(a, b).to(dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The vector ord-norm of the kept elements (masked-out ones count as 0; for ord=-inf as +inf)."""
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    ord = 2.0 if ord is None else ord
    x = _combine(input, mask, "max_of" if ord == -math.inf else "zero", "norm")
    return vector_norm(x, ord, _reduce_dims(x, _dims(dim, input.ndim, "norm")), bool(keepdim), dtype=dtype)


def _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, op):
    if unbiased is not None and correction is not None:
        raise ValueError(f"masked.{op}: only one of unbiased and correction may be given")
    ddof = 1.0 if unbiased is None else (1.0 if unbiased else 0.0)
    if correction is not None:
        ddof = float(correction)
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    compute = dtype if (dtype.is_floating_point or dtype.is_complex) else dtype_arg("float32")
    count = _count(input, mask, dim, True, op)
    centred = input - sum(input, dim, keepdim=True, dtype=compute, mask=mask) / count
    # |x|^2 for a complex x; the result keeps torch's dtype (complex for a complex input, imaginary part 0)
    total = sum(centred * centred.conj(), dim, keepdim=keepdim, dtype=compute, mask=mask)
    if not keepdim:
        count = count.reshape(tuple(total.shape))
    if ddof != 0:
        real = {"complex64": "float32", "complex128": "float64"}.get(compute.name)
        count = (count.to(dtype_arg(real) if real else compute) - ddof).clamp(min=0)
    return (total / count).to(dtype)


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """Variance of the kept elements, dividing by (count - correction) clamped at 0 (correction 1 by default)."""
    if dtype is None and not (input.dtype.is_floating_point or input.dtype.is_complex):
        dtype = "float32"
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, "var")


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """Standard deviation of the kept elements: the square root of masked.var."""
    if dtype is None and not (input.dtype.is_floating_point or input.dtype.is_complex):
        dtype = "float32"
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, "std").sqrt()


def softmax(input, dim, *, dtype=None, mask=None):
    """softmax over the kept elements along dim (masked-out ones get 0; a fully masked slice gives nan)."""
    refuse_complex("masked.softmax", input)
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    return _softmax(_combine(input, mask, "min_of", "softmax"), _dims(dim, input.ndim, "softmax")[0], dtype=dtype)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """log_softmax over the kept elements along dim (masked-out ones get -inf)."""
    refuse_complex("masked.log_softmax", input)
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    return _log_softmax(_combine(input, mask, "min_of", "log_softmax"), _dims(dim, input.ndim, "log_softmax")[0],
                        dtype=dtype)


def softmin(input, dim, *, dtype=None, mask=None):
    """softmin over the kept elements along dim (masked-out ones get 0)."""
    refuse_complex("masked.softmin", input)
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    return _softmin(_combine(input, mask, "max_of", "softmin"), _dims(dim, input.ndim, "softmin")[0], dtype=dtype)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """The kept elements divided by their ord-norm along dim (at least eps); masked-out ones become 0."""
    dtype = input.dtype if dtype is None else dtype_arg(dtype)
    denominator = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask).clamp(min=eps)
    return _combine(input, mask, "zero", "normalize") / denominator
