"""Scans along one dim with torch's signatures: cumsum, cumprod, cummax, cummin, logcumsumexp.

cumsum is the engines' primitive (_C.cumsum: a loop, float32 accumulated in float64 as torch's CPU kernel; its
derivative is the running sum the other way). cumprod and logcumsumexp are custom Functions (forward: numpy's
sequential running product/logaddexp, accumulated in float64 likewise; backward: written with dyngrad ops, these
Functions included, so gradients of gradients work): a composite would be a doubling scan, O(n log n) with log n
levels of nodes. cummax/cummin take their indices from numpy and gather the values (the gradient goes to the
index, as torch's)."""
import collections

import numpy as np

from ... import _C
from ...autograd.function import Function
from .. import bridge
from ..args import dtype_arg, tensor_arg, to_int, wrap_dim
from ..dtype_info import finfo
from .reduction import array_tensor

return_cummax = collections.namedtuple("cummax", ["values", "indices"])
return_cummin = collections.namedtuple("cummin", ["values", "indices"])


def _dim(a, dim, op):
    return wrap_dim(to_int(dim, op, "dim"), a.ndim, op)




def _scan(ufunc, a, d):
    """ufunc.accumulate of a along d as a tensor of a's dtype: float32 accumulates in float64, the half types in
    float32 (torch's CPU scans accumulate in its acc_type: double for float, float for half and bfloat16)."""
    arr = bridge.host_values(a)
    if arr.ndim == 0:
        return bridge.host_result(arr.copy(), a.dtype)
    if a.dtype is _C.float32:
        return bridge.host_result(ufunc.accumulate(arr.astype(np.float64), axis=d), a.dtype)
    return bridge.host_result(ufunc.accumulate(arr, axis=d), a.dtype)


def flip(t, d):
    """t reversed along d (index_select with a reversed index: differentiable, a copy)."""
    if t.ndim == 0:
        return t
    return _C.index_select(t, d, array_tensor(np.arange(t.shape[d] - 1, -1, -1, dtype=np.int64)))


def reversed_cumsum(t, d):
    """out_i = sum_{k >= i} t_k along d."""
    return _C.cumsum(t, d, True)


def _scan_input(input, dim, dtype, op):
    a = tensor_arg(input, op)
    d = _dim(a, dim, op)
    if dtype is not None:
        dt = dtype_arg(dtype, op)
        if dt is _C.bool:
            raise NotImplementedError(f"{op}: dtype bool is not supported (as in torch); use int64.")
        if dt is not a.dtype:
            a = _C.to_dtype(a, dt)
    elif not a.dtype.is_floating_point and a.dtype is not _C.int64:
        a = _C.to_dtype(a, _C.int64)               # bool scans count, in int64
    return a, d


# ----- cumsum ----------------------------------------------------------------------------------------------------

def cumsum(input, dim, *, dtype=None):
    """Running sum along dim; bool and int inputs give int64 (a primitive of the engine)."""
    a, d = _scan_input(input, dim, dtype, "cumsum")
    return _C.cumsum(a, d, False)


# ----- cumprod ---------------------------------------------------------------------------------------------------

class Cumprod(Function):
    """out_i = prod_{j <= i} a_j along dim."""

    @staticmethod
    def forward(ctx, a, d):
        ctx.d = d
        ctx.save_for_backward(a)
        return _scan(np.multiply, a, d)

    @staticmethod
    def backward(ctx, grad):
        # grad_a_i = sum_{k >= i} grad_k * prod_{j <= k, j != i} a_j  (torch's cumprod_backward):
        #   before the first zero of a slice:  reversed_cumsum(grad * out)_i / a_i;
        #   at the first zero z:  reversed_cumsum(grad * cumprod(a with a_z := 1))_z  (no division);
        #   after it: 0, since every product then holds a_z = 0.
        a, = ctx.saved_tensors
        d = ctx.d
        if a.ndim == 0:
            return grad, None
        arr = bridge.host_values(a)
        is_zero = arr == 0
        if is_zero.any() and _C.is_grad_enabled():
            # create_graph: the masked formula's own derivative is not cumprod's second derivative at zeros (it
            # holds the positions after a zero at a constant 0); the division-free scans below are (as torch's
            # O(n^2) formula for this case)
            return _cumprod_vjp_by_scans(a, grad, d), None
        zeros_so_far = np.cumsum(is_zero, axis=d)
        before = array_tensor(zeros_so_far == 0)
        out = Cumprod.apply(a, d)                      # recomputed: saving the output would tie the node to itself
        safe_a = _C.where(before, a, _C.scalar_operand(1, a))
        grad_a = _C.where(before, _C.div(reversed_cumsum(_C.mul(grad, out), d), safe_a), _C.scalar_operand(0, a))
        if is_zero.any():
            first = array_tensor(is_zero & (zeros_so_far == 1))
            skip_zero = _C.where(first, _C.scalar_operand(1, a), a)
            at_zero = reversed_cumsum(_C.mul(grad, Cumprod.apply(skip_zero, d)), d)
            grad_a = _C.add(grad_a, _C.where(first, at_zero, _C.scalar_operand(0, a)))
        return grad_a, None


