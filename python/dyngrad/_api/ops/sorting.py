"""Order statistics with torch's signatures: sort, argsort, msort, topk, kthvalue, median, nanmedian, mode,
quantile, nanquantile; and counting: unique, unique_consecutive, histc, bincount.

sort, argsort and topk order in the engine (_C.sort, _C.argsort, _C.topk); the others compute which element is
chosen with numpy on the detached input; both order stably with NaN as the largest value, as torch. The values are
`_C.gather(input, dim, indices)`, so the gradient goes to the chosen element as torch's does (quantile's interpolation is a composite over two gathers). median() and nanmedian() without a dim
share their gradient equally among the elements equal to the median, as torch's; they are small Functions. unique,
unique_consecutive, histc and bincount have no gradient (nor in torch).

Ties: sort, argsort, msort, median, nanmedian and mode pick the elements torch picks (median's index is the
stable order's; mode's is the last occurrence), with one exception: sort is always stable, while torch's default
(stable=False) orders the ties of slices longer than 16 as its introsort leaves them. topk and kthvalue pick,
among equal values, the one first in the input (torch's quickselect leaves that unspecified and picks others)."""
import builtins
import collections

import numpy as np

from ... import _C
from ...autograd.function import _open_levels_of
from .. import bridge
from ..args import Tensor, number, refuse_complex, shape_str, tensor_arg, to_int, type_name, wrap_dim
from .pointwise import _cast, _pair
from .reduction import SharedSelection, array_tensor, check_nonempty

return_sort = collections.namedtuple("sort", ["values", "indices"])
return_topk = collections.namedtuple("topk", ["values", "indices"])
return_kthvalue = collections.namedtuple("kthvalue", ["values", "indices"])
return_median = collections.namedtuple("median", ["values", "indices"])
return_nanmedian = collections.namedtuple("nanmedian", ["values", "indices"])
return_mode = collections.namedtuple("mode", ["values", "indices"])
# the results the C++ fast paths of sort and topk make (Note [Fast paths] in csrc/bindings/fast_paths.cpp)
_C._register_helpers({"return_sort": return_sort, "return_topk": return_topk})




def _rows(a, dim, op):
    """(numpy array of a, at least 1-D, the wrapped dim): a 0-d tensor is one row of one element."""
    refuse_complex(op, a, ordered=True)
    d = wrap_dim(to_int(dim, op, "dim"), a.ndim, op)
    arr = bridge.host_values(a)
    return (arr.reshape(1) if a.ndim == 0 else arr), d


def _no_bool(a, op):
    if a.dtype is _C.bool:
        raise NotImplementedError(f"{op}: bool input is not supported (as in torch); convert it with .long() first.")


def stable_order(arr, axis, descending=False):
    """argsort along axis, stable (equal values keep their order), NaN the largest value: ascending puts NaN
    last, descending first. Descending = the ascending order of the reversed array, reversed (no negation, so
    ints and bools need no care)."""
    if not descending:
        return np.argsort(arr, axis=axis, kind="stable")
    n = arr.shape[axis]
    order = np.argsort(np.flip(arr, axis), axis=axis, kind="stable")
    return (n - 1) - np.flip(order, axis)


def _pick(a, d, index, keepdim, result):
    """values = a gathered at `index` (numpy, size 1 along d; a 0-d index for a 0-d a) and the indices, as the
    named pair `result`; dim d dropped unless keepdim."""
    idx = array_tensor(index.astype(np.int64).reshape(()) if a.ndim == 0 else index.astype(np.int64))
    values = _C.gather(a, d, idx)
    if not keepdim and a.ndim > 0:
        values, idx = _C.squeeze(values, (d,)), _C.squeeze(idx, (d,))
    return result(values, idx)


# ----- sort ------------------------------------------------------------------------------------------------------
# The engines' _C.sort, _C.argsort and _C.topk order by keys (Note [Sorting by keys] in csrc/dyngrad/kernels/
# sort.cpp): the stable order whatever `stable` says, topk by selection; the values are a gather of the input.

def _sort_dim(a, dim, op):
    return wrap_dim(to_int(dim, op, "dim"), a.ndim, op)


