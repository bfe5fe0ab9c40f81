"""Reductions with torch's signatures: dim as None, an int, a tuple or () (every dim, as torch 2.x reads it);
keepdim; dtype= where torch has it; var/std with correction= and unbiased=; max/min dispatch on their second
argument; prod, nansum, nanmean, count_nonzero, all/any, aminmax and torch.norm over composites of the core ops.
Scans live in scan.py, order statistics (sort, median, quantile, ...) in sorting.py."""
import builtins
import collections
import math

import numpy as np

from ... import _C
from ..._user_frame import warn
from ...autograd.function import Function
from .. import bridge
from ..args import (Tensor, dtype_arg, number, optional_dtype, refuse_complex, return_max, return_min, shape_args,
                    shape_str, tensor_arg, to_int, wrap_dim)
from ..node_names import rename, shows_as
from ..out import write_out
from .linalg import _svdvals
return_aminmax = collections.namedtuple("aminmax", ["min", "max"])


def array_tensor(arr):
    """A new tensor holding a numpy result (0-d stays 0-d; a view of other memory is copied first)."""
    arr = np.asarray(arr)
    if not (arr.flags.c_contiguous and arr.flags.owndata):
        arr = np.array(arr, order="C")
    return bridge.share(arr)


# ----- dims ------------------------------------------------------------------------------------------------------

def reduce_dims(dim, op, name="dim"):
    """The core's dims: () for every dim (dim None, () or []), else the dims as ints (the core wraps them and
    refuses repeats)."""
    if dim is None:
        return ()
    if isinstance(dim, (tuple, list)):
        return tuple(to_int(d, op, name) for d in dim)
    return (to_int(dim, op, name),)


def reduced_count(a, dims, op):
    """How many elements each output element reduces over."""
    if not dims:
        return a.numel()
    n = 1
    for d in {wrap_dim(d, a.ndim, op) for d in dims}:
        n *= a.shape[d] if a.ndim else 1
    return n


def check_nonempty(a, dims, op, whole=RuntimeError):
    """Reductions without an identity (max, argmax, median, ...): torch's IndexError for a named dim of size 0,
    `whole` (RuntimeError, IndexError for argmax/argmin) for a whole empty tensor."""
    if dims:
        for d in dims:
            d = wrap_dim(d, a.ndim, op)
            if a.ndim and a.shape[d] == 0:
                raise IndexError(f"{op}: cannot reduce over dimension {d} of size 0 (input shape "
                                 f"{shape_str(a.shape)}): the reduction has no identity.")
    elif a.numel() == 0:
        raise whole(f"{op}: the input is empty (shape {shape_str(a.shape)}) and the reduction has no identity; "
                    "specify a dim to reduce over one of the non-empty dimensions.")


def _floating(a, op):
    if not a.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating-point input, got {a.dtype.name}.")


def _cast(a, dtype, op):
    """input converted to dtype= (None: unchanged), as torch's reductions compute in the requested dtype."""
    if dtype is None:
        return a
    dt = dtype_arg(dtype, op)
    return a if dt is a.dtype else _C.to_dtype(a, dt)


# ----- sums and means --------------------------------------------------------------------------------------------

