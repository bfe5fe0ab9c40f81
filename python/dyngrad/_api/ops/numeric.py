"""Issue 10, third group: histograms, running integrals and numerical derivatives (histogram, histogramdd,
cumulative_trapezoid, gradient), Vandermonde matrices and signal windows, index_reduce and put, the identities torch
gives complex-number helpers on real tensors (conj, adjoint, real, H, mH, ...), the `*_copy` forms of the view
ops, Python callables over elements (apply_, map_) and DLPack exchange through numpy."""
import builtins
import collections
import math

import numpy as np

from ... import _C
from ..args import (Tensor, check_device, dtype_arg, finish, get_default_dtype, host_array, number, shape_str,
                   tensor_arg, to_int, type_name, wrap_dim)
from ..node_names import shows_as
from .pointwise import _cast, _from_numpy

return_histogram = collections.namedtuple("histogram", ["hist", "bin_edges"])
return_histogramdd = collections.namedtuple("histogramdd", ["hist", "bin_edges"])


# ----- histograms (no gradient, as torch) --------------------------------------------------------------------------

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


def _histogramdd(a, bins, range, weight, density, op, one_dim):
    _float_input(a, op)
    dtype = np.dtype(a.dtype.name if a.dtype.name != "bfloat16" else "float32")
    values = host_array(a.detach()).astype(dtype, copy=False)
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
        w = host_array(wt.detach()).astype(dtype, copy=False).reshape(-1)
    pairs = _range_pairs(range, d, op)
    if isinstance(bins, Tensor):
        bins = [bins]
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        bins = [int(bins)] * d
    if not isinstance(bins, (list, tuple)) or len(bins) != d:
        raise RuntimeError(f"{op}: expected bins to be an int, or {d} ints or 1-D tensors (one per dimension), "
                           f"got {type_name(bins)}.")
    edges = []
    for k, b in enumerate(bins):
        if isinstance(b, Tensor):
            if b.ndim != 1 or b.numel() < 1:
                raise RuntimeError(f"{op}: expected bin edges to be a 1-D tensor with at least one element, got "
                                   f"shape {shape_str(b.shape)}.")
            if b.dtype is not a.dtype:
                raise RuntimeError(f"{op}: expected the bin edges to have the input's dtype ({a.dtype.name}), got "
                                   f"{b.dtype.name}.")
            e = host_array(b.detach()).astype(dtype)
            with np.errstate(all="ignore"):
                decreasing = np.any(e[1:] < e[:-1])
            if decreasing:
                raise RuntimeError(f"{op}: expected the bin edges to be increasing.")
            edges.append(e)
        else:
            n = to_int(b, op, "bins")
            if n <= 0:
                raise RuntimeError(f"{op}: expected the number of bins to be positive, got {n}.")
            edges.append(_uniform_edges(points[:, k], n, None if pairs is None else pairs[k], dtype, op, k))
    with np.errstate(all="ignore"):
        hist, _ = np.histogramdd(points.astype(np.float64), bins=[e.astype(np.float64) for e in edges], weights=w,
                                 density=bool(density))
    out_hist = _from_numpy(hist.astype(dtype), a.dtype)
    out_edges = tuple(_from_numpy(e, a.dtype) for e in edges)
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


# ----- running integral and numerical derivative --------------------------------------------------------------------

def _float_of(a):
    return a if a.dtype.is_floating_point else _C.to_dtype(a, get_default_dtype())


