"""Statistics with torch's signatures: cov and corrcoef (with fweights/aweights), and the histograms histc,
histogram, histogramdd and bincount (counting: no gradient, as torch)."""
import builtins
import collections
import math

import numpy as np

from ... import _C
from .. import bridge
from ..._user_frame import warn
from ..args import Tensor, get_default_dtype, number, shape_str, tensor_arg, to_int, type_name
from ..bridge import is_half
from ..node_names import shows_as
from .pointwise import clamp
from .reduction import array_tensor


def _check_weights(w, name, x, integral):
    w = tensor_arg(w, "cov", name)
    if w.ndim > 1:
        raise RuntimeError(f"cov: expected {name} to have one or fewer dimensions, got {w.ndim}.")
    n = x.shape[1]
    if w.numel() != n:
        raise RuntimeError(f"cov: expected {name} to have the same number of elements as input has observations "
                           f"({n}), got {w.numel()}.")
    if integral and w.dtype.is_floating_point:
        raise RuntimeError(f"cov: expected {name} to have an integral dtype, got {w.dtype.name}.")
    if not integral and not w.dtype.is_floating_point:
        raise RuntimeError(f"cov: expected {name} to have a floating-point dtype, got {w.dtype.name}.")
    values = bridge.host_array(w.detach())
    if values.size and values.min() < 0:
        raise RuntimeError(f"cov: {name} cannot be negative.")
    return _C.reshape(w, (n,))