def sort(input, dim=-1, descending=False, *, stable=False):
    """(values, indices) sorted along dim, NaN as the largest value; stable=True keeps equal values in their order,
    stable=False may give them in any order (as torch)."""
    a = tensor_arg(input, "sort")
    return return_sort(*_C.sort(a, _sort_dim(a, dim, "sort"), bool(descending), bool(stable)))


def argsort(input, dim=-1, descending=False, *, stable=False):
    """The indices that sort input along dim (equal values in their order with stable=True)."""
    a = tensor_arg(input, "argsort")
    return _C.argsort(a, _sort_dim(a, dim, "argsort"), bool(descending), bool(stable))


def msort(input):
    """input sorted along its first dim."""
    return sort(tensor_arg(input, "msort"), 0).values


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The k largest (smallest) elements along dim and their indices, in sorted order (also for sorted=False)."""
    a = tensor_arg(input, "topk")
    k = to_int(k, "topk", "k")
    d = _sort_dim(a, dim, "topk")
    if a.dtype is _C.bool:
        raise RuntimeError("topk: bool input is not supported (as in torch); convert it with .long() first.")
    n = a.shape[d] if a.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"topk: k ({k}) is out of range for dimension {d} of size {n} (input shape "
                           f"{shape_str(a.shape)}).")
    if a.ndim == 0:                                  # torch gives the element itself for k = 0 and 1
        return return_topk(_C.clone(a), array_tensor(np.zeros((), dtype=np.int64)))
    return return_topk(*_C.topk(a, k, d, bool(largest)))


def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest element along dim (k counts from 1) and its index."""
    a = tensor_arg(input, "kthvalue")
    k = to_int(k, "kthvalue", "k")
    arr, d = _rows(a, dim, "kthvalue")
    check_nonempty(a, (d,), "kthvalue")
    if a.ndim:                                       # (torch copies a 0-d input without looking at its dtype)
        _no_bool(a, "kthvalue")
    n = arr.shape[d]
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue: k ({k}) is out of range for dimension {d} of size {n}; expected 1..{n}.")
    index = np.take(stable_order(arr, d), [k - 1], axis=d)
    return _pick(a, d, index, keepdim, return_kthvalue)


# ----- median and mode -------------------------------------------------------------------------------------------