def _along(a, d, start, stop):
    return _C.slice(a, d, start, stop, 1)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal integral of y along dim: out[i] = sum_{k<=i} (y[k] + y[k+1]) / 2 * (x[k+1] - x[k])
    (spacing dx, or 1, when x is not given); one element shorter than y along dim."""
    from .scan import cumsum
    a = tensor_arg(y, "cumulative_trapezoid", "y")
    if x is not None and dx is not None:
        raise TypeError("cumulative_trapezoid: pass x or dx, not both.")
    if a.ndim == 0:
        raise IndexError("cumulative_trapezoid: dim -1 is out of range for a 0-d y (expected at least 1 dim).")
    d = wrap_dim(to_int(dim, "cumulative_trapezoid", "dim"), a.ndim, "cumulative_trapezoid")
    n = a.shape[d]
    a = _float_of(a)
    if n == 0:
        return a
    mid = _C.add(_along(a, d, 1, n), _along(a, d, 0, n - 1))
    if x is None:
        h = 1.0 if dx is None else float(number(dx, "cumulative_trapezoid", "dx"))
        areas = _C.mul(mid, _C.scalar_operand(h / 2.0, mid))
    else:
        xs = tensor_arg(x, "cumulative_trapezoid", "x")
        if xs.ndim == 1:
            if xs.shape[0] != n:
                raise RuntimeError(f"cumulative_trapezoid: x has {xs.shape[0]} elements, y has {n} along dim {d}.")
            spacing = _C.reshape(_C.sub(_along(xs, 0, 1, n), _along(xs, 0, 0, n - 1)),
                                 tuple(n - 1 if i == d else 1 for i in builtins.range(a.ndim)))
        else:
            xd = wrap_dim(d - a.ndim, xs.ndim, "cumulative_trapezoid")
            spacing = _C.sub(_along(xs, xd, 1, xs.shape[xd]), _along(xs, xd, 0, xs.shape[xd] - 1))
        spacing = _float_of(spacing)
        dtype = _C.result_type(mid, spacing)
        areas = _C.div(_C.mul(_cast(mid, dtype), _cast(spacing, dtype)), _C.scalar_operand(2.0, _cast(mid, dtype)))
    return cumsum(areas, d)


def _spacing_list(spacing, dims, a, op):
    """One entry per dim: a float step, or a 1-D tensor of coordinates."""
    if isinstance(spacing, (tuple, list)):
        items = list(spacing)
        if len(items) != len(dims):
            raise RuntimeError(f"{op}: expected spacing to be unspecified, a scalar, or a list of length equal to "
                               f"the number of dims ({len(dims)}), got a list of length {len(items)}.")
    else:
        items = [spacing] * len(dims)
    out = []
    for k, s in zip(dims, items):
        if isinstance(s, Tensor):
            if s.ndim == 0:
                out.append(float(s.item()))
                continue
            if s.ndim != 1 or s.shape[0] != a.shape[k]:
                raise RuntimeError(f"{op}: expected each spacing tensor to be 1-D with the size of its dim "
                                   f"({a.shape[k]}), got shape {shape_str(s.shape)}.")
            out.append(s)
        else:
            out.append(float(number(s, op, "spacing")))
    return out


def _stencil(n, step, edge_order):
    """(index, coefficient) pairs, 3 of each, per position of a dim of size n: the second-order central
    difference inside and the one- or two-sided difference of edge_order at the ends (numpy's formulas, for
    uneven coordinates too). step is a float or the coordinates."""
    h = np.full(n - 1, step, dtype=np.float64) if np.ndim(step) == 0 else np.diff(step.astype(np.float64))
    idx = np.zeros((3, n), dtype=np.int64)
    coef = np.zeros((3, n), dtype=np.float64)
    if n > 2:
        h1, h2 = h[:-1], h[1:]
        idx[:, 1:-1] = np.arange(n)[1:-1] + np.array([[-1], [0], [1]])
        coef[0, 1:-1] = -h2 / (h1 * (h1 + h2))
        coef[1, 1:-1] = (h2 - h1) / (h1 * h2)
        coef[2, 1:-1] = h1 / (h2 * (h1 + h2))
    if edge_order == 1:
        idx[:2, 0], coef[:2, 0] = (0, 1), (-1.0 / h[0], 1.0 / h[0])
        idx[:2, -1], coef[:2, -1] = (n - 2, n - 1), (-1.0 / h[-1], 1.0 / h[-1])
    else:
        d1, d2 = h[0], h[1]
        idx[:, 0] = (0, 1, 2)
        coef[:, 0] = (-(2 * d1 + d2) / (d1 * (d1 + d2)), (d1 + d2) / (d1 * d2), -d1 / (d2 * (d1 + d2)))
        d1, d2 = h[-2], h[-1]
        idx[:, -1] = (n - 3, n - 2, n - 1)
        coef[:, -1] = (d2 / (d1 * (d1 + d2)), -(d2 + d1) / (d1 * d2), (2 * d2 + d1) / (d2 * (d1 + d2)))
    return idx, coef


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """The derivative of the samples in input along each dim (all dims, or dim), by second-order central
    differences inside and one-sided ones of edge_order (1 or 2) at the ends; spacing is a step (one for all dims
    or one per dim) or the coordinates of each dim's samples. Returns a tuple, one tensor per dim."""
    op = "gradient"
    a = tensor_arg(input, op)
    edge_order = to_int(edge_order, op, "edge_order")
    if edge_order not in (1, 2):
        raise RuntimeError(f"{op}: only supports edge_order=1 and edge_order=2, got {edge_order}.")
    if dim is None:
        dims = list(builtins.range(a.ndim))
    elif isinstance(dim, (tuple, list)):
        dims = [wrap_dim(to_int(d, op, "dim"), a.ndim, op) for d in dim]
    else:
        dims = [wrap_dim(to_int(dim, op, "dim"), a.ndim, op)]
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"{op}: dim must not repeat a dimension, got {dims}.")
    steps = _spacing_list(spacing, dims, a, op)
    for k in dims:
        if a.shape[k] < edge_order + 1:
            raise RuntimeError(f"{op}: expected each dimension size to be at least edge_order+1 ({edge_order + 1}), "
                               f"dimension {k} has size {a.shape[k]}.")
    x = _float_of(a)
    out = []
    for k, step in zip(dims, steps):
        coords = step if not isinstance(step, Tensor) else host_array(step.detach())
        idx, coef = _stencil(x.shape[k], coords, edge_order)
        view = tuple(x.shape[k] if i == k else 1 for i in builtins.range(x.ndim))
        total = None
        for j in builtins.range(3):
            if not coef[j].any():
                continue
            picked = _C.index_select(x, k, _from_numpy(idx[j], _C.int64))
            term = _C.mul(picked, _from_numpy(coef[j].reshape(view), x.dtype))
            total = term if total is None else _C.add(total, term)
        out.append(total if total is not None else _C.mul(x, _C.scalar_operand(0.0, x)))
    return tuple(out)


