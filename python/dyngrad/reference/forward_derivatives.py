"""Reference engine: EVERY tangent formula (forward-mode derivative), one function per primitive op, in the order
of ops.OP_NAMES. Mirrors csrc/dyngrad/forward_derivatives.cpp: same order, same names, the same ops in each
formula (Note [Dual tensors] and Note [Nested levels] in csrc/dyngrad/forward_ad.h); a plain unary op has one only
where its default, tangent_from_backward of its backward formula, does not fit (Note [Default tangents] there).

Conventions: `t` holds one tangent per input of the op, in the order its forward passes them to record() (None
where an input has none: a zero tangent); `out` is the primal output (a list for the ops of several outputs); `s`
has the op's named fields (saved.h's names), all of them, from the forward's own arguments. forward_ad.attach()
expands each tangent to its output's shape and casts it to its dtype.
"""
from .tensor import make_tensor, scalar_tensor, full
from .ops_math import (add, sub, mul, div, neg, pow, pow_scalar, where, compare, logical_and, sum, matmul, mean,
                       cumsum, linear_recurrence, scan_shift, quotient)
from .primitives import exp, log, sigmoid, sign, rsqrt, conj
from .ops_shape import to_dtype, reshape, permute, expand, slice, slice_scatter, cat, clone, contiguous
from .ops_shape import view_as_real, view_as_complex, select
from .ops_index import index_select, index_add, gather, scatter_add, take, put, put_add
from .ops_nn import softmax, unfold, fold, cross_entropy_target, rnn_layer, attention
from .engine import vjp
from .grad_mode import GradModeGuard
from .node import next_sequence_nr
from .derivatives import layer_norm_backward_definition, rnn_layer_backward_definition
from .derivatives import attention_backward_definition, abs_sgn
from . import derivatives
from . import kernels
from . import primitives as prim
from . import dtypes as _dt
from . import forward_ad
from .primitives import OP_NAMES


def num(v, like):
    return scalar_tensor(v, like.dtype)


def plus(x, y):
    return y if x is None else x if y is None else add(x, y)


def minus(x, y):
    return x if y is None else neg(y) if x is None else sub(x, y)


def times(t, factor):
    return None if t is None else mul(t, factor)


def zeros_of(shape, like):
    return full(tuple(shape), 0.0, like.dtype)


def unreduce(r, shape, dims, keepdim):
    if not keepdim:
        kept = list(shape)
        for d in dims:
            kept[d] = 1
        r = reshape(r, tuple(kept))
    return expand(r, tuple(shape))


def softmax_dims(y, dim):
    return (dim,) if y.ndim else ()


# Note [Tangents by transposition] in csrc/dyngrad/forward_derivatives.cpp
def jvp_by_transposition(primals, t, rerun):
    xs = [None] * len(primals)
    with GradModeGuard(True):
        first_node = next_sequence_nr()
        for i, p in enumerate(primals):
            if p is None:
                continue
            xs[i] = make_tensor(p._data, p._storage)
            forward_ad.copy_tangents(xs[i], p)
            xs[i]._requires_grad = t[i] is not None and p._data.dtype.kind in "fc"
        outs = list(rerun(xs))
        us = [None] * len(outs)
        for j, o in enumerate(outs):
            if o is not None and (o.grad_fn is not None or o._requires_grad):
                us[j] = zeros_of(o.shape, o)
                us[j]._requires_grad = True
        vjps = vjp(outs, us, xs, first_node)
        inner = None
        for v, ti in zip(vjps, t):
            if v is not None and ti is not None:
                inner = plus(inner, sum(mul(v, ti), (), False))
        result = [None] * len(outs)
        if inner is None:
            return result
        jt = vjp([inner], [num(1, inner)], us, first_node)
        for j, x in enumerate(jt):
            if x is not None:
                result[j] = make_tensor(x._data, x._storage)
                forward_ad.copy_tangents(result[j], x)
    return result


# ---- arithmetic ----

def add_jvp(t, out, s):
    return plus(t[0], t[1])


def sub_jvp(t, out, s):
    return minus(t[0], t[1])