def sum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over dim (None or (): every dim); bool and int inputs give int64 unless dtype= says otherwise."""
    a, dims, dt = tensor_arg(input, "sum"), reduce_dims(dim, "sum"), optional_dtype(dtype, "sum")
    if dt is _C.bool:                       # a sum of bools in bool: whether any element is nonzero
        return any(a, dims or None, keepdim)
    return _C.sum(a, dims, bool(keepdim), dt)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """sum treating NaN as zero (the gradient at a NaN is zero)."""
    a = _cast(tensor_arg(input, "nansum"), dtype, "nansum")
    if a.dtype.is_floating_point:
        a = _C.where(_C.isnan(a), _C.scalar_operand(0, a), a)
    return _C.sum(a, reduce_dims(dim, "nansum"), bool(keepdim), a.dtype if dtype is not None else None)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over dim; an int or bool input needs dtype= (a floating dtype), as in torch."""
    a = tensor_arg(input, "mean")
    if dtype is not None:
        dt = dtype_arg(dtype, "mean")
        if not dt.is_floating_point:
            raise RuntimeError(f"mean: dtype must be a floating-point dtype, got {dt.name}.")
        a = _cast(a, dt, "mean")
    return _C.mean(a, reduce_dims(dim, "mean"), bool(keepdim))


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean of the non-NaN elements: nansum / their count (NaN where every element is NaN)."""
    a = tensor_arg(input, "nanmean")
    _floating(a, "nanmean")
    if dtype is not None and not dtype_arg(dtype, "nanmean").is_floating_point:
        raise RuntimeError(f"nanmean: dtype must be a floating-point dtype, got {dtype_arg(dtype).name}.")
    a = _cast(a, dtype, "nanmean")
    dims, keep = reduce_dims(dim, "nanmean"), bool(keepdim)
    isnan = _C.isnan(a)
    total = _C.sum(_C.where(isnan, _C.scalar_operand(0, a), a), dims, keep, None)
    count = _C.sum(_C.logical_not(isnan), dims, keep, a.dtype)
    return _C.div(total, count)


# ----- variance --------------------------------------------------------------------------------------------------

def _correction(unbiased, correction, op):
    if correction is not None:
        if unbiased is not None:
            raise TypeError(f"{op}: pass either correction= or unbiased=, not both.")
        return float(number(correction, op, "correction"))
    if unbiased is not None:
        return 1.0 if unbiased else 0.0
    return 1.0


def _variance_args(input, dim, unbiased, keepdim, correction, op):
    """(tensor, dims, correction, keepdim) of var/std/var_mean/std_mean, with torch's old positional form
    var(x, unbiased) and its warning when no degrees of freedom remain."""
    a = tensor_arg(input, op)
    if isinstance(dim, bool):            # var(x, False): the old (input, unbiased) overload
        dim, unbiased = None, dim
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        raise RuntimeError(f"{op}: expected a floating-point or complex input, got {a.dtype.name} (var and std "
                           "are defined for floating-point and complex dtypes only).")
    dims, corr = reduce_dims(dim, op), _correction(unbiased, correction, op)
    if reduced_count(a, dims, op) - corr <= 0:
        warn(f"{op}(): degrees of freedom is <= 0: the correction ({corr:g}) should be strictly less than "
             "the number of elements reduced over; the result is nan or inf.", UserWarning)
    return a, dims, corr, bool(keepdim)


def _var(a, dims, corr, keep):
    """The core's var; of a complex tensor the mean of |z - mean z|^2 with the correction, i.e. the variance of
    the real parts plus that of the imaginary parts, in the real dtype of the same width (torch's)."""
    if not a.dtype.is_complex:
        return _C.var(a, dims, corr, keep)
    pairs = _C.view_as_real(a)
    return _C.add(_C.var(_C.select(pairs, -1, 0), dims, corr, keep), _C.var(_C.select(pairs, -1, 1), dims, corr, keep))


@shows_as("Var")
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over dim with Bessel's correction by default (correction=1; unbiased=False means 0); of a complex
    input a real variance, E|z - E z|^2."""
    a, dims, corr, keep = _variance_args(input, dim, unbiased, keepdim, correction, "var")
    return _var(a, dims, corr, keep)


def _sqrt_variance(v):
    """sqrt(v) with gradient 0 where v is 0 (torch's std_backward), and nan where v is nan (no degrees of
    freedom): the core's std returns 0 there, so std is taken from the core's var here."""
    zero = _C.compare("eq", v, _C.scalar_operand(0, v))
    return _safe(_C.sqrt(_safe(v, zero, 1)), zero, 0)


@shows_as("Std")
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over dim (see var)."""
    a, dims, corr, keep = _variance_args(input, dim, unbiased, keepdim, correction, "std")
    return _sqrt_variance(_var(a, dims, corr, keep))


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) over dim."""
    a, dims, corr, keep = _variance_args(input, dim, unbiased, keepdim, correction, "var_mean")
    return _var(a, dims, corr, keep), _C.mean(a, dims, keep)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) over dim."""
    a, dims, corr, keep = _variance_args(input, dim, unbiased, keepdim, correction, "std_mean")
    return _sqrt_variance(_var(a, dims, corr, keep)), _C.mean(a, dims, keep)


# ----- products --------------------------------------------------------------------------------------------------

