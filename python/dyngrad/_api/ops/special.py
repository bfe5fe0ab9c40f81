"""torch.special's functions that have no name elsewhere (table kind `special`: dyngrad.special.NAME): erfcx,
log_ndtr, ndtri, entr, ndtr, xlog1py, zeta, softmax, log_softmax, logsumexp; the Bessel functions bessel_j0/j1,
bessel_y0/y1, modified_bessel_i0/i1/k0/k1, scaled_modified_bessel_k0/k1, spherical_bessel_j0, airy_ai; the
incomplete gamma functions gammainc and gammaincc; and the orthogonal polynomials chebyshev_polynomial_t/u/v/w,
shifted_chebyshev_polynomial_t/u/v/w, hermite_polynomial_h/he, laguerre_polynomial_l and legendre_polynomial_p.
The ones shared with the top level (erfinv, digamma, logit, ...) are the pointwise.py functions under both names,
and the custom Functions behind the first group are in pointwise.py too (Note [numpy forwards]).

The Bessel, Airy, incomplete gamma and polynomial kernels are numpy (host/special.py, written from the mathematics
named there); the special values (0, negative, inf, nan) follow torch's. torch differentiates none of these except
gammainc and gammaincc with respect to x: their results here carry no history either (as torch's, whose results do
not require grad), and gammainc/gammaincc have torch's derivative in x and its error in a."""
import math

import numpy as np

from ... import _C
from ...autograd.function import Function
from .. import bridge
from ..args import Tensor, broadcast_shapes, tensor_arg, type_name
from ..bridge import numpy_dtype
from ..host import special as hs
from . import pointwise as pw
from .activation import log_softmax_fn as _log_softmax, softmax_fn as _softmax
from .reduction import logsumexp as _logsumexp

erfcx = pw._float_unary("erfcx", pw.Erfcx)
log_ndtr = pw._float_unary("log_ndtr", pw.LogNdtr)
ndtri = pw._float_unary("ndtri", pw.Ndtri)
entr = pw._float_unary("entr", pw.Entr)
i0e = pw._float_unary("i0e", pw.I0e)
i1 = pw._float_unary("i1", pw.I1)
i1e = pw._float_unary("i1e", pw.I1e)


def ndtr(input):
    """The standard normal distribution function, erfc(-x / sqrt 2) / 2 (exact in both tails)."""
    a = pw._float(tensor_arg(input, "ndtr"), "ndtr")
    return _C.mul(pw.Erfc.apply(_C.mul(a, _C.scalar_operand(-1 / math.sqrt(2.0), a))), _C.scalar_operand(0.5, a))


def xlog1py(input, other):
    """input * log1p(other), 0 where input is 0 (unless other is NaN)."""
    return pw.Xlog1py.apply(*pw._float_pair(input, other, "xlog1py", (True, True)))


def zeta(input, other):
    """The Hurwitz zeta function sum_k (other + k)^-input (differentiable in other only, as torch)."""
    return pw.Zeta.apply(*pw._float_pair(input, other, "zeta", (True, True)))


def softmax(input, dim, *, dtype=None):
    return _softmax(input, dim, dtype)


def log_softmax(input, dim, *, dtype=None):
    return _log_softmax(input, dim, dtype)


def logsumexp(input, dim, keepdim=False):
    return _logsumexp(input, dim, keepdim)


# ----- Bessel and Airy functions, incomplete gamma functions, orthogonal polynomials (host/special.py) ----------

def _constant(values, dtype):
    """A tensor without history holding `values` in `dtype` (torch does not differentiate these ops); bfloat16,
    which numpy lacks, by way of float32."""
    out = bridge.share(np.asarray(np.asarray(values), dtype=numpy_dtype(dtype), order="C"))
    return out if out.dtype is dtype else _C.to_dtype(out, dtype)


def _host(t):
    """t's values as a float64 numpy array (the half types by way of float32: host_values does that)."""
    return bridge.host_values(t, _C.float64)


def _no_half(op, t):
    """torch has no CPU kernel of these for float16 and bfloat16."""
    if t.dtype.name in ("float16", "bfloat16"):
        raise NotImplementedError(f"{op}: not implemented for {t.dtype.name} on the CPU (as torch); convert to "
                                  "float32 first.")


def _unary(op, kernel):
    def fn(input):
        a = pw._float(tensor_arg(input, op), op)
        _no_half(op, a)
        with np.errstate(all="ignore"):
            return _constant(kernel(_host(a)), a.dtype)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"torch.special.{op}(input), elementwise (float32 for integer inputs; not differentiable, as torch)."
    return fn


bessel_j0 = _unary("bessel_j0", hs.bessel_j0)
bessel_j1 = _unary("bessel_j1", hs.bessel_j1)
bessel_y0 = _unary("bessel_y0", hs.bessel_y0)
bessel_y1 = _unary("bessel_y1", hs.bessel_y1)
modified_bessel_i0 = _unary("modified_bessel_i0", lambda x: hs.modified_bessel_i(0, x))
modified_bessel_i1 = _unary("modified_bessel_i1", lambda x: hs.modified_bessel_i(1, x))
modified_bessel_k0 = _unary("modified_bessel_k0", lambda x: hs.bessel_k(0, x, False))
modified_bessel_k1 = _unary("modified_bessel_k1", lambda x: hs.bessel_k(1, x, False))
scaled_modified_bessel_k0 = _unary("scaled_modified_bessel_k0", lambda x: hs.bessel_k(0, x, True))
scaled_modified_bessel_k1 = _unary("scaled_modified_bessel_k1", lambda x: hs.bessel_k(1, x, True))
spherical_bessel_j0 = _unary("spherical_bessel_j0", hs.spherical_bessel_j0)
airy_ai = _unary("airy_ai", hs.airy_ai)


