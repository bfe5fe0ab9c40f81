"""Reference engine: EVERY backward formula, one function per primitive op, in the order of ops.OP_NAMES.
Mirrors csrc/dyngrad/derivatives.cpp: same order, same names, the same ops in each formula.

Conventions: `grad` is dL/d(out) (`grads`, one per output, None where none arrived, for an op of several outputs);
`s` is what the forward saved, by the field names the op's row of
ops.PRIMITIVES declares (s.a, s.out, s.dims, s.keepdim, ...: Note [Named saved state] in csrc/dyngrad/saved.h),
tensors already unpacked; and s.needs_input_grad, and in_shape(s, i) / s.input_meta[i] for input i's shape/dtype.
Formulas ignore broadcasting: the engine sums each gradient to its input's shape (Note [Unbroadcast]). They are
written in differentiable ops, so with create_graph=True the backward pass is itself recorded and can be
differentiated again.
"""
import numpy as np

from .dtypes import from_numpy_dtype
from .tensor import make_tensor, scalar_tensor
from .ops_math import add, sub, mul, div, neg, pow, pow_scalar, where, compare, logical_and, sum, sum_to, matmul, mean
from .ops_math import cumsum, logcumsumexp, linear_recurrence, scan_shift, quotient, amax
from .primitives import exp, log, cos, sin, sigmoid, tanh, sign, rsqrt, conj, cosh, sinh
from .primitives import abs as absolute
from .ops_shape import to_dtype, reshape, permute, expand, slice, slice_scatter, mT, select, cat, stack
from .ops_shape import view_as_real, view_as_complex, contiguous
from .ops_index import index_select, index_add, gather, scatter_add, take, put, put_add
from .ops_nn import softmax, unfold, fold, cross_entropy_target, LSTM, GRU, RNN_TANH
from .engine import vjp
from .grad_mode import GradModeGuard
from .node import next_sequence_nr
from . import kernels
from . import primitives as prim    # the fused derivatives: prim.tanh_backward is a primitive, tanh_backward a formula


def definition_vjp(s, inputs, cotangents, definition):
    """The VJP of definition(inputs) given one cotangent per output: Note [Derivatives of fused backwards] in
    csrc/dyngrad/derivatives.cpp."""
    first_node = next_sequence_nr()
    xs = [None] * len(inputs)
    with GradModeGuard(True):
        for i, t in enumerate(inputs):
            if t is None:
                continue
            if s.needs_input_grad[i] and (t.requires_grad or t.grad_fn is not None):
                xs[i] = reshape(t, t.shape)              # a stand-in with a node of its own
            else:
                xs[i] = make_tensor(t._data, t._storage)  # no history: a leaf of the definition's graph
                xs[i]._requires_grad = s.needs_input_grad[i]
        outputs = definition(xs)
    grads = vjp(outputs, cotangents, xs, first_node)
    return tuple(g if s.needs_input_grad[i] else None for i, g in enumerate(grads))


def cj(t):
    """conj(t) for a complex t, t itself otherwise: Note [Complex gradients] in csrc/dyngrad/derivatives.cpp."""
    return conj(t) if t.dtype.is_complex else t


def num(v, like):
    """The number v as a 0-d tensor of like's dtype."""
    return scalar_tensor(v, like.dtype)


def in_shape(s, i=0):
    """Input i's shape (from the node's input metadata, not a saved field)."""
    return s.input_meta[i][0]


def in_dtype(s, i=0):
    return from_numpy_dtype(s.input_meta[i][1])


def unreduce(g, s):
    """A reduction's gradient, put back to the input's shape: re-insert reduced dims, then broadcast."""
    shape = in_shape(s)
    r = g
    if not s.keepdim:
        kept = list(shape)
        for d in s.dims:
            kept[d] = 1
        r = reshape(g, tuple(kept))
    return expand(r, shape)


# ===== arithmetic ==============================================================================================

# out = a + b  ->  da = grad, db = grad
def add_backward(grad, s):
    return grad, grad


# out = a - b  ->  da = grad, db = -grad
def sub_backward(grad, s):
    return grad, (neg(grad) if s.needs_input_grad[1] else None)


# out = a * b  ->  da = grad * b, db = grad * a
def mul_backward(grad, s):
    return (mul(grad, cj(s.b)) if s.needs_input_grad[0] else None,
            mul(grad, cj(s.a)) if s.needs_input_grad[1] else None)


# out = a / b  ->  da = grad / b, db = -grad * (a / b) / b (not over b * b: derivatives.cpp)
def div_backward(grad, s):
    b = s.b
    da = div(grad, cj(b)) if s.needs_input_grad[0] else None
    db = neg(mul(grad, cj(div(div(s.a, b), b)))) if s.needs_input_grad[1] else None
    return da, db


# out = -a  ->  da = -grad
def neg_backward(grad, s):
    return (neg(grad),)