def _lower_median_rank(arr, axis, ignore_nan):
    """Per slice, the rank (in the stable ascending order) of the lower median: (n-1)//2 of the values counted
    (NaNs excluded by nanmedian), 0 for a slice of NaNs only."""
    if not ignore_nan or arr.dtype.kind != "f":
        return np.full(np.delete(arr.shape, axis), (arr.shape[axis] - 1) // 2, dtype=np.int64)
    count = (~np.isnan(arr)).sum(axis=axis)
    return np.where(count > 0, (count - 1) // 2, 0)


class Median(SharedSelection):
    """median() of every element: the lower median, NaN if there is one (torch's value for an empty input: NaN,
    or int64's least value); the gradient is shared by the elements equal to it (SharedSelection)."""
    ignore_nan = False

    @classmethod
    def pick(cls, flat):
        if flat.size == 0:
            return np.array(np.nan if flat.dtype.kind == "f" else np.iinfo(np.int64).min, dtype=flat.dtype)
        if not cls.ignore_nan and flat.dtype.kind == "f" and np.isnan(flat).any():
            return np.array(np.nan, dtype=flat.dtype)
        return np.sort(flat)[int(_lower_median_rank(flat, 0, cls.ignore_nan))]


class Nanmedian(Median):
    """nanmedian() of every element: the lower median of the non-NaN elements (see Median)."""
    ignore_nan = True


def _median(input, dim, keepdim, ignore_nan):
    op = "nanmedian" if ignore_nan else "median"
    a = tensor_arg(input, op)
    refuse_complex(op, a, ordered=True)
    if dim is None:
        if a.numel():
            _no_bool(a, op)
        return (Nanmedian if ignore_nan else Median).apply(a)
    arr, d = _rows(a, dim, op)
    check_nonempty(a, (d,), op)
    _no_bool(a, op)
    order = stable_order(arr, d)
    rank = np.expand_dims(_lower_median_rank(arr, d, ignore_nan), d)
    index = np.take_along_axis(order, rank, axis=d)
    if not ignore_nan and arr.dtype.kind == "f":
        nan = np.isnan(arr)
        has_nan = nan.any(axis=d, keepdims=True)
        index = np.where(has_nan, np.argmax(nan, axis=d).reshape(has_nan.shape), index)   # the first NaN
    return _pick(a, d, index, keepdim, return_nanmedian if ignore_nan else return_median)


def median(input, dim=None, keepdim=False):
    """The lower median of every element (a value), or (values, indices) along dim; NaN if the slice has one."""
    return _median(input, dim, keepdim, False)


def nanmedian(input, dim=None, keepdim=False):
    """median ignoring NaN (NaN only where every element is NaN)."""
    return _median(input, dim, keepdim, True)


def mode(input, dim=-1, keepdim=False):
    """The most frequent value along dim (the smallest of equally frequent ones) and the index of its last
    occurrence."""
    a = tensor_arg(input, "mode")
    arr, d = _rows(a, dim, "mode")
    check_nonempty(a, (d,), "mode")
    rows = np.moveaxis(arr, d, -1)
    order = stable_order(rows, -1)
    values = np.take_along_axis(rows, order, axis=-1)
    n = rows.shape[-1]
    starts = np.ones(values.shape, dtype=bool)
    starts[..., 1:] = values[..., 1:] != values[..., :-1]          # NaN != NaN: each NaN is a run of its own
    ends = np.ones(values.shape, dtype=bool)
    ends[..., :-1] = starts[..., 1:]
    position = np.arange(n)
    run_start = np.maximum.accumulate(np.where(starts, position, 0), axis=-1)
    length = np.where(ends, position - run_start + 1, 0)
    best = np.argmax(length, axis=-1)[..., None]                   # the first longest run: the smallest value
    index = np.moveaxis(np.take_along_axis(order, best, axis=-1), -1, d)
    return _pick(a, d, index, keepdim, return_mode)


# ----- quantiles -------------------------------------------------------------------------------------------------

INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    op = "nanquantile" if ignore_nan else "quantile"
    a = tensor_arg(input, op)
    if not isinstance(q, (Tensor, bool, int, float)) and not (isinstance(q, np.generic) and q.dtype.kind in "biuf"):
        raise TypeError(f"{op}: expected a number or a Tensor as q, got {type_name(q)}.")
    d = None if dim is None else to_int(dim, op, "dim")
    if a.dtype is not _C.float32 and a.dtype is not _C.float64:
        raise RuntimeError(f"{op}: expected a float32 or float64 input, got {a.dtype.name}.")
    np_dtype = bridge.host_values(a).dtype
    if isinstance(q, Tensor):
        if q.dtype is not a.dtype:
            raise RuntimeError(f"{op}: q must have the input's dtype ({a.dtype.name}), got {q.dtype.name}.")
        if q.ndim > 1:
            raise RuntimeError(f"{op}: q must be a number or a 0-d or 1-D tensor, got shape {shape_str(q.shape)}.")
        qs = np.array(bridge.host_values(q), dtype=np_dtype)
        if not ((qs >= 0) & (qs <= 1)).all():
            raise RuntimeError(f"{op}: q values must be in the range [0, 1], got {qs.tolist()}.")
    else:
        value = float(number(q, op, "q"))
        if not 0 <= value <= 1:
            raise RuntimeError(f"{op}: q must be in the range [0, 1], got {value}.")
        qs = np.array(value, dtype=np_dtype)
    if interpolation not in INTERPOLATIONS:
        raise RuntimeError(f"{op}: interpolation must be one of {', '.join(INTERPOLATIONS)}; got {interpolation!r}.")
    if a.numel() == 0:
        raise RuntimeError(f"{op}: the input is empty (shape {shape_str(a.shape)}); quantiles need values.")
    d = None if d is None else wrap_dim(d, a.ndim, op)
    # the values to reduce as the last dim: x of shape (*rest, n)
    if d is None:
        x, out_shape = _C.reshape(a, (a.numel(),)), [1] * a.ndim if keepdim else []
    else:
        if a.ndim == 0:
            x, out_shape = _C.reshape(a, (1,)), []
        else:
            x = _C.permute(a, tuple(i for i in range(a.ndim) if i != d) + (d,))
            out_shape = list(a.shape)
            if keepdim:
                out_shape[d] = 1
            else:
                del out_shape[d]
    arr = bridge.host_values(x)
    n = arr.shape[-1]
    order = stable_order(arr, -1)
    sorted_x = _C.gather(x, x.ndim - 1, array_tensor(order.astype(np.int64)))
    q_row = qs.reshape(-1)                                          # (Q,)
    nan = np.isnan(arr)
    if ignore_nan:
        counts = (~nan).sum(axis=-1, keepdims=True).astype(np_dtype)
        ranks = np.maximum(q_row * (counts - np_dtype.type(1)), np_dtype.type(0))
    else:
        ranks = np.broadcast_to(q_row * np_dtype.type(n - 1), arr.shape[:-1] + q_row.shape)
        ranks = np.where(nan.any(axis=-1, keepdims=True), np_dtype.type(n - 1), ranks)   # NaN sorts last
    ranks = np.asarray(ranks, dtype=np_dtype)
    if interpolation == "lower":
        ranks = np.floor(ranks)
    elif interpolation == "higher":
        ranks = np.ceil(ranks)
    elif interpolation == "nearest":
        ranks = np.round(ranks)                                     # half to even, as torch's round
    below = ranks.astype(np.int64)
    last = x.ndim - 1
    result = _C.gather(sorted_x, last, array_tensor(below))
    if interpolation in ("linear", "midpoint"):
        weight = np.full_like(ranks, 0.5) if interpolation == "midpoint" else ranks - below.astype(np_dtype)
        above = _C.gather(sorted_x, last, array_tensor(np.ceil(ranks).astype(np.int64)))
        # torch's lerp: below + w (above - below) for w < 0.5, else above - (above - below)(1 - w)
        step = _C.sub(above, result)
        w = array_tensor(weight)
        low = _C.add(result, _C.mul(step, w))
        high = _C.sub(above, _C.mul(step, array_tensor((np_dtype.type(1) - weight).astype(np_dtype))))
        if interpolation == "linear" and isinstance(q, Tensor) and (q.requires_grad or _open_levels_of((q,))):
            # the weight is rank - below with rank = q (n - 1) (nanquantile: q (count - 1)), so d result / d q is
            # step * that scale where the rank came from q (not a NaN slice's n - 1, nor nanquantile's clamp at 0;
            # there step may be NaN and the gradient is 0, as torch's). Added as step (q - q.detach()): exactly 0.
            scale = (counts - np_dtype.type(1)) if ignore_nan else np.full(arr.shape[:-1] + (1,), n - 1, np_dtype)
            from_q = np.broadcast_to((q_row * scale >= 0) if ignore_nan else ~nan.any(axis=-1, keepdims=True),
                                     ranks.shape)
            factor = array_tensor(np.where(from_q, scale, np_dtype.type(0)).astype(np_dtype))
            q_t = _C.reshape(q, (q_row.shape[0],))
            step_q = _C.where(array_tensor(np.array(from_q)), step, _C.scalar_operand(0.0, step))
            moved = _C.mul(step_q, _C.mul(_C.sub(q_t, q_t.detach()), factor))
            low, high = _C.add(low, moved), _C.add(high, moved)
        result = _C.where(array_tensor(weight < 0.5), low, high)
    if qs.ndim == 0:
        result = _C.squeeze(result, (last,))
    else:
        result = _C.permute(result, (last,) + tuple(range(last)))
        out_shape = [qs.shape[0]] + out_shape
    return _C.reshape(result, tuple(out_shape))


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles (q a number or a 1-D tensor in [0, 1]) of every element or along dim, interpolated as
    `interpolation` says; NaN where a slice has a NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile ignoring NaN (NaN only where every element is NaN)."""
    return _quantile(input, q, dim, keepdim, interpolation, True)


# ----- unique ----------------------------------------------------------------------------------------------------

def _unique_result(values, dtype, inverse, counts, return_inverse, return_counts):
    out = [bridge.host_result(values, dtype)]
    if return_inverse:
        out.append(array_tensor(inverse.astype(np.int64)))
    if return_counts:
        out.append(array_tensor(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def _unique_dim(a, dim, op):
    """The wrapped dim of unique(dim=...), refusing a 0-d input and other empty dims as torch does."""
    dim = to_int(dim, op, "dim")
    if a.ndim == 0:
        raise IndexError(f"{op}: dim {dim} is out of range for a 0-d tensor (it has no dimensions).")
    d = wrap_dim(dim, a.ndim, op)
    if a.numel() == 0 and a.shape[d] != 0:
        raise RuntimeError(f"{op}: the input has size-0 dimensions other than dim {d} (shape "
                           f"{shape_str(a.shape)}); unique cannot be applied.")
    return d


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (or slices along dim), sorted; with the inverse indices and/or the counts. NaNs are
    all distinct, as in torch. No gradient."""
    a = tensor_arg(input, "unique")
    refuse_complex("unique", a, ordered=True)
    arr = bridge.host_values(a)
    if dim is None:
        flat = arr.reshape(-1)
        values, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True,
                                            **({"equal_nan": False} if flat.dtype.kind == "f" else {}))
        return _unique_result(values, a.dtype, inverse.reshape(arr.shape), counts, return_inverse, return_counts)
    d = _unique_dim(a, dim, "unique")
    rows = np.moveaxis(arr, d, 0).reshape(arr.shape[d], arr.size // builtins.max(arr.shape[d], 1))
    if rows.shape[0] == 0:
        return _unique_result(arr, a.dtype, np.zeros(0), np.zeros(0), return_inverse, return_counts)
    order = np.lexsort(rows.T[::-1])                              # slices in lexicographic order
    ordered = rows[order]
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    group = np.cumsum(starts) - 1
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = group
    counts = np.diff(np.append(np.nonzero(starts)[0], len(order)))
    values = np.take(arr, order[starts], axis=d)
    return _unique_result(values, a.dtype, inverse, counts, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Each run of equal consecutive values (or slices along dim) kept once; with the inverse indices and/or the
    run lengths. No gradient."""
    a = tensor_arg(input, "unique_consecutive")
    refuse_complex("unique_consecutive", a)
    arr = bridge.host_values(a)
    if dim is None:
        rows, d, inverse_shape = arr.reshape(-1, 1), None, arr.shape
    else:
        d = _unique_dim(a, dim, "unique_consecutive")
        rows = np.moveaxis(arr, d, 0).reshape(arr.shape[d], arr.size // builtins.max(arr.shape[d], 1))
        inverse_shape = (arr.shape[d],)
    n = rows.shape[0]
    starts = np.ones(n, dtype=bool)
    if n:
        starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    inverse = (np.cumsum(starts) - 1).reshape(inverse_shape)
    counts = np.diff(np.append(np.nonzero(starts)[0], n))
    values = arr.reshape(-1)[starts] if d is None else np.take(arr, np.nonzero(starts)[0], axis=d)
    return _unique_result(values, a.dtype, inverse, counts, return_inverse, return_counts)


# ----- histograms ------------------------------------------------------------------------------------------------


# ----- set membership ----------------------------------------------------------------------------------------------

def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of `elements` occurs in `test_elements` (either may be a number, not both); values are
    compared in the two operands' promoted dtype, as torch. No gradient."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(f"isin: expected a Tensor as elements or test_elements, got {type_name(elements)} and "
                        f"{type_name(test_elements)}.")
    a, b = _pair(elements, test_elements, "isin", numbers=(True, True))
    if a.dtype is _C.bool or b.dtype is _C.bool:
        raise RuntimeError("isin: bool tensors are not supported (as in torch); compare as integers instead.")
    dtype = _C.result_type(a, b)
    va, vb = bridge.host_array(_cast(a.detach(), dtype)), bridge.host_array(_cast(b.detach(), dtype))
    found = np.isin(va, vb.reshape(-1), assume_unique=bool(assume_unique), invert=bool(invert))
    return bridge.host_result(np.asarray(found, dtype=np.bool_).reshape(va.shape), _C.bool)