def _product(a, d):
    """The product along dim d, kept as size 1: a tree of pairwise core multiplications, so the gradient of each
    factor is the product of the others, exact with zeros (torch's prod_backward), and second derivatives come
    from mul's own."""
    n = a.shape[d]
    if n == 0:
        empty_sum = _C.sum(a, (d,), True, None)                   # zeros of the right shape, dtype and history
        return _C.add(_C.mul(empty_sum, _C.scalar_operand(0, empty_sum)), _C.scalar_operand(1, empty_sum))
    while n > 1:
        half = n // 2
        pairs = _C.mul(_C.slice(a, d, 0, 2 * half, 2), _C.slice(a, d, 1, 2 * half, 2))
        a = pairs if n % 2 == 0 else _C.cat([pairs, _C.slice(a, d, n - 1, n, 1)], d)
        n = (n + 1) // 2
    return a


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product of all elements, or over one dim; bool and int inputs give int64."""
    a = tensor_arg(input, "prod")
    if dtype is not None:
        a = _cast(a, dtype, "prod")
    elif not (a.dtype.is_floating_point or a.dtype.is_complex) and a.dtype is not _C.int64:
        a = _C.to_dtype(a, _C.int64)
    if dim is None:
        flat = _C.reshape(a, (a.numel(),))
        out = _product(flat, 0)
        return _C.reshape(out, (1,) * a.ndim if keepdim else ())
    d = wrap_dim(to_int(dim, "prod", "dim"), a.ndim, "prod")
    if a.ndim == 0:
        return _C.clone(a)
    out = _product(a, d)
    return out if keepdim else _C.squeeze(out, (d,))


# ----- extrema ---------------------------------------------------------------------------------------------------

def _extremum(input, dim, keepdim, is_max):
    """max/min: (input) -> the value; (input, dim, keepdim) -> (values, indices); (input, other tensor) ->
    elementwise maximum/minimum."""
    op = "max" if is_max else "min"
    a = tensor_arg(input, op)
    refuse_complex(op, a, ordered=True)
    display = "MaxBackward" if is_max else "MinBackward"
    if dim is None:
        check_nonempty(a, (), op)
        return (Max if is_max else Min).apply(a)
    if isinstance(dim, Tensor):
        return _C.maximum(a, dim) if is_max else _C.minimum(a, dim)
    d = wrap_dim(to_int(dim, op, "dim"), a.ndim, op)
    check_nonempty(a, (d,), op)
    # values are gathered at the returned indices, so with ties the gradient goes to that one element (as torch)
    indices = _C.argmax(a, d, True) if is_max else _C.argmin(a, d, True)
    values = _C.gather(a, d, indices)
    if not keepdim and a.ndim > 0:
        values, indices = _C.squeeze(values, (d,)), _C.squeeze(indices, (d,))
    return (return_max if is_max else return_min)(rename(values, display, (a,)), indices)


class SharedSelection(Function):
    """An element chosen from all of the input (its max, min, median): the gradient is shared equally by the
    elements equal to it, all the NaNs when it is NaN (torch's evenly_distribute_backward). A Function: the
    core's amax shares among equal values only, which a NaN never is. Subclasses say how to choose (`pick`)."""

    @classmethod
    def forward(cls, ctx, a):
        ctx.value = np.asarray(cls.pick(bridge.host_values(a).reshape(-1)))
        ctx.save_for_backward(a)
        return bridge.host_result(ctx.value, a.dtype)

    @staticmethod
    def _shares(ctx):
        """Each element's share of the chosen value: 1/k on the k elements equal to it (the NaNs when it is NaN)."""
        a, = ctx.saved_tensors
        arr = bridge.host_values(a)
        mask = np.isnan(arr) if np.isnan(ctx.value) else arr == ctx.value
        return bridge.host_result(mask / builtins.max(int(mask.sum()), 1), a.dtype)

    @staticmethod
    def backward(ctx, grad):
        return _C.mul(grad, SharedSelection._shares(ctx))

    # the forward derivative matching backward's (torch's evenly_read_jvp): the mean of the tangent over the
    # elements sharing the value
    @staticmethod
    def jvp(ctx, tangent):
        weighted = _C.mul(tangent, SharedSelection._shares(ctx))
        return _C.sum(_C.reshape(weighted, (weighted.numel(),)), (0,), False, None)


class Max(SharedSelection):
    pick = staticmethod(np.max)             # NaN if there is one


class Min(SharedSelection):
    pick = staticmethod(np.min)


def max(input, dim=None, keepdim=False):
    return _extremum(input, dim, keepdim, True)


def min(input, dim=None, keepdim=False):
    return _extremum(input, dim, keepdim, False)


def amax(input, dim=(), keepdim=False):
    """Maximum over dim (() or None: every dim); ties share the gradient equally."""
    a, dims = tensor_arg(input, "amax"), reduce_dims(dim, "amax")
    check_nonempty(a, dims, "amax")
    return _C.amax(a, dims, bool(keepdim))


def amin(input, dim=(), keepdim=False):
    """Minimum over dim (() or None: every dim); ties share the gradient equally."""
    a, dims = tensor_arg(input, "amin"), reduce_dims(dim, "amin")
    check_nonempty(a, dims, "amin")
    return _C.amin(a, dims, bool(keepdim))


def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) over one dim, or over every dim when dim is None."""
    a = tensor_arg(input, "aminmax")
    dims = () if dim is None else (to_int(dim, "aminmax", "dim"),)
    check_nonempty(a, dims, "aminmax")
    keep = bool(keepdim)
    return return_aminmax(_C.amin(a, dims, keep), _C.amax(a, dims, keep))


def _arg_extremum(input, dim, keepdim, op):
    a = tensor_arg(input, op)
    d = None if dim is None else to_int(dim, op, "dim")
    if a.dtype is _C.bool:
        raise RuntimeError(f"{op}: bool input is not supported (as in torch); convert it with .long() first.")
    check_nonempty(a, () if d is None else (d,), op, IndexError)
    return (_C.argmax if op == "argmax" else _C.argmin)(a, d, bool(keepdim))


def argmax(input, dim=None, keepdim=False):
    """Index of the first maximum (of the flattened input when dim is None); NaN counts as the maximum."""
    return _arg_extremum(input, dim, keepdim, "argmax")


def argmin(input, dim=None, keepdim=False):
    """Index of the first minimum (of the flattened input when dim is None); NaN counts as the minimum."""
    return _arg_extremum(input, dim, keepdim, "argmin")


def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(input))) over dim (an int or a tuple; () is every dim), computed stably; int and bool inputs
    give float32."""
    a = tensor_arg(input, "logsumexp")
    if dim is None:
        raise TypeError("logsumexp: dim must be an int or a tuple of ints (() for every dim), got None.")
    if a.dtype.is_complex:
        return _complex_logsumexp(a, reduce_dims(dim, "logsumexp"), bool(keepdim))
    return _C.logsumexp(a, reduce_dims(dim, "logsumexp"), bool(keepdim))