# out = a ** b  ->  da = grad * b * a^(b-1), db = grad * out * log(a)  (0 where a == 0, as torch)
def pow_backward(grad, s):
    a, b = s.a, s.b
    da = mul(grad, cj(mul(b, pow(a, sub(b, num(1, b)))))) if s.needs_input_grad[0] else None
    db = None
    if s.needs_input_grad[1]:
        safe_log = where(compare("eq", a, num(0, a)), num(0, a), log(a))
        db = mul(grad, cj(mul(s.out, safe_log)))
    return da, db


# out = a ** p  ->  da = grad * p * a^(p-1)
def pow_scalar_backward(grad, s):
    p = s.exponent
    if p == 0:
        return (mul(grad, num(0, grad)),)
    a = s.a
    d = mul(a, num(2, a)) if p == 2 else mul(pow_scalar(a, p - 1), num(p, a))
    return (mul(grad, cj(d)),)


# out = max(a, b)  ->  da = grad where a > b, grad / 2 where a == b, 0 where a < b; db the mirror image (torch's
# masked form: a NaN on either side gives both inputs the whole grad)
def maximum_backward(grad, s):
    a, b = s.a, s.b
    half_tie = mul(to_dtype(compare("eq", a, b), grad.dtype), num(0.5, grad))
    return (mul(grad, sub(sub(num(1, grad), to_dtype(compare("lt", a, b), grad.dtype)), half_tie))
            if s.needs_input_grad[0] else None,
            mul(grad, sub(sub(num(1, grad), to_dtype(compare("gt", a, b), grad.dtype)), half_tie))
            if s.needs_input_grad[1] else None)


# out = min(a, b)  ->  the mirror image of maximum (NaN: both inputs get the whole grad)
def minimum_backward(grad, s):
    a, b = s.a, s.b
    half_tie = mul(to_dtype(compare("eq", a, b), grad.dtype), num(0.5, grad))
    return (mul(grad, sub(sub(num(1, grad), to_dtype(compare("gt", a, b), grad.dtype)), half_tie))
            if s.needs_input_grad[0] else None,
            mul(grad, sub(sub(num(1, grad), to_dtype(compare("lt", a, b), grad.dtype)), half_tie))
            if s.needs_input_grad[1] else None)


# out = atan2(a, b)  ->  da = grad b / (a^2 + b^2), db = -grad a / (a^2 + b^2); 0 at the origin (as torch)
def atan2_backward(grad, s):
    a, b = s.a, s.b
    r2 = add(mul(a, a), mul(b, b))
    origin = compare("eq", r2, num(0, r2))
    inv = where(origin, num(0, r2), div(num(1, r2), where(origin, num(1, r2), r2)))
    return (mul(mul(grad, b), inv) if s.needs_input_grad[0] else None,
            neg(mul(mul(grad, a), inv)) if s.needs_input_grad[1] else None)


# out = remainder(a, b) = a - floor(a / b) b  ->  da = grad, db = -grad floor(a / b); fmod the same with trunc (the
# quotient a kernel's value: a constant of the formula)
def remainder_backward(grad, s):
    return (grad if s.needs_input_grad[0] else None,
            neg(mul(grad, quotient(kernels.floor_divide, s.a, s.b, grad.dtype))) if s.needs_input_grad[1] else None)


def fmod_backward(grad, s):
    return (grad if s.needs_input_grad[0] else None,
            neg(mul(grad, quotient(kernels.trunc_divide, s.a, s.b, grad.dtype))) if s.needs_input_grad[1] else None)


# out = cond ? a : b  ->  da = cond ? grad : 0, db = cond ? 0 : grad
def where_backward(grad, s):
    cond, zero = s.cond, num(0, grad)
    return (None, where(cond, grad, zero) if s.needs_input_grad[1] else None,
            where(cond, zero, grad) if s.needs_input_grad[2] else None)


# out = clamp(a, lo, hi)  ->  da = grad where lo <= a <= hi, else 0
def clamp_backward(grad, s):
    a = s.a
    inside = make_tensor(np.ones(a.shape, dtype=np.bool_))
    if s.lo is not None:
        inside = logical_and(inside, compare("ge", a, num(s.lo, a)))
    if s.hi is not None:
        inside = logical_and(inside, compare("le", a, num(s.hi, a)))
    return (where(inside, grad, num(0, grad)),)


# ===== unary ===================================================================================================

# out = exp(a)  ->  da = grad * out
def exp_backward(grad, s):
    return (mul(grad, cj(s.out)),)


# out = log(a)  ->  da = grad / a
def log_backward(grad, s):
    return (div(grad, cj(s.a)),)


# out = sqrt(a)  ->  da = grad / (2 out)
def sqrt_backward(grad, s):
    return (div(grad, cj(mul(s.out, num(2, s.out)))),)


# out = a^(-1/2)  ->  da = -grad * out^3 / 2
def rsqrt_backward(grad, s):
    return (mul(grad, cj(mul(pow_scalar(s.out, 3), num(-0.5, s.out)))),)


def abs_sgn(a):
    """sgn(a) for abs's derivatives, through differentiable ops for a complex a (csrc's twin: Note
    [Differentiable sgn of abs] in csrc/dyngrad/derivatives.cpp)."""
    if not a.dtype.is_complex:
        return sign(a)
    magnitude = absolute(a)
    zero = compare("eq", magnitude, num(0, magnitude))
    return where(zero, num(0, a), div(a, where(zero, num(1, magnitude), magnitude)))