def mul_jvp(t, out, s):
    return plus(times(t[0], s.b), times(t[1], s.a))


def div_jvp(t, out, s):
    return div(minus(t[0], times(t[1], out)), s.b)


def neg_jvp(t, out, s):
    return neg(t[0])


def pow_jvp(t, out, s):
    a, b = s.a, s.b
    da = mul(t[0], mul(b, pow(a, sub(b, num(1, b))))) if t[0] is not None else None
    db = None
    if t[1] is not None:
        db = mul(t[1], mul(out, where(compare("eq", a, num(0, a)), num(0, a), log(a))))
    return plus(da, db)


def pow_scalar_jvp(t, out, s):
    p = s.exponent
    if p == 0:
        return mul(t[0], num(0, t[0]))
    return mul(t[0], mul(s.a, num(2, s.a)) if p == 2 else mul(pow_scalar(s.a, p - 1), num(p, s.a)))


def _extremum_pair_jvp(t, s, lost_a, lost_b):
    a, b = s.a, s.b
    like = t[0] if t[0] is not None else t[1]
    dt = like.dtype
    half_tie = mul(to_dtype(compare("eq", a, b), dt), num(0.5, like))
    one = num(1, like)
    ta = mul(t[0], sub(sub(one, to_dtype(compare(lost_a, a, b), dt)), half_tie)) if t[0] is not None else None
    tb = mul(t[1], sub(sub(one, to_dtype(compare(lost_b, a, b), dt)), half_tie)) if t[1] is not None else None
    return plus(ta, tb)


def maximum_jvp(t, out, s):
    return _extremum_pair_jvp(t, s, "lt", "gt")


def minimum_jvp(t, out, s):
    return _extremum_pair_jvp(t, s, "gt", "lt")


# d remainder(a, b) = ta - floor(a / b) tb; d fmod(a, b) = ta - trunc(a / b) tb (the quotients are constants)
def remainder_jvp(t, out, s):
    return minus(t[0], times(t[1], quotient(kernels.floor_divide, s.a, s.b, out.dtype)))


def fmod_jvp(t, out, s):
    return minus(t[0], times(t[1], quotient(kernels.trunc_divide, s.a, s.b, out.dtype)))


# d atan2(a, b) = (ta b - tb a) / (a^2 + b^2), 0 at the origin as the backward
def atan2_jvp(t, out, s):
    a, b = s.a, s.b
    r2 = add(mul(a, a), mul(b, b))
    origin = compare("eq", r2, num(0, r2))
    inv = where(origin, num(0, r2), div(num(1, r2), where(origin, num(1, r2), r2)))
    d = minus(times(t[0], b), times(t[1], a))
    return None if d is None else mul(d, inv)


def where_jvp(t, out, s):
    like = t[1] if t[1] is not None else t[2]
    zero = num(0, like)
    return where(s.cond, t[1] if t[1] is not None else zero, t[2] if t[2] is not None else zero)


def clamp_jvp(t, out, s):
    a = s.a
    inside = full(tuple(a.shape), True, _dt.bool_)
    if s.lo is not None:
        inside = logical_and(inside, compare("ge", a, num(s.lo, a)))
    if s.hi is not None:
        inside = logical_and(inside, compare("le", a, num(s.hi, a)))
    return where(inside, t[0], num(0, t[0]))


# ---- unary ----
# The plain unary ops take their tangents from their backward formulas (Note [Default tangents] in
# csrc/dyngrad/forward_derivatives.cpp: tangent_from_backward below); these are the ones that are not the default:
# abs and conj are not holomorphic on complex tensors, and the fused derivatives have two inputs.


def abs_jvp(t, out, s):
    if s.a.dtype.is_complex:       # the real part of conj(sgn(a)) t, the change of |a| along t
        return select(view_as_real(mul(t[0], conj(abs_sgn(s.a)))), -1, 0)
    return mul(t[0], sign(s.a))