def _complex_logsumexp(a, dims, keep):
    """torch's complex logsumexp: log(sum(exp(z - m))) + m with m the largest real part (a constant: the result
    does not depend on it), 0 where that is infinite or nothing is reduced; the imaginary part is the principal
    log's, in (-pi, pi]."""
    re = _C.select(_C.view_as_real(a), -1, 0)
    if reduced_count(a, dims, "logsumexp") == 0:
        m = _C.mul(_C.sum(re, dims, True, None), _C.scalar_operand(0, re)).detach()
    else:
        m = _C.amax(re.detach(), dims, True)
        m = _C.where(_C.isfinite(m), m, _C.scalar_operand(0, m))
    out = _C.log(_C.sum(_C.exp(_C.sub(a, m)), dims, keep, None))
    return _C.add(out, m if keep else _C.sum(m, dims, False, None))


# ----- logic and counting ----------------------------------------------------------------------------------------

def _nonzero(a):
    return _C.compare("ne", a, _C.scalar_operand(False, a))


def any(input, dim=None, keepdim=False):
    """Whether any element is nonzero, over dim (an int or a tuple; None: every dim; (): elementwise)."""
    a = tensor_arg(input, "any")
    if isinstance(dim, (tuple, list)) and not dim:
        return _nonzero(a)
    counts = _C.sum(_nonzero(a), reduce_dims(dim, "any"), bool(keepdim), None)
    return _C.compare("gt", counts, _C.scalar_operand(0, counts))


def all(input, dim=None, keepdim=False):
    """Whether every element is nonzero, over dim (an int or a tuple; None: every dim; (): elementwise)."""
    a = tensor_arg(input, "all")
    if isinstance(dim, (tuple, list)) and not dim:
        return _nonzero(a)
    zero = _C.compare("eq", a, _C.scalar_operand(False, a))
    counts = _C.sum(zero, reduce_dims(dim, "all"), bool(keepdim), None)
    return _C.compare("eq", counts, _C.scalar_operand(0, counts))