@shows_as("Cov")
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in input's rows (observations in its columns; a 1-D input is one
    variable): with weights w = fweights * aweights, mean m = sum(w x) / sum(w),
    cov = (x - m) (w (x - m))^T / (sum(w) - correction * sum(w aweights) / sum(w)) (sum(w) - correction without
    aweights). A non-positive divisor warns and gives inf/nan, as torch."""
    a = tensor_arg(input, "cov")
    if a.ndim > 2:
        raise RuntimeError(f"cov: expected input to have two or fewer dimensions, got {a.ndim}.")
    correction = number(correction, "cov", "correction")
    x = _C.reshape(a, (1, -1) if a.ndim < 2 else tuple(a.shape))
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = _C.to_dtype(x, get_default_dtype())
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = _check_weights(fweights, "fweights", x, True)
    if aweights is not None:
        aw = _check_weights(aweights, "aweights", x, False)
        w = aw if w is None else _C.mul(_C.to_dtype(w, aw.dtype), aw)
    own = w                  # torch sums the weights, and forms the divisor from them, in the weights' dtype
    if w is not None:
        w = _C.to_dtype(w, x.dtype) if w.dtype is not x.dtype else w
        w_sum = _C.sum(w, (), False, None)
        avg = _C.div(_C.sum(_C.mul(x, w), (1,), True, None), w_sum)
    else:
        w_sum = _C.full((), float(n), x.dtype)
        avg = _C.mean(x, (1,), True)
    if w is None:
        norm = _C.sub(w_sum, _C.scalar_operand(float(correction), w_sum))
    elif aweights is None:
        norm = _C.sub(w_sum, _C.scalar_operand(float(correction), w_sum))
    else:
        # (float32 aweights of a float64 input: the divisor is float32 arithmetic, as torch's, which matters when
        # the correction nearly cancels sum(w))
        own_sum = _C.sum(own, (), False, None)
        awo = _C.to_dtype(aw, own.dtype) if aw.dtype is not own.dtype else aw
        norm = _C.sub(own_sum, _C.div(_C.mul(_C.scalar_operand(float(correction), own_sum),
                                             _C.sum(_C.mul(own, awo), (), False, None)), own_sum))
        norm = _C.to_dtype(norm, x.dtype) if norm.dtype is not x.dtype else norm
    if float(norm.item().real if norm.dtype.is_complex else norm.item()) <= 0:
        warn("cov: degrees of freedom is <= 0. Correction should be strictly less than the number of "
             "observations.", UserWarning)
        norm = _C.full((), 0.0, x.dtype)
    centred = _C.sub(x, avg)
    weighted = centred if w is None else _C.mul(centred, w)
    weighted = _C.conj(weighted) if weighted.dtype.is_complex else weighted     # (x - m) (w (x - m))^H
    c = _C.div(_C.matmul(centred, _C.permute(weighted, (1, 0))), norm)
    return _C.reshape(c, ()) if c.shape[0] == 1 else c        # one variable: a 0-d result, as torch's squeeze


def corrcoef(input):
    """Pearson correlation coefficients of the variables in input's rows: cov / (std_i std_j), clipped to
    [-1, 1] as torch (rounding can step past it)."""
    a = tensor_arg(input, "corrcoef")
    if a.ndim > 2:
        raise RuntimeError(f"corrcoef: expected input to have two or fewer dimensions, got {a.ndim}.")
    c = cov(a)
    if c.ndim == 0:
        return _C.div(c, c)
    d = _C.sqrt(_C.take(c, bridge.host_result(np.arange(c.shape[0]) * (c.shape[0] + 1), _C.int64)))
    c = _C.div(_C.div(c, _C.reshape(d, (-1, 1))), _C.reshape(d, (1, -1)))
    if c.dtype.is_complex:        # torch clips the real and imaginary parts each
        return _C.view_as_complex(clamp(_C.view_as_real(c), -1, 1).contiguous())
    return clamp(c, -1, 1)


return_histogram = collections.namedtuple("histogram", ["hist", "bin_edges"])


return_histogramdd = collections.namedtuple("histogramdd", ["hist", "bin_edges"])


def _float_input(a, op):
    if not a.dtype.is_floating_point:
        raise NotImplementedError(f"{op}: expected a floating-point input, got {a.dtype.name}.")


def _range_pairs(range, d, op):
    if range is None:
        return None
    values = [float(number(v, op, "range")) for v in range]
    if len(values) != 2 * d:
        raise RuntimeError(f"{op}: expected range to have {2 * d} elements (a min and a max per dimension), got "
                           f"{len(values)}.")
    pairs = list(zip(values[::2], values[1::2]))
    for lo, hi in pairs:
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"{op}: range [{lo:g}, {hi:g}] is not finite.")
        if lo > hi:
            raise RuntimeError(f"{op}: min ({lo:g}) must not exceed max ({hi:g}) in range.")
    return pairs


def _uniform_edges(column, bins, pair, dtype, op, k):
    """torch's edges for an int bin count: over range, else the data's min and max (which must be finite),
    widened by 0.5 either side when they are equal (and [0, 1] for no data)."""
    if pair is None:
        lo, hi = (float(np.min(column)), float(np.max(column))) if column.size else (0.0, 1.0)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"{op}: dimension {k}'s range [{lo:g}, {hi:g}] is not finite; pass range=.")
    else:
        lo, hi = pair
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, bins + 1).astype(dtype)


def _upper_bound(edges, x):
    """std::upper_bound's answer for each of x, on edges in any order: the same probes the C++ binary search makes
    (on increasing edges, the index of the first edge > x)."""
    first = np.zeros(x.shape, np.int64)
    length = np.full(x.shape, len(edges), np.int64)
    while np.any(length > 0):
        half = length >> 1
        middle = first + half
        with np.errstate(invalid="ignore"):
            right = (length > 0) & ~(x < edges[np.minimum(middle, len(edges) - 1)])
        first = np.where(right, middle + 1, first)
        length = np.where(right, length - half - 1, np.where(length > 0, half, 0))
    return first


def _counts_as_torch(points, edges, weights, density):
    """torch's CPU histogram kernel, for bin edges that are not increasing (torch does not check them; numpy
    refuses them): a point counts when each coordinate lies within its dim's first and last edge, in the bin the
    binary search finds (the last bin closed); density divides by the total and by each bin's width, which may be
    negative here, as torch's."""
    shape = [len(e) - 1 for e in edges]
    keep = np.ones(len(points), bool)
    flat = np.zeros(len(points), np.int64)
    for k, e in enumerate(edges):
        x = points[:, k]
        with np.errstate(invalid="ignore"):
            keep &= (x >= e[0]) & (x <= e[-1])
        pos = _upper_bound(e, x) - 1
        pos = np.where(pos == len(e) - 1, pos - 1, pos)
        flat = flat * shape[k] + pos
    hist = np.bincount(flat[keep], weights=None if weights is None else weights[keep].astype(np.float64),
                       minlength=math.prod(shape)).astype(np.float64).reshape(shape)
    if density:
        with np.errstate(all="ignore"):
            hist = hist / hist.sum()
            for k, e in enumerate(edges):
                widths = np.diff(e.astype(np.float64))
                hist = hist / widths.reshape([-1 if j == k else 1 for j in builtins.range(len(edges))])
    return hist