# ----- Vandermonde matrices and windows -----------------------------------------------------------------------------

@shows_as("Vander")
def _window(op, values):
    def window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
        return _make_window(op, window_length, periodic, dtype, device, requires_grad, values, layout)
    window.__name__ = window.__qualname__ = op
    return window


def _make_window(op, window_length, periodic, dtype, device, requires_grad, values, layout=None):
    from ..args import check_factory_options
    check_device(device, op)
    check_factory_options(op, layout)
    n = to_int(window_length, op, "window_length")
    if n < 0:
        raise RuntimeError(f"{op}: requires a non-negative window_length, got {n}.")
    dt = get_default_dtype() if dtype is None else dtype_arg(dtype, op)
    if not dt.is_floating_point:
        raise RuntimeError(f"{op}: expects a floating-point dtype, got {dt.name}.")
    if n <= 1:
        return finish(_C.full((n,), 1.0, dt), requires_grad)
    m = n + 1 if periodic else n              # a periodic window is the symmetric one of n + 1, less its end
    w = values(np.arange(m, dtype=np.float64), m)[:n]
    return finish(_from_numpy(w, dt), requires_grad)


def _cosine_sum(*a):
    return lambda k, m: builtins.sum(c * np.cos(2 * math.pi * j * k / (m - 1)) * (-1) ** j for j, c in enumerate(a))