# out = |a|  ->  da = grad * sign(a) (sign(NaN) = 0: no gradient through a NaN, as torch); a complex a: grad * sgn(a),
# sgn(a) = a / |a| (Note [Differentiable sgn of abs])
def abs_backward(grad, s):
    return (mul(grad, abs_sgn(s.a)),)


# out = sin(a)  ->  da = grad * cos(a)
def sin_backward(grad, s):
    return (mul(grad, cj(cos(s.a))),)


# out = cos(a)  ->  da = -grad * sin(a)
def cos_backward(grad, s):
    return (neg(mul(grad, cj(sin(s.a)))),)


# out = tanh(a)  ->  da = grad * (1 - out^2)
def tanh_backward(grad, s):
    return (prim.tanh_backward(grad, s.out),)


# out = grad * (1 - x^2)  ->  dgrad = tanh_backward(g, x), dx = -2 g grad x
# (complex: out = grad * conj(1 - x^2), so dgrad = g * (1 - x^2), dx = conj(-2 g conj(grad) x))
def tanh_backward_backward(g, s):
    x = s.x
    if x.dtype.is_complex:
        return (mul(g, sub(num(1, x), mul(x, x))) if s.needs_input_grad[0] else None,
                conj(mul(mul(g, cj(s.grad)), mul(x, num(-2, x)))) if s.needs_input_grad[1] else None)
    return (prim.tanh_backward(g, x) if s.needs_input_grad[0] else None,
            mul(mul(g, s.grad), mul(x, num(-2, x))) if s.needs_input_grad[1] else None)


# out = sigmoid(a)  ->  da = grad * out * (1 - out)
def sigmoid_backward(grad, s):
    return (prim.sigmoid_backward(grad, s.out),)


# out = grad * x * (1 - x)  ->  dgrad = sigmoid_backward(g, x), dx = g grad (1 - 2x)
def sigmoid_backward_backward(g, s):
    x = s.x
    if x.dtype.is_complex:       # as tanh_backward_backward: out = grad * conj(x (1 - x))
        return (mul(g, mul(x, sub(num(1, x), x))) if s.needs_input_grad[0] else None,
                conj(mul(mul(g, cj(s.grad)), sub(num(1, x), mul(x, num(2, x))))) if s.needs_input_grad[1] else None)
    return (prim.sigmoid_backward(g, x) if s.needs_input_grad[0] else None,
            mul(mul(g, s.grad), sub(num(1, x), mul(x, num(2, x)))) if s.needs_input_grad[1] else None)


# out = max(a, 0)  ->  da = grad * !(out <= 0) (a NaN passes its grad through, as torch's threshold_backward)
def relu_backward(grad, s):
    return (prim.threshold_backward(grad, s.out),)


# out = grad * !(x <= 0)  ->  dgrad = threshold_backward(g, x); dx = 0 almost everywhere (zeros, as torch)
def threshold_backward_backward(g, s):
    return (prim.threshold_backward(g, s.x) if s.needs_input_grad[0] else None,
            make_tensor(np.zeros(in_shape(s, 1), dtype=s.input_meta[1][1])) if s.needs_input_grad[1] else None)


# out = sign(a)  ->  da = 0 (piecewise constant)
def sign_backward(grad, s):
    return (mul(grad, num(0, grad)),)


# out = a > 0 ? a : slope * a  ->  da = grad * (a > 0 ? 1 : slope)
def leaky_relu_backward(grad, s):
    a = s.a
    return (mul(grad, where(compare("gt", a, num(0, a)), num(1, grad), num(s.slope, grad))),)


# out = a * Phi(a)  ->  da = grad * (Phi(a) + a * phi(a))
def gelu_backward(grad, s):
    return (prim.gelu_backward(grad, s.a),)


# out = grad * (Phi(x) + x phi(x))  ->  dgrad = gelu_backward(g, x), dx = g grad phi(x) (2 - x^2)
def gelu_backward_backward(g, s):
    x = s.x
    dx = None
    if s.needs_input_grad[1]:
        pdf = mul(exp(mul(mul(x, x), num(-0.5, x))), num(0.3989422804014327, x))
        dx = mul(mul(g, s.grad), mul(pdf, sub(num(2, x), mul(x, x))))
    return (prim.gelu_backward(g, x) if s.needs_input_grad[0] else None, dx)


# out = log(1 + exp(beta a)) / beta (linear above threshold)  ->  da = grad * sigmoid(beta a) (1 above threshold)
def softplus_backward(grad, s):
    a = s.a
    ba = mul(a, num(s.beta, a))
    return (where(compare("gt", ba, num(s.threshold, a)), grad, mul(grad, sigmoid(ba))),)


# out = erf(a)  ->  da = grad * 2/sqrt(pi) * exp(-a^2)
def erf_backward(grad, s):
    a = s.a
    return (mul(grad, mul(exp(neg(mul(a, a))), num(1.1283791670955126, a))),)