def _histogramdd(a, bins, range, weight, density, op, one_dim):
    _float_input(a, op)
    dtype = np.dtype(a.dtype.name if a.dtype.name != "bfloat16" else "float32")
    values = bridge.host_array(a.detach()).astype(dtype, copy=False)
    if one_dim:
        points = values.reshape(-1, 1)
    else:
        if a.ndim < 1:
            raise RuntimeError(f"{op}: expected input to have at least 1 dimension, got a 0-d tensor.")
        points = values.reshape(-1, a.shape[-1]) if a.ndim else values.reshape(1, -1)
    d = points.shape[1]
    w = None
    if weight is not None:
        wt = tensor_arg(weight, op, "weight")
        want = tuple(a.shape) if one_dim else tuple(a.shape[:-1])
        if tuple(wt.shape) != want:
            raise RuntimeError(f"{op}: expected weight to have shape {shape_str(want)}, got {shape_str(wt.shape)}.")
        if wt.dtype is not a.dtype:
            raise RuntimeError(f"{op}: expected weight to have the input's dtype ({a.dtype.name}), got "
                               f"{wt.dtype.name}.")
        w = bridge.host_array(wt.detach()).astype(dtype, copy=False).reshape(-1)
    pairs = _range_pairs(range, d, op)
    if isinstance(bins, Tensor):
        bins = [bins]
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        bins = [int(bins)] * d
    if not isinstance(bins, (list, tuple)) or len(bins) != d:
        raise RuntimeError(f"{op}: expected bins to be an int, or {d} ints or 1-D tensors (one per dimension), "
                           f"got {type_name(bins)}.")
    edges, unordered = [], False
    for k, b in enumerate(bins):
        if isinstance(b, Tensor):
            if b.ndim != 1 or b.numel() < 1:
                raise RuntimeError(f"{op}: expected bin edges to be a 1-D tensor with at least one element, got "
                                   f"shape {shape_str(b.shape)}.")
            if b.dtype is not a.dtype:
                raise RuntimeError(f"{op}: expected the bin edges to have the input's dtype ({a.dtype.name}), got "
                                   f"{b.dtype.name}.")
            e = bridge.host_array(b.detach()).astype(dtype)
            with np.errstate(all="ignore"):
                unordered = unordered or bool(np.any(e[1:] < e[:-1]))
            edges.append(e)
        else:
            n = to_int(b, op, "bins")
            if n <= 0:
                raise RuntimeError(f"{op}: expected the number of bins to be positive, got {n}.")
            edges.append(_uniform_edges(points[:, k], n, None if pairs is None else pairs[k], dtype, op, k))
    if unordered:
        hist = _counts_as_torch(points, edges, w, bool(density))
    else:
        with np.errstate(all="ignore"):
            hist, _ = np.histogramdd(points.astype(np.float64), bins=[e.astype(np.float64) for e in edges],
                                     weights=w, density=bool(density))
    out_hist = bridge.host_result(hist.astype(dtype), a.dtype)
    out_edges = tuple(bridge.host_result(e, a.dtype) for e in edges)
    return out_hist, out_edges


def histogram(input, bins, *, range=None, weight=None, density=False):
    """(hist, bin_edges) of input's values: bins equal-width bins over range (default: the data's min and max),
    or the given increasing edges (a 1-D tensor); the last bin includes its right edge. weight= counts each value
    with its weight; density=True divides by the total and the bin widths."""
    a = tensor_arg(input, "histogram")
    if isinstance(bins, Tensor) and bins.dtype is not a.dtype:
        raise RuntimeError(f"histogram: expected bins to have the input's dtype ({a.dtype.name}), got "
                           f"{bins.dtype.name}.")
    if range is not None and (not isinstance(range, (tuple, list)) or len(range) != 2):
        raise TypeError(f"histogram: expected range to be a pair of numbers (min, max), got {type_name(range)}.")
    hist, edges = _histogramdd(a, bins, range, weight, density, "histogram", True)
    return return_histogram(hist, edges[0])