def tanh_backward_jvp(t, out, s):
    dg = prim.tanh_backward(t[0], s.x) if t[0] is not None else None
    return plus(dg, mul(mul(s.grad, t[1]), mul(s.x, num(-2, s.x))) if t[1] is not None else None)


def sigmoid_backward_jvp(t, out, s):
    x = s.x
    dg = prim.sigmoid_backward(t[0], x) if t[0] is not None else None
    return plus(dg, mul(mul(s.grad, t[1]), sub(num(1, x), mul(x, num(2, x)))) if t[1] is not None else None)


def threshold_backward_jvp(t, out, s):
    return prim.threshold_backward(t[0], s.x) if t[0] is not None else zeros_of(out.shape, out)


def leaky_relu_jvp(t, out, s):
    a = s.a
    return mul(t[0], where(compare("gt", a, num(0, a)), num(1, t[0]), num(s.slope, t[0])))


def gelu_backward_jvp(t, out, s):
    x = s.x
    dx = None
    if t[1] is not None:
        pdf = mul(exp(mul(mul(x, x), num(-0.5, x))), num(0.3989422804014327, x))
        dx = mul(mul(t[1], s.grad), mul(pdf, sub(num(2, x), mul(x, x))))
    return plus(prim.gelu_backward(t[0], x) if t[0] is not None else None, dx)


def softplus_jvp(t, out, s):
    a = s.a
    ba = mul(a, num(s.beta, a))
    return where(compare("gt", ba, num(s.threshold, a)), t[0], mul(t[0], sigmoid(ba)))


# conj is not holomorphic (it is antilinear): its tangent is conj(t)
def conj_jvp(t, out, s):
    return conj(t[0])


# ---- reductions ----

def sum_jvp(t, out, s):
    return sum(t[0], s.dims, s.keepdim)


def mean_jvp(t, out, s):
    return mean(t[0], s.dims, s.keepdim)


def _extremum_jvp(t, s):
    a = s.a
    hit = to_dtype(compare("eq", a, unreduce(s.out, a.shape, s.dims, s.keepdim)), t[0].dtype)
    return div(sum(mul(t[0], hit), s.dims, s.keepdim), sum(hit, s.dims, s.keepdim))


def amax_jvp(t, out, s):
    return _extremum_jvp(t, s)


def amin_jvp(t, out, s):
    return _extremum_jvp(t, s)


def logsumexp_jvp(t, out, s):
    return sum(mul(t[0], exp(sub(s.a, unreduce(s.out, s.a.shape, s.dims, s.keepdim)))), s.dims, s.keepdim)


def cumsum_jvp(t, out, s):
    return cumsum(t[0], s.dim, s.reverse)


# d out_k = a_k d out_{k-1} + t_k out_{k-1}: the linear recurrence over a
def cumprod_jvp(t, out, s):
    return linear_recurrence(mul(t[0], scan_shift(out, s.dim, s.reverse, 1)), s.a, s.dim, s.reverse)


# d out_k = w_k t_k + (1 - w_k) d out_{k-1}, w_k = exp(a_k - out_k), 1 - w_k = exp(out_{k-1} - out_k)
def logcumsumexp_jvp(t, out, s):
    keep = exp(sub(scan_shift(out, s.dim, s.reverse, float("-inf")), out))
    return linear_recurrence(mul(t[0], exp(sub(s.a, out))), keep, s.dim, s.reverse)


# d y_k = (tb_k + tc_k y_{k-1}) + c_k d y_{k-1}
def linear_recurrence_jvp(t, out, s):
    driven = plus(t[0], times(t[1], scan_shift(out, s.dim, s.reverse, 0)))
    return linear_recurrence(expand(driven, out.shape), s.c, s.dim, s.reverse)


# ---- linear algebra ----

def matmul_jvp(t, out, s):
    return plus(matmul(t[0], s.b) if t[0] is not None else None, matmul(s.a, t[1]) if t[1] is not None else None)


# ---- conversion and movement ----

def to_dtype_jvp(t, out, s):
    return to_dtype(t[0], out.dtype)


def clone_jvp(t, out, s):
    return clone(t[0])


def reshape_jvp(t, out, s):
    return reshape(t[0], tuple(out.shape))


