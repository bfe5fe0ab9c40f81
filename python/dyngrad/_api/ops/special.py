"""torch.special's functions that have no name elsewhere (table kind `special`: dyngrad.special.NAME). The ones
shared with the top level (erfinv, digamma, logit, ...) are the pointwise.py functions under both names; the custom
Functions behind these are in pointwise.py too (Note [numpy forwards])."""
import math

from ... import _C
from . import pointwise as pw
from ..args import tensor_arg
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
    a = pw._float(tensor_arg(input, "ndtr"))
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
