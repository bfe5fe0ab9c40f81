"""Scans along one dim with torch's signatures: cumsum, cumprod, cummax, cummin, logcumsumexp.

Each is the engines' primitive (loops in kernels/scan.cpp: float32 accumulated in float64 as torch's CPU kernels):
cumsum's derivative is the running sum the other way; cumprod's and logcumsumexp's are written with
linear_recurrence (y_k = b_k + c_k y_{k-1}, a primitive too), exact where cumprod's input has zeros.
cummax/cummin take their indices from the engine's loop and gather the values (the gradient goes to the index, as
torch's)."""
import collections
import math

import numpy as np

from ... import _C
from .. import bridge
from ..args import dtype_arg, tensor_arg, to_int, wrap_dim
from .pointwise import complex_logaddexp

return_cummax = collections.namedtuple("cummax", ["values", "indices"])
return_cummin = collections.namedtuple("cummin", ["values", "indices"])
# the results the C++ fast paths of cummax and cummin make (Note [Fast paths] in csrc/bindings/fast_paths.cpp)
_C._register_helpers({"return_cummax": return_cummax, "return_cummin": return_cummin})


def _dim(a, dim, op):
    return wrap_dim(to_int(dim, op, "dim"), a.ndim, op)


def _scan_input(input, dim, dtype, op):
    a = tensor_arg(input, op)
    d = _dim(a, dim, op)
    if dtype is not None:
        dt = dtype_arg(dtype, op)
        if dt is _C.bool:
            raise NotImplementedError(f"{op}: dtype bool is not supported (as in torch); use int64.")
        if dt is not a.dtype:
            a = _C.to_dtype(a, dt)
    elif not (a.dtype.is_floating_point or a.dtype.is_complex) and a.dtype is not _C.int64:
        a = _C.to_dtype(a, _C.int64)               # bool scans count, in int64
    return a, d


# ----- cumsum ----------------------------------------------------------------------------------------------------

# Note [Complex scans]: the scan kernels are real. A complex cumsum is the cumsum of its view_as_real along the same
# dim (the parts sum separately; the views carry the gradient). A complex cumprod is a Hillis-Steele scan of
# log2(n) complex products of the running products with themselves shifted by 1, 2, 4, ... (padded with ones):
# only multiplications, so it is exact with zeros as the real kernel is, and its gradient is mul's.
def cumsum(input, dim, *, dtype=None):
    """Running sum along dim; bool and int inputs give int64 (a primitive of the engine; complex inputs by
    Note [Complex scans])."""
    a, d = _scan_input(input, dim, dtype, "cumsum")
    if a.dtype.is_complex:
        if a.ndim == 0:                             # a copy (view_as_real's last dim is no dim of a)
            return _C.mul(a, _C.scalar_operand(1, a))
        return _C.view_as_complex(_C.cumsum(_C.view_as_real(a), d, False))
    return _C.cumsum(a, d, False)


def _complex_cumprod(a, d):
    if a.ndim == 0:
        return _C.mul(a, _C.scalar_operand(1, a))
    n, y, k = a.shape[d], a, 1
    while k < n:
        ones = _C.add(_C.mul(_C.slice(y, d, 0, k, 1), _C.scalar_operand(0, y)), _C.scalar_operand(1, y))
        y = _C.mul(y, _C.cat([ones.detach(), _C.slice(y, d, 0, n - k, 1)], d))
        k *= 2
    return y


# ----- cumprod, logcumsumexp ------------------------------------------------------------------------------------

def cumprod(input, dim, *, dtype=None):
    """Running product along dim; bool and int inputs give int64. The gradient is exact with zeros."""
    a, d = _scan_input(input, dim, dtype, "cumprod")
    if a.dtype.is_complex:
        return _complex_cumprod(a, d)
    return _C.cumprod(a, d, False)