hann_window = _window("hann_window", _cosine_sum(0.5, 0.5))
blackman_window = _window("blackman_window", _cosine_sum(0.42, 0.5, 0.08))
bartlett_window = _window("bartlett_window", lambda k, m: 1 - np.abs(2 * k / (m - 1) - 1))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   requires_grad=False):
    """alpha - beta cos(2 pi k / (N - 1))."""
    alpha, beta = float(number(alpha, "hamming_window", "alpha")), float(number(beta, "hamming_window", "beta"))
    return _make_window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                        lambda k, m: alpha - beta * np.cos(2 * math.pi * k / (m - 1)), layout)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False):
    """I0(beta sqrt(1 - ((k - M/2) / (M/2))**2)) / I0(beta), M = N - 1."""
    beta = float(number(beta, "kaiser_window", "beta"))
    return _make_window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                        lambda k, m: np.i0(beta * np.sqrt(np.clip(1 - ((k - (m - 1) / 2) / ((m - 1) / 2)) ** 2, 0,
                                                                  None))) / np.i0(beta), layout)


# ----- index_reduce and put -----------------------------------------------------------------------------------------

_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """input where row index[i] along dim becomes the reduction (prod, mean, amax, amin) of the source rows i
    sent to it, and of its own value when include_self: scatter_reduce with index spread over source's shape."""
    from .indexing import scatter_reduce
    op = "index_reduce"
    a, s = tensor_arg(input, op), tensor_arg(source, op, "source")
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"{op}: expected reduce to be one of prod, mean, amax or amin, got {reduce!r}.")
    d = wrap_dim(to_int(dim, op, "dim"), a.ndim, op)
    idx = tensor_arg(index, op, "index")
    if idx.dtype.name not in ("int32", "int64"):
        raise RuntimeError(f"{op}: expected an int32 or int64 tensor as index, got {idx.dtype.name}.")
    if idx.ndim > 1:
        raise IndexError(f"{op}: index must be 0-d or 1-D, got shape {shape_str(idx.shape)}.")
    size = a.shape[d] if a.ndim else 1
    positions = host_array(idx.detach()).astype(np.int64).reshape(-1)
    if positions.size and (positions.min() < 0 or positions.max() >= size):     # no wrapping of negatives (torch)
        bad = int(positions.min()) if positions.min() < 0 else int(positions.max())
        raise IndexError(f"{op}: index {bad} is out of range for dimension {d} of size {size} (expected "
                         f"0..{size - 1}).")
    idx = _from_numpy(positions, _C.int64)
    if s.ndim != a.ndim and not (a.ndim <= 1 and s.ndim <= 1):
        raise RuntimeError(f"{op}: source has {s.ndim} dimensions, input has {a.ndim}; they must be equal.")
    ssize = s.shape[d] if s.ndim else 1
    if idx.numel() != ssize:
        raise RuntimeError(f"{op}: index has {idx.numel()} elements, source has {ssize} along dim {d}.")
    for k in builtins.range(s.ndim):
        if k != d and s.shape[k] != a.shape[k]:
            raise RuntimeError(f"{op}: source shape {shape_str(s.shape)} must match input shape "
                               f"{shape_str(a.shape)} except along dim {d}.")
    if a.ndim == 0:
        spread = _C.reshape(idx, ())
    else:
        view = tuple(-1 if k == d else 1 for k in builtins.range(s.ndim))
        spread = _C.contiguous(_C.expand(_C.reshape(idx, view), tuple(s.shape)))
    return scatter_reduce(a, d, spread, s, reduce, include_self=include_self)