# out = log1p(a)  ->  da = grad / (1 + a)
def log1p_backward(grad, s):
    return (div(grad, cj(add(s.a, num(1, s.a)))),)


# out = expm1(a)  ->  da = grad * (out + 1)
def expm1_backward(grad, s):
    return (mul(grad, cj(add(s.out, num(1, s.out)))),)


# out = log2(a)  ->  da = grad / (a ln 2)
def log2_backward(grad, s):
    return (div(grad, cj(mul(s.a, num(0.69314718055994530942, s.a)))),)


# out = log10(a)  ->  da = grad / (a ln 10)
def log10_backward(grad, s):
    return (div(grad, cj(mul(s.a, num(2.30258509299404568402, s.a)))),)


# out = tan(a)  ->  da = grad * (1 + out^2)
def tan_backward(grad, s):
    return (mul(grad, cj(add(mul(s.out, s.out), num(1, s.out)))),)


# out = asin(a)  ->  da = grad / sqrt(1 - a^2) (inf at |a| = 1, NaN beyond, as torch)
def asin_backward(grad, s):
    return (mul(grad, cj(rsqrt(sub(num(1, s.a), mul(s.a, s.a))))),)


# out = acos(a)  ->  da = -grad / sqrt(1 - a^2)
def acos_backward(grad, s):
    return (neg(mul(grad, cj(rsqrt(sub(num(1, s.a), mul(s.a, s.a)))))),)


# out = atan(a)  ->  da = grad / (1 + a^2)
def atan_backward(grad, s):
    return (div(grad, cj(add(mul(s.a, s.a), num(1, s.a)))),)


# out = sinh(a)  ->  da = grad * cosh(a)
def sinh_backward(grad, s):
    return (mul(grad, cj(cosh(s.a))),)


# out = asinh(a)  ->  da = grad / sqrt(a^2 + 1)
def asinh_backward(grad, s):
    return (mul(grad, cj(rsqrt(add(mul(s.a, s.a), num(1, s.a))))),)


# out = atanh(a)  ->  da = grad / (1 - a^2)
def atanh_backward(grad, s):
    return (div(grad, cj(sub(num(1, s.a), mul(s.a, s.a)))),)


# out = cosh(a)  ->  da = grad * sinh(a)
def cosh_backward(grad, s):
    return (mul(grad, cj(sinh(s.a))),)


# out = acosh(a)  ->  da = grad / sqrt(a^2 - 1) for real a, grad / conj(sqrt(a - 1) sqrt(a + 1)) for complex a
# (derivatives.cpp says why)
def acosh_backward(grad, s):
    if not s.a.dtype.is_complex:
        return (mul(grad, rsqrt(sub(mul(s.a, s.a), num(1, s.a)))),)
    return (mul(grad, conj(mul(rsqrt(sub(s.a, num(1, s.a))), rsqrt(add(s.a, num(1, s.a)))))),)


# out = conj(a)  ->  da = conj(grad)
def conj_backward(grad, s):
    return (cj(grad),)


# ===== reductions ==============================================================================================

# out = sum(a, dims)  ->  da = grad broadcast back over dims
def sum_backward(grad, s):
    return (unreduce(grad, s),)


# out = mean(a, dims)  ->  da = grad broadcast back / count
def mean_backward(grad, s):
    count = 1
    for d in s.dims:
        count *= in_shape(s)[d]
    return (unreduce(div(grad, num(float(count), grad)), s),)


# out = amax(a, dims)  ->  grad shared evenly by the elements equal to the max (torch)
def _extremum_gradient(grad, s):
    a, out = s.a, s.out
    hit = to_dtype(compare("eq", a, unreduce(out, s)), grad.dtype)
    count = sum(hit, s.dims, True)
    return (mul(div(unreduce(grad, s), expand(count, in_shape(s))), hit),)


def amax_backward(grad, s):
    return _extremum_gradient(grad, s)


def amin_backward(grad, s):
    return _extremum_gradient(grad, s)


# out = log(sum(exp(a), dims))  ->  da = grad * exp(a - out)
def logsumexp_backward(grad, s):
    a, out = s.a, s.out
    return (mul(unreduce(grad, s), exp(sub(a, unreduce(out, s)))),)


# out = cumsum(a, dim)  ->  da_i = sum_{k >= i} grad_k: the running sum the other way
def cumsum_backward(grad, s):
    return (cumsum(grad, s.dim, not s.reverse),)


# out = cumprod(a)  ->  da_k = L_k S_k: L = out moved one place (1 at the start), S_k = grad_k + a_{k+1} S_{k+1}
# (derivatives.cpp: no division, exact with zeros)
def cumprod_backward(grad, s):
    before = scan_shift(s.out, s.dim, s.reverse, 1)
    after = linear_recurrence(grad, scan_shift(s.a, s.dim, not s.reverse, 0), s.dim, not s.reverse)
    return (mul(before, after),)