def _shift(t, d, s, fill):
    """t moved s places up dim d, the first s places holding `fill`."""
    n = t.shape[d]
    shape = list(t.shape)
    shape[d] = min(s, n)
    head = _C.full(tuple(shape), fill, t.dtype)
    return _C.cat([head, _C.slice(t, d, 0, n - shape[d], 1)], d)


def _cumprod_vjp_by_scans(a, grad, d):
    """grad_a_k = L_k * S_k with L_k = prod_{j<k} a_j (an exclusive product scan) and
    S_k = sum_{j>=k} grad_j prod_{k<i<=j} a_i, the reverse linear recurrence S_k = grad_k + a_{k+1} S_{k+1}:
    both as Hillis-Steele doubling scans of multiplications and additions (no division, so every derivative
    is exact at zeros; O(n log n))."""
    n = a.shape[d]
    inclusive, s = a, 1
    while s < n:
        inclusive = _C.mul(inclusive, _shift(inclusive, d, s, 1))
        s *= 2
    before = _shift(inclusive, d, 1, 1)
    # the recurrence runs down the dim: reversed, T_m = b_m + c_m T_{m-1} with b = grad and c_m = a_{m-1}
    coeff, total, s = _shift(flip(a, d), d, 1, 0), flip(grad, d), 1
    while s < n:
        total = _C.add(total, _C.mul(coeff, _shift(total, d, s, 0)))
        coeff = _C.mul(coeff, _shift(coeff, d, s, 1))
        s *= 2
    return _C.mul(before, flip(total, d))


def cumprod(input, dim, *, dtype=None):
    """Running product along dim; bool and int inputs give int64. The gradient is exact with zeros."""
    a, d = _scan_input(input, dim, dtype, "cumprod")
    return Cumprod.apply(a, d)


# ----- logcumsumexp ----------------------------------------------------------------------------------------------

class Logcumsumexp(Function):
    """out_i = log(sum_{j <= i} exp(a_j)) along dim."""

    @staticmethod
    def forward(ctx, a, d):
        ctx.d = d
        ctx.save_for_backward(a)
        return _scan(np.logaddexp, a, d)

    @staticmethod
    def backward(ctx, grad):
        # grad_a_i = sum_{k >= i} grad_k exp(a_i - out_k), summed in log space with the grad's positive and
        # negative parts apart (torch's logcumsumexp_backward): exp(a_i + reversed_logcumsumexp(log|g| - out)_i)
        a, = ctx.saved_tensors
        d = ctx.d
        if a.ndim == 0:
            return grad, None
        out = Logcumsumexp.apply(a, d)
        lowest = _C.scalar_operand(finfo(a.dtype).min, a)
        zero = _C.scalar_operand(0, grad)
        # log|grad|, guarded at grad = 0 (masked below) so that its own derivative there is 0, not nan
        log_abs = _C.log(_C.abs(_C.where(_C.compare("eq", grad, zero), _C.scalar_operand(1, grad), grad)))
        parts = []
        for sign in ("gt", "lt"):
            log_part = _C.where(_C.compare(sign, grad, zero), log_abs, lowest)
            reversed_lse = flip(Logcumsumexp.apply(flip(_C.sub(log_part, out), d), d), d)
            parts.append(_C.exp(_C.add(reversed_lse, a)))
        return _C.sub(parts[0], parts[1]), None


def logcumsumexp(input, dim):
    """log(cumsum(exp(input))) along dim, computed stably (floating-point inputs, as in torch)."""
    a = tensor_arg(input, "logcumsumexp")
    d = _dim(a, dim, "logcumsumexp")
    if not a.dtype.is_floating_point:
        raise NotImplementedError(f"logcumsumexp: {a.dtype.name} input is not supported (as in torch); convert it "
                                  "with .float() first.")
    return Logcumsumexp.apply(a, d)


# ----- cummax / cummin -------------------------------------------------------------------------------------------

def _running_extremum(input, dim, is_max):
    """Values and indices of the running max/min: the index is the last position holding the running extremum
    (torch updates on >= / <=), and a NaN, once seen, stays (its index is the latest NaN's)."""
    op = "cummax" if is_max else "cummin"
    a = tensor_arg(input, op)
    d = _dim(a, dim, op)
    arr = bridge.host_values(a)
    if a.ndim == 0:
        indices = np.zeros((), dtype=np.int64)
    else:
        running = (np.maximum if is_max else np.minimum).accumulate(arr, axis=d)
        holds = arr == running
        if arr.dtype.kind == "f":
            holds |= np.isnan(arr)
        shape = [1] * arr.ndim
        shape[d] = arr.shape[d]
        positions = np.where(holds, np.arange(arr.shape[d]).reshape(shape), -1)
        indices = np.maximum.accumulate(positions, axis=d) if arr.size else positions
    idx = array_tensor(indices.astype(np.int64))
    values = _C.gather(a, d, idx)
    return (return_cummax if is_max else return_cummin)(values, idx)


def cummax(input, dim):
    return _running_extremum(input, dim, True)


def cummin(input, dim):
    return _running_extremum(input, dim, False)