def put(input, index, source, accumulate=False):
    """input, seen as 1-D, with input[index] = source (or += when accumulate): index and source have the same
    number of elements; negative indices count from the end."""
    op = "put"
    a, s = tensor_arg(input, op), tensor_arg(source, op, "source")
    i = tensor_arg(index, op, "index")
    if i.dtype is not _C.int64:
        raise RuntimeError(f"{op}: expected index to be int64, got {i.dtype.name}.")
    if s.dtype is not a.dtype:
        raise RuntimeError(f"{op}: expected source to have the input's dtype ({a.dtype.name}), got {s.dtype.name}.")
    if i.numel() != s.numel():
        raise IndexError(f"{op}: expected source and index to have the same number of elements, got "
                         f"{s.numel()} and {i.numel()}.")
    n = a.numel()
    flat = host_array(i.detach()).reshape(-1)
    if flat.size and (flat.min() < -n or flat.max() >= n):
        bad = int(flat.min()) if flat.min() < -n else int(flat.max())
        raise IndexError(f"{op}: index {bad} is out of range for a tensor of {n} elements.")
    positions = _from_numpy(np.where(flat < 0, flat + n, flat), _C.int64)
    values = _C.reshape(s, (-1,))
    flat_a = _C.reshape(a, (-1,))
    if accumulate:          # a + (the values summed into a zero tensor at their positions: duplicates add up)
        out = _C.add(flat_a, _C.put_add(values, positions, (n,)))
    else:
        out = _C.put(flat_a, positions, values)
    return _C.reshape(out, tuple(a.shape))


# ----- complex-number helpers on real tensors (dyngrad has no complex dtypes) ---------------------------------------

def is_conj(input):
    tensor_arg(input, "is_conj")
    return False


def is_neg(input):
    tensor_arg(input, "is_neg")
    return False


def _identity(op):
    def fn(input):
        return tensor_arg(input, op)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{op} of a real tensor: the tensor itself, as torch returns it."
    return fn


resolve_conj = _identity("resolve_conj")
resolve_neg = _identity("resolve_neg")
conj = _identity("conj")
conj_physical = _identity("conj_physical")
real = _identity("real")


def conj_physical_(self):
    return tensor_arg(self, "conj_physical_")


def imag(self):
    raise RuntimeError("imag: not implemented for tensors with non-complex dtypes (dyngrad has no complex dtypes).")


@shows_as("Transpose")
def adjoint(input):
    """The conjugate transpose of the last two dims: their transpose, for real tensors (a view)."""
    a = tensor_arg(input, "adjoint")
    if a.ndim < 2:
        raise RuntimeError(f"adjoint: only supported on matrices or batches of matrices, got a {a.ndim}-D tensor.")
    return _C.mT(a)


def mH(self):
    return adjoint(self)


@shows_as("Transpose")
def H(self):
    if self.ndim != 2:
        raise RuntimeError(f"H: only supported on matrices (2-D tensors), got a {self.ndim}-D tensor"
                           + (". For batches of matrices, use mH." if self.ndim > 2 else "."))
    return _C.mT(self)


# ----- the *_copy forms of the view ops -----------------------------------------------------------------------------

def _slice(input, dim=0, start=None, end=None, step=1):
    a = tensor_arg(input, "slice_copy")
    d = wrap_dim(to_int(dim, "slice_copy", "dim"), a.ndim, "slice_copy")
    step = to_int(step, "slice_copy", "step")
    if step <= 0:
        raise RuntimeError(f"slice_copy: step must be positive, got {step}.")
    begin, stop, _ = builtins.slice(start, end).indices(a.shape[d])
    return _C.slice(a, d, begin, max(begin, stop), step)