# the lowest finite value of a floating dtype (torch's logcumsumexp_backward puts it where log|grad| is -inf)
LOWEST_FINITE = {"float16": -65504.0, "float32": -float(np.finfo(np.float32).max), "bfloat16": -3.3895313892515355e38}


# out = logcumsumexp(a)  ->  da_i = sum_{k >= i} grad_k exp(a_i - out_k), in log space with grad's signs apart
def logcumsumexp_backward(grad, s):
    zero, lowest = num(0, grad), num(LOWEST_FINITE.get(grad.dtype.name, -np.finfo(np.float64).max), grad)
    log_abs = log(absolute(where(compare("eq", grad, zero), num(1, grad), grad)))
    parts = []
    for sign_ in ("gt", "lt"):
        log_part = where(compare(sign_, grad, zero), log_abs, lowest)
        parts.append(exp(add(logcumsumexp(sub(log_part, s.out), s.dim, not s.reverse), s.a)))
    return (sub(parts[0], parts[1]),)


# y_k = b_k + c_k y_{k-1}  ->  gb_k = grad_k + c_{k+1} gb_{k+1}, gc_k = gb_k y_{k-1}
def linear_recurrence_backward(grad, s):
    gb = linear_recurrence(grad, scan_shift(s.c, s.dim, not s.reverse, 0), s.dim, not s.reverse)
    return (gb if s.needs_input_grad[0] else None,
            mul(gb, scan_shift(s.out, s.dim, s.reverse, 0)) if s.needs_input_grad[1] else None)


# ===== linear algebra ==========================================================================================

# out = a @ b  ->  da = grad @ b^T, db = a^T @ grad  (batch dims summed by the engine)
# Note [Gradient in the operand's layout] (csrc/dyngrad/derivatives.cpp): a transposed-view operand gets its
# gradient computed transposed, (grad^T @ a)^T, so that it comes out in the operand's own layout. The forward
# records the layouts, since an operand is saved only when the other one needs a gradient.
def matmul_backward(grad, s):
    da = db = None
    if s.needs_input_grad[0]:
        da = mT(matmul(cj(s.b), mT(grad))) if s.a_transposed else matmul(grad, cj(mT(s.b)))
    if s.needs_input_grad[1]:
        db = mT(matmul(mT(grad), cj(s.a))) if s.b_transposed else matmul(cj(mT(s.a)), grad)
    return da, db


# ===== conversion and movement =================================================================================

# out = a.to(dtype)  ->  da = grad (cast back)
def to_dtype_backward(grad, s):
    return (to_dtype(grad, in_dtype(s)),)


# out = a.clone()  ->  da = grad
def clone_backward(grad, s):
    return (grad,)


# out = a.reshape(shape)  ->  da = grad.reshape(a.shape)
def reshape_backward(grad, s):
    return (reshape(grad, in_shape(s)),)


# out = a.permute(dims)  ->  da = grad.permute(inverse of dims)
def permute_backward(grad, s):
    inverse = [0] * len(s.dims)
    for i, d in enumerate(s.dims):
        inverse[d] = i
    return (permute(grad, inverse),)


# out = a.expand(shape)  ->  da = grad summed over the expanded dims
def expand_backward(grad, s):
    return (sum_to(grad, in_shape(s)),)


# out = a[start::step] along dim  ->  da = zeros with grad written back into that slice
def slice_backward(grad, s):
    return (slice_scatter(grad, in_shape(s), s.dim, s.start, s.step),)


# out = zeros with g written into a slice  ->  dg = grad[start::step] along dim
def slice_scatter_backward(grad, s):
    length = in_shape(s)[s.dim]
    return (slice(grad, s.dim, s.start, s.start + length * s.step, s.step),)


# out = cat(a_0, a_1, ...) along dim  ->  da_i = the i-th piece of grad
def cat_backward(grad, s):
    grads, offset = [], 0
    for i, length in enumerate(s.sizes):
        if not s.needs_input_grad[i]:
            grads.append(None)
        elif length > 0:
            grads.append(slice(grad, s.dim, offset, offset + length, 1))
        else:     # an empty input: an empty zero gradient of its shape (as C++ and torch: `.grad` is set)
            grads.append(make_tensor(np.zeros(in_shape(s, i), dtype=s.input_meta[i][1])))
        offset += length
    return tuple(grads)


# out = view_as_real(a)  ->  da = view_as_complex(grad) (made contiguous: its last dim must have stride 1)
def view_as_real_backward(grad, s):
    return (view_as_complex(contiguous(grad)),)


# out = view_as_complex(a)  ->  da = view_as_real(grad)
def view_as_complex_backward(grad, s):
    return (view_as_real(grad),)


# ===== indexing ================================================================================================

# out = a.index_select(dim, index)  ->  da = zeros with grad rows added at index
def index_select_backward(grad, s):
    return (index_add(grad, s.dim, s.index, in_shape(s)),)


# out = zeros; out.index_select(dim, index) += src  ->  dsrc = grad.index_select(dim, index)
def index_add_backward(grad, s):
    return (index_select(grad, s.dim, s.index),)