def logcumsumexp(input, dim):
    """log(cumsum(exp(input))) along dim, computed stably (floating-point inputs, as in torch)."""
    a = tensor_arg(input, "logcumsumexp")
    d = _dim(a, dim, "logcumsumexp")
    if a.dtype.is_complex:
        return _complex_logcumsumexp(a, d)
    if not a.dtype.is_floating_point:
        raise NotImplementedError(f"logcumsumexp: {a.dtype.name} input is not supported (as in torch); convert it "
                                  "with .float() first.")
    return _C.logcumsumexp(a, d, False)


def _complex_logcumsumexp(a, d):
    """Note [Complex logcumsumexp]: torch's scan of complex logaddexp, as a doubling scan (Hillis-Steele): after
    step k every position holds the logaddexp of the 2^k elements ending there, so ceil(log2 n) whole-tensor
    steps of Note [Complex logaddexp] (each combining neighbours of similar size, hence stable), the positions
    before the start filled with -inf (exactly the identity there). Gradients are the composite's.
    The imaginary part of a logarithm is defined up to 2 pi, and torch's comes from its sequential order,
    out_k = logaddexp(z_k, out_{k-1}); the scan's values differ from those by 2 pi i m, m a whole number chosen
    on the host (_torch_branch), a constant (no gradient) added at the end."""
    n = a.shape[d] if a.ndim else 1
    out, step = a, 1
    while step < n:
        shape = list(a.shape)
        shape[d] = step
        filler = _C.full(tuple(shape), complex(-math.inf, 0), a.dtype)
        shifted = _C.cat([filler, _C.slice(out, d, 0, n - step, 1)], d)
        out = complex_logaddexp(out, shifted)
        step *= 2
    if out is a:
        return _C.clone(a)
    turns = _torch_branch(bridge.host_values(a), bridge.host_values(out), d if a.ndim else 0)
    if not turns.any():
        return out
    return _C.add(out, bridge.host_result(turns * (2j * math.pi), out.dtype))


def _torch_branch(z, log_sums, d):
    """The whole numbers m with log_sums + 2 pi i m torch's sequential logcumsumexp of z along d. Each of torch's
    steps is hi + log1p(exp(lo - hi)), hi the operand of the larger real part (the running value on ties), whose
    log1p term has an imaginary part within pi/2 (|exp(lo - hi)| <= 1): so the step's imaginary part is the one
    of the right value modulo 2 pi nearest hi's. The real parts do not depend on the branch, so hi is known at
    every step; the loop runs over d on whole slices."""
    z, log_sums = np.moveaxis(np.asarray(z), d, 0), np.moveaxis(np.asarray(log_sums), d, 0)
    wanted = np.empty(log_sums.shape, dtype=np.float64)
    previous_real = np.full(z.shape[1:], -np.inf)
    previous_imag = np.zeros(z.shape[1:])
    with np.errstate(all="ignore"):
        for k in range(z.shape[0]):
            base = np.where(z[k].real > previous_real, z[k].imag, previous_imag)
            gap = log_sums[k].imag - base
            wanted[k] = base + (gap - 2 * np.pi * np.round(gap / (2 * np.pi)))
            previous_real, previous_imag = log_sums[k].real, wanted[k]
        turns = np.round((wanted - log_sums.imag) / (2 * np.pi))
    turns = np.where(np.isfinite(turns), turns, 0)
    return np.moveaxis(turns, 0, d)


# ----- cummax / cummin -------------------------------------------------------------------------------------------

def cummax(input, dim):
    """Values and indices of the running max: the index is the last position holding it (torch updates on >=), and
    a NaN, once seen, stays (its index the latest NaN's)."""
    a = tensor_arg(input, "cummax")
    return return_cummax(*_C.cummax(a, _dim(a, dim, "cummax")))


def cummin(input, dim):
    """Values and indices of the running min (as cummax)."""
    a = tensor_arg(input, "cummin")
    return return_cummin(*_C.cummin(a, _dim(a, dim, "cummin")))