def _copy_form(name, view, signature=None):
    """torch.NAME: the view op `view` whose results are new tensors (clones, with the view's gradient) rather
    than views of input."""
    import inspect

    def fn(*args, **kwargs):
        out = view(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(_C.clone(t) for t in out)
        return _C.clone(out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name[:-5]}, returning a new tensor (a copy) instead of a view."
    try:
        params = list((signature or inspect.signature(view)).parameters.values())
        if params and params[0].name == "self":
            params[0] = params[0].replace(name="input")
        fn.__signature__ = inspect.Signature(params)
    except (TypeError, ValueError):
        pass
    return fn


def _copy_forms():
    import inspect
    from . import shape
    from .misc import split_with_sizes
    P = inspect.Parameter

    def sig(*names):
        return inspect.Signature([P(n, P.POSITIONAL_OR_KEYWORD) if "=" not in n else
                                  P(n.split("=")[0], P.POSITIONAL_OR_KEYWORD, default=eval(n.split("=")[1]))
                                  for n in names])
    forms = {
        "as_strided_copy": (shape.as_strided, None),
        "diagonal_copy": (shape.diagonal, None),
        "expand_copy": (lambda input, size, *, implicit=False: shape.expand(tensor_arg(input, "expand_copy"),
                                                                             *_sizes(size)),
                        None),
        "permute_copy": (shape.permute, None),
        "select_copy": (shape.select, None),
        "slice_copy": (_slice, None),
        "squeeze_copy": (shape.squeeze, None),
        "t_copy": (shape.t, None),
        "transpose_copy": (shape.transpose, None),
        "unbind_copy": (shape.unbind, None),
        "unfold_copy": (lambda input, dimension, size, step: shape.unfold(tensor_arg(input, "unfold_copy"),
                                                                          dimension, size, step),
                        sig("input", "dimension", "size", "step")),
        "unsqueeze_copy": (shape.unsqueeze, None),
        "view_copy": (lambda input, size: shape.view(tensor_arg(input, "view_copy"), size), sig("input", "size")),
        "split_copy": (shape.split, sig("input", "split_size", "dim=0")),
        "split_with_sizes_copy": (split_with_sizes, None),
        "detach_copy": (lambda input: tensor_arg(input, "detach_copy").detach(), sig("input")),
        "alias_copy": (lambda input: tensor_arg(input, "alias_copy"), sig("input")),
        "narrow_copy": (shape.narrow, None),
    }
    out = {}
    for name, (view, signature) in forms.items():
        if signature is None and view.__name__ == "<lambda>":
            signature = inspect.signature(view)
        out[name] = _copy_form(name, view, signature)
    return out


def _sizes(size):
    return tuple(size) if isinstance(size, (tuple, list)) else (size,)


COPY_FORMS = _copy_forms()


def narrow_copy_method(self, dim, start, length):
    return COPY_FORMS["narrow_copy"](self, dim, start, length)


# ----- Python callables over the elements (CPU, slow, as torch's) ---------------------------------------------------

def _elementwise_rewrite(self, op, values):
    from .tensor import overwrite
    if self.requires_grad:
        raise RuntimeError(f"{op}: cannot be called on a tensor that requires grad; use x.detach().{op}(...) "
                           "instead.")
    before = _C.inplace_input(self, op, False)
    result = _from_numpy(values, self.dtype)
    _C.assign_inplace(self, overwrite(before, result, op), op)
    return self


def _python_values(self):
    arr = host_array(self.detach())
    return arr, arr.dtype


def apply_(self, callable):
    """Replaces each element x by callable(x) (a Python number in, a number out), in place. Slow: one Python
    call per element, as torch's (CPU tensors only there)."""
    arr, dt = _python_values(self)
    out = np.array([callable(v) for v in arr.reshape(-1).tolist()], dtype=object).reshape(arr.shape)
    return _elementwise_rewrite(self, "apply_", _to_dtype_values(out, dt))


def _broadcast_operand(self, tensor, op, name):
    from ..args import broadcast_shapes
    other = tensor_arg(tensor, op, name)
    shape = broadcast_shapes(tuple(self.shape), tuple(other.shape), op)
    if shape != tuple(self.shape):
        raise RuntimeError(f"{op}: {name} of shape {shape_str(other.shape)} cannot be broadcast to self's shape "
                           f"{shape_str(self.shape)}.")
    return np.broadcast_to(host_array(other.detach()), tuple(self.shape))


def map_(self, tensor, callable):
    """Replaces each element x by callable(x, y), y the element of `tensor` (broadcast to self's shape), in place."""
    ys = _broadcast_operand(self, tensor, "map_", "tensor")
    arr, dt = _python_values(self)
    out = np.array([callable(x, y) for x, y in zip(arr.reshape(-1).tolist(), ys.reshape(-1).tolist())],
                   dtype=object).reshape(arr.shape)
    return _elementwise_rewrite(self, "map_", _to_dtype_values(out, dt))


def map2_(self, x, y, callable):
    """Replaces each element s by callable(s, a, b), a and b the elements of x and y (broadcast), in place."""
    xs, ys = _broadcast_operand(self, x, "map2_", "x"), _broadcast_operand(self, y, "map2_", "y")
    arr, dt = _python_values(self)
    out = np.array([callable(s, a, b) for s, a, b in zip(arr.reshape(-1).tolist(), xs.reshape(-1).tolist(),
                                                          ys.reshape(-1).tolist())],
                   dtype=object).reshape(arr.shape)
    return _elementwise_rewrite(self, "map2_", _to_dtype_values(out, dt))


def _to_dtype_values(out, dt):
    """Python results stored as the tensor's dtype: floats truncate toward zero into integers, as torch casts."""
    if dt.kind in "iu":
        return np.array([math.trunc(v) for v in out.reshape(-1)], dtype=dt).reshape(out.shape)
    if dt.kind == "b":
        return np.array([bool(v) for v in out.reshape(-1)], dtype=dt).reshape(out.shape)
    return out.astype(dt)


# ----- DLPack (through numpy's DLPack support: zero-copy both ways) ------------------------------------------------

_KDLCPU = 1


def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule of this tensor's memory (numpy's exporter over the tensor's own buffer: no copy; a
    read-only tensor is exported read-only where the consumer understands DLPack 1.0, and refused otherwise)."""
    if self.requires_grad:
        raise BufferError("__dlpack__: cannot export a tensor that requires grad; use tensor.detach().")
    if self.dtype.name == "bfloat16":
        raise BufferError("__dlpack__: bfloat16 tensors cannot be exported (numpy, which exports them, has no "
                          "bfloat16).")
    if dl_device is not None and tuple(dl_device) != (_KDLCPU, 0):
        raise BufferError(f"__dlpack__: dyngrad tensors live on the CPU; cannot export to device {dl_device}.")
    kwargs = {"stream": stream}
    if max_version is not None:
        kwargs["max_version"] = max_version
    if copy is not None:
        kwargs["copy"] = copy
    try:
        return self._numpy_view().__dlpack__(**kwargs)
    except BufferError as exc:     # e.g. read-only memory for a consumer older than DLPack 1.0: name the op
        raise BufferError(f"__dlpack__: cannot export this tensor: {exc}") from None


def __dlpack_device__(self):
    return (_KDLCPU, 0)


class _Capsule:
    """A bare DLPack capsule (to_dlpack's, or another library's) as the object numpy's from_dlpack reads."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.capsule

    def __dlpack_device__(self):
        return (_KDLCPU, 0)