# out = a.gather(dim, index)  ->  da = zeros with grad scatter-added at index
def gather_backward(grad, s):
    return (scatter_add(grad, s.dim, s.index, in_shape(s)),)


# out = zeros; scatter-add src at index  ->  dsrc = grad.gather(dim, index)
def scatter_add_backward(grad, s):
    return (gather(grad, s.dim, s.index),)


# out = a.flat[pos]  ->  da = zeros with grad added at pos
def take_backward(grad, s):
    return (put_add(grad, s.positions, in_shape(s)),)


# out = a with out.flat[pos] = v  ->  da = grad with pos zeroed, dv = grad.flat[pos]
def put_backward(grad, s):
    pos = s.positions
    return (put(grad, pos, num(0, grad)) if s.needs_input_grad[0] else None,
            take(grad, pos) if s.needs_input_grad[1] else None)


# out = zeros with v added at pos  ->  dv = grad.flat[pos]
def put_add_backward(grad, s):
    return (take(grad, s.positions),)


# ===== neural-net primitives ===================================================================================

# out = softmax(a, dim)  ->  da = out * (grad - sum(grad * out, dim))
def softmax_backward(grad, s):
    return (prim.softmax_backward(grad, s.out, s.dim),)


# out = y * (grad - sum(grad * y))  ->  dgrad = softmax_backward(g, y), dy = g (grad - sum(grad y)) - grad sum(g y)
def softmax_backward_backward(g, s):
    y, grad = s.out, s.grad
    dims = (s.dim,) if y.ndim else ()
    dy = None
    if s.needs_input_grad[1]:
        dy = sub(mul(g, sub(grad, sum(mul(grad, y), dims, True))), mul(grad, sum(mul(g, y), dims, True)))
    return (prim.softmax_backward(g, y, s.dim) if s.needs_input_grad[0] else None, dy)


# out = log_softmax(a, dim)  ->  da = grad - exp(out) * sum(grad, dim)
def log_softmax_backward(grad, s):
    return (prim.log_softmax_backward(grad, s.out, s.dim),)


# out = grad - exp(y) sum(grad)  ->  dgrad = g - sum(g exp(y)), dy = -g exp(y) sum(grad)
def log_softmax_backward_backward(g, s):
    y = s.out
    dims = (s.dim,) if y.ndim else ()
    e = exp(y)
    return (sub(g, sum(mul(g, e), dims, True)) if s.needs_input_grad[0] else None,
            neg(mul(mul(g, e), sum(s.grad, dims, True))) if s.needs_input_grad[1] else None)


# out = reduce(-sum_c q[i,c] log_softmax(x)[i,c])  ->  dx = (softmax(x) - q) * grad (per row; / count for mean)
# where q is the (label-smoothed) one-hot target and ignored rows get 0.
def cross_entropy_backward(grad, s):
    return (prim.cross_entropy_backward(grad, s.logits, s.target, s.reduction, s.ignore_index, s.label_smoothing),
            None)


# out = ((p - q) * keep) * scale, p = softmax(x) by rows, scale = grad (none: per row), grad / kept (mean), grad (sum)
#   ->  dgrad = sum over each row (none) or everything of g (p - q) keep, / kept for a mean;
#       dx = softmax_backward(g keep scale, p)
def cross_entropy_backward_backward(g, s):
    logits = s.logits
    batched = logits.ndim == 2
    n, c = (logits.shape[0] if batched else 1), logits.shape[-1]
    q, keep, kept = cross_entropy_target(s.target, n, c, s.ignore_index, s.label_smoothing, logits._data.dtype)
    q, keep, kept = make_tensor(q), make_tensor(keep), float(max(kept, 1))
    p = softmax(logits if batched else reshape(logits, (1, c)), 1)
    g2 = g if batched else reshape(g, (1, c))
    dgrad = dx = None
    if s.needs_input_grad[0]:
        r = mul(mul(sub(p, q), keep), g2)
        if s.reduction == 0:
            dgrad = reshape(sum(r, (1,), False), in_shape(s, 0))
        else:
            dgrad = div(sum(r, (), False), num(kept, r)) if s.reduction == 1 else sum(r, (), False)
    if s.needs_input_grad[1]:
        grad = s.grad
        scale = reshape(grad, (n, 1)) if s.reduction == 0 else (div(grad, num(kept, grad)) if s.reduction == 1
                                                                 else grad)
        dx = prim.softmax_backward(mul(mul(g2, keep), scale), p, 1)
        if not batched:
            dx = reshape(dx, (c,))
    return (dgrad, dx, None)


# out = im2col(x)  ->  dx = col2im(grad)
def unfold_backward(grad, s):
    return (fold(grad, in_shape(s), *s.window),)


# out = col2im(cols)  ->  dcols = im2col(grad)
def fold_backward(grad, s):
    return (unfold(grad, *s.window),)