def count_nonzero(input, dim=None):
    """Number of nonzero elements over dim (None or (): every dim), as int64."""
    a = tensor_arg(input, "count_nonzero")
    return _C.sum(_nonzero(a), reduce_dims(dim, "count_nonzero"), False, None)


# ----- norms -----------------------------------------------------------------------------------------------------

def real_dtype(dtype):
    """A norm's dtype, as torch's: float32 for complex64, float64 for complex128, a real dtype itself."""
    return {"complex64": _C.float32, "complex128": _C.float64}.get(dtype.name, dtype)


def abs_square(a):
    """|a|^2 elementwise, in a's real dtype: a * a, or re^2 + im^2 of a complex a (differentiable, torch's
    gradient 2 a for the sum's)."""
    if not a.dtype.is_complex:
        return _C.mul(a, a)
    pairs = _C.view_as_real(a)
    return _C.sum(_C.mul(pairs, pairs), (-1,), False, None)


def _norm_dtype(a, dtype, op):
    """torch's vector_norm dtype rules: a floating or complex input, converted to dtype= without narrowing (a
    complex input to a complex dtype)."""
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        raise RuntimeError(f"{op}: expected a floating-point or complex input, got {a.dtype.name}.")
    if dtype is None:
        return a
    dt = dtype_arg(dtype, op)
    if a.dtype.is_complex:
        if not dt.is_complex or (a.dtype is _C.complex128 and dt is _C.complex64):
            raise RuntimeError(f"{op}: a {a.dtype.name} input needs a complex dtype= that does not narrow it, got "
                               f"{dt.name}.")
        return _cast(a, dt, op)
    if not dt.is_floating_point:
        raise RuntimeError(f"{op}: dtype must be a floating-point dtype, got {dt.name}.")
    if a.dtype is _C.float64 and dt is _C.float32:
        raise RuntimeError(f"{op}: the input (float64) cannot be converted to dtype float32 without narrowing.")
    return _cast(a, dt, op)


def _safe(a, mask, fill):
    """a where not mask, else fill: a kink guard (where passes no gradient to the guarded branch)."""
    return _C.where(mask, _C.scalar_operand(fill, a), a)


def vector_norm(a, p, dims, keepdim, op="norm"):
    """(sum |a|^p)^(1/p) over dims for a floating `a`, with torch's subgradient 0 wherever the formula divides by
    zero (an all-zero slice, or a zero element when p < 1); p = inf/-inf/0 are max/min/count of |a|."""
    keep = bool(keepdim)
    if a.dtype in (_C.float16, _C.bfloat16) and p != 0 and not math.isinf(p):
        # a half type's powers and sum in float32, the norm rounded once (as torch): float16 300^2 overflows
        return _C.to_dtype(vector_norm(_C.to_dtype(a, _C.float32), p, dims, keepdim, op), a.dtype)
    if math.isinf(p):
        if dims:
            for d in dims:
                if a.ndim and a.shape[wrap_dim(d, a.ndim, op)] == 0:
                    raise RuntimeError(f"{op}: cannot compute the {p} norm over dimension {d} of size 0 (input "
                                       f"shape {shape_str(a.shape)}): the reduction has no identity.")
        elif a.numel() == 0:
            raise RuntimeError(f"{op}: cannot compute the {p} norm of an empty tensor (shape {shape_str(a.shape)}).")
        return (_C.amax if p > 0 else _C.amin)(_C.abs(a), dims, keep)
    if p == 0:
        # the count of nonzero elements; the term of zeros keeps the result in the graph, with gradient 0
        if a.dtype.is_complex:
            a = _C.abs(a)
        count = _C.sum(_nonzero(a), dims, keep, a.dtype)
        no_gradient = _C.where(_C.full(tuple(a.shape), 0, _C.bool), a, _C.scalar_operand(0, a))
        return _C.add(count, _C.sum(no_gradient, dims, keep, None))
    if p == 1:
        return _C.sum(_C.abs(a), dims, keep, None)
    if p == 2:
        s = _C.sum(abs_square(a), dims, keep, None)
        zero = _C.compare("eq", s, _C.scalar_operand(0, s))
        return _safe(_C.sqrt(_safe(s, zero, 1)), zero, 0)
    magnitude = _C.abs(a)
    zero = _C.compare("eq", magnitude, _C.scalar_operand(0, magnitude))
    # |a|^p with the zeros' terms set without a gradient: 0^p is 0 for p > 0 and inf for p < 0
    terms = _C.where(zero, _C.scalar_operand(0.0 if p > 0 else math.inf, magnitude),
                     _C.pow_scalar(_safe(magnitude, zero, 1), p))
    s = _C.sum(terms, dims, keep, None)
    if p < 0:
        return _C.pow_scalar(s, 1.0 / p)
    s_zero = _C.compare("eq", s, _C.scalar_operand(0, s))
    return _safe(_C.pow_scalar(_safe(s, s_zero, 1), 1.0 / p), s_zero, 0)