def from_dlpack(ext_tensor, *, device=None, copy=None):
    """A tensor sharing the memory of another library's tensor (anything with __dlpack__, or a DLPack capsule):
    no copy unless copy=True; a read-only producer gives a read-only tensor."""
    import warnings
    check_device(device, "from_dlpack")
    source = ext_tensor
    if type(ext_tensor).__name__ == "PyCapsule":
        source = _Capsule(ext_tensor)
    elif not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ or a DLPack capsule, got "
                        f"{type_name(ext_tensor)}.")
    try:
        arr = np.from_dlpack(source, copy=copy) if copy is not None else np.from_dlpack(source)
    except (BufferError, TypeError, ValueError) as exc:
        raise RuntimeError(f"from_dlpack: cannot import this tensor ({exc}).") from None
    if arr.dtype.name not in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"):
        raise RuntimeError(f"from_dlpack: dtype {arr.dtype} is not supported by dyngrad.")
    with warnings.catch_warnings():     # a read-only producer: a read-only tensor, by design here
        warnings.simplefilter("ignore", UserWarning)
        return _C.from_numpy(arr)


def to_dlpack(tensor):
    """A DLPack capsule of the tensor's memory (legacy form of tensor.__dlpack__())."""
    return __dlpack__(tensor_arg(tensor, "to_dlpack", "tensor"))