# out = rnn_layer(gi, h0, c0, W, b, mode, reverse) (Note [Whole-sequence RNN layer] in csrc/dyngrad/ops_nn.cpp): the
# recurrence runs backwards over the steps k = L-1 .. 0 (step k reads h_prev = h0 at k = 0, else the state of step
# k-1), carrying dh (and dc) to the step before. With gh = h_prev W^T + b, a = gi_t + gh the gate pre-activations,
# dh = grad of out[0, t] + what step k+1 sent back:
#   RNN:  h = tanh(a) -> da = dh (1 - h^2);  relu -> da = dh where h > 0, else 0
#   LSTM: c = s(f) c_prev + s(i) tanh(g), h = s(o) tanh(c); dc = grad of out[1, t] + carried + dh s(o) (1 - tanh(c)^2)
#         da_i = dc tanh(g) s(i) (1 - s(i)), da_f = dc c_prev s(f) (1 - s(f)), da_g = dc s(i) (1 - tanh(g)^2),
#         da_o = dh tanh(c) s(o) (1 - s(o)); dc_prev = dc s(f)
#   GRU:  r = s(gi_r + gh_r), z = s(gi_z + gh_z), n = tanh(gi_n + r gh_n), h = n + z (h_prev - n):
#         da_n = dh (1 - z) (1 - n^2), da_z = dh (h_prev - n) z (1 - z), da_r = da_n gh_n r (1 - r);
#         dgi = (da_r, da_z, da_n), dgh = (da_r, da_z, r da_n), and h_prev also gets dh z directly
#   (RNN, LSTM: dgi = dgh = da.)  dh_prev = dgh W (+ dh z);  dW = sum_k dgh_k^T h_prev_k;  db = sum_k sum_rows dgh_k;
#   dgi = dgi_t for every t; dh0, dc0 = what step 0 sends back.
def rnn_layer_backward(grad, s):
    n = s.needs_input_grad
    return prim.rnn_layer_backward(grad, s.gi, s.h0, s.c0, s.w_hh, s.b_hh, s.out, s.ws, s.mode, s.reverse,
                                   (n[0], n[1], n[2], n[3], n[4]))


# rnn_layer_backward's differentiable definition: the recurrence above in ops, the activations recomputed from the
# inputs and the output
def rnn_layer_backward_definition(grad, gi, h0, c0, w, b, out, mode, reverse):
    L, N, H = gi.shape[0], h0.shape[0], h0.shape[1]
    times = list(range(L - 1, -1, -1)) if reverse else list(range(L))
    hs, grad_h = select(out, 0, 0), select(grad, 0, 0)
    one = num(1, gi)

    def gate(a, j):
        return slice(a, 1, j * H, (j + 1) * H, 1)

    dh = dc = None
    dgi, dgh, h_prev = [None] * L, [None] * L, [None] * L
    for k in range(L - 1, -1, -1):
        t = times[k]
        hp = h0 if k == 0 else select(hs, 0, times[k - 1])
        gh = matmul(hp, mT(w))
        if b is not None:
            gh = add(gh, b)
        x = select(gi, 0, t)
        dh = select(grad_h, 0, t) if dh is None else add(select(grad_h, 0, t), dh)
        if mode == LSTM:
            a = add(x, gh)
            si, sf, tg, so = sigmoid(gate(a, 0)), sigmoid(gate(a, 1)), tanh(gate(a, 2)), sigmoid(gate(a, 3))
            cs = select(out, 0, 1)
            cp = c0 if k == 0 else select(cs, 0, times[k - 1])
            tc = tanh(select(cs, 0, t))
            dct = add(select(select(grad, 0, 1), 0, t), mul(mul(dh, so), sub(one, mul(tc, tc))))
            if dc is not None:
                dct = add(dct, dc)
            da = cat([mul(mul(dct, tg), mul(si, sub(one, si))), mul(mul(dct, cp), mul(sf, sub(one, sf))),
                      mul(mul(dct, si), sub(one, mul(tg, tg))), mul(mul(dh, tc), mul(so, sub(one, so)))], 1)
            dc = mul(dct, sf)
            dgi[t] = dgh[k] = da
            dh = matmul(da, w)
        elif mode == GRU:
            r, z = sigmoid(add(gate(x, 0), gate(gh, 0))), sigmoid(add(gate(x, 1), gate(gh, 1)))
            ghn = gate(gh, 2)
            n = tanh(add(gate(x, 2), mul(r, ghn)))
            dan = mul(mul(dh, sub(one, z)), sub(one, mul(n, n)))
            daz = mul(mul(dh, sub(hp, n)), mul(z, sub(one, z)))
            dar = mul(mul(dan, ghn), mul(r, sub(one, r)))
            dgi[t] = cat([dar, daz, dan], 1)
            dgh[k] = cat([dar, daz, mul(dan, r)], 1)
            dh = add(matmul(dgh[k], w), mul(dh, z))
        else:
            h = select(hs, 0, t)
            da = mul(dh, sub(one, mul(h, h))) if mode == RNN_TANH else where(compare("le", h, num(0, h)), num(0, dh),
                                                                             dh)
            dgi[t] = dgh[k] = da
            dh = matmul(da, w)
        h_prev[k] = hp
    all_dgh = reshape(stack(dgh, 0), (L * N, w.shape[0]))
    dw = matmul(mT(all_dgh), reshape(stack(h_prev, 0), (L * N, H)))
    db = sum(all_dgh, (0,), False) if b is not None else None
    return (stack(dgi, 0), dh, dc if c0 is not None else None, dw, db)