def histogramdd(input, bins, *, range=None, weight=None, density=False):
    """The D-dimensional histogram of the points in input's rows (shape (..., D)): bins is an int, D ints or D
    tensors of edges; range is [min_1, max_1, ..., min_D, max_D]. Returns (hist, bin_edges), bin_edges a tuple of
    D tensors."""
    a = tensor_arg(input, "histogramdd")
    hist, edges = _histogramdd(a, bins, range, weight, density, "histogramdd", False)
    return return_histogramdd(hist, edges)


def histc(input, bins=100, min=0, max=0):
    """Counts of the elements in `bins` equal-width bins over [min, max] (the data's range when min == max);
    elements outside are ignored. No gradient."""
    a = tensor_arg(input, "histc")
    if not a.dtype.is_floating_point:
        raise NotImplementedError(f"histc: {a.dtype.name} input is not supported (as in torch); convert it with "
                                  ".float() first.")
    bins = to_int(bins, "histc", "bins")
    if bins <= 0:
        raise RuntimeError(f"histc: bins must be > 0, got {bins}.")
    arr = bridge.host_values(a).reshape(-1)
    lo, hi = float(number(min, "histc", "min")), float(number(max, "histc", "max"))
    if lo == hi and arr.size:
        lo, hi = float(arr.min()), float(arr.max())               # NaN if the data has one
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"histc: range of [{lo}, {hi}] is not finite.")
    if not lo < hi:
        raise RuntimeError(f"histc: max must be larger than min, got min {lo} and max {hi}.")
    # torch's arithmetic, in the input's dtype: bin = trunc((x - lo) * bins / (hi - lo)), the last bin closed (each
    # step rounded for the half types, whose values arr holds as float32)
    t = arr.dtype.type
    rounded = (lambda v: bridge.round_to(v, a.dtype)) if is_half(a.dtype) else (lambda v: v)
    left, right = rounded(t(lo)), rounded(t(hi))
    inside = arr[(arr >= left) & (arr <= right)]
    position = rounded(rounded(rounded(inside - left) * rounded(t(bins))) / rounded(right - left)).astype(np.int64)
    position[position == bins] = bins - 1
    return bridge.host_result(np.bincount(position, minlength=bins), a.dtype)


def bincount(input, weights=None, minlength=0):
    """Counts of each non-negative int in a 1-D int64 input (summed weights if given), at least minlength bins.
    No gradient."""
    a = tensor_arg(input, "bincount")
    if a.dtype is not _C.int64:
        raise NotImplementedError(f"bincount: {a.dtype.name} input is not supported; expected int64.")
    minlength = to_int(minlength, "bincount", "minlength")
    if minlength < 0:
        raise RuntimeError(f"bincount: minlength must be >= 0, got {minlength}.")
    arr = bridge.host_values(a)
    if a.ndim != 1 or (arr.size and arr.min() < 0):
        raise RuntimeError(f"bincount: expected a 1-D tensor of non-negative ints, got shape {shape_str(a.shape)}"
                           + (f" with minimum {arr.min()}" if arr.size and a.ndim == 1 else "") + ".")
    if weights is None:
        return array_tensor(np.bincount(arr, minlength=minlength).astype(np.int64))
    w = tensor_arg(weights, "bincount", "weights")
    if w.ndim != 1 or w.shape[0] != arr.shape[0]:
        raise RuntimeError(f"bincount: weights must be 1-D with the input's length {arr.shape[0]}, got shape "
                           f"{shape_str(w.shape)}.")
    out_dtype = np.float32 if w.dtype is _C.float32 else np.float64
    counts = np.bincount(arr, weights=bridge.host_values(w).astype(np.float64), minlength=minlength)
    return array_tensor(counts.astype(out_dtype))