def permute_jvp(t, out, s):
    return permute(t[0], s.dims)


def expand_jvp(t, out, s):
    return expand(t[0], tuple(out.shape))


def slice_jvp(t, out, s):
    length = out.shape[s.dim] if out.ndim else 1
    return slice(t[0], s.dim, s.start, s.start + (length - 1) * s.step + 1 if length else s.start, s.step)


def slice_scatter_jvp(t, out, s):
    return slice_scatter(t[0], tuple(out.shape), s.dim, s.start, s.step)


def cat_jvp(t, out, s):
    pieces = []
    for ti, size in zip(t, s.sizes):
        if ti is not None:
            pieces.append(to_dtype(ti, out.dtype))
            continue
        shape = list(out.shape)
        shape[s.dim] = size
        pieces.append(zeros_of(shape, out))
    return cat(pieces, s.dim)


def view_as_real_jvp(t, out, s):
    return view_as_real(t[0])


def view_as_complex_jvp(t, out, s):
    return view_as_complex(contiguous(t[0]))


# ---- indexing ----

def index_select_jvp(t, out, s):
    return index_select(t[0], s.dim, s.index)


def index_add_jvp(t, out, s):
    return index_add(t[0], s.dim, s.index, tuple(out.shape))


def gather_jvp(t, out, s):
    return gather(t[0], s.dim, s.index)


def scatter_add_jvp(t, out, s):
    return scatter_add(t[0], s.dim, s.index, tuple(out.shape))


def take_jvp(t, out, s):
    return take(t[0], s.positions)


def put_jvp(t, out, s):
    base = to_dtype(expand(t[0], tuple(out.shape)), out.dtype) if t[0] is not None else zeros_of(out.shape, out)
    return put(base, s.positions, to_dtype(t[1], out.dtype) if t[1] is not None else num(0, out))


def put_add_jvp(t, out, s):
    return put_add(t[0], s.positions, tuple(out.shape))


# ---- neural-net primitives ----

def softmax_jvp(t, out, s):
    return prim.softmax_backward(t[0], out, s.dim)


def softmax_backward_jvp(t, out, s):
    y, grad = s.out, s.grad
    dims = softmax_dims(y, s.dim)
    dy = None
    if t[1] is not None:
        dy = sub(mul(t[1], sub(grad, sum(mul(grad, y), dims, True))), mul(y, sum(mul(grad, t[1]), dims, True)))
    return plus(prim.softmax_backward(t[0], y, s.dim) if t[0] is not None else None, dy)


def log_softmax_jvp(t, out, s):
    return sub(t[0], sum(mul(t[0], exp(out)), softmax_dims(out, s.dim), True))


def log_softmax_backward_jvp(t, out, s):
    y = s.out
    dims = softmax_dims(y, s.dim)
    e = exp(y)
    dg = sub(t[0], mul(e, sum(t[0], dims, True))) if t[0] is not None else None
    return minus(dg, mul(mul(e, t[1]), sum(s.grad, dims, True)) if t[1] is not None else None)


def cross_entropy_jvp(t, out, s):
    d = prim.cross_entropy_backward(full(tuple(out.shape), 1.0, out.dtype), s.logits, s.target, s.reduction,
                                    s.ignore_index, s.label_smoothing)
    r = mul(d, t[0])
    return sum(r, (1,), False) if out.ndim else sum(r, (), False)


def cross_entropy_backward_jvp(t, out, s):
    logits = s.logits
    dg = None
    if t[0] is not None:
        dg = prim.cross_entropy_backward(t[0], logits, s.target, s.reduction, s.ignore_index, s.label_smoothing)
    if t[1] is None:
        return dg
    batched = logits.ndim == 2
    n, c = (logits.shape[0] if batched else 1), logits.shape[-1]
    q, keep, kept = cross_entropy_target(s.target, n, c, s.ignore_index, s.label_smoothing, logits._data.dtype)
    keep, kept = make_tensor(keep), float(max(kept, 1))
    p = softmax(logits if batched else reshape(logits, (1, c)), 1)
    tx = t[1] if batched else reshape(t[1], (1, c))
    grad = s.grad
    scale = reshape(grad, (n, 1)) if s.reduction == 0 else (div(grad, num(kept, grad)) if s.reduction == 1 else grad)
    dx = mul(mul(prim.softmax_backward(tx, p, 1), keep), scale)
    return plus(dg, dx if batched else reshape(dx, (c,)))