# out = (dgi, dh0, dc0, dw_hh, db_hh)  ->  the VJP of the definition (Note [Derivatives of fused backwards])
def rnn_layer_backward_backward(grads, s):
    return definition_vjp(s, (s.grad, s.gi, s.h0, s.c0, s.w_hh, s.b_hh, s.out, None), grads,
                          lambda x: rnn_layer_backward_definition(*x[:7], s.mode, s.reverse))


# out = xhat * weight + bias over the last ndims dims  ->  layer_norm_backward (Note [Fused layer_norm] in
# csrc/dyngrad/ops_nn.cpp)
def layer_norm_backward(grad, s):
    n = s.needs_input_grad
    return prim.layer_norm_backward(grad, s.a, s.weight, s.ndims, s.eps, (n[0], n[1], n[2]))


# layer_norm_backward's differentiable definition: xhat = (a - mean) * rstd, rstd = 1 / sqrt(var + eps) (biased
# var); with g = grad * weight (grad without a weight), per row of the last ndims dims:
#   da = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dweight = sum(grad * xhat),  dbias = sum(grad)
# the sums over the leading dims.
def layer_norm_backward_definition(grad, a, w, ndims, eps):
    dims = tuple(range(a.ndim - ndims, a.ndim))
    leading = tuple(range(a.ndim - ndims))

    def over_rows(t):
        return sum(t, leading, False) if leading else t
    xc = sub(a, mean(a, dims, True))
    rstd = rsqrt(add(mean(mul(xc, xc), dims, True), num(eps, a)))
    xhat = mul(xc, rstd)
    g = mul(grad, w) if w is not None else grad
    da = mul(rstd, sub(sub(g, mean(g, dims, True)), mul(xhat, mean(mul(g, xhat), dims, True))))
    return (da, over_rows(mul(grad, xhat)) if w is not None else None, over_rows(grad))


# out = (da, dweight, dbias)  ->  the VJP of the definition (Note [Derivatives of fused backwards])
def layer_norm_backward_backward(grads, s):
    return definition_vjp(s, (s.grad, s.a, s.weight), grads,
                          lambda x: layer_norm_backward_definition(x[0], x[1], x[2], s.ndims, s.eps))


# out = softmax(scale q k^T + mask) v  ->  attention_backward (Note [Fused attention] in csrc/dyngrad/ops_nn.cpp)
def attention_backward(grad, s):
    n = s.needs_input_grad
    return prim.attention_backward(grad, s.q, s.k, s.v, s.mask, s.out, s.lse, s.is_causal, s.scale, s.dropout_p,
                                   s.seed, (n[0], n[1], n[2]))


# attention_backward's differentiable definition, the kernel's maths in ops: with S = scale q k^T + mask (-inf
# above the diagonal when causal), P = softmax(S) (0 on fully masked rows), K the dropout factors (Note [Dropout
# inside attention]) and Pd = P K:
#   dv = Pd^T grad,  dP = (grad v^T) K,  dS = P (dP - rowsum(dP P)),  dq = scale dS k,  dk = scale dS^T q
def attention_backward_definition(grad, q, k, v, mask, is_causal, scale, dropout_p, seed):
    lq, lk = q.shape[-2], k.shape[-2]
    S = mul(matmul(q, mT(k)), num(scale, q))
    if mask is not None:
        S = add(S, mask)
    if is_causal:
        S = add(S, make_tensor(kernels.attention_causal_bias(lq, lk, q._data.dtype)))
    with GradModeGuard(False):
        dead = (compare("eq", sum(S, (-1,), True), num(0, S)) if lk == 0   # no keys: every row is dead
                else compare("eq", amax(S, (-1,), True), num(-np.inf, S)))
    zero = num(0, S)
    P = where(dead, zero, softmax(where(dead, zero, S), -1))
    keep = None
    if dropout_p > 0:
        keep = make_tensor(kernels.attention_keep_scale(tuple(S.shape[:-2]), lq, lk, dropout_p, seed,
                                                        q._data.dtype))
    Pd = mul(P, keep) if keep is not None else P
    dv = matmul(mT(Pd), grad)
    dP = matmul(grad, mT(v))
    if keep is not None:
        dP = mul(dP, keep)
    dS = mul(P, sub(dP, sum(mul(dP, P), (-1,), True)))
    return (mul(matmul(dS, k), num(scale, q)), mul(matmul(mT(dS), q), num(scale, q)), dv)


# out = (dq, dk, dv)  ->  the VJP of the definition (Note [Derivatives of fused backwards])
def attention_backward_backward(grads, s):
    return definition_vjp(s, (s.grad, s.q, s.k, s.v), grads,
                          lambda x: attention_backward_definition(x[0], x[1], x[2], x[3], s.mask, s.is_causal,
                                                                  s.scale, s.dropout_p, s.seed))