def _nuclear_norm(a, dims, keepdim, op):
    d0, d1 = dims
    if a.shape[d0] == 0 or a.shape[d1] == 0:
        return _C.sum(a, (d0, d1), bool(keepdim), None)         # no singular values: 0
    rest = tuple(d for d in range(a.ndim) if d not in (d0, d1))
    out = _C.sum(_svdvals(_C.permute(a, rest + (d0, d1))), (-1,), False, None)   # differentiable to any order
    if keepdim:
        for d in sorted((d0, d1)):
            out = _C.unsqueeze(out, d)
    return out


def _matrix_norm(a, p, dim, keepdim, op):
    """torch.norm's string orders over two dims: 'fro' and 'nuc' (torch sends 'fro' over 3+ dims here too, to
    refuse it)."""
    if p not in ("fro", "nuc"):
        raise RuntimeError(f"{op}: p={p!r} is not supported; expected 'fro', 'nuc' or a number.")
    if a.ndim < 2:
        raise RuntimeError(f"{op}: p={p!r} is a matrix norm and needs at least 2 dimensions, got a tensor of shape "
                           f"{shape_str(a.shape)}.")
    dims = tuple(range(a.ndim)) if dim is None else reduce_dims(dim, op)
    if len(dims) != 2:
        raise RuntimeError(f"{op}: p={p!r} is a matrix norm: dim must be a pair of dims, got {dims}.")
    d0, d1 = (wrap_dim(d, a.ndim, op) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"{op}: the two dims of a matrix norm must differ, got {dims}.")
    if p == "fro":
        return vector_norm(a, 2.0, (d0, d1), keepdim, op)
    return _nuclear_norm(a, (d0, d1), keepdim, op)


def _norm(input, p, dim, keepdim, dtype):
    a = tensor_arg(input, "norm")
    a = _norm_dtype(a, dtype, "norm")
    if isinstance(p, str):
        if p == "fro" and (dim is None or not isinstance(dim, (tuple, list)) or len(dim) <= 2):
            return vector_norm(a, 2.0, reduce_dims(dim, "norm"), keepdim)
        return _matrix_norm(a, p, dim, keepdim, "norm")
    p = 2.0 if p is None else float(number(p, "norm", "p"))
    return vector_norm(a, p, reduce_dims(dim, "norm"), keepdim)


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """torch.norm: p a number (a vector norm over dim, every dim by default; inf, -inf and 0 included), 'fro'
    (the 2-norm over up to 2 dims) or 'nuc' (the sum of singular values over 2 dims)."""
    result = _norm(input, p, dim, keepdim, dtype)
    if out is None:
        return result
    return write_out(result, out, "norm")


def norm_method(self, p="fro", dim=None, keepdim=False, dtype=None):
    """Tensor.norm: torch.norm without out=."""
    return _norm(self, p, dim, keepdim, dtype)


def sum_to_size(self, *size):
    """The sum of self down to `size`, a shape self can be expanded from (as the gradient of an expand)."""
    shape = shape_args(size, "sum_to_size")
    ok = len(shape) <= self.ndim and builtins.all(
        s == t or s == 1 for s, t in zip(shape, tuple(self.shape)[self.ndim - len(shape):]))
    if not ok:
        raise RuntimeError(f"sum_to_size: size {shape_str(shape)} is not expandable to size "
                           f"{shape_str(self.shape)}.")
    lead = self.ndim - len(shape)
    dims = tuple(builtins.range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                                if s == 1 and self.shape[lead + i] != 1)
    if not dims:
        return self
    out = _C.sum(self, dims, True, None)
    return _C.reshape(out, shape)