def unfold_jvp(t, out, s):
    return unfold(t[0], *s.window)


def fold_jvp(t, out, s):
    return fold(t[0], tuple(out.shape), *s.window)


def rnn_layer_jvp(t, out, s):
    return jvp_by_transposition((s.gi, s.h0, s.c0, s.w_hh, s.b_hh), t,
                                lambda x: [rnn_layer(x[0], x[1], x[2], x[3], x[4], s.mode, s.reverse)])[0]


def layer_norm_jvp(t, out, s):
    a = s.a
    dims = tuple(range(a.ndim - s.ndims, a.ndim))
    xc = sub(a, mean(a, dims, True))
    rstd = rsqrt(add(mean(mul(xc, xc), dims, True), num(s.eps, a)))
    xhat = mul(xc, rstd)
    dxhat = None
    if t[0] is not None:
        dxc = sub(t[0], mean(t[0], dims, True))
        dxhat = mul(rstd, sub(dxc, mul(xhat, mean(mul(xhat, dxc), dims, True))))
        if s.weight is not None:
            dxhat = mul(dxhat, s.weight)
    return plus(plus(dxhat, mul(xhat, t[1]) if t[1] is not None else None), t[2])


def layer_norm_backward_jvp(t, outs, s):
    return jvp_by_transposition((s.grad, s.a, s.weight), t,
                                lambda x: layer_norm_backward_definition(x[0], x[1], x[2], s.ndims, s.eps))


def rnn_layer_backward_jvp(t, outs, s):
    return jvp_by_transposition((s.grad, s.gi, s.h0, s.c0, s.w_hh, s.b_hh, s.out), t[:7],
                                lambda x: rnn_layer_backward_definition(x[0], x[1], x[2], x[3], x[4], x[5], x[6],
                                                                        s.mode, s.reverse))


def attention_jvp(t, out, s):
    return jvp_by_transposition((s.q, s.k, s.v), t,
                                lambda x: [attention(x[0], x[1], x[2], s.mask, s.is_causal, s.scale, s.dropout_p,
                                                     s.seed)])[0]


def attention_backward_jvp(t, outs, s):
    return jvp_by_transposition((s.grad, s.q, s.k, s.v), t,
                                lambda x: attention_backward_definition(x[0], x[1], x[2], x[3], s.mask, s.is_causal,
                                                                        s.scale, s.dropout_p, s.seed))


# ---- the table: one formula per primitive (the twin of kTangentFormulas' static_assert) ----
def tangent_from_backward(backward):
    """Note [Tangents from backward formulas] in csrc/dyngrad/derivatives.cpp: a plain unary op's tangent is its
    backward formula applied to the tangent (conjugated around it for a complex tangent)."""
    def jvp(t, out, s):
        if t[0].dtype.is_complex:
            return conj(backward(conj(t[0]), s)[0])
        return backward(t[0], s)[0]
    jvp.__name__ = jvp.__qualname__ = backward.__name__.replace("_backward", "_jvp")
    return jvp


# the plain unary primitives (kernel ops of signature unary or unary_float), whose tangent defaults to the above
PLAIN_UNARY = frozenset(row[0] for row in prim.PRIMITIVES if row[5] is not None and row[3] in ("unary", "unary_float"))
FORMULAS = {name: globals()[name + "_jvp"] if name + "_jvp" in globals() or name not in PLAIN_UNARY
            else tangent_from_backward(getattr(derivatives, name + "_backward")) for name in OP_NAMES}
forward_ad.FORMULAS.update(FORMULAS)
forward_ad.FORMULAS["_expand"] = expand
forward_ad.FORMULAS["_to_dtype"] = to_dtype