def _binary(op, kernel):
    def fn(input, n):
        x, m = pw._float_pair(input, n, op, (True, True))
        _no_half(op, x)
        # the recurrence runs in the dtype (float32 for float32 and narrower), so that it overflows where torch's does
        compute = _C.float64 if x.dtype.name == "float64" else _C.float32
        with np.errstate(all="ignore"):
            return _constant(kernel(bridge.host_values(x, compute), bridge.host_values(m, _C.float64), op), x.dtype)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = (f"torch.special.{op}(input, n): the polynomial of degree n (truncated to an integer; 0 for n < 0) "
                  "at input (Note [Orthogonal polynomials]; not differentiable, as torch).")
    return fn


chebyshev_polynomial_t = _binary("chebyshev_polynomial_t", hs.chebyshev("t", False))
chebyshev_polynomial_u = _binary("chebyshev_polynomial_u", hs.chebyshev("u", False))
chebyshev_polynomial_v = _binary("chebyshev_polynomial_v", hs.chebyshev("v", False))
chebyshev_polynomial_w = _binary("chebyshev_polynomial_w", hs.chebyshev("w", False))
shifted_chebyshev_polynomial_t = _binary("shifted_chebyshev_polynomial_t", hs.chebyshev("t", True))
shifted_chebyshev_polynomial_u = _binary("shifted_chebyshev_polynomial_u", hs.chebyshev("u", True))
shifted_chebyshev_polynomial_v = _binary("shifted_chebyshev_polynomial_v", hs.chebyshev("v", True))
shifted_chebyshev_polynomial_w = _binary("shifted_chebyshev_polynomial_w", hs.chebyshev("w", True))
hermite_polynomial_h = _binary("hermite_polynomial_h", hs.hermite_h)
hermite_polynomial_he = _binary("hermite_polynomial_he", hs.hermite_he)
laguerre_polynomial_l = _binary("laguerre_polynomial_l", hs.laguerre)
legendre_polynomial_p = _binary("legendre_polynomial_p", hs.legendre)


class Igamma(Function):
    """gammainc(a, x) = P(a, x) (Note [Incomplete gamma]); upper (gammaincc, Q = 1 - P) when ctx.upper."""

    @staticmethod
    def forward(ctx, a, x, upper):
        kernel = hs.gammaincc if upper else hs.gammainc
        with np.errstate(all="ignore"):
            out = _constant(kernel(_host(a), _host(x)), a.dtype)
        ctx.upper = upper
        ctx.save_for_backward(a, x)
        return out

    # dP/dx = x^(a-1) e^-x / Gamma(a) = exp((a - 1) ln x - x - lgamma a), and dQ/dx = -dP/dx; torch has no
    # derivative in a (and raises when one is asked for).
    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        name = "igammac" if ctx.upper else "igamma"
        if ctx.needs_input_grad[0]:
            raise NotImplementedError(f"the derivative for '{name}: input' is not implemented (as in torch).")
        log_density = _C.sub(_C.sub(_C.mul(_C.sub(a, _C.scalar_operand(1, a)), _C.log(x)), x), pw.lgamma(a))
        gx = _C.mul(g, _C.exp(log_density))
        if ctx.upper:
            gx = _C.neg(gx)
        gx = _sum_to(gx, tuple(x.shape))
        return None, gx, None

    @staticmethod
    def jvp(ctx, *tangents):
        raise NotImplementedError(f"{'igammac' if ctx.upper else 'igamma'}: forward-mode AD (a dual tensor as input) "
                                  "is not implemented (as in torch).")


def _sum_to(g, shape):
    """g summed down to `shape` (the reverse of broadcasting)."""
    if tuple(g.shape) == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and g.shape[i + lead] != 1)
    out = _C.sum(g, dims, True) if dims else g
    return _C.reshape(out, tuple(shape))


def _igamma(op, input, other, upper):
    for value, name in ((input, "input"), (other, "other")):
        if not isinstance(value, Tensor):
            raise TypeError(f"{op}: expected a Tensor as {name}, got {type_name(value)}.")
    a, x = pw._float_pair(input, other, op, (False, False), integers=False)
    shape = tuple(broadcast_shapes(a.shape, x.shape, op))
    if tuple(a.shape) != shape:
        a = _C.expand(a, shape)
    return Igamma.apply(a, x, upper)


def gammainc(input, other):
    """The regularised lower incomplete gamma function P(input, other) (differentiable in other, as torch)."""
    return _igamma("gammainc", input, other, False)


def gammaincc(input, other):
    """The regularised upper incomplete gamma function Q(input, other) = 1 - P (differentiable in other)."""
    return _igamma("gammaincc", input, other, True)
