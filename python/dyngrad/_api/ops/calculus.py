"""Differences and integrals of samples along a dim, with torch's signatures: diff, gradient (numerical
derivatives with edge_order and spacing), trapezoid and cumulative_trapezoid."""
import builtins

import numpy as np

from ... import _C
from .. import bridge
from ..args import Tensor, get_default_dtype, number, shape_str, tensor_arg, to_int, type_name, wrap_dim
from .pointwise import _cast
from .scan import cumsum
from .shape import _zeros


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim (out[i] = x[i+1] - x[i], n times), after concatenating prepend and
    append along dim; bool inputs give the logical xor of neighbours, as torch."""
    a = tensor_arg(input, "diff")
    n = to_int(n, "diff", "n")
    if a.ndim == 0:
        raise RuntimeError("diff: expects input to be at least one-dimensional.")
    if n < 0:
        raise RuntimeError(f"diff: order must be non-negative, got {n}.")
    d = wrap_dim(to_int(dim, "diff", "dim"), a.ndim, "diff")
    if n == 0:
        return _C.clone(a)     # torch: a copy of the input; prepend and append are ignored
    parts = []
    for name, extra in (("prepend", prepend), ("append", append)):
        if extra is None:
            parts.append(None)
            continue
        if not isinstance(extra, Tensor):
            extra = _C.scalar_operand(number(extra, "diff", name), a)
        if extra.ndim == 0:           # a number stands for a slice of size 1 along dim
            extra = _C.expand(_C.reshape(extra, (1,) * a.ndim),
                              tuple(1 if i == d else s for i, s in enumerate(a.shape)))
        if extra.ndim != a.ndim:
            raise RuntimeError(f"diff: expected {name} to have {a.ndim} dimensions as input, got {extra.ndim}.")
        parts.append(extra)
    if parts[0] is not None or parts[1] is not None:
        pieces = [p for p in (parts[0], a, parts[1]) if p is not None]
        dtype = pieces[0].dtype
        for p in pieces[1:]:
            dtype = _C.result_type(_C.empty((1,), dtype), p)
        a = _C.cat([_cast(p, dtype) for p in pieces], d)
    for _ in builtins.range(n):
        size = a.shape[d]
        if size == 0:
            break
        hi, lo = _C.slice(a, d, 1, size, 1), _C.slice(a, d, 0, size - 1, 1)
        a = _C.logical_xor(hi, lo) if a.dtype is _C.bool else _C.sub(hi, lo)
    return a


def _float_of(a):
    return a if (a.dtype.is_floating_point or a.dtype.is_complex) else _C.to_dtype(a, get_default_dtype())


def _along(a, d, start, stop):
    return _C.slice(a, d, start, stop, 1)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal integral of y along dim: out[i] = sum_{k<=i} (y[k] + y[k+1]) / 2 * (x[k+1] - x[k])
    (spacing dx, or 1, when x is not given); one element shorter than y along dim."""
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
    steps = _spacing_list(1 if spacing is None else spacing, dims, a, op)      # None: torch's default step 1
    for k in dims:
        if a.shape[k] < edge_order + 1:
            raise RuntimeError(f"{op}: expected each dimension size to be at least edge_order+1 ({edge_order + 1}), "
                               f"dimension {k} has size {a.shape[k]}.")
    x = _float_of(a)
    out = []
    for k, step in zip(dims, steps):
        coords = step if not isinstance(step, Tensor) else bridge.host_array(step.detach())
        idx, coef = _stencil(x.shape[k], coords, edge_order)
        view = tuple(x.shape[k] if i == k else 1 for i in builtins.range(x.ndim))
        total = None
        for j in builtins.range(3):
            if not coef[j].any():
                continue
            picked = _C.index_select(x, k, bridge.host_result(idx[j], _C.int64))
            term = _C.mul(picked, bridge.host_result(coef[j].reshape(view), x.dtype))
            total = term if total is None else _C.add(total, term)
        out.append(total if total is not None else _C.mul(x, _C.scalar_operand(0.0, x)))
    return tuple(out)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along dim: spacing dx (default 1), or the sample points x (1-D along dim, or
    broadcasting with y)."""
    y = tensor_arg(y, "trapezoid", "y")
    if x is not None and dx is not None:
        raise TypeError("trapezoid: pass either x or dx, not both.")
    if x is not None and not isinstance(x, Tensor):
        raise TypeError(f"trapezoid: expected a Tensor as x, got {type_name(x)} (a number is the spacing dx=).")
    if y.ndim == 0:
        raise IndexError(f"trapezoid: dim {dim} is out of range for a 0-d tensor.")
    d = wrap_dim(to_int(dim, "trapezoid", "dim"), y.ndim, "trapezoid")
    if not (y.dtype.is_floating_point or y.dtype.is_complex):
        y = _C.to_dtype(y, _C.float32)
    n = y.shape[d]
    if n == 0:        # as torch: zeros, not connected to y
        return _zeros(tuple(y.shape[:d]) + tuple(y.shape[d + 1:]), y.dtype)
    sums = _C.add(_C.slice(y, d, 0, max(n - 1, 0), 1), _C.slice(y, d, 1, n, 1))
    if x is None:
        step = 1.0 if dx is None else number(dx, "trapezoid", "dx")
        return _C.mul(_C.sum(sums, (d,), False, None), _C.scalar_operand(step / 2, sums))
    if x.ndim == 1:
        if x.shape[0] != n:
            raise RuntimeError(f"trapezoid: there must be one x value for each sample point: x has {x.shape[0]}, y has "
                               f"{n} along dim {d}.")
        x = _C.reshape(x, (n,) + (1,) * (y.ndim - d - 1))
        xd = 0
    else:
        xd = d - y.ndim
        if -xd > x.ndim:
            raise RuntimeError(f"trapezoid: x of shape {shape_str(x.shape)} has no dim {d} to match y's.")
    m = x.shape[xd]
    widths = _C.sub(_C.slice(x, xd, 1, m, 1), _C.slice(x, xd, 0, max(m - 1, 0), 1))
    products = _C.mul(widths, sums)
    if products.ndim != y.ndim or products.shape[d] != sums.shape[d]:
        raise RuntimeError(f"trapezoid: x of shape {shape_str(x.shape)} does not match y of shape "
                           f"{shape_str(y.shape)} along dim {d}.")
    total = _C.sum(products, (d,), False, None)
    return _C.div(total, _C.scalar_operand(2, total))
